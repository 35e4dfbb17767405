"""What only the Redis store has (the contract itself runs on Redis and on a 3-master Redis
Cluster in tests/test_store.py, and on every backend in the other store tests): the same
verdicts and export as SQLite on real pages in sequential order, an acknowledged add that
survives a kill -9 of the server (AOF ``always``), a writer killed inside its transaction
that leaves nothing half-written and blocks nobody past its lease, the spec kept in the
engine, and bad targets and damaged keys named in one line."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import json
import multiprocessing as mp
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redisserver
from checks import present
from click.testing import CliRunner

import neardup
from neardup import ConfigError, Detector, SpecMismatchError, StoreError
from neardup.cli import main
from neardup.store.redis import RedisStore

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


def _sample() -> list[tuple[str, bytes]]:
    with open(SAMPLE / "urls.tsv", encoding="utf-8") as fh:
        return [(row["url"], gzip.decompress((SAMPLE / row["file"]).read_bytes()))
                for row in csv.DictReader(fh, delimiter="\t")]


def _corpus_pages(corpus: Path, limit: int) -> list[tuple[str, bytes]]:
    root = corpus / "scrapinghub-aeb"
    with open(root / "manifest.tsv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))[:limit]
    return [(r["url"], gzip.decompress((root / r["file"]).read_bytes())) for r in rows]


def _verdicts(target: str, pages: list[tuple[str, bytes]]) -> list[tuple]:
    with Detector.open(target) as det:
        got = [det.add(url, html, fetched_at=1.7e9 + i) for i, (url, html) in enumerate(pages)]
        return [(v.url, v.status, v.match_url, v.distance, v.page_id, v.cluster_id, v.canonical_url) for v in got]


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_target(request) -> str:
    return str(request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url"))


def test_corpus_in_sequential_order_gives_sqlites_verdicts_and_export(redis_target, corpus, tmp_path):
    pages = _corpus_pages(corpus, 120) + _sample()
    pages += [(f"https://mirror.example/{i}", html) for i, (_, html) in enumerate(pages[:40])]  # exact copies
    assert _verdicts(redis_target, pages) == _verdicts(str(tmp_path / "ref.db"), pages)
    refetch = pages[:30] + [(url, html + b"<p>changed since the last fetch, a whole new paragraph</p>")
                            for url, html in pages[30:45]]
    assert _verdicts(redis_target, refetch) == _verdicts(str(tmp_path / "ref.db"), refetch)  # the second crawl
    with Detector.open(redis_target) as det, Detector.open(tmp_path / "ref.db") as ref:
        assert det.stats() == ref.stats() and det.stats()["fetches"] == len(pages) + len(refetch)
        due = ref.due(2e9, limit=100_000)
        assert det.due(2e9, limit=100_000) == due and len(due) > 50  # the URLs a recrawl seeds, in URL order
        assert det.due(2e9, limit=7, after=due[10]) == due[11:18]
    runner = CliRunner()
    for target, out in ((redis_target, tmp_path / "r.jsonl"), (str(tmp_path / "ref.db"), tmp_path / "s.jsonl")):
        done = runner.invoke(main, ["export", "--db", target, "--out", str(out)])
        assert done.exit_code == 0, done.output
    assert (tmp_path / "r.jsonl").read_text() == (tmp_path / "s.jsonl").read_text()
    statuses = {json.loads(line)["status"] for line in (tmp_path / "r.jsonl").read_text().splitlines()}
    assert {"new", "exact"} <= statuses


def test_an_acknowledged_add_survives_a_kill_9_of_the_server(tmp_path):
    """AOF with ``appendfsync always``: whatever add() returned is on disk when the server dies."""
    if not redisserver.installed():
        pytest.skip("redis-server not installed")
    base = tempfile.mkdtemp(prefix="neardup-redis-kill-")
    (port,) = redisserver._free_ports(1)
    proc = redisserver.start_node(base, port)
    url = f"redis://127.0.0.1:{port}/0"
    acknowledged = []
    try:
        with Detector.open(url) as det:
            for i, (u, html) in enumerate(_sample()):
                acknowledged.append(det.add(f"{u}?copy={i}", html).url)
        proc.kill()  # SIGKILL: no shutdown, no final fsync
        proc.wait(30)
        proc = redisserver.start_node(base, port)
        with Detector.open(url) as det:
            assert det.stats()["pages"] == len(acknowledged)
            for u in acknowledged:
                assert det.history(u) is not None
            url0, html0 = _sample()[0]
            assert det.check("https://elsewhere.example/", html0).status == "exact"
    finally:
        proc.kill()
        proc.wait(30)


def _die_inside_a_transaction(target: str, ready) -> None:
    det = Detector.open(target)
    with det.store.transaction():
        det.add("https://dead.example/1", " ".join(f"dead{i}" for i in range(300)))
        ready.set()
        time.sleep(0.5)
        os._exit(9)  # as a kill -9 would: no rollback, no lease release


def test_a_writer_killed_in_its_transaction_leaves_nothing_and_blocks_nobody_past_its_lease(redis_url):
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_die_inside_a_transaction, args=(redis_url, ready))
    proc.start()
    assert ready.wait(120)
    proc.join(60)
    assert proc.exitcode == 9
    started = time.monotonic()
    with Detector.open(f"{redis_url}&lease=2") as det:  # ours is 2 s; the dead writer's was 10 s
        v = det.add("https://alive.example/1", " ".join(f"alive{i}" for i in range(300)))
        waited = time.monotonic() - started
        assert v.status == "new" and det.history("https://dead.example/1") is None
        assert det.stats()["pages"] == 1
    assert waited < 30


def test_the_spec_lives_in_the_engine(redis_url):
    url, html = _sample()[0]
    shingles = neardup.FingerprintConfig(features=neardup.FeatureConfig(scheme="shingles", ngram=3))
    with Detector.open(redis_url, config=shingles) as det:
        det.add(url, html)
    with pytest.raises(SpecMismatchError, match="spec"):
        Detector.open(redis_url, config=neardup.DEFAULT_CONFIG)
    with Detector.open(redis_url) as det:  # config=None: the engine's own
        assert det.config == shingles and det.check("https://x.example/", html).status == "exact"


def test_bad_targets_are_one_line_errors(redis_server):
    with pytest.raises(StoreError, match="cannot connect to Redis") as exc:
        RedisStore("redis://nobody:secret@127.0.0.1:1/0", timeout=2)
    assert "\n" not in str(exc.value) and "secret" not in str(exc.value)
    with pytest.raises(StoreError) as exc:  # Redis's usual form: a password without a user name
        RedisStore("redis://:secret@127.0.0.1:1/0", timeout=2)
    assert "secret" not in str(exc.value)
    with pytest.raises(ConfigError, match="prefix"):
        RedisStore(f"{redis_server}?prefix=a{{b}}")
    with pytest.raises(ConfigError, match="lease"):
        RedisStore(f"{redis_server}?lease=-1")
    done = CliRunner().invoke(main, ["stats", "--db", "redis://127.0.0.1:1/0"])
    assert done.exit_code != 0 and "Traceback" not in done.output and "cannot connect to Redis" in done.output


def test_damaged_keys_and_a_newer_layout_are_store_errors(redis_url):
    with Detector.open(redis_url) as det:
        v = det.add("https://a.example/1", " ".join(f"w{i}" for i in range(300)))
        store = det.store
        assert isinstance(store, RedisStore)
        store._r.set(store.prefix + f"page:{present(v.page_id)}", b"\xff not json")
        with pytest.raises(StoreError, match="damaged.*page"):
            det.page(present(v.page_id))
        store._r.hset(store.prefix + "meta", "redis_schema", "99")
    with pytest.raises(StoreError, match="newer"):
        RedisStore(redis_url)


def test_stores_on_one_engine_are_kept_apart_by_their_prefix(redis_server):
    a, b = redisserver.with_prefix(redis_server), redisserver.with_prefix(redis_server)
    text = " ".join(f"t{i}" for i in range(300))
    with Detector.open(a) as det:
        det.add("https://a.example/", text)
    with Detector.open(b) as det:
        assert det.check("https://b.example/", text).status == "new" and det.stats()["pages"] == 0
    store = RedisStore(a)
    assert store.drop() > 0 and store.page_count() == 0
    store.close()


def test_the_cli_runs_dedup_twice_on_a_redis_cluster(redis_cluster_url, tmp_path):
    runner = CliRunner()
    first = runner.invoke(main, ["dedup", str(SAMPLE), "--db", redis_cluster_url])
    second = runner.invoke(main, ["dedup", str(SAMPLE), "--db", redis_cluster_url])
    reference = runner.invoke(main, ["dedup", str(SAMPLE), "--db", str(tmp_path / "s.db")])
    reference_again = runner.invoke(main, ["dedup", str(SAMPLE), "--db", str(tmp_path / "s.db")])
    assert first.exit_code == second.exit_code == reference.exit_code == reference_again.exit_code == 0, first.output

    def summary(output: str) -> dict:
        data = json.loads([line for line in output.splitlines() if line.startswith("{")][-1])
        return {k: v for k, v in data.items() if k not in ("db", "jobs")}

    assert summary(first.output) == summary(reference.output)
    assert summary(second.output) == summary(reference_again.output)
    assert summary(second.output)["unchanged"] > summary(first.output)["unchanged"]


def test_redis_cli_sees_one_hash_tag_a_store(redis_cluster_url):
    """Every key of a store maps to one slot, so one node commits a transaction atomically."""
    with Detector.open(redis_cluster_url) as det:
        det.add("https://a.example/1", " ".join(f"w{i}" for i in range(300)))
        store = det.store
        assert isinstance(store, RedisStore)
        keys = [k.decode() for k in store._r.scan_iter(match=store.prefix + "*")]
        slots = {int(store._r.keyslot(k)) for k in keys}
        assert len(keys) > 5 and len(slots) == 1
    port = redis_cluster_url.split(":")[2].split("?")[0]
    info = subprocess.run(["redis-cli", "-p", port, "CLUSTER", "INFO"], capture_output=True, text=True).stdout
    assert "cluster_known_nodes:3" in info


def _synthetic(n: int, seed: int) -> list[neardup.Fingerprint]:
    """``n`` distinct fingerprints of the default spec (random SimHash values and sketches)."""
    rng = random.Random(seed)
    base = neardup.fingerprint(" ".join(f"expiry{i}" for i in range(80)))
    assert base.sketch is not None
    return [dataclasses.replace(base, simhash=rng.getrandbits(64), sketch=base.sketch[:4] + rng.randbytes(60),
                                digest=hashlib.sha256(b"%d-%d" % (seed, i)).hexdigest()) for i in range(n)]


def test_expiry_reads_each_expired_page_about_once_ties_included(redis_target, monkeypatch):
    """3,000 pages expired in one transaction, 2,600 of them fetched at the same second: all
    of them go, the recent ones stay, and the engine returns each expired page's entry of the
    fetch-time index about once (a read from the start of the index at every batch of 1,000
    returns the removed ones again: about 9,000 for these 3,000)."""
    fps = _synthetic(3200, seed=5)
    long_ago = time.time() - 30 * 86400
    at = [long_ago] * 2600 + [long_ago + i for i in range(1, 401)] + [None] * 200
    with Detector.open(redis_target) as det:
        det.add_fingerprints([(f"https://h{i % 7}.example/p{i}", fp, t, None)
                              for i, (fp, t) in enumerate(zip(fps, at, strict=True))])
        assert isinstance(det.store, RedisStore)
        client = det.store._r
        returned = []
        plain = client.zrangebyscore

        def counting(*args, **kwargs):
            got = plain(*args, **kwargs)
            if str(args[0]).endswith(":fetched"):
                returned.append(len(got))
            return got

        monkeypatch.setattr(client, "zrangebyscore", counting)
        assert det.expire(86400) == 3000
        monkeypatch.undo()
        assert sum(returned) <= 2 * 3000, returned
        assert det.store.page_count() == 200
        assert det.history("https://h0.example/p0") is None and det.history("https://h1.example/p2599") is None
        kept = det.check_fingerprint("https://other.example/x", fps[3100])
        assert kept.status == "exact" and kept.match_url == "https://h6.example/p3100"


def test_expired_batches_read_twice_without_removing_are_the_same(redis_url):
    """The read of expired pages goes on from its last batch only where that batch was
    removed: read twice without removing, it returns the same pages."""
    fps = _synthetic(30, seed=6)
    long_ago = time.time() - 30 * 86400
    with Detector.open(redis_url) as det:
        det.add_fingerprints([(f"https://a.example/{i}", fp, long_ago, None) for i, fp in enumerate(fps)])
        store = det.store
        with store.transaction():
            first = [int(r.id or 0) for r in store.expired_batch(time.time() - 86400, 10)]
            again = [int(r.id or 0) for r in store.expired_batch(time.time() - 86400, 10)]
            store.delete_pages(first)
            rest = [int(r.id or 0) for r in store.expired_batch(time.time() - 86400, 100)]
        assert first == again and len(first) == 10
        assert not set(first) & set(rest) and len(rest) == 20


def test_a_batch_of_adds_gives_sqlites_verdicts_and_pages(redis_target, tmp_path):
    """One transaction of adds that read one another's writes (a URL fetched twice in the
    batch, a content under a second URL, near copies of pages of the batch and of the store,
    a page expired and fetched again) ends as SQLite's: the same verdicts, page by page."""
    fps = _synthetic(60, seed=7)
    near = [dataclasses.replace(fp, simhash=fp.simhash ^ 0b1011, digest=hashlib.sha256(fp.digest.encode()).hexdigest())
            for fp in fps[:20]]
    t0 = 1.7e9
    stored = [(f"https://s.example/{i}", fp, t0 + i, None) for i, fp in enumerate(fps[:30])]
    batch = [(f"https://b.example/{i}", fp, t0 + 100 + i, None) for i, fp in enumerate(fps[30:])]
    batch += [(f"https://b.example/{i}", fps[30 + i], t0 + 200 + i, None) for i in range(5)]  # fetched again
    batch += [(f"https://c.example/{i}", fps[i], t0 + 300 + i, None) for i in range(5)]  # same content
    batch += [(f"https://n.example/{i}", fp, t0 + 400 + i, None) for i, fp in enumerate(near)]  # near copies
    batch += [(f"https://b.example/{i}", near[i], t0 + 500 + i, None) for i in range(3)]  # changed

    def run(target: str) -> list[tuple[object, ...]]:
        with Detector.open(target) as det:
            det.add_fingerprints(stored)
            got = det.add_fingerprints(batch)
            return [(v.url, v.status, v.match_url, v.distance, v.page_id is not None, v.canonical_url, v.version)
                    for v in got]

    assert run(redis_target) == run(str(tmp_path / "sqlite.db"))


def test_expiry_in_a_transaction_that_added_pages_of_the_same_second(redis_url):
    """Pages added in the expiring transaction itself, at the fetch time of stored ones, go
    with them: none is read in place of a stored page, none is left."""
    fps = _synthetic(2300, seed=8)
    long_ago = time.time() - 30 * 86400
    with Detector.open(redis_url) as det:
        det.add_fingerprints([(f"https://a.example/{i}", fp, long_ago, None) for i, fp in enumerate(fps[:1500])])
        with det.store.transaction():
            det.add_fingerprints([(f"https://b.example/{i}", fp, long_ago, None)
                                  for i, fp in enumerate(fps[1500:2200])])
            assert det.expire(86400) == 2200
        assert det.store.page_count() == 0
        det.add_fingerprint("https://c.example/x", fps[2200])
        assert det.check_fingerprint("https://d.example/x", fps[0]).status == "new"

"""neardup.batch.arrays: the batch job on columns gives the record path's answer, verdict for
verdict, pair for pair (the sample, corpus pages, synthetic fingerprint files with planted
near copies, exact copies, empty pages and a trap), and dedup --batch writes the same bytes."""

from __future__ import annotations

import hashlib
import io
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from test_batch import answer, corpus_pages, sample_list

from neardup.batch.dedup import dedup_batch, records_from_pages
from neardup.batch.files import write_fingerprints
from neardup.batch.graph import BatchRecord, empty_node_id, node_id
from neardup.cli.batch import write_records
from neardup.model import DEFAULT_K
from neardup.urls import host_of

pytest.importorskip("pyarrow")

from neardup.batch._kernels import blake2b63  # noqa: E402
from neardup.batch.arrays import FingerprintArrays, host_codes, node_ids, solve, to_result  # noqa: E402
from neardup.batch.files import read_fingerprint_arrays, write_verdicts  # noqa: E402

FIELDS = ("url", "digest", "simhash", "status", "cluster", "canonical", "match", "distance", "version")
POLICIES = (None, "shortest-url", "https,first-seen", "priority,shortest-url", "rel-canonical,shortest-url")


def same(records: list[BatchRecord], **kw) -> None:
    """The arrays engine and the record engine agree on everything dedup_batch returns."""
    a = dedup_batch(records, engine="arrays", **kw)
    b = dedup_batch(records, engine="records", **kw)
    assert answer(a) == answer(b)
    assert [(v.url, v.cluster) for v in a.verdicts] == [(v.url, v.cluster) for v in b.verdicts]
    assert a.pairs == b.pairs
    assert a.clusters == b.clusters and list(a.clusters) == list(b.clusters)
    assert list(a.summary().items()) == list(b.summary().items())


# -- the pieces ----------------------------------------------------------------------------

def test_blake2b63_is_hashlibs() -> None:
    rng = np.random.default_rng(3)
    msgs = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in [*range(0, 260), 1000, 4096]]
    offsets = np.cumsum([0] + [len(m) for m in msgs])
    got = blake2b63(offsets, np.frombuffer(b"".join(msgs), dtype=np.uint8))
    want = [int.from_bytes(hashlib.blake2b(m, digest_size=8).digest(), "big") & ((1 << 63) - 1) for m in msgs]
    assert got.tolist() == want


URLS = ["https://WWW.Example.com:8080/x", "http://a.example", "https://a.example?q=1", "https://a.example#f",
        "https://user:pw@B.example:443/p", "http://[::1]:80/x", "http://[2001:db8::1]/", "file:///tmp/x.html",
        "a.example/no-scheme", "", "  https://lead.example/", "https://tab\t.example/", "https://c.example\\x/y",
        "HTTPS://UPPER.EXAMPLE/", "https://bücher.example/ü", "https://xn--bcher-kva.example/", "mailto:a@b.example",
        "https://d.example:notaport/", "http://[broken/", "https://e.example/a\nb", "ftp://f.example/",
        "https://％.example/", "javascript:void(0)", "https://g.example./", "//h.example/x"]


def test_hosts_and_node_ids_equal_the_record_functions() -> None:
    records = [BatchRecord(u, f"d{i % 5}", i, empty=i % 7 == 3, title=None if i % 3 else f"T{i % 4}", length=10)
               for i, u in enumerate(URLS * 2)]
    fa = FingerprintArrays.from_records(records)
    codes, hosts = host_codes(fa.url)
    assert [hosts[c] for c in codes.tolist()] == [host_of(r.url) or None for r in records]
    want = [empty_node_id(r.url, r.digest) if r.empty else node_id(r.digest, r.host, r.title) for r in records]
    assert node_ids(fa, codes, hosts).tolist() == want


def test_threaded_self_join_gives_the_same_pairs() -> None:
    from neardup.index.joins import self_join

    rng = np.random.default_rng(1)
    values = rng.integers(0, 2**63, 80_000, dtype=np.uint64) * np.uint64(2)
    values[10:40] = values[0]
    one = self_join(values, 12)
    two = self_join(values, 12, threads=2)
    assert one[0].shape[0] > 1000 and all(np.array_equal(x, y) for x, y in zip(one, two))


# -- the whole job -------------------------------------------------------------------------

def test_equal_on_the_sample(sample_pages) -> None:
    from neardup.fingerprint.core import fingerprint

    pages = sample_list(sample_pages)
    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url), first_seen=float(i % 3),
                              priority=None if i % 4 == 0 else float(i % 5)) for i, p in enumerate(pages)]
    for policy in POLICIES:
        same(records, canonical=policy)
    same(records, bands=False)
    same(records, exact_k=False, k=3)


def test_equal_on_corpus_pages(corpus) -> None:
    records, errors = records_from_pages(corpus_pages(corpus, 300), jobs=2)
    rows = [r for r in records if r is not None]
    assert not errors and len(rows) == 300
    same(rows, canonical="shortest-url", jobs=2)
    same(rows, bands=False)
    same(rows, exact_k=False)


def synthetic(seed: int, n: int = 1500, trap: int = 400) -> list[BatchRecord]:
    """Fingerprints with everything the job treats specially: random pages; near copies
    (few SimHash bits and bins changed: found by the SimHash blocks, the bands or the
    self-join at k), on other hosts and on the same host with other titles and short texts
    (the guard); exact copies (one digest on several hosts, titles and lengths); empty pages
    (some twice); a trap of near copies under different titles sharing their band keys;
    rel=canonical links to members, equal fetch times, priorities."""
    rng = np.random.default_rng(seed)
    header = (400).to_bytes(4, "little")
    out: list[BatchRecord] = []

    def rec(i: int, url: str, digest: str, sim: int, bins: np.ndarray | None, **kw) -> BatchRecord:
        return BatchRecord(url, digest, sim, sketch=None if bins is None else header + bins.tobytes(),
                           first_seen=float(rng.integers(0, 3)), priority=None if i % 3 else float(rng.integers(0, 4)),
                           **kw)

    base = []
    for i in range(n):
        sim = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
        bins = rng.integers(0, 256, 60, dtype=np.uint8)
        base.append((sim, bins))
        host = f"h{i % 40}.example"
        out.append(rec(i, f"https://{host}/p{i}", f"b{i:06d}", sim, bins if i % 50 else None,
                       title=f"Title {i % 200}", length=int(rng.choice([300, 4000])),
                       canonical_link=f"https://h{(i + 1) % 40}.example/p{i + 1}" if i % 97 == 0 else None))
    for j in range(n // 5):  # near copies
        i = int(rng.integers(0, n))
        sim, bins = base[i]
        for _ in range(int(rng.choice([1, 3, 6, 10, 14]))):
            sim ^= 1 << int(rng.integers(0, 64))
        bins = bins.copy()
        redo = rng.choice(60, int(rng.choice([3, 10, 25, 40])), replace=False)
        bins[redo] = rng.integers(0, 256, redo.shape[0], dtype=np.uint8)
        host = f"h{i % 40}.example" if j % 3 == 0 else f"m{j % 30}.example"
        out.append(rec(j, f"https://{host}/c{j}", f"c{j:06d}", sim, bins, title=f"Title {(i + j % 2) % 200}",
                       length=int(rng.choice([300, 4000])),
                       canonical_link=f"https://h{i % 40}.example/p{i}" if j % 4 == 0 else None))
    for j in range(n // 10):  # exact copies: the same digest, SimHash, sketch and length
        src = out[int(rng.integers(0, n))]
        host = f"h{j % 40}.example" if j % 2 else f"x{j % 7}.example"
        out.append(BatchRecord(f"https://{host}/e{j}", src.digest, src.simhash, sketch=src.sketch,
                               title=src.title if j % 3 else f"Other {j}", length=src.length,
                               first_seen=src.first_seen, canonical_link=src.url if j % 5 == 0 else None))
    for j in range(30):  # empty pages, a few twice
        out.append(BatchRecord(f"https://h{j % 40}.example/empty{j % 20}", f"z{j % 25:06d}", j, empty=True))
    tb = rng.integers(0, 256, 60, dtype=np.uint8)
    for j in range(trap):  # the trap: bins 0..15 equal (every band key), the rest mostly equal
        bins = tb.copy()  # (2-5 of 44 redrawn: over the far threshold of one host's different titles)
        redo = 16 + rng.choice(44, int(rng.integers(2, 6)), replace=False)
        bins[redo] = rng.integers(0, 256, redo.shape[0], dtype=np.uint8)
        out.append(rec(j, f"https://trap.example/cal?d={j}", f"t{j:06d}", int(rng.integers(0, 2**63)), bins,
                       title=f"Day {j % 50}", length=4000 if j % 4 else 500))
    order = rng.permutation(len(out))
    return [out[i] for i in order.tolist()]


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_equal_on_synthetic_parquet(tmp_path, seed: int) -> None:
    from neardup.batch.files import read_fingerprints

    path = str(tmp_path / "fps.parquet")
    write_fingerprints(synthetic(seed), path, row_group=500)
    records = read_fingerprints(path)
    arrays = read_fingerprint_arrays([path])
    policy = POLICIES[seed % len(POLICIES)]
    first = dedup_batch(records, engine="records")
    assert {v.status for v in first.verdicts} == {"new", "exact", "near", "empty"}
    assert max(len(m) for m in first.clusters.values()) >= 50  # the trap
    assert any(d > 12 for _, _, d, _ in first.pairs) and any(d <= 3 for _, _, d, _ in first.pairs)
    settings: list[tuple[int, float | None, str | None, dict]] = [
        (12, 0.3, policy, {}), (12, 0.3, policy, {"max_bucket": 64}), (12, 0.3, None, {"exact_k": False}),
        (6, 0.3, None, {"bands": False}), (3, None, None, {})]
    for k, verify, canonical, kw in settings:
        want = dedup_batch(records, engine="records", k=k, verify=verify, canonical=canonical, **kw)
        got = to_result(solve(arrays, k=k, verify=verify, policy=canonical, jobs=2, **kw))
        assert answer(got) == answer(want) and got.pairs == want.pairs and got.clusters == want.clusters


def test_decisions_in_processes_give_the_same_pairs(monkeypatch) -> None:
    from neardup.batch import candidates as batch_candidates

    records = synthetic(4, n=800, trap=200)
    want = dedup_batch(records, engine="records")
    monkeypatch.setattr(batch_candidates, "_PARALLEL_DECISIONS", 1)
    got = dedup_batch(records, engine="arrays", jobs=2)
    assert answer(got) == answer(want) and got.pairs == want.pairs


# -- dedup --batch's output ----------------------------------------------------------------

def rows_as_before(result, fmt: str) -> bytes:
    """What dedup --batch writes from the record path (one verdict object at a time)."""
    stream = io.StringIO(newline="")
    write_records(result.verdicts, stream, fmt)
    return stream.getvalue().encode()


def test_cli_writes_the_same_bytes(tmp_path) -> None:
    import pyarrow.parquet as pq

    from neardup.cli.main import main

    records = synthetic(5, n=400, trap=100)
    odd = ['https://q.example/a,"b"', "https://é.example/ü\\x", "https://r.example/\x01", "https://s.example/a\nb"]
    records += [BatchRecord(u, f"odd{i}", 5 + i, title="t", length=10) for i, u in enumerate(odd)]
    path = str(tmp_path / "fps.parquet")
    write_fingerprints(records, path)
    want = dedup_batch(records, engine="records")
    for fmt in ("jsonl", "csv"):
        out = str(tmp_path / f"v.{fmt}")
        res = CliRunner().invoke(main, ["dedup", "--batch", path, "--out", out, "--jobs", "2"])
        assert res.exit_code == 0, res.output
        with open(out, "rb") as fh:
            assert fh.read() == rows_as_before(want, fmt)
        summary = json.loads(res.output.strip().splitlines()[-1])
        assert list(summary.items())[:len(want.summary())] == list(want.summary().items())
    res = CliRunner().invoke(main, ["dedup", "--batch", path, "--out", str(tmp_path / "v.parquet")])
    assert res.exit_code == 0, res.output
    table = pq.read_table(str(tmp_path / "v.parquet")).to_pylist()
    assert table == [{f: f"{v.simhash:016x}" if f == "simhash" else getattr(v, f) for f in FIELDS}
                     for v in want.verdicts]
    buf = io.BytesIO()
    arrays = read_fingerprint_arrays([path])
    assert write_verdicts(solve(arrays, k=DEFAULT_K, verify=0.3), buf, "jsonl") == len(records)
    assert buf.getvalue() == rows_as_before(want, "jsonl")
    assert os.path.getsize(path) > 0


def test_edge_inputs_equal_the_record_path() -> None:
    from neardup.errors import InputError

    cases = [
        [], [BatchRecord("https://a.example/", "d", 1)],
        [BatchRecord("https://a.example/", "d", 1, empty=True)] * 3,  # one empty node, three pages
        [BatchRecord("https://a.example/\ud800", "d", 1), BatchRecord("https://b.example/", "d", 1)],  # not UTF-8
        [BatchRecord("https://a.example/", "d", 1, sketch=b"abcdef", length=5),  # sketches of another width
         BatchRecord("https://b.example/", "e", 3, sketch=b"abcdeg", length=5)],
        [BatchRecord("https://a.example/", "d", 1, first_seen=float("nan")),  # NaN: Python's order decides
         BatchRecord("https://b.example/", "d", 1, priority=float("nan"))]]
    for records in cases:
        for policy in ("priority", None):
            same(records, canonical=policy)
    bad = [BatchRecord("https://a.example/", "d", 1, sketch=b"abc", length=5),
           BatchRecord("https://b.example/", "e", 3, sketch=b"abd", length=5)]
    for engine in ("arrays", "records"):
        with pytest.raises(InputError):
            dedup_batch(bad, engine=engine)

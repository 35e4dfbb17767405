"""neardup.batch.spark.job in a real Spark session (local[2]): the job's clusters and canonicals equal
neardup.batch.dedup.dedup_batch's on the same pages.

Skipped when PySpark or a Java runtime is missing, except under NEARDUP_REQUIRE_SPARK=1 (set
by .ci/run, which installs Java), where that is a failure."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from checks import require_spark

from neardup.batch.dedup import dedup_batch
from neardup.batch.graph import BatchRecord, UnionFind
from neardup.fingerprint.core import fingerprint
from neardup.index.layout import Layout, candidate_layouts
from neardup.ingest.inputs import read_input
from neardup.model import Page

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch import corpus_pages, edited_pairs, trap_records  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    require_spark()
    from neardup.batch.spark.job import session

    s = session("local[2]", partitions=2, app="neardup-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def spark_answer(rows) -> list[tuple]:
    return sorted((r.url, r.digest, r.status, r.cluster, r.canonical, r.match, r.distance) for r in rows)


def batch_answer(result) -> list[tuple]:
    return sorted((v.url, v.digest, v.status, v.cluster, v.canonical, v.match, v.distance) for v in result.verdicts)


def write_warc(path: Path, pages: list[Page]) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i, p in enumerate(pages):
            body = p.content if isinstance(p.content, bytes) else p.content.encode()
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            rec = writer.create_warc_record(p.url, "response", payload=io.BytesIO(body), http_headers=http,
                                            warc_headers_dict={"WARC-Date": f"2020-01-{1 + i % 28:02d}T00:00:00Z"})
            writer.write_record(rec)


# -- without a session ------------------------------------------------------------------------

def test_first_table_finds_every_pair_within_k_once() -> None:
    pytest.importorskip("pandas")
    from neardup.batch.spark.blocks import choose_spark_layout, first_table, lead_keys, probe_masks

    rng = np.random.default_rng(5)
    for layout in [choose_spark_layout(10**4, 12), choose_spark_layout(10**7, 7), Layout.multi_index(12, 6),
                   *candidate_layouts(3)[:3]]:
        a = rng.integers(0, 2**63, 500, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, 500, dtype=np.uint64)
        flips = np.zeros(500, dtype=np.uint64)
        for i in range(500):
            for b in rng.choice(64, int(rng.integers(0, layout.k + 1)), replace=False):
                flips[i] |= np.uint64(1) << np.uint64(b)
        b = a ^ flips
        t = first_table(layout, a, b)
        assert (t >= 0).all(), layout.describe()
        ka, kb = lead_keys(layout, a), lead_keys(layout, b)
        for i in range(20):  # the probing side reaches the stored key in that table
            masks = probe_masks(layout.lead_bits(int(t[i])), layout.radii[int(t[i])])
            assert int(kb[i, t[i]]) in {int(x) for x in ka[i, t[i]] ^ masks}


def test_choose_spark_layout_prefers_few_rows_and_few_pairs() -> None:
    pytest.importorskip("pandas")
    from neardup.batch.spark.blocks import MAX_SPARK_PROBES, choose_spark_layout, spark_cost
    from neardup.index.layout import probes

    for n, k in ((100, 12), (10**6, 12), (10**7, 3)):
        best = choose_spark_layout(n, k)
        assert all(probes(best.lead_bits(t), r) <= MAX_SPARK_PROBES for t, r in enumerate(best.radii))
        fit = [c for c in candidate_layouts(k)
               if all(probes(c.lead_bits(t), r) <= MAX_SPARK_PROBES for t, r in enumerate(c.radii))]
        assert spark_cost(best, n) <= min(spark_cost(c, n) for c in fit)


@pytest.mark.parametrize("chunk", [None, 7])
def test_packed_blocks_give_the_batch_jobs_candidate_pairs(chunk: int | None, monkeypatch) -> None:
    """The packed blocking rows, unpacked and scanned by the compiled loop, give exactly the
    pairs of neardup.batch.blocks.candidate_pairs (bucket_pairs, windowed giant blocks, nibble and
    SimHash filters) on groups with planted near copies and a giant block; also when the
    pairs come in chunks of 7 (a block resumed at the row where a chunk filled)."""
    from neardup.batch.blocks import PIGEON_K, block_rows, candidate_pairs
    from neardup.batch.spark import blocks as spark_blocks
    from neardup.batch.spark.blocks import pack, pairs_of_blocks, unpack
    from neardup.index.bands import nibble_threshold, nibbles_of

    if chunk is not None:
        monkeypatch.setattr(spark_blocks, "CHUNK_PAIRS", chunk)

    rng = np.random.default_rng(3)
    n = 3000
    sims = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2)
    bins = rng.integers(0, 4, (n, 60), dtype=np.uint8)  # few values: crowded blocks, many pairs pass
    bins[:400, :16] = 7  # one giant block in every band (windowed at max_bucket 100)
    sims[1000:1100] = sims[:100] ^ np.uint64(0b1011)  # SimHash copies within 3 bits
    ok = np.ones(n, dtype=bool)
    nodes = rng.permutation(np.arange(1, n + 1, dtype=np.int64) * 7919)
    k, verify, max_bucket, window = 12, 0.3, 100, 4
    ia, ib = candidate_pairs(sims, bins, ok, nodes, k, verify, True, max_bucket, window)
    expected = {(min(nodes[i], nodes[j]), max(nodes[i], nodes[j])) for i, j in zip(ia.tolist(), ib.tolist())}
    owner, keys = block_rows(sims, bins, ok, k, True)
    band = keys < 0
    nib = nibbles_of(bins)[owner]
    half = owner.shape[0] // 2  # two map tasks' values for one reducer
    parts = [unpack(pack(keys[s][band[s]], nodes[owner][s][band[s]], nib[s][band[s]], keys[s][~band[s]],
                         nodes[owner][s][~band[s]], sims[owner][s][~band[s]]))
             for s in (slice(0, half), slice(half, None))]
    cols = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    got: set[tuple[int, int]] = set()
    for keys_, nodes_, is_band, thr in ((cols[0], cols[1], True, nibble_threshold(verify)),
                                               (cols[3], cols[4], False, 0)):
        for a, b in pairs_of_blocks(keys_, nodes_, is_band, cols[2], cols[5], thr, min(k, PIGEON_K), max_bucket,
                                    window):
            got.update(zip(a.tolist(), b.tolist()))
    assert len(expected) > 1000 and got == expected


# -- in Spark ----------------------------------------------------------------------------------

def test_connected_components_match_union_find(spark) -> None:
    from neardup.batch.spark.job import connected_components

    rng = random.Random(11)
    nodes = list(range(1, 300))
    edges = [(i, i + 1) for i in range(1, 40)]  # a long chain: several rounds
    edges += [(rng.choice(nodes), rng.choice(nodes)) for _ in range(120)]
    uf = UnionFind()
    for n in nodes:
        uf.add(n)
    for a, b in edges:
        uf.union(a, b)
    e = spark.createDataFrame(edges, "src long, dst long")
    nodes_df = spark.createDataFrame([(n,) for n in nodes], "node long")
    got = {r.node: r.label for r in connected_components(e, nodes_df).collect()}
    assert got == {n: uf.find(n) for n in nodes}


def test_sample_folder_equals_the_batch_job(spark, tmp_path) -> None:
    from neardup.batch.spark.job import dedup, fingerprints

    sample = Path(__file__).resolve().parents[1] / "examples" / "sample"
    fps = fingerprints(spark, [str(sample)]).persist()
    rows = fps.collect()
    pages = [it.page for it in read_input(sample) if it.page is not None]
    assert len(rows) == len(pages) == 26
    lib = [(p.url, fp.digest, fp.simhash, fp.sketch, fp.title, fp.length, fp.empty, fp.canonical_url)
           for p in pages for fp in [fingerprint(p.content, url=p.url, headers=p.headers)]]
    assert sorted((r.url, r.digest, r.simhash % (1 << 64), r.sketch, r.title, r.length, r.empty, r.canonical_link)
                  for r in rows) == sorted(lib)  # the same fingerprints as the library
    out = dedup(fps).collect()
    assert spark_answer(out) == batch_answer(dedup_batch(pages))
    # precomputed fingerprints (Parquet) and another policy give the batch answer too
    fps.write.parquet(str(tmp_path / "fps.parquet"))
    again = dedup(fingerprints(spark, [str(tmp_path / "fps.parquet")]), canonical="https,shortest-url").collect()
    assert spark_answer(again) == batch_answer(dedup_batch(pages, canonical="https,shortest-url"))


def test_shuffled_small_tables_give_the_same_answer(spark, monkeypatch) -> None:
    """With nothing broadcast (repeated digests, candidate sides, labels all shuffled, as
    past BROADCAST_ROWS), the sample folder (exact copies, near copies, empty pages) and the
    planted trap still give the batch job's answer."""
    import neardup.batch.spark.job as spark_mod

    monkeypatch.setattr(spark_mod, "BROADCAST_ROWS", -1)
    monkeypatch.setattr(spark_mod, "SIDE_BROADCAST_ROWS", -1)
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # nor by Spark's own size estimate
    try:
        _sample_and_trap(spark, spark_mod)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)


def _sample_and_trap(spark, spark_mod) -> None:
    sample = Path(__file__).resolve().parents[1] / "examples" / "sample"
    pages = [it.page for it in read_input(sample) if it.page is not None]
    out = spark_mod.dedup(spark_mod.fingerprints(spark, [str(sample)])).collect()
    assert spark_answer(out) == batch_answer(dedup_batch(pages))
    records = trap_records(600)
    got = spark_mod.dedup(records_frame(spark, records), max_bucket=100).collect()
    assert spark_answer(got) == batch_answer(dedup_batch(records, max_bucket=100, exact_k=False))


def test_warc_and_jsonl_corpus_pages_equal_the_batch_job(spark, corpus, tmp_path) -> None:
    from neardup.batch.spark.job import dedup, fingerprints

    pages = corpus_pages(corpus, 200)
    write_warc(tmp_path / "crawl.warc.gz", pages[:120])
    with open(tmp_path / "more.jsonl", "w", encoding="utf-8") as fh:
        for p in pages[120:]:
            html = p.content.decode("utf-8", "replace") if isinstance(p.content, bytes) else p.content
            fh.write(json.dumps({"url": p.url, "html": html, "fetched_at": 1.6e9}) + "\n")
    inputs = [str(tmp_path / "crawl.warc.gz"), str(tmp_path / "more.jsonl")]
    read = [it.page for path in inputs for it in read_input(path) if it.page is not None]
    assert len(read) == 200 and read[0].fetched_at is not None
    expected = dedup_batch(read, jobs=2)
    assert sum(len(m) > 1 for m in expected.clusters.values()) >= 20
    fps = fingerprints(spark, inputs).persist()
    # by default SimHash blocks reach k = 3 only (bands beyond): the batch job's answer without its
    # exact self-join at k (a pair at distance 4..k sharing no band would be missed: the hybrid
    # extractor's texts of these pages leave none, the accurate extractor's one, at distance 10)
    fast = spark_answer(dedup(fps).collect())
    assert fast == batch_answer(dedup_batch(read, exact_k=False))
    out = dedup(fps, exact_k=True, layout=Layout.multi_index(12, 6)).collect()  # + probes to k = 12
    assert spark_answer(out) == batch_answer(expected)
    plain = dedup(fps, bands=False, exact_k=True).collect()
    assert spark_answer(plain) == batch_answer(dedup_batch(read, bands=False))


def test_minhash_method_equals_the_batch_job(spark, sample_pages) -> None:
    from neardup.batch.spark.job import dedup
    from neardup.fingerprint.core import FingerprintConfig
    from neardup.fingerprint.minhash import MinHashConfig

    config = FingerprintConfig(minhash=MinHashConfig())
    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url, config=config)) for p in sample_pages.values()]
    pdf_rows = [dict(url=r.url, digest=r.digest, simhash=r.simhash - (1 << 64) if r.simhash >= 1 << 63 else r.simhash,
                     empty=r.empty, sketch=r.sketch, title=r.title, length=r.length, canonical_link=r.canonical_link,
                     first_seen=r.first_seen, priority=r.priority, signature=r.signature) for r in records]
    from neardup.batch.spark.job import _complete_fps, _frame

    frame = next(_complete_fps(iter([_frame(pdf_rows)])))
    from neardup.batch.spark.job import FP_SCHEMA

    fps = spark.createDataFrame(frame, FP_SCHEMA)
    out = dedup(fps, method="minhash", threshold=0.5, config=config).collect()
    expected = dedup_batch(records, method="minhash", threshold=0.5)
    assert spark_answer(out) == batch_answer(expected)


def test_command_line_writes_parquet(spark, tmp_path) -> None:
    import pandas as pd

    sample = Path(__file__).resolve().parents[1] / "examples" / "sample"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-m", "neardup.batch.spark", str(sample), "--out", str(tmp_path / "out"),
                           "--master", "local[1]", "--partitions", "2"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pages 26:" in proc.stdout
    df = pd.read_parquet(tmp_path / "out")
    assert set(df.columns) == {"url", "digest", "simhash", "status", "cluster", "canonical", "match", "distance",
                               "fetched_at", "version"}
    assert len(df) == 26 and df["cluster"].nunique() == 14


def records_frame(spark, records):
    from neardup.batch.spark.job import FP_SCHEMA, _complete_fps, _frame

    rows = [dict(url=r.url, digest=r.digest, simhash=r.simhash - (1 << 64) if r.simhash >= 1 << 63 else r.simhash,
                 empty=r.empty, sketch=r.sketch, title=r.title, length=r.length, canonical_link=r.canonical_link,
                 first_seen=r.first_seen, priority=r.priority, signature=r.signature) for r in records]
    return spark.createDataFrame(next(_complete_fps(iter([_frame(rows)]))), FP_SCHEMA)


def test_band_candidates_beyond_k_equal_the_batch_job(spark) -> None:
    from neardup.batch.spark.job import dedup

    pages = edited_pairs(30)
    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url)) for p in pages]
    expected = dedup_batch(records)
    assert sum(d > 12 for _, _, d, _ in expected.pairs) >= 15
    fps = records_frame(spark, records)
    assert spark_answer(dedup(fps).collect()) == batch_answer(dedup_batch(records, exact_k=False))
    assert spark_answer(dedup(fps, exact_k=True).collect()) == batch_answer(expected)
    plain = dedup(fps, bands=False, exact_k=True).collect()
    assert spark_answer(plain) == batch_answer(dedup_batch(records, bands=False))


def test_giant_block_split_equals_the_batch_job(spark) -> None:
    from neardup.batch.spark.job import dedup

    records = trap_records(1500)
    expected = dedup_batch(records, max_bucket=100)
    assert answer_clusters(expected) == answer_clusters(dedup_batch(records, max_bucket=10**6))
    out = dedup(records_frame(spark, records), max_bucket=100).collect()
    assert spark_answer(out) == batch_answer(expected)


def answer_clusters(result) -> list[tuple]:
    return sorted((v.url, v.cluster, v.canonical) for v in result.verdicts)


def test_fingerprint_parquet_of_the_batch_job_reads_in_spark(spark, sample_pages, tmp_path) -> None:
    from neardup.batch.files import read_fingerprints, write_fingerprints
    from neardup.batch.spark.job import dedup, fingerprints

    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url), first_seen=1.6e9 + i)
               for i, p in enumerate(sample_pages.values())]
    path = str(tmp_path / "fps.parquet")
    write_fingerprints(records, path)
    out = dedup(fingerprints(spark, [path])).collect()
    assert spark_answer(out) == batch_answer(dedup_batch(read_fingerprints(path))) == batch_answer(dedup_batch(records))


def test_spark_dedup_command_reads_fingerprint_parquet(spark, sample_pages, tmp_path) -> None:
    import pandas as pd
    from click.testing import CliRunner

    from neardup.batch.files import is_fingerprint_file, write_fingerprints
    from neardup.cli.batch import spark_dedup_cmd

    records = [BatchRecord.of(p.url, fingerprint(p.content, url=p.url)) for p in sample_pages.values()]
    path = str(tmp_path / "fps.parquet")
    write_fingerprints(records, path)
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "a.html").write_text("<html><body><p>x</p></body></html>")
    assert is_fingerprint_file(path) and not is_fingerprint_file(str(tmp_path / "pages"))
    res = CliRunner().invoke(spark_dedup_cmd, [path, "--out", str(tmp_path / "out"), "--master", "local[2]"])
    assert res.exit_code == 0, res.output
    assert f"pages {len(records)}:" in res.output
    df = pd.read_parquet(tmp_path / "out")
    got = sorted(zip(df["url"], df["cluster"], df["canonical"], df["status"]))
    assert got == sorted((v.url, v.cluster, v.canonical, v.status) for v in dedup_batch(records).verdicts)


def version_rows(rows) -> list[str]:
    """Every row with its version (sorted by repr: captures of one URL tie up to ``version``)."""
    return sorted(repr((r.url, r.digest, int(r.simhash, 16) if isinstance(r.simhash, str) else r.simhash, r.status,
                        r.cluster, r.canonical, r.match, r.distance, r.version)) for r in rows)


def test_recaptures_are_versions_as_in_the_batch_job(spark, corpus) -> None:
    from test_batch_versions import check_rule, recaptures, synthetic_captures

    from neardup.batch.dedup import records_from_pages
    from neardup.batch.graph import url_group_key
    from neardup.batch.spark.job import dedup

    got, _ = records_from_pages(recaptures(corpus, 120), jobs=2)
    records = [r for r in got if r is not None]
    expected = dedup_batch(records, exact_k=False)
    check_rule(records, expected)
    assert expected.summary()["refetched"] == 24
    fps = records_frame(spark, records).persist()
    out = dedup(fps).collect()
    assert version_rows(out) == version_rows(expected.verdicts)
    # a second crawl of the same pages (URLs captured once, given twice with the same content)
    keys = [url_group_key(r.url) for r in records]
    once = [r for r, key in zip(records, keys) if keys.count(key) == 1]
    later = [BatchRecord(r.url, r.digest, r.simhash, r.empty, r.sketch, r.title, r.length, r.canonical_link,
                         2e9, r.priority) for r in once]
    first, twice = dedup_batch(once, exact_k=False), dedup_batch(once + later, exact_k=False)
    assert [v.version for v in twice.verdicts] == [None] * len(once) + ["unchanged"] * len(once)
    assert [(v.status, v.cluster, v.canonical) for v in twice.verdicts] == \
        [(v.status, v.cluster, v.canonical) for v in first.verdicts] * 2
    out = dedup(records_frame(spark, once + later)).collect()
    assert version_rows(out) == version_rows(twice.verdicts)
    # tied times ordered by the captures' fields, URLs that do not normalise, empty captures
    synthetic = synthetic_captures(4, nan=False)
    for policy in (None, "priority,shortest-url"):
        want = dedup_batch(synthetic, canonical=policy, exact_k=False)
        assert want.summary()["refetched"] >= 40
        assert version_rows(dedup(records_frame(spark, synthetic), canonical=policy).collect()) == \
            version_rows(want.verdicts)


def test_revisits_are_captures_as_in_the_batch_job(spark, sample_pages, tmp_path) -> None:
    """A WARC of pages, their recaptures (one changed) and revisit records (of a page before and
    after its change, of a URL never captured): Spark's rows equal dedup_batch's."""
    from warcio.warcwriter import WARCWriter

    from neardup.batch.spark.job import dedup, fingerprints
    from neardup.batch.spark.submit import run

    pages = list(sample_pages.values())[:6]
    warc = tmp_path / "crawls.warc.gz"
    write_warc(warc, pages + [Page(pages[0].url, pages[1].content)])  # pages[0]'s URL changes on 2020-01-07
    with open(warc, "ab") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        for url, date in ((pages[0].url, "2020-01-03T00:00:00Z"), (pages[0].url, "2020-02-01T00:00:00Z"),
                          (pages[2].url, "2020-02-01T00:00:00Z"), ("https://never.example/x", "2020-02-01T00:00:00Z"),
                          (pages[3].url, "2019-01-01T00:00:00Z")):  # the last one before its original
            rec = w.create_revisit_record(url, digest="sha1:AAAA", refers_to_uri=url, refers_to_date=date)
            rec.rec_headers.replace_header("WARC-Date", date)
            w.write_record(rec)
        # revisits of another URL's payload: of pages[0] before its change (a new URL and pages[4]'s
        # URL, captured with other content), of a URL never captured
        for url, target in (("https://copy.example/y", pages[0].url), (pages[4].url, pages[0].url),
                            ("https://copy.example/z", "https://never.example/w")):
            rec = w.create_revisit_record(url, digest="sha1:AAAA", refers_to_uri=target,
                                          refers_to_date="2020-01-03T00:00:00Z")
            rec.rec_headers.replace_header("WARC-Date", "2020-03-01T00:00:00Z")
            w.write_record(rec)
    items = [p for it in read_input(warc) if (p := it.page or it.revisit) is not None]
    assert sum(p.revisit for p in items) == 8 and sum(p.refers_to is not None for p in items) == 3
    expected = dedup_batch(items, exact_k=False)
    assert len(expected.verdicts) == 7 + 3 + 2 and expected.summary()["refetched"] >= 5
    assert [v.version for v in expected.verdicts[7:10]] == ["unchanged"] * 3  # the revisits that have an original
    copy, changed = expected.verdicts[10:]
    assert (copy.url, copy.status, copy.match, copy.version) == ("https://copy.example/y", "exact", pages[0].url, None)
    assert (changed.url, changed.version) == (pages[4].url, "changed")  # pages[4]'s URL now holds pages[0]'s text
    assert version_rows(dedup(fingerprints(spark, [str(warc)])).collect()) == version_rows(expected.verdicts)
    line = run([str(warc)], str(tmp_path / "out"), master="local[2]", partitions=2)
    assert "pages 12:" in line and "revisits 5 (skipped 3 without their original)" in line and "errors 0" in line


def test_the_cdxj_sidecar_equals_the_batch_job_s(spark, sample_pages, tmp_path) -> None:
    """``spark-dedup --cdxj DIR``: its part files, concatenated in name order, are the bytes of
    ``dedup --batch --cdxj`` on the same WARC (pages, a session-id copy, a revisit; the lines
    of which join cdxj-indexer's index: tests/test_cdxj.py), and the output rows carry each
    capture's fetch time."""
    import pandas as pd
    from click.testing import CliRunner
    from test_cdxj import sample_bodies
    from test_cdxj import write_warc as write_archive

    from neardup.cli import main

    warc = tmp_path / "crawl.warc.gz"
    written = write_archive(warc, sample_bodies(sample_pages))
    r = CliRunner().invoke(main, ["dedup", str(warc), "--batch", "--no-exact-k", "--cdxj", str(tmp_path / "b.cdxj"),
                                  "--jobs", "1"])
    assert r.exit_code == 0, r.output
    expected = (tmp_path / "b.cdxj").read_text(encoding="utf-8")
    r = CliRunner().invoke(main, ["spark-dedup", str(warc), "--out", str(tmp_path / "out"), "--master", "local[2]",
                                  "--partitions", "3", "--cdxj", str(tmp_path / "side")])
    assert r.exit_code == 0, r.output
    parts = sorted((tmp_path / "side").glob("part-*"))
    got = "".join(p.read_text(encoding="utf-8") for p in parts)
    assert got == expected and len(got.splitlines()) == len(written) == 5
    times = pd.read_parquet(tmp_path / "out")["fetched_at"]
    assert sorted(times.tolist()) == sorted(pd.Timestamp(d).timestamp() for _, d in written)
    r = CliRunner().invoke(main, ["spark-dedup", str(warc), "--out", str(tmp_path / "o2"), "--method", "minhash",
                                  "--cdxj", str(tmp_path / "s2")])
    assert r.exit_code == 2 and "--cdxj" in r.output and not (tmp_path / "s2").exists()

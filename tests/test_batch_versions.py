"""Re-fetches in the batch job (neardup.batch.versions): the captures of one URL are versions
of it, as in the online Detector, on every path (both engines of dedup_batch, dedup --batch
on Parquet; Spark in test_spark.py)."""

from __future__ import annotations

import csv
import gzip
import json
import random
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_batch import sample_list

from neardup.batch.dedup import dedup_batch, records_from_pages
from neardup.batch.files import write_fingerprints
from neardup.batch.graph import BatchRecord, url_group_key
from neardup.batch.versions import capture_key, own_keys, split_records, versions
from neardup.detector.core import Detector
from neardup.errors import URLError
from neardup.model import Page
from neardup.urls import normalize_url

pytest.importorskip("pyarrow")

from neardup.batch.arrays import FingerprintArrays  # noqa: E402
from neardup.batch.versions import split_arrays, url_keys  # noqa: E402

ROW = ("url", "digest", "simhash", "status", "cluster", "canonical", "match", "distance", "version")


def recaptures(corpus: Path, n: int = 200) -> list[Page]:
    """The first ``n`` Postlight fixtures with their capture dates (first commit of the
    fixture) as fetch times: URLs captured two to five times across redesigns."""
    root = corpus / "postlight-fixtures"
    out = []
    with open(root / "manifest.tsv", encoding="utf-8", newline="") as fh:
        for row in list(csv.DictReader(fh, delimiter="\t"))[:n]:
            url = row["url_from_html"] or f"https://{row['fixture_domain']}/{row['file']}"
            when = datetime.strptime(row["first_commit_date"], "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
            out.append(Page(url, gzip.decompress((root / row["file"]).read_bytes()), fetched_at=when))
    return out


@pytest.fixture(scope="module")
def corpus_records(corpus) -> list[BatchRecord]:
    records, errors = records_from_pages(recaptures(corpus), jobs=2)
    assert not errors
    return [r for r in records if r is not None]


def rows(result) -> list[tuple]:
    return [tuple(getattr(v, f) for f in ROW) for v in result.verdicts]


def check_rule(records: list[BatchRecord], result) -> None:
    """No row names its own URL as its match; the captures of a URL share its decision."""
    assert len(result.verdicts) == len(records)
    decision: dict[str, tuple] = {}
    for r, v in zip(records, result.verdicts):
        assert (v.url, v.digest, v.simhash) == (r.url, r.digest, r.simhash)
        assert v.match is None or url_group_key(v.match) != url_group_key(v.url)
        assert url_group_key(v.canonical) != url_group_key(v.url) or v.status in ("new", "empty")
        assert decision.setdefault(url_group_key(r.url), (v.status, v.cluster, v.canonical, v.match, v.distance)) == \
            (v.status, v.cluster, v.canonical, v.match, v.distance)
    assert sorted(p for ps in result.clusters.values() for p in ps) == list(range(len(records)))


def test_recaptures_are_versions_of_their_url(corpus_records) -> None:
    records = corpus_records
    keys = [url_group_key(r.url) for r in records]
    assert len(set(keys)) == 200 - 38  # 33 URLs captured 2+ times: 71 captures
    res = dedup_batch(records, engine="records")
    check_rule(records, res)
    assert res.summary()["refetched"] == 38
    assert rows(dedup_batch(records, engine="arrays")) == rows(res)
    # as pages of their own (a query that keeps the URLs apart), recaptures match their own URL
    apart = [BatchRecord(f"{r.url}?capture={i}", r.digest, r.simhash, r.empty, r.sketch, r.title, r.length,
                         r.canonical_link, r.first_seen) for i, r in enumerate(records)]
    as_pages = dedup_batch(apart, engine="records")
    assert as_pages.summary()["refetched"] == 0
    own = sum(v.match is not None and v.match.split("?capture=")[0] == v.url.split("?capture=")[0]
              for v in as_pages.verdicts)
    assert own >= 10
    shuffled = list(range(len(records)))
    random.Random(5).shuffle(shuffled)
    again = dedup_batch([records[i] for i in shuffled])
    assert sorted(map(repr, rows(again))) == sorted(map(repr, rows(res)))


def test_versions_equal_the_detectors(corpus, corpus_records) -> None:
    pages = {(p.url, p.fetched_at): p for p in recaptures(corpus)}
    records = corpus_records
    order = sorted(range(len(records)), key=lambda i: (capture_key(records[i]), i))
    det = Detector()
    online: dict[int, str | None] = {}
    for i in order:  # the captures in time order
        r = records[i]
        online[i] = det.add(r.url, pages[(r.url, r.first_seen)].content, fetched_at=r.first_seen).version
    det.close()
    res = dedup_batch(records)
    assert [v.version for v in res.verdicts] == [online[i] for i in range(len(records))]
    assert {v.version for v in res.verdicts} == {None, "unchanged", "changed"}


def test_parquet_cli_gives_the_same_rows(corpus_records, tmp_path) -> None:
    from neardup.cli.main import main

    records = corpus_records
    path = str(tmp_path / "fps.parquet")
    write_fingerprints(records, path)
    want = dedup_batch(records, engine="records")
    out = str(tmp_path / "v.jsonl")
    res = CliRunner().invoke(main, ["dedup", "--batch", path, "--out", out, "--jobs", "2"])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in open(out, encoding="utf-8")]
    assert [tuple(g[f] for f in ROW) for g in got] == [
        tuple(f"{x:016x}" if f == "simhash" else x for f, x in zip(ROW, row)) for row in rows(want)]
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert summary["refetched"] == 38 and summary["pages"] == len(records)
    csv_out = str(tmp_path / "v.csv")
    assert CliRunner().invoke(main, ["dedup", "--batch", path, "--out", csv_out]).exit_code == 0
    with open(csv_out, encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [t["version"] or None for t in table] == [v.version for v in want.verdicts]


def test_a_second_crawl_of_the_same_pages(sample_pages) -> None:
    pages = list({p.url: p for p in sample_list(sample_pages)}.values())  # one capture a URL
    first = dedup_batch(pages)
    assert first.summary()["refetched"] == 0 and {v.status for v in first.verdicts} >= {"new", "near"}
    n = len(pages)
    recrawl = [Page(p.url, p.content, fetched_at=1e9) for p in pages] + \
        [Page(p.url, p.content, fetched_at=2e9) for p in pages]
    for engine in ("arrays", "records"):
        res = dedup_batch(recrawl, engine=engine)
        want = [(v.status, v.cluster, v.canonical, v.match, v.distance) for v in first.verdicts]
        assert [(v.status, v.cluster, v.canonical, v.match, v.distance) for v in res.verdicts] == want * 2
        assert [v.version for v in res.verdicts] == [None] * n + ["unchanged"] * n
        assert res.summary()["refetched"] == n
        check_rule([r for r in records_from_pages(recrawl)[0] if r is not None], res)


def test_urls_that_do_not_normalise_are_keyed_as_given() -> None:
    with pytest.raises(URLError):
        Detector().add("not a url", "<p>x</p>")  # the Detector refuses them
    recs = [BatchRecord("not a url", "d1", 1, first_seen=1.0), BatchRecord("not a url", "d2", 2, first_seen=2.0),
            BatchRecord("not a url ", "d1", 1, first_seen=3.0), BatchRecord("HTTP://A.example/x", "d1", 1),
            BatchRecord("http://a.example/x#top", "d1", 1, first_seen=5.0)]
    assert [url_group_key(r.url) for r in recs] == ["not a url", "not a url", "not a url ", "http://a.example/x",
                                              "http://a.example/x"]
    for engine in ("arrays", "records"):
        res = dedup_batch(recs, engine=engine)
        check_rule(recs, res)
        assert [v.version for v in res.verdicts] == [None, "changed", None, None, "unchanged"]
        # "not a url" is decided by its current version (d2, near); "not a url " is a URL of its own
        # (exact); http://a.example/x is canonical: its current version, with its earliest time (0)
        assert [v.status for v in res.verdicts] == ["near", "near", "exact", "new", "new"]
        assert {v.canonical for v in res.verdicts} == {"http://a.example/x#top"}


def test_clean_urls_are_their_own_key(corpus) -> None:
    import pyarrow as pa

    with open(corpus / "postlight-fixtures" / "manifest.tsv", encoding="utf-8", newline="") as fh:
        urls = [r["url_from_html"] for r in csv.DictReader(fh, delimiter="\t") if r["url_from_html"]]
    odd = ["https://a.example/./x", "https://a.example/a/../b", "https://a.example", "https://A.example/",
           "http://a.example:80/", "https://a.example/x?utm_source=y", "https://a.example/%7e", "https://a.example/ä",
           "https://a.example./x", "https://-a.example/x", "ftp://f.example/a//b", "file:///tmp/x", "not a url",
           "https://a.example/x#f", "https://user@a.example/", "https://a.example/a b", "https://xn--bcher-kva.example/"]
    rng = random.Random(2)
    variants = [u[:rng.randrange(8, len(u) + 1)] for u in urls for _ in range(3)]
    every = urls + odd + variants
    arr = pa.array(every, pa.large_string())
    clean = own_keys(arr).tolist()
    assert sum(clean) > len(every) // 3
    for u, c in zip(every, clean):
        if c:
            assert normalize_url(u) == u
    assert url_keys(arr).to_pylist() == [url_group_key(u) for u in every]


def synthetic_captures(seed: int, nan: bool = True) -> list[BatchRecord]:
    """URLs captured up to 4 times with tied (and NaN) times, empty captures, spellings, and
    URLs that do not normalise."""
    rng = random.Random(seed)
    odd = float("nan") if nan else 3.0
    out = []
    for u in range(60):
        for c in range(rng.choice([1, 1, 2, 3, 4])):
            spelling = rng.choice([f"https://h{u % 7}.example/p{u}", f"HTTPS://H{u % 7}.example/p{u}#c{c}",
                                   f"https://h{u % 7}.example/p{u}?utm_source=x", f"no url {u % 5}"])
            d = rng.choice(["a", "b", str(u)])
            out.append(BatchRecord(spelling, f"d{d}", hash(d) & 0xFFFF, empty=rng.random() < 0.1,
                                   title=rng.choice([None, "t"]), length=rng.choice([10, 5000]),
                                   first_seen=rng.choice([0.0, 1.0, 2.0, odd]),
                                   priority=rng.choice([None, 1.0, odd])))
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_columns_split_as_records_do(seed: int) -> None:
    records = synthetic_captures(seed)
    current, caps = split_records(records)
    fa = FingerprintArrays.from_records(records)
    got, acaps = split_arrays(fa)
    assert caps.refetched
    for name in ("current", "slot", "version", "earliest"):
        assert np.array_equal(getattr(caps, name), getattr(acaps, name)), name
    assert got.url.to_pylist() == [r.url for r in current]
    assert np.array_equal(got.first_seen, np.array([r.first_seen for r in current]), equal_nan=True)
    a, b = dedup_batch(records, engine="arrays"), dedup_batch(records, engine="records")
    assert rows(a) == rows(b) and a.clusters == b.clusters and a.summary() == b.summary()
    check_rule(records, a)
    assert versions(caps) == [v.version for v in a.verdicts]
    shuffled = records[:]
    random.Random(seed).shuffle(shuffled)
    assert sorted(map(repr, rows(dedup_batch(shuffled)))) == sorted(map(repr, rows(a)))

"""neardup.batch.check and ``neardup check-batch``: a crawl segment checked against fingerprint
Parquet files streamed in chunks equals the match rule applied to every (query, stored) pair."""

from __future__ import annotations

import json
import random
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from test_batch import body, corpus_pages, sample_list

from neardup.batch.arrays import FingerprintArrays, records_table
from neardup.batch.check import CheckVerdict, check_against
from neardup.batch.dedup import records_from_pages
from neardup.batch.files import write_fingerprints
from neardup.batch.graph import BatchRecord, url_group_key
from neardup.batch.versions import capture_key
from neardup.cli.main import main
from neardup.errors import ConfigError, InputError
from neardup.matching import pair_rule
from neardup.model import Page, default_k


def brute_force(queries: list[BatchRecord], stored: list[BatchRecord], k: int, verify: float | None,
                bands: bool) -> list[CheckVerdict]:
    """The specification: pair_rule on every (query, stored) pair of different URL keys; the
    best is exact first, then the smallest distance, then the first stored; the URL's latest
    stored row (batch_versions' capture order, then stored order) gives the version."""
    out = []
    skeys = [url_group_key(s.url) for s in stored]
    for q in queries:
        key = url_group_key(q.url)
        own = [(capture_key(s), j) for j, s in enumerate(stored) if skeys[j] == key]
        version = None
        if own:
            latest = stored[max(own)[1]]
            version = "unchanged" if (latest.digest, latest.empty) == (q.digest, q.empty) else "changed"
        if q.empty:
            out.append(CheckVerdict(q.url, q.digest, q.simhash, "empty", version=version))
            continue
        best = None
        for j, s in enumerate(stored):
            if skeys[j] == key:
                continue
            m = pair_rule(q.side(), s.side(), k, verify, bands)
            if m.status is not None:
                rank = (0 if m.status == "exact" else 1, m.distance, j)
                if best is None or rank < best[0]:
                    best = (rank, m, s.url)
        if best is None:
            out.append(CheckVerdict(q.url, q.digest, q.simhash, "new", version=version))
        else:
            _, m, url = best
            out.append(CheckVerdict(q.url, q.digest, q.simhash, str(m.status), url, m.distance, m.score, version))
    return out


def edited(page: Page, url: str, rng: random.Random, drop: float) -> Page:
    """A near copy of a page under another URL: a share of its words after the first 200
    bytes of text dropped (markup kept)."""
    text = page.content.decode("utf-8", "replace") if isinstance(page.content, bytes) else page.content
    words = text.split(" ")
    kept = [w for i, w in enumerate(words) if i < 50 or "<" in w or ">" in w or rng.random() > drop]
    return Page(url, " ".join(kept))


def split_records(pages: list[Page], seed: int = 5) -> tuple[list[BatchRecord], list[BatchRecord]]:
    """Real pages split into stored and queries, plus planted near copies and exact copies of
    stored pages among the queries, re-fetches of stored URLs (another spelling of the URL),
    and an empty page."""
    rng = random.Random(seed)
    pages = list(pages)
    rng.shuffle(pages)
    half = len(pages) // 2
    stored_pages, query_pages = pages[:half], pages[half:]
    for i, p in enumerate(stored_pages[:12]):
        query_pages.append(edited(p, f"https://copy{i}.example/page", rng, 0.03 + 0.05 * (i % 4)))
    for i, p in enumerate(stored_pages[12:16]):
        query_pages.append(Page(f"https://mirror{i}.example/x", p.content))
    for p in stored_pages[16:20]:  # a re-fetch, spelled with a tracking parameter and an upper-case host
        parts = urlsplit(p.url)
        query = parts.query + ("&" if parts.query else "") + "utm_source=x"
        query_pages.append(Page(urlunsplit((parts.scheme, parts.netloc.upper(), parts.path, query, "top")), p.content))
    for p in stored_pages[20:24]:  # re-fetches that changed
        query_pages.append(edited(p, p.url, rng, 0.5))
    query_pages.append(Page("https://empty.example/", "<html><body><p>tiny</p></body></html>"))
    stored, _ = records_from_pages(stored_pages)
    queries, _ = records_from_pages(query_pages)
    return ([r for r in stored if r is not None],
            [r for r in queries if r is not None])


@pytest.fixture(scope="module")
def sample_split(sample_pages) -> tuple[list[BatchRecord], list[BatchRecord]]:
    pages = sample_list(sample_pages)
    extra = [Page(f"https://synthetic.example/{i}", body([f"w{i}x{j}" for j in range(300)], f"Title {i}"))
             for i in range(8)]
    return split_records(pages + extra)


def write_parts(stored: list[BatchRecord], folder: Path, row_group: int, parts: int = 2) -> list[str]:
    """The stored records as ``parts`` Parquet files of small row groups."""
    cut = len(stored) // parts
    paths = []
    for i in range(parts):
        path = folder / f"part{i}.parquet"
        write_fingerprints(stored[i * cut:(i + 1) * cut if i < parts - 1 else len(stored)], str(path),
                           row_group=row_group)
        paths.append(str(path))
    return paths


def assert_same(got: list[CheckVerdict], want: list[CheckVerdict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.url, g.status, g.match, g.distance, g.version) == (w.url, w.status, w.match, w.distance, w.version)
        assert g.score == pytest.approx(w.score)


@pytest.mark.parametrize(("k", "verify", "bands"), [(None, 0.3, True), (12, 0.3, False), (5, None, True)])
def test_equals_brute_force_on_sample_pages(sample_split, tmp_path, k, verify, bands) -> None:
    stored, queries = sample_split
    paths = write_parts(stored, tmp_path, row_group=3)
    assert pq.ParquetFile(paths[0]).num_row_groups > 2
    kk = default_k(3, bands) if k is None else k
    want = brute_force(queries, stored, kk, verify, bands)
    got = check_against(queries, paths, k=k, verify=verify, bands=bands, chunk_rows=2)
    assert_same(got.verdicts, want)
    assert_same(check_against(queries, paths, k=k, verify=verify, bands=bands).verdicts, want)  # one chunk a file
    statuses = {v.status for v in want}
    assert {"exact", "near", "new", "empty"} <= statuses
    assert {v.version for v in want} >= {"unchanged", "changed", None}
    assert got.stored == len(stored)


def test_equals_brute_force_on_corpus_pages(corpus, tmp_path) -> None:
    stored, queries = split_records(corpus_pages(corpus, 240), seed=11)
    paths = write_parts(stored, tmp_path, row_group=17, parts=3)
    want = brute_force(queries, stored, default_k(3), 0.3, True)
    got = check_against(queries, paths, chunk_rows=10)
    assert_same(got.verdicts, want)
    assert sum(v.status == "near" for v in want) >= 8
    assert sum(v.version is not None for v in want) >= 8


def test_a_url_is_never_its_own_match(tmp_path) -> None:
    text = body([f"word{i}" for i in range(300)])
    rec = records_from_pages([Page("https://a.example/p?id=1", text)])[0][0]
    assert rec is not None
    path = str(tmp_path / "s.parquet")
    write_fingerprints([rec], path)
    again = BatchRecord(**{**rec.__dict__, "url": "HTTPS://A.example:443/p?id=1&utm_medium=feed#top"})
    other = BatchRecord(**{**rec.__dict__, "url": "https://b.example/p?id=1"})
    changed = BatchRecord(**{**rec.__dict__, "digest": "other", "simhash": rec.simhash ^ 0xFFFF})
    got = check_against([again, other, changed], [path])
    assert [(v.status, v.match, v.version) for v in got.verdicts] == [
        ("new", None, "unchanged"), ("exact", "https://a.example/p?id=1", None), ("new", None, "changed")]


def test_queries_as_columns_give_the_same_answer(sample_split, tmp_path) -> None:
    stored, queries = sample_split
    paths = write_parts(stored, tmp_path, row_group=5)
    columns = FingerprintArrays.from_table(records_table(queries))
    assert check_against(columns, paths).verdicts == check_against(queries, paths).verdicts


def test_bad_stored_inputs_are_typed_errors(tmp_path) -> None:
    rec = BatchRecord("https://a.example/", "d", 1)
    with pytest.raises(InputError, match="no such file"):
        check_against([rec], [str(tmp_path / "missing.parquet")])
    pq.write_table(pa.table({"url": ["x"], "html": ["y"]}), tmp_path / "pages.parquet")
    with pytest.raises(InputError, match="missing digest, simhash"):
        check_against([rec], [str(tmp_path / "pages.parquet")])
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="junk.parquet: not a readable Parquet file"):
        check_against([rec], [str(tmp_path / "junk.parquet")])
    for name, values in (("sketch", ["x"]), ("first_seen", ["later"]), ("url", [7]), ("empty", ["false"]),
                         ("simhash", ["00000000000000ff"])):
        cols = {"url": ["https://a.example/"], "digest": ["d"], "simhash": [1], name: values}
        pq.write_table(pa.table(cols), tmp_path / f"bad_{name}.parquet")
        with pytest.raises(InputError, match=f"bad_{name}.parquet: column {name} is "):
            check_against([rec], [str(tmp_path / f"bad_{name}.parquet")])
    write_fingerprints([rec], str(tmp_path / "ok.parquet"))
    for bad in (-1, 64, 2.5, True):
        with pytest.raises(ConfigError, match="k must be"):
            check_against([rec], [str(tmp_path / "ok.parquet")], k=bad)  # type: ignore[arg-type]


# -- the command ---------------------------------------------------------------------------------

def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_command_checks_pages_against_an_archive(tmp_path) -> None:
    words = [f"word{i}" for i in range(300)]
    (tmp_path / "pages").mkdir()
    archive = [Page("https://a.example/1", body(words, "A")), Page("https://b.example/2", body(words[::-1], "B"))]
    stored, _ = records_from_pages(archive)
    write_fingerprints([r for r in stored if r is not None], str(tmp_path / "archive.parquet"))
    segment = tmp_path / "segment.jsonl"
    segment.write_text("\n".join(json.dumps({"url": u, "html": h}) for u, h in [
        ("https://c.example/1", body(words, "A")),
        ("https://d.example/1", body(words[:150] + ["extra"] + words[150:], "A")),
        ("https://a.example/1", body(words, "A")),
        ("https://e.example/1", body([f"other{i}" for i in range(300)], "E")),
    ]) + "\n")
    code, out, err = run("check-batch", str(segment), "--stored", str(tmp_path / "archive.parquet"))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["url"], r["status"], r["match"], r["version"]) for r in rows] == [
        ("https://c.example/1", "exact", "https://a.example/1", None),
        ("https://d.example/1", "near", "https://a.example/1", None),
        ("https://a.example/1", "new", None, "unchanged"),
        ("https://e.example/1", "new", None, None)]
    assert json.loads(err.splitlines()[-1])["exact"] == 1
    # the queries as fingerprints, CSV and Parquet out
    code, _, err = run("dedup", "--batch", str(segment), "--fingerprints-out", str(tmp_path / "q.parquet"),
                       "--out", str(tmp_path / "ignored.jsonl"))
    assert code == 0, err
    out_csv = tmp_path / "v.csv"
    code, out, _ = run("check-batch", str(tmp_path / "q.parquet"), "--stored", str(tmp_path / "archive.parquet"),
                       "-o", str(out_csv), "--no-bands", "-k", "12")
    assert code == 0 and json.loads(out)["queries"] == 4
    assert out_csv.read_text().splitlines()[0] == "url,digest,simhash,status,match,distance,score,version"
    code, _, _ = run("check-batch", str(segment), "--stored", str(tmp_path / "archive.parquet"),
                     "-o", str(tmp_path / "v.parquet"))
    table = pq.read_table(tmp_path / "v.parquet")
    assert code == 0 and table.column("status").to_pylist() == ["exact", "near", "new", "new"]


@pytest.mark.parametrize(("case", "code", "needle"), [
    ("missing", 2, "does not exist"),
    ("columns", 1, "missing digest, simhash"),
    ("corrupt", 1, "not a readable Parquet file"),
    ("k", 2, "-k"),
    ("k70", 2, "k must be a whole number between 0 and 63"),
])
def test_command_errors_are_one_line(tmp_path, case, code, needle) -> None:
    good = tmp_path / "good.parquet"
    write_fingerprints([BatchRecord("https://a.example/", "d", 1)], str(good))
    pq.write_table(pa.table({"url": ["x"], "html": ["y"]}), tmp_path / "pages.parquet")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 garbage")
    (tmp_path / "bad.warc.gz").write_bytes(b"\x1f\x8b not gzip")
    args = {"missing": [str(good), "--stored", str(tmp_path / "nope.parquet")],
            "columns": [str(good), "--stored", str(tmp_path / "pages.parquet")],
            "corrupt": [str(good), "--stored", str(tmp_path / "corrupt.parquet")],
            "k": [str(good), "--stored", str(good), "-k", "-3"],
            "k70": [str(good), "--stored", str(good), "-k", "70"]}[case]
    got, out, err = run("check-batch", *args)
    assert got == code
    assert len(err.strip().splitlines()) == 1 and err.startswith("neardup: error:") and needle in err
    assert "Traceback" not in err + out


def test_stored_url_identities_match_normalize_url() -> None:
    """The chunk's vectorised URL stage (host filter, plain URLs as their own key) finds the
    same (stored row, query) pairs as normalize_url on every row."""
    import pyarrow as pa

    from neardup.batch.check import _UrlIndex

    queries = ["https://a.example/x", "https://xn--bcher-kva.example/", "http://b.example/p?id=7",
               "https://a.example/x", "not a url", "file:///tmp/a.html", "https://[::1]/v", "https://c.example/a/b"]
    stored = ["https://a.example/x", "HTTPS://A.EXAMPLE:443/x#frag", " https://a.example/x", "https://a.example/./x",
              "https://user@a.example/x", "https://a.example./x", "https://a.example/%78", "https://bücher.example",
              "http://b.example/p?id=7&utm_source=z", "http://b.example/p?id=8", "not a url", "file:///tmp/a.html",
              "https://[::1]/v", "https://[::1]:443/v", "https://c.example/a/../a/b", "https://d.example/x",
              "https://a.example/y", "https://c.example/a/b/", "ftp://a.example/x", "https://a.example/x?"]
    index = _UrlIndex([url_group_key(u) for u in queries])
    got = sorted(index.rows(pa.array(stored)))
    want = sorted((r, q) for r, s in enumerate(stored) for q, u in enumerate(queries)
                  if url_group_key(s) == url_group_key(u))
    assert got == want
    assert len({r for r, _ in want}) >= 12


def test_plain_urls_are_their_own_keys(sample_pages) -> None:
    from neardup.batch.versions import url_keys

    urls = [p.url for p in sample_pages.values()] + ["https://a.example/x", "https://a.example/a/./b",
                                                     "https://a.example", "https://a.example/%7e", "HTTP://a.example/"]
    assert url_keys(pa.array(urls)).to_pylist() == [url_group_key(u) for u in urls]


@given(st.lists(st.text("abcxyz09-", min_size=1, max_size=8), min_size=1, max_size=3),
       st.text("aZ09-._~:/[]@!$&'()*+,;=", max_size=30), st.sampled_from(["http", "https", "ftp"]))
def test_a_plain_url_is_its_own_key(labels, path, scheme) -> None:
    """What batch_versions.own_keys lets through, normalize_url leaves as it is (or refuses)."""
    from neardup.batch.versions import own_keys
    from neardup.errors import URLError
    from neardup.urls import normalize_url

    url = f"{scheme}://{'.'.join(labels)}/{path}"
    if not own_keys(pa.array([url]))[0]:
        return
    try:
        assert normalize_url(url) == url
    except URLError:
        pass


def test_own_url_version_follows_the_capture_order_in_any_stored_order(tmp_path) -> None:
    """The latest stored row of a query's URL is the last in batch_versions' capture order
    (fetch time, then the row's own fields on a tie), whatever order the file holds them in:
    the version dedup_batch gives the query as the URL's next capture."""
    from neardup.batch.dedup import dedup_batch

    url = "https://a.example/p"
    rows = [BatchRecord(url, "d1", 1, first_seen=5.0, length=4000),
            BatchRecord(url, "d3", 3, first_seen=5.0, length=4000),
            BatchRecord(url, "d2", 2, first_seen=4.0, length=4000)]
    query = BatchRecord(url, "d3", 3, first_seen=9.0, length=4000)
    got = set()
    for i, order in enumerate((rows, rows[::-1], [rows[1], rows[2], rows[0]])):
        write_fingerprints(order, str(tmp_path / f"s{i}.parquet"))
        got.add(check_against([query], [str(tmp_path / f"s{i}.parquet")], verify=None).verdicts[0].version)
    expected = {dedup_batch([*order, query], verify=None).verdicts[-1].version for order in (rows, rows[::-1])}
    assert got == expected == {"unchanged"}


def test_an_unreadable_query_input_is_skipped_and_reported(tmp_path) -> None:
    """As dedup --batch: a query file that cannot be read is one stderr line (and a JSON line
    in --errors); the other queries are still checked."""
    good, archive = tmp_path / "good.parquet", tmp_path / "archive.parquet"
    write_fingerprints([BatchRecord("https://b.example/", "d", 1, length=4000)], str(good))
    write_fingerprints([BatchRecord("https://a.example/", "d", 1, length=4000)], str(archive))
    (tmp_path / "bad.warc.gz").write_bytes(b"\x1f\x8b not gzip")
    code, out, err = run("check-batch", str(tmp_path / "bad.warc.gz"), str(good), "--stored", str(archive),
                         "--errors", str(tmp_path / "errors.jsonl"))
    assert code == 0 and "Traceback" not in err
    assert [line for line in err.splitlines() if "bad.warc.gz" in line][0].startswith("neardup: skipped")
    assert [json.loads(line)["status"] for line in out.splitlines()] == ["exact"]
    assert json.loads(err.strip().splitlines()[-1])["errors"] == 1
    assert "bad.warc.gz" in (tmp_path / "errors.jsonl").read_text()

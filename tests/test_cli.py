"""The command line, through click's CliRunner, on the real pages of examples/sample."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
from functools import cache
from pathlib import Path

import pytest
from checks import present
from click.testing import CliRunner
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup import __version__
from neardup.cli.main import main
from neardup.cli.pages import VERDICT_FIELDS
from neardup.index.bands import FAR_VERIFY
from neardup.model import DEFAULT_K

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"
PAGES = SAMPLE / "pages"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    """No compile notice in these tests' stderr (a fresh checkout compiles the kernels in
    whichever test fingerprints first); test_compile_notice checks the notice itself."""
    monkeypatch.setenv("NEARDUP_QUIET", "1")


@cache
def rows() -> tuple[dict, ...]:
    with open(SAMPLE / "urls.tsv", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh, delimiter="\t"))


def group_of_file(name: str) -> str:
    return next(r["group"] for r in rows() if Path(r["file"]).name == name)


def group_of_url(url: str) -> str:
    groups = {r["group"] for r in rows() if r["url"] == url}
    assert len(groups) == 1, url
    return groups.pop()


def url_of(name: str) -> str:
    return next(r["url"] for r in rows() if Path(r["file"]).name == f"{name}.html.gz")


def page_file(name: str) -> str:
    return str(PAGES / f"{name}.html.gz")


def run(*args: str | Path, input: bytes | None = None):
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    # never an unhandled exception (which would be a traceback for a user)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    return result


def assert_one_line_error(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("neardup: error:"), lines[0]
    return lines[0]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- help -----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [[], ["fingerprint"], ["add"], ["check"], ["dedup"], ["stats"]])
def test_help(command):
    r = run(*command, "--help")
    assert r.exit_code == 0
    assert "Usage:" in r.stdout
    r = run(*command, "-h")
    assert r.exit_code == 0


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and __version__ in r.stdout


# -- fingerprint ---------------------------------------------------------------------------------

def test_fingerprint_files():
    r = run("fingerprint", page_file("npr-dylann-roof-2022"), page_file("npr-dylann-roof-2022-mirror"),
            page_file("newyorker-teas-2019"))
    assert r.exit_code == 0, r.stderr
    out = json_lines(r.stdout)
    assert len(out) == 3
    for o in out:
        assert {"file", "digest", "simhash", "spec", "title", "canonical_url"} <= o.keys()
        assert len(o["digest"]) == 64 and len(o["simhash"]) == 16
        int(o["simhash"], 16)
        assert o["spec"].startswith("neardup-simhash/")
        assert "text" not in o
    assert out[0]["digest"] == out[1]["digest"] and out[0]["digest"] != out[2]["digest"]
    assert out[0]["title"].startswith("Dylann Roof")
    assert out[0]["canonical_url"] == url_of("npr-dylann-roof-2022")
    assert out[2]["file"] == page_file("newyorker-teas-2019")


def test_fingerprint_text_and_options():
    r = run("fingerprint", "--text", "--features", "chars", "--ngram", "3", "--bits", "128",
            page_file("japan-cnet-apple-news-2019"))
    assert r.exit_code == 0, r.stderr
    (o,) = json_lines(r.stdout)
    assert len(o["simhash"]) == 32
    assert "chars3" in o["spec"] and "f=128" in o["spec"]
    assert "apple" in o["text"]  # normalised text is case-folded


def test_fingerprint_stdin():
    data = gzip.decompress(Path(page_file("newyorker-teas-2019")).read_bytes())
    r = run("fingerprint", "-", input=data)
    assert r.exit_code == 0, r.stderr
    (o,) = json_lines(r.stdout)
    f = json_lines(run("fingerprint", page_file("newyorker-teas-2019")).stdout)[0]
    assert o["file"] == "-"
    assert (o["digest"], o["simhash"], o["title"]) == (f["digest"], f["simhash"], f["title"])


def test_fingerprint_bad_file_among_good(tmp_path):
    png = tmp_path / "logo.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    r = run("fingerprint", page_file("newyorker-teas-2019"), str(png), str(tmp_path / "missing.html"))
    assert r.exit_code == 1
    out = json_lines(r.stdout)
    assert len(out) == 3
    assert "digest" in out[0] and "error" in out[1] and "error" in out[2]
    for line in r.stderr.strip().splitlines():
        assert line.startswith("neardup: error:")


def test_fingerprint_corrupt_gzip_is_an_input_error(tmp_path):
    bad = tmp_path / "broken.html.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 not really gzip data at all")
    r = run("fingerprint", str(bad))
    assert r.exit_code == 1


# -- add / check --------------------------------------------------------------------------------

def test_add_and_check(tmp_path):
    db = tmp_path / "s.db"
    r = run("add", "--db", db, url_of("nytimes-nikki-haley-2018"), page_file("nytimes-nikki-haley-2018"))
    assert r.exit_code == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["status"] == "new" and v["url"] == url_of("nytimes-nikki-haley-2018")
    assert {"page_id", "match_id", "distance", "cluster_id", "canonical_url", "digest", "simhash"} <= v.keys()

    other = "https://web.archive.org/web/2019/" + url_of("nytimes-nikki-haley-2019")
    r = run("check", "--db", db, other, page_file("nytimes-nikki-haley-2019"))
    assert r.exit_code == 0, r.stderr
    c = json.loads(r.stdout)
    assert c["status"] == "near" and c["match_id"] == v["page_id"] and c["distance"] <= 3
    assert c["page_id"] is None
    assert json.loads(run("stats", "--db", db).stdout)["pages"] == 1  # check wrote nothing

    r = run("check", "--db", db, "-k", "0", "--no-bands", other, page_file("nytimes-nikki-haley-2019"))
    assert json.loads(r.stdout)["status"] == "new"  # the SimHash tables alone, at k = 0
    r = run("check", "--db", db, "-k", "0", other, page_file("nytimes-nikki-haley-2019"))
    assert json.loads(r.stdout)["status"] == "near"  # the sketch bands find it at any distance

    r = run("add", "--db", db, other, page_file("nytimes-nikki-haley-2019"))
    a = json.loads(r.stdout)
    assert a["status"] == "near" and a["cluster_id"] == v["cluster_id"]
    assert a["canonical_url"] == url_of("nytimes-nikki-haley-2018")

    data = gzip.decompress(Path(page_file("nytimes-nikki-haley-2018")).read_bytes())
    r = run("add", "--db", db, "https://mirror.example/nikki", "-", input=data)
    assert json.loads(r.stdout)["status"] == "exact"

    stats = json.loads(run("stats", "--db", db).stdout)
    assert stats["pages"] == 3 and stats["clusters"] == 1
    assert stats["new"] == 1 and stats["near"] == 1 and stats["exact"] == 1


def test_add_plain_text_with_header(tmp_path):
    db = tmp_path / "s.db"
    txt = tmp_path / "note.txt"
    txt.write_text("<p>" + "angle brackets are text here " * 10 + "</p>", encoding="utf-8")
    r = run("add", "--db", db, "-H", "Content-Type: text/plain", "https://t.example/1", txt)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "new"


# -- dedup -------------------------------------------------------------------------------------

def _check_verdict_groups(verdicts: list[dict]) -> None:
    """No false positive: a duplicate's match (and its canonical) is in its own group."""
    for v in verdicts:
        assert v["status"] in ("new", "exact", "near"), v
        own = group_of_file(Path(v["source"]).name)
        assert group_of_url(v["url"]) == own
        if v["status"] in ("exact", "near"):
            assert v["match_url"], v
            assert group_of_url(v["match_url"]) == own, (v["source"], v["match_url"])
            assert v["distance"] is not None
            if v["status"] == "near" and v["distance"] > DEFAULT_K and not v["unchanged"]:  # by the sketch bands
                assert v["score"] is not None and v["score"] >= FAR_VERIFY - 1e-9, v
        assert group_of_url(v["canonical_url"]) == own


def test_dedup_sample(tmp_path):
    db, out = tmp_path / "s.db", tmp_path / "v.jsonl"
    r = run("dedup", SAMPLE, "--db", db, "--out", out, "--no-progress")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["pages"] == 26
    assert summary["error"] == 0 and summary["empty"] == 0
    assert summary["near"] >= 3 and summary["exact"] >= 2  # the two byte-identical mirrors at least
    assert summary["new"] + summary["near"] + summary["exact"] == 26
    assert summary["db"] == str(db)
    distinct_urls = len({r["url"] for r in rows()})
    assert summary["store_pages"] == distinct_urls
    # a recapture of a URL already read is a version of it, never its own duplicate
    assert summary["unchanged"] + summary["changed"] == 26 - distinct_urls
    verdicts = json_lines(out.read_text(encoding="utf-8"))
    assert len(verdicts) == 26
    assert all(set(v) == set(VERDICT_FIELDS) for v in verdicts)
    _check_verdict_groups(verdicts)
    by_name = {Path(v["source"]).name: v for v in verdicts}
    for mirror, original in [("npr-dylann-roof-2022-mirror", "npr-dylann-roof-2022"),
                             ("newyorker-teas-2019-mirror", "newyorker-teas-2019")]:
        pair = {by_name[f"{mirror}.html.gz"]["status"], by_name[f"{original}.html.gz"]["status"]}
        assert "exact" in pair
    for name in ("nytimes-nikki-haley-2019", "cnbc-cybersecurity-2022"):  # recaptures of their URL
        assert (by_name[f"{name}.html.gz"]["status"], by_name[f"{name}.html.gz"]["version"]) == ("new", "changed")
    assert all(v["match_url"] != v["url"] for v in verdicts)
    # the human summary goes to stderr
    assert "pages 26" in r.stderr

    # incremental rerun: everything is known now
    r2 = run("dedup", SAMPLE, "--db", db, "--out", tmp_path / "v2.jsonl", "--no-progress")
    assert r2.exit_code == 0, r2.stderr
    s2 = json.loads(r2.stdout.strip().splitlines()[-1])
    assert s2["pages"] == 26 and s2["error"] == 0 and s2["empty"] == 0
    # every page is a re-fetch of its URL: unchanged or changed (a URL captured several times
    # is compared with its last stored capture), each URL keeping its first decision, so the
    # counts by status and every host's duplicate rate are those of the first crawl
    assert s2["unchanged"] + s2["changed"] == 26
    once = [r for r in rows() if sum(x["url"] == r["url"] for x in rows()) == 1]
    assert s2["unchanged"] >= len(once)
    assert s2["store_pages"] == summary["store_pages"]
    v2 = json_lines((tmp_path / "v2.jsonl").read_text(encoding="utf-8"))
    _check_verdict_groups(v2)
    last_status = {v["url"]: v["status"] for v in verdicts}
    once_names = {Path(r["file"]).name for r in once}
    for v in v2:
        assert v["version"] in ("unchanged", "changed") and v["match_url"] != v["url"], v
        assert v["status"] == last_status[v["url"]], v
        if Path(v["source"]).name in once_names:
            assert v["version"] == "unchanged", v
        assert v["page_id"] is not None
    for name in ("new", "exact", "near"):
        assert s2[name] == sum(v["status"] == name for v in v2)


def test_dedup_csv_and_stdout(tmp_path):
    db = tmp_path / "s.db"
    r = run("dedup", SAMPLE, "--db", db, "--out", tmp_path / "v.csv")
    assert r.exit_code == 0, r.stderr
    with open(tmp_path / "v.csv", newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert tuple(present(reader.fieldnames)) == VERDICT_FIELDS
        table = list(reader)
    assert len(table) == 26
    assert {row["status"] for row in table} <= {"new", "exact", "near"}
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert sum(row["status"] == "near" for row in table) == summary["near"]

    assert sum(row["unchanged"] == "true" for row in table) == summary["unchanged"]

    # --out -: stdout is the CSV and nothing else; both summaries go to stderr
    r = run("dedup", SAMPLE, "--db", tmp_path / "t.db", "--out", "-", "--format", "csv", "--jobs", "1")
    lines = r.stdout.strip().splitlines()
    assert lines[0] == ",".join(VERDICT_FIELDS)
    assert len(list(csv.reader(io.StringIO(r.stdout)))) == 27
    assert json.loads(r.stderr.strip().splitlines()[-1])["pages"] == 26
    # a second run: every page whose URL is stored once is marked unchanged
    r = run("dedup", SAMPLE, "--db", tmp_path / "t.db", "--out", "-", "--format", "csv", "--jobs", "1")
    table = list(csv.DictReader(io.StringIO(r.stdout)))
    summary = json.loads(r.stderr.strip().splitlines()[-1])
    assert sum(row["unchanged"] == "true" for row in table) == summary["unchanged"] > 0
    assert all(row["version"] == "unchanged" and row["match_id"] != row["page_id"]
               for row in table if row["unchanged"] == "true")


def _write_warc(path: Path, names: list[str]) -> None:
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        for i, name in enumerate(names):
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            body = gzip.decompress(Path(page_file(name)).read_bytes())
            target = f"https://crawl.example/{i}/{name}"
            w.write_record(w.create_warc_record(target, "response", payload=io.BytesIO(body), http_headers=http))


def test_dedup_warc(tmp_path):
    names = ["nytimes-nikki-haley-2018", "nytimes-nikki-haley-2019", "npr-dylann-roof-2022",
             "npr-dylann-roof-2022-mirror", "newyorker-teas-2019", "politico-student-debt-2022"]
    warc = tmp_path / "crawl.warc.gz"
    _write_warc(warc, names)
    out = tmp_path / "v.jsonl"
    r = run("dedup", warc, "--db", tmp_path / "s.db", "--out", out)
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["pages"], s["new"], s["near"], s["exact"], s["error"]) == (6, 4, 1, 1, 0)
    verdicts = json_lines(out.read_text())
    assert [v["url"] for v in verdicts] == [f"https://crawl.example/{i}/{n}" for i, n in enumerate(names)]
    assert verdicts[1]["match_url"] == verdicts[0]["url"]
    assert verdicts[3]["match_url"] == verdicts[2]["url"]


def test_dedup_jsonl_with_bad_records(tmp_path):
    src = tmp_path / "in.jsonl"
    teas = gzip.decompress(Path(page_file("newyorker-teas-2019")).read_bytes()).decode()
    src.write_text("\n".join([
        json.dumps({"url": "https://a.example/teas", "html": teas}),
        "{not json",
        json.dumps({"url": "no scheme", "html": teas}),
        json.dumps({"url": "https://b.example/teas", "html": teas}),
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "v.jsonl"
    r = run("dedup", src, "--db", tmp_path / "s.db", "--out", out)
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["pages"], s["new"], s["exact"], s["error"]) == (4, 1, 1, 2)
    assert [v["status"] for v in json_lines(out.read_text())] == ["new", "error", "error", "exact"]
    assert "neardup: skipped" in r.stderr


def test_dedup_jsonl_bad_fetched_at_does_not_abort_the_run(tmp_path):
    """One record with an unusable fetched_at is one bad record, not a failed run."""
    src = tmp_path / "in.jsonl"
    teas = gzip.decompress(Path(page_file("newyorker-teas-2019")).read_bytes()).decode()
    src.write_text("\n".join([
        json.dumps({"url": "https://a.example/teas", "html": teas}),
        json.dumps({"url": "https://b.example/teas", "html": teas, "fetched_at": "last tuesday"}),
        json.dumps({"url": "https://c.example/teas", "html": teas}),
    ]) + "\n", encoding="utf-8")
    r = run("dedup", src, "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["pages"], s["new"], s["exact"], s["error"]) == (3, 1, 1, 1)


# -- exit codes and error messages ------------------------------------------------------------

def test_bad_url_exit_1(tmp_path):
    r = run("add", "--db", tmp_path / "s.db", "not a url", page_file("newyorker-teas-2019"))
    msg = assert_one_line_error(r, 1)
    assert "URL" in msg
    r = run("check", "--db", tmp_path / "s.db", "mailto:x@example.com", page_file("newyorker-teas-2019"))
    assert_one_line_error(r, 1)


def test_binary_file_exit_1(tmp_path):
    png = tmp_path / "logo.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    r = run("add", "--db", tmp_path / "s.db", "https://x.example/logo.png", png)
    msg = assert_one_line_error(r, 1)
    assert "binary" in msg


def test_missing_file(tmp_path):
    r = run("add", "--db", tmp_path / "s.db", "https://x.example/", tmp_path / "missing.html")
    assert r.exit_code in (1, 2)
    if r.exit_code == 1:
        assert_one_line_error(r, 1)
    r = run("dedup", tmp_path / "missing-dir", "--db", tmp_path / "s.db")
    assert r.exit_code == 2
    assert "does not exist" in r.stderr


def test_directory_as_page_file(tmp_path):
    r = run("add", "--db", tmp_path / "s.db", "https://x.example/", tmp_path)
    assert_one_line_error(r, 1)


def test_corrupt_gzip_page_file_exit_1(tmp_path):
    bad = tmp_path / "broken.html.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 not really gzip data at all")
    r = run("add", "--db", tmp_path / "s.db", "https://x.example/", bad)
    assert_one_line_error(r, 1)


def test_dedup_directory_with_corrupt_gzip_page(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "good.html").write_bytes(gzip.decompress(Path(page_file("newyorker-teas-2019")).read_bytes()))
    (tmp_path / "in" / "broken.html.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip data at all")
    r = run("dedup", tmp_path / "in", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["pages"], s["new"], s["error"]) == (2, 1, 1)


@pytest.mark.parametrize("command", ["add", "check", "stats", "dedup"])
def test_corrupt_db_exit_3(tmp_path, command):
    db = tmp_path / "junk.db"
    db.write_bytes(random.Random(5).randbytes(32 * 1024))
    args = {"add": ["add", "--db", db, "https://x.example/", page_file("newyorker-teas-2019")],
            "check": ["check", "--db", db, "https://x.example/", page_file("newyorker-teas-2019")],
            "stats": ["stats", "--db", db],
            "dedup": ["dedup", PAGES / "newyorker-teas-2019.html.gz", "--db", db]}[command]
    r = run(*args)
    msg = assert_one_line_error(r, 3)
    assert str(db) in msg


def test_stats_of_missing_store_exit_3(tmp_path):
    r = run("stats", "--db", tmp_path / "absent.db")
    assert_one_line_error(r, 3)
    assert not (tmp_path / "absent.db").exists()


def test_spec_mismatch_exit_3(tmp_path):
    db = tmp_path / "s.db"
    r = run("add", "--db", db, url_of("newyorker-teas-2019"), page_file("newyorker-teas-2019"))
    assert r.exit_code == 0
    r = run("add", "--db", db, "--features", "shingles", url_of("npr-dylann-roof-2016"),
            page_file("npr-dylann-roof-2016"))
    msg = assert_one_line_error(r, 3)
    assert "spec" in msg
    r = run("dedup", PAGES / "npr-dylann-roof-2016.html.gz", "--db", db, "--bits", "128")
    assert_one_line_error(r, 3)
    # without fingerprint options the store's own settings are used
    r = run("check", "--db", db, url_of("newyorker-teas-2019-mirror"), page_file("newyorker-teas-2019-mirror"))
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "exact"
    assert json.loads(run("stats", "--db", db).stdout)["pages"] == 1


@pytest.mark.parametrize("args", [
    ["-k", "200"],
    ["-k", "-1"],
    ["-k", "three"],
    ["--features", "bogus"],
    ["--bits", "32"],
    ["--extractor", "magic"],
    ["--ngram", "0"],
    ["--min-tokens", "-5"],
    ["--no-such-option"],
])
def test_bad_option_value_exit_2(tmp_path, args):
    r = run("add", "--db", tmp_path / "s.db", *args, "https://x.example/", page_file("newyorker-teas-2019"))
    msg = assert_one_line_error(r, 2)
    assert "--help" in msg
    assert not (tmp_path / "s.db").exists()


def test_bad_header_exit_2(tmp_path):
    r = run("add", "--db", tmp_path / "s.db", "-H", "no colon here", "https://x.example/",
            page_file("newyorker-teas-2019"))
    assert_one_line_error(r, 2)


def test_dedup_unknown_input_type_exit_1(tmp_path):
    f = tmp_path / "pages.csv"
    f.write_text("url,html\n")
    r = run("dedup", f, "--db", tmp_path / "s.db")
    assert_one_line_error(r, 1)


# -- hostile input (issue 11): no traceback, every bad item counted by reason --------------------

def _teas() -> str:
    return gzip.decompress(Path(page_file("newyorker-teas-2019")).read_bytes()).decode()


def test_dedup_hostile_jsonl_counts_every_bad_line(tmp_path):
    src = tmp_path / "in.jsonl"
    teas = _teas()
    src.write_text("\n".join([
        json.dumps({"url": "https://a.example/teas", "html": teas}),
        "[" * 100_000 + "]" * 100_000,
        '{"url": "https://s.example/\\ud800", "html": "<p>x</p>"}',
        json.dumps({"url": "https://s.example/ok", "html": teas.replace("<body", "<body \ud800", 1)},
                   ensure_ascii=True),
        json.dumps({"url": "https://h.example/", "html": teas,
                    "headers": {"Content-Type": "text/html; charset=undefined"}}),
        json.dumps({"url": "https://f.example/", "html": teas, "fetched_at": 1e400}),
        "{not json",
    ]) + "\n", encoding="utf-8")
    errors = tmp_path / "errors.jsonl"
    r = run("dedup", src, "--db", tmp_path / "s.db", "--errors", errors)
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["pages"], s["new"], s["exact"], s["error"]) == (7, 1, 2, 4)
    assert s["errors_by_reason"] == {"bad-json": 2, "bad-record": 1, "bad-url": 1}
    rows = json_lines(errors.read_text())
    assert [row["reason"] for row in rows] == ["bad-json", "bad-url", "bad-record", "bad-json"]
    assert all(row["source"].startswith(f"{src}:") and row["error"] for row in rows)
    assert "nested too deeply" in rows[0]["error"] and "surrogate" in rows[1]["error"]
    assert "errors 4 (2 bad-json, 1 bad-record, 1 bad-url)" in r.stderr


def test_add_with_bogus_charset_header(tmp_path):
    for charset in ("undefined", "punycode", "base64"):
        r = run("add", "--db", tmp_path / "s.db", "-H", f"Content-Type: text/html; charset={charset}",
                f"https://x.example/{charset}", page_file("newyorker-teas-2019"))
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["status"] in ("new", "exact")


def _bomb(size: int) -> bytes:
    import zlib

    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(comp.compress(bytes(1 << 20)) for _ in range(size >> 20)) + comp.flush()


def test_gzip_bomb_page_is_a_one_line_error(tmp_path):
    bomb = tmp_path / "bomb.html.gz"
    bomb.write_bytes(_bomb(256 << 20))
    r = run("add", "--db", tmp_path / "s.db", "https://x.example/", bomb)
    assert "inflates to over" in assert_one_line_error(r, 1)
    r = run("fingerprint", bomb)
    assert r.exit_code == 1 and "inflates to over" in r.stderr
    (tmp_path / "in").mkdir()
    bomb.rename(tmp_path / "in" / "bomb.html.gz")
    (tmp_path / "in" / "teas.html").write_text(_teas(), encoding="utf-8")
    r = run("dedup", tmp_path / "in", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["pages"], s["new"], s["errors_by_reason"]) == (2, 1, {"too-large": 1})


def test_stdin_over_the_limit(tmp_path):
    r = run("fingerprint", "-", input=b"<p>" + b"x" * (17 << 20))
    assert r.exit_code == 1 and "over the 16,777,216-byte limit" in r.stderr


def test_dedup_damaged_warcs_and_a_fake_one(tmp_path):
    names = ["newyorker-teas-2019", "npr-dylann-roof-2016", "politico-student-debt-2022", "deadspin-espinosa-2016"]
    plain, gz, fake = tmp_path / "a.warc", tmp_path / "b.warc.gz", tmp_path / "c.warc"
    offsets: dict[Path, list[int]] = {}
    for path, compress in ((plain, False), (gz, True)):
        with open(path, "wb") as fh:
            w = WARCWriter(fh, gzip=compress)
            offsets[path] = []
            for name in names:
                http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
                offsets[path].append(fh.tell())
                w.write_record(w.create_warc_record(url_of(name) + ("#gz" if compress else ""), "response",
                                                    payload=io.BytesIO(gzip.decompress(Path(page_file(name)).read_bytes())),
                                                    http_headers=http))
    data = plain.read_bytes()
    i = data.index(b"WARC-Type: response", offsets[plain][1])
    plain.write_bytes(data[:i] + b"WARC-Type: resp\xffnse" + data[i + 19:])
    data = bytearray(gz.read_bytes())
    for k in range(offsets[gz][2] + 50, offsets[gz][2] + 90):
        data[k] ^= 0x5A
    gz.write_bytes(bytes(data))
    fake.write_bytes(b"WARC but not really")
    errors = tmp_path / "errors.jsonl"
    r = run("dedup", plain, fake, gz, "--db", tmp_path / "s.db", "--errors", errors)
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["errors_by_reason"] == {"warc-corrupt": 2, "warc-header": 1}  # the fake one is corrupt from byte 0
    assert s["pages"] - s["error"] == 6  # 3 of 4 from each real file
    rows = json_lines(errors.read_text())
    assert [row["source"].split("#")[0] for row in rows] == [str(plain), str(fake), str(gz)]


def test_dedup_non_warc_among_inputs_is_counted(tmp_path):
    fake = tmp_path / "c.warc.gz"
    fake.write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "teas.html").write_text(_teas(), encoding="utf-8")
    r = run("dedup", fake, tmp_path / "in", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["new"] == 1 and s["error"] == 1


def test_unexpected_error_in_one_page_does_not_stop_dedup(tmp_path, monkeypatch):
    import neardup.detector.core
    import neardup.ingest.workers

    real = neardup.ingest.workers.fingerprint

    def buggy(content, url=None, headers=None, config=None):
        if url and "bug" in url:
            raise RuntimeError("simulated bug\nsecond line")
        return real(content, url, headers, config)

    monkeypatch.setattr(neardup.ingest.workers, "fingerprint", buggy)  # in this process: --jobs 1
    src = tmp_path / "in.jsonl"
    teas = _teas()
    src.write_text("\n".join(json.dumps({"url": u, "html": teas}) for u in
                             ("https://a.example/", "https://bug.example/", "https://c.example/")) + "\n")
    r = run("dedup", src, "--db", tmp_path / "s.db", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["new"], s["exact"], s["errors_by_reason"]) == (1, 1, {"internal": 1})
    assert "unexpected RuntimeError: simulated bug second line" in r.stderr


def test_unexpected_error_is_one_line(tmp_path, monkeypatch):
    import neardup.detector.core

    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug")

    assert run("add", "--db", tmp_path / "s.db", "https://y.example/", page_file("newyorker-teas-2019")).exit_code == 0
    monkeypatch.setattr(neardup.detector.core.Detector, "check", broken)
    r = run("check", "--db", tmp_path / "s.db", "https://x.example/", page_file("newyorker-teas-2019"))
    assert "unexpected RuntimeError: simulated bug" in assert_one_line_error(r, 1)


def test_check_against_a_missing_store_is_a_store_error(tmp_path):
    """check writes nothing, so a typo in --db must not answer 'new' for everything (issue 34)."""
    r = run("check", "--db", tmp_path / "typo.db", "https://x.example/", page_file("newyorker-teas-2019"))
    assert "does not exist" in assert_one_line_error(r, 3)
    assert not (tmp_path / "typo.db").exists()


@pytest.mark.parametrize("args", [["frobnicate"], ["add"], ["add", "--db"], ["dedup", "--db", "x.db"],
                                  ["fingerprint", "--bits", "7", "x"]])
def test_usage_errors_are_one_line(args):
    r = run(*args)
    msg = assert_one_line_error(r, 2)
    assert "--help" in msg


# -- --jobs: worker processes give the verdicts of one process ------------------------------

CORPUS = Path(os.environ.get("NEARDUP_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))


def _verdicts(tmp_path: Path, name: str, *inputs, jobs: int, extra=()) -> tuple[list[dict], dict]:
    out = tmp_path / f"{name}.jsonl"
    r = run("dedup", *inputs, "--db", tmp_path / f"{name}.db", "--out", out, "--no-progress",
            "--jobs", str(jobs), "--batch-size", "7", *extra)
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["jobs"] == jobs
    rows_ = json_lines(out.read_text(encoding="utf-8"))
    return rows_, summary


#: verdict fields that depend on the clock of the run (pages read from files are fetched "now")
CLOCK_FIELDS = ("since_last_fetch", "next_fetch")


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for name in CLOCK_FIELDS:
            assert (x.get(name) is None) == (y.get(name) is None)
        assert {k: v for k, v in x.items() if k not in CLOCK_FIELDS} == \
            {k: v for k, v in y.items() if k not in CLOCK_FIELDS}


def test_dedup_jobs_gives_the_verdicts_of_one_process(tmp_path):
    one, s1 = _verdicts(tmp_path, "one", SAMPLE, jobs=1)
    two, s2 = _verdicts(tmp_path, "two", SAMPLE, jobs=2)
    three, _ = _verdicts(tmp_path, "three", SAMPLE, jobs=3)
    _same(one, two)
    _same(one, three)
    assert {k: v for k, v in s1.items() if k not in ("db", "jobs")} == \
        {k: v for k, v in s2.items() if k not in ("db", "jobs")}


def test_dedup_jobs_with_errors_and_skips_keeps_input_order(tmp_path):
    """Unreadable items, skipped WARC records and pages interleaved: the same rows, in input
    order, with any number of workers."""
    src = tmp_path / "in.jsonl"
    teas = _teas()
    lines = []
    for i in range(30):
        lines.append(json.dumps({"url": f"https://s{i % 4}.example/{i}", "html": teas if i % 3 else f"<p>{i}</p>"}))
        if i % 7 == 0:
            lines.append("{not json")
        if i % 11 == 0:
            lines.append(json.dumps({"url": "not a url", "html": teas}))
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    warc = tmp_path / "c.warc.gz"
    _write_warc(warc, ["nytimes-nikki-haley-2018", "npr-dylann-roof-2022"])
    one, s1 = _verdicts(tmp_path, "one", src, warc, SAMPLE, jobs=1)
    two, s2 = _verdicts(tmp_path, "two", src, warc, SAMPLE, jobs=2)
    _same(one, two)
    assert s1["errors_by_reason"] == s2["errors_by_reason"] == {"bad-json": 5, "bad-url": 3}


@pytest.mark.skipif(not (CORPUS / "dragnet").is_dir(), reason="needs ../shared/corpus/dragnet (real pages)")
def test_dedup_jobs_on_real_pages(tmp_path):
    pages = sorted(p for p in (CORPUS / "dragnet").rglob("*")
                   if p.suffix in (".html", ".htm") or p.name.endswith(".html.gz"))
    assert pages
    folder = tmp_path / "pages"
    folder.mkdir()
    for p in pages[:120]:
        (folder / p.name).symlink_to(p)
    one, _ = _verdicts(tmp_path, "one", folder, jobs=1, extra=("--extractor", "fast"))
    two, _ = _verdicts(tmp_path, "two", folder, jobs=2, extra=("--extractor", "fast"))
    _same(one, two)


def test_dedup_warc_counts_records_that_are_not_pages(tmp_path):
    warc = tmp_path / "c.warc.gz"
    with open(warc, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        body = gzip.decompress(Path(page_file("newyorker-teas-2019")).read_bytes())
        for target, status, ctype, payload in [
            ("https://a.example/", "200 OK", "text/html", body),
            ("https://a.example/s.css", "200 OK", "text/css", b"p { }"),
            ("https://a.example/robots.txt", "200 OK", "text/plain", b"User-agent: *"),
            ("https://a.example/i.png", "200 OK", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64)),
            ("https://a.example/x", "404 Not Found", "text/html", b"<p>gone</p>"),
        ]:
            http = StatusAndHeaders(status, [("Content-Type", ctype)], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(target, "response", payload=io.BytesIO(payload), http_headers=http))
        w.write_record(w.create_revisit_record("https://a.example/", digest="sha1:AAAA",
                                               refers_to_uri="https://a.example/",
                                               refers_to_date="2020-01-01T00:00:00Z"))
    out = tmp_path / "v.jsonl"
    r = run("dedup", warc, "--db", tmp_path / "s.db", "--out", out, "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    # the revisit of the stored page is an unchanged fetch of it (issue 37)
    assert (s["pages"], s["new"], s["unchanged"], s["error"]) == (2, 2, 1, 0)  # the re-fetch keeps "new"
    assert s["skipped_by_reason"] == {"non-200": 1, "non-html": 3} and s["skipped"] == 4
    assert "skipped 4 records that are not pages" in r.stderr
    assert "neardup: skipped" not in r.stderr  # no line per record: they are not errors
    assert len(json_lines(out.read_text())) == 2


def test_compile_notice(tmp_path, monkeypatch, capsys):
    """A cold numba cache prints one line on stderr before compiling, once per process."""
    from neardup.fingerprint import _kernels

    class Cold:
        overloads: dict = {}

        class _cache:
            class _cache_file:
                _index_path = str(tmp_path / "missing.nbi")

    monkeypatch.delenv("NEARDUP_QUIET")
    monkeypatch.setattr(_kernels, "_noticed", False)
    _kernels.compile_notice(Cold())
    _kernels.compile_notice(Cold())
    err = capsys.readouterr().err
    assert err.count("compiling the fingerprint kernels, once") == 1 and len(err.splitlines()) == 1
    monkeypatch.setattr(_kernels, "_noticed", False)
    (tmp_path / "missing.nbi").write_bytes(b"")
    _kernels.compile_notice(Cold())  # cached on disk: nothing to say
    assert capsys.readouterr().err == ""
    from neardup.fingerprint.core import warm_up

    warm_up()
    assert not _kernels._cache_is_cold(_kernels._simhash_tokens_tf)  # compiled (or loaded) in this process


def test_dedup_progress_bar_has_a_total_for_folders(tmp_path):
    r = run("dedup", SAMPLE, "--db", tmp_path / "s.db", "--progress", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert "26/26" in r.stderr  # the total is known: a bar with a count, a rate and an ETA
    warc = tmp_path / "c.warc.gz"
    _write_warc(warc, ["nytimes-nikki-haley-2018"])
    r = run("dedup", warc, "--db", tmp_path / "w.db", "--progress", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert "1/1" not in r.stderr and "1page" in r.stderr.replace(" ", "")  # unknown total: a count


def test_dedup_of_inputs_without_pages_is_exit_1_and_creates_no_store(tmp_path):
    """An empty folder, or one without pages, is a mistake to report (issue 34), not 'pages 0'."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "style.css").write_text("p { color: red }")
    r = run("dedup", tmp_path / "in", "--db", tmp_path / "s.db")
    assert "no pages in" in assert_one_line_error(r, 1)
    assert not (tmp_path / "s.db").exists()

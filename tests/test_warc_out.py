"""A deduplicated WARC out (issue 37, item 4): ``neardup dedup --warc-out`` copies every record,
turns a response whose payload digest an earlier one has into an identical-payload-digest
revisit that refers to it, and keeps near and main-text-exact copies whole with their verdict
in a metadata record; read back with warcio."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.cli import main

SITE = "https://news.example/"


def bodies(sample_pages) -> list[bytes]:
    """Two pages of the sample from two different sites (two different articles)."""
    pages = list(sample_pages.values())
    first = pages[0]
    second = next(p for p in pages if p.name.split("-")[0] != first.name.split("-")[0])
    return [p.content if isinstance(p.content, bytes) else p.content.encode() for p in (first, second)]


def write_warc(path: Path, sample_pages, gz: bool) -> None:
    """A page; its byte-identical copy under another URL; the same article with another
    sidebar (equal main text, other bytes); an unrelated page; a stylesheet twice."""
    a, other = bodies(sample_pages)
    html = [("Content-Type", "text/html; charset=utf-8")]
    sidebar = a.replace(b"</body>", b"<aside><p>Related: five other stories today</p></aside></body>", 1)
    captures = [("a.html", a, html), ("a-copy.html", a, html), ("a-print.html", sidebar, html),
                ("other.html", other, html), ("s.css", b"p { color: red }", [("Content-Type", "text/css")]),
                ("s2.css", b"p { color: red }", [("Content-Type", "text/css")])]
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gz, warc_version="1.1")
        w.write_record(w.create_warcinfo_record(path.name, {"software": "test"}))
        for i, (name, body, headers) in enumerate(captures):
            w.write_record(w.create_warc_record(SITE + name, "response", payload=io.BytesIO(body),
                                                http_headers=StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1"),
                                                warc_headers_dict={"WARC-Date": f"2024-05-06T07:0{i}:00Z"}))


def records(path: Path) -> list:
    with open(path, "rb") as fh:
        out = []
        for r in ArchiveIterator(fh):
            out.append((r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), dict(r.rec_headers.headers),
                        r.content_stream().read()))
        return out


def check_copy(src: Path, out: Path, stats: dict) -> None:
    """``out`` is ``src`` deduplicated: the page's byte copy and the second stylesheet are
    revisits of the first capture of their payloads, the print page (equal main text, other
    bytes) is kept whole with its verdict in a metadata record, every kept response is the
    input's bytes."""
    got = records(out)
    kinds = [(t, (u or "").removeprefix(SITE)) for t, u, _, _ in got]
    assert kinds == [("warcinfo", ""), ("response", "a.html"), ("revisit", "a-copy.html"),
                     ("response", "a-print.html"), ("metadata", "urn:neardup:verdict:" + SITE + "a-print.html"),
                     ("response", "other.html"), ("response", "s.css"), ("revisit", "s2.css")], kinds
    original = {u: h for t, u, h, _ in got if t == "response"}
    for t, u, h, payload in got:
        if t == "revisit":
            target = SITE + ("a.html" if u.endswith("a-copy.html") else "s.css")
            assert h["WARC-Profile"].endswith("/revisit/identical-payload-digest") and payload == b""
            assert h["WARC-Refers-To-Target-URI"] == target
            assert h["WARC-Refers-To"] == original[target]["WARC-Record-ID"]
            assert h["WARC-Refers-To-Date"] == original[target]["WARC-Date"]
        if t == "metadata":
            verdict = json.loads(payload)["neardup"]
            assert verdict["status"] in ("exact", "near")
            assert SITE + "a.html" in (verdict.get("match_url"), verdict.get("match"))
            assert h["WARC-Refers-To"] == original[u.removeprefix("urn:neardup:verdict:")]["WARC-Record-ID"]
    src_payloads = {u: p for t, u, _, p in records(src) if t == "response"}
    assert all(src_payloads[u] == p for t, u, _, p in got if t == "response")
    assert (stats["records_in"], stats["revisits"], stats["metadata"]) == (7, 2, 1)


def test_the_deduplicated_warc(tmp_path, sample_pages):
    for gz in (True, False):
        src = tmp_path / (f"crawl{int(gz)}.warc" + (".gz" if gz else ""))
        out = tmp_path / f"dedup{int(gz)}.warc.gz"
        write_warc(src, sample_pages, gz)
        r = CliRunner().invoke(main, ["dedup", str(src), "--db", str(tmp_path / f"s{int(gz)}.db"), "--warc-out",
                                      str(out), "--jobs", "1"])
        assert r.exit_code == 0, r.output
        stats = json.loads(r.stdout.strip().splitlines()[-1])["warc_out"]
        check_copy(src, out, stats)
        assert stats["bytes_out"] < stats["bytes_in"] or not gz


def test_the_deduplicated_warc_of_the_batch_path(tmp_path, sample_pages):
    """``dedup --batch --warc-out`` writes the same copy, its metadata record holding the
    batch row (status, cluster, canonical, match)."""
    src = tmp_path / "crawl.warc.gz"
    write_warc(src, sample_pages, True)
    out = tmp_path / "batch.warc.gz"
    r = CliRunner().invoke(main, ["dedup", "--batch", str(src), "--warc-out", str(out), "--jobs", "1"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.stdout.strip().splitlines()[-1])["warc_out"]
    check_copy(src, out, stats)
    meta = [json.loads(p)["neardup"] for t, _, _, p in records(out) if t == "metadata"]
    assert meta[0]["url"] == SITE + "a-print.html" and meta[0]["canonical"] == SITE + "a.html"
    r = CliRunner().invoke(main, ["dedup", "--batch", str(src), "--warc-out", str(tmp_path / "m.warc.gz"),
                                  "--method", "minhash"])
    assert r.exit_code == 2 and "--warc-out" in r.output


def write_capture(path: Path, captures: list[tuple[str, bytes, str]]) -> None:
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        for name, body, date in captures:
            kind = "text/css" if name.endswith(".css") else "text/html; charset=utf-8"
            w.write_record(w.create_warc_record(SITE + name, "response", payload=io.BytesIO(body),
                                                http_headers=StatusAndHeaders("200 OK", [("Content-Type", kind)],
                                                                              protocol="HTTP/1.1"),
                                                warc_headers_dict={"WARC-Date": date}))


def test_a_second_crawl_refers_to_the_first_crawls_captures(tmp_path, sample_pages):
    """With a store, the originals outlive the run: the second crawl's unchanged page and
    stylesheet become revisits of the records the first crawl's copy kept whole (its
    WARC-Record-ID, URI and date); a changed page stays a response; a maximum original age
    shorter than the week between the crawls keeps them whole and makes them the originals of
    the third crawl; without a store (--batch) the second crawl alone has nothing to refer to."""
    a, other = bodies(sample_pages)
    css = b"body { margin: 0 } " * 20
    first, second, third = (tmp_path / f"crawl{i}.warc.gz" for i in (1, 2, 3))
    write_capture(first, [("a.html", a, "2024-05-01T00:00:00Z"), ("s.css", css, "2024-05-01T00:00:01Z")])
    write_capture(second, [("a.html", a, "2024-05-08T00:00:00Z"), ("s.css", css, "2024-05-08T00:00:01Z"),
                           ("b.html", other, "2024-05-08T00:00:02Z")])
    write_capture(third, [("a.html", a, "2024-05-09T00:00:00Z")])
    db = str(tmp_path / "s.db")

    def run(src: Path, name: str, *policy: str) -> list:
        out = tmp_path / f"{name}.warc.gz"
        r = CliRunner().invoke(main, ["dedup", str(src), "--db", db, "--warc-out", str(out), "--jobs", "1", *policy])
        assert r.exit_code == 0, r.output
        return records(out)

    kept = {u: h for t, u, h, _ in run(first, "o1") if t == "response"}
    got = run(second, "o2")
    assert [(t, u.removeprefix(SITE)) for t, u, _, _ in got] == [("revisit", "a.html"), ("revisit", "s.css"),
                                                                 ("response", "b.html")]
    for _, u, h, _ in got[:2]:
        assert h["WARC-Refers-To"] == kept[u]["WARC-Record-ID"] and h["WARC-Refers-To-Date"] == kept[u]["WARC-Date"]
    # a fresh store, the same two crawls, originals at most a day old: the week-old ones are not
    db = str(tmp_path / "aged.db")
    run(first, "p1", "--max-original-age", "86400")
    assert [t for t, *_ in run(second, "p2", "--max-original-age", "86400")] == ["response"] * 3
    again = run(third, "p3", "--max-original-age", "86400")
    assert [t for t, *_ in again] == ["revisit"]
    assert again[0][2]["WARC-Refers-To-Date"] == "2024-05-08T00:00:00Z"
    out = tmp_path / "alone.warc.gz"
    r = CliRunner().invoke(main, ["dedup", "--batch", str(second), "--warc-out", str(out), "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert [t for t, *_ in records(out)] == ["response"] * 3


def test_warc_out_needs_warc_inputs(tmp_path, sample_pages):
    src = tmp_path / "crawl.warc.gz"
    write_warc(src, sample_pages, True)
    r = CliRunner().invoke(main, ["dedup", str(tmp_path), "--db", str(tmp_path / "d.db"), "--warc-out",
                                  str(tmp_path / "o.warc.gz")])
    assert r.exit_code == 2 and "--warc-out" in r.output
    r = CliRunner().invoke(main, ["dedup", str(src), "--db", str(tmp_path / "s.db"), "--warc-out", str(src)])
    assert r.exit_code != 0 and "Traceback" not in r.output


def revisited(path: Path) -> set[str]:
    return {(u or "").removeprefix(SITE) for t, u, _, _ in records(path) if t == "revisit"}


def test_the_archive_policies(tmp_path, sample_pages):
    """A minimum payload keeps the small stylesheet whole; a blackout longer than the minute
    between the copies keeps both; a maximum age shorter than it too (the newer copy is then the
    original of later ones); without them both are revisits."""
    src = tmp_path / "crawl.warc.gz"
    write_warc(src, sample_pages, True)  # a-copy.html one minute after a.html, s2.css one after s.css

    def run(name: str, *policy: str) -> set[str]:
        out = tmp_path / f"{name}.warc.gz"
        r = CliRunner().invoke(main, ["dedup", str(src), "--db", str(tmp_path / f"{name}.db"), "--warc-out", str(out),
                                      "--jobs", "1", *policy])
        assert r.exit_code == 0, r.output
        return revisited(out)

    assert run("none") == {"a-copy.html", "s2.css"}
    assert run("small", "--min-payload", "100") == {"a-copy.html"}
    assert run("blackout", "--blackout", "120") == set()
    assert run("age", "--max-original-age", "30") == set()
    assert run("old-enough", "--max-original-age", "86400", "--blackout", "30") == {"a-copy.html", "s2.css"}
    r = CliRunner().invoke(main, ["dedup", str(src), "--db", str(tmp_path / "x.db"), "--blackout", "5"])
    assert r.exit_code == 2 and "--warc-out" in r.output

"""Batch input readers: directories with urls.tsv, JSONL (plain and gzip), WARC (plain and
gzip, written here with warcio from the real sample pages)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import tracemalloc
import zlib
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest
from checks import present
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup import InputFormatError, Page
from neardup.ingest.inputs import count_items, read_input
from neardup.ingest.items import SKIPS, InputItem

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


@cache
def tsv_rows() -> list[dict]:
    with open(SAMPLE / "urls.tsv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@cache
def body(name: str) -> bytes:
    return gzip.decompress((SAMPLE / "pages" / f"{name}.html.gz").read_bytes())


def url(name: str) -> str:
    return next(r["url"] for r in tsv_rows() if r["file"] == f"pages/{name}.html.gz")


# -- WARC writing with warcio ----------------------------------------------------------------

WARC_PAGES = ["newyorker-teas-2019", "npr-dylann-roof-2016", "japan-cnet-apple-news-2019",
              "politico-student-debt-2022"]
WARC_DATES = ["2019-05-14T10:00:00Z", "2016-12-15T12:30:00Z", "2019-04-13T01:02:03Z", "2022-10-18T00:00:00Z"]


def write_warc(path: Path, names=WARC_PAGES, *, gzip_records: bool, extra: bool = True) -> list[int]:
    """Write one response record per page (plus warcinfo, a request, a 404 and a
    redirect when ``extra``); returns the file offset where each page's response starts."""
    offsets = []
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gzip_records)
        if extra:
            w.write_record(w.create_warcinfo_record(path.name, {"software": "neardup tests"}))
        for name, date in zip(names, WARC_DATES * 10):
            target = url(name)
            if extra:
                req = w.create_warc_record(
                    target, "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                    warc_headers_dict={"WARC-Date": date})
                w.write_record(req)
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                               ("Server", "test")], protocol="HTTP/1.1")
            rec = w.create_warc_record(target, "response", payload=io.BytesIO(body(name)),
                                       http_headers=http, warc_headers_dict={"WARC-Date": date})
            offsets.append(fh.tell())
            w.write_record(rec)
        if extra:
            http = StatusAndHeaders("404 Not Found", [("Content-Type", "text/html; charset=utf-8")],
                                    protocol="HTTP/1.1")
            w.write_record(w.create_warc_record("https://gone.example/x", "response",
                                                payload=io.BytesIO(b"<html><body>not found</body></html>"),
                                                http_headers=http))
            http = StatusAndHeaders("301 Moved Permanently", [("Location", "https://x.example/")],
                                    protocol="HTTP/1.1")
            w.write_record(w.create_warc_record("https://moved.example/", "response",
                                                payload=io.BytesIO(b""), http_headers=http))
    return offsets


def pages_of(items: list[InputItem]) -> list[Page]:
    return [it.page for it in items if it.page is not None]


def errors_of(items: list[InputItem]) -> list[InputItem]:
    return [it for it in items if it.page is None and it.skip is None]


def skips_of(items: list[InputItem]) -> list[str | None]:
    return [it.skip for it in items if it.skip is not None]


# -- directories ------------------------------------------------------------------------------

def test_sample_directory_uses_urls_tsv():
    items = list(read_input(SAMPLE))
    assert len(items) == 26
    assert errors_of(items) == []
    by_file = {Path(it.source).name: it.page for it in items}
    assert len(by_file) == 26
    for row in tsv_rows():
        name = Path(row["file"]).name
        page = present(by_file[name])
        assert page.url == row["url"], name
        assert page.content == gzip.decompress((SAMPLE / row["file"]).read_bytes())
    # capture order (the list's order for equal dates), each page at its capture date
    when = {Path(r["file"]).name: datetime.fromisoformat(r["captured"]).replace(tzinfo=UTC).timestamp()
            for r in tsv_rows()}
    assert [present(it.page).fetched_at for it in items] == sorted(when.values())
    assert all(present(it.page).fetched_at == when[Path(it.source).name] for it in items)


def test_directory_without_urls_tsv_uses_file_urls(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.html").write_bytes(body("newyorker-teas-2019"))
    (tmp_path / "sub" / "b.htm.gz").write_bytes(gzip.compress(body("npr-dylann-roof-2016")))
    (tmp_path / "notes.txt").write_text("plain text notes " * 20, encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "broken.html.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    items = list(read_input(tmp_path))
    names = [Path(it.source).name for it in items]
    assert sorted(names) == ["a.html", "b.htm.gz", "broken.html.gz", "notes.txt"]
    good = {Path(it.source).name: it.page for it in items if it.page}
    assert good["a.html"].url == (tmp_path / "a.html").resolve().as_uri()
    assert good["a.html"].content == body("newyorker-teas-2019")
    assert good["b.htm.gz"].content == body("npr-dylann-roof-2016")
    assert good["notes.txt"].headers == {"content-type": "text/plain"}
    (bad,) = errors_of(items)
    assert "broken.html.gz" in bad.source and "broken.html.gz" in present(bad.error)


def test_urls_tsv_in_subfolder_maps_files_below_it(tmp_path):
    site = tmp_path / "site"
    (site / "pages").mkdir(parents=True)
    (site / "pages" / "teas.html").write_bytes(body("newyorker-teas-2019"))
    (site / "urls.tsv").write_text("file\turl\npages/teas.html\thttps://teas.example/t\n", encoding="utf-8")
    (tmp_path / "loose.html").write_bytes(body("npr-dylann-roof-2016"))
    pages = {Path(it.source).name: it.page for it in read_input(tmp_path)}
    assert present(pages["teas.html"]).url == "https://teas.example/t"
    assert present(pages["loose.html"]).url.startswith("file://")


# -- JSONL ----------------------------------------------------------------------------------------

def _jsonl_lines() -> list[str]:
    return [
        json.dumps({"url": url("newyorker-teas-2019"), "html": body("newyorker-teas-2019").decode("utf-8"),
                    "headers": {"Content-Type": "text/html; charset=utf-8"}, "fetched_at": 1557834611.7,
                    "priority": 2}),
        '{"url": "https://broken.example/", "html": "<p>unterminated',
        json.dumps({"html": "<p>no url here</p>"}),
        "",
        json.dumps({"url": "https://text.example/t", "text": "Just some plain text words " * 5}),
        json.dumps([1, 2, 3]),
        json.dumps({"url": "https://h.example/", "html": "<p>x</p>", "headers": ["not", "an", "object"]}),
        json.dumps({"url": url("japan-cnet-apple-news-2019"),
                    "html": body("japan-cnet-apple-news-2019").decode("utf-8")}, ensure_ascii=False),
    ]


def _check_jsonl(items: list[InputItem], path: Path) -> None:
    assert len(items) == 7  # the blank line is skipped
    assert [it.page is not None for it in items] == [True, False, False, True, False, False, True]
    first, text, japan = pages_of(items)
    assert first.url == url("newyorker-teas-2019")
    assert first.content == body("newyorker-teas-2019").decode("utf-8")
    assert first.headers == {"Content-Type": "text/html; charset=utf-8"}
    assert first.fetched_at == 1557834611.7 and first.priority == 2
    assert text.url == "https://text.example/t"
    assert text.headers == {"content-type": "text/plain"}
    assert japan.content == body("japan-cnet-apple-news-2019").decode("utf-8")
    sources = [it.source for it in items]
    assert sources == [f"{path}:{n}" for n in (1, 2, 3, 5, 6, 7, 8)]
    for it in errors_of(items):
        assert present(it.error).startswith(f"{path}:")
    assert "invalid JSON" in present(items[1].error)
    assert "url" in present(items[2].error)


def test_jsonl(tmp_path):
    path = tmp_path / "pages.jsonl"
    path.write_text("\n".join(_jsonl_lines()) + "\n", encoding="utf-8")
    _check_jsonl(list(read_input(path)), path)


def test_jsonl_gz(tmp_path):
    path = tmp_path / "pages.jsonl.gz"
    path.write_bytes(gzip.compress(("\n".join(_jsonl_lines()) + "\n").encode("utf-8")))
    _check_jsonl(list(read_input(path)), path)


def test_truncated_jsonl_gz_reports_an_error_after_good_lines(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    lines = [json.dumps({"url": f"https://x.example/{i}", "text": f"line {i} " * 50}) for i in range(200)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])
    items = list(read_input(path))
    good = pages_of(items)
    assert 0 < len(good) < 200
    assert [p.url for p in good] == [f"https://x.example/{i}" for i in range(len(good))]
    errs = errors_of(items)
    assert errs and str(path) in present(errs[-1].error)
    assert items[-1] is errs[-1]


def test_corrupt_jsonl_gz_reports_an_error_not_a_crash(tmp_path):
    """Damaged (not just cut) gzip data raises zlib.error, which is not an OSError."""
    path = tmp_path / "bad.jsonl.gz"
    lines = [json.dumps({"url": f"https://x.example/{i}", "text": f"line {i} " * 50}) for i in range(200)]
    data = bytearray(gzip.compress(("\n".join(lines) + "\n").encode()))
    mid = len(data) // 2
    data[mid:mid + 64] = bytes(64)
    path.write_bytes(bytes(data))
    items = list(read_input(path))
    errs = errors_of(items)
    assert errs and str(path) in present(errs[-1].error)
    assert items[-1] is errs[-1] and "corrupt" in present(errs[-1].error)


def test_jsonl_gz_with_broken_deflate_data(tmp_path):
    """Garbage where the first deflate block starts: zlib.error, reported as an item."""
    path = tmp_path / "bad.jsonl.gz"
    data = bytearray(gzip.compress(b'{"url": "https://x.example/", "text": "words words"}\n' * 50))
    data[12:44] = b"\xff" * 32
    path.write_bytes(bytes(data))
    items = list(read_input(path))
    assert pages_of(items) == []
    (err,) = errors_of(items)
    assert str(path) in present(err.error)


def test_ndjson_suffix(tmp_path):
    path = tmp_path / "x.ndjson"
    path.write_text(json.dumps({"url": "https://n.example/", "text": "words " * 20}) + "\n")
    (item,) = read_input(path)
    assert present(item.page).url == "https://n.example/"


# -- WARC ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True], ids=["warc", "warc.gz"])
def test_warc_round_trip(tmp_path, gz):
    path = tmp_path / ("crawl.warc.gz" if gz else "crawl.warc")
    write_warc(path, gzip_records=gz)
    items = list(read_input(path))
    assert errors_of(items) == []
    pages = pages_of(items)
    # only the 200 responses: not warcinfo, requests, the 404 or the redirect
    assert [p.url for p in pages] == [url(n) for n in WARC_PAGES]
    assert skips_of(items) == ["non-200", "non-200"]
    for p, name, date in zip(pages, WARC_PAGES, WARC_DATES):
        assert p.content == body(name)  # (bytes-like content compares equal to its bytes)
        ctype = {k.lower(): v for k, v in present(p.headers).items()}["content-type"]
        assert ctype == "text/html; charset=utf-8"
        expected = datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        assert p.fetched_at == pytest.approx(expected)
    for it in items:
        assert str(path) in it.source


def _chunked(data: bytes, size: int = 4000) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size]) for i in range(0, len(data), size)]
    return b"".join(parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("encoding", ["content-gzip", "transfer-chunked"])
def test_warc_http_encodings_are_decoded(tmp_path, encoding):
    """Crawlers (wget, Heritrix, warcio capture) store the HTTP payload as received: a
    gzip Content-Encoding or a chunked Transfer-Encoding must be undone before extraction."""
    import neardup

    name = "newyorker-teas-2019"
    original = body(name)
    if encoding == "content-gzip":
        headers, payload = [("Content-Encoding", "gzip")], gzip.compress(original)
    else:
        headers, payload = [("Transfer-Encoding", "chunked")], _chunked(original)
    path = tmp_path / "enc.warc.gz"
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"), *headers],
                                protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(url(name), "response", payload=io.BytesIO(payload), http_headers=http))
    items = list(read_input(path))
    assert errors_of(items) == []
    (page,) = pages_of(items)
    assert page.url == url(name)
    fp = neardup.fingerprint(page.content, url=page.url, headers=page.headers)
    assert fp.digest == neardup.fingerprint(original, url=url(name)).digest


def test_truncated_warc_gz(tmp_path):
    path = tmp_path / "cut.warc.gz"
    offsets = write_warc(path, gzip_records=True, extra=False)
    data = path.read_bytes()
    last = offsets[-1]
    cut = last + (len(data) - last) // 2
    path.write_bytes(data[:cut])
    items = list(read_input(path))
    good = pages_of(items)
    assert [p.url for p in good] == [url(n) for n in WARC_PAGES[:-1]]
    for p, name in zip(good, WARC_PAGES):
        assert p.content == body(name)  # (bytes-like content compares equal to its bytes)
    errs = errors_of(items)
    assert errs, "a truncated WARC must be reported"
    assert all(str(path) in present(e.error) for e in errs)
    assert items[-1].page is None


def test_truncated_plain_warc(tmp_path):
    path = tmp_path / "cut.warc"
    offsets = write_warc(path, gzip_records=False, extra=False)
    data = path.read_bytes()
    last = offsets[-1]
    path.write_bytes(data[: last + (len(data) - last) // 2])
    items = list(read_input(path))
    good = pages_of(items)
    assert [p.url for p in good] == [url(n) for n in WARC_PAGES[:-1]]
    for p, name in zip(good, WARC_PAGES):
        assert p.content == body(name)  # (bytes-like content compares equal to its bytes)
    errs = errors_of(items)
    assert errs and all(str(path) in present(e.error) for e in errs)


def test_non_warc_with_warc_extension(tmp_path):
    path = tmp_path / "fake.warc"
    path.write_bytes(body("newyorker-teas-2019"))
    with pytest.raises(InputFormatError) as exc:
        list(read_input(path))
    assert str(path) in str(exc.value)


def test_gzipped_html_named_warc_gz_is_not_silently_empty(tmp_path):
    """A .warc.gz that is a gzip file but not a WARC must not read as an empty crawl."""
    path = tmp_path / "fake.warc.gz"
    path.write_bytes(gzip.compress(body("newyorker-teas-2019")))
    try:
        items = list(read_input(path))
    except InputFormatError as exc:
        assert str(path) in str(exc)
    else:
        assert errors_of(items), "no page and no error: the bad file went unnoticed"
        assert all(str(path) in present(e.error) for e in errors_of(items))


@pytest.mark.parametrize("name", ["pages.csv", "crawl.arc", "page.pdf", "data.json"])
def test_unknown_extension(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"whatever")
    with pytest.raises(InputFormatError) as exc:
        read_input(path)
    assert name in str(exc.value)


def test_missing_input(tmp_path):
    with pytest.raises(InputFormatError):
        read_input(tmp_path / "nope.jsonl")


def test_single_html_file(tmp_path):
    path = tmp_path / "one.html.gz"
    path.write_bytes(gzip.compress(body("npr-dylann-roof-2016")))
    (item,) = read_input(path)
    assert present(item.page).content == body("npr-dylann-roof-2016")
    assert present(item.page).url == path.resolve().as_uri()


# -- hostile and damaged input (issue 11) ------------------------------------------------------

def gzip_bomb(size: int) -> bytes:
    """gzip data that inflates to ``size`` zero bytes (about 1 KB per MiB)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    out = [comp.compress(block) for _ in range(size >> 20)]
    return b"".join(out) + comp.flush()


def peak_traced(fn):
    """(result, peak bytes allocated while running fn) with tracemalloc."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_gzip_bomb_file_is_bounded(tmp_path):
    (tmp_path / "bomb.html.gz").write_bytes(gzip_bomb(512 << 20))  # 512 MiB inflated, 0.5 MB on disk
    (tmp_path / "ok.html.gz").write_bytes(gzip.compress(body("npr-dylann-roof-2016")))
    items, peak = peak_traced(lambda: list(read_input(tmp_path)))
    (bomb,) = errors_of(items)
    assert bomb.reason == "too-large" and "bomb.html.gz" in present(bomb.error)
    assert "inflates to over 16,777,216" in present(bomb.error)
    assert [p.content for p in pages_of(items)] == [body("npr-dylann-roof-2016")]
    assert peak < 64 << 20  # the limit plus one read, not the inflated size


def test_single_gzip_bomb_file_is_an_item_not_a_crash(tmp_path):
    path = tmp_path / "bomb.html.gz"
    path.write_bytes(gzip_bomb(64 << 20))
    (item,) = read_input(path)
    assert item.page is None and item.reason == "too-large"


def test_big_plain_file_is_refused_without_reading(tmp_path):
    path = tmp_path / "big.html"
    path.write_bytes(body("npr-dylann-roof-2016"))
    (item,) = read_input(path, max_bytes=1000)
    assert item.reason == "too-large" and "over the 1,000-byte page size limit" in present(item.error)


def _warc_with(path: Path, gz: bool, http_headers: list, payload: bytes) -> None:
    """The four WARC_PAGES, then one response with these headers and payload, then a fifth
    good page."""
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gz)
        for name in WARC_PAGES + ["newyorker-teas-2019"]:
            if name == "newyorker-teas-2019" and fh.tell():
                http = StatusAndHeaders("200 OK", http_headers, protocol="HTTP/1.1")
                w.write_record(w.create_warc_record("https://bomb.example/", "response",
                                                    payload=io.BytesIO(payload), http_headers=http))
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(url(name), "response", payload=io.BytesIO(body(name)),
                                                http_headers=http))


@pytest.mark.parametrize("gz", [False, True], ids=["warc", "warc.gz"])
def test_warc_content_encoding_bomb_is_bounded(tmp_path, gz):
    path = tmp_path / ("bomb.warc.gz" if gz else "bomb.warc")
    _warc_with(path, gz, [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], gzip_bomb(256 << 20))
    items, peak = peak_traced(lambda: list(read_input(path)))
    (bomb,) = errors_of(items)
    assert bomb.reason == "too-large" and "Content-Encoding gzip inflates to over" in present(bomb.error)
    assert "https://bomb.example/" in bomb.source
    assert len(pages_of(items)) == 5
    assert peak < 96 << 20


def test_jsonl_hostile_lines(tmp_path):
    path = tmp_path / "hostile.jsonl"
    good = json.dumps({"url": url("npr-dylann-roof-2016"), "html": body("npr-dylann-roof-2016").decode()})
    lines = [
        "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads
        '{"url": "https://x.example/' + "{" * 50_000 + '", "html": "' + "[" * 50_000 + '"}',
        '{"url": "https://s.example/\\ud800", "html": "<p>x</p>"}',  # a lone surrogate: a URL error later
        '{"url": "https://s.example/a", "html": "<p>lone \\udfff surrogate</p>"}',
        '{"url": "https://n.example/", "html": "<p>x</p>", "fetched_at": 1e400}',
        '{"url": "https://n.example/", "html": "<p>x</p>", "fetched_at": ' + "9" * 400 + "}",
        '{"url": "https://n.example/", "html": "<p>x</p>", "priority": true}',
        '{"url": "https://n.example/", "html": "<p>x</p>", "headers": {"Content-Type": 5}}',
        good,
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    items = list(read_input(path))
    assert len(items) == len(lines)
    assert [it.reason for it in items] == ["bad-json", None, None, None, "bad-record", "bad-record", "bad-record",
                                           "bad-record", None]
    assert "nested too deeply" in present(items[0].error)
    assert present(items[2].page).url == "https://s.example/\ud800"
    assert present(items[-1].page).url == url("npr-dylann-roof-2016")


def test_jsonl_line_over_the_limit(tmp_path):
    path = tmp_path / "long.jsonl"
    good = json.dumps({"url": "https://ok.example/", "text": "words " * 20})
    path.write_text(json.dumps({"url": "https://long.example/", "text": "x" * 50_000}) + "\n" + good + "\n")
    items = list(read_input(path, max_bytes=10_000))
    assert [it.reason for it in items] == ["bad-json", None]
    assert "line is over" in present(items[0].error) and present(items[1].page).url == "https://ok.example/"


def test_warc_damaged_header_is_reported(tmp_path):
    path = tmp_path / "damaged.warc"
    offsets = write_warc(path, WARC_PAGES * 2, gzip_records=False, extra=False)
    data = path.read_bytes()
    i = data.index(b"WARC-Type: response", offsets[3])
    path.write_bytes(data[:i] + b"WARC-Type: respXnse" + data[i + 19:])
    items = list(read_input(path))
    assert len(pages_of(items)) == 7
    (err,) = errors_of(items)
    assert err.reason == "warc-header" and "damaged WARC header" in present(err.error) and "#4" in err.source


@pytest.mark.parametrize("damage", ["version", "content-length"])
def test_plain_warc_resyncs_after_a_garbled_record(tmp_path, damage):
    path = tmp_path / "garbled.warc"
    offsets = write_warc(path, WARC_PAGES * 2, gzip_records=False, extra=False)
    data = bytearray(path.read_bytes())
    if damage == "version":
        data[offsets[3]:offsets[3] + 8] = b"WARX/1.0"
    else:
        i = data.index(b"Content-Length: ", offsets[3]) + 16
        data[i:i + 3] = b"9x9"
    path.write_bytes(bytes(data))
    items = list(read_input(path))
    names = WARC_PAGES * 2
    assert [p.url for p in pages_of(items)] == [url(n) for n in names[:3] + names[4:]]
    (err,) = errors_of(items)
    assert err.reason == "warc-corrupt" and str(path) in present(err.error) and "skipped" in present(err.error)


def test_warc_gz_resyncs_after_a_corrupt_member(tmp_path):
    path = tmp_path / "corrupt.warc.gz"
    offsets = write_warc(path, WARC_PAGES * 2, gzip_records=True, extra=False)
    data = bytearray(path.read_bytes())
    for k in range(offsets[3] + 100, offsets[3] + 164):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    items = list(read_input(path))
    names = WARC_PAGES * 2
    assert [p.url for p in pages_of(items)] == [url(n) for n in names[:3] + names[4:]]
    for p, name in zip(pages_of(items), names[:3] + names[4:]):
        assert p.content == body(name)  # (bytes-like content compares equal to its bytes)
    (err,) = errors_of(items)
    assert err.reason == "warc-corrupt" and "corrupt data after record 3" in present(err.error)
    assert f"at byte {offsets[4]:,}" in present(err.error)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads every folder")
def test_unreadable_subfolder_is_reported(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.html").write_bytes(body("npr-dylann-roof-2016"))
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "two.html").write_bytes(body("newyorker-teas-2019"))
    locked.chmod(0)
    try:
        items = list(read_input(tmp_path))
    finally:
        locked.chmod(0o755)
    assert len(pages_of(items)) == 1
    (err,) = errors_of(items)
    assert err.reason == "unreadable" and "locked" in present(err.error)


def test_symlink_loop_in_folder_terminates(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "one.html").write_bytes(body("npr-dylann-roof-2016"))
    (tmp_path / "d" / "loop").symlink_to(tmp_path)
    items = list(read_input(tmp_path))
    assert len(pages_of(items)) == 1 and not errors_of(items)


def test_unlistable_subfolder_is_reported_even_as_root(tmp_path, monkeypatch):
    """The same as above where permissions do not bind (root): listing the folder fails."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.html").write_bytes(body("npr-dylann-roof-2016"))
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "two.html").write_bytes(body("newyorker-teas-2019"))
    real = os.scandir

    def scandir(path="."):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    items = list(read_input(tmp_path))
    assert len(pages_of(items)) == 1
    (err,) = errors_of(items)
    assert err.reason == "unreadable" and "locked" in present(err.error) and "Permission denied" in present(err.error)


def test_warc_only_html_200_responses_are_pages(tmp_path):
    """CSS, scripts, JSON, robots.txt, images and PDFs are not pages, nor 404s, redirects and
    revisits: each is an item with a skip reason (counted), never a page or an error."""
    path = tmp_path / "mixed.warc.gz"
    page = body(WARC_PAGES[0])
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)

        def response(target: str, status: str, ctype: str | None, payload: bytes) -> None:
            headers = [("Content-Type", ctype)] if ctype else []
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(target, "response", payload=io.BytesIO(payload), http_headers=http))

        response("https://a.example/", "200 OK", "text/html; charset=utf-8", page)
        response("https://a.example/style.css", "200 OK", "text/css", b"body { color: red }")
        response("https://a.example/app.js", "200 OK", "application/javascript", b"var x = 1;")
        response("https://a.example/data.json", "200 OK", "application/json", b'{"a": 1}')
        response("https://a.example/robots.txt", "200 OK", "text/plain", b"User-agent: *")
        response("https://a.example/logo.png", "200 OK", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(100))
        response("https://a.example/doc.pdf", "200 OK", "application/pdf", b"%PDF-1.4 ...")
        response("https://a.example/xhtml", "200 OK", "application/xhtml+xml", page)
        response("https://a.example/untyped", "200 OK", None, page)
        response("https://a.example/gone", "404 Not Found", "text/html", b"<html>gone</html>")
        response("https://a.example/moved", "301 Moved Permanently", None, b"")
        revisit = w.create_revisit_record("https://a.example/", digest="sha1:AAAA", refers_to_uri="https://a.example/",
                                          refers_to_date="2020-01-01T00:00:00Z")
        w.write_record(revisit)
    items = list(read_input(path))
    assert errors_of(items) == []
    assert [p.url for p in pages_of(items)] == ["https://a.example/", "https://a.example/xhtml",
                                                "https://a.example/untyped"]
    assert skips_of(items) == ["non-html"] * 6 + ["non-200", "non-200", "revisit"]
    assert all(s in SKIPS for s in skips_of(items))


def test_count_items(tmp_path):
    (tmp_path / "a.html").write_text("<p>a</p>")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "c.css").write_text("c")
    assert count_items([tmp_path]) == 2
    assert count_items([tmp_path, SAMPLE]) == 28
    write_warc(tmp_path / "x.warc", gzip_records=False)
    assert count_items([SAMPLE, tmp_path / "x.warc"]) is None


# -- urls.tsv: URLs, fetch times and the capture order (issue 34) ------------------------------

PAGE_HTML = "<html><body><p>" + " ".join(f"word{i}" for i in range(60)) + "</p></body></html>"


def _listed_folder(tmp_path: Path, rows: list[tuple[str, str, str]], extra: tuple[str, ...] = ()) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    for name, _, _ in rows:
        (folder / name).write_text(PAGE_HTML + f"<!-- {name} -->")
    for name in extra:
        (folder / name).write_text(PAGE_HTML)
    lines = ["file\turl\tcaptured"] + ["\t".join(r) for r in rows]
    (folder / "urls.tsv").write_text("\n".join(lines) + "\n")
    return folder


def test_listed_files_come_in_capture_order_with_their_times(tmp_path):
    folder = _listed_folder(tmp_path, [("a.html", "https://a.example/new", "2022-08-10"),
                                       ("b.html", "https://a.example/orig", "2019-05-14"),
                                       ("c.html", "https://mirror.example/orig", "2019-05-14"),
                                       ("d.html", "https://a.example/epoch", "1553126400")], extra=("0-unlisted.html",))
    items = list(read_input(str(folder)))
    assert [Path(it.source).name for it in items] == ["d.html", "b.html", "c.html", "a.html", "0-unlisted.html"]
    times = [it.page.fetched_at for it in items if it.page is not None]
    assert times[:4] == [1553126400.0, datetime(2019, 5, 14, tzinfo=UTC).timestamp(),
                         datetime(2019, 5, 14, tzinfo=UTC).timestamp(), datetime(2022, 8, 10, tzinfo=UTC).timestamp()]
    assert times[4] is None  # not listed: no time given, the fetch is "now"
    assert items[1].page is not None and items[1].page.url == "https://a.example/orig"


def test_a_bad_time_in_urls_tsv_is_that_file_s_error(tmp_path):
    folder = _listed_folder(tmp_path, [("a.html", "https://a.example/1", "yesterday"),
                                       ("b.html", "https://a.example/2", "2020-01-01T12:00:00Z")])
    items = {Path(it.source).name: it for it in read_input(str(folder))}
    assert items["a.html"].page is None and items["a.html"].reason == "bad-time"
    assert "urls.tsv:2: captured 'yesterday' is not a time" in (items["a.html"].error or "")
    page = items["b.html"].page
    assert page is not None and page.fetched_at == datetime(2020, 1, 1, 12, tzinfo=UTC).timestamp()


def test_the_sample_is_read_originals_first_at_its_capture_times():
    sample = Path(__file__).resolve().parents[1] / "examples" / "sample"
    names = [Path(it.source).name for it in read_input(str(sample))]
    assert names.index("newyorker-teas-2019.html.gz") < names.index("newyorker-teas-2019-mirror.html.gz")
    pages = [it.page for it in read_input(str(sample)) if it.page is not None]
    times = [p.fetched_at for p in pages]
    assert None not in times and times == sorted(times)  # type: ignore[type-var]

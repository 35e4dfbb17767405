"""WARC files as real writers make them, read on every path: ``neardup dedup --db``, ``dedup
--batch`` (and the fingerprint Parquet it writes, read back), ``check-batch`` and the Spark job.

* GNU Wget (``wget --warc-file -r``, run here against a local site of real pages of the shared
  corpus served by ``http.server`` on 127.0.0.1): WARC/1.0 with ``WARC-Target-URI: <uri>`` in angle
  brackets, request records, ``metadata://`` resource records (its log), HTTP payloads as the
  server sent them (gzip Content-Encoding, chunked Transfer-Encoding), ``.warc.gz`` and ``.warc``.
* warcio's WARCWriter, WARC/1.0 and 1.1, gzip and not, with the records and headers of two
  crawlers: Heritrix (``dns:`` lookups, request/metadata records with ``WARC-Concurrent-To``,
  chunked and gzip payloads, an FTP ``resource``, revisits with ``WARC-Profile``) and browsertrix
  (WARC/1.1 millisecond dates, ``WARC-Page-ID``, ``WARC-JSON-Metadata``, ``WARC-Resource-Type``,
  lower-case HTTP headers with ``x-orig-content-encoding``, ``urn:pageinfo:``/``urn:text:``/
  ``urn:view:`` resource records).

Pages come from the shared corpus (MIT / Apache-2.0 fixtures: Mozilla Readability, Postlight
Parser, Scrapinghub AEB); the tests are skipped without it, and the wget ones without wget.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from checks import require_spark
from click.testing import CliRunner
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.cli.main import main
from neardup.ingest.inputs import read_input
from neardup.ingest.items import SKIPS, InputItem
from neardup.ingest.warc import warc_uri

WGET = shutil.which("wget")

#: the local site: file name -> (corpus folder, page file); every page a real capture
PAGES = {
    "article.html": ("readability", "pages/lifehacker-working/source.html.gz"),
    "article-comments.html": ("readability", "pages/lifehacker-post-comment-load/source.html.gz"),
    "opinion.html": (
        "scrapinghub-aeb",
        "html/04a6711caa7c687592777718866e781e976e0fe684faebe8b3cedcef8cd0ea34.html.gz",
    ),
    "sports.html": ("postlight-fixtures", "pages/d484d700349e.html.gz"),
}
MIRROR = "mirror/article.html"  # a byte-identical copy of article.html: an exact duplicate on every path
GZIP_SERVED = {"opinion.html"}  # sent with Content-Encoding: gzip (when the client accepts it)
CHUNKED_SERVED = {"sports.html"}  # sent with Transfer-Encoding: chunked


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("NEARDUP_QUIET", "1")  # no numba compile notice in stderr


@dataclass(frozen=True)
class Site:
    root: Path
    pages: dict[str, bytes]  # path in the site -> the page's bytes

    def body(self, path: str) -> bytes:
        return self.pages[path]


@pytest.fixture(scope="module")
def site(corpus: Path, tmp_path_factory) -> Site:
    root = tmp_path_factory.mktemp("site")
    pages: dict[str, bytes] = {}
    for name, (folder, file) in PAGES.items():
        pages[name] = gzip.decompress((corpus / folder / file).read_bytes())
    pages[MIRROR] = pages["article.html"]
    links = [*PAGES, MIRROR, "missing.html", "style.css"]
    pages["index.html"] = (
        "<!DOCTYPE html><html><head><title>Local test site</title></head><body><h1>Pages</h1><ul>"
        + "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
        + "</ul></body></html>"
    ).encode()
    for path, data in pages.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    (root / "style.css").write_text("body { font-family: serif }\n")
    return Site(root, pages)


# -- GNU Wget against a local http.server ---------------------------------------------------------


class _Handler(SimpleHTTPRequestHandler):
    """http.server's file handler, HTTP/1.1, with a gzip Content-Encoding for GZIP_SERVED (when
    the request accepts gzip) and a chunked Transfer-Encoding for CHUNKED_SERVED."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def do_GET(self):
        name = self.path.lstrip("/")
        path = Path(self.directory) / name
        if name in GZIP_SERVED and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            data = gzip.compress(path.read_bytes())
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif name in CHUNKED_SERVED:
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(data), 8000):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data[i : i + 8000]), data[i : i + 8000]))
            self.wfile.write(b"0\r\n\r\n")
        else:
            super().do_GET()


@dataclass(frozen=True)
class Crawl:
    gz: Path  # crawl.warc.gz
    plain: Path  # crawl.warc (--no-warc-compression)
    base: str  # http://127.0.0.1:PORT/


@pytest.fixture(scope="module")
def wget_crawl(site: Site, tmp_path_factory) -> Crawl:
    if WGET is None:
        pytest.skip("GNU wget is not installed (apt-get install wget): the wget-written WARC tests need it")
    out = tmp_path_factory.mktemp("wget")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(site.root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for name, extra in (("crawl", []), ("crawl-plain", ["--no-warc-compression"])):
            opts = "-r -l 1 --compression=auto --tries=1 --timeout=20 -nv".split()
            target = [f"--warc-file={out / name}", *extra, "-P", str(out / f"{name}-files"), base + "index.html"]
            cmd = [WGET, *opts, *target]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            # 8: "server issued an error response" (missing.html and robots.txt are 404s, on purpose)
            assert proc.returncode in (0, 8), proc.stderr[-2000:]
    finally:
        server.shutdown()
        server.server_close()
    crawl = Crawl(out / "crawl.warc.gz", out / "crawl-plain.warc", base)
    assert crawl.gz.is_file() and crawl.plain.is_file()
    return crawl


SITE_PAGES = ["index.html", *PAGES, MIRROR]


def pages_of(items: list[InputItem]):
    return [it.page for it in items if it.page is not None]


def errors_of(items: list[InputItem]) -> list[InputItem]:
    return [it for it in items if it.page is None and it.skip is None]


def test_wget_writes_uris_in_angle_brackets(wget_crawl):
    """The quirks the other tests rely on are in wget's file: the WARC/1.0 grammar's ``<uri>``, the
    payload encodings as received, request and resource records."""
    raw = gzip.decompress(wget_crawl.gz.read_bytes())
    assert raw.startswith(b"WARC/1.0\r\n")
    assert f"WARC-Target-URI: <{wget_crawl.base}article.html>\r\n".encode() in raw
    assert b"WARC-Type: request\r\n" in raw and b"WARC-Type: resource\r\n" in raw
    assert b"WARC-Target-URI: <metadata://gnu.org/software/wget/warc/wget.log>" in raw
    assert b"Content-Encoding: gzip\r\n" in raw and b"Transfer-Encoding: chunked\r\n" in raw
    assert wget_crawl.plain.read_bytes().startswith(b"WARC/1.0\r\n")


@pytest.mark.parametrize("which", ["gz", "plain"])
def test_wget_warc_is_read(wget_crawl, site, which):
    path = getattr(wget_crawl, which)
    items = list(read_input(path))
    assert errors_of(items) == []
    pages = pages_of(items)
    assert sorted(p.url for p in pages) == sorted(wget_crawl.base + name for name in SITE_PAGES)
    for p in pages:
        name = p.url.removeprefix(wget_crawl.base)
        assert bytes(p.content) == site.body(name), name  # gzip and chunked payloads decoded
        assert p.fetched_at is not None and abs(p.fetched_at - datetime.now(UTC).timestamp()) < 3600
    # robots.txt and missing.html are 404s, style.css is CSS; wget's log (a metadata:// resource) and
    # its request records are no items
    assert Counter(it.skip for it in items if it.skip) == {"non-200": 2, "non-html": 1}
    assert all(it.skip in SKIPS for it in items if it.skip)
    assert not any("<" in it.source or "metadata://" in it.source for it in items)


# -- warcio writing Heritrix-style and browsertrix-style files ------------------------------------

HOST = "https://news.example"


def _date(i: int, ms: bool) -> str:
    return f"2024-05-{6 + i:02d}T07:08:09" + (".123Z" if ms else "Z")


def _chunked(data: bytes, size: int = 6000) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(data[i : i + size]), data[i : i + size]) for i in range(0, len(data), size)]
    return b"".join(parts) + b"0\r\n\r\n"


@dataclass(frozen=True)
class Written:
    path: Path
    pages: dict[str, bytes]  # URL -> page bytes, in file order
    times: dict[str, float]  # URL -> WARC-Date
    skips: Counter  # skip reason -> count
    exact: tuple[str, str]  # (duplicate URL, the URL it copies)


def write_heritrix(path: Path, site: Site, *, version: str, gz: bool, brackets: bool = False) -> Written:
    """Records as Heritrix 3 writes them: warcinfo, then per URI a ``dns:`` lookup once per host,
    the response (the HTTP message as received: chunked, gzip), its request and a metadata
    record; robots.txt, a redirect, a 404, a revisit (identical-payload-digest), an FTP resource.
    ``brackets``: URIs in the WARC/1.0 grammar's angle brackets."""

    def uri(u: str) -> str:
        return f"<{u}>" if brackets else u

    pages: dict[str, bytes] = {}
    times: dict[str, float] = {}
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gz, warc_version=version)
        info = {
            "software": "Heritrix/3.4.0-20220727 http://crawler.archive.org",
            "ip": "10.0.0.7",
            "hostname": "crawler-7",
            "format": f"WARC File Format {version}",
            "conformsTo": "http://bibnum.bnf.fr/WARC/WARC_ISO_28500_version1_latestdraft.pdf",
            "isPartOf": "neardup-tests",
            "robots": "obey",
            "http-header-user-agent": "Mozilla/5.0 (compatible; heritrix/3.4.0 +http://example.org/bot)",
        }
        w.write_record(w.create_warcinfo_record(path.name, info))
        dns = b"20240506070809\nnews.example.\t300\tIN\tA\t192.0.2.10\n"
        w.write_record(
            w.create_warc_record(
                "dns:news.example",
                "response",
                payload=io.BytesIO(dns),
                warc_content_type="text/dns",
                warc_headers_dict={"WARC-Date": _date(0, False), "WARC-IP-Address": "192.0.2.53"},
            )
        )

        def capture(i: int, target: str, status: str, headers: list, payload: bytes) -> None:
            date = _date(i, version == "1.1")
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            rec = w.create_warc_record(
                uri(target),
                "response",
                payload=io.BytesIO(payload),
                http_headers=http,
                warc_headers_dict={"WARC-Date": date, "WARC-IP-Address": "192.0.2.10"},
            )
            w.write_record(rec)
            rid = rec.rec_headers.get_header("WARC-Record-ID")
            req = (
                f"GET /{target.split('/', 3)[3]} HTTP/1.1\r\nHost: news.example\r\n"
                "User-Agent: Mozilla/5.0 (compatible; heritrix/3.4.0)\r\nAccept-Encoding: gzip,deflate\r\n\r\n"
            )
            w.write_record(
                w.create_warc_record(
                    uri(target),
                    "request",
                    payload=io.BytesIO(req.encode()),
                    warc_content_type="application/http; msgtype=request",
                    warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": rid},
                )
            )
            meta = f"via: {HOST}/\nhopsFromSeed: L\nfetchTimeMs: 42\ncharsetForLinkExtraction: UTF-8\n"
            w.write_record(
                w.create_warc_record(
                    uri(target),
                    "metadata",
                    payload=io.BytesIO(meta.encode()),
                    warc_content_type="application/warc-fields",
                    warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": rid},
                )
            )

        html = [("Content-Type", "text/html;charset=UTF-8"), ("Server", "nginx")]
        capture(0, f"{HOST}/robots.txt", "200 OK", [("Content-Type", "text/plain")], b"User-agent: *\nAllow: /\n")
        for i, name in enumerate(SITE_PAGES):
            target = f"{HOST}/{name}"
            body = site.body(name)
            if name in GZIP_SERVED:
                capture(i, target, "200 OK", [*html, ("Content-Encoding", "gzip")], gzip.compress(body))
            elif name in CHUNKED_SERVED:
                capture(i, target, "200 OK", [*html, ("Transfer-Encoding", "chunked")], _chunked(body))
            elif name == "article-comments.html":  # both: chunked over gzip
                capture(
                    i,
                    target,
                    "200 OK",
                    [*html, ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")],
                    _chunked(gzip.compress(body)),
                )
            else:
                capture(i, target, "200 OK", [*html, ("Content-Length", str(len(body)))], body)
            pages[target] = body
            times[target] = datetime.fromisoformat(_date(i, version == "1.1").replace("Z", "+00:00")).timestamp()
        capture(1, f"{HOST}/old", "301 Moved Permanently", [("Location", f"{HOST}/article.html")], b"")
        capture(2, f"{HOST}/missing.html", "404 Not Found", html, b"<html><body>Not found</body></html>")
        revisit = w.create_revisit_record(
            uri(f"{HOST}/article.html"),
            digest="sha1:AAAA",
            refers_to_uri=uri(f"{HOST}/article.html"),
            refers_to_date=_date(0, False),
            http_headers=StatusAndHeaders("200 OK", html, protocol="HTTP/1.1"),
        )
        w.write_record(revisit)
        ftp = "ftp://ftp.news.example/pub/opinion.html"
        w.write_record(
            w.create_warc_record(
                uri(ftp),
                "resource",
                payload=io.BytesIO(site.body("opinion.html")),
                warc_content_type="text/html",
                warc_headers_dict={"WARC-Date": _date(3, False)},
            )
        )
        pages[ftp] = site.body("opinion.html")
        times[ftp] = datetime.fromisoformat(_date(3, False).replace("Z", "+00:00")).timestamp()
    skips = Counter({"non-html": 2, "non-200": 2, "revisit": 1})  # dns: and robots.txt; the 301 and 404
    return Written(path, pages, times, skips, (f"{HOST}/{MIRROR}", f"{HOST}/article.html"))


def write_browsertrix(path: Path, site: Site, *, version: str, gz: bool) -> Written:
    """Records as browsertrix-crawler writes them (warcio.js): WARC/1.1, millisecond dates, the
    page's ``WARC-Page-ID`` on each record, ``WARC-Resource-Type``, ``WARC-JSON-Metadata``, lower-case
    HTTP headers of the decoded payload (``x-orig-content-encoding``), an empty reason phrase (h2),
    request records, subresources, a revisit, and ``urn:`` resource records per page."""
    pages: dict[str, bytes] = {}
    times: dict[str, float] = {}
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gz, warc_version=version)
        w.write_record(
            w.create_warcinfo_record(
                path.name,
                {
                    "software": "Browsertrix-Crawler 1.2.0 (with warcio.js 2.2.1)",
                    "format": f"WARC File Format {version}",
                    "isPartOf": "neardup-tests",
                },
            )
        )

        def record(
            target: str,
            rtype: str,
            headers: list,
            payload: bytes,
            *,
            page_id: str,
            date: str,
            status: str = "200 ",
            extra: dict | None = None,
        ) -> None:
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            warc_headers = {
                "WARC-Date": date,
                "WARC-Page-ID": page_id,
                "WARC-Resource-Type": rtype,
                "WARC-Protocol": "h2, tls/1.3",
                **(extra or {}),
            }
            rec = w.create_warc_record(
                target, "response", payload=io.BytesIO(payload), http_headers=http, warc_headers_dict=warc_headers
            )
            w.write_record(rec)
            req = StatusAndHeaders(
                f"GET /{target.split('/', 3)[3]} HTTP/1.1",
                [("user-agent", "Mozilla/5.0 Chrome/124.0"), ("accept", "*/*")],
                is_http_request=True,
            )
            w.write_record(
                w.create_warc_record(
                    target,
                    "request",
                    payload=io.BytesIO(b""),
                    http_headers=req,
                    warc_headers_dict={
                        "WARC-Date": date,
                        "WARC-Page-ID": page_id,
                        "WARC-Resource-Type": rtype,
                        "WARC-Concurrent-To": rec.rec_headers.get_header("WARC-Record-ID"),
                    },
                )
            )

        for i, name in enumerate(SITE_PAGES):
            page_id = str(uuid.UUID(int=i + 1))
            date = _date(i, True)
            url = f"{HOST}/{name}"
            body = site.body(name)
            on_page: dict[str, Any] = {"page_id": page_id, "date": date}
            meta = json.dumps({"ipType": "public", "cert": {"issuer": "R11", "ctc": "1"}})
            record(
                url,
                "document",
                [
                    ("content-type", "text/html; charset=utf-8"),
                    ("x-orig-content-encoding", "br"),
                    ("content-length", str(len(body))),
                ],
                body,
                extra={"WARC-JSON-Metadata": meta},
                **on_page,
            )
            pages[url] = body
            times[url] = datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp()
            if i == 0:  # subresources of the first page
                record(
                    f"{HOST}/app.js", "script", [("content-type", "application/javascript")], b"var x = 1;", **on_page
                )
                record(f"{HOST}/style.css", "stylesheet", [("content-type", "text/css")], b"body { }", **on_page)
                record(f"{HOST}/beacon", "ping", [], b"", status="204 ", **on_page)
            info = {"pageid": page_id, "url": url, "ts": date, "urls": {url: {"status": 200, "mime": "text/html"}}}
            for kind, ctype, payload in (
                ("pageinfo", "application/json", json.dumps(info).encode()),
                ("text", "text/plain", b"Plain text of the page"),
                ("view", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64)),
            ):
                w.write_record(
                    w.create_warc_record(
                        f"urn:{kind}:{url}",
                        "resource",
                        payload=io.BytesIO(payload),
                        warc_content_type=ctype,
                        warc_headers_dict={"WARC-Date": date},
                    )
                )
        revisit = w.create_revisit_record(
            f"{HOST}/app.js",
            digest="sha1:BBBB",
            refers_to_uri=f"{HOST}/app.js",
            refers_to_date=_date(0, True),
            http_headers=StatusAndHeaders("200 ", [("content-type", "application/javascript")], protocol="HTTP/1.1"),
        )
        w.write_record(revisit)
    skips = Counter({"non-html": 2, "non-200": 1, "revisit": 1})
    return Written(path, pages, times, skips, (f"{HOST}/{MIRROR}", f"{HOST}/article.html"))


WARCIO_CASES = [
    pytest.param("heritrix", "1.0", True, False, id="heritrix-1.0-gz"),
    pytest.param("heritrix", "1.0", False, False, id="heritrix-1.0"),
    pytest.param("heritrix", "1.0", True, True, id="heritrix-1.0-gz-angle-brackets"),
    pytest.param("heritrix", "1.0", False, True, id="heritrix-1.0-angle-brackets"),
    pytest.param("heritrix", "1.1", True, False, id="heritrix-1.1-gz"),
    pytest.param("heritrix", "1.1", False, False, id="heritrix-1.1"),
    pytest.param("browsertrix", "1.1", True, False, id="browsertrix-1.1-gz"),
    pytest.param("browsertrix", "1.1", False, False, id="browsertrix-1.1"),
    pytest.param("browsertrix", "1.0", True, False, id="browsertrix-1.0-gz"),
    pytest.param("browsertrix", "1.0", False, False, id="browsertrix-1.0"),
]


def write(tmp: Path, site: Site, style: str, version: str, gz: bool, brackets: bool = False) -> Written:
    path = tmp / f"{style}-{version}{'-brackets' if brackets else ''}.warc{'.gz' if gz else ''}"
    if style == "heritrix":
        return write_heritrix(path, site, version=version, gz=gz, brackets=brackets)
    return write_browsertrix(path, site, version=version, gz=gz)


@pytest.mark.parametrize(("style", "version", "gz", "brackets"), WARCIO_CASES)
def test_warcio_writers_are_read(tmp_path, site, style, version, gz, brackets):
    written = write(tmp_path, site, style, version, gz, brackets)
    head = written.path.read_bytes()
    head = gzip.decompress(head) if gz else head
    assert head.startswith(f"WARC/{version}\r\n".encode())
    assert (b"WARC-Target-URI: <https://" in head) == brackets
    items = list(read_input(written.path))
    assert errors_of(items) == []
    pages = pages_of(items)
    assert [p.url for p in pages] == list(written.pages)  # file order, no angle brackets, no urn: records
    for p in pages:
        assert bytes(p.content) == written.pages[p.url], p.url  # gzip, chunked, chunked+gzip decoded
        assert p.fetched_at == pytest.approx(written.times[p.url])
    assert Counter(it.skip for it in items if it.skip) == written.skips
    assert not any("<" in it.source or "urn:" in it.source for it in items)
    if style == "browsertrix":  # the HTTP headers as stored: lower-case, payload already decoded
        assert all((p.headers or {}).get("x-orig-content-encoding") == "br" for p in pages)


def test_warc_uri_forms():
    assert warc_uri("<http://127.0.0.1:8080/a.html>") == "http://127.0.0.1:8080/a.html"
    assert warc_uri("http://127.0.0.1:8080/a.html") == "http://127.0.0.1:8080/a.html"
    assert warc_uri("  <urn:pageinfo:https://a.example/>\t") == "urn:pageinfo:https://a.example/"
    assert warc_uri("") == warc_uri(None) == warc_uri("<>") == warc_uri(" < > ") == ""
    assert warc_uri("<http://a.example/") == "<http://a.example/"  # not a bracketed form: as it is


def test_bracketed_target_uri_without_uri_is_a_header_error(tmp_path):
    path = tmp_path / "empty-uri.warc.gz"
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.0")
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.0")
        w.write_record(w.create_warc_record("<>", "response", payload=io.BytesIO(b"<p>x</p>"), http_headers=http))
    (item,) = list(read_input(path))
    assert item.reason == "warc-header" and "without WARC-Target-URI" in (item.error or "")


# -- every path through the command line ----------------------------------------------------------


def run(*args: str | Path):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    return result


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def summary(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Input:
    path: Path
    urls: list[str]  # the pages' URLs, as they must come out
    exact: tuple[str, str]  # (duplicate URL, the URL it copies)
    skipped: int  # records that are not pages (revisits included)
    revisits: int = 0  # revisits of a page of the input: unchanged fetches on every path


@pytest.fixture(params=["wget-gz", "wget-plain", "heritrix-1.0", "browsertrix-1.1-gz"])
def warc_input(request, tmp_path, site) -> Input:
    if request.param.startswith("wget"):
        crawl = request.getfixturevalue("wget_crawl")
        path = crawl.gz if request.param == "wget-gz" else crawl.plain
        urls = [crawl.base + name for name in SITE_PAGES]
        return Input(path, urls, (crawl.base + MIRROR, crawl.base + "article.html"), 3)
    if request.param == "heritrix-1.0":
        written = write(tmp_path, site, "heritrix", "1.0", gz=False, brackets=True)
    else:
        written = write(tmp_path, site, "browsertrix", "1.1", gz=True)
    revisits = 1 if request.param == "heritrix-1.0" else 0  # of article.html (browsertrix's is of a script)
    return Input(written.path, list(written.pages), written.exact, sum(written.skips.values()), revisits)


def test_dedup_into_a_store(tmp_path, warc_input):
    out = tmp_path / "verdicts.jsonl"
    r = run(
        "dedup",
        warc_input.path,
        "--db",
        tmp_path / "store.db",
        "--out",
        out,
        "--jobs",
        "1",
        "--errors",
        tmp_path / "errors.jsonl",
    )
    assert r.exit_code == 0, r.stderr
    s = summary(r)
    pages = len(warc_input.urls) + warc_input.revisits
    assert (s["pages"], s["error"], s["errors_by_reason"]) == (pages, 0, {})
    assert s["skipped"] == warc_input.skipped - warc_input.revisits and s["exact"] >= 1
    assert s["unchanged"] == warc_input.revisits
    assert (tmp_path / "errors.jsonl").read_text() == ""
    rows = json_lines(out)
    assert sorted({row["url"] for row in rows}) == sorted(warc_input.urls) and len(rows) == pages
    by_url = {row["url"]: row for row in rows}
    dup, original = warc_input.exact
    assert by_url[original]["status"] == "new"
    assert by_url[dup]["status"] == "exact" and by_url[dup]["match_url"] == original
    assert not any("<" in (row.get("match_url") or "") + row["url"] + row["source"] for row in rows)
    # again, into the same store: every page is a re-fetch of itself
    r = run("dedup", warc_input.path, "--db", tmp_path / "store.db", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    s = summary(r)
    assert s["unchanged"] == pages and s["store_pages"] == len(warc_input.urls)


def test_dedup_batch_and_its_fingerprint_parquet(tmp_path, warc_input):
    fps, out = tmp_path / "fps.parquet", tmp_path / "batch.jsonl"
    r = run("dedup", "--batch", warc_input.path, "--fingerprints-out", fps, "--out", out, "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert summary(r)["errors"] == 0
    rows = json_lines(out)
    assert summary(r)["revisits"] == warc_input.revisits  # Heritrix's revisit of article.html: a capture of it
    revisited = [row for row in rows if row["version"] == "unchanged"]
    assert [row["url"] for row in revisited] == [warc_input.exact[1]] * warc_input.revisits
    rows = [row for row in rows if row["version"] is None]
    assert sorted(row["url"] for row in rows) == sorted(warc_input.urls)
    by_url = {row["url"]: row for row in rows}
    dup, original = warc_input.exact
    # one cluster, one canonical (which copy: the canonical policy's choice, the capture times may tie)
    assert by_url[dup]["digest"] == by_url[original]["digest"]
    assert by_url[dup]["cluster"] == by_url[original]["cluster"]
    assert by_url[dup]["canonical"] == by_url[original]["canonical"] in warc_input.urls
    assert {by_url[dup]["status"], by_url[original]["status"]} <= {"new", "exact", "near"}
    assert not any("<" in (row["match"] or "") + (row["canonical"] or "") + row["url"] for row in rows)
    # the Parquet fingerprints, read back: the same answer
    again = tmp_path / "again.jsonl"
    r = run("dedup", "--batch", fps, "--out", again, "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    assert sorted(json_lines(again), key=lambda row: row["url"]) == sorted(rows, key=lambda row: row["url"])


def test_check_batch_against_stored_fingerprints(tmp_path, site, warc_input):
    """``neardup fingerprint PAGE --out`` makes the archive's Parquet; the WARC's pages are checked
    against it: the two copies of the stored page are exact matches of its URL."""
    stored = tmp_path / "stored.parquet"
    archived = "https://archive.example/lifehacker"
    r = run("fingerprint", site.root / "article.html", "--url", archived, "--out", stored)
    assert r.exit_code == 0, r.stderr
    out = tmp_path / "check.jsonl"
    r = run("check-batch", warc_input.path, "--stored", stored, "-o", out, "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    s = summary(r)
    assert (s["queries"], s["errors"], s["exact"]) == (len(warc_input.urls), 0, 2)
    rows = json_lines(out)
    assert sorted(row["url"] for row in rows) == sorted(warc_input.urls)
    exact = sorted(row["url"] for row in rows if row["status"] == "exact")
    assert exact == sorted(warc_input.exact)
    assert {row["match"] for row in rows if row["status"] == "exact"} == {archived}


def test_fingerprint_command_reads_warc_pages(tmp_path, wget_crawl):
    out = tmp_path / "fps.parquet"
    r = run("fingerprint", wget_crawl.gz, "--out", out)
    assert r.exit_code == 0, r.stderr
    from neardup.batch.files import read_fingerprints

    assert sorted(rec.url for rec in read_fingerprints(str(out))) == sorted(wget_crawl.base + n for n in SITE_PAGES)


# -- Spark (one test: a local session is slow) ----------------------------------------------------


def test_spark_job_reads_wget_and_browsertrix_warcs(tmp_path, site, wget_crawl):
    """The Spark job reads WARC files in its executors through neardup.ingest.inputs.read_input:
    wget's URIs come out without brackets, and its clusters are those of ``dedup --batch``."""
    require_spark()
    from neardup.batch.dedup import dedup_batch
    from neardup.batch.spark.job import dedup, fingerprints, session

    browsertrix = write(tmp_path, site, "browsertrix", "1.1", gz=True)
    inputs = [str(wget_crawl.gz), str(browsertrix.path)]
    spark = session("local[1]", partitions=2, app="neardup-warc-writers")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        fps = fingerprints(spark, inputs)
        got = sorted((r.url, r.digest, r.status, r.cluster, r.canonical) for r in dedup(fps).collect())
    finally:
        spark.stop()
    read = [it.page for path in inputs for it in read_input(path) if it.page is not None]
    expected = sorted(
        (v.url, v.digest, v.status, v.cluster, v.canonical) for v in dedup_batch(read, exact_k=False).verdicts
    )
    assert got == expected
    urls = {row[0] for row in got}
    assert urls == {wget_crawl.base + n for n in SITE_PAGES} | set(browsertrix.pages)
    clusters = {row[0]: row[3] for row in got}
    assert clusters[wget_crawl.base + MIRROR] == clusters[wget_crawl.base + "article.html"]
    assert clusters[f"{HOST}/{MIRROR}"] == clusters[wget_crawl.base + "article.html"]

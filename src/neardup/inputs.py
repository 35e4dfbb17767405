"""Batch inputs for ``neardup dedup``: directories of HTML files, JSONL files, WARC files.

Every reader yields :class:`InputItem`: a :class:`~neardup.detector.Page` or, for a record
that cannot be read, an error naming the file and record, so that one bad record never
stops a batch.

* directory: every ``*.html``, ``*.htm``, ``*.html.gz``, ``*.htm.gz`` and ``*.txt`` below it,
  in sorted order; the URL is the file's ``file://`` URL unless ``urls.tsv`` in the
  directory (or a parent of the file, up to the given directory) maps ``file`` -> ``url``.
* JSONL (``*.jsonl``, ``*.jsonl.gz``, ``*.ndjson``): one object per line with ``url`` and
  ``html`` (or ``text``), optional ``headers`` (object), ``fetched_at`` (POSIX seconds) and
  ``priority``.
* WARC (``*.warc``, ``*.warc.gz``): ``response`` records with HTTP status 200, read with
  FastWARC; the target URI, HTTP headers and WARC date go with the page.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from neardup.detector import Page
from neardup.errors import InputFormatError

HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz", ".txt", ".txt.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
WARC_SUFFIXES = (".warc", ".warc.gz")


@dataclass(frozen=True)
class InputItem:
    """A page to add, or the reason a record could not be read (``source`` names it)."""

    source: str
    page: Page | None = None
    error: str | None = None


def _read_file(path: Path) -> bytes:
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as fh:
                return fh.read()
        except (OSError, EOFError, zlib.error) as exc:
            raise InputFormatError(f"{path}: not a readable gzip file ({exc})") from None
    return path.read_bytes()


def _url_map(root: Path) -> dict[Path, str]:
    mapping: dict[Path, str] = {}
    for tsv in sorted(root.rglob("urls.tsv")):
        try:
            lines = tsv.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputFormatError(f"{tsv}: cannot read ({exc})") from None
        header = lines[0].split("\t") if lines else []
        if "file" not in header or "url" not in header:
            continue
        fi, ui = header.index("file"), header.index("url")
        for line in lines[1:]:
            cols = line.split("\t")
            if len(cols) > max(fi, ui) and cols[fi] and cols[ui]:
                rel = Path(cols[fi])
                for base in (tsv.parent, tsv.parent / "pages"):
                    mapping[(base / rel).resolve()] = cols[ui]
    return mapping


def read_directory(root: Path) -> Iterator[InputItem]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(HTML_SUFFIXES))
    urls = _url_map(root)
    for path in files:
        try:
            content = _read_file(path)
        except (OSError, InputFormatError) as exc:
            yield InputItem(str(path), error=str(exc))
            continue
        url = urls.get(path.resolve()) or path.resolve().as_uri()
        headers = {"content-type": "text/plain"} if path.name.lower().endswith((".txt", ".txt.gz")) else None
        yield InputItem(str(path), Page(url=url, content=content, headers=headers))


def read_jsonl(path: Path) -> Iterator[InputItem]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        fh = opener(path, "rt", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot open ({exc})") from None
    with fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                source = f"{path}:{lineno}"
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield InputItem(source, error=f"{source}: invalid JSON ({exc.msg})")
                    continue
                if not isinstance(obj, dict):
                    yield InputItem(source, error=f"{source}: expected a JSON object")
                    continue
                content = obj.get("html", obj.get("text"))
                url = obj.get("url")
                if not isinstance(url, str) or not isinstance(content, str):
                    yield InputItem(source, error=f"{source}: needs string fields 'url' and 'html' (or 'text')")
                    continue
                headers = obj.get("headers")
                if headers is not None and not isinstance(headers, dict):
                    yield InputItem(source, error=f"{source}: 'headers' must be an object")
                    continue
                if "html" not in obj:
                    headers = {**(headers or {}), "content-type": "text/plain"}
                yield InputItem(source, Page(url=url, content=content, headers=headers,
                                             fetched_at=obj.get("fetched_at"), priority=obj.get("priority")))
        except (OSError, EOFError, zlib.error) as exc:
            yield InputItem(f"{path}:{lineno + 1}", error=f"{path}: file is truncated or corrupt after line {lineno} ({exc})")


def _gzip_tail_complete(path: Path, offset: int) -> bool:
    """True when every gzip member from ``offset`` to the end of the file is complete."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    while data:
        member = zlib.decompressobj(31)
        try:
            while not member.eof:
                if not data:
                    return False
                member.decompress(data, 1 << 20)
                data = member.unconsumed_tail
        except zlib.error:
            return False
        data = member.unused_data
    return True


def _dechunk(raw: bytes) -> bytes:
    """Undo HTTP/1.1 chunked transfer coding (raises ValueError when malformed)."""
    out = bytearray()
    pos = 0
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            raise ValueError("chunk size line without CRLF")
        size = int(raw[pos:end].split(b";")[0].strip() or b"0", 16)
        pos = end + 2
        if size == 0:
            return bytes(out)
        if pos + size > len(raw):
            raise ValueError("chunk runs past the end of the body")
        out += raw[pos:pos + size]
        pos += size + 2


def decode_http_body(raw: bytes, headers: dict[str, str]) -> bytes:
    """Undo ``Transfer-Encoding: chunked`` and ``Content-Encoding: gzip/deflate`` as stored
    by crawlers in WARC response records (raises ValueError for a broken body)."""
    lower = {k.lower(): v.lower() for k, v in headers.items()}
    body = raw
    if "chunked" in lower.get("transfer-encoding", ""):
        body = _dechunk(body)
    for coding in reversed([c.strip() for c in lower.get("content-encoding", "").split(",") if c.strip()]):
        try:
            if coding in ("gzip", "x-gzip"):
                body = zlib.decompress(body, 47)
            elif coding == "deflate":
                try:
                    body = zlib.decompress(body)
                except zlib.error:
                    body = zlib.decompress(body, -15)
            elif coding != "identity":
                raise ValueError(f"unsupported Content-Encoding {coding!r}")
        except zlib.error as exc:
            raise ValueError(f"cannot decode Content-Encoding {coding}: {exc}") from None
    return body


def read_warc(path: Path) -> Iterator[InputItem]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot open ({exc})") from None
    with stream:
        head = stream.read(4)
        stream.seek(0)
        if not (head.startswith(b"WARC") or head.startswith(b"\x1f\x8b")):
            raise InputFormatError(f"{path}: not a WARC file")
        n = 0
        last_offset = 0
        try:
            for record in ArchiveIterator(stream, parse_http=False):
                n += 1
                last_offset = record.stream_pos
                if record.record_type != WarcRecordType.response:
                    continue
                url = record.headers.get("WARC-Target-URI") or ""
                source = f"{path}#{n} {url}"
                try:
                    record.parse_http()
                    body = record.reader.read()
                except Exception as exc:  # FastWARC raises plain exceptions on broken records
                    yield InputItem(source, error=f"{source}: cannot read record ({exc})")
                    continue
                if record.http_headers is None:
                    yield InputItem(source, error=f"{source}: truncated record or no HTTP headers")
                    continue
                if record.content_length and len(body) < record.content_length:
                    yield InputItem(source, error=f"{source}: truncated record ({len(body)} of {record.content_length} bytes)")
                    continue
                if record.http_headers.status_code != 200:
                    continue
                headers = {str(k): str(v) for k, v in record.http_headers.items()}
                try:
                    body = decode_http_body(body, headers)
                except ValueError as exc:
                    yield InputItem(source, error=f"{source}: {exc}")
                    continue
                date = record.record_date
                yield InputItem(source, Page(url=url, content=body, headers=headers,
                                             fetched_at=date.timestamp() if date else None))
        except (OSError, EOFError, ValueError) as exc:
            yield InputItem(f"{path}#{n + 1}", error=f"{path}: WARC stream is corrupt after record {n} ({exc})")
            return
    if head.startswith(b"\x1f\x8b") and not _gzip_tail_complete(path, last_offset):
        yield InputItem(f"{path}#{n + 1}", error=f"{path}: truncated or corrupt after record {n}")


def read_input(path: str | Path) -> Iterator[InputItem]:
    """Pages from a directory, JSONL file or WARC file (chosen by what ``path`` is)."""
    p = Path(path)
    if not p.exists():
        raise InputFormatError(f"{path}: no such file or directory")
    if p.is_dir():
        return read_directory(p)
    name = p.name.lower()
    if name.endswith(WARC_SUFFIXES):
        return read_warc(p)
    if name.endswith(JSONL_SUFFIXES):
        return read_jsonl(p)
    if name.endswith(HTML_SUFFIXES):
        return iter([InputItem(str(p), Page(url=p.resolve().as_uri(), content=_read_file(p)))])
    raise InputFormatError(f"{path}: unknown input type (expected a directory, .jsonl, .warc or .warc.gz)")


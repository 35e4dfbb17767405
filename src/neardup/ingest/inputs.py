"""Batch inputs for ``neardup dedup``: directories of HTML files, JSONL files, WARC files.

Every reader yields :class:`InputItem`: a :class:`~neardup.detector.Page` or, for a record
that cannot be read, an error naming the file and record, so that one bad record never
stops a batch.

* directory: every ``*.html``, ``*.htm``, ``*.html.gz``, ``*.htm.gz`` below it, and every
  ``*.txt`` / ``*.txt.gz`` file as plain text (fingerprinted as it is, no HTML extraction).
  A ``urls.tsv`` in the directory (or a parent of the file, up to the given directory) maps
  ``file`` -> ``url`` and, with a ``fetched_at`` or ``captured`` column (POSIX seconds or ISO
  8601), gives each file its fetch time; listed files come in capture order (equal times in
  the list's order), then the others in sorted order with their ``file://`` URL and no time.
* JSONL (``*.jsonl``, ``*.jsonl.gz``, ``*.ndjson``): one object per line with ``url`` and
  ``html`` (or ``text``), optional ``headers`` (object), ``fetched_at`` (POSIX seconds) and
  ``priority``.
* WARC (``*.warc``, ``*.warc.gz``; WARC/1.0 and 1.1): ``response`` records with HTTP status 200
  and an HTML Content-Type (or none), read with FastWARC; the target URI, HTTP headers and WARC
  date go with the page, the HTTP payload decoded (chunked transfer coding, gzip or deflate
  Content-Encoding, as wget and Heritrix store it). ``resource`` records of an ``http(s)`` or
  ``ftp`` URI (a capture without protocol headers) are pages the same way, their WARC
  Content-Type standing for the HTTP one. Other responses (and response records that hold no
  HTTP message, such as Heritrix's ``dns:`` lookups) and ``revisit`` records are items with a
  ``skip`` reason (:data:`SKIPS`), counted but not pages; warcinfo, request and metadata records
  and resource records of other URIs (wget's ``metadata://`` log, browsertrix's ``urn:pageinfo:``,
  ``urn:text:`` and ``urn:view:`` records) are not items. URIs are read in both the WARC/1.1
  form and the WARC/1.0 one in angle brackets (``<http://...>``, GNU Wget): :func:`warc_uri`.

Hostile or damaged input is bounded and reported, never fatal: every decompression (``.gz``
files, ``Content-Encoding`` in WARC records) is streamed and stops at ``max_bytes`` of
*inflated* data (a 2 MB gzip bomb costs 16 MiB, not 2 GiB); JSONL lines over
``4 * max_bytes`` and JSON nested too deeply are errors; a WARC record with a damaged header
is an error, and after corrupt bytes (a broken gzip member, a garbled record) reading resumes
at the next record; unreadable folders are errors. Each error item carries a short
``reason`` (see ``REASONS``) that ``neardup dedup`` counts.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from neardup.errors import InputFormatError, NeardupError
from neardup.fingerprint.extract import DEFAULT_MAX_BYTES
from neardup.model import Page

HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz", ".txt", ".txt.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
WARC_SUFFIXES = (".warc", ".warc.gz")

# why an item could not be read (InputItem.reason)
REASONS = {
    "unreadable": "a file or folder that cannot be read (permissions, I/O error)",
    "too-large": "over the page size limit (max_bytes), after decompression",
    "bad-gzip": "corrupt or truncated gzip data",
    "bad-time": "a urls.tsv fetched_at or captured value that is not a time",
    "bad-json": "a JSONL line that is not valid JSON, too deeply nested or too long",
    "bad-record": "a JSONL object or WARC record without the fields a page needs",
    "bad-encoding": "a Content-Encoding or chunked body that cannot be decoded",
    "warc-header": "a WARC record with a damaged header",
    "warc-corrupt": "corrupt or truncated WARC data (skipped up to the next readable record)",
}


@dataclass(frozen=True)
class InputItem:
    """A page to add, or the reason a record could not be read (``source`` names it;
    ``reason`` is one of :data:`REASONS`)."""

    source: str
    page: Page | None = None
    error: str | None = None
    reason: str | None = None
    skip: str | None = None  # a record that is not a page, by design (see SKIPS): not an error


# why a record is not a page (InputItem.skip): counted, never reported as an error
SKIPS = {
    "non-html": (
        "a WARC response whose Content-Type is not HTML (CSS, scripts, JSON, images, PDF, robots.txt...), "
        "or that holds no HTTP response (Heritrix's dns: records)"
    ),
    "non-200": "a WARC response whose HTTP status is not 200 (redirects, 404s, server errors)",
    "revisit": "a WARC revisit record (a capture stored only as a reference to an earlier one)",
}
HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml")


def is_html_type(content_type: str | None) -> bool:
    """True for an HTML (or XHTML) Content-Type, and for none at all (the extractor then
    refuses binary bodies itself).

    >>> [is_html_type(t) for t in ("text/html; charset=utf-8", "text/css", None, "image/png")]
    [True, False, True, False]
    """
    if content_type is None or not content_type.strip():
        return True
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


def _skipped(source: str, why: str) -> InputItem:
    return InputItem(source, skip=why)


def _failed(source: str, error: str, reason: str) -> InputItem:
    return InputItem(source, error=error, reason=reason)


class TooLargeError(InputFormatError):
    """Decompressed data over the size limit."""


def inflate(data: bytes, wbits: int, limit: int, what: str = "data") -> bytes:
    """Decompress ``data`` (zlib ``wbits``: 31 gzip, 47 gzip or zlib, 15 zlib, -15 raw
    deflate; gzip may have several members) in bounded steps, raising
    :class:`TooLargeError` as soon as the output passes ``limit`` bytes and ``zlib.error``
    for corrupt data."""
    out = bytearray()
    while True:
        member = zlib.decompressobj(wbits)
        chunk = member.decompress(data, limit + 1 - len(out))
        out += chunk
        if len(out) > limit or member.unconsumed_tail:
            raise TooLargeError(f"{what} inflates to over {limit:,} bytes (the page size limit)")
        if not member.eof:
            raise zlib.error("incomplete or truncated stream")
        data = member.unused_data
        if wbits < 16 or not data.lstrip(b"\x00"):  # only gzip has members; trailing NUL padding
            return bytes(out)


def read_file(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """A page file's bytes (``.gz`` decompressed, streamed), at most ``max_bytes`` of them:
    :class:`TooLargeError` above, :class:`InputFormatError` for corrupt gzip data,
    ``OSError`` when it cannot be read."""
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputFormatError(f"{path}: not a readable gzip file ({exc})") from None
        except OSError as exc:
            if exc.errno is not None:
                raise
            raise InputFormatError(f"{path}: not a readable gzip file ({exc})") from None
        if len(data) > max_bytes:
            raise TooLargeError(f"{path}: inflates to over {max_bytes:,} bytes (the page size limit)")
        return data
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise TooLargeError(f"{path}: file is {size:,} bytes, over the {max_bytes:,}-byte page size limit")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLargeError(f"{path}: file is over the {max_bytes:,}-byte page size limit")
    return data


_read_file = read_file  # the name used before


def _file_item(path: Path, url: str, max_bytes: int) -> InputItem:
    try:
        content = read_file(path, max_bytes)
    except TooLargeError as exc:
        return _failed(str(path), str(exc), "too-large")
    except InputFormatError as exc:
        return _failed(str(path), str(exc), "bad-gzip")
    except OSError as exc:
        return _failed(str(path), f"{path}: cannot read ({exc.strerror or exc})", "unreadable")
    headers = {"content-type": "text/plain"} if path.name.lower().endswith((".txt", ".txt.gz")) else None
    return InputItem(str(path), Page(url=url, content=content, headers=headers))


#: the columns of ``urls.tsv`` that give a file's fetch time, the first present wins
TIME_COLUMNS = ("fetched_at", "captured")


class Listed(NamedTuple):
    """What ``urls.tsv`` says of one file: its URL, its fetch time (None: not given), its row
    (the list's order) and the problem with its time, if any."""

    url: str
    fetched_at: float | None
    row: int
    error: str | None = None


def capture_time(text: str) -> float:
    """A ``urls.tsv`` time: POSIX seconds, or an ISO 8601 date or date-time (UTC when it names no
    zone). :class:`ValueError` for anything else.

    >>> capture_time("2019-03-21"), capture_time("1553126400"), capture_time("2019-03-21T00:00:00+00:00")
    (1553126400.0, 1553126400.0, 1553126400.0)
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        value = parsed.timestamp()
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _url_map(root: Path, tsvs: list[Path]) -> dict[Path, Listed]:
    """Every file a ``urls.tsv`` lists (beside it, or in its ``pages/`` folder): its URL, and
    its fetch time from a ``fetched_at`` or ``captured`` column."""
    mapping: dict[Path, Listed] = {}
    row = 0
    for tsv in tsvs:
        try:
            lines = tsv.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputFormatError(f"{tsv}: cannot read ({exc})") from None
        header = lines[0].split("\t") if lines else []
        if "file" not in header or "url" not in header:
            continue
        fi, ui = header.index("file"), header.index("url")
        ti = next((header.index(c) for c in TIME_COLUMNS if c in header), None)
        for lineno, line in enumerate(lines[1:], 2):
            cols = line.split("\t")
            if len(cols) > max(fi, ui) and cols[fi] and cols[ui]:
                row += 1
                when: float | None = None
                error = None
                if ti is not None and ti < len(cols) and cols[ti].strip():
                    try:
                        when = capture_time(cols[ti])
                    except (ValueError, OverflowError, OSError):
                        error = (f"{tsv}:{lineno}: {header[ti]} {cols[ti][:100]!r} is not a time "
                                 "(POSIX seconds or ISO 8601)")
                rel = Path(cols[fi])
                for base in (tsv.parent, tsv.parent / "pages"):
                    try:
                        mapping[(base / rel).resolve()] = Listed(cols[ui], when, row, error)
                    except (OSError, ValueError, RuntimeError):
                        continue  # a path that cannot exist (NUL byte, loop)
    return mapping


def _walk(root: Path) -> tuple[list[Path], list[Path], list[InputItem]]:
    """Page files and ``urls.tsv`` files below ``root`` (sorted), and an error item for
    every folder that cannot be listed. Symbolic links to folders are followed once."""
    files: list[Path] = []
    tsvs: list[Path] = []
    errors: list[InputItem] = []
    seen: set[tuple[int, int]] = set()

    def onerror(exc: OSError) -> None:
        where = exc.filename or root
        errors.append(_failed(str(where), f"{where}: cannot list folder ({exc.strerror or exc})", "unreadable"))

    for folder, dirs, names in os.walk(root, onerror=onerror, followlinks=True):
        try:
            st = os.stat(folder)
            key = (st.st_dev, st.st_ino)
        except OSError:
            key = None
        if key is not None:
            if key in seen:  # a link back up the tree
                dirs[:] = []
                continue
            seen.add(key)
        dirs.sort()
        base = Path(folder)
        for name in names:
            path = base / name
            if name == "urls.tsv":
                tsvs.append(path)
            if name.lower().endswith(HTML_SUFFIXES) and not os.path.isdir(path):
                files.append(path)
    return sorted(files), sorted(tsvs), errors


def read_directory(root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    """The pages of a folder. Files a ``urls.tsv`` lists get its URL and fetch time and come in
    capture order (ties in the list's order: an original before its mirror), then the other
    files by name, with their ``file://`` URL."""
    files, tsvs, errors = _walk(root)
    yield from errors
    urls = _url_map(root, tsvs)
    placed: list[tuple[tuple[float, int, str], Path, str, Listed | None]] = []
    for path in files:
        try:
            resolved = path.resolve()
            listed = urls.get(resolved)
            url = listed.url if listed is not None else resolved.as_uri()
        except (OSError, ValueError, RuntimeError) as exc:
            yield _failed(str(path), f"{path}: cannot resolve the path ({exc})", "unreadable")
            continue
        when = listed.fetched_at if listed is not None and listed.fetched_at is not None else math.inf
        placed.append(((when, listed.row if listed is not None else 0, str(path)), path, url, listed))
    for _, path, url, listed in sorted(placed, key=lambda item: item[0]):
        if listed is not None and listed.error is not None:
            yield _failed(str(path), listed.error, "bad-time")
            continue
        item = _file_item(path, url, max_bytes)
        if listed is not None and listed.fetched_at is not None and item.page is not None:
            item = dataclasses.replace(item, page=dataclasses.replace(item.page, fetched_at=listed.fetched_at))
        yield item


def _number(value: object) -> bool:
    """None or a finite JSON number (not a bool)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _read_line(fh, limit: int) -> tuple[str, bool]:  # type: ignore[no-untyped-def]
    """The next line (without reading more than ``limit`` characters of it into memory)
    and whether it was over ``limit`` (then the rest of it is skipped)."""
    line = fh.readline(limit + 1)
    if len(line) <= limit or line.endswith("\n"):
        return line, False
    while True:  # skip the rest of the long line
        rest = fh.readline(1 << 20)
        if not rest or rest.endswith("\n"):
            return "", True


def read_jsonl(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    opener = gzip.open if path.name.endswith(".gz") else open
    max_line = 4 * max_bytes + 4096  # JSON escapes (\\uXXXX) make a page longer
    try:
        fh = opener(path, "rt", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot open ({exc})") from None
    with fh:
        lineno = 0
        try:
            while True:
                line, too_long = _read_line(fh, max_line)
                if not line and not too_long:
                    break
                lineno += 1
                source = f"{path}:{lineno}"
                if too_long:
                    yield _failed(source, f"{source}: line is over {max_line:,} characters", "bad-json")
                    continue
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield _failed(source, f"{source}: invalid JSON ({exc.msg})", "bad-json")
                    continue
                except RecursionError:
                    yield _failed(source, f"{source}: JSON nested too deeply", "bad-json")
                    continue
                except (ValueError, MemoryError) as exc:  # e.g. an integer of 10^5 digits
                    yield _failed(source, f"{source}: invalid JSON ({str(exc)[:200]})", "bad-json")
                    continue
                if not isinstance(obj, dict):
                    yield _failed(source, f"{source}: expected a JSON object", "bad-record")
                    continue
                content = obj.get("html", obj.get("text"))
                url = obj.get("url")
                if not isinstance(url, str) or not isinstance(content, str):
                    yield _failed(source, f"{source}: needs string fields 'url' and 'html' (or 'text')", "bad-record")
                    continue
                headers = obj.get("headers")
                if headers is not None and not isinstance(headers, dict):
                    yield _failed(source, f"{source}: 'headers' must be an object", "bad-record")
                    continue
                if headers is not None and not all(isinstance(v, str) for v in headers.values()):
                    yield _failed(source, f"{source}: header values must be strings", "bad-record")
                    continue
                fetched_at, priority = obj.get("fetched_at"), obj.get("priority")
                if not _number(fetched_at) or not _number(priority):
                    yield _failed(source, f"{source}: 'fetched_at' and 'priority' must be finite numbers", "bad-record")
                    continue
                if "html" not in obj:
                    headers = {**(headers or {}), "content-type": "text/plain"}
                yield InputItem(source, Page(url=url, content=content, headers=headers,
                                             fetched_at=fetched_at, priority=priority))
        except (OSError, EOFError, zlib.error) as exc:
            yield _failed(f"{path}:{lineno + 1}", f"{path}: file is truncated or corrupt after line {lineno} ({exc})",
                          "bad-gzip" if path.name.endswith(".gz") else "unreadable")


def _gzip_tail_complete(path: Path, offset: int) -> bool:
    """True when every gzip member from ``offset`` to the end of the file is complete
    (read in 1 MiB steps, inflated output discarded)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        pending = b""
        member = None
        while True:
            if not pending:
                pending = fh.read(1 << 20)
                if not pending:
                    return member is None
            if member is None:
                if not pending.lstrip(b"\x00"):
                    pending = b""
                    continue
                member = zlib.decompressobj(31)
            try:
                member.decompress(pending, 1 << 20)
            except zlib.error:
                return False
            pending = member.unconsumed_tail
            if member.eof:
                pending = member.unused_data
                member = None


def _dechunk(raw: bytes) -> bytes:
    """Undo HTTP/1.1 chunked transfer coding (raises ValueError when malformed)."""
    out = bytearray()
    pos = 0
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            raise ValueError("chunk size line without CRLF")
        size_field = raw[pos:end].split(b";")[0].strip() or b"0"
        if len(size_field) > 16:
            raise ValueError("chunk size too large")
        size = int(size_field, 16)
        pos = end + 2
        if size == 0:
            return bytes(out)
        if pos + size > len(raw):
            raise ValueError("chunk runs past the end of the body")
        out += raw[pos:pos + size]
        pos += size + 2


def decode_http_body(raw: bytes, headers: dict[str, str], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Undo ``Transfer-Encoding: chunked`` and ``Content-Encoding: gzip/deflate`` as stored
    by crawlers in WARC response records (raises ValueError for a broken body and
    :class:`TooLargeError` when it inflates to over ``max_bytes``)."""
    lower = {k.lower(): v.lower() for k, v in headers.items()}
    body = raw
    if "chunked" in lower.get("transfer-encoding", ""):
        body = _dechunk(body)
    codings = [c.strip() for c in lower.get("content-encoding", "").split(",") if c.strip()]
    if len(codings) > 4:
        raise ValueError(f"too many Content-Encodings ({len(codings)})")
    for coding in reversed(codings):
        try:
            if coding in ("gzip", "x-gzip"):
                body = inflate(body, 47, max_bytes, f"Content-Encoding {coding}")
            elif coding == "deflate":
                try:
                    body = inflate(body, 15, max_bytes, "Content-Encoding deflate")
                except zlib.error:
                    body = inflate(body, -15, max_bytes, "Content-Encoding deflate")
            elif coding != "identity":
                raise ValueError(f"unsupported Content-Encoding {coding!r}")
        except zlib.error as exc:
            raise ValueError(f"cannot decode Content-Encoding {coding}: {exc}") from None
    return body


_RESYNC_STEP = 1 << 20


def _next_record(stream, start: int, gz: bool) -> int | None:  # type: ignore[no-untyped-def]
    """Offset of the next place at or after ``start`` where a record may begin: a gzip
    member header (``.warc.gz``) or a ``WARC/1.`` version line (``.warc``); None at EOF."""
    marker = b"\x1f\x8b\x08" if gz else b"\nWARC/1."
    pos = start
    while True:
        stream.seek(pos)
        chunk = stream.read(_RESYNC_STEP + len(marker))
        if len(chunk) < len(marker):
            return None
        i = chunk.find(marker)
        if i >= 0:
            return pos + i + (0 if gz else 1)
        if len(chunk) < _RESYNC_STEP + len(marker):
            return None
        pos += _RESYNC_STEP


def warc_uri(value: str | None) -> str:
    """A URI field of a WARC header (``WARC-Target-URI``, ``WARC-Refers-To-Target-URI``) as the
    URI itself: WARC/1.1 writes it bare, the WARC/1.0 grammar (and GNU Wget, which follows it)
    in angle brackets; surrounding white space dropped, "" for none.

    >>> warc_uri("<http://a.example/x?y=1>"), warc_uri(" https://a.example/ "), warc_uri(None), warc_uri("<>")
    ('http://a.example/x?y=1', 'https://a.example/', '', '')
    """
    uri = (value or "").strip()
    if uri.startswith("<") and uri.endswith(">"):
        uri = uri[1:-1].strip()
    return uri


#: URI schemes whose ``resource`` records are pages (other resources are a crawler's own data:
#: logs, ``urn:`` page info, text and screenshots)
RESOURCE_SCHEMES = ("http", "https", "ftp")


def _resource_page(url: str) -> bool:
    return url.split(":", 1)[0].lower() in RESOURCE_SCHEMES and ":" in url


def read_warc(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    """The items of a WARC file (see the module's description): pages, skipped records and
    errors, in file order."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot open ({exc})") from None
    max_record = max_bytes + (1 << 20)  # the HTTP headers and transfer coding come on top
    with stream:
        head = stream.read(4)
        stream.seek(0)
        if not (head.startswith(b"WARC") or head.startswith(b"\x1f\x8b")):
            raise InputFormatError(f"{path}: not a WARC file")
        gz = head.startswith(b"\x1f\x8b")
        n = 0  # records read
        last = -1  # offset of the last record read
        start = 0  # where the current pass over the file began
        bad_from: int | None = None  # corrupt data not reported yet: after this many records
        failure: BaseException | None = None
        while True:
            stream.seek(start)
            read_any = False
            try:
                for record in ArchiveIterator(stream, parse_http=False):
                    read_any = True
                    n += 1
                    last = record.stream_pos
                    if bad_from is not None:
                        yield _failed(f"{path}#{n}", f"{path}: corrupt data after record {bad_from} ({failure}); "
                                      f"skipped to the next readable record, at byte {last:,}", "warc-corrupt")
                        bad_from = None
                    url = warc_uri(record.headers.get("WARC-Target-URI"))
                    source = f"{path}#{n} {url}"[:1000]
                    if record.record_type == WarcRecordType.unknown:
                        rtype = (record.headers.get("WARC-Type") or "")[:40]
                        yield _failed(source, f"{source}: damaged WARC header (WARC-Type {rtype!r})", "warc-header")
                        continue
                    if record.record_type == WarcRecordType.revisit:
                        yield _skipped(source, "revisit")
                        continue
                    if record.record_type == WarcRecordType.resource:
                        if _resource_page(url):
                            yield _resource_item(record, source, url, max_bytes)
                        continue
                    if record.record_type != WarcRecordType.response:
                        continue
                    if not url:
                        yield _failed(source, f"{source}: response record without WARC-Target-URI", "warc-header")
                        continue
                    if not _http_block(record.headers.get("Content-Type")):
                        yield _skipped(source, "non-html")  # no HTTP message: a dns: lookup, a whois: reply
                        continue
                    yield _response_item(record, source, url, max_bytes, max_record)
            except (OSError, EOFError, ValueError, UnicodeError) as exc:
                failure = exc
            else:
                break
            # corrupt data: report it once, resume at the next place a record may begin
            if bad_from is None:
                bad_from = n  # records read before the corrupt data
            resume = _next_record(stream, (last if read_any else start) + 1, gz)
            if resume is None or resume <= start:
                yield _failed(f"{path}#{n + 1}", f"{path}: WARC stream is corrupt after record {n} ({failure})",
                              "warc-corrupt")
                return
            start = resume
    if bad_from is not None:
        yield _failed(f"{path}#{n + 1}", f"{path}: WARC stream is corrupt after record {n} ({failure})", "warc-corrupt")
    elif gz and not _gzip_tail_complete(path, max(last, 0)):
        yield _failed(f"{path}#{n + 1}", f"{path}: truncated or corrupt after record {n}", "warc-corrupt")


def _http_block(content_type: str | None) -> bool:
    """A response record's WARC Content-Type says it holds an HTTP message (``application/http``,
    with or without ``msgtype``, any spacing), or says nothing.

    >>> [_http_block(t) for t in ("application/http; msgtype=response", "application/http;msgtype=response",
    ...                           "Application/HTTP", None, "text/dns")]
    [True, True, True, True, False]
    """
    if content_type is None or not content_type.strip():
        return True
    return content_type.split(";", 1)[0].strip().lower() == "application/http"


def _record_time(record: Any) -> float | None:
    """The record's WARC-Date as POSIX seconds (None: none, or not a date)."""
    try:
        date = record.record_date
        return date.timestamp() if date else None
    except (ValueError, OverflowError, OSError):
        return None


def _resource_item(record: Any, source: str, url: str, max_bytes: int) -> InputItem:
    """A ``resource`` record of a web URI as an input item: its block is the page, its WARC
    Content-Type the page's (no HTTP status: a stored resource is a capture)."""
    if record.content_length > max_bytes:
        too_big = f"{source}: record is {record.content_length:,} bytes, over the {max_bytes:,}-byte page size limit"
        return _failed(source, too_big, "too-large")
    content_type = record.headers.get("Content-Type")
    if not is_html_type(content_type):
        return _skipped(source, "non-html")
    try:
        body = record.reader.read(max_bytes + 1)
    except Exception as exc:  # noqa: BLE001 - FastWARC raises plain exceptions on broken records
        return _failed(source, f"{source}: cannot read record ({exc})", "warc-corrupt")
    if len(body) > max_bytes:
        return _failed(source, f"{source}: record is over the {max_bytes:,}-byte page size limit", "too-large")
    if record.content_length and len(body) < record.content_length:
        truncated = f"{source}: truncated record ({len(body)} of {record.content_length} bytes)"
        return _failed(source, truncated, "warc-corrupt")
    headers = {"Content-Type": str(content_type)} if content_type else None
    return InputItem(source, Page(url=url, content=body, headers=headers, fetched_at=_record_time(record)))


def _response_item(record: Any, source: str, url: str, max_bytes: int, max_record: int) -> InputItem:
    """One WARC ``response`` record as an input item: its page, or why it is skipped or
    cannot be read (size, broken record, status, content type, encoding)."""
    if record.content_length > max_record:
        return _failed(source, f"{source}: record is {record.content_length:,} bytes, over the "
                       f"{max_bytes:,}-byte page size limit", "too-large")
    try:
        record.parse_http()
        body = record.reader.read(max_record + 1)
    except Exception as exc:  # noqa: BLE001 - FastWARC raises plain exceptions on broken records
        return _failed(source, f"{source}: cannot read record ({exc})", "warc-corrupt")
    if record.http_headers is None:
        return _failed(source, f"{source}: truncated record or no HTTP headers", "warc-corrupt")
    if record.http_headers.status_code != 200:
        return _skipped(source, "non-200")
    if not is_html_type(record.http_headers.get("Content-Type")):
        return _skipped(source, "non-html")
    if len(body) > max_record:
        return _failed(source, f"{source}: record body is over the {max_bytes:,}-byte page size limit", "too-large")
    if record.content_length and len(body) < record.content_length:  # (after parse_http: the body's)
        return _failed(source, f"{source}: truncated record ({len(body)} of {record.content_length} bytes)",
                       "warc-corrupt")
    headers = {str(k): str(v) for k, v in record.http_headers.items()}
    try:
        body = decode_http_body(body, headers, max_bytes)
    except TooLargeError as exc:
        return _failed(source, f"{source}: {exc}", "too-large")
    except ValueError as exc:
        return _failed(source, f"{source}: {exc}", "bad-encoding")
    return InputItem(source, Page(url=url, content=body, headers=headers, fetched_at=_record_time(record)))


def count_items(paths: "Iterable[str | Path]") -> int | None:
    """How many items ``read_input`` will yield for all of ``paths`` when that is known
    without reading them (folders and single page files: one per file), else None
    (JSONL and WARC files)."""
    total = 0
    for path in paths:
        p = Path(path)
        if p.is_dir():
            files, _, errors = _walk(p)
            total += len(files) + len(errors)
        elif p.name.lower().endswith(HTML_SUFFIXES):
            total += 1
        else:
            return None
    return total


def read_input(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    """Pages from a directory, JSONL file or WARC file (chosen by what ``path`` is); no
    page is larger than ``max_bytes`` after decompression."""
    p = Path(path)
    if not p.exists():
        raise InputFormatError(f"{path}: no such file or directory")
    if p.is_dir():
        return read_directory(p, max_bytes)
    name = p.name.lower()
    if name.endswith(WARC_SUFFIXES):
        return read_warc(p, max_bytes)
    if name.endswith(JSONL_SUFFIXES):
        return read_jsonl(p, max_bytes)
    if name.endswith(HTML_SUFFIXES):
        return iter([_file_item(p, p.resolve().as_uri(), max_bytes)])
    raise InputFormatError(f"{path}: unknown input type (expected a directory, .jsonl, .warc or .warc.gz)")


def read_all(inputs: tuple[str, ...], max_bytes: int) -> Iterator[InputItem]:
    """Items of every input in turn; an input that turns out unreadable part-way is one
    error item, and the next input is read."""
    for path in inputs:
        try:
            yield from read_input(path, max_bytes)
        except NeardupError as exc:
            yield InputItem(path, error=str(exc), reason="bad-input")
        except OSError as exc:
            yield InputItem(path, error=f"{path}: {exc.strerror or exc}", reason="unreadable")



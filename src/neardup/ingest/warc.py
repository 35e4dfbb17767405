"""WARC files as input items (:func:`read_warc`), with FastWARC.

``response`` records with HTTP status 200 and an HTML Content-Type (or none) are pages: the
target URI, HTTP headers and WARC date go with the page, the HTTP payload decoded (chunked
transfer coding, gzip or deflate Content-Encoding, as wget and Heritrix store it).
``resource`` records of an ``http(s)`` or ``ftp`` URI (a capture without protocol headers) are
pages the same way, their WARC Content-Type standing for the HTTP one. Other responses (and
response records that hold no HTTP message, such as Heritrix's ``dns:`` lookups) and
``revisit`` records are items with a ``skip`` reason (:data:`~neardup.ingest.items.SKIPS`),
counted but not pages; a revisit of the identical-payload-digest or server-not-modified
profile that refers to a capture of its own URL also carries that URL's unchanged fetch at the
record's WARC-Date (:attr:`~neardup.ingest.items.InputItem.revisit`). Warcinfo, request and
metadata records and resource records of other
URIs (wget's ``metadata://`` log, browsertrix's ``urn:pageinfo:``, ``urn:text:`` and
``urn:view:`` records) are not items. URIs are read in both the WARC/1.1 form and the WARC/1.0
one in angle brackets (``<http://...>``, GNU Wget): :func:`warc_uri`. A record with a damaged
header is an error, and after corrupt bytes (a broken gzip member, a garbled record) reading
resumes at the next record.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from neardup.errors import ConfigError, InputFormatError
from neardup.fingerprint.extract import DEFAULT_MAX_BYTES
from neardup.ingest.items import InputItem, TooLargeError, failed, inflate, is_html_type, skipped
from neardup.model import Page, checked_time


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
                        yield failed(f"{path}#{n}", f"{path}: corrupt data after record {bad_from} ({failure}); "
                                      f"skipped to the next readable record, at byte {last:,}", "warc-corrupt")
                        bad_from = None
                    url = warc_uri(record.headers.get("WARC-Target-URI"))
                    source = f"{path}#{n} {url}"[:1000]
                    if record.record_type == WarcRecordType.unknown:
                        rtype = (record.headers.get("WARC-Type") or "")[:40]
                        yield failed(source, f"{source}: damaged WARC header (WARC-Type {rtype!r})", "warc-header")
                        continue
                    if record.record_type == WarcRecordType.revisit:
                        yield _revisit_item(record, source, url)
                        continue
                    if record.record_type == WarcRecordType.resource:
                        if _resource_page(url):
                            yield _resource_item(record, source, url, max_bytes)
                        continue
                    if record.record_type != WarcRecordType.response:
                        continue
                    if not url:
                        yield failed(source, f"{source}: response record without WARC-Target-URI", "warc-header")
                        continue
                    if not _http_block(record.headers.get("Content-Type")):
                        yield skipped(source, "non-html")  # no HTTP message: a dns: lookup, a whois: reply
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
                yield failed(f"{path}#{n + 1}", f"{path}: WARC stream is corrupt after record {n} ({failure})",
                              "warc-corrupt")
                return
            start = resume
    if bad_from is not None:
        yield failed(f"{path}#{n + 1}", f"{path}: WARC stream is corrupt after record {n} ({failure})", "warc-corrupt")
    elif gz and not _gzip_tail_complete(path, max(last, 0)):
        yield failed(f"{path}#{n + 1}", f"{path}: truncated or corrupt after record {n}", "warc-corrupt")


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
    """The record's WARC-Date as POSIX seconds (None: none, or not a date from 1970 to 9999,
    :func:`neardup.model.checked_time`)."""
    try:
        date = record.record_date
        return checked_time(date) if date else None
    except (ValueError, OverflowError, OSError, ConfigError):
        return None


def _header_time(value: str | None) -> float | None:
    """A WARC date header (``WARC-Refers-To-Date``) as POSIX seconds (None: none or unreadable)."""
    if not value:
        return None
    try:
        at = datetime.fromisoformat(value.strip())
        return checked_time(at if at.tzinfo else at.replace(tzinfo=UTC))  # WARC dates are UTC
    except (ValueError, OverflowError, OSError, ConfigError):
        return None


#: the revisit profiles that say "this URL served the same bytes again" (WARC/1.0 and 1.1)
REVISIT_PROFILES = ("/revisit/identical-payload-digest", "/revisit/server-not-modified")


def _revisit_item(record: Any, source: str, url: str) -> InputItem:
    """A ``revisit`` record as an input item, skipped (``revisit``) by the readers that take
    pages only; with :attr:`InputItem.revisit`, an unchanged fetch of its URL at its WARC-Date
    (:attr:`neardup.model.Page.revisit`), when its profile is identical-payload-digest or
    server-not-modified: not for another profile. One that refers to a capture of another URL
    (its ``WARC-Refers-To-Target-URI``, as a payload-digest deduplication across URLs writes it)
    says so (``refers_to``, ``refers_to_date``)."""
    profile = str(record.headers.get("WARC-Profile") or "").strip().rstrip("/")
    target = warc_uri(record.headers.get("WARC-Refers-To-Target-URI"))
    if not url or not profile.endswith(REVISIT_PROFILES):
        return skipped(source, "revisit")
    try:
        record.parse_http()
        http = record.http_headers
    except Exception:  # noqa: BLE001 - a revisit may hold no HTTP headers at all
        http = None
    if http is not None and http.status_code and (http.status_code not in (200, 304)
                                                  or not is_html_type(http.get("Content-Type"))):
        return skipped(source, "revisit")  # a revisit of a stylesheet, a script, an image, a redirect
    other = target if target and target != url else None
    return InputItem(source, skip="revisit", revisit=Page(
        url=url, content=b"", fetched_at=_record_time(record), revisit=True, refers_to=other,
        refers_to_date=_header_time(record.headers.get("WARC-Refers-To-Date")) if other else None))


def _resource_item(record: Any, source: str, url: str, max_bytes: int) -> InputItem:
    """A ``resource`` record of a web URI as an input item: its block is the page, its WARC
    Content-Type the page's (no HTTP status: a stored resource is a capture)."""
    if record.content_length > max_bytes:
        too_big = f"{source}: record is {record.content_length:,} bytes, over the {max_bytes:,}-byte page size limit"
        return failed(source, too_big, "too-large")
    content_type = record.headers.get("Content-Type")
    if not is_html_type(content_type):
        return skipped(source, "non-html")
    try:
        body = record.reader.read(max_bytes + 1)
    except Exception as exc:  # noqa: BLE001 - FastWARC raises plain exceptions on broken records
        return failed(source, f"{source}: cannot read record ({exc})", "warc-corrupt")
    if len(body) > max_bytes:
        return failed(source, f"{source}: record is over the {max_bytes:,}-byte page size limit", "too-large")
    if record.content_length and len(body) < record.content_length:
        truncated = f"{source}: truncated record ({len(body)} of {record.content_length} bytes)"
        return failed(source, truncated, "warc-corrupt")
    headers = {"Content-Type": str(content_type)} if content_type else None
    return InputItem(source, Page(url=url, content=body, headers=headers, fetched_at=_record_time(record)))


def _response_item(record: Any, source: str, url: str, max_bytes: int, max_record: int) -> InputItem:
    """One WARC ``response`` record as an input item: its page, or why it is skipped or
    cannot be read (size, broken record, status, content type, encoding)."""
    if record.content_length > max_record:
        return failed(source, f"{source}: record is {record.content_length:,} bytes, over the "
                       f"{max_bytes:,}-byte page size limit", "too-large")
    try:
        record.parse_http()
        body = record.reader.read(max_record + 1)
    except Exception as exc:  # noqa: BLE001 - FastWARC raises plain exceptions on broken records
        return failed(source, f"{source}: cannot read record ({exc})", "warc-corrupt")
    if record.http_headers is None:
        return failed(source, f"{source}: truncated record or no HTTP headers", "warc-corrupt")
    if record.http_headers.status_code != 200:
        return skipped(source, "non-200")
    if not is_html_type(record.http_headers.get("Content-Type")):
        return skipped(source, "non-html")
    if len(body) > max_record:
        return failed(source, f"{source}: record body is over the {max_bytes:,}-byte page size limit", "too-large")
    if record.content_length and len(body) < record.content_length:  # (after parse_http: the body's)
        return failed(source, f"{source}: truncated record ({len(body)} of {record.content_length} bytes)",
                       "warc-corrupt")
    headers = {str(k): str(v) for k, v in record.http_headers.items()}
    try:
        body = decode_http_body(body, headers, max_bytes)
    except TooLargeError as exc:
        return failed(source, f"{source}: {exc}", "too-large")
    except ValueError as exc:
        return failed(source, f"{source}: {exc}", "bad-encoding")
    return InputItem(source, Page(url=url, content=body, headers=headers, fetched_at=_record_time(record)))

"""What every input reader yields: :class:`InputItem` (a page, a record skipped by design, or
an error naming the record), the reasons it counts by, and the bounded decompression all
readers share (:func:`inflate`)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from neardup.errors import InputFormatError
from neardup.model import Page

# why an item could not be read (InputItem.reason)
REASONS = {
    "unreadable": "a file or folder that cannot be read (permissions, I/O error)",
    "too-large": "over the page size limit (max_bytes), after decompression",
    "bad-gzip": "corrupt or truncated gzip data",
    "bad-time": "a urls.tsv or JSONL fetch time that is not a time from 1970 to 9999",
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
    #: a revisit of a stored URL (a WARC revisit record): no page, an unchanged fetch for the
    #: readers that take it (``neardup dedup``, :func:`neardup.ingest.workers.add_pages`)
    revisit: Page | None = None


# why a record is not a page (InputItem.skip): counted, never reported as an error
SKIPS = {
    "non-html": (
        "a WARC response whose Content-Type is not HTML (CSS, scripts, JSON, images, PDF, robots.txt...), "
        "or that holds no HTTP response (Heritrix's dns: records)"
    ),
    "non-200": "a WARC response whose HTTP status is not 200 (redirects, 404s, server errors)",
    "not-a-page": "an HTML capture in a WACZ package that its page list does not name (an iframe, a fragment)",
    "revisit": "a WARC revisit record (a capture stored as a reference to an earlier one; neardup dedup "
               "counts one of its own URL's identical payload or a 304 as an unchanged fetch of that URL)",
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


def skipped(source: str, why: str) -> InputItem:
    """The item of a record that is not a page, by design (``why``: one of :data:`SKIPS`)."""
    return InputItem(source, skip=why)


def failed(source: str, error: str, reason: str) -> InputItem:
    """The item of a record that cannot be read (``reason``: one of :data:`REASONS`)."""
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

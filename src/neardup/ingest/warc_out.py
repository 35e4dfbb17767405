"""A deduplicated copy of the input WARC files (``neardup dedup --warc-out``).

Every record is copied as it is (its bytes, one gzip member each), in input order, except:

- a ``response`` whose *payload digest* (``WARC-Payload-Digest``, else the SHA-1 of its
  payload) equals an earlier response's in these inputs becomes a ``revisit`` record of the
  identical-payload-digest profile, its HTTP headers kept, with ``WARC-Refers-To`` (the
  original's record id), ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date``: what a
  replay tool resolves to the original's bytes, so only byte-identical payloads are written so;
- a response that neardup decided ``near`` or ``exact`` (equal main text, not an equal
  payload) is kept whole, followed by a ``metadata`` record that refers to it (``WARC-Refers-To``,
  ``WARC-Concurrent-To``; target ``urn:neardup:verdict:`` and its URI) holding the verdict as
  JSON (``application/json``): never a revisit, since a replay would serve another capture's
  bytes for it.

>>> warc_position("crawl/a.warc.gz#12 https://a.example/")
('crawl/a.warc.gz', 12)
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neardup.errors import InputFormatError
from neardup.model import Verdict

_POSITION = re.compile(r"^(.*)#(\d+)(?: |$)", re.S)
#: the statuses whose response gets a metadata record with the verdict
ANNOTATED = ("near", "exact")
#: the metadata record's target URI: this prefix and the response's URI (a replay tool that
#: indexes metadata records never serves one for the page: its URI is not the page's)
VERDICT_URN = "urn:neardup:verdict:"


def warc_position(source: str) -> tuple[str, int] | None:
    """(file, record number) of an input item's source (:func:`neardup.ingest.warc.read_warc`
    names items ``FILE#N URL``), None for another kind of source."""
    m = _POSITION.match(source)
    return (m.group(1), int(m.group(2))) if m else None


@dataclass
class WarcOutStats:
    """What the deduplicated copy holds: records and bytes in and out, revisits and metadata
    records written."""

    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    revisits: int = 0
    metadata: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _payload_digest(record: Any) -> str:
    """The record's payload digest as written, else ``sha1:`` of its payload (base 32)."""
    given = record.rec_headers.get_header("WARC-Payload-Digest")
    if given:
        return str(given).strip()
    data = record.content_stream().read()
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def write_deduplicated(inputs: list[Path], out: Path, verdicts: Mapping[tuple[str, int], Verdict]) -> WarcOutStats:
    """Write the deduplicated copy of ``inputs`` to ``out`` (gzip, one member per record);
    ``verdicts``: each decided response's verdict by (file as given, record number from 1)."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.warcwriter import WARCWriter

    stats = WarcOutStats()
    first: dict[str, tuple[str, str, str]] = {}  # payload digest -> (record id, target URI, date)
    with open(out, "wb") as sink:
        writer = WARCWriter(sink, gzip=True)
        for path in inputs:
            raw = open(path, "rb")
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            with open(path, "rb") as stream, raw:
                it = ArchiveIterator(stream)
                try:
                    for n, record in enumerate(it, start=1):
                        stats.records_in += 1
                        rtype = record.rec_type
                        uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                        digest = _payload_digest(record) if rtype == "response" else None
                        it.read_to_end(record)
                        offset, length = it.get_record_offset(), it.get_record_length()
                        raw.seek(offset)
                        data = raw.read(length)
                        stats.bytes_in += length
                        before = sink.tell()
                        if digest is not None and digest in first:
                            ref_id, ref_uri, ref_date = first[digest]
                            revisit = writer.create_revisit_record(
                                uri, digest=digest, refers_to_uri=ref_uri, refers_to_date=ref_date,
                                http_headers=record.http_headers,
                                warc_headers_dict={"WARC-Refers-To": ref_id,
                                                   "WARC-Date": record.rec_headers.get_header("WARC-Date")})
                            writer.write_record(revisit)
                            stats.revisits += 1
                        else:
                            sink.write(data if gz else gzip.compress(data))
                            if digest is not None:
                                first[digest] = (str(record.rec_headers.get_header("WARC-Record-ID")), uri,
                                                 str(record.rec_headers.get_header("WARC-Date")))
                            verdict = verdicts.get((str(path), n))
                            if rtype == "response" and verdict is not None and verdict.status in ANNOTATED:
                                writer.write_record(_metadata(writer, record, verdict))
                                stats.metadata += 1
                        stats.records_out += 1
                        stats.bytes_out += sink.tell() - before
                except Exception as exc:  # noqa: BLE001 - warcio raises plain exceptions on broken files
                    raise InputFormatError(f"{path}: cannot copy record {stats.records_in} ({exc})") from None
    return stats


def _metadata(writer: Any, record: Any, verdict: Verdict) -> Any:
    """The ``metadata`` record that carries a kept response's verdict."""
    rid = str(record.rec_headers.get_header("WARC-Record-ID"))
    body = json.dumps({"neardup": {k: v for k, v in verdict.to_dict().items() if v is not None}},
                      ensure_ascii=False).encode("utf-8")
    target = VERDICT_URN + (record.rec_headers.get_header("WARC-Target-URI") or "")
    return writer.create_warc_record(
        target, "metadata", payload=io.BytesIO(body),
        warc_content_type="application/json",
        warc_headers_dict={"WARC-Refers-To": rid, "WARC-Concurrent-To": rid,
                           "WARC-Date": record.rec_headers.get_header("WARC-Date")})

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

With a store (``neardup dedup --db``), the originals are remembered across runs: the second
crawl's unchanged stylesheet is a revisit of the first crawl's capture, which replays as long
as the archive keeps the first crawl's WARC (``--max-original-age`` bounds how old it may be).

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

from neardup.errors import InputFormatError, NeardupError
from neardup.store.base import Store

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


@dataclass(frozen=True)
class RevisitPolicy:
    """When a payload-identical response may become a revisit (the knobs archivists ask for):
    its payload at least ``min_payload`` bytes (browsertrix-crawler's minimum size: small
    responses are cheaper kept than referenced); its original at most ``max_age`` seconds older
    (gowarc's maximum age: an archive that prunes old WARC files keeps what it can replay); and
    not within ``blackout`` seconds of its original (warcprox's blackout period: a burst of
    captures of one resource keeps them whole). Revisits always refer to an original response,
    never to another revisit, so a replay resolves each in one step (no chain to cap: pywb's
    chains of hundreds of revisits, ukwa-pywb #73, cannot form here)."""

    min_payload: int = 0
    max_age: float | None = None
    blackout: float = 0.0

    def allows(self, payload: int, age: float | None) -> bool:
        """Whether a response of ``payload`` bytes, ``age`` seconds after its original (None:
        unknown), becomes a revisit.

        >>> RevisitPolicy(min_payload=100).allows(99, 5.0), RevisitPolicy(blackout=60).allows(500, 30.0)
        (False, False)
        >>> RevisitPolicy(max_age=86400).allows(500, 3600.0), RevisitPolicy(max_age=60).allows(500, None)
        (True, False)
        """
        if payload < self.min_payload:
            return False
        if age is None:
            return self.max_age is None and self.blackout <= 0
        return age >= self.blackout and (self.max_age is None or age <= self.max_age)


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
    kept_by_policy: int = 0  # payload-identical responses the policy kept whole

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _payload(record: Any) -> tuple[str, int]:
    """The record's payload digest (as written, else ``sha1:`` of its payload, base 32) and
    its payload's length."""
    data = record.content_stream().read()
    given = record.rec_headers.get_header("WARC-Payload-Digest")
    digest = str(given).strip() if given else "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")
    return digest, len(data)


def _seconds(date: str | None) -> float | None:
    """A WARC-Date as POSIX seconds (None when it is not one)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(date).replace("Z", "+00:00")).timestamp() if date else None
    except ValueError:
        return None


class _Originals:
    """The original capture of each payload digest: those of this run, in memory, and with a
    store those of earlier runs (its ``payloads`` table, read on a miss, written at the end)."""

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.known: dict[str, tuple[str, str, str]] = {}
        self.absent: set[str] = set()
        self.written: dict[str, tuple[str, str, str]] = {}

    def get(self, digest: str) -> tuple[str, str, str] | None:
        if digest in self.known or self.store is None or digest in self.absent:
            return self.known.get(digest)
        got = self.store.payload_originals([digest]).get(digest)
        if got is None:
            self.absent.add(digest)
        else:
            self.known[digest] = got
        return got

    def set(self, digest: str, original: tuple[str, str, str]) -> None:
        self.known[digest] = self.written[digest] = original
        self.absent.discard(digest)

    def save(self) -> None:
        if self.store is not None and self.written:
            self.store.set_payload_originals(self.written)


def write_deduplicated(inputs: list[Path], out: Path, verdicts: Mapping[tuple[str, int], Mapping[str, Any]],
                       policy: RevisitPolicy = RevisitPolicy(), store: Store | None = None) -> WarcOutStats:
    """Write the deduplicated copy of ``inputs`` to ``out`` (gzip, one member per record);
    ``verdicts``: each decided response's verdict (its fields, ``status`` among them) by (file
    as given, record number from 1); ``policy``: when a payload-identical response becomes a
    revisit; ``store``: where the originals of earlier runs are kept (a later crawl's copy
    refers to the capture an earlier crawl wrote whole; this run's originals are added to it
    once the copy is written), else originals are looked for in ``inputs`` only."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.warcwriter import WARCWriter

    stats = WarcOutStats()
    first = _Originals(store)  # payload digest -> (record id, target URI, date)
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
                        digest, size = _payload(record) if rtype == "response" else (None, 0)
                        date = record.rec_headers.get_header("WARC-Date")
                        it.read_to_end(record)
                        offset, length = it.get_record_offset(), it.get_record_length()
                        raw.seek(offset)
                        data = raw.read(length)
                        stats.bytes_in += length
                        before = sink.tell()
                        known = first.get(digest) if digest is not None else None
                        since = None
                        if known is not None and (now := _seconds(date)) is not None \
                                and (then := _seconds(known[2])) is not None:
                            since = now - then
                        if known is not None and not policy.allows(size, since):
                            stats.kept_by_policy += 1
                            known = None
                        if known is not None and digest is not None:
                            ref_id, ref_uri, ref_date = known
                            revisit = writer.create_revisit_record(
                                uri, digest=digest, refers_to_uri=ref_uri, refers_to_date=ref_date,
                                http_headers=record.http_headers,
                                warc_headers_dict={"WARC-Refers-To": ref_id, "WARC-Date": date})
                            writer.write_record(revisit)
                            stats.revisits += 1
                        else:
                            sink.write(data if gz else gzip.compress(data))
                            stale = policy.max_age is not None and since is not None and since > policy.max_age
                            if digest is not None and (first.get(digest) is None or stale):  # newer when stale
                                first.set(digest, (str(record.rec_headers.get_header("WARC-Record-ID")), uri,
                                                   str(date)))
                            verdict = verdicts.get((str(path), n))
                            if rtype == "response" and verdict is not None and verdict.get("status") in ANNOTATED:
                                writer.write_record(_metadata(writer, record, verdict))
                                stats.metadata += 1
                        stats.records_out += 1
                        stats.bytes_out += sink.tell() - before
                except NeardupError:
                    raise
                except Exception as exc:  # noqa: BLE001 - warcio raises plain exceptions on broken files
                    raise InputFormatError(f"{path}: cannot copy record {stats.records_in} ({exc})") from None
    first.save()
    return stats


def _metadata(writer: Any, record: Any, verdict: Mapping[str, Any]) -> Any:
    """The ``metadata`` record that carries a kept response's verdict."""
    rid = str(record.rec_headers.get_header("WARC-Record-ID"))
    body = json.dumps({"neardup": {k: v for k, v in verdict.items() if v is not None}},
                      ensure_ascii=False).encode("utf-8")
    target = VERDICT_URN + (record.rec_headers.get_header("WARC-Target-URI") or "")
    return writer.create_warc_record(
        target, "metadata", payload=io.BytesIO(body),
        warc_content_type="application/json",
        warc_headers_dict={"WARC-Refers-To": rid, "WARC-Concurrent-To": rid,
                           "WARC-Date": record.rec_headers.get_header("WARC-Date")})

"""Revisits in the batch job: a fetch that found a URL unchanged without sending its content
(a WARC ``revisit`` record of the identical-payload-digest or server-not-modified profile, an
HTTP 304; :attr:`neardup.model.Page.revisit`) is a capture of that URL holding the content of
its latest capture before it, as :meth:`neardup.detector.core.Detector.add_revisit` records it
online.

The rule, one definition for :func:`neardup.batch.dedup.dedup_batch` (both engines), ``neardup
dedup --batch`` (:func:`revisit_table`, on columns) and :mod:`neardup.batch.spark.versions`:

* a revisit is keyed as every capture (:func:`neardup.batch.graph.url_group_key`), of its own
  URL, or of the URL it names (:attr:`Page.refers_to <neardup.model.Page.refers_to>`: a WARC
  revisit of another URL's payload, as Heritrix and browsertrix-crawler write them);
* its *original* is the capture with content of that key fetched at or before the revisit's
  time (or the ``refers_to_date`` it names), the last of them in the capture order
  (:func:`neardup.batch.versions.capture_key`); a revisit without a time takes the key's last
  capture (and that capture's time);
* the revisit becomes a copy of its original's record with the revisit's own URL (as given) and
  fetch time; from there it is a capture like any other (:mod:`neardup.batch.versions`): it
  takes its URL's decision and the version ``unchanged`` (the same digest as the capture before
  it), and when it is the URL's last capture, its content is the URL's current version (a
  revisit of another URL's payload is a capture of that content under its own URL: an exact
  copy of the other, or a version of its own URL's earlier captures);
* a revisit whose key has no capture with content at or before it (its original is not in the
  input) is not a page: ``neardup dedup --batch`` counts it as a skipped ``revisit``,
  :func:`~neardup.batch.dedup.dedup_batch` reports an error line.

The answer depends on the set of captures and revisits only, not on their order.

>>> from neardup.batch.graph import BatchRecord
>>> from neardup.model import Page
>>> rows = [BatchRecord("https://a.example/x", "d1", 1, first_seen=10.0),
...         BatchRecord("https://a.example/x", "d2", 2, first_seen=20.0)]
>>> got, missed = resolve_revisits(rows, [Page("https://a.example/x#top", b"", fetched_at=15.0, revisit=True),
...                                       Page("https://a.example/x", b"", fetched_at=5.0, revisit=True)])
>>> [(r.url, r.digest, r.first_seen) for r in got if r is not None], [p.fetched_at for p in missed]
([('https://a.example/x#top', 'd1', 15.0)], [5.0])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from neardup.batch.graph import BatchRecord, url_group_key
from neardup.batch.versions import capture_key
from neardup.model import Page, checked_time


def revisit_time(page: Page) -> float | None:
    """A revisit's fetch time in POSIX seconds (None: not given), checked as every page's is."""
    return None if page.fetched_at is None else checked_time(page.fetched_at, "fetched_at")


def original_key(page: Page) -> str:
    """The URL key of the captures a revisit repeats: its own URL's, or the one it names."""
    return url_group_key(page.refers_to or page.url)


def original_bound(page: Page) -> float | None:
    """The time a revisit's original was fetched at or before (module docs)."""
    named = page.refers_to_date if page.refers_to else None
    return checked_time(named, "refers_to_date") if named is not None else revisit_time(page)


def original_of(captures: Sequence[BatchRecord], at: float | None) -> BatchRecord | None:
    """The capture a revisit at ``at`` refers to (module docs), among ``captures`` of its key."""
    before = [c for c in captures if at is None or c.first_seen <= at]
    return max(before, key=capture_key) if before else None


def resolve_revisits(rows: Sequence[BatchRecord], revisits: Sequence[Page]) -> tuple[list[BatchRecord | None],
                                                                                   list[Page]]:
    """Each revisit as a capture (module docs), in the order given (None where it has no
    original in ``rows``), and the revisits that have none."""
    wanted = {original_key(p) for p in revisits}
    captures: dict[str, list[BatchRecord]] = {}
    for r in rows:
        key = url_group_key(r.url)
        if key in wanted:
            captures.setdefault(key, []).append(r)
    out: list[BatchRecord | None] = []
    missed: list[Page] = []
    for p in revisits:
        at = revisit_time(p)
        original = original_of(captures.get(original_key(p), ()), original_bound(p))
        if original is None:
            out.append(None)
            missed.append(p)
        else:
            out.append(dataclasses.replace(original, url=p.url,
                                           first_seen=original.first_seen if at is None else at))
    return out, missed


def revisit_table(tables: Sequence[Any], revisits: Sequence[Page]) -> tuple[Any, list[Page]]:
    """:func:`resolve_revisits` on columns: the revisits that have an original in the Arrow
    fingerprint ``tables`` (the columns :func:`neardup.batch.arrays.records_table` writes) as one
    more such table (in the order given), and the revisits that have none. Only the rows of the
    revisits' URL keys leave Arrow (found by :func:`neardup.batch.versions.url_keys`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from neardup.batch.arrays import records_table
    from neardup.batch.versions import url_keys

    keys = pa.array(sorted({original_key(p) for p in revisits}), pa.large_string())
    rows: list[BatchRecord] = []
    for table in tables:
        if table.num_rows == 0:
            continue
        urls = table.column("url").combine_chunks()
        hit = table.filter(pc.is_in(url_keys(urls), value_set=keys))
        rows += [_record(r) for r in hit.to_pylist()]
    got, missed = resolve_revisits(rows, revisits)
    return records_table([r for r in got if r is not None]), missed


def _record(row: dict[str, Any]) -> BatchRecord:
    """A fingerprint table's row as a record (the SimHash back to unsigned)."""
    sim = int(row["simhash"])
    return BatchRecord(url=row["url"], digest=row["digest"], simhash=sim + (1 << 64) if sim < 0 else sim,
                       empty=bool(row.get("empty") or False), sketch=row.get("sketch"), title=row.get("title"),
                       length=int(row.get("length") or 0), canonical_link=row.get("canonical_link"),
                       first_seen=float(row.get("first_seen") or 0.0), priority=row.get("priority"))

"""The store contract: everything the Detector, the index mirror and the service ask of a
store, declared once (:class:`Store`), with the records it hands back.

:class:`~neardup.store.sql.SQLStore` implements it in SQL for SQLite
(:class:`~neardup.store.sqlite.SQLiteStore`) and PostgreSQL (:class:`~neardup.store.postgres.PostgresStore`);
``tests/test_store.py`` runs the contract tests on both. Another backend implements every
abstract method here (or subclasses ``SQLStore`` and implements its plumbing).

SimHash values are ints of ``bits`` bits; ``bits`` is the width of the stored fingerprints
(set by the Detector from the store's config): a stored value of another width is damage
and reads raise :class:`~neardup.errors.StoreError`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

PAGE_COLUMNS = (
    "id", "url", "host", "first_seen", "fetched_at", "digest", "simhash", "spec", "length",
    "title", "canonical_link", "language", "status", "matched_id", "distance", "cluster_id",
    "priority", "signature", "set_size", "sketch", "fetched_url", "fetches", "change_count",
    "last_changed_at", "change_rate", "next_fetch", "structure", "stable",
)

#: the columns of :meth:`Store.export_batches` (``neardup export``)
EXPORT_COLUMNS = (
    "url", "fetched_url", "host", "status", "match_url", "distance", "cluster_id", "canonical_url", "is_canonical",
    "first_seen", "fetched_at", "fetches", "change_count", "last_changed_at", "change_rate", "next_fetch",
    "title", "digest", "simhash", "page_id",
)

def redact(target: str) -> str:
    """A store target (a DSN or a server's URL) without its password, for messages.

    >>> redact("postgresql://nobody:secret@db/crawl"), redact("redis://:secret@cache:6379/0")
    ('postgresql://nobody:***@db/crawl', 'redis://:***@cache:6379/0')
    """
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", re.sub(r"password=\S+", "password=***", target))


#: fetches of one URL kept in its history (``page_versions``): enough for its change rate
HISTORY_LIMIT = 32


@dataclass
class PageRecord:
    """One stored page (its latest fetch). ``simhash`` is an int; ``id`` None until stored."""

    url: str
    host: str
    first_seen: float
    fetched_at: float
    digest: str
    simhash: int
    spec: str
    length: int
    title: str | None
    canonical_link: str | None
    language: str | None
    status: str
    matched_id: int | None = None
    distance: int | None = None
    cluster_id: int | None = None
    priority: float | None = None
    signature: bytes | None = None
    set_size: int | None = None
    sketch: bytes | None = None
    fetched_url: str | None = None
    """the URL as it was last fetched, when it differs from its normalised key ``url``"""
    fetches: int = 1
    change_count: int = 0
    """re-fetches that found the content changed"""
    last_changed_at: float | None = None
    change_rate: float | None = None
    """estimated changes per second (:func:`neardup.crawl.schedule.change_rate`), None before a re-fetch"""
    next_fetch: float | None = None
    """when the content is next expected to have changed (:func:`neardup.crawl.schedule.next_fetch`)"""
    structure: int | None = None
    """the page's DOM structure SimHash (:mod:`neardup.fingerprint.structure`), None before spec version 3"""
    stable: str | None = None
    """the digest of its main text without its host's per-fetch noise (:mod:`neardup.crawl.noise`;
    None: not known, the digest decides)"""
    id: int | None = None

    def to_dict(self, bits: int = 64) -> dict[str, Any]:
        """JSON-ready values (the SimHash in hex, the sketch in hex, no MinHash signature)."""
        out = {c: getattr(self, c) for c in PAGE_COLUMNS if c not in ("signature", "sketch")}
        out["simhash"] = f"{self.simhash:0{bits // 4}x}"
        out["sketch"] = self.sketch.hex() if self.sketch is not None else None
        out["structure"] = f"{self.structure:016x}" if self.structure is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PageRecord:
        """The record :meth:`to_dict` wrote (``neardup.Client`` reads the service's answers).

        >>> rec = PageRecord("https://a.example/", "a.example", 1.0, 2.0, "d" * 64, 255, "spec", 10, None, None,
        ...                  None, "new", id=3, sketch=bytes(64))
        >>> PageRecord.from_dict(rec.to_dict()) == rec
        True
        """
        values = {k: v for k, v in data.items() if k in PAGE_COLUMNS}
        values["simhash"] = int(str(data["simhash"]), 16)
        sketch = data.get("sketch")
        values["sketch"] = bytes.fromhex(sketch) if isinstance(sketch, str) else None
        values["signature"] = None
        structure = data.get("structure")
        values["structure"] = int(structure, 16) if isinstance(structure, str) else None
        return cls(**values)


@dataclass(frozen=True)
class VersionRow:
    """One fetch of a URL (:meth:`Store.versions`): when, what, and how it compared with
    the fetch before it (``changed`` None for the first fetch kept)."""

    fetched_at: float
    digest: str
    simhash: int
    changed: bool | None
    distance: int | None
    score: float | None

    def to_dict(self, bits: int = 64) -> dict[str, Any]:
        return {"fetched_at": self.fetched_at, "digest": self.digest, "simhash": f"{self.simhash:0{bits // 4}x}",
                "changed": self.changed, "distance": self.distance, "score": self.score}


@dataclass(frozen=True)
class StructureRow:
    """What the template state reads of one stored page (:meth:`Store.structure_rows`)."""

    fetched_at: float
    structure: int
    digest: str
    length: int
    url: str


@dataclass(frozen=True)
class HostFigures:
    """One host's pages, as :meth:`Store.host_figures` counts them."""

    host: str
    counts: dict[str, int]
    """pages by status (each URL's decision against the other URLs)"""
    distinct_contents: int
    """non-empty clusters behind the host's URLs"""
    refetched: int
    """URLs fetched more than once"""
    changed_pages: int
    """of those, URLs whose content changed"""
    changes: int
    """changes seen on the re-fetched URLs"""
    watched: float
    """seconds the re-fetched URLs were watched (first to last fetch, summed)"""

    @property
    def pages(self) -> int:
        return sum(self.counts.values())


@dataclass
class ClusterRow:
    """A cluster as stored: its canonical page, size and growth."""

    id: int
    canonical_id: int | None
    size: int
    created_at: float
    joins: int = 0
    joined_at: float | None = None
    recent: float = 0.0


#: What the canonical policy reads of a member: (id, url, first_seen, canonical_link, priority)
MemberRow = tuple[int, str, float, "str | None", "float | None"]


class Lookup(NamedTuple):
    """What a check reads in one statement (:meth:`Store.lookup`)."""

    first: int
    """smallest sequence number in the change log (0 when empty)"""
    last: int
    """largest sequence number in the change log (0 when empty)"""
    own: PageRecord | None
    """the page stored at the URL"""
    same: PageRecord | None
    """a non-empty page with the digest: the one at the URL if any, else the oldest"""


class Store(ABC):
    """The whole contract between the Detector (and the service) and a store."""

    path: str
    """where the store lives, for messages (a file name, or a DSN without its password)"""
    bits: int | None = None
    """width of the stored SimHash values, once known (None: 64 or 128 accepted)"""

    # -- plumbing ---------------------------------------------------------------------
    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction, serialised with every other writer; nested calls join
        the outer one; an exception rolls it back."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """Consistent reads across several queries; joins a transaction already open."""

    @abstractmethod
    def reading(self) -> AbstractContextManager[None]:
        """Several reads on one connection (no transaction)."""

    @abstractmethod
    def close(self) -> None: ...

    # -- meta -------------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> Any:
        """The JSON value stored under ``key``, or None."""

    @abstractmethod
    def set_meta(self, key: str, value: Any) -> None: ...

    # -- payload originals (the deduplicated WARC's memory across runs) ---------------
    @abstractmethod
    def payload_originals(self, digests: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """The original capture recorded for each of ``digests`` that has one: payload
        digest -> (WARC record id, target URI, WARC-Date)."""

    @abstractmethod
    def set_payload_originals(self, originals: Mapping[str, tuple[str, str, str]]) -> None:
        """Record (or replace: a stale original's successor) the original capture of each
        payload digest, in one transaction."""

    # -- pages ------------------------------------------------------------------------
    @abstractmethod
    def page_count(self) -> int: ...

    @abstractmethod
    def page_by_id(self, page_id: int) -> PageRecord | None: ...

    @abstractmethod
    def page_by_url(self, url: str) -> PageRecord | None: ...

    @abstractmethod
    def page_by_digest(self, digest: str, prefer_url: str | None = None) -> PageRecord | None:
        """A non-empty page with this digest: the one at ``prefer_url`` if any, else the oldest."""

    @abstractmethod
    def pages_by_ids(self, ids: Sequence[int]) -> dict[int, PageRecord]: ...

    @abstractmethod
    def lowest_live(self, simhash: int, bits: int, exclude: int | None = None) -> int | None:
        """The oldest non-empty page with this SimHash value (the one the index holds);
        ``exclude``: the oldest other than that page."""

    @abstractmethod
    def lowest_lives(self, values: Sequence[int], bits: int) -> dict[int, int | None]:
        """:meth:`lowest_live` of each of ``values`` (a backend with round trips reads them at once)."""

    @abstractmethod
    def lookup(self, url: str, digest: str | None) -> Lookup:
        """The change log's bounds, the page at ``url`` and :meth:`page_by_digest` of
        ``digest`` preferring ``url`` (None for no digest), from one consistent view."""

    def prefetch(self, urls: Sequence[str], digests: Sequence[str]) -> None:
        """Read ahead what the :meth:`lookup` calls of the write transaction's next adds will ask
        (the pages at ``urls``, the oldest with ``digests``) in a few statements; those lookups are
        then answered without a statement of their own, from the same view. A hint: a store
        without round trips to save ignores it (here, nothing is read)."""
        return None

    @abstractmethod
    def cluster_members(self, cluster_id: int) -> list[PageRecord]: ...

    @abstractmethod
    def insert_page(self, rec: PageRecord, bits: int) -> int:
        """Store a new page; returns its id."""

    @abstractmethod
    def update_page(self, rec: PageRecord, bits: int) -> None: ...

    @abstractmethod
    def delete_pages(self, ids: Sequence[int]) -> None:
        """Delete pages and their histories."""

    @abstractmethod
    def add_version(self, page_id: int, version: VersionRow, bits: int, keep: int = HISTORY_LIMIT,
                    fetches: int | None = None) -> None:
        """Append one fetch to a page's history, keeping its last ``keep`` fetches;
        ``fetches``: the page's fetch count with this one, when the caller knows it (a history
        holds at most one row a fetch, so none is dropped while that is at most ``keep``)."""

    @abstractmethod
    def versions(self, page_id: int, limit: int = HISTORY_LIMIT) -> list[VersionRow]:
        """A page's last ``limit`` fetches, oldest first."""

    @abstractmethod
    def expired_batch(self, before: float, limit: int) -> list[PageRecord]:
        """Up to ``limit`` pages last fetched before ``before``."""

    @abstractmethod
    def simhashes(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, uint64 words) of the pages the index holds (one per SimHash value)."""

    @abstractmethod
    def signatures(self) -> tuple[np.ndarray, list[bytes], np.ndarray]:
        """(ids, signature blobs, set sizes) of the pages the index holds that have one."""

    @abstractmethod
    def due_urls(self, at: float, limit: int, after: str | None = None) -> list[str]:
        """The URLs of kept contents (``new`` or ``partial`` pages, and pages that are their
        cluster's canonical) that are due at ``at`` (no ``next_fetch``, or at or before it), in
        URL order after ``after``, at most ``limit``."""

    @abstractmethod
    def iter_pages(self, batch: int = 1000) -> Iterator[PageRecord]:
        """Every stored page, in id order (the order they were stored), read ``batch`` at a time."""

    @abstractmethod
    def status_counts(self) -> dict[str, int]: ...

    @abstractmethod
    def host_stats(self, host: str) -> dict[str, int]: ...

    # -- aggregates: host figures (Detector.hosts, the service, the report) ------------------
    @abstractmethod
    def host_figures(self, host: str | None = None, since: float | None = None) -> list[HostFigures]:
        """Per host (or only ``host``), over its pages fetched at or after ``since``: counts
        by status, distinct non-empty clusters and the fetch/change counters; one grouped
        query."""

    @abstractmethod
    def structure_rows(self, host: str) -> list[StructureRow]:
        """The host's pages that have a structure SimHash, in fetch order (what
        :mod:`neardup.crawl.templates` reads)."""

    @abstractmethod
    def largest_host_clusters(self, hosts: Sequence[str], since: float | None = None) -> dict[str, tuple[int, int]]:
        """For each of ``hosts``: ``(cluster_id, urls)`` of the cluster holding most of its
        non-empty pages (ties: the lowest id)."""

    @abstractmethod
    def export_batches(self, batch: int = 5000) -> Iterator[list[dict[str, Any]]]:
        """Every stored URL (:data:`EXPORT_COLUMNS`) with its cluster's current canonical URL
        and the URL of its match, ``batch`` rows at a time, in id order."""

    @abstractmethod
    def fetch_counts(self) -> tuple[int, int]:
        """(fetches of every stored URL, URLs whose content changed between fetches)."""

    # -- clusters ---------------------------------------------------------------------
    @abstractmethod
    def new_cluster(self, now: float | None = None) -> int: ...

    @abstractmethod
    def cluster_canonical(self, cluster_id: int) -> int | None: ...

    @abstractmethod
    def set_cluster(self, cluster_id: int, canonical_id: int | None, size: int,
                    growth: tuple[int, float | None, float] | None = None) -> None:
        """A cluster's canonical page, size and growth; size 0 deletes it."""

    @abstractmethod
    def cluster_row(self, cluster_id: int) -> ClusterRow | None: ...

    @abstractmethod
    def cluster_rows(self, cluster_ids: Sequence[int]) -> dict[int, ClusterRow]:
        """:meth:`cluster_row` of each of ``cluster_ids`` that exists (a backend with round trips
        reads them at once, and keeps them for the rest of its transaction)."""

    @abstractmethod
    def cluster_ids(self) -> list[int]: ...

    @abstractmethod
    def cluster_count(self) -> int: ...

    @abstractmethod
    def member(self, page_id: int) -> MemberRow | None:
        """(id, url, first_seen, canonical_link, priority) of one page."""

    @abstractmethod
    def members_with_url_key(self, cluster_id: int, key: str) -> list[MemberRow]: ...

    @abstractmethod
    def member_batches(self, cluster_id: int, batch: int = 5000) -> Iterator[list[MemberRow]]: ...

    @abstractmethod
    def link_counts(self, cluster_id: int, keys: Sequence[str]) -> dict[str, int]: ...

    @abstractmethod
    def named_links(self, cluster_id: int) -> set[str]: ...

    @abstractmethod
    def add_link(self, cluster_id: int, key: str, delta: int) -> None: ...

    # -- the change log ---------------------------------------------------------------
    @abstractmethod
    def log_change(self, page_id: int, op: str, simhash: int, bits: int) -> int:
        """Log an index change (``add`` / ``remove``) in the current transaction; its seq."""

    @abstractmethod
    def change_bounds(self) -> tuple[int, int]:
        """(smallest, largest) sequence number in the change log; (0, 0) when empty."""

    @abstractmethod
    def changes_since(self, seq: int, limit: int = 100000) -> list[tuple[int, int, str, int]]:
        """Changes after ``seq`` in order: (seq, page_id, op, simhash)."""

    @abstractmethod
    def change_count(self) -> int:
        """Rows in the change log."""

    @abstractmethod
    def prune_changes(self, keep_after: int) -> int:
        """Drop log entries up to ``keep_after``; returns how many."""

    # -- aggregates for the report (``neardup report``) ---------------------------------
    # Each one GROUP BY (or a bounded read), so that a store of millions of pages is
    # summarised without reading every page into Python.
    @abstractmethod
    def report_figures(self) -> dict[str, Any]:
        """The store's totals: ``pages``, ``clusters``, ``duplicate_clusters`` (2+ pages),
        ``hosts``, ``first_seen`` / ``last_fetch`` (None when empty), ``fetches`` (every
        fetch of every URL), ``refetched`` (URLs fetched twice or more), ``changed_pages``
        (URLs whose content changed between fetches), ``changes`` (such re-fetches) and
        ``wasted`` (fetches that brought nothing new: :meth:`host_rankings`)."""

    @abstractmethod
    def distance_counts(self) -> dict[int, int]:
        """Near verdicts by their Hamming distance to their match."""

    @abstractmethod
    def near_sketches(self, limit: int) -> list[tuple[bytes | None, bytes | None]]:
        """(sketch of the page, sketch of its match) of up to ``limit`` near verdicts, in id order."""

    @abstractmethod
    def cluster_size_counts(self) -> dict[int, int]:
        """Clusters by size (pages in the cluster)."""

    @abstractmethod
    def host_rankings(self, order: str = "pages", limit: int = 20, min_pages: int = 1) -> list[dict[str, Any]]:
        """Per host with ``min_pages`` pages or more, the ``limit`` first by ``order``
        (``pages``, ``duplicate_rate``, ``wasted`` or ``changes_per_day``, largest first, then
        the host name): ``host``, ``pages``, ``exact``, ``near``, ``empty``, ``duplicates``,
        ``duplicate_rate``, ``fetches``, ``wasted`` (fetches of duplicate URLs, and re-fetches
        that found the content unchanged), ``refetched``, ``changed_pages``, ``changes`` and
        ``changes_per_day`` (changes over the time its re-fetched URLs were watched; None
        before a re-fetch), ``watched`` (seconds from first to latest fetch, averaged over
        the re-fetched URLs; None before a re-fetch). ``changes_per_day`` ranks only hosts
        with a re-fetch."""

    @abstractmethod
    def statuses_over_time(self, origin: float, bucket: float) -> list[tuple[int, str, int]]:
        """(bucket, status, URLs): URLs by when they were first seen (``bucket`` seconds
        from ``origin``) and their verdict now."""

    @abstractmethod
    def changes_over_time(self, origin: float, bucket: float,
                          hosts: Sequence[str] | None = None) -> list[tuple[str, int, int]]:
        """(host, bucket, re-fetches that found the content changed) from the fetch
        histories, by the time of the changed fetch; ``hosts``: only these."""

    @abstractmethod
    def largest_clusters(self, limit: int, members: int) -> list[dict[str, Any]]:
        """The ``limit`` largest clusters of 2+ pages (size, then id): ``id``, ``size``,
        ``canonical_id``, ``canonical_url``, ``canonical_title`` and up to ``members``
        ``members`` in id order (``id``, ``url``, ``status``, ``matched_id``, ``match_url``,
        ``distance``, ``fetched_at``, ``title``, ``sketch``, ``match_sketch``)."""

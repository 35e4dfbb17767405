"""Writes held in the client until a SQL write transaction ends: :class:`WriteBehind`.

An add writes a page, its version, a change-log entry, its cluster and the cluster's link
counts: five statements, each a round trip to PostgreSQL and a pass through the driver.
Inside a write transaction the writer holds the store's lock (SQLite's ``BEGIN IMMEDIATE``,
PostgreSQL's advisory lock), so :class:`~neardup.store.sql.SQLStore` can give the ids
itself (the next free ones, read once a transaction) and stage the rows here; they are
written by one ``executemany`` a table when the transaction commits, before any statement
this buffer cannot answer, and every :data:`FLUSH_PAGES` staged pages.

The reads an add makes (the page at a URL and the oldest with a digest or SimHash value,
pages and members by id, cluster rows, link counts) are answered from the stored rows merged
with the staged ones (read-your-writes); where a staged row hides what the stored answer
would have been (the oldest page with a digest changed its digest in this transaction), the
buffer is written first and the store asked again.

What a batch of adds will read of the stored rows (the pages at its URLs, the oldest with its
digests, their histories and clusters, the change log's bounds) can be read for all of them at once beforehand
(:meth:`~neardup.store.sql.SQLStore.prefetch`, a few statements for hundreds of adds): kept here
as the stored answers (``known_*``) and merged with the staged rows like any stored answer; when
the buffer is written they are brought up to date with what it wrote (:meth:`WriteBehind.carry_known`),
and forgotten before any other statement that writes.

>>> from neardup.store.base import PageRecord
>>> wb = WriteBehind()
>>> wb.stage_page(PageRecord("https://a.example/", "a.example", 1.0, 1.0, "d1", 5, "s", 9, None, None, None,
...                          "new", id=7), ["row"], new=True)
>>> wb.page_id_at("https://a.example/"), [r.id for r in wb.with_digest("d1")]
(7, [7])
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neardup.store.base import ClusterRow, MemberRow, PageRecord, VersionRow

__all__ = ["FLUSH_PAGES", "WriteBehind"]

#: staged pages past which the buffer is written (memory stays bounded in a long transaction)
FLUSH_PAGES = 2000

_GROWTH = ("joins", "joined_at", "recent")


@dataclass
class WriteBehind:
    """The staged writes of one write transaction and the indexes that answer reads from them."""

    last_ids: dict[str, int] | None = None
    """table -> the last id given (``pages``, ``clusters``, ``changes``); None until first needed"""
    reserved: set[str] = field(default_factory=set)
    """tables whose ids were given since the last write (PostgreSQL moves their sequences)"""
    pages: dict[int, PageRecord] = field(default_factory=dict)
    page_rows: dict[int, list[Any]] = field(default_factory=dict)
    new_pages: set[int] = field(default_factory=set)
    by_url: dict[str, int] = field(default_factory=dict)
    by_digest: dict[str, set[int]] = field(default_factory=dict)
    by_simhash: dict[int, set[int]] = field(default_factory=dict)
    versions: list[tuple[Any, ...]] = field(default_factory=list)
    version_pages: set[int] = field(default_factory=set)
    prunes: dict[int, int] = field(default_factory=dict)
    changes: list[tuple[int, int, str, bytes]] = field(default_factory=list)
    clusters: dict[int, dict[str, Any]] = field(default_factory=dict)
    new_clusters: set[int] = field(default_factory=set)
    dropped_clusters: set[int] = field(default_factory=set)
    links: dict[tuple[int, str], int] = field(default_factory=dict)
    known_pages: dict[str, PageRecord | None] = field(default_factory=dict)
    """url -> the stored page at it (None: none), read ahead by ``prefetch``"""
    known_digests: dict[str, PageRecord | None] = field(default_factory=dict)
    """digest -> the stored oldest non-empty page with it (None: none), read ahead"""
    known_bounds: tuple[int, int] | None = None
    """the stored change log's (smallest, largest) sequence number, read ahead"""
    known_versions: dict[int, list[VersionRow]] = field(default_factory=dict)
    """page id -> its stored history (the last ``HISTORY_LIMIT`` fetches, oldest first), read ahead"""
    known_clusters: dict[int, ClusterRow | None] = field(default_factory=dict)
    """cluster id -> its stored row (None: none), read ahead"""

    def carry_known(self, into: WriteBehind) -> None:
        """Give ``into`` (the buffer after this one is written) what was read ahead, brought up to
        date with this buffer's writes; an answer they hide (the oldest page with a digest that
        changed its digest) is left out: only the store can say."""
        into.known_clusters.update((c, self.cluster(c, row)) for c, row in self.known_clusters.items())
        if self.known_bounds is None:  # (expiry reads clusters ahead, and nothing else)
            return
        first, last = self.known_bounds
        into.known_bounds = (first or (self.first_change() or 0), max(last, self.last_change() or 0))
        pages = into.known_pages
        for url, rec in self.known_pages.items():
            staged = self.pages.get(rec.id) if rec is not None and rec.id is not None else None
            pages[url] = None if staged is not None and staged.url != url else staged or rec
        for rec in self.pages.values():
            pages[rec.url] = rec
        for digest, rec in self.known_digests.items():
            staged = self.pages.get(rec.id) if rec is not None and rec.id is not None else None
            if staged is not None and (staged.digest != digest or staged.status == "empty"):
                continue
            into.known_digests[digest] = staged or rec
        for rec in self.pages.values():
            if rec.status != "empty" and rec.digest in into.known_digests:
                best = into.known_digests[rec.digest]
                if best is None or int(rec.id or 0) < int(best.id or 0):
                    into.known_digests[rec.digest] = rec
        into.known_versions.update((p, rows) for p, rows in self.known_versions.items()
                                   if p not in self.version_pages)
        into.known_clusters.update((c, self.cluster(c, None)) for c in self.new_clusters)

    def known(self, url: str, digest: str | None) -> bool:
        """Whether what a lookup of ``url`` and ``digest`` reads of the stored rows is known here."""
        return (self.known_bounds is not None and url in self.known_pages
                and (digest is None or digest in self.known_digests))

    def empty(self) -> bool:
        return not (self.pages or self.versions or self.prunes or self.changes or self.clusters
                    or self.dropped_clusters or self.links)

    def next_id(self, table: str) -> int:
        """The next free id of ``table`` (``last_ids`` must be loaded)."""
        assert self.last_ids is not None
        self.last_ids[table] += 1
        self.reserved.add(table)
        return self.last_ids[table]

    # -- pages ----------------------------------------------------------------------
    def stage_page(self, rec: PageRecord, row: list[Any], *, new: bool) -> None:
        """Stage ``rec`` (its id set) with its column values ``row`` (without the id)."""
        assert rec.id is not None
        page_id = rec.id
        old = self.pages.get(page_id)
        if old is not None:
            self.by_digest.get(old.digest, set()).discard(page_id)
            self.by_simhash.get(old.simhash, set()).discard(page_id)
            if old.url != rec.url:
                self.by_url.pop(old.url, None)
        self.pages[page_id] = copy.copy(rec)
        self.page_rows[page_id] = row
        if new:
            self.new_pages.add(page_id)
        self.by_url[rec.url] = page_id
        self.by_digest.setdefault(rec.digest, set()).add(page_id)
        self.by_simhash.setdefault(rec.simhash, set()).add(page_id)

    def page(self, page_id: int) -> PageRecord | None:
        """A copy of the staged page ``page_id``, or None when it is not staged."""
        rec = self.pages.get(page_id)
        return copy.copy(rec) if rec is not None else None

    def page_id_at(self, url: str) -> int | None:
        return self.by_url.get(url)

    def member(self, page_id: int) -> MemberRow | None:
        rec = self.pages.get(page_id)
        return None if rec is None else (page_id, rec.url, rec.first_seen, rec.canonical_link, rec.priority)

    def with_digest(self, digest: str) -> list[PageRecord]:
        """The staged non-empty pages whose digest is ``digest``."""
        return [self.pages[i] for i in self.by_digest.get(digest, ()) if self.pages[i].status != "empty"]

    def with_simhash(self, value: int) -> list[PageRecord]:
        """The staged non-empty pages whose SimHash is ``value``."""
        return [self.pages[i] for i in self.by_simhash.get(value, ()) if self.pages[i].status != "empty"]

    def oldest(self, stored: int | None, staged: list[PageRecord], qualifies: bool) -> tuple[bool, int | None]:
        """(known, id): the lowest id among the store's answer ``stored`` and the staged
        candidates. ``known`` is False when this transaction changed the stored answer so
        that it no longer qualifies (``qualifies``: whether its staged version does): the
        store's next one is not known here, and it must be asked again after a write."""
        if stored is not None and stored in self.pages and not qualifies:
            return False, None
        best = stored
        for rec in staged:
            assert rec.id is not None
            if best is None or rec.id < best:
                best = rec.id
        return True, best

    # -- versions and the change log --------------------------------------------------
    def stage_version(self, page_id: int, row: tuple[Any, ...], keep: int | None) -> None:
        """A version row; ``keep``: the page's history is cut to its last ``keep`` fetches after it."""
        self.versions.append(row)
        self.version_pages.add(page_id)
        if keep is not None:
            self.prunes[page_id] = min(keep, self.prunes.get(page_id, keep))

    def stage_change(self, seq: int, page_id: int, op: str, blob: bytes) -> None:
        self.changes.append((seq, page_id, op, blob))

    def last_change(self) -> int | None:
        return self.changes[-1][0] if self.changes else None

    def first_change(self) -> int | None:
        return self.changes[0][0] if self.changes else None

    # -- clusters -------------------------------------------------------------------
    def stage_new_cluster(self, cluster_id: int, created_at: float) -> None:
        self.new_clusters.add(cluster_id)
        self.clusters[cluster_id] = {"canonical_id": None, "size": 0, "created_at": created_at, "joins": 0,
                                     "joined_at": None, "recent": 0.0}

    def stage_cluster(self, cluster_id: int, canonical_id: int | None, size: int,
                      growth: tuple[int, float | None, float] | None) -> None:
        """What ``set_cluster`` writes: size 0 drops the cluster and its link counts."""
        if cluster_id in self.dropped_clusters:
            return  # an UPDATE of a deleted row changes nothing
        if size <= 0:
            self.dropped_clusters.add(cluster_id)
            self.clusters.pop(cluster_id, None)
            self.new_clusters.discard(cluster_id)
            for key in [k for k in self.links if k[0] == cluster_id]:
                del self.links[key]
            return
        fields = self.clusters.setdefault(cluster_id, {})
        fields["canonical_id"], fields["size"] = canonical_id, size
        if growth is not None:
            fields.update(zip(_GROWTH, growth))

    def cluster(self, cluster_id: int, stored: ClusterRow | None) -> ClusterRow | None:
        """The cluster row as this transaction left it, from ``stored`` (the store's row)."""
        if cluster_id in self.dropped_clusters:
            return None
        fields = self.clusters.get(cluster_id)
        if fields is None:
            return stored
        if cluster_id not in self.new_clusters:
            if stored is None:
                return None  # an update of a missing row
            base = {"canonical_id": stored.canonical_id, "size": stored.size, "created_at": stored.created_at,
                    "joins": stored.joins, "joined_at": stored.joined_at, "recent": stored.recent}
            fields = {**base, **fields}
        return ClusterRow(cluster_id, fields["canonical_id"], fields["size"], fields["created_at"],
                          fields["joins"], fields["joined_at"], fields["recent"])

    def touches_cluster(self, cluster_id: int) -> bool:
        return cluster_id in self.clusters or cluster_id in self.dropped_clusters

    def stage_link(self, cluster_id: int, key: str, delta: int) -> None:
        self.links[(cluster_id, key)] = self.links.get((cluster_id, key), 0) + delta

    def link_counts(self, cluster_id: int, keys: list[str], stored: Mapping[str, int]) -> dict[str, int]:
        """The counts of ``keys`` in the cluster: the stored ones (none once the cluster was
        dropped here) plus the staged changes; a count at or below 0 is absent."""
        base = {} if cluster_id in self.dropped_clusters else stored
        out = {}
        for key in keys:
            n = base.get(key, 0) + self.links.get((cluster_id, key), 0)
            if n > 0:
                out[key] = n
        return out

    # -- the write ----------------------------------------------------------------------
    def statements(self, page_columns: list[str]) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The staged writes as (SQL, rows) for ``executemany``, in an order that gives what the
        statements one by one would have (``page_columns``: the page row's columns after id)."""
        out: list[tuple[str, list[tuple[Any, ...]]]] = []
        dropped = sorted(self.dropped_clusters)
        if dropped:
            out.append(("DELETE FROM clusters WHERE id=?", [(c,) for c in dropped]))
            out.append(("DELETE FROM cluster_links WHERE cluster_id=?", [(c,) for c in dropped]))
        new = [c for c in sorted(self.new_clusters) if c in self.clusters]
        if new:
            out.append(("INSERT INTO clusters(id, canonical_id, size, created_at, joins, joined_at, recent) "
                        "VALUES(?, ?, ?, ?, ?, ?, ?)",
                        [(c, *(self.clusters[c][k] for k in ("canonical_id", "size", "created_at", *_GROWTH)))
                         for c in new]))
        plain, grown = [], []
        for c, fields in sorted(self.clusters.items()):
            if c in self.new_clusters:
                continue
            if "joins" in fields:
                grown.append((fields["canonical_id"], fields["size"], *(fields[k] for k in _GROWTH), c))
            else:
                plain.append((fields["canonical_id"], fields["size"], c))
        if plain:
            out.append(("UPDATE clusters SET canonical_id=?, size=? WHERE id=?", plain))
        if grown:
            out.append(("UPDATE clusters SET canonical_id=?, size=?, joins=?, joined_at=?, recent=? WHERE id=?",
                        grown))
        inserts = [(i, *self.page_rows[i]) for i in sorted(self.new_pages)]
        if inserts:
            out.append((f"INSERT INTO pages(id, {', '.join(page_columns)}) "
                        f"VALUES({', '.join('?' * (len(page_columns) + 1))})", inserts))
        updates = [(*self.page_rows[i], i) for i in sorted(self.pages) if i not in self.new_pages]
        if updates:
            out.append((f"UPDATE pages SET {', '.join(c + '=?' for c in page_columns)} WHERE id=?", updates))
        if self.versions:
            out.append(("INSERT INTO page_versions(page_id, fetched_at, digest, simhash, changed, distance, score) "
                        "VALUES(?, ?, ?, ?, ?, ?, ?)", list(self.versions)))
        if self.prunes:
            out.append(("DELETE FROM page_versions WHERE page_id=? AND id <= (SELECT id FROM page_versions "
                        "WHERE page_id=? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                        [(p, p, keep) for p, keep in sorted(self.prunes.items())]))
        if self.changes:
            out.append(("INSERT INTO changes(seq, page_id, op, simhash) VALUES(?, ?, ?, ?)", list(self.changes)))
        moved = [(c, key, n) for (c, key), n in self.links.items() if n]
        if moved:
            out.append(("INSERT INTO cluster_links(cluster_id, link, n) VALUES(?, ?, ?) "
                        "ON CONFLICT(cluster_id, link) DO UPDATE SET n = cluster_links.n + excluded.n", moved))
            fell = [(c, key) for c, key, n in moved if n < 0]
            if fell:
                out.append(("DELETE FROM cluster_links WHERE cluster_id=? AND link=? AND n <= 0", fell))
        return out

"""The store contract in SQL, written once for both dialects: :class:`SQLStore`.

:class:`SQLStore` implements the store contract (:class:`neardup.store.base.Store`) in SQL
that SQLite (:mod:`neardup.store.sqlite`) and PostgreSQL (:mod:`neardup.store.postgres`)
both read; each subclass brings its connection, its transactions and its rendering of the
schema (:mod:`neardup.store.schema`, version 4). A store written by a newer neardup is
refused rather than damaged.

Tables
    ``meta(key, value)``: the fingerprint config and spec the store was written with.
    ``pages``: one row per URL (its latest fetch): id, url, host, first_seen, fetched_at,
    digest, simhash (big-endian bytes), spec, length, title, canonical_link, language,
    status (the verdict when it was last added), matched_id, distance, cluster_id, priority,
    signature (MinHash, little-endian uint32s, or NULL) and set_size (schema 2), sketch
    (the 64-byte verification sketch of :mod:`neardup.sketch`, or NULL; schema 3), url_key
    and link_key (the comparable forms of the URL and of the ``rel=canonical`` link, schema 4).
    ``clusters``: id, canonical_id, size, created_at; joins (members that ever joined),
    joined_at (the last join's fetch time) and recent (joins decayed with a half-life of
    :data:`GROWTH_HALF_LIFE` seconds): the cluster's growth, schema 4.
    ``cluster_links(cluster_id, link, n)``: how many members of a cluster name each
    comparable canonical link (what the ``rel-canonical`` policy needs, kept per add).
    ``changes``: the log of index changes other processes replay (schema 2).
    ``payloads(digest, record_id, uri, date)``: the original capture of each payload digest
    that ``neardup dedup --warc-out`` wrote whole (schema 9), so a later crawl's copy refers to it.

>>> from neardup.store.sqlite import SQLiteStore
>>> SQLiteStore(":memory:").page_count()
0
"""

from __future__ import annotations

import copy
import json
import time
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from neardup.errors import StoreError
from neardup.store.aggregates import SQLAggregates
from neardup.store.base import HISTORY_LIMIT, PAGE_COLUMNS, ClusterRow, Lookup, MemberRow, PageRecord, Store, VersionRow
from neardup.store.read_ahead import VERSION_COLUMNS, SQLReadAhead
from neardup.store.write_behind import FLUSH_PAGES, WriteBehind
from neardup.urls import comparable_link, comparable_url

__all__ = ["GROWTH_HALF_LIFE", "ID_KEYS", "MEMBER_COLUMNS", "WRITE_COLUMNS", "SQLStore"]

#: half-life (seconds) of the decayed join count ``clusters.recent`` (the growth rate)
GROWTH_HALF_LIFE = 3600.0

#: the columns a page row is written with, after its id
WRITE_COLUMNS = [*PAGE_COLUMNS[1:], "url_key", "link_key"]

#: the tables whose ids a write transaction gives itself, with their key columns
ID_KEYS = (("pages", "id"), ("clusters", "id"), ("changes", "seq"))

#: What the canonical policy reads of a member: (id, url, first_seen, canonical_link, priority)
MEMBER_COLUMNS = "id, url, first_seen, canonical_link, priority"




def _blob(value: int, bits: int) -> bytes:
    return int(value).to_bytes(bits // 8, "big")


class SQLStore(SQLAggregates, SQLReadAhead, Store):
    """The store contract (:class:`~neardup.store.base.Store`) in SQL shared by the SQLite and
    PostgreSQL dialects (``?`` placeholders; a dialect implements ``_exec``,
    ``transaction``, ``snapshot`` and ``close``, and may override ``_insert`` and
    ``reading``).

    The ``changes`` table logs every index change (add / remove of a page's SimHash) in
    the writer's transaction; other processes replay it to keep their in-memory index
    current (:meth:`changes_since`).

    Inside a write transaction the writes of the add path are staged in a
    :class:`~neardup.store.write_behind.WriteBehind` (ids given here, rows written by one
    ``executemany`` a table at commit or before a statement the buffer cannot answer); a
    dialect opens it with :meth:`_begin_writes`, writes it with :meth:`_flush` and drops it
    on rollback with :meth:`_end_writes`."""

    path: str
    write_behind: bool = True
    """stage a write transaction's writes (False: each runs when it is made)"""

    @abstractmethod
    def _statement(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement as it is; a cursor-like object (``fetchone``, ``fetchall``,
        iteration, ``rowcount``). Database errors become :class:`StoreError`."""

    @abstractmethod
    def _statements(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each of ``rows`` (``executemany``)."""

    @abstractmethod
    def _buffer(self) -> WriteBehind | None:
        """The current write transaction's staged writes (None outside one)."""

    @abstractmethod
    def _set_buffer(self, buffer: WriteBehind | None) -> None: ...

    @abstractmethod
    def _last_ids(self) -> dict[str, int]:
        """The last id given in ``pages``, ``clusters`` and ``changes`` (under the writers' lock)."""

    def _ids_given(self, last: Mapping[str, int]) -> None:
        """The buffer gave ids up to ``last`` (a table each): PostgreSQL moves its sequences."""

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement after the staged writes (if any): what it reads or writes sees them."""
        buffer = self._buffer()
        if buffer is not None and (not buffer.empty() or buffer.reserved or buffer.known_bounds is not None
                                   or buffer.known_clusters):
            # what was read ahead survives a read; a statement that writes may change it
            self._flush(keep_known=sql.lstrip()[:6].upper() == "SELECT")
        return self._statement(sql, params)

    def _begin_writes(self) -> None:
        if self.write_behind:
            self._set_buffer(WriteBehind())

    def _end_writes(self) -> None:
        self._set_buffer(None)

    def _flush(self, keep_known: bool = True) -> None:
        """Write what is staged (one ``executemany`` a table), keeping the ids given and, with
        ``keep_known``, what was read ahead (brought up to date)."""
        buffer = self._buffer()
        if buffer is None:
            return
        after = WriteBehind(last_ids=buffer.last_ids)
        if keep_known:
            buffer.carry_known(after)
        self._set_buffer(after)  # a failure below leaves nothing half-staged
        for sql, rows in buffer.statements(WRITE_COLUMNS):
            self._statements(sql, rows)
        if buffer.reserved and buffer.last_ids is not None:
            self._ids_given({t: buffer.last_ids[t] for t in sorted(buffer.reserved)})

    def _next_id(self, buffer: WriteBehind, table: str) -> int:
        if buffer.last_ids is None:
            buffer.last_ids = self._last_ids()
        return buffer.next_id(table)

    def _insert(self, sql: str, params: Sequence[Any], key: str = "id") -> int:
        """Run an INSERT ... RETURNING ``key`` and return it."""
        return int(self._exec(f"{sql} RETURNING {key}", params).fetchone()[0])

    def reading(self) -> AbstractContextManager[None]:
        """Several reads on one connection (no transaction): a pooled store checks one out for
        the whole block instead of one per query. Here, a no-op."""
        return nullcontext()

    # -- meta -------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self._exec("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:
            raise StoreError(f"store {self.path} is damaged: meta value {key!r} is not JSON") from None

    def set_meta(self, key: str, value: Any) -> None:
        with self.transaction():
            self._exec("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                       (key, json.dumps(value, sort_keys=True)))

    # -- payload originals ---------------------------------------------------------------
    def payload_originals(self, digests: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        found: dict[str, tuple[str, str, str]] = {}
        todo = list(dict.fromkeys(digests))
        with self.reading():
            for lo in range(0, len(todo), 500):
                part = todo[lo:lo + 500]
                marks = ", ".join("?" * len(part))
                query = f"SELECT digest, record_id, uri, date FROM payloads WHERE digest IN ({marks})"
                for digest, rid, uri, date in self._exec(query, part).fetchall():
                    found[str(digest)] = (str(rid), str(uri), str(date))
        return found

    def set_payload_originals(self, originals: Mapping[str, tuple[str, str, str]]) -> None:
        with self.transaction():
            for digest, (rid, uri, date) in originals.items():
                self._exec("INSERT INTO payloads(digest, record_id, uri, date) VALUES(?, ?, ?, ?) "
                           "ON CONFLICT(digest) DO UPDATE SET record_id=excluded.record_id, uri=excluded.uri, "
                           "date=excluded.date", (digest, rid, uri, date))

    # -- pages ------------------------------------------------------------------------
    def _simhash_bytes(self, value: Any, what: str) -> bytes:
        """A stored SimHash blob, checked: ``bits / 8`` bytes (8 or 16 while ``bits`` is unknown)."""
        blob = bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else None
        sizes = (self.bits // 8,) if self.bits else (8, 16)
        if blob is None or len(blob) not in sizes:
            got = f"{len(blob)} bytes" if blob is not None else type(value).__name__
            raise StoreError(f"store {self.path} is damaged: {what} has a SimHash of {got}, "
                             f"expected {' or '.join(map(str, sizes))} bytes")
        return blob

    def _record(self, row: Sequence[Any]) -> PageRecord:
        data = dict(zip(PAGE_COLUMNS, row))
        data["simhash"] = int.from_bytes(self._simhash_bytes(data["simhash"], f"page {data['id']}"), "big")
        for blob in ("signature", "sketch"):
            if data[blob] is not None:
                data[blob] = bytes(data[blob])
        if data["structure"] is not None:
            data["structure"] = int.from_bytes(bytes(data["structure"]), "big")
        return PageRecord(**data)

    def page_count(self) -> int:
        return int(self._exec("SELECT count(*) FROM pages").fetchone()[0])

    def page_by_id(self, page_id: int) -> PageRecord | None:
        buffer = self._buffer()
        if buffer is not None and page_id in buffer.pages:
            return buffer.page(page_id)
        row = self._statement(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE id=?", (page_id,)).fetchone()
        return self._record(row) if row else None

    def page_by_url(self, url: str) -> PageRecord | None:
        buffer = self._buffer()
        staged = buffer.page_id_at(url) if buffer is not None else None
        if buffer is not None and staged is not None:
            return buffer.page(staged)
        row = self._statement(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE url=?", (url,)).fetchone()
        return self._record(row) if row else None

    def _oldest_with_digest(self, digest: str, stored: PageRecord | None) -> tuple[bool, PageRecord | None]:
        """The oldest non-empty page with ``digest`` given the store's answer ``stored``, with
        the staged pages; (False, None) when only the store can say (write, then ask again)."""
        buffer = self._buffer()
        if buffer is None or buffer.empty():
            return True, stored
        staged = buffer.pages.get(stored.id) if stored is not None and stored.id is not None else None
        known, best = buffer.oldest(stored.id if stored is not None else None, buffer.with_digest(digest),
                                    staged is not None and staged.digest == digest and staged.status != "empty")
        if not known:
            return False, None
        return True, (None if best is None else buffer.page(best) if best in buffer.pages else stored)

    def page_by_digest(self, digest: str, prefer_url: str | None = None) -> PageRecord | None:
        """A non-empty page with this digest: the one at ``prefer_url`` if any, else the oldest
        (two index lookups, however many pages share the digest)."""
        if prefer_url is not None:
            own = self.page_by_url(prefer_url)
            if own is not None and own.digest == digest and own.status != "empty":
                return own
        row = self._statement(
            f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE digest=? AND status != 'empty' "
            "ORDER BY id LIMIT 1", (digest,),
        ).fetchone()
        known, same = self._oldest_with_digest(digest, self._record(row) if row else None)
        if not known:
            self._flush()
            return self.page_by_digest(digest, prefer_url)
        return same

    def pages_by_ids(self, ids: Sequence[int]) -> dict[int, PageRecord]:
        """The stored pages among ``ids``, in one statement."""
        buffer = self._buffer()
        found: dict[int, PageRecord] = {}
        if buffer is not None:
            for i in ids:
                rec = buffer.page(int(i))
                if rec is not None:
                    found[int(i)] = rec
        todo = [int(i) for i in ids if int(i) not in found]
        if not todo:
            return found
        rows = self._statement(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE id IN ({','.join('?' * len(todo))})",
                               todo).fetchall()
        return {**{int(r[0]): self._record(r) for r in rows}, **found}

    def lowest_live(self, simhash: int, bits: int, exclude: int | None = None) -> int | None:
        """The oldest (lowest id) non-empty page with this SimHash value: the one the index
        holds for the value (index lookup, however many copies are stored); ``exclude``:
        the oldest other than that page."""
        row = self._statement("SELECT id FROM pages WHERE simhash=? AND status != 'empty' AND id != ? "
                              "ORDER BY id LIMIT 1",
                              (_blob(simhash, bits), -1 if exclude is None else int(exclude))).fetchone()
        stored = None if row is None else int(row[0])
        buffer = self._buffer()
        if buffer is None or buffer.empty():
            return stored
        staged = buffer.pages.get(stored) if stored is not None else None
        known, best = buffer.oldest(stored, [r for r in buffer.with_simhash(simhash) if r.id != exclude],
                                    staged is not None and staged.simhash == simhash and staged.status != "empty")
        if not known:
            self._flush()
            return self.lowest_live(simhash, bits, exclude)
        return best

    def lowest_lives(self, values: Sequence[int], bits: int) -> dict[int, int | None]:
        """:meth:`lowest_live` of each value: with nothing staged, a statement for each 500 values
        (expiry's batches); else one indexed lookup each, merged with what is staged."""
        buffer = self._buffer()
        if len(values) < 2 or (buffer is not None and not buffer.empty()):
            return {int(v): self.lowest_live(v, bits) for v in values}
        out: dict[int, int | None] = {int(v): None for v in values}
        keys = list(out)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self._statement(f"SELECT simhash, min(id) FROM pages WHERE simhash IN ({marks}) "
                                   "AND status != 'empty' GROUP BY simhash", [_blob(v, bits) for v in chunk]).fetchall()
            out.update((int.from_bytes(self._simhash_bytes(r[0], "a page"), "big"), int(r[1])) for r in rows)
        return out

    def lookup(self, url: str, digest: str | None) -> Lookup:
        """What a check reads, in one statement (one round trip to a database server, one
        consistent view): the change log's bounds, the page stored at ``url`` and
        :meth:`page_by_digest` of ``digest`` preferring ``url`` (None for no digest); none
        where :meth:`prefetch` read them ahead."""
        buffer = self._buffer()
        if buffer is not None and buffer.known(url, digest):
            assert buffer.known_bounds is not None
            own, same = buffer.known_pages[url], buffer.known_digests[digest] if digest is not None else None
            return self._merged(url, digest, *buffer.known_bounds, copy.copy(own), copy.copy(same))
        cols = ", ".join(PAGE_COLUMNS)
        nulls = ", ".join(["NULL"] * len(PAGE_COLUMNS))
        rows = self._statement(
            f"SELECT 0, (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes), {nulls} "
            f"UNION ALL SELECT 1, NULL, NULL, {cols} FROM pages WHERE url=? "
            f"UNION ALL SELECT 2, NULL, NULL, * FROM (SELECT {cols} FROM pages WHERE digest=? AND status != 'empty' "
            "ORDER BY id LIMIT 1) AS same_digest",
            (url, digest),
        ).fetchall()
        first = last = 0
        own = same = None
        for row in rows:
            if row[0] == 0:
                first, last = int(row[1] or 0), int(row[2] or 0)
            elif row[0] == 1:
                own = self._record(row[3:])
            else:
                same = self._record(row[3:])
        return self._merged(url, digest, first, last, own, same)

    def _merged(self, url: str, digest: str | None, first: int, last: int, own: PageRecord | None,
                same: PageRecord | None) -> Lookup:
        """:meth:`lookup` from the stored answers and the staged writes."""
        buffer = self._buffer()
        if buffer is not None and not buffer.empty():
            staged = buffer.page_id_at(url)
            if staged is not None:
                own = buffer.page(staged)
            known, same = self._oldest_with_digest(digest, same) if digest is not None else (True, None)
            if not known:
                self._flush()
                return self.lookup(url, digest)
            last = max(last, buffer.last_change() or 0)
            first = first or (buffer.first_change() or 0)
        if own is not None and digest is not None and own.digest == digest and own.status != "empty":
            same = own  # the page at the URL itself first
        return Lookup(first, last, own, same)

    def cluster_members(self, cluster_id: int) -> list[PageRecord]:
        rows = self._exec(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE cluster_id=? ORDER BY id",
                          (cluster_id,)).fetchall()
        return [self._record(r) for r in rows]

    def _row_values(self, rec: PageRecord, bits: int) -> list[Any]:
        """The values of :data:`WRITE_COLUMNS` for ``rec``."""
        values = [getattr(rec, c) for c in PAGE_COLUMNS[1:]]
        values[PAGE_COLUMNS.index("simhash") - 1] = _blob(rec.simhash, bits)
        if rec.structure is not None:
            values[PAGE_COLUMNS.index("structure") - 1] = _blob(rec.structure, 64)
        return [*values, comparable_url(rec.url), comparable_link(rec.canonical_link)]

    def insert_page(self, rec: PageRecord, bits: int) -> int:
        buffer = self._buffer()
        if buffer is not None:
            page_id = self._next_id(buffer, "pages")
            staged = copy.copy(rec)
            staged.id = page_id
            buffer.stage_page(staged, self._row_values(rec, bits), new=True)
            if len(buffer.pages) >= FLUSH_PAGES:
                self._flush()
            return page_id
        columns = WRITE_COLUMNS
        return self._insert(
            f"INSERT INTO pages({', '.join(columns)}) VALUES({', '.join('?' * len(columns))})",
            self._row_values(rec, bits),
        )

    def load_pages(self, records: Iterable[PageRecord], bits: int) -> None:
        """Store copies of pages of another store, their ids kept (a copy for the aggregate
        queries: :mod:`neardup.store.materialise`)."""
        columns = ["id", *PAGE_COLUMNS[1:], "url_key", "link_key"]
        sql = f"INSERT INTO pages({', '.join(columns)}) VALUES({', '.join('?' * len(columns))})"
        with self.transaction():
            for rec in records:
                self._exec(sql, [rec.id, *self._row_values(rec, bits)])

    def load_clusters(self, rows: Iterable[ClusterRow]) -> None:
        """Store copies of clusters of another store, their ids kept."""
        with self.transaction():
            for c in rows:
                self._exec("INSERT INTO clusters(id, canonical_id, size, created_at, joins, joined_at, recent) "
                           "VALUES(?, ?, ?, ?, ?, ?, ?)",
                           (c.id, c.canonical_id, c.size, c.created_at, c.joins, c.joined_at, c.recent))

    def update_page(self, rec: PageRecord, bits: int) -> None:
        buffer = self._buffer()
        if buffer is not None and rec.id is not None:
            buffer.stage_page(rec, self._row_values(rec, bits), new=False)
            if len(buffer.pages) >= FLUSH_PAGES:
                self._flush()
            return
        columns = WRITE_COLUMNS
        self._exec(f"UPDATE pages SET {', '.join(c + '=?' for c in columns)} WHERE id=?",
                   [*self._row_values(rec, bits), rec.id])

    def delete_pages(self, ids: Sequence[int]) -> None:
        """Delete pages and their histories."""
        marks = ",".join("?" * len(ids))
        self._exec(f"DELETE FROM page_versions WHERE page_id IN ({marks})", list(ids))
        self._exec(f"DELETE FROM pages WHERE id IN ({marks})", list(ids))

    def add_version(self, page_id: int, version: VersionRow, bits: int, keep: int = HISTORY_LIMIT,
                    fetches: int | None = None) -> None:
        """Append one fetch to a page's history; past ``keep`` fetches the oldest go (one
        indexed statement; none for a page's first fetch, ``version.changed`` None, nor while
        ``fetches`` is at most ``keep``)."""
        changed = None if version.changed is None else int(version.changed)
        prune = (version.changed is not None and (fetches is None or fetches > keep)) or keep < 1
        buffer = self._buffer()
        if buffer is not None:
            buffer.stage_version(page_id, (page_id, version.fetched_at, version.digest, _blob(version.simhash, bits),
                                           changed, version.distance, version.score), int(keep) if prune else None)
            return
        self._exec("INSERT INTO page_versions(page_id, fetched_at, digest, simhash, changed, distance, score) "
                   "VALUES(?, ?, ?, ?, ?, ?, ?)",
                   (page_id, version.fetched_at, version.digest, _blob(version.simhash, bits), changed,
                    version.distance, version.score))
        if prune:  # a re-fetch: the history may now be too long
            self._exec("DELETE FROM page_versions WHERE page_id=? AND id <= (SELECT id FROM page_versions "
                       "WHERE page_id=? ORDER BY id DESC LIMIT 1 OFFSET ?)", (page_id, page_id, int(keep)))

    def versions(self, page_id: int, limit: int = HISTORY_LIMIT) -> list[VersionRow]:
        """A page's last ``limit`` fetches, oldest first."""
        buffer = self._buffer()
        if buffer is not None and page_id in buffer.version_pages:
            self._flush()  # otherwise the stored history is the page's whole history
            buffer = self._buffer()
        known = buffer.known_versions.get(page_id) if buffer is not None else None
        if known is not None and 0 < limit <= HISTORY_LIMIT:
            return known[-limit:]
        rows = self._statement(f"SELECT {VERSION_COLUMNS} FROM page_versions "
                               "WHERE page_id=? ORDER BY id DESC LIMIT ?", (page_id, int(limit))).fetchall()
        return [self._version(r, page_id) for r in reversed(rows)]

    def _version(self, r: Sequence[Any], page_id: int) -> VersionRow:
        """A row of :data:`VERSION_COLUMNS`, checked."""
        return VersionRow(float(r[0]), str(r[1]), int.from_bytes(self._simhash_bytes(r[2], f"a version of page "
                                                                                        f"{page_id}"), "big"),
                          None if r[3] is None else bool(r[3]), None if r[4] is None else int(r[4]),
                          None if r[5] is None else float(r[5]))

    def expired_batch(self, before: float, limit: int) -> list[PageRecord]:
        """Up to ``limit`` pages last fetched before ``before`` (expiry deletes them, then asks again)."""
        rows = self._exec(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE fetched_at < ? LIMIT ?",
                          (before, limit)).fetchall()
        return [self._record(r) for r in rows]

    # the index holds one page per SimHash value: the oldest non-empty page with it
    _LIVE_REPS = ("status != 'empty' AND NOT EXISTS (SELECT 1 FROM pages q WHERE q.simhash = p.simhash "
                  "AND q.status != 'empty' AND q.id < p.id)")

    def simhashes(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, simhash words) of the pages the index holds: per SimHash value, the oldest
        non-empty page with it (:meth:`lowest_live`), for rebuilding the index."""
        rows = self._exec(f"SELECT id, simhash FROM pages p WHERE {self._LIVE_REPS} ORDER BY id").fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        blobs = [self._simhash_bytes(r[1], f"page {r[0]}") for r in rows]
        if len({len(b) for b in blobs}) > 1:
            raise StoreError(f"store {self.path} is damaged: SimHash values of mixed widths")
        blob = b"".join(blobs)
        words = np.frombuffer(blob, dtype=">u8").astype(np.uint64)
        return ids, words

    def signatures(self) -> tuple[np.ndarray, list[bytes], np.ndarray]:
        """(ids, signature blobs, set sizes) of the pages the index holds (:meth:`simhashes`)
        that have a signature."""
        rows = self._exec(f"SELECT id, signature, set_size FROM pages p WHERE {self._LIVE_REPS} "
                          "AND signature IS NOT NULL ORDER BY id").fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        sizes = np.fromiter((r[2] or 0 for r in rows), dtype=np.int64, count=len(rows))
        return ids, [bytes(r[1]) for r in rows], sizes

    def due_urls(self, at: float, limit: int, after: str | None = None) -> list[str]:
        rows = self._exec("SELECT p.url FROM pages p LEFT JOIN clusters c ON c.id = p.cluster_id "
                          "WHERE p.url > ? AND (p.next_fetch IS NULL OR p.next_fetch <= ?) "
                          "AND (p.status IN ('new', 'partial') OR c.canonical_id = p.id) ORDER BY p.url LIMIT ?",
                          (after or "", at, limit)).fetchall()
        return [str(r[0]) for r in rows]

    def iter_pages(self, batch: int = 1000) -> Iterator[PageRecord]:
        last = 0
        while True:
            rows = self._exec(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE id > ? ORDER BY id LIMIT ?",
                              (last, batch)).fetchall()
            if not rows:
                return
            for r in rows:
                yield self._record(r)
            last = rows[-1][0]

    # -- clusters ---------------------------------------------------------------------
    def new_cluster(self, now: float | None = None) -> int:
        buffer = self._buffer()
        if buffer is not None:
            cluster_id = self._next_id(buffer, "clusters")
            buffer.stage_new_cluster(cluster_id, time.time() if now is None else now)
            return cluster_id
        return self._insert("INSERT INTO clusters(canonical_id, size, created_at) VALUES(NULL, 0, ?)",
                            (time.time() if now is None else now,))

    def cluster_canonical(self, cluster_id: int) -> int | None:
        buffer = self._buffer()
        if buffer is not None and buffer.touches_cluster(cluster_id):
            found = self.cluster_row(cluster_id)
            return None if found is None else found.canonical_id
        row = self._statement("SELECT canonical_id FROM clusters WHERE id=?", (cluster_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def set_cluster(self, cluster_id: int, canonical_id: int | None, size: int,
                    growth: tuple[int, float | None, float] | None = None) -> None:
        """Store a cluster's canonical page and size (and ``growth``: joins, joined_at,
        recent); a cluster of size 0 is deleted with its link counts."""
        buffer = self._buffer()
        if buffer is not None:
            buffer.stage_cluster(cluster_id, canonical_id, size, growth)
            return
        if size <= 0:
            self._exec("DELETE FROM clusters WHERE id=?", (cluster_id,))
            self._exec("DELETE FROM cluster_links WHERE cluster_id=?", (cluster_id,))
        elif growth is None:
            self._exec("UPDATE clusters SET canonical_id=?, size=? WHERE id=?", (canonical_id, size, cluster_id))
        else:
            self._exec("UPDATE clusters SET canonical_id=?, size=?, joins=?, joined_at=?, recent=? WHERE id=?",
                       (canonical_id, size, *growth, cluster_id))

    def cluster_row(self, cluster_id: int) -> ClusterRow | None:
        buffer = self._buffer()
        if buffer is not None and (cluster_id in buffer.new_clusters or cluster_id in buffer.dropped_clusters):
            return buffer.cluster(cluster_id, None)
        if buffer is not None and cluster_id in buffer.known_clusters:
            stored = buffer.known_clusters[cluster_id]
        else:
            stored = self._cluster_rows_stored([cluster_id]).get(cluster_id)
        return buffer.cluster(cluster_id, stored) if buffer is not None else stored

    def _cluster_rows_stored(self, cluster_ids: Sequence[int]) -> dict[int, ClusterRow]:
        """The stored rows of ``cluster_ids`` (without the staged writes), in one statement."""
        rows = self._statement("SELECT id, canonical_id, size, created_at, joins, joined_at, recent FROM clusters "
                               f"WHERE id IN ({', '.join('?' * len(cluster_ids))})", list(cluster_ids)).fetchall()
        return {int(row[0]): ClusterRow(int(row[0]), None if row[1] is None else int(row[1]), int(row[2]),
                                        float(row[3]), int(row[4] or 0), None if row[5] is None else float(row[5]),
                                        float(row[6] or 0.0)) for row in rows}

    def cluster_ids(self) -> list[int]:
        return [int(r[0]) for r in self._exec("SELECT id FROM clusters ORDER BY id")]

    def member(self, page_id: int) -> MemberRow | None:
        """(id, url, first_seen, canonical_link, priority) of one page."""
        buffer = self._buffer()
        staged = buffer.member(page_id) if buffer is not None else None
        if staged is not None:
            return staged
        return self._statement(f"SELECT {MEMBER_COLUMNS} FROM pages WHERE id=?", (page_id,)).fetchone()

    def members_with_url_key(self, cluster_id: int, key: str) -> list[MemberRow]:
        """The members of a cluster whose URL compares equal to ``key`` (a canonical link)."""
        return self._exec(f"SELECT {MEMBER_COLUMNS} FROM pages WHERE url_key=? AND cluster_id=?",
                          (key, cluster_id)).fetchall()

    def member_batches(self, cluster_id: int, batch: int = 5000) -> Iterator[list[MemberRow]]:
        """All members of a cluster (:data:`MEMBER_COLUMNS`), ``batch`` rows at a time."""
        last = -1
        while True:
            rows = self._exec(f"SELECT {MEMBER_COLUMNS} FROM pages WHERE cluster_id=? AND id > ? ORDER BY id LIMIT ?",
                              (cluster_id, last, batch)).fetchall()
            if not rows:
                return
            yield rows
            last = int(rows[-1][0])

    def link_counts(self, cluster_id: int, keys: Sequence[str]) -> dict[str, int]:
        """How many members of the cluster name each of ``keys`` (absent: none)."""
        if not keys:
            return {}
        rows = self._statement(f"SELECT link, n FROM cluster_links WHERE cluster_id=? AND link IN "
                               f"({','.join('?' * len(keys))})", [cluster_id, *keys]).fetchall()
        stored = {str(r[0]): int(r[1]) for r in rows}
        buffer = self._buffer()
        return buffer.link_counts(cluster_id, list(keys), stored) if buffer is not None else stored

    def named_links(self, cluster_id: int) -> set[str]:
        return {str(r[0]) for r in self._exec("SELECT link FROM cluster_links WHERE cluster_id=? AND n > 0",
                                             (cluster_id,))}

    def add_link(self, cluster_id: int, key: str, delta: int) -> None:
        """Change the count of members of the cluster naming ``key`` by ``delta``."""
        buffer = self._buffer()
        if buffer is not None:
            buffer.stage_link(cluster_id, key, delta)
            return
        self._exec("INSERT INTO cluster_links(cluster_id, link, n) VALUES(?, ?, ?) "
                   "ON CONFLICT(cluster_id, link) DO UPDATE SET n = cluster_links.n + excluded.n",
                   (cluster_id, key, delta))
        if delta < 0:
            self._exec("DELETE FROM cluster_links WHERE cluster_id=? AND link=? AND n <= 0", (cluster_id, key))

    def cluster_count(self) -> int:
        return int(self._exec("SELECT count(*) FROM clusters").fetchone()[0])

    def status_counts(self) -> dict[str, int]:
        return {str(s): int(n) for s, n in self._exec("SELECT status, count(*) FROM pages GROUP BY status")}

    # -- change log -------------------------------------------------------------------
    def log_change(self, page_id: int, op: str, simhash: int, bits: int) -> int:
        """Record an index change (``add`` or ``remove``) in the current transaction."""
        buffer = self._buffer()
        if buffer is not None:
            seq = self._next_id(buffer, "changes")
            buffer.stage_change(seq, page_id, op, _blob(simhash, bits))
            return seq
        return self._insert("INSERT INTO changes(page_id, op, simhash) VALUES(?, ?, ?)",
                            (page_id, op, _blob(simhash, bits)), key="seq")

    def change_bounds(self) -> tuple[int, int]:
        """(smallest, largest) sequence number in the change log; (0, 0) when empty."""
        # Two scalar subqueries: SQLite answers a lone min() or max() from the primary key,
        # but "SELECT min(seq), max(seq)" scans the whole log (and every check calls this).
        row = self._exec("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)").fetchone()
        return (int(row[0] or 0), int(row[1] or 0))

    def changes_since(self, seq: int, limit: int = 100000) -> list[tuple[int, int, str, int]]:
        """Changes after ``seq`` in order: (seq, page_id, op, simhash)."""
        rows = self._exec("SELECT seq, page_id, op, simhash FROM changes WHERE seq > ? ORDER BY seq LIMIT ?",
                          (seq, limit)).fetchall()
        return [(int(r[0]), int(r[1]), str(r[2]), int.from_bytes(self._simhash_bytes(r[3], f"change {r[0]}"), "big"))
                for r in rows]

    def change_count(self) -> int:
        return int(self._exec("SELECT count(*) FROM changes").fetchone()[0])

    def prune_changes(self, keep_after: int) -> int:
        """Drop log entries up to ``keep_after``; a process behind that point rebuilds its
        index from the pages instead."""
        with self.transaction():
            cur = self._exec("DELETE FROM changes WHERE seq <= ?", (keep_after,))
            return int(cur.rowcount or 0)



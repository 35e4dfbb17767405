"""The embedded store: one SQLite file (WAL mode) holding pages, clusters and settings.

Schema version 3 (``PRAGMA user_version``); :data:`MIGRATIONS` lists the steps from each
version to the next, applied in one transaction when an older store is opened. A store
written by a newer neardup is refused rather than damaged.

Tables
    ``meta(key, value)``: the fingerprint config and spec the store was written with.
    ``pages``: one row per URL (its latest fetch): id, url, host, first_seen, fetched_at,
    digest, simhash (big-endian bytes), spec, length, title, canonical_link, language,
    status (the verdict when it was last added), matched_id, distance, cluster_id, priority,
    signature (MinHash, little-endian uint32s, or NULL) and set_size (schema 2), sketch
    (the 64-byte verification sketch of :mod:`neardup.sketch`, or NULL; schema 3).
    ``clusters``: id, canonical_id, size, created_at.

>>> s = SQLiteStore(":memory:")
>>> s.page_count()
0
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neardup.errors import StoreError, StoreLockedError

SCHEMA_VERSION = 3

MIGRATIONS: dict[int, list[str]] = {
    # version 0 (empty file) -> 1
    0: [
        """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
        """CREATE TABLE pages (
            id INTEGER PRIMARY KEY,
            url TEXT NOT NULL UNIQUE,
            host TEXT NOT NULL,
            first_seen REAL NOT NULL,
            fetched_at REAL NOT NULL,
            digest TEXT NOT NULL,
            simhash BLOB NOT NULL,
            spec TEXT NOT NULL,
            length INTEGER NOT NULL,
            title TEXT,
            canonical_link TEXT,
            language TEXT,
            status TEXT NOT NULL,
            matched_id INTEGER,
            distance INTEGER,
            cluster_id INTEGER,
            priority REAL
        )""",
        "CREATE INDEX pages_digest ON pages(digest)",
        "CREATE INDEX pages_cluster ON pages(cluster_id)",
        "CREATE INDEX pages_host ON pages(host)",
        "CREATE INDEX pages_fetched ON pages(fetched_at)",
        """CREATE TABLE clusters (
            id INTEGER PRIMARY KEY,
            canonical_id INTEGER,
            size INTEGER NOT NULL,
            created_at REAL NOT NULL
        )""",
    ],
    # 1 -> 2: MinHash signatures and feature-set sizes; the change log that keeps every
    # process's in-memory index in step with the store
    1: [
        "ALTER TABLE pages ADD COLUMN signature BLOB",
        "ALTER TABLE pages ADD COLUMN set_size INTEGER",
        """CREATE TABLE changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            page_id INTEGER NOT NULL,
            op TEXT NOT NULL,
            simhash BLOB NOT NULL
        )""",
    ],
    # 2 -> 3: the verification sketch (spec version 2 fingerprints)
    2: ["ALTER TABLE pages ADD COLUMN sketch BLOB"],
}

PAGE_COLUMNS = (
    "id", "url", "host", "first_seen", "fetched_at", "digest", "simhash", "spec", "length",
    "title", "canonical_link", "language", "status", "matched_id", "distance", "cluster_id",
    "priority", "signature", "set_size", "sketch",
)


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
    id: int | None = None

    def to_dict(self, bits: int = 64) -> dict[str, Any]:
        out = {c: getattr(self, c) for c in PAGE_COLUMNS if c not in ("signature", "sketch")}
        out["simhash"] = f"{self.simhash:0{bits // 4}x}"
        return out


def _blob(value: int, bits: int) -> bytes:
    return int(value).to_bytes(bits // 8, "big")


def _locked(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


class SQLStore:
    """What the Detector needs from a store, in SQL shared by the SQLite and PostgreSQL
    dialects (``?`` placeholders; a dialect implements ``_exec``, ``_insert``,
    ``transaction`` and ``close``).

    The ``changes`` table logs every index change (add / remove of a page's SimHash) in
    the writer's transaction; other processes replay it to keep their in-memory index
    current (:meth:`changes_since`)."""

    path: str

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _insert(self, sql: str, params: Sequence[Any], key: str = "id") -> int:
        """Run an INSERT ... RETURNING ``key`` and return it."""
        return int(self._exec(f"{sql} RETURNING {key}", params).fetchone()[0])

    def transaction(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def reading(self) -> Any:
        """Several reads on one connection (no transaction): a pooled store checks one out for
        the whole block instead of one per query. Here, a no-op."""
        return nullcontext()

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

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

    # -- pages ------------------------------------------------------------------------
    def _record(self, row: Sequence[Any]) -> PageRecord:
        data = dict(zip(PAGE_COLUMNS, row))
        data["simhash"] = int.from_bytes(bytes(data["simhash"]), "big")
        for blob in ("signature", "sketch"):
            if data[blob] is not None:
                data[blob] = bytes(data[blob])
        return PageRecord(**data)

    def page_count(self) -> int:
        return int(self._exec("SELECT count(*) FROM pages").fetchone()[0])

    def page_by_id(self, page_id: int) -> PageRecord | None:
        row = self._exec(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE id=?", (page_id,)).fetchone()
        return self._record(row) if row else None

    def page_by_url(self, url: str) -> PageRecord | None:
        row = self._exec(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE url=?", (url,)).fetchone()
        return self._record(row) if row else None

    def page_by_digest(self, digest: str, prefer_url: str | None = None) -> PageRecord | None:
        """A non-empty page with this digest: the one at ``prefer_url`` if any, else the oldest."""
        row = self._exec(
            f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE digest=? AND status != 'empty' "
            "ORDER BY (url = ?) DESC, id LIMIT 1", (digest, prefer_url or ""),
        ).fetchone()
        return self._record(row) if row else None

    def lookup(self, url: str, digest: str | None) -> tuple[int, int, PageRecord | None, PageRecord | None]:
        """What a check reads, in one statement (one round trip to a database server, one
        consistent view): the change log's bounds, the page stored at ``url`` and
        :meth:`page_by_digest` of ``digest`` preferring ``url`` (None for no digest)."""
        cols = ", ".join(PAGE_COLUMNS)
        nulls = ", ".join(["NULL"] * len(PAGE_COLUMNS))
        rows = self._exec(
            f"SELECT 0, (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes), {nulls} "
            f"UNION ALL SELECT 1, NULL, NULL, {cols} FROM pages WHERE url=? "
            f"UNION ALL SELECT 2, NULL, NULL, * FROM (SELECT {cols} FROM pages WHERE digest=? AND status != 'empty' "
            "ORDER BY (url = ?) DESC, id LIMIT 1) AS same_digest",
            (url, digest, url),
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
        return first, last, own, same

    def cluster_members(self, cluster_id: int) -> list[PageRecord]:
        rows = self._exec(f"SELECT {', '.join(PAGE_COLUMNS)} FROM pages WHERE cluster_id=? ORDER BY id",
                          (cluster_id,)).fetchall()
        return [self._record(r) for r in rows]

    def insert_page(self, rec: PageRecord, bits: int) -> int:
        values = [getattr(rec, c) for c in PAGE_COLUMNS[1:]]
        values[PAGE_COLUMNS.index("simhash") - 1] = _blob(rec.simhash, bits)
        return self._insert(
            f"INSERT INTO pages({', '.join(PAGE_COLUMNS[1:])}) VALUES({', '.join('?' * (len(PAGE_COLUMNS) - 1))})",
            values,
        )

    def update_page(self, rec: PageRecord, bits: int) -> None:
        values = [getattr(rec, c) for c in PAGE_COLUMNS[1:]]
        values[PAGE_COLUMNS.index("simhash") - 1] = _blob(rec.simhash, bits)
        self._exec(f"UPDATE pages SET {', '.join(c + '=?' for c in PAGE_COLUMNS[1:])} WHERE id=?",
                   [*values, rec.id])

    def delete_pages(self, ids: Sequence[int]) -> None:
        self._exec(f"DELETE FROM pages WHERE id IN ({','.join('?' * len(ids))})", list(ids))

    def expired_ids(self, before: float) -> list[int]:
        return [int(r[0]) for r in self._exec("SELECT id FROM pages WHERE fetched_at < ?", (before,))]

    def simhashes(self) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, simhash words) of non-empty pages, for rebuilding the index."""
        rows = self._exec("SELECT id, simhash FROM pages WHERE status != 'empty' ORDER BY id").fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(bytes(r[1]) for r in rows)
        words = np.frombuffer(blob, dtype=">u8").astype(np.uint64)
        return ids, words

    def signatures(self) -> tuple[np.ndarray, list[bytes], np.ndarray]:
        """(ids, signature blobs, set sizes) of non-empty pages that have a signature."""
        rows = self._exec("SELECT id, signature, set_size FROM pages WHERE status != 'empty' "
                          "AND signature IS NOT NULL ORDER BY id").fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        sizes = np.fromiter((r[2] or 0 for r in rows), dtype=np.int64, count=len(rows))
        return ids, [bytes(r[1]) for r in rows], sizes

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
        return self._insert("INSERT INTO clusters(canonical_id, size, created_at) VALUES(NULL, 0, ?)",
                            (time.time() if now is None else now,))

    def cluster_canonical(self, cluster_id: int) -> int | None:
        row = self._exec("SELECT canonical_id FROM clusters WHERE id=?", (cluster_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def set_cluster(self, cluster_id: int, canonical_id: int | None, size: int) -> None:
        if size <= 0:
            self._exec("DELETE FROM clusters WHERE id=?", (cluster_id,))
        else:
            self._exec("UPDATE clusters SET canonical_id=?, size=? WHERE id=?", (canonical_id, size, cluster_id))

    def cluster_count(self) -> int:
        return int(self._exec("SELECT count(*) FROM clusters").fetchone()[0])

    def status_counts(self) -> dict[str, int]:
        return {str(s): int(n) for s, n in self._exec("SELECT status, count(*) FROM pages GROUP BY status")}

    def host_stats(self, host: str) -> dict[str, int]:
        counts = {str(s): int(n) for s, n in
                  self._exec("SELECT status, count(*) FROM pages WHERE host=? GROUP BY status", (host,))}
        return counts

    # -- change log -------------------------------------------------------------------
    def log_change(self, page_id: int, op: str, simhash: int, bits: int) -> int:
        """Record an index change (``add`` or ``remove``) in the current transaction."""
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
        return [(int(r[0]), int(r[1]), str(r[2]), int.from_bytes(bytes(r[3]), "big")) for r in rows]

    def prune_changes(self, keep_after: int) -> int:
        """Drop log entries up to ``keep_after``; a process behind that point rebuilds its
        index from the pages instead."""
        with self.transaction():
            cur = self._exec("DELETE FROM changes WHERE seq <= ?", (keep_after,))
            return int(cur.rowcount or 0)


class SQLiteStore(SQLStore):
    """Pages and clusters in one SQLite file (``":memory:"`` for a throwaway store).

    All writes happen inside :meth:`transaction` (``BEGIN IMMEDIATE``), so concurrent
    writers from other processes wait up to ``timeout`` seconds, then get
    :class:`StoreLockedError`. Errors from a corrupt or unreadable file become
    :class:`StoreError` with the file name."""

    def __init__(self, path: str | Path = ":memory:", *, timeout: float = 10.0, create: bool = True,
                 durable: bool = True) -> None:
        self.path = str(path)
        self.bits: int | None = None
        if self.path != ":memory:":
            p = Path(self.path)
            if p.is_dir():
                raise StoreError(f"store path {self.path} is a directory, not a database file")
            if not p.exists():
                if not create:
                    raise StoreError(f"store {self.path} does not exist")
                if not p.parent.exists():
                    raise StoreError(f"cannot create store {self.path}: folder {p.parent} does not exist")
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA foreign_keys=ON")
            if self.path != ":memory:":
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"store {self.path}: cannot switch to WAL mode (got {mode})")
                # FULL: a commit is on disk before add() returns (NORMAL could lose the last
                # commits on power loss; a killed process loses nothing either way)
                self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._migrate()
        except sqlite3.OperationalError as exc:
            if _locked(exc):
                raise StoreLockedError(f"store {self.path} is locked by another process ({exc})") from None
            raise StoreError(f"cannot open store {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path} is not a valid neardup database ({exc})") from None
        self._in_tx = False

    # -- schema -----------------------------------------------------------------------
    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema version {version}, newer than this neardup "
                f"supports ({SCHEMA_VERSION}); upgrade neardup"
            )
        if version == 0:
            tables = self._db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            if tables:
                raise StoreError(f"store {self.path} is an SQLite file but not a neardup store")
        if version == SCHEMA_VERSION:
            self._check_tables()
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for step in range(version, SCHEMA_VERSION):
                for sql in MIGRATIONS[step]:
                    self._db.execute(sql)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _check_tables(self) -> None:
        names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = {"meta", "pages", "clusters", "changes"} - names
        if missing:
            raise StoreError(f"store {self.path} is damaged: missing table(s) {', '.join(sorted(missing))}")

    # -- plumbing ---------------------------------------------------------------------
    def _exec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if _locked(exc):
                raise StoreLockedError(f"store {self.path} is locked by another process ({exc})") from None
            raise StoreError(f"store {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path} is damaged ({exc})") from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; nested calls join the outer one."""
        if self._in_tx:
            yield
            return
        self._exec("BEGIN IMMEDIATE")
        self._in_tx = True
        try:
            yield
        except BaseException:
            self._in_tx = False
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        self._in_tx = False
        self._exec("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Consistent reads across several queries (a read transaction); joins a write
        transaction already open."""
        if self._in_tx:
            yield
            return
        self._exec("BEGIN")
        self._in_tx = True
        try:
            yield
        finally:
            self._in_tx = False
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        try:
            self._db.close()
        except sqlite3.Error:
            pass


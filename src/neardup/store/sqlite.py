"""The embedded store (the default): one SQLite file (WAL mode) holding pages, clusters and settings.

Schema version 4 (``PRAGMA user_version``); :data:`MIGRATIONS` (the SQLite rendering of
:mod:`neardup.store.schema`) lists the steps from each version to the next, applied in one
transaction when an older store is opened.

>>> s = SQLiteStore(":memory:")
>>> s.page_count()
0
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from neardup.errors import StoreError, StoreLockedError
from neardup.store.schema import SCHEMA_VERSION, TABLES, migrations
from neardup.store.sql import ID_KEYS, SQLStore
from neardup.store.write_behind import WriteBehind

#: The SQLite rendering of the schema (:mod:`neardup.store.schema`): the steps from each version
#: to the next.
MIGRATIONS = migrations("sqlite")


def _locked(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


class SQLiteStore(SQLStore):
    """Pages and clusters in one SQLite file (``":memory:"`` for a throwaway store).

    All writes happen inside :meth:`transaction` (``BEGIN IMMEDIATE``), so concurrent
    writers from other processes wait up to ``timeout`` seconds, then get
    :class:`StoreLockedError`. Errors from a corrupt or unreadable file become
    :class:`StoreError` with the file name."""

    def __init__(self, path: str | Path = ":memory:", *, timeout: float = 10.0, create: bool = True,
                 durable: bool = True) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            p = Path(self.path)
            if p.is_dir():
                raise StoreError(f"store path {self.path} is a directory, not a database file")
            if not p.exists():
                if not create:
                    raise StoreError(f"store {self.path} does not exist")
                if not p.parent.exists():
                    raise StoreError(f"cannot create store {self.path}: folder {p.parent} does not exist")
        self._in_tx = False
        self._staged: WriteBehind | None = None
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA foreign_keys=ON")
            if self.path != ":memory:":
                mode = self._wal(timeout)
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

    def _wal(self, timeout: float) -> str:
        """Switch to WAL mode. SQLite answers "locked" at once, without waiting, while another
        process creates or switches the same file: retry until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return str(self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if not _locked(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    # -- schema -----------------------------------------------------------------------
    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema version {version}, newer than this neardup "
                f"supports ({SCHEMA_VERSION}); upgrade neardup"
            )
        if version == SCHEMA_VERSION:
            self._check_tables()
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # another process may have created or migrated the store while this one waited
            # for the write lock: read the version again under the lock
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"store {self.path} has schema version {version}, newer than this neardup "
                                 f"supports ({SCHEMA_VERSION}); upgrade neardup")
            if version == 0:
                tables = self._db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
                if tables:
                    raise StoreError(f"store {self.path} is an SQLite file but not a neardup store")
            for step in range(version, SCHEMA_VERSION):
                for sql in MIGRATIONS[step]:
                    if isinstance(sql, str):
                        self._db.execute(sql)
                    else:
                        sql(self._db.execute)
            if version < SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _check_tables(self) -> None:
        names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = set(TABLES) - names
        if missing:
            raise StoreError(f"store {self.path} is damaged: missing table(s) {', '.join(sorted(missing))}")

    # -- plumbing ---------------------------------------------------------------------
    def _statement(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _statements(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError):
            if _locked(exc):
                return StoreLockedError(f"store {self.path} is locked by another process ({exc})")
            return StoreError(f"store {self.path}: {exc}")
        if isinstance(exc, sqlite3.DatabaseError):
            return StoreError(f"store {self.path} is damaged ({exc})")
        return StoreError(f"store {self.path}: {exc}")

    def _buffer(self) -> WriteBehind | None:
        return self._staged

    def _set_buffer(self, buffer: WriteBehind | None) -> None:
        self._staged = buffer

    def _last_ids(self) -> dict[str, int]:
        """The largest ids ever given (AUTOINCREMENT keeps them in ``sqlite_sequence``)."""
        parts = ", ".join(f"coalesce((SELECT seq FROM sqlite_sequence WHERE name='{t}'), 0), "
                          f"coalesce((SELECT max({k}) FROM {t}), 0)" for t, k in ID_KEYS)
        row = self._statement(f"SELECT {parts}").fetchone()
        return {t: max(int(row[2 * i]), int(row[2 * i + 1])) for i, (t, _) in enumerate(ID_KEYS)}

    def _insert(self, sql: str, params: Sequence[Any], key: str = "id") -> int:
        """Run an INSERT into a table whose ``key`` is its INTEGER PRIMARY KEY (the rowid) and
        return it: ``lastrowid``, a third cheaper than ``RETURNING`` in Python's sqlite3."""
        rowid = self._exec(sql, params).lastrowid
        if rowid is None:
            raise StoreError(f"store {self.path}: an INSERT gave no {key}")
        return int(rowid)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; nested calls join the outer one."""
        if self._in_tx:
            yield
            return
        self._statement("BEGIN IMMEDIATE")
        self._in_tx = True
        self._begin_writes()
        try:
            yield
            self._flush()
        except BaseException:
            self._in_tx = False
            self._end_writes()
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        self._in_tx = False
        self._end_writes()
        self._statement("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Consistent reads across several queries (a read transaction); joins a write
        transaction already open."""
        if self._in_tx:
            yield
            return
        self._statement("BEGIN")
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



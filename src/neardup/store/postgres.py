"""The shared store: the same schema and SQL as the SQLite store, in PostgreSQL.

``Detector.open("postgresql://user@host/db")`` gives every crawler worker, on any machine,
the same pages, clusters and change log. How it stays correct with many writers:

* every write transaction first takes one transaction-level advisory lock
  (``pg_advisory_xact_lock``), so writers are serialised exactly like SQLite's
  ``BEGIN IMMEDIATE``; inside it the worker replays the change log (pages other workers
  committed since its last look) into its in-memory index *before* deciding, so two
  workers adding near duplicates of each other at the same moment end up in one cluster
  with one canonical page;
* Hamming lookups run in each process's in-memory index (microseconds), kept current from
  the ``changes`` table; PostgreSQL has no index for "within k bits" (``bit_count`` of an
  XOR scans every row), so a SQL lookup would be a full scan per page;
* a commit is acknowledged only after PostgreSQL has committed it (synchronous commit);
* every statement runs under ``statement_timeout`` (:data:`DEFAULT_STATEMENT_TIMEOUT`
  seconds, ``PostgresStore(statement_timeout=...)``), so a stuck query becomes a
  :class:`~neardup.errors.StoreError` instead of a hung worker.

Connections come from a psycopg 3 pool; a transaction keeps its connection for the thread
that opened it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from neardup.errors import ConfigError, StoreError, StoreLockedError
from neardup.store.base import redact
from neardup.store.schema import SCHEMA_VERSION, migrations
from neardup.store.sql import ID_KEYS, SQLStore
from neardup.store.write_behind import WriteBehind

LOCK_KEY = 0x6E65617264757021  # "neardup!": the writers' advisory lock
#: seconds any one statement may run before PostgreSQL cancels it (StoreError); None: no limit
DEFAULT_STATEMENT_TIMEOUT = 60.0

#: The PostgreSQL rendering of the schema (:mod:`neardup.store.schema`).
MIGRATIONS = migrations("postgres")


class _Rows:
    """Rows fetched before the connection goes back to the pool."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows, self.rowcount = rows, rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


#: seconds a store waits for the server's first answer before saying why it cannot connect
PROBE_TIMEOUT = 3.0


def connect_cause(message: str) -> str:
    """Why a connection failed, in words, from the driver's message (its first line kept).

    >>> connect_cause('connection failed: FATAL:  database "crawl" does not exist')
    'no such database (connection failed: FATAL:  database "crawl" does not exist)'
    """
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    low = message.lower()
    causes = (("refused", "connection refused (is the server running on that host and port?)"),
              ("does not exist", "no such database"), ("password", "authentication failed"),
              ("authentication", "authentication failed"), ("timeout", "timed out"), ("timed out", "timed out"),
              ("could not translate host name", "unknown host"), ("name or service not known", "unknown host"))
    for needle, cause in causes:
        if needle in low:
            return f"{cause} ({first})"
    return first


class PostgresStore(SQLStore):
    """Pages, clusters and the change log in a PostgreSQL database (psycopg 3 pool)."""

    def __init__(self, dsn: str, *, timeout: float = 10.0, pool_size: int = 4, create: bool = True,
                 statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreError(f"PostgreSQL needs the 'postgres' extra: pip install 'neardup[postgres]' "
                             f"({exc})") from None
        self._psycopg = psycopg
        self._tuples_ok = psycopg.pq.ExecStatus.TUPLES_OK
        self.path = redact(dsn)
        self.timeout = timeout
        if statement_timeout is not None and not (0 < float(statement_timeout) < 2**31 / 1000):
            raise ConfigError("statement_timeout must be a positive number of seconds or None, "
                              f"got {statement_timeout!r}")
        self.statement_timeout = None if statement_timeout is None else float(statement_timeout)
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, int(timeout))}
        if self.statement_timeout is not None:  # every statement of every pooled session
            kwargs["options"] = f"-c statement_timeout={max(1, round(self.statement_timeout * 1000))}"
        self._local = threading.local()
        self._seq_names: list[str] | None = None
        self._probe(dsn, kwargs)
        try:
            self._pool = ConnectionPool(dsn, min_size=1, max_size=pool_size, open=True, timeout=timeout,
                                        kwargs=kwargs)
            self._pool.wait(timeout=timeout)
        except Exception as exc:  # psycopg_pool raises PoolTimeout wrapping the connection error
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: {str(exc).splitlines()[0]}") from None
        self._migrate(create)

    def _probe(self, dsn: str, kwargs: dict[str, Any]) -> None:
        """One direct connection before the pool, within :data:`PROBE_TIMEOUT` seconds: a
        server that cannot be used is a :class:`StoreError` naming why (refused, no such
        database, authentication, timeout), not a pool timeout after ``timeout`` seconds."""
        wait = min(self.timeout, PROBE_TIMEOUT)
        outcome: list[Any] = []

        def attempt() -> None:  # libpq may try twice (SSL, then not): a deadline of our own
            try:
                outcome.append(self._psycopg.connect(dsn, **{**kwargs, "connect_timeout": max(1, int(wait))}))
            except Exception as exc:  # noqa: BLE001 - reported below
                outcome.append(exc)

        worker = threading.Thread(target=attempt, name="neardup-pg-probe", daemon=True)
        worker.start()
        worker.join(wait)
        if not outcome:
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: timed out (no answer within {wait:g} s)")
        found = outcome[0]
        if isinstance(found, self._psycopg.Error):
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: {connect_cause(str(found))}")
        if isinstance(found, Exception):  # a malformed DSN
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: {str(found).splitlines()[0]}")
        found.close()

    # -- plumbing ---------------------------------------------------------------------
    def _run(self, conn: Any, sql: str, params: Sequence[Any]) -> _Rows:
        cur = conn.execute(sql.replace("?", "%s"), params)
        result = cur.pgresult  # its status, not ``description`` (which builds a Column a column)
        rows = cur.fetchall() if result is not None and result.status == self._tuples_ok else []
        return _Rows(rows, cur.rowcount)

    def _statement(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        return self._call(self._run, sql, params)

    def _statements(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) == 1:  # one row: a plain statement costs less than the driver's pipeline
            self._statement(sql, rows[0])
            return

        def many(conn: Any, query: str, params: Sequence[Sequence[Any]]) -> None:
            with conn.cursor() as cur:
                cur.executemany(query.replace("?", "%s"), params)
        self._call(many, sql, rows)

    def _buffer(self) -> WriteBehind | None:
        return getattr(self._local, "staged", None)  # type: ignore[no-any-return]

    def _set_buffer(self, buffer: WriteBehind | None) -> None:
        self._local.staged = buffer

    def _sequences(self) -> list[str]:
        """The sequences behind the keys of :data:`ID_KEYS` (read once)."""
        if self._seq_names is None:
            row = self._statement("SELECT " + ", ".join(f"pg_get_serial_sequence('{t}', '{k}')"
                                                         for t, k in ID_KEYS)).fetchone()
            if row is None or any(name is None for name in row):
                raise StoreError(f"store {self.path} is damaged: a key of pages, clusters or changes has no sequence")
            self._seq_names = [str(name) for name in row]
        return self._seq_names

    def _last_ids(self) -> dict[str, int]:
        """The last id each sequence gave, or the table's largest if larger (under the writers' lock)."""
        parts = ", ".join(f"(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {seq}), "
                          f"coalesce((SELECT max({k}) FROM {t}), 0)" for seq, (t, k) in zip(self._sequences(), ID_KEYS))
        row = self._statement(f"SELECT {parts}").fetchone()
        assert row is not None
        return {t: max(int(row[2 * i]), int(row[2 * i + 1])) for i, (t, _) in enumerate(ID_KEYS)}

    def _ids_given(self, last: Mapping[str, int]) -> None:
        """Move the sequences past the ids the buffer gave (their own default then follows them)."""
        names = dict(zip((t for t, _ in ID_KEYS), self._sequences()))
        self._statement("SELECT " + ", ".join("setval(?::regclass, ?)" for _ in last),
                        [v for t, n in last.items() for v in (names[t], n)])

    def _call(self, run: Any, sql: str, params: Any) -> Any:
        psycopg = self._psycopg
        try:
            conn = getattr(self._local, "conn", None)
            if conn is not None:
                return run(conn, sql, params)
            with self._pool.connection(timeout=self.timeout) as conn:
                return run(conn, sql, params)
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreLockedError(f"store {self.path} is busy ({str(exc).splitlines()[0]})") from None
        except psycopg.Error as exc:
            raise StoreError(f"store {self.path}: {str(exc).splitlines()[0]}") from None
        except Exception as exc:  # pool timeouts
            raise StoreError(f"store {self.path}: {exc}") from None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Pin one pooled connection to this thread for a block of reads (autocommit, no
        transaction); transactions opened inside use it."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        try:
            cm = self._pool.connection(timeout=self.timeout)
            conn = cm.__enter__()
        except Exception as exc:  # pool timeouts
            raise StoreError(f"store {self.path}: {exc}") from None
        self._local.conn, self._local.in_tx = conn, False
        try:
            yield
        except BaseException as exc:
            self._local.conn = None
            cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._local.conn = None
        cm.__exit__(None, None, None)

    @contextmanager
    def _connection_tx(self, isolation: str | None, lock: bool) -> Iterator[None]:
        pinned = getattr(self._local, "conn", None)
        if pinned is not None and getattr(self._local, "in_tx", False):
            yield  # joins the transaction already open
            return
        psycopg = self._psycopg
        try:
            with (nullcontext(pinned) if pinned is not None else self._pool.connection(timeout=self.timeout)) as conn:
                with conn.transaction():
                    if isolation:
                        conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                    if lock:
                        conn.execute(f"SET LOCAL lock_timeout = '{int(self.timeout * 1000)}ms'")
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                    self._local.conn, self._local.in_tx = conn, True
                    if lock:
                        self._begin_writes()
                    try:
                        yield
                        self._flush()
                    finally:
                        self._end_writes()
                        self._local.conn, self._local.in_tx = pinned, False
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreLockedError(
                f"store {self.path}: another writer held the lock for over {self.timeout} s") from exc
        except psycopg.Error as exc:
            raise StoreError(f"store {self.path}: {str(exc).splitlines()[0]}") from None

    def transaction(self) -> Any:
        """A write transaction, serialised with every other writer by an advisory lock."""
        return self._connection_tx(None, lock=True)

    def snapshot(self) -> Any:
        """Consistent reads (REPEATABLE READ) across several queries."""
        return self._connection_tx("REPEATABLE READ", lock=False)

    def close(self) -> None:
        try:
            self._pool.close()
        except Exception:  # noqa: BLE001 - closing must not raise
            pass

    # -- schema -----------------------------------------------------------------------
    def _migrate(self, create: bool) -> None:
        with self.transaction():
            self._exec("CREATE TABLE IF NOT EXISTS neardup_schema (version INTEGER NOT NULL)")
            row = self._exec("SELECT version FROM neardup_schema").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"store {self.path} has schema version {version}, newer than this neardup "
                                 f"supports ({SCHEMA_VERSION}); upgrade neardup")
            if version == 0:
                if not create:
                    raise StoreError(f"store {self.path} has no neardup schema")
                exists = self._exec("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
                                    "AND table_name IN ('pages', 'clusters', 'meta')").fetchall()
                if exists:
                    raise StoreError(f"store {self.path} has tables named like neardup's but no neardup schema")
            for step in range(version, SCHEMA_VERSION):
                for sql in MIGRATIONS[step]:
                    if isinstance(sql, str):
                        self._exec(sql)
                    else:
                        sql(self._exec)
            if version == 0:
                self._exec("INSERT INTO neardup_schema(version) VALUES(?)", (SCHEMA_VERSION,))
            elif version < SCHEMA_VERSION:
                self._exec("UPDATE neardup_schema SET version = ?", (SCHEMA_VERSION,))

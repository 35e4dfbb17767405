"""ONE factory from a store target (``--db``, ``Detector.open``, ``NEARDUP_DB``) to a store:
a path names an SQLite file, a ``postgresql://`` (or ``postgres://``) URL a PostgreSQL
database, a ``redis://HOST:PORT/DB`` URL a Redis (or Valkey, Kvrocks) server and a
``redis+cluster://HOST:PORT`` URL a Redis Cluster (:mod:`neardup.store.redis`). Every
command, the service and the report decide what a target names here.

>>> is_url("postgresql://u@db/crawl"), is_url("redis+cluster://10.0.0.5:7000"), is_url("crawl.db")
(True, True, False)
>>> store = open_store(":memory:", create=True)
>>> type(store).__name__, store.page_count()
('SQLiteStore', 0)
>>> store.close()
"""

from __future__ import annotations

from pathlib import Path

from neardup.errors import StoreError
from neardup.store.base import Store, redact

#: the URL schemes that name a PostgreSQL database
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

#: the URL schemes that name a Redis store (one server, or a Redis Cluster)
REDIS_SCHEMES = ("redis://", "rediss://", "redis+cluster://", "rediss+cluster://")


def is_url(target: str | Path) -> bool:
    """A server's URL (PostgreSQL or Redis) rather than an SQLite file."""
    return str(target).startswith(POSTGRES_SCHEMES + REDIS_SCHEMES)


def require_existing(target: str | Path) -> None:
    """:class:`StoreError` when ``target`` is an SQLite file that does not exist (a URL is
    always connected to: an unreachable server is a store error, never an empty store)."""
    if not is_url(target) and not Path(target).is_file():
        raise StoreError(f"store {target} does not exist")


#: the files beside an SQLite store that are part of it: its WAL, shared memory, rollback
#: journal and the saved index folder (:mod:`neardup.detector.mirror`)
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal", ".index")


def store_paths(target: str | Path) -> list[Path]:
    """Every file (or folder) an SQLite store at ``target`` consists of; none for a URL.

    >>> [p.name for p in store_paths("crawl.db")]
    ['crawl.db', 'crawl.db-wal', 'crawl.db-shm', 'crawl.db-journal', 'crawl.db.index']
    """
    if is_url(target) or str(target) == ":memory:":
        return []
    path = Path(target)
    return [path, *(path.with_name(path.name + suffix) for suffix in SQLITE_COMPANIONS)]


def display_name(target: str | Path) -> str:
    """The target as it may be printed: a URL without its password."""
    return redact(str(target)) if is_url(target) else str(target)


def open_store(target: str | Path, *, create: bool = False, timeout: float = 10.0) -> Store:
    """The store at ``target``: an SQLite file (created when missing only with ``create``)
    or the PostgreSQL database of a URL (``pip install 'neardup[postgres]'``), or a Redis store
    (``pip install 'neardup[redis]'``)."""
    if str(target).startswith(REDIS_SCHEMES):
        from neardup.store.redis import RedisStore

        return RedisStore(str(target), timeout=timeout, create=create)
    if is_url(target):
        from neardup.store.postgres import PostgresStore

        return PostgresStore(str(target), timeout=timeout, create=create)
    from neardup.store.sqlite import SQLiteStore

    return SQLiteStore(target, timeout=timeout, create=create)

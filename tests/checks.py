"""Small typed helpers for the tests: they state what a test expects and narrow the static types
(``X | None``, the abstract store) for mypy. Each fails the test, as the attribute or index error it
replaces would have, when the expectation does not hold."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TypeVar

import pytest

from neardup.store.base import Store
from neardup.store.sql import SQLStore
from neardup.store.sqlite import SQLiteStore

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, asserted not None (a stored page, a cluster, a sketch, an error message...)."""
    assert value is not None
    return value


def sql_store(store: Store) -> SQLStore:
    """``store`` as the SQL store it is, for tests that read its tables through ``_exec``."""
    assert isinstance(store, SQLStore), store
    return store


def damage_simhash(store: Store, page_id: int, blob: bytes) -> None:
    """Overwrite a stored page's SimHash with ``blob`` behind the store's back (in SQL, or in
    the page's JSON on Redis), as damage would."""
    if isinstance(store, SQLStore):
        with store.transaction():
            store._exec("UPDATE pages SET simhash=? WHERE id=?", (blob, page_id))
        return
    import json

    from neardup.store.base import PAGE_COLUMNS
    from neardup.store.redis import RedisStore

    assert isinstance(store, RedisStore), store
    key = store.prefix + f"page:{page_id}"
    values = json.loads(store._r.get(key))
    values[PAGE_COLUMNS.index("simhash")] = blob.hex()
    store._r.set(key, json.dumps(values))


def stored_versions(store: Store) -> int:
    """Rows of every page's history as the store holds them (not through ``versions``)."""
    if isinstance(store, SQLStore):
        return int(store._exec("SELECT count(*) FROM page_versions").fetchone()[0])
    from neardup.store.redis import RedisStore

    assert isinstance(store, RedisStore), store
    import json

    return sum(len(json.loads(v)) for v in store._r.hvals(store.prefix + "versions"))


def stored_links(store: Store, cluster_id: int) -> dict[str, int]:
    """A cluster's link counts as the store holds them (rows or hash fields, zeros included)."""
    if isinstance(store, SQLStore):
        rows = store._exec("SELECT link, n FROM cluster_links WHERE cluster_id=?", (cluster_id,)).fetchall()
        return {str(k): int(n) for k, n in rows}
    from neardup.store.redis import RedisStore

    assert isinstance(store, RedisStore), store
    return {k.decode(): int(n) for k, n in store._r.hgetall(store.prefix + f"links:{cluster_id}").items()}


def orphan_links(store: Store) -> int:
    """Link counts kept for clusters that no longer exist."""
    if isinstance(store, SQLStore):
        return int(store._exec("SELECT count(*) FROM cluster_links WHERE cluster_id NOT IN "
                               "(SELECT id FROM clusters)").fetchone()[0])
    from neardup.store.redis import RedisStore

    assert isinstance(store, RedisStore), store
    live = set(store.cluster_ids())
    keys = [k.decode() for k in store._r.scan_iter(match=store.prefix + "links:*")]
    return sum(1 for k in keys if int(k.rsplit(":", 1)[1]) not in live)


def sqlite_store(store: Store) -> SQLiteStore:
    """``store`` as the SQLite store it is, for tests that read its connection."""
    assert isinstance(store, SQLiteStore), store
    return store


def require_spark() -> None:
    """Skip the test where PySpark or Java is missing, except under ``NEARDUP_REQUIRE_SPARK=1``
    (set by .ci/run, which installs them), where it fails."""
    why = None
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        why = f"PySpark not installed ({exc.name}): pip install 'neardup[spark]'"
    if why is None and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        why = "no Java runtime for Spark (apt-get install default-jre-headless; .ci/run does it)"
    if why:
        if os.environ.get("NEARDUP_REQUIRE_SPARK"):
            pytest.fail(why)
        pytest.skip(why)


#: every kind of store the tests run on, and the fixture that gives a fresh one ("sqlite": a file)
STORE_KINDS = ["sqlite", "postgres", "redis", "redis-cluster"]
_STORE_FIXTURES = {"postgres": "pg_dsn", "redis": "redis_url", "redis-cluster": "redis_cluster_url"}


def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of the kind ``request.param`` (one of :data:`STORE_KINDS`)."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue(_STORE_FIXTURES[request.param]))

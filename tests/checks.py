"""Small typed helpers for the tests: they state what a test expects and narrow the static types
(``X | None``, the abstract store) for mypy. Each fails the test, as the attribute or index error it
replaces would have, when the expectation does not hold."""

from __future__ import annotations

import os
import shutil
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

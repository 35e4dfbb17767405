"""Small typed helpers for the tests: they state what a test expects and narrow the static types
(``X | None``, the abstract store) for mypy. Each fails the test, as the attribute or index error it
replaces would have, when the expectation does not hold."""

from __future__ import annotations

from typing import TypeVar

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

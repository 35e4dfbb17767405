"""A store's pages copied into an in-memory SQLite store, for the aggregate queries of a
backend that has no SQL of its own (:class:`~neardup.store.redis.RedisStore`): the host
figures, the report's figures and the export then come from the very SQL every store runs
(:mod:`neardup.store.aggregates`), never from a second rendering of it.

>>> from neardup.store.base import PageRecord
>>> rec = PageRecord("https://a.example/", "a.example", 1.0, 2.0, "d" * 64, 7, "spec", 10, None, None,
...                  None, "new", id=5)
>>> with Aggregated([rec], [], None, 64) as agg:
...     agg.store.host_stats("a.example"), agg.store.page_by_id(5).url
({'new': 1}, 'https://a.example/')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType

from neardup.store.base import ClusterRow, PageRecord, VersionRow
from neardup.store.sqlite import SQLiteStore


class Aggregated:
    """An in-memory SQLite copy of ``pages`` (their ids kept), ``clusters`` and, with
    ``history`` (page id -> its versions), every page's versions; a context manager that
    closes it."""

    def __init__(self, pages: Iterable[PageRecord], clusters: Iterable[ClusterRow],
                 history: Callable[[int], list[VersionRow]] | None, bits: int) -> None:
        self.store = SQLiteStore(":memory:")
        self.store.bits = bits
        kept: list[int] = []

        def noted() -> Iterator[PageRecord]:
            for rec in pages:
                kept.append(int(rec.id or 0))
                yield rec

        self.store.load_pages(noted(), bits)
        self.store.load_clusters(clusters)
        if history is not None:
            with self.store.transaction():
                for page_id in kept:
                    for version in history(page_id):
                        self.store.add_version(page_id, version, bits, fetches=0)

    def __enter__(self) -> Aggregated:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.store.close()

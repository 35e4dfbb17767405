"""Reading ahead what a batch of adds will look up (:class:`SQLReadAhead`, inherited by
:class:`~neardup.store.sql.SQLStore`): the pages at its URLs, the oldest page with each of its
digests, their histories and clusters and the change log's bounds, in a statement for each
:data:`PREFETCH_CHUNK` of them, kept in the write transaction's
:class:`~neardup.store.write_behind.WriteBehind` as the stored answers (``known_*``), which
``SQLStore.lookup``, ``versions`` and ``cluster_row`` then answer from.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from neardup.store.base import HISTORY_LIMIT, PAGE_COLUMNS, ClusterRow, PageRecord, VersionRow
from neardup.store.write_behind import FLUSH_PAGES, WriteBehind

__all__ = ["PREFETCH_CHUNK", "VERSION_COLUMNS", "SQLReadAhead"]

#: URLs or digests read ahead per statement
PREFETCH_CHUNK = 500

_URL, _DIGEST = PAGE_COLUMNS.index("url"), PAGE_COLUMNS.index("digest")
#: the columns of a history row (``SQLStore.versions``)
VERSION_COLUMNS = "fetched_at, digest, simhash, changed, distance, score"


class SQLReadAhead:
    """``prefetch`` in SQL (see the module); the plumbing is ``SQLStore``'s."""

    @abstractmethod
    def _statement(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    @abstractmethod
    def _buffer(self) -> WriteBehind | None: ...

    @abstractmethod
    def _flush(self, keep_known: bool = True) -> None: ...

    @abstractmethod
    def _record(self, row: Sequence[Any]) -> PageRecord: ...

    @abstractmethod
    def _version(self, r: Sequence[Any], page_id: int) -> VersionRow: ...

    @abstractmethod
    def _cluster_rows_stored(self, cluster_ids: Sequence[int]) -> dict[int, ClusterRow]: ...

    def prefetch(self, urls: Sequence[str], digests: Sequence[str]) -> None:
        """Inside a write transaction, what :meth:`lookup` will read for ``urls`` and ``digests``,
        read ahead in a statement for each :data:`PREFETCH_CHUNK` of them and one for the change
        log (kept in the :class:`WriteBehind` until it is written; a buffer that would be written
        during the batch is written first). Outside one, nothing."""
        buffer = self._buffer()
        if buffer is None:
            return
        if len(buffer.pages) + len(urls) >= FLUSH_PAGES:
            self._flush()
            buffer = self._buffer()
            assert buffer is not None
        cols = ", ".join(PAGE_COLUMNS)
        todo = [u for u in dict.fromkeys(urls) if u not in buffer.known_pages]
        for lo in range(0, len(todo), PREFETCH_CHUNK):
            part = todo[lo:lo + PREFETCH_CHUNK]
            rows = self._statement(f"SELECT {cols} FROM pages WHERE url IN ({', '.join('?' * len(part))})",
                                   part).fetchall()
            found = {str(r[_URL]): self._record(r) for r in rows}
            buffer.known_pages.update((u, found.get(u)) for u in part)
            self._prefetch_around(buffer, list(found.values()))
        todo = [d for d in dict.fromkeys(digests) if d not in buffer.known_digests]
        for lo in range(0, len(todo), PREFETCH_CHUNK):
            part = todo[lo:lo + PREFETCH_CHUNK]
            rows = self._statement(
                f"SELECT {cols} FROM pages WHERE id IN (SELECT min(id) FROM pages WHERE digest IN "
                f"({', '.join('?' * len(part))}) AND status != 'empty' GROUP BY digest)", part).fetchall()
            found = {str(r[_DIGEST]): self._record(r) for r in rows}
            buffer.known_digests.update((d, found.get(d)) for d in part)
            self._prefetch_around(buffer, list(found.values()), versions=False)
        if buffer.known_bounds is None:
            row = self._statement("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)").fetchone()
            buffer.known_bounds = (int(row[0] or 0), int(row[1] or 0))

    def _prefetch_around(self, buffer: WriteBehind, pages: list[PageRecord], versions: bool = True) -> None:
        """Read ahead the clusters of ``pages`` and, with ``versions``, their histories (one statement each)."""
        ids = [p.id for p in pages if p.id is not None and p.id not in buffer.known_versions] if versions else []
        if ids:
            rows = self._statement(
                f"SELECT page_id, {VERSION_COLUMNS} FROM (SELECT page_id, id, {VERSION_COLUMNS}, row_number() "
                f"OVER (PARTITION BY page_id ORDER BY id DESC) AS back FROM page_versions WHERE page_id IN "
                f"({', '.join('?' * len(ids))})) AS v WHERE back <= ? ORDER BY page_id, id",
                [*ids, HISTORY_LIMIT]).fetchall()
            history: dict[int, list[VersionRow]] = {i: [] for i in ids}
            for r in rows:
                history[int(r[0])].append(self._version(r[1:], int(r[0])))
            buffer.known_versions.update(history)
        self._know_clusters(buffer, [p.cluster_id for p in pages if p.cluster_id is not None])

    def _know_clusters(self, buffer: WriteBehind, cluster_ids: Sequence[int]) -> None:
        """Read the stored rows of ``cluster_ids`` not known yet into ``buffer`` (a statement
        for each :data:`PREFETCH_CHUNK`)."""
        todo = sorted({int(c) for c in cluster_ids} - set(buffer.known_clusters))
        for i in range(0, len(todo), PREFETCH_CHUNK):
            chunk = todo[i:i + PREFETCH_CHUNK]
            found = self._cluster_rows_stored(chunk)
            buffer.known_clusters.update((c, found.get(c)) for c in chunk)

    def cluster_rows(self, cluster_ids: Sequence[int]) -> dict[int, ClusterRow]:
        """The rows of ``cluster_ids`` (absent: none), read in a statement for each
        :data:`PREFETCH_CHUNK`; inside a write transaction they are kept for its
        ``cluster_row`` calls (expiry reads every cluster that lost members at once)."""
        ids = list(dict.fromkeys(int(c) for c in cluster_ids))
        buffer = self._buffer()
        if buffer is None:
            out: dict[int, ClusterRow] = {}
            for i in range(0, len(ids), PREFETCH_CHUNK):
                out.update(self._cluster_rows_stored(ids[i:i + PREFETCH_CHUNK]))
            return {c: out[c] for c in ids if c in out}
        staged = buffer.new_clusters | buffer.dropped_clusters
        self._know_clusters(buffer, [c for c in ids if c not in staged])
        return {c: row for c in ids if (row := self.cluster_row(c)) is not None}

    @abstractmethod
    def cluster_row(self, cluster_id: int) -> ClusterRow | None: ...

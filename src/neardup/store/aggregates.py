"""The aggregate queries of the store contract, in SQL both dialects read: per-host figures
(``Detector.hosts``, the service's host routes) and the report's figures (``neardup report``),
so no caller runs SQL of its own. :class:`~neardup.store.sql.SQLStore` inherits them.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from neardup.model import MAX_TIME, MIN_TIME
from neardup.store.base import HostFigures, StructureRow


def _in_range(column: str) -> str:
    """``column`` (a time) clamped to the library's range, in SQL both dialects read (a store
    written before times were checked may hold any float: PostgreSQL's BIGINT cast would fail)."""
    return (f"CASE WHEN {column} < {MIN_TIME!r} THEN {MIN_TIME!r} WHEN {column} > {MAX_TIME!r} THEN {MAX_TIME!r} "
            f"ELSE {column} END")

class SQLAggregates:
    """Grouped queries over ``pages``, ``clusters`` and ``page_versions``."""

    path: str

    @abstractmethod
    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement (the store's plumbing)."""

    @abstractmethod
    def _simhash_bytes(self, value: Any, what: str) -> bytes:
        """A stored SimHash blob, checked."""

    # -- aggregates: host figures ----------------------------------------------------------
    @staticmethod
    def _where_host(host: str | None, since: float | None, extra: str = "") -> tuple[str, list[Any]]:
        terms: list[str] = [extra] if extra else []
        params: list[Any] = []
        if host is not None:
            terms.append("host = ?")
            params.append(host)
        if since is not None:
            terms.append("fetched_at >= ?")
            params.append(float(since))
        return (" WHERE " + " AND ".join(terms)) if terms else "", params

    def host_figures(self, host: str | None = None, since: float | None = None) -> list[HostFigures]:
        where, params = self._where_host(host, since)
        statuses = ("new", "exact", "near", "partial", "empty")
        by_status = ", ".join(f"sum(CASE WHEN status = '{s}' THEN 1 ELSE 0 END)" for s in statuses)
        rows = self._exec(
            f"SELECT host, {by_status}, count(DISTINCT CASE WHEN status != 'empty' THEN cluster_id END), "
            "sum(CASE WHEN fetches > 1 THEN 1 ELSE 0 END), "
            "sum(CASE WHEN fetches > 1 AND change_count > 0 THEN 1 ELSE 0 END), "
            "sum(CASE WHEN fetches > 1 THEN change_count ELSE 0 END), "
            f"sum(CASE WHEN fetches > 1 THEN fetched_at - first_seen ELSE 0 END) FROM pages{where} GROUP BY host",
            params).fetchall()
        out = []
        for r in rows:
            counts = {s: int(n or 0) for s, n in zip(statuses, r[1:6]) if n}
            out.append(HostFigures(str(r[0]), counts, int(r[6] or 0), int(r[7] or 0), int(r[8] or 0),
                                   int(r[9] or 0), float(r[10] or 0.0)))
        return out

    def structure_rows(self, host: str) -> list[StructureRow]:
        rows = self._exec("SELECT fetched_at, structure, digest, length, url FROM pages WHERE host = ? "
                          "AND structure IS NOT NULL ORDER BY fetched_at, id", (host,)).fetchall()
        return [StructureRow(float(r[0]), int.from_bytes(bytes(r[1]), "big"), str(r[2]), int(r[3]), str(r[4]))
                for r in rows]

    def largest_host_clusters(self, hosts: Sequence[str], since: float | None = None) -> dict[str, tuple[int, int]]:
        if not hosts:
            return {}
        where, params = self._where_host(None, since, "status != 'empty' AND cluster_id IS NOT NULL")
        marks = ",".join("?" * len(hosts))
        rows = self._exec(
            "SELECT host, cluster_id, n FROM (SELECT host, cluster_id, count(*) AS n, row_number() OVER "
            "(PARTITION BY host ORDER BY count(*) DESC, cluster_id) AS r FROM pages"
            f"{where} AND host IN ({marks}) GROUP BY host, cluster_id) AS ranked WHERE r = 1",
            [*params, *hosts]).fetchall()
        return {str(h): (int(c), int(n)) for h, c, n in rows}

    def export_batches(self, batch: int = 5000) -> Iterator[list[dict[str, Any]]]:
        """Every stored URL with its cluster's current canonical and its match's URL (one
        indexed join per batch), ``batch`` rows at a time, in id order."""
        last = 0
        while True:
            rows = self._exec(
                "SELECT p.id, p.url, p.fetched_url, p.host, p.status, m.url, p.distance, p.cluster_id, cp.url, "
                "c.canonical_id, p.first_seen, p.fetched_at, p.fetches, p.change_count, p.last_changed_at, "
                "p.change_rate, p.next_fetch, p.title, p.digest, p.simhash FROM pages p "
                "LEFT JOIN pages m ON m.id = p.matched_id LEFT JOIN clusters c ON c.id = p.cluster_id "
                "LEFT JOIN pages cp ON cp.id = c.canonical_id WHERE p.id > ? ORDER BY p.id LIMIT ?",
                (last, batch)).fetchall()
            if not rows:
                return
            out = []
            for r in rows:
                blob = self._simhash_bytes(r[19], f"page {r[0]}")
                out.append({"url": r[1], "fetched_url": r[2], "host": r[3], "status": r[4], "match_url": r[5],
                            "distance": r[6], "cluster_id": r[7], "canonical_url": r[8],
                            "is_canonical": r[9] is not None and int(r[9]) == int(r[0]),
                            "first_seen": r[10], "fetched_at": r[11], "fetches": int(r[12]),
                            "change_count": int(r[13]), "last_changed_at": r[14], "change_rate": r[15],
                            "next_fetch": r[16], "title": r[17], "digest": r[18], "simhash": blob.hex(),
                            "page_id": int(r[0])})
            yield out
            last = int(rows[-1][0])

    def fetch_counts(self) -> tuple[int, int]:
        row = self._exec("SELECT coalesce(sum(fetches), 0), "
                         "coalesce(sum(CASE WHEN change_count > 0 THEN 1 ELSE 0 END), 0) FROM pages").fetchone()
        return int(row[0]), int(row[1])

    def host_stats(self, host: str) -> dict[str, int]:
        counts = {str(s): int(n) for s, n in
                  self._exec("SELECT status, count(*) FROM pages WHERE host=? GROUP BY status", (host,))}
        return counts

    # -- aggregates for the report (``neardup report``) ---------------------------------
    def report_figures(self) -> dict[str, Any]:
        row = self._exec(
            "SELECT count(*), count(DISTINCT host), min(first_seen), max(fetched_at), coalesce(sum(fetches), 0), "
            "coalesce(sum(CASE WHEN fetches > 1 THEN 1 ELSE 0 END), 0), "
            "coalesce(sum(CASE WHEN change_count > 0 THEN 1 ELSE 0 END), 0), coalesce(sum(change_count), 0), "
            f"coalesce({self._HOST_ORDERS['wasted']}, 0) FROM pages").fetchone()
        clusters = self._exec("SELECT count(*), coalesce(sum(CASE WHEN size >= 2 THEN 1 ELSE 0 END), 0) "
                              "FROM clusters").fetchone()
        return {"pages": int(row[0]), "hosts": int(row[1]),
                "first_seen": None if row[2] is None else float(row[2]),
                "last_fetch": None if row[3] is None else float(row[3]), "fetches": int(row[4]),
                "refetched": int(row[5]), "changed_pages": int(row[6]), "changes": int(row[7]), "wasted": int(row[8]),
                "clusters": int(clusters[0]), "duplicate_clusters": int(clusters[1])}

    def distance_counts(self) -> dict[int, int]:
        return {int(d): int(n) for d, n in self._exec(
            "SELECT distance, count(*) FROM pages WHERE status = 'near' AND distance IS NOT NULL "
            "GROUP BY distance ORDER BY distance")}

    def near_sketches(self, limit: int) -> list[tuple[bytes | None, bytes | None]]:
        rows = self._exec("SELECT p.sketch, m.sketch FROM pages p JOIN pages m ON m.id = p.matched_id "
                          "WHERE p.status = 'near' ORDER BY p.id LIMIT ?", (int(limit),)).fetchall()
        return [(None if a is None else bytes(a), None if b is None else bytes(b)) for a, b in rows]

    def cluster_size_counts(self) -> dict[int, int]:
        return {int(s): int(n) for s, n in self._exec("SELECT size, count(*) FROM clusters GROUP BY size")}

    #: ``host_rankings`` orders (SQL over its columns; a rate needs a denominator above 0)
    _HOST_ORDERS = {
        "pages": "count(*)",
        "duplicate_rate": "sum(CASE WHEN status IN ('exact', 'near') THEN 1 ELSE 0 END) * 1.0 / count(*)",
        "wasted": "sum(CASE WHEN status IN ('exact', 'near') THEN fetches "
                  "WHEN fetches - 1 - change_count > 0 THEN fetches - 1 - change_count ELSE 0 END)",
        "changes_per_day": "sum(change_count) * 86400.0 / sum(CASE WHEN fetches > 1 THEN fetched_at - first_seen "
                           "ELSE 0 END)",
    }

    def host_rankings(self, order: str = "pages", limit: int = 20, min_pages: int = 1) -> list[dict[str, Any]]:
        if order not in self._HOST_ORDERS:
            raise ValueError(f"unknown order {order!r}; choose {', '.join(self._HOST_ORDERS)}")
        having = "count(*) >= ?"
        if order == "changes_per_day":
            having += " AND sum(CASE WHEN fetches > 1 THEN fetched_at - first_seen ELSE 0 END) > 0"
        rows = self._exec(
            "SELECT host, count(*), sum(CASE WHEN status = 'exact' THEN 1 ELSE 0 END), "
            "sum(CASE WHEN status = 'near' THEN 1 ELSE 0 END), sum(CASE WHEN status = 'empty' THEN 1 ELSE 0 END), "
            f"sum(fetches), {self._HOST_ORDERS['wasted']}, sum(CASE WHEN fetches > 1 THEN 1 ELSE 0 END), "
            "sum(CASE WHEN change_count > 0 THEN 1 ELSE 0 END), sum(change_count), "
            "sum(CASE WHEN fetches > 1 THEN fetched_at - first_seen ELSE 0 END) "
            f"FROM pages GROUP BY host HAVING {having} ORDER BY {self._HOST_ORDERS[order]} DESC, host LIMIT ?",
            (int(min_pages), int(limit))).fetchall()
        out = []
        for host, pages, exact, near, empty, fetches, wasted, refetched, changed, changes, span in rows:
            dups = int(exact) + int(near)
            out.append({"host": str(host), "pages": int(pages), "exact": int(exact), "near": int(near),
                        "empty": int(empty), "duplicates": dups, "duplicate_rate": dups / int(pages),
                        "fetches": int(fetches), "wasted": int(wasted), "refetched": int(refetched),
                        "changed_pages": int(changed), "changes": int(changes),
                        "changes_per_day": int(changes) * 86400.0 / float(span) if span else None,
                        "watched": float(span) / int(refetched) if refetched else None})
        return out

    def statuses_over_time(self, origin: float, bucket: float) -> list[tuple[int, str, int]]:
        # integer arithmetic: both dialects divide integers the same way (CAST of a real rounds
        # in PostgreSQL and truncates in SQLite: at most a second apart, never below origin)
        rows = self._exec(f"SELECT (CAST({_in_range('first_seen')} AS BIGINT) - ?) / ? AS b, status, count(*) "
                          "FROM pages GROUP BY b, status ORDER BY b, status", (int(origin), max(1, int(bucket))))
        return [(int(b), str(s), int(n)) for b, s, n in rows]

    def changes_over_time(self, origin: float, bucket: float,
                          hosts: Sequence[str] | None = None) -> list[tuple[str, int, int]]:
        where = "v.changed = 1"
        params: list[Any] = [int(origin), max(1, int(bucket))]
        if hosts is not None:
            if not hosts:
                return []
            where += f" AND p.host IN ({', '.join('?' for _ in hosts)})"
            params += list(hosts)
        rows = self._exec(f"SELECT p.host, (CAST({_in_range('v.fetched_at')} AS BIGINT) - ?) / ? AS b, count(*) "
                          "FROM page_versions v "
                          f"JOIN pages p ON p.id = v.page_id WHERE {where} GROUP BY p.host, b ORDER BY p.host, b",
                          params)
        return [(str(h), int(b), int(n)) for h, b, n in rows]

    def largest_clusters(self, limit: int, members: int) -> list[dict[str, Any]]:
        out = []
        for cid, canonical_id, size in self._exec("SELECT id, canonical_id, size FROM clusters WHERE size >= 2 "
                                                  "ORDER BY size DESC, id LIMIT ?", (int(limit),)).fetchall():
            rows = self._exec("SELECT p.id, p.url, p.status, p.matched_id, m.url, p.distance, p.fetched_at, p.title, "
                              "p.sketch, m.sketch FROM pages p LEFT JOIN pages m ON m.id = p.matched_id "
                              "WHERE p.cluster_id = ? ORDER BY p.id LIMIT ?", (int(cid), int(members))).fetchall()
            canon = self._exec("SELECT url, title FROM pages WHERE id = ?", (canonical_id,)).fetchone() \
                if canonical_id is not None else None
            out.append({"id": int(cid), "size": int(size),
                        "canonical_id": None if canonical_id is None else int(canonical_id),
                        "canonical_url": canon[0] if canon else None, "canonical_title": canon[1] if canon else None,
                        "members": [{"id": int(r[0]), "url": str(r[1]), "status": str(r[2]),
                                     "matched_id": None if r[3] is None else int(r[3]), "match_url": r[4],
                                     "distance": None if r[5] is None else int(r[5]), "fetched_at": float(r[6]),
                                     "title": r[7], "sketch": None if r[8] is None else bytes(r[8]),
                                     "match_sketch": None if r[9] is None else bytes(r[9])} for r in rows]})
        return out

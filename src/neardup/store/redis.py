"""The store contract on Redis (and the engines that speak its protocol: Valkey, Kvrocks):
``redis://HOST:PORT/DB`` for one server, ``redis+cluster://HOST:PORT`` for a Redis Cluster
(any node as the seed; ``pip install 'neardup[redis]'``). ``?prefix=NAME`` keeps several
stores apart on one engine (default ``neardup``).

Every key of a store carries one hash tag (``nd{NAME}:...``), so that a Redis Cluster keeps
the whole store on one slot's node and a transaction commits there atomically; several stores
(prefixes) spread over the cluster's nodes.

Writes: a transaction takes the writers' lease, stages its writes in the client (its own
reads see them) and commits them with one Lua script, all or nothing
(:mod:`neardup.store.redis_engine`). Reads outside a transaction
see committed transactions only, each read by itself (no snapshot across reads).
Durability is the engine's: with ``appendonly yes`` and ``appendfsync always`` an
acknowledged add survives a kill -9 of the server; with the default ``everysec``, up to a
second of adds may go.

Keys (``P`` = ``nd{NAME}:``): ``P meta`` (hash: key -> JSON); ``P page:ID`` (a page, JSON);
``P urls`` (hash: URL -> id); sorted sets of page ids ``P all``, ``P fetched`` (by fetch
time), ``P digest:D`` and ``P simhash:HEX`` (non-empty pages), ``P host:H``, ``P urlkey:K``,
``P members:C``; ``P urlset`` (URLs, by name); ``P statuses`` (hash: status -> pages); ``P totals`` (hash:
fetches, URLs whose content changed);
``P cluster:C`` (JSON), ``P clusters`` (ids), ``P links:C`` (hash: link -> members);
``P changes`` (the change log: seq -> ``seq:page:op:hex``); ``P versions`` (hash: page id -> its history, JSON);
``P payloads`` (hash); counters ``P next:page``, ``P next:cluster``, ``P next:change``.

The aggregates (host figures, the report, the export) are read off a copy of the pages in an
in-memory SQLite store (:mod:`neardup.store.materialise`): the same SQL as every store,
at the cost of one read of the pages they cover.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from neardup.errors import StoreError
from neardup.store.base import (
    HISTORY_LIMIT,
    PAGE_COLUMNS,
    ClusterRow,
    HostFigures,
    Lookup,
    MemberRow,
    PageRecord,
    Store,
    StructureRow,
    VersionRow,
)
from neardup.store.materialise import Aggregated
from neardup.store.redis_engine import RedisEngine, as_text
from neardup.urls import comparable_url

__all__ = ["RedisStore"]


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _unb64(value: Any) -> bytes | None:
    return None if value is None else base64.b64decode(value)


class RedisStore(RedisEngine, Store):
    """A neardup store in Redis or a Redis Cluster (see the module): ``RedisStore(url)``."""

    # -- records ----------------------------------------------------------------------
    def _store_spec(self) -> str | None:
        """The store's spec (meta ``spec``), read once it is set: a page of that spec keeps
        null in its place (a third of a page's bytes)."""
        if self._spec is None:
            stored = self.get_meta("spec")
            self._spec = stored if isinstance(stored, str) else None
        return self._spec

    def _encode(self, rec: PageRecord, bits: int) -> str:
        values = [getattr(rec, c) for c in PAGE_COLUMNS]
        if rec.spec == self._store_spec():
            values[PAGE_COLUMNS.index("spec")] = None
        values[PAGE_COLUMNS.index("simhash")] = f"{int(rec.simhash):0{bits // 4}x}"
        for blob in ("signature", "sketch"):
            values[PAGE_COLUMNS.index(blob)] = _b64(getattr(rec, blob))
        return json.dumps(values, separators=(",", ":"))

    def _decode(self, text: str, what: str) -> PageRecord:
        try:
            data = dict(zip(PAGE_COLUMNS, json.loads(text), strict=True))
            hexed = str(data["simhash"])
            widths = (self.bits // 4,) if self.bits else (16, 32)
            if len(hexed) not in widths:
                raise StoreError(f"store {self.path} is damaged: {what} has a SimHash of {len(hexed) * 4} bits, "
                                 f"expected {' or '.join(str(w * 4) for w in widths)}")
            data["simhash"] = int(hexed, 16)
            if data["spec"] is None:
                data["spec"] = self._store_spec()
                if data["spec"] is None:
                    raise StoreError(f"store {self.path} is damaged: {what} has no spec and the store none")
            data["signature"] = _unb64(data["signature"])
            data["sketch"] = _unb64(data["sketch"])
            return PageRecord(**data)
        except StoreError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"store {self.path} is damaged: {what} is unreadable ({exc})") from None

    def _pages(self, ids: Sequence[int]) -> dict[int, PageRecord]:
        texts = self._get_many([self._k("page", int(i)) for i in ids])
        return {int(i): self._decode(t, f"page {i}") for i, t in zip(ids, texts) if t is not None}

    def _entries(self, rec: PageRecord, bits: int) -> set[tuple[str, str, float]]:
        """The sorted-set entries (key, member, score) that index a stored page."""
        pid = int(rec.id or 0)
        m = str(pid)
        out = {(self._k("fetched"), m, float(rec.fetched_at)), (self._k("host", rec.host), m, float(pid)),
               (self._k("urlset"), rec.url, 0.0)}
        key = comparable_url(rec.url)
        if key != rec.url:  # a URL that is its own comparable form is found through ``urls``
            out.add((self._k("urlkey", key), m, float(pid)))
        if rec.status != "empty":
            out.add((self._k("digest", rec.digest), m, float(pid)))
            out.add((self._k("simhash", f"{int(rec.simhash):0{bits // 4}x}"), m, float(pid)))
        if rec.cluster_id is not None:
            out.add((self._k("members", rec.cluster_id), m, float(pid)))
        return out

    def _write_page(self, rec: PageRecord, old: PageRecord | None, bits: int) -> None:
        s = self._stage()
        new = self._entries(rec, bits)
        if old is not None:
            old_entries = self._entries(old, bits)
            for key, member, score in old_entries - new:
                if not any(k == key and mm == member for k, mm, _ in new):
                    s.zrem(key, member, score)
            if old.url != rec.url:
                s.hset(self._k("urls"), old.url, None)
            self._count(old, -1)
        for key, member, score in new:
            s.zadd(key, member, score)
        s.set(self._k("page", rec.id), self._encode(rec, bits))
        s.hset(self._k("urls"), rec.url, str(rec.id))
        self._count(rec, 1)

    def _count(self, rec: PageRecord, sign: int) -> None:
        """Count a page in (1) or out (-1) of the store's totals: pages by status
        (``P statuses``), fetches and URLs whose content changed (``P totals``)."""
        s = self._stage()
        s.hincr(self._k("statuses"), rec.status, sign)
        s.hincr(self._k("totals"), "fetches", sign * int(rec.fetches))
        s.hincr(self._k("totals"), "changed", sign * int(rec.change_count > 0))

    # -- meta -------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        value = self._hget(self._k("meta"), key)
        if value is None:
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise StoreError(f"store {self.path} is damaged: meta value {key!r} is not JSON") from None

    def set_meta(self, key: str, value: Any) -> None:
        if key == "spec":
            self._spec = None  # read again once committed
        with self.transaction():
            self._stage().hset(self._k("meta"), key, json.dumps(value, sort_keys=True))

    def payload_originals(self, digests: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        todo = list(dict.fromkeys(digests))
        if not todo:
            return {}
        got = self._call(self._r.hmget, self._k("payloads"), todo)
        return {d: tuple(json.loads(v)) for d, v in zip(todo, got) if v is not None}  # type: ignore[misc]

    def set_payload_originals(self, originals: Mapping[str, tuple[str, str, str]]) -> None:
        with self.transaction():
            s = self._stage()
            for digest, triple in originals.items():
                s.hset(self._k("payloads"), digest, json.dumps(list(triple)))

    # -- pages ------------------------------------------------------------------------
    def page_count(self) -> int:
        return sum(self.status_counts().values())

    def page_by_id(self, page_id: int) -> PageRecord | None:
        return self._pages([page_id]).get(int(page_id))

    def page_by_url(self, url: str) -> PageRecord | None:
        pid = self._hget(self._k("urls"), url)
        return None if pid is None else self.page_by_id(int(pid))

    def _first(self, key: str, exclude: int | None = None) -> int | None:
        for m, _ in self._zrange(key, limit=2):
            if exclude is None or int(m) != int(exclude):
                return int(m)
        return None

    def page_by_digest(self, digest: str, prefer_url: str | None = None) -> PageRecord | None:
        if prefer_url is not None:
            own = self.page_by_url(prefer_url)
            if own is not None and own.digest == digest and own.status != "empty":
                return own
        pid = self._first(self._k("digest", digest))
        return None if pid is None else self.page_by_id(pid)

    def pages_by_ids(self, ids: Sequence[int]) -> dict[int, PageRecord]:
        return self._pages(list(ids)) if ids else {}

    def lowest_live(self, simhash: int, bits: int, exclude: int | None = None) -> int | None:
        return self._first(self._k("simhash", f"{int(simhash):0{bits // 4}x}"), exclude)

    def lowest_lives(self, values: Sequence[int], bits: int) -> dict[int, int | None]:
        """One pipelined round trip for all ``values``."""
        keys = {int(v): self._k("simhash", f"{int(v):0{bits // 4}x}") for v in values}
        firsts = self._zfirst_many(list(keys.values()), limit=1)
        return {v: int(firsts[key][0][0]) if firsts[key] else None for v, key in keys.items()}

    def cluster_rows(self, cluster_ids: Sequence[int]) -> dict[int, ClusterRow]:
        """Several clusters in one read (and, in a transaction, kept for its later reads)."""
        ids = [int(c) for c in cluster_ids]
        out = {}
        for cid, text in zip(ids, self._get_many([self._k("cluster", c) for c in ids])):
            if text is None:
                continue
            try:
                canonical, size, created, joins, joined_at, recent = json.loads(text)
            except (ValueError, TypeError):
                raise StoreError(f"store {self.path} is damaged: cluster {cid} is unreadable") from None
            out[cid] = ClusterRow(cid, None if canonical is None else int(canonical), int(size), float(created),
                                  int(joins or 0), None if joined_at is None else float(joined_at),
                                  float(recent or 0.0))
        return out

    def lookup(self, url: str, digest: str | None) -> Lookup:
        """One round trip (a Lua script: one consistent view) while this thread has no staged
        writes, or none that the answer depends on (the URL's entry, the digest's pages, the
        change log's removals); through the staging otherwise."""
        s = self._tx.staging
        urls, dkey, changes = self._k("urls"), self._k("digest", digest or ""), self._k("changes")
        if s and (url in s.fields.get(urls, {}) or urls in s.dropped or changes in s.dropped
                  or (digest is not None and (dkey in s.members or dkey in s.dropped))):
            first, last = self.change_bounds()
            own = self.page_by_url(url)
            same = self.page_by_digest(digest, url) if digest is not None else None
            return Lookup(first, last, own, same)
        lo, hi, own_text, same_text = self._call(self._lookup, [changes, urls, dkey],
                                                 [url, self.prefix, int(digest is not None)])
        own = None if own_text is None else self._decode(as_text(own_text), f"the page at {url}")
        same = None if same_text is None else self._decode(as_text(same_text), f"a page of digest {digest}")
        if own is not None and digest is not None and own.digest == digest and own.status != "empty":
            same = own
        first, last = int(float(lo)) if lo is not None else 0, int(float(hi)) if hi is not None else 0
        if s:  # the log with this transaction's own entries (its pages are the engine's: every
            # staged write of a page stages its URL's entry and its digest's, which send it above)
            if self._tx.change_bounds is None:
                self._tx.change_bounds = (first, last)
            first, last = self.change_bounds()
        return Lookup(first, last, own, same)

    def cluster_members(self, cluster_id: int) -> list[PageRecord]:
        ids = [int(m) for m, _ in self._zrange(self._k("members", cluster_id))]
        pages = self._pages(ids)
        return [pages[i] for i in ids if i in pages]

    def insert_page(self, rec: PageRecord, bits: int) -> int:
        with self.transaction():
            pid = self._next_id("page")
            stored = PageRecord(**{**rec.__dict__, "id": pid})
            self._write_page(stored, None, bits)
            return pid

    def update_page(self, rec: PageRecord, bits: int) -> None:
        with self.transaction():
            old = self.page_by_id(int(rec.id or 0))
            if old is None:
                return
            self._write_page(rec, old, bits)

    def delete_pages(self, ids: Sequence[int]) -> None:
        with self.transaction():
            s = self._stage()
            wanted = [int(i) for i in ids]
            # the pages the last read of expired pages returned, unchanged since: not read again
            known, self._tx.expired_pages = self._tx.expired_pages or {}, None
            pages = {i: known[i] for i in wanted if i in known and self._k("page", i) not in s.strings}
            pages.update(self._pages([i for i in wanted if i not in pages]))
            for pid, rec in pages.items():
                for key, member, score in self._entries(rec, self.bits or 64):
                    s.zrem(key, member, score)
                s.hset(self._k("urls"), rec.url, None)
                self._count(rec, -1)
                s.set(self._k("page", pid), None)
                s.hset(self._k("versions"), str(pid), None)

    def add_version(self, page_id: int, version: VersionRow, bits: int, keep: int = HISTORY_LIMIT,
                    fetches: int | None = None) -> None:
        with self.transaction():
            rows = [] if fetches == 1 else self._version_rows(page_id)  # a first fetch: no history yet
            rows.append([version.fetched_at, version.digest, f"{int(version.simhash):0{bits // 4}x}",
                         version.changed, version.distance, version.score])
            kept = rows[-keep:] if keep >= 1 else []
            self._stage().hset(self._k("versions"), str(page_id),
                               json.dumps(kept, separators=(",", ":")) if kept else None)

    def _version_rows(self, page_id: int) -> list[list[Any]]:
        """A page's history as stored: one field of the ``versions`` hash, a JSON list of rows."""
        text = self._hget(self._k("versions"), str(page_id))
        try:
            rows = json.loads(text) if text is not None else []
            if not isinstance(rows, list):
                raise TypeError("not a list")
            return rows
        except (ValueError, TypeError) as exc:
            raise StoreError(f"store {self.path} is damaged: the history of page {page_id} ({exc})") from None

    def versions(self, page_id: int, limit: int = HISTORY_LIMIT) -> list[VersionRow]:
        rows = self._version_rows(page_id)[-limit:] if limit > 0 else []
        out = []
        for row in rows:
            try:
                at, digest, hexed, changed, distance, score = row
                out.append(VersionRow(float(at), str(digest), int(hexed, 16), changed, distance, score))
            except (ValueError, TypeError) as exc:
                raise StoreError(f"store {self.path} is damaged: a version of page {page_id} ({exc})") from None
        return out

    def expired_batch(self, before: float, limit: int) -> list[PageRecord]:
        """The first ``limit`` pages fetched before ``before``. Inside a transaction that has
        removed every page it read here before (expiry), the engine is asked for the pages
        after them (from the last one's fetch time, past those of that time already read),
        not again for the removed ones: a read from the start would ask for all of them,
        quadratic in the pages expired."""
        fetched, s = self._k("fetched"), self._tx.staging
        floor, skip, last = float("-inf"), 0, self._tx.expiry
        if s is not None and last is not None:
            gone = s.members.get(fetched, {})
            if all(m in gone and gone[m] is None for m in last[1]):
                floor, skip = last[0], len(last[1])
        got = [(m, sc) for m, sc in self._zrange(fetched, lo=floor, hi=before, limit=limit + 1, skip=skip)
               if sc < before][:limit]
        if s is not None and got:
            end, staged = got[-1][1], s.members.get(fetched, {})
            # the engine's members at the last fetch time (not those this transaction added):
            # what the next read skips
            ties = [m for m, sc in got if sc == end and staged.get(m) is None]
            self._tx.expiry = (end, (last[1] if last is not None and skip and end == floor else []) + ties)
        ids = [int(m) for m, _ in got]
        pages = self._pages(ids)
        if s is not None:
            self._tx.expired_pages = pages
        return [pages[i] for i in ids if i in pages]

    def _live_reps(self) -> list[PageRecord]:
        reps: dict[int, PageRecord] = {}
        for rec in self.iter_pages(5000):
            if rec.status != "empty" and rec.simhash not in reps:
                reps[rec.simhash] = rec
        return sorted(reps.values(), key=lambda r: int(r.id or 0))

    def simhashes(self) -> tuple[np.ndarray, np.ndarray]:
        reps = self._live_reps()
        if not reps:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        ids = np.fromiter((int(r.id or 0) for r in reps), dtype=np.int64, count=len(reps))
        words = np.array([r.simhash for r in reps], dtype=np.uint64)
        return ids, words

    def signatures(self) -> tuple[np.ndarray, list[bytes], np.ndarray]:
        reps = [r for r in self._live_reps() if r.signature is not None]
        ids = np.fromiter((int(r.id or 0) for r in reps), dtype=np.int64, count=len(reps))
        sizes = np.fromiter((r.set_size or 0 for r in reps), dtype=np.int64, count=len(reps))
        return ids, [bytes(r.signature or b"") for r in reps], sizes

    def due_urls(self, at: float, limit: int, after: str | None = None) -> list[str]:
        out: list[str] = []
        cursor = after or ""
        while len(out) < limit:
            urls = [m for m, _ in self._zrange(self._k("urlset"), limit=500, after=cursor)]
            if not urls:
                break
            cursor = urls[-1]
            ids = self._hmget(self._k("urls"), urls)  # three reads a batch of 500 URLs
            pages = self._pages([int(i) for i in ids if i is not None])
            rows = self.cluster_rows(sorted({p.cluster_id for p in pages.values() if p.cluster_id is not None}))
            canon = {c: row.canonical_id for c, row in rows.items()}
            for rec in sorted(pages.values(), key=lambda r: r.url):
                due = rec.next_fetch is None or rec.next_fetch <= at
                kept = rec.status in ("new", "partial") or (rec.cluster_id is not None
                                                           and canon.get(rec.cluster_id) == rec.id)
                if due and kept:
                    out.append(rec.url)
                    if len(out) == limit:
                        break
        return out

    def iter_pages(self, batch: int = 1000) -> Iterator[PageRecord]:
        """Every page in id order: ids 1 to the last one given, ``batch`` keys a read (the gaps
        deleted pages leave are skipped)."""
        top = int(self._hget_plain(self._k("next", "page")) or 0)
        for lo in range(1, top + 1, batch):
            ids = list(range(lo, min(lo + batch, top + 1)))
            pages = self._pages(ids)
            for i in ids:
                if i in pages:
                    yield pages[i]

    def status_counts(self) -> dict[str, int]:
        return {s: int(n) for s, n in self._hgetall(self._k("statuses")).items() if int(n) > 0}

    def _host_pages(self, host: str) -> list[PageRecord]:
        ids = [int(m) for m, _ in self._zrange(self._k("host", host))]
        pages = self._pages(ids)
        return [pages[i] for i in ids if i in pages]

    def host_stats(self, host: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rec in self._host_pages(host):
            counts[rec.status] = counts.get(rec.status, 0) + 1
        return counts

    # -- aggregates, read off a copy in SQLite ------------------------------------------
    def _aggregated(self, hosts: Sequence[str] | None = None, versions: bool = False,
                    clusters: bool = False) -> Aggregated:
        if hosts is None:
            pages: Iterator[PageRecord] | list[PageRecord] = self.iter_pages(5000)
        else:
            pages = [rec for h in dict.fromkeys(hosts) for rec in self._host_pages(h)]
        rows = [self.cluster_row(c) for c in self.cluster_ids()] if clusters else []
        history = self.versions if versions else None
        return Aggregated(pages, [r for r in rows if r is not None], history, self.bits or 64)

    def host_figures(self, host: str | None = None, since: float | None = None) -> list[HostFigures]:
        with self._aggregated(None if host is None else [host]) as agg:
            return agg.store.host_figures(host, since)

    def structure_rows(self, host: str) -> list[StructureRow]:
        pages = [r for r in self._host_pages(host) if r.structure is not None]
        pages.sort(key=lambda r: (r.fetched_at, int(r.id or 0)))
        return [StructureRow(r.fetched_at, int(r.structure or 0), r.digest, r.length, r.url) for r in pages]

    def largest_host_clusters(self, hosts: Sequence[str], since: float | None = None) -> dict[str, tuple[int, int]]:
        if not hosts:
            return {}
        with self._aggregated(hosts) as agg:
            return agg.store.largest_host_clusters(hosts, since)

    def export_batches(self, batch: int = 5000) -> Iterator[list[dict[str, Any]]]:
        with self._aggregated(clusters=True) as agg:
            yield from agg.store.export_batches(batch)

    def fetch_counts(self) -> tuple[int, int]:
        fetches, changed = self._hmget(self._k("totals"), ["fetches", "changed"])
        return int(fetches or 0), int(changed or 0)

    def report_figures(self) -> dict[str, Any]:
        with self._aggregated(clusters=True) as agg:
            return agg.store.report_figures()

    def distance_counts(self) -> dict[int, int]:
        with self._aggregated() as agg:
            return agg.store.distance_counts()

    def near_sketches(self, limit: int) -> list[tuple[bytes | None, bytes | None]]:
        with self._aggregated() as agg:
            return agg.store.near_sketches(limit)

    def cluster_size_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for c in self.cluster_ids():
            row = self.cluster_row(c)
            if row is not None:
                counts[row.size] = counts.get(row.size, 0) + 1
        return counts

    def host_rankings(self, order: str = "pages", limit: int = 20, min_pages: int = 1) -> list[dict[str, Any]]:
        with self._aggregated() as agg:
            return agg.store.host_rankings(order, limit, min_pages)

    def statuses_over_time(self, origin: float, bucket: float) -> list[tuple[int, str, int]]:
        with self._aggregated() as agg:
            return agg.store.statuses_over_time(origin, bucket)

    def changes_over_time(self, origin: float, bucket: float,
                          hosts: Sequence[str] | None = None) -> list[tuple[str, int, int]]:
        if hosts is not None and not hosts:
            return []
        with self._aggregated(hosts, versions=True) as agg:
            return agg.store.changes_over_time(origin, bucket, hosts)

    def largest_clusters(self, limit: int, members: int) -> list[dict[str, Any]]:
        with self._aggregated(clusters=True) as agg:
            return agg.store.largest_clusters(limit, members)

    # -- clusters ---------------------------------------------------------------------
    def new_cluster(self, now: float | None = None) -> int:
        with self.transaction():
            cid = self._next_id("cluster")
            s = self._stage()
            s.set(self._k("cluster", cid), json.dumps([None, 0, time.time() if now is None else now, 0, None, 0.0]))
            s.zadd(self._k("clusters"), str(cid), float(cid))
            return cid

    def cluster_row(self, cluster_id: int) -> ClusterRow | None:
        return self.cluster_rows([cluster_id]).get(int(cluster_id))

    def cluster_canonical(self, cluster_id: int) -> int | None:
        row = self.cluster_row(cluster_id)
        return None if row is None else row.canonical_id

    def set_cluster(self, cluster_id: int, canonical_id: int | None, size: int,
                    growth: tuple[int, float | None, float] | None = None) -> None:
        with self.transaction():
            s = self._stage()
            if size <= 0:
                s.set(self._k("cluster", cluster_id), None)
                s.zrem(self._k("clusters"), str(cluster_id))
                s.drop(self._k("links", cluster_id))
                return
            row = self.cluster_row(cluster_id)
            if row is None:
                return
            joins, joined_at, recent = growth if growth is not None else (row.joins, row.joined_at, row.recent)
            s.set(self._k("cluster", cluster_id),
                  json.dumps([canonical_id, int(size), row.created_at, int(joins), joined_at, float(recent)]))

    def cluster_ids(self) -> list[int]:
        return [int(m) for m, _ in self._zrange(self._k("clusters"))]

    def cluster_count(self) -> int:
        return self._zcard(self._k("clusters"))

    @staticmethod
    def _member_row(rec: PageRecord) -> MemberRow:
        return (int(rec.id or 0), rec.url, rec.first_seen, rec.canonical_link, rec.priority)

    def member(self, page_id: int) -> MemberRow | None:
        rec = self.page_by_id(page_id)
        return None if rec is None else self._member_row(rec)

    def members_with_url_key(self, cluster_id: int, key: str) -> list[MemberRow]:
        ids = [int(m) for m, _ in self._zrange(self._k("urlkey", key))]
        own = self._hget(self._k("urls"), key)
        if own is not None:
            ids.append(int(own))
        pages = self._pages(sorted(set(ids)))
        return [self._member_row(r) for r in pages.values()
                if r.cluster_id == cluster_id and comparable_url(r.url) == key]

    def member_batches(self, cluster_id: int, batch: int = 5000) -> Iterator[list[MemberRow]]:
        last = -1.0
        while True:
            ids = [int(m) for m, _ in self._zrange(self._k("members", cluster_id), lo=last + 1, limit=batch)]
            if not ids:
                return
            pages = self._pages(ids)
            yield [self._member_row(pages[i]) for i in ids if i in pages]
            last = float(ids[-1])

    def link_counts(self, cluster_id: int, keys: Sequence[str]) -> dict[str, int]:
        counts = self._hmget(self._k("links", cluster_id), list(keys))
        return {key: int(n) for key, n in zip(keys, counts) if n is not None and int(n) != 0}

    def named_links(self, cluster_id: int) -> set[str]:
        return {k for k, n in self._hgetall(self._k("links", cluster_id)).items() if int(n) > 0}

    def add_link(self, cluster_id: int, key: str, delta: int) -> None:
        with self.transaction():
            field = self._k("links", cluster_id)
            n = int(self._hget(field, key) or 0) + int(delta)
            self._stage().hset(field, key, str(n) if n > 0 or delta > 0 else None)

    # -- the change log ---------------------------------------------------------------
    def log_change(self, page_id: int, op: str, simhash: int, bits: int) -> int:
        with self.transaction():
            seq = self._next_id("change")
            self._stage().zadd(self._k("changes"), f"{seq}:{int(page_id)}:{op}:{int(simhash):0{bits // 4}x}",
                               float(seq))
            return seq

    def change_bounds(self) -> tuple[int, int]:
        """The change log's first and last positions. Inside a transaction the engine's are
        read once (no other writer commits while this one holds the lease) and the staged
        entries' range is kept by the staging: a batch of adds does not read them again, nor
        scan its own entries, at every add."""
        key = self._k("changes")
        s = self._tx.staging
        stored = self._tx.change_bounds if s is not None else None
        if stored is None:
            pipe = self._r.pipeline(transaction=False)
            pipe.zrange(key, 0, 0, withscores=True)
            pipe.zrange(key, -1, -1, withscores=True)
            lo, hi = self._call(pipe.execute)
            stored = (int(lo[0][1]), int(hi[0][1])) if lo else None
            if s is not None:
                self._tx.change_bounds = stored or (0, 0)
        elif stored == (0, 0):
            stored = None
        pending = s.members.get(key, {}) if s is not None else {}
        if not pending:
            return stored or (0, 0)
        assert s is not None
        added = s.added_range(key)
        if added is None:  # entries removed (a prune) in this transaction: read it all
            entries = self._zrange(key)
            return (int(entries[0][1]), int(entries[-1][1])) if entries else (0, 0)
        return (stored[0] if stored else int(added[0]), max(stored[1] if stored else 0, int(added[1])))

    def changes_since(self, seq: int, limit: int = 100000) -> list[tuple[int, int, str, int]]:
        out = []
        for member, _ in self._zrange(self._k("changes"), lo=seq + 1, limit=limit):
            try:
                s, pid, op, hexed = member.split(":")
                out.append((int(s), int(pid), op, int(hexed, 16)))
            except ValueError:
                raise StoreError(f"store {self.path} is damaged: change {member!r} is unreadable") from None
        return out

    def change_count(self) -> int:
        return self._zcard(self._k("changes"))

    def prune_changes(self, keep_after: int) -> int:
        with self.transaction():
            gone = self._zrange(self._k("changes"), hi=keep_after)
            s = self._stage()
            for member, _ in gone:
                s.zrem(self._k("changes"), member)
            return len(gone)


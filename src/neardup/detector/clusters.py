"""Clusters of near-duplicates: membership, size, link counts, growth and the canonical
page, kept incrementally as pages join, leave or are replaced by a new version.

A member's rank under a canonical policy depends only on itself and on whether some member
names its URL (:meth:`CanonicalPolicy.key`), so each change reads a few rows whatever the
cluster's size; the members are read only when the canonical itself leaves or changes
(:meth:`Clusters.recompute`). ``tests/test_clusters.py`` checks the incremental answer against
a recomputation from scratch after every step of random add / re-fetch / expire sequences.

>>> from neardup import Detector
>>> det = Detector()
>>> text = " ".join(f"word{i}" for i in range(400))
>>> v = det.add("https://a.example/1", text)
>>> det.clusters.info(v.cluster_id)["size"]
1
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from neardup.canonical import CanonicalPolicy, Member
from neardup.model import checked_id, seconds
from neardup.store.base import ClusterRow, PageRecord, Store
from neardup.store.sql import GROWTH_HALF_LIFE
from neardup.urls import comparable_link, comparable_url


def member_of(rec: PageRecord) -> Member:
    assert rec.id is not None
    return Member(rec.id, rec.url, rec.first_seen, rec.canonical_link, rec.priority)


def same_for_policy(a: Member, b: Member) -> bool:
    """Whether a member changed in nothing a canonical policy reads."""
    return (a.id == b.id and a.url == b.url and a.first_seen == b.first_seen and a.priority == b.priority
            and comparable_link(a.canonical_link) == comparable_link(b.canonical_link))


class Clusters:
    """The clusters of one store under one canonical policy."""

    def __init__(self, store: Store, policy: CanonicalPolicy) -> None:
        self.store = store
        self.policy = policy

    def info(self, cluster_id: int, at: float | None = None) -> dict[str, Any] | None:
        """A cluster's size, canonical and growth, without reading its members (None when
        there is no such cluster): ``size``, ``canonical_id``, ``canonical_url``,
        ``created_at``, ``joins`` (members that ever joined it, re-fetches not counted),
        ``last_joined_at`` (fetch time of the last join) and ``joins_per_hour``: the recent
        rate, an exponentially decayed count of joins (half-life
        :data:`~neardup.store.sql.GROWTH_HALF_LIFE` seconds) seen at time ``at`` (default now).
        A trap (one page under endless URLs) shows as a large size and a high rate."""
        row = self.store.cluster_row(checked_id(cluster_id, "cluster id"))
        at = seconds(at, "at", optional=True)
        if row is None:
            return None
        canon = self.store.member(row.canonical_id) if row.canonical_id is not None else None
        now = time.time() if at is None else float(at)
        recent = 0.0
        if row.joined_at is not None:
            recent = row.recent * 0.5 ** (max(0.0, now - row.joined_at) / GROWTH_HALF_LIFE)
        return {"id": row.id, "size": row.size, "canonical_id": row.canonical_id,
                "canonical_url": canon[1] if canon is not None else None, "created_at": row.created_at,
                "joins": row.joins, "last_joined_at": row.joined_at,
                "joins_per_hour": recent * math.log(2) * 3600.0 / GROWTH_HALF_LIFE}

    def change(self, cluster_id: int, leave: Member | None, join: Member | None,
               now: float | None, *, write: bool, fresh: bool = False,
               known: Member | None = None) -> Member | None:
        """The canonical of ``cluster_id`` once ``leave`` has left it and ``join`` joined it
        (either may be None; both: one member replaced by its new version), stored with the
        size, link counts and growth when ``write`` (then the pages table already holds the
        change), else only predicted (:meth:`Detector.check`).

        A member's rank depends only on itself and on whether some member names its URL
        (:meth:`CanonicalPolicy.key`), and joining only adds names, so the new canonical is
        the best of: the old canonical, the newcomer, and the members its link names for the
        first time in this cluster (a few reads, whatever the cluster's size). The members
        are read (:meth:`recompute`) only when the canonical itself leaves or changes, or
        loses the last link naming it. ``fresh``: the cluster was just created, empty (nothing
        to read: no row values, no links). ``known``: a member the caller has read in this
        transaction (the matched page), not read again when it is the canonical."""
        row = None if fresh else self.store.cluster_row(cluster_id)
        if row is None:
            row = ClusterRow(cluster_id, None, 0, now if now is not None else time.time())
        policy = self.policy
        deltas: dict[str, int] = {}
        counts: dict[str, int] = {}

        def prefetch(keys: list[str | None]) -> None:  # the stored counts of several keys in one read
            todo = [k for k in dict.fromkeys(keys) if k is not None and k not in counts]
            if todo:
                found = {} if fresh else self.store.link_counts(cluster_id, todo)
                counts.update({k: found.get(k, 0) for k in todo})

        def count(key: str) -> int:  # members naming ``key`` after this change
            prefetch([key])
            return counts[key] + deltas.get(key, 0)

        size, dirty, best = row.size, False, None
        unchanged = leave is not None and join is not None and same_for_policy(leave, join)
        if leave is not None and not unchanged:
            size -= 1
            lk = comparable_link(leave.canonical_link)
            if lk is not None:
                deltas[lk] = deltas.get(lk, 0) - 1
            dirty = leave.id == row.canonical_id
        if not dirty and row.canonical_id is not None:
            if known is not None and known.id == row.canonical_id:
                best = known
            else:
                found = self.store.member(row.canonical_id)
                best = Member(*found) if found is not None else None
            dirty = best is None
            if policy.uses_links and not unchanged:  # every count this change may ask for, read at once
                prefetch([comparable_link(leave.canonical_link) if leave is not None else None,
                          comparable_link(join.canonical_link) if join is not None else None,
                          comparable_url(best.url) if best is not None else None,
                          comparable_url(join.url) if join is not None else None])
            if (best is not None and leave is not None and not unchanged and policy.uses_links
                    and comparable_link(leave.canonical_link) == comparable_url(best.url)
                    and count(comparable_url(best.url)) <= 0):
                dirty = True  # the canonical lost the link that named it
        if join is not None and not unchanged:
            size += 1
            jk = comparable_link(join.canonical_link)
            newly_named = False
            if jk is not None:
                newly_named = count(jk) == 0
                deltas[jk] = deltas.get(jk, 0) + 1
            if not dirty:
                cands = {best.id: best} if best is not None else {}
                if policy.uses_links and newly_named and jk is not None:
                    for found in self.store.members_with_url_key(cluster_id, jk):
                        m = Member(*found)
                        if m.url != join.url:
                            cands[m.id] = m
                cands[join.id] = join
                best = join if len(cands) == 1 else min(cands.values(), key=lambda m: policy.key(
                    m, policy.uses_links and count(comparable_url(m.url)) > 0))
        if dirty and size > 0:
            best, size = self.recompute(cluster_id, deltas, join)
        if size <= 0:
            best = None
        if write:
            for key, delta in deltas.items():
                if delta:
                    self.store.add_link(cluster_id, key, delta)
            joins, joined_at, recent = row.joins, row.joined_at, row.recent
            if join is not None and leave is None and now is not None:
                joins += 1
                if joined_at is not None:
                    recent *= 0.5 ** (max(0.0, now - joined_at) / GROWTH_HALF_LIFE)
                recent += 1.0
                joined_at = now if joined_at is None else max(joined_at, now)
            canonical_id = best.id if best is not None else None
            if (canonical_id, size, joins, joined_at, recent) != (row.canonical_id, row.size, row.joins,
                                                                   row.joined_at, row.recent) or fresh or size <= 0:
                self.store.set_cluster(cluster_id, canonical_id, size, (joins, joined_at, recent))
        return best

    def lost(self, cluster_id: int, ids: set[int], links: Mapping[str, int]) -> None:
        """Expiry took the pages ``ids`` (naming ``links``) out of the cluster: one update."""
        row = self.store.cluster_row(cluster_id)
        if row is None:
            return
        for key, n in links.items():
            self.store.add_link(cluster_id, key, -n)
        size = row.size - len(ids)
        best: Member | None = None
        dirty = row.canonical_id is None or row.canonical_id in ids
        if not dirty and size > 0 and row.canonical_id is not None:
            found = self.store.member(row.canonical_id)
            best = Member(*found) if found is not None else None
            if best is None:
                dirty = True
            elif self.policy.uses_links and comparable_url(best.url) in links:
                key = comparable_url(best.url)
                dirty = self.store.link_counts(cluster_id, [key]).get(key, 0) <= 0
        if dirty and size > 0:
            best, size = self.recompute(cluster_id)
        self.store.set_cluster(cluster_id, best.id if best is not None and size > 0 else None, size)

    def recompute(self, cluster_id: int, deltas: Mapping[str, int] | None = None,
                   join: Member | None = None) -> tuple[Member | None, int]:
        """The canonical from scratch: every member, read in batches, ranked with the
        cluster's named links (the stored counts plus ``deltas``); ``join``: a member as it
        would be (replacing the stored page at its URL). Returns (canonical, size)."""
        policy = self.policy
        named: set[str] = set()
        if policy.uses_links:
            named = self.store.named_links(cluster_id)
            if deltas:
                stored = self.store.link_counts(cluster_id, list(deltas))
                for key, delta in deltas.items():
                    if stored.get(key, 0) + delta > 0:
                        named.add(key)
                    else:
                        named.discard(key)

        def rank(m: Member) -> tuple:
            return policy.key(m, policy.uses_links and comparable_url(m.url) in named)

        best, best_rank, size = None, None, 0
        if join is not None:
            best, best_rank, size = join, rank(join), 1
        for rows in self.store.member_batches(cluster_id):
            for found in rows:
                m = Member(*found)
                if join is not None and m.url == join.url:
                    continue
                size += 1
                r = rank(m)
                if best_rank is None or r < best_rank:
                    best, best_rank = m, r
        return best, size

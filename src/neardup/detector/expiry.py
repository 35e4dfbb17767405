"""Expiry: forget the pages last fetched before a time, in batches (:meth:`Detector.expire`).

Each batch of :data:`EXPIRE_BATCH` pages is one read and one delete statement; each cluster
that lost members is updated once at the end (:meth:`~neardup.detector.clusters.Clusters.lost`),
re-choosing its canonical from scratch only when the canonical itself left (or lost the link
naming it).
"""

from __future__ import annotations

from neardup.crawl.signals import CrawlSignals
from neardup.detector.clusters import Clusters
from neardup.detector.mirror import IndexMirror
from neardup.store.base import PageRecord, Store
from neardup.urls import comparable_link

__all__ = ["EXPIRE_BATCH", "expire_before"]

#: pages expired per statement
EXPIRE_BATCH = 1000


def expire_before(store: Store, signals: CrawlSignals, mirror: IndexMirror, clusters: Clusters,
                  before: float) -> int:
    """Forget every page last fetched before ``before`` (inside the caller's write transaction,
    the index kept in step); returns how many."""
    total = 0
    gone: dict[int, tuple[set[int], dict[str, int]]] = {}  # cluster -> (ids, link counts)
    while True:
        recs = store.expired_batch(before, EXPIRE_BATCH)
        if not recs:
            break
        old: dict[int, PageRecord] = {r.id: r for r in recs if r.id is not None}
        store.delete_pages(list(old))
        for r in recs:
            signals.forget(r.url)
        mirror.reconcile({r.simhash for r in recs if r.status != "empty"}, old)
        for r in recs:
            if r.cluster_id is not None:
                ids, links = gone.setdefault(r.cluster_id, (set(), {}))
                ids.add(int(r.id or 0))
                key = comparable_link(r.canonical_link)
                if key is not None:
                    links[key] = links.get(key, 0) + 1
        total += len(recs)
    store.cluster_rows(sorted(gone))  # read at once (a store with round trips keeps them)
    for cid in sorted(gone):
        clusters.lost(cid, *gone[cid])
    return total

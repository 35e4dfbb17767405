"""Versions of one URL: a re-fetch of a stored URL compared with its stored version
(``unchanged`` or ``changed``, and whether the URL keeps its first decision), the verdict
fields that say so, and the URL's fetch counters and recrawl schedule after the fetch
(:mod:`neardup.crawl` estimates the change rate from the history).

>>> from neardup import Detector
>>> det = Detector()
>>> text = " ".join(f"word{i}" for i in range(400))
>>> _ = det.add("https://a.example/1", text, fetched_at=0.0)
>>> v = det.add("https://a.example/1", text.replace("word9 ", ""), fetched_at=60.0)
>>> v.version, v.status, v.since_last_fetch
('changed', 'new', 60.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neardup.canonical import Member
from neardup.crawl.schedule import MAX_REVISIT, MIN_REVISIT, UrlHistory, schedule
from neardup.fingerprint.core import Fingerprint
from neardup.matching import Side, pair_rule, sketch_score
from neardup.model import Verdict, finite_or_none
from neardup.store.base import HISTORY_LIMIT, PageRecord, Store


@dataclass(frozen=True)
class Revisit:
    """How a re-fetch compares with the stored version of its URL."""

    version: str  # "unchanged" | "changed"
    distance: int
    score: float | None
    since: float
    keep: bool  # the URL keeps its first decision and cluster


def compare_versions(url: str, fp: Fingerprint, own: PageRecord, now: float, k: int, verify: float | None,
                     bands: bool = True, stable: str | None = None) -> Revisit:
    """Compare a re-fetch of ``url`` with its stored version ``own``: ``unchanged`` (same
    digest, or the same ``stable`` digest: the text without its host's per-fetch noise,
    :mod:`neardup.crawl.noise`) or ``changed``; the URL keeps its first decision while the
    new version is the same content or a near copy of the stored one
    (:func:`matching.pair_rule` with the URL's thresholds, the sketch bands when ``bands``: the
    rule a stored page of another URL would be held to) in the same cluster."""
    since = now - own.fetched_at
    if own.digest == fp.digest and (own.status == "empty") == fp.empty:
        return Revisit("unchanged", 0, 1.0, since, keep=True)
    new_side, old_side = Side.of(fp, url), Side.of_record(own)
    outcome = pair_rule(new_side, old_side, k, verify, bands)
    keep = outcome.status is not None and own.cluster_id is not None
    score = outcome.score if outcome.score is not None else sketch_score(new_side, old_side)
    noise_only = stable is not None and own.stable == stable and (own.status == "empty") == fp.empty
    return Revisit("unchanged" if noise_only else "changed", outcome.distance, score, since, keep or noise_only)


def kept_verdict(store: Store, own: PageRecord, canonical: Member | None, base: dict[str, Any]) -> Verdict:
    """The verdict of a re-fetch that keeps its URL's first decision: the stored status,
    match and cluster (and the cluster's canonical, ``canonical`` when just chosen)."""
    match_url = None
    if own.matched_id is not None:
        found = store.member(own.matched_id)
        match_url = found[1] if found is not None else None
    if canonical is None and own.cluster_id is not None:
        row = store.cluster_row(own.cluster_id)
        if row is not None and row.canonical_id is not None:
            found = store.member(row.canonical_id)
            canonical = Member(*found) if found is not None else None
    return Verdict(status=own.status, match_id=own.matched_id if match_url is not None else None,
                   match_url=match_url, distance=own.distance if match_url is not None else None,
                   cluster_id=own.cluster_id, canonical_id=canonical.id if canonical else None,
                   canonical_url=canonical.url if canonical else None, **base)


def version_fields(revisit: Revisit | None) -> dict[str, Any]:
    """The verdict fields of a re-fetch (none for a first fetch)."""
    if revisit is None:
        return {}
    return {"version": revisit.version, "previous_distance": revisit.distance,
            "previous_score": None if revisit.score is None else round(revisit.score, 4),
            "since_last_fetch": revisit.since}



def counters(store: Store, own: PageRecord | None, now: float, revisit: Revisit | None, *,
         min_interval: float = MIN_REVISIT, max_interval: float = MAX_REVISIT) -> dict[str, Any]:
    """The fetch counters and schedule of a page after this fetch: its stored history
    (:meth:`Store.versions`) and this fetch through :func:`neardup.crawl.schedule`."""
    if own is None or revisit is None or own.id is None:
        return {"fetches": 1, "change_count": 0, "last_changed_at": None}
    changed = revisit.version == "changed"
    rows = store.versions(own.id, HISTORY_LIMIT - 1)
    rate, next_at = schedule([*(r.fetched_at for r in rows), now], [*(r.changed for r in rows), changed],
                             min_interval=min_interval, max_interval=max_interval)
    return {"fetches": own.fetches + 1, "change_count": own.change_count + int(changed),
            "last_changed_at": now if changed else own.last_changed_at, "change_rate": rate,
            "next_fetch": next_at}


def url_history(store: Store, key: str, bits: int) -> UrlHistory | None:
    """The fetch history of the URL stored under ``key`` (None when it is not stored); a
    change rate a store written before the checks holds as infinite reads as None."""
    with store.reading():
        own = store.page_by_url(key)
        if own is None or own.id is None:
            return None
        versions = store.versions(own.id)
    return UrlHistory(url=own.url, fetched_url=own.fetched_url, first_seen=own.first_seen,
                      fetched_at=own.fetched_at, fetches=own.fetches, change_count=own.change_count,
                      last_changed_at=own.last_changed_at, change_rate=finite_or_none(own.change_rate),
                      next_fetch=own.next_fetch,
                      versions=tuple(v.to_dict(bits) for v in versions))

"""Before the fetch: recrawl scheduling (how often a URL's content changes, and when to fetch
it again) and the crawl signals of a store (:class:`CrawlSignals`: learned URL rules, per-host
duplicate and change figures, :meth:`CrawlSignals.should_fetch`).

A crawler sees a page only when it fetches it: between two fetches the content may have
changed once or many times, and "unchanged since the last fetch" says only that it did not
change *or changed back*. :func:`change_rate` estimates the rate of a Poisson change process
from such observations with the maximum-likelihood estimator of Cho and Garcia-Molina for
irregular access ("Estimating frequency of change", ACM TOIT 3(3), 2003, section 5): with
the intervals ``t_i`` between consecutive fetches, the rate ``λ`` solves

    sum over changed intervals of  t_i / (exp(λ t_i) - 1)  =  sum over unchanged intervals of  t_j

(the left side falls from infinity to 0 as ``λ`` grows, so the root is unique). When every
interval saw a change the estimator diverges; then their bias-reduced estimator for regular
access is used with the mean interval, ``λ = ln((n + 0.5) / 0.5) / mean(t)``. A page never
seen changing has rate 0. Intervals shorter than :data:`MIN_CHANGE_INTERVAL` (one second)
count as that long: no crawler tells changes apart faster, and the estimate stays finite
(at most ``ln(2n + 1)`` changes a second), whatever times a store holds.

:func:`next_fetch` turns the rate into a time: the expected wait for the next change,
``1 / λ`` (a Poisson process has no memory), within ``[min_interval, max_interval]``; a page
never seen changing waits as long again as it has been seen unchanged (the wait doubles with
every unchanged fetch), within the same bounds.

>>> round(change_rate([3600.0] * 10, [True, False] * 5) * 3600, 3)   # changed on half the hourly fetches
0.693
>>> change_rate([60.0, 60.0], [False, False])
0.0
>>> change_rate([], []) is None
True
>>> change_rate([5e-324], [True]) == math.log(3)                      # a sub-second interval counts as 1 s
True
>>> next_fetch(1000.0, 1 / 7200, observed=7200.0)                      # every two hours
8200.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the shortest wait :func:`next_fetch` plans (seconds)
MIN_REVISIT = 60.0
#: the longest wait :func:`next_fetch` plans (seconds): 30 days
MAX_REVISIT = 30 * 86400.0
#: the shortest interval between two fetches :func:`change_rate` counts (seconds): a shorter
#: one counts as this long, so that every estimate is finite
MIN_CHANGE_INTERVAL = 1.0


def change_rate(intervals: Sequence[float], changed: Sequence[bool]) -> float | None:
    """Estimated changes per second from the ``intervals`` (seconds) between consecutive
    fetches and whether each fetch found the content ``changed``; None without an interval.
    Intervals of 0 or less (two fetches at the same time, or out of order) and infinite ones
    are left out; shorter ones than :data:`MIN_CHANGE_INTERVAL` count as that long. Always
    finite."""
    pairs = [(max(float(t), MIN_CHANGE_INTERVAL), bool(c)) for t, c in zip(intervals, changed)
             if t > 0 and math.isfinite(t)]
    if not pairs:
        return None
    changed_t = [t for t, c in pairs if c]
    unchanged_total = sum(t for t, c in pairs if not c)
    if not changed_t:
        return 0.0
    if unchanged_total <= 0.0:
        n = len(pairs)
        return math.log((n + 0.5) / 0.5) / (sum(changed_t) / n)

    def excess(rate: float) -> float:  # decreasing in rate; the root is the estimate
        # rate >= 1e-12 and t >= 1 s: expm1 > 0 (no division by zero)
        return sum(t / math.expm1(min(max(rate * t, 1e-300), 700.0)) for t in changed_t) - unchanged_total

    lo, hi = 1e-12, 1.0
    while excess(hi) > 0.0 and hi < 1e12:
        lo, hi = hi, hi * 16.0
    for _ in range(100):  # bisection in log space: 100 halvings of a ratio below 10^24
        mid = math.sqrt(lo * hi)
        if excess(mid) > 0.0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.0 + 1e-9:
            break
    return math.sqrt(lo * hi)


def next_fetch(last_fetch: float, rate: float | None, *, observed: float,
               min_interval: float = MIN_REVISIT, max_interval: float = MAX_REVISIT) -> float | None:
    """When to fetch again: ``last_fetch`` plus the expected wait for the next change
    (``1 / rate``); for a page never seen changing (``rate`` 0), plus ``observed``, the
    time it has been seen unchanged; both within ``[min_interval, max_interval]``. None
    when nothing is known yet (``rate`` None: fetched once)."""
    if rate is None:
        return None
    wait = observed if rate <= 0.0 else 1.0 / rate
    return last_fetch + min(max(wait, min_interval), max_interval)


def schedule(times: Sequence[float], changed: Sequence[bool | None], *, min_interval: float = MIN_REVISIT,
             max_interval: float = MAX_REVISIT) -> tuple[float | None, float | None]:
    """``(change_rate, next_fetch)`` of a URL from its fetch history: fetch ``times`` (oldest
    first) and whether each fetch found the content ``changed`` since the one before (the
    first's flag is not used).

    >>> schedule([0.0, 3600.0, 7200.0], [None, False, False])
    (0.0, 14400.0)
    """
    if len(times) < 2:
        return None, None
    intervals = [b - a for a, b in zip(times, times[1:])]
    flags = [bool(c) for c in changed[1:]]
    rate = change_rate(intervals, flags)
    observed = max(0.0, times[-1] - times[0])
    return rate, next_fetch(times[-1], rate, observed=observed, min_interval=min_interval,
                            max_interval=max_interval)


@dataclass(frozen=True)
class UrlHistory:
    """A stored URL's fetches and schedule (:meth:`neardup.Detector.history`): the URL's
    key and the URL as last fetched, its counters, the estimated ``change_rate`` (changes
    per second) and ``next_fetch``, and its last fetches (``versions``, oldest first, at
    most :data:`~neardup.store.base.HISTORY_LIMIT`): each with its time, digest, SimHash,
    whether it ``changed`` since the fetch before, and the distance and sketch similarity
    to it."""

    url: str
    fetched_url: str | None
    first_seen: float
    fetched_at: float
    fetches: int
    change_count: int
    last_changed_at: float | None
    change_rate: float | None
    next_fetch: float | None
    versions: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["versions"] = [dict(v) for v in self.versions]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UrlHistory:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["versions"] = tuple(dict(v) for v in values.get("versions") or ())
        return cls(**values)



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
seen changing has rate 0.

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
>>> next_fetch(1000.0, 1 / 7200, observed=7200.0)                      # every two hours
8200.0
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from neardup.clusters import Clusters
from neardup.errors import ConfigError
from neardup.model import DEFAULT_TRAP_MEMBERS, MIN_BUDGET_FACTOR, STATUSES, FetchDecision, seconds
from neardup.storeapi import Store
from neardup.templates import HostStructure
from neardup.urlrules import DEFAULT_MIN_SUPPORT, Rule, RuleLearner
from neardup.urls import DEFAULT_URL_CONFIG, UrlConfig, host_of, normalize_url

#: hosts whose template state :class:`CrawlSignals` keeps in memory (least recently used go)
MAX_HOST_STATES = 10_000
#: the shortest wait :func:`next_fetch` plans (seconds)
MIN_REVISIT = 60.0
#: the longest wait :func:`next_fetch` plans (seconds): 30 days
MAX_REVISIT = 30 * 86400.0


def change_rate(intervals: Sequence[float], changed: Sequence[bool]) -> float | None:
    """Estimated changes per second from the ``intervals`` (seconds) between consecutive
    fetches and whether each fetch found the content ``changed``; None without an interval.
    Intervals of 0 or less (two fetches at the same time, or out of order) are left out."""
    pairs = [(float(t), bool(c)) for t, c in zip(intervals, changed) if t > 0 and math.isfinite(t)]
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
        return sum(t / math.expm1(min(rate * t, 700.0)) for t in changed_t) - unchanged_total

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
    most :data:`~neardup.storeapi.HISTORY_LIMIT`): each with its time, digest, SimHash,
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


class CrawlSignals:
    """What a store says to a crawler before the fetch: learned URL rules
    (:mod:`neardup.urlrules`), per-host duplicate and change signals, and whether to fetch a
    URL (:meth:`should_fetch`). The Detector keeps it current as it writes
    (:meth:`observe`, :meth:`forget`)."""

    def __init__(self, store: Store, clusters: Clusters, urls: UrlConfig = DEFAULT_URL_CONFIG) -> None:
        self.store = store
        self.clusters = clusters
        self.urls = urls
        #: support a learned URL rule needs before :meth:`should_fetch` uses it
        self.rule_min_support = DEFAULT_MIN_SUPPORT
        self._learner: RuleLearner | None = None  # built from the store at first use
        #: host -> its templates and soft-404 texts (neardup.templates), built from the store
        #: at the host's first use, the most recently used :data:`MAX_HOST_STATES` kept
        self._structures: OrderedDict[str, HostStructure] = OrderedDict()

    def observe(self, url: str, cluster_id: int | None) -> None:
        """A page was written at ``url`` in ``cluster_id`` (None: empty)."""
        if self._learner is not None:
            self._learner.observe(url, cluster_id)

    def structure_state(self, host: str) -> HostStructure:
        """The host's template state (:class:`neardup.templates.HostStructure`), replayed from
        its stored pages in fetch order at first use, then kept current by
        :meth:`observe_structure`."""
        state = self._structures.get(host)
        if state is None:
            state = HostStructure()
            for row in self.store.structure_rows(host):
                state.observe(row.fetched_at, row.structure, row.digest, row.length, row.url)
            self._structures[host] = state
            while len(self._structures) > MAX_HOST_STATES:
                self._structures.popitem(last=False)
        self._structures.move_to_end(host)
        return state

    def observe_structure(self, url: str, fetched_at: float, structure: int | None, digest: str,
                          length: int) -> str | None:
        """A page is being written: its template and soft-404 flag (``soft-404``,
        ``template-only`` or None; :func:`neardup.templates.soft_404s`). Pages without a
        structure (plain text, spec versions 1 and 2) are not observed."""
        if structure is None:
            return None
        return self.structure_state(host_of(url)).observe(fetched_at, structure, digest, length, url).flag

    def forget(self, url: str) -> None:
        """The page at ``url`` was expired."""
        if self._learner is not None:
            self._learner.forget(url)

    @contextmanager
    def learning(self) -> Iterator[None]:
        """Around a write: a write that fails (rolled back) leaves the learner's
        observations unreliable, so it is rebuilt from the store at its next use."""
        try:
            yield
        except BaseException:
            self._learner = None
            self._structures.clear()
            raise

    def learner(self) -> RuleLearner:
        if self._learner is None or self._learner.min_support != self.rule_min_support:
            learner = RuleLearner(self.rule_min_support)
            with self.store.reading():
                for rec in self.store.iter_pages():
                    if rec.status != "empty" and rec.cluster_id is not None:
                        learner.observe(rec.url, rec.cluster_id)
            self._learner = learner
        return self._learner

    def learn_rules(self) -> list[Rule]:
        """Re-learn the URL rules of every host from the whole store (one pass over the
        pages; pages written by other processes since the first use are then seen) and
        return them. This detector's own writes keep them current without it."""
        self._learner = None
        return self.learner().rules()

    def rules(self, host: str | None = None) -> list[Rule]:
        """The learned URL rules (:mod:`neardup.urlrules`) of ``host``, or of every host:
        each with its ``support`` (merges of different URLs with one content), an example
        pair and ``describe()``. A rule is used only with at least :attr:`rule_min_support`
        merges and no counter-example, and is dropped as soon as a fetch contradicts it."""
        return self.learner().rules(host)

    def should_fetch(self, url: str, *, max_age: float | None = None,
                     host_max_duplicate_rate: float | None = None, host_min_pages: int = 20) -> FetchDecision:
        """Whether to fetch ``url``, and why: :meth:`neardup.Detector.should_fetch`."""
        url = normalize_url(url, self.urls)
        max_age = seconds(max_age, "max_age", optional=True)
        if host_max_duplicate_rate is not None:
            rate = seconds(host_max_duplicate_rate, "host_max_duplicate_rate")
            if rate is None or not 0.0 <= rate <= 1.0:
                raise ConfigError(f"host_max_duplicate_rate must be in [0, 1], got {host_max_duplicate_rate!r}")
        learner = self.learner()
        with self.store.reading():
            own = self.store.page_by_url(url)
            if own is not None and own.status != "empty" and own.cluster_id is not None:
                info = self.clusters.info(own.cluster_id)
                if info is not None and info["size"] >= 2 and info["canonical_id"] not in (None, own.id):
                    return FetchDecision(url, False, "known-duplicate", known_url=url,
                                         canonical_url=info["canonical_url"], cluster_id=own.cluster_id,
                                         fetched_at=own.fetched_at)
            if own is not None:
                now = time.time()
                if max_age is not None:
                    fresh = now - own.fetched_at < max_age
                else:
                    fresh = own.next_fetch is not None and now < own.next_fetch
                return FetchDecision(url, not fresh, "fresh" if fresh else "known", known_url=url,
                                     canonical_url=url if own.cluster_id is not None else None,
                                     cluster_id=own.cluster_id, fetched_at=own.fetched_at,
                                     next_fetch=own.next_fetch, change_rate=own.change_rate)
            found = learner.match(url)
            if found is not None:
                info = self.clusters.info(found.cluster_id)
                return FetchDecision(url, False, "rule", known_url=found.known_url,
                                     canonical_url=info["canonical_url"] if info else None,
                                     cluster_id=found.cluster_id, rules=found.rules)
            if host_max_duplicate_rate is not None:
                counts = self.store.host_stats(host_of(url))
                pages = sum(counts.values())
                rate = (counts.get("exact", 0) + counts.get("near", 0)) / pages if pages else 0.0
                if pages >= host_min_pages and rate >= host_max_duplicate_rate:
                    return FetchDecision(url, False, "host-budget", host_duplicate_rate=round(rate, 4))
        return FetchDecision(url, True, "unknown")

    def hosts(self, top: int | None = None, *, window: float | None = None, at: float | None = None,
              sort: str = "duplicate_rate", trap_members: int = DEFAULT_TRAP_MEMBERS,
              host: str | None = None) -> list[dict[str, Any]]:
        """Per-host duplicate and change signals: :meth:`neardup.Detector.hosts`."""
        if sort not in ("duplicate_rate", "duplicates", "pages", "distinct_contents"):
            raise ConfigError(f"unknown sort {sort!r}; choose duplicate_rate, duplicates, pages or distinct_contents")
        at, window = seconds(at, "at", optional=True), seconds(window, "window", optional=True)
        if window is not None and window < 0:
            raise ConfigError(f"window must be >= 0 seconds, got {window}")
        now = time.time() if at is None else float(at)
        since = None if window is None else now - float(window)
        wanted = host.lower() if host is not None else None
        with self.store.reading():
            rows: list[dict[str, Any]] = []
            for h in self.store.host_figures(wanted, since):
                pages, counts = h.pages, h.counts
                dups = counts.get("exact", 0) + counts.get("near", 0)
                rows.append({"host": h.host, "pages": pages,
                             **{s: counts.get(s, 0) for s in STATUSES if s != "error"},
                             "duplicates": dups, "duplicate_rate": round(dups / pages, 4) if pages else 0.0,
                             "distinct_contents": h.distinct_contents, "refetched": h.refetched,
                             "changed_pages": h.changed_pages,
                             "changes_per_day": round(h.changes * 86400.0 / h.watched, 4) if h.watched else None})
            rows.sort(key=lambda r: (-r[sort], r["host"]))
            if top is not None:
                rows = rows[:max(0, int(top))]
            largest_of = self.store.largest_host_clusters([r["host"] for r in rows], since)
            for r in rows:
                largest: dict[str, Any] | None = None
                if r["host"] in largest_of:
                    cid, n = largest_of[r["host"]]
                    info = self.clusters.info(cid, at=now) or {}
                    largest = {"id": cid, "urls_from_host": n, "size": info.get("size"),
                               "joins_per_hour": info.get("joins_per_hour")}
                r["largest_cluster"] = largest
                r["trap"] = largest is not None and largest["urls_from_host"] >= trap_members
                contents = r["pages"] - r["empty"]  # an empty page is no duplicate: not waste
                share = r["distinct_contents"] / contents if contents > 0 else 1.0
                r["budget_factor"] = round(max(MIN_BUDGET_FACTOR, min(1.0, share)), 4)
                summary = self.structure_state(r["host"]).summary()
                r.update({name: summary[name] for name in ("templates", "redesigns", "soft_404s", "template_only")})
        return rows

    def host(self, name: str, *, window: float | None = None, at: float | None = None,
             trap_members: int = DEFAULT_TRAP_MEMBERS) -> dict[str, Any] | None:
        """:meth:`hosts` for one host, with its learned URL rules: :meth:`neardup.Detector.host`."""
        rows = self.hosts(window=window, at=at, trap_members=trap_members, host=name)
        if not rows:
            return None
        row = rows[0]
        row["rules"] = [r.to_dict() for r in self.rules(row["host"])]
        return row

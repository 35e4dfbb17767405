"""Per-host crawl signals: duplicate rates, traps and budget factors."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from neardup.crawl.noise import META_PREFIX, HostNoise
from neardup.crawl.schedule import MIN_CHANGE_INTERVAL
from neardup.crawl.series import SeriesTracker
from neardup.crawl.templates import HostStructure
from neardup.crawl.urlrules import DEFAULT_MIN_SUPPORT, Rule, RuleLearner
from neardup.errors import ConfigError, URLError
from neardup.model import (
    DEFAULT_HOST_MIN_PAGES,
    DEFAULT_TRAP_MEMBERS,
    DUPLICATE_STATUSES,
    MIN_BUDGET_FACTOR,
    MIN_HOST_PAGES,
    MIN_TRAP_MEMBERS,
    STATUSES,
    FetchDecision,
    checked_count,
    checked_time,
    duration,
    finite_or_none,
    seconds,
)
from neardup.store.base import Store
from neardup.urls import DEFAULT_URL_CONFIG, UrlConfig, normalize_url, origin_of


class ClusterInfo(Protocol):
    """What the signals read of the clusters: one cluster's size, canonical and growth
    (:meth:`neardup.detector.clusters.Clusters.info`)."""

    def info(self, cluster_id: int, at: float | None = None) -> dict[str, Any] | None: ...


#: the most URLs one :meth:`CrawlSignals.due` call answers
MAX_DUE = 100_000
#: hosts whose template state :class:`CrawlSignals` keeps in memory (least recently used go)
MAX_HOST_STATES = 10_000


def host_key(name: str) -> str:
    """A host or origin name as the store keys it (:func:`neardup.urls.origin_of` of a
    normalised URL, :func:`neardup.urls.normalize_url`: lower case, IDNA punycode, no trailing
    dot, the port where it is not the default), so that ``bücher.example``,
    ``BÜCHER.EXAMPLE`` and ``xn--bcher-kva.example`` name one host, and
    ``127.0.0.1:8701`` its own origin; a name that is none comes back lower-cased (it names
    no stored page).

    >>> host_key("BÜCHER.Example"), host_key("a.example"), host_key("::1"), host_key("a/b")
    ('xn--bcher-kva.example', 'a.example', '::1', 'a/b')
    >>> host_key("A.example:8080"), host_key("a.example:80"), host_key("[::1]:8701")
    ('a.example:8080', 'a.example', '[::1]:8701')
    """
    low = name.lower()
    if not name or any(c in name for c in "/?#@\\"):
        return low
    # host, host:port, [IPv6]:port or [IPv6] as they are; a bare IPv6 address bracketed
    netloc = f"[{name}]" if not name.startswith("[") and name.count(":") >= 2 else name
    try:
        return origin_of(normalize_url(f"http://{netloc}/")) or low
    except URLError:
        return low


class CrawlSignals:
    """What a store says to a crawler before the fetch: learned URL rules
    (:mod:`neardup.crawl.urlrules`), per-host duplicate and change signals, and whether to fetch a
    URL (:meth:`should_fetch`). The Detector keeps it current as it writes
    (:meth:`observe`, :meth:`forget`)."""

    def __init__(self, store: Store, clusters: ClusterInfo, urls: UrlConfig = DEFAULT_URL_CONFIG) -> None:
        self.store = store
        self.clusters = clusters
        self.urls = urls
        #: support a learned URL rule needs before :meth:`should_fetch` uses it
        self.rule_min_support = DEFAULT_MIN_SUPPORT
        self._learner: RuleLearner | None = None  # built from the store at first use
        self._series: SeriesTracker | None = None  # numbered series, built from the store at first use
        #: host -> its templates and soft-404 texts (neardup.crawl.templates), built from the store
        #: at the host's first use, the most recently used :data:`MAX_HOST_STATES` kept
        self._structures: OrderedDict[str, HostStructure] = OrderedDict()
        #: host -> its per-fetch noise (neardup.crawl.noise), read from the store's metadata at first use
        self._noise: OrderedDict[str, HostNoise] = OrderedDict()

    def observe(self, url: str, cluster_id: int | None, simhash: int | None = None, first: bool = False) -> None:
        """A page was written at ``url`` in ``cluster_id`` (None: empty) with ``simhash``
        (None: empty), for the first time at that URL when ``first``."""
        if self._learner is not None:
            self._learner.observe(url, cluster_id)
        if self._series is not None and first:
            self._series.observe(url, simhash if cluster_id is not None else None)

    def series(self) -> SeriesTracker:
        """The numbered series of the store's pages (:mod:`neardup.crawl.series`), built from
        the store at first use (in id order: the order they were stored), then kept current
        by :meth:`observe`."""
        if self._series is None:
            tracker = SeriesTracker()
            with self.store.reading():
                for rec in self.store.iter_pages():  # streamed, in id order
                    tracker.observe(rec.url, rec.simhash if rec.status != "empty" else None)
            self._series = tracker
        return self._series

    def structure_state(self, host: str) -> HostStructure:
        """The host's template state (:class:`neardup.crawl.templates.HostStructure`), replayed from
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

    def noise_state(self, host: str) -> HostNoise:
        """The host's per-fetch noise (:class:`neardup.crawl.noise.HostNoise`), read from the
        store's metadata at first use, the most recently used :data:`MAX_HOST_STATES` kept."""
        state = self._noise.get(host)
        if state is None:
            state = HostNoise.from_meta(self.store.get_meta(META_PREFIX + host))
            self._noise[host] = state
            while len(self._noise) > MAX_HOST_STATES:
                self._noise.popitem(last=False)
        self._noise.move_to_end(host)
        return state

    def comparable_digest(self, url: str, text: str, previous: str | None) -> str | None:
        """The digest of a page's main ``text`` to compare with its stored version's stable
        record ``previous``: ``previous`` itself when the text holds the same content (under
        the noise templates the stored version left out, or for a version stored with its
        lines, under every noise template known now: :meth:`HostNoise.same_content`), else the
        digest under the same templates (so it differs); None without text or version."""
        if not text.strip() or not previous:
            return None
        state = self.noise_state(origin_of(url))
        upto = previous.split(":", 1)[0]
        if not upto.isdigit():
            return None
        comparable = state.stable_digest(text, int(upto))
        if comparable == ":".join(previous.split(":", 2)[:2]) or state.same_content(text, previous):
            return previous
        return comparable

    def stable_record(self, url: str, text: str, *, learn: bool, content: int | None = None) -> str | None:
        """What a page's version stores of its main ``text`` without its host's per-fetch
        noise (:meth:`neardup.crawl.noise.HostNoise.stable_record`; None for no text: a
        fingerprint given without it). With ``learn``, the page's lines are counted first (and
        what was learned is stored); ``content``: the key its copies share (its cluster: a
        copy's lines are its original's; None: its own, :meth:`HostNoise.learn`)."""
        if not text.strip():
            return None
        host = origin_of(url)
        state = self.noise_state(host)
        if learn and state.learn(url, text, content):
            self.store.set_meta(META_PREFIX + host, state.to_meta())
        return state.stable_record(text)

    def observe_structure(self, url: str, fetched_at: float, structure: int | None, digest: str,
                          length: int) -> str | None:
        """A page is being written: its template and soft-404 flag (``soft-404``,
        ``template-only`` or None; :func:`neardup.crawl.templates.soft_404s`). Pages without a
        structure (plain text, spec versions 1 and 2) are not observed."""
        if structure is None:
            return None
        return self.structure_state(origin_of(url)).observe(fetched_at, structure, digest, length, url).flag

    def forget(self, url: str) -> None:
        """The page at ``url`` was expired."""
        if self._learner is not None:
            self._learner.forget(url)
        self._series = None  # rebuilt at its next use

    @contextmanager
    def learning(self) -> Iterator[None]:
        """Around a write: a write that fails (rolled back) leaves the learner's
        observations unreliable, so it is rebuilt from the store at its next use."""
        try:
            yield
        except BaseException:
            self._learner = None
            self._series = None
            self._structures.clear()
            self._noise.clear()
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
        """The learned URL rules (:mod:`neardup.crawl.urlrules`) of ``host``, or of every host:
        each with its ``support`` (merges of different URLs with one content), an example
        pair and ``describe()``. A rule is used only with at least :attr:`rule_min_support`
        merges and no counter-example, and is dropped as soon as a fetch contradicts it.
        ``host`` is normalised as stored keys are (:func:`host_key`)."""
        return self.learner().rules(None if host is None else host_key(host))

    def should_fetch(self, url: str, *, max_age: float | None = None,
                     host_max_duplicate_rate: float | None = None,
                     host_min_pages: int = DEFAULT_HOST_MIN_PAGES) -> FetchDecision:
        """Whether to fetch ``url``, and why: :meth:`neardup.Detector.should_fetch`. The
        answer's ``url`` is ``url`` as given, its ``key`` the normalised one."""
        given, url = url, normalize_url(url, self.urls)
        max_age = duration(max_age, "max_age", optional=True)
        host_min_pages = checked_count(host_min_pages, "host_min_pages", MIN_HOST_PAGES)
        if host_max_duplicate_rate is not None:
            rate = seconds(host_max_duplicate_rate, "host_max_duplicate_rate")
            if rate is None or not 0.0 <= rate <= 1.0:
                raise ConfigError(f"host_max_duplicate_rate must be in [0, 1], got {host_max_duplicate_rate!r}")
        learner = self.learner()
        with self.store.reading():
            own = self.store.page_by_url(url)
            # a duplicate by its own decision only: a cluster's original (``new``) is fetched again
            # even where rel=canonical moved the canonical to one of its copies (the recrawl from
            # the seed reaches what the first crawl kept); the skip names the URL to fetch instead
            if own is not None and own.status in DUPLICATE_STATUSES and own.cluster_id is not None:
                info = self.clusters.info(own.cluster_id)
                if info is not None and info["size"] >= 2 and info["canonical_id"] not in (None, own.id):
                    return FetchDecision(given, False, "known-duplicate", known_url=url,
                                         canonical_url=info["canonical_url"], cluster_id=own.cluster_id,
                                         fetched_at=own.fetched_at, key=url)
            if own is not None:
                now = time.time()
                if max_age is not None:
                    fresh = now - own.fetched_at < max_age
                else:
                    fresh = own.next_fetch is not None and now < own.next_fetch
                return FetchDecision(given, not fresh, "fresh" if fresh else "known", known_url=url,
                                     canonical_url=url if own.cluster_id is not None else None,
                                     cluster_id=own.cluster_id, fetched_at=own.fetched_at,
                                     next_fetch=own.next_fetch, change_rate=finite_or_none(own.change_rate), key=url)
            found = learner.match(url)
            if found is not None:
                info = self.clusters.info(found.cluster_id)
                return FetchDecision(given, False, "rule", known_url=found.known_url,
                                     canonical_url=info["canonical_url"] if info else None,
                                     cluster_id=found.cluster_id, rules=found.rules, key=url)
            trap = self.series().trap(url)
            if trap is not None:  # the explore budget of a numbered trap is spent
                return FetchDecision(given, False, "series", rules=(f"series:{trap.pattern}",), key=url)
            if host_max_duplicate_rate is not None:
                counts = self.store.host_stats(origin_of(url))
                pages = sum(counts.values())
                rate = (counts.get("exact", 0) + counts.get("near", 0)) / pages if pages else 0.0
                if pages >= host_min_pages and rate >= host_max_duplicate_rate:
                    return FetchDecision(given, False, "host-budget", host_duplicate_rate=round(rate, 4), key=url)
        return FetchDecision(given, True, "unknown", key=url)

    def due(self, at: float | None = None, *, limit: int = 1000, after: str | None = None) -> list[str]:
        """The stored URLs due for a fetch: :meth:`neardup.Detector.due`."""
        when = time.time() if at is None else checked_time(at, "at")
        limit = checked_count(limit, "limit", 1)
        if limit > MAX_DUE:
            raise ConfigError(f"limit must be at most {MAX_DUE}, got {limit}")
        if after is not None and not isinstance(after, str):
            raise ConfigError(f"after must be a URL (a string), got {after!r}")
        with self.store.reading():
            return self.store.due_urls(when, limit, after)

    def hosts(self, top: int | None = None, *, window: float | None = None, at: float | None = None,
              sort: str = "duplicate_rate", trap_members: int = DEFAULT_TRAP_MEMBERS,
              host: str | None = None) -> list[dict[str, Any]]:
        """Per-host duplicate and change signals: :meth:`neardup.Detector.hosts`."""
        if sort not in ("duplicate_rate", "duplicates", "pages", "distinct_contents"):
            raise ConfigError(f"unknown sort {sort!r}; choose duplicate_rate, duplicates, pages or distinct_contents")
        window = duration(window, "window", optional=True)
        if window == 0:  # as the CLI's --window: the last 0 seconds hold no fetch
            raise ConfigError("window must be > 0 seconds, got 0")
        trap_members = checked_count(trap_members, "trap_members", MIN_TRAP_MEMBERS)
        now = time.time() if at is None else checked_time(at, "at")
        since = None if window is None else now - float(window)
        wanted = host_key(host) if host is not None else None
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
                             "changes_per_day": _per_day(h.changes, h.watched)})
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
                traps = self.series().traps(r["host"])
                r["series_traps"] = [t.to_dict() for t in traps]
                r["trap"] = bool(traps) or (largest is not None and largest["urls_from_host"] >= trap_members)
                contents = r["pages"] - r["empty"]  # an empty page is no duplicate: not waste
                # a numbered trap's members are distinct contents but one page under many numbers
                distinct = r["distinct_contents"] - sum(max(0, t.similar - 1) for t in traps)
                share = max(0, distinct) / contents if contents > 0 else 1.0
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


def _per_day(changes: int, watched: float) -> float | None:
    """A host's pooled change rate, changes per day watched (None before a re-fetch); finite:
    watching counts as at least :data:`~neardup.crawl.schedule.MIN_CHANGE_INTERVAL`."""
    if not watched > 0:
        return None
    return finite_or_none(round(changes * 86400.0 / max(watched, MIN_CHANGE_INTERVAL), 4))

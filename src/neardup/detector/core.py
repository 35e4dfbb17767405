"""The Detector: fingerprint a page, find its nearest stored copy, decide, remember.

>>> from neardup import Detector
>>> d = Detector()                                    # in-memory store; Detector.open(path) for SQLite
>>> text = " ".join(f"word{i}" for i in range(400))
>>> d.add("https://a.example/1", text).status
'new'
>>> d.add("https://b.example/1", text).status        # same normalised content
'exact'
>>> v = d.check("https://c.example/1", text.replace("word7 ", "changed "))
>>> v.status, v.distance <= 3, v.canonical_url
('near', True, 'https://a.example/1')

Decision rule (:func:`neardup.matching.pair_rule`, one rule on every path): ``empty`` below
``min_tokens`` tokens of main content, ``exact`` for a stored page with the same digest, ``near``
for the nearest stored page within Hamming distance ``k`` (or sharing a sketch band) that the
sketch verifies, otherwise ``new``. A match joins its match's cluster, whose canonical follows
the canonical policy (:mod:`neardup.canonical`); re-adding a URL is a new version of it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from neardup.canonical import DEFAULT_POLICY, CanonicalPolicy, Member, policy_from_spec
from neardup.crawl.schedule import MAX_REVISIT, MIN_REVISIT, UrlHistory
from neardup.crawl.signals import CrawlSignals
from neardup.crawl.urlrules import Rule
from neardup.detector.clusters import Clusters, member_of
from neardup.detector.decide import Decision, decide
from neardup.detector.expiry import expire_before
from neardup.detector.mirror import DEFAULT_KEEP_CHANGES, IndexMirror
from neardup.detector.revisits import Revisiting, foreign_revisit, record_revisit
from neardup.detector.settings import DEFAULT_SETTINGS, DetectorSettings, resolve_config
from neardup.detector.thresholds import read as read_thresholds
from neardup.detector.versions import compare_versions, counters, kept_verdict, url_history, version_fields
from neardup.errors import ConfigError, NeardupError, NotStoredError, SpecMismatchError, StoreError
from neardup.fingerprint.core import Fingerprint, FingerprintConfig, fingerprint, text_fields_encodable
from neardup.index.base import HammingIndex
from neardup.index.lsh import MinHashLSH
from neardup.model import (
    DEFAULT_THRESHOLD,
    DEFAULT_TRAP_MEMBERS,
    DEFAULT_VERIFY,
    STATUSES,
    FetchDecision,
    Page,
    Verdict,
    checked_id,
    default_k,
    duration,
    priority_value,
    timestamp,
)
from neardup.store.backends import open_store
from neardup.store.base import PageRecord, Store, VersionRow
from neardup.store.sqlite import SQLiteStore
from neardup.urls import DEFAULT_URL_CONFIG, UrlConfig, host_of, normalize_url, origin_of, validate_url

__all__ = ["PREFETCH", "Detector"]

#: items of :meth:`Detector.add_fingerprints` whose stored rows are read ahead together
PREFETCH = 500


class Detector:
    """Near-duplicate detector over a store and a Hamming index.

    store: a :class:`~neardup.store.sqlite.SQLiteStore` (default: in memory) or a
        :class:`~neardup.store.postgres.PostgresStore`.
    k: Hamming threshold, ``distance <= k`` makes a candidate, for every page. Default: the
        thresholds ``neardup tune --apply`` stored in the store (meta ``thresholds``,
        :func:`neardup.tune.apply`): each page is decided with its host's ``k`` and
        ``verify`` when the settings list the host, else with the stored top-level ones
        (:func:`neardup.detector.thresholds.thresholds_for`; :attr:`host_thresholds`); without stored
        thresholds, the measured value for the store's spec version,
        :func:`~neardup.model.default_k` (3 for new stores with the sketch bands, 12 without
        them, :data:`DEFAULT_K_BY_VERSION`). Giving ``k`` uses ``k`` and
        ``verify`` for every page.
    verify: a SimHash candidate becomes ``near`` only when the sketches estimate a word
        3-shingle Jaccard similarity of at least this (:mod:`neardup.sketch`; default
        :data:`DEFAULT_VERIFY`); None accepts every candidate within k. Pages without a
        sketch (spec version 1) are never verified.
    config: fingerprint settings; default: the store's own, else :data:`DEFAULT_CONFIG`.
    canonical: canonical policy spec, e.g. ``"rel-canonical,first-seen"`` or ``"shortest-url"``.
    method: ``simhash`` (default), ``minhash`` (LSH on MinHash signatures, Jaccard estimate
        ``>= threshold``) or ``both`` (either test; the match with the best Jaccard estimate
        wins). MinHash needs signatures: a new store gets ``MinHashConfig()`` in its config.
    containment: also report *partial* copies whose share found in a longer stored page is
        at least this (found when the excerpt's Jaccard with that page is at least 0.3).
    index: a :class:`~neardup.index.base.HammingIndex`. Default: the permuted-table index
        (:class:`~neardup.index.permuted.PermutedIndex`, exact) for 64-bit fingerprints, brute
        force for 128-bit ones. For a file store it is saved next to it (``<db>.index/``) on
        :meth:`close` and memory-mapped at the next open when it still matches the store;
        otherwise it is rebuilt from the store. The index (and the MinHash LSH) are kept in
        step with the store by :class:`~neardup.detector.mirror.IndexMirror` (:attr:`mirror`).
    urls: how a URL becomes its key in the store (:class:`~neardup.urls.UrlConfig`: tracking
        parameters dropped, query order; default :data:`~neardup.urls.DEFAULT_URL_CONFIG`):
        every URL is normalised (:func:`~neardup.urls.normalize_url`) before it is stored or
        looked up, the URL as fetched kept beside it. Kept in the store: a store whose keys
        were made with other settings refuses different ones (:class:`ConfigError`).
    settings: all of the decision settings above in one validated value
        (:class:`~neardup.detector.settings.DetectorSettings`, what the CLI, the service and the Scrapy
        middleware build), instead of the keyword arguments.
    keep_changes: how many entries of the store's change log writers keep (older ones are
        pruned; a process further behind rebuilds its index from the pages); None: never
        prune.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        k: int | None = None,
        config: FingerprintConfig | None = None,
        canonical: str | CanonicalPolicy | None = None,
        index: HammingIndex | None = None,
        method: str = "simhash",
        threshold: float = DEFAULT_THRESHOLD,
        containment: float | None = None,
        verify: float | None = DEFAULT_VERIFY,
        keep_changes: int | None = DEFAULT_KEEP_CHANGES,
        urls: UrlConfig | None = None,
        settings: DetectorSettings | None = None,
    ) -> None:
        policy_spec = canonical.spec if isinstance(canonical, CanonicalPolicy) else canonical
        given = (k, verify, method, threshold, containment, policy_spec, keep_changes)
        if settings is None:  # validated in one place
            settings = DetectorSettings(k=k, verify=verify, method=method, threshold=threshold,
                                        containment=containment, canonical=policy_spec, keep_changes=keep_changes)
        else:
            defaults = DEFAULT_SETTINGS
            if given != (defaults.k, defaults.verify, defaults.method, defaults.threshold, defaults.containment,
                         defaults.canonical, defaults.keep_changes):
                raise ConfigError("give the decision settings either as settings=DetectorSettings(...) or as "
                                  "keyword arguments, not both")
            config = settings.fingerprint_config(config)
        #: every setting this detector decides with (:class:`neardup.detector.settings.DetectorSettings`)
        self.settings = settings
        k, verify, method, threshold = settings.k, settings.verify, settings.method, settings.threshold
        containment, canonical, keep_changes = settings.containment, settings.canonical, settings.keep_changes
        self.verify = None if verify is None else float(verify)
        self.method = method
        self.threshold = float(threshold)
        self.containment = None if containment is None else float(containment)
        self.store: Store = store if store is not None else SQLiteStore(":memory:")
        self.config = resolve_config(self.store, config, method=method,
                                     needs_minhash=method != "simhash" or containment is not None)
        self.store.bits = self.config.bits  # a stored SimHash of another width is damage
        #: how URLs become store keys (:func:`neardup.urls.normalize_url`), kept in the store
        self.urls = self._resolve_urls(urls)
        #: host -> (k, verify) of the stored tuned thresholds (empty when k was given)
        self.host_thresholds: dict[str, tuple[int, float | None]] = {}
        if k is None:
            fallback = default_k(self.config.version, settings.bands)
            stored = read_thresholds(self.store, default_k=fallback, bits=self.config.bits)
            k = stored.k if stored is not None else fallback
            if stored is not None:
                self.verify, self.host_thresholds = stored.verify, dict(stored.hosts)
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= self.config.bits:
            raise ConfigError(f"k must be an integer between 0 and {self.config.bits}, got {k!r}")
        self.k = k
        # the index answers the widest k in use (a host's k may be above the top-level one)
        index_k = max([k, *(hk for hk, _ in self.host_thresholds.values())])
        stored_policy = self.store.get_meta("canonical_policy")
        self.policy = policy_from_spec(canonical if canonical is not None else (stored_policy or DEFAULT_POLICY))
        #: the clusters and their canonical pages (:mod:`neardup.detector.clusters`)
        self.clusters = Clusters(self.store, self.policy)
        if stored_policy != self.policy.spec:
            with self.store.transaction():
                self.store.set_meta("canonical_policy", self.policy.spec)
                if stored_policy is not None:
                    # canonicals are kept incrementally for one policy: another one re-chooses all
                    for cid in self.store.cluster_ids():
                        best, size = self.clusters.recompute(cid)
                        self.store.set_cluster(cid, best.id if best is not None else None, size)
        file_store = isinstance(self.store, SQLiteStore) and self.store.path != ":memory:"
        band_threshold = self.threshold if self.containment is None else min(self.threshold, 0.3)
        self.mirror = IndexMirror(
            self.store, bits=self.config.bits, k=index_k, index=index, minhash=self.config.minhash,
            lsh_threshold=band_threshold, index_dir=Path(self.store.path + ".index") if file_store else None,
            keep_changes=keep_changes, bands=settings.bands)
        #: bounds of the recrawl wait :func:`neardup.crawl.schedule.next_fetch` plans (seconds)
        self.revisit_min, self.revisit_max = MIN_REVISIT, MAX_REVISIT
        #: learned URL rules and per-host signals (:mod:`neardup.crawl`)
        self.signals = CrawlSignals(self.store, self.clusters, self.urls)

    def _resolve_urls(self, urls: UrlConfig | None) -> UrlConfig:
        stored = self.store.get_meta("url_config")
        try:
            found = UrlConfig(**stored) if isinstance(stored, dict) else None
        except (TypeError, NeardupError) as exc:
            raise StoreError(f"store {self.store.path} has unreadable URL settings ({exc})") from None
        if urls is None:
            return found if found is not None else DEFAULT_URL_CONFIG
        if found is not None and found != urls and self.store.page_count() > 0:
            raise ConfigError(f"store {self.store.path} keys its URLs with other settings ({found.to_dict()}); "
                              "use the same URL settings or a new store")
        if found != urls:
            self.store.set_meta("url_config", urls.to_dict())
        return urls

    def _key(self, url: str) -> tuple[str, str | None]:
        """A URL's store key (:func:`normalize_url`) and the URL as fetched when it differs."""
        key = normalize_url(url, self.urls)  # validates it (URLError) as validate_url does
        given = url.strip()
        return key, (given if given != key else None)

    def thresholds(self, url: str | None) -> tuple[int, float | None]:
        """The ``(k, verify)`` a page at ``url`` is decided with: its host's tuned values
        when the store lists the host (:attr:`host_thresholds`), else :attr:`k` and
        :attr:`verify`."""
        if self.host_thresholds and url:
            found = self.host_thresholds.get(host_of(url))
            if found is not None:
                return found
        return self.k, self.verify

    @property
    def index(self) -> HammingIndex:
        """The in-memory SimHash index (one page per SimHash value)."""
        return self.mirror.index

    @property
    def lsh(self) -> MinHashLSH | None:
        """The in-memory MinHash LSH (None when the config has no MinHash)."""
        return self.mirror.lsh

    def _writing(self) -> AbstractContextManager[None]:
        """One write transaction, the index kept in step (:meth:`IndexMirror.writing`)."""
        return self.mirror.writing()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        k: int | None = None,
        config: FingerprintConfig | None = None,
        canonical: str | CanonicalPolicy | None = None,
        create: bool = True,
        timeout: float = 10.0,
        method: str = "simhash",
        threshold: float = DEFAULT_THRESHOLD,
        containment: float | None = None,
        verify: float | None = DEFAULT_VERIFY,
        keep_changes: int | None = DEFAULT_KEEP_CHANGES,
        index: HammingIndex | None = None,
        urls: UrlConfig | None = None,
        settings: DetectorSettings | None = None,
    ) -> "Detector":
        """A detector over the SQLite store at ``path`` (created when missing unless
        ``create=False``), over the PostgreSQL database of a ``postgresql://`` URL (shared by
        many workers, see :mod:`neardup.store.postgres`), or over a Redis store of a
        ``redis://`` or ``redis+cluster://`` URL (:mod:`neardup.store.redis`). Reopening restores every
        page, cluster and the index."""
        store = open_store(path, create=create, timeout=timeout)
        try:
            return cls(store, k=k, config=config, canonical=canonical, method=method, threshold=threshold,
                       containment=containment, verify=verify, keep_changes=keep_changes, index=index, urls=urls,
                       settings=settings)
        except BaseException:
            store.close()
            raise

    # -- public API -----------------------------------------------------------------
    def fingerprint(self, content: bytes | str, url: str | None = None,
                    headers: Mapping[str, str] | None = None) -> Fingerprint:
        """Fingerprint with this detector's settings (no decision, no write)."""
        return fingerprint(content, url=url, headers=headers, config=self.config)

    def check(self, url: str, content: bytes | str, headers: Mapping[str, str] | None = None) -> Verdict:
        """Decide what ``content`` at ``url`` is, without writing anything."""
        url = validate_url(url)
        return self.check_fingerprint(url, self.fingerprint(content, url, headers))

    def add(
        self,
        url: str,
        content: bytes | str,
        headers: Mapping[str, str] | None = None,
        *,
        fetched_at: float | datetime | None = None,
        priority: float | None = None,
    ) -> Verdict:
        """Decide and record ``content`` at ``url`` (committed when this returns). ``fetched_at``:
        when it was fetched (default now), POSIX seconds or a datetime from 1970-01-01 to
        9999-12-31 (:func:`neardup.model.checked_time`; :class:`ConfigError` otherwise)."""
        url = validate_url(url)
        fp = self.fingerprint(content, url, headers)
        return self.add_fingerprint(url, fp, fetched_at=fetched_at, priority=priority)

    def add_many(self, pages: Iterable[Page | tuple[str, bytes | str]]) -> list[Verdict]:
        """Add a batch in one transaction; pages may match earlier pages of the same batch.

        A page that cannot be read gets a verdict with status ``error`` and does not stop
        the batch; a :attr:`Page.revisit` is :meth:`add_revisit` (``error`` when not stored)."""
        prepared: list[tuple[str, Fingerprint | None, float, float | None, str | None]] = []
        for item in pages:
            page = item if isinstance(item, Page) else Page(*item)
            try:
                url = validate_url(page.url)
                when, priority = timestamp(page.fetched_at), priority_value(page.priority)
                fp = None if page.revisit else self.fingerprint(page.content, url, page.headers)
                prepared.append((url, fp, when, priority, foreign_revisit(page)))
            except NeardupError as exc:
                prepared.append((str(page.url), None, 0.0, None, str(exc)))
        out: list[Verdict] = []
        with self.signals.learning(), self._writing():
            for url, fp, when, priority, error in prepared:
                if error is not None:
                    out.append(Verdict(status="error", url=url, error=error))
                elif fp is not None:
                    out.append(self.add_fingerprint(url, fp, fetched_at=when, priority=priority))
                else:  # a revisit
                    try:
                        out.append(self.add_revisit(url, fetched_at=when))
                    except NotStoredError as exc:
                        out.append(Verdict(status="error", url=url, error=str(exc)))
        return out

    def add_revisit(self, url: str, *, fetched_at: float | datetime | None = None) -> Verdict:
        """Record that ``url`` still served its stored content at ``fetched_at`` (default now)
        without sending it: an HTTP 304, a WARC revisit record (:mod:`neardup.detector.revisits`).
        :class:`NotStoredError` when the URL is not stored."""
        url, fetched = self._key(url)
        now = timestamp(fetched_at)
        with self.signals.learning(), self._writing():
            to = Revisiting(self.store, self.mirror, self.signals, self.config.bits, self.revisit_min, self.revisit_max)
            return record_revisit(to, url, now, fetched)

    def check_fingerprint(self, url: str, fp: Fingerprint) -> Verdict:
        """:meth:`check` for a fingerprint computed elsewhere (same spec required)."""
        self._check_spec(fp)
        url, fetched = self._key(url)
        with self.store.reading():
            found = self.store.lookup(url, None if fp.empty else fp.digest)
            self.mirror.sync((found.first, found.last))
            return self._check_synced(url, fp, found.own, found.same, fetched)

    def _check_synced(self, url: str, fp: Fingerprint, own: PageRecord | None, same: PageRecord | None,
                      fetched_url: str | None = None) -> Verdict:
        """The verdict for ``fp`` at ``url``, given the page stored at ``url`` and the page
        with the same digest (:meth:`Store.lookup`), with the index already in sync."""
        now = time.time()
        stable = self.signals.comparable_digest(url, fp.text, own.stable if own else None)
        revisit = compare_versions(url, fp, own, now, *self.thresholds(url), self.settings.bands, stable) \
            if own is not None else None
        base: dict[str, Any] = dict(url=url, digest=fp.digest, simhash=fp.simhash_hex, title=fp.title,
                                    page_id=own.id if own else None, fetched_url=fetched_url,
                                    **version_fields(revisit))
        if own is not None and revisit is not None and revisit.keep:
            chosen = None
            if own.cluster_id is not None:  # the canonical as if the new version replaced the stored one
                candidate = Member(int(own.id or 0), url, own.first_seen, fp.canonical_url, own.priority)
                chosen = self.clusters.change(own.cluster_id, member_of(own), candidate, None, write=False,
                                              known=member_of(own))
            return kept_verdict(self.store, own, chosen, base)
        decision = decide(self, url, fp, same, exclude=own)
        status, match, distance = decision.status, decision.match, decision.distance
        page_id = own.id if own else None
        base.update(method=decision.method, score=decision.score)
        if status == "partial" and match is not None:
            return Verdict(status=status, match_id=match.id, match_url=match.url, distance=distance,
                           canonical_id=page_id, canonical_url=url, **base)
        if match is None:
            if status == "new":
                return Verdict(status=status, canonical_id=page_id, canonical_url=url, **base)
            return Verdict(status=status, **base)
        assert match.cluster_id is not None
        candidate = Member(page_id if page_id is not None else -1, url, own.first_seen if own else now,
                           fp.canonical_url, own.priority if own else None)
        leave = member_of(own) if own is not None and own.cluster_id == match.cluster_id else None
        chosen = self.clusters.change(match.cluster_id, leave, candidate, None, write=False, known=member_of(match))
        assert chosen is not None
        return Verdict(status=status, match_id=match.id, match_url=match.url, distance=distance,
                       cluster_id=match.cluster_id, canonical_id=chosen.id if chosen.id >= 0 else None,
                       canonical_url=chosen.url, **base)

    def add_fingerprint(
        self,
        url: str,
        fp: Fingerprint,
        *,
        fetched_at: float | datetime | None = None,
        priority: float | None = None,
    ) -> Verdict:
        """:meth:`add` for a fingerprint computed elsewhere (same spec required)."""
        self._check_spec(fp)
        url, fetched = self._key(url)
        now = timestamp(fetched_at)
        priority = priority_value(priority)
        with self.signals.learning(), self._writing():
            return self._record(url, fp, now, priority, fetched)

    def check_fingerprints(self, items: Iterable[tuple[str, Fingerprint]]) -> list[Verdict]:
        """:meth:`check_fingerprint` for many (url, fingerprint) pairs; a pair that cannot be
        checked (bad URL, other spec) gets a verdict with status ``error``.

        >>> det = Detector()
        >>> fp = det.fingerprint(" ".join(f"word{i}" for i in range(400)))
        >>> [v.status for v in det.check_fingerprints([("https://a.example/", fp), ("nope", fp)])]
        ['new', 'error']
        """
        out: list[Verdict] = []
        with self.store.reading():  # one connection and one look at the change log for the batch
            self.mirror.sync()
            for url, fp in items:
                try:
                    self._check_spec(fp)
                    url, fetched = self._key(url)
                    found = self.store.lookup(url, None if fp.empty else fp.digest)
                    out.append(self._check_synced(url, fp, found.own, found.same, fetched))
                except NeardupError as exc:
                    if isinstance(exc, StoreError) and not isinstance(exc, SpecMismatchError):
                        raise
                    out.append(Verdict(status="error", url=str(url), error=str(exc)))
        return out

    def add_fingerprints(
        self, items: Iterable[tuple[str, Fingerprint] | tuple[str, Fingerprint, float | datetime | None, float | None]],
    ) -> list[Verdict]:
        """:meth:`add_fingerprint` for many ``(url, fp)`` or ``(url, fp, fetched_at, priority)``
        tuples, in one transaction (later items may match earlier ones); a bad item gets a
        verdict with status ``error`` and does not stop the batch. What the adds of each
        :data:`PREFETCH` items read of the store is read for them at once (:meth:`Store.prefetch`)."""
        out: list[Verdict] = []
        with self.signals.learning(), self._writing():
            todo = iter(items)
            while ready := [self._batch_item(item) for item in islice(todo, PREFETCH)]:
                adds = [r for r in ready if not isinstance(r, Verdict)]
                self.store.prefetch([r[0] for r in adds], [r[1].digest for r in adds if not r[1].empty])
                out.extend(r if isinstance(r, Verdict) else self._record(*r) for r in ready)
        return out

    def _batch_item(self, item: tuple[Any, ...]) -> Verdict | tuple[str, Fingerprint, float, float | None, str | None]:
        """An item of :meth:`add_fingerprints` checked: the arguments of its add, or its error verdict."""
        try:
            self._check_spec(item[1])
            url, fetched = self._key(item[0])
            return url, item[1], timestamp(item[2] if len(item) == 4 else None), \
                priority_value(item[3] if len(item) == 4 else None), fetched
        except NeardupError as exc:
            return Verdict(status="error", url=str(item[0]), error=str(exc))

    def expire(self, older_than: float) -> int:
        """Forget pages last fetched more than ``older_than`` seconds ago; returns how many
        (in batches, each cluster that lost members updated once: :mod:`neardup.detector.expiry`)."""
        older_than = duration(older_than, "older_than") or 0.0
        with self.signals.learning(), self._writing():
            return expire_before(self.store, self.signals, self.mirror, self.clusters, time.time() - older_than)

    def cluster_info(self, cluster_id: int, at: float | None = None) -> dict[str, Any] | None:
        """A cluster's size, canonical and growth, without reading its members (None when
        there is no such cluster): :meth:`neardup.detector.clusters.Clusters.info`."""
        return self.clusters.info(cluster_id, at)

    # -- before the fetch: learned URL rules, per-host signals (neardup.crawl.signals.CrawlSignals) ---
    @property
    def rule_min_support(self) -> int:
        """Support a learned URL rule needs before :meth:`should_fetch` uses it."""
        return self.signals.rule_min_support

    @rule_min_support.setter
    def rule_min_support(self, value: int) -> None:
        self.signals.rule_min_support = value

    def learn_rules(self) -> list[Rule]:
        """Re-learn the URL rules of every host from the whole store and return them
        (:meth:`CrawlSignals.learn_rules`)."""
        return self.signals.learn_rules()

    def rules(self, host: str | None = None) -> list[Rule]:
        """The learned URL rules of ``host``, or of every host (:meth:`CrawlSignals.rules`)."""
        return self.signals.rules(host)

    def should_fetch(self, url: str, *, max_age: float | None = None,
                     host_max_duplicate_rate: float | None = None, host_min_pages: int = 20) -> FetchDecision:
        """Whether a crawler should fetch ``url``, before fetching it, and why
        (:class:`FetchDecision`): a stored copy whose canonical is elsewhere is skipped
        (``known-duplicate``, naming the ``canonical_url`` to fetch instead); a stored original
        or canonical is fetched (``known``) unless fetched less than ``max_age`` seconds ago, or
        before its ``next_fetch`` (``fresh``); a URL that its host's rules rewrite to a known
        page (``rule``), a new member of a spent numbered trap (``series``) and, with
        ``host_max_duplicate_rate``, a URL of a host with ``host_min_pages`` pages or more that
        is over it (``host-budget``) are skipped; anything else is fetched (``unknown``).

        >>> det = Detector()
        >>> text = " ".join(f"word{i}" for i in range(400))
        >>> for i in range(5):
        ...     _ = det.add(f"https://a.example/p?sid={i}", text)
        >>> d = det.should_fetch("https://a.example/p?sid=99")
        >>> d.fetch, d.reason, d.rules, d.known_url
        (False, 'rule', ('drop-param:sid',), 'https://a.example/p?sid=0')
        >>> det.should_fetch("https://a.example/p?sid=3").reason
        'known-duplicate'
        >>> det.should_fetch("https://a.example/q").reason
        'unknown'
        """
        return self.signals.should_fetch(url, max_age=max_age, host_max_duplicate_rate=host_max_duplicate_rate,
                                         host_min_pages=host_min_pages)

    def due(self, at: float | None = None, *, limit: int = 1000, after: str | None = None) -> list[str]:
        """The stored URLs a recrawl should fetch at ``at`` (default now): kept contents
        (originals, canonicals) with no ``next_fetch`` or one at or before ``at``, in URL order,
        ``limit`` (at most 100,000) after the URL ``after``: seeded into a recrawl, they reach
        the pages behind pages still ``fresh``.

        >>> det = Detector()
        >>> text = " ".join(f"word{i}" for i in range(400))
        >>> _ = [det.add(u, text) for u in ("https://a.example/1", "https://a.example/copy")]
        >>> det.due(), det.due(after="https://a.example/1")
        (['https://a.example/1'], [])
        """
        return self.signals.due(at, limit=limit, after=after)

    def hosts(self, top: int | None = None, *, window: float | None = None, at: float | None = None,
              sort: str = "duplicate_rate", trap_members: int = DEFAULT_TRAP_MEMBERS,
              host: str | None = None) -> list[dict[str, Any]]:
        """Per-host duplicate signals, sorted by ``sort`` (``duplicate_rate``, ``duplicates``,
        ``pages`` or ``distinct_contents``; largest first, then host name), the ``top`` first.

        Each: ``host`` (an origin: the port where not the default), ``pages`` (stored URLs;
        with ``window``: those fetched in the ``window`` seconds before ``at``), the counts
        by status, ``duplicates`` (exact + near), ``duplicate_rate``, ``distinct_contents``,
        ``largest_cluster`` (:meth:`cluster_info`), ``trap`` (``trap_members`` URLs or more
        in one cluster, or a numbered trap: ``series_traps``), ``budget_factor`` (the share
        of URLs with content that brought distinct content, at least
        :data:`MIN_BUDGET_FACTOR`), ``refetched``, ``changed_pages``, ``changes_per_day``
        and the templates. A re-fetch is never counted as a duplicate of itself."""
        return self.signals.hosts(top, window=window, at=at, sort=sort, trap_members=trap_members, host=host)

    def host(self, name: str, *, window: float | None = None, at: float | None = None,
             trap_members: int = DEFAULT_TRAP_MEMBERS) -> dict[str, Any] | None:
        """:meth:`hosts` for one host (None when it has no stored page), with its learned
        URL rules under ``rules``."""
        return self.signals.host(name, window=window, at=at, trap_members=trap_members)

    def history(self, url: str) -> UrlHistory | None:
        """The fetch history and recrawl schedule of a stored URL (None when it is not
        stored): its counters, estimated change rate and next fetch
        (:mod:`neardup.crawl`), and its last fetches, oldest first.

        >>> det = Detector()
        >>> text = " ".join(f"word{i}" for i in range(400))
        >>> for t, body in ((0.0, text), (3600.0, text), (7200.0, text + " more")):
        ...     _ = det.add("https://a.example/1", body, fetched_at=t)
        >>> h = det.history("https://a.example/1")
        >>> h.fetches, h.change_count, [v["changed"] for v in h.versions]
        (3, 1, [None, False, True])
        """
        return url_history(self.store, self._key(url)[0], self.config.bits)

    def page(self, page_id: int) -> PageRecord | None:
        """The stored page with this id (None when there is none)."""
        return self.store.page_by_id(checked_id(page_id, "page id"))

    def cluster(self, cluster_id: int) -> list[PageRecord]:
        """The members of a cluster (empty when there is no such cluster)."""
        return self.store.cluster_members(checked_id(cluster_id, "cluster id"))

    def stats(self) -> dict[str, Any]:
        """Stored URLs, clusters, the URLs by status (each URL's decision against the other
        URLs, never a re-fetch against itself), ``fetches`` (all fetches, re-fetches
        included) and ``changed_pages`` (URLs whose content changed between fetches)."""
        counts = self.store.status_counts()
        fetches, changed = self.store.fetch_counts()
        return {"pages": sum(counts.values()), "clusters": self.store.cluster_count(),
                **{s: counts.get(s, 0) for s in STATUSES if s != "error"},
                "fetches": fetches, "changed_pages": changed}

    def close(self) -> None:
        """Save the index next to a file store (when it changed) and close the store."""
        try:
            self.mirror.save()  # a failure is logged; the index is rebuilt at the next open
        finally:
            self.store.close()

    def __enter__(self) -> "Detector":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------
    def _check_spec(self, fp: Fingerprint) -> None:
        """Refuse a fingerprint of another spec, or with text fields that cannot be stored."""
        if fp.spec != self.config.spec:
            raise SpecMismatchError(f"fingerprint spec {fp.spec!r} differs from this detector's {self.config.spec!r}")
        text_fields_encodable(fp)

    def _record(self, url: str, fp: Fingerprint, now: float, priority: float | None,
                fetched_url: str | None = None) -> Verdict:
        found = self.store.lookup(url, None if fp.empty else fp.digest)  # the URL's page and its digest's: one read
        own = found.own
        comparable = self.signals.comparable_digest(url, fp.text, own.stable if own else None)
        revisit = compare_versions(url, fp, own, now, *self.thresholds(url), self.settings.bands, comparable) \
            if own is not None else None
        kept = own is not None and revisit is not None and revisit.keep
        decision = Decision(own.status) if kept and own is not None else decide(self, url, fp, found.same, own)
        status, match, distance = decision.status, decision.match, decision.distance
        old_cluster = own.cluster_id if own else None
        fresh = False  # a cluster made now for this page: empty, nothing to read back
        if kept:
            cluster_id = old_cluster
        elif match is not None and status != "partial":
            cluster_id = match.cluster_id
        elif status in ("new", "partial"):
            old_row = self.store.cluster_row(old_cluster) if own is not None and old_cluster is not None else None
            if old_row is not None and old_row.size == 1:
                cluster_id = old_cluster  # it was alone in its cluster: keep the id
            else:
                cluster_id = self.store.new_cluster(now)
                fresh = True
        else:
            cluster_id = None
        stable = self.signals.stable_record(url, fp.text, learn=True, content=0 if cluster_id is None else cluster_id)
        history = counters(self.store, own, now, revisit, min_interval=self.revisit_min,
                           max_interval=self.revisit_max)
        flag = self.signals.observe_structure(url, now, fp.structure, fp.digest, fp.length)
        rec = PageRecord(
            url=url, host=origin_of(url), first_seen=own.first_seen if own else now, fetched_at=now,
            digest=fp.digest, simhash=fp.simhash, spec=fp.spec, length=fp.length, title=fp.title,
            canonical_link=fp.canonical_url, language=fp.language, status=status,
            matched_id=own.matched_id if kept and own else (match.id if match else None),
            distance=own.distance if kept and own else distance, cluster_id=cluster_id,
            priority=priority if priority is not None else (own.priority if own else None),
            signature=fp.minhash.to_bytes() if fp.minhash is not None else None,
            set_size=fp.minhash.set_size if fp.minhash is not None else None,
            sketch=fp.sketch, fetched_url=fetched_url, structure=fp.structure, stable=stable, **history,
            id=own.id if own else None,
        )
        if own is not None:
            self.store.update_page(rec, self.config.bits)
        else:
            rec.id = self.store.insert_page(rec, self.config.bits)
        assert rec.id is not None
        self.store.add_version(rec.id, VersionRow(now, fp.digest, fp.simhash,
                                                  None if revisit is None else revisit.version == "changed",
                                                  None if revisit is None else revisit.distance,
                                                  None if revisit is None else revisit.score), self.config.bits,
                               fetches=rec.fetches)
        values = set()
        if own is not None and own.status != "empty":
            values.add(own.simhash)
        if status != "empty":
            values.add(fp.simhash)
        old = {own.id: own} if own is not None and own.id is not None else {}
        # the page's entry is re-added only when what the LSH holds of it changed (the index
        # holds its SimHash value, handled by ``values``): an unchanged re-fetch logs nothing
        changed = own is not None and (own.signature, own.set_size) != (rec.signature, rec.set_size)
        self.mirror.reconcile(values, old, rec, refresh=rec.id if changed and status != "empty" else None)
        joining = member_of(rec)
        leaving = member_of(own) if own is not None and old_cluster is not None else None
        chosen: Member | None = None
        if old_cluster is not None and old_cluster == cluster_id:
            chosen = self.clusters.change(cluster_id, leaving, joining, now, write=True, known=joining)
        else:
            if old_cluster is not None:
                self.clusters.change(old_cluster, leaving, None, now, write=True)
            if cluster_id is not None:
                chosen = self.clusters.change(cluster_id, None, joining, now, write=True, fresh=fresh,
                                              known=member_of(match) if match is not None else None)
        self.signals.observe(url, cluster_id if status != "empty" else None, fp.simhash, first=own is None)
        base: dict[str, Any] = dict(url=url, page_id=rec.id, digest=fp.digest, simhash=fp.simhash_hex,
                                    title=fp.title, fetched_url=fetched_url, next_fetch=rec.next_fetch, flag=flag,
                                    **version_fields(revisit))
        if kept and own is not None:
            return kept_verdict(self.store, rec, chosen, base)
        return Verdict(
            status=status, match_id=match.id if match else None,
            match_url=match.url if match else None, distance=distance, cluster_id=cluster_id,
            canonical_id=chosen.id if chosen else None, canonical_url=chosen.url if chosen else None,
            method=decision.method, score=decision.score, **base,
        )

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

Decision rule, in order: a page with fewer than ``min_tokens`` tokens of main content is
``empty`` (stored, never matched); a stored non-empty page with the same SHA-256 digest makes
it ``exact``; otherwise the nearest stored SimHash within Hamming distance ``k`` (``<= k``;
ties go to the oldest page; ``k`` = 7 by default) makes it ``near``; otherwise it is ``new``. A matching page
joins its match's cluster; the cluster's canonical page follows the canonical policy
(:mod:`neardup.canonical`). Re-adding a URL replaces its stored version after comparing the
new content with everything stored, the old version included.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from neardup.canonical import DEFAULT_POLICY, CanonicalPolicy, Member, link_key, policy_from_spec, url_key
from neardup.crawl import MAX_REVISIT, MIN_REVISIT, UrlHistory, schedule
from neardup.errors import ConfigError, InputError, NeardupError, SpecMismatchError, StoreError
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint, hamming
from neardup.index import HammingIndex
from neardup.matching import Side, match, sketch_score
from neardup.minhash import MinHashConfig, MinHashLSH, jaccard
from neardup.mirror import DEFAULT_KEEP_CHANGES, IndexMirror
from neardup.store import GROWTH_HALF_LIFE, ClusterRow, PageRecord, SQLiteStore
from neardup.storeapi import HISTORY_LIMIT, Store, VersionRow
from neardup.urlrules import DEFAULT_MIN_SUPPORT, Rule, RuleLearner
from neardup.urls import host_of, validate_url

STATUSES = ("new", "exact", "near", "partial", "empty", "error")
METHODS = ("simhash", "minhash", "both")
#: Default Hamming threshold per fingerprint spec version, the measured operating points
#: (docs/quality.md). Version 1 (no IDF, no sketch): k = 7, where false positives start.
#: Version 2: IDF weights spread unrelated pages apart but same-content pairs too, so the
#: candidate radius is wider and every candidate is confirmed by the sketch.
DEFAULT_K_BY_VERSION = {1: 7, 2: 12}
DEFAULT_K = DEFAULT_K_BY_VERSION[2]
#: Default verification threshold: a SimHash candidate is ``near`` only when the sketches'
#: estimate of the word 3-shingle Jaccard similarity is at least this (docs/quality.md).
DEFAULT_VERIFY = 0.3
#: Default MinHash Jaccard threshold (method "minhash"/"both"): the measured operating point
#: (docs/quality.md: 97.4% same-content recall, 0.086% same-site false positives).
DEFAULT_THRESHOLD = 0.75


@dataclass(frozen=True)
class Verdict:
    """The decision for one page.

    status: ``new`` | ``exact`` | ``near`` | ``empty`` (too little main content to compare)
        | ``partial`` (with ``containment``: most of this page is found in a longer stored
        page, ``match_*``; it is not a near duplicate and keeps a cluster of its own)
        | ``error`` (only in batches: the page could not be read; see ``error``).
    method: which test matched: ``digest``, ``simhash``, ``minhash`` or ``simhash+minhash``.
    score: the estimated Jaccard similarity with the match: from the MinHash signatures
        when present, else from the verification sketches (word 3-shingles); the estimated
        containment for ``partial``; 1.0 for ``exact``; None when it could not be estimated
        (a page without sketch).
    page_id: the page's store id (None from :meth:`Detector.check` for an unseen URL).
    match_id / match_url / distance: the stored page it matched and the Hamming distance;
        always another URL than ``url``.
    cluster_id / canonical_url: the cluster it belongs (or would belong) to and its canonical.
    url: the URL's normalised form, its key in the store (:func:`neardup.urls.normalize_url`);
        ``fetched_url``: the URL as given, when it differs.
    version: ``None`` for the first fetch of a URL; for a re-fetch of a stored URL,
        ``unchanged`` (the same digest as its stored version) or ``changed``, with
        ``previous_distance`` and ``previous_score`` (Hamming distance and sketch Jaccard
        estimate to the stored version) and ``since_last_fetch`` (seconds). A re-fetch is
        compared with its own stored version first: while it stays a near copy of it, the
        URL keeps its first decision (``status``, match and cluster: a page that was
        ``new`` stays its cluster's original); a version that no longer resembles it is
        decided again against the other URLs.
    next_fetch: when the content is next expected to change (:mod:`neardup.crawl`), from
        the URL's fetch history; None until it has been fetched twice.
    """

    status: str
    url: str
    page_id: int | None = None
    match_id: int | None = None
    match_url: str | None = None
    distance: int | None = None
    cluster_id: int | None = None
    canonical_id: int | None = None
    canonical_url: str | None = None
    digest: str | None = None
    simhash: str | None = None
    title: str | None = None
    method: str | None = None
    score: float | None = None
    error: str | None = None
    version: str | None = None
    previous_distance: int | None = None
    previous_score: float | None = None
    since_last_fetch: float | None = None
    fetched_url: str | None = None
    next_fetch: float | None = None

    @property
    def is_duplicate(self) -> bool:
        return self.status in ("exact", "near")

    def to_dict(self) -> dict[str, Any]:
        # every field is a scalar: a shallow copy (dataclasses.asdict deep-copies, ~10x slower)
        return {name: getattr(self, name) for name in _VERDICT_FIELDS}


_VERDICT_FIELDS = tuple(Verdict.__dataclass_fields__)
_FETCH = object()  # "not read yet" for arguments where None means "read, nothing there"


@dataclass(frozen=True)
class Page:
    """One page of a batch for :meth:`Detector.add_many`."""

    url: str
    content: bytes | str
    headers: Mapping[str, str] | None = None
    fetched_at: float | None = None
    priority: float | None = None


def _timestamp(value: float | datetime | None) -> float:
    if value is None:
        return time.time()
    try:
        out = value.timestamp() if isinstance(value, datetime) else float(value)
    except (TypeError, ValueError, OverflowError, OSError):
        raise ConfigError(f"fetched_at must be a POSIX timestamp or datetime, got {_short(value)}") from None
    if out != out or out in (float("inf"), float("-inf")):
        raise ConfigError(f"fetched_at must be a finite timestamp, got {value!r}")
    return out


def _priority(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"priority must be a number, got {_short(value)}") from None
    if out != out:
        raise ConfigError("priority must be a number, got NaN")
    return out


#: the largest id a store hands out (a signed 64-bit integer)
MAX_ID = 2**63 - 1


def _checked_id(value: object, what: str) -> int:
    """An id given to the library, checked at the door: an integer in ``[0, MAX_ID]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer, got {_short(value)}")
    if not 0 <= value <= MAX_ID:
        raise ConfigError(f"{what} must be between 0 and {MAX_ID}, got {_short(value)}")
    return value


def _seconds(value: object, what: str, *, optional: bool = False) -> float | None:
    """A duration or time given to the library: a finite number (``>= 0`` for durations);
    NaN and infinities are refused."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number of seconds, got {value!r}")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what} must be a number of seconds, got {_short(value)}") from None
    if not math.isfinite(out):
        raise ConfigError(f"{what} must be a finite number of seconds, got {value!r}")
    return out


def _short(value: object) -> str:
    """``repr(value)`` cut to 80 characters (a message stays one short line)."""
    if isinstance(value, int) and value.bit_length() > 200:  # (repr fails past 4,300 digits)
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _text_fields_encodable(fp: Fingerprint) -> None:
    """Refuse a fingerprint whose text fields cannot be stored as UTF-8 (lone surrogates)."""
    for name in ("title", "canonical_url", "language"):
        value = getattr(fp, name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InputError(f"fingerprint {name} must be a string or None, got {type(value).__name__}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"fingerprint {name} holds a lone surrogate (not valid Unicode text)") from None


@dataclass(frozen=True)
class _Decision:
    status: str
    match: PageRecord | None = None
    distance: int | None = None
    method: str | None = None
    score: float | None = None


@dataclass(frozen=True)
class _Revisit:
    """How a re-fetch compares with the stored version of its URL."""

    version: str  # "unchanged" | "changed"
    distance: int
    score: float | None
    since: float
    keep: bool  # the URL keeps its first decision and cluster


def _member(rec: PageRecord) -> Member:
    assert rec.id is not None
    return Member(rec.id, rec.url, rec.first_seen, rec.canonical_link, rec.priority)


def _same_for_policy(a: Member, b: Member) -> bool:
    """Whether a member changed in nothing a canonical policy reads."""
    return (a.id == b.id and a.url == b.url and a.first_seen == b.first_seen and a.priority == b.priority
            and link_key(a.canonical_link) == link_key(b.canonical_link))


@dataclass(frozen=True)
class FetchDecision:
    """The answer of :meth:`Detector.should_fetch`: ``fetch`` (True/False) and ``reason``:

    - ``unknown``: nothing is known of the URL (fetch);
    - ``known``: the URL is stored and holds the canonical copy of its content, or content
      of its own (fetch: a re-crawl; ``fetched_at`` says when it was last fetched);
    - ``fresh``: as ``known`` but fetched less than ``max_age`` seconds ago, or, without
      ``max_age``, before ``next_fetch``, when its content is next expected to change
      (skip; ``change_rate``: estimated changes per second, :mod:`neardup.crawl`);
    - ``known-duplicate``: the URL is stored, its content is in a cluster whose canonical is
      another page, ``canonical_url`` (skip: re-crawls skip copies);
    - ``rule``: learned URL rules of its host (``rules``, :mod:`neardup.urlrules`) rewrite it
      to a known page, ``known_url`` (skip);
    - ``host-budget``: its host is over its duplicate budget (``host_duplicate_rate``; skip).
    """

    url: str
    fetch: bool
    reason: str
    known_url: str | None = None
    canonical_url: str | None = None
    cluster_id: int | None = None
    rules: tuple[str, ...] = ()
    fetched_at: float | None = None
    host_duplicate_rate: float | None = None
    next_fetch: float | None = None
    change_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "fetch": self.fetch, "reason": self.reason, "known_url": self.known_url,
                "canonical_url": self.canonical_url, "cluster_id": self.cluster_id, "rules": list(self.rules),
                "fetched_at": self.fetched_at, "host_duplicate_rate": self.host_duplicate_rate,
                "next_fetch": self.next_fetch, "change_rate": self.change_rate}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FetchDecision":
        fields = cls.__dataclass_fields__
        values = {k: v for k, v in data.items() if k in fields}
        values["rules"] = tuple(values.get("rules") or ())
        return cls(**values)


#: how many pages of one cluster from one host make the host a trap (:meth:`Detector.hosts`)
DEFAULT_TRAP_MEMBERS = 10
#: the smallest budget factor :meth:`Detector.hosts` suggests
MIN_BUDGET_FACTOR = 0.05


#: pages expired per statement (:meth:`Detector.expire`)
EXPIRE_BATCH = 1000


class Detector:
    """Near-duplicate detector over a store and a Hamming index.

    store: a :class:`~neardup.store.SQLiteStore` (default: in memory) or a
        :class:`~neardup.postgres.PostgresStore`.
    k: Hamming threshold, ``distance <= k`` makes a candidate, for every page. Default: the
        thresholds ``neardup tune --apply`` stored in the store (meta ``thresholds``,
        :func:`neardup.tune.apply`): each page is decided with its host's ``k`` and
        ``verify`` when the settings list the host, else with the stored top-level ones
        (:func:`neardup.tune.thresholds_for`; :attr:`host_thresholds`); without stored
        thresholds, the measured value for the store's spec version,
        :data:`DEFAULT_K_BY_VERSION` (12 for new stores). Giving ``k`` uses ``k`` and
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
    index: a :class:`~neardup.index.HammingIndex`. Default: the permuted-table index
        (:class:`~neardup.permuted.PermutedIndex`, exact) for 64-bit fingerprints, brute
        force for 128-bit ones. For a file store it is saved next to it (``<db>.index/``) on
        :meth:`close` and memory-mapped at the next open when it still matches the store;
        otherwise it is rebuilt from the store. The index (and the MinHash LSH) are kept in
        step with the store by :class:`~neardup.mirror.IndexMirror` (:attr:`mirror`).
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
    ) -> None:
        if method not in METHODS:
            raise ConfigError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        if not 0.0 < float(threshold) <= 1.0:
            raise ConfigError(f"threshold must be in (0, 1], got {threshold}")
        if containment is not None and not 0.0 < float(containment) <= 1.0:
            raise ConfigError(f"containment must be in (0, 1], got {containment}")
        if verify is not None and not 0.0 <= float(verify) <= 1.0:
            raise ConfigError(f"verify must be in [0, 1] or None, got {verify}")
        self.verify = None if verify is None else float(verify)
        self.method = method
        self.threshold = float(threshold)
        self.containment = None if containment is None else float(containment)
        self.store: Store = store if store is not None else SQLiteStore(":memory:")
        self.config = self._resolve_config(config, needs_minhash=method != "simhash" or containment is not None)
        self.store.bits = self.config.bits  # a stored SimHash of another width is damage
        #: host -> (k, verify) of the stored tuned thresholds (empty when k was given)
        self.host_thresholds: dict[str, tuple[int, float | None]] = {}
        if k is None:
            k = self._stored_thresholds()
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= self.config.bits:
            raise ConfigError(f"k must be an integer between 0 and {self.config.bits}, got {k!r}")
        self.k = k
        # the index answers the widest k in use (a host's k may be above the top-level one)
        index_k = max([k, *(hk for hk, _ in self.host_thresholds.values())])
        stored_policy = self.store.get_meta("canonical_policy")
        self.policy = policy_from_spec(canonical if canonical is not None else (stored_policy or DEFAULT_POLICY))
        if stored_policy != self.policy.spec:
            with self.store.transaction():
                self.store.set_meta("canonical_policy", self.policy.spec)
                if stored_policy is not None:
                    # canonicals are kept incrementally for one policy: another one re-chooses all
                    for cid in self.store.cluster_ids():
                        best, size = self._recompute(cid)
                        self.store.set_cluster(cid, best.id if best is not None else None, size)
        file_store = isinstance(self.store, SQLiteStore) and self.store.path != ":memory:"
        band_threshold = self.threshold if self.containment is None else min(self.threshold, 0.3)
        self.mirror = IndexMirror(
            self.store, bits=self.config.bits, k=index_k, index=index, minhash=self.config.minhash,
            lsh_threshold=band_threshold, index_dir=Path(self.store.path + ".index") if file_store else None,
            keep_changes=keep_changes)
        #: support a learned URL rule needs before :meth:`should_fetch` uses it
        self.rule_min_support = DEFAULT_MIN_SUPPORT
        #: bounds of the recrawl wait :func:`neardup.crawl.next_fetch` plans (seconds)
        self.revisit_min, self.revisit_max = MIN_REVISIT, MAX_REVISIT
        self._learner: RuleLearner | None = None  # built from the store at first use

    def _stored_thresholds(self) -> int:
        """Read the tuned thresholds of the store (meta ``thresholds``): sets :attr:`verify`
        and :attr:`host_thresholds`, returns the top-level k (the spec version's default
        when none are stored)."""
        from neardup.tune import META_KEY, thresholds_for

        default_k = DEFAULT_K_BY_VERSION[self.config.version]
        settings = self.store.get_meta(META_KEY)
        if not isinstance(settings, dict):
            return default_k

        def checked(values: dict[str, Any], where: str) -> tuple[int, float | None]:
            k, verify = values.get("k"), values.get("verify")
            k = default_k if k is None else k
            if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= self.config.bits:
                raise StoreError(f"store {self.store.path}: stored thresholds{where} have k {k!r}, "
                                 f"not an integer between 0 and {self.config.bits}")
            if verify is not None and (not isinstance(verify, (int, float)) or not 0.0 <= float(verify) <= 1.0):
                raise StoreError(f"store {self.store.path}: stored thresholds{where} have verify {verify!r}, "
                                 "not a number in [0, 1]")
            return k, None if verify is None else float(verify)

        top_k, self.verify = checked(thresholds_for(settings, None), "")
        hosts = settings.get("hosts") or {}
        for host in hosts if isinstance(hosts, dict) else ():
            self.host_thresholds[str(host)] = checked(thresholds_for(settings, host), f" of host {host!r}")
        return top_k

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
    ) -> "Detector":
        """A detector over the SQLite store at ``path`` (created when missing unless
        ``create=False``), or over the PostgreSQL database of a ``postgresql://`` URL
        (shared by many workers, see :mod:`neardup.postgres`). Reopening restores every
        page, cluster and the index."""
        target = str(path)
        if target.startswith(("postgresql://", "postgres://")):
            from neardup.postgres import PostgresStore

            store: Store = PostgresStore(target, timeout=timeout, create=create)
        else:
            store = SQLiteStore(path, timeout=timeout, create=create)
        try:
            return cls(store, k=k, config=config, canonical=canonical, method=method, threshold=threshold,
                       containment=containment, verify=verify, keep_changes=keep_changes, index=index)
        except BaseException:
            store.close()
            raise

    def _resolve_config(self, config: FingerprintConfig | None, needs_minhash: bool) -> FingerprintConfig:
        stored = self.store.get_meta("config")
        stored_spec = self.store.get_meta("spec")
        has_pages = self.store.page_count() > 0
        if config is None:
            if stored is not None:
                try:
                    config = FingerprintConfig.from_dict(stored)
                except (TypeError, KeyError, NeardupError) as exc:
                    raise SpecMismatchError(f"store {self.store.path} has an unreadable config ({exc})") from None
            else:
                config = DEFAULT_CONFIG
            if needs_minhash and config.minhash is None and not has_pages:
                config = config.with_(minhash=MinHashConfig())
        if needs_minhash and config.minhash is None:
            raise (SpecMismatchError if has_pages else ConfigError)(
                f"method {self.method!r} (or containment) needs MinHash signatures, but "
                + (f"store {self.store.path} was written without them" if has_pages else "the config has none")
                + "; use FingerprintConfig(minhash=MinHashConfig()) with a new store"
            )
        if has_pages and stored_spec and stored_spec != config.spec:
            raise SpecMismatchError(
                f"store {self.store.path} holds fingerprints of spec {stored_spec!r}, "
                f"not {config.spec!r}; use the same settings or a new store"
            )
        if stored_spec != config.spec:
            with self.store.transaction():
                self.store.set_meta("config", config.to_dict())
                self.store.set_meta("spec", config.spec)
        return config

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
        """Decide and record ``content`` at ``url`` (committed when this returns)."""
        url = validate_url(url)
        fp = self.fingerprint(content, url, headers)
        return self.add_fingerprint(url, fp, fetched_at=fetched_at, priority=priority)

    def add_many(self, pages: Iterable[Page | tuple[str, bytes | str]]) -> list[Verdict]:
        """Add a batch in one transaction; pages may match earlier pages of the same batch.

        A page that cannot be read gets a verdict with status ``error`` and does not stop
        the batch."""
        prepared: list[tuple[str, Fingerprint | None, float, float | None, str | None]] = []
        for item in pages:
            page = item if isinstance(item, Page) else Page(*item)
            try:
                url = validate_url(page.url)
                when, priority = _timestamp(page.fetched_at), _priority(page.priority)
                prepared.append((url, self.fingerprint(page.content, url, page.headers), when, priority, None))
            except NeardupError as exc:
                prepared.append((str(page.url), None, 0.0, None, str(exc)))
        out: list[Verdict] = []
        with self._learning(), self._writing():
            for url, fp, when, priority, error in prepared:
                if fp is None:
                    out.append(Verdict(status="error", url=url, error=error))
                else:
                    out.append(self.add_fingerprint(url, fp, fetched_at=when, priority=priority))
        return out

    def check_fingerprint(self, url: str, fp: Fingerprint) -> Verdict:
        """:meth:`check` for a fingerprint computed elsewhere (same spec required)."""
        self._check_spec(fp)
        url = validate_url(url)
        with self.store.reading():
            found = self.store.lookup(url, None if fp.empty else fp.digest)
            self.mirror.sync((found.first, found.last))
            return self._check_synced(url, fp, found.own, found.same)

    def _check_synced(self, url: str, fp: Fingerprint, own: PageRecord | None, same: PageRecord | None,
                      fetched_url: str | None = None) -> Verdict:
        """The verdict for ``fp`` at ``url``, given the page stored at ``url`` and the page
        with the same digest (:meth:`Store.lookup`), with the index already in sync."""
        now = time.time()
        revisit = self._revisit(url, fp, own, now) if own is not None else None
        base: dict[str, Any] = dict(url=url, digest=fp.digest, simhash=fp.simhash_hex, title=fp.title,
                                    page_id=own.id if own else None, fetched_url=fetched_url,
                                    **self._version_fields(revisit))
        if own is not None and revisit is not None and revisit.keep:
            chosen = None
            if own.cluster_id is not None:  # the canonical as if the new version replaced the stored one
                candidate = Member(int(own.id or 0), url, own.first_seen, fp.canonical_url, own.priority)
                chosen = self._cluster_change(own.cluster_id, _member(own), candidate, None, write=False)
            return self._kept_verdict(own, chosen, base)
        decision = self._decide(url, fp, same, exclude=own)
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
        # the canonical as if the page joined (replacing its stored version): no member read
        leave = _member(own) if own is not None and own.cluster_id == match.cluster_id else None
        chosen = self._cluster_change(match.cluster_id, leave, candidate, None, write=False)
        assert chosen is not None
        return Verdict(status=status, match_id=match.id, match_url=match.url, distance=distance,
                       cluster_id=match.cluster_id, canonical_id=chosen.id if chosen.id >= 0 else None,
                       canonical_url=chosen.url, **base)

    def _revisit(self, url: str, fp: Fingerprint, own: PageRecord, now: float) -> _Revisit:
        """Compare a re-fetch of ``url`` with its stored version ``own``: ``unchanged`` (same
        digest) or ``changed``; the URL keeps its first decision while the new version is
        the same content or a near copy of the stored one (:func:`matching.match` with the
        URL's thresholds) in the same cluster."""
        since = now - own.fetched_at
        if own.digest == fp.digest and (own.status == "empty") == fp.empty:
            return _Revisit("unchanged", 0, 1.0, since, keep=True)
        k, verify = self.thresholds(url)
        new_side, old_side = Side.of(fp, url), Side.of_record(own)
        outcome = match(new_side, old_side, k, verify)
        keep = outcome.status is not None and own.cluster_id is not None
        score = outcome.score if outcome.score is not None else sketch_score(new_side, old_side)
        return _Revisit("changed", outcome.distance, score, since, keep)

    @staticmethod
    def _version_fields(revisit: _Revisit | None) -> dict[str, Any]:
        if revisit is None:
            return {}
        return {"version": revisit.version, "previous_distance": revisit.distance,
                "previous_score": None if revisit.score is None else round(revisit.score, 4),
                "since_last_fetch": revisit.since}

    def _kept_verdict(self, own: PageRecord, canonical: Member | None, base: dict[str, Any]) -> Verdict:
        """The verdict of a re-fetch that keeps its URL's first decision: the stored status,
        match and cluster (and the cluster's canonical, ``canonical`` when just chosen)."""
        match_url = None
        if own.matched_id is not None:
            found = self.store.member(own.matched_id)
            match_url = found[1] if found is not None else None
        if canonical is None and own.cluster_id is not None:
            row = self.store.cluster_row(own.cluster_id)
            if row is not None and row.canonical_id is not None:
                found = self.store.member(row.canonical_id)
                canonical = Member(*found) if found is not None else None
        return Verdict(status=own.status, match_id=own.matched_id if match_url is not None else None,
                       match_url=match_url, distance=own.distance if match_url is not None else None,
                       cluster_id=own.cluster_id, canonical_id=canonical.id if canonical else None,
                       canonical_url=canonical.url if canonical else None, **base)

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
        url = validate_url(url)
        now = _timestamp(fetched_at)
        priority = _priority(priority)
        with self._learning(), self._writing():
            return self._record(url, fp, now, priority)

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
                    url = validate_url(url)
                    found = self.store.lookup(url, None if fp.empty else fp.digest)
                    out.append(self._check_synced(url, fp, found.own, found.same))
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
        verdict with status ``error`` and does not stop the batch."""
        out: list[Verdict] = []
        with self._learning(), self._writing():
            for item in items:
                url, fp = item[0], item[1]
                fetched_at, priority = (item[2], item[3]) if len(item) == 4 else (None, None)
                try:
                    self._check_spec(fp)
                    checked = validate_url(url)
                    when, prio = _timestamp(fetched_at), _priority(priority)
                except NeardupError as exc:
                    out.append(Verdict(status="error", url=str(url), error=str(exc)))
                    continue
                out.append(self._record(checked, fp, when, prio))
        return out

    def expire(self, older_than: float) -> int:
        """Forget pages last fetched more than ``older_than`` seconds ago; returns how many.

        In batches of :data:`EXPIRE_BATCH` pages (one read and one delete statement each);
        each cluster that lost members is updated once at the end, re-choosing its canonical
        from scratch only when the canonical itself left (or lost the link naming it)."""
        older_than = _seconds(older_than, "older_than") or 0.0
        if older_than < 0:
            raise ConfigError(f"older_than must be >= 0 seconds, got {older_than}")
        total = 0
        with self._learning(), self._writing():
            before = time.time() - older_than
            gone: dict[int, tuple[set[int], dict[str, int]]] = {}  # cluster -> (ids, link counts)
            while True:
                recs = self.store.expired_batch(before, EXPIRE_BATCH)
                if not recs:
                    break
                old = {r.id: r for r in recs if r.id is not None}
                self.store.delete_pages(list(old))
                if self._learner is not None:
                    for r in recs:
                        self._learner.forget(r.url)
                self.mirror.reconcile({r.simhash for r in recs if r.status != "empty"}, old)
                for r in recs:
                    if r.cluster_id is not None:
                        ids, links = gone.setdefault(r.cluster_id, (set(), {}))
                        ids.add(int(r.id or 0))
                        lk = link_key(r.canonical_link)
                        if lk is not None:
                            links[lk] = links.get(lk, 0) + 1
                total += len(recs)
            for cid in sorted(gone):
                self._cluster_lost(cid, *gone[cid])
        return total

    def cluster_info(self, cluster_id: int, at: float | None = None) -> dict[str, Any] | None:
        """A cluster's size, canonical and growth, without reading its members (None when
        there is no such cluster): ``size``, ``canonical_id``, ``canonical_url``,
        ``created_at``, ``joins`` (members that ever joined it, re-fetches not counted),
        ``last_joined_at`` (fetch time of the last join) and ``joins_per_hour``: the recent
        rate, an exponentially decayed count of joins (half-life
        :data:`~neardup.store.GROWTH_HALF_LIFE` seconds) seen at time ``at`` (default now).
        A trap (one page under endless URLs) shows as a large size and a high rate."""
        row = self.store.cluster_row(_checked_id(cluster_id, "cluster id"))
        at = _seconds(at, "at", optional=True)
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

    # -- before the fetch: learned URL rules, per-host signals -------------------------
    @contextmanager
    def _learning(self) -> Iterator[None]:
        """Around a write: a write that fails (rolled back) leaves the learner's
        observations unreliable, so it is rebuilt from the store at its next use."""
        try:
            yield
        except BaseException:
            self._learner = None
            raise

    def _rule_learner(self) -> RuleLearner:
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
        return self._rule_learner().rules()

    def rules(self, host: str | None = None) -> list[Rule]:
        """The learned URL rules (:mod:`neardup.urlrules`) of ``host``, or of every host:
        each with its ``support`` (merges of different URLs with one content), an example
        pair and ``describe()``. A rule is used only with at least :attr:`rule_min_support`
        merges and no counter-example, and is dropped as soon as a fetch contradicts it."""
        return self._rule_learner().rules(host)

    def should_fetch(self, url: str, *, max_age: float | None = None,
                     host_max_duplicate_rate: float | None = None, host_min_pages: int = 20) -> FetchDecision:
        """Whether a crawler should fetch ``url``, before fetching it, and why
        (:class:`FetchDecision`). In order: a stored URL whose content has its canonical
        elsewhere is skipped (``known-duplicate``), a stored canonical is fetched again
        (``known``) unless fetched less than ``max_age`` seconds ago, or without ``max_age``
        before its ``next_fetch`` (``fresh``); a URL that
        the learned rules of its host rewrite to a known page is skipped (``rule``, naming
        the rules); with ``host_max_duplicate_rate``, a URL of a host with at least
        ``host_min_pages`` pages of which that share or more are duplicates is skipped
        (``host-budget``); anything else is fetched (``unknown``). Nothing is written.

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
        url = validate_url(url)
        max_age = _seconds(max_age, "max_age", optional=True)
        if host_max_duplicate_rate is not None:
            rate = _seconds(host_max_duplicate_rate, "host_max_duplicate_rate")
            if rate is None or not 0.0 <= rate <= 1.0:
                raise ConfigError(f"host_max_duplicate_rate must be in [0, 1], got {host_max_duplicate_rate!r}")
        learner = self._rule_learner()
        with self.store.reading():
            own = self.store.page_by_url(url)
            if own is not None and own.status != "empty" and own.cluster_id is not None:
                info = self.cluster_info(own.cluster_id)
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
                info = self.cluster_info(found.cluster_id)
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
        """Per-host duplicate signals, sorted by ``sort`` (``duplicate_rate``, ``duplicates``,
        ``pages`` or ``distinct_contents``; largest first, then host name), the ``top`` first.

        Each: ``host``, ``pages`` (stored URLs; with ``window``: only those fetched in the
        last ``window`` seconds before ``at``), the counts by status (``new``, ``exact``,
        ``near``, ``partial``, ``empty``), ``duplicates`` (exact + near),
        ``duplicate_rate``, ``distinct_contents`` (clusters behind the host's URLs),
        ``largest_cluster`` (``id``, ``urls_from_host``, ``size``, ``joins_per_hour`` from
        :meth:`cluster_info`), ``trap`` (a cluster holds at least ``trap_members`` of the
        host's URLs: many URLs, one content) and ``budget_factor``: the share of the host's
        URLs with content that brought distinct content (at least :data:`MIN_BUDGET_FACTOR`;
        empty pages are not counted), by which a crawler may scale the host's budget;
        ``refetched`` (URLs fetched more than once), ``changed_pages`` (of those, URLs whose
        content changed) and ``changes_per_day``: the host's pooled change rate, changes seen
        per day that its re-fetched URLs were watched (None before a re-fetch). Statuses are
        each URL's decision against the other URLs: a re-fetch is never counted as a
        duplicate of itself. One pass over the stored pages."""
        if sort not in ("duplicate_rate", "duplicates", "pages", "distinct_contents"):
            raise ConfigError(f"unknown sort {sort!r}; choose duplicate_rate, duplicates, pages or distinct_contents")
        at, window = _seconds(at, "at", optional=True), _seconds(window, "window", optional=True)
        if window is not None and window < 0:
            raise ConfigError(f"window must be >= 0 seconds, got {window}")
        now = time.time() if at is None else float(at)
        since = None if window is None else now - float(window)
        wanted = host.lower() if host is not None else None
        per: dict[str, dict[str, Any]] = {}
        with self.store.reading():
            for rec in self.store.iter_pages():
                if (wanted is not None and rec.host != wanted) or (since is not None and rec.fetched_at < since):
                    continue
                h = per.get(rec.host)
                if h is None:
                    h = per[rec.host] = {"counts": {}, "clusters": {}, "refetched": 0, "changed": 0,
                                         "changes": 0, "span": 0.0}
                h["counts"][rec.status] = h["counts"].get(rec.status, 0) + 1
                if rec.fetches > 1:
                    h["refetched"] += 1
                    h["changed"] += rec.change_count > 0
                    h["changes"] += rec.change_count
                    h["span"] += max(0.0, rec.fetched_at - rec.first_seen)
                if rec.cluster_id is not None and rec.status != "empty":
                    h["clusters"][rec.cluster_id] = h["clusters"].get(rec.cluster_id, 0) + 1
            rows = []
            for name, h in per.items():
                counts = h["counts"]
                pages = sum(counts.values())
                dups = counts.get("exact", 0) + counts.get("near", 0)
                distinct = len(h["clusters"])
                rows.append({"host": name, "pages": pages,
                             **{s: counts.get(s, 0) for s in STATUSES if s != "error"},
                             "duplicates": dups, "duplicate_rate": round(dups / pages, 4) if pages else 0.0,
                             "distinct_contents": distinct, "refetched": h["refetched"],
                             "changed_pages": h["changed"],
                             "changes_per_day": round(h["changes"] * 86400.0 / h["span"], 4) if h["span"] else None,
                             "_clusters": h["clusters"]})
            rows.sort(key=lambda r: (-r[sort], r["host"]))
            if top is not None:
                rows = rows[:max(0, int(top))]
            for r in rows:
                clusters = r.pop("_clusters")
                largest = None
                if clusters:
                    cid, n = min(clusters.items(), key=lambda kv: (-kv[1], kv[0]))
                    info = self.cluster_info(cid, at=now) or {}
                    largest = {"id": cid, "urls_from_host": n, "size": info.get("size"),
                               "joins_per_hour": info.get("joins_per_hour")}
                r["largest_cluster"] = largest
                r["trap"] = largest is not None and largest["urls_from_host"] >= trap_members
                contents = r["pages"] - r["empty"]  # an empty page is no duplicate: not waste
                share = r["distinct_contents"] / contents if contents > 0 else 1.0
                r["budget_factor"] = round(max(MIN_BUDGET_FACTOR, min(1.0, share)), 4)
        return rows

    def host(self, name: str, *, window: float | None = None, at: float | None = None,
             trap_members: int = DEFAULT_TRAP_MEMBERS) -> dict[str, Any] | None:
        """:meth:`hosts` for one host (None when it has no stored page), with its learned
        URL rules under ``rules``."""
        rows = self.hosts(window=window, at=at, trap_members=trap_members, host=name)
        if not rows:
            return None
        row = rows[0]
        row["rules"] = [r.to_dict() for r in self.rules(row["host"])]
        return row

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
        key = validate_url(url)
        with self.store.reading():
            own = self.store.page_by_url(key)
            if own is None or own.id is None:
                return None
            versions = self.store.versions(own.id)
        return UrlHistory(url=own.url, fetched_url=own.fetched_url, first_seen=own.first_seen,
                          fetched_at=own.fetched_at, fetches=own.fetches, change_count=own.change_count,
                          last_changed_at=own.last_changed_at, change_rate=own.change_rate,
                          next_fetch=own.next_fetch,
                          versions=tuple(v.to_dict(self.config.bits) for v in versions))

    def page(self, page_id: int) -> PageRecord | None:
        """The stored page with this id (None when there is none)."""
        return self.store.page_by_id(_checked_id(page_id, "page id"))

    def cluster(self, cluster_id: int) -> list[PageRecord]:
        """The members of a cluster (empty when there is no such cluster)."""
        return self.store.cluster_members(_checked_id(cluster_id, "cluster id"))

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
        _text_fields_encodable(fp)

    def _decide(self, url: str, fp: Fingerprint, same: Any = _FETCH, exclude: PageRecord | None = None) -> _Decision:
        """empty -> exact (digest) -> near (SimHash <= k and/or MinHash >= threshold, the
        best match first) -> partial (containment) -> new, against the stored pages other
        than ``exclude`` (the URL's own stored version: a URL is never its own duplicate).
        ``same``: the page with the same digest when the caller has read it
        (:meth:`Store.lookup`), else fetched."""
        if fp.empty:
            return _Decision("empty")
        side = Side.of(fp, url)
        k, verify = self.thresholds(url)
        own_id = exclude.id if exclude is not None else None
        if same is _FETCH or (same is not None and same.id == own_id):
            same = self.store.page_by_digest(fp.digest)
            if same is not None and same.id == own_id:
                same = None  # (its digest is the new one's: the caller kept its decision)
        if same is not None and match(side, Side.of_record(same), k, verify).status == "exact":
            return _Decision("exact", same, 0, "digest", 1.0)
        sig = fp.minhash.signature if fp.minhash is not None else None
        found: dict[int, set[str]] = {}
        if self.method in ("simhash", "both"):
            for page_id, _ in self.mirror.search(fp.simhash, k):
                found.setdefault(page_id, set()).add("simhash")
        if self.method in ("minhash", "both") and sig is not None:
            for page_id, _ in self.mirror.query(sig, self.threshold):
                found.setdefault(page_id, set()).add("minhash")
        if exclude is not None and own_id in found:
            # the index holds one page per SimHash value: another page with the value of the
            # URL's stored version stands in for it
            methods_of_own = found.pop(own_id)
            other = self.store.lowest_live(exclude.simhash, self.config.bits, exclude=own_id)
            if other is not None:
                found.setdefault(other, set()).update(methods_of_own)
        ranked = []
        recs = self.store.pages_by_ids(list(found))  # one statement; one page per SimHash value
        for page_id, methods in found.items():
            rec = recs.get(page_id)
            if rec is None:
                continue
            verdict = match(side, Side.of_record(rec), k, verify)
            if verdict.reason in ("empty", "boilerplate"):
                continue
            if verdict.status is None:
                methods = methods - {"simhash"}  # a SimHash candidate the sketch rejects
                if not methods:
                    continue
            distance, score = verdict.distance, verdict.score
            stored = self.mirror.signature(rec) if sig is not None else None
            if sig is not None and stored is not None:
                score = jaccard(sig, stored.signature)
            # best first: highest Jaccard estimate when known, then smallest distance, oldest
            ranked.append((-(score if score is not None else -1.0), distance, page_id, rec, methods, score))
        if ranked:
            _, distance, _, rec, methods, score = min(ranked, key=lambda r: r[:3])
            return _Decision("near", rec, distance, "+".join(sorted(methods)), score)
        if self.containment is not None and fp.minhash is not None:
            hits = self.mirror.query(fp.minhash.signature, self.containment, set_size=fp.minhash.set_size,
                                     by="containment")
            recs = self.store.pages_by_ids([page_id for page_id, _ in hits if page_id != own_id])
            for page_id, score in hits:
                rec = recs.get(page_id)
                if rec is not None and (rec.set_size or 0) >= fp.minhash.set_size:
                    return _Decision("partial", rec, hamming(rec.simhash, fp.simhash), "minhash", score)
        return _Decision("new")

    def _record(self, url: str, fp: Fingerprint, now: float, priority: float | None,
                fetched_url: str | None = None) -> Verdict:
        own = self.store.page_by_url(url)
        revisit = self._revisit(url, fp, own, now) if own is not None else None
        kept = own is not None and revisit is not None and revisit.keep
        decision = _Decision(own.status) if kept and own is not None else self._decide(url, fp, exclude=own)
        status, match, distance = decision.status, decision.match, decision.distance
        old_cluster = own.cluster_id if own else None
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
        else:
            cluster_id = None
        history = self._history(own, fp, now, revisit)
        rec = PageRecord(
            url=url, host=host_of(url), first_seen=own.first_seen if own else now, fetched_at=now,
            digest=fp.digest, simhash=fp.simhash, spec=fp.spec, length=fp.length, title=fp.title,
            canonical_link=fp.canonical_url, language=fp.language, status=status,
            matched_id=own.matched_id if kept and own else (match.id if match else None),
            distance=own.distance if kept and own else distance, cluster_id=cluster_id,
            priority=priority if priority is not None else (own.priority if own else None),
            signature=fp.minhash.to_bytes() if fp.minhash is not None else None,
            set_size=fp.minhash.set_size if fp.minhash is not None else None,
            sketch=fp.sketch, fetched_url=fetched_url, **history,
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
                                                  None if revisit is None else revisit.score), self.config.bits)
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
        joining = _member(rec)
        leaving = _member(own) if own is not None and old_cluster is not None else None
        chosen: Member | None = None
        if old_cluster is not None and old_cluster == cluster_id:
            chosen = self._cluster_change(cluster_id, leaving, joining, now, write=True)
        else:
            if old_cluster is not None:
                self._cluster_change(old_cluster, leaving, None, now, write=True)
            if cluster_id is not None:
                chosen = self._cluster_change(cluster_id, None, joining, now, write=True)
        if self._learner is not None:
            self._learner.observe(url, cluster_id if status != "empty" else None)
        base: dict[str, Any] = dict(url=url, page_id=rec.id, digest=fp.digest, simhash=fp.simhash_hex,
                                    title=fp.title, fetched_url=fetched_url, next_fetch=rec.next_fetch,
                                    **self._version_fields(revisit))
        if kept and own is not None:
            return self._kept_verdict(rec, chosen, base)
        return Verdict(
            status=status, match_id=match.id if match else None,
            match_url=match.url if match else None, distance=distance, cluster_id=cluster_id,
            canonical_id=chosen.id if chosen else None, canonical_url=chosen.url if chosen else None,
            method=decision.method, score=decision.score, **base,
        )

    def _history(self, own: PageRecord | None, fp: Fingerprint, now: float,
                 revisit: _Revisit | None) -> dict[str, Any]:
        """The fetch counters and schedule of a page after this fetch: its stored history
        (:meth:`Store.versions`) and this fetch through :func:`neardup.crawl.schedule`."""
        if own is None or revisit is None or own.id is None:
            return {"fetches": 1, "change_count": 0, "last_changed_at": None}
        changed = revisit.version == "changed"
        rows = self.store.versions(own.id, HISTORY_LIMIT - 1)
        rate, next_at = schedule([*(r.fetched_at for r in rows), now], [*(r.changed for r in rows), changed],
                                 min_interval=self.revisit_min, max_interval=self.revisit_max)
        return {"fetches": own.fetches + 1, "change_count": own.change_count + int(changed),
                "last_changed_at": now if changed else own.last_changed_at, "change_rate": rate,
                "next_fetch": next_at}

    # -- clusters: the canonical kept incrementally ---------------------------------------
    def _cluster_change(self, cluster_id: int, leave: Member | None, join: Member | None,
                        now: float | None, *, write: bool) -> Member | None:
        """The canonical of ``cluster_id`` once ``leave`` has left it and ``join`` joined it
        (either may be None; both: one member replaced by its new version), stored with the
        size, link counts and growth when ``write`` (then the pages table already holds the
        change), else only predicted (:meth:`check`).

        A member's rank depends only on itself and on whether some member names its URL
        (:meth:`CanonicalPolicy.key`), and joining only adds names, so the new canonical is
        the best of: the old canonical, the newcomer, and the members its link names for the
        first time in this cluster (a few reads, whatever the cluster's size). The members
        are read (:meth:`_recompute`) only when the canonical itself leaves or changes, or
        loses the last link naming it."""
        row = self.store.cluster_row(cluster_id)
        if row is None:
            row = ClusterRow(cluster_id, None, 0, now if now is not None else time.time())
        policy = self.policy
        deltas: dict[str, int] = {}
        counts: dict[str, int] = {}

        def count(key: str) -> int:  # members naming ``key`` after this change
            if key not in counts:
                counts[key] = self.store.link_counts(cluster_id, [key]).get(key, 0)
            return counts[key] + deltas.get(key, 0)

        size, dirty, best = row.size, False, None
        unchanged = leave is not None and join is not None and _same_for_policy(leave, join)
        if leave is not None and not unchanged:
            size -= 1
            lk = link_key(leave.canonical_link)
            if lk is not None:
                deltas[lk] = deltas.get(lk, 0) - 1
            dirty = leave.id == row.canonical_id
        if not dirty and row.canonical_id is not None:
            found = self.store.member(row.canonical_id)
            best = Member(*found) if found is not None else None
            dirty = best is None
            if (best is not None and leave is not None and not unchanged and policy.uses_links
                    and link_key(leave.canonical_link) == url_key(best.url)
                    and count(url_key(best.url)) <= 0):
                dirty = True  # the canonical lost the link that named it
        if join is not None and not unchanged:
            size += 1
            jk = link_key(join.canonical_link)
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
                best = min(cands.values(), key=lambda m: policy.key(
                    m, policy.uses_links and count(url_key(m.url)) > 0))
        if dirty and size > 0:
            best, size = self._recompute(cluster_id, deltas, join)
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
            self.store.set_cluster(cluster_id, best.id if best is not None else None, size,
                                   (joins, joined_at, recent))
        return best

    def _cluster_lost(self, cluster_id: int, ids: set[int], links: Mapping[str, int]) -> None:
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
            elif self.policy.uses_links and url_key(best.url) in links:
                key = url_key(best.url)
                dirty = self.store.link_counts(cluster_id, [key]).get(key, 0) <= 0
        if dirty and size > 0:
            best, size = self._recompute(cluster_id)
        self.store.set_cluster(cluster_id, best.id if best is not None and size > 0 else None, size)

    def _recompute(self, cluster_id: int, deltas: Mapping[str, int] | None = None,
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
            return policy.key(m, policy.uses_links and url_key(m.url) in named)

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


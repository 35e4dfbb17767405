"""The values the Detector takes and gives, and the defaults it decides with: verdicts,
pages, fetch decisions, the measured default thresholds, and the checks every value given to
the library passes at the door (ids, times, numbers: typed errors, never an OverflowError or
a silent NaN).

Every front end (the Detector, the Client, the service, the CLI, batch and Spark) imports its
value types and defaults from here.

>>> Verdict(status="new", url="https://a.example/").is_duplicate
False
>>> checked_id(2**63, "page id")
Traceback (most recent call last):
...
neardup.errors.ConfigError: page id must be between 0 and 9223372036854775807, got 9223372036854775808
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from neardup.errors import ConfigError

STATUSES = ("new", "exact", "near", "partial", "empty", "error")
#: the statuses of a page decided a copy of another
DUPLICATE_STATUSES = ("exact", "near")
METHODS = ("simhash", "minhash", "both")
#: Default Hamming threshold per fingerprint spec version, the measured operating points
#: (docs/quality.md). Version 1 (no IDF, no sketch): k = 7, where false positives start.
#: Version 2: IDF weights spread unrelated pages apart but same-content pairs too, so the
#: candidate radius is wider and every candidate is confirmed by the sketch. Version 3 (the
#: hybrid extractor, with the sketch bands of neardup.index.bands bringing pairs at any distance):
#: k = 3, chosen by benchmarks/candidates.py: every k from 0 to 12 finds the same real pairs
#: and within 0.25 point the same realistic edits once the bands are on, and a query at k = 3
#: costs about a hundredth of one at k = 12 at 10^7 stored (docs/quality.md, Candidate stage).
DEFAULT_K_BY_VERSION = {1: 7, 2: 12, 3: 3}
#: ... when the sketch bands are off (``bands=False``): the SimHash alone brings the pairs
SIMHASH_ONLY_K_BY_VERSION = {1: 7, 2: 12, 3: 12}
DEFAULT_K = DEFAULT_K_BY_VERSION[3]


def default_k(version: int = 3, bands: bool = True) -> int:
    """The default Hamming threshold for fingerprint spec ``version``, with or without the
    sketch bands.

    >>> default_k(3), default_k(3, bands=False), default_k(1)
    (3, 12, 7)
    """
    return (DEFAULT_K_BY_VERSION if bands else SIMHASH_ONLY_K_BY_VERSION)[version]
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
    flag: ``soft-404`` or ``template-only`` when the page is its host's error or empty
        template (a short or empty main text the host serves under many URLs, in that
        template's structure: :mod:`neardup.crawl.templates`): do not index it; None otherwise.
        Decided by :meth:`Detector.add` (spec version 3 fingerprints).
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
    flag: str | None = None

    @property
    def is_duplicate(self) -> bool:
        """Decided a copy of another page (``exact`` or ``near``)."""
        return self.status in DUPLICATE_STATUSES

    @property
    def is_canonical(self) -> bool:
        """The page is its cluster's canonical copy (a duplicate may be one: the copy the
        cluster's pages name with rel=canonical): a crawler keeps it and follows its links.

        >>> Verdict(status="near", url="https://a.example/i", page_id=2, canonical_id=2).is_canonical
        True
        """
        return self.page_id is not None and self.page_id == self.canonical_id

    def to_dict(self) -> dict[str, Any]:
        # every field is a scalar: a shallow copy (dataclasses.asdict deep-copies, ~10x slower)
        return {name: getattr(self, name) for name in _VERDICT_FIELDS}


_VERDICT_FIELDS = tuple(Verdict.__dataclass_fields__)


@dataclass(frozen=True)
class Page:
    """One page of a batch for :meth:`Detector.add_many`. ``fetched_at`` (default: now) is
    checked when the page is added (:func:`checked_time`: a time outside 1970-01-01 to
    9999-12-31 makes that page's verdict an ``error``). ``revisit``: a fetch that found the
    stored content unchanged without sending it (an HTTP 304, a WARC revisit record), no
    content: :meth:`Detector.add_revisit` (:mod:`neardup.detector.revisits`). ``refers_to``:
    a revisit that repeats another URL's capture (a WARC ``WARC-Refers-To-Target-URI`` not its
    own, and ``refers_to_date`` its ``WARC-Refers-To-Date``): the batch paths read it as a
    capture of that content under this URL (:mod:`neardup.batch.revisits`); the online
    Detector, which keeps no other URL's bytes for this one, answers ``error``."""

    url: str
    content: bytes | str
    headers: Mapping[str, str] | None = None
    fetched_at: float | None = None
    priority: float | None = None
    revisit: bool = False
    refers_to: str | None = None
    refers_to_date: float | None = None


#: The range of every time given to neardup (a page's ``fetched_at``, ``at``): POSIX seconds
#: from :data:`MIN_TIME`, 1970-01-01T00:00:00Z, to :data:`MAX_TIME`, 9999-12-31T23:59:59Z,
#: finite (the span a datetime, a store and the report can all hold). A bool is not a time.
#: :func:`checked_time` refuses anything else at the door with a :class:`ConfigError`.
MIN_TIME = 0.0
MAX_TIME = 253402300799.0
TIME_RANGE = "1970-01-01T00:00:00Z (0) to 9999-12-31T23:59:59Z (253402300799)"


def checked_time(value: object, what: str = "fetched_at") -> float:
    """A time given to the library, checked at the door: POSIX seconds (int or float) or a
    :class:`datetime`, in ``[MIN_TIME, MAX_TIME]``; :class:`ConfigError` otherwise.

    >>> checked_time(1e18)
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: fetched_at must be a time from 1970-01-01T00:00:00Z (0) to
    9999-12-31T23:59:59Z (253402300799) in POSIX seconds or a datetime, got 1e+18
    """
    problem = f"{what} must be a time from {TIME_RANGE} in POSIX seconds or a datetime, got {short_repr(value)}"
    if isinstance(value, bool):
        raise ConfigError(problem)
    try:
        out = value.timestamp() if isinstance(value, datetime) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        raise ConfigError(problem) from None
    if not MIN_TIME <= out <= MAX_TIME:  # (NaN fails both comparisons)
        raise ConfigError(problem)
    return out


def timestamp(value: float | datetime | None) -> float:
    """A page's fetch time: now for None, else :func:`checked_time`."""
    return time.time() if value is None else checked_time(value, "fetched_at")


def priority_value(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"priority must be a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"priority must be a number, got {short_repr(value)}") from None
    if out != out:
        raise ConfigError("priority must be a number, got NaN")
    return out


def finite_or_none(value: float | None) -> float | None:
    """``value`` when it is a finite number, else None: what a figure read back from a store
    written before the checks at the door (an infinite change rate) is shown as."""
    return value if value is not None and math.isfinite(value) else None


#: the largest id a store hands out (a signed 64-bit integer)
MAX_ID = 2**63 - 1


def checked_id(value: object, what: str) -> int:
    """An id given to the library, checked at the door: an integer in ``[0, MAX_ID]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer, got {short_repr(value)}")
    if not 0 <= value <= MAX_ID:
        raise ConfigError(f"{what} must be between 0 and {MAX_ID}, got {short_repr(value)}")
    return value


def seconds(value: object, what: str, *, optional: bool = False) -> float | None:
    """A duration or time given to the library: a finite number (``>= 0`` for durations);
    NaN and infinities are refused."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number of seconds, got {value!r}")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what} must be a number of seconds, got {short_repr(value)}") from None
    if not math.isfinite(out):
        raise ConfigError(f"{what} must be a finite number of seconds, got {value!r}")
    return out


def duration(value: object, what: str, *, optional: bool = False) -> float | None:
    """A duration given to the library (``max_age``, ``window``, ``older_than``): a finite
    number of seconds ``>= 0`` (:func:`seconds`); :class:`ConfigError` otherwise."""
    out = seconds(value, what, optional=optional)
    if out is not None and out < 0:
        raise ConfigError(f"{what} must be >= 0 seconds, got {short_repr(value)}")
    return out


def checked_count(value: object, what: str, least: int) -> int:
    """A count given to the library (``host_min_pages``, ``trap_members``): an integer
    ``>= least`` (not a bool); :class:`ConfigError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer >= {least}, got {short_repr(value)}")
    if value < least:
        raise ConfigError(f"{what} must be >= {least}, got {short_repr(value)}")
    return value


def short_repr(value: object) -> str:
    """``repr(value)`` cut to 80 characters (a message stays one short line)."""
    if isinstance(value, int) and value.bit_length() > 200:  # (repr fails past 4,300 digits)
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class FetchDecision:
    """The answer of :meth:`Detector.should_fetch`: ``fetch`` (True/False) and ``reason``:

    - ``unknown``: nothing is known of the URL (fetch);
    - ``known``: the URL is stored and holds the canonical copy of its content, or content
      of its own (fetch: a re-crawl; ``fetched_at`` says when it was last fetched);
    - ``fresh``: as ``known`` but fetched less than ``max_age`` seconds ago, or, without
      ``max_age``, before ``next_fetch``, when its content is next expected to change
      (skip; ``change_rate``: estimated changes per second, :mod:`neardup.crawl`);
    - ``known-duplicate``: the URL is stored, was decided a copy (``exact`` or ``near``) and
      its cluster's canonical is another page, ``canonical_url`` (skip: re-crawls skip copies;
      fetch ``canonical_url`` instead). A cluster's original (``new``) is never skipped so, even
      where rel=canonical made one of its copies the canonical;
    - ``rule``: learned URL rules of its host (``rules``, :mod:`neardup.crawl.urlrules`) rewrite it
      to a known page, ``known_url`` (skip);
    - ``series``: a new member of a numbered trap (near-identical pages under a changing
      number, :mod:`neardup.crawl.series`) whose explore budget is spent (``rules`` names it
      ``series:PATTERN``; skip);
    - ``host-budget``: its host is over its duplicate budget (``host_duplicate_rate``; skip).

    ``url`` is the URL as it was asked about, ``key`` its normalised form, its key in the
    store (:func:`neardup.urls.normalize_url`): two spellings of one URL (``/a`` and
    ``/a?utm_source=feed``) get answers with their own ``url`` and the same ``key``.
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
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "key": self.key, "fetch": self.fetch, "reason": self.reason,
                "known_url": self.known_url, "canonical_url": self.canonical_url, "cluster_id": self.cluster_id,
                "rules": list(self.rules), "fetched_at": self.fetched_at,
                "host_duplicate_rate": self.host_duplicate_rate, "next_fetch": self.next_fetch,
                "change_rate": self.change_rate}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FetchDecision":
        fields = cls.__dataclass_fields__
        values = {k: v for k, v in data.items() if k in fields}
        values["rules"] = tuple(values.get("rules") or ())
        return cls(**values)


#: how many pages of one cluster from one host make the host a trap (:meth:`Detector.hosts`)
DEFAULT_TRAP_MEMBERS = 10
#: the least ``trap_members`` (:meth:`Detector.hosts`; the CLI's ``--trap-members``, the service's)
MIN_TRAP_MEMBERS = 1
#: pages a host needs before ``host_max_duplicate_rate`` applies (:meth:`Detector.should_fetch`)
DEFAULT_HOST_MIN_PAGES = 20
#: the least ``host_min_pages`` (:meth:`Detector.should_fetch`, the CLI's ``--host-min-pages``, the service's)
MIN_HOST_PAGES = 1
#: the smallest budget factor :meth:`Detector.hosts` suggests
MIN_BUDGET_FACTOR = 0.05

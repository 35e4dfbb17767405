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
        return self.status in ("exact", "near")

    def to_dict(self) -> dict[str, Any]:
        # every field is a scalar: a shallow copy (dataclasses.asdict deep-copies, ~10x slower)
        return {name: getattr(self, name) for name in _VERDICT_FIELDS}


_VERDICT_FIELDS = tuple(Verdict.__dataclass_fields__)


@dataclass(frozen=True)
class Page:
    """One page of a batch for :meth:`Detector.add_many`."""

    url: str
    content: bytes | str
    headers: Mapping[str, str] | None = None
    fetched_at: float | None = None
    priority: float | None = None


def timestamp(value: float | datetime | None) -> float:
    if value is None:
        return time.time()
    try:
        out = value.timestamp() if isinstance(value, datetime) else float(value)
    except (TypeError, ValueError, OverflowError, OSError):
        raise ConfigError(f"fetched_at must be a POSIX timestamp or datetime, got {short_repr(value)}") from None
    if out != out or out in (float("inf"), float("-inf")):
        raise ConfigError(f"fetched_at must be a finite timestamp, got {value!r}")
    return out


def priority_value(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"priority must be a number, got {short_repr(value)}") from None
    if out != out:
        raise ConfigError("priority must be a number, got NaN")
    return out


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
    - ``known-duplicate``: the URL is stored, its content is in a cluster whose canonical is
      another page, ``canonical_url`` (skip: re-crawls skip copies);
    - ``rule``: learned URL rules of its host (``rules``, :mod:`neardup.crawl.urlrules`) rewrite it
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

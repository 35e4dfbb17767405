"""Choose the match thresholds on your own labelled pairs.

Give :func:`load_pairs` a file of page pairs labelled *same* or *different*; :func:`tune`
fingerprints both pages of every pair once, applies THE match rule
(:func:`neardup.matching.match`: empty, same-host repeated boilerplate, equal digest, Hamming
distance ``<= k`` then the sketch Jaccard ``>= verify``) and reports precision, recall and F1
at every ``k`` in 0..20 and every verify threshold in :data:`VERIFY_VALUES` (and, when the
fingerprints carry MinHash signatures, at every MinHash threshold in
:data:`MINHASH_THRESHOLDS`). It recommends an operating point **with a one-step margin**: the
precision target must hold at the point *and* one step looser on each axis (``k + 1``; the
next lower verify or MinHash threshold), because thresholds tuned on a few hundred pairs
sit on a noisy edge. Among those points it takes the best recall, then the best precision,
then the ``k`` nearest the default (the smaller of two as near), then the verify closest to
the default: where every ``k`` ties (pairs any threshold separates) the default is kept. Hosts with enough pairs of both
labels (:data:`MIN_HOST_PAIRS`, :data:`MIN_HOST_EACH`) get their own recommendation.
:func:`apply` stores the choice in the store's settings under :data:`META_KEY`.

Pairs file formats (the extension decides: ``.tsv``, ``.csv``, ``.jsonl``/``.ndjson``):

* TSV / CSV with a header line: ``a``, ``b``, ``label``; optional ``host``, ``url_a``,
  ``url_b`` (the URLs the pages were fetched from: host for the boilerplate guard, base for
  ``rel=canonical``) and ``id`` (or ``pair_id``).
* JSONL: one object per line with the same keys; ``a`` / ``b`` may also be objects
  ``{"file": ...}``, ``{"url": ...}`` (a page in the store), ``{"html": ..., "url": ...}`` or
  ``{"text": ...}`` (inline content).

A page given as a string is: ``html:<inline HTML>`` or ``text:<inline text>``; an
``http(s)://`` URL, looked up in the store (``store=``); else a file path (relative to the
pairs file's folder; ``.html``, ``.htm``, ``.txt``, optionally ``.gz``; ``.txt`` is plain
text). Labels: ``same`` (also ``same-content``, ``duplicate``, ``near-duplicate``, ``1``,
``true``, ``yes``) or ``different`` (also ``different-content``, ``shared-boilerplate-only``,
``0``, ``false``, ``no``); ``skip`` (also ``unclear``, ``partial-overlap``) and an empty label
leave the pair out (counted). Every other problem is a :class:`PairsFormatError` naming the file
and line.

The choice stored by :func:`apply` (meta key ``thresholds``, JSON)::

    {"version": 1, "method": "simhash", "k": 12, "verify": 0.3, "threshold": null,
     "min_precision": 0.99, "pairs": 152,
     "hosts": {"news.example": {"k": 9, "verify": 0.35, "pairs": 40}}}

``method`` is ``simhash`` (``k`` and ``verify`` apply) or ``minhash`` (``threshold`` applies);
``hosts`` maps a host (as :func:`neardup.urls.host_of` writes it) to its own values. A
Detector opened without an explicit ``k`` reads it: a page of a host listed there is decided
with that host's ``k``/``verify``, others with the top-level ones (:func:`thresholds_for`; the
MinHash ``threshold`` is not applied yet).

>>> facts = PairFacts.from_arrays(same=[True, True, False], distance=[3, 9, 4],
...                               score=[0.9, 0.6, 0.1])
>>> r = tune_facts(facts, min_precision=1.0)
>>> (r.choice.k, r.choice.verify, r.choice.recall)
(9, 0.3, 1.0)
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from neardup.detector.thresholds import META_KEY, META_VERSION, apply, stored_choice, thresholds_for
from neardup.errors import NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint, fingerprint_text
from neardup.fingerprint.minhash import MinHashSignature, jaccard
from neardup.index.bands import far_verify, share_band
from neardup.matching import FAR_TITLE_VERIFY, Side, match, pair_rule, title_guarded
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY, default_k
from neardup.store.base import PageRecord, Store
from neardup.tune.pairs import LabelledPair, PageRef, PageRefError, PairsFile, PairsFormatError, load_pairs

#: Hamming thresholds measured
K_VALUES = tuple(range(21))
#: sketch (word 3-shingle Jaccard) verification thresholds measured, loosest first
VERIFY_VALUES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7)
#: MinHash Jaccard thresholds measured (when signatures exist), loosest first
MINHASH_THRESHOLDS = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))
#: the precision the recommended point must keep (at the point and one step looser)
DEFAULT_MIN_PRECISION = 0.99
#: a host gets its own recommendation with at least this many pairs ...
MIN_HOST_PAIRS = 20
#: ... and at least this many of each label
MIN_HOST_EACH = 5


T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# The shared margin rule (also used by benchmarks/quality.py)
# --------------------------------------------------------------------------------------------

def within_margin(value: T, ok: Callable[[T], bool], looser: Callable[[T], T | None]) -> bool:
    """True when ``ok`` holds at ``value`` and one step looser (``looser(value)``; None:
    there is no looser step, nothing more to check). The one-step margin of every
    recommendation here and in ``benchmarks/quality.py``."""
    if not ok(value):
        return False
    step = looser(value)
    return step is None or ok(step)


# --------------------------------------------------------------------------------------------
# Pairs
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Fingerprints and the match rule per pair
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairPage:
    """What the match rule reads of one page, and its MinHash signature when it has one."""

    side: Side
    minhash: np.ndarray | None = None


class PageSource:
    """Fingerprints the pages of pairs once each (files, inline content, store URLs)."""

    def __init__(self, config: FingerprintConfig | None = None, store: Store | None = None) -> None:
        if config is None and store is not None and store.get_meta("config") is not None:
            config = FingerprintConfig.from_dict(store.get_meta("config"))
        self.config = config or DEFAULT_CONFIG
        self.store = store
        self.cache: dict[tuple[str, str, str | None], PairPage] = {}

    def _of_fp(self, fp: Fingerprint, url: str | None) -> PairPage:
        sig = fp.minhash.signature if fp.minhash is not None else None
        return PairPage(Side.of(fp, url), sig)

    def _of_record(self, rec: PageRecord) -> PairPage:
        sig = None
        if rec.signature is not None and rec.set_size is not None and self.config.minhash is not None:
            num_perm = self.config.minhash.num_perm
            sig = MinHashSignature.from_bytes(rec.signature, rec.set_size, "", num_perm=num_perm).signature
        return PairPage(Side.of_record(rec), sig)

    def page(self, ref: PageRef) -> PairPage:
        key = ref.key()
        got = self.cache.get(key)
        if got is not None:
            return got
        if ref.kind == "url":
            if self.store is None:
                raise PageRefError(f"page {ref.value} is a URL: give the store that holds it (--db)")
            rec = self.store.page_by_url(ref.value)
            if rec is None:
                raise PageRefError(f"page {ref.value} is not in store {self.store.path}")
            got = self._of_record(rec)
        elif ref.kind == "text":
            got = self._of_fp(fingerprint_text(ref.value, self.config), ref.url)
        elif ref.kind == "html":
            got = self._of_fp(fingerprint(ref.value, url=ref.url, config=self.config), ref.url)
        else:
            from neardup.ingest.inputs import read_file  # the page reader dedup uses (.gz, size limit)
            path = Path(ref.value)
            try:
                content = read_file(path, self.config.max_bytes)
            except FileNotFoundError:
                raise PageRefError(f"page file {path} does not exist") from None
            except IsADirectoryError:
                raise PageRefError(f"page file {path} is a folder") from None
            except OSError as exc:
                raise PageRefError(f"page file {path}: cannot read ({exc.strerror or exc})") from None
            if path.name.lower().endswith((".txt", ".txt.gz")):
                got = self._of_fp(fingerprint_text(content.decode("utf-8", "replace"), self.config), ref.url)
            else:
                got = self._of_fp(fingerprint(content, url=ref.url, config=self.config), ref.url)
        self.cache[key] = got
        return got


@dataclass
class PairFacts:
    """What the match rule says of every pair, independent of the thresholds: ``blocked``
    (an empty page or the repeated-boilerplate guard: never a match), ``exact`` (equal
    digests), the SimHash ``distance``, the sketch ``score`` (NaN without sketches) and the
    MinHash estimate ``mh`` (NaN without signatures)."""

    same: np.ndarray
    blocked: np.ndarray
    exact: np.ndarray
    distance: np.ndarray
    score: np.ndarray
    mh: np.ndarray
    hosts: list[str | None]
    ids: list[str]
    #: the two sketches share a band (:func:`neardup.index.bands.share_band`): the bands bring the
    #: pair at any distance
    band: np.ndarray | None = None
    #: one host, different titles (:func:`neardup.matching.title_guarded`): beyond k the pair
    #: needs :data:`neardup.matching.FAR_TITLE_VERIFY`
    title_guard: np.ndarray | None = None
    #: decide as the Detector with its sketch bands (``DetectorSettings.bands``)
    bands: bool = True

    @classmethod
    def from_arrays(cls, same: Sequence[bool], distance: Sequence[int], score: Sequence[float | None] | None = None,
                    exact: Sequence[bool] | None = None, blocked: Sequence[bool] | None = None,
                    mh: Sequence[float | None] | None = None, hosts: Sequence[str | None] | None = None,
                    band: Sequence[bool] | None = None, title_guard: Sequence[bool] | None = None) -> PairFacts:
        n = len(same)

        def floats(values: Sequence[float | None] | None) -> np.ndarray:
            return np.array([np.nan if v is None else v for v in (values or [None] * n)], dtype=np.float64)

        return cls(np.array(same, dtype=bool), np.array(blocked or [False] * n, dtype=bool),
                   np.array(exact or [False] * n, dtype=bool), np.array(distance, dtype=np.int64),
                   floats(score), floats(mh), list(hosts or [None] * n), [str(i) for i in range(n)],
                   np.array(band or [False] * n, dtype=bool), np.array(title_guard or [False] * n, dtype=bool))

    def __len__(self) -> int:
        return len(self.same)

    def subset(self, mask: np.ndarray) -> PairFacts:
        idx = np.flatnonzero(mask)
        return PairFacts(self.same[idx], self.blocked[idx], self.exact[idx], self.distance[idx], self.score[idx],
                         self.mh[idx], [self.hosts[i] for i in idx], [self.ids[i] for i in idx],
                         None if self.band is None else self.band[idx],
                         None if self.title_guard is None else self.title_guard[idx], self.bands)

    @property
    def has_minhash(self) -> bool:
        return bool(len(self) and (~np.isnan(self.mh)).any())

    def declared(self, k: int, verify: float | None) -> np.ndarray:
        """:func:`neardup.matching.pair_rule` at ``k`` / ``verify`` (with the bands when
        :attr:`bands`), vectorised over the pairs."""
        verified = np.ones(len(self), dtype=bool) if verify is None else ~(self.score < verify)
        within = self.distance <= k
        declared = self.exact | (within & verified)
        far = far_verify(verify)
        if self.bands and far is not None and self.band is not None:
            guard = np.zeros(len(self), dtype=bool) if self.title_guard is None else self.title_guard
            need = np.where(guard, max(far, FAR_TITLE_VERIFY), far)
            declared |= ~within & self.band & (self.score >= need - 1e-12)
        return ~self.blocked & declared

    def declared_minhash(self, threshold: float) -> np.ndarray:
        """MinHash: not blocked, and equal digests or an estimated Jaccard ``>= threshold``."""
        return ~self.blocked & (self.exact | (self.mh >= threshold))


def pair_facts(pairs: Sequence[LabelledPair], source: PageSource, bands: bool = True) -> PairFacts:
    """Fingerprint both pages of every pair and apply :func:`neardup.matching.match` (at the
    widest k, no verification) to read the facts the thresholds then decide on (``bands``:
    whether the Detector's sketch bands bring pairs beyond k)."""
    rows = []
    for p in pairs:
        a, b = source.page(p.a), source.page(p.b)
        m = match(a.side, b.side, k=10**6, verify=None)  # every distance: the facts, not a verdict
        mh = jaccard(a.minhash, b.minhash) if a.minhash is not None and b.minhash is not None \
            and len(a.minhash) == len(b.minhash) else math.nan
        rows.append((p.same, m.reason in ("empty", "boilerplate"), m.status == "exact", m.distance,
                     math.nan if m.score is None or m.status == "exact" else m.score, mh,
                     share_band(a.side.sketch, b.side.sketch), title_guarded(a.side, b.side)))
    facts = PairFacts(
        same=np.array([r[0] for r in rows], dtype=bool), blocked=np.array([r[1] for r in rows], dtype=bool),
        exact=np.array([r[2] for r in rows], dtype=bool), distance=np.array([r[3] for r in rows], dtype=np.int64),
        score=np.array([r[4] for r in rows], dtype=np.float64), mh=np.array([r[5] for r in rows], dtype=np.float64),
        hosts=[p.host for p in pairs], ids=[p.pair_id for p in pairs],
        band=np.array([r[6] for r in rows], dtype=bool), title_guard=np.array([r[7] for r in rows], dtype=bool),
        bands=bands)
    return facts


def check_against_match(pairs: Sequence[LabelledPair], source: PageSource, facts: PairFacts, k: int,
                        verify: float | None) -> None:
    """The vectorised rule agrees with :func:`neardup.matching.pair_rule` on every pair at
    ``k``/``verify`` (the figures are the product's); AssertionError otherwise."""
    declared = facts.declared(k, verify)
    for i, p in enumerate(pairs):
        status = pair_rule(source.page(p.a).side, source.page(p.b).side, k, verify, facts.bands).status
        if (status is not None) != bool(declared[i]):
            raise AssertionError(f"tune and matching.match disagree on pair {p.pair_id} at k={k}, verify={verify}")


# --------------------------------------------------------------------------------------------
# Scores and the recommendation
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One operating point: ``method`` ``simhash`` (``k``, ``verify``) or ``minhash``
    (``threshold``), with its confusion counts."""

    method: str
    k: int | None
    verify: float | None
    threshold: float | None
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        """Share of declared pairs that are *same* (1.0 when none is declared)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if self.tp else 0.0

    def label(self) -> str:
        if self.method == "minhash":
            return f"minhash t={self.threshold:g}"
        return f"k={self.k}, verify={'none' if self.verify is None else f'{self.verify:g}'}"

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "k": self.k, "verify": self.verify, "threshold": self.threshold,
                "tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn,
                "precision": round(self.precision, 6), "recall": round(self.recall, 6), "f1": round(self.f1, 6)}


def _point(method: str, declared: np.ndarray, same: np.ndarray, k: int | None, verify: float | None,
           threshold: float | None) -> Point:
    tp = int((declared & same).sum())
    fp = int((declared & ~same).sum())
    fn = int((~declared & same).sum())
    tn = int((~declared & ~same).sum())
    return Point(method, k, verify, threshold, tp, fp, fn, tn)


def grid(facts: PairFacts, ks: Sequence[int] = K_VALUES,
         verifies: Sequence[float] = VERIFY_VALUES) -> dict[tuple[int, float], Point]:
    """Every (k, verify) point, k up to ``max(ks) + 1`` (the margin of the last one)."""
    return {(k, v): _point("simhash", facts.declared(k, v), facts.same, k, v, None)
            for k in range(max(ks) + 2) for v in verifies}


def minhash_grid(facts: PairFacts, thresholds: Sequence[float] = MINHASH_THRESHOLDS) -> dict[float, Point]:
    return {t: _point("minhash", facts.declared_minhash(t), facts.same, None, None, t) for t in thresholds}


@dataclass
class Recommendation:
    """The chosen point; ``met``: whether it keeps the precision target with the margin
    (else it is the best F1, a fallback)."""

    point: Point
    met: bool
    min_precision: float
    pairs: int

    @property
    def k(self) -> int | None:
        return self.point.k

    @property
    def verify(self) -> float | None:
        return self.point.verify

    @property
    def threshold(self) -> float | None:
        return self.point.threshold

    @property
    def recall(self) -> float:
        return self.point.recall

    @property
    def precision(self) -> float:
        return self.point.precision

    def to_dict(self) -> dict[str, Any]:
        """The point, whether it met the target, and the 95% Wilson intervals of its
        precision and recall (``precision_ci``, ``recall_ci``: [low, high])."""
        pass

        ci = intervals(self.point)
        return {**self.point.to_dict(), "met": self.met, "min_precision": self.min_precision, "pairs": self.pairs,
                "precision_ci": [round(x, 4) for x in ci["precision"]],
                "recall_ci": [round(x, 4) for x in ci["recall"]]}


def _looser(values: Sequence[float], v: float) -> float | None:
    i = values.index(v)
    return values[i - 1] if i > 0 else None


def recommend(points: dict[tuple[int, float], Point], min_precision: float = DEFAULT_MIN_PRECISION,
              ks: Sequence[int] = K_VALUES, verifies: Sequence[float] = VERIFY_VALUES,
              preferred_k: int | None = None) -> Recommendation:
    """The best (k, verify) with the one-step margin (module docs); ties go to the ``k``
    nearest ``preferred_k`` (default: :func:`neardup.model.default_k`)."""
    home = default_k() if preferred_k is None else preferred_k

    def ok(kv: tuple[int, float]) -> bool:
        return points[kv].precision >= min_precision - 1e-12

    eligible = [kv for kv in points if kv[0] in ks
                and within_margin(kv, ok, lambda kv: (kv[0] + 1, kv[1]))
                and within_margin(kv, ok, lambda kv: (kv[0], lv) if (lv := _looser(list(verifies), kv[1])) is not None
                                  else None)]
    n = next(iter(points.values())).tp + next(iter(points.values())).fn + next(iter(points.values())).fp \
        + next(iter(points.values())).tn
    if eligible:
        best = max(eligible, key=lambda kv: (points[kv].recall, points[kv].precision, -abs(kv[0] - home), -kv[0],
                                             -abs(kv[1] - DEFAULT_VERIFY), kv[1]))
        return Recommendation(points[best], True, min_precision, n)
    in_range = [kv for kv in points if kv[0] in ks]
    best = max(in_range, key=lambda kv: (points[kv].f1, -abs(kv[0] - home), -kv[0], kv[1]))
    return Recommendation(points[best], False, min_precision, n)


def recommend_minhash(points: dict[float, Point], min_precision: float = DEFAULT_MIN_PRECISION) -> Recommendation:
    """The best MinHash threshold with the one-step margin (the next lower threshold); ties go
    to the threshold nearest the default (:data:`neardup.model.DEFAULT_THRESHOLD`)."""
    ts = sorted(points)

    def ok(t: float) -> bool:
        return points[t].precision >= min_precision - 1e-12

    eligible = [t for t in ts if within_margin(t, ok, lambda t: _looser(ts, t))]
    first = points[ts[0]]
    n = first.tp + first.fn + first.fp + first.tn
    if eligible:
        best = max(eligible, key=lambda t: (points[t].recall, points[t].precision, -abs(t - DEFAULT_THRESHOLD), t))
        return Recommendation(points[best], True, min_precision, n)
    best = max(ts, key=lambda t: (points[t].f1, -abs(t - DEFAULT_THRESHOLD), t))
    return Recommendation(points[best], False, min_precision, n)


@dataclass
class TuneResult:
    """Everything :func:`tune` measured: the (k, verify) grid, the MinHash thresholds (empty
    without signatures), the recommendations overall and per host."""

    facts: PairFacts
    points: dict[tuple[int, float], Point]
    choice: Recommendation
    minhash_points: dict[float, Point] = field(default_factory=dict)
    minhash_choice: Recommendation | None = None
    hosts: dict[str, Recommendation] = field(default_factory=dict)
    host_pairs: dict[str, tuple[int, int]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: the default operating point of these fingerprints (:func:`neardup.model.default_k`)
    default_k: int = field(default_factory=default_k)

    @property
    def defaults(self) -> Point | None:
        """The point at the default k and verify (None when the grid leaves it out)."""
        return self.points.get((self.default_k, DEFAULT_VERIFY))

    def settings(self, method: str = "simhash") -> dict[str, Any]:
        """The choice as stored by :func:`apply` (module docs)."""
        if method == "minhash" and self.minhash_choice is None:
            raise NeardupError("no MinHash signatures in these pairs: cannot choose a MinHash threshold")
        out: dict[str, Any] = {"version": META_VERSION, "method": method, "k": self.choice.k,
                               "verify": self.choice.verify,
                               "threshold": self.minhash_choice.threshold if self.minhash_choice else None,
                               "min_precision": self.choice.min_precision, "pairs": len(self.facts),
                               "met": (self.minhash_choice.met if method == "minhash" and self.minhash_choice
                                       else self.choice.met),
                               "hosts": {h: {"k": r.k, "verify": r.verify, "pairs": r.pairs, "met": r.met}
                                         for h, r in sorted(self.hosts.items())}}
        return out

    def to_dict(self) -> dict[str, Any]:
        same = int(self.facts.same.sum())
        return {
            "pairs": len(self.facts), "same": same, "different": len(self.facts) - same, "skipped": self.skipped,
            "recommended": self.choice.to_dict(),
            "minhash_recommended": self.minhash_choice.to_dict() if self.minhash_choice else None,
            "hosts": {h: r.to_dict() for h, r in sorted(self.hosts.items())},
            "defaults": self.defaults.to_dict() if self.defaults is not None else None,
            "seconds": round(self.seconds, 3),
        }

    def table(self, verify: float | None = None) -> list[Point]:
        """The points at every k for one verify threshold (default: the recommended one)."""
        v = self.choice.verify if verify is None else verify
        return [self.points[(k, v)] for k in K_VALUES if v is not None and (k, v) in self.points]


def tune_facts(facts: PairFacts, min_precision: float = DEFAULT_MIN_PRECISION, min_host_pairs: int = MIN_HOST_PAIRS,
               min_host_each: int = MIN_HOST_EACH, verifies: Sequence[float] = VERIFY_VALUES,
               preferred_k: int | None = None) -> TuneResult:
    """Score every threshold on the facts and recommend (overall, per host, MinHash);
    ``verifies``: the verify thresholds to consider (one value: keep verify fixed);
    ``preferred_k``: the ``k`` that wins ties (default: :func:`neardup.model.default_k`)."""
    if len(facts) == 0:
        raise NeardupError("no pairs to tune on")
    if not 0.0 < min_precision <= 1.0:
        raise NeardupError(f"min_precision must be in (0, 1], got {min_precision}")
    verifies = tuple(sorted(verifies))
    if not verifies or any(not 0.0 <= v <= 1.0 for v in verifies):
        raise NeardupError(f"verify thresholds must be in [0, 1], got {verifies}")
    started = time.perf_counter()
    points = grid(facts, verifies=verifies)
    result = TuneResult(facts, points, recommend(points, min_precision, verifies=verifies, preferred_k=preferred_k))
    if preferred_k is not None:
        result.default_k = preferred_k
    if facts.has_minhash:
        result.minhash_points = minhash_grid(facts)
        result.minhash_choice = recommend_minhash(result.minhash_points, min_precision)
    by_host: dict[str, list[int]] = defaultdict(list)
    for i, h in enumerate(facts.hosts):
        if h:
            by_host[h].append(i)
    for h, idx in sorted(by_host.items()):
        mask = np.zeros(len(facts), dtype=bool)
        mask[idx] = True
        n_same = int(facts.same[mask].sum())
        n_diff = len(idx) - n_same
        result.host_pairs[h] = (n_same, n_diff)
        if len(idx) >= min_host_pairs and n_same >= min_host_each and n_diff >= min_host_each:
            sub = facts.subset(mask)
            result.hosts[h] = recommend(grid(sub, verifies=verifies), min_precision, verifies=verifies,
                                        preferred_k=preferred_k)
    result.seconds = time.perf_counter() - started
    return result


def tune(pairs: str | Path | PairsFile | Sequence[LabelledPair], *, store: Store | None = None,
         config: FingerprintConfig | None = None, min_precision: float = DEFAULT_MIN_PRECISION,
         min_host_pairs: int = MIN_HOST_PAIRS, min_host_each: int = MIN_HOST_EACH, check: bool = True,
         verifies: Sequence[float] = VERIFY_VALUES, bands: bool = True) -> TuneResult:
    """Tune on labelled pairs (a file name, a :class:`PairsFile` or pairs): fingerprint (with
    the store's config when a store is given, else ``config`` or the default), score every
    threshold, recommend. ``bands``: decide as a Detector with the sketch bands (the default;
    ``DetectorSettings.bands``). ``check`` re-applies :func:`neardup.matching.pair_rule` pair
    by pair at the recommended point and at the defaults (an AssertionError would be a bug here)."""
    started = time.perf_counter()
    pf = pairs if isinstance(pairs, PairsFile) else load_pairs(pairs) if isinstance(pairs, (str, Path)) \
        else PairsFile("", list(pairs))
    source = PageSource(config, store)
    facts = pair_facts(pf.pairs, source, bands)
    result = tune_facts(facts, min_precision, min_host_pairs, min_host_each, verifies,
                        preferred_k=default_k(source.config.version, bands))
    result.skipped = dict(pf.skipped)
    if check:
        check_against_match(pf.pairs, source, facts, result.default_k, DEFAULT_VERIFY)
        if result.choice.k is not None:
            check_against_match(pf.pairs, source, facts, result.choice.k, result.choice.verify)
    result.seconds = time.perf_counter() - started
    return result


__all__ = [
    "DEFAULT_MIN_PRECISION", "K_VALUES", "META_KEY", "MINHASH_THRESHOLDS", "VERIFY_VALUES", "LabelledPair",
    "PageRef", "PageRefError", "PairFacts", "PairsFile", "PairsFormatError", "Point", "Recommendation",
    "TuneResult", "apply", "load_pairs", "recommend", "stored_choice",
    "thresholds_for", "tune", "tune_facts", "within_margin",
]


#: the normal quantile of the intervals (95%)
Z95 = 1.959964


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (``(0, 1)`` for ``n = 0``).

    >>> [round(x, 3) for x in wilson(8, 10)]
    [0.49, 0.943]
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def intervals(point: Point) -> dict[str, tuple[float, float]]:
    """95% Wilson intervals of a point's precision (of the pairs declared duplicates) and
    recall (of the *same* pairs)."""
    return {"precision": wilson(point.tp, point.tp + point.fp), "recall": wilson(point.tp, point.tp + point.fn)}



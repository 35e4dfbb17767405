"""Detection quality of neardup fingerprints on real page pairs (recall and false positives).

For every extractor x feature scheme this measures, at Hamming thresholds k = 0..10:

* recall on labelled duplicate pairs (``same-content``, the target, and ``near-duplicate``) of
  ``shared/corpus/near-dup-pairs/pairs.tsv``;
* the false-positive rate on that file's negatives (``shared-boilerplate-only``,
  ``different-content``) and on *hard negatives*: every pair of different pages within one
  site of CleanPortalEval, of Utomo Big9 and of Dragnet hosts with five or more pages;
* how many hard-negative pairs are flagged through an equal digest (exact duplicates).

A pair is declared duplicate at threshold k exactly as the product does it: neither
fingerprint is empty, and the digests are equal or ``hamming(a, b) <= k``.

MinHash (``Detector(method="minhash")``) is measured beside it with the ``accurate`` extractor
for several feature sets at Jaccard thresholds t = 0.3..0.95: a pair is declared when neither
page is empty and the digests are equal or the estimated Jaccard of the 128-permutation
signatures is ``>= t``; ``both`` is SimHash (k = 7, the Detector default) OR MinHash ``>= t``. The
recommended MinHash threshold is picked like k: hard-negative FPR within the target at t and at
the next lower t, then the best same-content recall.

Usage::

    python benchmarks/quality.py [--corpus PATH] [--quick] [--out docs/quality.md] [--cache DIR]

Progress goes to stderr; the last line of stdout is a JSON summary of the recommended default.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from itertools import combinations
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from _common import CORPUS, REPO_ROOT, logger, machine
from _corpus import (
    ALL_PAIRS_SOURCES,
    DRAGNET_MIN_HOST_PAGES,
    HARD_SOURCES,
    NEGATIVE_LABELS,
    Pair,
    PairSets,
    all_pairs_pages,
    load_pairs,
    page_locations,
    read_page,
)

from neardup import FeatureConfig, Fingerprint, FingerprintConfig
from neardup.errors import NeardupError
from neardup.fingerprint.core import fingerprint_text
from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.minhash import MinHashConfig
from neardup.matching import Side, match, repeated_boilerplate
from neardup.model import DEFAULT_THRESHOLD as LIBRARY_T  # (method "minhash")
from neardup.model import DEFAULT_VERIFY as DETECTOR_VERIFY
from neardup.model import default_k
from neardup.sketch import similarity
from neardup.tune.sweep import within_margin  # the one-step margin, shared with neardup tune

DEFAULT_CORPUS = CORPUS

DETECTOR_K = default_k(bands=False)  # this harness measures the SimHash candidates alone (method "both" too)

K_VALUES = tuple(range(17))
REPORT_K = 7
EXTRACTORS = ("fast", "accurate", "hybrid")
MIN_TOKENS_SWEEP = (0, 5, 10, 20, 40)
DEFAULT_MIN_TOKENS = 10
FPR_TARGET = 0.001
RECALL_TARGET = 0.98

QUICK_PAGES_PER_SITE = 8
#: texts whose word 5-shingle Jaccard similarity is below this are *different*, at or above
#: SAME_JACCARD the *same* (the middle is reported apart)
DIFFERENT_JACCARD = 0.2
SAME_JACCARD = 0.5
#: store sizes the per-pair false-match rate is projected to (false matches per check)
PROJECT_TO = (10**6, 10**8, 10**9)
# docs/quality.md's section written by benchmarks/candidates.py (kept when this report is rewritten)
CANDIDATES_BEGIN = "<!-- candidates.py: begin -->"
CANDIDATES_END = "<!-- candidates.py: end -->"
#: sections of docs/quality.md that other benchmarks write, kept when this one rewrites the file
KEPT_SECTIONS = ((CANDIDATES_BEGIN, CANDIDATES_END), ("<!-- structure.py: begin -->", "<!-- structure.py: end -->"),
                 ("<!-- product-rule:start -->", "<!-- product-rule:end -->"))
PROJECTED_TARGET = 0.01  # false matches per check at 10^9 stored pages
VERIFY_VALUES = (0.1, 0.2, 0.3)
IDF_DOC_LENS = (300, 1000, 3000)


# --------------------------------------------------------------------------------------------
# Extraction (once per page and extractor) and fingerprints (once per configuration)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scheme:
    """A named configuration under test: the feature config, the fingerprint spec version
    (1: plain weights, no sketch; 2: IDF for words, a verification sketch) and the sketch
    verification threshold the match rule applies (None: every candidate within k)."""

    name: str
    features: FeatureConfig
    version: int = 1
    verify: float | None = None

    def config(self, extractor: str, min_tokens: int = DEFAULT_MIN_TOKENS) -> FingerprintConfig:
        return FingerprintConfig(version=self.version, extractor=extractor, features=self.features,
                                 min_tokens=min_tokens)


def candidate_schemes(quick: bool) -> list[Scheme]:
    """Configurations compared: the version-1 feature schemes (plain weights; ``words`` was
    the 0.1 default) and version 2 (IDF weights for several page lengths, each with and
    without sketch verification)."""
    v2 = [Scheme(f"idf{n}" + (f" verify={v:g}" if v is not None else ""), FeatureConfig(idf_doc_len=n), 2, v)
          for n in IDF_DOC_LENS for v in (None, *VERIFY_VALUES)]
    if quick:
        return [s for s in v1_schemes() if s.name in ("words", "shingles2", "chars5")] + [
            s for s in v2 if s.name in ("idf1000", "idf1000 verify=0.2")]
    return v1_schemes() + v2


def v1_schemes() -> list[Scheme]:
    """The feature schemes of spec version 1 (no IDF, no sketch)."""
    base = FeatureConfig(idf=None)
    return [
        Scheme("words", base),
        Scheme("words tf=raw", replace(base, tf="raw")),
        Scheme("words tf=binary", replace(base, tf="binary")),
        Scheme("words h=1", replace(base, w_heading=1.0)),
        Scheme("words s=1", replace(base, w_short=1.0)),
        Scheme("words h=1 s=1", replace(base, w_heading=1.0, w_short=1.0)),
        Scheme("words s=0.25", replace(base, w_short=0.25)),
        Scheme("shingles2", replace(base, scheme="shingles", ngram=2)),
        Scheme("shingles2 h=1 s=1", replace(base, scheme="shingles", ngram=2, w_heading=1.0, w_short=1.0)),
        Scheme("shingles3", replace(base, scheme="shingles", ngram=3)),
        Scheme("chars4", replace(base, scheme="chars", ngram=4)),
        Scheme("chars4 h=1", replace(base, scheme="chars", ngram=4, w_heading=1.0)),
        Scheme("chars5", replace(base, scheme="chars", ngram=5)),
        Scheme("chars5 h=1", replace(base, scheme="chars", ngram=5, w_heading=1.0)),
    ]


def cache_key(extractor: str) -> str:
    """Identifies the extraction code and library versions, so a disk cache never goes stale."""
    from neardup.fingerprint import extract as extract_module

    h = hashlib.sha256()
    for module in sorted(Path(extract_module.__file__).parent.glob("*.py")):  # every module extraction reads
        h.update(module.read_bytes())
    for dist in ("resiliparse", "trafilatura"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(dist.encode())
    h.update(extractor.encode())
    return h.hexdigest()[:16]


@dataclass
class Extraction:
    """Main texts and titles of all pages for one extractor, and what it cost (``seconds``:
    the sum over pages, i.e. CPU time of one core, whatever the number of jobs)."""

    extractor: str
    texts: dict[str, str]
    seconds: float
    errors: dict[str, str]
    titles: dict[str, str | None] = field(default_factory=dict)
    cached: bool = False


def _extract_one(job: tuple[Path, str, str]) -> tuple[str, str, str | None, str | None, float]:
    """(page, text, title, error, seconds) of one page (a worker process's unit of work)."""
    corpus, page, extractor = job
    data = read_page(corpus / page)
    started = time.perf_counter()
    try:
        extracted = extract_main_content(data, extractor=extractor)
        return page, extracted.text, extracted.title, None, time.perf_counter() - started
    except NeardupError as exc:
        return page, "", None, f"{type(exc).__name__}: {exc}", time.perf_counter() - started


def extract_pages(corpus: Path, pages: Sequence[str], extractor: str, cache_dir: Path | None,
                  log: Callable[[str], None], jobs: int = 1) -> Extraction:
    """Extract the main text and title of every page once, on ``jobs`` processes (errors give
    an empty text and are recorded)."""
    cache_file = cache_dir / f"texts-{extractor}-{cache_key(extractor)}.json.gz" if cache_dir else None
    if cache_file and cache_file.exists():
        with gzip.open(cache_file, "rt", encoding="utf-8") as fh:
            stored = json.load(fh)
        if set(pages) <= stored["texts"].keys() and "titles" in stored:
            log(f"{extractor}: {len(pages)} texts from cache {cache_file}")
            return Extraction(extractor, stored["texts"], stored["seconds"], stored["errors"], stored["titles"],
                              cached=True)
    texts: dict[str, str] = {}
    titles: dict[str, str | None] = {}
    errors: dict[str, str] = {}
    seconds = 0.0
    work = [(corpus, page, extractor) for page in pages]
    with contextlib.ExitStack() as stack:
        if jobs > 1:
            from multiprocessing import get_context

            pool = stack.enter_context(get_context("forkserver").Pool(jobs))
            results: Iterable[tuple[str, str, str | None, str | None, float]] = pool.imap_unordered(
                _extract_one, work, chunksize=8)
        else:
            results = map(_extract_one, work)
        for i, (page, text, title, error, took) in enumerate(results, 1):
            texts[page], titles[page], seconds = text, title, seconds + took
            if error:
                errors[page] = error
            if i % 500 == 0 or i == len(pages):
                log(f"{extractor}: extracted {i}/{len(pages)} pages")
    if cache_file:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(cache_file, "wt", encoding="utf-8") as fh:
            json.dump({"texts": texts, "titles": titles, "seconds": seconds, "errors": errors}, fh)
    return Extraction(extractor, texts, seconds, errors, titles)


@dataclass(frozen=True)
class PageFingerprints:
    """Fingerprint fields of every page, as arrays indexed like ``index``; ``signatures``
    (pages x num_perm, uint32) when the config has MinHash; ``sides``: what the product's
    match rule (:func:`neardup.matching.match`) reads of each page."""

    index: dict[str, int]
    simhash: list[int]
    digest: list[str]
    tokens: np.ndarray
    empty: np.ndarray
    signatures: np.ndarray | None = None
    sides: list[Side] = field(default_factory=list)


def fingerprint_pages(texts: dict[str, str], config: FingerprintConfig,
                      titles: dict[str, str | None] | None = None,
                      hosts: dict[str, str | None] | None = None) -> PageFingerprints:
    """Fingerprint (SimHash, sketch, and MinHash when configured) every extracted text with
    ``config``; ``titles`` and ``hosts`` feed the repeated-boilerplate guard."""
    pages = sorted(texts)
    fps = [fingerprint_text(texts[p], config) for p in pages]
    titles, hosts = titles or {}, hosts or {}
    return PageFingerprints(
        index={p: i for i, p in enumerate(pages)},
        simhash=[f.simhash for f in fps],
        digest=[f.digest for f in fps],
        tokens=np.array([f.tokens for f in fps], dtype=np.int64),
        empty=np.array([f.empty for f in fps], dtype=bool),
        signatures=np.stack([_signature(f) for f in fps]) if config.minhash is not None and fps else None,
        sides=[replace(Side.of(f), title=titles.get(p), host=hosts.get(p)) for p, f in zip(pages, fps, strict=True)],
    )


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairScores:
    """Per-pair comparison of two fingerprints: Hamming distance, equal digest, either empty,
    the token count of each page, the sketches' Jaccard estimate (NaN without sketches),
    whether the repeated-boilerplate guard separates them, and the verification threshold."""

    distance: np.ndarray
    same_digest: np.ndarray
    empty: np.ndarray
    tokens_a: np.ndarray
    tokens_b: np.ndarray
    score: np.ndarray
    guarded: np.ndarray
    verify: float | None = None

    def declared(self, k: int) -> np.ndarray:
        """The product's rule (:func:`neardup.matching.match`, vectorised over the pairs):
        neither empty, not guarded, and equal digest or distance <= k with a sketch
        estimate >= verify (or no sketch)."""
        verified = np.ones_like(self.empty) if self.verify is None else ~(self.score < self.verify)
        return ~self.empty & ~self.guarded & (self.same_digest | ((self.distance <= k) & verified))

    def exact(self) -> np.ndarray:
        """Pairs declared through the digest (exact duplicates)."""
        return ~self.empty & ~self.guarded & self.same_digest


def _signature(f: Fingerprint) -> np.ndarray:
    assert f.minhash is not None  # the config asks for MinHash signatures
    return f.minhash.signature


def _jaccard(a: bytes | None, b: bytes | None) -> float:
    """The sketches' Jaccard estimate, NaN without both sketches."""
    return np.nan if a is None or b is None else similarity(a, b).jaccard


def score_pairs(pairs: Sequence[Pair], fps: PageFingerprints, verify: float | None = None) -> PairScores:
    """Compare the two fingerprints of every pair."""
    ia = [fps.index[p.a] for p in pairs]
    ib = [fps.index[p.b] for p in pairs]
    both = list(zip(ia, ib, strict=True))
    sides = fps.sides
    scores = [_jaccard(sides[i].sketch, sides[j].sketch) for i, j in both]
    return PairScores(
        distance=np.array([(fps.simhash[i] ^ fps.simhash[j]).bit_count() for i, j in both], dtype=np.int64),
        same_digest=np.array([fps.digest[i] == fps.digest[j] for i, j in both], dtype=bool),
        empty=fps.empty[ia] | fps.empty[ib],
        tokens_a=fps.tokens[ia],
        tokens_b=fps.tokens[ib],
        score=np.array(scores, dtype=np.float64),
        guarded=np.array([repeated_boilerplate(sides[i], sides[j]) for i, j in both], dtype=bool),
        verify=verify,
    )


def check_against_product(pairs: Sequence[Pair], fps: PageFingerprints, scores: PairScores, k: int) -> None:
    """The vectorised rule agrees with :func:`neardup.matching.match` on every pair at ``k``
    (the figures are the product's, not a re-implementation's)."""
    declared = scores.declared(k)
    for i, p in enumerate(pairs):
        a, b = fps.sides[fps.index[p.a]], fps.sides[fps.index[p.b]]
        if (match(a, b, k, scores.verify).status is not None) != bool(declared[i]):
            raise AssertionError(f"harness and product disagree on {p.a} / {p.b} at k={k}")


def rate(flags: np.ndarray, mask: np.ndarray) -> float:
    """Share of ``mask`` pairs that are flagged (NaN when there are none)."""
    n = int(mask.sum())
    return float(flags[mask].sum() / n) if n else float("nan")


@dataclass(frozen=True)
class Masks:
    """Boolean masks over the labelled and the hard-negative pairs."""

    same_content: np.ndarray
    near_duplicate: np.ndarray
    partial_overlap: np.ndarray
    pairs_negative: np.ndarray
    hard_by_source: dict[str, np.ndarray]

    @classmethod
    def of(cls, sets: PairSets) -> Masks:
        labels = np.array([p.label for p in sets.labelled])
        sources = np.array([p.source for p in sets.hard])
        return cls(
            same_content=labels == "same-content",
            near_duplicate=labels == "near-duplicate",
            partial_overlap=labels == "partial-overlap",
            pairs_negative=np.isin(labels, NEGATIVE_LABELS),
            hard_by_source={s: sources == s for s in HARD_SOURCES},
        )


class Scores(Protocol):
    """What :func:`metrics_at` reads: :class:`PairScores` (threshold k) or :class:`JaccardScores`
    (threshold t)."""

    def declared(self, threshold: Any, /) -> np.ndarray: ...

    def exact(self) -> np.ndarray: ...


def metrics_at(k: float, labelled: Scores, hard: Scores, masks: Masks) -> dict[str, float]:
    """All quality numbers of one configuration at threshold ``k`` (a distance, or a Jaccard t)."""
    pos = labelled.declared(k)
    neg = hard.declared(k)
    everything = np.ones_like(neg)
    out = {
        "recall_same_content": rate(pos, masks.same_content),
        "recall_near_duplicate": rate(pos, masks.near_duplicate),
        "flagged_partial_overlap": rate(pos, masks.partial_overlap),
        "fpr_pairs_negatives": rate(pos, masks.pairs_negative),
        "fpr_hard_negatives": rate(neg, everything),
        "false_positives_hard": int(neg.sum()),
        "false_positives_pairs": int(pos[masks.pairs_negative].sum()),
        "exact_false_positives_hard": int(hard.exact().sum()),
    }
    for source, mask in masks.hard_by_source.items():
        out[f"fpr_hard_{source}"] = rate(neg, mask)
    return out


@dataclass
class Evaluation:
    """One configuration's scores at every k (0 to max(K_VALUES) + 1)."""

    extractor: str
    scheme: Scheme
    config: FingerprintConfig
    by_k: dict[int, dict[str, float]]
    labelled: PairScores
    hard: PairScores
    empty_pages: int
    allpairs: AllPairs | None = None

    def at(self, k: int) -> dict[str, float]:
        return self.by_k[k]

    def within(self, k: int, fpr_limit: float) -> bool:
        """Hard-negative FPR is within the limit at ``k`` and at ``k + 1`` (one bit of margin,
        because k is tuned on a small sample)."""
        return within_margin(k, lambda j: self.at(j)["fpr_hard_negatives"] <= fpr_limit + 1e-12, lambda j: j + 1)

    def operating_k(self, fpr_limit: float = FPR_TARGET) -> int | None:
        """The k with the best same-content recall within the FPR limit (smallest such k)
        and, when all pairs were measured, with no different pair declared among them and
        the projected false matches per check at 10^9 within the target; None when no k
        qualifies."""
        ok = [k for k in K_VALUES if self.within(k, fpr_limit)
              and (self.allpairs is None or self.allpairs.ok(k))]
        if not ok:
            return None
        return max(ok, key=lambda k: (self.at(k)["recall_same_content"], -k))


def evaluate(sets: PairSets, masks: Masks, extraction: Extraction, scheme: Scheme,
             hosts: dict[str, str | None], min_tokens: int = DEFAULT_MIN_TOKENS) -> Evaluation:
    """Fingerprint the pages of the pairs with one configuration and score it at every k."""
    config = scheme.config(extraction.extractor, min_tokens)
    pages = set(sets.pages())
    fps = fingerprint_pages({p: t for p, t in extraction.texts.items() if p in pages}, config,
                            extraction.titles, hosts)
    labelled = score_pairs(sets.labelled, fps, scheme.verify)
    hard = score_pairs(sets.hard, fps, scheme.verify)
    check_against_product(sets.labelled, fps, labelled, DETECTOR_K)
    check_against_product(sets.hard, fps, hard, DETECTOR_K)
    by_k = {k: metrics_at(k, labelled, hard, masks) for k in range(max(K_VALUES) + 2)}
    return Evaluation(extraction.extractor, scheme, config, by_k, labelled, hard, int(fps.empty.sum()))


# --------------------------------------------------------------------------------------------
# All pairs across sites: what a store of 10^6..10^9 pages meets
# --------------------------------------------------------------------------------------------

WORD_RE = re.compile(r"\w+")


class Shingles:
    """Word n-shingle sets of the extracted texts, made once per page and n."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self._sets: dict[tuple[str, int], set[tuple[str, ...]]] = {}

    def of(self, page: str, n: int) -> set[tuple[str, ...]]:
        key = (page, n)
        if key not in self._sets:
            words = WORD_RE.findall(self.texts[page].casefold())
            self._sets[key] = {tuple(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}
        return self._sets[key]

    def jaccard(self, a: str, b: str, n: int) -> float:
        sa, sb = self.of(a, n), self.of(b, n)
        return len(sa & sb) / max(1, len(sa | sb))


def binomial_tail(n: int, p: float, m: int) -> float:
    """P(X >= m) for X ~ Binomial(n, p)."""
    return float(sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(max(m, 0), n + 1)))


@dataclass
class AllPairs:
    """Every pair of non-empty corpus pages (all sites) under one configuration: the distance
    histogram, bit balance, and the pairs within ``max_k + 3`` with their texts' word
    5-shingle Jaccard (``j5``: < 0.2 *different*, >= 0.5 *same*) and 3-shingle Jaccard
    (``j3``: what the sketch estimates) and what the match rule needs."""

    scheme: Scheme
    extractor: str
    pages: int
    pairs: int
    histogram: np.ndarray  # pairs at each distance 0..bits, all pairs
    different_histogram: np.ndarray  # the same, less the close pairs that are not different
    bit_share: np.ndarray  # per bit: share of pages with it set
    max_k: int
    close: list[dict[str, Any]]
    sketch_bins: int

    @property
    def mean(self) -> float:
        d = np.arange(self.different_histogram.shape[0])
        return float((self.different_histogram * d).sum() / max(1, self.different_histogram.sum()))

    @property
    def sd(self) -> float:
        d = np.arange(self.different_histogram.shape[0])
        return float(np.sqrt((self.different_histogram * (d - self.mean) ** 2).sum()
                             / max(1, self.different_histogram.sum())))

    def _declared(self, c: dict[str, Any], k: int) -> bool:
        v = self.scheme.verify
        return (not c["guarded"]) and (c["same_digest"] or (
            c["distance"] <= k and (v is None or c["score"] is None or c["score"] >= v)))

    def count(self, k: int, kind: str, declared: bool | None = None) -> int:
        """Close pairs of ``kind`` (different / middle / same) within ``k``, optionally only
        those the rule declares (True) or not."""
        return sum(1 for c in self.close if c["kind"] == kind and (c["distance"] <= k or c["same_digest"])
                   and (declared is None or self._declared(c, k) == declared))

    def pass_probability(self, j3: float) -> float:
        """Chance that two pages of true 3-shingle Jaccard ``j3`` pass the verification."""
        v = self.scheme.verify
        if v is None or not self.sketch_bins:
            return 1.0
        m = math.ceil(self.sketch_bins * (v * (1 - 1 / 256) + 1 / 256) - 1e-9)
        return binomial_tail(self.sketch_bins, j3 + (1 - j3) / 256, m)

    def per_pair_rate(self, k: int) -> tuple[float, float]:
        """False-match rate per pair of different pages at ``k``: (observed, expected), the
        expected one from each different candidate's chance of passing the sketch check
        (the observed one cannot go below 1 / pairs)."""
        observed = self.count(k, "different", declared=True) / max(1, self.pairs)
        expected = sum(1.0 if c["same_digest"] else self.pass_probability(c["j3"])
                       for c in self.close if c["kind"] == "different" and not c["guarded"]
                       and (c["distance"] <= k or c["same_digest"])) / max(1, self.pairs)
        return observed, expected

    def ok(self, k: int) -> bool:
        """No different pair declared, and under the projected target at 10^9 stored pages."""
        return (k <= self.max_k and self.count(k, "different", declared=True) == 0
                and self.per_pair_rate(k)[1] * PROJECT_TO[-1] <= PROJECTED_TARGET)


def all_pairs(extraction: Extraction, pages: Sequence[str], scheme: Scheme, hosts: dict[str, str | None],
              shingles: Shingles, max_k: int) -> AllPairs:
    """Fingerprint every page and compare all pairs (numpy XOR + popcount, in blocks)."""
    config = scheme.config(extraction.extractor)
    texts = {p: extraction.texts[p] for p in pages}
    fps = fingerprint_pages(texts, config, extraction.titles, hosts)
    keep = [i for i in range(len(fps.sides)) if not fps.sides[i].empty]
    names = sorted(texts)
    values = np.array([fps.simhash[i] for i in keep], dtype=np.uint64)
    bits = config.bits if config.bits == 64 else 64  # 128-bit configs: the first word
    histogram = np.zeros(bits + 1, dtype=np.int64)
    close: list[dict[str, Any]] = []
    for i in range(len(values) - 1):
        d = np.bitwise_count(values[i] ^ values[i + 1:])
        histogram += np.bincount(d, minlength=bits + 1)
        for j in np.nonzero(d <= max_k + 3)[0].tolist():
            a, b = keep[i], keep[i + 1 + j]
            close.append({"a": names[a], "b": names[b], "distance": int(d[j])})
    same_digest = defaultdict(list)
    for i in keep:
        same_digest[fps.digest[i]].append(i)
    seen = {(c["a"], c["b"]) for c in close}
    for group in same_digest.values():  # equal digests are declared at any distance
        for a, b in combinations(group, 2):
            if (names[a], names[b]) not in seen:
                close.append({"a": names[a], "b": names[b],
                              "distance": int((fps.simhash[a] ^ fps.simhash[b]).bit_count())})
    different_histogram = histogram.copy()
    for c in close:
        sa, sb = fps.sides[fps.index[c["a"]]], fps.sides[fps.index[c["b"]]]
        c["j5"] = shingles.jaccard(c["a"], c["b"], 5)
        c["j3"] = shingles.jaccard(c["a"], c["b"], 3)
        c["kind"] = ("different" if c["j5"] < DIFFERENT_JACCARD else "same" if c["j5"] >= SAME_JACCARD else "middle")
        c["same_digest"] = sa.digest == sb.digest
        c["guarded"] = repeated_boilerplate(sa, sb)
        c["score"] = None if sa.sketch is None or sb.sketch is None else similarity(sa.sketch, sb.sketch).jaccard
        if c["kind"] != "different" and c["distance"] <= bits:
            different_histogram[c["distance"]] -= 1
    share = ((values[:, None] >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
    return AllPairs(scheme, extraction.extractor, len(keep), int(histogram.sum()), histogram, different_histogram,
                    share, max_k, close, config.sketch_bins)


@dataclass(frozen=True)
class Choice:
    """A configuration at a threshold, and the FPR limit it was chosen under."""

    evaluation: Evaluation
    k: int
    fpr_limit: float

    @property
    def metrics(self) -> dict[str, float]:
        return self.evaluation.at(self.k)


def digest_floor(evaluations: Sequence[Evaluation]) -> float:
    """The lowest hard-negative FPR any configuration reaches (at k = 0: mostly pairs whose
    extracted texts are identical, which no feature scheme can separate)."""
    return min(e.at(0)["fpr_hard_negatives"] for e in evaluations)


def preference(choice: Choice) -> tuple:
    """Ranking of choices: highest same-content recall; ties go to fewer false positives (hard
    and pairs.tsv negatives), then fewer expected false matches among all pairs (the order of
    magnitude: what decides at 10^9 pages), then higher near-duplicate recall, then the fast
    extractor (about 5x cheaper), then the smaller k."""
    m = choice.metrics
    ap = choice.evaluation.allpairs
    expected = ap.per_pair_rate(min(choice.k, ap.max_k))[1] if ap is not None else 1.0
    magnitude = math.floor(math.log10(expected)) if expected > 0 else -99
    return (m["recall_same_content"], -(m["false_positives_hard"] + m["false_positives_pairs"]), -magnitude,
            m["recall_near_duplicate"], choice.evaluation.extractor == "fast", -choice.k)


def choose(evaluations: Sequence[Evaluation], fpr_limit: float) -> Choice | None:
    """The best configuration and k within ``fpr_limit`` (see :meth:`Evaluation.within` and
    :func:`preference`; full ties keep list order, simplest scheme first)."""
    choices = [Choice(e, k, fpr_limit) for e in evaluations
               if (k := e.operating_k(fpr_limit)) is not None]
    return max(choices, key=preference) if choices else None


def choose_with_floor(evaluations: Sequence[Evaluation]) -> Choice:
    """:func:`choose` at the FPR target or, when nothing meets it, at the lowest FPR reachable
    (failing that too, k = 0 of the configuration with the lowest FPR)."""
    evaluations = [e for e in evaluations if e.allpairs is not None] or list(evaluations)  # measured at scale
    floor = digest_floor(evaluations)
    choice = choose(evaluations, FPR_TARGET) or choose(evaluations, floor)
    if choice is None:
        lowest = min(evaluations, key=lambda e: e.at(0)["fpr_hard_negatives"])
        choice = Choice(lowest, 0, floor)
    return choice


def choose_min_tokens(sweep: Sequence[Evaluation], k: int, fpr_limit: float) -> Evaluation:
    """The min_tokens value to recommend at fixed k: within the FPR limit, best same-content
    recall, then fewest false positives, then closest to the current default."""
    def key(e: Evaluation) -> tuple:
        m = e.at(k)
        return (e.within(k, fpr_limit), m["recall_same_content"],
                -(m["false_positives_hard"] + m["false_positives_pairs"]),
                -abs(e.config.min_tokens - DEFAULT_MIN_TOKENS))
    return max(sweep, key=key)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def pct(x: float, digits: int = 1) -> str:
    """A rate as a percentage ('n/a' for NaN)."""
    return "n/a" if x != x else f"{100 * x:.{digits}f}%"


NUMERIC_CELL = re.compile(r"^(-|none|n/a|[\d.]+%?( / [\d.]+)?)$")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table; columns whose cells are all numbers (or '-') are right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    numeric = [bool(cells) and all(NUMERIC_CELL.match(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return lines


SCHEME_HEADER = ("scheme", "same-content recall", "near-dup recall", "FPR pairs.tsv neg.",
                 "FPR hard neg.", "CPE", "Big9", "Dragnet", "exact FP (hard)", "empty pages",
                 "operating k", "same-content recall at it", "FPR hard at it")


def scheme_rows(evaluations: Sequence[Evaluation], k: int) -> list[list[Any]]:
    """One row per scheme at threshold ``k``, plus its operating point at the FPR target."""
    rows = []
    for e in evaluations:
        m = e.at(k)
        op = e.operating_k()
        rows.append([
            f"`{e.scheme.name}`", pct(m["recall_same_content"]), pct(m["recall_near_duplicate"]),
            pct(m["fpr_pairs_negatives"]), pct(m["fpr_hard_negatives"], 2),
            pct(m["fpr_hard_cleanportaleval"], 2), pct(m["fpr_hard_utomo-big9"], 2),
            pct(m["fpr_hard_dragnet"], 2), m["exact_false_positives_hard"], e.empty_pages,
            "none" if op is None else op,
            "-" if op is None else pct(e.at(op)["recall_same_content"]),
            "-" if op is None else pct(e.at(op)["fpr_hard_negatives"], 2),
        ])
    return rows


def k_rows(e: Evaluation) -> list[list[Any]]:
    """One row per threshold for one configuration."""
    rows = []
    for k in K_VALUES:
        m = e.at(k)
        rows.append([
            k, pct(m["recall_same_content"]), pct(m["recall_near_duplicate"]),
            pct(m["flagged_partial_overlap"]), pct(m["fpr_pairs_negatives"]),
            pct(m["fpr_hard_negatives"], 3), pct(m["fpr_hard_cleanportaleval"], 2),
            pct(m["fpr_hard_utomo-big9"], 2), pct(m["fpr_hard_dragnet"], 2),
            m["false_positives_hard"], m["exact_false_positives_hard"],
        ])
    return rows


def min_tokens_rows(sweep: Sequence[Evaluation], k: int) -> list[list[Any]]:
    """One row per min_tokens value at threshold ``k``."""
    rows = []
    for e in sweep:
        m = e.at(k)
        rows.append([
            e.config.min_tokens, e.empty_pages, pct(m["recall_same_content"]),
            pct(m["recall_near_duplicate"]), pct(m["fpr_hard_negatives"], 3),
            pct(m["fpr_hard_dragnet"], 2), m["false_positives_hard"], m["exact_false_positives_hard"],
        ])
    return rows


def missed_rows(e: Evaluation, sets: PairSets, k: int) -> list[list[Any]]:
    """The same-content pairs the configuration misses at ``k``, with both pages' token counts."""
    declared = e.labelled.declared(k)
    rows = []
    for i, pair in enumerate(sets.labelled):
        if pair.label == "same-content" and not declared[i]:
            reason = "empty page" if e.labelled.empty[i] else "distance"
            tokens = f"{e.labelled.tokens_a[i]} / {e.labelled.tokens_b[i]}"
            rows.append([pair.pair_id, pair.group, int(e.labelled.distance[i]), reason, tokens,
                         pair.note.replace("|", "/")])
    return rows


def false_positive_rows(e: Evaluation, sets: PairSets, k: int) -> list[list[Any]]:
    """Negatives (hard and pairs.tsv) wrongly declared duplicates at ``k``."""
    rows = []
    for scores, pairs in ((e.labelled, sets.labelled), (e.hard, sets.hard)):
        declared = scores.declared(k)
        for i, pair in enumerate(pairs):
            if declared[i] and (pair.label == "hard-negative" or pair.label in NEGATIVE_LABELS):
                where = pair.pair_id if pair.source == "pairs.tsv" else f"{pair.source} {pair.group}"
                how = "digest" if scores.same_digest[i] else "simhash"
                rows.append([where, f"`{pair.a}`", f"`{pair.b}`", int(scores.distance[i]), how])
    return rows


def exact_fp_hosts(e: Evaluation, sets: PairSets) -> dict[str, int]:
    """Sites whose different pages get identical main texts (hard negatives flagged by digest)."""
    hosts: dict[str, int] = defaultdict(int)
    for i, pair in enumerate(sets.hard):
        if e.hard.exact()[i]:
            hosts[pair.group] += 1
    return dict(sorted(hosts.items(), key=lambda kv: -kv[1]))


def config_dict(e: Evaluation, k: int) -> dict[str, Any]:
    """The configuration as the library spells it, plus k and the verification threshold."""
    return {"version": e.config.version, "extractor": e.extractor, "features": e.scheme.features.to_dict(),
            "min_tokens": e.config.min_tokens, "bits": e.config.bits, "sketch_bins": e.config.sketch_bins,
            "k": k, "verify": e.scheme.verify}


def all_pairs_dict(ap: AllPairs, k: int) -> dict[str, Any]:
    """The all-pairs figures of one configuration at ``k`` (for the JSON summary)."""
    observed, expected = ap.per_pair_rate(k)
    return {
        "pages": ap.pages, "pairs": ap.pairs, "mean_distance_different": round(ap.mean, 2),
        "sd_distance_different": round(ap.sd, 2),
        "bit_share_min": round(float(ap.bit_share.min()), 3), "bit_share_max": round(float(ap.bit_share.max()), 3),
        "different_within_k_before_verification": ap.count(k, "different"),
        "different_within_k_plus_3_before_verification":
            ap.count(k + 3, "different") if k + 3 <= ap.max_k + 3 else None,
        "different_declared": ap.count(k, "different", declared=True),
        "per_pair_false_match_observed": observed, "per_pair_false_match_expected": expected,
        "projected_false_matches_per_check": {f"{n:.0e}": expected * n for n in PROJECT_TO},
    }


def all_pairs_rows(evaluations: Sequence[Evaluation], default: Choice) -> list[list[Any]]:
    """One row per measured configuration at its operating k (the default first)."""
    rows = []
    seen = []
    ordered = [default.evaluation] + [e for e in evaluations if e is not default.evaluation]
    for e in ordered:
        if e.allpairs is None or (e.extractor, e.scheme.name) in seen:
            continue
        seen.append((e.extractor, e.scheme.name))
        ap = e.allpairs
        k = default.k if e is default.evaluation else e.operating_k(FPR_TARGET)
        if k is None:  # nothing qualifies: show it at the 0.1 default k
            k = 7
        k = min(k, ap.max_k)
        observed, expected = ap.per_pair_rate(k)
        rows.append([
            f"`{e.extractor}` `{e.scheme.name}`" + (" (default)" if e is default.evaluation else ""), k,
            f"{ap.mean:.2f}", f"{ap.sd:.2f}", f"{100 * ap.bit_share.min():.1f}-{100 * ap.bit_share.max():.1f}%",
            ap.count(k, "different"), ap.count(min(k + 3, ap.max_k + 3), "different"),
            ap.count(k, "different", declared=True), f"{observed:.2e}", f"{expected:.2e}",
            *(f"{expected * n:.2g}" for n in PROJECT_TO), pct(e.at(k)["recall_same_content"]),
        ])
    return rows


def all_pairs_k_rows(ap: AllPairs) -> list[list[Any]]:
    """The default configuration at every k: what all pairs across sites do."""
    rows = []
    for k in range(ap.max_k + 1):
        _, expected = ap.per_pair_rate(k)
        rows.append([k, ap.count(k, "different"), ap.count(k, "different", declared=True),
                     ap.count(k, "middle"), ap.count(k, "middle", declared=True),
                     ap.count(k, "same"), ap.count(k, "same", declared=True),
                     f"{expected:.2e}", f"{expected * PROJECT_TO[-1]:.2g}"])
    return rows


def histogram_rows(baseline: AllPairs | None, default: AllPairs, upto: int = 20) -> list[list[Any]]:
    """Pairs of different pages at each small distance, baseline beside default."""
    def cell(ap: AllPairs | None, d: int) -> Any:
        # beyond max_k + 3 the texts were not compared: same-content pairs are not taken out
        return "-" if ap is None or d > ap.max_k + 3 else int(ap.different_histogram[d])
    return [[d, cell(baseline, d), cell(default, d)] for d in range(upto + 1)]


def targets_section(result: RunResult) -> list[str]:
    """The quality targets of the fingerprint (issue "fingerprints that stay apart"), met or not."""
    c = result.default
    m, ap, k = c.metrics, c.evaluation.allpairs, c.k
    lines = ["## Targets", ""]
    if ap is None:
        return lines + ["The default was not measured on all pairs (quick run)."]
    _, expected = ap.per_pair_rate(k)
    within_k3 = ap.count(min(k + 3, ap.max_k + 3), "different")
    boiler = m["false_positives_pairs"]
    checks = [
        (f"every bit set in 35-65% of pages: {100 * ap.bit_share.min():.1f}-{100 * ap.bit_share.max():.1f}%",
         0.35 <= ap.bit_share.min() and ap.bit_share.max() <= 0.65),
        (f"mean distance of different pairs >= 31: {ap.mean:.2f}", ap.mean >= 31),
        (f"no pair of different pages declared a duplicate among all {ap.pairs:,} pairs: "
         f"{ap.count(k, 'different', declared=True)}", ap.count(k, "different", declared=True) == 0),
        (f"no different pair within k + 3 = {k + 3} before verification: {within_k3}", within_k3 == 0),
        (f"projected false matches per check at 10^9 stored <= {PROJECTED_TARGET}: {expected * 1e9:.2g}",
         expected * 1e9 <= PROJECTED_TARGET),
        (f"same-content recall >= {RECALL_TARGET:.0%}: {pct(m['recall_same_content'])}",
         m["recall_same_content"] >= RECALL_TARGET),
        (f"same-site hard-negative FPR <= {FPR_TARGET:.1%}: {pct(m['fpr_hard_negatives'], 3)}",
         m["fpr_hard_negatives"] <= FPR_TARGET),
        (f"no pairs.tsv negative (shared-boilerplate-only, different-content) flagged: {boiler}", boiler == 0),
    ]
    return lines + [f"- {text}: {met(ok)}" for text, ok in checks]


@dataclass
class RunResult:
    """Everything the report and the JSON summary need."""

    quick: bool
    sets: PairSets
    extractions: dict[str, Extraction]
    evaluations: list[Evaluation]
    default: Choice
    best_by_extractor: dict[str, Choice]
    sweeps: dict[str, list[Evaluation]]
    seconds: float
    command: str
    report_k: int = REPORT_K
    minhash: MinHashResult | None = None

    def evaluations_of(self, extractor: str) -> list[Evaluation]:
        return [e for e in self.evaluations if e.extractor == extractor]


def summary(result: RunResult) -> dict[str, Any]:
    """The one-line JSON summary of the recommended default."""
    e, k, m = result.default.evaluation, result.default.k, result.default.metrics
    at_report_k = e.at(result.report_k)
    return {
        "default": config_dict(e, k), "k": k, "scheme": e.scheme.name,
        "recall_same_content": round(m["recall_same_content"], 4),
        "recall_near_duplicate": round(m["recall_near_duplicate"], 4),
        "fpr_hard_negatives": round(m["fpr_hard_negatives"], 6),
        "fpr_hard_by_source": {s: round(m[f"fpr_hard_{s}"], 6) for s in HARD_SOURCES},
        "fpr_pairs_negatives": round(m["fpr_pairs_negatives"], 4),
        "false_positives_hard": m["false_positives_hard"],
        "exact_false_positives_hard": m["exact_false_positives_hard"],
        "hard_negative_pairs": len(result.sets.hard),
        "same_content_pairs": int(result.sets.count("same-content")),
        "near_duplicate_pairs": int(result.sets.count("near-duplicate")),
        "pairs_negatives": int(sum(result.sets.count(label) for label in NEGATIVE_LABELS)),
        "targets_met": bool(m["recall_same_content"] >= RECALL_TARGET and m["fpr_hard_negatives"] <= FPR_TARGET),
        f"at_k{result.report_k}": {"recall_same_content": round(at_report_k["recall_same_content"], 4),
                                   "fpr_hard_negatives": round(at_report_k["fpr_hard_negatives"], 6)},
        "best_per_extractor": {x: {"scheme": c.evaluation.scheme.name, "k": c.k,
                                   "recall_same_content": round(c.metrics["recall_same_content"], 4),
                                   "fpr_hard_negatives": round(c.metrics["fpr_hard_negatives"], 6)}
                               for x, c in result.best_by_extractor.items()},
        "quick": result.quick, "seconds": round(result.seconds, 1),
        **({"all_pairs": all_pairs_dict(e.allpairs, min(k, e.allpairs.max_k))} if e.allpairs is not None else {}),
        **({"all_pairs_v1_words_k7": all_pairs_dict(b.allpairs, 7)} if (b := baseline(result)) is not None
           and b.allpairs is not None else {}),
        **({"minhash": minhash_summary(result.minhash)} if result.minhash is not None else {}),
    }


def baseline(result: RunResult) -> Evaluation | None:
    """The 0.1 default (spec version 1, ``words``) with the default's extractor."""
    return next((e for e in result.evaluations if e.scheme.version == 1 and e.scheme.name == "words"
                 and e.extractor == result.default.evaluation.extractor), None)


def web_scale_section(result: RunResult) -> list[str]:
    """All pairs across sites: what a large store meets."""
    c = result.default
    ap = c.evaluation.allpairs
    if ap is None:
        return []
    base = baseline(result)
    lines = [
        "## At web scale: all pairs across sites",
        "",
        f"Every page of the corpus folders {', '.join(ALL_PAIRS_SOURCES)} is extracted (`{c.evaluation.extractor}`) "
        f"and fingerprinted; the {ap.pages:,} non-empty pages give {ap.pairs:,} pairs, nearly all of them two "
        "unrelated pages of different sites. Pairs whose SimHash distance is within k + 3 are compared by "
        f"their extracted texts: word 5-shingle Jaccard < {DIFFERENT_JACCARD} is *different*, >= "
        f"{SAME_JACCARD} the *same*, the rest *middle*. A different pair the product's rule declares a "
        "duplicate is a false match; a store of N pages meets N times the per-pair rate at every check. "
        "The observed rate cannot resolve less than one pair in the corpus, so the *expected* rate adds up, "
        "over the different pairs within k, the chance that their sketches pass the verification "
        "(binomial over the 60 bins, from each pair's true 3-shingle Jaccard); an equal digest counts 1.",
        "",
        "Each configuration at its operating k (the default at its k; version-1 `words`, the 0.1 default, "
        "measured up to k = 10):",
        "",
    ]
    lines += markdown_table(
        ("configuration", "k", "mean distance (different)", "sd", "bit share", "different within k",
         "within k+3", "different declared", "per-pair observed", "per-pair expected", "per check 10^6",
         "10^8", "10^9", "same-content recall"),
        all_pairs_rows(result.evaluations, c))
    lines += ["", "The default at every k (before verification / declared by the full rule):", ""]
    lines += markdown_table(("k", "different", "declared", "middle", "declared", "same", "declared",
                             "per-pair expected", "per check at 10^9"), all_pairs_k_rows(ap))
    lines += ["", "Pairs of different pages at small distances (the tail that decides false matches):", ""]
    lines += markdown_table(("distance", "v1 `words`" if base is not None else "-",
                             f"default `{c.evaluation.scheme.name}`"),
                            histogram_rows(base.allpairs if base is not None else None, ap))
    return lines


def met(ok: bool) -> str:
    return "met" if ok else "**NOT met**"


def data_section(result: RunResult) -> list[str]:
    """What the pairs are and how many."""
    sets = result.sets
    labels = sorted({p.label for p in sets.labelled})
    sites: dict[str, set[str]] = defaultdict(set)
    for p in sets.hard:
        sites[p.source].add(p.group)
    excluded = ", ".join(f"{n} {why}" for why, n in sets.excluded.items())
    return [
        "## Data",
        "",
        f"Corpus `shared/corpus` ({len(sets.pages())} distinct pages used).",
        "",
        "- `near-dup-pairs/pairs.tsv` (the development half of the labelled pairs): "
        + ", ".join(f"{sets.count(label)} `{label}`" for label in labels) + ". "
        "Recall is measured on `same-content` (the target) and `near-duplicate`; "
        "`shared-boilerplate-only` and `different-content` are the *pairs.tsv negatives*; "
        "`partial-overlap` is shown for information; the rest are not scored.",
        f"- *Hard negatives*: every pair of different pages within one site, {len(sets.hard)} pairs: "
        + ", ".join(f"{sum(p.source == s for p in sets.hard)} from {s} ({len(sites[s])} sites)" for s in HARD_SOURCES)
        + f" (Dragnet: hosts with >= {DRAGNET_MIN_HOST_PAGES} pages; CleanPortalEval's two washingtonpost.com "
        f"blog groups count as one site). Removed as not negatives: {excluded}. The same-URL and README "
        "rules catch true duplicates that pairs.tsv does not list because they belong to its held-back "
        "half (CleanPortalEval washingtonpost blog1_8/_15 and Utomo `trump (4)`/`(5)` name one URL; "
        "Dragnet R491/R492 is one Reuters story under two URLs, per dragnet/README.md).",
    ]


def recommendation_section(result: RunResult) -> list[str]:
    """The recommended default, its numbers, and the best per extractor."""
    c = result.default
    d, k, m = c.evaluation, c.k, c.metrics
    f = d.scheme.features
    n_same = result.sets.count("same-content")
    n_negative = sum(result.sets.count(label) for label in NEGATIVE_LABELS)
    idf = f", idf=\"{f.idf}\", idf_doc_len={f.idf_doc_len:g}" if f.uses_idf else ", idf=None"
    lines = [
        "## Recommended default for the SimHash alone (`bands=False`)",
        "",
        "This harness measures the SimHash candidates (`distance <= k`, then the sketch): it chooses the "
        "configuration and the k of the SimHash alone (`neardup.model.SIMHASH_ONLY_K_BY_VERSION`). With the "
        "sketch bands (the default) the candidate stage brings pairs at any distance and the default k is "
        "chosen by `benchmarks/candidates.py` (section *Candidate stage* below: k = 3); the whole rule on "
        "the labelled pairs is in *The product's rule* at the end.",
        "",
        f"`FingerprintConfig(version={d.config.version}, extractor=\"{d.extractor}\", "
        f"min_tokens={d.config.min_tokens}, bits={d.config.bits}, sketch_bins={d.config.sketch_bins})`, "
        f"`FeatureConfig(scheme=\"{f.scheme}\", ngram={f.ngram}, "
        f"w_heading={f.w_heading:g}, w_list={f.w_list:g}, w_short={f.w_short:g}, short_tokens={f.short_tokens}, "
        f"tf=\"{f.tf}\"{idf})` (scheme `{d.scheme.name}` below), **k = {k}**, "
        f"**verify = {d.scheme.verify}**:",
        "",
        f"- same-content recall **{pct(m['recall_same_content'])}** "
        f"({round(m['recall_same_content'] * n_same)} of {n_same}; target {RECALL_TARGET:.0%}: "
        f"{met(m['recall_same_content'] >= RECALL_TARGET)}); near-duplicate recall {pct(m['recall_near_duplicate'])};",
        f"- hard-negative FPR **{pct(m['fpr_hard_negatives'], 3)}** ({m['false_positives_hard']} of "
        f"{len(result.sets.hard)} pairs, {m['exact_false_positives_hard']} of them through an equal digest; "
        f"target {FPR_TARGET:.1%}: {met(m['fpr_hard_negatives'] <= FPR_TARGET)}); pairs.tsv negatives "
        f"{pct(m['fpr_pairs_negatives'])} ({m['false_positives_pairs']} of {n_negative}).",
        f"- at the library's current k = {result.report_k} the same configuration gives "
        f"{pct(d.at(result.report_k)['recall_same_content'])} recall and "
        f"{pct(d.at(result.report_k)['fpr_hard_negatives'], 3)} FPR.",
        "",
        f"Selection rule (automatic): over every extractor, configuration measured on all pairs (below) "
        f"and k in 0..{max(K_VALUES)}, keep those whose hard-negative FPR is <= {FPR_TARGET:.1%} at k *and* at "
        "k + 1 (one bit of margin: k is tuned on a small sample) and that declare no pair of different "
        f"pages among all corpus pairs with at most {PROJECTED_TARGET} expected false matches per check at "
        "10^9 stored pages, then take the highest same-content recall; ties go to fewer false positives, "
        "higher near-duplicate recall, the fast extractor, the smaller k. min_tokens is then chosen the "
        "same way from the sweep below (ties keep 10).",
        "",
        f"Resolution: one same-content pair is {pct(1 / max(n_same, 1))} of recall and one hard-negative "
        f"pair {pct(1 / max(len(result.sets.hard), 1), 3)} of FPR, and k is tuned on these pairs (the held-back "
        "half of pairs.tsv is the honest test), so differences of one or two pairs between schemes are noise.",
        "",
        "Best per extractor (when nothing meets the FPR target, the limit is the lowest FPR any scheme "
        "reaches with that extractor, i.e. its identical-text floor):",
        "",
    ]
    rows = []
    for x, b in result.best_by_extractor.items():
        bm = b.metrics
        rows.append([f"`{x}`", f"`{b.evaluation.scheme.name}`", b.evaluation.config.min_tokens, b.k,
                     pct(b.fpr_limit, 3),
                     pct(bm["recall_same_content"]), pct(bm["recall_near_duplicate"]),
                     pct(bm["fpr_hard_negatives"], 3), bm["exact_false_positives_hard"]])
    lines += markdown_table(("extractor", "scheme", "min_tokens", "k", "FPR limit", "same-content recall",
                             "near-dup recall", "FPR hard neg.", "exact FP"), rows)
    return lines


def render_report(result: RunResult) -> str:
    """docs/quality.md."""
    d, k = result.default.evaluation, result.default.k
    this_machine = machine(("resiliparse", "trafilatura", "numba", "numpy"))
    extraction_cost = ", ".join(
        f"`{x.extractor}` {1000 * x.seconds / max(len(x.texts), 1):.1f} ms/page"
        + (" (from cache)" if x.cached else "") + (f", {len(x.errors)} pages rejected" if x.errors else "")
        for x in result.extractions.values())
    lines = [
        "# Detection quality",
        "",
        "Generated by `benchmarks/quality.py`; do not edit by hand"
        + (". **QUICK run: a subset, not the benchmark.**" if result.quick else "."),
        "",
        "## What is measured",
        "",
        "For each extractor (`fast` = Resiliparse, `accurate` = trafilatura, `hybrid` = the spec-3 default: "
        "Lexbor parse, density selection, trafilatura fallback) and configuration, every "
        "page is extracted once and fingerprinted (64-bit SimHash and, in spec version 2, the 64-byte "
        "sketch), and each pair is declared a duplicate at threshold k exactly as the product does it "
        "(`neardup.matching.match`, checked pair by pair): neither fingerprint is *empty* (fewer than "
        f"`min_tokens` = {DEFAULT_MIN_TOKENS} tokens unless stated), the repeated-boilerplate guard does not "
        "separate them (one host, different titles, a main text under 1,000 bytes), and the digests are "
        "equal or `hamming(a, b) <= k` with a sketch estimate >= `verify` (configurations named "
        f"`verify=...`). For k = 0..{max(K_VALUES)}: recall on `same-content` and `near-duplicate` "
        "pairs (a pair with an empty page counts as missed), the false-positive rate (FPR) on the "
        "pairs.tsv negatives and on same-site hard negatives (overall and per source: CPE = "
        "CleanPortalEval, Big9 = Utomo Big9, Dragnet), and how many hard negatives are flagged through "
        f"an equal digest (*exact FP*). Targets: same-content recall >= {RECALL_TARGET:.0%}, hard-negative "
        f"FPR <= {FPR_TARGET:.1%}.",
        "",
        *data_section(result),
        "",
        "## How to run",
        "",
        "```",
        result.command,
        "```",
        "",
        f"`--quick` is a smoke test (fast extractor, 3 schemes, {QUICK_PAGES_PER_SITE} pages per site, no "
        "report unless `--out`); `--cache DIR` keeps extracted texts between runs.",
        "",
        f"Machine: {this_machine['nproc']} CPUs ({this_machine['cpu']}), Python {this_machine['python']}, "
        f"{this_machine['libraries']}; {this_machine['os']}. Whole run {result.seconds:.0f} s on a shared machine; "
        f"extraction {extraction_cost}.",
        "",
        *recommendation_section(result),
        "",
        *targets_section(result),
        "",
        *web_scale_section(result),
        "",
    ]
    for extractor in result.extractions:
        lines += [f"## Schemes at k = {result.report_k}, extractor `{extractor}`", ""]
        lines += markdown_table(SCHEME_HEADER, scheme_rows(result.evaluations_of(extractor), result.report_k))
        lines.append("")
    lines += [
        "`words` is the neardup 0.1 default (spec version 1: words, tf=log, every word weighted alike, no "
        "sketch); the other version-1 rows change only what their name says (`shinglesN`: N-word "
        "shingles, `charsN`: character N-grams). `idfN` rows are spec version 2 (IDF weights for pages of "
        "N words, the 64-byte sketch); `verify=v`: SimHash candidates need a sketch estimate >= v. "
        f"*Operating k*: the k with the best recall whose FPR stays <= {FPR_TARGET:.1%} at k and k + 1 and, "
        "for configurations measured on all pairs, that declares no pair of different pages there (none: "
        "no k qualifies).",
        "",
        f"## Recommended default at k = 0..{max(K_VALUES)} (`{d.extractor}`, `{d.scheme.name}`, "
        f"min_tokens {d.config.min_tokens})",
        "",
    ]
    lines += markdown_table(
        ("k", "same-content recall", "near-dup recall", "partial-overlap flagged", "FPR pairs.tsv neg.",
         "FPR hard neg.", "CPE", "Big9", "Dragnet", "hard FP pairs", "exact FP"), k_rows(d))
    for x, sweep in result.sweeps.items():
        best = result.best_by_extractor[x]
        lines += ["", f"## min_tokens (`{x}`, `{best.evaluation.scheme.name}`, k = {best.k})", ""]
        lines += markdown_table(
            ("min_tokens", "empty pages", "same-content recall", "near-dup recall", "FPR hard neg.",
             "Dragnet FPR", "hard FP pairs", "exact FP"), min_tokens_rows(sweep, best.k))
    lines += ["", f"## Same-content pairs missed by the default (k = {k})", ""]
    missed = missed_rows(d, result.sets, k)
    lines += (markdown_table(("pair", "evidence", "distance", "why", "tokens a / b", "note"), missed)
              if missed else ["None."])
    lines += ["", f"## Negatives wrongly declared duplicates by the default (k = {k})", ""]
    wrong = false_positive_rows(d, result.sets, k)
    lines += markdown_table(("pair / site", "a", "b", "distance", "via"), wrong) if wrong else ["None."]
    lines += ["", "## Why the defaults", "", why_paragraph(result), ""]
    notes = library_notes()
    if notes:
        lines += ["## Library behaviour these numbers depend on", ""] + [f"- {n}" for n in notes] + [""]
    if result.minhash is not None:
        lines += minhash_section(result) + [""]
    return "\n".join(lines)


LIST_PROBE = (b"<html><body><article><h1>Probe</h1><p>" + b"A paragraph of ordinary words. " * 8
              + b"</p><ul><li>first list item here</li><li>second list item here</li></ul><p>"
              + b"Another paragraph of ordinary words. " * 8 + b"</p></article></body></html>")
SHORT_PROBE = "A heading\nBy someone\nA longer paragraph line with quite a few words in it.\nAdvertisement"


def library_notes() -> list[str]:
    """Checks of library behaviour that the numbers depend on (run each time, never assumed)."""
    notes = []
    for scheme in ("chars", "shingles", "words"):
        ngram = 4 if scheme == "chars" else 2 if scheme == "shingles" else 1
        hashes = {fingerprint_text(SHORT_PROBE, FingerprintConfig(
            features=FeatureConfig(scheme=scheme, ngram=ngram, w_short=w))).simhash for w in (0.5, 1.0)}
        if len(hashes) == 1:
            notes.append(f"`w_short` / `short_tokens` have no effect with scheme `{scheme}` (same SimHash "
                         "for w_short 0.5 and 1), so those variants are not listed for it.")
    for extractor in EXTRACTORS:
        text = extract_main_content(LIST_PROBE, extractor=extractor).text
        if not any(line.startswith(("- ", "* ")) for line in text.splitlines()):
            notes.append(f"The `{extractor}` extractor keeps no list-item markers (`<li>` becomes a plain line "
                         "or is dropped), so `w_list` does not apply to its pages.")
    return notes


def why_paragraph(result: RunResult) -> str:
    """A short, data-driven justification of the recommended default."""
    c = result.default
    d, k = c.evaluation, c.k
    parts = [
        f"`{d.scheme.name}` with the `{d.extractor}` extractor at k = {k} has the best same-content "
        f"recall ({pct(c.metrics['recall_same_content'])}) of all configurations that keep the same-site "
        f"FPR under {FPR_TARGET:.1%} with a bit of margin."
    ]
    for x, b in result.best_by_extractor.items():
        if x == d.extractor:
            continue
        hosts = exact_fp_hosts(b.evaluation, result.sets)
        parts.append(
            f"The `{x}` extractor's best is `{b.evaluation.scheme.name}` at k = {b.k} with "
            f"{pct(b.metrics['recall_same_content'])} recall at {pct(b.metrics['fpr_hard_negatives'], 3)} FPR"
            + (f"; {b.metrics['exact_false_positives_hard']} of its hard-negative pairs have identical "
               f"extracted texts ({', '.join(f'{h} {n}' for h, n in hosts.items())}: the extractor returns "
               "the same sidebar or promo block for different articles), which no feature scheme or k can fix"
               if hosts else "") + ".")
    words = next((e for e in result.evaluations_of(d.extractor) if e.scheme.name == "words"), None)
    if words is not None and words is not d:
        op = words.operating_k()
        at_op = f" and {pct(words.at(op)['recall_same_content'])} at its operating k = {op}" if op is not None else ""
        parts.append(f"The neardup 0.1 default (spec version 1, `words`: no IDF, no sketch) reaches "
                     f"{pct(words.at(result.report_k)['recall_same_content'])} at k = {result.report_k}{at_op}, "
                     "where its operating k is also limited by the pairs of different pages it declares among all "
                     "corpus pairs (see *At web scale*).")
    for x, sw in result.sweeps.items():
        by_mt = {e.config.min_tokens: e for e in sw}
        kk = result.best_by_extractor[x].k
        if 0 in by_mt and DEFAULT_MIN_TOKENS in by_mt:
            z, t = by_mt[0].at(kk), by_mt[DEFAULT_MIN_TOKENS].at(kk)
            why = (" (Dragnet pages whose extracted body is empty or a few words share a digest)"
                   if z["false_positives_hard"] > t["false_positives_hard"] else "")
            parts.append(
                f"`min_tokens` ({x}, k = {kk}): 0 gives {z['false_positives_hard']} hard false positives, "
                f"{pct(z['fpr_hard_dragnet'], 2)} on Dragnet{why}; {DEFAULT_MIN_TOKENS} gives "
                f"{t['false_positives_hard']} ({by_mt[0].empty_pages} vs {by_mt[DEFAULT_MIN_TOKENS].empty_pages} "
                "empty pages).")
    if c.metrics["recall_same_content"] < RECALL_TARGET:
        top = d.at(max(K_VALUES))
        distances = sorted(row[2] for row in missed_rows(d, result.sets, k))
        parts.append(
            f"The {RECALL_TARGET:.0%} recall target is not reached: the missed pairs lie at distances "
            f"{', '.join(map(str, distances))}, because their extracted texts differ (navigation or an ad block "
            "taken as the main text, or one capture only partly extracted; compare the token counts), not "
            f"because of SimHash noise. Even k = {max(K_VALUES)} gives only {pct(top['recall_same_content'])} "
            f"recall, at {pct(top['fpr_hard_negatives'], 3)} FPR.")
    return " ".join(parts)


# --------------------------------------------------------------------------------------------
# MinHash beside SimHash
# --------------------------------------------------------------------------------------------

MINHASH_THRESHOLDS = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))  # 0.3 .. 0.95
MINHASH_MARGIN_T = 0.25  # scored too, so that t = 0.3 has a "next lower t"
MINHASH_DEFAULT_SCHEME = "shingles3"  # MinHashConfig()'s feature set


def minhash_schemes(quick: bool) -> list[Scheme]:
    """Feature sets compared for MinHash (weights play no part: a set is a set)."""
    def set_of(scheme: str, ngram: int) -> FeatureConfig:
        return FeatureConfig(scheme=scheme, ngram=ngram, tf="binary")
    schemes = [
        Scheme("shingles3", MinHashConfig().features),
        Scheme("shingles2", set_of("shingles", 2)),
        Scheme("words", set_of("words", 1)),
        Scheme("shingles5", set_of("shingles", 5)),
        Scheme("chars5", set_of("chars", 5)),
    ]
    return schemes[:2] if quick else schemes


@dataclass(frozen=True)
class JaccardScores:
    """Per-pair comparison under the MinHash rule: estimated Jaccard of the signatures, equal
    digest, either page empty, the repeated-boilerplate guard; plus the SimHash distance
    (default features) and the sketch estimate that confirms it, for ``both``."""

    jaccard: np.ndarray
    distance: np.ndarray
    same_digest: np.ndarray
    empty: np.ndarray
    tokens_a: np.ndarray
    tokens_b: np.ndarray
    sketch_score: np.ndarray
    guarded: np.ndarray
    simhash_k: int | None = None  # set: the ``both`` rule, SimHash <= k OR MinHash >= t

    def declared(self, t: float) -> np.ndarray:
        """The Detector's rule: neither empty, and equal digest or estimated Jaccard >= t (or,
        for ``both``, Hamming distance <= k)."""
        hit = self.same_digest | (self.jaccard >= t)
        if self.simhash_k is not None:  # the SimHash candidates the sketch confirms
            hit = hit | ((self.distance <= self.simhash_k) & ~(self.sketch_score < DETECTOR_VERIFY))
        return ~self.empty & ~self.guarded & hit

    def exact(self) -> np.ndarray:
        return ~self.empty & ~self.guarded & self.same_digest

    def with_simhash(self, k: int) -> JaccardScores:
        return replace(self, simhash_k=k)


def score_jaccard(pairs: Sequence[Pair], sigs: PageFingerprints) -> JaccardScores:
    simhash = score_pairs(pairs, sigs)
    assert sigs.signatures is not None, "fingerprint_pages with a MinHash config"
    ia = np.array([sigs.index[p.a] for p in pairs], dtype=np.int64)
    ib = np.array([sigs.index[p.b] for p in pairs], dtype=np.int64)
    est = np.empty(len(pairs))
    for start in range(0, len(pairs), 4096):  # agreement share, as neardup.fingerprint.minhash.jaccard
        a, b = ia[start:start + 4096], ib[start:start + 4096]
        est[start:start + 4096] = (sigs.signatures[a] == sigs.signatures[b]).sum(axis=1) / sigs.signatures.shape[1]
    return JaccardScores(
        jaccard=est,
        distance=np.array([(sigs.simhash[i] ^ sigs.simhash[j]).bit_count() for i, j in zip(ia, ib)], dtype=np.int64),
        same_digest=np.array([sigs.digest[i] == sigs.digest[j] for i, j in zip(ia, ib)], dtype=bool),
        empty=sigs.empty[ia] | sigs.empty[ib],
        tokens_a=sigs.tokens[ia],
        tokens_b=sigs.tokens[ib],
        sketch_score=simhash.score,
        guarded=simhash.guarded,
    )


@dataclass
class MinHashEvaluation:
    """One feature set under ``minhash`` and ``both``, at every threshold."""

    scheme: Scheme
    config: FingerprintConfig
    labelled: JaccardScores
    hard: JaccardScores
    by_t: dict[float, dict[str, float]]
    both_by_t: dict[float, dict[str, float]]
    empty_pages: int

    def at(self, t: float, both: bool = False) -> dict[str, float]:
        return (self.both_by_t if both else self.by_t)[t]

    def within(self, t: float, fpr_limit: float, both: bool = False) -> bool:
        """FPR within the limit at t and at the next lower t (the margin, as k and k + 1)."""
        lower = round(t - 0.05, 2)
        return all(self.at(x, both)["fpr_hard_negatives"] <= fpr_limit + 1e-12 for x in (t, lower))

    def operating_t(self, fpr_limit: float = FPR_TARGET, both: bool = False) -> float | None:
        ok = [t for t in MINHASH_THRESHOLDS if self.within(t, fpr_limit, both)]
        if not ok:
            return None
        return max(ok, key=lambda t: minhash_preference(self.at(t, both), t))


def minhash_preference(m: dict[str, float], t: float) -> tuple:
    """Best same-content recall; ties: fewer false positives, better near-duplicate recall,
    then the higher (safer) threshold."""
    return (m["recall_same_content"], -(m["false_positives_hard"] + m["false_positives_pairs"]),
            m["recall_near_duplicate"], t)


def evaluate_minhash(sets: PairSets, masks: Masks, extraction: Extraction, scheme: Scheme,
                     hosts: dict[str, str | None]) -> MinHashEvaluation:
    """Sign all pages with one feature set and score ``minhash`` and ``both`` at every t."""
    config = FingerprintConfig(extractor=extraction.extractor, min_tokens=DEFAULT_MIN_TOKENS,
                               minhash=MinHashConfig(features=scheme.features))
    pages = set(sets.pages())
    sigs = fingerprint_pages({p: t for p, t in extraction.texts.items() if p in pages}, config,
                             extraction.titles, hosts)
    labelled = score_jaccard(sets.labelled, sigs)
    hard = score_jaccard(sets.hard, sigs)
    ts = (MINHASH_MARGIN_T, *MINHASH_THRESHOLDS)
    by_t = {t: metrics_at(t, labelled, hard, masks) for t in ts}
    lb, hb = labelled.with_simhash(DETECTOR_K), hard.with_simhash(DETECTOR_K)
    both_by_t = {t: metrics_at(t, lb, hb, masks) for t in ts}
    return MinHashEvaluation(scheme, config, labelled, hard, by_t, both_by_t, int(sigs.empty.sum()))


@dataclass
class MinHashResult:
    """Every feature set, the recommended threshold for the default one, and the SimHash
    reference (the Detector's default config at k = DETECTOR_K)."""

    extractor: str
    evaluations: list[MinHashEvaluation]
    simhash: dict[str, float]
    simhash_k: int
    seconds: float

    @property
    def default(self) -> MinHashEvaluation:
        return next(e for e in self.evaluations if e.scheme.name == MINHASH_DEFAULT_SCHEME)

    def best(self, both: bool = False) -> tuple[MinHashEvaluation, float] | None:
        """The feature set and t with the best preference within the FPR target."""
        choices = [(e, t) for e in self.evaluations if (t := e.operating_t(both=both)) is not None]
        if not choices:
            return None
        return max(choices, key=lambda c: minhash_preference(c[0].at(c[1], both), c[1]))


def run_minhash(sets: PairSets, masks: Masks, extraction: Extraction, quick: bool,
                hosts: dict[str, str | None]) -> MinHashResult:
    started = time.perf_counter()
    evaluations = []
    for scheme in minhash_schemes(quick):
        e = evaluate_minhash(sets, masks, extraction, scheme, hosts)
        op = e.operating_t()
        msg = "none" if op is None else (f"{op}: same-content {e.at(op)['recall_same_content']:.3f} "
                                         f"fpr_hard {e.at(op)['fpr_hard_negatives']:.4f}")
        log(f"minhash {extraction.extractor:8} {scheme.name:10} operating t {msg}")
        evaluations.append(e)
    # the SimHash reference: the Detector's default fingerprint config and k (no MinHash match)
    def simhash_only(scores: JaccardScores) -> JaccardScores:
        return replace(scores, jaccard=np.full_like(scores.jaccard, -1.0), simhash_k=DETECTOR_K)
    simhash = metrics_at(1.0, simhash_only(evaluations[0].labelled), simhash_only(evaluations[0].hard), masks)
    return MinHashResult(extraction.extractor, evaluations, simhash, DETECTOR_K, time.perf_counter() - started)


MINHASH_T_HEADER = ("t", "same-content recall", "near-dup recall", "partial-overlap flagged", "FPR pairs.tsv neg.",
                    "FPR hard neg.", "CPE", "Big9", "Dragnet", "hard FP pairs", "exact FP")


def minhash_t_rows(e: MinHashEvaluation, both: bool = False) -> list[list[Any]]:
    rows = []
    for t in MINHASH_THRESHOLDS:
        m = e.at(t, both)
        rows.append([f"{t:.2f}", pct(m["recall_same_content"]), pct(m["recall_near_duplicate"]),
                     pct(m["flagged_partial_overlap"]), pct(m["fpr_pairs_negatives"]),
                     pct(m["fpr_hard_negatives"], 3), pct(m["fpr_hard_cleanportaleval"], 2),
                     pct(m["fpr_hard_utomo-big9"], 2), pct(m["fpr_hard_dragnet"], 2),
                     m["false_positives_hard"], m["exact_false_positives_hard"]])
    return rows


def minhash_missed_rows(e: MinHashEvaluation, sets: PairSets, t: float) -> list[list[Any]]:
    declared = e.labelled.declared(t)
    rows = []
    for i, pair in enumerate(sets.labelled):
        if pair.label == "same-content" and not declared[i]:
            reason = "empty page" if e.labelled.empty[i] else "Jaccard"
            rows.append([pair.pair_id, pair.group, f"{e.labelled.jaccard[i]:.3f}", int(e.labelled.distance[i]), reason,
                         f"{e.labelled.tokens_a[i]} / {e.labelled.tokens_b[i]}", pair.note.replace("|", "/")])
    return rows


def minhash_false_positive_rows(e: MinHashEvaluation, sets: PairSets, t: float) -> list[list[Any]]:
    rows = []
    for scores, pairs in ((e.labelled, sets.labelled), (e.hard, sets.hard)):
        declared = scores.declared(t)
        for i, pair in enumerate(pairs):
            if declared[i] and (pair.label == "hard-negative" or pair.label in NEGATIVE_LABELS):
                where = pair.pair_id if pair.source == "pairs.tsv" else f"{pair.source} {pair.group}"
                how = "digest" if scores.same_digest[i] else "minhash"
                rows.append([where, f"`{pair.a}`", f"`{pair.b}`", f"{scores.jaccard[i]:.3f}", how])
    return rows


def minhash_section(result: RunResult) -> list[str]:
    """The MinHash section of docs/quality.md."""
    mh = result.minhash
    assert mh is not None
    d = mh.default
    t = d.operating_t()
    tb = d.operating_t(both=True)
    best = mh.best()
    n_same = result.sets.count("same-content")
    lines = [
        "## MinHash beside SimHash",
        "",
        f"Extractor `{mh.extractor}`, min_tokens {DEFAULT_MIN_TOKENS}, 128 permutations (`MinHashConfig(num_perm=128, "
        "seed=1)`), the same pages and pairs as above. A pair is declared a duplicate as "
        "`Detector(method=\"minhash\", threshold=t)` does it: neither page is empty (a pair with an empty page is "
        "a miss) and the digests are equal or the estimated Jaccard of the two signatures (share of equal "
        "positions) is >= t. `both` is `Detector(method=\"both\")`: SimHash with the Detector's default "
        f"fingerprint config at k = {mh.simhash_k} OR MinHash >= t. Feature sets: word N-shingles "
        "(`shinglesN`, `shingles3` is `MinHashConfig()`'s default), single words (`words`), character 5-grams "
        f"(`chars5`). Thresholds t = {MINHASH_THRESHOLDS[0]:.2f}..{MINHASH_THRESHOLDS[-1]:.2f} in steps of 0.05; the "
        f"*operating t* is chosen like k: hard-negative FPR <= {FPR_TARGET:.1%} at t *and* at the next lower t "
        "(one step of margin), then the best same-content recall; ties go to fewer false positives, better "
        "near-duplicate recall, the higher t. The estimate's standard error is sqrt(J (1 - J) / 128), about "
        "0.035 at J = 0.8, so thresholds closer than that are hard to tell apart on single pairs. "
        f"MinHash scoring took {mh.seconds:.0f} s.",
        "",
    ]
    if t is not None:
        m = d.at(t)
        lines += [
            f"**Operating point of `method=\"minhash\"` on these pairs: threshold {t:.2f}** "
            f"(feature set `{d.scheme.name}`): "
            f"same-content recall {pct(m['recall_same_content'])} ({round(m['recall_same_content'] * n_same)} of "
            f"{n_same}), near-duplicate recall {pct(m['recall_near_duplicate'])}, hard-negative FPR "
            f"{pct(m['fpr_hard_negatives'], 3)} ({m['false_positives_hard']} pairs, {m['exact_false_positives_hard']} "
            f"of them through an equal digest), pairs.tsv negatives {pct(m['fpr_pairs_negatives'])}."
            + (f" The library's default threshold {LIBRARY_T:g} gives "
               f"{pct(d.at(LIBRARY_T)['recall_same_content'])} recall "
               f"at {pct(d.at(LIBRARY_T)['fpr_hard_negatives'], 3)} FPR; "
               "it stays the default until MinHash is measured "
               "on all pairs across sites as SimHash is above (these are same-site pairs only)."
               if LIBRARY_T in d.by_t and t != LIBRARY_T else ""),
            "",
        ]
    else:
        lines += [f"No threshold keeps the hard-negative FPR within {FPR_TARGET:.1%} for `{d.scheme.name}`.", ""]
    if t is not None:
        simhash_hit = ~d.labelled.empty & (d.labelled.same_digest | (d.labelled.distance <= mh.simhash_k))
        minhash_hit = d.labelled.declared(t)
        same = np.array([p.label == "same-content" for p in result.sets.labelled])
        only_min = int((same & minhash_hit & ~simhash_hit).sum())
        only_sim = int((same & simhash_hit & ~minhash_hit).sum())
        extra_fp = d.at(t)["false_positives_hard"] - mh.simhash["false_positives_hard"]
        lines += [
            f"Compared with SimHash at k = {mh.simhash_k}: MinHash at t = {t:.2f} finds {only_min} same-content "
            f"pair(s) SimHash misses and misses {only_sim} that SimHash finds; it flags {extra_fp:+d} hard-negative "
            "pair(s) relative to SimHash (listed below).",
            "",
        ]
    if tb is not None:
        mb, m8 = d.at(tb, True), d.at(LIBRARY_T, True)
        sm0 = mh.simhash
        same_as_simhash = all(mb[x] == sm0[x] for x in ("recall_same_content", "recall_near_duplicate",
                                                        "false_positives_hard", "false_positives_pairs"))
        lines += [
            f"`both` (OR of the two tests) has its operating point at t = {tb:.2f}"
            + (", where MinHash adds no pair to SimHash alone" if same_as_simhash else "")
            + f"; at t = {LIBRARY_T:.2f} (the library default) it gives "
            f"{pct(m8['recall_same_content'])} same-content and "
            f"{pct(m8['recall_near_duplicate'])} near-duplicate recall (SimHash alone: "
            f"{pct(sm0['recall_same_content'])} / {pct(sm0['recall_near_duplicate'])}) with "
            f"{m8['false_positives_hard']} hard false positives (SimHash alone: {sm0['false_positives_hard']}).",
            "",
        ]
    if best is not None and best[0] is not d:
        be, bt = best
        bm = be.at(bt)
        lines += [f"Best feature set overall: `{be.scheme.name}` at t = {bt:.2f} ({pct(bm['recall_same_content'])} "
                  f"same-content recall, {pct(bm['fpr_hard_negatives'], 3)} FPR).", ""]
    # comparison at the operating points
    sm = mh.simhash
    rows = [[f"SimHash (Detector default config), k = {mh.simhash_k}", pct(sm["recall_same_content"]),
             pct(sm["recall_near_duplicate"]), pct(sm["flagged_partial_overlap"]), pct(sm["fpr_pairs_negatives"]),
             pct(sm["fpr_hard_negatives"], 3), sm["false_positives_hard"], sm["exact_false_positives_hard"]]]
    for label, e, tt, both in ((f"MinHash `{d.scheme.name}`", d, t, False), (f"both, `{d.scheme.name}`", d, tb, True),
                               (f"MinHash `{d.scheme.name}` at {LIBRARY_T:.2f}", d, LIBRARY_T, False),
                               (f"both, `{d.scheme.name}` at {LIBRARY_T:.2f}", d, LIBRARY_T, True)):
        if tt is None:
            continue
        m = e.at(tt, both)
        rows.append([label + ("" if f"{LIBRARY_T:.2f}" in label else f", t = {tt:.2f}"), pct(m["recall_same_content"]),
                     pct(m["recall_near_duplicate"]), pct(m["flagged_partial_overlap"]), pct(m["fpr_pairs_negatives"]),
                     pct(m["fpr_hard_negatives"], 3), m["false_positives_hard"], m["exact_false_positives_hard"]])
    lines += ["### SimHash, MinHash and both at their operating points", ""]
    lines += markdown_table(("rule", "same-content recall", "near-dup recall", "partial-overlap flagged",
                             "FPR pairs.tsv neg.", "FPR hard neg.", "hard FP pairs", "exact FP"), rows)
    # per feature set
    srows = []
    for e in mh.evaluations:
        op, opb = e.operating_t(), e.operating_t(both=True)
        srows.append([f"`{e.scheme.name}`", "none" if op is None else f"{op:.2f}",
                      "-" if op is None else pct(e.at(op)["recall_same_content"]),
                      "-" if op is None else pct(e.at(op)["recall_near_duplicate"]),
                      "-" if op is None else pct(e.at(op)["fpr_hard_negatives"], 3),
                      pct(e.at(LIBRARY_T)["recall_same_content"]), pct(e.at(LIBRARY_T)["fpr_hard_negatives"], 3),
                      "none" if opb is None else f"{opb:.2f}",
                      "-" if opb is None else pct(e.at(opb, True)["recall_same_content"]),
                      "-" if opb is None else pct(e.at(opb, True)["fpr_hard_negatives"], 3)])
    lines += ["", "### Feature sets", ""]
    lines += markdown_table(("feature set", "operating t", "same-content recall", "near-dup recall", "FPR hard neg.",
                             f"recall at t = {LIBRARY_T:.2f}", f"FPR at t = {LIBRARY_T:.2f}", "both: operating t",
                             "both: recall", "both: FPR hard"), srows)
    lines += ["", f"### `minhash`, `{d.scheme.name}`, "
              f"at t = {MINHASH_THRESHOLDS[0]:.2f}..{MINHASH_THRESHOLDS[-1]:.2f}", ""]
    lines += markdown_table(MINHASH_T_HEADER, minhash_t_rows(d))
    lines += ["", f"### `both` (SimHash k = {mh.simhash_k} OR MinHash `{d.scheme.name}` >= t)", ""]
    lines += markdown_table(MINHASH_T_HEADER, minhash_t_rows(d, both=True))
    if t is not None:
        lines += ["", f"### Same-content pairs missed by MinHash `{d.scheme.name}` at t = {t:.2f}", ""]
        missed = minhash_missed_rows(d, result.sets, t)
        lines += (markdown_table(("pair", "evidence", "estimated Jaccard", "SimHash distance", "why", "tokens a / b",
                                  "note"), missed) if missed else ["None."])
        lines += ["", f"### Negatives declared duplicates by MinHash `{d.scheme.name}` at t = {t:.2f}", ""]
        wrong = minhash_false_positive_rows(d, result.sets, t)
        lines += markdown_table(("pair / site", "a", "b", "estimated Jaccard", "via"), wrong) if wrong else ["None."]
    return lines


def minhash_summary(mh: MinHashResult) -> dict[str, Any]:
    d = mh.default
    t, tb = d.operating_t(), d.operating_t(both=True)

    def point(e: MinHashEvaluation, tt: float | None, both: bool = False) -> dict[str, Any] | None:
        if tt is None:
            return None
        m = e.at(tt, both)
        return {"t": tt, "recall_same_content": round(m["recall_same_content"], 4),
                "recall_near_duplicate": round(m["recall_near_duplicate"], 4),
                "fpr_hard_negatives": round(m["fpr_hard_negatives"], 6),
                "false_positives_hard": m["false_positives_hard"],
                "fpr_pairs_negatives": round(m["fpr_pairs_negatives"], 4)}

    best = mh.best()
    return {"extractor": mh.extractor, "scheme": d.scheme.name, "recommended_threshold": t,
            "minhash": point(d, t), "both": point(d, tb, True), f"minhash_at_{LIBRARY_T:g}": point(d, LIBRARY_T),
            f"both_at_{LIBRARY_T:g}": point(d, LIBRARY_T, True),
            "simhash_reference": {"k": mh.simhash_k, "recall_same_content": round(mh.simhash["recall_same_content"], 4),
                                  "recall_near_duplicate": round(mh.simhash["recall_near_duplicate"], 4),
                                  "fpr_hard_negatives": round(mh.simhash["fpr_hard_negatives"], 6)},
            "best_scheme": None if best is None else {"scheme": best[0].scheme.name, **(point(best[0], best[1]) or {})},
            "per_scheme": {e.scheme.name: point(e, e.operating_t()) for e in mh.evaluations}}


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

log = logger("quality")  # progress lines on stderr


def evaluate_all(sets: PairSets, masks: Masks, extractions: dict[str, Extraction],
                 schemes: Sequence[Scheme], hosts: dict[str, str | None]) -> list[Evaluation]:
    """Every extractor x scheme, logging each at the report k."""
    evaluations = []
    for extraction in extractions.values():
        for scheme in schemes:
            e = evaluate(sets, masks, extraction, scheme, hosts)
            m = e.at(REPORT_K)
            log(f"{extraction.extractor:8} {scheme.name:18} k={REPORT_K}: same-content {m['recall_same_content']:.3f} "
                f"near-dup {m['recall_near_duplicate']:.3f} fpr_hard {m['fpr_hard_negatives']:.4f} "
                f"fpr_pairs {m['fpr_pairs_negatives']:.3f}; operating k {e.operating_k()}")
            evaluations.append(e)
    return evaluations


def measure_all_pairs(evaluations: Sequence[Evaluation], extractions: dict[str, Extraction],
                      pages: Sequence[str], hosts: dict[str, str | None]) -> None:
    """All pairs of ``pages`` for every version-2 configuration (the candidates for the
    default) and for the version-1 ``words`` scheme (the 0.1 default, for comparison, up to
    k = 10). Configurations that differ only in the verification threshold share one
    fingerprinting and comparison."""
    shingles = {x: Shingles(extraction.texts) for x, extraction in extractions.items()}
    done: dict[tuple[str, str], AllPairs] = {}
    for e in evaluations:
        if e.scheme.version == 1 and e.scheme.name != "words":
            continue
        max_k = max(K_VALUES) if e.scheme.version == 2 else 10
        key = (e.extractor, e.config.spec)
        if key not in done:
            started = time.perf_counter()
            done[key] = all_pairs(extractions[e.extractor], pages, e.scheme, hosts, shingles[e.extractor], max_k)
            ap = done[key]
            log(f"all pairs {e.extractor:8} {e.scheme.name:18}: {ap.pages} pages, {ap.pairs} pairs, "
                f"mean {ap.mean:.2f}, bits {ap.bit_share.min():.3f}..{ap.bit_share.max():.3f}, "
                f"{len(ap.close)} close pairs ({time.perf_counter() - started:.0f} s)")
        e.allpairs = replace(done[key], scheme=e.scheme)


def run(corpus: Path, quick: bool, cache_dir: Path | None, command: str, jobs: int = 1) -> RunResult:
    """Load the pairs, extract, fingerprint and score every configuration, measure all pairs
    of the corpus, choose the default."""
    started = time.perf_counter()
    sets = load_pairs(corpus, QUICK_PAGES_PER_SITE if quick else None)
    masks = Masks.of(sets)
    locations = page_locations(corpus)
    hosts = {p: host for p, (_, host) in locations.items()}
    pair_pages = sets.pages()
    corpus_pages = pair_pages if quick else all_pairs_pages(corpus, locations)
    pages = sorted(set(pair_pages) | set(corpus_pages))
    log(f"{len(sets.labelled)} labelled pairs, {len(sets.hard)} hard negatives, {len(pair_pages)} pages in "
        f"pairs, {len(corpus_pages)} pages for all pairs; removed from the negatives: {sets.excluded}")
    extractors = EXTRACTORS[:1] if quick else EXTRACTORS
    extractions = {x: extract_pages(corpus, pages, x, cache_dir, log, jobs) for x in extractors}
    evaluations = evaluate_all(sets, masks, extractions, candidate_schemes(quick), hosts)
    measure_all_pairs(evaluations, extractions, corpus_pages, hosts)
    best = {x: choose_with_floor([e for e in evaluations if e.extractor == x]) for x in extractors}
    sweeps: dict[str, list[Evaluation]] = {}
    for x, choice in best.items():
        sweeps[x] = [evaluate(sets, masks, extractions[x], choice.evaluation.scheme, hosts, n)
                     for n in MIN_TOKENS_SWEEP]
        tuned = choose_min_tokens(sweeps[x], choice.k, choice.fpr_limit)
        if tuned.config.min_tokens == choice.evaluation.config.min_tokens:
            tuned = choice.evaluation
        elif choice.evaluation.allpairs is not None:
            measure_all_pairs([tuned], extractions, corpus_pages, hosts)
        k = tuned.operating_k(choice.fpr_limit)
        best[x] = Choice(tuned, choice.k if k is None else k, choice.fpr_limit)
    # the default: measured at scale (all pairs), within the FPR target with margin
    meeting = [b for b in best.values() if b.fpr_limit == FPR_TARGET and b.evaluation.within(b.k, FPR_TARGET)
               and b.evaluation.allpairs is not None and b.evaluation.allpairs.ok(b.k)]
    default = (max(meeting, key=preference) if meeting
               else min(best.values(), key=lambda b: b.metrics["fpr_hard_negatives"]))
    log(f"default: {default.evaluation.extractor} {default.evaluation.scheme.name} "
        f"min_tokens={default.evaluation.config.min_tokens} k={default.k}")
    minhash = run_minhash(sets, masks, extractions["accurate" if "accurate" in extractions else extractors[0]],
                          quick, hosts)
    return RunResult(quick, sets, extractions, evaluations, default, best, sweeps,
                     time.perf_counter() - started, command, minhash=minhash)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help=f"the shared/corpus folder (default: {DEFAULT_CORPUS})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: fast extractor, 3 schemes, {QUICK_PAGES_PER_SITE} pages per site (< 1 min)")
    parser.add_argument("--out", type=Path, default=None,
                        help="Markdown report to write (default: docs/quality.md; none with --quick)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder for extracted texts, reused while the extraction code is unchanged")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                        else (os.cpu_count() or 1), help="extraction processes (default: every core)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    corpus = args.corpus.resolve()
    if not (corpus / "near-dup-pairs" / "pairs.tsv").is_file():
        print(f"error: corpus not found: {corpus}/near-dup-pairs/pairs.tsv is missing (use --corpus PATH)",
              file=sys.stderr)
        return 2
    out = args.out if args.out is not None or args.quick else REPO_ROOT / "docs" / "quality.md"
    command = "python benchmarks/quality.py" + (" --quick" if args.quick else "")
    result = run(corpus, args.quick, args.cache, command, max(1, args.jobs))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        report = render_report(result)
        kept = out.read_text(encoding="utf-8") if out.exists() else ""
        for begin, end in KEPT_SECTIONS:  # the sections other benchmarks write stay
            if begin in kept and end in kept:
                report = report.rstrip("\n") + "\n\n" + kept[kept.index(begin):kept.index(end) + len(end)] + "\n"
        out.write_text(report, encoding="utf-8")
        log(f"wrote {out}")
    log(f"done in {result.seconds:.1f} s")
    print(json.dumps(summary(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

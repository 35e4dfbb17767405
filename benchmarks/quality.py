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

Usage::

    python benchmarks/quality.py [--corpus PATH] [--quick] [--out docs/quality.md] [--cache DIR]

Progress goes to stderr; the last line of stdout is a JSON summary of the recommended default.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import platform
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from itertools import combinations
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpus"

try:
    import neardup
except ImportError:  # running from a checkout without an installed package
    sys.path.insert(0, str(REPO_ROOT / "src"))
    import neardup

from neardup import FeatureConfig, FingerprintConfig
from neardup.errors import NeardupError
from neardup.extract import extract_main_content
from neardup.fingerprint import fingerprint_text

K_VALUES = tuple(range(11))
REPORT_K = 3
EXTRACTORS = ("fast", "accurate")
MIN_TOKENS_SWEEP = (0, 5, 10, 20, 40)
DEFAULT_MIN_TOKENS = 10
FPR_TARGET = 0.001
RECALL_TARGET = 0.98

POSITIVE_LABELS = ("same-content", "near-duplicate")
NEGATIVE_LABELS = ("shared-boilerplate-only", "different-content")
DUPLICATE_LABELS = ("same-content", "near-duplicate", "partial-overlap")
HARD_SOURCES = ("cleanportaleval", "utomo-big9", "dragnet")
DRAGNET_MIN_HOST_PAGES = 5
QUICK_PAGES_PER_SITE = 8

# Duplicates named in the dataset READMEs that a same-URL test cannot see (dragnet/README.md:
# "R491/R492 the same Reuters story under two URLs"); they are not negatives.
KNOWN_DUPLICATES = frozenset({frozenset({"dragnet/html/R491.html.gz", "dragnet/html/R492.html.gz"})})


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """Two pages (paths relative to the corpus root) and what the pair is.

    label: the pairs.tsv label, or ``hard-negative``; source: ``pairs.tsv`` or the hard-negative
    collection (``cleanportaleval``, ``utomo-big9``, ``dragnet``); group: the site or host."""

    pair_id: str
    a: str
    b: str
    label: str
    source: str
    group: str = ""
    note: str = ""


@dataclass
class PairSets:
    """The labelled pairs and the hard negatives, plus how the negatives were filtered."""

    labelled: list[Pair]
    hard: list[Pair]
    excluded: dict[str, int] = field(default_factory=dict)

    def pages(self) -> list[str]:
        """Every page path used by any pair, sorted."""
        return sorted({p for pair in self.labelled + self.hard for p in (pair.a, pair.b)})


def read_tsv(path: Path) -> list[dict[str, str]]:
    """Rows of a tab-separated file with a header line."""
    with path.open(encoding="utf-8", newline="") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in fh if line.strip()]


def load_labelled_pairs(corpus: Path) -> list[Pair]:
    """All pairs of ``near-dup-pairs/pairs.tsv``."""
    rows = read_tsv(corpus / "near-dup-pairs" / "pairs.tsv")
    return [
        Pair(r["pair_id"], r["a"], r["b"], r["label"], "pairs.tsv", r["evidence"], r.get("note", ""))
        for r in rows
    ]


def normalise_url(url: str) -> str:
    """URL identity for the same-URL test: no scheme, no ``www.``, no fragment or trailing slash."""
    parts = urlsplit(url.strip().lower())
    host = parts.netloc.removeprefix("www.")
    path = parts.path.rstrip("/")
    return f"{host}{path}?{parts.query}" if parts.query else f"{host}{path}"


def site_groups(corpus: Path) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """Hard-negative collections: source -> site -> [(page path, URL)]."""
    groups: dict[str, dict[str, list[tuple[str, str]]]] = {s: defaultdict(list) for s in HARD_SOURCES}
    for r in read_tsv(corpus / "cleanportaleval" / "manifest.tsv"):
        site = r["site_group"].split("_")[0]  # washingtonpost.com_blog1 + _blog2: one site
        groups["cleanportaleval"][site].append((f"cleanportaleval/{r['file']}", r.get("url_from_html", "")))
    for r in read_tsv(corpus / "utomo-news-extraction" / "manifest.tsv"):
        if r["set"] == "big9":
            groups["utomo-big9"][r["site"]].append((f"utomo-news-extraction/{r['file']}", r.get("url_from_html", "")))
    dragnet: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in read_tsv(corpus / "dragnet" / "manifest.tsv"):
        if r["host"]:
            dragnet[r["host"]].append((f"dragnet/{r['file']}", r.get("url_from_html", "")))
    groups["dragnet"] = {h: pages for h, pages in dragnet.items() if len(pages) >= DRAGNET_MIN_HOST_PAGES}
    return groups


def file_digest(path: Path) -> str:
    """SHA-256 of a page's original (decompressed) bytes."""
    with gzip.open(path) as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def build_hard_negatives(corpus: Path, labelled: Sequence[Pair],
                         pages_per_site: int | None = None) -> tuple[list[Pair], dict[str, int]]:
    """Every pair of different pages within one site, minus pairs that are really duplicates.

    Removed: pairs that pairs.tsv labels same-content / near-duplicate / partial-overlap,
    byte-identical files, pages naming the same URL, and :data:`KNOWN_DUPLICATES`.
    ``pages_per_site`` keeps only the first pages of each site (for ``--quick``)."""
    duplicates = {frozenset((p.a, p.b)) for p in labelled if p.label in DUPLICATE_LABELS}
    digests: dict[str, str] = {}
    excluded = {"pairs.tsv duplicate": 0, "byte-identical": 0, "same URL": 0, "README duplicate": 0}
    pairs: list[Pair] = []
    for source, sites in site_groups(corpus).items():
        for site, pages in sorted(sites.items()):
            pages = sorted(pages)[:pages_per_site]
            for (a, url_a), (b, url_b) in combinations(pages, 2):
                key = frozenset((a, b))
                if key in duplicates:
                    excluded["pairs.tsv duplicate"] += 1
                    continue
                if key in KNOWN_DUPLICATES:
                    excluded["README duplicate"] += 1
                    continue
                if url_a and url_b and normalise_url(url_a) == normalise_url(url_b):
                    excluded["same URL"] += 1
                    continue
                for p in (a, b):
                    if p not in digests:
                        digests[p] = file_digest(corpus / p)
                if digests[a] == digests[b]:
                    excluded["byte-identical"] += 1
                    continue
                pairs.append(Pair(f"{source}:{site}:{len(pairs)}", a, b, "hard-negative", source, site))
    return pairs, excluded


def load_pairs(corpus: Path, quick: bool) -> PairSets:
    """The labelled pairs and the hard negatives (the first few pages of each site if quick)."""
    labelled = load_labelled_pairs(corpus)
    hard, excluded = build_hard_negatives(corpus, labelled, QUICK_PAGES_PER_SITE if quick else None)
    return PairSets(labelled, hard, excluded)


# --------------------------------------------------------------------------------------------
# Extraction (once per page and extractor) and fingerprints (once per configuration)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scheme:
    """A named feature configuration under test."""

    name: str
    features: FeatureConfig


def candidate_schemes(quick: bool) -> list[Scheme]:
    """Feature schemes compared (the library's FeatureConfig default is ``words``)."""
    base = FeatureConfig()
    schemes = [
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
        Scheme("chars5", replace(base, scheme="chars", ngram=5)),
        Scheme("chars5 h=1 s=1", replace(base, scheme="chars", ngram=5, w_heading=1.0, w_short=1.0)),
    ]
    if quick:
        keep = {"words", "shingles2", "chars5"}
        schemes = [s for s in schemes if s.name in keep]
    return schemes


def cache_key(extractor: str) -> str:
    """Identifies the extraction code and library versions, so a disk cache never goes stale."""
    import neardup.extract as extract_module

    h = hashlib.sha256(Path(extract_module.__file__).read_bytes())
    for dist in ("resiliparse", "trafilatura"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(dist.encode())
    h.update(extractor.encode())
    return h.hexdigest()[:16]


@dataclass
class Extraction:
    """Main texts of all pages for one extractor, and what it cost."""

    extractor: str
    texts: dict[str, str]
    seconds: float
    errors: dict[str, str]
    cached: bool = False


def extract_pages(corpus: Path, pages: Sequence[str], extractor: str, cache_dir: Path | None,
                  log: Callable[[str], None]) -> Extraction:
    """Extract the main text of every page once (errors give an empty text and are recorded)."""
    cache_file = cache_dir / f"texts-{extractor}-{cache_key(extractor)}.json.gz" if cache_dir else None
    if cache_file and cache_file.exists():
        with gzip.open(cache_file, "rt", encoding="utf-8") as fh:
            stored = json.load(fh)
        if set(pages) <= stored["texts"].keys():
            log(f"{extractor}: {len(pages)} texts from cache {cache_file}")
            return Extraction(extractor, stored["texts"], stored["seconds"], stored["errors"], cached=True)
    texts: dict[str, str] = {}
    errors: dict[str, str] = {}
    started = time.perf_counter()
    for i, page in enumerate(pages, 1):
        with gzip.open(corpus / page) as fh:
            data = fh.read()
        try:
            texts[page] = extract_main_content(data, extractor=extractor).text
        except NeardupError as exc:
            texts[page], errors[page] = "", f"{type(exc).__name__}: {exc}"
        if i % 200 == 0 or i == len(pages):
            log(f"{extractor}: extracted {i}/{len(pages)} pages")
    seconds = time.perf_counter() - started
    if cache_file:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(cache_file, "wt", encoding="utf-8") as fh:
            json.dump({"texts": texts, "seconds": seconds, "errors": errors}, fh)
    return Extraction(extractor, texts, seconds, errors)


@dataclass(frozen=True)
class PageFingerprints:
    """Fingerprint fields of every page, as arrays indexed like ``index``."""

    index: dict[str, int]
    simhash: list[int]
    digest: list[str]
    tokens: np.ndarray
    empty: np.ndarray


def fingerprint_pages(texts: dict[str, str], config: FingerprintConfig) -> PageFingerprints:
    """Fingerprint every extracted text with ``config``."""
    pages = sorted(texts)
    fps = [fingerprint_text(texts[p], config) for p in pages]
    return PageFingerprints(
        index={p: i for i, p in enumerate(pages)},
        simhash=[f.simhash for f in fps],
        digest=[f.digest for f in fps],
        tokens=np.array([f.tokens for f in fps], dtype=np.int64),
        empty=np.array([f.empty for f in fps], dtype=bool),
    )


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairScores:
    """Per-pair comparison of two fingerprints: Hamming distance, equal digest, either empty."""

    distance: np.ndarray
    same_digest: np.ndarray
    empty: np.ndarray

    def declared(self, k: int) -> np.ndarray:
        """The product's rule: neither empty, and equal digest or distance <= k."""
        return ~self.empty & (self.same_digest | (self.distance <= k))

    def exact(self) -> np.ndarray:
        """Pairs declared through the digest (exact duplicates)."""
        return ~self.empty & self.same_digest


def score_pairs(pairs: Sequence[Pair], fps: PageFingerprints) -> PairScores:
    """Compare the two fingerprints of every pair."""
    ia = [fps.index[p.a] for p in pairs]
    ib = [fps.index[p.b] for p in pairs]
    return PairScores(
        distance=np.array([(fps.simhash[i] ^ fps.simhash[j]).bit_count() for i, j in zip(ia, ib)], dtype=np.int64),
        same_digest=np.array([fps.digest[i] == fps.digest[j] for i, j in zip(ia, ib)], dtype=bool),
        empty=fps.empty[ia] | fps.empty[ib],
    )


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
    def of(cls, sets: PairSets) -> "Masks":
        labels = np.array([p.label for p in sets.labelled])
        sources = np.array([p.source for p in sets.hard])
        return cls(
            same_content=labels == "same-content",
            near_duplicate=labels == "near-duplicate",
            partial_overlap=labels == "partial-overlap",
            pairs_negative=np.isin(labels, NEGATIVE_LABELS),
            hard_by_source={s: sources == s for s in HARD_SOURCES},
        )


def metrics_at(k: int, labelled: PairScores, hard: PairScores, masks: Masks) -> dict[str, float]:
    """All quality numbers of one configuration at threshold ``k``."""
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
    """One configuration's scores at every k, plus what it cost."""

    extractor: str
    scheme: Scheme
    config: FingerprintConfig
    by_k: dict[int, dict[str, float]]
    labelled: PairScores
    hard: PairScores
    empty_pages: int
    fingerprint_seconds: float

    def at(self, k: int) -> dict[str, float]:
        return self.by_k[k]

    def best_k(self) -> int | None:
        """Largest k meeting the hard-negative FPR target (None if even k = 0 does not)."""
        ok = [k for k, m in self.by_k.items() if m["fpr_hard_negatives"] <= FPR_TARGET]
        return max(ok) if ok else None


def evaluate(sets: PairSets, masks: Masks, extraction: Extraction, scheme: Scheme,
             min_tokens: int = DEFAULT_MIN_TOKENS) -> Evaluation:
    """Fingerprint all pages with one configuration and score it at every k."""
    config = FingerprintConfig(extractor=extraction.extractor, features=scheme.features, min_tokens=min_tokens)
    started = time.perf_counter()
    fps = fingerprint_pages(extraction.texts, config)
    seconds = time.perf_counter() - started
    labelled = score_pairs(sets.labelled, fps)
    hard = score_pairs(sets.hard, fps)
    by_k = {k: metrics_at(k, labelled, hard, masks) for k in K_VALUES}
    return Evaluation(extraction.extractor, scheme, config, by_k, labelled, hard, int(fps.empty.sum()), seconds)


def choose_default(evaluations: Sequence[Evaluation], k: int) -> Evaluation:
    """The recommended configuration at threshold ``k``.

    Among configurations whose hard-negative FPR meets the target, the highest same-content
    recall wins; ties go to higher near-duplicate recall, then fewer false positives (hard and
    pairs.tsv negatives), then the fast extractor (about 5x cheaper), then list order (the
    simplest scheme first). If none meets the target, the lowest FPR wins."""
    def key(e: Evaluation) -> tuple:
        m = e.at(k)
        return (
            m["fpr_hard_negatives"] <= FPR_TARGET,
            m["recall_same_content"],
            m["recall_near_duplicate"],
            -(m["false_positives_hard"] + m["false_positives_pairs"]),
            e.extractor == "fast",
        )
    meeting = [e for e in evaluations if e.at(k)["fpr_hard_negatives"] <= FPR_TARGET]
    if not meeting:
        return min(evaluations, key=lambda e: e.at(k)["fpr_hard_negatives"])
    best = max(key(e) for e in meeting)
    return next(e for e in meeting if key(e) == best)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def machine_description() -> dict[str, str]:
    """CPU count and model (lscpu), Python and library versions."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                      if line.lower().startswith("model name")), "unknown")
    except OSError:
        model = "unknown"
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        nproc = "unknown"
    versions = []
    for dist in ("resiliparse", "trafilatura", "numba", "numpy"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return {"nproc": nproc, "cpu": model, "python": platform.python_version(),
            "os": platform.platform(), "libraries": ", ".join(versions)}


def pct(x: float, digits: int = 1) -> str:
    """A rate as a percentage ('n/a' for NaN)."""
    return "n/a" if x != x else f"{100 * x:.{digits}f}%"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table (first column left-aligned, the rest right-aligned)."""
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


SCHEME_HEADER = ("scheme", "same-content recall", "near-dup recall", "FPR pairs.tsv neg.",
                 "FPR hard neg.", "CPE", "Big9", "Dragnet", "exact FP (hard)", "empty pages",
                 "largest k at FPR <= 0.1%", "same-content recall there")


def scheme_rows(evaluations: Sequence[Evaluation], k: int) -> list[list[str]]:
    """One row per scheme at threshold ``k``."""
    rows = []
    for e in evaluations:
        m = e.at(k)
        bk = e.best_k()
        rows.append([
            f"`{e.scheme.name}`", pct(m["recall_same_content"]), pct(m["recall_near_duplicate"]),
            pct(m["fpr_pairs_negatives"]), pct(m["fpr_hard_negatives"], 2),
            pct(m["fpr_hard_cleanportaleval"], 2), pct(m["fpr_hard_utomo-big9"], 2),
            pct(m["fpr_hard_dragnet"], 2), m["exact_false_positives_hard"], e.empty_pages,
            "none" if bk is None else bk,
            "-" if bk is None else pct(e.at(bk)["recall_same_content"]),
        ])
    return rows


def k_rows(e: Evaluation) -> list[list[str]]:
    """One row per threshold for one configuration."""
    rows = []
    for k in K_VALUES:
        m = e.at(k)
        rows.append([
            k, pct(m["recall_same_content"]), pct(m["recall_near_duplicate"]),
            pct(m["flagged_partial_overlap"]), pct(m["fpr_pairs_negatives"]),
            pct(m["fpr_hard_negatives"], 2), pct(m["fpr_hard_cleanportaleval"], 2),
            pct(m["fpr_hard_utomo-big9"], 2), pct(m["fpr_hard_dragnet"], 2),
            m["false_positives_hard"], m["exact_false_positives_hard"],
        ])
    return rows


def min_tokens_rows(sweep: Sequence[Evaluation], k: int) -> list[list[str]]:
    """One row per min_tokens value at threshold ``k``."""
    rows = []
    for e in sweep:
        m = e.at(k)
        rows.append([
            e.config.min_tokens, e.empty_pages, pct(m["recall_same_content"]),
            pct(m["recall_near_duplicate"]), pct(m["fpr_hard_negatives"], 2),
            pct(m["fpr_hard_dragnet"], 2), m["false_positives_hard"], m["exact_false_positives_hard"],
        ])
    return rows


def missed_rows(e: Evaluation, sets: PairSets, k: int) -> list[list[str]]:
    """The same-content pairs the configuration misses at ``k``."""
    declared = e.labelled.declared(k)
    rows = []
    for i, pair in enumerate(sets.labelled):
        if pair.label == "same-content" and not declared[i]:
            reason = "empty page" if e.labelled.empty[i] else "distance"
            note = pair.note.replace("|", "/")
            rows.append([pair.pair_id, pair.group, int(e.labelled.distance[i]), reason, note])
    return rows


def false_positive_rows(e: Evaluation, sets: PairSets, k: int, limit: int = 25) -> list[list[str]]:
    """Hard-negative pairs (and pairs.tsv negatives) wrongly declared duplicates at ``k``."""
    rows = []
    for scores, pairs in ((e.labelled, sets.labelled), (e.hard, sets.hard)):
        declared = scores.declared(k)
        for i, pair in enumerate(pairs):
            if declared[i] and (pair.label == "hard-negative" or pair.label in NEGATIVE_LABELS):
                how = "digest" if scores.same_digest[i] else "simhash"
                rows.append([pair.source, pair.group if pair.source != "pairs.tsv" else pair.pair_id,
                             f"`{pair.a}`", f"`{pair.b}`", int(scores.distance[i]), how])
    return rows[:limit]


def config_dict(e: Evaluation, k: int) -> dict[str, Any]:
    """The configuration as the library spells it, plus k."""
    return {"extractor": e.extractor, "features": e.scheme.features.to_dict(),
            "min_tokens": e.config.min_tokens, "bits": e.config.bits, "k": k, "spec": e.config.spec}


@dataclass
class RunResult:
    """Everything the report and the JSON summary need."""

    corpus: Path
    quick: bool
    sets: PairSets
    extractions: dict[str, Extraction]
    evaluations: list[Evaluation]
    default: Evaluation
    sweep: list[Evaluation]
    k: int
    seconds: float
    command: str


def summary(result: RunResult) -> dict[str, Any]:
    """The one-line JSON summary of the recommended default."""
    e, k = result.default, result.k
    m = e.at(k)
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
        "same_content_pairs": int(sum(p.label == "same-content" for p in result.sets.labelled)),
        "near_duplicate_pairs": int(sum(p.label == "near-duplicate" for p in result.sets.labelled)),
        "pairs_negatives": int(sum(p.label in NEGATIVE_LABELS for p in result.sets.labelled)),
        "targets_met": bool(m["recall_same_content"] >= RECALL_TARGET and m["fpr_hard_negatives"] <= FPR_TARGET),
        "quick": result.quick, "seconds": round(result.seconds, 1),
    }


def data_section(result: RunResult) -> list[str]:
    """What the pairs are and how many."""
    sets = result.sets
    labels: dict[str, int] = defaultdict(int)
    for p in sets.labelled:
        labels[p.label] += 1
    hard: dict[str, int] = defaultdict(int)
    sites: dict[str, set[str]] = defaultdict(set)
    for p in sets.hard:
        hard[p.source] += 1
        sites[p.source].add(p.group)
    excluded = ", ".join(f"{n} {why}" for why, n in sets.excluded.items())
    lines = [
        "## Data",
        "",
        f"Corpus: `shared/corpus` ({len(sets.pages())} distinct pages used).",
        "",
        "- `near-dup-pairs/pairs.tsv` (development half): "
        + ", ".join(f"{n} `{label}`" for label, n in sorted(labels.items())) + ". "
        "Recall is measured on `same-content` (the target) and `near-duplicate`; "
        "`shared-boilerplate-only` and `different-content` are the pairs.tsv negatives; "
        "`partial-overlap` is shown for information only.",
        f"- Hard negatives: every pair of different pages within one site, {len(sets.hard)} pairs: "
        + ", ".join(f"{hard[s]} from {s} ({len(sites[s])} sites)" for s in HARD_SOURCES)
        + f". Dragnet: hosts with >= {DRAGNET_MIN_HOST_PAGES} pages. Removed as not negatives: {excluded} "
        "(the same-URL and README rules catch true duplicates of the held-back half of the pairs, "
        "e.g. Dragnet T146/T77, CleanPortalEval washingtonpost blog1_8/_15).",
    ]
    return lines


def render_report(result: RunResult) -> str:
    """docs/quality.md."""
    k, d = result.k, result.default
    m = d.at(k)
    machine = machine_description()
    lines = [
        "# Detection quality",
        "",
        "Generated by `benchmarks/quality.py`; do not edit by hand"
        + (" (QUICK run: a subset, not the full benchmark)." if result.quick else "."),
        "",
        "## What is measured",
        "",
        "For each extractor (`fast` = Resiliparse, `accurate` = trafilatura) and feature scheme, "
        "pages are fingerprinted (64-bit SimHash) and each pair is declared a duplicate at "
        "threshold k exactly as the product does it: neither fingerprint is *empty* "
        f"(fewer than `min_tokens` = {DEFAULT_MIN_TOKENS} tokens unless stated) and the digests "
        "are equal or `hamming(a, b) <= k`. Reported for k = 0..10: recall on `same-content` and "
        "`near-duplicate` pairs, the false-positive rate (FPR) on the pairs.tsv negatives and on "
        "same-site hard negatives (overall and per source), and how many hard negatives are "
        "flagged through an equal digest (*exact FP*). A missed pair includes pairs where one "
        f"page is empty. Targets: same-content recall >= {RECALL_TARGET:.0%} and hard-negative "
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
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']}, "
        f"{machine['libraries']}; {machine['os']}. Total run time {result.seconds:.0f} s "
        "(shared machine). Extraction: "
        + ", ".join(f"`{x.extractor}` {1000 * x.seconds / max(len(x.texts), 1):.1f} ms/page"
                    + (" (cached)" if x.cached else "")
                    + (f", {len(x.errors)} pages rejected" if x.errors else "")
                    for x in result.extractions.values()) + ".",
        "",
        "## Recommended default",
        "",
        f"`extractor={d.extractor}`, scheme `{d.scheme.name}` "
        f"(`{d.scheme.features.spec}`), `min_tokens={d.config.min_tokens}`, `k={k}`:",
        "",
        f"- same-content recall **{pct(m['recall_same_content'])}** "
        f"(target {RECALL_TARGET:.0%}: {'met' if m['recall_same_content'] >= RECALL_TARGET else 'NOT met'}), "
        f"near-duplicate recall {pct(m['recall_near_duplicate'])};",
        f"- hard-negative FPR **{pct(m['fpr_hard_negatives'], 3)}** "
        f"({m['false_positives_hard']} of {len(result.sets.hard)} pairs, {m['exact_false_positives_hard']} "
        f"through the digest; target {FPR_TARGET:.1%}: "
        f"{'met' if m['fpr_hard_negatives'] <= FPR_TARGET else 'NOT met'}), "
        f"pairs.tsv negatives {pct(m['fpr_pairs_negatives'])} ({m['false_positives_pairs']} pairs).",
        "",
        f"Selection rule (automatic): at k = {k}, among configurations meeting the FPR target, the "
        "highest same-content recall, then near-duplicate recall, then fewest false positives, "
        "then the fast extractor.",
        "",
    ]
    for extractor in result.extractions:
        evals = [e for e in result.evaluations if e.extractor == extractor]
        lines += [f"## Schemes at k = {k}, extractor `{extractor}`", ""]
        lines += markdown_table(SCHEME_HEADER, scheme_rows(evals, k))
        lines.append("")
    lines += [
        "Scheme names: `words` is the library's FeatureConfig default (words, tf=log, heading "
        "weight h=2, list weight 1, short lines (<= 3 tokens) weight s=0.5); other rows change "
        "only what the name says. `shinglesN` = N-word shingles, `charsN` = character N-grams.",
        "",
        f"## Recommended default at k = 0..10 (`{d.extractor}`, `{d.scheme.name}`)",
        "",
    ]
    lines += markdown_table(
        ("k", "same-content recall", "near-dup recall", "partial-overlap flagged", "FPR pairs.tsv neg.",
         "FPR hard neg.", "CPE", "Big9", "Dragnet", "hard FP pairs", "exact FP"), k_rows(d))
    lines += ["", f"## min_tokens (`{d.extractor}`, `{d.scheme.name}`, k = {k})", ""]
    lines += markdown_table(
        ("min_tokens", "empty pages", "same-content recall", "near-dup recall", "FPR hard neg.",
         "Dragnet FPR", "hard FP pairs", "exact FP"), min_tokens_rows(result.sweep, k))
    lines += ["", f"## Same-content pairs missed by the default (k = {k})", ""]
    missed = missed_rows(d, result.sets, k)
    lines += (markdown_table(("pair", "evidence", "distance", "why", "note"), missed) if missed else ["None."])
    lines += ["", f"## Negatives wrongly declared duplicates by the default (k = {k})", ""]
    fps = false_positive_rows(d, result.sets, k)
    lines += (markdown_table(("source", "site / pair", "a", "b", "distance", "via"), fps) if fps else ["None."])
    lines += ["", "## Why the defaults", "", why_paragraph(result), ""]
    return "\n".join(lines)


def why_paragraph(result: RunResult) -> str:
    """A short, data-driven justification of the recommended default."""
    k, d = result.k, result.default
    by_name = {(e.extractor, e.scheme.name): e for e in result.evaluations}
    words = by_name.get((d.extractor, "words"))
    other = next((e for e in result.evaluations if e.extractor != d.extractor and e.scheme.name == d.scheme.name), None)
    parts = [
        f"`{d.scheme.name}` on the `{d.extractor}` extractor has the best same-content recall "
        f"({pct(d.at(k)['recall_same_content'])}) of the configurations that keep the same-site "
        f"false-positive rate under {FPR_TARGET:.1%} at k = {k}."
    ]
    if words is not None and words is not d:
        parts.append(f"The library's current FeatureConfig default (`words`) reaches "
                     f"{pct(words.at(k)['recall_same_content'])} recall at "
                     f"{pct(words.at(k)['fpr_hard_negatives'], 2)} hard-negative FPR.")
    if other is not None:
        parts.append(f"With `{other.extractor}` the same scheme gives "
                     f"{pct(other.at(k)['recall_same_content'])} recall at "
                     f"{pct(other.at(k)['fpr_hard_negatives'], 2)} FPR.")
    sweep = {e.config.min_tokens: e for e in result.sweep}
    if 0 in sweep and DEFAULT_MIN_TOKENS in sweep:
        z, t = sweep[0].at(k), sweep[DEFAULT_MIN_TOKENS].at(k)
        parts.append(f"`min_tokens` matters on Dragnet (pages whose extracted body is a few words): "
                     f"0 gives {pct(z['fpr_hard_dragnet'], 2)} Dragnet FPR "
                     f"({z['false_positives_hard']} hard FPs), {DEFAULT_MIN_TOKENS} gives "
                     f"{pct(t['fpr_hard_dragnet'], 2)} ({t['false_positives_hard']}).")
    return " ".join(parts)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def log(message: str) -> None:
    """Progress line on stderr."""
    print(f"[quality] {message}", file=sys.stderr, flush=True)


def run(corpus: Path, quick: bool, cache_dir: Path | None, k: int, command: str) -> RunResult:
    """Load the pairs, extract, fingerprint and score every configuration."""
    started = time.perf_counter()
    sets = load_pairs(corpus, quick)
    masks = Masks.of(sets)
    pages = sets.pages()
    log(f"{len(sets.labelled)} labelled pairs, {len(sets.hard)} hard negatives, {len(pages)} pages; "
        f"excluded {sets.excluded}")
    extractors = EXTRACTORS[:1] if quick else EXTRACTORS
    extractions = {x: extract_pages(corpus, pages, x, cache_dir, log) for x in extractors}
    evaluations = []
    for extraction in extractions.values():
        for scheme in candidate_schemes(quick):
            e = evaluate(sets, masks, extraction, scheme)
            m = e.at(k)
            log(f"{extraction.extractor:8} {scheme.name:20} k={k}: recall {m['recall_same_content']:.3f} "
                f"near {m['recall_near_duplicate']:.3f} fpr_hard {m['fpr_hard_negatives']:.4f} "
                f"fpr_pairs {m['fpr_pairs_negatives']:.3f}")
            evaluations.append(e)
    default = choose_default(evaluations, k)
    sweep = [evaluate(sets, masks, extractions[default.extractor], default.scheme, n) for n in MIN_TOKENS_SWEEP]
    return RunResult(corpus, quick, sets, extractions, evaluations, default, sweep, k,
                     time.perf_counter() - started, command)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help=f"shared/corpus folder (default: {DEFAULT_CORPUS})")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: fast extractor, 3 schemes, first pages of each site (< 1 min)")
    parser.add_argument("--out", type=Path, default=None,
                        help="Markdown report to write (default: docs/quality.md; none with --quick)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder for extracted texts, reused while the extraction code is unchanged")
    parser.add_argument("-k", type=int, default=REPORT_K, help=f"threshold for the tables (default {REPORT_K})")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    corpus = args.corpus.resolve()
    if not (corpus / "near-dup-pairs" / "pairs.tsv").is_file():
        print(f"error: corpus not found at {corpus} (expected near-dup-pairs/pairs.tsv there; use --corpus)",
              file=sys.stderr)
        return 2
    out = args.out if args.out is not None or args.quick else REPO_ROOT / "docs" / "quality.md"
    command = "python benchmarks/quality.py" + (" --quick" if args.quick else "")
    result = run(corpus, args.quick, args.cache, args.k, command)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_report(result), encoding="utf-8")
        log(f"wrote {out}")
    log(f"done in {result.seconds:.1f} s")
    print(json.dumps(summary(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

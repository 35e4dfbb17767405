"""Precision and recall per threshold on labelled pairs, and the thresholds they recommend.
(The wing's face: its public names, defined in its modules.)"""

from neardup.detector.thresholds import META_KEY, apply, stored_choice, thresholds_for
from neardup.tune.pairs import LabelledPair, PageRef, PageRefError, PairsFile, PairsFormatError, load_pairs
from neardup.tune.sweep import (
    DEFAULT_MIN_PRECISION,
    K_VALUES,
    MINHASH_THRESHOLDS,
    VERIFY_VALUES,
    PairFacts,
    Point,
    Recommendation,
    TuneResult,
    recommend,
    tune,
    tune_facts,
    within_margin,
)
from neardup.tune.view import pr_curve_svg, summary_text

__all__ = [
    "DEFAULT_MIN_PRECISION",
    "K_VALUES",
    "LabelledPair",
    "META_KEY",
    "MINHASH_THRESHOLDS",
    "PageRef",
    "PageRefError",
    "PairFacts",
    "PairsFile",
    "PairsFormatError",
    "Point",
    "Recommendation",
    "TuneResult",
    "VERIFY_VALUES",
    "apply",
    "load_pairs",
    "pr_curve_svg",
    "recommend",
    "stored_choice",
    "summary_text",
    "thresholds_for",
    "tune",
    "tune_facts",
    "within_margin",
]

"""Weighted features of normalised text: the configuration and the Python entry points.

A :class:`FeatureConfig` names the feature scheme (``words``, ``shingles`` of ``ngram`` words,
or ``chars`` n-grams of code points), the structural weights (headings, list items, short
lines) and how repeated features are weighted (``tf``). The work itself is compiled in
:mod:`neardup.fingerprint._kernels`.

>>> from neardup.fingerprint.features import FeatureConfig, extract_features
>>> hashes, weights = extract_features("# Title\\nsome words here", FeatureConfig(idf=None))
>>> len(hashes), weights.tolist()
(4, [65536, 65536, 65536, 65536])
>>> _, weights = extract_features("# Title\\nsome words here", FeatureConfig())  # IDF: "some" << "title"
>>> [round(w / 65536, 2) for w in weights.tolist()]
[2.08, 0.24, 1.81, 0.46]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from neardup.errors import ConfigError
from neardup.fingerprint import _kernels as K
from neardup.fingerprint.idf import TABLES, empty_table, idf_table
from neardup.fingerprint.normalize import folded_array

SCHEMES = {"words": K.SCHEME_WORDS, "shingles": K.SCHEME_SHINGLES, "chars": K.SCHEME_CHARS}
TF_MODES = {"raw": K.TF_RAW, "log": K.TF_LOG, "binary": K.TF_BINARY}


def char_table() -> np.ndarray:
    """The frozen code point class table (see tools/gen_charclass.py)."""
    return K.CHAR_TABLE


@dataclass(frozen=True)
class FeatureConfig:
    """How text becomes weighted features.

    scheme: ``words`` (words; character bigrams inside CJK/Thai runs), ``shingles``
        (``ngram`` consecutive tokens) or ``chars`` (``ngram`` consecutive characters,
        separators dropped).
    w_heading / w_list: weight of tokens on Markdown heading / list-item lines (paragraph 1.0).
    w_short, short_tokens: lines other than headings with at most ``short_tokens`` tokens
        (bylines, timestamps, "Advertisement") have their weight multiplied by ``w_short``
        (word schemes only; the ``chars`` scheme applies heading and list weights only).
    tf: ``log`` (mean line weight x (1 + ln count)), ``raw`` (sum) or ``binary`` (max).
    idf: background frequency table whose IDF multiplies each feature's weight
        (:mod:`neardup.fingerprint.idf`; ``"web1"``, default) or None (every word counts alike, the
        version-1 fingerprints). Applies to the ``words`` scheme only (words and CJK
        bigrams); other schemes ignore it and leave it out of their spec.
    idf_doc_len: page length in words the IDF assumes (``-ln(1 - exp(-p * idf_doc_len))``).

    The defaults are the best measured by ``benchmarks/quality.py`` (docs/quality.md): IDF
    weights keep unrelated pages apart (mean distance 31.7 of 64 instead of 26.2 over all
    11 million corpus pairs); structural weights other than 1 did not raise recall at the
    same false-positive rate, so they are available but neutral by default.
    """

    scheme: str = "words"
    ngram: int = 1
    w_heading: float = 1.0
    w_list: float = 1.0
    w_short: float = 1.0
    short_tokens: int = 3
    tf: str = "log"
    idf: str | None = "web1"
    idf_doc_len: float = 1000.0

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ConfigError(f"unknown feature scheme {self.scheme!r}; choose one of {sorted(SCHEMES)}")
        if self.tf not in TF_MODES:
            raise ConfigError(f"unknown tf mode {self.tf!r}; choose one of {sorted(TF_MODES)}")
        if not 1 <= int(self.ngram) <= 16:
            raise ConfigError(f"ngram must be between 1 and 16, got {self.ngram}")
        for name in ("w_heading", "w_list", "w_short"):
            if not 0.0 <= float(getattr(self, name)) <= 100.0:
                raise ConfigError(f"{name} must be between 0 and 100, got {getattr(self, name)}")
        if self.short_tokens < 0:
            raise ConfigError(f"short_tokens must be >= 0, got {self.short_tokens}")
        if self.idf is not None and self.idf not in TABLES:
            raise ConfigError(f"unknown IDF table {self.idf!r}; choose one of {sorted(TABLES)} or None")
        if not 1.0 <= float(self.idf_doc_len) <= 1e7:
            raise ConfigError(f"idf_doc_len must be between 1 and 10^7 words, got {self.idf_doc_len}")

    @property
    def uses_idf(self) -> bool:
        """Whether IDF weights apply (a table is named and the scheme is ``words``)."""
        return self.idf is not None and self.scheme == "words"

    @property
    def spec(self) -> str:
        """Compact, stable description used inside fingerprint specs."""
        gram = "" if self.scheme == "words" else str(self.ngram)
        short = "" if self.scheme == "chars" else f",s{self.w_short:g}@{self.short_tokens}"
        idf = f";idf={self.idf}@{self.idf_doc_len:g}" if self.uses_idf else ""
        return f"{self.scheme}{gram};w=h{self.w_heading:g},l{self.w_list:g}{short};tf={self.tf}{idf}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FeatureConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def kernel_args(self) -> tuple:
        idf = idf_table(self.idf, float(self.idf_doc_len)).kernel_args() if self.uses_idf else empty_table()
        return (
            SCHEMES[self.scheme],
            int(self.ngram),
            float(self.w_heading),
            float(self.w_list),
            float(self.w_short),
            int(self.short_tokens),
            TF_MODES[self.tf],
            *idf,
        )


def extract_features(text: str, config: FeatureConfig) -> tuple[np.ndarray, np.ndarray]:
    """Distinct feature hashes (uint64) and fixed-point weights (int64, x 65536) of ``text``
    (normalised here, as for fingerprints)."""
    _, feats, weights, _ = K.features_from_bytes(folded_array(text), K.CHAR_TABLE, *config.kernel_args())
    return feats, weights


def simhash_of_text(text: str, config: FeatureConfig, bits: int = 64, sketch_bins: int = 0,
                    sketch_ngram: int = 3) -> tuple[bytes, np.ndarray, int, int, bytes | None]:
    """Normalise ``text`` and SimHash it in one compiled pass (and sketch its word
    ``sketch_ngram``-shingles in ``sketch_bins`` bins, :mod:`neardup.sketch`, when > 0).

    Returns ``(normalised bytes, bits // 64 uint64 words (most significant first), token
    count, distinct feature count, sketch bytes or None)``."""
    args = (*config.kernel_args(), bits // 64, sketch_bins, sketch_ngram)
    normalized, words, ntok, nfeat, sketch = K.simhash_from_bytes(folded_array(text), K.CHAR_TABLE, *args)
    return normalized.tobytes(), words, int(ntok), int(nfeat), sketch.tobytes() if sketch_bins else None

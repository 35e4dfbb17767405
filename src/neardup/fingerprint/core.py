"""Fingerprints: an exact digest and a SimHash of a page's normalised main content.

>>> import neardup
>>> a = neardup.fingerprint("The quick brown fox jumps over the lazy dog near the river bank today")
>>> b = neardup.fingerprint("the quick  brown fox jumps over the lazy dog near the river bank TODAY")
>>> c = neardup.fingerprint("The quick brown fox jumps over the lazy dog near the river bank, today!")
>>> a.digest == b.digest, a.digest == c.digest, neardup.hamming(a, c)
(True, False, 0)

Case and whitespace never change a digest; punctuation changes the digest but not the
SimHash features (words).

The match rule everywhere in neardup (:func:`neardup.matching.pair_rule`) takes pages with
``hamming(a, b) <= k`` (:func:`neardup.model.default_k`, docs/quality.md) or sharing a
sketch band (:mod:`neardup.index.bands`) as candidates, confirmed by the pages' sketches
(:mod:`neardup.sketch`) when both have one.

Spec versions: 1 (neardup 0.1) weighted every word alike and had no sketch; 2 (default)
weights words by IDF (:mod:`neardup.fingerprint.idf`) and sketches the word 3-shingles. A store keeps
the version it was written with; ``FingerprintConfig(version=1)`` reproduces the old bits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

from neardup.errors import ConfigError, InputError
from neardup.fingerprint.extract import DEFAULT_MAX_BYTES, EXTRACTORS, ExtractedPage, extract_main_content
from neardup.fingerprint.features import FeatureConfig, simhash_of_text
from neardup.fingerprint.minhash import MinHashConfig, MinHashSignature, minhash_text
from neardup.fingerprint.structure import STRUCTURE_SPEC

SPEC_VERSION = 3
SPEC_VERSIONS = (1, 2, 3)
HASH_NAME = "fnv1a64-fmix64"


@dataclass(frozen=True)
class FingerprintConfig:
    """Everything that determines the bits of a fingerprint (and so its :attr:`spec`).

    bits: SimHash width, 64 or 128.
    extractor: ``hybrid`` (the default from spec version 3: one Lexbor parse, boilerplate
        removed by structure, then link and text density, trafilatura only where that result
        looks wrong; 0.22x the CPU of trafilatura alone at its extraction quality, see
        docs/extraction.md), ``accurate`` (trafilatura; the default of versions 1 and 2),
        ``fast`` (Resiliparse alone: it keeps more template text) or ``full`` (no
        boilerplate removal); plain text is never extracted.
    features: see :class:`neardup.fingerprint.features.FeatureConfig`.
    min_tokens: main content with fewer tokens (and always content with no token at all) is
        *empty*: fingerprinted, but never declared a duplicate of anything (pages whose
        extractor found no article).
    max_bytes: larger inputs are rejected with :class:`neardup.errors.InputError`.
    minhash: also compute a MinHash signature (:mod:`neardup.fingerprint.minhash`) with these settings.
    sketch_bins / sketch_ngram: the 64-byte verification sketch (:mod:`neardup.sketch`):
        b-bit one-permutation MinHash of word ``sketch_ngram``-shingles in ``sketch_bins``
        one-byte bins plus a 4-byte shingle count; 0 bins: no sketch (no verification).
    version: the spec version (:data:`SPEC_VERSIONS`). Version 1 (neardup 0.1) is the same
        algorithm without IDF weights and without a sketch; ``FingerprintConfig(version=1)``
        sets those defaults. Version 3 differs from 2 only in its default extractor
        (``hybrid``): the same text gives the same bits.
    """

    bits: int = 64
    extractor: str = ""  # "": the version's default (hybrid from version 3, else accurate)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    min_tokens: int = 10
    max_bytes: int = DEFAULT_MAX_BYTES
    minhash: MinHashConfig | None = None
    sketch_bins: int = 60
    sketch_ngram: int = 3
    version: int = SPEC_VERSION

    def __post_init__(self) -> None:
        if self.version not in SPEC_VERSIONS:
            raise ConfigError(f"unknown fingerprint spec version {self.version!r}; "
                              f"this neardup knows {', '.join(map(str, SPEC_VERSIONS))}")
        if not self.extractor:  # the default of the version: hybrid from version 3 on
            object.__setattr__(self, "extractor", "hybrid" if self.version >= 3 else "accurate")
        if self.version == 1:
            # version 1 had neither: its defaults are the new fields' "off"
            object.__setattr__(self, "sketch_bins", 0)
            if self.features.idf is not None:
                object.__setattr__(self, "features", replace(self.features, idf=None))
        if not 0 <= self.sketch_bins <= 1020:
            raise ConfigError(f"sketch_bins must be between 0 and 1020, got {self.sketch_bins}")
        if not 1 <= self.sketch_ngram <= 16:
            raise ConfigError(f"sketch_ngram must be between 1 and 16, got {self.sketch_ngram}")
        if self.bits not in (64, 128):
            raise ConfigError(f"bits must be 64 or 128, got {self.bits}")
        if self.extractor not in EXTRACTORS:
            raise ConfigError(f"unknown extractor {self.extractor!r}; choose one of {', '.join(EXTRACTORS)}")
        if self.min_tokens < 0:
            raise ConfigError(f"min_tokens must be >= 0, got {self.min_tokens}")
        if self.max_bytes <= 0:
            raise ConfigError(f"max_bytes must be positive, got {self.max_bytes}")

    @cached_property
    def spec(self) -> str:
        """Versioned description of the algorithm and every parameter that changes bits."""
        return (
            f"neardup-simhash/{self.version};f={self.bits};hash={HASH_NAME};"
            f"features={self.features.spec};norm=nfkc-casefold;extract={self.extractor};"
            f"min_tokens={self.min_tokens}"
            + (f";minhash=({self.minhash.spec})" if self.minhash else "")
            + (f";sketch=oph{self.sketch_bins}b8/{self.sketch_ngram}" if self.sketch_bins else "")
            + (f";structure={STRUCTURE_SPEC.replace(';', ',')}" if self.version >= 3 else "")
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["features"] = self.features.to_dict()
        data["minhash"] = self.minhash.to_dict() if self.minhash else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FingerprintConfig":
        """The config of :meth:`to_dict`; a dict without ``version`` is a version-1 config
        (stores written by neardup 0.1)."""
        data = dict(data)
        data.setdefault("version", 1)
        feats = FeatureConfig.from_dict({"idf": None} | dict(data.pop("features", {}) or {}))
        mh = data.pop("minhash", None)
        known = {"bits", "extractor", "min_tokens", "max_bytes", "sketch_bins", "sketch_ngram", "version"}
        return cls(features=feats, minhash=MinHashConfig.from_dict(mh) if mh else None,
                   **{k: v for k, v in data.items() if k in known})

    def with_(self, **changes: Any) -> "FingerprintConfig":
        """A copy with some fields changed (``features`` may be given as a dict)."""
        if isinstance(changes.get("features"), Mapping):
            changes["features"] = replace(self.features, **changes["features"])
        return replace(self, **changes)


@dataclass(frozen=True)
class Fingerprint:
    """The fingerprint of one page.

    simhash: ``bits``-wide int; digest: SHA-256 hex of the normalised main text; empty: True
    when the main content has fewer than ``min_tokens`` tokens (never matched)."""

    simhash: int
    digest: str
    spec: str
    bits: int = 64
    title: str | None = None
    canonical_url: str | None = None
    language: str | None = None
    length: int = 0  # bytes of normalised main text
    tokens: int = 0
    features: int = 0
    empty: bool = False
    normalized: bytes = field(default=b"", repr=False, compare=False)
    minhash: MinHashSignature | None = field(default=None, repr=False, compare=False)
    sketch: bytes | None = field(default=None, repr=False, compare=False)
    #: the page's DOM structure SimHash (:mod:`neardup.fingerprint.structure`, spec version 3 on; None for
    #: plain text and where the extractor built no tree)
    structure: int | None = None

    @property
    def text(self) -> str:
        """The normalised main text that was fingerprinted."""
        return self.normalized.decode("utf-8", "surrogatepass")

    @property
    def simhash_hex(self) -> str:
        return f"{self.simhash:0{self.bits // 4}x}"

    def to_dict(self, with_text: bool = False) -> dict[str, Any]:
        out = {
            "digest": self.digest, "simhash": self.simhash_hex, "spec": self.spec,
            "title": self.title, "canonical_url": self.canonical_url, "language": self.language,
            "length": self.length, "tokens": self.tokens, "features": self.features,
            "empty": self.empty,
        }
        if self.minhash is not None:
            out["minhash_set_size"] = self.minhash.set_size
        if self.sketch is not None:
            out["sketch"] = self.sketch.hex()
        if self.structure is not None:
            out["structure"] = f"{self.structure:016x}"
        if with_text:
            out["text"] = self.text
        return out


DEFAULT_CONFIG = FingerprintConfig()


def fingerprint_text(text: str, config: FingerprintConfig = DEFAULT_CONFIG,
                     page: ExtractedPage | None = None) -> Fingerprint:
    """Fingerprint text as it is (no HTML extraction); it is normalised here.

    >>> fingerprint_text("Hello   World").digest == fingerprint_text("hello world").digest
    True
    """
    normalized, words, ntok, nfeat, sketch = simhash_of_text(text, config.features, config.bits,
                                                             config.sketch_bins, config.sketch_ngram)
    value = 0
    for w in words:
        value = (value << 64) | int(w)
    return Fingerprint(
        simhash=value,
        digest=hashlib.sha256(normalized).hexdigest(),
        spec=config.spec, bits=config.bits,
        title=page.title if page else None,
        canonical_url=page.canonical_url if page else None,
        language=page.language if page else None,
        length=len(normalized), tokens=int(ntok), features=int(nfeat),
        empty=int(ntok) < max(1, config.min_tokens), normalized=normalized,
        minhash=minhash_text(text, config.minhash) if config.minhash else None,
        sketch=sketch,
        structure=page.structure if page is not None and config.version >= 3 else None,
    )


def fingerprint(
    content: bytes | str,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    config: FingerprintConfig = DEFAULT_CONFIG,
) -> Fingerprint:
    """Fingerprint a page (HTML bytes or str) or plain text.

    >>> fp = fingerprint(b"<html><title>Hi</title><body><p>" + b"some words " * 20 + b"</p></body></html>")
    >>> fp.title, fp.bits, len(fp.digest)
    ('Hi', 64, 64)
    """
    page = extract_main_content(content, url, headers, extractor=config.extractor, max_bytes=config.max_bytes)
    return fingerprint_text(page.text, config, page)


def hamming(a: "Fingerprint | int", b: "Fingerprint | int") -> int:
    """Hamming distance between two fingerprints (or SimHash ints).

    >>> hamming(0b1011, 0b0001)
    2
    """
    x = a.simhash if isinstance(a, Fingerprint) else int(a)
    y = b.simhash if isinstance(b, Fingerprint) else int(b)
    return (x ^ y).bit_count()


def text_fields_encodable(fp: Fingerprint) -> None:
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


#: a small page with what real pages have (headings, lists, links, a table, attributes, an
#: entity, non-ASCII and CJK text): fingerprinting it reaches every kernel a page can reach
WARM_UP_PAGE = (
    '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Warm-up page</title>'
    '<link rel="canonical" href="https://warm-up.example/page"></head><body>'
    '<header class="site-header" id="top"><nav><ul><li><a href="/">Home</a></li><li><a href="/a">About</a></li>'
    "</ul></nav></header><main><article><h1>A heading</h1>"
    + "".join(f"<p>Paragraph {i}: caf\u00e9 na\u00efve &amp; r\u00e9sum\u00e9, \u6f22\u5b57\u306e\u6587, "
              f"word{i} text{i} <a href='/x{i}'>link {i}</a> more words here for the extractor.</p>"
              for i in range(12))
    + "<h2>A list</h2><ul>" + "".join(f"<li>item {i} of the list</li>" for i in range(6)) + "</ul>"
    "<table><tr><th>k</th><th>v</th></tr><tr><td>1</td><td>one</td></tr></table>"
    "</article></main><footer><p>Footer text</p></footer></body></html>"
)


def warm_up(config: FingerprintConfig = DEFAULT_CONFIG) -> None:
    """Compile (or load from numba's cache) every kernel ``config`` can reach, in this process,
    before any page's clock starts: a page through ``config``'s own extractor (structure
    fingerprint included), as bytes and as str, and plain text. A cold cache says so on
    stderr (:func:`neardup.fingerprint._kernels.compile_notice`) and compiles once here, in
    the parent, rather than in every worker at the same time (forked workers inherit the
    compiled kernels; spawned ones load them from the cache this fills)."""
    fingerprint(WARM_UP_PAGE.encode("utf-8"), "https://warm-up.example/page", config=config)
    fingerprint(WARM_UP_PAGE, "https://warm-up.example/page", config=config)
    fingerprint(" ".join(f"w{i}" for i in range(20)), config=config.with_(extractor="full"))

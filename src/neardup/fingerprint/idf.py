"""Background word frequencies: the IDF factor of each feature's SimHash weight.

Without it, the words every page shares (*the*, *of*, *and*, *de*, *la*...) carry most of
every bit's vote, so unrelated pages agree on many bits (docs/quality.md: mean distance
26 of 64 instead of 32, single bits set in 9% to 86% of pages). With it, a feature's weight
is multiplied by its inverse document frequency, estimated from its frequency ``p`` in a
large background corpus as the chance that a page of ``doc_len`` words does not contain it::

    idf = -ln(1 - exp(-p * doc_len))

so *the* weighs about 0, a common content word 2 to 4, a rare word or name about 6. Words
rarer than the table's floor (Zipf 3: once per million words), and words it does not know,
get the floor's weight.

The table (``_idf.npz``, built by ``tools/build_idf.py`` from the ``wordfreq`` lists of 42
languages; attribution in ``IDF_DATA.md``) is keyed like the features (NFKC + casefold,
FNV-1a + fmix64; character bigrams for Han, kana, Hangul, Thai), by the upper 32 bits of the
feature hash (18 of them pick a directory bucket, 14 are kept in the entry with the weight
in 4.14 fixed point). Its name is part of the fingerprint spec.

>>> t = idf_table("web1", 1000.0)
>>> from neardup.fingerprint.features import FeatureConfig, extract_features
>>> feats, _ = extract_features("the zeppelin", FeatureConfig(idf=None))
>>> [round(float(w), 2) + 0.0 for w in t.lookup(feats)]
[0.0, 6.05]
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache

import numpy as np

from neardup.errors import ConfigError
from neardup.fingerprint._kernels import IDF_DIRECTORY_BITS as DIRECTORY_BITS
from neardup.fingerprint._kernels import IDF_KEY_BITS, IDF_WEIGHT_BITS, IDF_WEIGHT_SCALE

#: table name (as it appears in specs) -> file in the package
TABLES = {"web1": "_idf.npz"}


@dataclass(frozen=True)
class IdfTable:
    """One table, ready for the kernels: a directory of entry offsets by the feature hashes'
    top :data:`DIRECTORY_BITS` bits, and per feature one uint32 entry holding the next
    ``IDF_KEY_BITS`` bits of its hash above its IDF weight in fixed point (one 4-byte load
    gives both); the weight of a feature the table does not hold. A feature absent from the
    table shares a bucket's 32 hash bits with an entry about 3 times in 10,000 and then gets
    that entry's weight (deterministically: it is part of the table's spec)."""

    name: str
    doc_len: float
    entries: np.ndarray  # uint32, sorted within each directory bucket
    directory: np.ndarray  # uint32, 2**DIRECTORY_BITS + 1
    default: float

    def kernel_args(self) -> tuple[np.ndarray, np.ndarray, float]:
        return self.entries, self.directory, self.default

    @cached_property
    def weights(self) -> np.ndarray:
        return (self.entries & np.uint32((1 << IDF_WEIGHT_BITS) - 1)).astype(np.float64) / IDF_WEIGHT_SCALE

    @cached_property
    def keys(self) -> np.ndarray:
        """Each entry's 32-bit key (directory bits above entry key bits), sorted."""
        return ((np.repeat(np.arange(len(self.directory) - 1, dtype=np.uint64), np.diff(self.directory))
                 << np.uint64(IDF_KEY_BITS)) | (self.entries >> np.uint32(IDF_WEIGHT_BITS)).astype(np.uint64))

    def lookup(self, feature_hashes: np.ndarray) -> np.ndarray:
        """The IDF weight of each 64-bit feature hash (vectorised, for tests and tools)."""
        key32 = np.asarray(feature_hashes, dtype=np.uint64) >> np.uint64(64 - DIRECTORY_BITS - IDF_KEY_BITS)
        i = np.minimum(np.searchsorted(self.keys, key32), len(self.keys) - 1)
        return np.where(self.keys[i] == key32, self.weights[i], self.default)


def idf_of_zipf(zipf: np.ndarray | float, doc_len: float) -> np.ndarray:
    """IDF from a Zipf frequency (log10 of occurrences per 10^9 words) for pages of
    ``doc_len`` words: ``-ln(1 - exp(-p * doc_len))`` with ``p = 10**(zipf - 9)``."""
    p = np.power(10.0, np.asarray(zipf, dtype=np.float64) - 9.0)
    return -np.log(-np.expm1(-p * doc_len))


def empty_table() -> tuple[np.ndarray, np.ndarray, float]:
    """Kernel arguments meaning "no IDF" (every weight factor 1)."""
    return np.zeros(0, dtype=np.uint32), np.zeros(2, dtype=np.uint32), 1.0


@cache
def _raw(name: str) -> tuple[np.ndarray, np.ndarray, float]:
    if name not in TABLES:
        raise ConfigError(f"unknown IDF table {name!r}; choose one of {sorted(TABLES)}")
    with np.load(pathlib.Path(__file__).parent / TABLES[name]) as data:
        keys = np.cumsum(data["key_deltas"].astype(np.uint64)).astype(np.uint32)
        zipf = data["zipf16"].astype(np.float64) / 16.0
        floor = float(data["min_zipf"])
    return keys, zipf, floor


@lru_cache(maxsize=8)
def idf_table(name: str, doc_len: float) -> IdfTable:
    """The named table with weights for pages of ``doc_len`` words (cached)."""
    if not (isinstance(doc_len, (int, float)) and math.isfinite(doc_len) and 1 <= doc_len <= 1e7):
        raise ConfigError(f"idf_doc_len must be between 1 and 10^7 words, got {doc_len!r}")
    keys, zipf, floor = _raw(name)
    key32 = keys.astype(np.uint64) >> np.uint64(32 - DIRECTORY_BITS - IDF_KEY_BITS)  # the file keeps 32 bits
    weights = np.round(idf_of_zipf(np.maximum(zipf, floor), float(doc_len)) * IDF_WEIGHT_SCALE).astype(np.uint64)
    if int(weights.max()) >> IDF_WEIGHT_BITS:
        raise ConfigError(f"idf_doc_len {doc_len} gives weights beyond the table's fixed point")
    entries = (((key32 & np.uint64((1 << IDF_KEY_BITS) - 1)) << np.uint64(IDF_WEIGHT_BITS)) | weights).astype(np.uint32)
    top = (key32 >> np.uint64(IDF_KEY_BITS)).astype(np.int64)
    directory = np.searchsorted(top, np.arange((1 << DIRECTORY_BITS) + 1), side="left").astype(np.uint32)
    default = float(np.round(idf_of_zipf(floor, float(doc_len)) * IDF_WEIGHT_SCALE)) / IDF_WEIGHT_SCALE
    return IdfTable(name, float(doc_len), entries, directory, default)

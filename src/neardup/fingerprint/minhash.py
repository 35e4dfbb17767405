"""MinHash signatures: Jaccard and containment estimates beside SimHash.

A signature keeps, for each of ``num_perm`` hash permutations, the minimum over a page's set
of features (the same normalised features as SimHash, by default word 3-shingles); the share
of equal positions of two signatures estimates the Jaccard similarity of the two sets
(standard error ``sqrt(J (1 - J) / num_perm)``, at most ``1 / (2 sqrt(num_perm))``). The LSH
bands over signatures are :mod:`neardup.index.lsh`.

>>> cfg = MinHashConfig(num_perm=128)
>>> a = minhash_text(" ".join(f"w{i}" for i in range(300)), cfg)
>>> b = minhash_text(" ".join(f"w{i}" for i in range(30, 300)), cfg)
>>> round(jaccard(a.signature, b.signature), 1)      # true Jaccard of the 3-shingle sets: 0.90
0.9
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from neardup.errors import ConfigError
from neardup.fingerprint import _minhash_kernels as K
from neardup.fingerprint.features import FeatureConfig, extract_features

SPEC_VERSION = 1


def _default_features() -> FeatureConfig:
    return FeatureConfig(scheme="shingles", ngram=3, tf="binary")


@dataclass(frozen=True)
class MinHashConfig:
    """num_perm: signature length (bytes per page = 4 x num_perm); seed: fixes the
    permutations; features: which features form the set (weights are ignored)."""

    num_perm: int = 128
    seed: int = 1
    features: FeatureConfig = field(default_factory=_default_features)

    def __post_init__(self) -> None:
        if not 8 <= int(self.num_perm) <= 4096:
            raise ConfigError(f"num_perm must be between 8 and 4096, got {self.num_perm}")
        if not 0 <= int(self.seed) < 2**63:
            raise ConfigError(f"seed must be between 0 and 2**63, got {self.seed}")

    @property
    def spec(self) -> str:
        gram = "" if self.features.scheme == "words" else str(self.features.ngram)
        return (f"neardup-minhash/{SPEC_VERSION};perm={self.num_perm};seed={self.seed};hash=mulshift32;"
                f"set={self.features.scheme}{gram}")

    def permutations(self) -> tuple[np.ndarray, np.ndarray]:
        """The (a, b) multiply-shift parameters: a odd."""
        rng = np.random.Generator(np.random.PCG64(self.seed))
        a = rng.integers(0, 2**63, self.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        b = rng.integers(0, 2**63, self.num_perm, dtype=np.uint64)
        return a, b

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["features"] = self.features.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MinHashConfig":
        data = dict(data)
        feats = FeatureConfig.from_dict(data.pop("features", {}) or {})
        return cls(features=feats, **{k: v for k, v in data.items() if k in ("num_perm", "seed")})


_PERMS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _perms(config: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    key = (config.num_perm, config.seed)
    if key not in _PERMS:
        _PERMS[key] = config.permutations()
    return _PERMS[key]


@dataclass(frozen=True)
class MinHashSignature:
    """A page's signature (uint32 x num_perm) and the size of its feature set."""

    signature: np.ndarray
    set_size: int
    spec: str

    def to_bytes(self) -> bytes:
        return self.signature.astype("<u4").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, set_size: int, spec: str, *, num_perm: int | None = None) -> "MinHashSignature":
        """The signature :meth:`to_bytes` wrote (``num_perm``: the length it must have).

        >>> sig = minhash_text("a b c d e f")
        >>> back = MinHashSignature.from_bytes(sig.to_bytes(), sig.set_size, sig.spec, num_perm=128)
        >>> bool((back.signature == sig.signature).all()), back.set_size == sig.set_size
        (True, True)
        """
        return cls(signatures_from_bytes([data], num_perm)[0], int(set_size), spec)


def signatures_from_bytes(blobs: Sequence[bytes], num_perm: int | None = None) -> np.ndarray:
    """Stored signatures (little-endian uint32s, :meth:`MinHashSignature.to_bytes`) as one
    (n, num_perm) uint32 array: the one place signature bytes are decoded. A blob of another
    length is a :class:`~neardup.errors.ConfigError`.

    >>> signatures_from_bytes([bytes(range(8))] * 2, 2).tolist()
    [[50462976, 117835012], [50462976, 117835012]]
    """
    if not blobs:
        return np.zeros((0, num_perm or 0), dtype=np.uint32)
    width = 4 * num_perm if num_perm is not None else len(blobs[0])
    if width == 0 or width % 4 or any(len(b) != width for b in blobs):
        lengths = sorted({len(b) for b in blobs})
        raise ConfigError(f"MinHash signature of {', '.join(map(str, lengths))} bytes, expected {width} "
                          "(4 per permutation)")
    return np.frombuffer(b"".join(bytes(b) for b in blobs), dtype="<u4").astype(np.uint32).reshape(len(blobs), -1)


def minhash_features(features: np.ndarray, config: MinHashConfig) -> MinHashSignature:
    """Signature of a set of 64-bit feature hashes."""
    a, b = _perms(config)
    feats = np.ascontiguousarray(features, dtype=np.uint64)
    return MinHashSignature(K.signature(feats, a, b), int(feats.shape[0]), config.spec)


def minhash_text(text: str, config: MinHashConfig | None = None) -> MinHashSignature:
    """Normalise ``text``, take its feature set and sign it."""
    config = config or MinHashConfig()
    feats, _ = extract_features(text, config.features)
    return minhash_features(feats, config)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of two signatures (share of equal positions)."""
    if a.shape != b.shape:
        raise ConfigError(f"signatures differ in length: {a.shape[0]} vs {b.shape[0]}")
    return float(np.count_nonzero(a == b)) / a.shape[0]


def containment(j: float, size_a: int, size_b: int) -> float:
    """Estimated share of set A contained in set B, from their Jaccard estimate and sizes:
    ``|A ∩ B| / |A| = J (|A| + |B|) / ((1 + J) |A|)``, clipped to [0, 1].

    >>> round(containment(0.25, 100, 400), 2)   # A inside B: J = 100 / 400
    1.0
    """
    if size_a <= 0:
        return 0.0
    return max(0.0, min(1.0, j * (size_a + size_b) / ((1.0 + j) * size_a)))



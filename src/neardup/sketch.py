"""The verification sketch: 64 bytes per page that confirm or reject a SimHash candidate.

A SimHash within distance k is a *candidate*; over a store of 10^8 pages, chance alone puts
a few unrelated pages within k of any new page. The sketch is a second, independent
estimate of similarity: a b-bit one-permutation MinHash of the page's word 3-shingles (60
one-byte bins and a 4-byte shingle count, computed in the same compiled pass as the
SimHash, :func:`neardup.fingerprint._kernels._sketch`). Two pages agree on a bin with probability
``J + (1 - J) / 256`` for shingle Jaccard similarity ``J``, so the share of equal bins gives
an unbiased estimate of J (standard error about 0.06 at J = 0.5). Unrelated pages (J near 0)
agree on about one bin in 256: the chance that they pass a verification threshold of 0.2
(about 12 equal bins of 60) is below 10^-15, whatever their SimHash distance.

>>> from neardup import fingerprint
>>> text = " ".join(f"word{i}" for i in range(300))
>>> a = fingerprint(text).sketch
>>> b = fingerprint(text.replace("word150 ", "")).sketch
>>> c = fingerprint(" ".join(f"other{i}" for i in range(300))).sketch
>>> len(a), similarity(a, b).jaccard > 0.8, similarity(a, c).jaccard < 0.1
(64, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neardup.errors import InputError

#: bytes before the bins: the little-endian uint32 shingle count
HEADER = 4
#: chance that two different shingle minima agree on their kept byte
COLLISION = 1.0 / 256.0


@dataclass(frozen=True)
class Similarity:
    """Estimates from two sketches: ``jaccard`` of the shingle sets, ``containment`` of the
    smaller set in the larger (from the Jaccard estimate and the two shingle counts),
    ``agree`` / ``bins``: how many bins were equal."""

    jaccard: float
    containment: float
    agree: int
    bins: int



def sketch_size(bins: int) -> int:
    """The bytes of a sketch of ``bins`` bins (:data:`HEADER` + ``bins``; 0 without bins): what
    the service and the batch readers accept for a spec's sketch.

    >>> sketch_size(60), sketch_size(0)
    (64, 0)
    """
    return HEADER + bins if bins else 0

def shingle_count(sketch: bytes) -> int:
    """The number of shingles the sketch was made from."""
    return int.from_bytes(sketch[:HEADER], "little")


def similarity(a: bytes, b: bytes) -> Similarity:
    """Jaccard and containment estimates from two sketches of the same spec.

    >>> one = (7).to_bytes(4, "little") + bytes(range(60))
    >>> similarity(one, one)
    Similarity(jaccard=1.0, containment=1.0, agree=60, bins=60)
    """
    if len(a) != len(b) or len(a) <= HEADER:
        raise InputError(f"sketches of different or invalid length ({len(a)} and {len(b)} bytes)")
    na, nb = shingle_count(a), shingle_count(b)
    if na == 0 or nb == 0:
        return Similarity(0.0, 0.0, 0, len(a) - HEADER)
    bins = len(a) - HEADER
    bins_a, bins_b = np.frombuffer(a, np.uint8, offset=HEADER), np.frombuffer(b, np.uint8, offset=HEADER)
    agree = int(np.count_nonzero(bins_a == bins_b))
    j = max(0.0, (agree / bins - COLLISION) / (1.0 - COLLISION))
    inter = j * (na + nb) / (1.0 + j)
    return Similarity(j, min(1.0, inter / min(na, nb)), agree, bins)

"""Search at scale: the permuted SimHash tables, their layout and cost model, the sketch bands, joins, MinHash LSH.
(The wing's face: its public names, defined in its modules.)"""

from neardup.index.base import (
    BRUTE_FORMAT,
    MASK64,
    BruteForceIndex,
    HammingIndex,
    Hit,
    PersistentIndex,
    empty_like,
    save_npy,
    to_words,
    write_manifest,
)

__all__ = [
    "BRUTE_FORMAT",
    "BruteForceIndex",
    "HammingIndex",
    "MASK64",
    "Hit",
    "PersistentIndex",
    "empty_like",
    "save_npy",
    "to_words",
    "write_manifest",
]

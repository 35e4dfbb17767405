"""Compiled (numba) MinHash loops: signatures and LSH band keys.

Permutation j maps a 64-bit feature hash x to ``(a[j] * x + b[j]) mod 2**64 >> 32`` (odd
``a``: the multiply-shift family, 2-universal on the high bits); the signature keeps the
minimum per permutation as uint32. Band keys hash the ``r`` values of a band (and the band
number) to 64 bits with the same fmix64 finaliser as the SimHash features.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from neardup.fingerprint._kernels import fmix64 as _fmix64

U64 = np.uint64
GOLDEN = U64(0x9E3779B97F4A7C15)


@njit(cache=True)
def signature(features, a, b):
    """MinHash signature of a set of 64-bit feature hashes (all 0xFFFFFFFF when empty)."""
    p = a.shape[0]
    out = np.full(p, 0xFFFFFFFF, dtype=np.uint64)
    for i in range(features.shape[0]):
        x = features[i]
        for j in range(p):
            v = (a[j] * x + b[j]) >> U64(32)
            if v < out[j]:
                out[j] = v
    return out.astype(np.uint32)


@njit(cache=True)
def band_keys(sigs, bands, rows):
    """(n, bands) uint64 band keys of an (n, num_perm) signature matrix."""
    n = sigs.shape[0]
    out = np.empty((n, bands), dtype=np.uint64)
    for i in range(n):
        for band in range(bands):
            h = U64(band + 1) * GOLDEN
            base = band * rows
            for r in range(rows):
                h = _fmix64(h ^ U64(sigs[i, base + r]))
            out[i, band] = h
    return out


@njit(cache=True)
def agreement(sig, others):
    """Share of equal positions between ``sig`` and each row of ``others`` (Jaccard estimate)."""
    n = others.shape[0]
    p = sig.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        same = 0
        for j in range(p):
            if others[i, j] == sig[j]:
                same += 1
        out[i] = same / p
    return out

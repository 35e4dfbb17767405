"""Compiled (numba) loops of the array-based batch job (:mod:`neardup.batch.arrays`): the
63-bit node ids (BLAKE2b, the bits of :func:`neardup.batch.graph.node_id`), every pair of a
blocking bucket with its filter fused in (nothing quadratic is materialised), the sketch
agreement of candidate pairs and a union-find whose roots are the smallest index.

All loops release the GIL (``nogil``): the callers run them on threads, one slice each.

>>> import hashlib, numpy as np
>>> msg = b"n\\x00abc\\x00h\\x00T"
>>> got = blake2b63(np.array([0, len(msg)], dtype=np.int64), np.frombuffer(msg, dtype=np.uint8))
>>> int(got[0]) == int.from_bytes(hashlib.blake2b(msg, digest_size=8).digest(), "big") & ((1 << 63) - 1)
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from neardup._numba import popcount64

U64 = np.uint64

_IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], dtype=np.uint64)
_SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0]], dtype=np.int64)
_G = np.array([[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15],
               [0, 5, 10, 15], [1, 6, 11, 12], [2, 7, 8, 13], [3, 4, 9, 14]], dtype=np.int64)


@njit(cache=True, inline="always")
def _rotr(x, n):  # type: ignore[no-untyped-def]
    return (x >> U64(n)) | (x << U64(64 - n))


@njit(cache=True, nogil=True)
def _compress(h, m, v, t, last, iv, sigma, g):  # type: ignore[no-untyped-def]
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = iv[i]
    v[12] ^= t
    if last:
        v[14] ^= U64(0xFFFFFFFFFFFFFFFF)
    for r in range(12):
        s = r % 10
        for q in range(8):
            a, b, c, d = g[q, 0], g[q, 1], g[q, 2], g[q, 3]
            x = m[sigma[s, 2 * q]]
            y = m[sigma[s, 2 * q + 1]]
            v[a] = v[a] + v[b] + x
            v[d] = _rotr(v[d] ^ v[a], 32)
            v[c] = v[c] + v[d]
            v[b] = _rotr(v[b] ^ v[c], 24)
            v[a] = v[a] + v[b] + y
            v[d] = _rotr(v[d] ^ v[a], 16)
            v[c] = v[c] + v[d]
            v[b] = _rotr(v[b] ^ v[c], 63)
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@njit(cache=True, nogil=True)
def _blake2b63(offsets, data, out, iv, sigma, g):  # type: ignore[no-untyped-def]
    h = np.empty(8, dtype=np.uint64)
    m = np.empty(16, dtype=np.uint64)
    v = np.empty(16, dtype=np.uint64)
    block = np.empty(128, dtype=np.uint8)
    for row in range(offsets.shape[0] - 1):
        lo = np.int64(offsets[row])
        n = np.int64(offsets[row + 1]) - lo
        for i in range(8):
            h[i] = iv[i]
        h[0] ^= U64(0x01010008)  # digest size 8, no key
        blocks = np.int64(1) if n == 0 else (n + 127) // 128
        for bi in range(blocks):
            start = bi * 128
            size = n - start
            if size > 128:
                size = np.int64(128)
            for i in range(128):
                block[i] = data[lo + start + i] if i < size else 0
            for w in range(16):
                x = U64(0)
                for i in range(8):
                    x |= U64(block[8 * w + i]) << U64(8 * i)
                m[w] = x
            _compress(h, m, v, U64(start + size), bi == blocks - 1, iv, sigma, g)
        x = h[0]  # the digest's 8 bytes read big-endian, top bit dropped
        r = U64(0)
        for i in range(8):
            r = (r << U64(8)) | ((x >> U64(8 * i)) & U64(0xFF))
        out[row] = np.int64(r & U64(0x7FFFFFFFFFFFFFFF))


def blake2b63(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """63-bit hashes of the messages ``data[offsets[i]:offsets[i + 1]]``: BLAKE2b with an
    8-byte digest read big-endian, the top bit dropped (what ``neardup.batch.graph._hash63`` gives)."""
    out = np.empty(max(0, offsets.shape[0] - 1), dtype=np.int64)
    _blake2b63(np.asarray(offsets, dtype=np.int64), np.asarray(data, dtype=np.uint8), out, _IV, _SIGMA, _G)
    return out


@njit(cache=True, nogil=True)
def bucket_pairs_filtered(rows, starts, sizes, nib, simhash, thr, out_a, out_b):  # type: ignore[no-untyped-def]
    """Every pair of each bucket ``rows[starts[t]:starts[t] + sizes[t]]`` (group numbers),
    kept when it passes the block's filter: with ``nib`` non-empty (n, w) uint64 packed
    nibbles, at least ``thr`` agreeing nibbles (a band block: :func:`neardup.index.bands.nibble_agreement`);
    else SimHash distance ``<= thr``. Pairs as (smaller, larger) into ``out_a`` / ``out_b``;
    returns how many there are (more than the buffers hold: call again with bigger ones)."""
    c = 0
    cap = out_a.shape[0]
    banded = nib.shape[0] > 0
    words = nib.shape[1]
    for t in range(starts.shape[0]):
        s = np.int64(starts[t])
        e = s + np.int64(sizes[t])
        for x in range(s, e):
            gx = np.int64(rows[x])
            for y in range(x + 1, e):
                gy = np.int64(rows[y])
                if banded:
                    z = 0
                    for w in range(words):
                        q = nib[gx, w] ^ nib[gy, w]
                        z += popcount64((q | (q >> U64(1)) | (q >> U64(2)) | (q >> U64(3))) & U64(0x1111111111111111))
                    ok = 8 * 7 - np.int64(z) >= thr
                else:
                    ok = np.int64(popcount64(simhash[gx] ^ simhash[gy])) <= thr
                if ok:
                    if c < cap:
                        out_a[c] = min(gx, gy)
                        out_b[c] = max(gx, gy)
                    c += 1
    return c


@njit(cache=True, nogil=True)
def sketch_agreement(a, b, bins):  # type: ignore[no-untyped-def]
    """Equal bins (of the 60 after the 4-byte header) of sketch rows ``a[i]`` and ``b[i]``."""
    out = np.empty(a.shape[0], dtype=np.int64)
    for i in range(a.shape[0]):
        z = 0
        x, y = a[i], b[i]
        for j in range(4, 64):
            z += bins[x, j] == bins[y, j]
        out[i] = z
    return out


@njit(cache=True, nogil=True)
def _find(parent, x):  # type: ignore[no-untyped-def]
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@njit(cache=True, nogil=True)
def union_all(parent, a, b):  # type: ignore[no-untyped-def]
    """Union the pairs (a[i], b[i]) of indices; the smaller index stays the root. Then every
    entry of ``parent`` is made its root."""
    for i in range(a.shape[0]):
        ra = _find(parent, a[i])
        rb = _find(parent, b[i])
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            parent[rb] = ra
    for x in range(parent.shape[0]):
        parent[x] = _find(parent, x)

"""The sketch-band candidate stage in batch: every pair of a query set (in memory) and a stored
set streamed past in chunks (e.g. slices of an ``np.memmap`` of an (S, 64) uint8 file far
larger than RAM) that :class:`neardup.bands.BandIndex` would bring.

A pair (query q, stored s) comes out when both sketches have band keys (a shingle count > 0 in
the 4-byte header: the pages :class:`~neardup.bands.BandIndex` holds in the Detector), they
share one of the 8 band keys (bins ``2j, 2j + 1``), and at least
``nibble_threshold(far_verify(verify))`` of the low nibbles of bins 0..55 agree (16 of 56 at
the default 0.3): exactly what ``BandIndex.search(query, far_verify(verify))`` returns against
the stored set, each pair once (tested against :func:`neardup.bands.brute_force`).

How (the sorted merge of :func:`neardup.permuted_join.batch_join`): the queries are indexed
once per band (rows sorted by the 16-bit key under a directory of 65,537 offsets, their packed
nibbles copied in that order as four uint64 columns, so a bucket is a contiguous run of about
Q / 65,536 values in each column). A stored chunk is cut into blocks joined on ``threads``
threads (the compiled loop releases the GIL): each stored row's 8 keys and nibbles come
straight from its 64 bytes (read as eight uint64); per band the block is counting-sorted on
the key and walked key by key beside the query directory, so the query side streams
sequentially and each query bucket stays in L1 while the block's rows of that key are compared
with it: per stored row, the least number of disagreeing nibbles over the bucket (4 XOR, a
nibble fold and 4 popcounts a query, a loop without branches that LLVM vectorises, AVX-512
``vpopcntq`` where the CPU has it), and only when that least one passes are the queries read
one by one. CPU ns a stored row at Q = 2^20 on this project's machine (one thread, load ~7):
a random probe of the query buckets per stored row (a cache miss per band) 1,800; the sorted
merge with a branch per query 550; with the branch-free minimum 320. A pair sharing several
bands is reported at the first one only (the query's earlier keys are compared when a pair
passes the filter).

>>> import numpy as np
>>> rng = np.random.default_rng(3)
>>> q = rng.integers(0, 256, (2, 64), dtype=np.uint8); q[:, :4] = [9, 0, 0, 0]
>>> s = rng.integers(0, 256, (3, 64), dtype=np.uint8); s[:, :4] = [9, 0, 0, 0]
>>> s[2, 4:40] = q[1, 4:40]  # the first 36 bins of query 1
>>> qi, si, agree = band_join(q, [s[:2], s[2:]])
>>> qi.tolist(), si.tolist(), bool(agree[0] >= 36)
([1], [2], True)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from neardup._index_kernels import popcount64, prefetch
from neardup.bands import BINS, DEFAULT_BANDS, DEFAULT_VERIFY, NIBBLE_BINS, ROWS, far_verify, nibble_threshold
from neardup.errors import ConfigError
from neardup.sketch import HEADER

U64 = np.uint64
#: bytes of a sketch row (header + bins)
WIDTH = HEADER + BINS
#: packed nibble words of a row: bins 0..55 at bits 4 (bin + 4) of the 64 bytes read as nibbles
NWORDS = 4
if sys.byteorder != "little":  # pragma: no cover - the packing reads the rows as little-endian words
    raise ImportError("neardup.band_join needs a little-endian machine")


@njit(cache=True, inline="always")
def _compress(v):
    """The low nibbles of the 8 bytes of ``v``, packed into its low 32 bits (byte i at 4 i)."""
    x = v & U64(0x0F0F0F0F0F0F0F0F)
    x = (x | (x >> U64(4))) & U64(0x00FF00FF00FF00FF)
    x = (x | (x >> U64(8))) & U64(0x0000FFFF0000FFFF)
    return (x | (x >> U64(16))) & U64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _row_parts(raw, s, bands, keys, nib):
    """Band keys and packed nibbles of row ``s`` of ``raw`` ((m, 8) uint64: 64-byte sketches);
    returns whether it has any shingles. Nibbles of the header and of bins 56..59 are zero."""
    w0 = raw[s, 0]
    for j in range(bands):
        byte = 4 + 2 * j
        keys[j] = np.int64((raw[s, byte >> 3] >> U64(8 * (byte & 7))) & U64(0xFFFF))
    for h in range(NWORDS):
        a = raw[s, 2 * h]
        b = raw[s, 2 * h + 1]
        if h == 0:
            a &= U64(0xFFFFFFFF00000000)
        if h == NWORDS - 1:
            b &= U64(0x00000000FFFFFFFF)
        nib[h] = _compress(a) | (_compress(b) << U64(32))
    return (w0 & U64(0xFFFFFFFF)) != U64(0)


@njit(cache=True, nogil=True)
def _query_parts(raw, bands, keys, nib, ok):
    """Keys (n, bands), nibbles (n, 4) and whether each row has shingles, for every row of ``raw``."""
    for s in range(raw.shape[0]):
        ok[s] = _row_parts(raw, s, bands, keys[s], nib[s])


@njit(cache=True, inline="always")
def _fold(x):
    """One bit (bit 4 i) for each of the 16 nibbles of ``x`` that is not zero."""
    return (x | (x >> U64(1)) | (x >> U64(2)) | (x >> U64(3))) & U64(0x1111111111111111)


@njit(cache=True, nogil=True)
def _join_block(raw, lo, hi, dirs, qrow, qn, qkeys, thr, keys, nib, ok, srow, sdir, out_q, out_s, out_a):
    """Join stored rows ``lo..hi`` of ``raw`` with the queries: per band, the block's rows are
    counting-sorted on the key (``srow`` under ``sdir``), then walked bucket by bucket beside
    the query bucket (which stays in L1 while the stored rows of the key pass). Writes (query
    row, stored row, agreeing nibbles) of the pairs passing ``thr`` at their first shared band;
    returns how many (more than the buffers hold: call again with bigger ones). ``keys``,
    ``nib``, ``ok``, ``srow``: scratch of at least ``hi - lo`` rows; ``sdir``: 65,538 int64."""
    bands = dirs.shape[0]
    m = hi - lo
    for i in range(m):
        ok[i] = _row_parts(raw, lo + i, bands, keys[i], nib[i])
    miss = NIBBLE_BINS - thr  # the most disagreeing nibbles a pair may have
    cap = out_q.shape[0]
    c = 0
    for j in range(bands):
        sdir[:] = 0
        for i in range(m):
            if ok[i]:
                sdir[np.int64(keys[i, j]) + 2] += 1
        for k in range(2, sdir.shape[0]):
            sdir[k] += sdir[k - 1]
        for i in range(m):  # counting sort: sdir[k + 1] is the fill point of key k, then its end
            if ok[i]:
                f = np.int64(keys[i, j]) + 1
                srow[sdir[f]] = i
                sdir[f] += 1
        total = sdir[sdir.shape[0] - 1]
        q0, q1, q2, q3 = qn[j, 0], qn[j, 1], qn[j, 2], qn[j, 3]
        for k in range(sdir.shape[0] - 2):
            qa = np.int64(dirs[j, k])
            qb = np.int64(dirs[j, k + 1])
            if qa == qb:
                continue
            for x in range(sdir[k], sdir[k + 1]):
                if x + 8 < total:
                    prefetch(nib, np.int64(srow[x + 8]) * NWORDS)
                row = np.int64(srow[x])
                n0, n1, n2, n3 = nib[row, 0], nib[row, 1], nib[row, 2], nib[row, 3]
                least = U64(64)
                for p in range(qa, qb):  # no branch: vectorised (vpopcntq where the CPU has it)
                    z = (popcount64(_fold(q0[p] ^ n0)) + popcount64(_fold(q1[p] ^ n1))
                         + popcount64(_fold(q2[p] ^ n2)) + popcount64(_fold(q3[p] ^ n3)))
                    least = min(least, z)
                if np.int64(least) > miss:
                    continue
                for p in range(qa, qb):
                    z = (popcount64(_fold(q0[p] ^ n0)) + popcount64(_fold(q1[p] ^ n1))
                         + popcount64(_fold(q2[p] ^ n2)) + popcount64(_fold(q3[p] ^ n3)))
                    if np.int64(z) > miss:
                        continue
                    r = np.int64(qrow[j, p])
                    first = True
                    for e in range(j):  # found through an earlier band already
                        if qkeys[r, e] == keys[row, e]:
                            first = False
                            break
                    if first:
                        if c < cap:
                            out_q[c] = r
                            out_s[c] = lo + row
                            out_a[c] = NIBBLE_BINS - np.int64(z)
                        c += 1
    return c


def _rows(sketches: np.ndarray | Sequence[bytes | None]) -> np.ndarray:
    """(n, 64) uint8 rows: an array as it is, a sequence of sketches with zeros where one is
    missing or not 64 bytes (no shingles: no band keys)."""
    if isinstance(sketches, np.ndarray):
        arr = np.asarray(sketches)
        if arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape[1] != WIDTH:
            raise ConfigError(f"sketch rows must be an (n, {WIDTH}) uint8 array, got {arr.dtype} {arr.shape}")
        return arr
    out = np.zeros((len(sketches), WIDTH), dtype=np.uint8)
    for i, s in enumerate(sketches):
        if isinstance(s, (bytes, bytearray, memoryview)) and len(s) == WIDTH:
            out[i] = np.frombuffer(bytes(s), dtype=np.uint8)
    return out


def _words(rows: np.ndarray) -> np.ndarray:
    """The rows as (n, 8) uint64 (a view when they are contiguous)."""
    return np.ascontiguousarray(rows, dtype=np.uint8).view(np.uint64)


class QueryBands:
    """The queries indexed by band key: per band, the query rows sorted by key (``qrow``), their
    packed nibbles in that order (``qn``, (bands, 4, n) uint64: one column per word) and a directory of the 65,536
    keys (``dirs``); ``qkeys`` (n, bands) by row; ``pos`` maps a row to its query position
    (queries without shingles have no row). About 36 bytes a query and band.

    >>> qb = QueryBands(np.zeros((3, 64), dtype=np.uint8))
    >>> len(qb)
    0
    """

    def __init__(self, query_sketches: np.ndarray | Sequence[bytes | None], bands: int = DEFAULT_BANDS) -> None:
        if not 1 <= bands <= NIBBLE_BINS // ROWS:
            raise ConfigError(f"bands must be between 1 and {NIBBLE_BINS // ROWS}, got {bands}")
        raw = _words(_rows(query_sketches))
        n = raw.shape[0]
        keys = np.empty((n, bands), dtype=np.int64)
        nib = np.empty((n, NWORDS), dtype=np.uint64)
        ok = np.empty(n, dtype=np.bool_)
        _query_parts(raw, bands, keys, nib, ok)
        self.pos = np.flatnonzero(ok).astype(np.int64)
        self.qkeys = np.ascontiguousarray(keys[ok], dtype=np.uint16)
        nib = nib[ok]
        m = self.pos.shape[0]
        self.qrow = np.empty((bands, m), dtype=np.uint32)
        self.qn = np.empty((bands, NWORDS, m), dtype=np.uint64)
        self.dirs = np.empty((bands, (1 << 16) + 1), dtype=np.int64)
        for j in range(bands):
            col = self.qkeys[:, j]
            order = np.argsort(col, kind="stable")
            self.qrow[j] = order
            self.qn[j] = nib[order].T
            self.dirs[j, 0] = 0
            np.cumsum(np.bincount(col, minlength=1 << 16), out=self.dirs[j, 1:])
        self.bands = bands

    def __len__(self) -> int:
        return int(self.pos.shape[0])

    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.pos, self.qkeys, self.qrow, self.qn, self.dirs))


def band_join_chunks(query_sketches: np.ndarray | Sequence[bytes | None] | QueryBands,
                     stored_chunks: Iterable[np.ndarray], verify: float | None = DEFAULT_VERIFY, *,
                     bands: int = DEFAULT_BANDS, block: int = 1 << 19,
                     threads: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per stored chunk ((m, 64) uint8 rows), the pairs of :func:`band_join`: (query position,
    stored position within all chunks, agreeing nibbles), in no particular order. ``verify``
    None (no sketch verification) brings no pairs, like the Detector."""
    qb = query_sketches if isinstance(query_sketches, QueryBands) else QueryBands(query_sketches, bands)
    if block < 1:
        raise ConfigError(f"block must be >= 1, got {block}")
    fv = far_verify(verify)
    if fv is not None and not 0.0 <= fv <= 1.0:
        raise ConfigError(f"verify must be in [0, 1], got {verify}")
    thr = nibble_threshold(fv) if fv is not None else 0
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    n_threads = max(1, int(threads))
    buffers = [[np.empty(1 << 12, dtype=np.int64) for _ in range(3)] for _ in range(n_threads)]
    scratch: list[tuple[np.ndarray, ...]] = []

    def room(slot: int, size: int) -> None:
        """The slot's scratch holds ``size`` rows (made here, before its thread starts)."""
        while len(scratch) <= slot:
            scratch.append((np.empty((0, qb.bands), dtype=np.uint16),))
        if scratch[slot][0].shape[0] < size:
            scratch[slot] = (np.empty((size, qb.bands), dtype=np.uint16), np.empty((size, NWORDS), dtype=np.uint64),
                             np.empty(size, dtype=np.bool_), np.empty(size, dtype=np.uint32),
                             np.empty((1 << 16) + 2, dtype=np.int64))

    def join(slot: int, raw: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        while True:  # pairs into the slot's buffers; regrown (and the block joined again) on overflow
            out = buffers[slot]
            c = _join_block(raw, lo, hi, qb.dirs, qb.qrow, qb.qn, qb.qkeys, thr, *scratch[slot], *out)
            if c <= out[0].shape[0]:
                return out[0][:c].copy(), out[1][:c].copy(), out[2][:c].copy()
            buffers[slot] = [np.empty(2 * c, dtype=np.int64) for _ in range(3)]

    offset = 0
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        for chunk in stored_chunks:
            rows = _rows(chunk)
            m = rows.shape[0]
            if fv is None or not len(qb) or not m:
                offset += m
                yield (np.empty(0, dtype=np.int64),) * 3  # type: ignore[misc]
                continue
            raw = _words(rows)
            starts = list(range(0, m, block))
            parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for wave in range(0, len(starts), n_threads):
                jobs = []
                for slot, lo in enumerate(starts[wave:wave + n_threads]):
                    room(slot, min(m, lo + block) - lo)
                    jobs.append(pool.submit(join, slot, raw, lo, min(m, lo + block)))
                parts.extend(job.result() for job in jobs)
            q = np.concatenate([p[0] for p in parts])
            yield qb.pos[q], np.concatenate([p[1] for p in parts]) + offset, np.concatenate([p[2] for p in parts])
            offset += m


def band_join(query_sketches: np.ndarray | Sequence[bytes | None] | QueryBands,
              stored_chunks: Iterable[np.ndarray] | np.ndarray, verify: float | None = DEFAULT_VERIFY, *,
              bands: int = DEFAULT_BANDS, block: int = 1 << 19,
              threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (query position, stored position, agreeing nibbles of bins 0..55) where the two
    sketches share a band key and pass the nibble filter at ``far_verify(verify)`` (module
    docs), sorted by query then stored position. ``query_sketches``: an (n, 64) uint8 array or
    sketches (bytes or None); ``stored_chunks``: (m, 64) uint8 arrays, positions counted across
    them (one array is one chunk). Rows with no shingles (header 0) pair with nothing.

    >>> s = np.zeros((2, 64), dtype=np.uint8); s[:, 0] = 1
    >>> [a.tolist() for a in band_join([bytes(s[0]), None], s)]
    [[0, 0], [0, 1], [56, 56]]
    """
    chunks = [stored_chunks] if isinstance(stored_chunks, np.ndarray) else stored_chunks
    parts = list(band_join_chunks(query_sketches, chunks, verify, bands=bands, block=block, threads=threads))
    if not parts:
        return (np.empty(0, dtype=np.int64),) * 3  # type: ignore[return-value]
    q = np.concatenate([p[0] for p in parts])
    s = np.concatenate([p[1] for p in parts])
    a = np.concatenate([p[2] for p in parts])
    order = np.lexsort((s, q))
    return q[order], s[order], a[order]

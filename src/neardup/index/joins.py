"""Joins on the permuted tables (Manku, Jain and Das Sarma): every pair of a set within
distance k (:func:`self_join`) and a batch of queries against a stored set streamed past in
blocks (:func:`batch_join`), exact for every layout :mod:`neardup.index.permuted` validates; the
loops are compiled in :mod:`neardup.index._kernels`.

>>> import numpy as np
>>> a, b, d = self_join(np.array([0b1011, 0b0011, 0xFF00], dtype=np.uint64), k=1)
>>> list(zip(a.tolist(), b.tolist(), d.tolist()))
[(0, 1, 1)]
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

from neardup._numba import popcount64, prefetch
from neardup.errors import ConfigError
from neardup.index import _kernels as K
from neardup.index import layout as layout_mod
from neardup.index.bands import BINS, DEFAULT_BANDS, NIBBLE_BINS, ROWS, far_verify, nibble_threshold
from neardup.index.layout import MAX_DIRECTORY_BITS, Layout, choose_batch_layout, choose_join_layout
from neardup.index.permuted import TableLevel, ranges_concat
from neardup.model import DEFAULT_VERIFY
from neardup.sketch import HEADER


def self_join(values: np.ndarray, k: int = 3, ids: np.ndarray | None = None,
              layout: Layout | None = None, *, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of fingerprints in ``values`` within distance ``k``: (id_a, id_b, distance)
    with id_a < id_b in input order (ids default to positions). Pairs of equal fingerprints
    included. ``threads``: each table's keys are cut into that many slices joined at once
    (the compiled loop releases the GIL); the same pairs.

    >>> a, b, d = self_join(np.array([0b1111, 0b0111, 1 << 40], dtype=np.uint64), k=1)
    >>> a.tolist(), b.tolist(), d.tolist()
    ([0], [1], [1])
    """
    values = np.ascontiguousarray(values, dtype=np.uint64)
    n = values.shape[0]
    layout = layout or choose_join_layout(n, k)
    if layout.k < k:
        raise ConfigError(f"layout is built for k={layout.k}, less than k={k}")
    src, dst, masks = layout.permutation_arrays()
    leads = layout.lead_masks()
    radii = layout.radius_array()
    order = np.argsort(values)
    sorted_vals = values[order]
    change = np.ones(n, dtype=bool)
    change[1:] = sorted_vals[1:] != sorted_vals[:-1]
    uniq = sorted_vals[change]
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, n))
    lead = min(layout.lead_bits(t) for t in range(len(layout.tables)))
    # read at call time: tests raise the minimum
    wanted = max(layout_mod.MIN_DIRECTORY_BITS, int(math.ceil(math.log2(uniq.shape[0] + 1))))
    d = max(1, min(lead, MAX_DIRECTORY_BITS, wanted))
    pm, pc = layout.probe_masks(d)
    buf = [np.empty(1 << 12, dtype=np.uint64), np.empty(1 << 12, dtype=np.uint64), np.empty(1 << 12, dtype=np.int64)]
    parts_a, parts_b, parts_d = [], [], []
    for t in range(len(layout.tables)):
        sp = np.sort(K.permute_many(uniq, src[t], dst[t], masks))
        dirs_row = K.build_directory(sp, d)
        if threads > 1 and n >= 1 << 16:
            va, vb, dist = _join_table_threaded(sp, dirs_row, d, k, t, (src, dst, masks, leads, radii, pm, pc), threads)
        else:
            while True:  # result rows into buffers, regrown (and the table joined again) when they overflow
                c = K.join_values(sp, dirs_row, d, k, t, src, dst, masks, leads, radii, pm, pc, *buf)
                if c <= buf[0].shape[0]:
                    break
                buf = [np.empty(2 * c, dtype=np.uint64), np.empty(2 * c, dtype=np.uint64),
                       np.empty(2 * c, dtype=np.int64)]
            va, vb, dist = buf[0][:c].copy(), buf[1][:c].copy(), buf[2][:c].copy()
        ua, ub = np.searchsorted(uniq, va), np.searchsorted(uniq, vb)
        single = (counts[ua] == 1) & (counts[ub] == 1)
        parts_a.append(order[starts[ua[single]]])
        parts_b.append(order[starts[ub[single]]])
        parts_d.append(dist[single])
        for i in np.flatnonzero(~single):  # values stored more than once: every copy pairs
            xs = order[starts[ua[i]]:starts[ua[i]] + counts[ua[i]]]
            ys = order[starts[ub[i]]:starts[ub[i]] + counts[ub[i]]]
            parts_a.append(np.repeat(xs, ys.shape[0]))
            parts_b.append(np.tile(ys, xs.shape[0]))
            parts_d.append(np.full(xs.shape[0] * ys.shape[0], dist[i], dtype=np.int64))
    for g in np.flatnonzero(counts > 1):  # equal fingerprints: distance 0
        members = order[starts[g]:starts[g] + counts[g]]
        ia, ib = np.triu_indices(members.shape[0], 1)
        parts_a.append(members[ia])
        parts_b.append(members[ib])
        parts_d.append(np.zeros(ia.shape[0], dtype=np.int64))
    a = np.concatenate(parts_a) if parts_a else np.empty(0, np.int64)
    b = np.concatenate(parts_b) if parts_b else np.empty(0, np.int64)
    dist = np.concatenate(parts_d) if parts_d else np.empty(0, np.int64)
    a, b = np.minimum(a, b), np.maximum(a, b)
    srt = np.lexsort((b, a))
    a, b, dist = a[srt], b[srt], dist[srt]
    if ids is not None:
        ids = np.asarray(ids, dtype=np.int64)
        return ids[a], ids[b], dist
    return a, b, dist


def _join_table_threaded(sp: np.ndarray, dirs_row: np.ndarray, d: int, k: int, t: int, arrays: tuple,
                         threads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One table's pairs (:func:`neardup.index._kernels.join_values`) with its keys cut into
    slices of about equal work (entries), joined on ``threads`` threads."""
    from concurrent.futures import ThreadPoolExecutor


    kernel: Any = K.join_values_range
    n_keys = 1 << d
    slices = 8 * threads
    cuts = np.searchsorted(dirs_row, np.linspace(0, sp.shape[0], slices + 1)[1:-1])
    bounds = np.unique(np.r_[0, np.clip(cuts, 0, n_keys), n_keys])

    def run(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        size = 1 << 12
        while True:
            va, vb, dist = np.empty(size, np.uint64), np.empty(size, np.uint64), np.empty(size, np.int64)
            c = kernel(sp, dirs_row, d, k, t, *arrays, lo, hi, va, vb, dist)
            if c <= size:
                return va[:c], vb[:c], dist[:c]
            size = 2 * c

    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = list(pool.map(lambda b: run(int(b[0]), int(b[1])), zip(bounds[:-1], bounds[1:])))
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


def batch_join(queries: np.ndarray, stored: Iterable[np.ndarray], k: int = 3,
               layout: Layout | None = None, *, block: int = 1 << 20,
               threads: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Manku's batch mode: tables on the (smaller) query batch, the stored set streamed past
    once in chunks (e.g. slices of a ``np.memmap`` far larger than RAM). Each chunk is joined
    in blocks of ``block`` fingerprints: per table, the block is permuted and counting-sorted
    on the tables' bucket bits, then merged bucket by bucket with the query table (both sides
    sequential, the query bucket in cache). Blocks run on ``threads`` threads (default: the
    CPUs this process may use; the compiled join releases the GIL).

    ``layout`` defaults to :func:`choose_batch_layout` for the distinct queries.

    Yields, per chunk, (query position, stored position within all chunks, distance); each
    pair once.

    >>> q = np.array([0b1011, 1 << 50], dtype=np.uint64)
    >>> stored = [np.array([0b1001, 0xFF], dtype=np.uint64), np.array([(1 << 50) | 1], dtype=np.uint64)]
    >>> sorted((int(a), int(b), int(d)) for qp, sp, dist in batch_join(q, stored, k=2) for a, b, d in zip(qp, sp, dist))
    [(0, 0, 1), (1, 2, 1)]
    """
    from concurrent.futures import ThreadPoolExecutor

    queries = np.ascontiguousarray(queries, dtype=np.uint64)
    if block < 1:
        raise ConfigError(f"block must be >= 1, got {block}")
    # tables on the distinct query values; a match is expanded to every query holding it
    order = np.argsort(queries, kind="stable")
    sorted_q = queries[order]
    distinct = np.ones(sorted_q.shape[0], dtype=bool)
    distinct[1:] = sorted_q[1:] != sorted_q[:-1]
    uniq = sorted_q[distinct]
    layout = layout or choose_batch_layout(uniq.shape[0], k, block)
    if layout.k < k:
        raise ConfigError(f"layout is built for k={layout.k}, less than k={k}")
    perm = layout.permutation_arrays()
    level = TableLevel.build(layout, perm, uniq, np.arange(uniq.shape[0], dtype=np.int64))
    leads = layout.lead_masks()
    radii = layout.radius_array()
    pm, pc = layout.probe_masks(level.d)
    src, dst, masks = perm
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    n_threads = max(1, threads)
    scratch: list[list[np.ndarray]] = []
    results: list[list[np.ndarray]] = []

    def join(slot: int, part: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tmp, sv, spos, counts = scratch[slot]
        m = part.shape[0]
        out = results[slot]
        while True:  # matches into the slot's buffers; regrown (and the block joined again) on overflow
            c = K.join_partitioned(level.tables, level.dirs, level.d, src, dst, masks, leads, radii, pm, pc, k,
                                   part, tmp[:m], sv[:m], spos[:m], counts, *out)
            if c <= out[0].shape[0]:
                return out[0][:c].copy(), out[1][:c].copy(), out[2][:c].copy()
            out = results[slot] = [np.empty(2 * c, dtype=np.uint64), np.empty(2 * c, dtype=np.int64),
                                   np.empty(2 * c, dtype=np.int64)]

    offset = 0
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        for chunk in stored:
            starts = list(range(0, chunk.shape[0], block))
            parts_q, parts_s, parts_d = [], [], []
            for wave in range(0, len(starts), n_threads):
                jobs = []
                for slot, lo in enumerate(starts[wave:wave + n_threads]):
                    part = np.ascontiguousarray(chunk[lo:lo + block], dtype=np.uint64)
                    while len(scratch) <= slot:
                        scratch.append([np.empty(0, dtype=np.uint64)] * 3
                                       + [np.empty((1 << level.d) + 1, dtype=np.int64)])
                        results.append([np.empty(1 << 12, dtype=np.uint64), np.empty(1 << 12, dtype=np.int64),
                                        np.empty(1 << 12, dtype=np.int64)])
                    if scratch[slot][0].shape[0] < part.shape[0]:
                        size = part.shape[0]  # = block, except for short chunks
                        scratch[slot][:3] = [np.empty(size, dtype=np.uint64), np.empty(size, dtype=np.uint64),
                                             np.empty(size, dtype=np.uint32)]
                    jobs.append((lo, pool.submit(join, slot, part)))
                for lo, job in jobs:
                    qv, sp, dist = job.result()
                    if qv.shape[0]:
                        parts_q.append(qv)
                        parts_s.append(sp + lo)
                        parts_d.append(dist)
            if parts_q:
                qv, sp, dist = np.concatenate(parts_q), np.concatenate(parts_s), np.concatenate(parts_d)
                first, last = np.searchsorted(sorted_q, qv, "left"), np.searchsorted(sorted_q, qv, "right")
                repeat = last - first
                qpos = order[ranges_concat(first, last)].astype(np.int64)  # every query holding that value
                yield qpos, np.repeat(sp, repeat) + offset, np.repeat(dist, repeat)
            offset += chunk.shape[0]


# -- band joins: a query batch against a stored set streamed in chunks ---------------------------

U64 = np.uint64
#: bytes of a sketch row (header + bins)
WIDTH = HEADER + BINS
#: packed nibble words of a row: bins 0..55 at bits 4 (bin + 4) of the 64 bytes read as nibbles
NWORDS = 4
if sys.byteorder != "little":  # pragma: no cover - the packing reads the rows as little-endian words
    raise ImportError("neardup.index.joins needs a little-endian machine")


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

"""Joins on the permuted tables (Manku, Jain and Das Sarma): every pair of a set within
distance k (:func:`self_join`) and a batch of queries against a stored set streamed past in
blocks (:func:`batch_join`), exact for every layout :mod:`neardup.permuted` validates; the
loops are compiled in :mod:`neardup._index_kernels`.

>>> import numpy as np
>>> a, b, d = self_join(np.array([0b1011, 0b0011, 0xFF00], dtype=np.uint64), k=1)
>>> list(zip(a.tolist(), b.tolist(), d.tolist()))
[(0, 1, 1)]
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from neardup import _index_kernels as K
from neardup import permuted
from neardup.errors import ConfigError
from neardup.permuted import (
    MAX_DIRECTORY_BITS,
    Layout,
    _expand,
    _Level,
    choose_batch_layout,
    choose_join_layout,
)


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
    wanted = max(permuted._MIN_DIRECTORY_BITS, int(math.ceil(math.log2(uniq.shape[0] + 1))))
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
    """One table's pairs (:func:`neardup._index_kernels.join_values`) with its keys cut into
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
    level = _Level.build(layout, perm, uniq, np.arange(uniq.shape[0], dtype=np.int64))
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
                qpos = order[_expand(first, last)].astype(np.int64)  # every query holding that value
                yield qpos, np.repeat(sp, repeat) + offset, np.repeat(dist, repeat)
            offset += chunk.shape[0]

"""The candidate stage and the pair decisions of the array-based batch job
(:mod:`neardup.batch.arrays`) over digest groups: the same pairs as
:func:`neardup.batch.dedup.link_simhash`, without materialising a block's pairs.

Blocks are :func:`neardup.batch.blocks.block_rows`' (8 sketch bands, the pigeonhole SimHash keys at
``min(k, PIGEON_K)``), taken one block kind at a time on ``jobs`` threads: rows sorted by
key, every pair of a bucket of at most ``max_bucket`` groups enumerated with its filter in a
compiled loop (band pairs: the nibble filter; SimHash pairs: the distance), larger buckets
windowed in node-id order (:func:`neardup.batch.blocks.bucket_pairs`). With ``k > PIGEON_K`` and
``exact_k`` the permuted tables' self-join at k adds its pairs. Before the decision, a pair
whose two 64-byte sketches agree on fewer bins than ``verify`` needs
(:func:`neardup.index.bands.need`) is dropped: :func:`neardup.matching.match` would reject it
(within k at ``verify``, beyond it at ``far_verify(verify)``, which is larger), so the
answer is unchanged; every other pair goes through :func:`neardup.batch.blocks.decide_pair`.

>>> import numpy as np
>>> from neardup.batch import BatchRecord
>>> from neardup.batch.arrays import FingerprintArrays
>>> fa = FingerprintArrays.from_records([BatchRecord("https://a.example/", "a", 0b1011, length=4000),
...                                      BatchRecord("https://b.example/", "b", 0b0011, length=4000)])
>>> ga, gb, dist, score = linked_pairs(fa, np.arange(2), np.arange(2), k=3, verify=None)
>>> ga.tolist(), gb.tolist(), dist.tolist()
([0], [1], [1])
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from neardup.batch import _kernels as BK
from neardup.batch.blocks import PIGEON_K, WINDOW, bucket_cap, decide_pair, pigeon_blocks
from neardup.index.bands import DEFAULT_BANDS, banded_rows, far_verify, need, nibble_threshold, nibbles_of
from neardup.index.joins import self_join
from neardup.matching import Side

_NIBBLE_LOW = np.uint64(0x1111111111111111)
#: candidate pairs decided in one process below this many (forking costs more)
_PARALLEL_DECISIONS = 50_000


def _packed_nibbles(bins: np.ndarray) -> np.ndarray:
    """(n, 4) uint64: the 56 low nibbles of :func:`neardup.index.bands.nibbles_of`, two words to
    one (computed in slices: the intermediate is 224 bytes a row)."""
    out = np.zeros((bins.shape[0], 8), dtype=np.uint32)
    for lo in range(0, bins.shape[0], 1 << 18):
        nib = nibbles_of(bins[lo:lo + (1 << 18)])
        out[lo:lo + nib.shape[0], :nib.shape[1]] = nib
    return out.view(np.uint64)


def _block_kinds(sim: np.ndarray, sketch: np.ndarray, ok: np.ndarray, k: int, bands: bool,
                 verify: float | None) -> list[tuple[Any, Any, bool]]:
    """(owner groups, key, banded) per block kind, as :func:`neardup.batch.blocks.block_rows` cuts
    them; band blocks only when they can keep a pair (``verify`` set)."""
    kinds: list[tuple[Any, Any, bool]] = []
    if bands and verify is not None:
        owners = np.flatnonzero(ok)
        kinds += [(owners, ("band", j), True) for j in range(DEFAULT_BANDS)]
    everyone = np.arange(sim.shape[0], dtype=np.int64)
    kinds += [(everyone, ("sim", sx, wx), False) for sx, wx in pigeon_blocks(min(k, PIGEON_K))]
    return kinds


def _key(spec: tuple, owners: np.ndarray, sim: np.ndarray, sketch: np.ndarray) -> np.ndarray:
    """The block keys of one kind (made when its thread runs: one kind's keys at a time)."""
    if spec[0] == "band":
        j = spec[1]
        return (sketch[owners, 4 + 2 * j].astype(np.uint16) | (sketch[owners, 5 + 2 * j].astype(np.uint16) << 8))
    _, sx, wx = spec
    key = (sim >> np.uint64(sx)) & np.uint64((1 << wx) - 1 if wx < 64 else 0xFFFFFFFFFFFFFFFF)
    return key.astype(np.uint16) if wx <= 16 else key


def _kind_pairs(owners: np.ndarray, key: np.ndarray, banded: bool, rank: np.ndarray, packed: np.ndarray,
                sim: np.ndarray, thr: int, max_bucket: int) -> np.ndarray:
    """Kept candidate pairs of one block kind, as codes ``a * n + b`` (a < b)."""
    n = np.int64(max(1, sim.shape[0]))
    if owners.shape[0] < 2:
        return np.empty(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    rows = owners[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    sizes = np.diff(np.r_[starts, sk.shape[0]])
    small = (sizes > 1) & (sizes <= max_bucket)
    nib = packed if banded else np.zeros((0, 4), dtype=np.uint64)
    size = 1 << 16
    while True:
        oa, ob = np.empty(size, np.int64), np.empty(size, np.int64)
        c = BK.bucket_pairs_filtered(rows, starts[small], sizes[small], nib, sim, thr, oa, ob)
        if c <= size:
            break
        size = 2 * c
    parts = [oa[:c] * n + ob[:c]]
    for st, s in zip(starts[sizes > max_bucket].tolist(), sizes[sizes > max_bucket].tolist()):
        members = rows[st:st + s]
        members = members[np.argsort(rank[members], kind="stable")]
        for d in range(1, WINDOW + 1):  # a sorted window: each group with the next WINDOW ones
            a, b = members[:-d], members[d:]
            if banded:
                x = packed[a] ^ packed[b]
                x = (x | (x >> np.uint64(1)) | (x >> np.uint64(2)) | (x >> np.uint64(3))) & _NIBBLE_LOW
                keep = 56 - np.bitwise_count(x).sum(axis=1, dtype=np.int64) >= thr
            else:
                keep = np.bitwise_count(sim[a] ^ sim[b]).astype(np.int64) <= thr
            a, b = a[keep], b[keep]
            parts.append(np.minimum(a, b) * n + np.maximum(a, b))
    return np.unique(np.concatenate(parts))


def candidates(sim: np.ndarray, sketch: np.ndarray, ok: np.ndarray, rank: np.ndarray, *, k: int,
               verify: float | None, bands: bool, max_bucket: int, exact_k: bool, jobs: int = 1,
               lap: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct candidate pairs (a < b) of groups: :func:`neardup.batch.blocks.candidate_pairs`
    plus, for ``k > PIGEON_K`` and ``exact_k``, the self-join at k (module docs)."""
    n = np.int64(max(1, sim.shape[0]))
    if sim.shape[0] < 2:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    packed = _packed_nibbles(sketch[:, 4:]) if bands and verify is not None else np.zeros((0, 4), np.uint64)
    band_thr = nibble_threshold(min(float(verify), far_verify(verify) or 1.0)) if verify is not None else 0
    kinds = _block_kinds(sim, sketch, ok, k, bands, verify)
    sim_thr = min(k, PIGEON_K)

    def run(kind: tuple[Any, Any, bool]) -> np.ndarray:
        owners, spec, banded = kind
        return _kind_pairs(owners, _key(spec, owners, sim, sketch), banded, rank, packed, sim,
                           band_thr if banded else sim_thr, max_bucket)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        parts = list(pool.map(run, kinds))
    if lap is not None:
        lap("blocks")
    if k > PIGEON_K and exact_k:
        ja, jb, _ = self_join(sim, k, threads=max(1, jobs))
        parts.append(np.minimum(ja, jb) * n + np.maximum(ja, jb))
        del ja, jb
        if lap is not None:
            lap("self-join")
    code = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
    return code // n, code % n


def _verified(sketch: np.ndarray, has: np.ndarray, a: np.ndarray, b: np.ndarray, verify: float | None) -> np.ndarray:
    """Which pairs the sketch may accept (module docs): all but those whose two 64-byte
    sketches agree on fewer bins than ``verify`` needs."""
    if verify is None or a.shape[0] == 0:
        return np.ones(a.shape[0], dtype=bool)
    both = has[a] & has[b]
    keep = np.ones(a.shape[0], dtype=bool)
    idx = np.flatnonzero(both)
    keep[idx] = BK.sketch_agreement(a[idx], b[idx], sketch) >= need(float(verify))
    return keep


_STATE: dict[str, Any] = {}


def _decide_range(bounds: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decisions of the candidate pairs ``lo:hi`` of the state set up by :func:`decide`."""
    lo, hi = bounds
    s = _STATE
    keep, dist, score = np.zeros(hi - lo, bool), np.zeros(hi - lo, np.int64), np.full(hi - lo, np.nan)
    sides: dict[int, Side] = {}

    def side(g: int) -> Side:
        if g not in sides:
            row = int(s["reps"][g])
            fa = s["fa"]
            sides[g] = Side(int(fa.simhash[row]), fa.text("digest", row), False, fa.sketch_bytes(row), None, None,
                            int(fa.length[row]))
        return sides[g]

    for i, (x, y) in enumerate(zip(s["a"][lo:hi].tolist(), s["b"][lo:hi].tolist())):
        m = decide_pair(side(x), side(y), s["k"], s["verify"])
        if m.status is not None:
            keep[i], dist[i] = True, m.distance
            score[i] = np.nan if m.score is None else m.score
    return keep, dist, score


def decide(fa: Any, reps: np.ndarray, a: np.ndarray, b: np.ndarray, k: int, verify: float | None,
           jobs: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`neardup.batch.blocks.decide_pair` on each pair of groups (given by their rows
    ``reps``): (linked, distance, score with NaN for none); in ``jobs`` forked processes
    when the pairs are many."""
    import multiprocessing

    _STATE.update(fa=fa, reps=reps, a=a, b=b, k=k, verify=verify)
    try:
        m = a.shape[0]
        if jobs > 1 and m >= _PARALLEL_DECISIONS and "fork" in multiprocessing.get_all_start_methods():
            cuts = np.linspace(0, m, 4 * jobs + 1).astype(int)
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                parts = pool.map(_decide_range, list(zip(cuts[:-1].tolist(), cuts[1:].tolist())))
        else:
            parts = [_decide_range((0, m))]
    finally:
        _STATE.clear()
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


def linked_pairs(fa: Any, reps: np.ndarray, rank: np.ndarray, *, k: int, verify: float | None, bands: bool = True,
                 max_bucket: int | None = None, exact_k: bool = True, jobs: int = 1,
                 lap: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Linked pairs (a, b, distance, score) of the digest groups whose representative rows
    of ``fa`` are ``reps`` (``rank``: each group's node id, the window order): candidates,
    the lossless sketch check, then :func:`neardup.batch.blocks.decide_pair`. ``lap(stage)`` is
    called as each stage ends (timings); ``max_bucket`` defaults to
    :func:`neardup.batch.blocks.bucket_cap` of the groups."""

    jobs = max(1, min(jobs, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else jobs))
    identity = reps.shape[0] == fa.n and bool(np.array_equal(reps, np.arange(fa.n)))  # no copy when all differ
    sim = fa.simhash if identity else fa.simhash[reps]
    sketch = fa.sketch if identity else fa.sketch[reps]
    has = fa.has_sketch if identity else fa.has_sketch[reps]
    ok = banded_rows(sketch, has)
    a, b = candidates(sim, sketch, ok, np.asarray(rank, dtype=np.int64), k=k, verify=verify, bands=bands,
                      max_bucket=bucket_cap(reps.shape[0]) if max_bucket is None else max_bucket, exact_k=exact_k,
                      jobs=jobs, lap=lap)
    keep = _verified(sketch, has, a, b, verify)
    a, b = a[keep], b[keep]
    if lap is not None:
        lap("sketch check")
    linked, dist, score = decide(fa, reps, a, b, k, verify, jobs)
    if lap is not None:
        lap(f"decide ({a.shape[0]} pairs)")
    return a[linked], b[linked], dist[linked], score[linked]

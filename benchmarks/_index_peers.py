"""The peers the Hamming-index harnesses measure beside neardup, on the same data and one
thread each: faiss ``IndexBinaryMultiHash(64, 4, 16)`` (one query at a time for the k = 3 report,
with ``nflip = k // 4`` for the radius sweep, built on the queries for batch mode), the
``simhash`` package's ``SimhashIndex``, and ``simhash-pybind``'s ``find_all`` (the self-join,
run in a subprocess from its own venv, because both peers install a module named ``simhash``).
Each returns ``{"skipped": why}`` where its peer is not installed.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from _index_common import (
    K,
    MemWatch,
    compare,
    distinct_positions,
    log,
    measure,
    mem_available,
    percentiles,
    timed_calls,
)


# -- faiss ----------------------------------------------------------------------------------
def bench_faiss(n: int, stored: np.ndarray, queries: np.ndarray, truth: list,
                args: argparse.Namespace) -> dict[str, Any]:
    try:
        import faiss
    except ImportError:
        return {"skipped": "faiss-cpu is not installed"}
    need = n * 90
    if need + 2 * 2**30 > mem_available():
        return {"skipped": f"not enough memory (needs ~{need / 2**30:.1f} GiB)"}
    faiss.omp_set_num_threads(1)
    log(f"online N={n:,}: faiss build")
    codes = stored.view(np.uint8).reshape(-1, 8)
    qcodes = queries.view(np.uint8).reshape(-1, 8)
    with MemWatch() as mw:
        ix = faiss.IndexBinaryMultiHash(64, 4, 16)
        ix.add(codes)
    res: dict[str, Any] = {"build_s": mw.seconds, "bytes_per_fp": None, "rss_bytes_per_fp": mw.delta / n,
                           "peak_extra_bytes_per_fp": None if mw.peak_extra is None else mw.peak_extra / n}
    # binary range_search keeps distances < radius: radius k + 1 gives distance <= k
    ix.range_search(qcodes[:1], K + 1)
    rows = [qcodes[i:i + 1] for i in range(queries.shape[0])]
    st, raw = measure(functools.partial(ix.range_search, thresh=K + 1), rows, args.passes)
    found = [set(zip(ids.tolist(), np.asarray(D, dtype=np.int64).tolist())) for _, D, ids in raw[:len(truth)]]
    del raw
    res.update(st)
    res["single_queries"] = int(queries.shape[0])
    times = []
    for _ in range(3 if n <= 10**7 else 1):
        t0 = time.perf_counter()
        ix.range_search(qcodes, K + 1)
        times.append(time.perf_counter() - t0)
    res["batch_qps"] = queries.shape[0] / float(np.median(times))
    res["exactness"] = compare(found, truth)
    log(f"online N={n:,}: faiss p50 {res['p50_us']:.1f} µs, exact={res['exactness']['exact']}")
    del ix
    gc.collect()
    return res


def radius_faiss(n: int, ks: list[int], stored: np.ndarray, queries: np.ndarray, truth_all: list,
                 args: argparse.Namespace) -> list[dict[str, Any]]:
    try:
        import faiss
    except ImportError:
        return [{"skipped": "faiss-cpu is not installed"}] * len(ks)
    if n * 90 + 2 * 2**30 > mem_available():
        return [{"skipped": "not enough memory"}] * len(ks)
    faiss.omp_set_num_threads(1)
    codes = stored.view(np.uint8).reshape(-1, 8)
    qcodes = queries.view(np.uint8).reshape(-1, 8)
    log(f"radius N={n:,}: faiss build")
    with MemWatch() as mw:
        ix = faiss.IndexBinaryMultiHash(64, 4, 16)
        ix.add(codes)
    out = []
    for k in ks:
        ix.nflip = k // 4  # 4 substrings of 16 bits: one is within k // 4 of the query's
        truth = [{(i, d) for i, d in t if d <= k} for t in truth_all]
        # binary range_search keeps distances < radius: radius k + 1 gives distance <= k
        nq = queries.shape[0] if n <= 10**6 else min(queries.shape[0], max(len(truth), args.faiss_queries))
        t0 = time.perf_counter()
        ix.range_search(qcodes[:5], k + 1)
        one = (time.perf_counter() - t0) / 5
        if args.faiss_seconds and one * nq > args.faiss_seconds:  # slow at large k and N: a time budget
            nq = max(min(nq, 10), int(args.faiss_seconds / max(one, 1e-9)))
        rows = [qcodes[i:i + 1] for i in range(nq)]
        truth = truth[:nq]
        lat, cpu, raw = timed_calls(functools.partial(ix.range_search, thresh=k + 1), rows)
        found = [set(zip(ids.tolist(), np.asarray(D, dtype=np.int64).tolist())) for _, D, ids in raw[:len(truth)]]
        res = {**percentiles(lat, cpu), "build_s": mw.seconds, "bytes_per_fp": None, "rss_bytes_per_fp": mw.delta / n,
               "tables": 4, "layout": f"4x16 nflip={k // 4}", "single_queries": nq}
        ex = compare(found, truth)
        res["exact"], res["exactness"] = ex["exact"], ex
        log(f"radius N={n:,} k={k}: faiss p50 {res['p50_us']:.0f} p99 {res['p99_us']:.0f} µs exact={ex['exact']}")
        out.append(res)
        del raw
    del ix
    gc.collect()
    return out


def batch_faiss(queries: np.ndarray, mm: np.ndarray, k: int, qpos: np.ndarray, spos: np.ndarray,
                budget: float, seed: int) -> dict[str, Any]:
    """faiss ``IndexBinaryMultiHash(64, 4, 16)`` built on the queries (it has no batch join: the
    stored values are its queries), ``nflip = k // 4``, ``range_search`` of a random sample of
    stored values, one thread, as many as fit ``budget`` seconds (at least 10); the per-stored
    cost projected to the whole stored set, its answers checked against ``batch_join``'s."""
    try:
        import faiss
    except ImportError:
        return {"skipped": "faiss-cpu is not installed"}
    faiss.omp_set_num_threads(1)
    t0 = time.perf_counter()
    ix = faiss.IndexBinaryMultiHash(64, 4, 16)
    ix.add(np.ascontiguousarray(queries).view(np.uint8).reshape(-1, 8))
    ix.nflip = k // 4
    build = time.perf_counter() - t0
    rng = np.random.default_rng([seed, 36, k])
    pos = np.sort(distinct_positions(rng, mm.shape[0], 100_000))
    codes = np.ascontiguousarray(np.asarray(mm[pos])).view(np.uint8).reshape(-1, 8)
    t0 = time.perf_counter()
    ix.range_search(codes[:10], k + 1)
    one = (time.perf_counter() - t0) / 10
    n = int(min(pos.shape[0], max(10, budget / max(one, 1e-9))))
    t0 = time.perf_counter()
    lims, _, ids = ix.range_search(codes[:n], k + 1)
    secs = time.perf_counter() - t0
    got = {(int(ids[j]), int(pos[i])) for i in range(n) for j in range(lims[i], lims[i + 1])}
    sel = np.isin(spos, pos[:n])
    ours = set(zip(qpos[sel].tolist(), spos[sel].tolist()))
    res = {"build_s": build, "sample": n, "seconds": secs, "seconds_per_stored": secs / n,
           "same_pairs": got == ours, "pairs": len(got), "nflip": k // 4}
    log(f"batch k={k}: faiss {secs / n * 1e6:,.0f} µs per stored value ({n} sampled), same pairs {got == ours}")
    del ix
    return res


# -- simhash ------------------------------------------------------------------------------------
def bench_simhashindex(n: int, stored: np.ndarray, queries: np.ndarray, truth: list) -> dict[str, Any]:
    try:
        from simhash import Simhash, SimhashIndex
    except ImportError:
        return {"skipped": "simhash is not installed"}
    import logging
    logging.getLogger("simhash").setLevel(logging.ERROR)
    log(f"online N={n:,}: simhash.SimhashIndex build")
    vals = stored.tolist()
    with MemWatch() as mw:
        objs = [(str(i), Simhash(v)) for i, v in enumerate(vals)]
        ix = SimhashIndex(objs, f=64, k=K)
        del objs
    del vals
    res: dict[str, Any] = {"build_s": mw.seconds, "bytes_per_fp": None, "rss_bytes_per_fp": mw.delta / n,
                           "peak_extra_bytes_per_fp": None if mw.peak_extra is None else mw.peak_extra / n}
    qs = [Simhash(v) for v in queries.tolist()]
    lat, cpu, raw = timed_calls(ix.get_near_dups, qs)
    found = []
    for i, r in enumerate(raw[:len(truth)]):
        pos = np.array([int(x) for x in r], dtype=np.int64)
        d = np.bitwise_count(stored[pos] ^ queries[i]).astype(np.int64) if pos.shape[0] else pos
        found.append(set(zip(pos.tolist(), d.tolist())))
    res.update(percentiles(lat, cpu))
    res["single_queries"] = len(qs)
    res["batch_qps"] = None
    res["exactness"] = compare(found, truth)
    log(f"online N={n:,}: SimhashIndex p50 {res['p50_us']:.1f} µs, exact={res['exactness']['exact']}")
    del ix, qs
    gc.collect()
    return res


PYBIND_SCRIPT = r"""
import json, sys, time
import numpy as np
import simhash
vals = np.load(sys.argv[1])
blocks = int(sys.argv[3])
hashes = vals.tolist()
times, c_times = [], []
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter(); pairs = simhash.find_all(hashes, blocks, 3); times.append(time.perf_counter() - t0)
s = set(hashes)
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter(); pairs2 = simhash.c_find_all(s, blocks, 3); c_times.append(time.perf_counter() - t0)
assert pairs == pairs2
arr = np.array([(min(a, b), max(a, b)) for a, b in pairs], dtype=np.uint64).reshape(-1, 2)
np.save(sys.argv[2], arr)
try:
    from importlib import metadata
    ver = metadata.version("simhash-pybind")
except Exception:
    ver = None
print(json.dumps({"times": times, "c_times": c_times, "pairs": len(pairs), "version": ver}))
"""


def pybind_selfjoin(python: str | None, values: np.ndarray, vpairs: np.ndarray, tmp: Path,
                    repeats: int) -> dict[str, Any]:
    """simhash-pybind's ``find_all`` (4 blocks, k = 3) and ``c_find_all`` on ``values``, run by
    ``python`` (a venv with simhash-pybind) and timed inside it; its pairs of distinct values
    compared with neardup's (``vpairs``, sorted (min, max) rows)."""
    if not python:
        return {"skipped": "no simhash-pybind interpreter (--pybind-python)"}
    n = values.shape[0]
    out: dict[str, Any] = {}
    f_in, f_out = tmp / f"selfjoin-{n}.npy", tmp / f"selfjoin-{n}-pybind.npy"
    np.save(f_in, values)
    proc: subprocess.CompletedProcess[str] | None = None
    for blocks in (4,):
        try:
            proc = subprocess.run([python, "-c", PYBIND_SCRIPT, str(f_in), str(f_out), str(blocks), str(repeats)],
                                  capture_output=True, text=True, timeout=3600)
            info = json.loads(proc.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
            out = {"skipped": f"simhash-pybind failed: {exc} {getattr(proc, 'stderr', '')[-500:]}"}
            break
        theirs = np.load(f_out)
        theirs = np.unique(theirs, axis=0) if theirs.shape[0] else theirs.reshape(0, 2)
        out = {"blocks": blocks, "s": float(np.median(info["times"])), "s_all": info["times"],
               "c_find_all_s": float(np.median(info["c_times"])), "pairs": info["pairs"],
               "version": info["version"],
               "same_pairs": bool(theirs.shape == vpairs.shape and np.array_equal(theirs, vpairs))}
        if not out["same_pairs"]:
            mine = {tuple(r) for r in vpairs.tolist()}
            other = {tuple(r) for r in theirs.tolist()}
            out["only_neardup"] = len(mine - other)
            out["only_pybind"] = len(other - mine)
        log(f"self-join N={n:,}: simhash-pybind find_all {out['s']:.3f} s, same pairs={out['same_pairs']}")
    for f in (f_in, f_out):
        f.unlink(missing_ok=True)
    return out

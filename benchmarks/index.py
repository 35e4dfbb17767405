"""Speed, memory and exactness of neardup's permuted-table Hamming index at k = 3 (64-bit):
the ``index`` section of docs/benchmarks.md.

Random 64-bit fingerprints (``numpy.random.default_rng``, fixed seed) with planted
neighbours of the queries at distances 0..3 and decoys at 4..5. Everything runs in one
process, single-threaded, side by side with the peers:

* **online** (per ``--n``): neardup :class:`~neardup.index.permuted.PermutedIndex` (build time,
  bytes per fingerprint from ``nbytes()`` and from the RSS delta, peak RSS during the build,
  single-query p50/p99 with ``search`` one query at a time, batch queries/s with
  ``search_arrays``, exactness against numpy brute force, save + memory-mapped open);
  numpy brute force (chunked, preallocated); ``faiss`` ``IndexBinaryMultiHash(64, 4, 16)``;
  the ``simhash`` package's ``SimhashIndex`` (N <= 10^6 only);
* **inserts**: ``add`` one by one into an index of ``--inserts-base`` fingerprints;
* **self-join** (``--selfjoin N``): :func:`~neardup.index.joins.self_join` against
  ``simhash-pybind``'s ``find_all`` (run in a subprocess from its own venv, because both
  peers install a module named ``simhash``; see ``--pybind-python``);
* **batch mode** (``--batch-stored S --batch-queries Q``): Manku's batch join of Q queries
  against S stored fingerprints streamed from a raw uint64 file under ``/tmp``
  (``np.memmap``), with planted neighbours that must all be found, at k = 3
  (``benchmarks/index_batch.py`` runs it at other k).

The radius sweep (k beyond 3) is ``benchmarks/index_radius.py`` and batch mode at other k
``benchmarks/index_batch.py``: each writes its own block of the same section, which this
report keeps when it rewrites the section.

Usage::

    python benchmarks/index.py --quick                      # < 1 minute
    python benchmarks/index.py --n 1000000 --n 10000000 --selfjoin 1000000 \\
        --batch-stored 1000000000 --batch-queries 1000000

Progress goes to stderr, the results into the ``index`` section of ``docs/benchmarks.md``
(between ``<!-- index:start -->`` and ``<!-- index:end -->``; ``--no-doc`` to skip; ``--quick``
skips it unless ``--doc`` is given) and a JSON summary is the last line of stdout.
Optional peers that are not installed are reported as skipped.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # single-threaded peers (faiss)

import numpy as np
from _common import replace_section, rss_bytes
from _index_common import (
    DOC_END,
    DOC_START,
    K,
    MemWatch,
    NumpyBrute,
    batch_options,
    code_version,
    command_line,
    compare,
    distinct_positions,
    doc_path,
    fixed_mmap_threshold,
    flip_masks,
    fmt,
    harness_parser,
    kept_blocks,
    log,
    machine,
    measure,
    parse,
    percentiles,
    query_options,
    quick_batch,
    random_u64,
    run_options,
    timed_calls,
    warm_up,
)
from _index_peers import bench_faiss, bench_simhashindex, pybind_selfjoin
from index_batch import bench_batch

from neardup.index.joins import self_join
from neardup.index.permuted import PermutedIndex

# Peer figures measured earlier on this machine class (shared/reference/peer-benchmarks.md §2).
PEERS = {
    "numpy4x16": {  # numpy permuted tables 4x16 prototype
        10**5: {"p50": 22.6, "p99": 37.5, "batch": 718_893, "bytes": 48.0, "build": 0.009},
        10**6: {"p50": 24.0, "p99": 42.8, "batch": 380_126, "bytes": 48.0, "build": 0.208},
        10**7: {"p50": 28.7, "p99": 52.1, "batch": 59_301, "bytes": 48.0, "build": 3.83},
    },
    "faiss": {
        10**5: {"p50": 9.76, "p99": 15.5, "batch": 514_271, "bytes": 211.0, "build": 0.084},
        10**6: {"p50": 23.7, "p99": 46.5, "batch": 177_775, "bytes": 88.0, "build": 0.578},
        10**7: {"p50": 147.0, "p99": 252.0, "batch": 8_445, "bytes": 69.0, "build": 4.13},
    },
    "simhashindex": {
        10**5: {"p50": 41.6, "p99": 75.5, "bytes": 1068.0, "build": 1.35},
        10**6: {"p50": 223.0, "p99": 302.0, "bytes": 659.0, "build": 13.6},
    },
    "brute": {
        10**5: {"p50": 58.2, "p99": 88.2},
        10**6: {"p50": 519.0, "p99": 636.0},
        10**7: {"p50": 6075.0, "p99": 6684.0},
    },
    "selfjoin": {10**5: {"pybind": 0.05, "numpy4x16": 0.14}, 10**6: {"pybind": 1.47, "numpy4x16": 5.20}},
}


TARGETS = {"p99_1e7_us": 50.0, "p99_1e8_us": 100.0, "extra_bytes_per_fp": 32.0,
           "selfjoin_1e6_s": 1.0, "batch_1e6_vs_1e9_s": 600.0}


# -- online --------------------------------------------------------------------------------
def online_dataset(n: int, q: int, seed: int) -> dict[str, Any]:
    """Stored values, queries, planted (query, position, distance) and decoys (4..5).

    Every query gets a neighbour at distance ``i % 4``; even queries a second one at 1..3;
    every third query a decoy at distance 4 or 5 (must not be reported)."""
    rng = np.random.default_rng([seed, n, q])
    stored = random_u64(rng, n)
    queries = random_u64(rng, q)
    qi = np.arange(q)
    p_q = np.concatenate([qi, qi[qi % 2 == 0]])
    p_d = np.concatenate([qi % 4, rng.integers(1, 4, size=int((qi % 2 == 0).sum()))])
    d_q = qi[qi % 3 == 0]
    d_d = rng.integers(4, 6, size=d_q.shape[0])
    total = p_q.shape[0] + d_q.shape[0]
    if total > n // 2:
        raise SystemExit(f"--n {n} is too small for {q} queries with planted neighbours")
    pos = rng.permutation(n)[:total] if n <= 10**7 else distinct_positions(rng, n, total)
    masks = flip_masks(rng, np.concatenate([p_d, d_d]))
    stored[pos] = queries[np.concatenate([p_q, d_q])] ^ masks
    return {"stored": stored, "queries": queries,
            "planted": (p_q, pos[: p_q.shape[0]], p_d),
            "decoys": (d_q, pos[p_q.shape[0]:], d_d)}


def bench_online(n: int, nq: int, n_truth: int, seed: int, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    log(f"online N={n:,}: generating data")
    data = online_dataset(n, nq, seed)
    stored, queries = data["stored"], data["queries"]
    qlist = queries.tolist()
    srt = np.sort(stored)  # (np.unique hashes since numpy 2.3: minutes and GBs at 10^8)
    dup_values = int(np.count_nonzero(srt[1:] == srt[:-1]))
    del srt
    p_q, p_pos, _ = data["planted"]
    d_q, d_pos, _ = data["decoys"]
    out: dict[str, Any] = {"n": n, "queries": nq, "planted": int(p_q.shape[0]), "decoys": int(d_q.shape[0]),
                           "truth_queries": n_truth, "duplicate_values": dup_values, "methods": {}}

    # numpy brute force: latency and the ground truth for the first n_truth queries
    log(f"online N={n:,}: numpy brute force on {n_truth} queries")
    brute = NumpyBrute(stored)
    brute.search(queries[0], K)
    lat, cpu, raw = timed_calls(lambda qv: brute.search(qv, K), list(queries[:n_truth]))
    truth: list[set[tuple[int, int]]] = [set(zip(p.tolist(), d.tolist())) for p, d in raw]
    planted_truth = {(int(a), int(b)) for a, b in zip(p_q, p_pos) if a < n_truth}
    truth_pairs = {(i, p) for i, s in enumerate(truth) for p, _ in s}
    decoy_pairs = {(int(a), int(b)) for a, b in zip(d_q, d_pos)}
    out["truth_contains_planted"] = planted_truth <= truth_pairs and not (decoy_pairs & truth_pairs)
    out["methods"]["numpy brute force (chunked)"] = {
        "build_s": 0.0, "bytes_per_fp": 0.0, "rss_bytes_per_fp": 0.0, "peak_extra_bytes_per_fp": 0.0,
        **percentiles(lat, cpu), "single_queries": n_truth, "batch_qps": None,
        "exactness": {"queries": n_truth, "recall": 1.0, "false_positives": 0, "exact": True,
                      "note": "reference"}}

    # neardup
    log(f"online N={n:,}: neardup PermutedIndex build")
    ids = np.arange(n, dtype=np.int64)
    with MemWatch() as mw:
        idx = PermutedIndex(k=K, expected_n=n)
        idx.add_many(ids, stored)
    del ids
    nd: dict[str, Any] = {"build_s": mw.seconds, "bytes_per_fp": idx.nbytes() / n,
                          "rss_bytes_per_fp": mw.delta / n,
                          "peak_extra_bytes_per_fp": None if mw.peak_extra is None else mw.peak_extra / n,
                          "levels": idx.levels, "layout": idx.layout.to_dict()}
    log(f"online N={n:,}: neardup build {mw.seconds:.2f} s, {nd['bytes_per_fp']:.1f} B/fp; single queries")
    idx.search(qlist[0], K)
    st, single = measure(functools.partial(idx.search, k=K), qlist, args.passes)
    nd.update(st)
    nd["single_queries"] = nq
    nd["breakdown"] = latency_breakdown(idx, qlist)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        bq, bid, bd = idx.search_arrays(queries, K)
        times.append(time.perf_counter() - t0)
    nd["batch_qps"] = nq / float(np.median(times))
    nd["batch_queries"] = nq
    # exactness: the sample against brute force, then every query
    found = [set(single[i]) for i in range(n_truth)]
    ex = compare(found, truth)
    batch_sets: list[set[tuple[int, int]]] = [set() for _ in range(nq)]
    for a, b, c in zip(bq.tolist(), bid.tolist(), bd.tolist()):
        batch_sets[a].add((b, c))
    ex["batch_equals_single"] = all(batch_sets[i] == set(single[i]) for i in range(nq))
    # search_arrays promises unique (query, id) rows; extra rows are not wrong answers but are counted
    ex["batch_repeated_rows"] = int(bq.shape[0]) - sum(len(s) for s in batch_sets)
    ex["all_reported_distances_correct"] = (bool(np.all(np.bitwise_count(stored[bid] ^ queries[bq]) == bd))
                                            and bool(np.all(bd <= K)))
    got = {(a, b) for a, s in enumerate(batch_sets) for b, _ in s}
    ex["planted_found"] = sum((int(a), int(b)) in got for a, b in zip(p_q, p_pos)) / p_q.shape[0]
    ex["decoys_reported"] = sum((int(a), int(b)) in got for a, b in zip(d_q, d_pos))
    ex["exact"] = bool(ex["exact"] and ex["batch_equals_single"]
                       and ex["all_reported_distances_correct"] and ex["planted_found"] == 1.0
                       and ex["decoys_reported"] == 0)
    nd["exactness"] = ex
    log(f"online N={n:,}: neardup p50 {nd['p50_us']:.1f} µs p99 {nd['p99_us']:.1f} µs, "
        f"batch {nd['batch_qps']:,.0f} q/s, exact={ex['exact']}")

    # persistence
    pdir = tmp / f"neardup-index-{n}"
    shutil.rmtree(pdir, ignore_errors=True)
    t0 = time.perf_counter()
    idx.save(pdir)
    save_s = time.perf_counter() - t0
    disk = sum(f.stat().st_size for f in pdir.iterdir())
    t0 = time.perf_counter()
    idx2 = PermutedIndex.open(pdir, mmap=True)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter_ns()
    first = idx2.search(qlist[0], K)
    first_ns = time.perf_counter_ns() - t0
    st2, again = measure(functools.partial(idx2.search, k=K), qlist, 1)
    same = again == single
    nd["persistence"] = {"save_s": save_s, "open_s": open_s, "disk_bytes_per_fp": disk / n,
                         "first_query_us": first_ns / 1e3, "first_query_ok": first == single[0],
                         **{f"reopened_{k}": v for k, v in st2.items()},
                         "reopened_results_equal": same}
    log(f"online N={n:,}: save {save_s:.2f} s, open {open_s*1e3:.1f} ms, "
        f"first query {first_ns/1e3:.0f} µs, same={same}")
    del idx2
    gc.collect()
    nd["persistence"]["cold"] = cold_queries(pdir, qlist[:1000], single[:1000])
    c = nd["persistence"]["cold"]
    if "skipped" not in c:
        log(f"online N={n:,}: cold page cache: p50 {c['p50_us']:.0f} µs p99 {c['p99_us']:.0f} µs, "
            f"{c['major_faults_per_query']:.1f} major faults/query, same={c['results_equal']}")
    shutil.rmtree(pdir, ignore_errors=True)
    out["methods"]["neardup PermutedIndex"] = nd
    del idx, single, batch_sets, bq, bid, bd
    gc.collect()

    # faiss
    if not args.no_faiss:
        out["methods"]["faiss IndexBinaryMultiHash(64,4,16)"] = bench_faiss(n, stored, queries, truth, args)
    # simhash SimhashIndex
    if n <= args.simhashindex_max and not args.no_simhashindex:
        out["methods"]["simhash.SimhashIndex (k=3)"] = bench_simhashindex(n, stored, queries, truth)
    return out


def cold_queries(pdir: Path, qlist: list[int], expected: list[Any]) -> dict[str, Any]:
    """The index when it is not in RAM: its files are flushed and dropped from the page cache
    (``posix_fadvise(DONTNEED)``), reopened memory-mapped, and queried one by one; every
    probe then reads its pages from disk (major faults counted with ``getrusage``)."""
    import resource
    if not hasattr(os, "posix_fadvise"):
        return {"skipped": "no posix_fadvise on this platform"}
    for f in pdir.iterdir():
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    t0 = time.perf_counter()
    idx = PermutedIndex.open(pdir, mmap=True)
    open_s = time.perf_counter() - t0
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    lat, _, res = timed_calls(lambda x: idx.search(x, K), qlist)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults0
    st = percentiles(lat)
    return {"queries": len(qlist), "open_s": open_s, "p50_us": st["p50_us"], "p99_us": st["p99_us"],
            "mean_us": st["mean_us"], "major_faults_per_query": faults / max(1, len(qlist)),
            "results_equal": res == expected}


def latency_breakdown(idx: PermutedIndex, qlist: list[int]) -> dict[str, Any]:
    """Where a single query's time goes (one pass each): the compiled per-level calls alone
    (``_probe`` with a preallocated result buffer), ``search`` (which adds the buffer, the
    int conversion and the result list), and the batch path ``search_arrays`` on a
    1-element array (uses private attributes; skipped if they change)."""
    try:
        out_buf = np.empty((3, 64), dtype=np.int64)
        signed = [q - (1 << 64) if q >= 1 << 63 else q for q in qlist]
        arrays = [np.array([x], dtype=np.uint64) for x in qlist]
        out = {}
        for name, fn, args in (("kernel", lambda q: idx._probe(q, K, out_buf), signed),
                               ("search_arrays", lambda a: idx.search_arrays(a, K), arrays),
                               ("search", lambda x: idx.search(x, K), qlist)):
            fn(args[0])
            st, _ = measure(fn, args, 1)
            out[name] = {"p50_us": st["p50_us"], "p99_us": st["p99_us"]}
        return out
    except (AttributeError, TypeError, ImportError) as exc:  # internals changed
        return {"skipped": f"{type(exc).__name__}: {exc}"}


# -- inserts --------------------------------------------------------------------------------
def bench_inserts(base: int, inserts: int, nq: int, seed: int, passes: int) -> dict[str, Any]:
    log(f"inserts: {inserts:,} one by one into {base:,}")
    rng = np.random.default_rng([seed, 99, base, inserts])
    values = random_u64(rng, base + inserts)
    queries = random_u64(rng, nq)
    # planted neighbours: half of the queries in the base set, half among the inserts
    half = nq // 2
    pos = np.concatenate([rng.choice(base, half, replace=False),
                          base + rng.choice(inserts, nq - half, replace=False)])
    dists = np.arange(nq) % 4
    values[pos] = queries ^ flip_masks(rng, dists)
    idx = PermutedIndex(k=K, expected_n=base + inserts)
    idx.add_many(np.arange(base, dtype=np.int64), values[:base])
    new = values[base:].tolist()
    before = rss_bytes()
    t0 = time.perf_counter()
    slowest = 0
    for j, v in enumerate(new):
        s = time.perf_counter_ns()
        idx.add(base + j, v)
        slowest = max(slowest, time.perf_counter_ns() - s)
    total = time.perf_counter() - t0
    res: dict[str, Any] = {"base": base, "inserts": inserts, "total_s": total, "us_per_insert": total / inserts * 1e6,
                           "slowest_insert_ms": slowest / 1e6, "levels": idx.levels,
                           "delta": len(idx) - sum(idx.levels),
                           "rss_delta_bytes_per_insert": (rss_bytes() - before) / inserts}
    qlist = queries.tolist()
    st, found = measure(lambda qv: idx.search(qv, K), qlist, passes)
    res.update({f"after_{k}": v for k, v in st.items()})
    t0 = time.perf_counter()
    idx.optimize()
    res["optimize_s"] = time.perf_counter() - t0
    st2, again = measure(lambda qv: idx.search(qv, K), qlist, 1)
    res["optimized_levels"] = idx.levels
    res["optimized_p50_us"], res["optimized_p99_us"] = st2["p50_us"], st2["p99_us"]
    res["optimized_same_results"] = again == found
    brute = NumpyBrute(values)
    ntruth = min(200, nq)
    truth = []
    for i in range(ntruth):
        p, d = brute.search(queries[i], K)
        truth.append(set(zip(p.tolist(), d.tolist())))
    ex = compare([set(f) for f in found[:ntruth]], truth)
    ex["planted_found"] = sum(int(p) in {a for a, _ in found[i]} for i, p in enumerate(pos)) / nq
    ex["exact"] = bool(ex["exact"] and ex["planted_found"] == 1.0)
    res["exactness"] = ex
    log(f"inserts: {res['us_per_insert']:.1f} µs/insert, levels {res['levels']}, "
        f"query p50 {res['after_p50_us']:.1f} µs "
        f"p99 {res['after_p99_us']:.1f} µs, exact={ex['exact']}")
    return res


# -- duplicate fingerprints ------------------------------------------------------------------
def bench_duplicates(seed: int, copies: tuple[int, ...] = (250, 500, 1000)) -> dict[str, Any]:
    """One fingerprint stored under m ids (exact duplicates are common in crawls) among 10^5
    random ones: a query at distance 1 must return m rows, in time linear in m."""
    log(f"duplicates: one value stored {copies} times")
    rng = np.random.default_rng([seed, 55])
    rows = []
    for m in copies:
        vals = random_u64(rng, 100_000 + m)
        x = vals[0]
        vals[100_000:] = x
        idx = PermutedIndex(k=K, expected_n=vals.shape[0])
        idx.add_many(np.arange(vals.shape[0], dtype=np.int64), vals)
        q = np.array([x ^ np.uint64(1 << 40)], dtype=np.uint64)
        t0 = time.perf_counter()
        _, ids, _ = idx.search_arrays(q, K)
        arr_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        one = idx.search(int(q[0]), K)
        one_s = time.perf_counter() - t0
        rows.append({"copies": m, "expected": m + 1, "search_arrays_rows": int(ids.shape[0]),
                     "search_arrays_unique": int(np.unique(ids).shape[0]), "search_arrays_ms": arr_s * 1e3,
                     "search_results": len(one), "search_ms": one_s * 1e3})
        del idx
    log("duplicates: " + ", ".join(f"m={r['copies']}: {r['search_arrays_rows']} rows {r['search_ms']:.1f} ms"
                                   for r in rows))
    return {"rows": rows, "ok": all(r["search_arrays_rows"] == r["expected"] and r["search_results"] == r["expected"]
                                    for r in rows)}


# -- self-join -----------------------------------------------------------------------------
def selfjoin_dataset(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random values with n/100 planted pairs at distances 0..3 and n/1000 decoy pairs at 4..5."""
    rng = np.random.default_rng([seed, 17, n])
    values = random_u64(rng, n)
    pairs, decoys = n // 100, n // 1000
    pos = rng.permutation(n)[: 2 * (pairs + decoys)]
    a, b = pos[0::2], pos[1::2]
    dist = np.concatenate([np.arange(pairs) % 4, 4 + np.arange(decoys) % 2])
    values[b] = values[a] ^ flip_masks(rng, dist)
    return values, a, b, dist


def bench_selfjoin(n: int, seed: int, pybind_python: str | None, tmp: Path, repeats: int) -> dict[str, Any]:
    log(f"self-join N={n:,}")
    values, pa, pb, pdist = selfjoin_dataset(n, seed)
    res: dict[str, Any] = {"n": n, "planted_pairs": int((pdist <= K).sum()), "decoy_pairs": int((pdist > K).sum())}
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        a, b, d = self_join(values, K)
        times.append(time.perf_counter() - t0)
    res["neardup_s"] = float(np.median(times))
    res["neardup_s_all"] = times
    res["neardup_pairs"] = int(a.shape[0])
    # exactness: planted found, decoys not, distances right, brute force on a sample of rows
    got = set(zip(a.tolist(), b.tolist()))
    want = {(min(x, y), max(x, y)) for x, y, dd in zip(pa.tolist(), pb.tolist(), pdist.tolist()) if dd <= K}
    decoy = {(min(x, y), max(x, y)) for x, y, dd in zip(pa.tolist(), pb.tolist(), pdist.tolist()) if dd > K}
    ex: dict[str, Any] = {"planted_found": len(want & got) / len(want), "decoys_reported": len(decoy & got),
                          "distances_correct": bool(np.all(np.bitwise_count(values[a] ^ values[b]) == d)
                                                    and np.all(d <= K)),
                          "ordered_a_lt_b": bool(np.all(a < b)), "repeats": len(got) != a.shape[0]}
    rng = np.random.default_rng([seed, 18, n])
    sample = np.unique(np.concatenate([pa[:100], pb[100:200], rng.integers(0, n, 100)]))
    brute = NumpyBrute(values)
    partners: dict[int, set[tuple[int, int]]] = {int(i): set() for i in sample.tolist()}
    sset = set(partners)
    for x, y, dd in zip(a.tolist(), b.tolist(), d.tolist()):
        if x in sset:
            partners[x].add((y, dd))
        if y in sset:
            partners[y].add((x, dd))
    truth, found = [], []
    for i in sample.tolist():
        p, dd = brute.search(values[i], K)
        truth.append({(int(x), int(y)) for x, y in zip(p.tolist(), dd.tolist()) if x != i})
        found.append(partners[i])
    ex.update({f"sample_{k}": v for k, v in compare(found, truth).items()})
    ex["exact"] = bool(ex["planted_found"] == 1.0 and ex["decoys_reported"] == 0 and ex["distances_correct"]
                       and ex["ordered_a_lt_b"] and not ex["repeats"] and ex["sample_exact"])
    res["exactness"] = ex
    distinct = d > 0
    va, vb = values[a[distinct]], values[b[distinct]]
    vpairs = np.unique(np.stack([np.minimum(va, vb), np.maximum(va, vb)], axis=1), axis=0)
    res["neardup_distinct_value_pairs"] = int(vpairs.shape[0])
    log(f"self-join N={n:,}: neardup {res['neardup_s']:.3f} s, {a.shape[0]} pairs, exact={ex['exact']}")

    res["pybind"] = pybind_selfjoin(pybind_python, values, vpairs, tmp, repeats)
    return res


# -- report ---------------------------------------------------------------------------------
def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "n/a"
    return f"{a / b:.2f}"


def breakdown_line(bd: dict[str, Any] | None) -> str:
    if not bd or "skipped" in bd:
        return f"Latency breakdown: {bd.get('skipped') if bd else 'not measured'}."
    return ("Where one query's time goes (one more pass each, p50 / p99 µs): the compiled per-level calls "
            f"(`_probe`, preallocated buffer) {bd['kernel']['p50_us']:.1f} / {bd['kernel']['p99_us']:.1f}; "
            f"`search` {bd['search']['p50_us']:.1f} / {bd['search']['p99_us']:.1f}; the batch path `search_arrays` "
            f"on a 1-element array {bd['search_arrays']['p50_us']:.1f} / {bd['search_arrays']['p99_us']:.1f}.")


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    L = ["## Hamming index (k = 3, 64-bit fingerprints)", "",
         "Produced by `benchmarks/index.py` (the JSON summary is the last stdout line of each run):", ""]
    for run in results.get("runs", [{"command": results["command"], "date": results["date"], "stages": [],
                                     "loadavg_start": m["loadavg_start"], "loadavg_end": results["loadavg_end"]}]):
        code = f", src at {run['code']}" if run.get("code") else ""
        L.append(f"* `{run['command']}` on {run['date']}{code}: {', '.join(run['stages']) or '-'} (load average "
                 f"{'/'.join(f'{x:.1f}' for x in run['loadavg_start'])} at start, "
                 f"{'/'.join(f'{x:.1f}' for x in run['loadavg_end'])} at end)")
    L += ["",
         f"Machine: {m['cpu']}, {m['nproc']} cores, {m['ram_gib']} GiB RAM, Python {m['python']}; "
         + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
         + (f", simhash-pybind {results['selfjoin']['pybind'].get('version')}"
            if results.get("selfjoin", {}).get("pybind", {}).get("version") else "") + ".", "",
         "The 2 cores are shared with other "
         "work (test suites, other benchmarks), so absolute times are noisy (easily ±30 %, worse for "
         "p99); compare rows within one table, which ran in the same process minutes apart. "
         "Everything is single-threaded (numba kernels are serial, faiss is pinned to 1 OpenMP thread) except "
         "batch mode, where `batch_join` runs its blocks on as many threads as the process has CPUs (2 here).", "",
         "Data: uniform random 64-bit fingerprints; each query has planted neighbours at distance 0..3 "
         "(every query one at `i % 4`, even queries a second at 1..3) and every third query a decoy at "
         "distance 4..5 that must not be reported. Exact = recall 1.0 and no false positive against numpy "
         "brute force (`np.bitwise_count(stored ^ q) <= 3`) on the first queries (count in the heading); "
         "for neardup additionally: all planted neighbours of all queries found, no decoy, every reported "
         "distance recomputed, `search_arrays` (batch) = `search` (one by one) on every query. "
         "Single-query latency: wall clock per call (`perf_counter_ns`) and, next to it, the thread's CPU "
         "time (`thread_time_ns`, minus the clock's own cost), which leaves out the time the process was "
         f"descheduled; neardup and faiss: median over {results.get('passes', 1)} passes of 10,000 queries "
         "(per-pass p50/p99 in the JSON), brute force and SimhashIndex: one pass. Every timed pass runs with "
         "Python's cyclic garbage collector paused, as `timeit` does: the pass keeps its 10,000 results for the "
         "exactness check, and with the collector on, those retained lists make it walk the heap every few "
         "hundred queries, which puts it into p99 (a caller that does not keep results has no such cost). "
         "Bytes/fp (arrays) is "
         "`nbytes() / N`; RSS Δ is the resident-set growth across the build (freed heap trimmed before "
         "and after, glibc mmap threshold fixed at 128 KiB); peak extra is the high-water mark "
         "(`VmHWM`, reset before the build) minus the RSS before it.", ""]

    # targets
    tg = results["targets"]
    L += ["### Targets", "", "| target | measured | met |", "|---|---:|:--:|"]
    for row in tg:
        L.append(f"| {row['target']} | {row['measured']} | {row['met']} |")
    L.append("")

    # online tables
    for o in results.get("online", []):
        n = o["n"]
        L += [f"### Online index, N = {n:,}", "",
              f"{o['queries']:,} queries one by one ({o['planted']:,} planted neighbours at distance ≤ 3, "
              f"{o['decoys']:,} decoys at 4-5); brute-force truth on the first {o['truth_queries']:,} queries "
              f"(truth contains every planted neighbour and no decoy: {fmt(o['truth_contains_planted'])}).", "",
              "| method | build s | bytes/fp (arrays) | bytes/fp (RSS Δ) | peak extra bytes/fp in build | "
              "single p50 µs | single p99 µs | p50 / p99 µs CPU time | single q/s | batch q/s | "
              "p50 × neardup | exact |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--:|"]
        base = o["methods"].get("neardup PermutedIndex", {}).get("p50_us")
        for name, r in o["methods"].items():
            if "skipped" in r:
                L.append(f"| {name} | skipped: {r['skipped']} ||||||||||")
                continue
            q = (f" ({r['single_queries']:,} q)" if r.get("single_queries") and r["single_queries"] != o["queries"]
                 else "")
            L.append(f"| {name}{q} | {fmt(r['build_s'], 3 if r['build_s'] < 1 else 2)} | {fmt(r['bytes_per_fp'])} | "
                     f"{fmt(r['rss_bytes_per_fp'])} | {fmt(r['peak_extra_bytes_per_fp'])} | {fmt(r['p50_us'])} | "
                     f"{fmt(r['p99_us'])} | {fmt(r.get('cpu_p50_us'))} / {fmt(r.get('cpu_p99_us'))} | "
                     f"{fmt(r['qps'])} | {fmt(r['batch_qps'])} | {ratio(r['p50_us'], base)} | "
                     f"{fmt(r['exactness']['exact'])} |")
        nd = o["methods"].get("neardup PermutedIndex")
        if nd:
            ex, p = nd["exactness"], nd["persistence"]
            L += ["", f"neardup details: layout {len(nd['layout']['tables'])} tables of blocks "
                  f"{nd['layout']['blocks']}, levels {nd['levels']}; recall {ex['recall']:.3f} and "
                  f"{ex['false_positives']} false positives on {ex['queries']} brute-forced queries; planted found "
                  f"{ex['planted_found']:.3f}, decoys reported {ex['decoys_reported']}, batch = single "
                  f"{fmt(ex['batch_equals_single'])}, distances correct {fmt(ex['all_reported_distances_correct'])}; "
                  f"stored values occurring more than once: {o['duplicate_values']:,}; repeated (query, id) rows "
                  f"from `search_arrays`: {ex['batch_repeated_rows']:,}"
                  + (" (**a bug: its docstring promises unique rows; see the notes**)"
                     if ex['batch_repeated_rows'] else "")
                  + ".",
                  "", breakdown_line(nd.get("breakdown")),
                  "", f"Persistence: save {p['save_s']:.2f} s ({p['disk_bytes_per_fp']:.1f} bytes/fp on disk), "
                  f"open (mmap) {p['open_s'] * 1e3:.1f} ms, first query after open {p['first_query_us']:.0f} µs "
                  f"(right: {fmt(p['first_query_ok'])}; numba's read-only-array specialisations were loaded by "
                  f"the warm-up), then p50 {p['reopened_p50_us']:.1f} µs / p99 "
                  f"{p['reopened_p99_us']:.1f} µs (CPU time {p['reopened_cpu_p50_us']:.1f} / "
                  f"{p['reopened_cpu_p99_us']:.1f}; "
                  f"files just written, so in the page cache); same results as "
                  f"before saving on every query: {fmt(p['reopened_results_equal'])}."
                  + cold_line(p.get("cold")), ""]

    dup = results.get("duplicates")
    if dup:
        L += ["### Duplicate fingerprints", "",
              "One fingerprint stored under m ids among 10^5 random ones (exact duplicates are common in web "
              "crawls); one query at distance 1 from it. Expected: m + 1 rows (the value itself is one of the "
              "random ones too), in time linear in m.", "",
              "| m copies | expected rows | `search_arrays` rows | unique ids | `search_arrays` ms | "
              "`search` results | `search` ms |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in dup["rows"]:
            L.append(f"| {r['copies']:,} | {r['expected']:,} | {r['search_arrays_rows']:,} | "
                     f"{r['search_arrays_unique']:,} | "
                     f"{r['search_arrays_ms']:.2f} | {r['search_results']:,} | {r['search_ms']:.2f} |")
        L.append("")

    ins = results.get("inserts")
    if ins:
        ex = ins["exactness"]
        L += ["### Inserts (online path)", "",
              f"`add(id, value)` one at a time, {ins['inserts']:,} inserts into an index built with "
              f"{ins['base']:,} fingerprints (delta buffer 4096, levels merged when a newer level reaches 1/4 "
              "of the older one); then 10,000 queries one by one (half of them have their planted neighbour "
              "among the inserted fingerprints).", "",
              "| inserts | total s | µs/insert (amortised) | slowest insert ms | levels after | query p50 µs after | "
              "query p99 µs after | p50 / p99 µs CPU time | exact after |",
              "|---:|---:|---:|---:|---|---:|---:|---:|:--:|",
              f"| {ins['inserts']:,} | {ins['total_s']:.2f} | {ins['us_per_insert']:.1f} | "
              f"{ins['slowest_insert_ms']:.1f} | "
              f"{ins['levels']} + delta {ins['delta']} | {ins['after_p50_us']:.1f} | {ins['after_p99_us']:.1f} | "
              f"{ins['after_cpu_p50_us']:.1f} / {ins['after_cpu_p99_us']:.1f} | "
              f"{fmt(ex['exact'])} (recall {ex['recall']:.3f}, {ex['false_positives']} false +, planted "
              f"{ex['planted_found']:.3f}) |", ""]

    sj = results.get("selfjoin")
    if sj:
        ex, pb = sj["exactness"], sj.get("pybind", {})
        L += [f"### Self-join, N = {sj['n']:,}", "",
              f"All pairs within distance 3 among N fingerprints with {sj['planted_pairs']:,} planted pairs "
              f"(distance 0..3) and {sj['decoy_pairs']:,} decoy pairs (4..5); median of the repeats. "
              "simhash-pybind runs in its own venv in a subprocess (timed inside it); it returns distinct "
              "values, so the comparison is on distinct-value pairs (distance 1..3).", "",
              "| method | seconds | fingerprints/s | pairs | distinct-value pairs | same pairs as pybind | "
              "× neardup | exact |",
              "|---|---:|---:|---:|---:|:--:|---:|:--:|",
              f"| neardup self_join | {sj['neardup_s']:.3f} | {fmt(sj['n'] / sj['neardup_s'])} | "
              f"{sj['neardup_pairs']:,} | "
              f"{sj['neardup_distinct_value_pairs']:,} | {fmt(pb.get('same_pairs'))} | 1.00 | {fmt(ex['exact'])} |"]
        if "s" in pb:
            L.append(f"| simhash-pybind find_all(list, blocks=4) | {pb['s']:.3f} | {fmt(sj['n'] / pb['s'])} | n/a | "
                     f"{pb['pairs']:,} | yes | {pb['s'] / sj['neardup_s']:.2f} | n/a |")
            L.append(f"| simhash-pybind c_find_all(prebuilt set) | {pb['c_find_all_s']:.3f} | "
                     f"{fmt(sj['n'] / pb['c_find_all_s'])} | n/a | {pb['pairs']:,} | yes | "
                     f"{pb['c_find_all_s'] / sj['neardup_s']:.2f} | n/a |")
        else:
            L.append(f"| simhash-pybind | {pb.get('skipped', 'n/a')} |||||||")
        L += ["", f"neardup self-join exactness: planted found {ex['planted_found']:.3f}, "
              f"decoys {ex['decoys_reported']}, "
              f"distances correct {fmt(ex['distances_correct'])}, brute force on {ex['sample_queries']} rows: "
              f"recall {ex['sample_recall']:.3f}, {ex['sample_false_positives']} false +. Repeats: "
              f"{', '.join(f'{t:.3f}' for t in sj['neardup_s_all'])} s.", ""]

    bt = results.get("batch")
    if bt and "skipped" not in bt:
        ex = bt["exactness"]
        L += [f"### Batch mode (Manku): {bt['queries']:,} queries vs {bt['stored']:,} stored", "",
              f"Tables on the queries, stored set streamed once from a raw uint64 file under /tmp "
              f"(`np.memmap`, {bt['chunks']} chunks of {bt['chunk']:,}; generated and written in "
              f"{fmt(bt['generate_s'])} s, not counted; read through the page cache: the join is CPU-bound, "
              "reading the file takes seconds)"
              + (f"; the join used {bt['cpu_s']:.0f} s of CPU time in {bt['total_s']:.0f} s of wall clock on "
                 f"{bt.get('threads', 1)} thread(s)" if bt.get("cpu_s") else "")
              + f". {bt['planted']:,} planted neighbours (distance 0..3) and {bt['decoys']:,} decoys (4..5).", "",
              "| total s | stored fingerprints/s | query×stored pairs/s | slowest chunk s | matches | planted found | "
              "decoys reported | distances correct | brute-force check | exact |",
              "|---:|---:|---:|---:|---:|---:|---:|:--:|---|:--:|",
              f"| {bt['total_s']:.1f} | {fmt(bt['stored_per_s'])} | {bt['pairs_per_s']:.3g} | "
              f"{fmt(bt['slowest_chunk_s'], 2)} | "
              f"{bt['matches']:,} | {ex['planted_found']:.3f} | {ex['decoys_reported']} | "
              f"{fmt(ex['distances_correct'])} | "
              + (f"{ex['brute_force_queries']} queries over all stored ({ex['brute_force_pairs']} pairs, "
                 f"{ex['brute_force_s']:.0f} s): equal {fmt(ex['brute_force_equal'])}"
                 if "brute_force_equal" in ex else "n/a")
              + f" | {fmt(ex['exact'])} |", "",
              f"Matches not planted (random pairs within distance 3, expected ≈ "
              f"{bt['queries'] * bt['stored'] * 43745 / 2**64:.1f}): {ex['unplanted_matches']}.", ""]
    elif bt:
        L += ["### Batch mode (Manku)", "", f"skipped: {bt['skipped']}", ""]

    # peers
    L += ["### Against the peer figures", "",
          "Peer numbers are from `shared/reference/peer-benchmarks.md` §2 (measured earlier on the same machine "
          "class, medians of 3 fresh processes); the same-run columns are the peers measured above in this run. "
          "Ratio = peer / neardup (> 1: neardup is faster or smaller).", "",
          "| N | metric | neardup (this run) | peer (reference) | ratio | same peer, this run | ratio |",
          "|---:|---|---:|---:|---:|---:|---:|"]
    for o in results.get("online", []):
        n = o["n"]
        nd = o["methods"].get("neardup PermutedIndex")
        if not nd:
            continue
        same = o["methods"]
        for peer, label, run_name in (("numpy4x16", "numpy permuted tables 4x16", None),
                                      ("faiss", "faiss MultiHash", "faiss IndexBinaryMultiHash(64,4,16)"),
                                      ("simhashindex", "simhash.SimhashIndex", "simhash.SimhashIndex (k=3)"),
                                      ("brute", "numpy brute force", "numpy brute force (chunked)")):
            ref = PEERS[peer].get(n)
            run = same.get(run_name) if run_name else None
            if run is not None and "skipped" in run:
                run = None
            if not ref and not run:
                continue
            ref = ref or {}
            run = run or {}
            for metric, key in (("p50 µs", "p50_us"), ("p99 µs", "p99_us")):
                L.append(f"| {n:,} | {label} {metric} | {fmt(nd[key])} | {fmt(ref.get(key[:3]))} | "
                         f"{ratio(ref.get(key[:3]), nd[key])} | {fmt(run.get(key))} | {ratio(run.get(key), nd[key])} |")
            if "batch" in ref or run.get("batch_qps"):
                L.append(f"| {n:,} | {label} batch q/s | {fmt(nd['batch_qps'])} | {fmt(ref.get('batch'))} | "
                         f"{ratio(nd['batch_qps'], ref.get('batch'))} | {fmt(run.get('batch_qps'))} | "
                         f"{ratio(nd['batch_qps'], run.get('batch_qps'))} |")
            if "bytes" in ref or run.get("rss_bytes_per_fp"):
                L.append(f"| {n:,} | {label} bytes/fp | {fmt(nd['bytes_per_fp'])} | {fmt(ref.get('bytes'))} | "
                         f"{ratio(ref.get('bytes'), nd['bytes_per_fp'])} | {fmt(run.get('rss_bytes_per_fp'))} (RSS) | "
                         f"{ratio(run.get('rss_bytes_per_fp'), nd['rss_bytes_per_fp'])} (RSS vs RSS) |")
    if sj:
        ref = PEERS["selfjoin"].get(sj["n"], {})
        pb = sj.get("pybind", {})
        L.append(f"| {sj['n']:,} | self-join s vs simhash-pybind | {sj['neardup_s']:.3f} | "
                 f"{fmt(ref.get('pybind'), 2)} | "
                 f"{ratio(ref.get('pybind'), sj['neardup_s'])} | {fmt(pb.get('s'), 3)} | "
                 f"{ratio(pb.get('s'), sj['neardup_s'])} |")
        L.append(f"| {sj['n']:,} | self-join s vs numpy tables 4x16 | {sj['neardup_s']:.3f} | "
                 f"{fmt(ref.get('numpy4x16'), 2)} | "
                 f"{ratio(ref.get('numpy4x16'), sj['neardup_s'])} | n/a | n/a |")
    L.append("")
    L += notes(results)
    return "\n".join(L)


def cold_line(c: dict[str, Any] | None) -> str:
    if not c or "skipped" in c:
        return ""
    return (f" Not in RAM: with the files dropped from the page cache (`posix_fadvise(DONTNEED)`) and reopened, "
            f"the first {c['queries']:,} queries take p50 {c['p50_us']:,.0f} µs / p99 {c['p99_us']:,.0f} µs (mean "
            f"{c['mean_us']:,.0f} µs; {c['major_faults_per_query']:.1f} page reads from disk per query); same "
            f"results: {fmt(c['results_equal'])}.")


def notes(results: dict[str, Any]) -> list[str]:
    """Findings derived from the numbers above (bugs, missed targets and why)."""
    out: list[str] = []
    by_n = {o["n"]: o for o in results.get("online", [])}
    reps = {n: o["methods"]["neardup PermutedIndex"]["exactness"]["batch_repeated_rows"]
            for n, o in by_n.items() if "neardup PermutedIndex" in o["methods"]}
    dup = results.get("duplicates")
    if (dup and not dup["ok"]) or any(reps.values()):
        worst = max(dup["rows"], key=lambda r: r["copies"]) if dup else None
        out.append("* **Regression: duplicate fingerprints come out more than once.** A value stored m times sits "
                   "m times in a bucket; `_index_kernels.probe_one` must emit its ids once (it skips an entry "
                   "equal to the previous one) or a query costs m² rows"
                   + (f" (repeated `search_arrays` rows above: "
                      f"{', '.join(f'{v} at N = {n:,}' for n, v in reps.items() if v)})" if any(reps.values()) else "")
                   + (f"; m = {worst['copies']:,} copies gave {worst['search_arrays_rows']:,} rows and "
                      f"{worst['search_ms']:.0f} ms for one query" if worst else "") + ".")
    bt = results.get("batch")
    if bt and "skipped" not in bt:
        per = bt["total_s"] / bt["stored"] * 1e9
        met = bt["total_s"] <= 600 or bt["stored"] < 10**9
        out.append(f"* Batch mode costs {per:.0f} ns of wall clock per streamed fingerprint "
                   f"({bt.get('cpu_s', 0) / bt['stored'] * 1e9:.0f} ns of CPU, {bt.get('threads', '?')} threads) "
                   + ("(target met). " if met else f"(**target missed**: {bt['total_s']:.0f} s > 600 s). ")
                   + "`batch_join` builds the 4 tables on the distinct query values and joins the stored set "
                   "block by block (2^20 fingerprints): per table, permute the block, counting-sort it on the "
                   "tables' 16 bucket bits, then walk both sides bucket by bucket, so the query bucket "
                   f"(~{bt['queries'] / 2**16:,.0f} entries with {bt['queries']:,} queries) stays in L1 while the "
                   "stored bucket streams past; blocks run on threads (the compiled join releases the GIL). "
                   "The first version probed the query tables at a random place per stored fingerprint and "
                   "table (a cache miss each) and took 4,506 s for this run (the 2026-11-29 section of this "
                   "file, in git history).")
    ins = results.get("inserts")
    if ins and ins["base"] in by_n and "neardup PermutedIndex" in by_n[ins["base"]]["methods"]:
        nd = by_n[ins["base"]]["methods"]["neardup PermutedIndex"]
        opt = (f" `optimize()` (one merge, {ins['optimize_s']:.2f} s) brings it to {ins['optimized_p50_us']:.1f} µs "
               f"(p99 {ins['optimized_p99_us']:.1f})." if "optimize_s" in ins else "")
        out.append(f"* After {ins['inserts']:,} inserts the index has levels {ins['levels']} plus a delta of "
                   f"{ins['delta']:,}; query p50 goes from {nd['p50_us']:.1f} µs (one level, in the online table) to "
                   f"{ins['after_p50_us']:.1f} µs.{opt} Each level is one compiled call (about 2 µs of dispatch) "
                   "plus its bucket scans, and the delta is a brute-force scan of up to 4,096 values.")
    sizes = [(n, o["methods"]["neardup PermutedIndex"]) for n, o in sorted(by_n.items())
             if "neardup PermutedIndex" in o["methods"]]
    if sizes:
        out.append("* Bytes per fingerprint: 4 tables x 8 bytes (one of them is the fingerprints themselves, "
                   "sorted) + 4 bytes of id (ids are stored as uint32 when every id of a level is below 2^32, "
                   "as store row ids are, else int64) + the bucket directories, 4 x (2^d + 1) uint32 offsets: "
                   + ", ".join(f"{o['bytes_per_fp'] - 36:.2f} B/fp of directory at N = {n:,}" for n, o in sizes)
                   + ". So 28 bytes plus the directories beyond the fingerprint; with int64 ids it would be 32 plus "
                   "the directories.")
    bds = [(n, nd["breakdown"]) for n, nd in sizes if nd.get("breakdown") and "skipped" not in nd["breakdown"]]
    if bds:
        out.append("* Where single-query time goes (one extra pass each; p50 / p99 µs): "
                   + "; ".join(f"N = {n:,}: the compiled calls alone (`_probe`, preallocated buffer) "
                               f"{b['kernel']['p50_us']:.1f} / {b['kernel']['p99_us']:.1f}, `search` "
                               f"{b['search']['p50_us']:.1f} / {b['search']['p99_us']:.1f}, the batch path "
                               f"`search_arrays` on one query {b['search_arrays']['p50_us']:.1f} / "
                               f"{b['search_arrays']['p99_us']:.1f}" for n, b in bds)
                   + ". `search` calls one compiled function per level with the query as a plain int and a "
                   "result buffer (no result arrays to box, no `numpy.uint64` argument to type); what remains "
                   "is the 4 bucket scans ("
                   + ", ".join(f"~{4 * n / 2**16:,.0f} entries in all at N = {n:,}" for n, _ in bds)
                   + "), a few cache misses, and numba's argument dispatch.")
    if sizes:
        out.append("* Batch vs one by one: `search_arrays` on 10,000 queries costs "
                   + ", ".join(f"{1e6 / nd['batch_qps']:.1f} µs per query at N = {n:,} "
                               f"({nd['p50_us'] * nd['batch_qps'] / 1e6:.1f}x "
                               "below the single-query p50)" for n, nd in sizes)
                   + ". Wall-clock and CPU-time p99 columns that agree mean the tail is not the process being "
                   "descheduled; where they differ "
                   "(the peers' rows in particular), the machine's other work is in the wall-clock figure.")
    if out:
        out = ["### Findings", ""] + out + [""]
    return out


def stages(results: dict[str, Any]) -> list[str]:
    out = [f"online N={o['n']:,}" for o in results.get("online", [])]
    return out + [k for k in ("duplicates", "inserts", "selfjoin", "batch") if results.get(k)]


def merge(results: dict[str, Any], old: dict[str, Any]) -> None:
    """Take from an earlier run's results the stages this run did not do."""
    have = {o["n"] for o in results["online"]}
    taken = [o for o in old.get("online", []) if o["n"] not in have]
    results["online"] = sorted(results["online"] + taken, key=lambda o: o["n"])
    took = [f"online N={o['n']:,}" for o in taken]
    for k in ("duplicates", "inserts", "selfjoin", "batch"):
        if not results.get(k) and old.get(k):
            results[k] = old[k]
            took.append(k)
    if took:
        for run in old.get("runs", []):
            kept = [s for s in run.get("stages", []) if s in took]
            if kept:
                results["runs"].append({**run, "stages": kept})


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    by_n = {o["n"]: o["methods"].get("neardup PermutedIndex") for o in results.get("online", [])}
    for n, key in ((10**7, "p99_1e7_us"), (10**8, "p99_1e8_us")):
        nd = by_n.get(n)
        rows.append({"target": f"single-query p99 ≤ {TARGETS[key]:.0f} µs at N = {n:,}",
                     "measured": f"{nd['p99_us']:.1f} µs (p50 {nd['p50_us']:.1f})" if nd else "not run",
                     "met": fmt(nd["p99_us"] <= TARGETS[key]) if nd else "n/a", "key": key,
                     "value": nd["p99_us"] if nd else None})
    extra = {n: nd["bytes_per_fp"] - 8 for n, nd in by_n.items() if nd}
    big = max(extra) if extra else None
    rows.append({"target": "≤ 32 bytes per fingerprint beyond the 8-byte fingerprint",
                 "measured": ", ".join(f"{v:.1f} at {n:,} (RSS Δ {by_n[n]['rss_bytes_per_fp'] - 8:.1f})"
                                       for n, v in sorted(extra.items())) or "not run",
                 "met": (fmt(extra[big] <= TARGETS["extra_bytes_per_fp"])
                         + (" at the largest N" if len(extra) > 1 else "")
                         + (f" (over by {extra[big] - 32:.2f} B: 3 more tables + ids are exactly 32 B, the bucket "
                            "directories add the rest)" if 32 < extra[big] <= 32.5 else ""))
                 if big else "n/a", "key": "extra_bytes_per_fp", "value": extra.get(big) if big else None})
    sj: Any = results.get("selfjoin")
    ok = sj and sj["n"] == 10**6
    rows.append({"target": "self-join of 10^6 ≤ 1.0 s", "measured": f"{sj['neardup_s']:.3f} s" if ok else "not run",
                 "met": fmt(sj["neardup_s"] <= 1.0) if ok else "n/a", "key": "selfjoin_1e6_s",
                 "value": sj["neardup_s"] if ok else None})
    bt: Any = results.get("batch")
    ok = bt and "skipped" not in bt and bt["stored"] >= 10**9 and bt["queries"] >= 10**6
    rows.append({"target": "10^6 queries vs 10^9 stored ≤ 10 minutes",
                 "measured": f"{bt['total_s']:.0f} s" if ok else "not run",
                 "met": fmt(bt["total_s"] <= 600) if ok else "n/a", "key": "batch_1e6_vs_1e9_s",
                 "value": bt["total_s"] if ok else None})
    return rows


def summary(results: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {"benchmark": "index", "k": K, "online": {}}
    for o in results.get("online", []):
        nd = o["methods"].get("neardup PermutedIndex", {})
        s["online"][str(o["n"])] = {
            "build_s": round(nd["build_s"], 3), "bytes_per_fp": round(nd["bytes_per_fp"], 2),
            "rss_bytes_per_fp": round(nd["rss_bytes_per_fp"], 2), "p50_us": round(nd["p50_us"], 2),
            "p99_us": round(nd["p99_us"], 2), "batch_qps": round(nd["batch_qps"]), "exact": nd["exactness"]["exact"],
            "peers_p50_us": {k: round(v["p50_us"], 2) for k, v in o["methods"].items()
                             if "p50_us" in v and k != "neardup PermutedIndex"},
            "peers_exact": {k: v["exactness"]["exact"] for k, v in o["methods"].items()
                            if "exactness" in v and k != "neardup PermutedIndex"}}
    if results.get("inserts"):
        i = results["inserts"]
        s["inserts"] = {"us_per_insert": round(i["us_per_insert"], 2), "after_p50_us": round(i["after_p50_us"], 2),
                        "after_p99_us": round(i["after_p99_us"], 2), "exact": i["exactness"]["exact"]}
    if results.get("selfjoin"):
        sj = results["selfjoin"]
        s["selfjoin"] = {"n": sj["n"], "neardup_s": round(sj["neardup_s"], 3), "exact": sj["exactness"]["exact"],
                         "pybind_s": round(sj["pybind"]["s"], 3) if "s" in sj.get("pybind", {}) else None,
                         "same_pairs_as_pybind": sj.get("pybind", {}).get("same_pairs")}
    if results.get("batch"):
        b = results["batch"]
        s["batch"] = ({"skipped": b["skipped"]} if "skipped" in b else
                      {"stored": b["stored"], "queries": b["queries"], "total_s": round(b["total_s"], 1),
                       "stored_per_s": round(b["stored_per_s"]), "exact": b["exactness"]["exact"]})
    s["targets"] = {r["key"]: {"value": r["value"], "met": r["met"]} for r in results["targets"]}
    s["all_exact"] = all(v.get("exact", True) for v in s["online"].values()) and all(
        s.get(x, {}).get("exact", True) for x in ("inserts", "selfjoin", "batch"))
    return s


def write_report(doc: Path, results: dict[str, Any]) -> None:
    """The index section of ``doc``: this report, then the blocks the other index harnesses
    wrote there (kept)."""
    kept = kept_blocks(doc)
    body = render(results).rstrip() + ("\n\n" + kept if kept else "")
    replace_section(doc, DOC_START, DOC_END, f"{DOC_START}\n{body}\n{DOC_END}")
    log(f"wrote the index section of {doc}")


def main(argv: list[str] | None = None) -> int:
    fixed_mmap_threshold(argv)
    ap = harness_parser(__doc__)
    query_options(ap, "10^6; --quick 10^5", "1,000 up to N=10^6, else 200")
    ap.add_argument("--inserts", type=float, default=None, help="one-by-one inserts (default 10^5; 0 to skip)")
    ap.add_argument("--inserts-base", type=float, default=None, help="index size before the inserts (default 10^6)")
    ap.add_argument("--no-online", action="store_true", help="skip the online index sizes")
    ap.add_argument("--no-duplicates", action="store_true", help="skip the duplicate-fingerprint check")
    ap.add_argument("--no-simhashindex", action="store_true")
    ap.add_argument("--simhashindex-max", type=float, default=1e6)
    ap.add_argument("--pybind-python", default=None,
                    help="python of a venv with simhash-pybind (default /tmp/pybind-venv/bin/python if present)")
    batch_options(ap, "e.g. 1e9; the batch stage at k = 3", "stages")
    run_options(ap, "only rewrite the doc section from a results JSON (--json-out) and print its summary")
    args, earlier = parse(ap, argv)
    if earlier is not None:
        results: dict[str, Any] = earlier
        if "radius" in results or "batches" in results:
            raise SystemExit(f"{args.render}: the results of a radius sweep or of batch mode at other k; "
                             "benchmarks/index_radius.py --render or benchmarks/index_batch.py --render "
                             "rewrites their block")
        results["targets"] = targets(results)
        doc = doc_path(args, render=True)
        if doc:
            write_report(doc, results)
        print(json.dumps(summary(results)))
        return 0

    ns = [] if args.no_online else [int(x) for x in (args.n or ([10**5] if args.quick else [10**6]))]
    if args.quick:
        args.selfjoin = args.selfjoin if args.selfjoin is not None else 1e5
        quick_batch(args)
        args.inserts = args.inserts if args.inserts is not None else 1e4
        args.inserts_base = args.inserts_base if args.inserts_base is not None else 1e5
    inserts = int(args.inserts if args.inserts is not None else 1e5)
    inserts_base = int(args.inserts_base if args.inserts_base is not None else 1e6)
    args.simhashindex_max = int(args.simhashindex_max)
    pybind = args.pybind_python
    if pybind is None and Path("/tmp/pybind-venv/bin/python").exists():
        pybind = "/tmp/pybind-venv/bin/python"
    doc = doc_path(args)
    results = {"command": command_line("index.py", argv), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
               "machine": machine(), "online": []}
    log(f"machine: {results['machine']['cpu']}, load {results['machine']['loadavg_start']}")
    t_all = time.perf_counter()
    warm_up()
    with tempfile.TemporaryDirectory(prefix="neardup-bench-", dir="/tmp") as td:
        tmp = Path(td)
        def checkpoint() -> None:  # partial results, in case a later (long) stage fails
            if args.json_out:
                args.json_out.with_suffix(".partial.json").write_text(json.dumps(results, indent=1, default=str))

        for n in ns:
            nt = args.truth_queries or (min(1000, args.queries) if n <= 10**6 else min(200, args.queries))
            results["online"].append(bench_online(n, args.queries, nt, args.seed, tmp, args))
            gc.collect()
            checkpoint()
        if not args.no_duplicates:
            results["duplicates"] = bench_duplicates(args.seed)
            checkpoint()
        if inserts:
            results["inserts"] = bench_inserts(inserts_base, inserts, args.queries, args.seed, args.passes)
            gc.collect()
            checkpoint()
        if args.selfjoin:
            results["selfjoin"] = bench_selfjoin(int(args.selfjoin), args.seed, pybind, tmp, args.selfjoin_repeats)
            gc.collect()
            checkpoint()
        if args.batch_stored:
            s, q, c = int(args.batch_stored), int(args.batch_queries), int(args.batch_chunk)
            path = args.batch_file or Path(f"/tmp/neardup-bench-stored-{s}-{args.seed}.u64")
            results["batch"] = bench_batch(s, q, c, args.seed, path, args.keep_stored, args.batch_verify)[0]
    results["loadavg_end"] = os.getloadavg()
    results["passes"] = args.passes
    results["wall_s"] = time.perf_counter() - t_all
    results["runs"] = [{"command": results["command"], "date": results["date"],
                        "loadavg_start": results["machine"]["loadavg_start"], "loadavg_end": results["loadavg_end"],
                        "wall_s": results["wall_s"], "stages": stages(results), "code": code_version()}]
    for mp in args.merge:
        merge(results, json.loads(mp.read_text()))
    results["targets"] = targets(results)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1, default=str))
    if doc:
        write_report(doc, results)
    else:
        print(render(results), file=sys.stderr)
    log(f"done in {results['wall_s']:.1f} s")
    print(json.dumps(summary(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

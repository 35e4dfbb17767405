"""Batch mode of neardup's Hamming index at other k than 3: Manku's batch join
(:func:`neardup.index.joins.batch_join`) of Q queries against S stored 64-bit fingerprints.

At each ``--batch-k`` (repeatable; one stored file for all): ``batch_join`` with the layout
``choose_batch_layout`` picks, the stored set streamed from a raw uint64 file under ``/tmp``
(``np.memmap``), planted neighbours at every distance 0..max k (all must be found) and decoys
beyond, numpy brute force over the whole file for ``--batch-verify`` queries, brute-force and
faiss projections. ``benchmarks/index.py --batch-stored S`` runs the same join at k = 3
inside its report (:func:`bench_batch`).

Usage::

    python benchmarks/index_batch.py --batch-k 7 --batch-stored 1e9 --batch-queries 1e6 --json-out /tmp/b7.json
    python benchmarks/index_batch.py --batch-k 12 --batch-stored 1e8 --batch-queries 1e6 --merge /tmp/b7.json

Progress goes to stderr, the results into their block of the ``index`` section of
``docs/benchmarks.md`` (between ``<!-- index-batch:start -->`` and ``<!-- index-batch:end -->``,
before the radius sweep's; ``--no-doc`` to skip; ``--quick`` skips it unless ``--doc`` is given;
``--merge`` keeps the rows of earlier ``--json-out`` files, e.g. a 10^8 run at k = 12 beside
10^9 at 7) and a JSON summary is the last line of stdout.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # single-threaded peers (faiss)

import numpy as np
from _common import table
from _index_common import (
    BATCH_END,
    BATCH_START,
    RADIUS_START,
    K,
    batch_options,
    code_version,
    command_line,
    distinct_positions,
    doc_path,
    fixed_mmap_threshold,
    flip_masks,
    fmt,
    harness_parser,
    log,
    machine,
    parse,
    put_block,
    quick_batch,
    random_u64,
    run_options,
    warm_up,
)
from _index_peers import batch_faiss

from neardup.index.joins import batch_join


def random_pairs_within(k: int) -> float:
    """Probability that two uniform random 64-bit values are within distance k."""
    import math
    return sum(math.comb(64, i) for i in range(k + 1)) / 2.0**64


def bench_batch(stored_n: int, nq: int, chunk: int, seed: int, path: Path, keep: bool, verify_queries: int,
                ks: list[int] | None = None, faiss_seconds: float = 0.0) -> list[dict[str, Any]]:
    """Q queries joined with S stored fingerprints streamed from a raw uint64 file, once per
    k in ``ks`` (one file for all): per k, ``batch_join`` with the layout
    ``choose_batch_layout`` picks; planted neighbours at every distance 0..max(ks) and decoys
    at max(ks) + 1..+2 (for a smaller k, the planted ones beyond k are decoys too); numpy
    brute force of ``verify_queries`` queries over the whole file (distances up to max(ks),
    computed once); with ``faiss_seconds``, faiss ``IndexBinaryMultiHash`` built on the queries
    and searched with a sample of the stored values, projected to all S."""
    from neardup.index.layout import choose_batch_layout
    ks = sorted(set(ks or [K]))
    kmax = max(ks)
    rng = np.random.default_rng([seed, 33, stored_n, nq])
    queries = random_u64(rng, nq)
    n_chunks = -(-stored_n // chunk)
    planted_n = min(nq // 10, 10_000)
    decoy_n = planted_n // 5
    pq = rng.choice(nq, planted_n + decoy_n, replace=False)
    ppos = distinct_positions(rng, stored_n, planted_n + decoy_n)
    pdist = np.concatenate([np.arange(planted_n) % (kmax + 1), kmax + 1 + np.arange(decoy_n) % 2])
    pval = queries[pq] ^ flip_masks(rng, pdist)
    base: dict[str, Any] = {"stored": stored_n, "queries": nq, "chunk": chunk, "chunks": n_chunks,
                            "planted": planted_n, "decoys": decoy_n, "kmax": kmax, "file": str(path)}
    meta = path.with_suffix(".json")
    key = {"stored": stored_n, "queries": nq, "chunk": chunk, "seed": seed, "kmax": kmax, "version": 2}
    if path.exists() and meta.exists() and json.loads(meta.read_text()) == key and path.stat().st_size == 8 * stored_n:
        base["generate_s"] = None
        log(f"batch: reusing {path}")
    else:
        if 8 * stored_n + 2**30 > shutil.disk_usage(path.parent).free:
            return [{"skipped": f"not enough disk under {path.parent} for {8 * stored_n / 2**30:.1f} GiB", "k": k,
                     "stored": stored_n, "queries": nq} for k in ks]
        log(f"batch: writing {stored_n:,} fingerprints to {path}")
        meta.unlink(missing_ok=True)
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            for c in range(n_chunks):
                lo, hi = c * chunk, min(stored_n, (c + 1) * chunk)
                block = random_u64(np.random.default_rng([seed, 34, c]), hi - lo)
                sel = (ppos >= lo) & (ppos < hi)
                block[ppos[sel] - lo] = pval[sel]
                block.tofile(f)
                del block
        base["generate_s"] = time.perf_counter() - t0
        meta.write_text(json.dumps(key))
        log(f"batch: written in {base['generate_s']:.1f} s")
    mm = np.memmap(path, dtype=np.uint64, mode="r")

    def chunks(mm: np.memmap = mm) -> Any:
        for c in range(n_chunks):
            yield mm[c * chunk:min(stored_n, (c + 1) * chunk)]

    # independent brute force over the whole stored file for a few queries (planted and random)
    truth: list[tuple[np.ndarray, np.ndarray]] = []
    sample = np.empty(0, dtype=np.int64)
    brute_s: Any = None  # seconds, set with the truth
    if verify_queries:
        log(f"batch: numpy brute force of {verify_queries} queries over the stored file (k <= {kmax})")
        vr = np.random.default_rng([seed, 35])
        half = verify_queries // 2
        sample = np.concatenate([pq[:half], vr.choice(nq, verify_queries - half, replace=False)])
        found: list[list[np.ndarray]] = [[] for _ in sample]
        x = np.empty(chunk, dtype=np.uint64)
        cnt = np.empty(chunk, dtype=np.uint8)
        t1 = time.perf_counter()
        for c in range(n_chunks):
            lo, hi = c * chunk, min(stored_n, (c + 1) * chunk)
            block = np.asarray(mm[lo:hi])
            m = hi - lo
            for j, qv in enumerate(queries[sample]):
                np.bitwise_xor(block, qv, out=x[:m])
                np.bitwise_count(x[:m], out=cnt[:m])
                hit: np.ndarray = np.flatnonzero(cnt[:m] <= kmax)
                found[j].append(np.stack([hit + lo, cnt[hit].astype(np.int64)]))
        brute_s = time.perf_counter() - t1
        truth = [tuple(np.concatenate(f, axis=1)) for f in found]
        log(f"batch: brute force {brute_s:.1f} s")

    out = []
    uniq_n = int(np.unique(queries).shape[0])
    for k in ks:
        layout = choose_batch_layout(uniq_n, k)
        res: dict[str, Any] = {**base, "k": k, "layout": layout.describe(), "tables": len(layout.tables),
                               "model_ns_per_stored": layout.batch_cost(uniq_n),
                               "loadavg_start": os.getloadavg()}
        log(f"batch k={k}: {nq:,} queries x {stored_n:,} stored, {n_chunks} chunks, layout {layout.describe()} "
            f"(model {res['model_ns_per_stored']:,.0f} ns CPU per stored value)")
        parts_q, parts_s, parts_d = [], [], []
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        per_chunk = []
        tc = t0
        for qpos, spos, dist in batch_join(queries, chunks(), k, layout):
            parts_q.append(qpos)
            parts_s.append(spos)
            parts_d.append(dist)
            now = time.perf_counter()
            per_chunk.append(now - tc)
            tc = now
            if len(per_chunk) % 5 == 0 or len(per_chunk) == 1:
                log(f"batch k={k}: {len(per_chunk)}/{n_chunks} chunks, {now - t0:.1f} s "
                    f"(load {os.getloadavg()[0]:.1f})")
        total = time.perf_counter() - t0
        res["cpu_s"] = time.process_time() - c0
        res["loadavg_end"] = os.getloadavg()
        res["threads"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        qpos, spos, dist = (np.concatenate(p) if p else np.empty(0, np.int64) for p in (parts_q, parts_s, parts_d))
        del parts_q, parts_s, parts_d
        res.update({"total_s": total, "stored_per_s": stored_n / total, "pairs_per_s": stored_n * nq / total,
                    "ns_per_stored": total / stored_n * 1e9, "cpu_ns_per_stored": res["cpu_s"] / stored_n * 1e9,
                    "projected_1e9_s": total * 10**9 / stored_n,
                    "slowest_chunk_s": max(per_chunk) if per_chunk else None, "matches": int(qpos.shape[0]),
                    "expected_random_matches": nq * stored_n * random_pairs_within(k)})
        # exactness, vectorised (at k = 12 random pairs within k number millions)
        keys = qpos.astype(np.int64) * stored_n + spos.astype(np.int64)
        ukeys = np.unique(keys)
        pkeys = pq.astype(np.int64) * stored_n + ppos.astype(np.int64)
        hit = np.isin(pkeys, ukeys)
        inside = pdist <= k
        ex: dict[str, Any] = {
            "planted_found": float(hit[inside].mean()), "decoys_reported": int(hit[~inside].sum()),
            "distances_correct": bool(np.all(np.bitwise_count(queries[qpos] ^ np.asarray(mm[spos])) == dist)
                                      and np.all(dist <= k)),
            "repeats": int(keys.shape[0] - ukeys.shape[0]),
            "unplanted_matches": int(ukeys.shape[0] - np.isin(ukeys, pkeys).sum())}
        del keys, ukeys
        if truth:
            equal = True
            pairs = 0
            for qv, (tpos, tdist) in zip(sample.tolist(), truth):
                want = np.sort(tpos[tdist <= k])
                sel = qpos == qv
                got = np.sort(spos[sel])
                pairs += int(want.shape[0])
                equal = equal and np.array_equal(got, want)
            ex.update({"brute_force_queries": int(sample.shape[0]), "brute_force_pairs": pairs,
                       "brute_force_s": brute_s, "brute_force_equal": bool(equal),
                       # the numpy scan's cost does not depend on k: all Q queries, projected
                       "brute_force_projected_s": brute_s / sample.shape[0] * nq})
            res["x_brute_force"] = ex["brute_force_projected_s"] / total
        ex["exact"] = bool(ex["planted_found"] == 1.0 and ex["decoys_reported"] == 0 and ex["distances_correct"]
                           and not ex["repeats"] and ex.get("brute_force_equal", True))
        res["exactness"] = ex
        log(f"batch k={k}: {total:.1f} s, {stored_n / total:,.0f} stored/s, {qpos.shape[0]:,} matches, "
            f"exact={ex['exact']}" + (f", {res['x_brute_force']:.0f}x faster than numpy brute force" if truth else ""))
        if faiss_seconds:
            res["faiss"] = batch_faiss(queries, mm, k, qpos, spos, faiss_seconds, seed)
            if "seconds_per_stored" in res["faiss"]:
                res["faiss"]["projected_s"] = res["faiss"]["seconds_per_stored"] * stored_n
                res["x_faiss"] = res["faiss"]["projected_s"] / total
        del qpos, spos, dist
        gc.collect()
        out.append(res)
    del mm
    if not keep:
        path.unlink(missing_ok=True)
        meta.unlink(missing_ok=True)
    return out


def render_batch(results: dict[str, Any]) -> str:
    """The --batch-k block of the index section."""
    L = [BATCH_START,
         f"### Batch mode at k = {', '.join(str(k) for k in sorted({b['k'] for b in results['batches']}))} "
         "(`--batch-k`)", "", "Produced by:", ""]
    for run in results["runs"]:
        m = run["machine"]
        L.append(f"* `{run['command']}` on {run['date']}, src at {run.get('code') or 'n/a'}: "
                 f"{', '.join(run['rows'])}; {m.get('cpu')}, {m.get('nproc')} cores, {m.get('ram_gib')} GiB RAM, "
                 f"Python {m.get('python')}; "
                 f"{', '.join(f'{p} {v}' for p, v in (m.get('versions') or {}).items() if v)}")
    L += ["", "Manku's batch mode (`batch_join`): tables on the distinct queries with the layout "
          "`choose_batch_layout(Q, k)` picks (its cost model, `Layout.batch_cost`, counts per stored value the "
          "permute-and-sort passes, the probed query buckets and the query entries compared; the model column is "
          "its estimate of CPU ns per stored value), the stored set streamed once from a raw uint64 file under "
          "/tmp (`np.memmap`, read through the page cache; generating it is not timed), blocks of 2^20 on 2 "
          "threads. The 2 cores are shared with other agents' work: the load average (1 minute) at the start "
          "and end of each row is in the table, and wall-clock seconds stretch with it; CPU ns per stored value "
          "is the steadier figure. Data: uniform random fingerprints; planted neighbours at every distance "
          "0..max k of the file and decoys at max k + 1..+2 (at a smaller k, planted ones beyond k count as "
          "decoys). Exact = every planted neighbour within k found, no decoy, no pair twice, every distance "
          "recomputed, and the same stored positions as numpy brute force over the whole file for the checked "
          "queries (half of them with a planted neighbour). Random pairs within k are real matches: at k = 12, "
          "Q × S × P(d ≤ 12) is about 1.8·10^-7 of all pairs. Brute force × and faiss × are projected: numpy's "
          "scan (`bitwise_count(stored ^ q) <= k`, one thread) timed on the checked queries and scaled to all Q; "
          "faiss `IndexBinaryMultiHash(64, 4, 16)` (nflip = k // 4) built on the queries and searched with a "
          "random sample of stored values (one thread, about `--batch-faiss-seconds`; its pairs compared with "
          "`batch_join`'s on that sample), scaled to all S. Rows with fewer than 10^9 stored also give the time "
          "projected to 10^9 (the join is linear in the stored count); every row also gives the CPU time per stored "
          "value × 10^9 / threads: the wall clock on cores not shared with other work.", ""]
    rows = []
    for b in results["batches"]:
        if "skipped" in b:
            rows.append([f"{b['queries']:,}", f"{b['stored']:,}", b["k"], "skipped: " + b["skipped"]] + [""] * 12)
            continue
        ex, fs = b["exactness"], b.get("faiss") or {}
        rows.append([f"{b['queries']:,}", f"{b['stored']:,}", b["k"], b["layout"], f"{b['model_ns_per_stored']:,.0f}",
                     f"{b['total_s']:,.0f}", f"{b['ns_per_stored']:,.0f}", f"{b['cpu_ns_per_stored']:,.0f}",
                     (f"{b['projected_1e9_s'] / 60:,.1f} min" if b["stored"] != 10**9
                      else f"{b['total_s'] / 60:.1f} min (measured)")
                     + f"; {b['cpu_ns_per_stored'] / b['threads'] * 10**9 / 1e9 / 60:,.1f} min on "
                       f"{b['threads']} unshared cores",
                     f"{b['loadavg_start'][0]:.1f} / {b['loadavg_end'][0]:.1f}",
                     f"{b['matches']:,} ({b['expected_random_matches']:,.0f})",
                     f"{ex['planted_found']:.3f} / {ex['decoys_reported']}",
                     (f"{ex['brute_force_queries']} q, {ex['brute_force_pairs']:,} pairs: "
                      f"{fmt(ex['brute_force_equal'])}"
                      if "brute_force_equal" in ex else "n/a"),
                     f"{b['x_brute_force']:,.0f}" if b.get("x_brute_force") else "n/a",
                     (f"{b['x_faiss']:,.0f} ({fs['sample']:,} sampled, same pairs {fmt(fs['same_pairs'])})"
                      if b.get("x_faiss") else fs.get("skipped", "n/a")),
                     "yes" if ex["exact"] else "NO"])
    L += table(["Q", "S", "k", "layout", "model ns/stored", "total s", "wall ns/stored", "CPU ns/stored",
                "time at 10^9 stored", "load start / end", "matches (random pairs expected)", "planted found / decoys",
                "brute-force check", "× brute force", "× faiss", "exact"], rows,
               text_columns=(3, 8, 9, 10, 11, 12, 14, 15))
    target = [b for b in results["batches"] if "skipped" not in b and b["k"] == 7 and b["queries"] >= 10**6
              and b["stored"] >= 10**9]
    L += ["", "Target (issue 10): 10^6 queries against 10^9 stored at k = 7 in ≤ 30 minutes: "
          + (f"{target[0]['total_s'] / 60:.1f} min of wall clock "
             f"({'met' if target[0]['total_s'] <= 1800 else 'missed'}; "
             f"load average {target[0]['loadavg_start'][0]:.1f} at start, {target[0]['loadavg_end'][0]:.1f} at end), "
             f"{target[0]['cpu_s'] / 60:.1f} min of CPU time on {target[0]['threads']} threads, i.e. "
             f"{target[0]['cpu_s'] / target[0]['threads'] / 60:.1f} min of wall clock on {target[0]['threads']} cores "
             "not shared with other work ("
             + ("met" if target[0]['cpu_s'] / target[0]['threads'] <= 1800 else "missed") + ")."
             if target else "not run.")]
    L.append(BATCH_END)
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    """Batch mode at every ``--batch-k``, into its own block (rows of ``--merge`` JSONs kept)."""
    fixed_mmap_threshold(argv)
    ap = harness_parser(__doc__)
    ap.add_argument("--batch-k", type=int, action="append", default=None,
                    help="batch mode at these k (repeatable; one stored file for all): batch_join with the layout "
                         "choose_batch_layout picks, brute force and faiss projections; writes its own block of the "
                         "index section (benchmarks/index.py --batch-stored runs the batch stage at k = 3 inside "
                         "its report)")
    ap.add_argument("--batch-faiss-seconds", type=float, default=60.0,
                    help="--batch-k: faiss sample searched for about this long per k (0: skip faiss)")
    batch_options(ap, "default 10^9; --quick 10^7", "rows")
    run_options(ap, "only rewrite the block from a results JSON (--json-out); with --no-doc, print it")
    args, earlier = parse(ap, argv)
    if earlier is not None:
        put_block(doc_path(args, render=True), render_batch(earlier), BATCH_START, BATCH_END, before=RADIUS_START)
        return 0
    if not args.batch_k:
        ap.error("--batch-k is required (repeatable), e.g. --batch-k 7")
    if args.quick:
        quick_batch(args)
    doc = doc_path(args)
    cmd = command_line("index_batch.py", argv)
    s, q, c = int(args.batch_stored or 1e9), int(args.batch_queries), int(args.batch_chunk)
    path = args.batch_file or Path(f"/tmp/neardup-bench-stored-{s}-{args.seed}.u64")
    run: dict[str, Any] = {"command": cmd, "date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine(),
                           "code": code_version()}
    log(f"batch: k {sorted(set(args.batch_k))}, {q:,} x {s:,}; load {run['machine']['loadavg_start']}")
    warm_up()
    rows = bench_batch(s, q, c, args.seed, path, args.keep_stored, args.batch_verify, args.batch_k,
                       args.batch_faiss_seconds)
    run["rows"] = [f"k = {b['k']}, {b['queries']:,} × {b['stored']:,}" for b in rows]
    results: dict[str, Any] = {"batches": rows, "runs": [run]}
    for mp in args.merge:
        old = json.loads(mp.read_text())
        have = {(b["queries"], b["stored"], b["k"]) for b in results["batches"]}
        taken = [b for b in old.get("batches", []) if (b["queries"], b["stored"], b["k"]) not in have]
        results["batches"] += taken
        labels = {f"k = {b['k']}, {b['queries']:,} × {b['stored']:,}" for b in taken}
        for r in old.get("runs", []):
            kept = [x for x in r.get("rows", []) if x in labels]
            if kept:
                results["runs"].append({**r, "rows": kept})
    results["batches"].sort(key=lambda b: (b["k"], b["stored"], b["queries"]))
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1, default=str))
    put_block(doc, render_batch(results), BATCH_START, BATCH_END, before=RADIUS_START, stream=sys.stderr)
    print(json.dumps({"batch": [{x: b.get(x) for x in ("k", "queries", "stored", "layout", "total_s",
                                                        "cpu_ns_per_stored",
                                                        "projected_1e9_s", "matches", "x_brute_force", "x_faiss")}
                                | {"exact": b.get("exactness", {}).get("exact")} for b in rows]}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

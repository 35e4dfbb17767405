"""Radius sweep of neardup's permuted-table Hamming index (64-bit): what queries and the
self-join cost at k beyond 3, against numpy brute force and faiss.

For each ``--n`` and each ``--k`` (repeatable), on one data set per N (random fingerprints,
``numpy.random.default_rng``, fixed seed): neardup with the layout ``choose_layout(N, k)``
picks (tables, bytes/fp, p50/p99 one query at a time), numpy brute force and faiss
``IndexBinaryMultiHash(64, 4, 16)`` with ``nflip = k // 4`` on the same data, planted
neighbours at every distance 0..k + 1; with ``--selfjoin N``, ``self_join`` at each k (the
layout ``choose_join_layout`` picks). Everything in one process, single-threaded.

Usage::

    python benchmarks/index_radius.py --quick --k 3 --k 7
    python benchmarks/index_radius.py --n 1e6 --n 1e7 --k 3 --k 7 --k 10 --selfjoin 1e6

Progress goes to stderr, the results into their block of the ``index`` section of
``docs/benchmarks.md`` (between ``<!-- index-radius:start -->`` and ``<!-- index-radius:end -->``;
the section's k = 3 report is ``benchmarks/index.py``'s; ``--no-doc`` to skip; ``--quick`` skips
it unless ``--doc`` is given) and a JSON summary is the last line of stdout.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # single-threaded peers (faiss)

import numpy as np
from _common import table
from _index_common import (
    RADIUS_END,
    RADIUS_START,
    MemWatch,
    NumpyBrute,
    code_version,
    command_line,
    compare,
    distinct_positions,
    doc_path,
    fixed_mmap_threshold,
    flip_masks,
    fmt,
    fmt_load,
    harness_parser,
    log,
    machine,
    measure,
    parse,
    percentiles,
    put_block,
    query_options,
    random_u64,
    run_options,
    timed_calls,
    warm_up,
)
from _index_peers import radius_faiss

from neardup.index.joins import self_join
from neardup.index.permuted import PermutedIndex

RADIUS_TARGETS = {"k7_p99_1e7_us": 100.0, "k7_p99_1e8_us": 1000.0, "extra_bytes_per_fp": 40.0,
                  "k10_p99_1e7_us": 1000.0, "k3_p99_1e7_us": 12.1, "selfjoin_k7_1e6_s": 3.0}


def radius_dataset(n: int, q: int, kmax: int, seed: int) -> dict[str, Any]:
    """Random stored values; every query gets a planted neighbour at distance
    ``i % (kmax + 2)`` (every distance 0..kmax + 1): for a given k, those within k must be
    found and the others (k + 1 and beyond) must not be reported."""
    rng = np.random.default_rng([seed, n, q, kmax])
    stored = random_u64(rng, n)
    queries = random_u64(rng, q)
    qi = np.arange(q)
    pos = rng.permutation(n)[:q] if n <= 10**7 else distinct_positions(rng, n, q)
    dists = qi % (kmax + 2)
    stored[pos] = queries ^ flip_masks(rng, dists)
    return {"stored": stored, "queries": queries, "planted": (qi, pos, dists)}


def bench_radius(n: int, ks: list[int], nq: int, n_truth: int, seed: int,
                 args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows (N, k) for every k on one data set: neardup with the layout ``choose_layout``
    picks (built per k), numpy brute force (timed once, at the largest k: its cost does not
    depend on k) and faiss ``IndexBinaryMultiHash(64, 4, 16)`` (built once) searched with
    ``nflip = k // 4`` (exact by the same pigeonhole)."""
    from neardup.index.layout import choose_layout
    kmax = max(ks)
    log(f"radius N={n:,}: data")
    data = radius_dataset(n, nq, kmax, seed)
    stored, queries = data["stored"], data["queries"]
    qlist = queries.tolist()
    p_q, p_pos, p_d = data["planted"]
    brute = NumpyBrute(stored)
    brute.search(queries[0], kmax)
    lat, cpu, raw = timed_calls(lambda qv: brute.search(qv, kmax), list(queries[:n_truth]))
    brute_row = {**percentiles(lat, cpu), "bytes_per_fp": 0.0, "tables": None, "exact": True, "single_queries": n_truth}
    log(f"radius N={n:,}: brute p50 {brute_row['p50_us']:.0f} µs")
    truth_all = [list(zip(p.tolist(), d.tolist())) for p, d in raw]
    rows = []
    for k in ks:
        truth = [{(i, d) for i, d in t if d <= k} for t in truth_all]
        row: dict[str, Any] = {"n": n, "k": k, "queries": nq, "truth_queries": n_truth,
                               "methods": {"numpy brute force": brute_row}}
        layout = choose_layout(n, k)
        log(f"radius N={n:,} k={k}: neardup build ({layout.describe()})")
        with MemWatch() as mw:
            idx = PermutedIndex(k=k, layout=layout)
            idx.add_many(np.arange(n, dtype=np.int64), stored)
        idx.search(qlist[0], k)
        st, single = measure(functools.partial(idx.search, k=k), qlist, args.passes)
        ex = compare([set(single[i]) for i in range(n_truth)], truth)
        got = {(i, m) for i, res in enumerate(single) for m, _ in res}
        inside = p_d <= k
        ex["planted_found"] = (sum((int(a), int(b)) in got for a, b in zip(p_q[inside], p_pos[inside]))
                               / int(inside.sum()))
        ex["decoys_reported"] = sum((int(a), int(b)) in got for a, b in zip(p_q[~inside], p_pos[~inside]))
        ex["exact"] = bool(ex["exact"] and ex["planted_found"] == 1.0 and ex["decoys_reported"] == 0)
        d = layout.directory_bits(n)
        pm, pc = layout.probe_masks(d)
        row["methods"]["neardup PermutedIndex"] = nd = {
            **st, "build_s": mw.seconds, "bytes_per_fp": idx.nbytes() / n, "rss_bytes_per_fp": mw.delta / n,
            "tables": len(layout.tables), "layout": layout.describe(), "layout_dict": layout.to_dict(),
            "probes": int(pc.sum()), "key_bits": d, "entries_per_query": float(pc.sum()) * n / 2 ** d,
            "exact": ex["exact"], "exactness": ex, "single_queries": nq}
        log(f"radius N={n:,} k={k}: neardup {nd['bytes_per_fp']:.1f} B/fp p50 {nd['p50_us']:.1f} "
            f"p99 {nd['p99_us']:.1f} µs (CPU {nd['cpu_p50_us']:.1f} / {nd['cpu_p99_us']:.1f}) exact={ex['exact']}")
        del idx, single
        gc.collect()
        rows.append(row)
    if not args.no_faiss:
        for row, res in zip(rows, radius_faiss(n, ks, stored, queries, truth_all, args)):
            row["methods"]["faiss IndexBinaryMultiHash"] = res
    return rows


def bench_radius_selfjoin(n: int, k: int, seed: int, repeats: int) -> dict[str, Any]:
    """self_join of n values with 10,000 planted pairs at every distance 0..k and 1,000 decoy
    pairs at k + 1, with the layout ``choose_join_layout`` picks."""
    from neardup.index.layout import choose_join_layout
    rng = np.random.default_rng([seed, n, k, 7])
    values = random_u64(rng, n)
    planted = min(10_000, n // 3)  # 10,000 (fewer at small n)
    pairs = planted + planted // 10
    pos = rng.permutation(n)[:2 * pairs]
    a, b = pos[:pairs], pos[pairs:]
    dists = np.concatenate([np.arange(planted) % (k + 1), np.full(pairs - planted, k + 1)])
    values[b] = values[a] ^ flip_masks(rng, dists)
    layout = choose_join_layout(n, k)
    self_join(values[:1000], k, layout=layout)
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        ja, jb, jd = self_join(values, k, layout=layout)
        times.append(time.perf_counter() - t0)
    got = set(zip(ja.tolist(), jb.tolist()))
    want = {(min(x, y), max(x, y)) for x, y in zip(a[:planted].tolist(), b[:planted].tolist())}
    decoys = {(min(x, y), max(x, y)) for x, y in zip(a[planted:].tolist(), b[planted:].tolist())}
    ok = bool(np.all(np.bitwise_count(values[ja] ^ values[jb]) == jd)) and bool(np.all(jd <= k))
    res = {"n": n, "k": k, "layout": layout.describe(), "seconds": float(np.median(times)), "repeats": times,
           "pairs": int(ja.shape[0]), "planted_found": len(want & got) / len(want), "decoys": len(decoys & got),
           "distances_correct": ok}
    res["exact"] = res["planted_found"] == 1.0 and res["decoys"] == 0 and ok
    log(f"radius self-join N={n:,} k={k}: {layout.describe()} {res['seconds']:.2f} s, exact={res['exact']}")
    return res


def render_radius(results: dict[str, Any]) -> str:
    """The radius sweep's block of the index section."""
    lines = [RADIUS_START, f"### Radius sweep: k = {', '.join(str(k) for k in results['ks'])} (`--k`)", ""]
    m = results["machine"]
    lines.append(f"`{results['command']}` on {results['date']}, src at {results.get('code') or 'n/a'}; "
                 f"{m.get('cpu')}, {m.get('nproc')} cores, {m.get('ram_gib')} GiB RAM, Python {m.get('python')}; "
                 f"{', '.join(f'{p} {v}' for p, v in (m.get('versions') or {}).items() if v)}; "
                 f"load average {fmt_load(m.get('loadavg_start'))} at start, "
                 f"{fmt_load(results.get('loadavg_end'))} at end. Everything in process, single-threaded "
                 f"(faiss pinned to 1 OpenMP thread).")
    lines += ["", "Data: uniform random 64-bit fingerprints, one data set per N; every query has a "
              "planted neighbour at "
              "distance `i % (kmax + 2)` (every distance 0..kmax + 1): at each k those within k must be found and "
              "the others must not be reported. "
              "Exact = all planted found, no decoy, and the same (id, distance) sets as numpy brute force on the "
              "first queries (brute force, being the reference, is timed on those only). neardup: `PermutedIndex` "
              "with the layout `choose_layout(N, k)` picks (40-byte budget), `search` one query at a time, median "
              "of the passes (faiss: one pass, on the first `--faiss-queries` queries above N = 10^6, fewer (at "
              "least 10) where they would take over `--faiss-seconds`; its query count is in its row); "
              "bytes/fp = `nbytes() / N` (tables, uint32 ids, directories; the fingerprint itself "
              "is 8 of them). faiss: `IndexBinaryMultiHash(64, 4, 16)` with `nflip = k // 4` (exact by the same "
              "pigeonhole), `range_search` one query at a time; memory as RSS growth. p50/p99 are wall clock; "
              "CPU = the thread's CPU time (leaves out the time the process was descheduled by the other work "
              "on these 2 cores).", ""]
    rows = []
    for r in results["radius"]:
        nd = r["methods"].get("neardup PermutedIndex", {})
        for name, res in r["methods"].items():
            if "skipped" in res:
                rows.append([f"{r['n']:,}", r["k"], name, "skipped", "", "", "", "", "", "", "", res["skipped"]])
                continue
            bpf = res.get("bytes_per_fp")
            mem = fmt(bpf) if bpf is not None else (f"{fmt(res['rss_bytes_per_fp'])} (RSS)"
                                                    if res.get("rss_bytes_per_fp") is not None else "n/a")
            if res.get("single_queries") and res["single_queries"] != r["queries"]:
                name = f"{name} ({res['single_queries']:,} q)"
            rows.append([f"{r['n']:,}", r["k"], name, res.get("layout") or "scan", res.get("tables") or "n/a", mem,
                         fmt(res["p50_us"]), fmt(res["p99_us"]),
                         f"{fmt(res.get('cpu_p50_us'))} / {fmt(res.get('cpu_p99_us'))}",
                         f"{res['p50_us'] / nd['p50_us']:.1f}" if nd.get("p50_us") else "n/a",
                         f"{res['p99_us'] / nd['p99_us']:.1f}" if nd.get("p99_us") else "n/a",
                         "yes" if res.get("exact") else "NO"])
    lines += table(["N", "k", "method", "layout", "tables", "bytes/fp", "p50 µs", "p99 µs", "CPU p50 / p99 µs",
                    "p50 × neardup", "p99 × neardup", "exact"], rows, text_columns=(2, 3, 11))
    nd_rows = [(r["n"], r["k"], r["methods"]["neardup PermutedIndex"]) for r in results["radius"]
               if "neardup PermutedIndex" in r["methods"]]
    if nd_rows:
        lines += ["", "neardup per row: " + "; ".join(
            f"N = {n:,}, k = {k}: {x['probes']} buckets probed on {x['key_bits']}-bit keys "
            f"(~{x['entries_per_query']:,.0f} "
            f"entries read), build {x['build_s']:.1f} s, RSS Δ {x['rss_bytes_per_fp']:.1f} B/fp"
            for n, k, x in nd_rows) + "."]
    if results.get("radius_selfjoin"):
        lines += ["", "Self-join (`self_join`, layout from `choose_join_layout`; 10,000 planted pairs at every "
                  "distance 0..k, 1,000 decoys at k + 1; median of the repeats):", ""]
        lines += table(["N", "k", "layout", "seconds", "pairs", "planted found", "decoys", "exact"],
                       [[f"{j['n']:,}", j["k"], j["layout"], f"{j['seconds']:.2f}", f"{j['pairs']:,}",
                         f"{j['planted_found']:.3f}", j["decoys"], "yes" if j["exact"] else "NO"]
                        for j in results["radius_selfjoin"]], text_columns=(2, 7))
    by = {(r["n"], r["k"]): r["methods"]["neardup PermutedIndex"] for r in results["radius"]
          if "neardup PermutedIndex" in r["methods"]}
    cost = [f"N = {n:,}: p50 {by[n, 12]['p50_us']:,.0f} µs / p99 {by[n, 12]['p99_us']:,.0f} µs "
            f"(CPU p99 {by[n, 12]['cpu_p99_us']:,.0f} µs), "
            f"{by[n, 12]['p50_us'] / by[n, 7]['p50_us']:.1f}x the k = 7 p50"
            for n in sorted({n for n, _ in by}) if (n, 12) in by and (n, 7) in by]
    if cost:
        sj = {j["k"]: j for j in results.get("radius_selfjoin") or []}
        lines += ["", "What the default k = 12 costs (fingerprints verified by the sketch; README, \"Picking k\"), "
                  "one query at a time: " + "; ".join(cost)
                  + (f"; self-join of {sj[12]['n']:,}: {sj[12]['seconds']:.1f} s "
                     f"({sj[12]['seconds'] / sj[7]['seconds']:.1f}x "
                     "k = 7)" if 12 in sj and 7 in sj else "") + "."]
    lines += ["", "Targets (issue 10):", ""]
    lines += table(["target", "measured", "met"],
                   [[t["target"], t["measured"], t["met"]] for t in radius_targets(results)],
                   text_columns=(0, 1, 2))
    lines.append(RADIUS_END)
    return "\n".join(lines)


def radius_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    def nd(n: int, k: int) -> dict[str, Any] | None:
        for r in results["radius"]:
            if r["n"] == n and r["k"] == k:
                return r["methods"].get("neardup PermutedIndex")
        return None

    out = []
    for label, n, k, limit in (("k = 7: p99 ≤ 100 µs at N = 10^7", 10**7, 7, RADIUS_TARGETS["k7_p99_1e7_us"]),
                               ("k = 7: p99 ≤ 1 ms at N = 10^8", 10**8, 7, RADIUS_TARGETS["k7_p99_1e8_us"]),
                               ("k = 10: p99 ≤ 1 ms at N = 10^7", 10**7, 10, RADIUS_TARGETS["k10_p99_1e7_us"]),
                               ("k = 3: p99 no slower than before (12.1 µs at N = 10^7)", 10**7, 3,
                                RADIUS_TARGETS["k3_p99_1e7_us"])):
        x = nd(n, k)
        if x is None:
            out.append({"target": label, "measured": "not run", "met": "n/a"})
        else:
            out.append({"target": label,
                        "measured": f"{fmt(x['p99_us'])} µs (p50 {fmt(x['p50_us'])}; CPU p99 {fmt(x['cpu_p99_us'])})",
                        "met": "yes" if x["p99_us"] <= limit
                        else ("CPU time only" if x["cpu_p99_us"] <= limit else "no")})
    for n in (10**6, 10**7, 10**8):  # the default k (spec version 2): no target in issue 10, reported
        x = nd(n, 12)
        if x is not None:
            out.append({"target": f"k = 12 (the default k; no target): p99 at N = 10^{len(str(n)) - 1}",
                        "measured": f"{fmt(x['p99_us'])} µs (p50 {fmt(x['p50_us'])}; CPU p99 {fmt(x['cpu_p99_us'])})",
                        "met": "n/a"})
    k7 = [(r["n"], r["methods"]["neardup PermutedIndex"]) for r in results["radius"]
          if r["k"] == 7 and "neardup PermutedIndex" in r["methods"]]
    if k7:
        worst = max(x["bytes_per_fp"] - 8 for _, x in k7)
        out.append({"target": "k = 7: ≤ 40 bytes per fingerprint beyond the fingerprint",
                    "measured": ", ".join(f"{x['bytes_per_fp'] - 8:.1f} at {n:,}" for n, x in k7),
                    "met": "yes" if worst <= RADIUS_TARGETS["extra_bytes_per_fp"] else "no"})
    sj = [j for j in results.get("radius_selfjoin") or [] if j["k"] == 7 and j["n"] == 10**6]
    out.append({"target": "self-join of 10^6 at k = 7 ≤ 3 s",
                "measured": f"{sj[0]['seconds']:.2f} s" if sj else "not run",
                "met": ("yes" if sj[0]["seconds"] <= RADIUS_TARGETS["selfjoin_k7_1e6_s"] else "no") if sj else "n/a"})
    return out


def main(argv: list[str] | None = None) -> int:
    """The sweep at every ``--k`` and ``--n``, into its own block of the index section."""
    fixed_mmap_threshold(argv)
    ap = harness_parser(__doc__)
    ap.add_argument("--k", type=int, action="append", default=None,
                    help="radius sweep (repeatable): for each --n and each k, neardup (choose_layout), brute force "
                         "and faiss MultiHash, plus --selfjoin at each k; writes its own block of the index section")
    query_options(ap, "10^6 and 10^7; --quick 10^5", "500 up to N=10^6, else 100")
    ap.add_argument("--faiss-queries", type=int, default=2000,
                    help="radius sweep: faiss queries above N = 10^6 (default 2,000; it is slow at large k)")
    ap.add_argument("--faiss-seconds", type=float, default=120.0,
                    help="radius sweep: fewer faiss queries (at least 10) where they would take longer than this "
                         "per (N, k) (default 120; 0: no limit)")
    run_options(ap, "only rewrite the block from a results JSON (--json-out); with --no-doc, print it")
    args, earlier = parse(ap, argv)
    if earlier is not None:
        earlier["targets"] = radius_targets(earlier)
        put_block(doc_path(args, render=True), render_radius(earlier), RADIUS_START, RADIUS_END)
        return 0
    if not args.k:
        ap.error("--k is required (repeatable), e.g. --k 3 --k 7")
    if args.quick and args.selfjoin is None:
        args.selfjoin = 1e5
    doc = doc_path(args)
    cmd = command_line("index_radius.py", argv)
    ns = [int(x) for x in (args.n or ([10**5] if args.quick else [10**6, 10**7]))]
    ks = sorted(set(args.k))
    results: dict[str, Any] = {"command": cmd, "date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine(),
                               "ks": ks, "radius": [], "radius_selfjoin": [], "code": code_version()}
    log(f"radius sweep: N {ns}, k {ks}; machine {results['machine']['cpu']}, "
        f"load {results['machine']['loadavg_start']}")
    t_all = time.perf_counter()
    warm_up()
    for n in ns:
        nt = args.truth_queries or (min(500, args.queries) if n <= 10**6 else min(100, args.queries))
        results["radius"] += bench_radius(n, ks, args.queries, nt, args.seed, args)
        gc.collect()
    if args.selfjoin:
        for k in ks:
            results["radius_selfjoin"].append(bench_radius_selfjoin(int(args.selfjoin), k, args.seed,
                                                                    args.selfjoin_repeats))
            gc.collect()
    results["loadavg_end"] = os.getloadavg()
    results["wall_s"] = time.perf_counter() - t_all
    results["targets"] = radius_targets(results)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1, default=str))
    put_block(doc, render_radius(results), RADIUS_START, RADIUS_END, stream=sys.stderr)
    log(f"done in {results['wall_s']:.1f} s")
    print(json.dumps({"targets": results["targets"], "rows": [
        {"n": r["n"], "k": r["k"], **{m: {x: v.get(x) for x in ("layout", "tables", "bytes_per_fp", "p50_us", "p99_us",
                                                             "cpu_p99_us", "exact")}
                                      for m, v in r["methods"].items()}} for r in results["radius"]],
        "selfjoin": results["radius_selfjoin"]}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The quadratic term of the batch candidate stage at 10^8 and 10^9 fingerprints: CPU time per
pair check of the compiled block scans, on blocks as dense as random pages make them there,
and the core-hours it adds to the linear cost of the Spark job per 10^9 fingerprints.

    .venv/bin/python benchmarks/block_scan.py [--checks 2e9] [--no-write]

Random pages put N / 65,536 groups in a 16-bit block (a sketch band; a pigeonhole SimHash
block at k = 3): 1,526 at 10^8, 15,259 at 10^9. Since ``neardup.batch.blocks.bucket_cap`` such blocks
are compared pairwise (not windowed), so each of the 12 kinds of block costs about
N^2 / 131,072 pair checks. For each density this times, on one thread, about ``--checks``
pair checks of random groups (their nibbles and SimHash values random, so the filters reject
almost every pair, as on unrelated pages) through

- Spark's reducer scan (``neardup.batch.spark.blocks.pairs_of_blocks``: band rows with the nibble
  filter, SimHash rows with the distance filter), and
- the single-machine kernel (``neardup.batch._kernels.bucket_pairs_filtered``, what
  ``dedup_batch`` and ``neardup dedup --batch`` run),

and projects ``12 N^2 / 131,072`` checks at the measured ns per check (band and SimHash
kinds weighted 8 : 4) beside the linear term of the Spark scale run (docs/benchmarks.md,
"Batch job at scale"). Writes its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import numpy as np
from _common import DOC, machine_line, replace_section, table

from neardup.batch import _kernels as BK
from neardup.batch.blocks import KEY_SPACE, PIGEON_K, WINDOW, bucket_cap
from neardup.batch.spark.blocks import pairs_of_blocks
from neardup.index.bands import WORDS, far_verify, nibble_threshold
from neardup.model import DEFAULT_VERIFY

START, END = "<!-- block-scan:start -->", "<!-- block-scan:end -->"
SIZES = (10**8, 10**9)
BAND_KINDS, SIM_KINDS = 8, PIGEON_K + 1


def blocks_for(n: int, checks: float) -> tuple[int, int]:
    """(groups a block at n fingerprints, blocks giving about ``checks`` pair checks)."""
    m = -(-n // KEY_SPACE)
    return m, max(1, round(checks / (m * (m - 1) / 2)))


def spark_scan(m: int, blocks: int, band: bool, rng: np.random.Generator) -> tuple[float, int]:
    """CPU seconds and pair checks of ``pairs_of_blocks`` over ``blocks`` blocks of ``m``."""
    rows = m * blocks
    keys = np.repeat(np.arange(blocks, dtype=np.int64), m)
    nodes = rng.integers(1, 2**62, rows, dtype=np.int64)
    nib = rng.integers(0, 2**32, (rows, WORDS), dtype=np.uint64).astype(np.uint32)
    sims = rng.integers(0, 2**63, rows, dtype=np.uint64)
    thr = nibble_threshold(far_verify(DEFAULT_VERIFY) or 1.0)
    cap = bucket_cap(m * KEY_SPACE)
    list(pairs_of_blocks(keys[:4], nodes[:4], band, nib[:4], sims[:4], thr, PIGEON_K, cap, WINDOW))  # compile
    t = time.process_time()
    kept = sum(a.shape[0] for a, _ in pairs_of_blocks(keys, nodes, band, nib, sims, thr, PIGEON_K, cap, WINDOW))
    dt = time.process_time() - t
    if kept > rows:  # random groups: the filters keep next to nothing
        raise RuntimeError(f"{kept} pairs kept of random groups")
    return dt, blocks * m * (m - 1) // 2


def array_scan(m: int, blocks: int, band: bool, rng: np.random.Generator) -> tuple[float, int]:
    """CPU seconds and pair checks of the single-machine kernel over the same blocks."""
    rows = m * blocks
    members = np.arange(rows, dtype=np.int64)
    starts = np.arange(0, rows, m, dtype=np.int64)
    sizes = np.full(blocks, m, dtype=np.int64)
    nib = rng.integers(0, 2**63, (rows, 4), dtype=np.uint64) if band else np.zeros((0, 4), dtype=np.uint64)
    if band:
        nib[:, 3] &= np.uint64(0xFFFFFFFF)  # 56 nibbles, as _packed_nibbles leaves them
    sims = rng.integers(0, 2**63, rows, dtype=np.uint64)
    thr = nibble_threshold(far_verify(DEFAULT_VERIFY) or 1.0) if band else PIGEON_K
    out_a, out_b = np.empty(1 << 16, dtype=np.int64), np.empty(1 << 16, dtype=np.int64)
    BK.bucket_pairs_filtered(members[:4], starts[:1], np.array([4]), nib[:4] if band else nib, sims[:4], thr,
                             out_a, out_b)  # compile
    t = time.process_time()
    kept = BK.bucket_pairs_filtered(members, starts, sizes, nib, sims, thr, out_a, out_b)
    dt = time.process_time() - t
    if kept > rows:
        raise RuntimeError(f"{kept} pairs kept of random groups")
    return dt, blocks * m * (m - 1) // 2


def linear_core_hours() -> float | None:
    """Task core-hours per 10^9 fingerprints of the Spark scale run's linear term, read from
    its section of docs/benchmarks.md (None when missing)."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"\*\*([\d,.]+) core-hours of task time per 10\^9 fingerprints\*\*", text)
    return float(found.group(1).replace(",", "")) if found else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checks", type=float, default=2e9, help="pair checks timed per density and scan")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(27)
    load = os.getloadavg()
    rows = []
    for n in SIZES:
        m, blocks = blocks_for(n, args.checks)
        row: dict = {"n": n, "block": m, "blocks": blocks, "cap": bucket_cap(n)}
        for name, scan in (("spark", spark_scan), ("arrays", array_scan)):
            for band in (True, False):
                dt, checks = scan(m, blocks, band, rng)
                row[f"{name}_{'band' if band else 'sim'}_ns"] = round(dt / checks * 1e9, 3)
                row["checks"] = checks
        for name in ("spark", "arrays"):
            ns = (BAND_KINDS * row[f"{name}_band_ns"] + SIM_KINDS * row[f"{name}_sim_ns"]) / (BAND_KINDS + SIM_KINDS)
            total = (BAND_KINDS + SIM_KINDS) * n * n / (2 * KEY_SPACE)
            row[f"{name}_core_hours"] = round(total * ns / 1e9 / 3600, 2)
        row["total_checks"] = (BAND_KINDS + SIM_KINDS) * n * n / (2 * KEY_SPACE)
        print(json.dumps(row), flush=True)
        rows.append(row)
    end = os.getloadavg()
    linear = linear_core_hours()
    if args.no_write:
        return
    big = rows[-1]
    body = [START, "## The quadratic term at 10^8 and 10^9: dense blocks (issue 27)", "",
            f"`benchmarks/block_scan.py --checks {args.checks:.0e}` ({machine_line()}; one thread; load "
            f"{load[0]:.1f} at start, {end[0]:.1f} at the end). Random pages put N / 65,536 groups in a 16-bit "
            "block; `neardup.batch.blocks.bucket_cap` keeps such blocks pairwise (windowing only a block far denser "
            "than chance, a trap), so each of the 12 kinds of block (8 bands, 4 SimHash blocks) costs N^2 / 131,072 "
            "pair checks. Timed here on random groups (the filters reject almost every pair), per pair check, in "
            "Spark's reducer scan (`spark_blocks.pairs_of_blocks`) and the single-machine kernel "
            "(`_batch_kernels.bucket_pairs_filtered`).", ""]
    body += table(["N", "groups a block", "cap", "checks timed", "Spark band ns", "Spark SimHash ns", "arrays band ns",
                   "arrays SimHash ns", "all checks at N", "core-hours (Spark scan)", "core-hours (arrays)"],
                  [[f"{r['n']:.0e}".replace("+0", ""), f"{r['block']:,}", f"{r['cap']:,}", f"{r['checks']:.2e}",
                    str(r["spark_band_ns"]), str(r["spark_sim_ns"]), str(r["arrays_band_ns"]), str(r["arrays_sim_ns"]),
                    f"{r['total_checks']:.2e}", f"{r['spark_core_hours']:,}", f"{r['arrays_core_hours']:,}"]
                   for r in rows])
    per_1e9 = big["spark_core_hours"]
    summary = (f"Per 10^9 fingerprints the dense blocks add **{per_1e9:,.0f} core-hours** of scan (Spark's loop at "
               f"the measured ns per check)")
    if linear is not None:
        summary += (f" to the {linear:,.0f} core-hours of the linear term fitted on the Spark scale run (section "
                    f"\"Batch job at scale\"): **{linear + per_1e9:,.0f} core-hours** in all, about "
                    f"{(linear + per_1e9) / 64:,.1f} hours on 64 cores, fingerprinting not included")
    if linear is not None and big["spark_core_hours"] > 0:
        n1, q1 = big["n"], big["spark_core_hours"]
        cross = linear / 1e9 * n1 * n1 / q1  # linear * N / 1e9 == q1 * (N / n1)^2, at 10^9's ns per check
        summary += (f". The scan passes the linear term near {cross:.1e} fingerprints (the linear term grows as N, "
                    "the scan as N^2)")
    ns7 = (BAND_KINDS * big["spark_band_ns"] + SIM_KINDS * big["spark_sim_ns"]) / (BAND_KINDS + SIM_KINDS)
    checks7 = (BAND_KINDS + SIM_KINDS) * 1e14 / (2 * KEY_SPACE)
    summary += (f". Below 10^8 it is small: 10^7 fingerprints make {checks7:.1e} checks, about "
                f"{checks7 * ns7 / 1e9:,.0f} s of CPU. The alternative, "
                "a fixed cap of 256, costs nothing here and loses the band pairs of every ordinary block from about "
                "10^7 pages on.")
    body += ["", summary, "", json.dumps(rows), END]
    replace_section(DOC, START, END, "\n".join(body))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()

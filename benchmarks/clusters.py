"""The trap workload: one page under 100,000 distinct URLs, beside adds of distinct pages.

A calendar or session-id trap serves one page under endless URLs; every copy joins one
cluster. This grows that cluster to 10^2, 10^3, 10^4 and 10^5 members (in memory and in an
SQLite file) and, at each size, times in the same run:

* one by one (``Detector.add_fingerprint``, one transaction each): ``--window`` more copies
  of the trap page, then ``--window`` distinct new pages;
* in batches (``Detector.add_fingerprints``, the fingerprint form of ``add_many``: one
  transaction per batch): one batch of ``--batch`` copies, then one batch of ``--batch``
  distinct pages.

The cluster grows between sizes through batches. Fingerprints are computed once (the trap
page from real HTML with a ``rel=canonical`` link; distinct pages as random SimHash values,
digests and sketches), so the figures are the detector's and the store's cost per add, not
extraction. Writes its section of docs/benchmarks.md (``--no-doc`` to skip).

    python benchmarks/clusters.py                 # the full run (about 10 minutes on 2 cores)
    python benchmarks/clusters.py --sizes 100,1000 --no-doc   # a quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from _common import DOC, commit, machine_line, replace_section, table

from neardup import Detector
from neardup.fingerprint.core import Fingerprint

START, END = "<!-- clusters:start -->", "<!-- clusters:end -->"
TRAP_HTML = ("<html><head><title>Events calendar</title>"
             "<link rel='canonical' href='https://trap.example/calendar'></head><body><article><p>"
             + " ".join(f"event{i} listing word{i % 97}" for i in range(300))
             + "</p></article></body></html>")


def machine() -> str:
    return machine_line(f"SQLite {sqlite3.sqlite_version}")


class Distinct:
    """Fingerprints of distinct new pages: random SimHash values, digests and sketches."""

    def __init__(self, template: Fingerprint, seed: int) -> None:
        self.template, self.rng, self.n = template, random.Random(seed), 0

    def take(self, count: int) -> list[tuple[str, Fingerprint]]:
        out = []
        for _ in range(count):
            self.n += 1
            fp = dataclasses.replace(self.template, simhash=self.rng.getrandbits(64),
                                     digest=f"{self.rng.getrandbits(256):064x}",
                                     sketch=self.rng.randbytes(len(self.template.sketch or b"")) or None,
                                     canonical_url=None, title=f"Page {self.n}")
            out.append((f"https://site{self.n % 997}.example/article/{self.n}", fp))
        return out


def run_store(name: str, det: Detector, trap: Fingerprint, sizes: list[int], window: int, batch: int,
              seed: int) -> list[dict]:
    distinct = Distinct(trap, seed)
    urls = (f"https://trap.example/calendar?day={i}" for i in range(10**9))
    members = 0
    rows = []

    def grow(to: int) -> None:
        nonlocal members
        while members < to:
            n = min(10000, to - members)
            det.add_fingerprints([(next(urls), trap) for _ in range(n)])
            members += n

    cluster = None
    for size in sizes:
        grow(size)
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            for _ in range(window):
                v = det.add_fingerprint(next(urls), trap)
            t1 = time.perf_counter()
            cluster = v.cluster_id
            for url, fp in distinct.take(window):
                det.add_fingerprint(url, fp)
            t2 = time.perf_counter()
            det.add_fingerprints([(next(urls), trap) for _ in range(batch)])
            t3 = time.perf_counter()
            det.add_fingerprints(distinct.take(batch))
            t4 = time.perf_counter()
        finally:
            gc.enable()
        members += window + batch
        assert cluster is not None  # the trap's copies are one cluster
        info = det.cluster_info(cluster)
        assert v.status == "exact" and info is not None
        rows.append({"store": name, "size": size, "one_trap": (t1 - t0) / window, "one_new": (t2 - t1) / window,
                     "batch_trap": (t3 - t2) / batch, "batch_new": (t4 - t3) / batch, "members": info["size"],
                     "canonical": info["canonical_url"]})
        r = rows[-1]
        print(f"{name:8s} {size:>7,d} members: one by one {r['one_trap'] * 1e6:7.0f} us/copy vs "
              f"{r['one_new'] * 1e6:7.0f} us/new page ({r['one_trap'] / r['one_new']:.2f}x); batches "
              f"{r['batch_trap'] * 1e6:6.0f} vs {r['batch_new'] * 1e6:6.0f} us "
              f"({r['batch_trap'] / r['batch_new']:.2f}x)",
              flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000,100000", help="cluster sizes to time at")
    ap.add_argument("--window", type=int, default=500, help="one-by-one adds timed per size and kind")
    ap.add_argument("--batch", type=int, default=1000, help="adds per timed batch")
    ap.add_argument("--stores", default="memory,sqlite", help="memory and/or sqlite (a file, synchronous=FULL)")
    ap.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    started = datetime.now(UTC)
    load0 = os.getloadavg()
    rows: list[dict] = []
    trap = Detector().fingerprint(TRAP_HTML, url="https://trap.example/calendar?day=0")
    assert trap.canonical_url == "https://trap.example/calendar" and not trap.empty
    for name in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            det = Detector() if name == "memory" else Detector.open(Path(tmp) / "trap.db")
            try:
                rows += run_store(name, det, trap, sizes, args.window, args.batch, seed=7)
            finally:
                det.close()
    load1 = os.getloadavg()
    if args.no_doc:
        return
    cmd = "python benchmarks/clusters.py" + ("" if sys.argv[1:] == [] else " " + " ".join(sys.argv[1:]))
    body = [
        START,
        "## Clusters of any size: the trap workload (`benchmarks/clusters.py`)",
        "",
        "Generated by `benchmarks/clusters.py`; do not edit by hand.",
        "",
        "```",
        cmd,
        "```",
        "",
        f"Run {started:%Y-%m-%d %H:%M} UTC, commit {commit()}; load average {load0[0]:.2f} at the start, "
        f"{load1[0]:.2f} at the end. Machine: {machine()}. **The CPUs are shared with other jobs**: "
        "every figure is one run, so expect 10-30% noise; the ratios compare adds timed "
        "back to back in the same run.",
        "",
        "One page (a calendar listing naming `https://trap.example/calendar` as canonical) added under "
        "distinct URLs of one host, so every copy is `exact` and joins one cluster; beside it, distinct new "
        "pages (random SimHash values, digests and sketches: each one `new`, its own cluster). At each "
        f"cluster size: {args.window} copies then {args.window} distinct pages one by one "
        f"(`add_fingerprint`, a transaction each), then one batch of {args.batch} copies and one of "
        f"{args.batch} distinct pages (`add_fingerprints`, the fingerprint form of `add_many`: one "
        "transaction). Between sizes the cluster grows by batches of 10,000. The SQLite store is a file "
        "(WAL, `synchronous=FULL`: a commit per one-by-one add is on disk before it returns).",
        "",
    ]
    table_rows = [[r["store"], f"{r['size']:,}", f"{r['one_trap'] * 1e6:,.0f}", f"{r['one_new'] * 1e6:,.0f}",
                   f"{r['one_trap'] / r['one_new']:.2f}", f"{r['batch_trap'] * 1e6:,.0f}",
                   f"{r['batch_new'] * 1e6:,.0f}", f"{r['batch_trap'] / r['batch_new']:.2f}"] for r in rows]
    body += table(["store", "cluster size", "copy, one by one (µs)", "new page, one by one (µs)", "ratio",
                   "copy, batched (µs)", "new page, batched (µs)", "ratio"], table_rows, text_columns=(0,))
    mem = [r for r in rows if r["store"] == "memory"]
    if mem:
        last = mem[-1]
        ratio = last["one_trap"] / last["one_new"]
        body += ["", "### Target", "",
                 f"Time per add at {last['size']:,} members within 2x of an add of a new distinct page, both in "
                 f"memory: **{ratio:.2f}x** one by one ({last['one_trap'] * 1e6:,.0f} µs vs "
                 f"{last['one_new'] * 1e6:,.0f} µs), {last['batch_trap'] / last['batch_new']:.2f}x batched: "
                 + ("met." if ratio <= 2.0 else "**not met**.")]
        first = mem[0]
        body += ["", f"From {first['size']:,} to {last['size']:,} members the time per copy changes by "
                     f"{last['one_trap'] / first['one_trap']:.2f}x one by one and "
                     f"{last['batch_trap'] / first['batch_trap']:.2f}x batched: flat, as the canonical is kept per "
                     "add from the cluster's stored best member and link counts, the digest and SimHash lookups "
                     "use indexes on live pages, and the Hamming index holds one entry per SimHash value."]
    body.append(END)
    replace_section(DOC, START, END, "\n".join(body))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()

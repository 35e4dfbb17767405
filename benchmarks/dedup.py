"""``neardup dedup --jobs N``: pages per second of the whole command against the number of
worker processes.

Runs the real command (a fresh store each time, ``--no-progress``, the default extractor)
on the dragnet pages of ../shared/corpus (1,381 real pages), or, where that corpus is
absent, on the bundled sample repeated; the best of ``--repeat`` runs for each ``--jobs``
value. The kernels are compiled before timing (a run of the sample). The time includes the
process start (about 1 s) and the store's commits. The verdicts of every run are compared
with those of ``--jobs 1`` (they must be identical).

    .venv/bin/python benchmarks/dedup.py                 # jobs 1 and 2, writes docs/benchmarks.md
    .venv/bin/python benchmarks/dedup.py --jobs 1 2 4 --limit 400 --no-docs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import CORPUS, DOC, REPO_ROOT, replace_section, table

SAMPLE = REPO_ROOT / "examples" / "sample"
DRAGNET = CORPUS / "dragnet" / "html"
START, END = "<!-- dedup:start -->", "<!-- dedup:end -->"


def prepare(tmp: Path, limit: int | None, copies: int) -> tuple[Path, int, str]:
    """A folder of pages to deduplicate: dragnet's (links), else the sample ``copies`` times
    (each copy under its own URLs)."""
    folder = tmp / "pages"
    folder.mkdir()
    if DRAGNET.is_dir():
        files = sorted(DRAGNET.glob("*.html.gz"))[:limit]
        for f in files:
            (folder / f.name).symlink_to(f)
        return folder, len(files), f"dragnet ({len(files)} pages)"
    files = sorted((SAMPLE / "pages").glob("*.html.gz"))
    n = 0
    for c in range(copies):
        for f in files:
            if limit is not None and n >= limit:
                break
            (folder / f"{c:03d}-{f.name}").symlink_to(f)
            n += 1
    return folder, n, f"the bundled sample x{copies} ({n} pages, file:// URLs)"


def split(folder: Path, db: Path) -> tuple[float, float]:
    """CPU seconds of the two parts of a dedup in this process: (fingerprinting, the rest:
    reading the inputs, deciding, writing the store). The first is what the workers take
    over, the second stays in the main process."""
    import neardup.ingest.workers as par
    from neardup import Detector
    from neardup.ingest.inputs import read_input

    spent = [0.0]
    real = par.fingerprint_one

    def timed(page, config):  # type: ignore[no-untyped-def]
        t = time.process_time()
        try:
            return real(page, config)
        finally:
            spent[0] += time.process_time() - t

    par.fingerprint_one = timed  # type: ignore[assignment]
    try:
        t = time.process_time()
        with Detector.open(db) as det:
            for _ in par.add_pages(det, read_input(folder), jobs=1, page=lambda it: it.page):
                pass
        total = time.process_time() - t
    finally:
        par.fingerprint_one = real  # type: ignore[assignment]
    return spent[0], total - spent[0]


def _burn(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i
    return s


def machine_speedup(jobs: int, n: int = 4_000_000) -> float:
    """What this machine gives ``jobs`` processes right now: the speed-up of a pure CPU loop
    run by ``jobs`` processes over the same loops one after the other (other jobs on a
    shared machine take their part)."""
    import multiprocessing

    if jobs == 1:
        return 1.0
    t = time.perf_counter()
    for _ in range(jobs):
        _burn(n)
    serial = time.perf_counter() - t
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        t = time.perf_counter()
        pool.map(_burn, [n] * jobs)
        parallel = time.perf_counter() - t
    return serial / parallel


def cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(folder: Path, db: Path, jobs: int, out: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "neardup.cli", "dedup", str(folder), "--db", str(db), "--jobs", str(jobs),
           "--no-progress", "--out", str(out)]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"dedup failed ({r.returncode}): {r.stderr[-2000:]}")
    return wall, json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=2, help="runs per --jobs value (the best is kept)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many pages")
    ap.add_argument("--copies", type=int, default=20, help="copies of the sample when dragnet is absent")
    ap.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="neardup-dedup-bench-"))
    try:
        folder, n, what = prepare(tmp, args.limit, args.copies)
        run(SAMPLE, tmp / "warm.db", 1, tmp / "warm.jsonl")  # numba cache warm, files in the page cache
        fp_cpu, main_cpu = split(folder, tmp / "split.db")
        print(f"CPU in one process: fingerprinting {fp_cpu:.1f} s, the rest {main_cpu:.1f} s", flush=True)
        results: dict[int, float] = {}
        cpu: dict[int, float] = {}
        loads: dict[int, float] = {}
        machine: dict[int, float] = {}
        reference: str | None = None
        for jobs in args.jobs:
            best = float("inf")
            for i in range(args.repeat):
                db, out = tmp / f"j{jobs}-{i}.db", tmp / f"j{jobs}-{i}.jsonl"
                spare = machine_speedup(jobs)
                before = cpu_of_children()
                wall, summary = run(folder, db, jobs, out)
                used = cpu_of_children() - before
                rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
                verdicts = json.dumps([{k: v for k, v in r.items()} for r in rows], sort_keys=True)
                if reference is None:
                    reference = verdicts
                elif verdicts != reference:
                    raise SystemExit(f"--jobs {jobs}: verdicts differ from the first run's")
                if wall < best:
                    best, cpu[jobs], loads[jobs], machine[jobs] = wall, used, os.getloadavg()[0], spare
                print(f"jobs {jobs} run {i + 1}: {wall:.1f} s, {summary['pages'] / wall:.1f} pages/s, "
                      f"CPU {used:.1f} s (load average {os.getloadavg()[0]:.1f}; a CPU loop in {jobs} processes: "
                      f"{spare:.2f}x)", flush=True)
                db.unlink()
            results[jobs] = best
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base = results[args.jobs[0]]

    def bound(j: int) -> str:  # the speed-up j free CPUs allow: the main process's part is serial
        total = fp_cpu + main_cpu
        return "1.00x" if j == 1 else f"{total / max(main_cpu, total / j):.2f}x"

    header = ["--jobs", "seconds", "pages/s", f"vs --jobs {args.jobs[0]}", "CPU seconds", "load average",
              "CPU loop, same processes", "bound on free CPUs"]
    rows = [(j, f"{results[j]:.1f}", f"{n / results[j]:.1f}", f"{base / results[j]:.2f}x", f"{cpu[j]:.1f}",
             f"{loads[j]:.1f}", f"{machine[j]:.2f}x", bound(j)) for j in args.jobs]
    print("\n".join(table(header, rows)))
    if args.no_docs:
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    block = [
        START,
        "## `neardup dedup --jobs N` (`benchmarks/dedup.py`)",
        "",
        f"The whole command on {what}, a fresh SQLite store per run, default extractor (trafilatura), "
        f"best of {args.repeat} runs; {cpus} CPUs ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}. Workers extract and fingerprint; the main process decides "
        "and writes (one transaction per 200 pages). Every run's verdicts are identical to the first's.",
        "",
        *table(header, rows),
        "",
        f"In one process, fingerprinting (extraction included) takes {fp_cpu:.1f} CPU seconds and the rest "
        f"(reading the files, deciding, writing the store) {main_cpu:.1f} s: "
        f"{100 * fp_cpu / (fp_cpu + main_cpu):.0f}% of the work moves to the workers. *Bound on free CPUs* is "
        "the speed-up that many idle CPUs allow with that split (the main process's part stays serial, and "
        "shares the CPUs with the workers). *CPU seconds*: the command and its "
        "workers together; equal CPU seconds at every --jobs mean the workers add no work. The load average "
        "is the machine's (other jobs included) when the run ended; *CPU loop, same processes* is the "
        "speed-up the machine gave a pure Python loop run by that many processes just before the run: "
        "where it is far below the process count, the machine had no spare CPU, and the wall-clock "
        "speed-up measures the contention, not neardup. Reproduce: `.venv/bin/python benchmarks/dedup.py`.",
        END,
    ]
    replace_section(DOC, START, END, "\n".join(block))
    print(f"wrote the dedup section of {DOC}")


if __name__ == "__main__":
    main()

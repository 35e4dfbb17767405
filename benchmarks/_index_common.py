"""What the Hamming-index harnesses share: ``benchmarks/index.py`` (the k = 3 report),
``index_radius.py`` (the radius sweep, other k) and ``index_batch.py`` (batch mode at other k).

Random 64-bit fingerprints with planted neighbours, the numpy brute force, timing one call at
a time (wall clock and thread CPU time) and the exactness checks, memory figures, the machine,
the warm-up of the compiled kernels, the blocks of the ``index`` section of docs/benchmarks.md
(each harness writes its own, the others stay) and the command-line options they have in
common.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from _common import DOC, REPO_ROOT, logger, memory_kib, proc_kib, replace_section, rss_bytes
from _common import machine as common_machine

from neardup.index.joins import batch_join, self_join
from neardup.index.permuted import PermutedIndex

K = 3
SEED = 20240607
#: the index section of docs/benchmarks.md (benchmarks/index.py's report) and the blocks inside
#: it that the radius sweep and batch mode at other k write
DOC_START, DOC_END = "<!-- index:start -->", "<!-- index:end -->"
RADIUS_START, RADIUS_END = "<!-- index-radius:start -->", "<!-- index-radius:end -->"
BATCH_START, BATCH_END = "<!-- index-batch:start -->", "<!-- index-batch:end -->"
#: the distributions whose versions the reports name
VERSIONS = ("neardup", "numpy", "numba", "faiss-cpu", "simhash")

log = logger(clock=True)


# -- memory -------------------------------------------------------------------------------
def mem_available() -> int:
    """MemAvailable of /proc/meminfo, bytes."""
    return (proc_kib("/proc/meminfo", "MemAvailable") or 0) * 1024


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """This process's peak resident set (VmHWM), bytes."""
    return (proc_kib("/proc/self/status", "VmHWM") or 0) * 1024


def trim() -> None:
    """Give freed heap memory back to the OS (glibc), so RSS deltas count only live memory."""
    gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class MemWatch:
    """RSS before, after (delta) and peak (VmHWM, reset through /proc/self/clear_refs)."""

    def __enter__(self) -> "MemWatch":
        trim()
        self.peak_ok = reset_peak()
        self.before = rss_bytes()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        trim()
        self.after = rss_bytes()
        self.peak = peak_rss() if self.peak_ok else None

    @property
    def delta(self) -> int:
        return self.after - self.before

    @property
    def peak_extra(self) -> int | None:
        return None if self.peak is None else self.peak - self.before


# -- data -----------------------------------------------------------------------------------
def flip_masks(rng: np.random.Generator, dists: np.ndarray) -> np.ndarray:
    """One uint64 mask per entry with exactly ``dists[i]`` distinct bits set."""
    dists = np.asarray(dists, dtype=np.int64)
    bits = np.argsort(rng.random((dists.shape[0], 64)), axis=1).astype(np.uint64)
    sel = np.arange(64)[None, :] < dists[:, None]
    words = np.where(sel, np.left_shift(np.uint64(1), bits), np.uint64(0))
    out = np.bitwise_or.reduce(words, axis=1).astype(np.uint64)
    assert np.array_equal(np.bitwise_count(out), dists)
    return out


def random_u64(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)


def distinct_positions(rng: np.random.Generator, n: int, count: int) -> np.ndarray:
    while True:
        cand = np.unique(rng.integers(0, n, size=2 * count + 16))
        if cand.shape[0] >= count:
            return rng.permutation(cand)[:count]


# -- brute force, timing, exactness -------------------------------------------------------
class NumpyBrute:
    """Chunked, preallocated numpy scan: xor, bitwise_count, compare, flatnonzero."""

    def __init__(self, stored: np.ndarray, chunk: int = 1 << 16) -> None:
        self.stored = stored
        self.chunk = chunk
        self.x = np.empty(chunk, dtype=np.uint64)
        self.c = np.empty(chunk, dtype=np.uint8)
        self.m = np.empty(chunk, dtype=bool)

    def search(self, q: np.uint64, k: int) -> tuple[np.ndarray, np.ndarray]:
        pos_parts, d_parts = [], []
        n, ch = self.stored.shape[0], self.chunk
        for a in range(0, n, ch):
            b = min(n, a + ch)
            m = b - a
            np.bitwise_xor(self.stored[a:b], q, out=self.x[:m])
            np.bitwise_count(self.x[:m], out=self.c[:m])
            np.less_equal(self.c[:m], k, out=self.m[:m])
            hit = np.flatnonzero(self.m[:m])
            if hit.shape[0]:
                pos_parts.append(hit + a)
                d_parts.append(self.c[hit].astype(np.int64))
        if not pos_parts:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(pos_parts), np.concatenate(d_parts)


def percentiles(lat_ns: list[int] | np.ndarray, cpu_ns: list[int] | np.ndarray | None = None) -> dict[str, float]:
    """Wall-clock percentiles (and, if given, thread CPU time ones, which leave out the time
    the process was descheduled: on a shared, oversubscribed machine that is most of p99)."""
    us = np.asarray(lat_ns, dtype=np.float64) / 1e3
    out = {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)),
           "mean_us": float(us.mean()), "qps": float(1e6 / us.mean())}
    if cpu_ns is not None:
        cu = np.asarray(cpu_ns, dtype=np.float64) / 1e3
        out.update({"cpu_p50_us": float(np.percentile(cu, 50)), "cpu_p99_us": float(np.percentile(cu, 99))})
    return out


_CPU_BASELINE_NS: int | None = None


def cpu_baseline() -> int:
    """Median thread-CPU time of an empty timed call (the clock itself costs ~1 µs here)."""
    global _CPU_BASELINE_NS
    if _CPU_BASELINE_NS is None:
        def nop(x: Any) -> None:
            return None
        _, cpu, _ = timed_calls(nop, [0] * 20_000, baseline=0)
        _CPU_BASELINE_NS = int(np.median(cpu))
    return _CPU_BASELINE_NS


def timed_calls(fn: Any, args: list[Any], baseline: int | None = None) -> tuple[list[int], list[int], list[Any]]:
    """Call ``fn(a)`` for every ``a``: wall ns (perf_counter) and thread CPU ns per call, results."""
    base = cpu_baseline() if baseline is None else baseline
    wall: list[int] = []
    cpu: list[int] = []
    res: list[Any] = []
    pc, tt = time.perf_counter_ns, time.thread_time_ns
    gc_was_on = gc.isenabled()
    gc.disable()  # as timeit does: the retained results would otherwise bring collections into p99
    try:
        _timed_loop(fn, args, base, wall, cpu, res, pc, tt)
    finally:
        if gc_was_on:
            gc.enable()
    return wall, cpu, res


def _timed_loop(fn: Any, args: list[Any], base: int, wall: list[int], cpu: list[int], res: list[Any],
                pc: Any, tt: Any) -> None:
    for a in args:
        c0 = tt()
        t0 = pc()
        r = fn(a)
        t1 = pc()
        c1 = tt()
        wall.append(t1 - t0)
        cpu.append(max(0, c1 - c0 - base))
        res.append(r)


def measure(fn: Any, args: list[Any], passes: int) -> tuple[dict[str, Any], list[Any]]:
    """``passes`` timed passes over ``args``: the median over passes of each percentile (the
    machine is shared, a single pass can catch a burst of other work), results of the first."""
    stats: list[dict[str, float]] = []
    first: Any = None  # the first pass's results (a list: passes >= 1)
    for _ in range(max(1, passes)):
        wall, cpu, res = timed_calls(fn, args)
        stats.append(percentiles(wall, cpu))
        if first is None:
            first = res
        del res
    out: dict[str, Any] = {k: float(np.median([st[k] for st in stats])) for k in stats[0]}
    out["passes"] = len(stats)
    out["p50_us_passes"] = [round(st["p50_us"], 2) for st in stats]
    out["p99_us_passes"] = [round(st["p99_us"], 2) for st in stats]
    return out, first


def compare(found: list[set[tuple[int, int]]], truth: list[set[tuple[int, int]]]) -> dict[str, Any]:
    """Recall and false positives of per-query (id, distance) sets against the truth."""
    want = sum(len(t) for t in truth)
    hit = sum(len(f & t) for f, t in zip(found, truth))
    extra = sum(len(f - t) for f, t in zip(found, truth))
    return {"queries": len(truth), "expected": want, "recall": (hit / want) if want else 1.0,
            "false_positives": extra, "exact": hit == want and extra == 0}


# -- the machine, the code, the warm-up -----------------------------------------------------
def machine() -> dict[str, Any]:
    """:func:`_common.machine` with what the reports (and earlier ``--json-out`` files) read
    besides: the RAM in GiB and the load average at the start."""
    return {**common_machine(VERSIONS, missing=None), "ram_gib": round((memory_kib() or 0) / 2**20, 1),
            "loadavg_start": os.getloadavg()}


def code_version() -> str | None:
    """Last commit touching src/ (and whether src/ has uncommitted changes)."""
    try:
        rev = subprocess.run(["git", "log", "-1", "--format=%h", "--", "src"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return (rev + (" + uncommitted changes" if dirty else "")) if rev else None
    except (OSError, subprocess.SubprocessError):
        return None


def warm_up() -> None:
    """Load the cached numba kernels (and compile any missing) before timing anything."""
    rng = np.random.default_rng(0)
    v = random_u64(rng, 20_000)
    idx = PermutedIndex(k=K, expected_n=20_000)
    idx.add_many(np.arange(20_000), v)
    idx.search(int(v[0]), K)
    idx.search_arrays(v[:100], K)
    idx.add(10**9, int(v[1]))
    idx.search(int(v[1]), K)
    idx.search(int(v[1]), K + 2)
    self_join(v, K)
    list(batch_join(v[:1000], [v[:5000], v[5000:]], K))
    # the memory-mapped (read-only) array specialisations: a reopened index, a memmap'd stored set
    with tempfile.TemporaryDirectory(prefix="neardup-warm-", dir="/tmp") as td:
        idx.save(Path(td) / "idx")
        again = PermutedIndex.open(Path(td) / "idx", mmap=True)
        again.search(int(v[0]), K)
        again.search_arrays(v[:100], K)
        f = Path(td) / "stored.u64"
        v.tofile(f)
        mm = np.memmap(f, dtype=np.uint64, mode="r")
        list(batch_join(v[:1000], [mm[:5000], mm[5000:]], K))
        del mm, again


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "**NO**"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def fmt_load(v: Any) -> str:
    return "/".join(f"{x:.1f}" for x in v) if v else "n/a"


# -- the index section of docs/benchmarks.md ------------------------------------------------
def write_block(doc: Path, block: str, start: str, end: str, before: str | None = None) -> None:
    """Put a block (the radius sweep's, the batch-k one's) inside the index section (before
    ``before`` when that marker is there, else before the section's end), replacing an earlier
    one; the rest of the file stays byte for byte."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    if start not in text:
        if DOC_END not in text:
            replace_section(doc, DOC_START, DOC_END, f"{DOC_START}\n## Hamming index\n{DOC_END}")
            text = doc.read_text(encoding="utf-8")
        at = before if before and before in text else DOC_END
        text = text.replace(at, f"{start}\n{end}\n{at}", 1)
        tmp = doc.with_name(f".{doc.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, doc)
    replace_section(doc, start, end, block)


def existing_block(doc: Path, start: str, end: str) -> str:
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    if start in text and end in text:
        return start + text.split(start, 1)[1].split(end, 1)[0] + end
    return ""


def put_block(doc: Path | None, block: str, start: str, end: str, before: str | None = None,
              stream: TextIO = sys.stdout) -> None:
    """A harness's block into the index section of ``doc`` (:func:`write_block`), or printed
    to ``stream`` where there is no ``doc``."""
    if doc:
        write_block(doc, block, start, end, before)
        log(f"wrote the {start.removeprefix('<!-- ').split(':')[0]} block of the index section of {doc}")
    else:
        print(block, file=stream)


def kept_blocks(doc: Path) -> str:
    """The blocks of the index section that the other harnesses write (batch at other k,
    radius sweep), kept when the k = 3 report is rewritten."""
    blocks = [existing_block(doc, BATCH_START, BATCH_END), existing_block(doc, RADIUS_START, RADIUS_END)]
    return "\n\n".join(b for b in blocks if b)


# -- command line ---------------------------------------------------------------------------
def fixed_mmap_threshold(argv: list[str] | None) -> None:
    """Re-exec this process once with a fixed glibc mmap threshold (a harness's ``main`` called
    from the command line, ``argv`` None): glibc otherwise raises it after the first large
    free (up to 32 MiB), keeps later temporaries in the heap and the RSS figures of small
    indexes come out wrong. It is read at process start."""
    if argv is None and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(1 << 17)
        os.execv(sys.executable, [sys.executable, *sys.argv])


def harness_parser(doc: str | None) -> argparse.ArgumentParser:
    """A harness's parser: the first paragraph of its docstring ``doc`` as the description."""
    return argparse.ArgumentParser(description=(doc or "").split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def query_options(ap: argparse.ArgumentParser, sizes: str, truth: str) -> None:
    """The options of the harnesses that query an index one fingerprint at a time (the k = 3
    report, the radius sweep): ``sizes`` and ``truth`` are their defaults, in words."""
    ap.add_argument("--n", type=float, action="append", help=f"index size (repeatable; default {sizes})")
    ap.add_argument("--queries", type=int, default=10_000, help="queries per index size (default 10,000)")
    ap.add_argument("--truth-queries", type=int, default=None,
                    help=f"queries checked against brute force (default {truth})")
    ap.add_argument("--selfjoin", type=float, default=None, help="self-join size (e.g. 1e6; --quick 1e5)")
    ap.add_argument("--selfjoin-repeats", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3,
                    help="timed passes over the queries for neardup and faiss (median of the percentiles)")
    ap.add_argument("--no-faiss", action="store_true")


def batch_options(ap: argparse.ArgumentParser, stored: str, merged: str) -> None:
    """The options of batch mode (the k = 3 report's batch stage, index_batch.py): ``stored``
    says the default of ``--batch-stored``, ``merged`` what ``--merge`` takes from earlier runs."""
    ap.add_argument("--batch-stored", type=float, default=None, help=f"batch mode: stored fingerprints ({stored})")
    ap.add_argument("--batch-queries", type=float, default=1e6, help="batch mode: queries (default 10^6)")
    ap.add_argument("--batch-chunk", type=float, default=5e7, help="batch mode: stored chunk (default 5*10^7)")
    ap.add_argument("--batch-file", type=Path, default=None,
                    help="raw uint64 file for the stored set (default under /tmp)")
    ap.add_argument("--batch-verify", type=int, default=8, help="queries brute-forced over the whole stored set")
    ap.add_argument("--keep-stored", action="store_true", help="keep the stored file (reused when parameters match)")
    ap.add_argument("--merge", type=Path, action="append", default=[],
                    help=f"results JSON (--json-out) of an earlier run: its {merged} that this run does not repeat "
                         "go into the report too (for running the heavy ones separately)")


def quick_batch(args: argparse.Namespace) -> None:
    """``--quick`` for batch mode: 10^7 stored, 10^5 queries, chunks of 2*10^6 (each unless
    given), at most 4 queries brute-forced."""
    args.batch_stored = args.batch_stored if args.batch_stored is not None else 1e7
    args.batch_queries = 1e5 if args.batch_queries == 1e6 else args.batch_queries
    args.batch_chunk = 2e6 if args.batch_chunk == 5e7 else args.batch_chunk
    args.batch_verify = min(args.batch_verify, 4)


def run_options(ap: argparse.ArgumentParser, render: str) -> None:
    """The options every index harness has (``render``: what ``--render`` does)."""
    ap.add_argument("--quick", action="store_true", help="small sizes, < 1 minute")
    ap.add_argument("--doc", type=Path, default=None, help="markdown file to update (default docs/benchmarks.md)")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the full results as JSON")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--render", type=Path, default=None, help=render)


def parse(ap: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, dict[str, Any] | None]:
    """The options, and the results of an earlier run when ``--render`` names them."""
    args = ap.parse_args(argv)
    return args, (json.loads(args.render.read_text()) if args.render else None)


def doc_path(args: argparse.Namespace, render: bool = False) -> Path | None:
    """The file to write into: ``--doc`` or docs/benchmarks.md; none with ``--no-doc``, nor with
    ``--quick`` unless ``--doc`` is given (``render``: ``--quick`` plays no part)."""
    if args.no_doc or (args.quick and args.doc is None and not render):
        return None
    return Path(args.doc or DOC)


def command_line(script: str, argv: list[str] | None) -> str:
    """How this run was started, for the reports: ``python benchmarks/<script> <arguments>``."""
    return " ".join(["python", f"benchmarks/{script}", *(sys.argv[1:] if argv is None else argv)])

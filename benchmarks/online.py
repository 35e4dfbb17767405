"""The online path as a crawler calls it (issue 35): checks and adds through ``Detector``'s public
API at 10^6 (and 10^7) stored pages, SQLite in memory and on disk, with datasketch's
``MinHashLSH`` and rensa's ``RMinHashLSH`` queried at the same size in the same run.

What is measured, each call alone in this thread's CPU time (``time.thread_time_ns``), p50 / p99:

* ``check_fingerprint`` of a **new** URL with fresh content (random SimHash and sketch, on 50
  hosts), of a **near** copy of a stored page under a new URL (its sketch, 1-3 SimHash bits
  flipped: a ``near`` verdict) and of a **known** URL fetched again unchanged (``unchanged``);
  ``check_fingerprints`` in batches of 1,000 (CPU per item);
* ``add_fingerprint`` one at a time (its own transaction: the commit included) and
  ``add_fingerprints`` in batches of 1,000 (CPU per page), of new URLs, and of stored URLs
  fetched again unchanged (the second crawl); SQL statements per add (SQLite's trace callback);
* **where a check's CPU goes**, by stage: the same stage functions the check calls, timed alone
  on the same queries (URL key, the store's one read, the SimHash tables, the sketch bands, the
  decision with its candidates and the verdict as the rest).

The stored pages are synthetic fingerprints of the default spec (as ``benchmarks/service.py``
makes them). They are written as the rows an add writes: one page is added through the API
and its rows (page, cluster, version) are copied with each page's own URL, digest, SimHash and
sketch by ``executemany`` (an add at a time would take hours at 10^7); the detector measured is
then opened on the store as a user opens one (its index rebuilt from the pages, timed). The peers
store random MinHash signatures of 64-feature sets (``benchmarks/minhash.py``'s data and
runs, each in a forked child: datasketch at most ``--ds-n`` pages) and return unverified
candidates; neardup's check also keys the URL, reads the store and decides.

Usage::

    python benchmarks/online.py [--stored 1e6,1e7] [--stores memory,disk] [--queries 2000] [--no-doc]

Writes the section between ``<!-- online:start -->`` and ``<!-- online:end -->`` of
docs/benchmarks.md; the JSON summary is the last stdout line.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # rensa, single-threaded as in benchmarks/minhash.py
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import minhash as M
import numpy as np
from _common import DOC, loadavg, logger, machine_line, replace_section, rss_bytes, table
from service import Synth

from neardup.detector.core import Detector
from neardup.fingerprint.core import Fingerprint
from neardup.store.sqlite import SQLiteStore
from neardup.urls import comparable_url, origin_of

log = logger("online", clock=True)
BATCH = 1000
HOSTS = 997
TARGETS = {"check p50": 50.0, "check p99": 100.0, "add batched": 100.0, "add single": 250.0}


# -- the stored pages ---------------------------------------------------------------------------
@dataclass
class Stored:
    """What the queries need of the stored pages: a sample of their URLs, SimHashes, digests and sketches."""

    urls: list[str]
    simhash: list[int]
    digest: list[str]
    sketch: list[bytes]


def _template_rows(store: SQLiteStore, synth: Synth) -> tuple[list[str], tuple[Any, ...], tuple[Any, ...],
                                                                    tuple[Any, ...]]:
    """One page added through the API; its page, cluster and version rows (column order of ``pages``)."""
    det = Detector(store)
    (value, digest), sketch = synth.fresh(), synth.sketch()
    det.add_fingerprint("https://template.example/", synth.fingerprint(value, digest, sketch))
    db = store._db
    cur = db.execute("SELECT * FROM pages")
    columns = [d[0] for d in cur.description]
    page = cur.fetchone()
    cluster = db.execute("SELECT * FROM clusters").fetchone()
    version = db.execute("SELECT * FROM page_versions").fetchone()
    for table_name in ("pages", "clusters", "page_versions", "changes"):
        db.execute(f"DELETE FROM {table_name}")
    return columns, page, cluster, version


def bulk_fill(store: SQLiteStore, n: int, synth: Synth, sample: int, chunk: int = 100_000) -> Stored:
    """``n`` new pages written as an add writes them (ids 1..n, each alone in its cluster)."""
    columns, page, cluster, version = _template_rows(store, synth)
    at = {c: i for i, c in enumerate(columns)}
    db = store._db
    marks = ", ".join("?" * len(columns))
    kept = Stored([], [], [], [])
    every = max(1, n // sample)
    db.execute("BEGIN IMMEDIATE")
    for start in range(0, n, chunk):
        pages: list[list[Any]] = []
        clusters: list[tuple[Any, ...]] = []
        versions: list[tuple[Any, ...]] = []
        for i in range(start + 1, min(n, start + chunk) + 1):
            (value, digest), sketch = synth.fresh(), synth.sketch()
            url = f"https://h{i % HOSTS}.example/pre/{i}"
            row = list(page)
            row[at["id"]], row[at["url"]], row[at["host"]], row[at["url_key"]] = (i, url, origin_of(url),
                                                                                  comparable_url(url))
            row[at["digest"]], row[at["simhash"]], row[at["sketch"]] = digest, value.to_bytes(8, "big"), sketch
            row[at["cluster_id"]] = i
            pages.append(row)
            clusters.append((i, i, *cluster[2:]))
            versions.append((i, i, version[2], digest, value.to_bytes(8, "big"), *version[5:]))
            if i % every == 0:
                kept.urls.append(url)
                kept.simhash.append(value)
                kept.digest.append(digest)
                kept.sketch.append(sketch)
        db.executemany(f"INSERT INTO pages({', '.join(columns)}) VALUES({marks})", pages)
        db.executemany(f"INSERT INTO clusters VALUES({', '.join('?' * len(cluster))})", clusters)
        db.executemany(f"INSERT INTO page_versions VALUES({', '.join('?' * len(version))})", versions)
        log(f"  filled {min(n, start + chunk):,} of {n:,}")
    db.execute("UPDATE sqlite_sequence SET seq=? WHERE name IN ('pages', 'clusters', 'page_versions')", (n,))
    db.execute("COMMIT")
    return kept


# -- timing -------------------------------------------------------------------------------------
def cpu_us(calls: Sequence[Callable[[], Any]]) -> np.ndarray:
    """Each call's CPU time in this thread, µs."""
    out = np.empty(len(calls))
    for i, call in enumerate(calls):
        c0 = time.thread_time_ns()
        call()
        out[i] = (time.thread_time_ns() - c0) / 1e3
    return out


def pct(a: np.ndarray) -> dict[str, float]:
    return {"p50_us": float(np.percentile(a, 50)), "p99_us": float(np.percentile(a, 99)),
            "mean_us": float(a.mean())}


def batch_cpu(fn: Callable[[list[Any]], Any], items: list[Any]) -> float:
    """CPU µs per item of ``fn`` over ``items`` in batches of :data:`BATCH`."""
    c0 = time.thread_time_ns()
    for s in range(0, len(items), BATCH):
        fn(items[s:s + BATCH])
    return (time.thread_time_ns() - c0) / 1e3 / max(1, len(items))


class StatementCounter:
    """SQL statements a connection runs (SQLite's trace callback)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db, self.n = db, 0

    def __enter__(self) -> StatementCounter:
        self.db.set_trace_callback(self._count)
        return self

    def _count(self, _sql: str) -> None:
        self.n += 1

    def __exit__(self, *exc: object) -> None:
        self.db.set_trace_callback(None)


def reference_us() -> float:
    """CPU µs of a fixed pure-Python workload (sorting 2,000 numbers, best of 20): how fast this
    machine was at the time, since the per-call figures of two runs minutes apart here differ by
    up to 1.6x with no change in the code."""
    data = [(i * 7919) % 2003 for i in range(2000)]
    best = float("inf")
    for _ in range(20):
        c0 = time.thread_time_ns()
        for _ in range(20):
            sorted(data)
        best = min(best, (time.thread_time_ns() - c0) / 1e3)
    return best


# -- one store ----------------------------------------------------------------------------------
def queries(synth: Synth, stored: Stored, n: int, tag: str) -> dict[str, list[tuple[str, Fingerprint]]]:
    """New, near and known (url, fingerprint) queries; ``tag`` keeps URLs of two runs apart."""
    rng = np.random.default_rng(len(tag) * 7919 + n)
    new, near, known = [], [], []
    for i in range(n):
        (value, digest), sketch = synth.fresh(), synth.sketch()
        new.append((f"https://q{i % 50}.example/{tag}/{i}", synth.fingerprint(value, digest, sketch)))
        j = int(rng.integers(0, len(stored.urls)))
        (_, other), flipped = synth.fresh(), synth.near_of(stored.simhash[j])
        near.append((f"https://m{i % 50}.example/{tag}/{i}", synth.fingerprint(flipped, other, stored.sketch[j])))
        known.append((stored.urls[j], synth.fingerprint(stored.simhash[j], stored.digest[j], stored.sketch[j])))
    return {"new": new, "near": near, "known": known}


def stages(det: Detector, fresh: Callable[[], list[tuple[str, Fingerprint]]]) -> dict[str, dict[str, float]]:
    """CPU of the stages of a new URL's ``check_fingerprint``, each timed alone on its own fresh
    queries (``fresh()``: as cold as the whole check's), interleaved, p50 / p99 µs."""
    k, verify = det.k, det.verify
    far = None if verify is None else max(verify, 0.42)
    timed: dict[str, Callable[[str, Fingerprint], Any]] = {
        "URL key (normalize_url)": lambda url, fp: det._key(url),
        "store read (Store.lookup)": lambda url, fp: det.store.lookup(url, fp.digest),
        "SimHash tables (k)": lambda url, fp: det.mirror.search(fp.simhash, k),
        "sketch bands": lambda url, fp: det.mirror.sketch_candidates(fp.sketch, far),
        "whole check": det.check_fingerprint,
    }
    sets = {name: fresh() for name in timed}
    n = min(len(v) for v in sets.values())
    cpu = {name: np.empty(n) for name in timed}
    for i in range(n):  # the stages interleaved, so that all of them run under the same conditions
        for name, fn in timed.items():
            url, fp = sets[name][i]
            c0 = time.thread_time_ns()
            fn(url, fp)
            cpu[name][i] = (time.thread_time_ns() - c0) / 1e3
    out = {name: pct(a) for name, a in cpu.items()}
    parts = sum(v["p50_us"] for name, v in out.items() if name != "whole check")
    out["the rest (decision, verdict), p50"] = {"p50_us": out["whole check"]["p50_us"] - parts}
    return out


def run_store(kind: str, n: int, n_queries: int, folder: Path) -> dict[str, Any]:
    """Fill a store of ``kind`` (memory | disk) with ``n`` pages, then time checks and adds."""
    gc.collect()
    rss0 = rss_bytes()
    path = ":memory:" if kind == "memory" else str(folder / f"online-{n}.db")
    synth = Synth(seed=n % 1000 + 1)
    t0 = time.perf_counter()
    store = SQLiteStore(path)
    stored = bulk_fill(store, n, synth, sample=max(10_000, 2 * n_queries))
    fill_s = time.perf_counter() - t0
    if kind == "disk":
        store.close()
        t0 = time.perf_counter()
        c0 = time.process_time()
        det = Detector.open(path)
    else:
        t0 = time.perf_counter()
        c0 = time.process_time()
        det = Detector(store)
    open_s, open_cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    log(f"{kind} {n:,}: filled in {fill_s:.0f} s, detector open (index rebuilt) {open_s:.1f} s")
    q = queries(synth, stored, n_queries, "a")
    out: dict[str, Any] = {"store": kind, "stored": n, "fill_s": fill_s, "open_s": open_s, "open_cpu_s": open_cpu,
                           "reference before": reference_us()}
    statuses = {}
    for name, items in q.items():  # the first 200 are checked once untimed (compiled kernels warm), then all timed
        statuses[name] = sorted({f"{v.status} ({v.version})" if v.version else v.status
                                 for v in (det.check_fingerprint(u, fp) for u, fp in items[:200])})
        out[f"check {name}"] = pct(cpu_us([partial(det.check_fingerprint, u, fp) for u, fp in items]))
    out["statuses"] = statuses
    out["check batched (per item)"] = {"mean_us": batch_cpu(det.check_fingerprints, q["new"] + q["near"])}
    tags = iter(f"stage{i}" for i in range(100))
    out["stages of a new-URL check"] = stages(det, lambda: queries(synth, stored, n_queries, next(tags))["new"])
    fresh = queries(synth, stored, n_queries, "b")["new"]
    with StatementCounter(store._db if kind == "memory" else det.store._db) as counter:  # type: ignore[attr-defined]
        single = cpu_us([partial(det.add_fingerprint, u, fp) for u, fp in fresh[:n_queries // 2]])
        single_statements = counter.n / (n_queries // 2)
    out["add single"] = pct(single)
    out["add single"]["statements"] = single_statements
    later = fresh[n_queries // 2:]
    with StatementCounter(store._db if kind == "memory" else det.store._db) as counter:  # type: ignore[attr-defined]
        out["add batched (per page)"] = {"mean_us": batch_cpu(det.add_fingerprints, later),
                                         "statements": counter.n / max(1, len(later))}
    recrawl = queries(synth, stored, n_queries, "c")["known"]  # the second crawl: stored URLs, unchanged
    with StatementCounter(store._db if kind == "memory" else det.store._db) as counter:  # type: ignore[attr-defined]
        out["recrawl add batched (per page)"] = {"mean_us": batch_cpu(det.add_fingerprints, recrawl),
                                                 "statements": counter.n / max(1, len(recrawl))}
    out["reference after"] = reference_us()
    gc.collect()
    out["rss_per_page"] = (rss_bytes() - rss0) / n if kind == "memory" else None
    det.close()
    if kind == "disk":
        for f in folder.glob(f"online-{n}.db*"):
            if f.is_file():
                f.unlink()
    return out


# -- the peers ----------------------------------------------------------------------------------
def peers(n: int, n_queries: int, ds_n: int, seconds: float) -> list[dict[str, Any]]:
    """datasketch and rensa LSH queries at ``n`` stored (benchmarks/minhash.py's runs)."""
    log(f"peers: signing {n:,} sets")
    M.DATA = M.LSHData(n, n_queries, n)
    out = []
    for fn, args in (("bench_datasketch", (ds_n, seconds)), ("bench_rensa", (n, seconds))):
        if (fn == "bench_datasketch" and M.datasketch is None) or (fn == "bench_rensa" and M.rensa is None):
            continue
        log(f"peers: {fn}")
        out.append(M.in_child(fn, *args))
    M.DATA = None
    return out


# -- the report ---------------------------------------------------------------------------------
def report(runs: list[dict[str, Any]], peer_runs: dict[int, list[dict[str, Any]]], command: str) -> str:
    f = "{:,.0f}".format
    lines = ["<!-- online:start -->", "## The online path as a crawler calls it (`benchmarks/online.py`)", "",
             f"`{command}` on {machine_line()}; load average at the end {loadavg()}. CPU of this thread per call "
             "(µs), each call alone; stored pages synthetic (the default spec), written as an add writes them; "
             "queries on 50 hosts. Targets (issue 35, at 10^7 stored): check p50 ≤ 50 µs, p99 ≤ 100 µs; add ≤ "
             "100 µs a page in batches, ≤ 250 µs one at a time.", ""]
    rows = []
    for r in runs:
        for name in ("check new", "check near", "check known", "add single"):
            rows.append([f"{r['store']}, {r['stored']:,}", name, f(r[name]["p50_us"]), f(r[name]["p99_us"]),
                         f"{r[name].get('statements', ''):.1f}" if "statements" in r[name] else ""])
        for name in ("check batched (per item)", "add batched (per page)", "recrawl add batched (per page)"):
            rows.append([f"{r['store']}, {r['stored']:,}", name, f(r[name]["mean_us"]) + " (mean)", "",
                         f"{r[name]['statements']:.1f}" if "statements" in r[name] else ""])
    lines += table(["store, pages", "operation", "CPU p50 µs", "CPU p99 µs", "SQL statements"], rows, (0, 1))
    lines += ["", "Verdicts of the first 200 queries of each kind: " + "; ".join(
        f"{r['store']} {r['stored']:,}: " + ", ".join(f"{k} {'/'.join(v)}" for k, v in r["statuses"].items())
        for r in runs[:2]) + ".", ""]
    lines += ["### Where a check's CPU goes (new URLs, each stage timed alone)", ""]
    srows = []
    for r in runs:
        for stage, v in r["stages of a new-URL check"].items():
            srows.append([f"{r['store']}, {r['stored']:,}", stage, f(v["p50_us"]),
                          f(v["p99_us"]) if "p99_us" in v else ""])
    lines += table(["store, pages", "stage", "CPU p50 µs", "CPU p99 µs"], srows, (0, 1))
    lines += ["", "### Opening a store (index rebuilt from the pages), memory, the machine's speed", "",
              "The reference is a fixed pure-Python workload (`reference_us`) timed before and after each "
              "store's queries: compare runs by it.", ""]
    lines += table(["store, pages", "fill s (executemany)", "open s (wall)", "open CPU s", "RSS bytes/page",
                    "reference µs before / after"],
                   [[f"{r['store']}, {r['stored']:,}", f"{r['fill_s']:.0f}", f"{r['open_s']:.1f}",
                     f"{r['open_cpu_s']:.1f}", f(r["rss_per_page"]) if r["rss_per_page"] else "-",
                     f"{r['reference before']:.0f} / {r['reference after']:.0f}"] for r in runs])
    if peer_runs:
        lines += ["", "### The peers at the same size (unverified LSH candidates of MinHash signatures)", ""]
        prow = []
        for n, found in peer_runs.items():
            for p in found:
                prow.append([p["library"], f"{p['n']:,}" + (" (capped)" if p["extrapolated"] else ""),
                             f(p["query"]["cpu_p50_ms"] * 1e3), f(p["query"]["cpu_p99_ms"] * 1e3)])
            ours = [r for r in runs if r["stored"] == n and r["store"] == "memory"]
            for r in ours:
                prow.append(["neardup check_fingerprint (new URL), memory", f"{n:,}", f(r["check new"]["p50_us"]),
                             f(r["check new"]["p99_us"])])
        lines += table(["library", "stored", "query CPU p50 µs", "query CPU p99 µs"], prow)
    lines += ["", "<!-- online:end -->"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stored", default="1e6", help="comma-separated store sizes (default 1e6)")
    ap.add_argument("--stores", default="memory,disk", help="memory, disk or both (default both)")
    ap.add_argument("--queries", type=int, default=2000, help="queries of each kind (default 2000)")
    ap.add_argument("--peers", default="1e6", help="sizes to run the peers at ('' for none; default 1e6)")
    ap.add_argument("--ds-n", type=int, default=200_000, help="datasketch stores at most this many (memory)")
    ap.add_argument("--peer-seconds", type=float, default=120.0, help="insert time limit per peer")
    ap.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.stored.split(",") if s]
    kinds = [k for k in args.stores.split(",") if k]
    if any(k not in ("memory", "disk") for k in kinds) or not sizes or min(sizes) < 10 * args.queries:
        ap.error("--stores takes memory and/or disk; --stored sizes must be at least 10x --queries")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="neardup-online-") as tmp:
        for n in sizes:
            for kind in kinds:
                runs.append(run_store(kind, n, args.queries, Path(tmp)))
                log(json.dumps({k: v for k, v in runs[-1].items() if k.startswith(("check", "add"))}))
    peer_runs = {int(float(s)): peers(int(float(s)), args.queries, args.ds_n, args.peer_seconds)
                 for s in args.peers.split(",") if s}
    command = "python benchmarks/online.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(runs, peer_runs, command.strip())
    if not args.no_doc:
        replace_section(DOC, "<!-- online:start -->", "<!-- online:end -->", text)
    print(text, file=sys.stderr)
    print(json.dumps({"runs": runs, "peers": peer_runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

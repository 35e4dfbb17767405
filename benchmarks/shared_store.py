"""Many workers, one memory (issue 36): the stores many crawler processes share, side by side in
one run: SQLite (one file, for reference), PostgreSQL, a standalone Redis and a 3-master Redis
Cluster, each started here (PostgreSQL with ``fsync`` on; Redis with AOF ``appendfsync always``).

For each store, after ``--stored`` synthetic fingerprints are added (``benchmarks/service.py``'s
``Synth``, about 10% planted near copies; through ``Detector``, 10,000 a transaction):

* **in process**: 1, 4 and 16 worker processes (``--workers``), each its own
  ``Detector.open(target)``, add fresh fingerprints one at a time (``add_fingerprint``, its own
  transaction) for ``--seconds``, then check fresh ones (``check_fingerprint``, 70% new, 15%
  near copies, 15% exact copies of stored pages); adds and checks a second over all workers,
  p50 and p99 of one call's wall time;
* **round trips** a check and an add makes to Redis (every call of the store's engine), and the
  **engine's memory** a page: ``used_memory`` of ``INFO memory`` summed over the nodes, before and
  after the pages were added, over the pages (PostgreSQL: the database's size; SQLite: the file);
* **through the service**: ``neardup serve --workers 2`` over the store, single adds
  (``POST /v1/fingerprints/add``, group commits) at 1, 4 and 16 connections and checks at 16
  (``benchmarks/service.py``'s closed-loop clients);
* **kill -9**: 4 workers adding, one killed with SIGKILL mid-run, then the Redis server killed
  with SIGKILL and restarted: acknowledged adds (each worker notes a URL once ``add`` returned)
  missing afterwards;
* a **cost model** from the measured figures: engine memory and nodes for 10^9 pages, and the
  worker processes a crawl of 10^4 pages a second needs at the measured per-worker rate.

Usage::

    python benchmarks/shared_store.py [--stored 20000] [--stores sqlite,postgres,redis,redis-cluster]
                                      [--workers 1,4,16] [--seconds 5] [--no-service] [--no-doc]

Writes the section between ``<!-- shared_store:start -->`` and ``<!-- shared_store:end -->`` of
docs/benchmarks.md; the JSON summary is the last stdout line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import service as S
from _common import DOC, REPO_ROOT, loadavg, logger, machine_line, replace_section, table

from neardup.detector.core import Detector
from neardup.errors import NeardupError
from neardup.fingerprint.core import Fingerprint

sys.path.insert(0, str(REPO_ROOT / "tests"))
import redisserver  # noqa: E402

log = logger("shared_store", clock=True)
STORES = ("sqlite", "postgres", "redis", "redis-cluster")


@contextmanager
def started(kind: str, folder: Path) -> Iterator[dict[str, Any]]:
    """The store's target (and its server's handles)."""
    if kind == "sqlite":
        yield {"target": str(folder / "shared.db")}
    elif kind == "postgres":
        with S.pg_server(True) as pg:
            yield {"target": pg.new_database(), "pg": pg}
    elif kind == "redis":
        with redisserver.standalone() as url:
            yield {"target": f"{url}?prefix=bench", "ports": [int(url.split(":")[2].split("/")[0])]}
    else:
        with redisserver.cluster() as url:
            seed = int(url.split(":")[2])
            nodes = redisserver._cli(seed, "CLUSTER", "NODES")
            ports = sorted(int(line.split()[1].split(":")[1].split("@")[0]) for line in nodes.splitlines() if line)
            yield {"target": f"{url}?prefix=bench", "ports": ports}


def engine_bytes(store: dict[str, Any]) -> int:
    """Memory the engine holds for the store: Redis ``used_memory`` over the nodes, PostgreSQL
    the database's size, SQLite the file and its WAL."""
    if "ports" in store:
        total = 0
        for port in store["ports"]:
            info = redisserver._cli(port, "INFO", "memory")
            total += int(next(line.split(":")[1] for line in info.splitlines() if line.startswith("used_memory:")))
        return total
    if "pg" in store:
        import psycopg

        with psycopg.connect(store["target"], autocommit=True) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            return int(row[0]) if row else 0
    path = Path(store["target"])
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def fill(target: str, n: int, synth: S.Synth) -> dict[str, Any]:
    return S.preload(target, n, synth, [])


def expire_all(target: str) -> dict[str, Any]:
    """Every page of the store expired by one ``Detector.expire`` call (the fill, the workers'
    and the service's adds): pages, wall and CPU seconds of this process (the client's)."""
    with Detector.open(target) as det:
        before = det.store.page_count()
        wall, cpu = time.perf_counter(), time.process_time()
        gone = det.expire(0.0)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        left = det.store.page_count()
    return {"pages": gone, "stored_before": before, "left": left, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def _fresh(rng: np.random.Generator, spec: Any, i: int, tag: str) -> tuple[str, Fingerprint]:
    value = int(rng.integers(0, 2**63, dtype=np.int64))
    digest = hashlib.sha256(f"{tag}-{i}-{value:x}".encode()).hexdigest()
    sketch = S.SKETCH_HEADER + rng.bytes(60)
    return (f"https://w{i % 397}.example/{tag}/{i}",
            Fingerprint(simhash=value, digest=digest, spec=spec, bits=64, tokens=120, length=900, features=110,
                        sketch=sketch))


def _worker(target: str, k: int, seconds: float, probes: list[tuple[str, Fingerprint]], barrier: Any, out: Any,
            acked: str | None) -> None:
    rng = np.random.default_rng(1000 + k)
    det = Detector.open(target)
    spec = det.config.spec
    calls = [0]
    store: Any = det.store
    if hasattr(store, "_call"):
        inner = store._call

        def counted(fn: Any, *args: Any) -> Any:
            calls[0] += 1
            return inner(fn, *args)
        store._call = counted
    barrier.wait()
    adds: list[float] = []
    tag = f"k{k}-{os.getpid()}"
    end = time.perf_counter() + seconds
    note = open(acked, "a", buffering=1) if acked else None  # noqa: SIM115 - closed below
    i = errors = 0
    before = calls[0]
    while time.perf_counter() < end:
        url, fp = _fresh(rng, spec, i, tag)
        i += 1
        t = time.perf_counter()
        try:
            det.add_fingerprint(url, fp)
        except NeardupError:  # a store locked past its timeout: counted, the worker goes on
            errors += 1
            continue
        adds.append(time.perf_counter() - t)
        if note:
            note.write(url + "\n")
    counting = hasattr(store, "_call")
    add_calls = (calls[0] - before) / max(1, len(adds)) if counting else None
    checks: list[float] = []
    if not acked:
        before = calls[0]
        end = time.perf_counter() + seconds
        j = 0
        while time.perf_counter() < end:
            url, fp = probes[(j + 997 * k) % len(probes)]
            t = time.perf_counter()
            j += 1
            try:
                det.check_fingerprint(url, fp)
            except NeardupError:
                errors += 1
                continue
            checks.append(time.perf_counter() - t)
        check_calls = (calls[0] - before) / max(1, len(checks)) if counting else None
    else:
        check_calls = None
    det.close()
    out.put({"adds": adds, "checks": checks, "add_calls": add_calls, "check_calls": check_calls, "errors": errors})


def _probes(synth: S.Synth, n: int = 3000) -> list[tuple[str, Fingerprint]]:
    rng = random.Random(3)
    out = []
    for j in range(n):
        r = rng.random()
        if r < 0.70 or not synth.stored_simhash:
            (value, digest), sketch = synth.fresh(), synth.sketch()
        elif r < 0.85:
            k = rng.randrange(len(synth.stored_simhash))
            value, digest, sketch = synth.near_of(synth.stored_simhash[k]), synth.fresh()[1], synth.stored_sketch[k]
        else:
            k = rng.randrange(len(synth.stored_simhash))
            value, digest, sketch = synth.fresh()[0], synth.stored_digest[k], synth.stored_sketch[k]
        out.append((f"https://probe{j % 101}.example/{j}", synth.fingerprint(value, digest, sketch)))
    return out


def in_process(target: str, workers: int, seconds: float, probes: list[tuple[str, Fingerprint]]) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(target, k, seconds, probes, barrier, out, None)) for k in range(workers)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    adds = np.array([x for r in results for x in r["adds"]])
    checks = np.array([x for r in results for x in r["checks"]])

    def pct(a: np.ndarray, q: float) -> float:
        return round(float(np.percentile(a, q) * 1000), 2) if len(a) else float("nan")
    return {"workers": workers, "adds_per_s": round(len(adds) / seconds, 1), "add_p50_ms": pct(adds, 50),
            "add_p99_ms": pct(adds, 99), "checks_per_s": round(len(checks) / seconds, 1),
            "check_p50_ms": pct(checks, 50), "check_p99_ms": pct(checks, 99),
            "add_round_trips": None if results[0]["add_calls"] is None else
            round(float(np.mean([r["add_calls"] for r in results])), 1),
            "check_round_trips": None if results[0]["check_calls"] is None else
            round(float(np.mean([r["check_calls"] for r in results])), 1),
            "errors": sum(r["errors"] for r in results)}


#: fingerprints a request of the batch endpoint (the service benchmark's default)
BATCH = 100


def through_service(target: str, synth: S.Synth, seconds: float) -> list[dict[str, Any]]:
    rows = []
    with S.serve(target, 2) as server:
        for conns in (1, 4, 16):
            r = S.closed_loop("POST /v1/fingerprints/add", server, None, S.FpAdds(server.port, synth, f"svc{conns}"),
                              conns, duration=seconds)
            rows.append({"endpoint": "add", "conns": conns, "per_s": round(r.rps, 1), "p50_ms": round(r.pct(50), 2),
                         "p99_ms": round(r.pct(99), 2), "errors": r.errors})
        for conns in (4, 16):  # the batch endpoint: BATCH fingerprints a request, one transaction each
            r = S.closed_loop("POST /v1/fingerprints/add/batch", server, None,
                              S.FpAdds(server.port, synth, f"svcb{conns}", batch=BATCH), conns, duration=seconds)
            rows.append({"endpoint": f"add batch ({BATCH}), fingerprints", "conns": conns,
                         "per_s": round(r.rps * BATCH, 1), "p50_ms": round(r.pct(50), 2),
                         "p99_ms": round(r.pct(99), 2), "errors": r.errors})
        r = S.closed_loop("POST /v1/fingerprints/check", server, None, S.FpChecks(server.port, synth), 16,
                          duration=seconds)
        rows.append({"endpoint": "check", "conns": 16, "per_s": round(r.rps, 1), "p50_ms": round(r.pct(50), 2),
                     "p99_ms": round(r.pct(99), 2), "errors": r.errors + r.unexpected})
    return rows


def kill_test(kind: str, folder: Path, seconds: float) -> dict[str, Any]:
    """4 workers adding; one SIGKILLed mid-run; then (Redis) the server SIGKILLed and restarted."""
    with ExitStack() as stack:
        if kind == "redis":
            base = tempfile.mkdtemp(prefix="neardup-bench-kill-")
            (port,) = redisserver._free_ports(1)
            node = [redisserver.start_node(base, port)]
            stack.callback(lambda: node[0].kill())
            target = f"redis://127.0.0.1:{port}/0?prefix=kill"
        else:
            target = stack.enter_context(started(kind, folder / "kill"))["target"] if kind != "sqlite" \
                else str(folder / "kill.db")
        ctx = mp.get_context("spawn")
        barrier, out = ctx.Barrier(4), ctx.Queue()
        notes = [str(folder / f"acked-{kind}-{k}.txt") for k in range(4)]
        procs = [ctx.Process(target=_worker, args=(target, k, seconds, [], barrier, out, notes[k])) for k in range(4)]
        for p in procs:
            p.start()
        time.sleep(seconds / 2 + 3)
        os.kill(procs[0].pid or 0, signal.SIGKILL)
        for p in procs[1:]:
            p.join(600)
        procs[0].join(30)
        node_killed = False
        if kind == "redis":
            node[0].kill()
            node[0].wait(30)
            node[0] = redisserver.start_node(base, port)
            node_killed = True
        acked = [u for n in notes if Path(n).exists() for u in Path(n).read_text().splitlines()]
        with Detector.open(target) as det:
            lost = sum(1 for u in acked if det.history(u) is None)
        return {"store": kind, "acknowledged": len(acked), "lost": lost, "worker_killed": True,
                "server_killed": node_killed}


def cost_model(rows: list[dict[str, Any]]) -> list[str]:
    """Memory and stores for 10^9 pages at 10^4 adds a second, from the measured figures. A
    store's writers are serialised (one lease, one advisory lock, one SQLite write lock), so
    its adds a second are the best total measured whatever the number of workers; past that,
    a crawl needs several stores (prefixes, split by host)."""
    lines = []
    for r in rows:
        per_page = r.get("bytes_per_page")
        best = max((w["adds_per_s"] for w in r["in_process"]), default=0.0)
        checks = max((w["checks_per_s"] for w in r["in_process"]), default=0.0)
        if not per_page or not best:
            continue
        tib = per_page * 1e9 / 2**40
        lines.append(f"- {r['store']}: {per_page:.0f} B a page → {tib:.2f} TiB for 10^9 pages "
                     f"({int(np.ceil(per_page * 1e9 / (48 * 2**30)))} nodes of 48 GiB of data); at most "
                     f"{best:.0f} adds/s and {checks:.0f} checks/s a store on this machine → "
                     f"{int(np.ceil(1e4 / best))} stores (prefixes, split by host) for 10^4 adds/s")
    return lines


def report(rows: list[dict[str, Any]], kills: list[dict[str, Any]], command: str, load: str | None) -> str:
    out = ["<!-- shared_store:start -->",
           "### Many workers, one memory: shared stores side by side (`benchmarks/shared_store.py`)", "",
           f"`{command}`; {machine_line()}; load {load or 'not recorded'} (at the end of the run).", ""]
    body = []
    for r in rows:
        for w in r["in_process"]:
            body.append([r["store"], w["workers"], w["adds_per_s"], w["add_p50_ms"], w["add_p99_ms"],
                         w["checks_per_s"], w["check_p50_ms"], w["check_p99_ms"], w["add_round_trips"] or "-",
                         w["check_round_trips"] or "-", w["errors"]])
    out += ["In process (`Detector.open(target)` per worker process, one call at a time; wall ms; engine calls:",
            "round trips to Redis, counted in the store):", ""]
    out += table(["store", "workers", "adds/s", "add p50", "add p99", "checks/s", "check p50", "check p99",
                  "engine calls/add", "engine calls/check", "errors"], body)
    out += ["", "Engine memory a page (after the fill):", ""]
    out += table(["store", "pages", "bytes/page", "fill s"],
                 [[r["store"], r["pages"], r.get("bytes_per_page"), r["fill_seconds"]] for r in rows])
    expired = [r for r in rows if r.get("expire")]
    if expired:
        out += ["", "Expiry: every page of the store (the fill and every add of the runs above) forgotten by one "
                "`Detector.expire` call, in batches of 1,000 in one transaction; CPU is the client's:", ""]
        out += table(["store", "pages expired", "left", "wall s", "client CPU s", "pages/s"],
                     [[r["store"], r["expire"]["pages"], r["expire"]["left"], r["expire"]["wall_s"],
                       r["expire"]["cpu_s"], round(r["expire"]["pages"] / max(r["expire"]["wall_s"], 1e-9))]
                      for r in expired])
    svc = [[r["store"], s["endpoint"], s["conns"], s["per_s"], s["p50_ms"], s["p99_ms"], s["errors"]]
           for r in rows for s in r.get("service", [])]
    if svc:
        out += ["", "Through the service (`neardup serve --workers 2`; single adds are group-committed; a batch "
                "request is one transaction, its rate in fingerprints a second, its latency a request's):", ""]
        out += table(["store", "request", "conns", "per s", "p50 ms", "p99 ms", "errors"], svc)
    if kills:
        out += ["", "kill -9 under load (4 workers adding; one SIGKILLed, then the Redis server):", ""]
        out += table(["store", "acknowledged", "lost", "server killed too"],
                     [[k["store"], k["acknowledged"], k["lost"], k["server_killed"]] for k in kills])
    out += ["", "Cost model from these figures:", "", *cost_model(rows), "",
            "Every store serialises its writers (the Redis lease, PostgreSQL's advisory lock, SQLite's write "
            "lock): adds a second do not grow with workers, and waiting writers' p99 grows with their number "
            "(SQLite's 10 s lock timeout is the `errors` at 16 workers). Checks need no lock and scale until the "
            "cores are spent. Every store keeps the whole index in each worker process (rebuilt from the change "
            "log), and a Redis Cluster keeps one store on one node (one hash tag): the cluster adds no capacity "
            "to one store yet, only room for more stores.", "", "<!-- shared_store:end -->"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stored", type=float, default=2e4)
    ap.add_argument("--stores", default=",".join(STORES))
    ap.add_argument("--workers", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--no-service", action="store_true")
    ap.add_argument("--no-kill", action="store_true")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--from-json", default=None, help="only re-write the section from the JSON line of a run")
    ap.add_argument("--command", default=None, help="with --from-json: the run's command, where its JSON has none")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text().strip().splitlines()[-1])
        replace_section(DOC, "<!-- shared_store:start -->", "<!-- shared_store:end -->",
                        report(saved["rows"], saved["kills"], saved.get("command") or args.command or "?",
                               saved.get("load")))
        return 0
    stores = [s for s in args.stores.split(",") if s]
    for s in stores:
        if s not in STORES:
            ap.error(f"unknown store {s!r}; choose from {', '.join(STORES)}")
    rows: list[dict[str, Any]] = []
    kills: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="neardup-shared-") as tmp:
        folder = Path(tmp)
        for kind in stores:
            with started(kind, folder) as store:
                synth = S.Synth(seed=11)
                empty = engine_bytes(store)
                filled = fill(store["target"], int(args.stored), synth)
                used = engine_bytes(store) - empty
                row: dict[str, Any] = {"store": kind, "pages": filled["pages"],
                                       "fill_seconds": round(filled["seconds"], 1),
                                       "bytes_per_page": round(used / max(1, filled["pages"]))}
                log(f"{kind}: {filled['pages']} pages in {filled['seconds']:.1f} s, {row['bytes_per_page']} B/page")
                probes = _probes(synth)
                row["in_process"] = []
                for w in (int(x) for x in args.workers.split(",")):
                    r = in_process(store["target"], w, args.seconds, probes)
                    log(f"  {w} workers: {r}")
                    row["in_process"].append(r)
                if not args.no_service:
                    row["service"] = through_service(store["target"], synth, args.seconds)
                    log(f"  service: {row['service']}")
                row["expire"] = expire_all(store["target"])
                log(f"  expire: {row['expire']}")
                rows.append(row)
            if not args.no_kill and kind in ("sqlite", "postgres", "redis"):
                kills.append(kill_test(kind, folder, args.seconds))
                log(f"  kill -9: {kills[-1]}")
    command = "python benchmarks/shared_store.py " + " ".join(argv if argv is not None else sys.argv[1:])
    load = loadavg()
    text = report(rows, kills, command.strip(), load)
    if not args.no_doc:
        replace_section(DOC, "<!-- shared_store:start -->", "<!-- shared_store:end -->", text)
    print(text, file=sys.stderr)
    print(json.dumps({"benchmark": "shared_store", "command": command.strip(), "load": load, "rows": rows,
                      "kills": kills}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Throughput and latency of the HTTP service (``neardup serve``) on loopback.

For each store (SQLite file, PostgreSQL database) and each server (``neardup serve
--workers 1`` and ``--workers 2``) the store is first pre-loaded with ``--preload`` synthetic
fingerprints (about 10% of them planted near copies) plus the real fingerprints of every
other page of ``shared/corpus/scrapinghub-aeb`` (through :class:`neardup.Detector`, in one
transaction per 10,000 pages, before the server starts); then closed-loop clients measure:

* ``POST /v1/fingerprints/check``: fingerprints computed here (synthetic: 70% fresh, 15%
  near copies of stored pages with 1-3 bits flipped, 15% digests of stored pages; every
  verdict is checked against what it must be), at 1, 4 and 32 concurrent connections;
* ``POST /v1/fingerprints/check/batch``: the same mix, ``--batch`` (100) fingerprints per
  request, every verdict checked, 4 connections (requests/s and fingerprints/s);
* ``POST /v1/check``: the HTML of the 181 scrapinghub-aeb pages, decoded as
  :class:`neardup.Client` does, at 2 connections per worker;
* ``POST /v1/fingerprints/add``: fresh synthetic fingerprints, unique URLs, 8 connections;
* ``POST /v1/fingerprints/add/batch``: ``--batch`` fresh fingerprints per request (one
  transaction each), 4 connections;

and requests/s, p50/p99 latency, errors (connection failures and non-200 answers) and the
CPU seconds the server processes (and PostgreSQL) used per request. A *sustained* run sends
``--sustained`` fingerprint checks (10^5 by default) to ``--sustained-on`` configurations
(default ``sqlite:2,postgres:2``). The baseline for page checks is the extractor alone on the
same cores: ``extract_main_content(html, extractor="accurate")`` over the same pages in as
many forked processes as the server has workers, right after each page row. An in-process
table splits a request's CPU between the Detector call, the ASGI app (with and without its
``Guard`` middleware) and the extractor.

The load generator is this process: one thread per connection, HTTP/1.1 keep-alive on raw
sockets with pre-encoded requests (``TCP_NODELAY``, one ``sendall`` per request), so the
client costs a few tens of microseconds of CPU per request (reported). Latency is measured
from just before the request is sent to the end of the response body.

Usage::

    python benchmarks/service.py --quick        # < 1 minute: SQLite, small store, short runs
    python benchmarks/service.py                # everything (about 15 minutes on 2 cores)

PostgreSQL: a throwaway server is started (``initdb``/``pg_ctl`` as in tests/pgserver.py, with
``fsync`` on unless ``--pg-fsync off``), or ``NEARDUP_BENCH_PG=postgresql://...`` names a
server to create a database on. Progress goes to stderr, the results into the ``service``
section of ``docs/benchmarks.md`` (between ``<!-- service:start -->`` and
``<!-- service:end -->``; ``--no-doc`` to skip; ``--quick`` skips it unless ``--doc``) and a
JSON summary is the last line of stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import platform
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import CORPUS as SHARED_CORPUS
from _common import DOC, REPO_ROOT, cpu_model, loadavg, logger, memory_kib, replace_section, versions
from _corpus import read_page, read_tsv

import neardup
from neardup.detector.core import Detector
from neardup.fingerprint.core import DEFAULT_CONFIG, Fingerprint
from neardup.fingerprint.extract import decode, extract_main_content

CORPUS = SHARED_CORPUS / "scrapinghub-aeb"
START, END = "<!-- service:start -->", "<!-- service:end -->"
CLK = os.sysconf("SC_CLK_TCK")

log = logger(clock=True)


# -- machine ------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    found = versions(("neardup", "fastapi", "starlette", "uvicorn", "pydantic", "httpx", "h11", "anyio", "psycopg",
                      "psycopg-pool", "trafilatura", "lxml", "numpy", "numba", "uvloop", "httptools"), missing=None)
    found["sqlite"] = sqlite3.sqlite_version
    return {"cpu_model": cpu_model(""), "nproc": os.cpu_count(), "mem_gib": round((memory_kib() or 0) / 2**20, 1),
            "python": platform.python_version(), "platform": platform.platform(), "versions": found}


def source_state() -> dict[str, Any]:
    """The commit of the checkout and its uncommitted changes under src/ (what the servers run)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                                  check=False).stdout
        except OSError:
            return ""
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or None,
            "dirty": [line[3:] for line in git("status", "--porcelain", "--", "src").splitlines() if len(line) > 3]}


def changed_between(a: str | None, b: str | None) -> str:
    """', changing `f`, ...' for the files under src/ that differ between two commits."""
    if not a or not b or a == b:
        return ""
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "diff", "--name-only", a, b, "--", "src"],
                             capture_output=True, text=True, check=False).stdout.split()
    except OSError:
        return ""
    return (", which changed " + ", ".join(f"`{f}`" for f in out)) if out else ""


# -- CPU accounting ----------------------------------------------------------------------------
def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def _all_procs() -> Iterator[tuple[int, int, int]]:
    """(pid, ppid, pgid) of every process."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            yield int(entry), int(fields[1]), int(fields[2])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def group_cpu(pgid: int) -> dict[int, float]:
    """CPU seconds so far of every process of a process group, by pid."""
    return {pid: _proc_cpu(pid) for pid, _, g in _all_procs() if g == pgid}


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU used between two snapshots by the processes alive at the second one (a process
    that exited in between takes its CPU with it: see the restart count)."""
    return sum(c - before.get(pid, 0.0) for pid, c in after.items())


def tree_cpu(root: int) -> float:
    procs = list(_all_procs())
    return _proc_cpu(root) + sum(_proc_cpu(pid) for pid, ppid, _ in procs if ppid == root)


# -- PostgreSQL ----------------------------------------------------------------------------------
@dataclass
class PgServer:
    dsn: str
    postmaster: int | None  # None: an external server (its CPU is not counted)
    fsync: bool | None

    def cpu(self) -> float:
        return tree_cpu(self.postmaster) if self.postmaster else 0.0

    def new_database(self) -> str:
        import psycopg

        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.dsn.rsplit("/", 1)[0] + "/" + name

    def version(self) -> str:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "unknown"


@contextmanager
def pg_server(fsync: bool) -> Iterator[PgServer]:
    """``NEARDUP_BENCH_PG``, or a throwaway server started like the tests' (tests/pgserver.py)."""
    existing = os.environ.get("NEARDUP_BENCH_PG")
    if existing:
        yield PgServer(existing, None, None)
        return
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    import pgserver

    if not pgserver.installed():
        raise RuntimeError("PostgreSQL server binaries not found (initdb, pg_ctl); set NEARDUP_BENCH_PG or use "
                           "--stores sqlite")
    with pgserver.throwaway_server(fsync=fsync, max_connections=200) as (dsn, data):
        postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
        yield PgServer(dsn, postmaster, fsync)


# -- the corpus and the synthetic fingerprints ----------------------------------------------------
@dataclass
class RealPage:
    url: str
    html: str  # decoded as neardup.Client does
    fp: Fingerprint


def load_corpus(limit: int | None) -> list[tuple[str, str]]:
    if not (CORPUS / "manifest.tsv").is_file():
        raise SystemExit(f"corpus not found at {CORPUS} (set NEARDUP_CORPUS)")
    pages = []
    for row in read_tsv(CORPUS / "manifest.tsv")[:limit]:
        raw = read_page(CORPUS / row["file"])
        text, _ = decode(raw, None)
        pages.append((row["url"], text))
    return pages


SKETCH_HEADER = (120).to_bytes(4, "little")
"""The shingle count of every synthetic sketch. Each synthetic page has a random sketch of its
own (the service refuses a fingerprint without the sketch its spec has); a near copy carries
the sketch of the page it copies, so the verification confirms planted copies and refutes
chance SimHash neighbours, as it would for real pages."""


class Synth:
    """Random fingerprints of the default spec; stored ones are remembered for probes."""

    def __init__(self, seed: int = 1) -> None:
        self.rng = np.random.default_rng(seed)
        self.spec = DEFAULT_CONFIG.spec
        self.stored_simhash: list[int] = []
        self.stored_digest: list[str] = []
        self.stored_sketch: list[bytes] = []
        self.serial = 0

    def fresh(self) -> tuple[int, str]:
        """A random 64-bit SimHash and a digest nobody else has."""
        self.serial += 1
        value = int(self.rng.integers(0, 2**63, dtype=np.int64)) << 1 | int(self.rng.integers(0, 2))
        return value, hashlib.sha256(f"fresh-{self.serial}-{self.rng.random()}".encode()).hexdigest()

    def sketch(self) -> bytes:
        """A random sketch of the default spec (an unrelated page's)."""
        return SKETCH_HEADER + self.rng.bytes(DEFAULT_CONFIG.sketch_bins)

    def near_of(self, value: int) -> int:
        for bit in self.rng.choice(64, size=int(self.rng.integers(1, 4)), replace=False):
            value ^= 1 << int(bit)
        return value

    def fingerprint(self, simhash: int, digest: str, sketch: bytes) -> Fingerprint:
        return Fingerprint(simhash=simhash, digest=digest, spec=self.spec, bits=64, tokens=120, length=900,
                           features=110, sketch=sketch)

    def body(self, url: str, simhash: int, digest: str, sketch: bytes) -> dict[str, Any]:
        return {"url": url, "simhash": f"{simhash:016x}", "digest": digest, "spec": self.spec, "tokens": 120,
                "length": 900, "features": 110, "sketch": sketch.hex()}


def preload(db: str, n: int, synth: Synth, real: list[RealPage]) -> dict[str, Any]:
    """``n`` synthetic pages (about 10% planted near copies of earlier ones) and every other
    real page, through Detector.add_fingerprint, 10,000 pages per transaction."""
    t0 = time.perf_counter()
    det = Detector.open(db)
    statuses: Counter[str] = Counter()
    chunk = 10_000
    try:
        items: list[tuple[str, Fingerprint]] = [(p.url, p.fp) for p in real[::2]]
        rng = random.Random(5)
        for i in range(n):
            if synth.stored_simhash and rng.random() < 0.1:
                k = rng.randrange(len(synth.stored_simhash))
                value, sketch = synth.near_of(synth.stored_simhash[k]), synth.stored_sketch[k]
                digest = hashlib.sha256(f"planted-{i}".encode()).hexdigest()
            else:
                (value, digest), sketch = synth.fresh(), synth.sketch()
            synth.stored_simhash.append(value)
            synth.stored_digest.append(digest)
            synth.stored_sketch.append(sketch)
            items.append((f"https://h{i % 997}.example/pre/{i}", synth.fingerprint(value, digest, sketch)))
        for start in range(0, len(items), chunk):
            with det._writing():  # one transaction per chunk (Detector has no public bulk add of fingerprints)
                for url, fp in items[start:start + chunk]:
                    statuses[det.add_fingerprint(url, fp).status] += 1
        pages = det.stats()["pages"]
    finally:
        det.close()
    return {"pages": pages, "seconds": time.perf_counter() - t0, "statuses": dict(statuses)}


# -- the server --------------------------------------------------------------------------------
@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    command: str
    log: Any

    def cpu(self) -> dict[int, float]:
        return group_cpu(self.proc.pid)

    def workers(self) -> set[int]:
        return {pid for pid, ppid, _ in _all_procs() if ppid == self.proc.pid and b"spawn_main" in _cmdline(pid)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(db: str, workers: int) -> Iterator[Server]:
    """``python -m neardup.cli serve --workers N`` in its own process group."""
    port = _free_port()
    args = ["serve", "--db", db, "--port", str(port), "--workers", str(workers)]
    cmd = [sys.executable, "-m", "neardup.cli", *args]
    env = dict(os.environ)
    shown = "python -m neardup.cli " + " ".join(args)
    shown = shown.replace(db, "<postgresql://...>" if db.startswith("postgresql") else
                          "<redis://...>" if db.startswith("redis") else "<store.db>")
    shown = shown.replace(f"--port {port}", "--port <free>")
    logf = tempfile.TemporaryFile()  # noqa: SIM115 - closed when the server stops
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=logf, start_new_session=True, env=env)
    t0 = time.perf_counter()
    try:
        while True:
            if proc.poll() is not None:
                logf.seek(0)
                raise RuntimeError(f"server exited ({proc.returncode}): {logf.read().decode()[-2000:]}")
            if time.perf_counter() - t0 > 180:
                raise RuntimeError("server did not answer /healthz in 180 s")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if s.recv(100).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                time.sleep(0.2)
        if workers > 1:  # every worker must be up (the supervisor answers through the first)
            deadline = time.perf_counter() + 120
            while sum(1 for pid, ppid, _ in _all_procs()
                      if ppid == proc.pid and b"spawn_main" in _cmdline(pid)) < workers:
                if time.perf_counter() > deadline:
                    raise RuntimeError("workers did not start")
                time.sleep(0.2)
            time.sleep(1.0)
        log(f"  server up in {time.perf_counter() - t0:.1f} s: {shown}")
        yield Server(proc, port, shown, logf)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        logf.seek(0)
        tail = logf.read().decode("utf-8", "replace")
        if "Traceback" in tail:
            log("  server stderr:\n" + tail[-3000:])
        logf.close()


# -- the load generator ---------------------------------------------------------------------------
class Conn:
    """One HTTP/1.1 keep-alive connection on a raw socket."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self.buf = bytearray()

    def _connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.buf = s, bytearray()
        return s

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def request(self, raw: bytes) -> tuple[int, bytes]:
        s = self.sock or self._connect()
        s.sendall(raw)
        buf = self.buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            chunk = s.recv(65536)
            if not chunk:
                self.close()
                raise ConnectionError("server closed the connection")
            buf += chunk
        head = bytes(buf[:end]).decode("latin-1")
        status = int(head[9:12])
        length = 0
        close = False
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        total = end + 4 + length
        while len(buf) < total:
            chunk = s.recv(max(65536, total - len(buf)))
            if not chunk:
                self.close()
                raise ConnectionError("server closed the connection mid-body")
            buf += chunk
        body = bytes(buf[end + 4:total])
        del buf[:total]
        if close:
            self.close()
        return status, body


def post(path: str, port: int, body: dict[str, Any]) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def verdict_status(body: bytes) -> str:
    i = body.find(b'"status":"')
    if i < 0:
        return "?"
    j = body.find(b'"', i + 10)
    return body[i + 10:j].decode()


def verdict_statuses(body: bytes) -> list[str]:
    """The statuses of a ``{"verdicts": [...]}`` answer, in order."""
    try:
        return [str(v.get("status")) for v in json.loads(body)["verdicts"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


@dataclass
class Result:
    name: str
    conns: int
    requests: int
    seconds: float
    latencies: np.ndarray = field(repr=False)
    errors: int
    error_kinds: dict[str, int]
    unexpected: int
    statuses: dict[str, int]
    client_cpu: float
    server_cpu: float
    pg_cpu: float
    windows: list[float] = field(default_factory=list)
    restarts: int = 0  # worker processes that appeared during the run (uvicorn restarted a worker)
    error_samples: dict[str, str] = field(default_factory=dict)
    per_request: int = 1  # fingerprints (or pages) per request
    server_cpu_split: list[float] = field(default_factory=list)  # CPU seconds of each server process, largest first

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def ips(self) -> float:
        """Items (fingerprints) per second: requests/s times the items per request."""
        return self.rps * self.per_request

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies, q) * 1000) if len(self.latencies) else float("nan")

    def row(self) -> dict[str, Any]:
        n = max(self.requests, 1)
        return {"endpoint": self.name, "conns": self.conns, "requests": self.requests,
                "per_request": self.per_request, "items_per_s": round(self.ips, 1),
                "seconds": round(self.seconds, 2), "rps": round(self.rps, 1),
                "p50_ms": round(self.pct(50), 2), "p99_ms": round(self.pct(99), 2),
                "p999_ms": round(self.pct(99.9), 2), "max_ms": round(float(self.latencies.max() * 1000), 1)
                if len(self.latencies) else None,
                "errors": self.errors, "error_kinds": self.error_kinds, "unexpected_verdicts": self.unexpected,
                "statuses": self.statuses, "client_cpu_ms_per_req": round(self.client_cpu / n * 1000, 3),
                "server_cpu_ms_per_req": round(self.server_cpu / n * 1000, 3),
                "pg_cpu_ms_per_req": round(self.pg_cpu / n * 1000, 3), "windows_rps": self.windows,
                "worker_restarts": self.restarts, "error_samples": self.error_samples,
                "server_cpu_s_by_process": self.server_cpu_split}


def closed_loop(name: str, server: Server, pg: PgServer | None, make: Callable[[int], tuple[bytes, Any]],
                conns: int, *, duration: float | None = None, total: int | None = None,
                window: float = 10.0, per_request: int = 1) -> Result:
    """``conns`` threads, each on its own keep-alive connection, send make(i) back to back
    until ``duration`` seconds have passed or ``total`` requests were sent. make(i) returns
    the raw request and the verdict status it must get (None: any), or for a batch request a
    tuple with the status each verdict must have, in order (None: any but ``error``);
    *unexpected* then counts verdicts, and a missing or extra verdict counts too."""
    counter = itertools.count()
    stop = threading.Event()
    lats: list[list[float]] = [[] for _ in range(conns)]
    stamps: list[list[float]] = [[] for _ in range(conns)]
    errors: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    samples: dict[str, str] = {}  # the first error of each kind
    unexpected = [0]
    lock = threading.Lock()

    def run(k: int) -> None:
        conn = Conn(server.port)
        mine, when = lats[k], stamps[k]
        local: Counter[str] = Counter()
        bad = 0
        while not stop.is_set():
            i = next(counter)
            if total is not None and i >= total:
                break
            raw, expect = make(i)
            t = time.perf_counter()
            try:
                status, body = conn.request(raw)
            except (OSError, ValueError) as exc:
                with lock:
                    errors[type(exc).__name__] += 1
                    samples.setdefault(type(exc).__name__, f"{exc}"[:300])
                conn.close()
                continue
            done = time.perf_counter()
            if status != 200:
                with lock:
                    errors[f"HTTP {status}"] += 1
                    samples.setdefault(f"HTTP {status}", body[:300].decode("utf-8", "replace"))
                continue
            mine.append(done - t)
            when.append(done)
            if isinstance(expect, tuple):
                gots = verdict_statuses(body)
                local.update(gots)
                bad += abs(len(gots) - len(expect))
                bad += sum(1 for g, e in zip(gots, expect) if (g != e if e is not None else g == "error"))
                continue
            got = verdict_status(body)
            local[got] += 1
            if expect is not None and got != expect:
                bad += 1
        conn.close()
        with lock:
            statuses.update(local)
            unexpected[0] += bad

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(conns)]
    cpu0, srv0, pg0, workers0 = time.process_time(), server.cpu(), pg.cpu() if pg else 0.0, server.workers()
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    if duration is not None:
        time.sleep(duration)
        stop.set()
    for th in threads:
        th.join()
    seconds = time.perf_counter() - t0
    cpu1, srv1, pg1, workers1 = time.process_time(), server.cpu(), pg.cpu() if pg else 0.0, server.workers()
    allstamps = np.sort(np.concatenate([np.asarray(s) for s in stamps])) if any(stamps) else np.zeros(0)
    windows = []
    if len(allstamps) and seconds > 2 * window:
        edges = np.arange(t0, t0 + seconds + window, window)
        counts, _ = np.histogram(allstamps, bins=edges)
        windows = [round(c / window, 1) for c in counts[:-1]]  # the last window is partial
    latencies = np.concatenate([np.asarray(x) for x in lats]) if any(lats) else np.zeros(0)
    return Result(name, conns, len(latencies) + sum(errors.values()), seconds, latencies, sum(errors.values()),
                  dict(errors), unexpected[0], dict(statuses), cpu1 - cpu0, cpu_delta(srv0, srv1), pg1 - pg0, windows,
                  len(workers1 - workers0), samples, per_request,
                  sorted((round(c - srv0.get(pid, 0.0), 2) for pid, c in srv1.items()), reverse=True))


# -- workloads -----------------------------------------------------------------------------------
class FpChecks:
    """Pre-encoded fingerprint checks: 70% fresh (new), 15% near copies of stored pages
    (1-3 bits flipped), 15% digests of stored pages (exact). With ``batch`` > 0, requests to
    ``/v1/fingerprints/check/batch`` of ``batch`` such fingerprints each (expected verdicts
    in order)."""

    def __init__(self, port: int, synth: Synth, pool: int = 6000, seed: int = 3, batch: int = 0) -> None:
        rng = random.Random(seed)
        bodies: list[tuple[dict[str, Any], str]] = []
        stored = len(synth.stored_simhash)
        for j in range(pool):
            r = rng.random()
            url = f"https://probe{j % 101}.example/c/{seed}/{j}"
            if r < 0.70:
                (value, digest), sketch = synth.fresh(), synth.sketch()
                expect = "new"
            elif r < 0.85:
                k = rng.randrange(stored)
                value, digest = synth.near_of(synth.stored_simhash[k]), synth.fresh()[1]
                sketch = synth.stored_sketch[k]
                expect = "near"
            else:
                k = rng.randrange(stored)
                value, digest, sketch = synth.fresh()[0], synth.stored_digest[k], synth.stored_sketch[k]
                expect = "exact"
            bodies.append((synth.body(url, value, digest, sketch), expect))
        self.items: list[tuple[bytes, Any]]
        if batch:
            self.items = [(post("/v1/fingerprints/check/batch", port, {"fingerprints": [b for b, _ in chunk]}),
                           tuple(e for _, e in chunk))
                          for chunk in (bodies[i:i + batch] for i in range(0, pool - batch + 1, batch))]
        else:
            self.items = [(post("/v1/fingerprints/check", port, b), e) for b, e in bodies]

    def __call__(self, i: int) -> tuple[bytes, Any]:
        return self.items[i % len(self.items)]


class FpAdds:
    """Fresh random fingerprints with unique URLs: one per ``/v1/fingerprints/add`` request,
    or ``batch`` per ``/v1/fingerprints/add/batch`` request (any verdict but ``error``)."""

    def __init__(self, port: int, synth: Synth, tag: str, batch: int = 0) -> None:
        self.port, self.tag, self.batch = port, tag, batch
        self.rng = np.random.default_rng(int(hashlib.sha256(tag.encode()).hexdigest()[:8], 16))
        self.spec = synth.spec
        self.lock = threading.Lock()

    def _one(self, i: int, value: int) -> dict[str, Any]:
        digest = hashlib.sha256(f"{self.tag}-{i}".encode()).hexdigest()
        return {"url": f"https://add{i % 499}.example/{self.tag}/{i}", "simhash": f"{value:016x}", "digest": digest,
                "spec": self.spec, "tokens": 120, "length": 900, "features": 110,
                "sketch": (SKETCH_HEADER + (hashlib.sha512(digest.encode()).digest()
                                            * 2)[:DEFAULT_CONFIG.sketch_bins]).hex()}

    def __call__(self, i: int) -> tuple[bytes, Any]:
        n = self.batch or 1
        with self.lock:
            values = [int(v) for v in self.rng.integers(0, 2**63, size=n, dtype=np.int64)]
        if not self.batch:
            return post("/v1/fingerprints/add", self.port, self._one(i, values[0])), None
        body = {"fingerprints": [self._one(i * n + j, v) for j, v in enumerate(values)]}
        return post("/v1/fingerprints/add/batch", self.port, body), (None,) * n


class PageChecks:
    def __init__(self, port: int, real: list[RealPage]) -> None:
        self.items = [(post("/v1/check", port, {"url": p.url, "html": p.html}), None) for p in real]

    def __call__(self, i: int) -> tuple[bytes, str | None]:
        return self.items[i % len(self.items)]


# -- the extractor alone -----------------------------------------------------------------------------
def _extract_worker(pages: list[str], passes: int, what: str, start: Any, out: Any) -> None:
    from neardup.fingerprint.core import fingerprint

    fn = (lambda h: extract_main_content(h, extractor="accurate")) if what == "extract" else \
        (lambda h: fingerprint(h, config=DEFAULT_CONFIG))
    fn(pages[0])  # warm
    start.wait()
    c0, t0 = time.process_time(), time.perf_counter()
    n = 0
    for _ in range(passes):
        for h in pages:
            fn(h)
            n += 1
    out.put((n, time.perf_counter() - t0, time.process_time() - c0))


def extractor_alone(pages: list[str], processes: int, passes: int, what: str = "extract") -> dict[str, Any]:
    """``processes`` forked processes run ``what`` over every page ``passes`` times, at once."""
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_extract_worker, args=(pages, passes, what, start, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    time.sleep(1.0)
    start.set()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    per_proc = [n / s for n, s, _ in results]
    return {"what": what, "processes": processes, "pages": sum(n for n, _, _ in results),
            "pages_per_s_per_process": round(float(np.mean(per_proc)), 2),
            "pages_per_s": round(float(np.mean(per_proc)) * processes, 2),
            "cpu_ms_per_page": round(sum(c for _, _, c in results) / sum(n for n, _, _ in results) * 1000, 2)}


# -- where a fingerprint check's time goes (in-process) -----------------------------------------
def stack_costs(db: str, synth: Synth, n: int, pages: list[RealPage],
                batch: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """CPU per request of the pieces of a fingerprint check and of a page check, on one
    thread: the Detector call, the extractor, and the ASGI app called directly (no socket, no
    HTTP parsing) with and without its ``Guard`` middleware; and a cProfile split of the
    Detector call. Runs in a forked child so that the parent stays free of threads."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_stack_costs_child, args=(db, synth, n, [(p.url, p.html) for p in pages], batch, out))
    proc.start()
    rows, profile = out.get()
    proc.join()
    return rows, profile


def _stack_costs_child(db: str, synth: Synth, n: int, pages: list[tuple[str, str]], batch: int, out: Any) -> None:
    import asyncio

    from neardup.service import create_app

    det = Detector.open(db)
    rng = random.Random(9)
    bodies, fps = [], []
    for j in range(n):
        if rng.random() < 0.15:
            k = rng.randrange(len(synth.stored_simhash))
            value, digest = synth.near_of(synth.stored_simhash[k]), synth.fresh()[1]
            sketch = synth.stored_sketch[k]
        else:
            (value, digest), sketch = synth.fresh(), synth.sketch()
        fps.append((f"https://probe.example/s/{j}", synth.fingerprint(value, digest, sketch)))
        bodies.append(synth.body(f"https://probe.example/s/{j}", value, digest, sketch))
    raw = [json.dumps(b).encode() for b in bodies]
    nb = max(1, n // batch)
    fp_batches = [[fps[(i * batch + j) % n] for j in range(batch)] for i in range(nb)]
    raw_batches = [json.dumps({"fingerprints": [bodies[(i * batch + j) % n] for j in range(batch)]}).encode()
                   for i in range(nb)]
    page_bodies = [json.dumps({"url": u, "html": h}).encode() for u, h in pages]
    per_round = max(1, n // 5)
    per_round_b = max(1, nb // 5)
    # (name, fn(j), note, requests per round, fingerprints per request)
    entries: list[tuple[str, Callable[[int], Any], str, int, int]] = [
        ("Detector.check_fingerprint", lambda j: det.check_fingerprint(*fps[j % n]),
         f"{det.stats()['pages']:,} pages, {det.store.change_bounds()[1]:,} rows in the change log", per_round, 1),
        (f"Detector.check_fingerprints ({batch} per call)", lambda j: det.check_fingerprints(fp_batches[j % nb]),
         "what the batch endpoint runs", per_round_b, batch),
    ]

    async def call(app: Any, method: str, path: str, data: bytes) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"x"), (b"content-type", b"application/json"),
                             (b"content-length", str(len(data)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        status = []

        async def send(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.start":
                status.append(msg["status"])

        await app(scope, receive, send)
        assert status == [200], status

    loop = asyncio.new_event_loop()
    full = create_app(det)
    bare = create_app(det)
    bare.user_middleware = []  # the Guard (token, body limit, metrics); the stack is built on the first call
    note = "no socket, no HTTP parsing"
    def healthz_of(app: Any) -> Callable[[int], Any]:
        return lambda j: loop.run_until_complete(call(app, "GET", "/healthz", b""))

    def check_of(app: Any) -> Callable[[int], Any]:
        return lambda j: loop.run_until_complete(call(app, "POST", "/v1/fingerprints/check", raw[j % n]))

    for name, app in (("ASGI app", full), ("ASGI app without the Guard middleware", bare)):
        entries.append((f"{name}: GET /healthz", healthz_of(app), note, per_round, 1))
        entries.append((f"{name}: POST /v1/fingerprints/check", check_of(app), note, per_round, 1))
    entries.append((f"ASGI app: POST /v1/fingerprints/check/batch ({batch} per request)",
                    lambda j: loop.run_until_complete(call(full, "POST", "/v1/fingerprints/check/batch",
                                                           raw_batches[j % nb])),
                    note + "; the decision runs in the thread pool above 32 fingerprints", per_round_b, batch))
    if pages:
        m = len(pages)
        entries += [
            ("page: extract_main_content(accurate)", lambda j: extract_main_content(pages[j % m][1],
                                                                                    extractor="accurate"),
             f"{m} scrapinghub-aeb pages, decoded", m, 1),
            ("page: Detector.fingerprint", lambda j: det.fingerprint(pages[j % m][1], pages[j % m][0]),
             "extraction + normalisation + SimHash", m, 1),
            ("page: ASGI app: POST /v1/check", lambda j: loop.run_until_complete(call(full, "POST", "/v1/check",
                                                                                      page_bodies[j % m])),
             note, m, 1),
            ("page: ASGI app without the Guard middleware: POST /v1/check",
             lambda j: loop.run_until_complete(call(bare, "POST", "/v1/check", page_bodies[j % m])), note, m, 1),
        ]
    # round-robin rounds, the best (least CPU) round of each kept: the cores are shared
    best: dict[str, float] = {}
    try:
        for rnd in range(5):
            for name, fn, _, per, _ in entries:
                if rnd == 0:
                    for j in range(min(30, per)):
                        fn(j)
                t = time.process_time()
                for j in range(rnd * per, (rnd + 1) * per):
                    fn(j)
                spent = (time.process_time() - t) / per * 1000
                best[name] = min(best.get(name, spent), spent)
        profile = _profile_checks(det, fps)
    finally:
        loop.close()
        det.store.close()  # not det.close(): leave the saved index as the servers will find it
    rows = [{"what": name, "cpu_ms": round(best[name], 4), "per_request": k, "cpu_ms_per_fp": round(best[name] / k, 4),
             "note": note} for name, _, note, _, k in entries]
    out.put((rows, profile))


def _profile_checks(det: Detector, fps: list[tuple[str, Fingerprint]]) -> dict[str, Any]:
    """Shares of ``Detector.check_fingerprint``'s time under cProfile (which inflates
    Python-level calls): SQLite calls, URL validation, the index search."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for url, fp in fps:
        det.check_fingerprint(url, fp)
    prof.disable()
    stats: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sqlite_s = url_s = index_s = 0.0
    queries = 0
    for (path, _, func), (_, ncalls, tottime, cumtime, _) in stats.items():
        if func == "check_fingerprint" and path.endswith("detector.py"):
            total = max(total, cumtime)
        elif "sqlite3." in func and ("'execute'" in func or "'fetch" in func):
            sqlite_s += tottime
            queries += ncalls if "'execute'" in func else 0
        elif func == "validate_url":
            url_s = max(url_s, cumtime)
        elif func == "search" and "neardup" in path:
            index_s = max(index_s, cumtime)
    n = max(len(fps), 1)
    return {"checks": len(fps), "profiled_ms_per_check": round(total / n * 1000, 4),
            "sqlite_share": round(sqlite_s / total, 3) if total else None,
            "sqlite_queries_per_check": round(queries / n, 2),
            "validate_url_share": round(url_s / total, 3) if total else None,
            "index_search_share": round(index_s / total, 3) if total else None}


# -- one configuration ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    store: str
    workers: int

    @classmethod
    def parse(cls, spec: str) -> Config:
        parts = spec.strip().split(":")
        if parts[0] not in ("sqlite", "postgres") or len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) < 1:
            raise SystemExit(f"bad configuration {spec!r}: want store:workers, store sqlite or postgres")
        return cls(parts[0], int(parts[1]))

    @property
    def name(self) -> str:
        return f"{self.store}:{self.workers}"

    @property
    def variant(self) -> str:
        return f"{self.workers} worker{'s' if self.workers > 1 else ''}"


def _log_row(label: str, r: Result) -> None:
    per = f" = {r.ips:9.1f} fp/s" if r.per_request > 1 else ""
    log(f"  {label:<14}c={r.conns:<3}{r.rps:8.1f}/s{per} p50 {r.pct(50):6.2f} ms p99 {r.pct(99):7.2f} ms "
        f"errors {r.errors} unexpected {r.unexpected} server {r.server_cpu / max(r.requests, 1) * 1000:.2f} ms CPU/req"
        + (f" + pg {r.pg_cpu / max(r.requests, 1) * 1000:.2f}" if r.pg_cpu else ""))


def run_config(cfg: Config, db: str, pg: PgServer | None, synth: Synth, real: list[RealPage],
               args: argparse.Namespace, sustained: bool) -> dict[str, Any]:
    log(f"{cfg.store}, {cfg.variant} (load {loadavg()})")
    out: dict[str, Any] = {"store": cfg.store, "workers": cfg.workers, "variant": cfg.variant,
                           "rows": [], "load": loadavg()}
    with serve(db, cfg.workers) as server:
        out["command"] = server.command
        checks = FpChecks(server.port, synth)
        batches = FpChecks(server.port, synth, pool=max(6000, 60 * args.batch), seed=4, batch=args.batch)
        pages = PageChecks(server.port, real)
        # warm up every worker: the first page check loads the extractor, the first
        # fingerprint check the index
        closed_loop("warm-up", server, pg, checks, 8, duration=args.warmup)
        closed_loop("warm-up", server, pg, batches, 2 * cfg.workers, total=4 * cfg.workers)
        closed_loop("warm-up", server, pg, pages, 2 * cfg.workers, total=4 * cfg.workers)
        for conns in args.fp_conns:
            r = closed_loop("POST /v1/fingerprints/check", server, pg, checks, conns, duration=args.duration)
            out["rows"].append(r.row())
            _log_row("fp check", r)
        r = closed_loop("POST /v1/fingerprints/check/batch", server, pg, batches, args.batch_conns,
                        duration=args.duration, per_request=args.batch)
        out["rows"].append(r.row())
        _log_row("fp check/batch", r)
        r = closed_loop("POST /v1/check", server, pg, pages, 2 * cfg.workers, total=args.page_requests)
        out["rows"].append(r.row())
        log(f"  page check    c={2 * cfg.workers:<3}{r.rps:8.2f}/s p50 {r.pct(50):6.1f} ms p99 {r.pct(99):7.1f} ms "
            f"errors {r.errors} server {r.server_cpu / max(r.requests, 1) * 1000:.1f} ms CPU/page")
        # the extractor alone right after, as many processes as workers, same pages (the server idles)
        out["extractor_adjacent"] = extractor_alone([p.html for p in real][:args.page_requests], cfg.workers, 1,
                                                    "extract")
        log(f"  extractor alone, {cfg.workers} process(es), right after: "
            f"{out['extractor_adjacent']['pages_per_s']:.2f} pages/s")
        tag = f"{cfg.store}-{cfg.workers}"
        r = closed_loop("POST /v1/fingerprints/add", server, pg, FpAdds(server.port, synth, tag), 8,
                        duration=args.duration)
        out["rows"].append(r.row())
        _log_row("fp add", r)
        r = closed_loop("POST /v1/fingerprints/add/batch", server, pg, FpAdds(server.port, synth, tag + "-b",
                                                                              args.batch),
                        args.batch_conns, duration=args.duration, per_request=args.batch)
        out["rows"].append(r.row())
        _log_row("fp add/batch", r)
        if sustained:
            log(f"  sustained: {args.sustained:,} fingerprint checks, {args.sustained_conns} connections")
            r = closed_loop("POST /v1/fingerprints/check (sustained)", server, pg, checks, args.sustained_conns,
                            total=args.sustained)
            out["sustained"] = r.row()
            log(f"  sustained {r.requests:,} in {r.seconds:.0f} s: {r.rps:.1f}/s p50 {r.pct(50):.2f} ms "
                f"p99 {r.pct(99):.2f} ms max {r.latencies.max() * 1000:.0f} ms errors {r.errors} unexpected "
                f"{r.unexpected}")
    return out


# -- report ------------------------------------------------------------------------------------------
FP_CHECK, FP_BATCH = "POST /v1/fingerprints/check", "POST /v1/fingerprints/check/batch"
FP_ADD, FP_ADD_BATCH, PAGE_CHECK = "POST /v1/fingerprints/add", "POST /v1/fingerprints/add/batch", "POST /v1/check"


def fmt(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def pct(a: float, b: float) -> str:
    """a as a share of b, in percent."""
    return f"{a / b * 100:.0f}%" if b else "-"


def fp_rows(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in cfg["rows"] if r["endpoint"] == FP_CHECK]


def row_of(cfg: dict[str, Any], endpoint: str) -> dict[str, Any] | None:
    return next((r for r in cfg["rows"] if r["endpoint"] == endpoint), None)


def best_fp(cfg: dict[str, Any]) -> dict[str, Any]:
    """The fastest single-check row (the sustained run included) with p99 <= 20 ms, else the fastest."""
    fps = fp_rows(cfg) + ([cfg["sustained"]] if cfg.get("sustained") else [])
    ok = [r for r in fps if r["p99_ms"] <= 20]
    return max(ok or fps, key=lambda r: r["rps"])


def where(r: dict[str, Any]) -> str:
    plural = "s" if r["conns"] > 1 else ""
    return f"{r['conns']} connection{plural}" + (", sustained run" if r["endpoint"] != FP_CHECK else "")


def label(c: dict[str, Any]) -> str:
    return f"{'SQLite' if c['store'] == 'sqlite' else 'PostgreSQL'}, {c['variant']}"


def write_doc(summary: dict[str, Any], argv: list[str]) -> None:
    m = summary["machine"]
    v = m["versions"]
    pre = summary["preload"]
    batch = summary["args"].get("batch", 100)
    http = (f"uvloop {v['uvloop']} and httptools {v['httptools']}, which uvicorn picks when installed"
            if v.get("uvloop") and v.get("httptools") else
            f"uvloop {v.get('uvloop') or 'not installed'}, httptools {v.get('httptools') or 'not installed'}, h11 "
            f"{v['h11']}")
    lines = [START, "## HTTP service (`benchmarks/service.py`)", "",
             "Generated by `benchmarks/service.py`; do not edit by hand.", "", "```",
             ("python benchmarks/service.py " + " ".join(argv)).rstrip(), "```", "",
             (f"Run {summary['started']} to {summary['finished']} UTC; load average {summary['load_start']} at the "
              f"start, "
              f"{summary['load_end']} at the end."
              + (f" Source: commit {summary['src']['commit']}" + (
                  " with uncommitted changes in " + ", ".join(f"`{f}`" for f in summary["src"]["dirty"])
                  if summary["src"].get("dirty") else "") + " at the start"
                 + ("; the same at the end" if summary.get("src_end") == summary["src"] else
                    f"; commit {summary['src_end']['commit']}" + (" with uncommitted changes in " + ", ".join(
                        f"`{f}`" for f in summary["src_end"]["dirty"]) if summary["src_end"].get("dirty") else "")
                    + " at the end" + changed_between(summary["src"]["commit"], summary["src_end"]["commit"])
                    + " (each server imports the code when it starts)" if summary.get("src_end") else "")
                 + "." if summary.get("src", {}).get("commit") else "")), "",
             (f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['mem_gib']} GiB RAM, Python {m['python']}, "
              f"{m['platform']}; "
              f"neardup {v['neardup']}, fastapi {v['fastapi']}, starlette {v['starlette']}, uvicorn {v['uvicorn']} "
              f"({http}), "
              f"pydantic {v['pydantic']}, psycopg {v['psycopg']}, psycopg-pool {v['psycopg-pool']}, SQLite "
              f"{v['sqlite']}, PostgreSQL {summary.get('postgres_version') or '-'}, "
              f"trafilatura {v['trafilatura']}, lxml {v['lxml']}."), "",
             (f"**The {m['nproc']} CPUs are shared with other jobs** (see the load averages, also given for the start "
              "of each configuration under the results), and the load generator, the server processes and PostgreSQL "
              "all run on them. Every configuration ran once, so rates carry 10-30% noise and are lower bounds for "
              "dedicated cores. The *server CPU ms/req* column (CPU time of the server's processes divided by the "
              "requests) is the steadier measure of cost. On this machine `sum(range(10**7))` takes "
              f"{summary['calibration_s']:.2f} s of CPU (about 0.12-0.15 s on a current desktop core)."), "",
             "### Setup", "",
             (f"* Store: pre-loaded before the servers start with {pre['pages']:,} pages: "
              f"{summary['args']['preload']:,} "
              "synthetic fingerprints (10% of them near copies of earlier ones) and the real fingerprints of every "
              "other "
              f"one of the {summary['corpus_pages']} scrapinghub-aeb pages, through `Detector.add_fingerprint`, 10,000 "
              f"pages per transaction (SQLite {fmt(pre.get('sqlite_seconds'))} s"
              + (f", PostgreSQL {fmt(pre.get('postgres_seconds'))} s" if pre.get("postgres_seconds") else "")
              + "). SQLite: WAL, `synchronous=FULL` (the store's default)."
              + ((" PostgreSQL: a local server started by the benchmark, fsync "
                  f"{'on' if summary.get('pg_fsync') else 'off'}, synchronous commit."
                  if summary.get("pg_fsync") is not None
                  else " PostgreSQL: the server named by `NEARDUP_BENCH_PG`.")
                 if summary.get("postgres_version") else "")
              + " Each configuration adds its own pages (the add rows), so later configurations of a store see a "
              "slightly larger one."),
             ("* Server: `neardup serve --workers N` in its own process group (commands under the results table). "
              "`--workers 1` is one process (`uvicorn.run`); `--workers 2` is a supervisor and 2 spawned worker "
              "processes sharing one listening socket, each with its own Detector that follows the store's change "
              "log."),
             ("* Load: this process, one thread per connection, HTTP/1.1 keep-alive on raw sockets with pre-encoded "
              "requests; latency from the send to the last byte of the answer. Fingerprint checks: 70% fresh "
              "(must be `new`), 15% near copies of stored pages with 1-3 bits flipped (`near`), 15% digests of stored "
              f"pages (`exact`); *unexpected* counts verdicts that differ. Batched checks: the same mix, {batch} "
              f"fingerprints per `POST /v1/fingerprints/check/batch`, every verdict checked in order (*unexpected* "
              "counts fingerprints). Page checks: `POST /v1/check` with the HTML of the scrapinghub-aeb pages (decoded "
              "as `neardup.Client` does; half of them stored, so `exact`), 2 connections per worker. Adds: "
              "`POST /v1/fingerprints/add` of fresh synthetic fingerprints with unique URLs, 8 connections, and "
              f"`POST /v1/fingerprints/add/batch` with {batch} of them per request (one transaction each; any verdict "
              "but `error` accepted)."),
             (f"* Errors: connection failures and non-200 answers. Each fingerprint row runs "
              f"{summary['args']['duration']:g} s "
              f"after a {summary['args']['warmup']:g} s warm-up; each page row sends "
              f"{summary['args']['page_requests']} pages."),
             ""]
    lines += ["### Results", "",
              "*fp/s*: fingerprints per second (requests/s times fingerprints per request). Latencies are per "
              "request.", "",
              ("| store | server | endpoint | conns | fp/req | requests | req/s | fp/s | p50 ms | p99 ms | max ms | "
               "errors | "
               "unexpected | server CPU ms/req | PostgreSQL CPU ms/req | client CPU ms/req |"),
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| ---: |"]
    for cfg in summary["configs"]:
        for r in cfg["rows"]:
            k = r.get("per_request", 1)
            fps = fmt(r.get("items_per_s", r["rps"] * k), 0) if r["endpoint"] != PAGE_CHECK else "-"
            lines.append(f"| {cfg['store']} | {cfg['variant']} | `{r['endpoint']}` | {r['conns']} | {k} | "
                         f"{r['requests']:,} | "
                         f"{fmt(r['rps'])} | {fps} | {fmt(r['p50_ms'], 2)} | {fmt(r['p99_ms'], 2)} | "
                         f"{fmt(r['max_ms'], 0)} | "
                         f"{r['errors']} | {r['unexpected_verdicts']} | {r['server_cpu_ms_per_req']:.2f} | "
                         f"{r['pg_cpu_ms_per_req']:.2f} | {r['client_cpu_ms_per_req']:.3f} |")
    lines += ["", "Commands (and the load average when each configuration started): " + "; ".join(
        f"{c['store']}, {c['variant']}: `{c['command']}`" + (f" (load {c['load']})" if c.get("load") else "")
        for c in summary["configs"]) + ".", ""]
    for cfg in summary["configs"]:
        s = cfg.get("sustained")
        if not s:
            continue
        lines += [f"### Sustained load: {s['requests']:,} fingerprint checks ({cfg['store']}, {cfg['variant']})", "",
                  f"{s['conns']} connections, {fmt(s['seconds'], 0)} s: **{fmt(s['rps'])} req/s**, p50 "
                  f"{s['p50_ms']:.2f} ms, "
                  f"p99 {s['p99_ms']:.2f} ms, p99.9 {s['p999_ms']:.2f} ms, max {s['max_ms']:.0f} ms; **errors: "
                  f"{s['errors']}**"
                  + (" (" + ", ".join(f"{k} {n}" for k, n in s["error_kinds"].items()) + ")" if s["errors"] else "")
                  + f", unexpected verdicts: {s['unexpected_verdicts']}; worker restarts: "
                    f"{s.get('worker_restarts', 0)}; "
                  f"server CPU {s['server_cpu_ms_per_req']:.2f} ms/request"
                  + (f" + PostgreSQL {s['pg_cpu_ms_per_req']:.2f} ms" if s["pg_cpu_ms_per_req"] else "") + ".", ""]
        if s.get("windows_rps"):
            lines += ["Requests/s per 10 s window: " + ", ".join(fmt(w, 0) for w in s["windows_rps"]) + ".", ""]
    if summary.get("stack"):
        lines += ["### Where the CPU goes (in-process, one thread)", "",
                  (f"The SQLite store above ({pre['pages']:,} pages), in a forked process: the Detector calls, the "
                   "extractor, and the service's ASGI app called directly (no socket, no HTTP parsing: uvicorn's "
                   "parsing, the event loop's socket I/O and the kernel's loopback come on top), with and without its "
                   "`Guard` middleware (bearer token, body limit, metrics). Rows run round-robin, the least CPU of 5 "
                   "rounds kept (CPU time, but the cores' other jobs still slow it through shared caches)."), "",
                  "| what | CPU ms/request | fp/request | CPU ms/fingerprint | note |", "| --- | ---: | ---: | ---: | "
                                                                                        "--- |"]
        for r in summary["stack"]:
            k = r.get("per_request", 1)
            lines.append(f"| {r['what']} | {r['cpu_ms']:.3f} | {k} | {r.get('cpu_ms_per_fp', r['cpu_ms'] / k):.4f} | "
                         f"{r['note']} |")
        lines.append("")
    ex = summary["extractor"]
    lines += ["### Page checks vs the extractor alone", "",
              "The extractor alone: `extract_main_content(html, extractor=\"accurate\")` over the same decoded pages "
              "in "
              "N forked processes at once, on the same shared cores. Each page row of the service is compared with the "
              "extractor run right after it (as many processes as the server has workers, the same pages, the server "
              "idle), because what else runs on these cores changes from minute to minute."
              + (" For reference, at the start (all pages, one pass; `fingerprint` = extraction + normalisation + "
                 "SimHash, "
                 "what the service runs per page):" if ex else ""), ""]
    if ex:
        lines += ["| what | processes | pages/s per process | pages/s | CPU ms/page |", "| --- | ---: | ---: | ---: | "
                                                                                        "---: |"]
        for e in ex:
            lines.append(f"| {e['what']} | {e['processes']} | {fmt(e['pages_per_s_per_process'], 2)} | "
                         f"{fmt(e['pages_per_s'], 2)} | {e['cpu_ms_per_page']:.1f} |")
        lines.append("")
    lines += [("*Cores it got*: the extractor's CPU seconds per wall second in that run (at most the number of "
               "processes; less when other jobs held the cores)."), "",
              "| store | server | page checks/s | extractor alone right after (pages/s) | cores it got | ratio | CPU "
              "ms/page: extractor / server | target >= 0.80 |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for t in summary["targets"]["page_checks"]:
        cores = t.get("extractor_cores")
        lines.append(f"| {t['store']} | {t['variant']} | {fmt(t['page_rps'], 2)} | "
                     f"{fmt(t['extractor_pages_per_s'], 2)} | "
                     f"{fmt(cores, 2)} | "
                     f"{t['ratio']:.2f} | {t['extractor_cpu_ms']:.1f} / {t['server_cpu_ms']:.1f} = "
                     f"{t['cpu_ratio']:.2f} | "
                     f"{'met' if t['met'] else '**not met**'} |")
    lines += ["", "### Targets", "",
              ("Fingerprint checks >= 2,000/s with p99 <= 20 ms, one fingerprint per request (per configuration: its "
               "fastest `POST /v1/fingerprints/check` row, the sustained run included, with p99 <= 20 ms, else its "
               "fastest row). The batched rate "
               f"({batch} fingerprints per request, p99 per request) is given beside it and is not what the target "
               f"counts:"), "",
              "| store | server | conns | req/s | p99 ms | req/s vs 2,000 | met | batched fp/s | batched p99 "
              "ms/request |",
              "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for t in summary["targets"]["fp_checks"]:
        lines.append(f"| {t['store']} | {t['variant']} | "
                     f"{t['conns']}{' (sustained run)' if t.get('sustained') else ''} | "
                     f"{fmt(t['rps'])} | {t['p99_ms']:.2f} | "
                     f"{t['rps'] / 2000:.2f}x | {'met' if t['met'] else '**not met**'} | "
                     f"{fmt(t.get('batch_fps'), 0)} | {fmt(t.get('batch_p99_ms'), 2)} |")
    sus = summary["targets"]["sustained"]
    lines += ["", "Page checks within 80% of the extractor alone: see the table above. Sustained load: "
              + ("; ".join(f"{s['store']}, {s['variant']}: {s['requests']:,} requests, {s['errors']} errors, "
                           f"{s['unexpected']} unexpected verdicts" for s in sus) or "not run")
              + (" (target 0 errors: met)." if sus and all(s["errors"] == 0 for s in sus) else
                 " (target 0 errors: **not met**)." if sus else "."), ""]
    lines += ["### Findings", ""] + [f"- {f}" for f in summary["findings"]] + ["", END]
    replace_section(DOC, START, END, "\n".join(lines))
    log(f"wrote the service section of {DOC}")


def findings(summary: dict[str, Any]) -> list[str]:
    """Sentences computed from the measurements (nothing here is a fixed claim about speed)."""
    out: list[str] = []
    configs = summary["configs"]
    by = {(c["store"], c["workers"]): c for c in configs}
    stack = {r["what"]: r for r in summary.get("stack", [])}
    cpu = {k: r["cpu_ms"] for k, r in stack.items()}
    per_fp = {k: r.get("cpu_ms_per_fp", r["cpu_ms"]) for k, r in stack.items()}
    nproc = summary["machine"]["nproc"]
    batch = summary["args"].get("batch", 100)
    targets = {(t["store"], t["variant"]): t for t in summary["targets"]["fp_checks"]}

    # 1. single checks against the target
    if configs:
        met = [c for c in configs if targets[(c["store"], c["variant"])]["met"]]
        listed = "; ".join(f"{label(c)}: {fmt(t['rps'], 0)}/s at {t['conns']} connection{'s' if t['conns'] > 1 else ''}"
                           f"{' (the sustained run)' if t.get('sustained') else ''}, p99 {t['p99_ms']:.1f} ms"
                          for c in configs for t in [targets[(c["store"], c["variant"])]])
        out.append(f"**Single fingerprint checks** (one per request): the 2,000/s with p99 <= 20 ms target is met by "
                   f"{len(met)} of {len(configs)} configurations. Best row of each (the fastest with p99 <= 20 ms, "
                   f"else the fastest): {listed}.")

    # 2. where a check's CPU goes
    app, bare, detc = (cpu.get("ASGI app: POST /v1/fingerprints/check"),
                       cpu.get("ASGI app without the Guard middleware: POST /v1/fingerprints/check"),
                       cpu.get("Detector.check_fingerprint"))
    s1 = by.get(("sqlite", 1)) or next((c for c in configs if c["store"] == "sqlite"), None)
    if app and detc:
        text = (f"**Where a check's CPU goes.** In-process, the ASGI app takes {app:.3f} ms of CPU per fingerprint "
                f"check, "
                f"of which `Detector.check_fingerprint` is {detc:.3f} ms ({pct(detc, app)}); the rest is request "
                "parsing and validation (pydantic), routing and the JSON answer")
        if bare:
            d = app - bare
            text += (f"; the `Guard` middleware adds {d:.3f} ms ({pct(d, app)} of the app)" if d > 0.005 else
                     f"; without the `Guard` middleware it takes {bare:.3f} ms (no measurable difference)")
        text += "."
        if s1:
            r1 = next((r for r in fp_rows(s1) if r["conns"] == 1), None) or best_fp(s1)
            srv = r1["server_cpu_ms_per_req"]
            if srv > app:
                text += (f" Served ({label(s1)}, {where(r1)}) the server spends {srv:.3f} ms of CPU per "
                         f"check, so uvicorn (httptools, uvloop), the socket system calls and the loopback take about "
                         f"{srv - app:.3f} ms of it ({pct(srv - app, srv)})"
                         + (", more than the app itself" if srv - app > app else "")
                         + f"; the load generator adds {r1['client_cpu_ms_per_req']:.3f} ms per request on the same "
                           f"cores.")
        out.append(text)

    prof = summary.get("check_profile")
    if prof and prof.get("sqlite_share") is not None:
        out.append(f"Under cProfile (which inflates Python-level calls; {prof['checks']:,} checks on the SQLite "
                   f"store), "
                   f"`Detector.check_fingerprint` spends {prof['sqlite_share'] * 100:.0f}% of its time in SQLite calls "
                   f"({prof['sqlite_queries_per_check']:.1f} statements per check: one `SQLStore.lookup` reading the "
                   "change-log bounds, the page at the URL and the page with the digest, plus the candidates and the "
                   f"cluster of a match), {prof['validate_url_share'] * 100:.0f}% validating the URL and "
                   f"{(prof['index_search_share'] or 0) * 100:.0f}% in the index search.")

    # 3. the best single-check rate against what the cores allow
    best = None
    for c in configs:
        for r in fp_rows(c) + ([c["sustained"]] if c.get("sustained") else []):
            if best is None or r["rps"] > best[1]["rps"]:
                best = (c, r)
    if best:
        c, r = best
        total = r["server_cpu_ms_per_req"] + r["pg_cpu_ms_per_req"] + r["client_cpu_ms_per_req"]
        out.append(f"Best single-check rate: {fmt(r['rps'])}/s ({label(c)}, {where(r)}, p99 "
                   f"{r['p99_ms']:.1f} ms) at {r['server_cpu_ms_per_req']:.3f} ms of server CPU per request"
                   + (f" + {r['pg_cpu_ms_per_req']:.3f} ms of PostgreSQL" if r["pg_cpu_ms_per_req"] else "")
                   + f" + {r['client_cpu_ms_per_req']:.3f} ms of load generator = {total:.3f} ms: {nproc} cores fully "
                   f"ours would allow about {fmt(nproc * 1000 / total, 0)}/s at that cost (2,000/s needs under "
                   f"{nproc * 1000 / 2000:.2f} ms per request, all included).")

    # 4. batching
    parts: list[str] = []
    for c in configs:
        b, s = row_of(c, FP_BATCH), best_fp(c)
        if b and s and s["rps"]:
            pgb = f" + {b['pg_cpu_ms_per_req'] / batch:.3f} ms of PostgreSQL" if b["pg_cpu_ms_per_req"] else ""
            pgs = f" + {s['pg_cpu_ms_per_req']:.3f} ms" if s["pg_cpu_ms_per_req"] else ""
            parts.append(f"{label(c)}: {fmt(b['items_per_s'], 0)} fingerprints/s ({fmt(b['rps'])} requests/s, p99 "
                         f"{b['p99_ms']:.1f} ms per request, {b['server_cpu_ms_per_req'] / batch:.3f} ms of server "
                         f"CPU{pgb} "
                         f"per fingerprint vs {s['server_cpu_ms_per_req']:.3f} ms{pgs} single, "
                         f"{b['items_per_s'] / s['rps']:.1f}x the single-check rate)")
    if parts:
        text = (f"**Batched checks** (`POST /v1/fingerprints/check/batch`, {batch} per request) spread the HTTP cost "
                f"over "
                "the batch: " + "; ".join(parts) + ".")
        dcb = per_fp.get(f"Detector.check_fingerprints ({batch} per call)")
        apb = per_fp.get(f"ASGI app: POST /v1/fingerprints/check/batch ({batch} per request)")
        if dcb and apb:
            text += (f" In-process a batched fingerprint costs {apb:.4f} ms through the app, of which the Detector is "
                     f"{dcb:.4f} ms ({pct(dcb, apb)}): per fingerprint, the rest is mostly pydantic validation of the "
                     "body and the JSON answer.")
        errs = sum(r["unexpected_verdicts"] for c in configs for r in c["rows"] if r["endpoint"] == FP_BATCH)
        n = sum(r["requests"] * r.get("per_request",
                                      1) for c in configs for r in c["rows"] if r["endpoint"] == FP_BATCH)
        text += f" All {n:,} batched verdicts were checked: {errs} unexpected."
        out.append(text)

    busy = [(c, t) for c in configs for t in summary["targets"]["page_checks"]
            if (t["store"], t["variant"]) == (c["store"], c["variant"]) and t.get("extractor_cores") is not None
            and t["extractor_cores"] < 0.8 * c["workers"]]
    if busy:
        out.append("**Other jobs on the cores:** " + "; ".join(
            f"in the {label(c)} configuration the extractor alone, in {c['workers']} processes, got only "
            f"{t['extractor_cores']:.2f} cores (load {c.get('load', '?')} at its start)" for c, t in busy)
            + ", so the rows measured around it had less than the whole machine; its CPU-per-request columns are the "
            "better guide there.")

    # 5. one worker vs two
    for store in ("sqlite", "postgres"):
        a, b = by.get((store, 1)), by.get((store, 2))
        if a and b:
            ra, rb = best_fp(a), best_fp(b)
            ba, bb = row_of(a, FP_BATCH), row_of(b, FP_BATCH)
            client_cores = rb["client_cpu_ms_per_req"] * rb["rps"] / 1000
            server_cores = (rb["server_cpu_ms_per_req"] + rb["pg_cpu_ms_per_req"]) * rb["rps"] / 1000
            cap = (f" One worker runs the checks on one event-loop thread: at {ra['server_cpu_ms_per_req']:.3f} ms of "
                   f"CPU "
                   f"per check that is about {fmt(1000 / ra['server_cpu_ms_per_req'], 0)}/s at most"
                   + (", before any wait for PostgreSQL" if ra["pg_cpu_ms_per_req"] else "") + ".")
            out.append(f"**{'SQLite' if store == 'sqlite' else 'PostgreSQL'}, 1 vs 2 workers:** single checks "
                       f"{fmt(ra['rps'], 0)}/s ({where(ra)}) vs {fmt(rb['rps'], 0)}/s ({where(rb)}; "
                       f"{rb['rps'] / ra['rps']:.2f}x), server CPU "
                       f"{ra['server_cpu_ms_per_req']:.3f} vs {rb['server_cpu_ms_per_req']:.3f} ms per check"
                       + (f"; batched {fmt(ba['items_per_s'], 0)} vs {fmt(bb['items_per_s'], 0)} fingerprints/s"
                          if ba and bb else "")
                       + f". At the 2-worker rate the server{' and PostgreSQL' if store == 'postgres' else ''} used "
                       f"{server_cores:.2f} cores and the load generator {client_cores:.2f} of the {nproc}"
                       + ("; CPU seconds per server process in that row: "
                          + ", ".join(f"{x:g}" for x in rb["server_cpu_s_by_process"]) + " (the supervisor included)"
                          if rb.get("server_cpu_s_by_process") else "") + "." + cap)

    # 6. PostgreSQL vs SQLite
    for w in (1, 2):
        a, b = by.get(("sqlite", w)), by.get(("postgres", w))
        if a and b:
            ra, rb = next((r for r in fp_rows(a) if r["conns"] == 1), best_fp(a)), \
                next((r for r in fp_rows(b) if r["conns"] == 1), best_fp(b))
            out.append(f"**PostgreSQL vs SQLite ({w} worker{'s' if w > 1 else ''}):** a single check costs "
                       f"{rb['server_cpu_ms_per_req']:.3f} ms of server CPU + {rb['pg_cpu_ms_per_req']:.3f} ms of "
                       f"PostgreSQL "
                       f"vs {ra['server_cpu_ms_per_req']:.3f} ms on SQLite ({fmt(rb['rps'], 0)}/s vs "
                       f"{fmt(ra['rps'], 0)}/s "
                       f"at {where(ra)}): "
                       "every check makes at least one loopback round trip to PostgreSQL (`SQLStore.lookup`: the "
                       "change-log bounds that keep the index current, the page at the URL and the page with the "
                       "digest, "
                       "in one statement) on a connection checked out of the pool, plus one per candidate and for the "
                       "cluster of a match, and psycopg's per-statement cost in Python"
                       + (f". A batch (`Detector.check_fingerprints`) checks out one connection and syncs the index "
                          f"once, "
                          "then runs one lookup per fingerprint: a batched "
                          f"fingerprint costs {bb['server_cpu_ms_per_req'] / batch:.3f} ms of server CPU + "
                          f"{bb['pg_cpu_ms_per_req'] / batch:.3f} ms of PostgreSQL vs "
                          f"{ba['server_cpu_ms_per_req'] / batch:.3f} ms on SQLite"
                          if (ba := row_of(a, FP_BATCH)) and (bb := row_of(b, FP_BATCH)) else "") + ".")
            break

    # 7. connections
    rows = [(c, r) for c in configs for r in fp_rows(c)]
    conns = sorted({r["conns"] for _, r in rows})
    if len(conns) > 1:
        lo, hi = conns[0], conns[-1]
        pairs: list[str] = []
        for c in configs:
            x = next((r for r in fp_rows(c) if r["conns"] == lo), None)
            y = next((r for r in fp_rows(c) if r["conns"] == hi), None)
            if x and y:
                pairs.append(f"{label(c)}: {fmt(x['rps'], 0)}/s, p99 {x['p99_ms']:.1f} ms at {lo} vs "
                             f"{fmt(y['rps'], 0)}/s, "
                             f"p99 {y['p99_ms']:.1f} ms at {hi}")
        text = f"**Connections** ({lo} vs {hi}): " + "; ".join(pairs) + "."
        flat = []
        for c in configs:
            rs = sorted(fp_rows(c), key=lambda r: r["conns"])
            if len(rs) > 1:
                top = max(rs[:-1], key=lambda r: r["rps"])
                if rs[-1]["rps"] < 1.1 * top["rps"] and rs[-1]["p99_ms"] > top["p99_ms"]:
                    flat.append(label(c))
        if flat:
            text += (f" In {len(flat)} of {len(configs)} configurations {hi} connections add less than 10% over the "
                     "best lower count and raise p99: the queue grows, not the rate.")
        out.append(text)

    # 8. adds
    adds: list[str] = []
    for c in configs:
        a, b = row_of(c, FP_ADD), row_of(c, FP_ADD_BATCH)
        if a and b:
            adds.append(f"{label(c)}: {fmt(a['rps'], 0)}/s single (p99 {fmt(a['p99_ms'])} ms) vs "
                         f"{fmt(b['items_per_s'], 0)} fingerprints/s batched (p99 {fmt(b['p99_ms'])} ms per request)")
    if adds:
        out.append(f"**Adds:** each `POST /v1/fingerprints/add` is its own durable transaction, a batch of {batch} is "
                   f"one: "
                   + "; ".join(adds) + ".")

    # 9. page checks
    ext, fpr, pfull = cpu.get("page: extract_main_content(accurate)"), cpu.get("page: Detector.fingerprint"), \
        cpu.get("page: ASGI app: POST /v1/check")
    pbare = cpu.get("page: ASGI app without the Guard middleware: POST /v1/check")
    pt = summary["targets"]["page_checks"]
    if pt:
        ok = [t for t in pt if t["met"]]
        text = (f"**Page checks:** {len(ok)} of {len(pt)} configurations reach 80% of the extractor alone run right "
                f"after "
                "them in pages/s (ratios " + ", ".join(f"{t['store']} {t['variant']} {t['ratio']:.2f}" for t in pt)
                + "); per page of CPU, the server is at " + ", ".join(f"{t['cpu_ratio']:.2f}" for t in pt)
                + " of the extractor's efficiency.")
        more = []
        for t in pt:
            c = by.get((t["store"], 1 if t["variant"] == "1 worker" else int(t["variant"].split()[0])))
            page = row_of(c, PAGE_CHECK) if c else None
            if c and page and t.get("extractor_cores") is not None:
                used = page["rps"] * page["server_cpu_ms_per_req"] / 1000
                if used > t["extractor_cores"] * 1.1:
                    more.append(f"{label(c)}: the server used {used:.2f} cores for page checks, the extractor alone "
                                f"{t['extractor_cores']:.2f}")
        if more:
            text += (" Where the pages/s ratio beats the CPU ratio, the server had more CPU than the baseline: with 2 "
                     "connections per worker, a worker's thread pool runs two page checks at once and they overlap "
                     "where the GIL is released (lxml's parser releases it) (" + "; ".join(more) + ").")
        if ext and fpr and pfull:
            text += (f" In-process, on one thread, one page costs {ext:.1f} ms of CPU in the extractor alone, "
                     f"{fpr:.1f} ms "
                     f"in `Detector.fingerprint` ({(fpr / ext - 1) * 100:+.0f}%; it adds normalisation and SimHash) "
                     f"and "
                     f"{pfull:.1f} ms through the ASGI app ({(pfull / ext - 1) * 100:+.0f}%; it adds the page's JSON "
                     f"body, "
                     "validation and the check"
                     + (f"; {pbare:.1f} ms without the `Guard`" if pbare else "") + ").")
            odd = (["`Detector.fingerprint`, which includes the extraction, measured below the extractor alone"]
                   if fpr < ext else []) + (["the app without `Guard` measured above the app with it"]
                                            if pbare and pbare > pfull else [])
            if odd:
                text += " These in-process page figures are noisy on the shared cores: " + " and ".join(odd) + "."
            adj = [t["extractor_cpu_ms"] for t in pt]
            if adj and min(adj) > ext * 1.15:
                text += (f" They are not directly comparable with the served rows: there the extractor alone took "
                         f"{min(adj):.1f}-{max(adj):.1f} ms of CPU per page, more than the {ext:.1f} ms here.")
        out.append(text)

    # 10. sustained
    for c in configs:
        s = c.get("sustained")
        if s:
            win = s.get("windows_rps") or []
            out.append(f"**Sustained** ({label(c)}): {s['requests']:,} checks in {s['seconds']:.0f} s, "
                       f"{fmt(s['rps'], 0)}/s, "
                       f"p99 {s['p99_ms']:.1f} ms, max {s['max_ms']:.0f} ms, {s['errors']} errors, "
                       f"{s['unexpected_verdicts']} unexpected verdicts, {s.get('worker_restarts', 0)} worker restarts"
                       + (f"; 10 s windows between {fmt(min(win), 0)} and {fmt(max(win), 0)} requests/s"
                          if win else "") + ".")
    out.append(f"Errors over the whole run: {summary['errors_total']}; unexpected verdicts: "
               f"{summary['unexpected_total']}.")
    return out


def compute_targets(summary: dict[str, Any]) -> None:
    """summary["targets"], ["errors_total"] and ["unexpected_total"] from the configurations."""
    fp_t, page_t, sus_t = [], [], []
    for c in summary["configs"]:
        best = best_fp(c)
        b = row_of(c, FP_BATCH)
        fp_t.append({"store": c["store"], "variant": c["variant"], "conns": best["conns"], "rps": best["rps"],
                     "p99_ms": best["p99_ms"], "met": best["rps"] >= 2000 and best["p99_ms"] <= 20,
                     "sustained": best["endpoint"] != FP_CHECK,
                     "batch_fps": b["items_per_s"] if b else None, "batch_rps": b["rps"] if b else None,
                     "batch_p99_ms": b["p99_ms"] if b else None})
        page = row_of(c, PAGE_CHECK)
        base = c.get("extractor_adjacent")
        if base and page:
            page_t.append({"store": c["store"], "variant": c["variant"], "page_rps": page["rps"],
                           "extractor_pages_per_s": base["pages_per_s"],
                           "ratio": round(page["rps"] / base["pages_per_s"], 3),
                           "cpu_ratio": round(base["cpu_ms_per_page"] / max(page["server_cpu_ms_per_req"], 1e-9), 3),
                           "extractor_cpu_ms": base["cpu_ms_per_page"], "server_cpu_ms": page["server_cpu_ms_per_req"],
                           "extractor_cores": round(base["pages_per_s"] * base["cpu_ms_per_page"] / 1000, 2),
                           "met": page["rps"] / base["pages_per_s"] >= 0.8, "page_errors": page["errors"]})
        if c.get("sustained"):
            s = c["sustained"]
            sus_t.append({"store": c["store"], "variant": c["variant"], "requests": s["requests"], "rps": s["rps"],
                          "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"], "errors": s["errors"],
                          "unexpected": s["unexpected_verdicts"]})
    summary["targets"] = {"fp_checks": fp_t, "page_checks": page_t, "sustained": sus_t}
    summary["errors_total"] = (sum(r["errors"] for c in summary["configs"] for r in c["rows"])
                               + sum(s["errors"] for s in sus_t))
    summary["unexpected_total"] = (sum(r["unexpected_verdicts"] for c in summary["configs"] for r in c["rows"])
                                   + sum(s["unexpected"] for s in sus_t))


def compact_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The JSON object printed as the last stdout line."""
    keys = ("endpoint", "conns", "per_request", "requests", "rps", "items_per_s", "p50_ms", "p99_ms", "errors",
            "unexpected_verdicts", "server_cpu_ms_per_req", "pg_cpu_ms_per_req")
    return {"benchmark": "service", "machine": {k: summary["machine"][k] for k in ("cpu_model", "nproc")},
            "load": [summary["load_start"], summary["load_end"]], "preload_pages": summary["preload"].get("pages"),
            "configs": [{"store": c["store"], "variant": c["variant"],
                         "rows": [{k: r.get(k) for k in keys} for r in c["rows"]]} for c in summary["configs"]],
            "stack_cpu_ms": {r["what"]: r["cpu_ms"] for r in summary.get("stack", [])},
            "extractor": summary["extractor"], "targets": summary["targets"], "errors_total": summary["errors_total"],
            "unexpected_total": summary["unexpected_total"]}


def calibrate() -> float:
    t = time.process_time()
    sum(range(10**7))
    return time.process_time() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="SQLite only, small store, short runs (< 1 minute)")
    ap.add_argument("--configs", default=None,
                    help="comma list of store:workers (default sqlite:1,sqlite:2,postgres:1,postgres:2; --quick "
                         "sqlite:2)")
    ap.add_argument("--preload", type=float, default=None, help="synthetic pages stored first (default 1e5; --quick "
                                                                "3000)")
    ap.add_argument("--duration", type=float, default=None, help="seconds per fingerprint row (default 10; --quick 2)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds of warm-up per server (default 3; --quick 1)")
    ap.add_argument("--fp-conns", default="1,4,32", help="connection counts of the fingerprint-check rows")
    ap.add_argument("--batch", type=int, default=100, help="fingerprints per batch request (default 100)")
    ap.add_argument("--batch-conns", type=int, default=4, help="connections of the batch rows (default 4)")
    ap.add_argument("--page-requests", type=int, default=None,
                    help="page checks per page row (default 181; --quick 16)")
    ap.add_argument("--pages", type=int, default=None, help="corpus pages used (default all 181; --quick 16)")
    ap.add_argument("--extract-passes", type=int, default=1)
    ap.add_argument("--stack-requests", type=int, default=None, help="requests per in-process row (default 2500; "
                                                                     "--quick 250)")
    ap.add_argument("--stack-pages", type=int, default=None, help="pages per in-process page row (default 30; --quick "
                                                                  "4)")
    ap.add_argument("--sustained", type=float, default=None, help="fingerprint checks in the sustained run (default "
                                                                  "1e5; --quick 1000)")
    ap.add_argument("--sustained-conns", type=int, default=16)
    ap.add_argument("--sustained-on", default=None,
                    help="configurations (store:workers, comma list) that get the sustained run (default "
                         "sqlite:2,postgres:2; --quick sqlite:2); 'none' for none")
    ap.add_argument("--pg-fsync", choices=("on", "off"), default="on")
    ap.add_argument("--doc", dest="doc", action="store_true", default=None, help="write the docs section (default "
                                                                                 "unless --quick)")
    ap.add_argument("--no-doc", dest="doc", action="store_false")
    ap.add_argument("--json-out", default=None, help="also write the full summary here")
    ap.add_argument("--from-json", default=None, help="only re-write the docs section from a --json-out file of a "
                                                      "full run")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        compute_targets(saved)
        saved["findings"] = findings(saved)
        write_doc(saved, saved.get("argv", []))
        print(json.dumps(compact_summary(saved)))
        return 0
    q = args.quick
    configs = [Config.parse(c) for c in (args.configs or ("sqlite:2" if q else
               "sqlite:1,sqlite:2,postgres:1,postgres:2")).split(",")]
    if args.batch < 1 or args.batch > 10_000:
        raise SystemExit("--batch must be 1 to 10,000 (the service's limit)")
    args.preload = int(args.preload if args.preload is not None else (3000 if q else 1e5))
    args.duration = args.duration if args.duration is not None else (2.0 if q else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if q else 3.0)
    args.fp_conns = [int(c) for c in args.fp_conns.split(",")]
    args.pages = args.pages if args.pages is not None else (16 if q else None)
    args.page_requests = args.page_requests if args.page_requests is not None else (16 if q else 181)
    args.stack_requests = args.stack_requests if args.stack_requests is not None else (250 if q else 2500)
    args.stack_pages = args.stack_pages if args.stack_pages is not None else (4 if q else 30)
    args.sustained = int(args.sustained if args.sustained is not None else (1000 if q else 1e5))
    sus_spec = args.sustained_on or ("sqlite:2" if q else "sqlite:2,postgres:2")
    sustained_on = set() if sus_spec == "none" else {Config.parse(c) for c in sus_spec.split(",")}
    doc = args.doc if args.doc is not None else not q
    argv_shown = argv if argv is not None else sys.argv[1:]

    summary: dict[str, Any] = {"benchmark": "service", "argv": list(argv_shown),
                               "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                               "load_start": loadavg(), "machine": machine(), "calibration_s": calibrate(),
                               "src": source_state(),
                               "args": {**{k: v for k, v in vars(args).items() if k not in ("doc", "configs",
                                                                                            "sustained_on")},
                                        "configs": [c.name for c in configs],
                                        "sustained_on": sorted(c.name for c in sustained_on)}}
    log(f"machine: {summary['machine']['nproc']} CPUs {summary['machine']['cpu_model']}, load {summary['load_start']}, "
        f"calibration {summary['calibration_s']:.2f} s")

    corpus = load_corpus(args.pages)
    t0 = time.perf_counter()
    real = [RealPage(url, html, neardup.fingerprint(html, url)) for url, html in corpus]
    log(f"{len(real)} corpus pages fingerprinted locally in {time.perf_counter() - t0:.1f} s")
    summary["corpus_pages"] = len(real)

    # the extractor alone, before any thread exists (forked processes)
    htmls = [p.html for p in real]
    extractor = []
    if not q:  # (the page rows are compared with the extractor run right after each of them)
        for what in ("extract", "fingerprint"):
            for procs in sorted({1, *(c.workers for c in configs)}):
                extractor.append(extractor_alone(htmls, procs, args.extract_passes, what))
                log(f"{what} alone, {procs} process(es): {extractor[-1]['pages_per_s']:.2f} pages/s, "
                    f"{extractor[-1]['cpu_ms_per_page']:.1f} ms CPU/page")
    summary["extractor"] = extractor

    tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-svc-"))
    summary["configs"] = []
    summary["preload"] = {}
    try:
        for store in [s for s in ("sqlite", "postgres") if any(c.store == s for c in configs)]:
            synth = Synth(seed=11)
            ctx: Any = nullcontext() if store == "sqlite" else pg_server(args.pg_fsync == "on")
            with ctx as pg:
                db = str(tmp / "bench.db") if store == "sqlite" else pg.new_database()
                if pg is not None:
                    summary["postgres_version"] = pg.version()
                    summary["pg_fsync"] = pg.fsync
                log(f"{store}: pre-loading {args.preload:,} synthetic + {len(real[::2])} real fingerprints")
                pre = preload(db, args.preload, synth, real)
                summary["preload"][f"{store}_seconds"] = round(pre["seconds"], 1)
                summary["preload"]["pages"] = pre["pages"]
                log(f"  {pre['pages']:,} pages in {pre['seconds']:.1f} s ({pre['statuses']})")
                if store == "sqlite":
                    summary["stack"], summary["check_profile"] = stack_costs(db, synth, args.stack_requests,
                                                                             real[:args.stack_pages], args.batch)
                    log(f"  in-process: check_fingerprint profile: {summary['check_profile']}")
                    for r in summary["stack"]:
                        log(f"  in-process: {r['what']}: {r['cpu_ms']:.3f} ms CPU ({r['cpu_ms_per_fp']:.4f} per "
                            f"fingerprint)")
                for cfg in [c for c in configs if c.store == store]:
                    summary["configs"].append(run_config(cfg, db, pg, synth, real, args, cfg in sustained_on))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    compute_targets(summary)
    summary["finished"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    summary["load_end"] = loadavg()
    summary["src_end"] = source_state()
    summary["findings"] = findings(summary)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    if doc:
        write_doc(summary, argv_shown)
    print(json.dumps(compact_summary(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Throughput and latency of the HTTP service (``neardup serve``) on loopback.

For each store (SQLite file, PostgreSQL database) and each server variant (``--workers 1``,
``--workers 2`` as shipped, and ``--workers 2`` with the listening socket re-created with
``proto=IPPROTO_TCP`` so asyncio sets ``TCP_NODELAY``: the workaround for uvicorn #3149,
see *Findings*) the store is first pre-loaded with ``--preload`` synthetic fingerprints
(about 10% of them planted near copies) plus the real fingerprints of every other page of
``shared/corpus/scrapinghub-aeb`` (through :class:`neardup.Detector`, in one transaction
per 10,000 pages, before the server starts); then closed-loop clients measure:

* ``POST /v1/fingerprints/check``: fingerprints computed here (synthetic: 70% fresh, 15%
  near copies of stored pages with 1-3 bits flipped, 15% digests of stored pages; every
  verdict is checked against what it must be), at 4 and at 32 concurrent connections;
* ``POST /v1/check``: the HTML of the 181 scrapinghub-aeb pages, decoded as
  :class:`neardup.Client` does, at 2 connections per worker;
* ``POST /v1/fingerprints/add``: fresh synthetic fingerprints, unique URLs, 8 connections;

and requests/s, p50/p99 latency, errors (connection failures and non-200 answers) and the
CPU seconds the server processes (and PostgreSQL) used per request. A *sustained* run sends
``--sustained`` fingerprint checks (10^5 by default) to one configuration. The baseline for
page checks is the extractor alone on the same cores: ``extract_main_content(html,
extractor="accurate")`` over the same pages in 1 and in 2 forked processes at once.

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
import csv
import gzip
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import platform
import pwd
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
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
try:
    import neardup
except ImportError:  # running from a checkout without an installed package
    sys.path.insert(0, str(REPO_ROOT / "src"))
    import neardup
from neardup.detector import Detector
from neardup.extract import decode, extract_main_content
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint

CORPUS = Path(os.environ.get("NEARDUP_CORPUS", REPO_ROOT.parent / "shared" / "corpus")) / "scrapinghub-aeb"
DOC = REPO_ROOT / "docs" / "benchmarks.md"
START, END = "<!-- service:start -->", "<!-- service:end -->"
CLK = os.sysconf("SC_CLK_TCK")

# "+ fixes" servers run with this sitecustomize.py on PYTHONPATH (the supervisor and every
# spawned worker import it): two behaviour-preserving fixes of bugs this benchmark found.
#  1. uvicorn's bind_socket() leaves proto at 0, so asyncio never sets TCP_NODELAY on the
#     connections a multi-worker server accepts (Kludex/uvicorn#3149): re-create the
#     listener with proto IPPROTO_TCP.
#  2. SQLStore.change_bounds() runs "SELECT min(seq), max(seq) FROM changes", which SQLite
#     answers by scanning the whole change log (its min/max optimisation needs a lone
#     aggregate); every check and every write calls it: two scalar subqueries instead.
FIXES = """\
import os
if os.environ.get("NEARDUP_BENCH_FIXES") == "1":
    import socket

    import uvicorn.config as _config
    from neardup.store import SQLStore as _SQLStore

    _bind = _config.Config.bind_socket

    def bind_socket(self):
        s = _bind(self)
        if s.family in (socket.AF_INET, socket.AF_INET6) and s.proto != socket.IPPROTO_TCP:
            s = socket.socket(s.family, s.type, socket.IPPROTO_TCP, fileno=s.detach())
        return s

    def change_bounds(self):
        row = self._exec("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)").fetchone()
        return (int(row[0] or 0), int(row[1] or 0))

    _config.Config.bind_socket = bind_socket
    _SQLStore.change_bounds = change_bounds
"""


def fixed_change_bounds(self: Any) -> tuple[int, int]:  # fix 2, for the in-process measurements
    row = self._exec("SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)").fetchone()
    return (int(row[0] or 0), int(row[1] or 0))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- machine ------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    versions = {}
    for pkg in ("neardup", "fastapi", "starlette", "uvicorn", "pydantic", "httpx", "h11", "anyio",
                "psycopg", "psycopg-pool", "trafilatura", "lxml", "numpy", "numba", "uvloop", "httptools"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    versions["sqlite"] = sqlite3.sqlite_version
    return {"cpu_model": model, "nproc": os.cpu_count(), "mem_gib": round(mem / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions}


def loadavg() -> str:
    try:
        return " / ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


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
            return str(conn.execute("SHOW server_version").fetchone()[0])


@contextmanager
def pg_server(fsync: bool) -> Iterator[PgServer]:
    existing = os.environ.get("NEARDUP_BENCH_PG")
    if existing:
        yield PgServer(existing, None, None)
        return

    def find(name: str) -> str | None:
        import glob

        found = shutil.which(name)
        cands = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
        return found or (cands[-1] if cands else None)

    initdb, pg_ctl = find("initdb"), find("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("PostgreSQL server binaries not found (initdb, pg_ctl); set NEARDUP_BENCH_PG or use --stores sqlite")
    base = tempfile.mkdtemp(prefix="neardup-bench-pg-")
    data = os.path.join(base, "data")
    prefix: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(base, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run([*prefix, initdb, "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8"]
                   + ([] if fsync else ["--no-sync"]), check=True, capture_output=True, env=env)
    opts = (f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            f"-c fsync={'on' if fsync else 'off'}")
    subprocess.run([*prefix, pg_ctl, "-D", data, "-o", opts, "-l", os.path.join(base, "log"), "-w", "-t", "60", "start"],
                   check=True, capture_output=True, env=env)
    try:
        postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
        yield PgServer(f"postgresql://postgres@127.0.0.1:{port}/postgres", postmaster, fsync)
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", data, "-m", "fast", "-w", "stop"], capture_output=True, env=env, check=False)
        shutil.rmtree(base, ignore_errors=True)


# -- the corpus and the synthetic fingerprints ----------------------------------------------------
@dataclass
class RealPage:
    url: str
    html: str  # decoded as neardup.Client does
    fp: Fingerprint


def load_corpus(limit: int | None) -> list[tuple[str, str]]:
    if not (CORPUS / "manifest.tsv").is_file():
        raise SystemExit(f"corpus not found at {CORPUS} (set NEARDUP_CORPUS)")
    with open(CORPUS / "manifest.tsv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    pages = []
    for row in rows[:limit]:
        raw = gzip.decompress((CORPUS / row["file"]).read_bytes())
        text, _ = decode(raw, None)
        pages.append((row["url"], text))
    return pages


class Synth:
    """Random fingerprints of the default spec; stored ones are remembered for probes."""

    def __init__(self, seed: int = 1) -> None:
        self.rng = np.random.default_rng(seed)
        self.spec = DEFAULT_CONFIG.spec
        self.stored_simhash: list[int] = []
        self.stored_digest: list[str] = []
        self.serial = 0

    def fresh(self) -> tuple[int, str]:
        """A random 64-bit SimHash and a digest nobody else has."""
        self.serial += 1
        value = int(self.rng.integers(0, 2**63, dtype=np.int64)) << 1 | int(self.rng.integers(0, 2))
        return value, hashlib.sha256(f"fresh-{self.serial}-{self.rng.random()}".encode()).hexdigest()

    def near_of(self, value: int) -> int:
        for bit in self.rng.choice(64, size=int(self.rng.integers(1, 4)), replace=False):
            value ^= 1 << int(bit)
        return value

    def fingerprint(self, simhash: int, digest: str) -> Fingerprint:
        return Fingerprint(simhash=simhash, digest=digest, spec=self.spec, bits=64, tokens=120, length=900,
                           features=110)

    def body(self, url: str, simhash: int, digest: str) -> dict[str, Any]:
        return {"url": url, "simhash": f"{simhash:016x}", "digest": digest, "spec": self.spec, "tokens": 120,
                "length": 900, "features": 110}


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
                value = synth.near_of(synth.stored_simhash[rng.randrange(len(synth.stored_simhash))])
                digest = hashlib.sha256(f"planted-{i}".encode()).hexdigest()
            else:
                value, digest = synth.fresh()
            synth.stored_simhash.append(value)
            synth.stored_digest.append(digest)
            items.append((f"https://h{i % 997}.example/pre/{i}", synth.fingerprint(value, digest)))
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
def serve(db: str, workers: int, fixes: Path | None) -> Iterator[Server]:
    """``python -m neardup.cli serve --workers N`` in its own process group; with ``fixes``
    (a folder holding the FIXES sitecustomize.py) the fixes are applied in every process."""
    port = _free_port()
    args = ["serve", "--db", db, "--port", str(port), "--workers", str(workers)]
    cmd = [sys.executable, "-m", "neardup.cli", *args]
    env = dict(os.environ)
    if fixes is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(fixes), env.get("PYTHONPATH")]))
        env["NEARDUP_BENCH_FIXES"] = "1"
    shown = ("NEARDUP_BENCH_FIXES=1 PYTHONPATH=<fixes> " if fixes is not None else "") + "python -m neardup.cli " + " ".join(args)
    shown = shown.replace(db, "<postgresql://...>" if db.startswith("postgresql") else "<store.db>")
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
            while sum(1 for pid, ppid, _ in _all_procs() if ppid == proc.pid and b"spawn_main" in _cmdline(pid)) < workers:
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

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies, q) * 1000) if len(self.latencies) else float("nan")

    def row(self) -> dict[str, Any]:
        n = max(self.requests, 1)
        return {"endpoint": self.name, "conns": self.conns, "requests": self.requests,
                "seconds": round(self.seconds, 2), "rps": round(self.rps, 1),
                "p50_ms": round(self.pct(50), 2), "p99_ms": round(self.pct(99), 2),
                "p999_ms": round(self.pct(99.9), 2), "max_ms": round(float(self.latencies.max() * 1000), 1)
                if len(self.latencies) else None,
                "errors": self.errors, "error_kinds": self.error_kinds, "unexpected_verdicts": self.unexpected,
                "statuses": self.statuses, "client_cpu_ms_per_req": round(self.client_cpu / n * 1000, 3),
                "server_cpu_ms_per_req": round(self.server_cpu / n * 1000, 3),
                "pg_cpu_ms_per_req": round(self.pg_cpu / n * 1000, 3), "windows_rps": self.windows,
                "worker_restarts": self.restarts, "error_samples": self.error_samples}


def closed_loop(name: str, server: Server, pg: PgServer | None, make: Callable[[int], tuple[bytes, str | None]],
                conns: int, *, duration: float | None = None, total: int | None = None,
                window: float = 10.0) -> Result:
    """``conns`` threads, each on its own keep-alive connection, send make(i) back to back
    until ``duration`` seconds have passed or ``total`` requests were sent. make(i) returns
    the raw request and the verdict status it must get (None: any)."""
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
                  len(workers1 - workers0), samples)


# -- workloads -----------------------------------------------------------------------------------
class FpChecks:
    """Pre-encoded fingerprint checks: 70% fresh (new), 15% near copies of stored pages
    (1-3 bits flipped), 15% digests of stored pages (exact)."""

    def __init__(self, port: int, synth: Synth, pool: int = 6000, seed: int = 3) -> None:
        rng = random.Random(seed)
        self.items: list[tuple[bytes, str]] = []
        stored = len(synth.stored_simhash)
        for j in range(pool):
            r = rng.random()
            url = f"https://probe{j % 101}.example/c/{j}"
            if r < 0.70:
                value, digest = synth.fresh()
                expect = "new"
            elif r < 0.85:
                k = rng.randrange(stored)
                value, digest = synth.near_of(synth.stored_simhash[k]), synth.fresh()[1]
                expect = "near"
            else:
                k = rng.randrange(stored)
                value, digest = synth.fresh()[0], synth.stored_digest[k]
                expect = "exact"
            self.items.append((post("/v1/fingerprints/check", port, synth.body(url, value, digest)), expect))

    def __call__(self, i: int) -> tuple[bytes, str | None]:
        return self.items[i % len(self.items)]


class FpAdds:
    def __init__(self, port: int, synth: Synth, tag: str) -> None:
        self.port, self.tag = port, tag
        self.rng = np.random.default_rng(abs(hash(tag)) % 2**32)
        self.spec = synth.spec
        self.lock = threading.Lock()

    def __call__(self, i: int) -> tuple[bytes, str | None]:
        with self.lock:
            value = int(self.rng.integers(0, 2**63, dtype=np.int64))
        digest = hashlib.sha256(f"{self.tag}-{i}".encode()).hexdigest()
        body = {"url": f"https://add{i % 499}.example/{self.tag}/{i}", "simhash": f"{value:016x}", "digest": digest,
                "spec": self.spec, "tokens": 120, "length": 900, "features": 110}
        return post("/v1/fingerprints/add", self.port, body), None


class PageChecks:
    def __init__(self, port: int, real: list[RealPage]) -> None:
        self.items = [(post("/v1/check", port, {"url": p.url, "html": p.html}), None) for p in real]

    def __call__(self, i: int) -> tuple[bytes, str | None]:
        return self.items[i % len(self.items)]


# -- the extractor alone -----------------------------------------------------------------------------
def _extract_worker(pages: list[str], passes: int, what: str, start: Any, out: Any) -> None:
    from neardup.fingerprint import fingerprint

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
def stack_costs(db: str, synth: Synth, n: int, pages: list[RealPage]) -> list[dict[str, Any]]:
    """CPU per request of the pieces of a fingerprint check and of a page check, on one
    thread: the Detector call (as shipped and with fix 2), the extractor, and the ASGI app
    called directly (no socket, no HTTP parsing) with and without its two BaseHTTPMiddleware
    layers. Runs in a forked child so that the parent stays free of threads."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_stack_costs_child, args=(db, synth, n, [(p.url, p.html) for p in pages], out))
    proc.start()
    rows = out.get()
    proc.join()
    return rows


def _stack_costs_child(db: str, synth: Synth, n: int, pages: list[tuple[str, str]], out: Any) -> None:
    import asyncio

    from neardup.service import create_app
    from neardup.store import SQLStore

    det = Detector.open(db)
    rng = random.Random(9)
    bodies, fps = [], []
    for j in range(n):
        if rng.random() < 0.15:
            value, digest = synth.near_of(synth.stored_simhash[rng.randrange(len(synth.stored_simhash))]), synth.fresh()[1]
        else:
            value, digest = synth.fresh()
        fps.append((f"https://probe.example/s/{j}", synth.fingerprint(value, digest)))
        bodies.append(json.dumps(synth.body(f"https://probe.example/s/{j}", value, digest)).encode())
    page_bodies = [json.dumps({"url": u, "html": h}).encode() for u, h in pages]
    shipped = SQLStore.change_bounds
    # (name, fn(j), fix 2 applied, note, requests per round)
    entries: list[tuple[str, Callable[[int], None], bool, str, int]] = [
        ("Detector.check_fingerprint", lambda j: det.check_fingerprint(*fps[j % n]), False,
         f"as shipped; {det.store.change_bounds()[1]:,} rows in the change log", n // 5),
        ("Detector.check_fingerprint, fix 2", lambda j: det.check_fingerprint(*fps[j % n]), True,
         "change_bounds() with two scalar subqueries", n // 5),
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
    bare.user_middleware = []  # _BodyLimit and auth_and_metrics, both BaseHTTPMiddleware
    for name, app in (("ASGI app", full), ("ASGI app without its 2 BaseHTTPMiddleware layers", bare)):
        entries.append((f"{name}: GET /healthz",
                        lambda j, app=app: loop.run_until_complete(call(app, "GET", "/healthz", b"")), True,
                        "no socket, no HTTP parsing", n // 5))
        entries.append((f"{name}: POST /v1/fingerprints/check",
                        lambda j, app=app: loop.run_until_complete(call(app, "POST", "/v1/fingerprints/check", bodies[j % n])),
                        True, "fix 2 applied; no socket, no HTTP parsing", n // 5))
    if pages:
        m = len(pages)
        entries += [
            ("page: extract_main_content(accurate)", lambda j: extract_main_content(pages[j % m][1], extractor="accurate"),
             True, f"{m} scrapinghub-aeb pages, decoded", m),
            ("page: Detector.fingerprint", lambda j: det.fingerprint(pages[j % m][1], pages[j % m][0]), True,
             "extraction + normalisation + SimHash", m),
            ("page: ASGI app: POST /v1/check", lambda j: loop.run_until_complete(call(full, "POST", "/v1/check", page_bodies[j % m])),
             True, "fix 2 applied; no socket, no HTTP parsing", m),
            ("page: ASGI app without its 2 BaseHTTPMiddleware layers: POST /v1/check",
             lambda j: loop.run_until_complete(call(bare, "POST", "/v1/check", page_bodies[j % m])),
             True, "fix 2 applied; no socket, no HTTP parsing", m),
        ]
    # round-robin rounds, the best (least CPU) round of each kept: the cores are shared
    best: dict[str, float] = {}
    try:
        for rnd in range(5):
            for name, fn, fixed, _, per in entries:
                if name.startswith("page:") and rnd >= 3:
                    continue  # 3 rounds of the (slow) page rows
                SQLStore.change_bounds = fixed_change_bounds if fixed else shipped
                if rnd == 0:
                    for j in range(min(30, per)):
                        fn(j)
                t = time.process_time()
                for j in range(rnd * per, (rnd + 1) * per):
                    fn(j)
                spent = (time.process_time() - t) / per * 1000
                best[name] = min(best.get(name, spent), spent)
    finally:
        SQLStore.change_bounds = shipped
        loop.close()
        det.store.close()  # not det.close(): leave the saved index as the servers will find it
    rows = [{"what": name, "cpu_ms": round(best[name], 3), "note": note} for name, _, _, note, _ in entries]
    out.put(rows)


# -- one configuration ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    store: str
    workers: int
    fixes: bool

    @classmethod
    def parse(cls, spec: str) -> Config:
        parts = spec.strip().split(":")
        if parts[0] not in ("sqlite", "postgres") or len(parts) not in (2, 3) or parts[2:] not in ([], ["fix"]):
            raise SystemExit(f"bad configuration {spec!r}: want store:workers[:fix], store sqlite or postgres")
        return cls(parts[0], int(parts[1]), parts[2:] == ["fix"])

    @property
    def variant(self) -> str:
        return f"{self.workers} worker{'s' if self.workers > 1 else ''}" + (" + fixes" if self.fixes else "")


def run_config(cfg: Config, db: str, pg: PgServer | None, fixdir: Path, synth: Synth, real: list[RealPage],
               args: argparse.Namespace, sustained: bool) -> dict[str, Any]:
    log(f"{cfg.store}, {cfg.variant} (load {loadavg()})")
    out: dict[str, Any] = {"store": cfg.store, "workers": cfg.workers, "fixes": cfg.fixes, "variant": cfg.variant,
                           "rows": [], "load": loadavg()}
    with serve(db, cfg.workers, fixdir if cfg.fixes else None) as server:
        out["command"] = server.command
        checks = FpChecks(server.port, synth)
        pages = PageChecks(server.port, real)
        # warm up every worker: the first page check loads the extractor, the first
        # fingerprint check the index
        closed_loop("warm-up", server, pg, checks, 8, duration=args.warmup)
        closed_loop("warm-up", server, pg, pages, 2 * cfg.workers, total=4 * cfg.workers)
        for conns in args.fp_conns:
            r = closed_loop("POST /v1/fingerprints/check", server, pg, checks, conns, duration=args.duration)
            out["rows"].append(r.row())
            log(f"  fp check  c={conns:<3} {r.rps:8.1f}/s p50 {r.pct(50):6.2f} ms p99 {r.pct(99):7.2f} ms "
                f"errors {r.errors} unexpected {r.unexpected} server {r.server_cpu / max(r.requests, 1) * 1000:.2f} ms CPU/req")
        r = closed_loop("POST /v1/check", server, pg, pages, 2 * cfg.workers, total=args.page_requests)
        out["rows"].append(r.row())
        log(f"  page check c={2 * cfg.workers:<3}{r.rps:8.2f}/s p50 {r.pct(50):6.1f} ms p99 {r.pct(99):7.1f} ms "
            f"errors {r.errors} server {r.server_cpu / max(r.requests, 1) * 1000:.1f} ms CPU/page")
        # the extractor alone right after, as many processes as workers, same pages (the server idles)
        out["extractor_adjacent"] = extractor_alone([p.html for p in real][:args.page_requests], cfg.workers, 1, "extract")
        log(f"  extractor alone, {cfg.workers} process(es), right after: {out['extractor_adjacent']['pages_per_s']:.2f} pages/s")
        tag = f"{cfg.store}-{cfg.workers}-{int(cfg.fixes)}"
        r = closed_loop("POST /v1/fingerprints/add", server, pg, FpAdds(server.port, synth, tag), 8, duration=args.duration)
        out["rows"].append(r.row())
        log(f"  fp add    c=8   {r.rps:8.1f}/s p50 {r.pct(50):6.2f} ms p99 {r.pct(99):7.2f} ms errors {r.errors}")
        if sustained:
            log(f"  sustained: {args.sustained:,} fingerprint checks, {args.sustained_conns} connections")
            r = closed_loop("POST /v1/fingerprints/check (sustained)", server, pg, checks, args.sustained_conns,
                            total=args.sustained)
            out["sustained"] = r.row()
            log(f"  sustained {r.requests:,} in {r.seconds:.0f} s: {r.rps:.1f}/s p50 {r.pct(50):.2f} ms "
                f"p99 {r.pct(99):.2f} ms max {r.latencies.max() * 1000:.0f} ms errors {r.errors} unexpected {r.unexpected}")
    return out


# -- report ------------------------------------------------------------------------------------------
def fmt(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def fp_rows(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in cfg["rows"] if r["endpoint"] == "POST /v1/fingerprints/check"]


def write_doc(summary: dict[str, Any], argv: list[str]) -> None:
    m = summary["machine"]
    v = m["versions"]
    pre = summary["preload"]
    lines = [START, "## HTTP service (`benchmarks/service.py`)", "",
             "Generated by `benchmarks/service.py`; do not edit by hand.", "", "```",
             ("python benchmarks/service.py " + " ".join(argv)).rstrip(), "```", "",
             (f"Run {summary['started']} to {summary['finished']} UTC; load average {summary['load_start']} at the start, "
             f"{summary['load_end']} at the end."), "",
             (f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['mem_gib']} GiB RAM, Python {m['python']}, {m['platform']}; "
             f"neardup {v['neardup']}, fastapi {v['fastapi']}, starlette {v['starlette']}, uvicorn {v['uvicorn']} "
             f"(uvloop {v['uvloop'] or 'not installed'}, httptools {v['httptools'] or 'not installed'}: asyncio + h11 {v['h11']}), "
             f"pydantic {v['pydantic']}, psycopg {v['psycopg']}, psycopg-pool {v['psycopg-pool']}, SQLite {v['sqlite']}, "
             f"PostgreSQL {summary.get('postgres_version') or '-'}, trafilatura {v['trafilatura']}, lxml {v['lxml']}."), "",
             (f"**The {m['nproc']} CPUs are shared with other jobs** (see the load averages, also given for the start "
             "of each configuration under the results), and the load generator, the server processes and PostgreSQL all run on them. Every "
             "configuration ran once, so rates carry 10-30% noise and are lower bounds for dedicated cores. The *server "
             "CPU ms/req* column (CPU time of the server's processes divided by the requests) is the steadier measure "
             "of cost. On this machine `sum(range(10**7))` takes "
             f"{summary['calibration_s']:.2f} s of CPU (about 0.12-0.15 s on a current desktop core)."), "",
             "### Setup", "",
             f"* Store: pre-loaded before the servers start with {pre['pages']:,} pages: {summary['args']['preload']:,} "
             "synthetic fingerprints (10% of them near copies of earlier ones) and the real fingerprints of every other "
             f"one of the {summary['corpus_pages']} scrapinghub-aeb pages, through `Detector.add_fingerprint`, 10,000 "
             f"pages per transaction (SQLite {fmt(pre.get('sqlite_seconds'))} s"
             + (f", PostgreSQL {fmt(pre.get('postgres_seconds'))} s" if pre.get("postgres_seconds") else "")
             + "). SQLite: WAL, `synchronous=FULL` (the store's default). PostgreSQL: a local server started by the "
             f"benchmark, fsync {'on' if summary.get('pg_fsync') else 'off'}, synchronous commit. Each configuration "
             "adds its own pages (the add rows), so later configurations see a slightly larger store.",
             ("* Server: `neardup serve --workers N` in its own process group (command under each table). *+ fixes*: the "
             "same command with a `sitecustomize.py` on `PYTHONPATH` that applies two behaviour-preserving fixes in "
             "every server process (see Findings): uvicorn's multi-worker listener re-created with "
             "`proto=IPPROTO_TCP` (so `TCP_NODELAY` is set), and `change_bounds()` as two scalar subqueries."),
             ("* Load: this process, one thread per connection, HTTP/1.1 keep-alive on raw sockets with pre-encoded "
             "requests; latency from the send to the last byte of the answer. Fingerprint checks: 70% fresh "
             "(must be `new`), 15% near copies of stored pages with 1-3 bits flipped (`near`), 15% digests of stored "
             "pages (`exact`); *unexpected* counts verdicts that differ. Page checks: `POST /v1/check` with the HTML of "
             "the scrapinghub-aeb pages (decoded as `neardup.Client` does; half of them stored, so `exact`), 2 "
             "connections per worker. Adds: `POST /v1/fingerprints/add` of fresh synthetic fingerprints, unique URLs, "
             "8 connections."),
             (f"* Errors: connection failures and non-200 answers. Each fingerprint row runs {summary['args']['duration']:g} s "
             f"after a {summary['args']['warmup']:g} s warm-up; each page row sends {summary['args']['page_requests']} pages."), ""]
    lines += ["### Results", "",
              "| store | server | endpoint | conns | requests | req/s | p50 ms | p99 ms | max ms | errors | unexpected | server CPU ms/req | PostgreSQL CPU ms/req | client CPU ms/req |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for cfg in summary["configs"]:
        for r in cfg["rows"]:
            lines.append(f"| {cfg['store']} | {cfg['variant']} | `{r['endpoint']}` | {r['conns']} | {r['requests']:,} | "
                         f"{fmt(r['rps'])} | {fmt(r['p50_ms'], 2)} | {fmt(r['p99_ms'], 2)} | {fmt(r['max_ms'], 0)} | "
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
                  f"{s['conns']} connections, {fmt(s['seconds'], 0)} s: **{fmt(s['rps'])} req/s**, p50 {s['p50_ms']:.2f} ms, "
                  f"p99 {s['p99_ms']:.2f} ms, p99.9 {s['p999_ms']:.2f} ms, max {s['max_ms']:.0f} ms; **errors: {s['errors']}**"
                  + (" (" + ", ".join(f"{k} {n}" for k, n in s["error_kinds"].items()) + ")" if s["errors"] else "")
                  + f", unexpected verdicts: {s['unexpected_verdicts']}; server CPU {s['server_cpu_ms_per_req']:.2f} ms/request"
                  + (f" + PostgreSQL {s['pg_cpu_ms_per_req']:.2f} ms" if s["pg_cpu_ms_per_req"] else "") + ".", ""]
        if s.get("windows_rps"):
            lines += ["Requests/s per 10 s window: " + ", ".join(fmt(w, 0) for w in s["windows_rps"]) + ".", ""]
    if summary.get("stack"):
        lines += ["### Where the CPU goes (in-process, one thread)", "",
                  (f"The SQLite store above ({pre['pages']:,} pages), in a forked process: the Detector calls, the "
                   "extractor, and the service's ASGI app called directly (no socket, no HTTP parsing: uvicorn's h11 "
                   "parsing and the socket I/O come on top), with and without its two `BaseHTTPMiddleware` layers "
                   "(`_BodyLimit` and the auth/metrics middleware). Rows run round-robin, the least CPU of 5 rounds "
                   "(3 for page rows) kept."), "",
                  "| what | CPU ms/request | note |", "| --- | ---: | --- |"]
        for r in summary["stack"]:
            lines.append(f"| {r['what']} | {r['cpu_ms']:.3f} | {r['note']} |")
        lines.append("")
    ex = summary["extractor"]
    lines += ["### Page checks vs the extractor alone", "",
              "The extractor alone: `extract_main_content(html, extractor=\"accurate\")` over the same decoded pages in "
              "N forked processes at once, on the same shared cores. Each page row of the service is compared with the "
              "extractor run right after it (as many processes as the server has workers, the same pages, the server "
              "idle), because what else runs on these cores changes from minute to minute."
              + (" For reference, at the start (all pages, one pass; `fingerprint` = extraction + normalisation + SimHash, "
                 "what the service runs per page):" if ex else ""), ""]
    if ex:
        lines += ["| what | processes | pages/s per process | pages/s | CPU ms/page |", "| --- | ---: | ---: | ---: | ---: |"]
        for e in ex:
            lines.append(f"| {e['what']} | {e['processes']} | {fmt(e['pages_per_s_per_process'], 2)} | "
                         f"{fmt(e['pages_per_s'], 2)} | {e['cpu_ms_per_page']:.1f} |")
        lines.append("")
    lines += ["| store | server | page checks/s | extractor alone right after | ratio | CPU ms/page: extractor / server | target >= 0.80 |",
              "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for t in summary["targets"]["page_checks"]:
        lines.append(f"| {t['store']} | {t['variant']} | {fmt(t['page_rps'], 2)} | {fmt(t['extractor_pages_per_s'], 2)} | "
                     f"{t['ratio']:.2f} | {t['extractor_cpu_ms']:.1f} / {t['server_cpu_ms']:.1f} = {t['cpu_ratio']:.2f} | "
                     f"{'met' if t['met'] else '**not met**'} |")
    lines += ["", "### Targets", "",
              ("Fingerprint checks >= 2,000/s with p99 <= 20 ms (per configuration: its fastest row with p99 <= 20 ms, "
              "else its fastest row):"), "",
              "| store | server | conns | req/s | p99 ms | req/s vs 2,000 | met |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for t in summary["targets"]["fp_checks"]:
        lines.append(f"| {t['store']} | {t['variant']} | {t['conns']} | {fmt(t['rps'])} | {t['p99_ms']:.2f} | "
                     f"{t['rps'] / 2000:.2f}x | {'met' if t['met'] else '**not met**'} |")
    sus = summary["targets"]["sustained"]
    lines += ["", "Page checks within 80% of the extractor alone: see the table above. Sustained load: "
              + ("; ".join(f"{s['store']}, {s['variant']}: {s['requests']:,} requests, {s['errors']} errors, "
                           f"{s['unexpected']} unexpected verdicts" for s in sus) or "not run")
              + (" (target 0 errors: met)." if sus and all(s["errors"] == 0 for s in sus) else
                 " (target 0 errors: **not met**)." if sus else "."), ""]
    lines += ["### Findings", ""] + [f"- {f}" for f in summary["findings"]] + ["", END]
    section = "\n".join(lines) + "\n"
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Benchmarks\n"  # re-read right before writing
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        text = before + section.rstrip("\n") + after
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.write_text(text, encoding="utf-8")
    log(f"wrote the service section of {DOC}")


def findings(summary: dict[str, Any]) -> list[str]:
    out = []
    by = {(c["store"], c["workers"], c["fixes"]): c for c in summary["configs"]}
    stack = {r["what"]: r["cpu_ms"] for r in summary.get("stack", [])}
    ship, fixed = stack.get("Detector.check_fingerprint"), stack.get("Detector.check_fingerprint, fix 2")
    s1, s1f = by.get(("sqlite", 1, False)), by.get(("sqlite", 1, True))
    if ship and fixed:
        rows = ""
        if s1 and s1f:
            a, b = max(fp_rows(s1), key=lambda r: r["rps"]), max(fp_rows(s1f), key=lambda r: r["rps"])
            rows = (f"; through the service (SQLite, 1 worker) {fmt(a['rps'])}/s at {a['server_cpu_ms_per_req']:.2f} ms "
                    f"of server CPU per check as shipped vs {fmt(b['rps'])}/s at {b['server_cpu_ms_per_req']:.2f} ms fixed")
        out.append("**SQLite: every check and every write scans the whole change log.** `SQLStore.change_bounds()` runs "
                   "`SELECT min(seq), max(seq) FROM changes`; SQLite only turns a *lone* min() or max() into an index "
                   "lookup, so this is a full scan of `changes` (one row per add, never pruned by the service), and "
                   "`Detector._sync()` calls it on every `check_fingerprint` and every write. `Detector.check_fingerprint` "
                   f"takes {ship:.2f} ms of CPU at {summary['preload']['pages']:,} stored pages vs {fixed:.2f} ms with "
                   "`SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)`" + rows + ". The cost grows "
                   "linearly with the pages ever added. PostgreSQL plans both aggregates as index lookups and is unaffected.")
    for store in ("sqlite", "postgres"):
        a, b = by.get((store, 2, False)), by.get((store, 2, True))
        if a and b:
            pairs = "; ".join(f"{x['conns']} connections: {fmt(x['rps'])}/s, p50 {x['p50_ms']:.1f} ms as shipped vs "
                              f"{fmt(y['rps'])}/s, p50 {y['p50_ms']:.1f} ms with the fixes"
                              for x, y in zip(fp_rows(a), fp_rows(b)))
            out.append(f"**`--workers 2` loses `TCP_NODELAY`** ({store}): uvicorn's multi-worker path binds the listening "
                       "socket with `proto=0`, and asyncio only sets `TCP_NODELAY` on accepted sockets whose proto is "
                       "`IPPROTO_TCP` (Kludex/uvicorn#3149, open), so h11's two writes per response (headers, body) wait "
                       "for the client's delayed ACK: about 40 ms per keep-alive request, whatever the endpoint "
                       f"(`--workers 1` is unaffected). Fingerprint checks: {pairs}. `neardup serve` could bind the socket "
                       "itself with `socket.socket(AF_INET, SOCK_STREAM, IPPROTO_TCP)` and hand it to uvicorn "
                       "(`uvicorn.Server(config)` + `Multiprocess(config, target=server.run, sockets=[sock])`), or set "
                       "`TCP_NODELAY` on each connection.")
    full = stack.get("ASGI app: POST /v1/fingerprints/check")
    bare = stack.get("ASGI app without its 2 BaseHTTPMiddleware layers: POST /v1/fingerprints/check")
    if full and bare and fixed:
        out.append(f"**The HTTP stack, not the lookup, bounds fingerprint checks.** In-process, the ASGI app takes {full:.2f} ms "
                   f"of CPU per fingerprint check, of which the Detector call is {fixed:.2f} ms; without the two "
                   f"`BaseHTTPMiddleware` layers (`_BodyLimit` and `auth_and_metrics`) it takes {bare:.2f} ms "
                   f"({full / bare:.1f}x less). Starlette's `BaseHTTPMiddleware` runs every request through an extra task "
                   "group and memory streams, twice here. Pure ASGI middleware for the body limit (Starlette's "
                   "`RequestBodyLimitMiddleware`, or `FastAPI(max_body_size=...)` in this FastAPI version, with an "
                   "exception handler that keeps the JSON 413 body) and for auth/metrics would keep the behaviour. "
                   "uvloop and httptools (`uvicorn[standard]`) are not installed here; the socket and h11 parsing add "
                   "the rest of the server CPU per request.")
    ext, fpr = stack.get("page: extract_main_content(accurate)"), stack.get("page: Detector.fingerprint")
    pfull = stack.get("page: ASGI app: POST /v1/check")
    pbare = stack.get("page: ASGI app without its 2 BaseHTTPMiddleware layers: POST /v1/check")
    if ext and fpr and pfull:
        out.append(f"**Page checks.** In-process, one page costs {ext:.1f} ms of CPU in the extractor alone, {fpr:.1f} ms in "
                   f"`Detector.fingerprint` (+{(fpr / ext - 1) * 100:.0f}%: normalisation and SimHash) and {pfull:.1f} ms "
                   f"through the ASGI app (+{(pfull / ext - 1) * 100:.0f}% over the extractor: JSON body of the whole page, "
                   f"pydantic, the middleware, the check"
                   + (f"; {pbare:.1f} ms without the two middleware layers" if pbare else "")
                   + f"). So even on idle cores a page check can reach about {ext / pfull:.2f} of the extractor's rate "
                   "before HTTP parsing, and the 80% target leaves little room for the socket and h11 (a 100-300 KB body "
                   "arrives in many chunks, each through both middleware layers). The measured ratios above scatter "
                   "around that because of the other jobs on the cores.")
    s4 = [r for c in summary["configs"] for r in fp_rows(c) if c["fixes"] or c["workers"] == 1]
    by_conns: dict[int, list[float]] = {}
    for r in s4:
        by_conns.setdefault(r["conns"], []).append(r["server_cpu_ms_per_req"])
    if len(by_conns) > 1:
        lo, hi = min(by_conns), max(by_conns)
        out.append(f"More connections do not help on these cores: server CPU per fingerprint check averages "
                   f"{np.mean(by_conns[lo]):.2f} ms at {lo} connection(s) and {np.mean(by_conns[hi]):.2f} ms at {hi} "
                   "(the sync endpoints run in anyio's thread pool: more threads contend for the GIL and the detector "
                   "lock), and latency grows with the queue. There is no batch endpoint for fingerprints "
                   "(`/v1/check/batch` takes pages): a `POST /v1/fingerprints/check/batch` would spread the HTTP cost "
                   "over many fingerprints, which is how a crawler could get thousands of checks per second from one "
                   "worker.")
    nproc = summary["machine"]["nproc"]
    best = None
    for c in summary["configs"]:
        for r in fp_rows(c):
            if best is None or r["rps"] > best[1]["rps"]:
                best = (c, r)
    if best:
        c, r = best
        cpu = r["server_cpu_ms_per_req"] + r["pg_cpu_ms_per_req"] + r["client_cpu_ms_per_req"]
        out.append(f"Best fingerprint-check rate: {fmt(r['rps'])}/s ({c['store']}, {c['variant']}, {r['conns']} connections) "
                   f"at {r['server_cpu_ms_per_req']:.2f} ms of server CPU per request"
                   + (f" + {r['pg_cpu_ms_per_req']:.2f} ms of PostgreSQL" if r["pg_cpu_ms_per_req"] else "")
                   + f" + {r['client_cpu_ms_per_req']:.3f} ms of load generator: {nproc} cores fully ours would allow "
                   f"about {fmt(nproc * 1000 / cpu, 0)}/s at that cost; 2,000/s needs under {nproc * 1000 / 2000:.1f} ms "
                   "of CPU per request on these cores, all included.")
    errs = summary["errors_total"]
    out.append(f"Errors over the whole run: {errs}; unexpected verdicts: {summary['unexpected_total']}.")
    return out


def compact_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The JSON object printed as the last stdout line."""
    keys = ("endpoint", "conns", "requests", "rps", "p50_ms", "p99_ms", "errors", "unexpected_verdicts",
            "server_cpu_ms_per_req", "pg_cpu_ms_per_req")
    return {"benchmark": "service", "machine": {k: summary["machine"][k] for k in ("cpu_model", "nproc")},
            "load": [summary["load_start"], summary["load_end"]], "preload_pages": summary["preload"].get("pages"),
            "configs": [{"store": c["store"], "variant": c["variant"], "rows": [{k: r[k] for k in keys} for r in c["rows"]]}
                        for c in summary["configs"]],
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
                    help="comma list of store:workers[:fix] (default sqlite:1,sqlite:1:fix,sqlite:2,sqlite:2:fix,"
                         "postgres:1,postgres:2,postgres:2:fix; --quick sqlite:2:fix)")
    ap.add_argument("--preload", type=float, default=None, help="synthetic pages stored first (default 1e5; --quick 3000)")
    ap.add_argument("--duration", type=float, default=None, help="seconds per fingerprint row (default 10; --quick 2)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds of warm-up per server (default 3; --quick 1)")
    ap.add_argument("--fp-conns", default="1,4,32", help="connection counts of the fingerprint-check rows")
    ap.add_argument("--page-requests", type=int, default=None, help="page checks per page row (default 181; --quick 16)")
    ap.add_argument("--pages", type=int, default=None, help="corpus pages used (default all 181; --quick 16)")
    ap.add_argument("--extract-passes", type=int, default=1)
    ap.add_argument("--stack-requests", type=int, default=None, help="requests per in-process row (default 2500; --quick 250)")
    ap.add_argument("--stack-pages", type=int, default=None, help="pages per in-process page row (default 30; --quick 4)")
    ap.add_argument("--sustained", type=float, default=None, help="fingerprint checks in the sustained run (default 1e5; --quick 1000)")
    ap.add_argument("--sustained-conns", type=int, default=16)
    ap.add_argument("--sustained-on", default=None,
                    help="configurations (store:workers[:fix], comma list) that get the sustained run (default "
                         "sqlite:2:fix; --quick sqlite:2:fix); 'none' for none")
    ap.add_argument("--pg-fsync", choices=("on", "off"), default="on")
    ap.add_argument("--doc", dest="doc", action="store_true", default=None, help="write the docs section (default unless --quick)")
    ap.add_argument("--no-doc", dest="doc", action="store_false")
    ap.add_argument("--json-out", default=None, help="also write the full summary here")
    ap.add_argument("--from-json", default=None, help="only re-write the docs section from a --json-out file of a full run")
    args = ap.parse_args(argv)
    if args.from_json:
        summary = json.loads(Path(args.from_json).read_text())
        summary["findings"] = findings(summary)
        write_doc(summary, summary.get("argv", []))
        print(json.dumps(compact_summary(summary)))
        return 0
    q = args.quick
    configs = [Config.parse(c) for c in (args.configs or ("sqlite:2:fix" if q else
               "sqlite:1,sqlite:1:fix,sqlite:2,sqlite:2:fix,postgres:1,postgres:2,postgres:2:fix")).split(",")]
    args.preload = int(args.preload if args.preload is not None else (3000 if q else 1e5))
    args.duration = args.duration if args.duration is not None else (2.0 if q else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if q else 3.0)
    args.fp_conns = [int(c) for c in args.fp_conns.split(",")]
    args.pages = args.pages if args.pages is not None else (16 if q else None)
    args.page_requests = args.page_requests if args.page_requests is not None else (16 if q else 181)
    args.stack_requests = args.stack_requests if args.stack_requests is not None else (250 if q else 2500)
    args.stack_pages = args.stack_pages if args.stack_pages is not None else (4 if q else 30)
    args.sustained = int(args.sustained if args.sustained is not None else (1000 if q else 1e5))
    sus_spec = args.sustained_on or "sqlite:2:fix"
    sustained_on = set() if sus_spec == "none" else {Config.parse(c) for c in sus_spec.split(",")}
    doc = args.doc if args.doc is not None else not q
    argv_shown = argv if argv is not None else sys.argv[1:]

    summary: dict[str, Any] = {"benchmark": "service", "argv": list(argv_shown),
                               "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                               "load_start": loadavg(), "machine": machine(), "calibration_s": calibrate(),
                               "args": {**{k: v for k, v in vars(args).items() if k not in ("doc", "configs", "sustained_on")},
                                        "configs": [f"{c.store}:{c.workers}{':fix' if c.fixes else ''}" for c in configs]}}
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
    fixdir = tmp / "fixes"
    fixdir.mkdir()
    (fixdir / "sitecustomize.py").write_text(FIXES)
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
                    summary["stack"] = stack_costs(db, synth, args.stack_requests, real[:args.stack_pages])
                    for r in summary["stack"]:
                        log(f"  in-process: {r['what']}: {r['cpu_ms']:.3f} ms CPU")
                for cfg in [c for c in configs if c.store == store]:
                    summary["configs"].append(run_config(cfg, db, pg, fixdir, synth, real, args, cfg in sustained_on))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # targets
    fp_t, page_t, sus_t = [], [], []
    for c in summary["configs"]:
        fps = fp_rows(c)
        ok = [r for r in fps if r["p99_ms"] <= 20]
        best = max(ok or fps, key=lambda r: r["rps"])
        fp_t.append({"store": c["store"], "variant": c["variant"], "conns": best["conns"], "rps": best["rps"],
                     "p99_ms": best["p99_ms"], "met": best["rps"] >= 2000 and best["p99_ms"] <= 20})
        page = next(r for r in c["rows"] if r["endpoint"] == "POST /v1/check")
        base = c.get("extractor_adjacent")
        if base:
            page_t.append({"store": c["store"], "variant": c["variant"], "page_rps": page["rps"],
                           "extractor_pages_per_s": base["pages_per_s"], "ratio": round(page["rps"] / base["pages_per_s"], 3),
                           "cpu_ratio": round(base["cpu_ms_per_page"] / max(page["server_cpu_ms_per_req"], 1e-9), 3),
                           "extractor_cpu_ms": base["cpu_ms_per_page"], "server_cpu_ms": page["server_cpu_ms_per_req"],
                           "met": page["rps"] / base["pages_per_s"] >= 0.8, "page_errors": page["errors"]})
        if c.get("sustained"):
            s = c["sustained"]
            sus_t.append({"store": c["store"], "variant": c["variant"], "requests": s["requests"], "rps": s["rps"],
                          "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"], "errors": s["errors"],
                          "unexpected": s["unexpected_verdicts"]})
    summary["targets"] = {"fp_checks": fp_t, "page_checks": page_t, "sustained": sus_t}
    summary["errors_total"] = sum(r["errors"] for c in summary["configs"] for r in c["rows"]) + sum(s["errors"] for s in sus_t)
    summary["unexpected_total"] = (sum(r["unexpected_verdicts"] for c in summary["configs"] for r in c["rows"])
                                   + sum(s["unexpected"] for s in sus_t))
    summary["finished"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    summary["load_end"] = loadavg()
    summary["findings"] = findings(summary)
    if doc:
        write_doc(summary, argv_shown)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    print(json.dumps(compact_summary(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

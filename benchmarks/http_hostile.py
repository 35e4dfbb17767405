"""The HTTP service under hostile load, over a real socket: what a crawler fleet and an
attacker would do to `neardup serve` at once.

Phases, against one `neardup serve` process (SQLite store in a temporary folder):

1. **mixed**: N requests (default 10,000), C at a time (default 32): a quarter good page adds
   and checks (real pages of the bundled sample under random URLs), the rest the hostile
   requests of ``benchmarks/fuzz.py`` (bad ids, bad fingerprints, broken JSON, 10^5 nested
   brackets, bogus bodies) plus requests without a token. Counted: answers by status, 5xx,
   error bodies that are not JSON, requests that got no answer within 60 s.
2. **slowloris**: S connections (default 20) declare ``Content-Length: 1000`` and send one
   byte. Counted: connections the server answered (408) and closed within the body timeout
   plus 5 s, and those still open ("hung").
3. **big bodies**: 24 checks of 15 MiB at once; the server's peak RSS (VmHWM) and the
   answers (200, or 503 + Retry-After beyond the in-flight byte cap).
4. **metrics**: /metrics size before and after 5,000 requests to random 2 KB paths and a
   label-injection path; whether the injected line shows up.
5. **flood** (issue 25): a store of ``--store-pages`` fingerprints (default 50,000), then,
   in separate processes, fingerprint checks one at a time (a crawler; half near copies of
   stored pages, half new), first alone for ``--quiet`` seconds, then for ``--flood``
   seconds while 16 clients loop on /metrics and 2 loop on POST /v1/check with the
   attribute, tag and entity bombs of ``benchmarks/fuzz.py``. Counted: the checks' p50 and
   p99 in both, the bombs' answers (200 or 422 past the per-page limit ``--page-timeout``),
   5xx and non-JSON errors, /metrics answers.
6. **idle**: ``--idle`` connections that send nothing and as many that stop half-way through
   their headers; seconds until the server closed each (target: all within 30 s), and a
   real request answered meanwhile.

The server is ``neardup.service.serve`` over ``create_app`` (what ``neardup serve`` runs),
started with ``--page-timeout``. Usage::

    python benchmarks/http_hostile.py [--n 10000] [--concurrency 32] [--docs]
        [--phases mixed,slowloris,big,metrics,flood,idle]

The last line of stdout is a JSON summary; ``--docs`` writes its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from _common import REPO_ROOT, logger, machine_line, proc_kib, replace_section, table
from _corpus import read_page
from fuzz import http_case

DOC_START, DOC_END = "<!-- http-hostile:start -->", "<!-- http-hostile:end -->"
STOCK_START, STOCK_END = "<!-- http-stock:start -->", "<!-- http-stock:end -->"
TOKEN = "s3cret-token"
BODY_TIMEOUT = 5.0


log = logger("http-hostile")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_peak_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    kib = proc_kib(f"/proc/{pid}/status", "VmHWM")
    return float("nan") if kib is None else kib / 1024


def sample_pages() -> list[str]:
    folder = REPO_ROOT / "examples" / "sample" / "pages"
    return [read_page(p).decode("utf-8", "replace") for p in sorted(folder.glob("*.html.gz"))]


LAUNCH = ("import sys; from neardup import Detector; from neardup.service import create_app, serve; "
          "det = Detector.open(sys.argv[1]); serve(create_app(det, token=sys.argv[3], body_timeout=float(sys.argv[4]), "
          "page_timeout=float(sys.argv[5])), '127.0.0.1', int(sys.argv[2]))")


@contextlib.contextmanager
def server(db: Path, port: int, page_timeout: float = 10.0) -> Any:
    """``neardup serve`` (one process) as ``neardup.service.serve(create_app(...))``, with the
    per-page time limit ``page_timeout``."""
    cmd = [sys.executable, "-c", LAUNCH, str(db), str(port), TOKEN, str(BODY_TIMEOUT), str(page_timeout)]
    err = (db.parent / "server.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
            if proc.poll() is not None:
                break
        else:
            raise RuntimeError("the server did not start within 120 s")
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {(db.parent / 'server.log').read_text()[-2000:]}")
        yield proc
    finally:
        if proc.poll() is not None:
            log(f"the server exited with {proc.returncode}: "
                + (db.parent / "server.log").read_text(errors="replace")[-3000:])
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        err.close()


async def mixed(base: str, n: int, concurrency: int, seed: int) -> dict[str, Any]:
    r = random.Random(seed)
    pages = sample_pages()
    statuses: Counter[str] = Counter()
    not_json = no_answer = 0
    unanswered: list[str] = []
    slowest = 0.0
    sem = asyncio.Semaphore(concurrency)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def request(i: int) -> tuple[str, str, bytes, dict[str, str]]:
        kind = r.random()
        if kind < 0.25:
            body = json.dumps({"url": f"https://h{r.randrange(50)}.example/{i}", "html": r.choice(pages)}).encode()
            return "POST", r.choice(["/v1/pages", "/v1/check"]), body, {**auth, "Content-Type": "application/json"}
        if kind < 0.30:
            return "POST", "/v1/pages", b'{"url": "https://x.example/", "text": "no token"}', {}
        method, path, body = http_case(r)
        return method, path, body, {**auth, "Content-Type": "application/json"}

    async with httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=concurrency)) as client:
        async def one(i: int) -> None:
            nonlocal not_json, no_answer, slowest
            method, path, body, headers = request(i)
            async with sem:
                started = time.perf_counter()
                try:
                    resp = await client.request(method, path, content=body or None, headers=headers)
                except httpx.HTTPError as exc:
                    no_answer += 1
                    if len(unanswered) < 5:
                        unanswered.append(f"{method} {path[:60]} ({len(body)} bytes): {type(exc).__name__}")
                    return
                slowest = max(slowest, time.perf_counter() - started)
            statuses[str(resp.status_code)] += 1
            if resp.status_code >= 400 and "json" not in resp.headers.get("content-type", ""):
                not_json += 1
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - started
    return {"requests": n, "concurrency": concurrency, "statuses": dict(sorted(statuses.items())),
            "server_errors": sum(v for k, v in statuses.items() if k.startswith("5") and k != "503"),
            "busy_503": statuses.get("503", 0), "error_bodies_not_json": not_json, "no_answer": no_answer,
            "unanswered": unanswered,
            "slowest_s": round(slowest, 2), "wall_s": round(wall, 1)}


def slowloris(port: int, connections: int) -> dict[str, Any]:
    socks = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /v1/pages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        socks.append(s)
    started = time.perf_counter()
    answered = closed = 0
    for s in socks:
        s.settimeout(max(0.1, BODY_TIMEOUT + 5 - (time.perf_counter() - started)))
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    closed += 1
                    break
                data += chunk
        except (TimeoutError, OSError):
            pass
        answered += data.startswith(b"HTTP/1.1 408")
        s.close()
    return {"connections": connections, "answered_408": answered, "closed_by_server": closed,
            "hung": connections - closed, "within_s": round(time.perf_counter() - started, 1)}


async def big_bodies(base: str, pid: int, count: int = 24, mib: int = 15) -> dict[str, Any]:
    text = ("word " * (mib * 1024 * 1024 // 5))[: mib * 1024 * 1024]
    body = json.dumps({"url": "https://big.example/", "text": text}).encode()
    before = rss_peak_mb(pid)
    statuses: Counter[str] = Counter()
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        async def one() -> None:
            try:
                resp = await client.post("/v1/check", content=body, headers={
                    "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            except httpx.HTTPError as exc:  # e.g. refused and closed while the body was still sent
                statuses[f"no answer ({type(exc).__name__})"] += 1
                return
            statuses[str(resp.status_code)] += 1
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        wall = time.perf_counter() - started
    return {"requests": count, "mib_each": mib, "statuses": dict(statuses), "rss_peak_before_mb": round(before),
            "rss_peak_mb": round(rss_peak_mb(pid)), "wall_s": round(wall, 1)}


def metrics(base: str, seed: int) -> dict[str, Any]:
    r = random.Random(seed)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base, timeout=30) as client:
        before = len(client.get("/metrics").content)
        for _ in range(5000):
            client.get("/v1/" + "".join(r.choice("abcdefghij/") for _ in range(2000)), headers=auth)
        client.get("/v1/" + quote('x"} 1\nneardup_injected_total{src="attacker"} 42\n#'), headers=auth)
        after = client.get("/metrics").text
    return {"bytes_before": before, "bytes_after": len(after.encode()),
            "injected_line_present": "neardup_injected_total" in after}


def keep_alive_outlasts(port: int, seconds: float = 6.0) -> bool:
    """Whether the server still answers on a keep-alive connection left idle ``seconds``
    (longer than httpx's 5 s pool expiry: the client gives the connection up first)."""
    def healthz(conn: socket.socket) -> bytes:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(b'{"status":"ok"}'):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        return data

    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        healthz(conn)
        time.sleep(seconds)
        try:
            return healthz(conn).startswith(b"HTTP/1.1 200")
        except OSError:
            return False


# -- issue 25: hostile pages and a /metrics flood beside a crawler's checks; idle connections --

def fill_store(base: str, pages: int, seed: int) -> list[dict[str, Any]]:
    """Add ``pages`` synthetic fingerprints (random SimHash, digest and sketch of the
    service's spec) in batches of 1,000; return them."""
    r = random.Random(seed)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base, timeout=300, headers=auth) as client:
        spec = client.get("/v1/stats").json()["spec"]
        bins = int(spec.split(";sketch=oph")[1].split("b")[0]) if ";sketch=oph" in spec else 0
        stored = []
        for lo in range(0, pages, 1000):
            batch = []
            for i in range(lo, min(pages, lo + 1000)):
                fp = {"url": f"https://s{i % 997}.example/{i}", "simhash": f"{r.getrandbits(64):016x}",
                      "digest": f"{r.getrandbits(256):064x}", "spec": spec, "tokens": 300, "title": f"page {i}"}
                if bins:
                    fp["sketch"] = ((300).to_bytes(4, "little") + r.randbytes(bins)).hex()
                batch.append(fp)
            resp = client.post("/v1/fingerprints/add/batch", json={"fingerprints": batch})
            resp.raise_for_status()
            stored += batch
    return stored


def _checker(base: str, stored: list[dict[str, Any]], seconds: float, seed: int, out: Any) -> None:
    """One crawler checking fingerprints one at a time: half near copies (2 bits flipped, the
    stored sketch), half new; puts (latencies, statuses, bad) on ``out``."""
    r = random.Random(seed)
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    bad = 0
    with httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            fp = dict(r.choice(stored))
            fp["url"] = f"https://check.example/{r.getrandbits(40)}"
            fp["digest"] = f"{r.getrandbits(256):064x}"
            value = int(fp["simhash"], 16) ^ (1 << r.randrange(64)) ^ (1 << r.randrange(64))
            fp["simhash"] = f"{value if r.random() < 0.5 else r.getrandbits(64):016x}"
            t = time.perf_counter()
            try:
                resp = client.post("/v1/fingerprints/check", json=fp)
            except httpx.HTTPError:
                statuses["no answer"] += 1
                continue
            latencies.append(time.perf_counter() - t)
            statuses[str(resp.status_code) + ("" if resp.status_code >= 400 else "/" + resp.json()["status"])] += 1
            bad += resp.status_code >= 500
    out.put({"latencies": latencies, "statuses": dict(statuses), "bad": bad})


async def _loop_requests(base: str, seconds: float, clients: int, make: Any) -> dict[str, Any]:
    """``clients`` connections each looping on ``make(i)`` -> (method, path, body) for ``seconds``."""
    statuses: Counter[str] = Counter()
    types: Counter[str] = Counter()
    latencies: list[float] = []
    bad = not_json = 0
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    end = time.perf_counter() + seconds

    async def one(c: int) -> None:
        nonlocal bad, not_json
        i = c
        async with httpx.AsyncClient(base_url=base, timeout=120, headers=auth) as client:
            while time.perf_counter() < end:
                method, path, body = make(i)
                i += clients
                t = time.perf_counter()
                try:
                    resp = await client.request(method, path, content=body)
                except httpx.HTTPError as exc:
                    statuses[f"no answer ({type(exc).__name__})"] += 1
                    continue
                latencies.append(time.perf_counter() - t)
                statuses[str(resp.status_code)] += 1
                bad += resp.status_code >= 500 and resp.status_code != 503
                if resp.status_code >= 400:
                    try:
                        types[str(resp.json()["type"])] += 1
                    except (ValueError, KeyError, TypeError):
                        not_json += 1
    await asyncio.gather(*(one(c) for c in range(clients)))
    latencies.sort()
    return {"requests": len(latencies), "statuses": dict(statuses), "types": dict(types), "server_errors": bad,
            "not_json": not_json, "p50_s": round(latencies[len(latencies) // 2], 3) if latencies else None,
            "max_s": round(latencies[-1], 2) if latencies else None}


def _metrics_flood(base: str, seconds: float, clients: int, out: Any) -> None:
    out.put(asyncio.run(_loop_requests(base, seconds, clients, lambda i: ("GET", "/metrics", None))))


def _bomb_flood(base: str, seconds: float, clients: int, out: Any) -> None:
    from fuzz import bombs

    pages = [json.dumps({"url": f"https://bomb.example/{name.split()[0]}", "html": html}).encode()
             for name, html in bombs().items()]
    out.put(asyncio.run(_loop_requests(base, seconds, clients, lambda i: ("POST", "/v1/check", pages[i % len(pages)]))))


def _percentiles(latencies: list[float]) -> dict[str, Any]:
    values = sorted(latencies)
    if not values:
        return {"checks": 0}
    return {"checks": len(values), "p50_ms": round(1000 * values[len(values) // 2], 1),
            "p99_ms": round(1000 * values[min(len(values) - 1, int(len(values) * 0.99))], 1),
            "max_ms": round(1000 * values[-1], 1)}


def flood(base: str, stored: list[dict[str, Any]], quiet: float, seconds: float, seed: int) -> dict[str, Any]:
    """The checks' latency alone, then beside the /metrics flood (16 clients) and the bombs (2)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    out: dict[str, Any] = {"store_pages": len(stored)}
    q = ctx.Queue()
    p = ctx.Process(target=_checker, args=(base, stored, quiet, seed, q))
    p.start()
    alone = q.get()
    p.join()
    out["alone"] = {**_percentiles(alone["latencies"]), "statuses": alone["statuses"], "server_errors": alone["bad"]}
    log(f"flood: checks alone {out['alone']}")
    qc, qm, qb = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_metrics_flood, args=(base, seconds + 2, 16, qm)),
             ctx.Process(target=_bomb_flood, args=(base, seconds + 2, 2, qb))]
    for proc in procs:
        proc.start()
    time.sleep(2)  # the flood is running before the crawler's checks start
    checker = ctx.Process(target=_checker, args=(base, stored, seconds, seed + 1, qc))
    checker.start()
    during, metrics_res, bombs_res = qc.get(), qm.get(), qb.get()
    for proc in [*procs, checker]:
        proc.join()
    out["flooded"] = {**_percentiles(during["latencies"]), "statuses": during["statuses"],
                      "server_errors": during["bad"]}
    out["metrics_flood"] = metrics_res
    out["bombs"] = bombs_res
    return out


def idle_connections(port: int, count: int, limit: float = 45.0) -> dict[str, Any]:
    """``count`` connections that send nothing and ``count`` that stop inside their headers:
    seconds until the server closed each (None: still open after ``limit``)."""
    import selectors

    sel = selectors.DefaultSelector()
    opened = time.monotonic()
    socks = []
    for i in range(2 * count):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\nCont")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, ("half" if i % 2 else "idle", i))
        socks.append(s)
    answered = False
    with contextlib.suppress(httpx.HTTPError):
        answered = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    closed: dict[str, list[float]] = {"idle": [], "half": []}
    while sel.get_map() and time.monotonic() - opened < limit:
        for key, _ in sel.select(timeout=1.0):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if not data:
                closed[key.data[0]].append(time.monotonic() - opened)
                sel.unregister(sock)
                sock.close()
    still_open = len(sel.get_map())
    for s in socks:
        with contextlib.suppress(OSError):
            s.close()
    return {"connections": 2 * count, "healthz_answered_meanwhile": answered, "still_open_after_s": limit,
            "still_open": still_open,
            **{f"{k}_closed": len(v) for k, v in closed.items()},
            **{f"{k}_closed_max_s": round(max(v), 1) if v else None for k, v in closed.items()}}


STOCK = ("import sys, uvicorn; from neardup import Detector; from neardup.service import create_app; "
         "from neardup.service.server import GuardedHttpToolsProtocol; "
         "http = {'httptools': 'httptools', 'h11': 'h11', 'neardup': GuardedHttpToolsProtocol}[sys.argv[2]]; "
         "uvicorn.run(create_app(Detector()), host='127.0.0.1', port=int(sys.argv[1]), http=http, "
         "log_level='warning', timeout_keep_alive=25, limit_concurrency=1000, h11_max_incomplete_event_size=65536)")


def stock(count: int = 20, limit: float = 40.0) -> dict[str, Any]:
    """Which settings hold: idle and half-sent connections against uvicorn's own protocols
    (httptools, h11) with every limit uvicorn offers (``timeout_keep_alive=25``,
    ``limit_concurrency=1000``, ``h11_max_incomplete_event_size=65536``) and against
    neardup's protocol (:class:`neardup.service.server.GuardedHttpToolsProtocol`)."""
    out = {}
    for proto in ("httptools", "h11", "neardup"):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-c", STOCK, str(port), proto])
        try:
            for _ in range(600):
                with contextlib.suppress(httpx.HTTPError):
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                time.sleep(0.2)
            out[proto] = idle_connections(port, count, limit)
            log(f"stock {proto}: {out[proto]}")
        finally:
            proc.terminate()
            proc.wait()
    return out


def render_stock(res: dict[str, Any], command: str) -> str:
    """The docs/benchmarks.md section of the ``stock`` phase."""
    rows = [[proto, f"{r['idle_closed']} of {r['connections'] // 2}", f"{r['half_closed']} of {r['connections'] // 2}",
             r["idle_closed_max_s"] or "-", r["half_closed_max_s"] or "-", r["still_open"]]
            for proto, r in res["stock"].items()]
    lines = [STOCK_START, "### Which connection limits hold (`benchmarks/http_hostile.py --phases stock`)", "",
             f"`{command}` (load average {res['load_start']} at the start, {res['load_end']} at the end). "
             "Connections that send nothing, and connections that stop inside their headers, against uvicorn "
             "0.54's own HTTP protocols with every limit it offers (`timeout_keep_alive=25`, "
             "`limit_concurrency=1000`, `h11_max_incomplete_event_size=65536`) and against neardup's protocol "
             "(`neardup.service.server.GuardedHttpToolsProtocol`: a header-read timeout of 10 s from the "
             "connection's opening or its request's first byte, a 64 KiB header limit, and an open-connection "
             "limit that closes the longest-idle connection). uvicorn's keep-alive timer only runs between "
             "requests and `limit_concurrency` answers 503 but keeps the connection, so neither closes them.", ""]
    lines += table(("protocol", "idle closed", "half-sent closed", "last idle closed (s)",
                    "last half-sent closed (s)", f"still open after {res['stock_limit']:g} s"), rows)
    lines.append(STOCK_END)
    return "\n".join(lines)


def render(res: dict[str, Any], command: str) -> str:
    """The docs/benchmarks.md section: the phases that ran."""
    lines = [DOC_START, "## HTTP under hostile load (`benchmarks/http_hostile.py`)", "",
             f"`{command}`", "",
             f"One `neardup serve` process (`neardup.service.serve(create_app(...))`: SQLite store, "
             f"`body_timeout={BODY_TIMEOUT:g}`, `page_timeout={res['page_timeout']:g}`, default in-flight caps, "
             "4 page workers at most), over a real socket on 127.0.0.1. "
             f"Machine: {res['machine']}; load average {res['load_start']} at the start, "
             f"{res['load_end']} at the end (`uptime`; the machine is shared with other jobs, so latencies "
             "include their CPU use). Targets (issues 11 and 25): 0 responses 500, 0 hung connections, RSS bounded "
             "under 24 x 15 MiB, /metrics size bounded whatever the paths; 0 untyped errors, the crawler's "
             "checks at p99 <= 100 ms while hostile pages and a /metrics flood run, idle and half-sent "
             "connections closed within 30 s.", ""]
    rows: list[list[Any]] = []
    if "mixed" in res:
        m = res["mixed"]
        rows += [
            ["mixed requests", f"{m['requests']:,} ({m['concurrency']} at a time): "
             + ", ".join(f"{k}: {v:,}" for k, v in m["statuses"].items())],
            ["server errors (5xx other than 503)", m["server_errors"]],
            ["503 busy (Retry-After)", m["busy_503"]],
            ["error bodies that are not JSON", m["error_bodies_not_json"]],
            ["requests without an answer (60 s)", str(m["no_answer"])
             + (f" ({'; '.join(m['unanswered'])})" if m.get("unanswered") else "")],
            ["slowest answer", f"{m['slowest_s']} s"]]
    if "keep_alive_6s" in res:
        rows.append(["idle keep-alive connection still open after 6 s (past httpx's 5 s expiry)",
                     "yes" if res["keep_alive_6s"] else "no"])
    if "slowloris" in res:
        s = res["slowloris"]
        rows.append(["slowloris connections", f"{s['connections']}: {s['answered_408']} answered 408, "
                     f"{s['closed_by_server']} closed by the server within {s['within_s']} s, {s['hung']} hung"])
    if "big" in res:
        b = res["big"]
        rows.append(["24 x 15 MiB checks at once", ", ".join(f"{k}: {v}" for k, v in b["statuses"].items())
                     + f"; server peak RSS {b['rss_peak_mb']} MB (before: {b['rss_peak_before_mb']} MB)"])
    if "metrics" in res:
        x = res["metrics"]
        rows.append(["/metrics after 5,000 random 2 KB paths", f"{x['bytes_before']:,} -> {x['bytes_after']:,} "
                     f"bytes; injected line present: {x['injected_line_present']}"])
    if "flood" in res:
        f = res["flood"]
        a, d, mf, bo = f["alone"], f["flooded"], f["metrics_flood"], f["bombs"]
        rows += [
            ["store for the flood", f"{f['store_pages']:,} fingerprints (filled through /v1/fingerprints/add/batch "
             f"in {f['fill_s']} s)"],
            ["fingerprint checks alone (one client, one at a time)",
             f"{a['checks']:,} checks: p50 {a['p50_ms']} ms, p99 {a['p99_ms']} ms, max {a['max_ms']} ms; "
             + ", ".join(f"{k}: {v:,}" for k, v in sorted(a["statuses"].items()))],
            ["the same beside 16 clients looping on /metrics and 2 on POST /v1/check with the bombs",
             f"{d['checks']:,} checks: **p50 {d['p50_ms']} ms, p99 {d['p99_ms']} ms**, max {d['max_ms']} ms; "
             + ", ".join(f"{k}: {v:,}" for k, v in sorted(d["statuses"].items()))],
            ["/metrics flood (16 clients)", f"{mf['requests']:,} answers ({mf['statuses']}), p50 {mf['p50_s']} s"],
            ["bombs (2 clients: attribute, tag and entity bombs of fuzz.py)",
             f"{bo['requests']:,} answers: {bo['statuses']}, error types {bo['types'] or 'none'}; "
             f"p50 {bo['p50_s']} s, max {bo['max_s']} s"],
            ["untyped errors in the flood (5xx other than 503, non-JSON errors)",
             d["server_errors"] + mf["server_errors"] + bo["server_errors"] + mf["not_json"] + bo["not_json"]]]
    if "idle" in res:
        i = res["idle"]
        rows.append(["idle and half-sent connections", f"{i['connections']:,} ({i['idle_closed']} idle, "
                     f"{i['half_closed']} half-sent closed by the server; last at {i['idle_closed_max_s']} s "
                     f"and {i['half_closed_max_s']} s); still open after {i['still_open_after_s']:g} s: "
                     f"{i['still_open']}; /healthz answered meanwhile: {i['healthz_answered_meanwhile']}"])
    lines += table(("what", "result"), rows, text_columns=(0, 1))
    lines.append(DOC_END)
    return "\n".join(lines)


PHASES = ("mixed", "slowloris", "big", "metrics", "flood", "idle")  # and "stock", only when named


def main(argv: list[str] | None = None) -> int:
    """Run the phases; print the JSON summary (and write docs/benchmarks.md with --docs)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--slowloris", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--phases", default=",".join(PHASES), help="comma-separated: " + ", ".join(PHASES))
    ap.add_argument("--store-pages", type=int, default=50_000, help="fingerprints stored before the flood")
    ap.add_argument("--quiet", type=float, default=10.0, help="seconds of checks alone")
    ap.add_argument("--flood", type=float, default=30.0, help="seconds of checks beside the flood")
    ap.add_argument("--idle", type=int, default=200, help="idle (and as many half-sent) connections")
    ap.add_argument("--page-timeout", type=float, default=10.0, help="the server's per-page time limit")
    ap.add_argument("--docs", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    phases = set(args.phases.split(","))
    command = "python benchmarks/http_hostile.py " + " ".join(sys.argv[1:] if argv is None else argv)
    res: dict[str, Any] = {"machine": machine_line(), "load_start": round(os.getloadavg()[0], 1),
                           "page_timeout": args.page_timeout}
    if phases == {"stock"}:
        res["stock_limit"] = 40.0
        res["stock"] = stock(20, res["stock_limit"])
        res["load_end"] = round(os.getloadavg()[0], 1)
        if args.docs:
            replace_section(REPO_ROOT / "docs" / "benchmarks.md", STOCK_START, STOCK_END,
                            render_stock(res, command.strip()))
        print(json.dumps(res))
        return 0
    with tempfile.TemporaryDirectory(prefix="neardup-http-") as tmp:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with server(Path(tmp) / "s.db", port, args.page_timeout) as proc:
            log(f"server pid {proc.pid} on {base}")
            if "mixed" in phases:
                res["keep_alive_6s"] = keep_alive_outlasts(port)
                res["mixed"] = asyncio.run(mixed(base, args.n, args.concurrency, args.seed))
                log(f"mixed: {res['mixed']}")
            if "slowloris" in phases:
                res["slowloris"] = slowloris(port, args.slowloris)
                log(f"slowloris: {res['slowloris']}")
            if "big" in phases:
                res["big"] = asyncio.run(big_bodies(base, proc.pid))
                log(f"big bodies: {res['big']}")
            if "metrics" in phases:
                res["metrics"] = metrics(base, args.seed)
                log(f"metrics: {res['metrics']}")
            if "idle" in phases:
                res["idle"] = idle_connections(port, args.idle)
                log(f"idle: {res['idle']}")
            if "flood" in phases:
                t = time.perf_counter()
                stored = fill_store(base, args.store_pages, args.seed)
                fill_s = round(time.perf_counter() - t, 1)
                log(f"stored {len(stored):,} fingerprints in {fill_s} s (load {os.getloadavg()[0]:.1f})")
                res["flood"] = {**flood(base, stored, args.quiet, args.flood, args.seed), "fill_s": fill_s}
                log(f"flood: {res['flood']}")
            res["server_alive"] = proc.poll() is None
            res["server_rss_peak_mb"] = round(rss_peak_mb(proc.pid))
    res["load_end"] = round(os.getloadavg()[0], 1)
    if args.docs:
        replace_section(REPO_ROOT / "docs" / "benchmarks.md", DOC_START, DOC_END, render(res, command.strip()))
        log("wrote docs/benchmarks.md")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

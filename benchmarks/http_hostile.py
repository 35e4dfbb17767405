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

Usage::

    python benchmarks/http_hostile.py [--n 10000] [--concurrency 32] [--docs]

The last line of stdout is a JSON summary; ``--docs`` writes its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import platform
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

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import httpx  # noqa: E402
from _docs import replace_section, table  # noqa: E402
from fuzz import http_case  # noqa: E402

DOC_START, DOC_END = "<!-- http-hostile:start -->", "<!-- http-hostile:end -->"
TOKEN = "s3cret-token"
BODY_TIMEOUT = 5.0


def log(msg: str) -> None:
    print(f"[http-hostile] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_peak_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sample_pages() -> list[str]:
    folder = REPO_ROOT / "examples" / "sample" / "pages"
    return [gzip.decompress(p.read_bytes()).decode("utf-8", "replace") for p in sorted(folder.glob("*.html.gz"))]


@contextlib.contextmanager
def server(db: Path, port: int) -> Any:
    cmd = [str(Path(sys.executable).with_name("neardup")), "serve", "--db", str(db), "--port", str(port),
           "--token", TOKEN, "--body-timeout", str(BODY_TIMEOUT)]
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


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, {platform.platform()}"


def render(res: dict[str, Any], command: str) -> str:
    m, s, b, x = res["mixed"], res["slowloris"], res["big"], res["metrics"]
    lines = [DOC_START, "## HTTP under hostile load (`benchmarks/http_hostile.py`)", "",
             f"`{command}`", "",
             f"One `neardup serve` process (SQLite store, `--body-timeout {BODY_TIMEOUT:g}`, default in-flight caps), "
             f"over a real socket. Machine: {res['machine']}; load average {res['load_start']} at the start, "
             f"{res['load_end']} at the end (shared with other jobs). Targets (issue 11): 0 responses 500, 0 hung "
             "connections, RSS bounded under 24 x 15 MiB, /metrics size bounded whatever the paths.", ""]
    rows = [
        ["mixed requests", f"{m['requests']:,} ({m['concurrency']} at a time): "
         + ", ".join(f"{k}: {v:,}" for k, v in m["statuses"].items())],
        ["server errors (5xx other than 503)", m["server_errors"]],
        ["503 busy (Retry-After)", m["busy_503"]],
        ["error bodies that are not JSON", m["error_bodies_not_json"]],
        ["requests without an answer (60 s)", str(m["no_answer"])
         + (f" ({'; '.join(m['unanswered'])})" if m.get("unanswered") else "")
         + (". The cause: a client reusing a keep-alive connection idle just under 5 s (httpx's pool "
            "expiry) as the server's keep-alive timeout closes it, with the request unread (uvicorn's default "
            "timeout is 5 s; `neardup.service.serve` and `serve_workers` set 75 s, `KEEP_ALIVE_TIMEOUT`)"
            if m["no_answer"] else "")],
        ["idle keep-alive connection still open after 6 s (past httpx's 5 s expiry)",
         "yes" if res["keep_alive_6s"] else "no: the server closes idle connections first (uvicorn's 5 s)"],
        ["slowest answer", f"{m['slowest_s']} s"],
        ["slowloris connections", f"{s['connections']}: {s['answered_408']} answered 408, "
         f"{s['closed_by_server']} closed by the server within {s['within_s']} s, {s['hung']} hung"],
        ["24 x 15 MiB checks at once", ", ".join(f"{k}: {v}" for k, v in b["statuses"].items())
         + f"; server peak RSS {b['rss_peak_mb']} MB (before: {b['rss_peak_before_mb']} MB). A request over "
         "the in-flight byte cap is refused with 503 + Retry-After; its body is read and discarded first "
         "(chunk by chunk, not held), so a client still uploading gets the 503, not a connection reset"],
        ["/metrics after 5,000 random 2 KB paths", f"{x['bytes_before']:,} -> {x['bytes_after']:,} bytes; "
         f"injected line present: {x['injected_line_present']}"],
    ]
    lines += table(("what", "result"), rows, text_columns=(0, 1))
    lines.append(DOC_END)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--slowloris", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    command = "python benchmarks/http_hostile.py " + " ".join(sys.argv[1:] if argv is None else argv)
    res: dict[str, Any] = {"machine": machine(), "load_start": round(os.getloadavg()[0], 1)}
    with tempfile.TemporaryDirectory(prefix="neardup-http-") as tmp:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with server(Path(tmp) / "s.db", port) as proc:
            log(f"server pid {proc.pid} on {base}")
            res["keep_alive_6s"] = keep_alive_outlasts(port)
            log(f"idle keep-alive connection open after 6 s: {res['keep_alive_6s']}")
            res["mixed"] = asyncio.run(mixed(base, args.n, args.concurrency, args.seed))
            log(f"mixed: {res['mixed']}")
            res["slowloris"] = slowloris(port, args.slowloris)
            log(f"slowloris: {res['slowloris']}")
            res["big"] = asyncio.run(big_bodies(base, proc.pid))
            log(f"big bodies: {res['big']}")
            res["metrics"] = metrics(base, args.seed)
            log(f"metrics: {res['metrics']}")
            res["server_alive"] = proc.poll() is None
    res["load_end"] = round(os.getloadavg()[0], 1)
    if args.docs:
        replace_section(REPO_ROOT / "docs" / "benchmarks.md", DOC_START, DOC_END, render(res, command.strip()))
        log("wrote docs/benchmarks.md")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

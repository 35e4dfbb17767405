"""A real `neardup serve` over a socket: requests the service refuses get their answer, not a
connection reset (the body they are still uploading is read and discarded first, in bounded
memory), and keep-alive connections are not closed under a client that reuses them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serve(tmp_path: Path, *options: str):
    """``neardup serve`` in its own process group (with ``--workers``, the supervisor and its
    workers), stopped as a whole at the end."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", str(tmp_path / "s.db"),
                             "--port", str(port), *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        for _ in range(600):
            assert proc.poll() is None, f"the server exited with {proc.returncode}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _rss_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak RSS from /proc")
def test_a_body_over_the_inflight_byte_cap_gets_its_503_not_a_reset(tmp_path):
    """Before: the guard answered 503 + ``Connection: close`` before reading the body, and a
    client still uploading 16 MiB saw the connection reset (httpx ReadError/WriteError)."""
    body = json.dumps({"url": "https://big.example/", "text": "word " * (16 * 1024 * 1024 // 5)}).encode()
    with _serve(tmp_path, "--max-inflight-bytes", str(4 * 1024 * 1024), "--max-body", str(64 * 1024 * 1024),
                "--body-timeout", "30") as (base, proc):
        before = _rss_peak_mb(proc.pid)

        async def run() -> Counter[str]:
            statuses: Counter[str] = Counter()
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                async def one() -> None:
                    try:
                        r = await client.post("/v1/check", content=body, headers={"Content-Type": "application/json"})
                    except httpx.HTTPError as exc:
                        statuses[type(exc).__name__] += 1
                        return
                    statuses[str(r.status_code)] += 1
                    assert r.headers["retry-after"] == "1" and "busy" in r.json()["error"]
                    assert r.headers.get("connection") != "close"  # read to its end: the connection is kept

                await asyncio.gather(*(one() for _ in range(4)))
                # the connections stay usable
                assert (await client.get("/healthz")).status_code == 200
            return statuses

        assert asyncio.run(run()) == Counter({"503": 4})
        # the refused bodies were discarded as they came, not held: far below 4 x 16 MiB
        assert _rss_peak_mb(proc.pid) - before < 40


def _get_healthz(conn: socket.socket) -> bytes:
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while not data.endswith(b'{"status":"ok"}'):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("workers", ["1", "2"])
def test_idle_keep_alive_connections_outlast_the_clients_expiry(tmp_path, workers):
    """Before: uvicorn's default keep-alive, 5 s, equal to the idle expiry of httpx's pool
    (neardup.Client's): a client reusing a connection idle just under 5 s raced the server's
    close, and under load got a reset and no answer (7 in 10,000 requests of
    benchmarks/http_hostile.py). The server now keeps an idle connection longer than httpx
    does, so the client gives it up first. One worker: :func:`neardup.service.serve`; two:
    :func:`neardup.service.serve_workers`."""
    from neardup.service import KEEP_ALIVE_TIMEOUT

    expiry = httpx.Limits().keepalive_expiry or 5.0
    assert KEEP_ALIVE_TIMEOUT > expiry
    with _serve(tmp_path, "--workers", workers) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            assert _get_healthz(conn).startswith(b"HTTP/1.1 200")
            time.sleep(expiry + 1)  # idle past the client's expiry: the server has not closed it
            assert _get_healthz(conn).startswith(b"HTTP/1.1 200")

"""Throwaway Redis servers for the tests: a standalone server and a 3-master Redis Cluster on
loopback ports, started here from Debian's ``redis-server`` package (``.ci/run`` installs it
where missing) and stopped at the end.

``NEARDUP_TEST_REDIS=redis://...`` and ``NEARDUP_TEST_REDIS_CLUSTER=redis+cluster://...`` point
the tests at existing servers instead. Each test gets its own key prefix (``?prefix=``), so
tests on one server never see each other's keys.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager


def installed() -> bool:
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(n: int) -> list[int]:
    """``n`` free ports whose cluster bus ports (port + 10000) are free too."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < n:
        port = rng.randrange(20000, 50000)
        if port not in ports and _bindable(port) and _bindable(port + 10000):
            ports.append(port)
    return ports


def _cli(port: int, *args: str, check: bool = True) -> str:
    done = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                          capture_output=True, text=True, timeout=60, check=check)
    return done.stdout


def _wait_ready(port: int, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if _cli(port, "PING", check=False).strip() == "PONG":
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"redis-server on port {port} did not start")


def start_node(base: str, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """One ``redis-server`` on ``port`` with its files in ``base/<port>`` (AOF ``always`` by
    default: an acknowledged write survives a kill -9)."""
    folder = os.path.join(base, str(port))
    os.makedirs(folder, exist_ok=True)
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--save", "",
         "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_ready(port)
    return proc


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(timeout=30)


@contextmanager
def standalone() -> Iterator[str]:
    """Yield ``redis://127.0.0.1:PORT/0`` of a fresh standalone server (or ``$NEARDUP_TEST_REDIS``)."""
    existing = os.environ.get("NEARDUP_TEST_REDIS")
    if existing:
        yield existing
        return
    base = tempfile.mkdtemp(prefix="neardup-redis-")
    (port,) = _free_ports(1)
    proc = start_node(base, port)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop([proc])
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def cluster(masters: int = 3) -> Iterator[str]:
    """Yield ``redis+cluster://127.0.0.1:PORT`` of a fresh Redis Cluster of ``masters`` masters
    (no replicas), created with ``redis-cli --cluster create`` (or ``$NEARDUP_TEST_REDIS_CLUSTER``)."""
    existing = os.environ.get("NEARDUP_TEST_REDIS_CLUSTER")
    if existing:
        yield existing
        return
    base = tempfile.mkdtemp(prefix="neardup-redis-cluster-")
    ports = _free_ports(masters)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            procs.append(start_node(base, port, "--cluster-enabled", "yes", "--cluster-config-file",
                                    os.path.join(base, f"nodes-{port}.conf"), "--cluster-node-timeout", "5000"))
        _cli(ports[0], "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0",
             "--cluster-yes")
        end = time.monotonic() + 60
        while "cluster_state:ok" not in _cli(ports[0], "CLUSTER", "INFO"):
            if time.monotonic() > end:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        yield f"redis+cluster://127.0.0.1:{ports[0]}"
    finally:
        _stop(procs)
        shutil.rmtree(base, ignore_errors=True)


def with_prefix(url: str) -> str:
    """``url`` with a key prefix of its own (one test's keys)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}prefix=t{uuid.uuid4().hex[:12]}"

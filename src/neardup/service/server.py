"""Running the app: :func:`serve` (one process) and :func:`serve_workers` (N processes on one
socket) with uvicorn, and the connection limits uvicorn lacks.

uvicorn closes a connection idle *between* requests (``timeout_keep_alive``) but never one
that has sent nothing yet, nor one that stopped half-way through its request line or
headers (measured: still open after 100 s; with ``ulimit -n 1024``, 1,100 such sockets made
real requests fail). ``limit_concurrency`` does not help: it answers 503 to requests but
keeps every connection. :class:`GuardedHttpToolsProtocol` (uvicorn's httptools protocol with
three additions) closes a connection whose request headers are not complete within
:data:`HEADER_TIMEOUT` seconds of its opening or of its request's first byte, answers 431
to headers over :data:`MAX_HEADER_BYTES`, and, past :data:`max_connections()` open
connections, closes the longest-idle one to make room (or refuses the new one when none is
idle).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import socket
import tempfile
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

KEEP_ALIVE_TIMEOUT = 25.0
"""Seconds an idle keep-alive connection is kept open (uvicorn's ``timeout_keep_alive``):
longer than the idle expiry of httpx's pool (5 s, so of :class:`neardup.Client`) and
aiohttp's (15 s), so that a client gives an idle connection up before the server does (no
reset race: with uvicorn's 5 s, 7 requests in 10,000 of ``benchmarks/http_hostile.py`` got
a reset), and under 30 s, so that idle connections do not pile up. A proxy in front (AWS
ALB: 60 s) must keep its idle timeout under this one."""
HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a whole request line and headers, from its opening (or
from its request's first byte on a kept-alive connection)."""
MAX_HEADER_BYTES = 64 * 1024
"""Largest request line and headers (431 beyond)."""


def max_connections() -> int:
    """Open connections per process: below the file-descriptor limit, room left for the
    store, the page workers' pipes and the log (``ulimit -n 1024``: 824)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - 200))


def _raw_error(code: int, reason: str, message: str, kind: str) -> bytes:
    """A whole HTTP error response (JSON body, connection closed), for the protocol layer."""
    body = json.dumps({"error": message, "type": kind}).encode()
    return (f"HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode() + body


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header-read timeout, a header size limit and a
    limit on open connections (see the module's docstring)."""

    header_timeout = HEADER_TIMEOUT
    max_header_bytes = MAX_HEADER_BYTES
    connection_limit = max_connections()

    _header_timer: asyncio.TimerHandle | None = None
    _in_headers = False
    _header_bytes = 0
    _idle_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count the connection, make room past the limit, start the header clock."""
        super().connection_made(transport)
        self._idle_since = self.loop.time()
        self._arm_header_timer()
        if len(self.connections) > self.connection_limit and not self._shed_idle():
            transport.write(_raw_error(503, "Service Unavailable", "too many open connections; retry shortly",
                                       "ServiceBusy"))
            transport.close()

    def _shed_idle(self) -> bool:
        """Close the longest-idle other connection (True), or find none idle (False)."""
        idle = [c for c in self.connections if c is not self and isinstance(c, GuardedHttpToolsProtocol)
                and c._idle()]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._idle_since)
        oldest.transport.close()
        self.connections.discard(oldest)
        return True

    def _idle(self) -> bool:
        """No request in progress (none yet, or the last one answered) and no partial one."""
        return not self._in_headers and (self.cycle is None or self.cycle.response_complete)

    def _arm_header_timer(self) -> None:
        """Start the header clock (once)."""
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._header_timeout_expired)

    def _cancel_header_timer(self) -> None:
        """Stop the header clock."""
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout_expired(self) -> None:
        """Headers late: 408 to a connection that started a request, then close it."""
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._in_headers:
            self.transport.write(_raw_error(408, "Request Timeout", f"request headers not received within "
                                            f"{self.header_timeout:g} s", "RequestTimeout"))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        """Count header bytes (431 past the limit) before uvicorn parses them."""
        if self._in_headers or self.cycle is None or self.cycle.response_complete:
            end = data.find(b"\r\n\r\n")  # a body in the same read is not counted
            self._header_bytes += len(data) if end < 0 else end
            if self._header_bytes > self.max_header_bytes:
                self._cancel_header_timer()
                self.transport.write(_raw_error(431, "Request Header Fields Too Large",
                                                f"request line and headers over {self.max_header_bytes} bytes",
                                                "HeadersTooLarge"))
                self.transport.close()
                return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        """A request that is not HTTP: 400 as JSON with its ``type``, like every error."""
        self._cancel_header_timer()
        self.transport.write(_raw_error(400, "Bad Request", msg, "BadRequest"))
        self.transport.close()

    def on_message_begin(self) -> None:
        """A request's first byte: its headers have :data:`HEADER_TIMEOUT` seconds."""
        super().on_message_begin()
        self._in_headers = True
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        """Headers in: the body deadline is the guard's (408 after ``body_timeout``)."""
        self._in_headers = False
        self._header_bytes = 0
        self._cancel_header_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """Answered: idle from now (uvicorn's keep-alive timer runs)."""
        self._idle_since = self.loop.time()
        self._header_bytes = 0
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the header clock."""
        self._cancel_header_timer()
        super().connection_lost(exc)


UVICORN_SETTINGS: dict[str, Any] = {"log_level": "warning", "timeout_keep_alive": KEEP_ALIVE_TIMEOUT,
                                    "http": GuardedHttpToolsProtocol}
"""uvicorn settings ``neardup serve`` runs the app with (:func:`serve`, :func:`serve_workers`)."""


def startup_line(host: str, port: int, store: str, workers: int, settings: dict[str, Any]) -> str:
    """The one line ``serve`` prints when it starts: address, store and settings."""
    shown = " ".join(f"{k}={v}" for k, v in settings.items() if v is not None)
    return (f"neardup serve: http://{host}:{port} store={store} workers={workers} {shown} "
            f"keep_alive={KEEP_ALIVE_TIMEOUT:g}s header_timeout={HEADER_TIMEOUT:g}s "
            f"max_connections={GuardedHttpToolsProtocol.connection_limit}")


def serve(app: Any, host: str, port: int) -> None:
    """Run ``app`` in this process with uvicorn and :data:`UVICORN_SETTINGS`, after one line
    naming its address, store and settings."""
    import uvicorn

    state = getattr(app, "state", None)
    detector = getattr(state, "detector", None)
    if state is not None:
        state.start_page_workers = True
    config = uvicorn.Config(app, host=host, port=port, **UVICORN_SETTINGS)
    sock = listening_socket(config)  # connections queue from here on: the line below is then true
    try:
        if detector is not None:
            settings = {"k": detector.k, "method": detector.method, "spec": detector.config.spec,
                        **getattr(state, "settings", {})}
            print(startup_line(host, port, detector.store.path, 1, settings), flush=True)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def listening_socket(config: Any) -> socket.socket:
    """The listening socket of a uvicorn ``config``, created as IPPROTO_TCP (see
    :func:`serve_workers`) and already listening: a client that connects once the startup
    line is printed waits in the backlog until the app answers, never gets "connection refused"."""
    sock = config.bind_socket()
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto != socket.IPPROTO_TCP:
        sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        sock.set_inheritable(True)
    sock.listen(config.backlog)
    return sock


def serve_workers(workers: int, host: str, port: int) -> None:
    """Run ``app_from_env`` in ``workers`` processes sharing one listening socket (what
    ``uvicorn --workers`` does), with the socket created as IPPROTO_TCP: uvicorn's own leaves
    ``proto`` at 0, so asyncio never sets ``TCP_NODELAY`` on the connections and every
    keep-alive response waits ~40 ms for a delayed ACK (Kludex/uvicorn#3149). The workers
    share their metrics through prometheus_client's multiprocess mode (a temporary folder)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    metrics_dir = tempfile.mkdtemp(prefix="neardup-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    from neardup.ingest.workers import DEFAULT_PAGE_TIMEOUT
    from neardup.model import default_k
    from neardup.service.pages import DEFAULT_PAGE_WORKERS

    given = {k: v for k, v in json.loads(os.environ.get("NEARDUP_SETTINGS", "{}")).items() if v is not None}
    settings = {"k": default_k(bands=given.get("bands", True) is not False), "method": "simhash",
                "page_timeout": DEFAULT_PAGE_TIMEOUT, "page_workers": DEFAULT_PAGE_WORKERS}
    settings.update(given)
    shown = {k: settings.get(k) for k in ("k", "method", "max_body", "body_timeout", "max_inflight", "private",
                                          "page_timeout", "page_workers")}
    config = uvicorn.Config("neardup.service:app_from_env", factory=True, workers=workers, host=host, port=port,
                            **UVICORN_SETTINGS)
    sock = listening_socket(config)
    print(startup_line(host, port, _redacted(os.environ.get("NEARDUP_DB", "")), workers,
                       {"token": bool(os.environ.get("NEARDUP_TOKEN")), **shown}), flush=True)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _redacted(db: str) -> str:
    """The store's name without a password."""
    from neardup.store.backends import display_name

    return display_name(db)


__all__ = ["GuardedHttpToolsProtocol", "HEADER_TIMEOUT", "KEEP_ALIVE_TIMEOUT", "MAX_HEADER_BYTES", "UVICORN_SETTINGS",
           "listening_socket", "max_connections", "serve", "serve_workers", "startup_line"]

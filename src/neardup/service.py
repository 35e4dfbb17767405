"""The neardup HTTP service: one shared Detector behind a versioned JSON API.

``neardup serve --db crawl.db`` (or ``create_app(detector)`` in your own ASGI server). The
OpenAPI description is at ``/openapi.json`` (docs at ``/docs``).

=======================================  ====================================================
``POST /v1/pages``                        check and add a page: ``{"url", "html" | "text",
                                          "headers"?, "fetched_at"?, "priority"?}`` → verdict
``POST /v1/check``                        the same, without writing
``POST /v1/pages/batch``, ``/v1/check/batch``  ``{"pages": [...]}`` → ``{"verdicts": [...]}``
``POST /v1/fingerprints/add``, ``/check``  for crawlers that fingerprint pages themselves:
                                          ``{"url", "simhash" (hex), "digest", "spec", "tokens",
                                          ...}``; the spec must equal the service's
``POST /v1/fingerprints/add/batch``,      ``{"fingerprints": [...]}`` → ``{"verdicts": [...]}``
``/v1/fingerprints/check/batch``          (up to 10,000; adds in one transaction)
``GET /v1/pages/{id}``                    a stored page
``GET /v1/clusters/{id}``                 members, canonical, why each joined (match, distance)
``GET /v1/hosts/{host}``                  pages, exact and near duplicates, duplicate rate
``GET /v1/stats``                         store counts and the fingerprint spec
``GET /healthz``, ``GET /metrics``        liveness; Prometheus text format
=======================================  ====================================================

Every error is a JSON body ``{"error": "one line naming the problem"}``: 400 bad page or
URL, 401 missing/wrong bearer token (when one is configured), 404 unknown id, 408 body not
received in time, 409 fingerprint of another spec, 413 body over the limit, 422 malformed
JSON or fields, 503 busy (with ``Retry-After``), and 500, still JSON, for a bug. The service
only reads and writes its own store.

Limits against hostile or overloaded clients (``create_app`` arguments, ``neardup serve``
options): the body limit (``max_body``); the whole body must arrive within
``body_timeout`` seconds (a slowloris upload is cut with 408); at most ``max_inflight``
requests and ``max_inflight_bytes`` of request bodies are worked on at once, beyond which
requests get 503 with ``Retry-After`` instead of queueing (bounded memory; the body of a
refused request is read and discarded, so a client still uploading gets its 503, not a
reset); :func:`serve` and :func:`serve_workers` keep idle keep-alive connections
``KEEP_ALIVE_TIMEOUT`` (75 s), longer than clients keep them (httpx: 5 s), so a client does not
reuse one the server is closing; fields are
validated strictly (hex of the right width, integers in SQLite's range, finite numbers, no
lone surrogates). The token is compared in constant time; ``private=True`` requires it for
``/metrics`` and the API docs too. ``/metrics`` is labelled by route template, never by the
raw path, so its size is bounded whatever paths clients send.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import threading
import time
from collections import defaultdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field, StrictInt, field_validator, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from neardup import __version__
from neardup.detector import DEFAULT_TRAP_MEMBERS, Detector, Verdict
from neardup.errors import (
    InputError, NeardupError, SpecMismatchError, StoreError, StoreLockedError,
)
from neardup.fingerprint import Fingerprint

DEFAULT_MAX_BODY = 32 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_INFLIGHT = 64
DEFAULT_MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
MAX_BATCH = 1000
KEEP_ALIVE_TIMEOUT = 75.0
"""Seconds an idle keep-alive connection is kept open (uvicorn's ``timeout_keep_alive``).
uvicorn's default, 5 s, is the idle expiry of httpx's pool (so of :class:`neardup.Client`): a
client reusing a connection idle just under 5 s races the server's close, and when the event
loop is late to read the request (under load) uvicorn closes the connection with the request
unread; the client sees a reset (httpx ``ReadError``) and no answer (7 requests in 10,000 in
``benchmarks/http_hostile.py``). 75 s outlasts the usual clients' and proxies' idle timeouts
(httpx 5 s, aiohttp 15 s, AWS ALB 60 s), so they give a connection up before the server does."""
UVICORN_SETTINGS: dict[str, Any] = {"log_level": "warning", "timeout_keep_alive": KEEP_ALIVE_TIMEOUT}
"""uvicorn settings ``neardup serve`` runs the app with (:func:`serve`, :func:`serve_workers`)."""
MAX_ID = (1 << 63) - 1  # SQLite INTEGER
_HEX = re.compile(r"[0-9a-fA-F]+")
_PUBLIC = ("/healthz",)
log = logging.getLogger("neardup.service")


def _scalar_values(value: str | None, what: str) -> str | None:
    """``value`` unless it holds a lone surrogate (JSON "\\ud800": no store can keep it)."""
    if value is not None and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} contains a lone surrogate (not valid Unicode)") from None
    return value


def _has_surrogates(value: str) -> bool:
    try:
        _scalar_values(value, "")
    except ValueError:
        return True
    return False


Finite = Field(None, allow_inf_nan=False)


class PageIn(BaseModel):
    url: str = Field(..., max_length=8192)
    html: str | None = None
    text: str | None = None
    headers: dict[str, str] | None = Field(None, max_length=200)
    fetched_at: float | None = Finite
    priority: float | None = Finite

    @model_validator(mode="after")
    def one_body(self) -> "PageIn":
        if (self.html is None) == (self.text is None):
            raise ValueError("give exactly one of 'html' or 'text'")
        for key, value in (self.headers or {}).items():
            if len(key) > 256 or len(value) > 8192:
                raise ValueError("a header name is over 256 or a value over 8192 characters")
        return self

    def content_and_headers(self) -> tuple[str, dict[str, str] | None]:
        if self.html is not None:
            return self.html, self.headers
        return self.text or "", {**(self.headers or {}), "content-type": "text/plain"}


class BatchIn(BaseModel):
    pages: list[PageIn] = Field(..., max_length=MAX_BATCH)


class FingerprintIn(BaseModel):
    url: str = Field(..., max_length=8192)
    simhash: str = Field(..., min_length=1, max_length=64,
                         description="SimHash as hex, bits/4 digits (16 for 64 bits), as computed by the documented spec")
    digest: str = Field(..., min_length=64, max_length=64,
                        description="SHA-256 of the normalised main text, 64 hex digits")
    spec: str = Field(..., max_length=1024)
    tokens: StrictInt = Field(..., ge=0, le=MAX_ID, description="main-content token count (pages under min_tokens are empty)")
    length: StrictInt = Field(0, ge=0, le=MAX_ID)
    features: StrictInt = Field(0, ge=0, le=MAX_ID)
    title: str | None = Field(None, max_length=8192)
    canonical_url: str | None = Field(None, max_length=8192)
    language: str | None = Field(None, max_length=64)
    fetched_at: float | None = Finite
    priority: float | None = Finite

    @field_validator("simhash")
    @classmethod
    def hex_simhash(cls, v: str) -> str:
        if not _HEX.fullmatch(v):
            raise ValueError("simhash must be a hexadecimal string (digits 0-9 and a-f only)")
        return v

    @field_validator("digest")
    @classmethod
    def hex_digest(cls, v: str) -> str:
        if not _HEX.fullmatch(v):
            raise ValueError("digest must be a SHA-256 hex string (64 digits 0-9 and a-f)")
        return v.lower()

    @field_validator("url", "spec", "title", "canonical_url", "language")
    @classmethod
    def valid_unicode(cls, v: str | None, info: Any) -> str | None:
        return _scalar_values(v, info.field_name)

    def fingerprint(self, detector: Detector) -> Fingerprint:
        bits = detector.config.bits
        if len(self.simhash) != bits // 4:
            if len(self.simhash) > bits // 4 and int(self.simhash, 16) >= 1 << bits:
                raise InputError(f"simhash has more than {bits} bits")
            raise InputError(f"simhash must be {bits // 4} hex digits ({bits} bits), got {len(self.simhash)}")
        return Fingerprint(
            simhash=int(self.simhash, 16), digest=self.digest, spec=self.spec, bits=bits, title=self.title,
            canonical_url=self.canonical_url, language=self.language, length=self.length,
            tokens=self.tokens, features=self.features,
            empty=self.tokens < max(1, detector.config.min_tokens),
        )


class FingerprintBatchIn(BaseModel):
    fingerprints: list[FingerprintIn] = Field(..., max_length=MAX_BATCH * 10)


# -- response models: the OpenAPI description of every route's answer ----------------------
# (documentation only: the routes write their JSON directly, see _json)

class VerdictOut(BaseModel):
    """The decision for one page (:class:`neardup.Verdict`)."""

    status: str = Field(..., description="new | exact | near | partial | empty | error")
    url: str
    page_id: int | None = None
    match_id: int | None = None
    match_url: str | None = None
    distance: int | None = Field(None, description="Hamming distance of the SimHashes to the match")
    cluster_id: int | None = None
    canonical_id: int | None = None
    canonical_url: str | None = None
    digest: str | None = Field(None, description="SHA-256 (hex) of the normalised main text")
    simhash: str | None = Field(None, description="SimHash, hex")
    title: str | None = None
    method: str | None = Field(None, description="digest | simhash | minhash | simhash+minhash")
    score: float | None = Field(None, description="estimated Jaccard similarity (containment for partial)")
    error: str | None = Field(None, description="why the page could not be read (status 'error')")
    version: str | None = Field(None, description="re-fetch of a stored URL: unchanged | changed (None: first fetch)")
    previous_distance: int | None = Field(None, description="Hamming distance to the URL's stored version")
    previous_score: float | None = Field(None, description="sketch Jaccard estimate with the URL's stored version")
    since_last_fetch: float | None = Field(None, description="seconds since the URL's last fetch")
    fetched_url: str | None = Field(None, description="the URL as given, when its normalised form (url) differs")
    next_fetch: float | None = Field(None, description="when the content is next expected to change (POSIX time)")


class VerdictsOut(BaseModel):
    verdicts: list[VerdictOut]


class ErrorOut(BaseModel):
    error: str = Field(..., description="one line naming the problem")


class PageOut(BaseModel):
    """A stored page (its latest fetch)."""

    id: int
    url: str
    host: str
    first_seen: float
    fetched_at: float
    digest: str
    simhash: str
    spec: str
    length: int
    title: str | None = None
    canonical_link: str | None = None
    language: str | None = None
    status: str
    matched_id: int | None = None
    distance: int | None = None
    cluster_id: int | None = None
    priority: float | None = None
    set_size: int | None = None


class MemberOut(BaseModel):
    id: int
    url: str
    status: str
    matched_id: int | None = None
    distance: int | None = None
    first_seen: float
    fetched_at: float
    canonical: bool


class ClusterOut(BaseModel):
    id: int
    canonical_id: int | None = None
    canonical_url: str | None = None
    size: int
    members: list[MemberOut]


class HostOut(BaseModel):
    host: str
    pages: int
    new: int
    exact: int
    near: int
    empty: int
    duplicate_rate: float


class FetchDecisionOut(BaseModel):
    url: str
    fetch: bool
    reason: str
    known_url: str | None = None
    canonical_url: str | None = None
    cluster_id: int | None = None
    rules: list[str] = []
    fetched_at: float | None = None
    host_duplicate_rate: float | None = None
    next_fetch: float | None = None
    change_rate: float | None = None


class HistoryOut(BaseModel):
    """A stored URL's fetches and recrawl schedule (:class:`neardup.crawl.UrlHistory`)."""

    url: str
    fetched_url: str | None = None
    first_seen: float
    fetched_at: float
    fetches: int
    change_count: int
    last_changed_at: float | None = None
    change_rate: float | None = Field(None, description="estimated changes per second")
    next_fetch: float | None = Field(None, description="when the content is next expected to change")
    versions: list[dict[str, Any]]


class RulesOut(BaseModel):
    rules: list[dict[str, Any]]


class HostRulesOut(RulesOut):
    host: str


class HostsOut(BaseModel):
    hosts: list[dict[str, Any]]
    total: int
    offset: int


class ExpireIn(BaseModel):
    older_than: float = Field(description="seconds: pages last fetched longer ago are forgotten (>= 0)")


class ExpiredOut(BaseModel):
    expired: int


class ClusterInfoOut(BaseModel):
    id: int
    size: int
    canonical_id: int | None = None
    canonical_url: str | None = None
    created_at: float | None = None
    joins: int | None = None
    last_joined_at: float | None = None
    joins_per_hour: float


class StatsOut(BaseModel):
    model_config = {"extra": "allow"}

    pages: int
    clusters: int
    spec: str
    k: int
    method: str


class HealthOut(BaseModel):
    status: str = "ok"


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what} for code, what in (
        (400, "bad page or URL"), (401, "missing or wrong bearer token"), (408, "body not received in time"),
        (413, "body over the limit"), (422, "malformed JSON or fields"), (503, "busy: retry after Retry-After"))
}


def _answers(model: Any, *extra: int) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {200: {"model": model}, **_ERRORS}
    for code in extra:
        out[code] = {"model": ErrorOut, "description": {404: "unknown id", 409: "fingerprint of another spec"}[code]}
    return out


class _Guard:
    """Pure ASGI middleware in front of every route: the bearer token (401, constant-time
    comparison), the body limit (413, by Content-Length or by what actually arrives; the
    body is buffered and replayed), the body-read deadline (408), the cap on work in
    flight (503 + Retry-After), a JSON 500 for any unexpected error, and the request
    metrics. Pure ASGI rather than ``BaseHTTPMiddleware``, which runs each request through
    an extra task and memory stream (measured: 2x the CPU of a fingerprint check)."""

    def __init__(self, app: Any, *, token: str | None, limit: int, metrics: "_Metrics", routes: list[Any],
                 body_timeout: float = DEFAULT_BODY_TIMEOUT, max_inflight: int = DEFAULT_MAX_INFLIGHT,
                 max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES, private: bool = False) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode("latin-1") if token else None
        self.limit = limit
        self.metrics = metrics
        self.routes = routes
        self.body_timeout = body_timeout
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self.private = private
        self.inflight = 0
        self.inflight_bytes = 0
        metrics.inflight = lambda: self.inflight

    def _route_of(self, scope: Any) -> str:
        """The route template a request matches ('unmatched' when none): the only path
        label metrics use, so their size does not depend on what clients send."""
        route = scope.get("route")
        if route is not None:
            return getattr(route, "path", "unmatched")
        partial = None
        for r in self.routes:
            try:
                match, _ = r.matches(scope)
            except Exception:  # noqa: BLE001 - a route that cannot judge this scope
                continue
            if match == Match.FULL:
                return getattr(r, "path", "unmatched")
            if match == Match.PARTIAL and partial is None:
                partial = getattr(r, "path", None)
        return partial or "unmatched"

    async def _read_body(self, receive: Any, start: float, held: list[int]
                         ) -> tuple[bytes | None, tuple[int, str, dict[str, str]] | None]:
        """The whole request body, or the error to answer: 413 over the limit, 408 past the
        deadline, 503 when the bodies in flight would pass ``max_inflight_bytes``. Bytes
        beyond those reserved in ``held[0]`` (no or a false Content-Length) are reserved
        as they arrive (the caller releases ``held[0]``)."""
        chunks: list[bytes] = []
        size = 0
        close = {"connection": "close"}
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + self.body_timeout - (time.perf_counter() - start)):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return None, None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.limit:
                        return None, (413, f"request body is over the {self.limit:,}-byte limit", close)
                    if size > held[0]:
                        if self.inflight_bytes + size - held[0] > self.max_inflight_bytes:
                            del chunks[:]  # free what was read; discard the rest as it comes
                            self.inflight_bytes -= held[0]
                            held[0] = 0
                            drained = not message.get("more_body") or await self._drain(receive, start, size)
                            return None, (503, "busy: too many request bodies in flight; retry shortly",
                                          {"retry-after": "1"} if drained else {"retry-after": "1", **close})
                        self.inflight_bytes += size - held[0]
                        held[0] = size
                    chunks.append(chunk)
                    if not message.get("more_body"):
                        return b"".join(chunks), None
        except TimeoutError:
            return None, (408, f"request body not received within {self.body_timeout:g} s", close)

    async def _drain(self, receive: Any, start: float, seen: int = 0) -> bool:
        """Read and discard the rest of a request body that is refused (503), so that a client
        still uploading gets the answer instead of a connection reset: chunk by chunk (memory
        stays bounded whatever the body's size), at most ``max_body`` bytes in all, within the
        body deadline. True when the body was read to its end (the connection can be kept);
        False otherwise (the answer then closes it)."""
        size = seen
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + self.body_timeout - (time.perf_counter() - start)):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return False
                    size += len(message.get("body", b""))
                    if size > self.limit:
                        return False
                    if not message.get("more_body"):
                        return True
        except TimeoutError:
            return False

    async def _busy(self, scope: Any, receive: Any, start: float, declared: int | None) -> dict[str, str]:
        """The headers of a 503 that refuses a request before its body is read: the body
        (when one is coming) is read and discarded first (:meth:`_drain`), so the client gets
        its 503 and the connection stays open; ``Connection: close`` when that fails, or when
        the client waits for ``100 Continue`` before sending it (it is then never asked to)."""
        headers = dict(scope["headers"])
        expects_body = scope["method"] in ("POST", "PUT", "PATCH") and (
            declared is None and b"transfer-encoding" in headers or bool(declared))
        if headers.get(b"expect", b"").lower() == b"100-continue":
            return {"retry-after": "1", "connection": "close"} if expects_body else {"retry-after": "1"}
        if not expects_body or await self._drain(receive, start):
            return {"retry-after": "1"}
        return {"retry-after": "1", "connection": "close"}

    def _protected(self, path: str) -> bool:
        return path.startswith("/v1/") or (self.private and path not in _PUBLIC)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [0]

        async def send_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        async def reply(code: int, message: str, headers: dict[str, str] | None = None) -> None:
            await _error(code, message, headers)(scope, receive, send_status)

        held = [0]  # request body bytes reserved under max_inflight_bytes
        counted = False
        try:
            path = scope["path"]
            headers = dict(scope["headers"])
            if self.expected is not None and self._protected(path) and not hmac.compare_digest(
                    headers.get(b"authorization", b""), self.expected):
                await reply(401, "missing or wrong bearer token")
                return
            declared_raw = headers.get(b"content-length", b"")
            declared = int(declared_raw) if declared_raw.isdigit() and len(declared_raw) < 20 else None
            if declared_raw and declared is None:
                await reply(400, "malformed Content-Length header", {"connection": "close"})
                return
            if declared is not None and declared > self.limit:
                await reply(413, f"request body is {declared:,} bytes, over the {self.limit:,}-byte limit",
                            {"connection": "close"})
                return
            if path not in _PUBLIC and path != "/metrics":
                if self.inflight >= self.max_inflight:
                    busy = f"busy: {self.inflight} requests in flight; retry shortly"
                    await reply(503, busy, await self._busy(scope, receive, start, declared))
                    return
                self.inflight += 1
                counted = True
            replay = receive
            if scope["method"] in ("POST", "PUT", "PATCH"):
                if declared and self.inflight_bytes + declared > self.max_inflight_bytes:
                    await reply(503, "busy: too many request bodies in flight; retry shortly",
                                await self._busy(scope, receive, start, declared))
                    return
                held[0] = declared or 0
                self.inflight_bytes += held[0]
                body, problem = await self._read_body(receive, start, held)
                if problem is not None:
                    await reply(*problem)
                    return
                if body is None:
                    return  # the client went away
                buffered: list[dict[str, Any]] = [{"type": "http.request", "body": body, "more_body": False}]
                del body

                async def replay() -> Any:
                    return buffered.pop() if buffered else await receive()
            await self.app(scope, replay, send_status)
        except Exception as exc:  # noqa: BLE001 - a bug: log it, answer JSON, keep serving
            log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if status[0] == 0:
                await reply(500, f"internal error ({type(exc).__name__}); the service log has the details")
        finally:
            if counted:
                self.inflight -= 1
            self.inflight_bytes -= held[0]
            self.metrics.observe(self._route_of(scope), status[0] or 500, time.perf_counter() - start)


def _error(code: int, message: str, headers: dict[str, str] | None = None, kind: str | None = None) -> JSONResponse:
    """A JSON error; ``kind`` names the library exception (``type``), so that
    :class:`neardup.Client` raises the same one as the Detector would."""
    body: dict[str, Any] = {"error": " ".join(message.split())}
    if kind is not None:
        body["type"] = kind
    return JSONResponse(body, status_code=code, headers=headers)


def _json(data: Any) -> Response:
    """A JSON response without FastAPI's response-model pass (``jsonable_encoder`` and a
    pydantic validation of the dict: most of a fingerprint check's CPU time)."""
    return Response(json.dumps(data, separators=(",", ":"), allow_nan=False), media_type="application/json")


def _label(value: object) -> str:
    """A Prometheus label value, escaped (backslash, quote, newline)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Metrics:
    """Request counters by route template and status code (both from bounded sets: the
    app's routes plus 'unmatched', and HTTP codes), in the Prometheus text format."""

    MAX_SERIES = 2000  # a safety net: routes x codes stays far below it

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)
        self.inflight = lambda: 0

    def observe(self, route: str, code: int, seconds: float) -> None:
        with self.lock:
            if (route, code) not in self.requests and len(self.requests) >= self.MAX_SERIES:
                route, code = "other", 0
            self.requests[(route, code)] += 1
            self.seconds[route] += seconds
            self.count[route] += 1

    def render(self, stats: dict[str, int]) -> str:
        lines = ["# HELP neardup_requests_total HTTP requests by route template and status code.",
                 "# TYPE neardup_requests_total counter"]
        with self.lock:
            for (route, code), n in sorted(self.requests.items()):
                lines.append(f'neardup_requests_total{{route="{_label(route)}",code="{code}"}} {n}')
            lines += ["# HELP neardup_request_seconds Time spent answering requests.",
                      "# TYPE neardup_request_seconds summary"]
            for route in sorted(self.count):
                lines.append(f'neardup_request_seconds_sum{{route="{_label(route)}"}} {self.seconds[route]:.6f}')
                lines.append(f'neardup_request_seconds_count{{route="{_label(route)}"}} {self.count[route]}')
        lines += ["# HELP neardup_requests_in_flight Requests being worked on.", "# TYPE neardup_requests_in_flight gauge",
                  f"neardup_requests_in_flight {self.inflight()}"]
        lines += ["# HELP neardup_pages Stored pages by their last verdict.", "# TYPE neardup_pages gauge"]
        for key, value in stats.items():
            if key not in ("pages", "clusters"):
                lines.append(f'neardup_pages{{status="{_label(key)}"}} {value}')
        lines += ["# HELP neardup_clusters Stored clusters.", "# TYPE neardup_clusters gauge",
                  f"neardup_clusters {stats.get('clusters', 0)}"]
        return "\n".join(lines) + "\n"


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory`` and ``neardup serve --workers N``: every worker
    process opens its own Detector on the shared store named by ``NEARDUP_DB`` (settings in
    ``NEARDUP_SETTINGS``, JSON written by the CLI; else the decision settings from
    ``NEARDUP_K``, ``NEARDUP_VERIFY``, ...: :meth:`DetectorSettings.from_env`)."""
    import os

    from neardup.fingerprint import FingerprintConfig

    from neardup.settings import DetectorSettings

    settings = json.loads(os.environ.get("NEARDUP_SETTINGS", "{}"))
    config = FingerprintConfig.from_dict(settings["config"]) if settings.get("config") else None
    # the CLI passes every decision setting; without it, the NEARDUP_K, NEARDUP_VERIFY, ... variables
    decide = (DetectorSettings.from_dict(settings["settings"]) if settings.get("settings")
              else DetectorSettings.from_env())
    detector = Detector.open(os.environ["NEARDUP_DB"], config=config, settings=decide)
    limits = {name: settings[name] for name in ("body_timeout", "max_inflight", "max_inflight_bytes", "private")
              if name in settings}
    return create_app(detector, token=os.environ.get("NEARDUP_TOKEN") or None,
                      max_body=int(settings.get("max_body", DEFAULT_MAX_BODY)), **limits)


DOCS_ASSETS = "/docs-assets"


def _offline_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI served from the installed ``swagger-ui-bundle`` package (no CDN:
    the page works offline); without that package, ``/docs`` says how to get it."""
    from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
    from fastapi.responses import HTMLResponse

    try:
        from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]
    except ImportError:
        swagger_ui_path = None

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        if swagger_ui_path is None:
            return HTMLResponse("<p>The API docs need the swagger-ui-bundle package: "
                                "<code>pip install 'neardup[service]'</code>. The OpenAPI description is at "
                                "<a href='/openapi.json'>/openapi.json</a>.</p>", status_code=501)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="neardup API",
                                   swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
                                   oauth2_redirect_url="/docs/oauth2-redirect")

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def oauth2_redirect() -> Response:
        return get_swagger_ui_oauth2_redirect_html()

    if swagger_ui_path is not None:
        from starlette.staticfiles import StaticFiles

        app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")


def create_app(detector: Detector, *, token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
               body_timeout: float = DEFAULT_BODY_TIMEOUT, max_inflight: int = DEFAULT_MAX_INFLIGHT,
               max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES, private: bool = False) -> FastAPI:
    """An ASGI app serving ``detector`` (shared by all requests, writes serialised).

    ``token``: bearer token required for /v1 (and, with ``private``, for /metrics and the
    docs too; /healthz stays open). ``max_body``: largest request body (413). The body
    must arrive within ``body_timeout`` seconds (408). At most ``max_inflight`` requests
    and ``max_inflight_bytes`` of bodies are worked on at once (503 + Retry-After beyond)."""
    if private and not token:
        from neardup.errors import ConfigError

        raise ConfigError("private=True needs a token")
    app = FastAPI(title="neardup", version=__version__, docs_url=None, redoc_url=None,
                  description="Near-duplicate web page detection: is this page new, an exact or a near duplicate?")
    _offline_docs(app)
    lock = threading.Lock()
    metrics = _Metrics()
    app.state.detector = detector
    app.add_middleware(_Guard, token=token, limit=max_body, metrics=metrics, routes=app.router.routes,
                       body_timeout=body_timeout, max_inflight=max_inflight, max_inflight_bytes=max_inflight_bytes,
                       private=private)

    async def locked(fn: Any, *args: Any, inline: bool = True, **kwargs: Any) -> Any:
        """Run ``fn`` under the decision lock: inline on the event loop when the lock is free
        and ``inline`` (a fingerprint decision takes well under a millisecond, and a thread
        hop costs about as much), else in the thread pool."""
        if inline and lock.acquire(blocking=False):
            try:
                return fn(*args, **kwargs)
            finally:
                lock.release()

        def wait_and_run() -> Any:
            with lock:
                return fn(*args, **kwargs)
        return await run_in_threadpool(wait_and_run)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        msg = first.get("msg", "invalid request")
        return _error(422, f"{where}: {msg}" if where else msg)

    @app.exception_handler(SpecMismatchError)
    async def spec_error(request: Request, exc: SpecMismatchError) -> JSONResponse:
        return _error(409, str(exc), kind=type(exc).__name__)

    @app.exception_handler(StoreLockedError)
    async def locked_error(request: Request, exc: StoreLockedError) -> JSONResponse:
        return _error(503, str(exc), {"retry-after": "1"}, kind=type(exc).__name__)

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        return _error(500, str(exc), kind=type(exc).__name__)

    @app.exception_handler(NeardupError)
    async def input_error(request: Request, exc: NeardupError) -> JSONResponse:
        return _error(400, str(exc), kind=type(exc).__name__)

    def _add(page: PageIn) -> Verdict:
        content, headers = page.content_and_headers()
        fp = detector.fingerprint(content, page.url, headers)  # outside the lock: the slow part
        with lock:
            return detector.add_fingerprint(page.url, fp, fetched_at=page.fetched_at, priority=page.priority)

    def _check(page: PageIn) -> Verdict:
        content, headers = page.content_and_headers()
        fp = detector.fingerprint(content, page.url, headers)
        with lock:
            return detector.check_fingerprint(page.url, fp)

    def _each(pages: list[PageIn], fn: Any) -> list[dict[str, Any]]:
        out = []
        for page in pages:
            try:
                out.append(fn(page).to_dict())
            except (InputError, NeardupError) as exc:
                if isinstance(exc, StoreError):
                    raise
                out.append(Verdict(status="error", url=page.url, error=str(exc)).to_dict())
        return out

    @app.post("/v1/pages", summary="Check and add a page", response_model=None, responses=_answers(VerdictOut))
    def add_page(page: PageIn) -> Response:
        return _json(_add(page).to_dict())

    @app.post("/v1/check", summary="Check a page without writing", response_model=None, responses=_answers(VerdictOut))
    def check_page(page: PageIn) -> Response:
        return _json(_check(page).to_dict())

    @app.post("/v1/pages/batch", summary="Check and add pages; a bad page gets status 'error'", response_model=None,
              responses=_answers(VerdictsOut))
    def add_batch(batch: BatchIn) -> Response:
        return _json({"verdicts": _each(batch.pages, _add)})

    @app.post("/v1/check/batch", summary="Check pages without writing", response_model=None,
              responses=_answers(VerdictsOut))
    def check_batch(batch: BatchIn) -> Response:
        return _json({"verdicts": _each(batch.pages, _check)})

    @app.post("/v1/fingerprints/add", summary="Add a page by its fingerprint", response_model=None,
              responses=_answers(VerdictOut, 409))
    async def add_fp(body: FingerprintIn) -> Response:
        fp = body.fingerprint(detector)
        verdict = await locked(detector.add_fingerprint, body.url, fp, fetched_at=body.fetched_at,
                               priority=body.priority)
        return _json(verdict.to_dict())

    @app.post("/v1/fingerprints/check", summary="Check a fingerprint without writing", response_model=None,
              responses=_answers(VerdictOut, 409))
    async def check_fp(body: FingerprintIn) -> Response:
        fp = body.fingerprint(detector)
        return _json((await locked(detector.check_fingerprint, body.url, fp)).to_dict())

    def _fp_items(body: FingerprintBatchIn, with_times: bool) -> list[tuple[Any, ...]]:
        items: list[tuple[Any, ...]] = []
        for f in body.fingerprints:
            try:
                fp: Any = f.fingerprint(detector)
            except InputError as exc:
                fp = exc  # reported as this item's error
            items.append((f.url, fp, f.fetched_at, f.priority) if with_times else (f.url, fp))
        return items

    def _fp_batch(items: list[tuple[Any, ...]], fn: Any) -> list[dict[str, Any]]:
        good = [it for it in items if not isinstance(it[1], Exception)]
        done = iter(fn(good))
        return [Verdict(status="error", url=it[0], error=str(it[1])).to_dict() if isinstance(it[1], Exception)
                else next(done).to_dict() for it in items]

    @app.post("/v1/fingerprints/check/batch", response_model=None, responses=_answers(VerdictsOut, 409),
              summary="Check many fingerprints: {\"fingerprints\": [...]} -> {\"verdicts\": [...]}")
    async def check_fp_batch(body: FingerprintBatchIn) -> Response:
        items = _fp_items(body, False)
        return _json({"verdicts": await locked(_fp_batch, items, detector.check_fingerprints, inline=len(items) <= 32)})

    @app.post("/v1/fingerprints/add/batch", response_model=None, responses=_answers(VerdictsOut, 409),
              summary="Add many fingerprints in one transaction; a bad one gets status 'error'")
    def add_fp_batch(body: FingerprintBatchIn) -> Response:
        items = _fp_items(body, True)
        with lock:
            return _json({"verdicts": _fp_batch(items, detector.add_fingerprints)})

    @app.get("/v1/pages/{page_id}", summary="A stored page", response_model=None, responses=_answers(PageOut, 404))
    def get_page(page_id: int) -> Any:
        if not 0 <= page_id <= MAX_ID:
            return _error(404, f"no page with id {page_id}")
        with lock:
            rec = detector.page(page_id)
        if rec is None:
            return _error(404, f"no page with id {page_id}")
        return rec.to_dict(detector.config.bits)

    @app.get("/v1/clusters/{cluster_id}", summary="A cluster: members, canonical, why each joined", response_model=None,
             responses=_answers(ClusterOut, 404))
    def get_cluster(cluster_id: int) -> Any:
        if not 0 <= cluster_id <= MAX_ID:
            return _error(404, f"no cluster with id {cluster_id}")
        with lock:
            members = detector.cluster(cluster_id)
            canonical = detector.store.cluster_canonical(cluster_id)
        if not members:
            return _error(404, f"no cluster with id {cluster_id}")
        return {
            "id": cluster_id, "canonical_id": canonical, "size": len(members),
            "canonical_url": next((m.url for m in members if m.id == canonical), None),
            "members": [{"id": m.id, "url": m.url, "status": m.status, "matched_id": m.matched_id,
                         "distance": m.distance, "first_seen": m.first_seen, "fetched_at": m.fetched_at,
                         "canonical": m.id == canonical} for m in members],
        }

    @app.get("/v1/hosts/{host}", summary="Duplicate statistics of a host", response_model=None,
             responses=_answers(HostOut, 404))
    def get_host(host: str) -> Any:
        if len(host) > 1024 or _has_surrogates(host):
            return _error(404, f"no page stored for host {host[:100]!r}")
        with lock:
            counts = detector.store.host_stats(host.lower())
        pages = sum(counts.values())
        if pages == 0:
            return _error(404, f"no page stored for host {host!r}")
        dups = counts.get("exact", 0) + counts.get("near", 0)
        return {"host": host.lower(), "pages": pages, "new": counts.get("new", 0), "exact": counts.get("exact", 0),
                "near": counts.get("near", 0), "empty": counts.get("empty", 0),
                "duplicate_rate": dups / pages}

    # -- before the fetch, rules, hosts, expiry: the Detector's other operations -----------
    @app.get("/v1/should-fetch", summary="Should a crawler fetch this URL? (before the fetch)", response_model=None,
             responses=_answers(FetchDecisionOut))
    def should_fetch(url: str, max_age: float | None = None, host_max_duplicate_rate: float | None = None,
                     host_min_pages: int = 20) -> Response:
        with lock:
            decision = detector.should_fetch(url, max_age=max_age, host_max_duplicate_rate=host_max_duplicate_rate,
                                             host_min_pages=host_min_pages)
        return _json(decision.to_dict())

    @app.get("/v1/history", summary="A stored URL's fetch history and recrawl schedule", response_model=None,
             responses=_answers(HistoryOut))
    def get_history(url: str) -> Response:
        with lock:
            found = detector.history(url)
        if found is None:
            return _error(404, f"URL {url[:200]!r} is not stored")
        return _json(found.to_dict())

    @app.get("/v1/rules", summary="Learned URL rules of every host", response_model=None,
             responses=_answers(RulesOut))
    def get_rules() -> Response:
        with lock:
            rules = [r.to_dict() for r in detector.rules()]
        return _json({"rules": rules})

    @app.get("/v1/hosts/{host}/rules", summary="Learned URL rules of one host", response_model=None,
             responses=_answers(HostRulesOut))
    def get_host_rules(host: str) -> Response:
        if len(host) > 1024 or _has_surrogates(host):
            return _error(400, f"bad host {host[:100]!r}", kind="InputError")
        with lock:
            rules = [r.to_dict() for r in detector.rules(host.lower())]
        return _json({"host": host.lower(), "rules": rules})

    @app.get("/v1/hosts", summary="Per-host duplicate signals, sorted and paged", response_model=None,
             responses=_answers(HostsOut))
    def get_hosts(top: int | None = None, offset: int = 0, window: float | None = None, at: float | None = None,
                  sort: str = "duplicate_rate", trap_members: int = DEFAULT_TRAP_MEMBERS) -> Response:
        if offset < 0 or (top is not None and top < 0):
            return _error(400, "top and offset must be >= 0", kind="ConfigError")
        with lock:
            rows = detector.hosts(window=window, at=at, sort=sort, trap_members=trap_members)
        end = len(rows) if top is None else offset + top
        return _json({"hosts": rows[offset:end], "total": len(rows), "offset": offset})

    @app.post("/v1/expire", summary="Forget pages last fetched more than older_than seconds ago",
              response_model=None, responses=_answers(ExpiredOut))
    def expire(body: ExpireIn) -> Response:
        with lock:
            return _json({"expired": detector.expire(body.older_than)})

    @app.get("/v1/clusters/{cluster_id}/info", summary="A cluster's size, canonical and growth (no members)",
             response_model=None, responses=_answers(ClusterInfoOut, 404))
    def get_cluster_info(cluster_id: int, at: float | None = None) -> Any:
        if not 0 <= cluster_id <= MAX_ID:
            return _error(404, f"no cluster with id {cluster_id}")
        with lock:
            info = detector.cluster_info(cluster_id, at=at)
        if info is None:
            return _error(404, f"no cluster with id {cluster_id}")
        return _json(info)

    @app.get("/v1/stats", summary="Store counts and the fingerprint spec", response_model=None,
             responses=_answers(StatsOut))
    def get_stats() -> dict[str, Any]:
        with lock:
            return {**detector.stats(), "spec": detector.config.spec, "k": detector.k, "method": detector.method}

    @app.get("/healthz", summary="Liveness", response_model=None, responses={200: {"model": HealthOut}})
    async def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics",
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text format 0.0.4"}})
    def get_metrics() -> PlainTextResponse:
        with lock:
            stats = detector.stats()
        return PlainTextResponse(metrics.render(stats), media_type="text/plain; version=0.0.4")

    return app


def serve(app: Any, host: str, port: int) -> None:
    """Run ``app`` in this process with uvicorn and :data:`UVICORN_SETTINGS`."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, **UVICORN_SETTINGS)


def serve_workers(workers: int, host: str, port: int) -> None:
    """Run ``app_from_env`` in ``workers`` processes sharing one listening socket (what
    ``uvicorn --workers`` does), with the socket created as IPPROTO_TCP: uvicorn's own leaves
    ``proto`` at 0, so asyncio never sets ``TCP_NODELAY`` on the connections and every
    keep-alive response waits ~40 ms for a delayed ACK (Kludex/uvicorn#3149)."""
    import socket

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("neardup.service:app_from_env", factory=True, workers=workers, host=host, port=port,
                            **UVICORN_SETTINGS)
    sock = config.bind_socket()
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto != socket.IPPROTO_TCP:
        sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        sock.set_inheritable(True)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()

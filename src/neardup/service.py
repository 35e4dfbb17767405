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
URL, 401 missing/wrong bearer token (when one is configured), 404 unknown id, 409
fingerprint of another spec, 413 body over the limit, 422 malformed JSON or fields, 503
store busy. The service only reads and writes its own store.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field, field_validator, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from neardup import __version__
from neardup.detector import DEFAULT_THRESHOLD, Detector, Verdict
from neardup.errors import (
    InputError, NeardupError, SpecMismatchError, StoreError, StoreLockedError,
)
from neardup.fingerprint import Fingerprint

DEFAULT_MAX_BODY = 32 * 1024 * 1024
MAX_BATCH = 1000


class PageIn(BaseModel):
    url: str = Field(..., max_length=8192)
    html: str | None = None
    text: str | None = None
    headers: dict[str, str] | None = None
    fetched_at: float | None = None
    priority: float | None = None

    @model_validator(mode="after")
    def one_body(self) -> "PageIn":
        if (self.html is None) == (self.text is None):
            raise ValueError("give exactly one of 'html' or 'text'")
        return self

    def content_and_headers(self) -> tuple[str, dict[str, str] | None]:
        if self.html is not None:
            return self.html, self.headers
        return self.text or "", {**(self.headers or {}), "content-type": "text/plain"}


class BatchIn(BaseModel):
    pages: list[PageIn] = Field(..., max_length=MAX_BATCH)


class FingerprintIn(BaseModel):
    url: str = Field(..., max_length=8192)
    simhash: str = Field(..., description="SimHash as hex, as computed by the documented spec")
    digest: str = Field(..., min_length=64, max_length=64)
    spec: str
    tokens: int = Field(..., ge=0, description="main-content token count (pages under min_tokens are empty)")
    length: int = Field(0, ge=0)
    features: int = Field(0, ge=0)
    title: str | None = None
    canonical_url: str | None = None
    language: str | None = None
    fetched_at: float | None = None
    priority: float | None = None

    @field_validator("simhash")
    @classmethod
    def hex_simhash(cls, v: str) -> str:
        try:
            int(v, 16)
        except ValueError:
            raise ValueError("simhash must be a hexadecimal string") from None
        return v

    @field_validator("digest")
    @classmethod
    def hex_digest(cls, v: str) -> str:
        try:
            int(v, 16)
        except ValueError:
            raise ValueError("digest must be a SHA-256 hex string") from None
        return v.lower()

    def fingerprint(self, detector: Detector) -> Fingerprint:
        bits = detector.config.bits
        value = int(self.simhash, 16)
        if value >= 1 << bits:
            raise InputError(f"simhash has more than {bits} bits")
        return Fingerprint(
            simhash=value, digest=self.digest, spec=self.spec, bits=bits, title=self.title,
            canonical_url=self.canonical_url, language=self.language, length=self.length,
            tokens=self.tokens, features=self.features,
            empty=self.tokens < max(1, detector.config.min_tokens),
        )


class FingerprintBatchIn(BaseModel):
    fingerprints: list[FingerprintIn] = Field(..., max_length=MAX_BATCH * 10)


class _Guard:
    """Pure ASGI middleware in front of every route: the bearer token (401), the body limit
    (413, by Content-Length or by what actually arrives; the body is buffered and replayed)
    and the request metrics. Pure ASGI rather than ``BaseHTTPMiddleware``, which runs each
    request through an extra task and memory stream (measured: 2x the CPU of a fingerprint
    check)."""

    def __init__(self, app: Any, *, token: str | None, limit: int, metrics: "_Metrics") -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode("latin-1") if token else None
        self.limit = limit
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path = scope["path"]
        headers = dict(scope["headers"])
        if self.expected is not None and path.startswith("/v1/") and headers.get(b"authorization") != self.expected:
            await _error(401, "missing or wrong bearer token")(scope, receive, send)
            self.metrics.observe(path, 401, time.perf_counter() - start)
            return
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await _error(413, f"request body is {int(declared):,} bytes, over the {self.limit:,}-byte limit")(
                scope, receive, send)
            self.metrics.observe(path, 413, time.perf_counter() - start)
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # client went away
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.limit:
                    await _error(413, f"request body is over the {self.limit:,}-byte limit")(scope, receive, send)
                    self.metrics.observe(path, 413, time.perf_counter() - start)
                    return
                chunks.append(chunk)
                if not message.get("more_body"):
                    break
            buffered: list[dict[str, Any]] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

            async def replay() -> Any:
                return buffered.pop() if buffered else await receive()
        else:
            replay = receive
        status = [500]

        async def send_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, replay, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe(route, status[0], time.perf_counter() - start)


def _error(code: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=code)


def _json(data: Any) -> Response:
    """A JSON response without FastAPI's response-model pass (``jsonable_encoder`` and a
    pydantic validation of the dict: most of a fingerprint check's CPU time)."""
    return Response(json.dumps(data, separators=(",", ":"), allow_nan=False), media_type="application/json")


class _Metrics:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)

    def observe(self, route: str, code: int, seconds: float) -> None:
        with self.lock:
            self.requests[(route, code)] += 1
            self.seconds[route] += seconds
            self.count[route] += 1

    def render(self, stats: dict[str, int]) -> str:
        lines = ["# HELP neardup_requests_total HTTP requests by route and status code.",
                 "# TYPE neardup_requests_total counter"]
        with self.lock:
            for (route, code), n in sorted(self.requests.items()):
                lines.append(f'neardup_requests_total{{route="{route}",code="{code}"}} {n}')
            lines += ["# HELP neardup_request_seconds Time spent answering requests.",
                      "# TYPE neardup_request_seconds summary"]
            for route in sorted(self.count):
                lines.append(f'neardup_request_seconds_sum{{route="{route}"}} {self.seconds[route]:.6f}')
                lines.append(f'neardup_request_seconds_count{{route="{route}"}} {self.count[route]}')
        lines += ["# HELP neardup_pages Stored pages by their last verdict.", "# TYPE neardup_pages gauge"]
        for key, value in stats.items():
            if key not in ("pages", "clusters"):
                lines.append(f'neardup_pages{{status="{key}"}} {value}')
        lines += ["# HELP neardup_clusters Stored clusters.", "# TYPE neardup_clusters gauge",
                  f"neardup_clusters {stats.get('clusters', 0)}"]
        return "\n".join(lines) + "\n"


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory`` and ``neardup serve --workers N``: every worker
    process opens its own Detector on the shared store named by ``NEARDUP_DB`` (settings in
    ``NEARDUP_SETTINGS``, JSON written by the CLI)."""
    import os

    from neardup.fingerprint import FingerprintConfig

    settings = json.loads(os.environ.get("NEARDUP_SETTINGS", "{}"))
    config = FingerprintConfig.from_dict(settings["config"]) if settings.get("config") else None
    detector = Detector.open(os.environ["NEARDUP_DB"], k=settings.get("k", 7), config=config,
                             method=settings.get("method", "simhash"), threshold=settings.get("threshold", DEFAULT_THRESHOLD),
                             containment=settings.get("containment"))
    return create_app(detector, token=os.environ.get("NEARDUP_TOKEN") or None,
                      max_body=int(settings.get("max_body", DEFAULT_MAX_BODY)))


def create_app(detector: Detector, *, token: str | None = None, max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """An ASGI app serving ``detector`` (shared by all requests, writes serialised)."""
    app = FastAPI(title="neardup", version=__version__,
                  description="Near-duplicate web page detection: is this page new, an exact or a near duplicate?")
    lock = threading.Lock()
    metrics = _Metrics()
    app.state.detector = detector
    app.add_middleware(_Guard, token=token, limit=max_body, metrics=metrics)

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
        return _error(409, str(exc))

    @app.exception_handler(StoreLockedError)
    async def locked_error(request: Request, exc: StoreLockedError) -> JSONResponse:
        return _error(503, str(exc))

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        return _error(500, str(exc))

    @app.exception_handler(NeardupError)
    async def input_error(request: Request, exc: NeardupError) -> JSONResponse:
        return _error(400, str(exc))

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

    @app.post("/v1/pages", summary="Check and add a page", response_model=None)
    def add_page(page: PageIn) -> Response:
        return _json(_add(page).to_dict())

    @app.post("/v1/check", summary="Check a page without writing", response_model=None)
    def check_page(page: PageIn) -> Response:
        return _json(_check(page).to_dict())

    @app.post("/v1/pages/batch", summary="Check and add pages; a bad page gets status 'error'", response_model=None)
    def add_batch(batch: BatchIn) -> Response:
        return _json({"verdicts": _each(batch.pages, _add)})

    @app.post("/v1/check/batch", summary="Check pages without writing", response_model=None)
    def check_batch(batch: BatchIn) -> Response:
        return _json({"verdicts": _each(batch.pages, _check)})

    @app.post("/v1/fingerprints/add", summary="Add a page by its fingerprint", response_model=None)
    async def add_fp(body: FingerprintIn) -> Response:
        fp = body.fingerprint(detector)
        verdict = await locked(detector.add_fingerprint, body.url, fp, fetched_at=body.fetched_at,
                               priority=body.priority)
        return _json(verdict.to_dict())

    @app.post("/v1/fingerprints/check", summary="Check a fingerprint without writing", response_model=None)
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

    @app.post("/v1/fingerprints/check/batch", response_model=None,
              summary="Check many fingerprints: {\"fingerprints\": [...]} -> {\"verdicts\": [...]}")
    async def check_fp_batch(body: FingerprintBatchIn) -> Response:
        items = _fp_items(body, False)
        return _json({"verdicts": await locked(_fp_batch, items, detector.check_fingerprints, inline=len(items) <= 32)})

    @app.post("/v1/fingerprints/add/batch", response_model=None,
              summary="Add many fingerprints in one transaction; a bad one gets status 'error'")
    def add_fp_batch(body: FingerprintBatchIn) -> Response:
        items = _fp_items(body, True)
        with lock:
            return _json({"verdicts": _fp_batch(items, detector.add_fingerprints)})

    @app.get("/v1/pages/{page_id}", summary="A stored page")
    def get_page(page_id: int) -> Any:
        with lock:
            rec = detector.page(page_id)
        if rec is None:
            return _error(404, f"no page with id {page_id}")
        return rec.to_dict(detector.config.bits)

    @app.get("/v1/clusters/{cluster_id}", summary="A cluster: members, canonical, why each joined")
    def get_cluster(cluster_id: int) -> Any:
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

    @app.get("/v1/hosts/{host}", summary="Duplicate statistics of a host")
    def get_host(host: str) -> Any:
        with lock:
            counts = detector.store.host_stats(host.lower())
        pages = sum(counts.values())
        if pages == 0:
            return _error(404, f"no page stored for host {host!r}")
        dups = counts.get("exact", 0) + counts.get("near", 0)
        return {"host": host.lower(), "pages": pages, "new": counts.get("new", 0), "exact": counts.get("exact", 0),
                "near": counts.get("near", 0), "empty": counts.get("empty", 0),
                "duplicate_rate": dups / pages}

    @app.get("/v1/stats", summary="Store counts and the fingerprint spec")
    def get_stats() -> dict[str, Any]:
        with lock:
            return {**detector.stats(), "spec": detector.config.spec, "k": detector.k, "method": detector.method}

    @app.get("/healthz", summary="Liveness", response_model=None)
    async def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    def get_metrics() -> PlainTextResponse:
        with lock:
            stats = detector.stats()
        return PlainTextResponse(metrics.render(stats), media_type="text/plain; version=0.0.4")

    return app


def serve_workers(workers: int, host: str, port: int) -> None:
    """Run ``app_from_env`` in ``workers`` processes sharing one listening socket (what
    ``uvicorn --workers`` does), with the socket created as IPPROTO_TCP: uvicorn's own leaves
    ``proto`` at 0, so asyncio never sets ``TCP_NODELAY`` on the connections and every
    keep-alive response waits ~40 ms for a delayed ACK (Kludex/uvicorn#3149)."""
    import socket

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("neardup.service:app_from_env", factory=True, workers=workers, host=host, port=port,
                            log_level="warning")
    sock = config.bind_socket()
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto != socket.IPPROTO_TCP:
        sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        sock.set_inheritable(True)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()

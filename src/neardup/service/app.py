"""The ASGI application: :func:`create_app` composes the guard, the routers, the error
handlers, the metrics and the offline API docs around one shared Detector."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from neardup._version import __version__
from neardup.detector.core import Detector
from neardup.errors import (
    ConfigError,
    NeardupError,
    NotStoredError,
    SpecMismatchError,
    StoreError,
    StoreLockedError,
)
from neardup.ingest.workers import DEFAULT_PAGE_TIMEOUT, PageTimeoutError, PageWorkerError
from neardup.service import lookups, routes
from neardup.service.guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_MAX_INFLIGHT_BYTES,
    Guard,
    error,
    json_response,
)
from neardup.service.metrics import CONTENT_TYPE, DEFAULT_MAX_AGE, DEFAULT_STATS_INTERVAL, Metrics
from neardup.service.models import FieldError, HealthOut
from neardup.service.pages import DEFAULT_PAGE_WORKERS, PagePool
from neardup.service.state import Service, ServiceDep

DOCS_ASSETS = "/docs-assets"


def create_app(detector: Detector, *, token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
               body_timeout: float = DEFAULT_BODY_TIMEOUT, max_inflight: int = DEFAULT_MAX_INFLIGHT,
               max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES, private: bool = False,
               page_timeout: float = DEFAULT_PAGE_TIMEOUT, page_workers: int = DEFAULT_PAGE_WORKERS,
               stats_interval: float = DEFAULT_STATS_INTERVAL, metrics_max_age: float = DEFAULT_MAX_AGE) -> FastAPI:
    """An ASGI app serving ``detector`` (shared by all requests, writes serialised).

    ``token``: bearer token required for /v1 (and, with ``private``, for /metrics and the
    docs too; /healthz stays open). ``max_body``: largest request body (413). The body
    must arrive within ``body_timeout`` seconds (408). At most ``max_inflight`` requests
    and ``max_inflight_bytes`` of bodies are worked on at once (503 + Retry-After beyond).
    Pages are fingerprinted by ``page_workers`` processes, each page within ``page_timeout``
    seconds (422 beyond, the worker replaced). The store figures of ``/metrics`` are counted
    at most every ``stats_interval`` seconds, and its text rendered at most every
    ``metrics_max_age`` seconds."""
    if private and not token:
        raise ConfigError("private=True needs a token")
    if not page_timeout > 0 or page_workers < 1:
        raise ConfigError(f"page_timeout must be > 0 and page_workers >= 1, got {page_timeout}, {page_workers}")
    metrics = Metrics()
    pool = PagePool(detector.config, metrics, size=page_workers, timeout=page_timeout)
    service = Service(detector, pool, metrics, stats_interval)
    service.snapshot.count_now()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        """Start the page workers (under serve); stop them at shutdown."""
        if getattr(app.state, "start_page_workers", False):
            await pool.start()  # under serve: ready before the first page, not during it
        try:
            yield
        finally:
            pool.close()
            metrics.process_exits()

    app = FastAPI(title="neardup", version=__version__, docs_url=None, redoc_url=None, lifespan=lifespan,
                  description="Near-duplicate web page detection: is this page new, an exact or a near duplicate?")
    app.state.service = service
    app.state.detector = detector
    app.state.settings = {"token": bool(token), "private": private, "max_body": max_body,
                          "body_timeout": body_timeout, "max_inflight": max_inflight,
                          "page_timeout": page_timeout, "page_workers": page_workers}
    _offline_docs(app)
    for router in (routes.router, lookups.router, _health_router()):
        # the routers' routes in place, not behind an included-router entry (newer FastAPI
        # keeps ``include_router`` lazy): ``app.routes`` lists every APIRoute, as before
        app.router.routes.extend(router.routes)
    app.state.metrics_max_age = metrics_max_age
    _error_handlers(app)
    app.add_middleware(Guard, token=token, limit=max_body, metrics=metrics, routes=app.router.routes,
                       body_timeout=body_timeout, max_inflight=max_inflight, max_inflight_bytes=max_inflight_bytes,
                       private=private)
    return app


def _health_router() -> Any:
    """``/healthz`` and ``/metrics``."""
    from fastapi import APIRouter

    router = APIRouter()

    @router.get("/healthz", summary="Liveness", response_model=None, responses={200: {"model": HealthOut}})
    async def healthz() -> Response:
        """Liveness: answered on the event loop, whatever the page workers do."""
        return json_response({"status": "ok"})

    @router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse,
                responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                                 "description": "Prometheus text format 0.0.4"}})
    async def get_metrics(request: Request, svc: ServiceDep) -> PlainTextResponse:
        """The counters as they are; never waits for the decision lock."""
        svc.snapshot.maybe_refresh()
        return PlainTextResponse(svc.metrics.render(request.app.state.metrics_max_age), media_type=CONTENT_TYPE)

    return router


def _error_handlers(app: FastAPI) -> None:
    """Every error answered as JSON with its ``type``."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """404, 405 and the other HTTP errors, typed by their name."""
        return error(exc.status_code, str(exc.detail), dict(exc.headers) if exc.headers else None)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422: the first field that failed validation, typed ValidationError."""
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        msg = first.get("msg", "invalid request")
        return error(422, f"{where}: {msg}" if where else msg)

    @app.exception_handler(FieldError)
    @app.exception_handler(PageTimeoutError)
    @app.exception_handler(PageWorkerError)
    async def field_error(request: Request, exc: NeardupError) -> JSONResponse:
        """422, typed InputError: a missing sketch, a page over the per-page limit."""
        return error(422, str(exc), kind="InputError")

    @app.exception_handler(NotStoredError)
    async def not_stored_error(request: Request, exc: NotStoredError) -> JSONResponse:
        """404: an operation on a URL the store does not hold."""
        return error(404, str(exc), kind=type(exc).__name__)

    @app.exception_handler(SpecMismatchError)
    async def spec_error(request: Request, exc: SpecMismatchError) -> JSONResponse:
        """409: a fingerprint of another spec."""
        return error(409, str(exc), kind=type(exc).__name__)

    @app.exception_handler(StoreLockedError)
    async def locked_error(request: Request, exc: StoreLockedError) -> JSONResponse:
        """503 with Retry-After: the store is busy."""
        return error(503, str(exc), {"retry-after": "1"}, kind=type(exc).__name__)

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        """500: the store failed."""
        return error(500, str(exc), kind=type(exc).__name__)

    @app.exception_handler(NeardupError)
    async def input_error(request: Request, exc: NeardupError) -> JSONResponse:
        """400: any other library error, typed by its name."""
        return error(400, str(exc), kind=type(exc).__name__)


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory`` and ``neardup serve --workers N``: every worker
    process opens its own Detector on the shared store named by ``NEARDUP_DB`` (settings in
    ``NEARDUP_SETTINGS``, JSON written by the CLI; else the decision settings from
    ``NEARDUP_K``, ``NEARDUP_VERIFY``, ...: :meth:`DetectorSettings.from_env`)."""
    from neardup.detector.settings import DetectorSettings
    from neardup.fingerprint.core import FingerprintConfig

    settings = json.loads(os.environ.get("NEARDUP_SETTINGS", "{}"))
    config = FingerprintConfig.from_dict(settings["config"]) if settings.get("config") else None
    # the CLI passes every decision setting; without it, the NEARDUP_K, NEARDUP_VERIFY, ... variables
    decide = (DetectorSettings.from_dict(settings["settings"]) if settings.get("settings")
              else DetectorSettings.from_env())
    detector = Detector.open(os.environ["NEARDUP_DB"], config=config, settings=decide)
    names = ("body_timeout", "max_inflight", "max_inflight_bytes", "private", "page_timeout", "page_workers",
             "stats_interval", "metrics_max_age")
    limits = {name: settings[name] for name in names if name in settings}
    app = create_app(detector, token=os.environ.get("NEARDUP_TOKEN") or None,
                     max_body=int(settings.get("max_body", DEFAULT_MAX_BODY)), **limits)
    app.state.start_page_workers = True
    return app


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
        """The Swagger UI page."""
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
        """Swagger UI's OAuth2 redirect page."""
        return get_swagger_ui_oauth2_redirect_html()

    if swagger_ui_path is not None:
        from starlette.staticfiles import StaticFiles

        app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")

"""The pure-ASGI guard in front of every route: bearer token, body limit and deadline, the
caps on work in flight, a JSON 500 for a bug, and the request metrics; and the JSON answers
(:func:`error`, :func:`json_response`) every part of the service writes."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any

from fastapi.responses import JSONResponse, Response
from starlette.routing import Match

from neardup.service.metrics import Metrics

DEFAULT_MAX_BODY = 32 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_INFLIGHT = 64
DEFAULT_MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
PUBLIC = ("/healthz",)
HTTP_TYPES = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
              408: "RequestTimeout", 409: "Conflict", 413: "PayloadTooLarge", 415: "UnsupportedMediaType",
              422: "ValidationError", 429: "TooManyRequests", 500: "InternalError", 501: "NotImplemented",
              503: "ServiceBusy"}
"""The ``type`` of an error answer that no library exception names: the HTTP error's name."""
log = logging.getLogger("neardup.service")


class Guard:
    """Pure ASGI middleware in front of every route: the bearer token (401, constant-time
    comparison), the body limit (413, by Content-Length or by what actually arrives; the
    body is buffered and replayed), the body-read deadline (408), the cap on work in
    flight (503 + Retry-After), a JSON 500 for any unexpected error, and the request
    metrics. Pure ASGI rather than ``BaseHTTPMiddleware``, which runs each request through
    an extra task and memory stream (measured: 2x the CPU of a fingerprint check)."""

    def __init__(self, app: Any, *, token: str | None, limit: int, metrics: Metrics, routes: list[Any],
                 body_timeout: float = DEFAULT_BODY_TIMEOUT, max_inflight: int = DEFAULT_MAX_INFLIGHT,
                 max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES, private: bool = False) -> None:
        """The guard in front of ``app``, with the service's limits."""
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

    def _route_of(self, scope: Any) -> str:
        """The route template a request matches ('unmatched' when none): the only path
        label metrics use, so their size does not depend on what clients send."""
        route = scope.get("route")
        if route is not None:
            return getattr(route, "path", "unmatched")
        partial = None
        for r in _flat(self.routes):
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
        """Whether ``path`` needs the token."""
        return path.startswith("/v1/") or (self.private and path not in PUBLIC)

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Exactly one Authorization header, equal to the expected one (constant time)."""
        given = [value for name, value in headers if name == b"authorization"]
        assert self.expected is not None
        return len(given) == 1 and hmac.compare_digest(given[0], self.expected)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer one request (or pass a non-HTTP scope through)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [0]

        async def send_status(message: Any) -> None:
            """Pass a message on, noting the response's status."""
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        async def reply(code: int, message: str, headers: dict[str, str] | None = None) -> None:
            """Answer with a JSON error."""
            await error(code, message, headers)(scope, receive, send_status)

        held = [0]  # request body bytes reserved under max_inflight_bytes
        counted = False
        try:
            path = scope["path"]
            headers = dict(scope["headers"])
            if self.expected is not None and self._protected(path) and not self._authorized(scope["headers"]):
                await reply(401, "missing, repeated or wrong bearer token")
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
            if path not in PUBLIC and path != "/metrics":
                if self.inflight >= self.max_inflight:
                    busy = f"busy: {self.inflight} requests in flight; retry shortly"
                    await reply(503, busy, await self._busy(scope, receive, start, declared))
                    return
                self.inflight += 1
                self.metrics.inflight.inc()
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
                    """The buffered body, then whatever the client sends next (a disconnect)."""
                    return buffered.pop() if buffered else await receive()
            await self.app(scope, replay, send_status)
        except Exception as exc:  # noqa: BLE001 - a bug: log it, answer JSON, keep serving
            log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if status[0] == 0:
                await reply(500, f"internal error ({type(exc).__name__}); the service log has the details")
        finally:
            if counted:
                self.inflight -= 1
                self.metrics.inflight.dec()
            self.inflight_bytes -= held[0]
            self.metrics.observe(self._route_of(scope), status[0] or 500, time.perf_counter() - start)


def _flat(routes: list[Any]) -> list[Any]:
    """The routes, those of included routers in their place (FastAPI keeps an included
    router as one entry; the service's routers have no prefix)."""
    out: list[Any] = []
    for r in routes:
        inner = getattr(r, "original_router", None)
        out += _flat(inner.routes) if inner is not None else [r]
    return out


def error(code: int, message: str, headers: dict[str, str] | None = None, kind: str | None = None) -> JSONResponse:
    """A JSON error ``{"error", "type"}``: ``kind`` names the library exception, so that
    :class:`neardup.Client` raises the same one as the Detector would; without one, the HTTP
    error's name (:data:`HTTP_TYPES`)."""
    body = {"error": " ".join(message.split()), "type": kind or HTTP_TYPES.get(code, f"HTTP{code}")}
    return JSONResponse(body, status_code=code, headers=headers)


def json_response(data: Any) -> Response:
    """A JSON response without FastAPI's response-model pass (``jsonable_encoder`` and a
    pydantic validation of the dict: most of a fingerprint check's CPU time)."""
    return Response(json.dumps(data, separators=(",", ":"), allow_nan=False), media_type="application/json")

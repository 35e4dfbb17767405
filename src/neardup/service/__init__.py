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

Every error is a JSON body ``{"error": "one line naming the problem", "type": "..."}``,
``type`` naming the library exception (``InputError``, ``URLError``, ``SpecMismatchError``...)
or the HTTP error (``NotFound``, ``MethodNotAllowed``, ``ValidationError``...): 400 bad page
or URL, 401 missing, repeated or wrong bearer token (when one is configured), 404 unknown id
or route, 405 method, 408 body (or headers) not received in time, 409 fingerprint of
another spec, 413 body over the limit, 422 malformed JSON or fields, a fingerprint without
the sketch its spec has, or a page over the per-page time limit (``type`` InputError), 503
busy (with ``Retry-After``), and 500, still JSON, for a bug. The service only reads and
writes its own store.

Pages sent to the page routes are decoded, parsed, extracted and fingerprinted in
``page_workers`` worker processes, each page within ``page_timeout`` seconds: a hostile
page's worker is killed and replaced (:mod:`neardup.service.pages`); every other request
keeps being answered. The fingerprint routes take everything the match rule reads: the
SimHash, the digest, the ``sketch`` (hex, as ``neardup fingerprint`` prints it; required
when the spec has one, so that a near match is always verified) and the title.

The package: :mod:`~neardup.service.models` (request and response models),
:mod:`~neardup.service.guard` (the pure-ASGI guard), :mod:`~neardup.service.metrics`,
:mod:`~neardup.service.pages` (page workers), :mod:`~neardup.service.state` (what routes
share, through ``Depends``), :mod:`~neardup.service.routes` and
:mod:`~neardup.service.lookups` (the ``APIRouter`` s), :mod:`~neardup.service.app`
(:func:`create_app`) and :mod:`~neardup.service.server` (:func:`serve`,
:func:`serve_workers`, the connection limits).

Limits against hostile or overloaded clients (``create_app`` arguments, ``neardup serve``
options): the body limit (``max_body``); the whole body must arrive within
``body_timeout`` seconds (a slowloris upload is cut with 408); at most ``max_inflight``
requests and ``max_inflight_bytes`` of request bodies are worked on at once, beyond which
requests get 503 with ``Retry-After`` instead of queueing (bounded memory; the body of a
refused request is read and discarded, so a client still uploading gets its 503, not a
reset); :func:`serve` and :func:`serve_workers` keep idle keep-alive connections
``KEEP_ALIVE_TIMEOUT`` (25 s), longer than clients keep them (httpx: 5 s), so a client does not
reuse one the server is closing, close a connection whose request headers are not in
within ``HEADER_TIMEOUT`` (10 s), and keep at most ``max_connections()`` open (the
longest-idle one is closed to make room); fields are
validated strictly (hex of the right width, integers in SQLite's range, finite numbers, no
lone surrogates). The token is compared in constant time; ``private=True`` requires it for
``/metrics`` and the API docs too. ``/metrics`` is labelled by route template, never by the
raw path, so its size is bounded whatever paths clients send; it never waits for the
decision lock (:mod:`neardup.service.metrics`).
"""

from __future__ import annotations

from neardup.ingest.workers import DEFAULT_PAGE_TIMEOUT
from neardup.service.app import app_from_env, create_app
from neardup.service.guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_MAX_INFLIGHT_BYTES,
    HTTP_TYPES,
)
from neardup.service.models import MAX_BATCH, MAX_ID
from neardup.service.pages import DEFAULT_PAGE_WORKERS
from neardup.service.server import (
    HEADER_TIMEOUT,
    KEEP_ALIVE_TIMEOUT,
    MAX_HEADER_BYTES,
    UVICORN_SETTINGS,
    max_connections,
    serve,
    serve_workers,
)

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_INFLIGHT",
    "DEFAULT_MAX_INFLIGHT_BYTES",
    "DEFAULT_PAGE_TIMEOUT",
    "DEFAULT_PAGE_WORKERS",
    "HEADER_TIMEOUT",
    "HTTP_TYPES",
    "KEEP_ALIVE_TIMEOUT",
    "MAX_BATCH",
    "MAX_HEADER_BYTES",
    "MAX_ID",
    "UVICORN_SETTINGS",
    "app_from_env",
    "create_app",
    "max_connections",
    "serve",
    "serve_workers",
]

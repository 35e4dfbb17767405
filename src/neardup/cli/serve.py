"""``neardup serve``: the HTTP service over one store."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from neardup.cli.common import (
    db_option,
    open_detector,
)
from neardup.cli.errors import handle_errors
from neardup.cli.options import (
    build_config,
    config_options,
    settings_from_options,
    settings_options,
)
from neardup.errors import ConfigError


@click.command("serve")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--token", envvar="NEARDUP_TOKEN", default=None,
              help="Require 'Authorization: Bearer TOKEN' (or set NEARDUP_TOKEN).")
@click.option("--private", is_flag=True,
              help="Require the token for /metrics and the API docs too (only /healthz stays open).")
@click.option("--max-body", type=click.IntRange(1024), default=32 * 1024 * 1024, show_default=True,
              help="Largest request body in bytes (413 above).")
@click.option("--body-timeout", type=click.FloatRange(0.1, 3600), default=30.0, show_default=True,
              help="Seconds a client has to send its whole request body (408 after: slow uploads are cut).")
@click.option("--max-inflight", type=click.IntRange(1, 100000), default=64, show_default=True,
              help="Requests worked on at once per worker; more get 503 with Retry-After.")
@click.option("--max-inflight-bytes", type=click.IntRange(1024), default=64 * 1024 * 1024, show_default=True,
              help="Request body bytes held at once per worker; more get 503 with Retry-After (bounds memory).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes sharing the store (each keeps its index current from the store's change log).")
@click.option("--page-timeout", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds of work one page may take (decode, parse, fingerprint); over it: 422 and a fresh worker.")
@click.option("--page-workers", type=click.IntRange(1, 64), default=None,
              help="Processes that fingerprint posted pages, per worker (default: up to 4, one per CPU).")
@settings_options()
@config_options
@handle_errors
def serve_cmd(db: str, host: str, port: int, token: str | None, private: bool, max_body: int, body_timeout: float,
              max_inflight: int, max_inflight_bytes: int, workers: int, page_timeout: float, page_workers: int | None,
              **opts: Any) -> None:
    """Serve the HTTP API (see neardup.service) over the store --db (a SQLite file, a
    postgresql:// URL, or a redis:// or redis+cluster:// URL)."""
    try:
        import uvicorn  # noqa: F401 (checked here: the extra is installed)

        from neardup.service.app import create_app
        from neardup.service.server import serve, serve_workers
    except ImportError as exc:
        raise ConfigError(f"the service needs the 'service' extra: pip install 'neardup[service]' ({exc})") from None
    if private and not token:
        raise ConfigError("--private needs --token (or NEARDUP_TOKEN)")
    settings = settings_from_options(opts)
    limits: dict[str, Any] = {"body_timeout": body_timeout, "max_inflight": max_inflight,
                              "max_inflight_bytes": max_inflight_bytes, "private": private,
                              "page_timeout": page_timeout}
    if page_workers is not None:
        limits["page_workers"] = page_workers
    det = open_detector(db, config=build_config(settings, **opts), settings=settings)  # creates / checks the store
    from neardup.fingerprint.core import warm_up

    warm_up(det.config)  # compile (cold cache: with a notice) before the first request, not during it
    if workers == 1:
        try:
            # keep-alive longer than clients keep idle connections (service.UVICORN_SETTINGS)
            serve(create_app(det, token=token, max_body=max_body, **limits), host, port)
        finally:
            det.close()
        return

    passed = {"config": det.config.to_dict(), "settings": settings.to_dict(), "max_body": max_body, **limits}
    det.close()
    os.environ.update({"NEARDUP_DB": db, "NEARDUP_SETTINGS": json.dumps(passed), "NEARDUP_TOKEN": token or ""})
    serve_workers(workers, host, port)



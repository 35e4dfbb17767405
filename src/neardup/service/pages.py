"""Page work for the POST page routes (decode, parse, extract, fingerprint) in killable
worker processes with a per-page time limit.

A thread cannot be interrupted: before, one 1.1 MB page of 50,000 attributes sent to
``POST /v1/check`` held a 1-worker service for 67 s. Here each page goes to one of
``size`` worker processes (:class:`neardup.ingest.workers.PageWorker`, a pipe each); a page that
takes over ``timeout`` seconds gets :class:`PageTimeoutError` (answered 422, ``type``
InputError, naming the limit), its worker is killed and replaced, and every other request
keeps being answered: the event loop only waits on a pipe. Pages beyond ``size`` wait for a
free worker (the guard's ``max_inflight`` bounds how many wait).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import threading
from collections.abc import Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool

from neardup.errors import NeardupError
from neardup.fingerprint.core import Fingerprint, FingerprintConfig
from neardup.ingest.workers import (
    DEFAULT_PAGE_TIMEOUT,
    PageTimeoutError,
    PageWorker,
    PageWorkerError,
    default_jobs,
    raise_typed,
    typed_result,
)
from neardup.service.metrics import Metrics

DEFAULT_PAGE_WORKERS = min(4, default_jobs())


def service_context() -> Any:
    """Page workers of the service start from a fork server (Linux; spawn elsewhere): a clean
    process with the fingerprint code imported, so that a worker holds none of the service's
    sockets (the listening one, a PostgreSQL connection), is not forked from a process with
    threads, and exits when the service dies (its pipe closes)."""
    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["neardup.ingest.workers"])
        return ctx
    return multiprocessing.get_context("spawn")


class PagePool:
    """``size`` page worker processes, started on first use, replaced when they overrun."""

    def __init__(self, config: FingerprintConfig, metrics: Metrics, size: int = DEFAULT_PAGE_WORKERS,
                 timeout: float = DEFAULT_PAGE_TIMEOUT) -> None:
        """A pool for pages fingerprinted with ``config``, each within ``timeout`` seconds."""
        self.config = config
        self.metrics = metrics
        self.size = max(1, size)
        self.timeout = timeout
        self._idle: asyncio.Queue[PageWorker] | None = None
        self._all: list[PageWorker] = []
        self._start_lock = threading.Lock()
        self._closed = False

    def _new_worker(self) -> PageWorker:
        """Start one worker process (it says when it is ready)."""
        worker = PageWorker(service_context(), self.config, typed_result)
        self._all.append(worker)
        return worker

    def _started(self) -> asyncio.Queue[PageWorker]:
        """The queue of idle workers, the workers started on first use."""
        with self._start_lock:
            if self._idle is None:
                idle: asyncio.Queue[PageWorker] = asyncio.Queue()
                for _ in range(self.size):
                    idle.put_nowait(self._new_worker())
                self._idle = idle
            return self._idle

    async def start(self) -> None:
        """Start the workers now (at application start-up) rather than on the first page."""
        await run_in_threadpool(self._started)

    def _run(self, worker: PageWorker, url: str, content: bytes | str,
             headers: Mapping[str, str] | None) -> tuple[PageWorker, Any]:
        """In a thread: the worker's result; a fresh worker in its place when it overran or died."""
        try:
            result = worker.run(url, content, dict(headers) if headers else None, self.timeout)
        except PageTimeoutError as exc:
            self.metrics.page_timeouts.inc()
            return self._replace(worker), exc
        except PageWorkerError as exc:
            return self._replace(worker), exc
        if not worker.alive():
            return self._replace(worker), result
        return worker, result

    def _replace(self, worker: PageWorker) -> PageWorker:
        """Kill ``worker`` and start another in its place."""
        self.metrics.worker_restarts.inc()
        worker.kill()
        if worker in self._all:
            self._all.remove(worker)
        return self._new_worker()

    async def fingerprint(self, url: str, content: bytes | str, headers: Mapping[str, str] | None) -> Fingerprint:
        """The page's fingerprint with the pool's config; the library's exception for a page
        that cannot be read; :class:`PageTimeoutError` past the limit."""
        if self._closed:
            raise NeardupError("the service is shutting down")
        idle = self._idle if self._idle is not None else await run_in_threadpool(self._started)
        worker = await idle.get()
        try:
            worker, result = await run_in_threadpool(self._run, worker, url, content, headers)
        finally:
            idle.put_nowait(worker)
        if isinstance(result, Exception):
            raise result
        _, fp, message = result
        if fp is None:
            raise_typed(message or "InputError: the page could not be read")
        assert fp is not None
        return fp

    def close(self) -> None:
        """Stop every worker."""
        self._closed = True
        for worker in self._all:
            worker.kill()
        self._all.clear()

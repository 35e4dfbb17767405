"""What every route shares: the Detector, the decision lock, the group commits of single
adds, the page workers and the metrics (:class:`Service`, one per app), reached through FastAPI's ``Depends``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from neardup.detector.core import Detector
from neardup.service.group_commit import GroupCommit
from neardup.service.metrics import Metrics, StoreSnapshot
from neardup.service.pages import PagePool

T = TypeVar("T")


class Service:
    """One shared Detector behind one decision lock (writes and index reads serialised), the
    page worker pool and the metrics."""

    def __init__(self, detector: Detector, pool: PagePool, metrics: Metrics, stats_interval: float) -> None:
        """The shared state of one app."""
        self.detector = detector
        self.lock = threading.Lock()
        self.pool = pool
        self.metrics = metrics
        self.snapshot = StoreSnapshot(metrics, detector, self.lock, stats_interval)
        self.commits = GroupCommit(detector, self.locked)
        """single adds, coalesced into group commits"""

    async def locked(self, fn: Callable[..., T], *args: Any, inline: bool = True, **kwargs: Any) -> T:
        """Run ``fn`` under the decision lock: inline on the event loop when the lock is free
        and ``inline`` (a fingerprint decision takes well under a millisecond, and a thread
        hop costs about as much), else in the thread pool."""
        if inline and self.lock.acquire(blocking=False):
            try:
                return fn(*args, **kwargs)
            finally:
                self.lock.release()

        def wait_and_run() -> T:
            """In a thread: wait for the lock, then run."""
            with self.lock:
                return fn(*args, **kwargs)
        return await run_in_threadpool(wait_and_run)


async def get_service(request: Request) -> Service:
    """The app's :class:`Service` (a coroutine: FastAPI runs it on the event loop, no thread hop)."""
    service: Service = request.app.state.service
    return service


async def get_detector(request: Request) -> Detector:
    """The app's Detector."""
    detector: Detector = request.app.state.service.detector
    return detector


ServiceDep = Annotated[Service, Depends(get_service)]
DetectorDep = Annotated[Detector, Depends(get_detector)]

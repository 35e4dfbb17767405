"""``/metrics``: Prometheus counters kept up to date as requests run (prometheus_client).

Nothing here takes the decision lock on a request's path: request, verdict and page-worker
counters are incremented where the work happens, and the store's figures (pages by status,
clusters) are a snapshot that a background thread refreshes at most every
``stats_interval`` seconds, however often ``/metrics`` is read (before: every scrape counted
the whole table under the decision lock, and 16 clients looping on ``/metrics`` raised a
fingerprint check's p50 from 19 ms to 2 s).

Under ``neardup serve --workers N`` the workers share their counters through
prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by
:func:`neardup.service.serve_workers`): any worker's ``/metrics`` answers for all of them.
Labels come from bounded sets (route templates, HTTP codes, verdict statuses), never from
what clients send.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

if TYPE_CHECKING:
    from neardup.detector.core import Detector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_STATS_INTERVAL = 10.0
DEFAULT_MAX_AGE = 1.0
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
log = logging.getLogger("neardup.service")
disable_created_metrics()  # no ``_created`` series: half the text, nothing a dashboard reads


def multiprocess_dir() -> str | None:
    """The folder of prometheus_client's multiprocess mode, when it is on."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


class Metrics:
    """The service's metrics, in a registry of their own (several apps in one process do not
    mix), or in the shared multiprocess files under ``--workers``."""

    MAX_SERIES = 2000  # a safety net: routes x codes stays far below it

    def __init__(self) -> None:
        """The metrics, in this process's registry or the multiprocess files."""
        self.multiprocess = multiprocess_dir() is not None
        self.registry = CollectorRegistry()
        reg = None if self.multiprocess else self.registry
        if self.multiprocess:
            MultiProcessCollector(self.registry)
        self.requests = Counter("neardup_requests", "HTTP requests by route template and status code.",
                                ["route", "code"], registry=reg)
        self.seconds = Histogram("neardup_request_seconds", "Time spent answering requests, by route template.",
                                 ["route"], registry=reg, buckets=BUCKETS)
        self.inflight = Gauge("neardup_requests_in_flight", "Requests being worked on.", registry=reg,
                              multiprocess_mode="livesum")
        self.verdicts = Counter("neardup_verdicts", "Verdicts given, by status and operation (add or check).",
                                ["op", "status"], registry=reg)
        self.page_timeouts = Counter("neardup_page_timeouts",
                                     "Pages over the per-page time limit (their worker process was replaced).",
                                     registry=reg)
        self.worker_restarts = Counter("neardup_page_worker_restarts",
                                       "Page worker processes replaced (over the time limit, or died).", registry=reg)
        self.pages = Gauge("neardup_pages", "Stored pages by their last verdict (a snapshot, see "
                           "neardup_store_snapshot_age_seconds).", ["status"], registry=reg,
                           multiprocess_mode="mostrecent")
        self.clusters = Gauge("neardup_clusters", "Stored clusters (a snapshot).", registry=reg,
                              multiprocess_mode="mostrecent")
        self.snapshot_time = Gauge("neardup_store_snapshot_timestamp_seconds",
                                   "When the store figures were last counted (Unix time).", registry=reg,
                                   multiprocess_mode="mostrecent")
        self._series: set[tuple[str, int]] = set()
        self._series_lock = threading.Lock()
        self._rendered = (-1e9, b"")

    def observe(self, route: str, code: int, seconds: float) -> None:
        """Count one answered request."""
        with self._series_lock:
            if (route, code) not in self._series:
                if len(self._series) >= self.MAX_SERIES:
                    route, code = "other", 0
                else:
                    self._series.add((route, code))
        self.requests.labels(route, str(code)).inc()
        self.seconds.labels(route).observe(seconds)

    def verdict(self, op: str, status: str) -> None:
        """Count one verdict (``op``: add or check)."""
        self.verdicts.labels(op, status).inc()

    def store_figures(self, stats: dict[str, Any]) -> None:
        """Set the store gauges from :meth:`Detector.stats`."""
        for key, value in stats.items():
            if key not in ("pages", "clusters"):
                self.pages.labels(key).set(value)
        self.clusters.set(stats.get("clusters", 0))
        self.snapshot_time.set(time.time())

    def process_exits(self) -> None:
        """Under ``--workers``: this worker's live gauges (requests in flight) leave the sum."""
        if self.multiprocess:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid())

    def render(self, max_age: float = 0.0) -> bytes:
        """The Prometheus text format, rendered at most once per ``max_age`` seconds (a scrape
        every 15 s sees fresh counts; 16 clients looping on /metrics cost one render a second,
        not one per request)."""
        at, text = self._rendered
        now = time.monotonic()
        if now - at >= max_age or not text:
            text = generate_latest(self.registry)
            self._rendered = (now, text)
        return text


class StoreSnapshot:
    """The store's figures for ``/metrics``, counted by a background thread (which waits for
    the decision lock like any writer) at most every ``interval`` seconds, and only while
    ``/metrics`` is read: a scrape never waits for the lock, nor for the count."""

    def __init__(self, metrics: Metrics, detector: "Detector", lock: threading.Lock, interval: float) -> None:
        """Figures of ``detector`` counted under ``lock`` at most every ``interval`` s."""
        self.metrics = metrics
        self.detector = detector
        self.lock = lock
        self.interval = interval
        self.counted = 0.0
        self.running = threading.Lock()

    def count_now(self) -> None:
        """Count under the decision lock (blocking: at start-up, and in the refresh thread)."""
        try:
            with self.lock:
                stats = self.detector.stats()
            self.metrics.store_figures(stats)
        except Exception:  # noqa: BLE001 - a store error: the figures stay as they were
            log.warning("could not count the store for /metrics", exc_info=True)
        finally:
            self.counted = time.monotonic()

    def _refresh(self) -> None:
        """Count, then let the next refresh start."""
        try:
            self.count_now()
        finally:
            self.running.release()

    def maybe_refresh(self) -> None:
        """Start a refresh in the background when the figures are older than ``interval``
        (and none is running); never blocks."""
        if time.monotonic() - self.counted < self.interval or not self.running.acquire(blocking=False):
            return
        threading.Thread(target=self._refresh, name="neardup-metrics-count", daemon=True).start()

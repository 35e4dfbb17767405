"""Scrapy integration: decide before the fetch, fingerprint HTML responses, drop or tag duplicates.

Enable it in a project's ``settings.py`` (``pip install 'neardup[scrapy]'``)::

    DOWNLOADER_MIDDLEWARES = {"neardup.scrapy.NeardupDownloaderMiddleware": 950}
    SPIDER_MIDDLEWARES = {"neardup.scrapy.NeardupSpiderMiddleware": 50}   # for NEARDUP_FOLLOW_DUPLICATES
    NEARDUP_DB = "crawl.db"              # or "postgresql://..." or "redis://..."; or NEARDUP_URL (the service)
    NEARDUP_ON_DUPLICATE = "drop"        # or "tag": response.meta["neardup"] holds the verdict

Settings:

- ``NEARDUP_ENABLED`` (default True): False raises ``NotConfigured`` (the middleware is off);
  so does a configuration with neither ``NEARDUP_DB`` nor ``NEARDUP_URL``.
- ``NEARDUP_DB``: a SQLite store file, a ``postgresql://`` or a ``redis://`` (``redis+cluster://``) URL
  (:meth:`Detector.open`);
  ``NEARDUP_URL`` / ``NEARDUP_TOKEN``: a ``neardup serve`` service (:class:`neardup.Client`).
- the detector's settings, every field of :class:`neardup.detector.settings.DetectorSettings` as
  ``NEARDUP_<FIELD>``: ``NEARDUP_K``, ``NEARDUP_VERIFY``, ``NEARDUP_METHOD`` (``simhash`` |
  ``minhash`` | ``both``), ``NEARDUP_THRESHOLD``, ``NEARDUP_CONTAINMENT``,
  ``NEARDUP_CANONICAL``, ``NEARDUP_EXTRACTOR`` (``fast`` | ``accurate`` | ``full``),
  ``NEARDUP_MIN_TOKENS``, ``NEARDUP_MAX_BYTES`` (these three for a new store),
  ``NEARDUP_KEEP_CHANGES``.
- ``NEARDUP_ON_DUPLICATE``: ``drop`` (default: ``IgnoreRequest``, the spider never sees the
  page) or ``tag`` (the page goes on with ``response.meta["neardup"]``, the verdict's dict). A
  duplicate that is its cluster's canonical copy (the URL its copies name with rel=canonical)
  is never dropped, and its links are followed.
- ``NEARDUP_FOLLOW_DUPLICATES`` (default False): with ``tag``, whether requests the spider
  yields from a duplicate page are kept (needs :class:`NeardupSpiderMiddleware`; with ``drop``
  the spider never sees duplicates, so their links are never followed).
- ``NEARDUP_SKIP_BEFORE_FETCH`` (default True): ask :meth:`Detector.should_fetch` in
  ``process_request`` and ignore requests it answers ``skip`` (known duplicates, learned URL
  rules, host budget); ``NEARDUP_MAX_AGE`` (seconds: skip known URLs fetched more recently),
  ``NEARDUP_HOST_MAX_DUPLICATE_RATE`` / ``NEARDUP_HOST_MIN_PAGES`` (the host budget, off by
  default). A URL that the store already holds from this crawl (the same page under another
  spelling: tracking parameters, case, default port...) is skipped too (``this-crawl``),
  unless the request has ``dont_filter``. A copy skipped as ``known-duplicate`` or by a
  ``rule`` is replaced by a request for its cluster's canonical URL (stat
  ``neardup/canonical_scheduled``; Scrapy's duplicate filter drops it when it was requested
  already), so a recrawl from the seed reaches every page the first crawl kept.
- ``NEARDUP_CONDITIONAL`` (default False): a request for a URL the store holds from an
  earlier crawl gets ``If-Modified-Since`` its last fetch (unless it has validators of its
  own), so an unchanged page costs the server a 304 and no body. Whoever sent the validators
  (this setting, the spider, ``HttpCacheMiddleware``), a 304 of a stored URL is recorded as an
  unchanged fetch (:meth:`Detector.add_revisit`: its history, change rate and next fetch;
  stats ``neardup/not_modified`` and ``neardup/unchanged``; one of a URL never stored:
  ``neardup/not_modified_not_stored``). A 304 has no links: leave this off where the crawl
  reaches pages only through the links of pages it refetches (the due URLs, scheduled when
  the crawl runs out of requests, reach the rest).
- ``NEARDUP_THREADS`` (default 2): the middleware's worker threads (see below).
- ``NEARDUP_PROCESS`` (default True): the detector in a process of its own (see below).
- ``NEARDUP_SCHEDULE_DUE`` (default True): when the crawl runs out of requests, the store's
  due URLs (:meth:`neardup.Detector.due`: originals and canonicals not fresh) are scheduled,
  :data:`DUE_BATCH` at a time (stat ``neardup/due_scheduled``; Scrapy's duplicate filter drops
  those requested already): a recrawl reaches the pages behind pages skipped as ``fresh``,
  whose links it never saw.
- ``NEARDUP_GC_FREEZE`` (default True): ``gc.freeze()`` once when the middleware is built,
  before the crawl: the objects loaded by then (Scrapy, neardup and its numba kernels) are
  never scanned by the cyclic garbage collector again, whose full collections otherwise
  stall the reactor thread about twice as long as without neardup loaded.

Only HTML responses with status 200 are fingerprinted (``Content-Type`` with ``html``, or an
``HtmlResponse`` without one); everything else passes untouched. Requests with
``meta["neardup_ignore"]`` are left alone. Stats: ``neardup/new``, ``neardup/exact``,
``neardup/near``, ``neardup/partial``, ``neardup/empty`` (the decisions about URLs fetched
for the first time), ``neardup/unchanged`` and ``neardup/changed`` (re-fetches of stored URLs,
which keep their first decision: an unchanged or changed page is never its own duplicate),
``neardup/error`` (a page the detector refused or failed on, passed on untouched),
``neardup/dropped``, ``neardup/tagged``, ``neardup/skipped_before_fetch`` (and
``.../<reason>``), ``neardup/not_html``, ``neardup/not_200``, ``neardup/links_not_followed``,
``neardup/should_fetch_error`` (a ``should_fetch`` that failed: the request goes on).

The crawl never waits on neardup: ``process_request`` and ``process_response`` are
coroutines (Scrapy >= 2.13; under the asyncio reactor, Scrapy's default, they await asyncio
futures, under Twisted's other reactors Deferreds; both tested) and the detector's work runs
elsewhere (:class:`NeardupDownloaderMiddleware`): by default in a process of its own, which
fingerprints and stores the pages, the responses that arrive while it works together in one
transaction; with ``NEARDUP_PROCESS = False`` in threads (``NEARDUP_THREADS`` fingerprint,
one more makes the store calls, in the order the responses arrive: the extractor and the
numba kernels release the GIL only in part, so these threads slow the reactor down more
than the process does); with ``NEARDUP_URL``, threads make the service calls. A store that
cannot be opened stops the crawl at its start; after that, any error inside neardup (not
only a :class:`NeardupError`; a detector process that died too) leaves the page or request
untouched and is counted.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from email.utils import formatdate
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from neardup.detector.core import Detector
from neardup.detector.settings import DetectorSettings, setting_names
from neardup.errors import NeardupError, NotStoredError
from neardup.fingerprint.core import warm_up
from neardup.model import DUPLICATE_STATUSES

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

logger = logging.getLogger("neardup.scrapy")


def _scrapy() -> Any:
    """Scrapy, imported when a middleware is built (this module imports without it)."""
    try:
        import scrapy
        import scrapy.exceptions
        import scrapy.http
        import scrapy.signals
    except ImportError:  # pragma: no cover - the extra is missing
        raise ImportError("neardup.scrapy needs Scrapy: pip install 'neardup[scrapy]'") from None
    return scrapy

ACTIONS = ("drop", "tag")
#: Default ``NEARDUP_THREADS``: fingerprinting workers (or service calls in flight).
DEFAULT_THREADS = 2
#: At most this many pages in one transaction of the detector process (responses that arrive
#: while it is busy wait and go together: one commit for all).
MAX_BATCH = 32
#: Seconds to wait for the detector process to open its store (and to close it).
PROCESS_START_TIMEOUT = 300.0
#: due URLs scheduled at a time when the crawl runs out of requests (``NEARDUP_SCHEDULE_DUE``)
DUE_BATCH = 1000

_T = TypeVar("_T")


async def _wait(future: Future[_T]) -> _T:
    """A :class:`concurrent.futures.Future` awaited without blocking the reactor thread: as an
    :mod:`asyncio` future when an asyncio loop runs (the asyncio reactor, or Scrapy without
    a reactor), else as a Twisted ``Deferred`` fired in the reactor thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another Twisted reactor: coroutines there await Deferreds
        pass
    else:
        return await asyncio.wrap_future(future)
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    d: Deferred[_T] = Deferred()

    def fire(done: Future[_T]) -> None:
        exc = done.exception()
        if exc is not None:
            d.errback(exc)
        else:
            d.callback(done.result())

    future.add_done_callback(lambda done: reactor.callFromThread(fire, done))  # type: ignore[attr-defined]
    return await d


async def _in_thread(pool: Executor, fn: Callable[[], _T]) -> _T:
    """``fn()`` run in ``pool`` (threads or a process), awaited (:func:`_wait`)."""
    return await _wait(pool.submit(fn))


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, NeardupError) else f"{type(exc).__name__}: {exc}"


def _is_html(response: Response) -> bool:
    ctype = response.headers.get(b"Content-Type")
    if ctype is None:
        return isinstance(response, _scrapy().http.HtmlResponse)
    return b"html" in ctype.lower()


def open_detector(settings: Any) -> tuple[Any, bool]:
    """The detector the settings name (a :class:`Detector` or a :class:`neardup.Client`),
    and whether the middleware opened it (and closes it with the spider)."""
    url = settings.get("NEARDUP_URL")
    if url:
        from neardup.client import Client

        return Client(url, token=settings.get("NEARDUP_TOKEN") or None), True
    # every decision setting, as NEARDUP_K, NEARDUP_VERIFY, NEARDUP_EXTRACTOR... (DetectorSettings)
    det = Detector.open(settings.get("NEARDUP_DB"), settings=DetectorSettings.from_env(settings))
    return det, True


#: The detector of a detector process (``NEARDUP_PROCESS``), opened by :func:`_process_open`.
_PROCESS_DETECTOR: Any = None


def _process_open(settings: dict[str, Any]) -> None:
    """In the detector process: open the detector the settings name and load the
    fingerprint kernels (a first fingerprint), before any page arrives."""
    global _PROCESS_DETECTOR
    _PROCESS_DETECTOR = open_detector(settings)[0]
    warm_up(_PROCESS_DETECTOR.config)


def _process_call(name: str, *args: Any, **kwargs: Any) -> Any:
    """In the detector process: one of its detector's methods (``add``, ``should_fetch``,
    ``close``)."""
    if _PROCESS_DETECTOR is None:  # pragma: no cover - opening failed, from_crawler raised
        raise RuntimeError("neardup: the detector process has no detector")
    return getattr(_PROCESS_DETECTOR, name)(*args, **kwargs)


def _process_add_batch(items: list[tuple[str, bytes, dict[str, str] | None]]) -> list[Any]:
    """In the detector process: fingerprint and add pages, the adds in one transaction
    (:meth:`Detector.add_fingerprints`: later pages may match earlier ones, as one by one).
    Each result is the page's :class:`Verdict`, or a string: why it failed."""
    assert _PROCESS_DETECTOR is not None
    results: list[Any] = [None] * len(items)
    good: list[tuple[int, str, Any]] = []
    for i, (url, body, headers) in enumerate(items):
        try:
            good.append((i, url, _PROCESS_DETECTOR.fingerprint(body, url, headers)))
        except Exception as exc:  # this page only
            results[i] = _why(exc)
    if good:
        try:
            verdicts = _PROCESS_DETECTOR.add_fingerprints([(url, fp) for _, url, fp in good])
        except Exception as exc:  # the transaction: every page of it
            verdicts = [_why(exc)] * len(good)
        for (i, _, _), v in zip(good, verdicts):
            results[i] = v.error or "error" if getattr(v, "status", None) == "error" else v
    return results


class DetectorProcessError(NeardupError):
    """A page the detector process could not fingerprint or add (its message: why)."""


#: The settings a detector process is opened with: the store and every decision setting.
SETTINGS = ("NEARDUP_DB", *(f"NEARDUP_{name.upper()}" for name in setting_names()))


class NeardupDownloaderMiddleware:
    """Downloader middleware: :meth:`process_request` asks ``should_fetch``,
    :meth:`process_response` adds every HTML page and drops or tags duplicates.

    Both are coroutines that hand the detector's work to workers of the middleware's own,
    so the reactor thread never waits on a fingerprint, the store or the service. Three
    arrangements (:attr:`mode`):

    - ``process`` (``NEARDUP_DB`` with ``NEARDUP_PROCESS``, the default): the detector lives
      in one process of its own (spawned; ``settings`` names it), which fingerprints each page
      and makes every store call, in the order the responses arrive: the crawl's process
      only pickles the page (the fingerprint kernels and the extractor hold the GIL for much
      of their work, so threads of the crawl's process would slow the reactor down);
    - ``local`` (a :class:`Detector` passed in, or ``NEARDUP_PROCESS = False``): pages are
      fingerprinted by ``threads`` worker threads and every store call runs in one store
      thread;
    - ``client`` (a :class:`neardup.Client`: ``NEARDUP_URL``): the service fingerprints;
      ``threads`` worker threads make the HTTP calls.

    The coroutines await an :mod:`asyncio` future under the asyncio reactor (Scrapy's
    default) or without a reactor, and a Twisted ``Deferred`` under any other reactor."""

    def __init__(self, detector: Any, stats: Any, *, on_duplicate: str = "drop", skip_before_fetch: bool = True,
                 max_age: float | None = None, host_max_duplicate_rate: float | None = None,
                 host_min_pages: int = 20, owns_detector: bool = False, threads: int = DEFAULT_THREADS,
                 settings: Mapping[str, Any] | None = None, conditional: bool = False) -> None:
        NotConfigured = _scrapy().exceptions.NotConfigured
        if on_duplicate not in ACTIONS:
            raise NotConfigured(f"NEARDUP_ON_DUPLICATE must be one of {', '.join(ACTIONS)}, got {on_duplicate!r}")
        if threads < 1:
            raise NotConfigured(f"NEARDUP_THREADS must be at least 1, got {threads}")
        if (detector is None) == (settings is None):
            raise TypeError("pass either a detector or the settings of a detector process")
        self.detector = detector
        self.stats = stats
        self.on_duplicate = on_duplicate
        self.skip_before_fetch = skip_before_fetch
        self.max_age = max_age
        self.host_max_duplicate_rate = host_max_duplicate_rate
        self.host_min_pages = host_min_pages
        self.conditional = conditional
        self.owns_detector = owns_detector
        self.threads = threads
        self.started = time.time()  # a URL fetched since is not fetched again in this crawl
        self.crawler: Any = None  # set where the due URLs are scheduled (NEARDUP_SCHEDULE_DUE)
        self._due_after: str | None = None  # the due URLs' cursor
        self._due_done = False
        self._due_task: Any = None  # the Deferred of the page of due URLs being scheduled
        self._workers: Executor | None = None
        self._store: Executor
        self._lock = threading.Lock()
        self._pending: list[tuple[str, bytes, dict[str, str] | None, Future[Any]]] = []
        self._adding = False  # a batch is in the detector process
        self.batches = 0  # transactions sent to the detector process
        if settings is not None:
            self.mode = "process"
            self._store = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
            self._opened = self._store.submit(_process_open, dict(settings))
        else:
            self.mode = "local" if isinstance(detector, Detector) else "client"
            self._workers = ThreadPoolExecutor(threads, thread_name_prefix="neardup")
            self._store = (ThreadPoolExecutor(1, thread_name_prefix="neardup-store") if self.mode == "local"
                           else self._workers)

    @classmethod
    def from_crawler(cls, crawler: Any) -> "NeardupDownloaderMiddleware":
        s = crawler.settings
        NotConfigured = _scrapy().exceptions.NotConfigured
        if not s.getbool("NEARDUP_ENABLED", True):
            raise NotConfigured("NEARDUP_ENABLED is off")
        if not s.get("NEARDUP_DB") and not s.get("NEARDUP_URL"):
            raise NotConfigured("set NEARDUP_DB (a store file or server URL) or NEARDUP_URL (the service)")
        in_process = not s.get("NEARDUP_URL") and s.getbool("NEARDUP_PROCESS", True)
        detector, owns = (None, True) if in_process else open_detector(s)
        rate = s.get("NEARDUP_HOST_MAX_DUPLICATE_RATE")
        max_age = s.get("NEARDUP_MAX_AGE")
        try:
            mw = cls(detector, crawler.stats, on_duplicate=s.get("NEARDUP_ON_DUPLICATE", "drop"),
                     skip_before_fetch=s.getbool("NEARDUP_SKIP_BEFORE_FETCH", True),
                     max_age=float(max_age) if max_age not in (None, "") else None,
                     host_max_duplicate_rate=float(rate) if rate not in (None, "") else None,
                     host_min_pages=s.getint("NEARDUP_HOST_MIN_PAGES", 20), owns_detector=owns,
                     threads=s.getint("NEARDUP_THREADS", DEFAULT_THREADS),
                     conditional=s.getbool("NEARDUP_CONDITIONAL", False),
                     settings={k: s.get(k) for k in SETTINGS if s.get(k) is not None} if in_process else None)
        except BaseException:
            if detector is not None:
                detector.close()
            raise
        if mw.mode == "process":
            try:  # a store that cannot be opened stops the crawl before it starts, as in process
                mw._opened.result(timeout=PROCESS_START_TIMEOUT)
            except BaseException:
                mw._store.shutdown(wait=False, cancel_futures=True)
                raise
        crawler.signals.connect(mw.spider_closed, signal=_scrapy().signals.spider_closed)
        if s.getbool("NEARDUP_SCHEDULE_DUE", True):
            mw.crawler = crawler
            crawler.signals.connect(mw.spider_idle, signal=_scrapy().signals.spider_idle)
        if s.getbool("NEARDUP_GC_FREEZE", True):
            # before the crawl: what is loaded by now (Scrapy, neardup's numba kernels: about as
            # many objects again) is never scanned by a collection again, which halves the
            # collector's pauses in the reactor thread (docs/benchmarks.md)
            gc.collect()
            gc.freeze()
        return mw

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``detector.<name>(*args, **kwargs)`` in the store thread or the detector process."""
        if self.mode == "process":
            return await _in_thread(self._store, partial(_process_call, name, *args, **kwargs))
        return await _in_thread(self._store, partial(getattr(self.detector, name), *args, **kwargs))

    async def process_request(self, request: Request, spider: Any = None) -> Request | None:
        """Ignore the request (``IgnoreRequest``) when ``should_fetch`` answers skip, or
        request the canonical copy it names instead; a failing ``should_fetch`` lets the
        request through (stat ``neardup/should_fetch_error``)."""
        if not self.skip_before_fetch or request.meta.get("neardup_ignore"):
            return None
        try:
            decision = await self._call("should_fetch", request.url, max_age=self.max_age,
                                        host_max_duplicate_rate=self.host_max_duplicate_rate,
                                        host_min_pages=self.host_min_pages)
        except Exception as exc:  # neardup never stops the crawl: the request goes on
            self.stats.inc_value("neardup/should_fetch_error")
            logger.warning("neardup: should_fetch failed for %s: %s", request.url, _why(exc))
            return None
        reason = decision.reason
        if decision.fetch:
            fetched = getattr(decision, "fetched_at", None)
            if reason != "known" or request.dont_filter or fetched is None or fetched < self.started:
                if self.conditional and reason == "known" and fetched is not None:
                    _make_conditional(request, fetched)
                return None
            # the URL, as the store keys it (tracking parameters dropped...), was fetched
            # during this crawl already: Scrapy's duplicate filter compares URLs as written
            reason = "this-crawl"
        self.stats.inc_value("neardup/skipped_before_fetch")
        self.stats.inc_value(f"neardup/skipped_before_fetch/{reason}")
        why = reason + (f" ({', '.join(decision.rules)})" if decision.rules else "")
        logger.debug("neardup: skipped before the fetch: %s: %s -> %s", request.url, why,
                     decision.known_url or decision.canonical_url or "")
        instead = _instead(request, decision)
        if instead is not None:  # the copy to fetch in its place (the scheduler drops it if seen)
            self.stats.inc_value("neardup/canonical_scheduled")
            return instead
        raise _scrapy().exceptions.IgnoreRequest(f"neardup: {why}: {request.url}")

    async def _verdict(self, url: str, body: bytes, headers: dict[str, str] | None) -> Any:
        if self.mode == "local":
            assert self._workers is not None
            fp = await _in_thread(self._workers, partial(self.detector.fingerprint, body, url, headers))
            return await self._call("add_fingerprint", url, fp)
        if self.mode == "process":
            return await _wait(self._queue_add(url, body, headers))
        return await self._call("add", url, body, headers=headers)

    def _queue_add(self, url: str, body: bytes, headers: dict[str, str] | None) -> Future[Any]:
        """The page's verdict to come: added alone when the detector process is idle, else
        with the pages that arrive while it works (group commit, :data:`MAX_BATCH`)."""
        future: Future[Any] = Future()
        with self._lock:
            self._pending.append((url, body, headers, future))
            if self._adding:
                return future
            self._adding = True
        self._flush()
        return future

    def _flush(self) -> None:
        """Send the waiting pages to the detector process (any thread)."""
        while True:
            with self._lock:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                if not batch:
                    self._adding = False
                    return
                self.batches += 1
            try:
                job = self._store.submit(_process_add_batch, [(u, b, h) for u, b, h, _ in batch])
            except Exception as exc:  # the process is gone or shut down: these pages fail, the crawl goes on
                for *_, future in batch:
                    future.set_exception(exc)
                continue
            job.add_done_callback(partial(self._added, batch))
            return

    def _added(self, batch: list[tuple[str, bytes, dict[str, str] | None, Future[Any]]], job: Future[Any]) -> None:
        try:
            results = job.result()
        except Exception as exc:  # the process died (BrokenProcessPool): every page of the batch
            results = [exc] * len(batch)
        for (*_, future), result in zip(batch, results):
            if isinstance(result, BaseException):
                future.set_exception(result)
            elif isinstance(result, str):
                future.set_exception(DetectorProcessError(result))
            else:
                future.set_result(result)
        self._flush()

    async def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        """Add an HTML 200 response; drop (``IgnoreRequest``) or tag (``request.meta["neardup"]``)
        a duplicate. A page neardup cannot read or store passes untouched (stat ``neardup/error``)."""
        if request.meta.get("neardup_ignore"):
            return response
        if response.status == 304:
            await self._not_modified(request, response)
            return response
        if not _is_html(response):
            self.stats.inc_value("neardup/not_html")
            return response
        if response.status != 200:
            self.stats.inc_value("neardup/not_200")
            return response
        ctype = response.headers.get(b"Content-Type")
        headers = {"Content-Type": ctype.decode("latin-1")} if ctype else None
        try:
            verdict = await self._verdict(response.url, response.body, headers)
        except Exception as exc:  # neardup never stops the crawl: the page goes on untagged
            self.stats.inc_value("neardup/error")
            logger.warning("neardup: page not added: %s: %s", response.url, _why(exc))
            return response
        version = getattr(verdict, "version", None)  # a re-fetch of a stored URL: "unchanged" or "changed"
        self.stats.inc_value(f"neardup/{version}" if version else f"neardup/{verdict.status}")
        request.meta["neardup"] = verdict.to_dict()
        if not verdict.is_duplicate or verdict.is_canonical:  # a canonical copy is kept, its links followed
            return response
        if self.on_duplicate == "drop":
            self.stats.inc_value("neardup/dropped")
            logger.debug("neardup: dropped %s duplicate %s of %s", verdict.status, response.url, verdict.canonical_url)
            raise _scrapy().exceptions.IgnoreRequest(
                f"neardup: {verdict.status} duplicate of {verdict.match_url}: {response.url}")
        self.stats.inc_value("neardup/tagged")
        return response

    async def _not_modified(self, request: Request, response: Response) -> None:
        """A 304 to a conditional request: the stored URL unchanged at this fetch
        (:meth:`Detector.add_revisit`); a URL the store does not hold is counted, not added."""
        try:
            verdict = await self._call("add_revisit", response.url)
        except NotStoredError:
            self.stats.inc_value("neardup/not_modified_not_stored")
            return
        except Exception as exc:  # neardup never stops the crawl
            self.stats.inc_value("neardup/error")
            logger.warning("neardup: revisit not recorded: %s: %s", response.url, _why(exc))
            return
        self.stats.inc_value("neardup/not_modified")
        self.stats.inc_value("neardup/unchanged")
        request.meta["neardup"] = verdict.to_dict()

    def close(self) -> None:
        """Wait for the workers (nothing is pending once the spider closed), then close the
        detector if the middleware opened it (in the detector process: then it exits)."""
        if self._workers is not None:
            self._workers.shutdown(wait=True)
        if self.mode == "process":
            try:
                self._store.submit(_process_call, "close").result(timeout=PROCESS_START_TIMEOUT)
            except Exception as exc:  # a broken process: nothing left to close
                logger.warning("neardup: closing the detector process: %s", _why(exc))
        self._store.shutdown(wait=True)
        if self.owns_detector and self.detector is not None:
            self.detector.close()

    def spider_idle(self, spider: Any = None) -> None:
        """The crawl ran out of requests: schedule the next page of the store's due URLs
        (``NEARDUP_SCHEDULE_DUE``) and keep the spider open while any may be left."""
        if self._due_done or self.crawler is None:
            return
        if self._due_task is None or self._due_task.called:
            from scrapy.utils.defer import deferred_from_coro

            self._due_task = deferred_from_coro(self._schedule_due())
        raise _scrapy().exceptions.DontCloseSpider("neardup: scheduling the store's due URLs")

    async def _schedule_due(self) -> None:
        try:
            urls = await self._call("due", limit=DUE_BATCH, after=self._due_after)
        except Exception as exc:  # neardup never stops the crawl: no due URLs then
            self._due_done = True
            self.stats.inc_value("neardup/due_error")
            logger.warning("neardup: due URLs failed: %s", _why(exc))
            return
        self._due_done = len(urls) < DUE_BATCH
        if urls:
            self._due_after = urls[-1]
        for url in urls:
            self.crawler.engine.crawl(_scrapy().Request(url))
        self.stats.inc_value("neardup/due_scheduled", len(urls))

    def spider_closed(self, spider: Any = None) -> None:
        keys = ("new", "exact", "near", "skipped_before_fetch", "error")
        logger.info("neardup: %s", ", ".join(f"{k} {self.stats.get_value('neardup/' + k, 0)}" for k in keys))
        self.close()


def _make_conditional(request: Request, fetched_at: float) -> None:
    """Ask the server for the page only if it changed since ``fetched_at`` (``If-Modified-Since``),
    unless the request is conditional already (its own validators win)."""
    if b"If-Modified-Since" not in request.headers and b"If-None-Match" not in request.headers:
        request.headers[b"If-Modified-Since"] = formatdate(fetched_at, usegmt=True)


def _from_duplicate(response: Response) -> bool:
    """The response is a duplicate page (and not its cluster's canonical copy)."""
    verdict = response.meta.get("neardup") if response is not None else None
    return (isinstance(verdict, dict) and verdict.get("status") in DUPLICATE_STATUSES
            and (verdict.get("page_id") is None or verdict.get("page_id") != verdict.get("canonical_id")))


def _instead(request: Request, decision: Any) -> Request | None:
    """The request for the canonical copy a skipped URL names (``known-duplicate``, ``rule``),
    when that is another URL and the request is not already one of these (no chains); None
    otherwise. It goes through the scheduler's duplicate filter: seen this crawl, it is dropped."""
    target = getattr(decision, "canonical_url", None)
    if (decision.reason not in ("known-duplicate", "rule") or not target or request.meta.get("neardup_instead_of")
            or target in (request.url, getattr(decision, "key", None))):
        return None
    return request.replace(url=target, meta={**request.meta, "neardup_instead_of": request.url})


class NeardupSpiderMiddleware:
    """Spider middleware: with ``NEARDUP_FOLLOW_DUPLICATES`` off (the default), drops the
    requests a spider yields from a page tagged as a duplicate (items pass)."""

    def __init__(self, stats: Any, follow_duplicates: bool = False) -> None:
        self.stats = stats
        self.follow_duplicates = follow_duplicates

    @classmethod
    def from_crawler(cls, crawler: Any) -> "NeardupSpiderMiddleware":
        s = crawler.settings
        if not s.getbool("NEARDUP_ENABLED", True):
            raise _scrapy().exceptions.NotConfigured("NEARDUP_ENABLED is off")
        return cls(crawler.stats, s.getbool("NEARDUP_FOLLOW_DUPLICATES", False))

    def _keep(self, response: Response, obj: Any) -> bool:
        if isinstance(obj, _scrapy().Request) and not self.follow_duplicates and _from_duplicate(response):
            self.stats.inc_value("neardup/links_not_followed")
            return False
        return True

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterable[Any]:
        for obj in result:
            if self._keep(response, obj):
                yield obj

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any],
                                          spider: Any = None) -> AsyncIterator[Any]:
        async for obj in result:
            if self._keep(response, obj):
                yield obj

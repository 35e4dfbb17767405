"""Crawlee for Python integration: decide before a link is queued, add each HTML page, drop or tag duplicates.

``pip install 'neardup[crawlee]'`` (and ``neardup[service]`` for the service); with any of
Crawlee's HTTP crawlers (``ParselCrawler``, ``BeautifulSoupCrawler``; ``HttpCrawler`` parses
no links: there, pass the URLs it finds to :meth:`NeardupCrawlee.filter_requests`)::

    from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
    from neardup.crawlee import NeardupCrawlee

    async def main() -> None:
        async with NeardupCrawlee.open("crawl.db") as nd:    # or "http://host:8080" (neardup serve), token=...
            crawler = ParselCrawler()

            @crawler.router.default_handler
            @nd.handler                                        # adds the page; a duplicate never reaches the handler
            async def handle(context: ParselCrawlingContext) -> None:
                await context.push_data({"url": context.request.url})
                await nd.enqueue_links(context)                # skipped URLs never become requests

            await crawler.run(await nd.filter_requests(["https://example.com/"]))
            print(dict(nd.stats))

Crawlee has no way to drop a request once it is queued but to fail it (raising in a
pre-navigation hook: a failed request, retried, in the crawler's statistics). So the
decision is made *before* the queue: :meth:`NeardupCrawlee.enqueue_links` extracts the page's
links as ``context.enqueue_links`` would (``context.extract_links``: the same selector,
strategy, include/exclude, ``transform_request_function``), asks
:meth:`Detector.should_fetch` about all of them at once, and adds only those to fetch
(``context.add_requests``); :meth:`NeardupCrawlee.filter_requests` does the same for start
URLs or any list of requests. A skipped URL is never a request: the crawler's statistics
count no failure for it. Skipped are known duplicates (``known-duplicate``), URLs a learned
rule maps to a known page (``rule``), hosts over their duplicate budget (``host-budget``),
pages fresh until their next expected change (``fresh``, or fetched less than ``max_age``
seconds ago) and URLs the store already holds from this crawl under another spelling
(``this-crawl``: ``?fbclid=...``; Crawlee's request keys drop only ``utm_*``). Where a skip
names the copy to keep (``canonical_url``, or the known page of a rule), that URL is queued
instead (stat ``canonical_enqueued``; Crawlee's request keys drop it when it was queued
already).

After the fetch, :meth:`NeardupCrawlee.add` (or the :meth:`NeardupCrawlee.handler`
decorator) adds each HTML response with status 200 (``Content-Type`` with ``html``, or none)
and keeps the verdict's dict in ``context.request.user_data["neardup"]``
(:meth:`NeardupCrawlee.verdict`). With ``on_duplicate="drop"`` (the default) the decorated
handler is not called for a duplicate (``exact`` or ``near``; not one that is its cluster's
canonical copy, the page its copies name with rel=canonical: that one is kept): the page is
neither stored nor followed; with ``"tag"`` it is called, and
:meth:`NeardupCrawlee.enqueue_links` follows no link of a duplicate unless
``follow_duplicates``. A re-fetch of a stored URL keeps its first
decision (``version``: ``unchanged`` or ``changed``): an article stays ``new``.

No neardup work runs on the event loop: the detector's work runs in threads of the
integration's own (with a :class:`Detector`: ``threads`` fingerprinting threads and one store
thread, which makes every store call in the order asked; with a :class:`neardup.Client`,
``threads`` threads make the HTTP calls), awaited as asyncio futures. An error inside
neardup (a failed ``should_fetch``, a page it cannot read, a store or service gone) never
raises into the crawl: the request is queued, the page passes untagged, and it is counted
(``should_fetch_error``, ``error``). Requests with ``user_data["neardup_ignore"]`` are left
alone.

Stats (:attr:`NeardupCrawlee.stats`, a :class:`collections.Counter`), as the Scrapy
middleware's without the ``neardup/`` prefix: ``new``, ``exact``, ``near``, ``partial``,
``empty`` (first fetches), ``unchanged``, ``changed`` (re-fetches), ``error``, ``dropped``,
``tagged``, ``not_html``, ``not_200``, ``skipped_before_fetch`` and
``skipped_before_fetch/<reason>``, ``canonical_enqueued``, ``links_not_followed``,
``should_fetch_error``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from neardup.detector.core import Detector
from neardup.detector.settings import DetectorSettings
from neardup.errors import ConfigError, NeardupError
from neardup.model import DEFAULT_HOST_MIN_PAGES, DUPLICATE_STATUSES, FetchDecision, Verdict

if TYPE_CHECKING:
    from crawlee import Request, RequestOptions, RequestTransformAction
    from crawlee._types import EnqueueLinksKwargs, JsonSerializable
    from crawlee.crawlers import HttpCrawlingContext, ParsedHttpCrawlingContext

logger = logging.getLogger("neardup.crawlee")

ACTIONS = ("drop", "tag")
#: Default ``threads``: fingerprinting threads (or service calls in flight).
DEFAULT_THREADS = 2
#: The skip reasons whose answer names the URL to fetch instead (``canonical_url``, else ``known_url``).
INSTEAD = ("known-duplicate", "rule")

_C = TypeVar("_C", bound="HttpCrawlingContext")
_T = TypeVar("_T")


def _request_class() -> Any:
    """Crawlee's ``Request``, imported on use (this module imports without Crawlee)."""
    try:
        from crawlee import Request
    except ImportError:  # pragma: no cover - the extra is missing
        raise ImportError("neardup.crawlee needs Crawlee for Python: pip install 'neardup[crawlee]'") from None
    return Request


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, NeardupError) else f"{type(exc).__name__}: {exc}"


def is_dropped_copy(verdict: Mapping[str, Any] | Verdict | None) -> bool:
    """A verdict (or its dict) of a duplicate that is not its cluster's canonical copy: the
    page a crawler drops and whose links it does not follow. A duplicate may be the canonical
    copy (the one its cluster's pages name with rel=canonical): it is kept.

    >>> is_dropped_copy({"status": "exact", "page_id": 2, "canonical_id": 1})
    True
    >>> is_dropped_copy(Verdict(status="near", url="https://a.example/", page_id=2, canonical_id=2))
    False
    """
    if verdict is None:
        return False
    if isinstance(verdict, Verdict):
        return verdict.is_duplicate and not verdict.is_canonical
    page = verdict.get("page_id")
    return verdict.get("status") in DUPLICATE_STATUSES and (page is None or page != verdict.get("canonical_id"))


class NeardupCrawlee:
    """neardup for a Crawlee for Python crawl: :meth:`filter_requests` and
    :meth:`enqueue_links` before the queue, :meth:`add` / :meth:`handler` after the fetch.

    ``detector``: a :class:`Detector` (embedded store) or a :class:`neardup.Client` (the
    service), or anything with their ``should_fetch`` and ``add`` (:meth:`open` makes one
    from a store target or a service URL). ``on_duplicate``: ``drop`` or ``tag``;
    ``follow_duplicates``: follow the links of a tagged duplicate; ``skip_before_fetch``:
    ask ``should_fetch`` at all; ``max_age``, ``host_max_duplicate_rate``, ``host_min_pages``:
    passed to it. ``threads``: worker threads; ``owns_detector``: :meth:`close` closes the
    detector too. One instance serves one crawl: a URL the store holds from after
    :attr:`started` was fetched in this crawl (``this-crawl``)."""

    def __init__(self, detector: Any, *, on_duplicate: str = "drop", follow_duplicates: bool = False,
                 skip_before_fetch: bool = True, max_age: float | None = None,
                 host_max_duplicate_rate: float | None = None, host_min_pages: int = DEFAULT_HOST_MIN_PAGES,
                 threads: int = DEFAULT_THREADS, owns_detector: bool = False) -> None:
        if on_duplicate not in ACTIONS:
            raise ConfigError(f"on_duplicate must be one of {', '.join(ACTIONS)}, got {on_duplicate!r}")
        if threads < 1:
            raise ConfigError(f"threads must be at least 1, got {threads}")
        self.detector = detector
        self.on_duplicate = on_duplicate
        self.follow_duplicates = follow_duplicates
        self.skip_before_fetch = skip_before_fetch
        self.max_age = max_age
        self.host_max_duplicate_rate = host_max_duplicate_rate
        self.host_min_pages = host_min_pages
        self.owns_detector = owns_detector
        self.started = time.time()  # a URL fetched since is not fetched again in this crawl
        self.stats: Counter[str] = Counter()
        #: ``local``: a Detector here (fingerprints in the workers, store calls in one thread);
        #: ``client``: the service's (every call in the workers)
        self.mode = "local" if isinstance(detector, Detector) else "client"
        self._workers = ThreadPoolExecutor(threads, thread_name_prefix="neardup")
        self._store: Executor = (ThreadPoolExecutor(1, thread_name_prefix="neardup-store") if self.mode == "local"
                                 else self._workers)
        self._closed = False

    @classmethod
    def open(cls, target: str, *, token: str | None = None,
             settings: DetectorSettings | Mapping[str, Any] | None = None, **options: Any) -> "NeardupCrawlee":
        """An integration that owns its detector: a :class:`neardup.Client` for an
        ``http(s)://`` ``target`` (``neardup serve``; ``token``: its bearer token), else
        :meth:`Detector.open` of a SQLite file, a ``postgresql://`` or a ``redis://`` URL (``settings``: a
        :class:`DetectorSettings` or a mapping of its fields). ``options``: the constructor's."""
        if target.startswith(("http://", "https://")):
            from neardup.client import Client

            return cls(Client(target, token=token), owns_detector=True, **options)
        if settings is not None and not isinstance(settings, DetectorSettings):
            settings = DetectorSettings.from_dict(settings)
        det = Detector.open(target, settings=settings)
        try:
            return cls(det, owns_detector=True, **options)
        except BaseException:
            det.close()
            raise

    async def _run(self, pool: Executor, fn: Callable[[], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    # -- before the queue ------------------------------------------------------------------
    def _decide_all(self, urls: list[str]) -> list[FetchDecision | BaseException]:
        """In the store thread: ``should_fetch`` of each URL (an exception: that URL's failure)."""
        out: list[FetchDecision | BaseException] = []
        for url in urls:
            try:
                out.append(self.detector.should_fetch(url, max_age=self.max_age,
                                                      host_max_duplicate_rate=self.host_max_duplicate_rate,
                                                      host_min_pages=self.host_min_pages))
            except Exception as exc:  # this URL only: it is fetched
                out.append(exc)
        return out

    async def should_fetch(self, urls: Sequence[str]) -> list[FetchDecision | None]:
        """``should_fetch`` of each URL, off the event loop (one call of the store thread
        for all of them; with the service, in parallel); None where it failed (stat
        ``should_fetch_error``: that URL is to be fetched)."""
        if not urls:
            return []
        if self.mode == "local":
            found = await self._run(self._store, functools.partial(self._decide_all, list(urls)))
        else:
            found = [r[0] for r in await asyncio.gather(
                *(self._run(self._workers, functools.partial(self._decide_all, [u])) for u in urls))]
        out: list[FetchDecision | None] = []
        for url, decision in zip(urls, found):
            if isinstance(decision, BaseException):
                self.stats["should_fetch_error"] += 1
                logger.warning("neardup: should_fetch failed for %s: %s", url, _why(decision))
                out.append(None)
            else:
                out.append(decision)
        return out

    async def due(self, limit: int = 1000, after: str | None = None) -> list[str]:
        """The store's due URLs (:meth:`neardup.Detector.due`: originals and canonicals not
        fresh), off the event loop: the start of a recrawl, beside its seed, so that it
        reaches the pages behind pages skipped as ``fresh``.

        ``await crawler.run(await nd.filter_requests([seed, *await nd.due()]))``"""
        pool = self._store if self.mode == "local" else self._workers
        return await self._run(pool, functools.partial(self.detector.due, limit=limit, after=after))

    def _skip_reason(self, decision: FetchDecision | None) -> str | None:
        if decision is None:
            return None
        if decision.fetch:
            fetched = decision.fetched_at
            if decision.reason != "known" or fetched is None or fetched < self.started:
                return None
            # the URL, as the store keys it (tracking parameters dropped...), was fetched during
            # this crawl already: Crawlee's request keys tell those spellings apart
            return "this-crawl"
        return decision.reason

    async def filter_requests(self, requests: Sequence[str | Request]) -> list[Request]:
        """The requests to queue: those ``should_fetch`` does not skip, plus, for a skip that
        names the copy to keep (a known duplicate's canonical, a rule's known page), that
        URL (once; itself asked about first), with the skipped request's label and user
        data. Strings become ``Request.from_url``; requests with
        ``user_data["neardup_ignore"]`` pass untouched."""
        request_class = _request_class()
        reqs: list[Request] = [r if isinstance(r, request_class) else request_class.from_url(r) for r in requests]
        if not self.skip_before_fetch:
            return reqs
        asked = [r for r in reqs if not r.user_data.get("neardup_ignore")]
        decisions = dict(zip((id(r) for r in asked), await self.should_fetch([r.url for r in asked])))
        kept: list[Request] = []
        instead: dict[str, Request] = {}
        for r in reqs:
            if id(r) not in decisions:
                kept.append(r)
                continue
            decision = decisions[id(r)]
            reason = self._skip_reason(decision)
            if reason is None:
                kept.append(r)
                continue
            assert decision is not None
            self.stats["skipped_before_fetch"] += 1
            self.stats[f"skipped_before_fetch/{reason}"] += 1
            other = (decision.canonical_url or decision.known_url) if reason in INSTEAD else None
            logger.debug("neardup: skipped before the fetch: %s: %s%s -> %s", r.url, reason,
                         f" ({', '.join(decision.rules)})" if decision.rules else "", other or "")
            if other and other not in (r.url, decision.key) and other not in instead:
                instead[other] = request_class.from_url(other, user_data=dict(r.user_data))
        if instead:
            known = {r.url for r in kept}
            extra = [r for u, r in instead.items() if u not in known]
            for r, decision in zip(extra, await self.should_fetch([r.url for r in extra])):
                if self._skip_reason(decision) is None:
                    self.stats["canonical_enqueued"] += 1
                    kept.append(r)
        return kept

    async def enqueue_links(self, context: ParsedHttpCrawlingContext[Any], *, selector: str = "a",
                            attribute: str = "href", label: str | None = None,
                            user_data: Mapping[str, JsonSerializable] | None = None,
                            transform_request_function: Callable[[RequestOptions], RequestOptions
                                                                 | RequestTransformAction] | None = None,
                            **kwargs: Unpack[EnqueueLinksKwargs]) -> list[Request]:
        """``context.enqueue_links`` with neardup's decision before the queue: the page's
        links as ``context.extract_links`` finds them (the same arguments; ``strategy``
        ``same-hostname`` by default, as Crawlee's), less those :meth:`filter_requests`
        skips, added with ``context.add_requests``; returns the requests added. The links
        of a duplicate page (:meth:`verdict`) are not followed unless ``follow_duplicates``
        (stat ``links_not_followed``)."""
        kwargs.setdefault("strategy", "same-hostname")
        found = await context.extract_links(selector=selector, attribute=attribute, label=label, user_data=user_data,
                                            transform_request_function=transform_request_function, **kwargs)
        if is_dropped_copy(self.verdict(context)) and not self.follow_duplicates:
            self.stats["links_not_followed"] += len(found)
            return []
        kept = await self.filter_requests(found)
        if kept:
            await context.add_requests(kept, **kwargs)
        return kept

    # -- after the fetch -------------------------------------------------------------------
    def _add_local(self, url: str, fp: Any) -> Verdict:
        return self.detector.add_fingerprint(url, fp)

    async def _verdict(self, url: str, body: bytes, headers: dict[str, str] | None) -> Verdict:
        if self.mode == "local":
            fp = await self._run(self._workers, functools.partial(self.detector.fingerprint, body, url, headers))
            return await self._run(self._store, functools.partial(self._add_local, url, fp))
        return await self._run(self._workers, functools.partial(self.detector.add, url, body, headers))

    async def add(self, context: HttpCrawlingContext) -> Verdict | None:
        """Add the fetched page (an HTML response with status 200) and return its verdict,
        also kept as ``context.request.user_data["neardup"]`` (its dict); None for a response
        that is not HTML or not 200 (untouched), and for a page neardup could not read or
        store (stat ``error``: the crawl goes on)."""
        request = context.request
        if request.user_data.get("neardup_ignore"):
            return None
        response = context.http_response
        ctype = response.headers.get("content-type")
        if ctype is not None and "html" not in ctype.lower():
            self.stats["not_html"] += 1
            return None
        if response.status_code != 200:
            self.stats["not_200"] += 1
            return None
        url = request.loaded_url or request.url
        try:
            body = await response.read()
            verdict = await self._verdict(url, body, {"Content-Type": ctype} if ctype else None)
        except Exception as exc:  # neardup never stops the crawl: the page goes on untagged
            self.stats["error"] += 1
            logger.warning("neardup: page not added: %s: %s", url, _why(exc))
            return None
        self.stats[verdict.version or verdict.status] += 1
        request.user_data["neardup"] = verdict.to_dict()
        return verdict

    @staticmethod
    def verdict(context: HttpCrawlingContext) -> dict[str, Any] | None:
        """The verdict :meth:`add` kept for the context's request (its dict), or None."""
        found = context.request.user_data.get("neardup")
        return found if isinstance(found, dict) else None

    def handler(self, fn: Callable[[_C], Awaitable[None]]) -> Callable[[_C], Awaitable[None]]:
        """A request handler that :meth:`add` s the page first: with ``on_duplicate="drop"``
        a duplicate never reaches ``fn`` (stat ``dropped``); with ``"tag"`` it does, its
        verdict in :meth:`verdict` (stat ``tagged``). A duplicate that is its cluster's
        canonical copy (:func:`is_dropped_copy`) is neither: it reaches ``fn`` as a new page does."""

        @functools.wraps(fn)
        async def handle(context: _C) -> None:
            verdict = await self.add(context)
            if verdict is not None and is_dropped_copy(verdict):
                if self.on_duplicate == "drop":
                    self.stats["dropped"] += 1
                    logger.debug("neardup: dropped %s duplicate %s of %s", verdict.status, verdict.url,
                                 verdict.canonical_url)
                    return
                self.stats["tagged"] += 1
            await fn(context)

        return handle

    # -- the end ---------------------------------------------------------------------------
    def summary(self) -> str:
        """One line of the main counts."""
        keys = ("new", "exact", "near", "unchanged", "changed", "skipped_before_fetch", "error")
        return ", ".join(f"{k} {self.stats[k]}" for k in keys)

    def close(self) -> None:
        """Wait for the workers, then close the detector if this integration owns it."""
        if self._closed:
            return
        self._closed = True
        logger.info("neardup: %s", self.summary())
        self._workers.shutdown(wait=True)
        self._store.shutdown(wait=True)
        if self.owns_detector:
            self.detector.close()

    def __enter__(self) -> "NeardupCrawlee":
        """The integration itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """:meth:`close`."""
        self.close()

    async def __aenter__(self) -> "NeardupCrawlee":
        """The integration itself."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """:meth:`close`, off the event loop."""
        await asyncio.to_thread(self.close)

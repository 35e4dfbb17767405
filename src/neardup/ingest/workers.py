"""Fingerprint pages in worker processes, results in input order; one writer adds them.

Extraction (trafilatura) and fingerprinting are the cost of a page; deciding and recording
it is cheap but must happen in one place (one :class:`~neardup.detector.core.Detector`, one
transaction at a time). :func:`fingerprint_pages` runs the first part in worker processes
of its own (:class:`PageWorker`, a pipe each), fed one page at a time with a bounded number
of results waiting, and yields the results in input order; a page that takes over the
per-page time limit (:data:`DEFAULT_PAGE_TIMEOUT`) gets an error naming it and its worker is
killed and replaced (a ``ProcessPoolExecutor`` cannot stop one task). So :func:`add_pages`
(and ``neardup dedup --jobs N``) give the same verdicts as one process:

>>> from neardup import Detector, Page
>>> det = Detector()
>>> text = " ".join(f"word{i}" for i in range(50))
>>> pages = [Page("https://a.example/1", text), Page("https://b.example/1", text), Page("bad url", text)]
>>> [v.status for _, v in add_pages(det, pages, jobs=1)]
['new', 'exact', 'error']

A page that cannot be read (bad URL, binary body, extractor failure) comes back as an
error message, as :meth:`Detector.add_many` would give it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from typing import TYPE_CHECKING, Any, TypeVar, cast

from neardup.errors import InputError, NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint, warm_up
from neardup.urls import validate_url

if TYPE_CHECKING:
    from neardup.detector.core import Detector
    from neardup.model import Page, Verdict

T = TypeVar("T")

# (url, fingerprint or None, error message or None)
Result = tuple[str, Fingerprint | None, str | None]


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def fingerprint_one(page: "Page", config: FingerprintConfig = DEFAULT_CONFIG) -> Result:
    """What :meth:`Detector.add_many` computes for one page before deciding: the checked URL
    and the fingerprint, or the error message."""
    try:
        url = validate_url(page.url)
        return url, fingerprint(page.content, url, page.headers, config), None
    except NeardupError as exc:
        return str(page.url), None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a bug in an extractor: one page's error, not the run's
        message = " ".join(str(exc).split())[:300]
        return str(page.url)[:2000], None, f"unexpected {type(exc).__name__}: {message}"


DEFAULT_PAGE_TIMEOUT = 10.0
"""Seconds one page may take to decode, parse, extract and fingerprint in a worker process
(``neardup dedup --jobs N``, the service's page routes); past it the worker is killed and
replaced, and the page gets an error naming the limit."""


class PageTimeoutError(InputError):
    """A page took longer than the per-page limit to process (its worker was replaced)."""


class PageWorkerError(InputError):
    """The worker process died while processing a page (out of memory, a crash in a parser)."""


DIED = "the page worker process died while processing this page (out of memory, or a crash in a parser)"


def timeout_message(limit: float) -> str:
    """The error a page over the per-page time limit gets."""
    return (f"page processing took over {limit:g} s (the per-page time limit); "
            "its worker process was stopped and replaced")


def page_result(url: str, content: bytes | str, headers: Any, config: FingerprintConfig) -> Result:
    """A dedup worker's task: :func:`fingerprint_one` of the page."""
    return fingerprint_one(_page(url, content, headers), config)


def typed_result(url: str, content: bytes | str, headers: Any, config: FingerprintConfig) -> Result:
    """A service worker's task: ``fingerprint(content, url, headers, config)`` (the URL is
    checked later, by the decision), errors as ``"TypeName: message"`` so that the caller
    raises the same library exception (:func:`raise_typed`)."""
    try:
        return url, fingerprint(content, url, headers, config), None
    except NeardupError as exc:
        return url, None, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a bug in an extractor: reported, the worker lives on
        message = " ".join(str(exc).split())[:300]
        return url, None, f"RuntimeError: unexpected {type(exc).__name__}: {message}"


def raise_typed(message: str) -> None:
    """Raise the exception a :func:`typed_result` error names."""
    from neardup import errors

    name, _, text = message.partition(": ")
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, NeardupError):
        raise cls(text)
    raise RuntimeError(text if name == "RuntimeError" else message)


READY = "ready"
"""What a page worker sends once it can take pages."""
STARTUP_TIMEOUT = 300.0
"""Seconds a page worker may take to start (import, load the kernels) before it is replaced."""

Task = Callable[[str, "bytes | str", Any, FingerprintConfig], Result]


def _serve_pages(conn: Connection, config: FingerprintConfig, task: Task) -> None:
    """A page worker's loop: ``(url, content, headers)`` in, ``task(...)`` out, until the
    pipe closes. Niced, so that the process answering requests keeps its CPU share."""
    try:
        os.nice(5)
    except OSError:  # pragma: no cover - not permitted here
        pass
    warm_up(config)  # kernels compiled or loaded before the first page's clock starts
    conn.send(READY)
    while True:
        try:
            url, content, headers = conn.recv()
        except (EOFError, OSError):
            return
        result = task(url, content, headers, config)
        try:
            conn.send(result)
        except OSError:
            return


def _page(url: str, content: bytes | str, headers: Any) -> "Page":
    """A :class:`Page` (imported late: the detector imports this module's callers)."""
    from neardup.model import Page

    return Page(url, content, headers)


class PageWorker:
    """One worker process fed through a pipe, which can be killed when a page overruns
    (a :class:`concurrent.futures.ProcessPoolExecutor` cannot stop one task)."""

    def __init__(self, ctx: Any, config: FingerprintConfig, task: Task = page_result) -> None:
        """Start a worker process with ``config``, running ``task`` on each page it is sent."""
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve_pages, args=(child, config, task), daemon=True,
                                name="neardup-page-worker")
        self.proc.start()
        child.close()
        self.ready = False  # the worker said it can take pages
        self.started = 0.0  # when the page in work was sent (0: idle)
        self.seq = -1  # that page's position in the input
        self.url = ""  # and its URL

    def wait_ready(self) -> None:
        """Wait until the worker has started (:data:`STARTUP_TIMEOUT`): a page's clock starts
        when the worker can work on it."""
        if self.ready:
            return
        if not self.conn.poll(STARTUP_TIMEOUT) or self.conn.recv() != READY:
            raise OSError("a page worker process did not start")
        self.ready = True

    def send(self, url: str, content: bytes | str, headers: Any) -> None:
        """Give the worker one page (it must be idle)."""
        self.wait_ready()
        self.conn.send((url, content, headers))
        self.url = str(url)[:2000]
        self.started = time.monotonic()

    def receive(self) -> Result:
        """The result of the page in work (the worker is then idle)."""
        self.started = 0.0
        return cast(Result, self.conn.recv())

    def run(self, url: str, content: bytes | str, headers: Any, limit: float) -> Result:
        """The page's result; :class:`PageTimeoutError` past ``limit``, :class:`PageWorkerError`
        when the worker died (either way the worker is then dead: replace it)."""
        try:
            self.send(url, content, headers)
            if not self.conn.poll(limit):
                self.kill()
                raise PageTimeoutError(timeout_message(limit))
            return self.receive()
        except (EOFError, OSError):  # the worker died (out of memory, a crash in a parser)
            self.kill()
            raise PageWorkerError(DIED) from None

    def alive(self) -> bool:
        """Whether the process runs and its pipe is open."""
        return self.proc.is_alive() and not self.conn.closed

    def kill(self) -> None:
        """Stop the process at once (SIGKILL) and close the pipe."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def worker_context() -> Any:
    """The multiprocessing context page workers start in."""
    # Linux: fork (the workers start at once with the kernels and the extractor loaded, and a
    # caller's script is not imported again); elsewhere spawn (fork is unsafe on macOS)
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def fingerprint_pages(pages: Iterable["Page"], config: FingerprintConfig = DEFAULT_CONFIG, jobs: int | None = None,
                      chunk_size: int = 4, ahead: int = 4,
                      page_timeout: float | None = DEFAULT_PAGE_TIMEOUT) -> Iterator[Result]:
    """``fingerprint_one(page, config)`` for every page, in input order.

    jobs: worker processes (default: every CPU this process may use); 1 computes in this
    process (no time limit: nothing can stop it). Pages are read from ``pages`` only as
    workers need them: at most ``jobs * ahead * chunk_size`` results wait for an earlier
    page. A page that takes over ``page_timeout`` seconds (None: no limit) gets an error
    naming the limit and its worker is killed and replaced. Workers are forked on Linux
    (they never touch the parent's store or threads) and spawned elsewhere (a script that
    calls this then needs the ``if __name__ == "__main__":`` guard); they are stopped when
    the iterator is closed or exhausted.
    """
    jobs = default_jobs() if jobs is None else jobs
    if jobs <= 1:
        for page in pages:
            yield fingerprint_one(page, config)
        return
    warm_up(config)
    ctx = worker_context()
    workers = [PageWorker(ctx, config) for _ in range(jobs)]
    try:
        yield from _ordered(iter(pages), workers, ctx, config, jobs * ahead * chunk_size, page_timeout)
    finally:
        for w in workers:
            w.kill()


def _ordered(pages: Iterator["Page"], workers: list[PageWorker], ctx: Any, config: FingerprintConfig,
             window: int, limit: float | None) -> Iterator[Result]:
    """Feed idle workers, collect their results, replace those past ``limit``; yield the
    results in input order."""
    done: dict[int, Result] = {}
    sent = following = 0
    exhausted = False
    while True:
        while done.get(following) is not None:
            yield done.pop(following)
            following += 1
        for i, w in enumerate(workers):
            if w.started == 0.0 and not exhausted and sent - following < window:
                page = next(pages, None)
                if page is None:
                    exhausted = True
                    break
                w.seq = sent
                sent += 1
                try:
                    w.send(page.url, page.content, page.headers)
                except (EOFError, OSError):  # the worker died before taking the page
                    done[w.seq] = (str(page.url)[:2000], None, DIED)
                    w.kill()
                    workers[i] = PageWorker(ctx, config)
        busy = [w for w in workers if w.started]
        if not busy:
            if exhausted:
                return
            continue
        now = time.monotonic()
        wait = None if limit is None else max(0.0, min(w.started for w in busy) + limit - now)
        ready = set(connection_wait([w.conn for w in busy], wait))
        for i, w in enumerate(workers):
            if w.conn in ready:
                seq = w.seq
                try:
                    done[seq] = w.receive()
                except (EOFError, OSError):  # the worker died
                    done[seq] = (w.url, None, DIED)
                    w.kill()
                    workers[i] = PageWorker(ctx, config)
            elif limit is not None and w.started and time.monotonic() - w.started >= limit:
                done[w.seq] = (w.url, None, timeout_message(limit))
                w.kill()
                workers[i] = PageWorker(ctx, config)


def _itself(x: Any) -> Any:
    """The item itself (the default ``page`` of :func:`add_pages`)."""
    return x


def add_pages(det: "Detector", items: Iterable[T], jobs: int | None = None, batch_size: int = 200,
              page: Callable[[T], "Page | None"] | None = None,
              page_timeout: float | None = DEFAULT_PAGE_TIMEOUT) -> Iterator[tuple[T, "Verdict | None"]]:
    """``(item, verdict)`` for every item, in input order: the verdicts of
    :meth:`Detector.add_many` for the pages (in batches of ``batch_size`` pages, one
    transaction each, later pages matching earlier ones), fingerprinted by ``jobs``
    processes. ``page(item)`` is the item's :class:`Page` (default: the item itself); an
    item without one (None: an input record that could not be read) gets verdict None. With
    ``jobs`` > 1, a page that takes over ``page_timeout`` seconds gets an error verdict naming
    the limit (its worker is replaced).

    Should a batch fail for a reason that is not one page's (a bug), its pages are added one
    by one, so that the rest of the batch still goes in; store errors are raised."""
    from neardup.errors import NotStoredError, StoreError
    from neardup.model import Verdict

    get: Callable[[T], "Page | None"] = page if page is not None else cast(Callable[[T], "Page | None"], _itself)
    order: deque[T] = deque()
    batch: list[tuple[T, Result | None, "Page | None"]] = []

    def add(rows: list[tuple[str, Fingerprint, Any, Any]]) -> list[Verdict]:
        """The verdicts of a batch; one page at a time when the batch fails for a reason not a page's."""
        try:
            return det.add_fingerprints(rows)
        except StoreError:
            raise
        except Exception:  # noqa: BLE001 - isolate the page that breaks the batch
            if os.environ.get("NEARDUP_DEBUG"):
                raise
        out: list[Verdict] = []
        for row in rows:
            try:
                out += det.add_fingerprints([row])
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001
                message = " ".join(str(exc).split())[:300]
                out.append(Verdict(status="error", url=row[0][:2000],
                                   error=f"unexpected {type(exc).__name__}: {message}"))
        return out

    def flush() -> Iterator[tuple[T, Verdict | None]]:
        """The verdicts of the pages gathered so far, in input order (a revisit after the
        pages before it)."""
        verdicts: list[Verdict | None] = []
        rows: list[tuple[str, Fingerprint, Any, Any]] = []
        waiting: list[int] = []  # positions of the rows not added yet

        def add_rows() -> None:
            for i, v in zip(waiting, add(rows)):
                verdicts[i] = v
            rows.clear()
            waiting.clear()

        for _, r, p in batch:
            verdicts.append(None)
            if p is not None and p.revisit:
                add_rows()
                verdicts[-1] = revisit(p)
            elif r is not None and r[1] is None:
                verdicts[-1] = Verdict(status="error", url=r[0], error=r[2])
            elif r is not None and r[1] is not None and p is not None:
                rows.append((r[0], r[1], p.fetched_at, p.priority))
                waiting.append(len(verdicts) - 1)
        add_rows()
        for (item, _, _), verdict in zip(batch, verdicts):
            yield item, verdict
        batch.clear()

    def revisit(p: "Page") -> Verdict:
        """The verdict of a revisit (an error verdict for a URL that is not stored)."""
        try:
            return det.add_revisit(p.url, fetched_at=p.fetched_at)
        except NotStoredError as exc:
            return Verdict(status="error", url=p.url[:2000], error=str(exc))

    def pages_of(items_: Iterable[T]) -> Iterator["Page"]:
        """The pages to fingerprint of the items, noting their order."""
        for item in items_:
            order.append(item)
            p = get(item)
            if p is not None and not p.revisit:
                yield p

    def drain_unreadable() -> None:
        """Move the items without a page to fingerprint (unreadable records, revisits) to the batch."""
        while order and ((p := get(order[0])) is None or p.revisit):
            batch.append((order.popleft(), None, p))

    for result in fingerprint_pages(pages_of(items), det.config, jobs, page_timeout=page_timeout):
        drain_unreadable()
        item = order.popleft()
        batch.append((item, result, get(item)))
        drain_unreadable()
        if len(batch) >= batch_size:
            yield from flush()
    drain_unreadable()
    if batch:
        yield from flush()

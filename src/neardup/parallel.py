"""Fingerprint pages in worker processes, results in input order; one writer adds them.

Extraction (trafilatura) and fingerprinting are the cost of a page; deciding and recording
it is cheap but must happen in one place (one :class:`~neardup.detector.Detector`, one
transaction at a time). :func:`fingerprint_pages` runs the first part in a pool of worker
processes, fed in order with a bounded number of chunks in flight, and yields the results
in input order, so that :func:`add_pages` (and ``neardup dedup --jobs N``) give the same
verdicts as one process:

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
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from neardup.errors import NeardupError
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint
from neardup.urls import validate_url

if TYPE_CHECKING:
    from neardup.detector import Detector, Page, Verdict

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


def warm_up(config: FingerprintConfig = DEFAULT_CONFIG) -> None:
    """Compile (or load from numba's cache) the kernels ``config`` uses, in this process:
    a cold cache says so on stderr (:func:`neardup._kernels.compile_notice`) and compiles
    once here rather than in every worker at the same time."""
    fingerprint(" ".join(f"w{i}" for i in range(20)), config=config.with_(extractor="full"))


_config: FingerprintConfig = DEFAULT_CONFIG


def _init_worker(config: FingerprintConfig) -> None:
    global _config
    _config = config


def _work(pages: list["Page"]) -> list[Result]:
    return [fingerprint_one(page, _config) for page in pages]


def _chunks(pages: Iterable["Page"], size: int) -> Iterator[list["Page"]]:
    chunk: list["Page"] = []
    for page in pages:
        chunk.append(page)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def fingerprint_pages(pages: Iterable["Page"], config: FingerprintConfig = DEFAULT_CONFIG, jobs: int | None = None,
                      chunk_size: int = 4, ahead: int = 4) -> Iterator[Result]:
    """``fingerprint_one(page, config)`` for every page, in input order.

    jobs: worker processes (default: every CPU this process may use); 1 computes in this
    process. Pages are read from ``pages`` only as workers need them: at most
    ``jobs * ahead`` chunks of ``chunk_size`` pages are in flight. Workers are forked on
    Linux (they never touch the parent's store or threads) and spawned elsewhere (a script
    that calls this then needs the ``if __name__ == "__main__":`` guard); they are stopped
    when the iterator is closed or exhausted.
    """
    jobs = default_jobs() if jobs is None else jobs
    if jobs <= 1:
        for page in pages:
            yield fingerprint_one(page, config)
        return
    warm_up(config)
    # Linux: fork (the workers start at once with the kernels and the extractor loaded, and a
    # caller's script is not imported again); elsewhere spawn (fork is unsafe on macOS)
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    pending: deque[Future[list[Result]]] = deque()
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker, initargs=(config,)) as pool:
        try:
            chunks = _chunks(pages, chunk_size)
            limit = jobs * ahead
            for chunk in chunks:
                pending.append(pool.submit(_work, chunk))
                if len(pending) >= limit:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def add_pages(det: "Detector", items: Iterable[T], jobs: int | None = None, batch_size: int = 200,
              page: Callable[[T], "Page | None"] | None = None) -> Iterator[tuple[T, "Verdict | None"]]:
    """``(item, verdict)`` for every item, in input order: the verdicts of
    :meth:`Detector.add_many` for the pages (in batches of ``batch_size`` pages, one
    transaction each, later pages matching earlier ones), fingerprinted by ``jobs``
    processes. ``page(item)`` is the item's :class:`Page` (default: the item itself); an
    item without one (None: an input record that could not be read) gets verdict None.

    Should a batch fail for a reason that is not one page's (a bug), its pages are added one
    by one, so that the rest of the batch still goes in; store errors are raised."""
    from neardup.detector import Verdict
    from neardup.errors import StoreError

    get = page or (lambda x: x)  # type: ignore[assignment,return-value]
    order: deque[T] = deque()
    batch: list[tuple[T, Result | None, "Page | None"]] = []

    def add(rows: list[tuple[str, Fingerprint, Any, Any]]) -> list[Verdict]:
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
                out.append(Verdict(status="error", url=row[0][:2000], error=f"unexpected {type(exc).__name__}: {message}"))
        return out

    def flush() -> Iterator[tuple[T, Verdict | None]]:
        rows = [(r[0], r[1], p.fetched_at, p.priority) for _, r, p in batch
                if r is not None and r[1] is not None and p is not None]
        added = iter(add(rows))
        for item, r, _ in batch:
            if r is None:
                yield item, None
            elif r[1] is None:
                yield item, Verdict(status="error", url=r[0], error=r[2])
            else:
                yield item, next(added)
        batch.clear()

    def pages_of(items_: Iterable[T]) -> Iterator["Page"]:
        for item in items_:
            order.append(item)
            p = get(item)
            if p is not None:
                yield p

    def drain_unreadable() -> None:
        while order and get(order[0]) is None:
            batch.append((order.popleft(), None, None))

    for result in fingerprint_pages(pages_of(items), det.config, jobs):
        drain_unreadable()
        item = order.popleft()
        batch.append((item, result, get(item)))
        drain_unreadable()
        if len(batch) >= batch_size:
            yield from flush()
    drain_unreadable()
    if batch:
        yield from flush()

"""The decision routes: pages (fingerprinted in the page workers, :mod:`neardup.service.pages`)
and fingerprints computed by the client (with the sketch and title the match rule reads)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from neardup.detector.core import Detector
from neardup.errors import InputError, NeardupError, StoreError
from neardup.fingerprint.core import Fingerprint
from neardup.model import Verdict
from neardup.service.guard import json_response
from neardup.service.models import (
    BatchIn,
    FieldError,
    FingerprintBatchIn,
    FingerprintIn,
    PageIn,
    RevisitIn,
    VerdictOut,
    VerdictsOut,
    answers,
)
from neardup.service.state import DetectorDep, Service, ServiceDep

router = APIRouter()


async def _page_fingerprint(svc: Service, page: PageIn) -> Fingerprint:
    """The page's fingerprint, computed in a page worker (killed past the per-page limit)."""
    content, headers = page.content_and_headers()
    return await svc.pool.fingerprint(page.url, content, headers)


async def _add(svc: Service, page: PageIn) -> Verdict:
    """Fingerprint a page in a worker, then decide and record it."""
    fp = await _page_fingerprint(svc, page)  # outside the lock: the slow part
    verdict = await svc.commits.add(page.url, fp, fetched_at=page.fetched_at, priority=page.priority)
    svc.metrics.verdict("add", verdict.status)
    return verdict


async def _check(svc: Service, page: PageIn) -> Verdict:
    """Fingerprint a page in a worker, then decide it without writing."""
    fp = await _page_fingerprint(svc, page)
    verdict = await svc.locked(svc.detector.check_fingerprint, page.url, fp)
    svc.metrics.verdict("check", verdict.status)
    return verdict


Decide = Callable[[Service, PageIn, Fingerprint], Awaitable[Verdict]]


async def _each(svc: Service, pages: list[PageIn], decide: Decide) -> list[dict[str, Any]]:
    """Every page's verdict in order; a page that cannot be read (or runs over the time limit)
    gets status 'error'. Pages are fingerprinted by all workers at once, decided in order."""
    fingerprints = await asyncio.gather(*(_page_fingerprint(svc, p) for p in pages), return_exceptions=True)
    out = []
    for page, fp in zip(pages, fingerprints):
        try:
            if isinstance(fp, BaseException):
                raise fp
            verdict = await decide(svc, page, fp)
            out.append(verdict.to_dict())
        except NeardupError as exc:
            if isinstance(exc, StoreError):
                raise
            out.append(Verdict(status="error", url=page.url, error=str(exc)).to_dict())
    return out


async def _add_fp(svc: Service, page: PageIn, fp: Fingerprint) -> Verdict:
    """Decide and record a batch page already fingerprinted."""
    verdict = await svc.locked(svc.detector.add_fingerprint, page.url, fp, fetched_at=page.fetched_at,
                               priority=page.priority)
    svc.metrics.verdict("add", verdict.status)
    return verdict


async def _check_fp(svc: Service, page: PageIn, fp: Fingerprint) -> Verdict:
    """Decide a batch page already fingerprinted."""
    verdict = await svc.locked(svc.detector.check_fingerprint, page.url, fp)
    svc.metrics.verdict("check", verdict.status)
    return verdict


@router.post("/v1/pages", summary="Check and add a page", response_model=None, responses=answers(VerdictOut))
async def add_page(page: PageIn, svc: ServiceDep) -> Response:
    """Check and add a page."""
    return json_response((await _add(svc, page)).to_dict())


@router.post("/v1/check", summary="Check a page without writing", response_model=None,
             responses=answers(VerdictOut))
async def check_page(page: PageIn, svc: ServiceDep) -> Response:
    """Check a page without writing."""
    return json_response((await _check(svc, page)).to_dict())


@router.post("/v1/pages/batch", summary="Check and add pages; a bad page gets status 'error'", response_model=None,
             responses=answers(VerdictsOut))
async def add_batch(batch: BatchIn, svc: ServiceDep) -> Response:
    """Check and add pages, in order."""
    return json_response({"verdicts": await _each(svc, batch.pages, _add_fp)})


@router.post("/v1/check/batch", summary="Check pages without writing", response_model=None,
             responses=answers(VerdictsOut))
async def check_batch(batch: BatchIn, svc: ServiceDep) -> Response:
    """Check pages without writing."""
    return json_response({"verdicts": await _each(svc, batch.pages, _check_fp)})


@router.post("/v1/revisits", summary="An unchanged fetch of a stored URL that sent no content (304, WARC revisit)",
             response_model=None, responses=answers(VerdictOut, 404))
async def add_revisit(body: RevisitIn, svc: ServiceDep) -> Response:
    """Record an unchanged fetch of a stored URL (404, ``NotStoredError``, when it is not stored)."""
    verdict = await svc.locked(svc.detector.add_revisit, body.url, fetched_at=body.fetched_at)
    svc.metrics.verdict("add", verdict.status)
    return json_response(verdict.to_dict())


# -- fingerprints computed by the client ---------------------------------------------------
@router.post("/v1/fingerprints/add", summary="Add a page by its fingerprint", response_model=None,
             responses=answers(VerdictOut, 409))
async def add_fp(body: FingerprintIn, svc: ServiceDep) -> Response:
    """Add a page by its fingerprint (with its sketch when the spec has one)."""
    fp = body.fingerprint(svc.detector)
    verdict = await svc.commits.add(body.url, fp, fetched_at=body.fetched_at, priority=body.priority)
    svc.metrics.verdict("add", verdict.status)
    return json_response(verdict.to_dict())


@router.post("/v1/fingerprints/check", summary="Check a fingerprint without writing", response_model=None,
             responses=answers(VerdictOut, 409))
async def check_fp(body: FingerprintIn, svc: ServiceDep) -> Response:
    """Check a fingerprint (with its sketch when the spec has one) without writing."""
    fp = body.fingerprint(svc.detector)
    verdict = await svc.locked(svc.detector.check_fingerprint, body.url, fp)
    svc.metrics.verdict("check", verdict.status)
    return json_response(verdict.to_dict())


def _fp_items(body: FingerprintBatchIn, detector: Detector, with_times: bool) -> list[tuple[Any, ...]]:
    """``(url, fingerprint or its InputError[, fetched_at, priority])`` per item; a missing or
    wrong-sized sketch refuses the whole batch (:class:`FieldError`, 422)."""
    items: list[tuple[Any, ...]] = []
    for i, f in enumerate(body.fingerprints):
        try:
            fp: Any = f.fingerprint(detector, where=f"fingerprints.{i}.")
        except FieldError:
            raise
        except InputError as exc:
            fp = exc  # reported as this item's error
        items.append((f.url, fp, f.fetched_at, f.priority) if with_times else (f.url, fp))
    return items


def _fp_batch(items: list[tuple[Any, ...]], decide: Callable[[list[tuple[Any, ...]]], list[Verdict]]
              ) -> list[dict[str, Any]]:
    """The verdicts of the good items (decided together) and the errors of the others, in order."""
    good = [it for it in items if not isinstance(it[1], Exception)]
    done = iter(decide(good))
    return [Verdict(status="error", url=it[0], error=str(it[1])).to_dict() if isinstance(it[1], Exception)
            else next(done).to_dict() for it in items]


def _count(svc: Service, op: str, verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Count the verdicts of a batch in the metrics; return them."""
    for v in verdicts:
        svc.metrics.verdict(op, v["status"])
    return verdicts


@router.post("/v1/fingerprints/check/batch", response_model=None, responses=answers(VerdictsOut, 409),
             summary="Check many fingerprints: {\"fingerprints\": [...]} -> {\"verdicts\": [...]}")
async def check_fp_batch(body: FingerprintBatchIn, svc: ServiceDep, detector: DetectorDep) -> Response:
    """Check many fingerprints without writing."""
    items = _fp_items(body, detector, False)
    verdicts = await svc.locked(_fp_batch, items, detector.check_fingerprints, inline=len(items) <= 32)
    return json_response({"verdicts": _count(svc, "check", verdicts)})


@router.post("/v1/fingerprints/add/batch", response_model=None, responses=answers(VerdictsOut, 409),
             summary="Add many fingerprints in one transaction; a bad one gets status 'error'")
def add_fp_batch(body: FingerprintBatchIn, svc: ServiceDep, detector: DetectorDep) -> Response:
    """Add many fingerprints in one transaction."""
    items = _fp_items(body, detector, True)
    with svc.lock:
        verdicts = _fp_batch(items, detector.add_fingerprints)
    return json_response({"verdicts": _count(svc, "add", verdicts)})

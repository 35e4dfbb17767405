"""The lookup routes: stored pages, clusters, hosts, rules, the decision before the fetch,
expiry and the store's counts (each under the decision lock, in the thread pool)."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from neardup.crawl.signals import host_key
from neardup.model import DEFAULT_HOST_MIN_PAGES, DEFAULT_TRAP_MEMBERS
from neardup.service.guard import error, json_response
from neardup.service.models import (
    MAX_ID,
    ClusterInfoOut,
    ClusterOut,
    ConfigOut,
    DueOut,
    ExpiredOut,
    ExpireIn,
    FetchDecisionOut,
    HistoryOut,
    HostOut,
    HostRulesOut,
    HostsOut,
    PageOut,
    PagesOut,
    RulesOut,
    StatsOut,
    ThresholdsOut,
    answers,
    has_surrogates,
)
from neardup.service.state import ServiceDep

router = APIRouter()


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every non-finite number as None (a store written before the checks at the
    door may hold an infinite change rate; JSON has no infinity)."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


@router.get("/v1/pages/{page_id}", summary="A stored page", response_model=None, responses=answers(PageOut, 404))
def get_page(svc: ServiceDep, page_id: int) -> Any:
    """A stored page (404 when there is none)."""
    if not 0 <= page_id <= MAX_ID:
        return error(404, f"no page with id {page_id}")
    with svc.lock:
        rec = svc.detector.page(page_id)
    if rec is None:
        return error(404, f"no page with id {page_id}")
    return json_response(_finite(rec.to_dict(svc.detector.config.bits)))


@router.get("/v1/clusters/{cluster_id}", summary="A cluster: members, canonical, why each joined", response_model=None,
            responses=answers(ClusterOut, 404))
def get_cluster(svc: ServiceDep, cluster_id: int) -> Any:
    """A cluster's members, canonical, and why each joined."""
    if not 0 <= cluster_id <= MAX_ID:
        return error(404, f"no cluster with id {cluster_id}")
    with svc.lock:
        members = svc.detector.cluster(cluster_id)
        canonical = svc.detector.store.cluster_canonical(cluster_id)
    if not members:
        return error(404, f"no cluster with id {cluster_id}")
    return {
        "id": cluster_id, "canonical_id": canonical, "size": len(members),
        "canonical_url": next((m.url for m in members if m.id == canonical), None),
        "members": [{"id": m.id, "url": m.url, "status": m.status, "matched_id": m.matched_id,
                     "distance": m.distance, "first_seen": m.first_seen, "fetched_at": m.fetched_at,
                     "canonical": m.id == canonical} for m in members],
    }


@router.get("/v1/clusters/{cluster_id}/pages", summary="A cluster's members as stored pages", response_model=None,
            responses=answers(PagesOut, 404))
def get_cluster_pages(svc: ServiceDep, cluster_id: int) -> Any:
    """Every member of a cluster as a stored page (404 when there is no such cluster)."""
    if not 0 <= cluster_id <= MAX_ID:
        return error(404, f"no cluster with id {cluster_id}")
    with svc.lock:
        members = svc.detector.cluster(cluster_id)
    if not members:
        return error(404, f"no cluster with id {cluster_id}")
    bits = svc.detector.config.bits
    return json_response({"pages": [_finite(m.to_dict(bits)) for m in members]})


@router.get("/v1/config", summary="The fingerprint config, spec and settings the service decides with",
            response_model=None, responses=answers(ConfigOut))
def get_config(svc: ServiceDep) -> Any:
    """What a crawler needs to compute fingerprints the service accepts (``Client.fingerprint``)."""
    det = svc.detector
    return json_response({"config": det.config.to_dict(), "spec": det.config.spec, "settings": det.settings.to_dict()})


@router.get("/v1/thresholds", summary="The k and verify a URL is decided with", response_model=None,
            responses=answers(ThresholdsOut))
def get_thresholds(svc: ServiceDep, url: str) -> Any:
    """Its host's tuned thresholds, else the service's."""
    k, verify = svc.detector.thresholds(url)
    return json_response({"k": k, "verify": verify})


@router.post("/v1/rules/learn", summary="Re-learn the URL rules of every host from the whole store",
             response_model=None, responses=answers(RulesOut))
def learn_rules(svc: ServiceDep) -> Response:
    """One pass over the stored pages (an operator's call, not a crawler's)."""
    with svc.lock:
        rules = [r.to_dict() for r in svc.detector.learn_rules()]
    return json_response({"rules": rules})


@router.get("/v1/hosts/{host}", summary="Duplicate and change figures of a host", response_model=None,
            responses=answers(HostOut, 404))
def get_host(svc: ServiceDep, host: str, window: float | None = None, at: float | None = None,
             trap_members: int = DEFAULT_TRAP_MEMBERS) -> Any:
    """A host's figures (:meth:`Detector.host`: counts, rates, largest cluster, rules); the
    host is normalised as stored keys are (``BÜCHER.example`` is ``xn--bcher-kva.example``);
    ``window``, ``at`` and ``trap_members`` are checked as the Detector checks them (400)."""
    if len(host) > 1024 or has_surrogates(host):
        return error(404, f"no page stored for host {host[:100]!r}")
    with svc.lock:
        found = svc.detector.host(host, window=window, at=at, trap_members=trap_members)
    if found is None:
        return error(404, f"no page stored for host {host!r}")
    return json_response(found)

# -- before the fetch, rules, hosts, expiry: the Detector's other operations -----------
@router.get("/v1/should-fetch", summary="Should a crawler fetch this URL? (before the fetch)", response_model=None,
            responses=answers(FetchDecisionOut))
def should_fetch(svc: ServiceDep, url: str, max_age: float | None = None, host_max_duplicate_rate: float | None = None,
                 host_min_pages: int = DEFAULT_HOST_MIN_PAGES) -> Response:
    """Should a crawler fetch this URL (before the fetch)? ``url`` is echoed as given, beside
    its ``key``; ``max_age`` (>= 0) and ``host_min_pages`` (>= 1) are checked as the Detector
    checks them (400 ConfigError)."""
    with svc.lock:
        decision = svc.detector.should_fetch(url, max_age=max_age, host_max_duplicate_rate=host_max_duplicate_rate,
                                         host_min_pages=host_min_pages)
    return json_response(decision.to_dict())


@router.get("/v1/history", summary="A stored URL's fetch history and recrawl schedule", response_model=None,
            responses=answers(HistoryOut, 404))
def get_history(svc: ServiceDep, url: str) -> Any:
    """A stored URL's fetches, change rate and next planned fetch (404 when not stored)."""
    with svc.lock:
        found = svc.detector.history(url)
    if found is None:
        return error(404, f"URL {url[:200]!r} is not stored")
    return json_response(found.to_dict())


@router.get("/v1/due", summary="Stored URLs a recrawl should fetch now (or at at), paged by URL",
            response_model=None, responses=answers(DueOut))
def get_due(svc: ServiceDep, at: float | None = None, limit: int = 1000, after: str | None = None) -> Response:
    """The stored URLs due for a fetch (kept contents with no next fetch, or one at or before
    ``at``), ``limit`` after the URL ``after``; ``next`` is the ``after`` of the next page."""
    if after is not None and (len(after) > 8192 or has_surrogates(after)):
        return error(400, f"bad after {after[:100]!r}", kind="InputError")
    with svc.lock:
        urls = svc.detector.due(at, limit=limit, after=after)
    return json_response({"urls": urls, "next": urls[-1] if len(urls) == limit else None})


@router.get("/v1/rules", summary="Learned URL rules of every host", response_model=None,
            responses=answers(RulesOut))
def get_rules(svc: ServiceDep) -> Response:
    """Learned URL rules of every host."""
    with svc.lock:
        rules = [r.to_dict() for r in svc.detector.rules()]
    return json_response({"rules": rules})


@router.get("/v1/hosts/{host}/rules", summary="Learned URL rules of one host", response_model=None,
            responses=answers(HostRulesOut))
def get_host_rules(svc: ServiceDep, host: str) -> Response:
    """Learned URL rules of one host."""
    if len(host) > 1024 or has_surrogates(host):
        return error(400, f"bad host {host[:100]!r}", kind="InputError")
    with svc.lock:
        rules = [r.to_dict() for r in svc.detector.rules(host)]
    return json_response({"host": host_key(host), "rules": rules})


@router.get("/v1/hosts", summary="Per-host duplicate signals, sorted and paged", response_model=None,
            responses=answers(HostsOut))
def get_hosts(svc: ServiceDep, top: int | None = None, offset: int = 0, window: float | None = None,
              at: float | None = None, sort: str = "duplicate_rate",
              trap_members: int = DEFAULT_TRAP_MEMBERS) -> Response:
    """Per-host duplicate signals, sorted and paged."""
    if offset < 0 or (top is not None and top < 0):
        return error(400, "top and offset must be >= 0", kind="ConfigError")
    with svc.lock:
        rows = svc.detector.hosts(window=window, at=at, sort=sort, trap_members=trap_members)
    end = len(rows) if top is None else offset + top
    return json_response({"hosts": rows[offset:end], "total": len(rows), "offset": offset})


@router.post("/v1/expire", summary="Forget pages last fetched more than older_than seconds ago",
          response_model=None, responses=answers(ExpiredOut))
def expire(svc: ServiceDep, body: ExpireIn) -> Response:
    """Forget pages last fetched more than older_than seconds ago."""
    with svc.lock:
        return json_response({"expired": svc.detector.expire(body.older_than)})


@router.get("/v1/clusters/{cluster_id}/info", summary="A cluster's size, canonical and growth (no members)",
            response_model=None, responses=answers(ClusterInfoOut, 404))
def get_cluster_info(svc: ServiceDep, cluster_id: int, at: float | None = None) -> Any:
    """A cluster's size, canonical and growth."""
    if not 0 <= cluster_id <= MAX_ID:
        return error(404, f"no cluster with id {cluster_id}")
    with svc.lock:
        info = svc.detector.cluster_info(cluster_id, at=at)
    if info is None:
        return error(404, f"no cluster with id {cluster_id}")
    return json_response(info)


@router.get("/v1/stats", summary="Store counts and the fingerprint spec", response_model=None,
            responses=answers(StatsOut))
def get_stats(svc: ServiceDep) -> dict[str, Any]:
    """Store counts and the fingerprint spec."""
    with svc.lock:
        stats = svc.detector.stats()
    return {**stats, "spec": svc.detector.config.spec, "k": svc.detector.k, "method": svc.detector.method}

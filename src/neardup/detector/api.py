"""What a detector offers, embedded or over HTTP: :class:`DetectorAPI`.

:class:`neardup.Detector` (in this process, over a store) and :class:`neardup.Client` (the
same calls to ``neardup serve``) both implement it, with the same signatures, return types
and errors, so a crawler switches from one to the other by changing the line that makes it.
``tests/test_api_parity.py`` fails when the two drift apart: a parameter, a default, an
annotation or a return type that differs, or a public method of either that is neither here
nor listed there as one side's own (with the reason).

>>> from neardup import Detector
>>> from neardup.detector.api import DetectorAPI
>>> isinstance(Detector(), DetectorAPI)
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from neardup.crawl.schedule import UrlHistory
from neardup.crawl.urlrules import Rule
from neardup.fingerprint.core import Fingerprint
from neardup.model import DEFAULT_TRAP_MEMBERS, FetchDecision, Page, Verdict
from neardup.store.base import PageRecord


@runtime_checkable
class DetectorAPI(Protocol):
    """The operations :class:`~neardup.Detector` and :class:`~neardup.Client` share."""

    def check(self, url: str, content: bytes | str, headers: Mapping[str, str] | None = None) -> Verdict:
        """Decide what ``content`` at ``url`` is, without writing anything."""
        ...

    def add(self, url: str, content: bytes | str, headers: Mapping[str, str] | None = None, *,
            fetched_at: float | datetime | None = None, priority: float | None = None) -> Verdict:
        """Decide and record ``content`` at ``url``."""
        ...

    def add_many(self, pages: Iterable[Page | tuple[str, bytes | str]]) -> list[Verdict]:
        """Add a batch in one transaction; a bad page gets status ``error``."""
        ...

    def add_revisit(self, url: str, *, fetched_at: float | datetime | None = None) -> Verdict:
        """Record an unchanged fetch of the stored ``url`` that sent no content (a 304, a WARC revisit)."""
        ...

    def check_fingerprint(self, url: str, fp: Fingerprint) -> Verdict:
        """:meth:`check` for a fingerprint computed elsewhere (same spec)."""
        ...

    def add_fingerprint(self, url: str, fp: Fingerprint, *, fetched_at: float | datetime | None = None,
                        priority: float | None = None) -> Verdict:
        """:meth:`add` for a fingerprint computed elsewhere (same spec)."""
        ...

    def check_fingerprints(self, items: Iterable[tuple[str, Fingerprint]]) -> list[Verdict]:
        """:meth:`check_fingerprint` for many ``(url, fp)`` pairs."""
        ...

    def add_fingerprints(
        self, items: Iterable[tuple[str, Fingerprint] | tuple[str, Fingerprint, float | datetime | None, float | None]],
    ) -> list[Verdict]:
        """:meth:`add_fingerprint` for many ``(url, fp[, fetched_at, priority])``, one transaction."""
        ...

    def expire(self, older_than: float) -> int:
        """Forget pages last fetched more than ``older_than`` seconds ago; how many."""
        ...

    def cluster_info(self, cluster_id: int, at: float | None = None) -> dict[str, Any] | None:
        """A cluster's size, canonical and growth (None when there is no such cluster)."""
        ...

    def should_fetch(self, url: str, *, max_age: float | None = None,
                     host_max_duplicate_rate: float | None = None, host_min_pages: int = 20) -> FetchDecision:
        """Before the fetch: fetch or skip ``url``, and why."""
        ...

    def due(self, at: float | None = None, *, limit: int = 1000, after: str | None = None) -> list[str]:
        """The stored URLs a recrawl should fetch at ``at`` (default now), ``limit`` at a time
        after the URL ``after``."""
        ...

    def history(self, url: str) -> UrlHistory | None:
        """A stored URL's fetch history and recrawl schedule (None when not stored)."""
        ...

    def hosts(self, top: int | None = None, *, window: float | None = None, at: float | None = None,
              sort: str = "duplicate_rate", trap_members: int = DEFAULT_TRAP_MEMBERS) -> list[dict[str, Any]]:
        """Per-host duplicate signals, sorted, the ``top`` first."""
        ...

    def fingerprint(self, content: bytes | str, url: str | None = None,
                    headers: Mapping[str, str] | None = None) -> Fingerprint:
        """A fingerprint with the detector's settings (no decision, no write)."""
        ...

    def thresholds(self, url: str | None) -> tuple[int, float | None]:
        """The ``(k, verify)`` a page at ``url`` is decided with."""
        ...

    def page(self, page_id: int) -> PageRecord | None:
        """A stored page (None when there is none)."""
        ...

    def cluster(self, cluster_id: int) -> list[PageRecord]:
        """The members of a cluster (empty when there is no such cluster)."""
        ...

    def rules(self, host: str | None = None) -> list[Rule]:
        """The learned URL rules of ``host``, or of every host."""
        ...

    def learn_rules(self) -> list[Rule]:
        """Re-learn the URL rules from the whole store."""
        ...

    def host(self, name: str, *, window: float | None = None, at: float | None = None,
             trap_members: int = DEFAULT_TRAP_MEMBERS) -> dict[str, Any] | None:
        """One host's figures, with its learned URL rules (None when it has no page)."""
        ...

    def stats(self) -> dict[str, Any]:
        """Page and cluster counts (``pages``, ``clusters``, counts by status)."""
        ...

    def close(self) -> None:
        """Release the store (or the connection)."""
        ...


__all__ = ["DetectorAPI"]

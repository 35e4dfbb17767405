"""Revisits: a fetch that found a stored URL's content unchanged without sending it again.

An HTTP ``304 Not Modified`` answer to a conditional request, and a WARC ``revisit`` record of
the *identical-payload-digest* or *server-not-modified* profile (the archive kept only a
reference to an earlier capture), say "at time t this URL still served what is stored". They
are the observations a change-rate estimate needs most, so they count as an ``unchanged``
fetch of the URL at their time: a version in its history, its fetch counters and its next
fetch move as for a re-fetch whose digest is the stored one, and the URL keeps its decision
and cluster. Nothing is fingerprinted and nothing is matched.

A revisit of a URL that is not stored is refused (:class:`~neardup.errors.NotStoredError`):
there is nothing it could be unchanged from.

>>> from neardup import Detector
>>> det = Detector()
>>> text = " ".join(f"word{i}" for i in range(400))
>>> _ = det.add("https://a.example/1", text, fetched_at=0.0)
>>> v = det.add_revisit("https://a.example/1", fetched_at=3600.0)
>>> v.status, v.version, v.since_last_fetch, det.history("https://a.example/1").fetches
('new', 'unchanged', 3600.0, 2)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from neardup.detector.versions import Revisit, counters, kept_verdict, version_fields
from neardup.errors import NotStoredError
from neardup.store.base import Store, VersionRow

if TYPE_CHECKING:
    from neardup.crawl.signals import CrawlSignals
    from neardup.detector.mirror import IndexMirror
    from neardup.model import Page, Verdict


@dataclass(frozen=True)
class Revisiting:
    """What a revisit writes to: the Detector's store, index mirror and crawl signals, its
    SimHash width and its revisit bounds."""

    store: Store
    mirror: IndexMirror
    signals: CrawlSignals
    bits: int
    min_interval: float
    max_interval: float


def record_revisit(to: Revisiting, url: str, now: float, fetched_url: str | None = None) -> Verdict:
    """Record an unchanged fetch of the stored URL ``url`` (its key) at ``now``, inside the
    Detector's write; the verdict is the URL's stored decision with ``version`` ``unchanged``."""
    own = to.store.page_by_url(url)
    if own is None or own.id is None:
        raise NotStoredError(f"{url}: a revisit of a URL that is not stored (nothing it could be unchanged from)")
    revisit = Revisit("unchanged", 0, 1.0, now - own.fetched_at, keep=True)
    history = counters(to.store, own, now, revisit, min_interval=to.min_interval, max_interval=to.max_interval)
    rec = replace(own, fetched_at=now, fetched_url=fetched_url if fetched_url is not None else own.fetched_url,
                  **history)
    to.store.update_page(rec, to.bits)
    to.store.add_version(own.id, VersionRow(now, own.digest, own.simhash, False, 0, 1.0), to.bits, fetches=rec.fetches)
    to.mirror.reconcile({own.simhash} if own.status != "empty" else set(), {own.id: own}, rec)
    to.signals.observe(url, own.cluster_id if own.status != "empty" else None, own.simhash, first=False)
    base: dict[str, Any] = dict(url=url, page_id=own.id, digest=own.digest, simhash=f"{own.simhash:0{to.bits // 4}x}",
                                title=own.title, fetched_url=fetched_url, next_fetch=rec.next_fetch,
                                **version_fields(revisit))
    return kept_verdict(to.store, rec, None, base)


def foreign_revisit(page: Page) -> str | None:
    """Why the online Detector refuses ``page``, a revisit of another URL's capture
    (:attr:`Page.refers_to <neardup.model.Page.refers_to>`: the store keeps no other URL's
    content for this one; the batch paths read it), else None."""
    if page.revisit and page.refers_to:
        return f"{page.url}: a revisit of {page.refers_to}'s capture (read on the batch paths: dedup --batch, Spark)"
    return None

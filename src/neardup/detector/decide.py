"""The decision for one page against the stored pages: empty, exact (digest), near (the best
candidate of the SimHash tables, the sketch bands and the MinHash LSH that passes
:func:`neardup.matching.match`), partial (containment), else new. The URL's own stored
version is never a candidate (a re-fetch is compared with it first, in :mod:`neardup.detector.versions`).

>>> from neardup import Detector
>>> det = Detector()
>>> text = " ".join(f"word{i}" for i in range(400))
>>> _ = det.add("https://a.example/1", text)
>>> d = decide(det, "https://b.example/1", det.fingerprint(text.replace("word5 ", "")))
>>> d.status, d.match.url
('near', 'https://a.example/1')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from neardup.detector.mirror import IndexMirror
from neardup.fingerprint.core import Fingerprint, FingerprintConfig, hamming
from neardup.fingerprint.minhash import jaccard
from neardup.index.bands import far_verify
from neardup.matching import Side, far_match, match
from neardup.store.base import PageRecord, Store


class Deciding(Protocol):
    """What :func:`decide` reads of a detector (:class:`neardup.detector.core.Detector` is one):
    its store and index, its method and thresholds, and the ``(k, verify)`` of a URL."""

    store: Store
    mirror: IndexMirror
    method: str
    threshold: float
    containment: float | None
    config: FingerprintConfig

    def thresholds(self, url: str | None) -> tuple[int, float | None]: ...

FETCH = object()  # "not read yet" for arguments where None means "read, nothing there"


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` found: a status, the stored page matched, how."""

    status: str
    match: PageRecord | None = None
    distance: int | None = None
    method: str | None = None
    score: float | None = None



def decide(det: Deciding, url: str, fp: Fingerprint, same: Any = FETCH, exclude: PageRecord | None = None) -> Decision:
    """empty -> exact (digest) -> near (SimHash <= k and/or MinHash >= threshold, the
    best match first) -> partial (containment) -> new, against the stored pages other
    than ``exclude`` (the URL's own stored version: a URL is never its own duplicate).
    ``same``: the page with the same digest when the caller has read it
    (:meth:`Store.lookup`), else fetched."""
    if fp.empty:
        return Decision("empty")
    side = Side.of(fp, url)
    k, verify = det.thresholds(url)
    own_id = exclude.id if exclude is not None else None
    if same is FETCH or (same is not None and same.id == own_id):
        same = det.store.page_by_digest(fp.digest)
        if same is not None and same.id == own_id:
            same = None  # (its digest is the new one's: the caller kept its decision)
    if same is not None and match(side, Side.of_record(same), k, verify).status == "exact":
        return Decision("exact", same, 0, "digest", 1.0)
    sig = fp.minhash.signature if fp.minhash is not None else None
    found: dict[int, set[str]] = {}
    anywhere: set[int] = set()  # only the sketch bands brought them: the sketch decides at any distance
    if det.method in ("simhash", "both"):
        for page_id, _ in det.mirror.search(fp.simhash, k):
            found.setdefault(page_id, set()).add("simhash")
        for page_id, _ in det.mirror.sketch_candidates(fp.sketch, far_verify(verify)):
            if page_id not in found:
                found[page_id] = {"simhash"}
                anywhere.add(page_id)
    if det.method in ("minhash", "both") and sig is not None:
        for page_id, _ in det.mirror.query(sig, det.threshold):
            found.setdefault(page_id, set()).add("minhash")
    if exclude is not None and own_id in found:
        # the index holds one page per SimHash value: another page with the value of the
        # URL's stored version stands in for it
        methods_of_own = found.pop(own_id)
        other = det.store.lowest_live(exclude.simhash, det.config.bits, exclude=own_id)
        if other is not None and other not in found:
            found[other] = methods_of_own
            if own_id in anywhere:
                anywhere.add(other)
        anywhere.discard(own_id)
    ranked = []
    recs = det.store.pages_by_ids(list(found))  # one statement; one page per SimHash value
    for page_id, methods in found.items():
        rec = recs.get(page_id)
        if rec is None:
            continue
        verdict = (far_match(side, Side.of_record(rec), far_verify(verify)) if page_id in anywhere
                   else match(side, Side.of_record(rec), k, verify))
        if verdict.reason in ("empty", "boilerplate"):
            continue
        if verdict.status is None:
            methods = methods - {"simhash"}  # a SimHash candidate the sketch rejects
            if not methods:
                continue
        distance, score = verdict.distance, verdict.score
        stored = det.mirror.signature(rec) if sig is not None else None
        if sig is not None and stored is not None:
            score = jaccard(sig, stored.signature)
        # best first: highest Jaccard estimate when known, then smallest distance, oldest
        ranked.append((-(score if score is not None else -1.0), distance, page_id, rec, methods, score))
    if ranked:
        _, distance, _, rec, methods, score = min(ranked, key=lambda r: r[:3])
        return Decision("near", rec, distance, "+".join(sorted(methods)), score)
    if det.containment is not None and fp.minhash is not None:
        hits = det.mirror.query(fp.minhash.signature, det.containment, set_size=fp.minhash.set_size,
                                 by="containment")
        recs = det.store.pages_by_ids([page_id for page_id, _ in hits if page_id != own_id])
        for page_id, score in hits:
            rec = recs.get(page_id)
            if rec is not None and (rec.set_size or 0) >= fp.minhash.set_size:
                return Decision("partial", rec, hamming(rec.simhash, fp.simhash), "minhash", score)
    return Decision("new")

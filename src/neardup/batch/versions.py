"""Re-fetches in the batch job: the captures of one URL are versions of it, never pages of
their own (what the online :class:`~neardup.detector.core.Detector` does: :mod:`neardup.detector.versions`).

The rule, one definition for :func:`neardup.batch.dedup.dedup_batch` (both engines), ``neardup
dedup --batch`` (:func:`solve_captures`, on columns) and :mod:`neardup.batch.spark.versions`:

* captures are grouped by the Detector's URL key (:func:`url_group_key`:
  :func:`neardup.urls.normalize_url` with the default :class:`~neardup.urls.UrlConfig`); a
  URL that does not normalise (the Detector refuses it with :class:`~neardup.errors.URLError`)
  is keyed by itself, as given, so such captures are versions of one another only when
  spelled alike;
* within a URL, captures are ordered by fetch time (``first_seen``; NaN last), ties by the
  capture's own fields (:func:`capture_key`: URL as given, digest, title, link, priority,
  SimHash, emptiness, length), then input position: the answer depends on the set of
  captures, not their order;
* the **last** capture is the URL's current version: only it takes part in digest groups,
  candidates, clusters and the canonical choice, with the fetch time of the URL's
  **earliest** capture (the ``first-seen`` policy's time);
* every capture keeps its output row (its own url, digest, SimHash) with its URL's decision
  (status, cluster, canonical, match, distance: the current version's) and ``version``: None
  for a URL's first capture, else ``unchanged`` (same digest and emptiness as the previous
  capture: :func:`neardup.detector.versions.compare_versions`' test) or ``changed``.

>>> from neardup.batch import BatchRecord
>>> rows = [BatchRecord("https://a.example/x", "d1", 1, first_seen=2.0),
...         BatchRecord("https://A.example/x#top", "d2", 2, first_seen=1.0),
...         BatchRecord("https://b.example/y", "d1", 1, first_seen=3.0)]
>>> current, caps = split_records(rows)
>>> [(r.url, r.first_seen) for r in current], caps.slot.tolist(), versions(caps)
([('https://a.example/x', 1.0), ('https://b.example/y', 3.0)], [0, 0, 1], ['changed', None, None])
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.urls import CLEAN_PATH, LDH_HOST

if TYPE_CHECKING:
    from neardup.batch.arrays import ArrayAnswer, FingerprintArrays
    from neardup.batch.graph import BatchRecord, BatchResult

from neardup.batch.graph import CHANGED, NO_VERSION, UNCHANGED, VERSIONS, url_group_key

#: a URL that :func:`normalize_url` returns unchanged (checked by Arrow, no Python a row):
#: lower-case scheme and LDH host, no user, port, query or fragment, a path of characters it
#: keeps as they are (and no dot segment, tested apart)
CLEAN_URL = f"^(?:https?|ftp)://{LDH_HOST.pattern}{CLEAN_PATH.pattern}$"  # normalize_url's own patterns
CHUNK_ROWS = 1 << 20


def _order_float(x: float | None, none: float) -> tuple[bool, float]:
    """A float's place in the order: NaN after every number (as Arrow and Spark sort)."""
    if x is None:
        return False, none
    return (True, 0.0) if math.isnan(x) else (False, float(x))


def capture_key(r: BatchRecord) -> tuple:
    """Where a capture sits among its URL's captures (before the input position): fetch
    time, then its own fields, so that equal times do not depend on the input order."""
    return (_order_float(r.first_seen, 0.0), r.url, r.digest, r.title or "", r.canonical_link or "",
            _order_float(r.priority, -math.inf), r.simhash, bool(r.empty), int(r.length))


@dataclass
class Captures:
    """How rows map to their URLs' current versions: ``current`` (rows of the current
    versions, in input order), ``slot`` (each row's URL's index in ``current``),
    ``version`` (codes: -1 none, 0 unchanged, 1 changed), ``earliest`` (for each current
    version, the row of its URL's earliest capture)."""

    current: np.ndarray
    slot: np.ndarray
    version: np.ndarray
    earliest: np.ndarray

    @classmethod
    def identity(cls, n: int) -> Captures:
        """Every URL fetched once."""
        rows = np.arange(n, dtype=np.int64)
        return cls(rows, rows, np.full(n, NO_VERSION, dtype=np.int8), rows)

    @property
    def refetched(self) -> bool:
        """Whether some URL has more than one capture."""
        return bool(self.current.shape[0] < self.slot.shape[0])


def plan(n: int, rows: np.ndarray, group: np.ndarray, digest: np.ndarray, empty: np.ndarray) -> Captures:
    """The :class:`Captures` of ``n`` rows, given the rows of URLs with two captures or more
    sorted by (URL, capture order): ``rows``, and for each its URL's ``group`` id, its
    ``digest`` (codes: equal digests, equal codes) and ``empty`` flag."""
    if rows.shape[0] == 0:
        return Captures.identity(n)
    first = np.r_[True, group[1:] != group[:-1]]
    last = np.r_[group[1:] != group[:-1], True]
    same = np.r_[False, (digest[1:] == digest[:-1]) & (empty[1:] == empty[:-1])]
    version = np.full(n, NO_VERSION, dtype=np.int8)
    version[rows] = np.where(first, NO_VERSION, np.where(same, UNCHANGED, CHANGED))
    keep = np.ones(n, dtype=bool)
    keep[rows[~last]] = False
    current = np.flatnonzero(keep)
    index = np.full(n, -1, dtype=np.int64)
    index[current] = np.arange(current.shape[0])
    slot = index.copy()
    slot[rows] = index[rows[last]][np.cumsum(first) - 1]
    earliest = current.copy()
    earliest[index[rows[last]]] = rows[first]
    return Captures(current, slot, version, earliest)


def versions(caps: Captures) -> list[str | None]:
    """Each row's ``version`` as the verdicts carry it."""
    return [None if c < 0 else VERSIONS[c] for c in caps.version.tolist()]


# -- records (dedup_batch) -----------------------------------------------------------------------

def split_records(rows: Sequence[BatchRecord]) -> tuple[list[BatchRecord], Captures]:
    """The current versions (module docs; ``first_seen`` the URL's earliest) and how every
    row maps to them."""
    keys: dict[str, int] = {}
    group = np.array([keys.setdefault(url_group_key(r.url), len(keys)) for r in rows], dtype=np.int64)
    if len(keys) == len(rows):
        return list(rows), Captures.identity(len(rows))
    counts = np.bincount(group)
    repeated = np.flatnonzero(counts[group] > 1).tolist()
    order = np.array(sorted(repeated, key=lambda i: (int(group[i]), capture_key(rows[i]), i)), dtype=np.int64)
    codes: dict[str, int] = {}
    digest = np.array([codes.setdefault(rows[i].digest, len(codes)) for i in order.tolist()], dtype=np.int64)
    empty = np.array([bool(rows[i].empty) for i in order.tolist()], dtype=bool)
    caps = plan(len(rows), order, group[order], digest, empty)
    current = [rows[c] if c == e or rows[c].first_seen == rows[e].first_seen
               else dataclasses.replace(rows[c], first_seen=rows[e].first_seen)
               for c, e in zip(caps.current.tolist(), caps.earliest.tolist())]
    return current, caps


def expand_result(result: BatchResult, rows: Sequence[BatchRecord], caps: Captures) -> BatchResult:
    """The answer for every row from the answer for the current versions (``result``):
    each row its own url, digest and SimHash, its URL's decision and its ``version``."""
    from neardup.batch.graph import BatchResult, BatchVerdict

    if not caps.refetched:
        return result
    verdicts = []
    for r, s, code in zip(rows, caps.slot.tolist(), caps.version.tolist()):
        v = result.verdicts[s]
        verdicts.append(BatchVerdict(r.url, r.digest, r.simhash, v.status, v.cluster, v.canonical, v.match,
                                     v.distance, None if code < 0 else VERSIONS[code]))
    clusters: dict[int, list[int]] = {}
    for i, v in enumerate(verdicts):
        clusters.setdefault(v.cluster, []).append(i)
    return BatchResult(verdicts, result.pairs, clusters, result.errors)


# -- columns (dedup --batch) ---------------------------------------------------------------------

def own_keys(url: Any) -> np.ndarray:
    """Which URLs of an Arrow string array are their own key (:data:`CLEAN_URL` and no dot
    segment), with no Python call a row; nulls are not."""
    import pyarrow.compute as pc

    clean = pc.and_(pc.match_substring_regex(url, CLEAN_URL), pc.invert(pc.match_substring(url, "/.")))
    return np.asarray(pc.fill_null(clean, False).to_numpy(zero_copy_only=False), dtype=bool)


def url_keys(url: Any) -> Any:
    """:func:`url_group_key` of every URL of an Arrow string array, as a large_string array: URLs
    that are their own key (:data:`CLEAN_URL`) are left as they are, the rest go through
    Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    url = url.cast(pa.large_string())
    dirty = np.flatnonzero(~own_keys(url))
    if dirty.shape[0] == 0:
        return url
    fixed = pa.array([url_group_key(u) for u in url.take(pa.array(dirty)).to_pylist()], pa.large_string())
    mask = np.zeros(len(url), dtype=bool)
    mask[dirty] = True
    return pc.replace_with_mask(url, pa.array(mask), fixed)


def url_hashes(url: Any) -> np.ndarray:
    """A 63-bit BLAKE2b hash of each URL's key (:func:`url_keys`), a chunk of rows at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from neardup.batch.arrays import hash_messages

    n = len(url)
    out = np.empty(n, dtype=np.int64)
    for lo in range(0, n, CHUNK_ROWS):
        keys = url_keys(url.slice(lo, min(n, lo + CHUNK_ROWS) - lo))
        out[lo:lo + len(keys)] = hash_messages(pc.binary_join_element_wise(
            pa.scalar("u", pa.large_string()), keys, pa.scalar("\x00", pa.large_string())))
    return out


def split_arrays(fa: FingerprintArrays) -> tuple[FingerprintArrays, Captures]:
    """:func:`split_records` on columns: the rows whose key hash repeats (:func:`url_hashes`)
    grouped by their keys (exactly: a hash collision only costs a look), their captures
    ordered by one Arrow sort on :func:`capture_key`'s fields."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = fa.n
    h = url_hashes(fa.url)
    hs = np.sort(h)
    twice = hs[1:][hs[1:] == hs[:-1]]
    cand = np.flatnonzero(np.isin(h, twice)) if twice.shape[0] else np.zeros(0, dtype=np.int64)
    del h, hs, twice
    code = np.asarray(pc.dictionary_encode(url_keys(fa.url.take(pa.array(cand)))).indices.to_numpy(
        zero_copy_only=False), dtype=np.int64) if cand.shape[0] else np.zeros(0, dtype=np.int64)
    many = np.bincount(code)[code] > 1 if cand.shape[0] else np.zeros(0, dtype=bool)
    rep, group = cand[many], code[many]
    if rep.shape[0] == 0:
        return fa, Captures.identity(n)
    take = pa.array(rep)
    fs, prio, has_p = fa.first_seen[rep], fa.priority[rep], fa.has_priority[rep]
    table = pa.table({
        "g": pa.array(group), "fs_nan": pa.array(np.isnan(fs)), "fs": pa.array(np.where(np.isnan(fs), 0.0, fs)),
        "url": fa.url.take(take), "digest": fa.digest.take(take), "title": pc.fill_null(fa.title.take(take), ""),
        "link": pc.fill_null(fa.canonical_link.take(take), ""),
        "p_nan": pa.array(has_p & np.isnan(prio)),
        "p": pa.array(np.where(has_p, np.where(np.isnan(prio), 0.0, prio), -math.inf)),
        "simhash": pa.array(fa.simhash[rep]), "empty": pa.array(fa.empty[rep]), "length": pa.array(fa.length[rep]),
        "row": take})
    sort = np.asarray(pc.sort_indices(table, sort_keys=[(c, "ascending") for c in table.column_names]).to_numpy())
    rows = rep[sort]
    digest = np.asarray(pc.dictionary_encode(fa.digest.take(pa.array(rows))).indices.to_numpy(zero_copy_only=False),
                        dtype=np.int64)
    caps = plan(n, rows, group[sort], digest, fa.empty[rows])
    return take_rows(fa, caps.current, fa.first_seen[caps.earliest]), caps


def take_rows(fa: FingerprintArrays, rows: np.ndarray, first_seen: np.ndarray) -> FingerprintArrays:
    """The rows ``rows`` of ``fa`` (their ``first_seen`` replaced by ``first_seen``)."""
    import pyarrow as pa

    from neardup.batch.arrays import FingerprintArrays

    take = pa.array(rows)
    where = {int(r): i for i, r in enumerate(rows.tolist())} if fa.odd_sketch else {}
    return FingerprintArrays(
        url=fa.url.take(take), digest=fa.digest.take(take), simhash=fa.simhash[rows], empty=fa.empty[rows],
        sketch=fa.sketch[rows], has_sketch=fa.has_sketch[rows], title=fa.title.take(take),
        length=fa.length[rows], canonical_link=fa.canonical_link.take(take), first_seen=first_seen,
        priority=fa.priority[rows], has_priority=fa.has_priority[rows],
        odd_sketch={where[r]: b for r, b in fa.odd_sketch.items() if r in where})


def expand_answer(answer: ArrayAnswer, fa: FingerprintArrays, caps: Captures) -> ArrayAnswer:
    """:func:`expand_result` on columns: ``answer`` (for the current versions) as the answer
    for every row of ``fa``."""
    from neardup.batch.arrays import ArrayAnswer

    if not caps.refetched:
        return answer
    cur, s = caps.current, caps.slot
    ra, rb, dist, score = answer.pairs
    return ArrayAnswer(fa, answer.status[s], answer.cluster[s], cur[answer.canonical[s]], answer.distance[s],
                       (cur[ra], cur[rb], dist, score), answer.timings, caps.version)


def solve_captures(fa: FingerprintArrays, **kw: Any) -> ArrayAnswer:
    """:func:`neardup.batch.arrays.solve` under the rule of re-fetches (module docs): what
    ``neardup dedup --batch`` runs on fingerprint Parquet."""
    from neardup.batch.arrays import solve

    current, caps = split_arrays(fa)
    return expand_answer(solve(current, **kw), fa, caps)

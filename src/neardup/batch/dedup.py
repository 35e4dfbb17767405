"""Batch deduplication of a whole input on one machine: one order-independent answer.

The online :class:`~neardup.detector.core.Detector` decides as pages arrive: a page joins the
cluster of its *best* stored match, clusters never merge, and the canonical page depends on
what came first. :func:`dedup_batch` instead looks at the whole input at once:

* **edges**: every pair of pages that :func:`neardup.matching.match` calls ``exact`` or
  ``near`` (SimHash distance ``<= k`` found exactly by the permuted tables' self-join, then
  the sketch's Jaccard estimate ``>= verify``; or, with ``method="minhash"``, LSH bands and a
  MinHash Jaccard estimate ``>= threshold``), the empty-page rule and the same-host
  repeated-boilerplate guard included;
* **clusters**: the connected components of that graph (so A ~ B ~ C puts A and C in one
  cluster even when they do not match each other; the online Detector keeps C apart when
  it arrives after A and B landed in different clusters);
* **canonical**: one per cluster by the policy chain (:mod:`neardup.canonical`) over all
  members. ``first-seen`` reads the pages' fetch times (``Page.fetched_at``; WARC dates),
  never the input order: ties (and inputs without times) fall to the URL, then the rest of
  the page's record (:func:`member_order`);
* **status** per page: ``empty`` (too little main content: a cluster of its own), ``new``
  (the cluster's canonical page), ``exact`` (same digest as the canonical) or ``near``;
  ``match`` is the canonical URL and ``distance`` the SimHash distance to it;
* **re-fetches**: the captures of one URL (its :func:`~neardup.urls.normalize_url` key) are
  versions of it, as online: only the last one takes part (with the URL's earliest fetch
  time), every capture gets its URL's decision and a ``version``
  (:mod:`neardup.batch.versions`).

The answer depends on the set of pages only: shuffling the input gives the same clusters
(ids included: a cluster's id is the smallest :func:`node_id` in it), canonicals and
statuses. :mod:`neardup.batch.spark.job` computes the same answer on Spark (tested equal).

How the graph stays linear when a page is copied 10^5 times: pages with the same digest,
host and title are one *node* (the match rule cannot tell them apart); pages with the same
digest form a *digest group* whose members all carry the same SimHash, sketch and length.
The join runs over digest groups (one entry per distinct main text), and
:func:`pair_edges` turns a linked pair of groups (or a group with itself) into a spanning
set of node edges without enumerating all node pairs: in a group with more than one host,
every node connects to the first node of another host (two nodes of different hosts always
match: the guard needs one host); only nodes of one host with short text compare titles
pairwise (by distinct title).

>>> from neardup.detector import Page
>>> body = "<html><title>T</title><body><p>" + " ".join(f"word{i}" for i in range(200)) + "</p></body></html>"
>>> res = dedup_batch([Page("https://a.example/1", body), Page("https://b.example/1", body.replace("word7 ", "")),
...                    Page("https://c.example/x", "<html><body><p>short</p></body></html>")])
>>> [(v.status, v.canonical) for v in res.verdicts]
[('new', 'https://a.example/1'), ('near', 'https://a.example/1'), ('empty', 'https://c.example/x')]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from neardup.batch.blocks import (
    PIGEON_K,
    WINDOW,
    bucket_cap,
    candidate_pairs,
    decide_pair,
    sketch_matrix,
)
from neardup.batch.graph import (
    ENGINES,
    METHODS,
    BatchRecord,
    BatchResult,
    BatchVerdict,
    UnionFind,
    choose_canonical,
    empty_node_id,
    member_tuple,
    node_id,
    pair_edges,
)
from neardup.batch.revisits import resolve_revisits
from neardup.batch.versions import expand_result, split_records
from neardup.canonical import CanonicalPolicy, policy_from_spec
from neardup.errors import ConfigError, NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint
from neardup.fingerprint.minhash import MinHashConfig, jaccard, signatures_from_bytes
from neardup.index.joins import self_join
from neardup.index.lsh import MinHashLSH
from neardup.matching import FAR_TITLE_VERIFY, GUARD_MAX_LENGTH, Side
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY, Page, default_k


def link_simhash(reps: Sequence[BatchRecord], k: int, verify: float | None, bands: bool = True, *,
                 nodes: Sequence[int] | None = None, max_bucket: int | None = None, window: int | None = None,
                 exact_k: bool = True) -> list[tuple[int, int, int, float | None]]:
    """Linked pairs (i, j, distance, score) of digest groups (given by one record each, none
    empty): the Detector's candidate stage over the whole input, each pair decided by
    :func:`decide_pair` (hosts left out: the guard is the nodes' business).

    Candidates: the sketch bands (``bands``) and the pigeonhole SimHash blocks at
    ``min(k, PIGEON_K)`` (:func:`candidate_pairs`; giant blocks windowed), plus, when
    ``k > PIGEON_K`` and ``exact_k``, the permuted tables' exact self-join at ``k``.
    ``nodes``: each group's node id (its smallest): a giant block is windowed in that order
    (a hash: a random order, the same on every path)."""
    if len(reps) < 2:
        return []
    values = np.array([r.simhash for r in reps], dtype=np.uint64)
    bins, ok = sketch_matrix([r.sketch for r in reps])
    rank = np.asarray(nodes if nodes is not None else range(len(reps)), dtype=np.int64)
    ia, ib = candidate_pairs(values, bins if bands else None, ok, rank, k, verify, bands,
                             bucket_cap(len(reps)) if max_bucket is None else max_bucket,
                             WINDOW if window is None else window)
    if k > PIGEON_K and exact_k:
        ja, jb, _ = self_join(values, k)
        n = np.int64(len(reps))
        code = np.unique(np.r_[ia * n + ib, np.minimum(ja, jb) * n + np.maximum(ja, jb)])
        ia, ib = code // n, code % n
    out = []
    for i, j in zip(ia.tolist(), ib.tolist()):
        a, b = reps[i], reps[j]
        m = decide_pair(Side(a.simhash, a.digest, False, a.sketch, None, None, a.length),
                        Side(b.simhash, b.digest, False, b.sketch, None, None, b.length), k, verify)
        if m.status is not None:
            out.append((i, j, m.distance, m.score))
    return out


# -- the candidate stage (bands + SimHash), shared with neardup.batch.spark.job ---------------------------


def band_keys(signatures: np.ndarray, threshold: float, config: MinHashConfig | None = None) -> np.ndarray:
    """(n, bands) LSH band keys, the banding the Detector's MinHashLSH uses at ``threshold``."""
    lsh = MinHashLSH(config or MinHashConfig(num_perm=signatures.shape[1]), threshold=threshold)
    return lsh.keys(signatures)


def link_minhash(reps: Sequence[BatchRecord], threshold: float) -> list[tuple[int, int, int, float | None]]:
    """Linked pairs of digest groups by MinHash: candidates share an LSH band, linked when
    the signatures' Jaccard estimate is ``>= threshold``."""
    if len(reps) < 2:
        return []
    if any(r.signature is None for r in reps):
        raise ConfigError("method 'minhash' needs MinHash signatures: fingerprint with "
                          "FingerprintConfig(minhash=MinHashConfig())")
    sigs = signatures_from_bytes([r.signature for r in reps])  # type: ignore[misc]
    keys = band_keys(sigs, threshold)
    cand: set[tuple[int, int]] = set()
    for band in range(keys.shape[1]):
        col = keys[:, band]
        order = np.argsort(col, kind="stable")
        sc = col[order]
        starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
        ends = np.r_[starts[1:], len(sc)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            if e - s > 1:
                members = sorted(order[s:e].tolist())
                cand.update((members[x], members[y]) for x in range(len(members)) for y in range(x + 1, len(members)))
    out: list[tuple[int, int, int, float | None]] = []
    for i, j in sorted(cand):
        score = jaccard(sigs[i], sigs[j])
        if score >= threshold:
            out.append((i, j, (reps[i].simhash ^ reps[j].simhash).bit_count(), score))
    return out


def _fingerprint_one(args: tuple[str, Any, Any, FingerprintConfig]) -> tuple[Fingerprint | None, str | None]:
    url, content, headers, config = args
    try:
        return fingerprint(content, url=url, headers=headers, config=config), None
    except NeardupError as exc:
        return None, f"{url}: {exc}"


def records_from_pages(pages: Iterable[Page], config: FingerprintConfig = DEFAULT_CONFIG,
                       jobs: int = 1) -> tuple[list[BatchRecord | None], list[str]]:
    """Fingerprint pages (``jobs`` processes) into records, in order; a page that cannot be
    fingerprinted (binary, oversized...) gives None and an error line."""
    pages = list(pages)
    work = [(p.url, p.content, p.headers, config) for p in pages]
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(jobs) as pool:
            fps = list(pool.map(_fingerprint_one, work, chunksize=max(1, len(work) // (8 * jobs))))
    else:
        fps = [_fingerprint_one(w) for w in work]
    records: list[BatchRecord | None] = []
    errors: list[str] = []
    for p, (fp, err) in zip(pages, fps):
        if fp is None:
            errors.append(err or p.url)
            records.append(None)
        else:
            try:
                records.append(BatchRecord.of(p.url, fp, p.fetched_at, p.priority))
            except ConfigError as exc:  # a fetch time out of range: this page only
                errors.append(f"{p.url}: {exc}")
                records.append(None)
    return records, errors


def dedup_batch(items: Iterable[Page | BatchRecord], *, k: int | None = None, verify: float | None = DEFAULT_VERIFY,
                canonical: str | CanonicalPolicy | None = None, method: str = "simhash",
                threshold: float = DEFAULT_THRESHOLD, config: FingerprintConfig | None = None,
                jobs: int = 1, bands: bool = True, max_bucket: int | None = None, exact_k: bool = True,
                engine: str = "arrays") -> BatchResult:
    """Deduplicate a whole input at once (module docs): pages (:class:`~neardup.detector.Page`,
    fingerprinted here with ``config`` in ``jobs`` processes) or precomputed
    :class:`BatchRecord` rows. ``k`` defaults to the spec version's
    (:func:`neardup.model.default_k`: 3 with the bands, 12 without), ``verify`` and ``threshold`` to the
    Detector's; ``canonical`` is a policy chain (default ``rel-canonical,first-seen``).
    ``bands``: candidates from the sketch bands too, as the Detector's
    (``DetectorSettings.bands``); ``max_bucket``: blocks holding more groups are windowed
    (:func:`bucket_pairs`); ``exact_k`` False: SimHash candidates only within
    ``min(k, PIGEON_K)`` (what ``neardup.batch.spark.job`` computes by default, :func:`link_simhash`). ``engine``:
    ``"arrays"`` (:mod:`neardup.batch.arrays`) or ``"records"`` (an object a page: the reference).
    A URL captured more than once is decided by its last capture for all of them
    (:mod:`neardup.batch.versions`); a :attr:`Page.revisit <neardup.model.Page.revisit>` is a
    capture of its URL's content before it (:mod:`neardup.batch.revisits`)."""
    for name, value, allowed in (("engine", engine, ENGINES), ("method", method, METHODS)):
        if value not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    config = config or DEFAULT_CONFIG
    if method == "minhash" and config.minhash is None:
        config = config.with_(minhash=MinHashConfig())
    if k is None:
        k = default_k(config.version, bands)
    if not 0 <= int(k) < 64:
        raise ConfigError(f"k must be between 0 and 63, got {k}")
    policy = policy_from_spec(canonical)
    items = list(items)
    pages = [(i, it) for i, it in enumerate(items) if isinstance(it, Page) and not it.revisit]
    revisits = [(i, it) for i, it in enumerate(items) if isinstance(it, Page) and it.revisit]
    errors: list[str] = []
    records: list[BatchRecord | None] = [it if isinstance(it, BatchRecord) else None for it in items]
    if pages:
        got, errors = records_from_pages([p for _, p in pages], config, jobs)
        for (i, _), rec in zip(pages, got):
            records[i] = rec
    if revisits:  # a revisit: a copy of its URL's capture before it (neardup.batch.revisits)
        copies, missed = resolve_revisits([r for r in records if r is not None], [p for _, p in revisits])
        for (i, _), rec in zip(revisits, copies):
            records[i] = rec
        errors += [f"{p.url}: a revisit with no capture of {p.refers_to or 'its URL'} at or before it in the input"
                   for p in missed]
    rows = [r for r in records if r is not None]
    current, captures = split_records(rows)  # a URL fetched again: its last capture decides
    result: BatchResult | None = None
    if engine == "arrays" and method == "simhash":
        from neardup.batch.arrays import solve_records
        result = solve_records(current, errors, k=int(k), verify=verify, policy=policy, bands=bands,
                               max_bucket=max_bucket, exact_k=exact_k, jobs=jobs)
    if result is None:
        result = _solve(current, k=int(k), verify=verify, policy=policy, method=method, threshold=threshold,
                        errors=errors, bands=bands, max_bucket=max_bucket, exact_k=exact_k)
    return expand_result(result, rows, captures)


def _solve(rows: list[BatchRecord], *, k: int, verify: float | None, policy: CanonicalPolicy, method: str,
           threshold: float, errors: list[str], bands: bool = True, max_bucket: int | None = None,
           exact_k: bool = True) -> BatchResult:
    node_of: list[int] = []
    groups: dict[str, dict[int, tuple[int, str | None, str | None]]] = {}
    rep_of: dict[str, tuple[int, BatchRecord]] = {}
    for r in rows:
        if r.empty:
            node_of.append(empty_node_id(r.url, r.digest))
            continue
        host = r.host
        n = node_id(r.digest, host, r.title)
        node_of.append(n)
        groups.setdefault(r.digest, {})[n] = (n, host, r.title)
        if r.digest not in rep_of or n < rep_of[r.digest][0]:
            rep_of[r.digest] = (n, r)  # the group's record: the one of its smallest node
    uf = UnionFind()
    for n in node_of:
        uf.add(n)
    digests = sorted(groups)
    reps = [rep_of[d][1] for d in digests]
    for d, rep in zip(digests, reps):  # exact copies: a group with itself
        for x, y in pair_edges(list(groups[d].values()), None, rep.length < GUARD_MAX_LENGTH):
            uf.union(x, y)
    links = (link_simhash(reps, k, verify, bands, nodes=[rep_of[d][0] for d in digests], max_bucket=max_bucket,
                          exact_k=exact_k) if method == "simhash" else link_minhash(reps, threshold))
    pairs = []
    for i, j, dist, score in links:
        a, b = reps[i], reps[j]
        # the guard compares titles for short texts, and beyond k always (matching.far_match)
        short = min(a.length, b.length) < GUARD_MAX_LENGTH or (
            method == "simhash" and dist is not None and dist > k and (score or 0.0) < FAR_TITLE_VERIFY)
        for x, y in pair_edges(list(groups[a.digest].values()), list(groups[b.digest].values()), short):
            uf.union(x, y)
        pairs.append((a.digest, b.digest, dist, score))
    clusters: dict[int, list[int]] = {}
    for pos, n in enumerate(node_of):
        clusters.setdefault(uf.find(n), []).append(pos)
    verdicts: list[BatchVerdict | None] = [None] * len(rows)
    for cid, members in clusters.items():
        ci = members[choose_canonical(policy, [member_tuple(rows[p]) for p in members])]
        canon = rows[ci]
        for p in members:
            r = rows[p]
            gap: int | None
            if r.empty:
                status, match_url, gap = "empty", None, None
            elif p == ci:
                status, match_url, gap = "new", None, 0
            else:
                status = "exact" if r.digest == canon.digest else "near"
                match_url, gap = canon.url, (r.simhash ^ canon.simhash).bit_count()
            verdicts[p] = BatchVerdict(r.url, r.digest, r.simhash, status, cid, canon.url, match_url, gap)
    return BatchResult([v for v in verdicts if v is not None], pairs, clusters, errors)


# -- precomputed fingerprints in Parquet (read by neardup.batch.spark.job too) ---------------------------



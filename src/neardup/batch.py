"""Batch deduplication of a whole input on one machine: one order-independent answer.

The online :class:`~neardup.detector.Detector` decides as pages arrive: a page joins the
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
  ``match`` is the canonical URL and ``distance`` the SimHash distance to it.

The answer depends on the set of pages only: shuffling the input gives the same clusters
(ids included: a cluster's id is the smallest :func:`node_id` in it), canonicals and
statuses. :mod:`neardup.spark` computes the same answer on Spark (tested equal).

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

import hashlib
import math
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup.canonical import CanonicalPolicy, Member, policy_from_spec
from neardup.detector import DEFAULT_K_BY_VERSION, DEFAULT_THRESHOLD, DEFAULT_VERIFY, Page
from neardup.errors import ConfigError, NeardupError
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint
from neardup.matching import GUARD_MAX_LENGTH, Side, match
from neardup.minhash import MinHashConfig, MinHashLSH, jaccard, signatures_from_bytes
from neardup.permuted import self_join
from neardup.titles import same_title, title_words
from neardup.urls import host_of

METHODS = ("simhash", "minhash")
MASK63 = (1 << 63) - 1


@dataclass(frozen=True)
class BatchRecord:
    """What the batch job reads of one page (a row of :mod:`neardup.spark`'s fingerprint
    table too). ``simhash`` is the unsigned 64-bit value; ``signature``: MinHash
    (little-endian uint32s) for ``method="minhash"``."""

    url: str
    digest: str
    simhash: int
    empty: bool = False
    sketch: bytes | None = None
    title: str | None = None
    length: int = 0
    canonical_link: str | None = None
    first_seen: float = 0.0
    priority: float | None = None
    signature: bytes | None = None

    @classmethod
    def of(cls, url: str, fp: Fingerprint, first_seen: float | None = None,
           priority: float | None = None) -> "BatchRecord":
        if fp.bits != 64:
            raise ConfigError(f"the batch job needs 64-bit fingerprints, got {fp.bits} bits")
        return cls(url=url, digest=fp.digest, simhash=int(fp.simhash), empty=bool(fp.empty), sketch=fp.sketch,
                   title=fp.title, length=int(fp.length), canonical_link=fp.canonical_url,
                   first_seen=float(first_seen or 0.0), priority=priority,
                   signature=fp.minhash.to_bytes() if fp.minhash is not None else None)

    @property
    def host(self) -> str | None:
        """The host the repeated-boilerplate guard compares (None: never guarded)."""
        return host_of(self.url) or None

    def side(self) -> Side:
        return Side(simhash=self.simhash, digest=self.digest, empty=self.empty, sketch=self.sketch,
                    title=self.title, host=self.host, length=self.length)


@dataclass(frozen=True)
class BatchVerdict:
    """One page's outcome: ``cluster`` (an int id, the same in every run on the same pages),
    ``canonical`` (its URL), ``match`` (the canonical URL, None for the canonical itself and
    empty pages) and ``distance`` (SimHash distance to the canonical)."""

    url: str
    digest: str
    simhash: int
    status: str
    cluster: int
    canonical: str
    match: str | None
    distance: int | None


@dataclass
class BatchResult:
    """``verdicts`` in input order; ``pairs``: the linked pairs of distinct digests
    (digest_a < digest_b, distance, score); ``clusters``: id -> input positions."""

    verdicts: list[BatchVerdict]
    pairs: list[tuple[str, str, int, float | None]] = field(default_factory=list)
    clusters: dict[int, list[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        out = {"pages": len(self.verdicts), "clusters": len(self.clusters)}
        for v in self.verdicts:
            out[v.status] = out.get(v.status, 0) + 1
        return out


def _hash63(*parts: str) -> int:
    h = hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(h, "big") & MASK63


def node_id(digest: str, host: str | None, title: str | None) -> int:
    """A node of the match graph: pages with one digest, host and title (the match rule
    cannot tell them apart). A 63-bit hash, so ids do not depend on input order."""
    return _hash63("n", digest, host or "", "\x01" if title is None else title)


def empty_node_id(url: str, digest: str) -> int:
    """The node (and cluster) of an empty page: it matches nothing, so it is alone."""
    return _hash63("e", url, digest)


def member_order(url: str, first_seen: float, digest: str, title: str | None,
                 canonical_link: str | None, priority: float | None) -> tuple:
    """How members of a cluster are numbered for the policy's last tie-break (the
    ``Member.id`` of ``first-seen``): by URL, fetch time, digest, title, link, priority."""
    return (url, first_seen, digest, title or "", canonical_link or "",
            -math.inf if priority is None else float(priority))


def choose_canonical(policy: CanonicalPolicy, members: Sequence[tuple]) -> int:
    """Index into ``members`` (tuples as :func:`member_order` takes them) of the canonical
    page by ``policy``; members numbered in :func:`member_order`, so the choice does not
    depend on their order."""
    order = sorted(range(len(members)), key=lambda i: member_order(*members[i]))
    ms = [Member(rank, members[i][0], members[i][1], members[i][4], members[i][5]) for rank, i in enumerate(order)]
    return order[policy.choose(ms).id]


def effective_host(host: str | None, node: int) -> str:
    """A node's host for the guard; pages without a host (file: URLs) are never guarded,
    as if each had a host of its own."""
    return host if host else f"\x00{node}"


def pair_edges(sides_a: Sequence[tuple[int, str | None, str | None]],
               sides_b: Sequence[tuple[int, str | None, str | None]] | None, short: bool) -> list[tuple[int, int]]:
    """Node edges spanning the components that the match rule gives the nodes of a linked
    pair of digest groups (``sides_b`` None: a group with itself, whose pages are exact
    copies). Nodes are ``(node, host, title)``. ``short``: the shorter main text is under
    :data:`~neardup.matching.GUARD_MAX_LENGTH` (the repeated-boilerplate guard applies).

    Every edge returned is a matching pair. Without the guard all nodes match: a star.
    With it, two nodes match when their hosts differ or their titles are the same: with
    two hosts or more that connects everything (each node to the first node of another
    host, which is joined to the first node); with one host, by title (equal word lists
    first, then :func:`~neardup.titles.same_title` pairwise over the distinct ones)."""
    a = sorted(set(sides_a))
    if sides_b is None:
        if not short:
            return [(a[0][0], s[0]) for s in a[1:]]
        nodes = a
    else:
        b = sorted(set(sides_b))
        if not short:
            return [(a[0][0], b[0][0])]
        nodes = sorted(set(a) | set(b))
    if len(nodes) < 2:
        return []
    hosts = [effective_host(h, n) for n, h, _ in nodes]
    p = nodes[0][0]
    if any(h != hosts[0] for h in hosts):
        q = next(nodes[i][0] for i, h in enumerate(hosts) if h != hosts[0])
        return [(p, n) if h != hosts[0] else (n, q) for (n, _, _), h in zip(nodes[1:], hosts[1:])]
    edges: list[tuple[int, int]] = []
    classes: dict[tuple[str, ...], list[int]] = {}
    for n, _, title in nodes:
        classes.setdefault(tuple(title_words(title)), []).append(n)
    if () in classes:  # a page without title words has "the same title" as every page
        return [(p, n) for n, _, _ in nodes[1:]]
    reps = []
    for words, members in classes.items():
        edges.extend((members[0], m) for m in members[1:])
        reps.append((members[0], " ".join(words)))
    for i in range(len(reps)):
        for j in range(i + 1, len(reps)):
            if same_title(reps[i][1], reps[j][1]):
                edges.append((reps[i][0], reps[j][0]))
    return edges


class UnionFind:
    """Union-find over int ids; :meth:`find` returns the smallest id of the set."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def add(self, x: int) -> None:
        self.parent.setdefault(x, x)

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra  # the smaller id stays the root


def link_simhash(reps: Sequence[BatchRecord], k: int, verify: float | None) -> list[tuple[int, int, int, float | None]]:
    """Linked pairs (i, j, distance, score) of digest groups (given by one record each,
    none empty): the permuted tables' self-join within ``k``, each pair through
    :func:`~neardup.matching.match` (hosts left out: the guard is the nodes' business)."""
    if len(reps) < 2:
        return []
    values = np.array([r.simhash for r in reps], dtype=np.uint64)
    ia, ib, _ = self_join(values, k)
    out = []
    for i, j in zip(ia.tolist(), ib.tolist()):
        a, b = reps[i], reps[j]
        m = match(Side(a.simhash, a.digest, False, a.sketch, None, None, a.length),
                  Side(b.simhash, b.digest, False, b.sketch, None, None, b.length), k, verify)
        if m.status is not None:
            out.append((i, j, m.distance, m.score))
    return out


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
    out = []
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
            records.append(BatchRecord.of(p.url, fp, p.fetched_at, p.priority))
    return records, errors


def dedup_batch(items: Iterable[Page | BatchRecord], *, k: int | None = None, verify: float | None = DEFAULT_VERIFY,
                canonical: str | CanonicalPolicy | None = None, method: str = "simhash",
                threshold: float = DEFAULT_THRESHOLD, config: FingerprintConfig | None = None,
                jobs: int = 1) -> BatchResult:
    """Deduplicate a whole input at once (module docs): pages (:class:`~neardup.detector.Page`,
    fingerprinted here with ``config`` in ``jobs`` processes) or precomputed
    :class:`BatchRecord` rows. ``k`` defaults to the spec version's
    (:data:`~neardup.detector.DEFAULT_K_BY_VERSION`), ``verify`` and ``threshold`` to the
    Detector's; ``canonical`` is a policy chain (default ``rel-canonical,first-seen``)."""
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    config = config or DEFAULT_CONFIG
    if method == "minhash" and config.minhash is None:
        config = config.with_(minhash=MinHashConfig())
    if k is None:
        k = DEFAULT_K_BY_VERSION[config.version]
    if not 0 <= int(k) < 64:
        raise ConfigError(f"k must be between 0 and 63, got {k}")
    policy = policy_from_spec(canonical)
    items = list(items)
    pages = [(i, it) for i, it in enumerate(items) if isinstance(it, Page)]
    errors: list[str] = []
    records: list[BatchRecord | None] = [it if isinstance(it, BatchRecord) else None for it in items]
    if pages:
        got, errors = records_from_pages([p for _, p in pages], config, jobs)
        for (i, _), rec in zip(pages, got):
            records[i] = rec
    rows = [r for r in records if r is not None]
    return _solve(rows, k=int(k), verify=verify, policy=policy, method=method, threshold=threshold, errors=errors)


def _solve(rows: list[BatchRecord], *, k: int, verify: float | None, policy: CanonicalPolicy, method: str,
           threshold: float, errors: list[str]) -> BatchResult:
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
    links = link_simhash(reps, k, verify) if method == "simhash" else link_minhash(reps, threshold)
    pairs = []
    for i, j, dist, score in links:
        a, b = reps[i], reps[j]
        short = min(a.length, b.length) < GUARD_MAX_LENGTH
        for x, y in pair_edges(list(groups[a.digest].values()), list(groups[b.digest].values()), short):
            uf.union(x, y)
        pairs.append((a.digest, b.digest, dist, score))
    clusters: dict[int, list[int]] = {}
    for pos, n in enumerate(node_of):
        clusters.setdefault(uf.find(n), []).append(pos)
    verdicts: list[BatchVerdict | None] = [None] * len(rows)
    for cid, members in clusters.items():
        ci = members[choose_canonical(policy, [_member_tuple(rows[p]) for p in members])]
        canon = rows[ci]
        for p in members:
            r = rows[p]
            if r.empty:
                status, match_url, dist = "empty", None, None
            elif p == ci:
                status, match_url, dist = "new", None, 0
            else:
                status = "exact" if r.digest == canon.digest else "near"
                match_url, dist = canon.url, (r.simhash ^ canon.simhash).bit_count()
            verdicts[p] = BatchVerdict(r.url, r.digest, r.simhash, status, cid, canon.url, match_url, dist)
    return BatchResult([v for v in verdicts if v is not None], pairs, clusters, errors)


def _member_tuple(r: BatchRecord) -> tuple:
    return (r.url, r.first_seen, r.digest, r.title, r.canonical_link, r.priority)


def iter_clusters(result: BatchResult) -> Iterator[tuple[int, list[str]]]:
    """(cluster id, sorted member URLs) of every cluster, by id."""
    for cid in sorted(result.clusters):
        yield cid, sorted(result.verdicts[p].url for p in result.clusters[cid])

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
  ``match`` is the canonical URL and ``distance`` the SimHash distance to it;
* **re-fetches**: the captures of one URL (its :func:`~neardup.urls.normalize_url` key) are
  versions of it, as online: only the last one takes part (with the URL's earliest fetch
  time), every capture gets its URL's decision and a ``version``
  (:mod:`neardup.batch_versions`).

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

from neardup.bands import DEFAULT_BANDS, NIBBLE_BINS, far_verify, keys_of, nibble_threshold, nibbles_of, sketch_bins
from neardup.batch_versions import expand_result, split_records
from neardup.canonical import CanonicalPolicy, Member, policy_from_spec
from neardup.errors import ConfigError, NeardupError
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint
from neardup.matching import FAR_TITLE_VERIFY, GUARD_MAX_LENGTH, Match, Side, match
from neardup.minhash import MinHashConfig, MinHashLSH, jaccard, signatures_from_bytes
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY, Page, default_k
from neardup.permuted_join import self_join
from neardup.titles import same_title, title_words
from neardup.urls import host_of

METHODS = ("simhash", "minhash")
ENGINES = ("arrays", "records")
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
    empty pages) and ``distance`` (SimHash distance to the canonical). A capture of a URL
    fetched more than once carries its URL's decision (:mod:`neardup.batch_versions`) and
    ``version``: None for the URL's first capture, else ``unchanged`` or ``changed``
    against the previous one."""

    url: str
    digest: str
    simhash: int
    status: str
    cluster: int
    canonical: str
    match: str | None
    distance: int | None
    version: str | None = None


@dataclass
class BatchResult:
    """``verdicts`` in input order; ``pairs``: the linked pairs of distinct digests
    (digest_a < digest_b, distance, score); ``clusters``: id -> input positions (of every
    capture of its URLs)."""

    verdicts: list[BatchVerdict]
    pairs: list[tuple[str, str, int, float | None]] = field(default_factory=list)
    clusters: dict[int, list[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        out = {"pages": len(self.verdicts), "clusters": len(self.clusters)}
        for v in self.verdicts:
            out[v.status] = out.get(v.status, 0) + 1
        out["refetched"] = sum(v.version is not None for v in self.verdicts)
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


def banded(sketch: bytes | None) -> bool:
    """Whether a sketch has band keys (a spec-2 sketch of some shingles, as the Detector's
    band index takes them)."""
    return sketch is not None and len(sketch) == 64 and int.from_bytes(sketch[:4], "little") > 0


def sketch_matrix(sketches: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
    """(n, 60) bins of the sketches (zeros where none) and whether each has band keys."""
    ok = np.array([banded(s) for s in sketches], dtype=bool)
    bins = np.zeros((len(sketches), 60), dtype=np.uint8)
    if ok.any():
        bins[ok] = sketch_bins([s for s, o in zip(sketches, ok) if o])  # type: ignore[misc]
    return bins, ok


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


# -- the candidate stage (bands + SimHash), shared with neardup.spark ---------------------------

#: SimHash blocking by pigeonhole keys is exact up to this k (C(k + 2, 2) keys a fingerprint:
#: 10 at k = 3); beyond it the batch job adds the permuted tables' exact self-join at k, and
#: Spark relies on the bands unless asked for its radius probes (docs/batch.md)
PIGEON_K = 3
#: a block (band key or SimHash key) holding more groups than its cap is not compared
#: pairwise: its groups are ordered by node id (a hash) and each is compared with the next
#: :data:`WINDOW` ones only (:func:`bucket_pairs`). The cap is this base plus what density
#: alone puts in a block (:func:`bucket_cap`)
MAX_BUCKET = 256
WINDOW = 4
#: the narrowest blocking keys hold 16 bits (a band key; a pigeonhole block at k = 3), so N
#: random groups put about N / 65,536 in a block
KEY_SPACE = 1 << 16
#: a block is windowed only past this many times the groups density alone puts there
DENSITY_SLACK = 2


def bucket_cap(groups: int, base: int = MAX_BUCKET) -> int:
    """The largest block (in groups) compared pairwise when ``groups`` digest groups are
    blocked: ``base`` plus :data:`DENSITY_SLACK` times the ``groups / 65,536`` a 16-bit block
    holds on random pages. On keys spread like random ones, density alone never windows a
    block (a Poisson block of mean m stays under 2m + 256 with a margin of many standard
    deviations at any N), so the candidates stay the Detector's at 10^8 and 10^9 groups; a key
    far more common than that (a template's band, a trap) is windowed; a crawler trap's block (10^5
    copies sharing a key) is windowed below about 3 10^9 groups. Pairwise work grows as
    N^2 / 131,072 checks a kind of block: 7.6 10^6 at 10^6 groups, 7.6 10^10 at 10^8.

    >>> bucket_cap(10**6), bucket_cap(10**7), bucket_cap(10**9)
    (288, 562, 30774)
    """
    return int(base) + DENSITY_SLACK * -(-max(0, int(groups)) // KEY_SPACE)


def pigeon_blocks(k: int) -> list[tuple[int, int]]:
    """(shift, width) of the ``k + 1`` blocks the 64 bits are cut into for the pigeonhole keys."""
    m = k + 1
    widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
    out, pos = [], 64
    for w in widths:
        pos -= w
        out.append((pos, w))
    return out


def pigeon_keys(values: np.ndarray, k: int) -> np.ndarray:
    """(n, k + 1) uint64 SimHash blocking keys, one per block of :func:`pigeon_blocks`
    (values within ``k`` bits differ in at most ``k`` blocks, so they share an equal one).
    The block's number sits in bits 56..62, so keys of different blocks never collide (and
    bit 63, the band keys' mark, stays clear); k <= 3 keeps every block within 56 bits."""
    values = np.asarray(values, dtype=np.uint64)
    cols = [(np.uint64(p) << np.uint64(56)) | ((values >> np.uint64(sx)) & np.uint64((1 << wx) - 1))
            for p, (sx, wx) in enumerate(pigeon_blocks(k))]
    return np.stack(cols, axis=1)


def block_rows(simhash: np.ndarray, bins: np.ndarray | None, has_sketch: np.ndarray | None, k: int,
               bands: bool) -> tuple[np.ndarray, np.ndarray]:
    """Blocking rows of n digest groups: (row -> group, row key as int64). Keys of the 8 sketch
    bands (bit 63 set, band j in bits 16..18; groups without a sketch have none) when
    ``bands``, then the pigeonhole SimHash keys at ``min(k, PIGEON_K)``: at most 12 rows a
    group."""
    n = simhash.shape[0]
    owners, keys = [], []
    if bands and bins is not None:
        bk = keys_of(bins, DEFAULT_BANDS).astype(np.uint64)
        ok = np.ones(n, dtype=bool) if has_sketch is None else np.asarray(has_sketch, dtype=bool)
        for j in range(DEFAULT_BANDS):
            owners.append(np.flatnonzero(ok))
            keys.append(((np.uint64(1) << np.uint64(63)) | (np.uint64(j) << np.uint64(16)) | bk[ok, j]).view(np.int64))
    pk = pigeon_keys(simhash, min(k, PIGEON_K))
    for j in range(pk.shape[1]):
        owners.append(np.arange(n))
        keys.append(pk[:, j].view(np.int64))
    if not owners:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(owners).astype(np.int64), np.concatenate(keys)


def bucket_pairs(keys: np.ndarray, rank: np.ndarray, max_bucket: int = MAX_BUCKET,
                 window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs of rows (positions into ``keys``) sharing a key: every pair of a
    bucket of at most ``max_bucket`` rows; in a larger bucket each row with the next
    ``window`` rows in the order of ``rank`` (distinct int64 per row: the group's node id,
    a hash). Linear in the rows beyond that size. What it costs: a pair whose only shared
    block is a giant one is found when the two sit within ``window`` of each other in that
    order; the copies of a trap are near one another, so each is linked to its neighbours
    and the cluster stays one (connected components need a spanning set of edges, not every
    pair)."""
    m = keys.shape[0]
    if m < 2:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.lexsort((rank, keys))
    sk = keys[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    sizes = np.diff(np.r_[starts, m])
    pa, pb = [], []
    for s in np.unique(sizes[(sizes > 1) & (sizes <= max_bucket)]).tolist():
        st = starts[sizes == s]
        ia, ib = np.triu_indices(s, 1)
        pa.append((st[:, None] + ia[None, :]).reshape(-1))
        pb.append((st[:, None] + ib[None, :]).reshape(-1))
    for st, s in zip(starts[sizes > max_bucket].tolist(), sizes[sizes > max_bucket].tolist()):
        for d in range(1, window + 1):  # a sorted window: row i with rows i + 1 .. i + window
            pa.append(np.arange(st, st + s - d))
            pb.append(np.arange(st + d, st + s))
    if not pa:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    a, b = np.concatenate(pa), np.concatenate(pb)
    return order[a], order[b]


def candidate_pairs(simhash: np.ndarray, bins: np.ndarray | None, has_sketch: np.ndarray | None, rank: np.ndarray,
                    k: int, verify: float | None, bands: bool, max_bucket: int = MAX_BUCKET,
                    window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Distinct candidate pairs (i < j) of groups from the blocks (:func:`block_rows`): a
    band pair is kept when its nibbles may reach ``verify`` (lossless for the sketch), a
    SimHash pair when within ``min(k, PIGEON_K)``."""
    owner, keys = block_rows(simhash, bins, has_sketch, k, bands)
    ra, rb = bucket_pairs(keys, rank[owner], max_bucket, window)
    a, b = owner[ra], owner[rb]
    banded = keys[ra] < 0  # band keys carry the top bit
    keep = ~banded
    if banded.any() and bins is not None and verify is not None:
        nib = nibbles_of(bins)
        x = nib[a[banded]] ^ nib[b[banded]]
        x = (x | (x >> np.uint32(1)) | (x >> np.uint32(2)) | (x >> np.uint32(3))) & np.uint32(0x11111111)
        agree = NIBBLE_BINS - np.bitwise_count(x).sum(axis=1, dtype=np.int64)
        keep[banded] = agree >= nibble_threshold(min(float(verify), far_verify(verify) or 1.0))
    if (~banded).any():
        sv = np.asarray(simhash, dtype=np.uint64)
        d = np.bitwise_count(sv[a[~banded]] ^ sv[b[~banded]])
        keep[~banded] = d <= min(k, PIGEON_K)
    a, b = a[keep], b[keep]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    code = np.unique(lo.astype(np.int64) * np.int64(max(1, simhash.shape[0])) + hi)
    n = np.int64(max(1, simhash.shape[0]))
    return code // n, code % n


def decide_pair(a: Side, b: Side, k: int, verify: float | None, bits: int = 64) -> Match:
    """The Detector's decision for a candidate pair of digest groups: within ``k`` the
    SimHash path's (``match(k, verify)``), beyond it the bands' (``match(bits,
    far_verify(verify))``; the title guard of :func:`neardup.matching.far_match`, which
    needs hosts and titles, is applied to the groups' nodes: a far pair links nodes as a
    short pair does)."""
    if (a.simhash ^ b.simhash).bit_count() <= k:
        return match(a, b, k, verify)
    return match(a, b, bits, far_verify(verify))


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
            records.append(BatchRecord.of(p.url, fp, p.fetched_at, p.priority))
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
    ``min(k, PIGEON_K)`` (what ``neardup.spark`` computes by default, :func:`link_simhash`). ``engine``:
    ``"arrays"`` (:mod:`neardup.batch_arrays`) or ``"records"`` (an object a page: the reference).
    A URL captured more than once is decided by its last capture for all of them
    (:mod:`neardup.batch_versions`)."""
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
    pages = [(i, it) for i, it in enumerate(items) if isinstance(it, Page)]
    errors: list[str] = []
    records: list[BatchRecord | None] = [it if isinstance(it, BatchRecord) else None for it in items]
    if pages:
        got, errors = records_from_pages([p for _, p in pages], config, jobs)
        for (i, _), rec in zip(pages, got):
            records[i] = rec
    rows = [r for r in records if r is not None]
    current, captures = split_records(rows)  # a URL fetched again: its last capture decides
    result: BatchResult | None = None
    if engine == "arrays" and method == "simhash":
        from neardup.batch_arrays import solve_records
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
        ci = members[choose_canonical(policy, [_member_tuple(rows[p]) for p in members])]
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


def _member_tuple(r: BatchRecord) -> tuple:
    return (r.url, r.first_seen, r.digest, r.title, r.canonical_link, r.priority)


def iter_clusters(result: BatchResult) -> Iterator[tuple[int, list[str]]]:
    """(cluster id, sorted member URLs) of every cluster, by id."""
    for cid in sorted(result.clusters):
        yield cid, sorted(result.verdicts[p].url for p in result.clusters[cid])


# -- precomputed fingerprints in Parquet (read by neardup.spark too) ---------------------------

#: the columns of a fingerprint file, in order (Arrow types); ``simhash`` is the unsigned
#: value as a signed 64-bit integer (two's complement), as Spark stores longs
PARQUET_COLUMNS = (("url", "string"), ("digest", "string"), ("simhash", "int64"), ("empty", "bool"),
                   ("sketch", "binary"), ("title", "string"), ("length", "int32"), ("canonical_link", "string"),
                   ("first_seen", "float64"), ("priority", "float64"), ("signature", "binary"))


def _arrow_schema():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(), "binary": pa.binary(),
             "int32": pa.int32(), "float64": pa.float64()}
    return pa.schema([(name, types[t]) for name, t in PARQUET_COLUMNS])


def write_fingerprints(records: Iterable[BatchRecord], path: str, *, row_group: int = 1 << 17) -> int:
    """Write records as a Parquet file of :data:`PARQUET_COLUMNS` (what ``--fingerprints-out``
    writes, what :func:`read_fingerprints`, ``dedup --batch`` and ``neardup.spark`` read).
    Returns the rows written. Needs PyArrow (the ``spark`` extra)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    n = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        chunk: list[BatchRecord] = []

        def flush() -> None:
            cols = {
                "url": [r.url for r in chunk], "digest": [r.digest for r in chunk],
                "simhash": [r.simhash - (1 << 64) if r.simhash >= 1 << 63 else r.simhash for r in chunk],
                "empty": [r.empty for r in chunk], "sketch": [r.sketch for r in chunk],
                "title": [r.title for r in chunk], "length": [r.length for r in chunk],
                "canonical_link": [r.canonical_link for r in chunk], "first_seen": [r.first_seen for r in chunk],
                "priority": [r.priority for r in chunk], "signature": [r.signature for r in chunk]}
            writer.write_table(pa.table(cols, schema=schema))

        for r in records:
            chunk.append(r)
            if len(chunk) >= row_group:
                flush()
                n += len(chunk)
                chunk = []
        if chunk or not n:
            flush()
            n += len(chunk)
    return n


def read_fingerprints(path: str) -> list[BatchRecord]:
    """Records of a fingerprint Parquet file or folder (:func:`write_fingerprints`, or the
    Spark job's ``--fingerprints-out``): ``url``, ``digest`` and ``simhash`` are required, the
    other columns of :data:`PARQUET_COLUMNS` optional (extra columns are ignored)."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    names = set(table.column_names)
    require_fingerprint_columns(path, names)
    n = table.num_rows
    cols: dict[str, list[Any]] = {c: (table.column(c).to_pylist() if c in names else [None] * n)
                                  for c, _ in PARQUET_COLUMNS}
    out = []
    for i in range(n):
        sim = int(cols["simhash"][i])
        out.append(BatchRecord(
            url=cols["url"][i], digest=cols["digest"][i], simhash=sim + (1 << 64) if sim < 0 else sim,
            empty=bool(cols["empty"][i]), sketch=cols["sketch"][i], title=cols["title"][i],
            length=int(cols["length"][i] or 0), canonical_link=cols["canonical_link"][i],
            first_seen=float(cols["first_seen"][i] or 0.0), priority=cols["priority"][i],
            signature=cols["signature"][i]))
    return out


#: the columns that make a Parquet file one of precomputed fingerprints (not pages of url/html)
REQUIRED_COLUMNS = ("url", "digest", "simhash")


def require_fingerprint_columns(path: str, names: set[str], error: type[NeardupError] = ConfigError) -> None:
    """Raise ``error`` naming ``path`` when its columns ``names`` lack one of
    :data:`REQUIRED_COLUMNS`."""
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise error(f"{path}: not a fingerprint file (missing {', '.join(missing)})")


def parquet_columns(path: str) -> set[str]:
    """The column names of a Parquet file or of a folder of parts (Arrow's errors for a file
    that is not Parquet pass through)."""
    import os

    import pyarrow.parquet as pq

    return set(pq.ParquetDataset(path).schema.names) if os.path.isdir(path) else set(pq.read_schema(path).names)


def is_fingerprint_file(path: str) -> bool:
    """Whether ``path`` is Parquet (a file or a folder of parts) with the fingerprint columns
    ``url``, ``digest`` and ``simhash`` (rather than pages of ``url``/``html``)."""
    import os

    p = str(path)
    if not (p.lower().rstrip("/").endswith(".parquet") or os.path.isdir(p)):
        return False
    try:
        names = parquet_columns(p)
    except Exception:  # not Parquet at all
        return False
    return set(REQUIRED_COLUMNS) <= names

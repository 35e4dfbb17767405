"""The batch answer's vocabulary and graph: records, verdicts, node ids, canonical choice, union-find."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from neardup.canonical import CanonicalPolicy, Member
from neardup.errors import ConfigError, NeardupError
from neardup.fingerprint.core import Fingerprint
from neardup.matching import Side, same_title, title_words
from neardup.model import checked_time
from neardup.urls import host_of, normalize_url

METHODS = ("simhash", "minhash")


ENGINES = ("arrays", "records")


MASK63 = (1 << 63) - 1


@dataclass(frozen=True)
class BatchRecord:
    """What the batch job reads of one page (a row of :mod:`neardup.batch.spark.job`'s fingerprint
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
                   first_seen=checked_time(first_seen, "fetched_at") if first_seen is not None else 0.0,
                   priority=priority,
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
    fetched more than once carries its URL's decision (:mod:`neardup.batch.versions`) and
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
    first, then :func:`~neardup.matching.same_title` pairwise over the distinct ones)."""
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


def member_tuple(r: BatchRecord) -> tuple:
    return (r.url, r.first_seen, r.digest, r.title, r.canonical_link, r.priority)


def iter_clusters(result: BatchResult) -> Iterator[tuple[int, list[str]]]:
    """(cluster id, sorted member URLs) of every cluster, by id."""
    for cid in sorted(result.clusters):
        yield cid, sorted(result.verdicts[p].url for p in result.clusters[cid])


#: the ``version`` values, by code (-1: none, a URL's first capture)
VERSIONS = ("unchanged", "changed")


NO_VERSION, UNCHANGED, CHANGED = -1, 0, 1


def url_group_key(url: str) -> str:
    """The key captures are grouped by: the Detector's (:func:`normalize_url`), or ``url``
    itself where that refuses it.

    >>> url_group_key("HTTPS://Example.com:443/a?utm_source=x"), url_group_key("not a url")
    ('https://example.com/a', 'not a url')
    """
    try:
        return normalize_url(url)
    except NeardupError:
        return url



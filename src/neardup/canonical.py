"""Canonical-copy policies: which member of a cluster is *the* copy to keep.

A policy ranks cluster members; the canonical page is the member with the smallest rank.
Policies chain: ``"rel-canonical,first-seen"`` (the default) means the page that some member
names in ``<link rel="canonical">``, and among those (or when none is named) the first seen.

========================  =================================================================
``rel-canonical``         pages named as canonical by a member of the cluster come first
``first-seen``            earliest first fetch time, then lowest id (always last, as tie-break)
``shortest-url``          shortest URL, then alphabetical
``https``                 https before other schemes
``priority``              highest caller-given ``priority`` first (pages without one last)
========================  =================================================================

>>> from neardup.canonical import policy_from_spec, Member
>>> members = [Member(1, "http://a.com/x?utm=1", 1.0, None, None),
...            Member(2, "https://a.com/x", 2.0, None, None)]
>>> policy_from_spec("shortest-url").choose(members).id
2
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from neardup.errors import ConfigError
from neardup.urls import comparable_link, comparable_url

DEFAULT_POLICY = "rel-canonical,first-seen"


@dataclass(frozen=True)
class Member:
    """What a policy may look at for one cluster member."""

    id: int
    url: str
    first_seen: float
    canonical_link: str | None
    priority: float | None


#: One rule's part of a member's rank, given whether some member of the cluster names the
#: member's URL in ``<link rel="canonical">`` (the only thing a rule may know of the others).
RankFn = Callable[[Member, bool], tuple]


def named_links(members: Sequence[Member]) -> set[str]:
    """The comparable canonical links the members name."""
    return {key for key in (comparable_link(m.canonical_link) for m in members) if key is not None}


def _rel_canonical(m: Member, named: bool) -> tuple:
    return (0 if named else 1,)


def _first_seen(m: Member, named: bool) -> tuple:
    return (m.first_seen, m.id)


def _shortest_url(m: Member, named: bool) -> tuple:
    return (len(m.url), m.url)


def _https(m: Member, named: bool) -> tuple:
    return (0 if m.url.lower().startswith("https:") else 1,)


def _priority(m: Member, named: bool) -> tuple:
    return (0, -m.priority) if m.priority is not None else (1, 0.0)


RANKS: dict[str, RankFn] = {
    "rel-canonical": _rel_canonical,
    "first-seen": _first_seen,
    "shortest-url": _shortest_url,
    "https": _https,
    "priority": _priority,
}


class CanonicalPolicy:
    """A chain of named ranking rules; ``first-seen`` always ends the chain as tie-break.

    A member's rank depends only on the member itself and on whether its URL is named by
    some member (``rel-canonical``), so a cluster's canonical can be kept incrementally: a
    new member can only beat the current canonical, or make members it names win
    (:meth:`key`); the Detector recomputes from scratch (:meth:`choose`) only when a member
    leaves or changes in a way that can dethrone the canonical."""

    def __init__(self, names: Sequence[str]) -> None:
        names = [n.strip() for n in names if n.strip()]
        unknown = [n for n in names if n not in RANKS]
        if unknown:
            raise ConfigError(f"unknown canonical policy {unknown[0]!r}; choose from {', '.join(RANKS)}")
        if not names or names[-1] != "first-seen":
            names = [n for n in names if n != "first-seen"] + ["first-seen"]
        self.names = tuple(names)
        self._ranks = [RANKS[n] for n in self.names]
        #: whether ranks depend on the links members name (else a member's rank is its own)
        self.uses_links = "rel-canonical" in self.names

    @property
    def spec(self) -> str:
        return ",".join(self.names)

    def key(self, member: Member, named: bool) -> tuple:
        """``member``'s rank when its URL is (``named``) or is not named by a member."""
        return tuple(part for fn in self._ranks for part in fn(member, named))

    def rank(self, member: Member, members: Sequence[Member]) -> tuple:
        """``member``'s rank among ``members``."""
        named = self.uses_links and comparable_url(member.url) in named_links(members)
        return self.key(member, named)

    def choose(self, members: Sequence[Member]) -> Member:
        """The canonical member (members must not be empty), in O(len(members))."""
        if not members:
            raise ConfigError("cannot choose a canonical page from an empty cluster")
        if not self.uses_links:
            return min(members, key=lambda m: self.key(m, False))
        links = named_links(members)
        return min(members, key=lambda m: self.key(m, comparable_url(m.url) in links))

    def __repr__(self) -> str:
        return f"CanonicalPolicy({self.spec!r})"


def policy_from_spec(spec: "str | CanonicalPolicy | None") -> CanonicalPolicy:
    """Build a policy from ``"name,name,..."`` (or pass a policy through)."""
    if spec is None:
        spec = DEFAULT_POLICY
    if isinstance(spec, CanonicalPolicy):
        return spec
    return CanonicalPolicy(spec.split(","))

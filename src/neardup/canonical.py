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
from neardup.urls import comparable_url

DEFAULT_POLICY = "rel-canonical,first-seen"


@dataclass(frozen=True)
class Member:
    """What a policy may look at for one cluster member."""

    id: int
    url: str
    first_seen: float
    canonical_link: str | None
    priority: float | None


RankFn = Callable[[Member, Sequence[Member]], tuple]


def _rel_canonical(m: Member, members: Sequence[Member]) -> tuple:
    named = {comparable_url(x.canonical_link) for x in members if x.canonical_link}
    return (0 if comparable_url(m.url) in named else 1,)


def _first_seen(m: Member, members: Sequence[Member]) -> tuple:
    return (m.first_seen, m.id)


def _shortest_url(m: Member, members: Sequence[Member]) -> tuple:
    return (len(m.url), m.url)


def _https(m: Member, members: Sequence[Member]) -> tuple:
    return (0 if m.url.lower().startswith("https:") else 1,)


def _priority(m: Member, members: Sequence[Member]) -> tuple:
    return (0, -m.priority) if m.priority is not None else (1, 0.0)


RANKS: dict[str, RankFn] = {
    "rel-canonical": _rel_canonical,
    "first-seen": _first_seen,
    "shortest-url": _shortest_url,
    "https": _https,
    "priority": _priority,
}


class CanonicalPolicy:
    """A chain of named ranking rules; ``first-seen`` always ends the chain as tie-break."""

    def __init__(self, names: Sequence[str]) -> None:
        names = [n.strip() for n in names if n.strip()]
        unknown = [n for n in names if n not in RANKS]
        if unknown:
            raise ConfigError(f"unknown canonical policy {unknown[0]!r}; choose from {', '.join(RANKS)}")
        if not names or names[-1] != "first-seen":
            names = [n for n in names if n != "first-seen"] + ["first-seen"]
        self.names = tuple(names)
        self._ranks = [RANKS[n] for n in self.names]

    @property
    def spec(self) -> str:
        return ",".join(self.names)

    def rank(self, member: Member, members: Sequence[Member]) -> tuple:
        return tuple(part for fn in self._ranks for part in fn(member, members))

    def choose(self, members: Sequence[Member]) -> Member:
        """The canonical member (members must not be empty)."""
        if not members:
            raise ConfigError("cannot choose a canonical page from an empty cluster")
        return min(members, key=lambda m: self.rank(m, members))

    def __repr__(self) -> str:
        return f"CanonicalPolicy({self.spec!r})"


def policy_from_spec(spec: "str | CanonicalPolicy | None") -> CanonicalPolicy:
    """Build a policy from ``"name,name,..."`` (or pass a policy through)."""
    if spec is None:
        spec = DEFAULT_POLICY
    if isinstance(spec, CanonicalPolicy):
        return spec
    return CanonicalPolicy(spec.split(","))

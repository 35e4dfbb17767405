"""Numbered series: near-identical pages under a changing number (a crawler trap).

An events calendar (``/events?month=1``, ``?month=2``, ... without end), an archive by day, a
"page N" of an empty listing: each page differs from the next by its number, in the URL, the
title and the text, so no two of them are ``near`` (their titles differ, they share about half
their text) and no URL rule is learned from merges. What gives them away is the *series*: many
URLs of one pattern (the URL with its digit runs masked, :func:`series_key`) whose pages'
SimHash values stay close to the first members' or to the member stored just before (within
:data:`SERIES_DISTANCE` bits, where two unrelated pages are about 32 bits apart: a calendar
whose events slide from month to month is one series too). Once a pattern holds :data:`SERIES_BUDGET`
members of which at least :data:`SERIES_SIMILAR_SHARE` are so close, it is a trap: its next
URLs are not worth fetching (:meth:`SeriesTracker.trap`), and its host is flagged.

A series of different pages (``/article/1``, ``/article/2``: different texts, 32 bits apart)
never becomes one.

>>> tracker = SeriesTracker()
>>> base = 0x0123_4567_89AB_CDEF
>>> for month in range(SERIES_BUDGET):
...     tracker.observe(f"https://a.example/events?month={month}", base ^ (1 << (month % 64)))
>>> tracker.trap("https://a.example/events?month=999").members
20
>>> tracker.trap("https://a.example/article/7") is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from neardup.urls import origin_of

#: the members a series explores before it may be called a trap (its next URLs are skipped)
SERIES_BUDGET = 20
#: a member is like the series when its SimHash is within this many bits of a reference member
SERIES_DISTANCE = 20
#: ... and a trap needs at least this share of its members so
SERIES_SIMILAR_SHARE = 0.8
#: the first members of a series are its references
SERIES_REFERENCES = 8
#: patterns remembered (the least recently grown go first)
MAX_SERIES = 100_000

_DIGITS = re.compile(r"[0-9]+")


def series_key(url: str) -> str | None:
    """The series of ``url``: its host, path and query with every digit run as ``N`` (None
    when the path and query hold no digit: not a numbered page).

    >>> series_key("https://a.example/events?month=12&y=2024"), series_key("https://a.example/about")
    ('a.example/events?month=N&y=N', None)
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    rest = parts.path + ("?" + parts.query if parts.query else "")
    masked = _DIGITS.sub("N", rest)
    if masked == rest:
        return None
    return f"{parts.netloc.lower()}{masked}"


@dataclass
class Series:
    """One pattern's members: how many, how many like the references, the references."""

    pattern: str
    members: int = 0
    similar: int = 0
    references: list[int] = field(default_factory=list)
    last: int | None = None

    @property
    def is_trap(self) -> bool:
        """At least :data:`SERIES_BUDGET` members, :data:`SERIES_SIMILAR_SHARE` of them alike."""
        return self.members >= SERIES_BUDGET and self.similar >= SERIES_SIMILAR_SHARE * self.members

    def to_dict(self) -> dict[str, object]:
        return {"pattern": self.pattern, "members": self.members, "similar": self.similar}


class SeriesTracker:
    """The numbered series of a store's pages, kept as pages are observed."""

    def __init__(self) -> None:
        self._series: dict[str, Series] = {}

    def observe(self, url: str, simhash: int | None) -> None:
        """A page with content (``simhash``; None: empty, no evidence) was stored at ``url``
        for the first time."""
        key = series_key(url)
        if key is None or simhash is None:
            return
        series = self._series.pop(key, None) or Series(key)
        self._series[key] = series  # most recently grown last
        if len(self._series) > MAX_SERIES:
            del self._series[next(iter(self._series))]
        series.members += 1
        refs = series.references
        near = [*refs, series.last] if series.last is not None else refs
        if not refs or any((simhash ^ r).bit_count() <= SERIES_DISTANCE for r in near):
            series.similar += 1  # (the first member is like itself)
        if len(refs) < SERIES_REFERENCES:
            refs.append(simhash)
        series.last = simhash

    def trap(self, url: str) -> Series | None:
        """The trap series ``url`` belongs to (None: none, or not a trap)."""
        key = series_key(url)
        series = self._series.get(key) if key is not None else None
        return series if series is not None and series.is_trap else None

    def traps(self, host: str | None = None) -> list[Series]:
        """The trap series (of origin ``host``, :func:`neardup.urls.origin_of`), most members first."""
        found = [s for s in self._series.values() if s.is_trap
                 and (host is None or origin_of("//" + s.pattern.split("/", 1)[0] + "/") == host)]
        return sorted(found, key=lambda s: (-s.members, s.pattern))

"""A host's templates, redesigns and soft-404 pages from its pages' structure SimHash values.

Pure functions over a host's stored pages (:class:`TemplatePage`: fetch time, structure, main-text
digest and length), and :class:`HostStructure`, the small per-host state the Detector keeps
to decide at add time (a dataclass, JSON-serialisable with :meth:`HostStructure.to_dict`).
The structure values come from :func:`neardup.fingerprint.structure.structure_simhash`.

Templates
    Pages are grouped in fetch order: a page joins the template whose representative is
    nearest, when within :data:`TEMPLATE_DISTANCE` bits, else it starts a new template. A
    template's representative is the bitwise majority of its pages' structures (ties: the
    first page's bit). The threshold is measured in docs/quality.md ("Structure
    fingerprints"): pages of one site and year are mostly within it, pages of different
    sites almost never are.

Redesigns
    A *redesign* at the fetch of page i. Of the :data:`REDESIGN_WINDOW` pages fetched from i
    on (a full window: the new structure must persist; :meth:`HostStructure.observe` reports
    an event when that window is complete), the most frequent template (the *new* one) holds
    at least :data:`MIN_NEW_SHARE`; it had at most one page among the window before i and at
    most :data:`MAX_OLD_SHARE` of all pages before i (a return to an old template is no
    redesign); at most :data:`MAX_OLD_SHARE` of those pages are on another template seen
    among the :data:`REDESIGN_WINDOW` pages before i; at least :data:`MIN_PAGES` pages lie
    before i; the split (pages on the old templates before i, off them after) is one that a
    host serving one mix of templates in random order gives with probability under
    :data:`MAX_CHANCE` (one-sided Fisher exact test: 5 old pages then 10 new ones pass, 5 then
    5 do not); and (offline, :func:`redesigns`) the templates with 2 or more of those pages
    before i never take more than :data:`MAX_OLD_SHARE` of all later fetches: the host moved
    for good. The event's ``at`` is the first page on the new template or on a template that
    repeats after the move; a one-off page at the edge goes with the side whose templates its
    structure is nearer. One odd page is not a redesign (the window after it is still mostly
    old); nor is a section with its own template fetched alongside (it is in the window
    before, so it counts as old); nor is a site with two layouts whose pages happen to come
    five of one, then five of the other. Pages with one fetch time are simultaneous: a
    redesign needs a later time, and old templates the host has served for at least
    :data:`REDESIGN_MIN_AGE` (one crawl of a static site, minutes long, never redesigns it).
    And a redesign is one part of the site changing, never the crawl moving from one part to
    another (a static documentation site whose sections differ in layout, crawled
    breadth-first): at least :data:`MIN_SECTION_PAGES` of the pages on the new template after
    the cut are in a *section* (the URL's folder, digits masked, and its query's parameter
    names: ``/2019/03/18/a.html`` and ``/2022/08/10/b.html`` are one section, :func:`section_of`)
    where the old templates had pages. Pages without URLs give no such evidence either way.

Soft-404 and template-only pages
    A page whose main text is short (under :data:`SOFT404_MAX_LENGTH` bytes of normalised
    text) or empty, whose exact main text (digest) the host has served under at least
    :data:`SOFT404_MIN_URLS` distinct URLs, and whose structure is within
    :data:`TEMPLATE_DISTANCE` bits of the structure of the first page seen with that text:
    one page shell with one message, repeated under many URLs ("not found", "log in",
    an empty listing), is the host's error or empty template. ``soft-404`` when the text is
    non-empty, ``template-only`` when the extractor found no text. The first
    ``SOFT404_MIN_URLS - 1`` such pages are not flagged (nothing repeats yet).

>>> rows = [TemplatePage(t * 3600.0, 0x0F0F_0000_0000_0000 if t < 10 else 0xF0F0_FFFF_0000_0000) for t in range(20)]
>>> [(t["pages"], t["share"]) for t in templates(rows)]
[(10, 0.5), (10, 0.5)]
>>> [(e["at"] / 3600, e["from"], e["to"]) for e in redesigns(rows)]  # one page an hour
[(10.0, 0, 1)]
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: pages within this many bits of a template's representative belong to it (measured in
#: docs/quality.md: Big9 pages of one site and year, different sites)
TEMPLATE_DISTANCE = 14
#: pages compared before and after a possible redesign
REDESIGN_WINDOW = 10
#: at least this many pages on each side of a redesign
MIN_PAGES = 5
#: a redesign moves off templates the host has served for at least this long (seconds): a
#: crawl of a static site, minutes long, moves between sections of different layout but never
#: redesigns it
REDESIGN_MIN_AGE = 3600.0
#: at most this share of the fetches after a redesign may still be on the old templates
MAX_OLD_SHARE = 0.2
#: the new template holds at least this share of the fetches after a redesign
MIN_NEW_SHARE = 0.2
#: a redesign's split (pages on the old templates before the cut, off them after it) must be
#: less likely than this to arise by chance from pages of one mix of templates in random order
#: (one-sided Fisher exact test on the two windows)
MAX_CHANCE = 0.001
#: main texts at least this long (bytes of normalised text) are content, never a soft-404
#: (the repeated-boilerplate guard's length, :data:`neardup.matching.GUARD_MAX_LENGTH`)
SOFT404_MAX_LENGTH = 1000
#: a short text served under this many distinct URLs of the host (with one structure) is
#: the host's error or empty template
SOFT404_MIN_URLS = 3
#: per-host state limits: templates kept (the smallest, least recently seen go first) and
#: repeated short texts tracked
MAX_TEMPLATES = 64
MAX_TEXTS = 1024
#: a redesign's new template has at least this many pages after the cut in sections where the
#: old templates had pages (module docs)
MIN_SECTION_PAGES = 2
#: sections remembered per template
MAX_SECTIONS = 256
_DIGITS = re.compile(r"[0-9]+")
#: "no section": a page without a URL
NO_SECTION = -1


def section_of(url: str | None) -> int:
    """The section of a page (module docs): a hash of its URL's folder with digit runs masked
    and the names of its query's parameters (an events calendar's ``/events?month=3`` is not
    the section of ``/about.html``), :data:`NO_SECTION` without a URL.

    >>> section_of("https://a.example/2019/03/18/a.html") == section_of("https://a.example/2022/08/10/b.html")
    True
    >>> section_of("https://a.example/library/email.html") == section_of("https://a.example/c-api/list.html")
    False
    >>> section_of("https://a.example/events?month=3") == section_of("https://a.example/about.html")
    False
    """
    if not url:
        return NO_SECTION
    rest = url.split("://", 1)[-1]
    path = rest[rest.find("/"):] if "/" in rest else "/"
    path, _, query = path.split("#", 1)[0].partition("?")
    folder = path[:path.rfind("/") + 1] or "/"
    names = sorted({part.split("=", 1)[0] for part in query.split("&") if part})
    key = _DIGITS.sub("N", folder) + ("?" + "&".join(names) if names else "")
    return zlib.crc32(key.encode("utf-8", "surrogatepass"))


def _moved_here(after_on_new: Sequence[int], old_sections: set[int]) -> bool:
    """Whether the pages on a redesign's new template (their sections) are where the old
    templates were: :data:`MIN_SECTION_PAGES` of them in ``old_sections``, or no evidence
    (no URLs) either way."""
    if not old_sections or any(x == NO_SECTION for x in after_on_new):
        return True
    return sum(1 for x in after_on_new if x in old_sections) >= MIN_SECTION_PAGES


@dataclass(frozen=True)
class TemplatePage:
    """What the template functions read of one stored page."""

    fetched_at: float
    structure: int
    digest: str | None = None  # the main-text digest (Fingerprint.digest)
    length: int = 0  # bytes of normalised main text (Fingerprint.length); 0: empty
    url: str | None = None


@dataclass
class Template:
    """One structure template of a host: its id, representative structure, pages and span."""

    id: int
    structure: int
    pages: int = 0
    first: float = 0.0
    last: float = 0.0
    bit_counts: list[int] = field(default_factory=lambda: [0] * 64, repr=False)
    share: float = field(default=0.0, compare=False)  # set by HostStructure.template_shares
    #: the sections of its pages (:func:`section_of`; at most :data:`MAX_SECTIONS`)
    sections: set[int] = field(default_factory=set, repr=False)

    def add(self, structure: int, at: float, section: int = NO_SECTION) -> None:
        """Count one more page with ``structure`` fetched at ``at`` (in ``section``); the
        representative is the bitwise majority (ties keep the current bit)."""
        if section != NO_SECTION and len(self.sections) < MAX_SECTIONS:
            self.sections.add(section)
        first = self.pages == 0
        self.pages += 1
        counts = self.bit_counts
        rep = 0
        for b in range(64):
            bit = (structure >> b) & 1
            counts[b] += bit
            c2 = 2 * counts[b]
            if c2 > self.pages or (c2 == self.pages and (self.structure >> b) & 1 and not first):
                rep |= 1 << b
        self.structure = structure if first else rep
        self.first = at if first else min(self.first, at)
        self.last = max(self.last, at)

    def merge(self, other: Template) -> None:
        """Take ``other``'s pages (its bit counts, span) into this template."""
        self.pages += other.pages
        self.sections |= set(list(other.sections)[:max(0, MAX_SECTIONS - len(self.sections))])
        self.bit_counts = [a + b for a, b in zip(self.bit_counts, other.bit_counts, strict=True)]
        rep = 0
        for b in range(64):
            c2 = 2 * self.bit_counts[b]
            if c2 > self.pages or (c2 == self.pages and (self.structure >> b) & 1):
                rep |= 1 << b
        self.structure = rep
        self.first = min(self.first, other.first)
        self.last = max(self.last, other.last)

    def to_dict(self) -> dict[str, Any]:
        """The public form: ``{"id", "structure" (hex), "pages", "share", "first", "last"}``."""
        return {"id": self.id, "structure": f"{self.structure:016x}", "pages": self.pages,
                "share": round(self.share, 4), "first": self.first, "last": self.last}


def _nearest(templates: Sequence[Template], structure: int) -> tuple[Template | None, int]:
    best: Template | None = None
    best_d = 65
    for t in templates:
        d = (t.structure ^ structure).bit_count()
        if d < best_d:
            best, best_d = t, d
    return best, best_d


def _cut(before: Sequence[int], after: Sequence[int], max_old_share: float,
         past: Iterable[int] = ()) -> tuple[float, int, set[int]] | None:
    """Whether the fetches moved between ``before`` and ``after`` (template ids): (the share
    of ``after`` still on old templates, the new template, the old templates), or None. The
    old templates are those of ``before`` and ``past`` (the host's earlier templates with 2 or
    more pages), but the new one. The new template holds at least MIN_NEW_SHARE of ``after``
    and at most one page of ``before`` (an odd early page); the old templates at most
    ``max_old_share`` of ``after``; and the split is not one that pages in random order give
    (:func:`_chance`)."""
    if not before or not after:
        return None
    to, count = Counter(after).most_common(1)[0]
    if count < MIN_NEW_SHARE * len(after) or before.count(to) > 1:
        return None
    old = (set(before) | set(past)) - {to}
    old_after = sum(1 for x in after if x in old)
    share = old_after / len(after)
    if share > max_old_share:
        return None
    if _chance(len(before) - sum(1 for x in before if x in old), len(before), len(after) - old_after,
               len(after)) > MAX_CHANCE:
        return None
    return share, to, old


def _chance(new_before: int, before: int, new_after: int, after: int) -> float:
    """The probability that at least ``new_after`` of the ``new_before + new_after`` pages off
    the old templates fall among the last ``after`` of ``before + after`` pages put in random
    order (one-sided Fisher exact test): how easily one mix of templates gives this split.

    >>> round(_chance(0, 5, 5, 5), 4), round(_chance(0, 10, 10, 10), 7)  # 1 / C(10, 5), 1 / C(20, 10)
    (0.004, 5.4e-06)
    """
    n, k = before + after, new_before + new_after
    ways = sum(math.comb(k, x) * math.comb(n - k, after - x) for x in range(new_after, min(k, after) + 1))
    return ways / math.comb(n, after)


def _first_page(ids: Sequence[int], start: int, cut: int, to: int, old: set[int], window: int,
                representatives: dict[int, int]) -> int:
    """The first page of a redesign found at ``cut`` (a run of valid cuts from ``start``): the
    first page from ``start`` on the new template or on one that repeats in the window after
    the cut; a one-off page (a template seen once there) counts when its structure is nearer the
    new template than the old ones (it may be the new design's first page or the old one's last)."""
    seen = Counter(ids[cut:cut + window])
    later = {x for x, c in seen.items() if c >= 2 or x == to} - old
    for k in range(start, len(ids)):
        x = ids[k]
        if x in later:
            return k
        if x in old or x not in representatives or to not in representatives:
            continue
        s = representatives[x]
        near_old = min(((s ^ representatives[o]).bit_count() for o in old if o in representatives), default=65)
        if (s ^ representatives[to]).bit_count() < near_old:
            return k
    return cut


def _url_key(url: str | None) -> int:
    return zlib.crc32(url.encode("utf-8", "surrogatepass")) if url else 0


@dataclass
class HostStructure:
    """The per-host state for templates, redesigns and soft-404s, updated at add time.

    Keep one per host in memory, or store :meth:`to_dict` (JSON) and :meth:`from_dict`.
    Its size is bounded: at most :data:`MAX_TEMPLATES` templates (65 integers each), the
    template ids of the last ``2 * window`` pages and :data:`MAX_TEXTS` repeated short texts.

    >>> host = HostStructure()
    >>> shell, article = 0xAAAA_0000_5555_0000, 0x0000_FFFF_0000_FFFF
    >>> [host.observe(float(i), article, f"d{i}", 5000, f"/a{i}").flag for i in range(3)]
    [None, None, None]
    >>> [host.observe(10.0 + i, shell, "nf", 120, f"/x{i}").flag for i in range(4)]
    [None, None, 'soft-404', 'soft-404']
    >>> HostStructure.from_dict(host.to_dict()) == host
    True
    """

    threshold: int = TEMPLATE_DISTANCE
    window: int = REDESIGN_WINDOW
    templates: list[Template] = field(default_factory=list)
    next_id: int = 0
    pages: int = 0
    recent: list[int] = field(default_factory=list)  # template ids of the last 2 * window pages
    recent_at: list[float] = field(default_factory=list)
    recent_sections: list[int] = field(default_factory=list)  # their sections (:func:`section_of`)
    #: digest -> [distinct URL keys (up to SOFT404_MIN_URLS), structure of its first page, pages]
    texts: dict[str, list[Any]] = field(default_factory=dict)
    redesigns: list[dict[str, Any]] = field(default_factory=list)
    merged: dict[int, int] = field(default_factory=dict)  # template id -> the id it merged into
    soft_404s: int = 0
    template_only: int = 0

    # -- templates -------------------------------------------------------------------
    def assign(self, structure: int, at: float, section: int = NO_SECTION) -> Template:
        """The template of a page with ``structure`` fetched at ``at`` (in ``section``;
        joined or new)."""
        self.pages += 1
        t, d = _nearest(self.templates, structure)
        if t is None or d > self.threshold:
            if len(self.templates) >= MAX_TEMPLATES:
                self.templates.remove(min(self.templates, key=lambda x: (x.pages, x.last)))
            t = Template(self.next_id, structure)
            self.next_id += 1
            self.templates.append(t)
        t.add(structure, at, section)
        # a template whose representative moved within reach of another one is the same template
        other, d = _nearest([x for x in self.templates if x is not t], t.structure)
        if other is not None and d <= self.threshold:
            keep, gone = (t, other) if t.id < other.id else (other, t)
            keep.merge(gone)
            self.templates.remove(gone)
            self.merged[gone.id] = keep.id
            t = keep
        return t

    def current_id(self, template_id: int) -> int:
        """The id a template has now (templates merge when their representatives meet)."""
        while template_id in self.merged:
            template_id = self.merged[template_id]
        return template_id

    def template_shares(self) -> list[Template]:
        """The templates, most pages first, with ``share`` of the pages counted here."""
        total = sum(t.pages for t in self.templates) or 1
        for t in self.templates:
            t.share = t.pages / total
        return sorted(self.templates, key=lambda t: (-t.pages, t.id))

    # -- the add-time call -----------------------------------------------------------------
    def observe(self, fetched_at: float, structure: int, digest: str | None = None, length: int = 0,
                url: str | None = None) -> Observation:
        """Take one new page of the host: its template, its soft-404 flag and a redesign
        event when this page completes the window after one (reported ``window`` pages late,
        with ``at`` the first page of the new structure)."""
        section = section_of(url)
        t = self.assign(structure, fetched_at, section)
        if self.merged:  # keep the window's ids current; the state needs no older mapping
            self.recent = [self.current_id(x) for x in self.recent]
            self.merged.clear()
        self.recent.append(t.id)
        self.recent_at.append(fetched_at)
        self.recent_sections.append(section)
        if len(self.recent) > 2 * self.window:
            del self.recent[0], self.recent_at[0]
        if len(self.recent_sections) > len(self.recent):  # a state read without sections
            del self.recent_sections[:len(self.recent_sections) - len(self.recent)]
        while len(self.recent_sections) < len(self.recent):
            self.recent_sections.insert(0, NO_SECTION)
        event = self._redesign_at_window()
        if event is not None:
            self.redesigns.append(event)
        flag = self._soft_404(structure, digest, length, url)
        if flag == "soft-404":
            self.soft_404s += 1
        elif flag == "template-only":
            self.template_only += 1
        return Observation(template=t.id, flag=flag, redesign=event)

    def _redesign_at_window(self) -> dict[str, Any] | None:
        n = len(self.recent)
        if n < self.window + MIN_PAGES:
            return None
        i = n - self.window  # the cut: the window after it is the last `window` pages
        if self.recent_at[i - 1] >= self.recent_at[i]:
            return None
        before, after = self.recent[max(0, i - self.window):i], self.recent[i:]
        past = [t.id for t in self.templates if t.pages - after.count(t.id) >= 2]
        cut = _cut(before, after, MAX_OLD_SHARE, past)
        if cut is None:
            return None
        _, to, old = cut
        pages_to = next((t.pages for t in self.templates if t.id == to), 0)
        if pages_to - after.count(to) > max(1.0, MAX_OLD_SHARE * (self.pages - len(after))):
            return None  # a return to a template of the host's past, not a new one
        if self.recent_at[i] - min((t.first for t in self.templates if t.id in old), default=self.recent_at[i]) \
                < REDESIGN_MIN_AGE:
            return None  # templates seen for minutes: the crawl is still discovering the site
        old_sections = set().union(*(t.sections for t in self.templates if t.id in old))
        if not _moved_here([s for x, s in zip(after, self.recent_sections[i:], strict=True) if x == to],
                           old_sections):
            return None  # the crawl moved to another part of the site
        j = _first_page(self.recent, i, i, to, old, self.window, {t.id: t.structure for t in self.templates})
        if self.redesigns and (self.redesigns[-1]["to"] == to or self.redesigns[-1]["at"] >= self.recent_at[i - 1]):
            return None  # the same move, seen from a later cut
        rest = [x for x in before if x != to] or before
        return {"at": self.recent_at[j], "pages": sum(1 for x in self.recent[j:] if x not in old),
                "from": Counter(rest).most_common(1)[0][0], "to": to}

    def _soft_404(self, structure: int, digest: str | None, length: int, url: str | None) -> str | None:
        if digest is None or length >= SOFT404_MAX_LENGTH:
            return None
        entry = self.texts.get(digest)
        if entry is None:
            if len(self.texts) >= MAX_TEXTS:  # forget texts seen once, oldest first
                once = [k for k, v in self.texts.items() if v[2] == 1][: MAX_TEXTS // 2]
                for old_key in once or list(self.texts)[:1]:
                    del self.texts[old_key]
            entry = self.texts[digest] = [[], structure, 0]
        entry[2] += 1
        url_key = _url_key(url)
        if url_key not in entry[0] and len(entry[0]) < SOFT404_MIN_URLS:
            entry[0].append(url_key)
        if len(entry[0]) < SOFT404_MIN_URLS or (entry[1] ^ structure).bit_count() > self.threshold:
            return None
        return "template-only" if length == 0 else "soft-404"

    # -- persistence -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (:meth:`from_dict` reads it back)."""
        return {"threshold": self.threshold, "window": self.window, "next_id": self.next_id,
                "pages": self.pages, "recent": list(self.recent), "recent_at": list(self.recent_at),
                "recent_sections": list(self.recent_sections),
                "templates": [[t.id, t.structure, t.pages, t.first, t.last, list(t.bit_counts), sorted(t.sections)]
                              for t in self.templates],
                "texts": {k: [list(v[0]), v[1], v[2]] for k, v in self.texts.items()},
                "redesigns": [dict(e) for e in self.redesigns], "merged": {str(k): v for k, v in self.merged.items()},
                "soft_404s": self.soft_404s,
                "template_only": self.template_only}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostStructure:
        """The state :meth:`to_dict` wrote."""
        return cls(threshold=int(data["threshold"]), window=int(data["window"]), next_id=int(data["next_id"]),
                   pages=int(data["pages"]), recent=[int(x) for x in data["recent"]],
                   recent_at=[float(x) for x in data["recent_at"]],
                   recent_sections=[int(x) for x in data.get("recent_sections", [NO_SECTION] * len(data["recent"]))],
                   templates=[Template(int(i), int(s), int(p), float(f), float(la), [int(c) for c in bc],
                                       sections={int(x) for x in (rest[0] if rest else [])})
                              for i, s, p, f, la, bc, *rest in data["templates"]],
                   texts={str(k): [[int(u) for u in v[0]], int(v[1]), int(v[2])] for k, v in data["texts"].items()},
                   redesigns=[dict(e) for e in data["redesigns"]],
                   merged={int(k): int(v) for k, v in data.get("merged", {}).items()}, soft_404s=int(data["soft_404s"]),
                   template_only=int(data["template_only"]))

    def summary(self) -> dict[str, Any]:
        """The host-signal fields: ``templates`` (how many, the share on each), ``redesigns``,
        ``soft_404s``, ``template_only``."""
        shares = self.template_shares()
        return {"templates": {"count": len(shares), "shares": [round(t.share, 4) for t in shares]},
                "redesigns": [dict(e) for e in self.redesigns], "merged": {str(k): v for k, v in self.merged.items()},
                "soft_404s": self.soft_404s,
                "template_only": self.template_only}


@dataclass(frozen=True)
class Observation:
    """What :meth:`HostStructure.observe` says of one page."""

    template: int
    flag: str | None = None  # "soft-404", "template-only" or None
    redesign: dict[str, Any] | None = None


def _ordered(rows: Iterable[TemplatePage]) -> list[TemplatePage]:
    return sorted(rows, key=lambda r: r.fetched_at)


def assign(rows: Iterable[TemplatePage],
           threshold: int = TEMPLATE_DISTANCE) -> tuple[list[TemplatePage], list[int], HostStructure]:
    """The rows in fetch order, the template id of each, and the state they built.

    >>> _, ids, _ = assign([TemplatePage(1.0, 0), TemplatePage(2.0, 1), TemplatePage(3.0, 2**64 - 1)])
    >>> ids
    [0, 0, 1]
    """
    ordered = _ordered(rows)
    state = HostStructure(threshold=threshold)
    ids = [state.assign(r.structure, r.fetched_at, section_of(r.url)).id for r in ordered]
    return ordered, [state.current_id(i) for i in ids], state


def templates(rows: Iterable[TemplatePage], threshold: int = TEMPLATE_DISTANCE) -> list[dict[str, Any]]:
    """A host's templates, most pages first: ``{"id", "structure" (hex, the representative),
    "pages", "share", "first", "last"}``.

    >>> [t["pages"] for t in templates([TemplatePage(1.0, 0), TemplatePage(2.0, 3), TemplatePage(3.0, 2**64 - 1)])]
    [2, 1]
    """
    _, _, state = assign(rows, threshold)
    return [t.to_dict() for t in state.template_shares()]


def redesigns(rows: Iterable[TemplatePage], threshold: int = TEMPLATE_DISTANCE, window: int = REDESIGN_WINDOW,
              min_pages: int = MIN_PAGES, max_old_share: float = MAX_OLD_SHARE) -> list[dict[str, Any]]:
    """When the host's fetches moved to another structure for good: ``{"at": time, "pages":
    n (later pages on the new templates), "from": template id, "to": template id}``, in
    time order (rule: module docs). Template ids are those of :func:`templates`.

    >>> old, new = 0, 2**64 - 1
    >>> rows = [TemplatePage(t * 3600.0, new if t in (5, 12) or t >= 20 else old) for t in range(30)]
    >>> [(e["at"] / 3600, e["pages"]) for e in redesigns(rows)]  # pages 5 and 12 are odd ones
    [(20.0, 10)]
    """
    ordered, ids, state = assign(rows, threshold)
    representatives = {t.id: t.structure for t in state.templates}
    n = len(ids)
    times = [r.fetched_at for r in ordered]
    sections = [section_of(r.url) for r in ordered]
    seen_in: dict[int, set[int]] = {}  # template -> the sections of its pages before the cut
    for k in range(min(n, max(1, min_pages) - 1)):
        seen_in.setdefault(ids[k], set()).add(sections[k])
    none: tuple[int, float, int, set[int]] = (-1, 1.0, -1, set())
    cuts: list[tuple[int, float, int, set[int]]] = []  # (cut, old share after it, new template, old ones)
    first = max(1, min_pages)
    seen: Counter[int] = Counter(ids[:first - 1])  # the pages before the cut, by template
    since: dict[int, float] = {}  # template -> its first fetch
    for k in range(n):
        since.setdefault(ids[k], times[k])
    for i in range(first, n - window + 1):  # a full window after the cut, as observe() sees it
        seen[ids[i - 1]] += 1
        seen_in.setdefault(ids[i - 1], set()).add(sections[i - 1])
        if times[i - 1] >= times[i]:
            cuts.append(none)
            continue
        before = ids[max(0, i - window):i]
        cut = _cut(before, ids[i:i + window], max_old_share, [x for x, c in seen.items() if c >= 2])
        # a new template (a few odd pages before), not a return to one of the host's past
        if cut is not None and seen[cut[1]] <= max(1.0, max_old_share * i) \
                and times[i] - min((since[x] for x in cut[2] if x in since), default=times[i]) >= REDESIGN_MIN_AGE \
                and _moved_here(
                [sections[k] for k in range(i, i + window) if ids[k] == cut[1]],
                set().union(*(seen_in.get(x, set()) for x in cut[2])) - {NO_SECTION}):
            # for good: the templates the host was on keep at most max_old_share of all later fetches
            current = {x for x, c in Counter(before).items() if c >= 2} - {cut[1]}
            if sum(1 for x in ids[i:] if x in current) <= max_old_share * (n - i):
                cuts.append((i, cut[0], cut[1], cut[2]))
                continue
        cuts.append(none)
    events: list[dict[str, Any]] = []
    shares: list[float] = []  # each event's old share at its cut
    run: list[tuple[int, float, int, set[int]]] = []
    for item in [*cuts, none]:
        if item[0] >= 0:
            run.append(item)
            continue
        if run:
            i, share, to, old = min(run, key=lambda x: (x[1], x[0]))
            before = ids[max(0, i - window):i]
            j = _first_page(ids, run[0][0], i, to, old, window, representatives)
            rest = [x for x in before if x != to] or before
            event = {"at": times[j], "pages": sum(1 for x in ids[j:] if x not in old),
                     "from": Counter(rest).most_common(1)[0][0], "to": to}
            if not events or events[-1]["to"] != to:
                events.append(event)
                shares.append(share)
            elif share < shares[-1]:  # a later run to the same template: the same move, seen better
                events[-1], shares[-1] = event, share
            run = []
    return events


def soft_404s(rows: Iterable[TemplatePage], threshold: int = TEMPLATE_DISTANCE) -> list[str | None]:
    """The soft-404 flag (``"soft-404"``, ``"template-only"`` or None) of each row, in fetch
    order, as :meth:`HostStructure.observe` gives it at add time (rule: module docs).

    >>> rows = [TemplatePage(float(i), 7, "nf", 80, f"/p{i}") for i in range(4)]
    >>> soft_404s(rows)
    [None, None, 'soft-404', 'soft-404']
    """
    state = HostStructure(threshold=threshold)
    return [state.observe(r.fetched_at, r.structure, r.digest, r.length, r.url).flag for r in _ordered(rows)]

"""The match rule between two fingerprinted pages, in one place.

The Detector applies it to every candidate the index and the digest lookup return; the
quality harness (``benchmarks/quality.py``) applies it to every labelled and corpus pair, so
the figures in docs/quality.md are those of the product.

In order:

1. an *empty* page (too little main content) matches nothing;
2. **repeated-boilerplate guard**: two pages of one host whose titles differ
   (:func:`neardup.matching.same_title`) and whose shorter main text is under
   :data:`GUARD_MAX_LENGTH` bytes do not match: that text is something the host repeats
   on many pages (an author box, a sidebar the extractor took for the article), not content;
3. equal digests: ``exact``;
4. SimHash distance ``<= k``: a candidate, ``near`` when the verification sketches
   (:mod:`neardup.sketch`) estimate a word 3-shingle Jaccard similarity ``>= verify`` (or when
   ``verify`` is None, or neither page's spec has a sketch: spec version 1). A fingerprint
   whose spec has a sketch but that comes without one (a crawler sending only a SimHash)
   is never ``near``: it can only be ``exact``;
5. beyond ``k``, a pair the sketch bands bring (:mod:`neardup.index.bands`: the two sketches share a
   band) is decided by :func:`far_match` at ``max(verify, FAR_VERIFY)``: :func:`pair_rule`
   applies steps 1-5 to any pair, as the Detector, batch, Spark and ``tune`` do.

>>> from neardup import fingerprint
>>> text = " ".join(f"word{i}" for i in range(300))
>>> a = Side.of(fingerprint(text), "https://a.example/1")
>>> b = Side.of(fingerprint(text.replace("word7 ", "")), "https://b.example/1")
>>> m = match(a, b, k=12, verify=0.2)
>>> m.status, m.distance <= 12, m.score > 0.9
('near', True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from neardup.index.bands import far_verify, share_band
from neardup.sketch import similarity
from neardup.urls import host_of, origin_host

if TYPE_CHECKING:
    from neardup.fingerprint.core import Fingerprint

#: main texts shorter than this (bytes of normalised text, about 170 words) are checked by
#: the repeated-boilerplate guard; longer ones are content whatever the title (a news site
#: editing a headline keeps the article). Measured in docs/quality.md.
GUARD_MAX_LENGTH = 1000
#: beyond the SimHash radius, the sketch estimate two pages of one host with different titles
#: need (:func:`far_match`): above the serial posts of one site that share a template text
#: (0.45-0.6 on the corpus) and two pages documenting one thing two ways (Sphinx's Google- and
#: NumPy-style examples: 0.70-0.73); chosen by ``benchmarks/candidates.py`` (docs/quality.md,
#: *Same document*), which weighs it against a live page's recaptures under a changed title
FAR_TITLE_VERIFY = 0.8
#: what a fingerprint spec with a verification sketch says (spec version 2 on)
SKETCH_SPEC = ";sketch="


class StoredPage(Protocol):
    """What the rule reads of a stored page (a :class:`neardup.store.base.PageRecord` is one)."""

    @property
    def simhash(self) -> int: ...
    @property
    def digest(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def sketch(self) -> bytes | None: ...
    @property
    def title(self) -> str | None: ...
    @property
    def host(self) -> str: ...
    @property
    def length(self) -> int: ...


@dataclass(frozen=True)
class Side:
    """What the match rule reads of one page."""

    simhash: int
    digest: str
    empty: bool = False
    sketch: bytes | None = None
    title: str | None = None
    host: str | None = None  # None when unknown (file: URLs): the guard never applies
    length: int = 0
    #: a fingerprint being decided whose spec has a sketch (version 2 on): a missing sketch is
    #: then no reason to skip the check (a stored page without one, written before sketches, is)
    expects_sketch: bool = False

    @classmethod
    def of(cls, fp: Fingerprint, url: str | None = None) -> Side:
        """From a fingerprint (and the URL it was fetched from)."""
        return cls(simhash=fp.simhash, digest=fp.digest, empty=fp.empty, sketch=fp.sketch,
                   title=fp.title, host=(host_of(url) or None) if url else None, length=fp.length,
                   expects_sketch=SKETCH_SPEC in fp.spec)

    @classmethod
    def of_record(cls, rec: StoredPage) -> Side:
        """From a stored page."""
        return cls(simhash=rec.simhash, digest=rec.digest, empty=rec.status == "empty",
                   sketch=rec.sketch, title=rec.title, host=origin_host(rec.host) or None, length=rec.length)


@dataclass(frozen=True)
class Match:
    """The outcome for one pair: ``status`` ``exact`` | ``near`` | None (no match), the
    SimHash ``distance``, the sketch's Jaccard estimate ``score`` (None without sketches)
    and, for no match, ``reason``: ``empty``, ``boilerplate``, ``distance``, ``no-sketch``,
    ``verify`` or (:func:`far_match`) ``far-title``."""

    status: str | None
    distance: int
    score: float | None = None
    reason: str | None = None


def repeated_boilerplate(a: Side, b: Side) -> bool:
    """The guard of rule 2: same host, different titles, a short main text."""
    return (a.host is not None and a.host == b.host and min(a.length, b.length) < GUARD_MAX_LENGTH
            and not same_title(a.title, b.title))


def sketch_score(a: Side, b: Side) -> float | None:
    """The sketches' Jaccard estimate, None when either page has none (or other widths)."""
    if a.sketch is None or b.sketch is None or len(a.sketch) != len(b.sketch):
        return None
    return similarity(a.sketch, b.sketch).jaccard


def title_guarded(a: Side, b: Side) -> bool:
    """Two pages of one host with different titles and different digests: beyond the SimHash
    radius they need :data:`FAR_TITLE_VERIFY` (:func:`far_match`)."""
    return a.host is not None and a.host == b.host and not same_title(a.title, b.title) and a.digest != b.digest


def far_match(a: Side, b: Side, verify: float | None, title_verify: float = FAR_TITLE_VERIFY) -> Match:
    """The rule for a pair beyond the SimHash radius, which only the sketch bands bring
    (:mod:`neardup.index.bands`; ``verify`` is then ``far_verify``): :func:`match` at any distance,
    except that two pages of one host whose titles differ need a sketch estimate of at least
    :data:`FAR_TITLE_VERIFY`. Serial posts of one site (weekly download news, podcast
    episodes, game write-ups) share half their text or more under different titles; within k
    the SimHash keeps them apart, beyond it the title does (``benchmarks/product_rule.py``),
    while copies of one page under many titles (a crawler trap) stay near. ``title_verify``:
    another threshold for those pairs (what ``benchmarks/candidates.py`` compares).

    >>> from neardup import fingerprint
    >>> shared = " ".join(f"word{i}" for i in range(200))   # two thirds of each page alike
    >>> def page(title, n):
    ...     own = " ".join(f"ep{n}word{i}" for i in range(100))
    ...     return Side.of(fingerprint(f"<title>{title}</title><p>{shared} {own}</p>"), f"https://a.example/{n}")
    >>> far_match(page("Episode 1", 1), page("Episode 2", 2), 0.33).reason
    'far-title'
    >>> far_match(page("The story", 1), page("The story", 2), 0.33).status
    'near'
    """
    if verify is not None and title_guarded(a, b):
        outcome = match(a, b, 128, max(verify, title_verify))
        return outcome if outcome.status is not None or outcome.reason != "verify" else replace(
            outcome, reason="far-title")
    return match(a, b, 128, verify)


def pair_rule(a: Side, b: Side, k: int, verify: float | None, bands: bool = True) -> Match:
    """The whole decision for a pair, whichever candidate path brings it: :func:`match` within
    ``k`` (and for equal digests, empty pages and the guard); beyond it, when ``bands`` and the
    two sketches share a band (:func:`neardup.index.bands.share_band`), :func:`far_match` at
    :func:`neardup.index.bands.far_verify`; otherwise no match (reason ``distance``).

    >>> from neardup import fingerprint
    >>> text = " ".join(f"word{i}" for i in range(300))
    >>> a = Side.of(fingerprint(text), "https://a.example/1")
    >>> b = Side.of(fingerprint(" ".join(f"word{i}" for i in range(60, 360))), "https://b.example/1")
    >>> pair_rule(a, b, 3, 0.3).status, pair_rule(a, b, 3, 0.3, bands=False).reason
    ('near', 'distance')
    """
    within = match(a, b, k, verify)
    if within.reason != "distance" or not bands or not share_band(a.sketch, b.sketch):
        return within
    far = far_verify(verify)
    return far_match(a, b, far) if far is not None else within


def match(a: Side, b: Side, k: int, verify: float | None) -> Match:
    """Apply the match rule (module docs) to pages ``a`` and ``b``."""
    distance = (a.simhash ^ b.simhash).bit_count()
    if a.empty or b.empty:
        return Match(None, distance, reason="empty")
    if repeated_boilerplate(a, b):
        return Match(None, distance, reason="boilerplate")
    if a.digest == b.digest:
        return Match("exact", distance, 1.0)
    if distance > k:
        return Match(None, distance, reason="distance")
    score = sketch_score(a, b)
    missing = (a.expects_sketch and a.sketch is None) or (b.expects_sketch and b.sketch is None)
    if verify is not None and score is None and missing:
        return Match(None, distance, reason="no-sketch")  # a SimHash alone never makes "near"
    if verify is not None and score is not None and score < verify:
        return Match(None, distance, score, reason="verify")
    return Match("near", distance, score)


# -- titles: what the repeated-boilerplate guard and the far rule compare ----------------------------

_WORD = re.compile(r"\w+")
#: when both titles keep words of their own once their common start and end are set aside (a
#: rewritten headline), the share of those middle parts' words (their union, in order) that
#: their longest common subsequence must hold for the two to count as one title
MIN_SHARED = 0.6
#: words one title may have inserted between words it shares with the other, both its start
#: and its end being shared ("Trump signs NASA [funding] bill | ABC News"), and still be the
#: same title; more is a part of its own (a class page's title inside its module's)
MAX_INSERTED = 1
#: words of each middle part compared (the rest of an absurdly long title is not read)
MAX_TITLE_WORDS = 64
#: a headline edited in place: a title of at least this many words ...
EDITED_MIN_WORDS = 8
#: ... of which at least this share is the other title's too (at its start, its end and in
#: order between them), the words that differ not only in their numbers
EDITED_MIN_SHARED = 0.75
_DIGITS = re.compile(r"[0-9]+")


def title_words(title: str | None) -> list[str]:
    """Casefolded words of a title."""
    return _WORD.findall(title.casefold()) if title else []


def _common_subsequence(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two word lists."""
    if not set(a) & set(b):
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def own_parts(a: str | None, b: str | None) -> tuple[int, int, list[str], list[str]] | None:
    """The words two titles share at their start and at their end (how many), and each title's
    own part between them (None when a title is missing or has no word).

    >>> own_parts("Trump signs NASA bill | ABC News", "Trump signs NASA funding bill | ABC News")
    (3, 3, [], ['funding'])
    """
    wa, wb = title_words(a), title_words(b)
    if not wa or not wb:
        return None
    start = 0
    while start < min(len(wa), len(wb)) and wa[start] == wb[start]:
        start += 1
    end = 0
    while end < min(len(wa), len(wb)) - start and wa[-1 - end] == wb[-1 - end]:
        end += 1
    return start, end, wa[start:len(wa) - end], wb[start:len(wb) - end]


def same_title(a: str | None, b: str | None) -> bool:
    """Do two pages of one host carry the same title? What the repeated-boilerplate guard and
    the far rule (:func:`title_guarded`) ask.

    An extractor sometimes returns, for every post of a site, the same author box or sidebar
    instead of the article (docs/quality.md: one Dragnet host gives five posts the same 29-token
    "main text"). Their digests are equal, yet the pages are different: their titles say so.
    Copies of one page on one host (session-id and tracking variants, http/https, recaptures)
    keep their title, give or take the site name.

    Pages of one site share their title's template: the site's name, a section, a product
    and its version ("... — Python 3.12 documentation", "BBC NEWS | Technology | ..."). So the
    words two titles share at the start and at the end are set aside, and what is left, each
    title's *own part*, is compared:

    - nothing left on either side: the same title;
    - one own part empty (the other title is this one with words added in one place): the
      same when the words are added at the very start or end (a site or section name) or
      are at most :data:`MAX_INSERTED` inserted between shared words (a headline's small
      edit); several words inserted inside a shared title are a distinctive part of their
      own (a class page's title inside its module's);
    - both own parts non-empty: the same only when one is the other with words inserted (as
      above, at most :data:`MAX_INSERTED`), when their longest common subsequence holds at
      least :data:`MIN_SHARED` of their words (a rewritten headline), or when a long title
      keeps most of its words and replaces a few that are not numbers (an edited headline:
      "... Stems From Longtime Grudge" / "... Stems From 'Personal Beef'"); two own parts that
      differ otherwise are two documents ("Example Google Style Python Docstrings" /
      "Example NumPy Style ...", "part 3" / "part 4").

    A missing title never counts as different.

    >>> same_title("Why Does Slack Say Hummus? - The Schmooze – Forward.com", "Why Does Slack Say Hummus?")
    True
    >>> same_title("Creative Food Sculptures - I Geek for Creativity", "The Human Bowling Ball - I Geek for Creativity")
    False
    >>> same_title("Gifts For Cheese Lovers", "How to Crimp Pie Crust"), same_title(None, "Anything")
    (False, True)
    >>> docs = " — Python 3.12 documentation"
    >>> same_title("email.message: Representing an email message" + docs,
    ...            "email.message.Message: Representing an email message using the compat32 API" + docs)
    False
    >>> same_title("Trump signs NASA bill | ABC News", "Trump signs NASA funding bill | ABC News")
    True
    >>> same_title("Clinton: Putin's Alleged Involvement in Hack Stems From Longtime Grudge - ABC News",
    ...            "Clinton: Putin's Alleged Involvement in Hack Stems From 'Personal Beef' - ABC News")
    True
    >>> same_title("Example Google Style Python Docstrings", "Example NumPy Style Python Docstrings")
    False
    """
    parts = own_parts(a, b)
    if parts is None:
        return True
    start, end, ra, rb = parts
    ra, rb = ra[:MAX_TITLE_WORDS], rb[:MAX_TITLE_WORDS]
    if not ra or not rb:  # words added in one place (or none)
        return start == 0 or end == 0 or len(ra) + len(rb) <= MAX_INSERTED
    shared = _common_subsequence(ra, rb)
    own = len(ra) + len(rb) - 2 * shared
    if shared in (len(ra), len(rb)):  # one own part inside the other: words inserted
        return own <= MAX_INSERTED
    return shared >= MIN_SHARED * (shared + own) or _edited_headline(start + end + shared, ra, rb, parts)


def _edited_headline(shared: int, ra: list[str], rb: list[str], parts: tuple[int, int, list[str], list[str]]) -> bool:
    """A long title with a few of its words replaced (:data:`EDITED_MIN_WORDS`,
    :data:`EDITED_MIN_SHARED`), unless the replaced words differ only in their numbers (a
    series: "part 3" / "part 4", a version, a date)."""
    longer = parts[0] + parts[1] + max(len(ra), len(rb))
    if longer < EDITED_MIN_WORDS or shared < EDITED_MIN_SHARED * longer:
        return False
    return [_DIGITS.sub("0", w) for w in ra] != [_DIGITS.sub("0", w) for w in rb]

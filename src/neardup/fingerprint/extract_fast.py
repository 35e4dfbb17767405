"""The fast main-content path of the ``hybrid`` extractor: one Lexbor parse, no lxml.

Resiliparse's main-content pass (``extract_plain_text(main_content=True)``) already drops the
structural boilerplate: ``nav``, ``header``, ``footer``, ``aside``, ``form``, ARIA roles
(navigation, complementary, banner, contentinfo) and class or id tokens such as nav, menu,
sidebar, footer, comment, share, cookie, ad. What it keeps around an article is mostly
*text-level* boilerplate: "related stories" teasers, "read more" links, subscription boxes,
comment-policy notes. :func:`select_main_blocks` removes them by text and link density: each
block (paragraph, heading, list item) scores its words outside links, minus twice its words
inside links, minus a fixed cost per block; the main content is the contiguous run of blocks
with the highest total (a maximum-sum subarray, linear), with the heading right above it.

:func:`looks_wrong` says when that result should not be trusted and trafilatura should read
the page instead: nothing found, or a main text that is a small share of the page's visible
text (lopsided).

:func:`is_link_list` says when the page's content *is* its list of links (a table of contents,
an index, a sitemap, a category page): the page's main region (``<main>``, ``role="main"``,
``<article>``) holds what the selection kept, under :data:`MIN_MAIN_WORDS` words of it (a
heading, a timestamp, an ad: less than a paragraph), and the rest of the region is mostly link
text. An article's share bar, tags and related links never make its page a list: its text is
found. Such a page is read
as that region's blocks, anchor texts included, instead of the leftovers the density rules
and trafilatura keep of it (a timestamp, an ad, the letter bar of an index).

>>> raw = ('<p><a href="/">Home</a></p>\\n<h1>Title</h1>\\n<p>' + 'word ' * 40 + '</p>\\n'
...        '<p><a href="/r">Related story one</a></p>')
>>> [b.text[:9] for b in select_main_blocks(parse_blocks(raw))]
['# Title', 'word word']
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Sequence
from dataclasses import dataclass

BLOCK_COST = 4  # per block: short blocks (bylines, buttons, captions) score below zero
LINK_WEIGHT = 2  # a word inside a link costs this much (and does not count as text)
MIN_MAIN_WORDS = 50  # fewer main words than this on a page with more visible text: fall back
MIN_MAIN_SHARE = 0.30  # selected words under this share of the main-content pass's: fall back
#: a link-list page: its main region holds at least this many words in links ...
LINK_LIST_MIN_LINK_WORDS = 20
#: ... and at least this share of its words beside the selection in links
LINK_LIST_MIN_LINK_SHARE = 0.75
#: a page without a marked main region is read as its list of links only where every other
#: reading (trafilatura's included) has under MIN_MAIN_WORDS words or under this share of the
#: list's link words (a print version of a table of contents; measured in docs/extraction.md)
LINK_LIST_MAX_READING = 0.2

_LINK = re.compile(r"<a\b[^>]*>(.*?)</a>", re.DOTALL | re.IGNORECASE)
_HEADING = re.compile(r"^\s*<h[1-6]\b", re.IGNORECASE)
_LIST_ITEM = re.compile(r"<li\b[^>]*>", re.IGNORECASE)
_PRE = re.compile(r"^\s*<pre\b", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


@dataclass(frozen=True)
class Block:
    """One block of the main-content pass: its Markdown-like text, words and link words.

    >>> Block("Read more", 2, 2, False).score, Block("word " * 10, 10, 0, False).score
    (-8, 6)
    """

    text: str
    words: int
    link_words: int
    heading: bool

    @property
    def score(self) -> int:
        """Words outside links, minus LINK_WEIGHT per word in a link, minus BLOCK_COST.

        >>> Block("a b c", 3, 1, False).score
        -4
        """
        return (self.words - self.link_words) - LINK_WEIGHT * self.link_words - BLOCK_COST


def parse_blocks(raw: str) -> list[Block]:
    """The blocks of Resiliparse's ``minimal_html`` output (one block per line; ``links=True``
    so that link text can be told apart), as Markdown-like text: headings ``# ``, list items
    ``- ``, code kept with its line breaks.

    >>> [b.text for b in parse_blocks('<h2>A</h2>\\n<ul><li>x</li><li><a href="/">y</a></li></ul>')]
    ['# A', '- x\\n- y']
    """
    blocks: list[Block] = []
    lines = raw.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if _PRE.match(line) and "</pre>" not in line:  # <pre> keeps its line breaks: one block
            chunk = [line]
            while i < len(lines) and "</pre>" not in chunk[-1]:
                chunk.append(lines[i])
                i += 1
            line = "\n".join(chunk)
        link_words = sum(len(m.split()) for m in _LINK.findall(line)) if "<a" in line else 0
        heading = bool(_HEADING.match(line))
        if "<li" in line:
            line = _LIST_ITEM.sub("\n- ", line)
        text = html_lib.unescape(_TAG.sub("", line)).strip()
        if heading:
            text = "# " + " ".join(text.split())
        words = len(text.split()) - (1 if heading else 0)
        if words > 0:
            blocks.append(Block(text, words, min(link_words, words), heading))
    return blocks


def select_main_blocks(blocks: Sequence[Block]) -> list[Block]:
    """The contiguous run of blocks with the highest total score (Kadane), with the heading
    just above it; empty when no block scores above zero.

    >>> b = [Block("menu", 1, 1, False), Block("text " * 30, 30, 0, False)]
    >>> [x.words for x in select_main_blocks(b)]
    [30]
    """
    best = current = 0
    start = best_start = 0
    best_end = -1
    for i, block in enumerate(blocks):
        s = block.score
        if current <= 0:
            current, start = s, i
        else:
            current += s
        if current > best:
            best, best_start, best_end = current, start, i
    if best_end < 0:
        return []
    if best_start > 0 and blocks[best_start - 1].heading:
        best_start -= 1
    return list(blocks[best_start:best_end + 1])


def looks_wrong(main_words: int, block_words: int, visible_words: int | None) -> str | None:
    """Why the fast result should not be trusted (None when it looks right): nothing, or
    under MIN_MAIN_WORDS words on a page with more visible text (``visible_words``: all the
    page's visible words, counted only when ``main_words`` is that low), or under
    MIN_MAIN_SHARE of the ``block_words`` the main-content pass found (the page holds
    several large text regions and the selection kept a small one: lopsided).

    >>> looks_wrong(0, 0, 500), looks_wrong(30, 30, 40), looks_wrong(300, 400, None)
    ('empty', None, None)
    >>> looks_wrong(60, 1000, None)
    'lopsided: 60 of 1000 main-content words selected'
    """
    if visible_words is not None:
        if main_words == 0 and visible_words > 0:
            return "empty"
        if main_words < MIN_MAIN_WORDS <= visible_words:
            return f"short: {main_words} of {visible_words} visible words"
    if block_words and main_words < MIN_MAIN_SHARE * block_words:
        return f"lopsided: {main_words} of {block_words} main-content words selected"
    return None


def _letters(text: str) -> str:
    """A block's letters and digits: its identity across two readings of one page (the
    main-content pass drops a heading's permalink sign, the full reading keeps it)."""
    return "".join(ch for ch in text if ch.isalnum())


def selection_within(region: Sequence[Block], selected: Sequence[Block]) -> bool:
    """Whether the blocks ``selected`` are all in ``region`` but for links (a site menu the
    selection took): if not, the selection found content elsewhere and the region is not
    where the page keeps it.

    >>> region, menu, text = [Block("An article", 2, 0, False)], Block("Home", 1, 1, False), Block("Text", 1, 0, False)
    >>> selection_within(region, [menu, *region]), selection_within(region, [text])
    (True, False)
    """
    texts = {_letters(b.text) for b in region}
    return all(b.link_words >= b.words for b in selected if _letters(b.text) not in texts)


def is_link_list(region: Sequence[Block], selected: Sequence[Block]) -> bool:
    """Whether a page whose main region reads as ``region`` (all its blocks, links counted)
    is a list of links, the selection having kept the blocks ``selected`` (module docs): the
    selection found under :data:`MIN_MAIN_WORDS` words, all of them inside the region but for
    links (a menu the selection took), and
    the rest of the region is :data:`LINK_LIST_MIN_LINK_SHARE` links or more (at least
    :data:`LINK_LIST_MIN_LINK_WORDS` words of them).

    >>> toc = [Block("# Contents", 1, 0, True)] + [Block(f"- Chapter {i}", 2, 2, False) for i in range(30)]
    >>> stamp = Block("Last updated: today", 3, 0, False)
    >>> is_link_list([stamp, *toc], [stamp]), is_link_list(toc[:5], []), is_link_list(toc, [stamp])
    (True, False, False)
    >>> is_link_list(toc, [Block("word " * 60, 60, 0, False)])
    False
    >>> menu, prose = Block("Get started", 2, 2, False), Block("Read this first, then more", 5, 0, False)
    >>> is_link_list([stamp, *toc], [menu, stamp]), is_link_list([stamp, *toc], [prose, stamp])
    (True, False)
    """
    chosen = sum(b.words for b in selected)
    if chosen >= MIN_MAIN_WORDS or not selection_within(region, selected):
        return False
    texts = {_letters(b.text) for b in region}
    inside = [b for b in selected if _letters(b.text) in texts]
    words = sum(b.words for b in region) - sum(b.words for b in inside)
    links = sum(b.link_words for b in region) - sum(b.link_words for b in inside)
    return links >= LINK_LIST_MIN_LINK_WORDS and links >= LINK_LIST_MIN_LINK_SHARE * words


def count_words(text: str) -> int:
    """Number of blank-separated words (``str.split``: four times cheaper than a regex).

    >>> count_words("It's 2 o'clock")
    3
    """
    return len(text.split())

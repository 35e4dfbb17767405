"""Do two pages of one host carry the same title? The guard against repeated boilerplate.

An extractor sometimes returns, for every post of a site, the same author box or sidebar
instead of the article (docs/quality.md: one Dragnet host gives five posts the same 29-token
"main text"; another gives three recipes the same "Link Love" list). Their digests are equal,
yet the pages are different: their titles say so. Copies of one page on one host (session-id
and tracking variants, http/https, recaptures) keep their title, give or take the site name.

So two titles are *the same* when, once the words they share at the start and at the end
are set aside (usually the site name: "... - I Geek for Creativity"), one of the remaining
parts is empty (one title is the other plus a site name) or the two remaining parts share at
least half of their words. A missing title never counts as different.

>>> same_title("Why Does Slack Say Hummus? - The Schmooze – Forward.com", "Why Does Slack Say Hummus?")
True
>>> same_title("Creative Food Sculptures - I Geek for Creativity", "The Human Bowling Ball - I Geek for Creativity")
False
>>> same_title("Gifts For Cheese Lovers", "How to Crimp Pie Crust"), same_title(None, "Anything")
(False, True)
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")
#: share of words the differing middle parts must have in common to count as one title
MIN_SHARED = 0.5


def title_words(title: str | None) -> list[str]:
    """Casefolded words of a title."""
    return _WORD.findall(title.casefold()) if title else []


def same_title(a: str | None, b: str | None) -> bool:
    """Whether two titles name the same page (see the module docs)."""
    wa, wb = title_words(a), title_words(b)
    if not wa or not wb:
        return True
    start = 0
    while start < min(len(wa), len(wb)) and wa[start] == wb[start]:
        start += 1
    end = 0
    while end < min(len(wa), len(wb)) - start and wa[-1 - end] == wb[-1 - end]:
        end += 1
    ra, rb = set(wa[start:len(wa) - end]), set(wb[start:len(wb) - end])
    if not ra or not rb:
        return True
    return len(ra & rb) / len(ra | rb) >= MIN_SHARED

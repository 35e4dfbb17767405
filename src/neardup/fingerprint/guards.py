"""Cheap, linear checks on page markup that run before any HTML parser.

HTML parsers are not linear on every input: Lexbor (Resiliparse, selectolax) and libxml2
(lxml, under trafilatura) check each new attribute against the element's earlier ones, so one
element with 20,000 attributes costs 0.5 s to parse and 100,000 over 100 s. Other hostile pages
build millions of elements or nest them thousands of levels deep. :func:`guard_markup` looks at
the markup with linear scans only and says what to do before a parser sees it:

* an element with more than :data:`MAX_ATTRS_PER_ELEMENT` attributes keeps its first
  :data:`KEEP_ATTRS` (a linear regex rewrite; attributes carry no main text);
* more than :data:`MAX_ATTRS_TOTAL` attributes, more than :data:`MAX_TAGS` tags, or a nesting
  depth over :data:`MAX_DEPTH` (an upper bound counted on the tags): the page is read as text
  only (tags removed by a regex, entities decoded), no parser at all;
* more than :data:`MAX_ENTITIES` character references: text only as well (each costs a
  parser a lookup and an allocation).

Each decision is recorded as a short reason that ends up in ``ExtractedPage.fallback``.

>>> g = guard_markup("<p " + " ".join(f"a{i}=x" for i in range(5000)) + ">hi</p>")
>>> g.mode, g.reasons[0].startswith("1 element with over")
('parse', True)
>>> len(g.markup) < 2000
True
"""

from __future__ import annotations

import html as html_lib
import re
from dataclasses import dataclass, field

MAX_ATTRS_PER_ELEMENT = 256  # real pages: rarely over 40 on one element
KEEP_ATTRS = 64
MAX_ATTRS_TOTAL = 1_000_000
MAX_TAGS = 500_000
MAX_DEPTH = 50_000
MAX_ENTITIES = 2_000_000
_LONG_TAG = 2 * MAX_ATTRS_PER_ELEMENT  # a tag this short cannot hold more attributes than the cap

# A start tag: name, then unquoted characters or whole quoted values (without '<') up to '>'.
# Possessive quantifiers: no backtracking, so a failed match costs the distance to the next '<'.
_START_TAG = re.compile(r"""<([a-zA-Z][^\s/<>]*+)((?:[^<>"']|"[^"<]*+"|'[^'<]*+')*+)>""")
# one attribute: a name, optionally ``= value`` (quoted or not)
_ATTR = re.compile(r"""([^\s"'<>/=]+)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'<>`]+))?""")
_ANY_TAG = re.compile(r"<[^>]*>")
_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_BLOCK_END = re.compile(r"</?(?:p|div|br|li|h[1-6]|tr|td|th|section|article|pre|blockquote|ul|ol|table)\b[^>]*>",
                        re.IGNORECASE)
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                   "source", "track", "wbr"})


@dataclass
class Guarded:
    """What :func:`guard_markup` decided: the markup to parse (possibly rewritten), ``mode``
    ``"parse"`` (go on with a parser) or ``"text"`` (read as text only), and why.

    >>> Guarded("<p>x</p>").reason is None
    True
    """

    markup: str
    mode: str = "parse"
    reasons: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str | None:
        """The reasons joined, or None when the markup passed untouched."""
        return "; ".join(self.reasons) or None


def _trim_attributes(match: re.Match[str]) -> str:
    name, body = match.group(1), match.group(2)
    attrs = []
    for i, attr in enumerate(_ATTR.finditer(body)):
        if i >= KEEP_ATTRS:
            break
        attrs.append(attr.group(0))
    closing = "/" if body.rstrip().endswith("/") else ""
    return f"<{name} {' '.join(attrs)}{closing}>"


def _max_depth_bound(markup: str) -> int:
    """An upper bound on the element nesting depth: open tags minus close tags, running
    (void elements and self-closing tags do not nest). Linear in the number of tags."""
    depth = peak = 0
    for m in re.finditer(r"<(/?)([a-zA-Z][^\s/<>]*)[^<>]*?(/?)>", markup):
        if m.group(1):
            depth = depth - 1 if depth else 0
        elif not m.group(3) and m.group(2).lower() not in _VOID:
            depth += 1
            if depth > peak:
                peak = depth
    return peak


_LONG_TAG_HINT = re.compile(rf"<[a-zA-Z][^<>]{{{_LONG_TAG},}}+")
# a '<' followed by another '<' before any '>': inside a quoted value, an attribute name
# (the tokenizer accepts '<' there), a script or broken text
_UNCLOSED_LT = re.compile(r"<(?=[^<>]*+<)")
STRAY_BRACKETS = 10_000


def _attrs_in(body: str) -> int:
    return sum(1 for _ in _ATTR.finditer(body))


def _attributes_hint(markup: str, tags: int) -> bool:
    """Whether some element may carry over MAX_ATTRS_PER_ELEMENT attributes: a tag with
    that many blank-separated words and attributes, over STRAY_BRACKETS more '>' than '<'
    (quoted values with '>' split a long tag into short runs), or over MAX_ATTRS_TOTAL '='."""
    for m in _LONG_TAG_HINT.finditer(markup):
        if len(m.group(0).split(None, MAX_ATTRS_PER_ELEMENT)) > MAX_ATTRS_PER_ELEMENT:
            tag = _START_TAG.match(markup, m.start())
            if tag is not None and _attrs_in(tag.group(2)) > MAX_ATTRS_PER_ELEMENT:
                return True
    return markup.count(">") - tags > STRAY_BRACKETS or markup.count("=") > MAX_ATTRS_TOTAL


def guard_markup(markup: str) -> Guarded:
    """Linear checks on ``markup`` before parsing it (see the module docstring).

    >>> guard_markup("<p>fine</p>").reason is None
    True
    >>> guard_markup("<div>" * 60_000 + "deep").mode
    'text'
    """
    out = Guarded(markup)
    tags = markup.count("<")
    if tags > MAX_TAGS:
        out.mode = "text"
        out.reasons.append(f"{tags:,} tags (over {MAX_TAGS:,})")
        return out
    entities = markup.count("&")
    if entities > MAX_ENTITIES:
        out.mode = "text"
        out.reasons.append(f"{entities:,} character references (over {MAX_ENTITIES:,})")
        return out
    # attributes: the exact scan (a few ms on a 150 KB page) runs only where a cheap C-speed
    # search finds a hint: a tag running over _LONG_TAG characters, or many angle brackets
    # that are not tags (quoted values with '<' or '>' split a long tag into short runs)
    unclosed = sum(1 for _ in _UNCLOSED_LT.finditer(markup)) if tags > STRAY_BRACKETS else 0
    if unclosed > STRAY_BRACKETS:
        # such '<' can hide a huge element from the scans below (the tokenizer reads on to
        # the next '>'); as "&lt;" they cannot, and they read the same as text
        markup = out.markup = _UNCLOSED_LT.sub("&lt;", markup)
        out.reasons.append(f"{unclosed:,} '<' followed by another '<' before any '>': escaped")
    if _attributes_hint(markup, tags):
        total = 0
        over = 0
        for m in _START_TAG.finditer(markup):
            body = m.group(2)
            if len(body) <= _LONG_TAG:
                total += body.count("=")
                continue
            n = _attrs_in(body)
            total += n
            if n > MAX_ATTRS_PER_ELEMENT:
                over += 1
        if total > MAX_ATTRS_TOTAL:
            out.mode = "text"
            out.reasons.append(f"about {total:,} attributes (over {MAX_ATTRS_TOTAL:,})")
            return out
        if over:
            out.markup = _START_TAG.sub(
                lambda m: _trim_attributes(m) if len(m.group(2)) > _LONG_TAG
                and _attrs_in(m.group(2)) > MAX_ATTRS_PER_ELEMENT else m.group(0),
                markup)
            out.reasons.append(f"{over:,} element{'s' if over > 1 else ''} with over {MAX_ATTRS_PER_ELEMENT} "
                               f"attributes: kept the first {KEEP_ATTRS}")
    if tags > MAX_DEPTH:
        depth = _max_depth_bound(out.markup)
        if depth > MAX_DEPTH:
            out.mode = "text"
            out.reasons.append(f"nested up to {depth:,} levels (over {MAX_DEPTH:,})")
    return out


def text_only(markup: str) -> str:
    """The text of ``markup`` without a parser: script and style removed, block tags turned
    into line breaks, other tags removed, entities decoded, blank lines collapsed. Linear.

    >>> text_only("<p>a &amp; b</p><script>x()</script><div>c</div>")
    'a & b\\nc'
    """
    markup = _SCRIPT_STYLE.sub(" ", markup)
    markup = _BLOCK_END.sub("\n", markup)
    markup = _ANY_TAG.sub(" ", markup)
    text = html_lib.unescape(markup)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)

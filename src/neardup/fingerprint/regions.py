"""Where a page keeps its content, read off its DOM before the main-content pass.

Two facts of Resiliparse's main-content pass that the ``hybrid`` extractor corrects:

- it takes every list near the top of the body (fewer than :data:`LIST_SAFE_DEPTH` elements
  between ``<body>`` and the list) for navigation, whatever the list says: a print version or a
  plain page (no site chrome, so its article sits right under ``<body>``) loses the lists of its
  article, while the same article in the site's template, deeper, keeps them. A shallow list
  that is prose, not links (:func:`protect_prose_lists`), is moved out of its reach;
- where the list of links *is* the content (a table of contents, an index), the extractor
  needs the region it sits in (:func:`content_region`): the page's marked main region, or its
  body without the site's chrome (navigation, header, footer, sidebar).

>>> from resiliparse.parse.html import HTMLTree
>>> tree = HTMLTree.parse("<body><div><h1>Rules</h1><ul><li>Be kind to everyone you meet here</li>"
...                       "<li>Be patient with every newcomer to the project</li></ul></div></body>")
>>> protect_prose_lists(tree)
1
>>> chrome(tree), [n.tag for n in chrome(HTMLTree.parse("<body><div id='menu'><a href='/'>Home</a></div></body>"))]
([], ['div'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from resiliparse.parse.html import ElementNode, HTMLTree

#: Resiliparse's main-content pass drops a list with fewer elements than this between it and
#: ``<body>`` (measured: ``body > div > div > ul`` is dropped, one ``div`` more is kept)
LIST_SAFE_DEPTH = 3
#: a shallow list is prose (protected) when it has at least this many words ...
PROSE_LIST_MIN_WORDS = 10
#: ... of which links are under this share
PROSE_LIST_MAX_LINK_SHARE = 0.5
#: where a page keeps its main content, when its markup says so
MAIN_REGION = 'main, [role="main"], article'
#: the site chrome whose presence means the body is not the content
CHROME = ('nav, header, footer, aside, [role="navigation"], [role="banner"], [role="contentinfo"], '
          '[role="complementary"], [role="search"]')
#: a class or id naming site chrome (a ``div id="menu"`` of an older site, ``page-header``,
#: ``sphinxsidebar``): a name that starts with one of these words as a part of its own, or ends
#: with one (``headerlink``, a heading's permalink, does neither)
CHROME_NAME = re.compile(r"^(?:nav|navbar|navigation|menu|sidebar|footer|header|breadcrumbs?|masthead|toolbar)"
                         r"(?:[-_]|$)|(?:nav|navbar|navigation|menu|sidebar|footer|header|breadcrumbs?|masthead"
                         r"|toolbar)$")

_CHROME_WORDS = ("nav", "menu", "sidebar", "footer", "header", "breadcrumb", "masthead", "toolbar")
#: elements whose class or id contains a chrome word (lower case or capitalised), for :data:`CHROME_NAME`
_NAMED_CANDIDATES = ", ".join(f'[{attr}*="{case(word)}"]' for word in _CHROME_WORDS for attr in ("class", "id")
                              for case in (str.lower, str.capitalize, str.upper))
_LISTS = ("ul", "ol", "dl")


def _shallow_lists(body: ElementNode) -> list[ElementNode]:
    """The lists the main-content pass would drop for their depth alone."""
    selectors = []
    for depth in range(LIST_SAFE_DEPTH):
        selectors += [" > ".join(["body", *["*"] * depth, tag]) for tag in _LISTS]
    return list(body.query_selector_all(", ".join(selectors)))


def _is_prose(node: ElementNode) -> bool:
    """:data:`PROSE_LIST_MIN_WORDS` words or more, under :data:`PROSE_LIST_MAX_LINK_SHARE` in links."""
    words = len((node.text or "").split())
    if words < PROSE_LIST_MIN_WORDS:
        return False
    budget, links = PROSE_LIST_MAX_LINK_SHARE * words, 0
    for a in node.query_selector_all("a"):  # a list of links is known as one long before its last link
        links += len((a.text or "").split())
        if links >= budget:
            return False
    return True


def protect_prose_lists(tree: HTMLTree) -> int:
    """Wrap every shallow list that is prose (:func:`_is_prose`) in :data:`LIST_SAFE_DEPTH`
    ``div`` elements, so that the main-content pass judges it by what it says; the text is
    unchanged. Returns how many were wrapped."""
    body, document = tree.body, tree.document
    if body is None or document is None:
        return 0
    wrapped = 0
    for node in _shallow_lists(body):
        parent = node.parent
        if parent is None or not _is_prose(node):
            continue
        divs = [document.create_element("div") for _ in range(LIST_SAFE_DEPTH)]
        for outer, inner in zip(divs, divs[1:]):
            outer.append_child(inner)
        parent.replace_child(divs[0], node)
        divs[-1].append_child(node)
        wrapped += 1
    return wrapped


def chrome(tree: HTMLTree) -> list[ElementNode]:
    """The page's site chrome: navigation, header, footer and sidebar elements (by tag, ARIA
    role, or a class or id naming one, :data:`CHROME_NAME`), the outermost of them (in no
    particular order)."""
    body = tree.body
    if body is None:
        return []
    found = set(body.query_selector_all(CHROME))
    for node in body.query_selector_all(_NAMED_CANDIDATES):  # the parser's own search, then the exact test
        names = f"{node.getattr('class') or ''} {node.getattr('id') or ''}".casefold().split()
        if any(CHROME_NAME.search(name) for name in names):
            found.add(node)
    return [node for node in found if not _inside(node, found)]


def _inside(node: ElementNode, others: set[ElementNode]) -> bool:
    """Whether an ancestor of ``node`` is in ``others``."""
    parent = node.parent
    while parent is not None:
        if parent in others:
            return True
        parent = parent.parent
    return False


@dataclass(frozen=True)
class Region:
    """Where a page keeps its content: the element, the chrome inside it to set aside, and
    whether the page's markup names it (``marked``) or it is the body."""

    node: ElementNode
    aside: list[ElementNode]
    marked: bool


def content_region(tree: HTMLTree) -> Region | None:
    """The element a page keeps its content in: the largest marked main region (``<main>``,
    ``role="main"``, ``<article>``), nothing set aside; else the body, its chrome
    (:func:`chrome`) set aside; None for a page without a body."""
    if tree.body is None:
        return None
    nodes = tree.body.query_selector_all(MAIN_REGION)
    best = max(nodes, key=lambda n: len(n.text or ""), default=None)
    if best is not None:
        return Region(best, [], marked=True)
    return Region(tree.body, chrome(tree), marked=False)

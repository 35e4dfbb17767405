"""Print versions and plain pages (issue 38, missed duplicates): an article served without the
site's template (its print version: the title and the article right under ``<body>``, the
site's footer kept) is read as the site's page is, so the two are one content.

The main-content pass takes every list near the top of the body for navigation
(:mod:`neardup.fingerprint.regions`); a print version of a page whose content is a list of
links has no marked main region. Read on Sphinx's own manual (Debian package ``sphinx-doc``),
every page of it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from resiliparse.parse.html import HTMLTree

from neardup.fingerprint.core import fingerprint
from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.regions import chrome, content_region, protect_prose_lists
from neardup.matching import Side, pair_rule
from neardup.model import DEFAULT_VERIFY, default_k

MAIN = '<div class="body" role="main">'
SIDEBAR = '<div class="sphinxsidebar"'
FOOTER = re.compile(r'<div class="footer".*?</div>', re.S)


def pages(docs: Path) -> list[str]:
    return sorted(str(p.relative_to(docs)) for p in docs.rglob("*.html")
                  if not str(p.relative_to(docs)).startswith("_"))


def printed(html: str) -> str:
    """The print version of a Sphinx page: its title, its article and the site's footer in a
    plain body, nothing else of the template."""
    title = re.search(r"<title>(.*?)</title>", html, re.S)
    body = html[html.index(MAIN) + len(MAIN):]
    body = body[:body.find(SIDEBAR)] if SIDEBAR in body else body
    footer = FOOTER.search(html)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title.group(1) if title else ''}</title>"
            f"</head><body><div class='printed'><p>Printable version</p>{body}</div>"
            f"{footer.group(0) if footer else ''}</body></html>")


def served(html: str, fetch: int) -> str:
    """The page as one fetch serves it: a timestamp and an ad inside the article (as the
    crawled site of ``benchmarks/crawl_site.py`` serves it)."""
    noise = (f"<p>Last updated: 2026-12-02 10:{fetch % 60:02d}:{(fetch * 7) % 60:02d} UTC</p>"
             f"<p>Sponsored: offer number {fetch * 7919 % 1000} of the day, click now to save</p>")
    return html.replace(MAIN, MAIN + noise, 1)


def test_every_print_version_is_its_page(sphinx_docs):
    # but for tiny pages (under 50 words of their own beside the noise's 20: a search page, a
    # table of contents of 4 links), where one line read or not decides; the crawl of
    # benchmarks/crawl_site.py misses none of its 97 print versions
    k, missed = default_k(), []
    names = [n for n in pages(sphinx_docs) if MAIN in (sphinx_docs / n).read_text(encoding="utf-8")]
    assert len(names) > 80
    for i, name in enumerate(names):
        html = served((sphinx_docs / name).read_text(encoding="utf-8"), i)
        url = f"http://127.0.0.1:8701/{name}"
        site = Side.of(fingerprint(html, url=url), url)
        again = served((sphinx_docs / name).read_text(encoding="utf-8"), i + 1)
        copy = Side.of(fingerprint(printed(again), url=f"http://127.0.0.1:8701/print/{name}"), url)
        if pair_rule(site, copy, k, DEFAULT_VERIFY).status not in ("exact", "near"):
            missed.append((name, len(extract_main_content(html, extractor="hybrid").text.split())))
    assert [m for m in missed if m[1] >= 70] == [] and len(missed) <= 3, missed


def test_a_print_version_keeps_the_lists_of_its_article(sphinx_docs):
    html = (sphinx_docs / "internals/code-of-conduct.html").read_text(encoding="utf-8")
    for page in (html, printed(html)):
        text = extract_main_content(page, extractor="hybrid").text
        assert "Be welcoming" in text and "Unwelcome sexual attention" in text


@pytest.mark.parametrize("name", ["contents.html", "genindex.html", "man/index.html"])
def test_a_print_version_of_a_link_list_is_read_as_its_list(sphinx_docs, name):
    html = served((sphinx_docs / name).read_text(encoding="utf-8"), 0)
    site = extract_main_content(html, extractor="hybrid")
    copy = extract_main_content(printed(html), extractor="hybrid")
    assert site.path == "link-list"
    assert len(copy.text.split()) >= 0.9 * len(site.text.split())  # the list, not the leftovers
    assert "Copyright" not in copy.text  # the footer is chrome, set aside
    if name == "contents.html":
        assert copy.path == "link-list" and "Glossary" in copy.text


def test_a_shallow_prose_list_is_protected_and_a_menu_is_not():
    prose = "".join(f"<li>Rule {i}: be patient with every newcomer who asks</li>" for i in range(4))
    menu = "".join(f"<li><a href='/s{i}'>Section number {i}</a></li>" for i in range(6))
    html = (f"<html><body><div><ul id='menu-list'>{menu}</ul><p>{'An article sentence here. ' * 20}</p>"
            f"<ul>{prose}</ul></div></body></html>")
    tree = HTMLTree.parse(html)
    assert protect_prose_lists(tree) == 1
    text = extract_main_content(html, extractor="hybrid").text
    assert "Rule 3: be patient" in text and "Section number 4" not in text


def test_the_region_of_a_page_without_a_marked_main_is_its_body_without_chrome():
    tree = HTMLTree.parse("<html><body><div id='site-header'>Site</div><nav><a href='/'>Home</a></nav><div><p>Text"
                          "</p></div><div class='footer'>(c)</div><a class='headerlink'>#</a></body></html>")
    region = content_region(tree)
    assert region is not None and region.node.tag == "body" and not region.marked
    assert sorted(str(n.tag) for n in region.aside) == ["div", "div", "nav"] == sorted(str(n.tag) for n in chrome(tree))
    marked = content_region(HTMLTree.parse("<body><nav>x</nav><main><p>Text</p></main></body>"))
    assert marked is not None and marked.node.tag == "main" and marked.aside == [] and marked.marked

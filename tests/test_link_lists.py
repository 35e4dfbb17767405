"""Link-list pages (issue 38 item 4): a page whose content is its list of links (a table of
contents, an index) is fingerprinted from that list, never from its leftovers.

Read on a real documentation site (Sphinx's own manual, Debian package ``sphinx-doc``), with
the per-fetch noise real sites put inside the main region: a "Last updated" line and a
rotating ad.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neardup import Detector
from neardup.fingerprint.core import fingerprint
from neardup.fingerprint.extract import extract_main_content
from neardup.matching import Side, pair_rule
from neardup.model import DEFAULT_VERIFY, default_k

LINK_LISTS = ("contents.html", "genindex.html", "_modules/index.html", "man/index.html",
              "usage/advanced/websupport/index.html")
ARTICLES = ("usage/quickstart.html", "index.html", "usage/extensions/index.html", "py-modindex.html")
MAIN = '<div class="body" role="main">'


def page(docs: Path, name: str, fetch: int = 0) -> bytes:
    """The page as one fetch of it serves it: a timestamp and an ad that change every fetch,
    inside the main region."""
    html = (docs / name).read_text(encoding="utf-8")
    assert MAIN in html, name
    noise = (f"<p>Last updated: 2026-12-02 10:{fetch % 60:02d}:{(fetch * 7) % 60:02d} UTC</p>"
             f"<p>Sponsored: offer number {fetch * 7919 % 1000} of the day, click now to save</p>")
    return html.replace(MAIN, MAIN + noise, 1).encode("utf-8")


@pytest.mark.parametrize("name", LINK_LISTS)
def test_a_link_list_is_read_as_its_list(sphinx_docs, name):
    extracted = extract_main_content(page(sphinx_docs, name), extractor="hybrid")
    assert extracted.path == "link-list"
    assert len(extracted.text.split()) > 40  # the list, not the timestamp and the ad
    if name == "contents.html":
        assert "Getting Started" in extracted.text and "Glossary" in extracted.text


@pytest.mark.parametrize("name", ARTICLES)
def test_pages_with_prose_keep_their_reading(sphinx_docs, name):
    assert extract_main_content(page(sphinx_docs, name), extractor="hybrid").path != "link-list"


def test_the_sample_articles_are_not_link_lists(sample_pages):
    for sample in sample_pages.values():
        assert extract_main_content(sample.content, extractor="hybrid").path != "link-list", sample.name


def side(docs: Path, name: str, fetch: int) -> Side:
    return Side.of(fingerprint(page(docs, name, fetch), url=f"http://127.0.0.1:8701/{name}"))


def test_fetches_of_one_list_match_and_different_lists_do_not(sphinx_docs):
    k = default_k()
    for name in LINK_LISTS:
        again = pair_rule(side(sphinx_docs, name, 1), side(sphinx_docs, name, 2), k, DEFAULT_VERIFY)
        assert again.status in ("exact", "near"), (name, again)
    for i, a in enumerate(LINK_LISTS):
        for b in LINK_LISTS[i + 1:]:
            other = pair_rule(side(sphinx_docs, a, 1), side(sphinx_docs, b, 1), k, DEFAULT_VERIFY)
            assert other.status not in ("exact", "near"), (a, b, other)


def test_a_recrawl_of_the_lists_is_unchanged_and_nothing_is_lost(sphinx_docs):
    det = Detector()
    first = {name: det.add(f"http://127.0.0.1:8701/{name}", page(sphinx_docs, name, 1), fetched_at=1.0e9)
             for name in LINK_LISTS}
    assert {v.status for v in first.values()} == {"new"}  # five lists, five contents
    assert len({v.cluster_id for v in first.values()}) == len(LINK_LISTS)
    second = [det.add(f"http://127.0.0.1:8701/{name}", page(sphinx_docs, name, 2), fetched_at=1.0e9 + 300)
              for name in LINK_LISTS]
    for name, again in zip(LINK_LISTS, second, strict=True):
        # the same list under new noise: its own content again, a few bits away (not another list's)
        assert again.cluster_id == first[name].cluster_id and again.status == "new", (name, again)
        assert again.previous_score is not None and again.previous_score >= 0.5, (name, again)

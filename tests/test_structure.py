"""Structure fingerprints (issue 23): the SimHash of a page's DOM and its behaviour on real pages.

The corpus tests read ../shared/corpus (``NEARDUP_CORPUS``; skipped when absent): Big9
(utomo-news-extraction, 9 news sites x 4 years x 10 pages), CleanPortalEval (pages of one
template) and postlight-fixtures (recaptures 2016-2022). Numbers: docs/quality.md,
"Structure fingerprints" (``benchmarks/structure.py``).
"""

from __future__ import annotations

import csv
import gzip
import itertools
import random
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from neardup.crawl.templates import TEMPLATE_DISTANCE, HostStructure, TemplatePage, redesigns, templates
from neardup.fingerprint.structure import (
    _WEIGHTS_FIXED,
    MAX_DEPTH,
    _simhash_numpy,
    _vote,
    structure_distance,
    structure_features,
    structure_of,
    structure_simhash,
)

ARTICLE = """<html><head><title>{title}</title><meta charset="utf-8"></head><body class="page">
<header id="top"><nav class="menu"><ul><li><a href="/">Home</a></li><li><a href="/n">News</a></li></ul></nav></header>
<main><article id="post-{n}" class="story story-{n}"><h1>{title}</h1>{paras}</article>
<aside class="related"><ul><li>one</li><li>two</li></ul></aside></main>
<footer class="foot"><p>(c) 2024</p></footer><script>var x = "<div>" + 1 < 2;</script></body></html>"""


#: pages an hour apart in the redesign tests (a redesign needs templates seen for an hour: REDESIGN_MIN_AGE)
HOUR = 3600.0


def article(n: int, title: str = "A title", paras: int = 3) -> str:
    return ARTICLE.format(n=n, title=title, paras="".join(f"<p>Paragraph {i} of {title}.</p>" for i in range(paras)))


FORUM = """<html><body><table id="layout"><tr><td class="side"><div class="box">x</div></td>
<td class="main"><table class="thread"><tr><td>post</td></tr><tr><td>post</td></tr></table></td></tr></table>
<form action="/reply"><input name="q"><textarea></textarea><button>Reply</button></form></body></html>"""


def test_text_does_not_change_the_structure() -> None:
    a = structure_of(article(1, "First story", 3))
    b = structure_of(article(1, "Another headline altogether", 3))
    assert a == b


def test_digits_in_class_and_id_are_ignored() -> None:
    assert structure_of(article(123)) == structure_of(article(98765))


def test_same_template_close_other_template_far() -> None:
    a, b, c = structure_of(article(1, paras=3)), structure_of(article(2, paras=7)), structure_of(FORUM)
    assert structure_distance(a, b) <= 4
    assert structure_distance(a, c) >= 16


def test_bytes_str_and_tree_agree() -> None:
    html = article(5)
    tree = HTMLTree.parse(html)
    assert structure_of(html) == structure_of(html.encode()) == structure_simhash(tree)
    assert structure_simhash(HTMLTree.parse_from_bytes(html.encode(), "utf-8")) == structure_simhash(tree)


def test_the_tree_is_only_read_and_extraction_does_not_change_it() -> None:
    tree = HTMLTree.parse(article(7, paras=10))
    assert tree.document is not None
    before = tree.document.html
    value = structure_simhash(tree)
    assert tree.document.html == before
    extract_plain_text(tree, main_content=True, preserve_formatting="minimal_html")
    assert structure_simhash(tree) == value


def test_script_content_is_not_markup() -> None:
    plain = "<html><body><div class='a'><p>x</p></div><script>var a = 1;</script></body></html>"
    tricky = "<html><body><div class='a'><p>x</p></div><script>var a = '</div><div><p><span>';</script></body></html>"
    assert structure_of(plain) == structure_of(tricky)


def test_comments_and_attribute_values_are_not_markup() -> None:
    a = "<div class='x'><p title='a'>t</p></div>"
    b = "<div class='x'><!-- <table><tr><td> --><p title='<div>&gt;'>t</p></div>"
    assert structure_of(a) == structure_of(b)


def test_class_order_does_not_matter_but_classes_do() -> None:
    base = structure_of("<div class='a b'><p>x</p></div>")
    assert base == structure_of("<div class='b  a'><p>x</p></div>")
    assert base != structure_of("<div class='a c'><p>x</p></div>")


def test_features_count_and_empty_input() -> None:
    feats, elements = structure_features(HTMLTree.parse("<div><p>a</p></div>"))
    # html, head, body, div, p: paths 1 + 2 + 2 + 3 + 4, one sibling step each
    assert elements == 5 and len(feats) == 12 + 5
    assert structure_of("") == structure_of(b"")  # html, head, body only
    assert isinstance(structure_of(""), int)


def test_deep_and_wide_pages() -> None:
    deep = "<div>" * (MAX_DEPTH + 500) + "x"
    value = structure_of(deep)
    assert 0 <= value < 2**64
    wide = "<br>" * 200_000
    assert 0 <= structure_of(wide) < 2**64
    feats, elements = structure_features(HTMLTree.parse(wide))
    assert elements == 200_003 and len(feats) == 1 + 2 + 2 + 200_000 * 3 + 200_003


def test_every_str_width_reads_the_same() -> None:
    """The kernel reads CPython's own buffer: 1, 2 or 4 bytes a code point, by the text's widest."""
    page = "<html><body><div class='story'><p>{}</p><ul><li>a</li></ul></div></body></html>"
    values = {structure_of(page.format(text)) for text in ("plain", "caf\u00e9", "\u20ac 5", "rocket \U0001F680")}
    assert len(values) == 1


# values of the first implementation (it encoded the serialisation to UTF-8 bytes and read those):
# names and classes outside ASCII hash as their UTF-8 bytes, whatever the width of the str
NON_ASCII = [
    ('<div class="caf\u00e9 na\u00efve-2" id="r\u00e9sum\u00e9"><p class="x">t</p></div>', 0x131714A3941E366E),
    ('<div class="\u20ac-price \u4e2d\u6587" id="\u0394\u03b5\u03bb\u03c4\u03b1"><span>t</span></div>',
     0x13259419941E1CEE),
    ('<div class="emoji-\U0001F600 a" id="\U0001F680"><b>t</b></div>', 0x53149479B2BB3E86),
    ('<caf\u00e9-tag class="a"><p>x</p></caf\u00e9-tag>', 0x1385B0991652BA6E),
    ('<svg><foreignObject class="\u00c9T\u00c9"/><path d="M0"/></svg>', 0x131C14A1A00230EE),
    ('<div class="\u0100\u07ff\u0800\uffff\U00010000\U0010ffff"><p>x</p></div>', 0x935790D8AB1E6EFF),
]


@pytest.mark.parametrize(("markup", "value"), NON_ASCII)
def test_non_ascii_names_hash_as_utf8(markup: str, value: int) -> None:
    assert structure_of(markup) == structure_of(markup.encode("utf-8")) == value


def _votes_agree(feats: np.ndarray) -> bool:
    """The compiled vote, where it decides, against the float32 numpy definition."""
    value, decided = _vote(feats, _WEIGHTS_FIXED)
    return not decided or int(value) == _simhash_numpy(feats)


def test_the_exact_vote_is_the_float32_definition() -> None:
    rnd = np.random.default_rng(23)
    for n in (1, 2, 3, 7, 64, 1000, 20_000):
        for repeat in (1, 3):  # counts 1 (whole weights) and 1..3 (log2(3) is not)
            keys = rnd.integers(0, 2**63, size=n, dtype=np.uint64) * np.uint64(2) + np.uint64(n % 2)
            feats = np.repeat(keys, rnd.integers(1, repeat + 1, size=n))
            assert _votes_agree(feats)
            if repeat == 1:  # whole weights add up exactly in float32 too: always decided here
                assert _vote(feats, _WEIGHTS_FIXED)[1]
    # exact ties: two keys of one weight split every bit they differ in
    tie = np.array([0x00FF00FF00FF00FF, 0xFF00FF00FF00FF00], dtype=np.uint64)
    assert _vote(tie, _WEIGHTS_FIXED) == (0, True) and _simhash_numpy(tie) == 0
    thirds = np.repeat(tie, 3)  # weight 1 + log2(3) on each side: float32 may round either way
    assert _votes_agree(thirds)
    tree = HTMLTree.parse("<p>x</p>")
    assert structure_simhash(tree) == _simhash_numpy(structure_features(tree)[0])


def test_distance() -> None:
    assert structure_distance(0, 2**64 - 1) == 64
    assert structure_distance(5, 5) == 0


# -- real pages ------------------------------------------------------------------------------

def _read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _structure(path: Path) -> int:
    with gzip.open(path) as fh:
        return structure_of(fh.read())


@pytest.fixture(scope="module")
def big9(corpus: Path) -> list[dict]:
    root = corpus / "utomo-news-extraction"
    rows = [r for r in _read_tsv(root / "manifest.tsv") if r["set"] == "big9"]
    return [{"site": r["site"], "year": int(r["year"]), "file": r["file"], "structure": _structure(root / r["file"])}
            for r in rows]


def test_big9_pages_of_one_site_and_year_are_close_and_sites_far(big9: list[dict]) -> None:
    within, sites = [], []
    for a, b in itertools.combinations(big9, 2):
        d = structure_distance(a["structure"], b["structure"])
        if a["site"] == b["site"] and a["year"] == b["year"]:
            within.append(d)
        elif a["site"] != b["site"]:
            sites.append(d)
    assert statistics.median(within) <= 10
    assert statistics.median(sites) >= 26
    assert sum(d <= TEMPLATE_DISTANCE for d in sites) / len(sites) < 0.005
    # nearest other page: of the same site (and mostly the same year)
    same_site = same_year = 0
    for a in big9:
        b = min((x for x in big9 if x is not a), key=lambda x: structure_distance(a["structure"], x["structure"]))
        same_site += a["site"] == b["site"]
        same_year += a["site"] == b["site"] and a["year"] == b["year"]
    assert same_site / len(big9) >= 0.98
    assert same_year / len(big9) >= 0.9


def test_big9_votes_are_the_definition(corpus: Path) -> None:
    root = corpus / "utomo-news-extraction"
    decided = 0
    for r in _read_tsv(root / "manifest.tsv")[::3]:
        with gzip.open(root / r["file"]) as fh:
            tree = HTMLTree.parse_from_bytes(fh.read(), "utf-8", "replace")
        feats, _ = structure_features(tree)
        assert _votes_agree(feats)
        assert structure_simhash(tree) == _simhash_numpy(feats)
        decided += _vote(feats, _WEIGHTS_FIXED)[1]
    assert decided >= 0.7 * len(_read_tsv(root / "manifest.tsv")[::3])  # the compiled vote decides most pages


def test_big9_templates_never_mix_sites(big9: list[dict]) -> None:
    ordered = sorted(big9, key=lambda r: (r["year"], r["file"]))
    from neardup.crawl.templates import assign

    _, ids, _ = assign([TemplatePage(float(i), r["structure"]) for i, r in enumerate(ordered)])
    sites = defaultdict(set)
    for r, i in zip(ordered, ids, strict=True):
        sites[i].add(r["site"])
    assert all(len(s) == 1 for s in sites.values())


def _site_stream(big9: list[dict], site: str) -> tuple[list[TemplatePage], dict[int, float]]:
    pages: list[TemplatePage] = []
    first: dict[int, float] = {}
    for y in (2005, 2009, 2013, 2017):
        year = sorted((r for r in big9 if r["site"] == site and r["year"] == y), key=lambda r: r["file"])
        for i, r in enumerate(year):
            t = y * 1000.0 + i
            first.setdefault(y, t)
            pages.append(TemplatePage(t, r["structure"]))
    return pages, first


def test_big9_redesigns_found_in_time_order(big9: list[dict]) -> None:
    found = elsewhere = 0
    for site in sorted({r["site"] for r in big9}):
        pages, first = _site_stream(big9, site)
        events = redesigns(pages)
        boundaries = {first[y] for y in (2009, 2013, 2017)}
        hits = {e["at"] for e in events} & boundaries
        assert len(hits) >= 2, (site, events)
        found += len(hits)
        elsewhere += sum(e["at"] not in boundaries for e in events)
        for e in events:
            assert e["from"] != e["to"] and e["pages"] >= 5
    assert found >= 26  # of 27 year boundaries (27 today: each at the first page of the new year)
    assert elsewhere <= 1


def test_big9_no_redesign_when_one_year_arrives_alone(big9: list[dict]) -> None:
    events = 0
    for site in sorted({r["site"] for r in big9}):
        for y in (2005, 2009, 2013, 2017):
            year = sorted((r for r in big9 if r["site"] == site and r["year"] == y), key=lambda r: r["file"])
            events += len(redesigns([TemplatePage(i * HOUR, r["structure"]) for i, r in enumerate(year)]))
            # one capture: every page at one time, no order at all
            assert redesigns([TemplatePage(float(y), r["structure"]) for r in year]) == []
            for seed in range(5):  # other orders, and longer streams of the same site-year's pages
                rnd = random.Random(seed)
                shuffled = rnd.sample(year, len(year))
                events += len(redesigns([TemplatePage(i * HOUR, r["structure"]) for i, r in enumerate(shuffled)]))
                drawn = [rnd.choice(year) for _ in range(40)]
                events += len(redesigns([TemplatePage(i * HOUR, r["structure"]) for i, r in enumerate(drawn)]))
                host = HostStructure()
                events += sum(1 for i, r in enumerate(drawn) if host.observe(i * HOUR, r["structure"]).redesign)
    assert events == 0


def test_cleanportaleval_one_template_per_site(corpus: Path) -> None:
    root = corpus / "cleanportaleval"
    by_site: dict[str, list[TemplatePage]] = defaultdict(list)
    for r in _read_tsv(root / "manifest.tsv"):
        site = r["site_group"].split("_blog")[0]
        by_site[site].append(TemplatePage(len(by_site[site]) * HOUR, _structure(root / r["file"])))
    for site, pages in by_site.items():
        assert redesigns(pages) == [], site  # one template: no redesign, in any order
        shuffled = random.Random(1).sample(pages, len(pages))
        assert redesigns([TemplatePage(i * HOUR, p.structure) for i, p in enumerate(shuffled)]) == []
        ts = templates(pages)
        assert ts[0]["share"] >= 0.8, (site, ts)
        if site in ("blogs.wsj.com_brussels", "washingtonpost.com"):
            assert len(ts) == 1, (site, ts)


def test_postlight_recaptures(corpus: Path) -> None:
    root = corpus / "postlight-fixtures"
    rows = [r for r in _read_tsv(root / "manifest.tsv") if r["host"] in ("reddit.com", "obamawhitehouse.archives.gov")]
    by_host: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for r in rows:
        by_host[r["host"]].append((r["first_commit_date"], _structure(root / r["file"])))
    day = {d: i * 86400.0 for i, d in enumerate(sorted({d for v in by_host.values() for d, _ in v}))}
    events = {h: redesigns([TemplatePage(day[d], s) for d, s in v]) for h, v in by_host.items()}
    assert [e["at"] for e in events["reddit.com"]] == [day["2022-08-10"]]  # the "update all fixtures" recapture
    assert events["obamawhitehouse.archives.gov"] == []  # an archive: its pages did not change

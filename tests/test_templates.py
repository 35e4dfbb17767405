"""Templates, redesigns and soft-404s of a host (neardup.crawl.templates, issue 23 items 2 and 3).

Real-page evidence (Big9, CleanPortalEval, postlight) is in tests/test_structure.py; here the
rules themselves, on structure values made to be near or far.
"""

from __future__ import annotations

import json
import random

from neardup.crawl.templates import (
    MAX_TEMPLATES,
    MAX_TEXTS,
    REDESIGN_MIN_AGE,
    SOFT404_MAX_LENGTH,
    TEMPLATE_DISTANCE,
    HostStructure,
    TemplatePage,
    redesigns,
    soft_404s,
    templates,
)
from neardup.fingerprint.structure import structure_of

RND = random.Random(23)


def near(base: int, bits: int = 3) -> int:
    """``base`` with ``bits`` random bits flipped (a page of the same template)."""
    for b in RND.sample(range(64), bits):
        base ^= 1 << b
    return base


A = 0x0123_4567_89AB_CDEF
B = A ^ 0xFFFF_FFFF_0000_0000  # 32 bits away
S = A ^ 0x0000_0000_FFFF_FFFF  # a section's template, 32 bits from A and 64 from B


#: one page an hour: a host watched for days (a redesign needs its old templates seen for an hour)
HOUR = 3600.0


def stream(kinds: str, start: float = 0.0, every: float = HOUR) -> list[TemplatePage]:
    return [TemplatePage((start + i) * every, near({"A": A, "B": B, "S": S}[k])) for i, k in enumerate(kinds)]


def test_one_template_and_its_share() -> None:
    ts = templates(stream("A" * 30))
    assert len(ts) == 1 and ts[0]["pages"] == 30 and ts[0]["share"] == 1.0
    assert (int(ts[0]["structure"], 16) ^ A).bit_count() <= 3  # the majority of the pages


def test_two_templates_shares() -> None:
    ts = templates(stream("AS" * 10 + "A" * 10))
    assert [(t["pages"], t["share"]) for t in ts] == [(20, 0.6667), (10, 0.3333)]


def test_redesign_found_with_its_time_and_size() -> None:
    events = redesigns(stream("A" * 20 + "B" * 15))
    assert len(events) == 1
    e = events[0]
    assert e["at"] == 20 * HOUR and e["pages"] == 15 and e["from"] != e["to"]


def test_one_odd_page_is_not_a_redesign() -> None:
    assert redesigns(stream("A" * 12 + "B" + "A" * 15)) == []
    assert redesigns(stream("A" * 12 + "BB" + "A" * 15)) == []


def test_a_split_that_random_order_gives_is_not_a_redesign() -> None:
    # five old pages then ten new ones: 1 in 3003 by chance, a redesign
    assert [e["at"] for e in redesigns(stream("A" * 5 + "B" * 10))] == [5 * HOUR]
    # one of the five already new: 11 in 3003, as a host serving both layouts gives it
    assert redesigns(stream("AABAA" + "B" * 10)) == []
    # the new structure must hold for a full window: five pages after the cut are not enough
    assert redesigns(stream("A" * 10 + "B" * 5)) == []
    host = HostStructure()
    assert not [r for r in stream("AABAA" + "B" * 10) if host.observe(r.fetched_at, r.structure).redesign]


def test_a_one_off_page_at_the_edge_goes_with_the_nearer_side() -> None:
    odd_old = A ^ 0xFFFF  # 16 bits from A: its own template, nearer the old one
    odd_new = B ^ 0xFFFF  # nearer the new one
    rows = stream("A" * 10)
    events = redesigns([*rows, TemplatePage(10 * HOUR, odd_old), *stream("B" * 10, start=11.0)])
    assert [e["at"] for e in events] == [11 * HOUR]
    events = redesigns([*rows, TemplatePage(10 * HOUR, odd_new), *stream("B" * 10, start=11.0)])
    assert [e["at"] for e in events] == [10 * HOUR]


def test_a_section_fetched_alongside_is_not_a_redesign() -> None:
    mixed = "".join(RND.choice("AAS") for _ in range(60))
    assert redesigns(stream(mixed)) == []
    # the section starts to be crawled and stays alongside: not a move for good
    assert redesigns(stream("A" * 20 + "AS" * 20)) == []


def test_a_move_and_back_is_not_for_good() -> None:
    assert redesigns(stream("A" * 20 + "B" * 10 + "A" * 20)) == []


def test_redesign_with_a_section_that_stays() -> None:
    events = redesigns(stream("AAS" * 8 + "BBS" * 8))
    # the section's template stays, the main template moves: one event, to the new one
    assert len(events) <= 1
    assert redesigns(stream("AAS" * 8 + "BBB" * 8))  # everything moves


def test_simultaneous_pages_have_no_order() -> None:
    pages = [TemplatePage(5.0, p.structure) for p in stream("A" * 10 + "B" * 10)]
    assert redesigns(pages) == []


def test_online_observe_agrees_with_redesigns() -> None:
    rows = stream("A" * 25 + "B" * 25)
    host = HostStructure()
    seen = [e for r in rows if (e := host.observe(r.fetched_at, r.structure).redesign)]
    assert [e["at"] for e in seen] == [e["at"] for e in redesigns(rows)] == [25 * HOUR]
    assert host.summary()["redesigns"] == seen
    assert host.summary()["templates"]["count"] == 2


def test_threshold_is_what_joins() -> None:
    base = 0
    edge = (1 << TEMPLATE_DISTANCE) - 1  # TEMPLATE_DISTANCE bits set: joins
    beyond = (1 << (TEMPLATE_DISTANCE + 1)) - 1
    assert len(templates([TemplatePage(0.0, base), TemplatePage(1.0, edge)])) == 1
    assert len(templates([TemplatePage(0.0, base), TemplatePage(1.0, beyond)])) == 2


# -- soft-404 ------------------------------------------------------------------------------

def test_soft_404_after_three_urls() -> None:
    rows = [TemplatePage(float(i), near(A), f"article-{i}", 5000, f"/a/{i}") for i in range(10)]
    rows += [TemplatePage(10.0 + i, near(B), "not-found", 180, f"/missing/{i}") for i in range(5)]
    assert soft_404s(rows) == [None] * 10 + [None, None, "soft-404", "soft-404", "soft-404"]


def test_the_same_url_again_is_not_many_urls() -> None:
    rows = [TemplatePage(float(i), B, "not-found", 180, "/missing/1") for i in range(6)]
    assert soft_404s(rows) == [None] * 6


def test_long_repeated_text_is_content_not_a_soft_404() -> None:
    rows = [TemplatePage(float(i), A, "syndicated", SOFT404_MAX_LENGTH, f"/a/{i}") for i in range(6)]
    assert soft_404s(rows) == [None] * 6


def test_a_short_text_in_other_shells_is_not_the_error_template() -> None:
    shells = [A, B, S, A ^ 0xFF00FF00FF00FF00]  # the same short blurb under different layouts
    rows = [TemplatePage(float(i), s, "author-bio", 300, f"/p/{i}") for i, s in enumerate(shells)]
    assert soft_404s(rows) == [None] * 4


def test_empty_pages_of_one_shell_are_template_only() -> None:
    rows = [TemplatePage(float(i), near(S), "empty-digest", 0, f"/tag/{i}") for i in range(4)]
    assert soft_404s(rows) == [None, None, "template-only", "template-only"]


def test_soft_404_on_real_markup() -> None:
    shell = ("<html><body class='site'><header class='top'><nav><a href='/'>Home</a></nav></header>"
             "<main class='error-page'><div class='box'><h1>{}</h1><p>{}</p></div></main>"
             "<footer class='foot'><p>(c)</p></footer></body></html>")
    article = ("<html><body class='site'><header class='top'><nav><a href='/'>Home</a></nav></header>"
               "<main class='content'><article class='story'><h1>{}</h1>" + "<p>{}</p>" * 3 + "<figure><img>"
               "<figcaption>c</figcaption></figure><ul class='tags'><li>t</li><li>u</li></ul></article>"
               "<aside class='rail'><div class='promo'><a>x</a></div></aside></main>"
               "<footer class='foot'><p>(c)</p></footer></body></html>")
    host = HostStructure()
    flags = [host.observe(float(i), structure_of(article.format(f"Story {i}", "a", "b", "c")), f"d{i}", 4000,
                          f"/story/{i}").flag for i in range(8)]
    flags += [host.observe(10.0 + i, structure_of(shell.format("Not found", "Sorry")), "nf", 40,
                           f"/gone/{i}").flag for i in range(4)]
    assert flags == [None] * 8 + [None, None, "soft-404", "soft-404"]
    assert host.summary()["soft_404s"] == 2


# -- the state -----------------------------------------------------------------------------

def test_state_round_trips_through_json() -> None:
    host = HostStructure()
    for i, r in enumerate(stream("AS" * 15 + "B" * 20)):
        host.observe(r.fetched_at, r.structure, f"d{i % 7}", 100 * (i % 13), f"/u/{i}")
    data = json.loads(json.dumps(host.to_dict()))
    again = HostStructure.from_dict(data)
    assert again == host
    nxt = TemplatePage(99.0, near(B))
    assert again.observe(nxt.fetched_at, nxt.structure, "x", 10, "/x") == host.observe(
        nxt.fetched_at, nxt.structure, "x", 10, "/x")


def test_state_is_bounded() -> None:
    host = HostStructure()
    for i in range(3 * MAX_TEMPLATES):
        host.observe(float(i), RND.getrandbits(64), f"t{i}", 10, f"/{i}")
    assert len(host.templates) <= MAX_TEMPLATES
    assert len(host.recent) <= 2 * host.window
    for i in range(3 * MAX_TEXTS):
        host.observe(1000.0 + i, A, f"text-{i}", 10, f"/t/{i}")
    assert len(host.texts) <= MAX_TEXTS
    assert len(json.dumps(host.to_dict())) < 400_000


def crawl(kinds: str, folders: str, start: float = 0.0, every: float = HOUR) -> list[TemplatePage]:
    """Pages of templates ``kinds`` at URLs in folders ``folders`` (one letter each)."""
    return [TemplatePage((start + i) * every, near({"A": A, "B": B, "S": S}[k]), url=f"https://docs.example/{f}/p{i}.html")
            for i, (k, f) in enumerate(zip(kinds, folders, strict=True))]


def test_a_crawl_moving_between_sections_is_not_a_redesign() -> None:
    # a static site: section "lib" in one layout, then section "api" in another, breadth-first
    rows = crawl("A" * 25 + "B" * 25, "l" * 25 + "a" * 25)
    assert redesigns(rows) == []
    host = HostStructure()
    assert [e for r in rows if (e := host.observe(r.fetched_at, r.structure, url=r.url).redesign)] == []
    # the same layouts, but section "l" itself changed over time: a redesign, online and offline
    moved = crawl("A" * 25 + "B" * 25, "l" * 25 + "l" * 25)
    host = HostStructure()
    seen = [e for r in moved if (e := host.observe(r.fetched_at, r.structure, url=r.url).redesign)]
    assert [e["at"] for e in seen] == [e["at"] for e in redesigns(moved)] == [25 * HOUR]


def test_dated_folders_are_one_section() -> None:
    rows = [TemplatePage(i * HOUR, near(A if i < 25 else B),
                         url=f"https://news.example/{2019 + i // 25}/0{1 + i % 9}/a{i}.html") for i in range(50)]
    assert [e["at"] for e in redesigns(rows)] == [25 * HOUR]


def test_a_first_crawl_of_minutes_never_redesigns() -> None:
    """Templates seen for less than REDESIGN_MIN_AGE give no redesign: one crawl of a static
    site, one page a second, whose sections in one folder differ in layout (a documentation
    site's index and API pages), online and offline; the same move over hours is one."""
    fast = crawl("A" * 25 + "B" * 25, "l" * 50, every=1.0)
    assert redesigns(fast) == []
    host = HostStructure()
    assert [e for r in fast if (e := host.observe(r.fetched_at, r.structure, url=r.url).redesign)] == []
    assert 25 * 1.0 < REDESIGN_MIN_AGE
    slow = crawl("A" * 25 + "B" * 25, "l" * 50, every=REDESIGN_MIN_AGE / 20)
    assert [e["at"] for e in redesigns(slow)] == [25 * REDESIGN_MIN_AGE / 20]


def test_state_with_sections_round_trips() -> None:
    host = HostStructure()
    for r in crawl("AAB", "lla"):
        host.observe(r.fetched_at, r.structure, url=r.url)
    data = json.loads(json.dumps(host.to_dict()))
    assert HostStructure.from_dict(data) == host
    legacy = {**data, "templates": [t[:6] for t in data["templates"]]}
    del legacy["recent_sections"]
    assert HostStructure.from_dict(legacy).templates[0].sections == set()


def test_a_host_of_few_pages_has_no_redesign() -> None:
    for n in range(7):
        assert redesigns(crawl("A" * n, "l" * n)) == []

"""Canonical-copy policies, through the Detector on real pages and on bare Members."""

from __future__ import annotations

import csv
import gzip
from functools import cache
from pathlib import Path

import pytest
from checks import present

from neardup import CanonicalPolicy, ConfigError, Detector
from neardup.canonical import DEFAULT_POLICY, Member, policy_from_spec

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


@cache
def sample() -> dict[str, tuple[str, bytes]]:
    out = {}
    with open(SAMPLE / "urls.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            name = Path(row["file"]).name.removesuffix(".html.gz")
            out[name] = (row["url"], gzip.decompress((SAMPLE / row["file"]).read_bytes()))
    return out


def url(name: str) -> str:
    return sample()[name][0]


def html(name: str) -> bytes:
    return sample()[name][1]


NIKKI = url("nytimes-nikki-haley-2018")  # every Nikki Haley capture names this as rel=canonical
ARCHIVE = "https://web.archive.org/web/20181010000000/" + NIKKI


# -- default: rel-canonical, then first seen ----------------------------------------------

def test_default_policy_spec():
    assert Detector().policy.spec == DEFAULT_POLICY == "rel-canonical,first-seen"


def test_rel_canonical_beats_first_seen():
    det = Detector()
    a = det.add(ARCHIVE, html("nytimes-nikki-haley-2018"))  # seen first, names NIKKI
    assert a.status == "new" and a.canonical_url == ARCHIVE  # NIKKI is not a member yet
    # predicted before adding: the page at the named URL would become canonical
    c = det.check(NIKKI, html("nytimes-nikki-haley-2019"))
    assert c.status == "near"
    assert c.canonical_url == NIKKI and c.canonical_id is None
    assert det.store.cluster_canonical(present(a.cluster_id)) == a.page_id  # check changed nothing
    b = det.add(NIKKI, html("nytimes-nikki-haley-2019"))
    assert b.status == "near" and b.cluster_id == a.cluster_id
    assert b.canonical_url == NIKKI and b.canonical_id == b.page_id
    assert det.store.cluster_canonical(present(a.cluster_id)) == b.page_id
    # a third member (another archive copy) does not change it
    d = det.add("https://archive.example/nikki", html("nytimes-nikki-haley-2022"))
    assert d.is_duplicate and d.canonical_url == NIKKI


def test_rel_canonical_match_ignores_case_port_and_fragment():
    det = Detector()
    det.add(ARCHIVE, html("nytimes-nikki-haley-2018"))
    variant = NIKKI.replace("https://www.nytimes.com", "HTTPS://WWW.NYTIMES.COM:443") + "#comments"
    b = det.add(variant, html("nytimes-nikki-haley-2019"))
    # the variant is stored under its key (normalised URL), the URL as fetched beside it
    assert b.canonical_url == b.url == NIKKI and b.fetched_url == variant


def test_first_seen_when_no_member_is_named():
    det = Detector()
    a = det.add("https://mirror-a.example/npr", html("npr-dylann-roof-2022"))
    b = det.add("https://mirror-b.example/npr", html("npr-dylann-roof-2022-mirror"))
    c = det.add("https://mirror-c.example/npr", html("npr-dylann-roof-2016"))
    assert b.status == "exact" and c.status == "near"
    assert a.canonical_url == b.canonical_url == c.canonical_url == "https://mirror-a.example/npr"
    assert det.store.cluster_canonical(present(a.cluster_id)) == a.page_id


def test_first_seen_is_first_fetch_time_not_insertion_order():
    det = Detector()
    a = det.add("https://mirror-a.example/npr", html("npr-dylann-roof-2022"), fetched_at=2_000_000_000)
    b = det.add("https://mirror-b.example/npr", html("npr-dylann-roof-2022-mirror"), fetched_at=1_000_000_000)
    assert b.canonical_url == "https://mirror-b.example/npr"
    assert det.store.cluster_canonical(present(a.cluster_id)) == b.page_id


# -- other policies --------------------------------------------------------------------------

def test_shortest_url():
    det = Detector(canonical="shortest-url")
    assert det.policy.spec == "shortest-url,first-seen"
    long = "https://www.newyorker.com/humor/daily-shouts/teas?utm_source=feed&utm_medium=rss"
    short = "https://nyer.example/teas"
    a = det.add(long, html("newyorker-teas-2019"))
    b = det.add(short, html("newyorker-teas-2019-mirror"))
    assert b.status == "exact"
    assert a.canonical_url == a.url == long.partition("?")[0]  # tracking parameters are no part of a key
    assert a.fetched_url == long
    assert b.canonical_url == short
    # same length: alphabetical
    c = det.add("https://nyer.example/tea2", html("newyorker-teas-2019"))
    assert c.canonical_url == "https://nyer.example/tea2"


def test_https_policy():
    det = Detector(canonical="https")
    a = det.add("http://www.politico.com/story/vp-debate", html("politico-vp-debate-2016"))
    b = det.add("https://mirror.example/vp-debate", html("politico-vp-debate-2022"))
    assert b.status == "near"
    assert a.canonical_url == "http://www.politico.com/story/vp-debate"
    assert b.canonical_url == "https://mirror.example/vp-debate"
    # among https pages, first seen
    c = det.add("https://mirror2.example/vp-debate", html("politico-vp-debate-2022"))
    assert c.canonical_url == "https://mirror.example/vp-debate"


def test_priority_policy_higher_wins_none_last():
    det = Detector(canonical="priority")
    body = html("newyorker-teas-2019")
    a = det.add("https://a.example/teas", body)  # no priority
    b = det.add("https://b.example/teas", body, priority=-1.0)
    assert b.canonical_url == "https://b.example/teas"  # any priority beats none
    c = det.add("https://c.example/teas", body, priority=5)
    assert c.canonical_url == "https://c.example/teas"
    d = det.add("https://d.example/teas", body, priority=2.5)
    assert d.canonical_url == "https://c.example/teas"
    e = det.add("https://e.example/teas", body, priority=5)  # tie -> first seen
    assert e.canonical_url == "https://c.example/teas"
    assert det.store.cluster_canonical(present(a.cluster_id)) == c.page_id
    # re-adding without a priority keeps the stored one
    det.add("https://c.example/teas", body)
    assert present(det.page(present(c.page_id))).priority == 5.0
    assert det.store.cluster_canonical(present(a.cluster_id)) == c.page_id


def test_chained_policy():
    det = Detector(canonical="https,shortest-url")
    assert det.policy.spec == "https,shortest-url,first-seen"
    body = html("newyorker-teas-2019")
    det.add("http://t.example/a", body)
    det.add("https://teas.example/a/very/long/path", body)
    v = det.add("https://teas.example/a", body)
    assert v.canonical_url == "https://teas.example/a"


@pytest.mark.parametrize("spec", ["bogus", "first-seen,bogus", "shortest_url", "HTTPS"])
def test_unknown_policy_is_config_error(spec):
    with pytest.raises(ConfigError) as exc:
        Detector(canonical=spec)
    assert "canonical policy" in str(exc.value)
    with pytest.raises(ConfigError):
        policy_from_spec(spec)


def test_policy_persists_in_store(tmp_path):
    path = tmp_path / "s.db"
    body = html("newyorker-teas-2019")
    with Detector.open(path, canonical="shortest-url") as det:
        det.add("https://long-url.example/teas/2019", body)
        assert det.store.get_meta("canonical_policy") == "shortest-url,first-seen"
    with Detector.open(path) as det:
        assert det.policy.spec == "shortest-url,first-seen"
        v = det.add("https://s.example/t", body)
        assert v.canonical_url == "https://s.example/t"
    # an explicit policy replaces the stored one
    with Detector.open(path, canonical="first-seen") as det:
        assert det.policy.spec == "first-seen"
    with Detector.open(path) as det:
        assert det.policy.spec == "first-seen"
        assert det.store.get_meta("canonical_policy") == "first-seen"


# -- the policy objects themselves ------------------------------------------------------------

def _m(id, url, first_seen=0.0, canonical=None, priority=None):
    return Member(id, url, first_seen, canonical, priority)


def test_policy_objects():
    p = CanonicalPolicy(["rel-canonical"])
    assert p.spec == "rel-canonical,first-seen"
    assert policy_from_spec(p) is p
    assert policy_from_spec(None).spec == DEFAULT_POLICY
    assert CanonicalPolicy(["first-seen", "https"]).spec == "https,first-seen"
    members = [_m(1, "https://a.example/x", 5.0, "https://b.example/x"), _m(2, "https://b.example/x", 9.0)]
    assert p.choose(members).id == 2
    assert policy_from_spec("first-seen").choose(members).id == 1
    assert policy_from_spec("first-seen").choose([_m(4, "https://z/", 1.0), _m(3, "https://y/", 1.0)]).id == 3
    with pytest.raises(ConfigError):
        p.choose([])

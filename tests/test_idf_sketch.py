"""Spec version 2: IDF feature weights, the verification sketch, the match rule and its
repeated-boilerplate guard, and stores written by neardup 0.1 (spec version 1)."""

from __future__ import annotations

import itertools
import re
import sqlite3
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from checks import present
from legacy_store import write_legacy_store

import neardup
from neardup import ConfigError, Detector, FeatureConfig, FingerprintConfig, fingerprint
from neardup.fingerprint.core import fingerprint_text
from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.features import extract_features
from neardup.fingerprint.idf import idf_of_zipf, idf_table
from neardup.matching import GUARD_MAX_LENGTH, Side, match, same_title
from neardup.model import DEFAULT_K_BY_VERSION
from neardup.sketch import similarity
from neardup.store import sqlite as store_mod

PLAIN = FeatureConfig(idf=None)


@pytest.fixture(scope="module")
def sample_texts(sample_pages) -> dict[str, str]:
    return {name: extract_main_content(p.content, p.url).text for name, p in sample_pages.items()}


# -- IDF weights ------------------------------------------------------------------------------

def test_kernel_weights_are_plain_weights_times_the_table_lookup(sample_texts):
    """The compiled lookup (directory + scan) gives exactly the table's weight for every
    feature of real pages, and multiplies the plain tf weight by it."""
    table = idf_table("web1", 1000.0)
    for text in list(sample_texts.values())[:8]:
        feats, plain = extract_features(text, PLAIN)
        feats2, weighted = extract_features(text, FeatureConfig())
        assert np.array_equal(feats, feats2)
        factor = table.lookup(feats)
        expected = plain * factor  # plain weights are rounded to fixed point before the factor
        assert np.all(np.abs(weighted - expected) <= 0.5 * factor + 1)


def test_common_words_weigh_almost_nothing_and_rare_words_the_most():
    _, weights = extract_features("the of and zeppelin quasar", FeatureConfig())
    w = dict(zip(["the", "of", "and", "zeppelin", "quasar"], (weights / 65536.0).tolist()))
    assert w["the"] < 0.01 and w["of"] < 0.01 and w["and"] < 0.01
    assert w["zeppelin"] > 5 and w["quasar"] > 5
    # a word the table does not know gets the weight of the table's floor
    _, unknown = extract_features("xqzvwkj", FeatureConfig())
    assert unknown[0] / 65536.0 == pytest.approx(idf_table("web1", 1000.0).default, rel=1e-4)


def test_numbers_are_weighted_by_their_frequency():
    """Numbers are in the table (wordfreq's estimate): a year weighs less than a rare number."""
    table = idf_table("web1", 1000.0)
    f, _ = extract_features("2019 5 48213", PLAIN)
    year, five, rare = table.lookup(f)
    assert five < year < rare == table.default


@pytest.mark.parametrize("text", ["東京都は日本の首都です", "北京是中国的首都", "서울은 한국의 수도입니다"])
def test_cjk_bigrams_are_in_the_table(text):
    """Chinese, Japanese and Korean character bigrams are weighted (wordfreq has no Thai
    list: Thai bigrams get the floor weight)."""
    feats, _ = extract_features(text, PLAIN)
    table = idf_table("web1", 1000.0)
    assert np.count_nonzero(table.lookup(feats) < table.default) >= len(feats) // 3


def test_idf_formula_and_validation():
    assert idf_of_zipf(9.0, 1000.0) == pytest.approx(0.0, abs=1e-12)  # p = 1: in every page
    assert idf_of_zipf(3.0, 1000.0) == pytest.approx(-np.log(-np.expm1(-1e-3)))
    assert float(idf_of_zipf(4.0, 1000.0)) < float(idf_of_zipf(3.0, 1000.0))
    with pytest.raises(ConfigError):
        FeatureConfig(idf="nope")
    with pytest.raises(ConfigError):
        FeatureConfig(idf_doc_len=0)


def test_idf_only_for_words_and_in_the_spec():
    assert "idf=web1@1000" in FeatureConfig().spec
    assert "idf" not in FeatureConfig(idf=None).spec
    assert "idf" not in FeatureConfig(scheme="shingles", ngram=3).spec
    assert FeatureConfig(idf_doc_len=300).spec != FeatureConfig().spec


# -- the sketch -------------------------------------------------------------------------------

WORD = re.compile(r"\w+")


def shingle_jaccard(a: str, b: str, n: int = 3) -> float:
    def sh(t: str) -> set[tuple[str, ...]]:
        w = WORD.findall(t.casefold())
        return {tuple(w[i:i + n]) for i in range(max(1, len(w) - n + 1))}
    sa, sb = sh(a), sh(b)
    return len(sa & sb) / len(sa | sb)


def test_sketch_estimates_shingle_jaccard_on_real_pages(sample_pages, sample_texts):
    """Every pair of the sample (recaptures, mirrors, other articles): the 60-bin estimate is
    within 0.2 of the exact word 3-shingle Jaccard (a standard error is about 0.06)."""
    fps = {name: fingerprint_text(text) for name, text in sample_texts.items()}
    errors = []
    for a, b in itertools.combinations(sorted(fps), 2):
        est = similarity(present(fps[a].sketch), present(fps[b].sketch)).jaccard
        exact = shingle_jaccard(sample_texts[a], sample_texts[b])
        errors.append(abs(est - exact))
        if sample_pages[a].group != sample_pages[b].group:
            assert est < 0.2, (a, b)
    assert max(errors) < 0.2
    assert float(np.mean(errors)) < 0.05


def test_sketch_containment_of_an_excerpt():
    words = [f"w{i}" for i in range(2000)]
    full, excerpt = fingerprint_text(" ".join(words)), fingerprint_text(" ".join(words[500:800]))
    s = similarity(present(excerpt.sketch), present(full.sketch))
    # 300 of 2000 shingles: J = 0.15, containment 1; 60 bins make the containment coarse
    assert s.jaccard < 0.3 and s.containment > 0.5


def test_sketch_of_short_and_empty_texts():
    empty = fingerprint_text("")
    assert empty.sketch == bytes(64) and similarity(empty.sketch, empty.sketch).jaccard == 0.0
    one, two = fingerprint_text("hello"), fingerprint_text("hello world")
    assert len(present(one.sketch)) == 64 and int.from_bytes(present(one.sketch)[:4], "little") == 1
    assert similarity(present(one.sketch), present(one.sketch)).jaccard == 1.0
    assert similarity(present(one.sketch), present(two.sketch)).jaccard < 0.5


def test_sketch_rejects_other_widths():
    with pytest.raises(neardup.InputError):
        similarity(bytes(64), bytes(32))


# -- the match rule, in the Detector ----------------------------------------------------------

TEXT = " ".join(f"token{i}" for i in range(400))


def forged(fp: neardup.Fingerprint, **changes: Any) -> neardup.Fingerprint:
    return replace(fp, **changes)


def test_a_simhash_candidate_the_sketch_rejects_is_new():
    """Same SimHash, unrelated texts (sketches disagree): new, not near. Without
    verification (verify=None) the same pair is near."""
    det = Detector()
    a = det.fingerprint(TEXT)
    other = det.fingerprint(" ".join(f"other{i}" for i in range(400)))
    collision = forged(other, simhash=a.simhash)  # as if the two SimHashes had collided
    assert det.add("https://a.example/1", TEXT).status == "new"
    v = det.check_fingerprint("https://b.example/1", collision)
    assert v.status == "new"
    unverified = Detector(verify=None)
    unverified.add("https://a.example/1", TEXT)
    v = unverified.check_fingerprint("https://b.example/1", collision)
    assert v.status == "near" and v.distance == 0


def test_near_verdict_carries_distance_and_verified_similarity():
    det = Detector()
    det.add("https://a.example/1", TEXT)
    v = det.check("https://b.example/1", TEXT.replace("token7 ", "changed "))
    assert v.status == "near" and present(v.distance) <= det.k and 0.9 <= present(v.score) <= 1.0


def test_repeated_boilerplate_on_one_host_is_not_a_duplicate():
    """An author box extracted as the main text of two different posts of one host: equal
    digests, different titles: not exact. The same box on another host, or under the same
    title, is a duplicate; long texts are content whatever the title."""
    box = " ".join(f"author{i}" for i in range(30))
    assert len(box) < GUARD_MAX_LENGTH

    def page(title: str, body: str) -> str:
        return f"<html><head><title>{title}</title></head><body><article><p>{body}</p></article></body></html>"

    det = Detector(config=FingerprintConfig(extractor="full"))
    det.add("https://blog.example/post-1", page("Creative food sculptures - My blog", box))
    v = det.check("https://blog.example/post-2", page("The human bowling ball - My blog", box))
    assert v.status == "new"
    got = det.check("https://blog.example/post-1?utm=x", page("Creative food sculptures - My blog", box))
    assert got.status == "exact"
    assert det.check("https://mirror.example/post-1", page("The human bowling ball", box)).status == "exact"
    long_text = " ".join(f"article{i}" for i in range(400))
    det.add("https://news.example/a", page("Old headline", long_text))
    assert det.check("https://news.example/b", page("A new headline", long_text)).status == "exact"


def test_match_rule_reasons():
    fp = fingerprint_text(TEXT)
    a = Side.of(fp, "https://a.example/")
    assert match(a, a, 0, 0.5).status == "exact"
    assert match(a, replace(a, empty=True), 64, None).reason == "empty"
    far = replace(a, digest="0" * 64, simhash=a.simhash ^ 0xFFFF)
    assert match(a, far, 15, 0.5).reason == "distance" and match(a, far, 16, 0.5).status == "near"
    unrelated = replace(far, sketch=fingerprint_text("something else entirely " * 20).sketch)
    assert match(a, unrelated, 16, 0.5).reason == "verify" and match(a, unrelated, 16, None).status == "near"


@pytest.mark.parametrize("a, b, same", [
    ("Why Does Slack Say Hummus? - The Schmooze – Forward.com", "Why Does Slack Say Hummus?", True),
    ("Trump signs NASA bill | ABC News", "Trump signs NASA funding bill | ABC News", True),
    ("Gifts For Cheese Lovers", "How to Crimp Pie Crust", False),
    ("BBC NEWS | Technology | Apple iTunes phone due", "BBC NEWS | Technology | Apple unveils video iPod", False),
    (None, "Anything", True),
    ("", "Anything", True),
])
def test_same_title(a, b, same):
    assert same_title(a, b) is same


# -- stores written by neardup 0.1 ------------------------------------------------------------

def test_neardup_0_1_store_keeps_its_spec_and_k(tmp_path, sample_pages):
    """A store written by neardup 0.1 (schema 2, fingerprint spec version 1: no IDF, no
    sketch, config without the new keys) opens, is migrated to the current schema in place, keeps
    spec version 1 and k = 7, and finds its pages as before."""
    path = tmp_path / "old.db"
    v1 = FingerprintConfig(version=1)
    page = sample_pages["nytimes-nikki-haley-2018"]
    fp = fingerprint(page.content, page.url, config=v1)
    old_dict = v1.to_dict()
    for key in ("version", "sketch_bins", "sketch_ngram"):
        old_dict.pop(key)
    old_dict["features"].pop("idf")
    old_dict["features"].pop("idf_doc_len")
    write_legacy_store(path, 2, old_dict, fp, page.url, "nytimes.com")
    assert fp.spec.startswith("neardup-simhash/1;") and "idf" not in fp.spec
    with Detector.open(path) as det:
        assert det.config.spec == fp.spec and det.config.version == 1
        assert det.k == DEFAULT_K_BY_VERSION[1] == 7
        assert det.check("https://other.example/nikki", page.content).status == "exact"
        v = det.check("https://other.example/nikki", sample_pages["nytimes-nikki-haley-2019"].content)
        assert v.status == "near" and v.match_id == 1 and v.score is None  # no sketches to verify with
        assert det.add("https://new.example/x", sample_pages["newyorker-teas-2019"].content).status == "new"
        assert present(det.store.page_by_url("https://new.example/x")).sketch is None
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION >= 3
    finally:
        con.close()
    # the default (version 2) config is refused on it rather than mixed in
    with pytest.raises(neardup.SpecMismatchError):
        Detector.open(path, config=FingerprintConfig())


def test_new_store_keeps_sketches(tmp_path, sample_pages):
    page = sample_pages["nytimes-nikki-haley-2018"]
    with Detector.open(tmp_path / "new.db") as det:
        det.add(page.url, page.content)
    with Detector.open(tmp_path / "new.db") as det:
        rec = present(det.store.page_by_url(page.url))
        assert rec.sketch == det.fingerprint(page.content, page.url).sketch and len(present(rec.sketch)) == 64
        v = det.check("https://x.example/", sample_pages["nytimes-nikki-haley-2019"].content)
        assert v.status == "near" and v.score is not None and v.score > 0.5

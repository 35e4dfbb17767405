"""Normalisation (neardup.fingerprint.normalize) and weighted features (neardup.fingerprint.features, _kernels)."""

from __future__ import annotations

import functools
import math
import re
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ConfigError, hamming
from neardup.fingerprint.core import fingerprint_text
from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.features import FeatureConfig, extract_features
from neardup.fingerprint.normalize import normalize_text, normalized_bytes

SETTINGS = settings(max_examples=100, deadline=None)
SCALE = 65536

# every str.isspace() code point
WHITESPACE = ["\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ", "\x85", "\xa0",
              "\u1680", *[chr(c) for c in range(0x2000, 0x200B)], "\u2028", "\u2029", "\u202f",
              "\u205f", "\u3000"]
assert all(c.isspace() for c in WHITESPACE)
assert len(WHITESPACE) == sum(chr(c).isspace() for c in range(0x110000))

SPECIAL = list("#-*+•1.)ßẞİıΣσςﬁ①㎏ⅫÅÅé") + ["e\u0301", "Ｈｅｌｌｏ", "ｶﾀｶﾅ", "ǅ", "\u00ad", "\u200b",
                                                  "\ufeff", "\x00", "\x07"]
CJK = list("東京都は日本の首都ですセキュリティ한국어텍스트中文网页ภาษาไทย")

any_char = st.characters(exclude_categories=["Cs"])
mixed_text = st.lists(
    st.one_of(st.sampled_from(WHITESPACE), st.sampled_from(SPECIAL), st.sampled_from(CJK),
              st.sampled_from(["word", "Word", "WORD", "x", "42", "# ", "- "]), any_char),
    max_size=60,
).map("".join)

# Markdown-like lines: optional leading blanks, an optional heading / list marker, words
blank = st.sampled_from(WHITESPACE[:1] + [w for w in WHITESPACE if w not in "\n\r"])
marker = st.sampled_from(["", "#", "# ", "## ", "- ", "* ", "+ ", "• ", "1. ", "2) ", "-", "-\t", "*\u3000"])
line = st.tuples(st.lists(blank, max_size=2).map("".join), marker,
                 st.lists(st.sampled_from(["alpha", "beta", "gamma", "Delta", "東京", "日本語", "x"]),
                          min_size=0, max_size=6).map(" ".join),
                 st.lists(blank, max_size=2).map("".join)).map("".join)
md_text = st.lists(line, min_size=1, max_size=8).map("\n".join)


def plain_config(**kwargs) -> FeatureConfig:
    """A feature config without IDF weights: these tests are about the structural weights
    and tf modes, whose values IDF would multiply (tests/test_idf_sketch.py tests IDF)."""
    return FeatureConfig(**{"idf": None, **kwargs})


PLAIN = plain_config()


def feats(text: str, config: FeatureConfig = PLAIN) -> dict[int, int]:
    hashes, weights = extract_features(text, config)
    assert len(set(hashes.tolist())) == len(hashes)  # distinct features
    return dict(zip(hashes.tolist(), weights.tolist()))


@functools.cache
def feature_hash(word: str) -> int:
    hashes, _ = extract_features(word, plain_config())
    assert len(hashes) == 1
    return int(hashes[0])


# --------------------------------------------------------------------------- normalisation


@SETTINGS
@given(mixed_text)
def test_fast_normalisation_equals_reference(text):
    assert normalized_bytes(text).decode("utf-8") == normalize_text(text)


@SETTINGS
@given(st.text(st.characters(), max_size=80))
def test_fast_normalisation_equals_reference_any_code_point(text):
    ref = normalize_text(text)
    assert normalized_bytes(text) == ref.encode("utf-8", "surrogatepass")
    assert fingerprint_text(text).text == ref


@SETTINGS
@given(md_text)
def test_fast_normalisation_equals_reference_markdown(text):
    assert normalized_bytes(text).decode("utf-8") == normalize_text(text)


@SETTINGS
@given(mixed_text)
def test_normalisation_is_idempotent(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert normalized_bytes(once).decode("utf-8") == once
    assert "\n\n" not in once and not once.startswith("\n") and not once.endswith("\n")
    for ln in once.split("\n"):
        assert ln == ln.strip() and "  " not in ln


def test_normalisation_examples():
    assert normalize_text("  Ｈｅｌｌｏ\u00a0 WORLD \n\n\n # Title ") == "hello world\n# title"
    assert normalize_text("a\x85b\u2028c\u2029d\x0be\x0cf\x1cg\u1680h\u3000i\u202fj") == "a b c d e f g h i j"
    assert normalize_text("one\r\ntwo\r\rthree\n \t \nfour") == "one\ntwo\nthree\nfour"
    assert normalize_text("") == "" and normalize_text(" \n\t\u3000\n") == ""


@pytest.mark.parametrize("raw, folded", [
    ("ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ", "fullwidth text"),
    ("Straße", "strasse"),
    ("STRASSE", "strasse"),
    ("ẞ", "ss"),
    ("İstanbul", "i\u0307stanbul"),  # full case folding, not Turkish-specific
    ("ISTANBUL", "istanbul"),
    ("ıi", "ıi"),  # dotless i has no case-folded form other than itself
    ("ΣΑΣ ςσ", "σασ σσ"),
    ("ﬁnance", "finance"),
    ("①㎏Ⅻ", "1kgxii"),
    ("ｶﾀｶﾅ", "カタカナ"),
    ("Cafe\u0301", "café"),
    ("ǅ", "dž"),
])
def test_nfkc_casefold(raw, folded):
    assert normalize_text(raw) == folded
    assert normalized_bytes(raw).decode() == folded


def test_equivalent_spellings_share_digest_and_simhash():
    base = "Die Straße in İstanbul war voller Menschen, die Kaffee tranken und redeten."
    variants = [
        base.upper(),
        unicodedata.normalize("NFD", base),
        base.replace(" ", "\u3000").replace("ß", "ss"),
        "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in base),  # fullwidth
        "  " + base.replace(", ", ",\t ") + " \n\n",
    ]
    ref = fingerprint_text(base)
    for v in variants:
        fp = fingerprint_text(v)
        assert fp.digest == ref.digest, v
        assert fp.simhash == ref.simhash, v


# --------------------------------------------------------------------------- features depend on normalised text


STRUCTURED = plain_config(w_heading=2.0, w_list=3.0, w_short=0.5, short_tokens=2)
HEADING2 = plain_config(w_heading=2.0, w_list=1.0, w_short=0.5, short_tokens=3)


@SETTINGS
@given(md_text)
def test_features_depend_only_on_normalised_text(text):
    """Two texts with the same normalised form (hence the same digest) have the same features
    and weights, so the same SimHash."""
    norm = normalize_text(text)
    assert feats(text, STRUCTURED) == feats(norm, STRUCTURED)
    assert fingerprint_text(text).simhash == fingerprint_text(norm).simhash


@pytest.mark.parametrize("text", [
    "\x1c# heading words here\nbody text with several words in it",
    "\u2028# heading words here\nbody text with several words in it",
    "\x85- item words here four\nbody text with several words in it",
    "-\titem words here four\nbody text with several words in it",
    "1.\x0bitem words here four\nbody text with several words in it",
])
def test_line_kind_read_after_normalisation(text):
    norm = normalize_text(text)
    assert norm.startswith(("# ", "- ", "1. "))
    assert feats(text, STRUCTURED) == feats(norm, STRUCTURED)


# --------------------------------------------------------------------------- weights


@SETTINGS
@given(w_heading=st.floats(0, 100), w_list=st.floats(0, 100), w_short=st.floats(0, 100),
       short_tokens=st.integers(0, 6), tf=st.sampled_from(["raw", "log", "binary"]))
def test_structural_weights(w_heading, w_list, w_short, short_tokens, tf):
    config = plain_config(w_heading=w_heading, w_list=w_list, w_short=w_short,
                           short_tokens=short_tokens, tf=tf)
    text = "# alpha\n- beta\ngamma delta epsilon zeta\nomega\n1. kappa lambda mu nu xi"
    got = feats(text, config)

    def short(n: int) -> float:
        return w_short if n <= short_tokens else 1.0

    expected = {
        "alpha": w_heading,  # headings are never down-weighted as short
        "beta": w_list * short(1),
        "gamma": short(4), "delta": short(4), "epsilon": short(4), "zeta": short(4),
        "omega": short(1),
        "kappa": w_list * short(6),  # "1" is a token too
        "1": w_list * short(6),
    }
    assert len(got) == 13
    for word, w in expected.items():
        assert got[feature_hash(word)] == round(w * SCALE), word


def test_heading_words_weigh_more_than_paragraph_words():
    text = "# Quantum computing threatens cryptography\nquantum computers could break the ciphers we use"
    got = feats(text, HEADING2)
    assert got[feature_hash("cryptography")] == 2 * got[feature_hash("ciphers")]
    # a word on both lines: log tf of the mean line weight
    assert got[feature_hash("quantum")] == round(1.5 * (1 + math.log(2)) * SCALE)


def test_headings_of_real_page_weigh_double(sample_pages):
    text = extract_main_content(sample_pages["npr-dylann-roof-2022"].content).text
    norm = normalize_text(text)
    headings = [ln for ln in norm.split("\n") if ln.startswith("#")]
    assert headings
    heading_only = set(re.findall(r"\w+", " ".join(headings))) - set(
        re.findall(r"\w+", " ".join(ln for ln in norm.split("\n") if not ln.startswith("#"))))
    got = feats(text, plain_config(w_heading=2.0, w_short=0.5, tf="binary"))  # max weight: repeated headings stay at 2
    assert heading_only
    for word in heading_only:
        assert got[feature_hash(word)] == 2 * SCALE, word
    assert sorted(got.values())[len(got) // 2] == SCALE  # most words: paragraph weight 1


@pytest.mark.parametrize("tf, expected", [("raw", 3.0), ("log", 1 + math.log(3)), ("binary", 1.0)])
def test_tf_modes(tf, expected):
    config = plain_config(tf=tf, w_heading=2.0, short_tokens=0)
    got = feats("alpha beta alpha gamma alpha delta", config)
    assert got[feature_hash("alpha")] == round(expected * SCALE)
    assert got[feature_hash("beta")] == SCALE
    mixed = feats("# alpha\nalpha beta gamma delta", config)[feature_hash("alpha")]
    assert mixed == round({"raw": 3.0, "log": 1.5 * (1 + math.log(2)), "binary": 2.0}[tf] * SCALE)


@pytest.mark.parametrize("line, kind", [
    ("# x y z w", "h"), ("###x y z w", "h"), ("- x y z w", "l"), ("* x y z w", "l"), ("+ x y z w", "l"),
    ("• x y z w", "l"), ("1. x y z w", "l"), ("12) x y z w", "l"), ("-x y z w", "p"), ("1.x y z w", "p"),
    ("x - y z w", "p"), ("x # y z w", "p"),
])
def test_line_kinds(line, kind):
    config = plain_config(w_heading=4.0, w_list=2.0, short_tokens=0)
    got = feats(line, config)
    assert got[feature_hash("z")] == {"h": 4, "l": 2, "p": 1}[kind] * SCALE


@SETTINGS
@given(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta", "# eta", "- theta",
                                 "iota kappa", "lambda mu nu xi omicron"]), min_size=1, max_size=12))
def test_shingles_of_one_equal_words_for_latin_text(lines):
    text = "\n".join(lines)
    for tf in ("raw", "log", "binary"):
        assert feats(text, plain_config(scheme="shingles", ngram=1, tf=tf)) == feats(text, plain_config(tf=tf))


def test_shingles_are_order_sensitive():
    a = "the quick brown fox jumps over the lazy dog"
    b = "dog lazy the over jumps fox brown quick the"
    words = plain_config()
    shingles = plain_config(scheme="shingles", ngram=3)
    assert feats(a, words) == feats(b, words)
    assert not set(feats(a, shingles)) & set(feats(b, shingles))
    assert len(feats(a, shingles)) == len(a.split()) - 2


def test_chars_scheme():
    config = plain_config(scheme="chars", ngram=4)
    # separators are dropped: the same letters spaced differently give the same features
    assert feats("abc def ghi", config) == feats("abcdef ghi", config) == feats("a-b-c-d-e-f-g-h-i", config)
    assert len(feats("abcdefghi", config)) == 6
    assert len(feats("abc", config)) == 1  # shorter than n: one feature
    assert feats("", config) == {}


# --------------------------------------------------------------------------- CJK and other unsegmented scripts


CLASS2 = st.one_of(st.integers(0x3041, 0x3096), st.integers(0x30A1, 0x30FA), st.integers(0x4E00, 0x9FFF),
                   st.integers(0xAC00, 0xD7A3)).map(chr)


def reference_cjk_features(text: str) -> set:
    """Documented 'words' scheme for CJK runs: bigrams inside a run, a lone character alone."""
    out = set()
    for run in text.split():
        if len(run) == 1:
            out.add(("uni", run))
        out.update(("bi", run[i:i + 2]) for i in range(len(run) - 1))
    return out


@SETTINGS
@given(st.lists(st.lists(CLASS2, min_size=1, max_size=12).map("".join), min_size=1, max_size=6),
       st.sampled_from([" ", "\n", "\u3000", " \n "]))
def test_cjk_runs_become_character_bigrams(runs, sep):
    text = sep.join(runs)
    ref = reference_cjk_features(text)
    assert len(feats(text)) == len(ref)
    assert fingerprint_text(text).tokens == sum(len(r) for r in runs)


@SETTINGS
@given(st.lists(CLASS2, min_size=3, max_size=30, unique=True).map("".join))
def test_cjk_bigrams_are_ordered(run):
    fwd, rev = feats(run), feats(run[::-1])
    assert len(fwd) == len(rev) == len(run) - 1
    assert not set(fwd) & set(rev)
    # spaced out, the same characters are unigrams, which the run does not contain
    spaced = feats(" ".join(run))
    assert len(spaced) == len(run)
    assert not set(spaced) & set(fwd)


@pytest.mark.parametrize("text", [
    "東京都は日本の首都であり、世界有数の大都市である",
    "대한민국은 동아시아의 한반도 남부에 위치한 민주공화국이다",
    "ประเทศไทยเป็นประเทศในภูมิภาคเอเชียตะวันออกเฉียงใต้",
    "中华人民共和国是位于东亚的社会主义国家",
])
def test_unsegmented_scripts_get_many_features(text):
    fp = fingerprint_text(text)
    chars = sum(not c.isspace() and c.isalpha() for c in text)
    assert fp.features >= 0.6 * chars
    assert fp.tokens >= 0.8 * chars
    assert not fp.empty


def test_japanese_page_features_and_distances(sample_pages):
    text = extract_main_content(sample_pages["japan-cnet-apple-news-2019"].content).text
    fp = fingerprint_text(text)
    assert fp.features > 100 and fp.tokens > 1000 and not fp.empty
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = "\n".join(lines[: len(lines) // 2])
    second = "\n".join(lines[len(lines) // 2:])
    assert hamming(fingerprint_text(first), fingerprint_text(second)) > 10
    # one character replaced, one sentence inserted: still near
    mid = len(text) // 2
    edited = text[:mid] + ("新" if text[mid] != "新" else "旧") + text[mid + 1:]
    assert hamming(fp, fingerprint_text(edited)) <= 3
    inserted = text[:mid] + "。これは後から追加された一文です。" + text[mid:]
    assert hamming(fp, fingerprint_text(inserted)) <= 3


def test_chinese_corpus_page_features(corpus):
    import gzip

    data = gzip.decompress((corpus / "trafilatura" / "eval/xinhuanet.com.c_1125597921.html.gz").read_bytes())
    fp = fingerprint_text(extract_main_content(data).text)
    assert fp.features > 300 and not fp.empty


# --------------------------------------------------------------------------- FeatureConfig


@pytest.mark.parametrize("kwargs", [
    {"scheme": "bogus"}, {"scheme": "Words"}, {"scheme": ""}, {"tf": "bogus"}, {"tf": "LOG"},
    {"ngram": 0}, {"ngram": 17}, {"ngram": -1}, {"w_heading": -0.1}, {"w_heading": 100.5},
    {"w_list": -1}, {"w_short": 101}, {"w_short": float("nan")}, {"short_tokens": -1},
])
def test_feature_config_validation(kwargs):
    with pytest.raises(ConfigError) as err:
        FeatureConfig(**kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs", [
    {"ngram": 1}, {"ngram": 16, "scheme": "shingles"}, {"scheme": "chars", "ngram": 5}, {"w_heading": 0},
    {"w_heading": 100}, {"w_short": 0.0}, {"short_tokens": 0}, {"tf": "raw"}, {"tf": "binary"},
])
def test_feature_config_valid(kwargs):
    config = FeatureConfig(**kwargs)
    assert FeatureConfig.from_dict(config.to_dict()) == config
    assert FeatureConfig.from_dict({**config.to_dict(), "unknown": 1}) == config
    hashes, weights = extract_features("some words to hash here", config)
    assert hashes.dtype == np.uint64 and weights.dtype == np.int64 and len(hashes) == len(weights) > 0


def test_feature_spec_names_every_parameter():
    specs = {FeatureConfig(**kw).spec for kw in (
        {}, {"scheme": "shingles", "ngram": 3}, {"scheme": "shingles", "ngram": 4}, {"scheme": "chars", "ngram": 4},
        {"w_heading": 3}, {"w_list": 2}, {"w_short": 0.25}, {"short_tokens": 4}, {"tf": "raw"})}
    assert len(specs) == 9
    assert FeatureConfig(scheme="shingles", ngram=3).spec.startswith("shingles3;")
    assert FeatureConfig(scheme="chars", ngram=4).spec.startswith("chars4;")

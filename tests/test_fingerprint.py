"""SimHash fingerprints: invariants, digest, real near-duplicates, config (neardup.fingerprint)."""

from __future__ import annotations

import hashlib
import itertools
import random

import numpy as np
import pytest
from checks import present
from hypothesis import example, given, settings
from hypothesis import strategies as st

import neardup
from neardup import ConfigError, FeatureConfig, Fingerprint, FingerprintConfig, fingerprint, hamming
from neardup.fingerprint import _kernels as K
from neardup.fingerprint.core import DEFAULT_CONFIG, SPEC_VERSION, fingerprint_text
from neardup.fingerprint.extract import extract_main_content, looks_like_html
from neardup.fingerprint.normalize import normalize_text
from neardup.model import default_k
from neardup.sketch import similarity

SETTINGS = settings(max_examples=100, deadline=None)
MASK64 = (1 << 64) - 1

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
         "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "東京", "日本語", "한국어", "42"]
text_line = st.tuples(st.sampled_from(["", "", "", "# ", "- ", "1. "]),
                      st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)).map("".join)
text_lines = st.lists(text_line, min_size=1, max_size=12)
any_text = st.text(max_size=300)
u64 = st.integers(0, MASK64)
u128 = st.integers(0, (1 << 128) - 1)


# --------------------------------------------------------------------------- Python reference of the kernel


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    h ^= h >> 33
    return h


def reference_simhash(feats: list[int], weights: list[int], words: int) -> list[int]:
    """Charikar SimHash as documented in _kernels.simhash."""
    out = []
    for j in range(words):
        acc = [0] * 64
        for h, w in zip(feats, weights):
            if j > 0:
                h = fmix64(h ^ ((0x9E3779B97F4A7C15 * j) & MASK64))
            for b in range(64):
                acc[b] += w if (h >> b) & 1 else -w
        out.append(sum(1 << b for b in range(64) if acc[b] > 0))
    return out


feature_arrays = st.lists(st.tuples(u64, st.integers(-(1 << 30), 1 << 30)), max_size=40)


@SETTINGS
@given(feature_arrays, st.sampled_from([1, 2]))
def test_kernel_simhash_matches_reference(pairs, words):
    feats = np.array([f for f, _ in pairs], dtype=np.uint64)
    weights = np.array([w for _, w in pairs], dtype=np.int64)
    got = K.simhash(feats, weights, words)
    assert got.dtype == np.uint64 and got.shape == (words,)
    assert [int(x) for x in got] == reference_simhash([f for f, _ in pairs], [w for _, w in pairs], words)


@SETTINGS
@given(feature_arrays, st.integers(0, 2**32))
def test_kernel_simhash_invariant_to_feature_order(pairs, seed):
    rnd = random.Random(seed)
    feats = np.array([f for f, _ in pairs], dtype=np.uint64)
    weights = np.array([w for _, w in pairs], dtype=np.int64)
    perm = list(range(len(pairs)))
    rnd.shuffle(perm)
    for words in (1, 2):
        a = K.simhash(feats, weights, words)
        b = K.simhash(feats[perm], weights[perm], words)
        assert a.tolist() == b.tolist()


def test_kernel_simhash_single_feature_and_empty():
    h = 0x0123456789ABCDEF
    assert K.simhash(np.array([h], dtype=np.uint64), np.array([5], dtype=np.int64), 1).tolist() == [h]
    assert K.simhash(np.array([h], dtype=np.uint64), np.array([-5], dtype=np.int64), 1).tolist() == [h ^ MASK64]
    assert K.simhash(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), 2).tolist() == [0, 0]


# --------------------------------------------------------------------------- invariants


@SETTINGS
@given(any_text)
def test_same_input_same_fingerprint(text):
    a, b = fingerprint_text(text), fingerprint_text(text)
    assert a == b and a.simhash == b.simhash and a.normalized == b.normalized
    c, d = fingerprint(text), fingerprint(text)
    assert c == d


@SETTINGS
@given(text_lines, st.integers(0, 2**32), st.sampled_from(["raw", "log", "binary"]),
       st.sampled_from([64, 128]))
def test_line_order_does_not_matter_for_words(lines, seed, tf, bits):
    rnd = random.Random(seed)
    config = FingerprintConfig(bits=bits, features=FeatureConfig(scheme="words", tf=tf))
    shuffled = lines[:]
    rnd.shuffle(shuffled)
    a = fingerprint_text("\n".join(lines), config)
    b = fingerprint_text("\n".join(shuffled), config)
    assert a.simhash == b.simhash
    assert a.tokens == b.tokens and a.features == b.features


def test_line_order_of_real_page(sample_pages):
    text = extract_main_content(sample_pages["npr-dylann-roof-2022"].content).text
    lines = text.splitlines()
    a = fingerprint_text(text)
    b = fingerprint_text("\n".join(reversed(lines)))
    assert a.simhash == b.simhash and a.digest != b.digest
    shingles = FingerprintConfig(features=FeatureConfig(scheme="shingles", ngram=3))
    assert fingerprint_text(text, shingles).simhash != fingerprint_text("\n".join(reversed(lines)), shingles).simhash


@SETTINGS
@given(u128, u128, u128)
def test_hamming_is_a_metric(a, b, c):
    assert hamming(a, a) == 0
    assert hamming(a, b) == hamming(b, a) == bin(a ^ b).count("1")
    assert (hamming(a, b) == 0) == (a == b)
    assert hamming(a, c) <= hamming(a, b) + hamming(b, c)


@SETTINGS
@given(any_text, any_text)
def test_hamming_accepts_fingerprints_and_ints(t1, t2):
    a, b = fingerprint_text(t1), fingerprint_text(t2)
    d = bin(a.simhash ^ b.simhash).count("1")
    assert hamming(a, b) == hamming(a.simhash, b.simhash) == hamming(a, b.simhash) == hamming(a.simhash, b) == d
    assert hamming(np.uint64(a.simhash), b) == d  # type: ignore[arg-type]  # numpy integers are taken too


@SETTINGS
@given(any_text)
@example("<P")  # found by Hypothesis: "hello <P" was taken for HTML and came back empty
@example("hello <P")
@example("a <pizza> b <a")
def test_digest_is_sha256_of_normalised_text(text):
    fp = fingerprint_text(text)
    norm = normalize_text(text)
    assert fp.digest == hashlib.sha256(fp.normalized).hexdigest()
    assert fp.digest == hashlib.sha256(norm.encode("utf-8")).hexdigest()
    assert fp.text == norm and fp.length == len(norm.encode("utf-8"))
    if looks_like_html(text):  # a complete tag such as <p>: extracted, not this property
        return
    plain = fingerprint(text)  # plain text str input: not extracted, only NUL characters dropped
    ref = fingerprint_text(text.replace("\x00", ""))
    assert plain.digest == ref.digest and plain.simhash == ref.simhash


@SETTINGS
@given(text_lines)
def test_plain_text_digest(lines):
    text = "\n".join(lines)
    fp = fingerprint(text)
    assert fp.digest == hashlib.sha256(normalize_text(text).encode()).hexdigest()
    assert fp.empty == (fp.tokens < DEFAULT_CONFIG.min_tokens)


@pytest.fixture(scope="module")
def sample_texts(sample_pages):
    """Main text of every sample page, by the default extractor."""
    return {name: extract_main_content(p.content, p.url, extractor=DEFAULT_CONFIG.extractor).text
            for name, p in sample_pages.items()}


@pytest.fixture(scope="module")
def sample_fps(sample_pages):
    return {name: fingerprint(p.content, p.url) for name, p in sample_pages.items()}


def test_digest_of_real_pages(sample_fps, sample_texts):
    for name, fp in sample_fps.items():
        assert fp.digest == hashlib.sha256(fp.normalized).hexdigest()
        assert fp.normalized == normalize_text(sample_texts[name]).encode("utf-8")
        assert fp.simhash == fingerprint_text(sample_texts[name]).simhash


@SETTINGS
@given(text_lines)
def test_widths(lines):
    text = "\n".join(lines)
    fp64 = fingerprint_text(text)
    fp128 = fingerprint_text(text, FingerprintConfig(bits=128))
    assert fp64.bits == 64 and 0 <= fp64.simhash < 2**64 and len(fp64.simhash_hex) == 16
    assert fp128.bits == 128 and 0 <= fp128.simhash < 2**128 and len(fp128.simhash_hex) == 32
    assert int(fp128.simhash_hex, 16) == fp128.simhash and int(fp64.simhash_hex, 16) == fp64.simhash
    assert fp128.digest == fp64.digest


def test_128_bits_are_all_used_and_differ(sample_pages, sample_texts):
    config = FingerprintConfig(bits=128)
    fps = [fingerprint_text(sample_texts[name], config) for name in sample_pages]
    assert any(fp.simhash >> 64 for fp in fps)  # the high word is used
    assert any(fp.simhash & MASK64 for fp in fps)  # the low word is used
    ones = sum(bin(fp.simhash).count("1") for fp in fps) / len(fps)
    assert 40 < ones < 88  # about half of 128 bits set
    by_group: dict[str, set[int]] = {}
    for page, fp in zip(sample_pages.values(), fps):
        by_group.setdefault(page.group, set()).add(fp.simhash)
    distinct = set().union(*by_group.values())
    assert len(distinct) >= len(by_group)
    a = fingerprint_text("the first text about one thing entirely", config)
    b = fingerprint_text("a second and different text about something else", config)
    assert a.simhash != b.simhash and hamming(a, b) > 6


def test_different_texts_differ():
    a = fingerprint_text("The quick brown fox jumps over the lazy dog near the river bank today")
    b = fingerprint_text("Completely unrelated sentence about tax policy and budget negotiations in parliament")
    assert a.digest != b.digest and a.simhash != b.simhash
    assert hamming(a, b) > 3


def test_fingerprint_fields(sample_pages):
    page = sample_pages["cnbc-cybersecurity-2019"]
    fp = fingerprint(page.content, page.url)
    assert isinstance(fp, Fingerprint)
    assert fp.spec == DEFAULT_CONFIG.spec and fp.bits == 64
    assert fp.tokens > 500 and 0 < fp.features <= fp.tokens and not fp.empty
    assert fp.length == len(fp.normalized) and fp.text == fp.normalized.decode()
    d = fp.to_dict()
    assert d["simhash"] == fp.simhash_hex and d["digest"] == fp.digest and "text" not in d
    assert fp.to_dict(with_text=True)["text"] == fp.text


# --------------------------------------------------------------------------- real near-duplicates


def test_recaptures_are_near(sample_pages, sample_fps):
    pairs = [(a, b) for a, b in itertools.combinations(sample_pages, 2)
             if sample_pages[a].group == sample_pages[b].group]
    groups = {sample_pages[a].group for a, _ in pairs}
    assert len(groups) >= 8
    near = [(a, b) for a, b in pairs if hamming(sample_fps[a], sample_fps[b]) <= 3]
    assert len(near) >= 0.75 * len(pairs), [(a, b, hamming(sample_fps[a], sample_fps[b])) for a, b in pairs]
    groups_all_near = {sample_pages[a].group for a, b in pairs} - {
        sample_pages[a].group for a, b in pairs if (a, b) not in near}
    assert len(groups_all_near) >= 0.6 * len(groups)


def test_mirrors_are_exact(sample_pages, sample_fps):
    mirrors = [n for n in sample_pages if n.endswith("-mirror")]
    assert len(mirrors) == 2
    for name in mirrors:
        original = sample_fps[name.removesuffix("-mirror")]
        assert sample_fps[name].digest == original.digest
        assert hamming(sample_fps[name], original) == 0


def test_different_articles_of_one_site_are_far(sample_pages, sample_fps):
    pairs = [(a, b) for a, b in itertools.combinations(sample_pages, 2)
             if sample_pages[a].host == sample_pages[b].host and sample_pages[a].group != sample_pages[b].group]
    assert len(pairs) >= 10
    for a, b in pairs:
        assert hamming(sample_fps[a], sample_fps[b]) > 3, (a, b)
        assert sample_fps[a].digest != sample_fps[b].digest


def test_same_article_closer_than_other_articles(sample_pages, sample_fps):
    same = [hamming(sample_fps[a], sample_fps[b]) for a, b in itertools.combinations(sample_pages, 2)
            if sample_pages[a].group == sample_pages[b].group]
    other = [hamming(sample_fps[a], sample_fps[b]) for a, b in itertools.combinations(sample_pages, 2)
             if sample_pages[a].group != sample_pages[b].group]
    assert max(same) < min(other)


@pytest.mark.parametrize("stamp", ["Updated 2024-05-01 12:34 UTC", "Last modified: March 21, 2019 at 10:42 a.m. ET",
                                   "© 2024"])
def test_appended_timestamp_stays_near(sample_pages, sample_texts, stamp):
    """A timestamp line appended to the main text moves few bits. SimHash gives no hard bound
    (short pages, or pages whose counters sit near zero, flip more; IDF weights give the
    numbers of a date real weight), so: most pages within 4, the typical page within 3,
    every page within the SimHash-only threshold (k = 12), and the sketches agree (J >= 0.9),
    so the default rule (k = 3 and the sketch bands) finds every one."""
    distances = {}
    for page in sample_pages.values():
        text = sample_texts[page.name]
        a = fingerprint_text(text)
        b = fingerprint_text(text + "\n" + stamp)
        assert a.digest != b.digest
        distances[page.name] = hamming(a, b)
        assert similarity(present(a.sketch), present(b.sketch)).jaccard >= 0.9, page.name
    assert sum(d <= 4 for d in distances.values()) >= 0.8 * len(distances), distances
    assert sorted(distances.values())[len(distances) // 2] <= 3, distances
    assert max(distances.values()) <= default_k(bands=False), distances


def test_timestamp_inserted_into_html_stays_near(sample_pages):
    page = sample_pages["npr-dylann-roof-2022"]
    marker = b"Federal prosecutors are seeking"
    html = page.content.replace(marker, b"Updated December 16, 2016, 9:15 AM ET</p><p>" + marker, 1)
    assert html != page.content
    a, b = fingerprint(page.content, page.url), fingerprint(html, page.url)
    assert a.digest != b.digest and hamming(a, b) <= 3


# --------------------------------------------------------------------------- config and spec


def test_spec_contents():
    spec = DEFAULT_CONFIG.spec
    assert spec.startswith(f"neardup-simhash/{SPEC_VERSION};")
    assert "f=64" in spec and f"features={DEFAULT_CONFIG.features.scheme}" in spec
    assert f"extract={DEFAULT_CONFIG.extractor}" in spec and f"min_tokens={DEFAULT_CONFIG.min_tokens}" in spec
    spec128 = FingerprintConfig(bits=128, features=FeatureConfig(scheme="shingles", ngram=3)).spec
    assert "f=128" in spec128 and "features=shingles3" in spec128


def test_spec_changes_with_every_bit_changing_setting():
    base = FingerprintConfig(bits=64, extractor="fast", min_tokens=10,
                             features=FeatureConfig(scheme="words", w_heading=2.0, w_list=1.0, w_short=0.5,
                                                    short_tokens=3, tf="log"))
    configs = [base, base.with_(bits=128), base.with_(extractor="accurate"), base.with_(extractor="full"),
               base.with_(min_tokens=5), base.with_(features={"tf": "raw"}), base.with_(features={"w_heading": 3.0}),
               base.with_(features={"w_list": 2.0}), base.with_(features={"w_short": 1.0}),
               base.with_(features={"short_tokens": 2}), base.with_(features={"scheme": "shingles", "ngram": 2}),
               base.with_(features={"scheme": "shingles", "ngram": 3}),
               base.with_(features={"scheme": "chars", "ngram": 5})]
    assert len({c.spec for c in configs}) == len(configs)
    # max_bytes changes which pages are accepted, not the bits
    assert base.with_(max_bytes=1000).spec == base.spec


def test_fingerprint_carries_its_config_spec():
    config = FingerprintConfig(bits=128, features=FeatureConfig(scheme="chars", ngram=4), min_tokens=3)
    fp = fingerprint("some text that is long enough", config=config)
    assert fp.spec == config.spec and fp.bits == 128


@pytest.mark.parametrize("kwargs", [{"bits": 32}, {"bits": 256}, {"bits": 0}, {"extractor": "bogus"},
                                    {"extractor": "FAST"}, {"min_tokens": -1}, {"max_bytes": 0},
                                    {"max_bytes": -5}])
def test_fingerprint_config_validation(kwargs):
    with pytest.raises(ConfigError) as err:
        FingerprintConfig(**kwargs)
    assert "\n" not in str(err.value)


def test_fingerprint_config_round_trip():
    config = FingerprintConfig(bits=128, extractor="accurate",
                               features=FeatureConfig(scheme="shingles", ngram=2, tf="binary"),
                               min_tokens=4, max_bytes=1 << 20)
    assert FingerprintConfig.from_dict(config.to_dict()) == config
    assert FingerprintConfig.from_dict({**config.to_dict(), "extra": 1}) == config
    changed = config.with_(features={"ngram": 3}, bits=64)
    assert changed.features == FeatureConfig(scheme="shingles", ngram=3, tf="binary") and changed.bits == 64
    with pytest.raises(ConfigError):
        config.with_(bits=32)
    with pytest.raises(ConfigError):
        config.with_(features={"scheme": "nope"})


def test_public_api():
    assert neardup.fingerprint is fingerprint and neardup.hamming is hamming
    assert issubclass(neardup.InputError, neardup.NeardupError) and issubclass(neardup.ConfigError, ValueError)

"""Pinned fingerprint bits: the deliberate exception to "no hard-coded results".

Fingerprints are stored (SQLite store) and compared across runs and machines, so the bits
for a given spec must never change silently. The values below were computed once with the
code at each spec version and are checked here bit for bit: the version-1 values (neardup
0.1) still hold with ``version=1``, so stores written then keep working.

IF A TEST HERE FAILS, the fingerprint algorithm changed (tokenizer, hash constants, weights,
normalisation, extraction...). Either revert the change, or bump ``SPEC_VERSION`` in
``neardup/fingerprint.py`` (stores written with the old spec then refuse the new one), and
only then re-pin these values together with the new spec strings.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from neardup import FeatureConfig, FingerprintConfig, fingerprint
from neardup.fingerprint.core import SPEC_VERSION

WEIGHTS: dict[str, Any] = dict(w_heading=2.0, w_list=1.0, w_short=0.5, short_tokens=3, tf="log")
V1: dict[str, Any] = dict(version=1, extractor="fast", min_tokens=10)
V2: dict[str, Any] = dict(version=2, extractor="fast", min_tokens=10, sketch_bins=60, sketch_ngram=3)
V3: dict[str, Any] = dict(version=3, extractor="hybrid", min_tokens=10, sketch_bins=60, sketch_ngram=3)
IDF: dict[str, Any] = dict(idf="web1", idf_doc_len=1000)

# every parameter spelled out, so that a change of a default does not hide here
CONFIGS = {
    "words64": FingerprintConfig(bits=64, **V1, features=FeatureConfig(scheme="words", ngram=1, **WEIGHTS)),
    "shingles3": FingerprintConfig(bits=64, **V1, features=FeatureConfig(scheme="shingles", ngram=3, **WEIGHTS)),
    "chars4": FingerprintConfig(bits=64, **V1, features=FeatureConfig(scheme="chars", ngram=4, **WEIGHTS)),
    "words128": FingerprintConfig(bits=128, **V1, features=FeatureConfig(scheme="words", ngram=1, **WEIGHTS)),
    "v2-words64": FingerprintConfig(bits=64, **V2, features=FeatureConfig(scheme="words", ngram=1, **WEIGHTS, **IDF)),
    "v2-words128": FingerprintConfig(bits=128, **V2, features=FeatureConfig(scheme="words", ngram=1, **WEIGHTS, **IDF)),
    # IDF applies to words only: the shingle bits are those of version 1, plus a sketch
    "v2-shingles3": FingerprintConfig(bits=64, **V2,
                                      features=FeatureConfig(scheme="shingles", ngram=3, **WEIGHTS, **IDF)),
    # version 3: the hybrid extractor; text gives the bits of version 2
    "v3-words64": FingerprintConfig(bits=64, **V3, features=FeatureConfig(scheme="words", ngram=1, **WEIGHTS, **IDF)),
}

SPECS = {
    "words64": "neardup-simhash/1;f=64;hash=fnv1a64-fmix64;features=words;w=h2,l1,s0.5@3;tf=log;"
               "norm=nfkc-casefold;extract=fast;min_tokens=10",
    "shingles3": "neardup-simhash/1;f=64;hash=fnv1a64-fmix64;features=shingles3;w=h2,l1,s0.5@3;tf=log;"
                 "norm=nfkc-casefold;extract=fast;min_tokens=10",
    # the chars scheme ignores w_short / short_tokens, and its spec does not name them
    "chars4": "neardup-simhash/1;f=64;hash=fnv1a64-fmix64;features=chars4;w=h2,l1;tf=log;"
              "norm=nfkc-casefold;extract=fast;min_tokens=10",
    "words128": "neardup-simhash/1;f=128;hash=fnv1a64-fmix64;features=words;w=h2,l1,s0.5@3;tf=log;"
                "norm=nfkc-casefold;extract=fast;min_tokens=10",
    "v2-words64": "neardup-simhash/2;f=64;hash=fnv1a64-fmix64;features=words;w=h2,l1,s0.5@3;tf=log;"
                  "idf=web1@1000;norm=nfkc-casefold;extract=fast;min_tokens=10;sketch=oph60b8/3",
    "v2-words128": "neardup-simhash/2;f=128;hash=fnv1a64-fmix64;features=words;w=h2,l1,s0.5@3;tf=log;"
                   "idf=web1@1000;norm=nfkc-casefold;extract=fast;min_tokens=10;sketch=oph60b8/3",
    "v2-shingles3": "neardup-simhash/2;f=64;hash=fnv1a64-fmix64;features=shingles3;w=h2,l1,s0.5@3;tf=log;"
                    "norm=nfkc-casefold;extract=fast;min_tokens=10;sketch=oph60b8/3",
    "v3-words64": "neardup-simhash/3;f=64;hash=fnv1a64-fmix64;features=words;w=h2,l1,s0.5@3;tf=log;"
                  "idf=web1@1000;norm=nfkc-casefold;extract=hybrid;min_tokens=10;sketch=oph60b8/3;"
                  "structure=structure-v1:paths=4,siblings,log-weights,fnv1a64-fmix64",
}

ENGLISH = ("The committee met on Tuesday to discuss the budget for the coming year. Members agreed "
           "that spending on roads and schools should rise, while administrative costs must fall.")
JAPANESE = "東京都は日本の首都であり、世界でも有数の大都市として知られている。"
MARKDOWN = ("# Release notes\n\nThis version improves the parser.\n\n- faster tokenizer\n"
            "- fewer allocations\n- new option: strict mode\n\nThanks to all contributors!")
CNBC = "cnbc-cybersecurity-2019"  # a real page of examples/sample

# SHA-256 of the normalised main text: independent of the feature config
DIGESTS = {
    "english": "e4f9ef2707059771ecf735b636a719a08c5fe456fa98830cd6a23e5b5b1d30d5",
    "japanese": "6467abc9df3363b0a2bbad57c270bd98a3592c079a8af93f4fa705d77ab75983",
    "markdown": "b4e7db1497fa088a1f4785108a24192c31ae69ff742e3d05e2f15789f10ad364",
    CNBC: "9dcb3469bd2eb9d6fd0d47776517c5682f0fed6b7647b4fee53ee36d3a540db1",
}
#: the digests the hybrid extractor gives where its main text differs from the fast one's
HYBRID_DIGESTS = {CNBC: "9cae4350a3b325e75e3aaab76abb7437d6d32070332da6b06f73d02d2f928427"}

# (config, input) -> (simhash hex, tokens, distinct features[, first 16 hex of the sketch's SHA-256])
PINNED = {
    ("words64", "english"): ("8eafe885bc8d7c73", 28, 25),
    ("words64", "japanese"): ("a1cb7dacfd23f8a9", 31, 29),
    ("words64", "markdown"): ("d83d46488b8890b3", 19, 19),
    ("words64", CNBC): ("88ac3d7e28f07479", 927, 428),
    ("shingles3", "english"): ("2b0a9a0424e9ad30", 28, 26),
    ("shingles3", "japanese"): ("24e99c4f727f3710", 31, 29),
    ("shingles3", "markdown"): ("66543b6cfeadba97", 19, 17),
    ("shingles3", CNBC): ("175a811a5e181861", 927, 906),
    ("chars4", "english"): ("a061d96f09850918", 139, 136),
    ("chars4", "japanese"): ("0a9988a415594804", 28, 28),
    ("chars4", "markdown"): ("0a694dd96b677363", 110, 107),
    ("chars4", CNBC): ("c1658e6f6d593c60", 4660, 2866),
    ("words128", "english"): ("8eafe885bc8d7c734463c7578ddfadde", 28, 25),
    ("words128", "japanese"): ("a1cb7dacfd23f8a9771d73c58e90ff79", 31, 29),
    ("words128", "markdown"): ("d83d46488b8890b3e501b087c41cec2f", 19, 19),
    ("words128", CNBC): ("88ac3d7e28f07479ee7557bfadc0217e", 927, 428),
    ("v2-words64", "english"): ("adeba885bdcd1850", 28, 25, "51e8082f6e053423"),
    ("v2-words64", "japanese"): ("a1c87da1fd23e8ab", 31, 29, "01435892170f245d"),
    ("v2-words64", "markdown"): ("dc3bd748178a90aa", 19, 19, "24ab7ec04d17bc3a"),
    ("v2-words64", CNBC): ("8128a17e23639613", 927, 428, "3e5db17a1663362f"),
    ("v2-words128", "english"): ("adeba885bdcd18500c63c715ade7ad06", 28, 25, "51e8082f6e053423"),
    ("v2-words128", "japanese"): ("a1c87da1fd23e8abf30d71c78e8cfff9", 31, 29, "01435892170f245d"),
    ("v2-words128", "markdown"): ("dc3bd748178a90aac51c10b2447cea27", 19, 19, "24ab7ec04d17bc3a"),
    ("v2-words128", CNBC): ("8128a17e23639613eef611bfbfcd3577", 927, 428, "3e5db17a1663362f"),
    ("v2-shingles3", "english"): ("2b0a9a0424e9ad30", 28, 26, "51e8082f6e053423"),
    ("v2-shingles3", "japanese"): ("24e99c4f727f3710", 31, 29, "01435892170f245d"),
    ("v2-shingles3", "markdown"): ("66543b6cfeadba97", 19, 17, "24ab7ec04d17bc3a"),
    ("v2-shingles3", CNBC): ("175a811a5e181861", 927, 906, "3e5db17a1663362f"),
    ("v3-words64", "english"): ("adeba885bdcd1850", 28, 25, "51e8082f6e053423"),
    ("v3-words64", CNBC): ("8128a17e23639613", 922, 428, "b605e72a8a7ef264"),
}


def test_spec_version():
    assert SPEC_VERSION == 3, "SPEC_VERSION changed: pin the new version's values in this file"


def test_default_config_is_the_pinned_v3():
    assert FingerprintConfig().spec == FingerprintConfig(**V3, features=FeatureConfig(**IDF)).spec
    # version 2's default extractor stays what version 2 stores were written with
    assert FingerprintConfig(version=2).extractor == "accurate"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pinned_spec(name):
    assert CONFIGS[name].spec == SPECS[name]


@pytest.mark.parametrize("config_name, input_name", sorted(PINNED))
def test_pinned_bits(sample_pages, config_name, input_name):
    config = CONFIGS[config_name]
    if input_name == CNBC:
        page = sample_pages[CNBC]
        fp = fingerprint(page.content, page.url, config=config)
    else:
        fp = fingerprint({"english": ENGLISH, "japanese": JAPANESE, "markdown": MARKDOWN}[input_name],
                         config=config)
    simhash_hex, tokens, features, *sketch = PINNED[(config_name, input_name)]
    assert fp.spec == config.spec
    digests = {**DIGESTS, **HYBRID_DIGESTS} if config.extractor == "hybrid" else DIGESTS
    assert fp.digest == digests[input_name]
    assert (fp.simhash_hex, fp.tokens, fp.features) == (simhash_hex, tokens, features)
    assert not fp.empty
    if config.version == 1:
        assert fp.sketch is None
    else:
        assert fp.sketch is not None and len(fp.sketch) == 64
        assert hashlib.sha256(fp.sketch).hexdigest()[:16] == sketch[0]


def test_pinned_structure(sample_pages):
    """Version 3 fingerprints carry the page's structure SimHash (neardup.fingerprint.structure), in its spec."""
    page = sample_pages[CNBC]
    fp = fingerprint(page.content, page.url, config=CONFIGS["v3-words64"])
    assert fp.structure is not None and f"{fp.structure:016x}" == "0a4ce3de72a6a278"
    assert fingerprint(page.content, page.url, config=CONFIGS["v2-words64"]).structure is None
    assert fingerprint(ENGLISH, config=CONFIGS["v3-words64"]).structure is None  # plain text has none

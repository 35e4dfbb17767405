"""Generate ``src/neardup/fingerprint/_idf.npz``: the background word-frequency table behind the IDF
feature weights (``FeatureConfig(idf="web")``).

Source: the ``wordfreq`` package (Robyn Speer et al.; code Apache-2.0, word lists CC-BY-SA
4.0, built from Wikipedia, subtitles, news, books, web text, Twitter and Reddit; see
``src/neardup/fingerprint/IDF_DATA.md``). For every language wordfreq covers, every word with a Zipf
frequency of at least ``--min-zipf`` (and every number of up to four digits, with
wordfreq's estimate of its frequency) is run through neardup's own tokenizer (so the table
is keyed exactly like the features: NFKC + casefold, FNV-1a + fmix64 token hashes, and the
character bigrams of Han / kana / Hangul / Thai runs). A feature's frequency is the sum
over the words that produce it within a language, and the maximum over languages (a word
frequent in any language is weighted as frequent).

Stored: the upper 32 bits of each feature hash (sorted, delta-encoded) and its Zipf
frequency x 16 as one byte. The table is part of the fingerprint spec (``idf=web1``):
changing it needs a new table name in :mod:`neardup.fingerprint.idf`.

Run: python tools/build_idf.py   (needs ``pip install wordfreq``; about a minute)
"""

from __future__ import annotations

import argparse
import itertools
import math
import pathlib
from collections import defaultdict

import numpy as np

from neardup.fingerprint.features import FeatureConfig, extract_features

# wordfreq stores numbers with their digits replaced by 0 ("0000"); its word_frequency()
# estimates a real number from that shape. Numbers of up to 4 digits (years, days, times,
# counts and the groups of longer numbers, which the tokenizer splits at "," and ".") are
# listed one by one, with and without leading zeros.
NUMBER_LANGS = ("en", "de", "fr", "es", "pt", "it", "ru", "nl", "pl")
NUMBERS = [f"{n:0{width}d}" for width in range(1, 5) for n in range(10 ** width)]

RAW_COUNTS = FeatureConfig(tf="raw", idf=None)  # weight = occurrences
OUT = pathlib.Path(__file__).resolve().parent.parent / "src" / "neardup" / "fingerprint" / "_idf.npz"


def word_features(word: str) -> tuple[np.ndarray, np.ndarray]:
    """Feature hashes of one word and how often each occurs in it."""
    feats, weights = extract_features(word, RAW_COUNTS)
    return feats, weights / 65536.0


def build(min_zipf: float) -> tuple[np.ndarray, np.ndarray, list[str]]:
    import wordfreq

    langs = sorted(wordfreq.available_languages("best"))
    best: dict[int, float] = {}
    # word_frequency() needs a word segmenter for Chinese, Japanese and Korean; numbers are
    # read the same way in every language, so their estimates come from these
    number_freq = {n: max(wordfreq.word_frequency(n, lang) for lang in NUMBER_LANGS) for n in NUMBERS}
    for lang in langs:
        freq: dict[int, float] = defaultdict(float)
        words = wordfreq.get_frequency_dict(lang, "best").items()
        for word, f in itertools.chain(
            ((w, f) for w, f in words if not any(c.isdigit() for c in w)),
            ((n, number_freq[n]) for n in NUMBERS),
        ):
            if f <= 0 or math.log10(f) + 9 < min_zipf:
                continue
            feats, counts = word_features(word)
            for h, c in zip(feats.tolist(), counts.tolist()):
                freq[h >> 32] += f * c
        for key, f in freq.items():
            if f > best.get(key, 0.0):
                best[key] = f
        print(f"{lang}: {len(freq)} features, table {len(best)}")
    keys = np.array(sorted(best), dtype=np.uint32)
    zipf = np.array([math.log10(best[int(k)]) + 9 for k in keys])
    q = np.clip(np.round(zipf * 16), 0, 255).astype(np.uint8)
    return keys, q, langs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-zipf", type=float, default=3.0)
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args()
    keys, q, langs = build(args.min_zipf)
    deltas = np.diff(keys, prepend=np.uint32(0)).astype(np.uint32)
    np.savez_compressed(args.out, key_deltas=deltas, zipf16=q,
                        languages=np.array(",".join(langs)), min_zipf=np.array(args.min_zipf))
    print(f"wrote {args.out}: {len(keys)} features, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()

"""Generate ``src/neardup/fingerprint/_charclass.bin``: the frozen character-class table.

The tokenizer classifies every code point below 0x30000 as a separator (0), a word
character (1, letters/digits/marks of space-separated scripts) or a character-token
script (2: Han, kana, Hangul, Thai, Lao, Khmer, Myanmar, Yi, Bopomofo), where each
character is a token of its own. The table is frozen in the package so fingerprints do
not change with the Unicode version of the running Python.

Run: python tools/gen_charclass.py
"""

from __future__ import annotations

import pathlib
import unicodedata
import zlib

import numpy as np

LIMIT = 0x30000
CHAR_TOKEN_RANGES = [
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3000, 0x303F),  # CJK symbols (only its letters, e.g. 々 〆 〇)
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x318F),  # Bopomofo, Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo ext, Katakana ext
    (0x3400, 0x4DBF),  # CJK ext A
    (0x4E00, 0x9FFF),  # CJK unified
    (0xA000, 0xA4CF),  # Yi
    (0xA960, 0xA97F),  # Hangul Jamo ext A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo ext B
    (0xF900, 0xFAFF),  # CJK compatibility
    (0xFF66, 0xFFDC),  # halfwidth Katakana / Hangul
    (0x1B000, 0x1B16F),  # Kana supplement / ext
    (0x20000, 0x2FFFF),  # CJK ext B..F
]


def build() -> np.ndarray:
    table = np.zeros(LIMIT, dtype=np.uint8)
    for cp in range(LIMIT):
        if unicodedata.category(chr(cp))[0] in "LNM":
            table[cp] = 1
    for lo, hi in CHAR_TOKEN_RANGES:
        seg = table[lo : hi + 1]
        seg[seg == 1] = 2
    return table


if __name__ == "__main__":
    out = pathlib.Path(__file__).resolve().parent.parent / "src" / "neardup" / "fingerprint" / "_charclass.bin"
    data = build()
    out.write_bytes(zlib.compress(data.tobytes(), 9))
    print(f"wrote {out} ({out.stat().st_size} bytes, unicode {unicodedata.unidata_version})")

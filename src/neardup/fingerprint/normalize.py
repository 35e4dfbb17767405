"""Text normalisation shared by the digest and the features.

Unicode NFKC, full case folding, then whitespace: ``\\n`` and ``\\r`` end lines, other
whitespace runs become one space, lines are trimmed and empty lines dropped. One block per
line survives, so the Markdown-like structure (headings, list items) can weight features.

>>> normalize_text("  Ｈｅｌｌｏ\\u00a0 WORLD \\n\\n\\n # Title ")
'hello world\\n# title'

:func:`normalized_bytes` is the fast path (compiled whitespace pass) used by the
fingerprints; :func:`normalize_text` is the readable reference, and a test keeps them equal.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

from neardup.fingerprint._kernels import CHAR_TABLE, collapse_whitespace

_LINE_BREAK = re.compile(r"[\n\r]")


def normalize_text(text: str) -> str:
    """NFKC, casefold, collapse whitespace, drop empty lines (reference implementation)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    lines = (" ".join(line.split()) for line in _LINE_BREAK.split(text))
    return "\n".join(line for line in lines if line)


def normalized_bytes(text: str) -> bytes:
    """UTF-8 bytes of ``normalize_text(text)``, computed in one compiled pass."""
    return collapse_whitespace(folded_array(text), CHAR_TABLE).tobytes()


def nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, faster on real pages: CPython re-normalises
    the whole string when one character is not NFKC (a no-break space is enough), so
    no-break spaces become spaces first (their NFKC form) and only lines that need it are
    normalised (a line break is stable under NFKC, so lines normalise independently)."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    text = text.replace("\xa0", " ")
    if unicodedata.is_normalized("NFKC", text):
        return text
    return "\n".join(line if unicodedata.is_normalized("NFKC", line) else unicodedata.normalize("NFKC", line)
                     for line in text.split("\n"))


def folded_array(text: str) -> np.ndarray:
    """NFKC + casefolded UTF-8 bytes of ``text`` as a uint8 array (whitespace untouched)."""
    folded = nfkc(text).casefold()
    return np.frombuffer(folded.encode("utf-8", "surrogatepass"), dtype=np.uint8)

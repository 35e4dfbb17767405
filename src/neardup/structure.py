"""Structure fingerprints: a 64-bit SimHash of a page's DOM structure (issue 23).

The text SimHash (:mod:`neardup.fingerprint`) says what a page *says*; this one says what
it is *built of*: two articles of one site and one template are a few bits apart whatever
their text, two sites (or one site before and after a redesign) are far apart.
:mod:`neardup.templates` groups a host's pages by it (templates, redesigns, soft-404s).

Features (spec :data:`STRUCTURE_SPEC`)
    Every element gets a *label*: its tag name (lower case), its class tokens (lower case,
    ASCII digits removed, as a set) and its id (lower case, digits removed), so that
    generated names (``post-48213``, ``ad-slot-7``) read as the same label on every page.
    The features of an element are

    * its root-to-node path suffixes of 1 to :data:`PATH_DEPTH` labels (``div.story``,
      ``article > div.story``, ...), and
    * its sibling step: (parent label, previous sibling's label, own label), so that the
      order of the blocks counts, not only their nesting.

    A page's features are counted as a set with a log weight (``1 + log2(count)``): a
    template repeats a list item or a paragraph as often as the article is long, and the
    weight keeps the article's length from outvoting the template. Elements inside raw-text
    elements (``script``, ``style``...) are none: their content is text.

How it is computed
    From a parsed tree (Resiliparse/Lexbor :class:`~resiliparse.parse.html.HTMLTree`, the
    parse the extractor already made): Lexbor serialises the tree (C, well-formed output:
    every element closed, attributes double-quoted and escaped), and one compiled pass
    (numba) reads that serialisation as a stream of open and close tags, hashing labels and
    features as it goes (FNV-1a 64 with the MurmurHash3 ``fmix64`` finish). Weighting and the
    SimHash vote are numpy over the feature array (no per-bit Python loop). Walking the
    tree node by node from Python costs about 2.5 µs an element (1.7 ms for a 650-element
    Big9 page, as much as the fast extractor itself); this path takes about a third of that
    (0.5 ms a page on average, half of it Lexbor's serialisation). docs/quality.md,
    "Structure fingerprints", measures it against the page's whole fingerprint cost.

>>> a = structure_of(b"<html><body><div class='story-12'><p>one</p><p>two</p></div></body></html>")
>>> b = structure_of(b"<html><body><div class='story-99'><p>three</p></div></body></html>")
>>> c = structure_of(b"<html><body><table><tr><td>one</td></tr></table><ul><li>x</li></ul></body></html>")
>>> structure_distance(a, b) < structure_distance(a, c)
True
"""

from __future__ import annotations

import numpy as np
from numba import njit
from resiliparse.parse.html import HTMLTree

from neardup._kernels import FNV_OFFSET, FNV_PRIME
from neardup._kernels import combine as _combine
from neardup._kernels import fmix64 as _fmix64

#: the definition of the structure SimHash; stored with the value, so that a change of any
#: constant below (a different spec) is never compared with values of the old one
STRUCTURE_SPEC = "structure-v1:paths=4;siblings;log-weights;fnv1a64-fmix64"
#: longest root-to-node path suffix (in elements) that is a feature
PATH_DEPTH = 4
#: deeper elements are read as if at this depth (their ancestors beyond it are forgotten)
MAX_DEPTH = 1024

# the fingerprint kernels' FNV-1a constants (fmix64 and combine are theirs too)
_U64 = np.uint64
_FNV_OFFSET, _FNV_PRIME = FNV_OFFSET, FNV_PRIME
_CLASS_SALT = _U64(0x3C6EF372FE94F82B)
_ID_SALT = _U64(0xA54FF53A5F1D36F1)
_SIBLING_SALT = _U64(0x510E527FADE682D1)
_PATH_SALT = _U64(0x9B05688C2B3E6C1F)

# raw-text elements: their content is serialised as is (not escaped), so it may hold "<"
_RAW = ("script", "style", "xmp", "iframe", "noembed", "noframes", "plaintext")
# void elements: serialised without an end tag
_VOID = ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr", "param", "keygen", "basefont", "bgsound", "frame", "image")


def _fnv_py(name: str) -> int:
    h = 0xCBF29CE484222325
    for byte in name.encode("ascii"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


_RAW_HASHES = np.array(sorted(_fnv_py(t) for t in _RAW), dtype=np.uint64)
_VOID_HASHES = np.array(sorted(_fnv_py(t) for t in _VOID), dtype=np.uint64)


@njit(cache=True, inline="always")
def _is_space(c):  # type: ignore[no-untyped-def]
    return c == 32 or c == 9 or c == 10 or c == 12 or c == 13


@njit(cache=True, inline="always")
def _lower(c):  # type: ignore[no-untyped-def]
    if 65 <= c <= 90:
        return c + 32
    return c


@njit(cache=True, inline="always")
def _member(sorted_hashes, h):  # type: ignore[no-untyped-def]
    j = np.searchsorted(sorted_hashes, h)
    return j < sorted_hashes.shape[0] and sorted_hashes[j] == h


@njit(cache=True)
def _find(buf, i, n, pattern):  # type: ignore[no-untyped-def]
    """Index of the first ``pattern`` at or after ``i`` (ASCII case-insensitive), or n."""
    m = pattern.shape[0]
    while i + m <= n:
        if _lower(buf[i]) == pattern[0]:
            k = 1
            while k < m and _lower(buf[i + k]) == pattern[k]:
                k += 1
            if k == m:
                return i
        i += 1
    return n


@njit(cache=True)
def _skip_raw(buf, i, n, name_start, name_end):  # type: ignore[no-untyped-def]
    """Position after the raw text of the element whose lower-case name is buf[name_start:name_end]:
    at its ``</name``, or n."""
    m = name_end - name_start
    while i < n:
        if buf[i] == 60 and i + 1 < n and buf[i + 1] == 47 and i + 2 + m <= n:
            k = 0
            while k < m and _lower(buf[i + 2 + k]) == _lower(buf[name_start + k]):
                k += 1
            if k == m:
                return i
        i += 1
    return n


@njit(cache=True)
def _structure_features(buf, path_depth, raw_hashes, void_hashes):  # type: ignore[no-untyped-def]
    """The feature hashes of a serialised HTML document (uint8 array), in document order.

    Returns (features, elements): the feature array and the number of elements read."""
    n = buf.shape[0]
    # a serialised element takes at least 4 bytes ("<br>") and gives at most path_depth + 1 features
    cap = (n // 4 + 1) * (path_depth + 1) + 16
    feats = np.empty(cap, dtype=np.uint64)
    nf = 0
    labels = np.zeros(MAX_DEPTH + 1, dtype=np.uint64)  # the open elements' labels
    names = np.zeros(MAX_DEPTH + 1, dtype=np.uint64)  # and their tag-name hashes
    last_child = np.zeros(MAX_DEPTH + 2, dtype=np.uint64)  # label of the last child seen at a depth
    depth = 0
    elements = 0
    i = 0
    comment_end = np.array([45, 45, 62], dtype=np.uint8)  # "-->"
    while i < n:
        if buf[i] != 60:  # '<'
            i += 1
            continue
        if i + 1 >= n:
            break
        c = buf[i + 1]
        if c == 33:  # "<!": a comment or a doctype
            if i + 3 < n and buf[i + 2] == 45 and buf[i + 3] == 45:
                i = _find(buf, i + 4, n, comment_end) + 3
            else:
                while i < n and buf[i] != 62:
                    i += 1
                i += 1
            continue
        if c == 63:  # "<?"
            while i < n and buf[i] != 62:
                i += 1
            i += 1
            continue
        if c == 47:  # "</name>": close the innermost open element of that name
            j = i + 2
            h = _FNV_OFFSET
            while j < n and buf[j] != 62 and not _is_space(buf[j]):
                h = (h ^ _U64(_lower(buf[j]))) * _FNV_PRIME
                j += 1
            d = depth
            while d > 0 and names[d - 1] != h:
                d -= 1
            if d > 0:
                depth = d - 1
            while j < n and buf[j] != 62:
                j += 1
            i = j + 1
            continue
        if not ((97 <= c <= 122) or (65 <= c <= 90)):
            i += 1
            continue
        # a start tag: the name
        j = i + 1
        name_start = j
        h = _FNV_OFFSET
        while j < n and buf[j] != 62 and buf[j] != 47 and not _is_space(buf[j]):
            h = (h ^ _U64(_lower(buf[j]))) * _FNV_PRIME
            j += 1
        name_end = j
        name = h
        classes = _U64(0)
        ident = _U64(0)
        # attributes: name="value" (Lexbor always double-quotes), or a bare name
        while j < n and buf[j] != 62:
            if _is_space(buf[j]) or buf[j] == 47:
                j += 1
                continue
            a0 = j
            while j < n and buf[j] != 61 and buf[j] != 62 and not _is_space(buf[j]) and buf[j] != 47:
                j += 1
            alen = j - a0
            is_class = alen == 5 and (_lower(buf[a0]) == 99 and _lower(buf[a0 + 1]) == 108 and _lower(buf[a0 + 2]) == 97
                                      and _lower(buf[a0 + 3]) == 115 and _lower(buf[a0 + 4]) == 115)
            is_id = alen == 2 and _lower(buf[a0]) == 105 and _lower(buf[a0 + 1]) == 100
            if j < n and buf[j] == 61:
                j += 1
                quote = 0
                if j < n and (buf[j] == 34 or buf[j] == 39):
                    quote = buf[j]
                    j += 1
                # the value: tokens (class) or one token (id), digits left out
                t = _FNV_OFFSET
                tlen = 0
                while j < n:
                    b = buf[j]
                    if (quote != 0 and b == quote) or (quote == 0 and (b == 62 or _is_space(b))):
                        break
                    if is_class and _is_space(b):
                        if tlen > 0:
                            classes += _fmix64(t ^ _CLASS_SALT)
                        t = _FNV_OFFSET
                        tlen = 0
                    elif (is_class or is_id) and not (48 <= b <= 57):
                        t = (t ^ _U64(_lower(b))) * _FNV_PRIME
                        tlen += 1
                    j += 1
                if is_class and tlen > 0:
                    classes += _fmix64(t ^ _CLASS_SALT)
                if is_id and tlen > 0:
                    ident = _fmix64(t ^ _ID_SALT)
                if quote != 0 and j < n:
                    j += 1
        i = j + 1
        # the element: its label and features
        label = _combine(_combine(_fmix64(name), classes), ident)
        elements += 1
        d = depth if depth < MAX_DEPTH else MAX_DEPTH
        parent = labels[d - 1] if d > 0 else _U64(0)
        if nf + path_depth + 1 > cap:
            break
        f = label
        feats[nf] = _fmix64(f ^ _PATH_SALT)
        nf += 1
        for k in range(1, path_depth):
            if d - k < 0:
                break
            f = _combine(f, labels[d - k])
            feats[nf] = _fmix64(f ^ (_PATH_SALT + _U64(k)))
            nf += 1
        feats[nf] = _combine(_combine(parent ^ _SIBLING_SALT, last_child[d]), label)
        nf += 1
        last_child[d] = label
        if _member(void_hashes, name):
            continue
        if buf[j - 1] == 47 and j < n:  # "<x/>": foreign content, self-closed
            continue
        if _member(raw_hashes, name):
            i = _skip_raw(buf, i, n, name_start, name_end)
            continue
        labels[d] = label
        names[d] = name
        last_child[d + 1] = _U64(0)
        depth = d + 1
    return feats[:nf], elements


def _simhash(features: np.ndarray) -> int:
    """64-bit SimHash of ``features`` counted as a set with weight ``1 + log2(count)``."""
    if features.size == 0:
        return 0
    keys, counts = np.unique(features, return_counts=True)
    weights = (1.0 + np.log2(counts)).astype(np.float32)
    bits = np.unpackbits(keys.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    votes = weights @ bits.astype(np.float32)  # weight of the features with each bit set: bit i of byte j at 8j + i
    total = float(weights.sum())
    mask = votes * 2.0 > total
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def _serialised(tree: HTMLTree) -> np.ndarray:
    doc = tree.document
    if doc is None:
        return np.zeros(0, dtype=np.uint8)
    markup = doc.html or ""
    return np.frombuffer(markup.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def structure_features(tree: HTMLTree, path_depth: int = PATH_DEPTH) -> tuple[np.ndarray, int]:
    """The structure features of a parsed page (uint64 hashes, one per path suffix and sibling
    step of every element, in document order) and its number of elements.

    >>> feats, elements = structure_features(HTMLTree.parse("<p>a</p><p>b</p>"))
    >>> elements, len(feats)  # html, head, body, p, p: 1 + 2 + 2 + 3 + 3 paths, 5 sibling steps
    (5, 16)
    """
    feats, elements = _structure_features(_serialised(tree), path_depth, _RAW_HASHES, _VOID_HASHES)
    return feats, int(elements)


def structure_simhash(tree: HTMLTree) -> int:
    """The 64-bit structure SimHash of an already parsed page (0 for a tree without elements).

    ``tree`` is a Resiliparse :class:`~resiliparse.parse.html.HTMLTree` (``HTMLTree.parse`` or
    ``HTMLTree.parse_from_bytes``), the tree the extractor parsed; it is only read.

    >>> tree = HTMLTree.parse("<html><body><div class='a'><p>x</p></div></body></html>")
    >>> structure_simhash(tree) == structure_of("<div class=a><p>other text</p></div>")
    True
    """
    feats, _ = structure_features(tree)
    return _simhash(feats)


def structure_of(html: bytes | str) -> int:
    """The structure SimHash of raw markup (parsed here; with a tree at hand use
    :func:`structure_simhash`).

    >>> structure_of(b"<ul><li class='item-1'>a</li></ul>") == structure_of("<ul><li class='item-2'>b</li></ul>")
    True
    """
    tree = HTMLTree.parse_from_bytes(html, "utf-8", "replace") if isinstance(html, bytes) else HTMLTree.parse(html)
    return structure_simhash(tree)


def structure_distance(a: int, b: int) -> int:
    """Hamming distance between two structure SimHash values (0..64).

    >>> structure_distance(0b1011, 0b0001)
    2
    """
    return (a ^ b).bit_count()

"""Structure fingerprints: a 64-bit SimHash of a page's DOM structure (issue 23).

The text SimHash (:mod:`neardup.fingerprint`) says what a page *says*; this one says what
it is *built of*: two articles of one site and one template are a few bits apart whatever
their text, two sites (or one site before and after a redesign) are far apart.
:mod:`neardup.crawl.templates` groups a host's pages by it (templates, redesigns, soft-404s).

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
    (numba) reads that str's code points (one UTF-32 copy, :func:`_code_points`: one kernel
    for every str; labels hash the UTF-8 bytes of their names) as a stream of open and
    close tags, hashing labels and features as it goes (FNV-1a 64 with the MurmurHash3
    ``fmix64`` finish). A second compiled call counts the features as a set (open addressing) and
    votes in exact fixed point (:func:`_vote`). The definition of the vote is float32 numpy
    (:func:`_simhash_numpy`, the spec's values since it was written): where a bit's vote is
    within float32 rounding of a tie, that path decides, so the value is the same bit for
    bit (about 1 page in 10, the large ones). Where the time goes, and the cost against the
    page's whole fingerprint: docs/quality.md, "Structure fingerprints" (Lexbor's
    serialisation is about half of it; walking the tree from Python would cost about
    2.5 us an element, several times this path).

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

from neardup.fingerprint._kernels import FNV_OFFSET, FNV_PRIME
from neardup.fingerprint._kernels import combine as _combine
from neardup.fingerprint._kernels import fmix64 as _fmix64

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


@njit(cache=True)
def _is_space(c):  # type: ignore[no-untyped-def]
    return c == 32 or c == 9 or c == 10 or c == 12 or c == 13


@njit(cache=True)
def _lower(c):  # type: ignore[no-untyped-def]
    if 65 <= c <= 90:
        return c + 32
    return c


@njit(cache=True)
def _at(s, i):  # type: ignore[no-untyped-def]
    """The code point at ``i`` (an int64)."""
    return np.int64(s[i])


@njit(cache=True)
def _hash_cp(h, c):  # type: ignore[no-untyped-def]
    """FNV-1a steps over the UTF-8 bytes of code point ``c`` (ASCII letters lower-cased):
    the hash of the page's UTF-8 serialisation, read from the str."""
    if c < 0x80:
        return (h ^ _U64(_lower(c))) * _FNV_PRIME
    if c < 0x800:
        h = (h ^ _U64(0xC0 | (c >> 6))) * _FNV_PRIME
    elif c < 0x10000:  # lone surrogates too (as "surrogatepass" encodes them)
        h = (h ^ _U64(0xE0 | (c >> 12))) * _FNV_PRIME
        h = (h ^ _U64(0x80 | ((c >> 6) & 63))) * _FNV_PRIME
    else:
        h = (h ^ _U64(0xF0 | (c >> 18))) * _FNV_PRIME
        h = (h ^ _U64(0x80 | ((c >> 12) & 63))) * _FNV_PRIME
        h = (h ^ _U64(0x80 | ((c >> 6) & 63))) * _FNV_PRIME
    return (h ^ _U64(0x80 | (c & 63))) * _FNV_PRIME


@njit(cache=True)
def _member(sorted_hashes, h):  # type: ignore[no-untyped-def]
    j = np.searchsorted(sorted_hashes, h)
    return j < sorted_hashes.shape[0] and sorted_hashes[j] == h


@njit(cache=True)
def _comment_end(s, i, n):  # type: ignore[no-untyped-def]
    """Index of the first "-->" at or after ``i``, or n."""
    while i + 3 <= n:
        if _at(s, i) == 45 and _at(s, i + 1) == 45 and _at(s, i + 2) == 62:
            return i
        i += 1
    return n


@njit(cache=True)
def _skip_raw(s, i, n, name_start, name_end):  # type: ignore[no-untyped-def]
    """Position after the raw text of the element whose name is s[name_start:name_end]:
    at its ``</name`` (ASCII case-insensitive), or n."""
    m = name_end - name_start
    while i < n:
        if _at(s, i) == 60 and i + 1 < n and _at(s, i + 1) == 47 and i + 2 + m <= n:
            k = 0
            while k < m and _lower(_at(s, i + 2 + k)) == _lower(_at(s, name_start + k)):
                k += 1
            if k == m:
                return i
        i += 1
    return n


@njit(cache=True)
def _attributes(s, j, n):  # type: ignore[no-untyped-def]
    """Read a start tag's attributes from ``j`` (after its name) to its ``>``: returns
    (position of the ``>`` or n, class-token sum, id hash)."""
    classes = _U64(0)
    ident = _U64(0)
    # attributes: name="value" (Lexbor always double-quotes), or a bare name
    while j < n:
        c = _at(s, j)
        if c == 62:
            break
        if _is_space(c) or c == 47:
            j += 1
            continue
        a0 = j
        while j < n:
            c = _at(s, j)
            if c == 61 or c == 62 or c == 47 or _is_space(c):
                break
            j += 1
        alen = j - a0
        is_class = alen == 5 and (_lower(_at(s, a0)) == 99 and _lower(_at(s, a0 + 1)) == 108
                                  and _lower(_at(s, a0 + 2)) == 97 and _lower(_at(s, a0 + 3)) == 115
                                  and _lower(_at(s, a0 + 4)) == 115)
        is_id = alen == 2 and _lower(_at(s, a0)) == 105 and _lower(_at(s, a0 + 1)) == 100
        if j < n and _at(s, j) == 61:
            j += 1
            quote = 0
            if j < n and (_at(s, j) == 34 or _at(s, j) == 39):
                quote = _at(s, j)
                j += 1
            if not (is_class or is_id):  # a value that does not count: to its end
                if quote != 0:
                    while j < n and _at(s, j) != quote:
                        j += 1
                    j += 1
                else:
                    while j < n:
                        c = _at(s, j)
                        if c == 62 or _is_space(c):
                            break
                        j += 1
                continue
            # the value: tokens (class) or one token (id), digits left out
            t = _FNV_OFFSET
            tlen = 0
            while j < n:
                b = _at(s, j)
                if (quote != 0 and b == quote) or (quote == 0 and (b == 62 or _is_space(b))):
                    break
                if is_class and _is_space(b):
                    if tlen > 0:
                        classes += _fmix64(t ^ _CLASS_SALT)
                    t = _FNV_OFFSET
                    tlen = 0
                elif (is_class or is_id) and not (48 <= b <= 57):
                    t = _hash_cp(t, b)
                    tlen += 1
                j += 1
            if is_class and tlen > 0:
                classes += _fmix64(t ^ _CLASS_SALT)
            if is_id and tlen > 0:
                ident = _fmix64(t ^ _ID_SALT)
            if quote != 0 and j < n:
                j += 1
    return j, classes, ident


@njit(cache=True)
def _structure_features(s, path_depth, raw_hashes, void_hashes):  # type: ignore[no-untyped-def]
    """The feature hashes of a serialised HTML document (its code points, a uint32 array:
    :func:`_code_points`), in document order.

    Returns (features, elements): the feature array and the number of elements read."""
    n = s.shape[0]
    # a serialised element takes at least 4 characters ("<br>") and gives at most
    # path_depth + 1 features
    cap = (n // 4 + 1) * (path_depth + 1) + 16
    feats = np.empty(cap, dtype=np.uint64)
    nf = 0
    labels = np.zeros(MAX_DEPTH + 1, dtype=np.uint64)  # the open elements' labels
    names = np.zeros(MAX_DEPTH + 1, dtype=np.uint64)  # and their tag-name hashes
    last_child = np.zeros(MAX_DEPTH + 2, dtype=np.uint64)  # label of the last child seen at a depth
    depth = 0
    elements = 0
    i = 0
    while i < n:
        if _at(s, i) != 60:  # '<'
            i += 1
            continue
        if i + 1 >= n:
            break
        c = _at(s, i + 1)
        if c == 33:  # "<!": a comment or a doctype
            if i + 3 < n and _at(s, i + 2) == 45 and _at(s, i + 3) == 45:
                i = _comment_end(s, i + 4, n) + 3
            else:
                while i < n and _at(s, i) != 62:
                    i += 1
                i += 1
            continue
        if c == 63:  # "<?"
            while i < n and _at(s, i) != 62:
                i += 1
            i += 1
            continue
        if c == 47:  # "</name>": close the innermost open element of that name
            j = i + 2
            h = _FNV_OFFSET
            while j < n:
                b = _at(s, j)
                if b == 62 or _is_space(b):
                    break
                h = _hash_cp(h, b)
                j += 1
            d = depth
            while d > 0 and names[d - 1] != h:
                d -= 1
            if d > 0:
                depth = d - 1
            while j < n and _at(s, j) != 62:
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
        while j < n:
            b = _at(s, j)
            if b == 62 or b == 47 or _is_space(b):
                break
            h = _hash_cp(h, b)
            j += 1
        name_end = j
        name = h
        j, classes, ident = _attributes(s, j, n)
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
        if _at(s, j - 1) == 47 and j < n:  # "<x/>": foreign content, self-closed
            continue
        if _member(raw_hashes, name):
            i = _skip_raw(s, i, n, name_start, name_end)
            continue
        labels[d] = label
        names[d] = name
        last_child[d + 1] = _U64(0)
        depth = d + 1
    return feats[:nf], elements


def _code_points(s: str) -> np.ndarray:
    """A str's code points as a uint32 array (one copy, UTF-32; lone surrogates kept as they
    are). One array type for every str: :func:`_structure_features` is compiled once, not once
    per CPython code unit width (1, 2 or 4 bytes), which cost a first run about 7 s of CPU."""
    return np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _str_features(s: str, path_depth: int, raw_hashes: np.ndarray, void_hashes: np.ndarray) -> tuple[np.ndarray, int]:
    """:func:`_structure_features` of a str."""
    feats, elements = _structure_features(_code_points(s), path_depth, raw_hashes, void_hashes)
    return feats, int(elements)


# the weight of a feature seen c times, 1 + log2(c), as the float32 numpy computes (index c),
# and the same value in fixed point (x 2^23: exact, as a float32 >= 1 has no bit below 2^-23)
_WEIGHTS32 = np.concatenate([np.zeros(1, dtype=np.float32),
                             (1.0 + np.log2(np.arange(1, 4097, dtype=np.float64))).astype(np.float32)])
_WEIGHTS_FIXED = (_WEIGHTS32.astype(np.float64) * 2.0**23).astype(np.int64)


@njit(cache=True)
def _vote(features, weights):  # type: ignore[no-untyped-def]
    """The SimHash vote of ``features`` counted as a set (an open-addressing count: the
    hashes are fmix64 outputs, their low bits an index) with the fixed-point ``weights``.

    Returns (value, decided): the votes are exact sums, so each bit is exactly "its weight
    over half the total"; ``decided`` is False where the float32 vote of :func:`_simhash_numpy`
    (the definition) could round a bit the other way (a vote within its error bound of a tie)
    or a count is past the weight table: the caller then takes that path."""
    n = features.shape[0]
    if n == 0:
        return _U64(0), True
    size = 16
    while size < 2 * n:
        size *= 2
    mask = _U64(size - 1)
    keys = np.empty(size, dtype=np.uint64)
    counts = np.zeros(size, dtype=np.int64)
    for i in range(n):
        f = features[i]
        j = f & mask
        while counts[j] != 0 and keys[j] != f:
            j = (j + _U64(1)) & mask
        keys[j] = f
        counts[j] += 1
    # per byte of the key and value of that byte: the weight and number of the keys
    byte_weight = np.zeros((8, 256), dtype=np.int64)
    byte_keys = np.zeros((8, 256), dtype=np.int64)
    total = 0
    unique = 0
    fraction = 0  # the bits of the weights below 1
    for j in range(size):
        c = counts[j]
        if c == 0:
            continue
        if c >= weights.shape[0]:
            return _U64(0), False
        w = weights[c]
        total += w
        unique += 1
        fraction |= w & ((1 << 23) - 1)
        k = keys[j]
        for b in range(8):
            v = np.int64((k >> _U64(8 * b)) & _U64(255))
            byte_weight[b, v] += w
            byte_keys[b, v] += 1
    votes = np.zeros(64, dtype=np.int64)  # per bit: the weight of the keys with it set
    terms = np.zeros(64, dtype=np.int64)  # and how many they are
    for b in range(8):
        for value in range(256):
            if byte_keys[b, value] == 0:
                continue
            for t in range(8):
                if (value >> t) & 1:
                    votes[8 * b + t] += byte_weight[b, value]
                    terms[8 * b + t] += byte_keys[b, value]
    out = _U64(0)
    exact = fraction == 0 and total < (1 << 47)  # whole weights summing under 2^24: float32 adds them exactly
    for b in range(64):
        d = 2 * votes[b] - total
        # float32 rounding: a sum of m terms (in any order) errs by at most (m - 1) units of
        # 2^-24 of its value; the vote has terms[b] terms, the total `unique`
        if not exact and abs(float(d)) <= (2.0 * terms[b] * float(votes[b]) + float(unique) * float(total)) * 2.0**-24:
            return _U64(0), False
        if d > 0:
            out |= _U64(1) << _U64(b)
    return out, True


def _str_simhash(s: str, path_depth: int, raw_hashes: np.ndarray, void_hashes: np.ndarray,
                 weights: np.ndarray) -> tuple[int, bool, np.ndarray]:
    """:func:`_str_features` and :func:`_vote`: (value, decided, features)."""
    feats, _ = _str_features(s, path_depth, raw_hashes, void_hashes)
    value, decided = _vote(feats, weights)
    return value, decided, feats


def _simhash_numpy(features: np.ndarray) -> int:
    """64-bit SimHash of ``features`` counted as a set with weight ``1 + log2(count)``: the
    definition (numpy, float32 votes), taken where :func:`_vote` cannot decide alone."""
    if features.size == 0:
        return 0
    keys, counts = np.unique(features, return_counts=True)
    weights = (1.0 + np.log2(counts)).astype(np.float32)
    bits = np.unpackbits(keys.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    votes = weights @ bits.astype(np.float32)  # weight of the features with each bit set: bit i of byte j at 8j + i
    total = float(weights.sum())
    mask = votes * 2.0 > total
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def _serialised(tree: HTMLTree) -> str:
    doc = tree.document
    if doc is None:
        return ""
    return doc.html or ""


def structure_features(tree: HTMLTree, path_depth: int = PATH_DEPTH) -> tuple[np.ndarray, int]:
    """The structure features of a parsed page (uint64 hashes, one per path suffix and sibling
    step of every element, in document order) and its number of elements.

    >>> feats, elements = structure_features(HTMLTree.parse("<p>a</p><p>b</p>"))
    >>> elements, len(feats)  # html, head, body, p, p: 1 + 2 + 2 + 3 + 3 paths, 5 sibling steps
    (5, 16)
    """
    return _str_features(_serialised(tree), path_depth, _RAW_HASHES, _VOID_HASHES)


def structure_simhash(tree: HTMLTree) -> int:
    """The 64-bit structure SimHash of an already parsed page (0 for a tree without elements).

    ``tree`` is a Resiliparse :class:`~resiliparse.parse.html.HTMLTree` (``HTMLTree.parse`` or
    ``HTMLTree.parse_from_bytes``), the tree the extractor parsed; it is only read.

    >>> tree = HTMLTree.parse("<html><body><div class='a'><p>x</p></div></body></html>")
    >>> structure_simhash(tree) == structure_of("<div class=a><p>other text</p></div>")
    True
    """
    value, decided, feats = _str_simhash(_serialised(tree), PATH_DEPTH, _RAW_HASHES, _VOID_HASHES, _WEIGHTS_FIXED)
    return int(value) if decided else _simhash_numpy(feats)


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

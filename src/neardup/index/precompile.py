"""The compiled kernels of a default run, built ahead of its first page: what the build of a
wheel runs (``setup.py``), so that an installed neardup loads its kernels from numba's cache
instead of compiling them in its first command.

:func:`precompile` makes the calls a run of the default settings makes into compiled code,
with the same argument types (numba compiles one version per type signature): the text
kernels (normalise, tokenise, weigh, SimHash and sketch in one pass) through
:func:`~neardup.fingerprint.features.simhash_of_text` with the default feature settings, the
structure kernels through :func:`~neardup.fingerprint.structure.structure_of`, and the index
kernels through a :class:`~neardup.index.permuted.PermutedIndex` and a
:class:`~neardup.index.bands.BandIndex` as the Detector's index mirror builds them, filled
past two delta buffers (so that levels are flushed and merged), searched, emptied in part,
saved and reopened memory-mapped (numba compiles read-only arrays apart).

It imports only the fingerprint and index kernels' modules (numpy, numba and Resiliparse),
so that the build can run it with only those installed; ``tests/test_precompile.py`` checks
that after it a real run (the CLI and a Detector, in batches and one by one, expiry, a
reopened store) compiles nothing.

>>> from neardup.index.precompile import precompile
>>> precompile()  # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from neardup.fingerprint.features import FeatureConfig, simhash_of_text
from neardup.fingerprint.structure import structure_of
from neardup.index.bands import BandIndex
from neardup.index.permuted import PermutedIndex
from neardup.model import DEFAULT_VERIFY
from neardup.sketch import HEADER

__all__ = ["PAGES", "precompile"]

#: index entries added: above two delta buffers (4,096 each), so that a level is flushed and
#: two are merged
PAGES = 9000
#: the default fingerprint's sketch (:class:`neardup.fingerprint.core.FingerprintConfig`):
#: 60 bins of word 3-shingles
SKETCH_BINS, SKETCH_NGRAM = 60, 3
#: a small page with what real pages have (a head, headings, lists, links, a table,
#: attributes, an entity, non-ASCII and CJK text)
PAGE = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Precompile</title></head><body>'
        '<header class="top" id="h"><nav><ul><li><a href="/">Home</a></li></ul></nav></header><main><article>'
        "<h1>A heading</h1><p>caf\u00e9 na\u00efve &amp; r\u00e9sum\u00e9, \u6f22\u5b57\u306e\u6587</p>"
        "<ul><li>one</li><li>two</li></ul><table><tr><td>1</td></tr></table><br/><!-- c -->"
        "<script>var x = '<p>';</script></article></main></body></html>")


def _text_kernels() -> bytes:
    """The one-pass text kernel of the default features, on bytes and on str input; returns a
    real sketch (its header is the shingle count, which a synthetic sketch copies)."""
    text = "# A heading\n- an item\n" + " ".join(f"word{i} caf\u00e9 \u6f22\u5b57" for i in range(40))
    sketch = b""
    for t in (text, text.encode("utf-8").decode("utf-8")):
        _, _, _, _, got = simhash_of_text(t, FeatureConfig(), 64, SKETCH_BINS, SKETCH_NGRAM)
        sketch = got or sketch
    structure_of(PAGE)
    structure_of(PAGE.encode("utf-8"))
    return sketch


def _index_kernels(sketch: bytes, pages: int, folder: Path) -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 1 << 63, size=pages, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    bins = rng.integers(0, 256, size=(pages, SKETCH_BINS), dtype=np.uint8)
    sketches = [sketch[:HEADER] + bins[i].tobytes() for i in range(pages)]
    ids = list(range(1, pages + 1))
    index = PermutedIndex(k=3, expected_n=10**6)
    bands = BandIndex()
    half = pages // 2
    index.add_many(ids[:half], values[:half])
    bands.add_many(ids[:half], sketches[:half])
    for i in range(half, pages):  # one by one: the delta buffers fill and flush
        index.add(ids[i], int(values[i]))
        bands.add(ids[i], sketches[i])
    for opened in (False, True):
        if opened:  # the saved indexes, memory-mapped as a reopened store's
            index.save(folder, token="precompile")
            bands.save(folder / "bands", token="precompile")
            index, bands = PermutedIndex.open(folder), BandIndex.open(folder / "bands")
        for i in range(0, pages, pages // 20):
            index.search(int(values[i]) ^ 0b101, 3)
            index.search(int(values[i]), 0)
            bands.search(sketches[i], DEFAULT_VERIFY)
            bands.search(sketches[i])
        gone = ids[:50] if not opened else ids[50:100]
        for i in gone[:10]:
            index.remove(i, int(values[i - 1]))
            bands.remove(i, sketches[i - 1])
        bands.remove_many(gone[10:], [sketches[i - 1] for i in gone[10:]])
        for i in gone[10:]:
            index.remove(i)
        index.add(pages + 1, int(values[0]) ^ 0b11)
        bands.add(pages + 1, sketches[0])


def precompile(pages: int = PAGES) -> None:
    """Compile (or load from numba's cache) every kernel a run of the default settings
    reaches: the page's text and structure, the SimHash tables and the sketch bands."""
    sketch = _text_kernels()
    with tempfile.TemporaryDirectory(prefix="neardup-precompile-") as tmp:
        _index_kernels(sketch, pages, Path(tmp))

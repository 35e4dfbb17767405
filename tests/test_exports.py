"""What the package exports: the names the docs and error messages tell users to use, the
installed version, and small helpers kept public."""

from __future__ import annotations

from importlib.metadata import version

import numpy as np

import neardup


def test_version_comes_from_the_installed_metadata():
    assert neardup.__version__ == version("neardup")


def test_documented_names_are_exported():
    for name in ("MinHashConfig", "HammingIndex", "BruteForceIndex", "Store", "Detector", "FingerprintConfig"):
        assert name in neardup.__all__ and getattr(neardup, name) is not None
    assert neardup.MinHashConfig().num_perm == 128
    idx: neardup.HammingIndex = neardup.BruteForceIndex()
    idx.add(1, 3)
    assert idx.search(1, 1) == [(1, 1)]


def test_char_table_classifies_code_points():
    """features.char_table: the frozen class of every code point below 0x30000 (0 separator,
    1 word character, 2 a token of its own)."""
    from neardup.fingerprint.features import char_table

    table = char_table()
    assert table.dtype == np.uint8 and table.shape == (0x30000,)
    assert table[ord(" ")] == 0 and table[ord(",")] == 0
    assert table[ord("a")] == 1 and table[ord("é")] == 1 and table[ord("7")] == 1
    assert table[ord("中")] == 2 and table[ord("か")] == 2 and table[ord("ก")] == 2

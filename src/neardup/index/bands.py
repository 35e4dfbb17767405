"""Candidates from the verification sketch: banded LSH over its bins, filtered in memory.

The sketch (:mod:`neardup.sketch`) decides what is *near*: two pages whose 60 one-byte bins
agree on at least ``need(verify)`` bins (19 for verify 0.3). :class:`BandIndex` finds the
stored pages the sketch would accept without a SimHash distance limit:

1. **bands**: bins ``2j, 2j + 1`` of band ``j`` (8 bands over bins 0..15) form a 16-bit
   key; a stored page is a *raw* candidate when one of its band keys equals the query's.
   Two pages that agree on a share p of their bins share a given band with probability
   about p^2 (the S-curve ``1 - (1 - p^2)^8``: 94% at p = 0.5, 99.6% at p = 0.7); on the
   realistic edits of ``benchmarks/candidates.py`` (docs/quality.md) the bands bring 99.2%
   (tuning part) and 99.5% (held-out part) of the pairs the sketch accepts.
2. **nibble filter**: the low 4 bits of bins 0..55 are kept in memory (28 bytes a page);
   a raw candidate is returned only when at least ``need(verify) - 4`` of those nibbles agree.
   Equal bins have equal nibbles and bins 56..59 are at most 4 of the agreeing bins, so the
   filter never drops a page the sketch accepts; an unrelated page (nibbles agree with
   probability 1/16) passes it with probability about 10^-6.

So :meth:`BandIndex.search` returns exactly the stored pages that share a band with the query
and pass the nibble filter (tested against :func:`brute_force`), a superset of those among
them that the sketch accepts; each result still goes through :func:`neardup.matching.match`.

Memory: 4 bytes per page and band (the row, sorted by key under a directory of the 16-bit
keys), 28 bytes of nibbles and 4 bytes of id (8 when ids do not fit 32 bits): **64 bytes a
page** at 8 bands. Like :class:`neardup.index.permuted.PermutedIndex`, inserts wait in a small
delta (scanned), which becomes a level; levels merge geometrically; deletes mark rows dead;
:meth:`BandIndex.save` / :meth:`BandIndex.open` persist it as memory-mapped .npy files.

>>> import numpy as np
>>> rng = np.random.default_rng(1)
>>> a = (100).to_bytes(4, "little") + rng.integers(0, 256, 60, dtype=np.uint8).tobytes()
>>> b = a[:40] + bytes(24)  # the first 36 bins equal: a sketch Jaccard of about 0.6
>>> idx = BandIndex()
>>> idx.add_many([1, 2], [a, (100).to_bytes(4, "little") + bytes(60)])
>>> [(i, agree >= need(0.3) - 4) for i, agree in idx.search(b)]
[(1, True)]
"""

from __future__ import annotations

import functools
import json
import math
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from neardup.errors import ConfigError, NeardupError, StoreError
from neardup.index import _kernels as K
from neardup.index.base import save_npy, write_manifest
from neardup.model import DEFAULT_VERIFY
from neardup.sketch import COLLISION, HEADER

#: bins of a sketch (spec version 2: 60 one-byte bins after a 4-byte header)
BINS = 60
#: bins per band (a 16-bit key)
ROWS = 2
#: default number of bands (bins 0..15)
DEFAULT_BANDS = 8
#: bins whose low nibble is kept for the filter (28 bytes, seven 32-bit words)
NIBBLE_BINS = 56
WORDS = NIBBLE_BINS // 8
FORMAT = "neardup-bands/1"

_FULL_DIRECTORY = 1 << 17  # levels of at least this many pages key their directory on all 16 bits


@functools.lru_cache(maxsize=64)
def banded(sketch: bytes | None) -> bool:
    """Whether a sketch has band keys: a spec-2 sketch (``HEADER + BINS`` bytes) of some
    shingles. The one rule of which pages the band index holds, online and in batch.

    >>> banded(None), banded(bytes(64)), banded(b"\\x01" + bytes(63))
    (False, False, True)
    """
    return sketch is not None and len(sketch) == HEADER + BINS and int.from_bytes(sketch[:HEADER], "little") > 0


def banded_rows(sketches: np.ndarray, has: np.ndarray) -> np.ndarray:
    """:func:`banded` of every row of an ``(n, HEADER + BINS)`` uint8 matrix whose rows ``has``
    a sketch."""
    return has & (sketches[:, :HEADER] != 0).any(axis=1)


@functools.lru_cache(maxsize=256)
def need(verify: float, bins: int = BINS) -> int:
    """The fewest equal bins for which :func:`neardup.sketch.similarity` estimates a Jaccard
    of at least ``verify`` (19 of 60 at 0.3); remembered (every query asks it).

    >>> need(0.3), need(0.0), need(1.0)
    (19, 0, 60)
    """
    for agree in range(bins + 1):
        if max(0.0, (agree / bins - COLLISION) / (1.0 - COLLISION)) >= verify:
            return agree
    return bins + 1


#: sketch estimate a band candidate beyond the SimHash k needs (26 of 60 bins), chosen by
#: benchmarks/candidates.py (docs/quality.md, *Same document*): of the thresholds that keep the
#: recall on realistic edits sharing at least half their text within 0.25 point of the best
#: (99.80% of the tuning edits here, 99.88% at 0.33), the one that declares the fewest pages of
#: one site sharing less than half (quoted articles, series, API pages, index pages). At 0.33
#: (20 bins) 5 of 1,033 such pairs were declared, pages under one title (the site's name)
#: sharing 36-49% of their word 5-shingles at estimates of 0.38-0.50; at 0.42, one (0.50).
#: Two pages of one host whose titles differ need more (:data:`neardup.matching.FAR_TITLE_VERIFY`).
FAR_VERIFY = 0.42


def far_verify(verify: float | None) -> float | None:
    """The threshold for candidates only the bands bring: ``max(verify, FAR_VERIFY)``; None
    (no verification) brings none."""
    return None if verify is None else max(float(verify), FAR_VERIFY)


def nibble_threshold(verify: float) -> int:
    """Agreeing nibbles (of bins 0..55) a page the sketch accepts at ``verify`` has at least."""
    return max(0, need(verify) - (BINS - NIBBLE_BINS))


def sketch_bins(sketches: Iterable[bytes] | np.ndarray) -> np.ndarray:
    """(n, 60) uint8 bins of sketches (bytes of 64, or an (n, 64) / (n, 60) uint8 array)."""
    if isinstance(sketches, np.ndarray):
        arr = np.asarray(sketches, dtype=np.uint8)
        if arr.ndim == 2 and arr.shape[1] == HEADER + BINS:
            return np.ascontiguousarray(arr[:, HEADER:])
        if arr.ndim == 2 and arr.shape[1] == BINS:
            return np.ascontiguousarray(arr)
        raise ConfigError(f"sketch array must be (n, {HEADER + BINS}) or (n, {BINS}), got {arr.shape}")
    blobs = list(sketches)
    if any(not isinstance(s, (bytes, bytearray, memoryview)) or len(s) != HEADER + BINS for s in blobs):
        raise ConfigError(f"sketches must be {HEADER + BINS} bytes (spec version 2)")
    if not blobs:
        return np.zeros((0, BINS), dtype=np.uint8)
    flat = np.frombuffer(b"".join(bytes(s) for s in blobs), dtype=np.uint8)
    return flat.reshape(-1, HEADER + BINS)[:, HEADER:].copy()


def keys_of(bins: np.ndarray, bands: int = DEFAULT_BANDS) -> np.ndarray:
    """(n, bands) uint16 band keys: bin ``2j`` in the low byte, bin ``2j + 1`` in the high one."""
    b = np.asarray(bins, dtype=np.uint8)
    return (b[:, 0:2 * bands:2].astype(np.uint16) | (b[:, 1:2 * bands:2].astype(np.uint16) << np.uint16(8)))


def share_band(a: bytes | None, b: bytes | None, bands: int = DEFAULT_BANDS) -> bool:
    """Whether two sketches share a band key (the pair :class:`BandIndex` brings); False when
    either is missing or not a 64-byte sketch.

    >>> s = bytes(64)
    >>> share_band(s, s), share_band(s, s[:4] + bytes([1]) * 60), share_band(s, None)
    (True, False, False)
    """
    if a is None or b is None or len(a) != HEADER + BINS or len(b) != HEADER + BINS:
        return False
    ka, kb = keys_of(sketch_bins([a, b]), bands)
    return bool(np.any(ka == kb))


def nibbles_of(bins: np.ndarray) -> np.ndarray:
    """(n, 7) uint32: the low nibbles of bins 0..55, eight to a word (bin 8w + i at bits 4i)."""
    lo = (np.asarray(bins, dtype=np.uint8)[:, :NIBBLE_BINS] & np.uint8(0x0F)).astype(np.uint32)
    lo = lo.reshape(-1, WORDS, 8) << (np.arange(8, dtype=np.uint32) * np.uint32(4))
    return np.ascontiguousarray(np.bitwise_or.reduce(lo, axis=2), dtype=np.uint32)


def nibble_agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Agreeing nibbles between rows of packed nibbles ``a`` (n, 7) and ``b`` (7,) or (n, 7)."""
    x = (np.asarray(a, dtype=np.uint32) ^ np.asarray(b, dtype=np.uint32))
    x = (x | (x >> np.uint32(1)) | (x >> np.uint32(2)) | (x >> np.uint32(3))) & np.uint32(0x11111111)
    return NIBBLE_BINS - np.bitwise_count(x).sum(axis=-1, dtype=np.int64)


def band_keys(bins: np.ndarray, r: int, b: int) -> np.ndarray:
    """(n, b) uint32 keys of ``b`` bands of ``r`` bins (bins ``[j r, (j + 1) r)``), mixed to 32
    bits: the general form the benchmark compares (:class:`BandIndex` uses r = 2, exact 16-bit
    keys, the same equalities)."""
    bins = np.ascontiguousarray(bins, dtype=np.uint8)
    packed = np.zeros((bins.shape[0], b), dtype=np.uint64)
    for i in range(r):
        packed |= bins[:, i:r * b:r][:, :b].astype(np.uint64) << np.uint64(8 * i)
    with np.errstate(over="ignore"):
        x = packed + (np.arange(b, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xC4CEB9FE1A85EC53)
        x ^= x >> np.uint64(33)
    return (x >> np.uint64(32)).astype(np.uint32)


def brute_force(query: bytes, ids: Sequence[int], sketches: Sequence[bytes], verify: float = DEFAULT_VERIFY,
                bands: int = DEFAULT_BANDS) -> list[tuple[int, int]]:
    """What :meth:`BandIndex.search` returns, by a scan: (id, agreeing nibbles) of the pages
    sharing a band key with ``query`` and passing the nibble filter, best first."""
    if not len(ids):
        return []
    q = sketch_bins([query])
    s = sketch_bins(sketches)
    hit = np.any(keys_of(s, bands) == keys_of(q, bands), axis=1)
    agree = nibble_agreement(nibbles_of(s), nibbles_of(q)[0])
    keep = hit & (agree >= nibble_threshold(verify))
    out = [(int(i), int(a)) for i, a, k in zip(ids, agree.tolist(), keep.tolist()) if k]
    return sorted(out, key=lambda m: (-m[1], m[0]))


class BandLevel:
    """An immutable set of pages: ``ids``, packed ``nib`` (n, 7), and per band ``rows`` (the
    rows sorted by the band's key) under ``dirs`` (offsets of the top ``d`` key bits);
    ``keys`` (bands, n) holds the sorted keys when ``d < 16`` (else they are the buckets)."""

    def __init__(self, ids: np.ndarray, nib: np.ndarray, rows: np.ndarray, dirs: np.ndarray,
                 keys: np.ndarray, d: int, name: str) -> None:
        self.ids, self.nib, self.rows, self.dirs, self.keys, self.d, self.name = ids, nib, rows, dirs, keys, d, name
        self.dead: np.ndarray | None = None  # bitmap of deleted rows (uint8), made at the first delete

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    def nbytes(self) -> int:
        parts = (self.ids, self.nib, self.rows, self.dirs, self.keys)
        return sum(int(p.nbytes) for p in parts) + (0 if self.dead is None else int(self.dead.nbytes))

    @classmethod
    def build(cls, ids: np.ndarray, keys: np.ndarray, nib: np.ndarray) -> "BandLevel":
        """From ids (n,), band keys by row (n, bands) and packed nibbles (n, 7)."""
        n, bands = keys.shape
        d = 16 if n >= _FULL_DIRECTORY else max(4, min(16, int(math.ceil(math.log2(n + 1))) - 1))
        rows = np.empty((bands, n), dtype=np.uint32)
        dirs = np.empty((bands, (1 << d) + 1), dtype=np.uint32)
        sorted_keys = np.empty((bands, n) if d < 16 else (0, 0), dtype=np.uint16)
        for j in range(bands):
            col = keys[:, j]
            order = np.argsort(col, kind="stable")
            rows[j] = order
            counts = np.bincount(col >> np.uint16(16 - d), minlength=1 << d)
            dirs[j, 0] = 0
            np.cumsum(counts, out=dirs[j, 1:])
            if d < 16:
                sorted_keys[j] = col[order]
        ids_out = ids.astype(np.uint32) if n == 0 or (int(ids.min()) >= 0 and int(ids.max()) < 0xFFFFFFFF) else ids
        return cls(np.ascontiguousarray(ids_out), np.ascontiguousarray(nib, dtype=np.uint32), rows, dirs,
                   sorted_keys, d, uuid.uuid4().hex[:12])

    def row_keys(self) -> np.ndarray:
        """(n, bands) band keys by row (from the directory or the stored keys)."""
        bands = self.rows.shape[0]
        out = np.empty((self.n, bands), dtype=np.uint16)
        for j in range(bands):
            if self.d < 16:
                sk = np.asarray(self.keys[j])
            else:
                counts = np.diff(np.asarray(self.dirs[j], dtype=np.int64)).astype(np.int64)
                sk = np.repeat(np.arange(1 << 16, dtype=np.uint16), counts)
            out[np.asarray(self.rows[j], dtype=np.int64), j] = sk
        return out

    def live(self) -> np.ndarray:
        if self.dead is None:
            return np.ones(self.n, dtype=bool)
        return np.unpackbits(self.dead, count=self.n, bitorder="little") == 0

    def live_rows(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` are not deleted (their bits only, not the whole bitmap)."""
        if self.dead is None:
            return np.ones(rows.shape[0], dtype=bool)
        return (self.dead[rows >> 3] >> (rows & 7).astype(np.uint8)) & 1 == 0

    def kill(self, rows: np.ndarray) -> int:
        """Mark ``rows`` deleted; returns how many were live."""
        if self.dead is None:
            self.dead = np.zeros((self.n + 7) // 8, dtype=np.uint8)
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        bits = np.left_shift(np.uint8(1), (rows & 7).astype(np.uint8))
        live = (self.dead[rows >> 3] & bits) == 0
        np.bitwise_or.at(self.dead, rows[live] >> 3, bits[live])
        return int(live.sum())

    def dead_count(self) -> int:
        return 0 if self.dead is None else int(np.bitwise_count(self.dead).sum())


class BandIndex:
    """Banded-LSH candidates over verification sketches (module docs).

    verify: the default sketch threshold of :meth:`search` (a query may give another).
    bands: bands of two bins (1..28; default 8: 64 bytes a page).
    delta_limit / merge_ratio: inserts wait in a scanned buffer of this size, then become a
        level; levels merge when a newer one is at least ``1 / merge_ratio`` of the older one.
    """

    def __init__(self, verify: float = DEFAULT_VERIFY, bands: int = DEFAULT_BANDS, *,
                 delta_limit: int = 4096, merge_ratio: int = 4) -> None:
        if not 1 <= bands <= NIBBLE_BINS // ROWS:
            raise ConfigError(f"bands must be between 1 and {NIBBLE_BINS // ROWS}, got {bands}")
        if not 0.0 <= verify <= 1.0:
            raise ConfigError(f"verify must be in [0, 1], got {verify}")
        self.verify, self.bands = float(verify), int(bands)
        self.delta_limit = max(1, int(delta_limit))
        self.merge_ratio = max(2, int(merge_ratio))
        self._levels: list[BandLevel] = []
        self._cap_ids = np.empty(0, dtype=np.int64)
        self._cap_keys = np.empty((0, self.bands), dtype=np.uint16)
        self._cap_nib = np.empty((0, WORDS), dtype=np.uint32)
        self._delta_set(self._cap_ids, self._cap_keys, self._cap_nib)
        self._dead = 0
        self._qkeys = np.empty(self.bands, dtype=np.int64)
        self._qnib = np.empty(WORDS, dtype=np.uint32)
        self._buf = np.empty(1 << 10, dtype=np.int64)
        self._agree = np.empty(1 << 10, dtype=np.int64)
        self.token: str | None = None
        self.path: Path | None = None

    def empty_like(self) -> "BandIndex":
        return BandIndex(self.verify, self.bands, delta_limit=self.delta_limit, merge_ratio=self.merge_ratio)

    # -- size ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(lv.n for lv in self._levels) + int(self._delta_ids.shape[0]) - self._dead

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, (int, np.integer)):
            return False
        return bool(np.any(self._delta_ids == int(id))) or any(self._rows_of(lv, int(id)).shape[0]
                                                             for lv in self._levels)

    @property
    def levels(self) -> list[int]:
        return [lv.n for lv in self._levels]

    def nbytes(self) -> int:
        """Bytes held by the levels (rows, directories, nibbles, ids, dead marks) and the delta."""
        return (sum(lv.nbytes() for lv in self._levels) + self._cap_ids.nbytes + self._cap_keys.nbytes
                + self._cap_nib.nbytes)

    # -- the delta: views of buffers with room to grow (an insert copies only itself) ------
    def _delta_set(self, ids: np.ndarray, keys: np.ndarray, nib: np.ndarray) -> None:
        n = int(ids.shape[0])
        if n > self._cap_ids.shape[0] or not n:
            cap = max(n, 64, min(self.delta_limit, 1 << 16))
            self._cap_ids = np.empty(cap, dtype=np.int64)
            self._cap_keys = np.empty((cap, self.bands), dtype=np.uint16)
            self._cap_nib = np.empty((cap, WORDS), dtype=np.uint32)
        self._cap_ids[:n], self._cap_keys[:n], self._cap_nib[:n] = ids, keys, nib
        self._delta_ids, self._delta_keys, self._delta_nib = self._cap_ids[:n], self._cap_keys[:n], self._cap_nib[:n]

    def _delta_append(self, ids: np.ndarray, keys: np.ndarray, nib: np.ndarray) -> None:
        n0 = int(self._delta_ids.shape[0])
        n1 = n0 + int(ids.shape[0])
        if n1 > self._cap_ids.shape[0]:
            cap = max(n1, 2 * self._cap_ids.shape[0])
            grown = (np.empty(cap, dtype=np.int64), np.empty((cap, self.bands), dtype=np.uint16),
                     np.empty((cap, WORDS), dtype=np.uint32))
            grown[0][:n0], grown[1][:n0], grown[2][:n0] = self._delta_ids, self._delta_keys, self._delta_nib
            self._cap_ids, self._cap_keys, self._cap_nib = grown
        self._cap_ids[n0:n1], self._cap_keys[n0:n1], self._cap_nib[n0:n1] = ids, keys, nib
        self._delta_ids, self._delta_keys, self._delta_nib = self._cap_ids[:n1], self._cap_keys[:n1], self._cap_nib[:n1]

    def _flush(self) -> None:
        """The delta becomes a level (copied: the buffers are reused)."""
        self._levels.append(BandLevel.build(self._delta_ids.copy(), self._delta_keys.copy(), self._delta_nib.copy()))
        self._delta_ids, self._delta_keys, self._delta_nib = (
            self._cap_ids[:0], self._cap_keys[:0], self._cap_nib[:0])

    # -- writes -------------------------------------------------------------------------
    def add(self, id: int, sketch: bytes) -> None:
        """Insert ``sketch`` under ``id`` (remove the id first to replace its sketch)."""
        if not isinstance(sketch, (bytes, bytearray)) or len(sketch) != HEADER + BINS or self.delta_limit <= 1:
            self.add_many([id], [sketch])
            return
        K.sketch_parts(np.frombuffer(sketch, dtype=np.uint8), HEADER, self.bands, WORDS, self._qkeys, self._qnib)
        self._delta_append(np.array([id], dtype=np.int64), self._qkeys.astype(np.uint16)[None, :], self._qnib[None, :])
        if self._delta_ids.shape[0] >= self.delta_limit:
            self._flush()
            self._compact()

    def add_many(self, ids: Sequence[int] | np.ndarray, sketches: Iterable[bytes] | np.ndarray) -> None:
        bins = sketch_bins(sketches)
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids_arr.shape[0] != bins.shape[0]:
            raise ConfigError("ids and sketches differ in length")
        if ids_arr.shape[0] == 1:
            raw = np.frombuffer(bins.tobytes(), dtype=np.uint8)
            K.sketch_parts(raw, 0, self.bands, WORDS, self._qkeys, self._qnib)
            keys, nib = self._qkeys.astype(np.uint16)[None, :], self._qnib[None, :]
        else:
            keys, nib = keys_of(bins, self.bands), nibbles_of(bins)
        if ids_arr.shape[0] >= self.delta_limit:
            self._levels.append(BandLevel.build(ids_arr, keys, nib))
            self._compact()
            return
        self._delta_append(ids_arr, keys, nib)
        if self._delta_ids.shape[0] >= self.delta_limit:
            self._flush()
            self._compact()

    def _compact(self) -> None:
        while len(self._levels) >= 2 and self._levels[-1].n * self.merge_ratio >= self._levels[-2].n:
            newer, older = self._levels.pop(), self._levels.pop()
            self._levels.append(self._merge(older, newer))

    def _merge(self, *levels: BandLevel) -> BandLevel:
        ids, keys, nib = [], [], []
        for lv in levels:
            live = lv.live()
            ids.append(np.asarray(lv.ids, dtype=np.int64)[live])
            keys.append(lv.row_keys()[live])
            nib.append(np.asarray(lv.nib)[live])
            self._dead -= lv.dead_count()
        return BandLevel.build(np.concatenate(ids), np.concatenate(keys), np.concatenate(nib))

    def compact(self) -> None:
        """Merge the delta and every level into one level (dead rows dropped)."""
        if self._delta_ids.shape[0]:
            self._flush()
        if len(self._levels) > 1 or (self._levels and self._levels[0].dead is not None):
            self._levels = [self._merge(*self._levels)]

    @staticmethod
    def _rows_of(lv: BandLevel, id: int, key0: int | None = None) -> np.ndarray:
        """Live rows of ``id`` in a level: among the rows of band 0's bucket of ``key0`` when
        given (the stored sketch's), else a scan of the ids."""
        if id < 0 or (lv.ids.dtype == np.uint32 and id >= 0xFFFFFFFF):
            return np.empty(0, dtype=np.int64)
        if key0 is None:
            rows = np.flatnonzero(np.asarray(lv.ids) == id)
        else:
            b = key0 >> (16 - lv.d)
            cand = np.asarray(lv.rows[0, int(lv.dirs[0, b]):int(lv.dirs[0, b + 1])], dtype=np.int64)
            rows = cand[np.asarray(lv.ids)[cand] == id]
        return rows[lv.live_rows(rows)] if lv.dead is not None and rows.shape[0] else rows

    def remove(self, id: int, sketch: bytes | None = None) -> bool:
        """Delete every sketch stored under ``id``. With ``sketch`` (the one stored under it)
        the rows are found in one bucket per level, else by a scan of the id arrays. Returns
        whether one was stored."""
        id = int(id)
        found = False
        hit = self._delta_ids == id
        if hit.any():
            keep = ~hit
            self._delta_set(self._delta_ids[keep], self._delta_keys[keep], self._delta_nib[keep])
            found = True
        key0 = None
        if sketch is not None and len(sketch) == HEADER + BINS:
            key0 = int(keys_of(sketch_bins([sketch]), 1)[0, 0])
        for lv in self._levels:
            rows = self._rows_of(lv, id, key0)
            if rows.shape[0]:
                self._dead += lv.kill(rows)
                found = True
        if not found and key0 is not None:
            return self.remove(id)  # stored under another sketch than the one given
        return found

    def remove_many(self, ids: Sequence[int], sketches: Sequence[bytes | None]) -> np.ndarray:
        """:meth:`remove` of many (expiry's batches): the rows found in band 0's bucket of each
        given sketch, all levels at once; an id not found there is removed as :meth:`remove`
        does without a sketch. Returns which ids had a sketch stored."""
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        found = np.zeros(ids_arr.shape[0], dtype=bool)
        if not ids_arr.shape[0]:
            return found
        if self._delta_ids.shape[0]:
            hit = np.isin(self._delta_ids, ids_arr)
            if hit.any():
                found |= np.isin(ids_arr, self._delta_ids[hit])
                keep = ~hit
                self._delta_set(self._delta_ids[keep], self._delta_keys[keep], self._delta_nib[keep])
        given = np.array([s is not None and len(s) == HEADER + BINS for s in sketches], dtype=bool)
        where = np.flatnonzero(given)
        if where.shape[0]:
            key0 = keys_of(sketch_bins([bytes(sketches[i] or b"") for i in where.tolist()]), 1)[:, 0].astype(np.int64)
            for lv in self._levels:
                b = key0 >> (16 - lv.d)
                starts = np.asarray(lv.dirs[0], dtype=np.int64)[b]
                counts = np.asarray(lv.dirs[0], dtype=np.int64)[b + 1] - starts
                owner = np.repeat(np.arange(where.shape[0]), counts)  # the bucket rows of every id, at once
                offsets = np.arange(owner.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
                cand = np.asarray(lv.rows[0], dtype=np.int64)[starts[owner] + offsets]
                match = np.asarray(lv.ids)[cand].astype(np.int64) == ids_arr[where][owner]
                rows, owner = cand[match], owner[match]
                alive = lv.live_rows(rows)
                rows, owner = rows[alive], owner[alive]
                if rows.shape[0]:
                    self._dead += lv.kill(rows)
                    found[where[owner]] = True
        for i in np.flatnonzero(~found & given):  # stored under another sketch than the one given
            found[i] = self.remove(int(ids_arr[i]))
        for i in np.flatnonzero(~given):
            found[i] = self.remove(int(ids_arr[i])) or found[i]
        return found

    # -- queries ------------------------------------------------------------------------
    def search(self, sketch: bytes, verify: float | None = None) -> list[tuple[int, int]]:
        """(id, agreeing nibbles of bins 0..55) of every stored page that shares a band key
        with ``sketch`` and passes the nibble filter for ``verify`` (default: the index's),
        best first. Exact for that rule; see the module docs for what it guarantees."""
        if not isinstance(sketch, (bytes, bytearray)) or len(sketch) != HEADER + BINS:
            raise ConfigError(f"sketches must be {HEADER + BINS} bytes (spec version 2)")
        K.sketch_parts(np.frombuffer(sketch, dtype=np.uint8), HEADER, self.bands, WORDS, self._qkeys, self._qnib)
        return self._search(self._qkeys, self._qnib, nibble_threshold(self.verify if verify is None else verify))

    def search_batch(self, sketches: Iterable[bytes] | np.ndarray,
                     verify: float | None = None) -> list[list[tuple[int, int]]]:
        bins = sketch_bins(sketches)
        keys, nib = keys_of(bins, self.bands), nibbles_of(bins)
        thr = nibble_threshold(self.verify if verify is None else verify)
        return [self._search(keys[i], nib[i], thr) for i in range(bins.shape[0])]

    def _search(self, qkeys: np.ndarray, qnib: np.ndarray, thr: int) -> list[tuple[int, int]]:
        found: dict[int, int] = {}
        qkeys = np.ascontiguousarray(qkeys, dtype=np.int64)
        for lv in self._levels:
            dead = lv.dead if lv.dead is not None else _NO_DEAD
            while True:
                c = K.band_probe(qkeys, qnib, lv.rows, lv.dirs, lv.keys, lv.d, lv.nib, dead, thr,
                                 self._buf, self._agree)
                if c <= self._buf.shape[0]:
                    break
                self._buf = np.empty(2 * c, dtype=np.int64)
                self._agree = np.empty(2 * c, dtype=np.int64)
            if c:
                for row, agree in zip(self._buf[:c].tolist(), self._agree[:c].tolist()):
                    found[int(lv.ids[row])] = agree
        if self._delta_ids.shape[0]:
            while True:
                c = K.band_scan(self._delta_keys, self._delta_nib, qkeys, qnib, thr, self._buf, self._agree)
                if c <= self._buf.shape[0]:
                    break
                self._buf = np.empty(2 * c, dtype=np.int64)
                self._agree = np.empty(2 * c, dtype=np.int64)
            for row, agree in zip(self._buf[:c].tolist(), self._agree[:c].tolist()):
                found[int(self._delta_ids[row])] = agree
        return sorted(found.items(), key=lambda m: (-m[1], m[0]))

    # -- persistence --------------------------------------------------------------------
    _PARTS = ("ids", "nib", "rows", "dirs", "keys")

    def save(self, path: str | Path, token: str | None = None) -> None:
        """Write the index as .npy files plus ``manifest.json`` (levels already on disk are
        kept); ``token`` records what store state it matches."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        names = []
        for lv in self._levels:
            names.append(lv.name)
            for part in self._PARTS:
                if not (root / f"{lv.name}.{part}.npy").exists():
                    save_npy(root, f"{lv.name}.{part}", getattr(lv, part))
            dead = root / f"{lv.name}.dead.npy"
            if lv.dead is not None:
                save_npy(root, f"{lv.name}.dead", lv.dead)
            elif dead.exists():
                dead.unlink()
        save_npy(root, "delta_ids", self._delta_ids)
        save_npy(root, "delta_keys", self._delta_keys)
        save_npy(root, "delta_nib", self._delta_nib)
        write_manifest(root, {"format": FORMAT, "verify": self.verify, "bands": self.bands, "levels": names,
                              "d": [lv.d for lv in self._levels], "token": token, "delta_limit": self.delta_limit,
                              "merge_ratio": self.merge_ratio})
        for f in root.glob("*.npy"):
            stem = f.name.split(".")[0]
            if stem and stem not in names and not stem.startswith("delta_"):
                f.unlink()
        self.path = root

    @classmethod
    def open(cls, path: str | Path, *, mmap: bool = True) -> "BandIndex":
        """Open a saved index; levels are memory-mapped (no rebuild)."""
        root = Path(path)
        try:
            manifest = json.loads((root / "manifest.json").read_text())
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                found = manifest.get("format") if isinstance(manifest, dict) else None
                raise StoreError(f"band index {root} has format {found}, expected {FORMAT}")
            idx = cls(float(manifest["verify"]), int(manifest["bands"]), delta_limit=int(manifest["delta_limit"]),
                      merge_ratio=int(manifest["merge_ratio"]))
            mode: Literal["r"] | None = "r" if mmap else None
            for name, d in zip(manifest["levels"], manifest["d"]):
                ids, nib, rows, dirs, keys = (np.load(root / f"{name}.{part}.npy", mmap_mode=mode)
                                              for part in cls._PARTS)
                lv = BandLevel(ids, nib, rows, dirs, keys, int(d), name)
                if lv.rows.shape[0] != idx.bands or lv.nib.shape[1:] != (WORDS,) or lv.dirs.shape[1] != (1 << lv.d) + 1:
                    raise ValueError(f"level {name} does not match the manifest")
                dead = root / f"{name}.dead.npy"
                if dead.exists():
                    lv.dead = np.array(np.load(dead), dtype=np.uint8)
                    if lv.dead.shape != ((lv.n + 7) // 8,):
                        raise ValueError(f"level {name} has a damaged deletion map")
                    idx._dead += lv.dead_count()
                idx._levels.append(lv)
            idx._delta_set(np.load(root / "delta_ids.npy").astype(np.int64),
                           np.load(root / "delta_keys.npy").astype(np.uint16).reshape(-1, idx.bands),
                           np.load(root / "delta_nib.npy").astype(np.uint32).reshape(-1, WORDS))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, NeardupError) as exc:
            raise StoreError(f"band index {root} is missing or damaged ({exc})") from None
        idx.token = manifest.get("token")
        idx.path = root
        return idx


_NO_DEAD = np.zeros(0, dtype=np.uint8)

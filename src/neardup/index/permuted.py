"""Exact Hamming search with permuted sorted tables (Manku, Jain, Das Sarma, WWW 2007, §3).

The 64 bits are split into blocks. Each *table* holds every fingerprint with its bits
permuted so that a chosen group of blocks leads, sorted. If two fingerprints differ in at
most k bits, at most k blocks differ, so for a layout where every choice of k blocks leaves
some table whose leading blocks are all clean, probing each table for the entries that share
the query's leading bits finds every match. :class:`Layout` checks that property when it is
built, so every layout is exact; :func:`choose_layout` picks one from N, k and a memory budget.

:class:`PermutedIndex` is the online index (the Detector's default): levels of immutable
tables (a log-structured merge: a small brute-force *delta* absorbs inserts and is merged
into geometrically growing levels), tombstones for deletes, memory-mapped persistence.
:func:`self_join` and :func:`batch_join` are the batch tools.

>>> idx = PermutedIndex(k=3)
>>> idx.add_many([1, 2, 3], [0xFFFF, 0xFFFE, 0x0F0F_0000_0000_0000])
>>> idx.search(0xFFFF, 3)
[(1, 0), (2, 1)]
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from neardup.errors import ConfigError, NeardupError, StoreError
from neardup.index import _kernels as K
from neardup.index.base import Hit, save_npy, to_words, write_manifest
from neardup.index.layout import Layout, choose_layout

FORMAT_VERSION = 2  # 2: layouts with probe radii (format 1 indexes open as radius 0)
READABLE_FORMATS = (1, 2)


def ranges_concat(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[i], hi[i])`` for all i, vectorised."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return starts + np.arange(total, dtype=np.int64)


def _narrow(a: np.ndarray) -> np.ndarray:
    """int64 offsets or ids as uint32 when they all fit (4 bytes a fingerprint saved on ids,
    half the directory); the kernels read either."""
    if a.shape[0] == 0 or (int(a.min()) >= 0 and int(a.max()) < 1 << 32):
        return a.astype(np.uint32)
    return a


class TableLevel:
    """One immutable set of tables: ``tables[t]`` sorted permuted values, ``ids`` aligned
    with the identity table, ``dirs[t]`` bucket offsets on the top ``d`` bits."""

    def __init__(self, tables: np.ndarray, dirs: np.ndarray, ids: np.ndarray, d: int, name: str) -> None:
        self.tables, self.dirs, self.ids, self.d, self.name = tables, dirs, ids, d, name

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def build(cls, layout: Layout, perm: tuple[np.ndarray, np.ndarray, np.ndarray],
              values: np.ndarray, ids: np.ndarray) -> "TableLevel":
        src, dst, masks = perm
        n = values.shape[0]
        d = layout.directory_bits(n)
        ident = layout.identity_table()
        order = np.argsort(values, kind="stable")
        tables = np.empty((len(layout.tables), n), dtype=np.uint64)
        dirs = np.empty((len(layout.tables), (1 << d) + 1), dtype=np.int64)
        for t in range(len(layout.tables)):
            if t == ident:
                tables[t] = values[order]
            else:
                tables[t] = np.sort(K.permute_many(values, src[t], dst[t], masks))
            dirs[t] = K.build_directory(tables[t], d)
        return cls(tables, _narrow(dirs), _narrow(np.ascontiguousarray(ids[order])), d, uuid.uuid4().hex[:12])


def _words(simhashes: Iterable[int] | np.ndarray) -> np.ndarray:
    """64-bit SimHash values as a flat uint64 array (ints or an array)."""
    if isinstance(simhashes, np.ndarray):
        return np.asarray(simhashes, dtype=np.uint64).reshape(-1)
    return to_words(simhashes, 64)[:, 0]

class PermutedIndex:
    """Online exact Hamming index over 64-bit fingerprints with permuted tables.

    k: the largest distance the tables are built for (queries with a larger k fall back to
        an exact scan). layout: default :func:`choose_layout` for ``expected_n``.
    delta_limit: inserts wait in a brute-force buffer of this size, then become a level;
        levels merge when a newer one is at least ``1 / merge_ratio`` of the older one.
    """

    bits = 64

    def __init__(self, k: int = 3, layout: Layout | None = None, *, expected_n: int = 10**7,
                 delta_limit: int = 4096, merge_ratio: int = 4) -> None:
        self.layout = layout or choose_layout(expected_n, k)
        if self.layout.k < k:
            raise ConfigError(f"layout is built for k={self.layout.k}, less than k={k}")
        self.k = self.layout.k
        self._perm = self.layout.permutation_arrays()
        self._ident = self.layout.identity_table()
        self._leads = self.layout.lead_masks()
        self._radii = self.layout.radius_array()
        self.delta_limit = max(1, delta_limit)
        self.merge_ratio = max(2, merge_ratio)
        self._levels: list[TableLevel] = []
        self._delta_vals = np.empty(0, dtype=np.uint64)
        self._delta_ids = np.empty(0, dtype=np.int64)
        self._dead: set[tuple[int, int]] = set()
        self._dead_ids: set[int] = set()
        self.path: Path | None = None

    # -- size ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(lv.n for lv in self._levels) + int(self._delta_ids.shape[0]) - len(self._dead)

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, (int, np.integer)):
            return False
        return self._find(int(id)) is not None

    def _find(self, id: int) -> int | None:
        """The live value stored under ``id`` (a scan of the id arrays), or None."""
        hit = np.flatnonzero(self._delta_ids == id)
        for pos in hit[::-1]:
            v = int(self._delta_vals[pos])
            if (id, v) not in self._dead:
                return v
        for lv in reversed(self._levels):
            for pos in np.flatnonzero(lv.ids == id):
                v = int(lv.tables[self._ident][pos])
                if (id, v) not in self._dead:
                    return v
        return None

    @property
    def levels(self) -> list[int]:
        """Sizes of the levels, oldest first (delta excluded)."""
        return [lv.n for lv in self._levels]

    def nbytes(self) -> int:
        """Bytes held by tables, directories, ids and the delta."""
        total = sum(lv.tables.nbytes + lv.dirs.nbytes + lv.ids.nbytes for lv in self._levels)
        return total + self._delta_vals.nbytes + self._delta_ids.nbytes

    # -- writes -------------------------------------------------------------------------
    def add(self, id: int, simhash: int) -> None:
        """Insert ``simhash`` under ``id`` (remove an id's old value first to replace it)."""
        if isinstance(simhash, int) and 0 <= simhash < 1 << 64 and isinstance(id, int):  # an online add: no list
            self.add_many(np.array([id], dtype=np.int64), np.array([simhash], dtype=np.uint64))
        else:
            self.add_many([id], [simhash])

    def add_many(self, ids: Sequence[int] | np.ndarray, simhashes: Iterable[int] | np.ndarray) -> None:
        values = _words(simhashes)
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids_arr.shape[0] != values.shape[0]:
            raise ConfigError("ids and simhashes differ in length")
        if self._dead:
            keep = np.ones(values.shape[0], dtype=bool)
            for i, (id_, v) in enumerate(zip(ids_arr.tolist(), values.tolist())):
                if (id_, v) in self._dead:  # re-adding a deleted pair revives the stored copy
                    self._dead.discard((id_, v))
                    keep[i] = False
            self._dead_ids = {i for i, _ in self._dead}
            values, ids_arr = values[keep], ids_arr[keep]
        if values.shape[0] >= self.delta_limit:
            self._levels.append(TableLevel.build(self.layout, self._perm, values, ids_arr))
            self._compact()
            return
        self._delta_vals = np.concatenate([self._delta_vals, values])
        self._delta_ids = np.concatenate([self._delta_ids, ids_arr])
        if self._delta_vals.shape[0] >= self.delta_limit:
            self._flush_delta()

    def remove(self, id: int, simhash: int | None = None) -> bool:
        """Delete ``id``. Without ``simhash`` its current value is looked up (a scan of the
        id arrays); with it, the caller vouches that it is the id's current value."""
        value = self._find(int(id)) if simhash is None else int(simhash)
        if value is None:
            return False
        hit = np.flatnonzero((self._delta_ids == id) & (self._delta_vals == np.uint64(value)))
        if hit.shape[0]:
            keep = np.ones(self._delta_ids.shape[0], dtype=bool)
            keep[hit] = False
            self._delta_ids, self._delta_vals = self._delta_ids[keep], self._delta_vals[keep]
            return True
        self._dead.add((int(id), value))
        self._dead_ids.add(int(id))
        return True

    def _flush_delta(self) -> None:
        if self._delta_vals.shape[0]:
            self._levels.append(TableLevel.build(self.layout, self._perm, self._delta_vals, self._delta_ids))
            self._delta_vals = np.empty(0, dtype=np.uint64)
            self._delta_ids = np.empty(0, dtype=np.int64)
        self._compact()

    def _compact(self) -> None:
        while len(self._levels) >= 2 and self._levels[-1].n * self.merge_ratio >= self._levels[-2].n:
            new, old = self._levels.pop(), self._levels.pop()
            self._levels.append(self._merge([old, new]))

    def _merge(self, levels: list[TableLevel]) -> TableLevel:
        values = np.concatenate([lv.tables[self._ident] for lv in levels])
        ids = np.concatenate([lv.ids for lv in levels])
        if self._dead:
            cand = np.flatnonzero(np.isin(ids, np.fromiter(self._dead_ids, dtype=np.int64)))
            keep = np.ones(ids.shape[0], dtype=bool)
            for pos in cand:
                pair = (int(ids[pos]), int(values[pos]))
                if pair in self._dead:
                    keep[pos] = False
                    self._dead.discard(pair)
            self._dead_ids = {i for i, _ in self._dead}
            values, ids = values[keep], ids[keep]
        return TableLevel.build(self.layout, self._perm, values, ids)

    def optimize(self) -> None:
        """Merge everything (delta included) into one level, purging deleted entries."""
        if self._delta_vals.shape[0]:
            self._levels.append(TableLevel.build(self.layout, self._perm, self._delta_vals, self._delta_ids))
            self._delta_vals = np.empty(0, dtype=np.uint64)
            self._delta_ids = np.empty(0, dtype=np.int64)
        if len(self._levels) > 1 or self._dead:
            self._levels = [self._merge(self._levels)] if self._levels else []

    # -- queries ------------------------------------------------------------------------
    def search(self, simhash: int, k: int) -> list[Hit]:
        """All ``(id, distance)`` with ``distance <= k``, nearest first, then by id."""
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        if k > self.k:  # beyond what the tables answer: exact scans
            _, ids, dist = self.search_arrays(np.array([int(simhash)], dtype=np.uint64), k)
            return sorted(set(zip(ids.tolist(), dist.tolist())), key=lambda m: (m[1], m[0]))
        q = int(simhash)  # a Python int (as int64): the cheapest argument for numba to type
        if q >= 1 << 63:
            q -= 1 << 64
        out = np.empty((3, 32), dtype=np.int64)
        while True:  # one compiled call per level, results into ``out`` (regrown when it overflows)
            c = self._probe(q, k, out)
            if c <= out.shape[1]:
                break
            out = np.empty((3, c), dtype=np.int64)
        if c == 0:
            return []
        if c == 1 and not self._dead:
            return [(int(out[0, 0]), int(out[2, 0]))]
        rows = out[:, :c].tolist()
        found: Iterable[tuple[int, int]] = zip(rows[0], rows[2])
        if self._dead:
            dead = self._dead
            found = [(i, d) for i, v, d in zip(rows[0], rows[1], rows[2])
                     if (i, v & 0xFFFF_FFFF_FFFF_FFFF) not in dead]
        return sorted(set(found), key=lambda m: (m[1], m[0]))

    def _probe(self, q: int, k: int, out: np.ndarray) -> int:
        src, dst, masks = self._perm
        c = 0
        for lv in self._levels:
            pm, pc = self.layout.probe_masks(lv.d)
            c = K.probe_one(lv.tables, lv.dirs, lv.d, src, dst, masks, self._leads, self._radii, pm, pc,
                            self._ident, lv.ids, q, k, out, c)
        if self._delta_vals.shape[0]:
            c = K.scan_one(self._delta_vals, self._delta_ids, q, k, out, c)
        return c

    def search_arrays(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised batch search: (query index, id, distance) arrays, unsorted, unique."""
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        queries = np.ascontiguousarray(queries, dtype=np.uint64).reshape(-1)
        parts_q, parts_id, parts_d = [], [], []
        src, dst, masks = self._perm
        for lv in self._levels:
            if k <= self.k:
                pm, pc = self.layout.probe_masks(lv.d)
                qi, ids, vals, dist = K.search_ids(lv.tables, lv.dirs, lv.d, src, dst, masks, self._leads,
                                                   self._radii, pm, pc, self._ident, lv.ids, queries, k)
            else:
                qi, pos, dist = K.scan(lv.tables[self._ident], queries, k)
                ids, vals = lv.ids[pos].astype(np.int64), lv.tables[self._ident][pos]
            if qi.shape[0] == 0:
                continue
            if self._dead:
                qi, ids, dist = self._drop_dead(qi, ids, vals, dist)
            parts_q.append(qi)
            parts_id.append(ids)
            parts_d.append(dist)
        if self._delta_vals.shape[0]:
            qi, pos, dist = K.scan(self._delta_vals, queries, k)
            parts_q.append(qi)
            parts_id.append(self._delta_ids[pos])
            parts_d.append(dist)
        if not parts_q:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        return np.concatenate(parts_q), np.concatenate(parts_id), np.concatenate(parts_d)

    def _drop_dead(self, q: np.ndarray, ids: np.ndarray, vals: np.ndarray, d: np.ndarray):
        keep = np.ones(ids.shape[0], dtype=bool)
        for i in np.flatnonzero(np.isin(ids, np.fromiter(self._dead_ids, dtype=np.int64))):
            if (int(ids[i]), int(vals[i])) in self._dead:
                keep[i] = False
        return q[keep], ids[keep], d[keep]

    def search_batch(self, simhashes: Sequence[int] | np.ndarray, k: int) -> list[list[Hit]]:
        """:meth:`search` for many queries at once (one vectorised pass per level)."""
        queries = _words(simhashes)
        qi, ids, dist = self.search_arrays(queries, k)
        out: list[list[Hit]] = [[] for _ in range(queries.shape[0])]
        if qi.shape[0]:
            order = np.lexsort((ids, dist, qi))
            seen: set[tuple[int, int]] = set()
            for q, i, d in zip(qi[order].tolist(), ids[order].tolist(), dist[order].tolist()):
                if (q, i) not in seen:
                    seen.add((q, i))
                    out[q].append((i, d))
        return out

    def items(self) -> Iterator[tuple[int, int]]:
        """Every live ``(id, simhash)``."""
        for lv in self._levels:
            for i, v in zip(lv.ids.tolist(), lv.tables[self._ident].tolist()):
                if (i, v) not in self._dead:
                    yield i, v
        yield from zip(self._delta_ids.tolist(), self._delta_vals.tolist())

    # -- persistence --------------------------------------------------------------------
    def save(self, path: str | Path, token: str | None = None) -> None:
        """Write the index as .npy files plus ``manifest.json`` (levels already on disk are
        kept, so saving after a few inserts writes only the delta). ``token`` records what
        store state the index matches (:func:`neardup.index.permuted.save_index`)."""
        pass

        save_index(self, Path(path), token)

    @classmethod
    def open(cls, path: str | Path, *, mmap: bool = True) -> "PermutedIndex":
        """Open a saved index; tables are memory-mapped (no rebuild, pages load on demand;
        :func:`neardup.index.permuted.open_index`)."""
        pass

        return open_index(cls, Path(path), mmap)

    token: str | None = None


# -- the index on disk: .npy levels, memory-mapped ----------------------------------------------


def save_index(idx: PermutedIndex, root: Path, token: str | None) -> None:
    """Write ``idx`` under ``root`` (levels already there are kept)."""
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for lv in idx._levels:
        names.append(lv.name)
        for part in ("tables", "dirs", "ids"):
            if not (root / f"{lv.name}.{part}.npy").exists():
                save_npy(root, f"{lv.name}.{part}", getattr(lv, part))
    pairs = sorted(idx._dead)
    dead = np.zeros((len(pairs), 2), dtype=np.int64)
    if pairs:
        dead[:, 0] = np.array([i for i, _ in pairs], dtype=np.int64)
        dead[:, 1] = np.array([v for _, v in pairs], dtype=np.uint64).view(np.int64)
    save_npy(root, "delta", np.stack([idx._delta_ids, idx._delta_vals.view(np.int64)]))
    save_npy(root, "dead", dead)
    write_manifest(root, {"format": FORMAT_VERSION, "layout": idx.layout.to_dict(), "levels": names,
                          "d": [lv.d for lv in idx._levels], "token": token, "delta_limit": idx.delta_limit,
                          "merge_ratio": idx.merge_ratio})
    for f in root.glob("*.npy"):
        stem = f.name.split(".")[0]
        if stem not in names and stem not in ("delta", "dead"):
            f.unlink()
    idx.path = root


def open_index(cls: type[PermutedIndex], root: Path, mmap: bool) -> PermutedIndex:
    """The index saved under ``root``; a missing or damaged one is a :class:`StoreError`."""
    try:
        manifest = json.loads((root / "manifest.json").read_text())
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not a JSON object")
        if manifest.get("format") not in READABLE_FORMATS:
            raise StoreError(f"index {root} has format {manifest.get('format')}, expected {FORMAT_VERSION}")
        layout = Layout.from_dict(manifest["layout"])
        idx = cls(k=layout.k, layout=layout, delta_limit=manifest["delta_limit"],
                  merge_ratio=manifest["merge_ratio"])
        mode: Literal["r"] | None = "r" if mmap else None
        for name, d in zip(manifest["levels"], manifest["d"]):
            idx._levels.append(TableLevel(np.load(root / f"{name}.tables.npy", mmap_mode=mode),
                                      np.load(root / f"{name}.dirs.npy", mmap_mode=mode),
                                      np.load(root / f"{name}.ids.npy", mmap_mode=mode), int(d), name))
        delta = np.load(root / "delta.npy")
        idx._delta_ids = delta[0].astype(np.int64)
        idx._delta_vals = delta[1].view(np.uint64).copy()
        dead = np.load(root / "dead.npy")
        idx._dead = {(int(i), int(v)) for i, v in zip(dead[:, 0], dead[:, 1].view(np.uint64))}
        idx._dead_ids = {i for i, _ in idx._dead}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, NeardupError) as exc:
        raise StoreError(f"index {root} is missing or damaged ({exc})") from None
    idx.token = manifest.get("token")
    idx.path = root
    return idx

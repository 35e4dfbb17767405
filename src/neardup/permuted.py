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

import functools
import itertools
import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neardup import _index_kernels as K
from neardup.errors import ConfigError
from neardup.index import Match, to_words

FORMAT_VERSION = 2  # 2: layouts with probe radii (format 1 indexes open as radius 0)
READABLE_FORMATS = (1, 2)
MAX_DIRECTORY_BITS = 24


def _split(total: int, parts: int) -> tuple[int, ...]:
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def probes(bits: int, radius: int) -> int:
    """How many ``bits``-bit keys lie within ``radius`` of one key (the buckets one table probes)."""
    return sum(math.comb(bits, i) for i in range(max(-1, min(radius, bits)) + 1))


_MIN_DIRECTORY_BITS = 1  # tests raise it to give small levels the wide keys of large ones
MAX_PROBES = 1 << 16  # keys one table may probe (layouts probing more are not candidates)
MAX_CHECK_VECTORS = 1 << 22  # error patterns enumerated by the exactness check of a layout with radii


@dataclass(frozen=True)
class Layout:
    """Blocks (widths, most significant first, summing to 64), per table the blocks that
    lead, and per table a probe radius (default 0 everywhere: Manku's layouts). A table finds
    every pair that differs in at most ``radius`` bits of its leading blocks (it probes every
    key within that radius of the query's); the layout is exact for distance ``k`` when every
    way of spreading k differing bits over the blocks leaves some table within its radius.
    Raises :class:`ConfigError` unless it is.

    With radius 0 this is Manku's condition (some table's leading blocks are all clean); one
    block per table with radius ``k // m`` is multi-index hashing (Norouzi, Punjani, Fleet:
    of m substrings, some differs in at most ``k // m`` bits; refined, ``k % m + 1`` tables
    need that radius and the others one less).

    >>> Layout.combinations(k=3, blocks=4).tables
    ((0,), (1,), (2,), (3,))
    >>> Layout.multi_index(k=7, parts=4).radii
    (1, 1, 1, 1)
    >>> Layout.multi_index(k=9, parts=4).radii
    (2, 2, 1, 1)
    >>> Layout(k=3, blocks=(32, 32), tables=((0,), (1,)))
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: layout is not exact for k=3: an error in blocks (0, 1) escapes every table
    >>> Layout(k=3, blocks=(32, 32), tables=((0,), (1,)), radii=(1, 0))
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: layout is not exact for k=3: 2, 1 differing bits in blocks (0, 1) escape every table
    """

    k: int
    blocks: tuple[int, ...]
    tables: tuple[tuple[int, ...], ...]
    radii: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(int(w) for w in self.blocks))
        object.__setattr__(self, "tables", tuple(tuple(int(b) for b in t) for t in self.tables))
        if not self.radii:
            object.__setattr__(self, "radii", (0,) * len(self.tables))
        object.__setattr__(self, "radii", tuple(int(r) for r in self.radii))
        if not 0 <= self.k < 64:
            raise ConfigError(f"k must be between 0 and 63, got {self.k}")
        if sum(self.blocks) != 64 or any(w <= 0 for w in self.blocks):
            raise ConfigError(f"block widths must be positive and sum to 64, got {self.blocks}")
        if not self.tables:
            raise ConfigError("a layout needs at least one table")
        if len(self.radii) != len(self.tables) or any(r < 0 for r in self.radii):
            raise ConfigError(f"need one radius >= 0 per table, got {self.radii} for {len(self.tables)} tables")
        nb = len(self.blocks)
        for lead in self.tables:
            if not lead or len(set(lead)) != len(lead) or any(not 0 <= b < nb for b in lead):
                raise ConfigError(f"bad leading blocks {lead} for {nb} blocks")
        if self.identity_table() is None:
            raise ConfigError("a layout needs one table led by blocks 0..m (the identity order)")
        if not any(self.radii):
            for dirty in itertools.combinations(range(nb), min(self.k, nb)):
                if not any(not set(lead) & set(dirty) for lead in self.tables):
                    raise ConfigError(f"layout is not exact for k={self.k}: an error in blocks {dirty} "
                                      "escapes every table")
            return
        escape = self._escape()
        if escape is not None:
            raise ConfigError(f"layout is not exact for k={self.k}: {', '.join(map(str, escape))} differing bits "
                              f"in blocks {tuple(range(nb))} escape every table")

    def _escape(self) -> tuple[int, ...] | None:
        """The fewest differing bits per block that put every table beyond its radius, when
        they add up to at most k (the layout then misses such a pair), else None. Enumerates
        every pattern with 0..(largest radius + 1) bits per block (more never matters),
        vectorised."""
        nb = len(self.blocks)
        leads = [b for lead in self.tables for b in lead]
        if len(leads) == len(set(leads)):  # disjoint leads (multi-index hashing): in closed form
            if any(self.lead_bits(t) <= r for t, r in enumerate(self.radii)):
                return None  # that table covers every pair
            escape = [0] * nb
            for lead, r in zip(self.tables, self.radii):
                need = r + 1
                for b in lead:
                    escape[b] = min(need, self.blocks[b])
                    need -= escape[b]
            return tuple(escape) if sum(escape) <= self.k else None
        caps = [min(w, max(self.radii) + 1) for w in self.blocks]
        if math.prod(c + 1 for c in caps) > MAX_CHECK_VECTORS:
            raise ConfigError(f"cannot verify a layout with radii over {nb} blocks "
                              f"({math.prod(c + 1 for c in caps)} patterns)")
        axes = [np.arange(c + 1, dtype=np.int16) for c in caps]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, nb)
        member = np.zeros((nb, len(self.tables)), dtype=np.int16)
        for t, lead in enumerate(self.tables):
            member[list(lead), t] = 1
        beyond = np.all(grid @ member > np.array(self.radii, dtype=np.int16), axis=1)
        if not beyond.any():
            return None
        total = grid.sum(axis=1, dtype=np.int64)
        total[~beyond] = 1 << 30
        worst = int(np.argmin(total))
        return tuple(int(e) for e in grid[worst]) if total[worst] <= self.k else None

    @classmethod
    def combinations(cls, k: int, blocks: int) -> "Layout":
        """``blocks`` near-equal blocks; one table per choice of ``blocks - k`` leading blocks."""
        if not 0 <= k < blocks <= 64:
            raise ConfigError(f"need 0 <= k < blocks <= 64, got k={k}, blocks={blocks}")
        widths = _split(64, blocks)
        leads = tuple(itertools.combinations(range(blocks), blocks - k))
        return cls(k=k, blocks=widths, tables=leads)

    @classmethod
    def multi_index(cls, k: int, parts: int) -> "Layout":
        """Multi-index hashing: ``parts`` near-equal substrings, one table each. With
        ``k = parts * r + a``, the first ``a + 1`` tables probe radius ``r`` and the others
        ``r - 1`` (if all of those exceeded their radius there would be at least k + 1
        differing bits); at ``k < parts`` that is Manku's ``k + 1`` tables of one block."""
        if not 1 <= parts <= 64 or not 0 <= k < 64:
            raise ConfigError(f"need 1 <= parts <= 64 and 0 <= k < 64, got parts={parts}, k={k}")
        r, a = divmod(k, parts)
        radii = [r] * (a + 1) + [r - 1] * (parts - a - 1)
        keep = [t for t in range(parts) if radii[t] >= 0]
        return cls(k=k, blocks=_split(64, parts), tables=tuple((t,) for t in keep),
                   radii=tuple(radii[t] for t in keep))

    def identity_table(self) -> int | None:
        for t, lead in enumerate(self.tables):
            if tuple(sorted(lead)) == tuple(range(len(lead))):
                return t
        return None

    def lead_bits(self, t: int) -> int:
        return sum(self.blocks[b] for b in self.tables[t])

    def lead_masks(self) -> np.ndarray:
        """Per table, the mask of its leading blocks' bits in the original bit order."""
        shifts = [64 - sum(self.blocks[: b + 1]) for b in range(len(self.blocks))]
        out = np.zeros(len(self.tables), dtype=np.uint64)
        for t, lead in enumerate(self.tables):
            m = 0
            for b in lead:
                m |= ((1 << self.blocks[b]) - 1) << shifts[b]
            out[t] = m
        return out

    def radius_array(self) -> np.ndarray:
        return np.array(self.radii, dtype=np.int64)

    def directory_bits(self, n: int) -> int:
        """Key width of a level of ``n`` entries: buckets of about 4 entries (the directory
        stays under ~1 byte per fingerprint and table), within the narrowest lead."""
        lead = min(self.lead_bits(t) for t in range(len(self.tables)))
        return max(1, min(lead, MAX_DIRECTORY_BITS, max(_MIN_DIRECTORY_BITS, int(math.ceil(math.log2(n + 1))) - 2)))

    def probe_masks(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """(masks (tables x most probes), counts per table): the ``d``-bit key masks of
        weight <= each table's radius, 0 first."""
        return _probe_masks(self.radii, d)

    def permutation_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src shifts (T, B), dst shifts (T, B), block masks (B,)) for the kernels."""
        nb = len(self.blocks)
        src_shift = [64 - sum(self.blocks[: b + 1]) for b in range(nb)]
        masks = np.array([(1 << w) - 1 for w in self.blocks], dtype=np.uint64)
        src = np.zeros((len(self.tables), nb), dtype=np.int64)
        dst = np.zeros((len(self.tables), nb), dtype=np.int64)
        for t, lead in enumerate(self.tables):
            order = sorted(lead) + [b for b in range(nb) if b not in lead]
            top = 64
            for b in order:
                top -= self.blocks[b]
                src[t, b] = src_shift[b]
                dst[t, b] = top
        return src, dst, masks

    def bytes_per_fingerprint(self) -> float:
        """What :func:`choose_layout` charges: 8 bytes per table plus 8 for the id."""
        return 8.0 * len(self.tables) + 8.0

    def query_cost(self, n: int) -> float:
        """Expected work of one query against ``n`` entries (about ns on one core): per table,
        the probed buckets (a random directory and table read each) and their entries (a
        sequential read and a popcount each)."""
        d = self.directory_bits(n)
        per_bucket = max(n, 1) / 2.0 ** d
        return sum(probes(d, r) * (PROBE_NS + ENTRY_NS * per_bucket) for r in self.radii)

    def join_cost(self, n: int) -> float:
        """Expected work of a self-join of ``n`` values (each table built and joined in turn):
        per table, every entry's probed buckets and the pairs they hold."""
        d = max(1, min(min(self.lead_bits(t) for t in range(len(self.tables))), MAX_DIRECTORY_BITS,
                       int(math.ceil(math.log2(n + 1)))))
        per_bucket = max(n, 1) / 2.0 ** d
        pair_cost = JOIN_PROBE_NS + JOIN_PAIR_NS * per_bucket * per_bucket
        return sum(SORT_NS * n + min(n, 2 ** d) * probes(d, r) / 2 * pair_cost for r in self.radii)

    def batch_cost(self, q: int, block: int = 1 << 20) -> float:
        """Expected work of :func:`batch_join` per *stored* fingerprint (about ns of CPU) with
        tables on ``q`` distinct queries: per table, the stored value is permuted and
        counting-sorted into its block, and every probed query bucket costs a directory read
        (shared by the stored bucket's ``block / 2**d`` entries) plus a comparison with each
        of its ``q / 2**d`` entries. Unlike :meth:`query_cost` a probe is cheap (the stored
        side arrives sorted, so bucket reads are near each other) and the pairs dominate."""
        d = self.directory_bits(q)
        share = min(1.0, 2.0 ** d / max(block, 1))  # non-empty stored buckets per stored value
        per_bucket = max(q, 1) / 2.0 ** d
        return sum(BATCH_SORT_NS + probes(d, r) * (BATCH_PROBE_NS * share + BATCH_PAIR_NS * per_bucket)
                   for r in self.radii)

    def describe(self) -> str:
        """A short name: tables x lead bits and radii, e.g. ``4x16 r=1,1,1,1``."""
        leads = sorted({self.lead_bits(t) for t in range(len(self.tables))})
        return f"{len(self.tables)}x{'/'.join(map(str, leads))} r={','.join(map(str, self.radii))}"

    def to_dict(self) -> dict:
        return {"k": self.k, "blocks": list(self.blocks), "tables": [list(t) for t in self.tables],
                "radii": list(self.radii)}

    @classmethod
    def from_dict(cls, data: dict) -> "Layout":
        return cls(k=int(data["k"]), blocks=tuple(data["blocks"]), tables=tuple(tuple(t) for t in data["tables"]),
                   radii=tuple(data.get("radii") or ()))


# cost model constants (ns on the 2-core development machine): a probed bucket costs about a
# random memory read (directory and first table line, overlapped across buckets); an entry a
# sequential read, XOR and popcount
PROBE_NS = 30.0
ENTRY_NS = 3.0
JOIN_PROBE_NS = 4.0  # self-join: directory reads near each other, mostly cached
SORT_NS = 30.0  # self-join: permute and sort, per value and table
JOIN_PAIR_NS = 1.0  # self-join: a pair of entries compared, both in cache
BATCH_SORT_NS = 60.0  # batch join: permute and counting-sort a stored value, per table
BATCH_PROBE_NS = 10.0  # batch join: a query bucket's bounds read for a stored bucket
BATCH_PAIR_NS = 1.0  # batch join: a query entry compared with a stored one (XOR, popcount)


@functools.lru_cache(maxsize=256)
def _probe_masks(radii: tuple[int, ...], d: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.array([probes(d, r) for r in radii], dtype=np.int64)
    out = np.zeros((len(radii), int(counts.max())), dtype=np.int64)
    for t, r in enumerate(radii):
        parts = [np.zeros(1, dtype=np.int64)]
        for w in range(1, min(r, d) + 1):
            combos = np.array(list(itertools.combinations(range(d), w)), dtype=np.int64)
            parts.append(np.bitwise_or.reduce(np.left_shift(np.int64(1), combos), axis=1))
        row = np.concatenate(parts)
        out[t, : row.shape[0]] = row
    out.setflags(write=False)
    counts.setflags(write=False)
    return out, counts


@functools.lru_cache(maxsize=64)
def candidate_layouts(k: int) -> tuple[Layout, ...]:
    """Every exact layout :func:`choose_layout` weighs for ``k``: Manku's combinations of
    ``k + 1 .. k + 6`` blocks (at most 64 tables), multi-index hashing over 1..k + 1
    substrings, and combinations of 2..6 blocks with a radius (at most 20 tables)."""
    if not 0 <= k < 64:
        raise ConfigError(f"k must be between 0 and 63, got {k}")
    out: dict[tuple, Layout] = {}

    def keep(layout: Layout) -> None:
        out.setdefault((layout.blocks, layout.tables, layout.radii), layout)

    for blocks in range(k + 1, min(64, k + 6) + 1):
        if math.comb(blocks, k) > 64:
            break
        keep(Layout.combinations(k, blocks))
    for parts in range(1, min(64, k + 1) + 1):
        layout = Layout.multi_index(k, parts)
        if all(probes(min(layout.lead_bits(t), MAX_DIRECTORY_BITS), r) <= MAX_PROBES
               for t, r in enumerate(layout.radii)):
            keep(layout)
    for blocks in range(3, 7):
        for lead in range(2, blocks):
            tables = tuple(itertools.combinations(range(blocks), lead))
            # the adversary spreads k evenly: the lead blocks of every table then hold r bits
            q, a = divmod(k, blocks)
            r = lead * q + max(0, lead - blocks + a)
            if len(tables) > 20 or r > 4:
                continue
            try:
                keep(Layout(k=k, blocks=_split(64, blocks), tables=tables, radii=(r,) * len(tables)))
            except ConfigError:  # not exact after all (uneven block widths)
                continue
    return tuple(out.values())


def choose_layout(n: int, k: int = 3, bytes_per_fingerprint: float = 40.0) -> Layout:
    """The exact layout with the cheapest queries (:meth:`Layout.query_cost`: probed buckets
    and expected entries at ``n``) among those whose tables fit ``bytes_per_fingerprint``
    (8 bytes per table plus 8 for the id); fewer tables on a tie. Without one that fits, the
    smallest.

    >>> choose_layout(10**6, k=3).describe()            # Manku: 4 tables of 16-bit leads
    '4x16 r=0,0,0,0'
    >>> choose_layout(10**6, k=7).describe()            # multi-index hashing, radius 1
    '4x16 r=1,1,1,1'
    >>> choose_layout(10**7, k=7).describe()            # fewer, wider tables as N grows
    '3x21/22 r=2,2,1'
    >>> choose_layout(10**7, k=7, bytes_per_fingerprint=16).describe()  # none fits: the smallest
    '2x32 r=3,3'
    """
    candidates = candidate_layouts(k)
    fitting = [c for c in candidates if c.bytes_per_fingerprint() <= bytes_per_fingerprint]
    if not fitting:
        return min(candidates, key=lambda c: (c.bytes_per_fingerprint(), c.query_cost(n)))
    return min(fitting, key=lambda c: (round(c.query_cost(n), 6), len(c.tables)))


def choose_join_layout(n: int, k: int) -> Layout:
    """The exact layout with the cheapest self-join of ``n`` values (:meth:`Layout.join_cost`);
    tables are built one at a time, so memory does not limit their number."""
    return min(candidate_layouts(k), key=lambda c: (round(c.join_cost(n), 6), len(c.tables)))


def choose_batch_layout(q: int, k: int, block: int = 1 << 20) -> Layout:
    """The exact layout with the cheapest :func:`batch_join` of ``q`` queries
    (:meth:`Layout.batch_cost`, per streamed stored fingerprint); the tables hold only the
    queries, so memory does not limit their number.

    >>> choose_batch_layout(10**6, 3).describe()
    '4x16 r=0,0,0,0'
    >>> choose_batch_layout(10**6, 7).describe()
    '4x16 r=1,1,1,1'
    """
    return min(candidate_layouts(k), key=lambda c: (round(c.batch_cost(q, block), 6), len(c.tables)))


def _expand(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
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


class _Level:
    """One immutable set of tables: ``tables[t]`` sorted permuted values, ``ids`` aligned
    with the identity table, ``dirs[t]`` bucket offsets on the top ``d`` bits."""

    def __init__(self, tables: np.ndarray, dirs: np.ndarray, ids: np.ndarray, d: int, name: str) -> None:
        self.tables, self.dirs, self.ids, self.d, self.name = tables, dirs, ids, d, name

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def build(cls, layout: Layout, perm: tuple[np.ndarray, np.ndarray, np.ndarray],
              values: np.ndarray, ids: np.ndarray) -> "_Level":
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
        self._levels: list[_Level] = []
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
            self._levels.append(_Level.build(self.layout, self._perm, values, ids_arr))
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
            self._levels.append(_Level.build(self.layout, self._perm, self._delta_vals, self._delta_ids))
            self._delta_vals = np.empty(0, dtype=np.uint64)
            self._delta_ids = np.empty(0, dtype=np.int64)
        self._compact()

    def _compact(self) -> None:
        while len(self._levels) >= 2 and self._levels[-1].n * self.merge_ratio >= self._levels[-2].n:
            new, old = self._levels.pop(), self._levels.pop()
            self._levels.append(self._merge([old, new]))

    def _merge(self, levels: list[_Level]) -> _Level:
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
        return _Level.build(self.layout, self._perm, values, ids)

    def optimize(self) -> None:
        """Merge everything (delta included) into one level, purging deleted entries."""
        if self._delta_vals.shape[0]:
            self._levels.append(_Level.build(self.layout, self._perm, self._delta_vals, self._delta_ids))
            self._delta_vals = np.empty(0, dtype=np.uint64)
            self._delta_ids = np.empty(0, dtype=np.int64)
        if len(self._levels) > 1 or self._dead:
            self._levels = [self._merge(self._levels)] if self._levels else []

    # -- queries ------------------------------------------------------------------------
    def search(self, simhash: int, k: int) -> list[Match]:
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

    def search_batch(self, simhashes: Sequence[int] | np.ndarray, k: int) -> list[list[Match]]:
        """:meth:`search` for many queries at once (one vectorised pass per level)."""
        queries = _words(simhashes)
        qi, ids, dist = self.search_arrays(queries, k)
        out: list[list[Match]] = [[] for _ in range(queries.shape[0])]
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
        store state the index matches (:func:`neardup.permuted_files.save_index`)."""
        from neardup.permuted_files import save_index

        save_index(self, Path(path), token)

    @classmethod
    def open(cls, path: str | Path, *, mmap: bool = True) -> "PermutedIndex":
        """Open a saved index; tables are memory-mapped (no rebuild, pages load on demand;
        :func:`neardup.permuted_files.open_index`)."""
        from neardup.permuted_files import open_index

        return open_index(cls, Path(path), mmap)

    token: str | None = None

"""The permuted tables' layout and cost model: blocks, probes, directory bits."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from neardup.errors import ConfigError

MAX_DIRECTORY_BITS = 24


def _split(total: int, parts: int) -> tuple[int, ...]:
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def probes(bits: int, radius: int) -> int:
    """How many ``bits``-bit keys lie within ``radius`` of one key (the buckets one table probes)."""
    return sum(math.comb(bits, i) for i in range(max(-1, min(radius, bits)) + 1))


MIN_DIRECTORY_BITS = 1  # tests raise it to give small levels the wide keys of large ones


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
        return max(1, min(lead, MAX_DIRECTORY_BITS, max(MIN_DIRECTORY_BITS, int(math.ceil(math.log2(n + 1))) - 2)))

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



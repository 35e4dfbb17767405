"""The Spark job's blocking shuffle (:mod:`neardup.batch.spark.job`, stage 4): candidate pairs of digest
groups from the sketch-band and pigeonhole SimHash blocks, with packed rows.

Each group's blocking rows (:func:`neardup.batch.blocks.block_rows`: 8 band keys, ``min(k, 3) + 1``
SimHash keys) go to the reducer that owns their key. Instead of one Spark row per blocking
row (a key, a node id and a payload: about 60 bytes with Spark's row format, 485 bytes a
fingerprint at 10^6), a map task packs the rows it sends to one reducer into one binary
value (:func:`pack`): keys sorted and delta-coded, the group's node id (8 bytes, the rank a
giant block is windowed by), and the payload the pair filter reads: the 28 bytes of nibbles
of a band row, the 8-byte SimHash of a SimHash row; zlib at level 1 over it. A reducer
unpacks its values, and a compiled scan (:func:`pairs_of_blocks`) walks every block: every
pair of a block of at most ``max_bucket`` groups, a window of ``window`` in node order in a
larger one (:func:`neardup.batch.blocks.bucket_pairs`), band pairs kept when their nibbles may reach
the threshold, SimHash pairs when within ``min(k, PIGEON_K)`` (as
:func:`neardup.batch.blocks.candidate_pairs`), without building the pairs it drops.

>>> import numpy as np
>>> raw = pack(np.array([5, 3], dtype=np.int64), np.array([7, 9], dtype=np.int64),
...            np.zeros((2, 7), dtype=np.uint32), np.array([2], dtype=np.int64), np.array([1], dtype=np.int64),
...            np.array([6], dtype=np.uint64))
>>> [a.tolist() for a in unpack(raw)][:3]
[[3, 5], [9, 7], [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]]]
"""

from __future__ import annotations

import functools
import itertools
import math
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from neardup._numba import popcount64
from neardup.batch.blocks import PIGEON_K, block_rows, sketch_matrix
from neardup.errors import ConfigError
from neardup.index.bands import NIBBLE_BINS, WORDS, far_verify, nibble_threshold, nibbles_of
from neardup.index.layout import Layout, candidate_layouts, probes

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

BLOB_SCHEMA = "r long, blob binary"
PAIR_SCHEMA = "ga long, gb long"
#: blocking rows a map task holds before it packs and sends them
FLUSH_ROWS = 1 << 21
#: candidate pairs a reducer builds at a time
CHUNK_PAIRS = 1 << 22


def _bytes(x: Any) -> bytes | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else bytes(x)


def reducer_of(keys: np.ndarray, partitions: int) -> np.ndarray:
    """The reducer (0 .. partitions - 1) owning each blocking key: a multiplicative hash."""
    mixed = (np.asarray(keys).view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
    return (mixed % np.uint64(partitions)).astype(np.int64)


def pack(band_keys: np.ndarray, band_nodes: np.ndarray, nibbles: np.ndarray, sim_keys: np.ndarray,
         sim_nodes: np.ndarray, sims: np.ndarray) -> bytes:
    """One reducer's blocking rows from one map task as bytes (module docs)."""
    parts = [np.array([band_keys.shape[0], sim_keys.shape[0]], dtype=np.int64).tobytes()]
    for keys, nodes, pay in ((band_keys, band_nodes, nibbles), (sim_keys, sim_nodes, sims)):
        order = np.argsort(keys, kind="stable")
        k = keys[order]
        parts += [np.diff(k, prepend=np.int64(0)).tobytes(), nodes[order].tobytes(),
                  np.ascontiguousarray(pay[order]).tobytes()]
    return zlib.compress(b"".join(parts), 1)


def unpack(blob: bytes) -> tuple[np.ndarray, ...]:
    """:func:`pack`'s arrays: band keys, nodes, nibbles (n, 7), SimHash keys, nodes, values."""
    raw = zlib.decompress(blob)
    nb, ns = np.frombuffer(raw[:16], dtype=np.int64).tolist()
    out: list[np.ndarray] = []
    pos = 16
    for n, width, dtype in ((nb, WORDS, np.uint32), (ns, 1, np.uint64)):
        keys = np.cumsum(np.frombuffer(raw, dtype=np.int64, count=n, offset=pos))
        pos += 8 * n
        nodes = np.frombuffer(raw, dtype=np.int64, count=n, offset=pos)
        pos += 8 * n
        pay = np.frombuffer(raw, dtype=dtype, count=n * width, offset=pos)
        pos += pay.nbytes
        out += [keys, nodes, pay.reshape(n, WORDS) if width > 1 else pay]
    return tuple(out)


def pack_rows(k: int, bands: bool, partitions: int, slots: list[int],
              batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """Digest groups (``node, simhash, sketch``) -> packed blocking rows: ``r`` (a value that
    Spark's hash partitioning sends to reducer ``p``: ``slots[p]``) and ``blob``."""
    import pandas as pd

    held: list[tuple[np.ndarray, ...]] = []
    count = 0

    def flush() -> Iterator["pd.DataFrame"]:
        keys = np.concatenate([h[0] for h in held])
        nodes = np.concatenate([h[1] for h in held])
        nib = np.concatenate([h[2] for h in held])
        sims = np.concatenate([h[3] for h in held])
        band = keys < 0  # band keys carry the top bit
        owner = reducer_of(keys, partitions)
        rs, blobs = [], []
        for p in np.unique(owner).tolist():
            b, s = band & (owner == p), ~band & (owner == p)
            blobs.append(pack(keys[b], nodes[b], nib[b], keys[s], nodes[s], sims[s]))
            rs.append(slots[p])
        yield pd.DataFrame({"r": np.array(rs, dtype=np.int64), "blob": blobs})

    for batch in batches:
        if not len(batch):
            continue
        sims = np.asarray(batch["simhash"], dtype=np.int64).view(np.uint64)
        bins, ok = sketch_matrix([_bytes(x) for x in batch["sketch"]])
        owner, keys = block_rows(sims, bins if bands else None, ok, k, bands)
        nib = nibbles_of(bins)
        held.append((keys, batch["node"].to_numpy(np.int64)[owner], nib[owner], sims[owner]))
        count += keys.shape[0]
        if count >= FLUSH_ROWS:
            yield from flush()
            held, count = [], 0
    if held:
        yield from flush()


_LOW = np.uint64(0x1111111111111111)


@njit(cache=True, nogil=True)
def _scan(starts: np.ndarray, nodes: np.ndarray, band: bool, nib: np.ndarray, sims: np.ndarray, thr: int, maxd: int,
          max_bucket: int, window: int, first: int, row: int, out_a: np.ndarray,
          out_b: np.ndarray) -> tuple[int, int, int]:  # pragma: no cover (compiled)
    """Kept pairs of blocks ``first``.. (block b: rows ``starts[b]:starts[b + 1]``, sorted by
    node), from row ``row`` of block ``first`` on, into ``out_a``/``out_b`` until the
    pairs of the next row may not fit: (pairs written, next block, next row in it). Band
    rows: ``nib`` (n, 4) uint64 packed nibbles (:func:`wide_nibbles`), kept at ``thr``
    agreeing; SimHash rows: ``sims`` within ``maxd``."""
    cap = out_a.shape[0]
    words = nib.shape[1]
    c = 0
    for blk in range(first, starts.shape[0] - 1):
        s, e = starts[blk], starts[blk + 1]
        m = e - s
        if m < 2:
            continue
        i0 = row if blk == first and row > s else s
        for i in range(i0, e):
            reach = e - 1 - i if m <= max_bucket else min(window, e - 1 - i)
            if c + reach > cap:
                return c, blk, i
            last = i + 1 + reach
            if band:
                for j in range(i + 1, last):
                    z = 0
                    for w in range(words):
                        q = nib[i, w] ^ nib[j, w]
                        z += popcount64((q | (q >> np.uint64(1)) | (q >> np.uint64(2)) | (q >> np.uint64(3))) & _LOW)
                    if NIBBLE_BINS - z >= thr:
                        out_a[c], out_b[c] = nodes[i], nodes[j]
                        c += 1
            else:
                si = sims[i]
                for j in range(i + 1, last):
                    if popcount64(si ^ sims[j]) <= maxd:
                        out_a[c], out_b[c] = nodes[i], nodes[j]
                        c += 1
    return c, starts.shape[0] - 1, 0


def wide_nibbles(nib: np.ndarray) -> np.ndarray:
    """(n, 7) uint32 nibbles (:func:`neardup.index.bands.nibbles_of`) as (n, 4) uint64, the last
    word's high half zero (equal, so never counted as differing)."""
    out = np.zeros((nib.shape[0], 8), dtype=np.uint32)
    out[:, :WORDS] = nib
    return out.view(np.uint64)


def pairs_of_blocks(keys: np.ndarray, nodes: np.ndarray, band: bool, nib: np.ndarray, sims: np.ndarray, thr: int,
                    maxd: int, max_bucket: int, window: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Kept candidate pairs (node a < node b, repeats possible) of the blocks of one kind of
    rows (``band``: nibbles ``nib`` filtered at ``thr`` agreeing; else SimHash values
    ``sims`` within ``maxd``), in chunks of at most :data:`CHUNK_PAIRS` (a block larger than
    a chunk is resumed at the row it stopped at); a group's repeated rows in a block count once."""
    if keys.shape[0] < 2:
        return
    order = np.lexsort((nodes, keys))
    keys, nodes = keys[order], nodes[order]
    fresh = np.r_[True, (keys[1:] != keys[:-1]) | (nodes[1:] != nodes[:-1])]
    order, keys, nodes = order[fresh], keys[fresh], nodes[fresh]
    nib = wide_nibbles(nib[order]) if band else np.zeros((1, 4), dtype=np.uint64)
    sims = np.zeros(1, dtype=np.uint64) if band else np.ascontiguousarray(sims[order])
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1], True]).astype(np.int64)
    cap = max(CHUNK_PAIRS, int(window), int(np.diff(starts).max(initial=1)))  # room for one row's pairs
    out_a, out_b = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    blk, row = 0, 0
    while blk < starts.shape[0] - 1:
        c, blk, row = _scan(starts, nodes, band, nib, sims, thr, maxd, max_bucket, window, blk, row, out_a, out_b)
        if c:
            yield np.minimum(out_a[:c], out_b[:c]), np.maximum(out_a[:c], out_b[:c])


def reduce_blocks(k: int, verify: float | None, max_bucket: int, window: int,
                  batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """One reducer's packed blocking rows -> candidate pairs of groups (``ga < gb``) that
    pass the filters of :func:`neardup.batch.blocks.candidate_pairs`, each once per reducer."""
    import pandas as pd

    parts = [unpack(bytes(b)) for batch in batches for b in batch["blob"]]
    if not parts:
        return
    cols = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    runs = []
    if verify is not None:
        thr = nibble_threshold(min(float(verify), far_verify(verify) or 1.0))
        runs.append((cols[0], cols[1], True, cols[2], cols[5][:0], thr))
    runs.append((cols[3], cols[4], False, cols[2][:0], cols[5], 0))
    del parts
    for keys, nodes, band, nib, sims, thr in runs:
        for a, b in pairs_of_blocks(keys, nodes, band, nib, sims, thr, min(k, PIGEON_K), max_bucket, window):
            code = np.unique(np.stack([a, b], axis=1), axis=0)
            yield pd.DataFrame({"ga": code[:, 0], "gb": code[:, 1]})


def partition_slots(spark: Any, partitions: int) -> list[int]:
    """For each reducer p, a long that Spark's hash partitioning into ``partitions`` sends to
    p (``pmod(hash(r), partitions) == p``), so packed rows land where they are addressed."""
    from pyspark.sql import functions as F

    got = (spark.range(0, 64 * partitions + 64).select("id", F.expr(f"pmod(hash(id), {partitions})").alias("p"))
           .groupBy("p").agg(F.min("id").alias("id")).collect())
    slots = {int(r.p): int(r.id) for r in got}
    if len(slots) < partitions:  # pragma: no cover (64 draws a slot always fill them)
        raise RuntimeError("could not address every partition")
    return [slots[p] for p in range(partitions)]


def candidate_groups(reps: "DataFrame", *, k: int, verify: float | None, bands: bool, max_bucket: int, window: int,
                     partitions: int) -> "DataFrame":
    """Candidate pairs (``ga < gb``: the groups' node ids) of digest groups (``node,
    simhash, sketch``), each once: one packed shuffle of the blocking rows (module docs),
    then a shuffle of the pairs kept (distinct)."""
    slots = partition_slots(reps.sparkSession, partitions)
    blobs = reps.select("node", "simhash", "sketch").mapInPandas(
        functools.partial(pack_rows, k, bands, partitions, slots), BLOB_SCHEMA)
    return (blobs.repartition(partitions, "r")
            .mapInPandas(functools.partial(reduce_blocks, k, verify, max_bucket, window), PAIR_SCHEMA)
            .distinct())


#: cost of one exploded row against one candidate pair met in a bucket (both are shuffled
#: rows; a candidate is also verified in Python)
ROW_COST = 1.0
PAIR_COST = 2.0
MAX_SPARK_PROBES = 4096  # probe keys per table and row at most


# -- exact_k: the permuted tables' lead keys with radius probes ----------------------------

@functools.lru_cache(maxsize=128)
def probe_masks(bits: int, radius: int) -> np.ndarray:
    """Every ``bits``-wide mask of at most ``radius`` set bits (0 first)."""
    out = [0]
    for w in range(1, radius + 1):
        out.extend(sum(1 << b for b in c) for c in itertools.combinations(range(bits), w))
    return np.array(out, dtype=np.uint64)


def spark_cost(layout: Layout, n: int) -> float:
    """Shuffled rows and candidate pairs of the blocking join over ``n`` fingerprints: each
    stored row once per table, each probing row once per probe key; pairs in a bucket."""
    rows = pairs = 0.0
    for t, r in enumerate(layout.radii):
        bits = layout.lead_bits(t)
        p = probes(bits, r)
        rows += n * (1 + p)
        pairs += n * n / 2.0 * p / 2.0 ** bits
    return ROW_COST * rows + PAIR_COST * pairs


def choose_spark_layout(n: int, k: int) -> Layout:
    """The exact layout (:func:`neardup.index.layout.candidate_layouts`) with the cheapest
    blocking join (:func:`spark_cost`) among those probing at most
    :data:`MAX_SPARK_PROBES` keys a table.

    >>> choose_spark_layout(1000, 3).describe()
    '4x16 r=0,0,0,0'
    """
    ok = [c for c in candidate_layouts(k)
          if all(probes(c.lead_bits(t), r) <= MAX_SPARK_PROBES for t, r in enumerate(c.radii))]
    return min(ok, key=lambda c: (round(spark_cost(c, max(n, 1)), 3), len(c.tables)))


def lead_keys(layout: Layout, values: np.ndarray) -> np.ndarray:
    """(n, tables) lead keys: per table, the bits of its leading blocks, concatenated."""
    values = np.asarray(values, dtype=np.uint64)
    shifts = [64 - sum(layout.blocks[: b + 1]) for b in range(len(layout.blocks))]
    out = np.zeros((values.shape[0], len(layout.tables)), dtype=np.uint64)
    for t, lead in enumerate(layout.tables):
        key = np.zeros(values.shape[0], dtype=np.uint64)
        for b in sorted(lead):
            w = layout.blocks[b]
            key = (key << np.uint64(w)) | ((values >> np.uint64(shifts[b])) & np.uint64((1 << w) - 1))
        out[:, t] = key
    return out


def first_table(layout: Layout, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair, the first table whose lead keys are within its radius (-1: none)."""
    ka, kb = lead_keys(layout, a), lead_keys(layout, b)
    diff = np.bitwise_count(ka ^ kb)
    ok = diff <= np.array(layout.radii, dtype=np.uint8)[None, :]
    return np.where(ok.any(axis=1), ok.argmax(axis=1), -1)


def u64(col: Any) -> np.ndarray:
    return np.asarray(col, dtype=np.int64).view(np.uint64)


def _explode_tables(layout: Layout, probing: bool, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    import pandas as pd

    for batch in batches:
        keys = lead_keys(layout, u64(batch["simhash"]))
        digests = batch["digest"].to_numpy()
        for t, r in enumerate(layout.radii):
            masks = probe_masks(layout.lead_bits(t), r) if probing else np.zeros(1, dtype=np.uint64)
            kk = (keys[:, t][:, None] ^ masks[None, :]).reshape(-1)
            yield pd.DataFrame({"t": np.full(kk.shape[0], t, dtype=np.int32), "key": kk.view(np.int64),
                                "digest": np.repeat(digests, masks.shape[0])})



def probe_pairs(reps: "DataFrame", k: int, layout: Layout | None) -> "DataFrame":
    """``exact_k``: pairs ``a < b`` (digests) within ``k`` by the permuted tables' lead keys
    with radius probes (each pair by its first table only)."""
    from pyspark.sql import functions as F

    layout = layout or choose_spark_layout(reps.count(), k)
    if layout.k < k:
        raise ConfigError(f"layout is built for k={layout.k}, less than k={k}")
    base = reps.select("digest", "simhash")
    keyed = "t int, key long, digest string"
    stored = base.mapInPandas(functools.partial(_explode_tables, layout, False), keyed)
    probing = (base.mapInPandas(functools.partial(_explode_tables, layout, True), keyed)
               if any(layout.radii) else stored)
    within = (probing.withColumnRenamed("digest", "a")
              .join(stored.withColumnRenamed("digest", "b"), ["t", "key"])
              .where(F.col("a") < F.col("b")).select("a", "b", "t"))
    side_a = reps.select(F.col("digest").alias("a"), F.col("simhash").alias("simhash_a"))
    side_b = reps.select(F.col("digest").alias("b"), F.col("simhash").alias("simhash_b"))
    return (within.join(side_a, "a").join(side_b, "b")
            .mapInPandas(functools.partial(_first_table, layout, k), "a string, b string"))



def _first_table(layout: Layout, k: int, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """Lead-key candidates -> the pairs within ``k``, each kept by its first table only."""
    for batch in batches:
        a, b = u64(batch["simhash_a"]), u64(batch["simhash_b"])
        keep = (first_table(layout, a, b) == batch["t"].to_numpy()) & (np.bitwise_count(a ^ b) <= k)
        yield batch.loc[keep, ["a", "b"]]

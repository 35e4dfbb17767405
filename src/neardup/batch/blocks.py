"""The batch blocking scheme: pigeonhole keys over SimHash blocks, bucket caps, candidate pairs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neardup.index.bands import (
    DEFAULT_BANDS,
    NIBBLE_BINS,
    banded,
    far_verify,
    keys_of,
    nibble_threshold,
    nibbles_of,
    sketch_bins,
)
from neardup.matching import Match, Side, match


def sketch_matrix(sketches: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
    """(n, 60) bins of the sketches (zeros where none) and whether each has band keys."""
    ok = np.array([banded(s) for s in sketches], dtype=bool)
    bins = np.zeros((len(sketches), 60), dtype=np.uint8)
    if ok.any():
        bins[ok] = sketch_bins([s for s, o in zip(sketches, ok) if o])  # type: ignore[misc]
    return bins, ok


#: SimHash blocking by pigeonhole keys is exact up to this k (C(k + 2, 2) keys a fingerprint:
#: 10 at k = 3); beyond it the batch job adds the permuted tables' exact self-join at k, and
#: Spark relies on the bands unless asked for its radius probes (docs/batch.md)
PIGEON_K = 3


#: a block (band key or SimHash key) holding more groups than its cap is not compared
#: pairwise: its groups are ordered by node id (a hash) and each is compared with the next
#: :data:`WINDOW` ones only (:func:`bucket_pairs`). The cap is this base plus what density
#: alone puts in a block (:func:`bucket_cap`)
MAX_BUCKET = 256


WINDOW = 4


#: the narrowest blocking keys hold 16 bits (a band key; a pigeonhole block at k = 3), so N
#: random groups put about N / 65,536 in a block
KEY_SPACE = 1 << 16


#: a block is windowed only past this many times the groups density alone puts there
DENSITY_SLACK = 2


def bucket_cap(groups: int, base: int = MAX_BUCKET) -> int:
    """The largest block (in groups) compared pairwise when ``groups`` digest groups are
    blocked: ``base`` plus :data:`DENSITY_SLACK` times the ``groups / 65,536`` a 16-bit block
    holds on random pages. On keys spread like random ones, density alone never windows a
    block (a Poisson block of mean m stays under 2m + 256 with a margin of many standard
    deviations at any N), so the candidates stay the Detector's at 10^8 and 10^9 groups; a key
    far more common than that (a template's band, a trap) is windowed; a crawler trap's block (10^5
    copies sharing a key) is windowed below about 3 10^9 groups. Pairwise work grows as
    N^2 / 131,072 checks a kind of block: 7.6 10^6 at 10^6 groups, 7.6 10^10 at 10^8.

    >>> bucket_cap(10**6), bucket_cap(10**7), bucket_cap(10**9)
    (288, 562, 30774)
    """
    return int(base) + DENSITY_SLACK * -(-max(0, int(groups)) // KEY_SPACE)


def pigeon_blocks(k: int) -> list[tuple[int, int]]:
    """(shift, width) of the ``k + 1`` blocks the 64 bits are cut into for the pigeonhole keys."""
    m = k + 1
    widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
    out, pos = [], 64
    for w in widths:
        pos -= w
        out.append((pos, w))
    return out


def pigeon_keys(values: np.ndarray, k: int) -> np.ndarray:
    """(n, k + 1) uint64 SimHash blocking keys, one per block of :func:`pigeon_blocks`
    (values within ``k`` bits differ in at most ``k`` blocks, so they share an equal one).
    The block's number sits in bits 56..62, so keys of different blocks never collide (and
    bit 63, the band keys' mark, stays clear); k <= 3 keeps every block within 56 bits."""
    values = np.asarray(values, dtype=np.uint64)
    cols = [(np.uint64(p) << np.uint64(56)) | ((values >> np.uint64(sx)) & np.uint64((1 << wx) - 1))
            for p, (sx, wx) in enumerate(pigeon_blocks(k))]
    return np.stack(cols, axis=1)


def block_rows(simhash: np.ndarray, bins: np.ndarray | None, has_sketch: np.ndarray | None, k: int,
               bands: bool) -> tuple[np.ndarray, np.ndarray]:
    """Blocking rows of n digest groups: (row -> group, row key as int64). Keys of the 8 sketch
    bands (bit 63 set, band j in bits 16..18; groups without a sketch have none) when
    ``bands``, then the pigeonhole SimHash keys at ``min(k, PIGEON_K)``: at most 12 rows a
    group."""
    n = simhash.shape[0]
    owners, keys = [], []
    if bands and bins is not None:
        bk = keys_of(bins, DEFAULT_BANDS).astype(np.uint64)
        ok = np.ones(n, dtype=bool) if has_sketch is None else np.asarray(has_sketch, dtype=bool)
        for j in range(DEFAULT_BANDS):
            owners.append(np.flatnonzero(ok))
            keys.append(((np.uint64(1) << np.uint64(63)) | (np.uint64(j) << np.uint64(16)) | bk[ok, j]).view(np.int64))
    pk = pigeon_keys(simhash, min(k, PIGEON_K))
    for j in range(pk.shape[1]):
        owners.append(np.arange(n))
        keys.append(pk[:, j].view(np.int64))
    if not owners:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(owners).astype(np.int64), np.concatenate(keys)


def bucket_pairs(keys: np.ndarray, rank: np.ndarray, max_bucket: int = MAX_BUCKET,
                 window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs of rows (positions into ``keys``) sharing a key: every pair of a
    bucket of at most ``max_bucket`` rows; in a larger bucket each row with the next
    ``window`` rows in the order of ``rank`` (distinct int64 per row: the group's node id,
    a hash). Linear in the rows beyond that size. What it costs: a pair whose only shared
    block is a giant one is found when the two sit within ``window`` of each other in that
    order; the copies of a trap are near one another, so each is linked to its neighbours
    and the cluster stays one (connected components need a spanning set of edges, not every
    pair)."""
    m = keys.shape[0]
    if m < 2:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.lexsort((rank, keys))
    sk = keys[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    sizes = np.diff(np.r_[starts, m])
    pa, pb = [], []
    for s in np.unique(sizes[(sizes > 1) & (sizes <= max_bucket)]).tolist():
        st = starts[sizes == s]
        ia, ib = np.triu_indices(s, 1)
        pa.append((st[:, None] + ia[None, :]).reshape(-1))
        pb.append((st[:, None] + ib[None, :]).reshape(-1))
    for st, s in zip(starts[sizes > max_bucket].tolist(), sizes[sizes > max_bucket].tolist()):
        for d in range(1, window + 1):  # a sorted window: row i with rows i + 1 .. i + window
            pa.append(np.arange(st, st + s - d))
            pb.append(np.arange(st + d, st + s))
    if not pa:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    a, b = np.concatenate(pa), np.concatenate(pb)
    return order[a], order[b]


def candidate_pairs(simhash: np.ndarray, bins: np.ndarray | None, has_sketch: np.ndarray | None, rank: np.ndarray,
                    k: int, verify: float | None, bands: bool, max_bucket: int = MAX_BUCKET,
                    window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Distinct candidate pairs (i < j) of groups from the blocks (:func:`block_rows`): a
    band pair is kept when its nibbles may reach ``verify`` (lossless for the sketch), a
    SimHash pair when within ``min(k, PIGEON_K)``."""
    owner, keys = block_rows(simhash, bins, has_sketch, k, bands)
    ra, rb = bucket_pairs(keys, rank[owner], max_bucket, window)
    a, b = owner[ra], owner[rb]
    banded = keys[ra] < 0  # band keys carry the top bit
    keep = ~banded
    if banded.any() and bins is not None and verify is not None:
        nib = nibbles_of(bins)
        x = nib[a[banded]] ^ nib[b[banded]]
        x = (x | (x >> np.uint32(1)) | (x >> np.uint32(2)) | (x >> np.uint32(3))) & np.uint32(0x11111111)
        agree = NIBBLE_BINS - np.bitwise_count(x).sum(axis=1, dtype=np.int64)
        keep[banded] = agree >= nibble_threshold(min(float(verify), far_verify(verify) or 1.0))
    if (~banded).any():
        sv = np.asarray(simhash, dtype=np.uint64)
        d = np.bitwise_count(sv[a[~banded]] ^ sv[b[~banded]])
        keep[~banded] = d <= min(k, PIGEON_K)
    a, b = a[keep], b[keep]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    code = np.unique(lo.astype(np.int64) * np.int64(max(1, simhash.shape[0])) + hi)
    n = np.int64(max(1, simhash.shape[0]))
    return code // n, code % n


def decide_pair(a: Side, b: Side, k: int, verify: float | None, bits: int = 64) -> Match:
    """The Detector's decision for a candidate pair of digest groups: within ``k`` the
    SimHash path's (``match(k, verify)``), beyond it the bands' (``match(bits,
    far_verify(verify))``; the title guard of :func:`neardup.matching.far_match`, which
    needs hosts and titles, is applied to the groups' nodes: a far pair links nodes as a
    short pair does)."""
    if (a.simhash ^ b.simhash).bit_count() <= k:
        return match(a, b, k, verify)
    return match(a, b, bits, far_verify(verify))



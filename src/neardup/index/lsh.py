"""MinHash LSH: bands of MinHash signatures (:mod:`neardup.fingerprint.minhash`) in hash tables.

LSH banding cuts the signature into ``bands`` bands of ``rows`` values; two pages are
candidates when they agree on a whole band, which happens with probability
``1 - (1 - J**rows)**bands`` (the S-curve). :func:`optimal_bands` picks (bands, rows) for a
Jaccard threshold by weighing the false-positive area under the curve below the threshold
against the false-negative area above it. :class:`MinHashLSH` verifies candidates with the
signature estimate and returns them ranked by score.

>>> from neardup.fingerprint.minhash import MinHashConfig, minhash_text
>>> cfg = MinHashConfig(num_perm=128)
>>> a = minhash_text(" ".join(f"w{i}" for i in range(300)), cfg)
>>> b = minhash_text(" ".join(f"w{i}" for i in range(30, 300)), cfg)
>>> lsh = MinHashLSH(cfg, threshold=0.8)
>>> lsh.add(1, a.signature); lsh.query(b.signature)[0][0]
1
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from neardup.errors import ConfigError
from neardup.fingerprint import _minhash_kernels as K
from neardup.fingerprint.minhash import MinHashConfig, containment

#: removed rows an LSH keeps before packing its live rows (:meth:`MinHashLSH.remove`)
RECLAIM_MIN = 64


def candidate_probability(s: np.ndarray | float, bands: int, rows: int) -> np.ndarray | float:
    """The S-curve: probability that two pages of Jaccard ``s`` share a band."""
    return 1.0 - (1.0 - np.power(s, rows)) ** bands


@lru_cache(maxsize=256)
def optimal_bands(threshold: float, num_perm: int, fp_weight: float = 0.5,
                  fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) with bands x rows <= num_perm minimising
    ``fp_weight x FP area + fn_weight x FN area`` around ``threshold``.

    >>> optimal_bands(0.8, 128)
    (9, 13)
    """
    if not 0.0 < threshold < 1.0:
        raise ConfigError(f"threshold must be between 0 and 1, got {threshold}")
    lo = np.linspace(0.0, threshold, 201)
    hi = np.linspace(threshold, 1.0, 201)
    best: tuple[float, int, int] | None = None
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            fp = np.trapezoid(candidate_probability(lo, bands, rows), lo)
            fn = np.trapezoid(1.0 - candidate_probability(hi, bands, rows), hi)
            err = fp_weight * fp + fn_weight * fn
            if best is None or err < best[0] - 1e-12:
                best = (err, bands, rows)
    assert best is not None
    return best[1], best[2]


class _BandLevel:
    """Immutable sorted band keys with the row each came from."""

    def __init__(self, keys: np.ndarray, rows: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.rows = rows[order].astype(np.uint32) if rows.size and rows.max() < 2**32 else rows[order]

    @property
    def n(self) -> int:
        return int(self.keys.shape[0])

    def lookup(self, qkeys: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(self.keys, qkeys, "left")
        hi = np.searchsorted(self.keys, qkeys, "right")
        hit = hi > lo
        if not hit.any():
            return np.empty(0, dtype=np.int64)
        lo, hi = lo[hit], hi[hit]
        counts = hi - lo
        starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
        return self.rows[starts + np.arange(int(counts.sum()))].astype(np.int64)


class MinHashLSH:
    """LSH index over MinHash signatures: candidates share a band, verified by the
    signature estimate, ranked by score.

    The banding is chosen by :func:`optimal_bands` with false negatives weighted 9:1 over
    false positives (every candidate is verified, so a false positive costs only time):
    at threshold 0.8 and 128 permutations, 14 bands of 9 rows find 97.5% of the pairs
    at Jaccard 0.85 (9 x 13, the even weighting, finds 69%).

    Memory per page: the signature (4 x num_perm bytes) plus 12 bytes per band (a 64-bit
    band key and a 32-bit row), e.g. 512 + 168 bytes at num_perm 128 with 14 bands. Removed
    (and replaced) pages leave dead rows until there are more of them than live ones (and
    at least :data:`RECLAIM_MIN`): then the live rows are packed and the bands rebuilt, so
    the rows held stay under ``2 x live + RECLAIM_MIN`` (amortised O(1) per removal)."""

    def __init__(self, config: MinHashConfig | None = None, *, threshold: float = 0.8,
                 bands: int | None = None, rows: int | None = None, fp_weight: float = 0.1,
                 fn_weight: float = 0.9, delta_limit: int = 2048) -> None:
        self.config = config or MinHashConfig()
        self.threshold = float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"threshold must be between 0 and 1, got {threshold}")
        if bands is None or rows is None:
            if bands is not None or rows is not None:
                raise ConfigError("give both bands and rows, or neither")
            bands, rows = optimal_bands(min(max(self.threshold, 0.01), 0.99), self.config.num_perm,
                                        fp_weight, fn_weight)
        if bands < 1 or rows < 1 or bands * rows > self.config.num_perm:
            raise ConfigError(f"bands x rows must be at most num_perm={self.config.num_perm}, got {bands} x {rows}")
        self.bands, self.rows = int(bands), int(rows)
        self.delta_limit = max(1, delta_limit)
        p = self.config.num_perm
        self._sigs = np.zeros((1024, p), dtype=np.uint32)
        self._sizes = np.zeros(1024, dtype=np.int64)
        self._ids = np.zeros(1024, dtype=np.int64)
        self._alive = np.zeros(1024, dtype=bool)
        self._n_rows = 0
        self._row_of: dict[int, int] = {}
        self._levels: list[_BandLevel] = []
        self._delta_keys = np.zeros((self.delta_limit, self.bands), dtype=np.uint64)
        self._delta_rows: list[int] = []

    def __len__(self) -> int:
        return len(self._row_of)

    @property
    def held_rows(self) -> int:
        """Rows held, live and removed (what :meth:`nbytes` counts)."""
        return self._n_rows

    def __contains__(self, id: object) -> bool:
        return id in self._row_of

    def nbytes(self) -> int:
        """Bytes of signatures, ids, band keys and rows held (dict overhead excluded)."""
        n = self._n_rows
        total = n * (self._sigs.shape[1] * 4 + 8 + 8 + 1)
        total += sum(lv.keys.nbytes + lv.rows.nbytes for lv in self._levels)
        return total + len(self._delta_rows) * self.bands * 12

    def _reserve(self, extra: int) -> None:
        need = self._n_rows + extra
        if need <= self._ids.shape[0]:
            return
        cap = max(need, 2 * self._ids.shape[0])
        for name in ("_sigs", "_sizes", "_ids", "_alive"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[: self._n_rows] = old[: self._n_rows]
            setattr(self, name, new)

    def _check(self, signatures: np.ndarray) -> np.ndarray:
        sigs = np.ascontiguousarray(signatures, dtype=np.uint32)
        if sigs.ndim == 0 or sigs.shape[-1] != self.config.num_perm:
            raise ConfigError(f"signature has {sigs.shape[-1] if sigs.ndim else 0} values, this index "
                              f"expects num_perm={self.config.num_perm}")
        return sigs

    def keys(self, signatures: np.ndarray) -> np.ndarray:
        sigs = np.ascontiguousarray(signatures, dtype=np.uint32).reshape(-1, self.config.num_perm)
        return K.band_keys(sigs, self.bands, self.rows)

    def add(self, id: int, signature: np.ndarray, set_size: int = 0) -> None:
        """Insert (or replace) ``id``."""
        self.add_many([id], np.asarray(signature).reshape(1, -1), [set_size])

    def add_many(self, ids: Sequence[int], signatures: np.ndarray, set_sizes: Sequence[int] | None = None) -> None:
        sigs = self._check(signatures).reshape(-1, self.config.num_perm)
        if len(ids) != sigs.shape[0]:
            raise ConfigError("ids and signatures differ in length")
        sizes = list(set_sizes) if set_sizes is not None else [0] * len(ids)
        last = {int(id): i for i, id in enumerate(ids)}  # a repeated id: the last one wins
        if len(last) != len(ids):
            keep = sorted(last.values())
            ids, sigs, sizes = [ids[i] for i in keep], sigs[keep], [sizes[i] for i in keep]
        for id in ids:
            self.remove(int(id))
        n = sigs.shape[0]
        self._reserve(n)
        start = self._n_rows
        rows = np.arange(start, start + n, dtype=np.int64)
        self._sigs[start:start + n] = sigs
        self._sizes[start:start + n] = np.asarray(sizes, dtype=np.int64)
        self._ids[start:start + n] = np.asarray(ids, dtype=np.int64)
        self._alive[start:start + n] = True
        for offset, id in enumerate(ids):
            self._row_of[int(id)] = start + offset
        self._n_rows += n
        keys = self.keys(sigs)
        if n >= self.delta_limit:
            self._levels.append(_BandLevel(keys.reshape(-1), np.repeat(rows, self.bands)))
            self._compact()
            return
        for key_row, row in zip(keys, rows.tolist()):
            self._delta_keys[len(self._delta_rows)] = key_row
            self._delta_rows.append(row)
            if len(self._delta_rows) >= self.delta_limit:
                self._flush()

    def _flush(self) -> None:
        if self._delta_rows:
            n = len(self._delta_rows)
            keys = self._delta_keys[:n].reshape(-1).copy()
            rows = np.repeat(np.asarray(self._delta_rows, dtype=np.int64), self.bands)
            self._levels.append(_BandLevel(keys, rows))
            self._delta_rows = []
        self._compact()

    def _compact(self) -> None:
        while len(self._levels) >= 2 and self._levels[-1].n * 4 >= self._levels[-2].n:
            new, old = self._levels.pop(), self._levels.pop()
            keys = np.concatenate([old.keys, new.keys])
            rows = np.concatenate([old.rows.astype(np.int64), new.rows.astype(np.int64)])
            keep = self._alive[rows]
            self._levels.append(_BandLevel(keys[keep], rows[keep]))

    def remove(self, id: int) -> bool:
        row = self._row_of.pop(int(id), None)
        if row is None:
            return False
        self._alive[row] = False
        live = len(self._row_of)
        if self._n_rows - live > max(RECLAIM_MIN, live):
            self._reclaim()
        return True

    def _reclaim(self) -> None:
        """Pack the live rows to the front and rebuild the bands from their signatures."""
        rows = np.fromiter(sorted(self._row_of.values()), dtype=np.int64, count=len(self._row_of))
        n, cap = int(rows.shape[0]), max(1024, 2 * int(rows.shape[0]))
        for name in ("_sigs", "_sizes", "_ids", "_alive"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[:n] = old[rows]
            setattr(self, name, new)
        self._n_rows = n
        self._row_of = {int(id): i for i, id in enumerate(self._ids[:n].tolist())}
        self._levels, self._delta_rows = [], []
        if n:
            keys = self.keys(self._sigs[:n])
            self._levels.append(_BandLevel(keys.reshape(-1), np.repeat(np.arange(n, dtype=np.int64), self.bands)))

    def candidates(self, signature: np.ndarray) -> np.ndarray:
        """Rows of live pages sharing at least one band with ``signature``."""
        qkeys = self.keys(signature)[0]
        parts = [lv.lookup(qkeys) for lv in self._levels]
        if self._delta_rows:
            dk = self._delta_keys[: len(self._delta_rows)]
            hit = np.flatnonzero((dk == qkeys).any(axis=1))
            parts.append(np.asarray(self._delta_rows, dtype=np.int64)[hit])
        if not parts:
            return np.empty(0, dtype=np.int64)
        rows = np.unique(np.concatenate(parts))
        return rows[self._alive[rows]]

    def query(self, signature: np.ndarray, threshold: float | None = None, *, set_size: int = 0,
              by: str = "jaccard") -> list[tuple[int, float]]:
        """Candidates with score >= threshold, best first (ties: smaller id first).

        by: ``jaccard`` (estimated Jaccard) or ``containment`` (estimated share of the query's
        set found in the stored page; needs ``set_size`` and stored set sizes)."""
        if by not in ("jaccard", "containment"):
            raise ConfigError(f"by must be 'jaccard' or 'containment', got {by!r}")
        thr = self.threshold if threshold is None else float(threshold)
        sig = self._check(np.asarray(signature).reshape(-1))
        rows = self.candidates(sig)
        if rows.shape[0] == 0:
            return []
        scores = K.agreement(sig, self._sigs[rows])
        if by == "containment":
            scores = np.array([containment(j, set_size, int(self._sizes[r])) for j, r in zip(scores, rows)])
        keep = scores >= thr
        ids = self._ids[rows[keep]]
        sc = scores[keep]
        order = np.lexsort((ids, -sc))
        return [(int(ids[i]), float(sc[i])) for i in order]

    def signature_of(self, id: int) -> np.ndarray | None:
        row = self._row_of.get(int(id))
        return None if row is None else self._sigs[row].copy()



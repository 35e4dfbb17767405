"""Hamming-distance indexes: "every stored fingerprint within distance k of this one".

:class:`HammingIndex` is the interface; :class:`BruteForceIndex` is the exact reference
implementation (a vectorised scan with ``np.bitwise_count``), also used in tests as the
ground truth for faster indexes. Fingerprints are ``bits``-wide ints; ids are int64 store ids.
The match rule is ``distance <= k``.

>>> idx = BruteForceIndex(bits=64)
>>> idx.add(1, 0b1111); idx.add(2, 0b0000); idx.add(3, 0xFFFF)
>>> idx.search(0b0111, k=1)
[(1, 1)]
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from neardup.errors import ConfigError, NeardupError, StoreError


def save_npy(root: Path, name: str, array: np.ndarray) -> None:
    """Write ``root / f"{name}.npy"`` whole or not at all (a temporary file renamed over it):
    how every saved index writes its arrays."""
    tmp = root / f".{name}.tmp.npy"
    np.save(tmp, array)
    os.replace(tmp, root / f"{name}.npy")


def write_manifest(root: Path, manifest: dict) -> None:
    """Write ``root / "manifest.json"`` whole or not at all; written last, it makes the
    arrays saved before it the index's."""
    tmp = root / ".manifest.tmp"
    tmp.write_text(json.dumps(manifest))
    os.replace(tmp, root / "manifest.json")

Hit = tuple[int, int]  # (id, distance): one answer of a Hamming search
MASK64 = (1 << 64) - 1


def to_words(values: Iterable[int] | np.ndarray, bits: int) -> np.ndarray:
    """Split ``bits``-wide ints into a (n, bits // 64) uint64 array, most significant first."""
    if isinstance(values, np.ndarray) and values.dtype == np.uint64:
        return values.reshape(-1, bits // 64)
    words = bits // 64
    vals = list(values)
    if words == 1:  # one word a value: no generator per column
        return np.array([int(v) & MASK64 for v in vals], dtype=np.uint64).reshape(-1, 1)
    out = np.empty((len(vals), words), dtype=np.uint64)
    for j in range(words):
        shift = 64 * (words - 1 - j)
        out[:, j] = np.fromiter(((int(v) >> shift) & MASK64 for v in vals), dtype=np.uint64, count=len(vals))
    return out


class HammingIndex(Protocol):
    """What the Detector needs from an index.

    Optional, used when present (duck-typed, see :func:`empty_like` and
    :class:`PersistentIndex`): ``empty_like()`` (a new empty index of the same kind, for
    rebuilds; else the class is called without arguments), ``save(path, token=...)`` with a
    classmethod ``open(path)`` and attributes ``token`` and ``k`` (an index saved next to a
    file store and reopened when its token still matches)."""

    bits: int

    def add(self, id: int, simhash: int) -> None: ...

    def add_many(self, ids: Sequence[int], simhashes: Iterable[int] | np.ndarray) -> None: ...

    def remove(self, id: int, simhash: int | None = None) -> bool: ...

    def search(self, simhash: int, k: int) -> list[Hit]: ...

    def search_batch(self, simhashes: Sequence[int] | np.ndarray, k: int) -> list[list[Hit]]: ...

    def __len__(self) -> int: ...

    def __contains__(self, id: object) -> bool: ...


@runtime_checkable
class PersistentIndex(HammingIndex, Protocol):
    """An index that can be saved and reopened (:meth:`save`, :meth:`open`)."""

    token: str | None
    k: int

    def save(self, path: str | Path, token: str | None = None) -> None: ...

    @classmethod
    def open(cls, path: str | Path) -> "PersistentIndex": ...


def empty_like(index: HammingIndex) -> HammingIndex:
    """A new empty index of the same kind as ``index``: its ``empty_like()`` when it has
    one, else its class called without arguments."""
    make = getattr(index, "empty_like", None)
    return make() if make is not None else type(index)()


BRUTE_FORMAT = "neardup-bruteforce/1"


class BruteForceIndex:
    """Exact linear scan, vectorised: XOR with every stored fingerprint and popcount.

    O(N) per query (about 0.5 ms per query at 10^6 fingerprints on one core), O(1) amortised
    insert, O(1) delete (swap with the last entry). Results are sorted by (distance, id)."""

    def __init__(self, bits: int = 64, capacity: int = 1024) -> None:
        if bits not in (64, 128):
            raise ConfigError(f"bits must be 64 or 128, got {bits}")
        self.bits = bits
        self._words = bits // 64
        self._fps = np.zeros((max(capacity, 16), self._words), dtype=np.uint64)
        self._ids = np.zeros(max(capacity, 16), dtype=np.int64)
        self._n = 0
        self._pos: dict[int, int] = {}
        self.token: str | None = None
        self.path: Path | None = None

    @property
    def k(self) -> int:
        """The largest distance answered exactly: every distance."""
        return self.bits

    def empty_like(self) -> "BruteForceIndex":
        return BruteForceIndex(self.bits)

    def __len__(self) -> int:
        return self._n

    def __contains__(self, id: object) -> bool:
        return id in self._pos

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need <= self._ids.shape[0]:
            return
        cap = max(need, 2 * self._ids.shape[0])
        fps = np.zeros((cap, self._words), dtype=np.uint64)
        fps[: self._n] = self._fps[: self._n]
        ids = np.zeros(cap, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        self._fps, self._ids = fps, ids

    def add(self, id: int, simhash: int) -> None:
        """Insert (or replace) one fingerprint under ``id``."""
        self.add_many([id], [simhash])

    def add_many(self, ids: Sequence[int], simhashes: Iterable[int] | np.ndarray) -> None:
        words = to_words(simhashes, self.bits)
        if len(ids) != words.shape[0]:
            raise ConfigError("ids and simhashes differ in length")
        last: dict[int, int] = {int(id): i for i, id in enumerate(ids)}  # a repeated id: last wins
        if len(last) != len(ids):
            keep = sorted(last.values())
            ids, words = [ids[i] for i in keep], words[keep]
        for id in ids:
            if int(id) in self._pos:
                self.remove(int(id))
        self._reserve(len(ids))
        start = self._n
        self._fps[start : start + len(ids)] = words
        self._ids[start : start + len(ids)] = np.asarray(ids, dtype=np.int64)
        for offset, id in enumerate(ids):
            self._pos[int(id)] = start + offset
        self._n += len(ids)

    def remove(self, id: int, simhash: int | None = None) -> bool:
        """Delete ``id``; returns False when it was not there (``simhash`` is not needed)."""
        pos = self._pos.pop(int(id), None)
        if pos is None:
            return False
        last = self._n - 1
        if pos != last:
            self._fps[pos] = self._fps[last]
            moved = int(self._ids[last])
            self._ids[pos] = moved
            self._pos[moved] = pos
        self._n = last
        return True

    def distances(self, simhash: int) -> np.ndarray:
        """Distance from ``simhash`` to every stored fingerprint, in storage order."""
        q = to_words([simhash], self.bits)[0]
        fps = self._fps[: self._n]
        dist = np.bitwise_count(fps[:, 0] ^ q[0]).astype(np.int32)
        for j in range(1, self._words):
            dist += np.bitwise_count(fps[:, j] ^ q[j])
        return dist

    def search(self, simhash: int, k: int) -> list[Hit]:
        """All stored ``(id, distance)`` with ``distance <= k``, nearest first."""
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        dist = self.distances(simhash)
        hits = np.flatnonzero(dist <= k)
        out = [(int(self._ids[h]), int(dist[h])) for h in hits]
        out.sort(key=lambda m: (m[1], m[0]))
        return out

    def search_batch(self, simhashes: Sequence[int] | np.ndarray, k: int) -> list[list[Hit]]:
        """:meth:`search` for many queries."""
        words = to_words(simhashes, self.bits)
        return [self.search(self._join(row), k) for row in words]

    def _join(self, row: np.ndarray) -> int:
        value = 0
        for w in row:
            value = (value << 64) | int(w)
        return value

    def items(self) -> list[tuple[int, int]]:
        """All ``(id, simhash)`` pairs, in storage order."""
        return [(int(self._ids[i]), self._join(self._fps[i])) for i in range(self._n)]

    # -- persistence --------------------------------------------------------------------
    def save(self, path: str | Path, token: str | None = None) -> None:
        """Write the ids and fingerprints as .npy files plus ``manifest.json``; ``token``
        records what store state the index matches.

        >>> import tempfile
        >>> idx = BruteForceIndex(bits=128); idx.add(7, 1 << 100)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     idx.save(d, token="t"); back = BruteForceIndex.open(d)
        >>> back.items(), back.token, back.bits
        ([(7, 1267650600228229401496703205376)], 't', 128)
        """
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        for f in root.glob("*.npy"):  # another index's files
            if f.name not in ("ids.npy", "fps.npy"):
                f.unlink()
        for name, arr in (("ids", self._ids[: self._n]), ("fps", self._fps[: self._n])):
            save_npy(root, name, arr)
        write_manifest(root, {"format": BRUTE_FORMAT, "bits": self.bits, "n": self._n, "token": token})
        self.token, self.path = token, root

    @classmethod
    def open(cls, path: str | Path) -> "BruteForceIndex":
        """Open an index written by :meth:`save` (StoreError when missing or damaged)."""
        root = Path(path)
        try:
            manifest = json.loads((root / "manifest.json").read_text())
            if not isinstance(manifest, dict) or manifest.get("format") != BRUTE_FORMAT:
                raise ValueError(f"not a {BRUTE_FORMAT} index")
            idx = cls(bits=int(manifest["bits"]), capacity=int(manifest["n"]))
            ids = np.load(root / "ids.npy")
            fps = np.load(root / "fps.npy")
            n = int(manifest["n"])
            if ids.shape != (n,) or fps.shape != (n, idx._words) or fps.dtype != np.uint64:
                raise ValueError("arrays do not match the manifest")
            idx._ids[:n] = ids
            idx._fps[:n] = fps
            idx._n = n
            idx._pos = {int(i): j for j, i in enumerate(ids.tolist())}
            if len(idx._pos) != n:
                raise ValueError("repeated ids")
        except (OSError, ValueError, KeyError, TypeError, NeardupError) as exc:
            raise StoreError(f"index {root} is missing or damaged ({exc})") from None
        idx.token = manifest.get("token")
        idx.path = root
        return idx

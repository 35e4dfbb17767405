"""The in-memory indexes kept in step with the store: the Detector's SimHash index and
MinHash LSH, mirrored from the store's ``changes`` log.

Every index change a writer makes (a page's SimHash value added or removed) is logged in
the store in the same transaction (:meth:`IndexMirror.put`, :meth:`IndexMirror.remove`);
before deciding, a process replays what other processes logged since its last look
(:meth:`IndexMirror.sync`), or rebuilds from the pages when the log was pruned past its
position. A write that fails rolls the store back and undoes the index changes
(:meth:`IndexMirror.writing`). The log is kept to its last ``keep_changes`` entries.

Beside the SimHash index, a :class:`~neardup.index.bands.BandIndex` over the pages' verification
sketches (spec version 2) brings the candidates the sketch would accept at any SimHash
distance (:meth:`IndexMirror.sketch_candidates`); it holds the same pages as the SimHash
index.

The index and the LSH hold one page per SimHash value: the oldest non-empty page with it
(:meth:`~neardup.store.base.Store.lowest_live`), so a value stored 10^5 times costs one entry
(:meth:`IndexMirror.reconcile`).

For a file store the index is saved next to it (``<db>.index/``) on :meth:`IndexMirror.save`
and reopened (memory-mapped) when its token, the store id and the change-log position,
still matches the store; a damaged or stale saved index is rebuilt (and logged on the
``neardup`` logger).

>>> from neardup.store import SQLiteStore
>>> m = IndexMirror(SQLiteStore(":memory:"), bits=64, k=3)
>>> len(m.index), m.seq
(0, 0)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from neardup.errors import ConfigError, NeardupError, StoreError
from neardup.fingerprint.minhash import MinHashConfig, MinHashSignature, signatures_from_bytes
from neardup.index.bands import BandIndex, banded
from neardup.index.base import BruteForceIndex, HammingIndex, Hit, empty_like
from neardup.index.lsh import MinHashLSH
from neardup.index.permuted import PermutedIndex
from neardup.store.base import PageRecord, Store

log = logging.getLogger("neardup")

#: change-log entries kept (:class:`IndexMirror` ``keep_changes``): a process that falls
#: further behind than this rebuilds its index from the pages instead of replaying
DEFAULT_KEEP_CHANGES = 100_000


class IndexMirror:
    """A store's SimHash index (and MinHash LSH) in memory, kept in step with the store.

    store: the :class:`~neardup.store.base.Store`. bits / k: fingerprint width and the largest
        distance searched (the default index is built for it).
    index: a :class:`~neardup.index.base.HammingIndex` to fill; default: the permuted tables for
        64 bits (:class:`~neardup.index.permuted.PermutedIndex`), brute force otherwise.
    minhash / lsh_threshold: the LSH over MinHash signatures (None: no LSH).
    index_dir: where the index is saved and reopened (None: never saved).
    keep_changes: change-log entries kept; older ones are pruned by writers (None: never).
    bands: keep the sketch-band index (:mod:`neardup.index.bands`) beside the SimHash index (pages
        without a 64-byte sketch are left out of it); saved in ``index_dir / "bands"``.
    """

    def __init__(self, store: Store, *, bits: int, k: int, index: HammingIndex | None = None,
                 minhash: MinHashConfig | None = None, lsh_threshold: float = 0.8,
                 index_dir: Path | None = None, keep_changes: int | None = DEFAULT_KEEP_CHANGES,
                 bands: bool = True) -> None:
        if keep_changes is not None and (not isinstance(keep_changes, int) or keep_changes < 1):
            raise ConfigError(f"keep_changes must be a positive integer or None, got {keep_changes!r}")
        self.store, self.bits, self.k = store, bits, k
        self.minhash, self.lsh_threshold = minhash, lsh_threshold
        self.index_dir = index_dir
        self.keep_changes = keep_changes
        store_id = store.get_meta("store_id")
        if store_id is None:
            store_id = uuid.uuid4().hex
            store.set_meta("store_id", store_id)
        self.store_id = str(store_id)
        self.seq = store.change_bounds()[1]  # the last change of the log the index reflects
        self.saved_token: str | None = None
        self._undo: list[Callable[[], object]] | None = None
        self.bands: BandIndex | None = None
        self._keep_bands = bool(bands) and bits == 64
        if index is not None:
            self._fresh: Callable[[], HammingIndex] = lambda: empty_like(self.index)
            self.index = index
        else:
            self._fresh = self._default_index
            self.index = self._saved_index() or self._default_index()
        if self.index.bits != bits:
            raise ConfigError(f"index is {self.index.bits}-bit but fingerprints are {bits}-bit")
        self.lsh: MinHashLSH | None = None
        self._pruned_at = self.seq
        self.rebuild(reuse_index=self.saved_token is not None)

    # -- building ---------------------------------------------------------------------
    @property
    def token(self) -> str:
        """What a saved index records: the store id and the change-log position."""
        return f"{self.store_id}:{self.seq}"

    def _default_class(self) -> type[PermutedIndex] | type[BruteForceIndex]:
        return PermutedIndex if self.bits == 64 and self.k < 64 else BruteForceIndex

    def _default_index(self) -> HammingIndex:
        if self._default_class() is PermutedIndex:
            return PermutedIndex(k=max(self.k, 3), expected_n=max(self.store.page_count(), 10**6))
        return BruteForceIndex(self.bits)

    def _saved_index(self) -> HammingIndex | None:
        """The index saved next to the store when it matches the store's state."""
        if self.index_dir is None or not (self.index_dir / "manifest.json").exists():
            return None
        try:
            saved = self._default_class().open(self.index_dir)
        except NeardupError as exc:
            log.warning("neardup: saved index %s is unusable, rebuilding it from the store (%s)", self.index_dir, exc)
            return None
        if saved.token != self.token or saved.bits != self.bits or saved.k < self.k:
            log.info("neardup: saved index %s is stale (token %s, store at %s), rebuilding it",
                     self.index_dir, saved.token, self.token)
            return None
        if self._keep_bands:
            try:
                saved_bands = BandIndex.open(self.index_dir / "bands")
            except NeardupError as exc:
                log.info("neardup: saved band index in %s is unusable, rebuilding the indexes (%s)",
                         self.index_dir, exc)
                return None
            if saved_bands.token != self.token:
                log.info("neardup: saved band index in %s is stale, rebuilding the indexes", self.index_dir)
                return None
            self.bands = saved_bands
        self.saved_token = saved.token
        return saved

    def _fill_bands(self, ids: np.ndarray) -> None:
        """Add the sketches of pages ``ids`` to the band index (read in batches; a store
        with a ``sketches(ids)`` method is asked for them directly)."""
        assert self.bands is not None
        reader = getattr(self.store, "sketches", None)
        for lo in range(0, len(ids), 900):
            chunk = [int(i) for i in ids[lo:lo + 900]]
            if reader is not None:
                pairs = reader(chunk)
            else:
                recs = self.store.pages_by_ids(chunk)
                pairs = [(i, recs[i].sketch) for i in chunk if i in recs]
            keep = [(i, s) for i, s in pairs if banded(s)]
            if keep:
                self.bands.add_many([i for i, _ in keep], [bytes(s) for _, s in keep])  # type: ignore[arg-type]

    def _new_lsh(self) -> MinHashLSH | None:
        return None if self.minhash is None else MinHashLSH(self.minhash, threshold=self.lsh_threshold)

    def rebuild(self, reuse_index: bool = False) -> None:
        """Load the index (unless ``reuse_index``) and the LSH from one consistent snapshot
        of the store, and remember the change-log position they reflect."""
        with self.store.snapshot():
            self.seq = self.store.change_bounds()[1]
            if not reuse_index:
                self.index = self._fresh()
                ids, words = self.store.simhashes()
                if len(ids):
                    self.index.add_many(ids.tolist(), words)
                self.bands = BandIndex() if self._keep_bands else None
                if self.bands is not None and len(ids):
                    self._fill_bands(ids)
                self.saved_token = None
            self.lsh = self._new_lsh()
            if self.lsh is not None:
                ids, blobs, sizes = self.store.signatures()
                if len(ids):
                    self.lsh.add_many(ids.tolist(), self._signatures(blobs), sizes.tolist())

    def _signatures(self, blobs: list[bytes]) -> np.ndarray:
        assert self.minhash is not None
        try:
            return signatures_from_bytes(blobs, self.minhash.num_perm)
        except NeardupError as exc:
            raise StoreError(f"store {self.store.path} is damaged: {exc}") from None

    def signature(self, rec: PageRecord) -> MinHashSignature | None:
        """The page's stored MinHash signature (None when it has none, or no LSH is kept)."""
        if rec.signature is None or self.minhash is None:
            return None
        try:
            return MinHashSignature.from_bytes(rec.signature, rec.set_size or 0, self.minhash.spec,
                                               num_perm=self.minhash.num_perm)
        except NeardupError as exc:
            raise StoreError(f"store {self.store.path} is damaged: page {rec.id}: {exc}") from None

    # -- replay -----------------------------------------------------------------------
    def sync(self, bounds: tuple[int, int] | None = None) -> None:
        """Replay the changes other processes logged since our last look (or rebuild when
        the log was pruned past our position). ``bounds``: the change log's (first, last),
        when the caller has just read them (nothing to do when ``last`` is ours)."""
        if bounds is not None and bounds[1] == self.seq:
            return
        with self.store.snapshot():  # bounds and entries from one view (a pruner may run)
            first, last = self.store.change_bounds()
            if last == self.seq:
                return
            if last < self.seq or (first > self.seq + 1 and first != 0):
                self.rebuild()
                return
            while self.seq < last:
                batch = self.store.changes_since(self.seq)
                if not batch:
                    break
                for seq, page_id, op, value in batch:
                    if op == "add":
                        self.index.add(page_id, value)
                        if self.lsh is not None or self.bands is not None:
                            rec = self.store.page_by_id(page_id)
                            if rec is not None and rec.simhash == value:
                                sig = self.signature(rec) if self.lsh is not None else None
                                if self.lsh is not None and sig is not None:
                                    self.lsh.add(page_id, sig.signature, sig.set_size)
                                if self.bands is not None and banded(rec.sketch):
                                    self.bands.add(page_id, rec.sketch)  # type: ignore[arg-type]
                    else:
                        self.index.remove(page_id, value)
                        if self.lsh is not None:
                            self.lsh.remove(page_id)
                        if self.bands is not None:
                            self.bands.remove(page_id)
                    self.seq = seq
        self.saved_token = None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """One write transaction. The index first catches up with other writers; on any
        failure the store rolls back and the index changes are undone, so the two never
        disagree. At the end, the change log is pruned to its last ``keep_changes`` entries
        (every ``keep_changes / 4`` changes)."""
        if self._undo is not None:  # nested in an outer write (a batch)
            yield
            return
        self._undo = []
        seq = self.seq
        try:
            with self.store.transaction():
                self.sync()
                seq = self.seq
                yield
                self._prune()
        except BaseException:
            for undo in reversed(self._undo):
                undo()
            self.seq = seq
            raise
        finally:
            self._undo = None

    def _prune(self) -> None:
        keep = self.keep_changes
        if keep is None or self.seq - self._pruned_at < max(1, keep // 4):
            return
        self.store.prune_changes(self.seq - keep)
        self._pruned_at = self.seq

    # -- changes ----------------------------------------------------------------------
    def put(self, rec: PageRecord) -> None:
        """Add ``rec`` (stored, with its id) to the index and the LSH, logged."""
        assert rec.id is not None
        page_id, value = rec.id, rec.simhash
        self.seq = self.store.log_change(page_id, "add", value, self.bits)
        self.index.add(page_id, value)
        if self._undo is not None:
            self._undo.append(lambda: self.index.remove(page_id, value))
        if self.bands is not None and banded(rec.sketch):
            bands, sketch = self.bands, rec.sketch
            bands.add(page_id, sketch)  # type: ignore[arg-type]
            if self._undo is not None:
                self._undo.append(lambda: bands.remove(page_id, sketch))
        sig = self.signature(rec) if self.lsh is not None else None
        if self.lsh is not None and sig is not None:
            self.lsh.add(page_id, sig.signature, sig.set_size)
            if self._undo is not None:
                self._undo.append(lambda: self.lsh.remove(page_id) if self.lsh is not None else None)

    def remove(self, page_id: int, value: int, rec: PageRecord | None) -> None:
        """Take ``page_id`` (with ``value``) out of the index, logged; ``rec``: its stored
        version before this write (its signature goes back into the LSH on rollback)."""
        if not self._unindex(page_id, value, rec):
            return
        if self.bands is not None and self.bands.remove(page_id, rec.sketch if rec is not None else None) \
                and self._undo is not None and rec is not None and banded(rec.sketch):
            bands, sketch = self.bands, rec.sketch
            self._undo.append(lambda: bands.add(page_id, sketch))  # type: ignore[arg-type]

    def _unindex(self, page_id: int, value: int, rec: PageRecord | None) -> bool:
        """:meth:`remove` but for the sketch bands: the SimHash index, the change log and the
        LSH; False when the index did not hold ``page_id`` with ``value`` (nothing done)."""
        if not self.index.remove(page_id, value):
            return False
        self.seq = self.store.log_change(page_id, "remove", value, self.bits)
        if self._undo is not None:
            self._undo.append(lambda: self.index.add(page_id, value))
        if self.lsh is not None and self.lsh.remove(page_id) and self._undo is not None and rec is not None:
            sig = self.signature(rec)
            if sig is not None:
                self._undo.append(lambda: self.lsh.add(page_id, sig.signature, sig.set_size)
                                  if self.lsh is not None else None)
        return True

    def remove_many(self, leaving: Sequence[tuple[int, int]], old: Mapping[int, PageRecord]) -> None:
        """:meth:`remove` of many (page id, value) pairs (expiry's batches): the sketch bands
        updated at once (:meth:`BandIndex.remove_many`)."""
        recs = [old.get(pid) or self.store.page_by_id(pid) for pid, _ in leaving]
        out = [(pid, rec) for (pid, value), rec in zip(leaving, recs) if self._unindex(pid, value, rec)]
        if self.bands is None or not out:
            return
        bands = self.bands
        found = bands.remove_many([pid for pid, _ in out], [rec.sketch if rec is not None else None for _, rec in out])
        back = [(pid, sk) for (pid, rec), hit in zip(out, found.tolist())
                if hit and rec is not None and (sk := rec.sketch) is not None and banded(sk)]
        if self._undo is not None and back:
            self._undo.append(lambda: bands.add_many([pid for pid, _ in back], [sk for _, sk in back]))

    def reconcile(self, values: Iterable[int], old: Mapping[int, PageRecord], new: PageRecord | None = None,
                  refresh: int | None = None) -> None:
        """After a write, make the index hold for each of ``values`` exactly the oldest
        non-empty page with it: two lookups and at most two changes per value, however many
        copies are stored. ``old``: pages' versions before the write; ``new``: a page as just
        written; ``refresh``: re-add that page even when it is already held (its signature
        changed). Every removal comes before any addition (a page may move between values).
        A page written again with its SimHash value, live before and after (a recrawl), leaves
        every value's live pages as they were: nothing to read or change."""
        was = old.get(new.id) if new is not None and new.id is not None and len(old) == 1 else None
        if (refresh is None and new is not None and was is not None and was.simhash == new.simhash
                and was.status != "empty" and new.status != "empty"):
            return
        plan = []
        holders = {value: [pid for pid, _ in self.index.search(value, 0)] for value in sorted(set(values))}
        # no stored page held a value (the index holds the oldest non-empty page of every value,
        # in step with the store inside the write): only the new page can hold it now
        alone = {value for value, held in holders.items() if not held and new is not None and new.id is not None
                 and not old}
        lowest = self.store.lowest_lives([v for v in holders if v not in alone], self.bits)
        for value, held in holders.items():
            want: int | None
            if value in alone:
                assert new is not None
                want = new.id if new.simhash == value and new.status != "empty" else None
            else:
                want = lowest[value]
            plan.append((value, want, held))
        leaving = [(pid, value) for value, want, held in plan for pid in held if pid != want or pid == refresh]
        if len(leaving) > 1:
            self.remove_many(leaving, old)
        for pid, value in leaving if len(leaving) == 1 else ():
            self.remove(pid, value, old.get(pid) or self.store.page_by_id(pid))
        for _, want, held in plan:
            if want is not None and (want not in held or want == refresh):
                rec = new if new is not None and new.id == want else self.store.page_by_id(want)
                if rec is not None:
                    self.put(rec)

    # -- queries ----------------------------------------------------------------------
    def search(self, simhash: int, k: int) -> list[Hit]:
        return self.index.search(simhash, k)

    def sketch_candidates(self, sketch: bytes | None, verify: float | None) -> list[Hit]:
        """Stored pages that share a sketch band with ``sketch`` and may reach ``verify``
        (:meth:`neardup.index.bands.BandIndex.search`: ``(id, agreeing nibbles)``); none without a
        band index, a sketch or a verification threshold (the bands bring candidates at any
        SimHash distance, which only the sketch check may accept)."""
        if self.bands is None or verify is None or not banded(sketch):
            return []
        return self.bands.search(sketch, verify)  # type: ignore[arg-type]

    def query(self, signature: np.ndarray, threshold: float, *, set_size: int = 0,
              by: str = "jaccard") -> list[tuple[int, float]]:
        """LSH candidates (none without an LSH)."""
        if self.lsh is None:
            return []
        return self.lsh.query(signature, threshold, set_size=set_size, by=by)

    # -- persistence ------------------------------------------------------------------
    def save(self) -> bool:
        """Save the index next to a file store when it changed since it was saved or
        opened; an index that cannot be saved is logged and rebuilt at the next open.
        Returns whether it was written."""
        save = getattr(self.index, "save", None)
        if self.index_dir is None or save is None or self.saved_token == self.token:
            return False
        try:
            save(self.index_dir, token=self.token)
            if self.bands is not None:
                self.bands.save(self.index_dir / "bands", token=self.token)
        except (OSError, NeardupError) as exc:
            log.warning("neardup: could not save the index to %s; it will be rebuilt at the next open (%s)",
                        self.index_dir, exc)
            return False
        self.saved_token = self.token
        return True

"""Check a batch of new pages against an archive of fingerprints far larger than memory:
``neardup check-batch`` (:mod:`neardup.cli.batch`).

The queries (a new crawl segment: :class:`~neardup.batch.graph.BatchRecord` rows or the columns
:mod:`neardup.batch.files` reads) are held in memory; the stored side is one or more Parquet
files of :data:`neardup.batch.files.PARQUET_COLUMNS` (what ``neardup fingerprint --out`` and
``dedup --batch --fingerprints-out`` write), read one batch of rows at a time (a Parquet row
group, at most ``chunk_rows`` rows): never the whole set at once.

Candidates are the Detector's, found per stored chunk: equal digests, SimHash within ``k``
(Manku's batch mode, :func:`neardup.index.joins.batch_join`: tables on the queries, the
stored chunk streamed past) and, with ``bands``, the sketch bands
(:func:`neardup.index.joins.band_join_chunks`, what the Detector's ``BandIndex`` brings). Every
candidate pair is decided by :func:`neardup.matching.pair_rule` alone, so the answer is that of
the rule applied to every (query, stored) pair (tested against brute force).

Per query: ``status`` ``empty`` (too little main content), ``exact`` (the rule says ``exact``
for a stored page: same digest), ``near`` or ``new``; ``match``: the stored URL of the best
match (``exact`` first, then the smallest SimHash distance, ties by stored order: files in the
order given, rows in file order), ``distance`` and ``score`` (the rule's). A query never
matches a stored row of its own URL (:func:`neardup.urls.normalize_url`: a re-fetch is a
version of its URL, not its own duplicate); such rows give ``version``: ``unchanged`` when the
URL's latest stored row (the last in :func:`neardup.batch.versions.capture_key` order) has the query's
digest and emptiness, else ``changed``; None when the archive does not hold the URL.

>>> import os, tempfile
>>> from neardup.batch import BatchRecord, write_fingerprints
>>> stored = [BatchRecord("https://a.example/1", "d1", 0b1011), BatchRecord("https://b.example/1", "d2", 0b1111)]
>>> path = os.path.join(tempfile.mkdtemp(), "archive.parquet")
>>> write_fingerprints(stored, path)
2
>>> res = check_against([BatchRecord("https://c.example/1", "d1", 0b1011),
...                      BatchRecord("https://b.example/1", "d9", 1 << 40)], [path], verify=None)
>>> [(v.status, v.match, v.version) for v in res.verdicts]
[('exact', 'https://a.example/1', None), ('new', None, 'changed')]
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup import urls
from neardup.batch.arrays import FingerprintArrays, simhash_int64, sketch_column_matrix
from neardup.batch.files import COLUMN_TYPES as COLUMN_TYPES  # the types a stored column may have
from neardup.batch.files import arrow_read, check_fingerprint_file, refuse_rows, row_faults
from neardup.batch.graph import BatchRecord, url_group_key
from neardup.batch.versions import capture_key, own_keys, url_keys
from neardup.errors import ConfigError, InputError
from neardup.fingerprint.core import DEFAULT_CONFIG
from neardup.index.joins import QueryBands, band_join_chunks, batch_join
from neardup.matching import Side, pair_rule
from neardup.model import DEFAULT_VERIFY, default_k
from neardup.urls import host_of

#: the columns read of a stored file (``signature`` never is)
STORED_COLUMNS = ("url", "digest", "simhash", "empty", "sketch", "title", "length", "first_seen", "canonical_link",
                  "priority")
#: the most rows of a stored file held at once (a Parquet row group is read in slices of this)
CHUNK_ROWS = 1 << 19
#: the host of a URL as :func:`urllib.parse.urlsplit` reads it (after the last ``@`` of the netloc)
_HOST_OF = r"^[A-Za-z][A-Za-z0-9+.\-]*://(?:[^/?#]*@)?(?P<host>[^/?#:@]*)"
LDH_HOST = f"^{urls.LDH_HOST.pattern}$"  # the host normalize_url keeps as it is


@dataclass(frozen=True)
class CheckVerdict:
    """One query's answer (module docs)."""

    url: str
    digest: str
    simhash: int
    status: str
    match: str | None = None
    distance: int | None = None
    score: float | None = None
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row written by ``check-batch`` (simhash as 16 hex digits)."""
        return {"url": self.url, "digest": self.digest, "simhash": f"{self.simhash:016x}", "status": self.status,
                "match": self.match, "distance": self.distance, "score": self.score, "version": self.version}


#: the columns of a ``check-batch`` output row, in order
FIELDS = ("url", "digest", "simhash", "status", "match", "distance", "score", "version")


@dataclass
class CheckResult:
    """``verdicts`` in query order; ``stored``: rows read; ``candidates``: pairs decided."""

    verdicts: list[CheckVerdict]
    stored: int = 0
    candidates: int = 0

    def summary(self) -> dict[str, int]:
        out = {"queries": len(self.verdicts), "stored": self.stored, "candidates": self.candidates,
               "new": 0, "exact": 0, "near": 0, "empty": 0, "unchanged": 0, "changed": 0}
        for v in self.verdicts:
            out[v.status] += 1
            if v.version is not None:
                out[v.version] += 1
        return out


def records_of(queries: Sequence[BatchRecord] | FingerprintArrays) -> list[BatchRecord]:
    """Query records from records or from :class:`~neardup.batch.arrays.FingerprintArrays`."""
    if not isinstance(queries, FingerprintArrays):
        return list(queries)
    fa = queries
    titles = fa.title.to_pylist()
    links = fa.canonical_link.to_pylist()
    out = []
    for i, (url, digest) in enumerate(zip(fa.url.to_pylist(), fa.digest.to_pylist())):
        sketch = bytes(fa.sketch[i]) if fa.has_sketch[i] else fa.odd_sketch.get(i)
        out.append(BatchRecord(url=url, digest=digest, simhash=int(fa.simhash[i]), empty=bool(fa.empty[i]),
                               sketch=sketch, title=titles[i], length=int(fa.length[i]), canonical_link=links[i],
                               first_seen=float(fa.first_seen[i]),
                               priority=float(fa.priority[i]) if fa.has_priority[i] else None))
    return out


def stored_files(paths: Sequence[str]) -> list[str]:
    """The Parquet files of ``paths`` (a folder: its ``*.parquet`` parts, sorted), checked to
    exist and to hold the fingerprint columns of the types :data:`COLUMN_TYPES` allows
    (:func:`neardup.batch.files.check_fingerprint_file`: :class:`InputError` naming the file and
    column); their rows are checked as they are read."""
    return [part for path in paths for part in check_fingerprint_file(str(path), InputError, rows=False)]


@dataclass
class _Chunk:
    """One slice of stored rows: its Arrow columns, SimHash values and sketch rows (zeros where
    a row has none of 64 bytes: no band keys); ``pairs``: its SimHash and band candidates."""

    offset: int
    columns: dict[str, Any]
    simhash: np.ndarray
    sketch: np.ndarray
    pairs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.simhash.shape[0])


def _chunks(files: Sequence[str], chunk_rows: int) -> Iterator[_Chunk]:
    """The stored rows of ``files`` in order, ``chunk_rows`` at most at a time, each chunk's rows
    checked (nulls in a required column, sketches of another size: :class:`InputError` naming the
    file, column and rows) and its pages' checksums verified."""
    import pyarrow.parquet as pq

    offset = 0
    for f in files:
        # (pre-buffering keeps every row group read, Arrow 26)
        pf = arrow_read(f, InputError, pq.ParquetFile, f, pre_buffer=False, page_checksum_verification=True)
        names = set(pf.schema_arrow.names)
        batches = pf.iter_batches(batch_size=chunk_rows, columns=[c for c in STORED_COLUMNS if c in names])
        lo = 0
        while True:
            batch = arrow_read(f, InputError, next, batches, None)
            if batch is None:
                break
            cols = {c: batch.column(c) for c in batch.schema.names}
            n = batch.num_rows
            whole = lo == 0 and n == pf.metadata.num_rows  # (else the slice's rows are named)
            refuse_rows(f, row_faults(cols, lo), n, InputError, None if whole else lo)
            sim = np.asarray(simhash_int64(cols["simhash"]).to_numpy(zero_copy_only=False)).view(np.uint64)
            sketch = _sketch_rows(cols["sketch"]) if "sketch" in cols else np.zeros((n, 64), np.uint8)
            yield _Chunk(offset, cols, np.ascontiguousarray(sim), sketch)
            offset += n
            lo += n


def _sketch_rows(col: Any) -> np.ndarray:
    """(n, 64) uint8 sketch rows of a binary column (zeros where a row has none of 64 bytes): a
    view of the column's data when every row has one, else
    :func:`neardup.batch.arrays.sketch_column_matrix`."""
    import pyarrow as pa

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    if n and not arr.null_count and pa.types.is_binary(arr.type):
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
        if int(offsets[-1]) - int(offsets[0]) == 64 * n and bool(np.all(np.diff(offsets) == 64)):
            data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
            return data[int(offsets[0]):int(offsets[-1])].reshape(n, 64)
    return sketch_column_matrix(arr)[0]


def _stored_side(chunk: _Chunk, rows: list[int]) -> dict[int, tuple[Side, str]]:
    """The rule's view (and the URL) of stored rows ``rows`` of ``chunk``."""
    import pyarrow as pa

    take = pa.array(rows, pa.int64())
    cols = chunk.columns

    def values(name: str) -> list[Any]:
        return cols[name].take(take).to_pylist() if name in cols else [None] * len(rows)

    urls, digests, empty, titles, lengths = (values(c) for c in ("url", "digest", "empty", "title", "length"))
    sketches = values("sketch")
    out = {}
    for j, r in enumerate(rows):
        sk = sketches[j]
        side = Side(simhash=int(chunk.simhash[r]), digest=digests[j], empty=bool(empty[j]),
                    sketch=bytes(sk) if sk is not None else None, title=titles[j], host=host_of(urls[j]) or None,
                    length=int(lengths[j] or 0))
        out[r] = (side, urls[j])
    return out


class _UrlIndex:
    """The queries' URL keys, and which stored rows of a chunk have one of them."""

    def __init__(self, keys: list[str]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        self.by_key: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            self.by_key.setdefault(key, []).append(i)
        self.keys = pa.array(list(self.by_key), pa.large_string())
        hosts = pc.utf8_lower(pc.struct_field(pc.extract_regex(self.keys, _HOST_OF), [0]))
        self.hosts = pc.unique(pc.drop_null(hosts))

    def rows(self, urls: Any) -> list[tuple[int, int]]:
        """(stored row, query) pairs of one URL identity among stored ``urls`` (an Arrow
        array). A URL spelled as a query's key is that URL (keys are normalised, and
        :func:`normalize_url` is idempotent); a URL that is its own key (:func:`own_keys`) is
        its own key, so no other; of the rest, those whose host is a plain lower-case name no
        query has are skipped (their key has that host), the others are normalised."""
        import pyarrow as pa
        import pyarrow.compute as pc

        urls = urls.cast(pa.large_string())
        same = _mask(pc.is_in(urls, value_set=self.keys))
        other = np.flatnonzero(~same & ~own_keys(urls))
        if other.shape[0]:
            some = urls.take(pa.array(other))
            host = pc.utf8_lower(pc.struct_field(pc.extract_regex(some, _HOST_OF), [0]))
            skip = pc.and_(pc.fill_null(pc.match_substring_regex(host, LDH_HOST), False),
                           pc.invert(pc.fill_null(pc.is_in(host, value_set=self.hosts), False)))
            other = other[~_mask(skip)]
        keys = {int(r): url_group_key(u) for r, u in zip(other.tolist(), urls.take(pa.array(other)).to_pylist())}
        for r in np.flatnonzero(same).tolist():
            keys[r] = urls[r].as_py()
        return [(r, q) for r, key in sorted(keys.items()) for q in self.by_key.get(key, ())]


def _mask(arr: Any) -> np.ndarray:
    """A boolean Arrow array as numpy, nulls False."""
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


class _Best:
    """Per query, the best match so far and the latest row of its own URL."""

    def __init__(self, n: int) -> None:
        self.rank: list[tuple[int, int, int] | None] = [None] * n
        self.found: list[tuple[str, int, float | None] | None] = [None] * n
        self.own: list[tuple[tuple, int, str, bool] | None] = [None] * n

    def offer(self, q: int, rank: tuple[int, int, int], url: str, distance: int, score: float | None) -> None:
        held = self.rank[q]
        if held is None or rank < held:
            self.rank[q], self.found[q] = rank, (url, distance, score)

    def version(self, q: int, order: tuple, pos: int, digest: str, empty: bool) -> None:
        """Keep the latest stored row of query ``q``'s own URL: the last in the capture order
        of :mod:`neardup.batch.versions` (fetch time, NaN last, then the row's own fields),
        then in stored order."""
        got = self.own[q]
        if got is None or (order, pos) >= (got[0], got[1]):
            self.own[q] = (order, pos, digest, empty)


class _Digests:
    """The queries' digests (empty pages left out: they match nothing) and who holds each."""

    def __init__(self, recs: list[BatchRecord]) -> None:
        import pyarrow as pa

        members: dict[str, list[int]] = {}
        for i, r in enumerate(recs):
            if not r.empty:
                members.setdefault(r.digest, []).append(i)
        self.members = [np.asarray(m, dtype=np.int64) for m in members.values()]
        self.keys = pa.array(list(members), pa.large_string())

    def pairs(self, digest: Any) -> tuple[np.ndarray, np.ndarray]:
        """(query, stored row) of equal digests among stored ``digest`` (an Arrow array)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        where = pc.index_in(digest.cast(pa.large_string()), value_set=self.keys)
        hit = np.flatnonzero(np.asarray(pc.is_valid(where).to_numpy(zero_copy_only=False), dtype=bool))
        if not hit.shape[0]:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        codes = np.asarray(where.take(pa.array(hit)).to_numpy(zero_copy_only=False), dtype=np.int64)
        qs = [self.members[c] for c in codes.tolist()]
        return np.concatenate(qs), np.repeat(hit, [m.shape[0] for m in qs])


def _stored_record(chunk: _Chunk, r: int) -> BatchRecord:
    """Stored row ``r`` of a chunk as a record (the fields the capture order reads)."""
    cols = chunk.columns

    def get(name: str) -> Any:
        return cols[name][r].as_py() if name in cols else None

    fs, length = get("first_seen"), get("length")
    return BatchRecord(url=get("url"), digest=get("digest"), simhash=int(chunk.simhash[r]), empty=bool(get("empty")),
                       title=get("title"), length=int(length or 0), canonical_link=get("canonical_link"),
                       first_seen=0.0 if fs is None else float(fs), priority=get("priority"))


def _decide(chunk: _Chunk, queries: list[BatchRecord], qsides: list[Side], urls: _UrlIndex, digests: _Digests,
            best: _Best, k: int, verify: float | None, bands: bool) -> int:
    """Decide every candidate pair of one stored chunk; returns how many were decided."""
    own = urls.rows(chunk.columns["url"])
    if own:
        for r, q in own:
            row = _stored_record(chunk, r)
            best.version(q, capture_key(row), chunk.offset + r, row.digest, bool(row.empty))
    excluded = {(q, r) for r, q in own}
    qa = [p[0] for p in chunk.pairs]
    sa = [p[1] for p in chunk.pairs]
    dq, ds = digests.pairs(chunk.columns["digest"])
    qa.append(dq)
    sa.append(ds)
    q_all = np.concatenate(qa).astype(np.int64)
    s_all = np.concatenate(sa).astype(np.int64)
    code = np.unique(q_all * np.int64(max(1, chunk.n)) + s_all)
    pairs = [(int(q), int(s)) for q, s in zip((code // max(1, chunk.n)).tolist(), (code % max(1, chunk.n)).tolist())
             if (int(q), int(s)) not in excluded and not queries[int(q)].empty]
    if not pairs:
        return 0
    sides = _stored_side(chunk, sorted({s for _, s in pairs}))
    for q, s in pairs:
        side, url = sides[s]
        m = pair_rule(qsides[q], side, k, verify, bands)
        if m.status is not None:
            best.offer(q, (0 if m.status == "exact" else 1, m.distance, chunk.offset + s), url, m.distance, m.score)
    return len(pairs)


def check_against(queries: Sequence[BatchRecord] | FingerprintArrays, stored_paths: Sequence[str], *,
                  k: int | None = None, verify: float | None = DEFAULT_VERIFY, bands: bool = True,
                  chunk_rows: int = CHUNK_ROWS, threads: int | None = None) -> CheckResult:
    """Check ``queries`` against the fingerprint Parquet files ``stored_paths`` (module docs).
    ``k`` defaults to the spec's (:func:`neardup.model.default_k`: 3 with the bands, 12
    without), ``verify`` to the Detector's; ``bands``: candidates from the sketch bands too
    (``DetectorSettings.bands``). Stored rows are read ``chunk_rows`` at a time."""
    if k is None:
        k = default_k(DEFAULT_CONFIG.version, bands)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) < 64:
        raise ConfigError(f"k must be a whole number between 0 and 63, got {k!r}")
    if verify is not None and not 0.0 <= float(verify) <= 1.0:
        raise ConfigError(f"verify must be in [0, 1] or None, got {verify!r}")
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be >= 1, got {chunk_rows}")
    k = int(k)
    files = stored_files(stored_paths)
    recs = records_of(queries)
    qsides = [r.side() for r in recs]
    best = _Best(len(recs))
    result = CheckResult([])
    if recs:
        _stream(recs, qsides, files, best, result, k=k, verify=verify, bands=bands, chunk_rows=chunk_rows,
                threads=threads)
    for i, r in enumerate(recs):
        found, own = best.found[i], best.own[i]
        version = None if own is None else "unchanged" if (own[2], own[3]) == (r.digest, bool(r.empty)) else "changed"
        if r.empty:
            result.verdicts.append(CheckVerdict(r.url, r.digest, r.simhash, "empty", version=version))
        elif found is None:
            result.verdicts.append(CheckVerdict(r.url, r.digest, r.simhash, "new", version=version))
        else:
            rank = best.rank[i]
            status = "exact" if rank is not None and rank[0] == 0 else "near"
            result.verdicts.append(CheckVerdict(r.url, r.digest, r.simhash, status, found[0], found[1], found[2],
                                                version))
    return result


def _stream(recs: list[BatchRecord], qsides: list[Side], files: list[str], best: _Best, result: CheckResult, *,
            k: int, verify: float | None, bands: bool, chunk_rows: int, threads: int | None) -> None:
    """Stream the stored chunks past the queries' tables: the SimHash join pulls each chunk
    and yields its pairs before it pulls the next, so a chunk is decided (band pairs, digests,
    URLs, the rule) when the next is asked for, and the last one when the stream ends."""
    import pyarrow as pa

    urls = _UrlIndex(url_keys(pa.array([r.url for r in recs], pa.large_string())).to_pylist())
    digests = _Digests(recs)
    qbands = QueryBands([r.sketch for r in recs]) if bands and verify is not None else None
    current: list[_Chunk] = []
    n_threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    block = max(1 << 12, -(-chunk_rows // max(1, n_threads)))  # a chunk's blocks keep every thread busy

    def finish(chunk: _Chunk) -> None:
        if qbands is not None:
            for qp, sp, _ in band_join_chunks(qbands, [chunk.sketch], verify, block=block, threads=threads):
                chunk.pairs.append((qp, sp))
        result.candidates += _decide(chunk, recs, qsides, urls, digests, best, k, verify, bands)
        result.stored += chunk.n

    def values() -> Iterator[np.ndarray]:
        chunks = _chunks(files, chunk_rows)
        while True:
            if current:  # decided before the next chunk is read: one chunk in memory at a time
                finish(current.pop())
            chunk = next(chunks, None)
            if chunk is None:
                return
            current.append(chunk)
            yield chunk.simhash

    qvals = np.array([r.simhash for r in recs], dtype=np.uint64)
    for qp, sp, _ in batch_join(qvals, values(), k, block=block, threads=threads):
        chunk = current[0]
        chunk.pairs.append((qp, sp - chunk.offset))

"""The batch job on columns: :func:`neardup.batch.dedup.dedup_batch`'s answer computed on arrays,
never one Python object per page, so 10^7 precomputed fingerprints fit in a few GB.
:func:`solve` decides the pages it is given; re-fetches of one URL are set aside before it and
given their URL's answer after it by :func:`neardup.batch.versions.solve_captures` (what
``dedup_batch`` and ``neardup dedup --batch`` run).

Columns (:class:`FingerprintArrays`): strings (URL, digest, title, link) stay Arrow arrays,
the SimHash, lengths and times numpy vectors, the sketches one (n, 64) uint8 matrix. Then:

* **node ids** (:func:`neardup.batch.graph.node_id`, the same 63-bit BLAKE2b ids) hashed in a
  compiled loop over messages Arrow joins column-wise; hosts come from the distinct
  ``scheme://authority`` prefixes (:func:`neardup.urls.host_of` once per prefix);
* **digest groups** by Arrow's dictionary encoding; each group's representative is the row
  of its smallest node, as in :func:`neardup.batch.dedup.dedup_batch`;
* **candidates** (:mod:`neardup.batch.candidates`): the blocks of
  :func:`neardup.batch.blocks.block_rows`, every pair of a bucket enumerated with its filter in a
  compiled loop (nothing quadratic is materialised), plus the permuted tables' self-join at
  k; pairs whose sketches cannot reach ``verify`` are dropped (lossless: the rule would
  reject them) and the rest are decided by :func:`neardup.batch.blocks.decide_pair`, in ``jobs``
  processes when there are many;
* **components** by a compiled union-find, the smallest node id the cluster id;
* **canonical** per cluster of two or more by one Arrow sort on the policy's keys (the
  order :func:`neardup.batch.graph.choose_canonical` applies).

The answer (:class:`ArrayAnswer`) equals the record path's verdict for verdict
(``tests/test_batch_arrays.py``); :func:`neardup.batch.files.write_verdicts` writes it.

>>> from neardup.batch import BatchRecord
>>> fa = FingerprintArrays.from_records([BatchRecord("https://a.example/1", "d1", 5),
...                                      BatchRecord("https://b.example/1", "d1", 5)])
>>> ans = solve(fa, k=3, verify=0.3)
>>> [STATUSES[s] for s in ans.status.tolist()], ans.canonical.tolist()
(['new', 'exact'], [0, 0])
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neardup.batch import _kernels as BK
from neardup.canonical import CanonicalPolicy, policy_from_spec
from neardup.errors import ConfigError
from neardup.fingerprint.core import DEFAULT_CONFIG
from neardup.matching import FAR_TITLE_VERIFY, GUARD_MAX_LENGTH
from neardup.sketch import sketch_size
from neardup.urls import host_of

#: status codes of :attr:`ArrayAnswer.status`
STATUSES = ("new", "exact", "near", "empty")
#: bytes of the spec's sketch (64): the 4-byte shingle count and its one-byte bins, the size the
#: service accepts (:meth:`neardup.service.models.FingerprintIn.fingerprint`) and every
#: fingerprint Parquet reader requires (:func:`neardup.batch.files.check_fingerprint_file`)
SKETCH_BYTES = sketch_size(DEFAULT_CONFIG.sketch_bins)
#: a URL whose host is read from its ``scheme://authority`` prefix (anything else: per row)
_PREFIX = r"^(?P<p>[A-Za-z][A-Za-z0-9+.\-]*://[^/?#\\\x00-\x20\x7f]*)(?:[/?#]|$)"
CHUNK_ROWS = 1 << 20
_log = logging.getLogger("neardup.batch")


def _pa() -> Any:
    import pyarrow as pa

    return pa


def _pc() -> Any:
    import pyarrow.compute as pc

    return pc


def simhash_int64(col: Any) -> Any:
    """A SimHash column (int64, or uint64: the unsigned value) as int64, the unsigned value in
    two's complement (:data:`neardup.batch.files.PARQUET_COLUMNS`); :class:`ConfigError` for any
    other type (a float or a string is no SimHash)."""
    pa, pc = _pa(), _pc()
    if col.type == pa.uint64():
        return pc.cast(col, pa.int64(), safe=False)  # the same 64 bits
    if col.type != pa.int64() and not pa.types.is_null(col.type):
        raise ConfigError(f"fingerprint column 'simhash' is {col.type}, expected int64 or uint64")
    return col.cast(pa.int64())


def _strings(col: Any, name: str, nullable: bool) -> Any:
    """A column as one large_string Arrow array (no 2 GB limit)."""
    pa, pc = _pa(), _pc()
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_null(col.type)):
        raise ConfigError(f"fingerprint column {name!r} is {col.type}, expected string")
    arr = col.cast(pa.large_string())
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if not nullable and arr.null_count:
        raise ConfigError(f"fingerprint column {name!r} has nulls")
    return arr if nullable else pc.fill_null(arr, "")


def _numbers(col: Any, dtype: Any, fill: Any) -> np.ndarray:
    pa, pc = _pa(), _pc()
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(pc.fill_null(arr, fill).to_numpy(zero_copy_only=False), dtype=dtype)


@dataclass
class FingerprintArrays:
    """The columns of :data:`neardup.batch.files.PARQUET_COLUMNS` as arrays (module docs); rows in
    input order. ``sketch`` holds zeros where ``has_sketch`` is False; a sketch of another
    width than 64 bytes sits in ``odd_sketch`` (row -> bytes)."""

    url: Any
    digest: Any
    simhash: np.ndarray
    empty: np.ndarray
    sketch: np.ndarray
    has_sketch: np.ndarray
    title: Any
    length: np.ndarray
    canonical_link: Any
    first_seen: np.ndarray
    priority: np.ndarray
    has_priority: np.ndarray
    odd_sketch: dict[int, bytes] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.simhash.shape[0])

    @classmethod
    def from_table(cls, table: Any) -> FingerprintArrays:
        """From an Arrow table with (some of) the columns of ``PARQUET_COLUMNS``; ``url``,
        ``digest`` and ``simhash`` required, without nulls (:class:`ConfigError`)."""
        names = set(table.column_names)
        return cls.from_columns(lambda c: table.column(c) if c in names else None, table.num_rows)

    @classmethod
    def from_columns(cls, column: Any, n: int) -> FingerprintArrays:
        """From ``column(name)``: an Arrow (chunked) array of that column, or None when the
        input has none; called once a column, in turn (a reader may load one at a time)."""
        pa = _pa()

        def col(name: str, typ: Any) -> Any:
            got = column(name)
            if got is None and name in ("url", "digest", "simhash"):
                raise ConfigError(f"not a fingerprint table (missing {name})")
            return pa.nulls(n, typ) if got is None else got

        sim_col = col("simhash", pa.int64())
        if sim_col.null_count:
            raise ConfigError("fingerprint column 'simhash' has nulls")
        simhash = _numbers(simhash_int64(sim_col), np.int64, 0).view(np.uint64)
        del sim_col
        sketch, has, odd = sketch_column_matrix(col("sketch", pa.binary()))
        prio_col = col("priority", pa.float64())
        prio_col = prio_col.combine_chunks() if isinstance(prio_col, pa.ChunkedArray) else prio_col
        return cls(url=_strings(col("url", pa.string()), "url", False),
                   digest=_strings(col("digest", pa.string()), "digest", False),
                   simhash=simhash,
                   empty=_numbers(col("empty", pa.bool_()), bool, False),
                   sketch=sketch, has_sketch=has, odd_sketch=odd,
                   title=_strings(col("title", pa.string()), "title", True),
                   length=_numbers(col("length", pa.int64()).cast(pa.int64()), np.int64, 0),
                   canonical_link=_strings(col("canonical_link", pa.string()), "canonical_link", True),
                   first_seen=_numbers(col("first_seen", pa.float64()).cast(pa.float64()), np.float64, 0.0),
                   priority=_numbers(prio_col.cast(pa.float64()), np.float64, 0.0),
                   has_priority=np.asarray(prio_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool))

    @classmethod
    def from_records(cls, records: Sequence[Any]) -> FingerprintArrays:
        """From :class:`neardup.batch.graph.BatchRecord` rows (what ``dedup_batch`` is given)."""
        return cls.from_table(records_table(records))

    def sketch_bytes(self, row: int) -> bytes | None:
        if self.has_sketch[row]:
            return self.sketch[row].tobytes()
        return self.odd_sketch.get(row)

    def text(self, column: str, row: int) -> str | None:
        value: str | None = getattr(self, column)[row].as_py()
        return value


def records_table(records: Sequence[Any]) -> Any:
    """An Arrow table of :class:`neardup.batch.graph.BatchRecord` rows (the fingerprint columns
    but ``signature``); raises UnicodeEncodeError for strings that are not UTF-8."""
    pa = _pa()
    sims = [r.simhash for r in records]
    return pa.table({
        "url": pa.array([r.url for r in records], pa.large_string()),
        "digest": pa.array([r.digest for r in records], pa.large_string()),
        "simhash": pa.array(np.array(sims, dtype=np.uint64).view(np.int64) if sims else np.zeros(0, np.int64)),
        "empty": pa.array([bool(r.empty) for r in records], pa.bool_()),
        "sketch": pa.array([r.sketch for r in records], pa.binary()),
        "title": pa.array([r.title for r in records], pa.large_string()),
        "length": pa.array([int(r.length) for r in records], pa.int64()),
        "canonical_link": pa.array([r.canonical_link for r in records], pa.large_string()),
        "first_seen": pa.array([float(r.first_seen) for r in records], pa.float64()),
        "priority": pa.array([None if r.priority is None else float(r.priority) for r in records], pa.float64()),
    })


def sketch_column_matrix(col: Any) -> tuple[np.ndarray, np.ndarray, dict[int, bytes]]:
    """(n, 64) uint8 sketches (zeros where none), which rows have one of 64 bytes, and the
    rows whose sketch has another width."""
    pa = _pa()
    arr = col.cast(pa.large_binary())
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    n = len(arr)
    out = np.zeros((n, SKETCH_BYTES), dtype=np.uint8)
    if n == 0 or arr.null_count == n:
        return out, np.zeros(n, dtype=bool), {}
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    lengths = np.diff(offsets)
    has = valid & (lengths == SKETCH_BYTES)
    rows = np.flatnonzero(has)
    for lo in range(0, rows.shape[0], CHUNK_ROWS):
        part = rows[lo:lo + CHUNK_ROWS]
        out[part] = data[offsets[part][:, None] + np.arange(SKETCH_BYTES)]
    odd = {int(i): bytes(data[offsets[i]:offsets[i + 1]]) for i in np.flatnonzero(valid & ~has).tolist()}
    return out, has, odd


def host_codes(url: Any) -> tuple[np.ndarray, list[str | None]]:
    """Each URL's host (:func:`neardup.urls.host_of`, None for '') as a code into the list
    returned: read once per distinct ``scheme://authority`` prefix (urlsplit's host depends
    on nothing else), per row only for URLs of another shape."""
    pa, pc = _pa(), _pc()
    n = len(url)
    codes = np.empty(n, dtype=np.int32)
    hosts: list[str | None] = []
    index: dict[str | None, int] = {}

    def code(h: str | None) -> int:
        if h not in index:
            index[h] = len(hosts)
            hosts.append(h)
        return index[h]

    for lo in range(0, n, CHUNK_ROWS):
        part = url.slice(lo, min(CHUNK_ROWS, n - lo))
        enc = pc.dictionary_encode(pc.struct_field(pc.extract_regex(part, _PREFIX), [0]))
        idx = enc.indices
        mapped = np.array([code(host_of(p) or None) for p in enc.dictionary.to_pylist()] + [0], dtype=np.int32)
        ok = np.asarray(idx.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        got = np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        codes[lo:lo + len(part)] = mapped[got]
        for i in np.flatnonzero(~ok).tolist():
            codes[lo + i] = code(host_of(part[i].as_py()) or None)
    del pa
    return codes, hosts


def hash_messages(arr: Any) -> np.ndarray:
    pa = _pa()
    arr = arr.cast(pa.large_binary())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return BK.blake2b63(offsets, data)


def _resident_gb() -> float:
    """This process's resident memory now (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096 / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def _large(text: str) -> Any:
    return _pa().scalar(text, _pa().large_string())


def node_ids(fa: FingerprintArrays, hcodes: np.ndarray, hosts: list[str | None]) -> np.ndarray:
    """Every row's node: :func:`neardup.batch.graph.node_id` (digest, host, title) for a page with
    content, :func:`neardup.batch.graph.empty_node_id` (url, digest) for an empty one."""
    pa, pc = _pa(), _pc()
    host_str = pa.array([h or "" for h in hosts], pa.large_string())
    out = np.empty(fa.n, dtype=np.int64)
    for lo in range(0, fa.n, CHUNK_ROWS):
        hi = min(fa.n, lo + CHUNK_ROWS)
        title = pc.fill_null(fa.title.slice(lo, hi - lo), "\x01")
        msg = pc.binary_join_element_wise(_large("n"), fa.digest.slice(lo, hi - lo),
                                          host_str.take(pa.array(hcodes[lo:hi])), title, _large("\x00"))
        out[lo:hi] = hash_messages(msg)
    empty = np.flatnonzero(fa.empty)
    if empty.shape[0]:
        take = pa.array(empty)
        out[empty] = hash_messages(pc.binary_join_element_wise(_large("e"), fa.url.take(take), fa.digest.take(take),
                                                                _large("\x00")))
    return out


@dataclass
class ArrayAnswer:
    """The batch answer on arrays, rows in input order: ``status`` (codes of
    :data:`STATUSES`), ``cluster`` ids, ``canonical`` (the canonical page's row),
    ``distance`` (-1 for none); ``pairs``: the linked digest groups as rows of their
    representatives (a, b), distance and score (NaN for none); ``version``: codes of
    :data:`neardup.batch.graph.VERSIONS` (-1: none; None: no row is a re-fetch)."""

    arrays: FingerprintArrays
    status: np.ndarray
    cluster: np.ndarray
    canonical: np.ndarray
    distance: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    timings: dict[str, float] = field(default_factory=dict)
    version: np.ndarray | None = None

    def summary(self) -> dict[str, int]:
        """What :meth:`neardup.batch.graph.BatchResult.summary` gives (statuses in order of first
        appearance)."""
        out = {"pages": int(self.status.shape[0]), "clusters": int(np.unique(self.cluster).shape[0])}
        codes, first, counts = np.unique(self.status, return_index=True, return_counts=True)
        for i in np.argsort(first).tolist():
            out[STATUSES[int(codes[i])]] = int(counts[i])
        out["refetched"] = 0 if self.version is None else int((self.version >= 0).sum())
        return out


@dataclass
class _Groups:
    """Digest groups of the rows with content: ``rep`` the row of each group's smallest
    node, ``of_row`` each row's group (-1 for empty rows), ``nodes``: (group, node, row)
    of each distinct node, sorted."""

    rep: np.ndarray
    of_row: np.ndarray
    node_group: np.ndarray
    node_id: np.ndarray
    node_row: np.ndarray


def _groups(fa: FingerprintArrays, dcode: np.ndarray, nodes: np.ndarray) -> _Groups:
    ne = np.flatnonzero(~fa.empty)
    codes = dcode[ne]
    uniq, g = np.unique(codes, return_inverse=True)
    of_row = np.full(fa.n, -1, dtype=np.int64)
    of_row[ne] = g
    order = np.lexsort((ne, nodes[ne], g))
    sg, sn = g[order], nodes[ne][order]
    first = np.r_[True, sg[1:] != sg[:-1]] if sg.shape[0] else np.zeros(0, bool)
    rep = ne[order][first]
    distinct = np.r_[True, (sg[1:] != sg[:-1]) | (sn[1:] != sn[:-1])] if sg.shape[0] else np.zeros(0, bool)
    del uniq
    return _Groups(rep=rep, of_row=of_row, node_group=sg[distinct], node_id=sn[distinct],
                   node_row=ne[order][distinct])


def solve(fa: FingerprintArrays, *, k: int, verify: float | None, policy: str | CanonicalPolicy | None = None,
          bands: bool = True, max_bucket: int | None = None, exact_k: bool = True, jobs: int = 1) -> ArrayAnswer:
    """The batch answer (module docs) of ``fa`` for SimHash distance ``k`` and sketch
    threshold ``verify``; the other arguments as :func:`neardup.batch.dedup.dedup_batch`'s."""
    import time

    from neardup.batch.candidates import linked_pairs

    pc = _pc()
    policy = policy_from_spec(policy)
    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal t0
        now = time.perf_counter()
        timings[name] = round(now - t0, 3)
        _log.info("batch %s: %.1f s, %.2f GB resident", name, now - t0, _resident_gb())
        t0 = now

    hcodes, hosts = host_codes(fa.url)
    nodes = node_ids(fa, hcodes, hosts)
    dcode = np.asarray(pc.dictionary_encode(fa.digest).indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    grp = _groups(fa, dcode, nodes)
    _pa().default_memory_pool().release_unused()  # the hash tables of the encodings
    lap("nodes")
    edges_a, edges_b = _group_edges(fa, grp, hcodes, hosts)
    lap("groups")
    ga, gb, dist, score = linked_pairs(fa, grp.rep, nodes[grp.rep], k=k, verify=verify, bands=bands,
                                       max_bucket=max_bucket,
                                       exact_k=exact_k, jobs=jobs, lap=lap)
    la, lb = _link_edges(fa, grp, hcodes, hosts, ga, gb, dist, score, k)
    cluster = _components(nodes, np.concatenate([edges_a, la]), np.concatenate([edges_b, lb]))
    lap("components")
    canon = canonical_rows(fa, cluster, policy)
    lap("canonical")
    status = np.where(fa.empty, 3, np.where(np.arange(fa.n) == canon, 0, np.where(dcode == dcode[canon], 1, 2)))
    distance = np.bitwise_count(fa.simhash ^ fa.simhash[canon]).astype(np.int64)
    distance[fa.empty] = -1
    reps = grp.rep
    return ArrayAnswer(fa, status.astype(np.int8), cluster, canon, distance,
                       (reps[ga], reps[gb], dist, score), timings)


def _node_sides(fa: FingerprintArrays, grp: _Groups, hcodes: np.ndarray, hosts: list[str | None],
                g: int, cache: dict[int, list[tuple[int, str | None, str | None]]]) -> list[tuple[int, str | None,
                                                                                              str | None]]:
    """(node, host, title) of each distinct node of group ``g`` (what ``pair_edges`` takes)."""
    if g not in cache:
        lo, hi = np.searchsorted(grp.node_group, [g, g + 1])
        cache[g] = [(int(grp.node_id[i]), hosts[hcodes[grp.node_row[i]]], fa.text("title", int(grp.node_row[i])))
                    for i in range(int(lo), int(hi))]
    return cache[g]


def _group_edges(fa: FingerprintArrays, grp: _Groups, hcodes: np.ndarray,
                 hosts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Node edges inside digest groups (exact copies; ``pair_edges(nodes, None, short)``):
    a star from the smallest node for long texts, the guard's edges for short ones."""
    from neardup.batch.graph import pair_edges

    gnode = grp.node_id[np.r_[True, grp.node_group[1:] != grp.node_group[:-1]]] if grp.node_group.shape[0] else \
        np.zeros(0, np.int64)
    sizes = np.bincount(grp.node_group, minlength=grp.rep.shape[0]) if grp.node_group.shape[0] else np.zeros(0, int)
    multi = sizes[grp.node_group] > 1 if grp.node_group.shape[0] else np.zeros(0, bool)
    short_group = fa.length[grp.rep] < GUARD_MAX_LENGTH
    star = multi & ~short_group[grp.node_group] & (grp.node_id != gnode[grp.node_group])
    ea, eb = [gnode[grp.node_group[star]]], [grp.node_id[star]]
    cache: dict[int, list[tuple[int, str | None, str | None]]] = {}
    extra = [e for g in np.flatnonzero((sizes > 1) & short_group).tolist()
             for e in pair_edges(_node_sides(fa, grp, hcodes, hosts, g, cache), None, True)]
    if extra:
        ea.append(np.array([x for x, _ in extra], dtype=np.int64))
        eb.append(np.array([y for _, y in extra], dtype=np.int64))
    return np.concatenate(ea).astype(np.int64), np.concatenate(eb).astype(np.int64)


def _link_edges(fa: FingerprintArrays, grp: _Groups, hcodes: np.ndarray, hosts: list[str | None],
                ga: np.ndarray, gb: np.ndarray, dist: np.ndarray, score: np.ndarray,
                k: int) -> tuple[np.ndarray, np.ndarray]:
    """Node edges of linked pairs of groups: the two smallest nodes, or (short texts, and
    beyond k pairs under :data:`~neardup.matching.FAR_TITLE_VERIFY`) ``pair_edges``."""
    from neardup.batch.graph import pair_edges

    gnode = grp.node_id[np.r_[True, grp.node_group[1:] != grp.node_group[:-1]]] if grp.node_group.shape[0] else \
        np.zeros(0, np.int64)
    lengths = fa.length[grp.rep]
    sc = np.where(np.isnan(score), 0.0, score)
    short = (np.minimum(lengths[ga], lengths[gb]) < GUARD_MAX_LENGTH) | ((dist > k) & (sc < FAR_TITLE_VERIFY))
    ea, eb = [gnode[ga[~short]]], [gnode[gb[~short]]]
    cache: dict[int, list[tuple[int, str | None, str | None]]] = {}
    extra = [e for a, b in zip(ga[short].tolist(), gb[short].tolist())
             for e in pair_edges(_node_sides(fa, grp, hcodes, hosts, a, cache),
                                 _node_sides(fa, grp, hcodes, hosts, b, cache), True)]
    if extra:
        ea.append(np.array([x for x, _ in extra], dtype=np.int64))
        eb.append(np.array([y for _, y in extra], dtype=np.int64))
    return np.concatenate(ea).astype(np.int64), np.concatenate(eb).astype(np.int64)


def _components(nodes: np.ndarray, ea: np.ndarray, eb: np.ndarray) -> np.ndarray:
    """Each row's cluster: the smallest node id of its node's connected component."""
    uniq, dense = np.unique(nodes, return_inverse=True)
    parent = np.arange(uniq.shape[0], dtype=np.int64)
    BK.union_all(parent, np.searchsorted(uniq, ea), np.searchsorted(uniq, eb))
    return uniq[parent[dense.reshape(-1)]]


def canonical_rows(fa: FingerprintArrays, cluster: np.ndarray, policy: CanonicalPolicy) -> np.ndarray:
    """Each row's cluster's canonical row by ``policy``: the first member in the order of
    :func:`neardup.batch.graph.choose_canonical` (the policy's keys, then ``first-seen``'s rank:
    URL, fetch time, digest, title, link, priority, input position), one Arrow sort over
    the rows of clusters of two or more."""
    pa, pc = _pa(), _pc()
    _, inv, counts = np.unique(cluster, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    canon = np.arange(fa.n, dtype=np.int64)
    rows = np.flatnonzero(counts[inv] > 1)
    if rows.shape[0] == 0:
        return canon
    cl = inv[rows]
    fs, prio, has_p = fa.first_seen[rows], fa.priority[rows], fa.has_priority[rows]
    if np.isnan(fs).any() or np.isnan(prio[has_p]).any():
        return _canonical_rows_python(fa, rows, cl, policy, canon)
    take = pa.array(rows)
    url = fa.url.take(take)
    cols: dict[str, Any] = {"cl": pa.array(cl)}
    for name in policy.names:
        if name == "rel-canonical":
            cols["named"] = pa.array(np.where(_named(fa, rows, cl), 0, 1).astype(np.int8))
        elif name == "shortest-url":
            cols["url_len"], cols["url_short"] = pc.utf8_length(url), url
        elif name == "https":
            cols["https"] = pc.if_else(pc.starts_with(pc.utf8_lower(url), "https:"), 0, 1)
        elif name == "priority":
            cols["prio_none"] = pa.array(np.where(has_p, 0, 1).astype(np.int8))
            cols["prio"] = pa.array(np.where(has_p, -prio, 0.0))
    cols.update({"fs": pa.array(fs), "url": url, "fs2": pa.array(fs), "digest": fa.digest.take(take),
                 "title": pc.fill_null(fa.title.take(take), ""),
                 "link": pc.fill_null(fa.canonical_link.take(take), ""),
                 "prio_order": pa.array(np.where(has_p, prio, -math.inf)), "row": take})
    table = pa.table(cols)
    order = np.asarray(pc.sort_indices(table, sort_keys=[(c, "ascending") for c in cols]).to_numpy())
    scl = cl[order]
    first = np.r_[True, scl[1:] != scl[:-1]]
    winner = np.empty(int(cl.max()) + 1, dtype=np.int64)
    winner[scl[first]] = rows[order[first]]
    canon[rows] = winner[cl]
    return canon


def _named(fa: FingerprintArrays, rows: np.ndarray, cl: np.ndarray) -> np.ndarray:
    """Whether some member of its cluster names the row's URL in ``rel=canonical``
    (:meth:`neardup.canonical.CanonicalPolicy.choose`): Python only for clusters with a link."""
    from neardup.urls import comparable_link, comparable_url

    out = np.zeros(rows.shape[0], dtype=bool)
    has_link = np.asarray(fa.canonical_link.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    linked = np.unique(cl[has_link[rows]])
    if linked.shape[0] == 0:
        return out
    sel = np.flatnonzero(np.isin(cl, linked))
    links: dict[int, set[str]] = {}
    for i in sel.tolist():
        key = comparable_link(fa.text("canonical_link", int(rows[i])))
        if key is not None:
            links.setdefault(int(cl[i]), set()).add(key)
    for i in sel.tolist():
        out[i] = comparable_url(fa.text("url", int(rows[i])) or "") in links.get(int(cl[i]), set())
    return out


def _canonical_rows_python(fa: FingerprintArrays, rows: np.ndarray, cl: np.ndarray, policy: CanonicalPolicy,
                           canon: np.ndarray) -> np.ndarray:
    """:func:`neardup.batch.graph.choose_canonical` per cluster (times or priorities with NaN,
    whose order only Python's comparisons define)."""
    from neardup.batch.graph import choose_canonical

    order = np.argsort(cl, kind="stable")
    scl = cl[order]
    starts = np.flatnonzero(np.r_[True, scl[1:] != scl[:-1]])
    for s, e in zip(starts.tolist(), np.r_[starts[1:], scl.shape[0]].tolist()):
        members = rows[order[s:e]]
        tuples = [(fa.text("url", m), float(fa.first_seen[m]), fa.text("digest", m), fa.text("title", m),
                   fa.text("canonical_link", m), float(fa.priority[m]) if fa.has_priority[m] else None)
                  for m in members.tolist()]
        canon[members] = members[choose_canonical(policy, tuples)]
    return canon


def to_result(answer: ArrayAnswer, errors: list[str] | None = None) -> Any:
    """The :class:`neardup.batch.graph.BatchResult` of an answer (one Python object a page: for
    the library's callers, not for 10^7 pages)."""
    from neardup.batch.graph import VERSIONS, BatchResult, BatchVerdict

    fa = answer.arrays
    urls, digests = fa.url.to_pylist(), fa.digest.to_pylist()
    vers = answer.version.tolist() if answer.version is not None else [-1] * fa.n
    verdicts = [BatchVerdict(urls[i], digests[i], sim, STATUSES[st], cl, urls[c], urls[c] if st in (1, 2) else None,
                             None if d < 0 else d, None if ver < 0 else VERSIONS[ver])
                for i, (sim, st, cl, c, d, ver) in enumerate(zip(fa.simhash.tolist(), answer.status.tolist(),
                                                                 answer.cluster.tolist(), answer.canonical.tolist(),
                                                                 answer.distance.tolist(), vers))]
    clusters: dict[int, list[int]] = {}
    for i, cl in enumerate(answer.cluster.tolist()):
        clusters.setdefault(cl, []).append(i)
    ra, rb, dist, score = answer.pairs
    pairs = []
    for a, b, d, s in zip(ra.tolist(), rb.tolist(), dist.tolist(), score.tolist()):
        da, db = digests[a], digests[b]
        pairs.append((min(da, db), max(da, db), d, None if math.isnan(s) else s))
    pairs.sort(key=lambda p: (p[0], p[1]))
    return BatchResult(verdicts, pairs, clusters, list(errors or []))


def solve_records(rows: Sequence[Any], errors: list[str], **kw: Any) -> Any:
    """:func:`solve` on :class:`neardup.batch.graph.BatchRecord` rows, as a
    :class:`neardup.batch.graph.BatchResult`; None when a string is not UTF-8 (lone surrogates,
    which Arrow cannot hold: the record path takes those)."""
    try:
        arrays = FingerprintArrays.from_records(rows)
    except UnicodeEncodeError:
        return None
    return to_result(solve(arrays, **kw), errors)

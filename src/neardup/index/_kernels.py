"""Compiled (numba) loops of the permuted-table index (see :mod:`neardup.index.permuted`).

A *table* is a sorted uint64 array of permuted fingerprints; its *directory* holds, for every
value of the top ``d`` permuted bits (the *key*, inside the table's leading blocks), where that
bucket starts (``2**d + 1`` offsets). A probe permutes the query like the table and reads the
buckets of every key within the table's probe radius of the query's key (``pmasks[t, :pcount[t]]``:
the d-bit masks of weight <= radius, 0 first; radius 0 is Manku's single bucket, radius r is
multi-index hashing), keeping the entries whose full Hamming distance is at most k; values are
un-permuted before they are returned.

A pair whose XOR (original bit order) is x is *covered* by table t when x has at most
``radii[t]`` bits inside the table's leading blocks (``leads[t]``); the probe of a covering
table always finds it (its key differs in at most that many of the key's bits). Every
pair is reported by the first covering table only, so nothing comes out twice.

Permutations move whole blocks: block ``b`` (``masks[b]`` wide at bit ``src[b]``) goes to bit
``dst[b]``; the inverse swaps ``src`` and ``dst``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from neardup._numba import popcount64, prefetch

U64 = np.uint64


@njit(cache=True, inline="always")
def permute_one(v, src, dst, masks):
    out = U64(0)
    for b in range(src.shape[0]):
        out |= ((v >> U64(src[b])) & masks[b]) << U64(dst[b])
    return out


@njit(cache=True, inline="always")
def owned_by(x, t, leads, radii):
    """Whether table ``t`` reports a pair whose XOR (original bit order) is ``x``: it is the
    first table that covers it (at most ``radii[t]`` differing bits in its leading blocks)."""
    if popcount64(x & leads[t]) > U64(radii[t]):
        return False
    for t2 in range(t):
        if popcount64(x & leads[t2]) <= U64(radii[t2]):
            return False
    return True


@njit(cache=True)
def permute_many(values, src, dst, masks):
    out = np.empty(values.shape[0], dtype=np.uint64)
    for i in range(values.shape[0]):
        out[i] = permute_one(values[i], src, dst, masks)
    return out


@njit(cache=True)
def build_directory(sorted_values, d):
    """Bucket offsets of a sorted table on its top ``d`` bits (``2**d + 1`` entries)."""
    n_buckets = 1 << d
    counts = np.zeros(n_buckets + 1, dtype=np.int64)
    shift = U64(64 - d)
    for i in range(sorted_values.shape[0]):
        counts[np.int64(sorted_values[i] >> shift) + 1] += 1
    for i in range(1, n_buckets + 1):
        counts[i] += counts[i - 1]
    return counts


@njit(cache=True, inline="always")
def _grow(buf, need):
    if need <= buf.shape[0]:
        return buf
    out = np.empty(max(need, 2 * buf.shape[0]), dtype=buf.dtype)
    out[: buf.shape[0]] = buf
    return out


@njit(cache=True)
def scan(values, queries, k):
    """Brute force: all (query index, stored position, distance <= k)."""
    qidx = np.empty(64, dtype=np.int64)
    pos = np.empty(64, dtype=np.int64)
    dist = np.empty(64, dtype=np.int64)
    c = 0
    kk = U64(k)
    for qi in range(queries.shape[0]):
        q = queries[qi]
        for i in range(values.shape[0]):
            pc = popcount64(values[i] ^ q)
            if pc <= kk:
                if c >= pos.shape[0]:
                    qidx = _grow(qidx, c + 1)
                    pos = _grow(pos, c + 1)
                    dist = _grow(dist, c + 1)
                qidx[c] = qi
                pos[c] = i
                dist[c] = np.int64(pc)
                c += 1
    return qidx[:c], pos[:c], dist[:c]


@njit(cache=True, nogil=True)
def join_partitioned(qtables, qdirs, d, src, dst, masks, leads, radii, pmasks, pcount, k,
                     chunk, tmp, sv, spos, counts, qv, sp_out, dist):
    """Manku's batch mode, cache-friendly: per table, the stored ``chunk`` is permuted and
    counting-sorted on its top ``d`` bits (``tmp``/``sv``/``spos`` are scratch space of the
    chunk's size, ``counts`` of ``2**d + 1``), then joined bucket by bucket with the query
    table: each stored bucket meets the query buckets of every key within the table's radius
    (one, the same key, at radius 0), a few entries that stay in cache while the stored bucket
    streams past. The query tables must hold distinct values. Releases the GIL (callers run
    blocks in threads).

    A pair is reported by the first table that covers it (as in :func:`probe_one`), so each
    (query value, stored position) comes out once, as a row of ``qv`` (query value),
    ``sp_out`` (stored position), ``dist``; returns the row count. Rows past their capacity
    are counted, not written: the caller grows them and joins the block again (no array is
    reallocated inside the loops, which would slow the pair loop tenfold)."""
    n_tables = qtables.shape[0]
    n = chunk.shape[0]
    n_buckets = np.int64(1) << d
    shift = U64(64 - d)
    kk = U64(k)
    cap = qv.shape[0]
    c = 0
    b: int | np.int64  # a bucket: the loop's counter, then a key's bucket
    for t in range(n_tables):
        counts[:] = 0
        for i in range(n):
            v = permute_one(chunk[i], src[t], dst[t], masks)
            tmp[i] = v
            counts[np.int64(v >> shift) + 1] += 1
        for b in range(1, n_buckets + 1):
            counts[b] += counts[b - 1]
        for i in range(n):  # counts[b] walks from bucket b's start to its end (= bucket b+1's start)
            v = tmp[i]
            b = np.int64(v >> shift)
            p = counts[b]
            sv[p] = v
            spos[p] = i
            counts[b] = p + 1
        qrow = qtables[t]
        start = np.int64(0)
        for b in range(n_buckets):
            end = counts[b]
            if start < end:
                for pi in range(pcount[t]):
                    qb = b ^ np.int64(pmasks[t, pi])
                    qlo = np.int64(qdirs[t, qb])
                    qhi = np.int64(qdirs[t, qb + 1])
                    if qlo == qhi:
                        continue
                    for i in range(start, end):
                        s = sv[i]
                        for j in range(qlo, qhi):
                            q = qrow[j]
                            pc = popcount64(s ^ q)
                            if pc > kk:
                                continue
                            x = permute_one(s ^ q, dst[t], src[t], masks)  # the XOR in the original order
                            if not owned_by(x, t, leads, radii):
                                continue
                            if c < cap:
                                qv[c] = permute_one(q, dst[t], src[t], masks)
                                sp_out[c] = spos[i]
                                dist[c] = np.int64(pc)
                            c += 1
            start = end
    return c


@njit(cache=True)
def search_ids(tables, dirs, d, src, dst, masks, leads, radii, pmasks, pcount, ident, ids, queries, k):
    """All (query index, id, stored value, distance) with distance <= k for a batch of
    queries: :func:`probe_one` per query, results gathered into arrays."""
    out = np.empty((3, 64), dtype=np.int64)
    qidx = np.empty(64, dtype=np.int64)
    c = 0
    for qi in range(queries.shape[0]):
        c_new = probe_one(tables, dirs, d, src, dst, masks, leads, radii, pmasks, pcount, ident, ids,
                          queries[qi], k, out, c)
        if c_new > out.shape[1]:
            bigger = np.empty((3, max(c_new, 2 * out.shape[1])), dtype=np.int64)
            bigger[:, :c] = out[:, :c]
            out = bigger
            c_new = probe_one(tables, dirs, d, src, dst, masks, leads, radii, pmasks, pcount, ident, ids,
                              queries[qi], k, out, c)
        qidx = _grow(qidx, c_new)
        qidx[c:c_new] = qi
        c = c_new
    vals = np.empty(c, dtype=np.uint64)
    for i in range(c):
        vals[i] = U64(out[1, i])
    return qidx[:c], out[0, :c].copy(), vals, out[2, :c].copy()


@njit(cache=True)
def probe_one(tables, dirs, d, src, dst, masks, leads, radii, pmasks, pcount, ident, ids, q, k, out, c):
    """One query against one level, for the online path: appends (id, value, distance) rows
    to ``out`` (3 x capacity, int64; values as their int64 bit pattern) from row ``c`` on and
    returns the new row count. Rows past the capacity are counted, not written: the caller
    grows ``out`` and asks again. A scalar query and no result arrays to box (each costs
    about a microsecond): the online path's call.

    Per table, the buckets of every key within the table's radius of the query's key are
    read (all bucket bounds first, then the first cache lines of every bucket requested at
    once, then the scans). A match is reported by the first table that covers it; a layout
    is exact precisely when such a table exists for every match, and it then holds the match
    in a probed bucket. Equal stored values sit side by side in a bucket: the first one
    emits every id stored with that value (binary search in the identity table), the others
    are skipped."""
    q = U64(q)
    n_tables = tables.shape[0]
    shift = U64(64 - d)
    base = tables[ident]
    n = base.shape[0]
    cap = out.shape[1]
    kk = U64(k)
    total = 0
    for t in range(n_tables):
        total += pcount[t]
    # all bucket bounds first: independent loads the CPU overlaps (one bucket after the
    # other, each directory miss would wait for the previous bucket's scan)
    los = np.empty(total, dtype=np.int64)
    his = np.empty(total, dtype=np.int64)
    qps = np.empty(n_tables, dtype=np.uint64)
    j = 0
    for t in range(n_tables):
        qp = permute_one(q, src[t], dst[t], masks)
        key = np.int64(qp >> shift)
        qps[t] = qp
        for pi in range(pcount[t]):
            kx = key ^ np.int64(pmasks[t, pi])
            los[j] = dirs[t, kx]
            his[j] = dirs[t, kx + 1]
            j += 1
    j = 0
    for t in range(n_tables):  # ask for every bucket's first cache lines at once
        row = tables[t]
        for _ in range(pcount[t]):
            lo = los[j]
            if lo < his[j]:
                prefetch(row, lo)
                if lo + 8 < his[j]:
                    prefetch(row, lo + 8)
            j += 1
    j = 0
    for t in range(n_tables):
        qp = qps[t]
        row = tables[t]
        for _ in range(pcount[t]):
            lo = los[j]
            hi = his[j]
            j += 1
            for i in range(lo, hi):
                if i > lo and row[i] == row[i - 1]:
                    continue
                pc = popcount64(row[i] ^ qp)
                if pc > kk:
                    continue
                v = permute_one(row[i], dst[t], src[t], masks)
                x = v ^ q
                if not owned_by(x, t, leads, radii):
                    continue
                # the identity table is sorted on the value itself: search only v's bucket
                vkey = np.int64(v >> shift)
                a = np.int64(dirs[ident, vkey])
                b = np.int64(dirs[ident, vkey + 1])
                while a < b:
                    m = (a + b) >> 1
                    if base[m] < v:
                        a = m + 1
                    else:
                        b = m
                while a < n and base[a] == v:
                    if c < cap:
                        out[0, c] = ids[a]
                        out[1, c] = np.int64(v)
                        out[2, c] = np.int64(pc)
                    c += 1
                    a += 1
    return c


@njit(cache=True)
def scan_one(values, ids, q, k, out, c):
    """Brute force of one query over a small buffer (the delta), appending like :func:`probe_one`."""
    q = U64(q)
    cap = out.shape[1]
    kk = U64(k)
    for i in range(values.shape[0]):
        pc = popcount64(values[i] ^ q)
        if pc <= kk:
            if c < cap:
                out[0, c] = ids[i]
                out[1, c] = np.int64(values[i])
                out[2, c] = np.int64(pc)
            c += 1
    return c


@njit(cache=True, nogil=True)
def join_values_range(sorted_perm, dirs_row, d, k, t, src, dst, masks, leads, radii, pmasks, pcount, key_lo, key_hi,
                      va, vb, dist):  # type: ignore[no-untyped-def]
    """The pair loop of :func:`join_values` over the keys ``key_lo <= key < key_hi``
    only, without the GIL: slices of one table's keys run on threads and together give the
    table's pairs."""
    c = 0
    cap = va.shape[0]
    kk = U64(k)
    for key in range(key_lo, key_hi):
        lo = np.int64(dirs_row[key])
        hi = np.int64(dirs_row[key + 1])
        if lo == hi:
            continue
        for pi in range(pcount[t]):
            key2 = key ^ np.int64(pmasks[t, pi])
            if key2 < key:
                continue
            lo2 = np.int64(dirs_row[key2])
            hi2 = np.int64(dirs_row[key2 + 1])
            for i in range(lo, hi):
                s = sorted_perm[i]
                first = i + 1 if key2 == key else lo2
                for j in range(first, hi2):
                    pc = popcount64(s ^ sorted_perm[j])
                    if pc > kk:
                        continue
                    a = permute_one(s, dst[t], src[t], masks)
                    b = permute_one(sorted_perm[j], dst[t], src[t], masks)
                    if not owned_by(a ^ b, t, leads, radii):
                        continue
                    if c < cap:
                        va[c] = a
                        vb[c] = b
                        dist[c] = np.int64(pc)
                    c += 1
    return c


@njit(cache=True)
def join_values(sorted_perm, dirs_row, d, k, t, src, dst, masks, leads, radii, pmasks, pcount, va, vb, dist):
    """Pairs of distinct values within distance k whose keys (top ``d`` bits) lie within
    table ``t``'s radius of each other (each pair of buckets visited once, from the smaller
    key), un-permuted, each reported only by the first table that covers the pair (so a pair
    comes out of exactly one table): (value a, value b, distance) rows written into ``va``,
    ``vb``, ``dist``; returns the row count. Rows past their capacity are counted, not
    written (the caller grows them and asks again): no array is reallocated inside the
    loops, which keeps the pair loop at about a nanosecond a pair."""
    return join_values_range(sorted_perm, dirs_row, d, k, t, src, dst, masks, leads, radii, pmasks, pcount, 0,
                             np.int64(1) << d, va, vb, dist)


@njit(cache=True)
def band_probe(qkeys, qnib, rows, dirs, keys, d, nib, dead, thr, out, agree):
    """Banded-LSH probe of one level (see :mod:`neardup.index.bands`): for each band j, the rows in
    the bucket of the query's 16-bit key ``qkeys[j]`` (top ``d`` bits; with ``keys`` non-empty
    the full key is compared), kept when at least ``thr`` of their packed nibbles (``nib``,
    rows of 7 uint32) agree with ``qnib`` and they are not ``dead``. Writes rows and their
    agreement to ``out`` / ``agree`` (a row found by several bands appears once per band);
    returns how many there are (larger than the buffers: call again with bigger ones)."""
    shift = 16 - d
    c = 0
    cap = out.shape[0]
    has_keys = keys.shape[0] > 0
    has_dead = dead.shape[0] > 0
    words = nib.shape[1]
    for j in range(qkeys.shape[0]):
        key = qkeys[j]
        b = key >> shift
        lo = np.int64(dirs[j, b])
        hi = np.int64(dirs[j, b + 1])
        for p in range(lo, hi):  # the bucket's nibble rows are random reads: ask for them first
            prefetch(nib, np.int64(rows[j, p]) * words)
        for p in range(lo, hi):
            if has_keys and np.int64(keys[j, p]) != key:
                continue
            row = np.int64(rows[j, p])
            z = 0
            for w in range(words):
                x = U64(nib[row, w] ^ qnib[w])
                t = (x | (x >> U64(1)) | (x >> U64(2)) | (x >> U64(3))) & U64(0x11111111)
                z += popcount64(t)
            z = 8 * words - z
            if z >= thr and not (has_dead and (dead[row >> 3] >> (row & 7)) & 1):
                if c < cap:
                    out[c] = row
                    agree[c] = z
                c += 1
    return c


@njit(cache=True)
def band_scan(keys, nib, qkeys, qnib, thr, out, agree):
    """:func:`band_probe` for the unsorted delta: every row with a band key equal to the
    query's (``keys`` (m, bands) uint16) and at least ``thr`` agreeing nibbles; each row once."""
    c = 0
    cap = out.shape[0]
    words = nib.shape[1]
    for row in range(keys.shape[0]):
        hit = False
        for j in range(qkeys.shape[0]):
            if np.int64(keys[row, j]) == qkeys[j]:
                hit = True
                break
        if not hit:
            continue
        z = 0
        for w in range(words):
            x = U64(nib[row, w] ^ qnib[w])
            t = (x | (x >> U64(1)) | (x >> U64(2)) | (x >> U64(3))) & U64(0x11111111)
            z += popcount64(t)
        z = 8 * words - z
        if z >= thr:
            if c < cap:
                out[c] = row
                agree[c] = z
            c += 1
    return c


@njit(cache=True)
def sketch_parts(raw, header, bands, words, qkeys, qnib):
    """Band keys (bin ``2j`` low byte, ``2j + 1`` high) and packed low nibbles (eight bins to a
    uint32) of one sketch's bytes ``raw`` (bins after ``header`` bytes), into ``qkeys`` / ``qnib``."""
    for j in range(bands):
        qkeys[j] = np.int64(raw[header + 2 * j]) | (np.int64(raw[header + 2 * j + 1]) << 8)
    for w in range(words):
        v = np.uint32(0)
        for i in range(8):
            v |= np.uint32(raw[header + 8 * w + i] & 0x0F) << np.uint32(4 * i)
        qnib[w] = v

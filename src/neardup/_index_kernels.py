"""Compiled (numba) loops of the permuted-table index (see :mod:`neardup.permuted`).

A *table* is a sorted uint64 array of permuted fingerprints; its *directory* holds, for every
value of the top ``d`` permuted bits, where that bucket starts (``2**d + 1`` offsets). A probe
permutes the query like the table, reads one bucket and keeps the entries whose full Hamming
distance is at most k; values are un-permuted before they are returned.

Permutations move whole blocks: block ``b`` (``masks[b]`` wide at bit ``src[b]``) goes to bit
``dst[b]``; the inverse swaps ``src`` and ``dst``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

U64 = np.uint64


@intrinsic
def popcount64(typingctx, x):  # type: ignore[no-untyped-def]
    """LLVM ctpop: one instruction on CPUs with POPCNT."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def prefetch(typingctx, arr, idx):  # type: ignore[no-untyped-def]
    """LLVM prefetch (read, keep in all cache levels) of ``arr[idx]``'s cache line: a hint,
    never a fault, whatever the index."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def permute_one(v, src, dst, masks):
    out = U64(0)
    for b in range(src.shape[0]):
        out |= ((v >> U64(src[b])) & masks[b]) << U64(dst[b])
    return out


@njit(cache=True, inline="always")
def owned_by(x, t, leads):
    """Whether table ``t`` reports a pair whose XOR (original bit order) is ``x``: it is the
    first table whose leading blocks the pair shares in full."""
    if x & leads[t] != U64(0):
        return False
    for t2 in range(t):
        if x & leads[t2] == U64(0):
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
def join_partitioned(qtables, qdirs, d, src, dst, masks, leads, k, chunk, tmp, sv, spos, counts):
    """Manku's batch mode, cache-friendly: per table, the stored ``chunk`` is permuted and
    counting-sorted on its top ``d`` bits (``tmp``/``sv``/``spos`` are scratch space of the
    chunk's size, ``counts`` of ``2**d + 1``), then joined bucket by bucket with the query
    table, whose bucket (a few entries) stays in L1 while the stored bucket streams past it.
    The query tables must hold distinct values. Releases the GIL (callers run blocks in
    threads).

    A pair is reported by the first table whose leading blocks it shares (as in
    :func:`search_ids`), so each (query value, stored position) comes out once. Returns
    (query value, stored position, distance)."""
    n_tables = qtables.shape[0]
    n = chunk.shape[0]
    n_buckets = np.int64(1) << d
    shift = U64(64 - d)
    kk = U64(k)
    qv = np.empty(256, dtype=np.uint64)
    sp_out = np.empty(256, dtype=np.int64)
    dist = np.empty(256, dtype=np.int64)
    c = 0
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
            qlo = np.int64(qdirs[t, b])
            qhi = np.int64(qdirs[t, b + 1])
            if qlo < qhi:
                for i in range(start, end):
                    s = sv[i]
                    for j in range(qlo, qhi):
                        q = qrow[j]
                        pc = popcount64(s ^ q)
                        if pc > kk:
                            continue
                        x = permute_one(s ^ q, dst[t], src[t], masks)  # the XOR in the original order
                        if not owned_by(x, t, leads):
                            continue
                        if c >= qv.shape[0]:
                            qv = _grow(qv, c + 1)
                            sp_out = _grow(sp_out, c + 1)
                            dist = _grow(dist, c + 1)
                        qv[c] = permute_one(q, dst[t], src[t], masks)
                        sp_out[c] = spos[i]
                        dist[c] = np.int64(pc)
                        c += 1
            start = end
    return qv[:c], sp_out[:c], dist[:c]


@njit(cache=True)
def search_ids(tables, dirs, d, src, dst, masks, leads, ident, ids, queries, k):
    """All (query index, id, stored value, distance) with distance <= k for a batch of
    queries: :func:`probe_one` per query, results gathered into arrays."""
    out = np.empty((3, 64), dtype=np.int64)
    qidx = np.empty(64, dtype=np.int64)
    c = 0
    for qi in range(queries.shape[0]):
        c_new = probe_one(tables, dirs, d, src, dst, masks, leads, ident, ids, queries[qi], k, out, c)
        if c_new > out.shape[1]:
            bigger = np.empty((3, max(c_new, 2 * out.shape[1])), dtype=np.int64)
            bigger[:, :c] = out[:, :c]
            out = bigger
            c_new = probe_one(tables, dirs, d, src, dst, masks, leads, ident, ids, queries[qi], k, out, c)
        qidx = _grow(qidx, c_new)
        qidx[c:c_new] = qi
        c = c_new
    vals = np.empty(c, dtype=np.uint64)
    for i in range(c):
        vals[i] = U64(out[1, i])
    return qidx[:c], out[0, :c].copy(), vals, out[2, :c].copy()


@njit(cache=True)
def probe_one(tables, dirs, d, src, dst, masks, leads, ident, ids, q, k, out, c):
    """One query against one level, for the online path: appends (id, value, distance) rows
    to ``out`` (3 x capacity, int64; values as their int64 bit pattern) from row ``c`` on and
    returns the new row count. Rows past the capacity are counted, not written: the caller
    grows ``out`` and asks again. A scalar query and no result arrays to box (each costs
    about a microsecond): the online path's call.

    A match is reported by the first table whose leading blocks it shares in full with the
    query (``leads[t]``: those bits in the original order); a layout is exact precisely when
    such a table exists for every match, and it then holds the match in the probed bucket.
    Equal stored values sit side by side in a bucket: the first one emits every id stored
    with that value (binary search in the identity table), the others are skipped."""
    q = U64(q)
    n_tables = tables.shape[0]
    shift = U64(64 - d)
    base = tables[ident]
    n = base.shape[0]
    cap = out.shape[1]
    kk = U64(k)
    # all bucket bounds first: independent loads the CPU overlaps (one table after the
    # other, each directory miss would wait for the previous bucket's scan)
    los = np.empty(n_tables, dtype=np.int64)
    his = np.empty(n_tables, dtype=np.int64)
    qps = np.empty(n_tables, dtype=np.uint64)
    for t in range(n_tables):
        qp = permute_one(q, src[t], dst[t], masks)
        key = np.int64(qp >> shift)
        qps[t] = qp
        los[t] = dirs[t, key]
        his[t] = dirs[t, key + 1]
    for t in range(n_tables):  # ask for every bucket's cache lines at once
        row = tables[t]
        for i in range(los[t], his[t], 8):
            prefetch(row, i)
    for t in range(n_tables):
        qp = qps[t]
        lo = los[t]
        hi = his[t]
        row = tables[t]
        for i in range(lo, hi):
            if i > lo and row[i] == row[i - 1]:
                continue
            pc = popcount64(row[i] ^ qp)
            if pc > kk:
                continue
            v = permute_one(row[i], dst[t], src[t], masks)
            x = v ^ q
            if not owned_by(x, t, leads):
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


@njit(cache=True)
def join_values(sorted_perm, dirs_row, k, t, src, dst, masks, leads):
    """Pairs of distinct values inside one table's buckets with distance <= k, un-permuted,
    each reported only by the first table whose leading blocks the pair shares (so a pair
    comes out of exactly one table). Returns (value a, value b, distance)."""
    va = np.empty(64, dtype=np.uint64)
    vb = np.empty(64, dtype=np.uint64)
    dist = np.empty(64, dtype=np.int64)
    c = 0
    kk = U64(k)
    n_buckets = dirs_row.shape[0] - 1
    for key in range(n_buckets):
        lo = dirs_row[key]
        hi = dirs_row[key + 1]
        for i in range(lo, hi):
            pi = sorted_perm[i]
            for j in range(i + 1, hi):
                pc = popcount64(pi ^ sorted_perm[j])
                if pc > kk:
                    continue
                a = permute_one(pi, dst[t], src[t], masks)
                b = permute_one(sorted_perm[j], dst[t], src[t], masks)
                x = a ^ b
                if not owned_by(x, t, leads):
                    continue
                if c >= va.shape[0]:
                    va = _grow(va, c + 1)
                    vb = _grow(vb, c + 1)
                    dist = _grow(dist, c + 1)
                va[c] = a
                vb[c] = b
                dist[c] = np.int64(pc)
                c += 1
    return va[:c], vb[:c], dist[:c]

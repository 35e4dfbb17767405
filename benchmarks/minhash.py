"""Speed and memory of neardup's MinHash signatures and LSH, side by side with datasketch and rensa.

Everything runs in one invocation, single-threaded (``RAYON_NUM_THREADS=1``,
``NUMBA_NUM_THREADS=1``), on this machine:

* **signatures** on generated documents of about 8 KB (lowercase words of a Zipf-distributed
  vocabulary separated by single spaces, fixed seed, so that ``str.split`` and neardup's
  tokenizer see the same tokens) and on real article texts of ``shared/corpus/scrapinghub-aeb``
  (extracted once with :func:`neardup.fingerprint.extract.extract_main_content`; only text -> signature is
  timed). Every library signs the set of word 3-shingles with 128 permutations.
  ``neardup minhash_text`` includes Unicode normalisation (NFKC + casefold), tokenisation, 3-word
  shingling and feature hashing (all compiled); the peers get their shingles from Python
  (``text.lower().split()`` and ``" ".join`` of three words), which is what a user of those
  libraries writes. "Signature only" rows take the prepared features / shingles as input.
  Rates are CPU seconds of this process, i.e. per core: documents are timed in chunks, every
  variant runs ``--reps`` times per chunk interleaved with the others, and keeps its fastest run.
* **LSH** at ``--n`` stored pages (10^6 by default): random sets of 64 distinct 64-bit features
  with planted near copies (2% of the stored sets, and half of the queries: 0 to 6 of the 64
  features replaced); neardup :class:`~neardup.index.lsh.MinHashLSH` (bulk ``add_many`` in batches
  of 10,000, then ``add`` one at a time), datasketch ``MinHashLSH`` (``insert`` of LeanMinHash
  objects holding the same signatures, same 14 bands x 9 rows) and rensa ``RMinHashLSH``
  (``insert_matrix`` of its own signatures of the same sets, 16 bands of 8 rows: it needs
  num_perm divisible by the bands). Insert rate, single-query
  latency p50 / p99 (each query alone; neardup verifies and ranks, the peers return unverified
  candidates), recall of the planted copies, and bytes per stored page from ``nbytes()`` and
  from the RSS growth. Each library runs in its own forked child process, so RSS deltas do not
  mix. A library that would exceed ``--peer-seconds`` of inserting is stopped there and its
  numbers are extrapolated linearly to ``--n`` (stated in the output). datasketch stores at most
  ``--ds-n`` pages (2x10^5 by default: it takes about 5 KB a page, 5 GB at 10^6) and is
  extrapolated the same way.

Usage::

    python benchmarks/minhash.py --quick        # < 1 minute, no report unless --doc
    python benchmarks/minhash.py                # full run (a few minutes), writes docs/benchmarks.md

Progress goes to stderr, the report into ``docs/benchmarks.md`` between ``<!-- minhash:start -->``
and ``<!-- minhash:end -->`` (``--no-doc`` to skip), and a JSON summary is the last stdout line.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# single-threaded kernels and peers: set before numpy, numba and rensa are imported
os.environ.setdefault("RAYON_NUM_THREADS", "1")  # rensa's bulk paths
os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from _common import CORPUS, DOC, logger, py_shingles, replace_section, rss_bytes, table, timed, zipf_vocabulary
from _common import machine as machine_of
from _corpus import manifest_rows, read_page

from neardup.fingerprint.extract import extract_main_content
from neardup.fingerprint.features import extract_features
from neardup.fingerprint.minhash import MinHashConfig, minhash_features, minhash_text
from neardup.index.lsh import MinHashLSH

DEFAULT_CORPUS = CORPUS
START, END = "<!-- minhash:start -->", "<!-- minhash:end -->"

try:
    import datasketch
except ImportError:  # pragma: no cover - reported as skipped
    datasketch = None
try:
    import rensa
except ImportError:  # pragma: no cover
    rensa = None
try:
    import xxhash
except ImportError:  # pragma: no cover
    xxhash = None

NUM_PERM = 128
THRESHOLD = 0.8
SEED = 20240601
SET_SIZE = 64  # features per synthetic LSH set
PLANTED_SHARE = 0.02
BATCH = 10_000
CHUNK = 50  # documents per timed chunk of the signature benchmark
RENSA_SEED = 42
# shared/reference/peer-benchmarks.md, section 1 (text -> signature with a Python 3-shingle tokeniser)
REFERENCE_MB_S = {"rensa RMinHash(128) update": 31.59, "datasketch sha1_hash32": 8.18, "datasketch xxh32": 14.94}
RENSA_BANDS = 16  # rensa needs num_perm divisible by the bands: 16 x 8 is its nearest to 14 x 9


log = logger("minhash")


# --------------------------------------------------------------------------------------------
# Machine
# --------------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    return machine_of(("neardup", "numpy", "numba", "datasketch", "rensa", "xxhash"))


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------

def zipf_documents(n: int, size: int = 8192, vocab: int = 50_000, seed: int = SEED) -> list[str]:
    """``n`` documents of about ``size`` bytes: lowercase ASCII words drawn from a Zipf(1.1)
    distribution over ``vocab`` random words, separated by single spaces."""
    rng = np.random.default_rng(seed)
    words, p = zipf_vocabulary(rng, vocab)
    docs = []
    for _ in range(n):
        ids = rng.choice(vocab, size // 3, p=p)
        text = " ".join(words[i] for i in ids)
        docs.append(text[:size].rsplit(" ", 1)[0])
    return docs


def real_texts(corpus: Path, limit: int | None) -> tuple[list[str], float]:
    """Main texts of the scrapinghub-aeb pages (accurate extractor), and the extraction time."""
    folder = corpus / "scrapinghub-aeb"
    rows = manifest_rows(folder, limit)
    started = time.perf_counter()
    texts = []
    for row in rows:
        page = extract_main_content(read_page(folder / row[0]), row[1], extractor="accurate")
        if page.text.strip():
            texts.append(page.text)
    return texts, time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# Signature throughput
# --------------------------------------------------------------------------------------------

def timed_once(items: Sequence[Any], fn: Callable[[Any], Any]) -> tuple[float, float]:
    """CPU and wall seconds of ``fn`` over ``items``, after a garbage collection."""
    gc.collect()
    return timed(items, fn)


def signature_rows(texts: list[str], reps: int, bulk: bool = True) -> list[dict[str, Any]]:
    """Every variant over ``texts``; rates per CPU second. The variants run round-robin,
    ``reps`` rounds, and each keeps its best round, so a burst of load from other jobs on a
    shared machine does not fall on one variant only."""
    cfg = MinHashConfig()
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    minhash_text(texts[0], cfg)  # compile
    feats = [extract_features(t, cfg.features)[0] for t in texts]
    shingles = [py_shingles(t) for t in texts]
    encoded = [[s.encode("utf-8") for s in sh] for sh in shingles]
    variants: list[tuple[str, str, Sequence[Any], Callable[[Any], Any], str]] = [
        ("neardup minhash_text", "end to end", texts, lambda t: minhash_text(t, cfg),
         "normalise + tokenise + 3-shingles + signature, compiled")]
    if datasketch is not None:
        def ds(t: str, hashfunc: Callable[[bytes], int] | None = None) -> Any:
            m = datasketch.MinHash(num_perm=NUM_PERM) if hashfunc is None else \
                datasketch.MinHash(num_perm=NUM_PERM, hashfunc=hashfunc)
            m.update_batch([s.encode("utf-8") for s in py_shingles(t)])
            return m
        variants.append(("datasketch MinHash.update_batch, sha1_hash32", "end to end", texts, ds,
                         "default hash; Python shingles"))
        if xxhash is not None:
            variants.append(("datasketch MinHash.update_batch, xxh32", "end to end", texts,
                             lambda t: ds(t, xxhash.xxh32_intdigest), "hashfunc=xxhash.xxh32_intdigest"))
    if rensa is not None:
        def rs(t: str) -> Any:
            m = rensa.RMinHash(NUM_PERM, RENSA_SEED)
            m.update(py_shingles(t))
            return m
        variants.append(("rensa RMinHash.update", "end to end", texts, rs, "Python shingles"))
    # the parts
    variants += [
        ("neardup minhash_features", "signature only", feats, lambda f: minhash_features(f, cfg), "features prepared"),
        ("neardup extract_features", "tokens only", texts, lambda t: extract_features(t, cfg.features),
         "normalise + shingle + hash"),
        ("Python 3-shingles (str.split + join)", "tokens only", texts, py_shingles,
         "what the peers' end-to-end rows include"),
    ]
    if datasketch is not None and xxhash is not None:
        perms = datasketch.MinHash(num_perm=NUM_PERM).permutations

        def ds_only(enc: list[bytes]) -> Any:
            m = datasketch.MinHash(num_perm=NUM_PERM, permutations=perms, scheme="affine32",
                                   hashfunc=xxhash.xxh32_intdigest)
            m.update_batch(enc)
            return m
        variants.append(("datasketch update_batch, xxh32", "signature only", encoded, ds_only,
                         "shingles prepared, permutations reused"))
    if rensa is not None:
        def rs_only(sh: list[str]) -> Any:
            m = rensa.RMinHash(NUM_PERM, RENSA_SEED)
            m.update(sh)
            return m
        variants.append(("rensa RMinHash.update", "signature only", shingles, rs_only, "shingles prepared"))
        if bulk:
            variants.append(("rensa RMinHash.digest_matrix_from_token_sets", "signature only", [shingles],
                             lambda sh: rensa.RMinHash.digest_matrix_from_token_sets(sh, NUM_PERM, RENSA_SEED),
                             f"one call per {CHUNK} documents"))
    # round-robin over chunks of CHUNK documents: for every chunk, every variant runs `reps`
    # times (interleaved) and keeps its fastest run; a variant's time is the sum over chunks
    n = len(texts)
    chunks = [(s, min(n, s + CHUNK)) for s in range(0, n, CHUNK)]
    cpu_total = [0.0] * len(variants)
    wall_total = [0.0] * len(variants)
    parallel = [False] * len(variants)
    for s, e in chunks:
        best = [(float("inf"), float("inf"))] * len(variants)
        for _ in range(reps):
            for i, (_, _, items, fn, _) in enumerate(variants):
                part = items[s:e] if len(items) == n else [items[0][s:e]]
                cpu, wall = timed_once(part, fn)
                parallel[i] |= cpu > 1.2 * wall + 0.002  # only possible with threads running at once
                if cpu < best[i][0]:
                    best[i] = (cpu, wall)
        for i, (cpu, wall) in enumerate(best):
            cpu_total[i] += cpu
            wall_total[i] += wall
    rows: list[dict[str, Any]] = []
    for i, (name, kind, _, _, note) in enumerate(variants):
        cpu, wall = cpu_total[i], wall_total[i]
        rows.append({"name": name, "kind": kind, "docs": n, "mb": mb, "cpu_s": cpu, "wall_s": wall,
                     "sig_per_s": n / cpu, "mb_per_s": mb / cpu, "parallel": parallel[i], "note": note})
        log(f"  {name:48} {kind:15} {mb / cpu:8.1f} MB/s  {n / cpu:9.0f} sig/s"
            + ("  (parallel!)" if parallel[i] else ""))
    return rows


def same_sets_check(texts: list[str]) -> dict[str, Any]:
    """On the generated documents every library sees the same 3-shingle set: neardup's set
    size equals the number of distinct Python shingles."""
    cfg = MinHashConfig()
    diffs = [minhash_text(t, cfg).set_size - len(set(py_shingles(t))) for t in texts[:50]]
    return {"documents": len(diffs), "equal_set_sizes": sum(d == 0 for d in diffs)}


# --------------------------------------------------------------------------------------------
# LSH data
# --------------------------------------------------------------------------------------------

class LSHData:
    """Stored feature sets (``n`` x 64 uint64), their neardup signatures, queries and which
    stored set each planted query copies (-1 for a fresh set)."""

    def __init__(self, n: int, n_queries: int, source_limit: int, seed: int = SEED) -> None:
        rng = np.random.default_rng(seed)
        self.n = n
        self.features = rng.integers(0, 2**64 - 1, (n, SET_SIZE), dtype=np.uint64, endpoint=True)
        planted = rng.choice(np.arange(1, n), int(n * PLANTED_SHARE), replace=False)
        for i in planted:
            src = int(rng.integers(0, i))
            self.features[i] = self._near(rng, self.features[src], int(rng.integers(0, 9)))
        half = n_queries // 2
        self.sources = np.concatenate([rng.integers(0, min(n, source_limit), half),
                                       -np.ones(n_queries - half, np.int64)])
        self.queries = rng.integers(0, 2**64 - 1, (n_queries, SET_SIZE), dtype=np.uint64, endpoint=True)
        for qi in range(half):
            self.queries[qi] = self._near(rng, self.features[self.sources[qi]], int(rng.integers(0, 7)))
        cfg = MinHashConfig()
        started = time.perf_counter()
        self.sigs = np.empty((n, NUM_PERM), dtype=np.uint32)
        for i in range(n):
            self.sigs[i] = minhash_features(self.features[i], cfg).signature
        self.sign_seconds = time.perf_counter() - started
        self.qsigs = np.stack([minhash_features(q, cfg).signature for q in self.queries])

    @staticmethod
    def _near(rng: np.random.Generator, base: np.ndarray, replace: int) -> np.ndarray:
        out = base.copy()
        if replace:
            out[rng.choice(SET_SIZE, replace, replace=False)] = rng.integers(0, 2**64 - 1, replace, dtype=np.uint64,
                                                                             endpoint=True)
        return out


DATA: LSHData | None = None  # set before forking; the children read it


def latency(run_query: Callable[[int], Any], n_queries: int, rounds: int = 3) -> dict[str, Any]:
    """Single-query latency over ``rounds`` passes over all queries: p50 / p99 of the median
    round, in wall-clock time and in this thread's CPU time, and the p99 over queries of each
    query's fastest pass (*best-of-rounds p99*: a query preempted by another job in one pass is
    rarely preempted in all of them, and 1,999 other queries run between two passes of one
    query, so it is not a warm-cache number)."""
    per_round = []
    walls = np.empty((rounds, n_queries))
    for r in range(rounds):
        cpu = np.empty(n_queries)
        for qi in range(n_queries):
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            run_query(qi)
            walls[r, qi] = time.perf_counter_ns() - t0
            cpu[qi] = time.thread_time_ns() - c0
        per_round.append([float(np.percentile(a, p)) / 1e6 for a in (walls[r], cpu) for p in (50, 99)])
    med = [sorted(r[i] for r in per_round)[len(per_round) // 2] for i in range(4)]
    return {"p50_ms": med[0], "p99_ms": med[1], "cpu_p50_ms": med[2], "cpu_p99_ms": med[3],
            "best_p99_ms": float(np.percentile(walls.min(axis=0), 99)) / 1e6,
            "p99_ms_rounds": [round(r[1], 3) for r in per_round]}


def recall_of(results: list[Any], data: LSHData, limit: int) -> float:
    hits = total = 0
    for qi, src in enumerate(data.sources):
        if 0 <= src < limit:
            total += 1
            hits += int(src) in results[qi]
    return hits / total if total else float("nan")


def bench_neardup(n_online: int) -> dict[str, Any]:
    data = DATA
    assert data is not None
    gc.collect()
    rss0 = rss_bytes()
    lsh = MinHashLSH(MinHashConfig(), threshold=THRESHOLD)
    t0 = time.perf_counter()
    bulk_n = data.n - n_online
    for s in range(0, bulk_n, BATCH):
        e = min(bulk_n, s + BATCH)
        lsh.add_many(range(s, e), data.sigs[s:e], [SET_SIZE] * (e - s))
    bulk_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(bulk_n, data.n):
        lsh.add(i, data.sigs[i], SET_SIZE)
    online_s = time.perf_counter() - t0
    gc.collect()
    rss = rss_bytes() - rss0
    pending = len(lsh._delta_rows)
    after_online = latency(lambda qi: lsh.query(data.qsigs[qi]), len(data.qsigs))
    results = [{pid for pid, _ in lsh.query(q)} for q in data.qsigs]
    unverified = [{pid for pid, _ in lsh.query(q, threshold=0.0)} for q in data.qsigs]
    cands = float(np.mean([len(c) for c in unverified]))
    lsh._flush()  # what a bulk-built index looks like: no pending inserts
    flushed = latency(lambda qi: lsh.query(data.qsigs[qi]), len(data.qsigs))
    return {"library": "neardup MinHashLSH", "n": data.n, "bands": lsh.bands, "rows": lsh.rows,
            "bulk_insert_per_s": bulk_n / bulk_s if bulk_s else None,
            "online_insert_per_s": n_online / online_s if online_s else None,
            "online_inserts": n_online, "pending_after_online": pending,
            "query": flushed, "query_with_pending": after_online, "verified": True,
            "recall": recall_of(results, data, data.n), "candidate_recall": recall_of(unverified, data, data.n),
            "candidates_per_query": cands,
            "nbytes_per_page": lsh.nbytes() / data.n, "rss_per_page": rss / data.n, "extrapolated": False}


def bench_datasketch(n_max: int, seconds: float) -> dict[str, Any]:
    data = DATA
    assert data is not None
    gc.collect()
    rss0 = rss_bytes()
    lsh = datasketch.MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(14, 9))
    insert_s = 0.0
    n = 0
    while n < min(n_max, data.n) and insert_s < seconds:
        e = min(n + BATCH, n_max, data.n)
        objs = [datasketch.LeanMinHash(seed=1, hashvalues=data.sigs[i], scheme="affine32") for i in range(n, e)]
        t0 = time.perf_counter()
        for i, m in zip(range(n, e), objs):
            lsh.insert(i, m)
        insert_s += time.perf_counter() - t0
        n = e
        del objs
    gc.collect()
    rss = rss_bytes() - rss0
    qobjs = [datasketch.LeanMinHash(seed=1, hashvalues=q, scheme="affine32") for q in data.qsigs]
    q = latency(lambda qi: lsh.query(qobjs[qi]), len(qobjs))
    results = [set(lsh.query(m)) for m in qobjs]
    return {"library": "datasketch MinHashLSH", "n": n, "bands": 14, "rows": 9,
            "bulk_insert_per_s": n / insert_s, "online_insert_per_s": n / insert_s, "query": q, "verified": False,
            "recall": recall_of(results, data, n), "candidates_per_query": float(np.mean([len(r) for r in results])),
            "nbytes_per_page": None, "rss_per_page": rss / n, "extrapolated": n < data.n}


def rensa_tokens(rows: np.ndarray) -> list[list[bytes]]:
    """The 64-bit features as 8-byte tokens (rensa hashes str / bytes tokens itself)."""
    return [r.view("S8").tolist() for r in rows]


def bench_rensa(n_max: int, seconds: float) -> dict[str, Any]:
    data = DATA
    assert data is not None
    gc.collect()
    rss0 = rss_bytes()
    lsh = rensa.RMinHashLSH(THRESHOLD, NUM_PERM, RENSA_BANDS)
    insert_s = prep_s = 0.0
    n = 0
    while n < min(n_max, data.n) and insert_s + prep_s < seconds:
        e = min(n + BATCH, n_max, data.n)
        t0 = time.perf_counter()
        matrix = rensa.RMinHash.digest_matrix_from_token_byte_sets(rensa_tokens(data.features[n:e]), NUM_PERM,
                                                                   RENSA_SEED)
        t1 = time.perf_counter()
        lsh.insert_matrix(matrix, n)
        insert_s += time.perf_counter() - t1
        prep_s += t1 - t0
        n = e
        del matrix
    gc.collect()
    rss = rss_bytes() - rss0
    qobjs = []
    for toks in rensa_tokens(data.queries):
        m = rensa.RMinHash(NUM_PERM, RENSA_SEED)
        m.update(toks)
        qobjs.append(m)
    q = latency(lambda qi: lsh.query(qobjs[qi]), len(qobjs))
    results = [set(lsh.query(m)) for m in qobjs]
    return {"library": "rensa RMinHashLSH", "n": n, "bands": lsh.get_num_bands(),
            "rows": NUM_PERM // lsh.get_num_bands(),
            "bulk_insert_per_s": n / insert_s, "online_insert_per_s": None, "query": q, "verified": False,
            "recall": recall_of(results, data, n), "candidates_per_query": float(np.mean([len(r) for r in results])),
            "nbytes_per_page": None, "rss_per_page": rss / n, "extrapolated": n < data.n}


def _child(conn, fn_name: str, args: tuple) -> None:
    try:
        conn.send(("ok", globals()[fn_name](*args)))
    except BaseException as exc:  # pragma: no cover - reported
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def in_child(fn_name: str, *args: Any) -> dict[str, Any]:
    """Run ``fn_name(*args)`` in a forked child (fresh heap for RSS deltas)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(child, fn_name, args))
    p.start()
    child.close()
    status, value = parent.recv()
    p.join()
    if status != "ok":
        raise RuntimeError(f"{fn_name} failed: {value}")
    return value


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def fmt(x: float | None, digits: int = 1) -> str:
    if x is None or np.isnan(x):
        return "-"
    return f"{x:,.{digits}f}"


def sig_table(rows: list[dict[str, Any]], ref: float) -> list[str]:
    out = []
    for r in rows:
        out.append([f"{r['name']} ({r['kind']})", fmt(r["sig_per_s"], 0), fmt(r["mb_per_s"]),
                    f"{r['mb_per_s'] / ref:.2f}x" if ref else "-", r["note"]])
    return table(("variant", "signatures/s", "MB/s per core", "vs neardup minhash_text", "what is timed"), out,
                 text_columns=(0, 4))


def find(rows: list[dict[str, Any]], name: str, kind: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["name"] == name and r["kind"] == kind), None)


def lsh_table(results: list[dict[str, Any]], n: int) -> list[str]:
    out = []
    for r in results:
        note = f"measured at {r['n']:,}, extrapolated" if r["extrapolated"] else f"{r['n']:,}"
        out.append([r["library"], note, f"{r['bands']} x {r['rows']}", fmt(r["bulk_insert_per_s"], 0),
                    fmt(r["online_insert_per_s"], 0), fmt(r["query"]["p50_ms"], 3), fmt(r["query"]["p99_ms"], 3),
                    fmt(r["query"]["cpu_p99_ms"], 3), fmt(r["query"]["best_p99_ms"], 3),
                    "yes" if r["verified"] else "no", f"{100 * r['recall']:.1f}%", fmt(r["candidates_per_query"], 2),
                    fmt(r["nbytes_per_page"], 0), fmt(r["rss_per_page"], 0)])
    return table(("library", "stored pages", "bands x rows", "bulk inserts/s", "online inserts/s", "query p50 ms",
                  "query p99 ms", "CPU p99 ms", "best-of-3 p99 ms", "verified", "planted recall", "results/query",
                  "nbytes/page", "RSS/page"),
                 out, text_columns=(0, 1, 2, 9))


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    v = m["versions"]
    syn, real = res["synthetic"], res["real"]
    nd_syn = find(syn, "neardup minhash_text", "end to end")
    nd_real = find(real, "neardup minhash_text", "end to end") if real else None
    assert nd_syn is not None  # neardup's own row is always measured
    lines = [
        START,
        "## MinHash signatures and LSH (`benchmarks/minhash.py`)",
        "",
        "Generated by `benchmarks/minhash.py`; do not edit by hand" + (" (**QUICK run**)." if res["quick"] else "."),
        "",
        "```",
        res["command"],
        "```",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} RAM, Python {m['python']}, {m['os']}; "
        + ", ".join(f"{k} {val}" for k, val in v.items())
        + ". The machine is shared with other jobs, so rates vary by some 10-30% between runs. Everything "
        "single-threaded (`RAYON_NUM_THREADS=1`, `NUMBA_NUM_THREADS=1`; "
        + ("no timed run used more CPU time than wall-clock time" if res["single_threaded"] else
           "**some run used more CPU than wall-clock time: " + ", ".join(
               r["name"] for r in res["synthetic"] + res["real"] if r["parallel"]) + "**")
        + f"); rates are per CPU second of this process. The documents are timed in chunks of {CHUNK}: for each "
        f"chunk every variant runs {res['reps']} times, interleaved with the others, and keeps its fastest run; "
        "a variant's time is the sum over the chunks. This damps, but does not remove, the noise from other "
        "jobs (the virtual CPUs also lose time to the host).",
        "",
        "### Signatures (128 permutations, word 3-shingles)",
        "",
        f"Generated documents: {nd_syn['docs']:,} documents, {nd_syn['mb']:.1f} MB (about 8 KB each; lowercase "
        "words of a Zipf(1.1) vocabulary of 50,000 words, fixed seed, single spaces, so every library signs the "
        f"same set: neardup's set size equals the number of distinct Python shingles for "
        f"{res['same_sets']['equal_set_sizes']} of {res['same_sets']['documents']} documents checked).",
        "",
        "`neardup minhash_text` includes NFKC + casefold normalisation, tokenisation, 3-word shingling, feature "
        "hashing and the signature, all compiled. The peers' *end to end* rows include building the shingles in "
        "Python (`text.lower().split()`, `' '.join` of three words), as a user of those libraries does; the "
        "*signature only* and *tokens only* rows split the work.",
        "",
        *sig_table(syn, nd_syn["mb_per_s"]),
        "",
    ]
    if real:
        assert nd_real is not None
        lines += [
            f"Real texts: {nd_real['docs']} article texts of `shared/corpus/scrapinghub-aeb`, {nd_real['mb']:.2f} MB "
            f"(mean {1000 * nd_real['mb'] / nd_real['docs']:.1f} KB), extracted once with "
            f"`extract_main_content(extractor='accurate')` ({res['real_extract_s']:.1f} s, not timed below). "
            "Here the peers' `str.split` keeps punctuation on words while neardup's tokenizer drops it, so the "
            "sets differ slightly.",
            "",
            *sig_table(real, nd_real["mb_per_s"]),
            "",
        ]
    lsh = res["lsh"]
    nd = next(r for r in lsh if r["library"].startswith("neardup"))
    lines += [
        f"### LSH at {res['n']:,} stored pages (threshold {THRESHOLD}, 128 permutations)",
        "",
        f"Random sets of {SET_SIZE} distinct 64-bit features; {PLANTED_SHARE:.0%} of the stored sets are near copies "
        f"of earlier ones, and half of the {res['n_queries']:,} queries are near copies of stored sets (0 to 6 "
        f"of 64 features replaced: Jaccard >= 0.83); the other half are fresh sets. neardup signs the stored sets "
        f"in {res['sign_seconds']:.1f} s ({res['n'] / res['sign_seconds']:,.0f} sets/s with `minhash_features`, "
        "not part of the insert rates). datasketch indexes the same signatures (LeanMinHash objects created "
        "outside the timer) with the same banding; rensa indexes its own signatures of the same sets "
        "(`digest_matrix_from_token_byte_sets`, outside the timer; features as 8-byte tokens) with 16 bands of 8 "
        "rows (it needs num_perm divisible by the bands; 16 x 8 finds more candidates than 14 x 9). Each library "
        "runs in its own forked process; *RSS/page* is the growth of the resident set while building, divided by "
        "the pages stored (for neardup it includes its copy of the signatures, 512 bytes a page).",
        "",
        f"neardup: *bulk* = `add_many` in batches of {BATCH:,} for the first {res['n'] - res['n_online']:,} pages, "
        f"*online* = `add` one at a time for the last {res['n_online']:,}; query latency below is with no pending "
        "inserts (index flushed); neardup verifies every candidate and returns only those with estimated Jaccard "
        ">= 0.8, ranked; the peers return unverified band candidates. *Planted recall* is the share of planted "
        "copies (true Jaccard 0.83 to 1) returned: neardup's verification drops those whose 128-permutation "
        f"estimate falls below 0.8 (its band candidates alone hold {100 * nd['candidate_recall']:.1f}%). "
        "p99 is the median of three rounds "
        f"({', '.join(map(str, nd['query']['p99_ms_rounds']))} ms for neardup); *best-of-3 p99* takes each "
        "query's fastest of the three rounds (1,999 other queries run in between, so it is not a warm-cache "
        "number; it leaves out queries preempted by other jobs in one round). Load average of the machine "
        f"around this part: {res['load'][0]:.1f} to {res['load'][1]:.1f} on {res['machine']['nproc']} CPUs.",
        "",
        *lsh_table(lsh, res["n"]),
        "",
        f"With {nd['pending_after_online']:,} inserts pending in neardup's delta buffer (right after the online "
        f"inserts, before a flush) its query latency is p50 {nd['query_with_pending']['p50_ms']:.3f} ms / p99 "
        f"{nd['query_with_pending']['p99_ms']:.3f} ms "
        f"(CPU p99 {nd['query_with_pending']['cpu_p99_ms']:.3f} ms, best-of-3 "
        f"p99 {nd['query_with_pending']['best_p99_ms']:.3f} ms): every "
        "query re-stacks the pending band keys (see *Findings*).",
        "",
    ]
    lines += ["### Targets", ""]
    lines += [f"- {t}" for t in res["targets_text"]]
    lines += ["", "### Findings", ""]
    lines += [f"- {t}" for t in res["findings"]]
    lines += ["", END]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke test (< 1 minute); no report unless --doc")
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--docs", type=int, default=None, help="generated documents (default 1000; quick 100)")
    p.add_argument("--real", type=int, default=None, help="real texts to use (default all 181; quick 25)")
    p.add_argument("--n", type=int, default=None, help="stored pages for the LSH (default 10^6; quick 5x10^4)")
    p.add_argument("--queries", type=int, default=None, help="LSH queries (default 2000; quick 400)")
    p.add_argument("--online", type=int, default=None, help="neardup inserts one at a time (default 20000; quick 2000)")
    p.add_argument("--ds-n", type=int, default=None,
                   help="most pages datasketch stores (default 2x10^5: about 5 KB a page; quick 2x10^4)")
    p.add_argument("--rensa-n", type=int, default=None, help="most pages rensa stores (default --n)")
    p.add_argument("--peer-seconds", type=float, default=None, help="insert-time cap per peer (default 240; quick 8)")
    p.add_argument("--reps", type=int, default=None, help="rounds per signature variant (default 5; quick 1)")
    p.add_argument("--doc", dest="doc", action="store_true", default=None, help="write docs/benchmarks.md")
    p.add_argument("--json-out", type=Path, default=None, help="also save every raw result as JSON")
    p.add_argument("--no-doc", dest="doc", action="store_false")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    global DATA
    args = parse_args(argv)
    q = args.quick
    n_docs = args.docs or (100 if q else 1000)
    n_real = args.real if args.real is not None else (15 if q else 0)
    n = args.n or (20_000 if q else 1_000_000)
    n_queries = args.queries or (300 if q else 2000)
    n_online = args.online if args.online is not None else (1000 if q else 20_000)
    ds_n = min(n, args.ds_n or (20_000 if q else 200_000))
    rensa_n = min(n, args.rensa_n or n)
    peer_seconds = args.peer_seconds or (8.0 if q else 240.0)
    reps = args.reps or (1 if q else 5)
    write_doc = (not q) if args.doc is None else args.doc
    command = "python benchmarks/minhash.py" + " ".join(
        [""] + [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--doc", "--no-doc")])
    started = time.perf_counter()
    res: dict[str, Any] = {"quick": q, "command": command.strip(), "reps": reps, "machine": machine(),
                           "n": n, "n_queries": n_queries, "n_online": n_online}
    log(f"signatures: {n_docs} generated documents")
    docs = zipf_documents(n_docs)
    res["same_sets"] = same_sets_check(docs)
    res["synthetic"] = signature_rows(docs, reps)
    res["real"] = []
    res["real_extract_s"] = 0.0
    if (args.corpus / "scrapinghub-aeb" / "manifest.tsv").is_file():
        texts, res["real_extract_s"] = real_texts(args.corpus, n_real or None)
        log(f"signatures: {len(texts)} real texts (extracted in {res['real_extract_s']:.1f} s)")
        res["real"] = signature_rows(texts, reps)
    else:
        log(f"corpus not found at {args.corpus}: real texts skipped")

    load_before = os.getloadavg()[0]
    log(f"LSH data: {n:,} stored sets, {n_queries} queries (load average {load_before:.1f})")
    DATA = LSHData(n, n_queries, source_limit=min(ds_n, rensa_n))
    res["sign_seconds"] = DATA.sign_seconds
    lsh_results = [in_child("bench_neardup", n_online)]
    shown = ("bulk_insert_per_s", "online_insert_per_s", "query", "recall", "nbytes_per_page", "rss_per_page")
    log(f"  neardup: {json.dumps({k: lsh_results[-1][k] for k in shown})}")
    if datasketch is not None:
        lsh_results.append(in_child("bench_datasketch", ds_n, peer_seconds))
        log(f"  datasketch: n={lsh_results[-1]['n']:,} {json.dumps(lsh_results[-1]['query'])}")
    if rensa is not None:
        lsh_results.append(in_child("bench_rensa", rensa_n, peer_seconds))
        log(f"  rensa: n={lsh_results[-1]['n']:,} {json.dumps(lsh_results[-1]['query'])}")
    res["lsh"] = lsh_results
    load_after = os.getloadavg()[0]
    res["load"] = (min(load_before, load_after), max(load_before, load_after))
    res["single_threaded"] = not any(r["parallel"] for r in res["synthetic"] + res["real"])
    res["seconds"] = time.perf_counter() - started
    summary = build_summary(res)
    if args.json_out:
        args.json_out.write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    if write_doc:
        replace_section(DOC, START, END, render(res))
        log(f"wrote the minhash section of {DOC}")
    log(f"done in {res['seconds']:.0f} s")
    print(json.dumps(summary))
    return 0


def build_summary(res: dict[str, Any]) -> dict[str, Any]:
    """Ratios, targets and findings (also used by the report)."""
    def rate(rows: list[dict[str, Any]], name: str, kind: str = "end to end") -> float | None:
        r = find(rows, name, kind)
        return None if r is None else r["mb_per_s"]

    out: dict[str, Any] = {"quick": res["quick"], "seconds": round(res["seconds"], 1)}
    for label, rows in (("synthetic", res["synthetic"]), ("real", res["real"])):
        if not rows:
            continue
        nd = rate(rows, "neardup minhash_text")
        entry = {"neardup_mb_s": nd,
                 "neardup_signature_only_mb_s": rate(rows, "neardup minhash_features", "signature only"),
                 "rensa_mb_s": rate(rows, "rensa RMinHash.update"),
                 "rensa_signature_only_mb_s": rate(rows, "rensa RMinHash.update", "signature only"),
                 "datasketch_sha1_mb_s": rate(rows, "datasketch MinHash.update_batch, sha1_hash32"),
                 "datasketch_xxh32_mb_s": rate(rows, "datasketch MinHash.update_batch, xxh32"),
                 "python_shingles_mb_s": rate(rows, "Python 3-shingles (str.split + join)", "tokens only")}
        entry = {k: (round(v, 2) if v is not None else None) for k, v in entry.items()}
        for peer in ("rensa_mb_s", "datasketch_sha1_mb_s", "datasketch_xxh32_mb_s"):
            peer_mb_s = entry.get(peer)
            if peer_mb_s:
                assert nd is not None  # neardup's own row is always measured
                entry[f"neardup_vs_{peer.removesuffix('_mb_s')}"] = round(nd / peer_mb_s, 2)
        out[label] = entry
    lsh = {r["library"].split()[0]: r for r in res["lsh"]}
    nd = lsh["neardup"]
    out["lsh"] = {name: {"n": r["n"], "extrapolated": r["extrapolated"],
                         "bulk_insert_per_s": round(r["bulk_insert_per_s"] or 0),
                         "online_insert_per_s": round(r["online_insert_per_s"]) if r["online_insert_per_s"] else None,
                         "query_p50_ms": round(r["query"]["p50_ms"], 4), "query_p99_ms": round(r["query"]["p99_ms"], 4),
                         "query_cpu_p99_ms": round(r["query"]["cpu_p99_ms"], 4),
                         "query_best_of_rounds_p99_ms": round(r["query"]["best_p99_ms"], 4),
                         "recall": round(r["recall"], 4),
                         "candidate_recall": round(r.get("candidate_recall", r["recall"]), 4),
                         "nbytes_per_page": round(r["nbytes_per_page"]) if r["nbytes_per_page"] else None,
                         "rss_per_page": round(r["rss_per_page"])} for name, r in lsh.items()}
    out["lsh"]["neardup"]["query_with_pending_p50_ms"] = round(nd["query_with_pending"]["p50_ms"], 4)
    out["lsh"]["neardup"]["query_with_pending_p99_ms"] = round(nd["query_with_pending"]["p99_ms"], 4)
    out["lsh"]["neardup"]["query_with_pending_cpu_p99_ms"] = round(nd["query_with_pending"]["cpu_p99_ms"], 4)
    out["lsh"]["neardup"]["query_with_pending_best_of_rounds_p99_ms"] = round(
        nd["query_with_pending"]["best_p99_ms"], 4)
    out["load_average"] = [round(x, 2) for x in res["load"]]
    out["lsh"]["neardup"]["pending"] = nd["pending_after_online"]
    out["n"] = res["n"]
    syn = out["synthetic"]
    sig_ok = bool(syn.get("rensa_mb_s") and syn["neardup_mb_s"] >= syn["rensa_mb_s"])
    p99_ok = nd["query"]["p99_ms"] <= 1.0
    cpu_ok = nd["query"]["cpu_p99_ms"] <= 1.0
    best_ok = nd["query"]["best_p99_ms"] <= 1.0
    out["targets"] = {"signature_speed_at_least_rensa_end_to_end": sig_ok,
                      "signature_speed_at_least_reference_rensa_31_6":
                          syn["neardup_mb_s"] >= REFERENCE_MB_S["rensa RMinHash(128) update"],
                      "signature_speed_at_least_rensa_signature_only": bool(
                          syn.get("rensa_signature_only_mb_s")
                          and syn["neardup_mb_s"] >= syn["rensa_signature_only_mb_s"]),
                      "query_p99_le_1ms": p99_ok, "query_cpu_p99_le_1ms": cpu_ok,
                      "query_best_of_rounds_p99_le_1ms": best_ok,
                      "query_p99_le_1ms_with_pending": nd["query_with_pending"]["best_p99_ms"] <= 1.0,
                      "at_10e6": res["n"] >= 1_000_000}
    met = lambda ok: "met" if ok else "**NOT met**"  # noqa: E731
    res["targets_text"] = [
        f"Signature speed at least rensa's (end to end, text -> signature, generated documents): neardup "
        f"{syn['neardup_mb_s']:.1f} MB/s vs rensa {fmt(syn.get('rensa_mb_s'))} MB/s "
        f"({syn.get('neardup_vs_rensa', 0):.2f}x): {met(sig_ok)}; against the figures measured earlier on this "
        "project's machines (`shared/reference/peer-benchmarks.md` section 1, same kind of documents, quieter "
        "machine): " + ", ".join(f"{name} {ref:.1f} MB/s ({syn['neardup_mb_s'] / ref:.2f}x)"
                                 for name, ref in REFERENCE_MB_S.items())
        + f": {met(syn['neardup_mb_s'] >= REFERENCE_MB_S['rensa RMinHash(128) update'])}. "
        "This holds because the peers' shingles are built "
        f"in Python ({fmt(syn.get('python_shingles_mb_s'))} MB/s alone). rensa's signature step by itself "
        f"(shingles prepared) runs at {fmt(syn.get('rensa_signature_only_mb_s'))} MB/s of text, "
        f"{(syn.get('rensa_signature_only_mb_s') or 0) / syn['neardup_signature_only_mb_s']:.1f}x neardup's "
        f"`minhash_features` ({fmt(syn.get('neardup_signature_only_mb_s'))} MB/s), which is the slower half "
        "of neardup's pipeline: its inner loop does a 64 x 64-bit multiply per feature and permutation, and "
        "this CPU has AVX2 but no AVX-512, so there is no vector instruction for that multiply.",
        f"Query p99 <= 1 ms at {res['n']:,} stored pages, no pending inserts: neardup p99 "
        f"{nd['query']['p99_ms']:.3f} ms wall-clock, {nd['query']['cpu_p99_ms']:.3f} ms CPU, "
        f"{nd['query']['best_p99_ms']:.3f} ms best-of-rounds: {met(p99_ok)}"
        + ("" if p99_ok or not (cpu_ok or best_ok) else
           " on wall-clock time, met on "
           + " and ".join(x for x, ok in (("CPU time", cpu_ok), ("best-of-rounds", best_ok)) if ok)
           + f" (queries preempted by other jobs: load average {res['load'][0]:.1f} to {res['load'][1]:.1f} on 2 CPUs)")
        + "; "
        f"with {nd['pending_after_online']:,} pending inserts {nd['query_with_pending']['p99_ms']:.3f} ms wall "
        f"({nd['query_with_pending']['cpu_p99_ms']:.3f} ms CPU, {nd['query_with_pending']['best_p99_ms']:.3f} ms "
        f"best-of-rounds): {met(nd['query_with_pending']['best_p99_ms'] <= 1.0)}.",
    ]
    ds = lsh.get("datasketch")
    rs = lsh.get("rensa")
    findings = [
        f"neardup stores {nd['nbytes_per_page']:.0f} bytes per page by `nbytes()` (512 of them the signature, "
        f"which it keeps to verify candidates) and its RSS grows by {nd['rss_per_page']:.0f} bytes per page"
        + (f"; datasketch grows by {ds['rss_per_page']:.0f} bytes per page "
           f"({ds['rss_per_page'] / nd['rss_per_page']:.1f}x)"
           if ds else "")
        + (f", rensa by {rs['rss_per_page']:.0f} ({rs['rss_per_page'] / nd['rss_per_page']:.1f}x)" if rs else "") + ".",
        "neardup's pending-insert buffer (`MinHashLSH._delta_keys`, a Python list of up to `delta_limit` = 2048 "
        "per-page key arrays) is re-stacked with `np.stack` on every query, so query latency grows with the number "
        "of pending inserts; a Detector adds pages one at a time, so it usually has some pending. Keeping the "
        "pending keys in a preallocated (delta_limit, bands) array would remove that cost.",
    ]
    if ds:
        findings.append(
            f"datasketch query p99 {ds['query']['p99_ms']:.3f} ms"
            + (f" (at {ds['n']:,} pages; its dict lookups do not grow with n, so the 10^6 latency should be similar, "
               f"and memory grows linearly: about {ds['rss_per_page'] * res['n'] / 2**30:.1f} GiB at {res['n']:,})"
               if ds["extrapolated"] else "")
            + f"; it returns {ds['candidates_per_query']:.2f} unverified candidates per query vs "
            f"{nd['candidates_per_query']:.2f} for neardup before verification.")
    res["findings"] = findings
    out["findings"] = findings
    return out


if __name__ == "__main__":
    sys.exit(main())

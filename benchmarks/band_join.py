"""Both candidate stages of the default settings in batch: 10^6 queries against S stored pages
streamed from files under /tmp, the sketch bands (:func:`neardup.index.joins.band_join_chunks`)
and the SimHash tables at k = 3 (:func:`neardup.index.joins.batch_join`), timed in the same
run, projected linearly to 10^9 stored. Writes its section of docs/benchmarks.md.

    .venv/bin/python benchmarks/band_join.py [--queries 1e6] [--stored 1e7,1e8] [--threads 2]

Data (seeded): uniform random 64-byte sketches (shingle count > 0; 0.1% without shingles)
and SimHash values; planted near copies of random queries (40% of the 60 bins redrawn, the
SimHash within 3 bits for half of them, random for the rest) and decoys (one band of a
query's bins kept, the rest random: they share a band and fail the nibble filter). The files
(S x 64 bytes and S x 8 bytes) are written in chunks (not timed) and deleted at the end.

Checked: every planted copy sharing a band with its query is found (and the share that
shares one is the S-curve's); on a sample of stored rows (random, planted, decoys) the pairs
equal a numpy brute force over all queries (shared band key and the nibble filter); the
SimHash join finds every planted value within 3 bits. The brute force's time per stored row,
projected to all of S, gives the ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
from _common import DOC, commit, loadavg, logger, machine_line, replace_section, table

from neardup.index.bands import far_verify, keys_of, nibble_agreement, nibble_threshold, nibbles_of
from neardup.index.joins import QueryBands, band_join_chunks, batch_join

T = TypeVar("T")

START, END = "<!-- band-join:start -->", "<!-- band-join:end -->"
GEN = 1 << 20  # rows generated at a time
TARGET_S = 20 * 60


log = logger(clock=True)


def sketches(rng: np.random.Generator, n: int) -> np.ndarray:
    out = rng.integers(0, 256, (n, 64), dtype=np.uint8)
    out[:, :4] = np.frombuffer(rng.integers(1, 5000, n, dtype=np.uint32).tobytes(), dtype=np.uint8).reshape(n, 4)
    return out


def u64(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(np.uint64).max, n, dtype=np.uint64, endpoint=True)


def near_simhash(rng: np.random.Generator, v: np.ndarray) -> np.ndarray:
    """Each value with 0..3 random bits flipped."""
    out = v.copy()
    for i in range(out.shape[0]):
        for b in rng.choice(64, int(rng.integers(0, 4)), replace=False):
            out[i] ^= np.uint64(1) << np.uint64(int(b))
    return out


def generate(path: Path, spath: Path, s: int, q_sk: np.ndarray, q_sim: np.ndarray,
             seed: int) -> dict[str, np.ndarray]:
    """Write the stored sketches and SimHash values; returns the planted and decoy rows."""
    rng = np.random.default_rng(seed)
    n_plant, n_decoy = min(20_000, s // 1000), min(20_000, s // 1000)
    pos = rng.choice(s, n_plant + n_decoy, replace=False)
    plant_pos, decoy_pos = pos[:n_plant], pos[n_plant:]
    plant_q = rng.integers(0, q_sk.shape[0], n_plant)
    decoy_q = rng.integers(0, q_sk.shape[0], n_decoy)
    plant = q_sk[plant_q].copy()
    redraw = rng.random((n_plant, 60)) < 0.4
    plant[:, 4:][redraw] = rng.integers(0, 256, int(redraw.sum()), dtype=np.uint8)
    plant_sim = near_simhash(rng, q_sim[plant_q])
    far = rng.random(n_plant) < 0.5
    plant_sim[far] = u64(rng, int(far.sum()))
    decoy = sketches(rng, n_decoy)
    band = rng.integers(0, 8, n_decoy)
    for i in range(n_decoy):
        b = 4 + 2 * int(band[i])
        decoy[i, b:b + 2] = q_sk[decoy_q[i], b:b + 2]
    with open(path, "wb") as f, open(spath, "wb") as g:
        for lo in range(0, s, GEN):
            hi = min(s, lo + GEN)
            rows = sketches(rng, hi - lo)
            rows[rng.random(hi - lo) < 0.001, :4] = 0  # no shingles
            sim = u64(rng, hi - lo)
            for p, src, vals in ((plant_pos, plant, plant_sim), (decoy_pos, decoy, None)):
                sel = np.flatnonzero((p >= lo) & (p < hi))
                rows[p[sel] - lo] = src[sel]
                if vals is not None:
                    sim[p[sel] - lo] = vals[sel]
            f.write(rows.tobytes())
            g.write(sim.tobytes())
    return {"plant_pos": plant_pos, "plant_q": plant_q, "plant_sim": plant_sim, "decoy_pos": decoy_pos,
            "decoy_q": decoy_q, "plant_near": ~far}


def brute(q_keys: np.ndarray, q_nib: np.ndarray, q_ok: np.ndarray, row: np.ndarray, thr: int) -> np.ndarray:
    """Query positions paired with one stored row: any equal band key and the nibble filter."""
    if int.from_bytes(row[:4].tobytes(), "little") == 0:
        return np.empty(0, dtype=np.int64)
    k = keys_of(row[None, 4:])[0]
    hit = np.flatnonzero(np.any(q_keys == k, axis=1) & q_ok)
    agree = nibble_agreement(q_nib[hit], nibbles_of(row[None, 4:])[0])
    return hit[agree >= thr]


def run_size(s: int, q_sk: np.ndarray, q_sim: np.ndarray, qb: QueryBands, args: argparse.Namespace,
             brute_parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, object]:
    path, spath = Path(args.dir) / f"band_join_{s}.u8", Path(args.dir) / f"band_join_{s}.u64"
    t0 = time.time()
    info = generate(path, spath, s, q_sk, q_sim, seed=s % 1_000_003)
    log(f"S={s:,}: generated in {time.time() - t0:.1f} s")
    try:
        stored = np.memmap(path, dtype=np.uint8, mode="r", shape=(s, 64))
        sims = np.memmap(spath, dtype=np.uint64, mode="r", shape=(s,))
        chunk = int(args.chunk)
        load0 = loadavg().split(" / ")[0]
        parts, band_wall, band_cpu = timed(lambda: list(band_join_chunks(
            qb, (stored[lo:lo + chunk] for lo in range(0, s, chunk)), args.verify, threads=args.threads)))
        load1 = loadavg().split(" / ")[0]
        bq = np.concatenate([p[0] for p in parts])
        bs = np.concatenate([p[1] for p in parts])
        log(f"S={s:,}: band join {band_wall:.1f} s wall, {band_cpu:.1f} s CPU, {bq.shape[0]:,} pairs "
            f"(load {load0} -> {load1})")
        sim_parts, sim_wall, sim_cpu = timed(lambda: list(batch_join(
            q_sim, (np.asarray(sims[lo:lo + chunk]) for lo in range(0, s, chunk)), k=3, threads=args.threads)))
        load2 = loadavg().split(" / ")[0]
        sq = np.concatenate([p[0] for p in sim_parts])
        ss = np.concatenate([p[1] for p in sim_parts])
        log(f"S={s:,}: SimHash k=3 join {sim_wall:.1f} s wall, {sim_cpu:.1f} s CPU, {sq.shape[0]:,} pairs "
            f"(load {load2})")
        # checks
        pairs = set(zip(bq.tolist(), bs.tolist()))
        assert len(pairs) == bq.shape[0], "a pair came out twice"
        keys_q = keys_of(q_sk[info["plant_q"], 4:])
        keys_s = keys_of(np.asarray(stored[info["plant_pos"]])[:, 4:])
        q_has = np.frombuffer(q_sk[info["plant_q"], :4].tobytes(), dtype=np.uint32) > 0
        shares = np.any(keys_q == keys_s, axis=1) & q_has  # a query without shingles pairs with nothing
        found = np.array([(int(q), int(p)) in pairs for q, p in zip(info["plant_q"], info["plant_pos"])])
        sim_pairs = set(zip(sq.tolist(), ss.tolist()))
        near = info["plant_near"]
        sim_found = np.array([(int(q), int(p)) in sim_pairs for q, p in
                              zip(info["plant_q"][near], info["plant_pos"][near])])
        rng = np.random.default_rng(1)
        sample = np.unique(np.concatenate([rng.integers(0, s, args.sample), info["plant_pos"][:args.sample],
                                           info["decoy_pos"][:args.sample]]))
        thr = nibble_threshold(far_verify(args.verify) or 1.0)
        by_row: dict[int, list[int]] = {}
        for qpos, spos in zip(bq.tolist(), bs.tolist()):
            by_row.setdefault(spos, []).append(qpos)
        t0 = time.time()
        exact = all(sorted(by_row.get(int(r), [])) == brute(*brute_parts, np.asarray(stored[int(r)]), thr).tolist()
                    for r in sample)
        brute_s = (time.time() - t0) / sample.shape[0]
        decoys_out = sum(1 for q, r in zip(info["decoy_q"].tolist(), info["decoy_pos"].tolist()) if (q, r) in pairs)
    finally:
        path.unlink(missing_ok=True)
        spath.unlink(missing_ok=True)
    return {"s": s, "band_wall": band_wall, "band_cpu": band_cpu, "sim_wall": sim_wall, "sim_cpu": sim_cpu,
            "pairs": int(bq.shape[0]), "sim_pairs": int(sq.shape[0]), "load": f"{load0} → {load1} → {load2}",
            "planted": int(found.shape[0]), "shares": float(shares.mean()),
            "found_of_sharing": bool(found[shares].all()),
            "found": int(found.sum()), "sim_near": int(near.sum()), "sim_found": int(sim_found.sum()),
            "decoys": int(info["decoy_pos"].shape[0]), "decoys_out": decoys_out, "sample": int(sample.shape[0]),
            "exact": exact, "brute_s_row": brute_s}



def timed(run: Callable[[], T]) -> tuple[T, float, float]:
    """``run()``, its wall seconds and the process's CPU seconds."""
    c0, t0 = time.process_time(), time.time()
    out = run()
    return out, time.time() - t0, time.process_time() - c0

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=float, default=1e6)
    ap.add_argument("--stored", default="1e7,1e8", help="stored sizes, comma-separated")
    ap.add_argument("--chunk", type=float, default=1e7, help="stored rows per chunk (slices of the memmap)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--verify", type=float, default=0.3)
    ap.add_argument("--sample", type=int, default=200, help="stored rows of each kind checked by brute force")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args()
    nq = int(args.queries)
    rng = np.random.default_rng(2026)
    q_sk = sketches(rng, nq)
    q_sk[rng.random(nq) < 0.001, :4] = 0
    q_sim = u64(rng, nq)
    t0 = time.time()
    qb = QueryBands(q_sk)
    build = time.time() - t0
    log(f"query index: {len(qb):,} queries with shingles, {qb.nbytes() / 2**20:.0f} MiB, {build:.1f} s")
    q_ok = np.frombuffer(q_sk[:, :4].tobytes(), dtype=np.uint32) > 0
    brute_parts = (keys_of(q_sk[:, 4:]), nibbles_of(q_sk[:, 4:]), q_ok)
    rows = [run_size(int(float(x)), q_sk, q_sim, qb, args, brute_parts) for x in args.stored.split(",")]
    write(rows, args, nq, build, qb.nbytes())


def write(rows: list[dict[str, object]], args: argparse.Namespace, nq: int, build: float, nbytes: int) -> None:
    out = []
    for r in rows:
        s = int(r["s"])  # type: ignore[call-overload]
        bw, bc, sw, sc = (float(r[k]) for k in ("band_wall", "band_cpu", "sim_wall", "sim_cpu"))  # type: ignore[arg-type]
        at = 1e9 / s
        out.append([f"{s:,}", f"{bw:.1f}", f"{bw / s * 1e9:,.0f}", f"{bc / s * 1e9:,.0f}", f"{sw:.1f}",
                    f"{sw / s * 1e9:,.0f}", f"{sc / s * 1e9:,.0f}",
                    f"{(bw + sw) * at / 60:.1f} min", f"{(bc + sc) * at / args.threads / 60:.1f} min",
                    r["load"], f"{r['pairs']:,} / {r['sim_pairs']:,}",
                    f"{r['found']:,} of {r['planted']:,} (share a band: {float(r['shares']):.3f}; "  # type: ignore[arg-type]
                    f"all of those: {'yes' if r['found_of_sharing'] else 'NO'}); SimHash {r['sim_found']:,} of "
                    f"{r['sim_near']:,}", f"{r['decoys_out']} of {r['decoys']:,}",
                    f"{r['sample']:,} rows: {'yes' if r['exact'] else 'NO'}",
                    f"{float(r['brute_s_row']) * s / bw:,.0f}"])  # type: ignore[arg-type]
    biggest = rows[-1]
    s = int(biggest["s"])  # type: ignore[call-overload]
    wall_total = (float(biggest["band_wall"]) + float(biggest["sim_wall"])) * 1e9 / s  # type: ignore[arg-type]
    cpu_total = (float(biggest["band_cpu"]) + float(biggest["sim_cpu"])) * 1e9 / s / args.threads  # type: ignore[arg-type]
    met = "met" if cpu_total <= TARGET_S else "not met"
    met_wall = "met" if wall_total <= TARGET_S else "not met"
    cmd = " ".join(["python", "benchmarks/band_join.py", *sys.argv[1:]])
    body = [START, "## Both candidate stages in batch: sketch bands + SimHash k = 3 (`benchmarks/band_join.py`)", "",
            f"Produced by `{cmd}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, src at {commit()}; "
            f"{machine_line()}; {args.threads} threads, the 2 cores shared with other agents' work "
            "(1-minute load average at the start of the band join → its end → the end of the SimHash "
            "join, are in the table: wall clock stretches with them; CPU time is the steadier figure).", "",
            f"{nq:,} queries (0.1% without shingles) against S stored rows streamed from raw files under "
            "/tmp (`np.memmap`, chunks of "
            f"{int(args.chunk):,} rows; S × 64 bytes of sketches and S × 8 of SimHash values, generated "
            "and deleted by the run, not timed). Bands: `band_join_chunks` at verify "
            f"{args.verify} (nibble threshold {nibble_threshold(far_verify(args.verify) or 1.0)} of 56: "
            "`nibble_threshold(far_verify(verify))`, what the Detector asks of `BandIndex.search`); "
            f"the query index (8 bands) took {build:.1f} s and {nbytes / 2**20:.0f} MiB. SimHash: "
            "`permuted_join.batch_join(k=3)` on the same run's SimHash files. Planted: near copies of "
            "random queries (40% of the bins redrawn; half with the SimHash within 3 bits), decoys "
            "sharing one band key with a query and random elsewhere. Exact = on a sample of stored rows "
            "(random, planted, decoys) the join's queries equal a numpy brute force over all queries "
            "(any equal band key and the nibble filter); × brute force = that numpy scan's time per "
            "stored row × S against the join's wall clock (the scan over 10^6 queries is about "
            "8·10^6 key comparisons a stored row).", ""]
    body += table(["S", "bands s", "bands wall ns/stored", "bands CPU ns/stored", "SimHash s",
                   "SimHash wall ns/stored", "SimHash CPU ns/stored", "both at 10^9 (wall, this load)",
                   "both at 10^9 (CPU / threads)", "load", "pairs bands / SimHash", "planted found",
                   "decoys paired with their query", "exact (sample)", "× brute force"], out)
    body += ["", f"Target (issue 27): 10^6 queries against 10^9 stored at the default settings (both stages) "
             f"in ≤ 20 min on 2 cores: projected from S = {s:,} (linear in S: compare the ns per stored "
             f"row at both sizes), {cpu_total / 60:.1f} min of CPU time / {args.threads} threads, i.e. on 2 "
             f"cores not shared with other work (**{met}**); {wall_total / 60:.1f} min of wall clock at this "
             f"run's load ({met_wall}). Not counted: reading the stored files from disk. At 10^9 they are "
             f"72 GB (64 of sketches, 8 of SimHash values), more than this machine's RAM: read once per stage, "
             f"they need {72e3 / cpu_total:,.0f} MB/s of disk to keep up with the unshared projection and "
             f"{72e3 / wall_total:,.0f} MB/s at this load (here the 6.4 GB file is written just before the "
             "join and read from the page cache). Per stored row the cost is flat from 10^7 to 10^8 "
             "(the query side is the same; a block of 2^19 stored rows is sorted and merged per band), "
             "which is what the linear projection assumes.", END]
    text = "\n".join(body)
    print(text)
    if not args.no_write:
        replace_section(DOC, START, END, text)


if __name__ == "__main__":
    main()

"""The batch job on one machine (neardup.batch.dedup_batch) against the same job in Spark
local[2] (neardup.spark) on real corpus pages: wall time and pages per second, with the
answers checked equal. Writes its section of docs/benchmarks.md.

    .venv/bin/python benchmarks/spark.py [--pages 600] [--master local[2]]

Not measured here (issue 16 asks for them, still open): the 10^6 / 10^7 synthetic self-join
in Spark, shuffle bytes per fingerprint, the projection per 10^9 pages, bucket skew.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _docs import replace_section, table  # noqa: E402

from neardup.batch import dedup_batch  # noqa: E402
from neardup.detector import Page  # noqa: E402

START, END = "<!-- spark:start -->", "<!-- spark:end -->"
DOC = ROOT / "docs" / "benchmarks.md"
CORPUS = Path(os.environ.get("NEARDUP_CORPUS", ROOT.parent / "shared" / "corpus"))


def load_pages(n: int) -> list[Page]:
    """Postlight fixtures (recaptures across redesigns) then Dragnet (same-site pages)."""
    out: list[Page] = []
    for folder, url_col, host_col in (("postlight-fixtures", "url_from_html", "fixture_domain"),
                                      ("dragnet", "url_from_html", "host")):
        root = CORPUS / folder
        with open(root / "manifest.tsv", encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                if len(out) >= n:
                    return out
                url = row.get(url_col) or f"https://{row.get(host_col) or 'unknown.example'}/{row['file']}"
                # as text, the way the JSONL file hands them to Spark (both sides then decode alike)
                html = gzip.decompress((root / row["file"]).read_bytes()).decode("utf-8", "replace")
                out.append(Page(url, html))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=600)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    pages = load_pages(args.pages)
    n = len(pages)
    load = os.getloadavg()[0]
    rows = []
    results = {}
    for jobs in (1, 2):
        t = time.perf_counter()
        res = dedup_batch(pages, jobs=jobs)
        dt = time.perf_counter() - t
        results[f"batch jobs={jobs}"] = res
        rows.append((f"dedup_batch, {jobs} process{'es' if jobs > 1 else ''}", dt))
        print(f"batch jobs={jobs}: {dt:.1f} s, {n / dt:.1f} pages/s", flush=True)
    from neardup.spark import dedup, fingerprints, session

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "pages.jsonl"
        with open(src, "w", encoding="utf-8") as fh:
            for p in pages:
                fh.write(json.dumps({"url": p.url, "html": p.content}) + "\n")
        t = time.perf_counter()
        spark = session(args.master, partitions=4, app="neardup-bench")
        spark.sparkContext.setLogLevel("ERROR")
        t_start = time.perf_counter() - t
        t = time.perf_counter()
        fps = fingerprints(spark, [str(src)], partitions=4)
        fps.write.parquet(str(Path(tmp) / "fps"))
        t_fp = time.perf_counter() - t
        t = time.perf_counter()
        out = dedup(spark.read.parquet(str(Path(tmp) / "fps")))
        out.write.parquet(str(Path(tmp) / "out"))
        t_dd = time.perf_counter() - t
        written = spark.read.parquet(str(Path(tmp) / "out")).collect()
        got = sorted((r.url, r.digest, r.status, r.cluster, r.canonical) for r in written)
        spark.stop()
    expected = sorted((v.url, v.digest, v.status, v.cluster, v.canonical) for v in results["batch jobs=1"].verdicts)
    equal = got == expected
    rows.append((f"Spark {args.master}: fingerprints (JSONL in, Parquet out)", t_fp))
    rows.append((f"Spark {args.master}: dedup stages 2-6 (Parquet in and out)", t_dd))
    rows.append((f"Spark {args.master}: both", t_fp + t_dd))
    for name, dt in rows:
        print(f"{name}: {dt:.1f} s, {n / dt:.1f} pages/s")
    print(f"Spark session start {t_start:.1f} s; answers equal: {equal}")
    summary = {"pages": n, "clusters": len(results["batch jobs=1"].clusters), "load": round(load, 1),
               "batch_1_s": round(rows[0][1], 1), "batch_2_s": round(rows[1][1], 1),
               "spark_fingerprint_s": round(t_fp, 1), "spark_dedup_s": round(t_dd, 1),
               "spark_session_s": round(t_start, 1), "equal": equal}
    if args.no_write:
        print(json.dumps(summary))
        return
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    body = [START, "## Batch job: one machine vs Spark local[2]", "",
            f"`benchmarks/spark.py --pages {args.pages}` ({when}; {platform.python_version()}, {os.cpu_count()} CPUs "
            f"shared with other jobs, load {load:.1f} at start): {n} real corpus pages (Postlight recaptures, "
            f"then Dragnet), {summary['clusters']} clusters. The same job, `neardup.batch.dedup_batch` in one "
            f"process (and fingerprints in 2), against `neardup.spark` in `{args.master}` (JSONL in, Parquet out, "
            "fingerprints written then read back). Spark's answer equals the batch job's: "
            f"**{'yes' if equal else 'NO'}**.", ""]
    body += table(["run", "seconds", "pages/s"], [[name, f"{dt:.1f}", f"{n / dt:.1f}"] for name, dt in rows])
    body += ["", f"Starting the Spark session took {t_start:.1f} s more. At this size Spark's fixed costs (a JVM, "
             "Python workers, a dozen shuffles and the component rounds, each a few Spark jobs) dominate the "
             "dedup stages; fingerprinting is the part that grows with the pages and that executors parallelise, but "
             "with the two CPUs busy with other jobs Spark local[2] was no faster than one process here (the "
             "issue's 1.7x fingerprinting target is not shown by this run). "
             "Not measured yet (issue 16): the synthetic self-join of 10^6 and 10^7 fingerprints in Spark, shuffle "
             "bytes per fingerprint, machine-seconds per 10^9 pages, and bucket skew.", "",
             json.dumps(summary), END]
    replace_section(DOC, START, END, "\n".join(body))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()

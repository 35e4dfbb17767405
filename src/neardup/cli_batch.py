"""``neardup spark-dedup``: the batch job on Spark (:mod:`neardup.spark`) from the main
command line, registered on the main group by :mod:`neardup.cli`; the same job as
``python -m neardup.spark`` and ``spark-submit src/neardup/spark.py``.

Inputs: WARC files and folders, JSONL or Parquet of ``url``/``html``, or Parquet of
precomputed fingerprints (the columns of :data:`neardup.batch.PARQUET_COLUMNS`, as written
by ``--fingerprints-out``). Exit codes: 0 ok, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import click

from neardup.errors import ConfigError
from neardup.fingerprint import DEFAULT_CONFIG
from neardup.minhash import MinHashConfig
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY, METHODS


@click.command("spark-dedup", context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", required=True, help="Output folder (Parquet: url, digest, simhash, status, cluster, "
                                           "canonical, match, distance, version).")
@click.option("-k", "--k", "k", type=click.IntRange(0, 63), default=None,
              help="SimHash distance (default: the spec version's).")
@click.option("--verify", type=click.FloatRange(0.0, 1.0), default=DEFAULT_VERIFY, help="Sketch threshold.")
@click.option("--bands/--no-bands", default=True, help="Candidates from the sketch bands too (as the Detector).")
@click.option("--exact-k", is_flag=True, help="SimHash candidates up to k by radius probes (the batch job's "
                                              "answer at k > 3; small inputs only).")
@click.option("--canonical", default=None, help="Policy chain, e.g. rel-canonical,first-seen.")
@click.option("--method", type=click.Choice(["simhash", "minhash"]), default="simhash")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=DEFAULT_THRESHOLD,
              help="MinHash Jaccard threshold (--method minhash).")
@click.option("--master", default=None, help="Spark master (default: $SPARK_MASTER, else local[*]).")
@click.option("--partitions", type=click.IntRange(1), default=None, help="Shuffle partitions.")
@click.option("--fingerprints-out", default=None, help="Also write the fingerprints (Parquet) and read them back.")
def spark_dedup_cmd(inputs: tuple[str, ...], out: str, k: int | None, verify: float, bands: bool, exact_k: bool,
                    canonical: str | None, method: str, threshold: float, master: str | None,
                    partitions: int | None, fingerprints_out: str | None) -> None:
    """Clusters and canonicals of whole inputs on Spark (neardup.spark; pip install 'neardup[spark]'):
    the answer of `neardup dedup --batch`, with the same candidate stage (sketch bands plus
    SimHash blocks). Prints a summary line."""
    try:
        import pyspark  # noqa: F401 (the extra is installed)
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise click.UsageError(f"PySpark is not installed ({exc}): pip install 'neardup[spark]'") from None
    argv = [*inputs, "--out", out, "--verify", str(verify), "--method", method, "--threshold", str(threshold)]
    if k is not None:
        argv += ["--k", str(k)]
    if not bands:
        argv.append("--no-bands")
    if exact_k:
        argv.append("--exact-k")
    for flag, value in (("--canonical", canonical), ("--master", master), ("--fingerprints-out", fingerprints_out),
                        ("--partitions", partitions)):
        if value is not None:
            argv += [flag, str(value)]
    rc = spark_main(argv)
    if rc:
        sys.exit(rc)


def spark_main(argv: Sequence[str] | None = None) -> int:
    """``python -m neardup.spark``: the batch job on Spark from an argument list; 0 ok, 2 bad
    settings."""
    from neardup.spark import dedup, fingerprints, session

    parser = argparse.ArgumentParser(prog="python -m neardup.spark",
                                     description="Batch near-duplicate detection on Spark: clusters and canonicals "
                                                 "of whole inputs (WARC, folders, JSONL or Parquet of url/html, "
                                                 "Parquet of fingerprints).")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--out", required=True, help="output folder (Parquet: url, digest, simhash, status, "
                                                     "cluster, canonical, match, distance, version)")
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--verify", type=float, default=DEFAULT_VERIFY)
    parser.add_argument("--canonical", default=None, help="policy chain, e.g. rel-canonical,first-seen")
    parser.add_argument("--method", choices=METHODS, default="simhash")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="MinHash Jaccard threshold")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--fingerprints-out", default=None, help="also write the fingerprints (Parquet)")
    parser.add_argument("--no-bands", dest="bands", action="store_false",
                        help="no candidates from the sketch bands (as DetectorSettings.bands=False)")
    parser.add_argument("--exact-k", action="store_true",
                        help="SimHash candidates up to k by radius probes (the batch job's answer at k > 3; "
                             "thousands of rows a fingerprint at k = 12: small inputs only)")
    args = parser.parse_args(argv)
    config = DEFAULT_CONFIG.with_(minhash=MinHashConfig()) if args.method == "minhash" else DEFAULT_CONFIG
    try:
        spark = session(args.master or os.environ.get("SPARK_MASTER", "local[*]"), args.partitions or 8)
        fps = fingerprints(spark, args.inputs, config, args.partitions)
        if args.fingerprints_out:
            fps.write.mode("overwrite").parquet(args.fingerprints_out)
            fps = spark.read.parquet(args.fingerprints_out)
        out = dedup(fps, k=args.k, verify=args.verify, canonical=args.canonical, method=args.method,
                    threshold=args.threshold, config=config, bands=args.bands, exact_k=args.exact_k)
        out.write.mode("overwrite").parquet(args.out)
        written = spark.read.parquet(args.out)
        counts = {r["status"]: r["count"] for r in written.groupBy("status").count().collect()}
        errors = fps.where("error is not null").count()
        print(f"pages {sum(counts.values())}: " + ", ".join(f"{s} {counts.get(s, 0)}" for s in
                                                           ("new", "exact", "near", "empty"))
              + f"; refetched {written.where('version is not null').count()}"
              + f"; errors {errors}; clusters {written.select('cluster').distinct().count()}")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

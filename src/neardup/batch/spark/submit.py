"""The Spark job's entry: :func:`run` (what ``neardup spark-dedup`` calls) and :func:`main`,
its command line for ``python -m neardup.batch.spark`` and ``spark-submit``::

    python -m neardup.batch.spark crawl/*.warc.gz pages.jsonl --out verdicts/   # local[*]
    spark-submit --master yarn "$(python -c 'import neardup.batch.spark.__main__ as m; print(m.__file__)')" \\
        s3://bucket/seg/*.warc.gz --out s3://bucket/out
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from neardup.batch.graph import METHODS
from neardup.batch.spark.cdxj import write_cdxj
from neardup.batch.spark.job import dedup, fingerprints, session
from neardup.batch.spark.versions import is_revisit
from neardup.errors import ConfigError, NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG
from neardup.fingerprint.minhash import MinHashConfig
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY


def run(inputs: Sequence[str], out: str, *, k: int | None = None, verify: float | None = DEFAULT_VERIFY,
        canonical: str | None = None, method: str = "simhash", threshold: float = DEFAULT_THRESHOLD,
        master: str | None = None, partitions: int | None = None, fingerprints_out: str | None = None,
        bands: bool = True, exact_k: bool = False, cdxj: str | None = None) -> str:
    """The whole job: fingerprint ``inputs`` (or read their fingerprints), decide, write the
    verdicts to the Parquet folder ``out`` (and with ``cdxj`` their CDXJ sidecar to that folder:
    :mod:`neardup.batch.spark.cdxj`); returns the summary line (``pages N: new …``).
    ``master`` defaults to ``$SPARK_MASTER``, else ``local[*]``. :class:`ConfigError` for bad
    settings."""
    from pyspark.sql import functions as F

    if cdxj and method != "simhash":
        raise ConfigError("the CDXJ sidecar goes with method simhash")
    config = DEFAULT_CONFIG.with_(minhash=MinHashConfig()) if method == "minhash" else DEFAULT_CONFIG
    spark = session(master or os.environ.get("SPARK_MASTER", "local[*]"), partitions or 8)
    fps = fingerprints(spark, inputs, config, partitions)
    if fingerprints_out:
        fps.write.mode("overwrite").parquet(fingerprints_out)
        fps = spark.read.parquet(fingerprints_out)
    answer = dedup(fps, k=k, verify=verify, canonical=canonical, method=method, threshold=threshold, config=config,
                   bands=bands, exact_k=exact_k)
    answer.write.mode("overwrite").parquet(out)
    written = spark.read.parquet(out)
    if cdxj:
        write_cdxj(written, cdxj, config.spec)
    counts = {r["status"]: r["count"] for r in written.groupBy("status").count().collect()}
    read = {r["kind"]: r["count"] for r in fps.select(
        F.when(F.col("error").isNull(), "page").when(is_revisit(), "revisit").otherwise("error").alias("kind"))
        .groupBy("kind").count().collect()}
    pages = sum(counts.values())
    revisits = pages - read.get("page", 0)  # the revisits that found their original
    return (f"pages {pages}: " + ", ".join(f"{s} {counts.get(s, 0)}" for s in ("new", "exact", "near", "empty"))
            + f"; refetched {written.where('version is not null').count()}"
            + f"; revisits {revisits}" + (f" (skipped {read.get('revisit', 0) - revisits} without their original)"
                                         if read.get("revisit", 0) > revisits else "")
            + f"; errors {read.get('error', 0)}; clusters {written.select('cluster').distinct().count()}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m neardup.batch.spark`` and ``spark-submit .../neardup/batch/spark/__main__.py``:
    :func:`run` from an argument list (``neardup spark-dedup`` is the same job with the CLI's
    conventions); 0 ok, 2 bad settings."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m neardup.batch.spark",
                                     description="Batch near-duplicate detection on Spark: clusters and canonicals "
                                                 "of whole inputs (WARC, folders, JSONL or Parquet of url/html, "
                                                 "Parquet of fingerprints).")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--out", required=True, help="output folder (Parquet: url, digest, simhash, status, "
                                                     "cluster, canonical, match, distance, fetched_at, version)")
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--verify", type=float, default=DEFAULT_VERIFY)
    parser.add_argument("--canonical", default=None, help="policy chain, e.g. rel-canonical,first-seen")
    parser.add_argument("--method", choices=METHODS, default="simhash")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="MinHash Jaccard threshold")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--fingerprints-out", default=None, help="also write the fingerprints (Parquet)")
    parser.add_argument("--cdxj", default=None, help="also write the CDXJ sidecar to this folder (sorted text parts)")
    parser.add_argument("--no-bands", dest="bands", action="store_false",
                        help="no candidates from the sketch bands (as DetectorSettings.bands=False)")
    parser.add_argument("--exact-k", action="store_true",
                        help="SimHash candidates up to k by radius probes (the batch job's answer at k > 3; "
                             "thousands of rows a fingerprint at k = 12: small inputs only)")
    args = vars(parser.parse_args(argv))
    try:
        print(run(args.pop("inputs"), args.pop("out"), **args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NeardupError as exc:  # bad input (a damaged fingerprint file...): exit 1, as the CLI
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0

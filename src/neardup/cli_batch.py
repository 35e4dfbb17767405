"""``neardup spark-dedup``: the batch job on Spark (:mod:`neardup.spark`) from the main
command line, registered on the main group by :mod:`neardup.cli`; the same job as
``python -m neardup.spark`` and ``spark-submit src/neardup/spark.py``.

Inputs: WARC files and folders, JSONL or Parquet of ``url``/``html``, or Parquet of
precomputed fingerprints (the columns of :data:`neardup.batch.PARQUET_COLUMNS`, as written
by ``--fingerprints-out``). Exit codes: 0 ok, 2 bad usage or configuration.
"""

from __future__ import annotations

import sys

import click

from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY


@click.command("spark-dedup", context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", required=True, help="Output folder (Parquet: url, digest, simhash, status, cluster, "
                                           "canonical, match, distance).")
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
        from neardup.spark import main as spark_main
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

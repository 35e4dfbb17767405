"""``neardup dedup --batch`` on one machine (registered by :mod:`neardup.cli`): pages and
fingerprint Parquet files in, every page's verdict out. The SimHash method runs on columns
(:mod:`neardup.batch.arrays`, :mod:`neardup.batch.files`); ``--method minhash`` on the records
of :func:`neardup.batch.dedup.dedup_batch`; ``neardup check-batch``, a crawl segment against an
archive's fingerprints (:mod:`neardup.batch.check`); ``neardup spark-dedup``, the batch job on Spark
(:func:`neardup.batch.spark.submit.run`).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

import click

from neardup.cli.common import refuse_overwrite
from neardup.cli.errors import one_line as _one_line
from neardup.detector.settings import DetectorSettings
from neardup.fingerprint.core import DEFAULT_CONFIG, FingerprintConfig
from neardup.ingest.warc_out import RevisitPolicy, warc_position, write_deduplicated

if TYPE_CHECKING:
    from neardup.batch.graph import BatchVerdict

from typing import IO

from neardup.cli.errors import handle_errors
from neardup.cli.options import settings_from_options, settings_options
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY


def fingerprint_file(path: str) -> bool:
    """A fingerprint Parquet input of ``dedup --batch`` (False without PyArrow)."""
    try:
        from neardup.batch.files import is_fingerprint_file

        return is_fingerprint_file(path)
    except ImportError:
        return False


def dedup_batch_files(inputs: tuple[str, ...], out: str | None, fmt: str | None, errors_path: str | None, *,
                      settings: DetectorSettings, jobs: int | None, config: FingerprintConfig | None,
                      fingerprints_out: str | None = None, exact_k: bool = True, cdxj: str | None = None,
                      warc_out: tuple[str, RevisitPolicy] | None = None) -> None:
    """``dedup --batch``: :func:`neardup.batch.dedup.dedup_batch` over every page of the inputs
    (and the records of fingerprint Parquet inputs); ``fingerprints_out``: the pages'
    fingerprints written as Parquet too; ``warc_out``: the deduplicated copy of the WARC inputs
    and its policy (:func:`neardup.ingest.warc_out.write_deduplicated`)."""
    from neardup.batch.dedup import dedup_batch, records_from_pages
    from neardup.batch.files import check_fingerprint_file, read_fingerprints, write_fingerprints
    from neardup.batch.graph import BatchRecord
    from neardup.batch.revisits import resolve_revisits
    from neardup.errors import InputError
    from neardup.ingest.inputs import read_all
    from neardup.ingest.workers import default_jobs
    from neardup.model import Page

    if settings.containment is not None:
        raise click.UsageError("--containment is not available with --batch")
    if cdxj is not None and settings.method != "simhash":
        raise click.UsageError("--cdxj with --batch goes with --method simhash")
    if warc_out is not None and settings.method != "simhash":
        raise click.UsageError("--warc-out with --batch goes with --method simhash")
    jobs = jobs or default_jobs()
    parquet = [p for p in inputs if fingerprint_file(p)]
    for p in parquet:  # a bad fingerprint file is refused (naming it) before any page is read or written
        check_fingerprint_file(p, InputError, rows=False)
    items: list[Page | BatchRecord] = ([r for p in parquet for r in read_fingerprints(p, InputError)]
                                       if settings.method != "simhash" else [])
    pages, unread, revisits = [], [], []
    skipped: dict[str, int] = {}
    positions: dict[tuple[str, float], list[tuple[str, int]]] = {}  # a WARC page's records, for --warc-out
    for item in read_all(tuple(p for p in inputs if p not in parquet), (config or DEFAULT_CONFIG).max_bytes):
        if item.page is not None:
            pages.append(item.page)
            if warc_out is not None and (at := warc_position(item.source)) is not None:
                positions.setdefault(_capture_key(item.page.url, item.page.fetched_at), []).append(at)
        elif item.revisit is not None:
            revisits.append(item.revisit)
        elif item.skip is not None:
            skipped[item.skip] = skipped.get(item.skip, 0) + 1
        else:
            unread.append({"source": item.source, "reason": item.reason or "unreadable", "error": item.error})
    if fingerprints_out is not None or (revisits and settings.method != "simhash"):
        records, failed = records_from_pages(pages, config or DEFAULT_CONFIG, jobs)
        done = [r for r in records if r is not None]
        if fingerprints_out is not None:
            write_fingerprints(done, fingerprints_out)
        unread += [{"source": None, "reason": "bad-page", "error": e} for e in failed]
        items += done
    else:
        items += pages
    fmt = fmt or output_format(out)
    if settings.method == "simhash":
        _dedup_batch_arrays(parquet, items, unread, out, fmt, errors_path, settings=settings, jobs=jobs,
                            config=config, exact_k=exact_k, revisits=revisits, skipped=skipped, cdxj=cdxj,
                            warc_out=None if warc_out is None else WarcCopy(*warc_out, inputs, positions))
        return
    missed: list[Page] = []
    if revisits:  # the records path: each revisit a copy of its URL's capture before it
        copies, missed = resolve_revisits([it for it in items if isinstance(it, BatchRecord)], revisits)
        items += [r for r in copies if r is not None]
    if fmt == "parquet":
        raise click.UsageError("--format parquet goes with --method simhash")
    res = dedup_batch(items, k=settings.k, verify=settings.verify, canonical=settings.canonical,
                      method=settings.method, threshold=settings.threshold, config=config, jobs=jobs,
                      bands=settings.bands, exact_k=exact_k)
    if out:
        stream = sys.stdout if out == "-" else open(out, "w", encoding="utf-8", newline="")
        try:
            write_records(res.verdicts, stream, fmt)
        finally:
            if stream is not sys.stdout:
                stream.close()
    errors = unread + [{"source": None, "reason": "bad-page", "error": e} for e in res.errors]
    report_skipped(errors, errors_path)
    summary = {**res.summary(), "errors": len(errors),
               **_skip_summary(skipped, len(revisits) - len(missed), len(missed)),
               "batch": True, "jobs": jobs}
    click.echo(json.dumps(summary), err=out == "-")


class WarcCopy(NamedTuple):
    """The deduplicated WARC of a ``dedup --batch`` run: its path and policy, the WARC inputs
    it copies, and each page's (file, record number) by its capture (:func:`_capture_key`),
    which its row's verdict annotates."""

    path: str
    policy: RevisitPolicy
    inputs: tuple[str, ...]
    positions: dict[tuple[str, float], list[tuple[str, int]]]


def _capture_key(url: str, fetched_at: float | None) -> tuple[str, float]:
    """A batch row's capture: its URL and fetch time (to the millisecond)."""
    return url, round(float(fetched_at or 0.0), 3)


def _skip_summary(skipped: dict[str, int], revisits: int, missed: int) -> dict[str, Any]:
    """The summary's ``revisits`` (taken as captures), ``skipped`` and ``skipped_by_reason``
    (records that are not pages, as ``neardup dedup`` counts them; ``missed``: revisits
    without their original, skipped as ``revisit``)."""
    by = dict(skipped)
    if missed:
        by["revisit"] = by.get("revisit", 0) + missed
    return {"revisits": revisits, "skipped": sum(by.values()), "skipped_by_reason": dict(sorted(by.items()))}


def write_records(verdicts: Iterable[BatchVerdict], stream: TextIO, fmt: str) -> None:
    """Write the record path's verdicts as CSV (with a header) or JSON lines, the SimHash in
    hex (the columns and bytes :func:`neardup.batch.files.write_verdicts` writes from arrays)."""
    from neardup.batch.files import FIELDS

    writer = csv.DictWriter(stream, fieldnames=FIELDS) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    for v in verdicts:
        row = {f: getattr(v, f) for f in FIELDS}
        row["simhash"] = f"{v.simhash:016x}"
        if writer is not None:
            writer.writerow(row)
        else:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")


def output_format(out: str | None) -> str:
    """The output format a file name asks for: csv, parquet, else JSON lines."""
    low = (out or "").lower()
    return "csv" if low.endswith(".csv") else "parquet" if low.endswith(".parquet") else "jsonl"


def report_skipped(errors: list[dict[str, Any]], errors_path: str | None) -> None:
    """One stderr line per input item skipped (source, reason, error); all of them as JSON
    lines in ``errors_path`` when given."""
    for e in errors:
        click.echo(f"neardup: skipped {_one_line(e['source'] or '', 300)}: [{e['reason']}] "
                   f"{_one_line(e['error'] or '', 1000)}", err=True)
    if errors_path:
        with open(errors_path, "w", encoding="utf-8") as fh:
            for e in errors:
                fh.write(json.dumps(e, ensure_ascii=True) + "\n")


def _dedup_batch_arrays(parquet: list[str], items: list[Any], unread: list[dict[str, Any]], out: str | None,
                        fmt: str, errors_path: str | None, *, settings: DetectorSettings, jobs: int,
                        config: FingerprintConfig | None, exact_k: bool = True, revisits: list[Any] | None = None,
                        skipped: dict[str, int] | None = None, cdxj: str | None = None,
                        warc_out: WarcCopy | None = None) -> None:
    """``dedup --batch`` on columns (:mod:`neardup.batch.arrays`): the fingerprint files read
    by Arrow, pages fingerprinted into records, verdicts written column-wise
    (:func:`neardup.batch.files.write_verdicts`); the same rows as ``dedup_batch``. ``revisits``
    (pages): captures of their URLs' content before them (:func:`neardup.batch.revisits.revisit_table`),
    after the other rows; ``cdxj``: the CDXJ sidecar's path (:func:`neardup.batch.cdxj.write_cdxj`);
    ``warc_out``: the deduplicated WARC to write."""
    from neardup.batch.arrays import records_table
    from neardup.batch.cdxj import write_cdxj
    from neardup.batch.dedup import records_from_pages
    from neardup.batch.files import (
        arrays_of,
        read_fingerprint_arrays,
        read_fingerprint_tables,
        verdict_dicts,
        write_verdicts,
    )
    from neardup.batch.graph import BatchRecord
    from neardup.batch.revisits import revisit_table
    from neardup.batch.versions import solve_captures
    from neardup.errors import InputError
    from neardup.model import default_k

    config = config or DEFAULT_CONFIG
    pages = [it for it in items if not isinstance(it, BatchRecord)]
    records = [it for it in items if isinstance(it, BatchRecord)]
    failed: list[str] = []
    if pages:
        got, failed = records_from_pages(pages, config, jobs)
        records += [r for r in got if r is not None]
    skipped = {} if skipped is None else skipped
    missed: list[Any] = []
    copies = None
    if revisits:
        tables = read_fingerprint_tables(parquet, InputError) + [records_table(records)]
        copies, missed = revisit_table(tables, revisits)
        arrays = arrays_of([*tables, copies])
    else:
        arrays = (arrays_of(read_fingerprint_tables(parquet, InputError) + [records_table(records)]) if records
                  else read_fingerprint_arrays(parquet, InputError))
    k = settings.k if settings.k is not None else default_k(config.version, settings.bands)
    answer = solve_captures(arrays, k=int(k), verify=settings.verify, policy=settings.canonical,
                   bands=settings.bands, exact_k=exact_k, jobs=jobs)
    if out:
        if out == "-":
            sys.stdout.flush()
            write_verdicts(answer, sys.stdout.buffer, fmt)
            sys.stdout.buffer.flush()
        else:
            write_verdicts(answer, out, fmt)
    if cdxj is not None:
        with open(cdxj, "w", encoding="utf-8", newline="\n") as fh:
            write_cdxj(answer, fh, config.spec)
    copied = None
    if warc_out is not None:
        decided: dict[tuple[str, int], dict[str, Any]] = {}
        for row, first_seen in zip(verdict_dicts(answer), answer.arrays.first_seen.tolist()):
            for at in warc_out.positions.get(_capture_key(row["url"], first_seen), ()):
                decided[at] = row
        copied = write_deduplicated([Path(p) for p in warc_out.inputs], Path(warc_out.path), decided,
                                    warc_out.policy).to_dict()
    errors = unread + [{"source": None, "reason": "bad-page", "error": e} for e in failed]
    report_skipped(errors, errors_path)
    taken = 0 if copies is None else copies.num_rows
    summary = {**answer.summary(), "errors": len(errors), **_skip_summary(skipped, taken, len(missed)),
               "batch": True, "jobs": jobs, **({"warc_out": copied} if copied is not None else {})}
    click.echo(json.dumps(summary), err=out == "-")


# -- neardup spark-dedup -------------------------------------------------------------------------


@click.command("spark-dedup", context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", required=True, help="Output folder (Parquet: url, digest, simhash, status, cluster, "
                                           "canonical, match, distance, fetched_at, version).")
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
@click.option("--cdxj", default=None, help="Also write the CDXJ sidecar (the lines of dedup --batch --cdxj) to this "
                                           "folder: sorted text parts, one file when concatenated in name order.")
@handle_errors
def spark_dedup_cmd(inputs: tuple[str, ...], out: str, k: int | None, verify: float, bands: bool, exact_k: bool,
                    canonical: str | None, method: str, threshold: float, master: str | None,
                    partitions: int | None, fingerprints_out: str | None, cdxj: str | None) -> None:
    """Clusters and canonicals of whole inputs on Spark (neardup.batch.spark.job; pip install 'neardup[spark]'):
    the answer of `neardup dedup --batch`, with the same candidate stage (sketch bands plus
    SimHash blocks). Prints a summary line."""
    refuse_overwrite({"--out": out, "--fingerprints-out": fingerprints_out, "--cdxj": cdxj}, inputs=inputs)
    if cdxj is not None and method != "simhash":
        raise click.UsageError("--cdxj goes with --method simhash")
    try:
        import pyspark  # noqa: F401 (the extra is installed)
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise click.UsageError(f"PySpark is not installed ({exc}): pip install 'neardup[spark]'") from None
    from neardup.batch.spark import submit as spark_job

    click.echo(spark_job.run(inputs, out, k=k, verify=verify, canonical=canonical, method=method, threshold=threshold,
                             master=master, partitions=partitions, fingerprints_out=fingerprints_out, bands=bands,
                             exact_k=exact_k, cdxj=cdxj))


# -- neardup check-batch -------------------------------------------------------------------------


@click.command("check-batch")
@click.argument("queries", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--stored", "stored", multiple=True, required=True, type=click.Path(exists=True),
              help="Fingerprint Parquet file (or folder of parts) of the archive: what 'fingerprint --out' and "
                   "'dedup --batch --fingerprints-out' write. Repeatable; read a row group at a time.")
@click.option("-o", "--out", "out", default="-", show_default=True,
              help="Write one row a query here (- for stdout: the summary then goes to stderr).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default=None,
              help="Output format (default: from --out's extension, else jsonl).")
@click.option("--errors", "errors_path", default=None, type=click.Path(dir_okay=False),
              help="Write one JSON line per query item that could not be read or fingerprinted: source, reason, error.")
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), default=None,
              help="Processes fingerprinting page inputs (default: the CPUs).")
@settings_options(["k", "verify", "bands"])
@handle_errors
def check_batch_cmd(queries: tuple[str, ...], stored: tuple[str, ...], out: str, fmt: str | None,
                    errors_path: str | None, jobs: int | None, **opts: Any) -> None:
    """Check QUERIES (fingerprint Parquet files or pages) against the --stored fingerprints:
    each query is exact, near (the match rule of the Detector, the same k, verify and bands),
    new or empty; a stored row of the query's own URL is its version (unchanged/changed),
    never its match.

    \b
    Example: neardup check-batch segment.warc.gz --stored archive.parquet -o verdicts.jsonl
    """
    refuse_overwrite({"--out": out, "--errors": errors_path}, inputs=[*queries, *stored])
    from neardup.batch.check import check_against

    settings = settings_from_options(opts)
    fmt = fmt or output_format(out)
    if fmt == "parquet" and out == "-":
        raise click.UsageError("--format parquet needs --out FILE")
    records, skipped = _query_records(queries, jobs)
    result = check_against(records, list(stored), k=settings.k, verify=settings.verify, bands=settings.bands)
    report_skipped(skipped, errors_path)
    rows = [v.to_dict() for v in result.verdicts]
    if out == "-":
        write_rows(rows, sys.stdout.buffer, fmt)
        sys.stdout.buffer.flush()
    else:
        with open(out, "wb") as fh:
            write_rows(rows, fh, fmt)
    click.echo(json.dumps({**result.summary(), "errors": len(skipped)}), err=out == "-")


def _query_records(inputs: tuple[str, ...], jobs: int | None) -> tuple[list[Any], list[dict[str, Any]]]:
    """Records of every query: fingerprint Parquet rows as they are, pages fingerprinted (in
    ``jobs`` processes) with the default config; and the items skipped (an unreadable input or
    page: source, reason, error), as ``dedup --batch`` skips and reports them."""
    from neardup.batch.dedup import records_from_pages
    from neardup.batch.files import read_fingerprints
    from neardup.errors import InputError
    from neardup.fingerprint.core import DEFAULT_CONFIG
    from neardup.ingest.inputs import read_all
    from neardup.ingest.workers import default_jobs

    records: list[Any] = []
    pages = []
    skipped: list[dict[str, Any]] = []
    for path in inputs:
        if fingerprint_file(path):
            records += read_fingerprints(path, InputError)  # checked: InputError naming the file and column
            continue
        for item in read_all((path,), DEFAULT_CONFIG.max_bytes):
            if item.page is not None:
                pages.append(item.page)
            elif item.skip is None:
                skipped.append({"source": item.source, "reason": item.reason or "unreadable", "error": item.error})
    if pages:
        got, failed = records_from_pages(pages, DEFAULT_CONFIG, jobs or default_jobs())
        skipped += [{"source": None, "reason": "bad-page", "error": e} for e in failed]
        records += [r for r in got if r is not None]
    return records, skipped


def write_rows(rows: list[dict[str, Any]], stream: IO[bytes], fmt: str) -> None:
    """Rows (:data:`neardup.batch.check.FIELDS`) as JSON lines, CSV with a header, or Parquet."""
    from neardup.batch.check import FIELDS

    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"distance": pa.int64(), "score": pa.float64()}
        schema = pa.schema([(f, types.get(f, pa.string())) for f in FIELDS])
        pq.write_table(pa.table({f: [r[f] for r in rows] for f in FIELDS}, schema=schema), stream)
        return
    if fmt == "csv":
        import io

        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
        stream.write(text.getvalue().encode("utf-8"))
        return
    for r in rows:
        stream.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))

"""``neardup check-batch``: a new crawl segment checked against an archive of fingerprints
(:func:`neardup.batch_check.check_against`), registered by :mod:`neardup.cli`.

QUERIES are fingerprint Parquet files or pages (WARC, JSONL, HTML files and folders: read and
fingerprinted as ``dedup --batch`` does); ``--stored`` names the archive's fingerprint Parquet
files (or folders of parts), streamed a row group at a time. One row a query: url, digest,
simhash, status (new | exact | near | empty), match, distance, score, version. Errors are one
line on stderr; exit codes 0 ok, 1 bad input, 2 bad usage.
"""

from __future__ import annotations

import csv
import json
import sys
from typing import IO, Any

import click

from neardup.cli_dedup_batch import output_format, report_skipped
from neardup.cli_errors import handle_errors
from neardup.cli_settings import settings_from_options, settings_options


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
    from neardup.batch_check import check_against

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
    from neardup.batch import read_fingerprints, records_from_pages
    from neardup.cli import _read_all
    from neardup.cli_dedup_batch import fingerprint_file
    from neardup.fingerprint import DEFAULT_CONFIG
    from neardup.parallel import default_jobs

    records: list[Any] = []
    pages = []
    skipped: list[dict[str, Any]] = []
    for path in inputs:
        if fingerprint_file(path):
            records += read_fingerprints(path)
            continue
        for item in _read_all((path,), DEFAULT_CONFIG.max_bytes):
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
    """Rows (:data:`neardup.batch_check.FIELDS`) as JSON lines, CSV with a header, or Parquet."""
    from neardup.batch_check import FIELDS

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

"""``neardup dedup --batch`` on one machine (registered by :mod:`neardup.cli`): pages and
fingerprint Parquet files in, every page's verdict out. The SimHash method runs on columns
(:mod:`neardup.batch_arrays`, :mod:`neardup.batch_io`); ``--method minhash`` on the records
of :func:`neardup.batch.dedup_batch`. The Spark job's command line is :mod:`neardup.cli_batch`.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

import click

from neardup.cli_errors import one_line as _one_line
from neardup.fingerprint import DEFAULT_CONFIG, FingerprintConfig
from neardup.settings import DetectorSettings

if TYPE_CHECKING:
    from neardup.batch import BatchVerdict


def fingerprint_file(path: str) -> bool:
    """A fingerprint Parquet input of ``dedup --batch`` (False without PyArrow)."""
    try:
        from neardup.batch import is_fingerprint_file

        return is_fingerprint_file(path)
    except ImportError:
        return False


def dedup_batch_files(inputs: tuple[str, ...], out: str | None, fmt: str | None, errors_path: str | None, *,
                      settings: DetectorSettings, jobs: int | None, config: FingerprintConfig | None,
                      fingerprints_out: str | None = None, exact_k: bool = True) -> None:
    """``dedup --batch``: :func:`neardup.batch.dedup_batch` over every page of the inputs
    (and the records of fingerprint Parquet inputs); ``fingerprints_out``: the pages'
    fingerprints written as Parquet too."""
    from neardup.batch import BatchRecord, dedup_batch, read_fingerprints, records_from_pages, write_fingerprints
    from neardup.cli import _read_all
    from neardup.model import Page
    from neardup.parallel import default_jobs

    if settings.containment is not None:
        raise click.UsageError("--containment is not available with --batch")
    jobs = jobs or default_jobs()
    parquet = [p for p in inputs if fingerprint_file(p)]
    items: list[Page | BatchRecord] = ([r for p in parquet for r in read_fingerprints(p)]
                                       if settings.method != "simhash" else [])
    pages, unread = [], []
    for item in _read_all(tuple(p for p in inputs if p not in parquet), (config or DEFAULT_CONFIG).max_bytes):
        if item.page is not None:
            pages.append(item.page)
        elif item.skip is None:
            unread.append({"source": item.source, "reason": item.reason or "unreadable", "error": item.error})
    if fingerprints_out is not None:
        records, failed = records_from_pages(pages, config or DEFAULT_CONFIG, jobs)
        done = [r for r in records if r is not None]
        write_fingerprints(done, fingerprints_out)
        unread += [{"source": None, "reason": "bad-page", "error": e} for e in failed]
        items += done
    else:
        items += pages
    fmt = fmt or output_format(out)
    if settings.method == "simhash":
        _dedup_batch_arrays(parquet, items, unread, out, fmt, errors_path, settings=settings, jobs=jobs,
                            config=config, exact_k=exact_k)
        return
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
    summary = {**res.summary(), "errors": len(errors), "batch": True, "jobs": jobs}
    click.echo(json.dumps(summary), err=out == "-")


def write_records(verdicts: Iterable[BatchVerdict], stream: TextIO, fmt: str) -> None:
    """Write the record path's verdicts as CSV (with a header) or JSON lines, the SimHash in
    hex (the columns and bytes :func:`neardup.batch_io.write_verdicts` writes from arrays)."""
    from neardup.batch_io import FIELDS

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
                        config: FingerprintConfig | None, exact_k: bool = True) -> None:
    """``dedup --batch`` on columns (:mod:`neardup.batch_arrays`): the fingerprint files read
    by Arrow, pages fingerprinted into records, verdicts written column-wise
    (:func:`neardup.batch_io.write_verdicts`); the same rows as ``dedup_batch``."""
    from neardup.batch import BatchRecord, records_from_pages
    from neardup.batch_arrays import records_table
    from neardup.batch_io import arrays_of, read_fingerprint_arrays, read_fingerprint_tables, write_verdicts
    from neardup.batch_versions import solve_captures
    from neardup.model import default_k

    config = config or DEFAULT_CONFIG
    pages = [it for it in items if not isinstance(it, BatchRecord)]
    records = [it for it in items if isinstance(it, BatchRecord)]
    failed: list[str] = []
    if pages:
        got, failed = records_from_pages(pages, config, jobs)
        records += [r for r in got if r is not None]
    arrays = (arrays_of(read_fingerprint_tables(parquet) + [records_table(records)]) if records
              else read_fingerprint_arrays(parquet))
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
    errors = unread + [{"source": None, "reason": "bad-page", "error": e} for e in failed]
    report_skipped(errors, errors_path)
    summary = {**answer.summary(), "errors": len(errors), "batch": True, "jobs": jobs}
    click.echo(json.dumps(summary), err=out == "-")

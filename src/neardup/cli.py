"""The ``neardup`` command line: a thin layer over :class:`neardup.Detector`.

Exit codes: 0 success; 1 bad input (unreadable page, bad URL, bad input file); 2 bad
usage (unknown option, bad argument); 3 store problem (corrupt, locked, other spec).
Errors are one line on stderr, never a traceback (``NEARDUP_DEBUG=1`` shows the traceback
of an unexpected error). ``dedup`` carries on past every item it cannot read or fingerprint
and counts it by reason (summary ``errors_by_reason``; one JSON line each with ``--errors``).
"""

from __future__ import annotations

import csv
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import click

from neardup import __version__
from neardup.cli_batch import spark_dedup_cmd
from neardup.cli_check_batch import check_batch_cmd
from neardup.cli_crawl import export_cmd, history_cmd
from neardup.cli_dedup_batch import dedup_batch_files as _dedup_batch
from neardup.cli_dedup_batch import fingerprint_file as _fingerprint_file
from neardup.cli_errors import EXIT_INPUT, handle_errors
from neardup.cli_errors import one_line as _one_line
from neardup.cli_settings import (
    FINGERPRINT_FIELDS,
    build_config,
    config_options,
    settings_from_options,
    settings_options,
)
from neardup.cli_tools import report_cmd, tune_cmd
from neardup.detector import Detector, Verdict
from neardup.errors import ConfigError, NeardupError, StoreError, URLError
from neardup.fingerprint import DEFAULT_CONFIG, fingerprint
from neardup.inputs import InputItem, TooLargeError, read_file, read_input

VERDICT_FIELDS = ("source", "url", "status", "unchanged", "version", "method", "score", "distance", "match_url",
                  "match_id", "page_id", "cluster_id", "canonical_url", "title", "digest", "simhash",
                  "previous_distance", "previous_score", "since_last_fetch", "next_fetch", "fetched_url", "flag",
                  "error")


class OneLineGroup(click.Group):
    """A click group whose usage errors are one line on stderr (exit 2), like every other
    error, instead of click's usage + hint + error block."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "neardup"
            click.echo(f"neardup: error: {_one_line(exc.format_message())} (see '{where} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"neardup: error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("neardup: error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def _read_content(file: str, max_bytes: int) -> bytes:
    """A page from a file (``.gz`` inflated, streamed) or stdin, at most ``max_bytes``."""
    if file == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise NeardupError(f"stdin: page is over the {max_bytes:,}-byte limit (max_bytes)")
        return data
    path = Path(file)
    if path.is_dir():
        raise NeardupError(f"{file}: is a directory (use 'neardup dedup' for folders)")
    try:
        return read_file(path, max_bytes)
    except TooLargeError as exc:
        raise NeardupError(str(exc)) from None


def _headers(values: tuple[str, ...]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for item in values:
        if ":" not in item:
            raise ConfigError(f"header {item!r} must look like 'Name: value'")
        name, value = item.split(":", 1)
        out[name.strip()] = value.strip()
    return out or None


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="neardup")
def main() -> None:
    """neardup: find exact and near-duplicate web pages.

    Fingerprints the main content of pages (boilerplate removed) with SHA-256 and SimHash,
    and keeps pages, clusters and canonical copies in a store (SQLite file or PostgreSQL). A page is a near
    duplicate of a stored page when their SimHash distance is <= k (default 3) or when their
    sketches share a band (any distance), and the sketch check confirms it.
    """
    # psycopg_pool logs every failed connection attempt: errors are neardup's one line
    logging.getLogger("psycopg").addHandler(logging.NullHandler())


@main.command("fingerprint")
@click.argument("files", nargs=-1, required=True)
@click.option("--url", default=None, help="Page URL (resolves relative rel=canonical links).")
@click.option("--text", "with_text", is_flag=True, help="Include the normalised main text.")
@click.option("--out", "parquet_out", default=None, type=click.Path(dir_okay=False),
              help="Also write the fingerprints to this Parquet file (what dedup --batch and spark-dedup read; "
                   "the URL is --url, else file://).")
@settings_options(FINGERPRINT_FIELDS)
@config_options
@handle_errors
def fingerprint_cmd(files: tuple[str, ...], url: str | None, with_text: bool, parquet_out: str | None,
                    **opts: Any) -> None:
    """Print one JSON line per FILE (or - for stdin): digest, simhash (hex), spec, title, canonical.

    A file that cannot be read gets a JSON line with an "error" field; the exit code is 1
    if any file failed."""
    config = build_config(settings_from_options(opts), **opts) or DEFAULT_CONFIG
    if parquet_out is not None and not parquet_out.lower().endswith(".parquet"):
        raise click.UsageError(f"--out names a Parquet file (.parquet), got {parquet_out!r}")
    failed = False
    records = []
    for file in files:
        try:
            fp = fingerprint(_read_content(file, config.max_bytes), url=url, config=config)
            click.echo(json.dumps({"file": file, **fp.to_dict(with_text=with_text)}, ensure_ascii=False))
            if parquet_out is not None:
                records.append((url or Path(file).resolve().as_uri(), fp))
        except (NeardupError, OSError) as exc:
            failed = True
            msg = str(exc) if isinstance(exc, NeardupError) else f"{file}: {exc.strerror or exc}"
            click.echo(json.dumps({"file": file, "error": msg}))
            click.echo(f"neardup: error: {msg}", err=True)
    if parquet_out is not None:
        from neardup.batch import BatchRecord, write_fingerprints

        write_fingerprints([BatchRecord.of(u, fp) for u, fp in records], parquet_out)
    if failed:
        sys.exit(EXIT_INPUT)


#: seconds to wait for a locked SQLite store or a PostgreSQL connection
STORE_TIMEOUT = 10.0


def is_url(db: str | Path) -> bool:
    """A ``postgresql://`` URL rather than an SQLite file."""
    return str(db).startswith(("postgresql://", "postgres://"))


def open_detector(db: str, *, create: bool = True, **kwargs: Any) -> Detector:
    """The one way commands open a store: an SQLite file (created when missing with
    ``create``, else :class:`StoreError` when it does not exist) or a ``postgresql://`` URL
    (always connected to: an unreachable server is a store error, never an empty store)."""
    if not create and not is_url(db) and not Path(db).is_file():
        raise StoreError(f"store {db} does not exist")
    return Detector.open(db, create=create, timeout=STORE_TIMEOUT, **kwargs)


def _single(add: bool, db: str, url: str, file: str, header: tuple[str, ...], opts: dict[str, Any]) -> None:
    settings = settings_from_options(opts)
    config = build_config(settings, **opts)
    content = _read_content(file, (config or DEFAULT_CONFIG).max_bytes)
    # check never writes: against a store file that does not exist yet, every page is new;
    # a postgresql:// URL is always connected to (a server that is down is exit 3)
    opener = (open_detector(db, config=config, settings=settings) if add or is_url(db) or Path(db).exists()
              else Detector(config=config, settings=settings))
    with opener as det:
        verdict = det.add(url, content, _headers(header)) if add else det.check(url, content, _headers(header))
    click.echo(json.dumps(verdict.to_dict(), ensure_ascii=False))


DB_HELP = "Store: SQLite file or postgresql:// URL"
_db_option = click.option("--db", required=True, type=click.Path(dir_okay=False),
                          help=f"{DB_HELP} (a file is created if missing).")
_existing_db_option = click.option("--db", required=True, type=click.Path(dir_okay=False),
                                   help=f"{DB_HELP} (must exist).")
_header_option = click.option("-H", "--header", multiple=True,
                              help="HTTP header 'Name: value' (repeatable), e.g. Content-Type.")


@main.command("add")
@_db_option
@click.argument("url")
@click.argument("file")
@_header_option
@settings_options()
@config_options
@handle_errors
def add_cmd(db: str, url: str, file: str, header: tuple[str, ...], **opts: Any) -> None:
    """Decide what FILE (fetched from URL; - for stdin) is, record it, print the JSON verdict."""
    _single(True, db, url, file, header, opts)


@main.command("check")
@_db_option
@click.argument("url")
@click.argument("file")
@_header_option
@settings_options()
@config_options
@handle_errors
def check_cmd(db: str, url: str, file: str, header: tuple[str, ...], **opts: Any) -> None:
    """Like add, without writing anything to the store."""
    _single(False, db, url, file, header, opts)


class VerdictWriter:
    """Writes verdict rows as JSONL or CSV."""

    def __init__(self, stream: TextIO, fmt: str) -> None:
        self.stream = stream
        self.fmt = fmt
        self._csv = csv.DictWriter(stream, fieldnames=VERDICT_FIELDS) if fmt == "csv" else None
        if self._csv:
            self._csv.writeheader()

    def write(self, source: str, verdict: Verdict) -> None:
        row = {"source": source, "unchanged": _unchanged(verdict),
               **{f: getattr(verdict, f) for f in VERDICT_FIELDS if f not in ("source", "unchanged")}}
        if self._csv:
            row["unchanged"] = "true" if row["unchanged"] else "false"
            self._csv.writerow(row)
        else:
            self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")


def _unchanged(verdict: Verdict) -> bool:
    """A re-fetch of a stored URL with the same content as its stored version."""
    return verdict.version == "unchanged"


def _error_reason(message: str) -> str:
    """The reason an item the detector refused is counted under (from its message)."""
    low = message.lower()
    if low.startswith(("url ", "malformed url")):
        return "bad-url"
    if "binary content" in low or "content type" in low:
        return "not-html"
    if "byte limit" in low or "bytes, over" in low:
        return "too-large"
    if "extractor failed" in low:
        return "extractor"
    if low.startswith("unexpected "):
        return "internal"
    return "bad-page"


def _read_all(inputs: tuple[str, ...], max_bytes: int) -> Iterator[InputItem]:
    """Items of every input in turn; an input that turns out unreadable part-way is one
    error item, and the next input is read."""
    for path in inputs:
        try:
            yield from read_input(path, max_bytes)
        except NeardupError as exc:
            yield InputItem(path, error=str(exc), reason="bad-input")
        except OSError as exc:
            yield InputItem(path, error=f"{path}: {exc.strerror or exc}", reason="unreadable")


@main.command("dedup")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--db", default=None, type=click.Path(dir_okay=False),
              help=f"{DB_HELP} (a file is created if missing); required unless --batch.")
@click.option("--batch", is_flag=True,
              help="Decide on the whole input at once (neardup.batch: order-independent clusters and canonicals; "
                   "no store). Rows: url, digest, simhash, status, cluster, canonical, match, distance, version (a "
                   "URL's re-fetches are versions of it). Inputs may "
                   "also be fingerprint Parquet files (neardup.batch.PARQUET_COLUMNS).")
@click.option("--fingerprints-out", default=None, type=click.Path(dir_okay=False),
              help="With --batch: also write the pages' fingerprints as Parquet (what --batch and spark-dedup read).")
@click.option("--exact-k/--no-exact-k", "exact_k", default=True, show_default=True,
              help="With --batch: SimHash candidates up to k by the permuted tables' self-join (the Detector's "
                   "answer); --no-exact-k: within min(k, 3) and the bands only (spark-dedup's default answer, "
                   "faster at 10^7).")
@click.option("--out", "out", default=None,
              help="Write every page's verdict here (.jsonl or .csv; - for stdout: the summary then goes to stderr).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default=None,
              help="Output format (default: from --out's extension, else jsonl; parquet with --batch only).")
@click.option("--errors", "errors_path", default=None, type=click.Path(dir_okay=False),
              help="Write one JSON line per item that could not be read or fingerprinted: source, reason, error.")
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), default=None,
              help="Processes that extract and fingerprint pages (default: every CPU this process may use); "
                   "one writer.")
@click.option("--batch-size", type=click.IntRange(1, 100000), default=200, show_default=True,
              help="Pages per transaction.")
@click.option("--page-timeout", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds of work one page may take in a worker (--jobs > 1); over it: an error, a fresh worker.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@settings_options()
@config_options
@handle_errors
def dedup_cmd(inputs: tuple[str, ...], db: str | None, batch: bool, fingerprints_out: str | None, exact_k: bool,
              out: str | None, fmt: str | None,
              errors_path: str | None, jobs: int | None, batch_size: int, page_timeout: float, progress: bool | None,
              **opts: Any) -> None:
    """Deduplicate INPUT... (folders of .html/.htm/.html.gz files and .txt plain-text files,
    JSONL files of {"url", "html"}, WARC files: their HTML responses with status 200).

    Prints a summary; with --out, writes every page's verdict and cluster as decided at that
    moment (`neardup export` gives the final clusters and canonicals). Runs again
    incrementally against the same --db: a URL already stored is a new version of itself,
    never its own duplicate: 'unchanged' or 'changed' (the 'version' column), keeping its
    first decision while it stays a near copy of it. Items that cannot be read or fingerprinted are
    skipped and counted by reason; WARC records that are not pages (other content types,
    statuses other than 200, revisits) are counted by reason under 'skipped'. Exit 0 when
    at least one page was read (failed items are counted, and listed with --errors); exit 1
    when none of the input items could be read."""
    from tqdm import tqdm

    from neardup.inputs import count_items
    from neardup.parallel import add_pages, default_jobs, warm_up

    for path in inputs:  # an input of unknown type is a usage mistake: refuse before any work
        if not Path(path).is_dir() and not (batch and _fingerprint_file(path)):
            read_input(path)
    settings = settings_from_options(opts)
    config = build_config(settings, **opts)
    if batch:
        if db is not None:
            raise click.UsageError("--batch keeps no store: drop --db (or drop --batch to deduplicate into it)")
        _dedup_batch(inputs, out, fmt, errors_path, settings=settings, jobs=jobs, config=config,
                     fingerprints_out=fingerprints_out, exact_k=exact_k)
        return
    if fingerprints_out is not None:
        raise click.UsageError("--fingerprints-out goes with --batch")
    if not exact_k:
        raise click.UsageError("--no-exact-k goes with --batch")
    if db is None:
        raise click.UsageError("Missing option '--db' (or use --batch)")
    if fmt == "parquet":
        raise click.UsageError("--format parquet goes with --batch")
    fmt = fmt or ("csv" if out and out.lower().endswith(".csv") else "jsonl")
    stream: TextIO | None = None
    errors_stream: TextIO | None = None
    counts = {"pages": 0, "new": 0, "exact": 0, "near": 0, "partial": 0, "empty": 0, "error": 0, "unchanged": 0,
              "changed": 0}
    reasons: dict[str, int] = {}
    skipped: dict[str, int] = {}
    clusters_touched: set[int] = set()
    jobs = jobs or default_jobs()
    with open_detector(db, config=config, settings=settings) as det:
        if out:
            stream = sys.stdout if out == "-" else open(out, "w", encoding="utf-8", newline="")
        if errors_path:
            errors_stream = open(errors_path, "w", encoding="utf-8")
        writer = VerdictWriter(stream, fmt) if stream else None
        warm_up(det.config)  # a cold numba cache compiles here, with a notice, before the bar
        disable = (not progress) if progress is not None else None
        total = None if disable is True else count_items(inputs)
        bar = tqdm(unit="page", total=total, disable=disable, file=sys.stderr, dynamic_ncols=True)
        try:
            items = _read_all(inputs, det.config.max_bytes)
            for item, verdict in add_pages(det, items, jobs=jobs, batch_size=batch_size, page=lambda it: it.page,
                                             page_timeout=page_timeout):
                bar.update(1)
                if item.skip is not None:
                    skipped[item.skip] = skipped.get(item.skip, 0) + 1
                    continue
                if verdict is None:
                    verdict = Verdict(status="error", url="", error=item.error)
                    reason = item.reason or "unreadable"
                else:
                    reason = _error_reason(verdict.error or "")
                counts["pages"] += 1
                counts[verdict.status] += 1
                if verdict.version is not None:
                    counts[verdict.version] += 1
                if verdict.status == "error":
                    reasons[reason] = reasons.get(reason, 0) + 1
                    message = _one_line(verdict.error or "", 1000)
                    bar.clear()
                    click.echo(f"neardup: skipped {_one_line(item.source, 300)}: [{reason}] {message}", err=True)
                    if errors_stream is not None:
                        errors_stream.write(json.dumps({"source": item.source, "url": verdict.url or None,
                                                        "reason": reason, "error": verdict.error},
                                                       ensure_ascii=True) + "\n")
                if verdict.cluster_id is not None:
                    clusters_touched.add(verdict.cluster_id)
                if writer:
                    writer.write(item.source, verdict)
        finally:
            bar.close()
            if stream is not None and stream is not sys.stdout:
                stream.close()
            if errors_stream is not None:
                errors_stream.close()
        stats = det.stats()
    summary = {**counts, "errors_by_reason": dict(sorted(reasons.items())),
               "skipped": sum(skipped.values()), "skipped_by_reason": dict(sorted(skipped.items())),
               "clusters": len(clusters_touched), "store_pages": stats["pages"], "store_clusters": stats["clusters"],
               "db": db, "jobs": jobs}
    click.echo(_human_summary(counts, reasons, skipped, len(clusters_touched), stats), err=True)
    # with --out - the verdicts own stdout: the machine-readable summary goes to stderr too
    click.echo(json.dumps(summary), err=out == "-")
    if counts["pages"] and counts["error"] == counts["pages"]:
        click.echo(f"neardup: error: none of the {counts['pages']} input items could be read", err=True)
        sys.exit(EXIT_INPUT)


def _human_summary(counts: dict[str, int], reasons: dict[str, int], skipped: dict[str, int], clusters: int,
                   stats: dict[str, Any]) -> str:
    """The one-line summary ``dedup`` prints on stderr."""
    by_reason = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    by_skip = ", ".join(f"{n} {r}" for r, n in sorted(skipped.items()))
    return (
        f"pages {counts['pages']}: new {counts['new']}, exact {counts['exact']}, near {counts['near']}, "
        + (f"partial {counts['partial']}, " if counts["partial"] else "")
        + f"empty {counts['empty']}, "
        f"errors {counts['error']}" + (f" ({by_reason})" if by_reason else "")
        + f"; re-fetched {counts['unchanged'] + counts['changed']} (unchanged {counts['unchanged']}, "
        f"changed {counts['changed']})"
        + (f"; skipped {sum(skipped.values())} records that are not pages ({by_skip})" if skipped else "")
        + f"; clusters {clusters}; store: {stats['pages']} pages in {stats['clusters']} clusters"
    )


@main.command("should-fetch")
@click.argument("urls", nargs=-1, required=True)
@_existing_db_option
@click.option("--max-age", type=click.FloatRange(0), default=None,
              help="Seconds: a known page fetched more recently than this is skipped (reason 'fresh').")
@click.option("--host-max-duplicate-rate", type=click.FloatRange(0.0, 1.0), default=None,
              help="Skip URLs of hosts whose share of duplicates is at least this (reason 'host-budget').")
@click.option("--host-min-pages", type=click.IntRange(1), default=20, show_default=True,
              help="Pages a host needs before --host-max-duplicate-rate applies.")
@handle_errors
def should_fetch_cmd(urls: tuple[str, ...], db: str, max_age: float | None, host_max_duplicate_rate: float | None,
                     host_min_pages: int) -> None:
    """Before fetching: should a crawler fetch each URL, and why? One JSON line per URL
    (fetch, reason, known_url, canonical_url, rules...); a bad URL gets a line with an
    "error" field and the exit code is 1. Nothing is written."""
    failed = False
    with open_detector(db, create=False) as det:
        for url in urls:
            try:
                d = det.should_fetch(url, max_age=max_age, host_max_duplicate_rate=host_max_duplicate_rate,
                                     host_min_pages=host_min_pages)
            except URLError as exc:
                failed = True
                click.echo(json.dumps({"url": url, "error": str(exc)}, ensure_ascii=False))
                click.echo(f"neardup: error: {_one_line(str(exc))}", err=True)
                continue
            click.echo(json.dumps(d.to_dict(), ensure_ascii=False))
    if failed:
        sys.exit(EXIT_INPUT)


@main.command("rules")
@_existing_db_option
@click.option("--host", default=None, help="Only this host's rules.")
@handle_errors
def rules_cmd(db: str, host: str | None) -> None:
    """The learned URL rules (one JSON line per rule: host, rule, support, example,
    description) that should-fetch uses to skip URL variants of known pages."""
    with open_detector(db, create=False) as det:
        for rule in det.rules(host.lower() if host else None):
            click.echo(json.dumps(rule.to_dict(), ensure_ascii=False))


HOST_FIELDS = ("host", "pages", "new", "exact", "near", "partial", "empty", "duplicates", "duplicate_rate",
               "distinct_contents", "refetched", "changed_pages", "changes_per_day", "trap", "budget_factor",
               "templates", "redesigns", "soft_404s", "template_only", "largest_cluster_id",
               "largest_cluster_urls_from_host",
               "largest_cluster_size", "largest_cluster_joins_per_hour")


@main.command("hosts")
@_existing_db_option
@click.option("--top", type=click.IntRange(0), default=None, help="Only the first N hosts.")
@click.option("--sort", type=click.Choice(["duplicate_rate", "duplicates", "pages", "distinct_contents"]),
              default="duplicate_rate", show_default=True, help="Largest first.")
@click.option("--window", type=click.FloatRange(0, min_open=True), default=None,
              help="Only pages fetched in the last S seconds.")
@click.option("--trap-members", type=click.IntRange(1), default=10, show_default=True,
              help="URLs of one host in one cluster that make the host a trap.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "json"]), default="jsonl", show_default=True,
              help="jsonl: one JSON line per host; csv: a table with a header; json: one JSON array.")
@handle_errors
def hosts_cmd(db: str, top: int | None, sort: str, window: float | None, trap_members: int, fmt: str) -> None:
    """Per-host duplicate signals, sorted: pages, counts by status, duplicate rate, distinct
    contents, the largest cluster, trap and a suggested budget factor."""
    with open_detector(db, create=False) as det:
        rows = det.hosts(top, window=window, sort=sort, trap_members=trap_members)
    if fmt == "jsonl":
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
        return
    if fmt == "json":
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    stream = sys.stdout
    writer = csv.DictWriter(stream, fieldnames=HOST_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        flat = {k: v for k, v in row.items() if k != "largest_cluster"}
        for key, value in (row.get("largest_cluster") or {}).items():
            flat[f"largest_cluster_{'id' if key == 'id' else key}"] = value
        flat["trap"] = "true" if flat.get("trap") else "false"
        flat["templates"] = (flat.get("templates") or {}).get("count")
        flat["redesigns"] = len(flat.get("redesigns") or [])
        writer.writerow({k: flat.get(k) for k in HOST_FIELDS})


@main.command("expire")
@_existing_db_option
@click.option("--older-than", type=click.FloatRange(0), required=True,
              help="Seconds: forget pages last fetched longer ago than this.")
@handle_errors
def expire_cmd(db: str, older_than: float) -> None:
    """Forget pages not fetched for --older-than seconds (clusters and canonicals follow);
    prints {"expired": n}."""
    with open_detector(db, create=False) as det:
        click.echo(json.dumps({"expired": det.expire(older_than)}))


@main.command("cluster")
@_existing_db_option
@click.argument("cluster_id", metavar="ID", type=click.IntRange(0))
@handle_errors
def cluster_cmd(db: str, cluster_id: int) -> None:
    """A cluster as one JSON line: its size, canonical and growth (cluster_info) and its
    members (url, status, matched_id, distance, canonical), canonical first. Exit 1 when
    there is no such cluster."""
    with open_detector(db, create=False) as det:
        info = det.cluster_info(cluster_id)
        if info is None:
            raise NeardupError(f"no cluster with id {cluster_id}")
        members = det.cluster(cluster_id)
    canon = info["canonical_id"]
    rows = [{"id": m.id, "url": m.url, "status": m.status, "matched_id": m.matched_id, "distance": m.distance,
             "first_seen": m.first_seen, "fetched_at": m.fetched_at, "canonical": m.id == canon}
            for m in sorted(members, key=lambda m: (m.id != canon, m.id or 0))]
    click.echo(json.dumps({**info, "members": rows}, ensure_ascii=False))


@main.command("serve")
@_db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--token", envvar="NEARDUP_TOKEN", default=None,
              help="Require 'Authorization: Bearer TOKEN' (or set NEARDUP_TOKEN).")
@click.option("--private", is_flag=True,
              help="Require the token for /metrics and the API docs too (only /healthz stays open).")
@click.option("--max-body", type=click.IntRange(1024), default=32 * 1024 * 1024, show_default=True,
              help="Largest request body in bytes (413 above).")
@click.option("--body-timeout", type=click.FloatRange(0.1, 3600), default=30.0, show_default=True,
              help="Seconds a client has to send its whole request body (408 after: slow uploads are cut).")
@click.option("--max-inflight", type=click.IntRange(1, 100000), default=64, show_default=True,
              help="Requests worked on at once per worker; more get 503 with Retry-After.")
@click.option("--max-inflight-bytes", type=click.IntRange(1024), default=64 * 1024 * 1024, show_default=True,
              help="Request body bytes held at once per worker; more get 503 with Retry-After (bounds memory).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes sharing the store (each keeps its index current from the store's change log).")
@click.option("--page-timeout", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds of work one page may take (decode, parse, fingerprint); over it: 422 and a fresh worker.")
@click.option("--page-workers", type=click.IntRange(1, 64), default=None,
              help="Processes that fingerprint posted pages, per worker (default: up to 4, one per CPU).")
@settings_options()
@config_options
@handle_errors
def serve_cmd(db: str, host: str, port: int, token: str | None, private: bool, max_body: int, body_timeout: float,
              max_inflight: int, max_inflight_bytes: int, workers: int, page_timeout: float, page_workers: int | None,
              **opts: Any) -> None:
    """Serve the HTTP API (see neardup.service) over the store --db (a SQLite file or a
    postgresql:// URL)."""
    try:
        import uvicorn  # noqa: F401 (checked here: the extra is installed)

        from neardup.service import create_app, serve, serve_workers
    except ImportError as exc:
        raise ConfigError(f"the service needs the 'service' extra: pip install 'neardup[service]' ({exc})") from None
    if private and not token:
        raise ConfigError("--private needs --token (or NEARDUP_TOKEN)")
    settings = settings_from_options(opts)
    limits: dict[str, Any] = {"body_timeout": body_timeout, "max_inflight": max_inflight,
                              "max_inflight_bytes": max_inflight_bytes, "private": private,
                              "page_timeout": page_timeout}
    if page_workers is not None:
        limits["page_workers"] = page_workers
    det = open_detector(db, config=build_config(settings, **opts), settings=settings)  # creates / checks the store
    from neardup.parallel import warm_up

    warm_up(det.config)  # compile (cold cache: with a notice) before the first request, not during it
    if workers == 1:
        try:
            # keep-alive longer than clients keep idle connections (service.UVICORN_SETTINGS)
            serve(create_app(det, token=token, max_body=max_body, **limits), host, port)
        finally:
            det.close()
        return

    passed = {"config": det.config.to_dict(), "settings": settings.to_dict(), "max_body": max_body, **limits}
    det.close()
    os.environ.update({"NEARDUP_DB": db, "NEARDUP_SETTINGS": json.dumps(passed), "NEARDUP_TOKEN": token or ""})
    serve_workers(workers, host, port)


@main.command("stats")
@_existing_db_option
@handle_errors
def stats_cmd(db: str) -> None:
    """Print the store's page and cluster counts as JSON."""
    with open_detector(db, create=False) as det:
        click.echo(json.dumps({**det.stats(), "spec": det.config.spec}))


main.add_command(tune_cmd)  # neardup tune (neardup.cli_tools)
main.add_command(report_cmd)  # neardup report
main.add_command(export_cmd)  # neardup export (neardup.cli_crawl)
main.add_command(history_cmd)  # neardup history
main.add_command(spark_dedup_cmd)  # neardup spark-dedup (neardup.cli_batch)
main.add_command(check_batch_cmd)  # neardup check-batch (neardup.cli_check_batch)


if __name__ == "__main__":  # pragma: no cover
    main()

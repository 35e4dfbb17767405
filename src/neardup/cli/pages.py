"""The page commands: fingerprint, add, check, dedup."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import click

from neardup.cli.batch import dedup_batch_files as _dedup_batch
from neardup.cli.batch import fingerprint_file as _fingerprint_file
from neardup.cli.common import (
    DB_HELP,
    db_option,
    existing_db_option,
    header_option,
    open_detector,
    parse_headers,
    read_content,
    refuse_overwrite,
)
from neardup.cli.errors import EXIT_INPUT, handle_errors
from neardup.cli.errors import one_line as _one_line
from neardup.cli.options import (
    FINGERPRINT_FIELDS,
    build_config,
    config_options,
    settings_from_options,
    settings_options,
)
from neardup.errors import InputError, NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG, fingerprint
from neardup.ingest.inputs import JSONL_SUFFIXES, WACZ_SUFFIXES, WARC_SUFFIXES, read_all, read_input
from neardup.ingest.warc_out import RevisitPolicy, warc_position, write_deduplicated
from neardup.model import Verdict
from neardup.report.cdxj import CdxjSidecar

VERDICT_FIELDS = ("source", "url", "status", "unchanged", "version", "method", "score", "distance", "match_url",
                  "match_id", "page_id", "cluster_id", "canonical_url", "title", "digest", "simhash",
                  "previous_distance", "previous_score", "since_last_fetch", "next_fetch", "fetched_url", "flag",
                  "error")


#: inputs that hold many pages (read as dedup reads them)
CONTAINER_SUFFIXES = WARC_SUFFIXES + WACZ_SUFFIXES + JSONL_SUFFIXES


@click.command("fingerprint")
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

    A WARC or JSONL file, or a folder, gives one line per page it holds (with its "url"; the
    records that are not pages are skipped, as dedup skips them). A file or record that cannot
    be read gets a JSON line with an "error" field; the exit code is 1 if any failed."""
    refuse_overwrite({"--out": parquet_out}, inputs=files)
    config = build_config(settings_from_options(opts), **opts) or DEFAULT_CONFIG
    if parquet_out is not None and not parquet_out.lower().endswith(".parquet"):
        raise click.UsageError(f"--out names a Parquet file (.parquet), got {parquet_out!r}")
    failed = False
    records: list[tuple[str, Any, float | None]] = []

    def failure(source: str, msg: str) -> None:
        nonlocal failed
        failed = True
        click.echo(json.dumps({"file": source, "error": msg}))
        click.echo(f"neardup: error: {msg}", err=True)

    for file in files:
        if file != "-" and (Path(file).is_dir() or file.lower().endswith(CONTAINER_SUFFIXES)):
            try:
                for item in read_input(file, config.max_bytes):
                    if item.page is None:
                        if item.error is not None:
                            failure(item.source, item.error)
                        continue
                    page = item.page
                    try:
                        fp = fingerprint(page.content, url=page.url, headers=page.headers, config=config)
                    except NeardupError as exc:
                        failure(item.source, f"{item.source}: {exc}")
                        continue
                    click.echo(json.dumps({"file": item.source, "url": page.url, **fp.to_dict(with_text=with_text)},
                                          ensure_ascii=False))
                    records.append((page.url, fp, page.fetched_at))
            except (NeardupError, OSError) as exc:
                failure(file, str(exc) if isinstance(exc, NeardupError) else f"{file}: {exc.strerror or exc}")
            continue
        try:
            fp = fingerprint(read_content(file, config.max_bytes), url=url, config=config)
            click.echo(json.dumps({"file": file, **fp.to_dict(with_text=with_text)}, ensure_ascii=False))
            records.append((url or Path(file).resolve().as_uri(), fp, None))
        except (NeardupError, OSError) as exc:
            failure(file, str(exc) if isinstance(exc, NeardupError) else f"{file}: {exc.strerror or exc}")
    if parquet_out is not None:
        from neardup.batch.files import write_fingerprints
        from neardup.batch.graph import BatchRecord

        write_fingerprints([BatchRecord.of(u, fp, when) for u, fp, when in records], parquet_out)
    if failed:
        sys.exit(EXIT_INPUT)


def _single(add: bool, db: str, url: str, file: str, header: tuple[str, ...], opts: dict[str, Any]) -> None:
    settings = settings_from_options(opts)
    config = build_config(settings, **opts)
    content = read_content(file, (config or DEFAULT_CONFIG).max_bytes)
    # check never writes, and needs the store it checks against (a missing file is exit 3, not
    # "new" for everything); a server's URL is always connected to (a server that is down is exit 3)
    with open_detector(db, create=add, config=config, settings=settings) as det:
        headers = parse_headers(header)
        verdict = det.add(url, content, headers) if add else det.check(url, content, headers)
    click.echo(json.dumps(verdict.to_dict(), ensure_ascii=False))


@click.command("add")
@db_option
@click.argument("url")
@click.argument("file")
@header_option
@settings_options()
@config_options
@handle_errors
def add_cmd(db: str, url: str, file: str, header: tuple[str, ...], **opts: Any) -> None:
    """Decide what FILE (fetched from URL; - for stdin) is, record it, print the JSON verdict."""
    _single(True, db, url, file, header, opts)


@click.command("check")
@existing_db_option
@click.argument("url")
@click.argument("file")
@header_option
@settings_options()
@config_options
@handle_errors
def check_cmd(db: str, url: str, file: str, header: tuple[str, ...], **opts: Any) -> None:
    """Like add, without writing anything to the store (which must exist: exit 3 otherwise)."""
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
    if low.startswith("fetched_at "):  # outside the range of neardup.model.checked_time
        return "bad-time"
    if low.startswith("unexpected "):
        return "internal"
    return "bad-page"


@click.command("dedup")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--db", default=None, type=click.Path(dir_okay=False),
              help=f"{DB_HELP} (a file is created if missing); required unless --batch.")
@click.option("--batch", is_flag=True,
              help="Decide on the whole input at once (neardup.batch: order-independent clusters and canonicals; "
                   "no store). Rows: url, digest, simhash, status, cluster, canonical, match, distance, version (a "
                   "URL's re-fetches are versions of it). Inputs may "
                   "also be fingerprint Parquet files (neardup.batch.files.PARQUET_COLUMNS).")
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
@click.option("--cdxj", "cdxj_path", default=None, type=click.Path(dir_okay=False),
              help="Write a CDXJ sidecar: one line per capture in the archive's own key (SURT and 14-digit "
                   "timestamp, as cdxj-indexer writes them) with neardup's fields (nd_*), sorted.")
@click.option("--warc-out", "warc_out", default=None, type=click.Path(dir_okay=False),
              help="Write a deduplicated copy of the input WARC files (.warc.gz): a response with an earlier "
                   "one's payload digest becomes a revisit record; near and exact ones are kept, with their "
                   "verdict in a metadata record.")
@click.option("--min-payload", type=click.IntRange(0), default=0, show_default=True,
              help="With --warc-out: a response under this many payload bytes is kept whole, never a revisit.")
@click.option("--max-original-age", type=click.FloatRange(0), default=None,
              help="With --warc-out: seconds an original may be older than its copy to be referred to (else the "
                   "copy is kept whole, and is the original of later ones).")
@click.option("--blackout", type=click.FloatRange(0), default=0.0, show_default=True,
              help="With --warc-out: a copy this many seconds or less after its original is kept whole.")
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
              out: str | None, fmt: str | None, errors_path: str | None, cdxj_path: str | None,
              warc_out: str | None, min_payload: int, max_original_age: float | None, blackout: float,
              jobs: int | None, batch_size: int, page_timeout: float, progress: bool | None, **opts: Any) -> None:
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
    refuse_overwrite({"--out": out, "--errors": errors_path, "--fingerprints-out": fingerprints_out,
                      "--cdxj": cdxj_path, "--warc-out": warc_out}, stores={"--db": db}, inputs=inputs)
    if warc_out is not None and not all(p.lower().endswith(WARC_SUFFIXES) for p in inputs):
        raise click.UsageError("--warc-out copies WARC inputs (.warc, .warc.gz): every input must be one")
    policy = RevisitPolicy(min_payload, max_original_age, blackout)
    if warc_out is None and policy != RevisitPolicy():
        raise click.UsageError("--min-payload, --max-original-age and --blackout go with --warc-out")
    from tqdm import tqdm

    from neardup.fingerprint.core import warm_up
    from neardup.ingest.inputs import count_items
    from neardup.ingest.workers import add_pages, default_jobs

    for path in inputs:  # an input of unknown type is a usage mistake: refuse before any work
        if not Path(path).is_dir() and not (batch and _fingerprint_file(path)):
            read_input(path)
    settings = settings_from_options(opts)
    config = build_config(settings, **opts)
    if batch:
        if db is not None:
            raise click.UsageError("--batch keeps no store: drop --db (or drop --batch to deduplicate into it)")
        _dedup_batch(inputs, out, fmt, errors_path, settings=settings, jobs=jobs, config=config,
                     fingerprints_out=fingerprints_out, exact_k=exact_k, cdxj=cdxj_path,
                     warc_out=(warc_out, policy) if warc_out is not None else None)
        return
    if fingerprints_out is not None:
        raise click.UsageError("--fingerprints-out goes with --batch")
    if not exact_k:
        raise click.UsageError("--no-exact-k goes with --batch")
    if db is None:
        raise click.UsageError("Missing option '--db' (or use --batch)")
    if fmt == "parquet":
        raise click.UsageError("--format parquet goes with --batch")
    if next(iter(read_all(inputs, (config or DEFAULT_CONFIG).max_bytes)), None) is None:
        # nothing to read: say so (exit 1) rather than "pages 0" and a new empty store
        raise InputError(f"no pages in {', '.join(inputs)}: folders are searched for .html, .htm, .html.gz and "
                         ".txt files; a file is read as JSONL, WARC or a page")
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
        sidecar = _sidecar(det, cdxj_path) if cdxj_path else None
        decided: dict[tuple[str, int], dict[str, Any]] = {}  # WARC responses' verdicts, for --warc-out
        copied: dict[str, int] | None = None
        warm_up(det.config)  # a cold numba cache compiles here, with a notice, before the bar
        disable = (not progress) if progress is not None else None
        total = None if disable is True else count_items(inputs)
        bar = tqdm(unit="page", total=total, disable=disable, file=sys.stderr, dynamic_ncols=True)
        try:
            items = read_all(inputs, det.config.max_bytes)
            for item, verdict in add_pages(det, items, jobs=jobs, batch_size=batch_size,
                                             page=lambda it: it.page or it.revisit,
                                             page_timeout=page_timeout):
                bar.update(1)
                if item.skip is not None and (item.revisit is None or verdict is None or verdict.status == "error"):
                    skipped[item.skip] = skipped.get(item.skip, 0) + 1  # a revisit of a URL not stored: skipped
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
                if sidecar is not None and (capture := item.page or item.revisit) is not None:
                    sidecar.add(capture.url, capture.fetched_at, verdict)
                if warc_out is not None and item.page is not None and (at := warc_position(item.source)):
                    decided[at] = verdict.to_dict()
            if sidecar is not None:
                sidecar.close()
            if warc_out is not None:
                copied = write_deduplicated([Path(p) for p in inputs], Path(warc_out), decided, policy,
                                            store=det.store).to_dict()
        finally:
            bar.close()
            if stream is not None and stream is not sys.stdout:
                stream.close()
            if errors_stream is not None:
                errors_stream.close()
            if sidecar is not None:
                sidecar.out.close()
        stats = det.stats()
    summary = {**counts, "errors_by_reason": dict(sorted(reasons.items())),
               "skipped": sum(skipped.values()), "skipped_by_reason": dict(sorted(skipped.items())),
               "clusters": len(clusters_touched), "store_pages": stats["pages"], "store_clusters": stats["clusters"],
               "db": db, "jobs": jobs, **({"warc_out": copied} if copied is not None else {})}
    click.echo(_human_summary(counts, reasons, skipped, len(clusters_touched), stats), err=True)
    # with --out - the verdicts own stdout: the machine-readable summary goes to stderr too
    click.echo(json.dumps(summary), err=out == "-")
    if counts["pages"] and counts["error"] == counts["pages"]:
        click.echo(f"neardup: error: none of the {counts['pages']} input items could be read", err=True)
        sys.exit(EXIT_INPUT)


def _sidecar(det: Any, path: str) -> CdxjSidecar:
    """The CDXJ sidecar of a ``dedup`` run into ``det``'s store (its lines written at the end)."""
    def match_time(page_id: int) -> float | None:
        rec = det.page(page_id)
        return rec.fetched_at if rec is not None else None

    return CdxjSidecar(open(path, "w", encoding="utf-8", newline="\n"), det.config.spec, match_time)


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



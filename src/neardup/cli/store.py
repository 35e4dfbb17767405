"""``neardup export`` and ``neardup history``: the final state of a store and one URL's
fetch history, registered on the main group by :mod:`neardup.cli`.

Same conventions as the rest of the command line: errors are one line on stderr; exit codes
0 ok, 1 bad input, 2 bad usage, 3 store problem.
"""

from __future__ import annotations

import csv
import json
import sys

import click

from neardup.cli.common import (
    existing_db_option,
    open_detector,
    refuse_overwrite,
)
from neardup.cli.errors import EXIT_INPUT, handle_errors
from neardup.cli.errors import one_line as _one_line
from neardup.errors import NeardupError, URLError
from neardup.model import DEFAULT_HOST_MIN_PAGES, MIN_HOST_PAGES


@click.command("export")
@existing_db_option
@click.option("--out", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File to write (.csv, .jsonl, .parquet or .cdxj; - for JSONL on stdout).")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "parquet", "cdxj"]), default=None,
              help="Output format (default: from the file name); cdxj: the archive's own keys (SURT and "
                   "timestamp of each URL's last capture) with neardup's fields (nd_*), sorted.")
@handle_errors
def export_cmd(db: str, out: str, fmt: str | None) -> None:
    """Every stored URL with its first decision, current cluster, final canonical URL,
    last change and next planned fetch (the store's state now; `dedup --out` rows are the
    decisions at the time they were made). Prints {"rows": n} on stderr."""
    refuse_overwrite({"--out": out}, stores={"--db": db})
    from neardup.cli.common import open_detector
    from neardup.report.export import export, format_of

    if out != "-":
        format_of(out, fmt)  # a bad file name is a usage error before the store is opened
    with open_detector(db, create=False) as det:
        n = export(det.store, out, fmt, spec=det.config.spec)
    click.echo(json.dumps({"rows": n, "out": out}), err=True)


@click.command("history")
@existing_db_option
@click.argument("url")
@handle_errors
def history_cmd(db: str, url: str) -> None:
    """One stored URL's fetch history as one JSON line: fetches, changes, estimated change
    rate (per second), next planned fetch, and its last fetches (time, digest, SimHash,
    changed, distance and similarity to the fetch before). Exit 1 when the URL is not
    stored."""
    from neardup.cli.common import open_detector

    with open_detector(db, create=False) as det:
        found = det.history(url)
    if found is None:
        raise NeardupError(f"URL {url} is not stored")
    click.echo(json.dumps(found.to_dict(), ensure_ascii=False))


@click.command("revisit")
@existing_db_option
@click.argument("url")
@click.option("--fetched-at", type=float, default=None,
              help="When the URL was found unchanged (POSIX seconds; default: now).")
@handle_errors
def revisit_cmd(db: str, url: str, fetched_at: float | None) -> None:
    """Record that a stored URL still served its stored content (an HTTP 304, a WARC revisit)
    without sending it: an unchanged fetch in its history. Prints the verdict as one JSON
    line; exit 1 when the URL is not stored."""
    with open_detector(db, create=False) as det:
        verdict = det.add_revisit(url, fetched_at=fetched_at)
    click.echo(json.dumps(verdict.to_dict(), ensure_ascii=False))


@click.command("due")
@existing_db_option
@click.option("--at", type=float, default=None, help="Due at this time (POSIX seconds; default: now).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many URLs (default: all).")
@handle_errors
def due_cmd(db: str, at: float | None, limit: int | None) -> None:
    """The stored URLs a recrawl should fetch (originals and canonicals with no next planned
    fetch, or one at or before --at), one per line in URL order: seeded into a crawl, they
    reach the pages behind pages still fresh (which a crawl following links skips)."""
    from neardup.cli.common import open_detector

    left = limit
    after: str | None = None
    with open_detector(db, create=False) as det:
        while left is None or left > 0:
            urls = det.due(at, limit=min(10_000, left or 10_000), after=after)
            for url in urls:
                click.echo(url)
            if len(urls) < min(10_000, left or 10_000):
                break
            after = urls[-1]
            left = None if left is None else left - len(urls)


@click.command("should-fetch")
@click.argument("urls", nargs=-1, required=True)
@existing_db_option
@click.option("--max-age", type=click.FloatRange(0), default=None,
              help="Seconds (>= 0): a known page fetched more recently than this is skipped (reason 'fresh').")
@click.option("--host-max-duplicate-rate", type=click.FloatRange(0.0, 1.0), default=None,
              help="Skip URLs of hosts whose share of duplicates is at least this (reason 'host-budget').")
@click.option("--host-min-pages", type=click.IntRange(MIN_HOST_PAGES), default=DEFAULT_HOST_MIN_PAGES,
              show_default=True,
              help="Pages a host needs before --host-max-duplicate-rate applies.")
@handle_errors
def should_fetch_cmd(urls: tuple[str, ...], db: str, max_age: float | None, host_max_duplicate_rate: float | None,
                     host_min_pages: int) -> None:
    """Before fetching: should a crawler fetch each URL, and why? One JSON line per URL, in
    order: the URL as given ("url") and its key in the store ("key", the normalised URL), fetch,
    reason, known_url, canonical_url, rules...; a bad URL gets a line with its "url" and an
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


@click.command("rules")
@existing_db_option
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


@click.command("hosts")
@existing_db_option
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


@click.command("expire")
@existing_db_option
@click.option("--older-than", type=click.FloatRange(0), required=True,
              help="Seconds: forget pages last fetched longer ago than this.")
@handle_errors
def expire_cmd(db: str, older_than: float) -> None:
    """Forget pages not fetched for --older-than seconds (clusters and canonicals follow);
    prints {"expired": n}."""
    with open_detector(db, create=False) as det:
        click.echo(json.dumps({"expired": det.expire(older_than)}))


@click.command("cluster")
@existing_db_option
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


@click.command("stats")
@existing_db_option
@handle_errors
def stats_cmd(db: str) -> None:
    """Print the store's page and cluster counts as JSON."""
    with open_detector(db, create=False) as det:
        click.echo(json.dumps({**det.stats(), "spec": det.config.spec}))



"""``neardup export`` and ``neardup history``: the final state of a store and one URL's
fetch history, registered on the main group by :mod:`neardup.cli`.

Same conventions as the rest of the command line: errors are one line on stderr; exit codes
0 ok, 1 bad input, 2 bad usage, 3 store problem.
"""

from __future__ import annotations

import json

import click

from neardup.cli_errors import handle_errors
from neardup.errors import NeardupError

DB_HELP = "Store: SQLite file or postgresql:// URL (must exist)."


@click.command("export")
@click.option("--db", required=True, type=click.Path(dir_okay=False), help=DB_HELP)
@click.option("--out", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File to write (.csv, .jsonl or .parquet; - for JSONL on stdout).")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "parquet"]), default=None,
              help="Output format (default: from the file name).")
@handle_errors
def export_cmd(db: str, out: str, fmt: str | None) -> None:
    """Every stored URL with its first decision, current cluster, final canonical URL,
    last change and next planned fetch (the store's state now; `dedup --out` rows are the
    decisions at the time they were made). Prints {"rows": n} on stderr."""
    from neardup.cli import open_detector
    from neardup.export import export, format_of

    if out != "-":
        format_of(out, fmt)  # a bad file name is a usage error before the store is opened
    with open_detector(db, create=False) as det:
        n = export(det.store, out, fmt)
    click.echo(json.dumps({"rows": n, "out": out}), err=True)


@click.command("history")
@click.option("--db", required=True, type=click.Path(dir_okay=False), help=DB_HELP)
@click.argument("url")
@handle_errors
def history_cmd(db: str, url: str) -> None:
    """One stored URL's fetch history as one JSON line: fetches, changes, estimated change
    rate (per second), next planned fetch, and its last fetches (time, digest, SimHash,
    changed, distance and similarity to the fetch before). Exit 1 when the URL is not
    stored."""
    from neardup.cli import open_detector

    with open_detector(db, create=False) as det:
        found = det.history(url)
    if found is None:
        raise NeardupError(f"URL {url} is not stored")
    click.echo(json.dumps(found.to_dict(), ensure_ascii=False))

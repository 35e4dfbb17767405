"""The ``neardup`` command line: a thin layer over :class:`neardup.Detector`. This module only
defines the group and registers the commands of each family's module.

Exit codes: 0 success; 1 bad input (unreadable page, bad URL, bad input file); 2 bad
usage (unknown option, bad argument); 3 store problem (corrupt, locked, other spec).
Errors are one line on stderr, never a traceback (``NEARDUP_DEBUG=1`` shows the traceback
of an unexpected error). ``dedup`` carries on past every item it cannot read or fingerprint
and counts it by reason (summary ``errors_by_reason``; one JSON line each with ``--errors``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from neardup._version import __version__
from neardup.cli.batch import check_batch_cmd, spark_dedup_cmd
from neardup.cli.errors import one_line as _one_line
from neardup.cli.pages import (
    add_cmd,
    check_cmd,
    dedup_cmd,
    fingerprint_cmd,
)
from neardup.cli.serve import serve_cmd
from neardup.cli.store import (
    cluster_cmd,
    due_cmd,
    expire_cmd,
    export_cmd,
    history_cmd,
    hosts_cmd,
    revisit_cmd,
    rules_cmd,
    should_fetch_cmd,
    stats_cmd,
)
from neardup.cli.tools import report_cmd, tune_cmd


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


for command in (fingerprint_cmd, add_cmd, check_cmd, dedup_cmd,  # pages (neardup.cli.pages)
                should_fetch_cmd, rules_cmd, hosts_cmd, expire_cmd, cluster_cmd, stats_cmd,  # neardup.cli.store
                export_cmd, history_cmd, due_cmd, revisit_cmd,
                serve_cmd,  # the HTTP service (neardup.cli.serve)
                spark_dedup_cmd, check_batch_cmd,  # batch jobs (neardup.cli.batch; dedup --batch is in dedup)
                tune_cmd, report_cmd):  # neardup.cli.tools
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    main()

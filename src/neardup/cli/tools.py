"""``neardup tune`` and ``neardup report``: click commands over :mod:`neardup.tune` and
:mod:`neardup.report`, registered on the main group by :mod:`neardup.cli`.

Same conventions as the rest of the command line: errors are one line on stderr; exit codes
0 ok, 1 bad input (an unreadable pairs file or page), 2 bad usage, 3 store problem.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from neardup.cli.common import refuse_overwrite
from neardup.cli.errors import handle_errors as _errors
from neardup.cli.options import settings_options
from neardup.errors import NeardupError


@click.command("tune")
@click.argument("pairs", type=click.Path(dir_okay=False))
@click.option("--db", default=None, help="Store: pages given as URLs are read from it, its fingerprint settings "
              "are used, and --apply writes the choice into it.")
@click.option("--apply", "do_apply", is_flag=True, help="Store the recommended thresholds in --db (meta 'thresholds').")
@click.option("--method", type=click.Choice(["simhash", "minhash"]), default="simhash", show_default=True,
              help="Which recommendation --apply stores (minhash needs signatures in the fingerprints).")
@click.option("--min-precision", type=click.FloatRange(0.0, 1.0, min_open=True), default=0.99, show_default=True,
              help="Precision the recommended point keeps, with a one-step margin.")
@click.option("--verify", "verifies", type=click.FloatRange(0.0, 1.0), multiple=True,
              help="Verify threshold(s) to consider (repeat; default: 0 to 0.7). One value keeps verify fixed.")
@click.option("--min-host-pairs", type=click.IntRange(1), default=20, show_default=True,
              help="Pairs a host needs (with 5 of each label) for its own thresholds.")
@click.option("--min-pairs", type=click.IntRange(1), default=None,
              help="Pairs of each label (same, different) below which the recommendation is only a hint: a "
              "warning, and --apply refuses (unless --force). Default: 30.")
@click.option("--force", is_flag=True, help="--apply even with fewer than --min-pairs pairs of a label.")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write the precision/recall plot (SVG).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of a table.")
@settings_options(["bands"])
@_errors
def tune_cmd(pairs: str, db: str | None, do_apply: bool, method: str, min_precision: float,
             verifies: tuple[float, ...], min_host_pairs: int, min_pairs: int | None, force: bool, out: str | None,
             as_json: bool, bands: bool | None) -> None:
    """Measure precision, recall and F1 of the match rule on labelled PAIRS (.tsv, .csv or
    .jsonl: columns a, b, label [same/different], optional host, url_a, url_b) at k = 0..20
    and each verify threshold; recommend thresholds (overall and per host), with 95% Wilson
    confidence intervals. Fewer than --min-pairs pairs of a label: a warning on stderr, and
    --apply stores nothing (exit 1) unless --force."""
    refuse_overwrite({"--out": out}, stores={"--db": db}, inputs=[pairs])
    from neardup.report.plots import document
    from neardup.store.backends import open_store
    from neardup.tune import sweep as tuning
    from neardup.tune import view as tune_view

    if do_apply and not db:
        raise click.UsageError("--apply needs --db (the store to write the thresholds into)")
    min_each = tune_view.MIN_LABEL_PAIRS if min_pairs is None else min_pairs
    store = open_store(db) if db else None
    try:
        result = tuning.tune(pairs, store=store, min_precision=min_precision, min_host_pairs=min_host_pairs,
                             verifies=verifies or tuning.VERIFY_VALUES, bands=bands is not False)
        problem = tune_view.sample_problem(result, min_each)
        if problem and do_apply and not force:
            raise NeardupError(f"not applied: {problem} (or --force)")
        applied = tuning.apply(store, result, method) if do_apply and store is not None else None
    finally:
        if store is not None:
            store.close()
    if out:
        Path(out).write_text(document(tune_view.pr_curve_svg(result, min_each=min_each)), encoding="utf-8")
    if as_json:
        if problem:
            click.echo(f"neardup: warning: {problem}", err=True)
        click.echo(json.dumps({**result.to_dict(), "applied": applied, "plot": out, "warning": problem},
                              sort_keys=True))
        return
    click.echo(tune_view.summary_text(result, min_each))
    if out:
        click.echo(f"plot: {out}")
    if applied is not None:
        click.echo(f"stored in {db} (meta '{tuning.META_KEY}'): method={applied['method']}, k={applied['k']}, "
                   f"verify={applied['verify']}, threshold={applied['threshold']}, hosts={len(applied['hosts'])}")


@click.command("report")
@click.option("--db", required=True, help="Store file (or postgresql://, redis://, redis+cluster:// URL) to report.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="HTML file to write.")
@click.option("--title", default=None, help="Page title.")
@click.option("--top-clusters", type=click.IntRange(0), default=20, show_default=True, help="Clusters listed.")
@click.option("--top-hosts", type=click.IntRange(1), default=20, show_default=True, help="Hosts charted.")
@_errors
def report_cmd(db: str, out: str, title: str | None, top_clusters: int, top_hosts: int) -> None:
    """Write a self-contained HTML report of a store (plots and tables; opens offline)."""
    refuse_overwrite({"--out": out}, stores={"--db": db})
    from neardup.report.html_report import write_report
    from neardup.store.backends import require_existing

    require_existing(db)
    data = write_report(db, out, title, top_clusters=top_clusters, top_hosts=top_hosts)
    click.echo(json.dumps({"report": out, **data.summary()}, sort_keys=True))


COMMANDS = (tune_cmd, report_cmd)

"""What ``neardup tune`` shows of a :class:`neardup.tune.sweep.TuneResult`: Wilson confidence
intervals for precision and recall, the sample-size check, the precision/recall plot and
the text summary.

Thresholds tuned on a few dozen pairs sit on a noisy edge: 30 *same* pairs all found give a
recall of 100% whose 95% Wilson interval still reaches down to 89%. :func:`sample_problem`
says when either label has fewer than :data:`MIN_LABEL_PAIRS` pairs; ``neardup tune`` then
warns, and refuses ``--apply`` unless ``--force``.

>>> from neardup.tune.sweep import wilson
>>> lo, hi = wilson(30, 30)
>>> round(lo, 3), hi
(0.886, 1.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from neardup.model import DEFAULT_VERIFY

if TYPE_CHECKING:
    from neardup.tune.sweep import Point, TuneResult

from neardup.tune.sweep import intervals

#: pairs of each label (same, different) below which a recommendation is only a hint
MIN_LABEL_PAIRS = 30


def _range(lo: float, hi: float) -> str:
    return f"{lo:.0%}-{hi:.0%}"


def describe(point: Point) -> str:
    """``precision 100% (95% CI 89%-100%), recall 97% (95% CI 90%-99%)``."""
    ci = intervals(point)
    return (f"precision {point.precision:.1%} (95% CI {_range(*ci['precision'])}), "
            f"recall {point.recall:.1%} (95% CI {_range(*ci['recall'])})")


def label_counts(result: TuneResult) -> tuple[int, int]:
    """(same pairs, different pairs)."""
    same = int(result.facts.same.sum())
    return same, len(result.facts) - same


def sample_problem(result: TuneResult, min_each: int = MIN_LABEL_PAIRS) -> str | None:
    """Why the pairs are too few to trust the recommendation, or None."""
    same, different = label_counts(result)
    if same >= min_each and different >= min_each:
        return None
    ci = intervals(result.choice.point)
    return (f"only {same} same and {different} different pairs (fewer than {min_each} of each): "
            f"the recommendation is uncertain (precision 95% CI {_range(*ci['precision'])}, "
            f"recall 95% CI {_range(*ci['recall'])}); label more pairs")


def _k_labels(points: Sequence[Point]) -> list[tuple[float, float, str]]:
    """One label per run of consecutive k at the same (recall, precision): ``k=13-20``."""
    out: list[tuple[float, float, str]] = []
    run: list[Point] = []
    for p in [*points, None]:
        if run and (p is None or (p.recall, p.precision) != (run[0].recall, run[0].precision)):
            ks = f"k={run[0].k}" if len(run) == 1 else f"k={run[0].k}-{run[-1].k}"
            out.append((run[0].recall, run[0].precision, ks))
            run = []
        if p is not None:
            run.append(p)
    return out


def _axis_start(low: float) -> float:
    """Where an axis ending at 100% starts to show values from ``low``: 90%, 50% or 0%, the
    highest below it (ticks at fifths of the range stay round).

    >>> _axis_start(0.83), _axis_start(0.99), _axis_start(0.04)
    (0.5, 0.9, 0.0)
    """
    for start in (0.9, 0.5, 0.0):
        if low >= start + 0.01 or start == 0.0:
            return start
    return 0.0


def pr_curve_svg(result: TuneResult, verifies: Iterable[float] | None = None,
                 min_each: int = MIN_LABEL_PAIRS) -> str:
    """The precision/recall curve: one line per verify threshold (points over k = 0..20,
    the k written next to the points of the recommended one), MinHash as one more line
    when measured, the recommended point ringed with its confidence intervals; the legend
    gives each line's threshold and the recommendation's figures; a warning under the
    title when the pairs are too few. A self-contained SVG."""
    from neardup.report.plots import line_chart
    from neardup.tune.sweep import K_VALUES

    chosen = result.choice
    default_vs = [0.0, 0.2, DEFAULT_VERIFY, 0.5]
    measured = {v for _, v in result.points}
    vs = sorted(measured & set(verifies if verifies is not None else default_vs + [chosen.verify or 0.0])) \
        or sorted(measured)[:4]
    series: list[tuple[str, Sequence[tuple[float, float]]]] = []
    legend: list[str] = []
    labelled: list[tuple[int, float, float, str]] = []
    for i, v in enumerate(vs):
        pts = [result.points[(k, v)] for k in K_VALUES if (k, v) in result.points]
        series.append(("SimHash k=0..20, verify", [(p.recall, p.precision) for p in pts]))
        legend.append(f"{v:g}")
        if v == chosen.verify:
            labelled = [(i, x, y, text) for x, y, text in _k_labels(pts)]
    if result.minhash_points:
        mh = sorted(result.minhash_points.items())
        series.append(("MinHash threshold", [(p.recall, p.precision) for _, p in mh]))
        ts = sorted(result.minhash_points)
        legend.append(f"{ts[0]:g}..{ts[-1]:g}")
    ci = intervals(chosen.point)
    xs = [x for _, pts in series for x, _ in pts] + [ci["recall"][0]]
    ys = [y for _, pts in series for _, y in pts] + [ci["precision"][0]]
    lo_x, lo_y = _axis_start(min(xs)), _axis_start(min(ys))
    marks = [(chosen.recall, chosen.precision, f"recommended {chosen.point.label()}")]
    same, different = label_counts(result)
    problem = sample_problem(result, min_each)
    return line_chart(
        "pr-curve", series, title=f"Precision / recall on {len(result.facts)} labelled pairs "
        f"({same} same, {different} different)", x_label="recall (share of the same pairs found)",
        y_label="precision (share of declared pairs that are same)", y_fmt="%", x_range=(lo_x, 1.0),
        y_range=(lo_y, 1.0), x_ticks=[(t, f"{t:.0%}") for t in (lo_x + (1 - lo_x) * i / 5 for i in range(6))],
        marks=marks, legend=legend,
        point_labels=labelled, width=720, height=460, y_ticks=5,
        mark_values=[f"{chosen.point.label()}; precision {chosen.precision:.0%} ({_range(*ci['precision'])}), "
                     f"recall {chosen.recall:.0%} ({_range(*ci['recall'])}), 95% CI"],
        mark_errors=[(ci["recall"][0], ci["recall"][1], ci["precision"][0], ci["precision"][1])],
        note=f"Too few pairs: {same} same, {different} different (want {min_each} of each)" if problem else "")


def summary_text(result: TuneResult, min_each: int = MIN_LABEL_PAIRS) -> str:
    """A readable summary: the recommendation with its intervals, the table at its verify,
    hosts, MinHash, and the sample-size warning."""
    from neardup.tune.sweep import MIN_HOST_EACH, MIN_HOST_PAIRS

    c = result.choice
    same, different = label_counts(result)
    lines = [f"pairs: {len(result.facts)} ({same} same, {different} different)"
             + (f"; left out: {', '.join(f'{n} {k}' for k, n in sorted(result.skipped.items()))}"
                if result.skipped else "")]
    state = "meets" if c.met else "does NOT meet (best F1 shown)"
    lines.append(f"recommended: {c.point.label()}: {describe(c.point)}, F1 {c.point.f1:.3f} "
                 f"({state} precision >= {c.min_precision:.0%} with a one-step margin)")
    if result.defaults is not None:
        d = result.defaults
        lines.append(f"defaults:    {d.label()}: {describe(d)}, F1 {d.f1:.3f}")
    lines.append(f"{'k':>3} {'precision':>9} {'recall':>7} {'F1':>6} {'TP':>5} {'FP':>5} {'FN':>5}"
                 f"   (verify {'none' if c.verify is None else f'{c.verify:g}'})")
    for p in result.table():
        lines.append(f"{p.k:>3} {p.precision:>9.1%} {p.recall:>7.1%} {p.f1:>6.3f} {p.tp:>5} {p.fp:>5} {p.fn:>5}"
                     + ("  <-" if p.k == c.k else ""))
    if result.minhash_choice is not None:
        m = result.minhash_choice
        lines.append(f"MinHash: {m.point.label()}: {describe(m.point)}" + ("" if m.met else " (target not met)"))
    for h, r in sorted(result.hosts.items()):
        lines.append(f"host {h}: {r.point.label()} ({r.pairs} pairs; {describe(r.point)}"
                     f"{'' if r.met else ', target not met'})")
    small = [h for h in result.host_pairs if h not in result.hosts]
    if small:
        lines.append(f"{len(small)} host(s) with too few pairs for their own thresholds "
                     f"(need {MIN_HOST_PAIRS}, with {MIN_HOST_EACH} of each label)")
    problem = sample_problem(result, min_each)
    if problem:
        lines.append(f"warning: {problem}")
    return "\n".join(lines)

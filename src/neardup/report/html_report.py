"""``neardup report``: one self-contained HTML file describing a store.

:func:`write_report` reads a store through its report aggregates (the store contract's
"aggregates for the report": :meth:`~neardup.store.base.Store.report_figures`,
:meth:`~neardup.store.base.Store.host_rankings`, :meth:`~neardup.store.base.Store.statuses_over_time`,
... each one ``GROUP BY``, so a store of millions of pages is summarised without reading every
page into Python) and writes one HTML file with inline SVG charts (:mod:`neardup.report.plots`),
inline CSS, no script and no external resource: it opens offline. ``docs/report.md`` walks
through one. Sections (each with an ``id``; the charts' ``data-plot`` names in brackets),
every chart with a one-line "how to read this":

* ``summary``: what counts as a duplicate; URLs by verdict, clusters, hosts, fetches,
  re-fetches and changes, time range, spec, stored thresholds;
* ``verdicts``: the Hamming distance of every *near* verdict to its match
  (``distance-histogram``) and the sketch Jaccard estimate of up to ``score_sample`` of them
  (``score-histogram``);
* ``cluster-sizes``: clusters of 2+ URLs in logarithmic size bins (``cluster-sizes``);
* ``hosts``: hosts ranked by duplicate rate (``host-duplicates``, hosts of
  :data:`RATE_MIN_PAGES` URLs or more) and by fetches wasted (``host-wasted``: fetches of
  duplicate URLs, and re-fetches that found nothing changed), and the hosts with most URLs;
* ``over-time``: URLs by when they were first seen, stacked by verdict
  (``duplicates-over-time``), on a time axis fitted to the data's span (:func:`time_axis`:
  minutes to millennia, at most :data:`MAX_BUCKETS` buckets);
* ``drift``: re-fetches that found the content changed, per bucket and host, from the
  URLs' fetch histories (``drift``), and hosts ranked by their change rate
  (``host-change-rates``: changes per URL and day watched);
* ``clusters``: the largest clusters, their canonical URL and each member with how it
  joined (verdict, the URL it matched, distance, sketch score).

Pages without a host (``file://`` URLs) are listed under :data:`NO_HOST`.

Any stored time is rendered, whatever it is (a store written before the checks at the door,
:func:`neardup.model.checked_time`, may hold any float): the time axis spans at most the
documented range (:data:`~neardup.model.MIN_TIME` to :data:`~neardup.model.MAX_TIME`, 1970 to
9999), a time outside the axis is counted in its first or last bucket, a time with no calendar
date is written as its seconds (:func:`when`), and an infinite rate as none.

>>> from neardup import Detector
>>> det = Detector()
>>> html = render_report(det.store)
>>> html.startswith("<!DOCTYPE html>") and 'data-plot="cluster-sizes"' in html
True
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from neardup.crawl.templates import TemplatePage, redesigns, soft_404s, templates
from neardup.errors import NeardupError
from neardup.model import MAX_TIME, MIN_TIME, STATUSES, finite_or_none
from neardup.report.plots import bar_chart, empty_chart, hbar_chart, stacked_bars
from neardup.sketch import similarity
from neardup.store.backends import open_store
from neardup.store.base import Store

#: hosts shown in each per-host chart
TOP_HOSTS = 20
#: clusters listed with their members
TOP_CLUSTERS = 20
#: members listed per cluster
MEMBERS_PER_CLUSTER = 50
#: near verdicts whose sketch score is computed for the score histogram
SCORE_SAMPLE = 20000
#: hosts drawn (each its own colour) in the drift chart; the others are summed
DRIFT_HOSTS = 6
#: pages a host needs to be ranked by its duplicate rate (a host of 1 duplicate page is not 100% news)
RATE_MIN_PAGES = 5
#: the most buckets a time axis has (:func:`time_axis`)
MAX_BUCKETS = 48
#: the name the report gives to pages without a host (file:// URLs, local paths)
NO_HOST = "(no host: file:// or local pages)"

#: time buckets (seconds, name, tick label format), finest first
_STEPS = ((60, "minute", "%H:%M"), (300, "5 minutes", "%H:%M"), (900, "15 minutes", "%H:%M"),
          (3600, "hour", "%m-%d %Hh"), (6 * 3600, "6 hours", "%m-%d %Hh"), (86400, "day", "%Y-%m-%d"),
          (7 * 86400, "week", "%Y-%m-%d"), (30 * 86400, "30 days", "%Y-%m-%d"), (365 * 86400, "year", "%Y-%m"),
          (3650 * 86400, "10 years", "%Y"), (36500 * 86400, "100 years", "%Y"),
          (365000 * 86400, "1000 years", "%Y"))

CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top;word-break:normal;
overflow-wrap:normal;hyphens:none}
th{background:#f4f4f4;white-space:nowrap}td.n{text-align:right;white-space:nowrap}
td.d,td.k{white-space:nowrap}td.u{overflow-wrap:anywhere;min-width:12em}
.figures td{font-size:14px}.figures td.n{text-align:left}.figures{max-width:760px}
.note,.how{color:#555;font-size:13px;max-width:640px}
.how{margin:2px 0 18px}
figure{display:inline-block;vertical-align:top;margin:8px 16px 8px 0;max-width:660px}
svg.plot{background:#fff;border:1px solid #eee;display:block}
details{margin:6px 0}summary{cursor:pointer}
.u{overflow-wrap:anywhere}.w{white-space:nowrap}
"""


class ReportError(NeardupError):
    """The store cannot be reported on (unreadable)."""


@dataclass(frozen=True)
class TimeAxis:
    """Time buckets that fit the data's span: ``seconds`` each (a minute to a year, at most
    :data:`MAX_BUCKETS` between the first and the last time), counted from ``origin``
    (aligned on the bucket, UTC)."""

    origin: float
    seconds: int
    name: str
    fmt: str
    buckets: int

    def start(self, b: int) -> float:
        """The start time of bucket ``b``."""
        return self.origin + b * self.seconds

    def label(self, b: int) -> str:
        """Bucket ``b``'s tick label (the bucket's start, UTC)."""
        return when(self.start(b), self.fmt)

    def caption(self) -> str:
        """The axis label: the bucket and, for a clock-time axis, the first day."""
        if "%d" not in self.fmt:
            return f"time (UTC, per {self.name}) from {when(self.origin, '%Y-%m-%d')}" if "%H" in self.fmt \
                else f"{self.name} (UTC)"
        return f"{self.name} starting (UTC)"

    def bucket(self, b: int) -> int:
        """Bucket ``b`` of a store's aggregate, within the axis: a time before its start (or
        after its end: outside the documented range, or out of order) is counted in the
        first (last) bucket."""
        return min(max(int(b), 0), self.buckets - 1)


def when(ts: float | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A time as the report writes it (UTC); one with no calendar date (outside the years 1 to
    9999, or not a number: a store written before the checks at the door) as its seconds.

    >>> when(0), when(1e18), when(None)
    ('1970-01-01 00:00', '1e+18 s (no calendar date)', '-')
    """
    if ts is None:
        return "-"
    try:
        day = _dt.datetime.fromtimestamp(float(ts), _dt.UTC)
        return day.strftime(fmt.replace("%Y", f"{day.year:04d}"))  # (strftime writes year 1 as "1")
    except (OverflowError, OSError, ValueError):
        return f"{float(ts):.6g} s (no calendar date)"


def time_axis(first: float | None, last: float | None, max_buckets: int = MAX_BUCKETS) -> TimeAxis:
    """The finest bucket with at most ``max_buckets`` buckets from ``first`` to ``last``,
    both within :data:`~neardup.model.MIN_TIME` and :data:`~neardup.model.MAX_TIME` (a time
    outside counts as the nearest end; not a number: as the start).

    >>> a = time_axis(1_700_000_000, 1_700_000_000 + 3 * 3600)
    >>> a.name, a.buckets
    ('5 minutes', 37)
    >>> time_axis(0, 3 * 365 * 86400).name
    '30 days'
    >>> time_axis(-1e300, 1e18).name, time_axis(float("nan"), float("inf")).buckets
    ('1000 years', 9)
    """
    def within(t: float | None, default: float) -> float:
        t = default if t is None or t != t else float(t)
        return min(max(t, MIN_TIME), MAX_TIME)

    lo = within(first, MIN_TIME)
    hi = max(within(last, lo), lo)
    for seconds, name, fmt_ in _STEPS:
        origin = lo - lo % seconds
        n = int((hi - origin) // seconds) + 1
        if n <= max_buckets or seconds == _STEPS[-1][0]:
            return TimeAxis(origin, seconds, name, fmt_, n)
    raise AssertionError("unreachable")


def host_name(host: str) -> str:
    """A host as the report names it: :data:`NO_HOST` for pages without one."""
    return host if host else NO_HOST


@dataclass
class ReportData:
    """Every figure of the report, aggregated by the store (also returned to callers, e.g. for JSON)."""

    generated_at: float
    figures: dict[str, Any]
    status_counts: dict[str, int]
    spec: str | None
    thresholds: Any
    distance_hist: dict[int, int]
    score_hist: list[int]
    scores_sampled: int
    cluster_sizes: dict[int, int]
    hosts_by_pages: list[dict[str, Any]]
    hosts_by_rate: list[dict[str, Any]]
    hosts_by_wasted: list[dict[str, Any]]
    hosts_by_change: list[dict[str, Any]]
    axis: TimeAxis
    over_time: dict[int, dict[str, int]]
    drift: dict[str, dict[int, int]]
    largest: list[dict[str, Any]] = field(default_factory=list)
    #: per host with page structures (the hosts with most URLs): templates, redesigns, soft-404s
    #: and the content changes seen before and after its last redesign
    structure: list[dict[str, Any]] = field(default_factory=list)
    rate_min_pages: int = RATE_MIN_PAGES
    seconds: float = 0.0

    @property
    def pages(self) -> int:
        """Stored URLs."""
        return int(self.figures["pages"])

    def summary(self) -> dict[str, Any]:
        """The one-line account ``neardup report`` prints."""
        f = self.figures
        return {"pages": self.pages, **{s: n for s, n in sorted(self.status_counts.items())},
                "clusters": f["clusters"], "duplicate_clusters": f["duplicate_clusters"], "hosts": f["hosts"],
                "refetched": f["refetched"], "changed_pages": f["changed_pages"], "seconds": round(self.seconds, 3)}


def _score(a: bytes | None, b: bytes | None) -> float | None:
    if a is None or b is None or len(a) != len(b):
        return None
    return similarity(a, b).jaccard


def collect(store: Store, *, top_hosts: int = TOP_HOSTS, top_clusters: int = TOP_CLUSTERS,
            members_per_cluster: int = MEMBERS_PER_CLUSTER, score_sample: int = SCORE_SAMPLE,
            rate_min_pages: int = RATE_MIN_PAGES) -> ReportData:
    """Aggregate the store's figures through its report aggregates (module docs)."""
    started = time.perf_counter()
    with store.snapshot():
        figures = store.report_figures()
        counts = store.status_counts()
        score_hist = [0] * 20
        sampled = 0
        for sa, sb in store.near_sketches(score_sample):
            s = _score(sa, sb)
            if s is not None:
                score_hist[min(19, max(0, int(s * 20)))] += 1
                sampled += 1
        by_rate = store.host_rankings("duplicate_rate", top_hosts, rate_min_pages)
        if not any(h["duplicates"] for h in by_rate):  # no host that large has a duplicate: rank them all
            rate_min_pages = 1
            by_rate = store.host_rankings("duplicate_rate", top_hosts, 1)
        axis = time_axis(figures["first_seen"], figures["last_fetch"])
        over_time: dict[int, dict[str, int]] = defaultdict(dict)
        for b, status, n in store.statuses_over_time(axis.origin, axis.seconds):
            slot = over_time[axis.bucket(b)]
            slot[status] = slot.get(status, 0) + n
        drift: dict[str, dict[int, int]] = defaultdict(dict)
        for h, b, n in store.changes_over_time(axis.origin, axis.seconds):
            b = axis.bucket(b)
            drift[h][b] = drift[h].get(b, 0) + n
        largest = store.largest_clusters(top_clusters, members_per_cluster)
        data = ReportData(
            generated_at=time.time(), figures=figures, status_counts=counts, spec=store.get_meta("spec"),
            thresholds=store.get_meta("thresholds"), distance_hist=store.distance_counts(), score_hist=score_hist,
            scores_sampled=sampled, cluster_sizes=store.cluster_size_counts(),
            hosts_by_pages=_finite_rates(store.host_rankings("pages", top_hosts)),
            hosts_by_rate=_finite_rates(by_rate),
            hosts_by_wasted=_finite_rates(store.host_rankings("wasted", top_hosts)),
            hosts_by_change=_finite_rates(store.host_rankings("changes_per_day", top_hosts)), axis=axis,
            over_time=dict(over_time), drift=dict(drift), largest=largest, rate_min_pages=rate_min_pages)
    data.structure = _structure_rows(store, data)
    for cl in data.largest:
        for m in cl["members"]:
            sketches = m.pop("sketch"), m.pop("match_sketch")
            m["score"] = 1.0 if m["status"] == "exact" else _score(*sketches)
            m["canonical"] = m["id"] == cl["canonical_id"]
    data.seconds = time.perf_counter() - started
    return data


def _finite_rates(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Host rows with an infinite change rate or time watched (fetches a moment apart in a
    store written before the checks at the door) as none."""
    for h in hosts:
        for name in ("changes_per_day", "watched"):
            if name in h:
                h[name] = finite_or_none(h[name])
    return hosts


def _structure_rows(store: Store, data: ReportData) -> list[dict[str, Any]]:
    """Templates and redesigns of the hosts with most URLs (:mod:`neardup.crawl.templates` over
    their pages' structures), and their content changes split at the last redesign."""
    out = []
    for h in data.hosts_by_pages:
        rows = [TemplatePage(r.fetched_at, r.structure, r.digest, r.length, r.url)
                for r in store.structure_rows(h["host"])]
        if not rows:
            continue
        found, events = templates(rows), redesigns(rows)
        flags = soft_404s(rows)
        split = events[-1]["at"] if events else None
        before = after = 0
        for b, n in data.drift.get(h["host"], {}).items():
            if split is not None and data.axis.origin + b * data.axis.seconds >= split:
                after += n
            else:
                before += n
        out.append({"host": h["host"], "templates": len(found), "shares": [t["share"] for t in found[:4]],
                    "redesigns": [e["at"] for e in events], "soft_404s": sum(f is not None for f in flags),
                    "changes_before": before, "changes_after": after if split is not None else None})
    return out


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

def size_bins(sizes: dict[int, int], least: int = 2) -> list[tuple[str, int, int]]:
    """Clusters of ``least`` pages or more in logarithmic bins (2, 3-4, 5-8, 9-16, ...; at
    least four bins): ``(label, clusters, pages in them)``.

    >>> size_bins({1: 9, 2: 3, 7: 1})
    [('2', 3, 6), ('3-4', 0, 0), ('5-8', 1, 7), ('9-16', 0, 0)]
    """
    top = max([s for s in sizes if s >= least], default=least)
    out: list[tuple[str, int, int]] = []
    lo = least
    while lo <= top or len(out) < 4:
        hi = lo if lo == least else lo * 2 - 2
        hi = max(hi, lo)
        n = sum(c for s, c in sizes.items() if lo <= s <= hi)
        pages = sum(c * s for s, c in sizes.items() if lo <= s <= hi)
        out.append((str(lo) if lo == hi else f"{lo}-{hi}", n, pages))
        lo = hi + 1
    return out


def _time_slots(axis: TimeAxis, buckets: dict[int, Any]) -> list[int]:
    """Every bucket of the axis (empty ones included); none without data."""
    if not buckets:
        return []
    return list(range(min(0, *buckets), max(axis.buckets - 1, *buckets) + 1))


def _how(text: str) -> str:
    return f'<p class="how"><b>How to read this:</b> {keep_words(text)}</p>'


def _figure(svg: str, how: str) -> str:
    return f"<figure>{svg}{_how(how)}</figure>"


def rate_text(x: float | None) -> str:
    """A rate as the report writes it: whole numbers from 10, two digits below.

    >>> rate_text(1590.4), rate_text(2.345), rate_text(0.0123), rate_text(None)
    ('1,590', '2.3', '0.012', '-')
    """
    if x is None:
        return "-"
    if x >= 10:
        return f"{x:,.0f}"
    return f"{x:.2g}"


def duration(seconds: float | None) -> str:
    """A duration in its largest whole unit.

    >>> duration(40), duration(3 * 3600), duration(10 * 86400), duration(None)
    ('40 s', '3 h', '10 days', '-')
    """
    if seconds is None:
        return "-"
    for unit, name in ((365 * 86400, " years"), (86400, " days"), (3600, " h"), (60, " min")):
        if seconds >= 2 * unit or (unit <= 3600 and seconds >= unit):
            return f"{seconds / unit:.0f}{name}"
    return f"{seconds:.0f} s"


_COMPOUND = re.compile(r"(?<![\w&#/=.:-])(\w+(?:-\w+)+)(?![\w-]*[=\"])")


def keep_words(html_text: str) -> str:
    """``html_text`` with every hyphenated word (``re-fetch``, ``2026-12-01``) kept on one
    line (a line may break at a hyphen otherwise, which reads as a broken word).

    >>> keep_words("a re-fetch")
    'a <span class="w">re-fetch</span>'
    """
    return _COMPOUND.sub(r'<span class="w">\1</span>', html_text)


def _n(count: int, noun: str) -> str:
    """``1 URL``, ``2 URLs``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.1 or x == 0 else f"{x:.1%}"


def _host_charts(data: ReportData) -> dict[str, str]:
    charts = {}
    charts["host-duplicates"] = hbar_chart(
        "host-duplicates", [(host_name(h["host"]), h["duplicate_rate"], f"{_pct(h['duplicate_rate'])} of "
                             f"{_n(h['pages'], 'URL')}") for h in data.hosts_by_rate if h["duplicates"]],
        title="Hosts by duplicate rate", x_label="share of the host's URLs that duplicate another URL", x_max=1.0,
        empty=f"no host with {data.rate_min_pages} URLs or more has a duplicate")
    charts["host-wasted"] = hbar_chart(
        "host-wasted", [(host_name(h["host"]), float(h["wasted"]),
                         f"{h['wasted']:,} of {h['fetches']:,} fetch{'' if h['fetches'] == 1 else 'es'}")
                        for h in data.hosts_by_wasted if h["wasted"]],
        title="Hosts by fetches wasted", x_label="fetches that brought nothing new", empty="no fetch was wasted")
    charts["host-change-rates"] = hbar_chart(
        "host-change-rates", [(host_name(h["host"]), float(h["changes_per_day"] or 0.0),
                               f"{rate_text(h['changes_per_day'])} a day ({_n(h['refetched'], 'URL')}, watched "
                               f"{duration(h['watched'])})") for h in data.hosts_by_change],
        title="Hosts by change rate", x_label="content changes per URL and day, over the re-fetched URLs",
        empty="no URL was fetched twice yet")
    return charts


def _time_charts(data: ReportData) -> dict[str, str]:
    charts = {}
    axis = data.axis
    slots = _time_slots(axis, data.over_time)
    labels = [axis.label(b) for b in slots]
    statuses = [s for s in ("new", "exact", "near", "partial", "empty", "error")
                if any(data.over_time.get(b, {}).get(s) for b in slots)]
    charts["duplicates-over-time"] = stacked_bars(
        "duplicates-over-time", labels, [(s, [float(data.over_time.get(b, {}).get(s, 0)) for b in slots])
                                         for s in statuses],
        title=f"URLs by when they were first seen, per {axis.name}", x_label=axis.caption(), y_label="URLs")
    totals = {h: sum(v.values()) for h, v in data.drift.items()}
    hosts = sorted(totals, key=lambda h: (-totals[h], h))
    shown, rest = hosts[:DRIFT_HOSTS], hosts[DRIFT_HOSTS:]
    dslots = _time_slots(axis, {b: 1 for v in data.drift.values() for b in v})
    series = [(host_name(h), [float(data.drift[h].get(b, 0)) for b in dslots]) for h in shown]
    if rest:
        series.append((f"{len(rest)} other hosts", [float(sum(data.drift[h].get(b, 0) for h in rest))
                                                    for b in dslots]))
    if series:
        charts["drift"] = stacked_bars("drift", [axis.label(b) for b in dslots], series,
                                       title=f"Re-fetches that found the content changed, per {axis.name}",
                                       x_label=axis.caption(), y_label="changed re-fetches")
    else:
        charts["drift"] = empty_chart("drift", "Re-fetches that found the content changed",
                                      "no re-fetch found changed content (or no URL was fetched twice)")
    return charts


def _charts(data: ReportData) -> dict[str, str]:
    charts: dict[str, str] = {}
    dh = data.distance_hist
    charts["distance-histogram"] = bar_chart(
        "distance-histogram", [(str(d), float(dh.get(d, 0))) for d in range(max(dh) + 1)] if dh else [],
        title="Near duplicates by Hamming distance", x_label="bits between the SimHash of the page and of its match",
        y_label="URLs")
    charts["score-histogram"] = bar_chart(
        "score-histogram", [(f"{i / 20:.2f}", float(n)) for i, n in enumerate(data.score_hist)]
        if data.scores_sampled else [], title=f"Near duplicates by sketch score ({data.scores_sampled:,} sampled)",
        x_label="estimated word 3-shingle Jaccard (bin start)", y_label="URLs")
    charts["cluster-sizes"] = bar_chart(
        "cluster-sizes", [(label, float(n)) for label, n, _ in size_bins(data.cluster_sizes)],
        title="Clusters of duplicates by size", x_label="URLs in the cluster (logarithmic bins)", y_label="clusters")
    return {**charts, **_host_charts(data), **_time_charts(data)}


#: the "how to read this" line of every chart
HOW = {
    "distance-histogram": "each bar counts the URLs judged near duplicates whose SimHash differs from their "
                          "match's in that many bits; bars near k (the threshold) are the borderline calls.",
    "score-histogram": "the word-overlap estimate of each near duplicate and its match; low scores that still "
                       "passed are the ones to check by hand.",
    "cluster-sizes": "a cluster is a group of URLs with the same or nearly the same content; bars count clusters "
                     "per size range, each range twice as wide as the one before. URLs without a duplicate "
                     "(clusters of 1) are left out.",
    "host-duplicates": "the share of a host's URLs whose content another URL already had (exact or near); "
                       "hosts with at least {min} URLs, highest first.",
    "host-wasted": "fetches that brought nothing new: every fetch of a duplicate URL, and re-fetches of a URL "
                   "that found its content unchanged; most first.",
    "host-change-rates": "how often a host's content changes, from its URLs fetched twice or more: changes "
                         "found per URL and per day watched; fastest first. Re-fetch these hosts more often; "
                         "a rate from URLs watched for minutes is a rough one.",
    "duplicates-over-time": "each bar counts the URLs first seen in that time bucket, coloured by their verdict "
                            "now; the legend gives each verdict's total. A one-off import is one tall bar.",
    "drift": "each bar counts re-fetches whose content had changed since the fetch before, by the host of the "
             "URL; a redesign shows as a burst. A re-fetch is a new version of its URL, never a duplicate.",
}


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "", kinds: str = "") -> str:
    """An HTML table; ``kinds`` a letter per column: ``n`` number, ``u`` URL (may wrap
    anywhere), ``d`` date or other unbreakable text, ``k`` a key kept on one line, ``t``
    text (wraps between words); default ``n`` for numbers, ``t`` else."""
    out = [f'<table class="{cls}">' if cls else "<table>",
           "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            kind = kinds[i] if i < len(kinds) else ("n" if isinstance(v, (int, float)) and not isinstance(v, bool)
                                                    else "t")
            if isinstance(v, float):
                text = f"{v:.3f}"
            elif isinstance(v, int) and not isinstance(v, bool):
                text = f"{v:,}"
            else:
                text = "" if v is None else str(v)
            if kind == "a":
                kind = "n" if isinstance(v, (int, float)) and not isinstance(v, bool) else "u"
            body = keep_words(escape(text)) if kind == "t" else escape(text)
            cells.append(f'<td class="{kind}">{body}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out + ["</table>"])


def _thresholds_text(value: Any) -> str:
    if not isinstance(value, dict):
        return "- (the defaults; neardup tune --apply stores tuned ones)"
    top = ", ".join(f"{k}={value.get(k)}" for k in ("method", "k", "verify", "threshold"))
    return f"{top}; {len(value.get('hosts') or {})} host(s) with their own"


def _summary(data: ReportData) -> list[tuple[str, Any]]:
    f, c = data.figures, data.status_counts
    dup = c.get("exact", 0) + c.get("near", 0)
    order = {s: i for i, s in enumerate(STATUSES)}
    return [("URLs", data.pages), *[(f"\u2003{s}", n) for s, n in sorted(c.items(), key=lambda x: order.get(x[0], 99))],
            ("duplicates (exact + near)", f"{dup:,} ({dup / data.pages:.1%})" if data.pages else "0"),
            ("clusters of 2+ URLs", f["duplicate_clusters"]), ("hosts", f["hosts"]),
            ("fetches", f["fetches"]), ("URLs fetched twice or more", f["refetched"]),
            ("URLs whose content changed", f["changed_pages"]), ("changes found", f["changes"]),
            ("fetches wasted (nothing new)", f["wasted"]),
            ("first seen", when(f["first_seen"])), ("latest fetch", when(f["last_fetch"])),
            ("fingerprint spec", data.spec or "-"),
            ("tuned thresholds", _thresholds_text(data.thresholds)),
            ("report computed in", f"{data.seconds:.3f} s")]


DEFINITIONS = (
    "<p class=\"note\"><b>What counts as a duplicate.</b> A URL is an <i>exact</i> duplicate when its "
    "extracted text has the digest of another URL's, a <i>near</i> duplicate when its SimHash is within k bits "
    "of another URL's and their word sketches agree (score &ge; verify). The first URL of a content is "
    "<i>new</i>; <i>empty</i> pages have too little text to judge. A re-fetch of the same URL is a new "
    "<i>version</i> of it (changed or unchanged), never its duplicate. Duplicates are grouped in "
    "<i>clusters</i>, each with one canonical URL.</p>")


def render_html(data: ReportData, title: str = "neardup report") -> str:
    """The report page of :func:`collect`'s figures."""
    charts = _charts(data)
    how = {k: v.replace("{min}", str(data.rate_min_pages)) for k, v in HOW.items()}

    def fig(name: str) -> str:
        return _figure(charts[name], how[name])

    host_rows = [(host_name(h["host"]), h["pages"], h["exact"], h["near"], _pct(h["duplicate_rate"]), h["fetches"],
                  h["wasted"], h["refetched"], h["changed_pages"],
                  rate_text(h["changes_per_day"]))
                 for h in data.hosts_by_pages]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="note">Generated {escape(when(data.generated_at))} UTC by neardup. One file, no script, '
        "no external resource.</p>",
        '<section id="summary"><h2>Summary</h2>', keep_words(DEFINITIONS),
        _table(("figure", "value"), _summary(data), "figures", "ka"), "</section>",
        '<section id="verdicts"><h2>Near duplicates</h2>', fig("distance-histogram"), fig("score-histogram"),
        "</section>",
        '<section id="cluster-sizes"><h2>Clusters</h2>', fig("cluster-sizes"),
        _table(("URLs in the cluster", "clusters"), sorted(data.cluster_sizes.items())[:40]), "</section>",
        '<section id="hosts"><h2>Hosts</h2>', fig("host-duplicates"), fig("host-wasted"),
        _table(("host", "URLs", "exact", "near", "duplicate rate", "fetches", "wasted", "re-fetched", "changed",
                "changes a day"), host_rows, "hosts", "knnnnnnnnn"),
        '<p class="note">The hosts with most URLs.</p>', "</section>",
        '<section id="over-time"><h2>Duplicates over time</h2>', fig("duplicates-over-time"), "</section>",
        '<section id="drift"><h2>Content changes</h2>', fig("drift"), fig("host-change-rates"), "</section>",
        '<section id="templates"><h2>Templates and redesigns</h2>',
        keep_words("<p>Pages of one host are grouped by the structure of their HTML (tag paths, classes). A "
                   "redesign is when the host's new fetches move to another structure for good; content changes "
                   "are counted before and after the last one, so a redesign does not pass for an edit. "
                   "Soft-404s: the host's error or empty template served under many URLs.</p>"),
        _table(("host", "templates", "largest shares", "redesigns", "soft-404s", "changes before",
                "changes after"),
               [(host_name(r["host"]), r["templates"], ", ".join(_pct(x) for x in r["shares"]),
                 ", ".join(when(t) for t in r["redesigns"]) or "none", r["soft_404s"], r["changes_before"],
                 "" if r["changes_after"] is None else r["changes_after"]) for r in data.structure],
               "templates", "knkdnnn") if data.structure else
        '<p class="note">No page with a structure fingerprint (spec version 3) is stored.</p>',
        "</section>",
        f'<section id="clusters"><h2>The {len(data.largest)} largest clusters</h2>',
    ]
    for cl in data.largest:
        parts.append(f'<details open class="cluster" data-cluster="{cl["id"]}"><summary>cluster {cl["id"]}: '
                     f'{cl["size"]:,} URLs; canonical <span class="u">{escape(str(cl["canonical_url"]))}</span>'
                     f"</summary>")
        parts.append(_table(
            ("page", "URL", "verdict", "matched", "distance", "score", "fetched", "title"),
            [(("★ " if m["canonical"] else "") + str(m["id"]), m["url"], m["status"], m["match_url"] or "",
              m["distance"] if m["distance"] is not None else "",
              round(m["score"], 3) if m["score"] is not None else "", when(m["fetched_at"]), m["title"] or "")
             for m in cl["members"]], "members", "kukunndt"))
        if cl["size"] > len(cl["members"]):
            parts.append(f'<p class="note">{cl["size"] - len(cl["members"]):,} more members not listed.</p>')
        parts.append("</details>")
    if not data.largest:
        parts.append('<p class="note">No cluster has two or more URLs.</p>')
    parts += ["</section>", "</body></html>"]
    return "\n".join(parts) + "\n"


def render_report(store: Store, title: str = "neardup report", **options: Any) -> str:
    """The HTML text of the report of ``store`` (options: :func:`collect`'s)."""
    return render_html(collect(store, **options), title)


def write_report(store: Store | str | Path, out: str | Path, title: str | None = None, **options: Any) -> ReportData:
    """Write the report of ``store`` (a store, a file name or a PostgreSQL URL) to ``out``;
    returns the figures (``.summary()`` for a one-line account)."""
    own = not isinstance(store, Store)
    st = open_store(store) if not isinstance(store, Store) else store
    try:
        data = collect(st, **options)
        text = render_html(data, title or f"neardup report: {Path(st.path).name if own else st.path}")
    finally:
        if own:
            st.close()
    Path(out).write_text(text, encoding="utf-8")  # OSError: the CLI's one-line message
    return data

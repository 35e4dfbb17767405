"""``neardup report``: one self-contained HTML file describing a store.

:func:`write_report` reads a store (aggregates in SQL: one ``GROUP BY`` per figure, so a store
of millions of pages is summarised without reading every page into Python) and writes one
HTML file with inline SVG charts (:mod:`neardup.plots`), inline CSS, no script and no
external resource: it opens offline. Sections (each with an ``id`` and the charts'
``data-plot`` names, which the tests look for):

* ``summary``: pages by verdict, clusters, hosts, time range, spec, stored thresholds;
* ``distance-histogram`` / ``score-histogram``: the Hamming distance of every *near* verdict to
  its match, and the sketch Jaccard estimate of up to ``score_sample`` of them;
* ``cluster-sizes``: clusters by size (powers of two);
* ``host-duplicates``: the share of duplicates (exact + near) of the hosts with most pages;
* ``duplicates-over-time``: verdicts per time bucket of the latest fetch;
* ``drift``: per host, re-fetched pages whose content changed, per time bucket of that
  fetch. A store keeps each URL's latest fetch only, so a change is read from the change
  log (a page whose SimHash entry was added more than once); a log pruned past
  ``keep_changes`` entries forgets older changes, and a change to a SimHash value another
  page already holds is not logged: the figure is a lower bound;
* ``clusters``: the largest clusters, their canonical page and each member with how it
  joined (verdict, the page it matched, distance, sketch score).

>>> from neardup import Detector
>>> det = Detector()
>>> html = render_report(det.store)
>>> html.startswith("<!DOCTYPE html>") and 'data-plot="cluster-sizes"' in html
True
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from neardup.errors import NeardupError
from neardup.plots import bar_chart, empty_chart, line_chart
from neardup.sketch import similarity
from neardup.storeapi import Store

#: hosts shown in the per-host charts
TOP_HOSTS = 20
#: clusters listed with their members
TOP_CLUSTERS = 20
#: members listed per cluster
MEMBERS_PER_CLUSTER = 50
#: near verdicts whose sketch score is computed for the score histogram
SCORE_SAMPLE = 20000
#: hosts drawn in the drift chart
DRIFT_HOSTS = 6

_BUCKETS = ((3 * 86400, 3600, "hour"), (180 * 86400, 86400, "day"), (4 * 365 * 86400, 7 * 86400, "week"))
_MONTH = 30 * 86400

CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right}
.figures td{font-size:14px}.note{color:#555;font-size:13px}
.charts{display:flex;flex-wrap:wrap;gap:16px}
svg.plot{background:#fff;border:1px solid #eee}
details{margin:6px 0}summary{cursor:pointer}
.url{word-break:break-all}
"""


class ReportError(NeardupError):
    """The store cannot be reported on (not an SQL store, unreadable)."""


def open_store(target: str | Path, timeout: float = 10.0) -> Store:
    """The store at ``target`` (an SQLite file, or a ``postgresql://`` URL), read as it is
    (never created)."""
    text = str(target)
    if text.startswith(("postgresql://", "postgres://")):
        from neardup.postgres import PostgresStore
        return PostgresStore(text, timeout=timeout, create=False)
    from neardup.store import SQLiteStore
    return SQLiteStore(text, timeout=timeout, create=False)


@dataclass
class ReportData:
    """Every figure of the report, aggregated (also returned to callers, e.g. for JSON)."""

    generated_at: float
    status_counts: dict[str, int]
    clusters: int
    duplicate_clusters: int
    hosts: int
    first_fetch: float | None
    last_fetch: float | None
    spec: str | None
    thresholds: Any
    distance_hist: dict[int, int]
    score_hist: list[int]
    scores_sampled: int
    cluster_sizes: dict[int, int]
    host_rows: list[tuple[str, int, int, int]]  # host, pages, exact, near
    bucket_seconds: int
    bucket_name: str
    origin: float
    over_time: dict[int, dict[str, int]]
    drift: dict[str, dict[int, int]]
    refetched: dict[str, int]
    changed: dict[str, int]
    largest: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def pages(self) -> int:
        return sum(self.status_counts.values())

    def summary(self) -> dict[str, Any]:
        return {"pages": self.pages, **{s: n for s, n in sorted(self.status_counts.items())},
                "clusters": self.clusters, "duplicate_clusters": self.duplicate_clusters, "hosts": self.hosts,
                "changed_pages": sum(self.changed.values()), "seconds": round(self.seconds, 3)}


def _rows(store: Store, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    exec_ = getattr(store, "_exec", None)
    if exec_ is None:
        raise ReportError(f"the report needs an SQL store (SQLite or PostgreSQL), not {type(store).__name__}")
    return list(exec_(sql, params).fetchall())


def _bucket(first: float | None, last: float | None) -> tuple[int, str]:
    span = (last or 0.0) - (first or 0.0)
    for limit, seconds, name in _BUCKETS:
        if span <= limit:
            return seconds, name
    return _MONTH, "month"


def _score(a: Any, b: Any) -> float | None:
    if a is None or b is None or len(a) != len(b):
        return None
    return similarity(bytes(a), bytes(b)).jaccard


def collect(store: Store, *, top_hosts: int = TOP_HOSTS, top_clusters: int = TOP_CLUSTERS,
            members_per_cluster: int = MEMBERS_PER_CLUSTER, score_sample: int = SCORE_SAMPLE) -> ReportData:
    """Aggregate the store's figures (module docs)."""
    started = time.perf_counter()
    with store.snapshot():
        counts = {str(s): int(n) for s, n in _rows(store, "SELECT status, count(*) FROM pages GROUP BY status")}
        n_clusters, n_dup = _rows(store, "SELECT count(*), coalesce(sum(CASE WHEN size >= 2 THEN 1 ELSE 0 END), 0) "
                                         "FROM clusters")[0]
        n_hosts = _rows(store, "SELECT count(DISTINCT host) FROM pages")[0][0]
        first, last = _rows(store, "SELECT min(fetched_at), max(fetched_at) FROM pages")[0]
        distance_hist = {int(d): int(n) for d, n in _rows(
            store, "SELECT distance, count(*) FROM pages WHERE status = 'near' AND distance IS NOT NULL "
                   "GROUP BY distance ORDER BY distance")}
        score_hist = [0] * 20
        sampled = 0
        for sa, sb in _rows(store, "SELECT p.sketch, m.sketch FROM pages p JOIN pages m ON m.id = p.matched_id "
                                   "WHERE p.status = 'near' ORDER BY p.id LIMIT ?", (int(score_sample),)):
            s = _score(sa, sb)
            if s is not None:
                score_hist[min(19, max(0, int(s * 20)))] += 1
                sampled += 1
        sizes = {int(s): int(n) for s, n in _rows(store, "SELECT size, count(*) FROM clusters GROUP BY size")}
        host_rows = [(str(h), int(n), int(e), int(nn)) for h, n, e, nn in _rows(
            store, "SELECT host, count(*), sum(CASE WHEN status = 'exact' THEN 1 ELSE 0 END), "
                   "sum(CASE WHEN status = 'near' THEN 1 ELSE 0 END) FROM pages GROUP BY host "
                   "ORDER BY count(*) DESC, host LIMIT ?", (int(top_hosts),))]
        bucket, bucket_name = _bucket(first, last)
        origin = float(first or 0.0)
        origin -= origin % bucket  # aligned buckets (UTC)
        over_time: dict[int, dict[str, int]] = defaultdict(dict)
        for b, status, n in _rows(store, "SELECT CAST((fetched_at - ?) / ? AS BIGINT) AS b, status, count(*) "
                                         "FROM pages GROUP BY b, status ORDER BY b", (origin, bucket)):
            over_time[int(b)][str(status)] = int(n)
        refetched = {str(h): int(n) for h, n in _rows(
            store, "SELECT host, count(*) FROM pages WHERE fetched_at > first_seen GROUP BY host")}
        drift: dict[str, dict[int, int]] = defaultdict(dict)
        changed: dict[str, int] = defaultdict(int)
        for h, b, n in _rows(store, "SELECT p.host, CAST((p.fetched_at - ?) / ? AS BIGINT) AS b, count(*) FROM pages p "
                                    "JOIN (SELECT page_id FROM changes WHERE op = 'add' GROUP BY page_id "
                                    "HAVING count(*) >= 2) c ON c.page_id = p.id "
                                    "WHERE p.fetched_at > p.first_seen GROUP BY p.host, b", (origin, bucket)):
            drift[str(h)][int(b)] = int(n)
            changed[str(h)] += int(n)
        largest = []
        for cid, canonical_id, size in _rows(store, "SELECT id, canonical_id, size FROM clusters WHERE size >= 2 "
                                                    "ORDER BY size DESC, id LIMIT ?", (int(top_clusters),)):
            members = _rows(store, "SELECT id, url, status, matched_id, distance, fetched_at, sketch, title "
                                   "FROM pages WHERE cluster_id = ? ORDER BY id LIMIT ?",
                            (int(cid), int(members_per_cluster)))
            matched_ids = sorted({int(m[3]) for m in members if m[3] is not None})
            matched: dict[int, tuple[str, Any]] = {}
            if matched_ids:
                marks = ", ".join("?" for _ in matched_ids)
                matched = {int(i): (str(u), s) for i, u, s in _rows(
                    store, f"SELECT id, url, sketch FROM pages WHERE id IN ({marks})", matched_ids)}
            canon = _rows(store, "SELECT url, title FROM pages WHERE id = ?", (canonical_id,)) \
                if canonical_id is not None else []
            rows = []
            for pid, url, status, mid, dist, fetched, sketch, title in members:
                m_url, m_sketch = matched.get(int(mid), (None, None)) if mid is not None else (None, None)
                rows.append({"id": int(pid), "url": str(url), "status": str(status), "match_id": mid,
                             "match_url": m_url, "distance": dist, "fetched_at": fetched, "title": title,
                             "score": 1.0 if status == "exact" else _score(sketch, m_sketch),
                             "canonical": pid == canonical_id})
            largest.append({"id": int(cid), "size": int(size), "canonical_id": canonical_id,
                            "canonical_url": canon[0][0] if canon else None,
                            "canonical_title": canon[0][1] if canon else None, "members": rows})
    return ReportData(
        generated_at=time.time(), status_counts=counts, clusters=int(n_clusters), duplicate_clusters=int(n_dup),
        hosts=int(n_hosts), first_fetch=first, last_fetch=last, spec=store.get_meta("spec"),
        thresholds=store.get_meta("thresholds"), distance_hist=distance_hist, score_hist=score_hist,
        scores_sampled=sampled, cluster_sizes=sizes, host_rows=host_rows, bucket_seconds=bucket,
        bucket_name=bucket_name, origin=origin, over_time=dict(over_time), drift=dict(drift), refetched=refetched,
        changed=dict(changed), largest=largest, seconds=time.perf_counter() - started)


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return _dt.datetime.fromtimestamp(float(ts), _dt.UTC).strftime("%Y-%m-%d %H:%M")


def _bucket_label(data: ReportData, b: int) -> str:
    ts = data.origin + b * data.bucket_seconds
    fmt = "%Y-%m-%d %Hh" if data.bucket_name == "hour" else "%Y-%m-%d" if data.bucket_name in ("day", "week") \
        else "%Y-%m"
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime(fmt)


def _size_buckets(sizes: dict[int, int]) -> list[tuple[str, float]]:
    if not sizes:
        return []
    top = max(sizes)
    out = []
    lo = 1
    while lo <= top:
        hi = lo * 2 - 1 if lo > 1 else 1
        n = sum(c for s, c in sizes.items() if lo <= s <= hi)
        out.append((str(lo) if lo == hi else f"{lo}-{hi}", float(n)))
        lo = hi + 1
    return out


def _time_ticks(data: ReportData, buckets: Sequence[int]) -> list[tuple[float, str]]:
    if not buckets:
        return []
    lo, hi = min(buckets), max(buckets)
    step = max(1, math.ceil((hi - lo + 1) / 6))
    return [(float(b), _bucket_label(data, b)) for b in range(lo, hi + 1, step)]


def _filled(buckets: list[int], limit: int = 400) -> list[int]:
    """Every bucket between the first and the last (empty ones count 0), when not too many."""
    if buckets and buckets[-1] - buckets[0] < limit:
        return list(range(buckets[0], buckets[-1] + 1))
    return buckets


def _charts(data: ReportData) -> dict[str, str]:
    charts: dict[str, str] = {}
    dh = data.distance_hist
    top_d = max(dh) if dh else 0
    charts["distance-histogram"] = bar_chart(
        "distance-histogram", [(str(d), float(dh.get(d, 0))) for d in range(top_d + 1)] if dh else [],
        title="Near verdicts by Hamming distance to their match", x_label="distance (bits)", y_label="pages")
    charts["score-histogram"] = bar_chart(
        "score-histogram", [(f"{i / 20:.2f}", float(n)) for i, n in enumerate(data.score_hist)] if data.scores_sampled
        else [], title=f"Near verdicts by sketch Jaccard score ({data.scores_sampled:,} sampled)",
        x_label="estimated word 3-shingle Jaccard (bin start)", y_label="pages")
    charts["cluster-sizes"] = bar_chart("cluster-sizes", _size_buckets(data.cluster_sizes),
                                        title="Clusters by size", x_label="pages in the cluster", y_label="clusters")
    charts["host-duplicates"] = bar_chart(
        "host-duplicates", [(h, (e + n) / p if p else 0.0) for h, p, e, n in data.host_rows],
        title=f"Duplicate share of the {len(data.host_rows)} hosts with most pages", y_label="exact + near",
        y_fmt="%", y_max=1.0, rotate_labels=True)
    buckets = _filled(sorted(data.over_time))
    series = []
    for status in ("new", "exact", "near", "empty", "partial"):
        pts = [(float(b), float(data.over_time.get(b, {}).get(status, 0))) for b in buckets]
        if any(y for _, y in pts):
            series.append((status, pts))
    charts["duplicates-over-time"] = line_chart(
        "duplicates-over-time", series, title=f"Verdicts per {data.bucket_name} (latest fetch)",
        x_label=f"{data.bucket_name} (UTC)", y_label="pages", x_ticks=_time_ticks(data, buckets))
    hosts = sorted(data.changed, key=lambda h: (-data.changed[h], h))[:DRIFT_HOSTS]
    drift_buckets = _filled(sorted({b for h in hosts for b in data.drift[h]}))
    dseries = [(f"{h} ({data.changed[h]})", [(float(b), float(data.drift[h].get(b, 0))) for b in drift_buckets])
               for h in hosts]
    if dseries:
        charts["drift"] = line_chart(
            "drift", dseries, title=f"Re-fetched pages whose content changed, per host and {data.bucket_name}",
            x_label=f"{data.bucket_name} of the changed fetch (UTC)", y_label="pages",
            x_ticks=_time_ticks(data, drift_buckets))
    else:
        charts["drift"] = empty_chart("drift", "Re-fetched pages whose content changed",
                                      "no re-fetched page changed content (or the change log was pruned)")
    return charts


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    out = [f'<table class="{cls}">' if cls else "<table>",
           "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for v in row:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                cells.append(f'<td class="n">{escape(f"{v:,}" if isinstance(v, int) else f"{v:.3f}")}</td>')
            else:
                cells.append(f'<td class="url">{escape("" if v is None else str(v))}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out + ["</table>"])


def _thresholds_text(value: Any) -> str:
    if not isinstance(value, dict):
        return "-"
    top = ", ".join(f"{k}={value.get(k)}" for k in ("method", "k", "verify", "threshold"))
    return f"{top}; {len(value.get('hosts') or {})} host(s) with their own"


def render_html(data: ReportData, title: str = "neardup report") -> str:
    """The report page of :func:`collect`'s figures."""
    charts = _charts(data)
    c = data.status_counts
    dup = c.get("exact", 0) + c.get("near", 0)
    figures = [("pages", data.pages), *[(f"  {s}", n) for s, n in sorted(c.items())],
               ("duplicates (exact + near)", f"{dup:,} ({dup / data.pages:.1%})" if data.pages else "0"),
               ("clusters", data.clusters), ("clusters with 2+ pages", data.duplicate_clusters),
               ("hosts", data.hosts), ("first fetch", _when(data.first_fetch)),
               ("latest fetch", _when(data.last_fetch)), ("re-fetched pages", sum(data.refetched.values())),
               ("re-fetched with changed content", sum(data.changed.values())),
               ("fingerprint spec", data.spec or "-"),
               ("tuned thresholds (meta 'thresholds')", _thresholds_text(data.thresholds)),
               ("report computed in", f"{data.seconds:.2f} s")]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="note">Generated {escape(_when(data.generated_at))} UTC by neardup. One file, no script, '
        "no external resource.</p>",
        '<section id="summary"><h2>Summary</h2>', _table(("figure", "value"), figures, "figures"), "</section>",
        '<section id="verdicts"><h2>Near verdicts</h2><div class="charts">',
        charts["distance-histogram"], charts["score-histogram"], "</div>",
        '<p class="note">Distance: bits between the page\'s SimHash and its match\'s (a near verdict needs '
        "distance &lt;= k and a sketch score &gt;= verify).</p></section>",
        '<section id="cluster-sizes"><h2>Clusters</h2>', charts["cluster-sizes"],
        _table(("size", "clusters"), sorted(data.cluster_sizes.items())[:40]), "</section>",
        '<section id="hosts"><h2>Duplicates per host</h2>', charts["host-duplicates"],
        _table(("host", "pages", "exact", "near", "duplicate share"),
               [(h, p, e, n, f"{(e + n) / p:.1%}" if p else "-") for h, p, e, n in data.host_rows]), "</section>",
        '<section id="over-time"><h2>Duplicates over time</h2>', charts["duplicates-over-time"], "</section>",
        '<section id="drift"><h2>Content drift per host</h2>', charts["drift"],
        '<p class="note">A re-fetch whose content changed (a redesign shows as a burst), read from the change log: '
        "a lower bound when the log was pruned.</p>",
        _table(("host", "re-fetched pages", "changed content"),
               [(h, data.refetched.get(h, 0), n) for h, n in sorted(data.changed.items(), key=lambda x: (-x[1], x[0]))
                [:TOP_HOSTS]]),
        "</section>",
        f'<section id="clusters"><h2>The {len(data.largest)} largest clusters</h2>',
    ]
    for cl in data.largest:
        parts.append(f'<details open class="cluster" data-cluster="{cl["id"]}"><summary>cluster {cl["id"]}: '
                     f'{cl["size"]:,} pages; canonical <span class="url">{escape(str(cl["canonical_url"]))}</span>'
                     f"</summary>")
        parts.append(_table(
            ("page", "url", "verdict", "matched", "distance", "score", "fetched", "title"),
            [(("★ " if m["canonical"] else "") + str(m["id"]), m["url"], m["status"], m["match_url"] or "",
              m["distance"] if m["distance"] is not None else "",
              round(m["score"], 3) if m["score"] is not None else "", _when(m["fetched_at"]), m["title"] or "")
             for m in cl["members"]], "members"))
        if cl["size"] > len(cl["members"]):
            parts.append(f'<p class="note">{cl["size"] - len(cl["members"]):,} more members not listed.</p>')
        parts.append("</details>")
    if not data.largest:
        parts.append('<p class="note">No cluster has two or more pages.</p>')
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

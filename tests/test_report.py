"""neardup.report: the self-contained HTML report of a store (parsed here; its layout is
checked in headless Chromium by tests/test_report_layout.py), and the store aggregates it
reads, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import gzip
import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from checks import STORE_KINDS, present, store_target
from click.testing import CliRunner
from report_store import build_report_store

from neardup import Detector
from neardup.cli.tools import report_cmd
from neardup.report import html_report as report

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample"
DRAGNET = Path(os.environ.get("NEARDUP_CORPUS", ROOT.parent / "shared" / "corpus")) / "dragnet"
PLOTS = ("distance-histogram", "score-histogram", "cluster-sizes", "host-duplicates", "host-wasted",
         "host-change-rates", "duplicates-over-time", "drift")


class Parsed(HTMLParser):
    """Tags, attributes and text of the report."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def plots(self) -> set[str]:
        return {present(a["data-plot"]) for t, a in self.tags if t == "svg" and a.get("data-plot")}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """The bundled sample in capture order (recaptures of one URL: content drift) and up to
    40 real corpus pages (dragnet) fetched 20 days apart."""
    path = tmp_path_factory.mktemp("report") / "store.db"
    build_report_store(path)
    return path


@pytest.fixture(scope="module")
def written(store_path, tmp_path_factory) -> tuple[Path, report.ReportData]:
    out = tmp_path_factory.mktemp("html") / "report.html"
    data = report.write_report(store_path, out, top_clusters=1000)
    return out, data


def test_report_has_every_plot_and_cluster(store_path, written):
    out, data = written
    text = out.read_text(encoding="utf-8")
    parsed = Parsed(text)
    assert parsed.plots() >= set(PLOTS)
    det = Detector.open(store_path)
    try:
        pages = list(det.store.iter_pages())
        clusters = {cid for cid in det.store.cluster_ids() if present(det.store.cluster_row(cid)).size >= 2}
        shown = {int(present(a["data-cluster"])) for t, a in parsed.tags if t == "details" and a.get("data-cluster")}
        assert shown == clusters and clusters
        body = "".join(parsed.text)
        for cid in clusters:
            info = present(det.cluster_info(cid))
            assert info["canonical_url"] in body
            for m in det.cluster(cid):
                assert m.url in body
    finally:
        det.close()
    assert data.pages == len(pages)
    assert sum(data.distance_hist.values()) == sum(p.status == "near" for p in pages)
    assert data.scores_sampled == sum(p.status == "near" for p in pages)
    # the sample's recaptures of one URL across redesigns changed content: drift is seen
    assert data.figures["changed_pages"] >= 1 and "www.nytimes.com" in data.drift
    assert sum(sum(v.values()) for v in data.drift.values()) == data.figures["changes"] >= 3
    # every URL is counted once over time; every chart says how to read it
    assert sum(sum(v.values()) for v in data.over_time.values()) == data.pages
    assert text.count('class="how"') == len(PLOTS)


def test_report_is_self_contained(written):
    out, _ = written
    text = out.read_text(encoding="utf-8")
    parsed = Parsed(text)
    tags = {t for t, _ in parsed.tags}
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    for _, attrs in parsed.tags:
        for name in ("src", "href"):
            assert not (attrs.get(name) or "").startswith(("http:", "https:", "//")), attrs


def test_report_of_an_empty_store(tmp_path):
    Detector.open(tmp_path / "e.db").close()
    data = report.write_report(tmp_path / "e.db", tmp_path / "e.html")
    parsed = Parsed((tmp_path / "e.html").read_text())
    assert data.pages == 0 and parsed.plots() >= set(PLOTS)


def test_cli_report(store_path, tmp_path):
    runner = CliRunner()
    r = runner.invoke(report_cmd, ["--db", str(store_path), "--out", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["report"].endswith("r.html") and summary["pages"] > 0
    r = runner.invoke(report_cmd, ["--db", str(tmp_path / "missing.db"), "--out", str(tmp_path / "x.html")])
    assert r.exit_code == 3 and "does not exist" in r.output and not (tmp_path / "missing.db").exists()
    r = runner.invoke(report_cmd, ["--db", str(store_path), "--out", str(tmp_path / "no" / "x.html")])
    assert r.exit_code == 1 and r.output.startswith("neardup: error:")


def test_report_names_pages_without_a_host(tmp_path):
    det = Detector.open(tmp_path / "f.db")
    words = " ".join(f"w{i}" for i in range(300))
    det.add("file:///data/a.html", f"<html><body><p>{words}</p></body></html>", fetched_at=1_700_000_000)
    det.add("file:///data/b.html", f"<html><body><p>{words}</p></body></html>", fetched_at=1_700_000_060)
    det.close()
    report.write_report(tmp_path / "f.db", tmp_path / "f.html")
    text = (tmp_path / "f.html").read_text()
    assert report.NO_HOST in text and "<td class=\"k\"></td>" not in text


@pytest.mark.parametrize("span, name", [(30, "minute"), (3 * 3600, "5 minutes"), (40 * 3600, "hour"),
                                        (10 * 86400, "6 hours"), (40 * 86400, "day"), (300 * 86400, "week"),
                                        (3 * 365 * 86400, "30 days"), (20 * 365 * 86400, "year")])
def test_time_axis_fits_the_span(span, name):
    start = 1_700_000_123.0
    axis = report.time_axis(start, start + span)
    assert axis.name == name and 1 <= axis.buckets <= report.MAX_BUCKETS
    assert axis.origin <= start < axis.start(1) and axis.start(axis.buckets) > start + span
    labels = [axis.label(b) for b in range(axis.buckets)]
    assert len(set(labels)) == len(labels)  # no two buckets read the same


def test_size_bins_are_logarithmic():
    bins = report.size_bins({1: 100, 2: 7, 3: 2, 4: 1, 9: 1, 40: 1})
    assert [b[0] for b in bins] == ["2", "3-4", "5-8", "9-16", "17-32", "33-64"]
    assert [b[1] for b in bins] == [7, 3, 0, 1, 0, 1] and bins[1][2] == 10


@pytest.fixture(params=STORE_KINDS)
def target(request, tmp_path) -> str:
    """Where a store lives: an SQLite file, or a fresh PostgreSQL database."""
    return store_target(request, tmp_path)

def test_report_aggregates_agree_with_the_detector(target):
    """The store's report aggregates (SQL, both dialects) against Detector.hosts() and the
    pages read one by one."""
    rows = sorted(csv.DictReader((SAMPLE / "urls.tsv").open(encoding="utf-8"), delimiter="\t"),
                  key=lambda r: (r["captured"], r["file"]))
    with Detector.open(target) as det:
        for i, r in enumerate(rows):
            det.add(r["url"], gzip.decompress((SAMPLE / r["file"]).read_bytes()), fetched_at=1_600_000_000 + i * 3600)
        for i, r in enumerate(rows[:4]):  # re-fetches, unchanged
            det.add(r["url"], gzip.decompress((SAMPLE / r["file"]).read_bytes()), fetched_at=1_700_000_000 + i)
        store = det.store
        pages = list(store.iter_pages())
        figures = store.report_figures()
        assert figures["pages"] == len(pages) and figures["hosts"] == len({p.host for p in pages})
        assert figures["fetches"] == sum(p.fetches for p in pages)
        assert figures["refetched"] == sum(p.fetches > 1 for p in pages)
        assert figures["changed_pages"] == sum(p.change_count > 0 for p in pages) >= 1
        assert figures["first_seen"] == min(p.first_seen for p in pages)
        assert figures["duplicate_clusters"] == sum(present(store.cluster_row(c)).size >= 2
                                                    for c in store.cluster_ids())
        hosts = {h["host"]: h for h in det.hosts()}
        for order in ("pages", "duplicate_rate", "wasted", "changes_per_day"):
            got = store.host_rankings(order, limit=100)
            keys = [h[order] if h[order] is not None else -1 for h in got]
            assert keys == sorted(keys, reverse=True), order
            for h in got:
                ref = hosts[h["host"]]
                assert (h["pages"], h["exact"], h["near"], h["refetched"], h["changed_pages"]) == \
                    (ref["pages"], ref["exact"], ref["near"], ref["refetched"], ref["changed_pages"])
                assert h["duplicate_rate"] == pytest.approx(ref["duplicate_rate"], abs=1e-4)
                if ref["changes_per_day"] is None:
                    assert h["changes_per_day"] is None
                else:
                    assert h["changes_per_day"] == pytest.approx(ref["changes_per_day"], rel=1e-3, abs=1e-4)
        assert len(store.host_rankings("pages", limit=100)) == len(hosts)
        assert all(h["pages"] >= 3 for h in store.host_rankings("duplicate_rate", 100, min_pages=3))
        with pytest.raises(ValueError):
            store.host_rankings("nonsense")
        bucket = 86400
        origin = figures["first_seen"] - figures["first_seen"] % bucket
        over = store.statuses_over_time(origin, bucket)
        assert sum(n for _, _, n in over) == len(pages) and min(b for b, _, _ in over) == 0
        changes = store.changes_over_time(origin, bucket)
        assert sum(n for _, _, n in changes) == figures["changes"] == sum(p.change_count for p in pages)
        assert store.changes_over_time(origin, bucket, hosts=[]) == []
        assert store.distance_counts() == {d: sum(p.distance == d for p in pages if p.status == "near")
                                           for d in {p.distance for p in pages if p.status == "near"}}
        assert len(store.near_sketches(1000)) == sum(p.status == "near" for p in pages)
        sizes = store.cluster_size_counts()
        assert sum(sizes.values()) == store.cluster_count()
        largest = store.largest_clusters(3, 2)
        assert [c["size"] for c in largest] == sorted((c["size"] for c in largest), reverse=True)
        for c in largest:
            assert c["size"] == present(store.cluster_row(c["id"])).size >= 2 and len(c["members"]) <= 2
            assert c["canonical_url"] == present(store.page_by_id(c["canonical_id"])).url

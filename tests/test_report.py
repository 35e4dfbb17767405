"""neardup.report: the self-contained HTML report of a store (parsed, and rendered in
headless Chromium where it is installed)."""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import Detector, report
from neardup.cli_tools import report_cmd

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample"
DRAGNET = ROOT.parent / "shared" / "corpus" / "dragnet"
PLOTS = ("distance-histogram", "score-histogram", "cluster-sizes", "host-duplicates", "duplicates-over-time", "drift")


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
        return {a["data-plot"] for t, a in self.tags if t == "svg" and a.get("data-plot")}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """The bundled sample in capture order (recaptures of one URL: content drift) and up to
    40 real corpus pages (dragnet) fetched 20 days apart."""
    path = tmp_path_factory.mktemp("report") / "store.db"
    det = Detector.open(path)
    rows = sorted(csv.DictReader((SAMPLE / "urls.tsv").open(encoding="utf-8"), delimiter="\t"),
                  key=lambda r: (r["captured"], r["file"]))
    for r in rows:
        when = dt.datetime.fromisoformat(r["captured"]).replace(tzinfo=dt.UTC).timestamp()
        det.add(r["url"], gzip.decompress((SAMPLE / r["file"]).read_bytes()), fetched_at=when)
    if (DRAGNET / "manifest.tsv").is_file():
        manifest = [r for r in csv.DictReader((DRAGNET / "manifest.tsv").open(encoding="utf-8"), delimiter="\t")
                    if r["url_from_html"].startswith("http")][:40]
        for i, r in enumerate(manifest):
            det.add(r["url_from_html"], gzip.decompress((DRAGNET / r["file"]).read_bytes()),
                    fetched_at=1600000000 + i * 20 * 86400)
    det.close()
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
        clusters = {cid for cid in det.store.cluster_ids() if det.store.cluster_row(cid).size >= 2}
        shown = {int(a["data-cluster"]) for t, a in parsed.tags if t == "details" and a.get("data-cluster")}
        assert shown == clusters and clusters
        body = "".join(parsed.text)
        for cid in clusters:
            info = det.cluster_info(cid)
            assert info["canonical_url"] in body
            for m in det.cluster(cid):
                assert m.url in body
    finally:
        det.close()
    assert data.pages == len(pages)
    assert sum(data.distance_hist.values()) == sum(p.status == "near" for p in pages)
    assert data.scores_sampled == sum(p.status == "near" for p in pages)
    # the sample's recaptures of one URL across redesigns changed content: drift is seen
    assert sum(data.changed.values()) >= 3 and "www.nytimes.com" in data.changed


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


def _chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None and os.environ.get("NEARDUP_REQUIRE_CHROMIUM") == "1":
        pytest.fail("NEARDUP_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)")
    return found


def test_report_renders_in_headless_chromium(written, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium; NEARDUP_REQUIRE_CHROMIUM=1 requires it)")
    out, data = written
    base = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
            "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", out.resolve().as_uri()], capture_output=True, text=True,
                         timeout=180, check=True).stdout
    rendered = Parsed(dom)
    assert rendered.plots() >= set(PLOTS)
    tables = [t for t, _ in rendered.tags if t == "table"]
    assert len(tables) >= 4 + len(data.largest)
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1200,2400", out.resolve().as_uri()],
                   capture_output=True, timeout=180, check=True)
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20000  # a page with charts, not a blank one

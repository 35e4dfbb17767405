"""The report and the tuning plot as a person sees them: rendered by headless Chromium
(Selenium driving Debian's chromium with chromium-driver's chromedriver; tests/browser.py),
checked for text that leaves its chart or overlaps other text, words and dates broken
across lines, legend entries without their value; a screenshot of every chart is kept
(``$NEARDUP_ARTIFACTS``, else the test's tmp_path). Skipped without Chromium unless
NEARDUP_REQUIRE_CHROMIUM=1."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from browser import LAYOUT_JS, artifacts, full_page, open_browser
from report_store import build_report_store

from neardup import Detector
from neardup.report import html_report as report
from neardup.report.plots import bar_chart, document, hbar_chart, line_chart, stacked_bars
from neardup.tune import sweep as tune
from neardup.tune import view as tune_view

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample"
DRAGNET = Path(os.environ.get("NEARDUP_CORPUS", ROOT.parent / "shared" / "corpus")) / "dragnet"
WORDS = [f"w{i}" for i in range(3000)]


@pytest.fixture(scope="module")
def driver():
    d = open_browser()
    yield d
    d.quit()


def _text(seed: int, n: int = 200) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _store(path: Path, start: float, span: float, n: int = 24) -> Path:
    """A store whose fetches spread over ``span`` seconds: pages of three hosts and of
    file:// URLs, some duplicates, some re-fetched with changed content."""
    with Detector.open(path) as det:
        for i in range(n):
            host = ("news.example", "blog.example.org", "a-very-long-host-name.subdomain.example.com", "")[i % 4]
            url = f"https://{host}/story/{i}" if host else f"file:///data/page-{i}.html"
            det.add(url, f"<html><body><p>{_text(i // 2 if i % 3 == 0 else 100 + i)}</p></body></html>",
                    fetched_at=start + span * i / (2 * n))
        for i in range(0, n, 3):
            host = ("news.example", "blog.example.org", "a-very-long-host-name.subdomain.example.com", "")[i % 4]
            url = f"https://{host}/story/{i}" if host else f"file:///data/page-{i}.html"
            det.add(url, f"<html><body><p>{_text(500 + i)}</p></body></html>",
                    fetched_at=start + span * (0.5 + i / n / 2))
    return path


def _problems(driver, url: str) -> list[str]:
    driver.set_window_size(1200, 900)
    driver.get(url)
    return list(driver.execute_script(LAYOUT_JS))


def _shoot_charts(driver, folder: Path, prefix: str) -> list[Path]:
    shots = []
    for svg in driver.find_elements("css selector", "svg.plot"):
        path = folder / f"{prefix}{svg.get_attribute('data-plot')}.png"
        svg.screenshot(str(path))
        shots.append(path)
    return shots


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory) -> Path:
    """The bundled sample in capture order (years apart: recaptures of one URL) and up to 40
    corpus pages, 20 days apart."""
    folder = tmp_path_factory.mktemp("layout")
    build_report_store(folder / "store.db")
    out = folder / "report.html"
    report.write_report(folder / "store.db", out, top_clusters=1000)
    return out


def test_the_report_reads_cleanly(driver, sample_report, tmp_path):
    assert _problems(driver, sample_report.resolve().as_uri()) == []
    folder = artifacts(tmp_path)
    shots = _shoot_charts(driver, folder, "sample-")
    assert {p.stem.removeprefix("sample-") for p in shots} >= {
        "distance-histogram", "score-histogram", "cluster-sizes", "host-duplicates", "host-wasted",
        "host-change-rates", "duplicates-over-time", "drift"}
    assert all(p.read_bytes().startswith(b"\x89PNG") and p.stat().st_size > 3000 for p in shots)
    full_page(driver, folder / "sample-report.png")
    # every chart is drawn (not a placeholder) and says how to read it
    drawn = driver.execute_script("return [...document.querySelectorAll('figure')].map(f => "
                                  "[f.querySelector('svg').dataset.plot, f.querySelectorAll('rect.bar').length, "
                                  "f.querySelector('p.how') !== null])")
    assert all(how for _, _, how in drawn) and len(drawn) == 8
    assert all(bars > 0 for name, bars, _ in drawn if name != "host-duplicates"), drawn


@pytest.mark.parametrize("span", [90, 5 * 3600, 9 * 86400, 200 * 86400, 6 * 365 * 86400])
def test_reports_of_every_time_span_read_cleanly(driver, tmp_path, span):
    store = _store(tmp_path / "s.db", 1_700_000_000.0, span)
    out = tmp_path / "r.html"
    data = report.write_report(store, out)
    assert 1 <= data.axis.buckets <= report.MAX_BUCKETS
    assert _problems(driver, out.resolve().as_uri()) == []
    shots = _shoot_charts(driver, artifacts(tmp_path), f"span-{span}-")
    assert len(shots) == 8
    text = out.read_text()
    assert report.NO_HOST in text  # the file:// pages, named


def _page(tmp_path: Path, svg: str, name: str) -> str:
    path = tmp_path / f"{name}.html"
    path.write_text(f"<!DOCTYPE html><html><body style='margin:8px'>{svg}</body></html>", encoding="utf-8")
    return path.resolve().as_uri()


def _pairs(path: Path, n_same: int, n_diff: int) -> Path:
    rows = []
    for i in range(n_same):
        base = _text(i, 300)
        words = base.split()
        rng = random.Random(100 + i)
        for _ in range(3 + 3 * i % 60):
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        rows.append(f"text:{base}\ttext:{' '.join(words)}\tsame")
    for i in range(n_diff):
        rows.append(f"text:{_text(1000 + i, 300)}\ttext:{_text(2000 + i, 300)}\tdifferent")
    path.write_text("a\tb\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("n_same, n_diff", [(16, 16), (40, 40)])
def test_the_tuning_plot_reads_cleanly(driver, tmp_path, n_same, n_diff):
    result = tune.tune(_pairs(tmp_path / "pairs.tsv", n_same, n_diff), bands=False)  # a curve over k
    svg = tune_view.pr_curve_svg(result)
    assert _problems(driver, _page(tmp_path, svg, "pr")) == []
    legend = driver.execute_script("return [...document.querySelectorAll('g.legend-entry')]"
                                   ".map(g => g.textContent.trim())")
    assert any(t.startswith("recommended: k=") and "CI" in t for t in legend), legend
    assert any("verify: 0.3" in t for t in legend)
    labels = driver.execute_script("return [...document.querySelectorAll('text.point-label, text.mark-label')]"
                                   ".map(t => t.textContent)")
    assert any(t.startswith("k=") for t in labels) and any(t.startswith("recommended") for t in labels)
    warned = driver.execute_script("return [...document.querySelectorAll('text.note')].map(t => t.textContent)")
    assert bool(warned) == (n_same < 30)
    driver.find_element("css selector", "svg").screenshot(str(artifacts(tmp_path) / f"pr-{n_same}-{n_diff}.png"))


def test_charts_of_awkward_data_read_cleanly(driver, tmp_path):
    """Long labels, many bars, a single bar, huge numbers, many series."""
    many = [(f"2026-11-{i % 30 + 1:02d}", float(i * 37 % 11)) for i in range(48)]
    svgs = [
        bar_chart("many", many, title="Forty-eight bars with dates", x_label="day", y_label="URLs"),
        bar_chart("one", [("2026-12-01 13h", 12345678.0)], title="One bar, a big number", y_label="URLs"),
        hbar_chart("long", [("x" * 80, 3.0, "3 of 9"), ("short.example", 1.0, "1 of 1,000,000 fetches")],
                   title="A host name longer than any column"),
        stacked_bars("stack", [f"{h:02d}:00" for h in range(24)],
                     [(f"series-{j}-with-a-long-name", [float((h * j) % 5) for h in range(24)]) for j in range(7)],
                     title="Seven series stacked", x_label="time (UTC)", y_label="pages"),
        line_chart("lines", [(f"line {j}", [(x, (x * j) % 7) for x in range(30)]) for j in range(9)],
                   title="Nine lines", x_label="x", y_label="y",
                   point_labels=[(0, x, 0.0, f"k={x}") for x in range(30)]),
    ]
    page = _page(tmp_path, "".join(svgs), "awkward")
    assert _problems(driver, page) == []
    (artifacts(tmp_path) / "awkward.svg").write_text(document(svgs[0]))


def test_the_check_finds_what_it_looks_for(driver, tmp_path):
    """The layout check is not vacuous: clipped and overlapping text, a legend entry without
    its value and a word broken across lines are all reported."""
    bad = ('<svg class="plot" data-plot="bad" width="100" height="60" xmlns="http://www.w3.org/2000/svg">'
           '<text x="80" y="20">clipped text</text><text x="5" y="40">one</text><text x="8" y="42">two</text>'
           '<g class="legend-entry" data-value="42"><text x="5" y="58">legend</text></g></svg>'
           '<table style="width:60px"><tr><td style="word-break:break-all">2026-12-01 unbreakable</td></tr></table>')
    problems = _problems(driver, _page(tmp_path, bad, "bad"))
    joined = "\n".join(problems)
    assert "leaves the chart" in joined and "overlaps" in joined and "lacks its value" in joined
    assert "broken across lines" in joined
    full_page(driver, artifacts(tmp_path) / "bad.png")

"""Times at the door and what is made of them: a fetch time outside 1970-01-01 .. 9999-12-31
(or a bool, NaN, an infinity) is refused with a ConfigError on every face (Detector, Client,
service, CLI inputs), change rates are always finite (fetches a moment apart, or at the same
time), and the report, export, history and the service render a store written before these
checks, whatever times and rates it holds."""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from neardup import Client, Detector
from neardup.cli.main import main
from neardup.crawl.schedule import MIN_CHANGE_INTERVAL, change_rate, schedule
from neardup.errors import ConfigError
from neardup.model import MAX_TIME, MIN_TIME, Page, checked_time
from neardup.report.html_report import render_report, time_axis, when
from neardup.service import create_app

TEXT = " ".join(f"word{i}" for i in range(400))
OTHER = " ".join(f"other{i}" for i in range(400))
URL, URL2 = "https://a.example/1", "https://b.example/1"
RANGE = r"1970-01-01T00:00:00Z \(0\) to 9999-12-31T23:59:59Z \(253402300799\)"

BAD_TIMES = [
    -1,
    -0.5,
    MAX_TIME + 1,
    1e18,
    -62135596800.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    "soon",
    [1.0],
    datetime(1, 1, 1, tzinfo=UTC),
    10**400,
]


def strict_json(text: str) -> object:
    """JSON with no Infinity or NaN (what json.dumps writes for them is not JSON)."""

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in {text[:200]}")

    return json.loads(text, parse_constant=refuse)


def run(*args: object, stdin: str | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin)


# -- the Detector ------------------------------------------------------------------------
@pytest.mark.parametrize("bad", BAD_TIMES, ids=repr)
def test_the_detector_refuses_a_time_outside_the_range(bad):
    det = Detector()
    with pytest.raises(ConfigError, match=RANGE) as refused:
        det.add(URL, TEXT, fetched_at=bad)
    assert str(refused.value).startswith("fetched_at must be a time from") and "\n" not in str(refused.value)
    assert det.stats()["pages"] == 0
    fp = det.fingerprint(TEXT, URL)
    with pytest.raises(ConfigError, match=RANGE):
        det.add_fingerprint(URL, fp, fetched_at=bad)
    batch = det.add_many([Page(URL, TEXT, fetched_at=bad), Page(URL2, OTHER, fetched_at=1000.0)])
    assert [v.status for v in batch] == ["error", "new"] and "fetched_at must be" in (batch[0].error or "")
    fps = det.add_fingerprints([(URL, fp, bad, None), ("https://c.example/1", fp, 2000.0, None)])
    assert [v.status for v in fps] == ["error", "new"]
    assert det.stats()["pages"] == 2


def test_the_range_is_documented_and_its_ends_are_times():
    assert (MIN_TIME, MAX_TIME) == (0.0, 253402300799.0)
    assert checked_time.__doc__ and "MIN_TIME" in checked_time.__doc__
    assert datetime.fromtimestamp(MAX_TIME, UTC) == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    det = Detector()
    det.add(URL, TEXT, fetched_at=0)
    det.add(URL2, OTHER, fetched_at=MAX_TIME)
    v = det.add("https://c.example/1", TEXT + " more", fetched_at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert v.status != "error"
    assert det.page(det.add(URL, TEXT, fetched_at=5e-324).page_id or 0).fetched_at == 5e-324  # type: ignore[union-attr]
    html = render_report(det.store)  # the whole span: a 1000-year axis
    assert "1970-01-01" in html and "9999-12-31" in html


def test_a_priority_that_is_a_bool_is_refused():
    with pytest.raises(ConfigError, match="priority"):
        Detector().add(URL, TEXT, priority=True)


# -- change rates ---------------------------------------------------------------------------
def test_change_rates_are_finite_for_fetches_a_moment_apart():
    det = Detector()
    det.add(URL, TEXT, fetched_at=0.0)
    det.add(URL, TEXT + " changed", fetched_at=5e-324)
    h = det.history(URL)
    assert h is not None and h.change_rate is not None and math.isfinite(h.change_rate)
    assert h.change_rate == pytest.approx(math.log(3) / MIN_CHANGE_INTERVAL)
    strict_json(json.dumps(h.to_dict()))
    for t in (5e-324, 5e-324, 10.0, 10.0):  # unchanged re-fetches: at the same time, then later
        v = det.add(URL, TEXT + " changed", fetched_at=t)
        assert v.version == "unchanged"
    h = det.history(URL)
    assert h is not None and h.change_rate is not None and 0 < h.change_rate < 2 and math.isfinite(h.next_fetch or 0)
    d = det.should_fetch(URL)
    assert d.change_rate == h.change_rate
    strict_json(json.dumps(d.to_dict()))


@pytest.mark.parametrize(
    "intervals, changed",
    [
        ([5e-324], [True]),
        ([5e-324, 1.0], [True, False]),
        ([1e-300] * 5, [True] * 5),
        ([0.0, 0.0], [True, False]),
        ([5e-324, 0.0, 5e-324], [True, False, False]),
        ([1e-9, 1e300, 1e300], [True, False, False]),
        ([1e308, 1e308], [True, True]),
        ([float("inf"), 3.0], [True, False]),
        ([-5.0, 1e-20], [True, True]),
    ],
)
def test_change_rate_is_always_finite(intervals, changed):
    rate = change_rate(intervals, changed)
    assert rate is None or (math.isfinite(rate) and rate >= 0)
    times = [0.0]
    for t in intervals:
        times.append(times[-1] + t)
    if all(math.isfinite(t) for t in times):
        rate, nxt = schedule(times, [None, *changed])
        assert rate is None or math.isfinite(rate)


def test_host_change_rates_are_finite():
    det = Detector()
    det.add(URL, TEXT, fetched_at=0.0)
    det.add(URL, TEXT + " changed", fetched_at=5e-324)
    row = det.host("a.example")
    assert row is not None and row["changed_pages"] == 1
    assert row["changes_per_day"] is not None and math.isfinite(row["changes_per_day"])
    strict_json(json.dumps(det.hosts()))


# -- the service and the Client ------------------------------------------------------------
@pytest.fixture()
def twins():
    det = Detector()
    with TestClient(create_app(det)) as http:
        client = Client("http://testserver", transport=http._transport)
        yield det, http, client
        client.close()


@pytest.mark.parametrize("bad", [-1, -0.5, MAX_TIME + 1, 1e18, -62135596800.0])
def test_the_service_refuses_a_time_outside_the_range_as_the_detector_does(twins, bad):
    det, http, client = twins
    with pytest.raises(ConfigError) as embedded:
        Detector().add(URL, TEXT, fetched_at=float(bad))  # (JSON has numbers: the service reads -1 as -1.0)
    r = http.post("/v1/pages", json={"url": URL, "text": TEXT, "fetched_at": bad})
    assert r.status_code == 400 and r.json() == {"error": str(embedded.value), "type": "ConfigError"}
    with pytest.raises(ConfigError) as embedded:
        Detector().add(URL, TEXT, fetched_at=bad)
    with pytest.raises(ConfigError) as over_http:
        client.add(URL, TEXT, fetched_at=bad)
    assert str(over_http.value) == str(embedded.value)
    fp = det.fingerprint(TEXT, URL)
    with pytest.raises(ConfigError, match=RANGE):
        client.add_fingerprint(URL, fp, fetched_at=bad)
    body = {
        "url": URL,
        "simhash": fp.simhash_hex,
        "digest": fp.digest,
        "spec": fp.spec,
        "tokens": fp.tokens,
        "length": fp.length,
        "sketch": fp.sketch.hex() if fp.sketch else None,
        "fetched_at": bad,
    }
    r = http.post("/v1/fingerprints/add", json=body)
    assert r.status_code == 400 and r.json()["type"] == "ConfigError"
    batch = http.post("/v1/fingerprints/add/batch", json={"fingerprints": [body, {**body, "fetched_at": 1000.0}]})
    assert [v["status"] for v in batch.json()["verdicts"]] == ["error", "new"]
    pages = http.post(
        "/v1/pages/batch",
        json={
            "pages": [
                {"url": URL2, "text": OTHER, "fetched_at": bad},
                {"url": URL2, "text": OTHER, "fetched_at": 1000.0},
            ]
        },
    )
    assert [v["status"] for v in pages.json()["verdicts"]] == ["error", "new"]
    assert pages.json()["verdicts"][0]["error"].startswith("fetched_at must be a time from 1970-01-01")
    # the Client's batches answer per item, as the Detector's do
    want = [v.status for v in Detector().add_many([Page(URL, TEXT, fetched_at=bad), Page(URL2, OTHER)])]
    got = [
        v.status
        for v in client.add_many(
            [
                Page("https://c.example/x", TEXT, fetched_at=bad),
                Page("https://c.example/y", " ".join(f"c{i}" for i in range(400))),
            ]
        )
    ]
    assert got == want == ["error", "new"]
    got = client.add_fingerprints([(URL, fp, bad, None), ("https://d.example/1", fp, 3000.0, None)])
    assert [v.status for v in got] == ["error", "exact"] and "fetched_at must be" in (got[0].error or "")


@pytest.mark.parametrize("bad", [True, False, "1000", None, [1]])
def test_the_service_refuses_a_time_that_is_not_a_number(twins, bad):
    det, http, _ = twins
    r = http.post("/v1/pages", json={"url": URL, "text": TEXT, "fetched_at": bad})
    if bad is None:  # no time: now
        assert r.status_code == 200
        return
    assert r.status_code == 422 and r.json()["type"] == "ValidationError" and "fetched_at" in r.json()["error"]
    r = http.post("/v1/pages", json={"url": URL, "text": TEXT, "priority": bad})
    assert r.status_code == 422 and "priority" in r.json()["error"]
    assert det.stats()["pages"] == 0


def test_the_service_takes_whole_seconds_and_datetimes_from_the_client(twins):
    det, http, client = twins
    assert http.post("/v1/pages", json={"url": URL, "text": TEXT, "fetched_at": 1700000000}).status_code == 200
    assert det.page(1).fetched_at == 1700000000.0  # type: ignore[union-attr]
    v = client.add(URL2, OTHER, fetched_at=datetime(2020, 1, 1, tzinfo=UTC))
    assert det.page(v.page_id or 0).fetched_at == datetime(2020, 1, 1, tzinfo=UTC).timestamp()  # type: ignore


def test_the_service_answers_for_fetches_a_moment_apart(twins):
    det, http, _ = twins
    for t, body in ((0.0, TEXT), (5e-324, TEXT + " changed"), (5e-324, TEXT + " changed"), (10.0, TEXT + " changed")):
        r = http.post("/v1/pages", json={"url": URL, "text": body, "fetched_at": t})
        assert r.status_code == 200, r.text
    for path in ("/v1/history", "/v1/should-fetch"):
        r = http.get(path, params={"url": URL})
        assert r.status_code == 200 and math.isfinite(strict_json(r.text)["change_rate"])  # type: ignore[index]


# -- the CLI's inputs -------------------------------------------------------------------------
def test_dedup_counts_a_page_with_a_bad_time_as_bad_time(tmp_path):
    pages = tmp_path / "pages.jsonl"
    rows = [
        {"url": URL, "text": TEXT, "fetched_at": 1e18},
        {"url": URL2, "text": OTHER, "fetched_at": -1},
        {"url": "https://c.example/1", "text": TEXT + " c", "fetched_at": 1000},
    ]
    pages.write_text("".join(json.dumps(r) + "\n" for r in rows))
    errors = tmp_path / "errors.jsonl"
    r = run("dedup", pages, "--db", tmp_path / "s.db", "--jobs", 1, "--no-progress", "--errors", errors)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["pages"] == 3 and summary["error"] == 2 and summary["errors_by_reason"] == {"bad-time": 2}
    listed = [json.loads(line) for line in errors.read_text().splitlines()]
    assert [e["reason"] for e in listed] == ["bad-time", "bad-time"]
    assert all("9999-12-31" in e["error"] for e in listed)


def test_should_fetch_max_age_must_be_a_finite_duration(tmp_path):
    det = Detector.open(tmp_path / "s.db")
    det.add(URL, TEXT)
    det.close()
    for bad in ("-1", "inf", "nan"):
        r = run("should-fetch", URL, "--db", tmp_path / "s.db", "--max-age", bad)
        assert r.exit_code == 2, (bad, r.output)
        assert r.stderr.count("\n") == 1 and "max-age" in r.stderr.lower().replace("_", "-")


# -- a store written before the checks ------------------------------------------------------
@pytest.fixture()
def legacy(tmp_path) -> Path:
    """A store as one written before the checks at the door could be: a page first seen in
    year 1 and fetched at 10^18 s, one fetched in 9999, versions at any time, an infinite
    change rate."""
    db = tmp_path / "old.db"
    det = Detector.open(db)
    det.add(URL, TEXT, fetched_at=0.0)
    det.add(URL, TEXT + " changed", fetched_at=5e-324)
    det.add(URL2, OTHER, fetched_at=1000.0)
    det.add(URL2, OTHER + " changed", fetched_at=2000.0)
    det.add("https://c.example/1", TEXT, fetched_at=3000.0)  # a copy: a cluster of 2 in the report
    det.close()
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE pages SET change_rate = ?, first_seen = ? WHERE url = ?", (math.inf, 0.0, URL))
        con.execute(
            "UPDATE pages SET first_seen = ?, fetched_at = ?, change_rate = ? WHERE url = ?",
            (-62135596800.0, 1e18, math.inf, URL2),
        )
        con.execute("UPDATE pages SET fetched_at = ? WHERE url = ?", (253402300799.0, "https://c.example/1"))
        con.execute("UPDATE page_versions SET fetched_at = fetched_at * 1e300 WHERE fetched_at >= 2000")
    con.close()
    return db


def test_the_report_renders_any_stored_time(legacy, tmp_path):
    out = tmp_path / "r.html"
    r = run("report", "--db", legacy, "--out", out)
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "no calendar date" in html and 'data-plot="duplicates-over-time"' in html
    assert "nan" not in html.lower().replace("nano", "") and "inf " not in html
    assert json.loads(r.stdout)["pages"] == 3


def test_the_report_axis_and_dates_of_any_time():
    for first, last in ((-1e300, 1e300), (float("nan"), float("inf")), (1e18, 0.0), (None, None), (5e-324, 5e-324)):
        axis = time_axis(first, last)  # type: ignore[arg-type]
        assert 1 <= axis.buckets <= 48 and [axis.label(b) for b in range(axis.buckets)]
        assert axis.caption()
    assert when(1e18).endswith("(no calendar date)") and when(float("nan")).endswith("(no calendar date)")
    assert when(-62135596800.0) == "0001-01-01 00:00"


def test_export_and_history_print_no_infinity(legacy, tmp_path):
    r = run("export", "--db", legacy, "--out", "-")
    assert r.exit_code == 0, r.output
    rows = [strict_json(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert {row["url"]: row["change_rate"] for row in rows}[URL] is None  # type: ignore[index]
    out = tmp_path / "e.csv"
    assert run("export", "--db", legacy, "--out", out).exit_code == 0
    assert "inf" not in out.read_text().lower()
    r = run("history", "--db", legacy, URL)
    assert r.exit_code == 0 and strict_json(r.stdout)["change_rate"] is None  # type: ignore[index]


def test_the_service_answers_for_a_legacy_store(legacy):
    det = Detector.open(legacy)
    try:
        with TestClient(create_app(det)) as http:
            for url in (URL, URL2):
                for path in ("/v1/history", "/v1/should-fetch"):
                    r = http.get(path, params={"url": url})
                    assert r.status_code == 200 and strict_json(r.text)["change_rate"] is None  # type: ignore[index]
            page = http.get("/v1/pages/1")
            assert page.status_code == 200 and strict_json(page.text)["change_rate"] is None  # type: ignore[index]
            cluster = det.store.page_by_url(URL).cluster_id  # type: ignore[union-attr]
            assert http.get(f"/v1/clusters/{cluster}/pages").status_code == 200
            assert http.get("/v1/hosts").status_code == 200
            assert http.get("/v1/hosts/a.example").status_code == 200
            # an unchanged re-fetch of a URL whose history has fetches a moment apart: no ZeroDivisionError
            r = http.post("/v1/pages", json={"url": URL, "text": TEXT + " changed", "fetched_at": 10.0})
            assert r.status_code == 200 and r.json()["version"] == "unchanged", r.text
            rate = strict_json(http.get("/v1/history", params={"url": URL}).text)["change_rate"]  # type: ignore
            assert rate is not None and math.isfinite(rate)
    finally:
        det.close()


@pytest.mark.parametrize("pages", [1, 2, 3, 4])
def test_the_report_renders_a_host_of_a_few_html_pages(pages):
    det = Detector()
    words = " ".join(f"w{i}" for i in range(300))
    for i in range(pages):
        det.add(f"https://a.example/{i}", f'<html><body><div class="x"><p>{words} {i}</p></div></body></html>')
    assert 'id="templates"' in render_report(det.store)


def test_input_times_out_of_range_are_refused_per_record(tmp_path):
    """A JSONL fetch time past year 9999 or before 1970 is a bad-time record, not a store
    value; a WARC date out of range is no time; the batch job refuses such a page alone."""
    import json as _json

    from neardup.batch.dedup import records_from_pages
    from neardup.ingest.inputs import read_input
    from neardup.model import Page

    text = " ".join(f"word{i}" for i in range(300))
    path = tmp_path / "pages.jsonl"
    path.write_text("\n".join(_json.dumps({"url": f"https://a.example/{i}", "text": text, "fetched_at": t})
                              for i, t in enumerate((1e18, -5, 1.7e9))) + "\n")
    items = list(read_input(path))
    assert [i.reason for i in items] == ["bad-time", "bad-time", None]
    assert items[2].page is not None and items[2].page.fetched_at == 1.7e9
    records, errors = records_from_pages([Page(url="https://a.example/x", content=text, fetched_at=1e18),
                                          Page(url="https://a.example/y", content=text, fetched_at=1.7e9)])
    assert records[0] is None and records[1] is not None and len(errors) == 1 and "fetched_at" in errors[0]


def test_the_report_renders_any_stored_time_on_postgresql(pg_dsn, tmp_path):
    import psycopg

    with Detector.open(pg_dsn) as det:
        det.add(URL, TEXT, fetched_at=1000.0)
        det.add(URL, TEXT + " changed", fetched_at=2000.0)
        det.add(URL2, OTHER, fetched_at=3000.0)
    with psycopg.connect(pg_dsn) as con:  # a store written before times were checked
        con.execute("UPDATE pages SET first_seen = %s WHERE url = %s", (1e300, URL))
        con.execute("UPDATE pages SET first_seen = %s WHERE url = %s", (-1e300, URL2))
        con.execute("UPDATE page_versions SET fetched_at = fetched_at * 1e300")
    out = tmp_path / "r.html"
    r = run("report", "--db", pg_dsn, "--out", out)
    assert r.exit_code == 0, r.output
    assert "no calendar date" in out.read_text()

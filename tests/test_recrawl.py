"""Recrawls: a re-fetch is a version of its URL (never its own duplicate), the fetch history,
the change-rate estimate and recrawl schedule, final answers (export), and ids that are never
reused; on real sample pages, both stores where a store is involved."""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import random
import time
from pathlib import Path

import pytest
from checks import STORE_KINDS, present, store_target, stored_versions
from click.testing import CliRunner

from neardup import Detector
from neardup.cli.main import main
from neardup.crawl.schedule import MAX_REVISIT, MIN_REVISIT, change_rate, next_fetch, schedule
from neardup.store.base import HISTORY_LIMIT

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


def run(*args: object):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def words(tag: str, n: int = 400) -> str:
    return " ".join(f"{tag}w{i}" for i in range(n))


@pytest.fixture(params=STORE_KINDS)
def target(request, tmp_path) -> str:
    return store_target(request, tmp_path)

# -- the estimator ----------------------------------------------------------------------------

def _observe(rate: float, intervals: list[float], rng: random.Random) -> list[bool]:
    """Whether a Poisson change process of ``rate`` changed at least once in each interval."""
    return [rng.random() < -math.expm1(-rate * t) for t in intervals]


@pytest.mark.parametrize("rate_per_hour", [0.05, 0.5, 2.0])
def test_change_rate_recovers_the_rate_of_irregular_fetches(rate_per_hour):
    """The maximum-likelihood estimate from "changed / unchanged since the last fetch" finds
    the true rate; counting changes per hour underestimates it wherever fetches are
    sparser than changes (a fetch sees at most one change)."""
    rng = random.Random(7)
    rate = rate_per_hour / 3600.0
    estimates: list[float] = []
    naive: list[float] = []
    for _ in range(40):
        intervals = [rng.uniform(0.2, 3.0) * 3600.0 for _ in range(200)]
        changed = _observe(rate, intervals, rng)
        estimates.append(present(change_rate(intervals, changed)))
        naive.append(sum(changed) / sum(intervals))
    mean = sum(estimates) / len(estimates)
    assert abs(mean / rate - 1.0) < 0.1, (mean * 3600, rate_per_hour)
    if rate_per_hour >= 2.0:
        assert sum(naive) / len(naive) < 0.6 * rate  # the naive count is far off
    assert change_rate(intervals[:3], [False] * 3) == 0.0
    all_changed = change_rate([3600.0] * 4, [True] * 4)
    assert all_changed is not None and all_changed * 3600.0 == pytest.approx(math.log(4.5 / 0.5))


def test_change_rate_edge_cases():
    assert change_rate([], []) is None
    assert change_rate([0.0, -5.0], [True, False]) is None  # no usable interval
    assert change_rate([float("nan"), 10.0], [True, False]) == 0.0
    assert next_fetch(100.0, None, observed=0.0) is None
    assert next_fetch(100.0, 1e-9, observed=0.0) == 100.0 + MAX_REVISIT
    assert next_fetch(100.0, 10.0, observed=0.0) == 100.0 + MIN_REVISIT
    assert next_fetch(100.0, 0.0, observed=7200.0) == 7300.0
    assert schedule([5.0], [None]) == (None, None)


# -- versions of a URL in the detector ------------------------------------------------------------

def test_history_is_bounded_and_drives_the_schedule(target):
    with Detector.open(target) as det:
        url = "https://a.example/news"
        t = 1_000_000.0
        bodies = [words("base") + (f" edition{i // 2}" if i % 4 == 0 else "") for i in range(HISTORY_LIMIT + 8)]
        for body in bodies:
            t += 3600.0
            det.add(url, body, fetched_at=t)
        h = det.history(url)
        assert h is not None and h.fetches == HISTORY_LIMIT + 8 and len(h.versions) == HISTORY_LIMIT
        assert h.versions[-1]["fetched_at"] == t and h.fetched_at == t
        assert h.change_count == sum(a != b for a, b in zip(bodies, bodies[1:]))
        assert h.change_rate is not None and 0 < h.change_rate * 3600 < 1.0
        assert h.next_fetch == pytest.approx(t + 1 / h.change_rate)
        assert det.history("https://a.example/other") is None
        rows = stored_versions(det.store)
        assert rows == HISTORY_LIMIT  # pruned as it grows


def test_should_fetch_is_fresh_until_the_next_planned_fetch(sample_pages):
    det = Detector()
    page = sample_pages["newyorker-teas-2019"]
    now = time.time()
    det.add(page.url, page.content, fetched_at=now - 7200)
    assert det.should_fetch(page.url).reason == "known"  # fetched once: nothing known yet
    det.add(page.url, page.content, fetched_at=now - 60)  # unchanged after 7,140 s
    d = det.should_fetch(page.url)
    assert (d.fetch, d.reason, d.change_rate) == (False, "fresh", 0.0)
    assert d.next_fetch == pytest.approx(now - 60 + 7140)  # as long again as seen unchanged
    assert det.should_fetch(page.url, max_age=60).reason == "known"  # max_age says otherwise
    det.add(page.url, page.content, fetched_at=now - 3 * 86400)  # an old capture: due long ago
    assert det.should_fetch(page.url).reason in ("known", "fresh")


def test_a_second_crawl_changes_no_host_figure(sample_pages):
    """The same pages fetched again, some of them changed: statuses, clusters and every
    host's duplicate rate are those of the first crawl; re-fetches are counted by version."""
    det = Detector()
    names = sorted(sample_pages)
    first = [det.add(sample_pages[n].url, sample_pages[n].content, fetched_at=1e9) for n in names]
    hosts1 = {h["host"]: (h["pages"], h["duplicate_rate"], h["distinct_contents"], h["budget_factor"])
              for h in det.hosts()}
    stats1 = det.stats()
    second = [det.add(sample_pages[n].url, sample_pages[n].content, fetched_at=1e9 + 86400) for n in names]
    assert all(v.version in ("unchanged", "changed") and v.match_url != v.url for v in second)
    assert all(not v.is_duplicate or v.match_url != v.url for v in first + second)
    hosts2 = {h["host"]: (h["pages"], h["duplicate_rate"], h["distinct_contents"], h["budget_factor"])
              for h in det.hosts()}
    assert hosts2 == hosts1
    stats2 = det.stats()
    assert {k: stats2[k] for k in ("pages", "clusters", "new", "exact", "near")} == \
        {k: stats1[k] for k in ("pages", "clusters", "new", "exact", "near")}
    assert stats2["fetches"] == 2 * len(names)
    refetched = sum(h["refetched"] for h in det.hosts())
    assert refetched == stats2["pages"]
    # a new variant of a known page (another URL) is still found
    v = det.add("https://mirror.example/teas", sample_pages["newyorker-teas-2019"].content)
    assert v.status == "exact" and v.version is None


def test_an_empty_page_is_not_waste():
    det = Detector()
    det.add("https://e.example/a", words("a"))
    det.add("https://e.example/empty", "<html><body><p>Not found</p></body></html>")
    (row,) = det.hosts()
    assert (row["empty"], row["budget_factor"]) == (1, 1.0)


# -- ids -----------------------------------------------------------------------------------------

def test_page_and_cluster_ids_are_never_reused(target):
    with Detector.open(target) as det:
        a = det.add("https://a.example/1", words("one"), fetched_at=1000.0)
        b = det.add("https://a.example/2", words("two"), fetched_at=2000.0)
        assert det.expire(older_than=time.time() - 1500.0) == 1  # b (the highest id) stays
        det.expire(older_than=0.0)  # and now everything goes
        c = det.add("https://a.example/3", words("three"))
        assert present(c.page_id) > present(b.page_id) > present(a.page_id)
        assert present(c.cluster_id) > present(b.cluster_id)
        assert det.page(present(b.page_id)) is None


def test_a_schema_4_store_keeps_its_ids_apart(tmp_path):
    """Migrating an SQLite store to AUTOINCREMENT keys: an id the old store handed out to a
    page since expired (still named in the change log) is not handed out again."""
    import sqlite3

    from neardup.store.schema import migrations

    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    for step in range(4):
        for sql in migrations("sqlite")[step]:
            if isinstance(sql, str):
                con.execute(sql)
            else:
                sql(con.execute)
    con.execute("PRAGMA user_version=4")
    con.execute("INSERT INTO changes(page_id, op, simhash) VALUES(7, 'add', ?)", (bytes(8),))
    con.commit()
    con.close()
    with Detector.open(path) as det:
        v = det.add("https://a.example/1", words("one"))
        assert v.page_id == 8
        assert present(det.history("https://a.example/1")).fetches == 1


def _create(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        with Detector.open(path) as det:
            det.stats()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_creating_one_store_at_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(3):
        path = str(tmp_path / f"race{attempt}.db")
        barrier, results = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_create, args=(path, barrier, results)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert sorted(results.get(timeout=5) for _ in procs) == ["ok"] * 3


# -- the command line: dedup twice, history, export ----------------------------------------------

def _crawl_without_times(tmp_path: Path) -> Path:
    """The sample as a crawl that does not say when it fetched (urls.tsv without its
    ``captured`` column): each run's fetches happen now, so a second run is a later crawl."""
    folder = tmp_path / "crawl"
    (folder / "pages").mkdir(parents=True)
    for page in (SAMPLE / "pages").iterdir():
        (folder / "pages" / page.name).write_bytes(page.read_bytes())
    rows = list(csv.DictReader(open(SAMPLE / "urls.tsv", encoding="utf-8"), delimiter="\t"))
    (folder / "urls.tsv").write_text("file\turl\n" + "".join(f"{r['file']}\t{r['url']}\n" for r in rows),
                                     encoding="utf-8")
    return folder


def test_dedup_twice_keeps_every_host_figure_and_export_has_the_final_answer(tmp_path):
    db = tmp_path / "s.db"
    crawl = _crawl_without_times(tmp_path)
    assert run("dedup", crawl, "--db", db, "--no-progress", "--jobs", "1").exit_code == 0
    hosts1 = [json.loads(x) for x in run("hosts", "--db", db).output.splitlines()]
    second = run("dedup", crawl, "--db", db, "--no-progress", "--jobs", "1", "--out", tmp_path / "v2.jsonl")
    assert second.exit_code == 0
    summary = json.loads(second.output.strip().splitlines()[-1])
    assert summary["unchanged"] + summary["changed"] == 26 and "re-fetched 26" in second.stderr
    hosts2 = [json.loads(x) for x in run("hosts", "--db", db).output.splitlines()]
    keep = ("host", "pages", "new", "exact", "near", "duplicate_rate", "distinct_contents", "budget_factor")
    assert [{k: h[k] for k in keep} for h in hosts2] == [{k: h[k] for k in keep} for h in hosts1]
    assert all(h["refetched"] == h["pages"] for h in hosts2)

    out = tmp_path / "final.csv"
    r = run("export", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    with open(out, newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == summary["store_pages"] == len({row["url"] for row in table})
    by_cluster: dict[str, set[str]] = {}
    for row in table:
        by_cluster.setdefault(row["cluster_id"], set()).add(row["canonical_url"])
        assert int(row["fetches"]) >= 2 and row["next_fetch"]
    assert all(len(c) == 1 for c in by_cluster.values())  # one final canonical per cluster
    assert sum(row["is_canonical"] == "True" for row in table) == len(by_cluster)
    jl = tmp_path / "final.jsonl"
    assert run("export", "--db", db, "--out", jl).exit_code == 0
    assert [json.loads(x)["url"] for x in jl.read_text(encoding="utf-8").splitlines()] == [r["url"] for r in table]
    pq = pytest.importorskip("pyarrow.parquet")
    pf = tmp_path / "final.parquet"
    assert run("export", "--db", db, "--out", pf).exit_code == 0
    assert pq.read_table(pf).column("url").to_pylist() == [r["url"] for r in table]

    url = table[0]["url"]
    h = run("history", "--db", db, url)
    assert h.exit_code == 0 and json.loads(h.output)["fetches"] == int(table[0]["fetches"])


def test_export_canonical_is_the_final_one_not_the_one_at_decision_time(tmp_path):
    """A later page naming the first copy's rival as canonical moves the cluster's canonical:
    the dedup rows keep the canonical of their moment, the export has the final one."""
    db = tmp_path / "s.db"
    body = words("story")
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in [
        {"url": "https://a.example/story", "text": body},
        {"url": "https://b.example/story", "text": body},
        {"url": "https://c.example/story",
         "html": f'<html><head><link rel="canonical" href="https://b.example/story"></head>'
                 f"<body><article><p>{body}</p></article></body></html>"},
    ]) + "\n", encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    assert run("dedup", src, "--db", db, "--out", rows, "--no-progress", "--jobs", "1").exit_code == 0
    decided = [json.loads(x) for x in rows.read_text(encoding="utf-8").splitlines()]
    assert decided[0]["canonical_url"] == "https://a.example/story"
    out = tmp_path / "final.jsonl"
    assert run("export", "--db", db, "--out", out).exit_code == 0
    final = {r["url"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    if decided[2]["status"] in ("exact", "near"):  # the third joined the cluster
        assert final["https://a.example/story"]["canonical_url"] == "https://b.example/story"


def test_export_and_history_errors_are_one_line(tmp_path):
    r = run("export", "--db", tmp_path / "missing.db", "--out", tmp_path / "x.csv")
    assert r.exit_code == 3 and len(r.stderr.strip().splitlines()) == 1
    db = tmp_path / "s.db"
    page = SAMPLE / "pages" / "newyorker-teas-2019.html.gz"
    assert run("add", "--db", db, "https://a.example/1", page).exit_code == 0
    r = run("export", "--db", db, "--out", tmp_path / "x.xlsx")
    assert r.exit_code == 2 and "format" in r.stderr
    r = run("history", "--db", db, "https://a.example/unknown")
    assert r.exit_code == 1 and "not stored" in r.stderr


# -- numbers checked at the door --------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda d: d.page(2**63), lambda d: d.page(-1), lambda d: d.page("3"), lambda d: d.cluster_info(2**63),
    lambda d: d.cluster(2**64), lambda d: d.expire(float("nan")), lambda d: d.expire(float("inf")),
    lambda d: d.should_fetch("https://a.example/", max_age=float("nan")),
    lambda d: d.should_fetch("https://a.example/", host_max_duplicate_rate=float("nan")),
    lambda d: d.hosts(window=float("nan")), lambda d: d.hosts(window=-1.0), lambda d: d.hosts(at=float("inf")),
    lambda d: d.cluster_info(1, at=float("nan")),
])
def test_ids_times_and_numbers_are_checked_at_the_door(call):
    from neardup.errors import ConfigError

    det = Detector()
    det.add("https://a.example/1", words("one"))
    with pytest.raises(ConfigError):
        call(det)
    assert det.page(2**63 - 1) is None and det.cluster_info(2**63 - 1) is None

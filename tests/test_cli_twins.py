"""The command line twins of the Detector's before-the-fetch, rules, hosts, expiry and
cluster operations, ``dedup --batch``, and the store opening that every command shares."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import neardup.cli.common
import neardup.cli.main
from neardup import Detector
from neardup.batch.dedup import dedup_batch
from neardup.cli.main import main
from neardup.ingest.inputs import read_input

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"
TEXT = " ".join(f"word{i}" for i in range(400))
OTHER = " ".join(f"other{i}" for i in range(400))


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("NEARDUP_QUIET", "1")


def run(*args: object):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.stderr
    return r


def lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def one_line_error(r, code: int) -> str:
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("neardup: error:"), r.stderr
    return err[0]


@pytest.fixture()
def store(tmp_path):
    db = tmp_path / "crawl.db"
    with Detector.open(db) as det:
        for i in range(5):
            det.add(f"https://a.example/p?sid={i}", TEXT, fetched_at=1000.0 + i)
        det.add("https://b.example/x", OTHER, fetched_at=time.time())
    return db


def test_should_fetch(store):
    urls = ["https://a.example/p?sid=99", "https://a.example/p?sid=3", "https://a.example/q", "https://b.example/x"]
    r = run("should-fetch", *urls, "--db", store)
    assert r.exit_code == 0, r.stderr
    with Detector.open(store, create=False) as det:
        assert lines(r.stdout) == [det.should_fetch(u).to_dict() for u in urls]
    got = lines(run("should-fetch", "https://b.example/x", "--db", store, "--max-age", "1e9").stdout)
    assert got[0]["reason"] == "fresh"
    got = lines(run("should-fetch", "https://a.example/new", "--db", store, "--host-max-duplicate-rate", "0.5",
                    "--host-min-pages", "3").stdout)
    assert (got[0]["fetch"], got[0]["reason"]) == (False, "host-budget")


def test_should_fetch_bad_url_exit_1_after_the_others(store):
    r = run("should-fetch", "not a url", "https://a.example/q", "--db", store)
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1
    out = lines(r.stdout)
    assert "error" in out[0] and out[1]["reason"] == "unknown"


def test_rules(store):
    r = run("rules", "--db", store)
    assert r.exit_code == 0
    with Detector.open(store, create=False) as det:
        assert lines(r.stdout) == [x.to_dict() for x in det.rules()]
    assert lines(r.stdout)[0]["rule"] == "drop-param:sid"
    assert lines(run("rules", "--db", store, "--host", "A.example").stdout) == lines(r.stdout)
    assert run("rules", "--db", store, "--host", "nowhere.example").stdout == ""


def test_hosts_json_and_csv(store):
    r = run("hosts", "--db", store, "--sort", "pages")
    assert r.exit_code == 0
    rows = lines(r.stdout)
    assert [h["host"] for h in rows] == ["a.example", "b.example"] and rows[0]["pages"] == 5
    assert [h["host"] for h in lines(run("hosts", "--db", store, "--top", "1").stdout)] == ["a.example"]
    assert [h["host"] for h in lines(run("hosts", "--db", store, "--window", "3600").stdout)] == ["b.example"]
    table = list(csv.DictReader(io.StringIO(run("hosts", "--db", store, "--format", "csv").stdout)))
    assert table[0]["host"] == "a.example" and table[0]["largest_cluster_size"] == "5"
    assert table[0]["trap"] == "false" and float(table[0]["duplicate_rate"]) == rows[0]["duplicate_rate"]
    assert run("hosts", "--db", store, "--sort", "nonsense").exit_code == 2


def test_expire_and_cluster(store):
    with Detector.open(store, create=False) as det:
        cid = det.should_fetch("https://a.example/p?sid=1").cluster_id
    r = run("cluster", "--db", store, cid)
    assert r.exit_code == 0, r.stderr
    (c,) = lines(r.stdout)
    assert c["size"] == 5 and len(c["members"]) == 5 and c["members"][0]["canonical"]
    assert c["canonical_url"] == c["members"][0]["url"] == "https://a.example/p?sid=0"
    one_line_error(run("cluster", "--db", store, 10**9), 1)
    assert lines(run("expire", "--db", store, "--older-than", 100 * 365 * 86400).stdout) == [{"expired": 0}]
    assert lines(run("expire", "--db", store, "--older-than", 3600).stdout) == [{"expired": 5}]
    assert json.loads(run("stats", "--db", store).stdout)["pages"] == 1
    one_line_error(run("expire", "--db", store, "--older-than", -1), 2)
    one_line_error(run("expire", "--db", store), 2)


@pytest.mark.parametrize("command", [["should-fetch", "https://a.example/"], ["rules"], ["hosts"],
                                     ["expire", "--older-than", "1"], ["cluster", "1"], ["stats"]])
def test_missing_store_exit_3_and_not_created(tmp_path, command):
    db = tmp_path / "absent.db"
    assert "does not exist" in one_line_error(run(*command, "--db", db), 3)
    assert not db.exists()


@pytest.mark.parametrize("command", [["check", "https://x.example/", "-"], ["stats"], ["rules"]])
def test_unreachable_postgres_is_a_store_error(monkeypatch, command):
    """Never an empty in-memory store instead, never 'does not exist' without connecting,
    and one line (psycopg_pool's connection warnings silenced)."""
    monkeypatch.setattr(neardup.cli.common, "STORE_TIMEOUT", 1.0)
    r = CliRunner().invoke(main, [*command, "--db", "postgresql://127.0.0.1:1/crawl"], input="<p>some words</p>")
    msg = one_line_error(r, 3)
    assert "cannot connect to PostgreSQL" in msg


def test_db_help_and_k_range():
    for command in ("add", "check", "dedup", "stats", "serve", "should-fetch", "rules", "hosts", "expire",
                    "cluster"):
        out = " ".join(run(command, "--help").stdout.split())
        assert "SQLite file, postgresql:// URL, redis://HOST:PORT/DB or redis+cluster://HOST:PORT" in out, command
    assert "0<=x<=128" in run("add", "--help").stdout or "0..128" in run("add", "--help").stdout
    assert run("check", "--db", "x.db", "-k", "129", "https://x.example/", "-").exit_code == 2


def test_threshold_with_simhash_is_a_usage_error(tmp_path):
    page = SAMPLE / "pages" / "newyorker-teas-2019.html.gz"
    msg = one_line_error(run("check", "--db", tmp_path / "s.db", "--threshold", "0.5", "https://x.example/", page), 2)
    assert "--threshold" in msg
    assert not (tmp_path / "s.db").exists()  # refused before the store is opened
    r = run("add", "--db", tmp_path / "s.db", "--method", "minhash", "--threshold", "0.5", "https://y.example/", page)
    assert r.exit_code == 0, r.stderr
    r = run("check", "--db", tmp_path / "s.db", "--method", "minhash", "--threshold", "0.5", "https://x.example/",
            page)
    assert r.exit_code == 0, r.stderr


def test_dedup_batch_is_the_library_batch_job(tmp_path):
    out = tmp_path / "batch.jsonl"
    r = run("dedup", "--batch", SAMPLE, "--out", out, "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    pages = [it.page for it in read_input(str(SAMPLE)) if it.page is not None]
    res = dedup_batch(pages, jobs=1)
    rows = lines(out.read_text())
    assert [(x["url"], x["status"], x["cluster"], x["canonical"], x["match"], x["distance"]) for x in rows] == [
        (v.url, v.status, v.cluster, v.canonical, v.match, v.distance) for v in res.verdicts]
    assert rows[0]["simhash"] == f"{res.verdicts[0].simhash:016x}"
    assert [x["version"] for x in rows] == [v.version for v in res.verdicts]  # the sample's recaptures
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["pages"] == 26 and summary["batch"] is True and summary["near"] == res.summary()["near"]
    table = list(csv.DictReader(io.StringIO(run("dedup", "--batch", SAMPLE, "--out", "-", "--format", "csv",
                                                "-j", "1").stdout)))
    assert len(table) == 26 and set(table[0]) == {"url", "digest", "simhash", "status", "cluster", "canonical",
                                                  "match", "distance", "version"}
    assert one_line_error(run("dedup", "--batch", SAMPLE, "--db", tmp_path / "x.db"), 2)
    assert one_line_error(run("dedup", SAMPLE), 2)

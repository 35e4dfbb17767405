"""Host figures per origin (issue 38, item 7): a site and its mirror on another port of one
host are two origins, each with its own duplicate rate, trap flag and budget; the mirror is
learned as an alias of the site; stores written before are migrated in place."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from checks import STORE_KINDS, store_target
from click.testing import CliRunner
from fastapi.testclient import TestClient

from neardup import Detector
from neardup.cli.main import main
from neardup.service import create_app
from neardup.urls import origin_of

SITE, MIRROR = "http://127.0.0.1:8701", "http://127.0.0.1:8702"
WORDS = [f"w{i}" for i in range(4000)]


def doc(i: int) -> str:
    """A distinct document of 300 words (its own title and text)."""
    rng = random.Random(i)
    text = " ".join(rng.choice(WORDS) for _ in range(300))
    return f"<html><head><title>Chapter {i}: {rng.choice(WORDS)}</title></head><body><article><p>{text}</p>" \
           "</article></body></html>"


def crawl_site_and_mirror(det: Detector, mirrored: int = 10, pages: int = 12) -> None:
    for i in range(pages):
        assert det.add(f"{SITE}/doc/{i}.html", doc(i), fetched_at=1.7e9 + i).status == "new"
    for i in range(mirrored):
        assert det.add(f"{MIRROR}/doc/{i}.html", doc(i), fetched_at=1.8e9 + i).status == "exact"


@pytest.fixture(params=STORE_KINDS)
def target(request, tmp_path) -> str:
    return store_target(request, tmp_path)

def test_a_mirror_on_another_port_is_its_own_origin(target):
    with Detector.open(target) as det:
        crawl_site_and_mirror(det)
        rows = {r["host"]: r for r in det.hosts()}
        assert set(rows) == {"127.0.0.1:8701", "127.0.0.1:8702"}
        site, mirror = rows["127.0.0.1:8701"], rows["127.0.0.1:8702"]
        # the mirror's copies do not make the original site a duplicate-ridden trap
        assert (site["pages"], site["duplicates"], site["duplicate_rate"]) == (12, 0, 0.0)
        assert site["trap"] is False and site["budget_factor"] == 1.0
        assert (mirror["pages"], mirror["exact"], mirror["duplicate_rate"]) == (10, 10, 1.0)
        # (its budget factor counts the distinct contents within the origin: 10 of 10)
        assert mirror["distinct_contents"] == 10
        one = det.host("127.0.0.1:8701")
        assert one is not None and one["pages"] == 12
        assert det.host("127.0.0.1") is None  # the host name alone is no origin of these pages
        assert det.host("127.0.0.1:8703") is None


def test_the_mirror_is_learned_as_an_alias_and_skipped_before_the_fetch(target):
    with Detector.open(target) as det:
        crawl_site_and_mirror(det)
        names = [r.name for r in det.rules()]
        assert "host-alias:127.0.0.1:8701=127.0.0.1:8702" in names, names
        # a mirror page not fetched yet: its path is known on the site
        decision = det.should_fetch(f"{MIRROR}/doc/11.html")
        assert (decision.fetch, decision.reason) == (False, "rule")
        assert decision.known_url == f"{SITE}/doc/11.html"
        assert decision.rules == ("host-alias:127.0.0.1:8701=127.0.0.1:8702",)
        # the rule is listed under both origins, as should_fetch applies it
        for origin in ("127.0.0.1:8701", "127.0.0.1:8702"):
            row = det.host(origin)
            assert row is not None and "host-alias:127.0.0.1:8701=127.0.0.1:8702" in [r["rule"] for r in row["rules"]]
        # a path the site does not have is fetched from the mirror
        assert det.should_fetch(f"{MIRROR}/doc/99.html").fetch


def test_origins_on_the_service_and_the_cli(tmp_path):
    db = tmp_path / "s.db"
    with Detector.open(db) as det:
        crawl_site_and_mirror(det)
        with TestClient(create_app(det)) as c:
            got = c.get("/v1/hosts/127.0.0.1:8702")
            assert got.status_code == 200 and got.json()["duplicate_rate"] == 1.0
            assert c.get("/v1/hosts/127.0.0.1:8701").json()["duplicate_rate"] == 0.0
            assert c.get("/v1/hosts/127.0.0.1").status_code == 404
            rules = c.get("/v1/hosts/127.0.0.1:8702/rules").json()
            assert rules["host"] == "127.0.0.1:8702"
            assert "host-alias:127.0.0.1:8701=127.0.0.1:8702" in [r["rule"] for r in rules["rules"]]
    out = CliRunner().invoke(main, ["hosts", "--db", str(db), "--format", "jsonl"])
    assert out.exit_code == 0, out.output
    listed = {json.loads(line)["host"]: json.loads(line) for line in out.stdout.splitlines() if line.strip()}
    assert set(listed) == {"127.0.0.1:8701", "127.0.0.1:8702"}
    assert listed["127.0.0.1:8701"]["duplicate_rate"] == 0.0


def test_origin_keys():
    assert origin_of("http://127.0.0.1:8701/a") == "127.0.0.1:8701"
    assert origin_of("https://a.example/") == origin_of("http://a.example:80/") == "a.example"
    assert origin_of("https://a.example:80/") == "a.example:80"  # port 80 is not https's default
    assert origin_of("http://[2001:db8::1]:8080/") == "[2001:db8::1]:8080"
    assert origin_of("file:///tmp/x.html") == ""


def _set_schema_7(target: str) -> None:
    """Make ``target`` look as schema 7 wrote it: hosts without their port, no payloads table."""
    if target.startswith("postgresql://") or target.startswith("postgres://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as con:
            con.execute("UPDATE pages SET host = '127.0.0.1' WHERE url LIKE 'http://127.0.0.1:%'")
            con.execute("DROP TABLE payloads")
            con.execute("UPDATE neardup_schema SET version = 7")
        return
    lite = sqlite3.connect(target, isolation_level=None)
    try:
        lite.execute("UPDATE pages SET host = '127.0.0.1' WHERE url LIKE 'http://127.0.0.1:%'")
        lite.execute("DROP TABLE payloads")
        lite.execute("PRAGMA user_version=7")
    finally:
        lite.close()


@pytest.mark.parametrize("target", ["sqlite", "postgres"], indirect=True)  # SQL schemas only
def test_a_store_of_schema_7_is_migrated_to_origins(target):
    with Detector.open(target) as det:
        crawl_site_and_mirror(det)
        det.add("https://a.example/x", doc(100))
    _set_schema_7(target)
    with Detector.open(target) as det:
        rows = {r["host"]: r["pages"] for r in det.hosts()}
        assert rows == {"127.0.0.1:8701": 12, "127.0.0.1:8702": 10, "a.example": 1}
        # the verdicts read the stored pages as before
        assert det.check(f"{MIRROR}/doc/11.html", doc(11)).status == "exact"
        assert det.check(f"{SITE}/doc/50.html", doc(50)).status == "new"


def test_the_same_host_title_rule_still_spans_the_ports(tmp_path: Path):
    """Matching compares sites by host name: a page and another document's page on the
    mirror's port are held apart by their titles as on one origin."""
    det = Detector()
    base = doc(1)
    det.add(f"{SITE}/a.html", base)
    other_title = base.replace("<title>Chapter 1:", "<title>Appendix Z:")
    on_mirror = det.check(f"{MIRROR}/b.html", other_title)
    on_site = det.check(f"{SITE}/b.html", other_title)
    assert on_mirror.status == on_site.status

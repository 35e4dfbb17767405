"""Decisions before the fetch (Detector.should_fetch), learned URL rules on stored
duplicates (Detector.rules) and per-host signals (Detector.hosts / host), on the sample."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
from checks import present

from neardup import Detector
from neardup.model import FetchDecision

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


@pytest.fixture(scope="module")
def fps():
    """Fingerprints of one capture per sample group, by group (computed once)."""
    det = Detector()
    out = {}
    with open(SAMPLE / "urls.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["group"] in out or "mirror" in row["file"]:
                continue
            html = gzip.decompress((SAMPLE / row["file"]).read_bytes())
            out[row["group"]] = (row["url"], det.fingerprint(html, row["url"]))
    return out


def politico(fps, det, *, t0=1_000_000.0):
    """The three politico articles, each under its URL and two session-id variants."""
    t = t0
    verdicts = []
    for group in ("politico-vp-debate", "politico-student-debt", "politico-morning-money"):
        url, fp = fps[group]
        url = url.replace("http://", "https://")
        for variant in ("", "?sessionid=1", "?sessionid=2&src=feed"):
            verdicts.append(det.add_fingerprint(url + variant, fp, fetched_at=t))
            t += 1
    return verdicts


def test_rules_from_sample_duplicates_and_skips_naming_them(fps):
    det = Detector()
    statuses = [v.status for v in politico(fps, det)]
    assert statuses == ["new", "exact", "exact"] * 3
    rules = det.rules("www.politico.com")
    assert [r.name for r in rules] == ["drop-param:sessionid", "drop-param:src"]
    assert [r.support for r in rules] == [3, 3]  # the src variants also carry a session id
    url = fps["politico-student-debt"][0]
    d = det.should_fetch(url + "?src=mail&sessionid=99&utm_source=x")  # utm_*: dropped from every key
    assert (d.fetch, d.reason) == (False, "rule")
    assert d.known_url == url and d.canonical_url == url
    assert set(d.rules) == {"drop-param:sessionid", "drop-param:src"}
    # a distinct page of the same host is fetched, with or without a session id
    other = "https://www.politico.com/news/2022/10/18/another-article"
    assert det.should_fetch(other + "?sessionid=5").reason == "unknown"
    # the rules of one host do not apply to another
    assert det.should_fetch(fps["cnbc-cybersecurity"][0] + "?sessionid=5").reason == "unknown"
    assert FetchDecision.from_dict(d.to_dict()) == d


def test_a_parameter_that_changes_the_content_is_never_learned(fps):
    det = Detector()
    politico(fps, det)
    base, _ = fps["politico-vp-debate"]
    base = base.replace("http://", "https://")
    # ?part=N serves other articles: never a rule, even with many same-content merges
    for i, group in enumerate(["politico-student-debt", "politico-morning-money", "politico-vp-debate"] * 2):
        det.add_fingerprint(f"{base}?part={i}", fps[group][1])
    assert "drop-param:part" not in [r.name for r in det.rules()]
    assert det.should_fetch(f"{base}?part=77").reason == "unknown"
    # a fetch that contradicts a rule drops it at once
    det.add_fingerprint(f"{base}?sessionid=3", fps["cnbc-cybersecurity"][1])
    assert "drop-param:sessionid" not in [r.name for r in det.rules()]
    assert det.should_fetch(f"{base}?sessionid=42").fetch is True


def test_known_urls_and_known_duplicates(fps):
    det = Detector()
    url, fp = fps["newyorker-teas"]
    mirror = "https://news-mirror.example.net/newyorker/humor/daily-shouts/teas-you-should-probably-get-rid-of-already"
    det.add_fingerprint(url, fp, fetched_at=1000.0)
    assert det.add_fingerprint(mirror, fp, fetched_at=2000.0).status == "exact"
    d = det.should_fetch(mirror)
    assert (d.fetch, d.reason, d.canonical_url) == (False, "known-duplicate", url)
    d = det.should_fetch(url)
    assert (d.fetch, d.reason, d.fetched_at) == (True, "known", 1000.0)
    assert det.should_fetch(url, max_age=10 ** 12).reason == "fresh"
    assert det.should_fetch(url + "?x=1").reason == "unknown"


def calendar(fps, det, n=12, t0=1_000_000.0):
    _, fp = fps["deadspin-trump-booed"]
    return [det.add_fingerprint(f"https://trap.example/calendar?date=2021-01-{d:02d}", fp, fetched_at=t0 + d)
            for d in range(1, n + 1)]


def test_host_signals_and_traps(fps):
    det = Detector()
    politico(fps, det)
    calendar(fps, det)
    url, fp = fps["cnbc-cybersecurity"]
    det.add_fingerprint(url, fp, fetched_at=1_000_500.0)
    rows = det.hosts(at=1_000_600.0)
    assert [r["host"] for r in rows] == ["trap.example", "www.politico.com", "www.cnbc.com"]
    trap, pol, cnbc = rows
    assert (trap["pages"], trap["duplicates"], trap["distinct_contents"], trap["trap"]) == (12, 11, 1, True)
    assert trap["duplicate_rate"] == round(11 / 12, 4) and trap["budget_factor"] == round(1 / 12, 4)
    assert trap["largest_cluster"]["urls_from_host"] == 12 and trap["largest_cluster"]["size"] == 12
    assert trap["largest_cluster"]["joins_per_hour"] > 0
    assert (pol["pages"], pol["exact"], pol["distinct_contents"], pol["trap"]) == (9, 6, 3, False)
    assert cnbc["duplicate_rate"] == 0.0 and cnbc["budget_factor"] == 1.0
    assert [r["host"] for r in det.hosts(top=1, sort="pages")] == ["trap.example"]
    assert [r["host"] for r in det.hosts(sort="distinct_contents")][0] == "www.politico.com"
    # sliding window: only pages fetched in the last 100 s before `at`
    assert [r["host"] for r in det.hosts(window=100, at=1_000_600.0)] == ["www.cnbc.com"]
    one = present(det.host("TRAP.example", at=1_000_600.0))
    assert one["host"] == "trap.example" and one["rules"][0]["rule"] == "drop-param:date"
    assert det.host("nowhere.example") is None


def test_trap_stops_by_rule_and_host_budget(fps):
    det = Detector()
    verdicts = calendar(fps, det, n=4)
    assert [v.status for v in verdicts] == ["new", "exact", "exact", "exact"]
    d = det.should_fetch("https://trap.example/calendar?date=2021-02-01")
    assert (d.fetch, d.reason, d.rules) == (False, "rule", ("drop-param:date",))
    # the host budget: over 50% duplicates with at least 4 pages stops every new URL of the host
    d = det.should_fetch("https://trap.example/other", host_max_duplicate_rate=0.5, host_min_pages=4)
    assert (d.fetch, d.reason, d.host_duplicate_rate) == (False, "host-budget", 0.75)
    assert det.should_fetch("https://trap.example/other", host_max_duplicate_rate=0.5, host_min_pages=5).fetch


def test_rules_survive_reopening_and_expiry_forgets(fps, tmp_path):
    db = tmp_path / "crawl.db"
    with Detector.open(db) as det:
        politico(fps, det, t0=1000.0)
        names = [r.name for r in det.rules()]
    with Detector.open(db) as det:
        assert [r.name for r in det.rules()] == names == [r.name for r in det.learn_rules()]
        assert det.expire(older_than=0) == 9
        assert det.rules() == []
        assert det.should_fetch(fps["politico-student-debt"][0] + "?sessionid=5").reason == "unknown"


def test_should_fetch_refuses_bad_urls():
    from neardup.errors import URLError

    with pytest.raises(URLError):
        Detector().should_fetch("not a url")

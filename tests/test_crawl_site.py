"""A real site, real crawlers, two crawls (issue 38): the small version of
``benchmarks/crawl_site.py`` run in CI.

Sphinx's manual (Debian package ``sphinx-doc``: 30 of its pages, the home page's links first)
served with a mirror, print pages, session ids passed on to every link, tracking parameters,
an endless events calendar, a timestamp and a rotating ad inside every article; crawled
twice by Scrapy through ``neardup.scrapy`` into one store, once without neardup, and once by
GNU Wget into a WARC read by ``neardup dedup``. The ground truth is the content each URL
serves (``benchmarks/_noisy_docs.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "crawl_site.py"


@pytest.fixture(scope="module")
def crawls(sphinx_docs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("scrapy")
    if shutil.which("wget") is None:
        message = "GNU wget is not installed (apt-get install wget; .ci/run does it)"
        if os.environ.get("NEARDUP_REQUIRE_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path_factory.mktemp("crawl_site") / "crawl.json"
    done = subprocess.run([sys.executable, str(BENCH), "--docs", str(sphinx_docs), "--pages", "30",
                           "--crawlers", "scrapy,wget", "--json", str(out)],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _row(data: dict[str, Any], crawler: str, crawl: int) -> dict[str, Any]:
    return next(r for r in data["results"] if r["crawler"] == crawler and r["crawl"] == crawl)


@pytest.mark.parametrize(("crawler", "crawl"), [("scrapy", 1), ("scrapy", 2), ("wget", 1)])
def test_no_content_lost_and_no_false_drop(crawls, crawler, crawl):
    row = _row(crawls, crawler, crawl)
    assert row["fetched"] > 0
    assert row["content_lost"] == 0, row["lost"]
    assert row["false_drops"] == 0, row["false"]


def test_scrapy_finds_the_duplicates_and_skips_before_the_fetch(crawls):
    first = _row(crawls, "scrapy", 1)
    assert first["duplicates_present"] >= 10  # print pages, index spellings, the mirror, session ids
    # under 1% of the duplicates present (the full site: 0.4%, a tiny table of contents whose
    # reading flips with the length of the ad beside it); one allowed on this small site
    assert first["missed"] <= max(1, 0.01 * first["duplicates_present"]), first["missed_urls"]
    assert first["skipped"].get("rule", 0) > first["fetched"]  # session-id variants, print pages...
    # the calendar (an endless numbered trap) is stopped within its explore budget
    assert 1 <= first["calendar_fetched"] <= 21, first["calendar_fetched"]
    assert first["skipped"].get("series", 0) >= 1


def test_the_recrawl_reaches_what_the_first_crawl_kept(crawls):
    first, second = _row(crawls, "scrapy", 1), _row(crawls, "scrapy", 2)
    assert len(first["kept"]) >= 25
    assert second["not_reached_count"] == 0, second["not_reached"]
    # the copies found in the first crawl are skipped before the fetch in the second
    assert second["skipped"].get("known-duplicate", 0) > 0
    assert second["fetched"] < first["fetched"]


def test_refetches_of_unchanged_pages_are_unchanged(crawls):
    second = _row(crawls, "scrapy", 2)
    refetched = second["changed"] + second["unchanged"]
    assert refetched >= 25
    # under 5% on the full site (benchmarks/crawl_site.py: 0 to 1 of 116-122); on this small one a
    # tiny page whose reading flips with the length of the rotating ad beside it (a table of
    # contents of 4 links, a search page) is one re-fetch in 50: up to 3 of them allowed
    assert second["changed"] <= max(3, 0.05 * refetched), second


def test_rules_last_and_a_static_site_has_no_redesign(crawls):
    for crawl in (1, 2):
        row = _row(crawls, "scrapy", crawl)
        assert "drop-param:sessionid" in row["rules"], row["rules"]
        assert "index-file:index.html" in row["rules"], row["rules"]
        assert all(h["redesigns"] == [] for h in row["hosts"]), row["hosts"]
        # the site and its mirror are two origins: the mirror's copies count on the mirror
        origins = {h["host"] for h in row["hosts"]}
        assert len(origins) == 2, origins


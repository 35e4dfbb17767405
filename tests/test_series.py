"""Numbered series (issue 38 item 2): a calendar whose month is in the URL, the title and the
text is a trap caught within its explore budget, persistently; numbered articles are not."""

from __future__ import annotations

import re

from neardup import Detector
from neardup.crawl.series import SERIES_BUDGET, SeriesTracker, series_key
from neardup.fingerprint.extract import extract_main_content

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def sentences(sample_pages) -> list[str]:
    """Real sentences (of the sample's news pages) to make events of."""
    out: list[str] = []
    for sample in sorted(sample_pages.values(), key=lambda s: s.name):
        text = extract_main_content(sample.content, extractor="hybrid").text
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 60 < len(s.strip()) < 200]
    return out


def month_page(n: int, events: list[str]) -> str:
    """Month ``n`` of an events calendar: its name in the title and the text, and the events
    of a window that slides by two a month (consecutive months share most of them)."""
    name = f"{MONTHS[n % 12]} {2000 + n // 12}"
    shown = [events[(2 * n + i) % len(events)] for i in range(10)]
    items = "".join(f"<li><b>{name}, day {3 + 2 * i}:</b> {e}</li>" for i, e in enumerate(shown))
    return (f"<html><head><title>Events in {name} | City Hall</title></head><body><main><h1>Events in {name}</h1>"
            f"<p>What is on in {name}. Every event of the month, with its day and place.</p><ul>{items}</ul>"
            f'<p><a href="/events?month={n - 1}">Previous month</a> <a href="/events?month={n + 1}">Next month</a>'
            "</p></main></body></html>")


def test_a_calendar_trap_is_stopped_within_its_budget(sample_pages, tmp_path):
    events = sentences(sample_pages)[:40]
    assert len(events) == 40
    db = tmp_path / "crawl.db"
    fetched = 0
    with Detector.open(db) as det:
        for n in range(200):  # a crawler following "next month" without end
            url = f"https://city.example/events?month={n}"
            decision = det.should_fetch(url)
            if not decision.fetch:
                assert decision.reason == "series" and decision.rules == ("series:city.example/events?month=N",)
                break
            det.add(url, month_page(n, events), fetched_at=1.7e9 + n)
            fetched += 1
        assert fetched <= SERIES_BUDGET
        host = det.host("city.example")
        assert host is not None and host["trap"] and host["series_traps"][0]["members"] == fetched
        assert host["budget_factor"] < 0.2
    with Detector.open(db, create=False) as det:  # another process, the next crawl: still a trap
        assert det.should_fetch("https://city.example/events?month=999").reason == "series"
        assert det.should_fetch("https://city.example/events?month=3").reason in ("known", "fresh")


def test_numbered_articles_are_no_series(sample_pages):
    det = Detector()
    pages = sorted(sample_pages.values(), key=lambda s: s.name)
    for i, sample in enumerate(pages):
        det.add(f"https://news.example/article/{i}", sample.content, fetched_at=1.7e9 + i)
    assert det.should_fetch("https://news.example/article/999").reason == "unknown"
    host = det.host("news.example")
    assert host is not None and host["series_traps"] == []


def test_series_keys_and_a_tracker_of_unrelated_pages():
    assert series_key("https://a.example/2024/05/01/x.html") == "a.example/N/N/N/x.html"
    assert series_key("https://a.example/x?q=abc") is None
    tracker = SeriesTracker()
    value = 0x9E37_79B9_7F4A_7C15
    for i in range(100):  # 100 numbered pages of unrelated contents (values far apart)
        value = (value * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        tracker.observe(f"https://a.example/p/{i}", value)
    assert tracker.trap("https://a.example/p/100") is None and tracker.traps() == []

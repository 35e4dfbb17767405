"""neardup.scrapy: real Scrapy crawls (`scrapy crawl site` of examples/scrapy in a
subprocess) of a local http.server serving the sample with planted duplicate URLs (session
ids, utm_* parameters, index.html, print versions, a mirror host) and a calendar trap; and
the middleware's contract in process (NotConfigured, non-HTML untouched)."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

scrapy = pytest.importorskip("scrapy")

from checks import present  # noqa: E402
from scrapy import Spider  # noqa: E402
from scrapy.exceptions import IgnoreRequest, NotConfigured  # noqa: E402
from scrapy.http import HtmlResponse, Request, TextResponse  # noqa: E402
from scrapy.statscollectors import MemoryStatsCollector  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from neardup import Detector  # noqa: E402
from neardup.errors import NeardupError  # noqa: E402
from neardup.scrapy import NeardupDownloaderMiddleware, NeardupSpiderMiddleware  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "scrapy"
sys.path.insert(0, str(EXAMPLE))
serve_sample = importlib.import_module("serve_sample")  # examples/scrapy, on the path

sys.path.remove(str(EXAMPLE))

ARTICLES = sorted(serve_sample.load_articles())
KINDS = ("?sessionid=", "/index.html", "/print/")  # ?utm_* is the article's own URL (tracking parameters)


@pytest.fixture(scope="module")
def site():
    srv = serve_sample.make_server(0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def crawl(site, tmp_path, *settings):
    stats, items = tmp_path / "stats.json", tmp_path / "items.jsonl"
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-s", f"SITE_URL={site}",
           "-s", f"NEARDUP_DB={tmp_path / 'crawl.db'}", "-s", f"STATS_OUT={stats}", "-O", str(items),
           "-s", "LOG_LEVEL=WARNING"]
    for s in settings:
        cmd += ["-s", s]
    run = subprocess.run(cmd, cwd=EXAMPLE, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(stats.read_text()), [json.loads(line) for line in items.read_text().splitlines()]


def on_main(items, site):
    host = urlsplit(site).netloc
    return [i for i in items if urlsplit(i["url"]).netloc == host]


def test_tag_and_follow_duplicates_rules_stop_variants_and_the_trap(site, tmp_path):
    stats, items = crawl(site, tmp_path, "NEARDUP_ON_DUPLICATE=tag", "NEARDUP_FOLLOW_DUPLICATES=True")
    main = on_main(items, site)
    by_url = {i["url"]: i["status"] for i in main}
    # every distinct content fetched, found new: 0 wrongly skipped; on the site or on its mirror,
    # another origin of the same server: once learned as an alias (host-alias), the origin whose
    # copy came first keeps the content and the other's URL is skipped before the fetch
    mirror = site.replace("127.0.0.1", serve_sample.MIRROR_HOST)
    everywhere = {i["url"]: i["status"] for i in items}
    assert all("new" in (everywhere.get(f"{site}a/{g}/"), everywhere.get(f"{mirror}a/{g}/")) for g in ARTICLES)
    assert by_url[f"{site}calendar/?date=2021-01-01"] == "new"
    assert stats["neardup/new"] == len(ARTICLES) + 1
    # variants: fetched (and found exact) only until their rule had its support (3 merges)
    variants = [u for u in by_url if any(k in u for k in KINDS)]
    assert all(by_url[u] == "exact" for u in variants)
    per_kind = {k: sum(k in u for u in variants) for k in KINDS}
    assert all(n <= 4 for n in per_kind.values()), per_kind
    requested = len(ARTICLES) * len(KINDS)
    assert 1 - len(variants) / requested >= 0.7
    # ?utm_source=...: the store drops tracking parameters, so it is the article's own URL,
    # fetched in this crawl already: skipped before the fetch
    assert not any("utm_source" in u for u in by_url)
    assert stats["neardup/skipped_before_fetch/this-crawl"] == len(ARTICLES)
    # the calendar trap stops by rule (drop-param:date) after a few pages
    calendar = [u for u in by_url if "/calendar/" in u]
    assert 2 <= len(calendar) <= 5
    skipped = {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("neardup/skipped_before_fetch/")}
    assert stats["neardup/skipped_before_fetch"] == sum(skipped.values()) and skipped["rule"] >= 40
    assert set(skipped) <= {"rule", "known-duplicate", "this-crawl"}
    assert stats["neardup/tagged"] == stats["neardup/exact"] + stats["neardup/near"]
    assert stats["neardup/not_html"] == 2  # the style sheet, on both host names
    assert stats.get("neardup/links_not_followed", 0) == 0
    with Detector.open(tmp_path / "crawl.db") as det:
        host = urlsplit(site).netloc  # rules and host figures are per origin: host and port
        rules = {r.name for r in det.rules(host)}
        assert {"index-file:index.html", "drop-segment:print", "drop-param:date"} <= rules
        assert any("sessionid" in r for r in rules) and not any("utm_source" in r for r in rules)
        assert f"host-alias:{host}={urlsplit(mirror).netloc}" in rules  # the mirror, learned
        d = det.should_fetch(f"{site}print/a/{ARTICLES[-1]}/index.html?utm_source=x&sessionid=5")
        assert (d.fetch, d.reason) == (False, "rule")
        assert d.known_url in (f"{site}a/{ARTICLES[-1]}/", f"{mirror}a/{ARTICLES[-1]}/")
        rows = {h["host"]: h for h in det.hosts(sort="pages")}
        assert set(rows) == {host, urlsplit(mirror).netloc}
        # every content is behind the URLs of one origin or the other (or both)
        assert rows[host]["distinct_contents"] <= len(ARTICLES) + 1
        assert sum(r["distinct_contents"] for r in rows.values()) >= len(ARTICLES) + 1


def test_drop_duplicates_and_do_not_follow_them(site, tmp_path):
    stats, items = crawl(site, tmp_path)  # the example's settings: drop, links of duplicates not followed
    statuses = {i["status"] for i in items}
    assert statuses <= {"new", "empty"}  # the spider never sees a duplicate
    main = {i["url"] for i in on_main(items, site)}
    assert {f"{site}a/{g}/" for g in ARTICLES} <= main
    assert stats["neardup/dropped"] == stats["neardup/exact"] + stats["neardup/near"] > 0
    assert stats["neardup/skipped_before_fetch"] > 0
    # the trap: page 2 is a near duplicate, dropped, so its link to page 3 is never seen
    assert stats["neardup/near"] == 1 and sum("/calendar/" in u for u in main) == 1


def run(coro):
    """A middleware coroutine run to its end (outside a crawl: on a fresh asyncio loop)."""
    return asyncio.run(coro)


class _Spider(Spider):
    name = "t"


def test_not_configured_and_untouched_responses(tmp_path):
    with pytest.raises(NotConfigured):
        NeardupDownloaderMiddleware.from_crawler(get_crawler(_Spider, {}))
    with pytest.raises(NotConfigured):
        NeardupDownloaderMiddleware.from_crawler(
            get_crawler(_Spider, {"NEARDUP_DB": str(tmp_path / "x.db"), "NEARDUP_ENABLED": False}))
    with pytest.raises(NotConfigured):
        NeardupSpiderMiddleware.from_crawler(get_crawler(_Spider, {"NEARDUP_ENABLED": False}))
    crawler = get_crawler(_Spider, {"NEARDUP_DB": str(tmp_path / "x.db"), "NEARDUP_ON_DUPLICATE": "tag",
                                    "NEARDUP_PROCESS": False, "NEARDUP_GC_FREEZE": False})
    mw = NeardupDownloaderMiddleware.from_crawler(crawler)
    assert mw.on_duplicate == "tag" and isinstance(mw.detector, Detector) and mw.mode == "local"
    mw.close()
    # every decision setting of DetectorSettings, as NEARDUP_<FIELD>
    mw = NeardupDownloaderMiddleware.from_crawler(get_crawler(_Spider, {
        "NEARDUP_DB": str(tmp_path / "y.db"), "NEARDUP_PROCESS": False, "NEARDUP_GC_FREEZE": False,
        "NEARDUP_K": "9", "NEARDUP_VERIFY": "none", "NEARDUP_EXTRACTOR": "fast", "NEARDUP_MIN_TOKENS": 5}))
    assert (mw.detector.settings.k, mw.detector.settings.verify, mw.detector.settings.min_tokens) == (9, None, 5)
    mw.close()
    with pytest.raises(NeardupError, match="method"):
        NeardupDownloaderMiddleware.from_crawler(get_crawler(_Spider, {
            "NEARDUP_DB": str(tmp_path / "z.db"), "NEARDUP_PROCESS": False, "NEARDUP_METHOD": "nope"}))

    stats = MemoryStatsCollector(crawler)
    mw = NeardupDownloaderMiddleware(Detector(), stats, on_duplicate="drop")
    text = "<html><body><article>" + " ".join(f"word{i}" for i in range(400)) + "</article></body></html>"
    css = TextResponse("https://a.example/s.css", body=b"body{}", headers={"Content-Type": "text/css"})
    req = Request("https://a.example/s.css")
    assert mw.mode == "local"
    assert run(mw.process_response(req, css)) is css and "neardup" not in req.meta
    r404 = HtmlResponse("https://a.example/x", status=404, body=text.encode(), headers={"Content-Type": "text/html"})
    assert run(mw.process_response(Request(r404.url), r404)) is r404
    page = HtmlResponse("https://a.example/a", body=text.encode(), headers={"Content-Type": "text/html"})
    req = Request(page.url)
    assert run(mw.process_response(req, page)) is page and req.meta["neardup"]["status"] == "new"
    copy = HtmlResponse("https://a.example/b", body=text.encode(), headers={"Content-Type": "text/html"})
    with pytest.raises(IgnoreRequest):
        run(mw.process_response(Request(copy.url), copy))
    # known duplicate: skipped before the fetch, its canonical requested in its place (once: no chains)
    instead = run(mw.process_request(Request("https://a.example/b")))
    assert instead.url == "https://a.example/a" and instead.meta["neardup_instead_of"] == "https://a.example/b"
    with pytest.raises(IgnoreRequest):
        run(mw.process_request(Request("https://a.example/b", meta={"neardup_instead_of": "https://a.example/c"})))
    assert run(mw.process_request(Request("https://a.example/b", meta={"neardup_ignore": True}))) is None
    got = stats.get_stats()
    assert (got["neardup/not_html"], got["neardup/not_200"], got["neardup/new"], got["neardup/exact"],
            got["neardup/dropped"], got["neardup/skipped_before_fetch/known-duplicate"]) == (1, 1, 1, 1, 1, 2)
    assert got["neardup/canonical_scheduled"] == 1
    mw.close()

    smw = NeardupSpiderMiddleware(stats, follow_duplicates=False)
    dup = HtmlResponse("https://a.example/b", body=b"<html></html>", request=Request(
        "https://a.example/b", meta={"neardup": {"status": "exact"}}))
    out = list(smw.process_spider_output(dup, [Request("https://a.example/c"), {"item": 1}]))
    assert out == [{"item": 1}] and stats.get_value("neardup/links_not_followed") == 1


def _canonical_page(url, extra=""):
    body = " ".join(f"word{i}" for i in range(400)) + extra
    html = (f'<html><head><link rel="canonical" href="https://d.example/index.html"></head>'
            f"<body><article><p>{body}</p></article></body></html>")
    return HtmlResponse(url, body=html.encode(), headers={"Content-Type": "text/html"})


def test_a_recrawl_reaches_the_original_and_the_canonical_copy():
    """``/`` is the original (new); ``/index.html``, its near copy, is what every copy names
    with rel=canonical, so the cluster's canonical moves to it. The recrawl from the seed ``/``
    fetches ``/`` (an original is never skipped as a copy of its own cluster) and keeps
    ``/index.html`` (a canonical copy is never dropped); a session-id copy is replaced by
    the canonical."""
    stats = MemoryStatsCollector(get_crawler(_Spider, {}))
    det = Detector()
    mw = NeardupDownloaderMiddleware(det, stats, on_duplicate="drop")
    seed = Request("https://d.example/")
    assert run(mw.process_response(seed, _canonical_page(seed.url))) is not None
    index = Request("https://d.example/index.html")
    kept = run(mw.process_response(index, _canonical_page(index.url, " extra words here")))
    assert kept is not None and index.meta["neardup"]["status"] == "near"
    assert index.meta["neardup"]["canonical_url"] == "https://d.example/index.html"
    session = Request("https://d.example/?sessionid=1")
    with pytest.raises(IgnoreRequest):  # the copy is dropped (its canonical is another page)
        run(mw.process_response(session, _canonical_page(session.url, " extra words here")))
    mw.close()
    time.sleep(0.01)
    mw = NeardupDownloaderMiddleware(det, stats, on_duplicate="drop")  # the second crawl
    assert run(mw.process_request(Request("https://d.example/"))) is None  # fetched: known
    assert run(mw.process_request(Request("https://d.example/index.html"))) is None
    again = Request("https://d.example/index.html")
    assert run(mw.process_response(again, _canonical_page(again.url, " extra words here"))) is not None
    instead = run(mw.process_request(Request("https://d.example/?sessionid=1")))
    assert instead is not None and instead.url == "https://d.example/index.html"
    smw = NeardupSpiderMiddleware(stats, follow_duplicates=False)
    canon = HtmlResponse(again.url, body=b"<html></html>", request=again)
    assert list(smw.process_spider_output(canon, [Request("https://d.example/next")]))  # its links followed
    mw.close()


class _Broken(Detector):
    """A detector that fails inside (not with a NeardupError) for pages and URLs with "bad"."""

    def fingerprint(self, content, url=None, headers=None):
        if url and "bad" in url:
            raise RuntimeError("kernel crashed")
        return super().fingerprint(content, url, headers)

    def should_fetch(self, url, **kwargs):
        if "bad" in url:
            raise OSError("store gone")
        return super().should_fetch(url, **kwargs)


def _page(url, words=400, html=True, prefix="word"):
    text = "<html><body><article>" + " ".join(f"{prefix}{i}" for i in range(words)) + "</article></body></html>"
    return HtmlResponse(url, body=text.encode(), headers={"Content-Type": "text/html" if html else "text/plain"})


def test_errors_inside_neardup_never_stop_the_crawl():
    stats = MemoryStatsCollector(get_crawler(_Spider, {}))
    mw = NeardupDownloaderMiddleware(_Broken(), stats, on_duplicate="drop")
    page = _page("https://a.example/bad")
    req = Request(page.url)
    assert run(mw.process_response(req, page)) is page and "neardup" not in req.meta  # passes untouched
    assert run(mw.process_request(Request("https://a.example/bad"))) is None  # fetched
    good = _page("https://a.example/good")
    assert run(mw.process_response(Request(good.url), good)) is good
    got = stats.get_stats()
    assert (got["neardup/error"], got["neardup/should_fetch_error"], got["neardup/new"]) == (1, 1, 1)
    mw.close()


def test_detector_process(tmp_path):
    """The default arrangement: the detector in a process of its own; its store errors stop
    the crawl before it starts; its page errors pass the page."""
    settings = {"NEARDUP_DB": str(tmp_path / "p.db"), "NEARDUP_EXTRACTOR": "fast"}
    crawler = get_crawler(_Spider, settings)
    gc.unfreeze()
    mw = NeardupDownloaderMiddleware.from_crawler(crawler)
    assert mw.mode == "process" and mw.detector is None
    assert gc.get_freeze_count() > 0  # NEARDUP_GC_FREEZE: what is loaded is not scanned again
    gc.unfreeze()
    stats = crawler.stats
    stats.open_spider()
    page, copy = _page("https://a.example/a"), _page("https://a.example/b")
    req = Request(page.url)
    assert run(mw.process_response(req, page)) is page and req.meta["neardup"]["status"] == "new"
    with pytest.raises(IgnoreRequest):
        run(mw.process_response(Request(copy.url), copy))
    instead = run(mw.process_request(Request("https://a.example/b")))  # known duplicate: its canonical instead
    assert instead is not None and instead.url == "https://a.example/a"
    binary = HtmlResponse("https://a.example/c", body=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40,
                          headers={"Content-Type": "text/html"})
    assert run(mw.process_response(Request(binary.url), binary)) is binary
    got = stats.get_stats()
    assert (got["neardup/new"], got["neardup/exact"], got["neardup/error"]) == (1, 1, 1)
    # responses that arrive while the process works go in one transaction, verdicts in order
    many = [_page(f"https://b.example/{i}", words=300, prefix="other") for i in range(6)]  # not an excerpt of a
    many[3] = HtmlResponse("https://b.example/bad", body=binary.body, headers={"Content-Type": "text/html"})

    async def together():
        return await asyncio.gather(*(mw.process_response(Request(r.url), r) for r in many), return_exceptions=True)

    batches = mw.batches
    out = run(together())
    assert mw.batches - batches < len(many)
    assert out[0] is many[0] and out[3] is many[3]
    assert all(isinstance(out[i], IgnoreRequest) for i in (1, 2, 4, 5))
    got = stats.get_stats()
    assert (got["neardup/new"], got["neardup/exact"], got["neardup/error"]) == (2, 5, 2)
    mw.spider_closed()
    with Detector.open(tmp_path / "p.db") as det:
        assert det.stats()["pages"] == 7
    # a detector process that dies: pages and requests pass, counted; the crawl goes on
    crawler = get_crawler(_Spider, {**settings, "NEARDUP_GC_FREEZE": False})
    mw = NeardupDownloaderMiddleware.from_crawler(crawler)
    crawler.stats.open_spider()
    for proc in list(mw._store._processes.values()):  # type: ignore[attr-defined]
        proc.kill()
        proc.join()
    page = _page("https://c.example/a")
    assert run(mw.process_response(Request(page.url), page)) is page
    assert run(mw.process_request(Request("https://c.example/b"))) is None
    page = _page("https://c.example/c")
    assert run(mw.process_response(Request(page.url), page)) is page
    got = crawler.stats.get_stats()
    assert (got["neardup/error"], got["neardup/should_fetch_error"]) == (2, 1)
    mw.spider_closed()  # a warning, no exception
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(NeardupError):
        NeardupDownloaderMiddleware.from_crawler(get_crawler(_Spider, {"NEARDUP_DB": str(tmp_path / "dir.db")}))


EPOLL = "TWISTED_REACTOR=twisted.internet.epollreactor.EPollReactor"


@pytest.mark.parametrize(("loop", "process"), [(EPOLL, True), (EPOLL, False), ("TWISTED_REACTOR_ENABLED=False", True)])
def test_crawl_with_another_reactor(site, tmp_path, loop, process):
    """The same crawl under Twisted's default (non-asyncio) reactor, where the coroutines await
    Deferreds, and under asyncio without a Twisted reactor (Scrapy >= 2.19)."""
    stats, items = crawl(site, tmp_path, loop, f"NEARDUP_PROCESS={process}")
    main = {i["url"] for i in on_main(items, site)}
    assert {f"{site}a/{g}/" for g in ARTICLES} <= main
    assert stats["neardup/new"] == len(ARTICLES) + 1 and stats["neardup/near"] == 1
    assert stats["neardup/skipped_before_fetch"] > 0 and "neardup/error" not in stats


CHANGED = ARTICLES[:3]  # changed between the two crawls (an update sentence in the main text)


@pytest.fixture
def changing_site():
    """A site of its own whose articles change between two crawls (``server.site``)."""
    srv = serve_sample.make_server(0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def _host_rates(db):
    with Detector.open(db) as det:
        return {h["host"]: (h["pages"], h["duplicates"], h["duplicate_rate"]) for h in det.hosts()}


def test_two_crawls_into_one_store(changing_site, tmp_path):
    """A recrawl: the second crawl of the example (drop duplicates) into the first one's store,
    with some articles changed, the others unchanged, and a new variant kind (?ref=rss) on
    every article. Re-fetches are versions of their URL: nothing unchanged is counted or
    dropped as a duplicate, changed pages are fetched and reported changed, and every host's
    duplicate rate counts each URL once, as a single crawl does (a third crawl of the same
    site leaves it as it is). Twice fetched, an article is fresh until its next_fetch."""
    srv, site = changing_site
    store = tmp_path / "crawl.db"
    crawl(site, tmp_path)
    rates1 = _host_rates(store)
    srv.site.changed = {g: serve_sample.changed_version(srv.site.articles[g]) for g in CHANGED}
    srv.site.extra_variants = True
    stats2, items2 = crawl(site, tmp_path)
    articles = {f"{site}a/{g}/" for g in ARTICLES}
    changed = {f"{site}a/{g}/" for g in CHANGED}
    got = {i["url"]: i for i in on_main(items2, site)}
    # every article re-fetched and passed to the spider (none dropped), with its first decision
    assert articles <= set(got)
    assert all(got[u]["status"] == "new" for u in articles)
    assert {u for u in articles if got[u]["version"] == "changed"} == changed
    assert all(got[u]["version"] == "unchanged" for u in articles - changed)
    assert stats2["neardup/changed"] == len(CHANGED)
    assert stats2["neardup/unchanged"] >= len(ARTICLES) - len(CHANGED) + 1  # and the calendar's first page
    # the only first decisions of the recrawl: the new variants (?ref=rss), exact duplicates, dropped
    assert stats2.get("neardup/new", 0) == stats2.get("neardup/near", 0) == 0
    new_dups = stats2.get("neardup/exact", 0)
    assert stats2["neardup/dropped"] == new_dups > 0
    assert not any("ref=rss" in u for u in got)
    assert stats2["neardup/skipped_before_fetch"] > 0  # known duplicates and learned rules
    with Detector.open(store) as det:
        assert all(present(det.store.page_by_url(u)).status == "new" for u in articles)
    # every host's rate: each stored URL counted once, by its first decision
    main = urlsplit(site).netloc  # host figures are per origin: the host and its port
    mirror = f"{serve_sample.MIRROR_HOST}:{urlsplit(site).port}"
    rates2 = _host_rates(store)
    pages1, dups1, _ = rates1[main]
    assert rates2[main] == (pages1 + new_dups, dups1 + new_dups, round((dups1 + new_dups) / (pages1 + new_dups), 4))
    assert rates2[mirror] == rates1[mirror]
    # fetched twice: the schedule now says fresh (no change expected yet) ...
    with Detector.open(store) as det:
        d = det.should_fetch(f"{site}a/{ARTICLES[-1]}/")
        assert (d.fetch, d.reason) == (False, "fresh") and d.next_fetch is not None
    # ... a third crawl that re-fetches anyway (NEARDUP_MAX_AGE=0): every page unchanged, no rate moves
    stats3, _ = crawl(site, tmp_path, "NEARDUP_MAX_AGE=0")
    assert _host_rates(store) == rates2
    assert stats3.get("neardup/changed", 0) == 0 and stats3["neardup/unchanged"] >= len(ARTICLES) + 1
    assert all(stats3.get(f"neardup/{s}", 0) == 0 for s in ("new", "exact", "near", "dropped"))


@pytest.fixture
def service(tmp_path):
    """``neardup serve`` over a fresh store on a free port of 127.0.0.1 (for NEARDUP_URL)."""
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from neardup.cli import main; main()", "serve", "--db",
                             str(tmp_path / "service.db"), "--port", str(port), "--extractor", "fast"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("neardup serve did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_crawl_through_the_service(site, tmp_path, service):
    """NEARDUP_URL: the same crawl with the service deciding (its calls in the middleware's threads)."""
    stats, items = crawl(site, tmp_path, f"NEARDUP_URL={service}")
    assert {i["status"] for i in items} <= {"new", "empty"}
    assert {f"{site}a/{g}/" for g in ARTICLES} <= {i["url"] for i in on_main(items, site)}
    assert stats["neardup/new"] == len(ARTICLES) + 1 and stats["neardup/near"] == 1
    assert stats["neardup/skipped_before_fetch"] > 0 and "neardup/error" not in stats
    assert not (tmp_path / "crawl.db").exists()  # NEARDUP_URL wins over NEARDUP_DB


@pytest.fixture
def static_site(tmp_path):
    """The sample's articles as files under Python's ``http.server`` (which answers
    ``If-Modified-Since`` with 304 where a file is not newer), behind an index page of links."""
    import http.server
    from functools import partial

    root = tmp_path / "www"
    (root / "a").mkdir(parents=True)
    links = "".join(f'<a href="a/{g}.html">{g}</a> ' for g in ARTICLES)
    (root / "index.html").write_text(f'<html><body><nav class="site">{links}</nav></body></html>')
    hour_ago = time.time() - 3600
    for g, html in serve_sample.load_articles().items():
        path = root / "a" / f"{g}.html"
        path.write_bytes(html)
        os.utime(path, (hour_ago, hour_ago))  # older than the first crawl: unchanged since

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_a_conditional_recrawl_records_304s_as_unchanged_fetches(static_site, tmp_path):
    """NEARDUP_CONDITIONAL: the recrawl asks for each stored page If-Modified-Since its last
    fetch; the files changed since (the index, some articles) come back 200 and are added,
    the others come back 304 without a body and are recorded as unchanged fetches."""
    root, site = static_site
    store = tmp_path / "crawl.db"
    stats1, _ = crawl(site, tmp_path)
    assert stats1["neardup/new"] >= len(ARTICLES) and "neardup/not_modified" not in stats1
    changed = ARTICLES[:2]
    later = time.time() + 5  # newer than the first crawl's fetches (If-Modified-Since has whole seconds)
    for g in changed:
        path = root / "a" / f"{g}.html"
        path.write_bytes(serve_sample.changed_version(path.read_bytes()))
        os.utime(path, (later, later))
    os.utime(root / "index.html", (later, later))  # newer: its links are read again
    stats2, items2 = crawl(site, tmp_path, "NEARDUP_MAX_AGE=0", "NEARDUP_CONDITIONAL=True")
    unchanged = [g for g in ARTICLES if g not in changed]
    assert stats2["downloader/response_status_count/304"] == stats2["neardup/not_modified"] == len(unchanged)
    assert stats2["neardup/changed"] == len(changed)
    assert stats2.get("neardup/error", 0) == stats2.get("neardup/new", 0) == 0
    assert {i["url"] for i in items2} == {site, *(f"{site}a/{g}.html" for g in changed)}  # 304s have no page
    with Detector.open(store) as det:
        for g in ARTICLES:
            h = present(det.history(f"{site}a/{g}.html"))
            assert (h.fetches, h.change_count) == (2, 1 if g in changed else 0)
            assert h.versions[-1]["changed"] == (g in changed)


def test_two_scrapy_redis_workers_share_one_queue_and_one_store(site, tmp_path, redis_server):
    """A distributed crawl: two crawler processes at once, their request queue and dupefilter in
    Redis (scrapy-redis) and one neardup store in Redis. Every request is fetched by one worker,
    both workers fetch, and each distinct content is new exactly once, as in one process."""
    pytest.importorskip("scrapy_redis")
    run_id = uuid.uuid4().hex[:10]
    store = f"{redis_server}?prefix=crawl{run_id}"
    procs, outs = [], []
    for w in range(2):
        stats, items = tmp_path / f"stats{w}.json", tmp_path / f"items{w}.jsonl"
        cmd = [sys.executable, "-m", "scrapy", "crawl", "site_redis", "-s", f"SITE_URL={site}",
               "-s", f"REDIS_URL={redis_server}", "-s", f"NEARDUP_DB={store}",
               "-s", f"SCHEDULER_QUEUE_KEY={run_id}:requests", "-s", f"SCHEDULER_DUPEFILTER_KEY={run_id}:dupefilter",
               "-s", f"REDIS_START_URLS_KEY={run_id}:start_urls",
               "-s", f"STATS_OUT={stats}", "-O", str(items), "-s", "LOG_LEVEL=ERROR",
               # a crawl of a few seconds: one worker alone cannot drain the site's queue before
               # the other has started (process starts differ by a second or more on a busy machine)
               "-s", "DOWNLOAD_DELAY=0.2", "-s", "RANDOMIZE_DOWNLOAD_DELAY=False"]
        procs.append(subprocess.Popen(cmd, cwd=EXAMPLE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        outs.append((stats, items))
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    stats = [json.loads(s.read_text()) for s, _ in outs]
    items = [[json.loads(line) for line in i.read_text().splitlines()] for _, i in outs]
    urls = [{i["url"] for i in part} for part in items]
    assert urls[0] and urls[1] and not urls[0] & urls[1]  # both fetched; no URL fetched twice
    main = {u for part in urls for u in part if urlsplit(u).netloc == urlsplit(site).netloc}
    assert {f"{site}a/{g}/" for g in ARTICLES} <= main
    alone, _ = crawl(site, tmp_path)  # the same crawl in one process, into SQLite
    new = sum(s.get("neardup/new", 0) for s in stats)
    assert new == alone["neardup/new"] == sum(i["status"] == "new" for part in items for i in part)
    with Detector.open(store) as det:
        assert det.stats()["pages"] >= new and det.store.status_counts()["new"] == new

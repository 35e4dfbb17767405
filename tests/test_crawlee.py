"""neardup.crawlee and the Crawlee (Node) recipe: real crawls of a local site.

The site (examples/crawlee-python/noisy_site.py, served by http.server from a temporary
folder) is made of five real pages of the shared corpus (from its MIT and Apache-2.0
sources: scrapinghub-aeb, trafilatura, postlight-fixtures, readability), each linking to a
``?sessionid=<random>`` variant of itself, a ``?fbclid=<random>`` variant (the same URL for
the store) and a copy under a second URL (``/copies/``); an index page links every article. Each
crawl runs twice into one store, the site rebuilt in between with new session ids: the
first finds and drops the duplicates, the second fetches every article again (nothing lost:
each stays ``new``, its version ``unchanged``) and skips the copies (known duplicates) and the
new session ids (the rule learned in the first) before the fetch. Skipped URLs never become
requests: the crawlers' own statistics count no failed request.

- Crawlee for Python: examples/crawlee-python/crawl.py (ParselCrawler) in a subprocess, on an
  embedded SQLite store and through ``neardup serve`` (neardup.Client); in process, the
  integration's contract (errors inside neardup never raise into the crawl, its work runs in
  its own threads, tag mode, the canonical queued instead of a skipped duplicate).
- Crawlee for Node: examples/crawlee-node/crawl.mjs (CheerioCrawler) against ``neardup serve``
  on a free port. Skipped when ``node`` or the example's ``node_modules`` is missing, except
  under ``NEARDUP_REQUIRE_NODE=1`` (set by .ci/run, which installs both), where it fails.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("crawlee")
pytest.importorskip("parsel")

from crawlee import ConcurrencySettings, Request  # noqa: E402
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext  # noqa: E402
from crawlee.storage_clients import MemoryStorageClient  # noqa: E402

from neardup import Detector  # noqa: E402
from neardup.crawlee import NeardupCrawlee  # noqa: E402
from neardup.errors import ConfigError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY_EXAMPLE = ROOT / "examples" / "crawlee-python"
NODE_EXAMPLE = ROOT / "examples" / "crawlee-node"
sys.path.insert(0, str(PY_EXAMPLE))
noisy_site = importlib.import_module("noisy_site")  # examples/crawlee-python, on the path
sys.path.remove(str(PY_EXAMPLE))

#: (source folder, manifest column, file): real pages of the corpus's MIT / Apache-2.0 sources
#: without relative links of their own (the crawl's scope would skip those anyway)
PAGES = {
    "aeb-06ee193d": ("scrapinghub-aeb",
                     "html/06ee193de4bd611f7fafbab0c59b0f6fe3495093516720632cd093b24c7a0e98.html.gz"),
    "aeb-076f4f33": ("scrapinghub-aeb",
                     "html/076f4f33bf75059db581bedf36e76fb65e89a8f7752db3339aa3ea11c5122f32.html.gz"),
    "trafilatura-wordpress": ("trafilatura", "cache/blog.wordpress.com.diverse.html.gz"),
    "postlight-212a73c9": ("postlight-fixtures", "pages/212a73c908d2.html.gz"),
    "readability-dropbox": ("readability", "pages/dropbox-blog/source.html.gz"),
}
N = len(PAGES)


@pytest.fixture(scope="module")
def articles(corpus) -> dict[str, bytes]:
    out = {}
    for name, (source, file) in PAGES.items():
        licence = (corpus / source / "README.md").read_text(encoding="utf-8")
        assert re.search(r"(?i)licen[cs]e.*\b(MIT|Apache)", licence), source
        out[name] = gzip.decompress((corpus / source / file).read_bytes())
    return out


@pytest.fixture()
def site(tmp_path, articles) -> Iterator[tuple[str, Path]]:
    """The site's root URL, and its folder (rebuild it for new session ids)."""
    folder = tmp_path / "site"
    noisy_site.build_site(folder, articles, seed=1)
    with noisy_site.serving(folder) as url:
        yield url, folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def service(tmp_path) -> Iterator[str]:
    """``neardup serve`` over a fresh store on a free port of 127.0.0.1."""
    pytest.importorskip("fastapi")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", str(tmp_path / "service.db"),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else "it died"
                assert time.monotonic() < deadline, "neardup serve did not start"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def urls(site: str) -> dict[str, dict[str, str]]:
    return {name: {"page": f"{site}pages/{name}.html", "copy": f"{site}copies/{name}.html"} for name in PAGES}


def run_example(cmd: list[str], cwd: Path, tmp_path: Path, run: int) -> tuple[dict, list[dict]]:
    stats, items = tmp_path / f"stats{run}.json", tmp_path / f"items{run}.jsonl"
    done = subprocess.run([*cmd, "--out", str(items), "--stats-out", str(stats)], cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return json.loads(stats.read_text()), [json.loads(line) for line in items.read_text().splitlines()]


def check_first_crawl(site: str, neardup: dict, finished: int, failed: int, items: list[dict]) -> None:
    """The first crawl: every article fetched and new, every duplicate fetched found and dropped."""
    assert failed == 0
    by_url = {i["url"]: i for i in items}
    for u in urls(site).values():
        assert by_url[u["page"]]["status"] == "new" and by_url[u["page"]]["version"] is None
        assert u["copy"] not in by_url  # dropped: never stored
    assert not [u for u in by_url if "sessionid" in u or "fbclid" in u]
    assert neardup["new"] >= N and neardup.get("near", 0) == 0 and "error" not in neardup
    assert neardup["exact"] >= N and neardup["dropped"] == neardup["exact"]  # the copies at least
    # the ?fbclid= links are their articles' own URLs for the store: fetched moments before
    assert neardup["skipped_before_fetch/this-crawl"] >= N
    assert finished == len(items) + neardup["dropped"]  # every response reached neardup


def check_second_crawl(site: str, neardup: dict, finished: int, failed: int, items: list[dict]) -> None:
    """The second crawl (new session ids): nothing lost, nothing decided again, duplicates skipped."""
    assert failed == 0
    by_url = {i["url"]: i for i in items}
    for u in urls(site).values():  # each article again, still new: a re-fetch keeps its first decision
        assert by_url[u["page"]]["status"] == "new" and by_url[u["page"]]["version"] in ("unchanged", "changed")
    assert set(by_url) == {site, *(u["page"] for u in urls(site).values())}
    assert finished == N + 1 and neardup.get("unchanged", 0) + neardup.get("changed", 0) == N + 1
    assert not {"new", "exact", "near", "dropped", "error"} & set(neardup)
    assert neardup["skipped_before_fetch/known-duplicate"] == N  # the copies
    assert neardup["skipped_before_fetch/rule"] == N  # the new session ids: drop-param:sessionid
    reasons = {k for k in neardup if k.startswith("skipped_before_fetch/")}
    assert neardup["skipped_before_fetch"] == sum(neardup[k] for k in reasons)


def check_store(site: str, det) -> None:
    for u in urls(site).values():
        d = det.should_fetch(u["copy"])
        assert (d.fetch, d.reason, d.canonical_url) == (False, "known-duplicate", u["page"])
    d = det.should_fetch(f"{site}pages/{next(iter(PAGES))}.html?sessionid=feedbeef")
    assert (d.fetch, d.reason, d.rules) == (False, "rule", ("drop-param:sessionid",))


def python_crawl(site: str, tmp_path: Path, run: int, *target: str) -> tuple[dict, list[dict]]:
    return run_example([sys.executable, "crawl.py", site, *target], PY_EXAMPLE, tmp_path, run)


def test_crawlee_python_twice_into_one_store(site, articles, tmp_path):
    url, folder = site
    db = tmp_path / "crawl.db"
    stats, items = python_crawl(url, tmp_path, 1, "--db", str(db))
    crawlee = stats["crawlee"]
    assert crawlee["requests_total"] == crawlee["requests_finished"]
    check_first_crawl(url, stats["neardup"], crawlee["requests_finished"], crawlee["requests_failed"], items)
    noisy_site.build_site(folder, articles, seed=2)  # new session ids
    stats, items = python_crawl(url, tmp_path, 2, "--db", str(db))
    crawlee = stats["crawlee"]
    check_second_crawl(url, stats["neardup"], crawlee["requests_finished"], crawlee["requests_failed"], items)
    with Detector.open(db) as det:
        check_store(url, det)


def test_crawlee_python_through_the_service(site, articles, tmp_path, service):
    url, folder = site
    stats, items = python_crawl(url, tmp_path, 1, "--service", service)
    check_first_crawl(url, stats["neardup"], stats["crawlee"]["requests_finished"],
                      stats["crawlee"]["requests_failed"], items)
    noisy_site.build_site(folder, articles, seed=2)
    stats, items = python_crawl(url, tmp_path, 2, "--service", service)
    check_second_crawl(url, stats["neardup"], stats["crawlee"]["requests_finished"],
                       stats["crawlee"]["requests_failed"], items)
    from neardup import Client

    with Client(service) as client:
        check_store(url, client)


@pytest.fixture()
def node() -> str:
    """The ``node`` command, with the example's ``node_modules`` installed (else a skip, or a
    failure under ``NEARDUP_REQUIRE_NODE``), checked before the service starts."""
    node = shutil.which("node")
    if node is None:
        why = "node is not installed (apt-get install nodejs npm; .ci/run does it)"
    elif not (NODE_EXAMPLE / "node_modules" / "crawlee").is_dir():
        why = "examples/crawlee-node has no node_modules (npm ci --prefix examples/crawlee-node; .ci/run does it)"
    else:
        return node
    if os.environ.get("NEARDUP_REQUIRE_NODE"):
        pytest.fail(why)
    pytest.skip(why)


def test_crawlee_node_through_the_service(node, site, articles, tmp_path, service):
    url, folder = site
    cmd = [node, "crawl.mjs", url, "--service", service]
    stats, items = run_example(cmd, NODE_EXAMPLE, tmp_path, 1)
    crawlee = stats["crawlee"]
    assert crawlee["requestsTotal"] == crawlee["requestsFinished"]
    check_first_crawl(url, stats["neardup"], crawlee["requestsFinished"], crawlee["requestsFailed"], items)
    noisy_site.build_site(folder, articles, seed=2)
    stats, items = run_example(cmd, NODE_EXAMPLE, tmp_path, 2)
    crawlee = stats["crawlee"]
    check_second_crawl(url, stats["neardup"], crawlee["requestsFinished"], crawlee["requestsFailed"], items)
    from neardup import Client

    with Client(service) as client:
        check_store(url, client)


# -- in process: the integration's contract -----------------------------------------------------
class _Broken(Detector):
    """Fails inside (not with a NeardupError) on session-id pages and click-id URLs;
    notes the threads it is called in."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.threads: set[str] = set()

    def fingerprint(self, content, url=None, headers=None):
        self.threads.add(threading.current_thread().name)
        if url and "sessionid" in url:
            raise RuntimeError("kernel crashed")
        return super().fingerprint(content, url, headers)

    def add_fingerprint(self, url, fp, **kwargs):
        self.threads.add(threading.current_thread().name)
        return super().add_fingerprint(url, fp, **kwargs)

    def should_fetch(self, url, **kwargs):
        self.threads.add(threading.current_thread().name)
        if "fbclid" in url:
            raise OSError("store gone")
        return super().should_fetch(url, **kwargs)


def test_errors_tag_mode_and_threads_in_a_real_crawl(site):
    """An in-process crawl in tag mode with a detector failing inside: the crawl completes with
    no failed request, the failures are counted, duplicates reach the handler tagged and their
    links are not followed, and every detector call ran in the integration's threads."""
    url, _ = site
    det = _Broken()
    seen: list[dict] = []

    async def main():
        async with NeardupCrawlee(det, on_duplicate="tag") as nd:
            crawler = ParselCrawler(storage_client=MemoryStorageClient(), configure_logging=False,
                                    concurrency_settings=ConcurrencySettings(max_concurrency=4, desired_concurrency=4))

            @crawler.router.default_handler
            @nd.handler
            async def handle(context: ParselCrawlingContext) -> None:
                seen.append({"url": context.request.url, **(nd.verdict(context) or {})})
                await nd.enqueue_links(context, include=[re.compile(noisy_site.scope_pattern(url))])

            final = await crawler.run(await nd.filter_requests([url]))
        return final, nd.stats

    final, stats = asyncio.run(main())
    assert final.requests_failed == 0 and final.requests_finished == len(seen)
    assert stats["error"] == N and stats["should_fetch_error"] >= N  # the session-id pages, the click ids
    # the click-id links went on (the failure lets the request through): re-fetches of their articles
    assert stats["unchanged"] + stats["changed"] == N
    tagged = [s for s in seen if s.get("status") == "exact"]
    assert {s["url"] for s in tagged} == {u["copy"] for u in urls(url).values()}
    assert stats["tagged"] == N and "dropped" not in stats and stats["links_not_followed"] >= N
    untagged = [s for s in seen if "sessionid" in s["url"]]
    assert len(untagged) == N and all("status" not in s for s in untagged)  # passed on untouched
    assert det.threads and all(name.startswith("neardup") for name in det.threads), det.threads
    assert threading.current_thread().name not in det.threads


def _text(prefix: str) -> str:
    return "<html><body><article>" + " ".join(f"{prefix}{i}" for i in range(400)) + "</article></body></html>"


def test_filter_requests_queues_the_canonical_instead():
    det = Detector()
    det.add("https://a.example/article", _text("w"))
    det.add("https://a.example/copy", _text("w"))  # exact: its canonical is the article
    for i in range(4):  # four merges: drop-param:sid
        det.add(f"https://b.example/p?sid={i}", _text("v"))
    det.add("https://c.example/moved", _text("u"))
    nd = NeardupCrawlee(det)
    nd.started = time.time() + 3600  # what the store holds is from an earlier crawl

    async def decide(requests):
        return [r.url for r in await nd.filter_requests(requests)]

    got = asyncio.run(decide(["https://a.example/copy", "https://b.example/p?sid=99", "https://new.example/",
                              Request.from_url("https://a.example/copy?x=1", user_data={"neardup_ignore": True})]))
    # the copy is skipped and its canonical queued instead; the rule's URL maps to a known page,
    # p?sid=0, the canonical of its cluster
    assert got == ["https://new.example/", "https://a.example/copy?x=1", "https://a.example/article",
                   "https://b.example/p?sid=0"]
    assert nd.stats["skipped_before_fetch/known-duplicate"] == 1 and nd.stats["skipped_before_fetch/rule"] == 1
    assert nd.stats["canonical_enqueued"] == 2
    # the canonical is not queued twice, nor when it is queued already, nor when it is fresh
    assert asyncio.run(decide(["https://a.example/article", "https://a.example/copy"])) == ["https://a.example/article"]
    nd.started = 0.0  # now the store's pages are from this crawl: the canonical is skipped too
    assert asyncio.run(decide(["https://a.example/copy", "https://a.example/article?utm_source=x"])) == []
    assert nd.stats["skipped_before_fetch/this-crawl"] == 1
    labelled = asyncio.run(nd.filter_requests([Request.from_url("https://a.example/copy", label="article")]))
    assert labelled == []  # the canonical was fetched in this crawl: nothing to queue
    nd.started = time.time() + 3600
    labelled = asyncio.run(nd.filter_requests([Request.from_url("https://a.example/copy", label="article",
                                                                user_data={"k": 1})]))
    assert [(r.url, r.label, r.user_data.get("k")) for r in labelled] == [("https://a.example/article", "article", 1)]
    off = NeardupCrawlee(det, skip_before_fetch=False)
    assert [r.url for r in asyncio.run(off.filter_requests(["https://a.example/copy"]))] == ["https://a.example/copy"]
    off.close()
    nd.close()
    with pytest.raises(ConfigError, match="on_duplicate"):
        NeardupCrawlee(det, on_duplicate="keep")
    with pytest.raises(ConfigError, match="threads"):
        NeardupCrawlee(det, threads=0)


def test_open_owns_its_detector(tmp_path):
    nd = NeardupCrawlee.open(str(tmp_path / "o.db"), settings={"k": 5}, on_duplicate="tag")
    assert nd.mode == "local" and nd.owns_detector and nd.detector.settings.k == 5 and nd.on_duplicate == "tag"
    nd.close()
    nd.close()  # once is enough
    pytest.importorskip("httpx")
    client = NeardupCrawlee.open("http://127.0.0.1:9", token="t")
    assert client.mode == "client"

    async def unreachable():
        return await client.filter_requests(["https://a.example/"])

    assert [r.url for r in asyncio.run(unreachable())] == ["https://a.example/"]  # fetched: the service is down
    assert client.stats["should_fetch_error"] == 1
    client.close()


def test_the_site_is_what_the_tests_say(articles, tmp_path):
    folder = tmp_path / "s"
    first = noisy_site.build_site(folder, articles, seed=1)
    assert noisy_site.build_site(folder, articles, seed=1) == first != noisy_site.build_site(folder, articles, seed=2)
    name = next(iter(PAGES))
    page = (folder / "pages" / f"{name}.html").read_bytes()
    assert page == (folder / "copies" / f"{name}.html").read_bytes() and page.startswith(articles[name][:200])
    assert f"?sessionid={noisy_site.build_site(folder, articles, seed=3)[name]}".encode() in \
        (folder / "pages" / f"{name}.html").read_bytes()
    with open(folder / "index.html", encoding="utf-8") as fh:
        assert fh.read().count('href="/pages/') == N
    scope = re.compile(noisy_site.scope_pattern("http://h:1/"))
    assert scope.match("http://h:1/pages/a.html?sessionid=1") and scope.match("http://h:1/copies/a.html")
    assert not scope.match("http://h:1/") and not scope.match("http://h:1/news/pages/a.html")

"""A real site, real crawlers, two crawls (issue 38): content lost, false drops, missed
duplicates, traps, the recrawl, and pages per second with and without neardup.

The site is :mod:`_noisy_docs`: a Debian documentation package's HTML (Sphinx's manual by
default) served on two ports of 127.0.0.1 (the site and a mirror) with session ids passed on to
every link, tracking parameters, fragments, ``DIR/`` beside ``DIR/index.html``, a print version
of every page in another template, an endless events calendar (``?month=N``), a timestamp and a
rotating ad inside every article, and rel=canonical to the site's URL. The ground truth is
which content each URL serves (:meth:`_noisy_docs.NoisyDocs.content_of`).

Crawlers, each from the site's home page, following every link to 127.0.0.1 (both ports)
except the site's static files:

- ``scrapy``: a Scrapy spider with neardup's middlewares as the README sets them
  (``NEARDUP_DB``, drop duplicates), twice into one store; and the same spider without neardup,
  bounded to the pages the first crawl with neardup fetched (pages per second of the same work);
- ``crawlee-python``: ``examples/crawlee-python/crawl.py`` (:mod:`neardup.crawlee`), twice;
- ``crawlee-node``: ``examples/crawlee-node/crawl.mjs`` over ``neardup serve``, twice;
- ``wget``: GNU Wget's recursive crawl into a WARC (``--level``), then ``neardup dedup`` of it.

Per crawl: pages fetched (responses 200, the calendar's apart), skipped before the fetch by
reason, duplicates present (fetched URLs, as the store keys them, of a content fetched under
another URL) and found (dropped as exact/near of a URL of the same content), missed (kept as
new), **content lost** (a content fetched but kept under none of its URLs in any crawl so far),
**false drops** (dropped as a match of another content), re-fetches ``changed``, contents of
the first crawl that the second did not reach, pages per second; after each crawl the origins'
figures (duplicate rate, trap, templates, redesigns) and the learned rules.

    python benchmarks/crawl_site.py                                # every crawler, the whole site
    python benchmarks/crawl_site.py --pages 40 --crawlers scrapy --json out/crawl.json
    python benchmarks/crawl_site.py --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, logger, machine_line, replace_section, table
from _noisy_docs import DOCS, NoisyDocs, doc_pages

from neardup import Detector
from neardup.urls import normalize_url

log = logger("crawl_site", clock=True)
CRAWLERS = ("scrapy", "crawlee-python", "crawlee-node", "wget")
START, END = "<!-- crawl_site:start -->", "<!-- crawl_site:end -->"
SKIP_FILES = r"(?:_static|_sources|_images|_downloads|_modules)/"
DUPLICATE = ("exact", "near")

SPIDER = '''
import json, os, re
from urllib.parse import urlsplit
import scrapy
from scrapy.http import HtmlResponse

NEARDUP = os.environ.get("BENCH_NEARDUP") == "1"


class DocsSpider(scrapy.Spider):
    name = "docs"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {"neardup.scrapy.NeardupDownloaderMiddleware": 950} if NEARDUP else {},
        "SPIDER_MIDDLEWARES": {"neardup.scrapy.NeardupSpiderMiddleware": 50} if NEARDUP else {},
        "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "WARNING",
    }

    async def start(self):
        yield scrapy.Request(os.environ["BENCH_SEED"])

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            return
        verdict = response.meta.get("neardup") or {}
        yield {"url": response.url, "status": verdict.get("status"), "version": verdict.get("version")}
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if urlsplit(url).hostname == "127.0.0.1" and not re.search(os.environ["BENCH_SKIP"], url):
                yield scrapy.Request(url)

    def closed(self, reason):
        stats = {k: v for k, v in self.crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
        with open(os.environ["BENCH_STATS"], "w") as fh:
            json.dump(stats, fh, indent=1, sort_keys=True)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _items(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 1800) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} {' '.join(cmd[1:3])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - t0


class Bench:
    """One benchmark run: the site, a work folder, the crawls and their figures."""

    def __init__(self, site: NoisyDocs, work: Path) -> None:
        self.site, self.work = site, work
        self.spider = work / "spider.py"
        self.spider.write_text(SPIDER, encoding="utf-8")
        self.results: list[dict[str, Any]] = []

    @property
    def seed(self) -> str:
        return f"http://127.0.0.1:{self.site.site_port}/"

    @property
    def follow(self) -> str:
        ports = f"(?:{self.site.site_port}|{self.site.mirror_port})"
        return rf"^http://127\.0\.0\.1:{ports}/(?!{SKIP_FILES})(?:[^?#.]*|[^?#]*\.html)(?:[?#].*)?$"

    # -- crawlers ----------------------------------------------------------------------------
    def scrapy(self, tag: str, db: Path | None, limit: int | None = None) -> tuple[float, dict[str, Any], list[dict]]:
        stats, items = self.work / f"{tag}.stats.json", self.work / f"{tag}.items.jsonl"
        cmd = [sys.executable, "-m", "scrapy", "runspider", str(self.spider), "-O", str(items)]
        env = {"BENCH_SEED": self.seed, "BENCH_STATS": str(stats), "BENCH_NEARDUP": "1" if db else "0",
               "BENCH_SKIP": SKIP_FILES + r"|\.(?:txt|png|svg|css|js|zip|py|gz)(?:[?#]|$)"}
        if db is not None:
            cmd += ["-s", f"NEARDUP_DB={db}"]
        if limit is not None:
            cmd += ["-s", f"CLOSESPIDER_PAGECOUNT={limit}"]
        wall = _run(cmd, self.work, env)
        return wall, json.loads(stats.read_text()), _items(items)

    def crawlee_python(self, tag: str, db: Path) -> tuple[float, dict[str, Any], list[dict]]:
        stats, items = self.work / f"{tag}.stats.json", self.work / f"{tag}.items.jsonl"
        wall = _run([sys.executable, "crawl.py", self.seed, "--db", str(db), "--follow", self.follow,
                     "--out", str(items), "--stats-out", str(stats)], REPO_ROOT / "examples" / "crawlee-python")
        return wall, json.loads(stats.read_text())["neardup"], _items(items)

    def crawlee_node(self, tag: str, db: Path) -> tuple[float, dict[str, Any], list[dict]]:
        stats, items = self.work / f"{tag}.stats.json", self.work / f"{tag}.items.jsonl"
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", str(db), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(url + "/healthz", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("neardup serve did not start") from None
                    time.sleep(0.2)
            wall = _run(["node", "crawl.mjs", self.seed, "--service", url, "--follow", self.follow,
                         "--out", str(items), "--stats-out", str(stats)], REPO_ROOT / "examples" / "crawlee-node")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        return wall, json.loads(stats.read_text())["neardup"], _items(items)

    def wget(self, tag: str, db: Path, level: int) -> tuple[float, dict[str, Any], list[dict]]:
        folder = self.work / f"{tag}.files"
        folder.mkdir()
        warc = self.work / tag
        t0 = time.perf_counter()
        reject = r"/_(static|sources|images|downloads|modules)/|\.(txt|png|svg|css|js|zip|py|gz)$"  # POSIX regex
        done = subprocess.run(["wget", "-r", f"-l{level}", "-q", "-e", "robots=off", f"--warc-file={warc}",
                               "--reject-regex", reject, "-P", str(folder), self.seed],
                              cwd=self.work, capture_output=True, text=True, timeout=1800)
        if not Path(f"{warc}.warc.gz").exists():
            raise SystemExit(f"wget wrote no WARC (exit {done.returncode}): {done.stderr[-2000:]}")
        crawl_wall = time.perf_counter() - t0
        verdicts = self.work / f"{tag}.verdicts.jsonl"
        _run([sys.executable, "-m", "neardup.cli", "dedup", f"{warc}.warc.gz", "--db", str(db),
              "--out", str(verdicts)], self.work)
        rows = _items(verdicts)
        counts: dict[str, Any] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        kept = [r for r in rows if r["status"] not in DUPLICATE]
        return crawl_wall, counts, kept

    # -- figures -----------------------------------------------------------------------------
    def measure(self, crawler: str, crawl: int, db: Path, log_from: int, wall: float, stats: dict[str, Any],
                items: list[dict], kept_before: set[str], reached_first: set[str] | None) -> dict[str, Any]:
        site = self.site
        served = [s for s in site.log[log_from:] if s.code == 200]
        urls = [f"http://127.0.0.1:{s.port}{s.target}" for s in served]
        contents = [site.content_of(u) for u in urls]
        trap = sum(1 for c in contents if c and c.startswith("events:"))
        keys: dict[str, str] = {}
        for u, c in zip(urls, contents, strict=True):
            if c and not c.startswith("events:"):
                keys.setdefault(normalize_url(u), c)
        start = site.log[log_from].at if len(site.log) > log_from else time.time()
        with Detector.open(db, create=False) as det:
            with det.store.reading():
                pages = {p.id: p for p in det.store.iter_pages()}
            by_url = {p.url: p for p in pages.values()}
            # the re-fetches of this crawl that read as changed: which pages, and by how much
            changed_urls = [f"{p.url} d={v[-1].distance} s={v[-1].score}" for p in pages.values()
                            if p.id is not None and (v := det.store.versions(p.id))
                            and v[-1].changed and v[-1].fetched_at >= start]
            rules = sorted(r.name for r in det.rules())
            hosts = det.hosts()
        present = len(keys) - len(set(keys.values()))
        found = false_drops = trap_merges = 0
        new_keys: dict[str, list[str]] = {}
        wrong: list[str] = []
        for key, content in keys.items():
            rec = by_url.get(key)
            if rec is None:
                continue
            if rec.status in DUPLICATE and rec.matched_id in pages:
                match = site.content_of(pages[rec.matched_id].url)
                if match == content:
                    found += 1
                elif match is not None and match.startswith("events:"):
                    trap_merges += 1
                else:
                    false_drops += 1
                    wrong.append(f"{key} -> {pages[rec.matched_id].url}")
            elif rec.status == "new":
                new_keys.setdefault(content, []).append(key)
        missed = sum(len(v) - 1 for v in new_keys.values())
        missed_urls = [" = ".join(v) for v in new_keys.values() if len(v) > 1]
        kept = {c for c in (site.content_of(i["url"]) for i in items) if c and not c.startswith("events:")}
        lost = sorted(set(keys.values()) - kept - kept_before)
        skipped = {k.split("/")[-1]: v for k, v in stats.items()
                   if k.startswith(("neardup/skipped_before_fetch/", "skipped_before_fetch/"))}
        changed, unchanged = (int(stats.get(f"neardup/{v}", stats.get(v, 0))) for v in ("changed", "unchanged"))
        # reached: fetched, or known to be current (skipped as fresh: its next fetch is after the
        # crawl's start, and it was fetched before it)
        fresh = {site.content_of(p.url) for p in pages.values()
                 if p.next_fetch is not None and p.next_fetch > start and p.fetched_at < start}
        reached = set(keys.values()) | {c for c in fresh if c is not None}
        row = {
            "crawler": crawler, "crawl": crawl, "fetched": len(served) - trap, "calendar_fetched": trap,
            "skipped": skipped, "duplicates_present": present, "found": found, "missed": missed,
            "missed_urls": missed_urls[:10],
            "content_lost": len(lost), "lost": lost[:10], "false_drops": false_drops, "false": wrong[:10],
            "calendar_merges": trap_merges, "changed": changed, "unchanged": unchanged,
            "changed_urls": changed_urls[:10],
            "not_reached": sorted(reached_first - reached)[:10] if reached_first is not None else None,
            "not_reached_count": len(reached_first - reached) if reached_first is not None else None,
            "responses": len(site.log) - log_from, "pages_per_s": _rate(site.log[log_from:]),
            "wall_s": round(wall, 1),
            "rules": rules, "hosts": [{k: h[k] for k in ("host", "pages", "duplicate_rate", "trap", "budget_factor",
                                                         "templates", "redesigns")} for h in hosts],
            "kept": sorted(kept), "reached": sorted(reached),
        }
        self.results.append(row)
        return row

    def twice(self, crawler: str) -> None:
        db = self.work / f"{crawler}.db"
        run = {"scrapy": lambda tag: self.scrapy(tag, db), "crawlee-python": lambda tag: self.crawlee_python(tag, db),
               "crawlee-node": lambda tag: self.crawlee_node(tag, db)}[crawler]
        kept: set[str] = set()
        first: set[str] | None = None
        for crawl in (1, 2):
            mark = len(self.site.log)
            wall, stats, items = run(f"{crawler}-{crawl}")
            row = self.measure(crawler, crawl, db, mark, wall, stats, items, kept, first)
            kept |= set(row["kept"])
            if crawl == 1:
                first = set(row["kept"])
            log(f"{crawler} crawl {crawl}: {_summary(row)}")

    def without(self, limit: int) -> dict[str, Any]:
        mark = len(self.site.log)
        wall, _, _ = self.scrapy("scrapy-without", None, limit=limit)
        served = self.site.log[mark:]
        return {"fetched": sum(1 for s in served if s.code == 200), "responses": len(served), "wall_s": round(wall, 1),
                "pages_per_s": _rate(served)}


def _rate(served: list[Any]) -> float | None:
    """Responses a second (any status: a link to a page the site lacks is a request too) from
    the crawl's first response to its last (the crawler's own start-up and shut-down left out,
    as for every crawler)."""
    if len(served) < 2:
        return None
    span = served[-1].at - served[0].at
    return round((len(served) - 1) / span, 1) if span > 0 else None


def _count(value: Any) -> int:
    """A host figure that is a count, or a list of what it counts."""
    if isinstance(value, dict):
        return int(value["count"])
    return len(value) if isinstance(value, (list, tuple)) else int(value)


def _summary(row: dict[str, Any]) -> str:
    return (f"fetched {row['fetched']} (+{row['calendar_fetched']} calendar), lost {row['content_lost']}, "
            f"false drops {row['false_drops']}, missed {row['missed']}/{row['duplicates_present']}, "
            f"changed {row['changed']}/{row['changed'] + row['unchanged']}, {row['pages_per_s']} pages/s")


def report(results: list[dict[str, Any]], without: dict[str, Any] | None, args: argparse.Namespace,
           site: NoisyDocs) -> str:
    lines = [START, "", "## A real site crawled twice (`benchmarks/crawl_site.py`)", "",
             f"Machine: {machine_line()}. Command: `python benchmarks/crawl_site.py"
             f"{' --pages ' + str(args.pages) if args.pages else ''}"
             f"{' --crawlers ' + ','.join(args.crawlers) if tuple(args.crawlers) != CRAWLERS else ''}`. "
             f"Site: {len(site.names)} pages of `{args.docs}` with a mirror, print pages, session ids, tracking "
             "parameters, an endless calendar, a timestamp and an ad inside every article.", ""]
    rows = []
    for r in results:
        sk = ", ".join(f"{k} {v}" for k, v in sorted(r["skipped"].items())) or "-"
        changed = f"{r['changed']}/{r['changed'] + r['unchanged']}" if r["changed"] + r["unchanged"] else "-"
        reach = "-" if r["not_reached_count"] is None else r["not_reached_count"]
        redesigns = sum(_count(h["redesigns"]) for h in r["hosts"])
        rules = "yes" if any("sessionid" in x for x in r["rules"]) and any("index" in x for x in r["rules"]) else "no"
        rows.append([r["crawler"], r["crawl"], r["fetched"], r["calendar_fetched"], sk, r["duplicates_present"],
                     r["found"], r["missed"], r["content_lost"], r["false_drops"], changed, reach, redesigns, rules,
                     r["pages_per_s"]])
    lines += table(["crawler", "crawl", "fetched", "calendar", "skipped before the fetch", "duplicates present",
                    "found", "missed", "content lost", "false drops", "re-fetches changed", "kept in crawl 1, "
                    "not reached", "redesigns", "sessionid and index rules", "responses/s"], rows, text_columns=(0, 4))
    if without is not None:
        first = next((r for r in results if r["crawler"] == "scrapy" and r["crawl"] == 1), None)
        if first is not None and without["pages_per_s"]:
            ratio = first["pages_per_s"] / without["pages_per_s"]
            lines += ["", f"Scrapy without neardup on the same number of responses ({without['responses']}): "
                          f"{without['pages_per_s']} responses/s; with neardup {first['pages_per_s']} responses/s "
                          f"(x{ratio:.2f})."]
    lines += ["", "Origins after the last crawl of each crawler:", ""]
    last: dict[str, dict[str, Any]] = {}
    for r in results:
        last[r["crawler"]] = r
    hrows = [[c, h["host"], h["pages"], h["duplicate_rate"], h["trap"], _count(h["templates"]), _count(h["redesigns"])]
             for c, r in last.items() for h in r["hosts"]]
    lines += table(["crawler", "origin", "pages", "duplicate rate", "trap", "templates", "redesigns"], hrows,
                   text_columns=(0, 1))
    problems = [f"{r['crawler']} {r['crawl']}: lost {r['lost']}, false {r['false']}" for r in results
                if r["content_lost"] or r["false_drops"]]
    if problems:
        lines += ["", "Lost and falsely dropped (first 10 of each):", "", *[f"- {p}" for p in problems]]
    lines += ["", END]
    return "\n".join(lines)


@contextlib.contextmanager
def _kept(folder: str) -> Iterator[str]:
    shutil.rmtree(folder, ignore_errors=True)
    Path(folder).mkdir(parents=True)
    yield folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=Path, default=DOCS, help="the documentation package's HTML folder")
    ap.add_argument("--pages", type=int, help="at most this many of its pages (the home page's links first)")
    ap.add_argument("--crawlers", type=lambda s: s.split(","), default=list(CRAWLERS))
    ap.add_argument("--wget-level", type=int, default=2,
                    help="wget's --level: each session id makes another copy of the site, so deeper levels grow fast")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--write", type=Path, help="write the section into this Markdown file")
    args = ap.parse_args()
    if not (args.docs / "index.html").is_file():
        raise SystemExit(f"{args.docs} has no index.html (apt-get install sphinx-doc)")
    unknown = set(args.crawlers) - set(CRAWLERS)
    if unknown:
        raise SystemExit(f"unknown crawler {sorted(unknown)}; choose from {', '.join(CRAWLERS)}")
    site = NoisyDocs(args.docs, doc_pages(args.docs, args.pages))
    without = None
    keep = os.environ.get("CRAWL_SITE_KEEP")  # a folder to keep the stores, items and stats in
    with (tempfile.TemporaryDirectory(prefix="crawl_site.") if not keep else _kept(keep)) as tmp, site.serving():
        bench = Bench(site, Path(tmp))
        for crawler in args.crawlers:
            if crawler == "wget":
                if shutil.which("wget") is None:
                    raise SystemExit("wget is not installed (apt-get install wget)")
                mark = len(site.log)
                db = Path(tmp) / "wget.db"
                wall, stats, kept = bench.wget("wget", db, args.wget_level)
                row = bench.measure("wget", 1, db, mark, wall, stats, kept, set(), None)
                log(f"wget: {_summary(row)}")
            else:
                bench.twice(crawler)
            if crawler == "scrapy":
                first = next(r for r in bench.results if r["crawler"] == "scrapy" and r["crawl"] == 1)
                without = bench.without(first["responses"])
                log(f"scrapy without neardup: {without}")
        text = report(bench.results, without, args, site)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"results": bench.results, "without": without}, indent=1), encoding="utf-8")
    if args.write:
        replace_section(args.write, START, END, text)


if __name__ == "__main__":
    main()

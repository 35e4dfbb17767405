"""Scrapy crawls of the examples/scrapy sample site with and without neardup: pages per second
and the reactor's longest stall.

Serves the example's local site (``examples/scrapy/serve_sample.py``) on 127.0.0.1 only and
runs, each in a fresh process (a Twisted reactor cannot restart), the same bounded crawl
with the example project's settings under each configuration, alternated ``--repeats``
times:

- ``without``: no neardup middleware;
- ``before``: the blocking middleware of ``--before`` (a git revision; its
  ``src/neardup/scrapy.py`` is imported under another module name);
- ``threads``: the middleware of this checkout (``neardup.scrapy``) with
  ``NEARDUP_PROCESS = False``: fingerprints in ``NEARDUP_THREADS`` threads, the store in one;
- ``process``: the same middleware as configured by default: the detector in a process of its own;
- ``service``: the same middleware with ``NEARDUP_URL``: a ``neardup serve`` process (one
  worker, a fresh store, started by this script), called by ``NEARDUP_THREADS`` threads
  through :class:`neardup.Client`.

The crawl: ``--rounds`` x 14 article URLs of the site, each URL distinct
(``/a/<group>/?edition=<r>``: the site serves the article ``r`` places further, so that the
URLs of one path differ in content, no URL rule is learned and every request is fetched in
every configuration; 14 pages are new, the others exact duplicates of another URL),
``NEARDUP_ON_DUPLICATE=tag`` (the spider sees every page in every configuration), Scrapy's
default concurrency (16 requests, here all on one host), a fresh SQLite store per crawl,
the example's ``fast`` extractor, no warm-up by the benchmark (the blocking middleware loads
the numba kernels at the first page in the reactor thread, the detector process before the
crawl starts, the service in its own process: as in a real crawl). The spider does the example spider's work on
each page (an item, the navigation links extracted) but follows nothing.

Measured in the crawl process: pages per second (responses received by the spider, from the
first request to the last response) and the reactor's lag: a
``twisted.internet.task.LoopingCall`` every 10 ms records how late each call runs; the
longest lag is the reactor's longest stall. Also: the reactor thread's longest busy stretch
between two ticks in its own CPU time (``time.thread_time()``: the code's share of a stall,
not the machine's load), its CPU time per page, the CPU time per page of the crawl's process
and the detector process or service, and the longest garbage collection. ``--configs``
picks configurations; a name with ``+freeze`` adds ``gc.freeze()`` at the engine's start.

    python benchmarks/scrapy_crawl.py                      # prints the table
    python benchmarks/scrapy_crawl.py --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "scrapy"
CONFIGS = ("without", "before", "threads", "process", "service")
BEFORE_MODULE = "neardup_scrapy_before"
FREEZE = "+freeze"  # a configuration with gc.freeze() at the engine's start
END = "<!-- end of the output of benchmarks/scrapy_crawl.py -->"
SECTION = "## Scrapy crawl: the reactor never waits on neardup (`benchmarks/scrapy_crawl.py`)"
TICK = 0.010


# -- the crawl (child process) -----------------------------------------------------------

def _child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(EXAMPLE))
    if args.before_dir:
        sys.path.insert(0, args.before_dir)
    os.environ["SCRAPY_SETTINGS_MODULE"] = "neardup_example.settings"
    import scrapy
    serve_sample = importlib.import_module("serve_sample")  # examples/scrapy, on the path
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings
    from twisted.internet.task import LoopingCall

    groups = sorted(serve_sample.load_articles())
    urls = [f"{args.site}a/{g}/?edition={r}" for r in range(args.rounds) for g in groups]
    out: dict[str, Any] = {"config": args.child, "requests": len(urls), "lags": [], "stalls": []}

    class LagMonitor:
        """The reactor's lag: how late a 10 ms LoopingCall runs, from the engine's start
        to the spider's close."""

        def __init__(self) -> None:
            self.last = self.last_cpu = self.cpu0 = 0.0
            self.lags: list[float] = []
            self.busy: list[float] = []
            self.loop = LoopingCall(self.tick)

        def tick(self) -> None:
            now, cpu = time.perf_counter(), time.thread_time()
            if self.last:
                self.lags.append(max(0.0, now - self.last - TICK))
                self.busy.append(cpu - self.last_cpu)  # the reactor thread's own CPU time between ticks
                if self.lags[-1] > 0.05:
                    out["stalls"].append((round(now - BenchSpider.t0, 3), round(1000 * self.lags[-1], 1)))
            else:
                self.cpu0 = cpu
            self.last, self.last_cpu = now, cpu

        @classmethod
        def from_crawler(cls, crawler: Any) -> "LagMonitor":
            ext = cls()
            crawler.signals.connect(ext.started, signal=scrapy.signals.engine_started)
            crawler.signals.connect(ext.stopped, signal=scrapy.signals.spider_closed)
            return ext

        def started(self) -> None:
            if args.gc_freeze:
                gc.collect()
                gc.freeze()  # what is there at the start is never scanned again
            self.loop.start(TICK, now=True)

        def stopped(self) -> None:
            if self.loop.running:
                self.loop.stop()
            out["lags"] = self.lags
            out["reactor_cpu_s"] = time.thread_time() - self.cpu0
            out["busy_ms"] = round(1000 * max(self.busy, default=0.0), 1)

    class BenchSpider(scrapy.Spider):
        name = "bench"
        t0 = t1 = 0.0
        pages = 0

        async def start(self) -> Any:
            BenchSpider.t0 = time.perf_counter()
            out["cpu0"] = _cpu(self.crawler)
            for url in urls:
                yield scrapy.Request(url)

        def parse(self, response: Any) -> Any:  # the example spider's work, nothing followed
            BenchSpider.pages += 1
            BenchSpider.t1 = time.perf_counter()
            if BenchSpider.pages == len(urls):
                out["cpu1"] = _cpu(self.crawler)
            verdict = response.meta.get("neardup") or {}
            links = response.css("nav.site a::attr(href)").getall()
            yield {"url": response.url, "status": verdict.get("status"), "links": len(links)}

    def _cpu(crawler: Any) -> tuple[float, float]:
        """CPU seconds so far of the crawl's process (all threads) and of the detector process."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        detector = 0.0
        for mw in crawler.engine.downloader.middleware.middlewares:
            if getattr(mw, "mode", None) == "process":
                detector = mw._store.submit(time.process_time).result()
        return own.ru_utime + own.ru_stime, detector

    gc_pauses: list[float] = []
    gc_start = [0.0]

    def _gc(phase: str, info: dict[str, int]) -> None:
        if threading.current_thread() is threading.main_thread():
            if phase == "start":
                gc_start[0] = time.perf_counter()
            elif gc_start[0]:
                gc_pauses.append(time.perf_counter() - gc_start[0])

    gc.callbacks.append(_gc)
    settings = get_project_settings()
    mws = {"without": {}, "before": {f"{BEFORE_MODULE}.NeardupDownloaderMiddleware": 950},
           "threads": {"neardup.scrapy.NeardupDownloaderMiddleware": 950},
           "process": {"neardup.scrapy.NeardupDownloaderMiddleware": 950},
           "service": {"neardup.scrapy.NeardupDownloaderMiddleware": 950}}[args.child]
    settings.setdict({
        "DOWNLOADER_MIDDLEWARES": mws, "SPIDER_MIDDLEWARES": {},
        "NEARDUP_DB": str(Path(args.tmp) / f"{args.child}.db"), "NEARDUP_ON_DUPLICATE": "tag",
        "NEARDUP_THREADS": args.threads, "NEARDUP_PROCESS": args.child == "process",
        "NEARDUP_URL": args.service if args.child == "service" else None,
        "CONCURRENT_REQUESTS": args.concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "CLOSESPIDER_TIMEOUT": args.max_seconds, "CLOSESPIDER_PAGECOUNT": 0,
        "EXTENSIONS": {LagMonitor: 0}, "LOG_LEVEL": "WARNING",
    }, priority="cmdline")
    if args.reactor:
        settings.set("TWISTED_REACTOR", args.reactor, priority="cmdline")
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    lags = sorted(out["lags"])
    elapsed = BenchSpider.t1 - BenchSpider.t0
    out.update(pages=BenchSpider.pages, seconds=round(elapsed, 3),
               pages_per_s=round(BenchSpider.pages / elapsed, 1) if elapsed > 0 else 0.0,
               stall_ms=round(1000 * lags[-1], 1) if lags else None,
               p99_lag_ms=round(1000 * lags[int(0.99 * (len(lags) - 1))], 1) if lags else None,
               lags_over_50ms=sum(lag > 0.05 for lag in lags), ticks=len(lags),
               reactor_cpu_ms_per_page=round(1000 * out.pop("reactor_cpu_s", 0.0) / max(1, BenchSpider.pages), 2),
               neardup={k: v for k, v in stats.items() if k.startswith("neardup/")},
               finish_reason=stats.get("finish_reason"))
    (c0, d0), (c1, d1) = out.pop("cpu0"), out.pop("cpu1", out.get("cpu0"))
    out["cpu_ms_per_page"] = round(1000 * (c1 - c0 + d1 - d0) / max(1, BenchSpider.pages), 2)
    out["gc_ms"] = round(1000 * max(gc_pauses, default=0.0), 1)
    del out["lags"]
    Path(args.out).write_text(json.dumps(out))


# -- the driver ----------------------------------------------------------------------------

def _before_module(rev: str, into: Path) -> None:
    src = subprocess.run(["git", "show", f"{rev}:src/neardup/scrapy.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    (into / f"{BEFORE_MODULE}.py").write_text(src)


def _start_service(store: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """``neardup serve`` on a free port of 127.0.0.1 over a fresh store, once it answers."""
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from neardup.cli import main; main()", "serve",
                             "--db", str(store / "service.db"), "--port", str(port), "--extractor", "fast"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("neardup serve did not start")


def _stop_service(proc: subprocess.Popen[bytes]) -> float:
    """Stop the service; its CPU seconds (user + system, from /proc)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    proc.terminate()
    proc.wait(timeout=30)
    return cpu


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} / {five:.2f}"


def run_all(args: argparse.Namespace) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    sys.path.insert(0, str(EXAMPLE))
    serve_sample = importlib.import_module("serve_sample")  # examples/scrapy, on the path

    srv = serve_sample.make_server(0, host="127.0.0.1")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{srv.server_address[1]}/"
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in args.configs}
    loads = [_load()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _before_module(args.before, Path(tmp))
            for rep in range(args.repeats):
                for config in args.configs:
                    out = Path(tmp) / f"{config}-{rep}.json"
                    store = Path(tmp) / f"{config}-{rep}"  # a fresh store per crawl
                    store.mkdir()
                    cmd = [sys.executable, __file__, "--child", config.removesuffix(FREEZE), "--site", site,
                           "--tmp", str(store), "--out", str(out), "--before-dir", tmp, "--rounds", str(args.rounds),
                           "--concurrency", str(args.concurrency), "--threads", str(args.threads),
                           "--max-seconds", str(args.max_seconds)]
                    if args.reactor:
                        cmd += ["--reactor", args.reactor]
                    if args.gc_freeze or config.endswith(FREEZE):
                        cmd += ["--gc-freeze"]
                    service = None
                    if config.removesuffix(FREEZE) == "service":
                        service, url = _start_service(store, env)
                        cmd += ["--service", url]
                    before = resource.getrusage(resource.RUSAGE_SELF)
                    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.max_seconds + 120)
                    after = resource.getrusage(resource.RUSAGE_SELF)  # this process: the site's server
                    service_cpu = _stop_service(service) if service else 0.0
                    if run.returncode != 0 or not out.exists():
                        raise SystemExit(f"{config} failed:\n{run.stderr[-3000:]}")
                    got = json.loads(out.read_text())
                    server = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                    got["server_cpu_ms_per_page"] = round(1000 * server / max(1, got["pages"]), 2)
                    if service:  # the service's CPU (from its start: imports and numba kernels too)
                        got["cpu_ms_per_page"] = round(got["cpu_ms_per_page"] + 1000 * service_cpu / got["pages"], 2)
                    if not got["pages"]:
                        raise SystemExit(f"{config}: no page crawled:\n{run.stderr[-3000:]}")
                    results[config].append(got)
                    print(f"{rep} {config:8s} {got['pages']:5d} pages {got['pages_per_s']:7.1f}/s "
                          f"stall {got['stall_ms']} ms p99 {got['p99_lag_ms']} ms "
                          f"busy {got['busy_ms']} ms gc {got['gc_ms']} ms cpu/page {got['reactor_cpu_ms_per_page']} ms "
                          f"all {got['cpu_ms_per_page']} ms server {got['server_cpu_ms_per_page']} ms "
                          f">50ms {got['stalls']} {got['neardup']}", file=sys.stderr)
                loads.append(_load())
    finally:
        srv.shutdown()
        srv.server_close()
    return results, loads


def table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    def base(config: str) -> float | None:
        runs = results.get("without" + (FREEZE if config.endswith(FREEZE) else ""))
        return statistics.median(r["pages_per_s"] for r in runs) if runs else None

    lines = ["| middleware | pages | pages/s (median; each run) | vs without | longest stall, ms (max; each run) "
             "| 99th pct lag, ms (median) | lags > 50 ms (total) | longest busy stretch, ms (max) "
             "| reactor thread CPU, ms/page (median) | crawl CPU, ms/page (median) |",
             "|---|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    names = {"without": "none", "before": "before: blocking (in the reactor thread)",
             "threads": "after: coroutines, threads (`NEARDUP_PROCESS=False`)",
             "process": "after: coroutines, detector process (default)",
             "service": "after: coroutines, `NEARDUP_URL` (service, threads)"}
    for config, runs in results.items():
        pps = [r["pages_per_s"] for r in runs]
        stalls = [r["stall_ms"] for r in runs]
        med, ref = statistics.median(pps), base(config)
        rel = f"{100 * med / ref:.0f}%" if ref else "-"
        name = names[config.removesuffix(FREEZE)] + (", `gc.freeze()`" if config.endswith(FREEZE) else "")
        lines.append(f"| {name} | {runs[0]['pages']} | {med:.0f} ({', '.join(f'{p:.0f}' for p in pps)}) "
                     f"| {rel} | {max(stalls):.0f} ({', '.join(f'{s:.0f}' for s in stalls)}) "
                     f"| {statistics.median(r['p99_lag_ms'] for r in runs):.1f} "
                     f"| {sum(r['lags_over_50ms'] for r in runs)} | {max(r['busy_ms'] for r in runs):.0f} "
                     f"| {statistics.median(r['reactor_cpu_ms_per_page'] for r in runs):.2f} "
                     f"| {statistics.median(r['cpu_ms_per_page'] for r in runs):.2f} |")
    return lines


def write_section(path: Path, lines: list[str]) -> None:
    """Replace the section's generated part (up to :data:`END`, or the whole section) in
    ``path``, keeping what follows the marker (the findings written by hand); append it when
    the file has no such section."""
    text = path.read_text() if path.exists() else ""
    block = "\n".join(lines) + "\n\n" + END + "\n"
    at = text.find(SECTION)
    if at < 0:
        path.write_text(text.rstrip("\n") + "\n\n" + block)
        return
    end = text.find(END, at)
    if end >= 0:
        rest = text[end + len(END):].lstrip("\n")
    else:
        nxt = text.find("\n## ", at + len(SECTION))
        rest = text[nxt + 1:] if nxt >= 0 else ""
    path.write_text(text[:at] + block + ("\n" + rest if rest else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20, help="URLs per configuration: 14 x this")
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration, alternated")
    ap.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS (and per domain)")
    ap.add_argument("--threads", type=int, default=2, help="NEARDUP_THREADS of the 'threads' middleware")
    ap.add_argument("--before", default="e0bc2e7", help="git revision of the blocking middleware")
    ap.add_argument("--reactor", default=None, help="TWISTED_REACTOR (default: the asyncio reactor)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() in the crawl when the engine starts")
    ap.add_argument("--max-seconds", type=int, default=120, help="CLOSESPIDER_TIMEOUT of each crawl")
    ap.add_argument("--write", type=Path, default=None, help="replace this file's section with the results")
    ap.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    ap.add_argument("--site", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--before-dir", help=argparse.SUPPRESS)
    ap.add_argument("--service", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)
    args.configs = [c for c in args.configs.split(",") if c]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results, loads = run_all(args)
    cmd = "python benchmarks/scrapy_crawl.py " + " ".join(
        a for a in sys.argv[1:] if not a.startswith("--write") and not a.endswith(".md"))
    lines = [SECTION, "",
             f"`{cmd.strip()}` ({started}; Python {platform.python_version()}, Scrapy "
             f"{__import__('scrapy').__version__}, Twisted {__import__('twisted').__version__}, reactor "
             f"{args.reactor or 'asyncio (default)'}). Machine: {os.cpu_count()} cores shared with other "
             f"developers' work; load average (1 min / 5 min) before and after each round: {', '.join(loads)}.",
             "",
             f"One crawl: {args.rounds} x 14 distinct article URLs of the examples/scrapy site on 127.0.0.1 "
             f"(every one fetched), {args.concurrency} concurrent requests, `NEARDUP_ON_DUPLICATE=tag`, a fresh "
             f"SQLite store, the `fast` extractor, `NEARDUP_THREADS={args.threads}`, no warm-up; "
             f"{args.repeats} runs per configuration, alternated. Pages/s: responses the spider parsed, from "
             "the first request to the last response. Stall: the lateness of a `LoopingCall` every 10 ms in "
             "the reactor thread (wall time: it includes the time the OS gives the cores to other work). Busy "
             "stretch: the reactor thread's own CPU time between two ticks (`time.thread_time()`: what the "
             "crawl's code, not the machine's load, keeps the reactor from); reactor thread CPU: its CPU time "
             "over the crawl per page; crawl CPU: the CPU time of the crawl's process (every thread) and of "
             "the detector process per page (not the site's server).", ""] + table(results)
    print("\n".join(lines))
    if args.write:
        write_section(args.write, lines)


if __name__ == "__main__":
    main()

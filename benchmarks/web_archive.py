"""Web archives: what the deduplicated WARC saves, and what the CDXJ sidecar costs.

1. **A recrawl of a local site into WARC files**: Sphinx's manual (Debian's ``sphinx-doc``)
   served on 127.0.0.1 as it is (static files: a recrawl serves the same bytes) and once more
   with a timestamp and a rotating ad inside every article (``benchmarks/_noisy_docs.py``: a
   recrawl serves other bytes), each crawled twice by GNU Wget (``--warc-file``); both crawls
   through ``neardup dedup --db --warc-out``: bytes in and out, revisits (payload-identical
   responses), metadata records (near and main-text-exact copies kept whole).
2. **The sidecar**: a WARC of N captures (the bundled sample's pages under N URLs) through
   ``neardup dedup --cdxj``: the CPU time of the sidecar alone (its ``add`` and ``close``, timed
   inside the run) per 10^4 captures, beside cdxj-indexer's time to index the same WARC.

Usage::

    python benchmarks/web_archive.py [--captures 10000] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import io
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, machine_line, replace_section
from _noisy_docs import DOCS, NoisyDocs

START, END = "<!-- web_archive:start -->", "<!-- web_archive:end -->"


def neardup(*args: str) -> dict[str, Any]:
    """Run the CLI; its JSON summary."""
    done = subprocess.run([sys.executable, "-m", "neardup", *args], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def wget_twice(base: str, folder: Path) -> list[Path]:
    """Two wget crawls of ``base`` into WARC files."""
    out = []
    for i in (1, 2):
        name = folder / f"crawl{i}"
        subprocess.run(["wget", "-q", "-r", "-l", "2", "-np", "-nd", "-P", str(folder / f"files{i}"),
                        f"--warc-file={name}", "--no-warc-keep-log", base], check=False, timeout=900)
        out.append(name.with_suffix(".warc.gz"))
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the crawl's requests are not news
        pass


def static_site(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """The folder served as it is on a free port of 127.0.0.1; the server and its home page."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/index.html"


def recrawl(name: str, base: str, folder: Path) -> dict[str, Any]:
    warcs = wget_twice(base, folder)
    summary = neardup("dedup", *map(str, warcs), "--db", str(folder / "s.db"), "--warc-out",
                      str(folder / "dedup.warc.gz"), "--jobs", "2", "--no-progress")
    return {"site": name, "pages": summary["pages"], "unchanged": summary["unchanged"], **summary["warc_out"]}


def sidecar_cost(captures: int, folder: Path) -> dict[str, Any]:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    pages = sorted((REPO_ROOT / "examples" / "sample" / "pages").glob("*.html.gz"))
    bodies = [gzip.decompress(p.read_bytes()) for p in pages]
    warc = folder / "many.warc.gz"
    with open(warc, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        for i in range(captures):
            w.write_record(w.create_warc_record(f"https://site{i % 97}.example/p/{i}", "response",
                                                payload=io.BytesIO(bodies[i % len(bodies)]), http_headers=http))
    code = ("import time, sys, runpy\n"
            "from neardup.report import cdxj\n"
            "spent = [0.0]\n"
            "def timed(f):\n"
            "    def g(*a, **k):\n"
            "        t = time.process_time(); r = f(*a, **k); spent[0] += time.process_time() - t; return r\n"
            "    return g\n"
            "cdxj.CdxjSidecar.add = timed(cdxj.CdxjSidecar.add)\n"
            "cdxj.CdxjSidecar.close = timed(cdxj.CdxjSidecar.close)\n"
            "sys.argv = ['neardup'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('neardup', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('SIDECAR', spent[0], file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, "dedup", str(warc), "--db", str(folder / "m.db"),
                           "--cdxj", str(folder / "many.cdxj"), "--jobs", "2", "--no-progress"],
                          capture_output=True, text=True, check=True)
    spent = float(next(line.split()[1] for line in done.stderr.splitlines() if line.startswith("SIDECAR")))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cdxj_indexer.main", "-o", str(folder / "index.cdxj"), str(warc)],
                   check=True, capture_output=True)
    indexer = time.perf_counter() - t0
    lines = (folder / "many.cdxj").read_text().count("\n")
    return {"captures": captures, "lines": lines, "sidecar_s": spent, "indexer_s": indexer,
            "sidecar_per_1e4_s": spent * 1e4 / captures, "indexer_per_1e4_s": indexer * 1e4 / captures}


def report(rows: list[dict[str, Any]], side: dict[str, Any], command: str) -> str:
    out = [START, "", "## Web archives: the deduplicated WARC and the CDXJ sidecar (`benchmarks/web_archive.py`)", "",
           f"Machine: {machine_line()}. Command: `{command}`.", "",
           "Two wget crawls (`-r -l 2 --warc-file`) of each local site into WARC files, both through "
           "`neardup dedup --db --warc-out`:", "",
           "| site | pages | re-fetches unchanged | records in | bytes in | bytes out | saved | revisits | metadata |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        saved = 1 - r["bytes_out"] / max(1, r["bytes_in"])
        out.append(f"| {r['site']} | {r['pages']} | {r['unchanged']} | {r['records_in']} | {r['bytes_in']:,} | "
                   f"{r['bytes_out']:,} | {saved:.1%} | {r['revisits']} | {r['metadata']} |")
    out += ["", "*static*: the site's files as they are, so a recrawl serves the same bytes and every re-fetched "
            "response (pages, stylesheets, scripts, images) becomes a revisit; *noisy*: a timestamp and a rotating "
            "ad in every article, so no page's payload repeats (its stylesheets, scripts and images still do: the "
            "revisits), while neardup still calls the re-fetched pages unchanged (per-fetch noise learned) and "
            "their copies (mirror, print, session ids) near or exact: those are kept whole, each with its verdict "
            "in a metadata record, which is why that copy is larger than its input. Payload deduplication, what "
            "Heritrix, warcprox and browsertrix-crawler do, saves nothing on such a site's pages; a revisit for a "
            "near copy would make a replay serve another capture's bytes.", "",
            f"The CDXJ sidecar of {side['captures']:,} captures ({side['lines']:,} lines): "
            f"{side['sidecar_s']:.2f} s of CPU inside `dedup --cdxj` ({side['sidecar_per_1e4_s']:.2f} s per 10^4 "
            f"captures); cdxj-indexer indexing the same WARC: {side['indexer_s']:.2f} s "
            f"({side['indexer_per_1e4_s']:.2f} s per 10^4, wall time of its process).", "", END]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--captures", type=int, default=10_000)
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    if shutil.which("wget") is None or not (DOCS / "index.html").is_file():
        print("needs GNU wget and Debian's sphinx-doc", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="neardup-web-archive-") as tmp:
        folder = Path(tmp)
        rows = []
        server, base = static_site(DOCS)
        try:
            (folder / "static").mkdir()
            rows.append(recrawl("static", base, folder / "static"))
        finally:
            server.shutdown()
        site = NoisyDocs()
        with site.serving():
            (folder / "noisy").mkdir()
            rows.append(recrawl("noisy", site.url("index.html"), folder / "noisy"))
        side = sidecar_cost(args.captures, folder)
    text = report(rows, side, "python benchmarks/web_archive.py" + (f" --captures {args.captures}"
                                                                      if args.captures != 10_000 else ""))
    print(text)
    if args.write:
        replace_section(args.write, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

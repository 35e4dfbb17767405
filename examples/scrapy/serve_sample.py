"""A local site made from the bundled sample (examples/sample), full of duplicate URLs.

Serves, on every host name that reaches it (the crawl uses a second one as a mirror):

- ``/``: links to one article per sample group (14 distinct articles), the calendar, a style sheet;
- ``/a/<group>/``: the article (the sample page as fetched, with a ``<nav class="site">``
  added), linking to its variants: ``?sessionid=...``, ``?utm_source=...&utm_medium=...``,
  ``index.html``, the print version ``/print/a/<group>/`` and the same path on the mirror host;
- ``/calendar/?date=YYYY-MM-DD``: a trap, the same events page for every date, each linking
  to the next day, without end;
- ``/static/style.css``: not HTML.

For tests and benchmarks: ``make_server(changed=...)`` serves a changed version (an update
sentence in its main text) of some articles and ``make_server(extra_variants=True)`` adds a
variant kind (``?ref=rss``) to every article's links; both can be switched between two
crawls (``server.site``, the handler class). ``/a/<group>/?edition=N`` serves the article
``N`` places further in the list (the benchmark's distinct URLs whose content differs).

Run it alone: ``python serve_sample.py --port 8000`` (then ``scrapy crawl site``).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gzip
import random
import re
import zlib
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

SAMPLE = Path(__file__).resolve().parents[1] / "sample"
MIRROR_HOST = "127.0.0.2"  # a second host name of the same server (the loopback network)


def load_articles(sample: Path = SAMPLE) -> dict[str, bytes]:
    """One capture (the first listed, not a mirror) of each sample group, by group."""
    out: dict[str, bytes] = {}
    with open(sample / "urls.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["group"] not in out and "mirror" not in row["file"]:
                out[row["group"]] = gzip.decompress((sample / row["file"]).read_bytes())
    return out


def variants(group: str, port: int, extra: bool = False) -> list[str]:
    """The duplicate URLs an article links to (paths on this host, then the mirror URL; with
    ``extra``, one more kind: ``?ref=rss``)."""
    sid = zlib.crc32(group.encode()) % 100000
    out = [f"/a/{group}/?sessionid={sid}", f"/a/{group}/?utm_source=newsletter&utm_medium=email",
           f"/a/{group}/index.html", f"/print/a/{group}/", f"http://{MIRROR_HOST}:{port}/a/{group}/"]
    return out + [f"/a/{group}/?ref=rss"] if extra else out


UPDATE = (b" Update: the figures in this report were revised on Tuesday after the regional office"
          b" published corrected numbers, and two quotes were added from people who attended.")


def changed_version(html: bytes) -> bytes:
    """``html`` with an update sentence in its main text: the first paragraph, longest first,
    whose change changes the page's fingerprint digest (the ``fast`` extractor's main text)."""
    from neardup.fingerprint.core import DEFAULT_CONFIG, fingerprint

    config = DEFAULT_CONFIG.with_(extractor="fast")
    digest = fingerprint(html, url="http://127.0.0.1/", config=config).digest
    paras = sorted(re.finditer(rb"<p[^>]*>(.*?)</p>", html, re.S | re.I), key=lambda m: -len(m.group(1)))
    for m in paras:
        new = html[:m.end(1)] + UPDATE + html[m.end(1):]
        if fingerprint(new, url="http://127.0.0.1/", config=config).digest != digest:
            return new
    raise ValueError("no paragraph of the main text found")


def _calendar_text() -> str:
    rng = random.Random(14)
    words = ("city council library museum park concert lecture market garden river bridge school "
             "festival exhibition meeting volunteers children family music theatre film reading "
             "workshop history science community neighbourhood evening morning afternoon tickets").split()
    paras = [" ".join(rng.choice(words) for _ in range(60)).capitalize() + "." for _ in range(6)]
    return "".join(f"<p>{p}</p>" for p in paras)


CALENDAR_TEXT = _calendar_text()


def _nav(links: list[str]) -> bytes:
    return ("<nav class=\"site\">" + "".join(f"<a href=\"{u}\">{u}</a> " for u in links) + "</nav>").encode()


def _with_nav(html: bytes, nav: bytes) -> bytes:
    at = html.lower().rfind(b"</body>")
    return html + nav if at < 0 else html[:at] + nav + html[at:]


class SiteHandler(BaseHTTPRequestHandler):
    articles: dict[str, bytes] = {}
    changed: dict[str, bytes] = {}  # group -> its changed version, served instead
    extra_variants = False

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/html") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        path, port = parts.path, int(self.server.server_address[1])  # type: ignore[index]
        segs = [s for s in path.split("/") if s]
        if segs[:1] == ["print"]:
            segs = segs[1:]
        if path == "/":
            links = [f"/a/{g}/" for g in self.articles] + ["/calendar/?date=2021-01-01", "/static/style.css"]
            body = b"<html><head><title>Sample site</title></head><body><h1>Sample site</h1>" + _nav(links)
            return self._send(200, body + b"</body></html>")
        if len(segs) in (2, 3) and segs[0] == "a" and segs[1] in self.articles and segs[2:] in ([], ["index.html"]):
            if len(segs) == 2 and not path.endswith("/"):
                return self._send(404, b"not found")
            group = segs[1]
            edition = parse_qs(parts.query).get("edition", [""])[0]
            if edition.isdigit():
                groups = list(self.articles)
                group = groups[(groups.index(group) + int(edition)) % len(groups)]
            html = self.changed.get(group) or self.articles[group]
            return self._send(200, _with_nav(html, _nav(["/"] + variants(segs[1], port, self.extra_variants))))
        if path == "/calendar/":
            try:
                day = datetime.date.fromisoformat(parse_qs(parts.query).get("date", [""])[0])
            except ValueError:
                return self._send(404, b"not found")
            nxt = (day + datetime.timedelta(days=1)).isoformat()
            body = (f"<html><head><title>Events</title></head><body><article><h1>Events on {day}</h1>"
                    f"{CALENDAR_TEXT}</article>").encode() + _nav(["/", f"/calendar/?date={nxt}"])
            return self._send(200, body + b"</body></html>")
        if path == "/static/style.css":
            return self._send(200, b"body { font-family: serif; }", "text/css")
        return self._send(404, b"not found")


def make_server(port: int = 0, host: str = "0.0.0.0", sample: Path = SAMPLE, *, changed: tuple[str, ...] = (),
                extra_variants: bool = False) -> ThreadingHTTPServer:
    """The site's server; ``server.site`` is its handler class (``articles``, ``changed``,
    ``extra_variants``: set ``changed`` with :func:`changed_version`)."""
    articles = load_articles(sample)
    handler = type("Handler", (SiteHandler,), {"articles": articles, "extra_variants": extra_variants,
                                               "changed": {g: changed_version(articles[g]) for g in changed}})
    srv = ThreadingHTTPServer((host, port), partial(handler))
    srv.site = handler  # type: ignore[attr-defined]
    return srv


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    srv = make_server(args.port)
    print(f"serving the sample site on http://127.0.0.1:{args.port}/ (mirror: http://{MIRROR_HOST}:{args.port}/)")
    srv.serve_forever()

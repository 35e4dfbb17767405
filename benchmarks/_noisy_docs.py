"""A real documentation site served with the noise real sites have, and its ground truth.

Built from the HTML of a Debian documentation package (by default Sphinx's manual,
``sphinx-doc``: ``/usr/share/doc/sphinx-doc/html``), served on 127.0.0.1 by two
:class:`http.server.ThreadingHTTPServer`: the site, and a mirror of it on a second port. Every
page as served carries:

- inside the article body, a "Last updated: <now>" line and an ad of a rotating pool (per-fetch
  noise: a re-fetch of an unchanged page differs from the last one);
- ``<link rel="canonical">`` to its URL on the site (the mirror's and print pages' too);
- its links with noise: 1 in 20 with ``?sessionid=<random>`` (a page fetched with a session id
  passes it on to every link, as session-rewriting sites do), 1 in 20 with ``?utm_*``, 1 in 20
  with ``#top``, and a link to ``DIR/index.html`` written ``DIR/`` 1 time in 4;
- at its end: a link to its print version (``/print/<path>``: the article in another
  template) and one to the events calendar; the home page and 1 page in 10 link to the mirror.

The events calendar, ``/events?month=N`` (N from 1 to 100,000), is a numbered trap: each month
lists 4 events of a sliding window (consecutive months share half their text), with the month
in the title and the text, and links to the previous and the next month.

:meth:`NoisyDocs.content_of` is the ground truth: the content a URL serves (the site's page,
whatever the port, the print prefix, the parameters and the fragment; ``events:N`` for a
month; None for what the site does not serve). :attr:`NoisyDocs.log` records every response.
"""

from __future__ import annotations

import hashlib
import html
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

DOCS = Path("/usr/share/doc/sphinx-doc/html")
MAIN = '<div class="body" role="main">'
ADS = ("Sponsored: learn to paint in a weekend with our online course",
       "Sponsored: the best coffee beans delivered to your door every week",
       "Sponsored: save on your next flight with our travel newsletter",
       "Sponsored: a standing desk that remembers your height, now on sale",
       "Sponsored: listen to a thousand audiobooks free for thirty days")
TOPICS = ("documentation builds", "theme design", "translations", "extensions", "search indexes",
          "cross references", "the LaTeX builder")
MAX_MONTH = 100_000
_HREF = re.compile(r'href="([^"]*)"')
_SKIP = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|/)", re.I)


def doc_pages(docs: Path = DOCS, limit: int | None = None) -> list[str]:
    """The site's HTML pages (relative paths, sorted), at most ``limit`` (then the home page
    and the pages it links to first, so that a small site is still one site)."""
    every = (str(p.relative_to(docs)) for p in docs.rglob("*.html"))
    names = sorted(name for name in every if not name.startswith("_"))
    if limit is None or limit >= len(names):
        return names
    home = (docs / "index.html").read_text(encoding="utf-8", errors="replace")
    linked = [h.split("#")[0] for h in _HREF.findall(home) if not _SKIP.match(h)]
    first = list(dict.fromkeys(n for n in ["index.html", *linked] if n in names))
    rest = [n for n in names if n not in first]
    return sorted((first + rest)[:limit])


@dataclass(frozen=True)
class Served:
    """One response: when, on which port, the path and query asked, the status code."""

    at: float
    port: int
    target: str
    code: int


def _mix(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest(), "big")


class NoisyDocs:
    """The noisy site of ``docs`` (its pages ``names``), served by :meth:`serving`."""

    def __init__(self, docs: Path = DOCS, names: list[str] | None = None, seed: int = 0) -> None:
        self.docs = docs
        self.names = names if names is not None else doc_pages(docs)
        self._known = set(self.names)
        self._html = {n: (docs / n).read_text(encoding="utf-8", errors="replace") for n in self.names}
        self.rng = random.Random(seed)
        self.log: list[Served] = []
        self._lock = threading.Lock()
        self.site_port = self.mirror_port = 0

    # -- the ground truth ------------------------------------------------------------------
    def content_of(self, url: str) -> str | None:
        """The content ``url`` serves: a page name, ``events:N``, or None (nothing served)."""
        parts = urlsplit(url)
        path = parts.path
        if path.startswith("/print/"):
            path = path[len("/print"):]
        if path == "/events":
            month = parse_qs(parts.query).get("month", ["1"])[0]
            return f"events:{int(month)}" if month.isdigit() and 1 <= int(month) <= MAX_MONTH else None
        name = path.lstrip("/")
        if name == "" or name.endswith("/"):
            name += "index.html"
        return name if name in self._known else None

    def url(self, name: str, port: int | None = None) -> str:
        """The URL of page ``name`` on the site (or on ``port``)."""
        return f"http://127.0.0.1:{port or self.site_port}/{name}"

    # -- serving -----------------------------------------------------------------------------
    def _noise(self) -> str:
        with self._lock:
            ad = self.rng.choice(ADS)
        now = time.strftime("%B %d, %Y at %H:%M:%S", time.gmtime())
        return f"<p>Last updated: {now} UTC</p><p>{ad}</p>"

    def _links(self, page: str, body: str, session: str | None) -> str:
        """The page's relative links with the site's noise."""
        count = [0]

        def one(m: re.Match[str]) -> str:
            href = html.unescape(m.group(1))
            if _SKIP.match(href) or not href:
                return m.group(0)
            count[0] += 1
            h = _mix(page, count[0], href) % 20
            target, _, frag = href.partition("#")
            if target.endswith("index.html") and _mix("dir", page, href) % 4 == 0:
                target = target[: -len("index.html")]
            query = ""
            if session is not None:
                query = f"?sessionid={session}"
            elif h == 0:
                with self._lock:
                    query = f"?sessionid={self.rng.getrandbits(48):012x}"
            elif h == 1:
                query = "?utm_source=newsletter&utm_medium=email"
            if h == 2:
                frag = "top"
            out = target + query + (f"#{frag}" if frag else "")
            return f'href="{html.escape(out, quote=True)}"'

        return _HREF.sub(one, body)

    def page(self, name: str, port: int, session: str | None, printed: bool) -> str:
        """Page ``name`` as served on ``port`` (the site or the mirror), or its print version."""
        text = self._html[name]
        canonical = f'<link rel="canonical" href="{self.url(name)}">'
        text = text.replace("</head>", canonical + "</head>", 1) if "</head>" in text else canonical + text
        if MAIN in text:
            text = text.replace(MAIN, MAIN + self._noise(), 1)
        extra = [f'<a href="/print/{name}">Print this page</a>', '<a href="/events?month=1">Events</a>']
        if name == "index.html" or _mix("mirror", name) % 10 == 0:
            extra.append(f'<a href="http://127.0.0.1:{self.mirror_port}/{name}">This page on our mirror</a>')
        text = self._links(name, text, session)
        footer = '<p class="site-links">' + " | ".join(extra) + "</p>"
        text = text.replace("</body>", footer + "</body>", 1) if "</body>" in text else text + footer
        if printed:
            return self._printed(name, text)
        return text

    def _printed(self, name: str, text: str) -> str:
        """The print template: the title and the article, nothing of the site's chrome."""
        title = re.search(r"<title>(.*?)</title>", text, re.S)
        start = text.find(MAIN)
        body = text[start + len(MAIN):] if start >= 0 else text
        end = body.find('<div class="sphinxsidebar"')
        body = body[:end] if end >= 0 else body
        canonical = f'<link rel="canonical" href="{self.url(name)}">'
        return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title.group(1) if title else name}"
                f"</title>{canonical}</head><body class=\"print\"><div class=\"printed\"><p>Printable version</p>"
                f"{body}</div></body></html>")

    def events(self, month: int) -> str:
        """The calendar's month ``month``: 4 events of a sliding window, previous and next links."""
        items = "".join(
            f"<li>Event {j}: a meetup about {TOPICS[j % len(TOPICS)]} in room {j % 5 + 1}</li>"
            for j in range(2 * month, 2 * month + 4))
        nav = (f'<a href="/events?month={month - 1}">Previous month</a> ' if month > 1 else "") + \
            (f'<a href="/events?month={month + 1}">Next month</a>' if month < MAX_MONTH else "")
        return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Events in month {month}</title></head>"
                f"<body><div class=\"body\" role=\"main\"><h1>Events in month {month}</h1>{self._noise()}"
                f"<ul>{items}</ul><p>{nav}</p></div></body></html>")

    def respond(self, port: int, target: str) -> tuple[int, str]:
        """The status code and HTML of ``target`` (path and query) asked on ``port``."""
        parts = urlsplit(target)
        session = parse_qs(parts.query).get("sessionid", [None])[0]
        content = self.content_of(f"http://127.0.0.1:{port}{target}")
        if content is None:
            return 404, "<html><head><title>Not found</title></head><body><p>Not found</p></body></html>"
        if content.startswith("events:"):
            return 200, self.events(int(content.split(":")[1]))
        return 200, self.page(content, port, session, parts.path.startswith("/print/"))

    @contextmanager
    def serving(self) -> Iterator[NoisyDocs]:
        """The site and its mirror on two free ports of 127.0.0.1, for the ``with`` block."""
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                port = int(self.connection.getsockname()[1])
                code, body = site.respond(port, self.path)
                data = body.encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with site._lock:
                    site.log.append(Served(time.time(), port, self.path, code))

            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

        servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
        for srv in servers:
            srv.daemon_threads = True
            threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.site_port, self.mirror_port = (int(s.server_address[1]) for s in servers)
        try:
            yield self
        finally:
            for srv in servers:
                srv.shutdown()
                srv.server_close()

"""A small static site full of duplicate URLs, for the Crawlee examples (Python and Node).

Built in a folder from a few real HTML pages (by default one capture per group of the
bundled sample, ``examples/sample``) and served from it by :mod:`http.server`:

- ``/`` (``index.html``): links to every article, ``/pages/<name>.html``;
- ``/pages/<name>.html``: the article (the page's bytes as fetched, with a ``<nav
  class="neardup-site">`` added before ``</body>``), linking to its duplicate URLs: a
  ``?sessionid=<random>`` variant of itself, a ``?fbclid=<random>`` variant (a click id,
  a tracking parameter: the same URL for neardup's store, another request for Crawlee, whose
  request keys drop only ``utm_*``), and ``/copies/<name>.html``, the same bytes under a
  second URL;
- ``/copies/<name>.html``: the copy.

The session and click ids are new every time the site is built (``seed`` makes them repeatable), as a
site hands out new ones to every visitor: a second crawl meets session-id URLs it never saw.
The examples crawl only ``/pages/`` and ``/copies/`` from the index (:func:`scope_pattern`),
so the articles' own links (to their original sites, or relative ones that this copy does
not serve) are never followed.

Run it alone (then crawl ``http://127.0.0.1:8000/``)::

    python noisy_site.py --port 8000                 # the bundled sample's articles
    python noisy_site.py --port 8000 --pages DIR     # the *.html / *.html.gz files of DIR
"""

from __future__ import annotations

import argparse
import csv
import gzip
import html
import random
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "sample"
#: The paths the examples crawl (below the site's root): the articles and their copies.
SCOPE = r"(?:pages|copies)/"


def sample_pages(sample: Path = SAMPLE) -> dict[str, bytes]:
    """One capture (the first listed, not a mirror) of each group of the bundled sample."""
    out: dict[str, bytes] = {}
    with open(sample / "urls.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["group"] not in out and "mirror" not in row["file"]:
                out[row["group"]] = gzip.decompress((sample / row["file"]).read_bytes())
    return out


def folder_pages(folder: Path) -> dict[str, bytes]:
    """The ``*.html`` and ``*.html.gz`` files of a folder, by file stem."""
    out: dict[str, bytes] = {}
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".html.gz"):
            out[path.name.removesuffix(".html.gz")] = gzip.decompress(path.read_bytes())
        elif path.name.endswith(".html"):
            out[path.name.removesuffix(".html")] = path.read_bytes()
    return out


def scope_pattern(site: str) -> str:
    """The regular expression of the URLs the examples follow on ``site`` (its root URL)."""
    return "^" + re.escape(site.rstrip("/") + "/") + SCOPE


def _nav(name: str, session: str, click: str) -> bytes:
    page = f"/pages/{name}.html"
    links = [(f"{page}?sessionid={session}", "this page (session)"),
             (f"{page}?fbclid={click}", "this page (shared)"),
             (f"/copies/{name}.html", "this page (copy)"), ("/", "home")]
    items = "".join(f'<li><a href="{html.escape(href)}">{text}</a></li>' for href, text in links)
    return f'\n<nav class="neardup-site"><ul>{items}</ul></nav>\n'.encode()


def _with_nav(content: bytes, nav: bytes) -> bytes:
    cut = content.lower().rfind(b"</body>")
    return content + nav if cut < 0 else content[:cut] + nav + content[cut:]


def build_site(folder: Path, pages: Mapping[str, bytes], *, seed: int | None = None) -> dict[str, str]:
    """Write the site into ``folder`` (made when missing; files of an earlier build are
    replaced); returns each article's session id, by name. Names must be usable in URLs
    (letters, digits, ``-``, ``_``, ``.``)."""
    rng = random.Random(seed)
    for sub in ("pages", "copies"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    sessions: dict[str, str] = {}
    for name, content in pages.items():
        if not re.fullmatch(r"[\w.-]+", name):
            raise ValueError(f"page name {name!r} is not usable in a URL")
        sessions[name] = f"{rng.getrandbits(64):016x}"
        page = _with_nav(content, _nav(name, sessions[name], f"{rng.getrandbits(64):016x}"))
        (folder / "pages" / f"{name}.html").write_bytes(page)
        (folder / "copies" / f"{name}.html").write_bytes(page)
    items = "".join(f'<li><a href="/pages/{name}.html">{html.escape(name)}</a></li>' for name in pages)
    (folder / "index.html").write_text(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Articles</title></head><body>"
        f'<h1>Articles</h1><nav class="neardup-site"><ul>{items}</ul></nav></body></html>\n', encoding="utf-8")
    return sessions


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def make_server(folder: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server of ``folder`` (not started; ``port`` 0: a free one)."""
    return ThreadingHTTPServer((host, port), partial(_QuietHandler, directory=str(folder)))


@contextmanager
def serving(folder: Path, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """The site of ``folder`` served in a thread while the block runs; yields its root URL."""
    server = make_server(folder, host, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--pages", type=Path, help="a folder of *.html / *.html.gz pages (default: the bundled sample)")
    ap.add_argument("--folder", type=Path, help="where to write the site (default: a temporary folder)")
    args = ap.parse_args()
    pages = folder_pages(args.pages) if args.pages else sample_pages()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or Path(tmp)
        build_site(folder, pages)
        server = make_server(folder, args.host, args.port)
        print(f"serving {len(pages)} articles at http://{args.host}:{server.server_address[1]}/", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


if __name__ == "__main__":
    main()

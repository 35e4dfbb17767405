"""WACZ packages (Webrecorder, browsertrix-crawler) as input items (:func:`read_wacz`).

A WACZ file is a ZIP holding the crawl's WARC files under ``archive/``, the list of the pages
it captured in ``pages/pages.jsonl`` (and ``pages/extraPages.jsonl``), its index and a
``datapackage.json``. Its WARC files are read as WARC files are
(:func:`neardup.ingest.warc.read_warc`: pages, revisits, skipped records, errors), in name
order, each extracted to a temporary file first (FastWARC reads files); where the package
lists its pages, an HTML capture of a URL it does not list (an iframe, a page's HTML
fragment) is skipped as ``not-a-page``. Items are named ``PACKAGE!archive/NAME#N URL``.

>>> import io, zipfile
>>> buf = io.BytesIO()
>>> with zipfile.ZipFile(buf, "w") as z:
...     z.writestr("pages/pages.jsonl", '{"format": "json-pages-1.0"}\\n{"url": "https://a.example/"}\\n')
>>> sorted(listed_pages(zipfile.ZipFile(buf)))
['https://a.example/']
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from neardup.errors import InputFormatError, URLError
from neardup.fingerprint.extract import DEFAULT_MAX_BYTES
from neardup.ingest.items import InputItem, skipped
from neardup.ingest.warc import read_warc
from neardup.urls import normalize_url

#: the members of a package that list its pages
PAGE_LISTS = ("pages/pages.jsonl", "pages/extraPages.jsonl")
#: a page list line longer than this is not read (a list of URLs has no business with it)
MAX_LINE = 1 << 20


def _key(url: str) -> str:
    try:
        return normalize_url(url)
    except URLError:
        return url


def listed_pages(z: zipfile.ZipFile) -> set[str] | None:
    """The URLs the package lists as its pages (as given and normalised), None when it has
    no page list."""
    names = set(z.namelist())
    lists = [n for n in PAGE_LISTS if n in names]
    if not lists:
        return None
    urls: set[str] = set()
    for name in lists:
        with z.open(name) as fh:
            for raw in fh:
                if len(raw) > MAX_LINE:
                    continue
                try:
                    entry = json.loads(raw)
                except ValueError:
                    continue
                url = entry.get("url") if isinstance(entry, dict) else None
                if isinstance(url, str) and url:
                    urls.update((url, _key(url)))
    return urls


def read_wacz(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    """The items of a WACZ package's WARC files (see the module's description), in order."""
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputFormatError(f"{path}: not a WACZ package (a ZIP file): {exc}") from None
    with z:
        warcs = sorted(n for n in z.namelist()
                       if n.startswith("archive/") and n.lower().endswith((".warc", ".warc.gz")))
        if not warcs:
            raise InputFormatError(f"{path}: a WACZ package without WARC files under archive/")
        pages = listed_pages(z)
        with tempfile.TemporaryDirectory(prefix="neardup-wacz-") as tmp:
            for name in warcs:
                local = Path(tmp) / Path(name).name
                try:
                    with z.open(name) as src, open(local, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                except (zipfile.BadZipFile, OSError, EOFError) as exc:
                    raise InputFormatError(f"{path}!{name}: cannot be read ({exc})") from None
                for item in read_warc(local, max_bytes):
                    where = f"{path}!{name}"
                    item = dataclasses.replace(item, source=item.source.replace(str(local), where, 1),
                                               error=item.error.replace(str(local), where) if item.error else None)
                    if pages is not None and item.page is not None and item.page.url not in pages \
                            and _key(item.page.url) not in pages:
                        yield skipped(item.source, "not-a-page")
                        continue
                    yield item
                local.unlink()

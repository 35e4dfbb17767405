"""Batch inputs for ``neardup dedup``: directories of HTML files, JSONL files, WARC files.

Every reader yields :class:`InputItem`: a :class:`~neardup.detector.Page` or, for a record
that cannot be read, an error naming the file and record, so that one bad record never
stops a batch.

* directory: every ``*.html``, ``*.htm``, ``*.html.gz``, ``*.htm.gz`` below it, and every
  ``*.txt`` / ``*.txt.gz`` file as plain text (fingerprinted as it is, no HTML extraction).
  A ``urls.tsv`` in the directory (or a parent of the file, up to the given directory) maps
  ``file`` -> ``url`` and, with a ``fetched_at`` or ``captured`` column (POSIX seconds or ISO
  8601), gives each file its fetch time; listed files come in capture order (equal times in
  the list's order), then the others in sorted order with their ``file://`` URL and no time.
* JSONL (``*.jsonl``, ``*.jsonl.gz``, ``*.ndjson``): one object per line with ``url`` and
  ``html`` (or ``text``), optional ``headers`` (object), ``fetched_at`` (POSIX seconds) and
  ``priority``.
* WARC (``*.warc``, ``*.warc.gz``; WARC/1.0 and 1.1): their HTML captures, read by
  :func:`neardup.ingest.warc.read_warc`.

Hostile or damaged input is bounded and reported, never fatal: every decompression (``.gz``
files, ``Content-Encoding`` in WARC records) is streamed and stops at ``max_bytes`` of
*inflated* data (a 2 MB gzip bomb costs 16 MiB, not 2 GiB); JSONL lines over
``4 * max_bytes`` and JSON nested too deeply are errors; a WARC record with a damaged header
is an error, and after corrupt bytes (a broken gzip member, a garbled record) reading resumes
at the next record; unreadable folders are errors. Each error item carries a short
``reason`` (:data:`neardup.ingest.items.REASONS`) that ``neardup dedup`` counts.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from neardup.errors import ConfigError, InputFormatError, NeardupError
from neardup.fingerprint.extract import DEFAULT_MAX_BYTES
from neardup.ingest.items import InputItem, TooLargeError, failed
from neardup.ingest.wacz import read_wacz
from neardup.ingest.warc import read_warc
from neardup.model import Page, checked_time

HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz", ".txt", ".txt.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
WARC_SUFFIXES = (".warc", ".warc.gz")
WACZ_SUFFIXES = (".wacz",)

def read_file(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """A page file's bytes (``.gz`` decompressed, streamed), at most ``max_bytes`` of them:
    :class:`TooLargeError` above, :class:`InputFormatError` for corrupt gzip data,
    ``OSError`` when it cannot be read."""
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputFormatError(f"{path}: not a readable gzip file ({exc})") from None
        except OSError as exc:
            if exc.errno is not None:
                raise
            raise InputFormatError(f"{path}: not a readable gzip file ({exc})") from None
        if len(data) > max_bytes:
            raise TooLargeError(f"{path}: inflates to over {max_bytes:,} bytes (the page size limit)")
        return data
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise TooLargeError(f"{path}: file is {size:,} bytes, over the {max_bytes:,}-byte page size limit")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLargeError(f"{path}: file is over the {max_bytes:,}-byte page size limit")
    return data


_read_file = read_file  # the name used before


def _file_item(path: Path, url: str, max_bytes: int) -> InputItem:
    try:
        content = read_file(path, max_bytes)
    except TooLargeError as exc:
        return failed(str(path), str(exc), "too-large")
    except InputFormatError as exc:
        return failed(str(path), str(exc), "bad-gzip")
    except OSError as exc:
        return failed(str(path), f"{path}: cannot read ({exc.strerror or exc})", "unreadable")
    headers = {"content-type": "text/plain"} if path.name.lower().endswith((".txt", ".txt.gz")) else None
    return InputItem(str(path), Page(url=url, content=content, headers=headers))


#: the columns of ``urls.tsv`` that give a file's fetch time, the first present wins
TIME_COLUMNS = ("fetched_at", "captured")


class Listed(NamedTuple):
    """What ``urls.tsv`` says of one file: its URL, its fetch time (None: not given), its row
    (the list's order) and the problem with its time, if any."""

    url: str
    fetched_at: float | None
    row: int
    error: str | None = None


def capture_time(text: str) -> float:
    """A ``urls.tsv`` time: POSIX seconds, or an ISO 8601 date or date-time (UTC when it names no
    zone), in the library's range (:func:`neardup.model.checked_time`). :class:`ValueError` for
    anything else.

    >>> capture_time("2019-03-21"), capture_time("1553126400"), capture_time("2019-03-21T00:00:00+00:00")
    (1553126400.0, 1553126400.0, 1553126400.0)
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        value = parsed.timestamp()
    try:
        return checked_time(value)
    except ConfigError:
        raise ValueError(text) from None


def _url_map(root: Path, tsvs: list[Path]) -> dict[Path, Listed]:
    """Every file a ``urls.tsv`` lists (beside it, or in its ``pages/`` folder): its URL, and
    its fetch time from a ``fetched_at`` or ``captured`` column."""
    mapping: dict[Path, Listed] = {}
    row = 0
    for tsv in tsvs:
        try:
            lines = tsv.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputFormatError(f"{tsv}: cannot read ({exc})") from None
        header = lines[0].split("\t") if lines else []
        if "file" not in header or "url" not in header:
            continue
        fi, ui = header.index("file"), header.index("url")
        ti = next((header.index(c) for c in TIME_COLUMNS if c in header), None)
        for lineno, line in enumerate(lines[1:], 2):
            cols = line.split("\t")
            if len(cols) > max(fi, ui) and cols[fi] and cols[ui]:
                row += 1
                when: float | None = None
                error = None
                if ti is not None and ti < len(cols) and cols[ti].strip():
                    try:
                        when = capture_time(cols[ti])
                    except (ValueError, OverflowError, OSError):
                        error = (f"{tsv}:{lineno}: {header[ti]} {cols[ti][:100]!r} is not a time "
                                 "(POSIX seconds or ISO 8601)")
                rel = Path(cols[fi])
                for base in (tsv.parent, tsv.parent / "pages"):
                    try:
                        mapping[(base / rel).resolve()] = Listed(cols[ui], when, row, error)
                    except (OSError, ValueError, RuntimeError):
                        continue  # a path that cannot exist (NUL byte, loop)
    return mapping


def _walk(root: Path) -> tuple[list[Path], list[Path], list[InputItem]]:
    """Page files and ``urls.tsv`` files below ``root`` (sorted), and an error item for
    every folder that cannot be listed. Symbolic links to folders are followed once."""
    files: list[Path] = []
    tsvs: list[Path] = []
    errors: list[InputItem] = []
    seen: set[tuple[int, int]] = set()

    def onerror(exc: OSError) -> None:
        where = exc.filename or root
        errors.append(failed(str(where), f"{where}: cannot list folder ({exc.strerror or exc})", "unreadable"))

    for folder, dirs, names in os.walk(root, onerror=onerror, followlinks=True):
        try:
            st = os.stat(folder)
            key = (st.st_dev, st.st_ino)
        except OSError:
            key = None
        if key is not None:
            if key in seen:  # a link back up the tree
                dirs[:] = []
                continue
            seen.add(key)
        dirs.sort()
        base = Path(folder)
        for name in names:
            path = base / name
            if name == "urls.tsv":
                tsvs.append(path)
            if name.lower().endswith(HTML_SUFFIXES) and not os.path.isdir(path):
                files.append(path)
    return sorted(files), sorted(tsvs), errors


def read_directory(root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    """The pages of a folder. Files a ``urls.tsv`` lists get its URL and fetch time and come in
    capture order (ties in the list's order: an original before its mirror), then the other
    files by name, with their ``file://`` URL."""
    files, tsvs, errors = _walk(root)
    yield from errors
    urls = _url_map(root, tsvs)
    placed: list[tuple[tuple[float, int, str], Path, str, Listed | None]] = []
    for path in files:
        try:
            resolved = path.resolve()
            listed = urls.get(resolved)
            url = listed.url if listed is not None else resolved.as_uri()
        except (OSError, ValueError, RuntimeError) as exc:
            yield failed(str(path), f"{path}: cannot resolve the path ({exc})", "unreadable")
            continue
        when = listed.fetched_at if listed is not None and listed.fetched_at is not None else math.inf
        placed.append(((when, listed.row if listed is not None else 0, str(path)), path, url, listed))
    for _, path, url, listed in sorted(placed, key=lambda item: item[0]):
        if listed is not None and listed.error is not None:
            yield failed(str(path), listed.error, "bad-time")
            continue
        item = _file_item(path, url, max_bytes)
        if listed is not None and listed.fetched_at is not None and item.page is not None:
            item = dataclasses.replace(item, page=dataclasses.replace(item.page, fetched_at=listed.fetched_at))
        yield item


def _number(value: object) -> bool:
    """None or a finite JSON number (not a bool)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _read_line(fh, limit: int) -> tuple[str, bool]:  # type: ignore[no-untyped-def]
    """The next line (without reading more than ``limit`` characters of it into memory)
    and whether it was over ``limit`` (then the rest of it is skipped)."""
    line = fh.readline(limit + 1)
    if len(line) <= limit or line.endswith("\n"):
        return line, False
    while True:  # skip the rest of the long line
        rest = fh.readline(1 << 20)
        if not rest or rest.endswith("\n"):
            return "", True


def read_jsonl(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    opener = gzip.open if path.name.endswith(".gz") else open
    max_line = 4 * max_bytes + 4096  # JSON escapes (\\uXXXX) make a page longer
    try:
        fh = opener(path, "rt", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot open ({exc})") from None
    with fh:
        lineno = 0
        try:
            while True:
                line, too_long = _read_line(fh, max_line)
                if not line and not too_long:
                    break
                lineno += 1
                source = f"{path}:{lineno}"
                if too_long:
                    yield failed(source, f"{source}: line is over {max_line:,} characters", "bad-json")
                    continue
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield failed(source, f"{source}: invalid JSON ({exc.msg})", "bad-json")
                    continue
                except RecursionError:
                    yield failed(source, f"{source}: JSON nested too deeply", "bad-json")
                    continue
                except (ValueError, MemoryError) as exc:  # e.g. an integer of 10^5 digits
                    yield failed(source, f"{source}: invalid JSON ({str(exc)[:200]})", "bad-json")
                    continue
                if not isinstance(obj, dict):
                    yield failed(source, f"{source}: expected a JSON object", "bad-record")
                    continue
                content = obj.get("html", obj.get("text"))
                url = obj.get("url")
                if not isinstance(url, str) or not isinstance(content, str):
                    yield failed(source, f"{source}: needs string fields 'url' and 'html' (or 'text')", "bad-record")
                    continue
                headers = obj.get("headers")
                if headers is not None and not isinstance(headers, dict):
                    yield failed(source, f"{source}: 'headers' must be an object", "bad-record")
                    continue
                if headers is not None and not all(isinstance(v, str) for v in headers.values()):
                    yield failed(source, f"{source}: header values must be strings", "bad-record")
                    continue
                fetched_at, priority = obj.get("fetched_at"), obj.get("priority")
                if not _number(fetched_at) or not _number(priority):
                    yield failed(source, f"{source}: 'fetched_at' and 'priority' must be finite numbers", "bad-record")
                    continue
                if fetched_at is not None:
                    try:
                        fetched_at = checked_time(fetched_at)
                    except ConfigError as exc:
                        yield failed(source, f"{source}: {exc}", "bad-time")
                        continue
                if "html" not in obj:
                    headers = {**(headers or {}), "content-type": "text/plain"}
                yield InputItem(source, Page(url=url, content=content, headers=headers,
                                             fetched_at=fetched_at, priority=priority))
        except (OSError, EOFError, zlib.error) as exc:
            yield failed(f"{path}:{lineno + 1}", f"{path}: file is truncated or corrupt after line {lineno} ({exc})",
                          "bad-gzip" if path.name.endswith(".gz") else "unreadable")


def count_items(paths: "Iterable[str | Path]") -> int | None:
    """How many items ``read_input`` will yield for all of ``paths`` when that is known
    without reading them (folders and single page files: one per file), else None
    (JSONL and WARC files)."""
    total = 0
    for path in paths:
        p = Path(path)
        if p.is_dir():
            files, _, errors = _walk(p)
            total += len(files) + len(errors)
        elif p.name.lower().endswith(HTML_SUFFIXES):
            total += 1
        else:
            return None
    return total


def read_input(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[InputItem]:
    """Pages from a directory, JSONL file, WARC file or WACZ package (chosen by what ``path`` is); no
    page is larger than ``max_bytes`` after decompression."""
    p = Path(path)
    if not p.exists():
        raise InputFormatError(f"{path}: no such file or directory")
    if p.is_dir():
        return read_directory(p, max_bytes)
    name = p.name.lower()
    if name.endswith(WARC_SUFFIXES):
        return read_warc(p, max_bytes)
    if name.endswith(WACZ_SUFFIXES):
        return read_wacz(p, max_bytes)
    if name.endswith(JSONL_SUFFIXES):
        return read_jsonl(p, max_bytes)
    if name.endswith(HTML_SUFFIXES):
        return iter([_file_item(p, p.resolve().as_uri(), max_bytes)])
    raise InputFormatError(f"{path}: unknown input type (expected a directory, .jsonl, .warc, .warc.gz or .wacz)")


def read_all(inputs: tuple[str, ...], max_bytes: int) -> Iterator[InputItem]:
    """Items of every input in turn; an input that turns out unreadable part-way is one
    error item, and the next input is read."""
    for path in inputs:
        try:
            yield from read_input(path, max_bytes)
        except NeardupError as exc:
            yield InputItem(path, error=str(exc), reason="bad-input")
        except OSError as exc:
            yield InputItem(path, error=f"{path}: {exc.strerror or exc}", reason="unreadable")



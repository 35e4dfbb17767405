"""What the command families share: opening a store, the --db and -H options, reading a page."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from neardup.detector.core import Detector
from neardup.errors import ConfigError, NeardupError
from neardup.ingest.inputs import HTML_SUFFIXES, read_file
from neardup.ingest.items import TooLargeError
from neardup.store.backends import require_existing, store_paths


def read_content(file: str, max_bytes: int) -> bytes:
    """A page from a file (``.gz`` inflated, streamed) or stdin, at most ``max_bytes``."""
    if file == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise NeardupError(f"stdin: page is over the {max_bytes:,}-byte limit (max_bytes)")
        return data
    path = Path(file)
    if path.is_dir():
        raise NeardupError(f"{file}: is a directory (use 'neardup dedup' for folders)")
    try:
        return read_file(path, max_bytes)
    except TooLargeError as exc:
        raise NeardupError(str(exc)) from None


def parse_headers(values: tuple[str, ...]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for item in values:
        if ":" not in item:
            raise ConfigError(f"header {item!r} must look like 'Name: value'")
        name, value = item.split(":", 1)
        out[name.strip()] = value.strip()
    return out or None


#: seconds to wait for a locked SQLite store or a PostgreSQL connection
STORE_TIMEOUT = 10.0


def open_detector(db: str, *, create: bool = True, **kwargs: Any) -> Detector:
    """The one way commands open a store: an SQLite file (created when missing with
    ``create``, else :class:`StoreError` when it does not exist) or a server's URL
    (``postgresql://``, ``redis://``, ``redis+cluster://``: always connected to, an unreachable
    server is a store error, never an empty store)."""
    if not create:
        require_existing(db)
    return Detector.open(db, create=create, timeout=STORE_TIMEOUT, **kwargs)


DB_HELP = "Store: SQLite file, postgresql:// URL, redis://HOST:PORT/DB or redis+cluster://HOST:PORT"


db_option = click.option("--db", required=True, type=click.Path(dir_okay=False),
                          help=f"{DB_HELP} (a file is created if missing).")


existing_db_option = click.option("--db", required=True, type=click.Path(dir_okay=False),
                                   help=f"{DB_HELP} (must exist).")


header_option = click.option("-H", "--header", multiple=True,
                              help="HTTP header 'Name: value' (repeatable), e.g. Content-Type.")


def _real(path: str | Path) -> Path:
    """The path with every link resolved (a path that does not exist yet: its folder's)."""
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def refuse_overwrite(outputs: Mapping[str, str | None], *, stores: Mapping[str, str | None] | None = None,
                     inputs: Iterable[str] = ()) -> None:
    """:class:`ConfigError` (exit 2, before anything is opened) when an output path would
    overwrite the store (its file, ``-wal``, ``-shm``, journal or index folder, through a link
    too), one of the inputs (a file an input folder reads too: its pages and ``urls.tsv``), or
    another output. ``outputs`` and ``stores`` map an option name (``--out``) to its path (None
    and ``-`` are skipped).

    >>> refuse_overwrite({"--out": "s.db"}, stores={"--db": "s.db"})
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: --out s.db is the store --db s.db: refusing to overwrite it
    """
    taken: list[tuple[Path, str, bool]] = []  # (real path, what it is, a folder whose contents count)
    for option, target in (stores or {}).items():
        if target:
            for part in store_paths(target):
                taken.append((_real(part), f"the store {option} {target}", part.name.endswith(".index")))
    read_folders: list[tuple[Path, str]] = []
    for item in inputs:
        if item and item != "-":
            taken.append((_real(item), f"the input {item}", False))
            if os.path.isdir(item):
                read_folders.append((_real(item), item))
    for option, path in outputs.items():
        if not path or path == "-":
            continue
        real = _real(path)
        for other, what, folder in taken:
            if real == other or (folder and _within(real, other)):
                raise ConfigError(f"{option} {path} is {what}: refusing to overwrite it")
        name = real.name.lower()
        if name == "urls.tsv" or name.endswith(HTML_SUFFIXES):
            for folder_path, item in read_folders:
                if _within(real, folder_path):
                    raise ConfigError(f"{option} {path} is read from the input folder {item}: refusing to overwrite it")
        taken.append((real, f"the output of {option}", False))

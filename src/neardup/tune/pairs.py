"""Labelled pairs files (CSV/TSV/JSONL) for ``neardup tune``."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neardup.errors import InputError
from neardup.urls import host_of

SAME_LABELS = frozenset({"same", "same-content", "duplicate", "dup", "near-duplicate", "near", "1", "true", "yes",
                         "positive", "y"})


DIFFERENT_LABELS = frozenset({"different", "different-content", "shared-boilerplate-only", "distinct", "0",
                              "false", "no", "negative", "n"})


SKIP_LABELS = frozenset({"", "skip", "unclear", "partial-overlap", "unknown", "?"})


class PairsFormatError(InputError):
    """A pairs file that cannot be read: the message names the file and line."""


class PageRefError(InputError):
    """A page of a pair that cannot be found or read (missing file, URL not in the store)."""


@dataclass(frozen=True)
class PageRef:
    """One page of a pair: ``kind`` ``file`` | ``url`` (in the store) | ``html`` | ``text``;
    ``value`` the path, URL or content; ``url`` where it was fetched from (optional)."""

    kind: str
    value: str
    url: str | None = None

    def key(self) -> tuple[str, str, str | None]:
        return (self.kind, self.value, self.url)


@dataclass(frozen=True)
class LabelledPair:
    a: PageRef
    b: PageRef
    same: bool
    host: str | None = None
    pair_id: str = ""


@dataclass
class PairsFile:
    """The pairs read from one file, and how many rows were left out by label."""

    path: str
    pairs: list[LabelledPair]
    skipped: dict[str, int] = field(default_factory=dict)


def parse_label(label: str) -> bool | None:
    """True for *same*, False for *different*, None for a pair to leave out; else ValueError."""
    value = label.strip().lower()
    if value in SAME_LABELS:
        return True
    if value in DIFFERENT_LABELS:
        return False
    if value in SKIP_LABELS:
        return None
    raise ValueError(f"unknown label {label!r} (use same or different, or skip)")


def _ref(value: Any, url: str | None, base: Path, where: str) -> PageRef:
    if isinstance(value, dict):
        url = value.get("url") if isinstance(value.get("url"), str) else url
        for kind in ("html", "text", "file"):
            if isinstance(value.get(kind), str):
                v = value[kind]
                return PageRef(kind, str(base / v) if kind == "file" else v, url)
        if isinstance(value.get("url"), str):
            return PageRef("url", value["url"], value["url"])
        raise PairsFormatError(f"{where}: a page object needs one of file, url, html, text")
    if not isinstance(value, str) or not value.strip():
        raise PairsFormatError(f"{where}: empty or missing page")
    if value.startswith("html:"):
        return PageRef("html", value[5:], url)
    if value.startswith("text:"):
        return PageRef("text", value[5:], url)
    if value.startswith(("http://", "https://")):
        return PageRef("url", value, url or value)
    return PageRef("file", str(base / value.removeprefix("file:")), url)


def _row_pair(row: dict[str, Any], base: Path, where: str, skipped: dict[str, int]) -> LabelledPair | None:
    for column in ("a", "b", "label"):
        if column not in row or row[column] is None:
            raise PairsFormatError(f"{where}: missing {column!r}")
    label = row["label"]
    try:
        same = parse_label(str(label))
    except ValueError as exc:
        raise PairsFormatError(f"{where}: {exc}") from None
    if same is None:
        skipped[str(label).strip().lower() or "(empty)"] = skipped.get(str(label).strip().lower() or "(empty)", 0) + 1
        return None
    url_a = row.get("url_a") or None
    url_b = row.get("url_b") or None
    a = _ref(row["a"], url_a, base, where)
    b = _ref(row["b"], url_b, base, where)
    host = (row.get("host") or "").strip().lower() or None
    if host is None:
        ha, hb = (host_of(r.url) if r.url else "" for r in (a, b))
        host = ha if ha and ha == hb else None
    return LabelledPair(a, b, same, host, str(row.get("id") or row.get("pair_id") or where))


def load_pairs(path: str | Path) -> PairsFile:
    """Read a pairs file (module docs). :class:`PairsFormatError` for a bad file."""
    p = Path(path)
    name = p.name.lower()
    base = p.parent
    pairs: list[LabelledPair] = []
    skipped: dict[str, int] = {}
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PairsFormatError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise PairsFormatError(f"{p}: is a folder, not a pairs file") from None
    except UnicodeDecodeError:
        raise PairsFormatError(f"{p}: not UTF-8 text") from None
    except OSError as exc:
        raise PairsFormatError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if name.endswith((".jsonl", ".ndjson", ".json")):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PairsFormatError(f"{p}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise PairsFormatError(f"{p}:{n}: expected a JSON object")
            pair = _row_pair(row, base, f"{p}:{n}", skipped)
            if pair is not None:
                pairs.append(pair)
    elif name.endswith((".tsv", ".csv", ".tab")):
        delimiter = "," if name.endswith(".csv") else "\t"
        reader = csv.reader(text.splitlines(), delimiter=delimiter)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise PairsFormatError(f"{p}: empty file (expected a header line with a, b, label)") from None
        except csv.Error as exc:
            raise PairsFormatError(f"{p}:1: {exc}") from None
        missing = [c for c in ("a", "b", "label") if c not in header]
        if missing:
            raise PairsFormatError(f"{p}:1: header lacks column(s) {', '.join(missing)} (has {', '.join(header)})")
        try:
            for n, values in enumerate(reader, 2):
                if not any(v.strip() for v in values):
                    continue
                if len(values) != len(header):
                    raise PairsFormatError(f"{p}:{n}: {len(values)} fields, header has {len(header)}")
                pair = _row_pair(dict(zip(header, values, strict=True)), base, f"{p}:{n}", skipped)
                if pair is not None:
                    pairs.append(pair)
        except csv.Error as exc:
            raise PairsFormatError(f"{p}: {exc}") from None
    else:
        raise PairsFormatError(f"{p}: unknown pairs format (use .tsv, .csv or .jsonl)")
    if not pairs:
        raise PairsFormatError(f"{p}: no labelled pairs (need rows labelled same or different)")
    return PairsFile(str(p), pairs, skipped)



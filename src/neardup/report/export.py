"""Final answers of a store: every stored URL with its first decision, its cluster's
canonical as it stands now, its last change and its next planned fetch.

``neardup dedup --out`` writes each page's verdict as decided at that moment (the canonical
of its cluster then); :func:`export` writes the store's state at the end, one row per URL
(:data:`~neardup.store.base.EXPORT_COLUMNS`), as CSV, JSONL or Parquet (Parquet needs
``pyarrow``: ``pip install 'neardup[parquet]'``).

>>> import io
>>> from neardup import Detector
>>> det = Detector()
>>> text = " ".join(f"word{i}" for i in range(400))
>>> _ = det.add("https://a.example/1", text, fetched_at=1000.0)
>>> _ = det.add("https://b.example/1", text, fetched_at=2000.0)
>>> [(r["url"], r["status"], r["canonical_url"]) for r in rows(det.store)]
[('https://a.example/1', 'new', 'https://a.example/1'), ('https://b.example/1', 'exact', 'https://a.example/1')]
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from neardup.errors import ConfigError
from neardup.store.base import EXPORT_COLUMNS, Store

FORMATS = ("csv", "jsonl", "parquet", "cdxj")


def rows(store: Store, batch: int = 5000) -> Iterator[dict[str, Any]]:
    """Every stored URL as an export row, in id order (:meth:`Store.export_batches`)."""
    for chunk in _batches(store, batch):
        yield from chunk


def _batches(store: Store, batch: int) -> Iterator[list[dict[str, Any]]]:
    """:meth:`Store.export_batches` with every non-finite number as None: a store written
    before the checks at the door may hold an infinite change rate (JSON has no infinity,
    and a rate is finite: :func:`neardup.crawl.schedule.change_rate`)."""
    for chunk in store.export_batches(batch):
        yield [{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
               for row in chunk]


def format_of(path: str, fmt: str | None = None) -> str:
    """The export format: ``fmt`` when given, else from the file's suffix (``.csv``,
    ``.jsonl``/``.json``, ``.parquet``); :class:`ConfigError` when neither says."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    found = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".cdxj": "cdxj"}.get(suffix)
    if found is None:
        raise ConfigError(f"cannot tell the export format of {path!r}: name a .csv, .jsonl, .parquet or .cdxj "
                          "file or give the format")
    return found


def export(store: Store, path: str, fmt: str | None = None, batch: int = 5000, spec: str | None = None) -> int:
    """Write every stored URL to ``path`` (``-``: stdout, CSV, JSONL or CDXJ); returns the rows.
    Parquet is written in row groups of ``batch`` rows; CDXJ (:func:`cdxj_lines`, ``spec``: the
    store's fingerprint spec) sorted, as an archive's index is."""
    fmt = format_of(path, fmt) if path != "-" or fmt else "jsonl"
    if fmt == "parquet":
        return _parquet(store, path, batch)
    import sys

    stream = sys.stdout if path == "-" else open(path, "w", encoding="utf-8", newline="")
    if fmt == "cdxj":
        try:
            lines = cdxj_lines(store, spec, batch)
            stream.writelines(line + "\n" for line in lines)
        finally:
            if stream is not sys.stdout:
                stream.close()
        return len(lines)
    n = 0
    try:
        writer = csv.DictWriter(stream, fieldnames=EXPORT_COLUMNS) if fmt == "csv" else None
        if writer is not None:
            writer.writeheader()
        for row in rows(store, batch):
            if writer is not None:
                writer.writerow(row)
            else:
                stream.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
            n += 1
    finally:
        if stream is not sys.stdout:
            stream.close()
    return n


def cdxj_lines(store: Store, spec: str | None = None, batch: int = 5000) -> list[str]:
    """Every stored URL's last capture as a CDXJ line (:mod:`neardup.report.cdxj`: its URL as
    fetched, SURT key, timestamp of its last fetch, the ``nd_`` fields), sorted by bytes (in
    memory: a line is about 300 bytes a URL)."""
    from neardup.report.cdxj import cdxj_line

    out = []
    for row in rows(store, batch):
        fields = {"nd_status": row["status"], "nd_match": row["match_url"], "nd_distance": row["distance"],
                  "nd_cluster": row["cluster_id"], "nd_canonical": row["canonical_url"], "nd_simhash": row["simhash"],
                  "nd_spec": spec}
        out.append(cdxj_line(row["fetched_url"] or row["url"], row["fetched_at"], fields))
    out.sort(key=lambda line: line.encode("utf-8"))
    return out


def _parquet(store: Store, path: str, batch: int) -> int:
    if path == "-":
        raise ConfigError("Parquet cannot be written to stdout: name a .parquet file")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("writing Parquet needs pyarrow: pip install 'neardup[parquet]'") from None
    schema = pa.schema([
        ("url", pa.string()), ("fetched_url", pa.string()), ("host", pa.string()), ("status", pa.string()),
        ("match_url", pa.string()), ("distance", pa.int32()), ("cluster_id", pa.int64()),
        ("canonical_url", pa.string()), ("is_canonical", pa.bool_()), ("first_seen", pa.float64()),
        ("fetched_at", pa.float64()), ("fetches", pa.int64()), ("change_count", pa.int64()),
        ("last_changed_at", pa.float64()), ("change_rate", pa.float64()), ("next_fetch", pa.float64()),
        ("title", pa.string()), ("digest", pa.string()), ("simhash", pa.string()), ("page_id", pa.int64()),
    ])
    n = 0
    with pq.ParquetWriter(path, schema) as writer:
        for chunk in _batches(store, batch):
            writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            n += len(chunk)
    return n

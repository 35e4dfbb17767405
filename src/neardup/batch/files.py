"""Files of the array-based batch job: fingerprint Parquet in as columns, verdicts out as
JSONL, CSV or Parquet, built column-wise by Arrow (no Python object a page).

The JSONL and CSV bytes are those ``dedup --batch`` wrote row by row (``json.dumps`` with
``ensure_ascii=False``; ``csv.DictWriter``'s minimal quoting and ``\\r\\n``): a string that
needs escaping is escaped by those same functions, the rest joined as is.

>>> import io
>>> from neardup.batch import BatchRecord
>>> from neardup.batch.arrays import FingerprintArrays, solve
>>> ans = solve(FingerprintArrays.from_records([BatchRecord('https://a.example/"x"', "d", 255)]), k=3, verify=0.3)
>>> buf = io.BytesIO()
>>> write_verdicts(ans, buf, "jsonl")
1
>>> print(buf.getvalue().decode()[:48])
{"url": "https://a.example/\\"x\\"", "digest": "d"
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from typing import IO, Any

import numpy as np

from neardup.batch.arrays import CHUNK_ROWS, STATUSES, ArrayAnswer, FingerprintArrays
from neardup.batch.graph import BatchRecord
from neardup.errors import ConfigError, NeardupError

#: the verdict columns, in order (``dedup --batch``, ``neardup.batch.spark.job``)
FIELDS = ("url", "digest", "simhash", "status", "cluster", "canonical", "match", "distance", "version")
FORMATS = ("jsonl", "csv", "parquet")
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def read_fingerprint_tables(paths: Sequence[str]) -> list[Any]:
    """The fingerprint Parquet files (or folders of parts) ``paths`` as Arrow tables of the
    columns of :data:`neardup.batch.files.PARQUET_COLUMNS` but ``signature`` (missing optional
    ones as nulls)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pass

    wanted = [c for c, _ in PARQUET_COLUMNS if c != "signature"]
    tables = []
    for path in paths:
        names = parquet_columns(path)
        require_fingerprint_columns(path, names)
        table = pq.read_table(str(path), columns=[c for c in wanted if c in names])
        for c, typ in PARQUET_COLUMNS:
            if c in wanted and c not in names:
                table = table.append_column(c, pa.nulls(table.num_rows, _arrow_type(typ)))
        tables.append(table.select(wanted))
    return tables


def arrays_of(tables: Sequence[Any]) -> FingerprintArrays:
    """One :class:`~neardup.batch.arrays.FingerprintArrays` of tables, rows in order."""
    import pyarrow as pa

    if not tables:
        return FingerprintArrays.from_records([])
    large = [t.cast(pa.schema([(f.name, pa.large_string() if pa.types.is_string(f.type) else
                                 pa.large_binary() if pa.types.is_binary(f.type) else f.type) for f in t.schema]))
             for t in tables]
    return FingerprintArrays.from_table(pa.concat_tables(large, promote_options="permissive"))


def read_fingerprint_arrays(paths: Sequence[str]) -> FingerprintArrays:
    """The fingerprint Parquet files (or folders of parts) ``paths``, concatenated in order,
    as columns, read one column at a time (the peak is the arrays and one column's file
    data, not a whole table twice)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pass

    if not paths:
        return FingerprintArrays.from_records([])
    names = [parquet_columns(p) for p in paths]
    for path, have in zip(paths, names):
        require_fingerprint_columns(path, have)
    types = {"string": pa.large_string(), "binary": pa.large_binary()}

    kinds = dict(PARQUET_COLUMNS)
    counts = [pq.ParquetDataset(p).read(columns=["simhash"]).num_rows if os.path.isdir(p) else
              pq.ParquetFile(p).metadata.num_rows for p in paths]

    def column(name: str) -> Any:
        if not any(name in have for have in names):
            return None
        typ = types.get(kinds[name]) or _arrow_type(kinds[name])
        chunks = []
        for path, have, rows in zip(paths, names, counts):
            got = pq.read_table(str(path), columns=[name]).column(name) if name in have else pa.chunked_array(
                [pa.nulls(rows, typ)])
            chunks += got.cast(typ).chunks
        return pa.chunked_array(chunks, typ)

    return FingerprintArrays.from_columns(column, sum(counts))


def _arrow_type(name: str) -> Any:
    import pyarrow as pa

    return {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(), "binary": pa.binary(),
            "int32": pa.int32(), "float64": pa.float64()}[name]


def _hex16(values: np.ndarray) -> Any:
    """16 lower-case hex digits of each uint64, as an Arrow string array."""
    import pyarrow as pa

    raw = values.astype(">u8").view(np.uint8).reshape(-1, 8)
    digits = np.stack([_HEX[raw >> 4], _HEX[raw & 15]], axis=2).reshape(-1)
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), values.shape[0], [None, pa.py_buffer(digits.tobytes())])
    return fixed.cast(pa.binary()).cast(pa.large_string())


def _columns(answer: ArrayAnswer, lo: int, hi: int) -> dict[str, Any]:
    """The verdict columns of rows ``lo:hi`` as Arrow arrays (nulls for no match / distance)."""
    import pyarrow as pa

    fa = answer.arrays
    status = answer.status[lo:hi]
    canon = pa.array(answer.canonical[lo:hi])
    linked = (status == 1) | (status == 2)
    dist = answer.distance[lo:hi]
    return {"url": fa.url.slice(lo, hi - lo), "digest": fa.digest.slice(lo, hi - lo),
            "simhash": _hex16(fa.simhash[lo:hi]),
            "status": pa.array(list(STATUSES), pa.large_string()).take(pa.array(status.astype(np.int64))),
            "cluster": pa.array(answer.cluster[lo:hi]), "canonical": fa.url.take(canon),
            "match": _masked(fa.url.take(canon), ~linked),
            "distance": pa.array(dist, mask=dist < 0), "version": _versions(answer, lo, hi)}


def _versions(answer: ArrayAnswer, lo: int, hi: int) -> Any:
    """The ``version`` column of rows ``lo:hi`` (nulls for a URL's first capture)."""
    import pyarrow as pa

    from neardup.batch.graph import VERSIONS

    if answer.version is None:
        return pa.nulls(hi - lo, pa.large_string())
    codes = answer.version[lo:hi].astype(np.int64)
    return pa.array(list(VERSIONS), pa.large_string()).take(pa.array(np.maximum(codes, 0), mask=codes < 0))


def _masked(arr: Any, mask: np.ndarray) -> Any:
    """``arr`` with nulls where ``mask``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)


def _escaped(arr: Any, pattern: str, escape: Any) -> tuple[Any, Any]:
    """Each string as written: ``escape(s)`` where ``pattern`` matches (a few), else itself;
    and where it matched (None: nowhere)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    need = pc.fill_null(pc.match_substring_regex(arr, pattern), False)
    if not pc.any(need).as_py():
        return arr, None
    idx = np.flatnonzero(np.asarray(need.to_numpy(zero_copy_only=False), dtype=bool))
    fixed = [escape(arr[int(i)].as_py()) for i in idx.tolist()]
    return pc.replace_with_mask(arr, need, pa.array(fixed, arr.type)), need


def _json_lines(cols: dict[str, Any]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    def lit(text: str) -> Any:
        return pa.scalar(text, pa.large_string())

    def jstr(arr: Any) -> Any:  # a JSON string literal, or null
        plain = pc.binary_join_element_wise(lit('"'), arr, lit('"'), lit(""))
        out, need = _escaped(arr, r'["\\\x00-\x1f]', lambda s: json.dumps(s, ensure_ascii=False))
        return pc.fill_null(plain if need is None else pc.if_else(need, out, plain), lit("null"))

    def jnum(arr: Any) -> Any:
        return pc.fill_null(arr.cast(pa.large_string()), lit("null"))

    parts = [lit('{"url": '), jstr(cols["url"]), lit(', "digest": '), jstr(cols["digest"]),
             lit(', "simhash": "'), cols["simhash"], lit('", "status": "'), cols["status"],
             lit('", "cluster": '), jnum(cols["cluster"]), lit(', "canonical": '), jstr(cols["canonical"]),
             lit(', "match": '), jstr(cols["match"]), lit(', "distance": '), jnum(cols["distance"]),
             lit(', "version": '), jstr(cols["version"]), lit("}\n")]
    return pc.binary_join_element_wise(*parts, lit(""))


def _csv_field(value: str) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow([value])
    return buf.getvalue()[:-2]


def _csv_lines(cols: dict[str, Any]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    def lit(text: str) -> Any:
        return pa.scalar(text, pa.large_string())

    def cstr(arr: Any) -> Any:
        return pc.fill_null(_escaped(arr.cast(pa.large_string()), r'[,"\r\n]', _csv_field)[0], lit(""))

    parts = []
    for i, f in enumerate(FIELDS):
        parts += [lit(",") if i else lit(""), cstr(cols[f])]
    return pc.binary_join_element_wise(*parts, lit("\r\n"), lit(""))


def _write_lines(lines: Any, stream: IO[bytes]) -> None:
    import pyarrow as pa

    lines = lines.cast(pa.large_binary())
    bufs = lines.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
    if len(lines):
        stream.write(memoryview(bufs[2])[int(offsets[0]):int(offsets[-1])])


def write_verdicts(answer: ArrayAnswer, stream: IO[bytes] | str, fmt: str) -> int:
    """Write every row's verdict (:data:`FIELDS`) to ``stream`` (binary) or a path: ``jsonl``
    and ``csv`` as ``dedup --batch`` writes them, ``parquet`` with the Spark job's output
    types (simhash as 16 hex digits). Returns the rows written."""
    if fmt not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    n = answer.arrays.n
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([(f, pa.int64() if f in ("cluster", "distance") else pa.string()) for f in FIELDS])
        with pq.ParquetWriter(stream, schema) as writer:
            for lo in range(0, max(n, 1), CHUNK_ROWS):
                cols = _columns(answer, lo, min(n, lo + CHUNK_ROWS))
                writer.write_table(pa.table(cols).cast(schema))
        return n
    if isinstance(stream, str):
        with open(stream, "wb") as fh:
            return write_verdicts(answer, fh, fmt)
    if fmt == "csv":
        stream.write(",".join(FIELDS).encode() + b"\r\n")
    for lo in range(0, n, CHUNK_ROWS):
        cols = _columns(answer, lo, min(n, lo + CHUNK_ROWS))
        _write_lines(_json_lines(cols) if fmt == "jsonl" else _csv_lines(cols), stream)
    return n


#: the columns of a fingerprint file, in order (Arrow types); ``simhash`` is the unsigned
#: value as a signed 64-bit integer (two's complement), as Spark stores longs
PARQUET_COLUMNS = (("url", "string"), ("digest", "string"), ("simhash", "int64"), ("empty", "bool"),
                   ("sketch", "binary"), ("title", "string"), ("length", "int32"), ("canonical_link", "string"),
                   ("first_seen", "float64"), ("priority", "float64"), ("signature", "binary"))


def _arrow_schema():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(), "binary": pa.binary(),
             "int32": pa.int32(), "float64": pa.float64()}
    return pa.schema([(name, types[t]) for name, t in PARQUET_COLUMNS])


def write_fingerprints(records: Iterable[BatchRecord], path: str, *, row_group: int = 1 << 17) -> int:
    """Write records as a Parquet file of :data:`PARQUET_COLUMNS` (what ``--fingerprints-out``
    writes, what :func:`read_fingerprints`, ``dedup --batch`` and ``neardup.batch.spark.job`` read).
    Returns the rows written. Needs PyArrow (the ``spark`` extra)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    n = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        chunk: list[BatchRecord] = []

        def flush() -> None:
            cols = {
                "url": [r.url for r in chunk], "digest": [r.digest for r in chunk],
                "simhash": [r.simhash - (1 << 64) if r.simhash >= 1 << 63 else r.simhash for r in chunk],
                "empty": [r.empty for r in chunk], "sketch": [r.sketch for r in chunk],
                "title": [r.title for r in chunk], "length": [r.length for r in chunk],
                "canonical_link": [r.canonical_link for r in chunk], "first_seen": [r.first_seen for r in chunk],
                "priority": [r.priority for r in chunk], "signature": [r.signature for r in chunk]}
            writer.write_table(pa.table(cols, schema=schema))

        for r in records:
            chunk.append(r)
            if len(chunk) >= row_group:
                flush()
                n += len(chunk)
                chunk = []
        if chunk or not n:
            flush()
            n += len(chunk)
    return n


def read_fingerprints(path: str) -> list[BatchRecord]:
    """Records of a fingerprint Parquet file or folder (:func:`write_fingerprints`, or the
    Spark job's ``--fingerprints-out``): ``url``, ``digest`` and ``simhash`` are required, the
    other columns of :data:`PARQUET_COLUMNS` optional (extra columns are ignored)."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    names = set(table.column_names)
    require_fingerprint_columns(path, names)
    n = table.num_rows
    cols: dict[str, list[Any]] = {c: (table.column(c).to_pylist() if c in names else [None] * n)
                                  for c, _ in PARQUET_COLUMNS}
    out = []
    for i in range(n):
        sim = int(cols["simhash"][i])
        out.append(BatchRecord(
            url=cols["url"][i], digest=cols["digest"][i], simhash=sim + (1 << 64) if sim < 0 else sim,
            empty=bool(cols["empty"][i]), sketch=cols["sketch"][i], title=cols["title"][i],
            length=int(cols["length"][i] or 0), canonical_link=cols["canonical_link"][i],
            first_seen=float(cols["first_seen"][i] or 0.0), priority=cols["priority"][i],
            signature=cols["signature"][i]))
    return out


#: the columns that make a Parquet file one of precomputed fingerprints (not pages of url/html)
REQUIRED_COLUMNS = ("url", "digest", "simhash")


def require_fingerprint_columns(path: str, names: set[str], error: type[NeardupError] = ConfigError) -> None:
    """Raise ``error`` naming ``path`` when its columns ``names`` lack one of
    :data:`REQUIRED_COLUMNS`."""
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise error(f"{path}: not a fingerprint file (missing {', '.join(missing)})")


def parquet_columns(path: str) -> set[str]:
    """The column names of a Parquet file or of a folder of parts (Arrow's errors for a file
    that is not Parquet pass through)."""
    import os

    import pyarrow.parquet as pq

    return set(pq.ParquetDataset(path).schema.names) if os.path.isdir(path) else set(pq.read_schema(path).names)


def is_fingerprint_file(path: str) -> bool:
    """Whether ``path`` is Parquet (a file or a folder of parts) with the fingerprint columns
    ``url``, ``digest`` and ``simhash`` (rather than pages of ``url``/``html``)."""
    import os

    p = str(path)
    if not (p.lower().rstrip("/").endswith(".parquet") or os.path.isdir(p)):
        return False
    try:
        names = parquet_columns(p)
    except Exception:  # not Parquet at all
        return False
    return set(REQUIRED_COLUMNS) <= names



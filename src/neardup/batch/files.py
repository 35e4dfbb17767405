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
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, TypeVar

import numpy as np

from neardup.batch.arrays import CHUNK_ROWS, SKETCH_BYTES, STATUSES, ArrayAnswer, FingerprintArrays, simhash_int64
from neardup.batch.graph import BatchRecord
from neardup.errors import ConfigError, InputError, NeardupError

#: the verdict columns, in order (``dedup --batch``, ``neardup.batch.spark.job``)
FIELDS = ("url", "digest", "simhash", "status", "cluster", "canonical", "match", "distance", "version")
FORMATS = ("jsonl", "csv", "parquet")
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
T = TypeVar("T")


def read_fingerprint_tables(paths: Sequence[str], error: type[NeardupError] = ConfigError) -> list[Any]:
    """The fingerprint Parquet files (or folders of parts) ``paths`` as Arrow tables (one a
    file) of the columns of :data:`neardup.batch.files.PARQUET_COLUMNS` but ``signature``
    (missing optional ones as nulls), each checked by :func:`check_fingerprint_file`
    (``error`` naming the file and column)."""
    import pyarrow as pa

    wanted = [c for c, _ in PARQUET_COLUMNS if c != "signature"]
    tables = []
    for path in paths:
        for part in check_fingerprint_file(path, error, rows=False):
            table = _fingerprint_table(part, wanted, error)
            for c in wanted:
                if c not in table.column_names:
                    table = table.append_column(c, pa.nulls(table.num_rows, _reader_type(c)))
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


def read_fingerprint_arrays(paths: Sequence[str], error: type[NeardupError] = ConfigError) -> FingerprintArrays:
    """The fingerprint Parquet files (or folders of parts) ``paths``, concatenated in order,
    as columns, read one column at a time (the peak is the arrays and one column's file
    data, not a whole table twice); each file checked by :func:`check_fingerprint_file`
    (``error`` naming the file and column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not paths:
        return FingerprintArrays.from_records([])
    parts = [part for path in paths for part in check_fingerprint_file(path, error, rows=False)]
    names, counts = [], []
    for part in parts:
        meta = arrow_read(part, error, pq.read_metadata, part)
        names.append(set(meta.schema.to_arrow_schema().names))
        counts.append(meta.num_rows)

    def column(name: str) -> Any:
        if not any(name in have for have in names):
            return None
        typ = _reader_type(name)
        chunks = []
        for part, have, rows in zip(parts, names, counts):
            if name in have:
                got = arrow_read(part, error, pq.read_table, part, columns=[name],
                                 page_checksum_verification=True).column(name)
                if len(got) != rows:  # a damaged page header or footer
                    raise error(f"{part}: cannot read (column {name} has {len(got)} rows, the file {rows})")
                refuse_rows(part, row_faults({name: got}), rows, error)
                chunks += _as_read(name, got).chunks
            else:
                chunks.append(pa.nulls(rows, typ))
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


def verdict_dicts(answer: ArrayAnswer) -> list[dict[str, Any]]:
    """Every row's verdict as the JSON lines hold it (:data:`FIELDS`, the SimHash in hex), in
    row order."""
    rows: list[dict[str, Any]] = []
    n = answer.arrays.n
    for lo in range(0, n, CHUNK_ROWS):
        cols = _columns(answer, lo, min(n, lo + CHUNK_ROWS))
        lists = [cols[f].to_pylist() for f in FIELDS]
        rows += [dict(zip(FIELDS, values)) for values in zip(*lists)]
    return rows


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
    with pq.ParquetWriter(str(path), schema, write_page_checksum=True) as writer:  # a bit flip is found
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


def read_fingerprints(path: str, error: type[NeardupError] = ConfigError) -> list[BatchRecord]:
    """Records of a fingerprint Parquet file or folder (:func:`write_fingerprints`, or the
    Spark job's ``--fingerprints-out``), checked by :func:`check_fingerprint_file` (``error``
    naming the file and column): ``url``, ``digest`` and ``simhash`` are required, the other
    columns of :data:`PARQUET_COLUMNS` optional (extra columns are ignored)."""
    cols: dict[str, list[Any]] = {c: [] for c, _ in PARQUET_COLUMNS}
    for part in check_fingerprint_file(path, error, rows=False):
        table = _fingerprint_table(part, list(cols), error)
        n = table.num_rows
        for c in cols:
            cols[c] += table.column(c).to_pylist() if c in table.column_names else [None] * n
    out = []
    for i in range(len(cols["url"])):
        sim = int(cols["simhash"][i])
        out.append(BatchRecord(
            url=cols["url"][i], digest=cols["digest"][i], simhash=sim + (1 << 64) if sim < 0 else sim,
            empty=bool(cols["empty"][i]), sketch=cols["sketch"][i], title=cols["title"][i],
            length=int(cols["length"][i] or 0), canonical_link=cols["canonical_link"][i],
            first_seen=float(cols["first_seen"][i] or 0.0), priority=cols["priority"][i],
            signature=cols["signature"][i]))
    return out


# -- the one check of a fingerprint file (dedup --batch, check-batch, the Spark job) ------------------

#: the columns that make a Parquet file one of precomputed fingerprints (not pages of url/html),
#: none of whose rows may be null
REQUIRED_COLUMNS = ("url", "digest", "simhash")
#: the kinds of Arrow type each fingerprint column may have (:data:`PARQUET_COLUMNS` as written,
#: and what another writer may use for the same values; checked on a file's schema before any row
#: is read): ``simhash`` a 64-bit integer (signed, as written, or the unsigned value); a column of
#: Arrow's ``null`` type (no value at all) is any kind, but a required one then has nulls
COLUMN_TYPES = {"url": "string", "digest": "string", "simhash": "int64 or uint64", "empty": "boolean",
                "sketch": "binary", "title": "string", "length": "integer", "canonical_link": "string",
                "first_seen": "number", "priority": "number", "signature": "binary"}


def _is_kind(t: Any, kind: str) -> bool:
    """Whether Arrow type ``t`` is of ``kind`` (:data:`COLUMN_TYPES`); ``null`` is any kind."""
    import pyarrow as pa

    checks = {"string": lambda: pa.types.is_string(t) or pa.types.is_large_string(t),
              "int64 or uint64": lambda: t in (pa.int64(), pa.uint64()),
              "integer": lambda: pa.types.is_integer(t),
              "boolean": lambda: pa.types.is_boolean(t),
              "number": lambda: pa.types.is_integer(t) or pa.types.is_floating(t),
              "binary": lambda: (pa.types.is_binary(t) or pa.types.is_large_binary(t)
                                 or pa.types.is_fixed_size_binary(t))}
    return bool(pa.types.is_null(t) or checks[kind]())


def require_fingerprint_columns(path: str, names: set[str], error: type[NeardupError] = ConfigError) -> None:
    """Raise ``error`` naming ``path`` when its columns ``names`` lack one of
    :data:`REQUIRED_COLUMNS`."""
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise error(f"{path}: not a fingerprint file (missing {', '.join(missing)})")


def check_fingerprint_schema(path: str, schema: Any, error: type[NeardupError] = InputError) -> None:
    """Raise ``error`` naming ``path`` and the columns when the Arrow ``schema`` lacks one of
    :data:`REQUIRED_COLUMNS` or has a column of :data:`COLUMN_TYPES` of another type."""
    require_fingerprint_columns(path, set(schema.names), error)
    bad = [f"column {f.name} is {f.type}, expected {COLUMN_TYPES[f.name]}" for f in schema
           if f.name in COLUMN_TYPES and not _is_kind(f.type, COLUMN_TYPES[f.name])]
    if bad:
        raise error(f"{path}: {'; '.join(bad)}")


#: a column's rows a fingerprint file may not hold: how many, the first (None: not known) and,
#: for the sketch, the first one's size in bytes
Fault = tuple[int, int | None, int | None]


def row_faults(columns: Any, offset: int = 0) -> dict[str, Fault]:
    """The rows of ``columns`` (name -> Arrow array or chunked array) that no fingerprint file
    may hold, by column: nulls in a :data:`REQUIRED_COLUMNS` column, a sketch of another size
    than the spec's (:data:`~neardup.batch.arrays.SKETCH_BYTES`); rows counted from ``offset``.
    Arrow compute over whole columns (no Python object a row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, Fault] = {}
    for name in REQUIRED_COLUMNS:
        col = columns.get(name)
        if col is not None and col.null_count:
            out[name] = (col.null_count, offset + pc.index(pc.is_null(col), True).as_py(), None)
    sketch = columns.get("sketch")
    if sketch is not None and sketch.null_count < len(sketch) and not pa.types.is_null(sketch.type):
        size = pc.binary_length(sketch)
        bad = pc.fill_null(pc.not_equal(size, SKETCH_BYTES), False)
        count = pc.sum(bad).as_py() or 0
        if count:
            first = pc.index(bad, True).as_py()
            out["sketch"] = (count, offset + first, size[first].as_py())
    return out


def _add_faults(into: dict[str, Fault], more: dict[str, Fault]) -> None:
    for name, (count, first, size) in more.items():
        held = into.get(name)
        into[name] = (count, first, size) if held is None else (held[0] + count, held[1], held[2])


def refuse_rows(path: str, faults: dict[str, Fault], rows: int, error: type[NeardupError],
                first_row: int | None = None) -> None:
    """Raise ``error`` naming ``path``, each faulty column and its rows (:func:`row_faults`) among
    the file's ``rows`` (with ``first_row``: among rows ``first_row`` to ``first_row + rows - 1``
    of it, a slice read)."""
    scope = f"its {rows} rows" if first_row is None else f"rows {first_row} to {first_row + rows - 1}"
    said = []
    for name, (count, first, size) in faults.items():
        where = "" if first is None else f"the first: row {first}"
        if name == "sketch":
            where = ", ".join(w for w in (where, "" if size is None else f"{size} bytes") if w)
            said.append(f"column sketch is of another size than the spec's {SKETCH_BYTES} bytes in {count} of {scope}"
                        + (f" ({where})" if where else ""))
        else:
            said.append(f"column {name} is null in {count} of {scope}" + (f" ({where})" if where else "")
                        + f"; {', '.join(REQUIRED_COLUMNS)} are required")
    if said:
        raise error(f"{path}: {'; '.join(said)}")


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def arrow_read(path: str, error: type[NeardupError], read: Callable[..., T], *args: Any, **kw: Any) -> T:
    """``read(*args, **kw)``, Arrow's errors for a file it cannot read (corrupt, truncated, a
    page whose checksum fails) as ``error`` naming ``path``."""
    try:
        return read(*args, **kw)
    except NeardupError:
        raise
    except Exception as exc:  # noqa: BLE001 - Arrow raises several types for a damaged file
        raise error(f"{path}: cannot read ({_short(exc)})") from None


def fingerprint_parts(path: str, error: type[NeardupError] = InputError) -> list[str]:
    """The Parquet files of ``path``: itself, or a folder's ``*.parquet`` parts (sorted; names
    starting with ``.`` or ``_`` left out, as Spark's ``_SUCCESS``); ``error`` for a path that
    is not there or a folder without parts."""
    p = str(path)
    if os.path.isdir(p):
        parts = sorted(os.path.join(root, f) for root, _, names in os.walk(p) for f in names
                       if f.endswith(".parquet") and not f.startswith((".", "_")))
        if not parts:
            raise error(f"{p}: a folder without .parquet files")
        return parts
    if not os.path.exists(p):
        raise error(f"{p}: no such file")
    return [p]


def _parquet_file(part: str, error: type[NeardupError]) -> Any:
    """``pq.ParquetFile`` of ``part`` (page checksums verified as it is read); ``error`` naming
    it when Arrow cannot read its footer (not Parquet, truncated)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(part, page_checksum_verification=True)
    except Exception as exc:  # noqa: BLE001 - Arrow raises several types for a file that is not Parquet
        raise error(f"{part}: not a readable Parquet file ({_short(exc)})") from None


def parquet_schema(part: str, error: type[NeardupError] = InputError) -> Any:
    """The Arrow schema of the Parquet file ``part`` (``error`` naming it when it is not one)."""
    return _parquet_file(part, error).schema_arrow


def check_fingerprint_file(path: str, error: type[NeardupError] = InputError, *, rows: bool = True) -> list[str]:
    """The check of a fingerprint Parquet file or folder of parts (what ``dedup --batch``,
    ``check-batch`` on both sides and the Spark job read): returns its part files, else
    raises ``error`` with one line naming the file and column:

    * a file Arrow cannot read (not Parquet, truncated);
    * a missing :data:`REQUIRED_COLUMNS` column, or a column of another type than
      :data:`COLUMN_TYPES` allows (``simhash`` a float or a string, ``url`` a number or a list...);
    * with ``rows``: nulls in a required column, sketches of another size than the spec's
      (:data:`~neardup.batch.arrays.SKETCH_BYTES`, the size the service accepts), and pages
      that cannot be read (a checksum that fails): each counted over the file. Those columns are
      read one row group at a time. The readers (:func:`read_fingerprints`,
      :func:`read_fingerprint_arrays`, :func:`neardup.batch.check.check_against`) check the
      rows as they read them (``rows=False`` here)."""
    try:
        import pyarrow.parquet  # noqa: F401 (the extra is installed)
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise error(f"{path}: fingerprint Parquet needs PyArrow ({exc}): pip install 'neardup[spark]'") from None

    parts = fingerprint_parts(path, error)
    for part in parts:
        pf = _parquet_file(part, error)
        schema = pf.schema_arrow
        check_fingerprint_schema(part, schema, error)
        if rows:
            cols = [c for c in (*REQUIRED_COLUMNS, "sketch") if c in schema.names]
            faults: dict[str, Fault] = {}
            offset = 0
            for g in range(pf.num_row_groups):
                table = arrow_read(part, error, pf.read_row_group, g, columns=cols)
                _add_faults(faults, row_faults({c: table.column(c) for c in cols}, offset))
                offset += table.num_rows
            refuse_rows(part, faults, offset, error)
    return parts


def check_fingerprint_frame(df: Any, path: str, error: type[NeardupError] = InputError) -> None:
    """:func:`check_fingerprint_file` of fingerprints a Spark DataFrame ``df`` reads from
    ``path`` (``s3://``, ``hdfs://``: places the driver cannot read): the schema's types (Spark's
    as Arrow's; Spark reads a uint64 SimHash as ``decimal(20,0)``), then one pass of Spark
    counting the nulls of the required columns and the sketches of another size; ``error``
    naming ``path`` and the column."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import DecimalType

    fields = []
    for f in df.schema.fields:
        if f.name in COLUMN_TYPES:
            try:
                typ = pa.uint64() if f.name == "simhash" and f.dataType == DecimalType(20, 0) else \
                    to_arrow_type(f.dataType)
            except Exception:  # noqa: BLE001 - a Spark type Arrow has not
                raise error(f"{path}: column {f.name} is {f.dataType.simpleString()}, "
                            f"expected {COLUMN_TYPES[f.name]}") from None
            fields.append(pa.field(f.name, typ))
    check_fingerprint_schema(path, pa.schema(fields), error)
    counts = [F.count(F.lit(1)).alias("rows")]
    counts += [F.sum(F.col(c).isNull().cast("long")).alias(c) for c in REQUIRED_COLUMNS]
    if "sketch" in df.columns:
        bad = F.col("sketch").isNotNull() & (F.length("sketch") != SKETCH_BYTES)
        counts.append(F.sum(bad.cast("long")).alias("sketch"))
    try:
        got = df.agg(*counts).first()
    except Exception as exc:  # noqa: BLE001 - Spark's error for a file it cannot read (damaged, not Parquet)
        raise error(f"{path}: cannot read ({_short(exc)})") from None
    faults: dict[str, Fault] = {c: (int(got[c]), None, None) for c in (*REQUIRED_COLUMNS, "sketch")
                                if c in df.columns and got[c]}
    refuse_rows(path, faults, int(got["rows"]), error)


def _reader_type(name: str) -> Any:
    """The Arrow type the readers give column ``name``."""
    import pyarrow as pa

    kind = dict(PARQUET_COLUMNS)[name]
    return {"string": pa.large_string(), "binary": pa.large_binary(), "int32": pa.int64()}.get(kind) or \
        _arrow_type(kind)


def _as_read(name: str, col: Any) -> Any:
    """Column ``name`` of a checked file as :func:`_reader_type` (the SimHash's 64 bits kept
    from uint64; numbers converted as Arrow does, without overflow checks)."""
    if name == "simhash":
        return simhash_int64(col)
    typ = _reader_type(name)
    return col if col.type == typ else col.cast(typ, safe=False)


def _fingerprint_table(part: str, columns: Sequence[str], error: type[NeardupError]) -> Any:
    """The ``columns`` (those it has) of one checked part file, read (page checksums verified),
    their rows checked (:func:`row_faults`), as the readers' types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def read() -> Any:
        pf = pq.ParquetFile(part, page_checksum_verification=True)
        return pf.read(columns=[c for c in columns if c in pf.schema_arrow.names])

    table = arrow_read(part, error, read)
    refuse_rows(part, row_faults({c: table.column(c) for c in table.column_names}), table.num_rows, error)
    return pa.table({c: _as_read(c, table.column(c)) for c in table.column_names})


def parquet_columns(path: str) -> set[str]:
    """The column names of a Parquet file or of a folder of parts (Arrow's errors for a file
    that is not Parquet pass through)."""
    import pyarrow.parquet as pq

    return set(pq.ParquetDataset(path).schema.names) if os.path.isdir(path) else set(pq.read_schema(path).names)


def is_fingerprint_file(path: str) -> bool:
    """Whether ``dedup --batch`` and ``check-batch`` read ``path`` as fingerprint Parquet
    (rather than as pages): a ``.parquet`` file, or a folder named so or holding nothing but
    ``.parquet`` parts (Spark's ``_SUCCESS`` and ``.crc`` files aside). They read pages from no
    Parquet, so such a path that is not a good fingerprint file is refused by
    :func:`check_fingerprint_file` (a file of pages' ``url``/``html``: the Spark job reads those)."""
    p = str(path)
    if p.lower().rstrip("/").endswith(".parquet"):
        return True
    if not os.path.isdir(p):
        return False
    seen = False
    for _, _, names in os.walk(p):
        for f in names:
            if not f.startswith((".", "_")):
                if not f.endswith(".parquet"):
                    return False  # (a folder of pages: at its first page)
                seen = True
    return seen

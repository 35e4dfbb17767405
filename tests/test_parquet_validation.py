"""Fingerprint Parquet is checked the same way on every path that reads it
(:func:`neardup.batch.files.check_fingerprint_file`): ``dedup --batch``, ``check-batch`` (the
queries and ``--stored``) and the Spark job. A bad file (a column of the wrong type, nulls in a
required column, a sketch of another size than the spec's, a truncated or bit-flipped file, a
missing column) is one line naming the file and the column, a non-zero exit, no traceback and
no output written; a good file of another writer's types (uint64 SimHash, large strings, a
fixed-size sketch, a column of nulls only, a Spark folder of parts) gives the same answer."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from neardup.batch.arrays import SKETCH_BYTES
from neardup.batch.check import check_against
from neardup.batch.files import (
    check_fingerprint_file,
    is_fingerprint_file,
    read_fingerprint_arrays,
    read_fingerprints,
    write_fingerprints,
)
from neardup.batch.graph import BatchRecord
from neardup.cli.main import main
from neardup.errors import ConfigError, InputError
from neardup.fingerprint.core import DEFAULT_CONFIG
from neardup.sketch import HEADER

SKETCH = bytes(range(SKETCH_BYTES))
GOOD = [
    BatchRecord("https://a.example/1", "d1", 5, sketch=SKETCH, title="A", length=3000),
    BatchRecord("https://b.example/2", "d2", (1 << 63) | 7, sketch=SKETCH, title="B", length=3000),
    BatchRecord("https://c.example/3", "d1", 5, sketch=SKETCH, title="C", length=3000),
]

#: a bad file: the column changed (values for the 3 rows) and what the message says of it
COLUMN_CASES = {
    "simhash_string": ("simhash", pa.array(["5", "7", "5"]), "column simhash is string"),
    "simhash_null": ("simhash", pa.array([5, None, 5], pa.int64()), "column simhash is null in 1 of its 3 rows"),
    "simhash_float": ("simhash", pa.array([1.5, 7.0, 1.0]), "column simhash is double"),
    "url_int": ("url", pa.array([1, 2, 3]), "column url is int64"),
    "url_list": ("url", pa.array([["a"], ["b"], ["c"]]), "column url is list"),
    "url_null": ("url", pa.array(["https://a.example/1", None, None]), "column url is null in 2 of its 3 rows"),
    "digest_int": ("digest", pa.array([1, 2, 1]), "column digest is int64"),
    "digest_null": ("digest", pa.array([None, None, None], pa.string()), "column digest is null in 3 of its 3 rows"),
    "sketch_1_byte": ("sketch", pa.array([SKETCH, b"x", SKETCH]), "column sketch is of another size"),
}
CASES = [*COLUMN_CASES, "missing_column", "truncated", "bit_flipped"]
NEEDLES = {
    "missing_column": "not a fingerprint file (missing digest)",
    "truncated": "not a readable Parquet file",
    "bit_flipped": "cannot read",
}


def write_bad(case: str, folder: Path) -> Path:
    """The bad file of ``case`` (written by pyarrow in ``folder``)."""
    good = folder / "good.parquet"
    if not good.exists():
        write_fingerprints(GOOD, str(good))
    path = folder / f"{case}.parquet"
    table = pq.read_table(good)
    if case in COLUMN_CASES:
        name, values, _ = COLUMN_CASES[case]
        pq.write_table(table.set_column(table.schema.get_field_index(name), name, values), path)
    elif case == "missing_column":
        pq.write_table(table.drop_columns(["digest"]), path)
    elif case == "truncated":
        raw = good.read_bytes()
        path.write_bytes(raw[: len(raw) // 2])
    elif case == "bit_flipped":  # one bit of the url column's data page (its checksum then fails)
        flipped = bytearray(good.read_bytes())
        chunk = pq.ParquetFile(good).metadata.row_group(0).column(0)
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        flipped[start + chunk.total_compressed_size - 1] ^= 0x10
        path.write_bytes(bytes(flipped))
    return path


def needle(case: str) -> str:
    return NEEDLES[case] if case in NEEDLES else COLUMN_CASES[case][2]


def invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fps")
    out = {case: write_bad(case, folder) for case in CASES}
    out["good"] = folder / "good.parquet"
    pages = folder / "pages.jsonl"
    words = " ".join(f"word{i}" for i in range(200))
    pages.write_text(
        json.dumps({"url": "https://p.example/1", "html": f"<html><body><p>{words}</p></body></html>"}) + "\n"
    )
    out["pages"] = pages
    return out


PATHS = {
    "dedup": lambda bad, good, pages, out: ["dedup", "--batch", bad, "--out", out],
    "dedup_with_pages": lambda bad, good, pages, out: ["dedup", "--batch", pages, bad, "--out", out, "--jobs", "1"],
    "dedup_minhash": lambda bad, good, pages, out: ["dedup", "--batch", "--method", "minhash", bad, "--out", out],
    "check_queries": lambda bad, good, pages, out: ["check-batch", bad, "--stored", good, "-o", out],
    "check_stored": lambda bad, good, pages, out: ["check-batch", good, "--stored", bad, "-o", out],
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", CASES)
def test_a_bad_file_is_one_line_naming_it_on_every_command(files, tmp_path, case, path) -> None:
    bad = files[case]
    before = bad.read_bytes()
    out = tmp_path / "verdicts.jsonl"
    code, stdout, stderr = invoke(*PATHS[path](str(bad), str(files["good"]), str(files["pages"]), str(out)))
    assert code != 0, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup: error: "), stderr
    assert str(bad) in lines[0] and needle(case) in lines[0], lines[0]
    assert "unexpected" not in lines[0] and "Traceback" not in stdout + stderr
    assert not out.exists() and bad.read_bytes() == before  # nothing written, the input as it was


@pytest.mark.parametrize("case", CASES)
def test_the_spark_job_refuses_a_bad_local_file_before_spark_reads_it(files, case) -> None:
    pytest.importorskip("pyspark")
    from neardup.batch.spark.job import fingerprints

    with pytest.raises(ConfigError) as got:  # the Spark job's error for a bad input (its main: exit 2)
        fingerprints(None, [str(files[case])])  # type: ignore[arg-type]  # (no session: refused before)
    message = str(got.value)
    assert str(files[case]) in message and needle(case) in message and "\n" not in message


@pytest.mark.parametrize("case", CASES)
def test_every_reader_raises_the_error_it_is_given(files, case) -> None:
    bad = str(files[case])
    for read in (
        lambda e: check_fingerprint_file(bad, e),
        lambda e: read_fingerprints(bad, e),
        lambda e: read_fingerprint_arrays([bad], e),
    ):
        for error in (InputError, ConfigError):
            with pytest.raises(error, match=needle(case).replace("(", r"\(").replace(")", r"\)")):
                read(error)
    with pytest.raises(InputError, match="column|not a|cannot read"):
        check_against(GOOD, [bad])


def test_a_part_of_a_folder_is_named(files, tmp_path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    shutil.copy(files["good"], folder / "part-0.parquet")
    shutil.copy(files["simhash_null"], folder / "part-1.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    assert is_fingerprint_file(str(folder))
    for args in (
        ["check-batch", str(folder), "--stored", str(files["good"])],
        ["check-batch", str(files["good"]), "--stored", str(folder)],
        ["dedup", "--batch", str(folder), "--out", str(tmp_path / "v.jsonl")],
    ):
        code, _, stderr = invoke(*args)
        assert code == 1 and str(folder / "part-1.parquet") in stderr and "column simhash is null" in stderr


def test_stored_nulls_are_counted_in_the_rows_read(files) -> None:
    """The archive is streamed: nulls are counted in the slice read (the file when it is one)."""
    with pytest.raises(InputError, match=r"column url is null in 2 of its 3 rows \(the first: row 1\)"):
        check_against(GOOD, [str(files["url_null"])])
    with pytest.raises(InputError, match=r"column url is null in 1 of rows 0 to 1 \(the first: row 1\)"):
        check_against(GOOD, [str(files["url_null"])], chunk_rows=2)


def test_the_sketch_size_is_the_services(files) -> None:
    """The size the service refuses others of (422): the shingle count and the spec's bins."""
    assert SKETCH_BYTES == HEADER + DEFAULT_CONFIG.sketch_bins == 64
    with pytest.raises(
        InputError,
        match=r"another size than the spec's 64 bytes in 1 of its 3 rows "
        r"\(the first: row 1, 1 bytes\)",
    ):
        check_fingerprint_file(str(files["sketch_1_byte"]))


def test_other_writers_types_give_the_same_answer(files, tmp_path) -> None:
    """uint64 SimHash (the unsigned value), large strings, a fixed-size sketch, a column of nulls
    only, a Spark-like folder (parts, _SUCCESS, .crc): accepted, the same answer as the writer's."""
    table = pq.read_table(files["good"])
    sims = pa.array([r.simhash for r in GOOD], pa.uint64())
    other = pa.table(
        {
            "url": table.column("url").cast(pa.large_string()),
            "digest": table.column("digest"),
            "simhash": sims,
            "sketch": table.column("sketch").cast(pa.binary(SKETCH_BYTES)),
            "title": table.column("title").cast(pa.large_string()),
            "canonical_link": pa.nulls(3),
            "length": table.column("length").cast(pa.int64()),
        }
    )
    folder = tmp_path / "spark.parquet"
    folder.mkdir()
    pq.write_table(other.slice(0, 2), folder / "part-00000.snappy.parquet")
    pq.write_table(other.slice(2), folder / "part-00001.snappy.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".part-00000.snappy.parquet.crc").write_bytes(b"crc")
    assert is_fingerprint_file(str(folder)) and check_fingerprint_file(str(folder)) == sorted(
        str(p) for p in folder.glob("part-*")
    )
    back = read_fingerprints(str(folder))
    assert [(r.url, r.digest, r.simhash, r.sketch, r.length) for r in back] == [
        (r.url, r.digest, r.simhash, r.sketch, r.length) for r in GOOD
    ]
    assert read_fingerprint_arrays([str(folder)]).simhash.tolist() == [r.simhash for r in GOOD]
    runs = {}
    for name, path in (("writer", str(files["good"])), ("other", str(folder))):
        outs = []
        for args in (
            ["dedup", "--batch", path, "--out", "-"],
            ["check-batch", path, "--stored", path],
            ["check-batch", path, "--stored", str(files["good"])],
        ):
            code, stdout, stderr = invoke(*args)
            assert code == 0, stderr
            outs.append([json.loads(line) for line in stdout.splitlines()])
        runs[name] = outs
    assert runs["other"] == runs["writer"]
    assert runs["writer"][0][1]["simhash"] == f"{GOOD[1].simhash:016x}"


def test_a_pages_file_given_as_parquet_is_refused_not_skipped(files, tmp_path) -> None:
    """dedup --batch and check-batch read no pages from Parquet: url/html Parquet is a bad
    fingerprint file (the Spark job reads pages from it)."""
    pages = tmp_path / "pages.parquet"
    pq.write_table(pa.table({"url": ["https://a.example/"], "html": ["<p>x</p>"]}), pages)
    (tmp_path / "a.html").write_text("<p>a page</p>")
    assert is_fingerprint_file(str(pages)) and not is_fingerprint_file(str(tmp_path))  # (a folder of pages)
    for args in (
        ["check-batch", str(pages), "--stored", str(files["good"])],
        ["dedup", "--batch", str(pages), "--out", str(tmp_path / "v.jsonl")],
    ):
        code, _, stderr = invoke(*args)
        assert code == 1 and "pages.parquet: not a fingerprint file (missing digest, simhash)" in stderr


def test_fingerprints_are_written_with_page_checksums(files) -> None:
    meta = pq.ParquetFile(files["good"]).metadata
    assert meta.num_rows == len(GOOD)
    with pytest.raises(OSError, match="CRC"):
        pq.read_table(files["bit_flipped"], page_checksum_verification=True)
    assert os.path.getsize(files["bit_flipped"]) == os.path.getsize(files["good"])

"""No command destroys data (issue 34): an output path that is the store (its file, -wal,
-shm, journal or index folder, through a link too), one of the inputs, or another output is
refused before anything is opened: exit 2, one line, the store and the inputs unchanged."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup import Detector
from neardup.batch.files import write_fingerprints
from neardup.batch.graph import BatchRecord
from neardup.cli.main import main
from neardup.fingerprint.core import fingerprint

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample" / "pages"


def run(*args: str | Path):
    return CliRunner().invoke(main, [str(a) for a in args])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def store(tmp_path) -> Path:
    """A store of three sample pages (with its saved index folder beside it)."""
    db = tmp_path / "s.db"
    with Detector.open(db) as det:
        for path in sorted(SAMPLE.glob("*.html.gz"))[:3]:
            det.add(f"https://example.com/{path.name}", gzip.decompress(path.read_bytes()))
    return db


@pytest.fixture()
def pages(tmp_path) -> Path:
    folder = tmp_path / "pages"
    folder.mkdir()
    for path in sorted(SAMPLE.glob("*.html.gz"))[:2]:
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def assert_refused(result, what: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "refusing to overwrite it" in lines[0] and what in lines[0], result.output


def assert_store_intact(db: Path) -> None:
    with Detector.open(db, create=False) as det:
        assert det.stats()["pages"] == 3


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", ".index/levels.npy"])
def test_export_and_report_into_the_store_are_refused(store, suffix):
    target = store.parent / (store.name + suffix)
    for command in (["export", "--db", store, "--out", target], ["report", "--db", store, "--out", target]):
        assert_refused(run(*command), "is the store --db")
    assert_store_intact(store)


def test_a_link_to_the_store_is_the_store(store, tmp_path):
    link = tmp_path / "out.csv"
    os.symlink(store, link)
    assert_refused(run("export", "--db", store, "--out", link), "is the store")
    assert_store_intact(store)


def test_dedup_outputs_into_the_store_or_an_input_are_refused(store, pages):
    page = next(pages.iterdir())
    before = digest(page)
    for option, target in (("--out", store), ("--errors", store), ("--out", page), ("--errors", page),
                           ("--fingerprints-out", store)):
        assert_refused(run("dedup", pages, page, "--db", store, option, target), f"{option} {target} is")
    assert digest(page) == before
    assert_store_intact(store)


def test_two_outputs_on_one_file_are_refused(tmp_path, pages):
    out = tmp_path / "v.csv"
    assert_refused(run("dedup", pages, "--db", tmp_path / "new.db", "--out", out, "--errors", out),
                   "is the output of --out")
    assert not (tmp_path / "new.db").exists()  # refused before the store is opened (or created)


def test_batch_outputs_over_their_fingerprint_input_are_refused(tmp_path, pages):
    fps = tmp_path / "fps.parquet"
    records = [BatchRecord.of(f"https://example.com/{p.name}", fingerprint(gzip.decompress(p.read_bytes())))
               for p in pages.iterdir()]
    write_fingerprints(records, str(fps))
    before = digest(fps)
    assert_refused(run("dedup", "--batch", fps, "--out", fps), "is the input")
    assert_refused(run("check-batch", pages, "--stored", fps, "-o", fps), "is the input")
    assert_refused(run("fingerprint", next(pages.iterdir()), "--out", next(pages.iterdir())), "is the input")
    assert digest(fps) == before


def test_a_new_output_elsewhere_is_written(store, tmp_path):
    out = tmp_path / "export.csv"
    result = run("export", "--db", store, "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_text().count("\n") == 4  # header and three pages


def test_a_postgresql_store_keeps_its_pages_when_an_output_is_an_input(pg_dsn, pages, tmp_path):
    # a server store has no file to overwrite: the inputs and the other outputs are what is guarded
    page = next(pages.iterdir())
    before = digest(page)
    assert run("dedup", pages, "--db", pg_dsn).exit_code == 0
    for option, target in (("--out", page), ("--errors", page), ("--out", pages / "urls.tsv")):
        assert_refused(run("dedup", pages, "--db", pg_dsn, option, target),
                       f"{option} {target} is read from the input folder {pages}")
    out = tmp_path / "v.csv"
    assert_refused(run("dedup", pages, "--db", pg_dsn, "--out", out, "--errors", out), "is the output of --out")
    assert digest(page) == before and not out.exists()
    with Detector.open(pg_dsn, create=False) as det:
        assert det.stats()["pages"] == 2
    exported = tmp_path / "export.csv"
    assert run("export", "--db", pg_dsn, "--out", exported).exit_code == 0
    assert exported.read_text().count("\n") == 3


def test_an_output_beside_the_pages_of_an_input_folder_is_written(tmp_path, pages):
    out = pages / "verdicts.csv"  # not a page: the folder does not read it
    result = run("dedup", pages, "--db", tmp_path / "s.db", "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_text().count("\n") == 3

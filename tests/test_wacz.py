"""WACZ in (issue 37, item 3): a WACZ package made by the ``wacz`` package (Webrecorder's
py-wacz) from a WARC file written by warcio is read on every path: ``neardup dedup`` into a
store, ``dedup --batch``, ``fingerprint``; its page list decides which HTML captures are pages."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.cli import main
from neardup.errors import InputFormatError
from neardup.ingest.inputs import read_input

SITE = "https://news.example/"


def write_warc(path: Path, sample_pages) -> list[str]:
    """Three pages of the sample, an iframe's HTML and a stylesheet; returns the pages' URLs."""
    bodies = [p.content if isinstance(p.content, bytes) else p.content.encode() for p in
              list(sample_pages.values())[:3]]
    urls = [f"{SITE}{i}.html" for i in range(3)]
    html = [("Content-Type", "text/html; charset=utf-8")]
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        for i, (url, body) in enumerate(zip(urls, bodies)):
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body),
                                                http_headers=StatusAndHeaders("200 OK", html, protocol="HTTP/1.1"),
                                                warc_headers_dict={"WARC-Date": f"2024-05-06T07:0{i}:00Z"}))
        frame = b"<html><body><p>" + b"an embedded widget with its own words " * 30 + b"</p></body></html>"
        w.write_record(w.create_warc_record(f"{SITE}widget/frame.html", "response", payload=io.BytesIO(frame),
                                            http_headers=StatusAndHeaders("200 OK", html, protocol="HTTP/1.1")))
        css = [("Content-Type", "text/css")]
        w.write_record(w.create_warc_record(f"{SITE}s.css", "response", payload=io.BytesIO(b"p { color: red }"),
                                            http_headers=StatusAndHeaders("200 OK", css, protocol="HTTP/1.1")))
    return urls


@pytest.fixture
def package(tmp_path, sample_pages) -> tuple[Path, list[str]]:
    warc = tmp_path / "crawl.warc.gz"
    urls = write_warc(warc, sample_pages)
    pages = tmp_path / "pages.jsonl"
    lines = [{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}]
    lines += [{"id": f"p{i}", "url": u, "ts": f"2024-05-06T07:0{i}:00Z", "title": f"Page {i}"}
              for i, u in enumerate(urls)]
    pages.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tool = shutil.which("wacz") or str(Path(sys.executable).with_name("wacz"))
    out = tmp_path / "crawl.wacz"
    subprocess.run([tool, "create", "-o", str(out), "-p", str(pages), str(warc)], check=True, capture_output=True,
                   cwd=tmp_path)
    assert "archive/crawl.warc.gz" in zipfile.ZipFile(out).namelist()
    return out, urls


def summary(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_dedup_reads_a_wacz_and_its_page_list(tmp_path, package):
    wacz, urls = package
    out = tmp_path / "v.jsonl"
    r = CliRunner().invoke(main, ["dedup", str(wacz), "--db", str(tmp_path / "s.db"), "--out", str(out),
                                  "--jobs", "1"])
    assert r.exit_code == 0, r.output
    s = summary(r)
    assert (s["pages"], s["error"]) == (3, 0)
    assert s["skipped_by_reason"] == {"non-html": 1, "not-a-page": 1}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["url"] for row in rows) == sorted(urls)
    assert all(row["source"].startswith(f"{wacz}!archive/crawl.warc.gz#") for row in rows)


def test_the_batch_job_and_fingerprint_read_a_wacz(tmp_path, package):
    wacz, urls = package
    out = tmp_path / "b.jsonl"
    r = CliRunner().invoke(main, ["dedup", "--batch", str(wacz), "--out", str(out), "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert sorted(json.loads(line)["url"] for line in out.read_text().splitlines()) == sorted(urls)
    r = CliRunner().invoke(main, ["fingerprint", str(wacz)])
    assert r.exit_code == 0, r.output
    assert sorted(json.loads(line)["url"] for line in r.stdout.splitlines()) == sorted(urls)


def test_a_package_without_a_page_list_takes_every_html_capture(tmp_path, sample_pages):
    warc = tmp_path / "crawl.warc.gz"
    urls = write_warc(warc, sample_pages)
    bare = tmp_path / "bare.wacz"
    with zipfile.ZipFile(bare, "w") as z:  # the WACZ 1.1 layout by hand: archive/ and a datapackage
        z.write(warc, "archive/crawl.warc.gz")
        z.writestr("datapackage.json", json.dumps({"profile": "data-package", "wacz_version": "1.1.1"}))
    found = [it.page.url for it in read_input(bare) if it.page is not None]
    assert found == [*urls, f"{SITE}widget/frame.html"]


def test_damaged_packages_are_one_line_errors(tmp_path):
    broken = tmp_path / "broken.wacz"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(InputFormatError, match="not a WACZ package"):
        list(read_input(broken))
    empty = tmp_path / "empty.wacz"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("datapackage.json", "{}")
    with pytest.raises(InputFormatError, match="without WARC files"):
        list(read_input(empty))
    r = CliRunner().invoke(main, ["dedup", str(broken), "--db", str(tmp_path / "s.db")])
    assert r.exit_code == 1 and "not a WACZ package" in r.output and "Traceback" not in r.output

"""The CDXJ sidecar (issue 37, item 2): ``neardup dedup --cdxj`` writes one line per capture in
the archive's own key, and every line joins, by ``urlkey`` and timestamp, a line of
cdxj-indexer's index of the same WARC file (written here by warcio: pages of the bundled
sample, a near copy under another URL, a revisit)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.cli import main
from neardup.report.cdxj import cdxj_line, surt_key, timestamp14


def sample_bodies(sample_pages) -> list[bytes]:
    out = []
    for page in list(sample_pages.values())[:3]:
        content = page.content
        out.append(content if isinstance(content, bytes) else content.encode("utf-8"))
    return out


def write_warc(path: Path, bodies: list[bytes]) -> list[tuple[str, str]]:
    """Three pages, a copy of the first under a session-id URL, a revisit of the second;
    returns (url, WARC-Date) of each capture."""
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
    captures = [("https://news.example/a.html", bodies[0]), ("https://news.example/b.html", bodies[1]),
                ("https://www.news.example/c.html", bodies[2]),
                ("https://news.example/a.html?sessionid=7f3a", bodies[0])]
    written = []
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        for i, (url, body) in enumerate(captures):
            date = f"2024-05-06T07:0{i}:00Z"
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                                warc_headers_dict={"WARC-Date": date}))
            written.append((url, date))
        rec = w.create_revisit_record("https://news.example/b.html", digest="sha1:AAAA",
                                      refers_to_uri="https://news.example/b.html",
                                      refers_to_date="2024-05-06T07:01:00Z")
        rec.rec_headers.replace_header("WARC-Date", "2024-05-09T07:00:00Z")
        w.write_record(rec)
        written.append(("https://news.example/b.html", "2024-05-09T07:00:00Z"))
    return written


@pytest.mark.parametrize("path", ["store", "batch"])
def test_the_sidecar_joins_cdxj_indexer(tmp_path, sample_pages, path):
    warc, side = tmp_path / "crawl.warc.gz", tmp_path / "crawl.nd.cdxj"
    written = write_warc(warc, sample_bodies(sample_pages))
    where = ["--db", str(tmp_path / "s.db")] if path == "store" else ["--batch"]
    r = CliRunner().invoke(main, ["dedup", str(warc), *where, "--cdxj", str(side), "--jobs", "1"])
    assert r.exit_code == 0, r.output
    lines = side.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(written) == 5
    assert lines == sorted(lines, key=lambda line: line.encode("utf-8"))  # sorted as CDXJ must be
    index = subprocess.run([sys.executable, "-m", "cdxj_indexer.main", str(warc)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    keys = {tuple(line.split(" ", 2)[:2]) for line in index}
    ours = [line.split(" ", 2) for line in lines]
    assert all((key, ts) in keys for key, ts, _ in ours), (ours, sorted(keys))
    blocks = {(b["url"], ts): b for _, ts, b in ((k, t, json.loads(j)) for k, t, j in ours)}
    copy = blocks[("https://news.example/a.html?sessionid=7f3a", "20240506070300")]
    assert copy["nd_status"] == "exact" and copy["nd_match"] == "https://news.example/a.html"
    assert copy["nd_match_timestamp"] == "20240506070000" and copy["nd_cluster"] is not None
    revisit = blocks[("https://news.example/b.html", "20240509070000")]
    first = blocks[("https://news.example/b.html", "20240506070100")]
    assert revisit["nd_version"] == "unchanged" and revisit["nd_status"] == first["nd_status"]
    assert "nd_version" not in first and all(b["nd_spec"] for b in blocks.values())
    assert all(set(b) <= {"url", "nd_status", "nd_version", "nd_match", "nd_match_timestamp", "nd_distance",
                          "nd_score", "nd_cluster", "nd_canonical", "nd_simhash", "nd_spec"} for b in blocks.values())


def test_keys_are_the_archive_s_own():
    assert surt_key("https://www.News.example:443/a/b.html?z=1&a=2#frag") == "example,news)/a/b.html?a=2&z=1"
    assert timestamp14(1715000000.0) == "20240506125320"
    line = cdxj_line("http://a.example/", 0.0, {"nd_status": "new", "nd_match": None})
    assert line == 'example,a)/ 19700101000000 {"url": "http://a.example/", "nd_status": "new"}'


def test_the_sidecar_is_refused_with_minhash_and_over_an_input(tmp_path, sample_pages):
    warc = tmp_path / "crawl.warc.gz"
    write_warc(warc, sample_bodies(sample_pages))
    r = CliRunner().invoke(main, ["dedup", "--batch", str(warc), "--method", "minhash",
                                  "--cdxj", str(tmp_path / "x.cdxj")])
    assert r.exit_code == 2 and "--cdxj" in r.output and not (tmp_path / "x.cdxj").exists()
    r = CliRunner().invoke(main, ["dedup", str(warc), "--db", str(tmp_path / "s.db"), "--cdxj", str(warc)])
    assert r.exit_code != 0 and "Traceback" not in r.output and warc.stat().st_size > 0


def test_export_writes_the_store_as_cdxj(tmp_path, sample_pages):
    warc, db, final = tmp_path / "crawl.warc.gz", tmp_path / "s.db", tmp_path / "final.cdxj"
    write_warc(warc, sample_bodies(sample_pages))
    assert CliRunner().invoke(main, ["dedup", str(warc), "--db", str(db), "--jobs", "1"]).exit_code == 0
    r = CliRunner().invoke(main, ["export", "--db", str(db), "--out", str(final)])
    assert r.exit_code == 0, r.output
    lines = final.read_text(encoding="utf-8").splitlines()
    assert json.loads(r.stderr)["rows"] == len(lines) == 4  # every stored URL, at its last capture
    assert lines == sorted(lines, key=lambda line: line.encode("utf-8"))
    index = subprocess.run([sys.executable, "-m", "cdxj_indexer.main", str(warc)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    keys = {tuple(line.split(" ", 2)[:2]) for line in index}
    assert all(tuple(line.split(" ", 2)[:2]) in keys for line in lines)
    b = next(json.loads(line.split(" ", 2)[2]) for line in lines if " 20240509070000 " in line)
    assert b["url"] == "https://news.example/b.html" and b["nd_spec"]  # the revisit is its last capture

"""Revisits (issue 37, item 1): a fetch that found a stored URL unchanged without sending it (an
HTTP 304, a WARC ``revisit`` record of the identical-payload-digest or server-not-modified
profile) is an ``unchanged`` fetch of that URL at its time, on every face: the Detector,
``add_many``, the service and the Client, ``neardup revisit`` and ``neardup dedup`` reading a
WARC file written by warcio."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup import Detector
from neardup.cli import main
from neardup.errors import NotStoredError
from neardup.model import Page

URL = "https://news.example/article.html"
HOUR = 3600.0


def html(sample_pages) -> bytes:
    """A real page of the bundled sample, as fetched."""
    content = next(iter(sample_pages.values())).content
    return content if isinstance(content, bytes) else content.encode("utf-8")


def test_a_revisit_is_an_unchanged_fetch(sample_pages):
    det = Detector()
    first = det.add(URL, html(sample_pages), fetched_at=0.0)
    before = det.history(URL)
    assert before is not None and before.fetches == 1
    v = det.add_revisit(URL, fetched_at=HOUR)
    assert (v.status, v.version, v.since_last_fetch, v.cluster_id) == (first.status, "unchanged", HOUR,
                                                                       first.cluster_id)
    after = det.history(URL)
    assert after is not None and after.fetches == 2 and after.change_count == 0
    assert [f["fetched_at"] for f in after.versions] == [0.0, HOUR] and not after.versions[-1]["changed"]
    assert after.next_fetch is not None and after.next_fetch > HOUR
    # the next real fetch is compared with the stored content, as before the revisit
    again = det.add(URL, html(sample_pages), fetched_at=2 * HOUR)
    assert again.version == "unchanged" and again.since_last_fetch == HOUR


def test_a_revisit_of_a_url_not_stored_is_refused_and_writes_nothing():
    det = Detector()
    with pytest.raises(NotStoredError, match="not stored"):
        det.add_revisit("https://news.example/never", fetched_at=HOUR)
    assert det.stats()["pages"] == 0


@pytest.mark.parametrize("through", ["detector", "client"])
def test_add_many_takes_revisits_in_order(sample_pages, through):
    """The Detector's add_many and the Client's (a revisit between pages: POST /v1/revisits
    in its place) give the same verdicts."""
    from fastapi.testclient import TestClient

    from neardup import Client
    from neardup.service import create_app

    det = Detector()
    pages = [Page(URL, html(sample_pages), fetched_at=0.0),
             Page(URL, b"", fetched_at=HOUR, revisit=True),
             Page("https://news.example/other", b"", fetched_at=HOUR, revisit=True),
             Page("https://news.example/copy", b"", fetched_at=HOUR, revisit=True, refers_to=URL),
             Page(URL, html(sample_pages), fetched_at=2 * HOUR)]
    if through == "detector":
        out = det.add_many(pages)
    else:
        with TestClient(create_app(det)) as http:
            out = Client("http://testserver", transport=http._transport).add_many(pages)
    assert [v.version for v in out[:2]] == [None, "unchanged"]
    assert out[2].status == "error" and "not stored" in (out[2].error or "")
    assert out[3].status == "error" and "batch paths" in (out[3].error or "")  # another URL's capture
    assert out[4].version == "unchanged"
    history = det.history(URL)
    assert history is not None and history.fetches == 3


def test_the_service_and_the_client_record_revisits(sample_pages):
    from fastapi.testclient import TestClient

    from neardup.service import create_app

    det = Detector()
    det.add(URL, html(sample_pages), fetched_at=0.0)
    with TestClient(create_app(det)) as http:
        r = http.post("/v1/revisits", json={"url": URL, "fetched_at": HOUR})
        assert r.status_code == 200 and r.json()["version"] == "unchanged"
        r = http.post("/v1/revisits", json={"url": "https://news.example/never"})
        assert r.status_code == 404 and r.json()["type"] == "NotStoredError"
        r = http.post("/v1/revisits", json={"url": URL, "fetched_at": -5.0})
        assert r.status_code in (400, 422)
    history = det.history(URL)
    assert history is not None and history.fetches == 2


def write_warc(path: Path, body: bytes) -> None:
    """A page, then three revisits of it (identical payload, 304, WARC/1.0 and 1.1 profiles),
    a revisit of another URL's payload and one of a stylesheet, as warcio writes them."""
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(URL, "response", payload=io.BytesIO(body), http_headers=http,
                                            warc_headers_dict={"WARC-Date": "2024-05-06T07:00:00Z"}))

        def revisit(uri: str, date: str, profile: str, target: str = URL, status: str = "200 OK",
                    ctype: str = "text/html") -> None:
            rec = w.create_revisit_record(uri, digest="sha1:AAAA", refers_to_uri=target,
                                          refers_to_date="2024-05-06T07:00:00Z",
                                          http_headers=StatusAndHeaders(status, [("Content-Type", ctype)],
                                                                        protocol="HTTP/1.1"))
            rec.rec_headers.replace_header("WARC-Date", date)
            rec.rec_headers.replace_header("WARC-Profile", profile)
            w.write_record(rec)

        revisit(URL, "2024-05-07T07:00:00Z", "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest")
        revisit(URL, "2024-05-08T07:00:00Z", "http://netpreserve.org/warc/1.0/revisit/server-not-modified",
                status="304 Not Modified")
        revisit("https://news.example/copy.html", "2024-05-08T08:00:00Z",
                "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest")  # another URL's payload
        revisit("https://news.example/s.css", "2024-05-08T09:00:00Z",
                "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest", target="https://news.example/s.css",
                ctype="text/css")


@pytest.mark.parametrize("jobs", [1, 2])
def test_dedup_reads_warc_revisits_as_unchanged_fetches(tmp_path, sample_pages, jobs):
    warc, db = tmp_path / "crawl.warc.gz", tmp_path / "s.db"
    write_warc(warc, html(sample_pages))
    r = CliRunner().invoke(main, ["dedup", str(warc), "--db", str(db), "--jobs", str(jobs)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    # as re-fetches are: each with its URL's decision (new), two of them unchanged versions
    assert (summary["pages"], summary["new"], summary["unchanged"], summary["error"]) == (3, 3, 2, 0)
    assert summary["skipped_by_reason"] == {"revisit": 2}
    with Detector.open(str(db)) as det:
        history = det.history(URL)
    assert history is not None and history.fetches == 3 and history.change_count == 0
    assert history.fetched_at == pytest.approx(1715151600.0)  # 2024-05-08T07:00:00Z, the 304


def test_the_revisit_command(tmp_path, sample_pages):
    db = tmp_path / "s.db"
    with Detector.open(str(db)) as det:
        det.add(URL, html(sample_pages), fetched_at=0.0)
    r = CliRunner().invoke(main, ["revisit", URL, "--db", str(db), "--fetched-at", str(HOUR)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["version"] == "unchanged"
    r = CliRunner().invoke(main, ["revisit", "https://news.example/never", "--db", str(db)])
    assert r.exit_code == 1 and "not stored" in r.stderr and "Traceback" not in r.output


# -- the batch paths (neardup.batch.revisits) ---------------------------------------------------------


def test_dedup_batch_takes_revisits_as_captures_in_any_order(sample_pages):
    import random

    from neardup.batch import dedup_batch

    other = list(sample_pages.values())[1].content
    items = [Page(URL, html(sample_pages), fetched_at=0.0),
             Page(URL, b"", fetched_at=HOUR, revisit=True),
             Page(URL, other, fetched_at=2 * HOUR),  # the page changed ...
             Page(URL + "#top", b"", fetched_at=3 * HOUR, revisit=True),  # ... and stayed so
             Page("https://news.example/never", b"", fetched_at=HOUR, revisit=True)]
    res = dedup_batch(items, jobs=1)
    got = {(v.url, v.version, v.digest) for v in res.verdicts}
    assert len(res.verdicts) == 4 and [e for e in res.errors if "never" in e]
    # the first revisit holds the first content, the second the changed one
    first, changed = res.verdicts[0].digest, res.verdicts[2].digest
    assert first != changed
    assert (URL, "unchanged", first) in got and (URL + "#top", "unchanged", changed) in got
    assert res.verdicts[2].version == "changed" and len({v.cluster for v in res.verdicts}) == 1
    assert len({(v.status, v.canonical) for v in res.verdicts}) == 1
    shuffled = items[:]
    random.Random(7).shuffle(shuffled)
    again = dedup_batch(shuffled, jobs=1)
    assert sorted(map(str, again.verdicts)) == sorted(map(str, res.verdicts))


@pytest.mark.parametrize("method", ["simhash", "minhash"])
def test_dedup_batch_reads_warc_revisits(tmp_path, sample_pages, method):
    warc = tmp_path / "crawl.warc.gz"
    write_warc(warc, html(sample_pages))
    out = tmp_path / "verdicts.jsonl"
    r = CliRunner().invoke(main, ["dedup", "--batch", str(warc), "--method", method, "--out", str(out),
                                  "--jobs", "1"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    # the revisit of another URL's payload is a capture of that content under its own URL
    assert (summary["pages"], summary["refetched"], summary["revisits"]) == (4, 2, 3)
    assert summary["skipped_by_reason"] == {"revisit": 1}  # a stylesheet
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(str(r["version"]) for r in rows) == ["None", "None", "unchanged", "unchanged"]
    assert len({(r["cluster"], r["digest"]) for r in rows}) == 1
    copy = next(r for r in rows if r["url"] == "https://news.example/copy.html")
    assert copy["status"] == "exact" and copy["match"] == URL
    assert {r["status"] for r in rows if r["url"] == URL} == {"new"}


def test_a_revisit_finds_its_original_in_an_earlier_crawl_s_fingerprints(tmp_path, sample_pages):
    """The first crawl as fingerprint Parquet, the recrawl a WARC of revisits only."""
    first, recrawl, fps = tmp_path / "first.warc.gz", tmp_path / "recrawl.warc.gz", tmp_path / "first.parquet"
    write_warc(first, html(sample_pages))
    r = CliRunner().invoke(main, ["fingerprint", str(first), "--out", str(fps)])
    assert r.exit_code == 0, r.output
    with open(recrawl, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        rec = w.create_revisit_record(URL, digest="sha1:AAAA", refers_to_uri=URL,
                                      refers_to_date="2024-05-06T07:00:00Z")
        rec.rec_headers.replace_header("WARC-Date", "2024-06-01T00:00:00Z")
        w.write_record(rec)
    out = tmp_path / "v.jsonl"
    r = CliRunner().invoke(main, ["dedup", "--batch", str(fps), str(recrawl), "--out", str(out), "--jobs", "1"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["version"] for r in rows] == [None, "unchanged"]  # the first crawl's page, the revisit
    assert json.loads(r.stdout.strip().splitlines()[-1])["revisits"] == 1

"""Detector behaviour on the real pages of examples/sample (and hand-made fingerprints where
an exact Hamming distance is needed)."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import sqlite3
import time
from datetime import UTC
from functools import cache
from pathlib import Path

import pytest
from checks import present, sqlite_store

import neardup
from neardup import ConfigError, Detector, FeatureConfig, FingerprintConfig, Page, SpecMismatchError, hamming
from neardup.detector.settings import DetectorSettings
from neardup.model import DEFAULT_K_BY_VERSION, SIMHASH_ONLY_K_BY_VERSION

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


@cache
def sample() -> dict[str, dict]:
    """name (file name without .html.gz) -> {url, group, html (bytes)} from urls.tsv."""
    out: dict[str, dict] = {}
    with open(SAMPLE / "urls.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            name = Path(row["file"]).name.removesuffix(".html.gz")
            out[name] = {"url": row["url"], "group": row["group"],
                         "html": gzip.decompress((SAMPLE / row["file"]).read_bytes())}
    return out


def html(name: str) -> bytes:
    return sample()[name]["html"]


def url(name: str) -> str:
    return sample()[name]["url"]


@cache
def fp(name: str) -> neardup.Fingerprint:
    return neardup.fingerprint(html(name), url=url(name))


def cluster_row(det: Detector, cluster_id: int) -> tuple | None:
    """(canonical_id, size) of a cluster as stored."""
    row = sqlite_store(det.store)._db.execute("SELECT canonical_id, size FROM clusters WHERE id=?",
                                              (cluster_id,)).fetchone()
    return None if row is None else tuple(row)


WAYBACK = "https://web.archive.org/web/2019/"


# -- construction ----------------------------------------------------------------------

def test_default_detector_is_in_memory():
    det = Detector()
    assert det.store.path == ":memory:"
    assert det.k == neardup.detector.DEFAULT_K
    assert det.config == neardup.DEFAULT_CONFIG
    assert det.add(url("npr-dylann-roof-2022"), html("npr-dylann-roof-2022")).status == "new"
    assert det.stats()["pages"] == 1


def test_open_creates_sqlite_file(tmp_path):
    path = tmp_path / "store.db"
    with Detector.open(path) as det:
        v = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"))
        assert v.status == "new"
    assert path.is_file()
    con = sqlite3.connect(path)
    try:
        assert con.execute("SELECT url FROM pages").fetchall() == [(url("newyorker-teas-2019"),)]
    finally:
        con.close()


# -- exact / near / new ----------------------------------------------------------------

@pytest.mark.parametrize("original, mirror", [
    ("npr-dylann-roof-2022", "npr-dylann-roof-2022-mirror"),
    ("newyorker-teas-2019", "newyorker-teas-2019-mirror"),
])
def test_mirror_is_exact_duplicate(original, mirror):
    det = Detector()
    first = det.add(url(original), html(original))
    assert first.status == "new"
    assert first.match_id is None and first.distance is None
    v = det.add(url(mirror), html(mirror))
    assert v.status == "exact"
    assert v.is_duplicate
    assert v.match_id == first.page_id
    assert v.match_url == url(original)
    assert v.distance == 0
    assert v.cluster_id == first.cluster_id
    assert v.digest == first.digest
    # both pages name the original as rel=canonical
    assert v.canonical_url == url(original)
    assert v.canonical_id == first.page_id
    assert len(det.cluster(present(first.cluster_id))) == 2
    assert cluster_row(det, present(first.cluster_id)) == (first.page_id, 2)


@pytest.mark.parametrize("older, newer", [
    ("nytimes-nikki-haley-2018", "nytimes-nikki-haley-2019"),
    ("cnbc-cybersecurity-2019", "cnbc-cybersecurity-2022"),
    ("npr-dylann-roof-2016", "npr-dylann-roof-2022"),
    ("politico-vp-debate-2016", "politico-vp-debate-2022"),
])
def test_recapture_is_near_duplicate(older, newer):
    det = Detector()
    first = det.add(url(older), html(older))
    assert first.status == "new"
    # the recapture, stored under an archive URL so that it is a different page
    other = WAYBACK + url(newer)
    v = det.add(other, html(newer))
    assert v.status == "near"
    assert v.page_id is not None and v.page_id != first.page_id
    assert v.match_id == first.page_id
    assert v.match_url == url(older)
    assert v.distance == hamming(fp(older), fp(newer))
    assert 0 <= v.distance <= det.k
    assert v.digest != first.digest
    assert v.cluster_id == first.cluster_id
    assert present(det.page(v.page_id)).cluster_id == first.cluster_id
    # the original is named as rel=canonical (and seen first); the archive copy is not
    assert v.canonical_url == url(older)
    assert v.canonical_id == first.page_id
    assert {p.url for p in det.cluster(present(first.cluster_id))} == {url(older), other}


def test_check_writes_nothing(tmp_path):
    with Detector.open(tmp_path / "s.db") as det:
        v = det.check(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018"))
        assert v.status == "new"
        assert v.page_id is None
        assert v.canonical_url == url("nytimes-nikki-haley-2018")
        assert det.store.page_count() == 0
        assert len(det.index) == 0
        assert det.add(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018")).status == "new"
        before = (det.stats(), det.store.page_count(), det.store.cluster_count(), len(det.index))
        c = det.check(WAYBACK + "x", html("nytimes-nikki-haley-2019"))
        assert c.status == "near"
        assert c.page_id is None
        assert c.distance == neardup.hamming(det.fingerprint(html("nytimes-nikki-haley-2019")),
                                             det.fingerprint(html("nytimes-nikki-haley-2018")))
        assert (det.stats(), det.store.page_count(), det.store.cluster_count(), len(det.index)) == before
        assert det.store.page_by_url(WAYBACK + "x") is None
        # checking the same content twice gives the same answer: nothing was learnt
        assert det.check(WAYBACK + "x", html("nytimes-nikki-haley-2019")) == c
        # a page only checked is still new when added later
        assert det.check(url("newyorker-teas-2019"), html("newyorker-teas-2019")).status == "new"
        assert det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019")).status == "new"


def test_check_of_stored_url_reports_its_page_id():
    det = Detector()
    v = det.add(url("cnbc-cybersecurity-2019"), html("cnbc-cybersecurity-2019"))
    c = det.check(url("cnbc-cybersecurity-2022"), html("cnbc-cybersecurity-2022"))  # same URL
    # a version of the same URL, not a duplicate of itself: it keeps its first decision
    assert (c.status, c.version, c.page_id, c.match_id, c.match_url) == ("new", "changed", v.page_id, None, None)
    assert c.previous_distance == hamming(fp("cnbc-cybersecurity-2019"), fp("cnbc-cybersecurity-2022"))
    assert present(det.store.page_by_url(url("cnbc-cybersecurity-2019"))).digest == v.digest


def test_different_articles_of_one_site_are_all_new():
    det = Detector()
    names = ["newyorker-quantum-crypto-2019", "newyorker-teas-2019",
             "nytimes-nikki-haley-2018", "nytimes-trump-message-2016",
             "politico-vp-debate-2016", "politico-student-debt-2022", "politico-morning-money-2022",
             "deadspin-espinosa-2016", "deadspin-trump-booed-2016",
             "obamawhitehouse-christmas-address-2022", "obamawhitehouse-tuition-address-2022"]
    verdicts = [det.add(url(n), html(n)) for n in names]
    assert [v.status for v in verdicts] == ["new"] * len(names)
    assert len({v.cluster_id for v in verdicts}) == len(names)
    assert all(v.canonical_url == v.url for v in verdicts)
    assert det.stats() == {"pages": len(names), "clusters": len(names), "new": len(names),
                           "exact": 0, "near": 0, "partial": 0, "empty": 0, "fetches": len(names),
                           "changed_pages": 0}


def test_whole_sample_never_matches_across_groups():
    det = Detector()
    group_of_url = {d["url"]: d["group"] for d in sample().values()}
    seen_groups: set[str] = set()
    for name, d in sample().items():
        v = det.add(d["url"], d["html"])
        assert v.status in ("new", "exact", "near"), (name, v)
        if v.is_duplicate:
            assert group_of_url[v.match_url] == d["group"], (name, v.match_url)
        if d["group"] not in seen_groups:
            # the first page of a group has nothing to match but itself... it is new
            assert v.status == "new", (name, v)
        seen_groups.add(d["group"])
    stats = det.stats()
    assert stats["pages"] == len(group_of_url)
    # one cluster per group that was matched at k=3 (deadspin recaptures are further apart)
    assert stats["clusters"] >= len(seen_groups)


# -- re-adding a URL ---------------------------------------------------------------------

def test_readd_same_content_is_unchanged_not_a_duplicate():
    det = Detector()
    first = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"), fetched_at=1000.0)
    again = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"), fetched_at=4600.0)
    assert (again.status, again.version, again.is_duplicate) == ("new", "unchanged", False)
    assert again.page_id == first.page_id and again.match_id is None and again.match_url is None
    assert (again.previous_distance, again.since_last_fetch) == (0, 3600.0)
    assert again.cluster_id == first.cluster_id and again.canonical_url == first.url
    assert first.version is None and first.next_fetch is None
    assert again.next_fetch == 4600.0 + 3600.0  # never seen changing: as long again as seen unchanged
    assert det.store.page_count() == 1
    assert len(det.index) == 1
    assert det.stats()["new"] == 1 and det.stats()["exact"] == 0
    stored = present(det.page(present(first.page_id)))
    assert (stored.fetches, stored.change_count, stored.change_rate) == (2, 0, 0.0)


def test_readd_same_content_keeps_the_first_decision_of_a_mirror():
    det = Detector()
    first = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"))
    mirror = det.add(url("newyorker-teas-2019-mirror"), html("newyorker-teas-2019-mirror"))
    assert mirror.match_id == first.page_id
    again = det.add(url("newyorker-teas-2019-mirror"), html("newyorker-teas-2019-mirror"))
    assert (again.status, again.version) == (mirror.status, "unchanged")
    assert again.match_id == first.page_id != again.page_id == mirror.page_id
    assert again.match_url == first.url
    # the original, re-fetched, is still the original
    orig = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"))
    assert (orig.status, orig.version, orig.match_id, orig.canonical_id) == ("new", "unchanged", None, first.page_id)


def test_readd_changed_a_little_is_a_changed_version_of_itself():
    det = Detector()
    first = det.add(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018"), fetched_at=1_539_194_812)
    v = det.add(url("nytimes-nikki-haley-2019"), html("nytimes-nikki-haley-2019"), fetched_at=1_571_223_477)
    assert url("nytimes-nikki-haley-2019") == url("nytimes-nikki-haley-2018")
    assert (v.status, v.version, v.match_id) == ("new", "changed", None)
    assert v.page_id == first.page_id
    assert v.previous_distance == hamming(fp("nytimes-nikki-haley-2018"), fp("nytimes-nikki-haley-2019"))
    assert v.previous_score is not None and v.previous_score >= 0.3
    assert v.since_last_fetch == 1_571_223_477 - 1_539_194_812
    assert v.cluster_id == first.cluster_id
    assert det.store.page_count() == 1
    stored = present(det.page(present(first.page_id)))
    assert stored.digest == fp("nytimes-nikki-haley-2019").digest  # replaced by the latest fetch
    assert stored.first_seen == 1_539_194_812 and stored.fetched_at == 1_571_223_477
    assert (stored.fetches, stored.change_count, stored.last_changed_at) == (2, 1, 1_571_223_477)
    assert stored.change_rate is not None and stored.change_rate > 0 and stored.next_fetch is not None
    assert det.stats()["near"] == 0 and det.stats()["new"] == 1
    assert [(h.changed, h.fetched_at) for h in det.store.versions(present(first.page_id))] == \
        [(None, 1_539_194_812), (True, 1_571_223_477)]


def test_a_changed_version_never_names_its_own_url():
    """Within one run: a later capture of a URL whose content changed is compared with
    the other URLs, never with its own stored version."""
    det = Detector()
    a = det.add(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018"))
    m = det.add("https://mirror.example/haley", html("nytimes-nikki-haley-2019"))
    assert m.status == "near" and m.match_id == a.page_id
    v = det.add(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2019"))
    assert v.version == "changed" and v.match_url != v.url
    assert (v.status, v.match_id) == ("new", None)  # still its cluster's original
    c = det.check("https://mirror.example/haley", html("nytimes-nikki-haley-2022"))
    assert c.version == "changed" and c.match_url != c.url
    assert (c.status, c.match_id) == ("near", a.page_id)  # its first decision, naming the original


def test_readd_totally_different_content_leaves_its_cluster():
    det = Detector()
    a = det.add(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016"))
    b = det.add(url("npr-dylann-roof-2022"), html("npr-dylann-roof-2022"))
    assert b.status == "near" and b.cluster_id == a.cluster_id
    old = present(a.cluster_id)
    # both pages name themselves as canonical: first seen (a) wins
    assert b.canonical_id == a.page_id
    assert cluster_row(det, old) == (a.page_id, 2)

    v = det.add(url("npr-dylann-roof-2016"), html("newyorker-teas-2019"))
    assert v.status == "new"
    assert v.page_id == a.page_id
    assert v.match_id is None
    assert v.cluster_id != old
    assert v.canonical_id == a.page_id
    # the old cluster lost a member and its canonical moved to the remaining page
    assert [p.id for p in det.cluster(old)] == [b.page_id]
    assert cluster_row(det, old) == (b.page_id, 1)
    assert cluster_row(det, present(v.cluster_id)) == (a.page_id, 1)
    assert det.store.cluster_count() == 2
    # and the index follows the new content
    assert det.check(WAYBACK + "teas", html("newyorker-teas-2019")).match_id == a.page_id
    c = det.check(WAYBACK + "npr", html("npr-dylann-roof-2016"))
    assert c.status == "near" and c.match_id == b.page_id


def test_readd_alone_in_cluster_keeps_cluster_id():
    det = Detector()
    a = det.add(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016"))
    v = det.add(url("npr-dylann-roof-2016"), html("politico-student-debt-2022"))
    assert v.status == "new"
    assert v.cluster_id == a.cluster_id
    assert det.store.cluster_count() == 1
    assert cluster_row(det, present(a.cluster_id)) == (a.page_id, 1)


# -- batches ------------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def test_add_many_reports_errors_per_page_and_continues():
    det = Detector()
    pages: list[Page | tuple[str, bytes | str]] = [
        Page(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016")),
        Page("https://img.example/logo.png", PNG),
        Page("not a url", html("newyorker-teas-2019")),
        ("ftp//missing-colon", html("newyorker-teas-2019")),
        Page(url("npr-dylann-roof-2022"), html("npr-dylann-roof-2022")),
        (url("newyorker-teas-2019"), html("newyorker-teas-2019")),
    ]
    verdicts = det.add_many(pages)
    assert [v.status for v in verdicts] == ["new", "error", "error", "error", "near", "new"]
    for v in verdicts[1:4]:
        assert v.error and isinstance(v.error, str)
        assert v.page_id is None and v.cluster_id is None
    assert "binary" in present(verdicts[1].error).lower()
    assert verdicts[1].url == "https://img.example/logo.png"
    assert verdicts[2].url == "not a url"
    assert verdicts[4].match_id == verdicts[0].page_id
    assert det.stats()["pages"] == 3
    assert all(v.error is None for v in (verdicts[0], verdicts[4], verdicts[5]))


def test_add_many_pages_of_one_batch_match_each_other():
    det = Detector()
    verdicts = det.add_many([
        (url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018")),
        (url("npr-dylann-roof-2022"), html("npr-dylann-roof-2022")),
        (url("npr-dylann-roof-2022-mirror"), html("npr-dylann-roof-2022-mirror")),
        (WAYBACK + "nikki", html("nytimes-nikki-haley-2019")),
    ])
    assert [v.status for v in verdicts] == ["new", "new", "exact", "near"]
    assert verdicts[2].match_id == verdicts[1].page_id
    assert verdicts[3].match_id == verdicts[0].page_id
    assert verdicts[3].cluster_id == verdicts[0].cluster_id
    assert det.stats()["clusters"] == 2


def test_add_many_bad_fetched_at_is_a_per_page_error():
    """A page with an unusable fetched_at (e.g. from a JSONL record) is one bad record:
    it must not abort and roll back the rest of the batch."""
    det = Detector()
    verdicts = det.add_many([
        Page(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016")),
        Page(url("newyorker-teas-2019"), html("newyorker-teas-2019"), fetched_at="yesterday"),  # type: ignore[arg-type]
        Page(url("politico-student-debt-2022"), html("politico-student-debt-2022"), priority="high"),  # type: ignore[arg-type]
        Page(url("npr-dylann-roof-2022"), html("npr-dylann-roof-2022")),
    ])
    assert [v.status for v in verdicts] == ["new", "error", "error", "near"]
    assert det.stats()["pages"] == 2


# -- empty pages ---------------------------------------------------------------------------

NAV_ONLY = (b"<html><head><title>Menu</title></head><body><nav><ul>"
            b"<li><a href='/'>Home</a></li><li><a href='/about'>About</a></li>"
            b"<li><a href='/contact'>Contact</a></li></ul></nav></body></html>")


@pytest.mark.parametrize("content", ["three words only", NAV_ONLY], ids=["3-words", "nav-only"])
def test_empty_pages(content):
    det = Detector()
    a = det.add("https://a.example/x", content)
    assert a.status == "empty"
    assert a.page_id is not None
    assert a.cluster_id is None and a.match_id is None
    assert not a.is_duplicate
    b = det.add("https://b.example/x", content)
    assert b.status == "empty"  # never an exact duplicate of another empty page
    assert b.match_id is None and b.cluster_id is None
    assert len(det.index) == 0
    assert det.stats() == {"pages": 2, "clusters": 0, "new": 0, "exact": 0, "near": 0, "partial": 0, "empty": 2,
                           "fetches": 2, "changed_pages": 0}
    # a check of the same content is empty too
    assert det.check("https://c.example/x", content).status == "empty"


def test_page_becoming_empty_leaves_index_and_cluster():
    det = Detector()
    a = det.add(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016"))
    v = det.add(url("npr-dylann-roof-2016"), NAV_ONLY)
    assert v.status == "empty" and v.cluster_id is None
    assert a.page_id not in det.index
    assert det.store.cluster_count() == 0
    assert det.check(WAYBACK + "npr", html("npr-dylann-roof-2016")).status == "new"


# -- persistence ------------------------------------------------------------------------

def test_reopen_restores_everything(tmp_path):
    path = tmp_path / "store.db"
    names = ["npr-dylann-roof-2016", "npr-dylann-roof-2022", "npr-dylann-roof-2022-mirror",
             "nytimes-nikki-haley-2018", "newyorker-teas-2019", "japan-cnet-apple-news-2019"]
    with Detector.open(path, k=4) as det:
        verdicts = {n: det.add(url(n), html(n)) for n in names}
        stats = det.stats()
        n_index = len(det.index)
        c1 = det.check(WAYBACK + "nikki", html("nytimes-nikki-haley-2019"))
        c2 = det.check(WAYBACK + "npr", html("npr-dylann-roof-2022"))
    assert stats["pages"] == len(names)
    with Detector.open(path, k=4, create=False) as det:
        assert det.stats() == stats
        # the index holds one page per SimHash value (the mirror shares its original's)
        assert len(det.index) == n_index == len({v.simhash for v in verdicts.values()})
        assert det.check(WAYBACK + "nikki", html("nytimes-nikki-haley-2019")) == c1
        assert det.check(WAYBACK + "npr", html("npr-dylann-roof-2022")) == c2
        assert c1.match_id == verdicts["nytimes-nikki-haley-2018"].page_id
        assert c2.status == "exact" and c2.match_id == verdicts["npr-dylann-roof-2022"].page_id
        assert det.policy.spec == "rel-canonical,first-seen"
        for n, v in verdicts.items():
            rec = present(det.page(present(v.page_id)))
            assert rec.url == url(n) and rec.digest == v.digest and rec.cluster_id == v.cluster_id
        # and it keeps working: a new recapture joins the restored cluster
        more = det.add(WAYBACK + "nikki", html("nytimes-nikki-haley-2019"))
        assert more.status == "near" and more.cluster_id == verdicts["nytimes-nikki-haley-2018"].cluster_id


def test_two_writers_on_one_store_then_reopen(tmp_path):
    """Two detectors (as two processes would) write to one store in turn; a later open must
    know every stored page, whichever detector closed last."""
    path = tmp_path / "store.db"
    a = Detector.open(path)
    b = Detector.open(path)
    try:
        a.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"))
        x = b.add(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018"))
        b.close()
        a.add(url("politico-student-debt-2022"), html("politico-student-debt-2022"))
    finally:
        a.close()
    with Detector.open(path) as det:
        assert det.stats()["pages"] == 3
        assert len(det.index) == 3
        v = det.check(WAYBACK + "nikki", html("nytimes-nikki-haley-2019"))  # found via the index only
        assert v.status == "near" and v.match_id == x.page_id


def test_reopen_after_store_replaced_without_clean_close(tmp_path):
    """The store file is replaced (restored from a backup, re-created) and the process that
    wrote it died before saving its index: whatever lies next to the store from before must
    not be taken for this store's index."""
    path = tmp_path / "store.db"
    with Detector.open(path) as det:
        det.add(url("nytimes-nikki-haley-2018"), html("nytimes-nikki-haley-2018"))
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    det = Detector.open(path)
    teas = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"))
    det.store.close()  # killed: Detector.close() never ran
    with Detector.open(path) as det:
        assert det.stats()["pages"] == 1
        v = det.check(WAYBACK + "nikki", html("nytimes-nikki-haley-2019"))
        assert v.status == "new", v  # the Nikki Haley article is not in this store
        assert det.check(WAYBACK + "teas", html("newyorker-teas-2019")).match_id == teas.page_id


# -- expiry -------------------------------------------------------------------------------

def test_expire_removes_old_pages_and_updates_clusters(tmp_path):
    now = time.time()
    with Detector.open(tmp_path / "s.db") as det:
        old = det.add(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016"), fetched_at=now - 30 * 86400)
        new = det.add(url("npr-dylann-roof-2022"), html("npr-dylann-roof-2022"), fetched_at=now)
        lone = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"), fetched_at=now - 40 * 86400)
        keep = det.add(url("politico-student-debt-2022"), html("politico-student-debt-2022"))
        assert new.cluster_id == old.cluster_id and new.canonical_id == old.page_id
        assert det.expire(older_than=7 * 86400) == 2
        assert det.page(present(old.page_id)) is None and det.page(present(lone.page_id)) is None
        assert old.page_id not in det.index and lone.page_id not in det.index
        assert len(det.index) == 2
        assert det.page(present(new.page_id)) is not None and det.page(present(keep.page_id)) is not None
        assert cluster_row(det, present(old.cluster_id)) == (new.page_id, 1)
        assert cluster_row(det, present(lone.cluster_id)) is None
        assert det.stats()["pages"] == 2 and det.stats()["clusters"] == 2
        # the expired content is no longer known: its recapture matches the survivor
        c = det.check(WAYBACK + "npr", html("npr-dylann-roof-2016"))
        assert c.status == "near" and c.match_id == new.page_id
        assert det.check(WAYBACK + "teas", html("newyorker-teas-2019")).status == "new"
        assert det.expire(older_than=7 * 86400) == 0
        with pytest.raises(ConfigError):
            det.expire(older_than=-1)
    with Detector.open(tmp_path / "s.db") as det:
        assert det.stats()["pages"] == 2 and len(det.index) == 2


def test_fetched_at_accepts_datetime_and_rejects_garbage():
    from datetime import datetime, timedelta

    det = Detector()
    v = det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"),
                fetched_at=datetime.now(UTC) - timedelta(days=3))
    assert present(det.page(present(v.page_id))).fetched_at < time.time() - 2 * 86400
    with pytest.raises(ConfigError):
        det.add(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016"), fetched_at="yesterday")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        det.add(url("npr-dylann-roof-2016"), html("npr-dylann-roof-2016"), priority="high")  # type: ignore[arg-type]
    assert det.store.page_count() == 1


# -- configuration --------------------------------------------------------------------------

def test_default_k_follows_the_stores_spec_version(tmp_path):
    """k=None: the measured k of the store's fingerprint version (a version-1 store keeps
    the k it was tuned for; verification needs version-2 sketches). A version-3 store with the
    sketch bands (the default) takes k = 3, without them the SimHash-only k = 12."""
    assert Detector().k == DEFAULT_K_BY_VERSION[3] == 3
    assert Detector(settings=DetectorSettings(bands=False)).k == SIMHASH_ONLY_K_BY_VERSION[3] == 12
    old = Detector.open(tmp_path / "v1.db", config=FingerprintConfig(version=1))
    old.add("https://a.example/", " ".join(f"w{i}" for i in range(50)))
    old.close()
    assert Detector.open(tmp_path / "v1.db").k == DEFAULT_K_BY_VERSION[1] == 7


@pytest.mark.parametrize("k", [-1, 65, 1.5, "3", True])
def test_k_validation(k):
    with pytest.raises(ConfigError):
        Detector(k=k)


@pytest.mark.parametrize("k", [0, 64])
def test_k_bounds_accepted(k):
    assert Detector(k=k).k == k


def test_k_validation_128_bits():
    cfg = FingerprintConfig(bits=128)
    assert Detector(k=128, config=cfg).k == 128
    with pytest.raises(ConfigError):
        Detector(k=129, config=cfg)


SHINGLES = FingerprintConfig(features=FeatureConfig(scheme="shingles", ngram=3))


def test_spec_mismatch_on_open(tmp_path):
    path = tmp_path / "sh.db"
    with Detector.open(path, config=SHINGLES) as det:
        det.add(url("newyorker-teas-2019"), html("newyorker-teas-2019"))
    with pytest.raises(SpecMismatchError) as exc:
        Detector.open(path, config=neardup.DEFAULT_CONFIG)
    assert str(path) in str(exc.value)
    assert isinstance(exc.value, neardup.StoreError)
    # config=None: the store's own config
    with Detector.open(path) as det:
        assert det.config == SHINGLES
        assert det.config.spec != neardup.DEFAULT_CONFIG.spec
        v = det.check(url("newyorker-teas-2019-mirror"), html("newyorker-teas-2019-mirror"))
        assert v.status == "exact"
    with Detector.open(path, config=SHINGLES) as det:
        assert det.stats()["pages"] == 1


def test_add_fingerprint_of_another_spec_is_refused():
    det = Detector()
    other = neardup.fingerprint(html("newyorker-teas-2019"), config=SHINGLES)
    with pytest.raises(SpecMismatchError):
        det.add_fingerprint(url("newyorker-teas-2019"), other)
    with pytest.raises(SpecMismatchError):
        det.check_fingerprint(url("newyorker-teas-2019"), other)
    assert det.store.page_count() == 0
    ok = det.add_fingerprint(url("newyorker-teas-2019"), fp("newyorker-teas-2019"))
    assert ok.status == "new"


# -- the match rule: distance <= k ------------------------------------------------------------

def _flip(value: int, nbits: int) -> int:
    """value with nbits bits flipped (every 5th bit from bit 2)."""
    for i in range(nbits):
        value ^= 1 << (5 * i + 2)
    return value


@pytest.mark.parametrize("k", [0, 1, 3, 6, 12])
def test_match_rule_is_distance_at_most_k(k):
    base = fp("politico-morning-money-2022")
    det = Detector(settings=DetectorSettings(k=k, bands=False))  # the SimHash path alone (bands: test_bands.py)
    stored = det.add_fingerprint("https://a.example/base", base)
    assert stored.status == "new"
    at_k = dataclasses.replace(base, simhash=_flip(base.simhash, k), digest="a" * 64)
    beyond = dataclasses.replace(base, simhash=_flip(base.simhash, k + 1), digest="b" * 64)
    assert hamming(base, at_k) == k and hamming(base, beyond) == k + 1
    v = det.check_fingerprint("https://b.example/at-k", at_k)
    assert v.status == "near" and v.distance == k and v.match_id == stored.page_id
    assert det.check_fingerprint("https://c.example/beyond", beyond).status == "new"
    added = det.add_fingerprint("https://b.example/at-k", at_k)
    assert added.status == "near" and added.distance == k and added.cluster_id == stored.cluster_id


def test_exact_digest_wins_over_simhash_distance():
    base = fp("politico-morning-money-2022")
    det = Detector(k=0)
    first = det.add_fingerprint("https://a.example/1", base)
    far = dataclasses.replace(base, simhash=base.simhash ^ ((1 << 64) - 1))  # same digest, distance 64
    v = det.add_fingerprint("https://b.example/1", far)
    assert v.status == "exact" and v.match_id == first.page_id and v.distance == 0


def test_nearest_wins_then_oldest():
    base = fp("politico-morning-money-2022")
    det = Detector(settings=DetectorSettings(k=1, bands=False))
    a = det.add_fingerprint("https://a.example/1", dataclasses.replace(base, simhash=base.simhash ^ 1, digest="1" * 64))
    b = det.add_fingerprint("https://b.example/1", dataclasses.replace(base, simhash=base.simhash ^ 2, digest="2" * 64))
    assert a.status == b.status == "new"  # they are 2 apart
    q = dataclasses.replace(base, digest="3" * 64)  # 1 from each: tie -> oldest
    v = det.check_fingerprint("https://q.example/1", q)
    assert v.status == "near" and v.distance == 1 and v.match_id == a.page_id
    c = det.add_fingerprint("https://c.example/1", dataclasses.replace(base, digest="4" * 64))
    assert c.status == "near" and c.match_id == a.page_id
    # now an exact simhash copy exists: distance 0 beats the older distance-1 page
    v = det.check_fingerprint("https://q.example/1", q)
    assert v.distance == 0 and v.match_id == c.page_id


# -- hostile leftovers (issue 12) ---------------------------------------------------------------

@pytest.mark.parametrize("when", [10**400, -(10**400), float("inf"), "soon", 10**5000],
                         ids=["1e400", "-1e400", "inf", "soon", "1e5000"])
def test_fetched_at_out_of_range_is_a_config_error(when):
    det = Detector()
    text = " ".join(f"word{i}" for i in range(300))
    with pytest.raises(ConfigError, match="fetched_at") as exc:
        det.add("https://a.example/1", text, fetched_at=when)
    assert len(str(exc.value)) < 200
    v = det.add_many([Page("https://a.example/2", text, fetched_at=when), Page("https://a.example/3", text)])
    assert [x.status for x in v] == ["error", "new"]
    assert det.add_fingerprints([("https://a.example/4", det.fingerprint(text), when, None)])[0].status == "error"


@pytest.mark.parametrize("priority", [10**400, -(10**400), float("nan"), "high"],
                         ids=["1e400", "-1e400", "nan", "high"])
def test_priority_out_of_range_is_a_config_error(priority):
    det = Detector()
    with pytest.raises(ConfigError, match="priority"):
        det.add("https://a.example/1", " ".join(f"word{i}" for i in range(300)), priority=priority)
    assert det.store.page_count() == 0


@pytest.mark.parametrize("field", ["title", "canonical_url", "language"])
def test_fingerprint_with_lone_surrogates_is_refused(field):
    det = Detector()
    fp = det.fingerprint(" ".join(f"word{i}" for i in range(300)), url="https://a.example/1")
    bad = dataclasses.replace(fp, **{field: "x\ud800y"})  # type: ignore[arg-type]
    with pytest.raises(neardup.InputError, match=f"{field}.*surrogate"):
        det.add_fingerprint("https://a.example/1", bad)
    with pytest.raises(neardup.InputError, match="surrogate"):
        det.check_fingerprint("https://a.example/1", bad)
    got = det.add_fingerprints([("https://a.example/1", bad), ("https://a.example/2", fp)])
    assert [v.status for v in got] == ["error", "new"] and "surrogate" in (got[0].error or "")
    assert [v.status for v in det.check_fingerprints([("https://a.example/3", bad)])] == ["error"]
    assert det.store.page_count() == 1

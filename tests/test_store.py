"""The store contract (neardup.store.base.Store) on both backends, SQLite and a throwaway
PostgreSQL server (the ``target`` fixture; PostgreSQL skips without its binaries unless
NEARDUP_REQUIRE_PG=1): meta, lookups, all-or-nothing writes, damage in stored values. Then
what only the SQLite file has: schema version, WAL, refusing foreign / newer / corrupt files,
paths, locking."""

from __future__ import annotations

import csv
import gzip
import random
import sqlite3
from functools import cache
from pathlib import Path

import pytest
from checks import STORE_KINDS, damage_simhash, present, store_target
from faults import Boom, explode_on_cluster_update

import neardup
from neardup import Detector, Page, SQLiteStore, Store, StoreError, StoreLockedError
from neardup.detector.settings import DetectorSettings
from neardup.store import backends
from neardup.store import sqlite as store_mod
from neardup.store.base import Lookup
from neardup.store.sql import SQLStore

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"


@pytest.fixture(params=STORE_KINDS)
def target(request, tmp_path) -> str:
    """Where a store lives: an SQLite file, a fresh PostgreSQL database, a key prefix of its
    own on a standalone Redis or on a 3-master Redis Cluster."""
    return store_target(request, tmp_path)


def open_store(target: str, **kwargs) -> Store:
    """The store at ``target`` through the one factory (created when missing, unless ``create=False``)."""
    kwargs.setdefault("create", True)
    return backends.open_store(target, **kwargs)


@cache
def sample() -> dict[str, tuple[str, bytes]]:
    """name -> (url, html bytes) for every page of examples/sample."""
    out = {}
    with open(SAMPLE / "urls.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            name = Path(row["file"]).name.removesuffix(".html.gz")
            out[name] = (row["url"], gzip.decompress((SAMPLE / row["file"]).read_bytes()))
    return out


def page(name: str) -> tuple[str, bytes]:
    return sample()[name]


def filled_store(path: Path) -> dict:
    """A store holding every sample page; returns its stats."""
    with Detector.open(path) as det:
        det.add_many(list(sample().values()))
        return det.stats()


def _sql(path: Path, *statements: str) -> list:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        out = []
        for s in statements:
            out = con.execute(s).fetchall()
        return out
    finally:
        con.close()


# -- schema ---------------------------------------------------------------------------

def test_schema_version_and_wal(tmp_path):
    path = tmp_path / "s.db"
    s = SQLiteStore(path)
    s.close()
    assert _sql(path, "PRAGMA user_version") == [(store_mod.SCHEMA_VERSION,)]
    assert _sql(path, "PRAGMA journal_mode") == [("wal",)]
    tables = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "pages", "clusters"} <= tables


def test_memory_store_is_usable():
    s = SQLiteStore(":memory:")
    assert s.page_count() == 0 and s.cluster_count() == 0
    assert s.get_meta("nothing") is None
    s.set_meta("x", {"a": [1, 2]})
    assert s.get_meta("x") == {"a": [1, 2]}


def test_payload_originals_survive_reopen_and_are_replaced(target):
    """The deduplicated WARC's originals (payload digest -> record id, URI, date): read back
    after a reopen, many at once, a stale one replaced by its successor."""
    s = open_store(target)
    try:
        assert s.payload_originals(["sha1:A"]) == {}
        s.set_payload_originals({f"sha1:{i}": (f"<urn:uuid:{i}>", f"https://a.example/{i}", "2024-05-01T00:00:00Z")
                                 for i in range(700)})
    finally:
        s.close()
    s = open_store(target, create=False)
    try:
        got = s.payload_originals([f"sha1:{i}" for i in range(0, 1400, 2)])
        assert sorted(got) == sorted(f"sha1:{i}" for i in range(0, 700, 2))
        assert got["sha1:4"] == ("<urn:uuid:4>", "https://a.example/4", "2024-05-01T00:00:00Z")
        s.set_payload_originals({"sha1:4": ("<urn:uuid:new>", "https://a.example/4", "2024-06-01T00:00:00Z")})
        assert s.payload_originals(["sha1:4", "sha1:4"]) == {
            "sha1:4": ("<urn:uuid:new>", "https://a.example/4", "2024-06-01T00:00:00Z")}
    finally:
        s.close()


def test_meta_survives_reopen(target):
    path = target
    with Detector.open(path) as det:
        det.add(*page("newyorker-teas-2019"))
        spec = det.config.spec
    s = open_store(path, create=False)
    try:
        assert s.get_meta("spec") == spec
        assert s.get_meta("config")["features"]["scheme"] == "words"
        assert s.page_count() == 1
        recs = list(s.iter_pages())
        assert [r.url for r in recs] == [page("newyorker-teas-2019")[0]]
        ids, words = s.simhashes()
        assert ids.tolist() == [recs[0].id] and int(words[0]) == recs[0].simhash
    finally:
        s.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.db"
    filled = filled_store(path)
    assert filled["pages"] > 0
    _sql(path, f"PRAGMA user_version={store_mod.SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError) as exc:
        SQLiteStore(path)
    assert str(path) in str(exc.value)
    assert "newer" in str(exc.value)
    with pytest.raises(StoreError):
        Detector.open(path)
    # not damaged by the refusal
    assert _sql(path, "PRAGMA user_version") == [(store_mod.SCHEMA_VERSION + 1,)]
    assert _sql(path, "SELECT count(*) FROM pages") == [(filled["pages"],)]


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    _sql(path, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)",
         "INSERT INTO customers(name) VALUES ('x')")
    with pytest.raises(StoreError) as exc:
        Detector.open(path)
    assert str(path) in str(exc.value)
    # left alone
    assert _sql(path, "SELECT name FROM sqlite_master WHERE type='table'") == [("customers",)]
    assert _sql(path, "PRAGMA user_version") == [(0,)]


def test_store_missing_a_table_is_refused(tmp_path):
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    _sql(path, "DROP TABLE clusters")
    with pytest.raises(StoreError) as exc:
        SQLiteStore(path)
    assert "clusters" in str(exc.value)


# -- corrupt files ------------------------------------------------------------------------

def test_random_bytes_file_is_refused(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(random.Random(7).randbytes(64 * 1024))
    with pytest.raises(StoreError) as exc:
        Detector.open(path)
    assert str(path) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with Detector.open(path) as det:
        assert det.add(*page("newyorker-teas-2019")).status == "new"


def _use(path: Path) -> None:
    """Open the store and read and write everything."""
    with Detector.open(path) as det:
        det.stats()
        for _ in det.store.iter_pages():
            pass
        for url, body in sample().values():
            det.check(url, body)
        det.add("https://new.example/teas", page("newyorker-teas-2019")[1])


def test_overwritten_store_raises_store_error(tmp_path):
    path = tmp_path / "s.db"
    filled_store(path)
    assert not Path(str(path) + "-wal").exists() or Path(str(path) + "-wal").stat().st_size == 0
    data = bytearray(path.read_bytes())
    assert len(data) >= 4 * 4096
    rng = random.Random(11)
    start, end = len(data) // 4, 3 * len(data) // 4
    data[start:end] = rng.randbytes(end - start)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as exc:
        _use(path)
    assert str(path) in str(exc.value)


def test_overwritten_header_raises_store_error(tmp_path):
    path = tmp_path / "s.db"
    filled_store(path)
    data = bytearray(path.read_bytes())
    data[0:100] = random.Random(3).randbytes(100)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as exc:
        _use(path)
    assert str(path) in str(exc.value)


# -- paths --------------------------------------------------------------------------------

def test_missing_file_without_create(tmp_path):
    path = tmp_path / "absent.db"
    with pytest.raises(StoreError) as exc:
        Detector.open(path, create=False)
    assert str(path) in str(exc.value)
    assert not path.exists()


def test_directory_path_is_refused(tmp_path):
    with pytest.raises(StoreError) as exc:
        Detector.open(tmp_path)
    assert str(tmp_path) in str(exc.value)


def test_missing_parent_folder(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "s.db"
    with pytest.raises(StoreError):
        Detector.open(path)
    assert not path.parent.exists()


# -- locking -------------------------------------------------------------------------------

def test_locked_store_raises_store_locked_error(tmp_path):
    path = tmp_path / "s.db"
    with Detector.open(path) as det:
        det.add(*page("npr-dylann-roof-2016"))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        det = Detector.open(path, timeout=0.2)
        try:
            with pytest.raises(StoreLockedError) as exc:
                det.add(*page("newyorker-teas-2019"))
            assert str(path) in str(exc.value)
            assert isinstance(exc.value, StoreError)
            with pytest.raises(StoreLockedError):
                det.add_many([page("politico-student-debt-2022")])
            # reading still works in WAL mode
            v = det.check(*page("npr-dylann-roof-2022"))
            assert v.status == "near"
            other.execute("ROLLBACK")
            # usable again once the lock is gone
            assert det.add(*page("newyorker-teas-2019")).status == "new"
            assert det.store.page_count() == 2
        finally:
            det.close()
    finally:
        other.close()


# -- all or nothing ---------------------------------------------------------------------------

def test_failed_add_writes_nothing(target, monkeypatch):
    path = target
    with Detector.open(path) as det:
        det.add(*page("npr-dylann-roof-2016"))
        before = (det.stats(), det.store.page_count(), det.store.cluster_count())
        with monkeypatch.context() as m:
            explode_on_cluster_update(det, m)
            with pytest.raises(Boom):
                det.add(*page("newyorker-teas-2019"))
            with pytest.raises(Boom):
                det.add(*page("npr-dylann-roof-2022"))
            with pytest.raises(Boom):
                det.add_many([page("politico-student-debt-2022"), page("nytimes-nikki-haley-2018")])
        assert (det.stats(), det.store.page_count(), det.store.cluster_count()) == before
        assert det.store.page_by_url(page("newyorker-teas-2019")[0]) is None
        # the store is still writable afterwards
        assert det.add(*page("newyorker-teas-2019")).status == "new"
    with Detector.open(path) as det:
        assert det.store.page_count() == 2


def test_refused_batch_leaves_store_and_index_in_step(target):
    """Whatever add_many does with a record it cannot use (here a bad fetched_at), the store
    and the in-memory index must agree afterwards, and with a fresh reopen."""
    path = target
    with Detector.open(path) as det:
        try:
            det.add_many([page("politico-student-debt-2022"),
                          Page("https://x.example/a", page("newyorker-teas-2019")[1],
                               fetched_at="soon")])  # type: ignore[arg-type]
        except StoreError:  # pragma: no cover
            raise
        except Exception:
            pass  # refused as a whole: acceptable, as long as nothing is left behind
        stored = det.store.page_count()
        assert len(det.index) == stored
        live = det.check("https://y.example/debt", page("politico-student-debt-2022")[1])
        assert live.status == ("exact" if stored else "new")
    with Detector.open(path) as det:
        assert len(det.index) == stored
        assert det.check("https://y.example/debt", page("politico-student-debt-2022")[1]) == live


def test_failed_add_leaves_the_index_consistent(target, monkeypatch):
    """A rolled-back write must not leave the rolled-back content in the in-memory index."""
    det = Detector.open(target)
    first = det.add(*page("nytimes-nikki-haley-2018"))
    with monkeypatch.context() as m:
        explode_on_cluster_update(det, m)
        # re-fetch of the same URL with other content, rolled back
        with pytest.raises(Boom):
            det.add(page("nytimes-nikki-haley-2018")[0], page("newyorker-teas-2019")[1])
        # a brand new page, rolled back
        with pytest.raises(Boom):
            det.add(*page("politico-student-debt-2022"))
    assert det.store.page_count() == 1
    assert present(det.page(present(first.page_id))).digest == first.digest
    # the stored page still has the Nikki Haley article: teas is not a duplicate of it
    v = det.check("https://other.example/teas", page("newyorker-teas-2019")[1])
    assert v.status == "new", v
    # and the Nikki Haley recapture still finds the stored page
    c = det.check("https://other.example/nikki", page("nytimes-nikki-haley-2019")[1])
    assert c.status == "near" and c.match_id == first.page_id
    assert len(det.index) == det.store.page_count()
    assert det.check("https://other.example/debt", page("politico-student-debt-2022")[1]).status == "new"
    det.close()


def test_failed_add_then_reopen_is_consistent(target, monkeypatch):
    """A rolled-back write followed by good ones and a clean close: the next open must not
    inherit index entries of the rolled-back content."""
    path = target
    with Detector.open(path) as det:
        first = det.add(*page("nytimes-nikki-haley-2018"))
        with monkeypatch.context() as m:
            explode_on_cluster_update(det, m)
            with pytest.raises(Boom):
                det.add(page("nytimes-nikki-haley-2018")[0], page("newyorker-teas-2019")[1])
        det.add(*page("politico-student-debt-2022"))
    with Detector.open(path) as det:
        assert det.store.page_count() == 2
        assert present(det.page(present(first.page_id))).digest == first.digest
        assert det.check("https://other.example/teas", page("newyorker-teas-2019")[1]).status == "new"
        c = det.check("https://other.example/nikki", page("nytimes-nikki-haley-2019")[1])
        assert c.status == "near" and c.match_id == first.page_id


# -- the saved index next to the store -------------------------------------------------------

def _damage_manifest_garbage(root: Path) -> None:
    (root / "manifest.json").write_bytes(random.Random(1).randbytes(300))


def _damage_manifest_not_object(root: Path) -> None:
    (root / "manifest.json").write_text("[]")


def _damage_manifest_missing(root: Path) -> None:
    (root / "manifest.json").unlink()


def _damage_npy_truncated(root: Path) -> None:
    for f in sorted(root.glob("*.npy")):
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])


def _damage_npy_deleted(root: Path) -> None:
    for f in sorted(root.glob("*.npy")):
        f.unlink()


@pytest.mark.parametrize("damage", [_damage_manifest_garbage, _damage_manifest_not_object,
                                    _damage_manifest_missing, _damage_npy_truncated, _damage_npy_deleted],
                         ids=lambda f: f.__name__.removeprefix("_damage_"))
def test_damaged_saved_index_is_rebuilt(tmp_path, damage):
    """The index saved next to the store is a cache: damage to it must never stop the store
    from opening nor lose matches."""
    path = tmp_path / "s.db"
    with Detector.open(path) as det:
        first = det.add(*page("nytimes-nikki-haley-2018"))
        det.add(*page("newyorker-teas-2019"))
    root = Path(str(path) + ".index")
    if not root.exists():
        pytest.skip("this detector saves no index next to the store")
    damage(root)
    with Detector.open(path) as det:
        assert len(det.index) == 2
        c = det.check("https://other.example/nikki", page("nytimes-nikki-haley-2019")[1])
        assert c.status == "near" and c.match_id == first.page_id
        det.add(*page("politico-student-debt-2022"))
    with Detector.open(path) as det:
        assert len(det.index) == 3


def test_reopen_with_larger_k_finds_farther_matches(target):
    """A store written at k and reopened at a larger k must find pairs between the two (a
    saved index built for the smaller k cannot be reused as is)."""
    base = page("nytimes-nikki-haley-2019")
    fp_base = neardup.fingerprint(base[1], url=base[0])
    words = fp_base.text.split()
    far = None
    for cut in range(5, len(words) // 2, 5):  # shorten the article until it is >= 6 bits away
        text = " ".join(words[:-cut])
        d = neardup.hamming(fp_base, neardup.fingerprint(text))
        if 6 <= d <= 12:
            far = (text, d)
            break
    assert far is not None
    text, d = far
    path = target
    # the SimHash tables alone (the sketch bands would bring the pair at any k)
    def opened(k: int) -> Detector:
        return Detector.open(path, settings=DetectorSettings(k=k, bands=False))

    with opened(d - 1) as det:
        stored = det.add(*base)
        assert det.check("https://other.example/nikki", text).status == "new"
    with opened(d) as det:
        c = det.check("https://other.example/nikki", text)
        assert c.status == "near" and c.distance == d and c.match_id == stored.page_id
    with opened(d - 1) as det:
        assert det.check("https://other.example/nikki", text).status == "new"
    with opened(0) as det:
        assert det.check("https://other.example/nikki", text).status == "new"
        again = det.check(*base)  # the stored URL itself: a version of it, never its own duplicate
        assert (again.status, again.version, again.page_id) == ("new", "unchanged", stored.page_id)


# -- the contract, on both backends ------------------------------------------------------------

def test_store_contract(target):
    with Detector.open(target) as det:
        v = det.add("https://a.example/1", " ".join(f"w{i}" for i in range(300)), fetched_at=1000.0, priority=2)
        rec = present(det.page(present(v.page_id)))
        assert rec.url == "https://a.example/1" and rec.fetched_at == 1000.0 and rec.priority == 2.0
        assert det.store.get_meta("spec") == det.config.spec
        first, last = det.store.change_bounds()
        assert last >= first >= 1 and det.store.change_count() == last - first + 1
        # lookup: bounds, the page at the URL, the page with the digest (the URL's own first)
        w = det.add("https://b.example/2", " ".join(f"w{i}" for i in range(300)), fetched_at=1001.0)
        assert w.status == "exact"
        rec_b = present(det.page(present(w.page_id)))
        got = det.store.lookup("https://b.example/2", rec.digest)
        assert isinstance(got, Lookup) and (got.first, got.last) == det.store.change_bounds()
        assert got.own == rec_b and got.same == rec_b  # prefers the page at the URL itself
        none = det.store.lookup("https://nowhere.example/", None)
        assert (none.own, none.same) == (None, None)
        assert det.store.lookup("https://nowhere.example/", rec.digest).same == rec  # else the oldest
        det.store.lookup("https://x.example/'; DROP TABLE pages; --", "zz")  # parameters, not SQL
        assert det.store.pages_by_ids([present(rec.id), present(rec_b.id), 10**9]) == {rec.id: rec, rec_b.id: rec_b}
        assert det.store.lowest_live(rec.simhash, 64) == rec.id
        assert det.store.member(present(rec.id)) == (rec.id, rec.url, rec.first_seen, None, 2.0)
        assert det.store.status_counts() == {"new": 1, "exact": 1}
        assert det.store.host_stats("b.example") == {"exact": 1}
        assert [r.url for r in det.store.iter_pages(batch=1)] == ["https://a.example/1", "https://b.example/2"]
        cid = present(v.cluster_id)
        assert det.store.cluster_ids() == [cid] and det.store.cluster_count() == 1
        assert {r.id for r in det.store.cluster_members(cid)} == {rec.id, rec_b.id}
        assert [len(b) for b in det.store.member_batches(cid, batch=1)] == [1, 1]
        row = present(det.store.cluster_row(cid))
        assert (row.size, row.joins, row.canonical_id) == (2, 2, det.store.cluster_canonical(cid))
        with det.store.transaction():
            det.store.add_link(cid, "https://c.example/", 2)
            det.store.add_link(cid, "https://c.example/", -1)
        assert det.store.link_counts(cid, ["https://c.example/", "https://d.example/"]) == {"https://c.example/": 1}
        assert det.store.named_links(cid) == {"https://c.example/"}
        with det.store.snapshot(), det.store.reading():
            assert det.store.page_by_url(rec.url) == rec
        assert det.stats()["pages"] == 2
        assert det.expire(older_than=60) == 2
        assert det.stats()["pages"] == 0 and len(det.index) == 0


def test_the_contract_declares_everything_the_library_calls():
    """Every store method the Detector, the index mirror and the service call is declared
    (abstract, but for the hints a store may ignore) on the Store contract, and SQLStore
    leaves only its plumbing abstract."""
    import re

    src = Path(neardup.__file__).parent
    called = set()
    modules = ["detector/core.py", "detector/expiry.py", "detector/mirror.py", "cli/common.py", "cli/pages.py",
               "cli/store.py", "detector/clusters.py", "crawl/schedule.py", "crawl/signals.py", "detector/versions.py",
               "detector/thresholds.py", "detector/decide.py", "detector/settings.py", "report/export.py",
               *(f"service/{p.name}" for p in sorted((src / "service").glob("*.py")))]
    for name in modules:
        called |= set(re.findall(r"\bstore\.([a-z]\w*)\(", (src / name).read_text()))
    declared = {n for n in dir(Store) if not n.startswith("_")}
    assert called and called <= declared, called - declared
    assert Store.__abstractmethods__ >= called - {"reading", "prefetch"}  # hints: no-ops by default
    assert SQLStore.__abstractmethods__ == {"_statement", "_statements", "_buffer", "_set_buffer", "_last_ids",
                                            "transaction", "snapshot", "close"}


@pytest.mark.parametrize("blob", [b"\x01\x02\x03", b"", bytes(9), bytes(16)], ids=["3", "0", "9", "16"])
def test_a_stored_simhash_of_the_wrong_width_is_a_store_error(target, blob):
    with Detector.open(target) as det:
        v = det.add("https://a.example/1", " ".join(f"w{i}" for i in range(300)))
        damage_simhash(det.store, present(v.page_id), blob)
        for read in (lambda: det.page(present(v.page_id)), lambda: det.store.simhashes(),
                     lambda: det.check("https://a.example/1", "other words " * 50),
                     lambda: list(det.store.iter_pages())):
            with pytest.raises(StoreError, match="damaged.*SimHash of") as exc:
                read()
            assert "\n" not in str(exc.value)
    with pytest.raises(StoreError, match="damaged"):  # at open (an index rebuild) or at the read
        with Detector.open(target) as det:
            det.check("https://a.example/1", "other words " * 50)


def test_change_log_rows_stay_bounded(target):
    """50 re-adds of one page, new content each time, on both backends: the log keeps its
    last ``keep_changes`` entries (before: 99 rows)."""
    with Detector.open(target, keep_changes=10) as det:
        for i in range(50):
            det.add("https://a.example/1", " ".join(f"r{i}w{j}" for j in range(300)))
        assert det.store.change_count() <= 10 + 2 + 2
        assert len(det.index) == 1
    with Detector.open(target) as det:
        assert det.check("https://b.example/", " ".join(f"r49w{j}" for j in range(300))).status == "exact"

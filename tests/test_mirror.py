"""The index mirror (neardup.detector.mirror): replay of the change log, undo on rollback, the log
kept bounded, the saved index (both index kinds) and what is logged when it cannot be used."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from faults import Boom

from neardup import BruteForceIndex, Detector, FingerprintConfig, HammingIndex
from neardup.detector.mirror import IndexMirror
from neardup.errors import ConfigError, StoreError
from neardup.store.base import PageRecord
from neardup.store.sqlite import SQLiteStore


def text(seed: int, n: int = 300) -> str:
    return " ".join(f"s{seed}w{i}" for i in range(n))


def record(url: str, simhash: int, pid: int | None = None) -> PageRecord:
    return PageRecord(url=url, host="a.example", first_seen=1.0, fetched_at=1.0, digest=url, simhash=simhash,
                      spec="x", length=1, title=None, canonical_link=None, language=None, status="new", id=pid)


def rows(store) -> int:
    return store.change_count()


# -- replay and undo --------------------------------------------------------------------------

def test_two_mirrors_of_one_store_stay_in_step(tmp_path):
    path = tmp_path / "s.db"
    a_store, b_store = SQLiteStore(path), SQLiteStore(path)
    a = IndexMirror(a_store, bits=64, k=3, index=BruteForceIndex())
    b = IndexMirror(b_store, bits=64, k=3, index=BruteForceIndex())
    assert a.store_id == b.store_id
    with a.writing():
        rec = record("https://a.example/1", 0xFF)
        rec.id = a_store.insert_page(rec, 64)
        a.reconcile({0xFF}, {}, rec)
    assert a.search(0xFF, 0) == [(rec.id, 0)] and b.search(0xFF, 0) == []
    b.sync()
    assert b.search(0xFE, 1) == [(rec.id, 1)] and b.seq == a.seq
    with a.writing():
        a_store.delete_pages([rec.id])
        a.reconcile({0xFF}, {rec.id: rec})
    b.sync((0, a.seq))
    assert len(a.index) == len(b.index) == 0
    a_store.close()
    b_store.close()


def test_a_failed_write_undoes_the_index_changes():
    store = SQLiteStore(":memory:")
    m = IndexMirror(store, bits=64, k=3, index=BruteForceIndex())
    with pytest.raises(Boom):
        with m.writing():
            rec = record("https://a.example/1", 0xF0)
            rec.id = store.insert_page(rec, 64)
            m.reconcile({0xF0}, {}, rec)
            assert len(m.index) == 1
            raise Boom("after the index changed")
    assert len(m.index) == 0 and store.page_count() == 0 and m.seq == 0 and rows(store) == 0


def test_bad_arguments():
    with pytest.raises(ConfigError, match="keep_changes"):
        IndexMirror(SQLiteStore(":memory:"), bits=64, k=3, keep_changes=0)
    with pytest.raises(ConfigError, match="128-bit"):
        IndexMirror(SQLiteStore(":memory:"), bits=64, k=3, index=BruteForceIndex(128))


# -- the change log stays bounded --------------------------------------------------------------

def test_re_adding_the_same_page_logs_nothing():
    """An unchanged re-fetch logged a remove and an add every time (99 rows after 50 re-adds)."""
    det = Detector()
    for _ in range(50):
        det.add("https://a.example/1", text(1))
    assert rows(det.store) == 1 and len(det.index) == 1


@pytest.mark.parametrize("method", ["simhash", "both"])
def test_change_log_is_pruned_to_its_last_entries(method):
    """50 re-adds of one page with new content each time: the log keeps its last
    ``keep_changes`` entries (plus at most a quarter of that and one write's entries)."""
    det = Detector(keep_changes=8, method=method)
    most = 0
    for i in range(50):
        det.add("https://a.example/1", text(i))
        most = max(most, rows(det.store))
    assert most <= 8 + 2 + 2
    first, last = det.store.change_bounds()
    assert last - first + 1 == rows(det.store) and last >= 99  # two entries per changed re-add
    assert det.check("https://b.example/", text(49)).status == "exact"
    assert det.check("https://b.example/", text(48)).status == "new"


def test_default_keeps_the_log_unpruned_below_its_size():
    det = Detector()
    for i in range(20):
        det.add("https://a.example/1", text(i))
    assert rows(det.store) == 39


def test_a_process_behind_the_pruned_log_rebuilds(tmp_path):
    path = tmp_path / "s.db"
    behind = Detector.open(path, keep_changes=4)
    with Detector.open(path, keep_changes=4) as writer:
        for i in range(30):
            writer.add(f"https://a.example/{i % 3}", text(i))
        assert rows(writer.store) <= 4 + 1 + 2
    assert behind.store.change_bounds()[0] > behind.mirror.seq + 1  # its entries are gone
    for i in range(27, 30):
        v = behind.check("https://b.example/", text(i))
        assert v.status == "exact" and v.match_url == f"https://a.example/{i % 3}"
    assert behind.check("https://b.example/", text(3)).status == "new"  # replaced long ago
    assert len(behind.index) == 3
    behind.close()


# -- the saved index ---------------------------------------------------------------------------

def test_a_128_bit_store_saves_and_reopens_its_brute_force_index(tmp_path):
    path = tmp_path / "s.db"
    config = FingerprintConfig(bits=128)
    with Detector.open(path, config=config) as det:
        det.add("https://a.example/1", text(1))
        det.add("https://a.example/2", text(2))
        assert isinstance(det.index, BruteForceIndex)
    assert (Path(str(path) + ".index") / "fps.npy").exists()
    with Detector.open(path) as det:
        assert isinstance(det.index, BruteForceIndex)
        assert det.index.path is not None and det.mirror.saved_token == det.mirror.token  # not rebuilt
        assert det.check("https://b.example/", text(2)).status == "exact"
        det.add("https://a.example/3", text(3))
    with Detector.open(path) as det:
        assert len(det.index) == 3


def test_a_damaged_saved_index_is_logged_and_rebuilt(tmp_path, caplog):
    path = tmp_path / "s.db"
    with Detector.open(path) as det:
        det.add("https://a.example/1", text(1))
    (Path(str(path) + ".index") / "manifest.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="neardup"):
        with Detector.open(path) as det:
            assert len(det.index) == 1
    assert any("unusable" in r.getMessage() and r.name == "neardup" for r in caplog.records)


def test_a_failed_save_is_logged_and_the_store_still_closes(tmp_path, caplog, monkeypatch):
    path = tmp_path / "s.db"
    det = Detector.open(path)
    det.add("https://a.example/1", text(1))

    def refuse(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(det.index, "save", refuse)
    with caplog.at_level(logging.WARNING, logger="neardup"):
        det.close()
    assert any("could not save" in r.getMessage() and "disk full" in r.getMessage() for r in caplog.records)
    with pytest.raises(StoreError):
        det.store.page_count()  # closed
    with Detector.open(path) as again:  # rebuilt from the store
        assert again.check("https://b.example/", text(1)).status == "exact"


def test_brute_force_open_refuses_damage(tmp_path):
    idx = BruteForceIndex()
    idx.add_many([1, 2], [5, 6])
    idx.save(tmp_path, token="t")
    assert BruteForceIndex.open(tmp_path).items() == [(1, 5), (2, 6)]
    np.save(tmp_path / "ids.npy", np.array([1, 1], dtype=np.int64))
    with pytest.raises(StoreError, match="repeated ids"):
        BruteForceIndex.open(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(StoreError, match="missing or damaged"):
        BruteForceIndex.open(tmp_path)


class _Plain:
    """A caller's own index: the protocol only, no save, no empty_like."""

    bits = 64

    def __init__(self) -> None:
        self.inner = BruteForceIndex()

    def add(self, id, simhash):
        self.inner.add(id, simhash)

    def add_many(self, ids, simhashes):
        self.inner.add_many(ids, simhashes)

    def remove(self, id, simhash=None):
        return self.inner.remove(id, simhash)

    def search(self, simhash, k):
        return self.inner.search(simhash, k)

    def search_batch(self, simhashes, k):
        return self.inner.search_batch(simhashes, k)

    def __len__(self):
        return len(self.inner)

    def __contains__(self, id):
        return id in self.inner


def test_a_callers_index_without_the_optional_methods(tmp_path):
    plain: HammingIndex = _Plain()
    path = tmp_path / "s.db"
    behind = Detector.open(path, index=_Plain(), keep_changes=2)
    with Detector.open(path, index=plain, keep_changes=2) as det:
        for i in range(10):
            det.add(f"https://a.example/{i}", text(i))
    assert not Path(str(path) + ".index").exists()  # nothing to save with
    assert behind.check("https://b.example/", text(9)).status == "exact"  # rebuilt: a fresh _Plain
    assert isinstance(behind.index, _Plain) and len(behind.index) == 10
    behind.close()

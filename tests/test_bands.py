"""The sketch-band candidate index (neardup.index.bands): exact against a brute-force scan of its
rule, never losing a page the sketch accepts through a shared band, deletes, levels, saved
and reopened memory-mapped; kept by the index mirror; used by the Detector."""

from __future__ import annotations

import random

import numpy as np
import pytest
from checks import present

from neardup import Detector
from neardup.detector.mirror import IndexMirror
from neardup.errors import ConfigError, StoreError
from neardup.fingerprint.core import fingerprint_text
from neardup.index.bands import (
    BINS,
    FAR_VERIFY,
    BandIndex,
    brute_force,
    far_verify,
    keys_of,
    need,
    nibble_agreement,
    nibble_threshold,
    nibbles_of,
    sketch_bins,
)
from neardup.sketch import similarity
from neardup.store.sqlite import SQLiteStore


def sketches(n: int, seed: int = 0, copies: int = 0, change: int = 24) -> list[bytes]:
    """``n`` random sketches, then ``copies`` near copies of random ones (``change`` bins redrawn)."""
    rng = np.random.default_rng(seed)
    out = [(100).to_bytes(4, "little") + rng.integers(0, 256, BINS, dtype=np.uint8).tobytes() for _ in range(n)]
    for i in rng.integers(0, n, copies).tolist():
        b = bytearray(out[i])
        for j in rng.choice(BINS, change, replace=False).tolist():
            b[4 + j] = int(rng.integers(0, 256))
        out.append(bytes(b))
    return out


def test_need_matches_the_sketch_estimate():
    one = (9).to_bytes(4, "little") + bytes(range(60))
    for agree in range(61):
        other = (9).to_bytes(4, "little") + bytes(range(agree)) + bytes(200 for _ in range(60 - agree))
        est = similarity(one, other).jaccard
        for v in (0.2, 0.3, 0.33, 0.5):
            assert (est >= v) == (agree >= need(v))
    assert nibble_threshold(0.3) == need(0.3) - 4
    assert far_verify(None) is None and far_verify(0.1) == FAR_VERIFY and far_verify(0.5) == 0.5


def test_nibbles_and_keys():
    bins = np.arange(120, dtype=np.uint8).reshape(2, 60)
    assert keys_of(bins, 2).tolist() == [[0 | 1 << 8, 2 | 3 << 8], [60 | 61 << 8, 62 | 63 << 8]]
    nib = nibbles_of(bins)
    assert nib.shape == (2, 7) and int(nib[0, 0]) == 0x76543210
    assert nibble_agreement(nib, nib[0]).tolist() == [56, 0]
    with pytest.raises(ConfigError):
        sketch_bins([b"short"])


@pytest.mark.parametrize("delta_limit", [1, 50, 100_000])
def test_search_is_exact_against_brute_force(delta_limit):
    data = sketches(3000, seed=1, copies=600)
    ids = list(range(1, len(data) + 1))
    idx = BandIndex(delta_limit=delta_limit)
    for lo in range(0, len(data), 250):
        idx.add_many(ids[lo:lo + 250], data[lo:lo + 250])
    assert len(idx) == len(data)
    for q in random.Random(2).sample(data, 150):
        for v in (0.3, 0.5):
            assert idx.search(q, v) == brute_force(q, ids, data, v)


def test_small_levels_key_on_fewer_bits_and_stay_exact(monkeypatch):
    import neardup.index.bands as bands

    monkeypatch.setattr(bands, "_FULL_DIRECTORY", 64)  # levels over 64 pages get the full 16-bit directory
    data = sketches(400, seed=3, copies=200)
    ids = list(range(len(data)))
    idx = BandIndex(delta_limit=40)
    idx.add_many(ids, data)
    idx.compact()
    assert idx._levels[0].d == 16
    for q in data[::7]:
        assert idx.search(q) == brute_force(q, ids, data)


def test_every_page_the_sketch_accepts_through_a_band_is_found():
    data = sketches(2000, seed=4, copies=1500, change=30)
    ids = list(range(len(data)))
    idx = BandIndex()
    idx.add_many(ids, data)
    bins = sketch_bins(data)
    keys = keys_of(bins)
    for qi in range(0, len(data), 11):
        found = {i for i, _ in idx.search(data[qi])}
        agree = np.count_nonzero(bins == bins[qi], axis=1)
        shared = np.any(keys == keys[qi], axis=1)
        wanted = set(np.flatnonzero(shared & (agree >= need(0.3))).tolist())
        assert wanted <= found
        assert qi in found


def test_deletes_with_and_without_the_sketch_and_re_adds():
    data = sketches(1500, seed=5, copies=300)
    ids = list(range(1, len(data) + 1))
    idx = BandIndex(delta_limit=200)
    idx.add_many(ids, data)
    gone = set(range(1, len(data), 5))
    for i in sorted(gone):
        assert idx.remove(i, data[i - 1] if i % 2 else None)
    assert not idx.remove(1) and not idx.remove(10**12)
    live = [(i, s) for i, s in zip(ids, data) if i not in gone]
    assert len(idx) == len(live) and 1 not in idx and 2 in idx
    for q in data[::13]:
        assert idx.search(q) == brute_force(q, [i for i, _ in live], [s for _, s in live])
    idx.add(1, data[0])  # a deleted id comes back (under a new row)
    assert 1 in idx and (1, 56) in idx.search(data[0])
    idx.compact()
    assert idx.levels == [len(live) + 1] and idx._levels[0].dead is None


def test_a_batch_of_deletes_is_the_same_deletes_one_by_one():
    """remove_many over levels and the delta: with the stored sketch, another page's sketch
    (found by the scan), no sketch, ids not stored and an id twice; the index is then the
    one-by-one one, checked against brute force."""
    data = sketches(1500, seed=8, copies=300)
    ids = list(range(1, len(data) + 1))
    batch, single = BandIndex(delta_limit=200), BandIndex(delta_limit=200)
    for idx in (batch, single):
        idx.add_many(ids[:1700], data[:1700])
        idx.add_many(ids[1700:], data[1700:])  # the last ones in the delta
    assert batch._delta_ids.shape[0] > 0 and batch._levels
    gone = sorted(set(range(1, len(data) + 1, 4)) | {1790, 1795})
    given: list[bytes | None] = [data[i - 1] if i % 3 == 0 else (data[i] if i % 3 == 1 else None) for i in gone]
    found = batch.remove_many([*gone, 10**9, gone[0]], [*given, data[0], None])
    assert found.tolist() == [True] * len(gone) + [False, False]
    for i, sketch in zip(gone, given):
        assert single.remove(i, sketch)
    live = [(i, s) for i, s in zip(ids, data) if i not in set(gone)]
    assert len(batch) == len(single) == len(live) and gone[1] not in batch
    for q in data[::9]:
        assert batch.search(q) == single.search(q) == brute_force(q, [i for i, _ in live], [s for _, s in live])
    assert not batch.remove_many([], []).shape[0]


def test_saved_and_reopened_memory_mapped(tmp_path):
    data = sketches(1200, seed=6, copies=300)
    ids = list(range(len(data)))
    idx = BandIndex(delta_limit=256)
    idx.add_many(ids, data)
    idx.remove(3, data[3])
    idx.save(tmp_path / "b", token="t1")
    back = BandIndex.open(tmp_path / "b")
    assert back.token == "t1" and len(back) == len(idx) and isinstance(back._levels[0].nib, np.memmap)
    for q in data[::17]:
        assert back.search(q) == idx.search(q)
    back.add(5000, data[0])  # writes after a memory-mapped open go to the delta / new levels
    back.remove(4)
    back.save(tmp_path / "b", token="t2")
    again = BandIndex.open(tmp_path / "b", mmap=False)
    assert again.token == "t2" and 4 not in again and 5000 in again
    (tmp_path / "b" / "manifest.json").write_text("[]")
    with pytest.raises(StoreError, match="damaged|format"):
        BandIndex.open(tmp_path / "b")


def test_bytes_per_page_at_scale():
    rng = np.random.default_rng(7)
    n = 300_000
    idx = BandIndex()
    idx.add_many(np.arange(n), rng.integers(0, 256, (n, 64), dtype=np.uint8))
    assert idx.levels == [n]
    # 8 bands x 4 bytes + 28 bytes of nibbles + 4 bytes of id, the 2 MB directory and the delta's room
    assert 64 <= idx.nbytes() / n <= 64 + (8 * 65537 * 4 + 4096 * (8 + 16 + 28)) / n + 0.01


def test_bad_arguments():
    with pytest.raises(ConfigError):
        BandIndex(bands=0)
    with pytest.raises(ConfigError):
        BandIndex(verify=1.5)
    with pytest.raises(ConfigError, match="differ"):
        BandIndex().add_many([1, 2], sketches(1))


# -- mirror and Detector ---------------------------------------------------------------------

def far_pair() -> tuple[str, str]:
    """Two texts sharing 72% of their words in order (a word 3-shingle Jaccard of 0.56: more than
    half their text, one document): SimHash distance 18, sketch 0.53, a shared band."""
    r = random.Random(5)
    words = [f"w{i}" for i in range(5000)]
    a = [r.choice(words) for _ in range(250)]
    b = a[:180] + [r.choice(words) for _ in range(70)]
    return " ".join(a), " ".join(b)


def test_the_detector_finds_a_near_copy_beyond_k():
    a, b = far_pair()
    fa, fb = fingerprint_text(a), fingerprint_text(b)
    assert (fa.simhash ^ fb.simhash).bit_count() == 18
    assert similarity(present(fa.sketch), present(fb.sketch)).jaccard >= FAR_VERIFY
    det = Detector()
    assert det.add("https://a.example/1", a).status == "new"
    v = det.check("https://b.example/2", b)
    assert v.status == "near" and v.distance == 18 and present(v.score) >= FAR_VERIFY
    plain = Detector(k=12)
    plain.mirror.bands = None  # without the band index the SimHash tables at k = 12 miss it
    plain.add("https://a.example/1", a)
    assert plain.check("https://b.example/2", b).status == "new"


def test_far_candidates_need_the_far_threshold():
    a, _ = far_pair()
    other = " ".join(f"x{i}" for i in range(300))
    det = Detector()
    det.add("https://a.example/1", a)
    assert det.check("https://b.example/2", other).status == "new"


def test_the_mirror_keeps_bands_in_step_and_saves_them(tmp_path):
    a, b = far_pair()
    path = tmp_path / "s.db"
    det = Detector(store=SQLiteStore(path))
    det.add("https://a.example/1", a)
    other = Detector(store=SQLiteStore(path))  # a second process: replays the log
    assert len(present(other.mirror.bands)) == 1
    det.add("https://a.example/3", " ".join(f"y{i}" for i in range(300)))
    assert other.check("https://b.example/2", b).status == "near"
    assert len(present(other.mirror.bands)) == 2
    det.mirror.save()
    assert (tmp_path / "s.db.index" / "bands" / "manifest.json").exists()
    det.store.close()
    reopened = Detector(store=SQLiteStore(path))
    assert reopened.mirror.saved_token is not None and len(present(reopened.mirror.bands)) == 2
    assert reopened.check("https://b.example/2", b).status == "near"
    store = SQLiteStore(":memory:")
    assert IndexMirror(store, bits=64, k=3, bands=False).bands is None


def test_a_failed_write_undoes_the_band_changes():
    from faults import Boom

    a, b = far_pair()
    det = Detector()
    det.add("https://a.example/1", a)
    assert len(present(det.mirror.bands)) == 1
    with pytest.raises(Boom):
        with det.mirror.writing():
            det.add("https://c.example/1", " ".join(f"z{i}" for i in range(300)))
            assert len(present(det.mirror.bands)) == 2
            raise Boom("after the index changed")
    assert len(present(det.mirror.bands)) == 1 and det.store.page_count() == 1
    assert det.check("https://b.example/2", b).status == "near"


def test_a_changed_page_moves_in_the_band_index():
    a, b = far_pair()
    det = Detector()
    det.add("https://a.example/1", a)
    det.add("https://a.example/1", " ".join(f"z{i}" for i in range(300)))  # the page changed: its old sketch goes
    assert len(present(det.mirror.bands)) == 1
    assert det.check("https://b.example/2", b).status == "new"


def test_a_missing_or_damaged_saved_band_index_is_rebuilt(tmp_path):
    import shutil

    a, b = far_pair()
    path = tmp_path / "s.db"
    with Detector.open(path) as det:
        det.add("https://a.example/1", a)
    shutil.rmtree(tmp_path / "s.db.index" / "bands")
    with Detector.open(path) as det:
        assert det.mirror.saved_token is None and len(present(det.mirror.bands)) == 1
        assert det.check("https://b.example/2", b).status == "near"
    (tmp_path / "s.db.index" / "bands" / "manifest.json").write_text("{")
    with Detector.open(path) as det:
        assert len(present(det.mirror.bands)) == 1 and det.check("https://b.example/2", b).status == "near"

"""The permuted-table index must give exactly the brute-force answers, for every layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from checks import sql_store
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ConfigError, Detector
from neardup.index import layout as layout_mod
from neardup.index.base import BruteForceIndex
from neardup.index.joins import batch_join, self_join
from neardup.index.layout import Layout, choose_batch_layout, choose_join_layout, choose_layout
from neardup.index.permuted import PermutedIndex

MASK = (1 << 64) - 1


def _flip(value: int, distance: int, rng: np.random.Generator) -> int:
    for bit in rng.choice(64, distance, replace=False):
        value ^= 1 << int(bit)
    return value


def _planted(rng: np.random.Generator, bases: int, k: int) -> list[int]:
    """Base fingerprints plus neighbours at every distance 0..k+1."""
    out = []
    for b in rng.integers(0, 2**63, bases, dtype=np.int64).tolist():
        b = (b << 1) ^ int(rng.integers(0, 2))
        out.append(b)
        out.extend(_flip(b, d, rng) for d in range(k + 2))
    return out


SIZES = (10**3, 10**5, 10**6, 10**7, 10**8, 10**9, 10**10)
BUDGETS = (24, 32, 40, 100, 400)


def _picked(k: int) -> list[Layout]:
    """Every layout the helpers pick for ``k`` (any N, any budget; self-joins; batch joins), plus the
    multi-index layouts of 1..k + 1 parts they choose among."""
    found: dict[tuple, Layout] = {}
    for n in SIZES:
        for budget in BUDGETS:
            lay = choose_layout(n, k, budget)
            found.setdefault((lay.blocks, lay.tables, lay.radii), lay)
        lay = choose_join_layout(n, k)
        found.setdefault((lay.blocks, lay.tables, lay.radii), lay)
        for block in (1 << 16, 1 << 20, 1 << 24):
            lay = choose_batch_layout(n, k, block)
            found.setdefault((lay.blocks, lay.tables, lay.radii), lay)
    for parts in range(1, k + 2):
        lay = Layout.multi_index(k, parts)
        if max(lay.probe_masks(min(16, min(lay.lead_bits(t) for t in range(len(lay.tables)))))[1]) <= 4096:
            found.setdefault((lay.blocks, lay.tables, lay.radii), lay)
    return list(found.values())


def _layouts() -> list[tuple[int, Layout]]:
    cases = []
    for k in range(0, 13):
        for blocks in range(k + 1, k + 4):
            if k <= 6:
                cases.append((k, Layout.combinations(k, blocks)))
        cases += [(k, lay) for lay in _picked(k)]
    return cases


def _name(x: int | Layout) -> str:
    return str(x) if isinstance(x, int) else f"{x.blocks}/{len(x.tables)}/r{x.radii}"


@pytest.fixture(params=[1, 16], ids=["narrow-keys", "wide-keys"])
def key_bits(request, monkeypatch):
    """Small levels get narrow keys (a few entries a bucket); ``16`` gives them the wide keys
    of a large index (radius probes over 16 or more bits, mostly empty buckets)."""
    monkeypatch.setattr(layout_mod, "MIN_DIRECTORY_BITS", request.param)
    return request.param


@pytest.mark.parametrize(("k", "layout"), _layouts(), ids=_name)
def test_every_layout_matches_brute_force(k: int, layout: Layout, key_bits: int, tmp_path) -> None:
    """Planted neighbours at every distance 0..k + 1, a bulk level, online inserts through
    the delta, deletes and a reopened copy: always the brute-force answer."""
    rng = np.random.default_rng(k * 1000 + len(layout.tables) + key_bits)
    values = _planted(rng, 30, k)
    idx = PermutedIndex(k=k, layout=layout, delta_limit=64)
    ref = BruteForceIndex()
    bulk = len(values) // 2
    idx.add_many(list(range(bulk)), values[:bulk])        # one bulk level
    for i in range(bulk, len(values)):                    # then online inserts through the delta
        idx.add(i, values[i])
    for i, v in enumerate(values):
        ref.add(i, v)
    queries = values[::2] + [_flip(v, 1, rng) for v in values[:30]]
    assert {d for _, d in ref.search(values[0], k + 1)} == set(range(k + 2))  # neighbours at every distance
    assert [idx.search(q, k) for q in queries] == [ref.search(q, k) for q in queries]
    for i in range(0, len(values), 7):                    # deletes in levels and delta
        assert idx.remove(i) and ref.remove(i)
    for kq in sorted({0, k // 2, k}):
        expected = [ref.search(q, kq) for q in queries]
        assert idx.search_batch(queries, kq) == expected
        assert [idx.search(q, kq) for q in queries] == expected
    idx.save(tmp_path / "i")
    again = PermutedIndex.open(tmp_path / "i")
    assert again.layout == layout
    assert [again.search(q, k) for q in queries] == [ref.search(q, k) for q in queries]


@pytest.mark.parametrize("id_base", [0, 2**32 - 50, -(2**40), 2**62])
@pytest.mark.parametrize("k", [0, 3, 6])
def test_single_query_path_with_narrow_and_wide_ids(tmp_path, k: int, id_base: int) -> None:
    """``search`` (one compiled call per level, results into a reused buffer) equals brute
    force whether a level's ids fit uint32 or need int64, across levels, delta and deletes."""
    rng = np.random.default_rng(k + 7)
    values = _planted(rng, 60, k) + [7] * 40  # one value stored 40 times: overflows the result buffer
    ids = [id_base + 3 * i for i in range(len(values))]
    idx = PermutedIndex(k=k, layout=choose_layout(10**6, k), delta_limit=50)
    ref = BruteForceIndex()
    idx.add_many(ids[:200], values[:200])
    for i, v in zip(ids[200:], values[200:]):
        idx.add(i, v)
    for i, v in zip(ids, values):
        ref.add(i, v)
    for i, v in list(zip(ids, values))[::9]:
        assert idx.remove(i, v) and ref.remove(i)
    assert any(lv.ids.dtype == (np.uint32 if 0 <= id_base < 2**32 - 1000 else np.int64) for lv in idx._levels)
    queries = values[::3] + [_flip(v, 1, rng) for v in values[:40]] + [7, 6, (1 << 64) - 1]
    for kq in {0, k}:
        assert [idx.search(q, kq) for q in queries] == [ref.search(q, kq) for q in queries]
    idx.save(tmp_path / "i")
    again = PermutedIndex.open(tmp_path / "i")
    assert [again.search(q, k) for q in queries] == [ref.search(q, k) for q in queries]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    k=st.integers(0, 12),
    seed=st.integers(0, 2**32 - 1),
    deletes=st.lists(st.integers(0, 10**6), max_size=30),
    delta_limit=st.sampled_from([1, 7, 50, 4096]),
)
def test_inserts_deletes_and_reopen_stay_exact(tmp_path_factory, k: int, seed: int, deletes: list[int],
                                               delta_limit: int) -> None:
    rng = np.random.default_rng(seed)
    values = _planted(rng, 12, k)
    idx = PermutedIndex(k=k, delta_limit=delta_limit)
    ref = BruteForceIndex()
    for i, v in enumerate(values):
        idx.add(i, v)
        ref.add(i, v)
    for d in deletes:
        victim = d % len(values)
        assert idx.remove(victim) == ref.remove(victim)
    # replace a few ids with new values (remove old, add new), re-add a deleted pair
    for i in range(0, len(values), 5):
        if i in ref:
            idx.remove(i, values[i])
            ref.remove(i)
        new = _flip(values[i], 2, rng)
        idx.add(i, new)
        ref.add(i, new)
    queries = values + [_flip(v, k, rng) for v in values[:10]]
    expected = [ref.search(q, k) for q in queries]
    assert idx.search_batch(queries, k) == expected
    assert [idx.search(q, k) for q in queries[:10]] == expected[:10]
    assert len(idx) == len(ref)
    path = tmp_path_factory.mktemp("idx")
    idx.save(path, token="t1")
    reopened = PermutedIndex.open(path)
    assert reopened.token == "t1"
    assert reopened.search_batch(queries, k) == expected
    reopened.optimize()
    assert reopened.search_batch(queries, k) == expected
    assert len(reopened) == len(ref)


def test_larger_k_than_the_layout_falls_back_to_an_exact_scan() -> None:
    rng = np.random.default_rng(7)
    values = _planted(rng, 30, 6)
    idx = PermutedIndex(k=2, delta_limit=10)
    ref = BruteForceIndex()
    idx.add_many(list(range(len(values))), values)
    for i, v in enumerate(values):
        ref.add(i, v)
    assert idx.search_batch(values, 6) == [ref.search(q, 6) for q in values]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(k=st.integers(0, 12), seed=st.integers(0, 2**32 - 1), dupes=st.integers(0, 5))
def test_self_join_equals_all_pairs(k: int, seed: int, dupes: int) -> None:
    rng = np.random.default_rng(seed)
    values = _planted(rng, 15, k)
    values += values[:dupes]  # equal fingerprints stored twice
    arr = np.array(values, dtype=np.uint64)
    a, b, d = self_join(arr, k)
    dist = np.bitwise_count(arr[:, None] ^ arr[None, :])
    ia, ib = np.nonzero(np.triu(dist <= k, 1))
    assert sorted(zip(a.tolist(), b.tolist(), d.tolist())) == sorted(
        zip(ia.tolist(), ib.tolist(), dist[ia, ib].astype(int).tolist()))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(k=st.integers(0, 12), seed=st.integers(0, 2**32 - 1), chunk=st.integers(1, 200),
       block=st.sampled_from([1, 3, 64, 1 << 22]))
def test_batch_join_streams_to_the_same_answer(k: int, seed: int, chunk: int, block: int) -> None:
    rng = np.random.default_rng(seed)
    stored = np.array(_planted(rng, 20, k), dtype=np.uint64)
    # queries: near copies, a stored value twice (equal queries), a value stored twice
    stored = np.append(stored, stored[5])
    queries = np.array([_flip(int(v), 1, rng) for v in stored[::4]] + [int(stored[3])] * 2, dtype=np.uint64)
    got: list[tuple[int, int]] = []
    chunks = (stored[i:i + chunk] for i in range(0, stored.shape[0], chunk))
    for qp, sp, dist in batch_join(queries, chunks, k, block=block):
        assert np.array_equal(dist, np.bitwise_count(queries[qp] ^ stored[sp]))
        got += zip(qp.tolist(), sp.tolist())
    qi, si = np.nonzero(np.bitwise_count(queries[:, None] ^ stored[None, :]) <= k)
    assert sorted(got) == sorted(zip(qi.tolist(), si.tolist()))  # every pair, once


@pytest.mark.parametrize("k", range(13))
def test_joins_with_every_picked_layout(k: int, key_bits: int) -> None:
    """self_join and batch_join with every layout the helpers pick for k: all pairs, once."""
    rng = np.random.default_rng(100 + k)
    values = np.array(_planted(rng, 12, k) + _planted(rng, 2, k)[:3], dtype=np.uint64)
    dist = np.bitwise_count(values[:, None] ^ values[None, :])
    ia, ib = np.nonzero(np.triu(dist <= k, 1))
    expected = sorted(zip(ia.tolist(), ib.tolist(), dist[ia, ib].astype(int).tolist()))
    queries = values[::3]
    qi, si = np.nonzero(np.bitwise_count(queries[:, None] ^ values[None, :]) <= k)
    for layout in _picked(k):
        a, b, d = self_join(values, k, layout=layout)
        assert sorted(zip(a.tolist(), b.tolist(), d.tolist())) == expected
        got = [(int(x), int(y)) for qp, sp, _ in batch_join(queries, [values[:50], values[50:]], k, layout, block=40)
               for x, y in zip(qp, sp)]
        assert sorted(got) == sorted(zip(qi.tolist(), si.tolist()))


def _naive_exact(layout: Layout) -> bool:
    """Every way of spreading k differing bits over the blocks, one by one."""
    nb = len(layout.blocks)

    def spread(b: int, left: int, acc: list[int]):
        if b == nb - 1:
            if left <= layout.blocks[b]:
                yield acc + [left]
            return
        for e in range(min(left, layout.blocks[b]) + 1):
            yield from spread(b + 1, left - e, acc + [e])

    for e in spread(0, layout.k, []):
        if not any(sum(e[b] for b in lead) <= r for lead, r in zip(layout.tables, layout.radii)):
            return False
    return True


@settings(max_examples=300, deadline=None, derandomize=True)
@given(k=st.integers(0, 9), widths=st.lists(st.integers(1, 6), min_size=1, max_size=5), data=st.data())
def test_exactness_check_agrees_with_enumerating_every_error_pattern(k: int, widths: list[int], data) -> None:
    """The layout check (closed form for disjoint leads, vectorised patterns otherwise)
    accepts exactly the layouts for which no spread of k differing bits escapes every table."""
    widths[-1] += 64 - sum(widths)
    nb = len(widths)
    leads = data.draw(st.lists(st.lists(st.integers(0, nb - 1), min_size=1, max_size=nb, unique=True),
                               min_size=1, max_size=4))
    leads = [list(range(data.draw(st.integers(1, nb))))] + leads  # the identity table
    radii = data.draw(st.lists(st.integers(0, 4), min_size=len(leads), max_size=len(leads)))
    raw: dict[str, Any] = dict(k=k, blocks=tuple(widths), tables=tuple(tuple(t) for t in leads), radii=tuple(radii))
    try:
        Layout(**raw)
        accepted = True
    except ConfigError:
        accepted = False
    fake: Any = type("L", (), {"k": k, "blocks": tuple(widths), "tables": raw["tables"], "radii": raw["radii"]})
    assert accepted == _naive_exact(fake)  # a layout's fields, unchecked


def test_layout_validation_names_the_problem() -> None:
    with pytest.raises(ConfigError, match="not exact for k=3"):
        Layout(k=3, blocks=(16, 16, 16, 16), tables=((0, 1), (2, 3)))
    with pytest.raises(ConfigError, match="sum to 64"):
        Layout(k=1, blocks=(32, 16), tables=((0,),))
    with pytest.raises(ConfigError):
        PermutedIndex(k=4, layout=Layout.combinations(3, 4))
    assert len(choose_layout(10**6, 3, 40).tables) == 4
    assert len(choose_layout(10**9, 3, 1000).tables) > 4  # memory to spare: more, narrower buckets
    with pytest.raises(ConfigError, match="not exact for k=3: 2, 1 differing bits"):
        Layout(k=3, blocks=(32, 32), tables=((0,), (1,)), radii=(1, 0))
    with pytest.raises(ConfigError, match="one radius"):
        Layout(k=3, blocks=(32, 32), tables=((0,), (1,)), radii=(1,))


def test_detector_reopens_its_saved_index_and_rebuilds_a_stale_one(tmp_path) -> None:
    db = tmp_path / "s.db"
    text = " ".join(f"w{i}" for i in range(500))
    with Detector.open(db) as det:
        det.add("https://a.example/1", text)
        assert isinstance(det.index, PermutedIndex)
    assert (tmp_path / "s.db.index" / "manifest.json").exists()
    with Detector.open(db) as det:
        assert isinstance(det.index, PermutedIndex)
        assert det.index.path is not None  # memory-mapped from disk, not rebuilt
        assert det.check("https://b.example/1", text).status == "exact"
        det.add("https://c.example/1", text.replace("w9 ", "x "))
    # a writer that did not save its index (crash): the saved index is stale and rebuilt
    other = " ".join(f"v{i}" for i in range(500))  # a SimHash of its own
    det = Detector.open(db)
    det.add("https://d.example/1", other)
    det.store.close()
    with Detector.open(db) as det:
        # one index entry per SimHash value (near-identical texts may share one)
        distinct = sql_store(det.store)._exec("SELECT count(DISTINCT simhash) FROM pages").fetchone()[0]
        assert len(det.index) == distinct >= 2
        v = det.check("https://e.example/1", other.replace("v20 ", "y "))
        assert v.status == "near" and v.match_url == "https://d.example/1"

"""band_join: exactly the pairs BandIndex.search (and bands.brute_force) bring, query by query."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.errors import ConfigError
from neardup.index.bands import BandIndex, brute_force, far_verify
from neardup.index.joins import QueryBands, band_join, band_join_chunks


def _sketches(rng: np.random.Generator, n: int) -> np.ndarray:
    out = rng.integers(0, 256, (n, 64), dtype=np.uint8)
    out[:, :4] = np.frombuffer(np.uint32(500).tobytes(), dtype=np.uint8)
    return out


def _planted(rng: np.random.Generator, queries: np.ndarray, n: int) -> np.ndarray:
    """Stored rows near random queries (a share of the bins redrawn), decoys sharing a band
    but with random other bins, exact copies, rows without shingles."""
    src = queries[rng.integers(0, queries.shape[0], n)]
    out = src.copy()
    kind = rng.integers(0, 4, n)
    for i in range(n):
        if kind[i] == 0:  # near copy: 30..70% of the bins redrawn
            redraw = rng.random(60) < rng.uniform(0.3, 0.7)
            out[i, 4:][redraw] = rng.integers(0, 256, int(redraw.sum()), dtype=np.uint8)
        elif kind[i] == 1:  # decoy: one band kept, the rest random
            j = int(rng.integers(0, 8))
            keep = out[i, 4 + 2 * j:6 + 2 * j].copy()
            out[i, 4:] = rng.integers(0, 256, 60, dtype=np.uint8)
            out[i, 4 + 2 * j:6 + 2 * j] = keep
            # about the threshold: some of the low nibbles copied
            copy = rng.random(60) < rng.uniform(0.1, 0.4)
            out[i, 4:][copy] = (out[i, 4:][copy] & 0xF0) | (src[i, 4:][copy] & 0x0F)
        elif kind[i] == 3:  # no shingles: no band keys
            out[i, :4] = 0
    return out


def _expected(queries: np.ndarray, stored: np.ndarray, verify: float) -> set[tuple[int, int, int]]:
    """Per query, bands.brute_force over the stored rows that have shingles."""
    has = np.frombuffer(stored[:, :4].tobytes(), dtype=np.uint32) > 0
    ids = np.flatnonzero(has).tolist()
    sk = [bytes(stored[i]) for i in ids]
    out = set()
    for q in range(queries.shape[0]):
        if int(np.frombuffer(queries[q, :4].tobytes(), dtype=np.uint32)[0]) == 0:
            continue
        for sid, agree in brute_force(bytes(queries[q]), ids, sk, far_verify(verify) or 1.0):
            out.add((q, sid, agree))
    return out


def _got(q: np.ndarray, s: np.ndarray, a: np.ndarray) -> list[tuple[int, int, int]]:
    return list(zip(q.tolist(), s.tolist(), a.tolist()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force_on_planted_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    queries = _sketches(rng, 300)
    queries[5] = queries[4]  # a duplicate query
    queries[7, :4] = 0  # a query without shingles
    stored = np.concatenate([_sketches(rng, 500), _planted(rng, queries, 700)])
    stored = stored[rng.permutation(stored.shape[0])]
    stored[10] = stored[11]  # a duplicate stored row
    want = _expected(queries, stored, 0.3)
    assert len(want) > 100
    chunks = [stored[:1], stored[1:333], stored[333:333], stored[333:]]
    got = _got(*band_join(queries, chunks, 0.3, block=97, threads=3))
    assert len(got) == len(set(got))  # each pair once, whatever the number of shared bands
    assert set(got) == want
    assert got == sorted(got)
    assert not any(q == 7 for q, _, _ in got)


def test_same_as_band_index_search() -> None:
    rng = np.random.default_rng(7)
    queries = _sketches(rng, 200)
    stored = np.concatenate([_sketches(rng, 300), _planted(rng, queries, 600)])
    idx = BandIndex(delta_limit=128)  # several levels and a delta
    has = np.frombuffer(stored[:, :4].tobytes(), dtype=np.uint32) > 0
    idx.add_many(np.flatnonzero(has).tolist(), stored[has])
    for verify in (0.3, 0.5):
        want = {(q, sid, agree) for q in range(queries.shape[0])
                for sid, agree in idx.search(bytes(queries[q]), far_verify(verify))}
        assert len(want) > 50
        assert set(_got(*band_join(queries, stored, verify))) == want


def test_every_planted_copy_found() -> None:
    rng = np.random.default_rng(11)
    queries = _sketches(rng, 1000)
    copies = queries.copy()
    redraw = rng.random(copies[:, 4:].shape) < 0.4
    copies[:, 4:][redraw] = rng.integers(0, 256, int(redraw.sum()), dtype=np.uint8)
    stored = np.concatenate([_sketches(rng, 2000), copies])
    q, s, a = band_join(queries, [stored[:1500], stored[1500:]], 0.3)
    found = set(zip(q.tolist(), s.tolist()))
    # a copy with 60% of its bins kept shares a band (1 - (1 - 0.36)^8 = 97%): those found
    keys = lambda rows: rows[:, 4:20].reshape(-1, 8, 2)  # noqa: E731
    share = np.any(np.all(keys(queries) == keys(copies), axis=2), axis=1)
    assert share.mean() > 0.9
    assert all((i, 2000 + i) in found for i in np.flatnonzero(share).tolist())


def test_sequences_with_missing_sketches_and_reusing_the_query_index() -> None:
    rng = np.random.default_rng(5)
    stored = _sketches(rng, 50)
    queries: list[bytes | None] = [bytes(stored[3]), None, b"short", bytes(stored[9])]
    q, s, a = band_join(queries, stored)
    assert (q.tolist(), s.tolist(), a.tolist()) == ([0, 3], [3, 9], [56, 56])
    qb = QueryBands(queries)
    assert len(qb) == 2
    per_chunk = list(band_join_chunks(qb, [stored[:5], stored[5:]]))
    assert [p[1].tolist() for p in per_chunk] == [[3], [9]]
    assert all(p[0].shape[0] == 0 for p in band_join_chunks(qb, [stored], None))


def test_bad_input_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        band_join(np.zeros((2, 60), dtype=np.uint8), np.zeros((1, 64), dtype=np.uint8))
    with pytest.raises(ConfigError):
        band_join(np.zeros((2, 64), dtype=np.uint8), [np.zeros((1, 64), dtype=np.int32)])
    with pytest.raises(ConfigError):
        band_join(np.zeros((2, 64), dtype=np.uint8), np.zeros((1, 64), dtype=np.uint8), block=0)
    with pytest.raises(ConfigError):
        QueryBands(np.zeros((2, 64), dtype=np.uint8), bands=0)


def test_more_pairs_than_the_first_buffers_hold() -> None:
    rng = np.random.default_rng(9)
    one = _sketches(rng, 1)
    queries = np.repeat(one, 90, axis=0)  # 90 x 80 = 7,200 pairs in one block: the buffers grow
    stored = np.concatenate([_sketches(rng, 20), np.repeat(one, 80, axis=0)])
    q, s, a = band_join(queries, stored, threads=1)
    assert q.shape[0] == 90 * 80
    assert set(zip(q.tolist(), s.tolist())) == {(i, 20 + k) for i in range(90) for k in range(80)}
    assert set(a.tolist()) == {56}

"""BruteForceIndex against a naive Python reference (neardup.index)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import BruteForceIndex, ConfigError
from neardup.index.base import to_words

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True)


def naive_search(stored: dict[int, int], query: int, k: int) -> list[tuple[int, int]]:
    hits = [(id_, bin(value ^ query).count("1")) for id_, value in stored.items()]
    return sorted(((i, d) for i, d in hits if d <= k), key=lambda m: (m[1], m[0]))


def flip_bits(value: int, n: int, bits: int, rnd: random.Random) -> int:
    for b in rnd.sample(range(bits), n):
        value ^= 1 << b
    return value


@st.composite
def planted(draw):
    """Random fingerprints plus neighbours of the query at every distance 0..k+1."""
    bits = draw(st.sampled_from([64, 128]))
    k = draw(st.integers(0, 8))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    query = rnd.getrandbits(bits)
    values = [rnd.getrandbits(bits) for _ in range(draw(st.integers(0, 40)))]
    for d in range(k + 2):
        values += [flip_bits(query, d, bits, rnd) for _ in range(draw(st.integers(1, 3)))]
    rnd.shuffle(values)
    ids = rnd.sample(range(-(2**40), 2**40), len(values))
    return bits, k, query, dict(zip(ids, values))


@SETTINGS
@given(planted())
def test_search_equals_reference(case):
    bits, k, query, stored = case
    index = BruteForceIndex(bits=bits, capacity=4)  # small capacity: exercise growth
    for id_, value in stored.items():
        index.add(id_, value)
    got = index.search(query, k)
    assert got == naive_search(stored, query, k)
    assert {d for _, d in got} == set(range(k + 1))  # every planted distance found
    assert all(isinstance(i, int) and isinstance(d, int) for i, d in got)
    assert len(index) == len(stored)
    assert sorted(index.items()) == sorted(stored.items())
    # other radii too
    for kk in (0, k + 1, bits):
        assert index.search(query, kk) == naive_search(stored, query, kk)


@SETTINGS
@given(planted())
def test_add_many_equals_add(case):
    bits, k, query, stored = case
    one, many = BruteForceIndex(bits=bits), BruteForceIndex(bits=bits)
    for id_, value in stored.items():
        one.add(id_, value)
    many.add_many(list(stored), list(stored.values()))
    assert one.search(query, k) == many.search(query, k) == naive_search(stored, query, k)
    arr = BruteForceIndex(bits=bits)
    arr.add_many(list(stored), to_words(list(stored.values()), bits))  # uint64 word array input
    assert arr.search(query, k) == naive_search(stored, query, k)


@SETTINGS
@given(planted(), st.integers(0, 2**32))
def test_remove_and_replace(case, seed):
    bits, k, query, stored = case
    rnd = random.Random(seed)
    index = BruteForceIndex(bits=bits, capacity=1)
    index.add_many(list(stored), list(stored.values()))
    reference = dict(stored)
    ids = list(stored)
    rnd.shuffle(ids)
    for id_ in ids[: len(ids) // 2]:
        assert index.remove(id_) is True
        assert index.remove(id_) is False
        del reference[id_]
        assert id_ not in index
    assert index.search(query, k) == naive_search(reference, query, k)
    # replace some ids with new values: far ones become near and near ones far
    for id_ in ids[len(ids) // 2:][:5]:
        new = flip_bits(query, rnd.randint(0, k + 1), bits, rnd) if rnd.random() < 0.5 else rnd.getrandbits(bits)
        index.add(id_, new)
        reference[id_] = new
    # re-add removed ids
    for id_ in ids[: len(ids) // 4]:
        new = flip_bits(query, rnd.randint(0, bits), bits, rnd)
        index.add(id_, new)
        reference[id_] = new
    assert len(index) == len(reference)
    assert all(id_ in index for id_ in reference)
    assert sorted(index.items()) == sorted(reference.items())
    assert index.search(query, k) == naive_search(reference, query, k)


@SETTINGS
@given(planted(), st.integers(1, 6))
def test_search_batch_equals_search(case, extra):
    bits, k, query, stored = case
    index = BruteForceIndex(bits=bits)
    index.add_many(list(stored), list(stored.values()))
    rnd = random.Random(query)
    queries = [query] + [rnd.getrandbits(bits) for _ in range(extra)] + list(stored.values())[:3]
    batch = index.search_batch(queries, k)
    assert batch == [index.search(q, k) for q in queries]
    assert batch == [naive_search(stored, q, k) for q in queries]
    assert index.search_batch(to_words(queries, bits), k) == batch


@SETTINGS
@given(st.sampled_from([64, 128]), st.lists(st.integers(0, 2**128 - 1), min_size=1, max_size=20))
def test_to_words_round_trip(bits, values):
    values = [v & ((1 << bits) - 1) for v in values]
    words = to_words(values, bits)
    assert words.dtype == np.uint64 and words.shape == (len(values), bits // 64)
    back = [sum(int(w) << (64 * (bits // 64 - 1 - j)) for j, w in enumerate(row)) for row in words]
    assert back == values


def test_distances_in_storage_order():
    index = BruteForceIndex(bits=128)
    values = {1: 0, 2: (1 << 127) | 1, 3: (1 << 128) - 1}
    for id_, v in values.items():
        index.add(id_, v)
    assert index.distances(0).tolist() == [0, 2, 128]
    assert index.search((1 << 128) - 1, 128) == [(3, 0), (2, 126), (1, 128)]


def test_empty_index():
    index = BruteForceIndex()
    assert len(index) == 0 and 5 not in index
    assert index.search(123, 64) == [] and index.search_batch([1, 2], 3) == [[], []]
    assert index.remove(5) is False
    assert index.items() == []


def test_len_and_contains():
    index = BruteForceIndex(bits=64)
    index.add(7, 0xFF)
    index.add(8, 0xF0)
    index.add(7, 0x0F)  # replace, not a second entry
    assert len(index) == 2 and 7 in index and 8 in index and 9 not in index
    assert index.search(0x0F, 0) == [(7, 0)]
    assert "7" not in index


def test_repeated_id_in_one_add_many_call():
    """An id given twice in one add_many call is stored once, with the last value."""
    index = BruteForceIndex()
    index.add(5, 0b1000)
    index.add_many([1, 1, 5], [0, 0b1, 0b11])
    assert len(index) == 2
    assert sorted(index.items()) == [(1, 0b1), (5, 0b11)]
    assert index.search(0, 0) == []
    assert index.search(0, 2) == [(1, 1), (5, 2)]
    assert index.remove(1) is True and 1 not in index
    assert index.search(0, 64) == [(5, 2)]
    assert len(index) == 1


def test_ties_sorted_by_id():
    index = BruteForceIndex()
    for id_ in (30, 10, 20):
        index.add(id_, 0b1)
    index.add(5, 0b11)
    assert index.search(0, 2) == [(10, 1), (20, 1), (30, 1), (5, 2)]


@pytest.mark.parametrize("k", [-1, -100])
def test_negative_k_raises(k):
    index = BruteForceIndex()
    index.add(1, 0)
    with pytest.raises(ConfigError):
        index.search(0, k)
    with pytest.raises(ConfigError):
        index.search_batch([0], k)


@pytest.mark.parametrize("bits", [0, 32, 96, 256])
def test_bad_width_raises(bits):
    with pytest.raises(ConfigError):
        BruteForceIndex(bits=bits)


def test_mismatched_lengths_raise():
    with pytest.raises(ConfigError):
        BruteForceIndex().add_many([1, 2], [0])

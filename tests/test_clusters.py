"""Clusters of any size: the canonical kept incrementally equals a recomputation from scratch.

A deterministic property test (fixed seeds): random sequences of adds of new URLs, re-adds
(other content, other canonical link, other priority, content that becomes empty), batches
and expiries, under every canonical policy chain, on SQLite and on PostgreSQL. After every
step each cluster's stored canonical must be what ``CanonicalPolicy.choose`` gives over all
its members, its size and link counts must match its members, and the index must hold
exactly the oldest non-empty page of every SimHash value. A check (no write) must predict
the canonical that the same re-add then stores.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections import Counter

import pytest
from checks import orphan_links, present, sql_store, stored_links

from neardup import Detector
from neardup.canonical import RANKS, policy_from_spec
from neardup.urls import comparable_link

RULES = [name for name in RANKS if name != "first-seen"]
#: every chain: each ordered selection of the rules, first-seen last (65 chains)
ALL_CHAINS = ["first-seen"] + [",".join(p) for r in range(1, len(RULES) + 1)
                               for p in itertools.permutations(RULES, r)]

URLS = [
    "https://a.example/p", "http://a.example/p", "HTTPS://A.example:443/p#frag", "https://a.example/p?x=1",
    "https://a.example/longer/path/p", "http://b.example/q", "https://b.example/q", "https://b.example/",
    "http://B.EXAMPLE:80/q", "https://c.example/r/1", "https://c.example/r/22", "http://c.example/r/333",
]
LINKS = [None, None, "https://a.example/p", "https://b.example/q", "http://c.example/r/333",
         "https://b.example/", "HTTP://a.example/p", "https://nowhere.example/x"]
PRIORITIES = [None, None, 1.0, 2.0, 5.0]


def _text(family: int, variant: int) -> str:
    words = [f"fam{family}word{i}" for i in range(400)]
    for i in range(variant):  # a few changed words: near duplicates of one another
        words[37 * (i + 1) % 400] = f"changed{variant}x{i}"
    return (f"<html><head><title>Family {family}</title></head>"
            f"<body><article><p>{' '.join(words)}</p></article></body></html>")


@pytest.fixture(scope="module")
def contents():
    det = Detector()
    fps = [det.fingerprint(_text(f, v), url="https://a.example/p") for f in range(3) for v in (0, 1, 3)]
    fps.append(det.fingerprint("<html><body><p>too short</p></body></html>"))  # empty
    assert fps[-1].empty and not any(fp.empty for fp in fps[:-1])
    return fps


def _expected(det: Detector) -> None:
    """Every invariant the incremental bookkeeping must keep, against the stored pages."""
    pages = list(det.store.iter_pages())
    by_cluster: dict[int, list] = {}
    for p in pages:
        if p.cluster_id is not None:
            by_cluster.setdefault(p.cluster_id, []).append(p)
    assert set(det.store.cluster_ids()) == set(by_cluster)
    policy = det.policy
    for cid, members in by_cluster.items():
        row = present(det.store.cluster_row(cid))
        chosen = policy.choose([dataclasses.replace(_as_member(m)) for m in members])
        assert (row.canonical_id, row.size) == (chosen.id, len(members)), (cid, policy.spec)
        links = Counter(k for k in (comparable_link(m.canonical_link) for m in members) if k is not None)
        assert stored_links(det.store, cid) == dict(links)
        info = present(det.cluster_info(cid))
        assert info["size"] == len(members) and info["canonical_id"] == chosen.id
    assert orphan_links(det.store) == 0
    # a URL is never its own duplicate: no stored page names itself as its match
    assert all(p.matched_id != p.id for p in pages)
    reps: dict[int, int] = {}
    for p in sorted(pages, key=lambda p: present(p.id)):
        if p.status != "empty":
            reps.setdefault(p.simhash, present(p.id))
    assert len(det.index) == len(reps)
    for value, pid in reps.items():
        assert [i for i, _ in det.index.search(value, 0)] == [pid]


def _as_member(rec):
    from neardup.canonical import Member

    return Member(rec.id, rec.url, rec.first_seen, rec.canonical_link, rec.priority)


def _run(det: Detector, contents, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    base = time.time() - 10**6
    clock = 0.0
    stored: set[str] = set()

    def item():
        nonlocal clock
        clock += rng.choice([1.0, 1.0, 0.0, -3.0])  # mostly forward, sometimes equal or older
        fp = dataclasses.replace(rng.choice(contents), canonical_url=rng.choice(LINKS))
        return rng.choice(URLS), fp, base + 100 + clock, rng.choice(PRIORITIES)

    for _ in range(steps):
        op = rng.random()
        if op < 0.08 and stored:
            cutoff = base + 100 + clock - rng.uniform(0, 8)
            det.expire(older_than=time.time() - cutoff)
            stored = {p.url for p in det.store.iter_pages()}
        elif op < 0.2:
            items = [item() for _ in range(rng.randint(2, 5))]
            det.add_fingerprints(items)
            stored |= {u for u, *_ in items}
        else:
            url, fp, when, priority = item()
            if url in stored and rng.random() < 0.5:
                predicted = det.check_fingerprint(url, fp)
                got = det.add_fingerprint(url, fp, fetched_at=when)
                assert got.version in ("unchanged", "changed") and predicted.version == got.version
                assert got.match_url != got.url and predicted.match_url != url
                if predicted.status in ("exact", "near"):
                    assert (
                        (predicted.status, predicted.cluster_id, predicted.canonical_id, predicted.canonical_url)
                        == (got.status, got.cluster_id, got.canonical_id, got.canonical_url)
                    )
            else:
                det.add_fingerprint(url, fp, fetched_at=when, priority=priority)
            stored.add(url)
        _expected(det)


@pytest.mark.parametrize("chain", ALL_CHAINS)
def test_incremental_canonical_equals_recomputation_sqlite(chain, contents):
    det = Detector(canonical=chain)
    assert det.policy.spec == policy_from_spec(chain).spec
    _run(det, contents, seed=ALL_CHAINS.index(chain), steps=60)


@pytest.mark.parametrize("seed", range(3))
def test_file_store_reopen_and_policy_switch(tmp_path, contents, seed):
    """Reopening rebuilds the same index; opening with another policy re-chooses every
    canonical for it, and the bookkeeping goes on from there."""
    path = tmp_path / "s.db"
    with Detector.open(path, canonical="rel-canonical,first-seen") as det:
        _run(det, contents, seed=100 + seed, steps=40)
    with Detector.open(path) as det:
        _expected(det)
    with Detector.open(path, canonical=ALL_CHAINS[7 * seed + 5]) as det:
        _expected(det)
        _run(det, contents, seed=200 + seed, steps=20)


PG_CHAINS = ["rel-canonical,first-seen", "https,rel-canonical", "priority,rel-canonical,shortest-url",
             "shortest-url,https", "first-seen"]


@pytest.mark.parametrize("chain", PG_CHAINS)
def test_incremental_canonical_equals_recomputation_postgres(chain, contents, pg_dsn):
    with Detector.open(pg_dsn, canonical=chain) as det:
        _run(det, contents, seed=300 + PG_CHAINS.index(chain), steps=40)


@pytest.mark.parametrize("chain", PG_CHAINS[:3])
def test_incremental_canonical_equals_recomputation_redis(chain, contents, redis_url):
    with Detector.open(redis_url, canonical=chain) as det:
        _run(det, contents, seed=400 + PG_CHAINS.index(chain), steps=40)


def test_a_big_cluster_is_a_signal(contents):
    """A trap: one page under many URLs. Its size and growth rate are on the cluster; the
    canonical follows the policy (here the URL every copy names) without reading members."""
    det = Detector()
    fp = dataclasses.replace(contents[0], canonical_url="https://trap.example/cal")
    start = 1_700_000_000.0
    verdicts = det.add_fingerprints([(f"https://trap.example/cal?d={i}", fp, start + i, None) for i in range(300)])
    cid = present(verdicts[0].cluster_id)
    assert {v.cluster_id for v in verdicts} == {cid}
    assert [v.status for v in verdicts[:2]] == ["new", "exact"]
    target = det.add_fingerprint("https://trap.example/cal", fp, fetched_at=start + 300)
    assert target.canonical_url == "https://trap.example/cal"
    info = present(det.cluster_info(cid, at=start + 300))
    assert info["size"] == info["joins"] == 301 and info["canonical_url"] == "https://trap.example/cal"
    assert info["last_joined_at"] == start + 300
    # 301 joins in five minutes: the decayed rate is about 301 per hour's half-life
    assert 150 < info["joins_per_hour"] < 301
    later = present(det.cluster_info(cid, at=start + 300 + 3600))
    assert later["joins_per_hour"] == pytest.approx(info["joins_per_hour"] / 2)
    # one index entry for all the copies
    assert len(det.index) == 1
    # members are not read when a copy joins: cluster_members is never called
    det.store.cluster_members = None  # type: ignore[assignment]
    det.store.member_batches = None  # type: ignore[assignment]
    det.add_fingerprint("https://trap.example/cal?d=extra", fp)
    det.check_fingerprint("https://trap.example/cal?d=other", fp)
    assert present(det.cluster_info(cid))["size"] == 302


def test_schema_3_store_migrates(tmp_path, contents):
    """A store written before schema 4 gets its URL and link keys, link counts and growth
    fields, and its clusters go on incrementally from the canonicals it had."""
    import json
    import sqlite3

    from neardup.store import sqlite as store_mod

    fp = contents[0]
    path = tmp_path / "old.db"
    con = sqlite3.connect(path, isolation_level=None)
    for step in range(3):
        for sql in store_mod.MIGRATIONS[step]:
            assert isinstance(sql, str)  # the steps up to this schema are SQL text
            con.execute(sql)
    con.execute("PRAGMA user_version=3")
    con.execute("INSERT INTO meta(key, value) VALUES('config', ?)", (json.dumps(Detector().config.to_dict()),))
    con.execute("INSERT INTO meta(key, value) VALUES('spec', ?)", (json.dumps(fp.spec),))
    con.execute("INSERT INTO meta(key, value) VALUES('canonical_policy', ?)", (json.dumps("rel-canonical,first-seen"),))
    con.execute("INSERT INTO clusters(id, canonical_id, size, created_at) VALUES(1, 2, 2, 1.5e9)")
    for pid, url, link, status in [(1, "https://a.example/x", "https://a.example/p", "new"),
                                   (2, "HTTPS://A.example/p", None, "exact")]:
        con.execute(
            "INSERT INTO pages(id, url, host, first_seen, fetched_at, digest, simhash, spec, length, title, "
            "canonical_link, language, status, cluster_id, sketch) "
            "VALUES(?, ?, 'a.example', 1.5e9, 1.5e9, ?, ?, ?, ?, ?, ?, 'en', ?, 1, ?)",
            (pid, url, fp.digest, fp.simhash.to_bytes(8, "big"), fp.spec, fp.length, fp.title, link, status, fp.sketch))
    con.close()
    with Detector.open(path) as det:
        assert sql_store(det.store)._exec("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION == 9
        assert sql_store(det.store)._exec("SELECT url_key, link_key FROM pages ORDER BY id").fetchall() == \
            [("https://a.example/x", "https://a.example/p"), ("https://a.example/p", None)]
        info = present(det.cluster_info(1))
        assert (info["size"], info["joins"], info["canonical_id"]) == (2, 2, 2)
        _expected(det)
        assert len(det.index) == 1  # the two copies share one entry
        v = det.add_fingerprint("https://a.example/y", fp)
        assert v.status == "exact" and v.cluster_id == 1 and v.canonical_id == 2
        _expected(det)

"""Writes staged in the client until the transaction ends (neardup.store.write_behind) leave
every table exactly as the statements one by one leave it.

A deterministic property test (fixed seeds): random sequences of adds (new URLs, near and
exact copies, re-fetches changed and unchanged, canonical links appearing and going, pages
that become empty, priorities) with expiries between the batches, run twice on fresh
stores of one kind: once with ``write_behind`` off (every write its own statement, at once)
and once with it on, in batches (one transaction each) and with a staging limit of 3
pages (writes flushed inside the transaction). The verdicts, and every row of pages,
clusters, cluster_links, page_versions and changes, must be equal. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import time
from typing import Any

import pgserver
import pytest
from checks import sql_store

from neardup import Detector
from neardup.fingerprint.core import Fingerprint
from neardup.store import sql as sql_mod
from neardup.store.base import HISTORY_LIMIT, PageRecord
from neardup.store.write_behind import WriteBehind

URLS = [f"https://{h}.example/{p}" for h in "abc" for p in ("x", "y/1", "y/2", "z?id=3")]
LINKS = [None, None, None, "https://a.example/x", "https://b.example/y/1", "https://c.example/elsewhere"]

TABLES = {
    "pages": "SELECT * FROM pages ORDER BY id",
    "clusters": "SELECT * FROM clusters ORDER BY id",
    "cluster_links": "SELECT cluster_id, link, n FROM cluster_links ORDER BY cluster_id, link",
    "page_versions": "SELECT * FROM page_versions ORDER BY id",
    "changes": "SELECT * FROM changes ORDER BY seq",
}


def _text(family: int, variant: int) -> str:
    words = [f"fam{family}word{i}" for i in range(400)]
    for i in range(variant):  # a few changed words: near copies of one another
        words[37 * (i + 1) % 400] = f"changed{variant}x{i}"
    return f"<html><body><article><p>{' '.join(words)}</p></article></body></html>"


@pytest.fixture(scope="module")
def contents() -> list[Fingerprint]:
    det = Detector()
    fps = [det.fingerprint(_text(f, v)) for f in range(3) for v in (0, 1, 3)]
    fps.append(det.fingerprint("<html><body><p>too short</p></body></html>"))  # an empty page
    assert fps[-1].empty and not any(fp.empty for fp in fps[:-1])
    return fps


Step = list[tuple[str, Fingerprint, float, float | None]]


def _steps(seed: int, contents: list[Fingerprint]) -> list[Step | float]:
    """Batches of adds, with expiry times (a float) between some of them."""
    rng = random.Random(seed)
    now = 1_700_000_000.0
    out: list[Step | float] = []
    for _ in range(6):
        batch: Step = []
        for _ in range(rng.randrange(1, 12)):
            now += rng.choice([1.0, 60.0, 3600.0])
            fp = dataclasses.replace(rng.choice(contents), canonical_url=rng.choice(LINKS))
            batch.append((rng.choice(URLS), fp, now, rng.choice([None, None, 1.0, 4.0])))
        out.append(batch)
        if rng.random() < 0.3:
            out.append(now - rng.choice([120.0, 7200.0]))
    url = rng.choice(URLS)  # one URL fetched past its history's length, its content changing
    out.append([(url, contents[i % 2], now + i, None) for i in range(1, HISTORY_LIMIT + 6)])
    return out


def _run(target: str, steps: list[Step | float], *, staged: bool, batched: bool) -> tuple[list[Any], dict[str, Any]]:
    verdicts: list[Any] = []
    with Detector.open(target) as det:
        sql_store(det.store).write_behind = staged
        for step in steps:
            if isinstance(step, float):
                verdicts.append(("expired", det.expire(older_than=step)))
            elif batched:
                verdicts.extend(v.to_dict() for v in det.add_fingerprints(step))
            else:
                for url, fp, at, prio in step:
                    verdicts.append(det.add_fingerprint(url, fp, fetched_at=at, priority=prio).to_dict())
        store = sql_store(det.store)
        tables = {name: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                         for row in store._exec(sql).fetchall()] for name, sql in TABLES.items()}
    return verdicts, tables


@pytest.fixture(params=["sqlite", "postgres"])
def fresh(request, tmp_path):
    """A function giving a fresh, empty store target of one kind."""
    if request.param == "sqlite":
        names = iter(range(100))
        return lambda: str(tmp_path / f"s{next(names)}.db")
    server = request.getfixturevalue("pg_server")
    return lambda: pgserver.new_database(server)


@pytest.mark.parametrize("seed", range(4))
def test_staged_writes_leave_the_tables_the_statements_one_by_one_leave(seed, contents, fresh, monkeypatch):
    steps = _steps(seed, contents)
    want = _run(fresh(), steps, staged=False, batched=False)
    assert want[1]["pages"] and want[1]["changes"]
    assert _run(fresh(), steps, staged=False, batched=True) == want  # batches alone change nothing
    assert _run(fresh(), steps, staged=True, batched=True) == want
    assert _run(fresh(), steps, staged=True, batched=False) == want
    monkeypatch.setattr(sql_mod, "FLUSH_PAGES", 3)  # written three pages at a time inside the transaction
    assert _run(fresh(), steps, staged=True, batched=True) == want


def test_a_failed_batch_leaves_nothing_staged_or_stored(tmp_path, contents):
    target = str(tmp_path / "s.db")
    with Detector.open(target) as det:
        det.add_fingerprint("https://a.example/x", contents[0])
        before = _run_tables(det)
        store = sql_store(det.store)
        with pytest.raises(RuntimeError), det.store.transaction():
            det.add_fingerprint("https://b.example/x", contents[3])
            assert store._buffer() is not None and not present_buffer(store).empty()
            raise RuntimeError("crawler stopped")
        assert store._buffer() is None
        assert _run_tables(det) == before
        # the ids given in the rolled-back transaction are given again: nothing of it was stored
        v = det.add_fingerprint("https://b.example/x", contents[3])
        assert v.page_id == 2 and v.status == "new"


def present_buffer(store: Any) -> WriteBehind:
    buffer = store._buffer()
    assert buffer is not None
    return buffer  # type: ignore[no-any-return]


def _run_tables(det: Detector) -> dict[str, Any]:
    store = sql_store(det.store)
    return {name: store._exec(sql).fetchall() for name, sql in TABLES.items()}


def test_reads_inside_a_transaction_see_its_staged_writes(tmp_path, contents):
    with Detector.open(str(tmp_path / "s.db")) as det:
        store = sql_store(det.store)
        with det.store.transaction():
            first = det.add_fingerprint("https://a.example/x", contents[0])
            assert present_buffer(store).pages  # staged, not yet written
            assert det.store.page_by_url("https://a.example/x") == det.store.page_by_id(present(first.page_id))
            same = det.store.page_by_digest(contents[0].digest)
            assert same is not None and same.id == first.page_id
            assert det.store.lowest_live(contents[0].simhash, 64) == first.page_id
            row = det.store.cluster_row(present(first.cluster_id))
            assert row is not None and (row.size, row.canonical_id) == (1, first.page_id)
            copy = det.add_fingerprint("https://b.example/x", contents[0])
            assert (copy.status, copy.match_id) == ("exact", first.page_id)
            # a statement the buffer cannot answer writes it first
            assert det.store.page_count() == 2 and not present_buffer(store).pages
        assert isinstance(det.store.page_by_url("https://b.example/x"), PageRecord)


def present(value: Any) -> Any:
    assert value is not None
    return value


def _counting(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements ``store`` runs from now on (one entry an ``executemany``)."""
    seen: list[str] = []
    one, many = store._statement, store._statements

    def statement(sql: str, params: Any = ()) -> Any:
        seen.append(sql)
        return one(sql, params)

    def statements(sql: str, rows: Any) -> None:
        seen.append(sql)
        many(sql, rows)

    monkeypatch.setattr(store, "_statement", statement)
    monkeypatch.setattr(store, "_statements", statements)
    return seen


def test_a_batch_reads_ahead_what_its_adds_look_up_in_a_few_statements(fresh, contents, monkeypatch):
    with Detector.open(fresh()) as det:
        for i, fp in enumerate(contents):
            det.add_fingerprint(f"https://stored.example/{i}", fp)
        fresh_fps = [det.fingerprint(_text(10 + i, 0)) for i in range(30)]
        refetch = [(f"https://stored.example/{i}", fp) for i, fp in enumerate(contents)]
        batch = [*[(f"https://new.example/{i}", fp) for i, fp in enumerate(fresh_fps)], *refetch]
        seen = _counting(sql_store(det.store), monkeypatch)
        verdicts = det.add_fingerprints(batch)
        assert [v.status for v in verdicts[:30]] == ["new"] * 30
        assert all(v.version == "unchanged" for v in verdicts[30:])
        lookups = [s for s in seen if "UNION ALL" in s]
        assert not lookups  # 40 adds, their lookups read ahead in three statements
        assert len(seen) < 40, seen
        seen.clear()
        for url, fp in batch:  # one by one: each add reads for itself
            det.add_fingerprint(url.replace("new.", "other."), fp)
        assert len([s for s in seen if "UNION ALL" in s]) == len(batch)


def test_what_was_read_ahead_is_forgotten_by_a_write_it_cannot_see(tmp_path, contents):
    with Detector.open(str(tmp_path / "s.db")) as det:
        page = det.add_fingerprint("https://a.example/x", contents[0]).page_id
        store = sql_store(det.store)
        with det.store.transaction():
            store.prefetch(["https://a.example/x", "https://b.example/x"], [contents[0].digest])
            found = det.store.lookup("https://a.example/x", contents[0].digest)
            assert found.own is not None and found.same is not None and found.own.id == found.same.id == page
            assert present_buffer(store).known("https://b.example/x", contents[0].digest)
            det.store.delete_pages([present(page)])  # a statement of its own: the buffer forgets
            assert not present_buffer(store).known("https://b.example/x", None)
            found = det.store.lookup("https://a.example/x", contents[0].digest)
            assert found.own is None and found.same is None


def test_expiry_takes_a_few_statements_a_batch_not_a_few_a_page(fresh, contents, monkeypatch):
    """1,200 pages expired (three batches of EXPIRE_BATCH): their clusters and the oldest copies
    of their SimHash values are read a chunk at a time, so the statements do not grow with the
    pages (before: three a page, 3,600); what stays is what one by one would leave."""
    with Detector.open(fresh()) as det:
        synth = random.Random(3)
        items = []
        for i in range(1200):  # new pages, and copies of the kept ones that expire with them
            fp = contents[i % len(contents)] if i % 10 == 0 else dataclasses.replace(
                contents[0], digest=f"{i:064x}", simhash=synth.getrandbits(64), sketch=None)
            items.append((f"https://old{i % 7}.example/{i}", fp, 1.0e9 + i, None))
        det.add_fingerprints(items)
        kept = det.add_fingerprint("https://kept.example/", contents[1]).page_id
        seen = _counting(sql_store(det.store), monkeypatch)
        assert det.expire(time.time() - (1.0e9 + 2000)) == 1200
        assert len(seen) < 40, collections.Counter(x[:60] for x in seen).most_common(5)
        assert det.stats()["pages"] == 1
        again = det.add_fingerprint("https://kept2.example/", contents[1])
        assert again.status == "exact" and again.match_id == kept

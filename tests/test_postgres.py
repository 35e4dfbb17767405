"""The PostgreSQL store: the store contract on both backends, many workers on one database."""

from __future__ import annotations

import gzip
import multiprocessing as mp
from pathlib import Path

import pytest
from checks import STORE_KINDS, present, store_target

import neardup
from neardup import Detector, StoreError
from neardup.store.base import redact
from neardup.store.postgres import PostgresStore

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample"


def _pages() -> list[tuple[str, bytes]]:
    rows = [line.split("\t") for line in (SAMPLE / "urls.tsv").read_text().splitlines()[1:] if line.strip()]
    return [(r[1], gzip.open(SAMPLE / r[0]).read()) for r in rows]


@pytest.fixture(params=STORE_KINDS)
def target_store(request, tmp_path) -> str:
    return store_target(request, tmp_path)

def test_sample_gives_the_same_verdicts_on_every_backend(target_store, tmp_path):
    reference = Detector.open(tmp_path / "ref.db")
    ref = [reference.add(url, html) for url, html in _pages()]
    reference.close()
    with Detector.open(target_store) as det:
        got = [det.add(url, html) for url, html in _pages()]
        stats = det.stats()
    assert [(v.status, v.match_url, v.distance, v.canonical_url) for v in got] == \
           [(v.status, v.match_url, v.distance, v.canonical_url) for v in ref]
    with Detector.open(target_store) as det:  # reopen: everything restored
        assert det.stats() == stats
        url, html = _pages()[-1]  # the last capture of a URL is the stored one
        assert det.check("https://elsewhere.example/x", html).status == "exact"


# (the store contract itself runs on both backends in tests/test_store.py)


def test_schema_is_one_text_rendered_per_dialect():
    from neardup.store import postgres, schema
    from neardup.store import sqlite as store

    assert store.MIGRATIONS == schema.migrations("sqlite") and postgres.MIGRATIONS == schema.migrations("postgres")
    sqlite_ddl = " ".join(s for steps in store.MIGRATIONS.values() for s in steps if isinstance(s, str))
    pg_ddl = " ".join(s for steps in postgres.MIGRATIONS.values() for s in steps if isinstance(s, str))
    assert "BYTEA" not in sqlite_ddl and "BLOB" not in pg_ddl and "AUTOINCREMENT" not in pg_ddl
    assert "{" not in sqlite_ddl + pg_ddl
    with pytest.raises(neardup.ConfigError, match="dialect"):
        schema.migrations("mysql")


def test_statement_timeout_turns_a_stuck_query_into_a_store_error(pg_dsn):
    store = PostgresStore(pg_dsn, statement_timeout=0.2)
    try:
        assert present(store._exec("SHOW statement_timeout").fetchone())[0] == "200ms"
        with pytest.raises(StoreError, match="statement timeout"):
            store._exec("SELECT pg_sleep(2)")
        assert store.page_count() == 0  # the connection is usable afterwards
    finally:
        store.close()
    unlimited = PostgresStore(pg_dsn, statement_timeout=None)
    try:
        assert present(unlimited._exec("SHOW statement_timeout").fetchone())[0] == "0"
    finally:
        unlimited.close()
    default = PostgresStore(pg_dsn)
    try:
        assert present(default._exec("SHOW statement_timeout").fetchone())[0] == "1min"
    finally:
        default.close()
    with pytest.raises(neardup.ConfigError, match="statement_timeout"):
        PostgresStore(pg_dsn, statement_timeout=-1)


def test_unreachable_server_and_foreign_database(pg_dsn):
    with pytest.raises(StoreError, match="cannot connect"):
        PostgresStore("postgresql://nobody:secret@127.0.0.1:1/none", timeout=1)
    assert "secret" not in redact("postgresql://nobody:secret@127.0.0.1:1/none")
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE pages (x int)")
    with pytest.raises(StoreError, match="no neardup schema"):
        PostgresStore(pg_dsn)


@pytest.fixture(params=STORE_KINDS[1:])
def shared_target(request, tmp_path) -> str:
    """A store many processes share: PostgreSQL, Redis, a Redis Cluster."""
    return store_target(request, tmp_path)


def _worker(dsn: str, urls_html: list[tuple[str, str]], barrier, out) -> None:
    det = Detector.open(dsn)
    barrier.wait()
    verdicts = [det.add(url, html) for url, html in urls_html]
    out.put([(v.url, v.status, v.cluster_id) for v in verdicts])
    det.close()


def test_two_workers_adding_near_duplicates_at_once_share_one_cluster(shared_target):
    base = " ".join(f"word{i}" for i in range(400))
    ctx = mp.get_context("spawn")
    for round_ in range(3):
        variants = [base.replace(f"word{7 + round_} ", "changed "), base.replace(f"word{30 + round_} ", "other ")]
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_worker,
                             args=(shared_target, [(f"https://w{w}.example/{round_}", variants[w])], barrier,
                                   out))
                 for w in range(2)]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(60)
        flat = [r for res in results for r in res]
        assert len({cluster for _, _, cluster in flat}) == 1, flat
    with Detector.open(shared_target) as det:
        # every worker's committed page is visible; all variants in one cluster, one canonical
        assert det.stats()["pages"] == 6
        v = det.check("https://third.example/x", base)
        members = det.cluster(present(v.cluster_id))
        assert len(members) == 6
        assert det.store.cluster_canonical(present(v.cluster_id)) in {m.id for m in members}


def test_a_check_sees_what_another_worker_committed(shared_target):
    a, b = Detector.open(shared_target), Detector.open(shared_target)
    text = " ".join(f"t{i}" for i in range(300))
    assert b.check("https://b.example/", text).status == "new"
    a.add("https://a.example/", text)
    seen = b.check("https://b.example/", text)
    assert seen.status == "exact" and seen.match_url == "https://a.example/"
    a.add("https://a.example/", " ".join(f"u{i}" for i in range(300)))  # a's page changes
    assert b.check("https://b.example/", text).status == "new"
    a.close()
    b.close()


# -- connection failures name their cause, within a few seconds ---------------------------------

def _silent_port():
    """A local port that accepts TCP connections and never answers (a hung server)."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def test_connection_failures_name_their_cause_quickly(pg_server):
    import time
    from urllib.parse import urlsplit, urlunsplit

    from neardup.store.postgres import PostgresStore, connect_cause

    silent = _silent_port()
    parts = urlsplit(pg_server)
    cases = {
        "no such database": urlunsplit(parts._replace(path="/neardup_no_such_database")),
        "connection refused": "postgresql://127.0.0.1:1/x",
        "timed out": f"postgresql://127.0.0.1:{silent.getsockname()[1]}/x",
    }
    try:
        for cause, dsn in cases.items():
            started = time.monotonic()
            with pytest.raises(neardup.StoreError) as err:
                PostgresStore(dsn)
            assert cause in str(err.value) and "\n" not in str(err.value), (cause, str(err.value))
            assert time.monotonic() - started < 4.0, cause
    finally:
        silent.close()
    assert connect_cause('FATAL:  password authentication failed for user "x"').startswith("authentication failed")

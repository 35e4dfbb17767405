"""``neardup serve --workers 2`` as a real subprocess, over SQLite and over PostgreSQL.

Several threads add pages at the same time through :class:`neardup.Client`: real pages of
``examples/sample`` (URLs from its ``urls.tsv``) and synthetic texts. Two of the threads are
*pinned*: each keeps one keep-alive connection that was accepted by a known worker process
(found through ``/proc``), so near duplicates are sent to the two workers at the same moment.
Afterwards every acknowledged page must be visible to checks answered by either worker, and
near duplicates added concurrently through different workers must share one cluster.
"""

from __future__ import annotations

import csv
import gzip
import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import neardup
from neardup import Client
from neardup.matching import Side, pair_rule
from neardup.model import DEFAULT_K, DEFAULT_VERIFY

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples" / "sample"
PLAIN = {"content-type": "text/plain"}
K = DEFAULT_K

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(),
                                reason="needs Linux /proc to see which worker answers")


# -- the server and its workers ------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline:
            out.append(int(entry))
    return sorted(out)


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    workers: list[int]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_of(self, client_port: int) -> int | None:
        """The worker process holding the server end of the connection from ``client_port``."""
        inode = None
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == self.port and int(remote.split(":")[1], 16) == client_port:
                inode = fields[9]
                break
        if inode is None:
            return None
        for pid in self.workers:
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                            return pid
                    except OSError:
                        continue
            except OSError:
                continue
        return None


@contextmanager
def serve(db: str, workers: int = 2) -> Iterator[Server]:
    """``python -m neardup.cli serve --workers N`` in its own process group; killed (the
    whole group: supervisor and workers) at the end whatever happens."""
    port = _free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed when the server stops
    proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", db, "--port", str(port),
                             "--workers", str(workers)],
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        deadline = time.time() + 90
        kids: list[int] = []
        while time.time() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"server exited with {proc.returncode}: {log.read().decode()[-3000:]}")
            kids = _children(proc.pid)
            try:
                if len(kids) == workers and httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError("server did not start in 90 s")
        yield Server(proc, port, kids)
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers left behind, if any
        except ProcessLookupError:
            pass
        proc.wait()
        log.seek(0)
        errors = log.read().decode("utf-8", "replace")
        log.close()
        assert "Traceback" not in errors, errors[-3000:]


class PinnedTransport(httpx.BaseTransport):
    """One keep-alive connection, never silently reopened (it would land on any worker)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.auto_open = 0
        self.conn.connect()
        self.local_port = self.conn.sock.getsockname()[1]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        self.conn.request(request.method, request.url.raw_path.decode("ascii"), body=body,
                          headers=dict(request.headers))
        resp = self.conn.getresponse()
        content = resp.read()
        return httpx.Response(resp.status, headers=resp.getheaders(), content=content)

    def close(self) -> None:
        self.conn.close()


def pinned_clients(server: Server, per_worker: int = 1) -> dict[int, list[Client]]:
    """``per_worker`` Clients for each worker process, each on a connection that worker
    accepted (the kernel hands a new connection to whichever worker accepts first, often
    the same one). The server closes a connection idle for 5 s, so the ones found early are
    kept busy while the search goes on."""
    found: dict[int, list[tuple[Client, float]]] = {pid: [] for pid in server.workers}
    deadline = time.time() + 60
    while any(len(v) < per_worker for v in found.values()):
        counts = {p: len(v) for p, v in found.items()}
        assert time.time() < deadline, f"too few connections reached the workers: {counts}"
        transport = PinnedTransport(server.port)
        client = Client(server.url, transport=transport)
        assert client.stats()["spec"]  # the connection is accepted and served
        pid = server.worker_of(transport.local_port)
        if pid is not None and len(found[pid]) < per_worker:
            found[pid].append((client, time.time()))
        else:
            client.close()
        for entries in found.values():
            for i, (c, used) in enumerate(entries):
                if time.time() - used > 2:
                    c.stats()
                    entries[i] = (c, time.time())
    return {pid: [c for c, _ in entries] for pid, entries in found.items()}


def in_parallel(work: dict[int, tuple[list, list[Client]]]) -> list[str]:
    """For every worker: run its ``job(client)`` jobs, one thread per client of that worker,
    all workers at once (an idle connection would be closed). Failures come back as strings."""
    failures: list[str] = []
    lock = threading.Lock()
    queues = {pid: list(reversed(jobs)) for pid, (jobs, _) in work.items()}

    def worker(pid: int, client: Client) -> None:
        while True:
            with lock:
                if not queues[pid]:
                    return
                job = queues[pid].pop()
            try:
                job(client)
            except Exception as exc:  # noqa: BLE001 - collected and reported
                with lock:
                    failures.append(f"{job.__doc__}: {type(exc).__name__}: {exc}")
                return  # this connection may be unusable now

    threads = [threading.Thread(target=worker, args=(pid, c)) for pid, (_, clients) in work.items() for c in clients]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a client thread hung"
    return failures


# -- what is added ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Doc:
    url: str
    content: str
    headers: dict[str, str] | None
    fp: neardup.Fingerprint
    group: str = ""
    probe: str = ""  # synthetic docs: a slightly edited copy, within K bits of this one


def _words(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.choice('bcdfghklmnprstvz')}{rng.choice('aeiou')}{rng.randrange(10**6):06d}" for _ in range(n)]


def _text_doc(url: str, words: list[str], rng: random.Random, group: str = "") -> Doc:
    text = " ".join(words)
    fp = neardup.fingerprint(text, url, PLAIN)
    for _ in range(50):  # a one-word edit that stays within K bits (nearly all do)
        edited = list(words)
        edited[rng.randrange(len(words))] = "edited"
        probe = " ".join(edited)
        other = neardup.fingerprint(probe, url, PLAIN)
        if other.digest != fp.digest and neardup.hamming(fp, other) <= K:
            return Doc(url, text, PLAIN, fp, group, probe)
    raise AssertionError("no one-word edit within K bits")


@pytest.fixture(scope="module")
def docs() -> dict[str, list]:
    rng = random.Random(20240611)
    # real pages: every row of urls.tsv; a URL captured more than once gets ?capture=DATE so
    # that each capture is its own page (the same URL would replace the stored version)
    with open(SAMPLE_DIR / "urls.tsv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    seen: dict[str, int] = {}
    for row in rows:
        seen[row["url"]] = seen.get(row["url"], 0) + 1
    real = []
    for row in rows:
        url = row["url"] if seen[row["url"]] == 1 else f"{row['url']}?capture={row['captured']}"
        html = gzip.decompress((SAMPLE_DIR / row["file"]).read_bytes()).decode("utf-8", "replace")
        real.append(Doc(url, html, None, neardup.fingerprint(html, url), row["group"]))
    # synthetic unique pages for the free-running threads
    unique = [_text_doc(f"https://load{t}.example/p{i}", _words(rng, 150), rng) for t in range(4) for i in range(15)]
    # synthetic near-duplicate pairs, one member to each worker at the same moment
    pairs = []
    for i in range(12):
        a = _text_doc(f"https://pair-a.example/{i}", _words(rng, 200), rng, f"pair{i}")
        b = Doc(f"https://pair-b.example/{i}", a.probe, PLAIN, neardup.fingerprint(a.probe, "", PLAIN), f"pair{i}")
        assert a.fp.digest != b.fp.digest and neardup.hamming(a.fp, b.fp) <= K
        pairs.append((a, b))
    return {"real": real, "unique": unique, "pairs": pairs}


def _near_groups(real: list[Doc]) -> tuple[list[list[Doc]], list[Doc]]:
    """Groups of urls.tsv whose members all match each other and nothing outside (they must
    end up in one cluster of their own), and pages that match nothing (alone)."""
    def match(a: Doc, b: Doc) -> bool:  # the service's rule at its defaults (SimHash at k, the sketch bands)
        return pair_rule(Side.of(a.fp, a.url), Side.of(b.fp, b.url), K, DEFAULT_VERIFY).status is not None

    groups: dict[str, list[Doc]] = {}
    for d in real:
        groups.setdefault(d.group, []).append(d)
    cliques = []
    for members in groups.values():
        inside = all(match(a, b) for a in members for b in members if a is not b)
        outside = any(match(a, b) for a in members for b in real if b.group != a.group)
        if len(members) > 1 and inside and not outside:
            cliques.append(members)
    alone = [d for d in real if not d.fp.empty and not any(match(d, o) for o in real if o is not d)]
    return cliques, alone


# -- the tests --------------------------------------------------------------------------------
def run_concurrent_workers(db: str, docs: dict[str, list]) -> None:
    real, unique, pairs = docs["real"], docs["unique"], docs["pairs"]
    every = real + unique + [d for p in pairs for d in p]
    cliques, alone = _near_groups(real)
    assert len(cliques) >= 3 and len(alone) >= 3, (len(cliques), len(alone))  # the sample has these
    acked: dict[str, tuple[Doc, neardup.Verdict]] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def record(doc: Doc, v: neardup.Verdict) -> None:
        assert v.page_id is not None and v.url == doc.url, v
        with lock:
            acked[doc.url] = (doc, v)

    with serve(db, workers=2) as server:
        # (idle keep-alive connections are closed by the server after 5 s, and a reopened one
        # may land on the other worker: each phase opens its own pinned connections)
        (_, (client_a,)), (_, (client_b,)) = sorted(pinned_clients(server).items())

        # 1. concurrent adds: 4 free-running threads (plain Clients, any worker) and two
        # pinned threads, one per worker, that send the members of each synthetic pair and
        # of each urls.tsv group at the same moment (a barrier starts every round)
        def free_running(t: int) -> None:
            try:
                with Client(server.url) as client:
                    for doc in unique[t::4]:
                        record(doc, client.add(doc.url, doc.content, doc.headers))
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                errors.append(f"thread {t}: {type(exc).__name__}: {exc}")

        rounds: list[tuple[Doc | None, Doc | None]] = [(a, b) for a, b in pairs]
        by_group: dict[str, list[Doc]] = {}
        for d in real:
            by_group.setdefault(d.group, []).append(d)
        for members in by_group.values():
            for j in range(0, len(members), 2):
                rounds.append((members[j], members[j + 1] if j + 1 < len(members) else None))
        barrier = threading.Barrier(2)

        def pinned_thread(client: Client, side: int) -> None:
            try:
                for pair in rounds:
                    barrier.wait(timeout=60)
                    doc = pair[side]
                    if doc is not None:
                        record(doc, client.add(doc.url, doc.content, doc.headers))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"pinned {side}: {type(exc).__name__}: {exc}")
                barrier.abort()

        threads = [threading.Thread(target=free_running, args=(t,)) for t in range(4)]
        threads += [threading.Thread(target=pinned_thread, args=(client_a, 0)),
                    threading.Thread(target=pinned_thread, args=(client_b, 1))]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert not any(th.is_alive() for th in threads), "a client thread hung"
        assert errors == []
        assert sorted(acked) == sorted(d.url for d in every)
        assert {v.status for _, v in acked.values()} <= {"new", "near", "exact", "empty"}
        client_a.close()
        client_b.close()
        LATENCY.setdefault("median", _keep_alive_median(server))

        # 2. every acknowledged page is visible through both workers: counts, the stored page,
        # an exact check (store lookup) and a check of an edited copy (each worker's index)
        pinned = pinned_clients(server, per_worker=3)
        for pid, clients in pinned.items():
            stats = clients[0].stats()
            assert stats["pages"] == len(every), (pid, stats)
            assert stats["exact"] + stats["near"] + stats["new"] + stats["empty"] == len(every), stats

        def visible(doc: Doc, v: neardup.Verdict, pid: int):
            def job(client: Client) -> None:
                got = client.check(doc.url, doc.content, doc.headers)  # a version of a stored URL
                assert (got.status, got.version, got.page_id) == (v.status, "unchanged", v.page_id), \
                    (pid, doc.url, got)
                assert got.match_url != doc.url, (pid, doc.url, got)
                if doc in unique:
                    got = client.check(doc.url.replace("load", "probe"), doc.probe, PLAIN)
                    assert got.status == "near" and got.cluster_id == v.cluster_id, (pid, doc.url, got)
            job.__doc__ = f"worker {pid} checking {doc.url}"
            return job

        work = {pid: ([visible(doc, v, pid) for doc, v in acked.values()], clients) for pid, clients in pinned.items()}
        assert in_parallel(work) == []
        for pid, clients in pinned.items():  # the connections stayed with their workers
            for client in clients:
                assert server.worker_of(client._http._transport.local_port) == pid
                client.close()

        # 3. near duplicates sent at the same moment to different workers share one cluster,
        # with exactly one 'new' member, as both workers report
        (_, (client_a,)), (_, (client_b,)) = sorted(pinned_clients(server).items())
        for a, b in pairs:
            va, vb = acked[a.url][1], acked[b.url][1]
            assert va.cluster_id == vb.cluster_id, (a.url, va, b.url, vb)
            assert sorted([va.status, vb.status]) == ["near", "new"], (va, vb)
            views = [client.cluster(va.cluster_id) for client in (client_a, client_b)]
            assert views[0] == views[1]
            assert len(views[0]) == 2 and {m.url for m in views[0]} == {a.url, b.url}
            info = client_a.cluster_info(va.cluster_id)
            assert info is not None and info["canonical_url"] in (a.url, b.url)
        for members in cliques:
            ids = {acked[d.url][1].cluster_id for d in members}
            assert len(ids) == 1, [(d.url, acked[d.url][1]) for d in members]
            for client in (client_a, client_b):
                cluster = client.cluster(next(iter(ids)))
                assert {m.url for m in cluster} == {d.url for d in members}
                assert sum(m.status == "new" for m in cluster) == 1, cluster
        for d in alone:
            v = acked[d.url][1]
            assert v.status == "new" and len(client_b.cluster(v.cluster_id)) == 1, (d.url, v)
        client_a.close()
        client_b.close()


def test_two_workers_sqlite(tmp_path, docs):
    run_concurrent_workers(str(tmp_path / "workers.db"), docs)


def test_two_workers_postgres(pg_dsn, docs):
    run_concurrent_workers(pg_dsn, docs)


LATENCY: dict[str, float] = {}  # measured by the first test that has a server up


def _keep_alive_median(server: Server) -> float:
    """Median time of 15 GET /healthz on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", "/healthz")
    conn.getresponse().read()
    latencies = []
    for _ in range(15):
        start = time.perf_counter()
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b'{"status":"ok"}'
        latencies.append(time.perf_counter() - start)
    conn.close()
    return sorted(latencies)[len(latencies) // 2]


def test_keep_alive_latency_with_workers(tmp_path):
    """uvicorn's own --workers listener has proto 0, so asyncio never sets TCP_NODELAY and each
    keep-alive response waits ~40 ms for a delayed ACK (Kludex/uvicorn#3149); neardup serve
    creates the socket as IPPROTO_TCP."""
    if "median" not in LATENCY:  # run alone: start a server of its own
        with serve(str(tmp_path / "lat.db"), workers=2) as server:
            LATENCY["median"] = _keep_alive_median(server)
    assert LATENCY["median"] < 0.030, f"median {LATENCY['median'] * 1000:.1f} ms per keep-alive request"

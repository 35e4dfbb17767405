"""Issues 24 and 25 on the service side: a hostile page is killed with its worker while other
requests are answered, /metrics never waits for the decision lock, the fingerprint routes
verify with the sketch, a repeated Authorization header is refused, idle and half-sent
connections are closed, and ``serve`` says where it listens."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from checks import present
from fastapi.testclient import TestClient

import neardup
from neardup import Client, Detector, InputError
from neardup.service import HEADER_TIMEOUT, create_app

TEXT = " ".join(f"word{i}" for i in range(300))
# 240,000 short paragraphs (2.6 MB, under every guard's limit, so parsed in full): over a
# second of extraction (the attribute bombs of issue 25 are now cut by neardup.fingerprint.guards)
BOMB = "<html><body>" + "<p>two words</p>" * 240_000 + "<p>" + TEXT + "</p></body></html>"


def test_a_slow_page_is_killed_and_its_worker_replaced_while_healthz_answers():
    det = Detector()
    app = create_app(det, page_timeout=0.3, page_workers=1)
    pool = app.state.service.pool

    async def scenario() -> tuple[httpx.Response, list[float], httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            await c.post("/v1/check", json={"url": "https://warm.example/", "text": TEXT})  # start the worker
            first = pool._all[0].proc.pid
            slow = asyncio.create_task(c.post("/v1/check", json={"url": "https://bomb.example/", "html": BOMB}))
            waits = []
            while not slow.done():
                t = time.perf_counter()
                assert (await c.get("/healthz")).status_code == 200
                waits.append(time.perf_counter() - t)
                await asyncio.sleep(0.02)
            after = await c.post("/v1/pages", json={"url": "https://ok.example/", "text": TEXT})
            assert pool._all[0].proc.pid != first  # replaced
            return slow.result(), waits, after

    try:
        slow, waits, after = asyncio.run(scenario())
    finally:
        pool.close()
    assert slow.status_code == 422
    assert slow.json()["type"] == "InputError" and "0.3 s" in slow.json()["error"]
    assert waits and max(waits) < 0.5
    assert after.status_code == 200 and after.json()["status"] == "new"


def test_a_slow_page_in_a_batch_is_one_error(tmp_path):
    det = Detector()
    app = create_app(det, page_timeout=0.3, page_workers=2, metrics_max_age=0)
    try:
        with TestClient(app) as c:
            pages = [{"url": "https://a.example/", "text": TEXT}, {"url": "https://bomb.example/", "html": BOMB},
                     {"url": "https://b.example/", "text": TEXT}]
            out = c.post("/v1/pages/batch", json={"pages": pages}).json()["verdicts"]
            assert [v["status"] for v in out] == ["new", "error", "exact"]
            assert "per-page time limit" in out[1]["error"]
            assert "neardup_page_timeouts_total 1.0" in c.get("/metrics").text
    finally:
        app.state.service.pool.close()


def test_dedup_workers_have_the_same_per_page_limit():
    from neardup.ingest.workers import fingerprint_pages
    from neardup.model import Page

    pages = [Page("https://a.example/1", TEXT), Page("https://bomb.example/", BOMB), Page("https://a.example/2", TEXT)]
    out = list(fingerprint_pages(pages, jobs=2, page_timeout=0.3))
    assert [r[0] for r in out] == ["https://a.example/1", "https://bomb.example/", "https://a.example/2"]
    assert out[0][1] is not None and out[2][1] is not None
    assert out[1][1] is None and "per-page time limit" in present(out[1][2])


def test_metrics_never_wait_for_the_decision_lock():
    det = Detector()
    app = create_app(det, stats_interval=0, metrics_max_age=0)
    with TestClient(app) as c:
        c.post("/v1/pages", json={"url": "https://a.example/", "text": TEXT})
        lock = app.state.service.lock
        with lock:  # a decision that never ends holds the lock: /metrics answers all the same
            got: list[str] = []
            reader = threading.Thread(target=lambda: got.append(c.get("/metrics").text), daemon=True)
            reader.start()
            reader.join(60)  # a /metrics that waited for the lock would wait here for ever
            assert got, "/metrics waited for the decision lock"
            text = got[0]
        assert 'neardup_verdicts_total{op="add",status="new"} 1.0' in text
        for _ in range(100):  # the store figures: counted in the background once the lock is free
            if "neardup_clusters 1.0" in c.get("/metrics").text:
                break
            time.sleep(0.05)
        assert 'neardup_pages{status="new"} 1.0' in c.get("/metrics").text
    app.state.service.pool.close()


def test_a_metrics_flood_renders_at_most_once_per_max_age():
    app = create_app(Detector(), metrics_max_age=60)
    with TestClient(app) as c:
        first = c.get("/metrics").text
        c.get("/healthz")
        assert c.get("/metrics").text == first  # the same text for a minute: a flood costs one render
    app.state.service.pool.close()


def _fp_body(url: str, fp: neardup.Fingerprint, sketch: bytes | None) -> dict:
    body = {"url": url, "simhash": fp.simhash_hex, "digest": fp.digest, "spec": fp.spec, "tokens": fp.tokens,
            "title": fp.title}
    if sketch is not None:
        body["sketch"] = sketch.hex()
    return body


def test_fingerprint_routes_verify_with_the_sketch():
    det = Detector()
    with TestClient(create_app(det)) as c:
        stored = det.fingerprint(TEXT)
        assert c.post("/v1/fingerprints/add", json=_fp_body("https://a.example/", stored, stored.sketch)).json()[
            "status"] == "new"
        other = det.fingerprint(" ".join(f"other{i}" for i in range(300)))
        forged = stored.simhash ^ 0b10110  # 3 bits from a stored page, another digest, an unrelated sketch
        fake = neardup.Fingerprint(simhash=forged, digest="ab" * 32, spec=stored.spec, tokens=stored.tokens)
        r = c.post("/v1/fingerprints/check", json=_fp_body("https://b.example/", fake, other.sketch))
        assert r.status_code == 200 and r.json()["status"] == "new"  # the sketch refutes the SimHash
        near = c.post("/v1/fingerprints/check", json=_fp_body("https://b.example/", fake, stored.sketch))
        assert near.json()["status"] == "near"  # the same forgery with the stored page's sketch
        for route in ("/v1/fingerprints/check", "/v1/fingerprints/add"):
            missing = c.post(route, json=_fp_body("https://c.example/", stored, None))
            assert missing.status_code == 422 and missing.json()["type"] == "InputError"
            assert "sketch" in missing.json()["error"]
        short = c.post("/v1/fingerprints/check",
                       json=_fp_body("https://c.example/", stored, present(stored.sketch)[:20]))
        assert short.status_code == 422 and short.json()["type"] == "InputError"
        for route in ("/v1/fingerprints/check/batch", "/v1/fingerprints/add/batch"):
            batch = {"fingerprints": [_fp_body("https://d.example/", stored, stored.sketch),
                                      _fp_body("https://e.example/", stored, None)]}
            r = c.post(route, json=batch)
            assert r.status_code == 422 and "fingerprints.1.sketch" in r.json()["error"]
        assert det.store.page_count() == 1
        bad_hex = c.post("/v1/fingerprints/check", json={**_fp_body("https://c.example/", stored, None),
                                                          "sketch": "zz" * 64})
        assert bad_hex.status_code == 422 and bad_hex.json()["type"] == "ValidationError"


def test_the_client_sends_the_sketch():
    det = Detector()
    app = create_app(det)
    with TestClient(app) as tc:
        client = Client("http://testserver", transport=tc._transport)
        fp = det.fingerprint(TEXT)
        assert client.add_fingerprint("https://a.example/", fp).status == "new"
        assert client.check_fingerprint("https://b.example/", fp).status == "exact"
        unsketched = neardup.Fingerprint(simhash=fp.simhash, digest=fp.digest, spec=fp.spec, tokens=fp.tokens)
        with pytest.raises(InputError, match="sketch"):
            client.check_fingerprint("https://b.example/", unsketched)


def test_a_repeated_authorization_header_is_refused():
    det = Detector()
    with TestClient(create_app(det, token="s3cret")) as c:
        good = ("authorization", "Bearer s3cret")
        ok = c.get("/v1/stats", headers=[good])
        assert ok.status_code == 200
        for headers in ([("authorization", "Bearer wrong"), good], [good, ("authorization", "Bearer wrong")],
                        [good, good], []):
            r = c.get("/v1/stats", headers=headers)
            assert r.status_code == 401 and r.json()["type"] == "Unauthorized", headers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serve(tmp_path: Path, *options: str):
    """``neardup serve`` in its own process group; yields the port and its first line of output."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", str(tmp_path / "s.db"),
                             "--port", str(port), *options], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        for _ in range(600):
            assert proc.poll() is None, f"the server exited with {proc.returncode}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield port, line
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _closed_after(conn: socket.socket, limit: float) -> float | None:
    """Seconds until the server closes ``conn`` (None: still open after ``limit``)."""
    start = time.monotonic()
    conn.settimeout(limit)
    try:
        while conn.recv(65536):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


@pytest.mark.parametrize("workers", ["1", "2"])
def test_idle_and_half_sent_connections_are_closed_and_serve_says_where(tmp_path, workers):
    with _serve(tmp_path, "--token", "T", "--workers", workers) as (port, line):
        assert line.startswith(f"neardup serve: http://127.0.0.1:{port} store={tmp_path / 's.db'} workers={workers}")
        assert "token=True" in line and "k=" in line and "page_timeout=" in line and "T " not in line
        idle = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Le")
        results: dict[str, float | None] = {}
        threads = [threading.Thread(target=lambda n=n, c=c: results.__setitem__(n, _closed_after(c, 30)))
                   for n, c in (("idle", idle), ("half", half))]
        for t in threads:
            t.start()
        # meanwhile real requests are answered
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        for t in threads:
            t.join()
        idle.close()
        half.close()
        assert results["idle"] is not None and results["idle"] < HEADER_TIMEOUT + 3
        assert results["half"] is not None and results["half"] < HEADER_TIMEOUT + 3
        # the workers' counters are shared (prometheus_client's multiprocess mode): whichever
        # worker answers /metrics counts every worker's requests
        for _ in range(20):
            with httpx.Client(headers={"Authorization": "Bearer T"}) as fresh:  # new connections
                assert fresh.get(f"http://127.0.0.1:{port}/v1/stats").status_code == 200
        time.sleep(1.1)  # past the render cache
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert 'neardup_requests_total{code="200",route="/v1/stats"} 20.0' in text


def test_past_the_connection_limit_the_longest_idle_connection_makes_room():
    """With the file descriptors of idle sockets at the limit, a real request still gets in:
    the longest-idle connection is closed to make room (none idle: the new one gets 503)."""
    import uvicorn

    from neardup.service.server import GuardedHttpToolsProtocol

    class Small(GuardedHttpToolsProtocol):
        connection_limit = 5

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(Detector()), host="127.0.0.1", port=port, http=Small,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            time.sleep(0.05)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        time.sleep(0.2)
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert r.status_code == 200
        with socket.create_connection(("127.0.0.1", port)) as garbage:  # not HTTP: a JSON 400 with its type
            garbage.sendall(b"\x00\x01 nonsense\r\n\r\n")
            answer = garbage.recv(65536)
            assert answer.startswith(b"HTTP/1.1 400") and b'"type": "BadRequest"' in answer
        with socket.create_connection(("127.0.0.1", port)) as huge:  # headers past 64 KiB: 431
            huge.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000)
            answer = huge.recv(65536)
            assert answer.startswith(b"HTTP/1.1 431") and b'"type": "HeadersTooLarge"' in answer
        closed = [_closed_after(s, 0.5) is not None for s in idle]
        assert closed.count(True) >= 1, closed  # an idle one was closed to make room
        for s in idle:
            s.close()
    finally:
        server.should_exit = True
        thread.join(10)

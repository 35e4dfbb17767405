"""The HTTP service under hostile input (issue 11): a JSON error for every failure, strict
field validation, the body-read deadline, the cap on work in flight, bounded /metrics and the
token for everything with ``private``."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import neardup
from neardup import Detector, FingerprintConfig
from neardup.service import create_app

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample" / "pages"


def html(name: str) -> str:
    return gzip.open(SAMPLE / f"{name}.html.gz").read().decode("utf-8", "replace")


@pytest.fixture()
def client(tmp_path):
    det = Detector.open(tmp_path / "s.db")
    with TestClient(create_app(det, max_body=4 * 1024 * 1024, metrics_max_age=0)) as c:
        yield c, det
    det.close()


def one_line_json_error(r, *codes):
    assert r.status_code in codes, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err and "\n" not in err
    return err


@pytest.mark.parametrize("path", ["/v1/pages/99999999999999999999", "/v1/clusters/99999999999999999999",
                                  "/v1/pages/-1", "/v1/clusters/-5", f"/v1/pages/{2**63}"])
def test_huge_and_negative_ids_are_404(client, path):
    c, _ = client
    assert "no " in one_line_json_error(c.get(path), 404)


def test_non_integer_id_is_422(client):
    c, _ = client
    one_line_json_error(c.get("/v1/pages/abc"), 422)


def _fp_body(det, **changes):
    fp = det.fingerprint(html("cnbc-cybersecurity-2019"), "https://www.cnbc.com/a")
    return {"url": "https://www.cnbc.com/a", "simhash": fp.simhash_hex, "digest": fp.digest, "spec": fp.spec,
            "tokens": fp.tokens, "length": fp.length, "sketch": fp.sketch.hex(), **changes}


@pytest.mark.parametrize("changes, needle", [
    ({"simhash": "-1"}, "hexadecimal"),
    ({"simhash": "-" + "f" * 15}, "hexadecimal"),
    ({"simhash": "0x12"}, "hexadecimal"),
    ({"simhash": "12 34"}, "hexadecimal"),
    ({"simhash": ""}, "simhash"),
    ({"digest": "-" + "a" * 63}, "sha-256"),
    ({"digest": " " + "a" * 63}, "sha-256"),
    ({"digest": "_" * 64}, "sha-256"),
    ({"digest": "a" * 63}, "digest"),
    ({"length": -1}, "length"),
    ({"length": 2**63}, "length"),
    ({"tokens": -3}, "tokens"),
    ({"tokens": 2**64}, "tokens"),
    ({"tokens": True}, "tokens"),
    ({"tokens": "12"}, "tokens"),
    ({"features": 1.5}, "features"),
    ({"title": "a\ud800b"}, "title: input should be a valid string, unable to parse raw data as a unicode"),
    ({"canonical_url": "https://x.example/\udc00"}, "canonical_url: input should be a valid string"),
    ({"url": "https://x.example/\udc00"}, "url: input should be a valid string"),
    ({"fetched_at": 1e400}, "fetched_at"),
    ({"priority": 10**400}, "priority"),
    ({"language": "x" * 100}, "language"),
])
def test_fingerprint_fields_are_validated_strictly(client, changes, needle):
    c, det = client
    for path in ("/v1/fingerprints/add", "/v1/fingerprints/check"):
        err = one_line_json_error(c.post(path, content=json.dumps(_fp_body(det, **changes)),
                                         headers={"content-type": "application/json"}), 422)
        assert needle in err.lower()
    assert det.store.page_count() == 0


@pytest.mark.parametrize("simhash, needle", [("f" * 15, "16 hex digits"), ("f" * 17, "more than 64 bits"),
                                             ("0" * 17, "16 hex digits")])
def test_simhash_of_the_wrong_width_is_refused(client, simhash, needle):
    c, det = client
    r = c.post("/v1/fingerprints/add", json=_fp_body(det, simhash=simhash))
    assert needle in one_line_json_error(r, 400)
    batch = c.post("/v1/fingerprints/add/batch", json={"fingerprints": [_fp_body(det, simhash=simhash), _fp_body(det)]})
    assert [v["status"] for v in batch.json()["verdicts"]] == ["error", "new"]


def test_surrogates_in_pages(tmp_path):
    det = Detector(config=FingerprintConfig(extractor="fast"))
    with TestClient(create_app(det)) as c:
        page = html("cnbc-cybersecurity-2019").replace("<body", "<body \ud800", 1)
        r = c.post("/v1/pages", content=json.dumps({"url": "https://www.cnbc.com/a", "html": page}),
                   headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["status"] == "new"
        r = c.post("/v1/pages", content=json.dumps({"url": "https://www.cnbc.com/\ud800", "html": "<p>x</p>"}),
                   headers={"content-type": "application/json"})
        assert "url: input should be a valid string" in one_line_json_error(r, 422).lower()


def test_deeply_nested_json_body(client):
    c, _ = client
    r = c.post("/v1/pages", content=b"[" * 100_000 + b"]" * 100_000, headers={"content-type": "application/json"})
    one_line_json_error(r, 400, 422)
    r = c.post("/v1/pages", content=b'{"url": "https://a.example/", "html": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
               headers={"content-type": "application/json"})
    one_line_json_error(r, 400, 422)


def test_unexpected_errors_are_json_500(client, monkeypatch):
    c, det = client

    def broken():
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(det, "stats", broken)
    err = one_line_json_error(c.get("/v1/stats"), 500)
    assert "RuntimeError" in err and "simulated" not in err  # no internals leaked
    assert c.get("/healthz").status_code == 200  # still serving


def test_metrics_are_bounded_and_not_injectable(client):
    c, _ = client
    c.get("/healthz")
    c.get("/v1/x")  # the series of unmatched 404s exists; more unknown paths must not add any
    base = len(c.get("/metrics").text)
    for i in range(300):
        c.get(f"/v1/x{i}" + "y" * 2000)
    app = c.app

    async def empty():
        return {"type": "http.request", "body": b"", "more_body": False}

    for path in ('/v1/x"} 1\nneardup_injected_total{src="attacker"} 42\n#', '/v1/pages/"} 1\n'):
        scope = {**_scope(path, 0), "method": "GET"}
        assert asyncio.run(_call(app, scope, empty))[0] in (404, 422)
    text = c.get("/metrics").text
    assert "injected" not in text and "attacker" not in text and "yyyy" not in text
    assert len(text) < base + 4000  # at most the series of the routes the two paths fell in
    for i in range(300):  # the same again: only the counts change
        c.get(f"/v1/z{i}" + "y" * 2000)
    assert len(c.get("/metrics").text) < len(text) + 200
    for line in text.splitlines():
        assert line.startswith(("#", "neardup_"))
    assert 'code="404",route="unmatched"' in text


def test_private_requires_the_token_for_metrics_and_docs(tmp_path):
    det = Detector()
    with pytest.raises(neardup.ConfigError):
        create_app(det, private=True)
    with TestClient(create_app(det, token="s3cret", private=True)) as c:
        for path in ("/metrics", "/docs", "/openapi.json", "/v1/stats"):
            assert one_line_json_error(c.get(path), 401)
            assert c.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200, path
        assert c.get("/healthz").status_code == 200
    with TestClient(create_app(det, token="s3cret")) as c:
        assert c.get("/metrics").status_code == 200  # public unless private
        for wrong in (b"Bearer s3cre", b"Bearer s3crett", b"bearer s3cret", b"s3cret", b"Bearer \xc3\xa9", b""):
            r = c.get("/v1/stats", headers={"Authorization": wrong})
            one_line_json_error(r, 401)


# -- ASGI-level: a slow body and work in flight ------------------------------------------------

def _scope(path: str = "/v1/check", length: int | None = 1000) -> dict:
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}


async def _call(app, scope, receive):
    sent = []

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), json.loads(body)


def test_slow_body_is_cut_with_408():
    app = create_app(Detector(), body_timeout=0.3)
    stall = asyncio.Event()

    async def slow_receive():
        if not stall.is_set():
            stall.set()
            return {"type": "http.request", "body": b"{", "more_body": True}
        await asyncio.Event().wait()  # the rest never comes

    status, headers, body = asyncio.run(_call(app, _scope(), slow_receive))
    assert status == 408 and "not received within 0.3 s" in body["error"]
    assert headers[b"connection"] == b"close"


def test_work_in_flight_is_capped_with_503():
    app = create_app(Detector(), max_inflight=1, max_inflight_bytes=10_000)

    async def scenario():
        release = asyncio.Event()
        started = asyncio.Event()

        async def held_receive():
            started.set()
            await release.wait()
            return {"type": "http.request", "body": json.dumps({"url": "https://a.example/", "text": "a b"}).encode(),
                    "more_body": False}

        async def quick_receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        first = asyncio.create_task(_call(app, _scope(length=None), held_receive))
        await started.wait()
        busy = await _call(app, _scope(length=2), quick_receive)
        release.set()
        done = await first
        after = await _call(app, _scope(length=2), quick_receive)
        too_big = await _call(app, _scope(length=20_000), quick_receive)
        return busy, done, after, too_big

    busy, done, after, too_big = asyncio.run(scenario())
    assert busy[0] == 503 and busy[1][b"retry-after"] == b"1" and "busy" in busy[2]["error"]
    assert done[0] == 200 and after[0] == 422  # the cap is released when a request ends
    assert too_big[0] == 503 and "bodies in flight" in too_big[2]["error"]



def test_a_refused_body_is_read_and_discarded_before_the_503():
    """A body over the in-flight byte cap: the 503 comes after the body was read to its end
    (a client still uploading gets it rather than a reset) and keeps the connection; chunks
    are dropped as they come. Before: answered at once with ``Connection: close``."""
    app = create_app(Detector(), max_inflight_bytes=10_000)

    def chunks(n: int, size: int = 4096):
        pending = [{"type": "http.request", "body": b"x" * size, "more_body": i < n - 1} for i in range(n)]

        async def receive():
            return pending.pop(0) if pending else {"type": "http.disconnect"}
        return receive, pending

    declared, left = chunks(10)  # Content-Length 40,960 > 10,000
    status, headers, body = asyncio.run(_call(app, _scope(length=40_960), declared))
    assert status == 503 and headers[b"retry-after"] == b"1" and b"connection" not in headers
    assert not left  # all read
    chunked, left = chunks(10)  # no Content-Length: passes the cap while arriving
    status, headers, body = asyncio.run(_call(app, _scope(length=None), chunked))
    assert status == 503 and b"connection" not in headers and not left
    gone, _ = chunks(0)  # the client leaves while the body is drained: the answer closes
    status, headers, _ = asyncio.run(_call(app, _scope(length=40_960), gone))
    assert status == 503 and headers[b"connection"] == b"close"
    waiting, left = chunks(10)  # Expect: 100-continue: not asked for the body, answered at once
    scope = _scope(length=40_960)
    scope["headers"].append((b"expect", b"100-continue"))
    status, headers, _ = asyncio.run(_call(app, scope, waiting))
    assert status == 503 and headers[b"connection"] == b"close" and len(left) == 10

# -- a real server: a slowloris connection is answered and closed --------------------------------

def test_real_server_cuts_a_slowloris_body(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", str(tmp_path / "s.db"),
                             "--port", str(port), "--body-timeout", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        import time

        import httpx

        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
            conn.sendall(b"POST /v1/pages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{")
            data = b""
            while True:  # the server answers and closes: recv returns b"" (a hang would time out)
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"HTTP/1.1 408")
        assert b"not received within 1 s" in data
    finally:
        proc.kill()
        proc.wait()


def test_client_waits_and_retries_when_busy():
    import httpx

    calls = []

    def handler(request):
        calls.append(request.url.path)
        if len(calls) < 3:
            return httpx.Response(503, json={"error": "busy: 64 requests in flight; retry shortly"},
                                  headers={"retry-after": "0"})
        return httpx.Response(200, json={"pages": 0, "clusters": 0})

    with neardup.Client("http://svc", transport=httpx.MockTransport(handler)) as client:
        assert client.stats() == {"pages": 0, "clusters": 0} and len(calls) == 3
    calls.clear()

    def always_busy(request):
        calls.append(request.url.path)
        return httpx.Response(503, json={"error": "busy"}, headers={"retry-after": "0"})

    with neardup.Client("http://svc", transport=httpx.MockTransport(always_busy), retries=1) as client:
        with pytest.raises(neardup.StoreLockedError, match="busy"):
            client.stats()
    assert len(calls) == 2

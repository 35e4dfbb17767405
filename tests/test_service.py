"""The HTTP service and the Client: every endpoint, every error, a real server, kill -9."""

from __future__ import annotations

import gzip
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
from fastapi.testclient import TestClient

import neardup
from neardup import Client, Detector, InputError, SpecMismatchError
from neardup.service import create_app

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample" / "pages"


def html(name: str) -> str:
    return gzip.open(SAMPLE / f"{name}.html.gz").read().decode("utf-8", "replace")


@pytest.fixture()
def app_client(tmp_path):
    det = Detector.open(tmp_path / "s.db")
    with TestClient(create_app(det, max_body=4 * 1024 * 1024)) as c:
        yield c, det
    det.close()


def test_add_check_cluster_host_and_page(app_client):
    c, det = app_client
    v1 = c.post("/v1/pages", json={"url": "https://www.nytimes.com/a", "html": html("nytimes-nikki-haley-2018")})
    assert v1.status_code == 200 and v1.json()["status"] == "new"
    before = det.store.page_count()
    chk = c.post("/v1/check", json={"url": "https://mirror.example/a", "html": html("nytimes-nikki-haley-2019")})
    assert chk.status_code == 200
    assert chk.json()["status"] == "near" and chk.json()["match_url"] == "https://www.nytimes.com/a"
    assert det.store.page_count() == before  # check wrote nothing
    v2 = c.post("/v1/pages", json={"url": "https://mirror.example/a", "html": html("nytimes-nikki-haley-2019")}).json()
    assert v2["status"] == "near" and v2["cluster_id"] == v1.json()["cluster_id"]
    cluster = c.get(f"/v1/clusters/{v2['cluster_id']}").json()
    assert cluster["size"] == 2 and cluster["canonical_url"] == "https://www.nytimes.com/a"
    joined = {m["url"]: m for m in cluster["members"]}
    assert joined["https://mirror.example/a"]["matched_id"] == v1.json()["page_id"]
    assert joined["https://mirror.example/a"]["distance"] == v2["distance"]
    page = c.get(f"/v1/pages/{v1.json()['page_id']}").json()
    assert page["url"] == "https://www.nytimes.com/a" and len(page["simhash"]) == 16
    host = c.get("/v1/hosts/mirror.example").json()
    assert host["pages"] == 1 and host["near"] == 1 and host["duplicate_rate"] == 1.0
    stats = c.get("/v1/stats").json()
    assert stats["pages"] == 2 and stats["spec"] == det.config.spec
    assert c.get("/healthz").json() == {"status": "ok"}
    metrics = c.get("/metrics").text
    assert 'neardup_requests_total{code="200",route="/v1/pages"} 2.0' in metrics
    assert 'neardup_verdicts_total{op="add",status="near"} 1.0' in metrics
    assert c.get("/openapi.json").json()["info"]["title"] == "neardup"


def test_batches_and_per_page_errors(app_client):
    c, _ = app_client
    pages = [{"url": "https://www.npr.org/a", "html": html("npr-dylann-roof-2016")},
             {"url": "not a url", "html": "<p>x</p>"},
             {"url": "https://mirror.example/npr", "html": html("npr-dylann-roof-2022")},
             {"url": "https://t.example/plain", "text": " ".join(f"w{i}" for i in range(100))}]
    out = c.post("/v1/pages/batch", json={"pages": pages}).json()["verdicts"]
    assert [v["status"] for v in out] == ["new", "error", "near", "new"]
    assert "whitespace" in out[1]["error"]
    chk = c.post("/v1/check/batch", json={"pages": pages[:1]}).json()["verdicts"]
    assert (chk[0]["status"], chk[0]["version"], chk[0]["match_url"]) == ("new", "unchanged", None)


def test_fingerprint_endpoints_use_the_documented_spec(app_client):
    c, det = app_client
    fp = det.fingerprint(html("cnbc-cybersecurity-2019"), "https://www.cnbc.com/x")
    body = {"url": "https://www.cnbc.com/x", "simhash": fp.simhash_hex, "digest": fp.digest, "spec": fp.spec,
            "tokens": fp.tokens, "sketch": fp.sketch.hex(), "title": fp.title}
    assert c.post("/v1/fingerprints/add", json=body).json()["status"] == "new"
    again = c.post("/v1/fingerprints/check", json={**body, "url": "https://other.example/x"}).json()
    assert again["status"] == "exact"
    wrong = c.post("/v1/fingerprints/check", json={**body, "spec": "neardup-simhash/0;f=64"})
    assert wrong.status_code == 409 and "spec" in wrong.json()["error"]
    empty = c.post("/v1/fingerprints/check", json={**body, "url": "https://e.example/", "tokens": 2})
    assert empty.json()["status"] == "empty"


def test_fingerprint_batches_in_one_request(app_client):
    c, det = app_client
    names = ["cnbc-cybersecurity-2019", "npr-dylann-roof-2016", "npr-dylann-roof-2022"]
    fps = [det.fingerprint(html(n), "https://x.example/") for n in names]

    def body(url, fp, **extra):
        return {"url": url, "simhash": fp.simhash_hex, "digest": fp.digest, "spec": fp.spec, "tokens": fp.tokens,
                "sketch": fp.sketch.hex(), **extra}

    items = [body("https://a.example/1", fps[0], priority=2.0), body("bad url", fps[0]),
             body("https://a.example/2", fps[1], fetched_at=1.7e9),
             body("https://b.example/3", fps[2]),  # a near copy of the item before it, same batch
             {**body("https://a.example/4", fps[0]), "simhash": "f" * 40}]  # more than 64 bits
    added = c.post("/v1/fingerprints/add/batch", json={"fingerprints": items}).json()["verdicts"]
    assert [v["status"] for v in added] == ["new", "error", "new", "near", "error"]
    assert "whitespace" in added[1]["error"] and "64 bits" in added[4]["error"]
    assert added[3]["match_url"] == "https://a.example/2"
    assert det.store.page_count() == 3
    assert det.store.page_by_url("https://a.example/2").fetched_at == 1.7e9
    checked = c.post("/v1/fingerprints/check/batch", json={"fingerprints": [
        body("https://c.example/1", fps[0]), body("https://c.example/2", fps[2]),
        body("https://c.example/3", fps[0], spec="other-spec")]}).json()["verdicts"]
    assert [v["status"] for v in checked] == ["exact", "exact", "error"]
    assert "spec" in checked[2]["error"]
    assert det.store.page_count() == 3  # check wrote nothing
    # same answers as one request each
    for it, v in zip(items[:1] + items[2:4], [checked[0], None, checked[1]]):
        if v is not None:
            assert c.post("/v1/fingerprints/check", json={**it, "url": v["url"]}).json()["match_id"] == v["match_id"]
    small = {k: v for k, v in items[0].items() if k != "sketch"}
    too_many = c.post("/v1/fingerprints/check/batch", json={"fingerprints": [small] * 10001})
    assert too_many.status_code == 422 and "error" in too_many.json()


def test_unknown_routes_methods_and_chunked_bodies_get_json_errors(app_client):
    c, _ = app_client
    r = c.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json() == {"error": "Not Found", "type": "NotFound"}
    r = c.get("/v1/pages")
    assert r.status_code == 405 and r.json() == {"error": "Method Not Allowed", "type": "MethodNotAllowed"}
    r = c.get("/v1/pages/123456")
    assert r.status_code == 404 and r.json()["type"] == "NotFound"
    r = c.post("/v1/pages", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["type"] == "ValidationError"
    r = c.post("/v1/pages", json={"url": "https://a.example/", "html": "x", "text": "y"})
    assert r.status_code == 422 and r.json()["type"] == "ValidationError"

    def chunks():  # no Content-Length: the limit is enforced on what arrives
        for _ in range(5):
            yield b"x" * (1024 * 1024)
    r = c.post("/v1/pages", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "over the" in r.json()["error"]
    r = c.post("/v1/pages", content=iter([b'{"url": "https://a.example/",', b' "text": "' + b"w " * 40 + b'"}']),
               headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["status"] == "new"
    metrics = c.get("/metrics").text
    assert 'code="413",route="/v1/pages"' in metrics and 'code="200",route="/v1/pages"' in metrics


@pytest.mark.parametrize(("payload", "code", "needle"), [
    ({"url": "https://a.example/", "html": "<p>x</p>", "text": "x"}, 422, "exactly one"),
    ({"html": "<p>x</p>"}, 422, "url"),
    ({"url": "https://a.example/", "simhash": "zz", "digest": "0" * 64, "spec": "s", "tokens": 1}, 422, "hex"),
    ({"url": "ftp//bad", "html": "<p>hello</p>"}, 400, "URL"),
    ({"url": "https://a.example/", "html": "%PDF-1.7 binary"}, 200, ""),  # str content is text, not bytes
])
def test_errors_are_json_one_liners(app_client, payload, code, needle):
    c, _ = app_client
    path = "/v1/fingerprints/check" if "simhash" in payload else "/v1/pages"
    r = c.post(path, json=payload)
    assert r.status_code == code, r.text
    if code >= 400:
        err = r.json()["error"]
        assert needle.lower() in err.lower() and "\n" not in err


def test_malformed_json_unknown_ids_and_body_limit(app_client):
    c, _ = app_client
    r = c.post("/v1/pages", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "error" in r.json()
    assert c.get("/v1/pages/999").status_code == 404
    assert c.get("/v1/clusters/999").json()["error"] == "no cluster with id 999"
    assert c.get("/v1/hosts/nowhere.example").status_code == 404
    big = {"url": "https://a.example/", "html": "x" * (5 * 1024 * 1024)}
    r = c.post("/v1/pages", json=big)
    assert r.status_code == 413 and "limit" in r.json()["error"]


def test_bearer_token(tmp_path):
    det = Detector()
    with TestClient(create_app(det, token="s3cret")) as c:
        assert c.post("/v1/check", json={"url": "https://a.example/", "text": "hello world"}).status_code == 401
        ok = c.post("/v1/check", json={"url": "https://a.example/", "text": "hello world"},
                    headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert c.get("/healthz").status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(db: Path | str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "neardup.cli", "serve", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server died")
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_client_against_a_real_server_and_kill_9(tmp_path, request, backend):
    """Every add the server acknowledged before a SIGKILL is stored and indexed after a
    restart, on the embedded store and on the shared PostgreSQL and Redis ones."""
    db = tmp_path / "svc.db" if backend == "sqlite" else request.getfixturevalue(
        "pg_dsn" if backend == "postgres" else "redis_url")
    port = _free_port()
    proc = _start_server(db, port)
    acknowledged: list[str] = []
    try:
        with Client(f"http://127.0.0.1:{port}") as client:
            first = client.add("https://www.politico.com/a", html("politico-vp-debate-2016").encode())
            assert first.status == "new"
            near = client.check("https://mirror.example/p", html("politico-vp-debate-2022"))
            assert near.status == "near" and near.match_url == "https://www.politico.com/a"
            fp = neardup.fingerprint(html("politico-vp-debate-2016"), config=neardup.DEFAULT_CONFIG)
            assert client.check_fingerprint("https://x.example/", fp).status == "exact"
            many = client.check_fingerprints([("https://x.example/", fp), ("https://y.example/", fp)])
            assert [v.status for v in many] == ["exact", "exact"]
            added = client.add_fingerprints([("https://z.example/", fp, 1.6e9, 3.0), ("nope", fp)])
            assert [v.status for v in added] == ["exact", "error"]
            assert added[0].version is None and added[0].match_url == "https://www.politico.com/a"
            with pytest.raises(SpecMismatchError):
                client.check_fingerprint("https://x.example/", neardup.fingerprint(
                    "some words", config=neardup.FingerprintConfig(extractor="fast")))
            with pytest.raises(neardup.URLError):  # what the Detector raises for it
                client.add("bad url", "text")
            with pytest.raises(InputError):
                client.add("https://x.example/png", b"\x89PNG\r\n\x1a\n" + bytes(200))
            assert len(client.cluster(first.cluster_id)) == 2  # with z.example, added above
            assert client.page(10**9) is None
            acknowledged.append("https://www.politico.com/a")
            # a load of adds; SIGKILL arrives from another thread while requests are in flight
            killer = threading.Timer(1.5, os.kill, (proc.pid, signal.SIGKILL))
            killer.start()
            for i in range(100000):
                text = " ".join(f"doc{i}w{j}" for j in range(60))
                v = client.add(f"https://load.example/{i}", text)
                assert v.status == "new"
                acknowledged.append(f"https://load.example/{i}")
    except neardup.StoreError:
        pass  # the request in flight at the kill is not acknowledged
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert len(acknowledged) > 20  # the kill came in the middle of the load
    proc = _start_server(db, port)
    try:
        with Client(f"http://127.0.0.1:{port}") as client:
            assert client.stats()["pages"] >= len(acknowledged)
            for url in acknowledged[1:]:
                i = int(url.rsplit("/", 1)[1])
                text = " ".join(f"doc{i}w{j}" for j in range(60))
                v = client.check(url, text)
                assert (v.status, v.version) == ("new", "unchanged") and v.page_id is not None  # stored
                assert client.check("https://copy.example/x", text).match_url == url  # and indexed
    finally:
        proc.kill()
        proc.wait()


def test_docs_work_offline(app_client):
    """/docs loads Swagger UI from the service itself (the swagger-ui-bundle package), never
    from a CDN."""
    c, _ = app_client
    r = c.get("/docs")
    assert r.status_code == 200
    assert "http://" not in r.text.replace("http://localhost", "") and "https://" not in r.text
    for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"):
        assert asset in r.text
        got = c.get(asset)
        assert got.status_code == 200 and len(got.content) > 10_000


def test_openapi_describes_every_answer(app_client):
    spec = app_client[0].get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            ok = op["responses"]["200"]["content"]
            schema = next(iter(ok.values()))["schema"]
            assert schema.get("$ref") or schema.get("type") == "string", (method, path)
            if "$ref" in schema:
                name = schema["$ref"].rsplit("/", 1)[1]
                assert schemas[name]["properties"], name
            if path.startswith("/v1/"):
                assert "422" in op["responses"] and "401" in op["responses"], (method, path)
    assert set(schemas["VerdictOut"]["properties"]) == set(neardup.Verdict.__dataclass_fields__)

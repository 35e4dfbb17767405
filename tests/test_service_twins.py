"""The Detector's before-the-fetch, rules, hosts, expiry and cluster-info operations over
HTTP: each route with the TestClient, and through ``neardup.Client`` against the same app,
which must answer (and fail) as the Detector does."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from neardup import Client, Detector
from neardup.client import NotFoundError, ServiceError
from neardup.errors import ConfigError, InputError, URLError
from neardup.service import create_app

TEXT = " ".join(f"word{i}" for i in range(400))
OTHER = " ".join(f"other{i}" for i in range(400))


@pytest.fixture()
def twins():
    det = Detector()
    for i in range(5):
        det.add(f"https://a.example/p?sid={i}", TEXT, fetched_at=1000.0 + i)
    det.add("https://b.example/x", OTHER, fetched_at=time.time())
    with TestClient(create_app(det)) as http:
        client = Client("http://testserver", transport=http._transport)
        yield det, http, client
        client.close()


def _steady(rows):  # joins_per_hour decays with the clock between two calls
    for r in rows:
        if r.get("largest_cluster"):
            r["largest_cluster"].pop("joins_per_hour")
    return rows


def test_should_fetch_route_and_client(twins):
    det, http, client = twins
    for url in ("https://a.example/p?sid=99", "https://a.example/p?sid=3", "https://a.example/q",
                "https://b.example/x"):
        want = det.should_fetch(url)
        r = http.get("/v1/should-fetch", params={"url": url})
        assert r.status_code == 200 and r.json() == want.to_dict()
        assert client.should_fetch(url) == want
    assert client.should_fetch("https://b.example/x", max_age=1e9).reason == "fresh"
    fresh = http.get("/v1/should-fetch", params={"url": "https://b.example/x", "max_age": 1e9})
    assert fresh.json()["reason"] == "fresh"
    d = client.should_fetch("https://a.example/zzz", host_max_duplicate_rate=0.5, host_min_pages=3)
    assert d == det.should_fetch("https://a.example/zzz", host_max_duplicate_rate=0.5, host_min_pages=3)
    assert (d.fetch, d.reason) == (False, "host-budget")


def test_should_fetch_bad_url_same_error(twins):
    det, http, client = twins
    with pytest.raises(URLError) as embedded:
        det.should_fetch("not a url")
    r = http.get("/v1/should-fetch", params={"url": "not a url"})
    assert r.status_code == 400 and r.json() == {"error": str(embedded.value), "type": "URLError"}
    with pytest.raises(URLError, match="URL"):
        client.should_fetch("not a url")
    assert http.get("/v1/should-fetch").status_code == 422  # url is required


def test_rules_routes_and_client(twins):
    det, http, client = twins
    want = [r.to_dict() for r in det.rules()]
    assert want and want[0]["rule"] == "drop-param:sid"
    assert http.get("/v1/rules").json() == {"rules": want}
    assert [r.to_dict() for r in client.rules()] == want and client.rules() == det.rules()  # Rule objects
    host = [r.to_dict() for r in det.rules("a.example")]
    assert http.get("/v1/hosts/A.example/rules").json() == {"host": "a.example", "rules": host}
    assert [r.to_dict() for r in client.rules("a.example")] == host
    assert client.rules("nowhere.example") == [] == det.rules("nowhere.example")


def test_hosts_route_and_client(twins):
    det, http, client = twins
    rows = _steady(det.hosts())
    body = http.get("/v1/hosts").json()
    assert body["total"] == 2 and body["offset"] == 0 and _steady(body["hosts"]) == rows
    page = http.get("/v1/hosts", params={"top": 1, "offset": 1, "sort": "pages"}).json()
    assert _steady(page["hosts"]) == _steady(det.hosts(sort="pages"))[1:2] and page["total"] == 2
    assert _steady(client.hosts(top=1, sort="pages")) == _steady(det.hosts(top=1, sort="pages"))
    assert _steady(client.hosts(offset=1, sort="pages")) == _steady(det.hosts(sort="pages"))[1:]
    assert _steady(client.hosts(window=3600)) == _steady(det.hosts(window=3600))
    assert [h["host"] for h in client.hosts(window=3600)] == ["b.example"]
    assert client.hosts(trap_members=2)[0]["trap"] == det.hosts(trap_members=2)[0]["trap"]
    with pytest.raises(ConfigError) as embedded:
        det.hosts(sort="nonsense")
    r = http.get("/v1/hosts", params={"sort": "nonsense"})
    assert r.status_code == 400 and r.json()["type"] == "ConfigError"
    with pytest.raises(ConfigError, match="unknown sort"):
        client.hosts(sort="nonsense")
    assert str(embedded.value) == r.json()["error"]


def test_expire_route_and_client(twins):
    det, http, client = twins
    with pytest.raises(ConfigError) as embedded:
        det.expire(-1.0)
    r = http.post("/v1/expire", json={"older_than": -1})
    assert r.status_code == 400 and r.json() == {"error": str(embedded.value), "type": "ConfigError"}
    with pytest.raises(ConfigError):
        client.expire(-1)
    assert http.post("/v1/expire", json={}).status_code == 422
    with pytest.raises(ServiceError) as bad:
        client._call("POST", "/v1/expire", {"older_than": "soon"})
    assert bad.value.status == 422
    assert http.post("/v1/expire", json={"older_than": 100 * 365 * 86400}).json() == {"expired": 0}
    assert client.expire(3600) == 5  # the five a.example pages of 1970
    assert det.stats()["pages"] == 1
    assert http.post("/v1/expire", json={"older_than": 0}).json() == {"expired": 1}


def test_cluster_info_route_and_client(twins):
    det, http, client = twins
    cid = det.should_fetch("https://a.example/p?sid=1").cluster_id
    want = det.cluster_info(cid, at=2000.0)
    assert want is not None and want["size"] == 5
    assert http.get(f"/v1/clusters/{cid}/info", params={"at": 2000.0}).json() == want
    assert client.cluster_info(cid, at=2000.0) == want
    assert client.cluster_info(10**9) is None and det.cluster_info(10**9) is None
    r = http.get("/v1/clusters/1000000000/info")
    assert r.status_code == 404 and "no cluster" in r.json()["error"]
    assert client.cluster(10**9) == [] == det.cluster(10**9) and client.page(10**9) is None
    assert client.cluster(cid) == det.cluster(cid)  # PageRecords, as stored (but the MinHash signature)
    first = det.cluster(cid)[0]
    assert first.id is not None and client.page(first.id) == det.page(first.id)
    assert client.host("a.example") == det.host("a.example")
    assert client.thresholds("https://a.example/x") == det.thresholds("https://a.example/x")
    assert client.learn_rules() == det.learn_rules()
    fp = client.fingerprint(" ".join(f"w{i}" for i in range(50)), "https://a.example/x")
    assert fp == det.fingerprint(" ".join(f"w{i}" for i in range(50)), "https://a.example/x")
    with pytest.raises(NotFoundError):
        client._call("GET", "/v1/nowhere")


def test_openapi_lists_the_new_routes(twins):
    _, http, _ = twins
    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/v1/should-fetch", "/v1/rules", "/v1/hosts", "/v1/hosts/{host}/rules", "/v1/expire",
                 "/v1/clusters/{cluster_id}/info"):
        assert path in paths


@pytest.mark.parametrize("body", [b"\x89PNG\r\n\x1a\n" + bytes(300), b"%PDF-1.7\n" + b"stream" * 50,
                                  b"<html><p>" + b"\x00" * 50 + b"text</p></html>"])
def test_binary_bodies_fail_alike(twins, body):
    det, _, client = twins
    with pytest.raises(InputError) as embedded:
        det.check("https://c.example/bin", body)
    with pytest.raises(InputError) as remote:
        client.check("https://c.example/bin", body)
    assert str(remote.value) == str(embedded.value)

"""neardup.Client's before-the-fetch calls against the route spec (a mock transport that
answers from a real Detector, as the service route is specified to)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote

import httpx
import pytest

pytest.importorskip("httpx")

from neardup import (
    Client,  # noqa: E402
    Detector,  # noqa: E402
)

TEXT = " ".join(f"word{i}" for i in range(400))


@pytest.fixture()
def det_client():
    det = Detector()
    for i in range(5):
        det.add(f"https://a.example/p?sid={i}", TEXT, fetched_at=1000.0 + i)
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        q = {k: v[0] for k, v in parse_qs(request.url.query.decode()).items()}
        path = request.url.path
        if path == "/v1/should-fetch":
            extra: dict[str, Any] = {}
            if "max_age" in q:
                extra["max_age"] = float(q["max_age"])
            if "host_max_duplicate_rate" in q:
                extra["host_max_duplicate_rate"] = float(q["host_max_duplicate_rate"])
                extra["host_min_pages"] = int(q["host_min_pages"])
            return httpx.Response(200, json=det.should_fetch(q["url"], **extra).to_dict())
        if path == "/v1/rules":
            return httpx.Response(200, json={"rules": [r.to_dict() for r in det.rules()]})
        if path.startswith("/v1/hosts/") and path.endswith("/rules"):
            host = unquote(path.split("/")[3])
            return httpx.Response(200, json={"host": host, "rules": [r.to_dict() for r in det.rules(host)]})
        if path == "/v1/hosts":
            rows = det.hosts(sort=q.get("sort", "duplicate_rate"),
                             window=float(q["window"]) if "window" in q else None)
            off = int(q.get("offset", 0))
            top = int(q["top"]) if "top" in q else len(rows)
            return httpx.Response(200, json={"hosts": rows[off:off + top], "total": len(rows), "offset": off})
        return httpx.Response(404, json={"error": "not found"})

    client = Client("http://neardup.test", transport=httpx.MockTransport(handler))
    yield det, client, seen
    client.close()


def test_should_fetch_over_http_matches_the_detector(det_client):
    det, client, seen = det_client
    for url in ("https://a.example/p?sid=99", "https://a.example/p?sid=3", "https://a.example/q"):
        assert client.should_fetch(url) == det.should_fetch(url)
    d = client.should_fetch("https://a.example/p?sid=99&x=1", host_max_duplicate_rate=0.5, host_min_pages=3)
    assert (d.fetch, d.reason) == (False, "host-budget")
    assert seen[-1].url.path == "/v1/should-fetch"
    assert parse_qs(seen[-1].url.query.decode())["url"] == ["https://a.example/p?sid=99&x=1"]
    assert client.should_fetch("https://a.example/p?sid=0", max_age=1e12).reason in ("fresh", "known")


def test_rules_and_hosts_over_http(det_client):
    det, client, seen = det_client
    assert [r.name for r in client.rules()] == ["drop-param:sid"]
    assert client.rules("a.example")[0].support == 4
    assert seen[-1].url.path == "/v1/hosts/a.example/rules"
    def steady(rows):  # joins_per_hour decays with the clock between the two calls
        for r in rows:
            r["largest_cluster"].pop("joins_per_hour")
        return rows

    assert steady(client.hosts(top=5)) == steady(det.hosts(top=5))
    assert parse_qs(seen[-1].url.query.decode()) == {"sort": ["duplicate_rate"], "top": ["5"]}

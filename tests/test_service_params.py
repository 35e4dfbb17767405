"""The service's parameters are validated as the CLI's options and the Detector's arguments
are (one definition of each range, neardup.model): the same ConfigError through the Detector,
the service (400) and the Client; the host route normalises its host as stored keys are; and
should-fetch echoes the URL as given beside its key on every face."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from neardup import Client, Detector
from neardup.cli.main import main
from neardup.crawl.signals import host_key
from neardup.errors import ConfigError
from neardup.model import DEFAULT_HOST_MIN_PAGES, MIN_HOST_PAGES, MIN_TRAP_MEMBERS
from neardup.service import create_app

TEXT = " ".join(f"word{i}" for i in range(400))
OTHER = " ".join(f"other{i}" for i in range(400))
IDN = "https://bücher.example/a"


@pytest.fixture()
def store(tmp_path):
    db = tmp_path / "s.db"
    det = Detector.open(db)
    for i in range(4):
        det.add(f"https://a.example/p?sid={i}", TEXT, fetched_at=1000.0 + i)
    det.add(IDN, OTHER, fetched_at=2000.0)
    det.close()
    return db


@pytest.fixture()
def twins(store):
    det = Detector.open(store)
    with TestClient(create_app(det)) as http:
        client = Client("http://testserver", transport=http._transport)
        yield det, http, client
        client.close()
    det.close()


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def same_error(http, path, params, call):
    """The route answers 400 with the ConfigError the Detector raises (the same message)."""
    with pytest.raises(ConfigError) as embedded:
        call()
    r = http.get(path, params=params)
    assert r.status_code == 400, (path, params, r.text)
    assert r.json() == {"error": str(embedded.value), "type": "ConfigError"}
    return str(embedded.value)


@pytest.mark.parametrize(
    "params, kwargs",
    [
        ({"max_age": -1}, {"max_age": -1.0}),
        ({"max_age": "inf"}, {"max_age": float("inf")}),
        ({"max_age": "nan"}, {"max_age": float("nan")}),
        ({"host_min_pages": 0}, {"host_min_pages": 0}),
        ({"host_min_pages": -1}, {"host_min_pages": -1}),
        ({"host_min_pages": 0, "host_max_duplicate_rate": 0.5}, {"host_min_pages": 0, "host_max_duplicate_rate": 0.5}),
        ({"host_max_duplicate_rate": 1.5}, {"host_max_duplicate_rate": 1.5}),
    ],
)
def test_should_fetch_parameters(twins, params, kwargs):
    det, http, client = twins
    url = "https://a.example/q"
    message = same_error(http, "/v1/should-fetch", {"url": url, **params}, lambda: det.should_fetch(url, **kwargs))
    if "nan" not in message:
        with pytest.raises(ConfigError) as over_http:
            client.should_fetch(url, **kwargs)
        assert str(over_http.value) == message


@pytest.mark.parametrize(
    "params, kwargs",
    [
        ({"trap_members": 0}, {"trap_members": 0}),
        ({"trap_members": -5}, {"trap_members": -5}),
        ({"window": 0}, {"window": 0.0}),
        ({"window": -1}, {"window": -1.0}),
        ({"window": "inf"}, {"window": float("inf")}),
        ({"at": -1}, {"at": -1.0}),
        ({"at": 1e18}, {"at": 1e18}),
    ],
)
def test_host_parameters(twins, params, kwargs):
    det, http, client = twins
    message = same_error(http, "/v1/hosts", params, lambda: det.hosts(**kwargs))
    assert same_error(http, "/v1/hosts/a.example", params, lambda: det.host("a.example", **kwargs)) == message
    with pytest.raises(ConfigError):
        client.hosts(**kwargs)
    with pytest.raises(ConfigError):
        client.host("a.example", **kwargs)


def test_counts_that_are_bools_are_refused_by_the_library_and_the_client(twins):
    det, _, client = twins
    for side in (det, client):
        with pytest.raises(ConfigError, match="trap_members"):
            side.hosts(trap_members=True)
        with pytest.raises(ConfigError, match="host_min_pages"):
            side.should_fetch("https://a.example/q", host_min_pages=True)


def test_expire_takes_a_number_of_seconds(twins):
    det, http, client = twins
    for bad in (True, "3600", None):
        r = http.post("/v1/expire", json={"older_than": bad})
        assert r.status_code == 422 and "older_than" in r.json()["error"]
    with pytest.raises(ConfigError) as embedded:
        det.expire(-1.0)
    r = http.post("/v1/expire", json={"older_than": -1})
    assert r.status_code == 400 and r.json() == {"error": str(embedded.value), "type": "ConfigError"}
    assert det.stats()["pages"] == 5


def test_the_edges_of_the_ranges_are_accepted(twins):
    det, http, client = twins
    assert MIN_TRAP_MEMBERS == MIN_HOST_PAGES == 1
    assert http.get("/v1/hosts", params={"trap_members": 1, "window": 1e-9, "at": 0}).status_code == 200
    r = http.get(
        "/v1/should-fetch",
        params={"url": "https://a.example/q", "max_age": 0, "host_min_pages": 1, "host_max_duplicate_rate": 1.0},
    )
    assert r.status_code == 200
    assert client.should_fetch("https://a.example/q", max_age=0, host_min_pages=1) == det.should_fetch(
        "https://a.example/q", max_age=0, host_min_pages=1
    )
    assert client.hosts(trap_members=1)


def test_the_cli_refuses_what_the_service_refuses(store):
    for args in (
        ("should-fetch", "https://a.example/q", "--max-age", "-1"),
        ("should-fetch", "https://a.example/q", "--host-min-pages", "0"),
        ("should-fetch", "https://a.example/q", "--host-min-pages", "-1"),
        ("hosts", "--trap-members", "0"),
        ("hosts", "--trap-members", "-5"),
        ("hosts", "--window", "0"),
        ("hosts", "--window", "-1"),
    ):
        r = run(*args, "--db", store)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith(("neardup: error:", "Error:")), r.stderr
    assert run("should-fetch", "https://a.example/q", "--db", store).exit_code == 0
    help_text = run("should-fetch", "--help").output
    assert f"[default: {DEFAULT_HOST_MIN_PAGES}; x>={MIN_HOST_PAGES}]" in " ".join(help_text.split())


# -- the host route ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["bücher.example", "BÜCHER.EXAMPLE", "Bücher.Example.", "xn--bcher-kva.example", "XN--BCHER-KVA.EXAMPLE"]
)
def test_the_host_route_normalises_its_host_as_stored_keys_are(twins, name):
    det, http, client = twins
    assert host_key(name) == "xn--bcher-kva.example"
    r = http.get(f"/v1/hosts/{name}")
    assert r.status_code == 200, r.text
    assert r.json()["host"] == "xn--bcher-kva.example" and r.json()["pages"] == 1
    row = det.host(name)
    assert row is not None and row["pages"] == 1
    found = client.host(name)
    assert found is not None and found["host"] == "xn--bcher-kva.example"
    rules = http.get(f"/v1/hosts/{name}/rules")
    assert rules.status_code == 200 and rules.json()["host"] == "xn--bcher-kva.example"
    assert client.rules(name) == det.rules(name) == det.rules("xn--bcher-kva.example")


@pytest.mark.parametrize("name", ["nowhere.example", "a b", "a/b", "[::1]", "::1", "x" * 300])
def test_the_host_route_answers_404_for_a_host_without_pages(twins, name):
    det, http, client = twins
    assert det.host(name) is None and client.host(name) is None
    assert http.get("/v1/hosts/" + name.replace("/", "%2F")).status_code == 404


def test_ipv6_hosts_are_found_as_stored(tmp_path):
    det = Detector()
    det.add("http://[::1]:8080/a", TEXT)  # an origin: the address and its port
    assert det.host("[::1]:8080") is not None and det.host("[::1]") is None
    det.add("http://[::1]/b", TEXT + " more")  # the default port: the address alone
    assert det.host("[::1]") is not None and det.host("::1") is not None
    with TestClient(create_app(det)) as http:
        assert http.get("/v1/hosts/[::1]").status_code == 200
        assert http.get("/v1/hosts/[::1]:8080").json()["pages"] == 1


def test_the_cli_rules_and_hosts_of_an_idn_host(store):
    r = run("hosts", "--db", store, "--format", "json")
    assert "xn--bcher-kva.example" in [h["host"] for h in json.loads(r.stdout)]
    assert run("rules", "--db", store, "--host", "BÜCHER.EXAMPLE").exit_code == 0


# -- should-fetch: the URL as given and its key -----------------------------------------------
GIVEN = (
    "https://a.example/p?sid=0",
    "https://a.example/p?sid=0&utm_source=feed",
    "HTTPS://A.EXAMPLE/p?sid=0#top",
    "https://a.example/new",
    "https://a.example/new?utm_source=feed",
    "https://BÜCHER.example/a",
)


def test_should_fetch_echoes_the_url_as_given_beside_its_key(twins, store):
    det, http, client = twins
    decisions = [det.should_fetch(u) for u in GIVEN]
    assert [d.url for d in decisions] == list(GIVEN)
    assert [d.key for d in decisions] == ["https://a.example/p?sid=0"] * 3 + ["https://a.example/new"] * 2 + [
        "https://xn--bcher-kva.example/a"
    ]
    assert decisions[0].reason == decisions[1].reason == decisions[2].reason
    for url, want in zip(GIVEN, decisions):
        r = http.get("/v1/should-fetch", params={"url": url})
        assert r.status_code == 200 and r.json() == want.to_dict()
        assert r.json()["url"] == url and r.json()["key"] == want.key
        assert client.should_fetch(url) == want
    r = run("should-fetch", "--db", store, *GIVEN)
    assert r.exit_code == 0, r.output
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [line["url"] for line in lines] == list(GIVEN)
    assert [line["key"] for line in lines] == [d.key for d in decisions]
    assert lines == [d.to_dict() for d in decisions]


def test_should_fetch_of_a_bad_url_keeps_the_url_as_given(store):
    r = run("should-fetch", "--db", store, "https://a.example/x", "not a url")
    assert r.exit_code == 1
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [line["url"] for line in lines] == ["https://a.example/x", "not a url"] and "error" in lines[1]


def test_the_openapi_description_names_the_key(twins):
    _, http, _ = twins
    schema = http.get("/openapi.json").json()["components"]["schemas"]["FetchDecisionOut"]["properties"]
    assert "key" in schema and "url" in schema

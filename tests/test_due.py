"""The store's due URLs (``Detector.due``, ``GET /v1/due``, ``Client.due``, ``neardup due``): the
pages a recrawl should fetch, so that it reaches the pages behind pages still fresh, whose links
a crawl that follows links never sees again (issue 38, item 1)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from neardup import Client, Detector
from neardup.cli.main import main
from neardup.errors import ConfigError
from neardup.service import create_app

T0 = 1.7e9


def words(tag: str, n: int = 400) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def crawl(det: Detector) -> None:
    """Three contents: ``/a`` (with a copy), ``/b`` fetched three times unchanged (so it has a
    next planned fetch), ``/c`` whose rel=canonical names its copy ``/c-main``."""
    det.add("https://s.example/a", words("a"), fetched_at=T0)
    det.add("https://s.example/a-copy", words("a"), fetched_at=T0 + 1)
    for i in range(3):
        det.add("https://s.example/b", words("b"), fetched_at=T0 + 3600.0 * i)
    det.add("https://s.example/c", words("c"), fetched_at=T0 + 2)
    main = f'<html><head><link rel="canonical" href="https://s.example/c-main"></head><body><p>{words("c")}</p>'
    det.add("https://s.example/c-main", main, fetched_at=T0 + 3)


def test_due_are_the_kept_contents_not_fresh():
    det = Detector()
    crawl(det)
    history = det.history("https://s.example/b")
    assert history is not None and history.next_fetch is not None and history.next_fetch > T0 + 7200
    early = det.due(at=T0 + 7201)
    # the originals and the canonical (a copy named by rel=canonical) are due; the copy is not,
    # nor /b before its next planned fetch
    assert early == ["https://s.example/a", "https://s.example/c", "https://s.example/c-main"]
    later = det.due(at=history.next_fetch + 1)
    assert later == sorted([*early, "https://s.example/b"])
    assert det.should_fetch("https://s.example/a-copy").reason == "known-duplicate"


def test_due_pages_through_the_store():
    det = Detector()
    for i in range(25):
        det.add(f"https://p.example/{i:02d}", words(f"p{i}x"), fetched_at=T0 + i)
    got: list[str] = []
    after = None
    while True:
        page = det.due(limit=7, after=after)
        got += page
        if len(page) < 7:
            break
        after = page[-1]
    assert got == [f"https://p.example/{i:02d}" for i in range(25)]
    assert det.due(after="https://p.example/24") == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"limit": 0}, "limit"), ({"limit": 100_001}, "at most"), ({"at": float("nan")}, "at"),
    ({"limit": True}, "limit"), ({"after": 5}, "after")])
def test_bad_arguments_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Detector().due(**kwargs)


def test_the_service_and_the_client_answer_as_the_detector():
    det = Detector()
    crawl(det)
    with TestClient(create_app(det)) as http:
        client = Client("http://testserver", transport=http._transport)
        at = T0 + 7201
        assert client.due(at=at) == det.due(at=at)
        assert client.due(at=at, limit=1, after="https://s.example/a") == det.due(at=at, limit=1,
                                                                                 after="https://s.example/a")
        page = http.get("/v1/due", params={"at": at, "limit": 2}).json()
        assert page == {"urls": det.due(at=at, limit=2), "next": "https://s.example/c"}
        assert http.get("/v1/due", params={"at": at}).json()["next"] is None
        bad = http.get("/v1/due", params={"limit": 0})
        assert bad.status_code == 400 and "limit" in bad.json()["error"]
        with pytest.raises(ConfigError, match="limit"):  # the Detector's error, on every face
            client.due(limit=0)
        client.close()


def test_the_command_line(tmp_path):
    db = tmp_path / "crawl.db"
    with Detector.open(db) as det:
        crawl(det)
        want = det.due()
    out = CliRunner().invoke(main, ["due", "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == want
    first = CliRunner().invoke(main, ["due", "--db", str(db), "--limit", "1"])
    assert first.stdout.splitlines() == want[:1]
    missing = CliRunner().invoke(main, ["due", "--db", str(tmp_path / "nothing.db")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output

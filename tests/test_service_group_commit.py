"""Group commits in the service: single adds sent at the same moment are recorded in fewer
transactions than adds, each answered after its commit, with the verdicts the same adds give
one by one (near copies in one cluster, one canonical), and a refused add in the middle of a
group gets the error it gets alone; on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest
from checks import STORE_KINDS, store_target

import neardup
from neardup import Detector
from neardup.service import create_app


@pytest.fixture(params=STORE_KINDS[:3])
def target(request, tmp_path) -> str:
    return store_target(request, tmp_path)


def _variants(n: int) -> list[str]:
    rng = random.Random(7)
    base = [f"word{i}" for i in range(400)]
    out = []
    for _ in range(n):
        words = list(base)
        for j in rng.sample(range(400), 3):
            words[j] = f"edit{rng.randrange(10**6)}"
        out.append(" ".join(words))
    return out


def _body(url: str, fp: neardup.Fingerprint) -> dict:
    return {"url": url, "simhash": fp.simhash_hex, "digest": fp.digest, "spec": fp.spec, "tokens": fp.tokens,
            "sketch": None if fp.sketch is None else fp.sketch.hex(), "title": fp.title}


async def _send_all(app, bodies: list[dict]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
        return list(await asyncio.gather(*(client.post("/v1/fingerprints/add", json=b) for b in bodies)))


def test_adds_at_the_same_moment_share_commits_and_keep_sequential_verdicts(target, tmp_path):
    texts = _variants(40) + [" ".join(f"other{i}" for i in range(300))] * 2
    det = Detector.open(target)
    fps = [det.fingerprint(t, "https://x.example/") for t in texts]
    bodies = [_body(f"https://h{i % 5}.example/{i}", fp) for i, fp in enumerate(fps)]
    bodies.insert(20, {**bodies[0], "url": "not a url"})
    app = create_app(det)
    answers = asyncio.run(_send_all(app, bodies))
    commits = app.state.service.commits
    assert commits.adds == len(bodies) and commits.commits < len(bodies) / 4  # coalesced
    bad = answers.pop(20)
    (alone,) = asyncio.run(_send_all(app, [bodies.pop(20)]))  # the same add by itself
    assert bad.status_code == alone.status_code == 400 and bad.json() == alone.json()
    assert "url" in bad.json()["error"].lower()
    got = [a.json() for a in answers]
    assert all(a.status_code == 200 for a in answers)
    # the same adds one by one, on SQLite: the same verdicts
    with Detector.open(tmp_path / "ref.db") as ref:
        expected = [ref.add_fingerprint(b["url"], fp) for b, fp in zip(bodies, fps)]
    assert [(v["status"], v["match_url"], v["canonical_url"]) for v in got] == \
           [(v.status, v.match_url, v.canonical_url) for v in expected]
    assert len({v["cluster_id"] for v in got[:40]}) == 1 and got[-1]["status"] == "exact"
    assert det.stats()["pages"] == len(bodies)  # every acknowledged add is stored
    det.close()

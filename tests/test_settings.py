"""One settings object for every front end: DetectorSettings validated in one place, read
from a dict, the environment and Scrapy-style settings, offered as options by every command
that decides; and the fingerprint API verifying like the page API (no sketch, no "near")."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from neardup import Detector
from neardup.cli.main import main
from neardup.cli.options import FINGERPRINT_FIELDS, OPTIONS
from neardup.detector.settings import DEFAULT_SETTINGS, DetectorSettings, setting_names
from neardup.errors import ConfigError

FIELDS = setting_names()


def run(*args: object):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.mark.parametrize("bad", [
    {"k": -1}, {"k": 129}, {"k": 1.5}, {"k": True}, {"verify": 1.5}, {"verify": float("nan")},
    {"method": "cosine"}, {"threshold": 0.0}, {"threshold": None}, {"containment": 2.0},
    {"canonical": "longest-url"}, {"extractor": "magic"}, {"min_tokens": -3}, {"max_bytes": 0},
    {"keep_changes": -1},
])
def test_every_setting_is_validated_in_one_place(bad):
    with pytest.raises(ConfigError) as err:
        DetectorSettings(**bad)
    assert "\n" not in str(err.value) and next(iter(bad)) in str(err.value)
    with pytest.raises(ConfigError):  # the Detector's keyword arguments go through it too
        Detector(**{k: v for k, v in bad.items() if k in ("k", "verify", "method", "threshold", "containment",
                                                            "canonical", "keep_changes")} or {"k": -1})


def test_from_dict_env_and_round_trip():
    s = DetectorSettings(k=9, verify=None, method="both", threshold=0.6, containment=0.5,
                         canonical="shortest-url,first-seen", extractor="fast", min_tokens=5, max_bytes=10**6,
                         keep_changes=None)
    assert DetectorSettings.from_dict(s.to_dict()) == s
    assert DetectorSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    env = {f"NEARDUP_{name.upper()}": ("none" if value is None else str(value)) for name, value in s.to_dict().items()}
    assert DetectorSettings.from_env(env) == s
    assert DetectorSettings.from_env({}) == DEFAULT_SETTINGS
    with pytest.raises(ConfigError, match="unknown setting"):
        DetectorSettings.from_dict({"kk": 3})
    with pytest.raises(ConfigError, match="must be a number"):
        DetectorSettings.from_dict({"k": "seven"})


def test_settings_or_keywords_not_both():
    with pytest.raises(ConfigError, match="not both"):
        Detector(settings=DetectorSettings(k=5), k=6)
    det = Detector(settings=DetectorSettings(k=5, verify=None, canonical="shortest-url"))
    assert (det.k, det.verify, det.policy.spec) == (5, None, "shortest-url,first-seen")
    assert det.settings.k == 5


def test_fingerprint_settings_apply_to_a_new_store():
    det = Detector(settings=DetectorSettings(extractor="fast", min_tokens=3))
    assert (det.config.extractor, det.config.min_tokens) == ("fast", 3)


@pytest.mark.parametrize("command", ["add", "check", "dedup", "serve"])
def test_every_command_that_decides_offers_every_setting(command):
    params = {p.name for p in main.commands[command].params}
    assert set(FIELDS) <= params, set(FIELDS) - params
    assert set(OPTIONS) == set(FIELDS)


def test_fingerprint_command_offers_the_fingerprint_settings():
    params = {p.name for p in main.commands["fingerprint"].params}
    assert set(FINGERPRINT_FIELDS) <= params


def test_cli_settings_change_the_decision(tmp_path, sample_pages):
    a, b = sample_pages["nytimes-nikki-haley-2018"], sample_pages["nytimes-nikki-haley-2019"]
    fa, fb = tmp_path / "a.html", tmp_path / "b.html"
    fa.write_bytes(a.content)
    fb.write_bytes(b.content)
    db = tmp_path / "s.db"
    assert run("add", "--db", db, "https://a.example/haley", fa).exit_code == 0
    near = json.loads(run("check", "--db", db, "https://b.example/haley", fb).output)
    strict = json.loads(run("check", "--db", db, "https://b.example/haley", fb, "--verify", "1.0").output)
    loose = run("check", "--db", db, "https://b.example/haley", fb, "--verify", "none", "-k", "0")
    assert near["status"] == "near" and strict["status"] == "new"
    assert json.loads(loose.output)["status"] == ("near" if near["distance"] == 0 else "new")
    bad = run("check", "--db", db, "https://b.example/haley", fb, "--verify", "often")
    assert bad.exit_code == 2 and "often" in bad.stderr
    usage = run("check", "--db", db, "https://b.example/haley", fb, "--threshold", "0.5")
    assert usage.exit_code == 2 and "--method" in usage.stderr


def test_service_workers_read_every_setting(monkeypatch, tmp_path):
    pytest.importorskip("fastapi")
    from neardup.service import app_from_env

    db = tmp_path / "s.db"
    Detector.open(db).close()
    monkeypatch.setenv("NEARDUP_DB", str(db))
    monkeypatch.delenv("NEARDUP_SETTINGS", raising=False)
    monkeypatch.setenv("NEARDUP_K", "8")
    monkeypatch.setenv("NEARDUP_VERIFY", "0.5")
    monkeypatch.setenv("NEARDUP_CANONICAL", "shortest-url")
    app = app_from_env()
    det = next(v for v in _closure_values(app) if isinstance(v, Detector))
    assert (det.k, det.verify, det.policy.spec) == (8, 0.5, "shortest-url,first-seen")
    det.close()


def _closure_values(app):
    """The Detector an app serves (its routes close over it)."""
    for route in app.routes:
        for cell in getattr(getattr(route, "endpoint", None), "__closure__", None) or ():
            try:
                yield cell.cell_contents
            except ValueError:
                continue
    state = getattr(app, "state", None)
    for name in ("detector",):
        if state is not None and hasattr(state, name):
            yield getattr(state, name)


# -- the fingerprint API verifies like the page API --------------------------------------------

def test_a_fingerprint_without_its_sketch_is_never_near(sample_pages):
    det = Detector()
    a, b = sample_pages["nytimes-nikki-haley-2018"], sample_pages["nytimes-nikki-haley-2019"]
    det.add("https://a.example/haley", a.content)
    fp = det.fingerprint(b.content, "https://b.example/haley")
    assert det.check_fingerprint("https://b.example/haley", fp).status == "near"
    bare = dataclasses.replace(fp, sketch=None)
    v = det.check_fingerprint("https://b.example/haley", bare)
    assert v.status == "new" and v.match_id is None
    # an unrelated page's sketch on a forged SimHash is rejected by the sketch itself
    other = det.fingerprint(sample_pages["newyorker-teas-2019"].content)
    forged = dataclasses.replace(fp, sketch=other.sketch)
    assert det.check_fingerprint("https://c.example/haley", forged).status == "new"
    # the same content is still exact without a sketch: the digest decides
    same = dataclasses.replace(det.fingerprint(a.content), sketch=None)
    assert det.check_fingerprint("https://d.example/haley", same).status == "exact"


# -- errors that teach, one name per concept ------------------------------------------------------

def test_dedup_of_inputs_that_all_fail_exits_1(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a.html").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(300))
    (folder / "b.html").write_bytes(b"%PDF-1.4\n" + bytes(300))
    r = run("dedup", folder, "--db", tmp_path / "s.db", "--no-progress", "--jobs", "1")
    assert r.exit_code == 1 and "none of the 2 input items could be read" in r.stderr
    (folder / "c.html").write_text("<html><body><article><p>" + " ".join(f"w{i}" for i in range(50))
                                   + "</p></article></body></html>", encoding="utf-8")
    r = run("dedup", folder, "--db", tmp_path / "s.db", "--no-progress", "--jobs", "1")
    assert r.exit_code == 0 and json.loads(r.output.strip().splitlines()[-1])["error"] == 2


def test_hosts_formats_share_the_names_of_dedup(tmp_path):
    db = tmp_path / "s.db"
    text = tmp_path / "p.txt"
    text.write_text(" ".join(f"w{i}" for i in range(50)), encoding="utf-8")
    assert run("add", "--db", db, "https://a.example/1", text).exit_code == 0
    lines = run("hosts", "--db", db, "--format", "jsonl").output.strip().splitlines()
    assert [json.loads(x)["host"] for x in lines] == ["a.example"]
    assert [h["host"] for h in json.loads(run("hosts", "--db", db, "--format", "json").output)] == ["a.example"]
    assert run("hosts", "--db", db, "--format", "csv").output.startswith("host,pages,")


def test_the_version_is_one_number():
    import tomllib
    from pathlib import Path

    import neardup

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert neardup.__version__ == project["project"]["version"]
    assert run("--version").output.strip().endswith(project["project"]["version"])


# -- the batch job's precomputed fingerprints (issue 27) --------------------------------------------

def test_fingerprints_parquet_round_trip_through_the_cli(tmp_path):
    pytest.importorskip("pyarrow")
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "examples" / "sample"
    pages = sorted((sample / "pages").glob("npr-*.html.gz"))
    out = tmp_path / "fps.parquet"
    r = run("fingerprint", "--out", out, *pages)
    assert r.exit_code == 0 and out.is_file()
    batch = run("dedup", "--batch", out, "--out", tmp_path / "b.jsonl")
    assert batch.exit_code == 0, batch.stderr
    rows = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(pages) and {r["status"] for r in rows} >= {"new"}
    assert len({r["cluster"] for r in rows}) == 1  # the recaptures and the mirror of one article
    written = tmp_path / "w.parquet"
    again = run("dedup", "--batch", sample, "--fingerprints-out", written, "--out", tmp_path / "c.jsonl")
    assert again.exit_code == 0 and written.is_file()
    reread = run("dedup", "--batch", written, "--out", tmp_path / "d.jsonl")
    assert reread.exit_code == 0
    assert (tmp_path / "c.jsonl").read_text(encoding="utf-8") == (tmp_path / "d.jsonl").read_text(encoding="utf-8")
    assert run("dedup", sample, "--db", tmp_path / "s.db", "--fingerprints-out", written).exit_code == 2
    assert "spark-dedup" in main.commands

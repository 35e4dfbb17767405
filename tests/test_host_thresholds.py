"""Per-host thresholds (issue 15): what ``neardup tune --apply`` stores (meta ``thresholds``)
is honoured by the Detector, page by page, and by the command line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from neardup import Detector
from neardup.cli.main import main
from neardup.detector.settings import DetectorSettings
from neardup.errors import StoreError
from neardup.tune import sweep as tune

BASE = " ".join(f"word{i}" for i in range(400))


def variant(n: int) -> str:  # the first n words replaced: 10 -> distance 6, 40 -> distance 15
    return " ".join(f"zz{i}" if i < n else f"word{i}" for i in range(400))


SETTINGS = {"method": "simhash", "k": 12, "verify": 0.3, "threshold": None,
            "hosts": {"loose.example": {"k": 16, "verify": 0.5, "pairs": 30},
                      "strict.example": {"k": 4, "verify": 0.3, "pairs": 30}}}


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "tuned.db"
    with Detector.open(path) as det:
        det.add("https://origin.example/a", BASE)
        tune.apply(det.store, SETTINGS)
    return path


#: these tests are about the SimHash path, where k bounds the candidates: without the sketch
#: bands, which bring candidates at any distance (tests/test_bands.py)
NO_BANDS = DetectorSettings(bands=False)


def test_each_host_is_decided_with_its_own_thresholds(db):
    with Detector.open(db, settings=NO_BANDS) as det:
        assert det.k == 12 and det.verify == 0.3
        assert det.host_thresholds == {"loose.example": (16, 0.5), "strict.example": (4, 0.3)}
        assert det.thresholds("https://loose.example/x") == (16, 0.5)
        assert det.thresholds("https://elsewhere.example/x") == (12, 0.3)
        assert det.mirror.k >= 16  # the index answers the widest k in use
        far, close = variant(40), variant(10)
        assert det.check("https://loose.example/x", far).status == "near"
        assert det.check("https://loose.example/x", far).distance == 15
        assert det.check("https://other.example/x", far).status == "new"       # top level: k = 12
        assert det.check("https://strict.example/x", close).status == "new"    # k = 4 < 6
        assert det.check("https://other.example/y", close).status == "near"
        assert det.add("https://loose.example/x", far).status == "near"        # add decides alike


def test_given_k_is_used_for_every_host(db):
    with Detector.open(db, settings=NO_BANDS.with_(k=12)) as det:
        assert det.host_thresholds == {}
        assert det.check("https://loose.example/x", variant(40)).status == "new"
        assert det.check("https://strict.example/x", variant(10)).status == "near"


def test_without_stored_thresholds_the_defaults(tmp_path):
    with Detector.open(tmp_path / "plain.db") as det:
        assert (det.k, det.verify, det.host_thresholds) == (3, 0.3, {})
    with Detector.open(tmp_path / "plain.db", settings=NO_BANDS) as det:  # the SimHash alone: a wider k
        assert (det.k, det.verify, det.host_thresholds) == (12, 0.3, {})


def test_the_command_line_honours_them(db, tmp_path):
    page = tmp_path / "far.txt"
    page.write_text(variant(40))

    def status(url: str, *extra: str) -> str:
        r = CliRunner().invoke(main, ["check", "--db", str(db), "--no-bands", *extra, url, str(page)])
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)["status"]

    assert status("https://loose.example/x") == "near"
    assert status("https://other.example/x") == "new"
    assert status("https://loose.example/x", "-k", "12") == "new"


def test_damaged_thresholds_are_a_store_error(db):
    with Detector.open(db) as det:
        tune.apply(det.store, {**SETTINGS, "hosts": {"bad.example": {"k": 999}}})
    with pytest.raises(StoreError, match="bad.example"):
        Detector.open(db)

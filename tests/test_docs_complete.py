"""Every command and every HTTP route is documented in README.md (in the manner of
sqlite-utils' documentation tests): adding one without documenting it fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neardup.cli.main import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", sorted(main.commands))
def test_command_is_documented(command):
    assert re.search(rf"neardup {re.escape(command)}\b", README), f"'neardup {command}' is not mentioned in README.md"


def _routes() -> list[str]:
    pytest.importorskip("fastapi")
    from fastapi.routing import APIRoute

    from neardup import Detector
    from neardup.service import create_app

    return sorted(r.path for r in create_app(Detector()).routes if isinstance(r, APIRoute) and r.include_in_schema)


def test_there_are_routes():
    assert "/v1/should-fetch" in _routes() and len(_routes()) >= 20


@pytest.mark.parametrize("path", _routes() if __import__("importlib").util.find_spec("fastapi") else [])
def test_route_is_documented(path):
    # a path parameter may be written under any name: /v1/clusters/{id} for {cluster_id}
    pattern = re.escape(path).replace(r"\{", "{").replace(r"\}", "}")
    pattern = re.sub(r"\{[^}]+\}", r"\\{[\\w]+\\}", pattern)
    assert re.search(rf"`(?:GET |POST )?{pattern}(?:[`?\s\[]| \{{)", README), f"{path} is not mentioned in README.md"

"""docs/architecture.md stays true: every module of the package is on the page, and every
file, module attribute and class the page names exists."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import neardup

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGE = Path(neardup.__file__).parent


def _modules() -> list[str]:
    """Every module of the package, dotted (``neardup.service.app``)."""
    found = []
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="neardup."):
        found.append(info.name)
    return found


def test_every_module_is_on_the_page():
    missing = []
    for name in _modules():
        leaf = name.rsplit(".", 1)[1]
        if leaf == "__init__":
            continue
        is_package = (PACKAGE / Path(*name.split(".")[1:])).is_dir()
        wanted = f"{leaf}/" if is_package else f"{leaf}.py"
        if wanted not in DOC:
            missing.append(wanted)
    assert not missing, f"docs/architecture.md does not mention {missing}"


def test_every_file_the_page_names_exists():
    places = [PACKAGE, PACKAGE / "service", ROOT / "tools", ROOT / "tests", ROOT / "benchmarks", ROOT]
    named = set(re.findall(r"\b([\w/]+\.py)\b", DOC))
    missing = [n for n in sorted(named) if not any((p / n).exists() for p in places)]
    assert not missing, missing


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    if parts[0] != "neardup":
        parts = ["neardup", *parts]
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_name_the_page_names_exists():
    modules = {name.rsplit(".", 1)[1] for name in _modules()}
    names = set(re.findall(r"`([A-Za-z_][\w.]*)`", DOC))
    checked = 0
    for name in sorted(names):
        if name.endswith(".py"):
            continue  # files: test_every_file_the_page_names_exists
        head = name.split(".")[0]
        if "." in name and (head in modules or head == "neardup"):
            _resolve(name)  # AttributeError / ImportError names the stale entry
            checked += 1
        elif name[:1].isupper() and "." not in name and not name.isupper():
            assert any(hasattr(importlib.import_module(m), name) for m in _modules() if not m.endswith("__main__")), \
                name
            checked += 1
    assert checked >= 15  # the test reads the page (it names more than this)

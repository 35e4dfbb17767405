"""docs/architecture.md stays true: every module of the package is on the page, and every
file, module attribute and class the page names exists."""

from __future__ import annotations

import ast
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
    wings = [p for p in PACKAGE.rglob("*") if p.is_dir() and (p / "__init__.py").exists()]
    places = [PACKAGE, *wings, ROOT / "tools", ROOT / "tests", ROOT / "benchmarks", ROOT]
    named = set(re.findall(r"\b([\w/]+\.py)\b", DOC))
    missing = [n for n in sorted(named) if not any((p / n).exists() for p in places)]
    assert not missing, missing


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    if parts[0] != "neardup":  # a module's leaf name: any module of that name that has it
        homes = [m for m in _modules() if m.rsplit(".", 1)[1] == parts[0]]
        for home in homes:
            try:
                return _resolve(".".join([home, *parts[1:]]))
            except (ImportError, AttributeError):
                continue
        raise AttributeError(dotted)
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


# --------------------------------------------------------------------------------------------
# The house in wings: imports run one way, from a wing to the wings before it, never around.
# --------------------------------------------------------------------------------------------

#: the wings in their order (a wing's modules import only from its own wing and the ones above):
#: a dotted name is a module, or a subpackage with everything in it
WINGS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("neardup.errors", "neardup._version", "neardup._numba", "neardup.urls", "neardup.sketch",
                "neardup.model")),
    ("fingerprint", ("neardup.fingerprint",)),
    ("index", ("neardup.index",)),
    ("policies", ("neardup.canonical", "neardup.matching")),
    ("store", ("neardup.store",)),
    ("crawl", ("neardup.crawl",)),
    ("detector", ("neardup.detector",)),
    ("twins", ("neardup.client", "neardup.scrapy", "neardup.crawlee")),
    ("report", ("neardup.report",)),
    ("ingest", ("neardup.ingest",)),
    ("batch", ("neardup.batch",)),
    ("tune", ("neardup.tune",)),
    ("service", ("neardup.service",)),
    ("cli", ("neardup.cli",)),
    ("faces", ("neardup", "neardup.__main__")),  # the package's face and `python -m neardup`
]
MAX_FLOORS = 9
MAX_TOP_MODULES = 9  # public modules beside the wings (private helpers, __init__ and __main__ not counted)
MAX_LINES = 700  # but the compiled kernels (_kernels.py)


def _module_files() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


FILES = _module_files()
FACES = {name for name, path in FILES.items() if path.name == "__init__.py"}


def _imports(name: str) -> set[str]:
    """Every neardup module ``name`` imports, at module level, in functions or for type
    checking: ``from neardup.x import y`` is module ``neardup.x.y`` when that is a module,
    else ``neardup.x`` (a face when ``neardup.x`` is a package)."""
    path = FILES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in FILES else base for a in node.names]
        for target in targets:
            while target and target not in FILES:
                target = target.rpartition(".")[0]
            if target.startswith("neardup") and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name) for name in FILES}


def _wing(name: str) -> int:
    best = -1, -1
    for i, (_, members) in enumerate(WINGS):
        for member in members:
            if name == member or name.startswith(member + ".") and member != "neardup":
                best = max(best, (len(member), i))
    assert best[1] >= 0 or name in ("neardup", "neardup.__main__"), f"{name} is in no wing"
    return best[1] if best[1] >= 0 else len(WINGS) - 1


def test_every_module_is_in_a_wing():
    assert {_wing(name) for name in FILES} == set(range(len(WINGS)))


def test_imports_run_from_a_wing_to_the_wings_before_it():
    upward = sorted(f"{a} -> {b}" for a, deps in GRAPH.items() for b in deps if _wing(b) > _wing(a))
    assert not upward, upward


def test_no_import_circles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not circles, circles


def test_inside_the_package_nothing_imports_a_face():
    """A wing's face re-exports its names for users; modules import from the module that
    defines a name (only faces and ``__main__`` files may import faces)."""
    wrong = sorted(f"{a} -> {b}" for a, deps in GRAPH.items() for b in deps
                   if b in FACES and a not in FACES and not a.endswith("__main__"))
    assert not wrong, wrong


def test_faces_define_nothing():
    for name in FACES:
        tree = ast.parse(FILES[name].read_text(encoding="utf-8"))
        for node in tree.body:
            if name == "neardup" and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                continue  # neardup.Client imported on use (the 'service' extra)
            ok = isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
                isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"])
            assert ok, f"{FILES[name]}:{node.lineno} defines something"


def _room(name: str) -> str:
    """A room: a top-level module, or a wing's whole subpackage."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and name in FACES) else name


def test_floors():
    """The longest chain of imports between rooms (the package's face aside) has at most
    :data:`MAX_FLOORS` rooms."""
    rooms: dict[str, set[str]] = {}
    for a, deps in GRAPH.items():
        if a != "neardup":
            rooms.setdefault(_room(a), set()).update(_room(b) for b in deps if b != "neardup" and _room(b) != _room(a))
    floors: dict[str, int] = {}

    def floor(v: str) -> int:
        if v not in floors:
            floors[v] = 1 + max((floor(w) for w in rooms.get(v, ())), default=0)
        return floors[v]

    top = max(rooms, key=floor)
    assert floor(top) <= MAX_FLOORS, (top, floor(top))


def test_the_top_level_is_small():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("_"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_module_is_over_the_line_limit():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in FILES.items()
             if path.name != "_kernels.py"}
    long = sorted(f"{name} ({n})" for name, n in sizes.items() if n > MAX_LINES)
    assert not long, long


def test_no_private_name_is_imported_across_modules():
    wrong = []
    for name, path in FILES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neardup"):
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and f"{node.module}.{alias.name}" not in FILES:
                        wrong.append(f"{name}: {node.module}.{alias.name}")
    assert not wrong, wrong


def test_the_fingerprint_function_and_the_fingerprint_wing():
    """``neardup.fingerprint`` stays the public function (README); the wing's modules are
    imported with ``from neardup.fingerprint import core`` or ``from neardup.fingerprint.core
    import ...`` (``import neardup.fingerprint.core as m`` would look the name up on the function)."""
    from neardup.fingerprint import core, extract

    assert neardup.fingerprint is core.fingerprint and callable(neardup.fingerprint)
    assert extract.extract_main_content is not None
    wrong = []
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name} as {a.asname}" for a in node.names
                          if a.name.startswith("neardup.fingerprint.") and a.asname]
    assert not wrong, wrong

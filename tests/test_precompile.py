"""The build compiles the default run's kernels into the wheel (setup.py ->
neardup.index.precompile): after it a real run compiles nothing, and it needs only the build
environment's numpy, numba and Resiliparse."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: prints, as JSON on the last line of stdout, the kernels this process compiled (numba cache
#: misses) and how many it loaded from the cache
REPORT = """
import json, sys
from numba.core.dispatcher import Dispatcher
def report():
    misses, hits = {}, 0
    for name, mod in list(sys.modules.items()):
        if name.startswith("neardup"):
            for obj in vars(mod).values():
                if isinstance(obj, Dispatcher):
                    hits += sum(obj.stats.cache_hits.values())
                    if n := sum(obj.stats.cache_misses.values()):
                        misses[obj.py_func.__module__ + "." + obj.py_func.__qualname__] = n
    print(json.dumps({"misses": misses, "hits": hits}))
"""

#: sys.modules entries set to None make importing them fail: what the build environment lacks
BLOCKED = ["trafilatura", "lxml", "url_normalize", "surt", "fastwarc", "click", "tqdm", "sqlite3"]


def build_script() -> str:
    """The script setup.py runs on the built tree (its ``PRECOMPILE``), read without running
    setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "PRECOMPILE":
            return str(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no PRECOMPILE")


#: the build's script as the build runs it (on a copy of the package, the faces bare), with
#: what the build environment lacks blocked, then the report
PRECOMPILE = REPORT + f"import sys\nfor name in {BLOCKED!r}:\n    sys.modules[name] = None\n" + \
    build_script() + "\nreport()\n"

#: what users run, other than what precompile runs: the sample deduplicated twice into one store
#: through the CLI (the second run reopens the saved index), then a Detector with other
#: synthetic pages than precompile's, in batches and one by one, expired and reopened
RUN = REPORT + """
import dataclasses, hashlib, sys, time
import numpy as np
from neardup import Detector, fingerprint
import neardup
from neardup.cli.main import main
built, tmp, sample = sys.argv[1:4]
assert neardup.__file__.startswith(built), neardup.__file__
for _ in range(2):
    sys.argv = ["neardup", "dedup", sample, "--db", tmp + "/sample.db", "--out", tmp + "/v.csv", "--jobs", "1"]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
base = fingerprint(" ".join(f"other{i}" for i in range(80)))
rng = np.random.default_rng(7)
values = rng.integers(0, 1 << 62, size=12000, dtype=np.int64).tolist()
bins = rng.integers(0, 256, size=(12000, 60), dtype=np.uint8)
fps = [dataclasses.replace(base, simhash=v, digest=hashlib.sha256(b"%d" % v).hexdigest(),
                           sketch=base.sketch[:4] + bins[i].tobytes()) for i, v in enumerate(values)]
old = time.time() - 30 * 86400
with Detector.open(tmp + "/synthetic.db") as det:
    for start in range(0, 11000, 1000):
        det.add_fingerprints((f"https://run.example/{i}", fps[i], old if i < 300 else None, None)
                             for i in range(start, start + 1000))
    for i in range(11000, 11100):
        det.add_fingerprint(f"https://run.example/{i}", fps[i])
    det.check_fingerprints((f"https://run.example/near/{i}", dataclasses.replace(fps[i], simhash=fps[i].simhash ^ 6))
                           for i in range(400, 500))
    det.expire(86400)
with Detector.open(tmp + "/synthetic.db") as det:
    det.add_fingerprints((f"https://run.example/{i}", fps[i]) for i in range(11100, 12000))
    assert det.check_fingerprint("https://run.example/x", fps[700]).status == "exact"
report()
"""


def _run(code: str, built: Path, *args: str) -> dict[str, object]:
    """``code`` run on the package copy at ``built``, whose kernels numba caches next to them
    (``__pycache__``, as in an installed wheel: no NUMBA_CACHE_DIR)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(NEARDUP_QUIET="1", PYTHONPATH=str(built))
    done = subprocess.run([sys.executable, "-c", code, str(built), *args], env=env, capture_output=True, text=True,
                          timeout=900, check=False, cwd=built)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_after_the_builds_precompile_a_run_compiles_nothing(tmp_path: Path) -> None:
    built = tmp_path / "built"
    shutil.copytree(ROOT / "src" / "neardup", built / "neardup", ignore=shutil.ignore_patterns("__pycache__"))
    first = _run(PRECOMPILE, built)
    assert first["misses"], "an empty cache compiled nothing: the count of compiles is broken"
    after = _run(RUN, built, str(tmp_path), str(ROOT / "examples" / "sample"))
    assert after["misses"] == {}, f"kernels compiled after precompile: {after['misses']}"
    assert isinstance(after["hits"], int) and after["hits"] >= 5  # loaded from the cache, not absent


def _names(requirements: list[str]) -> list[str]:
    return sorted(re.sub(r"\s+", "", r).lower() for r in requirements)


def test_the_build_requires_what_the_kernels_need_with_the_runtime_bounds() -> None:
    """The build compiles the kernels with numpy, numba and Resiliparse: its requirements name
    them with the bounds the package itself requires (a cache compiled by another numba is
    not loaded)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    build = [r for r in meta["build-system"]["requires"] if not r.startswith(("setuptools", "wheel"))]
    runtime = [r for r in meta["project"]["dependencies"] if r.split(">")[0] in ("numpy", "numba", "resiliparse")]
    assert len(runtime) == 3 and _names(build) == _names(runtime)

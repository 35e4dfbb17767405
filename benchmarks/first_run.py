"""The first run after a clean install: what the README's set-up command costs, the install
and each of the first runs of ``neardup dedup`` on the bundled sample, in CPU seconds.

For each variant, a copy of this checkout (its tracked and untracked files, no build folder)
is installed into a new virtual environment with ``pip install -q COPY`` (the README's
command; pip's own wheel cache and downloads as they are), then the README's dedup command runs
``--runs`` times, each into a new store. CPU time is the children's (``RUSAGE_CHILDREN``: pip,
its build backend and the compile it starts; the command and its workers). Variants:

* *kernels compiled at build*: the default; ``setup.py`` compiles the default run's numba
  kernels into the wheel (:mod:`neardup.detector.precompile`);
* *NEARDUP_PRECOMPILE=0*: the same build without that step (the first run compiles them).

Every run's verdicts must equal the first run's.

    .venv/bin/python benchmarks/first_run.py                # writes docs/benchmarks.md
    .venv/bin/python benchmarks/first_run.py --runs 2 --no-docs
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DOC, REPO_ROOT, commit, loadavg, machine_line, replace_section, table

SAMPLE = REPO_ROOT / "examples" / "sample"
START, END = "<!-- first-run:start -->", "<!-- first-run:end -->"
VARIANTS = {"kernels compiled at build": {}, "NEARDUP_PRECOMPILE=0": {"NEARDUP_PRECOMPILE": "0"}}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stderr) of ``cmd``, which must succeed."""
    cpu, wall = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    cpu, wall = children_cpu() - cpu, time.perf_counter() - wall
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return cpu, wall, done.stderr


def copy_checkout(dest: Path) -> Path:
    """This checkout's tracked and untracked (not ignored) files, copied to ``dest``."""
    listed = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO_ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def variant(name: str, extra: dict[str, str], runs: int, tmp: Path) -> dict[str, object]:
    where = tmp / name.split()[0].replace("=", "-")
    src = copy_checkout(where / "src")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(extra)
    print(f"[first_run] {name}: installing", file=sys.stderr, flush=True)
    install = timed([str(venv / "bin" / "pip"), "install", "-q", str(src)], env, where)
    out: list[tuple[float, float, bool]] = []
    verdicts: list[str] = []
    for i in range(runs):
        db, csv = where / f"run{i}.db", where / f"run{i}.csv"
        command = [str(venv / "bin" / "neardup"), "dedup", str(SAMPLE), "--db", str(db), "--out", str(csv)]
        cpu, wall, err = timed(command, env, where)
        out.append((cpu, wall, "compiling" in err))
        verdicts.append(csv.read_text(encoding="utf-8"))
        print(f"[first_run] {name}: run {i + 1} {cpu:.1f} s CPU", file=sys.stderr, flush=True)
    same = all(v == verdicts[0] for v in verdicts)
    return {"name": name, "install": install, "runs": out, "same": same}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="dedup runs after each install (default 3)")
    ap.add_argument("--no-docs", action="store_true", help="print the section, do not write docs/benchmarks.md")
    args = ap.parse_args()
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="neardup-first-run-") as name:
        results = [variant(v, extra, max(2, args.runs), Path(name)) for v, extra in VARIANTS.items()]
    rows = []
    for r in results:
        install: tuple[float, float, str] = r["install"]  # type: ignore[assignment]
        runs: list[tuple[float, float, bool]] = r["runs"]  # type: ignore[assignment]
        later = min(c for c, _, _ in runs[1:])
        rows.append([r["name"], f"{install[0]:.1f}", f"{install[1]:.1f}", f"{runs[0][0]:.1f}",
                     " / ".join(f"{c:.1f}" for c, _, _ in runs[1:]), f"{runs[0][0] - later:.1f}",
                     "yes" if runs[0][2] else "no", "yes" if r["same"] else "NO"])
    lines = [START, "## The first run after a clean install (`benchmarks/first_run.py`)", "",
             f"`python benchmarks/first_run.py --runs {max(2, args.runs)}` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"src at {commit()}; {machine_line()}; load average {load_before} at start, {loadavg()} at end.", "",
             "A copy of the checkout installed into a new virtual environment with `pip install -q COPY` (pip's "
             "wheel cache and downloads warm), then the README's `neardup dedup examples/sample` run into a new "
             "store each time. CPU seconds of the child processes (pip, the build backend and the compile it "
             "starts; the command and its 2 workers). Target (issue 35): the first run at most 10 s of CPU "
             "more than the second.", "",
             *table(["variant", "install CPU s", "install wall s", "first run CPU s", "later runs CPU s",
                     "first run extra s", "compile notice", "same verdicts"], rows), "", END]
    block = "\n".join(lines)
    print(block)
    if not args.no_docs:
        replace_section(DOC, START, END, block)


if __name__ == "__main__":
    main()

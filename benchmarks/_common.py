"""What the benchmark scripts share: where things are (the checkout, docs/benchmarks.md, the
corpus), the machine they ran on and its load, their sections of the docs between markers,
Markdown tables, timing, logging, and the generated and real texts several of them measure.

The scripts run as ``python benchmarks/NAME.py``, so this folder is on ``sys.path`` and they
import this module as ``_common``, before neardup: importing it puts the checkout's ``src/``
first on ``sys.path`` (:func:`use_checkout`), so that a script measures this checkout's code
whether or not (or whichever) neardup is installed, with no path set-up of its own. Reading
the shared corpus (its manifests, labelled pairs, pages) is :mod:`_corpus`'s.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
#: the file every script writes its section into
DOC = REPO_ROOT / "docs" / "benchmarks.md"
#: the shared corpus of real pages: ``NEARDUP_CORPUS``, else ``shared/corpus`` beside the checkout
#: (``../shared/corpus``) or one level up (a checkout in a folder of worktrees)
CORPUS = Path(os.environ.get("NEARDUP_CORPUS") or next(
    (p for p in (REPO_ROOT.parent / "shared" / "corpus", REPO_ROOT.parents[1] / "shared" / "corpus") if p.is_dir()),
    REPO_ROOT.parent / "shared" / "corpus"))


def use_checkout(src: str | os.PathLike[str] | None = None) -> Path:
    """Put a checkout's ``src/`` first on ``sys.path``, so that ``import neardup`` (which must
    come after) imports that code: ``src``, else ``NEARDUP_SRC`` (another checkout's src, e.g.
    a branch to compare), else this checkout's. Importing this module calls it once; a folder
    that is already first is not added again. Returns the folder."""
    folder = Path(src or os.environ.get("NEARDUP_SRC") or REPO_ROOT / "src").resolve()
    if sys.path[:1] != [str(folder)]:
        sys.path.insert(0, str(folder))
    return folder


use_checkout()


def logger(name: str | None = None, clock: bool = False) -> Callable[[str], None]:
    """A ``log(msg)`` that prints ``[name] msg`` to stderr at once; with ``clock``, the local
    time (``[name HH:MM:SS] msg``, ``[HH:MM:SS] msg`` without a name)."""
    def log(msg: str) -> None:
        tag = " ".join(filter(None, (name, time.strftime("%H:%M:%S") if clock else None)))
        print(f"[{tag}] {msg}" if tag else msg, file=sys.stderr, flush=True)
    return log


# -- the machine -------------------------------------------------------------------------------

def _output(cmd: list[str], env: dict[str, str] | None = None) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False, env=env).stdout
    except OSError:
        return ""


def cpu_model(unknown: str = "unknown") -> str:
    """The CPU's model name (lscpu)."""
    return next((line.split(":", 1)[1].strip() for line in _output(["lscpu"]).splitlines()
                 if line.lower().startswith("model name")), unknown)


def nproc() -> str:
    """The CPUs this process may use (``nproc``, which would honour OMP_NUM_THREADS: left out)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    return _output(["nproc"], env).strip() or str(os.cpu_count())


def proc_kib(path: str | Path, field: str) -> int | None:
    """The ``field`` of a /proc file that counts in kB (``MemTotal`` of /proc/meminfo, ``VmHWM``
    of /proc/<pid>/status), KiB; None where it is absent."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def memory_kib() -> int | None:
    """MemTotal of /proc/meminfo, KiB."""
    return proc_kib("/proc/meminfo", "MemTotal")


def rss_bytes() -> int:
    """This process's resident set now (/proc/self/statm), bytes."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def versions(dists: Sequence[str], missing: str | None = "not installed") -> dict[str, str | None]:
    """The installed version of each distribution (``missing`` where it is not installed)."""
    found: dict[str, str | None] = {}
    for dist in dists:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = missing
    return found


def machine(dists: Sequence[str] = (), missing: str | None = "not installed") -> dict[str, Any]:
    """CPU model and count, memory, Python, OS, the versions of ``dists`` (``missing`` for those
    not installed) and ``libraries``: the installed ones as one line (``a 1.2, b 3.4``)."""
    kib = memory_kib()
    found = versions(dists, missing=None)
    return {"cpu": cpu_model(), "nproc": nproc(), "memory": "unknown" if kib is None else f"{kib / 2**20:.0f} GiB",
            "python": platform.python_version(), "os": platform.platform(),
            "versions": {dist: missing if v is None else v for dist, v in found.items()},
            "libraries": ", ".join(f"{dist} {v}" for dist, v in found.items() if v is not None)}


def machine_line(*extra: str) -> str:
    """One line: ``N CPUs (model), Python x.y.z, <extra>, <platform>``."""
    return ", ".join([f"{os.cpu_count()} CPUs ({cpu_model('unknown CPU')})", f"Python {platform.python_version()}",
                      *extra, platform.platform()])


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, ``a / b / c``."""
    try:
        return " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def commit() -> str:
    """The checkout's commit (short), ``unknown`` outside git."""
    return _output(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"]).strip() or "unknown"


# -- docs/benchmarks.md ----------------------------------------------------------------------

def replace_section(path: Path, start: str, end: str, block: str) -> None:
    """Put ``block`` (which begins with the ``start`` marker and ends with ``end``) in place of
    the text between those markers in ``path``, or append it when they are absent; the other
    sections stay byte for byte. The file is re-read right before writing and replaced
    atomically, so benchmarks writing other sections in turn do not lose each other's work."""
    block = block.rstrip("\n")
    if not (block.startswith(start) and block.endswith(end)):
        raise ValueError(f"the section must be wrapped in {start} ... {end}")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in text and end in text and text.index(start) < text.index(end):
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: Sequence[int] = (0,)) -> list[str]:
    """A Markdown table: text columns left-aligned, the others right-aligned."""
    align = ["---" if i in text_columns else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return lines


# -- timing ------------------------------------------------------------------------------------

def timed(items: Sequence[Any], fn: Callable[[Any], Any]) -> tuple[float, float]:
    """CPU and wall seconds of ``fn`` over ``items``."""
    w0, c0 = time.perf_counter(), time.process_time()
    for x in items:
        fn(x)
    c1, w1 = time.process_time(), time.perf_counter()
    return c1 - c0, w1 - w0


# -- texts -------------------------------------------------------------------------------------

def zipf_vocabulary(rng: Any, vocab: int) -> tuple[list[str], Any]:
    """``vocab`` random lowercase words of 2 to 10 letters and their Zipf(1.1) probabilities,
    drawn from ``rng`` (a numpy Generator: the documents drawn next from it follow)."""
    import numpy as np

    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 11, vocab)
    words = ["".join(rng.choice(letters, k)) for k in lengths]
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    return words, p


def py_shingles(text: str) -> list[str]:
    """Word 3-shingles as a peer library's user builds them."""
    w = text.lower().split()
    return [" ".join(w[i:i + 3]) for i in range(len(w) - 2)] or [" ".join(w)]


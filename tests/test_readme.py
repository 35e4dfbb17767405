"""Every command in README.md runs as written.

The README's ```bash and ```python blocks are extracted and run in a temporary folder that
holds the repository's ``examples/`` (the command-line block makes its own input files from
the sample: ``page.html``, ``pages/``, ``crawl.warc.gz``...), with this checkout's
``neardup`` first on PATH. What is not run, and why:

* installing (``python3 -m venv .venv && .venv/bin/pip install ...``) needs the package
  registry: the install prefix is dropped and the rest of the line is run with ``.venv``
  pointing at this environment;
* the whole-suite test command is this test suite itself (it is the command ``.ci/run``
  runs: checked to be identical instead);
* commands that fetch from the internet (``curl`` to a host other than localhost);
* ``neardup serve`` with a PostgreSQL URL (needs a PostgreSQL server at ``dbhost``); the
  SQLite ``neardup serve`` is started for real, in the background on a free port, and the
  ``curl`` examples are sent to it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from checks import present

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent
INSTALL = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install -q (?:-e )?'?\.(?:\[\w+\])?'? && ")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments kept (bash drops them)."""
    out: list[str] = []
    pending = ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return [c for c in out if c.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    """A user's folder after the quick start: the repository's examples and a ``.venv``."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "bin").symlink_to(VENV_BIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("NEARDUP_QUIET", "1")
    monkeypatch.delenv("TOKEN", raising=False)
    return tmp_path


def run_shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=cwd, capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, (command, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, (command, r.stderr[-2000:])
    return r


def test_readme_has_the_blocks_this_test_knows():
    assert len(blocks("bash")) == 4 and len(blocks("python")) == 2


def test_readme_test_command_is_the_ci_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_block = next(b for b in blocks("bash") if "pytest" in b).strip()
    assert test_block.startswith("python3 -m venv .venv && ")
    assert test_block.removeprefix("python3 ") in ci


def test_readme_shell_blocks(workdir):
    skipped: list[str] = []
    servers: list[subprocess.Popen] = []
    port = free_port()
    try:
        for block in blocks("bash"):
            if "pytest" in block:
                skipped.append("the test suite (this test's own suite; identical to .ci/run's command)")
                continue
            for command in commands(block):
                command = command.replace("8080", str(port))
                if INSTALL.match(command):
                    command = INSTALL.sub("", command)  # installing needs the package registry
                if re.match(r"curl -s https?://(?!localhost)", command):
                    skipped.append(f"{command} (fetches from the internet)")
                    continue
                if command.startswith("neardup serve"):
                    if "postgresql://" in command:
                        skipped.append(f"{command} (needs a PostgreSQL server at dbhost)")
                        continue
                    argv = shlex.split(command.split("#")[0])
                    servers.append(subprocess.Popen(argv, cwd=workdir, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.PIPE))
                    deadline = time.monotonic() + 120
                    while True:
                        try:
                            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                                assert r.status == 200
                            break
                        except OSError:
                            assert servers[-1].poll() is None, present(servers[-1].stderr).read().decode()[-2000:]
                            assert time.monotonic() < deadline, "neardup serve did not start"
                            time.sleep(0.2)
                    continue
                r = run_shell(command, workdir)
                if command.startswith("curl"):
                    answer = json.loads(r.stdout)  # never an error
                    assert "error" not in answer or answer["error"] is None, (command, answer)
                    if "/v1/should-fetch" in command:
                        # fetched twice by then: fresh until its next planned fetch
                        assert answer["reason"] in ("known", "fresh"), answer
                        assert answer["fetch"] is (answer["reason"] == "known"), answer
                        assert answer["reason"] == "known" or answer["next_fetch"] is not None, answer
                    elif "/v1/hosts" in command:
                        assert answer["total"] >= 1 and answer["hosts"][0]["pages"] >= 1, answer
                    else:  # a verdict
                        assert answer["status"] in ("new", "exact", "near"), answer  # real enough: not empty
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
    assert servers, "the service example was not run"
    # what ran left what the README says it leaves
    assert (workdir / "sample-verdicts.csv").read_text(encoding="utf-8").count("\n") == 27
    read = {json.loads(line)["url"] for line in (workdir / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()}
    assert {u for u in read if "npr.org" in u} and {u for u in read if "newyorker.com" in u}  # the WARC, the JSONL
    assert len([u for u in read if u.startswith("file://") and "/pages/" in u]) == 3  # the folder
    assert (workdir / "batch.csv").read_text(encoding="utf-8").splitlines()[0] == \
        "url,digest,simhash,status,cluster,canonical,match,distance,version"
    assert len(skipped) == 3, skipped


@pytest.mark.parametrize("index", [0, 1])
def test_readme_python_blocks(workdir, index):
    code = blocks("python")[index]
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(code, f"README.md python block {index + 1}", "exec"), namespace)  # noqa: S102
    det = namespace["det"]
    if index == 0:
        assert namespace["v"].status == "new"
        assert det.check("https://example.com/b", namespace["sample"]("nytimes-nikki-haley-2022")).status == "near"
    else:
        assert det.add("https://example.com/excerpt", namespace["excerpt"]).status in ("partial", "exact")
    det.close()

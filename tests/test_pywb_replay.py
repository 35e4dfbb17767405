"""The deduplicated WARC replays (issue 37, evidence): pywb, the web archive's replay tool
(installed by this test into its own virtual environment: its pinned dependencies are not the
project's), serves every capture of ``neardup dedup --warc-out``'s copy with its own bytes, the
revisits resolved to their originals."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_warc_out import SITE, records, write_warc

from neardup.cli import main

VENV = Path(tempfile.gettempdir()) / "neardup-tests-pywb"


@pytest.fixture(scope="module")
def pywb() -> Path:
    """The bin folder of a virtual environment with pywb (made once, kept for later runs)."""
    bin_dir = VENV / "bin"
    if not (bin_dir / "wayback").exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
        installed = made.returncode == 0 and subprocess.run(
            [str(bin_dir / "pip"), "install", "-q", "pywb>=2.7"], capture_output=True, text=True,
            timeout=600).returncode == 0
        if not installed:
            message = "pywb could not be installed from the package registry"
            if os.environ.get("NEARDUP_REQUIRE_SITE"):
                pytest.fail(message)
            pytest.skip(message)
    return bin_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_pywb_replays_every_capture_with_its_bytes(tmp_path, sample_pages, pywb):
    src, out = tmp_path / "crawl.warc.gz", tmp_path / "dedup.warc.gz"
    write_warc(src, sample_pages, True)
    r = CliRunner().invoke(main, ["dedup", str(src), "--db", str(tmp_path / "s.db"), "--warc-out", str(out),
                                  "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert any(kind == "revisit" for kind, *_ in records(out))
    root = tmp_path / "archive"
    root.mkdir()
    for args in (["init", "coll"], ["add", "coll", str(out)]):
        subprocess.run([str(pywb / "wb-manager"), *args], cwd=root, check=True, capture_output=True, timeout=120)
    port = free_port()
    server = subprocess.Popen([str(pywb / "wayback"), "-p", str(port), "-b", "127.0.0.1"], cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        captured = {u: (h["WARC-Date"], p) for kind, u, h, p in records(src) if kind == "response"}
        for url, (date, payload) in captured.items():
            stamp = date.replace("-", "").replace(":", "").replace("T", "").rstrip("Z")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/coll/{stamp}id_/{url}", timeout=30) as answer:
                assert answer.status == 200, url
                assert answer.read() == payload, url  # its own bytes, a revisit's from its original
        assert set(captured) >= {SITE + "a.html", SITE + "a-copy.html", SITE + "s2.css"}
    finally:
        server.terminate()
        server.wait(timeout=30)

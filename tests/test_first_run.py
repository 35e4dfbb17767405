"""The first run after an install: every kernel a page can reach is compiled (or loaded from
numba's cache) by ``warm_up``, in the process that starts the workers, before any page's
clock starts (issue 34). Checked in a fresh process: after ``warm_up(config)``, fingerprinting
every sample page with that config adds no compiled specialisation to any kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import gzip, json, sys
from pathlib import Path

from numba.core.registry import CPUDispatcher

import neardup
from neardup.batch import _kernels as batch_kernels
from neardup.fingerprint import _kernels, _minhash_kernels, structure
from neardup.fingerprint.core import FingerprintConfig, fingerprint, warm_up
from neardup.fingerprint.minhash import MinHashConfig
from neardup.index import _kernels as index_kernels

config = FingerprintConfig.from_dict(json.loads(sys.argv[1]))
modules = [_kernels, _minhash_kernels, structure, index_kernels, batch_kernels]

def compiled():
    return {f"{m.__name__}.{k}": len(v.overloads) for m in modules for k, v in vars(m).items()
            if isinstance(v, CPUDispatcher)}

warm_up(config)
before = compiled()
for path in sorted(Path(sys.argv[2]).glob("*.html.gz")):
    fingerprint(gzip.decompress(path.read_bytes()), "https://sample.example/" + path.name, config=config)
fingerprint("plain text " * 100, config=config)
fingerprint("plain text " * 100, config=config.with_(extractor="full"))
after = compiled()
print(json.dumps({"new": {k: (before[k], n) for k, n in after.items() if n != before[k]},
                  "warm": sum(1 for n in before.values() if n)}))
"""


@pytest.mark.parametrize("config", [{}, {"extractor": "accurate"}, {"extractor": "fast"},
                                    {"minhash": {"num_perm": 64}}], ids=["default", "accurate", "fast", "minhash"])
def test_warm_up_leaves_nothing_to_compile_for_a_page(config):
    from neardup.fingerprint.core import DEFAULT_CONFIG, FingerprintConfig

    full = {**DEFAULT_CONFIG.to_dict(), **config}
    FingerprintConfig.from_dict(full)  # a valid config
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(full), str(ROOT / "examples" / "sample" / "pages")],
                          capture_output=True, text=True, timeout=900, env={"NEARDUP_QUIET": "1", "PATH": "/usr/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["new"] == {}, out["new"]  # every kernel a page reaches was compiled (or loaded) by warm_up
    assert out["warm"] >= 1  # (the test reads the kernels: some were used)

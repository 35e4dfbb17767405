"""neardup.Client without the 'service' extra: one clear line, not a bare ModuleNotFoundError."""

from __future__ import annotations

import subprocess
import sys


def test_client_without_httpx_names_the_extra():
    code = ("import sys; sys.modules['httpx'] = None\n"  # as if httpx were not installed
            "import neardup\n"
            "try:\n    neardup.Client\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "neardup.Client needs the 'service' extra: pip install 'neardup[service]'"

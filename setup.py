"""The package's metadata is in pyproject.toml; this file adds one build step.

After the usual ``build_py``, the build compiles the numba kernels a default run reaches
(:func:`neardup.index.precompile.precompile`, run on the built tree in a child process)
into numba's cache next to the built modules, so a wheel carries them: the first command after
``pip install .`` loads them instead of compiling them (numba keys each cached kernel on the
source file's content, the numba version and the CPU, and compiles again where one differs:
a wheel built on another machine, or another numba). The child imports the kernels' modules
only, with the package's faces (``__init__.py``, which import every wing) left out, so the
build environment needs numpy, numba and Resiliparse only (``[build-system] requires``).

``NEARDUP_PRECOMPILE=0`` skips the step; an editable install (``pip install -e``) skips it
too (its kernels are cached at their first use, next to the sources). A failed compile only
warns: the install goes on, and the first run compiles as it would without this step.
"""

from __future__ import annotations

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

#: the child's script (argument: the built tree): the packages of the tree made bare (their
#: faces not run), then the kernels compiled; tests/test_precompile.py runs it too
PRECOMPILE = """
import pathlib, sys, types
root = pathlib.Path(sys.argv[1])
for init in sorted(root.glob("neardup/**/__init__.py")):
    name = ".".join(init.parent.relative_to(root).parts)
    sys.modules[name] = package = types.ModuleType(name)
    package.__path__ = [str(init.parent)]
from neardup.index.precompile import precompile
precompile()
"""


class BuildPyWithKernels(build_py):
    """``build_py``, then the default run's kernels compiled into the built tree."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("NEARDUP_PRECOMPILE", "1") == "0":
            return
        build_lib = os.path.abspath(self.build_lib)
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
        # the built tree first, then what the build environment put on the path (pip's isolated
        # build environment reaches its packages through PYTHONPATH)
        env.update(PYTHONPATH=os.pathsep.join(p for p in (build_lib, os.environ.get("PYTHONPATH")) if p),
                   NEARDUP_QUIET="1")
        print("neardup: compiling the numba kernels into the build, once (about 20 s of CPU; "
              "NEARDUP_PRECOMPILE=0 skips this)", flush=True)
        done = subprocess.run([sys.executable, "-c", PRECOMPILE, build_lib], env=env, cwd=build_lib, check=False)
        if done.returncode != 0:
            print(f"neardup: warning: the kernels were not compiled into the build (exit {done.returncode}); "
                  "the first run compiles them", flush=True)


setup(cmdclass={"build_py": BuildPyWithKernels})

"""The ``neardup`` command line: one module per family of commands, :mod:`neardup.cli.main` registers them.
(The wing's face: its public names, defined in its modules.)"""

from neardup.cli.main import main

__all__ = ["main"]

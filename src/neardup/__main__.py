"""``python -m neardup``: the ``neardup`` command line."""

from neardup.cli.main import main

if __name__ == "__main__":  # pragma: no cover
    main()

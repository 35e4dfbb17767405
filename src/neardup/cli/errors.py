"""What every neardup command shares: the exit codes and one-line errors.

Exit codes: 0 ok, 1 bad input, 2 bad usage, 3 store problem. A library error becomes one line
on stderr (``neardup: error: ...``); an unexpected one too (``NEARDUP_DEBUG=1`` re-raises it
for the traceback).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from neardup.errors import ConfigError, NeardupError, StoreError

EXIT_INPUT = 1
EXIT_USAGE = 2
EXIT_STORE = 3


def fail(message: str, code: int) -> None:
    click.echo(f"neardup: error: {' '.join(message.split())}", err=True)  # always one line
    sys.exit(code)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn library errors into one-line messages and documented exit codes."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            fail(str(exc), EXIT_STORE)
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        except NeardupError as exc:
            fail(str(exc), EXIT_INPUT)
        except OSError as exc:
            fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "), EXIT_INPUT)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: still one line, not a traceback
            if os.environ.get("NEARDUP_DEBUG"):
                raise
            fail(f"unexpected {type(exc).__name__}: {one_line(str(exc))} (NEARDUP_DEBUG=1 shows where)", EXIT_INPUT)

    return wrapper


def one_line(message: str, limit: int = 500) -> str:
    line = " ".join(message.split())
    return line if len(line) <= limit else line[:limit] + "..."

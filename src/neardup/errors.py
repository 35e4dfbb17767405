"""Typed exceptions. Every user error is a :class:`NeardupError` with a one-line message."""

from __future__ import annotations


class NeardupError(Exception):
    """Base class of every error neardup raises on purpose."""


class InputError(NeardupError, ValueError):
    """The content given is not something neardup can fingerprint (binary, PDF, too large...)."""


class URLError(NeardupError, ValueError):
    """A URL is malformed (no scheme or host, spaces, unsupported scheme)."""


class ConfigError(NeardupError, ValueError):
    """An argument or setting has an invalid value."""


class StoreError(NeardupError):
    """The store cannot be opened or used (corrupt, unreadable, newer schema)."""


class StoreLockedError(StoreError):
    """Another process holds a write lock on the store for longer than the timeout."""


class SpecMismatchError(StoreError):
    """The store was written with another fingerprint spec than the one requested."""


class NotStoredError(NeardupError, KeyError):
    """An operation on a URL the store does not hold (a revisit of a URL never added)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InputFormatError(NeardupError):
    """A batch input file (JSONL, WARC, directory) cannot be read."""

"""The installed distribution's version (``neardup --version``, the service's ``/healthz``)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("neardup")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
    __version__ = "0+unknown"

"""neardup: near-duplicate web page detection for crawlers and web archives."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import Any

from neardup.canonical import CanonicalPolicy
from neardup.detector import Detector
from neardup.errors import (
    ConfigError,
    InputError,
    InputFormatError,
    NeardupError,
    SpecMismatchError,
    StoreError,
    StoreLockedError,
    URLError,
)
from neardup.features import FeatureConfig
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint, hamming
from neardup.index import BruteForceIndex, HammingIndex
from neardup.minhash import MinHashConfig
from neardup.model import Page, Verdict
from neardup.store import SQLiteStore
from neardup.storeapi import Store

try:
    __version__ = _version("neardup")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:  # neardup.Client needs httpx (the 'service' extra): import on use
    if name == "Client":
        from neardup.client import Client

        return Client
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")


__all__ = [
    "BruteForceIndex", "CanonicalPolicy", "Client", "Detector", "HammingIndex", "MinHashConfig", "Page",
    "SQLiteStore", "Store", "Verdict", "ConfigError", "DEFAULT_CONFIG", "FeatureConfig", "Fingerprint",
    "FingerprintConfig", "InputError", "InputFormatError", "NeardupError", "SpecMismatchError", "StoreError",
    "StoreLockedError", "URLError", "fingerprint", "hamming", "__version__",
]

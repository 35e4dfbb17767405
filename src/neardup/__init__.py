"""neardup: near-duplicate web page detection for crawlers and web archives."""

from typing import Any

from neardup._version import __version__
from neardup.canonical import CanonicalPolicy
from neardup.detector.core import Detector
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
from neardup.fingerprint.core import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint, hamming
from neardup.fingerprint.features import FeatureConfig
from neardup.fingerprint.minhash import MinHashConfig
from neardup.index.base import BruteForceIndex, HammingIndex
from neardup.model import Page, Verdict
from neardup.store.base import Store
from neardup.store.sqlite import SQLiteStore


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

"""neardup: near-duplicate web page detection for crawlers and web archives."""

from neardup.errors import (
    ConfigError, InputError, InputFormatError, NeardupError, SpecMismatchError, StoreError,
    StoreLockedError, URLError,
)
from neardup.canonical import CanonicalPolicy
from neardup.detector import Detector, Page, Verdict
from neardup.features import FeatureConfig
from neardup.index import BruteForceIndex
from neardup.store import SQLiteStore
from neardup.fingerprint import DEFAULT_CONFIG, Fingerprint, FingerprintConfig, fingerprint, hamming

__version__ = "0.1.0"


def __getattr__(name: str):  # neardup.Client needs httpx (the 'service' extra): import on use
    if name == "Client":
        from neardup.client import Client

        return Client
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")

__all__ = [
    "BruteForceIndex", "CanonicalPolicy", "Client", "Detector", "Page", "SQLiteStore", "Verdict",
    "ConfigError", "DEFAULT_CONFIG", "FeatureConfig", "Fingerprint", "FingerprintConfig",
    "InputError", "InputFormatError", "NeardupError", "SpecMismatchError", "StoreError",
    "StoreLockedError", "URLError", "fingerprint", "hamming", "__version__",
]

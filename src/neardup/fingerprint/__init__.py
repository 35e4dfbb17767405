"""A page to its fingerprint: extraction, guards, normalisation, features, IDF, SimHash, structure, MinHash.
(The wing's face: its public names, defined in its modules.)"""

from neardup.fingerprint.core import (
    DEFAULT_CONFIG,
    HASH_NAME,
    SPEC_VERSION,
    SPEC_VERSIONS,
    Fingerprint,
    FingerprintConfig,
    fingerprint,
    fingerprint_text,
    hamming,
)

__all__ = [
    "DEFAULT_CONFIG",
    "Fingerprint",
    "FingerprintConfig",
    "HASH_NAME",
    "SPEC_VERSION",
    "SPEC_VERSIONS",
    "fingerprint",
    "fingerprint_text",
    "hamming",
]

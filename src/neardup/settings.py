"""Settings a detector resolves against its store: the fingerprint config (a store keeps
the spec it was written with).

The decision settings themselves (``k``, ``verify``, method, canonical policy) are the
Detector's arguments; what a store was tuned to is in :mod:`neardup.thresholds`.
"""

from __future__ import annotations

from neardup.errors import ConfigError, NeardupError, SpecMismatchError
from neardup.fingerprint import DEFAULT_CONFIG, FingerprintConfig
from neardup.minhash import MinHashConfig
from neardup.storeapi import Store


def resolve_config(store: Store, config: FingerprintConfig | None, *, method: str,
               needs_minhash: bool) -> FingerprintConfig:
    """The fingerprint settings a detector over ``store`` uses: ``config`` when given, else the
    store's own, else :data:`DEFAULT_CONFIG` (with MinHash signatures when ``method`` needs
    them). A store holding fingerprints of another spec is refused
    (:class:`SpecMismatchError`) rather than mixed; a new store records the settings.

    >>> from neardup import SQLiteStore
    >>> resolve_config(SQLiteStore(":memory:"), None, method="simhash", needs_minhash=False) == DEFAULT_CONFIG
    True
    """
    stored = store.get_meta("config")
    stored_spec = store.get_meta("spec")
    has_pages = store.page_count() > 0
    if config is None:
        if stored is not None:
            try:
                config = FingerprintConfig.from_dict(stored)
            except (TypeError, KeyError, NeardupError) as exc:
                raise SpecMismatchError(f"store {store.path} has an unreadable config ({exc})") from None
        else:
            config = DEFAULT_CONFIG
        if needs_minhash and config.minhash is None and not has_pages:
            config = config.with_(minhash=MinHashConfig())
    if needs_minhash and config.minhash is None:
        raise (SpecMismatchError if has_pages else ConfigError)(
            f"method {method!r} (or containment) needs MinHash signatures, but "
            + (f"store {store.path} was written without them" if has_pages else "the config has none")
            + "; use FingerprintConfig(minhash=MinHashConfig()) with a new store"
        )
    if has_pages and stored_spec and stored_spec != config.spec:
        raise SpecMismatchError(
            f"store {store.path} holds fingerprints of spec {stored_spec!r}, "
            f"not {config.spec!r}; use the same settings or a new store"
        )
    if stored_spec != config.spec:
        with store.transaction():
            store.set_meta("config", config.to_dict())
            store.set_meta("spec", config.spec)
    return config

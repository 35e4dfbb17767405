"""The thresholds a store was tuned to (``neardup tune --apply``): stored in the store's
settings under :data:`META_KEY`, read by the Detector when it is opened without ``k``, per
host when the tuning gave a host its own.

The stored choice (JSON)::

    {"version": 1, "method": "simhash", "k": 12, "verify": 0.3, "threshold": null,
     "hosts": {"www.example.com": {"k": 9, "verify": 0.3}}, ...}

>>> from neardup import SQLiteStore
>>> store = SQLiteStore(":memory:")
>>> _ = apply(store, {"method": "simhash", "k": 9, "verify": 0.4, "hosts": {"b.example": {"k": 5}}})
>>> read(store, default_k=12, bits=64)
StoredThresholds(k=9, verify=0.4, hosts={'b.example': (5, 0.4)})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neardup.errors import NeardupError, StoreError
from neardup.store.base import Store

#: the store meta key :func:`apply` writes
META_KEY = "thresholds"
META_VERSION = 1


@dataclass(frozen=True)
class StoredThresholds:
    """What a store was tuned to: the top-level ``k`` and ``verify`` and each listed host's."""

    k: int
    verify: float | None
    hosts: dict[str, tuple[int, float | None]] = field(default_factory=dict)


def apply(store: Store, choice: Any, method: str = "simhash") -> dict[str, Any]:
    """Store the choice (a :class:`neardup.tune.sweep.TuneResult` or its settings dict) in
    ``store``'s settings (meta :data:`META_KEY`); returns what was stored."""
    settings = choice.settings(method) if hasattr(choice, "settings") else dict(choice)
    if settings.get("method") not in ("simhash", "minhash"):
        raise NeardupError(f"unknown method {settings.get('method')!r} in the thresholds to apply")
    settings.setdefault("version", META_VERSION)
    store.set_meta(META_KEY, settings)
    return settings


def stored_choice(store: Store) -> dict[str, Any] | None:
    """The thresholds :func:`apply` stored, or None."""
    value = store.get_meta(META_KEY)
    return value if isinstance(value, dict) else None


def thresholds_for(settings: dict[str, Any], host: str | None) -> dict[str, Any]:
    """The thresholds a page of ``host`` should be decided with: the host's own values when
    the settings list it, else the top-level ones (``k``, ``verify``, ``threshold``, ``method``)."""
    out = {key: settings.get(key) for key in ("method", "k", "verify", "threshold")}
    if host and host in (settings.get("hosts") or {}):
        out.update({key: v for key, v in settings["hosts"][host].items() if key in ("k", "verify", "threshold")})
    return out


def read(store: Store, *, default_k: int, bits: int, default_verify: float | None = None) -> StoredThresholds | None:
    """The thresholds stored in ``store`` (None when none are), checked: damaged values are
    a :class:`StoreError` naming them. A missing ``k`` is ``default_k``."""
    settings = stored_choice(store)
    if settings is None:
        return None

    def checked(values: dict[str, Any], where: str) -> tuple[int, float | None]:
        k, verify = values.get("k"), values.get("verify", default_verify)
        k = default_k if k is None else k
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= bits:
            raise StoreError(f"store {store.path}: stored thresholds{where} have k {k!r}, "
                             f"not an integer between 0 and {bits}")
        if verify is not None and (not isinstance(verify, (int, float)) or not 0.0 <= float(verify) <= 1.0):
            raise StoreError(f"store {store.path}: stored thresholds{where} have verify {verify!r}, "
                             "not a number in [0, 1]")
        return k, None if verify is None else float(verify)

    k, verify = checked(thresholds_for(settings, None), "")
    hosts = settings.get("hosts") or {}
    per_host = {str(h): checked(thresholds_for(settings, h), f" of host {h!r}")
                for h in (hosts if isinstance(hosts, dict) else ())}
    return StoredThresholds(k, verify, per_host)

"""A detector's settings: :class:`DetectorSettings`, every setting it decides with in one
validated value that every front end reads, and the fingerprint config resolved against the
store (:func:`resolve_config`: a store keeps the spec it was written with). What a store was
tuned to is in :mod:`neardup.detector.thresholds`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from neardup.canonical import policy_from_spec
from neardup.detector.mirror import DEFAULT_KEEP_CHANGES
from neardup.errors import ConfigError, NeardupError, SpecMismatchError
from neardup.fingerprint.core import DEFAULT_CONFIG, FingerprintConfig
from neardup.fingerprint.extract import EXTRACTORS as EXTRACTOR_NAMES
from neardup.fingerprint.minhash import MinHashConfig
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY, METHODS
from neardup.store.base import Store


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


def _optional(kind: type) -> Callable[[Any], Any]:
    """A converter for a setting read as text (the environment, Scrapy settings): ``none``
    and the empty string are None."""
    def convert(value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.lower() in ("", "none", "null"):
                return None
            if kind is int:
                return int(text)
            if kind is float:
                return float(text)
            return text
        return value
    return convert


def _flag(value: Any) -> bool:
    """A yes/no setting read as text (``true``/``false``, ``1``/``0``, ``yes``/``no``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a yes/no value: {value!r}")


@dataclass(frozen=True)
class DetectorSettings:
    """Every setting a detector decides with, in one validated value: the library
    (``Detector(settings=...)``, ``Detector.open(..., settings=...)``), the command line
    (options generated from these fields), the service (``NEARDUP_*`` variables or the JSON
    the CLI passes its workers) and the Scrapy middleware (``NEARDUP_*`` settings) read the
    same fields, so every front end offers every setting (``tests/test_settings.py``).

    k: Hamming threshold, ``distance <= k`` makes a candidate; None: the store's tuned
        thresholds (``neardup tune --apply``, per host), else the spec version's default.
    verify: a candidate is ``near`` when the sketches estimate a word 3-shingle Jaccard
        similarity of at least this (None: every candidate within k).
    method: ``simhash``, ``minhash`` or ``both``.
    threshold: MinHash Jaccard threshold (methods ``minhash`` and ``both``).
    containment: also report ``partial`` copies whose share found in a longer stored page is
        at least this.
    canonical: canonical policy chain (``rel-canonical,first-seen`` ...); None: the store's.
    extractor, min_tokens, max_bytes: fingerprint settings for a new store (an existing store
        keeps the ones it was written with): main-content extractor, fewer tokens is
        ``empty``, larger pages are refused.
    keep_changes: entries of the store's change log writers keep (None: never prune).
    bands: also take candidates from the sketch bands (:mod:`neardup.index.bands`): pages whose
        sketches share a band, at any SimHash distance, ``near`` when the sketch estimate
        reaches ``max(verify, FAR_VERIFY)``; False: the SimHash distance ``k`` alone brings
        candidates (as neardup 0.1 did).

    >>> s = DetectorSettings.from_dict({"k": "9", "verify": "none", "method": "simhash"})
    >>> s.k, s.verify
    (9, None)
    >>> DetectorSettings(k=-1)
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: k must be an integer between 0 and 128, got -1
    """

    k: int | None = None
    verify: float | None = DEFAULT_VERIFY
    method: str = "simhash"
    threshold: float = DEFAULT_THRESHOLD
    containment: float | None = None
    canonical: str | None = None
    extractor: str | None = None
    min_tokens: int | None = None
    max_bytes: int | None = None
    keep_changes: int | None = DEFAULT_KEEP_CHANGES
    bands: bool = True

    #: how each field is read from text: its converter
    CONVERTERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "k": _optional(int), "verify": _optional(float), "method": _optional(str), "threshold": _optional(float),
        "containment": _optional(float), "canonical": _optional(str), "extractor": _optional(str),
        "min_tokens": _optional(int), "max_bytes": _optional(int), "keep_changes": _optional(int),
        "bands": _flag,
    }

    def __post_init__(self) -> None:
        def integer(name: str, low: int, high: int | None = None, optional: bool = True) -> None:
            value = getattr(self, name)
            if value is None and optional:
                return
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
            if not ok or (high is not None and value > high):
                span = f"between {low} and {high}" if high is not None else f">= {low}"
                raise ConfigError(f"{name} must be an integer {span}, got {value!r}")

        def share(name: str, low_open: bool, optional: bool = True) -> None:
            value = getattr(self, name)
            if value is None and optional:
                return
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and (value > 0.0 if low_open else value >= 0.0) and value <= 1.0
            if not ok:
                raise ConfigError(f"{name} must be in {'(0' if low_open else '[0'}, 1], got {value!r}")

        integer("k", 0, 128)
        share("verify", False)
        share("threshold", True, optional=False)
        share("containment", True)
        integer("min_tokens", 0)
        integer("max_bytes", 1)
        integer("keep_changes", 0)
        if not isinstance(self.bands, bool):
            raise ConfigError(f"bands must be True or False, got {self.bands!r}")
        if self.method not in METHODS:
            raise ConfigError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.extractor is not None and self.extractor not in EXTRACTOR_NAMES:
            raise ConfigError(f"unknown extractor {self.extractor!r}; choose one of {', '.join(EXTRACTOR_NAMES)}")
        if self.canonical is not None:
            policy_from_spec(self.canonical)  # a ConfigError naming the bad rule

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DetectorSettings:
        """From a mapping of field names (values may be text, as the environment gives
        them); an unknown name is a :class:`ConfigError` listing the known ones."""
        names = setting_names()
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(names)}")
        values = {}
        for name, value in data.items():
            try:
                values[name] = cls.CONVERTERS[name](value)
            except ValueError:
                kind = "yes or no" if name == "bands" else "a number"
                raise ConfigError(f"setting {name} must be {kind}, got {value!r}") from None
        return cls(**values)

    @classmethod
    def from_env(cls, environ: Mapping[str, Any] | None = None, prefix: str = "NEARDUP_") -> DetectorSettings:
        """From ``NEARDUP_K``, ``NEARDUP_VERIFY``, ... (any mapping with string keys: the
        process environment by default, or Scrapy's settings); absent names keep their
        defaults.

        >>> DetectorSettings.from_env({"NEARDUP_K": "7", "NEARDUP_METHOD": "both", "OTHER": "x"}).method
        'both'
        """
        import os

        source = os.environ if environ is None else environ
        found = {}
        for name in setting_names():
            value = source.get(prefix + name.upper())
            if value is not None:
                found[name] = value
        return cls.from_dict(found)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values (the inverse of :meth:`from_dict`)."""
        return {name: getattr(self, name) for name in setting_names()}

    def with_(self, **changes: Any) -> DetectorSettings:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def fingerprint_config(self, base: FingerprintConfig | None = None) -> FingerprintConfig | None:
        """``base`` (default: :data:`DEFAULT_CONFIG`) with this value's extractor, min_tokens
        and max_bytes; None when none of them is set and no base is given (the store's own
        config is then used)."""
        changes = {name: getattr(self, name) for name in ("extractor", "min_tokens", "max_bytes")
                   if getattr(self, name) is not None}
        if not changes and base is None:
            return None
        return (base or DEFAULT_CONFIG).with_(**changes)


def setting_names() -> tuple[str, ...]:
    """The fields of :class:`DetectorSettings`, in order.

    >>> setting_names()[:3]
    ('k', 'verify', 'method')
    """
    return tuple(f.name for f in dataclasses.fields(DetectorSettings))


#: the settings a detector uses when given none
DEFAULT_SETTINGS = DetectorSettings()

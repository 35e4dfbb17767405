"""Command-line options generated from :class:`neardup.detector.settings.DetectorSettings`: every
command that decides (``add``, ``check``, ``dedup``, ``serve``) offers every setting, with the
same names, and builds one validated value from them (:func:`settings_from_options`).
``tests/test_settings.py`` fails when a field has no option here.

Options left out keep the field's default; ``none`` sets an optional field to None
(``--verify none``: every candidate within k is near).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click

from neardup.detector.mirror import DEFAULT_KEEP_CHANGES
from neardup.detector.settings import DetectorSettings, setting_names
from neardup.fingerprint.core import DEFAULT_CONFIG, FingerprintConfig
from neardup.fingerprint.extract import EXTRACTORS
from neardup.fingerprint.features import FeatureConfig
from neardup.model import DEFAULT_K, DEFAULT_THRESHOLD, DEFAULT_VERIFY, METHODS, default_k


class _NumberOrNone(click.ParamType):
    """A number in a range, or ``none``."""

    def __init__(self, kind: type, low: float, high: float | None = None) -> None:
        self.kind, self.low, self.high = kind, low, high
        self.name = f"{'integer' if kind is int else 'number'}|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text == "none":
            return "none"
        try:
            number = self.kind(text)
        except ValueError:
            self.fail(f"{value!r} is not a {'whole number' if self.kind is int else 'number'} or 'none'", param, ctx)
        if number < self.low or (self.high is not None and number > self.high):
            span = f"{self.low}..{self.high}" if self.high is not None else f">= {self.low}"
            self.fail(f"{value!r} is not in {span}", param, ctx)
        return number


#: field -> (option declarations, click type, help)
OPTIONS: dict[str, tuple[tuple[str, ...], Any, str]] = {
    "k": (("-k", "--k"), click.IntRange(0, 128),
          "Hamming threshold: distance <= k is a candidate (then the sketch check). Default: the store's tuned "
          f"thresholds ('neardup tune --apply', per host), else {DEFAULT_K} (with the sketch bands; "
          f"{default_k(bands=False)} with --no-bands)."),
    "verify": (("--verify",), _NumberOrNone(float, 0.0, 1.0),
               f"Sketch (word 3-shingle Jaccard) a SimHash candidate needs to be near (default {DEFAULT_VERIFY}; "
               "none: every candidate)."),
    "method": (("--method",), click.Choice(list(METHODS)),
               "simhash: distance <= k; minhash: estimated Jaccard >= --threshold; both: either (default simhash)."),
    "threshold": (("--threshold",), click.FloatRange(0.0, 1.0, min_open=True),
                  f"MinHash Jaccard threshold (methods minhash and both only; default {DEFAULT_THRESHOLD})."),
    "containment": (("--containment",), click.FloatRange(0.0, 1.0, min_open=True),
                    "Also report 'partial' copies: share of a page found in a longer stored page >= this."),
    "canonical": (("--canonical",), str,
                  "Canonical policy chain, e.g. 'rel-canonical,first-seen' (default: the store's, else that one)."),
    "extractor": (("--extractor",), click.Choice(list(EXTRACTORS)),
                  "Main-content extractor for a new store: hybrid (the default of spec version 3: Resiliparse's "
                  "block selection, trafilatura where that looks wrong), accurate (trafilatura; the default of "
                  "versions 1 and 2), fast (Resiliparse), full (no boilerplate removal)."),
    "min_tokens": (("--min-tokens",), click.IntRange(0),
                   "Pages with fewer main-content tokens are 'empty' "
                   f"(new store; default {DEFAULT_CONFIG.min_tokens})."),
    "max_bytes": (("--max-bytes",), click.IntRange(1),
                  f"Larger pages are refused (new store; default {DEFAULT_CONFIG.max_bytes})."),
    "keep_changes": (("--keep-changes",), _NumberOrNone(int, 0),
                     "Change-log entries writers keep for other processes "
                     f"(default {DEFAULT_KEEP_CHANGES}; none: all)."),
    "bands": (("--bands/--no-bands",), None,
              "Candidates from the sketch bands too, at any SimHash distance (default on); --no-bands: k alone."),
}

#: the fingerprint settings a command without a store offers (``neardup fingerprint``)
FINGERPRINT_FIELDS = ("extractor", "min_tokens", "max_bytes")


def settings_options(fields: Iterable[str] | None = None) -> Callable[..., Any]:
    """A decorator adding one option per setting in ``fields`` (default: all)."""
    chosen = list(fields) if fields is not None else list(setting_names())

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(chosen):
            decls, kind, text = OPTIONS[name]
            if kind is None:  # a yes/no flag
                fn = click.option(*decls, name, default=None, help=text)(fn)
            else:
                fn = click.option(*decls, name, type=kind, default=None, help=text)(fn)
        return fn
    return decorate


def settings_from_options(opts: dict[str, Any]) -> DetectorSettings:
    """The settings given on the command line (popped from ``opts``): a :class:`DetectorSettings`
    with the defaults for what was not given. ``--threshold`` with ``--method simhash`` is a
    usage error (with simhash, -k decides)."""
    given = {name: opts.pop(name) for name in list(opts) if name in OPTIONS}
    values: dict[str, Any] = {name: (None if value == "none" else value) for name, value in given.items()
                              if value is not None}
    if values.get("threshold") is not None and values.get("method", "simhash") == "simhash":
        raise click.UsageError("--threshold is the MinHash Jaccard threshold: it needs --method minhash or both "
                               "(with simhash, -k decides)")
    return DetectorSettings(**values)


def config_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Feature options of the fingerprint config (for a new store; a store keeps its own)."""
    options = [
        click.option("--features", "scheme", type=click.Choice(["words", "shingles", "chars"]), default=None,
                     help=f"Feature scheme (default {DEFAULT_CONFIG.features.scheme})."),
        click.option("--ngram", type=click.IntRange(1, 16), default=None, help="n for shingles / chars schemes."),
        click.option("--bits", type=click.Choice(["64", "128"]), default=None, help="SimHash width (default 64)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def build_config(settings: DetectorSettings, scheme: str | None = None, ngram: int | None = None,
                 bits: str | None = None) -> FingerprintConfig | None:
    """The fingerprint config the options ask for; None when none was given (the store's
    config is then used, else the default)."""
    if scheme is None and ngram is None and bits is None:
        return settings.fingerprint_config()
    features = DEFAULT_CONFIG.features
    if scheme is not None or ngram is not None:
        chosen = scheme or features.scheme
        default_n = {"words": 1, "shingles": 3, "chars": 4}[chosen]
        features = FeatureConfig(**{**features.to_dict(), "scheme": chosen, "ngram": ngram or default_n})
    base = DEFAULT_CONFIG.with_(features=features, bits=int(bits) if bits else DEFAULT_CONFIG.bits)
    return settings.fingerprint_config(base)

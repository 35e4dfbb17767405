"""Request and response models of the HTTP service (pydantic): strict validation at the door,
and the OpenAPI description of every answer."""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from pydantic import BaseModel, Field, StrictFloat, StrictInt, create_model, field_validator, model_validator

from neardup.detector.core import Detector
from neardup.errors import InputError
from neardup.fingerprint.core import Fingerprint
from neardup.model import TIME_RANGE, Verdict
from neardup.sketch import sketch_size

MAX_BATCH = 1000
MAX_ID = (1 << 63) - 1  # SQLite INTEGER
MAX_SKETCH_HEX = 2 * (4 + 1020)  # the 4-byte shingle count and at most 1,020 one-byte bins
_HEX = re.compile(r"[0-9a-fA-F]+")


def _scalar_values(value: str | None, what: str) -> str | None:
    """``value`` unless it holds a lone surrogate (JSON "\\ud800": no store can keep it)."""
    if value is not None and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} contains a lone surrogate (not valid Unicode)") from None
    return value


def has_surrogates(value: str) -> bool:
    """True when ``value`` holds a lone surrogate."""
    try:
        _scalar_values(value, "")
    except ValueError:
        return True
    return False


Finite = Field(None, allow_inf_nan=False)
#: a page's ``fetched_at`` and ``priority`` in a request: a JSON number (``true`` is refused,
#: 422); the range of a time is the library's (:data:`neardup.model.MIN_TIME` to
#: :data:`~neardup.model.MAX_TIME`, :func:`neardup.model.checked_time`: 400 ``ConfigError``, or
#: the item's ``error`` in a batch), as for the Detector
FetchedAt = Field(None, allow_inf_nan=False, description=f"POSIX seconds, from {TIME_RANGE}; default: now")


class FieldError(InputError):
    """A request field the service cannot use (answered 422, ``type`` InputError): a
    fingerprint without the sketch its spec has, a sketch of the wrong size, a page over the
    per-page time limit."""


class PageIn(BaseModel):
    """A page to check or add: its URL and HTML (or plain text)."""

    url: str = Field(..., max_length=8192)
    html: str | None = None
    text: str | None = None
    headers: dict[str, str] | None = Field(None, max_length=200)
    fetched_at: StrictFloat | None = FetchedAt
    priority: StrictFloat | None = Finite

    @model_validator(mode="after")
    def one_body(self) -> "PageIn":
        """Exactly one of html and text; header names and values of bounded length."""
        if (self.html is None) == (self.text is None):
            raise ValueError("give exactly one of 'html' or 'text'")
        for key, value in (self.headers or {}).items():
            if len(key) > 256 or len(value) > 8192:
                raise ValueError("a header name is over 256 or a value over 8192 characters")
        return self

    def content_and_headers(self) -> tuple[str, dict[str, str] | None]:
        """The content and headers to fingerprint (plain text gets ``content-type: text/plain``)."""
        if self.html is not None:
            return self.html, self.headers
        return self.text or "", {**(self.headers or {}), "content-type": "text/plain"}


class BatchIn(BaseModel):
    """Up to :data:`MAX_BATCH` pages."""

    pages: list[PageIn] = Field(..., max_length=MAX_BATCH)


class RevisitIn(BaseModel):
    """An unchanged fetch of a stored URL that sent no content (an HTTP 304, a WARC revisit)."""

    url: str = Field(..., max_length=8192)
    fetched_at: StrictFloat | None = FetchedAt


class FingerprintIn(BaseModel):
    """A fingerprint computed by the client, with everything the match rule reads: the
    SimHash, the digest, the sketch (when the spec has one) and the title."""

    url: str = Field(..., max_length=8192)
    simhash: str = Field(..., min_length=1, max_length=64,
                         description="SimHash as hex, bits/4 digits (16 for 64 bits), as computed by the "
                                     "documented spec")
    digest: str = Field(..., min_length=64, max_length=64,
                        description="SHA-256 of the normalised main text, 64 hex digits")
    spec: str = Field(..., max_length=1024)
    tokens: StrictInt = Field(..., ge=0, le=MAX_ID,
                              description="main-content token count (pages under min_tokens are empty)")
    length: StrictInt = Field(0, ge=0, le=MAX_ID)
    features: StrictInt = Field(0, ge=0, le=MAX_ID)
    sketch: str | None = Field(None, min_length=10, max_length=MAX_SKETCH_HEX,
                               description="the verification sketch as hex, as `neardup fingerprint` prints it; "
                                           "required when the spec has one (`;sketch=` in it)")
    title: str | None = Field(None, max_length=8192)
    canonical_url: str | None = Field(None, max_length=8192)
    language: str | None = Field(None, max_length=64)
    fetched_at: StrictFloat | None = FetchedAt
    priority: StrictFloat | None = Finite

    @field_validator("simhash")
    @classmethod
    def hex_simhash(cls, v: str) -> str:
        """Hex digits only."""
        if not _HEX.fullmatch(v):
            raise ValueError("simhash must be a hexadecimal string (digits 0-9 and a-f only)")
        return v

    @field_validator("digest")
    @classmethod
    def hex_digest(cls, v: str) -> str:
        """64 hex digits, lower-cased."""
        if not _HEX.fullmatch(v):
            raise ValueError("digest must be a SHA-256 hex string (64 digits 0-9 and a-f)")
        return v.lower()

    @field_validator("sketch")
    @classmethod
    def hex_sketch(cls, v: str | None) -> str | None:
        """An even number of hex digits."""
        if v is not None and (len(v) % 2 or not _HEX.fullmatch(v)):
            raise ValueError("sketch must be hex bytes (an even number of digits 0-9 and a-f)")
        return v

    @field_validator("url", "spec", "title", "canonical_url", "language")
    @classmethod
    def valid_unicode(cls, v: str | None, info: Any) -> str | None:
        """No lone surrogates."""
        return _scalar_values(v, info.field_name)

    def fingerprint(self, detector: Detector, where: str = "") -> Fingerprint:
        """The :class:`Fingerprint`; :class:`FieldError` when the sketch the detector's spec
        has is missing or of another size (``where``: the item's place in a batch),
        :class:`InputError` for a SimHash of the wrong width."""
        config = detector.config
        sketch = bytes.fromhex(self.sketch) if self.sketch is not None else None
        if config.sketch_bins and self.spec == config.spec:
            size = sketch_size(config.sketch_bins)
            if sketch is None:
                raise FieldError(f"{where}sketch: missing; the spec has a verification sketch "
                                 f"({size} bytes as hex, as `neardup fingerprint` prints it), "
                                 "and without it a near match cannot be verified")
            if len(sketch) != size:
                raise FieldError(f"{where}sketch: {len(sketch)} bytes, the spec's sketch has {size}")
        bits = config.bits
        if len(self.simhash) != bits // 4:
            if len(self.simhash) > bits // 4 and int(self.simhash, 16) >= 1 << bits:
                raise InputError(f"simhash has more than {bits} bits")
            raise InputError(f"simhash must be {bits // 4} hex digits ({bits} bits), got {len(self.simhash)}")
        return Fingerprint(
            simhash=int(self.simhash, 16), digest=self.digest, spec=self.spec, bits=bits, title=self.title,
            canonical_url=self.canonical_url, language=self.language, length=self.length,
            tokens=self.tokens, features=self.features, sketch=sketch,
            empty=self.tokens < max(1, config.min_tokens),
        )


class FingerprintBatchIn(BaseModel):
    """Up to ten times :data:`MAX_BATCH` fingerprints."""

    fingerprints: list[FingerprintIn] = Field(..., max_length=MAX_BATCH * 10)


# -- response models: the OpenAPI description of every route's answer ----------------------
# (documentation only: the routes write their JSON directly, see _json)

#: what the OpenAPI description says of some verdict fields (the rest: their name and type)
VERDICT_DESCRIPTIONS = {
    "status": "new | exact | near | partial | empty | error",
    "distance": "Hamming distance of the SimHashes to the match",
    "digest": "SHA-256 (hex) of the normalised main text",
    "simhash": "SimHash, hex",
    "method": "digest | simhash | minhash | simhash+minhash",
    "score": "estimated Jaccard similarity (containment for partial)",
    "error": "why the page could not be read (status 'error')",
    "version": "re-fetch of a stored URL: unchanged | changed (None: first fetch)",
    "previous_distance": "Hamming distance to the URL's stored version",
    "previous_score": "sketch Jaccard estimate with the URL's stored version",
    "since_last_fetch": "seconds since the URL's last fetch",
    "fetched_url": "the URL as given, when its normalised form (url) differs",
    "next_fetch": "when the content is next expected to change (POSIX time)",
    "flag": "soft-404 | template-only: the host's error or empty template",
}


def _model_of(cls: type, name: str, descriptions: dict[str, str]) -> type[BaseModel]:
    """A response model with the fields of the dataclass ``cls`` (one definition: the model
    cannot drift from what the routes send)."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        default = ... if f.default is dataclasses.MISSING else f.default
        fields[f.name] = (hints[f.name], Field(default, description=descriptions.get(f.name)))
    return create_model(name, __doc__=f"{(cls.__doc__ or '').splitlines()[0]} (:class:`neardup.{cls.__name__}`)",
                        **fields)


VerdictOut = _model_of(Verdict, "VerdictOut", VERDICT_DESCRIPTIONS)


_VERDICT_LIST: Any = list.__class_getitem__(VerdictOut)  # list[VerdictOut], built at run time
VerdictsOut = create_model("VerdictsOut", __doc__="The verdicts of a batch, in its order.",
                           verdicts=(_VERDICT_LIST, ...))


class ErrorOut(BaseModel):
    """Every error answer."""

    error: str = Field(..., description="one line naming the problem")
    type: str = Field(..., description="the library exception (InputError, URLError, SpecMismatchError...) "
                                       "or the HTTP error's name (NotFound, MethodNotAllowed, ValidationError...)")


class PageOut(BaseModel):
    """A stored page (its latest fetch)."""

    id: int
    url: str
    host: str
    first_seen: float
    fetched_at: float
    digest: str
    simhash: str
    spec: str
    length: int
    title: str | None = None
    canonical_link: str | None = None
    language: str | None = None
    status: str
    matched_id: int | None = None
    distance: int | None = None
    cluster_id: int | None = None
    priority: float | None = None
    set_size: int | None = None
    sketch: str | None = Field(None, description="the 64-byte verification sketch, hex")
    fetched_url: str | None = None
    fetches: int = 1
    change_count: int = 0
    last_changed_at: float | None = None
    change_rate: float | None = None
    next_fetch: float | None = None


class PagesOut(BaseModel):
    """Stored pages (a cluster's members, in id order)."""

    pages: list[PageOut]


class ConfigOut(BaseModel):
    """What the service decides with: its fingerprint config and spec, and its settings."""

    config: dict[str, Any]
    spec: str
    settings: dict[str, Any]


class ThresholdsOut(BaseModel):
    """The ``k`` and ``verify`` a URL is decided with (its host's tuned values, if any)."""

    k: int
    verify: float | None = None


class MemberOut(BaseModel):
    """A cluster member and why it joined."""

    id: int
    url: str
    status: str
    matched_id: int | None = None
    distance: int | None = None
    first_seen: float
    fetched_at: float
    canonical: bool


class ClusterOut(BaseModel):
    """A cluster with its members."""

    id: int
    canonical_id: int | None = None
    canonical_url: str | None = None
    size: int
    members: list[MemberOut]


class HostOut(BaseModel):
    """A host's duplicate and change figures (:meth:`neardup.Detector.host`)."""

    host: str
    pages: int
    new: int
    exact: int
    near: int
    partial: int = 0
    empty: int
    duplicates: int = 0
    duplicate_rate: float
    distinct_contents: int = 0
    refetched: int = 0
    changed_pages: int = 0
    changes_per_day: float | None = None
    largest_cluster: dict[str, Any] | None = None
    trap: bool = False
    series_traps: list[dict[str, Any]] = Field([], description="numbered traps: URL pattern, members, members alike")
    budget_factor: float = 1.0
    templates: dict[str, Any] | None = Field(None, description="how many page structures, and the share of each")
    redesigns: list[dict[str, Any]] = Field([], description="when the host's fetches moved to another structure")
    soft_404s: int = 0
    template_only: int = 0
    rules: list[dict[str, Any]] = []


class FetchDecisionOut(BaseModel):
    """Should a crawler fetch this URL."""

    url: str = Field(..., description="the URL as asked about")
    key: str | None = Field(None, description="its normalised form, its key in the store")
    fetch: bool
    reason: str
    known_url: str | None = None
    canonical_url: str | None = None
    cluster_id: int | None = None
    rules: list[str] = []
    fetched_at: float | None = None
    host_duplicate_rate: float | None = None
    next_fetch: float | None = None
    change_rate: float | None = None


class HistoryOut(BaseModel):
    """A stored URL's fetches and recrawl schedule (:class:`neardup.crawl.schedule.UrlHistory`)."""

    url: str
    fetched_url: str | None = None
    first_seen: float
    fetched_at: float
    fetches: int
    change_count: int
    last_changed_at: float | None = None
    change_rate: float | None = Field(None, description="estimated changes per second")
    next_fetch: float | None = Field(None, description="when the content is next expected to change")
    versions: list[dict[str, Any]]


class DueOut(BaseModel):
    """Stored URLs due for a fetch, in URL order; ``next``: the ``after`` of the next page
    (None at the end)."""

    urls: list[str]
    next: str | None


class RulesOut(BaseModel):
    """Learned URL rules."""

    rules: list[dict[str, Any]]


class HostRulesOut(RulesOut):
    """One host's learned URL rules."""

    host: str


class HostsOut(BaseModel):
    """Per-host duplicate signals, one page of them."""

    hosts: list[dict[str, Any]]
    total: int
    offset: int


class ExpireIn(BaseModel):
    """What to forget."""

    older_than: StrictFloat = Field(description="seconds: pages last fetched longer ago are forgotten (>= 0)")


class ExpiredOut(BaseModel):
    """How many pages were forgotten."""

    expired: int


class ClusterInfoOut(BaseModel):
    """A cluster's size, canonical and growth."""

    id: int
    size: int
    canonical_id: int | None = None
    canonical_url: str | None = None
    created_at: float | None = None
    joins: int | None = None
    last_joined_at: float | None = None
    joins_per_hour: float


class StatsOut(BaseModel):
    """Store counts and the fingerprint spec."""

    model_config = {"extra": "allow"}

    pages: int
    clusters: int
    spec: str
    k: int
    method: str


class HealthOut(BaseModel):
    """Liveness."""

    status: str = "ok"


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what} for code, what in (
        (400, "bad page or URL"), (401, "missing, repeated or wrong bearer token"),
        (408, "body not received in time"), (413, "body over the limit"),
        (422, "malformed JSON or fields, a fingerprint without its sketch, a page over the per-page time limit"),
        (503, "busy: retry after Retry-After"))
}


def answers(model: Any, *extra: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route answering ``model``, its errors and ``extra`` codes."""
    out: dict[int | str, dict[str, Any]] = {200: {"model": model}, **_ERRORS}
    for code in extra:
        out[code] = {"model": ErrorOut, "description": {404: "unknown id", 409: "fingerprint of another spec"}[code]}
    return out

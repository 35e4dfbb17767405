"""``neardup.Client``: the Detector's methods over HTTP, for crawlers sharing one service.

>>> from neardup import Client                                  # doctest: +SKIP
>>> det = Client("http://127.0.0.1:8080", token="secret")       # instead of Detector.open(...)
>>> det.add("https://example.com/a", html).status               # doctest: +SKIP
'new'

Errors come back as the library's typed exceptions: the service names the exception the
Detector raised (``type`` in the JSON error), and the Client raises that one (``URLError``,
``ConfigError``, ``InputError``, ``SpecMismatchError``...), so the same input fails the same
way embedded and over HTTP. Without a name: 400 → :class:`InputError`, 409 →
:class:`SpecMismatchError`, 404 → :class:`NotFoundError`, 401/413/422 →
:class:`ServiceError` (a :class:`NeardupError`, with ``status``), 503 →
:class:`StoreLockedError` (after ``retries`` waits of the service's ``Retry-After``, when it
is busy), 5xx → :class:`StoreError`. Lookups of what is not there (:meth:`Client.page`,
:meth:`Client.cluster`, :meth:`Client.cluster_info`) return None, as the Detector's do.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

try:
    import httpx
except ImportError:  # the 'service' extra is not installed: say so in one line
    raise ImportError("neardup.Client needs the 'service' extra: pip install 'neardup[service]'") from None

from neardup import errors as _errors
from neardup.crawl.schedule import UrlHistory
from neardup.crawl.urlrules import Rule
from neardup.detector.revisits import foreign_revisit
from neardup.errors import (
    ConfigError,
    InputError,
    NeardupError,
    NotStoredError,
    SpecMismatchError,
    StoreError,
    StoreLockedError,
    URLError,
)
from neardup.fingerprint.core import Fingerprint, FingerprintConfig
from neardup.fingerprint.core import fingerprint as neardup_fingerprint
from neardup.model import (
    DEFAULT_HOST_MIN_PAGES,
    DEFAULT_TRAP_MEMBERS,
    MIN_HOST_PAGES,
    MIN_TRAP_MEMBERS,
    FetchDecision,
    Page,
    Verdict,
    checked_count,
    priority_value,
    timestamp,
)
from neardup.store.base import PageRecord


def _page_body(url: str, content: bytes | str, headers: Mapping[str, str] | None,
               fetched_at: float | datetime | None = None, priority: float | None = None) -> dict[str, Any]:
    """The JSON of a page route (bytes decoded here, as the library would)."""
    if isinstance(content, (bytes, bytearray)):
        # the service takes JSON strings: refuse binary bodies and decode here exactly as
        # the library would (a PNG, a PDF, NUL bytes: InputError, as from the Detector)
        from neardup.fingerprint.extract import check_binary, declared_charset, decode, header

        data = bytes(content)
        check_binary(data, header(headers, "content-type"), declared_charset(headers))
        text, _ = decode(data, headers)
    else:
        text = content
    body: dict[str, Any] = {"url": url, "html": text}
    if headers:
        body["headers"] = {k: v for k, v in headers.items()
                           if k.lower() != "content-type" or "charset" not in v.lower()}
    return {**body, **_when(fetched_at, priority)}


def _when(fetched_at: float | datetime | None, priority: float | None) -> dict[str, float]:
    """The ``fetched_at`` and ``priority`` fields of a request, checked here as the Detector
    checks them (:func:`neardup.model.checked_time`: :class:`ConfigError` for a time outside
    1970-01-01 to 9999-12-31, a bool, NaN...); none for None."""
    out: dict[str, float] = {}
    if fetched_at is not None:
        out["fetched_at"] = timestamp(fetched_at)
    checked = priority_value(priority)
    if checked is not None:
        out["priority"] = checked
    return out


def _fp_body(url: str, fp: Fingerprint, **extra: Any) -> dict[str, Any]:
    """The JSON of a fingerprint route: everything the match rule reads (the sketch, as hex,
    and the title included)."""
    body = {"url": url, "simhash": fp.simhash_hex, "digest": fp.digest, "spec": fp.spec, "tokens": fp.tokens,
            "length": fp.length, "features": fp.features, "title": fp.title, "canonical_url": fp.canonical_url,
            "language": fp.language, **{k: v for k, v in extra.items() if v is not None}}
    if fp.sketch is not None:
        body["sketch"] = fp.sketch.hex()
    return body


class ServiceError(NeardupError):
    """The service refused a request for a reason of its own (401, 413, 422...): ``status``."""

    def __init__(self, message: str, status: int) -> None:
        """A service error with its HTTP ``status``."""
        super().__init__(message)
        self.status = status


class NotFoundError(ServiceError):
    """404: no such page, cluster, host or route."""


def _typed(name: object) -> type[NeardupError] | None:
    """The library exception class the service named, if it is one."""
    cls = getattr(_errors, name, None) if isinstance(name, str) else None
    return cls if isinstance(cls, type) and issubclass(cls, NeardupError) else None


def _batch(items: Iterable[Any], body: Any, send: Any) -> list[Verdict]:
    """A batch over HTTP with the Detector's per-item errors: ``body(item)`` builds an item's
    JSON (a :class:`NeardupError` there, a bad time or binary content, is that item's
    ``error`` verdict, as from the Detector); ``send(bodies)`` posts the others at once and
    returns their verdicts, which are put back in order."""
    bodies: list[Any] = []
    refused: dict[int, Verdict] = {}
    for i, item in enumerate(items):
        try:
            bodies.append(body(item))
        except NeardupError as exc:
            url = item.url if isinstance(item, Page) else item[0]
            refused[i] = Verdict(status="error", url=str(url), error=str(exc))
    done = iter(send(bodies) if bodies else [])
    return [refused[i] if i in refused else next(done) for i in range(len(bodies) + len(refused))]


def _verdict(data: dict[str, Any]) -> Verdict:
    """A :class:`Verdict` from its JSON."""
    fields = Verdict.__dataclass_fields__
    return Verdict(**{k: v for k, v in data.items() if k in fields})


class Client:
    """HTTP client with the Detector's methods (check, add, add_many, check_fingerprint,
    add_fingerprint, check_fingerprints, add_fingerprints, page, cluster, cluster_info, stats,
    expire, should_fetch, rules, hosts); :class:`neardup.detector.api.DetectorAPI` lists what both offer."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None, retries: int = 3) -> None:
        """A client of the service at ``base_url`` (``token``: the bearer token; ``retries`` on 503)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)
        self._config: FingerprintConfig | None = None  # the service's, read at the first fingerprint()
        self.retries = retries

    def _call(self, method: str, path: str, json: Any = None, *, missing_ok: bool = False) -> Any:
        """One request, retried on 503 as the service asks; the library's exception for an error answer."""
        for attempt in range(self.retries + 1):
            try:
                r = self._http.request(method, path, json=json)
            except httpx.HTTPError as exc:
                raise StoreError(f"neardup service unreachable at {self._http.base_url}: {exc}") from None
            if r.status_code != 503 or attempt == self.retries:
                break
            try:  # busy: wait as the service asks (at most 5 s), then try again
                wait = float(r.headers.get("retry-after", "1"))
            except ValueError:
                wait = 1.0
            time.sleep(min(max(wait, 0.05), 5.0) * (attempt + 1))
        if r.status_code < 400:
            return r.json()
        if r.status_code == 404 and missing_ok:
            return None
        kind = None
        try:
            data = r.json()
            message = data.get("error", r.text) if isinstance(data, dict) else r.text
            kind = _typed(data.get("type")) if isinstance(data, dict) else None
        except ValueError:
            message = r.text
        if kind is not None:
            raise kind(message)
        if r.status_code == 400:
            raise InputError(message)
        if r.status_code == 404:
            raise NotFoundError(f"HTTP 404: {message}", 404)
        if r.status_code == 409:
            raise SpecMismatchError(message)
        if r.status_code == 503:
            raise StoreLockedError(message)
        if r.status_code >= 500:
            raise StoreError(message)
        raise ServiceError(f"HTTP {r.status_code}: {message}", r.status_code)

    def check(self, url: str, content: bytes | str, headers: Mapping[str, str] | None = None) -> Verdict:
        """:meth:`Detector.check` over HTTP: ``POST /v1/check``."""
        return _verdict(self._call("POST", "/v1/check", _page_body(url, content, headers)))

    def add(self, url: str, content: bytes | str, headers: Mapping[str, str] | None = None, *,
            fetched_at: float | datetime | None = None, priority: float | None = None) -> Verdict:
        """:meth:`Detector.add` over HTTP: ``POST /v1/pages``."""
        return _verdict(self._call("POST", "/v1/pages", _page_body(url, content, headers, fetched_at, priority)))

    def add_revisit(self, url: str, *, fetched_at: float | datetime | None = None) -> Verdict:
        """:meth:`Detector.add_revisit` over HTTP: ``POST /v1/revisits`` (:class:`NotStoredError`
        when the URL is not stored)."""
        return _verdict(self._call("POST", "/v1/revisits", {"url": url, **_when(fetched_at, None)}))

    def add_many(self, pages: Iterable[Page | tuple[str, bytes | str]]) -> list[Verdict]:
        """:meth:`Detector.add_many` over HTTP: ``POST /v1/pages/batch``, in order; a
        :attr:`Page.revisit` between them is ``POST /v1/revisits`` (``error`` when not stored)."""
        def body(item: Page | tuple[str, bytes | str]) -> dict[str, Any]:
            p = item if isinstance(item, Page) else Page(*item)
            return _page_body(p.url, p.content, p.headers, p.fetched_at, p.priority)

        def send(bodies: list[dict[str, Any]]) -> list[Verdict]:
            return [_verdict(v) for v in self._call("POST", "/v1/pages/batch", {"pages": bodies})["verdicts"]]

        out: list[Verdict] = []
        run: list[Page | tuple[str, bytes | str]] = []
        for item in [*pages, None]:
            if item is not None and not (isinstance(item, Page) and item.revisit):
                run.append(item)
                continue
            out += _batch(run, body, send) if run else []
            run = []
            if item is not None:
                out.append(self._revisit_verdict(item))
        return out

    def _revisit_verdict(self, page: Page) -> Verdict:
        """One revisit of :meth:`add_many`, its refusal an ``error`` verdict as from the Detector."""
        why = foreign_revisit(page)
        try:
            if why is not None:
                raise NotStoredError(why)
            return self.add_revisit(page.url, fetched_at=page.fetched_at)
        except (NotStoredError, URLError, ConfigError, InputError) as exc:  # what the Detector answers so
            return Verdict(status="error", url=str(page.url), error=str(exc))

    def check_fingerprint(self, url: str, fp: Fingerprint) -> Verdict:
        """:meth:`Detector.check_fingerprint` over HTTP (with the sketch and the title)."""
        return _verdict(self._call("POST", "/v1/fingerprints/check", _fp_body(url, fp)))

    def add_fingerprint(self, url: str, fp: Fingerprint, *, fetched_at: float | datetime | None = None,
                        priority: float | None = None) -> Verdict:
        """:meth:`Detector.add_fingerprint` over HTTP (with the sketch and the title)."""
        body = _fp_body(url, fp, **_when(fetched_at, priority))
        return _verdict(self._call("POST", "/v1/fingerprints/add", body))

    def check_fingerprints(self, items: Iterable[tuple[str, Fingerprint]]) -> list[Verdict]:
        """:meth:`Detector.check_fingerprints` over HTTP: one request."""
        body = {"fingerprints": [_fp_body(url, fp) for url, fp in items]}
        return [_verdict(v) for v in self._call("POST", "/v1/fingerprints/check/batch", body)["verdicts"]]

    def add_fingerprints(
        self, items: Iterable[tuple[str, Fingerprint] | tuple[str, Fingerprint, float | datetime | None, float | None]],
    ) -> list[Verdict]:
        """:meth:`Detector.add_fingerprints` over HTTP: one request, one transaction."""
        def body(it: tuple[Any, ...]) -> dict[str, Any]:
            return _fp_body(it[0], it[1], **(_when(it[2], it[3]) if len(it) == 4 else {}))

        def send(bodies: list[dict[str, Any]]) -> list[Verdict]:
            found = self._call("POST", "/v1/fingerprints/add/batch", {"fingerprints": bodies})
            return [_verdict(v) for v in found["verdicts"]]
        return _batch(items, body, send)

    def page(self, page_id: int) -> PageRecord | None:
        """:meth:`Detector.page` over HTTP: ``GET /v1/pages/{id}`` (None when there is none)."""
        found = self._call("GET", f"/v1/pages/{int(page_id)}", missing_ok=True)
        return None if found is None else PageRecord.from_dict(found)

    def cluster(self, cluster_id: int) -> list[PageRecord]:
        """:meth:`Detector.cluster` over HTTP: ``GET /v1/clusters/{id}/pages`` (empty when
        there is no such cluster)."""
        found = self._call("GET", f"/v1/clusters/{int(cluster_id)}/pages", missing_ok=True)
        return [] if found is None else [PageRecord.from_dict(p) for p in found["pages"]]

    def fingerprint(self, content: bytes | str, url: str | None = None,
                    headers: Mapping[str, str] | None = None) -> Fingerprint:
        """:meth:`Detector.fingerprint`: computed here, with the service's fingerprint config
        (``GET /v1/config``, read once), so the service accepts it."""
        if self._config is None:
            self._config = FingerprintConfig.from_dict(self._call("GET", "/v1/config")["config"])
        return neardup_fingerprint(content, url=url, headers=headers, config=self._config)

    def thresholds(self, url: str | None) -> tuple[int, float | None]:
        """:meth:`Detector.thresholds` over HTTP: ``GET /v1/thresholds?url=``."""
        found = self._call("GET", "/v1/thresholds?" + urlencode({"url": url or ""}))
        return int(found["k"]), None if found["verify"] is None else float(found["verify"])

    def host(self, name: str, *, window: float | None = None, at: float | None = None,
             trap_members: int = DEFAULT_TRAP_MEMBERS) -> dict[str, Any] | None:
        """:meth:`Detector.host` over HTTP: ``GET /v1/hosts/{host}`` (None when it has no page)."""
        params: dict[str, Any] = {"trap_members": checked_count(trap_members, "trap_members", MIN_TRAP_MEMBERS)}
        if window is not None:
            params["window"] = window
        if at is not None:
            params["at"] = at
        return self._call("GET", f"/v1/hosts/{quote(name, safe='')}?" + urlencode(params), missing_ok=True)

    def learn_rules(self) -> list[Rule]:
        """:meth:`Detector.learn_rules` over HTTP: ``POST /v1/rules/learn``."""
        return [Rule.from_dict(r) for r in self._call("POST", "/v1/rules/learn")["rules"]]

    def cluster_info(self, cluster_id: int, at: float | None = None) -> dict[str, Any] | None:
        """:meth:`Detector.cluster_info` over HTTP: ``GET /v1/clusters/{id}/info``."""
        query = "" if at is None else "?" + urlencode({"at": float(at)})
        return self._call("GET", f"/v1/clusters/{int(cluster_id)}/info{query}", missing_ok=True)

    def expire(self, older_than: float) -> int:
        """:meth:`Detector.expire` over HTTP: ``POST /v1/expire``; returns how many pages went."""
        return int(self._call("POST", "/v1/expire", {"older_than": float(older_than)})["expired"])

    def stats(self) -> dict[str, Any]:
        """:meth:`Detector.stats` over HTTP, with the spec, k and method."""
        return self._call("GET", "/v1/stats")

    def should_fetch(self, url: str, *, max_age: float | None = None,
                     host_max_duplicate_rate: float | None = None, host_min_pages: int = 20) -> FetchDecision:
        """:meth:`Detector.should_fetch` over HTTP: ``GET /v1/should-fetch?url=...`` (``url``
        as given, ``key`` the normalised one)."""
        params: dict[str, Any] = {"url": url}
        if max_age is not None:
            params["max_age"] = max_age
        if host_max_duplicate_rate is not None:
            params["host_max_duplicate_rate"] = host_max_duplicate_rate
        if checked_count(host_min_pages, "host_min_pages", MIN_HOST_PAGES) != DEFAULT_HOST_MIN_PAGES \
                or host_max_duplicate_rate is not None:
            params["host_min_pages"] = host_min_pages
        return FetchDecision.from_dict(self._call("GET", "/v1/should-fetch?" + urlencode(params)))

    def history(self, url: str) -> UrlHistory | None:
        """:meth:`Detector.history` over HTTP: ``GET /v1/history?url=...`` (None when the URL
        is not stored)."""
        try:
            return UrlHistory.from_dict(self._call("GET", "/v1/history?" + urlencode({"url": url})))
        except NotFoundError:
            return None

    def due(self, at: float | None = None, *, limit: int = 1000, after: str | None = None) -> list[str]:
        """:meth:`Detector.due` over HTTP: ``GET /v1/due?at=&limit=&after=``."""
        params: dict[str, Any] = {"limit": limit}
        if at is not None:
            params["at"] = at
        if after is not None:
            params["after"] = after
        return [str(u) for u in self._call("GET", "/v1/due?" + urlencode(params))["urls"]]

    def rules(self, host: str | None = None) -> list[Rule]:
        """:meth:`Detector.rules` over HTTP: ``GET /v1/rules`` or ``GET /v1/hosts/{host}/rules``."""
        path = "/v1/rules" if host is None else f"/v1/hosts/{quote(host, safe='')}/rules"
        return [Rule.from_dict(r) for r in self._call("GET", path)["rules"]]

    def hosts(self, top: int | None = None, *, window: float | None = None, at: float | None = None,
              sort: str = "duplicate_rate", trap_members: int = DEFAULT_TRAP_MEMBERS,
              offset: int = 0) -> list[dict[str, Any]]:
        """:meth:`Detector.hosts` over HTTP: ``GET /v1/hosts?top=&offset=&window=&sort=``."""
        params: dict[str, Any] = {"sort": sort}
        if top is not None:
            params["top"] = int(top)
        if offset:
            params["offset"] = int(offset)
        if window is not None:
            params["window"] = window
        if at is not None:
            params["at"] = float(at)
        if checked_count(trap_members, "trap_members", MIN_TRAP_MEMBERS) != DEFAULT_TRAP_MEMBERS:
            params["trap_members"] = trap_members
        return self._call("GET", "/v1/hosts?" + urlencode(params))["hosts"]

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        """The client itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the connections."""
        self.close()

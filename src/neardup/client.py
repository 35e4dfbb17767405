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
from neardup.errors import InputError, NeardupError, SpecMismatchError, StoreError, StoreLockedError
from neardup.fingerprint.core import Fingerprint, FingerprintConfig
from neardup.fingerprint.core import fingerprint as neardup_fingerprint
from neardup.model import DEFAULT_TRAP_MEMBERS, FetchDecision, Page, Verdict
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
    if fetched_at is not None:
        body["fetched_at"] = fetched_at.timestamp() if isinstance(fetched_at, datetime) else float(fetched_at)
    if priority is not None:
        body["priority"] = priority
    return body


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


def _seconds(when: float | datetime | None) -> float | None:
    """Unix seconds of a time given as a float or a datetime."""
    return when.timestamp() if isinstance(when, datetime) else when


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

    def add_many(self, pages: Iterable[Page | tuple[str, bytes | str]]) -> list[Verdict]:
        """:meth:`Detector.add_many` over HTTP: ``POST /v1/pages/batch``."""
        body = []
        for item in pages:
            p = item if isinstance(item, Page) else Page(*item)
            body.append(_page_body(p.url, p.content, p.headers, p.fetched_at, p.priority))
        return [_verdict(v) for v in self._call("POST", "/v1/pages/batch", {"pages": body})["verdicts"]]

    def check_fingerprint(self, url: str, fp: Fingerprint) -> Verdict:
        """:meth:`Detector.check_fingerprint` over HTTP (with the sketch and the title)."""
        return _verdict(self._call("POST", "/v1/fingerprints/check", _fp_body(url, fp)))

    def add_fingerprint(self, url: str, fp: Fingerprint, *, fetched_at: float | datetime | None = None,
                        priority: float | None = None) -> Verdict:
        """:meth:`Detector.add_fingerprint` over HTTP (with the sketch and the title)."""
        body = _fp_body(url, fp, fetched_at=_seconds(fetched_at), priority=priority)
        return _verdict(self._call("POST", "/v1/fingerprints/add", body))

    def check_fingerprints(self, items: Iterable[tuple[str, Fingerprint]]) -> list[Verdict]:
        """:meth:`Detector.check_fingerprints` over HTTP: one request."""
        body = {"fingerprints": [_fp_body(url, fp) for url, fp in items]}
        return [_verdict(v) for v in self._call("POST", "/v1/fingerprints/check/batch", body)["verdicts"]]

    def add_fingerprints(
        self, items: Iterable[tuple[str, Fingerprint] | tuple[str, Fingerprint, float | datetime | None, float | None]],
    ) -> list[Verdict]:
        """:meth:`Detector.add_fingerprints` over HTTP: one request, one transaction."""
        body = {"fingerprints": [_fp_body(it[0], it[1], fetched_at=_seconds(it[2]) if len(it) == 4 else None,
                                          priority=it[3] if len(it) == 4 else None) for it in items]}
        return [_verdict(v) for v in self._call("POST", "/v1/fingerprints/add/batch", body)["verdicts"]]

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
        params: dict[str, Any] = {"trap_members": trap_members}
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
        """:meth:`Detector.should_fetch` over HTTP: ``GET /v1/should-fetch?url=...``."""
        params: dict[str, Any] = {"url": url}
        if max_age is not None:
            params["max_age"] = max_age
        if host_max_duplicate_rate is not None:
            params["host_max_duplicate_rate"] = host_max_duplicate_rate
            params["host_min_pages"] = host_min_pages
        return FetchDecision.from_dict(self._call("GET", "/v1/should-fetch?" + urlencode(params)))

    def history(self, url: str) -> UrlHistory | None:
        """:meth:`Detector.history` over HTTP: ``GET /v1/history?url=...`` (None when the URL
        is not stored)."""
        try:
            return UrlHistory.from_dict(self._call("GET", "/v1/history?" + urlencode({"url": url})))
        except NotFoundError:
            return None

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
        if trap_members != DEFAULT_TRAP_MEMBERS:
            params["trap_members"] = int(trap_members)
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

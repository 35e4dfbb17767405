"""Per-fetch noise: the lines of a host's main texts that are not the page's content.

Real sites put lines inside the article that change on every fetch: "Last updated: <now>", a
view counter, a rotating ad, a "related" teaser. They make every re-fetch's digest differ, so
a page that never changed would be ``changed`` at every fetch and its change rate would follow
the noise. A *line template* is a line of the normalised main text with its dates and times
masked (``last updated: T``, :func:`line_template`); a template that a host serves on
:data:`NOISE_MIN_URLS` distinct URLs or more is the host's noise (a timestamp line, an ad from
the host's pool, a repeated notice), learned as pages are added and kept in the store's
metadata (:data:`META_PREFIX` + host), so the next crawl knows it from its first page.
Templates are learned in order and a stable digest says how many it left out
(``"m:sha256"``): a page is compared at its next fetch under the same ``m`` first templates
(:meth:`HostNoise.stable_digest` with ``upto``), so what the host learned after it was stored
never makes it ``changed``; only its host's first pages, stored before the noise was known,
may be ``changed`` once. Other
numbers are content: a price that changes is a change (a line with the same price on three
products is noise only until it differs).

A page's *stable digest* (:meth:`HostNoise.stable_digest`) is the digest of its main text
without the host's noise lines; two fetches of one URL whose stable digests are equal are
``unchanged`` (:func:`neardup.detector.versions.compare_versions`): ``changed`` means the
content changed. It decides versions only: matching and the exact digest read the whole text.
Where the noise would leave less than :data:`MIN_KEPT_SHARE` of the text, the whole text is
the stable one (a page made of repeated lines says nothing by its remainder).

>>> noise = HostNoise()
>>> for i in range(3):
...     _ = noise.learn(f"https://a.example/{i}", f"# page {i}\\nlast updated: 2026-12-0{i} 10:0{i}\\ntext of page {i}")
>>> a = noise.stable_digest("# page 1\\nlast updated: 2026-12-01 10:01\\ntext of page 1")
>>> b = noise.stable_digest("# page 1\\nlast updated: 2026-12-09 11:45\\ntext of page 1")
>>> a == b, a == noise.stable_digest("# page 1\\nlast updated: 2026-12-09 11:45\\nnew text of page 1")
(True, False)
>>> a.split(":")[0]  # one noise template left out
'1'
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable

#: a line template on this many distinct URLs of a host is the host's noise
NOISE_MIN_URLS = 3
#: line templates tracked per host (those seen on one URL go first)
MAX_TRACKED = 4096
#: noise templates kept per host
MAX_NOISE = 512
#: the noise may take at most this share of a page's text away from its stable digest
MIN_KEPT_SHARE = 0.25
#: the store metadata key of a host's noise templates (+ the host)
META_PREFIX = "noise:"

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
#: dates and times as pages print them (normalised text is lower case)
_TIMES = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?"
    r"|\d{1,2}/\d{1,2}/\d{2,4}"
    rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|\d{{1,2}}\s+{_MONTH}\s+\d{{4}}"
    r"|\d+\s+(?:seconds?|minutes?|mins?|hours?|days?)\s+ago")


def line_template(line: str) -> int:
    """The template of one normalised line: a hash of it with its dates and times masked.

    >>> line_template("last updated: 2026-12-02 10:00") == line_template("last updated: 1999-01-01 23:59")
    True
    >>> line_template("updated december 2, 2026") == line_template("updated jan 9 1999")
    True
    >>> line_template("price: $12.99") == line_template("price: $9.99")
    False
    """
    return zlib.crc32(_TIMES.sub("T", line.strip()).encode("utf-8", "surrogatepass"))


def _url_key(url: str) -> int:
    return zlib.crc32(url.encode("utf-8", "surrogatepass"))


class HostNoise:
    """One host's line templates and the noise learned from them."""

    def __init__(self, noise: Iterable[int] = ()) -> None:
        #: the noise templates in the order they were learned
        self.order: list[int] = list(dict.fromkeys(noise))
        self.noise: set[int] = set(self.order)
        self._seen: dict[int, list[int]] = {}  # template -> the distinct URLs (keys) it was seen on

    def learn(self, url: str, text: str) -> bool:
        """Count the lines of a page of ``url``; True when the host's noise grew."""
        if len(self.order) >= MAX_NOISE:
            return False
        key = _url_key(url)
        grew = False
        for t in {line_template(line) for line in text.split("\n") if line.strip()}:
            if t in self.noise:
                continue
            urls = self._seen.setdefault(t, [])
            if key not in urls:
                urls.append(key)
            if len(urls) >= NOISE_MIN_URLS and len(self.noise) < MAX_NOISE:
                self.noise.add(t)
                self.order.append(t)
                del self._seen[t]
                grew = True
        if len(self._seen) > MAX_TRACKED:  # forget the templates seen on one URL, oldest first
            once = [t for t, urls in self._seen.items() if len(urls) == 1][: len(self._seen) - MAX_TRACKED // 2]
            for t in once or list(self._seen)[: len(self._seen) - MAX_TRACKED]:
                del self._seen[t]
        return grew

    def stable_digest(self, text: str, upto: int | None = None) -> str:
        """``"m:sha256"``: the SHA-256 of ``text`` without the lines of the host's first ``m``
        noise templates (``upto``; default: all of them), module docs."""
        m = len(self.order) if upto is None else max(0, min(int(upto), len(self.order)))
        noise = self.noise if m == len(self.order) else set(self.order[:m])
        lines = text.split("\n")
        kept = [line for line in lines if not line.strip() or line_template(line) not in noise]
        stable = "\n".join(kept)
        if len(stable.strip()) < MIN_KEPT_SHARE * len(text.strip()):
            stable = text
        return f"{m}:{hashlib.sha256(stable.encode('utf-8', 'surrogatepass')).hexdigest()}"

    def to_meta(self) -> dict[str, object]:
        """The state as the store keeps it: the noise templates (hex), in learned order."""
        return {"noise": [f"{t:08x}" for t in self.order]}

    @classmethod
    def from_meta(cls, value: object) -> HostNoise:
        """The state :meth:`to_meta` stored (anything else: nothing learned yet).

        >>> HostNoise.from_meta(HostNoise([255, 7]).to_meta()).order
        [255, 7]
        """
        templates: list[int] = []
        data = value if isinstance(value, dict) else {}
        items = data.get("noise")
        for item in items if isinstance(items, list) else []:
            try:
                templates.append(int(str(item), 16))
            except ValueError:
                continue
        return cls(templates)

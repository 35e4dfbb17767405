"""Per-fetch noise: the lines of a host's main texts that are not the page's content.

Real sites put lines inside the article that change on every fetch: "Last updated: <now>", a
view counter, a rotating ad, a "related" teaser. They make every re-fetch's digest differ, so
a page that never changed would be ``changed`` at every fetch and its change rate would follow
the noise. A *line template* is a line of the normalised main text with its dates and times
masked (``last updated: T``, :func:`line_template`); a template that a host serves on
:data:`NOISE_MIN_URLS` distinct URLs or more is the host's noise (a timestamp line, an ad from
the host's pool, a repeated notice) when its line differs between them (a masked date or time
changed) or those URLs hold distinct contents (distinct clusters: a mirror's copies of three
pages are three contents): a page's own lines, repeated on its print version, its mirror and
its session-id copies (one cluster), are content, never noise. A template seen on one URL is
forgotten when a host's tracked templates overflow (a long index page), but a bit of a sketch
keeps that sighting (:data:`ONCE_BITS`). It is
learned as pages are added and kept in the store's metadata (:data:`META_PREFIX` + host), so
the next crawl knows it from its first page.
Templates are learned in order and a stable digest says how many it left out
(``"m:sha256"``): a page is compared at its next fetch under the same ``m`` first templates
(:meth:`HostNoise.stable_digest` with ``upto``), so what the host learned after it was stored
never makes it ``changed``. A host's first pages (until it has met :data:`NOISE_SETTLE_URLS`
URLs) are stored before its noise is known (an ad of a pool of five needs fifteen pages or so
to be seen three times): their stable digest carries each line's hash
(:meth:`HostNoise.stable_record`), so that their next fetch is compared under the noise known
then (:meth:`HostNoise.same_content`). Other
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
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

#: a line template on this many distinct URLs of a host is the host's noise
NOISE_MIN_URLS = 3
#: line templates tracked per host (those seen on one URL go first)
MAX_TRACKED = 4096
#: bits of the sketch a host keeps of the templates it forgot after one URL (32 KB, made when
#: the tracked templates first overflow: a long page's thousand lines do not erase an ad seen once)
ONCE_BITS = 1 << 18
#: noise templates kept per host
MAX_NOISE = 512
#: the noise may take at most this share of a page's text away from its stable digest
MIN_KEPT_SHARE = 0.25
#: a host's pages keep their lines' hashes (a few KB) in their stable digest until it met this many URLs
NOISE_SETTLE_URLS = 64
#: the store metadata key of a host's noise templates (+ the host)
META_PREFIX = "noise:"

#: lines up to this many characters keep their template in a cache (:func:`line_template`)
CACHED_LINE = 4096
_DIGIT = re.compile(r"\d")
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
    return _short_template(line) if len(line) <= CACHED_LINE else _template(line)


def _template(line: str) -> int:
    line = line.strip()
    masked = _TIMES.sub("T", line) if _DIGIT.search(line) else line  # (every date and time has a digit)
    return zlib.crc32(masked.encode("utf-8", "surrogatepass"))


#: a page's lines are templated three or four times on the way to its stable digest and record,
#: and a host's boilerplate lines on every page: the short ones are remembered
_short_template = lru_cache(maxsize=1 << 11)(_template)  # (at most 2,048 lines of 4 KB)


#: the URL (and content) a forgotten template was seen on, in its lists (URL keys are >= 0,
#: contents -1 - a cluster id)
FORGOTTEN = -(1 << 62)


def _url_key(url: str) -> int:
    return zlib.crc32(url.encode("utf-8", "surrogatepass"))


class HostNoise:
    """One host's line templates and the noise learned from them."""

    def __init__(self, noise: Iterable[int] = ()) -> None:
        #: the noise templates in the order they were learned
        self.order: list[int] = list(dict.fromkeys(noise))
        self.noise: set[int] = set(self.order)
        self._seen: dict[int, list[int]] = {}  # template -> the distinct URLs (keys) it was seen on
        self._distinct: dict[int, list[int]] = {}  # template -> the distinct contents (keys) of those URLs
        self._raw: dict[int, int] = {}  # template -> the hash of its first line; -1 once another differed
        self._urls: set[int] = set()  # the URLs met, up to NOISE_SETTLE_URLS
        self._once: bytearray | None = None  # a bit per forgotten template seen on one URL (ONCE_BITS)

    def learn(self, url: str, text: str, content: int | None = None) -> bool:
        """Count the lines of a page of ``url`` whose content is ``content`` (a key the page's
        copies share, such as its cluster: the copies of one page are one content, the copies of
        two pages two; default: the URL's own); True when the host's noise grew.

        >>> noise = HostNoise()  # a mirror's copies of three pages, each with the same ad
        >>> [noise.learn(f"https://mirror.example/{i}", f"page {i}\\nsponsored: coffee", content=i) for i in range(3)]
        [False, False, True]
        >>> HostNoise().learn("https://a.example/p", "text", content=1)
        False
        """
        if len(self.order) >= MAX_NOISE:
            return False
        key = _url_key(url)
        own = key if content is None else -1 - content  # (apart from the URL keys, which are >= 0)
        if len(self._urls) < NOISE_SETTLE_URLS:
            self._urls.add(key)
        grew = False
        lines: dict[int, int] = {}
        for line in text.split("\n"):
            if line.strip():
                lines.setdefault(line_template(line), zlib.crc32(line.strip().encode("utf-8", "surrogatepass")))
        for t, raw in lines.items():
            if t in self.noise:
                continue
            urls = self._seen.get(t)
            if urls is None:  # a template seen on one URL and forgotten counts that URL and its content
                forgotten = self._forgotten(t)
                urls = self._seen[t] = [FORGOTTEN] if forgotten else []
                if forgotten:
                    self._distinct[t] = [FORGOTTEN]
            if key not in urls:
                urls.append(key)
                contents = self._distinct.setdefault(t, [])
                if own not in contents and len(contents) < NOISE_MIN_URLS:
                    contents.append(own)
            if self._raw.setdefault(t, raw) != raw:
                self._raw[t] = -1
            varied = self._raw[t] == -1 or len(self._distinct.get(t, ())) >= NOISE_MIN_URLS
            if len(urls) >= NOISE_MIN_URLS and varied and len(self.noise) < MAX_NOISE:
                self.noise.add(t)
                self.order.append(t)
                self._forget(t)
                grew = True
        if len(self._seen) > MAX_TRACKED:  # forget the templates seen on one URL, oldest first, into the sketch
            once = [t for t, urls in self._seen.items() if len(urls) == 1][: len(self._seen) - MAX_TRACKED // 2]
            if self._once is None:
                self._once = bytearray(ONCE_BITS // 8)
            for t in once:
                bit = t % ONCE_BITS
                self._once[bit >> 3] |= 1 << (bit & 7)
            for t in once or list(self._seen)[: len(self._seen) - MAX_TRACKED]:
                self._forget(t)
        return grew

    def _forgotten(self, template: int) -> bool:
        """Whether ``template`` was forgotten after one URL (or shares its sketch bit with one)."""
        if self._once is None:
            return False
        bit = template % ONCE_BITS
        return bool(self._once[bit >> 3] >> (bit & 7) & 1)

    def _forget(self, template: int) -> None:
        self._seen.pop(template, None)
        self._distinct.pop(template, None)
        self._raw.pop(template, None)

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

    def stable_record(self, text: str) -> str:
        """What a page's version stores: its :meth:`stable_digest`, and while the host has met
        fewer than :data:`NOISE_SETTLE_URLS` URLs, ``:`` and each line's hash and template hash
        (hex), for :meth:`same_content` at the next fetch.

        >>> HostNoise().stable_record("a\\nb").count(":"), len(HostNoise().stable_record("a\\nb").split(":")[2])
        (2, 33)
        """
        digest = self.stable_digest(text)
        if len(self._urls) >= NOISE_SETTLE_URLS:
            return digest
        lines = [line.strip() for line in text.split("\n") if line.strip()]
        pairs = ",".join(f"{zlib.crc32(line.encode('utf-8', 'surrogatepass')):08x}{line_template(line):08x}"
                         for line in lines if line_template(line) not in self.noise)
        return f"{digest}:{pairs}"

    def same_content(self, text: str, previous: str) -> bool:
        """Whether ``text`` holds the lines of the version stored as ``previous`` (a
        :meth:`stable_record` with its lines), once the lines of every noise template known
        now are left out of both; False where ``previous`` has no lines.

        >>> noise = HostNoise()
        >>> page = "the text of this page\\nsponsored: coffee"
        >>> before = noise.stable_record(page)  # stored before the ad was known
        >>> for i in range(3):
        ...     _ = noise.learn(f"https://a.example/{i}", f"page {i}\\nsponsored: coffee")
        >>> noise.same_content(page, before), noise.same_content("the new text\\nsponsored: coffee", before)
        (True, False)
        """
        parts = previous.split(":", 2)
        if len(parts) < 3:
            return False
        body = parts[2]
        old = Counter(body[i:i + 8] for i in range(0, len(body), 17) if int(body[i + 8:i + 16], 16) not in self.noise)
        kept = [line.strip() for line in text.split("\n") if line.strip() and line_template(line) not in self.noise]
        if sum(map(len, kept)) < MIN_KEPT_SHARE * len(text.strip()):
            return False  # as for the digest: a page made of repeated lines says nothing by its remainder
        return old == Counter(f"{zlib.crc32(line.encode('utf-8', 'surrogatepass')):08x}" for line in kept)

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

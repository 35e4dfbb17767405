"""Verdicts keyed as a web archive keys its captures: a CDXJ sidecar (``neardup dedup --cdxj``).

An archive's tools (pywb, OutbackCDX, cdxj-indexer, WACZ) find a capture by its SURT
``urlkey`` and its 14-digit UTC timestamp, one line per capture, sorted. The sidecar writes
exactly that key, as cdxj-indexer writes it (the ``surt`` package's canonical form; the
timestamp of the capture's WARC-Date, to the second), then a JSON block with the capture's
``url`` and neardup's fields under the ``nd_`` prefix, so a line-by-line join with the
archive's own index of the same WARC files works:

========================  ==============================================================
``nd_status``             ``new``, ``exact``, ``near``, ``partial`` or ``empty``
``nd_version``            ``unchanged`` or ``changed`` for a re-fetch of a stored URL
``nd_match``              the URL it duplicates, and ``nd_match_timestamp`` (14 digits)
``nd_distance``           SimHash distance to the match; ``nd_score``: the sketch's estimate
``nd_cluster``            cluster id; ``nd_canonical``: the cluster's canonical URL
``nd_simhash``            the capture's SimHash (hex); ``nd_spec``: the fingerprint spec
========================  ==============================================================

Absent values are left out. Lines are sorted as CDXJ must be (by their bytes).

>>> line = cdxj_line("https://News.example/a?b=2&a=1", 1715000000.0, {"nd_status": "new"})
>>> line
'example,news)/a?a=1&b=2 20240506125320 {"url": "https://News.example/a?b=2&a=1", "nd_status": "new"}'
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import IO, Any

from neardup.errors import ConfigError
from neardup.model import Verdict


def surt_key(url: str) -> str:
    """The SURT ``urlkey`` of ``url`` as cdxj-indexer and pywb write it."""
    import surt

    return str(surt.surt(url))


def timestamp14(at: float) -> str:
    """POSIX seconds as the 14-digit UTC timestamp of CDX files (``YYYYMMDDhhmmss``).

    >>> timestamp14(0.0), timestamp14(1715000000.9)
    ('19700101000000', '20240506125320')
    """
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(int(at)))


def cdxj_line(url: str, at: float, fields: dict[str, Any]) -> str:
    """One CDXJ line: the capture's key, its timestamp and its JSON block (``url`` first)."""
    block = json.dumps({"url": url, **{k: v for k, v in fields.items() if v is not None}}, ensure_ascii=False)
    return f"{surt_key(url)} {timestamp14(at)} {block}"


class CdxjSidecar:
    """The sidecar's lines, gathered as verdicts come and written sorted at :meth:`close`.
    ``match_time(page_id)``: when the matched page was fetched (None when unknown)."""

    def __init__(self, out: IO[str], spec: str, match_time: Callable[[int], float | None]) -> None:
        self.out, self.spec, self.match_time = out, spec, match_time
        self.lines: list[str] = []

    def add(self, url: str, fetched_at: float | None, verdict: Verdict) -> None:
        """The line of one capture (an ``error`` verdict has none: the capture was not decided)."""
        if verdict.status == "error":
            return
        matched = self.match_time(verdict.match_id) if verdict.match_id is not None else None
        fields = {"nd_status": verdict.status, "nd_version": verdict.version, "nd_match": verdict.match_url,
                  "nd_match_timestamp": timestamp14(matched) if matched is not None else None,
                  "nd_distance": verdict.distance, "nd_score": verdict.score, "nd_cluster": verdict.cluster_id,
                  "nd_canonical": verdict.canonical_url, "nd_simhash": verdict.simhash, "nd_spec": self.spec}
        try:
            self.lines.append(cdxj_line(url, fetched_at if fetched_at is not None else time.time(), fields))
        except ValueError as exc:  # a URL surt cannot read: no key, no line
            raise ConfigError(f"{url}: no SURT key for the CDXJ sidecar ({exc})") from None

    def close(self) -> None:
        """Write the lines, sorted by their bytes."""
        self.lines.sort(key=lambda line: line.encode("utf-8"))
        for line in self.lines:
            self.out.write(line + "\n")
        self.out.flush()

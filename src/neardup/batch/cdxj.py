"""The batch answer keyed as a web archive keys its captures: the CDXJ sidecar of ``neardup
dedup --batch --cdxj FILE``.

The lines are those of ``neardup dedup --db ... --cdxj`` (:mod:`neardup.report.cdxj`: the SURT
``urlkey``, the 14-digit timestamp of the capture's fetch time, the JSON block with ``url`` and
the ``nd_`` fields), one per capture, sorted by their bytes. The batch decides against a
cluster's canonical page: ``nd_match`` is the canonical URL for ``exact`` and ``near``
captures, ``nd_match_timestamp`` the time of the canonical's capture that decided, and
``nd_distance`` the SimHash distance to it (the batch keeps no sketch score). A capture
without a fetch time is stamped with the time of the run, as the online path stamps it.
"""

from __future__ import annotations

import time
from typing import IO, Any

import numpy as np

from neardup.batch.arrays import STATUSES, ArrayAnswer
from neardup.batch.graph import VERSIONS
from neardup.errors import ConfigError
from neardup.report.cdxj import cdxj_line, timestamp14

#: the statuses whose ``nd_match`` is the canonical (a duplicate of it)
LINKED = ("exact", "near")


def cdxj_lines(answer: ArrayAnswer, spec: str, now: float | None = None) -> list[str]:
    """Every row's CDXJ line (module docs), sorted by their bytes."""
    fa = answer.arrays
    now = time.time() if now is None else now
    urls = fa.url.to_pylist()
    at = np.where(fa.first_seen > 0, fa.first_seen, now).tolist()
    vers = answer.version.tolist() if answer.version is not None else [-1] * fa.n
    lines = []
    for i, (st, cl, c, d, ver, sim) in enumerate(zip(answer.status.tolist(), answer.cluster.tolist(),
                                                     answer.canonical.tolist(), answer.distance.tolist(), vers,
                                                     fa.simhash.tolist())):
        fields = batch_fields(STATUSES[st], None if ver < 0 else VERSIONS[ver], urls[c], at[c], d, cl,
                              f"{sim:016x}", spec)
        lines.append(batch_line(urls[i], at[i], fields))
    lines.sort(key=lambda line: line.encode("utf-8"))
    return lines


def batch_fields(status: str, version: str | None, canonical: str, canonical_at: float, distance: int | None,
                 cluster: int, simhash_hex: str, spec: str) -> dict[str, Any]:
    """A batch row's ``nd_`` fields (module docs), on one machine and on Spark
    (:mod:`neardup.batch.spark.cdxj`)."""
    linked = status in LINKED
    return {"nd_status": status, "nd_version": version, "nd_match": canonical if linked else None,
            "nd_match_timestamp": timestamp14(canonical_at) if linked else None,
            "nd_distance": distance if linked else None, "nd_cluster": cluster, "nd_canonical": canonical,
            "nd_simhash": simhash_hex, "nd_spec": spec}


def batch_line(url: str, at: float, fields: dict[str, Any]) -> str:
    """:func:`neardup.report.cdxj.cdxj_line`, a URL without a SURT key a :class:`ConfigError`."""
    try:
        return cdxj_line(url, at, fields)
    except ValueError as exc:  # a URL surt cannot read: no key, no line
        raise ConfigError(f"{url}: no SURT key for the CDXJ sidecar ({exc})") from None


def write_cdxj(answer: ArrayAnswer, out: IO[str], spec: str) -> int:
    """Write the sidecar of ``answer`` to ``out``; returns the lines written."""
    lines = cdxj_lines(answer, spec)
    for line in lines:
        out.write(line + "\n")
    out.flush()
    return len(lines)


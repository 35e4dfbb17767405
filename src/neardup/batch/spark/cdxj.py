"""The Spark job's answer keyed as a web archive keys its captures: ``neardup spark-dedup
--cdxj DIR``.

The lines of :mod:`neardup.batch.cdxj` (the sidecar of ``dedup --batch --cdxj``, the same
bytes for the same input): the SURT ``urlkey``, the 14-digit timestamp of the capture's fetch
time (the time of the run where the input had none), the JSON block with ``url`` and the
``nd_`` fields; ``nd_match`` is the cluster's canonical URL for ``exact`` and ``near``
captures and ``nd_match_timestamp`` the time of its last capture. The lines are made where
the rows are and sorted by Spark (a range partitioning of the lines: Spark orders strings by
their UTF-8 bytes, as CDXJ must be), then written as text: the folder's part files, read in
the order of their names, are one sorted CDXJ file (``cat DIR/part-* > all.cdxj``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from neardup.batch.cdxj import LINKED, batch_fields, batch_line
from neardup.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

def _lines(spec: str, now: float, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    import pandas as pd

    for batch in batches:
        out = []
        for url, st, ver, cl, canon, dist, sim, at, canon_at in zip(
                batch["url"], batch["status"], batch["version"], batch["cluster"], batch["canonical"],
                batch["distance"], batch["simhash"], batch["fetched_at"], batch["canonical_at"]):
            linked = st in LINKED
            fields = batch_fields(st, ver if isinstance(ver, str) else None, canon, _at(canon_at, now),
                                  int(dist) if linked else None, int(cl), sim, spec)
            out.append(batch_line(url, _at(at, now), fields))
        yield pd.DataFrame({"value": out})


def _at(x: float | None, now: float) -> float:
    return now if x is None or x != x or x <= 0 else float(x)  # (NaN: no time)


def cdxj_frame(rows: DataFrame, spec: str, now: float | None = None) -> DataFrame:
    """The sorted CDXJ lines (one ``value`` column) of the job's output ``rows``
    (:data:`neardup.batch.spark.job.OUT_SCHEMA`)."""
    from pyspark.sql import functions as F

    now = time.time() if now is None else now
    last = rows.groupBy(F.col("url").alias("canonical")).agg(F.max("fetched_at").alias("canonical_at"))
    keyed = rows.join(last, "canonical", "left")
    return keyed.mapInPandas(functools.partial(_lines, spec, now), "value string").orderBy("value")


def write_cdxj(rows: DataFrame, out: str, spec: str) -> int:
    """Write the sidecar of ``rows`` to the folder ``out`` (module docs); the lines written."""
    lines = cdxj_frame(rows, spec)
    try:
        lines.write.mode("overwrite").text(out)
    except Exception as exc:  # the ConfigError of an executor arrives wrapped in Spark's own
        why = next((line for line in str(exc).splitlines() if "no SURT key" in line), None)
        if why is None:
            raise
        raise ConfigError(why.split("ConfigError: ", 1)[-1].strip()) from None
    return int(lines.sparkSession.read.text(out).count())

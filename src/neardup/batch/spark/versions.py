"""Re-fetches in the Spark job (:mod:`neardup.batch.spark.job`): the rule of
:mod:`neardup.batch.versions` on DataFrames, the same answer as
:func:`neardup.batch.dedup.dedup_batch`.

Every page's URL key (:func:`neardup.batch.versions.url_keys`: a URL that is its own key
without a Python call) is computed where the page is (``mapInPandas``), and again when the
job reads the pages: the keyed table is not cached (with the job's own cache of the pages
that held two copies, and 10^7 pages ran out of aggregation memory in a 4g driver). What
moves is a 64-bit hash of it, counted (``groupBy(xxhash64(key))``, combined map-side, as the
digest count of :func:`neardup.batch.spark.job.dedup`). Only pages whose URL hash repeats go through a
window over the key ordered by the capture order (:func:`neardup.batch.versions.capture_key`'s
fields): the last capture is the current version (with its URL's earliest fetch time), the
earlier ones are set aside and get their URL's output row back at the end
(:meth:`Refetches.expand`). Every other page is its own URL's only capture and passes through.

Revisits (:mod:`neardup.batch.revisits`) are rows of their URL and fetch time with
:data:`REVISIT` in ``error``; their URL hash repeats with their originals', so they meet them in
that window's input, where :func:`resolve_revisits` turns each into a copy of its original (a
revisit whose hash does not repeat has none, and is dropped).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neardup.batch.graph import empty_node_id, node_id
from neardup.batch.versions import url_keys
from neardup.model import Page
from neardup.urls import host_of

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame

#: at most this many repeated URL hashes are broadcast (more: joined by a shuffle)
BROADCAST_URLS = 1_000_000
#: the ``error`` of a fingerprint row that is a revisit record (a capture without content: its
#: URL and fetch time only), resolved by :func:`resolve_revisits`
REVISIT = "\x00revisit"
#: the ``error``'s start for a revisit of another URL's capture (then that URL and the
#: ``refers_to_date``, ``\x00``-separated), resolved by :func:`resolve_foreign`
REVISIT_OF = "\x00revisit-of\x00"


def revisit_marker(page: Page) -> str:
    """The ``error`` of a revisit's fingerprint row (:data:`REVISIT`, :data:`REVISIT_OF`)."""
    if not page.refers_to:
        return REVISIT
    named = "" if page.refers_to_date is None else repr(float(page.refers_to_date))
    return f"{REVISIT_OF}{page.refers_to}\x00{named}"


def _with_keys(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    import pyarrow as pa

    for batch in batches:
        batch = batch.copy()
        batch["ukey"] = url_keys(pa.array(batch["url"], pa.large_string())).to_pandas()
        yield batch


def capture_order(descending: bool = False) -> list[Column]:
    """The window's order: :func:`neardup.batch.versions.capture_key`'s (Spark sorts NaN
    after every number; the SimHash as unsigned); ``descending``: the last capture first."""
    from pyspark.sql import functions as F

    cols = [F.col("first_seen"), F.col("url"), F.col("digest"), F.coalesce(F.col("title"), F.lit("")),
            F.coalesce(F.col("canonical_link"), F.lit("")), F.coalesce(F.col("priority"), F.lit(-math.inf)),
            F.col("simhash").bitwiseXOR(F.lit(-(1 << 63))), F.col("empty"), F.col("length")]
    return [c.desc() if descending else c.asc() for c in cols]


def is_revisit() -> Column:
    """The fingerprint rows that are revisits (:data:`REVISIT` in ``error``, or :data:`REVISIT_OF`)."""
    from pyspark.sql import functions as F

    return F.coalesce((F.col("error") == F.lit(REVISIT)) | F.col("error").startswith(REVISIT_OF), F.lit(False))


def is_foreign() -> Column:
    """The revisits of another URL's capture (:data:`REVISIT_OF`)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("error").startswith(REVISIT_OF), F.lit(False))


def _target_keys(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    import pyarrow as pa

    for batch in batches:
        batch = batch.copy()
        batch["tkey"] = url_keys(pa.array(batch["target"], pa.large_string())).to_pandas()
        yield batch


def _rehome(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Copies under their revisit's URL: its host, node and URL key."""
    import pyarrow as pa

    for batch in batches:
        batch = batch.copy()
        hosts = [host_of(u) or None for u in batch["url"]]
        batch["host"] = hosts
        batch["node"] = [empty_node_id(u, d) if e else node_id(d, h, None if t is None or t != t else t)
                         for u, d, e, h, t in zip(batch["url"], batch["digest"], batch["empty"], hosts, batch["title"])]
        batch["ukey"] = url_keys(pa.array(batch["url"], pa.large_string())).to_pandas()
        yield batch


def resolve_foreign(keyed: DataFrame) -> DataFrame:
    """:mod:`neardup.batch.revisits` for the revisits of another URL's capture (:data:`REVISIT_OF`):
    each replaced by a copy of that URL's last capture fetched at or before its
    ``refers_to_date`` (else its own time), under the revisit's URL and time (its host, node and
    key); one without such a capture dropped."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = keyed.columns
    parts = F.split(F.col("error").substr(len(REVISIT_OF) + 1, 1 << 30), "\x00")
    foreign = keyed.where(is_foreign()).select(
        F.col("url").alias("r_url"), F.col("first_seen").alias("r_at"), parts.getItem(0).alias("target"),
        F.when(parts.getItem(1) != "", parts.getItem(1).cast("double")).alias("r_named"),
        F.monotonically_increasing_id().alias("r_id"))
    foreign = foreign.mapInPandas(_target_keys, "r_url string, r_at double, target string, r_named double, "
                                                "r_id long, tkey string")
    pages = keyed.where(F.col("error").isNull())
    bound = F.coalesce(F.col("r_named"), F.col("r_at"), F.lit(math.inf))
    joined = foreign.join(pages, foreign["tkey"] == pages["ukey"]).where(F.col("first_seen") <= bound)
    latest = Window.partitionBy("r_id").orderBy(*capture_order(descending=True))
    copies = (joined.withColumn("r_rn", F.row_number().over(latest)).where(F.col("r_rn") == 1)
              .withColumn("url", F.col("r_url"))
              .withColumn("first_seen", F.coalesce(F.col("r_at"), F.col("first_seen")))
              .select(*[c for c in cols if c != "u64"]))
    schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in copies.schema)
    rehomed = copies.mapInPandas(_rehome, schema).withColumn("u64", F.xxhash64("ukey"))
    return keyed.where(~is_foreign()).unionByName(rehomed.select(*cols))


def resolve_revisits(many: DataFrame) -> DataFrame:
    """:mod:`neardup.batch.revisits` on a DataFrame of keyed rows (``ukey``), pages and
    revisits: each revisit replaced by a copy of the last capture of its key fetched at or
    before it (the revisit's URL and time), a revisit without one dropped."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = many.columns
    pages = many.where(~is_revisit())
    revisits = many.where(is_revisit()).select(
        "ukey", F.col("url").alias("r_url"), F.col("first_seen").alias("r_at"),
        F.monotonically_increasing_id().alias("r_id"))
    joined = revisits.join(pages, "ukey").where(
        F.col("first_seen") <= F.coalesce(F.col("r_at"), F.lit(math.inf)))
    latest = Window.partitionBy("r_id").orderBy(*capture_order(descending=True))
    copies = (joined.withColumn("r_rn", F.row_number().over(latest)).where(F.col("r_rn") == 1)
              .withColumn("url", F.col("r_url"))
              .withColumn("first_seen", F.coalesce(F.col("r_at"), F.col("first_seen")))
              .select(*cols))
    return pages.unionByName(copies)


@dataclass
class Refetches:
    """The captures set aside (``earlier``: url, digest, simhash, version, ukey, fetched_at) and the
    current versions of repeated URLs (``current``: ukey, url, version); None: no URL
    repeats."""

    earlier: DataFrame | None
    current: DataFrame | None
    few: bool = True

    def expand(self, out: DataFrame) -> DataFrame:
        """The output rows of every capture from those of the current versions (``out``:
        one row a current version, without ``version``)."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        if self.earlier is None or self.current is None:
            return out.withColumn("version", F.lit(None).cast("string"))
        versions = self.current.select("url", "version")
        # the current versions' rows, each read twice below (its own row, its URL's captures)
        tagged = out.join(F.broadcast(versions) if self.few else versions, "url", "left").persist(
            StorageLevel.MEMORY_AND_DISK)
        decided = tagged.where(F.col("version").isNotNull()).select(
            F.col("url").alias("current_url"), "status", "cluster", "canonical", "match", "distance")
        keyed = self.current.select("ukey", F.col("url").alias("current_url"))
        earlier = (self.earlier.join(keyed, "ukey").join(decided, "current_url")
                   .select("url", "digest", F.lower(F.lpad(F.hex("simhash"), 16, "0")).alias("simhash"), "status",
                           "cluster", "canonical", "match", "distance", "fetched_at", "version"))
        return tagged.unionByName(earlier)


def split_versions(fps: DataFrame) -> tuple[DataFrame, Refetches]:
    """The pages of ``fps`` (:data:`neardup.batch.spark.job.FP_SCHEMA`; rows with an error left out)
    that decide: each URL's current version, with its URL's earliest ``first_seen`` (and its own
    in ``fetched_at``, a column the other pages get too); and
    what :meth:`Refetches.expand` needs to give every capture its row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = fps.columns
    pages = fps.where(F.col("error").isNull() | is_revisit())
    keyed = (pages.mapInPandas(_with_keys, f"{', '.join(f'{f.name} {f.dataType.simpleString()}' for f in pages.schema)}"
                                           ", ukey string")
             .withColumn("u64", F.xxhash64("ukey")))
    counted = keyed.groupBy("u64").agg(F.count(F.lit(1)).alias("count"),
                                       F.max(is_foreign().cast("int")).alias("foreign"))
    repeated = counted.where((F.col("count") > 1) | (F.col("foreign") > 0)).localCheckpoint()
    if repeated.where(F.col("foreign") > 0).limit(1).count():  # revisits of other URLs: copies first
        keyed = resolve_foreign(keyed)
        repeated = keyed.groupBy("u64").count().where(F.col("count") > 1).localCheckpoint()
    repeated = repeated.select("u64")
    n = repeated.count()
    own = F.col("first_seen").alias("fetched_at")  # each capture's own fetch time, kept for the output
    if n == 0:  # (a revisit alone has no original: dropped)
        return keyed.where(~is_revisit()).select(*cols, own), Refetches(None, None)
    few = n <= BROADCAST_URLS
    rep = F.broadcast(repeated) if few else repeated
    single = keyed.join(rep, "u64", "left_anti").where(~is_revisit())
    many = resolve_revisits(keyed.join(rep, "u64", "left_semi"))
    w = Window.partitionBy("ukey").orderBy(*capture_order())
    whole = Window.partitionBy("ukey")
    same = (F.col("digest") == F.lag("digest").over(w)) & (F.col("empty") == F.lag("empty").over(w))
    ranked = (many.withColumn("rn", F.row_number().over(w)).withColumn("captures", F.count(F.lit(1)).over(whole))
              .withColumn("earliest", F.first("first_seen").over(w))
              .withColumn("version", F.when(F.col("rn") == 1, F.lit(None).cast("string"))
                          .when(same, F.lit("unchanged")).otherwise(F.lit("changed")))
              .localCheckpoint())
    last = ranked.where(F.col("rn") == F.col("captures"))
    current = last.select(*[F.col("earliest").alias(c) if c == "first_seen" else c for c in cols], own)
    refetches = Refetches(
        earlier=ranked.where(F.col("rn") < F.col("captures")).select("url", "digest", "simhash", "version", "ukey",
                                                                     own),
        current=last.where(F.col("captures") > 1).select("ukey", "url", "version"), few=few)
    return single.select(*cols, own).unionByName(current), refetches

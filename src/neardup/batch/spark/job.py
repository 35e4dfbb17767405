"""The batch deduplication (:mod:`neardup.batch`) as an Apache Spark job: the same answer,
past one machine.

Install with the ``spark`` extra (``pip install 'neardup[spark]'``: PySpark, pandas, PyArrow;
Spark needs a Java runtime). Run::

    python -m neardup.batch.spark crawl/*.warc.gz pages.jsonl --out verdicts/   # local[*]
    spark-submit --master yarn src/neardup/batch/spark/__main__.py s3://bucket/seg/*.warc.gz --out s3://bucket/out

Stages, all DataFrame operations with Python only inside Arrow batches:

1. **fingerprints** (:func:`fingerprints`): WARC files, folders and single HTML files are
   read *inside the executors* (one task per file, FastWARC through
   :func:`neardup.ingest.inputs.read_input`); JSONL and Parquet of ``url``/``html`` are read by
   Spark; every page is fingerprinted in ``mapInPandas``. Parquet with ``digest`` and
   ``simhash`` columns is taken as precomputed fingerprints (what ``--fingerprints-out``
   writes).
2. **nodes and digest groups**: pages with one digest, host and title are one node
   (:func:`neardup.batch.graph.node_id`); pages with one digest a group (one SimHash, sketch,
   length). Only digests held by more than one page are grouped (a count of a 64-bit hash
   of the digest is the one shuffle of every page); every other page is its own group.
3. **exact groups**: a group's nodes are joined by :func:`neardup.batch.graph.pair_edges` (a
   star in SQL for long texts; the guard's rule in ``mapInPandas`` for short ones).
4. **near pairs** of groups, by the Detector's candidate stage (:func:`near_pairs`): each
   group becomes at most 12 blocking rows (:func:`neardup.batch.blocks.block_rows`: 8 sketch-band
   keys, ``min(k, 3) + 1`` pigeonhole SimHash keys), shuffled by key packed into one value
   per map task and reducer (:mod:`neardup.batch.spark.blocks`); every pair of a block is a
   candidate (blocks of more than :func:`neardup.batch.blocks.bucket_cap` groups are windowed),
   band pairs pass the nibble filter, and each distinct pair is decided by
   :func:`neardup.batch.blocks.decide_pair` (within k at ``verify``, beyond at
   ``far_verify(verify)``) against a side table of the candidates' groups only. Pairs at
   SimHash distances 4..k that share no band are found only with ``exact_k`` (radius probes
   of the permuted tables' lead keys: thousands of rows a fingerprint at k = 12). With
   ``method="minhash"``: LSH bands of the MinHash signatures instead, the first shared band
   keeps the pair, verified by the Jaccard estimate.
5. **connected components** of the node edges (:func:`component_labels`): union-find on
   the driver up to :data:`DRIVER_EDGES` edges, else the large-star / small-star
   iterations of Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC
   2014): each label is the smallest node id of its component, the batch job's cluster id.
6. **canonical** per cluster by the same policy chain (:func:`neardup.batch.graph.choose_canonical`),
   and each page's status. A page with no edge and no other page of its digest (most pages)
   is decided where it is read; only the others are grouped by cluster (``applyInPandas``).

Output (Parquet): ``url, digest, simhash`` (16 hex digits), ``status`` (``new`` for the
canonical, ``exact``, ``near``, ``empty``), ``cluster``, ``canonical``, ``match`` (the
canonical URL), ``distance`` (to the canonical), ``version`` (a re-fetch of a URL:
:mod:`neardup.batch.spark.versions`): what :func:`neardup.batch.dedup.dedup_batch` returns for the same
pages (tested equal).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.batch.blocks import PIGEON_K, WINDOW, bucket_cap, decide_pair
from neardup.batch.files import check_fingerprint_frame
from neardup.batch.graph import METHODS, choose_canonical, empty_node_id, node_id, pair_edges
from neardup.batch.spark.blocks import candidate_groups, probe_pairs, u64
from neardup.batch.spark.versions import revisit_marker, split_versions
from neardup.canonical import policy_from_spec
from neardup.errors import ConfigError, NeardupError
from neardup.fingerprint.core import DEFAULT_CONFIG, FingerprintConfig, fingerprint
from neardup.fingerprint.minhash import MinHashConfig, jaccard, signatures_from_bytes
from neardup.index.layout import Layout
from neardup.index.lsh import MinHashLSH
from neardup.matching import FAR_TITLE_VERIFY, GUARD_MAX_LENGTH, Side
from neardup.model import DEFAULT_THRESHOLD, DEFAULT_VERIFY, default_k
from neardup.urls import host_of

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

#: one row per page after stage 1 (simhash: the unsigned value as a signed 64-bit long)
FP_SCHEMA = ("url string, digest string, simhash long, empty boolean, sketch binary, title string, length int, "
             "canonical_link string, first_seen double, priority double, signature binary, node long, host string, "
             "error string")
#: a current version's decision (stage 6) and its fetch time (``fetched_at``, 0 when the input
#: had none); the output adds each capture's ``version``, its ``fetched_at`` null where unknown
ROW_SCHEMA = ("url string, digest string, simhash string, status string, cluster long, canonical string, "
              "match string, distance int, fetched_at double")
OUT_SCHEMA = ROW_SCHEMA + ", version string"
EDGE_SCHEMA = "src long, dst long"
FILE_SUFFIXES = (".warc", ".warc.gz", ".wacz", ".arc", ".arc.gz", ".html", ".htm", ".html.gz", ".htm.gz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")
def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def unsigned(v: int) -> int:
    return v + (1 << 64) if v < 0 else v


# -- stage 1: fingerprints --------------------------------------------------------------------

def _fp_row(url: str, content: Any, headers: Any, first_seen: float | None, priority: float | None,
            config: FingerprintConfig) -> dict:
    try:
        fp = fingerprint(content, url=url, headers=headers, config=config)
    except NeardupError as exc:
        return {"url": url, "error": str(exc)[:1000]}
    if fp.bits != 64:
        raise ConfigError("the Spark job needs 64-bit fingerprints")
    host = host_of(url) or None
    node = empty_node_id(url, fp.digest) if fp.empty else node_id(fp.digest, host, fp.title)
    return {"url": url, "digest": fp.digest, "simhash": signed(int(fp.simhash)), "empty": bool(fp.empty),
            "sketch": fp.sketch, "title": fp.title, "length": int(fp.length), "canonical_link": fp.canonical_url,
            "first_seen": float(first_seen or 0.0), "priority": priority,
            "signature": fp.minhash.to_bytes() if fp.minhash is not None else None,
            "node": node, "host": host, "error": None}


_DTYPES = {"long": "Int64", "int": "Int32", "double": "Float64", "boolean": "boolean", "string": object,
           "binary": object}


def _frame(rows: list[dict]) -> "pd.DataFrame":
    """Rows (dicts, missing keys None) as a frame of :data:`FP_SCHEMA`, integers exact."""
    import pandas as pd

    cols = {}
    for spec in FP_SCHEMA.split(", "):
        name, typ = spec.split()
        values = [r.get(name) for r in rows]
        cols[name] = (pd.array(values, dtype=_DTYPES[typ]) if _DTYPES[typ] is not object
                      else pd.Series(values, dtype=object))
    return pd.DataFrame(cols)


def _fingerprint_files(config: FingerprintConfig, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    from neardup.ingest.inputs import read_input

    for batch in batches:
        for path in batch["path"]:
            rows: list[dict] = []
            try:
                items = read_input(path)
                for item in items:
                    if item.page is not None:
                        p = item.page
                        rows.append(_fp_row(p.url, p.content, p.headers, p.fetched_at, p.priority, config))
                    elif item.revisit is not None:  # resolved against its URL's captures (spark.versions)
                        rows.append({"url": item.revisit.url, "first_seen": _num(item.revisit.fetched_at),
                                     "error": revisit_marker(item.revisit)})
                    elif item.error is not None:
                        rows.append({"url": item.source, "error": item.error})
                    if len(rows) >= 256:
                        yield _frame(rows)
                        rows = []
            except NeardupError as exc:
                rows.append({"url": path, "error": str(exc)})
            if rows:
                yield _frame(rows)


def _fingerprint_html(config: FingerprintConfig, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    for batch in batches:
        times = batch["fetched_at"] if "fetched_at" in batch else [None] * len(batch)
        prios = batch["priority"] if "priority" in batch else [None] * len(batch)
        rows = [_fp_row(u, h, None, _num(t), _num(p), config)
                for u, h, t, p in zip(batch["url"], batch["html"], times, prios)]
        yield _frame(rows)


def _num(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _complete_fps(batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """Precomputed fingerprints: hosts and node ids."""
    for batch in batches:
        hosts = [host_of(u) or None for u in batch["url"]]
        batch = batch.copy()
        batch["host"] = hosts
        batch["node"] = [empty_node_id(u, d) if e else node_id(d, h, _str(t))
                         for u, d, e, h, t in zip(batch["url"], batch["digest"], batch["empty"], hosts, batch["title"])]
        batch["error"] = None
        yield batch[[c.split()[0] for c in FP_SCHEMA.split(", ")]]


def _str(x: Any) -> str | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def fingerprints(spark: "SparkSession", inputs: Sequence[str], config: FingerprintConfig = DEFAULT_CONFIG,
                 partitions: int | None = None) -> "DataFrame":
    """Stage 1: one row per page (:data:`FP_SCHEMA`; pages that could not be read or
    fingerprinted have ``error`` set)."""
    from pyspark.sql import functions as F

    cols = [c.split()[0] for c in FP_SCHEMA.split(", ")]
    frames = []
    files = []
    for path in inputs:
        name = str(path).lower().rstrip("/")
        if name.endswith(".parquet") or (os.path.isdir(path) and any(Path(path).glob("*.parquet"))):
            local = os.path.exists(str(path))
            if local:
                _check_local_parquet(str(path))
            try:
                df = spark.read.parquet(str(path))
            except Exception as exc:  # noqa: BLE001 - Spark's error for a file it cannot read
                raise ConfigError(f"{path}: not a readable Parquet file ({' '.join(str(exc).split())[:200]})") from None
            if _is_fingerprints(df.columns):
                if not local:  # (s3://, hdfs://: checked by Spark)
                    check_fingerprint_frame(df, str(path), ConfigError)
                df = _fingerprint_types(df)
                for c, t in (("sketch", "binary"), ("title", "string"), ("canonical_link", "string"),
                             ("first_seen", "double"), ("priority", "double"), ("signature", "binary"),
                             ("length", "int"), ("empty", "boolean"), ("node", "long"), ("host", "string"),
                             ("error", "string")):
                    if c not in df.columns:
                        blank = {"first_seen": 0.0, "empty": False, "length": 0}.get(c)
                        df = df.withColumn(c, F.lit(blank).cast(t))
                df = df.withColumn("first_seen", F.coalesce(F.col("first_seen"), F.lit(0.0)))
                frames.append(df.select(*cols).mapInPandas(_complete_fps, FP_SCHEMA))
            else:
                frames.append(_html_frame(df).mapInPandas(functools.partial(_fingerprint_html, config), FP_SCHEMA))
        elif name.endswith(JSONL_SUFFIXES):
            frames.append(_html_frame(spark.read.json(str(path))).mapInPandas(
                functools.partial(_fingerprint_html, config), FP_SCHEMA))
        elif os.path.isdir(path) or name.endswith(FILE_SUFFIXES):
            files.append(str(path))
        else:
            raise ConfigError(f"{path}: unknown input type (expected WARC, a folder, JSONL or Parquet)")
    if files:
        paths = spark.createDataFrame([(p,) for p in files], "path string").repartition(len(files))
        frames.append(paths.mapInPandas(functools.partial(_fingerprint_files, config), FP_SCHEMA))
    if not frames:
        raise ConfigError("no inputs")
    out = functools.reduce(lambda a, b: a.unionByName(b), frames)
    return out.repartition(partitions) if partitions else out


def _is_fingerprints(columns: Sequence[str]) -> bool:
    """Whether Parquet of these columns is read as precomputed fingerprints (else as pages of
    ``url``/``html``)."""
    return "html" not in columns and any(c in columns for c in ("digest", "simhash"))


def _check_local_parquet(path: str) -> None:
    """A local Parquet input checked on the driver before Spark reads it (:class:`ConfigError`
    naming the file and column): readable, and fingerprints by
    :func:`neardup.batch.files.check_fingerprint_file` (types, nulls, sketch sizes, damaged pages)."""
    from neardup.batch.files import check_fingerprint_file, fingerprint_parts, parquet_schema

    if _is_fingerprints(parquet_schema(fingerprint_parts(path, ConfigError)[0], ConfigError).names):
        check_fingerprint_file(path, ConfigError)


def _fingerprint_types(df: "DataFrame") -> "DataFrame":
    """Checked fingerprint columns as :data:`FP_SCHEMA` has them: a SimHash Spark read as
    ``decimal(20,0)`` (uint64) as the signed long of its 64 bits, the other columns cast."""
    from decimal import Decimal

    from pyspark.sql import functions as F

    types = dict(spec.split() for spec in FP_SCHEMA.split(", "))
    cols = [F.col(f.name) if f.name != "simhash" or f.dataType.typeName() != "decimal" else
            F.when(F.col(f.name) >= Decimal(1 << 63), F.col(f.name) - Decimal(1 << 64)).otherwise(F.col(f.name))
            for f in df.schema.fields]
    return df.select(*[c.cast(types[f]).alias(f) if f in types else c for f, c in zip(df.columns, cols)])


def _html_frame(df: "DataFrame") -> "DataFrame":
    from pyspark.sql import functions as F

    if "url" not in df.columns or "html" not in df.columns:
        raise ConfigError("JSONL and Parquet pages need 'url' and 'html' columns")
    extra = [F.col(c).cast("double").alias(c) for c in ("fetched_at", "priority") if c in df.columns]
    return df.select(F.col("url").cast("string"), F.col("html").cast("string"), *extra)


def _bytes(x: Any) -> bytes | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else bytes(x)


def _explode_bands(threshold: float, num_perm: int, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    import pandas as pd

    lsh = MinHashLSH(MinHashConfig(num_perm=num_perm), threshold=threshold)
    for batch in batches:
        sigs = signatures_from_bytes([bytes(s) for s in batch["signature"]], num_perm)
        keys = lsh.keys(sigs)
        yield pd.DataFrame({"t": np.tile(np.arange(keys.shape[1], dtype=np.int32), keys.shape[0]),
                            "key": keys.reshape(-1).view(np.int64),
                            "digest": np.repeat(batch["digest"].to_numpy(), keys.shape[1])})


def _verify_minhash(threshold: float, num_perm: int, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:

    lsh = MinHashLSH(MinHashConfig(num_perm=num_perm), threshold=threshold)
    for batch in batches:
        sa = signatures_from_bytes([bytes(s) for s in batch["signature_a"]], num_perm)
        sb = signatures_from_bytes([bytes(s) for s in batch["signature_b"]], num_perm)
        first = (lsh.keys(sa) == lsh.keys(sb)).argmax(axis=1)
        rows = []
        for i in np.flatnonzero(first == batch["t"].to_numpy()):
            score = jaccard(sa[i], sb[i])
            if score >= threshold:
                d = (int(u64(batch["simhash_a"])[i]) ^ int(u64(batch["simhash_b"])[i])).bit_count()
                rows.append((batch["a"].iat[i], batch["b"].iat[i], d, score, *_ends(batch, int(i))))
        yield _link_frame(rows)


# -- stage 4: deciding candidate pairs ----------------------------------------------------------

def _decide(k: int, verify: float | None, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """Candidate pairs with both sides -> linked pairs: :func:`neardup.batch.blocks.decide_pair`
    (within k the SimHash path's rule, beyond it the bands' at ``far_verify``)."""

    for batch in batches:
        a, b = u64(batch["simhash_a"]), u64(batch["simhash_b"])
        rows = []
        for i in range(len(batch)):
            m = decide_pair(Side(int(a[i]), batch["a"].iat[i], False, _bytes(batch["sketch_a"].iat[i]), None, None,
                                 int(batch["length_a"].iat[i])),
                            Side(int(b[i]), batch["b"].iat[i], False, _bytes(batch["sketch_b"].iat[i]), None, None,
                                 int(batch["length_b"].iat[i])), k, verify)
            if m.status is not None:
                rows.append((batch["a"].iat[i], batch["b"].iat[i], m.distance, m.score, *_ends(batch, i)))
        yield _link_frame(rows)


def _ends(batch: "pd.DataFrame", i: int) -> tuple[Any, ...]:
    """What the node edges need of the linked groups: first nodes, lengths, hosts, titles,
    and whether each is a single page."""
    return (int(batch["node_a"].iat[i]), int(batch["node_b"].iat[i]), int(batch["length_a"].iat[i]),
            int(batch["length_b"].iat[i]), _str(batch["host_a"].iat[i]), _str(batch["host_b"].iat[i]),
            _str(batch["title_a"].iat[i]), _str(batch["title_b"].iat[i]), bool(batch["single_a"].iat[i]),
            bool(batch["single_b"].iat[i]))


# -- stages 3 and 4: node edges -------------------------------------------------------------------

def _sides(pdf: "pd.DataFrame", role: str | None = None) -> list[tuple[int, str | None, str | None]]:
    if role is not None:
        pdf = pdf[pdf["role"] == role]
    return [(int(n), _str(h), _str(t)) for n, h, t in zip(pdf["node"], pdf["host"], pdf["title"])]


def _edges_of_groups(keys: list[str], paired: bool, batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """One partition of group members (every member of a group in it) -> node edges: per
    group of ``keys``, :func:`neardup.batch.graph.pair_edges` over its nodes (``paired``: the two
    groups of a linked pair, told apart by ``role``; else a digest group with itself)."""
    import pandas as pd

    groups: dict[tuple, tuple[list, list]] = {}
    for batch in batches:
        roles = batch["role"] if paired else itertools.repeat("a")
        for *key, role, n, h, t in zip(*[batch[c] for c in keys], roles, batch["node"], batch["host"],
                                       batch["title"]):
            groups.setdefault(tuple(key), ([], []))[role == "b"].append((int(n), _str(h), _str(t)))
    edges: list[tuple[int, int]] = []
    for a, b in groups.values():
        edges += pair_edges(a, b if paired else None, short=True)
    yield pd.DataFrame(edges, columns=["src", "dst"], dtype="int64")


def _single_edges(batches: Iterator["pd.DataFrame"]) -> Iterator["pd.DataFrame"]:
    """Guarded links of two single-page groups -> their node edge, if the guard lets it
    (:func:`neardup.batch.graph.pair_edges` on the two nodes)."""
    import pandas as pd

    for batch in batches:
        edges: list[tuple[int, int]] = []
        for fa, fb, ha, hb, ta, tb in zip(batch["fa"], batch["fb"], batch["ha"], batch["hb"], batch["ta"],
                                          batch["tb"]):
            edges += pair_edges([(int(fa), _str(ha), _str(ta))], [(int(fb), _str(hb), _str(tb))], short=True)
        yield pd.DataFrame(edges, columns=["src", "dst"], dtype="int64")


LINK_SCHEMA = ("a string, b string, distance int, score double, fa long, fb long, la int, lb int, ha string, "
               "hb string, ta string, tb string, sa boolean, sb boolean")


def _link_frame(rows: list[tuple[Any, ...]]) -> "pd.DataFrame":
    """Linked pairs as the frame ``near_pairs`` yields (:data:`LINK_SCHEMA`)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=[c.split()[0] for c in LINK_SCHEMA.split(", ")]).astype(
        {"distance": "int32", "score": "float64", "fa": "int64", "fb": "int64", "la": "int32", "lb": "int32",
         "sa": "bool", "sb": "bool"})


#: digest groups a blocking reducer takes at most (about 12 rows each, 50 bytes a row unpacked)
BLOCK_GROUPS = 250_000
#: a table of at most this many rows is broadcast to the tasks instead of shuffled (a join
#: with it, or a semi-join against it, then moves nothing of the other side)
BROADCAST_ROWS = 1_000_000


#: the same for the side table of candidate groups (wide rows: digest, sketch, host, title;
#: 10^7 fingerprints give about 6 10^5 of them, more than a 4g driver broadcasts)
SIDE_BROADCAST_ROWS = 200_000


def _small(df: "DataFrame", max_rows: int | None = None) -> "DataFrame":
    """``df`` materialised (local checkpoint), marked for broadcast when it has at most
    ``max_rows`` (:data:`BROADCAST_ROWS`) rows."""
    from pyspark.sql import functions as F

    df = df.localCheckpoint()
    return F.broadcast(df) if df.count() <= (BROADCAST_ROWS if max_rows is None else max_rows) else df


def near_pairs(fps: "DataFrame", *, k: int, verify: float | None, method: str = "simhash",
               threshold: float = DEFAULT_THRESHOLD, num_perm: int = 128, layout: Layout | None = None,
               bands: bool = True, exact_k: bool = False, max_bucket: int | None = None, window: int = WINDOW,
               partitions: int | None = None) -> "DataFrame":
    """Stage 4 over digest groups (``digest, node, simhash, sketch, length, signature``):
    the linked pairs ``a < b`` (digests), ``distance``, ``score``, each once, with the
    groups' nodes ``fa, fb``, lengths, hosts, titles and whether each group is one page
    (:data:`LINK_SCHEMA`; ``fps`` has the columns ``host, title, single`` too).

    ``method="simhash"``: the Detector's candidate stage as :func:`neardup.batch.dedup.link_simhash`
    computes it (:func:`neardup.batch.spark.blocks.candidate_groups`: blocking rows, 8 sketch-band
    keys when ``bands`` and ``min(k, PIGEON_K) + 1`` pigeonhole SimHash keys, packed and
    shuffled by key; every pair of a block, a giant block windowed in node order; filtered,
    deduplicated), then each pair is decided by :func:`neardup.batch.blocks.decide_pair` against a
    side table of the candidates' groups only (broadcast when small). At ``k > PIGEON_K``
    the batch job adds the exact self-join at k; here ``exact_k`` adds the permuted tables'
    lead-key blocking with radius probes (``layout``; thousands of rows a fingerprint at
    k = 12: small inputs only), else pairs at distances in (PIGEON_K, k] are found through
    the bands alone."""
    from pyspark.sql import functions as F

    reps = fps
    ends = ["node", "length", "host", "title", "single"]
    cols = ["simhash", "sketch", *ends] if method == "simhash" else ["simhash", "signature", *ends]
    if method == "simhash":
        nparts = partitions or int(reps.sparkSession.conf.get("spark.sql.shuffle.partitions") or 8)
        count = reps.count()
        nparts = max(nparts, -(-count // BLOCK_GROUPS))  # a reducer's rows stay within memory
        max_bucket = bucket_cap(count) if max_bucket is None else max_bucket
        groups = candidate_groups(reps, k=k, verify=verify, bands=bands, max_bucket=max_bucket, window=window,
                                  partitions=nparts)
        if exact_k and k > PIGEON_K:
            by_node = reps.select("node", "digest")
            groups = groups.unionByName(probe_pairs(reps, k, layout).join(
                by_node.select(F.col("digest").alias("a"), F.col("node").alias("ga")), "a").join(
                by_node.select(F.col("digest").alias("b"), F.col("node").alias("gb")), "b").select(
                F.least("ga", "gb").alias("ga"), F.greatest("ga", "gb").alias("gb"))).distinct()
        groups = groups.localCheckpoint()
        nodes = _small(groups.select(F.col("ga").alias("node")).unionByName(groups.select(F.col("gb").alias("node")))
                      .distinct())
        side = _small(reps.join(nodes, "node", "left_semi").select("digest", *cols), SIDE_BROADCAST_ROWS)
        full = (groups.join(side.select(*[F.col(c).alias(f"{c}_a") for c in ["digest", *cols]]),
                            F.col("ga") == F.col("node_a"))
                .join(side.select(*[F.col(c).alias(f"{c}_b") for c in ["digest", *cols]]),
                      F.col("gb") == F.col("node_b"))
                .withColumnRenamed("digest_a", "a").withColumnRenamed("digest_b", "b"))
        # the pair's digests in order (a < b): swap the sides where the node order differs
        swap = F.col("a") > F.col("b")
        full = full.select(*[F.when(swap, F.col(_other(c))).otherwise(F.col(c)).alias(c)
                             for c in ["a", "b", *[f"{c}_{s}" for c in cols for s in "ab"]]])
        return full.mapInPandas(functools.partial(_decide, k, verify), LINK_SCHEMA)
    base = reps.select("digest", "signature")
    bands_df = base.mapInPandas(functools.partial(_explode_bands, threshold, num_perm),
                                "t int, key long, digest string")
    cand = (bands_df.withColumnRenamed("digest", "a").join(bands_df.withColumnRenamed("digest", "b"), ["t", "key"])
            .where(F.col("a") < F.col("b")).select("a", "b", "t"))
    side_a = reps.select(F.col("digest").alias("a"), *[F.col(c).alias(f"{c}_a") for c in cols])
    side_b = reps.select(F.col("digest").alias("b"), *[F.col(c).alias(f"{c}_b") for c in cols])
    full = cand.join(side_a, "a").join(side_b, "b")
    return full.mapInPandas(functools.partial(_verify_minhash, threshold, num_perm), LINK_SCHEMA)


def _other(col: str) -> str:
    if col in ("a", "b"):
        return "b" if col == "a" else "a"
    return col[:-1] + ("b" if col.endswith("a") else "a")


# -- stage 5: connected components --------------------------------------------------------------

def connected_components(edges: "DataFrame", nodes: "DataFrame", max_rounds: int = 64) -> "DataFrame":
    """``node, label`` for every node of ``nodes`` (column ``node``): the smallest node id
    of its connected component in ``edges`` (``src, dst``), by alternating large-star and
    small-star steps (Kiveris et al. 2014) until the edge set stops changing; the
    graph is then a set of stars around each component's smallest node."""
    from pyspark.sql import functions as F

    def norm(df: "DataFrame") -> "DataFrame":  # (u, v) with u > v: node, smaller neighbour
        return (df.where(F.col("u") != F.col("v"))
                .select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v")).distinct())

    e = norm(edges.select(F.col("src").alias("u"), F.col("dst").alias("v"))).localCheckpoint()
    for _ in range(max_rounds):
        # large-star: each node links its larger neighbours to its smallest neighbour (or itself)
        both = e.unionByName(e.select(F.col("v").alias("u"), F.col("u").alias("v")))
        m = both.groupBy("u").agg(F.least(F.min("v"), F.col("u")).alias("m"))
        large = norm(both.join(m, "u").where(F.col("v") > F.col("u"))
                     .select(F.col("v").alias("u"), F.col("m").alias("v")))
        # small-star: each node links itself and its smaller neighbours to the smallest of them
        m2 = large.groupBy("u").agg(F.min("v").alias("m"))
        small = norm(large.join(m2, "u").select(F.col("v").alias("u"), F.col("m").alias("v"))
                     .unionByName(m2.select(F.col("u"), F.col("m").alias("v")))).localCheckpoint()
        same = small.count() == e.count() and small.exceptAll(e).isEmpty()
        e = small
        if same:
            break
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    labels = e.groupBy("u").agg(F.min("v").alias("label")).withColumnRenamed("u", "node")
    return (nodes.select("node").distinct().join(labels, "node", "left")
            .select("node", F.coalesce(F.col("label"), F.col("node")).alias("label")))


# -- stage 6: canonicals --------------------------------------------------------------------------

def _canonical_fn(policy_spec: str):  # type: ignore[no-untyped-def]
    policy = policy_from_spec(policy_spec)

    def fn(pdf: "pd.DataFrame") -> "pd.DataFrame":
        import pandas as pd

        columns = (pdf["url"], pdf["first_seen"], pdf["digest"], pdf["title"], pdf["canonical_link"], pdf["priority"])
        members = [(u, float(f), d, _str(t), _str(link), _num(p)) for u, f, d, t, link, p in zip(*columns)]
        ci = choose_canonical(policy, members)
        canon_url, canon_digest = pdf["url"].iat[ci], pdf["digest"].iat[ci]
        canon_sim = unsigned(int(pdf["simhash"].iat[ci]))
        rows = []
        for i in range(len(pdf)):
            sim = unsigned(int(pdf["simhash"].iat[i]))
            if bool(pdf["empty"].iat[i]):
                status, m, d = "empty", None, None
            elif i == ci:
                status, m, d = "new", None, 0
            else:
                status = "exact" if pdf["digest"].iat[i] == canon_digest else "near"
                m, d = canon_url, (sim ^ canon_sim).bit_count()
            rows.append((pdf["url"].iat[i], pdf["digest"].iat[i], f"{sim:016x}", status, int(pdf["cluster"].iat[i]),
                         canon_url, m, d, float(pdf["fetched_at"].iat[i])))
        out = pd.DataFrame(rows, columns=[c.split()[0] for c in ROW_SCHEMA.split(", ")])
        out["distance"] = out["distance"].astype("Int32")
        return out

    return fn


def dedup(fps: "DataFrame", *, k: int | None = None, verify: float | None = DEFAULT_VERIFY,
          canonical: str | None = None, method: str = "simhash", threshold: float = DEFAULT_THRESHOLD,
          config: FingerprintConfig = DEFAULT_CONFIG, layout: Layout | None = None, bands: bool = True,
          exact_k: bool = False, max_bucket: int | None = None, window: int = WINDOW) -> "DataFrame":
    """Stages 2-6 over fingerprints (:func:`fingerprints`; rows with an error are left out):
    the output rows (:data:`OUT_SCHEMA`; ``max_bucket`` None: :func:`neardup.batch.blocks.bucket_cap`
    of the digest groups), the answer of :func:`neardup.batch.dedup.dedup_batch`
    (with ``exact_k``, or when k <= PIGEON_K; else pairs at SimHash distances in
    (PIGEON_K, k] that share no sketch band are not found: :func:`near_pairs`)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    fps, refetches = split_versions(fps)  # a URL fetched more than once: its last capture decides
    if k is None:
        k = default_k(config.version, bands)
    policy = policy_from_spec(canonical)
    pages = fps.where(F.col("error").isNull()).drop("error").withColumn("d64", F.xxhash64("digest")).persist(
        StorageLevel.MEMORY_AND_DISK)
    # stage 2: digests held by more than one page (a 64-bit hash of the digest, counted: the one
    # shuffle of every page); a collision only sends a few more pages down the general path
    repeated = pages.groupBy("d64").count().where(F.col("count") > 1).select("d64").localCheckpoint()
    few = repeated.count() <= BROADCAST_ROWS
    repeated = F.broadcast(repeated) if few else repeated
    many = pages.join(repeated, "d64", "left_semi")  # pages that may share their cluster without an edge
    full = pages.where(~F.col("empty"))
    full_many = many.where(~F.col("empty"))
    rep_cols = ["node", "simhash", "sketch", "length", "signature", "host", "title"]
    grouped = (full_many.groupBy("digest").agg(F.min(F.struct(*rep_cols)).alias("r"))
               .select("digest", "r.*", F.lit(False).alias("single")))
    # (a few groups: one task, not 16 near-empty ones beside the scan's)
    reps = (full.join(repeated, "d64", "left_anti").select("digest", *rep_cols, F.lit(True).alias("single"))
            .unionByName(grouped.coalesce(1) if few else grouped))
    # stage 3: exact copies (a group with itself), over the repeated digests only
    sides = full_many.select("node", "digest", "host", "title").distinct().localCheckpoint()
    lengths = full_many.groupBy("digest").agg(F.min(F.struct("node", "length")).alias("r")).select(
        "digest", F.col("r.length").alias("length"))
    multi = (sides.groupBy("digest").agg(F.count("*").alias("n"), F.min("node").alias("first"))
             .where(F.col("n") > 1).join(lengths, "digest"))
    long_star = (sides.join(multi.where(F.col("length") >= GUARD_MAX_LENGTH), "digest")
                 .where(F.col("node") != F.col("first"))
                 .select(F.col("first").alias("src"), F.col("node").alias("dst")))
    short_groups = (sides.join(multi.where(F.col("length") < GUARD_MAX_LENGTH).select("digest"), "digest")
                    .repartition("digest").mapInPandas(functools.partial(_edges_of_groups, ["digest"], False),
                                                       EDGE_SCHEMA))
    # stage 4: near pairs of groups, then node edges
    num_perm = config.minhash.num_perm if config.minhash is not None else 128
    linked = near_pairs(reps, k=k, verify=verify, method=method, threshold=threshold, num_perm=num_perm,
                        layout=layout, bands=bands, exact_k=exact_k, max_bucket=max_bucket,
                        window=window).localCheckpoint()
    # the guard compares titles for short texts, and beyond k always (matching.far_match)
    far = ((F.coalesce(F.col("distance"), F.lit(0)) > F.lit(k)) & (F.coalesce(F.col("score"), F.lit(0.0))
                                                                   < F.lit(FAR_TITLE_VERIFY)))
    guarded = (F.least("la", "lb") < GUARD_MAX_LENGTH) | (far if method == "simhash" else F.lit(False))
    long_pairs = (linked.where(~guarded)
                  .select(F.col("fa").alias("src"), F.col("fb").alias("dst")))
    # a guarded link of two single pages is decided on its row; others need their groups' nodes
    simple = F.col("sa") & F.col("sb")
    single_pairs = linked.where(guarded & simple).mapInPandas(_single_edges, EDGE_SCHEMA)
    short = linked.where(guarded & ~simple).select("a", "b").localCheckpoint()
    named = _small(short.select(F.col("a").alias("digest")).unionByName(short.select(F.col("b").alias("digest")))
                   .distinct())
    short_sides = full.join(named, "digest", "left_semi").select("node", "digest", "host", "title").distinct()
    members = (short.join(short_sides.withColumnRenamed("digest", "a"), "a").withColumn("role", F.lit("a"))
               .unionByName(short.join(short_sides.withColumnRenamed("digest", "b"), "b")
                            .withColumn("role", F.lit("b"))))
    short_pairs = members.repartition("a", "b").mapInPandas(functools.partial(_edges_of_groups, ["a", "b"], True),
                                                             EDGE_SCHEMA)
    # stage 5: clusters (labels of the nodes with an edge; every other node is its own cluster)
    labels = _small(component_labels([long_star, short_groups, long_pairs, single_pairs, short_pairs]))
    # stage 6: canonicals and statuses. A page with no edge and no other page of its digest is
    # alone in its cluster (most pages): decided where it is read, in SQL; the rest are
    # grouped by cluster and their canonical chosen in Python
    cols = ["url", "first_seen", "digest", "title", "canonical_link", "priority", "simhash", "empty", "cluster",
            "fetched_at"]
    tagged = (pages.join(labels, "node", "left").join(repeated.withColumn("many", F.lit(True)), "d64", "left")
              .withColumn("cluster", F.coalesce(F.col("label"), F.col("node"))))
    alone = tagged.where(F.col("label").isNull() & F.col("many").isNull()).select(
        "url", "digest", F.lower(F.lpad(F.hex("simhash"), 16, "0")).alias("simhash"),
        F.when(F.col("empty"), F.lit("empty")).otherwise(F.lit("new")).alias("status"), "cluster",
        F.col("url").alias("canonical"), F.lit(None).cast("string").alias("match"),
        F.when(F.col("empty"), F.lit(None)).otherwise(F.lit(0)).cast("int").alias("distance"), "fetched_at")
    together = (tagged.where(F.col("label").isNotNull() | F.col("many").isNotNull()).select(*cols)
                .groupBy("cluster").applyInPandas(_canonical_fn(policy.spec), ROW_SCHEMA))
    rows = refetches.expand(alone.unionByName(together))  # every capture's row (spark_versions)
    return rows.withColumn("fetched_at", F.when(F.col("fetched_at") > 0, F.col("fetched_at")))


#: at most this many node edges are collected to the driver and joined there (union-find, a
#: few seconds a million edges); more go through :func:`connected_components` in Spark
DRIVER_EDGES = 10_000_000


def component_labels(parts: Sequence["DataFrame"], driver_edges: int = DRIVER_EDGES) -> "DataFrame":
    """``node, label`` for every node of the edges (``src, dst``) in ``parts``: the smallest
    node id of its connected component; by union-find on the driver when there are at most
    ``driver_edges`` edges, else by :func:`connected_components`. (Each part is computed
    on its own: a stage of one kind of task, so its largest task is comparable with its
    median.)"""
    import pandas as pd

    from neardup.batch.graph import UnionFind

    parts = [p.localCheckpoint() for p in parts]
    spark = parts[0].sparkSession
    if sum(p.count() for p in parts) > driver_edges:
        from pyspark.sql import functions as F

        edges = functools.reduce(lambda a, b: a.unionByName(b), parts)
        ends = edges.select(F.col("src").alias("node")).unionByName(edges.select(F.col("dst").alias("node")))
        return connected_components(edges, ends.distinct())
    uf = UnionFind()
    for part in parts:
        pdf: pd.DataFrame = part.toPandas()
        for a, b in zip(pdf["src"].tolist(), pdf["dst"].tolist()):
            uf.add(a)
            uf.add(b)
            uf.union(a, b)
    nodes = list(uf.parent)
    out = pd.DataFrame({"node": np.array(nodes, dtype=np.int64),
                        "label": np.array([uf.find(n) for n in nodes], dtype=np.int64)})
    return spark.createDataFrame(out, "node long, label long")


#: driver memory of a session this module starts (local mode: the executors too); Spark's
#: default 1g fails at 10^6 fingerprints ("Could not allocate memory to grow BytesToBytesMap")
DRIVER_MEMORY = "4g"


def session(master: str = "local[2]", partitions: int = 4, app: str = "neardup") -> "SparkSession":
    """A Spark session for this job (Arrow on; Python workers run this interpreter; driver
    memory :data:`DRIVER_MEMORY` unless ``NEARDUP_SPARK_MEMORY`` says otherwise; no effect
    when a session or JVM already runs, e.g. under spark-submit)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (SparkSession.builder.master(master).appName(app)
            .config("spark.sql.shuffle.partitions", str(partitions))
            .config("spark.default.parallelism", str(partitions))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true")  # a damaged page fails
            .config("spark.driver.memory", os.environ.get("NEARDUP_SPARK_MEMORY", DRIVER_MEMORY))
            .getOrCreate())

"""Stores as older neardup versions wrote them, for the migration tests: the schema steps
up to ``schema``, the config and spec in meta, and one page in its own cluster."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from neardup.store import sqlite as store_mod


def write_legacy_store(path: Path, schema: int, config: dict[str, Any], fp: Any, url: str, host: str) -> None:
    """A store of schema version ``schema`` holding the fingerprint ``fp`` of ``url``."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        for step in range(schema):
            for sql in store_mod.MIGRATIONS[step]:
                assert isinstance(sql, str)  # the steps up to this schema are SQL text
                con.execute(sql)
        con.execute(f"PRAGMA user_version={schema}")
        con.execute("INSERT INTO meta(key, value) VALUES('config', ?)", (json.dumps(config, sort_keys=True),))
        con.execute("INSERT INTO meta(key, value) VALUES('spec', ?)", (json.dumps(fp.spec),))
        con.execute("INSERT INTO clusters(id, canonical_id, size, created_at) VALUES(1, 1, 1, 1.5e9)")
        con.execute(
            "INSERT INTO pages(id, url, host, first_seen, fetched_at, digest, simhash, spec, length, title, "
            "canonical_link, language, status, matched_id, distance, cluster_id, priority) "
            "VALUES(1, ?, ?, 1.5e9, 1.5e9, ?, ?, ?, ?, ?, NULL, 'en', 'new', NULL, NULL, 1, NULL)",
            (url, host, fp.digest, fp.simhash.to_bytes(8, "big"), fp.spec, fp.length, fp.title))
    finally:
        con.close()

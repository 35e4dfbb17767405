"""The store schema, written once and rendered per SQL dialect (SQLite, PostgreSQL).

:func:`migrations` gives the steps from each schema version to the next for one dialect:
a step is a list of SQL statements or callables (a callable gets the dialect's
``execute(sql, params)``). The column types differ only where the dialects do: the
``{pk}``, ``{seq_pk}``, ``{real}``, ``{blob}`` and ``{bigint}`` placeholders.

>>> sorted(migrations("sqlite")) == sorted(migrations("postgres")) == [0, 1, 2, 3]
True
>>> "BYTEA" in migrations("postgres")[2][0], "BLOB" in migrations("sqlite")[2][0]
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neardup.canonical import link_key, url_key
from neardup.errors import ConfigError

SCHEMA_VERSION = 4

#: A migration step: SQL text, or a callable given the dialect's ``execute(sql, params)``.
Step = str | Callable[[Any], None]

DIALECTS: dict[str, dict[str, str]] = {
    "sqlite": {"pk": "INTEGER PRIMARY KEY", "seq_pk": "INTEGER PRIMARY KEY AUTOINCREMENT",
               "real": "REAL", "blob": "BLOB", "bigint": "INTEGER"},
    "postgres": {"pk": "BIGSERIAL PRIMARY KEY", "seq_pk": "BIGSERIAL PRIMARY KEY",
                 "real": "DOUBLE PRECISION", "blob": "BYTEA", "bigint": "BIGINT"},
}


def _backfill_keys(execute: Any) -> None:
    """Schema 3 -> 4: the comparable URL and canonical-link keys of every stored page."""
    rows = execute("SELECT id, url, canonical_link FROM pages").fetchall()
    for pid, url, link in rows:
        execute("UPDATE pages SET url_key=?, link_key=? WHERE id=?", (url_key(url), link_key(link), pid))


_STEPS: dict[int, list[Step]] = {
    # version 0 (empty) -> 1
    0: [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE pages (
            id {pk},
            url TEXT NOT NULL UNIQUE,
            host TEXT NOT NULL,
            first_seen {real} NOT NULL,
            fetched_at {real} NOT NULL,
            digest TEXT NOT NULL,
            simhash {blob} NOT NULL,
            spec TEXT NOT NULL,
            length {bigint} NOT NULL,
            title TEXT,
            canonical_link TEXT,
            language TEXT,
            status TEXT NOT NULL,
            matched_id {bigint},
            distance INTEGER,
            cluster_id {bigint},
            priority {real}
        )""",
        "CREATE INDEX pages_digest ON pages(digest)",
        "CREATE INDEX pages_cluster ON pages(cluster_id)",
        "CREATE INDEX pages_host ON pages(host)",
        "CREATE INDEX pages_fetched ON pages(fetched_at)",
        """CREATE TABLE clusters (
            id {pk},
            canonical_id {bigint},
            size INTEGER NOT NULL,
            created_at {real} NOT NULL
        )""",
    ],
    # 1 -> 2: MinHash signatures and feature-set sizes; the change log that keeps every
    # process's in-memory index in step with the store
    1: [
        "ALTER TABLE pages ADD COLUMN signature {blob}",
        "ALTER TABLE pages ADD COLUMN set_size {bigint}",
        """CREATE TABLE changes (
            seq {seq_pk},
            page_id {bigint} NOT NULL,
            op TEXT NOT NULL,
            simhash {blob} NOT NULL
        )""",
    ],
    # 2 -> 3: the verification sketch (spec version 2 fingerprints)
    2: ["ALTER TABLE pages ADD COLUMN sketch {blob}"],
    # 3 -> 4: clusters of any size: keys for the incremental canonical choice, the
    # per-cluster link counts, growth fields, and indexes that keep every per-add lookup
    # bounded however many copies of a digest or SimHash value are stored
    3: [
        "ALTER TABLE pages ADD COLUMN url_key TEXT",
        "ALTER TABLE pages ADD COLUMN link_key TEXT",
        _backfill_keys,
        "DROP INDEX pages_digest",
        "DROP INDEX pages_cluster",
        "CREATE INDEX pages_digest_live ON pages(digest, id) WHERE status != 'empty'",
        "CREATE INDEX pages_simhash_live ON pages(simhash, id) WHERE status != 'empty'",
        "CREATE INDEX pages_cluster ON pages(cluster_id, id)",
        "CREATE INDEX pages_comparable ON pages(url_key)",  # (pages_url_key: PostgreSQL's name for UNIQUE(url))
        "ALTER TABLE clusters ADD COLUMN joins BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE clusters ADD COLUMN joined_at DOUBLE PRECISION",
        "ALTER TABLE clusters ADD COLUMN recent DOUBLE PRECISION NOT NULL DEFAULT 0",
        """CREATE TABLE cluster_links (
            cluster_id BIGINT NOT NULL,
            link TEXT NOT NULL,
            n BIGINT NOT NULL,
            PRIMARY KEY (cluster_id, link)
        )""",
        ("INSERT INTO cluster_links(cluster_id, link, n) SELECT cluster_id, link_key, count(*) FROM pages "
         "WHERE cluster_id IS NOT NULL AND link_key IS NOT NULL GROUP BY cluster_id, link_key"),
        "UPDATE clusters SET joins = size, joined_at = created_at",
    ],
}

#: the tables a store of the current schema has
TABLES = ("meta", "pages", "clusters", "changes", "cluster_links")


def migrations(dialect: str) -> dict[int, list[Step]]:
    """The migration steps rendered for ``dialect`` (``sqlite`` or ``postgres``)."""
    if dialect not in DIALECTS:
        raise ConfigError(f"unknown SQL dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    types = DIALECTS[dialect]
    return {version: [step.format(**types) if isinstance(step, str) else step for step in steps]
            for version, steps in _STEPS.items()}

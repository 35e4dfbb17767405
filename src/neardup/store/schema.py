"""The store schema, written once and rendered per SQL dialect (SQLite, PostgreSQL).

:func:`migrations` gives the steps from each schema version to the next for one dialect:
a step is a list of SQL statements or callables (a callable gets the dialect's
``execute(sql, params)``). The column types differ only where the dialects do: the
``{pk}``, ``{seq_pk}``, ``{real}``, ``{blob}`` and ``{bigint}`` placeholders.

>>> sorted(migrations("sqlite")) == sorted(migrations("postgres")) == [0, 1, 2, 3, 4, 5, 6, 7, 8]
True
>>> "BYTEA" in migrations("postgres")[2][0], "BLOB" in migrations("sqlite")[2][0]
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neardup.errors import ConfigError
from neardup.urls import comparable_link, comparable_url, origin_of

SCHEMA_VERSION = 9

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
        execute("UPDATE pages SET url_key=?, link_key=? WHERE id=?", (comparable_url(url), comparable_link(link), pid))


def _origins(execute: Any) -> None:
    """Schema 7 -> 8: a page's ``host`` is its origin (:func:`neardup.urls.origin_of`): the
    host with its port where that is not the default; only URLs with a port can change."""
    rows = execute("SELECT id, url, host FROM pages WHERE url LIKE ?", ("%://%:%",)).fetchall()
    for pid, url, host in rows:
        origin = origin_of(url)
        if origin and origin != host:
            execute("UPDATE pages SET host=? WHERE id=?", (origin, pid))


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
TABLES = ("meta", "pages", "clusters", "changes", "cluster_links", "page_versions", "payloads")

def _normalise_urls(execute: Any) -> None:
    """Schema 4 -> 5: stored URLs become their keys (:func:`neardup.urls.normalize_url`, the
    default settings), the URL as fetched kept in ``fetched_url``. A URL whose key another
    stored page already has keeps its form (two fetches of one key cannot be merged after
    the fact); one that is no valid URL any more is left as it was."""
    from neardup.errors import NeardupError
    from neardup.urls import normalize_url

    rows = execute("SELECT id, url FROM pages ORDER BY id").fetchall()
    taken = {str(url) for _, url in rows}
    for pid, url in rows:
        try:
            key = normalize_url(str(url))
        except NeardupError:
            continue
        if key == url or key in taken:
            continue
        taken.add(key)
        execute("UPDATE pages SET url=?, fetched_url=?, url_key=? WHERE id=?", (key, url, comparable_url(key), pid))


#: Schema 4 -> 5, common to both dialects: every fetch of a URL (a bounded history per page,
#: :data:`neardup.store.base.HISTORY_LIMIT` rows) for its change rate and recrawl schedule.
_VERSIONS_TABLE: list[Step] = [
    """CREATE TABLE page_versions (
        id {seq_pk},
        page_id {bigint} NOT NULL,
        fetched_at {real} NOT NULL,
        digest TEXT NOT NULL,
        simhash {blob} NOT NULL,
        changed INTEGER,
        distance INTEGER,
        score {real}
    )""",
    "CREATE INDEX page_versions_page ON page_versions(page_id, id)",
    _normalise_urls,
    # the first fetch of every stored page, as far as the store knows it
    ("INSERT INTO page_versions(page_id, fetched_at, digest, simhash) "
     "SELECT id, fetched_at, digest, simhash FROM pages ORDER BY id"),
]

#: the columns schema 5 adds to ``pages``: the URL as fetched beside its normalised key
#: (``url``), and the URL's fetch and change counts, last change and next planned fetch
_PAGE_COLUMNS_5 = (
    ("fetched_url", "TEXT"), ("fetches", "{bigint} NOT NULL DEFAULT 1"),
    ("change_count", "{bigint} NOT NULL DEFAULT 0"), ("last_changed_at", "{real}"),
    ("change_rate", "{real}"), ("next_fetch", "{real}"),
)

_PAGES_5 = """CREATE TABLE pages_v5 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    url TEXT NOT NULL UNIQUE, host TEXT NOT NULL, first_seen REAL NOT NULL, fetched_at REAL NOT NULL,
    digest TEXT NOT NULL, simhash BLOB NOT NULL, spec TEXT NOT NULL, length INTEGER NOT NULL,
    title TEXT, canonical_link TEXT, language TEXT, status TEXT NOT NULL, matched_id INTEGER,
    distance INTEGER, cluster_id INTEGER, priority REAL, signature BLOB, set_size INTEGER, sketch BLOB,
    url_key TEXT, link_key TEXT, """ + ", ".join(
    f"{name} {kind.format(bigint='INTEGER', real='REAL')}" for name, kind in _PAGE_COLUMNS_5) + ")"

_PAGES_4_COLUMNS = ("id, url, host, first_seen, fetched_at, digest, simhash, spec, length, title, canonical_link, "
                    "language, status, matched_id, distance, cluster_id, priority, signature, set_size, sketch, "
                    "url_key, link_key")

#: Schema 4 -> 5 per dialect. SQLite: ``pages`` and ``clusters`` are rebuilt with
#: AUTOINCREMENT keys, so that an id freed by ``expire`` is never given to another page
#: (PostgreSQL's sequences never reuse one).
_STEPS_5: dict[str, list[Step]] = {
    "sqlite": [
        _PAGES_5,
        f"INSERT INTO pages_v5({_PAGES_4_COLUMNS}) SELECT {_PAGES_4_COLUMNS} FROM pages",
        "DROP TABLE pages",
        "ALTER TABLE pages_v5 RENAME TO pages",
        "CREATE INDEX pages_host ON pages(host)",
        "CREATE INDEX pages_fetched ON pages(fetched_at)",
        "CREATE INDEX pages_digest_live ON pages(digest, id) WHERE status != 'empty'",
        "CREATE INDEX pages_simhash_live ON pages(simhash, id) WHERE status != 'empty'",
        "CREATE INDEX pages_cluster ON pages(cluster_id, id)",
        "CREATE INDEX pages_comparable ON pages(url_key)",
        """CREATE TABLE clusters_v5 (
            id INTEGER PRIMARY KEY AUTOINCREMENT, canonical_id INTEGER, size INTEGER NOT NULL,
            created_at REAL NOT NULL, joins BIGINT NOT NULL DEFAULT 0, joined_at DOUBLE PRECISION,
            recent DOUBLE PRECISION NOT NULL DEFAULT 0)""",
        ("INSERT INTO clusters_v5(id, canonical_id, size, created_at, joins, joined_at, recent) "
         "SELECT id, canonical_id, size, created_at, joins, joined_at, recent FROM clusters"),
        "DROP TABLE clusters",
        "ALTER TABLE clusters_v5 RENAME TO clusters",
        # ids the store handed out before (pages expired since, named by the change log or
        # a match) are not handed out again either
        "DELETE FROM sqlite_sequence WHERE name IN ('pages', 'clusters')",
        ("INSERT INTO sqlite_sequence(name, seq) SELECT 'pages', max(coalesce((SELECT max(id) FROM pages), 0), "
         "coalesce((SELECT max(page_id) FROM changes), 0), coalesce((SELECT max(matched_id) FROM pages), 0))"),
        ("INSERT INTO sqlite_sequence(name, seq) SELECT 'clusters', max(coalesce((SELECT max(id) FROM clusters), 0), "
         "coalesce((SELECT max(cluster_id) FROM pages), 0), coalesce((SELECT max(cluster_id) FROM cluster_links), 0))"),
    ],
    "postgres": [f"ALTER TABLE pages ADD COLUMN {name} {kind}" for name, kind in _PAGE_COLUMNS_5],
}


def migrations(dialect: str) -> dict[int, list[Step]]:
    """The migration steps rendered for ``dialect`` (``sqlite`` or ``postgres``)."""
    if dialect not in DIALECTS:
        raise ConfigError(f"unknown SQL dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    types = DIALECTS[dialect]
    structure: list[Step] = ["ALTER TABLE pages ADD COLUMN structure {blob}"]
    # 6 -> 7: the digest of the page's main text without its host's per-fetch noise (versions)
    stable: list[Step] = ["ALTER TABLE pages ADD COLUMN stable TEXT"]
    # 4 -> 5 per dialect (above); 5 -> 6: the page's structure SimHash (spec version 3 on)
    # 7 -> 8: host figures per origin (a mirror on another port is not the same host)
    # 8 -> 9: the original capture of each payload digest a deduplicated WARC refers to
    payloads: list[Step] = [
        "CREATE TABLE payloads (digest TEXT PRIMARY KEY, record_id TEXT NOT NULL, uri TEXT NOT NULL, "
        "date TEXT NOT NULL)"]
    steps: dict[int, list[Step]] = {**_STEPS, 4: [*_STEPS_5[dialect], *_VERSIONS_TABLE], 5: structure, 6: stable,
                                    7: [_origins], 8: payloads}
    return {version: [step.format(**types) if isinstance(step, str) else step for step in todo]
            for version, todo in steps.items()}

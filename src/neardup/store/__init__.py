"""Where the memory lives: the store contract, SQL written once, SQLite, PostgreSQL, and one factory from a target.
(The wing's face: its public names, defined in its modules.)"""

from neardup.store.base import HISTORY_LIMIT, PAGE_COLUMNS, ClusterRow, Lookup, PageRecord, VersionRow
from neardup.store.schema import SCHEMA_VERSION
from neardup.store.sql import GROWTH_HALF_LIFE, SQLStore
from neardup.store.sqlite import MIGRATIONS, SQLiteStore

__all__ = [
    "ClusterRow",
    "GROWTH_HALF_LIFE",
    "HISTORY_LIMIT",
    "Lookup",
    "MIGRATIONS",
    "PAGE_COLUMNS",
    "PageRecord",
    "SCHEMA_VERSION",
    "SQLStore",
    "SQLiteStore",
    "VersionRow",
]

"""Shared fixtures: the bundled sample pages and the optional shared corpus.

* ``sample_pages``: every page of ``examples/sample`` (real HTML, URLs and duplicate groups from
  ``examples/sample/urls.tsv``), keyed by file stem (``"cnbc-cybersecurity-2019"``).
* ``corpus``: path of the shared third-party corpus (``../shared/corpus`` next to the
  repository, or ``$NEARDUP_CORPUS``); tests that use it are skipped when it is absent.

Hypothesis runs deterministically (profile ``neardup``: derandomized, no example
database), so the test command passes or fails the same way on every run and machine.
Failures it ever found are kept in the tests as explicit ``@example`` cases. For an
exploratory run with fresh random inputs: ``HYPOTHESIS_PROFILE=explore pytest ...``.
"""

from __future__ import annotations

import csv
import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import settings

settings.register_profile("neardup", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "neardup"))

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DIR = ROOT / "examples" / "sample"
CORPUS_DIR = Path(os.environ.get("NEARDUP_CORPUS", ROOT.parent / "shared" / "corpus"))


@dataclass(frozen=True)
class SamplePage:
    """One real page of the bundled sample, with its row of ``urls.tsv``."""

    name: str  # file stem, e.g. "cnbc-cybersecurity-2019"
    path: Path
    url: str
    captured: str
    group: str  # pages of one group are captures of the same article
    note: str
    content: bytes = field(repr=False)  # the raw (decompressed) page bytes

    @property
    def host(self) -> str:
        """Host name without a leading ``www.``."""
        return (urlsplit(self.url).hostname or "").removeprefix("www.")


def load_sample_pages() -> dict[str, SamplePage]:
    pages: dict[str, SamplePage] = {}
    with open(SAMPLE_DIR / "urls.tsv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            path = SAMPLE_DIR / row["file"]
            name = path.name.removesuffix(".gz").removesuffix(".html")
            pages[name] = SamplePage(
                name=name, path=path, url=row["url"], captured=row["captured"],
                group=row["group"], note=row["note"], content=gzip.decompress(path.read_bytes()),
            )
    return pages


@pytest.fixture(scope="session")
def sample_pages() -> dict[str, SamplePage]:
    """All sample pages keyed by file stem (26 real news pages)."""
    pages = load_sample_pages()
    assert pages, "examples/sample/urls.tsv lists no pages"
    return pages


@pytest.fixture(scope="session")
def corpus() -> Path:
    """Root of the shared corpus; skips the test when it is not there."""
    if not (CORPUS_DIR / "README.md").is_file():
        pytest.skip(f"shared corpus not found at {CORPUS_DIR}")
    return CORPUS_DIR



#: a real documentation site from a Debian package (Sphinx's own manual, ``sphinx-doc``): the
#: link-list and crawl tests read its pages (.ci/run installs it)
SPHINX_DOCS = Path(os.environ.get("NEARDUP_SPHINX_DOCS", "/usr/share/doc/sphinx-doc/html"))


@pytest.fixture(scope="session")
def sphinx_docs() -> Path:
    """The ``sphinx-doc`` package's HTML manual. Skips without it, except under
    ``NEARDUP_REQUIRE_SITE=1`` (set by .ci/run, which installs it), where it fails."""
    if not (SPHINX_DOCS / "contents.html").is_file():
        message = f"Sphinx's manual not found at {SPHINX_DOCS} (apt-get install sphinx-doc; .ci/run does it)"
        if os.environ.get("NEARDUP_REQUIRE_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    return SPHINX_DOCS


# -- PostgreSQL: one throwaway server per test session, one fresh database per test --------
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pgserver  # noqa: E402


@pytest.fixture(scope="session")
def pg_server():
    """DSN of a PostgreSQL server started for this session (or $NEARDUP_TEST_PG).

    Without the server binaries the PostgreSQL tests are skipped, except under
    ``NEARDUP_REQUIRE_PG=1`` (set by .ci/run, which installs them), where they fail."""
    if not os.environ.get("NEARDUP_TEST_PG") and not pgserver.installed():
        message = "PostgreSQL server binaries not installed (apt-get install postgresql; .ci/run does it)"
        if os.environ.get("NEARDUP_REQUIRE_PG"):
            pytest.fail(message)
        pytest.skip(message)
    with pgserver.postgres_server() as dsn:
        yield dsn


@pytest.fixture()
def pg_dsn(pg_server):
    """DSN of a new, empty database on the session's server."""
    return pgserver.new_database(pg_server)


# -- Redis: one standalone server and one 3-master Redis Cluster per test session ------------
import redisserver  # noqa: E402


def _redis_required(what: str) -> None:
    if not redisserver.installed():
        message = f"{what}: redis-server not installed (apt-get install redis-server; .ci/run does it)"
        if os.environ.get("NEARDUP_REQUIRE_REDIS"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def redis_server():
    """URL of a standalone Redis started for this session (or $NEARDUP_TEST_REDIS). Without
    redis-server the Redis tests skip, except under ``NEARDUP_REQUIRE_REDIS=1`` (.ci/run)."""
    if not os.environ.get("NEARDUP_TEST_REDIS"):
        _redis_required("standalone Redis")
    with redisserver.standalone() as url:
        yield url


@pytest.fixture(scope="session")
def redis_cluster_server():
    """URL of a 3-master Redis Cluster started for this session (or $NEARDUP_TEST_REDIS_CLUSTER)."""
    if not os.environ.get("NEARDUP_TEST_REDIS_CLUSTER"):
        _redis_required("Redis Cluster")
    with redisserver.cluster() as url:
        yield url


@pytest.fixture()
def redis_url(redis_server):
    """A store target on the session's standalone Redis, with a key prefix of its own."""
    return redisserver.with_prefix(redis_server)


@pytest.fixture()
def redis_cluster_url(redis_cluster_server):
    """A store target on the session's Redis Cluster, with a key prefix of its own."""
    return redisserver.with_prefix(redis_cluster_server)


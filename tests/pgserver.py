"""A throwaway PostgreSQL server for the tests (started here, stopped at the end).

``NEARDUP_TEST_PG=postgresql://...`` points the tests at an existing server instead. The
server binaries come from PATH or Debian's ``/usr/lib/postgresql/*/bin`` (``.ci/run``
installs the ``postgresql`` package where it is missing). PostgreSQL refuses to run as
root, so as root the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def installed() -> bool:
    return bool(_bin("initdb") and _bin("pg_ctl"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the DSN of a fresh server (maintenance database ``postgres``), or of
    ``$NEARDUP_TEST_PG``."""
    existing = os.environ.get("NEARDUP_TEST_PG")
    if existing:
        yield existing
        return
    with throwaway_server() as (dsn, _):
        yield dsn


@contextmanager
def throwaway_server(*, fsync: bool = False, max_connections: int = 100) -> Iterator[tuple[str, str]]:
    """Start a server in a temporary directory; yield (DSN, data directory); stop and delete
    it at the end. ``fsync`` off by default (tests); ``benchmarks/service.py`` turns it on."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("PostgreSQL is not installed (initdb/pg_ctl not found); "
                           "run .ci/run or apt-get install postgresql")
    base = tempfile.mkdtemp(prefix="neardup-pg-")
    data = os.path.join(base, "data")
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(base, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run([*prefix, initdb, "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8"]
                   + ([] if fsync else ["--no-sync"]), check=True, capture_output=True, env=env)
    opts = (f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync={'on' if fsync else 'off'} "
            f"-c max_connections={max_connections}")
    subprocess.run([*prefix, pg_ctl, "-D", data, "-o", opts, "-l", os.path.join(base, "log"),
                    "-w", "-t", "60", "start"],
                   check=True, capture_output=True, env=env)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", data
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True, env=env)
        shutil.rmtree(base, ignore_errors=True)


def new_database(server_dsn: str) -> str:
    """Create an empty database on the server and return its DSN."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_dsn.rsplit("/", 1)[0] + "/" + name

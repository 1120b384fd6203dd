"""Fixtures shared by the whole test suite: storages and unique sweep names.

PostgreSQL is a first-class backend: ``$SWEEPER_TEST_POSTGRES`` names a server (a SQLAlchemy URL
whose user may create databases; default the local server,
``postgresql+psycopg://postgres@127.0.0.1:5432/test``), and every test that takes
``postgres_url`` gets a database of its own, created for it and dropped afterwards. The first
line of the run says whether these tests run or are skipped, and why; with
``SWEEPER_REQUIRE_POSTGRES=1`` (set by ``.ci/run`` when a server is reachable) an unreachable server
fails them instead of skipping them.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REPO = Path(__file__).resolve().parents[1]


def postgres_server() -> str:
    """The URL of the PostgreSQL server the tests use (``$SWEEPER_TEST_POSTGRES``)."""
    return os.environ.get("SWEEPER_TEST_POSTGRES") or DEFAULT_POSTGRES


@cache
def postgres_problem() -> str | None:
    """Why the PostgreSQL tests cannot run (None when the server answers and lets us create a
    database)."""
    import sqlalchemy as sa

    from sweeper.study.storage import error_line, safe_url

    url = postgres_server()
    try:
        u = sa.engine.make_url(url)
    except Exception as e:
        return f"SWEEPER_TEST_POSTGRES is not a URL: {type(e).__name__}"
    try:
        with socket.create_connection((u.host or "127.0.0.1", u.port or 5432), timeout=0.5):
            pass
    except OSError:
        return f"no server at {safe_url(url)}"
    try:
        eng = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(sa.text("select 1"))
        eng.dispose()
    except Exception as e:
        return f"cannot connect to {safe_url(url)}: {error_line(e, url)}"
    return None


def pytest_report_header(config: pytest.Config) -> str:
    from sweeper.study.storage import safe_url

    problem = postgres_problem()
    if problem is None:
        return f"postgres: the PostgreSQL tests run against {safe_url(postgres_server())}"
    required = os.environ.get("SWEEPER_REQUIRE_POSTGRES") == "1"
    return (
        f"postgres: the PostgreSQL tests are {'FAILED (required)' if required else 'SKIPPED'}: "
        f"{problem} (set SWEEPER_TEST_POSTGRES to a server's URL)"
    )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite storage in the test's tmp dir."""
    return f"sqlite:///{tmp_path / 'sweeper.db'}"


@pytest.fixture
def sweep_name() -> str:
    """A sweep name no other test (or earlier run on a shared server) uses."""
    return f"t{uuid.uuid4().hex[:10]}"


def forget_storage(url: str) -> None:
    """Dispose of the engines this process cached for ``url`` (before its database is dropped)."""
    from sweeper.study import storage as st
    from sweeper.study import sweep

    eng = st._engines.pop(url, None)
    if eng is not None:
        eng.dispose()
    rdb = sweep._storages.pop(url, None)
    if rdb is not None:
        rdb.engine.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL database of this test's own on the server of ``$SWEEPER_TEST_POSTGRES``
    (created now, dropped afterwards); skipped (failed with ``SWEEPER_REQUIRE_POSTGRES=1``)
    when the server cannot be reached."""
    problem = postgres_problem()
    if problem is not None:
        if os.environ.get("SWEEPER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL required (SWEEPER_REQUIRE_POSTGRES=1): {problem}")
        pytest.skip(f"PostgreSQL: {problem}")
    import sqlalchemy as sa

    server = sa.engine.make_url(postgres_server())
    name = f"sweeper_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = server.set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        forget_storage(url)
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

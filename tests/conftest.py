"""Fixtures shared by the whole test suite: storages and unique sweep names."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REPO = Path(__file__).resolve().parents[1]


def _postgres_reachable(host: str = "127.0.0.1", port: int = 5432) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite storage in the test's tmp dir."""
    return f"sqlite:///{tmp_path / 'sweeper.db'}"


@pytest.fixture
def sweep_name() -> str:
    """A sweep name no other test (or earlier run on a shared server) uses."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def postgres_url(sweep_name: str) -> Iterator[str]:
    """The local PostgreSQL storage (skips when 127.0.0.1:5432 is unreachable).

    The database is shared between tests and runs: use the ``sweep_name`` fixture for names; every
    sweep of that name (and its laws) is deleted afterwards.
    """
    if not _postgres_reachable():
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    yield POSTGRES_URL
    from sweeper import storage as st
    from sweeper.sweep import delete_sweep

    delete_sweep(sweep_name, POSTGRES_URL)
    with st.transaction(POSTGRES_URL) as conn:
        conn.execute(st.laws_table.delete().where(st.laws_table.c.sweep == sweep_name))
        conn.execute(st.runs_table.delete().where(st.runs_table.c.sweep == sweep_name))
        conn.execute(st.sweeps_table.delete().where(st.sweeps_table.c.name == sweep_name))
        conn.execute(st.leases_table.delete().where(st.leases_table.c.sweep.like(f"{sweep_name}%")))

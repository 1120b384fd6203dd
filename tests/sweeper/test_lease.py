"""One driver per sweep: the lease, its heartbeat, takeovers, and launch refusing a held sweep."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from sweeper import storage as st
from sweeper.lease import LeaseHeld, acquire, holder, release, renew, sweep_lease


def _put(url: str, sweep: str, *, host: str, pid: int, age_s: float) -> None:
    """A lease row as another driver would have left it."""
    now = time.time()
    with st.transaction(url) as conn:
        conn.execute(
            sa.insert(st.leases_table).values(
                sweep=sweep,
                owner=f"{host}:{pid}:other",
                host=host,
                pid=pid,
                acquired_at=now - age_s - 60,
                heartbeat_at=now - age_s,
            )
        )


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_acquire_holder_release(sqlite_url: str) -> None:
    assert holder("s", sqlite_url) is None
    lease = acquire("s", sqlite_url)
    got = holder("s", sqlite_url)
    assert got is not None and got.owner == lease.owner
    assert (got.host, got.pid) == (socket.gethostname(), os.getpid())
    release(lease, sqlite_url)
    assert holder("s", sqlite_url) is None


def test_a_live_driver_keeps_its_sweep(sqlite_url: str) -> None:
    first = acquire("s", sqlite_url)  # this process: alive
    with pytest.raises(LeaseHeld, match=rf"{socket.gethostname()}:{os.getpid()}.*--takeover"):
        acquire("s", sqlite_url)
    assert holder("s", sqlite_url).owner == first.owner  # type: ignore[union-attr]


def test_a_dead_driver_on_this_host_is_taken_over_at_once(sqlite_url: str) -> None:
    _put(sqlite_url, "s", host=socket.gethostname(), pid=_dead_pid(), age_s=1.0)
    lease = acquire("s", sqlite_url)
    assert holder("s", sqlite_url).owner == lease.owner  # type: ignore[union-attr]


def test_another_hosts_driver_is_gone_only_when_its_heartbeat_is_stale(sqlite_url: str) -> None:
    _put(sqlite_url, "fresh", host="node-7", pid=1, age_s=5.0)
    with pytest.raises(LeaseHeld, match="node-7:1, last heartbeat 5 s ago"):
        acquire("fresh", sqlite_url, stale_after_s=120)
    lease = acquire("fresh", sqlite_url, takeover=True)  # told so
    assert holder("fresh", sqlite_url).owner == lease.owner  # type: ignore[union-attr]
    _put(sqlite_url, "stale", host="node-7", pid=1, age_s=300.0)
    lease = acquire("stale", sqlite_url, stale_after_s=120)
    assert holder("stale", sqlite_url).owner == lease.owner  # type: ignore[union-attr]


def test_a_lease_taken_over_is_neither_renewed_nor_released_by_its_old_owner(
    sqlite_url: str,
) -> None:
    old = acquire("s", sqlite_url)
    new = acquire("s", sqlite_url, takeover=True)
    assert not renew(old, sqlite_url)
    release(old, sqlite_url)
    assert holder("s", sqlite_url).owner == new.owner  # type: ignore[union-attr]
    assert renew(new, sqlite_url)


def test_the_heartbeat_runs_and_the_lease_goes_even_on_error(sqlite_url: str) -> None:
    with pytest.raises(RuntimeError), sweep_lease("s", sqlite_url, heartbeat_s=0.05) as lease:
        first = holder("s", sqlite_url).heartbeat_at  # type: ignore[union-attr]
        deadline = time.time() + 10
        while holder("s", sqlite_url).heartbeat_at == first:  # type: ignore[union-attr]
            assert time.time() < deadline, "no heartbeat"
            time.sleep(0.05)
        assert holder("s", sqlite_url).owner == lease.owner  # type: ignore[union-attr]
        raise RuntimeError("the launch failed")
    assert holder("s", sqlite_url) is None


def _race(url: str, sweep: str) -> list[str]:
    """Eight threads take over one stale lease at once; returns the owners that won."""
    _put(url, sweep, host="node-7", pid=1, age_s=600.0)
    won: list[str] = []
    barrier = threading.Barrier(8)

    def go() -> None:
        barrier.wait()
        with contextlib.suppress(LeaseHeld):
            won.append(acquire(sweep, url).owner)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won


def test_racing_takeovers_have_one_winner_sqlite(sqlite_url: str) -> None:
    won = _race(sqlite_url, "s")
    assert len(won) == 1 and holder("s", sqlite_url).owner == won[0]  # type: ignore[union-attr]


@pytest.mark.postgres
def test_racing_takeovers_have_one_winner_postgres(postgres_url: str, sweep_name: str) -> None:
    won = _race(postgres_url, sweep_name)
    assert len(won) == 1 and holder(sweep_name, postgres_url).owner == won[0]  # type: ignore[union-attr]


BUSY = """\
[sweep]
name = "busy"
trials_per_cell = 1

[model]
context = 32

[ladder]
widths = [16]
depths = [1]
tokens = [16384]

[search]
lr = { low = 1e-3, high = 1e-2, log = true }
batch_size = 8
"""


def _sweeper(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args], capture_output=True, text=True, cwd=cwd
    )


def test_launch_refuses_a_sweep_another_driver_runs(sqlite_url: str, tmp_path: Path) -> None:
    """Refused before Ray starts or any Optuna study is opened, from the API and the CLI."""
    from sweeper.launch import launch_study
    from sweeper.study import parse_study_toml

    _put(sqlite_url, "busy", host="node-7", pid=4242, age_s=3.0)
    with pytest.raises(LeaseHeld, match="node-7:4242"):
        launch_study(parse_study_toml(BUSY), url=sqlite_url, progress=False)
    assert not sa.inspect(st.get_engine(sqlite_url)).has_table("studies")  # Optuna never opened
    (tmp_path / "busy.toml").write_text(BUSY)
    r = _sweeper("launch", "busy.toml", "--storage", sqlite_url, "--no-progress", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "node-7:4242" in r.stderr and "--takeover" in r.stderr


def test_status_names_the_driver(sqlite_url: str, tmp_path: Path) -> None:
    from sweeper.study import parse_study_toml
    from sweeper.sweep import open_sweep

    open_sweep(parse_study_toml(BUSY), sqlite_url)
    r = _sweeper("status", "busy", "--storage", sqlite_url, cwd=tmp_path)
    assert r.returncode == 0 and "run by" not in r.stdout
    _put(sqlite_url, "busy", host="node-7", pid=4242, age_s=3.0)
    r = _sweeper("status", "busy", "--storage", sqlite_url, cwd=tmp_path)
    assert re.search(
        r"^sweep busy: run by driver node-7:4242, last heartbeat \d+ s ago$", r.stdout, re.M
    )
    r = _sweeper("status", "busy", "--storage", sqlite_url, "--json", cwd=tmp_path)
    driver = json.loads(r.stdout)["driver"]
    assert driver["host"] == "node-7" and driver["pid"] == 4242

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

from sweeper.study import storage as st
from sweeper.study.lease import LeaseHeld, acquire, holder, release, renew, sweep_lease


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
    st.get_engine(sqlite_url, new=True)  # (reading a lease needs a database: acquire creates one)
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


def test_takeover_of_a_live_driver_on_this_host_is_refused_with_its_pid(sqlite_url: str) -> None:
    first = acquire("s", sqlite_url)  # this process: alive, on this host
    with pytest.raises(LeaseHeld, match=rf"pid {os.getpid()}\) is alive on this host.*kill"):
        acquire("s", sqlite_url, takeover=True)
    assert holder("s", sqlite_url).owner == first.owner  # type: ignore[union-attr]
    release(first, sqlite_url)


def test_every_acquisition_increments_the_epoch_and_a_release_keeps_it(sqlite_url: str) -> None:
    a = acquire("s", sqlite_url)
    assert a.epoch == 1
    release(a, sqlite_url)
    assert holder("s", sqlite_url) is None
    b = acquire("s", sqlite_url)
    assert b.epoch == 2 and not renew(a, sqlite_url)
    _as_if_remote(sqlite_url, "s")
    c = acquire("s", sqlite_url, takeover=True)
    assert c.epoch == 3 and holder("s", sqlite_url).epoch == 3  # type: ignore[union-attr]
    release(c, sqlite_url)


def test_an_old_lease_table_gains_the_epoch_column(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    eng = sa.create_engine(url)
    with eng.begin() as conn:  # the table as an older Sweeper made it, with a live lease
        conn.execute(
            sa.text(
                "CREATE TABLE sweeper_leases (sweep VARCHAR(255) PRIMARY KEY, owner VARCHAR(255) "
                "NOT NULL, host VARCHAR(255) NOT NULL, pid INTEGER NOT NULL, acquired_at FLOAT "
                "NOT NULL, heartbeat_at FLOAT NOT NULL)"
            )
        )
        conn.execute(sa.text("INSERT INTO sweeper_leases VALUES ('s', 'h:1:x', 'h', 1, 0, 0)"))
    eng.dispose()
    got = holder("s", url)
    assert got is not None and got.epoch == 1
    assert acquire("s", url).epoch == 2  # stale: taken over, next epoch


def test_another_hosts_driver_is_gone_only_when_its_heartbeat_is_stale(sqlite_url: str) -> None:
    _put(sqlite_url, "fresh", host="node-7", pid=1, age_s=5.0)
    with pytest.raises(LeaseHeld, match="node-7:1, last heartbeat 5 s ago"):
        acquire("fresh", sqlite_url, stale_after_s=120)
    lease = acquire("fresh", sqlite_url, takeover=True)  # told so
    assert holder("fresh", sqlite_url).owner == lease.owner  # type: ignore[union-attr]
    _put(sqlite_url, "stale", host="node-7", pid=1, age_s=300.0)
    lease = acquire("stale", sqlite_url, stale_after_s=120)
    assert holder("stale", sqlite_url).owner == lease.owner  # type: ignore[union-attr]


def _as_if_remote(url: str, sweep: str) -> None:
    """Make the holder of ``sweep`` look like a driver on another host (its liveness unknown)."""
    with st.transaction(url) as conn:
        conn.execute(
            sa.update(st.leases_table).where(st.leases_table.c.sweep == sweep).values(host="node-7")
        )


def test_a_lease_taken_over_is_neither_renewed_nor_released_by_its_old_owner(
    sqlite_url: str,
) -> None:
    old = acquire("s", sqlite_url)
    _as_if_remote(sqlite_url, "s")
    new = acquire("s", sqlite_url, takeover=True)
    assert new.epoch == old.epoch + 1
    assert not renew(old, sqlite_url)
    release(old, sqlite_url)
    assert holder("s", sqlite_url).owner == new.owner  # type: ignore[union-attr]
    assert renew(new, sqlite_url)


def test_the_heartbeat_runs_and_the_lease_goes_even_on_error(sqlite_url: str) -> None:
    with pytest.raises(RuntimeError), sweep_lease("s", sqlite_url, heartbeat_s=0.05) as held:
        first = holder("s", sqlite_url).heartbeat_at  # type: ignore[union-attr]
        deadline = time.time() + 10
        while holder("s", sqlite_url).heartbeat_at == first:  # type: ignore[union-attr]
            assert time.time() < deadline, "no heartbeat"
            time.sleep(0.05)
        assert holder("s", sqlite_url).owner == held.lease.owner  # type: ignore[union-attr]
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


@pytest.mark.parametrize("stale", [False, True], ids=["fresh-sweep", "stale-lease"])
def test_a_lease_just_won_is_live_to_the_next_reader_in_this_process(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, stale: bool
) -> None:
    """The window the thread race hits now and then, made certain: a second launch in this
    process reads the row right after the winner's write commits, before acquire returns. It
    must see a live lease, not one "left by an earlier, interrupted launch"."""
    from sweeper.study import lease as lease_mod

    if stale:
        _put(sqlite_url, "s", host="node-7", pid=1, age_s=600.0)
    real = st.transaction
    seen: list[BaseException | str] = []

    @contextlib.contextmanager
    def then_race(url: str | None):  # type: ignore[no-untyped-def]
        with real(url) as conn:
            yield conn
        if not seen:  # the first write just committed: another launch looks now
            try:
                seen.append(acquire("s", sqlite_url).owner)
            except LeaseHeld as e:
                seen.append(e)

    monkeypatch.setattr(lease_mod.st, "transaction", then_race)
    won = acquire("s", sqlite_url)
    monkeypatch.setattr(lease_mod.st, "transaction", real)
    assert len(seen) == 1 and isinstance(seen[0], LeaseHeld), seen
    assert holder("s", sqlite_url).owner == won.owner  # type: ignore[union-attr]


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
    from sweeper.run.launch import launch_study
    from sweeper.study.spec import parse_study_toml

    _put(sqlite_url, "busy", host="node-7", pid=4242, age_s=3.0)
    with pytest.raises(LeaseHeld, match="node-7:4242"):
        launch_study(parse_study_toml(BUSY), url=sqlite_url, progress=False)
    assert not sa.inspect(st.get_engine(sqlite_url)).has_table("studies")  # Optuna never opened
    (tmp_path / "busy.toml").write_text(BUSY)
    r = _sweeper("launch", "busy.toml", "--storage", sqlite_url, "--no-progress", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "node-7:4242" in r.stderr and "--takeover" in r.stderr


def test_status_names_the_driver(sqlite_url: str, tmp_path: Path) -> None:
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import open_sweep

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


def test_status_says_when_the_recorded_driver_is_gone(sqlite_url: str, tmp_path: Path) -> None:
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import open_sweep

    open_sweep(parse_study_toml(BUSY), sqlite_url)
    pid = _dead_pid()
    _put(sqlite_url, "busy", host=socket.gethostname(), pid=pid, age_s=3.0)
    r = _sweeper("status", "busy", "--storage", sqlite_url, cwd=tmp_path)
    assert f"process {pid} is gone: the next launch takes over" in r.stdout, r.stdout
    r = _sweeper("status", "busy", "--storage", sqlite_url, "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["driver"]["alive"] is False


def test_an_interrupted_launch_can_relaunch_from_the_same_process(sqlite_url: str) -> None:
    """A notebook interrupts a launch (KeyboardInterrupt inside the lease) and launches again in
    the same process: the lease was per launch and went back in ``finally``; a lease row this
    process left behind (its release failed) is taken over, not mistaken for a live driver."""
    with pytest.raises(KeyboardInterrupt), sweep_lease("nb", sqlite_url, heartbeat_s=60):
        raise KeyboardInterrupt
    assert holder("nb", sqlite_url) is None
    with sweep_lease("nb", sqlite_url, heartbeat_s=60) as held:
        assert holder("nb", sqlite_url) == held.lease
    left = acquire("nb", sqlite_url)
    from sweeper.study import lease as lease_mod

    lease_mod._HELD_HERE.discard(left.owner)  # as if its release had failed
    again = acquire("nb", sqlite_url)
    assert again.owner != left.owner and holder("nb", sqlite_url) == again
    release(again, sqlite_url)


# ---- fencing: a driver whose lease was taken writes nothing ----------------------------------
FENCED = BUSY.replace('name = "busy"', 'name = "fenced"').replace(
    "trials_per_cell = 1", "trials_per_cell = 3"
)


def _fencing(url: str, sweep: str) -> None:
    """Driver A holds the sweep and has one trial running; B takes it over (A looks remote, as
    behind a partition); every write A tries after that is refused and rolled back, B's go on."""
    import optuna
    from optuna.trial import TrialState

    from sweeper.study.lease import HeldLease, LeaseLost
    from sweeper.study.samplers import reconcile
    from sweeper.study.space import distributions
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import FencedStorage, open_sweep

    spec = parse_study_toml(FENCED.replace('name = "fenced"', f'name = "{sweep}"'))
    dists = distributions(spec.search)
    a = HeldLease(acquire(sweep, url), url)
    sa_ = FencedStorage(url, a)
    (cs_a,) = open_sweep(spec, url, storage=sa_, held=a)
    done = cs_a.study.ask(dists)
    cs_a.study.tell(done, 3.0)
    running = cs_a.study.ask(dists)
    running.report(3.5, 1)

    _as_if_remote(url, sweep)
    b = HeldLease(acquire(sweep, url, takeover=True), url)
    assert b.lease.epoch == a.lease.epoch + 1

    # A, not yet aware: its tell is refused in the transaction that would write it
    with pytest.raises(LeaseLost, match="taken over"):
        cs_a.study.tell(running, 2.0)
    assert a.lost.is_set() and "taken over by driver" in a.why and "(epoch 2)" in a.why
    with pytest.raises(LeaseLost):
        cs_a.study.ask(dists)
    with pytest.raises(LeaseLost):
        cs_a.study.enqueue_trial({"lr": 5e-3, "batch_size": 8})
    with pytest.raises(LeaseLost):
        running.set_user_attr("runs", [])

    sb = FencedStorage(url, b)
    (cs_b,) = open_sweep(spec, url, storage=sb, held=b)
    assert reconcile(cs_b.study) == [running.params]  # A's trial closed by B, its point queued
    states = [
        t.state for t in optuna.load_study(study_name=cs_b.study.study_name, storage=url).trials
    ]
    # nothing of A's after the takeover: no second trial asked, the running one closed by B only
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.WAITING]
    t = cs_b.study.ask(dists)
    cs_b.study.tell(t, 2.5)
    assert (
        "runs"
        not in optuna.load_study(study_name=cs_b.study.study_name, storage=url).trials[1].user_attrs
    )
    sa_.close()
    sb.close()
    release(b.lease, url)


def test_a_driver_whose_lease_was_taken_can_write_nothing_sqlite(sqlite_url: str) -> None:
    _fencing(sqlite_url, "fenced")


@pytest.mark.postgres
def test_a_driver_whose_lease_was_taken_can_write_nothing_postgres(
    postgres_url: str, sweep_name: str
) -> None:
    _fencing(postgres_url, sweep_name)


def test_the_heartbeat_notices_a_takeover_and_calls_back(sqlite_url: str) -> None:
    seen: list[str] = []
    with sweep_lease("hb", sqlite_url, heartbeat_s=0.1) as held:
        held.on_lost(seen.append)
        _as_if_remote(sqlite_url, "hb")
        b = acquire("hb", sqlite_url, takeover=True)
        assert held.lost.wait(10), "the heartbeat did not notice"
        deadline = time.time() + 5
        while not seen and time.time() < deadline:  # the callbacks run right after
            time.sleep(0.05)
        assert seen and "taken over by driver" in seen[0] and "(epoch 2)" in seen[0]
    assert holder("hb", sqlite_url).owner == b.owner  # type: ignore[union-attr]  # not released


# ---- a database outage: the launch's writes wait it out as the heartbeat does ------------------
def _outage(url: str, seconds: float) -> threading.Thread:
    """Refuse logins to ``url``'s database and end its connections, for ``seconds``."""
    u = sa.engine.make_url(url)
    admin = sa.create_engine(u.set(database="postgres"), isolation_level="AUTOCOMMIT")
    db = u.database

    def flip(allow: bool) -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS {str(allow).lower()}'))
            if not allow:
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :db AND pid <> pg_backend_pid()"
                    ),
                    {"db": db},
                )

    flip(False)

    def restore() -> None:
        time.sleep(seconds)
        flip(True)
        admin.dispose()

    t = threading.Thread(target=restore, daemon=True)
    t.start()
    return t


@pytest.mark.postgres
def test_a_write_waits_out_a_short_database_outage(
    postgres_url: str, sweep_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The heartbeat tolerated 2 minutes without the database, but a tell in that window crashed
    the driver (``internal error: StorageInternalError``, the run lost): the launch's writes now
    wait as long as the heartbeat does."""
    from sweeper.study.lease import HeldLease
    from sweeper.study.space import distributions
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import FencedStorage, open_sweep

    spec = parse_study_toml(FENCED.replace('name = "fenced"', f'name = "{sweep_name}"'))
    held = HeldLease(acquire(sweep_name, postgres_url), postgres_url)
    storage = FencedStorage(postgres_url, held)
    (cs,) = open_sweep(spec, postgres_url, storage=storage, held=held)
    trial = cs.study.ask(distributions(spec.search))
    back = _outage(postgres_url, 3.0)
    t0 = time.monotonic()
    trial.set_user_attr("runs", [{"seed": 0, "loss": 3.0}])
    cs.study.tell(trial, 3.0)
    assert time.monotonic() - t0 > 2.0 and not held.lost.is_set()
    assert "the storage is unreachable (set_trial_user_attr" in caplog.text
    back.join()
    stored = cs.study.trials[0]
    assert stored.value == 3.0 and stored.user_attrs["runs"] == [{"seed": 0, "loss": 3.0}]
    storage.close()
    release(held.lease, postgres_url)


def test_a_write_gives_the_lease_up_when_the_outage_outlasts_it(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``stale_after_s`` the driver gives its lease up, as the heartbeat would (another
    driver may have taken over): LeaseLost, which stops the launch with the reason."""
    import optuna
    from optuna.storages import RDBStorage

    from sweeper.study.lease import HeldLease, LeaseLost
    from sweeper.study.sweep import FencedStorage

    held = HeldLease(acquire("out", sqlite_url), sqlite_url, stale_after_s=1.0)
    storage = FencedStorage(sqlite_url, held)
    calls: list[str] = []

    def down(self: RDBStorage, *args: object) -> None:
        calls.append("try")
        try:
            raise sa.exc.OperationalError("UPDATE", {}, Exception("connection refused"))
        except sa.exc.OperationalError as e:
            raise optuna.exceptions.StorageInternalError("commit failed") from e

    monkeypatch.setattr(RDBStorage, "set_trial_user_attr", down)
    monkeypatch.setattr(FencedStorage, "set_trial_user_attr", _rewrapped("set_trial_user_attr"))
    with pytest.raises(LeaseLost, match="the storage was unreachable for 2 s"):
        storage.set_trial_user_attr(1, "runs", [])
    assert held.lost.is_set() and len(calls) == 3  # at 0, 0.5 and 1.5 s

    # a bad write (not the connection) is raised at once, not retried
    def bad(self: RDBStorage, *args: object) -> None:
        raise optuna.exceptions.StorageInternalError("too long")

    fresh = HeldLease(acquire("bad", sqlite_url), sqlite_url)
    monkeypatch.setattr(RDBStorage, "set_trial_user_attr", bad)
    monkeypatch.setattr(FencedStorage, "set_trial_user_attr", _rewrapped("set_trial_user_attr"))
    with pytest.raises(optuna.exceptions.StorageInternalError, match="too long"):
        FencedStorage(sqlite_url, fresh).set_trial_user_attr(1, "runs", [])
    storage.close()


def _rewrapped(name: str) -> object:
    from sweeper.study import sweep

    return sweep._retried(name)


def test_a_driver_whose_sweep_was_deleted_by_a_takeover_stops_as_displaced(
    sqlite_url: str,
) -> None:
    """A cluster audit: a driver displaced by `--force-new --takeover` (which deletes the sweep)
    ended in Tune's traceback, Optuna's KeyError 'Record does not exist', on its next write."""
    from sweeper.study.lease import HeldLease, LeaseLost
    from sweeper.study.space import distributions
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import FencedStorage, delete_sweep, open_sweep

    spec = parse_study_toml(FENCED)
    a = HeldLease(acquire("fenced", sqlite_url), sqlite_url)
    sa_ = FencedStorage(sqlite_url, a)
    (cs_a,) = open_sweep(spec, sqlite_url, storage=sa_, held=a)
    running = cs_a.study.ask(distributions(spec.search))
    _as_if_remote(sqlite_url, "fenced")
    b = HeldLease(acquire("fenced", sqlite_url, takeover=True), sqlite_url)
    delete_sweep("fenced", sqlite_url, held=b)
    with pytest.raises(LeaseLost):
        running.set_user_attr("runs", [])
    assert a.lost.is_set() and "taken over" in a.why
    sa_.close()
    release(b.lease, sqlite_url)


@pytest.mark.postgres
def test_an_ask_and_a_read_wait_out_a_short_database_outage(
    postgres_url: str, sweep_name: str
) -> None:
    """A cluster audit: an ask (and any read of the trials) during a 25 s outage crashed the
    driver at once, StorageInternalError: the calls Optuna's cache makes were not retried."""
    from sweeper.study.lease import HeldLease
    from sweeper.study.space import distributions
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import FencedStorage, open_sweep

    spec = parse_study_toml(FENCED.replace('name = "fenced"', f'name = "{sweep_name}"'))
    held = HeldLease(acquire(sweep_name, postgres_url), postgres_url)
    storage = FencedStorage(postgres_url, held)
    (cs,) = open_sweep(spec, postgres_url, storage=storage, held=held)
    cs.study.tell(cs.study.ask(distributions(spec.search)), 3.0)
    for read in (lambda: cs.study.ask(distributions(spec.search)), cs.study.get_trials):
        back = _outage(postgres_url, 2.0)
        t0 = time.monotonic()
        read()
        assert time.monotonic() - t0 > 1.5 and not held.lost.is_set()
        back.join()
    assert [t.state.name for t in cs.study.get_trials()] == ["COMPLETE", "RUNNING"]
    storage.close()
    release(held.lease, postgres_url)

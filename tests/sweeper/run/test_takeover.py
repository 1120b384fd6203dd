"""Takeover that cannot split a sweep, end to end through the CLI and real Ray.

Driver A runs a sweep; ``launch --takeover`` is refused while A is alive on this host; then A is
made to look like a driver on another host (its liveness unknown, as behind a network partition)
and B takes the sweep over. A must write nothing after that (fencing), stop its trials and exit
non-zero within two renewals, leaving no process behind; B completes the sweep with exact counts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa

from sweeper.study import storage as st
from tests.sweeper.run.test_launch import (
    _CLI,
    _count_complete,
    _session_pids,
    _states,
    _studies,
    tiny,
)

TAKEOVER_EXIT_S = 30.0  # two renewals at the 15 s heartbeat


def _complete(url: str, sweep: str) -> int:
    """COMPLETE trials of ``sweep`` so far, read straight from Optuna's tables (0 before they
    exist). Loading the studies through Optuna while the driver writes them could fail on a
    server, and a swallowed failure read as 0 for the whole sweep."""
    if url.startswith("sqlite"):
        return _count_complete(Path(url.removeprefix("sqlite:///")))
    query = sa.text(
        "select count(*) from trials t join studies s on s.study_id = t.study_id "
        "where t.state = 'COMPLETE' and s.study_name like :prefix"
    )
    try:
        with st.get_engine(url).connect() as conn:
            return int(conn.execute(query, {"prefix": f"{sweep}/%"}).scalar_one())
    except sa.exc.ProgrammingError:  # the tables do not exist yet
        return 0


def _epoch(url: str, sweep: str) -> int:
    t = st.leases_table
    with st.get_engine(url).connect() as conn:
        row = conn.execute(sa.select(t.c.epoch).where(t.c.sweep == sweep)).first()
    return 0 if row is None else int(row[0])


def _takeover(url: str, sweep: str, tmp_path: Path) -> dict[str, Any]:
    from sweeper.study.study_toml import study_toml

    spec = tiny(sweep, trials=4, tokens=262144)  # trials long enough to be mid-sweep at takeover
    path = tmp_path / "s.toml"
    path.write_text(study_toml(spec))
    launch = [sys.executable, "-c", _CLI, "launch", str(path), "--no-progress"]
    env = {**os.environ, "SWEEPER_STORAGE": url}
    # A trains one trial at a time, so that it is still mid-sweep when B takes over even on a
    # loaded machine (the refusal below can take minutes there while A goes on)
    a = subprocess.Popen(
        [*launch, "--max-concurrent", "1"], cwd=tmp_path, env=env, start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 240
        while _complete(url, sweep) < 1:
            assert a.poll() is None, a.communicate()[1][-3000:]
            assert time.time() < deadline, "no trial completed in time"
            time.sleep(0.3)
        # 1. a live driver on this host: refused, with its pid, and nothing changes
        refused = subprocess.run(
            [*launch, "--takeover"], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,  # (a refusal takes seconds; a machine under heavy load, minutes)
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert f"pid {a.pid})" in refused.stderr and "alive on this host" in refused.stderr
        assert _epoch(url, sweep) == 1 and a.poll() is None
        # 2. A looks remote (its liveness unknown): --takeover is allowed and must be safe
        with st.transaction(url) as conn:
            t = st.leases_table
            conn.execute(sa.update(t).where(t.c.sweep == sweep).values(host="node-7"))
        b = subprocess.Popen(
            [*launch, "--takeover"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        while _epoch(url, sweep) < 2:
            assert b.poll() is None, b.communicate()[1][-3000:]
            time.sleep(0.05)
        t_taken = time.time()
        taken_at = _complete(url, sweep)
        _, a_err = a.communicate(timeout=120)
        a_exit_s = time.time() - t_taken
        deadline = time.time() + 30
        while _session_pids(a.pid) and time.time() < deadline:
            time.sleep(0.5)
        a_left = _session_pids(a.pid)
        b_out, b_err = b.communicate(timeout=400)
    finally:
        for p in (a, locals().get("b")):
            if p is None:
                continue
            for pid in _session_pids(p.pid):  # only the sessions this test started
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    print(f"takeover: A exited {a_exit_s:.1f} s after B took its lease")
    return {
        "a_rc": a.returncode, "a_err": a_err, "taken_at": taken_at, "a_exit_s": a_exit_s, "a_left": a_left,
        "b_rc": b.returncode, "b_out": b_out, "b_err": b_err, "spec": spec,
    }  # fmt: skip


def _check(res: dict[str, Any], url: str, sweep: str) -> None:
    # (a premise, not the behaviour under test: A had trials left when B took over)
    assert res["taken_at"] < 8, f"A finished all {res['taken_at']} trials before the takeover"
    assert res["a_rc"] == 2, res["a_err"][-3000:]
    assert "was taken over by driver" in res["a_err"] and "stopped its trials" in res["a_err"]
    assert res["a_exit_s"] < TAKEOVER_EXIT_S, res["a_exit_s"]
    assert res["a_left"] == [], "processes of the old driver left behind"
    assert res["b_rc"] == 0, res["b_err"][-3000:]
    for cell, study in _studies(url, sweep).items():
        states = _states(study)
        # exact: the target reached once, every FAIL a trial A left RUNNING and B re-ran
        assert states.get("COMPLETE") == 4, (cell, states)
        assert states.get("RUNNING", 0) == 0 and states.get("WAITING", 0) == 0, (cell, states)
        closed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
        assert all(t.user_attrs.get("closed_by") for t in closed), (cell, states)
        done = [t.params for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert all(t.params in done for t in closed if t.params)
        # nothing A wrote after the takeover: every COMPLETE trial has its runs recorded once
        assert all(
            len(t.user_attrs["runs"]) == 1 for t in study.trials if t.state.name == "COMPLETE"
        )


@pytest.mark.drivers
def test_takeover_race_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'takeover.db'}"
    _check(_takeover(url, "race", tmp_path), url, "race")


@pytest.mark.drivers
@pytest.mark.postgres
def test_takeover_race_postgres(postgres_url: str, sweep_name: str, tmp_path: Path) -> None:
    _check(_takeover(postgres_url, sweep_name, tmp_path), postgres_url, sweep_name)


def test_a_tell_on_a_trial_another_process_closed_is_dropped_not_hung(sqlite_url: str) -> None:
    """The searcher (no Ray) holds the lease; someone else closes one of its RUNNING trials: the
    tell is refused, the point dropped with a warning, and the sweep goes on to its target. Once
    the lease is taken, the searcher writes nothing more and says FINISHED."""
    from ray.tune.search import Searcher

    from sweeper.run.searcher import CellSearcher
    from sweeper.study.lease import HeldLease, acquire
    from sweeper.study.sweep import FencedStorage, open_sweep

    spec = tiny("closed", trials=2)
    held = HeldLease(acquire("closed", sqlite_url), sqlite_url)
    storage = FencedStorage(sqlite_url, held)
    css = open_sweep(spec, sqlite_url, storage=storage, held=held)
    s = CellSearcher(spec, css, max_concurrent=1, base_config={}, held=held)
    cfg = s.suggest("r0")
    assert cfg is not None
    other = optuna.load_study(study_name=f"closed/{cfg['cell']}", storage=sqlite_url)
    other.tell(cfg["trial_number"], state=optuna.trial.TrialState.FAIL)  # closed elsewhere
    final = {"final": True, "loss": 3.0, "val_loss": 3.0, "diverged": False, "tokens": 16384}
    final.update(wall_s=1.0, tokens_per_s=1e4)
    s.on_trial_complete("r0", result=final)
    assert s.refused == 1 and not s.lost and not s.points
    # the sweep goes on: every cell reaches its target
    i = 1
    while (c := s.suggest(f"r{i}")) not in (None, Searcher.FINISHED):
        s.on_trial_complete(f"r{i}", result=final)
        i += 1
    assert c == Searcher.FINISHED
    assert all(_states(st_) == {"COMPLETE": 2, "FAIL": 1} or _states(st_) == {"COMPLETE": 2}
               for st_ in _studies(sqlite_url, "closed").values())  # fmt: skip
    # now the lease is taken: the next write is refused, the lease marked lost, nothing written
    with st.transaction(sqlite_url) as conn:
        t = st.leases_table
        conn.execute(sa.update(t).where(t.c.sweep == "closed").values(epoch=t.c.epoch + 1))
    grow = tiny("closed", trials=3)
    s2 = CellSearcher(grow, css, max_concurrent=1, base_config={}, held=held)
    before = sum(len(x.trials) for x in _studies(sqlite_url, "closed").values())
    assert s2.suggest("r99") == Searcher.FINISHED and held.lost.is_set()
    assert sum(len(x.trials) for x in _studies(sqlite_url, "closed").values()) == before
    storage.close()

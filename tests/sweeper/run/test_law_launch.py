"""The law sampler end to end through real Ray Tune and Optuna: a tiny ladder runs exactly its
budget of planned runs, a relaunch adds nothing, and a SIGKILLed driver's plan is resumed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from sweeper.study.spec import StudySpec, law_lrs, parse_study_toml

LAW = """\
[sweep]
name = "{name}"

[model]
context = 32

[ladder]
widths = [16, 32]
depths = [1]
tokens = [{tokens}]

[search]
lr = {{ low = 2e-3, high = 4.0, log = true }}
batch_size = 8

[sampler]
kind = "law"
seed = 0
budget_runs = {budget}

[resources]
max_failures = 1
"""

_CLI = "import sys, sweeper.cli as c; raise SystemExit(c.main(sys.argv[1:]))"


def law(name: str, *, budget: int, tokens: int = 16384) -> StudySpec:
    return parse_study_toml(LAW.format(name=name, budget=budget, tokens=tokens))


def _studies(url: str, sweep: str) -> dict[str, optuna.Study]:
    names = [s for s in optuna.get_all_study_names(url) if s.startswith(f"{sweep}/")]
    return {n.split("/", 1)[1]: optuna.load_study(study_name=n, storage=url) for n in names}


def _runs(url: str, sweep: str) -> list[tuple[str, float, int]]:
    """(cell, lr, seed) of every run of the COMPLETE trials."""
    out = []
    for cell, study in _studies(url, sweep).items():
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            out += [(cell, float(t.params["lr"]), int(r["seed"])) for r in t.user_attrs["runs"]]
    return out


def _states(url: str, sweep: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for study in _studies(url, sweep).values():
        for t in study.get_trials(deepcopy=False):
            out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


def test_law_launch_runs_its_budget_and_a_relaunch_adds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweeper.fitting import allocation
    from sweeper.run import launch
    from sweeper.run.launch import launch_study
    from sweeper.study.sweep_runs import load_sweep_runs

    spec = law("law", budget=8)
    url = f"sqlite:///{tmp_path / 'law.db'}"
    summary = launch_study(spec, url=url, progress=False)
    assert summary.runs_this_launch == 8 and summary.points_this_launch == 8
    assert summary.done and summary.plan_stop  # the plan ended: the cells' counts are only caps
    assert _states(url, "law") == {"COMPLETE": 8}
    runs = _runs(url, "law")
    grid = law_lrs(spec.search)
    assert all(any(abs(lr / g - 1) < 1e-9 for g in grid) for _, lr, _ in runs)
    assert len(set(runs)) == len(runs)  # no (cell, lr, seed) twice
    # every cell was started with 3 LRs (the planner's start)
    for cell in {c for c, _, _ in runs}:
        assert len({lr for c, lr, _ in runs if c == cell}) >= 3
    # the stored runs say the plan is over
    table = load_sweep_runs("law", url)
    cells = allocation.cells_from_runs(table, grid)
    assert allocation.plan(table, cells, budget_runs=8).stop.startswith("budget reached")

    def no_ray(*a: object, **k: object) -> bool:
        raise AssertionError("a finished law study started Ray")

    with monkeypatch.context() as m:
        m.setattr(launch, "_start_ray", no_ray)
        again = launch_study(spec, url=url, progress=False)
    assert again.runs_this_launch == 0 and again.points_this_launch == 0
    assert again.done and again.plan_stop.startswith("budget reached")
    assert _states(url, "law") == {"COMPLETE": 8}
    # raising the budget grows the sweep (same hash), by exactly the difference
    more = launch_study(law("law", budget=10), url=url, progress=False)
    assert more.runs_this_launch == 2 and _states(url, "law") == {"COMPLETE": 10}
    assert len(set(_runs(url, "law"))) == 10


def _count_complete(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return int(
                conn.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
            )
    except sqlite3.OperationalError:
        return 0


def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,sid=,stat="], capture_output=True, text=True
    ).stdout
    pids = []
    for line in out.splitlines():
        pid, s, stat = line.split()[:3]
        if int(s) == sid and not stat.startswith("Z"):
            pids.append(int(pid))
    return pids


def test_law_sigkill_part_way_then_relaunch_resumes_the_plan(tmp_path: Path) -> None:
    from sweeper.run.launch import launch_study
    from sweeper.study.study_toml import study_toml

    spec = law("killed", budget=10, tokens=65536)
    path = tmp_path / "killed.toml"
    path.write_text(study_toml(spec))
    db = tmp_path / "k.db"
    url = f"sqlite:///{db}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, "launch", str(path), "--storage", url, "--no-progress"],
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 240
        while _count_complete(db) < 3:
            assert proc.poll() is None, "the launch ended before it could be killed"
            assert time.time() < deadline, "no trial completed in time"
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.time() + 30
        while _session_pids(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
    finally:
        for pid in _session_pids(proc.pid):  # only the processes of the session this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    before = _states(url, "killed")
    killed = before.get("RUNNING", 0)
    assert before.get("COMPLETE", 0) >= 3
    summary = launch_study(spec, url=url, progress=False)
    assert summary.reconciled == killed
    after = _states(url, "killed")
    assert after.get("COMPLETE") == 10, after
    assert after.get("RUNNING", 0) == 0 and after.get("WAITING", 0) == 0
    # the trials the dead driver left RUNNING, beside any FAIL it wrote (its point queued first)
    assert after.get("FAIL", 0) == before.get("FAIL", 0) + killed
    runs = _runs(url, "killed")
    assert len(runs) == 10 and len(set(runs)) == 10  # nothing lost, nothing duplicated
    for study in _studies(url, "killed").values():  # every point a dead driver left ran again
        failed = [t.params for t in study.trials if t.state == TrialState.FAIL and t.params]
        done = [t.params for t in study.trials if t.state == TrialState.COMPLETE]
        assert all(p in done for p in failed)

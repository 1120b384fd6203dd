"""The law sampler end to end through real Ray Tune and Optuna: a tiny ladder runs exactly its
budget of planned runs, a relaunch adds nothing, and a SIGKILLed driver's plan is resumed."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from sweeper.study.spec import StudySpec, law_lrs, parse_study_toml
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)
from tests.sweeper.run.fake_tune import drive, open_searcher
from tests.sweeper.run.test_launch import _launch_until, _session_pids

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


def test_law_point_that_fails_is_queued_before_its_fail_is_told_then_runs(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan counts only finished runs, so a failed point must be queued, or the plan may move
    on and lose it; queued before the FAIL is written, so no crash between the two loses it."""
    from sweeper.run import points as points_mod  # (where a finished point is told)

    spec = law("lawfail", budget=6)
    searcher = open_searcher(spec, sqlite_url, max_concurrent=1)
    first = searcher.suggest("first")
    lr = first["params"]["lr"]
    seen_at_fail: list[list[float]] = []
    tell = points_mod._tell

    def spy(study: optuna.Study, trial: optuna.Trial, *a: Any, **k: Any) -> None:
        if k.get("state") == TrialState.FAIL:
            waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            seen_at_fail.append([t.system_attrs["fixed_params"]["lr"] for t in waiting])
        tell(study, trial, *a, **k)

    monkeypatch.setattr(points_mod, "_tell", spy)
    searcher.on_trial_complete("first", error=True)
    assert seen_at_fail == [[lr]]  # queued already when the FAIL was written
    again = searcher.suggest("again")
    assert again["params"]["lr"] == lr and again["seed"] == first["seed"]
    loss = 3.0 + lr
    result = {"final": True, "loss": loss, "val_loss": loss, "diverged": False, "tokens": 16384}
    searcher.on_trial_complete("again", result={**result, "wall_s": 1.0, "tokens_per_s": 1e4})
    drive(searcher)
    runs = [
        (cell, t.params["lr"], r["seed"])
        for cell, study in _studies(sqlite_url, "lawfail").items()
        for t in study.trials
        if t.state == TrialState.COMPLETE
        for r in t.user_attrs["runs"]
    ]
    assert len(runs) == 6 and len(set(runs)) == 6  # the budget, nothing run twice
    assert lr in {r[1] for r in runs}


@pytest.mark.drivers
def test_law_sigkill_part_way_then_relaunch_resumes_the_plan(tmp_path: Path) -> None:
    from sweeper.run.launch import launch_study
    from sweeper.study.study_toml import study_toml

    spec = law("killed", budget=10, tokens=65536)
    path = tmp_path / "killed.toml"
    path.write_text(study_toml(spec))
    db = tmp_path / "k.db"
    url = f"sqlite:///{db}"
    proc = _launch_until(path, db, 3, wait_s=240)
    try:
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
        # (a FAIL trial holds the params written before the kill: the driver may die between
        # lr's suggest and batch_size's, and the point queued again is the whole planned one)
        failed = [t.params for t in study.trials if t.state == TrialState.FAIL and t.params]
        done = [t.params for t in study.trials if t.state == TrialState.COMPLETE]
        assert all(any(p.items() <= d.items() for d in done) for p in failed), (failed, done)


def test_a_law_point_that_fails_in_the_studys_code_is_neither_asked_nor_planned_again(
    sqlite_url: str,
) -> None:
    """A point whose run failed in the study's code (a seeded run raises it again) is held for
    the next launch: not queued in this one, and pending to the plan, which would plan it again."""
    from sweeper.study.samplers import HELD

    spec = law("lawheld", budget=6)
    searcher = open_searcher(spec, sqlite_url, max_concurrent=1)
    from sweeper.run.trainable import USER_ERROR

    first = searcher.suggest("first")
    bad = (first["cell"], first["params"]["lr"])
    ended = {"final": True, "loss": float("nan"), USER_ERROR: "f: ValueError: boom\n"}
    searcher.on_trial_complete("first", result=ended)
    runs = drive(searcher, user_error=lambda c: (c["cell"], c["params"]["lr"]) == bad)
    assert bad not in [(r["cell"], r["params"]["lr"]) for r in runs]
    held = [s.user_attrs.get(HELD) for s in _studies(sqlite_url, "lawheld").values()]
    assert [{"lr": bad[1], "batch_size": 8}] in held


def test_law_status_counts_runs_against_the_budget_and_keeps_the_plans_stop(
    sqlite_url: str, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A law study's cells have no target of their own (each showed the whole budget as its
    target: "3/6"): they show their runs, and the sweep its runs used of budget_runs and why its
    plan stopped, kept with the sweep (only the launch itself printed it)."""
    from sweeper.run import launch
    from sweeper.run.launch import launch_study
    from sweeper.run.progress import Progress
    from sweeper.study.sweep import sweep_status

    spec = law("lawstat", budget=6)
    searcher = open_searcher(spec, sqlite_url)
    drive(searcher)
    names = [c.cs.cell.name for c in searcher.cells]
    progress = Progress(spec.name, names, live=False)
    line = progress._line(searcher, 0)
    assert "3 runs done" in line and "6 of 6 runs used" in line and "/6" not in line
    # off a terminal a cell's line is printed when it changes, not once per finished seed (a
    # 3-seed transfer check's log showed every line three times)
    printed: list[str] = []
    progress.console.print = lambda text, **_: printed.append(text)  # type: ignore[method-assign]
    for _ in range(3):
        progress.update(searcher, 0)
    assert printed == [line]

    def no_ray(*a: object, **k: object) -> bool:
        raise AssertionError("a finished law study started Ray")

    monkeypatch.setattr(launch, "_start_ray", no_ray)
    summary = launch_study(spec, url=sqlite_url, progress=False)  # the plan has ended
    assert summary.plan_stop.startswith("budget reached") and summary.runs_used == 6
    status = sweep_status("lawstat", sqlite_url)
    assert status["law"] == {"budget_runs": 6, "runs_used": 6, "stop": summary.plan_stop}
    assert [(c["runs"], c["target"]) for c in status["cells"]] == [(3, None), (3, None)]
    code, out, _ = cli("status", "lawstat", "--storage", sqlite_url)
    assert code == 0 and "3 runs;" in out and "3/" not in out
    assert f"law sampler: 6 of 6 runs used; its plan stopped: {summary.plan_stop}" in out
    code, out, _ = cli("status", "lawstat", "--storage", sqlite_url, "--json")
    assert json.loads(out)["law"]["stop"] == summary.plan_stop

    # a relaunch with a larger budget clears the stop before it runs (it no longer holds)
    def stop_before_tune(*a: object, **k: object) -> None:
        raise RuntimeError("stopped before Tune")

    monkeypatch.setattr(launch, "_run_tune", stop_before_tune)
    with pytest.raises(RuntimeError, match="before Tune"):
        launch_study(law("lawstat", budget=8), url=sqlite_url, progress=False)
    assert sweep_status("lawstat", sqlite_url)["law"] == {
        "budget_runs": 8,
        "runs_used": 6,
        "stop": "",
    }


def test_law_launch_says_runs_of_the_budget_not_cells_short_of_a_target(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupted (or failing) law launch said "2 cell(s) short of their target" and showed
    every cell against the whole budget ("1/12")."""
    from sweeper import api
    from sweeper.run.launch import LaunchSummary
    from sweeper.study.sweep import CellCounts

    counts = {"running": 0, "failed": 0, "pruned": 0, "waiting": 0, "target": 12}
    best = {"best_loss": None, "best_lr": None, "best_batch_size": None}
    cells = tuple(CellCounts(f"c{i}", complete=1, **counts, **best, runs=1) for i in range(2))
    summary = LaunchSummary(
        sweep="lawsum", url="", cells=cells, wall_s=1.0, runs_this_launch=2,
        points_this_launch=2, reconciled=0, max_concurrent=1, interrupted="SIGINT",
        budget_runs=12,
    )  # fmt: skip
    path = tmp_path / "law.toml"
    path.write_text(LAW.format(name="lawsum", budget=12, tokens=16384))
    monkeypatch.setattr(api, "launch", lambda *a, **k: summary)
    code, out, err = cli("launch", path, "--no-progress")
    assert code == 130 and "1 run;" in out and "/12" not in out
    assert "law sampler: 2 of 12 runs used" in out
    assert "short of their target" not in err and "plan has not ended: 2 of 12 runs used" in err
    monkeypatch.setattr(api, "launch", lambda *a, **k: replace(summary, interrupted=""))
    code, out, err = cli("launch", path, "--no-progress")
    assert code == 1 and "short of their target" not in err
    assert "the law sampler's plan has not ended after failed runs: 2 of 12" in err


def test_a_changed_law_study_is_told_what_a_law_study_may_change(sqlite_url: str) -> None:
    """The refusal offered a grid study's growth ("more trials_per_cell"), a key the law
    sampler refuses."""
    from sweeper.errors import StorageError
    from sweeper.study.spec import TargetSpec
    from sweeper.study.sweep import open_sweep

    spec = law("lawchg", budget=6)
    open_sweep(spec, sqlite_url)[0].study.enqueue_trial({"lr": 0.016, "batch_size": 8})
    with pytest.raises(StorageError, match="different study file") as e:
        open_sweep(replace(spec, target=TargetSpec(params=1e7)), sqlite_url)
    text = str(e.value)
    assert "trials_per_cell" not in text and "sampler.budget_runs" in text
    assert "stop_lr_interval_ratio" in text and "[target] is fixed once launched" in text


def _two_seeds(spec: StudySpec) -> StudySpec:
    return replace(spec, sweep=replace(spec.sweep, seeds_per_point=2))


def test_law_with_two_seeds_says_its_budget_in_whole_points_and_logs_why_each_point(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With 2 seeds a point and budget_runs = 19, the stop read "18 of 19 runs used; its plan
    stopped: budget reached: 18 runs of 18"; and why each point was chosen was nowhere (now one
    INFO line per point planned, as ``sweeper -v launch`` shows, with the planner's rule)."""
    from sweeper.study.sweep import law_progress

    spec = _two_seeds(law("lawwhole", budget=13))
    searcher = open_searcher(spec, sqlite_url)
    with caplog.at_level(logging.INFO, logger="sweeper.run.law_plan"):
        drive(searcher, budget=100)
    assert searcher.points_told == 6 and len(_runs(sqlite_url, "lawwhole")) == 12
    assert searcher.law_stop.startswith(
        "budget reached: 12 runs of 13 (spent in whole points of 2 runs: the next would make 14);"
    )
    assert law_progress(12, 13, searcher.law_stop).startswith(
        "law sampler: 12 of 13 runs used; its plan stopped: budget reached: 12 runs of 13 ("
    )
    planned = [r.getMessage() for r in caplog.records if "the law sampler plans" in r.message]
    assert len(planned) == 6 and len(set(planned)) == 6  # one line a point, none twice
    assert all(m.split("): ", 1)[1].startswith("start: ") for m in planned)  # the cells' starts


def test_a_law_study_uses_at_most_its_cap_and_says_why_no_candidate_is_left(
    sqlite_url: str,
) -> None:
    """The most a law study can use is cells x LRs x the runs one (cell, LR) takes (with 2 seeds a
    point: 4); its plan then stops with no candidate left, saying why (here the fake loss grows
    with the LR: the best LR is the lowest of the list in every cell)."""
    from sweeper.study.spec import law_cap_runs, law_lr_runs

    text = LAW.format(name="lawcap", budget=1000, tokens=16384).replace(
        "lr = { low = 2e-3, high = 4.0, log = true }", "lr = { values = [0.01, 0.02, 0.04] }"
    )
    spec = _two_seeds(parse_study_toml(text))
    assert law_lr_runs(spec) == 4 and law_cap_runs(spec) == 2 * 3 * 4
    searcher = open_searcher(spec, sqlite_url)
    drive(searcher, budget=200)
    runs = _runs(sqlite_url, "lawcap")
    assert len(runs) == law_cap_runs(spec)
    stop = searcher.law_stop
    assert stop.startswith("no candidate left: every (cell, LR) has 3 runs or more (6)"), stop
    cells = sorted({c for c, _, _ in runs})
    assert f"edge of the LR list in {cells[0]} (lowest), {cells[1]} (lowest)" in stop or (
        f"edge of the LR list in {cells[1]} (lowest), {cells[0]} (lowest)" in stop
    )


def test_a_budget_lowered_below_the_runs_used_says_nothing_is_left(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lowering budget_runs on a relaunch below the runs already used left "15 of 10 runs used"
    and nothing more."""
    from sweeper.run import launch
    from sweeper.run.launch import launch_study
    from sweeper.study.sweep import law_progress

    drive(open_searcher(law("lawlow", budget=8), sqlite_url))

    def no_ray(*a: object, **k: object) -> bool:
        raise AssertionError("a finished law study started Ray")

    monkeypatch.setattr(launch, "_start_ray", no_ray)
    summary = launch_study(law("lawlow", budget=6), url=sqlite_url, progress=False)
    assert summary.runs_used == 8 and summary.done and summary.runs_this_launch == 0
    assert summary.plan_stop.startswith(
        "budget reached: budget_runs 6 is below the 8 runs already used, so nothing is left to run;"
    )
    assert summary.plan_stop.endswith(": raise budget_runs to go on")
    assert "law sampler: 8 of 6 runs used; its plan stopped: budget reached: budget_runs 6 is " in (
        law_progress(summary.runs_used, summary.budget_runs, summary.plan_stop)
    )


def test_a_budget_lowered_below_every_cells_runs_still_says_why(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the lowered budget is at or below every cell's runs, the launch had ended on the
    grid's rule ('every cell has its 6 trials') and said only '14 of 6 runs used'. Each trial
    carries why the plan chose it (``law_reason``)."""
    from sweeper.run import launch
    from sweeper.run.launch import launch_study

    drive(open_searcher(law("lawlower", budget=14), sqlite_url))
    counts = _states(sqlite_url, "lawlower")
    reasons = [
        t.user_attrs.get("law_reason", "")
        for s in _studies(sqlite_url, "lawlower").values()
        for t in s.get_trials(deepcopy=False)
    ]
    assert reasons and all(r.split(":")[0] in ("start", "bracket", "confirm", "information",
                                                 "explore") for r in reasons), reasons  # fmt: skip
    from sweeper.study.sweep_runs import load_sweep_runs

    assert load_sweep_runs("lawlower", sqlite_url)["law_reason"].notna().all()
    monkeypatch.setattr(launch, "_start_ray", lambda *a, **k: pytest.fail("started Ray"))
    summary = launch_study(law("lawlower", budget=6), url=sqlite_url, progress=False)
    assert summary.runs_this_launch == 0, counts
    assert "budget_runs 6 is below the 14 runs already used" in summary.plan_stop, (
        counts, summary.plan_stop
    )  # fmt: skip

"""A law-sampler audit's findings on a launch's side of the plan: the default [target] moved
silently when a relaunch extended the ladder, and a point a killed driver left lost why the plan
chose it (``law_reason``) when it was queued again. Driven without Ray (tests/sweeper/run/
fake_tune.py)."""

from __future__ import annotations

import logging
from dataclasses import replace

import optuna
import pytest
from optuna.trial import TrialState

from sweeper.study.spec import StudySpec, TargetSpec, parse_study_toml
from tests.sweeper.run.fake_tune import drive, open_searcher

LAW = """\
[sweep]
name = "{name}"

[model]
context = 32

[ladder]
widths = {widths}
depths = [1]
tokens = [16384]

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


def law(name: str, *, budget: int = 8, widths: str = "[16, 32]") -> StudySpec:
    return parse_study_toml(LAW.format(name=name, budget=budget, widths=widths))


def _planner(spec: StudySpec, url: str):  # type: ignore[no-untyped-def]
    from sweeper.run.law_plan import LawPlanner
    from sweeper.study.sweep import open_sweep

    return LawPlanner(spec, open_sweep(spec, url))


def test_the_default_target_stays_where_the_first_launch_put_it(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The default [target] (10x the largest cell's N) followed the ladder when a relaunch
    extended it, although [target] is fixed once launched; now it is recorded with the sweep at
    its first launch, kept by a relaunch (which says what the new ladder would give), and
    recorded on the cells the relaunch adds."""
    from sweeper.run.law_plan import DEFAULT_TARGET, law_target, recorded_target

    first = law("lawtgt")
    searcher = open_searcher(first, sqlite_url)
    drive(searcher)
    target = searcher.planner.target
    scales = {c.cs.cell.name: (c.cs.cell.n_params, c.cs.cell.tokens) for c in searcher.cells}
    assert target == law_target(first, scales)  # the first ladder's default
    grown = law("lawtgt", budget=12, widths="[16, 32, 64]")
    with caplog.at_level(logging.INFO, logger="sweeper.run.law_plan"):
        planner = _planner(grown, sqlite_url)
    assert planner.target == target and planner.default_target == target
    big = max(cs.cell.n_params for cs in planner.studies)
    assert big * 10 > target["n_params"]  # what the grown ladder alone would have given
    said = [r.getMessage() for r in caplog.records if "default target stays" in r.getMessage()]
    assert len(said) == 1 and f"N {10 * big:.4g}" in said[0], said
    assert recorded_target(planner.studies) == target
    assert all(cs.study.user_attrs[DEFAULT_TARGET] == target for cs in planner.studies)
    # and the plan aims at it
    assert planner._plan((), told=-1) is not None


def test_an_explicit_target_equal_to_the_recorded_default_is_the_same_study(
    sqlite_url: str,
) -> None:
    """Writing the default [target] out was refused as a changed study; the check
    (:func:`~sweeper.run.law_plan.same_resolved_target`, for open_sweep's relaunch check) takes
    a [target] that resolves to the recorded default as the same study, ladder grown or not."""
    from sweeper.run.law_plan import same_resolved_target

    spec = law("lawsame")
    recorded = _planner(spec, sqlite_url).default_target
    same = replace(spec, target=TargetSpec(params=recorded["n_params"]))
    both = replace(spec, target=TargetSpec(params=recorded["n_params"], tokens=recorded["tokens"]))
    other = replace(spec, target=TargetSpec(params=2 * recorded["n_params"]))
    assert same_resolved_target(spec, same, recorded)
    assert same_resolved_target(spec, both, recorded)
    assert same_resolved_target(same, spec, recorded)  # and back to the default
    assert not same_resolved_target(spec, other, recorded)
    grown = law("lawsame", budget=12, widths="[16, 32, 64]")
    assert same_resolved_target(spec, replace(grown, target=same.target), recorded)
    # only [target] may differ
    seeded = replace(same, sampler=replace(same.sampler, seed=1))
    assert not same_resolved_target(spec, seeded, recorded)
    # a sweep launched before the record: the stored ladder's default
    assert same_resolved_target(spec, same, None)


def _studies(url: str, sweep: str) -> dict[str, optuna.Study]:
    names = [s for s in optuna.get_all_study_names(url) if s.startswith(f"{sweep}/")]
    return {n.split("/", 1)[1]: optuna.load_study(study_name=n, storage=url) for n in names}


def test_a_point_a_killed_driver_left_keeps_why_it_was_planned(sqlite_url: str) -> None:
    """reconcile queued the point of a trial a killed driver left RUNNING with its finished runs
    only: ``sweeper trials`` then showed no ``law_reason`` for the run that trained it."""
    from sweeper.study.samplers import RUNS_DONE
    from sweeper.study.sweep_runs import load_sweep_runs

    spec = law("lawkill", budget=6)
    searcher = open_searcher(spec, sqlite_url)
    cfg = searcher.suggest("r0")  # planned and asked: RUNNING when the driver dies
    assert cfg is not None
    study = searcher.cells[next(i for i, c in enumerate(searcher.cells)
                                if c.cs.cell.name == cfg["cell"])].cs.study  # fmt: skip
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    assert len(running) == 1
    why, rep = running[0].user_attrs["law_reason"], running[0].user_attrs["law_replicate"]
    assert why.startswith("start: ")
    # a second RUNNING trial with a finished seed (requeued beside the first: it carries runs)
    study.enqueue_trial({"lr": 0.5, "batch_size": 8},
                        user_attrs={"law_reason": "bracket: x", "law_replicate": 0})  # fmt: skip
    t2 = study.ask()
    study._storage.set_trial_user_attr(t2._trial_id, RUNS_DONE, [{"seed": 0, "loss": 3.5}])

    again = open_searcher(spec, sqlite_url)  # the relaunch: reconcile, then plan
    waiting = _studies(sqlite_url, "lawkill")[cfg["cell"]].get_trials(
        deepcopy=False, states=(TrialState.WAITING,)
    )
    attrs = sorted((t.user_attrs.get("law_reason"), t.user_attrs.get("law_replicate"),
                    bool(t.user_attrs.get(RUNS_DONE))) for t in waiting)  # fmt: skip
    assert attrs == sorted([(why, rep, False), ("bracket: x", 0, True)]), attrs
    drive(again)
    table = load_sweep_runs("lawkill", sqlite_url)
    done = table[table["state"] == "COMPLETE"]
    assert len(done) and done["law_reason"].notna().all(), done[["cell", "lr", "law_reason"]]
    assert why in set(done["law_reason"])


def test_a_relaunch_with_the_default_target_written_out_continues_the_sweep(
    sqlite_url: str,
) -> None:
    """open_sweep's relaunch check: the recorded default written out as [target] continues the
    sweep (it had been refused as "launched from a different study file"); another target is
    still refused."""
    from sweeper.errors import StorageError
    from sweeper.study.sweep import open_sweep

    spec = law("lawopen")
    searcher = open_searcher(spec, sqlite_url)
    drive(searcher)
    t = searcher.planner.target
    written = replace(spec, target=TargetSpec(params=t["n_params"], tokens=t["tokens"]))
    assert open_sweep(written, sqlite_url)
    with pytest.raises(StorageError, match="launched from a different study file"):
        open_sweep(replace(spec, target=TargetSpec(params=3 * t["n_params"])), sqlite_url)


def test_a_point_that_crashes_within_a_launch_is_queued_again_with_why(sqlite_url: str) -> None:
    """A run that crashes within a launch queues its point again (tell_point): the queued trial
    keeps why the law planned it, as a point a killed driver left does."""
    spec = law("lawcrash")
    searcher = open_searcher(spec, sqlite_url)
    crashed: list[float] = []

    def crash_once(cfg: dict) -> bool:  # type: ignore[type-arg]
        if crashed:
            return False
        crashed.append(cfg["params"]["lr"])
        return True

    drive(searcher, crash=crash_once)
    trials = [t for s in _studies(sqlite_url, "lawcrash").values() for t in s.trials]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1 and failed[0].user_attrs.get("law_reason")
    again = [t for t in trials if t.state == TrialState.COMPLETE
             and t.params["lr"] == failed[0].params["lr"] and t.number > failed[0].number]
    assert again and again[0].user_attrs.get("law_reason") == failed[0].user_attrs["law_reason"]


def test_the_report_says_how_a_law_sampler_planned_its_runs(sqlite_url: str, tmp_path) -> None:
    """The report of a law-sampler sweep says the target, the runs used of the budget and why
    the plan stopped, as `status` does (an audit's report could not be told from a grid's); a
    grid sweep's report says nothing of the kind."""
    from sweeper.report.build import _planned
    from sweeper.study.handle import Sweep

    spec = law("lawrep")
    searcher = open_searcher(spec, sqlite_url)
    drive(searcher)
    from sweeper.study.sweep import record_law_stop

    record_law_stop("lawrep", sqlite_url, searcher.law_stop)
    t = searcher.planner.target
    line = _planned(Sweep.load("lawrep", sqlite_url))
    assert line.startswith(
        f"Planned toward the target N {t['n_params']:.3g}, D {t['tokens']:.3g}: law sampler: "
    )
    assert f"runs used; its plan stopped: {searcher.law_stop}" in line and searcher.law_stop
    grid = replace(spec, sampler=replace(spec.sampler, kind="grid"))
    assert _planned(replace(Sweep.load("lawrep", sqlite_url), spec=grid)) == ""

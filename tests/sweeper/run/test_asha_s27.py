"""ASHA's audit (s27): a point's second seed was ranked against its own first seed and pruned,
taking the point's fully trained run with it (a cell could end with nothing to fit); a relaunch
after SIGKILL started with empty rungs and decided otherwise than an uninterrupted launch;
settings under which ASHA can never prune validated silently; ``sweeper fit`` did not say that a
cell's missing runs were PRUNED.

Tune's part is played by hand (:func:`_drive`, as ``fake_tune.drive`` does for the searcher),
with the scheduler a launch builds (``launch._tuner``) and loss curves known in advance, so the
keep/stop decisions are deterministic and take seconds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState
from ray.tune.schedulers import ASHAScheduler, TrialScheduler

import sweeper.cli as cli_mod
from sweeper.run.asha import PerCellASHA
from sweeper.study.spec import StudySpec, load_study, parse_study_toml
from sweeper.study.sweep import open_sweep
from tests.sweeper.run.fake_tune import grid_toml, open_searcher

#: the grid study's runs: 16384 tokens / (8 × 32) = 64 steps; with reports = 4, a report every
#: 16 steps (25%, 50%, 75%: on both rungs, 25% and 75%), the final one at step 64
STEPS, EVERY = 64, 16
LRS = (1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2)
ASHA = '\n[pruner]\nkind = "asha"\nreports = 4\n'

Loss = Callable[[float, int, float], float]  # (lr, seed, fraction of the steps) -> loss


def _valley(lr: float, seed: int, frac: float) -> float:
    """Best at 4e-3; a later seed a little worse; the loss falls as the run goes on."""
    return 3.0 + 0.2 * math.log(lr / 4e-3) ** 2 + (1.0 - frac) + 0.01 * seed


def _spec(name: str, *, seeds: int = 1, lrs: tuple[float, ...] = LRS) -> StudySpec:
    text = grid_toml(name, lrs).replace("seeds_per_point = 1", f"seeds_per_point = {seeds}")
    return parse_study_toml(text + ASHA)


def _scheduler(spec: StudySpec, searcher: Any, tmp: Path) -> Any:
    """The scheduler a launch gives Tune (``_tuner``: built, not run)."""
    from sweeper.run.launch import _tuner

    names = [c.cs.cell.name for c in searcher.cells]
    tuner = _tuner(spec, searcher, names, str(tmp))
    return tuner._local_tuner._tune_config.scheduler


def _drive(
    searcher: Any, sched: Any, loss: Loss, *, runs: int = 100, cut_at: float | None = None
) -> list[tuple[float, int, str]]:
    """Play Tune: one run at a time, each reporting every EVERY steps to the scheduler (then, if
    it goes on, to the searcher), ended as the scheduler says; the ``runs``-th run is cut (the
    driver killed) once the scheduler has its report at ``cut_at`` of the steps. Returns (lr,
    seed, how it ended) of every run."""
    from ray.tune.search import Searcher

    out: list[tuple[float, int, str]] = []
    for i in range(200):
        rid = f"r{i}"
        cfg = searcher.suggest(rid)
        if cfg == Searcher.FINISHED:
            return out
        assert cfg is not None, "one run at a time: the searcher must give one"
        lr, seed = float(cfg["params"]["lr"]), int(cfg["seed"])
        trial = SimpleNamespace(trial_id=rid, config=cfg)
        sched.on_trial_add(None, trial)
        how = "final"
        for step in range(EVERY, STEPS, EVERY):
            frac = step / STEPS
            result = {
                "loss": loss(lr, seed, frac),
                "progress": min(99.0, 100.0 * frac),
                "final": False,
                "step": step,
                "tokens_seen": step * 8 * 32,
                "time_total_s": frac,  # (Tune's own field)
            }
            action = sched.on_trial_result(None, trial, result)
            if len(out) + 1 == runs and cut_at is not None and frac >= cut_at:
                out.append((lr, seed, "cut"))
                return out  # the driver is killed: nothing more is told
            if action == TrialScheduler.STOP:
                sched.on_trial_complete(None, trial, result)
                searcher.on_trial_complete(rid, result=result)
                how = f"stopped at {step}"
                break
            searcher.on_trial_result(rid, result)
        if how == "final":
            value = loss(lr, seed, 1.0)
            final = {"final": True, "loss": value, "val_loss": value, "progress": 100.0}
            final.update(
                diverged=False, tokens=STEPS * 8 * 32, steps=STEPS, wall_s=1.0, tokens_per_s=1e4
            )
            assert sched.on_trial_result(None, trial, final) == TrialScheduler.CONTINUE
            sched.on_trial_complete(None, trial, final)
            searcher.on_trial_complete(rid, result=final)
        out.append((lr, seed, how))
        if len(out) == runs:
            return out
    raise AssertionError("the searcher did not finish")


def _outcome(spec: StudySpec, url: str) -> dict[float, tuple[str, float | None]]:
    """Each LR's finished trial: its state and value (a closed FAIL trial left out)."""
    (cs,) = open_sweep(spec, url)
    out: dict[float, tuple[str, float | None]] = {}
    for t in cs.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        lr = float(t.params["lr"])
        assert lr not in out, f"lr {lr} told twice"
        out[lr] = (t.state.name, t.value)
    return out


# ---- 1: only the first seed of a point is ranked ---------------------------------------------
def test_a_points_later_seeds_are_never_pruned_against_its_first(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The audit's a1 study (one cell, 4 LRs, 2 seeds): each point's second seed, a little worse
    than its first, was stopped at the first rung against it, and every point ended PRUNED with
    nothing to fit. Only the first seed takes part in the rungs now."""
    spec = _spec("s27seeds", seeds=2, lrs=(2e-3, 4e-3, 8e-3, 1.6e-2))
    searcher = open_searcher(spec, sqlite_url, max_concurrent=1)
    runs = _drive(searcher, _scheduler(spec, searcher, tmp_path), _valley)
    assert len(runs) >= 5  # every point's first seed, and the second of those not pruned
    stopped = [(lr, seed) for lr, seed, how in runs if how != "final"]
    assert all(seed == 0 for _, seed in stopped), stopped  # sweep.first_seed only
    outcome = _outcome(spec, sqlite_url)
    assert len(outcome) == 4
    complete = {lr for lr, (state, _) in outcome.items() if state == "COMPLETE"}
    assert 4e-3 in complete and len(complete) >= 2, outcome  # the best LR, and a cell to fit
    (cs,) = open_sweep(spec, sqlite_url)
    for t in cs.study.get_trials(deepcopy=False):
        recs = t.user_attrs["runs"]
        if t.state == TrialState.COMPLETE:  # both seeds trained to the end, the mean told
            assert [r["seed"] for r in recs] == [0, 1] and not any(r["stopped"] for r in recs)
            assert t.value == pytest.approx(sum(r["loss"] for r in recs) / 2)
        else:  # PRUNED: its first seed was stopped, its second never started
            assert t.state == TrialState.PRUNED
            assert [(r["seed"], r["stopped"]) for r in recs] == [(0, True)]


def test_a_later_seed_is_not_registered_with_a_rung() -> None:
    """Unit: a run of a later seed is never stopped and leaves nothing in the rungs, however bad;
    ``first_seed`` is the study's (a later one for an earlier sweep's points)."""
    sched = PerCellASHA(["c"], grace=0.25, reduction_factor=3, first_seed=5)
    first = SimpleNamespace(trial_id="a", config={"cell": "c", "seed": 5})
    later = SimpleNamespace(trial_id="b", config={"cell": "c", "seed": 6})
    for t in (first, later):
        sched.on_trial_add(None, t)
    at_25 = {"loss": 3.0, "progress": 25.0, "final": False}
    assert sched.on_trial_result(None, first, at_25) == TrialScheduler.CONTINUE
    worse = {**at_25, "loss": 9.0}
    assert sched.on_trial_result(None, later, worse) == TrialScheduler.CONTINUE
    assert sched.cells["c"].recorded[0] == {"a": 3.0}


def test_a_later_seed_is_stopped_with_its_points_first() -> None:
    """Unit: once a point's first seed is stopped the point is PRUNED, so a later seed of it
    still running is stopped at its next report (it had trained to its end, to be thrown away);
    a later seed of another point goes on."""
    sched = PerCellASHA(["c"], grace=0.25, reduction_factor=3, first_seed=0)

    def run(rid: str, number: int, seed: int) -> SimpleNamespace:
        t = SimpleNamespace(
            trial_id=rid, config={"cell": "c", "seed": seed, "trial_number": number}
        )
        sched.on_trial_add(None, t)
        return t

    best, bad, bad_later, other_later = (
        run("a", 0, 0),
        run("b", 1, 0),
        run("c", 1, 1),
        run("d", 0, 1),
    )
    at_25 = {"loss": 3.0, "progress": 25.0, "final": False}
    assert sched.on_trial_result(None, best, at_25) == TrialScheduler.CONTINUE
    assert sched.on_trial_result(None, bad_later, at_25) == TrialScheduler.CONTINUE  # (before)
    assert sched.on_trial_result(None, bad, {**at_25, "loss": 5.0}) == TrialScheduler.STOP
    at_50 = {**at_25, "progress": 50.0}
    assert sched.on_trial_result(None, bad_later, at_50) == TrialScheduler.STOP
    assert sched.on_trial_result(None, other_later, at_50) == TrialScheduler.CONTINUE
    assert sched.on_trial_result(None, bad_later, {**at_50, "final": True}) == (
        TrialScheduler.CONTINUE
    )  # (a final report ends the run as it is)


# ---- the rule: Ray's ---------------------------------------------------------------------------
@pytest.mark.parametrize(("grace", "rf", "reports"), [(0.25, 3.0, 20), (0.2, 2.0, 10)])
def test_the_rule_decides_as_rays_asha_where_reports_reach_every_rung(
    grace: float, rf: float, reports: int
) -> None:
    """Sweeper's own rule (seedable, unlike Ray's private rungs) keeps Ray 2.60's: the same
    rungs, the same cutoff, the first arrival never stopped; on 40 random runs one at a time,
    every decision is Ray's."""
    rng = random.Random(27)
    ours = PerCellASHA(["c"], grace=grace, reduction_factor=rf)
    ray = ASHAScheduler(
        time_attr="progress",
        metric="loss",
        mode="min",
        max_t=100,
        grace_period=round(100 * grace),
        reduction_factor=rf,
    )
    assert [m for m, _ in reversed(ray._brackets[0]._rungs)] == pytest.approx(
        ours.cells["c"].milestones
    )
    decisions: list[tuple[str, str]] = []
    for i in range(40):
        t = SimpleNamespace(trial_id=f"t{i}", config={"cell": "c", "seed": 0})
        ours.on_trial_add(None, t)
        ray.on_trial_add(None, t)
        start, slope = rng.uniform(3, 6), rng.uniform(0, 2)
        for k in range(1, reports):
            progress = 100.0 * k / reports
            r = {"loss": start - slope * k / reports, "progress": progress, "final": False}
            a, b = ours.on_trial_result(None, t, r), ray.on_trial_result(None, t, r)
            decisions.append((a, b))
            if b == TrialScheduler.STOP:
                break
        else:
            final = {"loss": start - slope, "progress": 100.0, "final": True}
            ours.on_trial_complete(None, t, final)
            ray.on_trial_complete(None, t, final)
    assert all(a == b for a, b in decisions), decisions
    assert sum(b == TrialScheduler.STOP for _, b in decisions) >= 10  # it did prune


# ---- 2: a relaunch after SIGKILL ----------------------------------------------------------------
def _replay(lrs: list[float]) -> list[tuple[float, int, str]]:
    """How the runs of ``lrs``, one at a time in this order, end under one scheduler that saw
    them all: an uninterrupted launch's decisions for that order."""
    sched = PerCellASHA(["c"], grace=0.25, reduction_factor=3.0)
    out: list[tuple[float, int, str]] = []
    for i, lr in enumerate(lrs):
        trial = SimpleNamespace(trial_id=f"u{i}", config={"cell": "c", "seed": 0})
        sched.on_trial_add(None, trial)
        how = "final"
        for step in range(EVERY, STEPS, EVERY):
            r = {"loss": _valley(lr, 0, step / STEPS), "progress": 100.0 * step / STEPS}
            if sched.on_trial_result(None, trial, {**r, "final": False}) == TrialScheduler.STOP:
                sched.on_trial_complete(None, trial, {**r, "final": False})
                how = f"stopped at {step}"
                break
        if how == "final":
            final = {"loss": _valley(lr, 0, 1.0), "progress": 100.0, "final": True}
            sched.on_trial_complete(None, trial, final)
        out.append((lr, 0, how))
    return out


def _killed_then_relaunched(
    spec: StudySpec, url: str, tmp: Path, k: int, *, seeded: bool = True
) -> list[tuple[float, int, str]]:
    """A launch killed during its k-th run (at its report on the first rung), then a relaunch (the
    launch's scheduler, or empty rungs when not ``seeded``): the runs that finished, in order."""
    searcher = open_searcher(spec, url, max_concurrent=1)
    first = _drive(searcher, _scheduler(spec, searcher, tmp), _valley, runs=k, cut_at=0.25)
    assert first[-1][2] == "cut"
    again = open_searcher(spec, url, max_concurrent=1)  # reconcile: the cut point queued again
    names = [c.cs.cell.name for c in again.cells]
    sched = (
        _scheduler(spec, again, tmp)
        if seeded
        else PerCellASHA(names, grace=0.25, reduction_factor=3.0)
    )
    return first[:-1] + _drive(again, sched, _valley)


def test_a_relaunch_after_a_kill_decides_as_an_uninterrupted_launch(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A grid study with one seed, its driver killed mid-run on the first rung, then
    relaunched: the new launch's rungs start from the stored trials, so each run is kept or
    stopped as an uninterrupted launch would have for the same order of runs (a relaunch
    asks the grid's remaining points in another order: Optuna's grid sampler draws them anew).
    Killed during the last run, the order is the uninterrupted launch's own, and so is every
    LR's outcome; fresh rungs never stopped the first run to reach them."""
    ref_spec = _spec("s27ref")
    ref_searcher = open_searcher(ref_spec, sqlite_url, max_concurrent=1)
    ref_runs = _drive(ref_searcher, _scheduler(ref_spec, ref_searcher, tmp_path), _valley)
    reference = _outcome(ref_spec, sqlite_url)
    assert len(ref_runs) == len(LRS) == len(reference)
    assert ref_runs == _replay([lr for lr, _, _ in ref_runs])
    assert ref_runs[-1][2] != "final"  # the last run is stopped: it has a rung to fall at
    for k in range(1, len(LRS) + 1):
        spec = _spec(f"s27kill{k}")
        runs = _killed_then_relaunched(spec, sqlite_url, tmp_path, k)
        assert sorted(lr for lr, _, _ in runs) == sorted(LRS)
        assert runs == _replay([lr for lr, _, _ in runs]), k
        outcome = _outcome(spec, sqlite_url)
        assert {lr for lr, (state, _) in outcome.items() if state == "PRUNED"} == {
            lr for lr, _, how in runs if how != "final"
        }
    # killed during the last run: the uninterrupted launch's order, and its outcome
    assert _outcome(_spec(f"s27kill{len(LRS)}"), sqlite_url) == reference
    naive = _spec("s27naive")
    _killed_then_relaunched(naive, sqlite_url, tmp_path, len(LRS), seeded=False)
    assert _outcome(naive, sqlite_url) != reference  # (what empty rungs did: the test has teeth)


def test_seeding_takes_the_stored_values_by_step(sqlite_url: str) -> None:
    """Unit: a stored COMPLETE trial's intermediate values (by step) land at the rungs their
    progress reaches, and its final loss at the rung its last report did not reach; a PRUNED
    trial's values, without a final one; a FAIL trial's, none."""
    spec = _spec("s27seed")
    (cs,) = open_sweep(spec, sqlite_url)
    study = cs.study
    dists = {
        "lr": optuna.distributions.CategoricalDistribution(list(LRS)),
        "batch_size": optuna.distributions.CategoricalDistribution([8]),
    }
    done = optuna.trial.create_trial(
        params={"lr": 1e-3, "batch_size": 8},
        distributions=dists,
        value=3.1,
        intermediate_values={16: 3.9, 32: 3.6, 48: 3.3},
        user_attrs={"runs": [{"seed": 0, "loss": 3.1}]},
    )
    short = optuna.trial.create_trial(  # a report at 25% only: its final loss goes to 75%
        params={"lr": 2e-3, "batch_size": 8},
        distributions=dists,
        value=3.0,
        intermediate_values={16: 3.8},
        user_attrs={"runs": [{"seed": 0, "loss": 3.0}]},
    )
    pruned = optuna.trial.create_trial(
        params={"lr": 4e-3, "batch_size": 8},
        distributions=dists,
        value=4.5,
        state=TrialState.PRUNED,
        intermediate_values={16: 4.5},
        user_attrs={"runs": [{"seed": 0, "loss": 4.5}]},
    )
    failed = optuna.trial.create_trial(
        params={"lr": 8e-3, "batch_size": 8},
        distributions=dists,
        state=TrialState.FAIL,
        intermediate_values={16: 1.0},
    )
    for t in (done, short, pruned, failed):
        study.add_trial(t)
    sched = PerCellASHA.for_sweep(spec, open_sweep(spec, sqlite_url))
    r25, r75 = sched.cells[cs.cell.name].recorded
    assert sorted(r25.values()) == [3.8, 3.9, 4.5]
    assert sorted(r75.values()) == [3.0, 3.3]


# ---- 3: settings under which ASHA never prunes ----------------------------------------------
@pytest.mark.parametrize(
    ("pruner", "key"),
    [
        ("grace_fraction = 0.75\nreports = 2\n", "pruner.grace_fraction"),
        ("grace_fraction = 0.99\nreports = 20\n", "pruner.grace_fraction"),
        ("grace_fraction = 1.0\n", "pruner.grace_fraction"),
        ("grace_fraction = 0.995\nreports = 1000\n", "pruner.grace_fraction"),
        ("reports = 2\ngrace_fraction = 0.6\n", "pruner.grace_fraction"),
    ],
)
def test_validate_refuses_asha_that_can_never_prune(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pruner: str, key: str
) -> None:
    """The last report before a run's end lands at (reports - 1) / reports of its steps (later
    where reports does not divide them), and at 99% at most: a first rung past it is not
    reached, and nothing is pruned."""
    path = tmp_path / "never.toml"
    path.write_text(grid_toml("never") + '\n[pruner]\nkind = "asha"\n' + pruner)
    assert cli_mod.main(["validate", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"{key}: ASHA could not prune: its first rung" in lines[0]


@pytest.mark.parametrize(
    "pruner",
    [
        "",
        "grace_fraction = 0.5\nreports = 2\n",
        "grace_fraction = 0.95\n",
        "reports = 200\ngrace_fraction = 0.99\n",
    ],
)
def test_asha_settings_that_can_prune_validate(tmp_path: Path, pruner: str) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(grid_toml("ok") + '\n[pruner]\nkind = "asha"\n' + pruner)
    assert load_study(path).pruner.kind == "asha"


# ---- 5: fit names the PRUNED runs -----------------------------------------------------------
def test_too_few_runs_to_fit_names_the_pruned_ones() -> None:
    """ "3 completed runs, fewer than min_runs=4" hid that 3 more were PRUNED by ASHA."""
    from sweeper.fitting import estimate_optima

    rows = [
        {
            "cell": "w16-d1-t41k",
            "n_params": 3120.0,
            "tokens": 40960.0,
            "lr": lr,
            "loss": loss,
            "batch_size": 8,
            "seq_len": 64,
            "state": state,
        }
        for lr, loss, state in [
            (2e-3, 3.2, "COMPLETE"),
            (4e-3, 3.1, "COMPLETE"),
            (8e-3, 3.3, "COMPLETE"),
            (1e-3, 3.9, "PRUNED"),
            (1.6e-2, 3.8, "PRUNED"),
            (3.2e-2, 4.2, "PRUNED"),
        ]
    ]
    (o,) = estimate_optima(pd.DataFrame(rows), n_boot=0)
    assert not o.usable
    assert o.reason == (
        "3 completed runs (3 more PRUNED by ASHA, left out of the fit), fewer than min_runs=4"
    )
    (plain,) = estimate_optima(pd.DataFrame(rows[:3]), n_boot=0)
    assert plain.reason == "3 completed runs, fewer than min_runs=4"


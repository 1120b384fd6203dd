"""An own-function audit's findings: a training function that ignored its token budget or
reported steps as tokens was fitted at the budget in silence (and ASHA never pruned it); a grid
point that ran out of memory was asked twice in a launch while another was never asked; the
function ran on whatever random state the reused Ray worker had left."""

from __future__ import annotations

import logging
import math
import random
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from optuna.trial import TrialState

from proxy_models.train_function import run_function, seed_everything
from sweeper.run.points import CellState, Point, release_deferred, run_record, tell_point
from sweeper.study.samplers import HELD
from sweeper.study.spec import StudySpec
from tests.sweeper.run.fake_tune import drive, grid_study, open_searcher

SHAPE = {"width": 16, "depth": 1, "heads": 1, "head_dim": 16, "vocab_size": 256, "context": 32}
HP = {"lr": 1e-3, "batch_size": 8, "tokens": 16384, "seed": 0, "data": None}  # 64 steps
HERE = "tests.sweeper.run.test_own_function_fixes"


# ---- training functions (cheap: no model, a made-up loss) -------------------------------------
def _steps(hparams: dict[str, Any], shape: dict[str, int]) -> int:
    return int(hparams["tokens"]) // (int(hparams["batch_size"]) * int(shape["context"]))


def five_steps(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, Any]:
    """Ignores the budget: 5 steps, never reports, returns no tokens (the audit's loop)."""
    return {"val_loss": 4.0, "steps": 5}


def steps_as_tokens(
    *, hparams: dict[str, Any], shape: dict[str, int], report: Any
) -> dict[str, Any]:
    """Trains the whole budget but passes the step where report() expects tokens."""
    s = 0
    for s in range(1, _steps(hparams, shape) + 1):
        if report(s, s, 5.0 - 0.01 * s):
            break
    return {"val_loss": 4.0, "steps": s}


def steps_as_tokens_quiet(
    *, hparams: dict[str, Any], shape: dict[str, int], report: Any
) -> dict[str, Any]:
    """As :func:`steps_as_tokens`, returning neither steps nor tokens."""
    steps_as_tokens(hparams=hparams, shape=shape, report=report)
    return {"val_loss": 4.0}


def rises_late(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, Any]:
    """Steps as tokens, and a loss 1.6 above its first from a third of the run on."""
    s = 0
    for s in range(1, _steps(hparams, shape) + 1):
        if report(s, s, 5.0 if s < 20 else 6.6):
            break
    return {"val_loss": 4.0, "steps": s}


def silent(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, Any]:
    """Trains its budget and says so in its result, but never calls report()."""
    return {"val_loss": 4.0, "steps": _steps(hparams, shape), "tokens": hparams["tokens"]}


def near_budget(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, Any]:
    """Stops at 95% of its budget (a loop's own rounding or early stop), tokens right."""
    per_step = hparams["batch_size"] * shape["context"]
    s = 0
    for s in range(1, int(0.95 * _steps(hparams, shape)) + 1):
        report(s, s * per_step, 5.0)
    return {"val_loss": 4.0, "steps": s}


def draws_first(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, Any]:
    """Draws from the global generators before (or without) seeding itself."""
    return {
        "val_loss": 4.0,
        "torch": float(torch.randn(1)),
        "numpy": float(np.random.rand()),
        "random": random.random(),
    }


# ---- finding 1: the tokens trained against the budget -----------------------------------------
def test_a_function_that_ignores_the_budget_keeps_a_tokens_note(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """18 runs were stored COMPLETE with tokens_seen 0 after 5 steps (1,280 of 4,096 tokens) and
    fitted at 4,096, with no word: the run keeps a note (not refused) and the warning names the
    function and the figures."""
    hp = {**HP, "tokens": 4096}
    with caplog.at_level(logging.WARNING):
        r = run_function(five_steps, hparams=hp, shape=SHAPE)
    assert r["tokens"] == 1280 and not r["diverged"]  # 5 steps × 8 × 32, not 0
    note = r["tokens_note"]
    name = f"{five_steps.__module__}:five_steps"  # (as pytest imported this file)
    assert note.startswith(f"train.function '{name}' trained 1,280 tokens (5 steps")
    assert "hparams['tokens'] is 4,096 (31%)" in note and "the steps it returned" in note
    assert note in caplog.text and "\n" not in note


def test_steps_reported_as_tokens_are_noted_and_end_the_lenient_margin() -> None:
    """A loop passing steps to report() stored tokens_seen 64 of 16,384; the note says what its
    steps make. The divergence rule had stayed on its early margin (3 nats) to the end: a loss
    1.6 above its first past a third of the run is now a divergence, as in the built-in loop."""
    # (the steps it returns say it trained its budget: no note, a review's false 62% aside)
    full = run_function(steps_as_tokens, hparams=HP, shape=SHAPE)
    assert full["tokens"] == 16384 and full["tokens_note"] is None
    r = run_function(steps_as_tokens_quiet, hparams=HP, shape=SHAPE)
    assert r["tokens"] == 64 and not r["diverged"]
    assert "trained 64 tokens (the last tokens passed to report())" in r["tokens_note"]
    assert "is 16,384 (0.39%)" in r["tokens_note"]
    assert "64 steps × batch_size 8 × context 32 make 16,384" in r["tokens_note"]
    assert "does it pass steps where report(step, tokens, loss)" in r["tokens_note"]
    bad = run_function(rises_late, hparams=HP, shape=SHAPE)
    assert bad["diverged"] and bad["steps"] < 64 and bad["tokens_note"] is None


def test_a_run_near_its_budget_or_that_says_nothing_keeps_no_note() -> None:
    """A loop may stop a little early; a run that says nothing of its tokens cannot be checked
    (no note without evidence); a stopped run trained less on purpose."""
    assert run_function(near_budget, hparams=HP, shape=SHAPE)["tokens_note"] is None
    assert run_function(silent, hparams=HP, shape=SHAPE)["tokens_note"] is None
    nothing = run_function(lambda hparams, shape, report: {"val_loss": 4.0}, hparams=HP,
                           shape=SHAPE)  # fmt: skip
    assert nothing["tokens_note"] is None and nothing["tokens"] == 0
    stopped = run_function(steps_as_tokens, hparams=HP, shape=SHAPE, report=lambda *a: True)
    assert stopped["stopped"] and stopped["tokens_note"] is None


def _trial_config(function: str, eval_every: int | None) -> dict[str, Any]:
    return {
        "data": "builtin",
        "threads": 1,
        "device": "cpu",
        "eval_batches": 1,
        "eval_every": eval_every,
        "model": {"width": 16, "depth": 1, "head_dim": 16, "context": 32},
        "hparams": {"lr": 1e-3, "batch_size": 8},
        "tokens": 16384,  # 64 steps; with pruner.reports = 4, a checkpoint every 16
        "seed": 0,
        "own": {"function": f"{HERE}:{function}", "settings": {}},
    }


def _sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    from ray import tune as ray_tune

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(ray_tune, "report", lambda m: sent.append(dict(m)))
    return sent


def test_asha_gets_reports_from_a_function_that_reports_steps_as_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its reported tokens never reached a checkpoint: ASHA got nothing and never pruned (the
    correct function pruned 9 of 18). A checkpoint is now reached by the steps or the tokens,
    and never at the end of the run (its final report is the one that counts)."""
    from sweeper.run import trainable

    sent = _sent(monkeypatch)
    trainable.run_trial(_trial_config("steps_as_tokens", eval_every=16))
    assert [m["step"] for m in sent if not m["final"]] == [16, 32, 48]
    final = sent[-1]
    assert final["final"] and final["report_note"] is None and final["tokens_note"] is None
    quiet = _sent(monkeypatch)  # (returning no steps: the note says what its steps make)
    trainable.run_trial(_trial_config("steps_as_tokens_quiet", eval_every=16))
    assert [m["step"] for m in quiet if not m["final"]] == [16, 32, 48]
    assert "16,384" in quiet[-1]["tokens_note"]


def test_asha_without_any_report_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function that never reports cannot be pruned: said in the run's report_note."""
    from sweeper.run import trainable

    sent = _sent(monkeypatch)
    trainable.run_trial(_trial_config("silent", eval_every=16))
    (final,) = sent
    assert final["tokens_note"] is None  # its result says it trained the budget
    note = final["report_note"]
    assert note.startswith(f"train.function '{HERE}:silent' never called report(): ASHA")
    assert "[pruner] kind = 'asha'" in note and "every 16 steps or 4,096 tokens" in note
    sent.clear()
    trainable.run_trial(_trial_config("silent", eval_every=None))  # no ASHA: nothing to say
    assert sent[-1].get("report_note") is None


def test_the_driver_keeps_a_runs_note_and_logs_it_once_per_cell(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Workers' logs reach the driver only with -v: the note is kept in the run's record and as
    the trial's attribute, and the driver says it once per cell."""
    note = "train.function 'm:f' trained 1,280 tokens ... where its budget ... is 16,384 (8%)"
    assert run_record({"final": True, "tokens_note": note}, 0, "r0")["tokens_note"] == note
    assert "tokens_note" not in run_record({"final": True, "tokens_note": None}, 0, "r0")
    spec = _grid("notes")
    with caplog.at_level(logging.WARNING, logger="sweeper.run.points"):
        drive(open_searcher(spec, sqlite_url), extra={"tokens_note": note})
    (study,) = _cell_studies(sqlite_url, "notes")
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(done) == 3 and all(t.user_attrs["tokens_note"] == note for t in done)
    assert all(t.user_attrs["runs"][0]["tokens_note"] == note for t in done)
    assert caplog.text.count(note) == 1


# ---- finding 2: a failed grid point waits behind the points never asked -----------------------
LRS = [3e-3, 1e-2, 3e-2]


def _grid(name: str) -> StudySpec:
    return grid_study(name, LRS)


def _cell_studies(url: str, sweep: str) -> list[optuna.Study]:
    names = [s for s in optuna.get_all_study_names(url) if s.startswith(f"{sweep}/")]
    return [optuna.load_study(study_name=n, storage=url) for n in names]


def test_every_grid_point_is_asked_before_a_failed_one_is_repeated(sqlite_url: str) -> None:
    """Out of memory at every point: the first was queued again at once and asked again, the
    cell's failures then ended it with lr 0.03 never asked (w16: trials 0 and 1 both lr 0.003).
    Each point is asked once; the failed ones wait, queued, for the next launch."""
    from sweeper.study.space import distributions
    from sweeper.study.sweep import open_sweep

    spec = _grid("oom")
    cs = open_sweep(spec, sqlite_url)[0]
    c = CellState.of(cs, spec.trials_per_cell)
    dists = distributions(spec.search)
    asked: list[float] = []
    for i in range(3):
        assert not c.exhausted(spec.trials_per_cell)
        trial = cs.study.ask(dists)
        asked.append(trial.params["lr"])
        p = Point(cell=0, trial=trial, to_start=[], failed=True)  # its retries used up
        assert not tell_point(c, p, requeue=True) or i == 2
        if i < 2:  # held meanwhile (a driver stopped now loses no point), not queued
            assert cs.study.user_attrs[HELD][-1] == dict(trial.params) == c.deferred[-1]
            assert not cs.study.get_trials(states=(TrialState.WAITING,))
    assert c.exhausted(spec.trials_per_cell)  # 3 failures in this launch
    assert sorted(asked) == LRS
    waiting = cs.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    queued = [t.system_attrs["fixed_params"]["lr"] for t in waiting]
    assert queued == asked  # the first failed first
    assert cs.study.user_attrs[HELD] == [] and c.deferred == [] and release_deferred(c) == 0


@pytest.mark.parametrize("concurrent", [1, 2])
def test_a_launch_whose_points_all_run_out_of_memory_asks_each_once(
    sqlite_url: str, concurrent: int
) -> None:
    spec = _grid(f"allfail{concurrent}")
    runs = drive(open_searcher(spec, sqlite_url), crash=lambda cfg: True, concurrent=concurrent)
    lrs = [r["params"]["lr"] for r in runs]
    assert sorted(lrs[:3]) == LRS  # every point asked before one is asked again
    assert len(lrs) == (3 if concurrent == 1 else 4)  # (with 2 live, one retry before the end)
    # the next launch (memory freed) runs each point once, and nothing after
    runs = drive(open_searcher(spec, sqlite_url), concurrent=concurrent)
    assert sorted(r["params"]["lr"] for r in runs) == LRS
    assert drive(open_searcher(spec, sqlite_url)) == []


@pytest.mark.parametrize("concurrent", [1, 2])
def test_a_failed_point_is_asked_again_after_the_points_never_asked(
    sqlite_url: str, concurrent: int
) -> None:
    """Its retry comes in the same launch, but behind the rest of the grid."""
    spec = _grid(f"oncefail{concurrent}")
    first: list[float] = []

    def crash_first(cfg: dict[str, Any]) -> bool:
        first.append(first[0] if first else cfg["params"]["lr"])
        return cfg["params"]["lr"] == first[0] and len(first) == 1

    runs = drive(open_searcher(spec, sqlite_url), crash=crash_first, concurrent=concurrent)
    lrs = [r["params"]["lr"] for r in runs]
    assert sorted(lrs[:3]) == LRS and lrs[3] == lrs[0] and len(lrs) == 4
    (study,) = _cell_studies(sqlite_url, f"oncefail{concurrent}")
    assert sorted(t.params["lr"] for t in study.trials if t.state == TrialState.COMPLETE) == LRS
    assert study.user_attrs[HELD] == []  # asked again here: not held for the next launch


# ---- finding 3: the function runs seeded --------------------------------------------------------
def test_the_function_is_seeded_from_the_trials_seed() -> None:
    """Identical runs gave different losses, depending on what the reused worker ran before."""

    draws = [_draws_after(seed) for seed in (3, 3, 4)]
    assert draws[0] == draws[1] != draws[2]


def _draws_after(seed: int) -> tuple[float, float, float]:
    """What ``draws_first`` draws when run by ``run_function`` with ``seed`` (its result keeps
    only the documented keys, so the draws are caught in a closure)."""
    seen: list[tuple[float, float, float]] = []

    def fn(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, Any]:
        d = draws_first(hparams=hparams, shape=shape, report=report)
        seen.append((d["torch"], d["numpy"], d["random"]))
        return {"val_loss": 4.0}

    torch.randn(11), np.random.rand(2), random.random()  # another trial's draws before
    run_function(fn, hparams={**HP, "seed": seed}, shape=SHAPE)
    return seen[0]


def test_seed_everything_takes_a_seed_beyond_numpys_range() -> None:
    seed_everything(2**40 + 1)  # (numpy's global seed must be below 2**32)
    assert math.isfinite(float(torch.randn(1)))

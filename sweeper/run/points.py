"""What the searcher keeps of a launch: each open point (an Optuna trial and its seeds' runs) and
each cell's counts, and how a finished point is written to its cell's study."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from sweeper.run.trainable import METRIC
from sweeper.study.samplers import RUNS_DONE, hold_point, kept_attrs, requeue_point
from sweeper.study.sweep import CellStudy, cell_counts
from sweeper.study.sweep_runs import aggregate_runs

logger = logging.getLogger(__name__)

__all__ = ["CannotTell", "CellState", "Point", "report_value", "run_record", "tell_point"]


@dataclass
class Point:
    """One Optuna trial being evaluated: its seeds still to start, running, and finished."""

    cell: int
    trial: optuna.Trial
    to_start: list[int]
    live: set[str] = field(default_factory=set)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    failed: bool = False
    #: it failed in the study's own code: a seeded run raises it again, so its point is held for
    #: the next launch (:func:`~sweeper.study.samplers.hold_point`), not asked again in this one
    user_error: bool = False
    pruned: bool = False
    retries: int = 0
    reported: set[int] = field(default_factory=set)  # steps with an intermediate value
    # its first run's seed: the law plan's replicate index, else the study's sweep.first_seed
    first_seed: int = 0


@dataclass
class CellState:
    cs: CellStudy
    finished: int  # COMPLETE + PRUNED in the storage
    complete: int
    pruned: int
    failed: int
    running: int = 0  # Ray trials of this cell alive now
    open_points: int = 0  # asked, not yet told
    failed_now: int = 0  # points that failed in this launch
    requeued_now: list[dict[str, Any]] = field(default_factory=list)  # ... and were queued again
    runs: int = 0  # training runs of the COMPLETE trials (what the law sampler's budget counts)
    grid_spent: bool = False  # grid sampler: every point asked, none queued
    best_loss: float | None = None
    best_lr: float | None = None
    best_batch: int | None = None

    @classmethod
    def of(cls, cs: CellStudy, target: int) -> CellState:
        """The cell as its study stands (a relaunch picks up the counts and the best point)."""
        c = cell_counts(cs.study, target, cs.cell.name)
        return cls(
            cs=cs,
            finished=c.finished,
            complete=c.complete,
            pruned=c.pruned,
            failed=c.failed,
            runs=c.runs,
            best_loss=c.best_loss,
            best_lr=c.best_lr,
            best_batch=c.best_batch_size,
        )

    def exhausted(self, target: int) -> bool:
        """No more points to ask here (target covered by finished + open, or failing)."""
        return (
            self.finished + self.open_points >= target
            or self.failed_now >= target
            or self.grid_spent
        )


def resume_seeds(p: Point) -> int:
    """Take the runs of ``p``'s seeds that finished under the trial a stopped driver left
    (:data:`~sweeper.study.samplers.RUNS_DONE`, queued with the point by ``reconcile``) instead
    of running them again; at least one seed is left to run, so that the point reaches Tune.
    Returns how many were taken."""
    taken = 0
    for rec in p.trial.user_attrs.get(RUNS_DONE) or []:
        seed = int(rec.get("seed", -1))
        if seed in p.to_start and len(p.to_start) > 1:
            p.to_start.remove(seed)
            p.runs[seed] = dict(rec)
            taken += 1
        else:  # its point now starts at other seeds (the law's replicates finished out of order)
            logger.info(
                "trial %d: a finished run of seed %d is not among its seeds %s: run again",
                p.trial.number,
                seed,
                p.to_start,
            )
    return taken


def keep_runs_done(p: Point) -> None:
    """Write the point's finished runs while others are still to run (:func:`resume_seeds`)."""
    if p.to_start or p.live:
        p.trial.set_user_attr(RUNS_DONE, [p.runs[s] for s in sorted(p.runs)])


def report_value(p: Point, seed: int, result: Mapping[str, Any]) -> None:
    """An intermediate validation loss as the Optuna trial's intermediate value (the first
    seed's: Optuna keeps one value per step)."""
    step = int(result.get("step", result.get("training_iteration", 0)))
    value = result.get(METRIC)
    if seed != p.first_seed or step in p.reported or value is None or not math.isfinite(value):
        return
    p.reported.add(step)
    p.trial.report(float(value), step)


def tell_point(c: CellState, p: Point, *, requeue: bool) -> bool:
    """Write the finished point ``p`` to its cell's study: its runs, then FAIL (queued again
    first when ``requeue``), PRUNED, or COMPLETE with the mean loss over its seeds; the cell's
    counts and best point follow. True when a failed point was queued again."""
    runs = [p.runs[s] for s in sorted(p.runs)]
    if runs:
        p.trial.set_user_attr("runs", runs)
        for k, v in aggregate_runs(runs).items():
            p.trial.set_user_attr(k, v)
    study = c.cs.study
    if p.failed:
        # Queued (or held, after failing in the study's code) before the FAIL is told: a driver
        # killed between the two writes leaves the trial RUNNING, which reconcile closes without
        # queueing the point twice.
        # (a point that fails again in this launch is held too: an own-model audit's point that
        # timed out was asked 3 times, 9 runs with Ray's retries, until its cell gave up on
        # failures with its other points never asked)
        params = dict(p.trial.params)
        here = requeue and not p.user_error and params not in c.requeued_now
        if requeue and not here:
            hold_point(study, params)
        again = here and requeue_point(study, params, attrs=kept_attrs(p.trial))
        _tell(study, p.trial, state=TrialState.FAIL)
        c.failed += 1
        c.failed_now += 1
        if again:
            c.requeued_now.append(params)
            c.grid_spent = False
        return again
    if p.pruned:
        _tell(study, p.trial, state=TrialState.PRUNED)
        c.pruned += 1
        c.finished += 1
        return False
    value = sum(float(r["loss"]) for r in runs) / len(runs)
    _tell(study, p.trial, value)
    c.complete += 1
    c.finished += 1
    c.runs += len(runs)
    diverged = any(r.get("diverged") for r in runs)  # (a bound on the range, not a best)
    if not diverged and (c.best_loss is None or value < c.best_loss):
        c.best_loss = value
        c.best_lr = float(p.trial.params["lr"])
        c.best_batch = int(p.trial.params["batch_size"])
    return False


class CannotTell(Exception):
    """Optuna refuses to tell a trial that is no longer RUNNING (closed by another driver)."""


def _tell(study: optuna.Study, trial: optuna.Trial, *args: Any, **kwargs: Any) -> None:
    try:
        study.tell(trial, *args, **kwargs)
    except ValueError as e:
        if "Cannot tell" in str(e):
            raise CannotTell(str(e)) from None
        raise


def run_record(result: Mapping[str, Any], seed: int, ray_id: str) -> dict[str, Any]:
    """The per-seed record kept in the trial's ``runs`` attribute (JSON-safe). ``node_ip`` and
    ``pid``: where Ray ran it (Tune's own fields)."""
    rec: dict[str, Any] = {"seed": seed, "ray_trial_id": ray_id}
    for k in ("node_ip", "pid"):
        if result.get(k) is not None:
            rec[k] = result.get(k)
    if result.get("final"):
        for k in (
            "val_loss",
            "train_loss",
            "init_loss",
            "diverged",
            "stopped",
            "tokens",
            "steps",
            "wall_s",
            "tokens_per_s",
            "flops_per_s",
            "grad_norm_mean",
            "grad_norm_max",
            "device",
        ):
            rec[k] = result.get(k)
        rec["loss"] = result.get("val_loss")
    else:  # stopped by the scheduler: its last intermediate validation loss
        rec.update(
            loss=result.get(METRIC),
            diverged=False,
            stopped=True,
            tokens=result.get("tokens_seen"),
            steps=result.get("step"),
            wall_s=result.get("time_total_s"),
            progress=result.get("progress"),
        )
    return rec

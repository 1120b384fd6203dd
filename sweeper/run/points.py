"""What the searcher keeps of a launch: each open point (an Optuna trial and its seeds' runs) and
each cell's counts, and how a finished point is written to its cell's study.

A grid point whose runs failed (a crash, or an error a retry may cure, after Ray's retries) is
asked again in the launch, but only once every grid point was asked: until then it is held
(:func:`~sweeper.study.samplers.hold_point`, so a driver stopped meanwhile loses none) and kept in
its cell's ``deferred`` list, which :func:`release_deferred` queues when the grid has no point
left to ask."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from sweeper.run.trainable import METRIC
from sweeper.study.samplers import (
    HELD,
    RUNS_DONE,
    grid_points_left,
    hold_point,
    kept_attrs,
    requeue_point,
)
from sweeper.study.sweep import CellStudy, cell_counts
from sweeper.study.sweep_runs import aggregate_runs

logger = logging.getLogger(__name__)

__all__ = [
    "NOTES",
    "CannotTell",
    "CellState",
    "Point",
    "release_deferred",
    "report_value",
    "run_record",
    "tell_point",
]

#: a run's one-line notes that a training function's run may carry (``proxy_models.
#: train_function`` and ``sweeper.run.trainable``): kept in its record and as the trial's
#: user attribute, logged once per cell. ``tokens_note``: it trained more than 10% away from its
#: budget (the fit takes it at the cell's tokens); ``report_note``: ASHA got no report from it
NOTES: tuple[str, ...] = ("tokens_note", "report_note")


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
    #: grid points that failed in this launch while others were still to ask: held, and queued
    #: by :func:`release_deferred` once every grid point was asked
    deferred: list[dict[str, Any]] = field(default_factory=list)
    notes_shown: set[str] = field(default_factory=set)  # NOTES logged for this cell
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
        _notes(c, p, runs)
    study = c.cs.study
    if p.failed:
        # Queued (or held) before the FAIL is told: a driver killed between the two writes
        # leaves the trial RUNNING, which reconcile closes without queueing the point twice.
        again = _requeue_failed(c, p) if requeue else False
        _tell(study, p.trial, state=TrialState.FAIL)
        c.failed += 1
        c.failed_now += 1
        release_deferred(c)
        return again
    if p.pruned:
        _tell(study, p.trial, state=TrialState.PRUNED)
        c.pruned += 1
        c.finished += 1
        release_deferred(c)
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
    release_deferred(c)
    return False


def _requeue_failed(c: CellState, p: Point) -> bool:
    """Queue the failed point ``p`` again, defer it, or hold it for the next launch; True when
    it was queued now. Held: a point that failed in the study's code (a seeded run raises it
    again) or failed already once in this launch (an own-model audit's point that timed out was
    asked 3 times, 9 runs with Ray's retries, until its cell gave up with its other points never
    asked). Deferred (held too) while grid points are still to ask: queued at once, it was asked
    before them, and the cell's failures could end it with a point never asked (an own-function
    audit: an out-of-memory point ran twice, lr 0.03 never)."""
    study = c.cs.study
    params = dict(p.trial.params)
    if p.user_error or params in c.requeued_now:
        hold_point(study, params)
        return False
    if _unasked(study) > 0:
        hold_point(study, params)  # (a driver stopped before its release loses no point)
        if params not in c.deferred:
            c.deferred.append(params)
        return False
    release_deferred(c)  # (those failed first are asked first)
    if not requeue_point(study, params, attrs=kept_attrs(p.trial)):
        return False
    c.requeued_now.append(params)
    c.grid_spent = False
    return True


def _unasked(study: optuna.Study) -> int:
    """Grid points never asked (queued ones aside; 0 for any sampler but the grid)."""
    left = grid_points_left(study)
    if not left:
        return 0
    return left - len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def release_deferred(c: CellState) -> int:
    """Queue the cell's deferred points (:attr:`CellState.deferred`) once no grid point is left
    unasked, and no longer hold them; returns how many were queued. The searcher may call it
    before it finds the grid spent (:func:`tell_point` calls it after each point)."""
    if not c.deferred or _unasked(c.cs.study) > 0:
        return 0
    study = c.cs.study
    queued = [params for params in c.deferred if requeue_point(study, params)]
    held = list(study.user_attrs.get(HELD) or [])  # (queued first: a crash between keeps both)
    study.set_user_attr(HELD, [h for h in held if h not in c.deferred])
    c.requeued_now.extend(queued)
    c.deferred.clear()
    if queued:
        c.grid_spent = False
        logger.info(
            "%s: %d failed point(s) queued again, every grid point asked",
            c.cs.cell.name,
            len(queued),
        )
    return len(queued)


def _notes(c: CellState, p: Point, runs: list[dict[str, Any]]) -> None:
    """Keep a run's :data:`NOTES` as the trial's user attributes (the first seed's that has
    one) and log each kind once per cell (the workers' own logs reach the driver only with -v:
    an own-function audit's runs that trained 1,280 of 4,096 tokens were fitted in silence)."""
    for key in NOTES:
        note = next((r[key] for r in runs if r.get(key)), None)
        if note is None:
            continue
        p.trial.set_user_attr(key, note)
        if key in c.notes_shown:
            continue
        c.notes_shown.add(key)
        logger.warning(
            "%s trial %d: %s (%s on the trial; said once per cell)",
            c.cs.cell.name,
            p.trial.number,
            note,
            key,
        )


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
        rec.update({k: str(result[k]) for k in NOTES if result.get(k)})  # (a function's run)
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

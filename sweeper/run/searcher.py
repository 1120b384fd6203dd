"""The searcher that routes each Ray trial to its cell's Optuna study with ask/tell."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError
from ray.tune.search import Searcher

from sweeper.run.law_plan import LawPlanner, same_lr, waiting
from sweeper.run.points import (
    CannotTell,
    CellState,
    Point,
    keep_runs_done,
    release_deferred,
    report_value,
    resume_seeds,
    run_record,
    tell_point,
)
from sweeper.run.trainable import METRIC, USER_ERROR, trial_config
from sweeper.study.lease import HeldLease, LeaseLost
from sweeper.study.samplers import grid_points_left
from sweeper.study.space import distributions
from sweeper.study.spec import StudySpec
from sweeper.study.sweep import CellStudy

__all__ = ["CellSearcher", "ProgressFn"]

logger = logging.getLogger(__name__)


ProgressFn = Callable[["CellSearcher", int], None]

#: how often (seconds) a launch reads the cluster's capacity again
CAPACITY_EVERY_S = 15.0


class CellSearcher(Searcher):
    """Routes Ray trials to the cells' Optuna studies with ask/tell.

    ``suggest`` picks the cell furthest behind its target (finished + open points, relative), so
    cells progress together and the largest one is not left for the end; it first starts the
    remaining seeds of open points, caps live Ray trials at ``max_concurrent`` and per cell at
    ``max_pending_per_cell`` (default: the concurrency spread over the unfinished cells), and
    returns ``FINISHED`` once every cell has its target or has given up (as many FAIL points in
    this launch as its target: a crash that repeats should not loop forever; relaunch to retry).
    ``on_progress(searcher, cell_index)`` is called after every finished run, and
    ``on_dispatch(searcher, cell_index)`` after every run started (the live table's "running"
    column is the searcher's count: it was redrawn only as runs finished, and said 0 while the
    first ones ran; a launch-UX audit).

    The law sampler (``sampler.kind = "law"``) replaces the choice of cell and point by its plan
    (:class:`~sweeper.run.law_plan.LawPlanner`: the stored COMPLETE trials and the open points,
    pending): the planned point is enqueued in its cell's study and then asked (the cell's
    :class:`~sweeper.study.samplers.PlannedOnlySampler` serves only queued points). Queued points
    (planned before a driver died, queued again by ``reconcile``, or queued again after their run
    failed) are asked before anything is planned, and nothing is planned while one waits. A
    point's training seeds are the planner's replicate indices (``LawPlanner.first_seed``).
    ``suggest`` says FINISHED when the plan stops (budget reached, target-LR interval narrow
    enough, or no candidate left; ``law_stop`` holds why) and nothing is running.

    ``held``: the launch's lease. Every write goes through a fenced storage
    (:class:`~sweeper.study.sweep.FencedStorage`); a write refused because the lease was taken
    over (or made on a trial another driver closed) marks the lease lost and the searcher stops:
    it writes nothing more, and ``suggest`` says FINISHED (the launch's stopper ends the live
    trials). Tune is never handed the exception.
    """

    def __init__(
        self,
        spec: StudySpec,
        cell_studies: list[CellStudy],
        *,
        max_concurrent: int,
        base_config: Mapping[str, Any],
        on_progress: ProgressFn | None = None,
        on_dispatch: ProgressFn | None = None,
        held: HeldLease | None = None,
        capacity: Callable[[], int | None] | None = None,
    ) -> None:
        super().__init__(metric=METRIC, mode="min")
        # the cluster's capacity, read again every CAPACITY_EVERY_S while the launch runs (a
        # node that joins later gets trials); None: max_concurrent was fixed by the user
        self.capacity = capacity
        self.capacity_read = time.monotonic()
        self.held = held
        self.spec = spec
        self.target = spec.trials_per_cell
        self.seeds = spec.sweep.seeds_per_point
        self.max_concurrent = max_concurrent
        self.max_pending = spec.sampler.max_pending_per_cell
        self.dists = distributions(spec.search)
        self.base_config = dict(base_config)
        self.on_progress = on_progress
        self.on_dispatch = on_dispatch
        self.cells = [CellState.of(cs, self.target) for cs in cell_studies]
        self.points: dict[tuple[int, int], Point] = {}
        self.by_ray: dict[str, tuple[tuple[int, int], int]] = {}
        self.failed_runs: dict[str, str] = {}  # Ray trial id -> "cell trial N seed S"
        # (cell, lr) of the points held for the next launch after failing in the study's code:
        # pending to the law plan, which would otherwise plan them again in this launch
        self.held_points: list[tuple[int, float]] = []
        self.errors_shown: set[str] = set()  # first lines of the own code's errors logged whole
        #: the error of a run that crashed for good, by Ray trial id (set by the launch: Ray
        #: writes it before telling the searcher, which is not given it)
        self.error_of: Callable[[str], str] = lambda ray_id: ""
        self.live = 0
        self.runs_done = 0
        self.points_told = 0
        #: the signal that interrupted the launch ("" until one does: sweeper.run.launch)
        self.interrupted = ""
        self.refused = 0  # writes refused after the lease was lost
        self.law = spec.sampler.kind == "law"
        self.law_stop = ""  # why the law sampler's plan stopped ("" while it goes on)
        self.law_gave_up = False  # it stopped on repeated failures, not because the plan ended
        self.planner = LawPlanner(spec, cell_studies) if self.law else None

    # Tune pickles its config (search_alg included) into the experiment folder; the storage is the
    # record and Tuner.restore is never used, so only a stub is pickled.
    def __getstate__(self) -> dict[str, Any]:
        return {"_metric": self._metric, "_mode": self._mode}

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        return None

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    # ---- the lease ----
    @property
    def lost(self) -> bool:
        """The launch stops: its lease was lost, or it was interrupted (``interrupted``: the
        signal). Nothing more is asked, and no stopped run is told: its trial stays RUNNING for
        the next launch to close and run again."""
        return bool(self.interrupted) or self.lease_lost

    @property
    def lease_lost(self) -> bool:
        """The lease was lost: nothing more may be written."""
        return self.held is not None and self.held.lost.is_set()

    def _refused(self, what: str, e: Exception) -> None:
        """A write was refused: the lease was taken over, or the trial was closed by another
        driver. Mark the lease lost when it is no longer ours; otherwise drop the write."""
        self.refused += 1
        if self.held is None:
            raise e
        try:
            ours = not isinstance(e, LeaseLost) and self.held.check()
        except Exception:  # the storage cannot say: keep going, the heartbeat will tell
            ours = True
        if not ours:
            if not self.held.lost.is_set():
                self.held.mark_lost(str(e))
            logger.warning("%s refused: %s", what, self.held.why or e)
            return
        logger.warning("%s refused (the trial was closed by another process): %s", what, e)

    # ---- choosing ----
    def _cell_cap(self) -> int:
        if self.max_pending is not None:
            return self.max_pending
        if self.law:  # the plan chooses the cells
            return self.max_concurrent
        unfinished = sum(1 for c in self.cells if not c.exhausted(self.target)) or 1
        return max(1, math.ceil(self.max_concurrent / unfinished))

    def _follow_capacity(self) -> None:
        if self.capacity is None or time.monotonic() - self.capacity_read < CAPACITY_EVERY_S:
            return
        self.capacity_read = time.monotonic()
        now = self.capacity()
        if now is not None and now >= 1 and now != self.max_concurrent:
            logger.info("the cluster now fits %d trials at once (was %d)", now, self.max_concurrent)
            self.max_concurrent = now

    def suggest(self, trial_id: str) -> dict[str, Any] | None:  # or Searcher.FINISHED
        if self.lost:
            return Searcher.FINISHED  # type: ignore[return-value]
        self._follow_capacity()
        if self.live >= self.max_concurrent:
            return None
        cap = self._cell_cap()
        # 1. remaining seeds of open points, oldest first
        for key, p in self.points.items():
            if p.to_start and self.cells[p.cell].running < cap:
                return self._dispatch(trial_id, key, p)
        if self.law:
            return self._suggest_law(trial_id, cap)
        return self._suggest_grid(trial_id, cap)

    def _suggest_grid(self, trial_id: str, cap: int) -> dict[str, Any] | None:
        """A new point asked of the cell furthest behind its target (grid, TPE, random...)."""
        order = sorted(
            range(len(self.cells)),
            key=lambda i: ((self.cells[i].finished + self.cells[i].open_points) / self.target, i),
        )
        for i in order:
            c = self.cells[i]
            if c.exhausted(self.target) or c.running >= cap:
                continue
            release_deferred(c)  # (failed points wait for the grid's last: queued now if so)
            if grid_points_left(c.cs.study) == 0:
                # asking now would repeat a point (Optuna's grid picks a random visited one)
                c.grid_spent = True
                logger.warning(
                    "%s: every grid point was asked and none is queued, but only %d of %d "
                    "trials finished; not asking a point twice",
                    c.cs.cell.name,
                    c.finished,
                    self.target,
                )
                continue
            # (every attribute is a storage commit: the cell is in the study's name and attributes)
            try:
                trial = c.cs.study.ask(self.dists)
            except (LeaseLost, UpdateFinishedTrialError) as e:
                self._refused(f"{c.cs.cell.name}: ask", e)
                return Searcher.FINISHED if self.lost else None  # type: ignore[return-value]
            key = (i, trial.number)
            first = self.spec.sweep.first_seed
            p = Point(
                cell=i,
                trial=trial,
                to_start=list(range(first, first + self.seeds)),
                first_seed=first,
            )
            self._resume(p)
            self.points[key] = p
            c.open_points += 1
            return self._dispatch(trial_id, key, p)
        if self.live == 0 and not self.points:
            return Searcher.FINISHED  # type: ignore[return-value]  # Tune's "no more trials" string
        return None

    # ---- the law sampler ----
    def _suggest_law(self, trial_id: str, cap: int) -> dict[str, Any] | None:
        """A queued point first, else the plan's next point (see the class docstring)."""
        queued = False
        for i, c in enumerate(self.cells):
            if waiting(c.cs):
                if c.running < cap and c.failed_now < self.target:
                    return self._ask_law(trial_id, i)
                queued = True
        if queued:  # plan nothing while a queued point waits (it would be planned twice)
            return Searcher.FINISHED if self.live == 0 and not self.points else None  # type: ignore[return-value]
        assert self.planner is not None
        open_points = [(p.cell, float(p.trial.params["lr"])) for p in self.points.values()]
        open_points += self.held_points
        plan = self.planner.plan(open_points, told=self.points_told)
        if not plan.points:
            if plan.stop != self.law_stop:
                logger.info("%s: the law sampler stops: %s", self.spec.name, plan.stop)
            self.law_stop = plan.stop
            if self.live == 0 and not self.points:
                return Searcher.FINISHED  # type: ignore[return-value]
            return None
        self.law_stop = ""
        pt = plan.points[0]
        i = next(j for j, c in enumerate(self.cells) if c.cs.cell.name == pt.cell)
        c = self.cells[i]
        if c.failed_now >= self.target:
            self.law_stop = f"{pt.cell}: {c.failed_now} points failed in this launch"
            self.law_gave_up = True
            logger.warning("%s: the law sampler stops: %s", self.spec.name, self.law_stop)
            return Searcher.FINISHED if self.live == 0 and not self.points else None  # type: ignore[return-value]
        if c.running >= cap:
            return None  # the planned cell is busy: wait for a result
        try:
            c.cs.study.enqueue_trial(
                {"lr": pt.lr}, user_attrs={"law_replicate": pt.seed, "law_reason": pt.why}
            )
        except (LeaseLost, UpdateFinishedTrialError) as e:
            self._refused(f"{c.cs.cell.name}: enqueue", e)
            return Searcher.FINISHED if self.lost else None  # type: ignore[return-value]
        return self._ask_law(trial_id, i)

    def _ask_law(self, trial_id: str, i: int) -> dict[str, Any] | None:
        """Ask the cell's oldest queued point and dispatch its first run."""
        c = self.cells[i]
        try:
            trial = c.cs.study.ask(self.dists)
        except (LeaseLost, UpdateFinishedTrialError) as e:
            self._refused(f"{c.cs.cell.name}: ask", e)
            return Searcher.FINISHED if self.lost else None  # type: ignore[return-value]
        lr = float(trial.params["lr"])
        assert self.planner is not None
        open_at_lr = sum(
            p.cell == i and same_lr(p.trial.params.get("lr"), lr) for p in self.points.values()
        )
        first = self.planner.first_seed(i, lr, open_at_lr)
        key = (i, trial.number)
        p = Point(
            cell=i, trial=trial, to_start=list(range(first, first + self.seeds)), first_seed=first
        )
        self._resume(p)
        self.points[key] = p
        c.open_points += 1
        return self._dispatch(trial_id, key, p)

    def _resume(self, p: Point) -> None:
        """Keep a point's seeds that finished before its driver stopped (:func:`resume_seeds`)."""
        taken = resume_seeds(p)
        if taken:
            logger.info(
                "%s trial %d: %d seed(s) finished before the last launch stopped, kept",
                self.cells[p.cell].cs.cell.name,
                p.trial.number,
                taken,
            )

    def _dispatch(self, ray_id: str, key: tuple[int, int], p: Point) -> dict[str, Any]:
        seed = p.to_start.pop(0)
        c = self.cells[p.cell]
        cell = c.cs.cell
        params = dict(p.trial.params)
        p.live.add(ray_id)
        self.by_ray[ray_id] = (key, seed)
        self.live += 1
        c.running += 1
        config = trial_config(self.base_config, self.spec, cell, params, seed=seed)
        if self.on_dispatch is not None:
            self.on_dispatch(self, p.cell)
        return {**config, "trial_number": p.trial.number}

    # ---- results ----
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        entry = self.by_ray.get(trial_id)
        if entry is None or result.get("final") or METRIC not in result or self.lost:
            return
        p = self.points[entry[0]]
        try:
            report_value(p, entry[1], result)
        except (LeaseLost, UpdateFinishedTrialError) as e:
            self._refused(f"trial {p.trial.number}: report", e)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        entry = self.by_ray.pop(trial_id, None)
        if entry is None:
            return
        user_error = str(result.get(USER_ERROR) or "") if result is not None else ""
        error = error or bool(user_error)
        finished = not error and result is not None and bool(result.get("final"))
        if self.lost and not (finished and not self.lease_lost):
            # stopped (lease lost: nothing may be written; interrupted: a run cut short is not
            # told, its trial stays RUNNING); a run that finished is still told when it may be
            self.live -= 1
            return
        key, seed = entry
        p = self.points[key]
        c = self.cells[p.cell]
        p.live.discard(trial_id)
        self.live -= 1
        c.running -= 1
        if error:
            p.failed = True
            p.to_start.clear()
            self.failed_runs[trial_id] = f"{c.cs.cell.name} trial {p.trial.number} seed {seed}"
            if user_error:
                p.user_error = True
                self.held_points.append((p.cell, float(p.trial.params["lr"])))
                self._user_error(p, self.failed_runs[trial_id], user_error)
            else:
                self._crash_error(p, trial_id)
        elif result is None:
            p.to_start.insert(0, seed)  # removed before it started: start it again
            return
        else:
            p.runs[seed] = run_record(result, seed, trial_id)
            if not result.get("final"):
                # Tune does not pass the result that made the scheduler stop the trial to
                # on_trial_result; it is the pruned trial's last intermediate value
                try:
                    report_value(p, seed, result)
                except (LeaseLost, UpdateFinishedTrialError) as e:
                    self._refused(f"trial {p.trial.number}: report", e)
                p.pruned = True
                p.to_start.clear()
            else:
                try:
                    keep_runs_done(p)
                except (LeaseLost, UpdateFinishedTrialError) as e:
                    self._refused(f"trial {p.trial.number}: runs done", e)
        self.runs_done += 1
        if not p.live and not p.to_start and not self.lease_lost:
            try:
                self._tell(key, p)
            except (LeaseLost, UpdateFinishedTrialError, CannotTell) as e:
                self._refused(f"{c.cs.cell.name} trial {p.trial.number}: tell", e)
                if not self.lease_lost:  # closed by someone else: forget it, never hang
                    c.open_points -= 1
                    self.points.pop(key, None)
        if self.on_progress is not None:
            self.on_progress(self, p.cell)

    def note_error(self, ray_id: str, error: str) -> None:
        """A run failed for good (after its retries); its trial is already told FAIL."""
        where = self.failed_runs.get(ray_id, "a trial")
        logger.warning(
            "%s failed after %d retries: %s", where, self.spec.resources.max_failures, error
        )

    def _user_error(self, p: Point, where: str, error: str) -> None:
        """A run ended by an exception from the study's own code (not retried: a seeded run
        raises it again): kept on the trial as ``last_error``; logged with its traceback the
        first time each error is seen in a launch, in one line after that."""
        first, _, trace = error.partition("\n")
        try:
            p.trial.set_user_attr("last_error", first[:500])
        except (LeaseLost, UpdateFinishedTrialError) as e:
            self._refused(f"trial {p.trial.number}: last error", e)
        last = [ln for ln in trace.strip().splitlines() if ln.strip()]
        key = last[-1] if last else first
        whole = key not in self.errors_shown
        self.errors_shown.add(key)
        logger.warning(
            "%s failed: %s (not retried: your code raises it again on the same seed)%s",
            where,
            first,
            f"\n{trace.rstrip()}" if whole and trace.strip() else "",
        )

    def _crash_error(self, p: Point, ray_id: str) -> None:
        """A run that crashed for good keeps its error as ``last_error`` (a retry sets it too,
        but with ``max_failures = 0`` there is none); logged by :meth:`note_error`."""
        error = self.error_of(ray_id)
        if not error:
            return
        try:
            p.trial.set_user_attr("last_error", error)
        except (LeaseLost, UpdateFinishedTrialError) as e:
            self._refused(f"trial {p.trial.number}: last error", e)

    def note_retry(self, ray_id: str, error: str) -> None:
        """Ray restarts a crashed run (``max_failures``): count it on the Optuna trial."""
        entry = self.by_ray.get(ray_id)
        if entry is None or self.lost:
            return
        p = self.points[entry[0]]
        p.retries += 1
        try:
            p.trial.set_user_attr("retries", p.retries)
            p.trial.set_user_attr("last_error", error)
        except (LeaseLost, UpdateFinishedTrialError) as e:
            self._refused(f"trial {p.trial.number}: retry count", e)
            return
        logger.warning(
            "%s trial %d: run crashed, retrying (%s)",
            self.cells[p.cell].cs.cell.name,
            p.trial.number,
            error,
        )

    def _tell(self, key: tuple[int, int], p: Point) -> None:
        c = self.cells[p.cell]
        # A FAIL point is queued again (asked in this launch unless the cell gave up on failures,
        # else at the next): the grid counts it as visited and would never ask it again, and the
        # law plan, which counts only finished runs, could move on and lose it.
        requeue = self.spec.sampler.kind in ("grid", "law")
        if tell_point(c, p, requeue=requeue):
            logger.info(
                "%s trial %d failed; its point is queued again", c.cs.cell.name, p.trial.number
            )
        c.open_points -= 1
        self.points_told += 1
        del self.points[key]

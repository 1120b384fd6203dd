"""ASHA with one bracket per cell: losses of different cells are not comparable.

Sweeper's own small rule (Ray's ``ASHAScheduler`` keeps its rungs in private structures, so a
relaunch could not give it what the stopped launch had recorded):

- the rungs of every cell lie at ``grace_fraction × reduction_factor^k`` of a run's steps
  (k = 0, 1, ... while at most the whole run): 25% and 75% by default;
- a run is ranked at a rung at its first report on or past it (a report past several rungs is
  ranked at the highest of them); it is stopped there when its loss is worse than the best
  ``1 / reduction_factor`` quantile (linear interpolation) of the losses recorded at that rung
  before it, and its loss is recorded there either way. The first run at a rung is never
  stopped, so the decisions depend on the order in which runs reach the rungs (Ray's
  ``_Bracket.on_result`` and ``cutoff`` decide the same way);
- only the first seed of a point (``sweep.first_seed``) is ranked: its other seeds are never
  recorded (ranked against the first seed of their own point, they were pruned and took the
  point's fully trained run with them), and are stopped only when their point's first seed was:
  the point is PRUNED then, and a run of it trained on would be thrown away;
- a run's final loss is recorded at the highest rung it had not reached (a run whose last
  report came before a rung), as Ray does; a run that fails leaves nothing in the rungs.

A relaunch seeds the rungs from the stored COMPLETE and PRUNED trials (:meth:`PerCellASHA.
for_sweep`): their intermediate values (the first seed's, by step) and final losses, ranked as
the rule above ranks them, so a relaunch decides as the uninterrupted launch would have, for the
same order of runs. Not seeded: a point whose first seed had finished while a later seed was still
running when the driver stopped (its trial not yet told; the relaunch runs only the seeds left),
so after such a stop the rungs hold a little less and may prune a little less.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from sweeper.run.trainable import METRIC, PROGRESS_CAP, USER_ERROR, trial_config

if TYPE_CHECKING:
    from sweeper.study.spec import StudySpec
    from sweeper.study.sweep import CellStudy

__all__ = ["PROGRESS_CAP", "PerCellASHA", "cutoff", "rung_milestones"]

logger = logging.getLogger(__name__)


#: progress compared with a rung's milestone with this slack (100 · 3/10 is not 100 · 0.3)
_EPS = 1e-9


def rung_milestones(grace: float, reduction_factor: float) -> list[float]:
    """The rungs, in percent of a run's steps, lowest first: ``100 · grace · rf^k`` up to 100."""
    if not (grace > 0 and reduction_factor > 1):
        raise ValueError(
            f"need grace > 0 and reduction_factor > 1, got {grace}, {reduction_factor}"
        )
    out: list[float] = []
    m = 100.0 * grace
    while m <= 100.0 + _EPS:
        out.append(m)
        m *= reduction_factor
    return out


def cutoff(losses: Sequence[float], reduction_factor: float) -> float | None:
    """The loss above which a run is stopped at a rung holding ``losses``: their
    ``1 / reduction_factor`` quantile, linearly interpolated; None when the rung is empty."""
    xs = sorted(losses)
    if not xs:
        return None
    pos = (len(xs) - 1) / reduction_factor
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class _Cell:
    """One cell's rungs: per rung, the loss recorded by each run ranked there."""

    milestones: list[float]
    recorded: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.recorded = [{} for _ in self.milestones]

    def rung_at(self, progress: float) -> int:
        """The highest rung at or below ``progress`` (-1: none)."""
        return max((i for i, m in enumerate(self.milestones) if progress >= m - _EPS), default=-1)

    def forget(self, key: str) -> None:
        for rec in self.recorded:
            rec.pop(key, None)


class PerCellASHA(FIFOScheduler):
    """One ASHA bracket per cell: losses of different cells are not comparable, so a w16 trial
    must never be stopped because a w64 trial reached a lower loss at the same rung. The rule:
    the module's docstring."""

    def __init__(
        self,
        cell_names: Iterable[str],
        *,
        grace: float,
        reduction_factor: float,
        first_seed: int = 0,
    ) -> None:
        super().__init__()
        self._metric = METRIC
        # decide on every report as it arrives (buffered results would delay the stop)
        self._supports_buffered_results = False
        self.reduction_factor = float(reduction_factor)
        self.first_seed = int(first_seed)
        milestones = rung_milestones(grace, reduction_factor)
        self.cells = {c: _Cell(list(milestones)) for c in cell_names}
        #: the ranked runs alive: Ray trial id -> (cell, the highest rung it was ranked at)
        self._live: dict[str, tuple[str, int]] = {}
        #: the points whose first seed was stopped: (cell, Optuna trial number)
        self._pruned: set[tuple[str, Any]] = set()
        self.stopped = 0

    # ---- the rule ----
    def _rank(
        self, cell: str, key: str, passed: int, progress: float, loss: float
    ) -> tuple[int, bool]:
        """Rank run ``key`` of ``cell`` (ranked up to rung ``passed``) at ``progress``: the rung
        it is ranked at now (``passed`` when none) and whether it is stopped there."""
        c = self.cells[cell]
        i = c.rung_at(progress)
        if i <= passed or not math.isfinite(loss):  # (a non-finite loss is not stored either)
            return passed, False
        limit = cutoff(list(c.recorded[i].values()), self.reduction_factor)
        c.recorded[i][key] = loss
        return i, limit is not None and loss > limit

    def seed(
        self,
        cell: str,
        key: str,
        reports: Iterable[tuple[float, float]],
        final: float | None = None,
    ) -> None:
        """Record a finished run of ``cell`` as the rule would have: its ``(progress, loss)``
        reports in order, then its ``final`` loss (None: the run was stopped)."""
        passed = -1
        for progress, loss in sorted(reports):
            passed, _ = self._rank(cell, key, passed, min(PROGRESS_CAP, progress), loss)
        if final is not None:
            self._rank(cell, key, passed, 100.0, final)

    def ranked(self, trial: Any) -> bool:
        """Whether ``trial`` takes part in the rungs: the first seed of its point."""
        config = trial.config or {}
        return int(config.get("seed", self.first_seed)) == self.first_seed

    # ---- Tune's hooks ----
    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return True

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        if self.ranked(trial):
            self._live[trial.trial_id] = (str(trial.config["cell"]), -1)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        entry = self._live.get(trial.trial_id)
        if result.get("final"):
            return TrialScheduler.CONTINUE  # over: let it end as COMPLETE
        if entry is None:  # not ranked: a later seed, stopped with its point's first
            if _point(trial) in self._pruned:
                self.stopped += 1
                return TrialScheduler.STOP
            return TrialScheduler.CONTINUE
        if "progress" not in result or result.get(METRIC) is None:
            return TrialScheduler.CONTINUE
        cell, passed = entry
        progress = min(PROGRESS_CAP, float(result["progress"]))
        passed, stop = self._rank(cell, trial.trial_id, passed, progress, float(result[METRIC]))
        self._live[trial.trial_id] = (cell, passed)
        if stop:
            self.stopped += 1
            self._pruned.add(_point(trial))
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        if result.get(USER_ERROR):  # the run failed in the study's code: no loss for a rung
            self.on_trial_error(tune_controller, trial)
            return
        entry = self._live.pop(trial.trial_id, None)
        if entry is None or not result.get("final") or result.get(METRIC) is None:
            return  # (a stopped run's last loss is recorded already)
        cell, passed = entry
        self._rank(cell, trial.trial_id, passed, 100.0, float(result[METRIC]))

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self._live.pop(trial.trial_id, None)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        """A failed run (or one Ray restarts) leaves nothing in the rungs: a failed trial is not
        stored as COMPLETE or PRUNED, so a relaunch would not find its values either."""
        entry = self._live.pop(trial.trial_id, None)
        if entry is not None:
            self.cells[entry[0]].forget(trial.trial_id)

    def debug_string(self) -> str:
        lines = [f"PerCellASHA: {self.stopped} stopped"]
        for name, c in self.cells.items():
            rungs = " | ".join(
                f"{m:g}%: {len(r)} run(s), cutoff {cutoff(list(r.values()), self.reduction_factor)}"
                for m, r in zip(c.milestones, c.recorded, strict=True)
            )
            lines.append(f"{name}: {rungs}")
        return "\n".join(lines)

    # ---- a relaunch ----
    @classmethod
    def for_sweep(cls, spec: StudySpec, cell_studies: Sequence[CellStudy]) -> PerCellASHA:
        """The scheduler of a launch of ``spec`` over ``cell_studies``, its rungs seeded from the
        stored COMPLETE and PRUNED trials (a relaunch decides as an uninterrupted launch)."""
        p = spec.pruner
        sched = cls(
            [cs.cell.name for cs in cell_studies],
            grace=p.grace_fraction,
            reduction_factor=p.reduction_factor,
            first_seed=spec.sweep.first_seed,
        )
        for cs in cell_studies:
            n = sched.seed_cell(spec, cs)
            if n:
                logger.info("%s: ASHA's rungs seeded from %d stored trial(s)", cs.cell.name, n)
        return sched

    def seed_cell(self, spec: StudySpec, cs: CellStudy) -> int:
        """Seed the rungs of ``cs``'s cell from its stored COMPLETE and PRUNED trials, in the
        order of their numbers; how many were taken."""
        from optuna.trial import TrialState

        taken = 0
        states = (TrialState.COMPLETE, TrialState.PRUNED)
        for t in cs.study.get_trials(deepcopy=False, states=states):
            steps = _total_steps(spec, cs, t.params)
            if steps is None:
                continue
            reports = [(100.0 * s / steps, float(v)) for s, v in t.intermediate_values.items()]
            final = _first_seed_loss(t, self.first_seed) if t.state == TrialState.COMPLETE else None
            self.seed(cs.cell.name, f"stored-{t.number}", reports, final)
            taken += 1
        return taken


def _point(trial: Any) -> tuple[str, Any]:
    """The point a run is of: its cell and Optuna trial number (the searcher's config)."""
    config = trial.config or {}
    return str(config.get("cell")), config.get("trial_number", trial.trial_id)


def _total_steps(spec: StudySpec, cs: CellStudy, params: Mapping[str, Any]) -> int | None:
    """The steps of a run of the point ``params`` in ``cs``'s cell, counted as
    ``sweeper.run.trainable.train_once`` counts them (its reports' progress is per these)."""
    from proxy_models import HParams
    from proxy_models.hparams import batch_sizes

    try:
        config = trial_config({}, spec, cs.cell, params, seed=spec.sweep.first_seed)
        hp = HParams(**config["hparams"])
        return len(batch_sizes(hp, int(config["tokens"]), int(config["model"]["context"])))
    except (KeyError, TypeError, ValueError) as e:  # (a point this study cannot run)
        logger.debug("%s: a stored point %s not seeded: %s", cs.cell.name, dict(params), e)
        return None


def _first_seed_loss(t: Any, first_seed: int) -> float | None:
    """The final loss of the first seed's run of a COMPLETE trial (its ``runs`` attribute), or
    the trial's value when it holds no runs."""
    for rec in t.user_attrs.get("runs") or []:
        if int(rec.get("seed", -1)) == first_seed:
            loss = rec.get("loss")
            return None if loss is None else float(loss)
    return None if t.value is None else float(t.value)

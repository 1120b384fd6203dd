"""The law sampler's plan, read from a launch's stored cell studies.

:class:`LawPlanner` turns the stored COMPLETE trials (one runs-table row per seed) and the points a
launch has open into :func:`sweeper.fitting.allocation.plan`'s next point, and says which training
seeds a new point at an LR takes. The searcher (:mod:`sweeper.run.searcher`) asks, enqueues and
dispatches what it plans; the launch asks it, before starting Ray, whether the plan has ended.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from optuna.trial import TrialState

from sweeper.fitting import allocation
from sweeper.fitting._common import min_cells
from sweeper.study.runs import COLUMNS, normalize_runs
from sweeper.study.spec import (
    StudySpec,
    law_cap_runs,
    law_lr_runs,
    law_lrs,
    law_max_seeds,
)
from sweeper.study.sweep import CellStudy, trial_runs

__all__ = ["LawPlanner", "law_target", "same_lr", "target_warnings", "waiting"]

logger = logging.getLogger(__name__)

#: cells the planner's law (on N alone) needs
PLAN_MIN_CELLS = min_cells(1)


class LawPlanner:
    """The plan over ``cell_studies`` (a launch's, in its order) of a ``kind = "law"`` study.

    Every point runs the study's ``seeds_per_point`` seeds and the planner counts runs, so the
    planner is given ``point_runs = seeds_per_point`` (a point is planned only while all its runs
    fit in ``budget_runs``) and a point is planned at an LR while fewer than
    :func:`~sweeper.study.spec.law_max_seeds` runs are there. The plan depends on the stored
    results and the open points only, so a relaunch resumes it. Each point planned is logged
    (INFO, ``sweeper -v launch``) once, with why (:attr:`~sweeper.fitting.allocation.Point.why`).
    """

    def __init__(self, spec: StudySpec, cell_studies: Sequence[CellStudy]) -> None:
        if spec.sampler.budget_runs is None:
            raise ValueError(f"{spec.name}: the law sampler needs sampler.budget_runs")
        self.budget_runs: int = spec.sampler.budget_runs
        self.spec = spec
        self.studies = list(cell_studies)
        self.seeds = spec.sweep.seeds_per_point
        self._cache: tuple[Any, allocation.Plan] | None = None
        self._logged: set[tuple[str, float, int]] = set()

    def plan(self, open_points: Sequence[tuple[int, float]], told: int) -> allocation.Plan:
        """The plan from the stored results and the open points ((cell index, LR) each, every one
        pending ``seeds_per_point`` runs); cached until ``told`` (points told so far) or the open
        points change. A point planned is logged once, with why."""
        plan = self._plan(open_points, told)
        for pt in plan.points:
            if (pt.cell, pt.lr, pt.seed) not in self._logged:
                self._logged.add((pt.cell, pt.lr, pt.seed))
                logger.info(
                    "%s: the law sampler plans %s at lr %.4g (replicate %d): %s",
                    self.spec.name,
                    pt.cell,
                    pt.lr,
                    pt.seed,
                    pt.why,
                )
        return plan

    def _plan(self, open_points: Sequence[tuple[int, float]], told: int) -> allocation.Plan:
        pending = [
            (self.studies[i].cell.name, lr) for i, lr in open_points for _ in range(self.seeds)
        ]
        key = (told, tuple(sorted(pending)))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        runs = self.runs()
        scales = {
            cs.cell.name: (float(cs.cell.n_params), float(cs.cell.tokens)) for cs in self.studies
        }
        costs = allocation.cell_costs(runs, scales)
        lrs = law_lrs(self.spec.search)
        cells = sorted(
            (allocation.CellPlan(n, s[0], s[1], lrs, costs[n]) for n, s in scales.items()),
            key=lambda p: (p.cost, p.n_params, p.cell),
        )
        sm = self.spec.sampler
        plan = allocation.plan(
            runs,
            cells,
            k=1,
            seed=sm.seed,
            budget_runs=self.budget_runs,
            pending=pending,
            target=law_target(self.spec, scales),
            stop_lr_interval_ratio=sm.stop_lr_interval_ratio,
            max_seeds=law_max_seeds(self.seeds),
            point_runs=self.seeds,
        )
        self._cache = (key, plan)
        return plan

    def ended(self) -> str:
        """Why the plan has nothing left to run on the stored results, with nothing open ("" when
        a point is queued in a study or planned)."""
        if any(waiting(cs) for cs in self.studies):
            return ""
        plan = self._plan((), told=-1)  # (not logged: the launch's searcher plans it again)
        return "" if plan.points else plan.stop

    def first_seed(self, i: int, lr: float, open_at_lr: int) -> int:
        """The replicate index of a new point's first run at ``lr`` in cell ``i``: the stored runs
        there that count for the plan (COMPLETE, or diverged) plus the runs of the ``open_at_lr``
        points open at that LR."""
        done = self.studies[i].study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        n = sum(trial_runs(t) for t in done if same_lr(t.params.get("lr"), lr))
        return n + open_at_lr * self.seeds

    def runs(self) -> pd.DataFrame:
        """The runs table of the stored COMPLETE trials (one row per seed), in a fixed order."""
        rows: list[dict[str, Any]] = []
        for cs in self.studies:
            for t in cs.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
                rows += _trial_rows(cs, t)
        df = pd.DataFrame(rows) if rows else pd.DataFrame({k: [] for k in COLUMNS})
        return normalize_runs(df)


def _trial_rows(cs: CellStudy, t: Any) -> list[dict[str, Any]]:
    """One row per run of a COMPLETE trial (a trial from before per-seed records: one row)."""
    cell = cs.cell
    base = {
        "cell": cell.name,
        "width": cell.width,
        "depth": cell.depth,
        "n_params": cell.n_params,
        "tokens": cell.tokens,
        "lr": t.params.get("lr"),
        "batch_size": t.params.get("batch_size"),
        "seq_len": cell.context,
        "state": t.state.name,
    }
    runs = t.user_attrs.get("runs") or [
        {
            "loss": t.value,
            "diverged": t.user_attrs.get("diverged", False),
            "wall_s": t.user_attrs.get("wall_s"),
        }
    ]
    return [
        {
            **base,
            "loss": math.nan if r.get("loss") is None else float(r["loss"]),
            "diverged": bool(r.get("diverged", False)),
            "seed": r.get("seed"),
            "wall_s": r.get("wall_s"),
        }
        for r in runs
    ]


def law_target(spec: StudySpec, scales: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """The scale the plan pins the LR down at (``n_params``, ``tokens``): the study's
    ``[target]``, each scale it leaves out the sampler's default
    (:func:`~sweeper.fitting.allocation.default_target`: 10x the largest cell's N, at its D).
    ``scales``: (N, D) per cell name."""
    cells = [allocation.CellPlan(c, n, d, (), 0.0) for c, (n, d) in scales.items()]
    target = allocation.default_target(cells)
    t = spec.target
    if t is not None and t.params is not None:
        target["n_params"] = float(t.params)
    if t is not None and t.tokens is not None:
        target["tokens"] = float(t.tokens)
    return target


def target_warnings(spec: StudySpec, scales: Mapping[str, tuple[float, float]]) -> list[str]:
    """Doubts about a law study that ``validate`` prints as warnings: a given ``[target]``'s
    params below the largest cell's N (the plan would pin the LR down by extrapolating the law
    backwards) or its tokens below the largest cell's D, and a ``budget_runs`` above what the
    plan can ever use (:func:`~sweeper.study.spec.law_cap_runs`). ``scales``: (N, D) per cell."""
    out: list[str] = []
    t = spec.target
    largest = max(n for n, _ in scales.values())
    if t is not None and t.params is not None and t.params < largest:
        out.append(
            f"target.params {t.params:.3g} is below the largest cell's N {largest:,.0f}: the plan "
            "extrapolates the law backwards (a target is usually larger than every cell)"
        )
    most_d = max(d for _, d in scales.values())
    if t is not None and t.tokens is not None and t.tokens < most_d:
        out.append(
            f"target.tokens {t.tokens:.3g} is below the largest cell's D {most_d:,.0f} tokens "
            "(a target is usually trained on more tokens than every cell; the plan's law is on "
            "N alone, so the target's tokens do not move the LR it pins down)"
        )
    if len(scales) < PLAN_MIN_CELLS:
        out.append(
            f"the ladder has {len(scales)} cell(s): the plan's law needs {PLAN_MIN_CELLS} (a "
            "power law in N and its interval), so it never has one: it starts, brackets and "
            "explores each cell, and stops only at its budget or when no candidate is left"
        )
    budget = spec.sampler.budget_runs
    if budget is not None and budget > (cap := law_cap_runs(spec)):
        n_lrs, per_lr = len(law_lrs(spec.search)), law_lr_runs(spec)
        out.append(
            f"sampler.budget_runs {budget:,} is more than the {cap:,} runs the plan can ever use "
            f"({len(scales)} cell(s) x {n_lrs} LRs x at most {per_lr} runs at an LR): it stops "
            f"with no candidate left by {cap:,} runs at the latest"
        )
    return out


def waiting(cs: CellStudy) -> bool:
    """The cell's study holds a queued (WAITING) point."""
    return bool(cs.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def same_lr(a: Any, b: float) -> bool:
    return a is not None and math.isclose(float(a), b, rel_tol=1e-9)

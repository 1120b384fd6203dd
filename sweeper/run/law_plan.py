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
from dataclasses import replace
from typing import Any

import pandas as pd
from optuna.trial import TrialState

from sweeper.fitting import allocation
from sweeper.fitting._common import min_cells
from sweeper.study.ladder import cells
from sweeper.study.runs import COLUMNS, normalize_runs
from sweeper.study.spec import (
    StudySpec,
    law_cap_runs,
    law_lr_runs,
    law_lrs,
    law_max_seeds,
)
from sweeper.study.study_toml import spec_hash
from sweeper.study.sweep import CellStudy, added_cells, trial_runs

__all__ = [
    "DEFAULT_TARGET",
    "LawPlanner",
    "law_target",
    "record_default_target",
    "recorded_target",
    "same_lr",
    "same_resolved_target",
    "target_warnings",
    "waiting",
]

logger = logging.getLogger(__name__)

#: cells the planner's law (on N alone) needs
PLAN_MIN_CELLS = min_cells(1)
#: a cell study's user attribute: the default target (``{"n_params", "tokens"}``) resolved from
#: the ladder as the sweep was first launched (:func:`record_default_target`)
DEFAULT_TARGET = "law_default_target"


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
        scales = {
            cs.cell.name: (float(cs.cell.n_params), float(cs.cell.tokens)) for cs in self.studies
        }
        #: the default target as the sweep was first launched (recorded with its cell studies)
        self.default_target = record_default_target(spec, self.studies, scales)
        self.target = law_target(spec, scales, self.default_target)

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
            target=self.target,
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


def law_target(
    spec: StudySpec,
    scales: Mapping[str, tuple[float, float]],
    default: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The scale the plan pins the LR down at (``n_params``, ``tokens``): the study's
    ``[target]``, each scale it leaves out the sampler's default: ``default`` (the one recorded
    at the sweep's first launch, :func:`record_default_target`) when given, else
    :func:`~sweeper.fitting.allocation.default_target` of ``scales`` (10x the largest cell's N,
    at its D). ``scales``: (N, D) per cell name."""
    target = dict(default) if default is not None else _ladder_default(scales)
    t = spec.target
    if t is not None and t.params is not None:
        target["n_params"] = float(t.params)
    if t is not None and t.tokens is not None:
        target["tokens"] = float(t.tokens)
    return target


def _ladder_default(scales: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """:func:`~sweeper.fitting.allocation.default_target` of a ladder given as (N, D) per cell."""
    cells = [allocation.CellPlan(c, n, d, (), 0.0) for c, (n, d) in scales.items()]
    return allocation.default_target(cells)


def recorded_target(studies: Sequence[Any]) -> dict[str, float] | None:
    """The default target recorded with a sweep's cell studies (Optuna studies, or
    :class:`~sweeper.study.sweep.CellStudy`), None when none holds one (a sweep launched before
    it was recorded, or not launched yet)."""
    for s in studies:
        study = getattr(s, "study", s)
        got = study.user_attrs.get(DEFAULT_TARGET)
        if isinstance(got, Mapping) and {"n_params", "tokens"} <= set(got):
            return {"n_params": float(got["n_params"]), "tokens": float(got["tokens"])}
    return None


def record_default_target(
    spec: StudySpec, studies: Sequence[CellStudy], scales: Mapping[str, tuple[float, float]]
) -> dict[str, float]:
    """The sampler's default target as the sweep was first launched: recorded with its cell
    studies (:data:`DEFAULT_TARGET`) the first time, read back after, so that a relaunch whose
    ladder grows does not move it (the docs fix ``[target]`` once launched; the default, 10x the
    largest cell's N, moved silently with the ladder). A cell a relaunch adds gets the record
    too. When the ladder now gives another default, the launch says it keeps the first (a
    warning when the first no longer lies above the largest cell's N)."""
    now = _ladder_default(scales)
    first = recorded_target(studies)
    if first is None:
        if any(cs.study.get_trials(deepcopy=False) for cs in studies):
            logger.info(
                "%s: no default target recorded with the sweep (launched by an older Sweeper): "
                "the ladder's as it is now is taken and kept, N %.4g at D %.4g",
                spec.name,
                now["n_params"],
                now["tokens"],
            )
        first = now
    for cs in studies:
        if cs.study.user_attrs.get(DEFAULT_TARGET) != first:
            cs.study.set_user_attr(DEFAULT_TARGET, dict(first))
    moved = not all(math.isclose(first[k], now[k], rel_tol=1e-9) for k in first)
    t = spec.target
    given = {"n_params": None if t is None else t.params, "tokens": None if t is None else t.tokens}
    uses = [k for k, v in given.items() if v is None]  # (the scales the default gives)
    if moved and uses:
        largest = max(n for n, _ in scales.values())
        say = logger.warning if first["n_params"] <= largest else logger.info
        say(
            "%s: the default target stays where the sweep's first launch put it (%s), [target] "
            "being fixed once launched; the ladder as it is now would give %s%s",
            spec.name,
            _target_text(first, uses),
            _target_text(now, uses),
            (
                f": the kept N lies at or below the largest cell's ({largest:.4g}), so the plan "
                "no longer extrapolates to it; launch a new sweep with a [target] to aim higher"
                if first["n_params"] <= largest
                else ""
            ),
        )
    return first


def _target_text(target: Mapping[str, float], keys: Sequence[str]) -> str:
    names = {"n_params": "N", "tokens": "D"}
    return ", ".join(f"{names[k]} {target[k]:.4g}" for k in keys)


def same_resolved_target(
    stored: StudySpec, spec: StudySpec, recorded: Mapping[str, float] | None
) -> bool:
    """Whether ``spec`` is the launched law study ``stored`` with only ``[target]`` written
    otherwise (its ladder possibly grown, :func:`~sweeper.study.sweep.added_cells`) while both
    resolve to the same target: an explicit ``[target]`` equal to the default recorded at the
    first launch (``recorded``; the stored ladder's default when None) is the same study. For the
    relaunch check of :func:`~sweeper.study.sweep.open_sweep`."""
    if stored.sampler.kind != "law" or spec.sampler.kind != "law":
        return False
    swapped = replace(spec, target=stored.target)
    if spec_hash(swapped) != spec_hash(stored) and not added_cells(stored, swapped):
        return False
    if recorded is None:
        recorded = _ladder_default(
            {c.name: (float(c.n_params), float(c.tokens)) for c in cells(stored)}
        )
    a, b = law_target(stored, {}, recorded), law_target(spec, {}, recorded)
    return all(math.isclose(a[k], b[k], rel_tol=1e-9) for k in a)


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

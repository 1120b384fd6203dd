"""A law-aware allocation of proxy runs: where the next (cell, LR, seed) teaches the law most.

A dense grid spends most of its runs far from every cell's optimum. The cells share one law, so a
run is worth what it removes from the uncertainty of the law's prediction at the *target* scale
(by default 10x the largest cell's n_params), divided by what it costs (core-seconds: a w256 run
costs ~27x a w16 run). This module plans, from the runs table alone (no Ray, no Optuna):

1. Start every cell, cheapest first (every cell is needed: the largest carry the extrapolation),
   with 3 LRs and 1 seed: the first cell one LR per third of its candidate grid (the offset within
   each third drawn from the planner's seed); each later cell a bracket (×1/√2, ×1, ×√2) around
   the best LR of the nearest started cell, moved by the fitted law's exponent once the surface
   fit (:func:`~sweeper.fitting.surface.fit_surface`, ``n_boot=0``) succeeds (what one cell
   measured tells where to look in the next). A failed fit (FitError) just keeps exploring. A
   cell with fewer than 3 LRs below its cliff (5.) counts as started once it has tried them all.
2. Bracket: a cell whose best LR lacks a tried neighbour on the grid gets it (cheapest cell first).
   Confirm: a cell whose best LR rests on one completed run gets a second seed there (the cell
   whose re-run step 3's criterion values most per core-second first). The lowest of a few noisy
   losses is biased low (the winner's curse), most of all at the edge of stability, where seeds
   differ most: on the quickstart, w128 at 4.8e-3 has seeds 2.188 / 2.327 / 2.363, and a replay
   that drew 2.188 alone took it for the cell's optimum. The Gauss-Newton step cannot see this
   (its information does not depend on the outcome), so the rule is outcome-based, as incumbents
   are re-run in SMAC's intensification (Hutter et al., 2011).
3. Then greedily, one point at a time: the allowed (cell, LR) with the largest reduction of
   Var[ln lr*(target)] per core-second. The variance is the Gauss-Newton (Laplace) covariance of a
   linearisation of the surface model at the fitted law: shared parameters (law, curvature,
   asymmetry, levelling-off), plus per cell its deviation from the law (prior N(0, τ²), τ the
   law's scatter) and its optimum loss level (nuisance, flat prior). A run's information is its
   Jacobian row weighted by the fit's noise model σ(Δu); a candidate's gain is the rank-one
   (Sherman–Morrison) reduction of gᵀCg, g the gradient of ln lr*(target). Runs the law puts
   more than ``BLOWUP`` (50%) above their cell's best loss carry no information (the fit takes
   those as bounds), nor, with a ``window``, runs outside it. Without a law, or when no
   candidate carries information: explore next to the best LR of the cell with the fewest LRs
   tried.
4. Pending points (and points already chosen in this call) count as observed: in the Gauss-Newton
   approximation information does not depend on the outcome, so this *is* Optuna's constant liar,
   and k proposals are not redundant.
5. Nothing at or above a cell's cliff: its lowest grid LR that diverged above every completed
   run (as the fit counts them, a divergence at or below a completed run is a one-off, and a run
   more than ``BLOWUP`` above the best loss is a bound); at most ``max_seeds`` runs per (cell, LR).

Stopping: ``budget_runs`` runs (completed, diverged and pending) reached, or the 95% interval of the
predicted target LR has upper/lower below ``stop_lr_interval_ratio`` once every cell is started,
its best LR bracketed and confirmed (by completed runs: pending ones do not count here), and both
steps of the fit converged. A best LR at either end of its cell's LR list counts as bracketed, as
nothing beyond it can be tried; it is bound, not bracketed, and the stop names such cells. The
interval is screened by the cheap Laplace one (with the law's scatter) and confirmed by the one
``fit`` reports (:data:`STOP_BOOT` bootstrap refits, the cells' scatter redrawn): on sparse
ladders the Laplace interval can be far narrower (4 cells of 3 runs of a synthetic ladder: 2.0
against 161; an audit's 4-cell ladder stopped at 439 where ``fit`` then reported 6.45e9). The
plan is a deterministic function of (runs, pending, seed). A stop at the budget says how wide the
Laplace interval is against ``stop_lr_interval_ratio`` (and what else the rule waits for, and
that ``fit``'s interval can be far wider), a stop with no candidate left why none is; each point
proposed says which rule chose it (:attr:`Point.why`).

The fits use the surface's ``planner`` settings (:data:`~sweeper.fitting.surface.SETTINGS`):
every run (``window=None``; with a window, ~4 runs per cell near the optimum leave too few loss
points: on proxy ladders at 25% of the grid, exponents from -1.5 to 0.0 with it, -0.28 to -0.31
without), one curvature for all cells (``shape_scaling=False``: the curvature's slope in N is
often not determined; on a quickstart replay it went to 2.7, leaving the smallest cell flat and
its optimum at 5e9), and cells from 3 runs (the start gives each cell 3). The cost: on a ladder
whose curvature does move with N (width_sp_long, 4x the horizon) one curvature puts the law 1.25
octaves off at 50% of the grid. Keeping the scaling where a Wald test finds it
(``shape_scaling="auto"``) or an F test (``"ftest"``) fixes that (0.37) but loses more at 25%
than one curvature on the shipped ladders (the F rule: 38 of 80 replays within the bars against
41; docs/RESULTS.md, "The curvature scaling when the data determine it", "... by an F test").

Limits: the batch size is not planned (a ladder whose batch varies within cells raises
``ValueError``); the law is on ``n_params`` (the surface fit's default predictors).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting import _surface_model as sm
from sweeper.fitting._common import FitWarning
from sweeper.fitting._surface_law import BLOWUP, SurfaceLaw, _excess
from sweeper.fitting.surface import SETTINGS, Scaling, fit_surface
from sweeper.study.runs import trained

__all__ = [
    "CellPlan",
    "Plan",
    "Point",
    "cell_costs",
    "cells_from_runs",
    "default_target",
    "plan",
    "sqrt2_grid",
]

#: the planner's fit (every run, one curvature, cells from 3 runs); see the module docstring
PLANNER = SETTINGS["planner"]
#: the start bracket of a cell around its predicted optimum (natural-log offsets: ×1, ×1/√2, ×√2)
BRACKET: tuple[float, ...] = (0.0, -0.5 * math.log(2.0), 0.5 * math.log(2.0))
#: the law's exponent as used to place a new cell's start (clipped: early fits can be wild)
SLOPE_RANGE: tuple[float, float] = (-1.0, 0.5)
#: LRs tried in a cell before it counts as started
START_LRS = 3
#: completed runs at a cell's best LR before it counts as confirmed (see the module docstring)
CONFIRM_RUNS = 2
#: prior precision of the shared parameters and the cells' loss levels (ridge: flat in practice)
_FLAT = 1e-8
#: finite-difference step of the Jacobian (natural-log units)
_FD = 1e-5


@dataclass(frozen=True)
class Point:
    """One run to launch: a cell, its LR and the replicate index (seed) at that LR; ``why``: the
    rule that chose it, its phase first (``start``, ``bracket``, ``confirm``, ``information``,
    ``explore``: see :func:`_next_point`), not part of the point's identity."""

    cell: str
    lr: float
    seed: int
    why: str = field(default="", compare=False)


@dataclass(frozen=True)
class CellPlan:
    """A cell of the ladder: its scale, its candidate LRs (ascending) and its cost per run
    (core-seconds, or any unit shared by all cells)."""

    cell: str
    n_params: float
    tokens: float
    lrs: tuple[float, ...]
    cost: float = 1.0


#: bootstrap refits behind a stop by the interval rule (``fit``'s default, the figure it reports)
STOP_BOOT: Final[int] = 200
_BOOT_RATIOS: dict[tuple[Any, ...], float | None] = {}


@dataclass(frozen=True)
class Plan:
    """The next points, why the plan stops (``""`` while it goes on), and the law it used."""

    points: tuple[Point, ...]
    stop: str = ""
    law: SurfaceLaw | None = None
    target_sd: float | None = None
    interval_ratio: float | None = None
    notes: tuple[str, ...] = ()


# --- the ladder ----------------------------------------------------------------------------------


def sqrt2_grid(lo: float, hi: float) -> tuple[float, ...]:
    """LRs in sqrt(2) steps from ``lo`` up to ``hi`` (both included when on the grid)."""
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < lo <= hi, got {lo}, {hi}")
    n = math.floor(math.log(hi / lo) / math.log(math.sqrt(2.0)) + 1e-9)
    return tuple(float(lo * math.sqrt(2.0) ** i) for i in range(n + 1))


def cell_costs(runs: pd.DataFrame, scales: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Cost of one run per cell (core-seconds): the cell's :func:`_run_cost` where measured;
    elsewhere n_params·tokens times the median measured ratio (or n_params·tokens itself when
    nothing is measured, a unit shared by every cell)."""
    wall = pd.to_numeric(runs["wall_s"], errors="coerce").to_numpy(float)
    ok = np.isfinite(wall) & (wall > 0)
    done, wall = runs[ok], wall[ok]
    div = (
        done["diverged"].astype("boolean").fillna(False).to_numpy(bool)
        if "diverged" in done
        else np.zeros(len(done), dtype=bool)
    )
    cell = done["cell"].astype(str).to_numpy()
    measured = {c: _run_cost(wall[cell == c], div[cell == c]) for c in dict.fromkeys(cell)}
    ratios = [measured[c] / (n * d) for c, (n, d) in scales.items() if c in measured]
    per_unit = float(np.median(ratios)) if ratios else 1.0
    return {c: float(measured.get(c, per_unit * n * d)) for c, (n, d) in scales.items()}


def _run_cost(wall_s: np.ndarray, diverged: np.ndarray) -> float:
    """One cell's cost per run from its runs' ``wall_s``: the mean of the lower half (the
    ``max(1, n // 2)`` shortest), of the runs that did not diverge where there are any (a
    divergence can end a run early). The first run in each fresh Ray worker also loads the data
    (5-9 s on a CPU proxy ladder), and the cheapest cell runs first, so a mean charged it to
    that cell and could put it after the next ("cheapest first" flipped on small ladders);
    one-offs in up to half the runs (every worker's first run at the start) are left out."""
    kept = wall_s[~diverged] if (~diverged).any() else wall_s
    low = np.sort(kept)[: max(1, kept.size // 2)]
    return float(low.mean())


def cells_from_runs(runs: pd.DataFrame, lrs: Sequence[float] | None = None) -> list[CellPlan]:
    """The ladder's cells as seen in a runs table (one per ``cell``), with ``lrs`` as every
    cell's candidates (default: the LRs the table holds for that cell), costs from
    :func:`cell_costs`, ordered cheapest first."""
    first = runs.groupby("cell")[["n_params", "tokens"]].first()
    scales = {str(c): (float(r.n_params), float(r.tokens)) for c, r in first.iterrows()}
    costs = cell_costs(runs, scales)
    out = []
    for c, (n, d) in scales.items():
        grid = lrs if lrs is not None else runs.loc[runs["cell"] == c, "lr"].unique()
        out.append(CellPlan(c, n, d, tuple(sorted(float(x) for x in grid)), costs[c]))
    return sorted(out, key=lambda p: (p.cost, p.n_params, p.cell))


def default_target(cells: Sequence[CellPlan]) -> dict[str, float]:
    """10x the largest cell's n_params, at its token budget."""
    big = max(cells, key=lambda p: (p.n_params, p.tokens))
    return {"n_params": 10.0 * big.n_params, "tokens": big.tokens}


# --- the plan ------------------------------------------------------------------------------------


@dataclass
class _State:
    """What is observed or pending: runs per (cell, grid index), the completed runs' losses,
    the grid indices of the runs that diverged per cell."""

    cells: list[CellPlan]
    count: dict[tuple[str, int], int] = field(default_factory=dict)
    losses: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    diverged: dict[str, list[int]] = field(default_factory=dict)
    total: int = 0

    def add(self, cell: str, lr: float, loss: float | None = None, diverged: bool = False) -> None:
        idx = _nearest(self.grid(cell), lr)
        self.count[(cell, idx)] = self.count.get((cell, idx), 0) + 1
        self.total += 1
        if diverged:
            self.diverged.setdefault(cell, []).append(idx)
        elif loss is not None and math.isfinite(loss):
            self.losses.setdefault((cell, idx), []).append(loss)

    def cliff(self, cell: str) -> int:
        """Grid index of the cell's lowest divergence above every completed run that is a loss
        point (the grid's length: none). As the surface fit counts them, a divergence at or below
        a completed run is a one-off, and a run more than :data:`BLOWUP` above the cell's best
        loss, above its best LR, is a bound like a divergence."""
        means = self._means(cell)
        b = self.best(cell)
        top = max(
            (i for i, m in means.items() if b is None or i <= b or m <= (1 + BLOWUP) * means[b]),
            default=-1,
        )
        return min(
            (i for i in self.diverged.get(cell, ()) if i > top), default=len(self.grid(cell))
        )

    def started(self, cell: str, max_seeds: int) -> bool:
        """:data:`START_LRS` LRs tried, or every LR below the cliff tried (a cell whose every run
        diverged then counts too: nothing is left to try there, and the fit leaves it out)."""
        if self.n_lrs(cell) >= START_LRS:
            return True
        untried = (i for i in range(len(self.grid(cell))) if self.n_at(cell, i) == 0)
        return not any(self.allowed(cell, i, max_seeds) for i in untried)

    def grid(self, cell: str) -> tuple[float, ...]:
        return next(p.lrs for p in self.cells if p.cell == cell)

    def n_lrs(self, cell: str) -> int:
        return sum(1 for (c, _), n in self.count.items() if c == cell and n > 0)

    def n_at(self, cell: str, idx: int) -> int:
        return self.count.get((cell, idx), 0)

    def best(self, cell: str) -> int | None:
        """Grid index of the cell's lowest mean completed loss (None before any)."""
        means = self._means(cell)
        return min(means, key=lambda i: (means[i], i)) if means else None

    def _means(self, cell: str) -> dict[int, float]:
        """Mean completed loss per grid index of the cell."""
        return {i: float(np.mean(v)) for (c, i), v in self.losses.items() if c == cell and v}

    def allowed(self, cell: str, idx: int, max_seeds: int = 1) -> bool:
        """On the grid, below ``max_seeds`` runs there and below the cliff (a run at or above it
        would diverge again: a bound, not a loss point)."""
        return 0 <= idx < self.cliff(cell) and self.n_at(cell, idx) < max_seeds

    def edge(self, cell: str) -> str:
        """``"lowest"`` or ``"highest"`` when the cell's best LR is that end of its LR list (its
        optimum may lie beyond, where nothing can be tried), else ``""``."""
        b, n = self.best(cell), len(self.grid(cell))
        if b is None or n < 2 or b not in (0, n - 1):
            return ""
        return "lowest" if b == 0 else "highest"

    def unconfirmed(self, cell: str, confirm_runs: int) -> int | None:
        """The cell's best grid index while fewer than ``confirm_runs`` runs (completed or
        pending) are there, else None."""
        b = self.best(cell)
        return b if b is not None and self.n_at(cell, b) < confirm_runs else None

    def open_side(self, cell: str) -> int | None:
        """The untried grid neighbour of the cell's best LR that would bracket it (below first),
        None when it is bracketed (tried on both sides, or at the grid's or divergence's edge).
        A best LR at the grid's edge counts as bracketed because nothing beyond it can be tried:
        it is bound, not bracketed (:meth:`edge`), and the stops say so."""
        b = self.best(cell)
        if b is None:
            return None
        for j in (b - 1, b + 1):
            if self.allowed(cell, j):  # (max_seeds 1: untried)
                return j
        return None


def plan(
    runs: pd.DataFrame,
    cells: Sequence[CellPlan],
    *,
    k: int = 1,
    seed: int = 0,
    budget_runs: int | None = None,
    pending: Sequence[tuple[str, float]] = (),
    target: Mapping[str, float] | None = None,
    stop_lr_interval_ratio: float | None = 1.5,
    max_seeds: int = 3,
    confirm_runs: int = CONFIRM_RUNS,
    window: tuple[float, float] | None = PLANNER.window,
    shape_scaling: Scaling = PLANNER.shape_scaling,
    point_runs: int = 1,
) -> Plan:
    """The next ``k`` points (fewer when the plan stops) for a ladder whose runs so far are
    ``runs`` (a runs table; completed and diverged rows count) and ``pending`` (cell, lr) pairs
    launched without a result. ``confirm_runs``: runs at a cell's best LR before it counts as
    confirmed (1: no confirmation). ``window``, ``shape_scaling``: the surface fit's, by default
    the ``planner`` settings (see the module docstring). ``point_runs``: the runs each proposed
    point will train (a launch runs every seed of a point, with ``k = 1``): a point is proposed
    only while all of them fit in ``budget_runs``, as a budget of ``budget_runs - point_runs + 1``
    would, and the budget stop says so.

    A stop at the budget carries the Laplace 95% interval of the target LR on ``runs`` against
    ``stop_lr_interval_ratio`` (what raising the budget would work towards), a stop with no
    candidate left why none is (every LR full or past its cell's divergence, and the cells
    whose best LR is at the edge of their LR list)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if point_runs < 1:
        raise ValueError(f"point_runs must be >= 1, got {point_runs}")
    cells = list(cells)
    pending = [(c, lr) for c, lr in pending if c in {p.cell for p in cells}]
    state = _state(runs, cells, pending)
    tgt = dict(target or default_target(cells))
    # the planner's own budget: a point is proposed only while all its runs fit
    last = None if budget_runs is None else budget_runs - point_runs + 1
    if budget_runs is not None and last is not None and state.total >= last:
        stop = _budget_stop(state, budget_runs, point_runs, len(pending))
        law, ratio, told = _where_it_stands(
            runs, cells, tgt, seed, window, shape_scaling, stop_lr_interval_ratio, confirm_runs,
            max_seeds,
        )  # fmt: skip
        return Plan((), stop=f"{stop}; {told}", law=law, interval_ratio=ratio)
    law, note = _fit(runs, seed, window, shape_scaling)
    ratio = _interval_ratio(law, tgt)
    if (
        _settled(_state(runs, cells, ()), law, confirm_runs, max_seeds)
        and ratio is not None
        and stop_lr_interval_ratio
        and ratio < stop_lr_interval_ratio
    ):
        boot = _bootstrap_ratio(runs, seed, window, shape_scaling, tgt)
        if boot is not None and boot < stop_lr_interval_ratio:
            return Plan(
                (),
                stop=f"target LR interval ratio {boot:.3g} < {stop_lr_interval_ratio:g} "
                f"(bootstrap of {STOP_BOOT} refits; Laplace {ratio:.3g})"
                + _edge_text(_state(runs, cells, ()), "bound, not bracketed: "),
                law=law,
                interval_ratio=boot,
            )
        note = (
            f"the Laplace target LR interval ratio {ratio:.3g} is below "
            f"{stop_lr_interval_ratio:g}, the bootstrap's "
            + (f"{boot:.3g}" if boot is not None else "(none)")
            + " is not: planning on"
        )
    room = k if last is None else min(k, last - state.total)
    info = _info(law, runs, cells, tgt, pending, window)
    points: list[Point] = []
    while len(points) < room:
        nxt = _next_point(state, info, law, seed, max_seeds, confirm_runs)
        if nxt is None:
            break
        cell, idx, why = nxt
        lr = state.grid(cell)[idx]
        points.append(Point(cell, lr, state.n_at(cell, idx), why))
        state.add(cell, lr)
        if info is not None:
            info.observe(cell, math.log(lr))
    sd = None if info is None else info.target_sd()
    return Plan(
        tuple(points),
        stop="" if points else _exhausted(state, max_seeds),
        law=law,
        target_sd=sd,
        interval_ratio=ratio,
        notes=(note,) if note else (),
    )


def _info(
    law: SurfaceLaw | None,
    runs: pd.DataFrame,
    cells: list[CellPlan],
    target: Mapping[str, float],
    pending: Sequence[tuple[str, float]],
    window: tuple[float, float] | None,
) -> _Info | None:
    """The linearised model at ``law`` with the results and the pending points observed; None
    without a law or when the law is too wild to linearise (the plan then explores)."""
    if law is None or not np.all(np.isfinite(law.shape_params)):
        return None
    try:
        info = _Info.build(law, runs, cells, target, window)
        if pending:
            info.observe_many([c for c, _ in pending], np.log([float(lr) for _, lr in pending]))
    except np.linalg.LinAlgError:
        return None
    return info if math.isfinite(info.target_sd()) else None


def _settled(state: _State, law: SurfaceLaw | None, confirm_runs: int, max_seeds: int) -> bool:
    """Whether the stopping rule may trust the law: every cell started and its best LR
    bracketed and confirmed by completed runs (``state`` holds no pending ones), and both steps
    of the fit converged (an early or failed fit can claim a narrow interval)."""
    if law is None or any("did not converge" in n for n in law.notes):
        return False
    return all(
        state.started(p.cell, max_seeds)
        and state.open_side(p.cell) is None
        and state.unconfirmed(p.cell, confirm_runs) is None
        for p in state.cells
    )


def _budget_stop(state: _State, budget_runs: int, point_runs: int, n_pending: int) -> str:
    """Why the plan stopped at its budget, with what of it has no result yet (points running,
    or held after they failed) and the cells with none at all (a law-sampler audit read "budget
    reached: 20 runs of 20" beside 13 finished runs and two cells never started). Short of the
    budget, the whole points that leave the rest unspent (an audit read "18 of 19 runs used; its
    plan stopped: budget reached: 18 runs of 18"); above it, a budget lowered below the runs
    already used (an audit read "15 of 10 runs used" and nothing more)."""
    used = state.total - n_pending
    if used > budget_runs:
        out = (
            f"budget reached: budget_runs {budget_runs} is below the {used} runs already used, "
            "so nothing is left to run"
        )
    elif state.total < budget_runs:
        out = (
            f"budget reached: {state.total} runs of {budget_runs} (spent in whole points of "
            f"{point_runs} runs: the next would make {state.total + point_runs})"
        )
    else:
        out = f"budget reached: {state.total} runs of {budget_runs}"
    if n_pending:
        out += f", {n_pending} of them without a result yet (running, or held after failing)"
    done = {k[0] for k in state.losses} | set(state.diverged)
    empty = [c.cell for c in state.cells if c.cell not in done]
    if empty:
        out += f"; no result in {', '.join(empty)}"
    return out


def _where_it_stands(
    runs: pd.DataFrame,
    cells: list[CellPlan],
    tgt: Mapping[str, float],
    seed: int,
    window: tuple[float, float] | None,
    shape_scaling: Scaling,
    stop_ratio: float | None,
    confirm_runs: int,
    max_seeds: int,
) -> tuple[SurfaceLaw | None, float | None, str]:
    """At a budget stop: the law on the stored runs, its Laplace target-LR interval ratio, and
    the text that sets them against the stop rule (:func:`_interval_text`)."""
    try:
        law, note = _fit(runs, seed, window, shape_scaling)
    except ValueError as e:  # (a ladder the planner cannot plan: it raised before the stop)
        law, note = None, str(e)
    ratio = _interval_ratio(law, tgt)
    waits = _unsettled(_state(runs, cells, ()), law, confirm_runs, max_seeds)
    return law, ratio, _interval_text(law, note, ratio, stop_ratio, waits)


def _interval_text(
    law: SurfaceLaw | None,
    note: str,
    ratio: float | None,
    stop_ratio: float | None,
    waits: str = "",
) -> str:
    """The target LR's Laplace 95% interval (upper/lower) on the stored runs against the stop
    rule's ratio, for a budget stop: whether to raise the budget hangs on how far it is (an
    audit's sweeps stopped at 1.82 and at 1843 against 1.5). Below the ratio, what else the rule
    waits for (``waits``: :func:`_unsettled`). It says that the Laplace interval leaves the
    cells' scatter out (:func:`_bootstrap_ratio`): an audit's stop read 15,250x where ``fit``
    then reported 3e34x, and "a bit more budget" is not what that means."""
    go_on = "raise budget_runs to go on"
    if law is None:
        return f"no target-LR interval ({note or 'no law'}): {go_on}"
    if ratio is None:
        return f"the fit gives no finite 95% interval of the target LR: {go_on}"
    rule = f", the stop rule's {stop_ratio:g}x" if stop_ratio else " (no stop rule)"
    out = (
        f"the target LR's 95% interval (Laplace, which leaves the cells' scatter out: the "
        f"bootstrap one `sweeper fit` reports can be far wider) is {_times(ratio)}x "
        f"wide{rule}: {go_on}"
    )
    if stop_ratio and ratio < stop_ratio:
        out += (
            f" (below the rule's ratio, but the rule also waits for: {waits})"
            if waits
            else " (below the rule's ratio: a stop by it also needs the bootstrap interval "
            "`sweeper fit` reports below it)"
        )
    return out


def _unsettled(state: _State, law: SurfaceLaw | None, confirm_runs: int, max_seeds: int) -> str:
    """What keeps the stopping rule from trusting the law (:func:`_settled`), "" when nothing:
    the fit not converged, cells not started, their best LR not bracketed or not confirmed."""
    out = []
    if law is None or any("did not converge" in n for n in law.notes):
        out.append("a converged fit")
    tests = (
        ("a start", lambda c: state.started(c, max_seeds)),
        ("the best LR bracketed", lambda c: state.open_side(c) is None),
        ("the best LR confirmed", lambda c: state.unconfirmed(c, confirm_runs) is None),
    )
    for what, ok in tests:
        short = [p.cell for p in state.cells if not ok(p.cell)]
        if short:
            out.append(f"{what} in {_some(short)}")
    return "; ".join(out)


def _some(names: Sequence[str], most: int = 3) -> str:
    """Names for a line: all of them, or the first ``most`` and how many in all."""
    if len(names) <= most:
        return ", ".join(names)
    return f"{len(names)} cells ({', '.join(names[:most])}, ...)"


def _times(ratio: float) -> str:
    """An interval ratio for people: 3 digits, thousands in full below a million."""
    return f"{ratio:,.0f}" if 1e3 <= ratio < 1e6 else f"{ratio:.3g}"


def _exhausted(state: _State, max_seeds: int) -> str:
    """Why no candidate is left (nothing allowed anywhere): every (cell, LR) holds ``max_seeds``
    runs or lies at or above its cell's divergence; and the cells whose best LR is the lowest or
    the highest of the LR list, whose optimum may lie outside it."""
    full = above = 0
    for p in state.cells:
        cliff = state.cliff(p.cell)
        for i in range(len(p.lrs)):
            if i >= cliff:
                above += 1
            elif state.n_at(p.cell, i) >= max_seeds:
                full += 1
    runs = f"{max_seeds} run{'s' * (max_seeds != 1)}"
    out = f"no candidate left: every (cell, LR) has {runs} or more ({full})"
    out += f" or lies at or above its cell's divergence ({above})" if above else ""
    return out + _edge_text(state)


def _edge_text(state: _State, what: str = "") -> str:
    """``"; the best LR is on the edge of the LR list in CELL (highest), ...: widen the LR range
    there"`` for the cells whose best LR is an end of their LR list (:meth:`_State.edge`), with
    ``what`` before the advice; ``""`` when there are none. The stopping rule counts such a cell
    as bracketed (nothing beyond can be tried), so a stop by it says which they are."""
    edges = [f"{p.cell} ({e})" for p in state.cells if (e := state.edge(p.cell))]
    if not edges:
        return ""
    cells = ", ".join(edges)
    return f"; the best LR is on the edge of the LR list in {cells}: {what}widen the LR range there"


def _state(
    runs: pd.DataFrame, cells: list[CellPlan], pending: Sequence[tuple[str, float]]
) -> _State:
    state = _State(cells)
    known = {p.cell for p in cells}
    for r in _counted(runs).itertuples(index=False):
        if r.cell in known:
            div = bool(r.diverged) or not math.isfinite(r.loss)
            state.add(str(r.cell), float(r.lr), float(r.loss), div)
    for c, lr in pending:
        state.add(c, float(lr))
    return state


def _counted(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows that are results: completed runs and diverged ones (any state)."""
    return runs[trained(runs)]


def _fit(
    runs: pd.DataFrame, seed: int, window: tuple[float, float] | None, shape_scaling: Scaling
) -> tuple[SurfaceLaw | None, str]:
    """The surface fit of the results so far (Laplace intervals), or None and why not."""
    res = _counted(runs)
    if res.empty:
        return None, "no results yet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        try:
            law = fit_surface(
                res,
                n_boot=0,
                cv=False,
                seed=seed,
                window=window,
                shape_scaling=shape_scaling,
                min_runs=PLANNER.min_runs or 3,
            )
        except FitError as e:
            return None, f"no law yet: {e}"
    if any(n.startswith("batch_tokens") for n in law.shape_names):
        raise ValueError("the law sampler plans the LR only; the batch varies within cells")
    return law, ""


def _bootstrap_ratio(
    runs: pd.DataFrame,
    seed: int,
    window: tuple[float, float] | None,
    shape_scaling: Scaling,
    target: Mapping[str, float],
) -> float | None:
    """The target LR interval's upper/lower as ``fit`` reports it (:data:`STOP_BOOT` bootstrap
    refits, the cells' scatter redrawn), for the stopping rule to confirm the Laplace interval
    by: that one leaves the cells' scatter out of the law's slope and can be several times
    narrower (an audit's 4-cell ladder stopped at 439 where fit's interval was 6.45e9). Only run
    once the Laplace rule would stop; kept per (runs, settings), so a plan asked again on the
    same results does not refit."""
    res = _counted(runs)
    cols = [c for c in ("cell", "lr", "loss", "diverged", "batch_tokens") if c in res]
    rows = res[cols].astype(str).to_numpy()
    key = (
        tuple(map(tuple, rows)),
        seed,
        window,
        shape_scaling,
        tuple(sorted(target.items())),
    )
    if key not in _BOOT_RATIOS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            try:
                law: SurfaceLaw | None = fit_surface(
                    res,
                    n_boot=STOP_BOOT,
                    cv=False,
                    seed=seed,
                    window=window,
                    shape_scaling=shape_scaling,
                    min_runs=PLANNER.min_runs or 3,
                )
            except FitError:
                law = None
        if len(_BOOT_RATIOS) > 64:
            _BOOT_RATIOS.clear()
        _BOOT_RATIOS[key] = _interval_ratio(law, target)
    return _BOOT_RATIOS[key]


def _interval_ratio(law: SurfaceLaw | None, target: Mapping[str, float]) -> float | None:
    if law is None:
        return None
    lo, hi = law.interval({p: target[p] for p in law.predictors})
    return hi / lo if lo > 0 and math.isfinite(hi) else None


def _next_point(
    state: _State,
    info: _Info | None,
    law: SurfaceLaw | None,
    seed: int,
    max_seeds: int,
    confirm_runs: int,
) -> tuple[str, int, str] | None:
    """The next (cell, grid index, why), by the first rule that gives one: (1) ``start`` the
    cheapest unstarted cell (every cell is needed: the largest ones carry the extrapolation); (2)
    ``bracket`` a started cell's best LR (cheapest cell first), then ``confirm`` it (see
    :func:`_confirm_point`); (3) with a law, the largest variance reduction per core-second
    (``information``); (4) ``explore``. ``why`` names the rule, then what it saw."""
    for p in state.cells:
        if not state.started(p.cell, max_seeds):
            start = _start_point(state, p, law, seed, max_seeds)
            if start is not None:
                return start
    for p in state.cells:
        j = state.open_side(p.cell)
        if j is not None and state.allowed(p.cell, j, max_seeds):
            b = state.best(p.cell)
            side = "below" if b is not None and j < b else "above"
            best = "" if b is None else f" {p.lrs[b]:.3g}"
            return p.cell, j, f"bracket: the cell's best LR{best} has no tried LR {side} it"
    confirm = _confirm_point(state, info, max_seeds, confirm_runs)
    if confirm is not None:
        return confirm
    if info is not None and law is not None:
        best_c = _best_candidate(state, info, max_seeds)
        if best_c is not None:
            cell, i, value = best_c
            n = state.n_at(cell, i)
            again = f"; run {n + 1} at this LR" if n else ""
            return (
                cell,
                i,
                (
                    "information: the largest reduction of the target LR's variance per "
                    f"core-second ({value:.3g}){again}"
                ),
            )
    why = (
        "no law yet"
        if law is None
        else "the law is too wild to linearise"
        if info is None
        else "no candidate carries information on the target LR"
    )
    return _explored(
        state,
        _explore_point(state, max_seeds),
        f"explore: {why}; in the cell with the fewest LRs tried",
    )


def _explored(state: _State, pt: tuple[str, int] | None, why: str) -> tuple[str, int, str] | None:
    """An explored point (:func:`_explore_point`) with why it was chosen."""
    if pt is None:
        return None
    what = "another seed at the LR" if state.n_at(*pt) else "the untried LR"
    near = "its best LR" if state.best(pt[0]) is not None else "the middle of the LR list"
    return pt[0], pt[1], f"{why}: {what} nearest {near}"


def _confirm_point(
    state: _State, info: _Info | None, max_seeds: int, confirm_runs: int
) -> tuple[str, int, str] | None:
    """Another seed at an unconfirmed best LR: the one the variance criterion values most per
    core-second (the largest cells carry the extrapolation, and cheapest-first would spend the
    budget before reaching them), the cheapest without a law."""
    todo = [
        (p, j)
        for p in state.cells
        if (j := state.unconfirmed(p.cell, confirm_runs)) is not None
        and state.allowed(p.cell, j, max_seeds)
    ]
    if not todo:
        return None
    if info is not None:
        todo.sort(key=lambda pj: -info.gain(pj[0].cell, [math.log(pj[0].lrs[pj[1]])]) / pj[0].cost)
    p, j = todo[0]
    n = state.n_at(p.cell, j)
    return (
        p.cell,
        j,
        (
            f"confirm: the cell's best LR {p.lrs[j]:.3g} rests on {n} run{'s' * (n != 1)} "
            f"(confirmed at {confirm_runs}); another seed there"
        ),
    )


def _start_point(
    state: _State, cell: CellPlan, law: SurfaceLaw | None, seed: int, max_seeds: int
) -> tuple[str, int, str] | None:
    """A start point of a cell: for the first cell, one LR per third of its grid (offset by
    seed); for the next, a bracket around the best LR of the nearest started cell, moved by the
    law's exponent when there is a law (what one cell measured tells where to look in the next)."""
    ref = _nearest_started(state, cell)
    if ref is None:
        idxs = _spread(len(cell.lrs), seed, cell.cell)
        why = "start: one LR in each third of the LR list (no cell has a result yet)"
    else:
        near = next(p for p in state.cells if p.cell == ref)
        slope = 0.0 if law is None else float(np.clip(law.exponents["n_params"], *SLOPE_RANGE))
        centre = math.log(near.lrs[state.best(ref) or 0]) + slope * math.log(
            cell.n_params / near.n_params
        )
        idxs = _bracket(state, cell, centre, max_seeds)
        best = near.lrs[state.best(ref) or 0]
        why = (
            f"start: the LR list's values nearest x1/√2, x1, x√2 around {ref}'s best LR {best:.3g}"
        )
        why += "" if law is None else f" moved by the law's exponent ({slope:.2f}) in N"
    for idx in idxs:
        if state.n_at(cell.cell, idx) == 0 and state.allowed(cell.cell, idx, max_seeds):
            return cell.cell, idx, why
    return _explored(
        state,
        _explore_point(state, max_seeds, only=cell.cell),
        "start: its bracket is tried or past its divergence",
    )


def _nearest_started(state: _State, cell: CellPlan) -> str | None:
    """The started cell (with a completed loss) nearest in ln n_params, or None."""
    started = [p for p in state.cells if p.cell != cell.cell and state.best(p.cell) is not None]
    if not started:
        return None
    near = min(started, key=lambda p: (abs(math.log(p.n_params / cell.n_params)), p.cell))
    return near.cell


def _spread(n: int, seed: int, cell: str) -> list[int]:
    """START_LRS distinct grid indices, one drawn in each of START_LRS equal parts of the grid."""
    rng = np.random.default_rng([seed, *cell.encode()])
    out = []
    for j in range(START_LRS):
        a = j * n // START_LRS
        b = max((j + 1) * n // START_LRS - 1, a)
        out.append(int(rng.integers(a, b + 1)))
    return list(dict.fromkeys(out))


def _explore_point(
    state: _State, max_seeds: int, only: str | None = None
) -> tuple[str, int] | None:
    """Without a usable law: in the cell with the fewest LRs tried (cheapest first), the untried
    LR below its cliff nearest to its best one (the grid's middle before any result), else a
    further seed there."""
    cells = [p for p in state.cells if only is None or p.cell == only]
    for p in sorted(cells, key=lambda p: state.n_lrs(p.cell)):
        b = state.best(p.cell)
        mid = len(p.lrs) // 2 if b is None else b
        order = sorted(
            range(len(p.lrs)), key=lambda i: (state.n_at(p.cell, i) > 0, abs(i - mid), i)
        )
        for i in order:
            if state.allowed(p.cell, i, max_seeds):
                return p.cell, i
    return None


def _best_candidate(state: _State, info: _Info, max_seeds: int) -> tuple[str, int, float] | None:
    """The allowed (cell, LR) with the largest variance reduction per core-second (ties: the
    ladder's order, then the lowest LR), with that reduction; None when no candidate carries
    information."""
    best_key: tuple[float, int, int] | None = None
    best: tuple[str, int, float] | None = None
    for order, p in enumerate(state.cells):
        for i in range(len(p.lrs)):
            if not state.allowed(p.cell, i, max_seeds):
                continue
            value = info.gain(p.cell, [math.log(p.lrs[i])]) / p.cost
            key = (-value, order, i)
            if value > 0 and (best_key is None or key < best_key):
                best_key, best = key, (p.cell, i, value)
    return best


def _bracket(state: _State, p: CellPlan, centre: float, max_seeds: int) -> list[int]:
    """Allowed grid indices nearest to ``centre`` + each BRACKET offset (natural log), distinct."""
    grid = np.log(np.asarray(p.lrs))
    out: list[int] = []
    for off in BRACKET:
        for i in np.argsort(np.abs(grid - (centre + off)), kind="stable"):
            if state.allowed(p.cell, int(i), max_seeds) and int(i) not in out:
                out.append(int(i))
                break
    return out


def _nearest(grid: Sequence[float], lr: float) -> int:
    lg = np.log(np.asarray(grid, dtype=float))
    return int(np.argmin(np.abs(lg - math.log(lr))))


# --- the linearised surface model ----------------------------------------------------------------


@dataclass
class _Info:
    """The Gauss-Newton information of the surface model linearised at a fitted law.

    Parameters φ = [θ (the law's shape vector), ε_c (cell deviations), ℓ_c (cell loss levels)];
    ``info`` = Σ_runs jᵀj/σ² + prior precision, ``cov`` its inverse; ``g`` the gradient of
    ln lr*(target) in φ.
    """

    law: SurfaceLaw
    cells: list[str]
    lx: np.ndarray  # (C, 1) ln n_params per cell
    eps: np.ndarray  # (C,) each cell's deviation of its optimum from the law
    info: np.ndarray
    cov: np.ndarray
    g: np.ndarray
    window: tuple[float, float] | None = None

    @classmethod
    def build(
        cls,
        law: SurfaceLaw,
        runs: pd.DataFrame,
        cells: Sequence[CellPlan],
        target: Mapping[str, float],
        window: tuple[float, float] | None = None,
    ) -> _Info:
        names = [p.cell for p in cells]
        lx = np.log(np.array([[p.n_params] for p in cells]))
        theta = np.asarray(law.shape_params, dtype=float)
        law_at = law.log_prefactor + law.exponents["n_params"] * lx[:, 0]
        opt = np.array(
            [
                math.log(law.cell_optima[c]) if law.cell_optima.get(c, 0.0) > 0 else m
                for c, m in zip(names, law_at, strict=True)
            ]
        )
        eps = np.clip(opt - law_at, -3.0, 3.0)
        t, c = theta.size, len(names)
        tau = max(law.residual_std, sm.TAU_FLOOR)
        prior = np.concatenate([np.full(t, _FLAT), np.full(c, 1.0 / tau**2), np.full(c, _FLAT)])
        g = np.zeros(t + 2 * c)
        idx = {n: i for i, n in enumerate(law.shape_names)}
        g[idx["lr:log_prefactor"]] = 1.0
        g[idx["lr:n_params"]] = math.log(target["n_params"])
        info = cls(law, names, lx, eps, np.diag(prior), np.diag(1.0 / prior), g, window)
        res = _counted(runs)
        res = res[(res["state"] == "COMPLETE") & ~res["diverged"].astype(bool)]
        res = res[np.isfinite(res["loss"].to_numpy(float)) & res["cell"].isin(names)]
        info.observe_many(res["cell"].astype(str).tolist(), np.log(res["lr"].to_numpy(float)))
        return info

    def target_sd(self) -> float:
        """Sd of ln lr*(target) from the runs' part of the law's uncertainty (no scatter)."""
        return math.sqrt(max(float(self.g @ self.cov @ self.g), 0.0))

    def observe(self, cell: str, u: float) -> None:
        """Count a run (pending or chosen) as observed: a rank-one update of ``cov``."""
        self.observe_many([cell], np.array([u]))

    def observe_many(self, cells: Sequence[str], u: np.ndarray) -> None:
        """Add runs' information (jᵀj/σ² per run) and refresh ``cov`` (a direct inverse: the
        flat priors make an update of a prior covariance ill-conditioned)."""
        j, w = self._rows(cells, u)
        self.info = self.info + (j * w[:, None]).T @ j
        self.cov = np.linalg.pinv(self.info, hermitian=True)

    def gain(self, cell: str, u: Sequence[float]) -> float:
        """Reduction of Var[ln lr*(target)] if runs at ``u`` (ln lr) in ``cell`` were observed
        (Sherman–Morrison for one run, Woodbury for several)."""
        j, w = self._rows([cell] * len(u), np.asarray(u, dtype=float))
        if not j.shape[0]:
            return 0.0
        jw = j * np.sqrt(w)[:, None]
        cg = jw @ (self.cov @ self.g)
        s = np.eye(jw.shape[0]) + jw @ self.cov @ jw.T
        try:
            gain = float(cg @ np.linalg.solve(s, cg))
        except np.linalg.LinAlgError:
            return 0.0
        return gain if math.isfinite(gain) else 0.0

    def _rows(self, cells: Sequence[str], u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Jacobian rows of ln loss (finite differences) and their weights 1/σ², only for runs
        the fit would take as loss points: inside its window (if any) around their cell's
        optimum, and predicted less than :data:`BLOWUP` above the optimum's loss (past it the
        fit counts a run as a bound)."""
        ci = np.array([self.cells.index(c) for c in cells], dtype=int)
        phi0 = self._phi0()
        du = u - self._centre(phi0, ci)
        with np.errstate(all="ignore"):
            inside = self._excess_at(phi0, ci, u) < 100.0 * BLOWUP  # (NaN: off the model too)
        if self.window is not None:
            inside &= (du > -self.window[0]) & (du < self.window[1])
        ci, u, du = ci[inside], u[inside], du[inside]
        jac = np.empty((ci.size, phi0.size))
        for p in range(phi0.size):
            hi, lo = phi0.copy(), phi0.copy()
            hi[p] += _FD
            lo[p] -= _FD
            jac[:, p] = (self._y(hi, ci, u) - self._y(lo, ci, u)) / (2 * _FD)
        n = self.law.noise
        coef = np.array([n["noise0"], n["rise"], n["fall"]])
        w = 1.0 / sm.noise_sd(coef, du, n["step"]) ** 2
        ok = np.all(np.isfinite(jac), axis=1) & np.isfinite(w)  # a wild early law can overflow
        return jac[ok], w[ok]

    def _phi0(self) -> np.ndarray:
        c = len(self.cells)
        return np.concatenate([np.asarray(self.law.shape_params, float), self.eps, np.zeros(c)])

    def _split(self, phi: np.ndarray) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        t, c = len(self.law.shape_names), len(self.cells)
        th = dict(zip(self.law.shape_names, phi[:t], strict=True))
        return th, phi[t : t + c], phi[t + c :]

    def _centre(self, phi: np.ndarray, ci: np.ndarray) -> np.ndarray:
        th, eps, _ = self._split(phi)
        return th["lr:log_prefactor"] + th["lr:n_params"] * self.lx[ci, 0] + eps[ci]

    def _y(self, phi: np.ndarray, ci: np.ndarray, u: np.ndarray) -> np.ndarray:
        """ln loss of runs at ln lr ``u`` in cells ``ci`` under parameters ``phi``."""
        _, _, lev = self._split(phi)
        return lev[ci] + np.log1p(self._excess_at(phi, ci, u) / 100.0)

    def _excess_at(self, phi: np.ndarray, ci: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Loss excess (%) over the cell's optimum of runs at ln lr ``u`` in cells ``ci``."""
        th, _, _ = self._split(phi)
        x = self.lx[ci, 0]
        lk = th["lr:log_curvature"] + th.get("lr:log_curvature:n_params", 0.0) * x
        a = th["lr:asymmetry"] + th.get("lr:asymmetry:n_params", 0.0) * x
        psi = np.full(ci.size, max(th.get("lr:saturation", 0.0), 0.0))
        return _excess(u - self._centre(phi, ci), lk, a, psi)

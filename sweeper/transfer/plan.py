"""Prove the transfer: predict a held-out cell from the others, then train it there.

The check a user runs before trusting an extrapolation:

1. fit the LR law on the fit set (every cell but the held-out one, or those a filter keeps:
   ``fit_cells``, see :mod:`sweeper.transfer.holdout`);
2. predict the held-out cell's optimal LR (a cell of the sweep, or a new, larger one named like
   the sweep's cells), and take the baselines: reuse the smallest or the largest fitted cell's
   optimum, the published laws (Step Law, DeepSeek, in their own conventions), and under
   muP/CompleteP the base width's optimum reused as muP prescribes;
3. train the held-out cell at each of those LRs with K seeds, and on a sqrt(2) grid around the
   prediction, extended one step at a time until the best point has a trained neighbour on both
   sides (at most 3 octaves from the prediction), through the same launch machinery and storage
   (a one-cell sweep ``<sweep>.transfer.<cell>``; asking more seeds later adds them in a sweep
   of their own beside it, ``<check>.seeds-<first>-<last>``, see :func:`~sweeper.transfer.run.seed_blocks`; planned
   again after the law moved, a check keeps what it trained and trains the new LRs beside it,
   see :func:`~sweeper.transfer.run.with_fills`);
4. report, for the prediction and every baseline, the regret (its loss over the best point trained
   in the cell, in % of that loss) and the log2 error against the cell's measured optimum (the
   parabola estimate on every run in the cell), and how far the check extrapolated (N and D of the
   held-out cell over the largest fitted cell's).

This module holds steps 1, 2 and 4 and the grid's next step: planning (:func:`plan_transfer`),
summarizing (:func:`summarize_transfer`) and the rows of its table (:func:`transfer_rows`), pure
functions on DataFrames. Step 3, which launches, extends and stores, is
:func:`sweeper.transfer.run.run_transfer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError, SweeperError
from sweeper.fitting import CellOptimum, estimate_optima
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.fit_runs import CELL_SEED, FitOptions
from sweeper.fitting.laws import Law
from sweeper.fitting.methods import DEFAULT_METHOD
from sweeper.fitting.optimum import BEST_POINT_NOTE
from sweeper.transfer.holdout import CellFilter, HeldCell

if TYPE_CHECKING:
    from sweeper.study.spec import StudySpec

__all__ = [
    "TransferPlan",
    "TransferResult",
    "next_grid_step",
    "plan_transfer",
    "summarize_transfer",
    "transfer_rows",
    "transfer_where",
]

#: the baselines, by point name, and what each is
BASELINES: Final[dict[str, str]] = {
    "smallest_cell": "reuse the smallest fitted cell's optimum",
    "largest_fitted": "reuse the largest fitted cell's optimum",
    "steplaw": "Step Law (published, arXiv:2503.04715)",
    "deepseek": "DeepSeek LLM (published, arXiv:2401.02954)",
    "porian": "Porian et al. (published, arXiv:2406.19146)",
    "base_width": "reuse the base width's optimum, as muP prescribes",
}
#: the published baselines, each evaluated in its own conventions
_PUBLISHED: Final[tuple[str, ...]] = ("steplaw", "deepseek", "porian")
#: hyperparameter columns that tell two points of a sweep apart (the seeds of one point are averaged)
_POINT_KEYS: Final[tuple[str, ...]] = ("lr", "batch_size", "warmup", "weight_decay", "beta2")
#: LRs within this relative distance are one point (the check and its runs share it)
SAME: Final[float] = 1e-6
#: a law LR this close (relative) to one the check trained is that one (see TransferPlan.snapped)
SNAP: Final[float] = 0.01
#: the planned points that come from the law's draws (the rest are deterministic)
_DRAWN: Final[tuple[str, ...]] = ("law", "law_point")
#: the grid step and how far the grid may reach from the prediction (log2)
GRID_STEP: Final[float] = math.sqrt(2.0)
GRID_CAP_OCTAVES: Final[float] = 3.0


@dataclass(frozen=True)
class TransferPlan:
    """What to train in the held-out cell, and the law that proposed it.

    ``lrs``: point name → LR: ``law`` (the recommended LR: the surface law's risk-aware one, else
    the point estimate), ``law_point`` (the point estimate), the baselines of :data:`BASELINES`
    that apply, ``measured_optimum`` (a held-out cell of the sweep: its swept optimum, trained with
    the same seeds as a like-for-like reference) and grid points ``grid±k`` (k sqrt(2) steps from
    the point estimate)."""

    sweep: str
    holdout: HeldCell
    law: Law
    fit_cells: tuple[str, ...]
    lrs: Mapping[str, float]
    extrapolation: Mapping[str, float]
    optima: tuple[CellOptimum, ...] = ()
    #: fit-set cells the law left out of its fit (a surface law's bound-only cells)
    unfitted: tuple[str, ...] = ()
    #: per predictor, the fitted cells' smallest value over the held-out cell's (above 1: the
    #: cell lies below the fitted range; ``extrapolation`` looks only upward)
    extrapolation_below: Mapping[str, float] = field(default_factory=dict)

    @property
    def predicted_lr(self) -> float:
        return self.lrs["law"]

    @property
    def predicted_lr_point(self) -> float:
        return self.lrs.get("law_point", self.lrs["law"])

    @property
    def grid_center(self) -> float:
        """The point estimate as trained: every grid LR is a power of sqrt(2) from it (from the
        unrounded value, a grid point could differ from the same point re-derived later in its
        6th digit)."""
        return as_trained(self.predicted_lr_point)

    def rounded(self) -> TransferPlan:
        """The plan with its LRs as trained (:func:`as_trained`)."""
        return replace(self, lrs={k: as_trained(v) for k, v in self.lrs.items()})

    def snapped(self, trained: Sequence[float]) -> TransferPlan:
        """The plan with the law's LRs (recommended and point), then the grid rebuilt around the
        point estimate, each moved onto an LR the check already trained within :data:`SNAP` of
        it, never onto a baseline's LR. Planning again (a relaunch, more seeds, the check's runs
        carried to another machine) redraws the surface law's samples, which moves those LRs by a
        fraction of a percent (and the grid's by a digit of rounding); the points trained for
        them stay the points."""
        fixed = [v for k, v in self.lrs.items() if k not in _DRAWN and not k.startswith("grid")]
        done = [
            lr
            for lr in {float(x) for x in trained if x > 0}
            if not any(math.isclose(as_trained(lr), as_trained(f), rel_tol=SAME) for f in fixed)
        ]

        def snap(lrs: dict[str, float], names: Sequence[str]) -> dict[str, float]:
            for name in names:
                near = min(done, key=lambda x: abs(math.log(x / lrs[name])), default=None)
                if near is not None and abs(math.log(near / lrs[name])) <= math.log1p(SNAP):
                    lrs[name] = near
            return lrs

        lrs = {k: v for k, v in self.lrs.items() if not k.startswith("grid")}
        plan = replace(self, lrs=snap(lrs, [k for k in _DRAWN if k in lrs]))
        grid = [int(k.removeprefix("grid")) for k in self.lrs if k.startswith("grid")]
        plan = plan.with_grid(grid)
        return replace(
            plan, lrs=snap(dict(plan.lrs), [k for k in plan.lrs if k.startswith("grid")])
        )

    def with_trained(self, lrs: Sequence[float]) -> TransferPlan:
        """The plan with every grid point among ``lrs`` (LRs already trained in the check: a
        relaunch finds the grid an earlier launch extended)."""
        center = self.grid_center
        steps = []
        for lr in lrs:
            k = round(math.log(lr / center) / math.log(GRID_STEP))
            if k and math.isclose(lr, as_trained(center * GRID_STEP**k), rel_tol=1e-6):
                steps.append(k)
        return self.with_grid(steps)

    def with_grid(self, steps: Sequence[int]) -> TransferPlan:
        """The plan with the grid points ``grid±k`` for every k in ``steps`` (k ≠ 0)."""
        center = self.grid_center
        # rounded as trained (6 significant digits): a re-derived point must match its runs
        extra = {_grid_name(k): as_trained(center * GRID_STEP**k) for k in steps if k != 0}
        return replace(self, lrs={**self.lrs, **extra})


def as_trained(lr: float) -> float:
    """An LR as the check trains it (6 significant digits)."""
    return float(f"{lr:.6g}")


def _grid_name(k: int) -> str:
    return f"grid{k:+d}"


@dataclass(frozen=True)
class TransferResult:
    """Predicted against measured, and the regret of each point (% of the best trained loss).

    ``best_swept_loss`` is the best point trained in the held-out cell (the sweep's runs of the
    cell and the check's own, seeds averaged): the reference of every regret. ``baselines`` maps a
    baseline's name to its ``lr``, ``regret_pct`` and ``log2_error``."""

    sweep: str
    holdout_cell: str
    fit_cells: tuple[str, ...]
    extrapolation: Mapping[str, float]
    predicted_lr: float
    predicted_lr_point: float
    predicted_lr_interval: tuple[float, float]
    measured_lr: float
    measured_lr_ci: tuple[float, float] | None
    ratio: float  # predicted / measured
    log2_error: float
    log2_error_point: float
    best_swept_loss: float
    losses: Mapping[str, float]  # point name → mean loss over seeds
    loss_sd: Mapping[str, float]  # point name → sd over seeds
    lrs: Mapping[str, float]
    regret_pct: float | None  # None: every seed at the prediction diverged (a note says so)
    regret_point_pct: float | None
    baselines: Mapping[str, Mapping[str, float | None]]
    baseline_regret_pct: float | None  # the "reuse the smallest cell's optimum" baseline
    published_regret_pct: float | None  # Step Law's
    regret_vs_optimum_pct: float | None  # law point against the measured optimum, same seeds
    # the resolution of the figures above: the standard error of regret_pct from the seed spread
    # of the law point and of the best point, and the median grid step trained (log2)
    regret_se_pct: float | None
    grid_step_log2: float | None
    seeds: int
    law_exponents: Mapping[str, float]
    law_cells: int
    law: Law | None = None  # the law fitted without the held-out cell
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: per predictor, the fitted cells' smallest value over the held-out cell's: above 1, the
    #: cell lies below the fitted range (stored checks from before it lack the key)
    extrapolation_below: Mapping[str, float] = field(default_factory=dict)

    @property
    def extrapolation_factor(self) -> float:
        """How far beyond the fit set the held-out cell lies: the larger of its N and D over the
        largest fitted cell's (as recommend counts a recipe's extrapolation); below 1 for a cell
        below the largest, inside the fitted range or below it (``extrapolation_below``)."""
        return float(max(self.extrapolation.values(), default=1.0))

    def __repr__(self) -> str:  # (a notebook's display: the verdict, not 5k characters)
        regret = "no regret (every seed diverged)" if self.regret_pct is None else (
            f"regret {self.regret_pct:+.2f}%"
            + (f" ± {self.regret_se_pct:.2f}" if self.regret_se_pct is not None else "")
        )
        return (
            f"TransferResult({self.sweep}: {self.holdout_cell} held out, "
            f"{transfer_where(vars(self))}; {self.law_cells} fitted cells; predicted lr "
            f"{self.predicted_lr:.3g} against the measured {self.measured_lr:.3g} (log2 "
            f"{self.log2_error:+.2f}); {regret} over {self.seeds} seed(s); "
            f"{len(self.baselines)} baselines, {len(self.notes)} notes)"
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["law"] = self.law.to_dict() if self.law is not None else None
        d["extrapolation_factor"] = self.extrapolation_factor
        d["baseline"] = BASELINES["smallest_cell"]
        d["published_baseline"] = "steplaw"
        return d


# ---- planning ----------------------------------------------------------------------------------
def plan_transfer(
    runs: pd.DataFrame,
    *,
    sweep: str,
    holdout: str = "largest",
    fit_cells: CellFilter | None = None,
    spec: StudySpec | None = None,
    predictors: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
    surface: str = "standard",
    n_boot: int = 200,
    seed: int = 0,
    conventions: Conventions | None = None,
) -> TransferPlan:
    """Fit the LR law on the fit set and choose the LRs to train in the held-out cell.

    ``holdout``: ``"largest"`` (the largest cell outside the fit set) or a cell name, of the sweep
    or new (then ``spec``, the sweep's study, gives everything but its shape and budget).
    ``fit_cells``: which cells the law is fitted on (default: all but the held-out one).
    ``method``, ``surface``: as :class:`~sweeper.fitting.fit_runs.FitOptions`; a cell counts when
    it has the runs the method needs.
    """
    opts = FitOptions(method=method, surface=surface, n_boot=max(n_boot, 200), cell_boot=n_boot,
                      seed=seed)  # fmt: skip
    optima = estimate_optima(runs, method="parabola", n_boot=n_boot, seed=CELL_SEED,
                             min_runs=opts.cell_min_runs())  # fmt: skip
    held = _held_cell(optima, holdout, fit_cells, spec)
    fitted = [
        o
        for o in optima
        if o.usable and o.cell != held.name and (fit_cells is None or fit_cells(_facts(o)))
    ]
    if len(fitted) < 3:  # (the cells to choose from said too: "0 usable cells ()", an audit)
        given = f" {fit_cells.text!r}" if fit_cells is not None else ""
        have = [o.cell for o in optima if o.usable and o.cell != held.name]
        raise FitError(
            f"the fit set{given} has {len(fitted)} usable cells"
            f"{' (' + ', '.join(o.cell for o in fitted) + ')' if fitted else ''}: a law needs 3; "
            f"the usable cells besides the held-out one: {', '.join(have) or 'none'}"
        )
    fit_runs = runs[runs["cell"].isin({o.cell for o in fitted})]
    law = _fit_law(fit_runs, fitted, opts, predictors, sweep, conventions)
    fitted, unfitted = _law_cells(law, fitted)
    scale = held.scale()
    point = law.predict(scale)
    risk = getattr(law, "risk_optimal_lr", None)
    lrs: dict[str, float] = {"law": float(risk(scale)) if risk is not None else point}
    if not math.isclose(lrs["law"], point, rel_tol=SAME):
        lrs["law_point"] = point
    lrs.update(_baselines(fitted, held, conventions))
    own = next((o for o in optima if o.cell == held.name and o.lr), None)
    if own is not None:
        lrs["measured_optimum"] = float(own.lr)  # type: ignore[arg-type]
    largest = max(fitted, key=lambda o: (o.n_params or 0.0, o.tokens or 0.0))
    extrapolation = {
        "n_params": held.n_params / float(largest.n_params or held.n_params),
        "tokens": held.tokens / float(largest.tokens or held.tokens),
    }
    below = {
        p: min(float(getattr(o, p) or mine) for o in fitted) / mine
        for p, mine in (("n_params", held.n_params), ("tokens", held.tokens))
        if mine > 0
    }
    plan = TransferPlan(
        sweep=sweep,
        holdout=held,
        law=law,
        fit_cells=tuple(o.cell for o in fitted),
        lrs=lrs,
        extrapolation=extrapolation,
        optima=tuple(optima),
        unfitted=unfitted,
        extrapolation_below=below,
    )
    return plan if own is not None else plan.with_grid((-1, 1))


def _law_cells(
    law: Law, fitted: Sequence[CellOptimum]
) -> tuple[list[CellOptimum], tuple[str, ...]]:
    """The fit-set cells the law was fitted on, and those it left out: a surface law keeps a
    cell whose runs only bound its optimum out of its fit (its ``cell_optima`` has none). The
    cells named, the extrapolation and the largest fitted cell's baseline are the law's (a
    transfer audit: such a cell had been named, measured from and reused, beside a law of one
    cell fewer)."""
    used = getattr(law, "cell_optima", None)
    kept = [o for o in fitted if not used or o.cell in used]
    if not kept:
        return list(fitted), ()
    return kept, tuple(o.cell for o in fitted if o not in kept)


def _facts(o: CellOptimum) -> dict[str, Any]:
    return {"width": o.width, "depth": o.depth, "n_params": o.n_params, "tokens": o.tokens}


def _held_cell(
    optima: Sequence[CellOptimum],
    holdout: str,
    fit_cells: CellFilter | None,
    spec: StudySpec | None,
) -> HeldCell:
    """The held-out cell: the largest cell outside the fit set, a named cell of the sweep, or a
    new cell (``spec`` required)."""
    usable = [o for o in optima if o.usable]
    if holdout == "largest":
        pool = [o for o in usable if fit_cells is None or not fit_cells(_facts(o))]
        if not pool:  # (the fix said too: an audit's "width<=32" kept every cell)
            raise FitError(
                f"no usable cell outside the fit set {fit_cells.text!r} to hold out: narrow "
                "fit_cells (--fit-cells), or name the cell to predict with holdout (--holdout "
                "CELL), a new cell too"
                if fit_cells is not None
                else "no cell has a usable optimum; nothing to hold out"
            )
        return _held_of(max(pool, key=lambda o: (o.n_params or 0.0, o.tokens or 0.0)))
    for o in optima:
        if o.cell == holdout:
            if not o.usable:
                raise FitError(f"cell {holdout!r} has no usable optimum ({o.reason}); pick another")
            return _held_of(o)
    if spec is None:
        raise SweeperError(f"no cell {holdout!r}; cells: {', '.join(o.cell for o in optima)}")
    return _new_cell(holdout, spec)


def _held_of(o: CellOptimum) -> HeldCell:
    seq = int(o.seq_len or 0)
    batch = round(o.batch_tokens / seq) if o.batch_tokens and seq else 0
    return HeldCell(
        name=o.cell,
        width=int(o.width or 0),
        depth=int(o.depth or 0),
        tokens=float(o.tokens or 0.0),
        n_params=float(o.n_params or 0.0),
        n_params_total=float(o.n_params_total or 0.0),
        flops=float(o.flops or 0.0),
        seq_len=seq,
        batch_size=max(1, batch),
        in_sweep=True,
    )


def _new_cell(name: str, spec: StudySpec) -> HeldCell:
    """A cell the sweep has no runs of, from its name and the sweep's study."""
    from sweeper.study.ladder import cells
    from sweeper.study.spec import CellSpec, LadderSpec
    from sweeper.transfer.holdout import parse_cell_name

    budgets = [c.tokens for c in cells(spec)]
    width, depth, tokens = parse_cell_name(name, budgets)
    one = replace(
        spec, ladder=LadderSpec(cells=(CellSpec(width=width, depth=depth, tokens=tokens),))
    )
    cell = cells(one)[0]
    bs = spec.search.batch_size
    if bs.values is None or len(bs.values) != 1:
        raise SweeperError(
            f"holdout (--holdout) {name}: the sweep searched the batch size; a new cell needs one fixed "
            "batch (hold out a cell of the sweep instead)"
        )
    return HeldCell(
        name=cell.name,
        width=cell.width,
        depth=cell.depth,
        tokens=float(cell.tokens),
        n_params=float(cell.n_params),
        n_params_total=float(cell.n_params_total),
        flops=float(cell.flops),
        seq_len=cell.context,
        batch_size=int(bs.values[0]),
        in_sweep=False,
    )


def _fit_law(
    runs: pd.DataFrame,
    fitted: Sequence[CellOptimum],
    opts: FitOptions,
    predictors: Sequence[str] | None,
    sweep: str,
    conventions: Conventions | None,
) -> Law:
    """The LR law of the fit set, by ``opts.method`` (parabola: the weighted law through the
    optima)."""
    from sweeper.fitting.fit_runs import default_predictors, fit_runs

    preds = tuple(predictors) if predictors else default_predictors(fitted)
    out = fit_runs(
        runs,
        conventions=conventions or Conventions(),
        source=sweep,
        target="lr",
        predictors=preds,
        options=opts,
    )
    return out.laws[0]


def _baselines(
    fitted: Sequence[CellOptimum], held: HeldCell, conventions: Conventions | None
) -> dict[str, float]:
    """The LR each baseline of :data:`BASELINES` would train the held-out cell at."""
    from sweeper.recipe.published import published_laws
    from sweeper.recipe.scale import DEFAULT_SEQ_LEN, infer_shape, law_scale

    by_size = sorted(fitted, key=lambda o: (o.n_params or 0.0, o.tokens or 0.0))
    out = {
        "smallest_cell": float(by_size[0].lr),  # type: ignore[arg-type]
        "largest_fitted": float(by_size[-1].lr),  # type: ignore[arg-type]
    }
    width, depth, shape_given = held.width, held.depth, held.width > 0 and held.depth > 0
    if not shape_given:  # runs imported without a shape: as recommend infers one
        width, depth = infer_shape(held.n_params)
    for name in _PUBLISHED:
        law = published_laws(name)["lr"]
        scale = law_scale(
            law,
            n_params=held.n_params,
            tokens=held.tokens,
            width=width,
            depth=depth,
            seq_len=held.seq_len or DEFAULT_SEQ_LEN,
            n_params_total=held.n_params_total or None,
        )
        out[name] = float(law.predict(scale))
    conv = conventions or Conventions()
    if conv.parametrization in ("mup", "completep") and conv.base_width:
        at_base = [o for o in fitted if o.width == conv.base_width]
        if at_base:
            near = min(
                at_base,
                key=lambda o: (
                    abs(math.log((o.depth or 1) / max(held.depth, 1))),
                    abs(math.log((o.tokens or 1.0) / held.tokens)),
                ),
            )  # fmt: skip
            out["base_width"] = float(near.lr)  # type: ignore[arg-type]
    return out


# ---- summarizing -------------------------------------------------------------------------------
def _point_losses(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sd and count of the loss per point (seeds averaged; points told apart by every
    hyperparameter column present, so that different batch sizes are never averaged together).
    A diverged run is left out: its loss is a number (the loop's last, 72 or 1857 nats), not a
    result to average (:func:`_trained_losses` says which points diverged)."""
    diverged = runs["diverged"].astype(bool) if "diverged" in runs else False
    ok = runs[(runs["state"] == "COMPLETE") & np.isfinite(runs["loss"]) & ~diverged]
    keys = [k for k in _POINT_KEYS if k in ok.columns and ok[k].notna().all()]
    return ok.groupby(keys)["loss"].agg(["mean", "std", "count"]).reset_index()


def summarize_transfer(
    plan: TransferPlan, sweep_runs: pd.DataFrame, transfer_runs: pd.DataFrame
) -> TransferResult:
    """Compare the trained points with everything trained in the held-out cell."""
    held = plan.holdout
    cell_runs = one_run_per_seed(
        pd.concat([sweep_runs[sweep_runs["cell"] == held.name], transfer_runs], ignore_index=True)
    )
    points = _point_losses(cell_runs)
    if points.empty:
        raise FitError(f"no completed run in {held.name}")
    best_row = points.loc[points["mean"].idxmin()]
    best = float(best_row["mean"])
    lrs_trained = np.unique(np.log2(points["lr"].to_numpy(dtype=float)))
    grid_step = float(np.median(np.diff(lrs_trained))) if len(lrs_trained) > 1 else None
    measured, measured_ci, opt_notes = _measured_optimum(cell_runs, held.name, best_row)
    losses, sds, notes = _trained_losses(plan.lrs, transfer_runs)
    notes = [*_law_doubts(plan), *_unit_notes(plan), *opt_notes, *notes]

    def regret(name: str) -> float | None:
        return 100.0 * (losses[name] - best) / best if name in losses else None

    seeds = int(transfer_runs["seed"].nunique()) if "seed" in transfer_runs else 1
    regret_se = None
    # (no sd at the law's LR, one seed left by divergence: no standard error, not a spread of 0)
    if "law" in sds and seeds > 1 and best_row["count"] > 1:
        var = sds["law"] ** 2 / seeds + float(best_row["std"]) ** 2 / float(best_row["count"])
        regret_se = 100.0 * math.sqrt(var) / best
    vs_opt = None
    if "measured_optimum" in losses and "law" in losses:
        vs_opt = 100.0 * (losses["law"] - losses["measured_optimum"]) / losses["measured_optimum"]
    baselines = {
        name: {
            "lr": plan.lrs[name],
            "regret_pct": regret(name),
            "log2_error": math.log2(plan.lrs[name] / measured),
        }
        for name in BASELINES
        if name in plan.lrs
    }
    pred, point = plan.predicted_lr, plan.predicted_lr_point
    return TransferResult(
        sweep=plan.sweep,
        holdout_cell=held.name,
        fit_cells=plan.fit_cells,
        extrapolation=dict(plan.extrapolation),
        predicted_lr=pred,
        predicted_lr_point=point,
        predicted_lr_interval=plan.law.interval(held.scale()),
        measured_lr=measured,
        measured_lr_ci=measured_ci,
        ratio=pred / measured,
        log2_error=math.log2(pred / measured),
        log2_error_point=math.log2(point / measured),
        best_swept_loss=best,
        losses=losses,
        loss_sd=sds,
        lrs=dict(plan.lrs),
        regret_pct=regret("law"),
        regret_point_pct=regret("law_point" if "law_point" in plan.lrs else "law"),
        baselines=baselines,
        baseline_regret_pct=regret("smallest_cell"),
        published_regret_pct=regret("steplaw"),
        regret_vs_optimum_pct=vs_opt,
        regret_se_pct=regret_se,
        grid_step_log2=grid_step,
        seeds=seeds,
        law_exponents=dict(getattr(plan.law, "exponents", {})),
        law_cells=int(getattr(plan.law, "n_cells", len(plan.fit_cells))),
        law=plan.law,
        notes=tuple(notes),
        extrapolation_below=dict(plan.extrapolation_below),
    )


def _law_doubts(plan: TransferPlan) -> list[str]:
    """What recommend would say of the law at the held-out cell: a cell outside what the law's
    cells held (a tokens-blind law at a new budget), a wide interval (recommend's
    ``WIDE_INTERVAL``), a risk-aware LR above the point estimate (an audit's check said none
    of it)."""
    from sweeper.recipe.doubts import WIDE_INTERVAL, above_point_warnings, span_text
    from sweeper.recipe.scale import regime_values, regime_warnings

    held, law = plan.holdout, plan.law
    batch = float(held.batch_size * held.seq_len)
    values = regime_values(held.n_params, held.tokens, batch, depth=held.depth or None)
    out = [str(w) for w in regime_warnings(law, "lr", values)]
    lo, hi = law.interval(held.scale())
    if not (lo > 0 and hi / lo <= WIDE_INTERVAL):
        out.append(f"the law's 95% interval at the held-out cell {span_text(hi / lo)} (poorly "
                   "constrained): a small regret there says little about the law")  # fmt: skip
    out += [str(w) for w in above_point_warnings(law, plan.predicted_lr, plan.predicted_lr_point)]
    if plan.unfitted:
        out.append(f"left out of the law's fit, its runs only a bound on the optimum: "
                   f"{', '.join(plan.unfitted)} (not counted as fitted cells)")  # fmt: skip
    return out


def _unit_notes(plan: TransferPlan) -> list[str]:
    """A note when the sweep counts bytes (the fitted law's ``Conventions.counts_bytes``) and a
    published baseline counts tokens: it was evaluated at the held-out cell's bytes, unconverted,
    which ``compare`` and ``check`` warn of (an audit's check said nothing). Its LR stays as
    planned (trained, and committed as evidence); the note says what it is."""
    from sweeper.recipe.published import published_laws

    conv = plan.law.conventions
    if not conv.counts_bytes:
        return []
    names = [BASELINES[n].split(" (")[0] for n in _PUBLISHED
             if n in plan.lrs and not published_laws(n)["lr"].conventions.counts_bytes]  # fmt: skip
    if not names:
        return []
    who = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    data = f" {conv.data!r}" if conv.data else ""
    return [
        f"{who} count{'s' if len(names) == 1 else ''} D and the batch in tokenizer tokens, this "
        f"sweep in bytes (byte-level data{data}): evaluated at the held-out cell's bytes taken as "
        "tokens, unconverted (a BPE token is about 4 bytes of English text), their LRs are not "
        "what they would give a tokenized model of this size, nor their regrets theirs"
    ]


def one_run_per_seed(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with one finished run per (LR, batch, seed), the first kept; unfinished runs and
    runs without a seed (an imported file may have none) are kept as they are. A check retrains
    the cell's swept optimum at the sweep's seeds, and a fill block retrains seeds its read-only
    block finished: counted twice, they weighed double in the best loss and its standard error
    (an audit's regret came out negative)."""
    seeds = runs["seed"] if "seed" in runs else pd.Series(np.nan, runs.index)
    key = pd.DataFrame(
        {
            "lr": np.round(np.log(runs["lr"].to_numpy(dtype=float)), 9),
            "batch": runs["batch_tokens"].round(6) if "batch_tokens" in runs else 0.0,
            "seed": seeds,
        },
        index=runs.index,
    )
    counted = finished(runs) & seeds.notna()
    again = key[counted].duplicated(keep="first")
    return runs.drop(index=again[again].index).reset_index(drop=True)


def finished(runs: pd.DataFrame) -> pd.Series:
    """Which runs finished: diverged, or COMPLETE (or stateless, as imported) with a loss."""
    diverged = runs["diverged"].astype(bool)
    return diverged | ((runs["state"].fillna("COMPLETE") == "COMPLETE") & runs["loss"].notna())


def _measured_optimum(
    cell_runs: pd.DataFrame, cell: str, best: pd.Series
) -> tuple[float, tuple[float, float] | None, list[str]]:
    """The held-out cell's optimum from every run in it (parabola, edges kept: the grid around
    the prediction is what bounds it), its interval, and what the estimate noted, said as the
    measured optimum's (a parabola that fell back to the best trained point had left every log2
    error measured against a grid point, in silence: an audit). Where it fell back, the best
    point is ``best``, the regret table's: the estimate counts LRs 1% apart as one grid point,
    and had averaged the law's 0.00402 with the grid's 0.004 into a point that lost to 0.00284,
    which stood as the optimum beside a table whose best was 0.004 (a transfer audit)."""
    runs = cell_runs.assign(cell=cell)
    (opt,) = estimate_optima(runs, method="parabola", n_boot=100, keep_edge=True, min_runs=2)
    if opt.lr is None:
        raise FitError(f"{cell}: no optimum can be measured ({opt.reason})")
    lr, lr_ci = float(opt.lr), opt.lr_ci
    if BEST_POINT_NOTE in opt.notes:
        lr = float(best["lr"])
        lr_ci = lr_ci if lr_ci and lr_ci[0] <= lr <= lr_ci[1] else None
    ci = (
        f" (95% {lr_ci[0]:.3g}-{lr_ci[1]:.3g})"
        if lr_ci and all(math.isfinite(v) for v in lr_ci)
        else ""
    )
    notes = [f"measured optimum {lr:.3g}{ci}: {n}" for n in opt.notes]
    return lr, lr_ci, notes


def _trained_losses(
    lrs: Mapping[str, float], transfer_runs: pd.DataFrame
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """Mean and sd over the seeds that did not diverge of the loss (nats) trained at each planned
    LR (point name → LR; no sd where one seed did), and a note per point where seeds diverged:
    some (the mean is the others'), or every one (the point has no loss and no regret: it is not
    a number to rank)."""
    trained = _point_losses(transfer_runs)
    losses: dict[str, float] = {}
    sds: dict[str, float] = {}
    notes: list[str] = []
    for name, lr in lrs.items():
        at = np.isclose(transfer_runs["lr"], lr, rtol=SAME)
        n_div = int((at & transfer_runs["diverged"].astype(bool)).sum())
        row = (
            trained.iloc[(np.abs(np.log(trained["lr"] / lr))).argsort()[:1]]
            if len(trained)
            else trained
        )
        if row.empty or abs(math.log(float(row["lr"].iloc[0]) / lr)) > SAME:
            if n_div:
                notes.append(
                    f"{name}: diverged at lr {lr:.3g} (every seed, {n_div}): no loss, no regret"
                )
                continue
            raise FitError(f"no completed transfer run at the {name} LR {lr:.3g}")
        if n_div:
            notes.append(
                f"{name}: {n_div} of {n_div + int(row['count'].iloc[0])} seeds diverged at lr "
                f"{lr:.3g} (its loss is the others' mean)"
            )
        losses[name] = float(row["mean"].iloc[0])
        if row["count"].iloc[0] > 1:  # (one seed has no spread: no sd, not 0)
            sds[name] = float(row["std"].iloc[0])
    return losses, sds, notes


def next_grid_step(plan: TransferPlan, cell_runs: pd.DataFrame) -> int | None:
    """The grid step (k sqrt(2) steps from the point estimate) to train next so that the best
    point of the held-out cell gets a trained neighbour on its open side; None when it has one on
    both sides (a diverged run counts above), or when the next step would leave the 3-octave cap."""
    points = _point_losses(cell_runs)
    if points.empty:
        return None
    best_lr = float(points.loc[points["mean"].idxmin(), "lr"])
    lrs = points["lr"].to_numpy(dtype=float)
    div = cell_runs.loc[cell_runs["diverged"].astype(bool), "lr"].to_numpy(dtype=float)
    reach = GRID_STEP * 1.01
    below = bool(np.any((lrs < best_lr * (1 - SAME)) & (lrs >= best_lr / reach)))
    above = bool(
        np.any((lrs > best_lr * (1 + SAME)) & (lrs <= best_lr * reach))
        or np.any((div > best_lr * (1 + SAME)) & (div <= best_lr * reach))
    )
    if below and above:
        return None
    center = plan.grid_center
    k_best = round(math.log(best_lr / center) / math.log(GRID_STEP))
    k = k_best - 1 if not below else k_best + 1
    if abs(k) * 0.5 > GRID_CAP_OCTAVES or _grid_name(k) in plan.lrs:
        return None
    return k


#: what each trained point of a check is, by point name (grid points keep their own name)
POINT_NAMES: Final[dict[str, str]] = {
    "law": "law prediction (recommended)",
    "law_point": "law prediction (point)",
    "measured_optimum": "the cell's swept optimum",
    **BASELINES,
}


def transfer_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per trained point of a check (``TransferResult.to_dict()`` or the stored form),
    by LR: what it is, its LR, mean loss and seed sd (None from one seed: no spread), regret (% of
    the best loss trained in the cell) and log2 distance to the cell's measured optimum."""
    best, measured = float(result["best_swept_loss"]), float(result["measured_lr"])
    sds = {} if int(result.get("seeds") or 1) == 1 else result.get("loss_sd") or {}
    rows = []
    for name, lr in sorted(result["lrs"].items(), key=lambda kv: kv[1]):
        loss = result["losses"].get(name)
        rows.append(
            {
                "point": POINT_NAMES.get(name, name),
                "lr": float(lr),
                "loss": loss,
                "sd": float(sds[name]) if sds.get(name) is not None else None,
                "regret_pct": 100.0 * (loss - best) / best if loss is not None else None,
                "log2_error": math.log2(float(lr) / measured),
            }
        )
    return rows


def transfer_where(result: Mapping[str, Any]) -> str:
    """Where the held-out cell lies against the fitted cells, in words, from a check's
    ``to_dict()`` or stored form: beyond the largest fitted cell, below the smallest, or inside
    the range (an interpolation). A cell below the fitted range had been called inside it: only
    the ratios to the largest cell were looked at (a verbs audit). A check stored before
    ``extrapolation_below`` was recorded is read with the largest cell's ratios alone."""
    up = result.get("extrapolation") or {}
    ratios = ", ".join(f"{k} {float(v):.3g}×" for k, v in up.items())
    low = {k: float(v) for k, v in (result.get("extrapolation_below") or {}).items() if v > 1.0}
    if not low:
        if max(up.values(), default=1.0) <= 1.0:
            return f"{ratios} the largest fitted cell: inside the fitted range, an interpolation"
        return f"{ratios} beyond the largest fitted cell"
    under = ", ".join(f"{k} {v:.3g}×" for k, v in low.items())
    far = {k: float(v) for k, v in up.items() if v > 1.0}
    over = ", ".join(f"{k} {v:.3g}×" for k, v in far.items())
    return (
        f"{under} below the smallest fitted cell"
        + (f", {over} beyond the largest" if far else "")
        + ": an extrapolation"
    )

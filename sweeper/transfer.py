"""Prove the transfer: predict a held-out cell from the others, then train it at the prediction.

The check a user runs before trusting an extrapolation:

1. estimate every cell's optimum (:func:`sweeper.fit.estimate_optima`);
2. refit the LR law without the held-out cell (by default the largest one);
3. predict that cell's optimal LR, and take two baselines: "reuse the smallest cell's optimum"
   (what copying from a small model does) and a published law (Step Law, in its own conventions);
4. train the held-out cell at each of those LRs with K seeds through the same launch machinery and
   storage (a one-cell sweep ``<sweep>.transfer`` with the LRs as a grid);
5. report the predicted against the measured optimum (ratio, log2 error) and the regret: the loss at
   each LR over the best loss swept in that cell, in % of that loss.

Planning (:func:`plan_transfer`) and summarizing (:func:`summarize_transfer`) are pure functions
on DataFrames; only :func:`run_transfer` launches and stores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from sweeper import storage
from sweeper.errors import FitError, SweeperError
from sweeper.fit import CellOptimum, estimate_optima, fit_power_law
from sweeper.laws import PowerLaw
from sweeper.published import published_laws

__all__ = ["TransferPlan", "TransferResult", "plan_transfer", "run_transfer", "summarize_transfer"]

#: the points trained in the held-out cell, by the name of what proposed them; the cell's own
#: measured optimum is trained with the same seeds so that the law's point has a like-for-like
#: reference beside "the best loss swept" (a minimum over single runs, biased low)
POINTS = ("law", "smallest_cell", "steplaw", "measured_optimum")
#: hyperparameter columns that tell two points of a sweep apart (the seeds of one point are averaged)
_POINT_KEYS = ("lr", "batch_size", "warmup", "weight_decay", "beta2")


@dataclass(frozen=True)
class TransferPlan:
    """What to train in the held-out cell, and the law that proposed it."""

    sweep: str
    holdout: CellOptimum
    law: PowerLaw
    lrs: Mapping[str, float]  # point name → LR to train
    batch_size: (
        int | None
    )  # sequences; the held-out cell's (or the law's, when the batch was swept)
    optima: tuple[CellOptimum, ...] = ()

    @property
    def predicted_lr(self) -> float:
        return self.lrs["law"]


@dataclass(frozen=True)
class TransferResult:
    """Predicted against measured, and the regret of each point (% of the best swept loss)."""

    sweep: str
    holdout_cell: str
    predicted_lr: float
    predicted_lr_interval: tuple[float, float]
    measured_lr: float
    measured_lr_ci: tuple[float, float] | None
    ratio: float  # predicted / measured
    log2_error: float
    best_swept_loss: float
    fitted_min_loss: float | None
    losses: Mapping[str, float]  # point name → mean loss over seeds
    loss_sd: Mapping[str, float]  # point name → sd over seeds
    lrs: Mapping[str, float]
    regret_pct: float
    baseline_regret_pct: float  # the "reuse the smallest cell's optimum" baseline
    published_regret_pct: float | None
    regret_vs_optimum_pct: float | None  # law point against the measured optimum, same seeds
    # the resolution of the figures above: the standard error of regret_pct from the seed spread
    # of the law point and of the best swept point, and the swept grid's median step (log2)
    regret_se_pct: float | None
    grid_step_log2: float | None
    seeds: int
    law_exponents: Mapping[str, float]
    law_cells: int
    law: PowerLaw | None = None  # the law fitted without the held-out cell
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["law"] = self.law.to_dict() if self.law is not None else None
        d["baseline"] = "reuse the smallest cell's optimum"
        d["published_baseline"] = "steplaw"
        return d


def _pick_holdout(optima: Sequence[CellOptimum], holdout: str) -> CellOptimum:
    usable = [o for o in optima if o.usable]
    if holdout == "largest":
        if not usable:
            raise FitError("no cell has a usable optimum; nothing to hold out")
        return max(usable, key=lambda o: (o.n_params or 0.0, o.tokens or 0.0))
    for o in optima:
        if o.cell == holdout:
            if not o.usable:
                raise FitError(f"cell {holdout!r} has no usable optimum ({o.reason}); pick another")
            return o
    raise SweeperError(f"no cell {holdout!r}; cells: {', '.join(o.cell for o in optima)}")


def plan_transfer(
    runs: pd.DataFrame,
    *,
    sweep: str,
    holdout: str = "largest",
    predictors: Sequence[str] | None = None,
    method: str = "parabola",
    n_boot: int = 200,
    seed: int = 0,
) -> TransferPlan:
    """Fit the LR law without the held-out cell and choose the LRs to train in it."""
    optima = estimate_optima(runs, method=method, n_boot=n_boot, seed=seed)
    held = _pick_holdout(optima, holdout)
    rest = [o for o in optima if o.cell != held.cell and o.usable]
    if predictors is None:
        varying = [
            p
            for p in ("n_params", "tokens")
            if len({getattr(o, p) for o in rest if getattr(o, p) is not None}) > 1
        ]
        predictors = varying or ["n_params"]
    law = fit_power_law(
        rest,
        target="lr",
        predictors=tuple(predictors),
        n_boot=max(n_boot, 200),
        seed=seed,
        source=sweep,
    )
    scale = {p: float(getattr(held, p)) for p in predictors}
    smallest = min(rest, key=lambda o: (o.n_params or 0.0, o.tokens or 0.0))
    step = published_laws("steplaw")["lr"]
    lrs = {
        "law": law.predict(scale),
        "smallest_cell": float(smallest.lr),  # type: ignore[arg-type]
        "steplaw": step.predict(
            {"n_params": float(held.n_params or 0), "tokens": float(held.tokens or 0)}
        ),
        "measured_optimum": float(held.lr),  # type: ignore[arg-type]
    }
    batch = None
    if held.batch_tokens and held.seq_len:
        batch = max(1, round(held.batch_tokens / held.seq_len))
    return TransferPlan(
        sweep=sweep, holdout=held, law=law, lrs=lrs, batch_size=batch, optima=tuple(optima)
    )


def _point_losses(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sd and count of the loss per point (seeds averaged; points told apart by every
    hyperparameter column present, so that different batch sizes are never averaged together)."""
    ok = runs[(runs["state"] == "COMPLETE") & np.isfinite(runs["loss"])]
    keys = [k for k in _POINT_KEYS if k in ok.columns and ok[k].notna().all()]
    return ok.groupby(keys)["loss"].agg(["mean", "std", "count"]).reset_index()


def summarize_transfer(
    plan: TransferPlan, sweep_runs: pd.DataFrame, transfer_runs: pd.DataFrame
) -> TransferResult:
    """Compare the trained points with the sweep's own runs of the held-out cell."""
    held = plan.holdout
    cell_runs = sweep_runs[sweep_runs["cell"] == held.cell]
    swept = _point_losses(cell_runs)
    if swept.empty:
        raise FitError(f"the sweep has no completed run in {held.cell}")
    best_row = swept.loc[swept["mean"].idxmin()]
    best_swept = float(best_row["mean"])
    swept_lrs = np.unique(np.log2(swept["lr"].to_numpy(dtype=float)))
    grid_step = float(np.median(np.diff(swept_lrs))) if len(swept_lrs) > 1 else None
    trained = _point_losses(transfer_runs)
    losses: dict[str, float] = {}
    sds: dict[str, float] = {}
    notes: list[str] = []
    for name, lr in plan.lrs.items():
        row = (
            trained.iloc[(np.abs(np.log(trained["lr"] / lr))).argsort()[:1]]
            if len(trained)
            else trained
        )
        if row.empty or abs(math.log(float(row["lr"].iloc[0]) / lr)) > 1e-6:
            div = transfer_runs[
                np.isclose(transfer_runs["lr"], lr, rtol=1e-6) & transfer_runs["diverged"]
            ]
            if len(div):
                notes.append(f"{name}: diverged at lr {lr:.3g}")
                losses[name] = float(div["loss"].mean())
                sds[name] = 0.0
                continue
            raise FitError(f"no completed transfer run at the {name} LR {lr:.3g}")
        losses[name] = float(row["mean"].iloc[0])
        sds[name] = float(row["std"].iloc[0]) if row["count"].iloc[0] > 1 else 0.0

    def regret(name: str) -> float:
        return 100.0 * (losses[name] - best_swept) / best_swept

    vs_opt = None
    if "measured_optimum" in losses and "law" in losses:
        vs_opt = 100.0 * (losses["law"] - losses["measured_optimum"]) / losses["measured_optimum"]

    seeds = int(transfer_runs["seed"].nunique()) if "seed" in transfer_runs else 1
    regret_se = None
    if "law" in losses and seeds > 1 and best_row["count"] > 1:
        var = sds["law"] ** 2 / seeds + float(best_row["std"]) ** 2 / float(best_row["count"])
        regret_se = 100.0 * math.sqrt(var) / best_swept
    assert held.lr is not None
    pred = plan.predicted_lr
    scale = {p: float(getattr(held, p)) for p in plan.law.predictors}
    return TransferResult(
        sweep=plan.sweep,
        holdout_cell=held.cell,
        predicted_lr=pred,
        predicted_lr_interval=plan.law.interval(scale),
        measured_lr=float(held.lr),
        measured_lr_ci=held.lr_ci,
        ratio=pred / float(held.lr),
        log2_error=math.log2(pred / float(held.lr)),
        best_swept_loss=best_swept,
        fitted_min_loss=held.loss,
        losses=losses,
        loss_sd=sds,
        lrs=dict(plan.lrs),
        regret_pct=regret("law"),
        baseline_regret_pct=regret("smallest_cell"),
        published_regret_pct=regret("steplaw") if "steplaw" in losses else None,
        regret_vs_optimum_pct=vs_opt,
        regret_se_pct=regret_se,
        grid_step_log2=grid_step,
        seeds=seeds,
        law_exponents=dict(plan.law.exponents),
        law_cells=plan.law.n_cells,
        law=plan.law,
        notes=tuple(notes),
    )


def _best_params(sweep: str, cell: str, url: str | None) -> dict[str, Any]:
    """The parameters of the best COMPLETE trial of a launched sweep's cell study."""
    import optuna

    from sweeper.sweep import optuna_storage, study_name

    study = optuna.load_study(study_name=study_name(sweep, cell), storage=optuna_storage(url))
    return dict(study.best_trial.params)


def transfer_sweep_name(sweep: str) -> str:
    return f"{sweep}.transfer"


def run_transfer(
    sweep: str,
    *,
    holdout: str = "largest",
    seeds: int = 2,
    url: str | None = None,
    method: str = "parabola",
    max_concurrent: int | None = None,
    progress: bool = True,
    verbose: int = 0,
) -> TransferResult:
    """Plan, train the held-out cell at the planned LRs (K seeds each), summarize and store."""
    import json

    import sqlalchemy as sa

    from sweeper.importer import load_runs
    from sweeper.launch import launch_study
    from sweeper.study import CellSpec, LadderSpec, ParamSpec, PrunerSpec, SamplerSpec, spec_hash
    from sweeper.sweep import load_sweep_runs, stored_spec

    if seeds < 1:
        raise SweeperError(f"--seeds must be at least 1, got {seeds}")
    runs = load_runs(sweep, url)
    plan = plan_transfer(runs, sweep=sweep, holdout=holdout, method=method)
    spec = stored_spec(sweep, url)
    held = plan.holdout
    lr_values = sorted({float(f"{v:.6g}") for v in plan.lrs.values()})
    plan = replace(plan, lrs={k: float(f"{v:.6g}") for k, v in plan.lrs.items()})
    search = replace(spec.search, lr=ParamSpec.grid(lr_values))
    if plan.batch_size is not None:
        search = replace(search, batch_size=ParamSpec.fixed(plan.batch_size, integer=True))
    # other searched hyperparameters: fixed at the held-out cell's best trial, the point the
    # reference loss comes from (the law only predicts the LR)
    best = _best_params(sweep, held.cell, url)
    for name in ("warmup", "weight_decay", "beta2"):
        p = getattr(search, name)
        if p is not None and not p.is_fixed:
            search = replace(search, **{name: ParamSpec.fixed(float(best[name]))})
    tspec = replace(
        spec,
        sweep=replace(
            spec.sweep,
            name=transfer_sweep_name(sweep),
            trials_per_cell=len(lr_values),
            seeds_per_point=seeds,
            description=f"transfer check of {sweep} on {held.cell}",
        ),
        ladder=LadderSpec(
            cells=(
                CellSpec(
                    width=int(held.width or 0),
                    depth=int(held.depth or 0),
                    tokens=int(held.tokens or 0),
                ),
            )
        ),
        search=search,
        sampler=SamplerSpec(kind="grid", seed=0),
        pruner=PrunerSpec(),  # divergence only: every point must finish
    )
    existing = storage.get_sweep(tspec.name, url)
    force_new = existing is not None and existing.get("spec_hash") != spec_hash(tspec)
    launch_study(
        tspec,
        url=url,
        max_concurrent=max_concurrent,
        force_new=force_new,
        progress=progress,
        verbose=verbose,
    )
    result = summarize_transfer(plan, runs, load_sweep_runs(tspec.name, url))
    row = storage.get_sweep(tspec.name, url)
    meta = dict(row["meta"]) if row else {}
    meta["transfer_result"] = result.to_dict()
    with storage.transaction(url) as conn:
        conn.execute(
            sa.update(storage.sweeps_table)
            .where(storage.sweeps_table.c.name == tspec.name)
            .values(meta_json=json.dumps(meta))
        )
    return result


def stored_transfer(sweep: str, url: str | None = None) -> dict[str, Any] | None:
    """The last transfer result stored for ``sweep``, or None."""
    row = storage.get_sweep(transfer_sweep_name(sweep), url)
    if not row:
        return None
    res = row["meta"].get("transfer_result")
    return dict(res) if res else None

"""The Step Law way to fit a power law of the optimum: every near-optimal run is a point.

A run is near-optimal when its loss is within ``band`` (relative) of its cell's best loss. The law
is OLS in natural-log space through those runs (all the runs of a cell share its predictors, so
this is the weighted fit of each cell's mean log target, weighted by its near-optimal runs).
Targets, predictors, units and the recorded ``conventions.held`` ranges are those of
:mod:`sweeper.fitting.power_law`, where :func:`fit_band_law` is importable too.

Its interval is the parabola law's kind, from the cells, not the runs: the runs of a cell are no
independent measurements of the law (they share the cell's deviation from it), and on one LR grid
they are not even continuous. When the law moves the optimum by whole grid steps from cell to
cell, every cell's near-optimal runs lie exactly on a line, and resampling the runs gave a law of
5 cells ``N^-0.333 [-0.334, -0.333]`` where the truth was -0.3 (2-3 of 40 seeded ladders; a fit
audit). So, with ``c`` cells and ``p`` coefficients:

- below :data:`~sweeper.fitting.power_law.T_INTERVAL_BELOW_DOF` residual degrees of freedom
  (``c - p``; fewer than 7 cells for one predictor), the classical t interval of that weighted
  fit, its residual scale floored (below);
- from there on, percentiles over resamples of the cells (every near-optimal run of a drawn cell
  comes with it), widened by sqrt(c/(c-p))·t/z (:func:`~sweeper.fitting._common.widen_samples`),
  unless the cells scatter about the law less than the floor: then the floored t interval too.

The floor on the scatter of a cell's band optimum about the law (of a cell of average weight:
quantisation does not shrink with a cell's run count) is the larger of
:data:`~sweeper.fitting.power_law.SIGMA_FLOOR` and the quantisation of the target's grid, step /
√12 (0.1 on a √2 LR grid): a band optimum on a grid is placed no closer than that. Measured by
``scripts/calibrate_intervals.py --methods band --reps 200`` (proxy ladders of 4, 5, 7, 10 cells),
the runs' resamples covered the true exponent 0.95, 0.85, 0.98, 0.985 of the time, with median
widths 0.29, 0.20, 0.17, 0.14; these intervals 1.00, 0.995, 1.00, 0.97, widths 0.34, 0.22, 0.22,
0.16 (on the fit audit's 5-cell ``proxy_sweep`` seeds 100-299: 0.79 before, 1.00 now, and no
interval under 0.1 wide where 26 of 200 had been under 0.02). At 3 cells (1 degree of freedom)
the t interval is 2.4x the runs' (median 1.23).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting._common import (
    bootstrap_counts,
    fingerprint,
    single_threaded_blas,
    widen_samples,
    wls_batch,
)
from sweeper.fitting._law_steps import (
    _check_names,
    _doubts,
    _Fit,
    _holdout,
    _log_design,
    _make_law,
    _resid_std,
    _rms,
    _usable_cells,
    held_ranges,
    kept_edges,
)
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw
from sweeper.fitting.optimum import (
    estimate_optima,
    grid_step,
    loss_points,
    near_optimal_runs,
    optima_frame,
)

__all__ = ["fit_band_law"]


@single_threaded_blas
def fit_band_law(
    runs: pd.DataFrame,
    *,
    target: str = "lr",
    predictors: Sequence[str] = ("n_params", "tokens"),
    band: float = 0.0025,
    n_boot: int = 1000,
    seed: int = 0,
    min_runs: int = 4,
    keep_edge: bool = False,
    source: str = "",
    conventions: Conventions | None = None,
    level: float = 0.95,
) -> PowerLaw:
    """Fit ``target ∝ Π predictor^b`` to all near-optimal runs, the Step Law way.

    Near-optimal: within ``band`` (relative) of the best loss of the run's cell. Cells that
    :func:`estimate_optima` (band method) leaves out (too few runs, optimum on the edge) are left
    out here too and named in ``notes``. Coefficients (and ``prefactor``): OLS through the
    near-optimal runs. Intervals (``level``): from the cells, ``n_boot`` draws of the t
    distribution or resamples of the cells (module docstring), named in ``notes`` when t.
    ``cv_error``/``holdout_error`` compare each left-out cell's band optimum (geometric mean of
    its near-optimal runs) with the law fitted without it.
    """
    preds = _check_names(target, predictors)
    optima = estimate_optima(
        runs, method="band", band=band, n_boot=0, min_runs=min_runs, keep_edge=keep_edge
    )
    frame = optima_frame(optima)
    used, left_out = _usable_cells(frame, target, preds)
    near = near_optimal_runs(runs, band)
    near = near[near["cell"].isin(set(used["cell"]))].reset_index(drop=True)
    cell_lx, cell_y = _log_design(used, target, preds, left_out)
    cells = used["cell"].astype(str).to_numpy()
    cell_of = {c: i for i, c in enumerate(cells)}
    idx = near["cell"].map(cell_of).to_numpy(dtype=int)
    lx = cell_lx[idx]
    y = np.log(near[target].to_numpy(dtype=float))
    if not np.all(np.isfinite(y)):
        raise FitError(f"near-optimal runs without a positive {target} value")
    pts = loss_points(runs)
    step = grid_step(pts[pts["cell"].isin(set(cells))], target)
    fit = _fit_runs(
        lx, y, idx, cell_lx, cell_y, floor=_scatter_floor(step, target), n_boot=n_boot,
        seed=seed, level=level,
    )  # fmt: skip
    notes = [f"left out {c}: {r}" for c, r in left_out]
    notes += kept_edges(used, target)
    notes += _doubts(fit, len(cells))
    if fit.interval.startswith("t interval"):
        notes.append(f"intervals: {fit.interval}")
    return _make_law(
        fit,
        target=target,
        preds=preds,
        lx=cell_lx,
        n_cells=len(cells),
        n_points=len(y),
        method=f"band{band:g}-runs+ols",
        notes=notes,
        curvature=None,
        fp=fingerprint([target, *preds, f"band={band}"], lx, y),
        held=held_ranges(used, target, preds),
        source=source,
        conventions=conventions,
    )


def _scatter_floor(step: float, target: str) -> tuple[float, str]:
    """The least scatter (natural log) of a cell's band optimum about the law, and what it is:
    the larger of :data:`~sweeper.fitting.power_law.SIGMA_FLOOR` and the quantisation of the
    ``target``'s grid, ``step`` / √12 (a value rounded to a grid of that step is off by up to
    half a step, uniformly)."""
    from sweeper.fitting.power_law import SIGMA_FLOOR  # (it imports this module)

    quantum = step / math.sqrt(12.0)
    if quantum > SIGMA_FLOOR:
        return quantum, f"the {target} grid's step ({step:.3g}) / √12"
    return SIGMA_FLOOR, "the least scatter any cell is trusted to"


def _fit_runs(
    lx: np.ndarray,
    y: np.ndarray,
    idx: np.ndarray,
    cell_lx: np.ndarray,
    cell_y: np.ndarray,
    *,
    floor: tuple[float, str],
    n_boot: int,
    seed: int,
    level: float,
) -> _Fit:
    """OLS of ``y`` on ``lx`` (natural logs, one row per near-optimal run of cell ``idx``), its
    interval from the cells (the module docstring; ``floor``: the least scatter of a cell about
    the law, natural log, and what it is), and its errors on the cells' band optima
    (``cell_lx``, ``cell_y``) each left out in turn."""
    from sweeper.fitting import power_law as pl  # (it imports this module)

    n_pts, n_cells = len(y), len(cell_y)
    mu = lx.mean(axis=0)
    x1 = np.column_stack([np.ones(n_pts), lx - mu])
    point = wls_batch(x1, np.ones((1, n_pts)), y)[0][0]
    # the same fit, one row per cell: its mean log target, weighted by its near-optimal runs
    m = np.bincount(idx, minlength=n_cells).astype(float)
    w = m / m.mean()
    ybar = np.bincount(idx, weights=y, minlength=n_cells) / m
    cell_x1 = np.column_stack([np.ones(n_cells), cell_lx - mu])
    p = x1.shape[1]
    dof = n_cells - p
    r = ybar - cell_x1 @ point
    s2 = float(np.sum(w * r**2) / dof) if dof > 0 else 0.0
    # (w has mean 1: the floor is on the scatter of a cell of average weight; quantisation does
    # not shrink with a cell's run count, so not on the most-weighted cell's, as the parabola's)
    s2_floor = floor[0] ** 2
    boot, ok, exact, interval = point[None, :], np.ones(1, bool), None, ""
    if n_boot > 0 and (dof < pl.T_INTERVAL_BELOW_DOF or s2 < s2_floor):
        cov = max(s2, s2_floor) * np.linalg.pinv(cell_x1.T @ (w[:, None] * cell_x1))
        boot = pl._t_draws(point, cov, dof, n_boot, np.random.default_rng(seed))
        exact = pl._t_ci(point, cov, dof, mu, level)
        ok = np.ones(len(boot), bool)
        why = "too few cells to resample them" if dof < pl.T_INTERVAL_BELOW_DOF else ""
        if s2 < s2_floor:
            why += ("; " if why else "") + (
                "the cells lie closer to the law than a band optimum is placed: their scatter "
                f"taken as {floor[0]:.3g} (ln), {floor[1]}"
            )
        interval = f"t interval, {dof} degree{'s' if dof > 1 else ''} of freedom ({why})"
    elif n_boot > 0:
        # resample the cells: every near-optimal run of a drawn cell comes with it
        counts = bootstrap_counts(np.random.default_rng(seed), n_cells, n_boot)
        boot, ok = wls_batch(x1, counts[:, idx], y)
        boot = widen_samples(boot[ok], point, n_cells, p, level)
        interval = "cell bootstrap"
    # leave one cell out: fit on the other cells' runs, predict the cell's band optimum
    loo_w = (idx[None, :] != np.arange(n_cells)[:, None]).astype(float)
    loo, loo_ok = wls_batch(x1, loo_w, y)
    loo_err = np.where(loo_ok, np.sum(loo * cell_x1, axis=1) - cell_y, np.nan)
    resid = cell_y - cell_x1 @ point
    return _Fit(
        coef=point,
        boot=boot,
        mu=mu,
        cv=_rms(loo_err),
        holdout=_holdout(loo_err, cell_lx),
        resid_std=_resid_std(resid, lx.shape[1]),
        n_dropped=int((~ok).sum()),
        level=level,
        interval=interval,
        exact_ci=exact,
    )

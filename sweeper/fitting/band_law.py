"""The Step Law way to fit a power law of the optimum: every near-optimal run is a point.

A run is near-optimal when its loss is within ``band`` (relative) of its cell's best loss. The law
is OLS in natural-log space on bootstrap resamples of those runs; its coefficients are the mean
over the resamples. Targets, predictors, units and the recorded ``conventions.held`` ranges are
those of :mod:`sweeper.fitting.power_law`, where :func:`fit_band_law` is importable too.
"""

from __future__ import annotations

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
from sweeper.fitting.optimum import estimate_optima, near_optimal_runs, optima_frame

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
    out here too and named in ``notes``. Coefficients (and ``prefactor``) are the means over
    ``n_boot`` OLS fits on resamples of the near-optimal runs; intervals their percentiles.
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
    fit = _fit_runs(lx, y, idx, cell_lx, cell_y, n_boot=n_boot, seed=seed, level=level)
    notes = [f"left out {c}: {r}" for c, r in left_out]
    notes += kept_edges(used, target)
    notes += _doubts(fit, len(cells))
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


def _fit_runs(
    lx: np.ndarray,
    y: np.ndarray,
    idx: np.ndarray,
    cell_lx: np.ndarray,
    cell_y: np.ndarray,
    *,
    n_boot: int,
    seed: int,
    level: float,
) -> _Fit:
    """OLS of ``y`` on ``lx`` (natural logs, one row per near-optimal run of cell ``idx``) over
    ``n_boot`` resamples of the runs, and its errors on the cells' band optima (``cell_lx``,
    ``cell_y``) each left out in turn."""
    n_pts = len(y)
    mu = lx.mean(axis=0)
    x1 = np.column_stack([np.ones(n_pts), lx - mu])
    counts = bootstrap_counts(np.random.default_rng(seed), n_pts, n_boot)
    point, _ = wls_batch(x1, np.ones((1, n_pts)), y)
    boot, ok = wls_batch(x1, counts, y) if n_boot > 0 else (point, np.ones(1, bool))
    boot = boot[ok]
    center = boot.mean(axis=0) if len(boot) else point[0]
    boot = widen_samples(boot, center, n_pts, x1.shape[1], level)
    # leave one cell out: fit on the other cells' runs, predict the cell's band optimum
    n_cells = len(cell_y)
    loo_w = (idx[None, :] != np.arange(n_cells)[:, None]).astype(float)
    loo, loo_ok = wls_batch(x1, loo_w, y)
    cell_x1 = np.column_stack([np.ones(n_cells), cell_lx - mu])
    loo_err = np.where(loo_ok, np.sum(loo * cell_x1, axis=1) - cell_y, np.nan)
    resid = cell_y - cell_x1 @ center
    return _Fit(
        coef=center,
        boot=boot,
        mu=mu,
        cv=_rms(loo_err),
        holdout=_holdout(loo_err, cell_lx),
        resid_std=_resid_std(resid, lx.shape[1]),
        n_dropped=int((~ok).sum()),
        level=level,
    )

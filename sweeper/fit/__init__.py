"""Fitting: from runs to the optimum of each cell, to power laws of the optimum, to the loss law.

Everything here is a pure function on DataFrames (canonical runs columns, see
:mod:`sweeper.runs`) returning frozen data; no I/O and no plotting. Typical use::

    from sweeper.fit import estimate_optima, fit_power_law

    optima = estimate_optima(runs, method="parabola")          # one CellOptimum per cell
    lr_law = fit_power_law(optima, target="lr", predictors=("n_params", "tokens"))
    lr_law.predict({"n_params": 7e9, "tokens": 2e12}), lr_law.exponents_ci

    # the Step Law way: all runs within 0.25% of their cell's best loss, OLS on 1000 resamples
    bs_law = fit_band_law(runs, target="batch_tokens", predictors=("tokens",))
    loss_law = fit_loss_law(runs)                                # L(N, D) = E + A/N^α + B/D^β

Invalid input raises :class:`sweeper.errors.FitError`; doubtful results warn :class:`FitWarning`.
"""

from __future__ import annotations

from sweeper.fit._common import FitWarning
from sweeper.fit.loss_law import fit_loss_law, loss_points
from sweeper.fit.optimum import CellOptimum, estimate_optima, near_optimal_runs, optima_frame
from sweeper.fit.power_law import fit_band_law, fit_power_law
from sweeper.fit.synthetic import synthetic_sweep

__all__ = [
    "CellOptimum",
    "FitWarning",
    "estimate_optima",
    "fit_band_law",
    "fit_loss_law",
    "fit_power_law",
    "loss_points",
    "near_optimal_runs",
    "optima_frame",
    "synthetic_sweep",
]

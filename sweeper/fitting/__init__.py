"""Fitting: from runs to the optimum of each cell, to power laws of the optimum, to the loss law.

Everything here is a pure function on DataFrames (canonical runs columns, see
:mod:`sweeper.study.runs`) returning frozen data; no I/O and no plotting. Typical use::

    from sweeper.fitting import estimate_optima, fit_power_law

    optima = estimate_optima(runs, method="parabola")          # one CellOptimum per cell
    lr_law = fit_power_law(optima, target="lr", predictors=("n_params", "tokens"))
    lr_law.predict({"n_params": 7e9, "tokens": 2e12}), lr_law.exponents_ci

    # the Step Law way: all runs within 0.25% of their cell's best loss, OLS on 1000 resamples
    bs_law = fit_band_law(runs, target="batch_tokens", predictors=("tokens",))
    loss_law = fit_loss_law(runs)                                # L(N, D) = E + A/N^α + B/D^β

    # one model of every run of every cell, whose optimum is the law (LR and batch jointly)
    laws = fit_surfaces(runs, lr_predictors=("n_params",))       # {"lr": SurfaceLaw, ...}

Invalid input raises :class:`sweeper.errors.FitError`; doubtful results warn :class:`FitWarning`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.fitting._common import FitWarning
    from sweeper.fitting.loss_law import fit_loss_law, loss_points
    from sweeper.fitting.optimum import (
        CellOptimum,
        estimate_optima,
        near_optimal_runs,
        optima_frame,
    )
    from sweeper.fitting.power_law import fit_band_law, fit_power_law
    from sweeper.fitting.surface import SurfaceLaw, fit_surface, fit_surfaces
    from sweeper.fitting.synthetic import synthetic_sweep

#: public name -> the module that defines it: imported on first use, so that code that only reads
#: laws (``sweeper.fitting.laws``, ``.conventions``, ``.store``) does not load pandas and scipy
_WHERE: dict[str, str] = {
    "FitWarning": "_common",
    "fit_loss_law": "loss_law",
    "loss_points": "loss_law",
    "CellOptimum": "optimum",
    "estimate_optima": "optimum",
    "near_optimal_runs": "optimum",
    "optima_frame": "optimum",
    "fit_band_law": "power_law",
    "fit_power_law": "power_law",
    "synthetic_sweep": "synthetic",
    "SurfaceLaw": "surface",
    "fit_surface": "surface",
    "fit_surfaces": "surface",
}

__all__ = [
    "CellOptimum",
    "FitWarning",
    "SurfaceLaw",
    "estimate_optima",
    "fit_band_law",
    "fit_loss_law",
    "fit_power_law",
    "fit_surface",
    "fit_surfaces",
    "loss_points",
    "near_optimal_runs",
    "optima_frame",
    "synthetic_sweep",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sweeper.fitting' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sweeper.fitting.{module}"), name)
    globals()[name] = value
    return value

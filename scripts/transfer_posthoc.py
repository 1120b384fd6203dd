"""Held-out predictions of one densely trained cell from several fit sets and methods, no training.

``sweeper validate-transfer`` trains the held-out cell at each prediction; that costs a run set per
(fit set, method). Once one check has trained a cell densely (its sweep's runs plus the check's
grid), the other predictions can be scored against that cell's measured curve instead:

- ``log2_error``: log2(predicted / measured optimum), the measured optimum being the parabola
  through every run of the cell (as validate-transfer measures it);
- ``regret_pct_interp``: the loss the cell's fitted parabola gives at the prediction, over its
  minimum, in % (an interpolation, not a trained loss: it is only reported inside the LR range
  the cell's runs span, else null);
- the same for every baseline validate-transfer trains (``baselines``: the smallest and largest
  fitted cells' optima, the published laws, and under muP/CompleteP the base width's optimum).

Usage::

    .venv/bin/python scripts/transfer_posthoc.py width_sp --holdout w256-d2-t819k \\
        --fit-cells "width<=64" "width<=48" --methods parabola band surface \\
        --storage sqlite:////path/shipped.db [--json out.json]

The cell's runs are those of the sweep and of every stored check of it
(``<sweep>.transfer.<cell>*``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from typing import Any

import numpy as np
import pandas as pd

from sweeper.fitting import FitWarning, estimate_optima
from sweeper.fitting.provenance import sweep_conventions
from sweeper.study import storage
from sweeper.study.handle import Sweep
from sweeper.transfer.holdout import cell_filter
from sweeper.transfer.plan import BASELINES, plan_transfer


def cell_runs(sw: Sweep, cell: str) -> pd.DataFrame:
    """Every completed run of ``cell``: the sweep's and its transfer checks' (launched, or imported
    from their committed CSV)."""
    frames = [sw.runs().query("cell == @cell")]
    for row in storage.list_sweeps(sw.url):
        if row["name"].startswith(f"{sw.name}.transfer.{cell}"):
            frames.append(Sweep.load(row["name"], sw.url).runs().assign(cell=cell))
    runs = pd.concat(frames, ignore_index=True)
    return runs[(runs["state"] == "COMPLETE") & ~runs["diverged"].astype(bool)]


def score(runs: pd.DataFrame, cell: str, lr: float) -> dict[str, Any]:
    """log2 error against the cell's measured optimum and the interpolated regret at ``lr``."""
    (opt,) = estimate_optima(runs, method="parabola", n_boot=100, keep_edge=True, min_runs=2)
    out: dict[str, Any] = {"lr": lr, "measured_optimum": opt.lr, "log2_error": None}
    out["regret_pct_interp"] = None
    if opt.lr:
        out["log2_error"] = math.log2(lr / opt.lr)
    lo, hi = float(runs["lr"].min()), float(runs["lr"].max())
    if opt.curve_coefs and lo <= lr <= hi:
        grid = np.geomspace(lo, hi, 400)
        best = float(np.min(opt.curve(grid)))
        out["regret_pct_interp"] = 100.0 * (float(opt.curve(np.array([lr]))[0]) - best) / best
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--holdout", required=True)
    ap.add_argument("--fit-cells", nargs="+", required=True)
    ap.add_argument("--methods", nargs="+", default=["parabola", "band", "surface"])
    ap.add_argument("--storage")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", FitWarning)
    sw = Sweep.load(args.sweep, args.storage)
    runs = cell_runs(sw, args.holdout)
    rows = []
    for expr in args.fit_cells:
        for method in args.methods:
            plan = plan_transfer(
                sw.runs(), sweep=sw.name, holdout=args.holdout, fit_cells=cell_filter(expr),
                spec=sw.spec, method=method, conventions=sweep_conventions(sw),
            )  # fmt: skip
            row = {"fit_cells": expr, "method": method, "extrapolation": dict(plan.extrapolation)}
            row["law"] = score(runs, args.holdout, plan.predicted_lr)
            row["law_point"] = score(runs, args.holdout, plan.predicted_lr_point)
            row["baselines"] = {
                k: score(runs, args.holdout, lr) for k, lr in plan.lrs.items() if k in BASELINES
            }
            row["exponent"] = plan.law.exponents
            row["exponent_ci"] = plan.law.exponents_ci
            rows.append(row)
            law = row["law"]
            print(
                f"{expr:>12} {method:>9}  N x{plan.extrapolation.get('n_params', float('nan')):5.1f}"
                f"  lr {law['lr']:.3g} (measured {law['measured_optimum']:.3g})"
                f"  log2 {law['log2_error']:+.2f}  regret~ {law['regret_pct_interp']}"
            )
    out = {"sweep": sw.name, "holdout": args.holdout, "n_cell_runs": len(runs), "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

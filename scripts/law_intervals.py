"""Two 95% intervals on a one-predictor LR law of a stored sweep, side by side.

The law's own interval (``sweeper fit``: WLS over the cell optima; from 7 cells on, cells
resampled and widened by Student's t with n-2 degrees of freedom, below that the WLS t interval)
and the classical one (OLS of ln lr* on ln x, the slope's standard error from the residual scatter,
t_{n-2} quantiles). On synthetic ladders of 7-12 cells both cover about 95%
(scripts/calibrate_intervals.py). On real ladders they can disagree when the slope rests on one or
two cells: resampling then sees resamples without them.

    .venv/bin/python scripts/law_intervals.py SWEEP [--predictor width] [--storage URL]
"""

from __future__ import annotations

import argparse
import math
import os
import warnings

import numpy as np
from scipy.stats import t

from sweeper.fitting import fit_power_law
from sweeper.fitting.optimum import estimate_optima
from sweeper.study.sweep_runs import load_sweep_runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--predictor", default="width")
    ap.add_argument("--storage", default=os.environ.get("SWEEPER_STORAGE"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    optima = estimate_optima(load_sweep_runs(args.sweep, args.storage), n_boot=200, seed=0)
    usable = [o for o in optima if o.usable]
    for o in optima:
        ci = "-" if o.lr_ci is None else f"[{o.lr_ci[0]:.3g}, {o.lr_ci[1]:.3g}]"
        lr = "-" if o.lr is None else f"{o.lr:.4g}"
        print(f"{o.cell:16s} {args.predictor} {getattr(o, args.predictor)!s:>8}  lr* {lr:>9} {ci}")
    law = fit_power_law(usable, target="lr", predictors=(args.predictor,), seed=0)
    lo, hi = law.exponents_ci[args.predictor]  # type: ignore[index]
    print(
        f"law (sweeper fit, WLS):    exponent {law.exponents[args.predictor]:+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}]"
    )
    x = np.log([float(getattr(o, args.predictor)) for o in usable])
    y = np.log([float(o.lr) for o in usable])  # type: ignore[arg-type]
    n = len(x)
    b, a = np.polyfit(x, y, 1)
    r = y - (a + b * x)
    se = math.sqrt(float(r @ r) / (n - 2) / float((x - x.mean()) @ (x - x.mean())))
    q = float(t.ppf(0.975, n - 2))
    print(f"classical (OLS, t_{n - 2}):  exponent {b:+.3f} [{b - q * se:+.3f}, {b + q * se:+.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

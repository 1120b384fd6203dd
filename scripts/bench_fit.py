"""Benchmark the fitting layer: 10,000 runs over 50 cells, 1,000 bootstrap resamples.

Times (median of ``--repeats``) on a seeded synthetic sweep (10 model sizes × 5 token budgets, 20 LRs ×
10 batch sizes per cell):

- ``parabola``: 2-D parabola optimum per cell with 1,000 resamples per cell, then the LR and batch
  power laws over cells with 1,000 resamples each;
- ``band``: the Step Law fit of LR and batch on all near-optimal runs, 1,000 resamples each.

Goal: each under 5 s on the 2-core development machine. Usage: ``.venv/bin/python scripts/bench_fit.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import pandas as pd

from sweeper.fitting import (
    FitWarning,
    estimate_optima,
    fit_band_law,
    fit_power_law,
    synthetic_sweep,
)

PREDICTORS = ("n_params", "tokens")


def make_runs() -> pd.DataFrame:
    return synthetic_sweep(
        n_params=tuple(1e6 * 2.0**k for k in range(10)),
        tokens=(1e8, 3e8, 1e9, 3e9, 1e10),
        lr_law=(2.0, {"n_params": -0.5, "tokens": 0.1}),
        batch_law=(0.5, {"tokens": 0.6}),
        lr_steps=(-13, 6),
        batch_steps=(-5, 4),
        batch_step=1.5,
        seed=0,
    )


def bench(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    runs = make_runs()
    n_cells = runs["cell"].nunique()
    print(f"{len(runs)} runs over {n_cells} cells, {args.bootstrap} bootstrap resamples")
    warnings.simplefilter("ignore", FitWarning)

    def parabola() -> None:
        optima = estimate_optima(runs, method="parabola", n_boot=args.bootstrap)
        for target in ("lr", "batch_tokens"):
            fit_power_law(optima, target=target, predictors=PREDICTORS, n_boot=args.bootstrap)

    def band() -> None:
        for target in ("lr", "batch_tokens"):
            fit_band_law(runs, target=target, predictors=PREDICTORS, n_boot=args.bootstrap)

    for name, fn in (("parabola", parabola), ("band", band)):
        times = bench(fn, args.repeats)
        runs_s = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:9s} median {statistics.median(times):.2f} s  (runs: {runs_s})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

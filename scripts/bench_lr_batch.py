"""Surface vs parabola vs band on synthetic LR × batch sweeps with a known law, side by side.

Every replicate is :func:`sweeper.fitting.synthetic.synthetic_sweep` over 4 N × 3 D cells (1e6-6.4e7
parameters, 1e8-1.6e9 tokens), the LR searched on 9 sqrt(2) steps and the batch on 5 doublings
around the cell's optimum, one seed, noise 0.3% of the loss, the best LR moving with the batch
(∂ln η*/∂ln B = 0.5), divergence 3 steps above the optimum. True laws: η* = 2·N^-0.5·D^0.1 and
B* = 0.5·D^0.6 (tokens). Each method fits both laws as ``sweeper fit`` does (``fit_runs`` with
``target=None``: the LR on n_params and tokens, the batch on tokens) with ``--boot`` resamples
(the surface's intervals from its Laplace covariance unless ``--surface-boot``; its settings
``--surface``, default ``standard``).

Per method and exponent: mean error, RMSE, the share within ±0.05 of the truth, the mean width of
the 95% interval and its coverage; fits that fail or drop a target are counted. Usage::

    nice -n 19 .venv/bin/python scripts/bench_lr_batch.py [--reps 50] [--boot 100] [--json out.json]

Results: docs/RESULTS.md, "LR × batch".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from typing import Any

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from sweeper.errors import FitError  # noqa: E402
from sweeper.fitting import FitWarning  # noqa: E402
from sweeper.fitting.conventions import Conventions  # noqa: E402
from sweeper.fitting.fit_runs import FitOptions, fit_runs, min_resamples  # noqa: E402
from sweeper.fitting.methods import SURFACE_SETTINGS  # noqa: E402
from sweeper.fitting.synthetic import synthetic_sweep  # noqa: E402

METHODS = ("surface", "parabola", "band")
#: (target, predictor) -> true exponent
TRUTH = {("lr", "n_params"): -0.5, ("lr", "tokens"): 0.1, ("batch_tokens", "tokens"): 0.6}
PREDICTORS = {"lr": ("n_params", "tokens"), "batch_tokens": ("tokens",)}


def sweep(rep: int) -> Any:
    return synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7, 6.4e7),
        tokens=(1e8, 4e8, 1.6e9),
        lr_law=(2.0, {"n_params": -0.5, "tokens": 0.1}),
        batch_law=(0.5, {"tokens": 0.6}),
        lr_steps=(-5, 3),
        batch_steps=(-2, 2),
        noise=3e-3,
        lr_batch_slope=0.5,
        seed=rep,
    )


def fit_one(rep: int, method: str, n_boot: int, surface: str = "standard") -> dict[str, Any]:
    """Both laws of replicate ``rep`` by ``method``: {(target, predictor): (b, lo, hi)}."""
    opts = FitOptions(method=method, n_boot=n_boot, cell_boot=max(n_boot, min_resamples()), seed=rep,
                      surface=surface if method == "surface" else "standard")  # fmt: skip
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            out = fit_runs(sweep(rep), conventions=Conventions(), source="bench",
                           predictors=PREDICTORS, options=opts)  # fmt: skip
    except (FitError, ValueError, np.linalg.LinAlgError) as e:
        return {"failed": f"{type(e).__name__}: {e}"}
    got: dict[str, Any] = {"seconds": time.perf_counter() - t0, "skipped": list(out.skipped)}
    for law in out.laws:
        for p in law.exponents:
            lo, hi = law.exponents_ci.get(p, (math.nan, math.nan))
            got[f"{law.target}:{p}"] = (law.exponents[p], lo, hi)
    return got


def summarize(fits: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for method, rs in fits.items():
        for (target, p), true in TRUTH.items():
            key = f"{target}:{p}"
            vals = np.array([r[key] for r in rs if key in r], dtype=float).reshape(-1, 3)
            b, lo, hi = vals.T if vals.size else (np.zeros(0),) * 3
            err = b - true
            rows.append({
                "method": method, "target": target, "predictor": p, "true": true,
                "fits": int(b.size), "missing": len(rs) - int(b.size),
                "mean_error": float(err.mean()) if b.size else math.nan,
                "rmse": float(np.sqrt(np.mean(err**2))) if b.size else math.nan,
                "within_0.05": float(np.mean(np.abs(err) <= 0.05)) if b.size else math.nan,
                "mean_width": float(np.mean(hi - lo)) if b.size else math.nan,
                "coverage": float(np.mean((lo <= true) & (hi >= true))) if b.size else math.nan,
            })  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--boot", type=int, default=100, help="resamples per law (surface: 0 = Laplace)")
    ap.add_argument("--surface-boot", type=int, default=0, help="the surface's resamples")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--surface", default="standard", choices=list(SURFACE_SETTINGS))
    ap.add_argument("--json", help="write the rows (and the settings) to this file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    fits: dict[str, list[dict[str, Any]]] = {m: [] for m in args.methods}
    for rep in range(args.reps):
        for m in args.methods:
            n_boot = args.surface_boot if m == "surface" else args.boot
            fits[m].append(fit_one(rep, m, n_boot, args.surface))
        print(f"  {rep + 1}/{args.reps} sweeps, {time.perf_counter() - t0:.0f} s", flush=True)
    rows = summarize(fits)
    print(f"{'method':9s} {'law':24s} {'fits':>4s} {'mean err':>9s} {'rmse':>7s} "
          f"{'|err|<=.05':>10s} {'width':>7s} {'coverage':>8s}")  # fmt: skip
    for r in rows:
        print(f"{r['method']:9s} {r['target'] + ' on ' + r['predictor']:24s} {r['fits']:4d} "
              f"{r['mean_error']:+9.4f} {r['rmse']:7.4f} {r['within_0.05']:10.2f} "
              f"{r['mean_width']:7.3f} {r['coverage']:8.2f}")  # fmt: skip
    failed = {m: sum("failed" in r for r in rs) for m, rs in fits.items()}
    wall = time.perf_counter() - t0
    print(f"\n{args.reps} sweeps; failed fits {failed}; wall {wall:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": vars(args), "rows": rows, "failed": failed, "wall_s": wall,
                       "examples": {m: rs[:3] for m, rs in fits.items()}}, fh, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

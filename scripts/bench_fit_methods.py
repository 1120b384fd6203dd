"""Surface vs parabola vs band on synthetic proxy-like ladders with a known law, side by side.

Every replicate ladder is :func:`sweeper.fitting.synthetic.proxy_sweep` (SP widths 32-256 at depth
2, the width_sp LR grid of 8 sqrt(2) steps shared by every cell, 2 seeds, noise ~0.3% of the loss
below the optimum and ~2% (Student-t, 5 dof) from one step above, a cliff, divergence 3 steps above
the optimum), true law lr* = 0.208 · N^-0.3. All three methods fit the same runs, each with the
same number of resamples (``--boot``):

- ``surface``: :func:`sweeper.fitting.surface.fit_surface` (lr on n_params);
- ``parabola``: :func:`estimate_optima` (parabola, 200 resamples per cell) then
  :func:`fit_power_law` (its edge cells left out, as ``sweeper fit`` does);
- ``band``: :func:`fit_band_law` on n_params (Step Law's way);
- (``--methods surface_laplace``) the surface with its Laplace intervals (``n_boot=0``).

Scenarios (``--scenarios``): ``base`` (the model's family: piecewise quadratic in ln lr);
``cubic`` (a cubic term above the optimum, k_cubic = 0.5: the shape is not the surface's);
``scatter`` (each cell's optimum off the law by a factor exp(N(0, 0.1²)): the law is not exact).

Per method: exponent RMSE and mean absolute error, mean width of the 95% interval, coverage of the
true exponent (its binomial SE), failures (FitError), and the error of the predicted optimum at 8x
and 30x the largest cell's N (mean |log2(predicted/true)|). Usage::

    nice -n 19 .venv/bin/python scripts/bench_fit_methods.py [--reps 200] [--cells 5 7]
        [--scenarios base cubic scatter] [--boot 200] [--processes 2] [--json out.json]
        [--methods surface_laplace parabola band] [--per-ladder fits.json]

The ratios to the better of parabola and band are printed for whichever surface variant ran.
A fit that raises FitError or a numerical error (ValueError, LinAlgError) counts as failed; a
predicted LR that is not a positive finite number is counted (``pred_bad_*``) and left out of
the 8x/30x means. Results measured with this script: docs/RESULTS.md, "Fitting methods".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from sweeper.errors import FitError  # noqa: E402
from sweeper.fitting import (  # noqa: E402
    FitWarning,
    estimate_optima,
    fit_band_law,
    fit_power_law,
)
from sweeper.fitting.surface import fit_surface  # noqa: E402
from sweeper.fitting.synthetic import proxy_sweep  # noqa: E402

METHODS = ("surface", "parabola", "band")
#: also available: the surface's intervals from its Laplace covariance (``n_boot=0``)
ALL_METHODS = ("surface", "surface_laplace", "parabola", "band")
TRUE_A, TRUE_B = 0.208, -0.3
SCENARIOS: dict[str, dict[str, float]] = {
    "base": {},
    "cubic": {"k_cubic": 0.5},
    "scatter": {"opt_scatter": 0.1},
}
BEYOND = (8.0, 30.0)


def fit_all(
    n_cells: int, rep: int, scenario: str, n_boot: int, methods: Sequence[str] = METHODS
) -> dict[str, dict[str, Any]]:
    """Fit one replicate ladder with each method: exponent, interval, predictions beyond."""
    runs = proxy_sweep(n_cells, seed=rep, **SCENARIOS[scenario])  # type: ignore[arg-type]
    n_max = float(runs["n_params"].max())
    out: dict[str, dict[str, Any]] = {}
    for method in methods:
        t0 = time.perf_counter()
        law: Any
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FitWarning)
                if method == "surface":
                    law = fit_surface(runs, n_boot=n_boot, seed=rep, cv=False)
                elif method == "surface_laplace":
                    law = fit_surface(runs, n_boot=0, seed=rep, cv=False)
                elif method == "parabola":
                    optima = estimate_optima(runs, method="parabola", n_boot=200, seed=rep)
                    law = fit_power_law(optima, n_boot=n_boot, seed=rep)
                else:
                    law = fit_band_law(runs, predictors=("n_params",), n_boot=n_boot, seed=rep)
        except FitError as e:
            out[method] = {"failed": str(e)}
            continue
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as e:
            # a numerical failure of one ladder is a failed fit, counted, not the end of the run
            out[method] = {"failed": f"{type(e).__name__}: {e}"}
            continue
        lo, hi = law.exponents_ci.get("n_params", (math.nan, math.nan))
        pred = {}
        for f in BEYOND:
            n = f * n_max
            lr = law.predict({"n_params": n})
            if lr > 0 and math.isfinite(lr):
                pred[f"log2_err_{f:g}x"] = math.log2(lr / (TRUE_A * n**TRUE_B))
            else:  # counted (pred_bad), not averaged
                print(f"  {scenario} {n_cells} cells rep {rep} {method}: predicted lr {lr!r} "
                      f"at {f:g}x (exponent {law.exponents.get('n_params')})",
                      file=sys.stderr, flush=True)  # fmt: skip
                pred[f"log2_err_{f:g}x"] = math.nan
        im = getattr(law, "interval_method", None) or ""
        if method == "surface" and im.split()[:2][1:] == ["refits:"]:
            pred["refits"] = int(im.split()[0])  # resamples kept (failed refits are dropped)
        out[method] = {
            "b": law.exponents["n_params"],
            "lo": lo,
            "hi": hi,
            "n_cells": law.n_cells,
            "seconds": time.perf_counter() - t0,
            **pred,
        }
    return out


def _task(
    args: tuple[int, int, str, int, tuple[str, ...]],
) -> tuple[tuple[int, int, str], dict[str, Any]]:
    n_cells, rep, scenario, n_boot, methods = args
    return (n_cells, rep, scenario), fit_all(n_cells, rep, scenario, n_boot, methods)


def run_grid(
    cells: Sequence[int],
    scenarios: Sequence[str],
    reps: int,
    n_boot: int,
    processes: int,
    seed0: int = 0,
    methods: Sequence[str] = METHODS,
) -> list[tuple[tuple[int, int, str], dict[str, Any]]]:
    """Every (cells, scenario, replicate) fitted by every method, with progress on stderr."""
    ms = tuple(methods)
    tasks = [(c, seed0 + r, s, n_boot, ms) for s in scenarios for c in cells for r in range(reps)]
    results = []
    t0 = time.perf_counter()
    it: Iterable[tuple[tuple[int, int, str], dict[str, Any]]]
    if processes > 1:
        import multiprocessing as mp

        pool = mp.get_context("fork").Pool(processes)
        it = pool.imap_unordered(_task, tasks, chunksize=2)
    else:
        pool = None
        it = map(_task, tasks)
    for i, res in enumerate(it, 1):
        results.append(res)
        if i % 20 == 0 or i == len(tasks):
            el = time.perf_counter() - t0
            print(
                f"  {i}/{len(tasks)} ladders, {el:.0f} s, ~{el / i * (len(tasks) - i):.0f} s left",
                file=sys.stderr,
                flush=True,
            )
    if pool is not None:
        pool.close()
        pool.join()
    return results


def summarize(results: list[tuple[tuple[int, int, str], dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per (scenario, cells, method)."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for (n_cells, _rep, scenario), res in results:
        for method, r in res.items():
            groups.setdefault((scenario, n_cells, method), []).append(r)
    rows = []
    for (scenario, n_cells, method), rs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], ALL_METHODS.index(kv[0][2]))
    ):
        ok = [r for r in rs if "failed" not in r]
        b = np.array([r["b"] for r in ok])
        lo = np.array([r["lo"] for r in ok])
        hi = np.array([r["hi"] for r in ok])
        cover = (lo <= TRUE_B) & (hi >= TRUE_B)
        p = float(cover.mean()) if ok else math.nan
        row = {
            "scenario": scenario,
            "cells": n_cells,
            "method": method,
            "fits": len(ok),
            "failed": len(rs) - len(ok),
            "rmse": float(np.sqrt(np.mean((b - TRUE_B) ** 2))) if ok else math.nan,
            "mae": float(np.mean(np.abs(b - TRUE_B))) if ok else math.nan,
            "width": float(np.mean(hi - lo)) if ok else math.nan,
            "coverage": p,
            "cov_se": float(math.sqrt(p * (1 - p) / len(ok))) if ok else math.nan,
            "seconds": float(np.mean([r["seconds"] for r in ok])) if ok else math.nan,
        }
        if any("refits" in r for r in ok):
            row["mean_refits_kept"] = float(np.mean([r.get("refits", math.nan) for r in ok]))
        for f in BEYOND:
            e = np.array([r[f"log2_err_{f:g}x"] for r in ok])
            good = np.isfinite(e)
            row[f"abs_log2_{f:g}x"] = float(np.mean(np.abs(e[good]))) if good.any() else math.nan
            row[f"pred_bad_{f:g}x"] = int((~good).sum())
        rows.append(row)
    return rows


def _g(v: Any) -> float | None:
    return float(f"{v:.5g}") if v is not None and math.isfinite(v) else None


def write_per_ladder(results: list[tuple[tuple[int, int, str], dict[str, Any]]], path: str) -> None:
    """Every fit, compactly: [scenario, cells, rep, method, b, lo, hi, err8x, err30x]."""
    out = []
    for (n_cells, rep, scenario), res in sorted(results, key=lambda x: (x[0][2], x[0][0], x[0][1])):
        for method, r in res.items():
            keys = ("b", "lo", "hi", "log2_err_8x", "log2_err_30x")
            vals = [None] * 5 if "failed" in r else [_g(r[k]) for k in keys]
            out.append([scenario, n_cells, rep, method, *vals])
    with open(path, "w") as fh:
        fh.write("[\n" + ",\n".join(json.dumps(row) for row in out) + "\n]\n")


def print_table(rows: list[dict[str, Any]], cols: Sequence[str]) -> None:
    head = f"{'scenario':9s} {'cells':>5s} {'method':15s} " + " ".join(f"{c:>12s}" for c in cols)
    print(head)
    print("-" * len(head))
    for r in rows:
        vals = []
        for c in cols:
            v = r[c]
            vals.append(f"{v:12d}" if isinstance(v, int) else f"{v:12.4f}")
        print(f"{r['scenario']:9s} {r['cells']:5d} {r['method']:15s} " + " ".join(vals))


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scenario, cells) and surface variant (``surface``, ``surface_laplace``, whichever ran):
    its MAE and mean width over the better of parabola and band."""
    out = []
    keys = sorted({(r["scenario"], r["cells"]) for r in rows})
    for key in keys:
        by = {r["method"]: r for r in rows if (r["scenario"], r["cells"]) == key}
        if not {"parabola", "band"} <= set(by):
            continue
        best_mae = min(by["parabola"]["mae"], by["band"]["mae"])
        best_w = min(by["parabola"]["width"], by["band"]["width"])
        for variant in ("surface", "surface_laplace"):
            if variant not in by:
                continue
            s = by[variant]
            out.append(
                {
                    "scenario": key[0],
                    "cells": key[1],
                    "surface": variant,
                    "mae_ratio": s["mae"] / best_mae,
                    "width_ratio": s["width"] / best_w,
                    "surface_coverage": s["coverage"],
                }
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--cells", type=int, nargs="+", default=[5, 7])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0, help="first replicate's seed")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(ALL_METHODS))
    ap.add_argument("--json", help="write the rows (and the settings) to this file")
    ap.add_argument(
        "--per-ladder",
        help="also write every fit to this JSON: [scenario, cells, rep, method, b, lo, hi, "
        "log2 error at 8x, at 30x] (null where the fit failed)",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    results = run_grid(
        args.cells, args.scenarios, args.reps, args.boot, args.processes, args.seed, args.methods
    )
    rows = summarize(results)
    if args.per_ladder:
        write_per_ladder(results, args.per_ladder)
    cols = ("fits", "failed", "rmse", "mae", "width", "coverage", "cov_se")
    print_table(rows, (*cols, "abs_log2_8x", "abs_log2_30x", "seconds"))
    print("\nsurface / best of (parabola, band):")
    for r in ratios(rows):
        print(
            f"  {r['scenario']:9s} {r['cells']:2d} cells, {r['surface']}: MAE x{r['mae_ratio']:.2f}, "
            f"width x{r['width_ratio']:.2f}, coverage {r['surface_coverage']:.3f}"
        )
    print(
        f"\n{args.reps} ladders per row, {args.boot} resamples per fit, true exponent {TRUE_B}; "
        f"wall {time.perf_counter() - t0:.0f} s"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": vars(args), "rows": rows, "ratios": ratios(rows)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

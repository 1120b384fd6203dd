"""The surface fit's window, measured both ways: calibration on synthetic ladders, bias on real ones.

For each window (natural-log reach below and above each cell's best LR; ``all`` = every run):

- synthetic: ``--reps`` :func:`~sweeper.fitting.synthetic.proxy_sweep` ladders (the model's own
  family of curves, true exponent -0.3) at each ``--cells``, fitted with Laplace intervals
  (``n_boot=0``): coverage of the 95% interval, its median width, the exponent's spread (SD);
- real: Sweeper's own ladders (docs/data/quickstart.csv, width_sp.csv, and
  width_mup.csv, depth_completep.csv when committed), fitted the same way:
  exponent and interval, leave-one-cell-out error (``cv_error``), and the mean and largest
  log2 distance of the cells' free optima from each cell's best grid LR (lowest mean loss): how
  far the fitted curve puts a cell's optimum from where its runs say it is.

    nice -n 19 .venv/bin/python scripts/bench_surface_window.py [--reps 100] [--json out.json]

Results: docs/RESULTS.md ("The window: calibration against robustness").
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.fitting import FitWarning
from sweeper.fitting.surface import WINDOW, fit_surface
from sweeper.fitting.synthetic import proxy_sweep
from sweeper.study.importer import import_runs, load_runs

REPO = Path(__file__).resolve().parents[1]
L2 = math.log(2.0)
#: name -> window (below, above), natural logs; None: every run
WINDOWS: dict[str, tuple[float, float] | None] = {
    "standard (4x below, 1 step above)": WINDOW,
    "4x below, 2 steps above": (math.log(4.0), 1.0 * L2),
    "4x below, 3 steps above": (math.log(4.0), 1.5 * L2),
    "every run below, 1 step above": (20.0, 0.75 * L2),
    "every run (all-runs)": None,
}
TRUE_B = -0.3
#: Sweeper's own LR ladders, each used when its runs are committed under docs/data
LADDERS = ("quickstart", "width_sp", "width_mup", "depth_completep")


def synthetic(window: tuple[float, float] | None, cells: int, reps: int) -> dict[str, Any]:
    b, lo, hi = [], [], []
    for rep in range(1000, 1000 + reps):
        law = fit_surface(proxy_sweep(cells, seed=rep), n_boot=0, seed=rep, cv=False, window=window)
        b.append(law.exponents["n_params"])
        lo.append(law.exponents_ci["n_params"][0])
        hi.append(law.exponents_ci["n_params"][1])
    a, l_, h = np.array(b), np.array(lo), np.array(hi)
    return {
        "cells": cells,
        "coverage": float(np.mean((l_ <= TRUE_B) & (h >= TRUE_B))),
        "median_width": float(np.median(h - l_)),
        "sd": float(a.std()),
        "mean_error": float(a.mean() - TRUE_B),
    }


def real(window: tuple[float, float] | None, runs: Any) -> dict[str, Any]:
    done = runs[runs["state"] == "COMPLETE"]
    means = done.groupby(["cell", "lr"], as_index=False)["loss"].mean()
    best = means.loc[means.groupby("cell")["loss"].idxmin()].set_index("cell")["lr"]
    law = fit_surface(runs, n_boot=0, seed=0, window=window)
    off = [math.log2(v / best[c]) for c, v in law.cell_optima.items()]
    lo, hi = law.exponents_ci["n_params"]
    return {
        "exponent": law.exponents["n_params"],
        "ci": [lo, hi],
        "cv_error": law.cv_error,
        "optimum_offset_log2_mean": float(np.mean(off)),
        "optimum_offset_log2_max": float(np.max(np.abs(off))),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--cells", type=int, nargs="+", default=[4, 5])
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    warnings.simplefilter("ignore", FitWarning)
    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp()
    ladders = {}
    for name in LADDERS:
        if not (REPO / "docs" / "data" / f"{name}.csv").exists():
            continue
        url = f"sqlite:///{tmp}/{name}.db"
        import_runs(REPO / "docs" / "data" / f"{name}.csv", sweep=name, url=url)
        ladders[name] = load_runs(name, url)
    out: dict[str, Any] = {}
    for label, w in WINDOWS.items():
        row = {
            "window": None if w is None else [w[0], w[1]],
            "synthetic": [synthetic(w, c, args.reps) for c in args.cells],
            "real": {n: real(w, r) for n, r in ladders.items()},
        }
        out[label] = row
        syn = ", ".join(f"{s['cells']} cells {s['coverage']:.2f} (sd {s['sd']:.3f})"
                        for s in row["synthetic"])  # fmt: skip
        rl = ", ".join(f"{n} b {r['exponent']:+.3f} LOO {r['cv_error']:.2f} offset "
                       f"{r['optimum_offset_log2_mean']:+.2f}" for n, r in row["real"].items())  # fmt: skip
        print(f"{label:36s} synthetic coverage {syn}; {rl}", flush=True)
    wall = time.perf_counter() - t0
    print(f"{args.reps} synthetic ladders per row; wall {wall:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "rows": out,
                                               "wall_s": wall}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Surface vs parabola vs band on real runs: Step Law's release and Sweeper's own proxy ladders.

``steplaw``: Step Law's released dense runs (``$SWEEPER_SHARED/data`` or ``../shared/data``,
``steplaw_dense_lr_bs_loss.csv``, imported as ``tests/sweeper/fitting/test_steplaw.py`` does: the
smooth loss as the loss, batch in sequences of 2,048 tokens) into a temporary SQLite store; the LR
law on n_params and tokens fitted by ``--method surface`` and ``--method band`` through
:func:`sweeper.fitting.fit_runs.fit_runs` (what ``sweeper fit`` calls, with its defaults: surface
200 resamples, band 1,000). Recorded: exponents, 95% intervals, each law's own leave-one-cell-out
RMS error (``cv_error``: surface against its free cell optima, band against its band optima, so
the two are measured against different targets) and, with ``--yardstick``, both against the same
targets: each cell left out in turn, both laws refitted without it (surface with its Laplace
intervals, band with 1,000 resamples: only the point predictions are used) and compared with (a)
the band optimum of the cell (geometric mean of its runs within 0.25% of its best loss) and (b)
the surface's free optimum of the cell (fitted with every cell).

``proxy``: ``docs/data/quickstart.csv`` and ``docs/data/width_sp.csv`` (Sweeper's own ladders),
the LR law on n_params by each method with ``sweeper fit``'s defaults: exponent, 95% interval, its
width over parabola's, whether it excludes 0, ``cv_error``.

Usage::

    nice -n 19 .venv/bin/python scripts/fit_methods_real.py steplaw --yardstick \
        --json docs/data/fit_methods/steplaw.json
    nice -n 19 .venv/bin/python scripts/fit_methods_real.py proxy \
        --json docs/data/fit_methods/proxy_ladders.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sweeper.fitting import FitWarning, estimate_optima, fit_band_law  # noqa: E402
from sweeper.fitting.conventions import Conventions  # noqa: E402
from sweeper.fitting.fit_runs import FitOptions, fit_runs  # noqa: E402
from sweeper.fitting.surface import fit_surface  # noqa: E402
from sweeper.study.importer import import_runs, load_runs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STEPLAW_FILE = "steplaw_dense_lr_bs_loss.csv"
STEPLAW_RENAMES = {
    "N": "n_params",
    "D": "tokens",
    "bs": "batch_size",
    "h": "width",
    "numl": "depth",
    "loss": "raw_loss",
    "smooth loss": "loss",
}
METHODS = ("surface", "parabola", "band")


def steplaw_csv() -> Path:
    env = os.environ.get("SWEEPER_SHARED")
    dirs = [Path(env) / "data", Path(env)] if env else [ROOT.parent / "shared" / "data"]
    for d in dirs:
        if (d / STEPLAW_FILE).is_file():
            return d / STEPLAW_FILE
    raise SystemExit(f"{STEPLAW_FILE} not found in {', '.join(map(str, dirs))}")


def load(path: Path, sweep: str, tmp: str, **kw: Any) -> pd.DataFrame:
    url = f"sqlite:///{tmp}/{sweep}.db"
    import_runs(path, sweep=sweep, url=url, **kw)
    return load_runs(sweep, url)


def fit(runs: pd.DataFrame, method: str, predictors: tuple[str, ...], source: str) -> Any:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        out = fit_runs(
            runs,
            conventions=Conventions(),
            source=source,
            target="lr",
            predictors=predictors,
            options=FitOptions(method=method),
        )
    (law,) = out.laws
    law_seconds = time.perf_counter() - t0
    return law, law_seconds


def summary(law: Any, predictors: tuple[str, ...], seconds: float) -> dict[str, Any]:
    return {
        "exponents": {p: law.exponents[p] for p in predictors},
        "exponents_ci": {p: list(law.exponents_ci[p]) for p in predictors},
        "ci_width": {p: law.exponents_ci[p][1] - law.exponents_ci[p][0] for p in predictors},
        "excludes_0": {
            p: bool(law.exponents_ci[p][0] > 0 or law.exponents_ci[p][1] < 0) for p in predictors
        },
        "prefactor": law.prefactor,
        "cv_error": law.cv_error,
        "holdout_error": law.holdout_error,
        "residual_std": law.residual_std,
        "n_cells": law.n_cells,
        "n_points": law.n_points,
        "interval_method": getattr(law, "interval_method", None),
        "seconds": round(seconds, 1),
    }


def yardstick(
    runs: pd.DataFrame, preds: tuple[str, ...], surface_law: Any, used: list[str]
) -> dict[str, Any]:
    """Leave each cell out, refit surface and band without it, compare both on the same targets."""
    band_opt = {
        o.cell: o.lr
        for o in estimate_optima(runs, method="band", n_boot=0)
        if o.usable and o.lr is not None
    }
    free_opt = dict(surface_law.cell_optima)
    err: dict[str, dict[str, list[float]]] = {
        m: {"band_optimum": [], "surface_free_optimum": []} for m in ("surface", "band")
    }
    cells_done = []
    for c in used:
        if c not in band_opt or c not in free_opt:
            continue
        rest = runs[runs["cell"] != c]
        x = runs.loc[runs["cell"] == c, list(preds)].iloc[0].to_dict()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            s = fit_surface(rest, predictors=preds, n_boot=0, cv=False, min_runs=4)
            b = fit_band_law(rest, target="lr", predictors=preds, n_boot=1000)
        for m, law in (("surface", s), ("band", b)):
            pred = math.log(law.predict({p: float(x[p]) for p in preds}))
            err[m]["band_optimum"].append(pred - math.log(band_opt[c]))
            err[m]["surface_free_optimum"].append(pred - math.log(free_opt[c]))
        cells_done.append(c)
        print(f"  left out {c}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"cells": cells_done}
    for m in err:
        out[m] = {
            k: {
                "rms": float(np.sqrt(np.mean(np.square(v)))),
                "mean_abs": float(np.mean(np.abs(v))),
                "errors": [round(e, 4) for e in v],
            }
            for k, v in err[m].items()
        }
    return out


def do_steplaw(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    runs = load(steplaw_csv(), "steplaw", tmp, renames=STEPLAW_RENAMES, seq_len=2048)
    preds = ("n_params", "tokens")
    res: dict[str, Any] = {"data": STEPLAW_FILE, "n_runs": len(runs), "target": "lr"}
    laws = {}
    for m in ("surface", "band"):
        law, sec = fit(runs, m, preds, "steplaw")
        laws[m] = law
        res[m] = summary(law, preds, sec)
        print(f"{m}: {json.dumps(res[m]['exponents'])} {json.dumps(res[m]['exponents_ci'])} "
              f"cv {law.cv_error}", flush=True)  # fmt: skip
    res["surface_inside_band_ci"] = {
        p: bool(
            laws["band"].exponents_ci[p][0]
            <= laws["surface"].exponents[p]
            <= laws["band"].exponents_ci[p][1]
        )
        for p in preds
    }
    if args.yardstick:
        used = sorted(set(laws["surface"].cell_optima))
        res["loo_same_targets"] = yardstick(runs, preds, laws["surface"], used)
    return res


def do_proxy(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    preds = ("n_params",)
    res: dict[str, Any] = {}
    for name in ("quickstart", "width_sp"):
        runs = load(ROOT / "docs" / "data" / f"{name}.csv", name, tmp)
        row: dict[str, Any] = {"n_runs": len(runs), "n_cells_in_data": int(runs["cell"].nunique())}
        for m in METHODS:
            law, sec = fit(runs, m, preds, name)
            row[m] = summary(law, preds, sec)
        w_par = row["parabola"]["ci_width"]["n_params"]
        for m in METHODS:
            row[m]["width_ratio_to_parabola"] = row[m]["ci_width"]["n_params"] / w_par
            print(f"{name} {m}: {row[m]['exponents']['n_params']:.3f} "
                  f"{row[m]['exponents_ci']['n_params']} x{row[m]['width_ratio_to_parabola']:.2f} "
                  f"excl0 {row[m]['excludes_0']['n_params']}", flush=True)  # fmt: skip
        res[name] = row
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("steplaw", "proxy"))
    ap.add_argument("--yardstick", action="store_true", help="steplaw: LOO on the same targets")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        res = do_steplaw(args, tmp) if args.what == "steplaw" else do_proxy(args, tmp)
    res["command"] = "scripts/fit_methods_real.py " + " ".join(sys.argv[1:])
    res["wall_s"] = round(time.perf_counter() - t0)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    print(f"wall {res['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

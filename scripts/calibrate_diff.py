"""Calibrate ``sweeper diff`` on synthetic pairs: its detection rate for a 0.3 difference in the
n_params exponent and its false-alarm rate on null pairs.

Pairs are synthetic proxy-like ladders (``sweeper.fitting.synthetic.synthetic_sweep``): 6 cells
(N = 24·w² for widths 32-256, one token budget), 8 LRs on a sqrt(2) grid around each cell's
optimum, 2 seeds, proxy-like noise (0.3% of the loss below the optimum rising to 2% above it,
Student-t with 5 degrees of freedom), a cliff above the optimum and divergence 3 steps above it.
An alternative pair has lr* ∝ N^-0.3 in A and N^-0.6 in B (pivoting at the middle cell); a null
pair has -0.3 in both, with different noise. Usage::

    python scripts/calibrate_diff.py --pairs 100 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np

from sweeper.fitting.diff import diff_runs
from sweeper.fitting.synthetic import synthetic_sweep

WIDTHS = np.geomspace(32, 256, 6)
N = tuple(float(x) for x in 24 * WIDTHS**2)


def sweep(exponent: float, seed: int):  # type: ignore[no-untyped-def]
    mid = math.exp(float(np.mean(np.log(N))))
    return synthetic_sweep(
        n_params=N,
        tokens=(819_200.0,),
        lr_law=(0.02 * mid ** (-exponent), {"n_params": exponent}),
        lr_steps=(-4, 3),
        seeds=2,
        noise=0.003,
        noise_high=0.02,
        noise_df=5.0,
        k_low=0.03,
        k_high=0.25,
        seq_len=128,
        batch_size=32,
        loss_law=(1.2, 8.0, 0.0, 0.2, 0.3),
        seed=seed,
    )


def calibrate(pairs: int, *, method: str = "parabola", n_boot: int = 4000, start: int = 0) -> dict:
    out: dict = {"pairs": pairs, "method": method, "n_boot": n_boot, "alt": [], "null": []}
    for i in range(start, start + pairs):
        for kind, (ea, eb) in (("alt", (-0.3, -0.6)), ("null", (-0.3, -0.3))):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = diff_runs(
                    sweep(ea, 10_000 + 2 * i), sweep(eb, 20_000 + 2 * i + (kind == "null")),
                    method=method, n_boot=n_boot, seed=i,
                )  # fmt: skip
            e = r.exponent_differences["n_params"]
            out[kind].append(
                {
                    "exponent_difference": e.value,
                    "exponent_detected": e.excludes_null,
                    "indistinguishable": r.indistinguishable,
                    "distinguished_by": r.distinguished_by,
                }
            )
    alt, null = out["alt"], out["null"]
    out["detection_rate_exponent"] = float(np.mean([x["exponent_detected"] for x in alt]))
    out["detection_rate_any"] = float(np.mean([not x["indistinguishable"] for x in alt]))
    out["null_indistinguishable_rate"] = float(np.mean([x["indistinguishable"] for x in null]))
    out["mean_exponent_difference_alt"] = float(np.mean([x["exponent_difference"] for x in alt]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=100)
    p.add_argument("--method", default="parabola", choices=("parabola", "band"))
    p.add_argument("--bootstrap", type=int, default=4000)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    t0 = time.perf_counter()
    res = calibrate(a.pairs, method=a.method, n_boot=a.bootstrap)
    res["wall_s"] = time.perf_counter() - t0
    summary = {k: v for k, v in res.items() if k not in ("alt", "null")}
    print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

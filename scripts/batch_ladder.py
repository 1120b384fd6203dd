"""The batch-size ladder (studies/batch_b*.toml): the batch law B*(D), the horizon eta*(D), and the
largest budget held out and predicted.

The sweeps (one per batch size, 1-128 sequences of 32 tokens, width 32, depth 2, budgets
205k-3.28M tokens; then the top budget, 6.55M, at 64-512 sequences) are merged into one runs
table, cells by budget, in which the batch varies.
On it:

- every cell's optimum in (lr, batch) (the 2-D parabola of ``sweeper fit --method parabola``) and
  whether its batch optimum is interior (an edge cell is a bound, not an optimum);
- the laws ``sweeper fit`` gives for that table (lr and batch_tokens on tokens), by the parabola
  and the surface methods;
- eta*(D) at each fixed batch (one sweep at a time, the LR law on tokens) and at B*(D) (the lr law
  of the merged table);
- the largest budget held out: the batch law refitted on the other budgets predicts its B*; the
  prediction's regret is read at the trained batch nearest to it (the best loss over that batch's
  LRs against the best of the cell), beside the baselines: reuse the largest fitted budget's B*,
  that B* scaled to the held-out budget by Power Lines' D^0.383, Step Law's B(D), DeepSeek's B(C)
  (their laws in their own token units, applied to bytes here).

    .venv/bin/python scripts/batch_ladder.py --storage sqlite:////work/data/batch.db \
        --csv docs/data/batch_ladder.csv --json docs/data/batch_ladder.json
    .venv/bin/python scripts/batch_ladder.py --from-csv docs/data/batch_ladder.csv   # no training

Every law is the tool's own (``sweeper.fit`` on the runs table, its ``to_dict()``).
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import sweeper
from sweeper.errors import SweeperError
from sweeper.fitting.optimum import CellOptimum, estimate_optima
from sweeper.recipe.published import POWER_LINES_BATCH_EXPONENT, published_laws
from sweeper.recipe.scale import law_scale

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
# the sweeps merged: one per batch, then the top budget (6.55M tokens) and batch 256 at 3.28M
SWEEPS = (
    *(f"batch_b{b}" for b in BATCHES),
    *("batch_b64_top", "batch_b64_top_hi", "batch_b128_top", "batch_b256", "batch_b512"),
    *("batch_b64_top_s1", "batch_b128_top_s1", "batch_b256_top_s1"),  # a second seed at 6.55M
)
METHODS = ("parabola", "surface")


def merged_runs(storage: str) -> pd.DataFrame:
    """The batch sweeps' runs in one table (each run keeps its sweep in ``source``)."""
    parts = [sweeper.runs(name, storage=storage) for name in SWEEPS]
    return pd.concat(parts, ignore_index=True)


def law_summary(law: Any) -> dict[str, Any]:
    d = law.to_dict(include_samples=False) if hasattr(law, "exponents") else law.to_dict()
    keep = ("target", "method", "exponents", "exponents_ci", "prefactor", "n_cells", "cv_error")
    return {k: d.get(k) for k in keep} | {"notes": list(getattr(law, "notes", ()))}


def fit_laws(runs: pd.DataFrame, method: str, **kw: Any) -> dict[str, Any]:
    """The laws ``sweeper.fit`` gives (by target), with its warnings, or the error it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            laws = sweeper.fit(runs, method=method, store=False, **kw)
        except SweeperError as e:
            return {"_warnings": [str(w.message) for w in caught], "_error": str(e)}
    out: dict[str, Any] = {law.target: law for law in laws}
    out["_warnings"] = [str(w.message) for w in caught]
    return out


def optimum_row(o: CellOptimum) -> dict[str, Any]:
    return {
        "cell": o.cell,
        "tokens": o.tokens,
        "lr": o.lr,
        "batch_tokens": o.batch_tokens,
        "batch_tokens_ci": o.batch_tokens_ci,
        "batch_range": o.batch_range,
        "batch_edge": o.batch_edge,
        "lr_edge": o.edge,
        "loss": o.loss,
        "usable": o.usable,
        "reason": o.reason,
        "notes": list(o.notes),  # e.g. a fit that is not convex fell back to the best point
    }


def best_at_batch(cell_runs: pd.DataFrame) -> pd.Series:
    """The best (mean over seeds) loss at each trained batch (tokens) of one cell."""
    ok = cell_runs[(cell_runs["state"] == "COMPLETE") & ~cell_runs["diverged"].astype(bool)]
    per_point = ok.groupby(["batch_tokens", "lr"])["loss"].mean()
    return per_point.groupby(level=0).min()


def regret_at(best: pd.Series, batch_tokens: float) -> dict[str, Any]:
    """The regret of using the trained batch nearest (in log2) to ``batch_tokens``."""
    trained = best.index.to_numpy(float)
    near = float(trained[np.argmin(np.abs(np.log2(trained / batch_tokens)))])
    return {
        "batch_tokens": batch_tokens,
        "nearest_trained": near,
        "regret_pct": 100.0 * (float(best[near]) / float(best.min()) - 1.0),
        # more than half a step (x sqrt 2) beyond the trained batches: the regret is not measured
        "outside_trained": bool(abs(math.log2(near / batch_tokens)) > 0.5),
    }


def holdout(runs: pd.DataFrame, method: str) -> dict[str, Any]:
    """Fit on every budget but the largest; predict the largest's B* and score it."""
    big = float(runs["tokens"].max())
    fit_part = runs[runs["tokens"] < big]
    laws = fit_laws(fit_part, method)
    if "batch_tokens" not in laws:
        why = laws.get("_error", "no batch law on the fit budgets")
        return {"error": why, "warnings": laws["_warnings"]}
    law = laws["batch_tokens"]
    full = estimate_optima(runs)
    held = next(o for o in full if o.tokens == big)  # an edge cell too: its optimum is a bound
    fitted_big = max(
        (o for o in full if o.usable and (o.tokens or 0) < big), key=lambda o: float(o.tokens or 0)
    )
    best = best_at_batch(runs[runs["cell"] == held.cell])
    anchor = float(fitted_big.batch_tokens or math.nan)
    points = {
        "law": float(law.predict({"tokens": big})),
        "largest_fitted": anchor,
        # Power Lines' exponent, which carries over without its prefactor: anchored there
        "power_lines": anchor * (big / float(fitted_big.tokens)) ** POWER_LINES_BATCH_EXPONENT,
    }
    for name in ("steplaw", "deepseek"):  # each at the cell in its own conventions (N, C = M·D)
        pub = published_laws(name)["batch_tokens"]
        scale = law_scale(
            pub, n_params=float(held.n_params or 0), tokens=big, width=int(held.width or 0),
            depth=int(held.depth or 0), seq_len=int(held.seq_len or 0),
            n_params_total=held.n_params_total,
        )  # fmt: skip
        points[name] = float(pub.predict(scale))
    lo, hi = law.interval({"tokens": big})
    return {
        "method": method,
        "holdout_cell": held.cell,
        "fit_budgets": sorted(float(t) for t in fit_part["tokens"].unique()),
        "law": law_summary(law),
        "predicted_batch_tokens": points["law"],
        "predicted_interval": [lo, hi],
        "measured_batch_tokens": held.batch_tokens,
        "measured_batch_edge": held.batch_edge,
        "measured_usable": held.usable,
        "ratio": points["law"] / float(held.batch_tokens or math.nan),
        # the trained batch with the best loss (over its LRs): the grid's read of B*
        "best_trained_batch_tokens": float(best.idxmin()),
        "ratio_to_best_trained": points["law"] / float(best.idxmin()),
        "best_loss": float(best.min()),
        "best_by_batch": {str(int(k)): float(v) for k, v in best.items()},
        "points": {k: regret_at(best, v) for k, v in points.items()},
    }


def horizon_at_fixed_batch(runs: pd.DataFrame) -> dict[str, Any]:
    """eta*(D) at each fixed batch: the LR law on tokens of one batch's sweep (>= 3 budgets)."""
    out: dict[str, Any] = {}
    for bt, part in runs.groupby("batch_tokens"):
        if part["tokens"].nunique() < 3:
            continue
        laws = fit_laws(part, "parabola", target="lr", predictors=["tokens"])
        out[str(int(bt))] = law_summary(laws["lr"]) if "lr" in laws else {"error": laws["_error"]}
    return out


def interior_budgets(runs: pd.DataFrame) -> list[float]:
    """The budgets whose best trained batch (over its LRs) has a trained batch on each side: the
    grid's read of an interior optimum, whatever a per-cell fit makes of it."""
    out = []
    for tokens, cell_runs in runs.groupby("tokens"):
        best = best_at_batch(cell_runs)
        if len(best) >= 3 and best.index.min() < best.idxmin() < best.index.max():
            out.append(float(tokens))
    return out


def emit_json(result: dict[str, Any], path: Path | None) -> None:
    """Print ``result`` as JSON, and write it to ``path`` too when one is given."""
    text = json.dumps(result, indent=2, default=float)
    if path:
        path.write_text(text + "\n")
    print(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--storage", help="where the batch_b* sweeps are")
    src.add_argument("--from-csv", type=Path, help="the merged runs (docs/data/batch_ladder.csv)")
    ap.add_argument("--csv", type=Path, help="write the merged runs here")
    ap.add_argument("--json", type=Path, help="write the results here (also printed)")
    args = ap.parse_args()
    runs = merged_runs(args.storage) if args.storage else pd.read_csv(args.from_csv)
    if args.csv:
        runs.to_csv(args.csv, index=False)
    result: dict[str, Any] = {
        "runs": len(runs),
        "core_seconds": float(runs["wall_s"].sum()),
        "optima": [optimum_row(o) for o in estimate_optima(runs)],
        "laws": {},
        "horizon_fixed_batch": horizon_at_fixed_batch(runs),
        "holdout": {},
    }
    # the same, on the budgets with an interior best batch only (an edge budget is a bound)
    inner = interior_budgets(runs)
    inner_runs = runs[runs["tokens"].isin(inner)]
    result |= {"interior_budgets": inner, "laws_interior": {}, "holdout_interior": {}}
    for m in METHODS:
        for key, part in (("", runs), ("_interior", inner_runs)):
            laws = fit_laws(part, m)
            result["laws" + key][m] = {
                k: law_summary(v) for k, v in laws.items() if not k.startswith("_")
            } | {"warnings": laws["_warnings"], "error": laws.get("_error")}
            result["holdout" + key][m] = holdout(part, m)
    emit_json(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

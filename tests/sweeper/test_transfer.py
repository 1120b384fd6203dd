"""validate-transfer's arithmetic on a synthetic sweep: the plan, the regret and its resolution."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweeper.fit.synthetic import synthetic_sweep
from sweeper.runs import normalize_runs
from sweeper.transfer import plan_transfer, summarize_transfer

pytestmark = pytest.mark.filterwarnings("ignore:only 4 cells")


@pytest.fixture(scope="module")
def sweep_runs() -> pd.DataFrame:
    return synthetic_sweep(
        n_params=(1e6, 2e6, 4e6, 8e6, 1.6e7), tokens=(4e8,), seeds=2, noise=2e-3, seed=3
    )


def _trained(plan, losses: dict[str, list[float]]) -> pd.DataFrame:
    held = plan.holdout
    rows = [
        {
            "n_params": held.n_params,
            "tokens": held.tokens,
            "lr": plan.lrs[name],
            "batch_size": 64.0,
            "seq_len": 256.0,
            "loss": loss,
            "diverged": False,
            "state": "COMPLETE",
            "seed": float(s),
            "source": "transfer",
        }
        for name, vals in losses.items()
        for s, loss in enumerate(vals)
    ]
    return normalize_runs(pd.DataFrame(rows))


def test_plan_holds_out_the_largest_cell_and_predicts_it(sweep_runs: pd.DataFrame) -> None:
    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    assert plan.holdout.n_params == pytest.approx(1.6e7)
    assert plan.law.n_cells == 4
    # the synthetic optimum is 2·N^-0.5; the refit without the cell lands within a grid step
    assert abs(math.log2(plan.lrs["law"] / (2.0 * 1.6e7**-0.5))) < 0.5
    assert set(plan.lrs) == {"law", "smallest_cell", "steplaw", "measured_optimum"}


def test_regret_and_its_resolution_are_hand_computable(sweep_runs: pd.DataFrame) -> None:
    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    cell = sweep_runs[np.isclose(sweep_runs["n_params"], 1.6e7)]
    points = cell[cell["state"] == "COMPLETE"].groupby("lr")["loss"].agg(["mean", "std", "count"])
    best = points.loc[points["mean"].idxmin()]
    law_losses = [best["mean"] * 1.01, best["mean"] * 1.03]  # +2% on average
    res = summarize_transfer(
        plan,
        sweep_runs,
        _trained(
            plan,
            {
                "law": law_losses,
                "smallest_cell": [best["mean"] * 1.2] * 2,
                "steplaw": [best["mean"] * 1.5] * 2,
                "measured_optimum": [best["mean"]] * 2,
            },
        ),
    )
    assert res.best_swept_loss == pytest.approx(best["mean"])
    assert res.regret_pct == pytest.approx(2.0, abs=1e-9)
    assert res.baseline_regret_pct == pytest.approx(20.0)
    assert res.published_regret_pct == pytest.approx(50.0)
    assert res.regret_vs_optimum_pct == pytest.approx(2.0, abs=1e-9)
    sd_law = float(np.std(law_losses, ddof=1))
    se = 100 * math.sqrt(sd_law**2 / 2 + best["std"] ** 2 / best["count"]) / best["mean"]
    assert res.regret_se_pct == pytest.approx(se)
    assert res.grid_step_log2 == pytest.approx(0.5)  # the synthetic grid is in sqrt(2) steps
    assert res.log2_error == pytest.approx(math.log2(res.predicted_lr / res.measured_lr))
    d = res.to_dict()
    assert {"log2_error", "regret_pct", "baseline_regret_pct", "regret_se_pct"} <= set(d)

"""The optimum per cell: recovery on seeded synthetic sweeps, edges, diverged runs, too few runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import FitError
from sweeper.fitting import estimate_optima, near_optimal_runs, optima_frame, synthetic_sweep

LR_LAW = (2.0, {"n_params": -0.5})


def true_lr(n_params: float) -> float:
    return 2.0 * n_params**-0.5


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return synthetic_sweep(lr_law=LR_LAW, seeds=2, noise=1e-3, seed=1)


@pytest.mark.parametrize("method", ["parabola", "band"])
def test_optimum_recovered_within_ci(runs: pd.DataFrame, method: str) -> None:
    optima = estimate_optima(runs, method=method, n_boot=200)
    assert len(optima) == runs["cell"].nunique() == 8
    inside = 0
    for o in optima:
        assert o.usable and not o.on_edge and o.method == method
        assert o.lr is not None and o.lr_ci is not None
        truth = true_lr(o.n_params or 0)
        assert abs(math.log(o.lr / truth)) < 0.25, (o.cell, o.lr, truth)
        assert o.lr_ci[0] <= o.lr <= o.lr_ci[1] or method == "band"
        inside += o.lr_ci[0] <= truth <= o.lr_ci[1]
        assert o.batch_tokens_ci is None and o.batch_tokens == 64 * 256  # batch not swept
    assert inside >= 6, f"truth inside only {inside} of 8 intervals"


def test_parabola_fields(runs: pd.DataFrame) -> None:
    o = estimate_optima(runs, n_boot=50)[0]
    assert o.curvature is not None and o.curvature > 0
    assert len(o.curve_coefs) == 3 and len(o.curve_center) == 1
    assert o.window_lr is not None and o.window_lr[0] < o.lr <= o.window_lr[1] * (1 + 1e-9)
    assert o.lr_range is not None and o.lr_range[0] <= o.window_lr[0]
    # the fitted curve at the optimum is the fitted minimum loss
    assert float(o.curve(o.lr)) == pytest.approx(o.loss, rel=1e-9)
    assert o.n_used < o.n_runs
    assert o.diverged_lr_min is not None and o.diverged_lr_min > o.lr


def test_seeds_at_one_point_are_averaged(runs: pd.DataFrame) -> None:
    """Running every point twice with the same result changes nothing in the estimate."""
    one = estimate_optima(runs, n_boot=0)
    two = estimate_optima(pd.concat([runs, runs], ignore_index=True), n_boot=0)
    for a, b in zip(one, two, strict=True):
        assert a.lr == pytest.approx(b.lr, rel=1e-9)
        assert b.n_runs == 2 * a.n_runs


def test_optimum_on_edge_is_flagged() -> None:
    # the grid stops 1 step below the optimum (high edge) or starts 1 step above it (low edge)
    high = synthetic_sweep(lr_law=LR_LAW, lr_steps=(-8, -1), jitter=False, n_params=(1e6, 4e6))
    low = synthetic_sweep(lr_law=LR_LAW, lr_steps=(1, 2), jitter=False, n_params=(1e6, 4e6))
    low = pd.concat([low, synthetic_sweep(lr_law=LR_LAW, lr_steps=(1, 2), n_params=(1e6, 4e6))])
    for frame, edge in ((high, "high"), (low, "low")):
        for o in estimate_optima(frame, n_boot=20):
            assert o.on_edge and o.edge == edge and not o.usable
            assert f"{edge} edge" in o.reason and "widen" in o.reason
        kept = estimate_optima(frame, n_boot=20, keep_edge=True)
        assert all(o.usable and o.on_edge for o in kept)
    for o in estimate_optima(high, method="band", n_boot=0):
        assert o.edge == "high" and not o.usable


def test_diverged_runs_change_the_bound_not_the_estimate(runs: pd.DataFrame) -> None:
    cell = runs[runs["cell"] == runs["cell"].iloc[0]]
    done = cell[~cell["diverged"]]
    base = estimate_optima(done, n_boot=100)[0]
    assert base.diverged_lr_min is None and base.edge is None
    top = done["lr"].max()
    diverged = pd.DataFrame(
        {
            "cell": done["cell"].iloc[0],
            "n_params": done["n_params"].iloc[0],
            "tokens": done["tokens"].iloc[0],
            "lr": [top * 2**0.5, top * 2],
            "batch_size": 64.0,
            "seq_len": 256.0,
            "loss": [np.nan, 11.0],
            "diverged": True,
        }
    )
    both = estimate_optima(pd.concat([done, diverged], ignore_index=True), n_boot=100)[0]
    assert both.lr == base.lr and both.lr_ci == base.lr_ci and both.loss == base.loss
    assert both.diverged_lr_min == pytest.approx(top * 2**0.5)
    assert both.n_runs == base.n_runs + 2 and both.lr_range == base.lr_range

    # best at the highest completed LR: on the edge, unless a run diverged just above it
    trimmed = done[done["lr"] <= done.loc[done["loss"].idxmin(), "lr"] * (1 + 1e-9)]
    alone = estimate_optima(trimmed, n_boot=50)[0]
    assert alone.edge == "high" and not alone.usable
    bounded = estimate_optima(pd.concat([trimmed, diverged], ignore_index=True), n_boot=50)[0]
    assert bounded.edge is None and bounded.usable
    assert bounded.lr == pytest.approx(alone.lr, rel=0.5)  # bounded by the diverged LR above


def test_cells_with_too_few_runs_are_reported() -> None:
    df = synthetic_sweep(lr_law=LR_LAW, n_params=(1e6, 4e6), tokens=(1e8,), seed=3)
    small = df[df["n_params"] == 1e6].nsmallest(3, "lr")
    mixed = pd.concat([df[df["n_params"] == 4e6], small], ignore_index=True)
    by_cell = {o.cell: o for o in estimate_optima(mixed, n_boot=0)}
    few = by_cell[small["cell"].iloc[0]]
    assert not few.usable and "fewer than min_runs=4" in few.reason and few.lr is None
    assert by_cell[df.loc[df["n_params"] == 4e6, "cell"].iloc[0]].usable
    two_lrs = pd.concat([small.iloc[:2]] * 3, ignore_index=True)
    (o,) = estimate_optima(two_lrs, n_boot=0)
    assert not o.usable and "distinct LRs" in o.reason


def test_no_lr_column_is_reported() -> None:
    df = pd.DataFrame({"n_params": [1e6] * 5, "tokens": [1e8] * 5, "loss": [3.0] * 5})
    (o,) = estimate_optima(df)
    assert not o.usable and o.reason == "no lr values in this cell"


def test_batch_swept_two_dimensional() -> None:
    df = synthetic_sweep(
        lr_law=LR_LAW,
        batch_law=(0.5, {"tokens": 0.6}),
        n_params=(1e6, 4e6),
        tokens=(1e8, 4e8),
        noise=5e-4,
        seed=2,
    )
    for method in ("parabola", "band"):
        for o in estimate_optima(df, method=method, n_boot=100):
            truth = 0.5 * (o.tokens or 0) ** 0.6
            assert o.batch_tokens_ci is not None and o.batch_range is not None
            assert abs(math.log((o.batch_tokens or 0) / truth)) < 0.3, (method, o.cell)
            assert abs(math.log((o.lr or 0) / true_lr(o.n_params or 0))) < 0.3
            if method == "parabola":
                assert o.usable and not o.on_edge  # a vertex inside the batches fitted
                assert len(o.curve_coefs) == 6 and o.batch_curvature is not None
                assert o.window_batch_tokens is not None
                assert float(o.curve(o.lr, o.batch_tokens)) == pytest.approx(o.loss)


#: the batch ladder's 6.55M-token cell (docs/data/batch_ladder.csv): batch (tokens), lr, loss; each
#: batch on its own LR grid, one sqrt(2) step above the previous batch's, one seed
LADDER_TOP = (
    (2048, 0.00962, 1.7594), (2048, 0.0136, 1.7484), (2048, 0.0192, 1.7824),
    (2048, 0.0272, 1.7738), (2048, 0.0385, 1.7430), (2048, 0.0544, 1.7860),
    (2048, 0.077, 1.8162), (4096, 0.0136, 1.7503), (4096, 0.0192, 1.7207),
    (4096, 0.0272, 1.7414), (4096, 0.0385, 1.7434), (4096, 0.0544, 1.7334),
    (8192, 0.0192, 1.7574), (8192, 0.0272, 1.7558), (8192, 0.0385, 1.7898),
    (8192, 0.0544, 1.8446), (8192, 0.077, 1.8407), (16384, 0.0272, 1.9739),
    (16384, 0.0385, 2.0142), (16384, 0.0544, 1.9259), (16384, 0.077, 2.0015),
    (16384, 0.109, 2.0971),
)  # fmt: skip


def test_a_batch_vertex_beyond_the_fitted_batches_is_a_bound_not_an_optimum() -> None:
    """The parabola's window keeps the LRs at or below the best point's, so on shifted per-batch
    LR grids it sees one run at 8192 tokens and none at 16384; its vertex fell far above 8192
    (the runs there are worse) and was held at 8192. That is flagged, not reported as B*."""
    df = pd.DataFrame(LADDER_TOP, columns=["batch_tokens", "lr", "loss"]).assign(
        cell="w32-d2-t6.55M", n_params=24736.0, tokens=6553600.0, diverged=False
    )
    (o,) = estimate_optima(df, method="parabola", n_boot=0)
    assert o.batch_tokens == pytest.approx(8192.0)
    assert o.on_edge and not o.usable and o.batch_edge is None  # the best point is interior
    assert "held at the largest batch" in o.reason


def test_band_near_optimal_runs(runs: pd.DataFrame) -> None:
    near = near_optimal_runs(runs, band=0.0025)
    best = runs[~runs["diverged"]].groupby("cell")["loss"].min()
    assert set(near["cell"]) == set(best.index)
    assert (near["loss"] <= near["cell"].map(best) * 1.0025).all()
    wide = near_optimal_runs(runs, band=0.01)
    assert len(wide) > len(near)


def test_optima_frame_columns(runs: pd.DataFrame) -> None:
    frame = optima_frame(estimate_optima(runs, n_boot=20))
    for col in ("cell", "n_params", "lr", "lr_ci_low", "lr_ci_high", "usable", "on_edge", "reason"):
        assert col in frame.columns
    assert (frame["lr_ci_low"] <= frame["lr_ci_high"]).all()


def test_bad_arguments() -> None:
    df = synthetic_sweep(n_params=(1e6,), tokens=(1e8,))
    with pytest.raises(FitError, match="method must be one of"):
        estimate_optima(df, method="spline")
    with pytest.raises(FitError, match="band > 0"):
        estimate_optima(df, band=0.0)
    with pytest.raises(FitError, match="no runs"):
        estimate_optima(df.iloc[:0])


def test_two_batch_sizes_profile_the_lr_at_the_best_one() -> None:
    df = synthetic_sweep(
        lr_law=LR_LAW,
        batch_law=(0.5, {"tokens": 0.6}),
        batch_steps=(0, 1),
        n_params=(1e6,),
        tokens=(1e8,),
        seed=6,
    )
    assert df["batch_size"].nunique() == 2
    (o,) = estimate_optima(df, n_boot=50)
    best = df.loc[df["loss"].idxmin(), "batch_tokens"]
    assert o.batch_tokens == pytest.approx(best) and o.batch_tokens_ci is None
    assert "batch swept at 2 values only" in o.notes[0] and len(o.curve_coefs) == 3
    band = estimate_optima(df, method="band", n_boot=50)[0]
    assert band.batch_tokens_ci is not None  # the band averages over both batch sizes


def _cell_runs(lrs: list[float], losses: list[float]) -> pd.DataFrame:
    from sweeper.study.runs import normalize_runs

    return normalize_runs(
        pd.DataFrame(
            {
                "lr": lrs,
                "loss": losses,
                "n_params": 1e5,
                "tokens": 1e6,
                "batch_size": 32.0,
                "seq_len": 128.0,
                "seed": 0.0,
            }
        )
    )


def test_a_cliff_above_the_best_caps_the_optimum_at_the_best_lr() -> None:
    # the smooth side still falls at the best LR (the vertex would run upwards), then a cliff
    lrs = [1.2e-3, 1.7e-3, 2.4e-3, 3.4e-3, 4.8e-3, 6.8e-3]
    cliff = _cell_runs(lrs, [2.296, 2.261, 2.231, 2.215, 2.346, 2.47])
    (o,) = estimate_optima(cliff, n_boot=0)
    assert o.lr == pytest.approx(3.4e-3)
    # the same curve with a neighbour only slightly worse: the vertex may pass the best LR, but
    # not the midpoint (in ln lr) between the best and that neighbour
    smooth = _cell_runs(lrs, [2.296, 2.261, 2.231, 2.215, 2.220, 2.26])
    (o2,) = estimate_optima(smooth, n_boot=0)
    assert 3.4e-3 < o2.lr <= math.sqrt(3.4e-3 * 4.8e-3) * (1 + 1e-9)


def test_losses_equal_across_lrs_say_the_lr_does_not_reach_the_training() -> None:
    """A training function that ignored hparams["lr"] gave six identical losses a cell, and the
    fit said only "widen the LR range" (an API audit)."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.fit_runs import FitOptions, fit_runs

    runs = synthetic_sweep(lr_law=LR_LAW, seeds=2, noise=1e-3, seed=1)
    kw = {"conventions": Conventions(), "source": "s", "options": FitOptions(method="parabola")}
    assert not any("exactly the same loss" in w for w in fit_runs(runs, **kw).warnings)
    cell = runs["cell"].iloc[0]
    flat = runs.assign(loss=np.where(runs["cell"] == cell, 3.0, runs["loss"]))
    said = [w for w in fit_runs(flat, **kw).warnings if "exactly the same loss" in w]
    assert said and said[0].startswith(f"in {cell}, runs at different LRs")
    assert "hparams['lr']" in said[0]


def test_a_cell_of_two_batch_sizes_says_so_in_the_parabola() -> None:
    """Two batch sizes a cell are too few for the parabola's quadratic: the batch fit's reason
    had said "batch size not swept in this cell" (a fitting audit)."""
    from sweeper.fitting.power_law import fit_power_law

    df = synthetic_sweep(
        lr_law=LR_LAW, batch_law=(0.5, {"tokens": 0.6}), n_params=(1e6, 4e6),
        tokens=(1e8, 4e8, 1.6e9), batch_steps=(0, 1), seed=2,
    )  # fmt: skip
    optima = estimate_optima(df, method="parabola", n_boot=20)
    with pytest.raises(FitError, match="batch swept at only 2 values in this cell"):
        fit_power_law(optima, target="batch_tokens", predictors=("tokens",))


def test_runs_that_trained_off_their_budget_are_said_by_the_fit() -> None:
    """A training function's run more than 10% off its budget keeps a tokens_note, logged at
    launch; the fit took it at the cell's D without a word."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.fit_runs import FitOptions, fit_runs

    runs = synthetic_sweep(lr_law=LR_LAW, seeds=2, noise=1e-3, seed=1)
    kw = {"conventions": Conventions(), "source": "s", "options": FitOptions(method="parabola")}
    noted = runs.assign(tokens_note=None)
    noted.loc[noted.index[:2], "tokens_note"] = "train.function 'm:f' trained 1,280 tokens"
    said = [w for w in fit_runs(noted, **kw).warnings if "away from their cell's tokens" in w]
    assert said and said[0].startswith("2 run(s) in ") and "m:f" in said[0]
    assert "1,280 tokens)" in said[0], "a short note is quoted whole, with no '...'"
    noted.loc[noted.index[:2], "tokens_note"] = "x" * 300
    long = [w for w in fit_runs(noted, **kw).warnings if "away from their cell's tokens" in w]
    assert "x" * 157 + "...)" in long[0] and "x" * 158 not in long[0]
    assert not any("cell's tokens" in w for w in fit_runs(runs, **kw).warnings)


def test_min_runs_given_beside_the_planner_settings_is_used() -> None:
    """``--surface planner`` needs 3 completed runs a cell unless ``--min-runs`` is given: its 3
    had overridden a given --min-runs in silence."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.fit_runs import FitOptions, fit_runs

    runs = synthetic_sweep(lr_law=LR_LAW, noise=1e-3, seed=1)
    small = runs["cell"] == runs["cell"].iloc[0]
    near = runs[small].nsmallest(3, "loss").index
    runs = runs[~small | runs.index.isin(near)]  # one cell of 3 runs, the others of 10

    def notes(min_runs: int | None) -> str:
        opt = FitOptions(surface="planner", min_runs=min_runs, n_boot=0)
        law = fit_runs(runs, conventions=Conventions(), source="s", target="lr", options=opt)
        return " ".join(law.laws[0].notes)

    assert "min_runs=" not in notes(None)  # the default: the planner's 3
    assert "needs min_runs=5" in notes(5)
    assert "needs min_runs=4" in notes(4)  # given, though the default elsewhere (a review)

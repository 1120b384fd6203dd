"""Synthetic sweeps: the proxy-like ladders and the options added for them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweeper.fitting.synthetic import PROXY_LR_GRID, proxy_sweep, synthetic_sweep


def test_proxy_sweep_shape() -> None:
    runs = proxy_sweep(5, seed=0)
    assert runs["cell"].nunique() == 5
    assert sorted(runs["width"].unique()) == pytest.approx(np.geomspace(32, 256, 5).tolist())
    assert (runs["n_params"] == 12 * 2 * runs["width"] ** 2).all()
    assert (runs["depth"] == 2).all() and (runs["tokens"] == 819_200).all()
    assert (runs["batch_tokens"] == 32 * 128).all()
    # one fixed sqrt(2) grid shared by every cell, 2 seeds per point
    for _, g in runs.groupby("cell"):
        assert sorted(g["lr"].unique()) == pytest.approx(PROXY_LR_GRID)
        assert (g.groupby("lr").size() == 2).all()
    steps = np.diff(np.log(PROXY_LR_GRID))
    assert steps == pytest.approx(math.log(math.sqrt(2)), abs=0.01)
    # the grid brackets every cell's optimum (default law 0.208 N^-0.3)
    opt = 0.208 * runs["n_params"].unique() ** -0.3
    assert (opt > PROXY_LR_GRID[1]).all() and (opt < PROXY_LR_GRID[-2]).all()


def test_proxy_sweep_noise_cliff_and_divergence() -> None:
    runs = proxy_sweep(7, seed=1)
    u = np.log(runs["lr"] / (0.208 * runs["n_params"] ** -0.3))
    # runs 3 steps (2^1.5) above the optimum diverged, nothing below it did
    assert (runs.loc[u > math.log(2**1.5) + 1e-9, "diverged"]).all()
    assert not runs.loc[u <= 0, "diverged"].any()
    # seeds differ ~0.3% of the loss below the optimum, several times more above
    done = runs[~runs["diverged"]].assign(u=u)
    spread = done.groupby(["cell", "lr"]).agg(
        d=("loss", lambda s: abs(s.iloc[0] - s.iloc[-1]) / s.mean()), u=("u", "first")
    )
    below = spread.loc[spread["u"] < -0.1, "d"].median()
    above = spread.loc[spread["u"] > 0.4, "d"].median()
    assert 0.001 < below < 0.01
    assert above > 3 * below
    # the cliff: one step above costs much more than one step below
    best = done.groupby("cell")["loss"].transform("min")
    exc = (done["loss"] / best - 1).groupby(pd.cut(done["u"], [-0.5, -0.2, 0.2, 0.5])).median()
    assert exc.iloc[2] > 2 * exc.iloc[0]


def test_new_options() -> None:
    grid = synthetic_sweep(n_params=(1e6, 4e6), tokens=(1e8,), lr_grid=(1e-3, 2e-3), seed=0)
    assert sorted(grid["lr"].unique()) == [1e-3, 2e-3] and len(grid) == 4
    # opt_scatter moves each cell's optimum off the law by exp(N(0, s²))
    sizes = tuple(1e6 * 1.2**k for k in range(40))
    one = synthetic_sweep(n_params=sizes, tokens=(1e8,), lr_steps=(0, 0), jitter=False, seed=3)
    off = synthetic_sweep(
        n_params=sizes, tokens=(1e8,), lr_steps=(0, 0), jitter=False, opt_scatter=0.3, seed=3
    )
    law = 2.0 * off["n_params"] ** -0.5
    assert np.log(one["lr"] / law).to_numpy() == pytest.approx(0.0, abs=1e-12)
    assert np.std(np.log(off["lr"] / law)) == pytest.approx(0.3, rel=0.35)
    # heavy tails: Student-t noise with the same sd
    t5 = synthetic_sweep(n_params=(1e6,), tokens=(1e8,), noise=0.01, noise_df=5, seeds=50, seed=1)
    assert t5["loss"].notna().sum() > 100
    with pytest.raises(ValueError, match="noise_df"):
        synthetic_sweep(noise_df=2.0)
    # the best LR moves with the batch: lr*(B) = lr* (B/B*)^slope
    runs = synthetic_sweep(
        n_params=(1e6,),
        tokens=(1e9,),
        batch_law=(0.5, {"tokens": 0.6}),
        lr_steps=(-12, 12),
        lr_step=2**0.25,
        noise=0.0,
        lr_batch_slope=0.5,
        diverge_above=1e9,
        jitter=False,
    )
    best = runs.loc[runs.groupby("batch_size")["loss"].idxmin()].sort_values("batch_size")
    slope = np.polyfit(np.log(best["batch_size"]), np.log(best["lr"]), 1)[0]
    assert slope == pytest.approx(0.5, abs=0.1)

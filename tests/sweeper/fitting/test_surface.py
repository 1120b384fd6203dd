"""The surface fit: one model of every run, whose optimum is the power law (sweeper.fitting.surface).

Known surfaces are recovered, a broken ladder does not give a confident exponent, the LR × batch
fit recovers both laws, bad inputs fail with one clear line, and the risk-aware methods behave.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import FitError, ScaleError
from sweeper.fitting import FitWarning, synthetic_sweep
from sweeper.fitting import _surface_model as sm
from sweeper.fitting import surface as su
from sweeper.fitting._surface_data import prepare
from sweeper.fitting._surface_fit import scaling_f_test
from sweeper.fitting.laws import PowerLaw
from sweeper.fitting.methods import EDGE_NOTE
from sweeper.fitting.surface import Regret, SurfaceLaw, fit_surface, fit_surfaces
from sweeper.fitting.synthetic import proxy_sweep

TRUE_B = -0.3  # proxy_sweep's default law: lr* = 0.208 · N^-0.3
N_BOOT = 30


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def proxy_runs() -> pd.DataFrame:
    return proxy_sweep(7, seed=0)


@pytest.fixture(scope="module")
def proxy_law(proxy_runs: pd.DataFrame) -> SurfaceLaw:
    return _quiet(fit_surface, proxy_runs, n_boot=N_BOOT, seed=0)


# --- recovery ------------------------------------------------------------------------------------


def test_recovers_a_proxy_ladder(proxy_law: SurfaceLaw, proxy_runs: pd.DataFrame) -> None:
    """7 cells × 8 shared LRs × 2 seeds, noisy cliff, divergence: the exponent within 0.03 (its
    RMSE over 200 such ladders is ~0.006, scripts/bench_fit_methods.py), inside its interval; the
    curvature below (k = 2·k_low) within 40%; above (2·k_high) only one sqrt(2) step of the window
    informs it, so only its interval must cover the truth and it must be the steeper side."""
    law = proxy_law
    b = law.exponents["n_params"]
    lo, hi = law.exponents_ci["n_params"]
    assert b == pytest.approx(TRUE_B, abs=0.03)
    assert lo <= TRUE_B <= hi
    assert hi - lo < 0.1
    assert law.n_cells == 7 and law.method == "surface" and law.kind == "surface"
    # every run is a point or a bound, but those more than 4x below their cell's best LR
    far_below = sum("below it left out" in n for n in law.notes)
    assert law.n_points == len(proxy_runs) or (far_below and law.n_points > 0.9 * len(proxy_runs))
    scale = {"n_params": float(np.median(proxy_runs["n_params"].unique()))}
    curv = law.curvature(scale)
    assert curv["below"][0] == pytest.approx(0.06, rel=0.4)
    assert curv["above"][1] <= 0.5 <= curv["above"][2]
    assert curv["above"][0] > 2 * curv["below"][0]
    assert curv["below"][1] <= curv["below"][0] <= curv["below"][2]
    # every cell's free optimum is close to the law
    for cell, lr in law.cell_optima.items():
        n = float(proxy_runs.loc[proxy_runs["cell"] == cell, "n_params"].iloc[0])
        assert math.log(lr / law.predict({"n_params": n})) == pytest.approx(0.0, abs=0.1)


def test_is_a_power_law(proxy_law: SurfaceLaw) -> None:
    """Usable wherever a PowerLaw is: predict, interval (from boot_coefs), JSON, round trip."""
    law = proxy_law
    assert isinstance(law, PowerLaw)
    scale = {"n_params": 3e7}
    lo, hi = law.interval(scale)
    assert lo < law.predict(scale) < hi
    assert len(law.boot_coefs) == N_BOOT and len(law.boot_coefs[0]) == 2
    d = json.loads(json.dumps(law.to_dict()))
    assert d["kind"] == "surface" and d["exponents"] == law.exponents
    assert {"shape_names", "shape_params", "shape_draws", "shape_cov", "noise"} <= set(d)
    back = SurfaceLaw.from_dict(d)
    assert back == law
    assert back.risk_optimal_lr(scale) == law.risk_optimal_lr(scale)


def test_laplace_intervals_without_resampling(proxy_runs: pd.DataFrame) -> None:
    law = _quiet(fit_surface, proxy_runs, n_boot=0)
    lo, hi = law.exponents_ci["n_params"]
    assert lo < law.exponents["n_params"] < hi and lo <= TRUE_B <= hi
    assert law.interval_method.startswith("Laplace")
    cov = np.asarray(law.shape_cov)
    j = law.shape_names.index("lr:n_params")
    assert cov.shape == (len(law.shape_names),) * 2
    assert 0 < math.sqrt(cov[j, j]) < (hi - lo)
    # the cheap sd of ln(optimum) agrees with the width of the prediction interval
    scale = {"n_params": 3e7}
    p_lo, p_hi = law.interval(scale)
    sd = law.log_optimum_sd(scale)
    assert math.log(p_hi / p_lo) / (2 * 1.96) == pytest.approx(sd, rel=0.25)


def test_shuffled_ladder_is_not_confident() -> None:
    """Cells' curves assigned to the wrong sizes: the fit must not claim a clear exponent (the
    cells' optima scatter about any line; τ takes it up)."""
    runs = proxy_sweep(6, seed=2)
    sizes = sorted(runs["n_params"].unique())
    perm = dict(zip(sizes, [sizes[i] for i in (3, 0, 5, 1, 4, 2)], strict=True))
    shuffled = runs.drop(columns=["cell", "width"]).assign(n_params=runs["n_params"].map(perm))
    law = _quiet(fit_surface, shuffled, n_boot=N_BOOT, seed=0, cv=False)
    lo, hi = law.exponents_ci["n_params"]
    assert lo < 0.0 < hi, (lo, hi)
    assert law.residual_std > 0.2


def test_lr_and_batch_jointly() -> None:
    """Several (N, D) cells, LR and batch searched, best LR moving with the batch, divergence
    above a cliff: the LR's N and D exponents and the batch law's D exponent within ±0.05."""
    runs = synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7, 6.4e7),
        tokens=(1e8, 4e8, 1.6e9),
        lr_law=(2.0, {"n_params": -0.5, "tokens": 0.1}),
        batch_law=(0.5, {"tokens": 0.6}),
        lr_steps=(-5, 3),
        batch_steps=(-2, 2),
        noise=3e-3,
        lr_batch_slope=0.5,
        seed=5,
    )
    assert runs["diverged"].any()
    laws = _quiet(
        fit_surfaces,
        runs,
        lr_predictors=("n_params", "tokens"),
        batch_predictors=("tokens",),
        n_boot=0,
        cv=False,
    )
    assert set(laws) == {"lr", "batch_tokens"}
    lr, bt = laws["lr"], laws["batch_tokens"]
    assert lr.exponents["n_params"] == pytest.approx(-0.5, abs=0.05)
    assert lr.exponents["tokens"] == pytest.approx(0.1, abs=0.05)
    assert bt.exponents["tokens"] == pytest.approx(0.6, abs=0.05)
    theta = dict(zip(lr.shape_names, lr.shape_params, strict=True))
    assert theta["coupling"] == pytest.approx(0.5, abs=0.1)
    # the same joint fit, asked for the batch law
    bt2 = _quiet(
        fit_surface,
        runs,
        target="batch_tokens",
        predictors=("tokens",),
        other_predictors=("n_params", "tokens"),
        n_boot=0,
        cv=False,
    )
    assert bt2.exponents == pytest.approx(bt.exponents)


# --- bad input -------------------------------------------------------------------------------------


def test_one_cell_and_no_lr_variation(proxy_runs: pd.DataFrame) -> None:
    one = proxy_runs[proxy_runs["cell"] == proxy_runs["cell"].iloc[0]]
    with pytest.raises(FitError, match=r"need at least 3 usable cells.*got 1"):
        fit_surface(one, n_boot=0)
    with pytest.raises(FitError, match="lr does not vary within any cell"):
        fit_surface(proxy_runs[proxy_runs["lr"] == 4.8e-3], n_boot=0)
    # every run diverged (a loop that returned NaN): said so, not "lr does not vary"
    nan = proxy_runs.assign(loss=float("nan"), diverged=True)
    with pytest.raises(FitError, match=r"no completed run has a finite loss \(\d+ diverged\)"):
        fit_surface(nan, n_boot=0)
    with pytest.raises(FitError, match="unknown predictor"):
        fit_surface(proxy_runs, predictors=("size",), n_boot=0)
    with pytest.raises(FitError, match="'tokens' does not vary"):
        fit_surface(proxy_runs, predictors=("n_params", "tokens"), n_boot=0)
    with pytest.raises(FitError, match="batch size does not vary"):
        fit_surface(proxy_runs, target="batch_tokens", predictors=("tokens",), n_boot=0)


def test_all_diverged_cell_is_checked_not_fitted(proxy_runs: pd.DataFrame) -> None:
    """A cell whose runs all diverged is not a cell: its bound is checked against the law (and
    warned either way); too few cells left is a FitError naming it."""
    cells = list(dict.fromkeys(proxy_runs["cell"]))
    runs = proxy_runs.copy()
    gone = runs["cell"] == cells[0]  # the smallest cell: its optimum (1e-2) is the highest LR
    runs.loc[gone, "diverged"] = True
    runs.loc[gone, "loss"] = np.nan
    with pytest.warns(FitWarning, match=rf"cell {re.escape(cells[0])}: 0 completed.*above it"):
        law = fit_surface(runs, n_boot=0, cv=False)
    assert law.n_cells == 6 and law.n_points == int((~gone).sum())
    without = _quiet(fit_surface, proxy_runs[~gone], n_boot=0, cv=False)
    assert law.exponents == pytest.approx(without.exponents)
    # the largest cell, run only above its optimum (2.9e-3), all diverged: a consistent bound
    big = proxy_runs["cell"] == cells[-1]
    high = proxy_runs[~big | (proxy_runs["lr"] >= 4.8e-3)].copy()
    high.loc[high["cell"] == cells[-1], ["diverged", "loss"]] = [True, np.nan]
    with pytest.warns(FitWarning, match=rf"cell {re.escape(cells[-1])}.*below it \(consistent"):
        fit_surface(high, n_boot=0, cv=False)
    few = runs[runs["cell"].isin(cells[:3])]
    with pytest.raises(FitError, match=rf"got 2; only a bound .*: {re.escape(cells[0])}"):
        fit_surface(few, n_boot=0)


def test_a_bound_cells_note_counts_diverged_runs_apart_from_runs_past_the_window(
    proxy_runs: pd.DataFrame,
) -> None:
    """A report audit: a cell's completed runs past the fit window, near its best loss, were
    "3 diverged" in the note, beside a plot and a table that showed none diverged."""
    cells = list(dict.fromkeys(proxy_runs["cell"]))
    big = proxy_runs["cell"] == cells[-1]
    runs = proxy_runs[~big | (proxy_runs["lr"] == 0.0034) | (proxy_runs["lr"] >= 0.0136)].copy()
    in_big = runs["cell"] == cells[-1]
    runs.loc[in_big & (runs["lr"] == 0.0136), ["diverged", "loss"]] = [False, 1.70]
    runs.loc[in_big & (runs["lr"] == 0.0192), ["diverged", "loss"]] = [True, np.nan]
    with pytest.warns(FitWarning, match=rf"cell {re.escape(cells[-1])}: 2 completed runs in the "
                      r"window, 2 diverged and 2 past the fit window above its best LR \(bounds; "
                      r"the lowest at lr=0.0136\)"):  # fmt: skip
        fit_surface(runs, n_boot=0, cv=False)


def test_too_few_usable_cells_says_why_each_bound_cell_is_one_and_how_to_fit(
    proxy_runs: pd.DataFrame,
) -> None:
    """An own-model audit: cells of 4 completed runs were "only a bound (too few completed
    runs)": the window had made the run 4x above the best a bound, leaving 3 under min_runs 4,
    and the message named neither the window nor a fix."""
    cells = list(dict.fromkeys(proxy_runs["cell"]))[:3]
    runs = proxy_runs[proxy_runs["cell"].isin(cells)]
    with pytest.raises(FitError) as e:
        _quiet(fit_surface, runs, n_boot=0, cv=False, min_runs=40)
    said = str(e.value)
    assert f"{cells[0]}: " in said and "completed runs at" in said and "min_runs=40" in said
    assert 'lower min_runs (--min-runs), widen the window with surface="all-runs"' in said
    assert "--method parabola" in said


def test_divergence_bounds_the_optimum(proxy_runs: pd.DataFrame) -> None:
    """Runs that diverged at an LR say the optimum lies below it: the smallest cell, with its
    runs from 6.8e-3 up diverged (below its true optimum, 1e-2), gets an optimum well below the
    one it gets when those runs are simply absent."""
    cells = list(dict.fromkeys(proxy_runs["cell"]))
    top = (proxy_runs["cell"] == cells[0]) & (proxy_runs["lr"] >= 6.8e-3)
    div = proxy_runs.copy()
    div.loc[top, "diverged"] = True
    div.loc[top, "loss"] = np.nan
    bounded = _quiet(fit_surface, div, n_boot=0, cv=False).cell_optima[cells[0]]
    free = _quiet(fit_surface, proxy_runs[~top], n_boot=0, cv=False).cell_optima[cells[0]]
    assert bounded < 0.9 * free
    # a diverged run below a completed one is sporadic, not a bound
    low = (proxy_runs["cell"] == cells[0]) & (proxy_runs["lr"] == 1.7e-3)
    odd = proxy_runs.copy()
    odd.loc[low & (odd["seed"] == 0), ["diverged", "loss"]] = [True, np.nan]
    law = _quiet(fit_surface, odd, n_boot=0, cv=False)
    assert any("sporadic" in n or "not bounds" in n for n in law.notes)
    assert law.cell_optima[cells[0]] == pytest.approx(
        _quiet(fit_surface, proxy_runs, n_boot=0, cv=False).cell_optima[cells[0]], rel=0.1
    )


def test_window_keeps_a_factor_2_grid_fittable() -> None:
    """The window is the default's on a sqrt(2) grid and widens to two steps below and one above
    on a coarser one: on a factor-2 grid with one seed the default window would keep 3 runs per
    cell (too few); widened it keeps 4 and recovers the law."""
    from sweeper.fitting._surface_data import grid_window
    from sweeper.fitting.surface import WINDOW

    assert grid_window(WINDOW, math.log(math.sqrt(2.0))) == pytest.approx(WINDOW)
    assert grid_window(WINDOW, math.log(2.0)) == pytest.approx((math.log(4), 1.5 * math.log(2)))
    law = (2.0, {"n_params": -0.5})
    runs = synthetic_sweep(
        n_params=(1e6, 2e6, 4e6, 8e6, 1.6e7), tokens=(1e8,), lr_law=law, lr_step=2.0,
        lr_steps=(-3, 3), seed=2,
    )  # fmt: skip
    fitted = _quiet(fit_surface, runs, n_boot=0, cv=False, min_runs=4)
    assert fitted.n_cells == 5
    assert fitted.exponents["n_params"] == pytest.approx(-0.5, abs=0.05)
    assert any("more than 2.8x above" in n for n in fitted.notes)  # 1.5 steps of 2


def test_unmodelled_searched_column(proxy_runs: pd.DataFrame) -> None:
    runs = proxy_runs.assign(warmup=np.where(proxy_runs["seed"] == 0, 0.05, 0.2))
    with pytest.raises(FitError, match="column 'warmup' varies within cell"):
        fit_surface(runs, n_boot=0)
    law = _quiet(fit_surface, runs, n_boot=0, cv=False, allow_varying=("warmup",))
    assert law.exponents["n_params"] == pytest.approx(TRUE_B, abs=0.05)
    # a searched column constant within each cell is fine
    same = proxy_runs.assign(weight_decay=0.1)
    assert _quiet(fit_surface, same, n_boot=0, cv=False).n_cells == 7


# --- risk-aware recommendation -----------------------------------------------------------------------


def test_regret_and_risk_optimal_lr(proxy_law: SurfaceLaw) -> None:
    law = proxy_law
    scale = {"n_params": 8.0 * law.domain["n_params"][1]}
    point = law.predict(scale)
    safe = law.risk_optimal_lr(scale)
    assert 0.7 * point < safe < point  # the cliff makes undershooting cheaper
    at_point = law.expected_regret(scale, point)
    at_safe = law.expected_regret(scale, safe)
    assert isinstance(at_safe, Regret)
    assert at_safe.mean <= at_point.mean
    assert 0.0 <= at_safe.median <= at_safe.upper
    # regret grows as the LR moves away from the risk-optimal one, faster above
    factors = [0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0]
    means = [law.expected_regret(scale, safe * f).mean for f in factors]
    i = factors.index(1.0)
    assert all(np.diff(means[: i + 1]) < 0) and all(np.diff(means[i:]) > 0)
    assert means[i + 1] > law.expected_regret(scale, safe / 1.25).mean
    assert law.expected_regret(scale, safe * 4).p_above == 1.0
    mean, lo, hi = law.loss_excess(scale, [safe * 0.5, safe, safe * 2])
    assert np.all(lo <= mean) and np.all(mean <= hi) and np.all(lo >= 0)
    with pytest.raises(ScaleError):
        law.risk_optimal_lr({"tokens": 1e9})  # a missing predictor is an error, not a guess


def test_absurd_shape_draws_count_for_at_most_the_blowup(proxy_law: SurfaceLaw) -> None:
    """A fifth of the draws with the optimum 3 octaves low and a cliff 1,000x steeper (what
    resampled shapes extrapolated 30x in N did on the muP ladder) leave the risk-aware LR where it
    was (uncapped they pull it 2.9 octaves down): each draw's excess counts for at most BLOWUP."""
    from dataclasses import replace

    from sweeper.fitting._surface_law import BLOWUP

    law = proxy_law
    names = list(law.shape_names)
    draws = np.array(law.shape_draws, dtype=float)
    bad = np.arange(len(draws)) % 5 == 0
    draws[bad, names.index("lr:log_prefactor")] -= 3 * math.log(2)
    draws[bad, names.index("lr:asymmetry")] += math.log(1000.0)
    wild = replace(law, shape_draws=tuple(map(tuple, draws)))
    scale = {"n_params": 8.0 * law.domain["n_params"][1]}
    point = law.predict(scale)
    assert wild.predict(scale) == pytest.approx(point)  # the point estimate is not a draw
    assert abs(math.log2(wild.risk_optimal_lr(scale) / law.risk_optimal_lr(scale))) < 0.25
    far_above = wild.expected_regret(scale, point * 64)
    assert far_above.mean <= far_above.upper <= 100 * BLOWUP


def test_runaway_draws_leave_a_finite_risk_aware_lr_near_the_point(proxy_law: SurfaceLaw) -> None:
    """Draws of a near-degenerate fit (log-prefactor up to ±2e7, a shape that overflows to NaN:
    a 36-run smoke study's law extrapolated to a 2048-wide model) made the risk-aware search span
    4 of their standard deviations and step past exp's range (OverflowError). The search stays
    within HEDGE_OCTAVES of the point, and a NaN excess counts as BLOWUP."""
    from dataclasses import replace

    from sweeper.fitting._surface_law import BLOWUP, HEDGE_OCTAVES

    law = proxy_law
    names = list(law.shape_names)
    draws = np.array(law.shape_draws, dtype=float)
    wild_rows = np.arange(len(draws)) % 4 == 0
    draws[wild_rows, names.index("lr:log_prefactor")] = np.where(
        np.arange(wild_rows.sum()) % 2 == 0, 2e7, -2e7
    )
    draws[1::4, names.index("lr:log_curvature")] = 1e6  # exp() overflows: inf·0 = NaN
    wild = replace(law, shape_draws=tuple(map(tuple, draws)))
    scale = {"n_params": 8.0 * law.domain["n_params"][1]}
    point = law.predict(scale)
    lr = wild.risk_optimal_lr(scale)
    assert math.isfinite(lr) and abs(math.log2(lr / point)) <= HEDGE_OCTAVES + 1e-9
    r = wild.expected_regret(scale, lr)
    assert 0.0 <= r.mean <= r.upper <= 100 * BLOWUP


def test_cell_curves_follow_the_runs_and_round_trip(
    proxy_law: SurfaceLaw, proxy_runs: pd.DataFrame
) -> None:
    """Each cell's fitted curve (what the report draws) sits on its runs near the optimum, and
    survives the JSON round trip; a cell the law does not know has no curve."""
    from sweeper.fitting.laws import law_from_dict

    done = proxy_runs[(proxy_runs["state"] == "COMPLETE") & ~proxy_runs["diverged"]]
    for cell, r in done.groupby("cell"):
        mean = r.groupby("lr")["loss"].mean()
        best_lr = float(mean.idxmin())
        fitted = proxy_law.cell_loss(str(cell), [best_lr])
        assert fitted is not None
        assert fitted[0] == pytest.approx(float(mean.min()), rel=0.01)
    back = law_from_dict(json.loads(json.dumps(proxy_law.to_dict())))
    assert isinstance(back, SurfaceLaw) and back.cell_curves == proxy_law.cell_curves
    assert proxy_law.cell_loss("no-such-cell", [1e-3]) is None


def test_noise_model_does_not_collapse_on_a_side_with_few_runs() -> None:
    """A side of the optimum with three runs the fit passes through (residuals ~0) keeps a σ of
    the pooled order; without the prior its σ went to the floor and those runs outweighed the
    rest ~10⁶x (the 23-run law-sampler ladder). With many runs per side the measured ratio stays."""
    rng = np.random.default_rng(0)
    step = math.log(2) / 2
    du = np.concatenate([rng.uniform(-3 * step, 0.0, 40), np.full(3, step)])
    resid = np.concatenate([rng.normal(0.0, 0.02, 40), np.full(3, 1e-7)])
    coef = sm.fit_noise(resid, du, step, n_params=5)
    sig_up, sig_0 = sm.noise_sd(coef, np.array([step, 0.0]), step)
    assert sig_up / sig_0 > 0.3, (sig_up, sig_0)

    # 60 runs a side, σ 2.7x larger a grid step above the optimum than below it
    du = np.concatenate([np.full(60, step), np.full(60, -2 * step)])
    resid = np.concatenate([rng.normal(0.0, 0.027, 60), rng.normal(0.0, 0.01, 60)])
    coef = sm.fit_noise(resid, du, step, n_params=5)
    sig_up, sig_down = sm.noise_sd(coef, np.array([step, -2 * step]), step)
    assert 2.0 < sig_up / sig_down < 3.6, (sig_up, sig_down)


def test_asymmetry_prior_keeps_the_cliff_off_its_bound_on_runs_mostly_below_the_optima(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs from 3x below each optimum to one grid step above it, one seed (a sparse design's
    runs): without the prior α, the ln ratio of the curvature above to below, ran to 6.1-6.9 (its
    bound is ln 1000) on 4 of these 6 ladders; with it every fit stays within the prior's 95%
    (ln 3 ± 2) around the true ln(0.25/0.03) = 2.12."""
    alphas: dict[bool, list[float]] = {True: [], False: []}
    default = sm.ASYMMETRY_PRIOR
    for seed in range(6):
        runs = proxy_sweep(7, seed=seed)
        opt = 0.208 * runs["n_params"] ** TRUE_B
        keep = (runs["lr"] <= 1.45 * opt) & (runs["lr"] >= opt / 3) & (runs["seed"] == 0)
        for prior in (True, False):
            monkeypatch.setattr(sm, "ASYMMETRY_PRIOR", default if prior else None)
            law = _quiet(fit_surface, runs[keep], n_boot=0, cv=False, seed=0)
            shape = dict(zip(law.shape_names, law.shape_params, strict=True))
            alphas[prior].append(shape["lr:asymmetry"])
    assert sum(a > 6.0 for a in alphas[False]) >= 3, alphas
    assert all(math.log(3.0) - 2.0 < a < math.log(3.0) + 2.0 for a in alphas[True]), alphas


# --- the curvature's scaling, kept only where determined ("auto", "ftest") ----------------------


def _ladder_whose_curvature_scales(slope: float) -> pd.DataFrame:
    """5 cells (widths 32-256) whose curvature, both sides, grows as N^slope (proxy_sweep's
    defaults at width 32); 8 LRs × 2 seeds each."""
    widths = np.geomspace(32.0, 256.0, 5)
    cells = []
    for i, w in enumerate(widths):
        f = (w / 32.0) ** (2 * slope)  # N ∝ width² at fixed depth
        cells.append(proxy_sweep(widths=[w], k_low=0.03 * f, k_high=0.25 * f, seed=10 + i))
    return pd.concat(cells, ignore_index=True)


@pytest.mark.parametrize("test", ["auto", "ftest"])
def test_tested_scaling_kept_when_the_curvature_moves_with_n(test: str) -> None:
    """A curvature 8x steeper at the largest cell than at the smallest (slope 0.5 in ln N): the
    Wald test ("auto") and the F test keep the scaling, and its slope is near the truth."""
    runs = _ladder_whose_curvature_scales(0.5)
    law = _quiet(fit_surface, runs, n_boot=0, cv=False, shape_scaling=test)
    assert law.shape_predictors == ("n_params",)
    assert not any("not determined" in n for n in law.notes)
    rho = law.shape_params[law.shape_names.index("lr:log_curvature:n_params")]
    assert 0.3 < rho < 0.7, rho
    fixed = _quiet(fit_surface, runs, n_boot=0, cv=False, shape_scaling=True)
    assert law.exponents == fixed.exponents


def _near_optimum(n_cells: int, k: int) -> pd.DataFrame:
    """A proxy ladder (one curvature) cut to the ``k`` LRs nearest each cell's true optimum, one
    seed: what a law sampler's start leaves in a cell."""
    runs = proxy_sweep(n_cells, seed=3)
    done = runs[(runs["state"] == "COMPLETE") & ~runs["diverged"] & (runs["seed"] == 0)]
    near = done.assign(d=(np.log(done["lr"]) - np.log(0.208 * done["n_params"] ** TRUE_B)).abs())
    return near.sort_values(["cell", "d"]).groupby("cell").head(k).drop(columns="d")


@pytest.mark.parametrize(("test", "statistic"), [("auto", "Wald chi2"), ("ftest", "F ")])
def test_tested_scaling_dropped_when_the_cells_do_not_pin_it(test: str, statistic: str) -> None:
    """One curvature for every cell and 4 runs a cell (the 4 LRs nearest each optimum, one seed,
    as a law sampler's start): the slope is not determined, so a tested scaling gives the
    one-curvature fit, and its notes say why (with the test's statistic)."""
    sparse = _near_optimum(5, 4)
    law = _quiet(fit_surface, sparse, n_boot=0, cv=False, window=None, shape_scaling=test)
    one = _quiet(fit_surface, sparse, n_boot=0, cv=False, window=None, shape_scaling=False)
    assert law.shape_predictors == ()
    assert law.exponents == one.exponents and law.shape_params == one.shape_params
    assert any(f"scaling is not determined ({statistic}" in n for n in law.notes)


@pytest.mark.parametrize("bad", ["wald", "yes", 2])
def test_an_unknown_scaling_rule_is_refused(bad: object) -> None:
    """shape_scaling is True, False, "auto" or "ftest": anything else fails with the choices."""
    with pytest.raises(FitError, match="'auto' or 'ftest'"):
        _quiet(fit_surface, proxy_sweep(3, seed=0), n_boot=0, cv=False, shape_scaling=bad)


def test_f_test_counts_its_degrees_of_freedom_and_says_when_it_has_none() -> None:
    """5 cells x 4 runs: q = 1 slope, n − p = 20 − 14 (per cell an optimum and a level; the width,
    its slope, the asymmetry, the levelling-off); 3 cells x 3 runs leave none, and the note says
    so rather than quoting an F on 0 degrees of freedom."""
    kw = dict(lr_predictors=("n_params",), batch_predictors=None, need_batch=False, min_runs=3,
              blowup=0.5, allow_varying=(), window=None)  # fmt: skip
    f, q, dof = scaling_f_test(prepare(_near_optimum(5, 4), **kw))
    assert (q, dof) == (1, 6) and f >= 0.0
    law = _quiet(
        fit_surface, _near_optimum(3, 3), n_boot=0, cv=False, window=None, shape_scaling="ftest"
    )
    assert law.shape_predictors == ()
    assert any("has no degrees of freedom" in n for n in law.notes)


@pytest.mark.parametrize("test", ["auto", "ftest"])
def test_a_scaled_fit_that_did_not_converge_leaves_no_unconverged_mark(
    test: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the scaled fit stops short of converging, the one-width fit is returned with a note
    that says why, and that note must not read as "did not converge": the law planner's stopping
    rule takes that phrase to mean the returned fit did not converge."""
    solve = su._solve

    def scaled_unconverged(data: object, **kw: object) -> object:
        fit = solve(data, **kw)
        if kw["scaling"]:
            fit.notes.append("the surface fit did not converge (evaluation cap)")
        return fit

    monkeypatch.setattr(su, "_solve", scaled_unconverged)
    law = _quiet(fit_surface, _ladder_whose_curvature_scales(0.5), n_boot=0, cv=False,
                 shape_scaling=test)  # fmt: skip
    assert law.shape_predictors == ()
    assert any("stopped short of converging" in n for n in law.notes)
    assert not any("did not converge" in n for n in law.notes)


def test_a_cell_left_out_says_the_rule_it_missed() -> None:
    """The surface fit's "left out w16-d2-t16.4k: 3 completed runs at 3 LRs" (min_runs 4 in
    `sweeper fit`) did not say what a cell needs (the parabola's message names min_runs)."""
    from sweeper.fitting import fit_surface

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(4e8,), seed=1)
    small = runs["cell"] == runs["cell"].iloc[0]
    thin = pd.concat([runs[~small], runs[small].head(2)], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_surface(thin, predictors=("n_params",), n_boot=0)
    assert any("(needs min_runs=3 at 2 or more LRs)" in n for n in law.notes), law.notes


def test_a_laws_repr_leaves_out_its_draws() -> None:
    """repr(law) of a stored surface law ran to 29k characters of bootstrap coefficients and
    shape draws; the draws stay in the law (and its JSON), out of its repr."""
    from sweeper.fitting import fit_surface

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(4e8,), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_surface(runs, predictors=("n_params",), n_boot=40)
    assert len(law.boot_coefs) > 2 and len(repr(law)) < 4000, len(repr(law))
    assert "boot_coefs" not in repr(law) and "shape_draws" not in repr(law)


def test_a_surface_fit_that_did_not_converge_is_refused_not_stored() -> None:
    """docs/data/muon_hi.csv (Muon's high-LR half: three of four cells with their best run on an
    edge) stops at the optimizer's evaluation limit. Stored, such a law read N^+86 [−858, +1256]
    and recommended an LR of 2.7e64; ``sweeper fit`` now refuses it and names the edge cells."""
    from pathlib import Path

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.fit_runs import FitOptions, fit_runs

    path = Path(__file__).resolve().parents[3] / "docs" / "data" / "muon_hi.csv"
    runs = pd.read_csv(path)
    assert any(
        n.startswith("the surface fit did not converge")
        for n in fit_surface(runs, n_boot=0, cv=False).notes
    )
    with pytest.raises(FitError) as e:
        fit_runs(runs, conventions=Conventions(), source="mh", options=FitOptions(n_boot=0))
    msg = str(e.value)
    assert "did not converge" in msg and "no law is stored" in msg
    assert "w16-d2-t819k (top)" in msg and "have their best runs on the edge" in msg
    assert msg.endswith("widen the range there")


def test_a_fit_that_runs_off_to_no_law_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each cell's five best LRs (``proxy_sweep(seeds=2, seed=3)``) made the solver "converge",
    on one machine, to ln lr* = -2e103 at the cells and an infinite curvature: a law with an N
    exponent of -6e102 whose prefactor raised OverflowError. The solver's answer is blown up
    here as it was there (the runs that did it meet a NaN on another machine); the fit refuses
    it (a FitError the planner takes for "no law yet") instead of returning it."""
    real = sm.solve

    def runaway(p0, lay, r, **k):  # type: ignore[no-untyped-def]
        res = real(p0, lay, r, **k)
        if not lay.free:  # the law's solve, not the free cell optima's
            res.x = res.x * 1e103
        return res

    runs = proxy_sweep(seeds=1, seed=3)
    assert fit_surface(runs, n_boot=0, cv=False).exponents["n_params"] < 0
    monkeypatch.setattr(sm, "solve", runaway)
    with pytest.raises(FitError, match="ran off to no law: its optimum LR or curvature"):
        fit_surface(runs, n_boot=0, cv=False, shape_scaling=False)


def test_a_per_cell_fit_with_one_usable_cell_says_why_the_others_are_out() -> None:
    """The parabola fit of the same runs said "neither n_params nor tokens varies across the
    usable cells; pass --predictors (e.g. width or depth)": the fix for another problem. With one
    usable cell it names the cells left out and why (their optimum on the range's edge)."""
    from pathlib import Path

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.fit_runs import FitOptions, fit_runs

    path = Path(__file__).resolve().parents[3] / "docs" / "data" / "muon_hi.csv"
    opts = FitOptions(method="parabola", cell_boot=0)
    msg = r"only 1 usable cell \(w\d+-d2-t819k\): a law needs .*; left out: w"
    with pytest.raises(FitError, match=msg) as e:
        fit_runs(pd.read_csv(path), conventions=Conventions(), source="mh", options=opts)
    assert "widen the LR range" in str(e.value) and "--predictors" not in str(e.value)


def test_an_edge_note_on_a_batch_sweep_names_the_batch_size() -> None:
    """On a batch sweep a cell is flagged when its best LR at some batch size is the range's edge,
    which its table and plots (at the cell's best batch) need not show: the audit read the note
    and the blank 'edge' column as a contradiction. The note now names that batch size."""
    path = Path(__file__).resolve().parents[3] / "docs" / "data" / "batch_ladder.csv"
    runs = pd.read_csv(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_surface(runs, predictors=("tokens",), n_boot=0, cv=False)
    note = next(n for n in law.notes if n.startswith(EDGE_NOTE))
    assert "w32-d2-t819k (top at batch 512 tokens)" in note


def test_a_cell_left_out_says_its_runs_beyond_the_window_and_its_edge() -> None:
    """A cell with 6 completed runs was left out as '3 completed runs at 3 LRs (needs
    min_runs=4)': the others lay outside the fit's window about a best LR at the range's top.
    The reason now counts both and names the edge, with the fix."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(2e8,), seed=3)
    first = runs["cell"].iloc[0]
    g = runs[runs["cell"] == first]
    best = g.groupby("lr")["loss"].mean().idxmin()
    runs = runs[~((runs["cell"] == first) & (runs["lr"] > best))]  # its best LR: the top tried
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        with pytest.raises(FitError) as e:
            fit_surface(runs, n_boot=0, cv=False, min_runs=12)
    msg = str(e.value)
    assert re.search(rf"left out {first}: (\d+) completed runs at \d+ LRs within the fit's window "
                     r"about its best LR \((\d+) in all\)", msg)  # fmt: skip
    assert "its best LR is on the top edge of its range: widen the range there" in msg


def test_an_edge_at_a_batch_other_than_the_cells_best_is_said_apart() -> None:
    """On Step Law's runs, 7 of 17 cells were noted as 'best run on the edge of its LR range'
    for an edge at their smallest batch, far from their best batch, whose optimum is interior:
    an audit read it as the cells' optima being bounds. That edge is now said apart."""
    from sweeper.fitting._surface_data import INTERIOR_AT_BEST, _edge_cells

    lrs = [1e-3, 2e-3, 4e-3, 8e-3]
    rows = []
    for batch, losses in ((1024, [3.0, 2.9, 2.8, 2.7]), (8192, [2.9, 2.5, 2.6, 2.8])):
        rows += [{"cell": "c", "lr": lr, "loss": v, "batch_tokens": batch} for lr, v in
                 zip(lrs, losses, strict=True)]  # fmt: skip
    df = pd.DataFrame(rows).assign(_done=True, _div=False)
    (text,) = _edge_cells(df).values()
    assert text == f"top at batch 1024 tokens; {INTERIOR_AT_BEST}, 8192 tokens"
    small = df["batch_tokens"] == 1024
    best_on_edge = df.assign(loss=np.where(small, df["loss"] - 1.0, df["loss"]))
    assert _edge_cells(best_on_edge) == {"c": "top at batch 1024 tokens"}


def test_a_leave_one_out_fold_that_cannot_determine_the_law_is_left_out() -> None:
    """Three of four cells at one D/N: without the fourth the N and D exponents trade off, and the
    surface fit's fold predicted it 28.6 (ln) away, a leave-one-cell-out error an import audit saw
    as 757 (and recommend then overflowed). The fold is left out, as the parabola law's is."""
    runs = synthetic_sweep(
        n_params=(1e6, 2e6, 4e6), tokens=(4e7, 8e7, 1.6e8),
        lr_law=(2.0, {"n_params": -0.3, "tokens": 0.1}), seeds=2, seed=0, opt_scatter=0.1,
    )  # fmt: skip
    keep = {(1e6, 4e7), (2e6, 8e7), (4e6, 1.6e8), (4e6, 4e7)}
    runs = runs[[(n, d) in keep for n, d in zip(runs["n_params"], runs["tokens"], strict=True)]]
    surface = _quiet(fit_surface, runs, predictors=("n_params", "tokens"), n_boot=0)
    parabola = _quiet(sweeper_fit, runs, method="parabola")
    assert surface.cv_error is not None and parabola.cv_error is not None
    assert surface.cv_error < 2 * parabola.cv_error < 1.0
    left = [n for n in surface.notes if "other cells do not determine the lr law" in n]
    assert len(left) == 1 and "without N4e06-D4e07" in left[0], surface.notes


def sweeper_fit(runs: pd.DataFrame, *, method: str) -> PowerLaw:
    import sweeper

    (law,) = sweeper.fit(runs, method=method, target="lr", store=False)
    return law


def test_runs_of_unknown_batch_keep_the_window_and_the_edge_checks() -> None:
    """Runs imported without seq_len have no batch_tokens. Their batch key was NaN, which every
    groupby drops: the default fit then ran on all runs with no LR window and no edge note, the
    same law as ``--surface all-runs`` (an audit). Unknown batches now share one key."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(2e8,), seed=3)
    first = runs["cell"].iloc[0]
    g = runs[runs["cell"] == first]
    best = g.groupby("lr")["loss"].mean().idxmin()
    runs = runs[~((runs["cell"] == first) & (runs["lr"] > best))]  # its best LR: the top tried
    unknown = runs.assign(batch_tokens=np.nan, seq_len=np.nan)
    known, blind = (_quiet(fit_surface, r, n_boot=0, cv=False) for r in (runs, unknown))
    for law in (known, blind):
        assert any(n.startswith("window:") for n in law.notes), law.notes
        edge = next(n for n in law.notes if n.startswith(EDGE_NOTE))
        assert f"{first} (top)" in edge
    assert blind.exponents["n_params"] == pytest.approx(known.exponents["n_params"], abs=1e-6)


def test_a_ladder_whose_loss_never_changes_is_refused_not_fitted() -> None:
    """A training loop that returns a constant gave a law N^0 with a zero-width interval and no
    warning, and a recipe calling it a published law (an API audit)."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3).assign(loss=2.0)
    with pytest.raises(FitError, match="the loss is the same at every LR in every cell"):
        _quiet(fit_surface, runs, n_boot=0, cv=False)


def test_the_fit_does_not_depend_on_the_order_of_the_runs() -> None:
    """The bootstrap draws runs by position: the same runs in another order (a cluster's trials
    finish in another order than a laptop's) had given other 95% intervals, e.g. quickstart's N
    exponent [-0.478, -0.056] against [-0.454, -0.055] shuffled (a cluster audit)."""
    runs = proxy_sweep(seeds=2, seed=3)
    law = fit_surface(runs, n_boot=60, cv=False, seed=0)
    shuffled = fit_surface(runs.sample(frac=1.0, random_state=1), n_boot=60, cv=False, seed=0)
    assert shuffled.exponents_ci == law.exponents_ci
    assert shuffled.prefactor_ci == law.prefactor_ci

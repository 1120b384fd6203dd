"""The law-aware planner (sweeper.fitting.allocation): start design, determinism, pending points,
budget and stopping rule, the diverged region, and a replay that recovers a known law."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from sweeper.fitting import allocation as al
from sweeper.fitting._common import FitWarning
from sweeper.fitting.surface import fit_surface
from sweeper.fitting.synthetic import proxy_sweep
from sweeper.study.runs import empty_runs


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore", FitWarning)
    warnings.simplefilter("ignore", RuntimeWarning)


def _cells(runs: pd.DataFrame) -> list[al.CellPlan]:
    return al.cells_from_runs(runs)


def _answer(stored: pd.DataFrame, used: np.ndarray, cell: str, lr: float) -> int:
    """The stored run of ``cell`` nearest to ``lr`` not used yet."""
    cand = np.flatnonzero((stored["cell"].to_numpy() == cell) & ~used)
    dist = np.abs(np.log(stored["lr"].to_numpy(float)[cand]) - math.log(lr))
    return int(cand[np.argmin(dist)])


def _replay(stored: pd.DataFrame, budget: int, k: int = 3, seed: int = 0) -> pd.DataFrame:
    cells = _cells(stored)
    used = np.zeros(len(stored), dtype=bool)
    while True:
        p = al.plan(stored[used], cells, k=k, seed=seed, budget_runs=budget, max_seeds=2)
        if not p.points:
            return stored[used]
        for pt in p.points:
            used[_answer(stored, used, pt.cell, pt.lr)] = True


def test_sqrt2_grid_and_costs(ladder: pd.DataFrame) -> None:
    g = al.sqrt2_grid(1e-3, 4e-3)
    assert len(g) == 5 and g[0] == 1e-3 and g[-1] == pytest.approx(4e-3)
    cells = _cells(ladder)
    assert [c.cost for c in cells] == sorted(c.cost for c in cells)
    unmeasured = al.cell_costs(empty_runs(), {"a": (1e6, 1e8), "b": (4e6, 1e8)})
    assert unmeasured["b"] == pytest.approx(4 * unmeasured["a"])
    t = al.default_target(cells)
    assert t["n_params"] == pytest.approx(10 * max(c.n_params for c in cells))


def test_start_design_cheapest_cell_first_spread_and_deterministic(ladder: pd.DataFrame) -> None:
    cells = _cells(ladder)
    p = al.plan(empty_runs(), cells, k=3, seed=1)
    assert {pt.cell for pt in p.points} == {cells[0].cell}
    assert all(pt.seed == 0 for pt in p.points)
    idx = sorted(cells[0].lrs.index(pt.lr) for pt in p.points)
    n = len(cells[0].lrs)
    assert len(set(idx)) == 3 and idx[0] < n // 3 and idx[2] >= 2 * n // 3
    assert al.plan(empty_runs(), cells, k=3, seed=1).points == p.points


def test_next_cell_starts_around_the_measured_optimum(ladder: pd.DataFrame) -> None:
    first = _cells(ladder)[0].cell
    runs = ladder[(ladder["cell"] == first) & (ladder["seed"] == 0)]
    cells = _cells(ladder)
    p = al.plan(runs, cells, k=3, seed=0)
    assert {pt.cell for pt in p.points} == {cells[1].cell}
    best = runs.loc[runs["loss"].idxmin(), "lr"]
    assert all(abs(math.log(pt.lr / best)) <= math.log(2.0) + 1e-9 for pt in p.points)


def test_law_phase_deterministic_and_pending_not_redundant(ladder: pd.DataFrame) -> None:
    runs = ladder[ladder["seed"] == 0]
    cells = _cells(ladder)
    a = al.plan(runs, cells, k=3, seed=0, stop_lr_interval_ratio=None)
    b = al.plan(runs, cells, k=3, seed=0, stop_lr_interval_ratio=None)
    assert a.law is not None and a.points == b.points and len(a.points) == 3
    assert len(set(a.points)) == 3
    # the first proposal launched (pending): the next plan goes on with the other two
    c = al.plan(
        runs,
        cells,
        k=2,
        seed=0,
        stop_lr_interval_ratio=None,
        pending=[(a.points[0].cell, a.points[0].lr)],
    )
    assert c.points == a.points[1:]


def test_target_sd_matches_the_fits_laplace_sd(ladder: pd.DataFrame) -> None:
    p = al.plan(ladder, _cells(ladder), k=1, seed=0, stop_lr_interval_ratio=None, max_seeds=3)
    assert p.law is not None and p.target_sd is not None
    target = al.default_target(_cells(ladder))
    sd = p.law.log_optimum_sd({"n_params": target["n_params"]}, scatter=False)
    assert p.target_sd == pytest.approx(sd, rel=0.3)


def test_budget_and_stopping_rule(ladder: pd.DataFrame) -> None:
    runs = ladder[ladder["seed"] == 0]
    cells = _cells(ladder)
    p = al.plan(runs, cells, k=4, budget_runs=len(runs))
    assert p.points == () and p.stop.startswith(f"budget reached: {len(runs)} runs of {len(runs)};")
    # what of the budget has no result, and a cell with none (a law-sampler audit read 20 of 20
    # beside 13 finished runs and two cells never started)
    first = cells[0].cell
    rest = runs[runs["cell"] != first]
    held = [(first, cells[0].lrs[2])] * 2
    p = al.plan(rest, cells, k=4, budget_runs=len(rest) + 2, pending=held)
    assert p.stop.startswith(f"budget reached: {len(rest) + 2} runs of {len(rest) + 2}, 2 of them "
                             f"without a result yet (running, or held after failing); no result "
                             f"in {first};")  # fmt: skip
    p = al.plan(runs, cells, k=4, budget_runs=len(runs) + 2, stop_lr_interval_ratio=None)
    assert len(p.points) == 2
    p = al.plan(ladder, cells, k=4, stop_lr_interval_ratio=1e9, max_seeds=3)
    assert p.points == () and "interval ratio" in p.stop


def test_never_deep_in_the_diverged_region(ladder: pd.DataFrame) -> None:
    cells = _cells(ladder)
    runs = ladder[ladder["seed"] == 0].copy()
    big = cells[-1]
    div_lr = big.lrs[3]
    sel = (runs["cell"] == big.cell) & (runs["lr"] >= div_lr)
    runs.loc[sel, "diverged"] = True
    runs.loc[sel, "loss"] = np.nan
    p = al.plan(runs, cells, k=30, seed=0, stop_lr_interval_ratio=None, max_seeds=4)
    assert len(p.points) == 30
    assert all(pt.lr < div_lr for pt in p.points if pt.cell == big.cell)


def test_a_divergence_below_a_completed_run_is_a_one_off(ladder: pd.DataFrame) -> None:
    """As the fit counts them: a run that diverged below an LR that completed is not the cliff."""
    cells = _cells(ladder)
    big = cells[-1]
    runs = ladder[ladder["seed"] == 0].copy()
    one_off = (runs["cell"] == big.cell) & np.isclose(runs["lr"], big.lrs[2])
    runs.loc[one_off, ["diverged", "loss"]] = [True, np.nan]
    state = al._state(runs, cells, ())
    cliff = runs[(runs["cell"] == big.cell) & ~one_off & runs["diverged"]]["lr"].min()
    assert state.cliff(big.cell) == big.lrs.index(cliff) > 2
    assert state.allowed(big.cell, big.lrs.index(cliff) - 1, 2)  # (was off limits: 2 steps above)
    # an off-grid divergence snaps to its grid point: a completed run there makes it a one-off
    state.add(big.cell, cliff * 0.99, 2.0)
    assert state.cliff(big.cell) > big.lrs.index(cliff)


def test_nothing_at_or_above_the_cliff() -> None:
    cell = al.CellPlan("c", 1e5, 1e6, al.sqrt2_grid(1e-3, 1.6e-2))
    state = al._State([cell])
    for i, loss in enumerate([2.0, 1.9, 1.85, 1.9]):
        state.add("c", cell.lrs[i], loss)
    state.add("c", cell.lrs[5], diverged=True)
    assert state.cliff("c") == 5
    assert state.allowed("c", 4, 3) and not state.allowed("c", 5, 3)
    assert not state.allowed("c", 6, 3)  # (one step above the cliff: allowed before)
    # a run more than BLOWUP above the best loss, above the best LR, is a bound like a divergence
    state.add("c", cell.lrs[6], 1.85 * (1 + al.BLOWUP) + 0.1)
    assert state.cliff("c") == 5


def test_a_cell_diverging_low_does_not_stop_the_others(ladder: pd.DataFrame) -> None:
    """A cell whose grid diverges from its second LR up has one LR to try: it counts as started
    once that one is tried, and the plan goes on to start the other cells."""
    cells = _cells(ladder)
    small = cells[0]
    runs = ladder[(ladder["cell"] == small.cell) & (ladder["seed"] == 0)].copy()
    runs = runs[runs["lr"] <= small.lrs[1]]
    runs.loc[np.isclose(runs["lr"], small.lrs[1]), ["diverged", "loss"]] = [True, np.nan]
    p = al.plan(runs, cells, k=3, seed=0, stop_lr_interval_ratio=None)
    assert len(p.points) == 3 and all(pt.cell != small.cell for pt in p.points)


def test_runs_the_law_puts_past_the_blowup_carry_no_information(ladder: pd.DataFrame) -> None:
    """The fit takes a run more than BLOWUP (50%) above its cell's best loss as a bound, so the
    variance criterion must not value one there, however far up the slope it would sit."""
    cells = _cells(ladder)
    runs = ladder[ladder["seed"] == 0]
    law = al.plan(runs, cells, k=1, stop_lr_interval_ratio=None).law
    assert law is not None
    info = al._info(law, runs, cells, al.default_target(cells), (), None)
    assert info is not None
    big = cells[-1].cell
    u_opt = math.log(law.cell_optima[big])
    excess = info._excess_at(
        info._phi0(), np.array([len(cells) - 1] * 2), u_opt - np.array([4.0, 6.0])
    )
    assert excess[0] < 50 < excess[1]
    assert info.gain(big, [u_opt - 4.0]) > 0
    assert info.gain(big, [u_opt - 6.0]) == 0.0  # e^6 = 400x below the optimum: off the model


def test_the_stopping_rule_stops_on_the_interval_fit_reports(ladder: pd.DataFrame) -> None:
    """The Laplace interval leaves the cells' scatter out of the law's slope: an audit's plan
    stopped at a ratio of 439 where fit then reported 6.45e9. A stop by the interval rule is
    confirmed by fit's bootstrap interval: between the two ratios the plan goes on."""
    runs = ladder[ladder["seed"] == 0].sort_values("loss").groupby("cell").head(4)
    cells = _cells(ladder)
    target = al.default_target(cells)
    law, _ = al._fit(runs, 0, None, False)
    laplace = al._interval_ratio(law, target)
    boot = al._bootstrap_ratio(runs, 0, None, False, target)
    assert laplace is not None and boot is not None and boot > 1.2 * laplace
    kw = {"k": 1, "confirm_runs": 1, "max_seeds": 3, "window": None, "shape_scaling": False}
    p = al.plan(runs, cells, stop_lr_interval_ratio=math.sqrt(laplace * boot), **kw)
    assert p.points and not p.stop
    assert any("the bootstrap's" in n for n in p.notes), p.notes
    p = al.plan(runs, cells, stop_lr_interval_ratio=1.01 * boot, **kw)
    assert p.points == () and "(bootstrap of 200 refits" in p.stop
    assert p.interval_ratio == pytest.approx(boot)


def test_a_fit_that_meets_a_non_finite_value_is_no_law_not_a_crash(
    ladder: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two seeds of each cell's five best LRs sent the planner's fit to a NaN inside scipy's
    least squares on one machine: a ValueError that would have ended the launch, where no law
    just explores. (Whether those runs meet a NaN depends on the machine's floating point, so
    scipy's error is raised here as it was raised there.)"""
    from sweeper.fitting import _surface_model as sm

    def non_finite(*a, **k):  # type: ignore[no-untyped-def]
        raise ValueError("Residuals are not finite in the initial point.")

    monkeypatch.setattr(sm, "least_squares", non_finite)
    law, note = al._fit(ladder, 0, None, False)
    assert law is None and "non-finite" in note


def test_pending_runs_do_not_settle_the_stopping_rule(ladder: pd.DataFrame) -> None:
    """A confirmation still running does not count as done: the plan goes on instead of stopping
    (it stops once the confirmations have completed)."""
    runs = ladder[ladder["seed"] == 0]
    cells = _cells(ladder)
    best = [(c, float(g.loc[g["loss"].idxmin(), "lr"])) for c, g in runs.groupby("cell")]
    p = al.plan(runs, cells, k=1, stop_lr_interval_ratio=1e9, pending=best)
    assert not p.stop
    done = pd.concat(
        [runs[(runs["cell"] == c) & np.isclose(runs["lr"], lr)].assign(seed=1) for c, lr in best],
        ignore_index=True,
    )
    p = al.plan(pd.concat([runs, done], ignore_index=True), cells, k=1, stop_lr_interval_ratio=1e9)
    assert p.points == () and "interval ratio" in p.stop


def test_replay_recovers_the_law_from_a_quarter_of_the_grid(ladder: pd.DataFrame) -> None:
    budget = len(ladder) // 4
    used = _replay(ladder, budget)
    assert len(used) == budget
    assert used["wall_s"].sum() < 0.25 * ladder["wall_s"].sum()
    fitted = fit_surface(used, n_boot=0, cv=False, window=None, shape_scaling=False)
    assert abs(fitted.exponents["n_params"] - (-0.3)) < 0.1


def test_the_planner_can_scale_the_curvature_only_where_the_test_finds_it() -> None:
    """``shape_scaling="auto"`` reaches the planner's fit: one curvature in truth, 4 LRs a cell
    near each optimum, the Wald test drops the scaling (its note says so); a curvature 8x
    steeper at the largest cell, every run: its law scales it (slope 0.5 in ln N)."""
    runs = proxy_sweep(5, seed=3)
    runs = runs[(runs["state"] == "COMPLETE") & ~runs["diverged"] & (runs["seed"] == 0)]
    d = (np.log(runs["lr"]) - np.log(0.208 * runs["n_params"] ** -0.3)).abs()
    near = runs.assign(d=d).sort_values(["cell", "d"]).groupby("cell").head(4)
    sparse = al.plan(near, _cells(near), k=1, shape_scaling="auto").law
    assert sparse is not None and sparse.shape_predictors == ()
    assert any("scaling is not determined" in n for n in sparse.notes)
    steep = []
    for i, w in enumerate(np.geomspace(32.0, 256.0, 5)):
        f = (w / 32.0) ** 1.0  # k ∝ N^0.5, N ∝ width²
        steep.append(proxy_sweep(widths=[w], k_low=0.03 * f, k_high=0.25 * f, seed=20 + i))
    runs = pd.concat(steep, ignore_index=True)
    law = al.plan(runs, _cells(runs), k=1, shape_scaling="auto").law
    assert law is not None and law.shape_predictors == ("n_params",)


def test_a_lucky_single_seed_best_is_confirmed_before_it_is_trusted(ladder: pd.DataFrame) -> None:
    """The winner's curse: one seed at the edge of stability drew a low loss (as w128 at 4.8e-3
    on the quickstart). The planner re-runs a cell's best LR before it trusts it, and moves on
    to the next best when the second seed says it was luck."""
    cells = _cells(ladder)
    small = cells[0]
    runs = ladder[(ladder["cell"] != small.cell) | (ladder["seed"] == 0)].copy()
    mine = runs[runs["cell"] == small.cell]
    true_best = float(mine.loc[mine["loss"].idxmin(), "lr"])
    lucky_lr = small.lrs[small.lrs.index(true_best) + 1]
    lucky = (runs["cell"] == small.cell) & np.isclose(runs["lr"], lucky_lr)
    runs.loc[lucky, "loss"] = mine["loss"].min() - 0.05
    kw = {"k": 1, "seed": 0, "stop_lr_interval_ratio": None}
    p = al.plan(runs, cells, **kw)
    assert p.points == (al.Point(small.cell, lucky_lr, 1),)
    off = al.plan(runs, cells, confirm_runs=1, **kw)
    assert off.points != p.points  # the rule is what asked for it
    # the second seed comes back high: the best moves to the true one, which is confirmed next
    second = runs[lucky].assign(loss=mine["loss"].min() + 0.2, seed=1)
    p = al.plan(pd.concat([runs, second], ignore_index=True), cells, **kw)
    assert p.points == (al.Point(small.cell, true_best, 1),)


def test_the_stopping_rule_waits_for_confirmed_optima(ladder: pd.DataFrame) -> None:
    runs = ladder[ladder["seed"] == 0]  # every cell's best LR rests on one run
    cells = _cells(ladder)
    p = al.plan(runs, cells, k=1, stop_lr_interval_ratio=1e9)
    assert not p.stop
    (pt,) = p.points  # a second seed at some cell's best LR
    mine = runs[runs["cell"] == pt.cell]
    assert pt.seed == 1 and pt.lr == mine.loc[mine["loss"].idxmin(), "lr"]
    # which cell is confirmed first is priced in core-seconds: make that one dear, another goes
    dear = [al.CellPlan(c.cell, c.n_params, c.tokens, c.lrs, c.cost * (1e4 if c.cell == pt.cell
            else 1.0)) for c in cells]  # fmt: skip
    other = al.plan(runs, dear, k=1, stop_lr_interval_ratio=1e9).points[0]
    assert other.seed == 1 and other.cell != pt.cell
    p = al.plan(runs, cells, k=1, stop_lr_interval_ratio=1e9, confirm_runs=1)
    assert p.points == () and "interval ratio" in p.stop


def _bench():  # type: ignore[no-untyped-def]
    """scripts/bench_allocation.py as a module."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "scripts" / "bench_allocation.py"
    spec = importlib.util.spec_from_file_location("bench_allocation", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_replay_answers_from_the_asked_cell_only(ladder: pd.DataFrame) -> None:
    bench = _bench()
    stored = ladder.reset_index(drop=True)
    order = np.arange(len(stored))
    cell = stored["cell"].iloc[0]
    used = (stored["cell"] == cell).to_numpy() & (stored["lr"] != stored["lr"].iloc[0]).to_numpy()
    i = bench.answer(stored, used, cell, 1.0, order)  # the nearest unused run of that cell
    assert stored["cell"].iloc[i] == cell and not used[i]
    with pytest.raises(RuntimeError, match="beyond the stored"):
        bench.answer(stored, (stored["cell"] == cell).to_numpy(), cell, 1.0, order)


def test_replay_scores_a_wild_fit_as_a_miss_instead_of_crashing() -> None:
    """scripts/bench_allocation.py: a sparse fit whose exponent runs away (8.8e5, seen on 16 random
    width_sp runs) predicts exp(>709) at the target; the replay's figures stay finite in logs."""
    from types import SimpleNamespace

    bench = _bench()

    def law(exponent: float) -> SimpleNamespace:
        return SimpleNamespace(
            log_predict=lambda s: math.log(0.2) + exponent * math.log(s["n_params"] / 1e5),
            exponents={"n_params": exponent},
            exponents_ci={},
            notes=(),
        )

    target = {"n_params": 1e7}
    wild = bench.figures(law(8.8e5), law(-0.3), target)
    assert wild["lr_target"] is None
    assert wild["lr_target_log2_error"] > 1e5  # a miss, not an exception
    sane = bench.figures(law(-0.3), law(-0.3), target)
    assert sane["lr_target"] == pytest.approx(0.2 * 100**-0.3)
    assert sane["lr_target_log2_error"] == pytest.approx(0.0, abs=1e-12)


def test_oracle_design_starts_every_cell_at_its_optimum_then_takes_the_largest_gain(
    ladder: pd.DataFrame,
) -> None:
    """scripts/bench_allocation.py --design oracle: the planner's criterion with the law known
    gives every cell the 3 grid LRs nearest its reference optimum, then the point of largest
    gain (per run, or per core-second), keeps to the stored seeds and the budget, refuses a
    budget below its start, and with a window puts nothing beyond it."""
    bench = _bench()
    stored = ladder.reset_index(drop=True)
    ref = bench.fit(stored, 0, dense=True)
    n = len(stored) // 4
    design = bench.oracle_design(stored, ref, n)
    assert sum(design.values()) == n
    cap = stored.groupby(["cell", "lr"]).size().to_dict()
    assert all(k <= cap[pt] for pt, k in design.items())
    cells = al.cells_from_runs(stored)
    start = {}
    for p in cells:
        near = sorted(p.lrs, key=lambda lr: abs(math.log(lr / ref.cell_optima[p.cell])))[:3]
        assert set(near) <= {lr for c, lr in design if c == p.cell}
        start.update({(p.cell, lr): 1 for lr in near})
    # the first run after the start: the largest gain (per run; per core-second with per_cost)
    cost = al.cell_costs(stored, {p.cell: (p.n_params, p.tokens) for p in cells})
    for per_cost in (False, True):
        info = al._Info.build(ref, stored.iloc[:0], cells, al.default_target(cells))
        info.observe_many([c for c, _ in start], np.log([lr for _, lr in start]))
        gains = {(p.cell, lr): info.gain(p.cell, [math.log(lr)]) / (cost[p.cell] if per_cost else 1)
                 for p in cells for lr in p.lrs}  # fmt: skip
        first = bench.oracle_design(stored, ref, len(start) + 1, per_cost=per_cost)
        (added,) = [pt for pt, k in first.items() if k > start.get(pt, 0)]
        assert added == max(gains, key=gains.get)
    full = bench.oracle_design(stored, ref, len(stored))  # the cap binds, or nothing is left
    assert all(k <= cap[pt] for pt, k in full.items())  # that the criterion values
    info = al._Info.build(ref, stored.iloc[:0], cells, al.default_target(cells))
    info.observe_many([c for (c, _), k in full.items() for _ in range(k)],
                      np.log([lr for (_, lr), k in full.items() for _ in range(k)]))  # fmt: skip
    left = [pt for pt in cap if full.get(pt, 0) < cap[pt]]
    assert all(info.gain(c, [math.log(lr)]) <= 0 for c, lr in left)
    with pytest.raises(ValueError, match="too small"):
        bench.oracle_design(stored, ref, len(start) - 1)
    windowed = bench.oracle_design(stored, ref, n, bench.WINDOW)
    for cell, lr in windowed:  # beyond the window a run is worth nothing to the criterion
        du = math.log(lr / ref.cell_optima[cell])
        assert -bench.WINDOW[0] - 0.4 < du < bench.WINDOW[1] + 0.4  # (grid steps: ln √2 ≈ 0.35)


def test_oracle_runs_and_their_predicted_error(ladder: pd.DataFrame) -> None:
    """The oracle design's replayed runs (one seed per point asked, or every stored seed) and the
    noise-only predicted target error: sqrt(sd_s^2 - sd_d^2) in log2, smaller than for as many
    random runs, 0 for the whole grid."""
    bench = _bench()
    stored = ladder.reset_index(drop=True)
    ref = bench.fit(stored, 0, dense=True)
    n = len(stored) // 4
    design = bench.oracle_design(stored, ref, n)
    cap = stored.groupby(["cell", "lr"]).size().to_dict()
    cells = al.cells_from_runs(stored)
    used = bench.replay_design(stored, design, seed=0)
    assert len(used) == n and used.index.is_unique
    every = bench.replay_design(stored, design, seed=0, every=True)
    assert len(every) == sum(cap[pt] for pt in design) > n  # every stored seed at its points
    mine = bench.predicted(used, stored, ref)
    rnd = bench.predicted(bench.random_pick(stored, n, 0), stored, ref)
    assert 0 < mine["predicted_sd_diff_log2_nested"] < rnd["predicted_sd_diff_log2_nested"]
    assert rnd["predicted_target_pass_nested"] < mine["predicted_target_pass_nested"] <= 1
    assert mine["predicted_sd_diff_log2_nested"] >= mine["predicted_sd_diff_log2"]
    # the figure itself: sqrt(sd_s^2 - sd_d^2) in log2, both in the reference's window
    tgt = al.default_target(cells)
    sd_s = al._Info.build(ref, used, cells, tgt, bench.WINDOW).target_sd()
    sd_d = al._Info.build(ref, stored, cells, tgt, bench.WINDOW).target_sd()
    sd = math.sqrt(sd_s**2 - sd_d**2) / math.log(2.0)
    assert mine["predicted_sd_diff_log2_nested"] == pytest.approx(sd)
    assert mine["predicted_target_pass_nested"] == pytest.approx(2 * NormalDist().cdf(0.4 / sd) - 1)
    assert bench.predicted(stored, stored, ref)["predicted_sd_diff_log2_nested"] == 0.0


def test_one_non_finite_bootstrap_refit_is_a_bad_resample_not_a_failed_fit(
    ladder: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The non-finite FitError must still count as one bad resample in the bootstrap: a review
    made the 7th of 200 refits meet a non-finite residual, and the whole fit was refused."""
    from sweeper.fitting import _surface_fit as sfit
    from sweeper.fitting import _surface_model as sm
    from sweeper.fitting.surface import fit_surface

    real, calls = sm.least_squares, {"n": 0, "at": 7}

    def flaky(*a, **k):  # type: ignore[no-untyped-def]
        if k.get("max_nfev") == sfit.REFIT_MAX_NFEV:
            calls["n"] += 1
            if calls["n"] == calls["at"]:
                raise ValueError("Residuals are not finite in the initial point.")
        return real(*a, **k)

    monkeypatch.setattr(sm, "least_squares", flaky)
    law = fit_surface(ladder, n_boot=50, cv=False, seed=0)
    assert calls["n"] >= 7 and law.interval({"n_params": 1e7})[0] > 0
    calls.update(n=0, at=2)  # a leave-one-cell-out refit the same: that fold is NaN, the law stands
    law = fit_surface(ladder, n_boot=0, cv=True, seed=0)
    assert calls["n"] >= 2 and law.interval({"n_params": 1e7})[0] > 0


def test_a_budget_stop_says_how_wide_the_target_lr_interval_is(ladder: pd.DataFrame) -> None:
    """A plan stopped on its budget said only "budget reached: 30 runs of 30": whether to raise
    the budget hangs on how far the target LR's interval is from the stop rule (an audit measured
    1.82 on one sweep and 1843 on another, against 1.5)."""
    runs = ladder[ladder["seed"] == 0]
    cells = _cells(ladder)
    going = al.plan(runs, cells, k=1, budget_runs=len(runs) + 1, stop_lr_interval_ratio=1.01)
    assert going.points and going.interval_ratio is not None  # the same runs, short of the budget
    p = al.plan(runs, cells, k=1, budget_runs=len(runs), stop_lr_interval_ratio=1.01)
    assert p.points == () and p.interval_ratio == going.interval_ratio
    assert p.stop == (
        f"budget reached: {len(runs)} runs of {len(runs)}; the target LR's 95% interval "
        "(Laplace, which leaves the cells' scatter out: the bootstrap one `sweeper fit` reports "
        f"can be far wider) is {going.interval_ratio:.3g}x wide, the stop rule's 1.01x: raise "
        "budget_runs to go on"
    )
    # below the rule's ratio at the budget: what else the rule waits for (one seed: unconfirmed)
    p = al.plan(runs, cells, k=1, budget_runs=len(runs), stop_lr_interval_ratio=1e9)
    assert "x wide, the stop rule's 1e+09x: raise budget_runs to go on (below the rule's " in p.stop
    assert "the rule also waits for: the best LR confirmed in 5 cells (" in p.stop
    # no fit possible (one cell): said so
    one = runs[runs["cell"] == cells[0].cell]
    p = al.plan(one, cells, k=1, budget_runs=len(one))
    assert p.points == () and p.interval_ratio is None
    assert "; no target-LR interval (no law yet: " in p.stop
    assert p.stop.endswith("): raise budget_runs to go on")
    assert al._times(1843.2) == "1,843" and al._times(1.823) == "1.82"


def test_a_budget_in_whole_points_says_both_numbers(ladder: pd.DataFrame) -> None:
    """With 2 seeds a point and budget_runs = 19 the launch stopped at 18 and said "18 of 19 runs
    used; its plan stopped: budget reached: 18 runs of 18"; and a budget lowered below the runs
    already used left "15 of 10 runs used" with nothing said."""
    runs = ladder[ladder["seed"] == 0].iloc[:18]
    cells = _cells(ladder)
    p = al.plan(runs, cells, k=1, budget_runs=19, point_runs=2)
    assert p.points == () and p.stop.startswith(
        "budget reached: 18 runs of 19 (spent in whole points of 2 runs: the next would make 20);"
    )
    # the same as the budget the launch gave before (budget_runs - point_runs + 1)
    for n in (15, 16, 17):
        a = al.plan(runs.iloc[:n], cells, k=1, budget_runs=19, point_runs=2)
        b = al.plan(runs.iloc[:n], cells, k=1, budget_runs=18)
        assert a.points == b.points and bool(a.points) == (n < 18)
    p = al.plan(runs, cells, k=1, budget_runs=10)
    assert p.points == () and p.stop.startswith(
        "budget reached: budget_runs 10 is below the 18 runs already used, so nothing is left to "
        "run;"
    )
    with pytest.raises(ValueError, match="point_runs"):
        al.plan(runs, cells, point_runs=0)


def test_no_candidate_left_says_why(ladder: pd.DataFrame) -> None:
    """The plan stopped with "no candidate left" and nothing more: every LR full, or the best
    LR on the edge of the LR list (widen the range there)."""
    runs = ladder[ladder["seed"] == 0]
    cells = [al.CellPlan(c.cell, c.n_params, c.tokens, c.lrs[2:5], c.cost) for c in _cells(ladder)]
    lrs = {c.cell: c.lrs for c in cells}
    sub = runs[[lr in lrs[c] for c, lr in zip(runs["cell"], runs["lr"], strict=True)]]
    assert len(sub) == 3 * len(cells)
    p = al.plan(sub, cells, k=1, max_seeds=1, stop_lr_interval_ratio=None)
    assert p.points == () and p.stop.startswith(
        f"no candidate left: every (cell, LR) has 1 run or more ({len(sub)})"
    )
    best = {c: sub[sub["cell"] == c].sort_values("loss")["lr"].iloc[0] for c in lrs}
    low = [c for c in lrs if best[c] == lrs[c][0]]
    high = [c for c in lrs if best[c] == lrs[c][-1]]
    assert low or high
    for c in low:
        assert f"{c} (lowest)" in p.stop
    for c in high:
        assert f"{c} (highest)" in p.stop
    assert p.stop.endswith(": widen the LR range there")


def test_each_point_says_which_rule_chose_it(ladder: pd.DataFrame) -> None:
    """Why each point was chosen (start, bracket, confirm, information, explore) was nowhere; it
    is not part of a point's identity."""
    cells = _cells(ladder)
    stored = ladder.reset_index(drop=True)
    used = np.zeros(len(stored), dtype=bool)
    whys: list[str] = []
    while True:
        p = al.plan(stored[used], cells, k=1, seed=0, budget_runs=30, stop_lr_interval_ratio=None)
        if not p.points:
            break
        whys.append(p.points[0].why)
        used[_answer(stored, used, p.points[0].cell, p.points[0].lr)] = True
    phases = [w.split(":")[0] for w in whys]
    assert phases[:15] == ["start"] * 15 and whys[0].startswith("start: one LR in each third")
    assert "around" in whys[3] and "best LR" in whys[3]
    assert {"bracket", "confirm", "information"} <= set(phases)
    assert set(phases) <= {"start", "bracket", "confirm", "information", "explore"}
    assert al.Point("a", 1.0, 0, "start: x") == al.Point("a", 1.0, 0)
    # without a law: explore, said so
    one = ladder[ladder["cell"] == cells[0].cell]
    p = al.plan(one, cells[:1], k=1, stop_lr_interval_ratio=None, max_seeds=3)
    assert p.points[0].why.startswith("explore: no law yet")


def _bench_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[object, str, str]:
    """scripts/bench_allocation.py's main with ``argv``: (exit code, stdout, stderr)."""
    import sys

    bench = _bench()
    monkeypatch.setattr(sys, "argv", ["bench_allocation.py", *argv])
    try:
        code = bench.main()
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_errors_are_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--seeds 0/-1 crashed with IndexError, --workers 0 with a ValueError traceback, a wrong sweep
    name or a missing database with a StorageError traceback."""
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import open_sweep

    cases = [
        (["--synthetic", "--seeds", "0"], "--seeds must be at least 1, got 0"),
        (["--synthetic", "--seeds", "-1"], "--seeds must be at least 1, got -1"),
        (["--synthetic", "--workers", "0"], "--workers must be at least 1, got 0"),
        (["--synthetic", "--confirm-runs", "0"], "--confirm-runs must be at least 1"),
        (["--synthetic", "--stop-ratio", "0.5"], "--stop-ratio must be > 1 (or 0: off)"),
        (["--synthetic", "--budget", "2"], "--budget must be in (0, 1]"),
        (["--synthetic", "--seeds", "x"], "argument --seeds: invalid int value: 'x'"),
        (["nosuch", "--storage", f"sqlite:///{tmp_path / 'none.db'}"], "no database at"),
    ]
    url = f"sqlite:///{tmp_path / 'some.db'}"
    text = (
        '[sweep]\nname = "some"\n[model]\ncontext = 32\n[ladder]\nwidths = [16, 32]\n'
        "depths = [1]\ntokens = [16384]\n[search]\nlr = { low = 2e-3, high = 4.0, log = true }\n"
        'batch_size = 8\n[sampler]\nkind = "law"\nbudget_runs = 8\n'
    )
    open_sweep(parse_study_toml(text), url)
    cases += [
        (["nosuch", "--storage", url], "no sweep 'nosuch' in"),
        (["some", "--storage", url], "some: the sweep holds no completed or diverged runs"),
    ]
    for argv, expected in cases:
        code, out, err = _bench_main(monkeypatch, capsys, *argv)
        lines = err.strip().splitlines()
        assert code == 2 and out == "", (argv, err)
        assert len(lines) == 1 and lines[0].startswith("bench_allocation.py: error: "), (argv, err)
        assert expected in lines[0], (argv, lines)
    code, out, _ = _bench_main(monkeypatch, capsys, "--help")
    assert code == 0
    for default in ("(default: 0.25)", "(default: 1)", "(default: 100)", "default: 1.5)",
                    "default: 2)", "default: planner)", "(default: sparse)"):  # fmt: skip
        assert default in " ".join(out.split()), default


def test_bench_documents_every_key_its_json_prints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pass_fraction, random_pass_fraction, exponent_tolerance, the *_median keys and
    asymmetry_prior were printed by --json and said nowhere."""
    import json

    code, out, _ = _bench_main(
        monkeypatch, capsys, "--synthetic", "--budget", "0.2", "--boot", "0", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    rep = doc["replays"][0]
    keys = set(doc) | set(rep) | set(rep["random"])
    text = " ".join((_bench().__doc__ or "").split())
    missing = sorted(k for k in keys if f"``{k}``" not in text)
    assert not missing, missing
    assert rep["stop"].startswith("budget reached: ")

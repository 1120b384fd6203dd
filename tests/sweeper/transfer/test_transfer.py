"""validate-transfer's arithmetic on a synthetic sweep: the plan, the regret and its resolution."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.fitting.synthetic import synthetic_sweep
from sweeper.study.runs import normalize_runs
from sweeper.transfer.plan import plan_transfer, summarize_transfer

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.filterwarnings("ignore:only 4 cells")


@pytest.fixture(scope="module")
def sweep_runs() -> pd.DataFrame:
    return synthetic_sweep(
        n_params=(1e6, 2e6, 4e6, 8e6, 1.6e7), tokens=(4e8,), seeds=2, noise=2e-3, seed=3
    )


def _trained(plan, losses: dict[str, list[float]]) -> pd.DataFrame:
    held = plan.holdout
    filler = max(v for vals in losses.values() for v in vals) * 1.1
    losses = {**{name: [filler, filler] for name in plan.lrs}, **losses}
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
    assert plan.law.method == "surface"  # the default: its recommendation is risk-aware
    assert plan.lrs["law"] < plan.lrs["law_point"]
    assert set(plan.lrs) == {
        "law",
        "law_point",
        "smallest_cell",
        "largest_fitted",
        "steplaw",
        "deepseek",
        "porian",
        "measured_optimum",
    }
    assert plan.extrapolation["n_params"] == pytest.approx(2.0)  # 1.6e7 over 8e6
    assert len(plan.fit_cells) == 4


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
                "measured_optimum": [best["mean"] * 1.0001] * 2,  # the swept best stays the best
            },
        ),
    )
    assert res.best_swept_loss == pytest.approx(best["mean"])  # the best point trained in the cell
    assert res.regret_pct == pytest.approx(2.0, abs=1e-9)
    assert res.baseline_regret_pct == pytest.approx(20.0)
    assert res.published_regret_pct == pytest.approx(50.0)
    assert res.regret_vs_optimum_pct == pytest.approx(100 * (1.02 / 1.0001 - 1), abs=1e-9)
    sd_law = float(np.std(law_losses, ddof=1))
    se = 100 * math.sqrt(sd_law**2 / 2 + best["std"] ** 2 / best["count"]) / best["mean"]
    assert res.regret_se_pct == pytest.approx(se)
    assert res.grid_step_log2 == pytest.approx(0.5)  # the synthetic grid is in sqrt(2) steps
    assert res.log2_error == pytest.approx(math.log2(res.predicted_lr / res.measured_lr))
    d = res.to_dict()
    assert {"log2_error", "regret_pct", "baseline_regret_pct", "regret_se_pct"} <= set(d)
    assert {"extrapolation_factor", "predicted_lr", "predicted_lr_point", "baselines"} <= set(d)
    assert d["baselines"]["smallest_cell"]["regret_pct"] == pytest.approx(20.0)
    assert d["baselines"]["steplaw"]["lr"] == plan.lrs["steplaw"]


def test_a_diverged_seed_is_no_loss_to_average(sweep_runs: pd.DataFrame) -> None:
    """The loop reports a diverged run as COMPLETE with its last loss (72 or 1857 nats): one
    such seed at the prediction gave a regret of +1334% with no word (an audit). It is left out
    of the mean and said; a point whose every seed diverged has no loss and no regret."""
    from sweeper.cli.report import _print_transfer_tail, _transfer_table

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    # (the law's seed near the cell's own losses: a completed run more than 50% above the cell's
    # best is off the parabola that measures its optimum, as in every fit)
    cell = sweep_runs[np.isclose(sweep_runs["n_params"], 1.6e7) & ~sweep_runs["diverged"]]
    good = float(cell.groupby("lr")["loss"].mean().min()) * 1.01
    trained = _trained(plan, {"law": [good, 72.0], "steplaw": [1857.0, 900.0]})
    law_lr, pub_lr = plan.lrs["law"], plan.lrs["steplaw"]
    trained.loc[np.isclose(trained["lr"], law_lr) & (trained["loss"] == 72.0), "diverged"] = True
    trained.loc[np.isclose(trained["lr"], pub_lr), "diverged"] = True
    res = summarize_transfer(plan, sweep_runs, trained)
    assert res.losses["law"] == pytest.approx(good)
    assert "steplaw" not in res.losses and res.published_regret_pct is None
    assert any("law: 1 of 2 seeds diverged" in n for n in res.notes)
    assert any("steplaw: diverged" in n and "every seed" in n for n in res.notes)
    # one seed left at the law's LR has no spread: no standard error of the regret (it had been
    # computed with a spread of 0 there, a review found)
    other = next(n for n in plan.lrs if n not in ("law", "steplaw"))
    elsewhere = _trained(plan, {"law": [good, 72.0], other: [good * 1.02, good * 1.03]})
    elsewhere.loc[elsewhere["loss"] == 72.0, "diverged"] = True
    assert summarize_transfer(plan, sweep_runs, elsewhere).regret_se_pct is None
    assert res.best_swept_loss < 72.0
    from rich.console import Console

    c = Console(record=True, width=200)
    c.print(_transfer_table(res))
    _print_transfer_tail(c, res)
    assert "nan" not in c.export_text().lower()


def test_the_cli_prints_a_result_as_a_table(sweep_runs: pd.DataFrame) -> None:
    """``validate-transfer`` without --json: the head, one row per trained point, the tail."""
    from rich.console import Console

    from sweeper.cli.report import _print_transfer_head, _print_transfer_tail, _transfer_table

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    res = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    c = Console(record=True, width=160)
    _print_transfer_head(c, res)
    c.print(_transfer_table(res))
    _print_transfer_tail(c, res)
    text = c.export_text()
    assert text.startswith("Transfer check of syn: held-out cell ")
    assert f"log2 error {res.log2_error:+.3f}" in text
    assert "law prediction (recommended)" in text and "2.0100" in text  # the law's mean loss
    assert "best loss trained in the cell" in text and "resolution: " in text
    # the retrained swept optimum is named as such, with its LR, not as "the measured optimum",
    # which the head gives as another LR (a transfer audit)
    assert res.regret_vs_optimum_pct is not None
    assert (f"against the cell's swept optimum (lr {res.lrs['measured_optimum']:.3g}), same "
            "seeds" in text)  # fmt: skip
    assert "against the measured optimum" not in text


def test_the_report_page_shows_a_result_as_a_table(sweep_runs: pd.DataFrame) -> None:
    """The report's transfer section: one sentence, then one row per trained point, the same
    rows as the CLI's table (sweeper.transfer.plan.transfer_rows), no Python reprs."""
    from sweeper.report.page import _transfer_html
    from sweeper.transfer.plan import transfer_rows

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    res = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    d = res.to_dict()
    rows = transfer_rows(d)
    assert [r["lr"] for r in rows] == sorted(plan.lrs.values())
    law = next(r for r in rows if r["point"] == "law prediction (recommended)")
    assert law["loss"] == pytest.approx(2.01) and law["regret_pct"] == pytest.approx(
        100 * (2.01 - res.best_swept_loss) / res.best_swept_loss
    )
    page = "".join(_transfer_html(d))
    assert page.startswith("<p>Held-out cell ") and f"log2 error {res.log2_error:+.2f}" in page
    assert page.count("</tr>") == len(rows) + 1  # a header and one row per point
    assert "law prediction (recommended)" in page and "{'" not in page


def test_cell_filter_and_cell_names() -> None:
    from sweeper.errors import SweeperError
    from sweeper.transfer.holdout import cell_filter, parse_cell_name

    f = cell_filter("width<=64, tokens>=800k")
    assert f({"width": 64, "tokens": 819200, "depth": 2, "n_params": 1e5})
    assert not f({"width": 96, "tokens": 819200}) and not f({"width": 32, "tokens": 4e5})
    for bad in ("width<<64", "height<=3", "width<=six", ""):
        with pytest.raises(SweeperError, match="--fit-cells"):
            cell_filter(bad)
    assert parse_cell_name("w256-d2-t819k", [819200]) == (256, 2, 819200)
    assert parse_cell_name("w256-d4-t1.64M") == (256, 4, 1_640_000)
    with pytest.raises(SweeperError, match="not a cell name"):
        parse_cell_name("big-one")


def test_fit_set_and_a_new_held_out_cell(sweep_runs: pd.DataFrame) -> None:
    """--fit-cells keeps the law to the small cells; a cell not in the sweep is built from the
    study (its N from the ladder's formula) and gets a sqrt(2) grid around the prediction."""
    from sweeper.study.spec import load_study
    from sweeper.transfer.holdout import cell_filter

    small = cell_filter("n_params<=4e6")
    plan = plan_transfer(sweep_runs, sweep="syn", fit_cells=small, n_boot=50)
    assert len(plan.fit_cells) == 3 and plan.holdout.n_params == pytest.approx(1.6e7)
    assert plan.extrapolation["n_params"] == pytest.approx(4.0)
    spec = load_study(REPO / "studies" / "quickstart.toml")
    new = plan_transfer(sweep_runs, sweep="syn", holdout="w512-d2-t819k", spec=spec, n_boot=50)
    assert not new.holdout.in_sweep and new.holdout.width == 512 and new.holdout.tokens == 819200
    assert "measured_optimum" not in new.lrs
    point = new.predicted_lr_point
    assert new.lrs["grid-1"] == pytest.approx(point / math.sqrt(2), rel=1e-5)  # 6 digits, as
    assert new.lrs["grid+1"] == pytest.approx(point * math.sqrt(2), rel=1e-5)  # trained


def test_the_grid_grows_until_the_best_point_is_bracketed(sweep_runs: pd.DataFrame) -> None:
    from sweeper.transfer.plan import next_grid_step

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=50).with_grid((-1, 1))
    center = plan.predicted_lr_point

    def runs(losses: dict[float, float], diverged: tuple[float, ...] = ()) -> pd.DataFrame:
        rows = [
            {"lr": lr, "loss": loss, "state": "COMPLETE", "diverged": False, "seed": 0.0}
            for lr, loss in losses.items()
        ] + [{"lr": lr, "loss": np.nan, "state": "COMPLETE", "diverged": True, "seed": 0.0}
             for lr in diverged]  # fmt: skip
        return pd.DataFrame(rows)

    r2 = math.sqrt(2)
    # falling all the way up: train one step above the best
    assert next_grid_step(plan, runs({center / r2: 3.0, center: 2.9, center * r2: 2.8})) == 2
    # best in the middle: done
    assert next_grid_step(plan, runs({center / r2: 3.0, center: 2.8, center * r2: 2.9})) is None
    # best at the top but the next step up diverged: bracketed
    assert next_grid_step(plan, runs({center / r2: 3.0, center: 2.8}, (center * r2,))) is None
    # best at the bottom: one step below
    assert next_grid_step(plan, runs({center / r2: 2.7, center: 2.8, center * r2: 2.9})) == -2
    # never beyond 3 octaves from the prediction
    far = plan.with_grid(range(-6, 0))
    low = {center * r2**k: 2.0 + 0.1 * (k + 6) for k in range(-6, 2)}
    assert next_grid_step(far, runs(low)) is None


def test_a_replanned_check_keeps_the_points_it_trained(sweep_runs: pd.DataFrame) -> None:
    """Planned again (more seeds, another machine), the risk-aware LR moves by a fraction of a
    percent: within 1% of a trained LR it is that LR, and the grid centred on the snapped point
    estimate finds the grid points trained before; anything further is a new point."""
    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=50).with_grid((-1, 1))
    trained = list(plan.lrs.values())
    moved = replace(plan, lrs={k: v * (1.004 if k.startswith("law") else 1.0)
                               for k, v in plan.lrs.items() if not k.startswith("grid")})  # fmt: skip
    again = moved.snapped(trained).with_trained(trained)
    assert again.lrs == plan.lrs
    far = replace(plan, lrs={**plan.lrs, "law": plan.lrs["law"] * 1.02})
    assert far.snapped(trained).lrs["law"] == pytest.approx(plan.lrs["law"] * 1.02)
    assert plan.snapped([]).lrs == plan.lrs
    # never onto another planned point's LR: a baseline 0.3% away stays a point of its own
    near = {**plan.lrs, "porian": plan.lrs["law"] * 1.003}
    moved = replace(plan, lrs={**near, "law": plan.lrs["law"] * 1.004})
    assert moved.snapped([*trained, near["porian"]]).lrs["law"] == pytest.approx(plan.lrs["law"])


def test_each_fit_set_and_method_has_its_own_check_sweep() -> None:
    """A check from another fit set or by another method must not start over (delete) the runs
    of an earlier one."""
    from sweeper.study.spec import NAME_RE
    from sweeper.transfer.run import transfer_sweep_name

    default = transfer_sweep_name("width_sp", "w256-d2-t819k")
    small = transfer_sweep_name("width_sp", "w256-d2-t819k", "width<=64")
    smaller = transfer_sweep_name("width_sp", "w256-d2-t819k", "width <= 48")
    assert default == "width_sp.transfer.w256-d2-t819k"
    assert small == "width_sp.transfer.w256-d2-t819k.fit-width-le-64"
    assert len({default, small, smaller}) == 3
    assert all(NAME_RE.match(n) for n in (default, small, smaller))
    odd = transfer_sweep_name("s", "c", "n_params>=1e5, tokens==819200")
    assert NAME_RE.match(odd) and odd.startswith("s.transfer.c.fit-")
    by = {m: transfer_sweep_name("s", "c", "width<=64", *m)
          for m in (("parabola",), ("band",), ("surface",), ("surface", "planner"))}  # fmt: skip
    assert by[("surface", "planner")] == "s.transfer.c.surface-planner.fit-width-le-64"
    assert len(set(by.values())) == 4 and all(NAME_RE.match(n) for n in by.values())


@pytest.fixture(scope="module")
def law_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The live law-sampler quickstart (23 runs, 3-5 per cell), imported with its study."""
    from sweeper import api

    url = f"sqlite:///{tmp_path_factory.mktemp('law') / 'runs.db'}"
    api.import_runs(
        REPO / "docs/data/allocation/quickstart_law_live.csv",
        sweep="quickstart_law",
        storage=url,
        study=REPO / "studies/quickstart_law.toml",
    )
    return "quickstart_law", url


def test_a_law_study_is_fitted_with_the_planners_own_settings(law_study) -> None:
    """Its cells hold 3-5 runs near each optimum: the other settings leave cells out; the
    planner's (every run, one curvature, cells from 3 runs) are its default."""
    from sweeper import api
    from sweeper.errors import FitError

    sweep, url = law_study
    (law,) = api.fit(sweep, target="lr", method="surface", storage=url, store=False, n_boot=0)
    assert "surface settings: planner" in law.notes
    assert law.n_cells == 5
    fits = {s: api.fit(sweep, target="lr", method="surface", storage=url, store=False,
                       n_boot=0, surface=s)[0] for s in ("all-runs", "standard")}  # fmt: skip
    assert fits["all-runs"].n_cells == 4  # w48 left out: 3 runs, the standard minimum is 4
    assert any(n.startswith("left out w48") for n in fits["all-runs"].notes)
    assert fits["standard"].n_cells == 3  # and w64 a bound: the runs in its window diverged
    with pytest.raises(FitError, match="unknown surface settings"):
        api.fit(sweep, method="surface", storage=url, store=False, surface="wide")


def test_the_fit_set_counts_a_cell_by_the_runs_its_method_needs(law_study) -> None:
    """w48 has 3 runs: too few for the parabola's 4, enough for the planner's surface."""
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.study.handle import Sweep

    sweep, url = law_study
    sw = Sweep.load(sweep, url)
    kw = {"sweep": sweep, "spec": sw.spec, "conventions": sweep_conventions(sw), "n_boot": 40}
    parabola = plan_transfer(sw.runs(), method="parabola", **kw)
    surface = plan_transfer(sw.runs(), method="surface", surface="planner", **kw)
    assert "w48-d2-t819k" not in parabola.fit_cells
    assert "w48-d2-t819k" in surface.fit_cells
    assert surface.holdout.name == parabola.holdout.name == "w128-d2-t819k"
    assert surface.predicted_lr < surface.predicted_lr_point  # risk-aware: below the cliff


def test_a_check_whose_law_moved_keeps_its_runs_and_fills_beside_them(
    sweep_runs: pd.DataFrame, tmp_path: Path
) -> None:
    """Planned again after the law moved (more runs in the ladder, a refit), a launched block's
    study differs from the new one only in its LR grid: it is read only, its runs kept, and the
    new plan's LRs are trained for its seeds in ``<block>.fill`` (a fill read only in turn gets
    its own). A block whose study measures something else (the sweep's model changed) is started
    over, as before."""
    from sweeper.study.spec import load_study
    from sweeper.study.storage import sweeps_table, transaction
    from sweeper.study.sweep import open_sweep
    from sweeper.transfer.run import (
        SeedBlock,
        _changed,
        _complete_lrs,
        _grid_moved,
        _transfer_spec,
        one_run_per_seed,
        with_fills,
    )

    url = f"sqlite:///{tmp_path / 'check.db'}"
    spec = load_study(REPO / "studies" / "quickstart.toml")
    plan = plan_transfer(sweep_runs, sweep="syn", holdout="w512-d2-t819k", spec=spec, n_boot=50)
    head = SeedBlock("syn.transfer.w512-d2-t819k", 0, 2)
    old = _transfer_spec(spec, plan, head, 3, {})
    open_sweep(old, url)
    assert not _grid_moved(old, url) and not _changed(old, url)
    later = replace(plan, lrs={k: v * 1.3 for k, v in plan.lrs.items()})
    new = _transfer_spec(spec, later, head, 3, {})
    assert _grid_moved(new, url) and _changed(new, url)

    def moved(b: SeedBlock) -> bool:
        return _grid_moved(_transfer_spec(spec, later, b, 1, {}), url)

    blocks = with_fills([head], url, moved)
    assert [(b.name, b.read_only, b.fills) for b in blocks] == [
        (head.name, True, None),
        (f"{head.name}.fill", False, head.name),
    ]
    open_sweep(_transfer_spec(spec, plan, blocks[1], 3, {}), url)  # a fill of an earlier plan too
    blocks = with_fills([head], url, moved)
    assert [b.name for b in blocks if not b.read_only] == [f"{head.name}.fill.fill"]
    # the LRs a read-only block (or one it fills) finished for every seed are not trained again
    lr = plan.lrs["law"]
    runs = {
        head.name: _runs_at([lr, lr, 2 * lr], [0, 1, 0]),
        f"{head.name}.fill": _runs_at([2 * lr, 2 * lr, 3 * lr], [0, 1, 0]),
    }
    assert _complete_lrs(blocks, runs) == {head.name: [lr], f"{head.name}.fill": [lr, 2 * lr]}
    # ... and a seed trained again by a fill (its block did not finish the other) counts once
    both = one_run_per_seed(pd.concat(runs.values(), ignore_index=True))
    assert sorted(zip(both["lr"], both["seed"], strict=True)) == [
        (lr, 0), (lr, 1), (2 * lr, 0), (2 * lr, 1), (3 * lr, 0)
    ]  # fmt: skip
    # a row hashed by an older definition of the hash, or a study that no longer parses
    with transaction(url) as conn:
        conn.execute(sweeps_table.update().where(sweeps_table.c.name == head.name)
                     .values(spec_hash="older-definition"))  # fmt: skip
    assert not _grid_moved(old, url) and not _changed(old, url)  # the same study: not moved
    assert _grid_moved(new, url)
    with transaction(url) as conn:
        conn.execute(sweeps_table.update().where(sweeps_table.c.name == head.name)
                     .values(study_toml="[sweep]\nname = 3\n"))  # fmt: skip
    assert not _grid_moved(new, url) and _changed(new, url)  # started over, as before
    # another model: not the same measurement, started over
    other = replace(spec, model=replace(spec.model, context=spec.model.context * 2))
    open_sweep(_transfer_spec(other, plan, head, 3, {}), url, force_new=True)
    assert not _grid_moved(_transfer_spec(spec, later, head, 3, {}), url)
    assert _changed(_transfer_spec(spec, later, head, 3, {}), url)


def _runs_at(lrs: list[float], seeds: list[int]) -> pd.DataFrame:
    cols = {"lr": lrs, "seed": [float(x) for x in seeds], "loss": 3.0, "diverged": False}
    return pd.DataFrame({**cols, "state": "COMPLETE"})


def test_grid_points_are_one_grid_whether_derived_before_or_after_rounding(
    sweep_runs: pd.DataFrame,
) -> None:
    """The held-out w256 check of width_sp_long planned its point estimate at 2.3099532e-3: a
    grid step derived from that value rounds to 3.26677e-3 (trained), from its trained value
    (2.30995e-3) to 3.26676e-3, so the candidate LRs held both. Every grid LR now comes from the
    rounded point."""
    from sweeper.transfer.run import _candidates

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=50)
    plan = replace(plan, lrs={**plan.lrs, "law_point": 2.3099532e-3})
    early = plan.with_grid((-1, 1))  # as a first plan is built, before rounding
    late = plan.rounded().with_grid((-1, 1))
    assert early.lrs["grid+1"] == late.lrs["grid+1"] == 3.26676e-3
    grid = {v for k, v in late.lrs.items() if k.startswith("grid")}
    assert grid == {v for k, v in early.lrs.items() if k.startswith("grid")}
    assert grid <= set(_candidates(late))


def test_a_measured_optimum_that_fell_back_to_the_best_point_says_so() -> None:
    """The parabola of a cell whose losses are not convex in log LR falls back to the best
    trained point: every log2 error was then measured against a grid point, with no word."""
    from sweeper.transfer.plan import _measured_optimum

    lrs = 1e-3 * 2.0 ** np.arange(6) / 2
    rows = [
        {"n_params": 1e6, "tokens": 4e8, "lr": lr, "batch_size": 64.0, "seq_len": 256.0,
         "loss": 3.0 - 0.01 * (np.log2(lr / 2e-3)) ** 2 + 0.001 * s, "diverged": False,
         "state": "COMPLETE", "seed": float(s)}
        for lr in lrs for s in (0, 1)
    ]  # fmt: skip
    runs = normalize_runs(pd.DataFrame(rows))
    lr, _ci, notes = _measured_optimum(runs, "held", _best_point(runs))
    assert np.isclose(lrs, lr).any() and any("used the best point" in n for n in notes), notes
    assert notes[0].startswith(f"measured optimum {lr:.3g}")


def _best_point(runs: pd.DataFrame) -> pd.Series:
    """The regret table's best point of ``runs`` (seeds averaged), as summarize_transfer takes it."""
    from sweeper.transfer.plan import _point_losses

    points = _point_losses(runs)
    return points.loc[points["mean"].idxmin()]


def test_a_fallen_back_optimum_is_the_regret_tables_best_point() -> None:
    """A transfer audit: the optimum estimate counts LRs 1% apart as one grid point, so the law's
    0.00402 and the grid's 0.004 were averaged into a point that lost to 0.00284, which stood as
    the measured optimum (every log2 error against it) beside a table whose best was 0.004."""
    from sweeper.transfer.plan import _measured_optimum

    loss = {1e-3: 2.90, 2e-3: 2.80, 2.84e-3: 2.7234, 4e-3: 2.7219, 4.02e-3: 2.7343,
            5.7e-3: 2.80, 8e-3: 2.7240, 1.6e-2: 2.95}  # (two dips: the parabola falls back)
    rows = [
        {"n_params": 1e6, "tokens": 4e8, "lr": lr, "batch_size": 64.0, "seq_len": 256.0,
         "loss": v, "diverged": False, "state": "COMPLETE", "seed": float(s)}
        for lr, v in loss.items() for s in (0, 1)
    ]  # fmt: skip
    runs = normalize_runs(pd.DataFrame(rows))
    best = _best_point(runs)
    lr, _ci, notes = _measured_optimum(runs, "held", best)
    assert any("used the best point" in n for n in notes), notes
    assert lr == float(best["lr"]) == 4e-3


@pytest.fixture
def stopped_check(tmp_path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The quickstart's runs imported with their study, and a launch that stops at once
    (interrupted by ``signal``): returns (storage URL, the launched check sweeps' names)."""
    from pathlib import Path
    from types import SimpleNamespace

    import sweeper.run.launch as launch
    from sweeper import api

    repo = Path(__file__).resolve().parents[3]
    url = f"sqlite:///{tmp_path / 'q.db'}"
    api.import_runs(repo / "docs/data/quickstart.csv", sweep="q", storage=url,
                    study=repo / "studies/quickstart.toml")  # fmt: skip
    names: list[str] = []
    signal = {"name": "SIGINT"}

    def stopped(spec, **kw):  # type: ignore[no-untyped-def]
        names.append(spec.name)
        return SimpleNamespace(interrupted=signal["name"])

    monkeypatch.setattr(launch, "launch_study", stopped)
    return url, names, signal, repo


def test_a_check_whose_launch_is_interrupted_stops_saying_so(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during a check's training stopped its launch cleanly, and the check then scored
    what it had: 'error: no completed transfer run at the smallest_cell LR', rc 2 (an audit).
    It stops as interrupted (128 + the signal), its finished runs kept for the rerun."""
    from sweeper import cli

    url, calls, signal, _ = stopped_check
    signal["name"] = "SIGTERM"
    code = cli.main(["validate-transfer", "q", "--holdout", "w192-d2-t819k", "--seeds", "1",
                     "--storage", url])  # fmt: skip
    err = capsys.readouterr().err
    assert calls and code == 143, err
    # before it trained, the check said what it would train and about what it costs
    assert "validate-transfer: w192-d2-t819k: " in err and "core-seconds each" in err
    assert "interrupted (SIGTERM)" in err and "the same command resumes" in err


def test_an_empty_fit_set_is_refused_not_read_as_every_cell(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--fit-cells ''`` (a shell variable left empty) was read as no filter and trained the
    unfiltered check; it is now refused before any training, like any unreadable filter."""
    from sweeper import cli

    url, calls, _, _ = stopped_check
    for empty in ("", "  "):
        code = cli.main(["validate-transfer", "q", "--holdout", "w192-d2-t819k", "--seeds", "1",
                         "--fit-cells", empty, "--storage", url])  # fmt: skip
        assert code == 2 and "fit_cells (--fit-cells): cannot read" in capsys.readouterr().err
    assert not calls


def test_bad_holdouts_and_fit_sets_say_what_to_do_before_any_training(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transfer audit: a held-out cell of width 0 failed deep in the law ("needs
    ['n_params']"); a fit set of no cell said "0 usable cells ()", one of every cell named no
    fix; --no-progress, as launch's, was refused."""
    from sweeper import cli

    url, calls, _, _ = stopped_check
    base = ["validate-transfer", "q", "--seeds", "1", "--storage", url, "--no-progress"]
    code = cli.main([*base, "--holdout", "w0-d2-t819k"])
    assert code == 2 and "holdout (--holdout) 'w0-d2-t819k': the width and the depth must be at " \
        "least 1" in capsys.readouterr().err
    code = cli.main([*base, "--fit-cells", "width>=512"])
    err = capsys.readouterr().err
    assert code == 2 and "the fit set 'width>=512' has 0 usable cells: a law needs 3" in err
    assert "the usable cells besides the held-out one: w32-d2-t819k" in err
    code = cli.main([*base, "--fit-cells", "width<=512"])
    err = capsys.readouterr().err
    assert code == 2 and "no usable cell outside the fit set 'width<=512'" in err
    assert "(--holdout CELL)" in err
    assert not calls


def test_a_retrained_swept_point_is_not_counted_twice(sweep_runs: pd.DataFrame) -> None:
    """The check retrains the cell's swept optimum at the sweep's seeds (identical losses):
    pooled with the sweep's runs those seeds counted twice in the best loss and its s.e."""
    from sweeper.transfer.plan import one_run_per_seed

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    cell = sweep_runs[np.isclose(sweep_runs["n_params"], 1.6e7)]
    again = cell.assign(source="transfer")
    both = pd.concat([cell, again], ignore_index=True)
    assert len(one_run_per_seed(both)) == len(cell)
    unseeded = cell.assign(seed=np.nan)
    assert len(one_run_per_seed(unseeded)) == len(cell)  # no seed: each run its own
    pts = cell[cell["state"] == "COMPLETE"].groupby("lr")["loss"].agg(["mean", "std", "count"])
    b = pts.loc[pts["mean"].idxmin()]
    law = [b["mean"] * 1.01, b["mean"] * 1.03]  # (every other point at 1.1 x the worst)
    res = summarize_transfer(plan, sweep_runs, pd.concat([_trained(plan, {"law": law}), again]))
    se = 100 * math.sqrt(np.var(law, ddof=1) / 2 + b["std"] ** 2 / b["count"]) / b["mean"]
    assert res.regret_se_pct == pytest.approx(se)  # the best point's seeds counted once


def test_a_held_out_cell_inside_the_fitted_range_is_called_an_interpolation(
    sweep_runs: pd.DataFrame,
) -> None:
    """An audit's holdout w32 under --fit-cells width<=48 read '0.445x beyond the largest
    fitted cell'."""
    from dataclasses import replace

    from rich.console import Console

    from sweeper.cli.report import _print_transfer_head

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    res = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    c = Console(record=True, width=200)
    _print_transfer_head(c, replace(res, extrapolation={"n_params": 0.445, "tokens": 1.0}))
    text = c.export_text()
    assert "inside the fitted range, an interpolation" in text and "beyond" not in text


def test_the_check_says_what_recommend_would_of_the_law_at_the_cell(
    sweep_runs: pd.DataFrame,
) -> None:
    """An audit's held-out cell at 4x the tokens a tokens-blind law was fitted at was planned
    with no word (recommend warns of it), nor of a 700x interval."""
    from dataclasses import replace

    from sweeper.transfer.plan import _law_doubts

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    assert not any("D 1.6e+09" in n for n in _law_doubts(plan))  # (its D/N is outside: said)
    far = replace(plan, holdout=replace(plan.holdout, tokens=plan.holdout.tokens * 4))
    notes = _law_doubts(far)
    assert any("does not model D" in n and "D 1.6e+09 (its cells: 4e+08)" in n for n in notes)
    res = summarize_transfer(far, sweep_runs, _trained(far, {"law": [2.0, 2.02]}))
    assert any("D 1.6e+09" in n for n in res.notes)


def test_a_filter_that_keeps_every_other_cell_is_the_unfiltered_check(stopped_check) -> None:
    """An audit's --fit-cells "width<=32" with the largest cell (w48) held out was a new check
    sweep under the filter's name, and retrained every run of the existing one."""
    from sweeper import api, cli

    url, names, _, repo = stopped_check
    for fit in ([], ["--fit-cells", "width<=96"], ["--fit-cells", "width<=64"]):
        cli.main(["validate-transfer", "q", "--holdout", "w128-d2-t819k", "--seeds", "1",
                  *fit, "--storage", url])  # fmt: skip
    plain, same, other = names
    assert same == plain and ".fit-" not in plain and other.endswith(".fit-width-le-64")
    # a check kept under the filter's name (trained so before, or imported as RESULTS shows) is
    # still that check
    api.import_runs(repo / "docs/data/quickstart.csv", storage=url,
                    sweep="q.transfer.w128-d2-t819k.surface.fit-width-le-96")  # fmt: skip
    cli.main(["validate-transfer", "q", "--holdout", "w128-d2-t819k", "--seeds", "1",
              "--fit-cells", "width<=96", "--storage", url])  # fmt: skip
    assert ".fit-width-le-96" in names[-1]


def test_the_report_shows_the_check_stored_last(sweep_runs: pd.DataFrame, tmp_path) -> None:
    """The report's check was the one whose sweep was created last: an audit reran an older
    check and the report still showed the other."""
    import time
    from dataclasses import replace

    from sweeper import api
    from sweeper.transfer.run import _store_result, stored_transfers
    from tests.sweeper.helpers import write_csv

    url = f"sqlite:///{tmp_path / 't.db'}"
    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    res = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    csv = write_csv(sweep_runs.head(3), tmp_path / "r.csv")
    for name in ("syn.transfer.a", "syn.transfer.b"):  # b created last
        api.import_runs(csv, sweep=name, storage=url)
    _store_result("syn.transfer.b", url, replace(res, holdout_cell="b"))
    time.sleep(0.01)
    _store_result("syn.transfer.a", url, replace(res, holdout_cell="a"))  # a rerun, stored last
    assert stored_transfers("syn", url)[0]["holdout_cell"] == "a"


def test_the_report_shows_every_stored_check(sweep_runs: pd.DataFrame, tmp_path) -> None:
    """A sweep checked at two held-out cells showed only the check stored last in its report."""
    from dataclasses import replace

    from sweeper import api
    from sweeper.transfer.run import _store_result, stored_transfers
    from tests.sweeper.helpers import write_csv

    url = f"sqlite:///{tmp_path / 't.db'}"
    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    res = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    api.import_runs(write_csv(sweep_runs, tmp_path / "all.csv"), sweep="syn", storage=url)
    csv = write_csv(sweep_runs.head(3), tmp_path / "r.csv")
    for cell in ("w1", "w2"):
        api.import_runs(csv, sweep=f"syn.transfer.{cell}", storage=url)
        _store_result(f"syn.transfer.{cell}", url, replace(res, holdout_cell=cell))
    assert [t["holdout_cell"] for t in stored_transfers("syn", url)] == ["w2", "w1"]
    # a notebook shows the verdict, not 5k characters of fields (an API audit)
    shown = repr(res)
    assert shown.startswith(f"TransferResult(syn: {res.holdout_cell} held out, ") and len(shown) < 400
    assert f"regret {res.regret_pct:+.2f}%" in shown
    api.write_report("syn", tmp_path / "rep", storage=url)
    page = (tmp_path / "rep" / "index.html").read_text()
    assert page.index("Transfer check: held-out cell w2") < page.index("held-out cell w1")
    assert page.count("<h2>Transfer check, held-out cell") == 2 * (res.law is not None) + 2
    assert (tmp_path / "rep" / "transfer_holdout_cell_2.png").is_file()


class _Tty(io.StringIO):
    """A terminal's stderr (rich would draw a live table on it)."""

    def isatty(self) -> bool:
        return True


def test_a_json_check_keeps_stdout_for_the_json_and_says_its_progress_on_stderr(
    sweep_runs: pd.DataFrame, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --json a check that trained for minutes said nothing at all: its progress was turned
    off with the table (an audit). It goes to stderr, a line per finished run (never the live
    table, even on a terminal), and stdout holds the JSON alone."""
    import sys

    from rich.console import Console

    from sweeper import api, cli

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=50)
    res = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    seen: dict[str, object] = {}

    def check(sweep: str, **kw: object) -> object:  # (as a launch's progress prints: stdout)
        seen.update(kw, live=Console().is_terminal)
        Console().print("syn.transfer.x/w1: 1/9 done; best -")
        return res

    monkeypatch.setattr(api, "validate_transfer", check)
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(["validate-transfer", "syn", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["holdout_cell"] == res.holdout_cell
    assert "1/9 done" in err.getvalue() and seen["progress"] is True and seen["live"] is False


def test_a_json_check_announces_its_cost_on_stderr(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    from sweeper import cli

    url, calls, _, _ = stopped_check
    code = cli.main(["validate-transfer", "q", "--holdout", "w192-d2-t819k", "--seeds", "1",
                     "--storage", url, "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert calls and code == 130 and out == ""
    assert "validate-transfer: w192-d2-t819k: " in err and "core-seconds each" in err


def test_the_cost_of_a_run_is_estimated_from_the_sweeps_own_runs(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    """Holding out w32 announced 2.48 core-seconds a run where its runs had taken 24 s: the
    largest cell's time scaled down by N·D, as if a small cell had no fixed cost per step (an
    audit). A cell of the sweep costs what its runs cost; one between two cells, their times
    interpolated in log N·D; only beyond the largest is the time scaled by N·D."""
    from sweeper import cli

    url, _, _, repo = stopped_check
    data = pd.read_csv(repo / "docs/data/quickstart.csv")
    by = data.groupby("cell").agg(nd=("n_params", "first"), wall=("wall_s", "median"))
    by["nd"] *= 819200
    cli.main(["validate-transfer", "q", "--holdout", "w32-d2-t819k", "--seeds", "1",
              "--storage", url])  # fmt: skip
    err = capsys.readouterr().err
    assert f"about {by.loc['w32-d2-t819k', 'wall']:.3g} core-seconds each" in err, err
    assert "the median of w32-d2-t819k's 18 runs in the sweep" in err
    from sweeper.transfer.holdout import HeldCell
    from sweeper.transfer.run import _run_cost as run_cost

    def held(n_params: float) -> HeldCell:
        return HeldCell("new", 80, 2, 819200.0, n_params, 0.0, 0.0, 128, 32, False)

    runs = data.assign(state="COMPLETE")
    lo, hi = by.loc["w64-d2-t819k"], by.loc["w96-d2-t819k"]
    mid = math.sqrt(lo["nd"] * hi["nd"]) / 819200
    each, basis = run_cost(runs, held(mid))  # type: ignore[misc]
    assert each == pytest.approx(math.sqrt(lo["wall"] * hi["wall"]))
    assert "interpolated" in basis and "w64-d2-t819k" in basis and "w96-d2-t819k" in basis
    top = by.loc["w128-d2-t819k"]
    each, basis = run_cost(runs, held(4 * top["nd"] / 819200))  # type: ignore[misc]
    assert each == pytest.approx(4 * top["wall"]) and "scaled by N·D" in basis
    each, basis = run_cost(runs, held(10.0))  # type: ignore[misc]
    assert each == pytest.approx(by.loc["w32-d2-t819k", "wall"]) and "smallest" in basis
    assert run_cost(runs.assign(wall_s=np.nan), held(10.0)) is None


def test_a_held_out_cell_the_study_cannot_build_is_refused_before_any_sweep(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    """--holdout w24 of a study with head_dim 16 was refused as 'sweep:width_sp (as changed in
    Python): ladder.widths: 24 is not divisible by head_dim 16' (the user changed nothing), and
    only after the check's sweep was created: status listed it, launched, 9 trials queued."""
    from sweeper import cli
    from sweeper.study import storage

    url, calls, _, _ = stopped_check
    code = cli.main(["validate-transfer", "q", "--holdout", "w24-d2-t819k", "--seeds", "1",
                     "--storage", url])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and not calls, err
    assert "holdout (--holdout) w24-d2-t819k: the held-out cell is not valid for the study" in err
    assert "24 is not divisible by head_dim 16" in err and "changed in Python" not in err
    assert "core-seconds" not in err  # (refused before the cost of training it is said)
    assert [r["name"] for r in storage.list_sweeps(url)] == ["q"]


def test_published_baselines_at_a_byte_level_cell_say_they_took_bytes_as_tokens(
    sweep_runs: pd.DataFrame,
) -> None:
    """compare and check say that a byte-level sweep's D is not a published law's tokens; the
    check evaluated Step Law, DeepSeek and Porian at the cell's bytes with no word (an audit).
    The values stay (committed evidence); the note says what they are."""
    from rich.console import Console

    from sweeper.cli.report import _print_transfer_tail
    from sweeper.fitting.conventions import Conventions

    res = {}
    for unit in ("bytes", "tokenizer:gpt2"):
        conv = Conventions(tokens=unit)
        plan = plan_transfer(sweep_runs, sweep="syn", n_boot=50, conventions=conv)
        res[unit] = summarize_transfer(plan, sweep_runs, _trained(plan, {"law": [2.0, 2.02]}))
    (note,) = [n for n in res["bytes"].notes if "bytes taken as tokens" in n]
    assert not any("bytes taken as tokens" in n for n in res["tokenizer:gpt2"].notes)
    assert "Step Law, DeepSeek LLM and Porian et al. count D" in note
    assert note in res["bytes"].to_dict()["notes"]
    c = Console(record=True, width=1000)
    _print_transfer_tail(c, res["bytes"])
    assert note in c.export_text()


def test_one_seed_has_no_spread_to_show(sweep_runs: pd.DataFrame) -> None:
    """--seeds 1 printed 'loss (mean of 1 seeds)' and 'sd 0.0000' for every point."""
    from rich.console import Console

    from sweeper.cli.report import _transfer_table

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=50)
    one = _trained(plan, {"law": [2.0]})
    one = one[one["seed"] == 0]
    res = summarize_transfer(plan, sweep_runs, one)
    assert res.seeds == 1
    c = Console(record=True, width=200)
    c.print(_transfer_table(res))
    text = c.export_text()
    assert "1 seeds" not in text and "loss (1 seed)" in text and "0.0000" not in text
    law = next(line for line in text.splitlines() if "law prediction (recommended)" in line)
    assert "2.0000" in law and " - " in law


def test_a_held_out_cell_that_is_no_proxy_is_refused_before_training(
    stopped_check, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped budget (t819000000k: 19 years a run) went straight to training (an API
    audit); a run estimated above MAX_RUN_CORE_S is refused, and nothing trains."""
    from sweeper import cli

    url, calls, _, _ = stopped_check
    code = cli.main(["validate-transfer", "q", "--holdout", "w256-d2-t819000000k", "--seeds", "1",
                     "--storage", url])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "that is no proxy run; check the cell's name" in err, err
    assert "core-days" in err and not calls


def test_a_fit_cell_the_law_left_out_is_not_named_measured_from_or_reused(
    sweep_runs: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transfer audit: a surface law had kept a fit-set cell out of its fit (its runs only a
    bound), yet the check named it among the fitted cells, measured the extrapolation from it and
    reused its optimum as the largest fitted cell's, beside a law of one cell fewer."""
    from dataclasses import replace as dc_replace

    from sweeper.transfer import plan as tp

    real = tp._fit_law
    cells = sorted(set(sweep_runs["cell"]), key=lambda c: sweep_runs.loc[
        sweep_runs["cell"] == c, "n_params"].iloc[0])  # fmt: skip
    largest_fit = cells[-2]  # (the largest is held out)

    def without_largest(*a, **k):  # type: ignore[no-untyped-def]
        law = real(*a, **k)
        return dc_replace(law, cell_optima={c: v for c, v in law.cell_optima.items()
                                            if c != largest_fit})  # fmt: skip

    monkeypatch.setattr(tp, "_fit_law", without_largest)
    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=0)
    assert largest_fit not in plan.fit_cells and plan.unfitted == (largest_fit,)
    n_held = plan.holdout.n_params
    n_third = float(sweep_runs.loc[sweep_runs["cell"] == cells[-3], "n_params"].iloc[0])
    assert plan.extrapolation["n_params"] == pytest.approx(n_held / n_third)
    notes = tp._law_doubts(plan)
    assert any(f"left out of the law's fit, its runs only a bound on the optimum: {largest_fit}"
               in n for n in notes)  # fmt: skip


def test_the_announced_runs_count_each_lrs_seeds_not_yet_finished(
    sweep_runs: pd.DataFrame, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transfer audit: a resumed check announced 4 runs and trained 6, and one given more
    seeds announced none and trained 9: an LR with any stored run had counted as done."""
    from types import SimpleNamespace

    from sweeper.transfer.run import _say_cost

    plan = plan_transfer(sweep_runs, sweep="syn", n_boot=100)
    lrs = sorted(set(plan.lrs.values()))
    sw: Any = SimpleNamespace(spec=None)
    one = pd.DataFrame({"lr": [lrs[0], lrs[1], lrs[1]], "seed": [0, 0, 1],
                        "state": ["COMPLETE", "COMPLETE", "RUNNING"]})  # fmt: skip
    _say_cost(sw, plan, sweep_runs, {"b": one}, 2)
    err = capsys.readouterr().err
    assert f"{2 * len(lrs) - 2} run(s) to train first, at {len(lrs)} LR(s) of 2 seeds" in err
    done = pd.DataFrame({"lr": lrs * 2, "seed": [0] * len(lrs) + [1] * len(lrs),
                         "state": "COMPLETE"})  # fmt: skip
    _say_cost(sw, plan, sweep_runs, {"b": done}, 2)
    assert capsys.readouterr().err == ""
    _say_cost(sw, plan, sweep_runs, {"b": done}, 3)
    assert f"{len(lrs)} run(s) to train first" in capsys.readouterr().err

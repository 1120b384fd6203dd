"""A verbs audit's findings: validate-transfer's words for a cell below the fitted range,
compare's exponent labels, measured optima and titles, diff's notes, seeds and LR meanings,
check's and compare's messages, and trial's rounded token budget."""

from __future__ import annotations

import argparse
import math
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import TargetError
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw
from sweeper.fitting.synthetic import synthetic_sweep
from sweeper.study.runs import normalize_runs

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def five_cells() -> pd.DataFrame:
    return synthetic_sweep(
        n_params=(1e6, 2e6, 4e6, 8e6, 1.6e7), tokens=(4e8,), seeds=2, noise=2e-3, seed=3
    )


def _trained(plan: Any) -> pd.DataFrame:
    """A check's runs: every planned LR trained at two seeds (losses that do not matter here)."""
    held = plan.holdout
    rows = [
        {"n_params": held.n_params, "tokens": held.tokens, "lr": lr, "batch_size": 64.0,
         "seq_len": 256.0, "loss": 3.0 + abs(math.log(lr)) / 100, "diverged": False,
         "state": "COMPLETE", "seed": float(s), "source": "transfer"}
        for lr in plan.lrs.values()
        for s in range(2)
    ]  # fmt: skip
    return normalize_runs(pd.DataFrame(rows))


# ---- 1. validate-transfer: a held-out cell below the fitted range --------------------------------
def test_a_held_out_cell_below_the_fitted_range_is_called_an_extrapolation(
    five_cells: pd.DataFrame,
) -> None:
    """`validate-transfer quickstart --holdout w32-d2-t819k` (fitted on w48..w128) printed
    "n_params 0.0628×, tokens 1× the largest fitted cell: inside the fitted range, an
    interpolation"."""
    from rich.console import Console

    from sweeper.cli.report import _print_transfer_head
    from sweeper.transfer.plan import plan_transfer, summarize_transfer

    plan = plan_transfer(five_cells, sweep="syn", holdout="N1e06-D4e08", method="parabola",
                         n_boot=50)  # fmt: skip
    assert plan.extrapolation_below == pytest.approx({"n_params": 2.0, "tokens": 1.0})
    res = summarize_transfer(plan, five_cells, _trained(plan))
    assert res.to_dict()["extrapolation_below"] == pytest.approx({"n_params": 2.0, "tokens": 1.0})
    c = Console(record=True, width=300)
    _print_transfer_head(c, res)
    text = c.export_text()
    assert "(n_params 2× below the smallest fitted cell: an extrapolation)" in text
    assert "interpolation" not in text
    assert "below the smallest fitted cell" in repr(res)


def test_transfer_where_reads_every_side_and_old_stored_checks() -> None:
    from sweeper.transfer.plan import transfer_where

    up = {"n_params": 0.5, "tokens": 1.0}
    inside = transfer_where({"extrapolation": up, "extrapolation_below": {"n_params": 0.25}})
    assert inside.endswith("the largest fitted cell: inside the fitted range, an interpolation")
    # a check stored before the field: read as it was (the largest cell's ratios alone)
    assert transfer_where({"extrapolation": up}) == inside
    far = transfer_where({"extrapolation": {"n_params": 4.0, "tokens": 1.0}})
    assert far == "n_params 4×, tokens 1× beyond the largest fitted cell"
    both = transfer_where(
        {
            "extrapolation": {"n_params": 0.1, "tokens": 3.0},
            "extrapolation_below": {"n_params": 2.5},
        }
    )
    assert both == (
        "n_params 2.5× below the smallest fitted cell, tokens 3× beyond the largest: an "
        "extrapolation"
    )


# ---- 2, 3, 7. compare ----------------------------------------------------------------------------
def _lr_law(parametrization: str, **kw: Any) -> PowerLaw:
    return PowerLaw(
        conventions=Conventions(parametrization=parametrization, base_width=64),
        target="lr",
        predictors=("n_params", "tokens"),
        source="mine",
        method="parabola",
        domain={"n_params": (1e4, 1e6), "tokens": (1e5, 1e7)},
        log_prefactor=math.log(0.01),
        exponents={"n_params": 0.1, "tokens": 0.3},
        exponents_ci={"n_params": (0.0, 0.4), "tokens": (0.1, 0.5)},
        **kw,
    )


def test_a_mup_exponent_along_the_model_size_is_not_compared_with_sp_ones() -> None:
    """`compare width_mup` marked its N exponent OUTSIDE Step Law's, beside its own note that a
    muP law's LR does not compare with SP ones."""
    from sweeper.recipe.compare import compare_exponents
    from sweeper.recipe.published import published_laws

    pub = [x for x in published_laws("steplaw").values() if x.target == "lr"]
    e = compare_exponents([_lr_law("mup")], pub).set_index("predictor")
    assert not e.at["n_params", "comparable"] and e.at["n_params", "inside"] is None
    assert e.at["n_params", "apart"] == "not comparable (muP vs SP)"
    # along D, at a fixed model, the two LRs differ by a constant: that exponent compares
    assert e.at["tokens", "comparable"] and e.at["tokens", "apart"] == ""
    sp = compare_exponents([_lr_law("sp")], pub).set_index("predictor")
    assert sp.at["n_params", "comparable"] and not sp.at["n_params", "inside"]


def _printed(law: PowerLaw, points: pd.DataFrame, published: list[Any]) -> None:
    """What ``sweeper compare`` prints of ``law`` at ``points`` beside ``published``."""
    from sweeper.cli.fitting import _print_comparison
    from sweeper.recipe.compare import compare_exponents, compare_laws

    pred = compare_laws([law], points).assign(measured_by="the per-cell parabola estimate")
    _print_comparison("s", [law], compare_exponents([law], published), pred)


_CELLS = pd.DataFrame({"point": ["c1"], "n_params": [1e5], "tokens": [1e6], "measured_lr": [0.01]})


def test_compare_prints_the_not_comparable_label(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweeper.recipe.published import published_laws

    monkeypatch.setenv("COLUMNS", "250")
    pub = [x for x in published_laws("steplaw").values() if x.target == "lr"]
    _printed(_lr_law("mup"), _CELLS, pub)
    out = capsys.readouterr().out
    assert "not comparable (muP vs SP)" in out and "OUTSIDE" not in out


def test_compare_titles_its_tables_by_their_rows_and_says_what_is_measured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compare width_sp` without --params/--tokens titled its table "lr at the cells and the
    target", with no target row; the measured column did not say which estimate it is."""
    from sweeper.recipe.compare import target_point

    monkeypatch.setenv("COLUMNS", "250")
    _printed(_lr_law("sp"), _CELLS, [])
    out = capsys.readouterr().out
    assert "lr at the cells" in [ln.strip() for ln in out.splitlines()]
    assert "and the target" not in out
    assert "measured: the per-cell parabola estimate; [low, high]" in " ".join(out.split())
    _printed(_lr_law("sp"), pd.concat([_CELLS, target_point(tokens=1e7, n_params=1e6)]), [])
    assert "lr at the cells and the target" in capsys.readouterr().out


def test_compare_measures_the_cells_as_a_surface_law_does() -> None:
    """compare's "measured" column came from the parabola per-cell estimate beside a surface
    law, whose own cell optima (the report's law plot draws those) can differ from it."""
    from sweeper.fitting._surface_law import SurfaceLaw
    from sweeper.recipe.compare import compare_sweep_laws

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(4e8,), seeds=1, seed=3)
    c1, c2, c3 = runs.groupby("cell")["n_params"].first().sort_values().index.astype(str)
    plain = PowerLaw(
        conventions=Conventions(), target="lr", predictors=("n_params",), source="s",
        method="parabola", domain={"n_params": (1e6, 1.6e7)}, log_prefactor=math.log(2.0),
        exponents={"n_params": -0.5},
    )  # fmt: skip
    surface = SurfaceLaw(**{**vars(plain), "method": "surface"},
                         cell_optima={c1: 0.123, c2: 0.0456})  # fmt: skip
    _, _, by_parabola = compare_sweep_laws(runs, [plain], [], None)
    _, _, own = compare_sweep_laws(runs, [surface], [], None)
    measured = own.set_index("point")["measured"]
    assert measured[c1] == pytest.approx(0.123) and measured[c2] == pytest.approx(0.0456)
    assert math.isnan(measured[c3])  # (a cell the surface fit left out has no optimum of it)
    assert set(own["measured_by"]) == {
        "s surface's own cell optima (a free optimum per cell in its fit)"
    }
    parabola = by_parabola.set_index("point")["measured"]
    assert parabola[c1] != pytest.approx(0.123) and np.isfinite(parabola[c3])
    assert set(by_parabola["measured_by"]) == {"the per-cell parabola estimate"}


def test_compare_asks_for_the_target_size_by_its_flags(
    capsys: pytest.CaptureFixture[str], sqlite_url: str
) -> None:
    """`compare quickstart --tokens 2e10` said "give n_params, or width and depth (or compute
    alone with a loss law)": the API's names, and a --compute compare does not take."""
    import sweeper.cli as cli

    code = cli.main(["compare", "nosuchsweep", "--tokens", "2e10", "--storage", sqlite_url])
    err = capsys.readouterr().err
    assert code == 2
    assert "a target needs --params, or --width and --depth (with --tokens)" in err


# ---- 4, 5, 6. diff -------------------------------------------------------------------------------
N6 = tuple(float(x) for x in 24 * np.geomspace(32, 256, 5) ** 2)


def _pair(exponent: float, seed: int) -> pd.DataFrame:
    mid = math.exp(float(np.mean(np.log(N6))))
    return synthetic_sweep(
        n_params=N6, tokens=(819_200.0,),
        lr_law=(0.02 * mid ** (-exponent), {"n_params": exponent}),
        lr_steps=(-4, 3), seeds=2, noise=0.003, seq_len=128, batch_size=32, seed=seed,
    )  # fmt: skip


def _diff(a: pd.DataFrame, b: pd.DataFrame, **kw: Any) -> Any:
    from sweeper.fitting.diff import diff_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diff_runs(a, b, n_boot=400, cell_boot=40, **kw)


def test_a_sweep_diffed_with_itself_has_no_spread_in_its_best_losses() -> None:
    """`diff width_sp width_sp` printed best-loss intervals [-0.054, +0.053] above "A and B hold
    the same runs: every difference is 0"."""
    a = _pair(-0.3, 5)
    same = _diff(a, a.sample(frac=1.0, random_state=2))
    assert same.same_runs and same.best_loss_differences
    for e in same.best_loss_differences.values():
        assert e.value == 0.0 and e.ci == (0.0, 0.0) and e.ci_corrected == (0.0, 0.0)


def test_swapping_a_and_b_mirrors_the_intervals() -> None:
    """B had been fitted at seed + 1: swapped, each side drew other resamples and the intervals
    moved. Each side's draws now follow its runs, whichever side it is on."""
    a, b = _pair(-0.3, 5), _pair(-0.5, 6)
    ab, ba = _diff(a, b), _diff(b, a)
    e, f = ab.exponent_differences["n_params"], ba.exponent_differences["n_params"]
    assert e.value == pytest.approx(-f.value)
    assert e.ci == pytest.approx((-f.ci[1], -f.ci[0]))
    for cell, d in ab.best_loss_differences.items():
        g = ba.best_loss_differences[cell]
        assert d.ci == pytest.approx((-g.ci[1], -g.ci[0]))
    # independent data keep independent draws: the difference is wider than either side's own
    la, lb = ab.laws
    spread = np.std(np.asarray(la.boot_coefs)[:, 1]), np.std(np.asarray(lb.boot_coefs)[:, 1])
    lo, hi = e.ci
    assert (hi - lo) / 3.92 > max(spread)


def test_sp_against_mup_says_the_lrs_mean_different_things() -> None:
    """A diff of SP against muP said only "differ in parametrization" (Muon's said "the LRs mean
    different things"), under a headline "law: moved" in the LR ratio."""
    a = _pair(-0.3, 5)
    b = a.assign(lr=a["lr"] * 8.0)  # (a muP base-width LR: another number for the same model)
    sp, mup = Conventions(parametrization="sp"), Conventions(parametrization="mup", base_width=64)
    r = _diff(a, b, conventions=(sp, mup))
    assert ("the LRs mean different things: A an SP model's LR, B a muP model's base-width LR "
            "(base width 64)") in r.notes  # fmt: skip
    assert r.law_moved
    law = r.verdicts()["law"]
    assert law.startswith("law: moved, in ") and law.endswith(
        "but A's and B's LRs mean different things (see the notes): their LR laws can differ by "
        "that alone"
    )
    plain = _diff(a, b)  # (the same LRs: no such words)
    assert "mean different things" not in plain.verdicts()["law"]
    assert not any("mean different things" in n for n in plain.notes)


def test_the_text_of_a_diff_carries_each_laws_notes() -> None:
    """--json carried laws.a.notes ("leave-one-cell-out error 1.21: the law fits poorly", ...);
    the text left them out."""
    a = _pair(-0.3, 5)
    r = _diff(a, _pair(-0.3, 6))
    la, lb = r.laws
    r = replace(r, laws=(replace(la, notes=("shared", "only A's")), replace(lb, notes=("shared",))))
    lines = r.lines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  lr laws: "))
    assert lines[at + 1 : at + 3] == ["  A's and B's lr laws: shared", "  A's lr law: only A's"]


# ---- 8. messages ---------------------------------------------------------------------------------
def test_check_says_positive_and_finite() -> None:
    from sweeper.recipe.check import CheckValues

    with pytest.raises(TargetError, match=r"must be positive and finite, got n_params=inf"):
        CheckValues(n_params=math.inf, tokens=1e6, lr=1e-3, batch_tokens=4096.0)


def test_a_recipe_of_another_parametrization_is_refused_in_the_projects_words() -> None:
    """`check width_mup --recipe gpt3-125m` said "(a mup recipe given as numbers:
    CheckValues(parametrization='mup'), --parametrization mup; force=True, --force: ...)"."""
    from sweeper.recipe.check import check_recipe
    from sweeper.recipe.published_recipes import get_recipe

    law = replace(_lr_law("mup"), predictors=("n_params",), exponents={"n_params": 0.1})
    with pytest.raises(TargetError) as e:
        check_recipe({"lr": law}, get_recipe("gpt3-125m"))
    msg = str(e.value)
    assert "CheckValues(" not in msg
    assert msg.endswith(
        "a mup law transfers only to a mup model; check a mup recipe given as numbers "
        "(parametrization='mup', --parametrization mup), or use the law anyway (force=True, "
        "--force)"
    )


def test_given_values_need_no_batch_where_no_batch_law_checks_it() -> None:
    """`check quickstart --params 2e5 --tokens 8.192e5 --lr 0.01` said it needs --batch-tokens,
    though quickstart has no batch law and the batch is not checked."""
    from sweeper.cli.recipe import _given_recipe
    from sweeper.recipe.check import CheckValues, check_recipe

    args = argparse.Namespace(
        params=2e5, tokens=8.192e5, lr=0.01, batch_tokens=None, width=None, depth=None,
        context=None, vocab=None, parametrization=None,
    )  # fmt: skip
    values = _given_recipe(args, [2e5, 8.192e5, 0.01, None])
    assert values.batch_tokens is None
    law = replace(_lr_law("sp"), conventions=Conventions(held={"batch_tokens": (4096.0, 4096.0)}))
    res = check_recipe({"lr": law}, values)
    assert res.item("lr") is not None and res.item("batch_tokens") is None
    assert res.batch_tokens is None and res.to_dict()["batch_tokens"] is None
    assert "no batch law given: the batch is not checked" in res.warnings
    assert any("gives no batch: whether it trains at the batch the lr law's cells held" in w
               for w in res.warnings)  # fmt: skip
    batch = replace(_lr_law("sp"), target="batch_tokens", source="b")
    with pytest.raises(TargetError, match=r"gives no batch_tokens \(--batch-tokens\), and the "
                       r"laws include a batch law \(b:batch_tokens\)"):  # fmt: skip
        check_recipe({"lr": law, "batch_tokens": batch}, values)
    given = CheckValues(n_params=2e5, tokens=8.192e5, lr=0.01, batch_tokens=4096.0)
    assert not any("gives no batch" in w for w in check_recipe({"lr": law}, given).warnings)


# ---- 9. trial ------------------------------------------------------------------------------------
def test_trial_says_when_the_budget_asked_is_rounded_to_whole_steps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`sweeper trial --lr 1e-3 --tokens 100` trained 4096 tokens (one step) in silence."""
    import proxy_models as pm
    from sweeper.cli.trial import _note_rounded_tokens

    hp = pm.HParams(lr=1e-3, batch_size=32)
    _note_rounded_tokens(hp, 100, 128)
    assert capsys.readouterr().err == (
        "note: --tokens 100 trains 4,096 tokens: 1 whole step of 32 sequences × 128 tokens "
        "(4,096 tokens each); training takes whole steps, at least one\n"
    )
    _note_rounded_tokens(hp, 10_000, 128)
    assert "trains 8,192 tokens: 2 whole steps of" in capsys.readouterr().err
    _note_rounded_tokens(hp, 8192, 128)  # (whole steps already: nothing to say)
    assert capsys.readouterr().err == ""

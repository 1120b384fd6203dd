"""``sweeper diff`` after an audit of "does my change move the laws?": the draws the corrected
intervals rest on, the target a law on FLOPs or shape is evaluated at, laws that count N apart,
the predictors both sides are fitted on, and the notes on what the LRs and the cells mean."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import FitError
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.diff import diff_runs
from sweeper.fitting.synthetic import synthetic_sweep
from tests.sweeper.helpers import pair_sweep


def _nd(seed: int) -> pd.DataFrame:
    """3 N × 2 D cells: N and D both vary."""
    return synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), lr_steps=(-4, 3),
                           seeds=2, seed=seed)  # fmt: skip


def _diff(a: pd.DataFrame, b: pd.DataFrame, **kw: Any) -> Any:
    kw = {"n_boot": 400, "cell_boot": 40, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diff_runs(a, b, **kw)


# ---- 1. enough draws for the corrected level --------------------------------------------------


def test_too_few_draws_for_the_corrected_level_are_refused_naming_the_bootstrap() -> None:
    """An audit: AdamW against Muon was "law: moved" at --bootstrap 40 and 100 (corrected
    [1.17, 26.6]) and not at 200: the corrected level 1 - 0.05/m was read off fewer draws than
    one in each tail. 6 cells: m = 8 quantities, 2·8/0.05 = 320 draws."""
    a, b = pair_sweep(-0.3, 1), pair_sweep(-0.3, 2)
    with pytest.raises(FitError) as e:
        _diff(a, b, n_boot=200)
    msg = str(e.value)
    assert msg.startswith("diff: n_boot (--bootstrap) 200 leaves 200 resamples per quantity")
    assert msg.endswith("(level 0.9938: 320 for one in each tail); give 320 or more")
    assert "\n" not in msg
    r = _diff(a, b, n_boot=320)
    assert r.n_quantities == 8 and r.corrected_level == pytest.approx(1 - 0.05 / 8)


# ---- 2. a law on FLOPs or shape at a given N and D --------------------------------------------


def test_a_flops_law_is_evaluated_at_the_flops_of_the_given_n_and_d() -> None:
    """An audit: with --predictors flops, --params 1e9 --tokens 2e10 labelled a ratio computed
    at the largest cell's FLOPs (7.96 either way). The FLOPs are counted as recommend counts
    them (law_scale: 6·N·D plus the attention term at a shape inferred from N)."""
    from sweeper.recipe.scale import infer_shape, law_scale

    a, b = pair_sweep(-0.3, 1), pair_sweep(-0.6, 2)
    at = {"n_params": 1e9, "tokens": 2e10}
    r = _diff(a, b, predictors=["flops"], target=at)
    width, depth = infer_shape(1e9)
    la = r.laws[0]
    want = law_scale(la, n_params=1e9, tokens=2e10, width=width, depth=depth, seq_len=128)
    assert r.target["flops"] == pytest.approx(want["flops"], rel=1e-12)
    assert r.target["flops"] > 6 * 1e9 * 2e10  # (with the attention term)
    largest = _diff(a, b, predictors=["flops"])
    assert r.target_lr_ratio.value != pytest.approx(largest.target_lr_ratio.value, rel=1e-3)
    assert any(n.startswith("the target's FLOPs 1.2") and f"{depth} layers" in n for n in r.notes)
    # a law on width cannot take a target N: refused in one line, naming the flags
    wa, wb = (x.assign(width=np.sqrt(x["n_params"] / 24)) for x in (a, b))
    with pytest.raises(FitError, match=r"^diff: the laws are fitted on width, which a target N "
                       r"\(--params\) does not give: give --width"):  # fmt: skip
        _diff(wa, wb, predictors=["width"], target=at)
    # a shape given beside N: the law on width reads it, and a FLOPs law counts it (a review:
    # diff took no --width/--depth, so a law on the shape refused every --params)
    shaped = _diff(wa, wb, predictors=["width"], target={**at, "width": 4096.0, "depth": 20.0})
    assert shaped.target["width"] == 4096.0 and shaped.target_lr_ratio is not None
    given = _diff(a, b, predictors=["flops"], target={**at, "width": 2048.0, "depth": 20.0})
    want = law_scale(la, n_params=1e9, tokens=2e10, width=2048, depth=20, seq_len=128)
    assert given.target["flops"] == pytest.approx(want["flops"], rel=1e-12)


# ---- 3. every draw, paired independently ------------------------------------------------------


def test_a_law_keeps_every_draw_the_fit_made() -> None:
    """The laws kept 1000 draws whatever n_boot: a diff's default 4000 were 1000, its corrected
    bounds ~4 draws a tail."""
    r = _diff(pair_sweep(-0.3, 1), pair_sweep(-0.3, 2), n_boot=2000)
    assert [len(law.boot_coefs) for law in r.laws] == [2000, 2000]


def test_the_two_sides_t_draws_pair_independently() -> None:
    """The t draws of a law of few cells are scrambled Sobol points: two scrambles of one
    sequence paired index by index had A's and B's draws of one sign in every pair, or of
    opposite signs, with the seed, and the difference's 95% interval 0.12 to 0.23 wide over
    seeds 0-3 here (0.20 combining the two laws' draws every which way). Paired
    independently, it is that interval."""
    a, b = pair_sweep(-0.3, 3), pair_sweep(-0.3, 4)  # 6 cells: t draws with 4 degrees of freedom
    for seed in range(4):
        r = _diff(a, b, n_boot=4000, seed=seed)
        assert all("t interval" in " ".join(law.notes) for law in r.laws)
        ea, eb = (np.asarray(law.boot_coefs)[:1000, 1] for law in r.laws)
        every = (eb[None, :] - ea[:, None]).ravel()  # (a million pairs)
        lo, hi = np.quantile(every, [0.025, 0.975])
        got = r.exponent_differences["n_params"].ci
        assert got[1] - got[0] == pytest.approx(hi - lo, rel=0.08)
        assert abs((got[0] + got[1]) - (lo + hi)) / 2 < 0.1 * (hi - lo)


# ---- 4. laws that count N apart ---------------------------------------------------------------


def test_no_ratio_at_one_n_for_laws_that_count_n_apart() -> None:
    """An audit: non-embedding against total N got a ratio at one raw N (the total-N side's
    largest cell), with a note that the other law extrapolates there. No ratio is given, and
    the verdict says why."""
    a, b = pair_sweep(-0.3, 1), pair_sweep(-0.3, 2)
    total = replace(Conventions(), n_params="total")
    r = _diff(a, b.assign(n_params=b["n_params"] * 1.4), conventions=(Conventions(), total))
    assert r.target_lr_ratio is None
    assert r.target_refused.startswith("A and B count N (A non-embedding, B total) differently")
    assert r.n_quantities == 1 + 6  # the exponent and the shared cells' best losses
    law = r.verdicts()["law"]
    assert "no optimal LR ratio at the target: A and B count N" in law
    assert any(line.startswith("  optimal lr ratio: not given: A and B count N")
               for line in r.lines())  # fmt: skip
    out = r.to_json()
    assert out["target_lr_ratio"] is None and out["target_lr"] is None
    assert out["target_refused"] == r.target_refused
    assert not any("extrapolates" in n for n in r.notes)
    assert "A and B differ in n_params: A non-embedding, B total" in r.notes


# ---- 5. the same predictors on both sides -----------------------------------------------------


def test_both_sides_are_fitted_on_the_scales_both_vary_whichever_is_a() -> None:
    """An audit: B was fitted on A's predictors: an N-and-D ladder against an N-only one was
    fitted on N alone, in silence, and in the other order refused ("tokens does not vary ...
    drop it from the predictors", naming no flag)."""
    only_n, both = pair_sweep(-0.5, 1, (1e6, 4e6, 1.6e7, 6.4e7)), _nd(2)
    ab, ba = _diff(only_n, both), _diff(both, only_n)
    for r, side in ((ab, "B"), (ba, "A")):
        assert [law.predictors for law in r.laws] == [("n_params",), ("n_params",)]
        assert any(n.startswith(f"{side}'s cells vary tokens (2e+08–8e+08), which the lr laws "
                                "leave out (fitted on n_params; --predictors chooses)")
                   for n in r.notes)  # fmt: skip
    e, f = ab.exponent_differences["n_params"], ba.exponent_differences["n_params"]
    assert e.value == pytest.approx(-f.value)
    with pytest.raises(FitError, match=r"does not vary .*drop it from the predictors \(--predi"):
        _diff(both, only_n, predictors=["n_params", "tokens"])


# ---- 7, 8. the notes on the LRs' meaning, the base shape and what the cells vary --------------


def _law(held: dict[str, tuple[float, float]], **conv: Any) -> Any:
    from sweeper.recipe.published import published_laws

    law = published_laws("steplaw")["lr"]
    c = replace(Conventions(), **conv).with_held(held)
    return replace(law, conventions=c)


def test_the_same_declared_lr_is_no_other_meaning_and_sp_has_no_base_shape() -> None:
    """An audit: a launched sweep against an import declaring the same optimizer, schedule, min
    LR and warmup read "the LRs mean different things" (their words differ), and two SP sweeps
    "B records no base_width (A 64)" (an import refuses a base shape under SP)."""
    from sweeper.fitting.diff import _notes

    launched = _law({}, parametrization="sp", base_width=64, base_depth=2)
    declared = _law({}, parametrization="sp", lr="peak LR as imported (declared: optimizer "
                    "adamw, schedule cosine, min_lr_ratio 0.1, warmup 0.1)")  # fmt: skip
    notes = _notes(launched, declared, {"n_params": 1e9}, given={})
    assert not any("mean different things" in n or "base_" in n for n in notes), notes
    muon = _law({}, parametrization="sp", optimizer="muon", lr="peak LR of Muon")
    notes = _notes(launched, muon, {"n_params": 1e9}, given={})
    assert any(n.startswith("the LRs mean different things: A 'peak AdamW") for n in notes)
    mup = _law({}, parametrization="mup", base_width=128)
    unknown = _law({}, parametrization=None, base_width=None)
    assert "A records no base_width (B 128)" in _notes(unknown, mup, {"n_params": 1e9}, given={})


def test_a_side_whose_cells_vary_depth_is_said_to_vary_it() -> None:
    """An audit: "the cells held depth elsewhere: A 2, B 1–16" for a side whose cells vary
    depth; two sides each at one other depth still read "held elsewhere"."""
    from sweeper.fitting.diff import _notes

    at2 = _law({"depth": (2.0, 2.0)})
    varied = _law({"depth": (1.0, 16.0)})
    notes = _notes(at2, varied, {"n_params": 1e9}, given={})
    assert any(n.startswith("B's cells vary depth (1–16), which the lr laws leave out")
               for n in notes), notes  # fmt: skip
    assert not any("held depth elsewhere" in n for n in notes)
    at4 = _law({"depth": (4.0, 4.0)})
    assert "the cells held depth elsewhere: A 2, B 4" in _notes(at2, at4, {"n_params": 1e9},
                                                                 given={})  # fmt: skip


def test_a_varied_batch_is_no_predictor_to_suggest() -> None:
    """A review: a batch ladder's varied batch (and a sequence length) had been named with
    "--predictors chooses", which cannot take them; only the scales a law may take are."""
    from sweeper.fitting.diff import _varied
    from sweeper.fitting.laws import PowerLaw

    held = {"batch_tokens": (137.0, 4100.0), "seq_len": (64.0, 128.0), "depth": (1.0, 16.0)}
    law = PowerLaw(target="lr", predictors=("tokens",), source="s", method="test",
                   conventions=Conventions(held=held), log_prefactor=0.0,
                   exponents={"tokens": 0.5})  # fmt: skip
    said = _varied(law)
    assert said.startswith("depth (1–16), which the lr laws leave out"), said
    assert "batch_tokens" not in said and "seq_len" not in said
    only = replace(law, conventions=Conventions(held={"batch_tokens": (137.0, 4100.0)}))
    assert _varied(only) == ""


def test_a_diffs_repr_is_one_line_and_its_str_the_text() -> None:
    """A review: the diff's repr had been its whole text (many lines in a list or a log), where
    the other results print their text and repr one line."""
    r = _diff(pair_sweep(-0.3, 1), pair_sweep(-0.3, 2), n_boot=320)
    shown = repr(r)
    assert "\n" not in shown and shown.startswith("<DiffResult ") and "8 quantities" in shown
    assert "law not shown to move" in shown or "law moved" in shown
    assert str(r).splitlines() == [*r.lines(), *(f"  note: {n}" for n in r.notes)]


def test_the_api_and_cli_take_the_targets_shape(tmp_path: Any, capsys: Any) -> None:
    """``sweeper.diff(..., width=, depth=)`` and ``sweeper diff --width --depth``: a bad value is
    refused before the storage is read, and the CLI names the flag."""
    import sweeper
    import sweeper.cli as cli
    from sweeper.errors import TargetError

    url = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(TargetError, match="width"):
        sweeper.diff("a", "b", width=0, storage=url)
    with pytest.raises(SystemExit):
        cli.main(["diff", "a", "b", "--depth", "0", "--storage", url])
    assert "--depth" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()

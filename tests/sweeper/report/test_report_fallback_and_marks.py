"""A report audit: the law a report fits when none is stored chose its predictors unlike `fit`
(N alone where D varied, a crash where N did not) and printed raw Python warnings; a target
without D was marked with a star caption but no star and doubts at a D the page made up; cells
with no finished run had a fake loss scale; narrow LR axes had ~10 overlapping labels; a bytes
page said "tokens" in its notes and left the batch edge blank; a stored loss law was shown
nowhere."""

from __future__ import annotations

import html
import re
import warnings
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper import api
from sweeper.cli import main
from sweeper.fitting import FitWarning, estimate_optima, fit_power_law, synthetic_sweep
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import LossLaw
from sweeper.report.page import ReportInputs, write_report
from sweeper.study.importer import import_runs

DATA = Path(__file__).resolve().parents[3] / "docs" / "data"


def _import(runs: pd.DataFrame, tmp_path: Path, url: str, name: str) -> str:
    csv = tmp_path / f"{name}.csv"
    runs.drop(columns=["cell"]).to_csv(csv, index=False)
    import_runs(csv, sweep=name, url=url)
    return name


def _page(out: Path) -> str:
    return html.unescape((out / "index.html").read_text())


def _notes(out: Path) -> list[str]:
    return re.findall(r"<div class='warn'>note: (.*?)</div>", _page(out))


@pytest.mark.parametrize(
    ("n_params", "tokens", "lr_law"),
    [
        ((1e6,), (1e8, 2e8, 4e8, 8e8), (2.0, {"tokens": -0.3})),  # N fixed: it had crashed
        ((1e6, 4e6), (2e8, 8e8), (2.0, {"n_params": -0.5, "tokens": -0.2})),  # D ignored
    ],
)
def test_the_law_fitted_for_the_page_is_the_one_fit_gives(
    n_params: tuple[float, ...],
    tokens: tuple[float, ...],
    lr_law: Any,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    """With no stored law the page fits the LR law as `sweeper fit --method parabola` does (its
    predictors: those that vary), and its doubts go on the page, not to stderr as Python
    warnings."""
    runs = synthetic_sweep(n_params=n_params, tokens=tokens, lr_law=lr_law, seeds=1, seed=2)
    name = _import(runs, tmp_path, sqlite_url, "s")
    out = tmp_path / "r"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert (
            main(["report", name, "-o", str(out), "--bootstrap", "40", "--storage", sqlite_url])
            == 0
        )
    assert not [w for w in caught if issubclass(w.category, FitWarning)]
    (fitted,) = api.fit(name, storage=sqlite_url, method="parabola", target="lr", store=False,
                        cell_boot=40)  # fmt: skip
    assert fitted.predictors == tuple(lr_law[1])
    page = _page(out)
    for p in fitted.predictors:
        assert (
            f"{p}: {fitted.exponents[p]:+.3f}" in page
        )  # the same law, coefficient for coefficient
    assert "no stored law: the LR law shown was fitted for this report only" in _notes(out)
    assert all(f"lr law (parabola+wls): {html.unescape(n)}" in page for n in fitted.notes)


@cache
def _two_predictor_law() -> Any:
    lr_law = (2.0, {"n_params": -0.5, "tokens": -0.15})
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), lr_law=lr_law, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_power_law(estimate_optima(runs, n_boot=0), predictors=("n_params", "tokens"),
                             n_boot=50)  # fmt: skip


def test_a_target_without_a_predictor_of_the_law_is_not_marked_nor_doubted() -> None:
    """An N-only target on a law of N and D: the caption promised a star the plot did not draw,
    and recommend's doubts were said at a D the page made up (the cells' geometric mean)."""
    from sweeper.report.build import _target_doubts
    from sweeper.report.page import _recipe_marks

    law = _two_predictor_law()
    runs = pd.DataFrame({"cell": ["c"], "batch_tokens": [1.0]})
    inputs = ReportInputs("s", runs, [], [law], target_scale={"n_params": 1e9})
    value, caption = _recipe_marks(inputs, law)
    assert value is None and "star" not in caption
    assert caption == " The target is not marked: it gives no D (--tokens), which this law needs."
    assert _target_doubts([law], {"n_params": 1e9}) == [
        "the target gives no D (--tokens), which the lr law needs: not evaluated there (no star "
        "on the law plot, no doubts said)"
    ]
    both = {"n_params": 1e9, "tokens": 2e10}
    assert (
        "The star is the law's point estimate"
        in _recipe_marks(replace(inputs, target_scale=both), law)[1]
    )


def test_a_target_without_d_on_a_law_of_n_says_which_d_its_doubts_take() -> None:
    """A law of N alone (D held by its cells) at an N-only target: recommend needs a D, the
    page takes the cells', and now says so."""
    from sweeper.report.build import _target_doubts

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(4e8,), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_power_law(estimate_optima(runs, n_boot=0), n_boot=50)
    notes = _target_doubts([law], {"n_params": 1e9})
    assert notes[0] == (
        "the target gives no D: the doubts below take D = 4e+08, the D the lr law's cells held "
        "(the law does not model D)"
    )


@cache
def _failed_cells() -> tuple[pd.DataFrame, list[Any]]:
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=4)
    cells = sorted(runs["cell"].unique())
    gone = runs["cell"] == cells[0]
    runs.loc[gone, "diverged"], runs.loc[gone, "loss"] = True, np.nan
    failed = runs["cell"] == cells[1]
    runs.loc[failed, ["state", "loss", "diverged"]] = ["FAIL", np.nan, False]
    return runs, estimate_optima(runs, n_boot=0)


def test_a_cell_with_no_finished_run_says_what_became_of_its_runs() -> None:
    """An all-diverged cell's crosses sat at "loss 0.055" on a 0.052-0.058 axis, an all-failed
    cell was an empty panel from LR 1 to 10: each now says what happened, over the LRs tried,
    without a loss scale."""
    from sweeper.report.plots import plot_loss_vs_lr

    runs, optima = _failed_cells()
    fig = plot_loss_vs_lr(runs, optima)
    by_title = {ax.get_title().split(" ")[0]: ax for ax in fig.axes if ax.get_visible()}
    for cell, what in zip(sorted(runs["cell"].unique())[:2], ("diverged", "failed"), strict=True):
        ax, lrs = by_title[cell], runs.loc[runs["cell"] == cell, "lr"]
        n = len(lrs)
        assert [t.get_text() for t in ax.texts] == [f"all {n} runs {what}"]
        assert list(ax.get_yticks()) == [] and ax.get_ylabel() == ""
        lo, hi = ax.get_xlim()
        assert lo < lrs.min() and hi > lrs.max() and hi / lo < lrs.max() / lrs.min() * 3


def test_a_bytes_page_says_bytes_in_the_fits_notes_and_shows_the_batch_edge(tmp_path: Path) -> None:
    """The batch ladder in bytes: the tables said "batch (bytes)", the reasons below them "the
    best batch 32 tokens"; and its edge column was blank for a cell left out for its batch
    edge."""
    from sweeper.report.page import _law_notes, _optima_table

    runs = pd.read_csv(DATA / "batch_ladder.csv")
    runs = runs[runs["cell"].isin(["w32-d2-t205k", "w32-d2-t410k"])]
    optima = estimate_optima(runs, n_boot=0)
    write_report(ReportInputs("b", runs, optima, [], conventions=Conventions()), tmp_path)
    page = _page(tmp_path)
    assert "the best batch 32 bytes is the smallest tried" in page
    assert re.search(r"\d tokens", page) is None
    table = _optima_table(optima, unit="bytes").set_index("cell")
    assert table.loc["w32-d2-t205k", "edge"] == "batch low"
    assert all(e in {"", "LR low", "LR high", "batch low", "batch high", "batch beyond"}
               for e in table["edge"])  # fmt: skip
    law = replace(_two_predictor_law(), notes=("top at batch 512 tokens; interior, 2048 tokens",))
    assert "top at batch 512 bytes; interior, 2048 bytes" in _law_notes([law], "bytes")[0]
    assert "512 tokens" in _law_notes([law], "tokens")[0]


def test_a_stored_loss_law_is_shown(sqlite_url: str, tmp_path: Path) -> None:
    """`fit --target loss` stored a law the page showed nowhere; now a line under the laws
    table with its formula and intervals, and the LR law is still fitted for the page."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), seed=3)
    name = _import(runs, tmp_path, sqlite_url, "l")
    loss = LossLaw(target="loss", predictors=("n_params", "tokens"), source=name,
                   method="huber-lbfgs/best", E=1.5, A=300.0, B=900.0, alpha=0.3, beta=0.3,
                   ci={"E": (1.2, 1.8), "alpha": (0.25, 0.35)}, n_points=6)  # fmt: skip
    from sweeper.fitting.store import put_law

    put_law(loss, sqlite_url)
    out = tmp_path / "r"
    assert main(["report", name, "-o", str(out), "--bootstrap", "40", "--storage", sqlite_url]) == 0
    page = _page(out)
    assert re.search(
        r"loss law #\d+ \(huber-lbfgs/best, 6 points\): L = 1\.5 \+ 300/N\^0\.3 "
        r"\+ 900/D\^0\.3 nats; 95% intervals E \[1\.2, 1\.8\]; α \[0\.25, 0\.35\]",
        page,
    )
    assert "the LR law shown was fitted for this report only" in page


def test_an_informational_law_note_is_not_a_warning_box() -> None:
    """ "surface settings: planner" says how the law was fitted and doubts nothing: it was an
    orange warning box among the doubts."""
    from sweeper.report.page import _law_notes

    law = replace(_two_predictor_law(), notes=("surface settings: planner", "fits poorly"))
    info, doubt = _law_notes([law])
    assert info.startswith("<div class='muted'>") and "surface settings: planner" in info
    assert doubt.startswith("<div class='warn'>")


def test_a_blank_batch_column_says_the_runs_carry_no_sequence_length(tmp_path: Path) -> None:
    """A report audit: runs imported without seq_len left the batch column blank in every row,
    unexplained, though their batch_size in sequences was known."""
    from sweeper.report.page import _unknown_batch_notes

    runs = pd.read_csv(DATA / "width_sp.csv")
    assert _unknown_batch_notes(runs) == []
    blind = runs.drop(columns=["seq_len"]).assign(batch_tokens=np.nan)
    (note,) = _unknown_batch_notes(blind)
    sizes = ", ".join(f"{b:g}" for b in sorted(runs["batch_size"].unique()))
    assert f"(batch_size: {sizes} sequences); sweeper import --seq-len counts it." in note
    optima = estimate_optima(blind, n_boot=0)
    write_report(ReportInputs(sweep="s", runs=blind, optima=optima, laws=[]), tmp_path)
    page = html.unescape((tmp_path / "index.html").read_text())
    assert "The batch in tokens is unknown: the runs carry no sequence length" in page


def test_the_cells_table_writes_an_interval_as_the_laws_table_does() -> None:
    """A report audit: intervals were "[a, b]" in the laws table and the recipe, "a – b" in the
    cells table."""
    from sweeper.report.page import _optima_table

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=30)
    o = next(o for o in optima if o.lr_ci)
    table = _optima_table(optima)
    got = table.loc[table["cell"] == o.cell, "lr 95% CI"].iloc[0]
    assert got == f"[{o.lr_ci[0]:.3g}, {o.lr_ci[1]:.3g}]"


def test_a_law_plots_lr_axis_is_labelled_between_its_decades() -> None:
    """A report audit: the law plot's LR axis labelled only 10^-3 and 10^-2, so the interval's
    low end (about 1.5e-4) could not be read."""
    from sweeper.report.plots import plot_law

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=30)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=60)
    fig = plot_law(optima, law)
    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    shown = [t.get_text() for t in ax.get_yticklabels()
             if t.get_text() and lo <= t.get_position()[1] <= hi]  # fmt: skip
    assert len(shown) >= 2 and any("2" in t or "5" in t for t in shown), shown


def _law_of_d(**conventions: Any) -> Any:
    """An LR law of D alone, its cells at one N (a batch ladder's)."""
    runs = synthetic_sweep(n_params=(1e6,), tokens=(1e8, 4e8, 1.6e9, 6.4e9), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_power_law(estimate_optima(runs, n_boot=0), predictors=("tokens",), n_boot=50)
    return replace(law, conventions=replace(law.conventions, **conventions))


def test_a_target_without_n_on_a_law_of_d_takes_the_cells_n_and_says_its_doubts() -> None:
    """A D-only target on a law of D alone: the page had said only that the target was not one
    recommend can read, and none of the law's doubts (an audit)."""
    from sweeper.report.build import _target_doubts

    notes = _target_doubts([_law_of_d()], {"tokens": 1e12})
    assert notes[0] == (
        "the target gives no N: the doubts below take N = 1e+06, the N the lr law's cells held "
        "(the law does not model N)"
    )
    assert any("far extrapolation" in n for n in notes[1:])
    assert not any("not one recommend can read" in n for n in notes)


def test_a_target_of_a_mup_law_is_doubted_as_mup_not_refused_as_sp() -> None:
    """The page's target took the default parametrization (sp), so every muP sweep's page said
    recommend refuses it, and offered a --parametrization that report does not take (an audit)."""
    from sweeper.report.build import _target_doubts

    law = _law_of_d(parametrization="mup", base_width=64)
    notes = _target_doubts([law], {"n_params": 1e6, "tokens": 1e12})
    assert not any("refuses" in n for n in notes), notes
    assert any("far extrapolation" in n for n in notes)
    # an SP study records its base width too: the page's target had refused it (seen in chromium)
    sp = _law_of_d(parametrization="sp", base_width=64)
    notes = _target_doubts([sp], {"n_params": 1e6, "tokens": 1e12})
    assert not any("not one recommend can read" in n for n in notes), notes
    assert any("far extrapolation" in n for n in notes)


def test_a_recipe_in_tokens_is_marked_on_a_law_in_bytes_at_its_bytes() -> None:
    """A recipe exported with --bytes-per-token 4 from a law of bytes: the page marked its 1e9
    tokens at 1e9 bytes, a star and an extrapolation 4x short of the recipe's (an audit)."""
    from sweeper.report.build import _recipe_scale

    law = _law_of_d(tokens="bytes")
    recipe = {"n_params": 1e6, "tokens": 1e9, "width": 64, "depth": 2, "seq_len": 256,
              "shape_inferred": True, "bytes_per_token": 4.0}  # fmt: skip
    assert _recipe_scale(recipe, [law])["tokens"] == 4e9
    assert _recipe_scale({**recipe, "bytes_per_token": None}, [law])["tokens"] == 1e9
    assert _recipe_scale(recipe, [])["tokens"] == 1e9


def test_the_page_fits_a_phone(tmp_path: Path) -> None:
    """A viewport tag (without it a phone lays the page out 980 px wide) and figures that keep a
    readable width in a sideways scroll instead of shrinking to the column."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=1)
    inputs = ReportInputs("s", runs, estimate_optima(runs, n_boot=0), [])
    page = (tmp_path / "r").joinpath("index.html")
    write_report(inputs, tmp_path / "r")
    text = page.read_text()
    assert "<meta name='viewport' content='width=device-width,initial-scale=1'>" in text
    assert "<div class='scroll fig'><img src=\"data:image/png;base64," in text


def test_the_pages_target_takes_the_proxies_context() -> None:
    """report has no --context: recommend's default 2048 had been doubted against the proxies'
    context on every page, a context nobody gave (a review)."""
    from sweeper.report.build import _target_doubts

    law = _law_of_d()
    law = replace(law, conventions=law.conventions.with_held({"seq_len": (128.0, 128.0)}))
    notes = _target_doubts([law], {"n_params": 1e6, "tokens": 1e12})
    assert notes and not any("context" in n for n in notes), notes

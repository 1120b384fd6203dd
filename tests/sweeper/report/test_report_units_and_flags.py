"""A user audit of the report: the star of a two-predictor law on no line, the batch law's own
cell optima missing from the cells table, a batch panel's surface curve at another batch without
a word, data counted in bytes labelled tokens, the recipe's headline putting the law's interval
around the risk-aware LR, an exponent of unknown sign unflagged, "1 runs", a table overflowing a
narrow window."""

from __future__ import annotations

import html
import math
import warnings
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from sweeper.fitting import FitWarning, estimate_optima, fit_power_law, synthetic_sweep
from sweeper.fitting.conventions import Conventions
from sweeper.report.page import ReportInputs

DATA = Path(__file__).resolve().parents[3] / "docs" / "data"
AS_IMPORTED = Conventions(tokens="as imported")


@cache
def _batch_ladder() -> tuple[pd.DataFrame, list[Any]]:
    runs = pd.read_csv(DATA / "batch_ladder.csv")
    return runs, estimate_optima(runs, n_boot=20)


@cache
def _two_predictor_law() -> tuple[list[Any], Any]:
    """Cells at two D values and the lr law ∝ N^a D^b through them."""
    lr_law = (2.0, {"n_params": -0.5, "tokens": -0.15})
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), lr_law=lr_law, seed=1)
    optima = estimate_optima(runs, n_boot=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_power_law(optima, target="lr", predictors=("n_params", "tokens"), n_boot=50)
    return optima, law


def _legend(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_two_predictor_laws_star_sits_on_a_line_drawn_at_the_targets_d() -> None:
    """Lines were drawn only at the cells' D (2e8, 8e8), the star at the target's (2e10) on
    none of them, and neither legend nor caption said which D it was at."""
    from sweeper.report.page import _recipe_marks
    from sweeper.report.plots import plot_law

    optima, law = _two_predictor_law()
    target = {"n_params": 1e8, "tokens": 2e10}
    ax = plot_law(optima, law, target_scale=target).axes[0]
    lines = [ln for ln in ax.get_lines() if "D=2e+10 bytes" in str(ln.get_label())]
    assert len(lines) == 1 and "target" in str(lines[0].get_label())
    x, y = (np.asarray(v, dtype=float) for v in lines[0].get_data())
    on_line = np.exp(np.interp(math.log(1e8), np.log(x), np.log(y)))
    assert math.isclose(on_line, law.predict(target), rel_tol=1e-3)
    assert any(t.startswith("the law at the target (D=2e+10 bytes)") for t in _legend(ax))
    # the cells' lines are still there, and a target at a cell's D adds no line of its own
    # (D in the law's unit, as its x axis says: the legend had said "tokens=", an audit)
    assert {"law at D=2e+08 bytes", "law at D=8e+08 bytes", "95% band"} <= set(_legend(ax))
    # each cell's point in its D-line's colour (all had been black), named in the legend
    assert "cell optimum (95% interval)" in _legend(ax)
    colors = {str(ln.get_label()): ln.get_color() for ln in ax.get_lines()}
    dots = {ln.get_color() for ln in ax.get_lines() if ln.get_marker() == "o"}
    assert dots == {colors["law at D=2e+08 bytes"], colors["law at D=8e+08 bytes"]}
    at_cell = plot_law(optima, law, target_scale={"n_params": 1e8, "tokens": 8e8}).axes[0]
    assert sum("D=8e+08" in t and t.startswith("law") for t in _legend(at_cell)) == 1
    inputs = ReportInputs(sweep="s", runs=pd.DataFrame(), optima=optima, laws=[law],
                          target_scale=target)  # fmt: skip
    assert "the law's line at the target's tokens 2e+10" in _recipe_marks(inputs, law)[1]


def test_the_cells_table_shows_the_surface_batch_laws_own_optima() -> None:
    """The batch law's plot draws the surface fit's own cell optima (1.4-5.7x the table's
    batch* in the batch ladder) while the table showed only the per-cell estimate; the lr law
    had its column, the batch law none."""
    from sweeper.report.page import _law_points, _optima_table

    _, optima = _batch_ladder()
    own = {o.cell: 100.0 * (i + 1) for i, o in enumerate(optima)}
    batch = SimpleNamespace(target="batch_tokens", method="surface", cell_optima=own)
    table = _optima_table(optima, [batch], unit="tokens")
    column = "batch* of the surface law (tokens)"
    assert [float(str(v).rstrip("\u00a0†")) for v in table[column]] == list(own.values())
    assert list(table.columns).index(column) == list(table.columns).index("batch* (tokens)") + 1
    assert column not in _optima_table(optima, [], unit="tokens")
    law = SimpleNamespace(target="batch_tokens", method="surface", cell_optima=own)
    text = _law_points(optima, law, table_column=column)[2]  # type: ignore[arg-type]
    assert f"the table's column '{column}'" in text


def test_a_surface_optimum_outside_the_cells_own_interval_is_marked() -> None:
    """The surface law's lr* of a cell can lie outside the cell's own 95% interval (0.0369
    beside 0.0192-0.0272 in the batch ladder) with no mark."""
    from sweeper.report.page import _html_parts, _optima_table

    _, optima = _batch_ladder()
    o = next(o for o in optima if o.lr_ci)
    lo, hi = o.lr_ci
    own = {o.cell: hi * 1.5, "other": 1.0}
    surface = SimpleNamespace(target="lr", method="surface", cell_optima=own,
                              conventions=AS_IMPORTED)  # fmt: skip
    table = _optima_table(optima, [surface], unit="tokens")
    row = table[table["cell"] == o.cell].iloc[0]
    assert row["lr* of the surface law"] == f"{hi * 1.5:.4g}\u00a0†"
    inside = _optima_table(optima, [_with_own(surface, {o.cell: (lo + hi) / 2})], unit="tokens")
    assert inside[inside["cell"] == o.cell].iloc[0]["lr* of the surface law"] == (lo + hi) / 2
    runs = pd.DataFrame({"cell": [o.cell], "batch_tokens": [1.0]})
    parts = _html_parts(ReportInputs("s", runs, optima, [surface]), [])  # type: ignore[list-item]
    page = html.unescape("\n".join(parts))
    assert "† the surface law's optimum lies outside the cell's own 95% interval" in page
    clean = "\n".join(_html_parts(ReportInputs("s", runs, optima, []), []))
    assert "† the surface" not in clean


def _with_own(law: Any, own: dict[str, float]) -> Any:
    return SimpleNamespace(**{**vars(law), "cell_optima": own})


def test_the_batch_ladders_page_shows_the_surface_batch_optima_in_bytes(tmp_path: Path) -> None:
    """The batch ladder (bytes) with its surface laws, as `sweeper report` draws it: the cells
    table has the batch law's own optima beside batch*, in bytes, and the batch law's caption
    says the points are that column."""
    from sweeper.fitting.surface import fit_surfaces
    from sweeper.report.page import write_report

    runs, optima = _batch_ladder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        laws = fit_surfaces(runs, lr_predictors=("tokens",), batch_predictors=("tokens",),
                            n_boot=0, cv=False, conventions=Conventions())  # fmt: skip
    write_report(ReportInputs("b", runs, optima, list(laws.values())), tmp_path)
    page = html.unescape((tmp_path / "index.html").read_text())
    column = "batch* of the surface law (bytes)"
    assert f"<th>batch* (bytes)</th>\n      <th>{column}</th>" in page
    assert "(tokens)" not in page
    caption = page[page.index("<h2>Optimal batch_tokens against scale</h2>") :]
    assert f"They are the table's column '{column}'" in caption.split("</p>")[0]


def test_a_batch_panels_surface_curve_says_which_batch_it_is_at() -> None:
    """On a batch sweep the panel draws the runs at one batch and the surface's curve at the
    fit's own optimal batch (``cell_loss`` takes no batch): the curve missed the runs, and only
    the caption said why. The legend now says it too; on a sweep of one batch it does not."""
    from sweeper.report.plots import plot_loss_vs_lr

    def surface_of(optima: list[Any]) -> Any:
        curves = {o.cell: (math.log(o.lr), 0.0, 0.0, 0.0, 0.0) for o in optima if o.lr}
        return SimpleNamespace(cell_curves=curves,
                               cell_loss=lambda cell, lrs: np.full(len(lrs), 2.0))  # fmt: skip

    runs, optima = _batch_ladder()
    labels = [t.get_text() for t in plot_loss_vs_lr(runs, optima, surface_of(optima)).legends[0]
              .get_texts()]  # fmt: skip
    assert "surface fit (at its own optimal batch, not the panel's)" in labels
    one = synthetic_sweep(n_params=(1e6, 4e6), tokens=(2e8,), seed=3)
    one_optima = estimate_optima(one, n_boot=0)
    fig = plot_loss_vs_lr(one, one_optima, surface_of(one_optima))
    assert "surface fit" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_data_counted_in_bytes_is_labelled_bytes() -> None:
    """A sweep of byte-level data (conventions tokens: bytes) was labelled "tokens" throughout:
    "batch* (tokens)", "training tokens D", "optimal batch (tokens)"."""
    from sweeper.report.page import _optima_table, _page_unit
    from sweeper.report.plots import data_unit, plot_batch_surface, plot_law, plot_residuals

    # (runs imported without a unit are labelled so: an audit; test_report_fixes_s26)
    assert data_unit(Conventions()) == "bytes" and data_unit(AS_IMPORTED) == "imported units"
    assert data_unit(None) == "tokens"
    runs, optima = _batch_ladder()
    assert "batch* (bytes)" in _optima_table(optima, [], unit="bytes")
    fig = plot_batch_surface(runs, optima, unit="bytes")
    assert fig is not None and fig.axes[0].get_ylabel() == "batch (bytes)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_power_law([o for o in optima if o.usable], target="batch_tokens",
                            predictors=("tokens",), n_boot=20)  # fmt: skip
    cases = ((Conventions(), "bytes", "training bytes D"),
             (AS_IMPORTED, "imported units", "training D (imported units)"))  # fmt: skip
    for conv, unit, d in cases:
        shown = replace(law, conventions=conv)
        ax = plot_law(optima, shown).axes[0]
        assert (ax.get_xlabel(), ax.get_ylabel()) == (d, f"optimal batch ({unit})")
        assert plot_residuals(optima, shown).axes[0].get_xlabel() == d
    bytes_law = replace(law, conventions=Conventions())
    assert _page_unit(ReportInputs("s", runs, optima, [bytes_law])) == "bytes"
    assert _page_unit(ReportInputs("s", runs, optima, [])) == "tokens"
    given = ReportInputs("s", runs, optima, [], conventions=Conventions())
    assert _page_unit(given) == "bytes"


def test_the_recipe_headline_puts_the_laws_interval_around_the_laws_point() -> None:
    """ "Peak LR 0.000487 (95% [0.000134, 0.00329])": the interval is the law's, around its
    point 0.000664, not around the risk-aware peak LR it was written beside."""
    import sweeper
    from sweeper.recipe.recipe import Interval
    from sweeper.report.page import _recipe_summary

    optima, _ = _two_predictor_law()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=50)
    r = sweeper.recommend([law], at=sweeper.Target(n_params=1e8, tokens=2e9))
    lo, hi = r.lr.low, r.lr.high
    same = _recipe_summary(r)
    assert same.startswith(f"Peak LR {r.lr.value:.3g} (the law's 95% interval [{lo:.3g}, ")
    assert "around" not in same
    # the batch as the recipe's table writes it, "×" (it read "x" above "×": a report audit)
    assert f"global batch {r.global_batch_sequences} × {r.seq_len} tokens" in same
    low = r.lr.value * 0.7
    moved = replace(r, lr=Interval(low, lo, hi), lr_point=r.lr.value, min_lr=low * r.min_lr_ratio)
    assert _recipe_summary(moved).startswith(
        f"Peak LR {low:.3g} (risk-aware; the law's 95% interval [{lo:.3g}, "
        f"{hi:.3g}] around its point {r.lr.value:.3g})"
    )


def test_an_exponent_whose_interval_includes_zero_is_flagged() -> None:
    """A 3-cell fit showed small leave-one-out errors beside an exponent interval that includes
    0, with no word that the exponent's sign is not known."""
    from sweeper.report.page import _laws_table

    _, law = _two_predictor_law()
    weak = replace(law, exponents_ci={"n_params": (-1.15, 0.11), "tokens": (-0.2, -0.1)})
    (cell,) = _laws_table([weak])["exponents [95% CI]"]
    n_part, d_part = cell.split("; ")
    assert n_part.endswith("(sign not determined)")
    assert "sign" not in d_part


def test_one_run_is_one_run_and_the_tables_scroll_in_a_narrow_window() -> None:
    """ "1 runs in 1 cells"; at 800 px the cells table overflowed the page."""
    from sweeper.report.page import _CSS, _html_parts

    runs = synthetic_sweep(n_params=(1e6,), tokens=(2e8,), seed=3).iloc[:1]
    page = "\n".join(_html_parts(ReportInputs("s", runs, [], []), []))
    assert "1 run in 1 cell;" in page
    assert "<div class='scroll'><table" in page
    assert ".scroll{overflow-x:auto}" in _CSS
    two = synthetic_sweep(n_params=(1e6, 4e6), tokens=(2e8,), seed=3)
    assert f"{len(two)} runs in 2 cells;" in "\n".join(
        _html_parts(ReportInputs("s", two, [], []), [])
    )


def test_trials_closed_before_training_are_not_counted_as_runs() -> None:
    """A law-sampled sweep resumed after SIGKILL read '35 runs in 3 cells' and 17 runs in w32,
    where 30 had trained: the 5 trials its relaunch closed (FAIL, never trained) were counted
    (an audit). They are now counted apart, on the page and in a cell's n_runs."""
    from sweeper.fitting.optimum import estimate_optima
    from sweeper.report.page import _html_parts

    runs = synthetic_sweep(n_params=(1e6, 4e6), tokens=(2e8,), seed=3)
    closed = runs.iloc[:3].assign(state="FAIL", loss=float("nan"), diverged=False)
    both = pd.concat([runs, closed], ignore_index=True)
    page = "\n".join(_html_parts(ReportInputs("s", both, [], []), []))
    assert f"{len(runs)} runs in 2 cells (3 more failed, closed, unfinished or pruned, not counted)" in page
    cell = runs["cell"].iloc[0]
    (o,) = [o for o in estimate_optima(both, n_boot=0) if o.cell == cell]
    assert o.n_runs == int((runs["cell"] == cell).sum())

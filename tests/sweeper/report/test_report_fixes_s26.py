"""A report audit's findings: a law of two predictors drew a labelled line and band per value of
D (15 of them, colours repeating, the legend over the target's star, the title clipped); a
surface law's cells on the edge of what they tried were drawn as plain optima; a byte-level
law's target was marked at its tokens read as bytes, without recommend's unit warning; the
report's fallback fitted the LR law alone on a batch sweep; a loss law recommend refuses was
said to be taken; a batch sweep's LR law was not said to follow the optimal batch; a batch
cell's panel hid its best point; doubts were said of values the page assumed; runs imported
without a unit were labelled tokens; a bound-only cell was only a warning box; a depth ladder's
depth was "held fixed"; an older transfer check drew no measured optimum."""

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

from sweeper.cli import main
from sweeper.fitting import FitWarning, estimate_optima, fit_power_law, synthetic_sweep
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.fit_runs import FitOptions, fit_runs
from sweeper.fitting.laws import LossLaw
from sweeper.report.page import ReportInputs
from sweeper.study.importer import import_runs

DATA = Path(__file__).resolve().parents[3] / "docs" / "data"


def _quiet_fit(optima: list[Any], **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_power_law(optima, n_boot=40, **kw)


@cache
def _many_d() -> tuple[list[Any], Any]:
    """Cells at two N and eight D, and the LR law of N and D through them."""
    law = (2.0, {"n_params": -0.5, "tokens": -0.15})
    d = tuple(1e8 * 2**k for k in range(8))
    runs = synthetic_sweep(n_params=(1e6, 4e6), tokens=d, lr_law=law, seeds=1, seed=2)
    optima = estimate_optima(runs, n_boot=0)
    return optima, _quiet_fit(optima, target="lr", predictors=("n_params", "tokens"))


@cache
def _batch_ladder() -> tuple[pd.DataFrame, list[Any], dict[str, Any]]:
    """The batch ladder (bytes), its per-cell optima and its surface laws, as `fit` gives them."""
    runs = pd.read_csv(DATA / "batch_ladder.csv")
    out = fit_runs(runs, conventions=Conventions(), source="b",
                   options=FitOptions("surface", n_boot=0))  # fmt: skip
    return runs, estimate_optima(runs, n_boot=0), {law.target: law for law in out.laws}


def _window_boxes(fig: Any, artists: list[Any]) -> list[Any]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [a.get_window_extent(renderer) for a in artists]


def test_a_law_of_many_d_values_draws_a_few_lines_a_colour_scale_and_a_legend_aside() -> None:
    """Eight values of D: at most MAX_LAW_LINES lines (and the target's), the points coloured on a
    colour bar, one band (the target's line), the legend below the axes, the title wrapped."""
    from sweeper.report.plots import plot_law

    optima, law = _many_d()
    target = {"n_params": 1e8, "tokens": 1e12}
    fig = plot_law(optima, law, target_scale=target)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith("law at")]
    assert len(lines) == 5 + 1  # (MAX_LAW_LINES and the target's)
    assert sum("(the target's)" in str(ln.get_label()) for ln in lines) == 1
    assert len(fig.axes) == 2 and "(colour)" in fig.axes[1].get_ylabel()  # the colour bar
    bands = [t.get_text() for t in ax.get_legend().get_texts() if "band" in t.get_text()]
    assert bands == ["95% band (of the line at D=1e+12 bytes)"]
    legend, axes = _window_boxes(fig, [ax.get_legend(), ax])
    assert legend.y1 <= axes.y0  # below the axes: it had covered the star
    title = ax.title
    assert "\n" in title.get_text()
    (box,) = _window_boxes(fig, [title])
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1  # (clipped at both ends, one line)
    # a law of few values of D keeps a line each, in the palette, its legend inside
    few, few_law = _two_d()
    fig = plot_law(few, few_law)
    assert sum(str(ln.get_label()).startswith("law at") for ln in fig.axes[0].get_lines()) == 2
    assert len(fig.axes) == 1


@cache
def _two_d() -> tuple[list[Any], Any]:
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), seeds=1, seed=1)
    optima = estimate_optima(runs, n_boot=0)
    return optima, _quiet_fit(optima, target="lr", predictors=("n_params", "tokens"))


def test_the_residuals_of_many_cells_name_them_apart_with_the_legend_below() -> None:
    """Sixteen cells at two N: the names ran into each other and the legend lay over points."""
    from sweeper.report.plots import plot_residuals

    optima, law = _many_d()
    fig = plot_residuals(optima, law)
    ax = fig.axes[0]
    names = [t for t in ax.texts if t.get_text() in {o.cell for o in optima}]
    boxes = _window_boxes(fig, names)
    overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]
    assert len(names) == len(optima) and overlaps == []
    legend, axes = _window_boxes(fig, [ax.get_legend(), ax])
    assert legend.y1 <= axes.y0


def test_a_narrow_panels_lr_axis_labels_at_most_four_ticks() -> None:
    """A batch-surface panel's LR axis from 2e-4 to 3e-2 had seven labels running together (and
    a loss-against-LR panel's, as narrow, six)."""
    from sweeper.report.plots import plot_batch_surface, plot_loss_vs_lr, readable_ticks

    runs = pd.read_csv(DATA / "batch_ladder.csv")
    optima = estimate_optima(runs, n_boot=40)
    for fig in (plot_batch_surface(runs, optima), plot_loss_vs_lr(runs, optima)):
        assert fig is not None
        fig.canvas.draw()
        for ax in [ax for ax in fig.axes if ax.get_xlabel() == "peak LR"]:
            lo, hi = ax.get_xlim()
            shown = [t for t in ax.get_xticklabels()
                     if t.get_text() and lo <= t.get_position()[0] <= hi]  # fmt: skip
            assert 2 <= len(shown) <= 4, (ax.get_title(), [t.get_text() for t in shown])
    assert readable_ticks(2e-4, 3e-2, 4) == [1e-3, 1e-2]
    assert len(readable_ticks(2e-4, 3e-2) or []) == 7  # (a wide axis keeps them)
    assert len(readable_ticks(1.1e-3, 9e-3, 4) or []) <= 4


def test_a_batch_sweep_without_resamples_is_still_a_batch_sweep() -> None:
    """`report --bootstrap 0` of the batch ladder: no cell has a batch interval, and the page
    drew no batch figure and said nothing of the LR law following the optimal batch."""
    from sweeper.report.page import _optima_table
    from sweeper.report.plots import plot_batch_surface

    runs, optima, _laws = _batch_ladder()
    assert all(o.batch_tokens_ci is None for o in optima)
    fig = plot_batch_surface(runs, optima)
    assert fig is not None and len([ax for ax in fig.axes if ax.get_title()]) == 6
    assert "batch* (bytes)" in _optima_table(optima, [], unit="bytes")


def test_a_surface_laws_unbracketed_cells_are_hollow_and_named() -> None:
    """The batch ladder's LR law names w32-d2-t205k (best batch the smallest tried, best LR the
    highest) and w32-d2-t819k (best LR the highest) in its notes; its plot had drawn them as
    plain optima and the cells table's edge column was blank for t819k."""
    from sweeper.report import page
    from sweeper.report.page import _law_points, _optima_table
    from sweeper.report.plots import plot_law, plot_residuals

    runs, optima, laws = _batch_ladder()
    lr = laws["lr"]
    points, _source, caption = _law_points(optima, lr)
    drafts = page._law_figures(ReportInputs("b", runs, optima, [lr]))
    assert "Hollow points" in drafts[0][3] and ", hollow as there." in drafts[1][3]
    edged = {o.cell: (o.edge, o.batch_edge) for o in points if o.on_edge}
    assert edged == {"w32-d2-t205k": ("high", "low"), "w32-d2-t819k": ("high", None)}
    assert "Hollow points" in caption
    assert "w32-d2-t819k (best LR the highest tried)" in caption
    for fig in (plot_law(points, lr), plot_residuals(points, lr)):
        dots = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "o"]
        hollow = [ln for ln in dots if ln.get_markerfacecolor() == "none"]
        assert len(hollow) == 2 and len(dots) == len(points)
    table = _optima_table(optima, list(laws.values()), unit="bytes")
    edge = dict(zip(table["cell"], table["edge"], strict=True))
    assert edge["w32-d2-t819k"] == "surface law: LR high"
    assert edge["w32-d2-t205k"] == "batch low; surface law: LR high, batch low"
    assert edge["w32-d2-t410k"] == ""
    assert page.surface_edges(lr) == {
        "w32-d2-t205k": {"batch": "low", "LR": "high"},
        "w32-d2-t819k": {"LR": "high"},
    }
    assert page.surface_edges(laws["batch_tokens"]) == {"w32-d2-t205k": {"batch": "low"}}


def _import(runs: pd.DataFrame | Path, tmp_path: Path, url: str, name: str, **kw: Any) -> str:
    if isinstance(runs, pd.DataFrame):
        csv = tmp_path / f"{name}.csv"
        runs.drop(columns=["cell"]).to_csv(csv, index=False)
        runs = csv
    import_runs(runs, sweep=name, url=url, **kw)
    return name


def _notes(out: Path) -> list[str]:
    page = (out / "index.html").read_text()
    return [html.unescape(n) for n in re.findall(r"<div class='warn'>note: (.*?)</div>", page)]


def _page(out: Path) -> str:
    return html.unescape((out / "index.html").read_text())


def test_a_byte_level_laws_target_is_converted_or_warned(sqlite_url: str, tmp_path: Path) -> None:
    """`report batch --tokens 1e8` on a byte-level law put the target at 1e8 bytes without
    recommend's unit warning, and report had no --bytes-per-token."""
    name = _import(DATA / "batch_ladder.csv", tmp_path, sqlite_url, "b",
                   conventions={"tokens": "bytes"})  # fmt: skip
    base = ["report", name, "--bootstrap", "0", "--storage", sqlite_url, "--tokens", "1e8"]
    assert main([*base, "-o", str(tmp_path / "raw")]) == 0
    raw = _notes(tmp_path / "raw")
    assert any("count D and the batch in bytes" in n and "--bytes-per-token" in n for n in raw)
    top = 6.554e6  # (the largest cell's D: the star 4x further out, at 4e8 bytes)
    assert f"at the target tokens {1e8 / top:.3g}x the largest fitted" in _page(tmp_path / "raw")
    assert main([*base, "--bytes-per-token", "4", "-o", str(tmp_path / "bpt")]) == 0
    bpt = _notes(tmp_path / "bpt")
    assert any("converted at 4 bytes per token of the target" in n for n in bpt)
    assert f"at the target tokens {4e8 / top:.3g}x the largest fitted" in _page(tmp_path / "bpt")
    # (it converts the target's D: none given)
    none = ["report", name, "-o", str(tmp_path / "x"), "--bytes-per-token", "4"]
    assert main([*none, "--storage", sqlite_url]) == 2


def test_the_page_fits_the_batch_law_as_fit_does(sqlite_url: str, tmp_path: Path) -> None:
    """`report --method parabola` of a batch sweep with no parabola law stored fitted the LR law
    alone, the batch law dropped without a word (`fit --method parabola` gives both)."""
    name = _import(DATA / "batch_ladder.csv", tmp_path, sqlite_url, "b",
                   conventions={"tokens": "bytes"})  # fmt: skip
    out = tmp_path / "p"
    cmd = ["report", name, "--method", "parabola", "--bootstrap", "0", "-o", str(out)]
    assert main([*cmd, "--storage", sqlite_url]) == 0
    notes = _notes(out)
    assert "no stored law by parabola: the LR and batch laws shown were fitted for this report " \
        "only" in notes
    assert (out / "law_batch_tokens.png").exists() and (out / "law_lr.png").exists()
    assert "batch_tokens law: fitted over tokens" in _page(out)


def test_the_target_in_the_laws_units() -> None:
    """The star of a bytes law at D and compute times bytes per token, N as given."""
    from sweeper.report.build import _in_law_units

    _optima, law = _two_d()
    at = {"n_params": 1e8, "tokens": 1e9, "flops": 6e17}
    assert _in_law_units([law], at, 4.0) == {"n_params": 1e8, "tokens": 4e9, "flops": 2.4e18}
    assert _in_law_units([law], at, None) == at
    tokens = replace(law, conventions=Conventions(tokens="tokens", vocab_size=None))
    assert _in_law_units([tokens], at, 4.0) == at


def test_a_loss_law_recommend_refuses_is_said_to_be_refused() -> None:
    """sp_both's loss law, alpha 0.1 [-0.024, 0.75]: the page said recommend takes it to choose
    D, which recommend refuses."""
    from sweeper.report.page import _loss_law_lines

    law = LossLaw(target="loss", predictors=("n_params", "tokens"), source="s",
                  method="huber-lbfgs/best", E=0.9, A=2.4, B=7.6e10, alpha=0.1, beta=1.9,
                  ci={"alpha": (-0.024, 0.75), "beta": (1.8, 3.8)}, n_points=11)  # fmt: skip
    (line,) = _loss_law_lines([law])
    text = html.unescape(line)
    assert "recommend refuses it to choose D (or N)" in text
    assert "interval of its exponent alpha 0.1 [-0.024, 0.75] reaches 0" in text
    assert "recommend takes it" not in text
    sure = replace(law, ci={"alpha": (0.05, 0.2), "beta": (1.8, 3.8)})
    assert "recommend takes it to choose D" in html.unescape(_loss_law_lines([sure])[0])


def test_a_batch_sweeps_lr_law_says_it_follows_the_optimal_batch() -> None:
    """The batch ladder's LR law is the optimal LR at each cell's own optimal batch; neither its
    title nor its caption said so."""
    from sweeper.report import page
    from sweeper.report.plots import plot_law

    _runs, optima, laws = _batch_ladder()
    lr = laws["lr"]
    assert "at its own optimal batch" in plot_law(optima, lr).axes[0].get_title()
    flat, flat_law = _two_d()  # (no batch swept: no word of it)
    assert "batch" not in plot_law(flat, flat_law).axes[0].get_title()
    assert "along the optimal batch B*" in page._along_batch_sentence(lr, optima)
    assert page._along_batch_sentence(flat_law, flat) == ""


def test_a_batch_cells_panel_marks_its_best_point_at_another_batch() -> None:
    """w32-d2-t3.28M's panel showed its runs at batch 1024, its 2-D parabola bottoming below all
    of them, and not its best point (batch 2048)."""
    from sweeper.report.plots import plot_loss_vs_lr

    runs, optima, _laws = _batch_ladder()
    fig = plot_loss_vs_lr(runs, optima, unit="bytes")
    panel = next(ax for ax in fig.axes if ax.get_title().startswith("w32-d2-t3.28M"))
    (best,) = [ln for ln in panel.get_lines()
               if ln.get_label() == "the cell's best point, at another batch"]  # fmt: skip
    cell = runs[(runs["cell"] == "w32-d2-t3.28M") & (runs["state"] == "COMPLETE")
                & ~runs["diverged"]]  # fmt: skip
    mean = cell.groupby(["lr", "batch_tokens"])["loss"].mean()
    assert float(best.get_ydata()[0]) == pytest.approx(mean.min())
    lo, hi = panel.get_ylim()
    assert lo <= mean.min() <= hi
    assert f"batch {mean.idxmin()[1]:.4g}" in [t.get_text() for t in panel.texts]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "the cell's best point, at another batch" in legend


def test_doubts_leave_out_the_values_the_page_assumed() -> None:
    """A law of N at an N-only target: the page takes the cells' D, and had doubted "D/N 0.4",
    a D/N of its own making; a target whose shape recommend infers from N keeps recommend's
    warning beside the doubt on its depth."""
    from sweeper.report.build import _target_doubts

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(4e8,), seed=1)
    law = _quiet_fit(estimate_optima(runs, n_boot=0))
    notes = _target_doubts([law], {"n_params": 1e9})
    assert notes[0].startswith("the target gives no D: the doubts below take D = 4e+08")
    assert not any("D/N" in n for n in notes), notes
    assert any("far extrapolation" in n for n in notes)
    assert not any("shape inferred" in n for n in notes)  # (no doubt rests on it)
    conv = law.conventions
    deep = replace(law, conventions=replace(conv, held={**conv.held, "depth": (2.0, 2.0)}))
    notes = _target_doubts([deep], {"n_params": 1e9})
    assert any("does not model depth" in n and "depth 17 (its cells: 2)" in n for n in notes)
    assert any(n.startswith("at the target: shape inferred from N: 17 layers") for n in notes)
    # with D given, D/N is the target's own and is doubted
    given = _target_doubts([law], {"n_params": 1e9, "tokens": 4e8})
    assert any("D/N 0.4 (its cells" in n for n in given), given


def test_runs_imported_without_a_unit_are_labelled_so() -> None:
    """conventions tokens "as imported": D and the batch may be tokens or bytes, and were
    labelled tokens."""
    from sweeper.report.plots import axis_label, data_unit

    unit = data_unit(Conventions(tokens="as imported"))
    assert unit == "imported units"
    assert axis_label("tokens", unit) == "training D (imported units)"
    assert axis_label("batch_tokens", unit) == "optimal batch (imported units)"
    assert axis_label("tokens", "bytes") == "training bytes D"


@cache
def _bound_cell() -> tuple[list[Any], pd.DataFrame, Any]:
    """Four cells, every run of the largest diverged: the surface law's notes give its bound."""
    runs = synthetic_sweep(n_params=(1e6, 2e6, 4e6, 8e6), tokens=(4e8,), seeds=1, seed=1)
    big = runs["n_params"] == runs["n_params"].max()
    runs.loc[big, "diverged"], runs.loc[big, "loss"] = True, np.nan
    out = fit_runs(runs, conventions=Conventions(), source="d",
                   options=FitOptions("surface", n_boot=0))  # fmt: skip
    return estimate_optima(runs, n_boot=0), runs, out.laws[0]


def test_a_bound_only_cell_is_drawn_on_the_law_plot() -> None:
    """div's w128 cell (every run diverged) contradicts the law: said only in a warning box."""
    from sweeper.report import page

    optima, runs, law = _bound_cell()
    cell = "N8e06-D4e08"
    inputs = ReportInputs("d", runs, optima, [law])
    fig, _name, _title, caption = page._law_figures(inputs)[0]
    ax = fig.axes[0]
    (mark,) = [ln for ln in ax.get_lines() if ln.get_marker() == "v"]
    (n8,) = [o for o in optima if o.cell == cell]
    lr = float(mark.get_ydata()[0])
    assert lr == pytest.approx(7.74e-5, rel=1e-2) and mark.get_xdata()[0] == n8.n_params
    assert ax.get_xlim()[1] > n8.n_params and ax.get_ylim()[0] < lr
    assert cell in [t.get_text() for t in ax.texts]
    assert f"The law runs above it in {cell}" in caption
    assert page.law_bounds(law) == {cell: (pytest.approx(lr), True)}


def test_a_panel_of_no_finished_run_has_no_runs_entry_and_its_title_clears_the_crosses() -> None:
    """divonly: the diverged crosses ran into the panel's title; the legend had a "runs" entry
    for a panel that drew none."""
    from sweeper.report.plots import plot_loss_vs_lr

    runs = synthetic_sweep(n_params=(1e6,), tokens=(4e8,), seeds=1, seed=1)
    runs["diverged"], runs["loss"] = True, np.nan
    fig = plot_loss_vs_lr(runs, estimate_optima(runs, n_boot=0))
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["diverged"]
    ax = fig.axes[0]
    (crosses,) = [ln for ln in ax.get_lines() if ln.get_label() == "diverged"]
    title, marks = _window_boxes(fig, [ax.title, crosses])
    assert title.y0 >= marks.y1


def test_what_a_laws_cells_varied_is_not_said_to_be_held_fixed() -> None:
    """A depth ladder's law: "held fixed: not modelled, over the fitted cells: ... depth 1-16"."""
    from sweeper.report.page import _law_scopes

    _optima, law = _two_d()
    held = {"tokens": (8.19e5, 8.19e5), "depth": (1.0, 16.0), "seq_len": (128.0, 128.0)}
    shown = replace(law, conventions=replace(law.conventions, held=held))
    (text,) = _law_scopes([shown])
    text = html.unescape(text)
    assert "not modelled, held fixed over the fitted cells: tokens 8.19e+05; seq_len 128" in text
    assert "; varied over them: depth 1–16" in text
    assert "not modelled, over the fitted cells" not in text


def test_an_older_transfer_check_draws_its_measured_optimum() -> None:
    """A check stored before its trained points held the measured optimum (lrs without
    measured_optimum, measured_lr alone) drew none."""
    from sweeper.report import page
    from sweeper.report.plots import plot_transfer

    lrs = {"law": 2e-3, "largest_fitted": 4e-3, "steplaw": 1e-2}
    losses = {"law": 2.25, "largest_fitted": 2.21, "steplaw": 2.48}
    result = {"holdout_cell": "w352-d2-t819k", "lrs": lrs, "losses": losses,
              "measured_lr": 3.1e-3}  # fmt: skip
    fig = plot_transfer(result)
    assert fig is not None
    (line,) = [ln for ln in fig.axes[0].get_lines()
               if str(ln.get_label()).startswith("the cell's measured optimum")]  # fmt: skip
    assert line.get_xdata()[0] == pytest.approx(3.1e-3)
    # at a trained LR it is the diamond, at that point's loss
    at = plot_transfer({**result, "measured_lr": 4e-3})
    assert at is not None
    (diamond,) = [ln for ln in at.axes[0].get_lines()
                  if str(ln.get_label()).startswith("the cell's swept optimum")]  # fmt: skip
    assert (diamond.get_xdata()[0], diamond.get_ydata()[0]) == (4e-3, 2.21)
    assert "dotted black line" in page._measured_mark(result)
    assert "hollow black diamond" in page._measured_mark({**result, "measured_lr": 4e-3})

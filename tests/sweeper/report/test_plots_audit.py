"""What an audit of the report's figures found drawn wrong or unreadable, checked on the figures'
artists (no image comparison): the batch sweep's parabola at the batch of the runs it is drawn
with, the residuals' axis and scatter band, the batch figure's ticks and contour labels, and marks
that were cut off or hidden."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.fitting import estimate_optima, fit_power_law, synthetic_sweep

DATA = Path(__file__).resolve().parents[3] / "docs" / "data"


@cache
def _batch_ladder() -> tuple[pd.DataFrame, list[Any]]:
    runs = pd.read_csv(DATA / "batch_ladder.csv")
    return runs, estimate_optima(runs, n_boot=20)


def _boxes(fig: Any, texts: list[Any]) -> list[Any]:
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in texts if t.get_text()]


def _overlapping(boxes: list[Any]) -> list[tuple[int, int]]:
    return [(i, j) for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2)
            if a.overlaps(b)]  # fmt: skip


def test_a_batch_sweeps_parabola_is_drawn_at_the_batch_of_its_panels_runs() -> None:
    """The 2-D fit's curve was drawn at the cell's optimal batch (1,212 tokens in w32-d2-t3.28M)
    over the runs at the batch tried nearest it (1,024): 0.01-0.03 nats below them. It is now the
    fit's slice at the panel's batch."""
    from sweeper.report.plots import panel_runs, plot_loss_vs_lr

    runs, optima = _batch_ladder()
    fig = plot_loss_vs_lr(runs, optima)
    checked = 0
    for ax, o in zip(fig.axes, optima, strict=False):
        curves = [ln for ln in ax.get_lines() if ln.get_label() == "parabola"]
        if len(o.curve_coefs) != 6:
            continue
        shown, batch = panel_runs(runs[runs["cell"] == o.cell], o)
        assert batch is not None and not math.isclose(batch, o.batch_tokens or 0.0)
        (line,) = curves
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        np.testing.assert_allclose(y, o.curve(x, batch))
        # the panel's means within the fit's window: no further from it than from the old curve,
        # and in w32-d2-t819k (batch 512 drawn, optimal 366) within 0.01 nats (0.016 before)
        done = shown[(shown["state"] == "COMPLETE") & ~shown["diverged"]]
        mean = done.groupby("lr")["loss"].mean()
        mean = mean[(mean.index >= x.min() * 0.999) & (mean.index <= x.max() * 1.001)]
        now = np.abs(mean.to_numpy() - o.curve(mean.index.to_numpy(), batch))
        then = np.abs(mean.to_numpy() - o.curve(mean.index.to_numpy()))
        assert now.mean() <= then.mean() + 5e-4
        if o.cell == "w32-d2-t819k":
            assert now.max() < 0.01 < then.max()
        checked += 1
    assert checked == 3  # (w32-d2-t410k, -t819k, -t3.28M)


def test_a_one_panel_legend_fits_in_its_figure() -> None:
    """With one cell the legend's entries in one row spanned the whole figure: its first entry's
    marker ("runs") sat on the left edge, cut. They now wrap, clear of both edges."""
    from sweeper.report.plots import plot_loss_vs_lr

    runs = synthetic_sweep(n_params=(1e6,), tokens=(2e8,), seeds=3, seed=3)
    fig = plot_loss_vs_lr(runs, estimate_optima(runs, n_boot=20))
    fig.canvas.draw()
    (legend,) = fig.legends
    assert len(legend.get_texts()) >= 4
    box, page = legend.get_window_extent(), fig.bbox
    margin = 0.02 * page.width  # (the old legend: 3 px of 462 either side)
    assert page.x0 + margin <= box.x0 and box.x1 <= page.x1 - margin and box.y1 <= page.y1
    panel = fig.axes[0].get_tightbbox()
    assert panel is not None and not box.overlaps(panel)  # (above the panel, not over it)


def _close_cells_law() -> tuple[list[Any], Any]:
    """Four cells, the first two close in scale (their names overlapped), and the lr law."""
    runs = synthetic_sweep(n_params=(1e6, 1.15e6, 3e6, 1e7), tokens=(4e8,), seeds=2, seed=1)
    optima = estimate_optima(runs, n_boot=20)
    return optima, fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=50)


def test_the_residuals_axis_names_the_point_not_a_measurement() -> None:
    """The points can be the surface fit's own optima, not a measurement: the axis said
    "ln(measured / law)" beside a caption saying "ln(point / law)"."""
    from sweeper.report.plots import plot_residuals

    optima, law = _close_cells_law()
    assert plot_residuals(optima, law).axes[0].get_ylabel() == "ln(point / law) of lr"


def test_the_residuals_names_of_cells_close_in_scale_do_not_overlap() -> None:
    """Cells close in scale had their names written over each other (width_mup: w96, w128)."""
    from sweeper.report.plots import plot_residuals

    optima, law = _close_cells_law()
    fig = plot_residuals(optima, law)
    ax = fig.axes[0]
    names = [t for t in ax.texts if t.get_text() in {o.cell for o in optima}]
    assert len(names) == len(optima)
    assert _overlapping(_boxes(fig, names)) == []


def test_the_residuals_say_when_the_scatter_is_zero() -> None:
    """A law with τ = 0 drew no band and no legend, without a word; the legend now says so."""
    from sweeper.report.plots import plot_residuals

    optima, law = _close_cells_law()
    labels = _legend_texts(plot_residuals(optima, law).axes[0])
    assert law.residual_std > 0 and labels[0].startswith("±1 × the cells' scatter")
    none = plot_residuals(optima, replace(law, residual_std=0.0)).axes[0]
    assert _legend_texts(none) == ["scatter τ = 0: no band"]


def _legend_texts(ax: Any) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None
    return [t.get_text() for t in legend.get_texts()]


def test_the_batch_figure_ticks_the_batches_tried_and_its_contour_labels_do_not_overlap() -> None:
    """The batch axis read "3×10¹, 4×10¹, 6×10¹" where 32, 64 and 128 were tried; the contours'
    labels of a small panel ran into one blob (w32-d2-t3.28M)."""
    from sweeper.report.plots import plot_batch_surface

    runs, optima = _batch_ladder()
    fig = plot_batch_surface(runs, optima)
    assert fig is not None
    fig.canvas.draw()
    swept = [o for o in optima if o.batch_tokens_ci is not None]
    panels = [ax for ax in fig.axes if ax.get_title() in {o.cell for o in swept}]
    assert len(panels) == len(swept) == 6
    labelled = 0
    for ax in panels:
        cell = runs[(runs["cell"] == ax.get_title()) & (runs["state"] == "COMPLETE")]
        lo, hi = ax.get_ylim()
        ticks = [t for t in ax.get_yticks() if lo <= t <= hi]
        assert ticks == sorted(cell.loc[~cell["diverged"], "batch_tokens"].unique())
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"{t:,.0f}" for t in ticks]
        assert ax.yaxis.get_minorticklocs().size == 0
        labels = [t for t in ax.texts if t.get_text()]
        labelled += len(labels)
        assert _overlapping(_boxes(fig, labels)) == [], ax.get_title()
    assert labelled > 0


@pytest.mark.parametrize("spread", [1.0, 1.5], ids=["huge", "infinite"])
def test_the_target_intervals_end_beyond_the_axis_is_marked(spread: float) -> None:
    """The y axis of a law plot is kept near the optima; the target's interval ran off it with no
    mark (its upper end, 835 in the batch ladder's LR law, could not be read). That end is now an
    arrow on the axis's edge with its value."""
    from sweeper.report.plots import plot_law
    from tests.sweeper.helpers import wild_law

    optima, law, wild = wild_law(spread)
    target = {"n_params": 1e12}
    ax = plot_law(optima, wild, target_scale=target).axes[0]
    top = wild.interval(target)[1]
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("↑")] == [f"↑ {top:.3g}"]
    ups = [ln for ln in ax.get_lines() if ln.get_marker() == "^"]
    assert len(ups) == 1 and np.asarray(ups[0].get_ydata())[0] == pytest.approx(ax.get_ylim()[1])
    # an interval inside the axis has no such mark
    tame = plot_law(optima, law, target_scale={"n_params": 3e7}).axes[0]
    assert not any(t.get_text()[:1] in "↑↓" for t in tame.texts)


def test_the_measured_optimum_is_drawn_over_a_baseline_at_the_same_lr() -> None:
    """In the quickstart's transfer check the measured optimum and the largest fitted cell's
    optimum are the same LR: the brown diamond, drawn after, hid the black one. The measured
    optimum is now drawn last, on top and larger, and its legend entry names the coincidence."""
    from sweeper.report.plots import plot_transfer

    lrs = {"law": 2.15e-3, "largest_fitted": 3.4e-3, "measured_optimum": 3.4e-3, "steplaw": 1.2e-2}
    losses = {"law": 2.25, "largest_fitted": 2.21, "measured_optimum": 2.21, "steplaw": 2.48}
    result = {"holdout_cell": "w128-d2-t819k", "lrs": lrs, "losses": losses}
    fig = plot_transfer(result)
    assert fig is not None
    marks = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "D"]
    measured = [ln for ln in marks if str(ln.get_label()).startswith("the cell's swept optimum")]
    assert len(measured) == 1
    (m,) = measured
    others = [ln for ln in marks if ln is not m]
    assert all(m.get_zorder() > ln.get_zorder() for ln in others)
    assert all(m.get_markersize() > ln.get_markersize() for ln in others)
    assert m.get_markerfacecolor() == "none"
    assert m.get_label() == "the cell's swept optimum\n(= largest fitted cell's optimum)"

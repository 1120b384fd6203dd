"""The report says what it draws: a law plot's points come from the same fit as its line (or
the caption says which method they come from), the loss-against-LR caption names only the
curves drawn, and the laws section shows each law's notes (what `sweeper fit` printed)."""

from __future__ import annotations

import html
import math
import re
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweeper.cli import main
from sweeper.fitting import FitWarning, estimate_optima, fit_power_law
from sweeper.fitting.store import latest_laws
from sweeper.fitting.surface import fit_surface
from sweeper.fitting.synthetic import proxy_sweep
from sweeper.report import page as report_page
from sweeper.report.page import ReportInputs, write_report
from sweeper.study.importer import import_runs

QUICKSTART = Path(__file__).resolve().parents[3] / "docs" / "data" / "quickstart.csv"


@pytest.fixture(scope="module")
def proxy() -> tuple[pd.DataFrame, list[Any], Any]:
    """A 4-cell proxy ladder: its parabola optima (the largest cell's parabola is not convex: no
    curve) and its surface LR law."""
    runs = proxy_sweep(4, seed=1)
    optima = estimate_optima(runs, n_boot=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_surface(runs, n_boot=0, cv=False)
    return runs, optima, law


def _parabola_law(optima: list[Any]) -> Any:
    """The LR law through the usable parabola optima (its few-cells doubt is not the point)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_power_law([o for o in optima if o.usable], target="lr", n_boot=50)


def _captions(out: Path) -> dict[str, str]:
    """Each figure's title -> its caption (unescaped), read from the page's HTML."""
    page = (out / "index.html").read_text()
    fig = r"<div class='scroll fig'><img [^>]*></div>"
    found = re.findall(rf"<h2>([^<]*)</h2>{fig}<p class='muted'>(.*?)</p>", page)
    return {html.unescape(t): html.unescape(c) for t, c in found}


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Record the optima that page.<name> (a plot) is called with; it still draws."""
    calls: list[Any] = []
    real = getattr(report_page, name)

    def spy(optima: Any, *args: Any, **kw: Any) -> Any:
        calls.append(list(optima))
        return real(optima, *args, **kw)

    monkeypatch.setattr(report_page, name, spy)
    return calls


def test_a_surface_laws_plot_draws_its_own_cell_optima(
    proxy: tuple[pd.DataFrame, list[Any], Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """law_lr.png drew the parabola's optima through the surface law's line, under a caption
    ("Cell optima ... the line is the fitted power law") that did not say they came from another
    method. Its points (and the residuals') are now the surface fit's own cell optima, without
    bars (it keeps no intervals), and the caption says so; the table keeps the parabola's."""
    runs, optima, law = proxy
    assert {o.method for o in optima} == {"parabola"}
    # the two estimates differ: drawing the parabola's would not be the line's points
    assert any(abs(o.lr / law.cell_optima[o.cell] - 1) > 0.05 for o in optima)
    drawn, resid = _spy(monkeypatch, "plot_law"), _spy(monkeypatch, "plot_residuals")
    out = tmp_path / "r"
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law]), out)
    for points in (drawn[0], resid[0]):
        assert {o.cell: o.lr for o in points} == pytest.approx(dict(law.cell_optima))
        assert all(o.lr_ci is None and o.usable for o in points)
    caption = _captions(out)["Optimal lr against scale"]
    assert caption.startswith("The points are the surface fit's own cell optima")
    assert "from the same fit as the line" in caption and "no bars" in caption
    assert "(the surface fit's own cell optima)" in _captions(out)["Residuals of the lr law"]
    table = (out / "index.html").read_text()
    assert f"<td>{optima[0].lr:.4g}</td>" in table  # the per-cell table: still the parabola's

    # a cell the surface fit left out is not drawn, and the caption names it
    drawn.clear()
    partial = replace(
        law, cell_optima={c: v for c, v in law.cell_optima.items() if c != optima[0].cell}
    )
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[partial]), out)
    assert [o.cell for o in drawn[0]] == [o.cell for o in optima[1:]]
    assert (
        f"Not drawn (cells the surface fit left out): {optima[0].cell}."
        in _captions(out)["Optimal lr against scale"]
    )


def test_a_law_plots_caption_names_the_points_method_when_it_is_not_the_lines(
    proxy: tuple[pd.DataFrame, list[Any], Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A surface law stored without cell optima draws the parabola's, and says so; a parabola
    law through parabola optima says they are its own method's."""
    runs, optima, law = proxy
    drawn = _spy(monkeypatch, "plot_law")
    bare = replace(law, cell_optima={})
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[bare]), tmp_path / "a")
    assert drawn[0] == optima
    caption = _captions(tmp_path / "a")["Optimal lr against scale"]
    assert "by the per-cell parabola estimate (the table's) with their 95% intervals" in caption
    assert "not optima of the surface fit that gives the line" in caption
    assert "carries no cell optima of its own" in caption
    para = _parabola_law(optima)
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[para]), tmp_path / "b")
    caption = _captions(tmp_path / "b")["Optimal lr against scale"]
    assert caption.startswith("The points are the cells' optima by the per-cell parabola")
    assert "can disagree" not in caption and f"({para.method})" in caption


def test_the_loss_caption_names_only_the_curves_drawn(
    proxy: tuple[pd.DataFrame, list[Any], Any], tmp_path: Path
) -> None:
    """The caption said "The orange curve is the parabola" whatever was drawn; a cell without a
    fitted parabola (here the largest: not convex) has none. It now says where none is and why,
    and mentions the surface law's curve only when there is one."""
    from sweeper.report.plots import plot_loss_vs_lr

    runs, optima, law = proxy
    flat = [o.cell for o in optima if not o.curve_coefs]
    assert flat == [optima[-1].cell]  # (the case: one cell without a parabola)
    fig = plot_loss_vs_lr(runs, optima, law)
    drawn = sum(ln.get_label() == "parabola" for ax in fig.axes for ln in ax.get_lines())
    assert drawn == len(optima) - 1
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law]), tmp_path / "a")
    caption = _captions(tmp_path / "a")["Loss against LR, per cell"]
    assert f"fitted to the best LR and the LRs below it (in {drawn} of 4 cells)" in caption
    # a curve that ends still falling at the dashed line (the audit read it as a bad fit) is
    # explained: those cells are named, and only those
    falls = [o.cell for o in optima if o.curve_coefs and o.lr is not None
             and o.curve([o.lr * 1.01])[0] < o.curve([o.lr / 1.01])[0] - 1e-12]  # fmt: skip
    named = caption.split(" the curve still falls at the optimum")[0].rsplit(" In ", 1)[-1]
    assert sorted(named.split(", ")) == sorted(falls) if falls else "still falls" not in caption
    assert f"No parabola is drawn in {flat[0]} (parabola not convex" in caption
    assert "The purple curve is the surface law's joint fit" in caption

    none = [replace(o, curve_coefs=()) for o in optima]
    para = _parabola_law(optima)
    write_report(ReportInputs(sweep="s", runs=runs, optima=none, laws=[para]), tmp_path / "b")
    caption = _captions(tmp_path / "b")["Loss against LR, per cell"]
    assert "orange" not in caption and "purple" not in caption
    assert all(o.cell in caption for o in none)

    band = estimate_optima(runs, method="band", n_boot=20)
    write_report(ReportInputs(sweep="s", runs=runs, optima=band, laws=[para]), tmp_path / "c")
    caption = _captions(tmp_path / "c")["Loss against LR, per cell"]
    assert "No curve is drawn per cell: the band estimate fits none." in caption
    assert "orange" not in caption


def test_the_laws_section_shows_each_laws_notes_escaped(
    proxy: tuple[pd.DataFrame, list[Any], Any], tmp_path: Path
) -> None:
    """A law's notes ("the surface fit did not converge", "fits poorly") were printed by `sweeper
    fit` and never on the page. They are now under the laws table, HTML-escaped."""
    runs, optima, law = proxy
    noted = replace(law, notes=(*law.notes, "the surface fit did not converge (<max iter> & more)"))
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[noted]), tmp_path)
    page = (tmp_path / "index.html").read_text()
    laws = page[page.index("<h2>Laws</h2>") : page.index("<h2>Cells and their optima</h2>")]
    for note in noted.notes:
        assert f"lr law (surface): {html.escape(note)}</div>" in laws
    assert "&lt;max iter&gt; &amp; more" in laws and "<max iter>" not in page


def test_the_report_of_a_stored_surface_fit_shows_what_fit_printed(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit's case, end to end: the quickstart ladder fitted (surface, the default) and
    reported: the page carries the stored law's notes and draws the law's own cell optima."""
    import_runs(QUICKSTART, sweep="q", url=sqlite_url)
    assert main(["fit", "q", "--target", "lr", "--storage", sqlite_url]) == 0
    printed = capsys.readouterr().out
    law = latest_laws("q", sqlite_url)[0]["lr"]
    assert law.method == "surface" and law.notes
    out = tmp_path / "out"
    assert main(["report", "q", "-o", str(out), "--storage", sqlite_url]) == 0
    page = (out / "index.html").read_text()
    for note in law.notes:
        assert f"note: {note[:40]}" in printed
        assert f"lr law #{law.id} (surface): {html.escape(note)}</div>" in page
    assert _captions(out)["Optimal lr against scale"].startswith(
        "The points are the surface fit's own cell optima"
    )


def test_a_law_fitted_for_the_report_shows_the_fits_doubts(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no stored law by the method asked, the report fits one: the doubts that fit raised
    beyond the law's notes (here: runs trained on two devices), which `sweeper fit` prints, were
    dropped from the page. They are now notes at its top, and the law's own notes are shown."""
    from sweeper.fitting import synthetic_sweep

    runs = synthetic_sweep(n_params=(1e6, 3e6, 1e7, 3e7), tokens=(4e8,), seeds=2, seed=1)
    runs["device"] = ["cpu" if i % 2 else "cuda:0" for i in range(len(runs))]
    csv = tmp_path / "runs.csv"
    runs.drop(columns=["cell"]).to_csv(csv, index=False)
    import_runs(csv, sweep="synth", url=sqlite_url)
    out = tmp_path / "out"
    report = ["report", "synth", "-o", str(out), "--method", "parabola", "--storage", sqlite_url]
    assert main(report) == 0
    capsys.readouterr()
    page = html.unescape((out / "index.html").read_text())
    assert "note: no stored law by parabola: the LR law shown was fitted" in page
    assert "note: the runs were trained on cpu and cuda (" in page
    assert "lr law (parabola+wls): only 4 cells: the intervals are wide" in page
    # `sweeper fit` says the same doubt on stderr, prefixed as every diagnostic is
    assert main(["fit", "synth", "--method", "parabola", "--no-store", "--storage", sqlite_url]) == 0
    assert "sweeper: warning: the runs were trained on cpu and cuda (" in capsys.readouterr().err


def test_runs_beyond_the_loss_axis_are_drawn_on_its_edge_and_counted(
    proxy: tuple[pd.DataFrame, list[Any], Any], tmp_path: Path
) -> None:
    """A seed far above its cell's other runs fell outside the panel's loss axis and vanished
    without a mark (the audit counted 3 of 3 seeds shown as 2). It is drawn as a triangle on the
    top edge, and the caption counts such runs. The legend lists every kind of mark drawn in any
    panel (it listed the first panel's, which lacked the parabola when that cell had none)."""
    from sweeper.report.plots import plot_loss_vs_lr, runs_off_axis

    runs, optima, law = proxy
    n = runs_off_axis(runs)  # (the proxy has some already, in other cells)
    row = runs[(runs["cell"] == optima[0].cell) & (runs["state"] == "COMPLETE")].iloc[[0]]
    runs = pd.concat([runs, row.assign(loss=row["loss"] * 1.5, seed=99)], ignore_index=True)
    assert runs_off_axis(runs) == n + 1
    fig = plot_loss_vs_lr(runs, optima, law)
    marks = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "off the axis"]
    up = [ln for ln in marks if ln.get_marker() == "^"]
    assert len(up) == 1 and row["lr"].iloc[0] in up[0].get_xdata()
    assert up[0].get_ydata()[0] == pytest.approx(fig.axes[0].get_ylim()[1])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"parabola", "off the axis", "optimum"} <= set(legend)
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law]), tmp_path / "o")
    caption = _captions(tmp_path / "o")["Loss against LR, per cell"]
    assert f"{n + 1} run(s) beyond a panel's loss axis are drawn as open triangles" in caption


def test_a_batch_sweeps_panel_draws_the_runs_at_one_batch(tmp_path: Path) -> None:
    """On a batch sweep each LR panel drew the runs of every batch size on one LR axis (several
    'means' per LR, read as noise); it now draws those at the batch tried nearest the cell's
    optimal batch, names it in the title, and the caption says so."""
    from sweeper.report.plots import panel_runs, plot_loss_vs_lr

    runs = pd.read_csv(Path(__file__).resolve().parents[3] / "docs" / "data" / "batch_ladder.csv")
    runs = runs[runs["cell"].isin(["w32-d2-t410k", "w32-d2-t819k"])]
    optima = estimate_optima(runs, n_boot=0)
    for o in optima:
        shown, batch = panel_runs(runs[runs["cell"] == o.cell], o)
        assert batch is not None and set(shown["batch_tokens"]) == {batch}
        tried = runs.loc[runs["cell"] == o.cell, "batch_tokens"].unique()
        assert abs(math.log(batch / o.batch_tokens)) == min(
            abs(math.log(b / o.batch_tokens)) for b in tried
        )
    # a cell with no optimum (left out) shows the batch of its best run, not every batch
    cell = runs[runs["cell"] == optima[0].cell]
    shown, batch = panel_runs(cell, None)
    done = cell[cell["state"] == "COMPLETE"]
    assert (
        batch == done.loc[done["loss"].idxmin(), "batch_tokens"]
        and shown["batch_tokens"].nunique() == 1
    )
    fig = plot_loss_vs_lr(runs, optima, unit="bytes")  # (titles had no unit: an audit)
    assert [ax.get_title().split(" (")[0] for ax in fig.axes[:2]] == [
        f"{o.cell} at batch {panel_runs(runs[runs['cell'] == o.cell], o)[1]:.4g} bytes"
        for o in optima
    ]
    assert not any("  " in ax.get_title() for ax in fig.axes)  # (a double space before "(")
    write_report(ReportInputs(sweep="b", runs=runs, optima=optima, laws=[]), tmp_path / "b")
    caption = _captions(tmp_path / "b")["Loss against LR, per cell"]
    assert "its panel shows the runs at the batch tried nearest its optimal batch" in caption


def test_a_batch_edge_cell_is_not_captioned_as_left_out() -> None:
    """The surface leaves a cell whose best batch is on the edge of its batch range out of its
    batch law's cell optima (a bound): the caption had called it a cell the fit left out."""
    from sweeper.fitting.laws import PowerLaw
    from sweeper.fitting.methods import BATCH_EDGE_NOTE
    from sweeper.report.page import _why_missing

    law = PowerLaw(target="batch_tokens", predictors=("tokens",), method="surface", source="s",
                   notes=(f"{BATCH_EDGE_NOTE}: c1",))  # fmt: skip
    assert "on the edge of the batch range tried, a bound" in _why_missing(law)
    plain = PowerLaw(target="lr", predictors=("n_params",), method="surface", source="s")
    assert _why_missing(plain) == (
        "cells the surface fit left out"
    )

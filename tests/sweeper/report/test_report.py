"""The report renders from a small stored sweep: PNG files exist and are valid, the HTML embeds them."""

from __future__ import annotations

import base64
import html
import re
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import sweeper
from sweeper.cli import main
from sweeper.errors import FitError
from sweeper.fitting import estimate_optima, fit_power_law, synthetic_sweep
from sweeper.report.page import ReportInputs, write_report
from sweeper.study.importer import import_runs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture
def stored_sweep(tmp_path: Path, sqlite_url: str) -> tuple[str, str]:
    runs = synthetic_sweep(n_params=(1e6, 3e6, 1e7, 3e7), tokens=(4e8,), seeds=2, seed=1)
    csv = tmp_path / "runs.csv"
    runs.drop(columns=["cell"]).to_csv(csv, index=False)
    import_runs(csv, sweep="synth", url=sqlite_url)
    return "synth", sqlite_url


def test_report_cli_writes_valid_pngs_and_html_that_embeds_them(
    stored_sweep: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, url = stored_sweep
    assert (
        main(["fit", sweep, "--target", "lr", "--bootstrap", "200", "--storage", url, "--json"])
        == 0
    )
    capsys.readouterr()
    out = tmp_path / "report"
    assert main(["report", sweep, "-o", str(out), "--storage", url]) == 0
    pngs = sorted(out.glob("*.png"))
    names = {p.name for p in pngs}
    assert {"loss_vs_lr.png", "law_lr.png", "residuals_lr.png"} <= names
    for p in pngs:
        w, h = _png_size(p.read_bytes())
        assert w >= 400 and h >= 250, (p.name, w, h)
    page = (out / "index.html").read_text()
    embedded = re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)
    assert len(embedded) == len(pngs)
    for b64 in embedded:
        assert base64.b64decode(b64)[:8] == PNG_MAGIC
    titles = set(re.findall(r'title="([^"]+\.png)"', page))
    assert titles == names
    # the tables: every cell and the law's exponent appear
    for cell in {"N1e06-D4e08", "N3e07-D4e08"}:
        assert cell in page
    assert "n_params" in page and "Cells and their optima" in page


def test_report_method_picks_the_laws_shown(
    stored_sweep: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report --method` used to change only the cell optima drawn: the laws table and the law
    plot showed the latest stored law whatever its method. Now the method picks the latest
    stored law fitted by it, and one is fitted for the page (and says so) when none is."""
    sweep, url = stored_sweep
    fit = ["fit", sweep, "--target", "lr", "--method", "parabola", "--storage", url]
    assert main([*fit, "--bootstrap", "200"]) == 0
    capsys.readouterr()

    def page(*method: str) -> str:
        out = tmp_path / f"report{'-'.join(method)}"
        assert main(["report", sweep, "-o", str(out), "--storage", url, *method]) == 0
        return (out / "index.html").read_text()

    latest, same = page(), page("--method", "parabola")
    assert "parabola+wls" in latest and "parabola+wls" in same
    assert "fitted for this report only" not in latest + same
    with pytest.raises(FitError, match="unknown method 'surfce'"):  # (it wrote a page, no law)
        sweeper.write_report(sweep, tmp_path / "typo", storage=url, method="surfce")
    assert not (tmp_path / "typo").exists()
    band = page("--method", "band")
    assert "band0.0025" in band and "parabola+wls" not in band
    assert "no stored law by band: the LR law shown was fitted for this report only" in band


def _recipe(source: str = "s", **kw: object) -> sweeper.Recipe:
    """A recipe from an LR law fitted on a synthetic sweep named ``source`` (Step Law's batch
    law as the fallback: an interval of none)."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    law = fit_power_law(estimate_optima(runs, n_boot=30), target="lr",
                        predictors=("n_params",), n_boot=60, source=source)  # fmt: skip
    return sweeper.recommend([law], at=sweeper.Target(n_params=1e8, tokens=2e9), **kw)


def test_the_page_shows_the_recipe_as_recommend_prints_it(tmp_path: Path) -> None:
    """The page dumped the recipe's JSON keys (51 of them: schema, shape_inferred, lr_point...)
    and dropped the ones whose value is an object: the batch ramp-up, shown by `recommend`,
    was missing from the page."""
    from sweeper.recipe.table import recipe_rows

    r = _recipe(rampup=True)
    assert r.rampup is not None
    rows = {k: (v, note) for k, v, note in recipe_rows(r)}
    assert rows["peak LR"][1].startswith("law's [")
    assert "no interval" in rows["batch (tokens)"][1]  # (Step Law's, as published)
    assert rows["batch ramp-up"][0] == f"{r.rampup.start_sequences} → {r.global_batch_sequences}"
    assert rows["lr law"][0] == "s" and "schema" not in rows  # (an unstored law: its sweep)
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=30)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=60, source="s")
    write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law], recipe=r),
                 tmp_path / "own")  # fmt: skip
    page = html.unescape((tmp_path / "own" / "index.html").read_text())
    for k, (v, note) in rows.items():
        assert f"<td>{k}</td>" in page and f"<td>{v}</td>" in page and note in page
    assert "batch ramp-up" in page and "shape_inferred" not in page and "laws of" not in page
    # a recipe made from another sweep's laws is shown with a warning on this sweep's page
    other = ReportInputs(sweep="t", runs=runs, optima=optima, laws=[law], recipe=r)
    write_report(other, tmp_path / "other")
    page = html.unescape((tmp_path / "other" / "index.html").read_text())
    assert "this recipe was made from the laws of s, not from t's" in page
    # from published laws only, it is said too; a law of no sweep (fitted on a frame) names none
    published = sweeper.recommend("deepseek", at=sweeper.Target(n_params=1e8, tokens=2e9))
    write_report(replace(other, recipe=published), tmp_path / "pub")
    page = html.unescape((tmp_path / "pub" / "index.html").read_text())
    assert "this recipe was made from published laws only, not from t's" in page
    write_report(replace(other, recipe=_recipe(source="")), tmp_path / "frame")
    assert "made from" not in (tmp_path / "frame" / "index.html").read_text()
    assert rows["AdamW"][0].startswith("β=") and rows["parametrization"] == ("sp", "")


def test_the_page_writes_no_python_literals_and_no_star_without_a_target(tmp_path: Path) -> None:
    """A recipe's table printed "rampup|None" and "shape_inferred|True", and the law plot's caption
    promised a star at the target on a page that had no target."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=50)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=100)
    recipe = _recipe()
    bare = ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law])
    write_report(bare, tmp_path / "bare")
    page = (tmp_path / "bare" / "index.html").read_text()
    assert "The star" not in page
    # "N cells usable for the fit" read as the surface's count, which uses cells the per-cell
    # estimate leaves out (an optimum at the grid's edge)
    assert "3 with an optimum of their own (the per-cell estimate); the laws table says" in page
    targeted = ReportInputs(
        sweep="s", runs=runs, optima=optima, laws=[law], recipe=recipe,
        target_scale={"n_params": 1e9},
    )  # fmt: skip
    write_report(targeted, tmp_path / "target")
    page = html.unescape((tmp_path / "target" / "index.html").read_text())
    assert "The star is the law's point estimate at the recipe's target" in page
    assert "<td>None</td>" not in page and "<td>True</td>" not in page


def test_batch_surface_drawn_when_batch_is_swept(tmp_path: Path) -> None:
    runs = synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), batch_law=(0.5, {"tokens": 0.6}), seed=3
    )
    optima = estimate_optima(runs, n_boot=50)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=100)
    files = write_report(
        ReportInputs(
            sweep="s", runs=runs, optima=optima, laws=[law], target_scale={"n_params": 1e9}
        ),
        tmp_path,
    )
    assert (tmp_path / "batch_surface.png") in files
    assert _png_size((tmp_path / "batch_surface.png").read_bytes())[0] > 400


def test_a_report_written_over_another_removes_only_the_plots_it_no_longer_draws(
    tmp_path: Path,
) -> None:
    """A report written into a folder that held one with a batch plot had left that plot there,
    beside a page that no longer showed it (an audit); the user's own files stay."""
    swept = synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), batch_law=(0.5, {"tokens": 0.6}), seed=3
    )
    fixed = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    (tmp_path / "notes.png").write_bytes(b"mine")
    for runs in (swept, fixed):
        optima = estimate_optima(runs, n_boot=30)
        law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=60)
        files = write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law]),
                             tmp_path)  # fmt: skip
    on_disk = {p.name for p in tmp_path.iterdir()}
    assert "batch_surface.png" not in on_disk and "notes.png" in on_disk
    assert {p.name for p in files} <= on_disk and "index.html" in on_disk


def test_report_of_unknown_sweep_is_one_line_exit_2(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sweeper.study import storage

    with storage.transaction(sqlite_url):  # (a store without that sweep; a missing one is refused)
        pass
    assert main(["report", "nope", "-o", str(tmp_path / "r"), "--storage", sqlite_url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_surface_law_is_drawn_over_each_cells_runs() -> None:
    """With a surface LR law, every fitted cell's panel carries its curve; without, none does."""
    import warnings

    from sweeper.fitting import FitWarning
    from sweeper.fitting.surface import fit_surface
    from sweeper.fitting.synthetic import proxy_sweep
    from sweeper.report.plots import plot_loss_vs_lr

    runs = proxy_sweep(4, seed=1)
    optima = estimate_optima(runs, n_boot=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        law = fit_surface(runs, n_boot=0, cv=False)

    def labelled(fig: object) -> int:
        return sum(
            line.get_label() == "surface fit"
            for ax in fig.axes  # type: ignore[attr-defined]
            for line in ax.get_lines()
        )

    assert labelled(plot_loss_vs_lr(runs, optima, law)) == runs["cell"].nunique()
    assert labelled(plot_loss_vs_lr(runs, optima)) == 0


def test_the_held_out_cell_is_drawn_with_its_named_points() -> None:
    """The transfer plot marks the prediction, the baselines and the measured optimum among the
    trained points; a result without trained points draws nothing."""
    from sweeper.report.plots import plot_transfer

    result = {
        "holdout_cell": "w256-d2-t819k",
        "extrapolation_factor": 16.0,
        "extrapolation": {"n_params": 16.0, "tokens": 1.0},
        "lrs": {"law": 1e-3, "steplaw": 4.5e-3, "measured_optimum": 2.4e-3, "grid+1": 1.41e-3},
        "losses": {"law": 2.20, "steplaw": 2.16, "measured_optimum": 2.11, "grid+1": 2.15},
        "loss_sd": {"law": 0.01, "steplaw": 0.02, "measured_optimum": 0.01, "grid+1": 0.0},
    }
    fig = plot_transfer(result)
    assert fig is not None
    labels = {line.get_label() for line in fig.axes[0].get_lines()}
    assert {"law (recommended)", "Step Law", "the cell's swept optimum"} <= labels
    assert "n_params 16×, tokens 1× beyond the largest fitted cell" in fig.axes[0].get_title()
    assert plot_transfer({"lrs": {}, "losses": {}}) is None
    # a cell below the fitted range: its title had read "0.1x beyond the fitted cells"
    below = {**result, "extrapolation": {"n_params": 0.0625},
             "extrapolation_below": {"n_params": 2.25}}  # fmt: skip
    fig = plot_transfer(below)
    assert fig is not None
    assert fig.axes[0].get_title().endswith("n_params 2.25× below the smallest fitted cell: an "
                                            "extrapolation")  # fmt: skip


def test_the_transfer_sentence_says_where_the_held_out_cell_lies() -> None:
    """The page said "beyond the largest fitted cell" of a cell below the fitted range (an audit:
    the same words as validate-transfer's, from sweeper.transfer.plan.transfer_where)."""
    from sweeper.report.page import _transfer_html

    t = {"holdout_cell": "w32", "law_cells": 4, "predicted_lr": 1e-3, "measured_lr": 2e-3,
         "log2_error": -1.0, "lrs": {"law": 1e-3}, "losses": {"law": 2.2}, "best_swept_loss": 2.1,
         "extrapolation": {"n_params": 0.0625},
         "extrapolation_below": {"n_params": 2.25}}  # fmt: skip
    head = _transfer_html(t)[0]
    assert "(n_params 2.25× below the smallest fitted cell: an extrapolation)" in head
    assert "beyond" not in head


def test_the_held_out_budget_is_drawn_with_each_predicted_batch() -> None:
    from sweeper.report.plots import plot_batch_holdout

    best = {2048.0: 1.76, 4096.0: 1.74, 8192.0: 1.75}
    fig = plot_batch_holdout(
        best, {"law (surface)": 5800.0, "steplaw": 3000.0}, cell="w32-d2-t6.55M", measured=4500.0
    )
    assert fig is not None
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert {"law (surface)", "Step Law", "measured optimum"} <= set(labels)
    xs = {line.get_label(): line.get_xdata()[0] for line in fig.axes[0].get_lines()}
    assert xs["law (surface)"] == 5800.0 and xs["measured optimum"] == 4500.0
    assert "w32-d2-t6.55M" in fig.axes[0].get_title()
    assert plot_batch_holdout({}, {}, cell="x") is None


@pytest.mark.parametrize("spread", [1.0, 1.5], ids=["huge", "infinite"])
def test_a_law_whose_interval_overflows_is_still_drawn(spread: float) -> None:
    """A law fitted on few, noisy cells and extrapolated far has an interval of hundreds of
    decades (the smoke study's, 50 bootstrap draws: N^-0.58 [-7.4, +30]); matplotlib could not
    label such an axis (OverflowError, the whole report lost). The band runs off a y axis kept
    within a few decades of the optima, the law line and the target's prediction."""
    import io
    import math

    from sweeper.report.plots import BAND_DECADES, plot_law
    from tests.sweeper.helpers import wild_law

    optima, _, wild = wild_law(spread)
    target = {"n_params": 1e12}
    top = wild.interval(target)[1]
    assert top > 1e200 and (math.isfinite(top) if spread < 1.5 else math.isinf(top))
    fig = plot_law(optima, wild, target_scale=target)
    fig.savefig(io.BytesIO(), format="png")  # "huge" raised OverflowError before the axis was kept
    lo, hi = fig.axes[0].get_ylim()
    ends = [wild.predict({"n_params": x}) for x in (1e6 / 1.3, 1.3e12)]  # (the law line's)
    shown = [o.lr for o in optima if o.lr] + ends
    assert min(shown) / 10**BAND_DECADES <= lo and hi <= max(shown) * 10**BAND_DECADES * 1.01


def test_the_page_says_where_its_runs_trained() -> None:
    """bf16 on CUDA and fp32 on the CPU give different losses near the best LR: the page's header
    says which the runs record (nothing when they record none, as imported runs)."""
    from sweeper.report.page import _trained_on

    both = pd.DataFrame({"device": ["cpu", "cuda:0", None]})
    assert _trained_on(both) == ", trained on cpu (fp32) and cuda (bf16 autocast)"
    assert _trained_on(pd.DataFrame({"loss": [2.0]})) == ""


def test_a_panel_title_names_the_edge_its_optimum_is_on() -> None:
    """A cell whose batch optimum is on the smallest batch was titled "optimum on the None edge"
    (the LR's edge, None there)."""
    from sweeper.report.plots import _edge_words

    optimum = estimate_optima(synthetic_sweep(n_params=(1e6,), tokens=(2e8,), seed=3), n_boot=0)[0]
    o = replace(optimum, on_edge=True, edge=None, batch_edge="low")
    assert _edge_words(o) == "batch optimum on the low edge"
    assert _edge_words(replace(o, edge="high")) == "LR optimum on the high edge"


def _log_labels(lo: float, hi: float) -> list[str]:
    """The tick labels a report's log LR axis shows from ``lo`` to ``hi``."""
    import matplotlib.pyplot as plt

    from sweeper.report.plots import _log_ticks

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xscale("log")
    ax.plot([lo, hi], [0, 1])
    _log_ticks(ax.xaxis)
    fig.canvas.draw()
    left, right = ax.get_xlim()
    shown = [
        t.get_text()
        for t in ax.get_xticklabels()
        if t.get_text() and left <= t.get_position()[0] <= right
    ]
    plt.close(fig)
    return shown


def test_an_lr_axis_under_a_decade_labels_1_2_and_5() -> None:
    """matplotlib's formatter dropped the label at 5 × 10^-3 on an axis from 1.5e-3 to 1.1e-2
    (only 2 × 10^-3 and 10^-2 were labelled: the optima could not be read off)."""
    assert _log_labels(1.5e-3, 1.1e-2) == [
        "$\\mathdefault{2\\times10^{-3}}$", "$\\mathdefault{5\\times10^{-3}}$",
        "$\\mathdefault{10^{-2}}$",
    ]  # fmt: skip


def test_a_narrow_lr_axis_has_a_few_readable_labels() -> None:
    """A law sampler tries ~3 close LRs: matplotlib fell back to ~10 labelled ticks there, and
    its formatter wrote 3.5e-3 as "4×10⁻³"."""
    from sweeper.report.plots import _sci_label, readable_ticks

    assert _log_labels(3.4e-3, 7.3e-3) == [
        "$\\mathdefault{5\\times10^{-3}}$", "$\\mathdefault{7\\times10^{-3}}$",
    ]  # fmt: skip
    tight = readable_ticks(4.1e-3, 4.6e-3)
    assert tight is not None and 2 <= len(tight) <= 4
    assert len({_sci_label(t) for t in tight}) == len(tight)
    assert _sci_label(3.5e-3) == "$\\mathdefault{3.5\\times10^{-3}}$"


def test_the_page_says_what_the_sweep_trained() -> None:
    """Two sweeps of different techniques (a builder, a training function with its own
    optimizer) gave pages that looked alike: the head now says what was measured."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.report.build import measured_with

    assert measured_with(Conventions(parametrization="sp")) == (
        "measured with the built-in proxy under sp, the built-in loop and adamw; the LR is the "
        "peak AdamW LR, warmup 10% of steps, cosine to 10%"
    )
    own = Conventions(model_builder="m:build", train_function="m:loop", optimizer=None, lr="x")
    assert measured_with(own) == (
        "measured with model builder m:build, training function m:loop and its own optimizer "
        "(not recorded); the LR is the x"
    )
    # a training function without a builder trains its own model ("the built-in proxy" was
    # said, a law-sampler audit's MLP at a third of 12·L·d²)
    loop = Conventions(train_function="m:loop", optimizer=None, lr="x")
    assert measured_with(loop).startswith(
        "measured with the training function's own model (its N counted as 12·L·d² at each "
        "cell's shape), training function m:loop"
    )
    # runs imported without their study: nothing is known (it said "the built-in proxy")
    assert measured_with(own, imported=True).startswith(
        "imported runs: their model, loop and optimizer are not recorded"
    )


def test_the_law_plot_marks_the_lr_the_recipe_wrote_beside_the_laws_point() -> None:
    """The star is the law's point estimate; the recipe passed to the report wrote its
    risk-aware LR, 8x higher in an audit's forced recipe, and the plot did not show it."""
    from sweeper.report.plots import plot_law

    runs = synthetic_sweep(n_params=(1e6, 3e6, 1e7, 3e7), tokens=(4e8,), seeds=2, seed=1)
    optima = estimate_optima(runs, n_boot=20)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=50)
    target = {"n_params": 1e9}
    point = law.predict(target)
    fig = plot_law(optima, law, target_scale=target, recipe_value=point / 2)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(x.startswith("the law at the target") for x in labels)
    assert f"the recipe's peak LR: {point / 2:.3g}" in labels
    plain = plot_law(optima, law, target_scale=target)
    assert not any("recipe" in t.get_text() for t in plain.axes[0].get_legend().get_texts())


def test_the_page_leads_with_the_recipe_and_marks_only_its_own_lr(tmp_path: Path) -> None:
    """A report audit: a recipe made from another sweep's LR law had its peak LR drawn beside
    this sweep's law (77x apart, no word on the plot); the recipe's values sat under 11-13 warning
    boxes of equal weight, a forced one headed "Recommended"; the laws table left out where each
    law was measured and what it held fixed; a note two laws share was shown twice."""
    from sweeper.report.page import _law_notes, _recipe_marks

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=30)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=60, source="s")
    r = _recipe()
    own = ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law], recipe=r,
                       target_scale={"n_params": 1e8})  # fmt: skip
    assert _recipe_marks(own, law)[0] == r.lr.value
    value, caption = _recipe_marks(replace(own, sweep="t"), law)
    assert value is None and "the recipe's peak LR is not drawn" in caption
    write_report(own, tmp_path / "own")
    page = html.unescape((tmp_path / "own" / "index.html").read_text())
    head = page[page.index("<h2>Recommended recipe</h2>"):]
    assert head.index(f"Peak LR {r.lr.value:.3g}") < head.index("class='warn'")
    assert f"for {r.n_params:.3g} parameters" in head
    if len(r.warnings) > 4:
        assert f"{len(r.warnings) - 3} more warnings" in page
    assert "lr law: fitted over n_params 1e+06 to 1.6e+07" in page
    forced = replace(r, warnings=("lr: it does not determine the value; written anyway (forced)",))
    write_report(replace(own, recipe=forced), tmp_path / "forced")
    assert "<h2>Recipe written anyway (forced)</h2>" in (tmp_path / "forced/index.html").read_text()
    # forced onto another parametrization (its own wording) is forced too (a review)
    mup = replace(r, warnings=("lr law of sp: a sp law transfers only to a sp model (forced)",))
    write_report(replace(own, recipe=mup), tmp_path / "mup")
    assert "<h2>Recipe written anyway (forced)</h2>" in (tmp_path / "mup/index.html").read_text()
    twin = replace(law, target="batch_tokens", notes=("shared",))
    shared = _law_notes([replace(law, notes=("shared",)), twin])
    assert len(shared) == 1 and "lr law" in shared[0] and "batch_tokens law" in shared[0]


def test_a_page_without_a_law_says_why(tmp_path: Path) -> None:
    """With too few usable cells the page told the reader to run `sweeper fit`, which fails
    there too; why a cell is not usable now sits below the cells table, not in a column whose
    long text crushed it."""
    runs = synthetic_sweep(n_params=(1e6, 4e6), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=0)
    bad = replace(optima[0], usable=False, reason="its optimum is at the grid's low edge")
    write_report(ReportInputs(sweep="s", runs=runs, optima=[bad, optima[1]], laws=[],
                              notes=("no law: 1 of 2 cells have an optimum",)), tmp_path)  # fmt: skip
    page = html.unescape((tmp_path / "index.html").read_text())
    assert "run <code>sweeper fit</code>" not in page and "the note at the top says why" in page
    assert f"{bad.cell}: no optimum of its own: its optimum is at the grid's low edge" in page
    assert "<td>no (below)</td>" in page


def test_the_cells_table_shows_the_surface_laws_own_optima() -> None:
    """The law plot draws the surface law's own cell optima while the cells table showed only
    the per-cell estimate: an audit read the same cell's optimum as 0.0034 and 5.6e-3."""
    from types import SimpleNamespace

    from sweeper.report.page import _optima_table

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=0)
    own = {o.cell: 1e-3 * (i + 1) for i, o in enumerate(optima)}
    surface = SimpleNamespace(target="lr", method="surface", cell_optima=own)
    table = _optima_table(optima, [surface])
    assert list(table["lr* of the surface law"]) == list(own.values())
    assert "lr* of the surface law" not in _optima_table(optima, [])
    assert "loss at optimum" in table and "best loss" not in table


def test_a_report_leaves_the_callers_matplotlib_as_it_was(tmp_path: Path) -> None:
    """An API audit: write_report switched a notebook's backend to Agg and changed its grid, font
    size and dpi for every figure after it."""
    import matplotlib

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=0)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=0)
    keys = ("axes.grid", "font.size", "figure.dpi", "axes.spines.top")
    backend = matplotlib.get_backend()
    try:
        with matplotlib.rc_context({"backend": "svg", "axes.grid": False, "font.size": 13.0}):
            before = {k: matplotlib.rcParams[k] for k in keys}
            write_report(ReportInputs(sweep="s", runs=runs, optima=optima, laws=[law]), tmp_path)
            assert {k: matplotlib.rcParams[k] for k in keys} == before
            assert matplotlib.get_backend() == "svg"
    finally:  # (rc_context leaves a backend set in it: the rest of the run is not this test's)
        matplotlib.use(backend)
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or not pyplot.get_fignums()  # (no figure left open in pyplot)


def test_a_report_marks_a_target_without_a_recipe(
    stored_sweep: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader's audit: without --recipe-json the page said nothing of a target or of how far
    the law extrapolates to it (`report` had no --params/--tokens)."""
    sweep, url = stored_sweep
    assert main(["fit", sweep, "--target", "lr", "--method", "parabola", "--storage", url]) == 0
    out = tmp_path / "r"
    assert main(["report", sweep, "-o", str(out), "--storage", url, "--params", "3e9"]) == 0
    page = html.unescape((out / "index.html").read_text())
    assert "at the target n_params 100x the largest fitted" in page
    assert "The star is the law's point estimate at the target given" in page
    capsys.readouterr()
    recipe = tmp_path / "x.json"
    recipe.write_text("{}")
    argv = ["report", sweep, "-o", str(out), "--storage", url, "--params", "3e9"]
    assert main([*argv, "--recipe-json", str(recipe)]) == 2
    assert "give --recipe-json or --params/--tokens" in capsys.readouterr().err


def test_an_interrupted_report_leaves_the_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A robustness audit's Ctrl-C during `report -o` left an empty folder, one PNG or a truncated
    one, mixed with an earlier report's files: the files are drawn aside and moved in at the
    end."""
    from sweeper.report import page

    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8,), seed=3)
    optima = estimate_optima(runs, n_boot=30)
    inputs = ReportInputs(sweep="s", runs=runs, optima=optima, laws=[])
    out = tmp_path / "rep"
    written = page.write_report(inputs, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {p.name for p in written} | {page.MANIFEST} and "index.html" in before
    real = page._save_figures

    def interrupted(inputs: ReportInputs, where: Path) -> list[tuple[str, str, Path]]:
        real(inputs, where)
        (where / "loss_vs_lr.png").write_bytes(b"truncated")
        raise KeyboardInterrupt

    monkeypatch.setattr(page, "_save_figures", interrupted)
    with pytest.raises(KeyboardInterrupt):
        page.write_report(inputs, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # (no draft folder left)

"""The sweep report: PNG plots made with matplotlib and one self-contained ``index.html``.

Plots (one PNG each):

- ``loss_vs_lr.png``: the loss against the LR in every cell, seeds as faint points and their mean as
  a dot, diverged runs as red crosses on the top edge, the fitted parabola over its window, the
  optimum with its interval; cells whose optimum is on the edge of the range are titled so.
- ``law_<target>.png``: the optimum of every cell against scale in log-log with the fitted law, its
  95% band (the coefficients' sampling spread plus the scatter of the cells), held-out cells and the
  target marked.
- ``residuals_<target>.png``: ln(measured / law) per cell with the cells' intervals.
- ``batch_surface.png``: loss over (LR, batch size) in the cells where both were swept.

The HTML page embeds the images (base64) and holds the tables: cells, optima, laws, the recipe and
the transfer check when given. Nothing here fits: it draws what :mod:`sweeper.fit` returned.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweeper.laws import Law, PowerLaw

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sweeper.fit import CellOptimum

__all__ = ["ReportInputs", "write_report"]

_PREDICTOR_LABEL = {
    "n_params": "non-embedding parameters N",
    "tokens": "training tokens D",
    "flops": "training compute C (FLOPs)",
    "width": "width (d_model)",
    "depth": "depth (layers)",
}
_TARGET_LABEL = {"lr": "optimal peak LR", "batch_tokens": "optimal batch (tokens)"}


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report shows. ``target_scale`` is the big run's scale (predictor → value)."""

    sweep: str
    runs: pd.DataFrame
    optima: Sequence[CellOptimum]
    laws: Sequence[Law]
    recipe: Mapping[str, Any] | None = None
    transfer: Mapping[str, Any] | None = None
    target_scale: Mapping[str, float] | None = None
    holdout_cells: Sequence[str] = ()
    #: the LR law fitted without ``holdout_cells`` (by the transfer check), drawn on its own figure
    holdout_law: PowerLaw | None = None


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 9,
        }
    )
    return plt


def plot_loss_vs_lr(runs: pd.DataFrame, optima: Sequence[CellOptimum]) -> Figure:
    """Loss against LR, one panel per cell, with the fitted parabola and the optimum."""
    plt = _plt()
    by_cell = {o.cell: o for o in optima}
    cells = [o.cell for o in optima] or sorted(runs["cell"].unique())
    ncols = min(3, len(cells))
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), squeeze=False)
    for ax in axes.flat[len(cells) :]:
        ax.set_visible(False)
    for ax, cell in zip(axes.flat, cells, strict=False):
        r = runs[runs["cell"] == cell]
        done = r[(r["state"] == "COMPLETE") & ~r["diverged"] & np.isfinite(r["loss"])]
        div = r[r["diverged"]]
        opt = by_cell.get(cell)
        ax.set_xscale("log")
        ax.scatter(done["lr"], done["loss"], s=10, alpha=0.35, color="tab:blue", label="runs")
        if len(done):
            mean = done.groupby("lr")["loss"].mean()
            ax.plot(mean.index, mean.values, "o", ms=4, color="tab:blue", label="mean over seeds")
            best = float(mean.min())
            top = min(float(mean.max()), best * 1.12)
            ax.set_ylim(best - 0.02 * best, top + 0.01 * best)
        ymax = ax.get_ylim()[1]
        if len(div):
            ax.plot(
                div["lr"],
                np.full(len(div), ymax),
                "x",
                color="tab:red",
                ms=7,
                mew=2,
                clip_on=False,
                label="diverged",
            )
        if opt is not None and opt.window_lr and opt.curve_coefs:
            grid = np.geomspace(opt.window_lr[0], opt.window_lr[1], 100)
            ax.plot(grid, opt.curve(grid), "-", color="tab:orange", lw=1.8, label="parabola")
        if opt is not None and opt.lr:
            color = "tab:green" if opt.usable else "tab:gray"
            ax.axvline(opt.lr, color=color, lw=1.2, ls="--", label=f"optimum {opt.lr:.2e}")
            if opt.lr_ci:
                ax.axvspan(opt.lr_ci[0], opt.lr_ci[1], color=color, alpha=0.15)
        title = cell
        if opt is not None and opt.on_edge:
            title += f"  (optimum on the {opt.edge} edge)"
        elif opt is not None and not opt.usable:
            title += "  (left out)"
        ax.set_title(title, fontsize=9)
        _log_ticks(ax.xaxis)
        ax.set_xlabel("peak LR")
        ax.set_ylabel("final val loss (nats)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles[:5],
            [lbl.split(" ")[0] if lbl.startswith("optimum") else lbl for lbl in labels[:5]],
            loc="upper center",
            ncol=5,
            frameon=False,
            fontsize=8,
        )
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def _log_ticks(axis: Any, lo: float | None = None, hi: float | None = None) -> None:
    """Label a log axis at 1, 2, 5 × 10^k (at 10^k only past three decades): matplotlib's minor
    labels crowd each other on the narrow ranges these plots have."""
    from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullFormatter

    wide = lo is not None and hi is not None and lo > 0 and hi / lo > 1e3
    axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(LogFormatterSciNotation(labelOnlyBase=False))
    axis.set_minor_formatter(NullFormatter())


def _law_band(law: PowerLaw, scales: list[dict[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = zip(*(law.interval(s) for s in scales), strict=True)
    return np.array(lo), np.array(hi)


def _cell_scale(o: CellOptimum, predictors: Sequence[str]) -> dict[str, float] | None:
    s = {p: getattr(o, p, None) for p in predictors}
    if any(v is None or not np.isfinite(v) or v <= 0 for v in s.values()):
        return None
    return {k: float(v) for k, v in s.items() if v is not None}


def plot_law(
    optima: Sequence[CellOptimum],
    law: PowerLaw,
    *,
    holdout_cells: Sequence[str] = (),
    target_scale: Mapping[str, float] | None = None,
) -> Figure:
    """The cells' optima against the law's first predictor, the law line and its 95% band."""
    plt = _plt()
    target, x_name = law.target, law.predictors[0]
    others = law.predictors[1:]
    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    ax.set_xscale("log")
    ax.set_yscale("log")
    pts = [
        (o, s)
        for o in optima
        if (s := _cell_scale(o, law.predictors)) is not None and getattr(o, target) is not None
    ]
    # one law line per combination of the other predictors (one line when the law has one predictor)
    groups: dict[tuple[float, ...], list[dict[str, float]]] = {}
    for _o, s in pts:
        groups.setdefault(tuple(s[p] for p in others), []).append(s)
    xs_all = [s[x_name] for _o, s in pts]
    x_hi = max(xs_all) if xs_all else 1.0
    if target_scale and x_name in target_scale:
        x_hi = max(x_hi, float(target_scale[x_name]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (key, _scales) in enumerate(sorted(groups.items())):
        grid = np.geomspace(min(xs_all) / 1.3, x_hi * 1.3, 80)
        scales = [{x_name: float(x), **dict(zip(others, key, strict=True))} for x in grid]
        y = np.array([law.predict(s) for s in scales])
        lo, hi = _law_band(law, scales)
        label = "law" + (
            ""
            if not others
            else " at " + ", ".join(f"{p}={v:.3g}" for p, v in zip(others, key, strict=True))
        )
        c = colors[i % len(colors)]
        ax.plot(grid, y, "-", color=c, lw=1.6, label=label)
        ax.fill_between(grid, lo, hi, color=c, alpha=0.15)
    if law.domain.get(x_name):
        ax.axvspan(*law.domain[x_name], color="k", alpha=0.04, label="fitted range")
    for o, s in pts:
        y = getattr(o, target)
        ci = getattr(o, f"{target}_ci")
        held = o.cell in holdout_cells
        style = dict(fmt="s", color="tab:red", ms=6) if held else dict(fmt="o", color="k", ms=4)
        if not o.usable and not held:
            style = dict(fmt="o", color="tab:gray", ms=4, mfc="none")
        yerr = None
        if ci:
            yerr = [[max(y - ci[0], 0.0)], [max(ci[1] - y, 0.0)]]
        ax.errorbar([s[x_name]], [y], yerr=yerr, capsize=2, lw=1, **style)
    if holdout_cells:
        ax.plot([], [], "s", color="tab:red", label="held out")
    if target_scale and all(p in target_scale for p in law.predictors):
        ts = {p: float(target_scale[p]) for p in law.predictors}
        yt = law.predict(ts)
        lo_t, hi_t = law.interval(ts)
        ax.errorbar(
            [ts[x_name]],
            [yt],
            yerr=[[yt - lo_t], [hi_t - yt]],
            fmt="*",
            ms=12,
            color="tab:purple",
            capsize=3,
            label=f"target: {yt:.3g}",
        )
    exps = ", ".join(
        f"{p}^{law.exponents[p]:+.3f} [{law.exponents_ci[p][0]:+.2f}, {law.exponents_ci[p][1]:+.2f}]"
        if p in law.exponents_ci
        else f"{p}^{law.exponents[p]:+.3f}"
        for p in law.predictors
    )
    ax.set_title(f"{_TARGET_LABEL.get(target, target)} ∝ {exps}", fontsize=9)
    _log_ticks(ax.xaxis, *ax.get_xlim())
    ax.set_xlabel(_PREDICTOR_LABEL.get(x_name, x_name))
    ax.set_ylabel(_TARGET_LABEL.get(target, target))
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def plot_residuals(optima: Sequence[CellOptimum], law: PowerLaw) -> Figure:
    """ln(measured / law) per cell, with the cells' own 95% intervals."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.2, 3.2))
    x_name = law.predictors[0]
    ax.set_xscale("log")
    for o in optima:
        s = _cell_scale(o, law.predictors)
        y = getattr(o, law.target)
        if s is None or y is None:
            continue
        pred = law.predict(s)
        r = math.log(y / pred)
        ci = getattr(o, f"{law.target}_ci")
        yerr = [[r - math.log(ci[0] / pred)], [math.log(ci[1] / pred) - r]] if ci else None
        color = "k" if o.usable else "tab:gray"
        ax.errorbar([s[x_name]], [r], yerr=yerr, fmt="o", color=color, ms=4, capsize=2)
        ax.annotate(o.cell, (s[x_name], r), fontsize=6, xytext=(3, 3), textcoords="offset points")
    _log_ticks(ax.xaxis, *ax.get_xlim())
    ax.axhline(0, color="tab:orange", lw=1)
    if law.residual_std:
        ax.axhspan(
            -law.residual_std,
            law.residual_std,
            color="tab:orange",
            alpha=0.1,
            label=f"±1 residual sd ({law.residual_std:.3f})",
        )
        ax.legend(fontsize=8, frameon=False)
    ax.set_xlabel(_PREDICTOR_LABEL.get(x_name, x_name))
    ax.set_ylabel(f"ln(measured / law) of {law.target}")
    cv = f", leave-one-cell-out RMS {law.cv_error:.3f}" if law.cv_error is not None else ""
    ax.set_title(f"residuals of the {law.target} law{cv}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_batch_surface(runs: pd.DataFrame, optima: Sequence[CellOptimum]) -> Figure | None:
    """Loss over (LR, batch) in each cell where the batch size was swept; None if none was."""
    swept = [o for o in optima if o.batch_tokens_ci is not None]
    if not swept:
        return None
    plt = _plt()
    ncols = min(3, len(swept))
    nrows = math.ceil(len(swept) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(swept) :]:
        ax.set_visible(False)
    for ax, o in zip(axes.flat, swept, strict=False):
        r = runs[(runs["cell"] == o.cell) & (runs["state"] == "COMPLETE") & ~runs["diverged"]]
        r = r[np.isfinite(r["loss"])]
        best = float(r["loss"].min()) if len(r) else 1.0
        sc = ax.scatter(
            r["lr"],
            r["batch_tokens"],
            c=r["loss"],
            cmap="viridis_r",
            s=28,
            vmin=best,
            vmax=best * 1.1,
        )
        if o.curve_coefs and len(o.curve_coefs) == 6 and o.window_lr and o.window_batch_tokens:
            g_lr = np.geomspace(*o.window_lr, 60)
            g_bt = np.geomspace(*o.window_batch_tokens, 60)
            LR, BT = np.meshgrid(g_lr, g_bt)
            ax.contour(LR, BT, o.curve(LR, BT), levels=8, colors="k", linewidths=0.5, alpha=0.6)
        if o.lr and o.batch_tokens:
            ax.plot([o.lr], [o.batch_tokens], "*", color="tab:red", ms=12)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_ticks(ax.xaxis)
        ax.set_title(o.cell, fontsize=9)
        ax.set_xlabel("peak LR")
        ax.set_ylabel("batch (tokens)")
        fig.colorbar(sc, ax=ax, label="val loss")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- HTML


def _table(df: pd.DataFrame) -> str:
    return df.to_html(
        index=False, border=0, classes="t", na_rep="", float_format=lambda v: f"{v:.4g}"
    )


def _optima_table(optima: Sequence[CellOptimum]) -> pd.DataFrame:
    rows = []
    for o in optima:
        rows.append(
            {
                "cell": o.cell,
                "N": o.n_params,
                "D": o.tokens,
                "runs": o.n_runs,
                "used": o.n_used,
                "best loss": o.loss,
                "lr*": o.lr,
                "lr 95% CI": f"{o.lr_ci[0]:.3g} – {o.lr_ci[1]:.3g}" if o.lr_ci else "",
                "batch tokens*": o.batch_tokens,
                "edge": o.edge or "",
                "usable": "yes" if o.usable else f"no: {o.reason}",
            }
        )
    return pd.DataFrame(rows)


def _laws_table(laws: Sequence[Law]) -> pd.DataFrame:
    rows = []
    for law in laws:
        if not isinstance(law, PowerLaw):
            continue
        rows.append(
            {
                "id": law.id,
                "target": law.target,
                "method": law.method,
                "prefactor": law.prefactor,
                "exponents [95% CI]": "; ".join(
                    f"{p}: {law.exponents[p]:+.3f} [{law.exponents_ci[p][0]:+.3f}, {law.exponents_ci[p][1]:+.3f}]"
                    for p in law.predictors
                ),
                "cells": law.n_cells,
                "LOO error (ln)": law.cv_error,
                "largest-out error (ln)": law.holdout_error,
                "parametrization": law.parametrization or "",
            }
        )
    return pd.DataFrame(rows)


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table.t{border-collapse:collapse;font-size:.85em;margin:.5em 0}
table.t th,table.t td{padding:.25em .6em;border-bottom:1px solid #eee;text-align:right}
table.t th{background:#f6f6f6}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.warn{background:#fff4e5;border-left:4px solid #f0a030;padding:.4em .8em;margin:.3em 0}
.muted{color:#777;font-size:.85em}
"""


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" title="{html.escape(path.name)}">'


def _kv_table(d: Mapping[str, Any]) -> str:
    rows = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            v = ", ".join(f"{kk}={_fmt(vv)}" for kk, vv in v.items())
        elif isinstance(v, list | tuple):
            v = "; ".join(_fmt(x) for x in v)
        rows.append(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>")
    return '<table class="t">' + "".join(rows) + "</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_report(inputs: ReportInputs, out_dir: str | Path) -> list[Path]:
    """Write the PNGs and ``index.html`` into ``out_dir``; returns the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    written: list[Path] = []
    figures: list[tuple[str, str, Path]] = []

    def save(fig: Figure, name: str, title: str, caption: str) -> None:
        p = out / name
        fig.savefig(p)
        plt.close(fig)
        written.append(p)
        figures.append((title, caption, p))

    save(
        plot_loss_vs_lr(inputs.runs, inputs.optima),
        "loss_vs_lr.png",
        "Loss against LR, per cell",
        "Faint points are single runs, dots their mean over seeds, red crosses diverged runs (they bound "
        "the range and are not fitted). The orange curve is the parabola in ln LR fitted around the "
        "minimum; the dashed line and band are the optimum and its 95% bootstrap interval.",
    )
    power_laws = [law for law in inputs.laws if isinstance(law, PowerLaw)]
    if inputs.holdout_law is not None:
        save(
            plot_law(inputs.optima, inputs.holdout_law, holdout_cells=inputs.holdout_cells),
            f"law_{inputs.holdout_law.target}_holdout.png",
            "Transfer check: the law fitted without the held-out cell",
            "The law and its 95% band fitted on the other cells only; the red square is the held-out "
            "cell's measured optimum, which the law had not seen.",
        )
    for law in power_laws:
        save(
            plot_law(inputs.optima, law, target_scale=inputs.target_scale),
            f"law_{law.target}.png",
            f"Optimal {law.target} against scale",
            "Cell optima with their 95% intervals; the line is the fitted power law and the band its 95% "
            "prediction interval (the coefficients' sampling spread plus the scatter of the cells). The star "
            "is the target, far to the right when the extrapolation is long.",
        )
        save(
            plot_residuals(inputs.optima, law),
            f"residuals_{law.target}.png",
            f"Residuals of the {law.target} law",
            "A trend in the residuals means the power law bends.",
        )
    surface = plot_batch_surface(inputs.runs, inputs.optima)
    if surface is not None:
        save(
            surface,
            "batch_surface.png",
            "Loss over LR and batch size",
            "Colour is the final loss; contours are the 2-D quadratic fit; the star is the optimum.",
        )

    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Sweeper report: "
        f"{html.escape(inputs.sweep)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Sweeper report: {html.escape(inputs.sweep)}</h1>",
        f"<p class='muted'>{len(inputs.runs)} runs in {inputs.runs['cell'].nunique()} cells; "
        f"{sum(o.usable for o in inputs.optima)} cells usable for the fit.</p>",
    ]
    if inputs.recipe:
        parts.append("<h2>Recommended recipe</h2>")
        for w in inputs.recipe.get("warnings", []) or []:
            parts.append(f"<div class='warn'>{html.escape(str(w))}</div>")
        shown = {
            k: v
            for k, v in inputs.recipe.items()
            if (k != "warnings" and not isinstance(v, Mapping | list))
            or k in ("lr", "batch_tokens")
        }
        parts.append(_kv_table(shown))
    if inputs.transfer:
        parts.append("<h2>Transfer check (held-out cell)</h2>")
        parts.append(
            _kv_table({k: v for k, v in inputs.transfer.items() if not isinstance(v, list)})
        )
    parts.append("<h2>Laws</h2>")
    lt = _laws_table(power_laws)
    parts.append(
        _table(lt) if len(lt) else "<p>No power law fitted yet: run <code>sweeper fit</code>.</p>"
    )
    parts.append("<h2>Cells and their optima</h2>")
    parts.append(_table(_optima_table(inputs.optima)))
    for title, caption, p in figures:
        parts.append(
            f"<h2>{html.escape(title)}</h2>{_img(p, title)}<p class='muted'>{html.escape(caption)}</p>"
        )
    parts.append("</body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    written.append(index)
    return written

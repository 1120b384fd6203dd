"""The report's plots, drawn with matplotlib's object API from what :mod:`sweeper.fitting` returned.

One figure each, saved as a PNG by :func:`sweeper.report.page.write_report`:

- :func:`plot_loss_vs_lr` (``loss_vs_lr.png``): the loss against the LR in every cell, seeds as
  faint points and their mean as a dot, diverged runs as red crosses on the top edge, the fitted
  parabola over its window, the optimum with its interval; cells whose optimum is on the edge of
  the range are titled so.
- :func:`plot_law` (``law_<target>.png``): the optimum of every cell against scale in log-log with
  the fitted law, its 95% band (the coefficients' sampling spread plus the scatter of the cells),
  held-out cells and the target marked.
- :func:`plot_residuals` (``residuals_<target>.png``): ln(measured / law) per cell with the cells'
  intervals.
- :func:`plot_batch_surface` (``batch_surface.png``): loss over (LR, batch size) in the cells where
  both were swept.

LRs are peak AdamW LRs, batch sizes in tokens or bytes (as the conventions count them:
:func:`data_unit`), losses in nats. Nothing here fits. No pyplot: a figure is a plain
:class:`~matplotlib.figure.Figure` drawn under the report's style (:func:`report_style`), so that
a notebook's backend, settings and figures are left as they were (an API audit found them
changed).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

import numpy as np
import pandas as pd

from sweeper.fitting.conventions import TOKENS_AS_IMPORTED
from sweeper.fitting.laws import Law, PowerLaw

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sweeper.fitting import CellOptimum
    from sweeper.fitting.conventions import Conventions

__all__ = [
    "axis_label",
    "data_unit",
    "plot_batch_holdout",
    "plot_batch_surface",
    "plot_law",
    "plot_loss_vs_lr",
    "plot_residuals",
    "plot_transfer",
    "report_style",
]


#: the unit :func:`data_unit` names for runs imported without one (conventions tokens "as
#: imported"): they may count tokens or bytes, and had been labelled "tokens" (an audit)
IMPORTED_UNIT: Final[str] = "imported units"


def data_unit(conventions: Conventions | None) -> str:
    """What D and the batch count, as ``conventions`` record it: "bytes" of byte-level data
    (``counts_bytes``), :data:`IMPORTED_UNIT` for runs imported without a declared unit, else
    "tokens" (a tokenizer's, or not recorded: None)."""
    if conventions is not None and conventions.counts_bytes:
        return "bytes"
    if conventions is not None and conventions.tokens == TOKENS_AS_IMPORTED:
        return IMPORTED_UNIT
    return "tokens"


def axis_label(name: str, unit: str = "tokens") -> str:
    """A predictor's or a target's label on an axis, D and the batch in ``unit``
    (:func:`data_unit`)."""
    labels = {
        "n_params": "non-embedding parameters N",
        "tokens": f"training D ({unit})" if unit == IMPORTED_UNIT else f"training {unit} D",
        "flops": "training compute C (FLOPs)",
        "width": "width (d_model)",
        "depth": "depth (layers)",
        "lr": "optimal peak LR",
        "batch_tokens": f"optimal batch ({unit})",
    }
    return labels.get(name, name)


#: the report's look, set only while one of its figures is drawn or saved
_STYLE: Final[dict[str, Any]] = {
    "figure.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
}

_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextmanager
def report_style() -> Iterator[None]:
    """The report's matplotlib settings for the duration of a block (a figure's drawing and its
    saving: some text is laid out only then), the caller's restored after it."""
    import matplotlib

    with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]  # (keys typed as literals)
        yield


def _styled(plot: Callable[_P, _R]) -> Callable[_P, _R]:
    """``plot`` drawn under :func:`report_style`."""

    @functools.wraps(plot)
    def drawn(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with report_style():
            return plot(*args, **kwargs)

    return drawn


def _rc() -> Any:
    import matplotlib

    return matplotlib.rcParams


def _subplots(nrows: int = 1, ncols: int = 1, **kw: Any) -> tuple[Figure, Any]:
    """A figure and its axes, as ``pyplot.subplots`` gives them, without pyplot (no backend
    chosen, no figure kept open by the module)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=kw.pop("figsize", None))
    FigureCanvasAgg(fig)  # (its own canvas: PNGs and text layout, whatever the caller's backend)
    return fig, fig.subplots(nrows, ncols, **kw)


@_styled
def plot_loss_vs_lr(
    runs: pd.DataFrame,
    optima: Sequence[CellOptimum],
    surface: Law | None = None,
    *,
    unit: str = "tokens",
) -> Figure:
    """Loss against LR, one panel per cell, with the fitted parabola and the optimum, and the
    surface law's curve of each cell when ``surface`` is a surface LR law (it has ``cell_loss``);
    a batch sweep's panel is titled with its batch in ``unit`` (:func:`data_unit`)."""
    by_cell = {o.cell: o for o in optima}
    cells = [o.cell for o in optima] or sorted(runs["cell"].unique())
    ncols = min(3, len(cells))
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = _subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), squeeze=False)
    for ax in axes.flat[len(cells) :]:
        ax.set_visible(False)
    for ax, cell in zip(axes.flat, cells, strict=False):
        opt = by_cell.get(cell)
        cell_runs = runs[runs["cell"] == cell]
        r, batch = panel_runs(cell_runs, opt)
        done = _finished(r)
        div = r[r["diverged"]]
        ax.set_xscale("log")
        if len(done):  # (a panel of no finished run had a "runs" entry in the legend: an audit)
            ax.scatter(done["lr"], done["loss"], s=10, alpha=0.35, color="tab:blue", label="runs")
            mean = done.groupby("lr")["loss"].mean()
            ax.plot(mean.index, mean.values, "o", ms=4, color="tab:blue", label="mean over seeds")
            ax.set_ylim(*loss_axis(done))
            _draw_best_elsewhere(ax, cell_runs, batch)
            _draw_off_axis(ax, done)
        else:
            _say_none_finished(ax, r)
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
        _draw_parabola(ax, opt, batch)
        _draw_surface(ax, surface, cell, r, batch)
        if opt is not None and opt.lr:
            color = "tab:green" if opt.usable else "tab:gray"
            ax.axvline(opt.lr, color=color, lw=1.2, ls="--", label=f"optimum {opt.lr:.2e}")
            if opt.lr_ci:
                ax.axvspan(opt.lr_ci[0], opt.lr_ci[1], color=color, alpha=0.15)
        title = cell if batch is None else f"{cell} at batch {batch:.4g} {unit}"
        if opt is not None and opt.on_edge:
            title += f" ({_edge_words(opt)})"
        elif opt is not None and not opt.usable:
            title += " (left out)"
        # (the diverged runs' crosses on the top edge had run into the title: an audit)
        ax.set_title(title, fontsize=9, pad=10 if len(div) else 6)
        _log_ticks(ax.xaxis, most=_PANEL_LR_TICKS)
        ax.set_xlabel("peak LR")
        ax.set_ylabel("final val loss (nats)" if len(done) else "")
    _figure_legend(fig, _panel_legend(axes.flat[: len(cells)]))
    return fig


def best_point(runs: pd.DataFrame) -> tuple[float, float, float] | None:
    """A cell's best point: (LR, batch, loss) of the lowest mean loss over seeds at one LR and
    batch among its finished ``runs`` (None: none finished, or no batch recorded)."""
    done = _finished(runs).dropna(subset=["batch_tokens"])
    if done.empty:
        return None
    mean = done.groupby(["lr", "batch_tokens"])["loss"].mean()
    lr, batch = mean.idxmin()
    return float(lr), float(batch), float(mean.min())


def _draw_best_elsewhere(ax: Any, runs: pd.DataFrame, batch: float | None) -> None:
    """On a batch cell's panel (its runs at ``batch``), the cell's best point when it is at
    another batch, as a black square with its batch (in the title's unit) beside it, inside the
    loss axis: the panel
    had shown neither it nor why the 2-D fit's curve bottoms below every point drawn (an
    audit)."""
    best = best_point(runs) if batch is not None else None
    if best is None or batch is None or np.isclose(best[1], batch):
        return
    lr, at, loss = best
    lo, hi = ax.get_ylim()
    if loss < lo:
        ax.set_ylim(loss - 0.01 * abs(loss), hi)
    ax.plot([lr], [loss], "s", ms=7, mfc="none", mew=1.5, color="k", zorder=5,
            label="the cell's best point, at another batch")  # fmt: skip
    # (its batch toward the panel's middle: at the right edge it ran into the next panel)
    lrs = runs["lr"][runs["lr"] > 0]
    right = math.log(lr) > (math.log(lrs.min()) + math.log(lrs.max())) / 2
    ax.annotate(f"batch {at:.4g}", (lr, loss), xytext=(-7 if right else 7, -3), fontsize=7,
                textcoords="offset points", ha="right" if right else "left")  # fmt: skip


def _say_none_finished(ax: Any, runs: pd.DataFrame) -> None:
    """A panel without a finished run: what became of its runs, written in it, over the LRs they
    tried and no loss scale (an audit's all-diverged cell had crosses at "loss 0.055" on a
    0.052-0.058 axis, an all-failed one an empty panel from LR 1 to 10)."""
    ax.text(0.5, 0.5, _none_finished_words(runs), transform=ax.transAxes, ha="center",
            va="center", fontsize=9, color="tab:red")  # fmt: skip
    ax.set_ylim(0.0, 1.0)
    ax.set_yticks([])
    lrs = pd.to_numeric(runs["lr"], errors="coerce")
    lrs = lrs[np.isfinite(lrs) & (lrs > 0)]
    if len(lrs):
        ax.set_xlim(float(lrs.min()) / 1.5, float(lrs.max()) * 1.5)


def _none_finished_words(runs: pd.DataFrame) -> str:
    """What became of a cell's ``runs`` when none finished: "all 6 runs diverged", "no run
    finished: 3 diverged, 3 failed"."""
    failed = int((runs["state"] == "FAIL").sum())
    diverged = int((runs["diverged"] & (runs["state"] != "FAIL")).sum())
    kinds = {"diverged": diverged, "failed": failed, "unfinished": len(runs) - diverged - failed}
    said = [(what, n) for what, n in kinds.items() if n]
    if not said:
        return "no runs"
    if len(said) == 1:
        what, n = said[0]
        return f"its one run {what}" if n == 1 else f"all {n} runs {what}"
    return "no run finished: " + ", ".join(f"{n} {what}" for what, n in said)


def _draw_parabola(ax: Any, opt: CellOptimum | None, batch: float | None) -> None:
    """The cell's fitted parabola over its window; a 2-D fit's at the panel's ``batch`` (the
    batch of the runs drawn; at the cell's optimal batch the curve misses them)."""
    if opt is None or not (opt.window_lr and opt.curve_coefs):
        return
    grid = np.geomspace(opt.window_lr[0], opt.window_lr[1], 100)
    at = batch if batch is not None and len(opt.curve_coefs) == 6 else None
    ax.plot(grid, opt.curve(grid, at), "-", color="tab:orange", lw=1.8, label="parabola")


#: the width (inches) one entry of a figure's legend is given when its rows wrap
_LEGEND_ENTRY_IN: Final[float] = 1.45


def _figure_legend(fig: Any, handles: dict[str, Any]) -> None:
    """The panels' legend above them, wrapped into as many rows as the figure's width needs (in
    one row, a narrow figure's cut its first and last entries), then the layout below it."""
    width, height = fig.get_size_inches()
    rows = 0
    if handles:
        per_row = max(1, min(len(handles), int(width / _LEGEND_ENTRY_IN)))
        rows = math.ceil(len(handles) / per_row)
        fig.legend(handles.values(), handles.keys(), loc="upper center", ncol=per_row,
                   frameon=False, fontsize=8)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.05 + 0.22 * rows) / height))


def _panel_legend(axes: Any) -> dict[str, Any]:
    """One legend entry per kind of mark drawn in any panel (label -> handle), in the order
    first drawn; "optimum 1.2e-03" is one "optimum", and a usable cell's (green) is preferred
    to a left-out cell's (grey)."""
    out: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            key = label.split(" ")[0] if label.startswith("optimum") else label
            grey = key == "optimum" and h.get_color() == "tab:gray"
            if key not in out or (
                key == "optimum" and not grey and out[key].get_color() == "tab:gray"
            ):
                out[key] = h
    return out


def loss_axis(done: pd.DataFrame) -> tuple[float, float]:
    """The loss axis of a cell's panel: from just below the best mean over seeds to the worst
    mean, at most 12% above the best (the loss far from the optimum would flatten the bowl)."""
    mean = done.groupby("lr")["loss"].mean()
    best = float(mean.min())
    return best - 0.02 * best, min(float(mean.max()), best * 1.12) + 0.01 * best


def panel_runs(runs: pd.DataFrame, opt: CellOptimum | None) -> tuple[pd.DataFrame, float | None]:
    """A cell's runs that its loss-vs-LR panel draws, and the batch size they share when the cell
    swept the batch (else None): then only the runs at the batch tried nearest the cell's
    optimal batch, since losses at other batches on one LR axis read as noise."""
    batches = runs["batch_tokens"].dropna().unique() if "batch_tokens" in runs else []
    if len(batches) < 2:
        return runs, None
    want = opt.batch_tokens if opt is not None and opt.batch_tokens else math.nan
    if not math.isfinite(want):  # no optimum (a cell left out): the best run's batch
        done = _finished(runs)
        if done.empty:
            return runs, None
        want = float(done.loc[done["loss"].idxmin(), "batch_tokens"])
    nearest = float(min(batches, key=lambda b: abs(math.log(b / want))))
    return runs[np.isclose(runs["batch_tokens"], nearest)], nearest


def runs_off_axis(runs: pd.DataFrame, optima: Sequence[CellOptimum] = ()) -> int:
    """How many finished runs the loss-vs-LR panels draw lie beyond their cell's loss axis
    (:func:`loss_axis`)."""
    by_cell = {o.cell: o for o in optima}
    n = 0
    for cell, g in runs.groupby("cell"):
        done = _finished(panel_runs(g, by_cell.get(str(cell)))[0])
        if len(done):
            lo, hi = loss_axis(done)
            n += int(((done["loss"] < lo) | (done["loss"] > hi)).sum())
    return n


def _finished(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs a panel draws as points: completed, not diverged, with a finite loss."""
    return runs[(runs["state"] == "COMPLETE") & ~runs["diverged"] & np.isfinite(runs["loss"])]


def _draw_off_axis(ax: Any, done: pd.DataFrame) -> None:
    """Runs beyond the panel's loss axis as open triangles on its edge, pointing their way."""
    lo, hi = ax.get_ylim()
    for side, y, marker in ((done["loss"] > hi, hi, "^"), (done["loss"] < lo, lo, "v")):
        if side.any():
            ax.plot(done.loc[side, "lr"], np.full(int(side.sum()), y), marker, ms=6, mfc="none",
                    color="tab:blue", clip_on=False, label="off the axis")  # fmt: skip


def edge_of(o: CellOptimum) -> tuple[str, str] | None:
    """Which of ``o``'s optima is on the edge of what was tried, and where: ("LR", "low"),
    ("batch", "high"), ("batch", "beyond"): a 2-D fit's batch held at the batches fitted; None
    when neither is (the panels' titles and the cells table's column)."""
    if o.edge:
        return "LR", o.edge
    if o.batch_edge:
        return "batch", o.batch_edge
    return ("batch", "beyond") if o.on_edge else None


def _edge_words(o: CellOptimum) -> str:
    """Which edge an optimum is on, for a panel's title (the LR's, else the batch's)."""
    what, side = edge_of(o) or ("batch", "beyond")
    if side == "beyond":
        return "batch optimum beyond the batches fitted"
    return f"{what} optimum on the {side} edge"


def _log_ticks(axis: Any, most: int | None = None) -> None:
    """Label a log axis at :func:`readable_ticks` of the range it has once drawn (at most
    ``most`` of them, where given), in the form "2×10⁻³", with no minor labels: matplotlib's
    minor labels crowd each other on the narrow ranges these plots have."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_locator(_readable_locator()(base=10.0, most=most))
    axis.set_major_formatter(FuncFormatter(_sci_label))
    axis.set_minor_formatter(NullFormatter())


def readable_ticks(lo: float, hi: float, most: int | None = None) -> list[float] | None:
    """A log axis's ticks from ``lo`` to ``hi``: 10^k past three decades, else 1, 2, 5 × 10^k;
    where fewer than two of those fall in the range, 1, 2, 3, 5, 7 (every whole mantissa crowded
    the labels at the top of a decade), every whole mantissa, then about 3 even
    steps (on a law sampler's three close LRs matplotlib's LogLocator had fallen back to ~10
    ticks, each labelled, overlapping: an audit). With ``most``, no more ticks than that: the
    decades where two or more fall in the range, else every n-th tick (a narrow panel's seven
    labels had run together: an audit). None for a range no log axis has."""
    from matplotlib.ticker import MaxNLocator

    lo, hi = sorted((float(lo), float(hi)))
    if not (lo > 0 and math.isfinite(hi)):
        return None
    decades = range(math.floor(math.log10(lo)), math.floor(math.log10(hi)) + 1)
    fine = [(1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0), tuple(range(1, 10))]
    for subs in [(1.0,)] if hi / lo > 1e3 else fine:
        ticks = [m * 10.0**k for k in decades for m in subs if lo <= m * 10.0**k <= hi]
        if len(ticks) >= 2:
            return _at_most(ticks, most, [10.0**k for k in decades if lo <= 10.0**k <= hi])
    steps = [float(t) for t in MaxNLocator(nbins=3).tick_values(lo, hi) if lo <= t <= hi]
    return _at_most(steps, most, [])


def _at_most(ticks: list[float], most: int | None, decades: list[float]) -> list[float]:
    """``ticks``, or where there are more than ``most``, the ``decades`` among them when two to
    ``most`` are, else every n-th tick (as few as ``most``)."""
    if most is None or len(ticks) <= most:
        return ticks
    if 2 <= len(decades) <= most:
        return decades
    return ticks[:: math.ceil(len(ticks) / most)]


@functools.cache
def _readable_locator() -> Any:
    """matplotlib's LogLocator ticking at :func:`readable_ticks` (a class made on first use:
    matplotlib is imported only when a plot is drawn)."""
    from matplotlib.ticker import LogLocator

    class ReadableLogLocator(LogLocator):
        def __init__(self, *args: Any, most: int | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.most = most

        def tick_values(self, vmin: float, vmax: float) -> Any:
            ticks = readable_ticks(vmin, vmax, self.most)
            return super().tick_values(vmin, vmax) if ticks is None else np.array(ticks)

    return ReadableLogLocator


def _sci_label(x: float, _pos: Any = None) -> str:
    """``x`` as matplotlib's log labels write it ("$\\mathdefault{2\\times10^{-3}}$"), its
    mantissa to 3 digits (matplotlib's rounds it to a whole number: 3.5e-3 read "4×10⁻³")."""
    if not (math.isfinite(x) and x > 0):
        return ""
    exp = math.floor(math.log10(x) + 1e-9)
    mant = float(f"{x / 10**exp:.3g}")
    if mant >= 10:
        mant, exp = mant / 10, exp + 1
    body = f"10^{{{exp}}}" if mant == 1 else f"{mant:g}\\times10^{{{exp}}}"
    return f"$\\mathdefault{{{body}}}$"


def _law_band(law: PowerLaw, scales: list[dict[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = zip(*(law.interval(s) for s in scales), strict=True)
    return np.array(lo), np.array(hi)


def _cell_scale(o: CellOptimum, predictors: Sequence[str]) -> dict[str, float] | None:
    s = {p: getattr(o, p, None) for p in predictors}
    if any(v is None or not np.isfinite(v) or v <= 0 for v in s.values()):
        return None
    return {k: float(v) for k, v in s.items() if v is not None}


#: the most lines a law of several predictors draws, one per value of its other predictors (a
#: Step Law ladder's 15 values of D had drawn 15 labelled lines and bands, the colours repeating
#: and the legend over the target's star: an audit); past it, a colour scale gives each point's
#: value
MAX_LAW_LINES: Final[int] = 5

#: a law plot's size, and a several-line law's (its legend below the axes, its colour bar beside)
_LAW_SIZE: Final = (6.2, 4.4)
_LAWS_SIZE: Final = (7.4, 6.4)


@_styled
def plot_law(
    optima: Sequence[CellOptimum],
    law: PowerLaw,
    *,
    holdout_cells: Sequence[str] = (),
    target_scale: Mapping[str, float] | None = None,
    recipe_value: float | None = None,
    bounds: Sequence[tuple[CellOptimum, float]] = (),
) -> Figure:
    """The cells' optima against the law's first predictor, the law line and its 95% band; at
    ``target_scale``, the law's prediction (a star) and ``recipe_value``, the value the recipe
    wrote there (a diamond: the risk-aware LR, the batch planned for the hardware). ``bounds``:
    cells the fit has no optimum of, only a bound above it (the LR at and above which their runs
    diverged or lie past the fit's window), each with that bound, drawn as a downward triangle.
    A law of several predictors draws a line per value of the others among the cells, at most
    :data:`MAX_LAW_LINES` of them across their range (then a colour scale gives each point's
    value), with its legend below the axes."""
    target, x_name = law.target, law.predictors[0]
    others = law.predictors[1:]
    fig, ax = _subplots(figsize=_LAWS_SIZE if others else _LAW_SIZE)
    ax.set_xscale("log")
    ax.set_yscale("log")
    pts = [
        (o, s)
        for o in optima
        if (s := _cell_scale(o, law.predictors)) is not None and getattr(o, target) is not None
    ]
    bound_pts = [(o, s, v) for o, v in bounds if (s := _cell_scale(o, law.predictors)) is not None]
    xs_all = [s[x_name] for _o, s in pts] + [s[x_name] for _o, s, _v in bound_pts]
    x_hi = max(xs_all) if xs_all else 1.0
    ts = target_point(law, target_scale)
    if ts is not None:
        x_hi = max(x_hi, ts[x_name])
    keys = cell_keys(optima, law)
    colour_of = _key_colours(fig, ax, law, keys)
    shown = _draw_law_lines(ax, law, keys, xs_all or [1.0], x_hi, colour_of, target=ts)
    shown += [float(getattr(o, target)) for o, _s in pts]
    if law.domain.get(x_name):
        ax.axvspan(*law.domain[x_name], color="k", alpha=0.04, label="fitted range")
    named: set[str] = set()  # (the legend had named only the line and the range: an audit)
    for o, s in pts:
        # (a point of a several-line law in its line's colour: all black, none could be told
        # apart; an audit)
        color = colour_of(_key(s, others)) if others else None
        _draw_optimum(ax, o, s[x_name], target, held=o.cell in holdout_cells, named=named,
                      color=color)  # fmt: skip
    shown += _draw_bounds(ax, [(o, s[x_name], v) for o, s, v in bound_pts])
    if holdout_cells:
        ax.plot([], [], "s", color="tab:red", label="held out")
    if ts is not None:
        shown += _draw_target_marks(ax, law, ts, recipe_value)
    _clamp_ylim(ax, shown)
    if ts is not None:
        _mark_clipped_ends(ax, ts[x_name], *law.interval(ts))
    _label_law_axes(ax, law, along_batch=at_best_batch(law, optima))
    fig.tight_layout()
    return fig


def _key(scale: Mapping[str, float], others: Sequence[str]) -> tuple[float, ...]:
    """A cell's values of a law's other predictors (after its first): the line it lies on."""
    return tuple(scale[p] for p in others)


def cell_keys(optima: Sequence[CellOptimum], law: PowerLaw) -> list[tuple[float, ...]]:
    """The values of ``law``'s other predictors (after its first) among the ``optima`` its plot
    draws, sorted: a line each, up to :data:`MAX_LAW_LINES`."""
    others = law.predictors[1:]
    return sorted({
        _key(s, others)
        for o in optima
        if (s := _cell_scale(o, law.predictors)) is not None and getattr(o, law.target) is not None
    })  # fmt: skip


def at_best_batch(law: PowerLaw, optima: Sequence[CellOptimum]) -> bool:
    """Whether ``law`` is an LR law of cells that swept the batch: each point, and so the law,
    is then the optimal LR at the cell's own optimal batch, along B*, not at one batch (a batch
    ladder's LR law had been read as one at a fixed batch: an audit)."""
    return law.target == "lr" and any(batch_swept(o) for o in optima)


def batch_swept(o: CellOptimum) -> bool:
    """Whether ``o``'s cell tried more than one batch size: its batch interval, or without
    resamples its range of batches (``--bootstrap 0`` had drawn a batch sweep's page as if no
    batch was swept: no batch figure, no "batch*")."""
    lo_hi = o.batch_range
    return o.batch_tokens_ci is not None or (lo_hi is not None and lo_hi[1] > lo_hi[0] * 1.001)


def _key_colours(
    fig: Any, ax: Any, law: PowerLaw, cell_keys: Sequence[tuple[float, ...]]
) -> Callable[[tuple[float, ...]], Any]:
    """How a law's plot colours a line and a point by their values of the law's other predictors
    (``cell_keys``: the cells'): a colour each, the palette's, where the cells have at most
    :data:`MAX_LAW_LINES` of them (another line, the target's, the next colour); past that, a
    colour scale of the first other predictor, with its colour bar beside ``ax``, and the
    target's line purple, as its star."""
    others = law.predictors[1:]
    palette = _rc()["axes.prop_cycle"].by_key()["color"]
    keys = list(cell_keys)
    if len(keys) <= MAX_LAW_LINES:
        return lambda k: palette[(keys.index(k) if k in keys else len(keys)) % len(palette)]
    import matplotlib
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm

    lo, hi = min(k[0] for k in keys), max(k[0] for k in keys)
    norm, cmap = LogNorm(lo, max(hi, lo * 1.001)), matplotlib.colormaps["viridis"]
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.02)
    unit = data_unit(law.conventions)
    bar.set_label(f"{axis_label(others[0], unit)} of the cell (colour)", fontsize=8)
    return lambda k: cmap(norm(k[0])) if k in keys else "tab:purple"


def _line_keys(
    others: Sequence[str],
    cell_keys: Sequence[tuple[float, ...]],
    target: Mapping[str, float] | None,
) -> tuple[list[tuple[float, ...]], tuple[float, ...] | None]:
    """The values of a law's other predictors (after its first) to draw a line at: the cells'
    (at most :data:`MAX_LAW_LINES`, across their range: :func:`_spread`) and the ``target``'s (a
    two-predictor law's star had sat on no line), and the target's among them (None: no target,
    or a law of one predictor, whose one line is the target's)."""
    keys = _spread(list(cell_keys), MAX_LAW_LINES)
    if target is None or not others:
        return keys, None
    at = tuple(float(target[p]) for p in others)
    same = next((k for k in cell_keys if np.allclose(k, at, rtol=1e-9, atol=0.0)), None)
    if same is None or same not in keys:
        keys.append(same or at)
    return keys, same or at


def _spread(keys: list[tuple[float, ...]], most: int) -> list[tuple[float, ...]]:
    """At most ``most`` of the sorted ``keys``, the nearest (in the log of their product) to
    evenly spaced points from the first to the last, in their order."""
    if len(keys) <= most:
        return keys
    pos = [sum(math.log(v) for v in k) for k in keys]
    chosen: list[int] = []
    for want in np.linspace(min(pos), max(pos), most):
        free = [i for i in range(len(keys)) if i not in chosen]
        chosen.append(min(free, key=lambda i: abs(pos[i] - want)))
    return [keys[i] for i in sorted(chosen)]


def _draw_bounds(ax: Any, bounds: Sequence[tuple[CellOptimum, float, float]]) -> list[float]:
    """Each cell with only a bound on its optimum ((its optimum, x, bound)) as a red downward
    triangle at the bound, named (its optimum lies below it); returns the bounds drawn."""
    for i, (o, x, v) in enumerate(bounds):
        label = "only a bound: the cell's optimum lies below" if i == 0 else None
        ax.plot([x], [v], "v", ms=8, mfc="none", mew=1.6, color="tab:red", label=label)
        ax.annotate(o.cell, (x, v), xytext=(-5, 6), textcoords="offset points", ha="right",
                    fontsize=6, color="tab:red")  # fmt: skip
    return [v for _o, _x, v in bounds]


def target_point(law: Law, scale: Mapping[str, float] | None) -> dict[str, float] | None:
    """The target ``scale``'s values of ``law``'s predictors; None when it lacks one, and then
    nothing of the law is evaluated there: no star, no caption of one, no doubts (one rule for
    the plot and the page: an audit's caption promised a star the plot did not draw)."""
    if not scale or any(p not in scale for p in law.predictors):
        return None
    return {p: float(scale[p]) for p in law.predictors}


def _draw_target_marks(
    ax: Any, law: PowerLaw, ts: dict[str, float], recipe_value: float | None
) -> list[float]:
    """The law's prediction at the target ``ts`` (a star) and the recipe's value there (a
    diamond); returns the values drawn."""
    shown = [_draw_target(ax, law, ts)]
    if recipe_value is not None and recipe_value > 0:
        what = "peak LR" if law.target == "lr" else "value"
        label = f"the recipe's {what}: {recipe_value:.3g}"
        ax.plot([ts[law.predictors[0]]], [recipe_value], "D", ms=7, mfc="none",
                color="tab:green", label=label)  # fmt: skip
        shown.append(float(recipe_value))
    return shown


def _label_law_axes(ax: Any, law: PowerLaw, *, along_batch: bool = False) -> None:
    """A law plot's title (the law with its exponents, wrapped to the axes: a two-predictor
    law's ran off the figure; and, ``along_batch``, that each cell's LR is at its own optimal
    batch), axes (D and the batch in the unit the law's conventions record) and legend: framed
    inside the axes for a law of one line, below them for a law of several (its legend of 18
    entries had covered the target's star: an audit)."""
    unit = data_unit(law.conventions)
    exps = [_exponent_words(law, p) for p in law.predictors]
    lines = _wrapped([f"{axis_label(law.target, unit)} ∝ {exps[0]}", *exps[1:]], _TITLE_CHARS)
    if along_batch:
        lines.append("(each cell's LR at its own optimal batch: along B*, not at one batch)")
    ax.set_title("\n".join(lines), fontsize=9)
    _log_ticks(ax.xaxis)
    _log_ticks(ax.yaxis)  # (only the decades were labelled: an interval's end could not be read)
    ax.set_xlabel(axis_label(law.predictors[0], unit))
    ax.set_ylabel(axis_label(law.target, unit))
    if len(law.predictors) == 1:
        ax.legend(fontsize=8, framealpha=0.85)  # (framed: without, it lay over the band unread)
    else:
        ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.13),
                  ncol=2)  # fmt: skip


#: the most characters a law plot's title line holds (its axes' width at the title's size)
_TITLE_CHARS: Final[int] = 64


def _wrapped(parts: Sequence[str], width: int) -> list[str]:
    """``parts`` joined by ", " into lines of at most ``width`` characters where they fit (a part
    longer than that is a line of its own)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            if lines:
                lines[-1] += ","
            lines.append(part)
    return lines


def _exponent_words(law: PowerLaw, p: str) -> str:
    """``p``'s exponent in the law with its interval where it has one:
    "N^-0.580 [-0.710, -0.450]"."""
    ci = law.exponents_ci.get(p)
    return f"{p}^{law.exponents[p]:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def _draw_law_lines(
    ax: Any,
    law: PowerLaw,
    cell_keys: Sequence[tuple[float, ...]],
    xs_all: list[float],
    x_hi: float,
    colour_of: Callable[[tuple[float, ...]], Any],
    *,
    target: Mapping[str, float] | None = None,
) -> list[float]:
    """The law and its 95% band along its first predictor, from the smallest cell (``xs_all``) to
    ``x_hi``, with a margin of 1.3x either side, one line per value of its other predictors
    (:func:`_line_keys`: the cells', at most :data:`MAX_LAW_LINES`, and the ``target``'s, its
    star on a line), each in ``colour_of`` its values; a band on each line, or where the lines
    were thinned, on the target's line alone (else the middle one: the bands of many lines had
    hidden the points); returns the lines' values."""
    x_name, others = law.predictors[0], law.predictors[1:]
    keys, at_target = _line_keys(others, cell_keys, target)
    thinned = len(cell_keys) > MAX_LAW_LINES
    banded = keys if not thinned else [at_target or keys[len(keys) // 2]]
    drawn: list[float] = []
    unit = data_unit(law.conventions)
    grid = np.geomspace(min(xs_all) / 1.3, x_hi * 1.3, 80)
    for key in keys:
        scales = [{x_name: float(x), **dict(zip(others, key, strict=True))} for x in grid]
        y = np.array([law.predict(s) for s in scales])
        at, mark = _at_words(others, key, unit), " (the target's)" if key == at_target else ""
        label = "law" + (f" at {at}" if at else "") + mark
        c = colour_of(key)
        style = "--" if thinned and key == at_target and key not in cell_keys else "-"
        ax.plot(grid, y, style, color=c, lw=1.6, label=label)
        if key in banded:
            lo, hi = _law_band(law, scales)
            band = "95% band" if key == banded[0] else None  # (one entry: they differ in colour)
            band = f"95% band (of the line at {at})" if band and thinned else band
            ax.fill_between(grid, _finite(lo), _finite(hi), color=c, alpha=0.15, label=band)
        drawn += y.tolist()
    return drawn


#: a predictor's name in a law plot's legend, D in the law's unit (the x axis said "training
#: bytes D", the legend "tokens=1.64e+04": an audit)
_LEGEND_NAMES: Final[dict[str, str]] = {"n_params": "N", "tokens": "D"}


def _at_words(others: Sequence[str], key: Sequence[float], unit: str = "tokens") -> str:
    """The values of a law's other predictors (after its first) that a line or the target's star
    is at, as "D=2e+10 bytes" ("" for a law of one predictor); D in ``unit``."""
    return ", ".join(
        f"{_LEGEND_NAMES.get(p, p)}={v:.3g}" + (f" {unit}" if p == "tokens" else "")
        for p, v in zip(others, key, strict=True)
    )


#: how far (decades) the y axis of a law plot reaches beyond the optima and the law line: a band
#: wider than that (a law fitted on few or noisy cells, extrapolated far) runs off the plot
BAND_DECADES: Final[float] = 1.5


def _finite(a: np.ndarray) -> np.ndarray:
    """``a`` with its non-finite values as NaN (a gap in the band, not an infinite axis)."""
    a = np.asarray(a, dtype=float)
    return np.where(np.isfinite(a), a, np.nan)


def _clamp_ylim(ax: Any, shown: Sequence[float]) -> None:
    """Keep the y axis within :data:`BAND_DECADES` of the values ``shown`` (the law lines, the
    optima, the target's prediction): an interval of many decades would otherwise set the axis
    (at worst to an overflow that matplotlib cannot label)."""
    v = [x for x in shown if np.isfinite(x) and x > 0]
    if not v:
        return
    reach = 10**BAND_DECADES
    lo_c, hi_c = min(v) / reach, max(v) * reach
    lo, hi = ax.get_ylim()  # (autoscaled: with an interval of 0 or inf at its ends, anything)
    lo = max(lo, lo_c) if np.isfinite(lo) and 0 < lo < hi_c else lo_c
    hi = min(hi, hi_c) if np.isfinite(hi) and lo < hi else hi_c
    ax.set_ylim(lo, hi)


def _draw_optimum(
    ax: Any,
    o: CellOptimum,
    x: float,
    target: str,
    *,
    held: bool,
    named: set[str] | None = None,
    color: str | None = None,
) -> None:
    """One cell's optimum of ``target`` at ``x`` with its interval: a red square when held out,
    a hollow grey dot when the cell is not usable, a hollow dot in ``color`` when it is on the
    edge of what the cell tried (:func:`edge_of`: the cell's runs do not bracket it; a surface
    law's such cells had been drawn as plain optima: an audit), else a dot in ``color`` (its law
    line's; black by default); in the legend once per kind not yet in ``named`` (the held-out
    cells have their own entry)."""
    y = getattr(o, target)
    ci = getattr(o, f"{target}_ci")
    style: dict[str, Any] = (
        dict(fmt="s", color="tab:red", ms=6) if held else dict(fmt="o", color=color or "k", ms=4)
    )
    kind = "cell optimum" + (" (95% interval)" if ci else "")
    if not o.usable and not held:
        style, kind = dict(fmt="o", color="tab:gray", ms=4, mfc="none"), "cell left out"
    elif edge_of(o) is not None and not held:
        style.update(mfc="none", mew=1.4, ms=5)
        kind = "optimum on the edge of what the cell tried"
    if named is not None and not held and kind not in named:
        named.add(kind)
        style["label"] = kind
    yerr = None
    if ci:
        yerr = [[max(y - ci[0], 0.0)], [max(ci[1] - y, 0.0)]]
    ax.errorbar([x], [y], yerr=yerr, capsize=2, lw=1, **style)


def _draw_target(ax: Any, law: PowerLaw, ts: dict[str, float]) -> float:
    """The law's prediction at the target scale ``ts`` with its interval, as a star; returns the
    prediction."""
    x_name, others = law.predictors[0], law.predictors[1:]
    at = _at_words(others, [ts[p] for p in others], data_unit(law.conventions))
    yt = law.predict(ts)
    lo_t, hi_t = law.interval(ts)
    lo_t = lo_t if np.isfinite(lo_t) else 0.0
    hi_t = hi_t if np.isfinite(hi_t) else yt * 10 ** (2 * BAND_DECADES)
    ax.errorbar(
        [ts[x_name]],
        [yt],
        yerr=[[yt - lo_t], [hi_t - yt]],
        fmt="*",
        ms=12,
        color="tab:purple",
        capsize=3,
        label=f"the law at the target{f' ({at})' if at else ''}: {yt:.3g}",
    )
    return float(yt)


def _mark_clipped_ends(ax: Any, x: float, lo: float, hi: float) -> None:
    """Each end of the target's interval (``lo``, ``hi``) beyond the y axis as an arrow on its
    edge with the end's value ("↑ 835"): the axis is kept near the optima, and the interval ran
    off it without a mark."""
    y_lo, y_hi = ax.get_ylim()
    for end, edge, marker, dy, va in ((hi, y_hi, "^", -10, "top"), (lo, y_lo, "v", 10, "bottom")):
        if not (end > edge if marker == "^" else end < edge):
            continue
        ax.plot([x], [edge], marker, ms=7, color="tab:purple", clip_on=False)
        arrow = "↑" if marker == "^" else "↓"
        ax.annotate(f"{arrow} {end:.3g}", (x, edge), xytext=(-6, dy), textcoords="offset points",
                    ha="right", va=va, fontsize=7, color="tab:purple")  # fmt: skip


@_styled
def plot_residuals(optima: Sequence[CellOptimum], law: PowerLaw) -> Figure:
    """ln(point / law) per cell (the points those passed: the cells' own optima or a surface
    fit's), with the cells' own 95% intervals and the band of the law's scatter τ; hollow where
    the optimum is on the edge of what the cell tried, coloured as on the law's plot by the law's
    other predictors (:func:`_key_colours`), the legend below the axes (it had covered points)
    and the figure taller the more cells it names (17 names had run into each other)."""
    others = law.predictors[1:]
    pts = [
        (o, s, y)
        for o in optima
        if (s := _cell_scale(o, law.predictors)) is not None
        and (y := getattr(o, law.target)) is not None
    ]
    fig, ax = _subplots(figsize=(6.2 + 1.2 * bool(others), 3.4 + 0.12 * max(0, len(pts) - 8)))
    x_name = law.predictors[0]
    ax.set_xscale("log")
    keys = cell_keys(optima, law)
    colour_of = _key_colours(fig, ax, law, keys)
    if others and len(keys) <= MAX_LAW_LINES:  # (the colours of the law plot's lines, named)
        unit = data_unit(law.conventions)
        for k in keys:
            label = f"cells at {_at_words(others, k, unit)}"
            ax.plot([], [], "o", ms=4, color=colour_of(k), label=label)
    names: list[Any] = []
    for o, s, y in pts:
        pred = law.predict(s)
        r = math.log(y / pred)
        ci = getattr(o, f"{law.target}_ci")
        yerr = [[r - math.log(ci[0] / pred)], [math.log(ci[1] / pred) - r]] if ci else None
        color = (colour_of(_key(s, others)) if others else "k") if o.usable else "tab:gray"
        hollow = dict(mfc="none", mew=1.4) if not o.usable or edge_of(o) is not None else {}
        ax.errorbar([s[x_name]], [r], yerr=yerr, fmt="o", color=color, ms=4, capsize=2, **hollow)
        names.append(ax.annotate(o.cell, (s[x_name], r), fontsize=6, xytext=(3, 3),
                                 textcoords="offset points"))  # fmt: skip
    _log_ticks(ax.xaxis)
    ax.axhline(0, color="tab:orange", lw=1)
    _draw_scatter_band(ax, law.residual_std)
    ax.set_xlabel(axis_label(x_name, data_unit(law.conventions)))
    ax.set_ylabel(f"ln(point / law) of {law.target}")
    cv = f", leave-one-cell-out RMS {law.cv_error:.3f}" if law.cv_error is not None else ""
    ax.set_title(f"residuals of the {law.target} law{cv}", fontsize=9)
    fig.tight_layout()
    _unclutter(fig, names)
    return fig


def _draw_scatter_band(ax: Any, tau: float) -> None:
    """±τ about the law as a band, and in the legend; when τ is 0 (the law passes through the
    points) the legend says so instead of showing no band without a word."""
    if tau:
        label = f"±1 × the cells' scatter about the law, τ ({tau:.3f})"
        ax.axhspan(-tau, tau, color="tab:orange", alpha=0.1, label=label)
    else:
        ax.plot([], [], " ", label="scatter τ = 0: no band")
    ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)


#: where a point's name may go, tried in turn (offset in points, horizontal alignment): above
#: and below either side, then level with it, then further out
_NAME_SPOTS: Final = (
    ((3, 3), "left"), ((3, -9), "left"), ((-3, 3), "right"), ((-3, -9), "right"),
    ((5, -3), "left"), ((-5, -3), "right"), ((3, 10), "left"), ((-3, 10), "right"),
    ((3, -16), "left"), ((-3, -16), "right"),
)  # fmt: skip


def _unclutter(fig: Any, names: Sequence[Any]) -> None:
    """Move each point's name (an annotation) to the first spot of :data:`_NAME_SPOTS` where it
    lies inside the axes and overlaps no point and no name placed before it (the first spot when
    none is)."""
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    dots = [n.axes.transData.transform(n.xy) for n in names]
    placed: list[Any] = [Bbox.from_extents(x - 3, y - 3, x + 3, y + 3) for x, y in dots]
    for name in names:
        for offset, ha in (*_NAME_SPOTS, _NAME_SPOTS[0]):
            name.xyann = offset
            name.set_ha(ha)
            box = name.get_window_extent(renderer)
            inside = name.axes.bbox.contains(box.x0, box.y0) and name.axes.bbox.contains(
                box.x1, box.y1
            )
            if inside and not any(box.overlaps(b) for b in placed):
                break
        placed.append(name.get_window_extent(renderer))


def _draw_surface(
    ax: Any, law: Law | None, cell: str, runs: pd.DataFrame, batch: float | None = None
) -> None:
    """The surface law's fitted loss curve of ``cell`` where it models the loss: within the fit's
    window about the cell's optimum (further above, runs are bounds only) and the runs' span. It
    is at the fit's own optimal batch of the cell (``cell_loss`` takes no batch): a panel of runs
    at one ``batch`` of a batch sweep says so in its legend."""
    loss_at = getattr(law, "cell_loss", None)
    lrs = runs["lr"].dropna().astype(float)
    curve_of = getattr(law, "cell_curves", {}).get(cell)
    if loss_at is None or lrs.empty or curve_of is None:
        return
    from sweeper.fitting.surface import WINDOW

    opt = math.exp(curve_of[0])
    lo, hi = (
        max(float(lrs.min()), opt / math.exp(WINDOW[0])),
        min(float(lrs.max()), opt * math.exp(WINDOW[1])),
    )
    if hi <= lo:
        return
    grid = np.geomspace(lo, hi, 200)
    curve = loss_at(cell, grid)
    if curve is not None:
        at = "" if batch is None else " (at its own optimal batch, not the panel's)"
        ax.plot(grid, curve, "-", color="tab:purple", lw=1.4, label="surface fit" + at)


#: how the transfer plot marks its named points (grid points are plain dots)
_POINT_STYLE: dict[str, tuple[str, str]] = {
    "law": ("tab:green", "law (recommended)"),
    "law_point": ("tab:olive", "law (point)"),
    "measured_optimum": ("black", "the cell's swept optimum"),
    "smallest_cell": ("tab:gray", "smallest cell's optimum"),
    "largest_fitted": ("tab:brown", "largest fitted cell's optimum"),
    "base_width": ("tab:pink", "base width's optimum (muP)"),
    "steplaw": ("tab:red", "Step Law"),
    "deepseek": ("tab:purple", "DeepSeek"),
    "porian": ("tab:orange", "Porian et al."),
}


@_styled
def plot_transfer(result: Mapping[str, Any]) -> Figure | None:
    """The held-out cell of a transfer check: mean loss (± sd over seeds) at every LR it trained,
    the prediction, each baseline and the measured optimum marked (a stored ``TransferResult``
    as a dict). None when the result holds no trained points."""
    lrs, losses = result.get("lrs") or {}, result.get("losses") or {}
    sds = result.get("loss_sd") or {}
    named = [n for n in lrs if n in losses]
    if not named:
        return None
    fig, ax = _subplots(figsize=(6.4, 4.0))
    x = np.array([lrs[n] for n in named], dtype=float)
    y = np.array([losses[n] for n in named], dtype=float)
    e = np.array([sds.get(n) or 0.0 for n in named], dtype=float)
    order = np.argsort(x)
    ax.errorbar(x[order], y[order], yerr=e[order], fmt="o-", color="tab:blue", ms=3, lw=0.8,
                alpha=0.6, label="trained (mean ± sd over seeds)")  # fmt: skip
    for name, (color, label) in _POINT_STYLE.items():
        if name in named and name != "measured_optimum":
            ax.axvline(lrs[name], color=color, lw=1.2, ls="--", alpha=0.8)
            ax.plot([lrs[name]], [losses[name]], "D", color=color, ms=6, label=label)
    if "measured_optimum" in named:
        _draw_measured(ax, lrs, losses)
    elif result.get("measured_lr"):
        _draw_measured_lr(ax, float(result["measured_lr"]), lrs, losses)
    ax.set_xscale("log")
    _log_ticks(ax.xaxis)
    fin = y[np.isfinite(y)]
    if fin.size:
        ax.set_ylim(fin.min() * 0.995, min(fin.max(), fin.min() * 1.25) * 1.005)
    ax.set_xlabel("peak LR")
    ax.set_ylabel("final val loss (nats)")
    from sweeper.transfer.plan import transfer_where

    # (validate-transfer's words: a cell below the fitted range had been titled "0.1x beyond")
    where = f":\n{transfer_where(result)}" if result.get("extrapolation") else ""
    ax.set_title(f"held-out {result.get('holdout_cell', '')}{where}", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def _draw_measured(ax: Any, lrs: Mapping[str, float], losses: Mapping[str, float]) -> None:
    """The cell's swept optimum on top of the other marks, as a larger hollow black diamond (a
    baseline at the same LR, drawn after it, hid it), naming the points it coincides with."""
    lr, loss = lrs["measured_optimum"], losses["measured_optimum"]
    same = [
        label
        for name, (_c, label) in _POINT_STYLE.items()
        if name != "measured_optimum" and name in losses and np.isclose(lrs.get(name, 0.0), lr)
    ]
    label = _POINT_STYLE["measured_optimum"][1] + "".join(f"\n(= {x})" for x in same)
    ax.axvline(lr, color="black", lw=1.2, ls=":", zorder=4)
    ax.plot([lr], [loss], "D", ms=11, mfc="none", mec="black", mew=1.6, zorder=5, clip_on=False,
            label=label)  # fmt: skip


def trained_at(
    *, result_lrs: Mapping[str, float], losses: Mapping[str, float], lr: float
) -> str | None:
    """The name of a check's trained point at ``lr`` (one with a loss), None when none is."""
    return next((n for n, v in result_lrs.items() if n in losses and np.isclose(v, lr)), None)


def _draw_measured_lr(
    ax: Any, lr: float, lrs: Mapping[str, float], losses: Mapping[str, float]
) -> None:
    """The cell's measured optimum of a check stored before its ``lrs`` held one (its
    ``measured_lr`` alone: such a check's plot had drawn none): the hollow diamond where a point
    trained at that LR gives its loss, else a dotted black line at it."""
    at = trained_at(result_lrs=lrs, losses=losses, lr=lr)
    if at is not None:
        _draw_measured(
            ax, {**lrs, "measured_optimum": lr}, {**losses, "measured_optimum": losses[at]}
        )
        return
    ax.axvline(lr, color="black", lw=1.4, ls=":", zorder=4,
               label="the cell's measured optimum\n(not trained: no loss)")  # fmt: skip


@_styled
def plot_batch_holdout(
    best_by_batch: Mapping[float, float],
    points: Mapping[str, float],
    *,
    cell: str,
    measured: float | None = None,
    measured_label: str = "measured optimum",
) -> Figure | None:
    """The held-out budget of a batch-size ladder: the best loss at each trained batch (the
    minimum over its LRs), with each predicted B* (``points``: name -> batch in tokens; a name of
    ``_POINT_STYLE`` gets its colour and label, any other is drawn under its own name) and the
    measured optimum (``measured``, drawn as ``measured_label``) marked. None when no batch was
    trained."""
    if not best_by_batch:
        return None
    fig, ax = _subplots(figsize=(6.4, 4.0))
    x = np.array(sorted(best_by_batch), dtype=float)
    y = np.array([best_by_batch[b] for b in sorted(best_by_batch)], dtype=float)
    ax.plot(x, y, "o-", color="tab:blue", ms=4, lw=0.8, label="trained (best over LRs)")
    extra = iter(("tab:green", "tab:olive", "tab:cyan"))
    for name, batch in points.items():
        color, label = _POINT_STYLE.get(name) or (next(extra, "tab:gray"), name)
        ax.axvline(batch, color=color, lw=1.2, ls="--", alpha=0.8, label=label)
    if measured:
        ax.axvline(measured, color="black", lw=1.2, alpha=0.8, label=measured_label)
    ax.set_xscale("log")
    _ticks_at(ax.xaxis, x.tolist())
    ax.set_xlabel("batch (tokens)")
    ax.set_ylabel("final val loss (nats)")
    ax.set_title(f"held-out budget {cell}", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


@_styled
def plot_batch_surface(
    runs: pd.DataFrame, optima: Sequence[CellOptimum], *, unit: str = "tokens"
) -> Figure | None:
    """Loss over (LR, batch) in each cell where the batch size was swept, the batch in ``unit``
    (:func:`data_unit`); None if none was."""
    swept = [o for o in optima if batch_swept(o)]
    if not swept:
        return None
    ncols = min(3, len(swept))
    nrows = math.ceil(len(swept) / ncols)
    fig, axes = _subplots(nrows, ncols, figsize=(4.4 * ncols, 3.6 * nrows), squeeze=False)
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
        _draw_contours(ax, o)
        if o.lr and o.batch_tokens:
            ax.plot([o.lr], [o.batch_tokens], "*", color="tab:red", ms=12)
        ax.set_xscale("log")
        ax.set_yscale("log")
        if len(r):  # every run inside, whatever the fit's window (the contours' extent)
            ax.set_xlim(float(r["lr"].min()) / 1.25, float(r["lr"].max()) * 1.25)
            ax.set_ylim(float(r["batch_tokens"].min()) / 1.4, float(r["batch_tokens"].max()) * 1.4)
            _ticks_at(ax.yaxis, sorted(r["batch_tokens"].unique()))
        _log_ticks(ax.xaxis, most=_PANEL_LR_TICKS)
        ax.set_title(o.cell, fontsize=9)
        ax.set_xlabel("peak LR")
        ax.set_ylabel(f"batch ({unit})")
        fig.colorbar(sc, ax=ax, label="final val loss (nats)")
    fig.tight_layout()
    return fig


#: the most LR ticks a panel of several labels (seven had run together: an audit)
_PANEL_LR_TICKS: Final[int] = 4


def _ticks_at(axis: Any, values: Sequence[float]) -> None:
    """Label a log axis at ``values`` only (the batches tried, as "1,024"), with no minor labels:
    "3×10¹, 6×10¹" do not say that 32 and 64 were tried."""
    from matplotlib.ticker import NullFormatter, NullLocator

    axis.set_ticks(list(values), [f"{v:,.0f}" for v in values])
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


#: the contours of a cell's 2-D fit the batch figure draws: its loss this far (relative) above
#: the fit's minimum over the window (a quadratic bowl's excess grows as the squared distance)
_CONTOUR_EXCESS: Final = (0.0025, 0.01, 0.04)


def _draw_contours(ax: Any, o: CellOptimum) -> None:
    """A cell's 2-D quadratic fit as contours over its window at :data:`_CONTOUR_EXCESS` above its
    minimum there, labelled (evenly spaced levels crowded the steep corners, labels in a blob)."""
    if not (len(o.curve_coefs) == 6 and o.window_lr and o.window_batch_tokens):
        return
    LR, BT = np.meshgrid(np.geomspace(*o.window_lr, 60), np.geomspace(*o.window_batch_tokens, 60))
    Z = o.curve(LR, BT)
    lo = float(np.nanmin(Z))
    if not np.isfinite(lo):
        return
    levels = lo * (1 + np.array(_CONTOUR_EXCESS))
    cs = ax.contour(LR, BT, Z, levels=levels, colors="k", linewidths=0.5, alpha=0.6)
    ax.clabel(cs, fontsize=6, fmt="%.3f", inline_spacing=2)

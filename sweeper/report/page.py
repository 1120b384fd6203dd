"""The sweep report: PNG plots (see :mod:`sweeper.report.plots`) and one ``index.html``.

The self-contained HTML page embeds the images (base64) and holds the tables: cells, optima, laws, the recipe and
the transfer check when given. Nothing here fits: it draws what :mod:`sweeper.fitting` returned.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pandas as pd

from sweeper.fitting.laws import Law, LossLaw, PowerLaw, formula
from sweeper.recipe.warning_kinds import forced
from sweeper.report.plots import (
    MAX_LAW_LINES,
    at_best_batch,
    batch_swept,
    cell_keys,
    data_unit,
    edge_of,
    plot_batch_surface,
    plot_law,
    plot_loss_vs_lr,
    plot_residuals,
    plot_transfer,
    report_style,
    runs_off_axis,
    target_point,
    trained_at,
)

# the plots live in their own module; every name is importable from here as before
from sweeper.report.plots import _cell_scale as _cell_scale
from sweeper.report.plots import _law_band as _law_band
from sweeper.report.plots import _log_ticks as _log_ticks
from sweeper.study.runs import DEVICE_PRECISION, device_kinds, trained

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sweeper.fitting import CellOptimum
    from sweeper.fitting.conventions import Conventions
    from sweeper.recipe.recipe import Recipe

__all__ = ["ReportInputs", "TransferShown", "write_report"]


@dataclass(frozen=True)
class TransferShown:
    """A stored transfer check as the page shows it: its result (``TransferResult.to_dict``
    without the law) and the LR law it fitted without the held-out cell, drawn on its own figure
    (None: not stored, or not a power law)."""

    result: Mapping[str, Any]
    law: PowerLaw | None = None

    @property
    def title(self) -> str:
        """The check's name on the page: its held-out cell, the cells its law was fitted on and
        the law's method (two checks of one cell differ in those)."""
        fit = list(self.result.get("fit_cells") or [])
        cells = ", ".join(fit) if len(fit) <= 4 else f"{len(fit)} cells, {fit[0]} to {fit[-1]}"
        how = f" by {self.law.method}" if self.law is not None else ""
        return f"held-out cell {self.result['holdout_cell']}, law fitted on {cells}{how}"


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report shows. ``target_scale`` is the big run's scale (predictor → value)."""

    sweep: str
    runs: pd.DataFrame
    optima: Sequence[CellOptimum]
    laws: Sequence[Law]
    recipe: Recipe | None = None
    #: the stored transfer checks, the one stored last first (each its own section and figures)
    transfers: Sequence[TransferShown] = ()
    target_scale: Mapping[str, float] | None = None
    #: what the report had to assume (e.g. a law fitted for the report alone), shown at the top
    notes: Sequence[str] = ()
    #: what the sweep trained (model, loop, optimizer, the LR's meaning), one line at the top
    measured: str = ""
    #: the sweep's conventions (what D and the batch count); None: the laws' (:func:`_page_unit`)
    conventions: Conventions | None = None
    #: how a law-sampler sweep's runs were planned and why the plan stopped ("" for the others)
    planned: str = ""


# ---------------------------------------------------------------- HTML


def _num(v: float) -> str:
    """A number in a table: four significant digits."""
    return f"{v:.4g}"


def _count(n: int, noun: str) -> str:
    """``n`` ``noun``s: "1 run", "2 runs" (the page had said "1 runs")."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _table(df: pd.DataFrame, classes: str = "t") -> str:
    """``df`` as an HTML table, in a box that scrolls sideways when the window is narrower (at
    800 px the cells table ran off the page); a missing value (NaN, None: a law fitted for the
    page has no id) is an empty cell."""
    shown = df.apply(lambda c: c.fillna("") if c.dtype == object else c)  # (na_rep skips None)
    table = shown.to_html(index=False, border=0, classes=classes, na_rep="", float_format=_num)
    return f"<div class='scroll'>{table}</div>"


def _page_unit(inputs: ReportInputs) -> str:
    """What the page's D and batches count (:func:`~sweeper.report.plots.data_unit`): by the
    sweep's conventions when given, else its laws'."""
    conv = inputs.conventions or next((law.conventions for law in inputs.laws), None)
    return data_unit(conv)


def _optima_table(
    optima: Sequence[CellOptimum], laws: Sequence[Law] = (), unit: str = "tokens"
) -> pd.DataFrame:
    """One row per cell: its per-cell estimate and, beside each, the surface laws' own optimum
    of the cell (the points of their law plots: the two can differ; marked † outside the cell's
    own interval). Batches in ``unit`` (:func:`_page_unit`). Why a cell is not usable is said
    below the table (:func:`_unusable_notes`), which the long reasons had crushed."""
    own = {t: getattr(_surface_law(laws, t), "cell_optima", None) or {} for t in _TARGETS}
    edges = {t: surface_edges(_surface_law(laws, t)) for t in _TARGETS}
    swept = any(batch_swept(o) for o in optima)
    rows = []
    for o in optima:
        row = {
            "cell": o.cell,
            "N": o.n_params,
            "D": o.tokens,
            "runs": o.n_runs,
            "used": o.n_used,
            "loss at optimum": o.loss,
            "lr*": o.lr,
            # ([low, high], as the laws table and the recipe write an interval: an audit)
            "lr 95% CI": f"[{o.lr_ci[0]:.3g}, {o.lr_ci[1]:.3g}]" if o.lr_ci else "",
        }
        _add_surface_optimum(row, o, "lr", own["lr"], unit)
        row[f"batch* ({unit})" if swept else f"batch ({unit})"] = o.batch_tokens
        _add_surface_optimum(row, o, "batch_tokens", own["batch_tokens"], unit)
        row["edge"] = _edge_column(o, edges)  # (the batch's edge had been blank: an audit)
        row["usable"] = "yes" if o.usable else "no (below)"
        rows.append(row)
    return pd.DataFrame(rows)


def _edge_column(o: CellOptimum, edges: Mapping[str, Mapping[str, Mapping[str, str]]]) -> str:
    """The cells table's edge of ``o``: the per-cell estimate's ("batch low"), then the surface
    laws' where their notes name the cell (:func:`surface_edges`, by target): "surface law: LR
    high" (a cell the LR law's notes put on the top edge had a blank column: an audit)."""
    own = " ".join(edge_of(o) or ())
    theirs = {w: side for by_cell in edges.values() for w, side in by_cell.get(o.cell, {}).items()}
    if not theirs:
        return own
    said = "surface law: " + ", ".join(f"{w} {side}" for w, side in sorted(theirs.items()))
    return f"{own}; {said}" if own else said


#: the targets a surface law's own cell optima are shown of, in the cells table
_TARGETS = ("lr", "batch_tokens")
#: the mark of a surface law's optimum outside the cell's own interval, and its footnote
_OUTSIDE = "†"
_OUTSIDE_NOTE = (
    f"{_OUTSIDE} the surface law's optimum lies outside the cell's own 95% interval (the per-cell "
    "estimate's): the two fits disagree there."
)


def _surface_column(target: str, unit: str) -> str:
    """The cells table's column of a surface law's own optima of ``target``."""
    return "lr* of the surface law" if target == "lr" else f"batch* of the surface law ({unit})"


def _add_surface_optimum(
    row: dict[str, Any], o: CellOptimum, target: str, own: Mapping[str, float], unit: str
) -> None:
    """Set ``row``'s column of the surface law's own optimum of ``target`` (none when the page
    has no such law), marked :data:`_OUTSIDE` beside the cell's own interval it lies outside."""
    if not own:
        return
    value, ci = own.get(o.cell), getattr(o, f"{target}_ci")
    shown: float | str | None = value
    if value is not None and ci is not None and not ci[0] <= value <= ci[1]:
        shown = f"{_num(value)}\u00a0{_OUTSIDE}"  # (a narrow column wrapped the mark alone)
    row[_surface_column(target, unit)] = shown


def _outside_notes(table: pd.DataFrame) -> list[str]:
    """The footnote of :data:`_OUTSIDE` when the cells ``table`` has the mark."""
    marked = table.map(lambda v: isinstance(v, str) and v.endswith(_OUTSIDE)).any(axis=None)
    return [f"<p class='muted'>{html.escape(_OUTSIDE_NOTE)}</p>"] if marked else []


def _unusable_notes(optima: Sequence[CellOptimum], unit: str = "tokens") -> list[str]:
    """Why each cell without an optimum of its own has none, one line each, batches in
    ``unit`` (:func:`_in_unit`)."""
    return [
        f"<p class='muted'>{html.escape(o.cell)}: no optimum of its own: "
        f"{html.escape(_in_unit(o.reason, unit))}</p>"
        for o in optima
        if not o.usable
    ]


#: a count of tokens as the fits write it into their notes ("batch 32 tokens", "(2048 tokens)")
_TOKENS_COUNT: Final = re.compile(r"(?<![\w.])(\d[\d.]*(?:e[+-]?\d+)?) tokens\b")


def _in_unit(text: str, unit: str) -> str:
    """A fit's note or reason with its counts of tokens in the page's ``unit``: the fits write
    "tokens" whatever the data counts, and a bytes page said "batch (bytes)" in its tables but
    "top at batch 32 tokens" in its boxes (an audit)."""
    return text if unit == "tokens" else _TOKENS_COUNT.sub(rf"\1 {unit}", text)


def _exponent_text(law: PowerLaw, p: str) -> str:
    """"n_params: -0.269 [-0.478, -0.056]"; without its interval when the law has none (fitted
    without resamples: the table had raised a KeyError); flagged "(sign not determined)" when
    the interval includes 0 (a 3-cell fit's small leave-one-out errors had stood beside one)."""
    ci = law.exponents_ci.get(p)
    if not ci:
        return f"{p}: {law.exponents[p]:+.3f}"
    unsigned = " (sign not determined)" if law.sign_undetermined(p) else ""
    return f"{p}: {law.exponents[p]:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]{unsigned}"


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
                "prefactor [95% CI]": f"{law.prefactor:.3g} "
                + (f"[{law.prefactor_ci[0]:.3g}, {law.prefactor_ci[1]:.3g}]"
                   if law.prefactor_ci else ""),
                "exponents [95% CI]": "; ".join(_exponent_text(law, p) for p in law.predictors),
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
table.t th{background:#f6f6f6}table.recipe :is(th,td):nth-child(odd){text-align:left}
img{max-width:100%;box-sizing:border-box;border:1px solid #eee;margin:.5em 0}
.warn{background:#fff4e5;border-left:4px solid #f0a030;padding:.4em .8em;margin:.3em 0}
.muted{color:#777;font-size:.85em}
.scroll{overflow-x:auto}
@media (max-width:760px){.fig img{max-width:none;width:760px}}
"""


def _img(path: Path, alt: str) -> str:
    """The figure embedded; on a narrow window it keeps a readable width and scrolls sideways
    (shrunk to a phone's column, a 3-panel figure's text had been 4 px: an audit)."""
    data = base64.b64encode(path.read_bytes()).decode()
    img = f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}"'
    return f"<div class='scroll fig'>{img} title=\"{html.escape(path.name)}\"></div>"


def _transfer_html(t: Mapping[str, Any]) -> list[str]:
    """The check in one sentence, then one row per trained point."""
    from sweeper.transfer.plan import transfer_rows, transfer_where

    pred, point = t["predicted_lr"], t.get("predicted_lr_point")
    head = (  # (where: a cell below the fitted range had been "beyond the largest", an audit)
        f"Held-out cell {t['holdout_cell']} ({transfer_where(t)}), law fitted on "
        f"{t.get('law_cells')} cells: predicted LR {pred:.3g}"
        + (f" (point estimate {point:.3g})" if point and point != pred else "")
        + f"; the cell's measured optimum {t['measured_lr']:.3g}, log2 error "
        f"{t['log2_error']:+.2f}"
    )
    if t.get("regret_pct") is not None:
        se = t.get("regret_se_pct")
        head += f"; regret {t['regret_pct']:+.2f}% of the best loss trained in the cell" + (
            f" (±{se:.2f}, 1 s.e. from {t.get('seeds')} seeds)" if se is not None else ""
        )
    rows = pd.DataFrame(transfer_rows(t))
    for col in ("regret_pct", "log2_error"):  # two decimals, signed: 1e-16 is 0
        rows[col] = [f"{v + 0.0:+.2f}" if v is not None else "" for v in rows[col].round(2)]
    rows = rows.rename(
        columns={"loss": "loss (mean over seeds)", "sd": "sd over seeds",
                 "regret_pct": "regret (% of best)", "log2_error": "log2 vs measured optimum"}
    )  # fmt: skip
    return [f"<p>{html.escape(head + '.')}</p>", _table(rows)]


def _fitted_sources(r: Recipe, role: str | None = None) -> set[str]:
    """The sweeps whose fitted laws made ``r`` (of its ``role`` law only: "lr", "batch")."""
    return {
        str(p["source"])
        for k, p in r.provenance.items()
        if p.get("method") != "published" and p.get("source") and role in (None, k)
    }


def _recipe_summary(r: Recipe) -> str:
    """The recipe in one sentence: its LR and batch, at what target, how far beyond the cells."""
    far = r.extrapolation_factor
    beyond = f", {far:.3g}x beyond the largest fitted cell" if far and far > 1 else ""
    return (
        f"Peak LR {r.lr.value:.3g} ({_lr_interval_words(r)}), global batch "
        f"{r.global_batch_sequences} × {r.seq_len} tokens, for {r.n_params:.3g} parameters on "
        f"{r.tokens:.3g} tokens{beyond}; {len(r.warnings)} warning(s), most important first."
    )


def _lr_interval_words(r: Recipe) -> str:
    """The LR law's interval at the target, said to be the law's, around the law's point when
    the recipe's peak LR is not that point (a risk-aware choice: the headline had put the
    interval beside it, as if around it)."""
    words = r.lr.text(3, f"the law's {r.level:.0%} interval")
    if r.lr_point == r.lr.value:
        return words
    point = f"{r.lr_point:.3g}"
    where = f"; the law's point {point}" if r.lr.degenerate else f" around its point {point}"
    return f"risk-aware; {words}{where}"


#: how many of a recipe's warnings the page shows open; the rest (ranked lower) are folded
_OPEN_WARNINGS = 3


def _recipe_warnings(warnings: Sequence[str]) -> list[str]:
    """The recipe's warnings, most important first (as the recipe ranks them): the first
    :data:`_OPEN_WARNINGS` as boxes, the rest folded under one line (an audit found the values
    buried under 13 boxes of equal weight)."""
    boxes = [f"<div class='warn'>{html.escape(str(w))}</div>" for w in warnings]
    if len(boxes) <= _OPEN_WARNINGS + 1:
        return boxes
    rest = boxes[_OPEN_WARNINGS:]
    folded = f"<details><summary>{len(rest)} more warnings</summary>{''.join(rest)}</details>"
    return [*boxes[:_OPEN_WARNINGS], folded]


def _recipe_html(r: Recipe, sweep: str) -> list[str]:
    """The recipe as ``sweeper recommend`` prints it (:func:`~sweeper.recipe.table.recipe_rows`),
    its warnings first; and a warning above them when its laws were fitted on another sweep than
    the page's (the page's laws, cells and plots are not the recipe's)."""
    from sweeper.recipe.table import recipe_rows

    parts = ["<h2>Recipe written anyway (forced)</h2>" if forced(r.warnings)
             else "<h2>Recommended recipe</h2>",
             f"<p><b>{html.escape(_recipe_summary(r))}</b></p>"]  # fmt: skip
    others = sorted(_fitted_sources(r) - {sweep})
    published = bool(r.provenance) and all(
        p.get("method") == "published" for p in r.provenance.values()
    )
    if others or published:
        made = f"the laws of {', '.join(others)}" if others else "published laws only"
        parts.append(
            f"<div class='warn'>this recipe was made from {html.escape(made)}, not from "
            f"{html.escape(sweep)}'s: the laws, cells and plots on this page are not the ones it "
            "used</div>"
        )
    parts += _recipe_warnings(r.warnings)
    head = ["setting", "value", f"{r.level:.0%} interval / note"]
    parts.append(_table(pd.DataFrame(recipe_rows(r), columns=head), classes="t recipe"))
    return parts


def _surface_law(laws: Sequence[Law], target: str = "lr") -> Law | None:
    """The stored law of ``target`` when it is a surface fit (the LR law draws each cell's
    curve), else None."""
    return next((x for x in laws if x.target == target and x.method == "surface"), None)


def _has_parabola(o: CellOptimum) -> bool:
    """Whether :func:`~sweeper.report.plots.plot_loss_vs_lr` draws ``o``'s parabola."""
    return bool(o.window_lr and o.curve_coefs)


def _held_at_bound(o: CellOptimum) -> bool:
    """Whether ``o``'s parabola still falls at its optimum: the optimum was held at the bound the
    next LR up sets (:mod:`sweeper.fitting._parabola`: the best LR when that LR is on the cliff,
    else halfway to it in ln LR), not at the curve's minimum."""
    if not (o.lr and o.window_lr and o.curve_coefs) or abs(math.log(o.lr / o.window_lr[1])) > 1e-9:
        return False
    below, above = o.curve([o.lr / 1.01, o.lr * 1.01])  # (the window's top is also the vertex
    return bool(above < below - 1e-9 * abs(below))  # when that lies above the best LR: flat there)


def _why_no_parabola(o: CellOptimum) -> str:
    """Why ``o`` has no parabola to draw, in a few words."""
    if o.method != "parabola":
        return f"the {o.method} estimate fits no curve"
    if o.reason:
        return o.reason
    return next((n for n in o.notes if "parabola" in n), "no parabola was fitted")


def _loss_vs_lr_caption(
    optima: Sequence[CellOptimum],
    surface: Law | None,
    off_axis: int = 0,
    batch_swept: bool = False,
    unit: str = "tokens",
) -> str:
    """The caption of ``loss_vs_lr.png``: only what is drawn (the orange parabola where a cell has
    one, the interval where the estimate has one, the surface law's curve where it has one);
    batches in ``unit`` (:func:`_in_unit`)."""
    text = (
        "Faint points are single runs, dots their mean over seeds, red crosses diverged runs "
        "(they bound the range and are not fitted)."
    )
    if batch_swept:
        text += (
            " Where a cell swept the batch size, its panel shows the runs at the batch tried "
            "nearest its optimal batch (named in its title), and its parabola is the cell's 2-D "
            "fit at that batch, so the curve's minimum can sit beside the dashed optimum (at the "
            "optimal batch), or below every point drawn, pulled by the runs at the other batches; "
            "the black square, its batch (in the title's unit) beside it, is the cell's best "
            "point (mean over seeds) where that is at another batch; the batch figure below "
            "shows every run."
        )
    if off_axis:
        text += (
            f" {off_axis} run(s) beyond a panel's loss axis are drawn as open triangles on its "
            "edge, pointing their way."
        )
    with_curve = [o for o in optima if _has_parabola(o)]
    without = [o for o in optima if not _has_parabola(o)]
    if with_curve:
        where = f" (in {len(with_curve)} of {len(optima)} cells)" if without else ""
        text += (
            f" The orange curve is the parabola in ln LR fitted to the best LR and the LRs below it"
            f"{where}; the next LR up only bounds the optimum (above it the loss rises steeply)."
        )
        held = [o.cell for o in with_curve if _held_at_bound(o)]
        if held:
            text += (
                f" In {', '.join(held)} the curve still falls at the optimum, which is held at "
                "that bound: the best LR when the next LR up is on the cliff, else halfway (in ln "
                "LR) to it; the interval can end there too."
            )
    methods = {o.method for o in without}
    if without and not with_curve and len(methods) == 1 and methods != {"parabola"}:
        text += f" No curve is drawn per cell: the {methods.pop()} estimate fits none."
    elif without:
        text += (
            " No parabola is drawn in "
            + "; ".join(f"{o.cell} ({_in_unit(_why_no_parabola(o), unit)})" for o in without)
            + "."
        )
    if any(o.lr for o in optima):
        ci = " and the band its 95% bootstrap interval" if any(o.lr_ci for o in optima) else ""
        est = "/".join(sorted({o.method for o in optima if o.lr}))
        text += (
            f" The dashed line is the cell's optimum by the per-cell {est} estimate (the table's; "
            f"grey when the cell is left out){ci}."
        )
    curves = getattr(surface, "cell_curves", None) or {}
    drawn = [o.cell for o in optima if o.cell in curves]
    if drawn:
        where = "" if len(drawn) == len(optima) else f" (in the {len(drawn)} cells it fitted)"
        text += (
            f" The purple curve is the surface law's joint fit in each cell{where}, at the cell's "
            "optimal batch: one model of every run, its optimum in each cell the law's plus that "
            "cell's fitted deviation from it."
        )
        if batch_swept:
            text += (
                " On a batch sweep that curve is at the surface's own optimal batch, which can "
                "differ from the batch of the runs drawn, so it need not pass through them."
            )
    return text


def _method_base(method: str) -> str:
    """The fitting method's name without its options (``band0.0025-runs+ols`` -> ``band``)."""
    m = re.match(r"[a-z]+", method)
    return m.group(0) if m else method


def _law_optimum(
    o: CellOptimum, target: str, value: float, method: str, edge: Mapping[str, str] | None = None
) -> CellOptimum:
    """``o`` with its optimum of ``target`` set to a law's ``value`` (no interval): a point the
    law's fit used, so drawn as usable; on the edges ``edge`` names (:func:`surface_edges`, "LR"
    and "batch" to "high", "low" or "one"), which it had dropped: the cells the law's notes name
    as unbracketed were drawn as plain optima (an audit)."""
    edge = edge or {}
    changes: dict[str, Any] = {target: value, f"{target}_ci": None}
    return replace(o, **changes, method=method, usable=True, on_edge=bool(edge),
                   edge=edge.get("LR"), batch_edge=edge.get("batch"), reason="")  # fmt: skip


#: how a surface law's notes name the edge of a cell they list (:func:`surface_edges`)
_EDGE_SIDES: Final[dict[str, tuple[str, str]]] = {
    "top": ("LR", "high"),
    "bottom": ("LR", "low"),
    "smallest": ("batch", "low"),
    "largest": ("batch", "high"),
    "one": ("batch", "one"),
}
#: one cell of such a note: "w32-d2-t819k (top at batch 512 tokens)"
_NOTED_CELL: Final = re.compile(r"(\S+) \((\w+)[^()]*\)")


def surface_edges(law: Law | None) -> dict[str, dict[str, str]]:
    """The cells whose optimum ``law``'s fit has but their own runs do not bracket, as its notes
    name them: the best run on the top or bottom of the cell's LR range
    (:data:`~sweeper.fitting.methods.EDGE_NOTE`; not a cell whose edge is at a batch other than
    its best), or its best batch the smallest or largest tried, or the only one
    (:data:`~sweeper.fitting.methods.BATCH_EDGE_NOTE`): cell -> {"LR": "high", "batch": "low"}.
    An LR law takes both; a batch law the batch's alone."""
    from sweeper.fitting.methods import BATCH_EDGE_NOTE, EDGE_NOTE

    heads = [BATCH_EDGE_NOTE] + ([EDGE_NOTE] if law is not None and law.target == "lr" else [])
    out: dict[str, dict[str, str]] = {}
    for note in getattr(law, "notes", ()) or ():
        head = next((h for h in heads if note.startswith(h + ": ")), None)
        for cell, word in _NOTED_CELL.findall(note[len(head) + 2 :] if head else ""):
            if word in _EDGE_SIDES:
                what, side = _EDGE_SIDES[word]
                out.setdefault(cell, {})[what] = side
    return out


#: how the page says an edge of :func:`surface_edges`
_EDGE_WORDS: Final[dict[tuple[str, str], str]] = {
    ("LR", "high"): "best LR the highest tried",
    ("LR", "low"): "best LR the lowest tried",
    ("batch", "high"): "best batch the largest tried",
    ("batch", "low"): "best batch the smallest tried",
    ("batch", "one"): "one batch tried",
}


def _edge_text(edge: Mapping[str, str]) -> str:
    """An edge of :func:`surface_edges` in words: "best LR the highest tried, best batch the
    smallest tried"."""
    return ", ".join(_EDGE_WORDS.get((w, side), f"{w} {side}") for w, side in sorted(edge.items()))


#: a bound-only cell's note of a surface fit (sweeper.fitting._surface_fit.check_bounds): its
#: cell, the lowest LR of its bounds, and whether the law agrees with it
_BOUND_NOTE: Final = re.compile(
    r"cell (\S+): .*?\(bounds; the lowest at lr=([0-9.eE+-]+)\): not fitted, only its bound"
)


def law_bounds(law: Law) -> dict[str, tuple[float, bool]]:
    """The cells ``law``'s fit has no optimum of, only a bound on it (every run at and above an
    LR diverged or lies past the fit's window), as its notes name them: cell -> (that LR,
    whether the law puts the optimum above it: the cell or the law is wrong there). An audit
    found such a cell only in a warning box, not on the law's plot."""
    out: dict[str, tuple[float, bool]] = {}
    for note in getattr(law, "notes", ()) or ():
        m = _BOUND_NOTE.match(note)
        if m:
            out[m.group(1)] = (float(m.group(2)), "above it" in note[m.end() :])
    return out


def _why_missing(law: Law) -> str:
    """Why a cell has no point of ``law``'s own: a batch law's cell whose best batch is on the edge
    of its batch range (a bound, :data:`~sweeper.fitting.methods.BATCH_EDGE_NOTE`), or a cell the
    fit left out (a batch-edge cell had been captioned as left out: a fitting fix's review)."""
    from sweeper.fitting.methods import BATCH_EDGE_NOTE

    if law.target == "batch_tokens" and any(
        n.startswith(BATCH_EDGE_NOTE) for n in getattr(law, "notes", ())
    ):
        return (
            f"cells the {law.method} fit left out, or whose best batch is on the edge of the "
            "batch range tried, a bound: see the law's notes"
        )
    return f"cells the {law.method} fit left out"


def _law_points(
    optima: Sequence[CellOptimum],
    law: PowerLaw,
    *,
    keep: Sequence[str] = (),
    table_column: str | None = None,
) -> tuple[list[CellOptimum], str, str]:
    """The cell optima to draw with ``law``, what they are in a few words, and a sentence on them
    for the law plot's caption.

    A surface law's points are its own cell optima (``cell_optima``: the fit with a free optimum
    per cell under the shared curve shape, whose scatter about the law is the band's), not the
    per-cell estimate's (``optima``, the parabola's), which can disagree with the law's line even
    in the sign of its slope; the cells it did not fit are not drawn. Any other law, or a surface
    law stored without cell optima, gets ``optima``, and the sentence names their method when it
    is not the law's. ``keep``: cells drawn from ``optima`` whatever the law (held-out cells).
    ``table_column``: the cells table's column of those own optima, when it shows this law's."""
    target = law.target
    own = getattr(law, "cell_optima", None) or {}
    if any(o.cell in own for o in optima):
        edges = surface_edges(law)
        points = [
            o
            if o.cell in keep
            else _law_optimum(o, target, float(own[o.cell]), law.method, edges.get(o.cell))
            for o in optima
            if o.cell in own or o.cell in keep
        ]
        missing = [o.cell for o in optima if o.cell not in own and o.cell not in keep]
        source = f"the {law.method} fit's own cell optima"
        table = f"the table's column '{table_column}'" if table_column else "not in the table"
        text = (
            f"The points are {source} (its fit with a free optimum in each cell under the shared "
            "curve shape), from the same fit as the line; they have no bars: the fit keeps no "
            f"interval for them. They are {table}; the table's per-cell estimate can differ."
        )
        if missing:
            text += f" Not drawn ({_why_missing(law)}): {', '.join(missing)}."
        return points, source, text + _edge_sentence(points, edges)
    methods = sorted({o.method for o in optima})
    source = f"the cells' optima by the per-cell {'/'.join(methods)} estimate"
    bars = " with their 95% intervals" if any(getattr(o, f"{target}_ci") for o in optima) else ""
    edged = _edge_sentence(optima, {})
    if methods == [_method_base(law.method)]:
        return list(optima), source, f"The points are {source} (the table's){bars}." + edged
    why = " (the stored law carries no cell optima of its own)" if law.method == "surface" else ""
    return (
        list(optima),
        source,
        (
            f"The points are {source} (the table's){bars}, not optima of the {law.method} fit that "
            f"gives the line{why}: the two methods can disagree." + edged
        ),
    )


def _edge_sentence(
    points: Sequence[CellOptimum], edges: Mapping[str, Mapping[str, str]]
) -> str:
    """The caption's sentence on the hollow points of a law plot: the usable optima on the edge
    of what their cell tried (:func:`~sweeper.report.plots.edge_of`), named with ``edges``'
    words where the law's notes give them (:func:`surface_edges`), else the table's."""
    hollow = [o for o in points if o.usable and edge_of(o) is not None]
    if not hollow:
        return ""
    named = "; ".join(
        f"{o.cell} ({_edge_text(edges[o.cell])})" if o.cell in edges else o.cell for o in hollow
    )
    source, rest = (
        ("the law's notes and the table's edge column", "they rest on the curve's shape from the "
         "other cells") if edges else ("the table's edge column", "each is a bound")
    )  # fmt: skip
    return (
        " Hollow points are optima their cell's own runs do not bracket (the best run or batch "
        f"on the edge of what the cell tried: {source}): {named}; {rest}."
    )


def _law_notes(laws: Sequence[Law], unit: str = "tokens") -> list[str]:
    """Each law's notes (what ``sweeper fit`` printed: a fit that did not converge, one that fits
    poorly, cells left out), as warning boxes of escaped HTML, batches in ``unit``
    (:func:`_in_unit`); a note several laws share (the sweep's own) once, naming them all."""
    by_note: dict[str, list[str]] = {}
    for law in laws:
        ident = f" #{law.id}" if law.id is not None else ""
        for n in getattr(law, "notes", ()) or ():
            note = _in_unit(str(n), unit)
            by_note.setdefault(note, []).append(f"{law.target} law{ident} ({law.method})")
    return [
        f"<div class='{'muted' if n.startswith(_INFO_NOTES) else 'warn'}'>"
        f"{html.escape(' and '.join(names))}: {html.escape(n)}</div>"
        for n, names in by_note.items()
    ]


#: the law notes that inform and doubt nothing, shown plain, not as warnings ("surface settings:
#: planner", sweeper.fitting.fit_runs: an orange box had drawn it as one, an audit)
_INFO_NOTES: Final = ("surface settings: ",)


def _loss_law_lines(laws: Sequence[Law]) -> list[str]:
    """The loss law L(N, D), one line each, as ``sweeper fit --target loss`` gives it: formula,
    intervals, points and range (the page had shown a stored loss law nowhere: an audit)."""
    out = []
    for law in laws:
        if not isinstance(law, LossLaw):
            continue
        ident = f" #{law.id}" if law.id is not None else ""
        names = {"E": "E", "A": "A", "alpha": "α", "B": "B", "beta": "β"}
        cis = "; ".join(
            f"{names[k]} [{_num(law.ci[k][0])}, {_num(law.ci[k][1])}]" for k in names if k in law.ci
        )
        dom = "; ".join(f"{p} {lo:.3g} to {hi:.3g}" for p, (lo, hi) in law.domain.items())
        text = (
            f"loss law{ident} ({law.method}, {law.n_points} points): L = {formula(law)} nats"
            + (f"; 95% intervals {cis}" if cis else "")
            + (f"; fitted over {dom}" if dom else "")
            + ". "
            + _loss_law_use(law)
        )
        out.append(f"<p>{html.escape(text)}</p>")
    return out


def _loss_law_use(law: LossLaw) -> str:
    """What recommend does with ``law`` where a target gives no D (N alone, or compute): takes
    it to choose D (or N), or refuses it, by recommend's own test
    (:func:`~sweeper.recipe.compute_optimal.check_loss_choice`: the page had said it takes a
    law whose exponent's interval reaches 0, which recommend refuses; an audit)."""
    from sweeper.errors import TargetError
    from sweeper.recipe.compute_optimal import check_loss_choice

    try:
        check_loss_choice(law, "D", force=False, warnings=[])
    except TargetError as e:
        return f"recommend refuses it to choose D (or N) where a target gives none: {e}."
    return "recommend takes it to choose D where a target gives none (N alone, or compute)."


def _law_scopes(
    laws: Sequence[PowerLaw], target: Mapping[str, float] | None = None
) -> list[str]:
    """Where each law was measured, as ``sweeper fit`` prints it: the range of each predictor it
    was fitted over (beyond it the law extrapolates) and what its cells held fixed; with a
    ``target``, how far beyond that range it lies."""
    out = []
    for law in laws:
        ext = law.extrapolation(target or {})
        far = [f"{p} {f:.3g}x the largest fitted" for p, f in ext.items() if p in law.predictors]
        beyond = f"; at the target {', '.join(far)}" if far else ""
        ident = f" #{law.id}" if law.id is not None else ""
        dom = "; ".join(
            f"{p} {lo:.3g} to {hi:.3g}" for p, (lo, hi) in law.domain.items() if p in law.predictors
        )
        text = f"{law.target} law{ident}: fitted over {dom or 'no recorded range'}"
        held = law.conventions.held_text
        text += (f"; {held}" if held else "") + beyond
        out.append(f"<p class='muted'>{html.escape(text)}.</p>")
    return out


def write_report(inputs: ReportInputs, out_dir: str | Path) -> list[Path]:
    """Write the PNGs and ``index.html`` into ``out_dir``; returns the files written. They are
    drawn in a hidden folder in it and moved out once all are written: an interrupted report had
    left an empty folder, one PNG or a truncated one, mixed with an earlier report's files (a
    robustness audit). The files an earlier report wrote there and this one does not (a
    transfer plot, a batch plot) are removed, as listed in :data:`MANIFEST`; no other file is."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    draft = Path(tempfile.mkdtemp(prefix=".draft-", dir=out))
    try:
        figures = _save_figures(inputs, draft)
        index = draft / "index.html"
        index.write_text("\n".join(_html_parts(inputs, figures)), encoding="utf-8")
        written = [p for _title, _caption, p in figures] + [index]
        names = [p.name for p in written]
        for p in written:
            os.replace(p, out / p.name)
    finally:
        shutil.rmtree(draft, ignore_errors=True)
    _forget_stale(out, names)
    return [out / name for name in names]


#: the file in a report folder that lists what the report wrote there
MANIFEST: Final[str] = ".sweeper-report"


def _forget_stale(out: Path, names: list[str]) -> None:
    """Remove what the last report in ``out`` wrote and this one did not (an audit: a report
    written over one with a transfer plot left that plot beside a page that no longer showed
    it), and record ``names`` for the next one."""
    manifest = out / MANIFEST
    try:
        before = manifest.read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        before = []
    for name in set(before) - set(names):
        if "/" not in name and name != MANIFEST:
            (out / name).unlink(missing_ok=True)
    manifest.write_text("\n".join(names) + "\n", encoding="utf-8")


#: a figure to save: (the figure, its file name, its title, its caption)
_Draft = tuple["Figure", str, str, str]


def _save_figures(inputs: ReportInputs, out: Path) -> list[tuple[str, str, Path]]:
    """Draw every plot of the report into ``out``: (title, caption, PNG path), in page order."""
    figures: list[tuple[str, str, Path]] = []
    drafts = [
        _loss_figure(inputs),
        *_transfer_figures(inputs),
        *_law_figures(inputs),
        *_batch_figure(inputs),
    ]
    for fig, name, title, caption in drafts:
        p = out / name
        with report_style():
            fig.savefig(p)
        figures.append((title, caption, p))
    return figures


def _loss_figure(inputs: ReportInputs) -> _Draft:
    surface, unit = _surface_law(inputs.laws, "lr"), _page_unit(inputs)
    batch_swept = bool((inputs.runs.groupby("cell")["batch_tokens"].nunique() > 1).any())
    off_axis = runs_off_axis(inputs.runs, inputs.optima)
    caption = _loss_vs_lr_caption(inputs.optima, surface, off_axis, batch_swept, unit)
    fig = plot_loss_vs_lr(inputs.runs, inputs.optima, surface, unit=unit)
    return fig, "loss_vs_lr.png", "Loss against LR, per cell", caption


def _transfer_figures(inputs: ReportInputs) -> list[_Draft]:
    """For each stored check: the held-out cell's trained LRs, and the law fitted without it. The
    files of the check stored last keep the names a single check has always had."""
    out: list[_Draft] = []
    for i, check in enumerate(inputs.transfers):
        n = "" if i == 0 else f"_{i + 1}"
        name = f"Transfer check, {check.title}" if len(inputs.transfers) > 1 else "Transfer check"
        held_fig = plot_transfer(check.result)
        if held_fig is not None:
            out.append((
                held_fig,
                f"transfer_holdout_cell{n}.png",
                f"{name}: the held-out cell",
                "Every LR the check trained in the held-out cell (mean over seeds, bars one sd), "
                "with the law's prediction, each baseline and the cell's measured optimum ("
                + _measured_mark(check.result) + ") marked; the table above gives their regrets.",
            ))  # fmt: skip
        law, held = check.law, [check.result["holdout_cell"]]
        if law is not None:
            points, _, what = _law_points(inputs.optima, law, keep=held)
            out.append((
                plot_law(points, law, holdout_cells=held),
                f"law_{law.target}_holdout{n}.png",
                f"{name}: the law fitted without the held-out cell",
                "The law and its 95% band fitted on the other cells only. " + what
                + " The red square is the held-out cell's measured optimum (its per-cell "
                "estimate, as in the table), which the law had not seen.",
            ))  # fmt: skip
    return out


def _measured_mark(result: Mapping[str, Any]) -> str:
    """How the transfer plot marks the cell's measured optimum: the hollow black diamond, or for
    a check stored before its trained points held it (its ``measured_lr`` alone), the diamond
    where a trained point is at that LR, else a dotted black line (no loss was trained there)."""
    lrs, losses = result.get("lrs") or {}, result.get("losses") or {}
    if "measured_optimum" in lrs and "measured_optimum" in losses:
        return "the hollow black diamond, drawn on top of a baseline at the same LR"
    lr = result.get("measured_lr")
    if lr and trained_at(result_lrs=lrs, losses=losses, lr=float(lr)) is not None:
        return "the hollow black diamond, at the trained point of its LR"
    return "the dotted black line: the check stored its LR alone, no loss trained there"


def _recipe_marks(inputs: ReportInputs, law: PowerLaw) -> tuple[float | None, str]:
    """The recipe's peak LR to mark on ``law``'s plot (None: not this law's to mark) and the
    caption's sentence on the target's marks. Only the LR: a recipe's batch is in its target's
    tokens, the law's may be bytes; and only a recipe made from this sweep's LR law (an audit's
    plot drew another sweep's LR, 77x off, beside this law with no word)."""
    r = inputs.recipe
    if not inputs.target_scale:
        return None, ""
    if target_point(law, inputs.target_scale) is None:  # (the caption promised a star: an audit)
        lacks = not_given([law], inputs.target_scale)
        return None, f" The target is not marked: it gives no {lacks}, which this law needs."
    whose = "the recipe's target" if r is not None else "the target given"
    star = (f" The star is the law's point estimate at {whose}"
            f"{_target_line(law, inputs.target_scale)}, with its interval, far to the"
            " right when the extrapolation is long (an end beyond the axis is an arrow with its"
            " value)")  # fmt: skip
    if r is None or law.target != "lr":
        return None, star + "."
    if _fitted_sources(r, "lr") != {inputs.sweep}:
        return None, star + "; the recipe's peak LR is not drawn: another law made it."
    return r.lr.value, star + (
        "; the diamond is the peak LR the recipe wrote (risk-aware: it can lie below or above "
        "the star)."
    )


#: how the page names a predictor a target lacks, with the option that gives it
_GIVE: Final[dict[str, str]] = {"n_params": "N (--params)", "tokens": "D (--tokens)"}


def not_given(laws: Sequence[Law], scale: Mapping[str, float]) -> str:
    """The predictors of ``laws`` that the target ``scale`` lacks, in words: "D (--tokens)"."""
    missing = dict.fromkeys(p for law in laws for p in law.predictors if p not in scale)
    return ", ".join(_GIVE.get(p, p) for p in missing)


def _target_line(law: PowerLaw, target: Mapping[str, float]) -> str:
    """Where the star of a law of several predictors sits: on the line drawn at the target's
    values of the predictors after the first (", on the law's line at the target's tokens
    2e+10"); "" for a law of one predictor (its line is the target's)."""
    others = [p for p in law.predictors[1:] if p in target]
    if not others:
        return ""
    at = ", ".join(f"{p} {float(target[p]):.3g}" for p in others)
    return f", on the law's line at the target's {at}"


def _law_figures(inputs: ReportInputs) -> list[_Draft]:
    """Each power law against scale, and its residuals."""
    out: list[_Draft] = []
    unit = _page_unit(inputs)
    for law in _power_laws(inputs):
        value, star = _recipe_marks(inputs, law)
        shown = law is _surface_law(inputs.laws, law.target)
        column = _surface_column(law.target, unit) if shown else None
        points, source, what = _law_points(inputs.optima, law, table_column=column)
        bounds = _bound_points(inputs.optima, law)
        fig = plot_law(points, law, target_scale=inputs.target_scale, recipe_value=value,
                       bounds=[(o, v) for o, (v, _above) in bounds])  # fmt: skip
        out.append((
            fig,
            f"law_{law.target}.png",
            f"Optimal {law.target} against scale",
            what + _lines_sentence(law, points) + _bounds_sentence(bounds) + star
            + _along_batch_sentence(law, points),
        ))  # fmt: skip
        out.append((
            plot_residuals(points, law),
            f"residuals_{law.target}.png",
            f"Residuals of the {law.target} law",
            f"ln(point / law) per cell, the points those of the {law.target} law's plot "
            f"({source}){_as_there(law, points)}. A trend in the residuals means the power law "
            "bends.",
        ))  # fmt: skip
    return out


def _as_there(law: PowerLaw, points: Sequence[CellOptimum]) -> str:
    """The residuals caption's words on what its points share with the law's plot: hollow where
    their cell's runs do not bracket them, coloured by the law's other predictors."""
    said = ["hollow"] if any(o.usable and edge_of(o) is not None for o in points) else []
    if law.predictors[1:]:
        said.append(f"coloured by {', '.join(law.predictors[1:])}")
    return f", {' and '.join(said)} as there" if said else ""


def _lines_sentence(law: PowerLaw, points: Sequence[CellOptimum]) -> str:
    """The caption's sentence on the law's lines and band: one line, or one per value of the
    law's other predictors among the cells, at most :data:`~sweeper.report.plots.MAX_LAW_LINES`
    of them across their range, the points then coloured by the first's value."""
    interval = ("95% prediction interval (the coefficients' sampling spread plus the scatter of "
                "the cells)")  # fmt: skip
    others = law.predictors[1:]
    if not others:
        return f" The line is the fitted power law ({law.method}) and the band its {interval}."
    keys = cell_keys(points, law)
    if len(keys) <= MAX_LAW_LINES:
        return (
            f" The lines are the fitted power law ({law.method}) at each value of "
            f"{', '.join(others)} among the cells (and at the target's, where one is given), each "
            f"point in its line's colour, and the bands their {interval}."
        )
    return (
        f" The lines are the fitted power law ({law.method}) at {MAX_LAW_LINES} of the cells' "
        f"{len(keys)} values of {', '.join(others)}, across their range (and at the target's, "
        f"where one is given); each point's colour is its {others[0]} on the colour bar. The band "
        f"is the 95% prediction interval of the target's line (else the middle one): the "
        "coefficients' sampling spread plus the scatter of the cells."
    )


def _bound_points(
    optima: Sequence[CellOptimum], law: PowerLaw
) -> list[tuple[CellOptimum, tuple[float, bool]]]:
    """The cells of :func:`law_bounds` with their bound, those an LR law's plot draws."""
    bounds = law_bounds(law) if law.target == "lr" else {}
    return [(o, bounds[o.cell]) for o in optima if o.cell in bounds]


def _bounds_sentence(bounds: Sequence[tuple[CellOptimum, tuple[float, bool]]]) -> str:
    """The caption's sentence on the bound-only cells drawn (red downward triangles)."""
    if not bounds:
        return ""
    cells = ", ".join(o.cell for o, _b in bounds)
    against = [o.cell for o, (_v, above) in bounds if above]
    return (
        f" The red downward triangle{'s' if len(bounds) > 1 else ''} ({cells}): no optimum in "
        "the fit, only a bound, the lowest LR at and above which the cell's runs diverged or lie "
        "past the fit's window; its optimum lies below."
        + (f" The law runs above it in {', '.join(against)}: that cell or the law is wrong there "
           "(the law's notes)." if against else "")
    )  # fmt: skip


def _along_batch_sentence(law: PowerLaw, points: Sequence[CellOptimum]) -> str:
    """The caption's sentence on an LR law of cells that swept the batch (its title says it too):
    each point is the cell's optimal LR at its own optimal batch, so the law follows B*."""
    if not at_best_batch(law, points):
        return ""
    return (
        " The batch varied within the cells: each point is its cell's optimal LR at the cell's own "
        "optimal batch, so the law is the optimal LR along the optimal batch B*, not at one fixed "
        "batch; at another batch the optimal LR is another."
    )


def _batch_figure(inputs: ReportInputs) -> list[_Draft]:
    """Loss over (LR, batch) where the batch was swept ([] where it was not)."""
    fig = plot_batch_surface(inputs.runs, inputs.optima, unit=_page_unit(inputs))
    if fig is None:
        return []
    return [(
        fig,
        "batch_surface.png",
        "Loss over LR and batch size",
        "Colour is the final loss (from the cell's best run to 10% above it); the batch axis is "
        "ticked at the batches tried; contours, labelled with their loss, are the cell's 2-D "
        "quadratic fit over the runs it used at 0.25%, 1% and 4% above its minimum, drawn where "
        "it has one; the star is the cell's estimated optimum, the fit's minimum held inside the "
        "batch sizes fitted and at most at the best LR when the next LR up is on the cliff, so it "
        "can lie off the contours' centre.",
    )]  # fmt: skip


def _trained_on(runs: pd.DataFrame) -> str:
    """Where the runs trained, as their records say: ", trained on cpu (fp32)" ("" when none
    say; a study's own training function records "cpu" whatever it chose)."""
    kinds = sorted(device_kinds(runs["device"])) if "device" in runs else []
    how = [f"{k} ({DEVICE_PRECISION[k]})" if k in DEVICE_PRECISION else k for k in kinds]
    return f", trained on {' and '.join(how)}" if how else ""


def _power_laws(inputs: ReportInputs) -> list[PowerLaw]:
    return [law for law in inputs.laws if isinstance(law, PowerLaw)]


def _runs_line(inputs: ReportInputs) -> str:
    """The page's first line: how many runs in how many cells, where they trained, how many cells
    have an optimum of their own."""
    runs = inputs.runs
    n = int(trained(runs).sum())
    others = len(runs) - n
    untrained = (
        f" ({others} more failed, closed, unfinished or pruned, not counted)" if others else ""
    )
    return (
        f"{_count(n, 'run')} in {_count(runs['cell'].nunique(), 'cell')}{untrained}"
        f"{_trained_on(runs)}; {sum(o.usable for o in inputs.optima)} with an optimum of "
        "their own (the per-cell estimate); the laws table says how many cells each law used."
    )


def _cells_section(inputs: ReportInputs) -> list[str]:
    """The cells table, its footnote of the :data:`_OUTSIDE` mark, and why a cell has no optimum
    of its own."""
    unit = _page_unit(inputs)
    table = _optima_table(inputs.optima, inputs.laws, unit)
    return [
        "<h2>Cells and their optima</h2>",
        _table(table),
        *_outside_notes(table),
        *_unknown_batch_notes(inputs.runs),
        *_unusable_notes(inputs.optima, unit),
    ]


def _unknown_batch_notes(runs: pd.DataFrame) -> list[str]:
    """Why the batch column is blank: runs imported without a sequence length have a batch in
    sequences but none in tokens (a report audit found the column blank, unexplained)."""
    tokens = pd.to_numeric(runs.get("batch_tokens"), errors="coerce")
    if tokens is None or tokens.notna().any() or "batch_size" not in runs:
        return []
    sizes = sorted(pd.to_numeric(runs["batch_size"], errors="coerce").dropna().unique())
    said = ", ".join(f"{b:g}" for b in sizes[:6]) + (", ..." if len(sizes) > 6 else "")
    text = (f"The batch in tokens is unknown: the runs carry no sequence length (batch_size: "
            f"{said} sequences); sweeper import --seq-len counts it.")  # fmt: skip
    return [f"<p class='muted'>{html.escape(text)}</p>"]


def _html_parts(inputs: ReportInputs, figures: Sequence[tuple[str, str, Path]]) -> list[str]:
    """The page's HTML, one part per line: header and notes, recipe, transfer check, laws, cells,
    then the ``figures`` (title, caption, PNG path) embedded."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'><title>Sweeper report: "
        f"{html.escape(inputs.sweep)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Sweeper report: {html.escape(inputs.sweep)}</h1>",
        f"<p class='muted'>{html.escape(_runs_line(inputs))}</p>",
    ]
    if inputs.measured:
        parts.append(
            f"<p class='muted'>{html.escape(inputs.measured[0].upper() + inputs.measured[1:])}.</p>"
        )
    if inputs.planned:
        parts.append(f"<p class='muted'>{html.escape(inputs.planned)}.</p>")
    parts += [f"<div class='warn'>note: {html.escape(n)}</div>" for n in inputs.notes]
    if inputs.recipe is not None:
        parts += _recipe_html(inputs.recipe, inputs.sweep)
    for check in inputs.transfers:
        title = f"Transfer check: {check.title}"
        parts.append(f"<h2>{html.escape(title[0].upper() + title[1:])}</h2>")
        parts += _transfer_html(check.result)
    parts.append("<h2>Laws</h2>")
    lt = _laws_table(_power_laws(inputs))
    parts.append(
        _table(lt)
        if len(lt)
        else "<p>No power law to show: the note at the top says why.</p>"
        if inputs.notes
        else "<p>No power law fitted yet: run <code>sweeper fit</code>.</p>"
    )
    parts += _loss_law_lines(inputs.laws)
    parts += _law_scopes(_power_laws(inputs), inputs.target_scale)
    shown = [law for law in inputs.laws if isinstance(law, PowerLaw | LossLaw)]
    parts += _law_notes(shown, _page_unit(inputs))
    parts += _cells_section(inputs)
    for title, caption, p in figures:
        parts.append(
            f"<h2>{html.escape(title)}</h2>{_img(p, title)}<p class='muted'>{html.escape(caption)}</p>"
        )
    parts.append("</body></html>")
    return parts

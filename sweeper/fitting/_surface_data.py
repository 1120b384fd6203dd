"""The runs of a surface fit as arrays: which cells are fitted, which are bounds, which runs are
points and which bound the optimum (see :mod:`sweeper.fitting.surface` for the rules)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting import _surface_model as sm
from sweeper.fitting._common import min_cells
from sweeper.fitting._law_steps import check_predictor_design
from sweeper.fitting.laws import PREDICTORS
from sweeper.fitting.methods import (
    BATCH_EDGE_NOTE,
    BATCH_FEW_NOTE,
    BATCH_PROFILE_NOTE,
    EDGE_NOTE,
)
from sweeper.fitting.optimum import blow_up_note, blown_up
from sweeper.study.runs import canonical_order, normalize_runs

#: searched columns the surface does not model (see :mod:`sweeper.fitting.surface`)
UNMODELLED: Final[tuple[str, ...]] = (
    "warmup",
    "weight_decay",
    "beta1",
    "beta2",
    "schedule",
    "min_lr_ratio",
    "z_loss",
    "grad_clip",
)
#: LRs (batch sizes) closer than this in natural log are the same grid point
_SAME: Final[float] = 0.01


@dataclass
class Bound:
    """A cell without enough completed runs whose runs diverged: its optimum (at batch exp(lb))
    lies below ``lr``; checked against the law, not fitted."""

    cell: str
    lx: np.ndarray
    lxb: np.ndarray | None
    lb: float  # ln batch_tokens of the diverged runs (0 when the batch is not modelled)
    lr: float  # the lowest diverged LR
    n_done: int
    n_div: int  # runs that diverged
    n_beyond: int = 0  # completed runs past the fit window or the blow-up, taken as bounds too


@dataclass
class Data:
    """The prepared runs (see ``surface._prepare``)."""

    cells: list[str]  # the modelled cells: usable first, then bound-only
    n_usable: int
    preds: tuple[str, ...]
    bpreds: tuple[str, ...] | None
    lx: np.ndarray  # (C, k) ln predictors of the LR law
    lxb: np.ndarray | None  # (C, kb) ln predictors of the batch law
    runs: sm.Runs  # v centred on v0
    v0: float
    step: float  # LR grid step, natural log
    cell_frame: pd.DataFrame  # per modelled cell: cell, n_params, tokens, batch_tokens, ...
    notes: list[str]
    n_runs: int  # rows of the runs table that were used (completed or diverged)
    bounds: list[Bound] = field(default_factory=list)
    #: usable cells whose batch optimum their runs do not bracket (cell → where its best batch
    #: is): no measured cell optimum of the batch law (:func:`_batch_edge_cells`)
    batch_edges: dict[str, str] = field(default_factory=dict)


def _check_preds(preds: Sequence[str], what: str) -> tuple[str, ...]:
    out = tuple(preds)
    if not out:
        raise FitError(f"at least one predictor is needed for the {what} law")
    bad = [p for p in out if p not in PREDICTORS]
    if bad:
        raise FitError(f"unknown predictor(s) {bad}; known: {', '.join(PREDICTORS)}")
    if len(set(out)) != len(out):
        raise FitError(f"predictors repeat: {list(out)}")
    return out


def _distinct(x: np.ndarray) -> int:
    x = np.sort(x[np.isfinite(x)])
    return int(x.size and 1 + np.sum(np.diff(x) > _SAME))


def prepare(
    runs: pd.DataFrame,
    *,
    lr_predictors: Sequence[str] | None,
    batch_predictors: Sequence[str] | None,
    need_batch: bool,
    min_runs: int,
    blowup: float,
    allow_varying: Sequence[str],
    window: tuple[float, float] | None = None,
) -> Data:
    """The runs of a surface fit as :class:`Data` (the rules: :mod:`sweeper.fitting.surface`).
    When fewer usable cells sweep the batch than a batch law needs
    (:func:`~sweeper.fitting._common.min_cells` for its predictors), there is no batch law (a
    FitError when ``need_batch``), and the LR law takes each of those cells at its best batch
    (:func:`_at_best_batch`), with a note. Otherwise the batch law is fitted jointly, also when
    only the LR law is wanted: on a batch ladder (docs/data/batch_ladder.csv) the LR law from
    each cell's best batch alone was D^-0.003 [-3.6, 0.13], leave-one-cell-out 0.51, against
    D^0.45 [0.06, 0.64], 0.12 from the joint fit, whose runs at every batch place the LR."""
    # (one order whatever the storage returned: the bootstrap draws runs by position, and a
    # cluster's trials, finishing in another order, had given other intervals; a cluster audit)
    df = canonical_order(normalize_runs(runs))
    if df.empty:
        raise FitError("no runs to fit")
    _refuse_unmodelled(df, allow_varying)
    df, notes = _mark_runs(df, blowup)
    _refuse_flat(df)
    marked, marked_notes = df.copy(), list(notes)
    completed, edges, usable, bound, left = _sort_cells(df, notes, min_runs, window)
    batch, n_swept = _batch_swept(df, usable)
    cell_frame = _cell_frame(df, usable + bound)
    preds, bpreds = _choose_predictors(
        cell_frame.loc[usable], lr_predictors, batch_predictors, batch, need_batch, n_swept
    )
    if batch and not need_batch and n_swept < min_cells(len(bpreds or ())):
        # too few cells sweep the batch for a batch law: none (it had been attached all the
        # same, and its joint fit refused the LR law too); each such cell at its best batch
        swept = [c for c in usable if c in _swept_cells(df)]
        why = (
            f"{BATCH_FEW_NOTE} (need at least {min_cells(len(bpreds or ()))} usable cells with "
            f"the batch size swept to fit batch_tokens on {', '.join(bpreds or ())}, got "
            f"{n_swept}: {', '.join(swept)})"
        )
        df, note = _at_best_batch(marked, why)
        notes = marked_notes + note
        completed, edges, usable, bound, left = _sort_cells(df, notes, min_runs, window)
        batch, n_swept = _batch_swept(df, usable)
        cell_frame = _cell_frame(df, usable + bound)
        preds, bpreds = _choose_predictors(
            cell_frame.loc[usable], lr_predictors, None, batch, need_batch, n_swept
        )
    why_bound = _bound_reasons(df, bound, min_runs, completed, edges)
    _drop_cells_without(cell_frame, preds, bpreds, usable, bound, left, why_bound)
    if left:
        notes.append("left out " + "; ".join(left))
    batch_edges = _batch_edge_cells(df, usable) if batch else {}
    notes += _edge_notes(usable, edges, batch_edges)
    bound_frame = cell_frame.loc[bound]
    cell_frame = cell_frame.loc[usable]
    in_usable = df["cell"].isin(usable)
    d_done = df[df["_done"] & in_usable]
    d_div, n_sporadic = _bounds(df[in_usable], batch)
    if n_sporadic:
        notes.append(
            f"{n_sporadic} diverged runs below a completed run at a higher LR (same cell and "
            "batch) are not bounds: ignored"
        )
    r, v0 = _runs_arrays(d_done, d_div, {c: i for i, c in enumerate(usable)}, batch)
    return Data(
        cells=usable,
        n_usable=len(usable),
        preds=preds,
        bpreds=bpreds,
        lx=np.log(cell_frame[list(preds)].to_numpy(dtype=float)),
        lxb=np.log(cell_frame[list(bpreds)].to_numpy(dtype=float)) if bpreds else None,
        runs=r,
        v0=v0,
        step=_grid_step(df[(df["_done"] | df["_div"]) & in_usable]),
        cell_frame=cell_frame.reset_index(),
        notes=notes,
        n_runs=len(d_done) + int((df["_div"] & in_usable).sum()),
        bounds=_bound_cells(df, bound_frame, bound, preds, bpreds, batch),
        batch_edges=batch_edges,
    )


def _edge_notes(
    usable: Sequence[str], edges: dict[str, str], batch_edges: dict[str, str]
) -> list[str]:
    """The notes on the usable cells whose best batch (``batch_edges``) or best LR (``edges``)
    lies on the edge of what they tried."""
    notes = []
    if batch_edges:
        notes.append(
            f"{BATCH_EDGE_NOTE}: " + "; ".join(f"{c} ({w})" for c, w in batch_edges.items())
        )
    elsewhere = [c for c in usable if c in edges and INTERIOR_AT_BEST in edges[c]]
    if on_edge := [f"{c} ({edges[c]})" for c in usable if c in edges and c not in elsewhere]:
        notes.append(f"{EDGE_NOTE}: " + "; ".join(on_edge))
    if elsewhere:  # (milder: the cell's own optimum is measured; the LR-batch coupling less so)
        notes.append(
            "best run on the edge of its LR range at a batch other than the cell's best (the "
            "fit's LR-batch coupling rests on the other batches there): "
            + "; ".join(f"{c} ({edges[c]})" for c in elsewhere)
        )
    return notes


def _sort_cells(
    df: pd.DataFrame, notes: list[str], min_runs: int, window: tuple[float, float] | None
) -> tuple[pd.Series, dict[str, str], list[str], list[str], list[str]]:
    """The cells of the marked runs ``df``: each one's completed runs before the window, where
    its best LR is on its range's edge, and which are usable, bound-only and left out (the
    window applied to ``df`` in place, its note added to ``notes``)."""
    completed = df.groupby("cell", sort=False)["_done"].sum()  # (before the window)
    edges = _edge_cells(df)
    if window is not None:
        notes += _apply_window(df, grid_window(window, _grid_step(df[df["_done"] | df["_div"]])))
    if not (df["_done"].any() or df["_div"].any()):
        raise FitError("no completed or diverged runs with a positive lr")
    usable, bound, left = _classify_cells(df, min_runs, completed, edges)
    return completed, edges, usable, bound, left


def _swept_cells(df: pd.DataFrame) -> set[str]:
    """The cells whose loss points (``_done``) are at two or more batch sizes."""
    done = df[df["_done"]]
    n_bt = done.groupby("cell")["batch_tokens"].agg(
        lambda s: _distinct(np.log(s.to_numpy(dtype=float)))
    )
    return {str(c) for c, n in n_bt.items() if n >= 2}


def _at_best_batch(df: pd.DataFrame, why: str) -> tuple[pd.DataFrame, list[str]]:
    """The marked runs ``df`` without, in every cell that sweeps the batch, the runs at a batch
    other than its best (that of the lowest mean loss at one LR), and the note saying so (none
    when no cell sweeps the batch): with no batch law the runs of other batches cannot be
    placed (pooled, each batch's optimum LR would blur the cell's)."""
    swept = _swept_cells(df)
    if not swept:
        return df, []
    key = _batch_key(df)
    drop = np.zeros(len(df), dtype=bool)
    kept = []
    for cell in sorted(swept):
        in_cell = (df["cell"] == cell).to_numpy()
        done = df[in_cell & df["_done"].to_numpy()].assign(_b=key[in_cell & df["_done"].to_numpy()])
        best = done.groupby(["_b", "lr"])["loss"].mean().idxmin()[0]
        drop |= in_cell & (key != best)
        kept.append(f"{cell} at {float(done.loc[done['_b'] == best, 'batch_tokens'].iloc[0]):.4g}")
    note = (
        f"{why}: {BATCH_PROFILE_NOTE} ({'; '.join(kept)} tokens), {int(drop.sum())} runs at "
        "other batches left out"
    )
    return df[~drop], [note]


def _refuse_unmodelled(df: pd.DataFrame, allow_varying: Sequence[str]) -> None:
    """FitError naming the first searched column the surface does not model that varies in a cell."""
    for col in UNMODELLED:
        if col in df.columns and col not in allow_varying:
            n_val = df.groupby("cell")[col].nunique(dropna=True)
            if (n_val > 1).any():
                cell = str(n_val.index[int(np.argmax(n_val.to_numpy() > 1))])
                raise FitError(
                    f"column {col!r} varies within cell {cell}: the surface models lr and batch "
                    f"size only; fit one {col} at a time or pass allow_varying=({col!r},)"
                )


def _mark_runs(df: pd.DataFrame, blowup: float) -> tuple[pd.DataFrame, list[str]]:
    """``df`` with ``_done`` (a loss point) and ``_div`` (a bound) per run; a completed run more
    than ``blowup`` above its cell's best loss is off the model: a bound above the best LR at its
    batch, left out below it (with a note; the rule is :func:`~sweeper.fitting.optimum.blown_up`,
    the parabola's too)."""
    lr_ok = np.isfinite(df["lr"]) & (df["lr"] > 0)
    loss_ok = np.isfinite(df["loss"]) & (df["loss"] > 0)
    done = (df["state"] == "COMPLETE") & ~df["diverged"] & loss_ok & lr_ok
    div = lr_ok & (df["diverged"] | ((df["state"] == "COMPLETE") & ~np.isfinite(df["loss"])))
    df = df.assign(_done=done, _div=div)
    up, down = blown_up(df[done], blowup)
    if not (up.any() or down.any()):
        return df, []
    rows = df.index[done.to_numpy()]
    df.loc[rows[up | down], "_done"] = False
    df.loc[rows[up], "_div"] = True
    return df, [blow_up_note(int(up.sum()), int(down.sum()), blowup)]


def _classify_cells(
    df: pd.DataFrame,
    min_runs: int,
    completed: pd.Series | None = None,
    edges: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """Cells that are usable (``min_runs`` completed runs at 2+ LRs), bound-only (diverged runs
    only), and left out (with why: ``completed`` counts each cell's loss points before the
    window, ``edges`` where its best LR is on its range's edge); FitError when the LR varies in
    no cell."""
    usable, bound, left = [], [], []
    lr_varies = False
    for name, g in df.groupby("cell", sort=False):
        d = g[g["_done"]]
        n_lr = _distinct(np.log(d["lr"].to_numpy(dtype=float)))
        lr_varies |= n_lr >= 2
        if len(d) >= min_runs and n_lr >= 2:
            usable.append(str(name))
        elif g["_div"].any():
            bound.append(str(name))
        else:
            left.append(_left_out(str(name), len(d), n_lr, min_runs, completed, edges))
    if not lr_varies:
        if not df["_done"].any():
            raise FitError(
                f"no completed run has a finite loss ({int(df['_div'].sum())} diverged): every LR "
                "tried is past the cliff, or the training function returned no finite val_loss"
            )
        raise FitError(
            "lr does not vary within any cell's completed runs: the surface needs several LRs "
            "per cell"
        )
    return usable, bound, left


def _left_out(
    name: str,
    n: int,
    n_lr: int,
    min_runs: int,
    completed: pd.Series | None,
    edges: Mapping[str, str] | None,
) -> str:
    """Why a cell is left out of the surface fit, in one clause: it said "3 completed runs at 3
    LRs" of a cell with 6, the others outside the fit's window about a best LR at the range's
    top edge."""
    why = f"{name}: {n} completed runs at {n_lr} LRs"
    total = int(completed.get(name, n)) if completed is not None else n
    if total > n:
        why += f" within the fit's window about its best LR ({total} in all)"
    why += f" (needs min_runs={min_runs} at 2 or more LRs)"
    edge = (edges or {}).get(name)
    if edge:
        side, _, batch = edge.partition(" at ")
        at = f" (at {batch})" if batch else ""
        why += f"; its best LR is on the {side} edge of its range{at}: widen the range there"
    return why


def _bound_reasons(
    df: pd.DataFrame,
    bound: list[str],
    min_runs: int,
    completed: pd.Series,
    edges: Mapping[str, str],
) -> dict[str, str]:
    """Why each bound-only cell is one, in :func:`_left_out`'s words: an audit's cells of 4
    completed runs were "only a bound (too few completed runs)", the window having made the run
    4x above the best a bound, with no word of it or of a fix."""
    out = {}
    for name in bound:
        d = df[df["_done"] & (df["cell"] == name)]
        n_lr = _distinct(np.log(d["lr"].to_numpy(dtype=float)))
        out[name] = _left_out(name, len(d), n_lr, min_runs, completed, edges)
    return out


def _batch_swept(df: pd.DataFrame, usable: list[str]) -> tuple[bool, int]:
    """Whether the batch is modelled (it varies within some usable cell, and every run has one),
    and in how many usable cells it varies."""
    ub = df[df["cell"].isin(usable) & df["_done"]]
    n_bt = ub.groupby("cell")["batch_tokens"].agg(lambda s: _distinct(np.log(s.to_numpy(float))))
    bt = df["batch_tokens"].to_numpy(dtype=float)
    batch = bool((n_bt >= 2).any()) and bool(np.all(np.isfinite(bt[df["_done"] | df["_div"]])))
    return batch, int((n_bt >= 2).sum())


def _choose_predictors(
    usable_frame: pd.DataFrame,
    lr_predictors: Sequence[str] | None,
    batch_predictors: Sequence[str] | None,
    batch: bool,
    need_batch: bool,
    n_swept: int,
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The LR law's predictors (default: :func:`_default_predictors`) and the batch law's
    (default: tokens when it varies, else the LR's; None without batch variation)."""
    tok_vary = _varies(usable_frame, "tokens")
    if lr_predictors is None:
        lr_predictors = _default_predictors(usable_frame)
    preds = _check_preds(lr_predictors, "lr")
    if need_batch and not batch:
        raise FitError(
            "the batch size does not vary within any usable cell: no batch law can be fitted"
        )
    if not batch:
        return preds, None
    if batch_predictors is None:
        batch_predictors = ("tokens",) if tok_vary else preds
    bpreds = _check_preds(batch_predictors, "batch_tokens")
    if need_batch and n_swept < min_cells(len(bpreds)):
        raise FitError(
            f"need at least {min_cells(len(bpreds))} cells with the batch size swept to fit "
            f"batch_tokens on {', '.join(bpreds)}, got {n_swept}"
        )
    return preds, bpreds


def _default_predictors(usable_frame: pd.DataFrame) -> tuple[str, ...]:
    """Those of n_params, tokens that vary across the usable cells, n_params alone when tokens is
    a power of n_params there (:func:`~sweeper.fitting.fit_runs.scale_predictors`, the per-cell
    fits' rule): a fixed tokens-per-parameter ladder (D = 20·N) had been refused as collinear,
    where ``fit --help`` promises n_params alone (a fit audit)."""
    from sweeper.fitting.fit_runs import scale_predictors  # (it imports the per-cell fits)

    logs = {}
    for p in ("n_params", "tokens"):
        if _varies(usable_frame, p):
            v = pd.to_numeric(usable_frame[p], errors="coerce").to_numpy(dtype=float)
            logs[p] = np.log(np.where(np.isfinite(v) & (v > 0), v, np.nan))
    return scale_predictors(logs) if logs else ("n_params",)


def _drop_cells_without(
    cell_frame: pd.DataFrame,
    preds: tuple[str, ...],
    bpreds: tuple[str, ...] | None,
    usable: list[str],
    bound: list[str],
    left: list[str],
    why_bound: Mapping[str, str],
) -> None:
    """Move out of ``usable``/``bound`` (into ``left``, with why) the cells whose predictors are
    not positive, then check that the usable ones can determine the laws (in place)."""
    for p in set(preds) | set(bpreds or ()):
        if p not in cell_frame:
            raise FitError(f"the runs have no column {p!r}")
        bad = [c for c in usable + bound if not (cell_frame.at[c, p] > 0)]
        for c in bad:
            (usable if c in usable else bound).remove(c)
            left.append(f"{c}: no positive {p}")
    for what, ps in (("lr", preds), ("batch_tokens", bpreds)):
        if ps is not None:
            _check_cells(cell_frame.loc[usable], what, ps, left, [why_bound[c] for c in bound])


def _runs_arrays(
    d_done: pd.DataFrame, d_div: pd.DataFrame, idx: dict[str, int], batch: bool
) -> tuple[sm.Runs, float]:
    """The model's arrays of loss points and bounds, and v0 (the mean ln batch, the origin of v)."""
    lv = np.log(d_done["batch_tokens"].to_numpy(dtype=float)) if batch else np.zeros(len(d_done))
    v0 = float(np.mean(lv)) if batch and lv.size else 0.0
    dlv = np.log(d_div["batch_tokens"].to_numpy(dtype=float)) if batch else np.zeros(len(d_div))
    r = sm.Runs(
        cell=d_done["cell"].map(idx).to_numpy(dtype=int),
        u=np.log(d_done["lr"].to_numpy(dtype=float)),
        v=lv - v0,
        y=np.log(d_done["loss"].to_numpy(dtype=float)),
        dcell=d_div["cell"].map(idx).to_numpy(dtype=int),
        du=np.log(d_div["lr"].to_numpy(dtype=float)),
        dv=dlv - v0,
    )
    return r, v0


def _bound_cells(
    df: pd.DataFrame,
    bound_frame: pd.DataFrame,
    bound: list[str],
    preds: tuple[str, ...],
    bpreds: tuple[str, ...] | None,
    batch: bool,
) -> list[Bound]:
    """The divergence bounds of the cells without a usable curve (checked against the law)."""
    bounds = []
    diverged = df["diverged"] | ((df["state"] == "COMPLETE") & ~np.isfinite(df["loss"]))
    for name in bound:
        b_div, _ = _bounds(df[df["cell"] == name], batch)
        as_bound = df["_div"] & (df["cell"] == name)
        lxb = np.log(bound_frame.loc[name, list(bpreds)].to_numpy(dtype=float)) if bpreds else None
        for _, row in b_div.iterrows():
            bounds.append(
                Bound(
                    cell=name,
                    lx=np.log(bound_frame.loc[name, list(preds)].to_numpy(dtype=float)),
                    lxb=lxb,
                    lb=math.log(row["batch_tokens"]) if batch else 0.0,
                    lr=float(row["lr"]),
                    n_done=int((df["_done"] & (df["cell"] == name)).sum()),
                    n_div=int((as_bound & diverged).sum()),
                    n_beyond=int((as_bound & ~diverged).sum()),
                )
            )
    return bounds


def _bounds(df: pd.DataFrame, batch: bool) -> tuple[pd.DataFrame, int]:
    """The diverged runs that bound the optimum: per cell and batch size, the lowest diverged LR
    above every completed LR (it implies the others); and how many diverged runs lay below a
    completed run (sporadic divergence, no bound)."""
    keep, n_sporadic = [], 0
    key = _batch_key(df) if batch else 0
    for _, g in df.assign(_b=key).groupby(["cell", "_b"]):
        div = g[g["_div"]]
        if div.empty:
            continue
        top = g.loc[g["_done"], "lr"].max() if g["_done"].any() else -np.inf
        above = div[div["lr"] > top * math.exp(_SAME)]
        n_sporadic += len(div) - len(above)
        if len(above):
            keep.append(above.loc[[above["lr"].idxmin()]])
    return (pd.concat(keep) if keep else df.iloc[:0]), n_sporadic


def _refuse_flat(df: pd.DataFrame) -> None:
    """FitError when no cell's completed losses differ: nothing locates an optimum (a training
    loop that returns a constant had given a law with a zero-width interval and no warning, and
    a recipe calling it a published law; an API audit)."""
    done = df[df["_done"]]
    spread = done.groupby("cell")["loss"].agg(lambda v: float(v.max() - v.min()))
    if len(spread) and (spread <= 1e-12 * done["loss"].abs().max()).all():
        raise FitError(
            f"the loss is the same at every LR in every cell ({done['loss'].iloc[0]:.6g}): "
            "nothing locates an optimum; check that the runs report their own final loss"
        )


def _batch_key(df: pd.DataFrame) -> np.ndarray:
    """Each run's batch size as a grid point: runs with the same key share a batch size. Runs of
    unknown batch (imported without seq_len) share one key, -inf: a NaN key would drop them from
    every groupby, and with them the LR window and the edge checks."""
    key = np.round(np.log(df["batch_tokens"].to_numpy(dtype=float)) / _SAME)
    return np.nan_to_num(key, nan=-np.inf)


#: how an edge note says that the cell's own optimum, at its best batch, is interior
INTERIOR_AT_BEST = "interior at its best batch"


def _edge_cells(df: pd.DataFrame) -> dict[str, str]:
    """Cells whose best completed LR (lowest mean loss, at some batch size) is the highest LR tried
    there (no completed or diverged run above it: ``"top"``) or the lowest completed one
    (``"bottom"``); where the cell swept the batch, the batch size is named (``"top at batch
    256 tokens"``), the cell's best batch first, and an edge at another batch says that the best
    batch's optimum is interior (the cell's table and plots, at its best batch, show no edge; an
    audit read the note as the cell's optimum being a bound)."""
    key = _batch_key(df)
    tried = df[df["_done"] | df["_div"]].assign(_b=key[(df["_done"] | df["_div"]).to_numpy()])
    edges: dict[str, str] = {}
    for cell, c in tried.groupby("cell"):
        sides = {b: side for b, g in c.groupby("_b") if (side := _edge_side(g))}
        if not sides:
            continue
        if c["_b"].nunique() == 1:
            edges[str(cell)] = next(iter(sides.values()))
            continue
        done = c[c["_done"]]
        best_b = done.groupby(["_b", "lr"])["loss"].mean().idxmin()[0] if len(done) else None
        tokens = c.groupby("_b")["batch_tokens"].first()
        b = best_b if best_b in sides else next(iter(sides))
        text = f"{sides[b]} at batch {float(tokens[b]):.4g} tokens"
        if b != best_b and best_b is not None:
            text += f"; {INTERIOR_AT_BEST}, {float(tokens[best_b]):.4g} tokens"
        edges[str(cell)] = text
    return edges


def _edge_side(g: pd.DataFrame) -> str:
    """``"top"``/``"bottom"`` when the best LR of one cell's runs at one batch is its range's edge
    (``""`` otherwise, or with fewer than 2 distinct LRs completed)."""
    done = g[g["_done"]]
    if _distinct(np.log(done["lr"].to_numpy(dtype=float))) < 2:
        return ""
    best = float(done.groupby("lr")["loss"].mean().idxmin())
    if best >= g["lr"].max() * math.exp(-_SAME):
        return "top"
    if best <= done["lr"].min() * math.exp(_SAME):
        return "bottom"
    return ""


def _batch_edge_cells(df: pd.DataFrame, usable: list[str]) -> dict[str, str]:
    """The usable cells whose batch optimum their completed runs do not bracket: the best batch
    (that of the lowest mean loss at one LR) is the smallest or largest tried, or the cell tried
    one batch size. The LR's edge had been checked alone: 12 cells of two batch sizes each were
    fitted without a word, their free batch optima (1.5e10 tokens where 37k-74k were tried, 507
    where 47k-93k were) shown as measured, and the batch law stored (a fit audit)."""
    done = df[df["_done"] & df["cell"].isin(usable)]
    done = done.assign(_b=_batch_key(done))
    out: dict[str, str] = {}
    for cell in usable:
        c = done[done["cell"] == cell]
        keys = c["_b"].unique()
        if not len(keys):
            continue
        best = c.groupby(["_b", "lr"])["loss"].mean().idxmin()[0]
        tokens = float(c.loc[c["_b"] == best, "batch_tokens"].iloc[0])
        if len(keys) < 2:
            out[cell] = f"one batch size tried, {tokens:.4g} tokens"
        elif best in (keys.min(), keys.max()):
            side = "smallest" if best == keys.min() else "largest"
            out[cell] = f"{side} of {len(keys)} tried, {tokens:.4g} tokens"
    return out


def grid_window(window: tuple[float, float], step: float) -> tuple[float, float]:
    """``window`` widened to at least two LR grid steps below and one above the best LR (1.5
    steps: the run one step above is a loss point, the one two steps above is not). On a sqrt(2)
    grid this is :data:`~sweeper.fitting.surface.WINDOW` itself; on a factor-2 grid the default
    window would keep no run above the best and leave 3 loss points per cell."""
    return max(window[0], 2.0 * step), max(window[1], 1.5 * step)


def _apply_window(df: pd.DataFrame, window: tuple[float, float]) -> list[str]:
    """Keep as loss points the completed runs from ``window[0]`` below to ``window[1]`` above
    (natural log) their cell's best LR at their batch size (the LR of the lowest mean loss);
    those further above become bounds like diverged runs, those further below are left out.
    Modifies ``df``'s ``_done``/``_div`` in place; returns the note."""
    below, above = window
    n_up = n_down = 0
    key = _batch_key(df)
    done = df[df["_done"]].assign(_b=key[df["_done"].to_numpy()])
    for _, g in done.groupby(["cell", "_b"]):
        means = g.groupby("lr")["loss"].mean()
        x = np.log(g["lr"].to_numpy(dtype=float) / float(means.idxmin()))
        up, down = g.index[x > above + 1e-9], g.index[x < -below - 1e-9]
        df.loc[up, "_done"] = False
        df.loc[up, "_div"] = True
        df.loc[down, "_done"] = False
        n_up, n_down = n_up + len(up), n_down + len(down)
    if not (n_up or n_down):
        return []
    return [
        f"window: {n_up} runs more than {np.exp(above):.2g}x above their cell's best LR are bounds "
        f"(beyond the cliff), {n_down} runs more than {np.exp(below):.2g}x below it left out"
    ]


def _cell_frame(df: pd.DataFrame, cells: list[str]) -> pd.DataFrame:
    cols = [c for c in (*PREDICTORS, "batch_tokens") if c in df.columns]  # (depth among them)
    num = df[["cell", *cols]].copy()
    for c in cols:
        num[c] = pd.to_numeric(num[c], errors="coerce")
    frame = num.groupby("cell")[cols].median()
    return frame.loc[cells] if cells else frame.iloc[:0]


def _varies(frame: pd.DataFrame, col: str) -> bool:
    v = pd.to_numeric(frame.get(col), errors="coerce") if col in frame else None
    if v is None:
        return False
    v = v.to_numpy(dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return v.size > 1 and float(np.ptp(np.log(v))) > 1e-9


def _check_cells(
    frame: pd.DataFrame, target: str, preds: tuple[str, ...], left: list[str], bound: list[str]
) -> None:
    n, need = len(frame), min_cells(len(preds))
    if n < need:
        why = f"; left out {'; '.join(left[:8])}" if left else ""
        if bound:
            why += (f"; only a bound (its other runs diverged or lie past the fit's window above "
                    f"its best LR): {'; '.join(bound[:8])}")  # fmt: skip
        fix = ("; lower min_runs (--min-runs), widen the window with surface=\"all-runs\" "
               "(--surface all-runs), or fit the per-cell optima with method=\"parabola\" "
               "(--method parabola)") if left or bound else ""  # fmt: skip
        raise FitError(
            f"need at least {need} usable cells to fit {target} on {', '.join(preds)}, "
            f"got {n}{why}{fix}"
        )
    check_predictor_design(frame, preds)


def _grid_step(df: pd.DataFrame) -> float:
    """Median spacing of the distinct LRs tried within a cell (natural log)."""
    steps = []
    for _, g in df.groupby("cell"):
        x = np.sort(np.log(g["lr"].to_numpy(dtype=float)))
        dx = np.diff(x)
        dx = dx[dx > _SAME]
        steps.extend(dx.tolist())
    return float(np.median(steps)) if steps else math.log(math.sqrt(2.0))

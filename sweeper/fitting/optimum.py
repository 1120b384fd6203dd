"""The optimum of each cell of a sweep: the best LR (and batch size) with a bootstrap interval.

Two estimators:

- ``parabola``: a quadratic in ln lr (or in ln lr and ln batch_tokens when the batch size is swept at
  3 or more values) fitted to the runs around the best point. The loss-vs-LR curve is smooth below
  the optimum and has a cliff just above it, so the fit uses the smooth side plus the minimum: the
  best point and the LRs up to ``lr_window`` below it (natural-log units; at least the two nearest
  below). The next LR above the best (completed or diverged) is its immediate neighbour on the cliff
  side: it bounds the vertex instead of bending the parabola (fitted through it, a steeper cliff side
  drags a symmetric parabola's vertex low). The bound is the midpoint between the two (in ln lr),
  past which a symmetric curve cannot have its minimum; when that neighbour is on the cliff (it
  diverged, or its mean loss is more than ``cliff``, relative, above the best) the bound is the best
  LR itself, the largest LR known to be stable: overshooting a cliff costs several % of the loss,
  undershooting by one grid step a fraction of a %. Seeds run at the same point are averaged first
  (weighted by their number), after the surface fit's rule takes the runs more than 50% above the
  cell's best loss off the curve (:func:`blown_up`: above the best run's LR a bound, as a diverged
  run; at or below it left out, and noted): one corrupt run at 40 nats, averaged into the best
  LR's mean, had put a cell's optimum on the edge of the range. The vertex is kept between the
  lowest fitted LR and that neighbour; a fit that is not convex falls back to the best point.
- ``band``: every run within ``band`` (relative, default 0.25%) of the best loss of its cell, as
  DeepSeek and Step Law do; the optimum is the geometric mean of their LRs (and batch sizes).

Intervals come from resampling the completed runs of the cell with replacement and repeating the
whole estimate (window choice included); all resamples are computed at once with numpy.

Diverged runs (``diverged`` true, or a completed run with a non-finite loss) are not points: they
bound the searched range. An optimum whose best point is the lowest LR tried, or the highest LR tried
with no diverged run above it, is on the edge of the range: it is flagged (``on_edge``, ``edge``) and
left out of law fits (``usable=False``) unless the caller keeps edge cells. So is a 2-D parabola
whose batch vertex lies beyond the batch sizes in its window: it is held at the nearest of them,
a bound rather than an optimum (with each batch on its own LR grid, the window can keep few runs
at the larger batches). Cells with fewer than ``min_runs`` completed runs, or fewer than 3
distinct LRs, are reported and left out.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting._common import bootstrap_counts, percentile_ci, single_threaded_blas

# `as` imports: re-exported, importable from here as before the parabola moved to its own module
from sweeper.fitting._common import wls_batch as wls_batch
from sweeper.fitting._parabola import _TOL, _parabola, _parabola_extras
from sweeper.fitting._parabola import _masked_max as _masked_max
from sweeper.fitting._parabola import _masked_min as _masked_min
from sweeper.fitting._surface_law import BLOWUP
from sweeper.study.runs import canonical_order, normalize_runs, trained

__all__ = [
    "METHODS",
    "CellOptimum",
    "blow_up_note",
    "blown_up",
    "estimate_optima",
    "grid_step",
    "loss_points",
    "near_optimal_runs",
    "optima_frame",
]

METHODS: Final[tuple[str, ...]] = ("parabola", "band")

#: LRs (or batch sizes) closer than this in natural log (1%) are the same grid point
_SAME_POINT: Final[float] = 0.01
#: the note of an optimum whose parabola could not place it: the best grid point stands for it
BEST_POINT_NOTE: Final[str] = "parabola not convex or underdetermined: used the best point"
_META: Final[tuple[str, ...]] = (
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "width",
    "depth",
    "seq_len",
)


@dataclass(frozen=True)
class CellOptimum:
    """The optimum of one cell. LRs are peak AdamW LRs, batch sizes in tokens, losses in nats.

    ``lr_ci``/``batch_tokens_ci`` are 95% bootstrap percentile intervals (None without bootstrap;
    ``batch_tokens_ci`` is None unless the batch size was swept in the cell, and ``batch_tokens``
    is then the batch size the runs used). ``n_runs`` counts the cell's runs that trained
    (completed or diverged; not failed trials, nor those a relaunch closed). ``lr_range`` is the
    smallest and largest LR of the completed, non-diverged runs. ``curvature`` is d²loss/d(ln lr)²
    divided by the loss at the optimum (parabola only); ``batch_curvature`` the same in ln
    batch_tokens (2-D parabola only).
    The fitted curve is ``loss = Σ c_j φ_j(u, v)`` with u = ln(lr / curve_center[0]) and, in 2-D,
    v = ln(batch_tokens / curve_center[1]); φ = (1, u, u²) or (1, u, v, u², uv, v²).
    """

    cell: str
    n_params: float | None
    n_params_total: float | None
    tokens: float | None
    flops: float | None
    width: float | None
    depth: float | None
    seq_len: float | None
    method: str
    lr: float | None
    lr_ci: tuple[float, float] | None
    batch_tokens: float | None
    batch_tokens_ci: tuple[float, float] | None
    loss: float | None
    n_runs: int
    n_used: int
    lr_range: tuple[float, float] | None
    diverged_lr_min: float | None
    on_edge: bool
    edge: str | None  # "low" | "high" | None: where the LR optimum touches the searched range
    usable: bool
    reason: str = ""
    curvature: float | None = None
    batch_curvature: float | None = None
    batch_range: tuple[float, float] | None = None
    batch_edge: str | None = None  # "low" | "high" | None, for a swept batch size
    curve_coefs: tuple[float, ...] = ()
    curve_center: tuple[float, ...] = ()
    window_lr: tuple[float, float] | None = None
    window_batch_tokens: tuple[float, float] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def curve(self, lr: Any, batch_tokens: Any = None) -> np.ndarray:
        """The fitted parabola's loss at ``lr`` (and ``batch_tokens`` for a 2-D fit); NaN if none."""
        lr_a = np.asarray(lr, dtype=float)
        if not self.curve_coefs:
            return np.full(lr_a.shape, np.nan)
        u = np.log(lr_a / self.curve_center[0])
        c = self.curve_coefs
        if len(c) == 3:
            return c[0] + c[1] * u + c[2] * u**2
        bt = self.batch_tokens if batch_tokens is None else batch_tokens
        v = np.log(np.asarray(bt, dtype=float) / self.curve_center[1])
        return c[0] + c[1] * u + c[2] * v + c[3] * u**2 + c[4] * u * v + c[5] * v**2


@single_threaded_blas
def estimate_optima(
    runs: pd.DataFrame,
    *,
    method: str = "parabola",
    band: float = 0.0025,
    n_boot: int = 200,
    seed: int = 0,
    min_runs: int = 4,
    keep_edge: bool = False,
    lr_window: float = math.log(4.0),
    batch_window: float = math.log(4.0),
    cliff: float = 0.02,
    level: float = 0.95,
    blowup: float = BLOWUP,
) -> list[CellOptimum]:
    """Estimate the optimum of every cell of ``runs`` (canonical runs columns, see sweeper.study.runs).

    Returns one :class:`CellOptimum` per cell, sorted by (n_params, tokens, cell), including the
    cells that cannot be used (``usable=False`` with the ``reason``). ``band`` is relative (0.0025 =
    0.25%); ``lr_window`` (below the best LR) and ``batch_window`` (either side of the best batch)
    are natural-log widths of the parabola's window; ``cliff`` (relative) is the loss excess of the
    next LR above the best that marks it as past the cliff (see the module docstring); ``level`` is the interval's coverage.
    ``blowup``: the parabola's runs more than this (relative) above their cell's best loss are
    off its curve (:func:`blown_up`, the surface fit's rule), noted in the cell's ``notes``.
    """
    if method not in METHODS:
        raise FitError(f"method must be one of {METHODS}, got {method!r}")
    if not band > 0:
        raise FitError(f"`band > 0` must hold, but got {band=}")
    if min_runs < 1:
        raise FitError(f"`min_runs >= 1` must hold, but got {min_runs=}")
    df = canonical_order(normalize_runs(runs))
    if df.empty:
        raise FitError("no runs to estimate optima from")
    out = []
    for name, g in df.groupby("cell", sort=False):
        rng = np.random.default_rng([seed, zlib.crc32(str(name).encode())])
        out.append(
            _estimate_cell(
                str(name),
                g,
                method=method,
                band=band,
                n_boot=n_boot,
                rng=rng,
                min_runs=min_runs,
                keep_edge=keep_edge,
                lr_window=lr_window,
                batch_window=batch_window,
                cliff=cliff,
                level=level,
                blowup=blowup,
            )
        )
    big = float("inf")
    out.sort(key=lambda o: (o.n_params or big, o.tokens or big, o.cell))
    return out


def optima_frame(optima: Sequence[CellOptimum]) -> pd.DataFrame:
    """One row per cell; interval and range tuples split into ``*_low``/``*_high`` columns."""
    rows = []
    for o in optima:
        d = asdict(o)
        for key in ("lr_ci", "batch_tokens_ci", "lr_range", "batch_range"):
            v = d.pop(key)
            d[f"{key}_low"], d[f"{key}_high"] = (v[0], v[1]) if v is not None else (None, None)
        rows.append(d)
    frame = pd.DataFrame(rows)
    for col in ("lr", "batch_tokens", "loss", "curvature", "batch_curvature", *_META):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    return frame


def near_optimal_runs(runs: pd.DataFrame, band: float = 0.0025) -> pd.DataFrame:
    """The completed, non-diverged runs within ``band`` (relative) of their cell's best loss."""
    pts = loss_points(runs)
    best = pts.groupby("cell")["loss"].transform("min")
    return pts[pts["loss"] <= best * (1.0 + band)].reset_index(drop=True)


def blown_up(pts: pd.DataFrame, blowup: float = BLOWUP) -> tuple[np.ndarray, np.ndarray]:
    """Which loss points of ``pts`` (completed runs of one or more cells: ``cell``, ``lr``,
    ``loss``, ``batch_tokens``) are more than ``blowup`` (relative) above their cell's best loss:
    off any curve of the loss against the LR. Two boolean arrays over the rows of ``pts``: those
    above the LR of the best run at their batch size (a bound, as a diverged run is) and those at
    or below it (left out). The one rule of every fit that takes runs as points (the surface's
    ``blowup``, :data:`~sweeper.fitting._surface_law.BLOWUP`: Step Law's released runs have
    none between +25% and +50%, 181 above); a run at 40 nats among runs at 2.3, averaged into
    its point's mean, had put a parabola's optimum on the edge of the LR range."""
    up = np.zeros(len(pts), dtype=bool)
    down = np.zeros(len(pts), dtype=bool)
    cell = pts["cell"].to_numpy()
    lr = pts["lr"].to_numpy(dtype=float)
    loss = pts["loss"].to_numpy(dtype=float)
    lb = np.log(pts["batch_tokens"].to_numpy(dtype=float))
    for c in pd.unique(cell):
        at = np.flatnonzero(cell == c)
        far = at[loss[at] > (1.0 + blowup) * loss[at].min()]
        known = bool(np.isfinite(lb[at]).all())
        for i in far:
            same = at[np.abs(lb[at] - lb[i]) < _SAME_POINT] if known else at
            ref = same if same.size else at
            if lr[i] > lr[ref[np.argmin(loss[ref])]]:
                up[i] = True
            else:
                down[i] = True
    return up, down


def blow_up_note(n_up: int, n_down: int, blowup: float = BLOWUP) -> str:
    """The note of the runs :func:`blown_up` took off the curve (every fit's words)."""
    return (
        f"{n_up + n_down} runs more than {blowup:.0%} above their cell's best loss: "
        f"{n_up} above the best LR treated as diverged, {n_down} below it left out"
    )


def loss_points(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs every estimate takes as points: completed, not diverged, with a positive finite
    lr and loss (canonical columns and order)."""
    df = canonical_order(normalize_runs(runs))
    return df[_point_mask(df)]


def grid_step(points: pd.DataFrame, col: str) -> float:
    """The median spacing (natural log) of the distinct values of ``col`` tried within a cell of
    ``points``, values within 1% being one grid point; 0 when no cell tried two."""
    steps: list[float] = []
    for _, g in points.groupby("cell"):
        v = pd.to_numeric(g[col], errors="coerce").to_numpy(dtype=float)
        v = v[np.isfinite(v) & (v > 0)]
        if v.size:
            steps.extend(np.diff(_cluster(np.log(v))[1]).tolist())
    return float(np.median(steps)) if steps else 0.0


# --- one cell ----------------------------------------------------------------------------------


def _point_mask(df: pd.DataFrame) -> pd.Series:
    lr_ok = np.isfinite(df["lr"]) & (df["lr"] > 0)
    loss_ok = np.isfinite(df["loss"]) & (df["loss"] > 0)
    return (df["state"] == "COMPLETE") & ~df["diverged"] & loss_ok & lr_ok


def _diverged_mask(df: pd.DataFrame) -> pd.Series:
    lr_ok = np.isfinite(df["lr"]) & (df["lr"] > 0)
    bad_loss = (df["state"] == "COMPLETE") & ~np.isfinite(df["loss"])
    return lr_ok & (df["diverged"] | bad_loss)


def _cell_meta(g: pd.DataFrame) -> dict[str, float | None]:
    meta: dict[str, float | None] = {}
    for col in _META:
        v = g[col].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        meta[col] = float(np.median(v)) if v.size else None
    return meta


def _cluster(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels grouping values within ``_SAME_POINT`` of their group's smallest; group means."""
    order = np.argsort(values, kind="stable")
    labels = np.empty(values.size, dtype=int)
    k, start = -1, -np.inf
    for i in order:
        if values[i] - start > _SAME_POINT:
            k, start = k + 1, values[i]
        labels[i] = k
    centers = np.array([values[labels == j].mean() for j in range(k + 1)])
    return labels, centers


def _estimate_cell(
    name: str,
    g: pd.DataFrame,
    *,
    method: str,
    band: float,
    n_boot: int,
    rng: np.random.Generator,
    min_runs: int,
    keep_edge: bool,
    lr_window: float,
    batch_window: float,
    cliff: float,
    level: float,
    blowup: float,
) -> CellOptimum:
    """The optimum of the cell whose runs are ``g`` (the arguments are those of
    :func:`estimate_optima`); a cell that cannot be fitted gets one with ``usable=False``."""
    pts = g[_point_mask(g)]
    div_lr = g.loc[_diverged_mask(g), "lr"].to_numpy(dtype=float)
    n_diverged = div_lr.size
    notes: list[str] = []
    if method == "parabola":  # (averaged into its point's mean, a blown-up run moved the curve)
        up, down = blown_up(pts, blowup)
        if up.any() or down.any():
            div_lr = np.concatenate([div_lr, pts["lr"].to_numpy(dtype=float)[up]])
            pts = pts[~(up | down)]
            notes.append(blow_up_note(int(up.sum()), int(down.sum()), blowup))
    x = np.log(pts["lr"].to_numpy(dtype=float))
    loss = pts["loss"].to_numpy(dtype=float)
    bt_raw = pts["batch_tokens"].to_numpy(dtype=float)
    has_bt = bt_raw.size > 0 and bool(np.all(np.isfinite(bt_raw) & (bt_raw > 0)))
    z = np.log(bt_raw) if has_bt else None
    base = _base_fields(name, g, method, x, div_lr)
    blank = _blank(float(np.median(bt_raw)) if has_bt else None)
    why = _too_few_runs(g, len(pts), n_diverged, min_runs)
    if why:
        return CellOptimum(**base, **blank, reason=why, notes=tuple(notes))
    x_lab, x_pt = _cluster(x)
    if x_pt.size < 3:
        why = f"only {x_pt.size} distinct LRs among the completed runs (need 3)"
        return CellOptimum(**base, **blank, reason=why, notes=tuple(notes))

    zc = _cluster(z) if z is not None else None
    if method == "parabola" and zc is not None and zc[1].size == 2:
        # two batch sizes cannot carry a quadratic: profile the LR at the best run's batch
        z_lab, z_pt = zc
        keep = z_lab == z_lab[np.argmin(loss)]
        blank["batch_tokens"] = float(np.exp(z_pt[z_lab[keep][0]]))
        notes.append(
            f"batch swept at 2 values only: LR fitted at batch_tokens={blank['batch_tokens']:.4g}"
        )
        x, loss, z, zc = x[keep], loss[keep], None, None
        x_lab, x_pt = _cluster(x)
        base["lr_range"] = (float(np.exp(x.min())), float(np.exp(x.max())))
        if x_pt.size < 3:
            why = f"only {x_pt.size} distinct LRs at the best batch size (need 3)"
            return CellOptimum(**base, **blank, reason=why, notes=tuple(notes))
    if zc is None or zc[1].size < 2:  # the batch size was not swept in this cell
        z = zc = None

    counts = np.vstack([np.ones(x.size), bootstrap_counts(rng, x.size, n_boot)])
    if method == "band":
        est = _band(x, z, loss, counts, band)
        best_x, best_z = x[est["best"][0]], (z[est["best"][0]] if z is not None else None)
        extra: dict[str, Any] = {}
    else:
        pid, px, pz = _grid_points(x_lab, x_pt, zc)
        est = _parabola(px, pz, pid, loss, counts, np.log(div_lr), lr_window, batch_window, cliff)
        best_x, best_z = px[est["best"][0]], (pz[est["best"][0]] if pz is not None else None)
        extra = _parabola_extras(est, px, pz)
        if not est["ok"][0]:
            notes.append(BEST_POINT_NOTE)

    located = _located(
        est, best_x, best_z, x, z, np.log(div_lr), blank["batch_tokens"], n_boot, level
    )
    usable = keep_edge or not located["on_edge"]
    return CellOptimum(**base, **located, usable=usable, notes=tuple(notes), **extra)


def _located(
    est: dict[str, Any],
    best_x: float,
    best_z: float | None,
    x: np.ndarray,
    z: np.ndarray | None,
    div_x: np.ndarray,
    batch_tokens: float | None,
    n_boot: int,
    level: float,
) -> dict[str, Any]:
    """The :class:`CellOptimum` fields of the estimate ``est`` (natural log; row 0 the data, the
    rest resamples): the optimum with its intervals, and whether its best point (``best_x``,
    ``best_z``) is on the edge of the range searched (``x``, ``z``: the fitted runs; ``div_x``:
    the diverged runs). ``batch_tokens`` is the cell's batch size when it was not swept."""
    lr_hat, lr_ci = _exp_estimate(est["x"], n_boot, level)
    bt_hat, bt_ci = batch_tokens, None
    if z is not None:
        bt_hat, bt_ci = _exp_estimate(est["z"], n_boot, level)
    edge, batch_edge, batch_range = _edges(best_x, best_z, x, z, div_x)
    clip = int(est["z_clip"][0]) if "z_clip" in est and z is not None else 0
    reason = _edge_reason(edge, batch_edge, best_x, best_z) or _clip_reason(clip, bt_hat)
    return dict(
        lr=lr_hat,
        lr_ci=lr_ci,
        batch_tokens=bt_hat,
        batch_tokens_ci=bt_ci,
        loss=float(est["loss"][0]),
        n_used=int(est["n_used"]),
        on_edge=edge is not None or batch_edge is not None or clip != 0,
        edge=edge,
        reason=reason,
        batch_range=batch_range,
        batch_edge=batch_edge,
    )


def _clip_reason(clip: int, batch_tokens: float | None) -> str:
    """Why a 2-D parabola whose batch vertex fell outside the batches it fitted is left out: the
    curve was held at the largest (smallest) of them, so the value is a bound, not an optimum."""
    if clip == 0:
        return ""
    side = "largest" if clip > 0 else "smallest"
    return (
        f"batch optimum held at the {side} batch in the parabola's window ({batch_tokens:.4g} "
        "tokens): its vertex lies beyond the batches fitted (the window keeps the LRs at or below "
        "the best point's), so it is a bound, not an optimum"
    )


def _base_fields(
    name: str, g: pd.DataFrame, method: str, x: np.ndarray, div_lr: np.ndarray
) -> dict[str, Any]:
    """The :class:`CellOptimum` fields of every cell, usable or not (``x``: the ln lr of its
    completed runs; ``div_lr``: the LRs of its diverged runs)."""
    return dict(
        cell=name,
        **_cell_meta(g),
        method=method,
        n_runs=int(trained(g).sum()),
        lr_range=(float(np.exp(x.min())), float(np.exp(x.max()))) if x.size else None,
        diverged_lr_min=float(div_lr.min()) if div_lr.size else None,
    )


def _blank(batch_tokens: float | None) -> dict[str, Any]:
    """The :class:`CellOptimum` fields of a cell without an optimum (its batch size, if known)."""
    return dict(
        lr=None,
        lr_ci=None,
        batch_tokens=batch_tokens,
        batch_tokens_ci=None,
        loss=None,
        n_used=0,
        on_edge=False,
        edge=None,
        usable=False,
    )


def _too_few_runs(g: pd.DataFrame, n_points: int, n_diverged: int, min_runs: int) -> str:
    """Why the cell ``g`` with ``n_points`` completed runs cannot be fitted, or "" if it can."""
    if g["lr"].isna().all():
        return "no lr values in this cell"
    if n_points < min_runs:
        notes = [f"{n_diverged} diverged"] if n_diverged else []
        # ASHA's PRUNED runs stopped part-way: left out of every fit, yet they were trained
        n_pruned = int((g["state"] == "PRUNED").sum()) if "state" in g else 0
        if n_pruned:
            notes.append(f"{n_pruned} more PRUNED by ASHA, left out of the fit")
        note = f" ({'; '.join(notes)})" if notes else ""
        return f"{n_points} completed runs{note}, fewer than min_runs={min_runs}"
    return ""


def _grid_points(
    x_lab: np.ndarray, x_pt: np.ndarray, zc: tuple[np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each run's grid point, and the points' ln lr (and ln batch_tokens when ``zc``, the batch
    clusters, is given): the distinct (LR, batch) pairs the runs were made at."""
    if zc is None:
        return x_lab, x_pt, None
    z_lab, z_pt = zc
    pairs, pid = np.unique(np.stack([x_lab, z_lab]), axis=1, return_inverse=True)
    return pid, x_pt[pairs[0]], z_pt[pairs[1]]


def _exp_estimate(
    est: np.ndarray, n_boot: int, level: float
) -> tuple[float, tuple[float, float] | None]:
    """exp of the data's estimate (row 0, natural log) and the percentile interval of the
    resamples' (None without resamples)."""
    ci = None
    if n_boot > 0:
        lo, hi = percentile_ci(np.exp(est[1:]), level)
        ci = (float(lo), float(hi))
    return float(np.exp(est[0])), ci


def _edges(
    best_x: float, best_z: float | None, x: np.ndarray, z: np.ndarray | None, div_x: np.ndarray
) -> tuple[str | None, str | None, tuple[float, float] | None]:
    """Where the best point touches the searched range: the LR edge, the batch edge (each "low",
    "high" or None) and the batch range (tokens; None unless swept). All inputs in natural log."""
    # edges: the best point at the lowest LR tried, or the highest with nothing diverged above it
    edge = None
    if best_x <= x.min() + _TOL:
        edge = "low"
    elif best_x >= x.max() - _TOL and not np.any(div_x > best_x + _SAME_POINT):
        edge = "high"
    batch_edge, batch_range = None, None
    if z is not None and best_z is not None:
        batch_range = (float(np.exp(z.min())), float(np.exp(z.max())))
        if best_z <= z.min() + _TOL:
            batch_edge = "low"
        elif best_z >= z.max() - _TOL:
            batch_edge = "high"
    return edge, batch_edge, batch_range


def _edge_reason(
    edge: str | None, batch_edge: str | None, best_x: float, best_z: float | None
) -> str:
    """Why an optimum on the edge is left out (the LR edge first), or "" when it is not."""
    if edge is not None:
        side = "lowest" if edge == "low" else "highest"
        div = "" if edge == "low" else " and no run diverged above it"
        return (
            f"LR optimum on the {edge} edge: the best LR {np.exp(best_x):.3g} is the {side} "
            f"tried{div}; widen the LR range"
        )
    if batch_edge is not None:
        side = "smallest" if batch_edge == "low" else "largest"
        return (
            f"batch optimum on the {batch_edge} edge: the best batch {np.exp(best_z or 0):.4g} "
            f"tokens is the {side} tried; widen the batch range"
        )
    return ""


# --- the band estimator, vectorized over resamples (row 0 = the data itself) -------------------
# (the parabola's is in sweeper/fitting/_parabola.py)


def _band(
    x: np.ndarray, z: np.ndarray | None, loss: np.ndarray, counts: np.ndarray, band: float
) -> dict[str, Any]:
    present = counts > 0
    lm = np.where(present, loss[None, :], np.inf)
    best = np.argmin(lm, axis=1)
    best_loss = lm[np.arange(len(counts)), best]
    near = present & (loss[None, :] <= best_loss[:, None] * (1.0 + band))
    w = counts * near
    tot = w.sum(axis=1)
    return {
        "x": (w @ x) / tot,
        "z": (w @ z) / tot if z is not None else None,
        "loss": best_loss,
        "best": best,
        "n_used": int(near[0].sum()),
    }

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
  (weighted by their number). The vertex is kept between the lowest fitted LR and that neighbour; a
  fit that is not convex falls back to the best point.
- ``band``: every run within ``band`` (relative, default 0.25%) of the best loss of its cell, as
  DeepSeek and Step Law do; the optimum is the geometric mean of their LRs (and batch sizes).

Intervals come from resampling the completed runs of the cell with replacement and repeating the
whole estimate (window choice included); all resamples are computed at once with numpy.

Diverged runs (``diverged`` true, or a completed run with a non-finite loss) are not points: they
bound the searched range. An optimum whose best point is the lowest LR tried, or the highest LR tried
with no diverged run above it, is on the edge of the range: it is flagged (``on_edge``, ``edge``) and
left out of law fits (``usable=False``) unless the caller keeps edge cells. Cells with fewer than
``min_runs`` completed runs, or fewer than 3 distinct LRs, are reported and left out.
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
from sweeper.fit._common import bootstrap_counts, percentile_ci, single_threaded_blas, wls_batch
from sweeper.runs import normalize_runs

__all__ = ["METHODS", "CellOptimum", "estimate_optima", "near_optimal_runs", "optima_frame"]

METHODS: Final[tuple[str, ...]] = ("parabola", "band")

#: LRs (or batch sizes) closer than this in natural log (1%) are the same grid point
_SAME_POINT: Final[float] = 0.01
_TOL: Final[float] = 1e-9
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
    is then the batch size the runs used). ``lr_range`` is the smallest and largest LR of the
    completed, non-diverged runs. ``curvature`` is d²loss/d(ln lr)² divided by the loss at the
    optimum (parabola only); ``batch_curvature`` the same in ln batch_tokens (2-D parabola only).
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
) -> list[CellOptimum]:
    """Estimate the optimum of every cell of ``runs`` (canonical runs columns, see sweeper.runs).

    Returns one :class:`CellOptimum` per cell, sorted by (n_params, tokens, cell), including the
    cells that cannot be used (``usable=False`` with the ``reason``). ``band`` is relative (0.0025 =
    0.25%); ``lr_window`` (below the best LR) and ``batch_window`` (either side of the best batch)
    are natural-log widths of the parabola's window; ``cliff`` (relative) is the loss excess of the
    next LR above the best that marks it as past the cliff (see the module docstring); ``level`` is the interval's coverage.
    """
    if method not in METHODS:
        raise FitError(f"method must be one of {METHODS}, got {method!r}")
    if not band > 0:
        raise FitError(f"`band > 0` must hold, but got {band=}")
    if min_runs < 1:
        raise FitError(f"`min_runs >= 1` must hold, but got {min_runs=}")
    df = normalize_runs(runs)
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
    df = normalize_runs(runs)
    pts = df[_point_mask(df)]
    best = pts.groupby("cell")["loss"].transform("min")
    return pts[pts["loss"] <= best * (1.0 + band)].reset_index(drop=True)


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
) -> CellOptimum:
    meta = _cell_meta(g)
    pts = g[_point_mask(g)]
    div_lr = g.loc[_diverged_mask(g), "lr"].to_numpy(dtype=float)
    x = np.log(pts["lr"].to_numpy(dtype=float))
    loss = pts["loss"].to_numpy(dtype=float)
    bt_raw = pts["batch_tokens"].to_numpy(dtype=float)
    has_bt = bt_raw.size > 0 and bool(np.all(np.isfinite(bt_raw) & (bt_raw > 0)))
    z = np.log(bt_raw) if has_bt else None
    base: dict[str, Any] = dict(
        cell=name,
        **meta,
        method=method,
        n_runs=len(g),
        lr_range=(float(np.exp(x.min())), float(np.exp(x.max()))) if x.size else None,
        diverged_lr_min=float(div_lr.min()) if div_lr.size else None,
    )
    blank: dict[str, Any] = dict(
        lr=None,
        lr_ci=None,
        batch_tokens=float(np.median(bt_raw)) if has_bt else None,
        batch_tokens_ci=None,
        loss=None,
        n_used=0,
        on_edge=False,
        edge=None,
        usable=False,
    )
    if g["lr"].isna().all():
        return CellOptimum(**base, **blank, reason="no lr values in this cell")
    if len(pts) < min_runs:
        div_note = f" ({div_lr.size} diverged)" if div_lr.size else ""
        why = f"{len(pts)} completed runs{div_note}, fewer than min_runs={min_runs}"
        return CellOptimum(**base, **blank, reason=why)
    x_lab, x_pt = _cluster(x)
    if x_pt.size < 3:
        why = f"only {x_pt.size} distinct LRs among the completed runs (need 3)"
        return CellOptimum(**base, **blank, reason=why)

    notes: list[str] = []
    n_batch = 0
    if z is not None:
        z_lab, z_pt = _cluster(z)
        n_batch = z_pt.size
    if method == "parabola" and n_batch == 2:
        # two batch sizes cannot carry a quadratic: profile the LR at the best run's batch
        keep = z_lab == z_lab[np.argmin(loss)]
        blank["batch_tokens"] = float(np.exp(z_pt[z_lab[keep][0]]))
        notes.append(
            f"batch swept at 2 values only: LR fitted at batch_tokens={blank['batch_tokens']:.4g}"
        )
        x, loss, z = x[keep], loss[keep], None
        x_lab, x_pt = _cluster(x)
        base["lr_range"] = (float(np.exp(x.min())), float(np.exp(x.max())))
        n_batch = 1
        if x_pt.size < 3:
            why = f"only {x_pt.size} distinct LRs at the best batch size (need 3)"
            return CellOptimum(**base, **blank, reason=why, notes=tuple(notes))
    swept = n_batch >= 2
    if not swept:
        z = None

    boot_counts = bootstrap_counts(rng, x.size, n_boot)
    if method == "band":
        est = _band(x, z, loss, np.vstack([np.ones(x.size), boot_counts]), band)
        best_x, best_z = x[est["best"][0]], (z[est["best"][0]] if z is not None else None)
        extra: dict[str, Any] = {}
    else:
        if z is None:
            pid, px, pz = x_lab, x_pt, None
        else:
            pairs, pid = np.unique(np.stack([x_lab, z_lab]), axis=1, return_inverse=True)
            px, pz = x_pt[pairs[0]], z_pt[pairs[1]]
        counts = np.vstack([np.ones(x.size), boot_counts])
        est = _parabola(px, pz, pid, loss, counts, np.log(div_lr), lr_window, batch_window, cliff)
        best_x, best_z = px[est["best"][0]], (pz[est["best"][0]] if pz is not None else None)
        extra = _parabola_extras(est, px, pz)
        if not est["ok"][0]:
            notes.append("parabola not convex or underdetermined: used the best point")

    lr_hat = float(np.exp(est["x"][0]))
    lr_ci = None
    if n_boot > 0:
        lo, hi = percentile_ci(np.exp(est["x"][1:]), level)
        lr_ci = (float(lo), float(hi))
    bt_hat = blank["batch_tokens"]
    bt_ci = None
    if z is not None:
        bt_hat = float(np.exp(est["z"][0]))
        if n_boot > 0:
            lo, hi = percentile_ci(np.exp(est["z"][1:]), level)
            bt_ci = (float(lo), float(hi))

    # edges: the best point at the lowest LR tried, or the highest with nothing diverged above it
    edge = None
    if best_x <= x.min() + _TOL:
        edge = "low"
    elif best_x >= x.max() - _TOL and not np.any(np.log(div_lr) > best_x + _SAME_POINT):
        edge = "high"
    batch_edge, batch_range = None, None
    if z is not None and best_z is not None:
        batch_range = (float(np.exp(z.min())), float(np.exp(z.max())))
        if best_z <= z.min() + _TOL:
            batch_edge = "low"
        elif best_z >= z.max() - _TOL:
            batch_edge = "high"
    on_edge = edge is not None or batch_edge is not None
    reason = ""
    if edge is not None:
        side = "lowest" if edge == "low" else "highest"
        div = "" if edge == "low" else " and no run diverged above it"
        reason = (
            f"LR optimum on the {edge} edge: the best LR {np.exp(best_x):.3g} is the {side} "
            f"tried{div}; widen the LR range"
        )
    elif batch_edge is not None:
        side = "smallest" if batch_edge == "low" else "largest"
        reason = (
            f"batch optimum on the {batch_edge} edge: the best batch {np.exp(best_z or 0):.4g} "
            f"tokens is the {side} tried; widen the batch range"
        )
    return CellOptimum(
        **base,
        lr=lr_hat,
        lr_ci=lr_ci,
        batch_tokens=bt_hat,
        batch_tokens_ci=bt_ci,
        loss=float(est["loss"][0]),
        n_used=int(est["n_used"]),
        on_edge=on_edge,
        edge=edge,
        usable=keep_edge or not on_edge,
        reason=reason,
        batch_range=batch_range,
        batch_edge=batch_edge,
        notes=tuple(notes),
        **extra,
    )


# --- estimators, vectorized over resamples (row 0 = the data itself) ----------------------------


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


def _parabola(
    px: np.ndarray,
    pz: np.ndarray | None,
    pid: np.ndarray,
    loss: np.ndarray,
    counts: np.ndarray,
    div_x: np.ndarray,
    lr_window: float,
    batch_window: float,
    cliff: float,
) -> dict[str, Any]:
    n_rows = len(counts)
    rows = np.arange(n_rows)
    # sum the runs of each point in each resample: sort runs by point, add the segments
    order = np.argsort(pid, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(pid[order]) != 0])
    n = np.add.reduceat(counts[:, order], starts, axis=1)  # (B, K) runs at each point
    total = np.add.reduceat(counts[:, order] * loss[order], starts, axis=1)
    present = n > 0
    mean = np.where(present, total / np.where(present, n, 1.0), np.inf)
    best = np.argmin(mean, axis=1)
    best_loss = mean[rows, best]
    dx = px[None, :] - px[best][:, None]
    zwin = np.ones_like(present)
    if pz is not None:
        zwin = np.abs(pz[None, :] - pz[best][:, None]) <= batch_window + _TOL
    # the smooth side: LRs up to lr_window below the best, and at least the two nearest below
    below = present & zwin & (dx < -_TOL)
    nearest = -np.sort(np.where(below, -dx, np.inf), axis=1)[:, 1:2] if px.size > 1 else -np.inf
    reach = np.minimum(-lr_window, np.where(np.isfinite(nearest), nearest, -lr_window))
    sel = present & zwin & (dx <= _TOL) & (dx >= reach - _TOL)
    # the next LR above the best (completed or diverged) bounds the vertex; it is not a point,
    # because above the optimum the curve is steeper than below it (the cliff)
    up = np.where(present & zwin & (dx > _TOL), dx, np.inf).min(axis=1)
    div_up = div_x[None, :] - px[best][:, None]
    up_div = np.where(div_up > _TOL, div_up, np.inf).min(axis=1, initial=np.inf)
    # is that neighbour on the cliff? it diverged, or its mean loss is more than `cliff` above the best
    j_up = np.argmin(np.where(present & zwin & (dx > _TOL), dx, np.inf), axis=1)
    up_loss = np.where(np.isfinite(up), mean[rows, j_up], np.inf)
    on_cliff = (up_div <= up + _TOL) | (up_loss > best_loss * (1.0 + cliff))
    up = np.minimum(up, up_div)

    cx = px[best[0]]
    u = px - cx
    if pz is None:
        phi = np.stack([np.ones_like(u), u, u**2], axis=1)
    else:
        cz = pz[best[0]]
        v = pz - cz
        phi = np.stack([np.ones_like(u), u, v, u**2, u * v, v**2], axis=1)
    q = phi.shape[1]
    coef, ok = wls_batch(phi, n * sel, mean)
    ok &= sel.sum(axis=1) >= q
    u_best = px[best] - cx
    with np.errstate(all="ignore"):
        if pz is None:
            ok &= coef[:, 2] > 0
            us = -coef[:, 1] / (2.0 * coef[:, 2])
            vs = np.zeros(n_rows)
        else:
            a, b, c = coef[:, 3], coef[:, 4], coef[:, 5]
            det = 4.0 * a * c - b**2
            ok &= (a > 0) & (det > 0)
            us = (b * coef[:, 2] - 2.0 * c * coef[:, 1]) / det
            vs = (b * coef[:, 1] - 2.0 * a * coef[:, 2]) / det
            vs = np.clip(vs, _masked_min(v, sel), _masked_max(v, sel))
        # a worse point above the best puts the minimum below their midpoint (in ln lr) for a
        # symmetric curve; capping at the point itself would pick the bracket's far end, which the
        # smooth side reaches whenever it is still falling at the best LR.
        # past a cliff the loss jumps (several % here) while one grid step below costs a fraction of
        # a %: the vertex then stops at the best LR, the largest LR known to be stable
        hi = np.where(np.isfinite(up) & ~on_cliff, u_best + up / 2.0, u_best)
        us = np.clip(us, _masked_min(u, sel), hi)
        if pz is None:
            fit_loss = coef[:, 0] + coef[:, 1] * us + coef[:, 2] * us**2
        else:
            basis = np.stack([np.ones(n_rows), us, vs, us**2, us * vs, vs**2], axis=1)
            fit_loss = np.sum(coef * basis, axis=1)
    x_hat = np.where(ok, us + cx, px[best])
    z_hat = None if pz is None else np.where(ok, vs + cz, pz[best])
    return {
        "x": x_hat,
        "z": z_hat,
        "loss": np.where(ok, fit_loss, best_loss),
        "best": best,
        "ok": ok,
        "coef": coef,
        "sel": sel,
        "center": (cx,) if pz is None else (cx, cz),
        "n_used": int((n[0] * sel[0]).sum()),
    }


def _masked_min(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, a[None, :], np.inf).min(axis=1)


def _masked_max(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, a[None, :], -np.inf).max(axis=1)


def _parabola_extras(est: dict[str, Any], px: np.ndarray, pz: np.ndarray | None) -> dict[str, Any]:
    sel = est["sel"][0]
    # the window reaches up to the vertex, which may lie between the best LR and the next above
    out: dict[str, Any] = {
        "window_lr": (float(np.exp(px[sel].min())), float(np.exp(max(px[sel].max(), est["x"][0])))),
        "curve_center": tuple(float(np.exp(c)) for c in est["center"]),
    }
    if pz is not None:
        out["window_batch_tokens"] = (float(np.exp(pz[sel].min())), float(np.exp(pz[sel].max())))
    if est["ok"][0]:
        coef = est["coef"][0]
        loss0 = float(est["loss"][0])
        out["curve_coefs"] = tuple(float(c) for c in coef)
        out["curvature"] = float(2.0 * coef[2 if pz is None else 3] / loss0)
        if pz is not None:
            out["batch_curvature"] = float(2.0 * coef[5] / loss0)
    return out

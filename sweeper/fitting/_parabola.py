"""The parabola estimator of a cell's optimum, vectorized over bootstrap resamples.

See :mod:`sweeper.fitting.optimum` for what it estimates and why (the smooth side below the best
LR plus the minimum, the next LR above as a bound on the vertex, the cliff). Everything is in
natural-log units: ``px`` is ln lr and ``pz`` ln batch_tokens of each grid point; row 0 of every
(B, ...) array is the data itself, the other rows its resamples.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from sweeper.fitting._common import wls_batch

#: differences in ln lr (ln batch) below this are ties: numerical noise, not grid steps
_TOL: Final[float] = 1e-9


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
    """Fit the parabola around the best point of every resample and return its vertex.

    ``pid`` is each run's grid point, ``loss`` its loss (nats), ``counts`` (B, runs) its
    multiplicity in each resample, ``div_x`` the ln lr of the diverged runs. The windows
    (``lr_window``, ``batch_window``) and ``cliff`` are those of
    :func:`~sweeper.fitting.optimum.estimate_optima`. Returns the vertex (``x``, ``z``), its loss,
    the best point, whether the fit was convex (``ok``), the coefficients and the window (``sel``).
    """
    rows = np.arange(len(counts))
    n, mean = _point_means(pid, loss, counts)
    present = n > 0
    best = np.argmin(mean, axis=1)
    best_loss = mean[rows, best]
    zwin = np.ones_like(present)
    if pz is not None:
        zwin = np.abs(pz[None, :] - pz[best][:, None]) <= batch_window + _TOL
    dx = px[None, :] - px[best][:, None]
    div_up = div_x[None, :] - px[best][:, None]
    sel, up, on_cliff = _window(dx, div_up, present & zwin, mean, best_loss, lr_window, cliff)

    cx = px[best[0]]
    u = px - cx
    cz = pz[best[0]] if pz is not None else None
    v = pz - cz if pz is not None else None
    phi = _basis(u, v)
    coef, ok = wls_batch(phi, n * sel, mean)
    ok &= sel.sum(axis=1) >= phi.shape[1]
    u_best = px[best] - cx
    with np.errstate(all="ignore"):
        # a worse point above the best puts the minimum below their midpoint (in ln lr) for a
        # symmetric curve; capping at the point itself would pick the bracket's far end, which the
        # smooth side reaches whenever it is still falling at the best LR.
        # past a cliff the loss jumps (several % here) while one grid step below costs a fraction of
        # a %: the vertex then stops at the best LR, the largest LR known to be stable
        hi = np.where(np.isfinite(up) & ~on_cliff, u_best + up / 2.0, u_best)
    us, vs, fit_loss, convex, z_clip = _vertex(coef, u, v, sel, hi)
    ok &= convex
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
        "center": (cx,) if cz is None else (cx, cz),
        "n_used": int((n[0] * sel[0]).sum()),
        # the batch vertex fell beyond the batches fitted (-1 below, +1 above) and was held there
        "z_clip": np.where(ok, z_clip, 0),
    }


def _point_means(
    pid: np.ndarray, loss: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(B, K) runs at each of the K points in each resample, and their mean loss (inf if none)."""
    # sum the runs of each point in each resample: sort runs by point, add the segments
    order = np.argsort(pid, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(pid[order]) != 0])
    n = np.add.reduceat(counts[:, order], starts, axis=1)  # (B, K) runs at each point
    total = np.add.reduceat(counts[:, order] * loss[order], starts, axis=1)
    present = n > 0
    return n, np.where(present, total / np.where(present, n, 1.0), np.inf)


def _window(
    dx: np.ndarray,
    div_up: np.ndarray,
    avail: np.ndarray,
    mean: np.ndarray,
    best_loss: np.ndarray,
    lr_window: float,
    cliff: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The points fitted in each resample, the distance (ln lr) from the best LR up to the next
    LR above it, and whether that neighbour is on the cliff.

    ``dx`` (B, K) is each point's ln lr minus the best point's, ``div_up`` the same for the
    diverged runs, ``avail`` the points present in the resample and inside the batch window.
    """
    rows = np.arange(len(dx))
    # the smooth side: LRs up to lr_window below the best, and at least the two nearest below
    below = avail & (dx < -_TOL)
    nearest = -np.sort(np.where(below, -dx, np.inf), axis=1)[:, 1:2] if dx.shape[1] > 1 else -np.inf
    reach = np.minimum(-lr_window, np.where(np.isfinite(nearest), nearest, -lr_window))
    sel = avail & (dx <= _TOL) & (dx >= reach - _TOL)
    # the next LR above the best (completed or diverged) bounds the vertex; it is not a point,
    # because above the optimum the curve is steeper than below it (the cliff)
    up = np.where(avail & (dx > _TOL), dx, np.inf).min(axis=1)
    up_div = np.where(div_up > _TOL, div_up, np.inf).min(axis=1, initial=np.inf)
    # is that neighbour on the cliff? it diverged, or its mean loss is more than `cliff` above the best
    j_up = np.argmin(np.where(avail & (dx > _TOL), dx, np.inf), axis=1)
    up_loss = np.where(np.isfinite(up), mean[rows, j_up], np.inf)
    on_cliff = (up_div <= up + _TOL) | (up_loss > best_loss * (1.0 + cliff))
    return sel, np.minimum(up, up_div), on_cliff


def _basis(u: np.ndarray, v: np.ndarray | None) -> np.ndarray:
    """The design (1, u, u²), or (1, u, v, u², uv, v²) when the batch is swept."""
    if v is None:
        return np.stack([np.ones_like(u), u, u**2], axis=1)
    return np.stack([np.ones_like(u), u, v, u**2, u * v, v**2], axis=1)


def _vertex(
    coef: np.ndarray, u: np.ndarray, v: np.ndarray | None, sel: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each resample's minimum (u, v) of the fitted curve, its loss, whether it is convex, and
    where v was clipped (-1 below the fitted batch sizes, +1 above, 0 inside or a 1-D fit).

    u is kept between the lowest fitted LR and ``hi``, v between the fitted batch sizes (both
    centred natural logs, as ``coef``); v is 0 for a 1-D fit.
    """
    n_rows = len(coef)
    z_clip = np.zeros(n_rows, dtype=int)
    with np.errstate(all="ignore"):
        if v is None:
            convex = coef[:, 2] > 0
            us = -coef[:, 1] / (2.0 * coef[:, 2])
            vs = np.zeros(n_rows)
        else:
            a, b, c = coef[:, 3], coef[:, 4], coef[:, 5]
            det = 4.0 * a * c - b**2
            convex = (a > 0) & (det > 0)
            us = (b * coef[:, 2] - 2.0 * c * coef[:, 1]) / det
            vs = (b * coef[:, 1] - 2.0 * a * coef[:, 2]) / det
            v_lo, v_hi = _masked_min(v, sel), _masked_max(v, sel)
            z_clip = np.where(vs < v_lo - _TOL, -1, np.where(vs > v_hi + _TOL, 1, 0))
            vs = np.clip(vs, v_lo, v_hi)
        us = np.clip(us, _masked_min(u, sel), hi)
        if v is None:
            fit_loss = coef[:, 0] + coef[:, 1] * us + coef[:, 2] * us**2
        else:
            basis = np.stack([np.ones(n_rows), us, vs, us**2, us * vs, vs**2], axis=1)
            fit_loss = np.sum(coef * basis, axis=1)
    return us, vs, fit_loss, convex, z_clip


def _masked_min(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, a[None, :], np.inf).min(axis=1)


def _masked_max(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, a[None, :], -np.inf).max(axis=1)


def _parabola_extras(est: dict[str, Any], px: np.ndarray, pz: np.ndarray | None) -> dict[str, Any]:
    """The :class:`~sweeper.fitting.optimum.CellOptimum` fields of the fit to the data (row 0):
    its window, centre and coefficients, and the curvatures relative to the loss at the optimum."""
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

"""The loss law L(N, D) = E + A / N^α + B / D^β, fitted the Chinchilla approach-3 way.

As in the Epoch refit (arXiv:2404.10102): with a = ln A, b = ln B, e = ln E, minimise
Σ Huber_δ(LSE(a − α ln N, b − β ln D, e) − ln L) over (a, b, e, α, β) with L-BFGS, started from the
best points of a grid (α, β ∈ {0, 0.5, ..., 2}, e ∈ {−1, −0.5, ..., 1}, a, b ∈ {0, 5, ..., 25}).
Intervals come from refitting bootstrap resamples of the points (warm-started). N is non-embedding
parameters, D tokens, L the loss in nats per token, all in the sweep's token unit (bytes for
byte-level data: ``conventions.tokens``, which ``sweeper fit`` records from the sweep). Its
compute optimum is under Chinchilla's C = 6·N·D; Sweeper's compute adds attention, and
:func:`sweeper.recipe.recommend.recommend` converts at that boundary.

By default the points are the best loss of each cell (the runs at a cell's optimal LR and batch);
``points="all"`` uses every completed run instead.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Final

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from sweeper.errors import FitError
from sweeper.fitting._common import (
    FitWarning,
    fingerprint,
    percentile_ci,
    single_threaded_blas,
    widen_samples,
)
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import LossLaw

__all__ = ["fit_loss_law", "loss_points"]

_GRID: Final[np.ndarray] = np.array(
    list(
        itertools.product(
            np.arange(0.0, 30.0, 5.0),  # a
            np.arange(0.0, 30.0, 5.0),  # b
            np.arange(-1.0, 1.5, 0.5),  # e
            np.arange(0.0, 2.5, 0.5),  # alpha
            np.arange(0.0, 2.5, 0.5),  # beta
        )
    )
)
_N_STARTS: Final[int] = 8
_PARAMS: Final[tuple[str, ...]] = ("E", "A", "B", "alpha", "beta")
#: bounds on (a, b, e, alpha, beta): E below e^-5 ≈ 0.007 nats or exponents above 3 mean the data
#: cannot tell the terms apart, and unbounded searches wander there for thousands of iterations
_BOUNDS: Final[tuple[tuple[float, float], ...]] = ((-20, 80), (-20, 80), (-5, 5), (0, 3), (0, 3))


def loss_points(runs: pd.DataFrame, *, points: str = "best") -> pd.DataFrame:
    """(n_params, tokens, loss) rows to fit: each cell's best completed run, or all of them.

    Accepts a runs table (canonical columns) or any frame with n_params, tokens and loss; runs
    that diverged or did not complete are dropped.
    """
    missing = [c for c in ("n_params", "tokens", "loss") if c not in runs.columns]
    if missing:
        raise FitError(f"the loss law needs columns n_params, tokens, loss; missing {missing}")
    df = runs.copy()
    for c in ("n_params", "tokens", "loss"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    ok = np.isfinite(df[["n_params", "tokens", "loss"]]).all(axis=1)
    ok &= (df[["n_params", "tokens", "loss"]] > 0).all(axis=1)
    if "diverged" in df:
        ok &= ~df["diverged"].fillna(False).astype(bool)
    if "state" in df:
        ok &= df["state"].fillna("COMPLETE").astype(str) == "COMPLETE"
    df = df[ok]
    if points == "all":
        cols = ["n_params", "tokens", "loss"]
        return df[cols].sort_values(cols, kind="mergesort").reset_index(drop=True)
    if points != "best":
        raise FitError(f'points must be "best" or "all", got {points!r}')
    return df.groupby(["n_params", "tokens"], as_index=False)["loss"].min()


@single_threaded_blas
def fit_loss_law(
    runs_or_points: pd.DataFrame,
    *,
    n_boot: int = 100,
    seed: int = 0,
    huber_delta: float = 1e-3,
    points: str = "best",
    source: str = "",
    conventions: Conventions | None = None,
    level: float = 0.95,
) -> LossLaw:
    """Fit L(N, D) = E + A/N^α + B/D^β (see the module docstring); intervals from ``n_boot``
    resamples of the points. Needs at least 6 points over 2 or more values of each of N and D.
    """
    pts = loss_points(runs_or_points, points=points)
    ln_n = np.log(pts["n_params"].to_numpy(dtype=float))
    ln_d = np.log(pts["tokens"].to_numpy(dtype=float))
    ln_l = np.log(pts["loss"].to_numpy(dtype=float))
    n_n, n_d = np.unique(ln_n).size, np.unique(ln_d).size
    if len(pts) < 6 or n_n < 2 or n_d < 2:
        raise FitError(
            f"the loss law needs at least 6 points over 2+ values of N and of D, got {len(pts)} "
            f"points with {n_n} distinct N and {n_d} distinct D"
        )
    if not huber_delta > 0:
        raise FitError(f"`huber_delta > 0` must hold, but got {huber_delta=}")
    w = np.ones(len(pts))
    starts = _grid_starts(ln_n, ln_d, ln_l, w, huber_delta)
    theta, converged = _fit(ln_n, ln_d, ln_l, w, huber_delta, starts)
    boot = _bootstrap(ln_n, ln_d, ln_l, huber_delta, theta, n_boot, seed)
    notes = []
    if not converged:
        notes.append("L-BFGS did not report convergence at the best start")
    at_bound = _at_bound(theta)
    if at_bound:
        notes.append(
            f"{', '.join(at_bound)} at the bound of the search: the data (N "
            f"{np.exp(ln_n.min()):.3g}-{np.exp(ln_n.max()):.3g}, D {np.exp(ln_d.min()):.3g}-"
            f"{np.exp(ln_d.max()):.3g}) cannot separate the terms of the law"
        )
    a, b, e, alpha, beta = theta
    for m in notes:
        warnings.warn(m, FitWarning, stacklevel=3)  # past the BLAS wrapper
    ci = _intervals(boot, theta, len(pts), level) if len(boot) >= 2 else {}
    return LossLaw(
        target="loss",
        predictors=("n_params", "tokens"),
        source=source,
        method=f"huber-lbfgs/{points}",
        conventions=conventions or Conventions(),
        domain={
            "n_params": (float(pts["n_params"].min()), float(pts["n_params"].max())),
            "tokens": (float(pts["tokens"].min()), float(pts["tokens"].max())),
        },
        E=float(np.exp(e)),
        A=float(np.exp(a)),
        B=float(np.exp(b)),
        alpha=float(alpha),
        beta=float(beta),
        ci=ci,
        n_points=len(pts),
        huber_delta=huber_delta,
        fingerprint=fingerprint(["n_params", "tokens", "loss", points], ln_n, ln_d, ln_l),
        notes=tuple(notes),
    )


def _bootstrap(
    ln_n: np.ndarray,
    ln_d: np.ndarray,
    ln_l: np.ndarray,
    delta: float,
    theta: np.ndarray,
    n_boot: int,
    seed: int,
) -> list[np.ndarray]:
    """The fits (a, b, e, α, β) to ``n_boot`` resamples of the points."""
    rng = np.random.default_rng(seed)
    n = len(ln_l)
    boot = []
    for _ in range(max(n_boot, 0)):
        wb = rng.multinomial(n, np.full(n, 1.0 / n)).astype(float)
        # warm start from the fit to all points: a resample's optimum lies close to it
        tb, _ok = _fit(ln_n, ln_d, ln_l, wb, delta, theta[None, :], ftol=1e-11)
        boot.append(tb)
    return boot


def _at_bound(theta: np.ndarray) -> list[str]:
    """The parameters of (a, b, e, α, β) within 1e-3 of the search bounds ``_BOUNDS``."""
    return [
        name
        for name, v, (lo, hi) in zip(
            ("ln A", "ln B", "ln E", "alpha", "beta"), theta, _BOUNDS, strict=True
        )
        if min(v - lo, hi - v) < 1e-3
    ]


def _intervals(
    boot: list[np.ndarray], theta: np.ndarray, n_points: int, level: float
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of E, A, B (nats) and α, β from the resampled fits, widened for the
    5 parameters fitted to ``n_points`` points (:func:`widen_samples`)."""
    bt = widen_samples(np.asarray(boot), theta, n_points, 5, level)
    vals = np.column_stack([np.exp(bt[:, 2]), np.exp(bt[:, 0]), np.exp(bt[:, 1]), bt[:, 3:]])
    lo, hi = percentile_ci(vals, level)
    return {k: (float(lo[i]), float(hi[i])) for i, k in enumerate(_PARAMS)}


def _terms(theta: np.ndarray, ln_n: np.ndarray, ln_d: np.ndarray) -> np.ndarray:
    """(..., n, 3) exponents of the three terms: a − α ln N, b − β ln D, e."""
    a, b, e, alpha, beta = (theta[..., i : i + 1] for i in range(5))
    return np.stack(
        [a - alpha * ln_n, b - beta * ln_d, np.broadcast_to(e, a.shape[:-1] + ln_n.shape)], axis=-1
    )


def _lse(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log Σ exp over the last axis, and the softmax weights (its gradient)."""
    m = t.max(axis=-1, keepdims=True)
    ex = np.exp(t - m)
    tot = ex.sum(axis=-1, keepdims=True)
    return (m + np.log(tot))[..., 0], ex / tot


def _huber(r: np.ndarray, delta: float) -> np.ndarray:
    ar = np.abs(r)
    return np.where(ar <= delta, 0.5 * r**2, delta * (ar - 0.5 * delta))


def _grid_starts(
    ln_n: np.ndarray, ln_d: np.ndarray, ln_l: np.ndarray, w: np.ndarray, delta: float
) -> np.ndarray:
    """The ``_N_STARTS`` grid points with the lowest objective (evaluated in chunks), and the
    best point of every (α, β) pair of the grid: the lowest few alone can share one basin (an
    import audit's losses in bits, the same runs as its nats ÷ ln 2, converged to β = 1.5, a law
    without a D term and an objective 700× the scaled nats fit's)."""
    vals = []
    for chunk in np.array_split(_GRID, max(1, _GRID.shape[0] * ln_n.size // 2_000_000)):
        r = _lse(_terms(chunk, ln_n, ln_d))[0] - ln_l
        vals.append((_huber(r, delta) * w).sum(axis=-1))
    order = np.argsort(np.concatenate(vals))
    _, first = np.unique(_GRID[order][:, 3:], axis=0, return_index=True)  # best per (α, β)
    keep = np.union1d(order[:_N_STARTS], order[first])
    return _GRID[keep]


def _fit(
    ln_n: np.ndarray,
    ln_d: np.ndarray,
    ln_l: np.ndarray,
    w: np.ndarray,
    delta: float,
    starts: np.ndarray,
    *,
    ftol: float = 1e-14,
) -> tuple[np.ndarray, bool]:
    # scale the objective by 1/delta so L-BFGS's tolerances see residuals of order 1e-3
    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        lse, p = _lse(_terms(theta, ln_n, ln_d))
        r = lse - ln_l
        g = np.clip(r, -delta, delta) * w / delta
        grad = np.array(
            [
                g @ p[:, 0],
                g @ p[:, 1],
                g @ p[:, 2],
                -g @ (p[:, 0] * ln_n),
                -g @ (p[:, 1] * ln_d),
            ]
        )
        return float((_huber(r, delta) * w).sum() / delta), grad

    results = [
        minimize(
            objective,
            s,
            jac=True,
            method="L-BFGS-B",
            bounds=_BOUNDS,
            options={"maxiter": 1000, "ftol": ftol, "gtol": 1e-10},
        )
        for s in starts
    ]
    best = min(results, key=lambda r: float(r.fun))
    # a line search that stops at machine precision is not a failure when another start that did
    # converge reached the same objective
    agree = [r.success and r.fun <= best.fun * (1 + 1e-6) + 1e-12 for r in results]
    return np.asarray(best.x, dtype=float), bool(best.success or any(agree))

"""Power laws of the optimum against scale: log y = log a + Σ b_k log x_k.

Two fits:

- :func:`fit_power_law`: one point per usable cell (its optimum, see :mod:`sweeper.fit.optimum`),
  weighted least squares in natural-log space with weights 1/σ² from each optimum's interval
  (σ floored at 0.05, the scatter no cell beats), optionally Huber-robust (IRLS). Intervals on every
  coefficient from resampling the cells, or, with fewer than 5 residual degrees of freedom (fewer
  than 7 cells for one predictor), the classical t interval; leave-one-cell-out and
  leave-largest-out errors.
- :func:`fit_band_law`: the Step Law way: every near-optimal run (within ``band`` of its cell's best
  loss) is a point; OLS in log space on bootstrap resamples of those runs; the coefficients are the
  mean over resamples.

y is ``lr`` (peak AdamW LR) or ``batch_tokens`` (batch size in tokens); x among ``n_params``
(non-embedding parameters), ``tokens``, ``flops``, ``width``, ``depth``. Errors are in natural-log
units (0.1 ≈ 10%). Both functions are pure: DataFrames in, a frozen :class:`~sweeper.laws.PowerLaw`
out; invalid input raises :class:`~sweeper.errors.FitError`, doubtful results warn
:class:`FitWarning` (and are recorded in the law's ``notes``).

A law also records what it does not model: the range over its fitted cells of ``tokens`` (when
neither tokens nor flops is a predictor), ``tokens_per_param`` (unless the law has tokens or flops
among two or more predictors), ``n_params`` (when no size variable is a predictor) and, for an LR
law, ``batch_tokens`` (the batch at which each cell's LR optimum was measured). They go into
``domain`` as ``"held:<name>"`` and into ``conventions["held_fixed"]`` as text, so that a
recommendation can say when its target lies outside the regime the law was measured in.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fit._common import (
    FitWarning,
    bootstrap_counts,
    fingerprint,
    percentile_ci,
    single_threaded_blas,
    widen_samples,
    wls_batch,
)
from sweeper.fit.optimum import CellOptimum, estimate_optima, near_optimal_runs, optima_frame
from sweeper.laws import DEFAULT_CONVENTIONS, PREDICTORS, TARGETS, PowerLaw

__all__ = ["HELD_PREFIX", "fit_band_law", "fit_power_law", "held_ranges"]

#: floor on a cell optimum's σ (natural log): no cell is trusted to better than 5%
SIGMA_FLOOR: Final[float] = 0.05
_HUBER_K: Final[float] = 1.345
_HUBER_ITERS: Final[int] = 30
_Z95: Final[float] = 1.959963984540054
#: below this many residual degrees of freedom the intervals are the classical t interval, not
#: resampled cells (see :func:`fit_power_law`)
T_INTERVAL_BELOW_DOF: Final[int] = 5
#: prefix of the ``domain`` keys that hold the ranges of variables a law does not model
HELD_PREFIX: Final[str] = "held:"
_SIZE_PREDICTORS: Final[frozenset[str]] = frozenset({"n_params", "flops", "width", "depth"})


@single_threaded_blas
def fit_power_law(
    optima: Sequence[CellOptimum] | pd.DataFrame,
    *,
    target: str = "lr",
    predictors: Sequence[str] = ("n_params",),
    weighted: bool = True,
    huber: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    source: str = "",
    conventions: Mapping[str, str] | None = None,
    parametrization: str | None = None,
    base_width: int | None = None,
    base_depth: int | None = None,
    level: float = 0.95,
) -> PowerLaw:
    """Fit ``target ∝ Π predictor^b`` to the usable cell optima.

    ``optima`` is what :func:`estimate_optima` returns, or its :func:`optima_frame` (any frame with
    the predictor and target columns works; ``usable``, ``reason``, ``{target}_ci_low/high``,
    ``cell``, ``method`` and ``curvature`` are used when present). Raises FitError with fewer than
    max(3, k + 2) usable cells for k predictors, or when a predictor does not vary.

    Intervals (``level``, on every coefficient and on predictions through ``boot_coefs``): with
    ``n - p >= 5`` residual degrees of freedom (n cells, p = k + 1 coefficients), percentiles over
    ``n_boot`` resamples of the cells, widened by sqrt(n/(n-p))·t/z (:func:`widen_samples`); below
    that, draws from the classical WLS sampling distribution (multivariate t with n - p degrees of
    freedom, scale from the weighted residuals), whose percentiles are the textbook t interval.
    Measured on synthetic ladders (``scripts/calibrate_intervals.py``): at 4-6 cells the widened
    cell resampling covered the true exponent 97-100% of the time with intervals 1.4-2.5x wider
    than the t interval, which covered 94-96%; from 7 cells both are calibrated, and resampling
    cells stays honest where the law is not a straight line in log space.
    """
    frame = optima if isinstance(optima, pd.DataFrame) else optima_frame(optima)
    preds = _check_names(target, predictors)
    used, left_out = _usable_cells(frame, target, preds)
    lx, y = _log_design(used, target, preds, left_out)
    n = len(y)
    w = np.ones(n)
    lo_col, hi_col = f"{target}_ci_low", f"{target}_ci_high"
    if weighted and lo_col in used and hi_col in used:
        lo = pd.to_numeric(used[lo_col], errors="coerce").to_numpy(dtype=float)
        hi = pd.to_numeric(used[hi_col], errors="coerce").to_numpy(dtype=float)
        if np.all(np.isfinite(lo) & np.isfinite(hi) & (lo > 0) & (hi > 0)):
            sigma = np.maximum((np.log(hi) - np.log(lo)) / (2 * _Z95), SIGMA_FLOOR)
            w = 1.0 / sigma**2
            w /= w.mean()
    fit = _fit_cells(lx, y, w, huber=huber, n_boot=n_boot, seed=seed, level=level)
    method = str(used["method"].iloc[0]) if "method" in used else "optima"
    notes = [f"left out {c}: {r}" for c, r in left_out]
    notes += _doubts(fit, n, preds)
    if fit.interval.startswith("t interval"):
        notes.append(f"intervals: {fit.interval} (too few cells to resample them)")
    curv_col = "curvature" if target == "lr" else "batch_curvature"
    curv = None
    if curv_col in used:
        cv = pd.to_numeric(used[curv_col], errors="coerce").to_numpy(dtype=float)
        cv = cv[np.isfinite(cv)]
        curv = float(np.median(cv)) if cv.size else None
    return _make_law(
        fit,
        target=target,
        preds=preds,
        lx=lx,
        n_cells=n,
        n_points=n,
        method=f"{method}+{'huber' if huber else 'wls' if weighted else 'ols'}",
        notes=notes,
        curvature=curv,
        fp=fingerprint([target, *preds], lx, y, w),
        held=held_ranges(used, target, preds),
        source=source,
        conventions=conventions,
        parametrization=parametrization,
        base_width=base_width,
        base_depth=base_depth,
    )


@single_threaded_blas
def fit_band_law(
    runs: pd.DataFrame,
    *,
    target: str = "lr",
    predictors: Sequence[str] = ("n_params", "tokens"),
    band: float = 0.0025,
    n_boot: int = 1000,
    seed: int = 0,
    min_runs: int = 4,
    keep_edge: bool = False,
    source: str = "",
    conventions: Mapping[str, str] | None = None,
    parametrization: str | None = None,
    base_width: int | None = None,
    base_depth: int | None = None,
    level: float = 0.95,
) -> PowerLaw:
    """Fit ``target ∝ Π predictor^b`` to all near-optimal runs, the Step Law way.

    Near-optimal: within ``band`` (relative) of the best loss of the run's cell. Cells that
    :func:`estimate_optima` (band method) leaves out (too few runs, optimum on the edge) are left
    out here too and named in ``notes``. Coefficients (and ``prefactor``) are the means over
    ``n_boot`` OLS fits on resamples of the near-optimal runs; intervals their percentiles.
    ``cv_error``/``holdout_error`` compare each left-out cell's band optimum (geometric mean of
    its near-optimal runs) with the law fitted without it.
    """
    preds = _check_names(target, predictors)
    optima = estimate_optima(
        runs, method="band", band=band, n_boot=0, min_runs=min_runs, keep_edge=keep_edge
    )
    frame = optima_frame(optima)
    used, left_out = _usable_cells(frame, target, preds)
    near = near_optimal_runs(runs, band)
    near = near[near["cell"].isin(set(used["cell"]))].reset_index(drop=True)
    cell_lx, cell_y = _log_design(used, target, preds, left_out)
    cells = used["cell"].astype(str).to_numpy()
    cell_of = {c: i for i, c in enumerate(cells)}
    idx = near["cell"].map(cell_of).to_numpy(dtype=int)
    lx = cell_lx[idx]
    y = np.log(near[target].to_numpy(dtype=float))
    if not np.all(np.isfinite(y)):
        raise FitError(f"near-optimal runs without a positive {target} value")
    n_pts = len(y)
    mu = lx.mean(axis=0)
    x1 = np.column_stack([np.ones(n_pts), lx - mu])
    counts = bootstrap_counts(np.random.default_rng(seed), n_pts, n_boot)
    point, _ = wls_batch(x1, np.ones((1, n_pts)), y)
    boot, ok = wls_batch(x1, counts, y) if n_boot > 0 else (point, np.ones(1, bool))
    boot = boot[ok]
    center = boot.mean(axis=0) if len(boot) else point[0]
    boot = widen_samples(boot, center, n_pts, x1.shape[1], level)
    # leave one cell out: fit on the other cells' runs, predict the cell's band optimum
    loo_w = (idx[None, :] != np.arange(len(cells))[:, None]).astype(float)
    loo, loo_ok = wls_batch(x1, loo_w, y)
    cell_x1 = np.column_stack([np.ones(len(cells)), cell_lx - mu])
    loo_err = np.where(loo_ok, np.sum(loo * cell_x1, axis=1) - cell_y, np.nan)
    resid = cell_y - cell_x1 @ center
    fit = _Fit(
        coef=center,
        boot=boot,
        mu=mu,
        cv=_rms(loo_err),
        holdout=_holdout(loo_err, cell_lx),
        resid_std=_resid_std(resid, len(preds)),
        n_dropped=int((~ok).sum()),
        level=level,
    )
    notes = [f"left out {c}: {r}" for c, r in left_out]
    notes += _doubts(fit, len(cells), preds)
    return _make_law(
        fit,
        target=target,
        preds=preds,
        lx=cell_lx,
        n_cells=len(cells),
        n_points=n_pts,
        method=f"band{band:g}-runs+ols",
        notes=notes,
        curvature=None,
        fp=fingerprint([target, *preds, f"band={band}"], lx, y),
        held=held_ranges(used, target, preds),
        source=source,
        conventions=conventions,
        parametrization=parametrization,
        base_width=base_width,
        base_depth=base_depth,
    )


# --- shared steps ------------------------------------------------------------------------------


class _Fit:
    """Coefficients [log a, b...] in centred coordinates (x - mu), with their resamples."""

    def __init__(
        self,
        *,
        coef: np.ndarray,
        boot: np.ndarray,
        mu: np.ndarray,
        cv: float | None,
        holdout: float | None,
        resid_std: float,
        n_dropped: int,
        level: float,
        interval: str = "",
    ) -> None:
        self.coef, self.boot, self.mu = coef, boot, mu
        self.cv, self.holdout, self.resid_std = cv, holdout, resid_std
        self.n_dropped, self.level, self.interval = n_dropped, level, interval

    def uncentred(self, c: np.ndarray) -> np.ndarray:
        """[log a, b...] for log y = log a + Σ b log x (undo the centring)."""
        c = np.atleast_2d(c)
        out = c.copy()
        out[:, 0] = c[:, 0] - c[:, 1:] @ self.mu
        return out


def _check_names(target: str, predictors: Sequence[str]) -> tuple[str, ...]:
    if target not in TARGETS:
        raise FitError(f"target must be one of {TARGETS}, got {target!r}")
    preds = tuple(predictors)
    if not preds:
        raise FitError("at least one predictor is needed")
    bad = [p for p in preds if p not in PREDICTORS]
    if bad:
        raise FitError(f"unknown predictor(s) {bad}; known: {', '.join(PREDICTORS)}")
    if len(set(preds)) != len(preds):
        raise FitError(f"predictors repeat: {list(preds)}")
    return preds


def _usable_cells(
    frame: pd.DataFrame, target: str, preds: tuple[str, ...]
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    missing = [c for c in (target, *preds) if c not in frame.columns]
    if missing:
        raise FitError(f"the optima have no column(s) {missing}")
    left_out: list[tuple[str, str]] = []
    keep = np.ones(len(frame), dtype=bool)
    cells = frame["cell"].astype(str) if "cell" in frame else pd.Series(map(str, frame.index))
    for i, (_, row) in enumerate(frame.iterrows()):
        why = ""
        if "usable" in frame and not bool(row["usable"]):
            why = str(row.get("reason", "") or "not usable")
        elif (
            target == "batch_tokens"
            and "batch_range_low" in frame
            and not np.isfinite(pd.to_numeric(row["batch_range_low"], errors="coerce"))
        ):
            # a batch size that was not swept inside a cell says nothing about its optimum
            why = "batch size not swept in this cell"
        else:
            for c in (target, *preds):
                v = pd.to_numeric(row[c], errors="coerce")
                if not (np.isfinite(v) and v > 0):
                    why = f"no positive {c}"
                    break
        if why:
            keep[i] = False
            left_out.append((cells.iloc[i], why))
    return frame[keep], left_out


def _log_design(
    used: pd.DataFrame,
    target: str,
    preds: tuple[str, ...],
    left_out: list[tuple[str, str]],
) -> tuple[np.ndarray, np.ndarray]:
    n = len(used)
    need = max(3, len(preds) + 2)
    if n < need:
        why = "; ".join(f"{c}: {r}" for c, r in left_out[:8])
        more = f" (+{len(left_out) - 8} more)" if len(left_out) > 8 else ""
        raise FitError(
            f"need at least {need} usable cells to fit {target} on {', '.join(preds)}, got {n}"
            + (f"; left out {why}{more}" if why else "")
        )
    lx = np.log(used[list(preds)].to_numpy(dtype=float))
    for j, p in enumerate(preds):
        if np.ptp(lx[:, j]) < 1e-9:
            raise FitError(
                f"predictor {p!r} does not vary across the {n} usable cells "
                f"(all {np.exp(lx[0, j]):.4g}); drop it from the predictors"
            )
    if len(preds) > 1 and np.linalg.matrix_rank(lx - lx.mean(axis=0), tol=1e-6) < len(preds):
        raise FitError(
            f"predictors {', '.join(preds)} are collinear across the usable cells "
            "(one is a power of the others): fit with fewer predictors"
        )
    return lx, np.log(used[target].to_numpy(dtype=float))


def _fit_cells(
    lx: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    huber: bool,
    n_boot: int,
    seed: int,
    level: float,
) -> _Fit:
    n = len(y)
    mu = lx.mean(axis=0)
    x1 = np.column_stack([np.ones(n), lx - mu])
    point, _, w_fit = _solve(x1, w[None, :], y, huber)
    resid = y - x1 @ point[0]
    p = x1.shape[1]
    if n_boot > 0 and n - p < T_INTERVAL_BELOW_DOF:
        boot = _t_draws(x1, w_fit[0], y, point[0], n_boot, np.random.default_rng(seed))
        ok = np.ones(len(boot), bool)
        interval = f"t interval, {n - p} degree{'s' if n - p > 1 else ''} of freedom"
    else:
        counts = bootstrap_counts(np.random.default_rng(seed), n, n_boot)
        if n_boot > 0:
            boot, ok, _ = _solve(x1, counts * w, y, huber)
        else:
            boot, ok = point, np.ones(1, bool)
        boot = widen_samples(boot[ok], point[0], n, p, level)
        interval = "cell bootstrap"
    loo, loo_ok, _ = _solve(x1, (1.0 - np.eye(n)) * w, y, huber)
    loo_err = np.where(loo_ok, np.sum(loo * x1, axis=1) - y, np.nan)
    return _Fit(
        coef=point[0],
        boot=boot,
        mu=mu,
        cv=_rms(loo_err),
        holdout=_holdout(loo_err, lx),
        resid_std=_resid_std(resid, lx.shape[1]),
        n_dropped=int((~ok).sum()),
        level=level,
        interval=interval if n_boot > 0 else "",
    )


def _t_draws(
    x1: np.ndarray, w: np.ndarray, y: np.ndarray, coef: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` draws from the classical sampling distribution of the WLS coefficients: multivariate
    t with n_cells - p degrees of freedom about ``coef``, covariance s²(XᵀWX)⁻¹ with s² the
    weighted residual variance. The residual scale is floored so that no cell's implied scatter
    is below ``SIGMA_FLOOR`` (a near-perfect fit of few cells must not give a zero-width law)."""
    n_cells, p = x1.shape
    dof = n_cells - p
    r = y - x1 @ coef
    s2 = max(float(np.sum(w * r**2) / dof), SIGMA_FLOOR**2 * float(np.max(w)))
    cov = s2 * np.linalg.pinv(x1.T @ (w[:, None] * x1))
    chol = np.linalg.cholesky(cov)
    z = rng.standard_normal((n, p)) @ chol.T
    g = rng.chisquare(dof, size=n) / dof
    return coef + z / np.sqrt(g)[:, None]


def _solve(
    x1: np.ndarray, w: np.ndarray, y: np.ndarray, huber: bool
) -> tuple[np.ndarray, Any, np.ndarray]:
    """Batched (I)RLS: coefficients, which rows solved, and the final weights (w × Huber's)."""
    coef, ok = wls_batch(x1, w, y)
    if not huber:
        return coef, ok, w
    # IRLS with Huber weights; the residual scale (MAD) is re-estimated at every step so that an
    # outlier that pulled the first fit does not also inflate the scale that judges it
    r = y[None, :] - coef @ x1.T
    for _ in range(_HUBER_ITERS):
        with np.errstate(all="ignore"):
            mad = np.nanmedian(np.where(w > 0, np.abs(r), np.nan), axis=1, keepdims=True)
            scale = np.maximum(np.nan_to_num(1.4826 * mad, nan=1.0), 1e-6)
            hw = np.minimum(1.0, _HUBER_K * scale / np.maximum(np.abs(r), 1e-300))
        w_fit = w * np.nan_to_num(hw, nan=1.0)
        coef, ok = wls_batch(x1, w_fit, y)
        r = y[None, :] - coef @ x1.T
    return coef, ok, w_fit


def _round(v: float) -> float:
    """Undo the last-digit noise of exp(log(x)) so domains print as the data's values."""
    return float(f"{v:.12g}")


def _rms(err: np.ndarray) -> float | None:
    err = err[np.isfinite(err)]
    return float(np.sqrt(np.mean(err**2))) if err.size else None


def _holdout(loo_err: np.ndarray, lx: np.ndarray) -> float | None:
    """|error| on the largest cell (largest product of its predictors) when it is left out."""
    e = loo_err[int(np.argmax(lx.sum(axis=1)))]
    return float(abs(e)) if np.isfinite(e) else None


def _resid_std(resid: np.ndarray, k: int) -> float:
    dof = resid.size - k - 1
    return float(np.sqrt(np.sum(resid**2) / dof)) if dof > 0 else 0.0


def _doubts(fit: _Fit, n_cells: int, preds: tuple[str, ...]) -> list[str]:
    msgs = []
    if n_cells < 5:
        msgs.append(
            f"only {n_cells} cells: the intervals are wide and rest on the law being a straight "
            "line in log space"
        )
    if len(fit.boot) and fit.n_dropped > 0.1 * (len(fit.boot) + fit.n_dropped):
        msgs.append(
            f"{fit.n_dropped} of {len(fit.boot) + fit.n_dropped} resamples lost a predictor's "
            "variation and were dropped: too few distinct cells"
        )
    if fit.cv is not None and fit.cv > 0.5:
        msgs.append(f"leave-one-cell-out error {fit.cv:.2f} (natural log): the law fits poorly")
    for m in msgs:
        warnings.warn(m, FitWarning, stacklevel=4)  # past the BLAS wrapper
    return msgs


def held_ranges(
    cells: pd.DataFrame, target: str, predictors: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """(min, max) over ``cells`` (an optima frame) of each variable the law does not model.

    See the module docstring for which; a variable without a positive value in every cell is
    skipped. Units: those of the runs (tokens and batch in the sweep's token unit).
    """
    preds = set(predictors)
    names = []
    if not preds & _SIZE_PREDICTORS:
        names.append("n_params")
    if not preds & {"tokens", "flops"}:
        names.append("tokens")
    if len(preds) < 2 or not preds & {"tokens", "flops"}:
        names.append("tokens_per_param")
    if target == "lr":
        names.append("batch_tokens")
    out: dict[str, tuple[float, float]] = {}
    for name in names:
        if name == "tokens_per_param":
            if "tokens" not in cells or "n_params" not in cells:
                continue
            v = pd.to_numeric(cells["tokens"], errors="coerce").to_numpy(dtype=float)
            v = v / pd.to_numeric(cells["n_params"], errors="coerce").to_numpy(dtype=float)
        elif name in cells:
            v = pd.to_numeric(cells[name], errors="coerce").to_numpy(dtype=float)
        else:
            continue
        if v.size and np.all(np.isfinite(v) & (v > 0)):
            out[name] = (_round(float(v.min())), _round(float(v.max())))
    return out


def held_text(held: Mapping[str, tuple[float, float]]) -> str:
    """``held_ranges`` as one readable line, e.g. ``tokens 8.19e+05; batch_tokens 4.1e+03``."""
    parts = []
    for name, (lo, hi) in held.items():
        span = f"{lo:.3g}" if hi <= lo * (1 + 1e-9) else f"{lo:.3g}-{hi:.3g}"
        parts.append(f"{name} {span}")
    return "not modelled, over the fitted cells: " + "; ".join(parts)


def _make_law(
    fit: _Fit,
    *,
    target: str,
    preds: tuple[str, ...],
    lx: np.ndarray,
    n_cells: int,
    n_points: int,
    method: str,
    notes: list[str],
    curvature: float | None,
    fp: str,
    held: Mapping[str, tuple[float, float]],
    source: str,
    conventions: Mapping[str, str] | None,
    parametrization: str | None,
    base_width: int | None,
    base_depth: int | None,
) -> PowerLaw:
    coef = fit.uncentred(fit.coef)[0]
    boot = fit.uncentred(fit.boot) if len(fit.boot) else np.zeros((0, len(coef)))
    ci = percentile_ci(boot, fit.level) if len(boot) >= 2 else None
    exps_ci = (
        {p: (float(ci[0, j + 1]), float(ci[1, j + 1])) for j, p in enumerate(preds)}
        if (ci is not None)
        else {}
    )
    conv = dict(conventions) if conventions is not None else dict(DEFAULT_CONVENTIONS)
    conv.pop("held_fixed", None)
    if held:
        conv["held_fixed"] = held_text(held)
    domain = {
        p: (_round(np.exp(lx[:, j].min())), _round(np.exp(lx[:, j].max())))
        for j, p in enumerate(preds)
    }
    domain.update({HELD_PREFIX + k: v for k, v in held.items()})
    return PowerLaw(
        target=target,
        predictors=preds,
        source=source,
        method=method,
        conventions=conv,
        parametrization=parametrization,
        base_width=base_width,
        base_depth=base_depth,
        domain=domain,
        log_prefactor=float(coef[0]),
        exponents={p: float(coef[j + 1]) for j, p in enumerate(preds)},
        exponents_ci=exps_ci,
        prefactor_ci=(float(np.exp(ci[0, 0])), float(np.exp(ci[1, 0]))) if ci is not None else None,
        boot_coefs=tuple(tuple(float(v) for v in r) for r in boot[:1000]),
        residual_std=fit.resid_std,
        n_cells=n_cells,
        n_points=n_points,
        cv_error=fit.cv,
        holdout_error=fit.holdout,
        loss_curvature=curvature,
        fingerprint=fp,
        notes=tuple(notes),
    )

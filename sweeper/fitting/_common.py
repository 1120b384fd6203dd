"""Numerical helpers shared by the fits: batched weighted least squares, bootstrap weights,
percentile intervals, data fingerprints, and the warning class for doubtful results.

Everything here is pure numpy: a bootstrap of B resamples is one (B, n) matrix of resample counts,
and every resample's fit is solved at once from its normal equations.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import numpy as np

__all__ = [
    "FitSkipped",
    "FitWarning",
    "bootstrap_counts",
    "fingerprint",
    "min_cells",
    "percentile_ci",
    "single_threaded_blas",
    "widen_samples",
    "wls_batch",
]


class FitWarning(UserWarning):
    """A fit was made, but its result is doubtful (few cells, unstable bootstrap, ...)."""


class FitSkipped(FitWarning):
    """A law that was not asked for by name could not be fitted and was skipped (the batch law
    of a sweep whose batch varies too little, say)."""


def min_cells(n_predictors: int) -> int:
    """The usable cells a law on ``n_predictors`` predictors needs: its coefficients (one per
    predictor and the prefactor) and at least one degree of freedom for its interval, and never
    fewer than 3."""
    return max(3, n_predictors + 2)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def single_threaded_blas(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with BLAS limited to one thread.

    The fits multiply many small matrices; OpenBLAS threads only add synchronisation, and on a
    busy machine their spinning doubled the time of the benchmark (scripts/bench_fit.py: 2.3 s
    single-threaded vs 4.8 s with 2 BLAS threads on 2 shared cores).
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper


def bootstrap_counts(rng: np.random.Generator, n: int, n_boot: int) -> np.ndarray:
    """(n_boot, n) multiplicities of a bootstrap resample of ``n`` items (each row sums to ``n``)."""
    if n_boot <= 0 or n == 0:
        return np.zeros((0, n))
    draws = rng.integers(0, n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]
    return np.bincount(draws.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float)


#: a design is rank-deficient when the smallest eigenvalue of its normal matrix is below this
#: fraction of the largest (three cells at one D/N, where an N and a D exponent trade off)
RANK_RCOND = 1e-10


def _ranked(lam: np.ndarray, rcond: float) -> np.ndarray:
    """Per row of ascending normal-matrix eigenvalues ``lam`` (..., p): full rank (the rule)."""
    return lam[..., 0] > rcond * np.maximum(lam[..., -1], np.finfo(float).tiny)


def full_rank(x: np.ndarray, rcond: float = RANK_RCOND) -> bool:
    """Whether the design ``x`` (n, p) determines p coefficients, by the rule of
    :func:`wls_batch` with equal weights."""
    return bool(_ranked(np.linalg.eigvalsh(x.T @ x), rcond))


def wls_batch(
    x: np.ndarray, w: np.ndarray, y: np.ndarray, *, rcond: float = RANK_RCOND
) -> tuple[np.ndarray, np.ndarray]:
    """Solve many weighted least-squares problems that share a design matrix.

    ``x`` is (n, p), ``w`` (B, n) non-negative weights (bootstrap counts times fit weights), ``y``
    (n,) or (B, n). Returns ``coef`` (B, p) and ``ok`` (B,): False where the weighted design is
    rank-deficient (a resample that lost the variation of a predictor), whose coefficients are NaN.
    """
    w = np.atleast_2d(w)
    y2 = np.broadcast_to(y, w.shape)
    # zero weight must silence a point even when its y is inf/nan (absent point of a resample)
    wy = np.where(w > 0, w * np.where(np.isfinite(y2), y2, 0.0), 0.0)
    p = x.shape[1]
    # one GEMM for all normal matrices: A_b = Σ_n w_bn x_n x_nᵀ
    a = (w @ (x[:, :, None] * x[:, None, :]).reshape(len(x), p * p)).reshape(-1, p, p)
    rhs = wy @ x
    lam, vec = np.linalg.eigh(a)
    top = np.maximum(lam[:, -1:], np.finfo(float).tiny)
    ok = _ranked(lam, rcond)
    inv_lam = np.where(lam > rcond * top, 1.0 / np.where(lam > 0, lam, 1.0), 0.0)
    proj = np.einsum("bqk,bq->bk", vec, rhs) * inv_lam
    coef = np.einsum("bpk,bk->bp", vec, proj)
    coef[~ok] = np.nan
    return coef, ok


def widen_samples(boot: np.ndarray, center: np.ndarray, n: int, p: int, level: float) -> np.ndarray:
    """Spread resampled coefficients about ``center`` by sqrt(n/(n-p))·t_{n-p}/z.

    Resampling n cases underestimates the spread of a p-coefficient fit by about sqrt((n-p)/n),
    and normal quantiles are too narrow for n-p degrees of freedom: measured on seeded synthetic
    ladders of 18 cells, unadjusted 95% intervals covered the true batch exponent 80-85% of the
    time. For hundreds of points (the band fit) the factor is ~1.
    """
    import math

    from scipy.stats import norm, t

    if len(boot) == 0 or n - p < 1:
        return boot
    q = 0.5 + level / 2
    factor = math.sqrt(n / (n - p)) * float(t.ppf(q, n - p) / norm.ppf(q))
    return center + factor * (boot - center)


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> np.ndarray:
    """(2, ...) lower/upper percentile bounds over axis 0, ignoring NaN resamples."""
    q = 100.0 * (0.5 - level / 2), 100.0 * (0.5 + level / 2)
    with np.errstate(all="ignore"):
        return np.nanpercentile(samples, q, axis=0)


def fingerprint(names: Sequence[str], *arrays: np.ndarray) -> str:
    """Short sha256 of the data a fit used (column names and values rounded to 12 digits)."""
    h = hashlib.sha256("|".join(names).encode())
    for a in arrays:
        arr = np.asarray(a, dtype=float)
        h.update(np.array(arr.shape, dtype=np.int64).tobytes())
        h.update(np.round(np.nan_to_num(arr, nan=-1.0), 12).tobytes())
    return h.hexdigest()[:16]

"""The surface fit: one model of every run of every cell, whose optimum *is* the power law.

Two-stage fits (:mod:`sweeper.fitting.optimum`, then :mod:`sweeper.fitting.power_law`) first
reduce each cell to one optimum, with its own curve fitted to a handful of runs. Here the curve is
shared: every completed run of every cell is a point of one parametric model (natural logs; η the
peak LR, B the batch in tokens, loss in nats):

    ln loss_i = ℓ_c + ln(1 + s_i) + σ(Δu_i)·e_i
    q_i       = ½·k_c·exp(α·[Δu_i > 0] + η_B·Δv_i)·Δu_i²
    s_i       = q_i below the optimum, (1 − exp(−ψ·q_i))/ψ above it
                [+ ½·k^B_c·exp(α_B·[Δv_i > 0])·Δv_i²]
    Δv_i      = ln B_i − ln B*_c,   Δu_i = ln η_i − ln η*_c − γ·Δv_i − γ₂·Δv_i²
    ln η*_c   = ln a + Σ_k b_k·ln x_ck + ε_c          (the LR law)
    ln B*_c   = ln a_B + Σ_k b^B_k·ln x^B_ck + δ_c    (the batch law, when the batch is swept)
    ln k_c    = ln k_0 + Σ_k ρ_k·ln x_ck              (``shape_scaling``; else ρ = 0), same for k^B
                (``"auto"``: ρ kept only if a Wald test on its Laplace covariance rejects ρ = 0;
                ``"ftest"``: only if the extra-sum-of-squares F test of the fits with and without
                it rejects one width)

with x_ck the predictors of cell c (among n_params, tokens, flops, width, depth) and s the
relative loss excess over the cell's optimum loss exp(ℓ_c). The shape is asymmetric: α is the log
ratio of the curvature just above the optimum to that just below (the cliff, e^α-fold steeper),
the rise above may level off at a relative excess 1/ψ (ψ ≥ 0; 0 is a plain quadratic), and the
width may change with scale (ρ). The terms in Δv appear only when the batch size varies
within cells; then both laws are fitted jointly from the same runs (:func:`fit_surfaces` returns
both), γ and γ₂ say how the best LR moves with the batch within a cell (a straight or bent valley)
and η_B how the LR curvature changes with it (both were plain in Step Law's 17 cells' residuals,
±1-2% of the loss, before they were added).

Choices, and why:

- ℓ_c, the log loss at the cell's optimum, is free per cell: cells differ in N and D, and a loss
  law L(N, D) would tie the optimum's position to a second model that can be wrong; each level
  costs one parameter that the cell's own runs determine well.
- ε_c, δ_c: the cells' optima may scatter about a straight line in log space (the law is an
  approximation); they are Gaussian random effects with scale τ (τ_B) estimated by REML from the
  cells' optima fitted freely under the shared shape (a meta-regression). τ = 0 (no scatter beyond
  the optima's own errors) makes the law exact. τ is the law's ``residual_std``.
- Diverged runs (``diverged``, or COMPLETE with a non-finite loss) are not loss values: a run that
  diverged at η says the optimum at its batch lies below η. Per cell and batch size, the lowest
  diverged LR above every completed one is a one-sided quadratic penalty max(0, ln η*_c + γΔv +
  γ₂Δv² − ln η)/0.05; a diverged run below a completed one (sporadic) is ignored (noted). A
  completed run whose loss exceeds its cell's best by more than ``blowup`` (relative, default 50%:
  Step Law's released runs have none between +25% and +50%, 181 above) is off the model's range:
  above the best run's LR (at its batch) it counts as diverged, below it is left out (noted).
- The curve is a local model: the loss points of a cell are its completed runs from 4x below to
  2^0.75 ≈ 1.68x above its best LR at their batch size (the LR of the lowest mean loss; ``window``,
  natural logs, default :data:`WINDOW`: the parabola's window below, one sqrt(2) step above;
  widened to at least two grid steps below and one above on a coarser grid, so that a factor-2
  grid keeps 4x below and 2x above).
  Further above, past the cliff, the loss no longer follows the curve (on Sweeper's width_sp
  ladder it levels off near the same loss, ~2.45-2.55, at every width): those runs are bounds,
  like diverged runs. Further below they are left out. ``window=None`` uses every run (the
  ``all-runs`` settings). The trade-off, measured (docs/RESULTS.md): on synthetic ladders from
  the model's own family every run gives intervals that cover (0.96-0.975 at 4-10 cells, against
  0.78-0.95 with the window, which is chosen from the noisy best LR) and a 3x smaller spread; on
  width_sp every run puts the cells' optima 0.4-1 octave below their best runs (leave-one-cell-out
  error 0.44 against 0.32); on quickstart it does no harm (0.19 against 0.25).
- A cell without ``min_runs`` completed runs at 2 or more LRs is not fitted. If its runs diverged,
  its bound is checked against the fitted law and a :class:`FitWarning` says whether the law's
  optimum there lies below the lowest LR that diverged (consistent) or above it (the cell is broken
  or the law does not hold there). It does not count as a usable cell.
- α has a weakly informative prior, Gaussian with centre ln 3 and sd 1 (one residual row; see
  ``_surface_model.ASYMMETRY_PRIOR``): runs that lie mostly at or below the optima hardly
  determine it, and unchecked it ran to its bound on sparse designs, the optima sliding up
  against the steep rise (half an octave at 10x from a quarter of the quickstart ladder's runs).
  On dense grids it moves α by at most 0.55 on Sweeper's SP ladders and not at all on Step
  Law's released runs (1.03); width_mup's, at the bound without it, comes to 1.56.
- Noise: seeds are replicates, but with 1-3 seeds per point their spread is useless as a weight.
  σ is pooled over all cells as a function of the signed distance to the optimum, ln σ(Δu) = s_0
  + s_1·min(Δu/step, 1) + s_2·min(−Δu/step, 2)/2 (step: the LR grid step), fitted by Gaussian
  likelihood to the residuals of the free-optima fit, with two pseudo-runs at the pooled σ on each
  side (else a side whose few runs the fit passes through gets σ → 0), and scaled by n/(n − p);
  the runs' residuals are then weighted by 1/σ (feasible GLS) under a Huber loss at 2σ (the
  bounds and the random effects stay quadratic). No seed column is needed.
- Other searched dimensions (``warmup``, ``weight_decay``, ``beta1``, ``beta2``, ``schedule``,
  ``min_lr_ratio``, ``z_loss``, ``grad_clip``) are not modelled: if one varies within a cell the
  fit raises :class:`FitError` naming the column, unless it is listed in ``allow_varying`` (then
  its effect is pooled into the noise).

Fitting: ``scipy.optimize.least_squares`` (trf, analytic Jacobian), in three steps: (1) the shared
shape with free per-cell optima (three solves: a flat noise level, then the noise model's weights,
re-estimated once); (2) τ by REML from those optima and their Laplace covariance; (3) the law
model, started from the GLS law of the free optima.

Intervals (``level``): with ``n_boot > 0``, percentiles over refits of step 3 on resampled data,
at both levels of the design: runs are resampled with replacement within each cell (completed runs
and bounds together), and each cell's curve is shifted by a fresh draw of its deviation from the
law, N(0, τ*²), with τ*² = τ²·ν/χ²_ν (ν = cells − law coefficients: the cells' part of the law's
uncertainty is then Student-t, as in a meta-regression with estimated heterogeneity). Cells are not
resampled: with 4-10 cells a resample loses the predictors' spread. The draws are widened about the
estimate by sqrt(n/(n − p))·t/z (:func:`widen_samples`, n runs, p parameters). With ``n_boot = 0``
they come from the Laplace (Gauss-Newton) covariance of step 3, split the same way (the runs' part
normal, the cells' part Student-t); that covariance is stored in every law (``shape_cov``) for
callers that need a cheap uncertainty inside a loop. Measured on proxy-like synthetic ladders
(docs/RESULTS.md), the 95% intervals on the exponent cover 0.955-0.975 bootstrapped and
0.78-0.95 Laplace at 4-10 cells.

Errors: :class:`FitError` (one line) for too few usable cells for the predictors (at least
max(3, k + 2) for k predictors), no LR variation within any cell, a predictor that does not vary
or predictors that are collinear, an unmodelled searched column that varies, or a batch target
without batch variation.

Cost: well under a second for ~500 runs without resampling; each resample is one warm-started
refit (~5-15 ms for a proxy ladder).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import pandas as pd
from scipy import stats

from sweeper.errors import FitError
from sweeper.fitting import _surface_fit as sf
from sweeper.fitting._common import (
    FitWarning,
    fingerprint,
    percentile_ci,
    single_threaded_blas,
)
from sweeper.fitting._surface_data import Data, prepare
from sweeper.fitting._surface_law import BLOWUP, Regret, SurfaceLaw
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import TARGETS
from sweeper.fitting.power_law import held_ranges

__all__ = ["WINDOW", "Regret", "SurfaceLaw", "fit_surface", "fit_surfaces"]

#: the most the curve's width may change across the cells, in ln k (x30): beyond it the fitted
#: scaling of the width is a runaway (a flat curve at one end, the optimum driven to 0 at the other;
#: 4 of 2,000 synthetic proxy ladders did this), and the fit is redone with one width for all cells
MAX_CURVATURE_SPAN: Final[float] = math.log(30.0)

#: ``shape_scaling``: True (the curve's width scales with the predictors), False (one width), or
#: "auto" / "ftest": scaled only where the data determine the scaling (a Wald test on the scaled
#: fit's Laplace covariance / an extra-sum-of-squares F test, :func:`_fit_scaling`)
Scaling = bool | Literal["auto", "ftest"]

#: the runs that are loss points: from 4x below to 2^0.75 ≈ 1.68x above their cell's best LR (one
#: sqrt(2) step above it, not two); see the module docstring
WINDOW: Final[tuple[float, float]] = (math.log(4.0), 0.75 * math.log(2.0))


@dataclass(frozen=True)
class Settings:
    """A named way to run the fit (:data:`~sweeper.fitting.methods.SURFACE_SETTINGS`):
    ``window``, ``shape_scaling`` as in :func:`fit_surfaces`; ``min_runs``: the completed runs a
    cell needs where the caller gave none of its own (None: the caller's default)."""

    window: tuple[float, float] | None
    shape_scaling: Scaling
    min_runs: int | None = None


#: standard: the runs within :data:`WINDOW` of each cell's best LR, the curve's width scaling with
#: N; all-runs: every run (on synthetic ladders drawn from the model's own family its intervals
#: cover 0.96-0.975 at 4-10 cells where the window's cover 0.78-0.95, but on Sweeper's width_sp
#: ladder, whose loss past the cliff is not the model's curve, it puts the cells' optima 0.4-1
#: octave below their best runs; docs/RESULTS.md); planner: the law sampler's fit
#: (:mod:`sweeper.fitting.allocation`: with 3-5 runs per cell near each optimum the window leaves
#: too few loss points, and the width's slope in N is often not determined; keeping it where a Wald
#: or an F test finds it, ``"auto"`` / ``"ftest"``, was measured and not adopted: docs/RESULTS.md)
SETTINGS: Final[dict[str, Settings]] = {
    "standard": Settings(window=WINDOW, shape_scaling=True),
    "all-runs": Settings(window=None, shape_scaling=True),
    "planner": Settings(window=None, shape_scaling=False, min_runs=3),
}


@single_threaded_blas
def fit_surface(
    runs: pd.DataFrame,
    *,
    target: str = "lr",
    predictors: Sequence[str] = ("n_params",),
    other_predictors: Sequence[str] | None = None,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
    source: str = "",
    conventions: Conventions | None = None,
    shape_scaling: Scaling = True,
    min_runs: int = 3,
    blowup: float = BLOWUP,
    allow_varying: Sequence[str] = (),
    cv: bool = True,
    window: tuple[float, float] | None = SETTINGS["standard"].window,
) -> SurfaceLaw:
    """Fit the surface (module docstring) and return the law of ``target`` on ``predictors``.

    ``target`` is ``"lr"`` or ``"batch_tokens"``. When the batch size varies within cells, both
    laws are fitted jointly: ``other_predictors`` are the predictors of the other target (default:
    ``("tokens",)`` for the batch law of an LR fit when tokens vary across cells, else the LR
    predictors; for a batch fit, those of ``n_params`` and ``tokens`` that vary). Use
    :func:`fit_surfaces` to get both laws from one fit. Arguments as :func:`fit_surfaces`.
    """
    if target not in TARGETS:
        raise FitError(f"target must be one of {TARGETS}, got {target!r}")
    lr_p: Sequence[str] | None = predictors
    bt_p: Sequence[str] | None = other_predictors
    if target == "batch_tokens":
        lr_p, bt_p = other_predictors, predictors
    laws = _fit_surfaces(
        runs,
        lr_predictors=lr_p,
        batch_predictors=bt_p,
        need_batch=target == "batch_tokens",
        n_boot=n_boot,
        seed=seed,
        level=level,
        source=source,
        conventions=conventions,
        shape_scaling=shape_scaling,
        min_runs=min_runs,
        blowup=blowup,
        allow_varying=allow_varying,
        cv=cv,
        window=window,
    )
    return laws[target]


def _solve(data: Data, **kw: Any) -> sf.Result:
    """:func:`sf.fit`, a singular system (cells that do not determine the law) as a FitError."""
    try:
        return sf.fit(data, **kw)
    except np.linalg.LinAlgError as e:
        why = f"the surface fit is singular ({e}): its cells do not determine the law"
        raise FitError(why) from None


@single_threaded_blas
def fit_surfaces(
    runs: pd.DataFrame,
    *,
    lr_predictors: Sequence[str] | None = ("n_params",),
    batch_predictors: Sequence[str] | None = None,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
    source: str = "",
    conventions: Conventions | None = None,
    shape_scaling: Scaling = True,
    min_runs: int = 3,
    blowup: float = BLOWUP,
    allow_varying: Sequence[str] = (),
    cv: bool = True,
    window: tuple[float, float] | None = SETTINGS["standard"].window,
) -> dict[str, SurfaceLaw]:
    """Fit the surface and return ``{"lr": law}``, plus ``"batch_tokens"`` when the batch varies.

    ``runs``: a runs table (canonical columns, :mod:`sweeper.study.runs`). ``n_boot`` resampled
    refits give the intervals (0: the Laplace covariance); ``seed`` seeds them. ``shape_scaling``
    lets the curvature vary with the predictors (ln k linear in their logs); ``"auto"`` keeps that
    only when a Wald test at ``level`` rejects "no scaling", ``"ftest"`` only when an F test does
    (:func:`_fit_scaling`). ``min_runs``:
    fewest completed runs for a cell to count. ``blowup``: relative loss excess over the cell's
    best past which a completed run is off the model (module docstring). ``window``: (below,
    above) natural-log range around each cell's best LR whose runs are loss points (None: all).
    ``cv``: compute the leave-one-cell-out errors (one refit per cell). Other arguments are
    recorded in the laws as in :func:`~sweeper.fitting.power_law.fit_power_law`.
    """
    return _fit_surfaces(
        runs,
        lr_predictors=lr_predictors,
        batch_predictors=batch_predictors,
        need_batch=False,
        n_boot=n_boot,
        seed=seed,
        level=level,
        source=source,
        conventions=conventions,
        shape_scaling=shape_scaling,
        min_runs=min_runs,
        blowup=blowup,
        allow_varying=allow_varying,
        cv=cv,
        window=window,
    )


def _fit_surfaces(
    runs: pd.DataFrame,
    *,
    lr_predictors: Sequence[str] | None,
    batch_predictors: Sequence[str] | None,
    need_batch: bool,
    n_boot: int,
    seed: int,
    level: float,
    source: str,
    conventions: Conventions | None,
    shape_scaling: Scaling,
    min_runs: int,
    blowup: float,
    allow_varying: Sequence[str],
    cv: bool,
    window: tuple[float, float] | None,
) -> dict[str, SurfaceLaw]:
    if not 0 < level < 1:
        raise FitError(f"level must be in (0, 1), got {level}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FitWarning)
        data = prepare(
            runs,
            lr_predictors=lr_predictors,
            batch_predictors=batch_predictors,
            need_batch=need_batch,
            min_runs=min_runs,
            blowup=blowup,
            allow_varying=allow_varying,
            window=window,
        )
        fit, scaled = _fit_scaling(
            data, shape_scaling, n_boot=n_boot, seed=seed, level=level, cv=cv
        )
    for w in caught:
        if not issubclass(w.category, FitWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    notes = list(data.notes) + [str(w.message) for w in caught if w.category is FitWarning]
    notes += fit.notes + sf.check_bounds(data, fit) + _doubts(data, fit)
    for m in notes[len(data.notes) :]:
        warnings.warn(m, FitWarning, stacklevel=4)
    targets = ["lr"] + (["batch_tokens"] if data.lxb is not None else [])
    return {
        t: _make_law(
            data,
            fit,
            t,
            notes,
            level,
            scaling=scaled,
            source=source,
            conventions=conventions,
        )
        for t in targets
    }


def _fit_scaling(
    data: Data, shape_scaling: Scaling, *, n_boot: int, seed: int, level: float, cv: bool
) -> tuple[sf.Result, bool]:
    """The fit with the curvature's scaling as asked, and whether it kept it: a runaway scaling
    (:data:`MAX_CURVATURE_SPAN`) or, for ``"auto"``/``"ftest"``, one the data do not determine
    (or whose fit failed or did not converge) is refitted with one width for every cell (the note
    says why). ``"auto"`` tests with a Wald statistic on the scaled fit's Laplace covariance, which
    can understate a poorly determined slope (near-null directions); ``"ftest"`` with the
    extra-sum-of-squares F test of the two first-step fits
    (:func:`~sweeper.fitting._surface_fit.scaling_f_test`: five first-step solves, before the
    scaled fit). Both fire more often than their level on sparse ladders with one curvature (4
    runs a cell: ~18% at 5%, docs/RESULTS.md). A tested scaling costs a second point fit when it
    is kept and a bootstrap or ``cv`` is asked for."""
    if shape_scaling not in (True, False, "auto", "ftest"):
        raise FitError(
            f"shape_scaling must be True, False, 'auto' or 'ftest', got {shape_scaling!r}"
        )
    kw: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "level": level, "cv": cv}
    why = _f_test_says_one_width(data, level) if shape_scaling == "ftest" else ""
    if not shape_scaling or why:
        plain = _solve(data, scaling=False, **kw)
        if why:
            plain.notes.append(why)
        return plain, False
    tested = shape_scaling in ("auto", "ftest")
    first = kw | {"n_boot": 0, "cv": False} if tested else kw  # the test needs no bootstrap
    fit: sf.Result | None
    try:
        fit = _solve(data, scaling=True, **first)
    except FitError:
        if not tested:
            raise
        fit, why = None, "the fit with the curve's width scaling failed: one width for every cell"
    else:
        why = _why_one_width(data, fit, shape_scaling, level)
    if fit is not None and not why:  # keep it (tested: redo with the bootstrap and cv asked for)
        same = not tested or (n_boot, cv) == (0, False)
        return (fit if same else _solve(data, scaling=True, **kw)), True
    fit = _solve(data, scaling=False, **kw)
    fit.notes.append(why)
    return fit, False


def _f_test_says_one_width(data: Data, level: float) -> str:
    """Why the F test keeps one width for every cell ("" when it keeps the scaling)."""
    try:
        f, q, dof = sf.scaling_f_test(data)
    except np.linalg.LinAlgError:
        return "the F test of the curve's width scaling is singular: one width for every cell"
    if dof <= 0:
        return (
            f"the F test of the curve's width scaling has no degrees of freedom ({dof} runs "
            "beyond the scaled fit's parameters): one width for every cell"
        )
    if q > 0 and f > float(stats.f.ppf(level, q, dof)):
        return ""
    return (
        f"the curve's width scaling is not determined (F {f:.3g} on {q} and {dof} degrees of "
        f"freedom, below its {level:.0%} point): one width for every cell"
    )


def _why_one_width(data: Data, fit: sf.Result, rule: Scaling, level: float) -> str:
    """Why a fit with the curvature's scaling is to be redone with one width ("" to keep it):
    the scaling ran away, or (a tested ``rule``) the fit did not converge or (``"auto"``) the
    Wald test keeps 0."""
    span = _curvature_span(data, fit)
    if span > MAX_CURVATURE_SPAN:  # the curvature ran away with scale: the law is not identified
        return (
            f"the curve's width ran away with scale (curvature x{math.exp(min(span, 700.0)):.3g}"
            " across the cells): refitted with one width for every cell"
        )
    if rule not in ("auto", "ftest"):
        return ""
    if any("did not converge" in n for n in fit.notes):
        # not "did not converge": that phrase marks the returned fit as unconverged (the law
        # planner's stopping rule reads it), and the one-width fit returned here is checked anew
        return (
            "the fit with the curve's width scaling stopped short of converging: one width for "
            "every cell"
        )
    if rule != "auto":
        return ""
    stat, dof = _scaling_wald(data, fit)
    if dof == 0 or stat <= float(stats.chi2.ppf(level, dof)):
        return (
            f"the curve's width scaling is not determined (Wald chi2 {stat:.3g} on {dof} "
            f"degree(s) of freedom, below its {level:.0%} point): one width for every cell"
        )
    return ""


def _scaling_wald(data: Data, fit: sf.Result) -> tuple[float, int]:
    """Wald statistic of "no scaling": θᵀ C⁻¹ θ over the curvature's slopes θ in the predictors
    (every target's; not the LR curvature's tilt with the batch, fitted either way), C their
    Laplace covariance; and its degrees of freedom. A singular C: statistic 0."""
    names = {
        f"{t}:log_curvature:{p}"
        for t, ps in (("lr", data.preds), ("batch_tokens", data.bpreds))
        for p in ps or ()
    }
    j = [i for i, n in enumerate(fit.names) if n in names]
    th, cov = fit.theta[j], fit.cov[np.ix_(j, j)]
    try:
        stat = float(th @ np.linalg.solve(cov, th))
    except np.linalg.LinAlgError:
        return 0.0, len(j)
    return (stat if math.isfinite(stat) and stat > 0 else 0.0), len(j)


def _curvature_span(data: Data, fit: sf.Result) -> float:
    """How far ln k (the curve's width) moves across the usable cells under the fitted scaling:
    Σ_p |ρ_p|·range(ln x_p), the largest over the targets' curves (inf when not finite)."""
    idx = {n: i for i, n in enumerate(fit.names)}
    lx = {"lr": data.lx, "batch_tokens": data.lxb}
    preds = {"lr": data.preds, "batch_tokens": data.bpreds}
    span = 0.0
    for t in ("lr", "batch_tokens"):
        x, ps = lx[t], preds[t]
        if x is None or ps is None:
            continue
        u = x[: data.n_usable]
        total = sum(
            abs(float(fit.theta[idx[f"{t}:log_curvature:{p}"]])) * float(np.ptp(u[:, j]))
            for j, p in enumerate(ps)
            if f"{t}:log_curvature:{p}" in idx
        )
        span = max(span, total if math.isfinite(total) else math.inf)
    return span


def _doubts(data: Data, fit: sf.Result) -> list[str]:
    msgs = []
    if data.n_usable < 5:
        msgs.append(
            f"only {data.n_usable} cells: the intervals are wide and rest on the law being a "
            "straight line in log space"
        )
    for target, (cv, _hold) in fit.cv.items():
        if cv is not None and cv > 0.5:
            msgs.append(
                f"{target}: leave-one-cell-out error {cv:.2f} (natural log): the law fits poorly"
            )
    return msgs


def _make_law(
    data: Data,
    fit: sf.Result,
    target: str,
    notes: list[str],
    level: float,
    *,
    scaling: bool,
    source: str,
    conventions: Conventions | None,
) -> SurfaceLaw:
    preds = data.preds if target == "lr" else data.bpreds
    assert preds is not None
    coef, boot, ci = _coefficients(fit, target, preds, level)
    u_n = data.n_usable
    conv, domain = _scope(data, target, preds, conventions)
    cell_opt = _cell_optima(data, fit, target)
    cv, hold = fit.cv.get(target, (None, None))
    r = data.runs
    curvature = fit.curvature if target == "lr" else None
    return SurfaceLaw(
        target=target,
        predictors=preds,
        source=source,
        method="surface",
        conventions=conv,
        domain=domain,
        log_prefactor=float(coef[0]),
        exponents={p: float(coef[j + 1]) for j, p in enumerate(preds)},
        exponents_ci=(
            {p: (float(ci[0, j + 1]), float(ci[1, j + 1])) for j, p in enumerate(preds)}
            if ci is not None
            else {}
        ),
        prefactor_ci=_prefactor_ci(ci),
        boot_coefs=tuple(tuple(float(v) for v in row) for row in boot[: sf.MAX_DRAWS]),
        residual_std=fit.tau if target == "lr" else fit.tau_b,
        n_cells=u_n,
        n_points=data.n_runs,
        cv_error=cv,
        holdout_error=hold,
        loss_curvature=curvature,
        fingerprint=fingerprint([target, *preds, "surface"], data.lx, r.u, r.v, r.y, r.du, r.dv),
        notes=tuple(notes),
        shape_names=tuple(fit.names),
        shape_params=tuple(float(v) for v in fit.theta),
        shape_draws=tuple(tuple(float(v) for v in row) for row in fit.draws),
        shape_cov=tuple(tuple(float(v) for v in row) for row in fit.cov),
        shape_predictors=preds if scaling else (),
        interval_method=fit.interval,
        noise={
            "noise0": float(fit.noise[0]),
            "rise": float(fit.noise[1]),
            "fall": float(fit.noise[2]),
            "step": float(data.step),
        },
        cell_optima=cell_opt,
        cell_curves=(
            {
                c: tuple(float(v) for v in row)
                for c, row in zip(data.cells, fit.curves, strict=False)
            }
            if target == "lr"
            else {}
        ),
    )


def _cell_optima(data: Data, fit: sf.Result, target: str) -> dict[str, float]:
    """The cells' free optima of ``target``, as measured: a batch optimum the cell's runs do not
    bracket (``data.batch_edges``) is left out, being no measurement (compare and the report had
    shown 1.5e10 tokens as a cell's measured batch optimum where it tried 37k-74k; a fit audit)."""
    opt = fit.free_m if target == "lr" else fit.free_w
    if opt is None:
        return {}
    skip = data.batch_edges if target == "batch_tokens" else {}
    return {c: float(np.exp(v)) for c, v in zip(data.cells, opt, strict=False) if c not in skip}


def _coefficients(
    fit: sf.Result, target: str, preds: Sequence[str], level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The law's (log prefactor, exponents): point, finite draws, ``level`` percentile interval."""
    idx = {n: i for i, n in enumerate(fit.names)}
    cols = [idx[f"{target}:log_prefactor"], *(idx[f"{target}:{p}"] for p in preds)]
    boot = fit.draws[:, cols]
    boot = boot[np.all(np.isfinite(boot), axis=1)]
    return fit.theta[cols], boot, percentile_ci(boot, level) if len(boot) >= 2 else None


def _prefactor_ci(ci: np.ndarray | None) -> tuple[float, float] | None:
    """The prefactor's interval from the log prefactor's (a wild fit's overflows to inf)."""
    if ci is None:
        return None
    with np.errstate(over="ignore"):
        return float(np.exp(ci[0, 0])), float(np.exp(ci[1, 0]))


def _scope(
    data: Data, target: str, preds: Sequence[str], conventions: Conventions | None
) -> tuple[Conventions, dict[str, tuple[float, float]]]:
    """The conventions with what the fitted cells held fixed, and the predictors' fitted range."""
    u_n = data.n_usable
    lx = data.lx if target == "lr" else data.lxb
    assert lx is not None
    held = held_ranges(data.cell_frame.iloc[:u_n], target, preds)
    if target == "lr" and data.lxb is not None:
        held.pop("batch_tokens", None)  # the LR law is at each scale's optimal batch
    domain = {
        p: (_round(np.exp(lx[:u_n, j].min())), _round(np.exp(lx[:u_n, j].max())))
        for j, p in enumerate(preds)
    }
    return (conventions or Conventions()).with_held(held), domain


def _round(v: float) -> float:
    return float(f"{v:.12g}")

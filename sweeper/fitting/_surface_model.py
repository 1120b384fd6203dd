"""Numerical core of the surface fit (:mod:`sweeper.fitting.surface`): pure numpy/scipy, no pandas.

Model, per completed run i of cell c (natural logs throughout; u = ln lr, v = ln batch_tokens
minus a fixed centre, y = ln loss):

    Δv_i = v_i − w_c                                    (0 when the batch is not modelled)
    Δu_i = u_i − m_c − γ·Δv_i − γ₂·Δv_i²                (the LR optimum moves with the batch)
    q_i  = ½·k_c·exp(α·[Δu_i > 0] + η_B·Δv_i)·Δu_i²
    s_i  = q_i (Δu_i ≤ 0), (1 − exp(−ψ·q_i))/ψ (Δu_i > 0)  + ½·k^B_c·exp(α_B·[Δv_i > 0])·Δv_i²
    y_i  = ℓ_c + ln(1 + s_i) + σ(Δu_i)·e_i

so ``s`` is the relative loss excess over the cell's optimum loss exp(ℓ_c); above the optimum it
rises as steeply as e^α·k and levels off at 1/ψ (ψ ≥ 0; ψ = 0 is a plain quadratic): the cliff. The cell's optimum
(m_c, w_c) is either free (the *free* fit, one per cell) or the power law plus a cell deviation
(the *law* fit): m_c = a_0 + b·z_c + ε_c, w_c = d_0 + e·z^B_c + δ_c, with z_c the centred log
predictors of cell c and ε_c/τ, δ_c/τ_B penalty residuals (Gaussian random effects whose scale
comes from :func:`reml_tau`). ln k_c = κ_0 + ρ·z_c (the curvature may vary with scale; no ρ when
not modelled), likewise ln k^B_c; the asymmetry α and the levelling-off ψ are shared. (Letting α
vary with scale too cost the synthetic proxy ladders half their precision and made the shipped
quickstart ladder's leave-one-cell-out error worse, 0.21 vs 0.19.) A diverged run at (u, v) says the optimum at its batch lies
below it: a one-sided residual max(0, m_c + γ·Δv + γ₂·Δv² − u)/``DIV_SCALE``.

All residuals are solved together by ``scipy.optimize.least_squares`` (trf) with the analytic
Jacobian below; the runs' residuals enter through a Huber loss at ``HUBER_SCALE`` σ (applied here,
so that the bounds and penalties stay quadratic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from scipy.optimize import OptimizeResult, least_squares, minimize, minimize_scalar

from sweeper.errors import FitError

#: Huber threshold of the standardised residuals (in units of the noise model's σ)
HUBER_SCALE: Final[float] = 2.0
#: softness of the divergence bound, natural-log LR units (5%)
DIV_SCALE: Final[float] = 0.05
#: smallest random-effect scale used in a law fit: below it the law is exact (ε ≈ 0)
TAU_FLOOR: Final[float] = 0.01
#: smallest noise sd (natural log of the loss): smoothed losses can be almost noiseless
SIGMA_FLOOR: Final[float] = 1e-5
#: pseudo-runs at the pooled σ given to each side of the noise model (above and below the optimum):
#: a side with a handful of runs that the fit passes through would otherwise get σ → SIGMA_FLOOR
#: and weigh those runs ~10⁶x the others (seen on the 23-run law-sampler ladder: docs/RESULTS.md)
NOISE_PRIOR_RUNS: Final[float] = 2.0


@dataclass
class Runs:
    """Runs as arrays; cells are indexed 0..C-1."""

    cell: np.ndarray  # (n,) int, completed runs
    u: np.ndarray  # (n,) ln lr
    v: np.ndarray  # (n,) ln batch_tokens - v0 (zeros when the batch is not modelled)
    y: np.ndarray  # (n,) ln loss
    dcell: np.ndarray  # (nd,) int, diverged runs (and blow-ups above the cell's best LR)
    du: np.ndarray
    dv: np.ndarray
    sig: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (n,) noise sd of y

    def take(self, idx: np.ndarray, didx: np.ndarray) -> Runs:
        """The runs at ``idx`` (completed) and ``didx`` (diverged), repeats allowed."""
        return Runs(
            self.cell[idx],
            self.u[idx],
            self.v[idx],
            self.y[idx],
            self.dcell[didx],
            self.du[didx],
            self.dv[didx],
            self.sig[idx] if self.sig.size else self.sig,
        )


class Layout:
    """Where each parameter sits in the vector, and the per-cell rows mapping it to m_c, w_c, ln k.

    Blocks: free fit ``m`` (C) [, ``w`` (C), ``gamma`` (γ, γ₂), ``eta`` (η_B)]; law fit ``a``
    (1+k), ``eps`` (C) [, ``d`` (1+kb), ``del`` (C), ``gamma``, ``eta``]; then ``kap`` (1 [+k]),
    ``alpha`` (1), ``sat`` (ψ) [, ``kapb`` (1 [+kb]), ``alphab``], ``lev`` (one per cell with completed
    runs).
    """

    def __init__(
        self,
        z: np.ndarray,
        zb: np.ndarray | None,
        *,
        free: bool,
        level_cells: np.ndarray,
        scaling: bool,
        tau: float = TAU_FLOOR,
        tau_b: float = TAU_FLOOR,
    ) -> None:
        n_cells, k = z.shape
        kb = 0 if zb is None else zb.shape[1]
        self.n_cells, self.free, self.batch = n_cells, free, zb is not None
        self.z, self.zb, self.scaling, self.tau, self.tau_b = z, zb, scaling, tau, tau_b
        sizes: list[tuple[str, int]] = []
        if free:
            sizes.append(("m", n_cells))
        else:
            sizes += [("a", 1 + k), ("eps", n_cells)]
        if zb is not None:
            sizes += [("w", n_cells)] if free else [("d", 1 + kb), ("del", n_cells)]
            sizes.append(("gamma", 2))
            sizes.append(("eta", 1))
        sizes += [("kap", 1 + (k if scaling else 0)), ("alpha", 1)]
        sizes.append(("sat", 1))
        if zb is not None:
            sizes += [("kapb", 1 + (kb if scaling else 0)), ("alphab", 1)]
        level_cells = np.asarray(level_cells, dtype=int)
        sizes.append(("lev", level_cells.size))
        self.slices: dict[str, slice] = {}
        pos = 0
        for name, size in sizes:
            self.slices[name] = slice(pos, pos + size)
            pos += size
        self.size = pos
        self.m_rows = self._law_rows("m", "a", "eps", z)
        self.w_rows = self._law_rows("w", "d", "del", zb) if zb is not None else self._zeros()
        self.k_rows = self._shape_rows("kap", z, scaling)
        self.a_rows = self._shape_rows("alpha", z, False)
        self.kb_rows = self._shape_rows("kapb", zb, scaling) if zb is not None else self._zeros()
        self.level_of = np.full(n_cells, -1)
        self.level_of[level_cells] = self.slices["lev"].start + np.arange(level_cells.size)
        pen = []
        if not free:
            pen.append(self._pen_rows("eps", tau))
            if zb is not None:
                pen.append(self._pen_rows("del", tau_b))
        self.pen_rows = np.vstack(pen) if pen else np.zeros((0, pos))
        self.prior_rows, self.prior_at = np.zeros((0, pos)), np.zeros(0)
        if ASYMMETRY_PRIOR is not None:
            centre, sd = ASYMMETRY_PRIOR
            self.prior_rows = np.zeros((1, pos))
            self.prior_rows[0, self.index("alpha")] = 1.0 / sd
            self.prior_at = np.array([centre / sd])

    def with_levels(
        self, level_cells: np.ndarray, *, tau: float | None = None, tau_b: float | None = None
    ) -> Layout:
        """The same layout with levels for ``level_cells`` only (cells with completed runs), and
        optionally other random-effect scales."""
        return Layout(
            self.z, self.zb, free=self.free, level_cells=level_cells, scaling=self.scaling,
            tau=self.tau if tau is None else tau, tau_b=self.tau_b if tau_b is None else tau_b,
        )  # fmt: skip

    def _zeros(self) -> np.ndarray:
        return np.zeros((self.n_cells, self.size))

    def _law_rows(self, free_name: str, law_name: str, dev_name: str, z: np.ndarray) -> np.ndarray:
        rows = self._zeros()
        cells = np.arange(self.n_cells)
        if self.free:
            rows[cells, self.slices[free_name].start + cells] = 1.0
        else:
            s = self.slices[law_name]
            rows[:, s.start] = 1.0
            rows[:, s.start + 1 : s.stop] = z
            rows[cells, self.slices[dev_name].start + cells] = 1.0
        return rows

    def _shape_rows(self, name: str, z: np.ndarray, scaling: bool) -> np.ndarray:
        rows = self._zeros()
        s = self.slices[name]
        rows[:, s.start] = 1.0
        if scaling:
            rows[:, s.start + 1 : s.stop] = z
        return rows

    def _pen_rows(self, name: str, tau: float) -> np.ndarray:
        rows = np.zeros((self.n_cells, self.size))
        cells = np.arange(self.n_cells)
        rows[cells, self.slices[name].start + cells] = 1.0 / tau
        return rows

    def get(self, p: np.ndarray, name: str) -> np.ndarray:
        return p[self.slices[name]]

    def index(self, name: str) -> int:
        return self.slices[name].start


def model_parts(p: np.ndarray, lay: Layout, r: Runs) -> dict[str, np.ndarray]:
    """Every intermediate of the mean model at ``p`` for the runs ``r``."""
    m_c, w_c = lay.m_rows @ p, lay.w_rows @ p
    lk_c, lkb_c = lay.k_rows @ p, lay.kb_rows @ p
    g1, g2 = (float(v) for v in p[lay.slices["gamma"]]) if lay.batch else (0.0, 0.0)
    alpha_c = lay.a_rows @ p
    alphab = float(p[lay.index("alphab")]) if lay.batch else 0.0
    c = r.cell
    dv = r.v - w_c[c] if lay.batch else np.zeros_like(r.u)
    du = r.u - m_c[c] - g1 * dv - g2 * dv**2
    eta = float(p[lay.index("eta")]) if lay.batch else 0.0
    ku = np.exp(np.clip(lk_c[c] + alpha_c[c] * (du > 0) + eta * dv, -30.0, 30.0))
    kv = np.exp(np.clip(lkb_c[c] + alphab * (dv > 0), -30.0, 30.0)) if lay.batch else 0.0 * du
    qu = 0.5 * ku * du**2
    psi = float(p[lay.index("sat")])
    su, ds_dq, ds_dpsi = saturate(qu, psi)
    above = du > 0
    su = np.where(above, su, qu)
    ds_dq = np.where(above, ds_dq, 1.0)
    ds_dpsi = np.where(above, ds_dpsi, 0.0)
    s = su + 0.5 * kv * dv**2
    f = p[lay.level_of[c]] + np.log1p(s)
    # diverged runs: how far the optimum at their batch lies above them (positive = violated)
    dc = r.dcell
    ddv = r.dv - w_c[dc] if lay.batch else np.zeros_like(r.du)
    h = m_c[dc] + g1 * ddv + g2 * ddv**2 - r.du
    return {"dv": dv, "du": du, "ku": ku, "kv": kv, "s": s, "f": f, "g1": np.array(g1),
            "g2": np.array(g2), "ddv": ddv, "h": h, "qu": qu, "ds_dq": ds_dq,
            "ds_dpsi": ds_dpsi}  # fmt: skip


def saturate(q: np.ndarray, psi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1 − exp(−ψ·q))/ψ (= q at ψ = 0: a quadratic excess q that levels off at 1/ψ), with its
    derivatives in q and ψ."""
    x = psi * q
    small = x < 1e-4
    with np.errstate(all="ignore"):
        s = np.where(small, q - 0.5 * psi * q * q, -np.expm1(-x) / np.where(psi > 0, psi, 1.0))
        ds_dpsi = np.where(
            small,
            -0.5 * q * q + psi * q**3 / 3.0,
            (x * np.exp(-x) + np.expm1(-x)) / np.where(psi > 0, psi, 1.0) ** 2,
        )
    return s, np.exp(-x), ds_dpsi


def _huberize(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Residuals whose squares are 2·Huber(e) (threshold ``HUBER_SCALE``), and d/de of them.

    Only the runs' residuals are robust: the divergence bounds and the random-effect penalties
    stay quadratic (a bound must not be down-weighted as an outlier).
    """
    c = HUBER_SCALE
    a = np.abs(e)
    far = a > c
    root = np.sqrt(np.where(far, 2.0 * c * a - c * c, 1.0))
    out = np.where(far, np.sign(e) * root, e)
    slope = np.where(far, c / root, 1.0)
    return out, slope


def residuals(p: np.ndarray, lay: Layout, r: Runs) -> np.ndarray:
    """[robust (y − f)/σ for completed runs, divergence bounds, random-effect penalties, the
    asymmetry's prior]."""
    q = model_parts(p, lay, r)
    e, _ = _huberize((r.y - q["f"]) / r.sig)
    prior = lay.prior_rows @ p - lay.prior_at
    return np.concatenate([e, np.maximum(q["h"], 0.0) / DIV_SCALE, lay.pen_rows @ p, prior])


def standardized(p: np.ndarray, lay: Layout, r: Runs) -> np.ndarray:
    """(y − f)/σ of the completed runs (not robustified)."""
    return (r.y - model_parts(p, lay, r)["f"]) / r.sig


def jacobian(p: np.ndarray, lay: Layout, r: Runs) -> np.ndarray:
    """d residuals / d p (dense), analytic."""
    q = model_parts(p, lay, r)
    c, g1, g2 = r.cell, float(q["g1"]), float(q["g2"])
    inv = 1.0 / (1.0 + q["s"])
    g_u = q["ds_dq"] * q["ku"] * q["du"] * inv  # df/dΔu
    g_v = q["kv"] * q["dv"] * inv  # df/dΔv at fixed Δu
    h_k = q["ds_dq"] * q["qu"] * inv  # df/d ln k
    h_kb = 0.5 * q["kv"] * q["dv"] ** 2 * inv
    df = -g_u[:, None] * lay.m_rows[c] + h_k[:, None] * lay.k_rows[c]
    df += (h_k * (q["du"] > 0))[:, None] * lay.a_rows[c]
    df[:, lay.index("sat")] += q["ds_dpsi"] * inv
    if lay.batch:
        tilt = g1 + 2.0 * g2 * q["dv"]  # dΔu/dw
        eta = float(p[lay.index("eta")])
        df += (g_u * tilt - g_v - h_k * eta)[:, None] * lay.w_rows[c]
        df += h_kb[:, None] * lay.kb_rows[c]
        df[:, lay.index("eta")] += h_k * q["dv"]
        df[:, lay.index("gamma")] += -g_u * q["dv"]
        df[:, lay.index("gamma") + 1] += -g_u * q["dv"] ** 2
        df[:, lay.index("alphab")] += h_kb * (q["dv"] > 0)
    df[np.arange(c.size), lay.level_of[c]] += 1.0
    _, slope = _huberize((r.y - q["f"]) / r.sig)
    j_run = -df * (slope / r.sig)[:, None]
    dc = r.dcell
    on = (q["h"] > 0)[:, None] / DIV_SCALE
    j_div = lay.m_rows[dc] - (g1 + 2.0 * g2 * q["ddv"])[:, None] * lay.w_rows[dc]
    if lay.batch:
        j_div[:, lay.index("gamma")] += q["ddv"]
        j_div[:, lay.index("gamma") + 1] += q["ddv"] ** 2
    return np.vstack([j_run, on * j_div, lay.pen_rows, lay.prior_rows])


#: the range of α, the ln ratio of the curvature above the optimum to that below: above at least
#: a tenth as steep as below, at most 1000x steeper. Unbounded, α can run to -inf on a noisy ladder
#: (a flat curve above the optimum lets a cell's optimum slide to 0 at no cost: seen on 1 of 200
#: synthetic 7-cell ladders, exponent -361); the proxies' fits sit at 1.4-3.7.
ASYMMETRY_RANGE: Final[tuple[float, float]] = (-math.log(10.0), math.log(1000.0))

#: a Gaussian prior (centre, sd) on α, one residual row (α − centre)/sd in every step of the fit (in
#: the Laplace covariance and the bootstrap refits too); None: no prior. Runs that lie mostly at or
#: below the optima say little about α; unchecked it ran to its upper bound on sparse designs (a
#: steep step just above each optimum, the optima sliding up against it: half an octave at the
#: target on the quickstart and width_sp ladders, docs/RESULTS.md "A prior on the cliff's
#: asymmetry"). Centre ln 3, the fit's start (``ASYMMETRY_START``; Step Law's released runs fit
#: 1.03, Sweeper's dense SP ladders 1.2-1.7); sd 1 leaves a curvature ratio of 0.4x-22x free at 95%.
#: The batch direction's α_B has none.
ASYMMETRY_START: Final[float] = math.log(3.0)
ASYMMETRY_PRIOR: tuple[float, float] | None = (ASYMMETRY_START, 1.0)


def solve(p0: np.ndarray, lay: Layout, r: Runs, *, max_nfev: int = 200) -> OptimizeResult:
    """Robust nonlinear least squares from ``p0``."""
    lower, upper = np.full(lay.size, -np.inf), np.full(lay.size, np.inf)
    lower[lay.index("sat")] = 0.0
    for name in ("alpha", "alphab"):  # the cliff's asymmetry: see ASYMMETRY_RANGE
        if name in lay.slices:
            lower[lay.slices[name]], upper[lay.slices[name]] = ASYMMETRY_RANGE
    p0 = np.clip(p0, lower + 1e-9, upper - 1e-9)
    p0[lay.index("sat")] = max(p0[lay.index("sat")], 1e-6)
    try:
        return least_squares(
            residuals,
            p0,
            jac=jacobian,
            args=(lay, r),
            bounds=(lower, upper),
            method="trf",
            x_scale="jac",
            max_nfev=max_nfev,
        )
    except ValueError as e:  # a residual or its Jacobian went non-finite: no fit, not a crash
        raise NonFiniteFit(f"the surface fit met a non-finite value and stopped ({e})") from None


class NonFiniteFit(FitError, ValueError):
    """:func:`solve` met a non-finite residual or Jacobian: a FitError (no law, said as such),
    and still the ValueError a bootstrap refit counts as one bad resample and goes on from."""


def laplace_cov(p: np.ndarray, lay: Layout, r: Runs) -> np.ndarray:
    """Gauss-Newton covariance (JᵀWJ)⁻¹ at ``p``, W the Huber (IRLS) weights of the runs'
    residuals, 1 for the bounds and penalties.

    The residuals are standardised by the noise model (whose scale already carries the
    n/(n − p) correction), so no further residual scale is applied. The random-effect penalty
    rows make it the Laplace approximation of the hierarchical model.
    """
    e = standardized(p, lay, r)
    jac = jacobian(p, lay, r)
    _, slope = _huberize(e)
    n = e.size
    jac[:n] /= slope[:, None]  # back to d((y − f)/σ)/dp
    w = np.ones(jac.shape[0])
    w[:n] = np.minimum(1.0, HUBER_SCALE / np.maximum(np.abs(e), 1e-300))
    return np.linalg.pinv(jac.T @ (w[:, None] * jac), rcond=1e-12)


# --- noise model -------------------------------------------------------------------------------


def noise_features(du: np.ndarray, step: float) -> np.ndarray:
    """Columns of ln σ(Δu): 1, the rise over the first grid step above the optimum (then flat),
    and the change over two grid steps below it (then flat). ``step`` in natural-log LR units."""
    up = np.clip(du / step, 0.0, 1.0)
    down = np.clip(-du / step, 0.0, 2.0) / 2.0
    return np.column_stack([np.ones_like(du), up, down])


def fit_noise(resid: np.ndarray, du: np.ndarray, step: float, n_params: int) -> np.ndarray:
    """Coefficients of ln σ(Δu) = F(Δu)·s (see :func:`noise_features`) from pooled residuals.

    Gaussian maximum likelihood (convex in s), twice: the second pass winsorises residuals at
    4σ of the first, so that a few wild runs on the cliff do not set the scale of all. Each side
    (a grid step above the optimum, two below) also gets ``NOISE_PRIOR_RUNS`` pseudo-runs whose
    squared residual is the pooled variance (a conjugate prior: a side's σ is shrunk towards the
    pooled σ as much as that many runs would pull it; with ~20 runs on a side it barely moves). The
    variance is then scaled by n/(n − p), p the number of mean parameters fitted to the runs.
    """
    sides = noise_features(np.array([step, -2.0 * step]), step)  # one pseudo-row per side
    feats = np.vstack([noise_features(du, step), sides])
    e = resid.copy()
    s = np.array([np.log(max(1.4826 * float(np.median(np.abs(e))), SIGMA_FLOOR)), 0.0, 0.0])
    weights = np.concatenate([np.ones(resid.size), np.full(len(sides), NOISE_PRIOR_RUNS)])
    for _ in range(2):
        pooled = max(float(np.mean(e**2)), SIGMA_FLOOR**2)
        e2 = np.concatenate([e**2, np.full(len(sides), pooled)])

        def nll(c: np.ndarray, feats: np.ndarray = feats, e2: np.ndarray = e2) -> tuple:
            # a line-search step may overshoot to an absurd sigma: inf there is what L-BFGS-B
            # backs off from, so numpy's overflow warning is only noise for the user
            with np.errstate(over="ignore", invalid="ignore"):
                ls = feats @ c
                iv = np.exp(-2.0 * ls)
                val = float(np.sum(weights * (ls + 0.5 * e2 * iv)))
                grad = feats.T @ (weights * (1.0 - e2 * iv))
            return val, grad

        s = minimize(nll, s, jac=True, method="L-BFGS-B").x
        sig = np.exp(feats[: resid.size] @ s)
        e = np.clip(resid, -4.0 * sig, 4.0 * sig)
    n = resid.size
    s[0] += 0.5 * np.log(n / max(n - n_params, 1))
    return s


def noise_sd(coef: np.ndarray, du: np.ndarray, step: float) -> np.ndarray:
    return np.maximum(np.exp(noise_features(du, step) @ coef), SIGMA_FLOOR)


# --- random-effect scale -------------------------------------------------------------------------


def reml_tau(m: np.ndarray, cov: np.ndarray, x: np.ndarray) -> float:
    """REML estimate of τ in m = Xβ + ε + e, ε ~ N(0, τ²I), e ~ N(0, cov) (meta-regression).

    ``m`` are the free fit's cell optima, ``cov`` their covariance, ``x`` the design [1, z].
    Returns 0 when the optima scatter about the law no more than their own errors allow.
    """
    n, p = x.shape
    if n <= p:
        return 0.0

    def neg_reml(tau: float) -> float:
        sig = cov + tau**2 * np.eye(n)
        try:
            ch = np.linalg.cholesky(sig)
        except np.linalg.LinAlgError:
            return np.inf
        xs = np.linalg.solve(ch, x)
        ms = np.linalg.solve(ch, m)
        xtx = xs.T @ xs
        try:
            beta = np.linalg.solve(xtx, xs.T @ ms)
        except np.linalg.LinAlgError:  # (the law's slope is not determined at this τ)
            return np.inf
        r = ms - xs @ beta
        logdet = 2.0 * np.sum(np.log(np.diag(ch)))
        return 0.5 * (logdet + np.linalg.slogdet(xtx)[1] + float(r @ r))

    hi = max(3.0 * float(np.std(m)) + 1e-3, 0.1)
    res = minimize_scalar(neg_reml, bounds=(0.0, hi), method="bounded", options={"xatol": 1e-4})
    tau = float(res.x)
    return 0.0 if neg_reml(0.0) <= neg_reml(tau) else tau


def gls(m: np.ndarray, cov: np.ndarray, x: np.ndarray, tau: float) -> np.ndarray:
    """GLS coefficients of m on x with covariance cov + τ²I."""
    sig = cov + tau**2 * np.eye(len(m))
    w = np.linalg.pinv(sig)
    return np.linalg.solve(x.T @ w @ x, x.T @ w @ m)

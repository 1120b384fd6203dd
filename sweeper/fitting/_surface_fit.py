"""The steps of the surface fit (free optima, τ, the law, its draws, leave-one-cell-out) and the
construction of the laws. See :mod:`sweeper.fitting.surface` for the model and the choices."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import OptimizeResult

from sweeper.fitting import _surface_model as sm
from sweeper.fitting._common import full_rank, widen_samples
from sweeper.fitting._surface_data import Bound, Data
from sweeper.fitting.methods import FREE_UNCONVERGED, SURFACE_UNCONVERGED

#: at most this many parameter draws are stored in a law
MAX_DRAWS = 1000
#: draws taken from the Laplace covariance when there is no resampling
LAPLACE_DRAWS = 400
#: evaluations a refit (a resample, a left-out cell) may take from the full fit's optimum: at 3
#: cells converged refits take 40-100, and at 100 half of them were dropped, which narrowed the
#: interval (docs/RESULTS.md, "The bootstrapped intervals, calibrated")
REFIT_MAX_NFEV = 400


@dataclass
class Result:
    names: list[str]
    theta: np.ndarray  # (T,) shared parameters, uncentred (see SurfaceLaw)
    draws: np.ndarray  # (D, T)
    cov: np.ndarray  # (T, T) Laplace
    tau: float
    tau_b: float
    noise: np.ndarray  # (3,)
    free_m: np.ndarray  # (U,) ln lr optimum per usable cell, shape shared
    free_w: np.ndarray | None  # (U,) ln batch optimum (uncentred)
    curves: np.ndarray  # (U, 5) the law fit's LR curve per usable cell: m_c, ℓ_c, ln k_c, α_c, ψ
    curvature: float
    cv: dict[str, tuple[float | None, float | None]]
    interval: str
    notes: list[str] = field(default_factory=list)


#: the largest |ln| of a cell's optimum LR that is a number (exp overflows beyond ~709)
_LN_FINITE: float = 700.0


def _refuse_runaway(curves: np.ndarray) -> None:
    """NonFiniteFit when the solver "converged" to no law: an optimum or curvature at the fitted
    cells that is not a finite number (five near-flat points a cell gave ln lr* = -2e103 and an
    infinite curvature, returned as a law with an N exponent of -6e102)."""
    if np.all(np.isfinite(curves)) and np.all(np.abs(curves[:, 0]) < _LN_FINITE):
        return
    raise sm.NonFiniteFit(
        "the surface fit ran off to no law: its optimum LR or curvature at the fitted cells is "
        "not a finite number (the runs do not pin the curve: too few LRs a cell, or all near "
        "the top)"
    )


def fit(data: Data, *, n_boot: int, seed: int, level: float, scaling: bool, cv: bool) -> Result:
    u_n = data.n_usable
    z, zb, mu, mub = _centred(data)
    r = data.runs
    notes: list[str] = []
    # (1) free optima under the shared shape; the noise model from its residuals
    res, lay_f, ru, noise = _free_fit(data, z, zb, scaling)
    if not res.success:
        notes.append(f"{FREE_UNCONVERGED} ({res.message})")
    cov_f = sm.laplace_cov(res.x, lay_f, ru)
    x1 = np.column_stack([np.ones(u_n), z[:u_n]])
    s_m = lay_f.slices["m"]
    m_hat, v_m = res.x[s_m], cov_f[s_m, s_m]
    # (2) the cells' scatter about the law
    tau = sm.reml_tau(m_hat, v_m, x1)
    tau_b, w_hat, v_w, xb1 = 0.0, None, None, None
    if zb is not None:
        s_w = lay_f.slices["w"]
        w_hat, v_w = res.x[s_w], cov_f[s_w, s_w]
        xb1 = np.column_stack([np.ones(u_n), zb[:u_n]])
        tau_b = sm.reml_tau(w_hat, v_w, xb1)
    # (3) the law
    lay = sm.Layout(
        z, zb, free=False, level_cells=np.arange(u_n), scaling=scaling,
        tau=max(tau, sm.TAU_FLOOR), tau_b=max(tau_b, sm.TAU_FLOOR),
    )  # fmt: skip
    r.sig = ru.sig  # every completed run is in a usable cell, in the same order
    p0 = np.zeros(lay.size)
    for name in ("kap", "alpha", "sat", "kapb", "alphab", "gamma", "eta", "lev"):
        if name in lay.slices:
            p0[lay.slices[name]] = res.x[lay_f.slices[name]]
    p0[lay.slices["a"]] = sm.gls(m_hat, v_m, x1, tau)
    if zb is not None and w_hat is not None and v_w is not None and xb1 is not None:
        p0[lay.slices["d"]] = sm.gls(w_hat, v_w, xb1, tau_b)
    law = sm.solve(p0, lay, r)
    if not law.success:
        notes.append(f"{SURFACE_UNCONVERGED} ({law.message})")
    p_hat = law.x
    with np.errstate(over="ignore", divide="ignore"):  # (a runaway: _refuse_runaway says so)
        k_c = np.exp(lay.k_rows[:u_n] @ p_hat)
        curves = np.column_stack([
            lay.m_rows[:u_n] @ p_hat, p_hat[lay.level_of[:u_n]], np.log(k_c),
            lay.a_rows[:u_n] @ p_hat, np.full(u_n, max(float(p_hat[lay.index("sat")]), 0.0)),
        ])  # fmt: skip
    _refuse_runaway(curves)
    tmat, t0, names = _theta_map(lay, data, mu, mub)
    theta = tmat @ p_hat[: tmat.shape[1]] + t0
    cov_p = sm.laplace_cov(p_hat, lay, r)[: tmat.shape[1], : tmat.shape[1]]
    cov = tmat @ cov_p @ tmat.T
    dof = (u_n - z.shape[1] - 1, u_n - (0 if zb is None else zb.shape[1]) - 1)
    draws, interval = _draws(
        p_hat, lay, r, (tau, tau_b), dof, (tmat, t0, theta, cov), n_boot, level,
        np.random.default_rng(seed), notes,
    )  # fmt: skip
    cv_err: dict[str, tuple[float | None, float | None]] = {}
    if cv:
        cv_err = _leave_one_out(p_hat, lay, r, data, z, zb, m_hat, w_hat, scaling, tau, tau_b,
                                notes)  # fmt: skip
    return Result(
        names=names,
        theta=theta,
        draws=draws[:MAX_DRAWS],
        cov=cov,
        tau=tau,
        tau_b=tau_b,
        noise=noise,
        free_m=m_hat,
        free_w=None if w_hat is None else w_hat + data.v0,
        curves=curves,
        curvature=float(np.median(k_c)),
        cv=cv_err,
        interval=interval,
        notes=notes,
    )


def _centred(data: Data) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """The predictors' logs centred on the usable cells' mean (LR, batch), and those means."""
    u_n = data.n_usable
    mu = data.lx[:u_n].mean(axis=0)
    mub = data.lxb[:u_n].mean(axis=0) if data.lxb is not None else None
    zb = data.lxb - mub if data.lxb is not None and mub is not None else None
    return data.lx - mu, zb, mu, mub


def _free_layout(u_n: int, z: np.ndarray, zb: np.ndarray | None, scaling: bool) -> sm.Layout:
    """Step (1)'s layout: the ``u_n`` usable cells' optima free, each with its loss level."""
    return sm.Layout(
        z[:u_n], zb[:u_n] if zb is not None else None, free=True,
        level_cells=np.arange(u_n), scaling=scaling,
    )  # fmt: skip


def _free_fit(
    data: Data, z: np.ndarray, zb: np.ndarray | None, scaling: bool
) -> tuple[OptimizeResult, sm.Layout, sm.Runs, np.ndarray]:
    """Step (1): every usable cell's optimum free under the shared shape, refitted twice with
    the pooled noise model estimated from its residuals; returns (solution, layout, the usable
    cells' runs with their noise sd, the noise coefficients)."""
    u_n, r = data.n_usable, data.runs
    ru = r.take(np.flatnonzero(r.cell < u_n), np.flatnonzero(r.dcell < u_n))
    lay_f = _free_layout(u_n, z, zb, scaling)
    ru.sig = np.full(ru.y.size, max(_mad(ru.y, ru.cell), 1e-4))
    res = sm.solve(_init_free(lay_f, ru, data.step), lay_f, ru)
    noise = np.zeros(3)
    for _ in range(2):
        q = sm.model_parts(res.x, lay_f, ru)
        noise = sm.fit_noise(ru.y - q["f"], q["du"], data.step, n_params=lay_f.size)
        ru.sig = sm.noise_sd(noise, q["du"], data.step)
        res = sm.solve(res.x, lay_f, ru)
    return res, lay_f, ru, noise


def scaling_f_test(data: Data) -> tuple[float, int, int]:
    """Extra-sum-of-squares F test of one curve width for every cell against the width scaling
    with the predictors (Bates and Watts, 1988, §3.5), on step (1), every cell's optimum free: the
    scaled fit sets the runs' noise sd, and both fits are solved with those weights, each from two
    starts (its own, and the other's optimum with the slopes dropped or set to 0, see
    :func:`_transfer`), the better kept, so that S1 <= S0 as nesting requires. Returns
    F = ((S0 − S1)/q) / (S1/(n − p)), q the slopes dropped, and n − p (n the completed runs, p
    the scaled fit's parameters; F is 0 when n − p <= 0). S is twice least_squares' cost:
    Huber-robust weighted residuals plus the divergence hinges, so F's reference distribution is
    approximate."""
    z, zb, _, _ = _centred(data)
    res1, lay1, ru, _ = _free_fit(data, z, zb, scaling=True)
    lay0 = _free_layout(data.n_usable, z, zb, scaling=False)
    same = np.arange(data.n_usable)
    fits0 = [sm.solve(p, lay0, ru) for p in (_init_free(lay0, ru, data.step),
                                             _transfer(res1.x, lay1, lay0, same))]  # fmt: skip
    best0 = min(fits0, key=lambda r: r.cost)
    s1 = 2.0 * min(res1.cost, sm.solve(_transfer(best0.x, lay0, lay1, same), lay1, ru).cost)
    s0 = 2.0 * best0.cost
    q, dof = lay1.size - lay0.size, ru.y.size - lay1.size
    if q == 0 or dof <= 0 or s1 <= 0:
        return 0.0, q, dof
    return max(s0 - s1, 0.0) / q / (s1 / dof), q, dof


def _draws(
    p_hat: np.ndarray,
    lay: sm.Layout,
    r: sm.Runs,
    taus: tuple[float, float],
    dof: tuple[int, int],
    theta_map: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    n_boot: int,
    level: float,
    rng: np.random.Generator,
    notes: list[str],
) -> tuple[np.ndarray, str]:
    """The law's parameter draws (``n_boot`` refits, or the Laplace covariance when 0) in the
    reported parametrisation (``theta_map``: matrix, offset, point, covariance), and how they
    were made; a note when more than a tenth of the refits failed."""
    tmat, t0, theta, cov = theta_map
    if n_boot <= 0:
        draws = _laplace_draws(p_hat, lay, r, tmat, theta, cov, dof, rng)
        return draws, "Laplace (Gauss-Newton) covariance"
    raw, n_bad = _bootstrap(p_hat, lay, r, taus, dof, n_boot, rng)
    draws = tmat @ raw[:, : tmat.shape[1]].T + t0[:, None]
    p_eff = lay.size - lay.pen_rows.shape[0]
    draws = widen_samples(draws.T, theta, r.y.size, p_eff, level)
    if n_bad > 0.1 * n_boot:
        notes.append(f"{n_bad} of {n_boot} resampled fits failed and were dropped")
    return draws, f"{n_boot - n_bad} refits: runs resampled within cells, cell deviations redrawn"


def check_bounds(data: Data, fit: Result) -> list[str]:
    """One line per bound-only cell: its bound against the fitted law's optimum there."""
    th = dict(zip(fit.names, fit.theta, strict=True))
    worst: dict[str, tuple[float, Bound, float]] = {}
    for b in data.bounds:
        opt = th["lr:log_prefactor"] + sum(
            th[f"lr:{p}"] * x for p, x in zip(data.preds, b.lx, strict=True)
        )
        if b.lxb is not None and data.bpreds is not None:
            b_opt = th["batch_tokens:log_prefactor"] + sum(
                th[f"batch_tokens:{p}"] * x for p, x in zip(data.bpreds, b.lxb, strict=True)
            )
            dv = b.lb - b_opt
            opt += th["coupling"] * dv + th["coupling2"] * dv**2
        margin = np.log(b.lr) - opt
        if b.cell not in worst or margin < worst[b.cell][0]:
            worst[b.cell] = (margin, b, float(np.exp(opt)))
    out = []
    for cell, (margin, b, opt) in worst.items():
        # (a report audit: runs past the fit window, near the cell's best loss, had been
        # counted as "diverged" beside a plot and a table that showed none)
        above = [f"{b.n_div} diverged"] if b.n_div else []
        above += [f"{b.n_beyond} past the fit window above its best LR"] if b.n_beyond else []
        head = (
            f"cell {cell}: {b.n_done} completed runs in the window, {' and '.join(above)} "
            f"(bounds; the lowest at lr={b.lr:.3g}): not fitted, only its bound (the optimum is "
            "below that LR) is checked: "
        )
        if margin > 0:
            out.append(head + f"the law's optimum there, {opt:.3g}, is below it (consistent)")
        else:
            out.append(
                head + f"the law puts its optimum there at {opt:.3g}, above it: the cell is "
                "broken or the law does not hold there"
            )
    return out


def _mad(y: np.ndarray, cell: np.ndarray) -> float:
    """A first noise scale: the median absolute deviation of ln loss from its cell's median."""
    dev = np.concatenate([y[cell == c] - np.median(y[cell == c]) for c in np.unique(cell)])
    return 1.4826 * float(np.median(np.abs(dev))) if dev.size else 0.01


def _init_free(lay: sm.Layout, r: sm.Runs, step: float) -> np.ndarray:
    """Start: each cell's optimum at its best run, ℓ its best loss, k from the drop towards it."""
    p = np.zeros(lay.size)
    ks = []
    for c in range(lay.n_cells):
        sel = r.cell == c
        i = int(np.argmin(np.where(sel, r.y, np.inf)))
        p[lay.slices["m"].start + c] = r.u[i]
        if lay.batch:
            p[lay.slices["w"].start + c] = r.v[i]
        p[lay.level_of[c]] = r.y[i]
        near = sel & (np.abs(r.v - r.v[i]) < 0.01) & (r.u < r.u[i] - 0.5 * step)
        d = r.u[near] - r.u[i]
        if d.size:
            ks.append(np.median(2.0 * np.maximum(r.y[near] - r.y[i], 1e-4) / d**2))
    k0 = float(np.clip(np.median(ks), 1e-3, 10.0)) if ks else 0.05
    p[lay.index("kap")] = np.log(k0)
    p[lay.index("alpha")] = sm.ASYMMETRY_START
    p[lay.index("sat")] = 1.0
    if lay.batch:
        p[lay.index("kapb")] = np.log(k0)
    return p


def _transfer(p: np.ndarray, old: sm.Layout, new: sm.Layout, cell_map: np.ndarray) -> np.ndarray:
    """Parameters of ``old`` as a start for ``new``, whose cell j is old cell ``cell_map[j]``.
    A shared block that differs in size (the curve widths with and without their scaling: the
    intercept first, at the predictors' centre) keeps its leading entries, the rest 0."""
    q = np.zeros(new.size)
    for name, s in new.slices.items():
        if name in ("eps", "del", "m", "w"):
            q[s] = p[old.slices[name]][cell_map]
        elif name != "lev":
            src = p[old.slices[name]]
            n = min(src.size, s.stop - s.start)
            q[s.start : s.start + n] = src[:n]
    for j, c in enumerate(cell_map):
        if new.level_of[j] >= 0 and old.level_of[c] >= 0:
            q[new.level_of[j]] = p[old.level_of[c]]
    return q


def _tau_draw(tau: float, dof: int, rng: np.random.Generator) -> float:
    """A draw of τ from its approximate sampling distribution: τ²·dof/χ²_dof, dof = cells minus
    law coefficients (so that the cell-level part of the law's uncertainty is Student-t with
    that many degrees of freedom, as in a meta-regression with estimated heterogeneity)."""
    if tau <= sm.TAU_FLOOR or dof < 1:
        return tau
    return tau * float(np.sqrt(dof / rng.chisquare(dof)))


def _laplace_draws(
    p_hat: np.ndarray,
    lay: sm.Layout,
    r: sm.Runs,
    tmat: np.ndarray,
    theta: np.ndarray,
    cov: np.ndarray,
    dof: tuple[int, int],
    rng: np.random.Generator,
) -> np.ndarray:
    """Draws of θ from the Laplace covariance, split into the part the runs' noise gives (the
    covariance with the cell deviations fixed at 0) and the part the cells' scatter adds, whose
    scale is drawn as in :func:`_tau_draw` (Student-t with cells − coefficients dof)."""
    width = tmat.shape[1]
    lay0 = lay.with_levels(np.flatnonzero(lay.level_of >= 0), tau=sm.TAU_FLOOR, tau_b=sm.TAU_FLOOR)
    cov0 = tmat @ sm.laplace_cov(p_hat, lay0, r)[:width, :width] @ tmat.T
    cov_cell = cov - cov0
    lam, vec = np.linalg.eigh((cov_cell + cov_cell.T) / 2.0)
    cell_half = vec * np.sqrt(np.maximum(lam, 0.0))
    ev = np.linalg.eigvalsh((cov0 + cov0.T) / 2.0)
    with warnings.catch_warnings():
        if ev.min() >= -1e-8 * max(float(ev.max()), 0.0):  # PSD up to rounding: the SVD draw copes
            warnings.filterwarnings("ignore", "covariance is not symmetric positive-semidefinite")
        base = rng.multivariate_normal(np.zeros(theta.size), cov0, size=LAPLACE_DRAWS, method="svd")
    d = min(dof) if lay.batch else dof[0]
    tau = max(lay.tau, lay.tau_b) if lay.batch else lay.tau
    scale = np.array([_tau_draw(1.0, d, rng) if tau > sm.TAU_FLOOR else 1.0
                      for _ in range(LAPLACE_DRAWS)])  # fmt: skip
    cell = (rng.standard_normal((LAPLACE_DRAWS, theta.size)) @ cell_half.T) * scale[:, None]
    return theta + base + cell


def _bootstrap(
    p_hat: np.ndarray,
    lay: sm.Layout,
    r: sm.Runs,
    taus: tuple[float, float],
    dof: tuple[int, int],
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    """Refits on data resampled at both levels (see the module docstring of ``surface``); the
    cells' deviations are drawn with a scale drawn by :func:`_tau_draw`."""
    tau, tau_b = taus
    n_cells = lay.n_cells
    done = [np.flatnonzero(r.cell == c) for c in range(n_cells)]
    div = [np.flatnonzero(r.dcell == c) for c in range(n_cells)]
    out, n_bad = [], 0
    for _ in range(n_boot):
        idx, didx = [], []
        for c in range(n_cells):
            nd, n = done[c].size, done[c].size + div[c].size
            pick = rng.integers(0, n, n) if n else np.zeros(0, int)
            idx.append(done[c][pick[pick < nd]])
            didx.append(div[c][pick[pick >= nd] - nd])
        rb = r.take(np.concatenate(idx), np.concatenate(didx))
        if tau > sm.TAU_FLOOR:
            eps = np.asarray(rng.normal(0.0, _tau_draw(tau, dof[0], rng), n_cells))
            rb.u, rb.du = rb.u + eps[rb.cell], rb.du + eps[rb.dcell]
        if lay.batch and tau_b > sm.TAU_FLOOR:
            dl = np.asarray(rng.normal(0.0, _tau_draw(tau_b, dof[1], rng), n_cells))
            rb.v, rb.dv = rb.v + dl[rb.cell], rb.dv + dl[rb.dcell]
        levels = np.unique(rb.cell)
        lay_b = lay
        if levels.size != int(np.sum(lay.level_of >= 0)):
            lay_b = lay.with_levels(levels)
        p0 = _transfer(p_hat, lay, lay_b, np.arange(n_cells))
        try:
            res = sm.solve(p0, lay_b, rb, max_nfev=REFIT_MAX_NFEV)
        except (ValueError, np.linalg.LinAlgError):
            n_bad += 1
            continue
        if res.status <= 0 or not np.all(np.isfinite(res.x)):
            n_bad += 1
            continue
        out.append(res.x[: lay.index("lev")])
    if not out:
        return np.zeros((0, lay.index("lev"))), n_bad
    return np.asarray(out), n_bad


def _leave_one_out(
    p_hat: np.ndarray,
    lay: sm.Layout,
    r: sm.Runs,
    data: Data,
    z: np.ndarray,
    zb: np.ndarray | None,
    m_hat: np.ndarray,
    w_hat: np.ndarray | None,
    scaling: bool,
    tau: float,
    tau_b: float,
    notes: list[str],
) -> dict[str, tuple[float | None, float | None]]:
    """RMS and largest-cell errors (natural log) of each usable cell's free optimum predicted by
    the law fitted without that cell. A fold whose other cells do not determine the law
    (:func:`~sweeper.fitting._common.full_rank`: e.g. three cells at one D/N) is left out, as the
    per-cell laws' folds are, and ``notes`` says so: its prediction is the fold's geometry, not
    the law's error (an import audit's 4 cells gave a leave-one-cell-out error of 757 in ln). A
    cell whose batch optimum its runs do not bracket (``data.batch_edges``) has no batch error:
    its free batch optimum is no measurement to predict (a fit audit's 4.13 in ln came from such
    optima at 507 and 1.5e10 tokens)."""
    u_n = data.n_usable
    unmeasured = data.batch_edges
    k = z.shape[1]
    kb = 0 if zb is None else zb.shape[1]
    if u_n - 1 < max(k, kb) + 1:
        return {}
    err_m, err_w = np.full(u_n, np.nan), np.full(u_n, np.nan)
    for c in range(u_n):
        cells = np.array([j for j in range(lay.n_cells) if j != c])
        ones = np.ones((cells.size, 1))
        lr_ok = full_rank(np.hstack([ones, z[cells]]))
        batch_ok = zb is not None and full_rank(np.hstack([ones, zb[cells]]))
        if not lr_ok:
            notes.append(
                f"leave-one-cell-out: without {data.cells[c]} the other cells do not determine "
                "the lr law (they lie on one line in its predictors), so that fold is left out "
                "of its error"
            )
        if not (lr_ok or batch_ok):
            continue
        new_of = np.full(lay.n_cells, -1)
        new_of[cells] = np.arange(cells.size)
        keep, dkeep = np.flatnonzero(r.cell != c), np.flatnonzero(r.dcell != c)
        rc = r.take(keep, dkeep)
        rc.cell, rc.dcell = new_of[rc.cell], new_of[rc.dcell]
        lay_c = sm.Layout(
            z[cells], zb[cells] if zb is not None else None, free=False,
            level_cells=np.arange(u_n - 1), scaling=scaling,
            tau=max(tau, sm.TAU_FLOOR), tau_b=max(tau_b, sm.TAU_FLOOR),
        )  # fmt: skip
        try:  # a fold whose refit meets a non-finite value is NaN, as a failed one (not the law)
            res = sm.solve(_transfer(p_hat, lay, lay_c, cells), lay_c, rc, max_nfev=REFIT_MAX_NFEV)
        except (ValueError, np.linalg.LinAlgError):
            continue
        a = res.x[lay_c.slices["a"]]
        if lr_ok:
            err_m[c] = a[0] + z[c] @ a[1:] - m_hat[c]
        if batch_ok and zb is not None and w_hat is not None and data.cells[c] not in unmeasured:
            d = res.x[lay_c.slices["d"]]
            err_w[c] = d[0] + zb[c] @ d[1:] - w_hat[c]
    out = {"lr": _cv_summary(err_m, data.lx[:u_n])}
    if zb is not None and data.lxb is not None:
        out["batch_tokens"] = _cv_summary(err_w, data.lxb[:u_n])
    return out


def _cv_summary(err: np.ndarray, lx: np.ndarray) -> tuple[float | None, float | None]:
    ok = np.isfinite(err)
    rms = float(np.sqrt(np.mean(err[ok] ** 2))) if ok.any() else None
    big = int(np.argmax(lx.sum(axis=1)))
    return rms, (float(abs(err[big])) if ok[big] else None)


def _theta_map(
    lay: sm.Layout, data: Data, mu: np.ndarray, mub: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """θ = T·p[:lev] + t0: the shared parameters, uncentred (ln x instead of ln x − μ)."""
    width = lay.index("lev")
    rows: list[np.ndarray] = []
    offs: list[float] = []
    names: list[str] = []

    def row(pairs: list[tuple[int, float]], name: str, off: float = 0.0) -> None:
        v = np.zeros(width)
        for i, c in pairs:
            v[i] += c
        rows.append(v)
        offs.append(off)
        names.append(name)

    def law_block(
        t: str, block: str, preds: tuple[str, ...], centre: np.ndarray, off: float
    ) -> None:
        s = lay.slices[block].start
        row([(s, 1.0)] + [(s + 1 + j, -centre[j]) for j in range(len(preds))],
            f"{t}:log_prefactor", off)  # fmt: skip
        for j, p in enumerate(preds):
            row([(s + 1 + j, 1.0)], f"{t}:{p}")

    def scaled_block(block: str, name: str, preds: tuple[str, ...], centre: np.ndarray) -> None:
        s = lay.slices[block]
        scaled = s.stop - s.start > 1
        row([(s.start, 1.0)] + ([(s.start + 1 + j, -centre[j]) for j in range(len(preds))]
            if scaled else []), name)  # fmt: skip
        if scaled:
            for j, p in enumerate(preds):
                row([(s.start + 1 + j, 1.0)], f"{name}:{p}")

    def shape_block(
        t: str, kap: str, alpha: str, preds: tuple[str, ...], centre: np.ndarray
    ) -> None:
        scaled_block(kap, f"{t}:log_curvature", preds, centre)
        scaled_block(alpha, f"{t}:asymmetry", preds, centre)

    law_block("lr", "a", data.preds, mu, 0.0)
    shape_block("lr", "kap", "alpha", data.preds, mu)
    row([(lay.index("sat"), 1.0)], "lr:saturation")
    if lay.batch and data.bpreds is not None and mub is not None:
        law_block("batch_tokens", "d", data.bpreds, mub, data.v0)
        row([(lay.index("gamma"), 1.0)], "coupling")
        row([(lay.index("gamma") + 1, 1.0)], "coupling2")
        row([(lay.index("eta"), 1.0)], "lr:log_curvature:batch")
        shape_block("batch_tokens", "kapb", "alphab", data.bpreds, mub)
    return np.asarray(rows), np.asarray(offs), names

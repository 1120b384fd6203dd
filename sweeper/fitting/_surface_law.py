"""The law a surface fit returns: a :class:`PowerLaw` that also knows the loss curve around its optimum.

See :mod:`sweeper.fitting.surface` for the model. Everything here is pure numpy and cheap (a few
ms per call): the methods integrate over stored parameter draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, ClassVar, Final, NamedTuple

import numpy as np

from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw, check_level

__all__ = ["BLOWUP", "Regret", "SurfaceLaw"]

#: the relative loss excess over a cell's best past which a run is off the model (the fit's
#: ``blowup``: such a run is a bound, like a diverged one, never a loss value), and the most a
#: prediction's excess may count for in the expected regret and the risk-aware value. Without the
#: cap, a few resampled shapes extrapolated 30x in N (curvature above the optimum 1,000x the
#: median) made the expected excess 900% and put the risk-aware LR 5 octaves below the point
#: (docs/RESULTS.md, "The risk-aware LR, bounded")
BLOWUP: Final[float] = 0.5

#: how far (octaves) from the point estimate the risk-aware value is searched: the range the
#: transfer check trains around a prediction (``GRID_CAP_OCTAVES`` in sweeper.transfer.plan).
#: Unbounded, the search spans 4 standard deviations of the draws, and a near-degenerate fit
#: extrapolated far (a 36-run smoke study's law at a 2048-wide model: log-prefactor draws up to
#: 2e7) stepped past exp's range: an OverflowError instead of a recipe
HEDGE_OCTAVES: Final[float] = 3.0

#: seed of the standard normal draws of a new scale's deviation from the law (fixed: the methods
#: are deterministic)
_DEVIATION_SEED = 20240612


class Regret(NamedTuple):
    """Relative loss excess (% of the optimum's loss) of a choice, over the law's uncertainty.

    ``mean`` is the expected excess, ``median`` and ``upper`` (the ``level`` quantile) its
    distribution, ``p_above`` the probability that the choice lies above the true optimum.
    """

    mean: float
    median: float
    upper: float
    p_above: float


@dataclass(frozen=True, repr=False)
class SurfaceLaw(PowerLaw):
    """A power law of the optimum fitted jointly with the loss curve around it.

    Besides the :class:`PowerLaw` fields (``log_prefactor``, ``exponents``, ``boot_coefs`` as draws
    of [ln a, b…], ``residual_std`` = τ, the scatter of the cells' optima about the law in
    natural-log units), it holds the whole shared parameter vector of the fit:

    - ``shape_names``/``shape_params``: names and point values, natural-log units:
      ``<t>:log_prefactor`` and ``<t>:<predictor>`` (the law of target t), ``<t>:log_curvature``
      and ``<t>:log_curvature:<predictor>`` (ln k = log_curvature + Σ log_curvature:p · ln x_p,
      k the relative loss curvature d²(loss/loss_opt)/d(ln t)² just below the optimum),
      ``<t>:asymmetry`` and ``<t>:asymmetry:<predictor>`` (α = asymmetry + Σ asymmetry:p ·
      ln x_p, the ln of the curvature just above the optimum over that below), and, when the
      batch was swept, ``coupling`` and ``coupling2`` (within a cell the best ln lr at batch B is
      ln lr_opt + coupling·Δ + coupling2·Δ², Δ = ln(B/B_opt)) and ``lr:log_curvature:batch`` (d ln k
      of the LR curve / d Δ);
    - ``shape_draws``: draws of that vector (resampled fits, or the Laplace approximation);
    - ``shape_cov``: the Laplace (Gauss-Newton) covariance of that vector;
    - ``noise``: the pooled noise model, ln σ(Δu) = noise0 + rise·min(Δu/step, 1)
      + fall·min(−Δu/step, 2)/2 (σ in natural log of the loss, Δu = ln(lr/lr_opt));
    - ``cell_optima``: each cell's optimum of the target from the fit with free per-cell optima
      under the shared shape (target units);
    - ``cell_curves`` (LR law only): each cell's loss curve in the law fit, (ln lr_opt, ln
      loss_opt, ln k_below, α, ψ) at the cell's optimal batch: :meth:`cell_loss` draws it.

    Loss model at a scale x, for a value t of the target (natural logs), Δ = ln t − ln t_opt(x):
    ``loss/loss_opt − 1 = q = ½·k(x)·Δ²`` below the optimum and ``(1 − exp(−ψ·q))/ψ`` with
    q = ½·k(x)·exp(α(x))·Δ² above it (the cliff, levelling off at 1/ψ; ``<t>:saturation`` = ψ,
    0 for a plain quadratic).
    """

    kind: ClassVar[str] = "surface"

    shape_names: tuple[str, ...] = ()
    shape_params: tuple[float, ...] = ()
    shape_draws: tuple[tuple[float, ...], ...] = field(default=(), repr=False)
    shape_cov: tuple[tuple[float, ...], ...] = field(default=(), repr=False)
    shape_predictors: tuple[str, ...] = ()
    interval_method: str = ""
    noise: Mapping[str, float] = field(default_factory=dict)
    cell_optima: Mapping[str, float] = field(default_factory=dict)
    cell_curves: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    # --- parameter access -----------------------------------------------------------------------

    def batch_shift(self, ratio: float) -> float | None:
        """How the best LR moves with the batch: the factor exp(coupling·Δ + coupling2·Δ²),
        Δ = ln ``ratio``, for a batch ``ratio`` times the optimal one (measured within the cells:
        :class:`SurfaceLaw`'s ``coupling``); None when the fit measured none (no batch swept)."""
        idx = {n: i for i, n in enumerate(self.shape_names)}
        if "coupling" not in idx or not (ratio > 0 and math.isfinite(ratio)):
            return None
        d = math.log(ratio)
        g2 = self.shape_params[idx["coupling2"]] if "coupling2" in idx else 0.0
        return math.exp(self.shape_params[idx["coupling"]] * d + g2 * d * d)

    def _cols(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """Indices in the shape vector of [ln a, b…], [ln k0, ρ…], [α0, ρ_α…] and [ψ] (none
        when the curve does not level off) for this law's target (the slopes the fit has)."""
        t, idx = self.target, {n: i for i, n in enumerate(self.shape_names)}
        law = [idx[f"{t}:log_prefactor"], *(idx[f"{t}:{p}"] for p in self.predictors)]
        curv = [idx[f"{t}:log_curvature"]] + [
            idx[f"{t}:log_curvature:{p}"]
            for p in self.shape_predictors
            if f"{t}:log_curvature:{p}" in idx
        ]
        asym = [idx[f"{t}:asymmetry"]] + [
            idx[f"{t}:asymmetry:{p}"] for p in self.shape_predictors if f"{t}:asymmetry:{p}" in idx
        ]
        sat = [idx[f"{t}:saturation"]] if f"{t}:saturation" in idx else []
        return law, curv, asym, sat

    @cached_property
    def _draw_matrix(self) -> np.ndarray:
        cols = [i for block in self._cols() for i in block]
        draws = np.asarray(self.shape_draws, dtype=float)
        if draws.ndim != 2 or len(draws) == 0:
            draws = np.asarray([self.shape_params], dtype=float)
        out = draws[:, cols]
        return out[np.all(np.isfinite(out), axis=1)]

    @cached_property
    def _deviation(self) -> np.ndarray:
        n = len(self._draw_matrix)
        return self.residual_std * np.random.default_rng(_DEVIATION_SEED).standard_normal(n)

    def _at(self, scale: Mapping[str, float], draws: bool = True) -> tuple[np.ndarray, ...]:
        """(ln t_opt, ln k_below, α, ψ) at ``scale``: per draw (with the new scale's deviation
        from the law, N(0, τ²)), or the point estimate."""
        law, curv, asym, sat = self._cols()
        if draws:
            d, dev = self._draw_matrix, self._deviation
        else:
            d = np.asarray([self.shape_params], dtype=float)[:, law + curv + asym + sat]
            dev = np.zeros(1)
        lx = np.concatenate([[1.0], np.log(self._require(scale))])
        ls = np.concatenate([[1.0], np.log([float(scale[p]) for p in self.shape_predictors])])
        nl, nc, na = len(law), len(curv), len(asym)
        center = d[:, :nl] @ lx + dev
        lk = d[:, nl : nl + nc] @ ls[:nc]
        alpha = d[:, nl + nc : nl + nc + na] @ ls[:na]
        psi = d[:, nl + nc + na] if sat else np.zeros(len(d))
        return center, lk, alpha, np.maximum(psi, 0.0)

    def log_optimum_sd(self, scale: Mapping[str, float], *, scatter: bool = True) -> float:
        """Standard deviation of ln(optimum) at ``scale`` from the Laplace covariance
        (``shape_cov``), plus the cells' scatter τ when ``scatter``: the cheap uncertainty for a
        caller in a loop (no draws)."""
        cols = self._cols()[0]
        g = np.concatenate([[1.0], np.log(self._require(scale))])
        cov = np.asarray(self.shape_cov, dtype=float)[np.ix_(cols, cols)]
        var = float(g @ cov @ g) + (self.residual_std**2 if scatter else 0.0)
        return math.sqrt(max(var, 0.0))

    # --- the loss around the optimum --------------------------------------------------------------

    def loss_excess(
        self, scale: Mapping[str, float], values: Sequence[float] | np.ndarray, level: float = 0.95
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Relative loss excess over the optimum (%) at each target value: (mean, low, high), the
        mean and the central ``level`` interval over the law's and the shape's draws."""
        level = check_level(level)
        c, lk, a, psi = self._at(scale)
        x = np.log(np.asarray(values, dtype=float))
        ex = _bounded(_excess(x[None, :] - c[:, None], lk[:, None], a[:, None], psi[:, None]))
        lo, hi = np.quantile(ex, [0.5 - level / 2, 0.5 + level / 2], axis=0)
        return ex.mean(axis=0), lo, hi

    def curvature(
        self, scale: Mapping[str, float], level: float = 0.95
    ) -> dict[str, tuple[float, float, float]]:
        """k just below and just above the optimum at ``scale``: (point, low, high), relative loss
        per (natural log of the target)²."""
        level = check_level(level)
        _, lk0, a0, _ = self._at(scale, draws=False)
        _, lk, a, _ = self._at(scale)
        q = [0.5 - level / 2, 0.5 + level / 2]
        out = {}
        for side, pt, dr in (("below", lk0, lk), ("above", lk0 + a0, lk + a)):
            lo, hi = np.quantile(np.exp(dr), q)
            out[side] = (float(np.exp(pt[0])), float(lo), float(hi))
        return out

    def cell_loss(self, cell: str, lrs: Sequence[float] | np.ndarray) -> np.ndarray | None:
        """The fitted loss of ``cell`` at each LR (at the cell's optimal batch), or None when the
        law holds no curve for it (a batch law, a cell left out, or a law stored without curves)."""
        curve = self.cell_curves.get(cell)
        if curve is None:
            return None
        m, lev, lk, a, psi = curve
        d = np.log(np.asarray(lrs, dtype=float)) - m
        return np.exp(lev) * (1.0 + _excess(d, lk, a, psi) / 100)

    def expected_regret(
        self, scale: Mapping[str, float], value: float, level: float = 0.95
    ) -> Regret:
        """The relative loss excess (% of the optimal loss) of running ``value`` (of the law's
        target, e.g. an LR) at ``scale``, over the draws of the law, its scatter and the shape;
        each draw's excess counts for at most :data:`BLOWUP` (past it a run is off the model)."""
        level = check_level(level)
        c, lk, a, psi = self._at(scale)
        d = math.log(float(value)) - c
        ex = _bounded(_excess(d, lk, a, psi))
        return Regret(
            mean=float(ex.mean()),
            median=float(np.median(ex)),
            upper=float(np.quantile(ex, level)),
            p_above=float(np.mean(d > 0)),
        )

    def risk_optimal(self, scale: Mapping[str, float]) -> float:
        """The value of the target minimising the expected loss at ``scale`` (with a steeper side
        above the optimum, a little below the point prediction); each draw's excess is bounded as
        in :meth:`expected_regret`."""
        c, lk, a, psi = self._at(scale)
        c0 = float(self._at(scale, draws=False)[0][0])
        spread = float(np.std(c)) if c.size > 1 else 0.0
        half = min(max(4.0 * spread, 0.2), HEDGE_OCTAVES * math.log(2.0))
        grid = c0 + np.linspace(-half, half, 161)
        d = grid[None, :] - c[:, None]
        mean = _bounded(_excess(d, lk[:, None], a[:, None], psi[:, None])).mean(axis=0)
        i = int(np.clip(np.argmin(mean), 1, grid.size - 2))
        y0, y1, y2 = mean[i - 1 : i + 2]
        curv = y0 - 2.0 * y1 + y2
        shift = 0.5 * (y0 - y2) / curv if curv > 0 else 0.0
        step = grid[1] - grid[0]
        return float(math.exp(grid[i] + np.clip(shift, -1.0, 1.0) * step))

    def risk_optimal_lr(self, scale: Mapping[str, float]) -> float:
        """:meth:`risk_optimal` of an LR law (the LR minimising the expected loss)."""
        if self.target != "lr":
            raise ValueError(f"this is the {self.target} law; use risk_optimal()")
        return self.risk_optimal(scale)

    # --- JSON -----------------------------------------------------------------------------------

    def to_dict(self, *, include_samples: bool = True) -> dict[str, Any]:
        d = super().to_dict(include_samples=include_samples)
        d.update(
            shape_names=list(self.shape_names),
            shape_params=list(self.shape_params),
            shape_cov=[list(r) for r in self.shape_cov],
            shape_predictors=list(self.shape_predictors),
            interval_method=self.interval_method,
            noise=dict(self.noise),
            cell_optima=dict(self.cell_optima),
            cell_curves={k: list(v) for k, v in self.cell_curves.items()},
        )
        if include_samples:
            d["shape_draws"] = [list(r) for r in self.shape_draws]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SurfaceLaw:
        """Inverse of :meth:`to_dict` (derived keys such as ``prefactor`` are ignored)."""
        names = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {k: v for k, v in d.items() if k in names}
        for key in ("predictors", "shape_names", "shape_params", "shape_predictors", "notes"):
            if key in kw:
                kw[key] = tuple(kw[key])
        kw["conventions"] = Conventions.from_json(d.get("conventions"), law=d)
        kw["domain"] = {k: (float(v[0]), float(v[1])) for k, v in (kw.get("domain") or {}).items()}
        kw["exponents_ci"] = {
            k: (float(v[0]), float(v[1])) for k, v in (kw.get("exponents_ci") or {}).items()
        }
        if kw.get("prefactor_ci") is not None:
            kw["prefactor_ci"] = tuple(kw["prefactor_ci"])
        for key in ("boot_coefs", "shape_draws", "shape_cov"):
            if key in kw:
                kw[key] = tuple(tuple(float(v) for v in r) for r in kw[key])
        for key in ("noise", "cell_optima", "exponents"):
            if key in kw:
                kw[key] = {k: float(v) for k, v in kw[key].items()}
        if "cell_curves" in kw:
            kw["cell_curves"] = {
                k: tuple(float(x) for x in v) for k, v in kw["cell_curves"].items()
            }
        return cls(**kw)


def _bounded(excess: np.ndarray) -> np.ndarray:
    """A predicted excess (%) as the fit can know it: at most :data:`BLOWUP`; a draw whose
    excess is not a number (its shape overflowed) counts as off the model, :data:`BLOWUP`."""
    return np.where(np.isnan(excess), 100.0 * BLOWUP, np.minimum(excess, 100.0 * BLOWUP))


def _excess(
    d: np.ndarray, lk: np.ndarray | float, a: np.ndarray | float, psi: np.ndarray | float
) -> np.ndarray:
    """The model's relative loss excess in %: 100·q with q = ½·k·exp(α·[d > 0])·d² below the
    optimum, 100·(1 − exp(−ψ·q))/ψ above it (q when ψ = 0)."""
    with np.errstate(over="ignore"):  # far from the optimum q overflows to inf: excess saturates
        q = 0.5 * np.exp(lk + a * (d > 0)) * d * d
    with np.errstate(all="ignore"):  # ψ = 0 with q = inf is NaN: _bounded counts it as BLOWUP
        x = psi * q
        sat = np.where(x < 1e-4, q - 0.5 * psi * q * q, -np.expm1(-x) / np.where(psi > 0, psi, 1))
    return 100.0 * np.where(d > 0, sat, q)

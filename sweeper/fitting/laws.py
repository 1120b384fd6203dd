"""Scaling laws as frozen data: fitted by Sweeper, or published by others.

Every law answers ``predict(scale)`` and ``interval(scale)`` for a ``scale`` mapping of predictor
names to values. Predictor names and units:

- ``n_params``: non-embedding parameters N
- ``tokens``: training tokens D
- ``flops``: training compute C; the law's ``conventions.flops`` says how it is counted:
  ``"6ND"`` is Sweeper's compute, 6·N·D + 6·L·T·d·D (the attention term of Kaplan et al. 2020,
  eq. 2.2, as the launched proxies count it); ``"6ND (no attention)"`` is 6·N·D alone (imported runs
  whose FLOPs were filled in from N and D); ``"M*D"`` is DeepSeek's M·D
- ``width``, ``depth``: model shape (d_model, layers)

Targets: ``lr`` (peak AdamW learning rate) and ``batch_tokens`` (batch size in tokens), plus the
loss law L(N, D) in :class:`LossLaw`.

Conventions (``Law.conventions``, a :class:`~sweeper.fitting.conventions.Conventions`) say what
the numbers mean: units, what the cells held fixed, the schedule and parametrization the LR was
measured under. ``domain`` holds the range of each predictor over the fitted cells.

Compute: everywhere Sweeper says "compute" (``Target.compute``, ``flops`` columns, recipes) it means
the ``"6ND"`` count above, attention included. :meth:`LossLaw.compute_optimal` is the exception: it
takes Chinchilla's C = 6·N·D, and :func:`sweeper.recipe.recommend.recommend` converts at that boundary.

This module holds no fitting code (see :mod:`sweeper.fitting`) and no I/O (see :mod:`sweeper.study.storage`);
``to_dict``/``law_from_dict`` give the JSON form that is stored and printed (with
``schema_version``; laws stored before it existed are read too).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final

import numpy as np

from sweeper.errors import FitError, ScaleError
from sweeper.fitting.conventions import SCHEMA_VERSION, V1_HELD_PREFIX, Conventions

__all__ = [
    "PREDICTORS",
    "TARGETS",
    "KaplanLRLaw",
    "Law",
    "LossLaw",
    "PowerLaw",
    "law_from_dict",
]

PREDICTORS: Final[tuple[str, ...]] = ("n_params", "tokens", "flops", "width", "depth")
TARGETS: Final[tuple[str, ...]] = ("lr", "batch_tokens")


#: the symbols of the predictors in a law's formula
_SYMBOL: Final[dict[str, str]] = {"n_params": "N", "tokens": "D", "flops": "C", "width": "d",
                                  "depth": "L"}  # fmt: skip


def _g(x: float, digits: int) -> str:
    """An exponent to ``digits`` significant digits, 0 where it is 0 to rounding (a flat law's
    fit had read N^-2.32e-16)."""
    return "0" if abs(x) < 1e-12 else f"{x:.{digits}g}"


def formula(law: Law, *, digits: int = 3) -> str:
    """``a · N^b · D^c`` with 95% intervals on fitted exponents, e.g. ``78.4·N^-0.77[-0.88,-0.67]``
    (the form every table, the report and ``str(law)`` write)."""
    if isinstance(law, PowerLaw):
        parts = [f"{law.prefactor:.{digits}g}"]
        for p in law.predictors:
            term = f"{_SYMBOL.get(p, p)}^{_g(law.exponents[p], digits)}"
            ci = law.exponents_ci.get(p)
            if ci is not None and ci[0] != ci[1]:
                term += f"[{_g(ci[0], digits)},{_g(ci[1], digits)}]"
            parts.append(term)
        return "·".join(parts)
    if isinstance(law, KaplanLRLaw):
        return f"{law.c0:.4g} − {law.c1:.4g}·ln N"
    if isinstance(law, LossLaw):
        return f"{law.E:.3g} + {law.A:.3g}/N^{law.alpha:.3g} + {law.B:.3g}/D^{law.beta:.3g}"
    return law.kind


@dataclass(frozen=True, repr=False)
class Law:
    """What every law shares: what it predicts, from what, and where it comes from. ``str(law)``
    (and a notebook's display) is one line: target, formula, source and method."""

    kind: ClassVar[str] = "law"

    def __str__(self) -> str:
        ident = f" #{self.id}" if self.id is not None else ""
        how = "published" if self.method == "published" else f"sweep {self.source}, {self.method}"
        cells = getattr(self, "n_cells", 0)
        return (
            f"{self.target} = {formula(self)}  ({how}{ident}"
            + (f", {cells} cells" if cells else "") + ")"
        )  # fmt: skip

    def __repr__(self) -> str:  # (the generated one printed every resample: print(laws))
        return f"<{type(self).__name__} {self}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter's display
        p.text(str(self))

    target: str
    predictors: tuple[str, ...]
    source: str  # sweep name, or the published law's key ("deepseek", "steplaw", "kaplan")
    method: str = ""
    conventions: Conventions = field(default_factory=Conventions)
    domain: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    id: int | None = None  # set once stored
    created_at: str | None = None  # ISO time, set once stored

    @property
    def parametrization(self) -> str | None:
        """ "sp" | "mup" | "completep"; None when unknown (from the conventions)."""
        return self.conventions.parametrization

    @property
    def base_width(self) -> int | None:
        return self.conventions.base_width

    @property
    def base_depth(self) -> int | None:
        return self.conventions.base_depth

    def predict(self, scale: Mapping[str, float]) -> float:
        raise NotImplementedError

    def interval(self, scale: Mapping[str, float], level: float = 0.95) -> tuple[float, float]:
        """Prediction interval of the target at ``scale`` (the point itself when none is known)."""
        v = self.predict(scale)
        return (v, v)

    def beyond_form(self, scale: Mapping[str, float]) -> str | None:
        """A warning where the law's own form, not its data, sets its value at ``scale`` (None:
        nowhere for a power law; Kaplan's formula near its zero, :class:`KaplanLRLaw`)."""
        return None

    def extrapolation(self, scale: Mapping[str, float]) -> dict[str, float]:
        """For each predictor with a known domain: value at ``scale`` over the domain's maximum."""
        out: dict[str, float] = {}
        for p, (_lo, hi) in self.domain.items():
            if p in scale and hi > 0:
                out[p] = float(scale[p]) / hi
        return out

    def _require(self, scale: Mapping[str, float], names: Sequence[str] = ()) -> np.ndarray:
        """The values of the law's predictors (or of ``names``) in ``scale``; ScaleError when one
        is missing, not positive or not finite (a bare KeyError had reached API users)."""
        names = tuple(names) or self.predictors
        missing = [p for p in names if p not in scale]
        if missing:
            raise ScaleError(
                f"law {self.source}:{self.target} needs {missing}, got {sorted(scale)}"
            )
        x = np.array([float(scale[p]) for p in names])
        if np.any(~np.isfinite(x)) or np.any(x <= 0):
            raise ScaleError(f"predictors must be positive and finite, got {dict(scale)}")
        return x

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "id": self.id,
            "created_at": self.created_at,
            "target": self.target,
            "predictors": list(self.predictors),
            "source": self.source,
            "method": self.method,
            "conventions": self.conventions.to_json(),
            "parametrization": self.parametrization,
            "base_width": self.base_width,
            "base_depth": self.base_depth,
            "domain": {k: list(v) for k, v in self.domain.items()},
        }


@dataclass(frozen=True, repr=False)
class PowerLaw(Law):
    """y = a · Π x_k^b_k, fitted in log space: log y = log a + Σ b_k log x_k.

    ``boot_coefs`` holds bootstrap samples of ``[log a, b_1, ..., b_k]`` (natural log), one row per
    resample; prediction intervals combine their spread with ``residual_std`` (the scatter of the
    cell optima about the law, natural-log units). ``cv_error`` is the leave-one-cell-out RMS error
    and ``holdout_error`` the error on the largest cell when it is left out (both natural-log units).
    """

    kind: ClassVar[str] = "power"

    log_prefactor: float = 0.0
    exponents: Mapping[str, float] = field(default_factory=dict)
    exponents_ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    prefactor_ci: tuple[float, float] | None = None
    boot_coefs: tuple[tuple[float, ...], ...] = field(default=(), repr=False)
    residual_std: float = 0.0
    n_cells: int = 0
    n_points: int = 0
    cv_error: float | None = None
    holdout_error: float | None = None
    #: median over cells of d²(loss / loss_opt)/d(ln y)² at the optimum: the relative loss penalty
    #: of missing the optimum by a factor r is about ``0.5 * loss_curvature * ln(r)**2``
    loss_curvature: float | None = None
    fingerprint: str = ""
    notes: tuple[str, ...] = ()

    @property
    def prefactor(self) -> float:
        return math.exp(self.log_prefactor)

    def sign_undetermined(self, p: str) -> bool:
        """Whether the interval of ``p``'s exponent includes 0 (False without an interval): the
        data do not say whether the optimum rises or falls with ``p``."""
        ci = self.exponents_ci.get(p)
        return ci is not None and ci[0] <= 0 <= ci[1]

    def log_predict(self, scale: Mapping[str, float]) -> float:
        x = self._require(scale)
        b = np.array([self.exponents[p] for p in self.predictors])
        return float(self.log_prefactor + b @ np.log(x))

    def predict(self, scale: Mapping[str, float]) -> float:
        """The optimum at ``scale``; FitError when it is past the float range (a law whose
        exponent ran away, e.g. 8.8e5 from a few runs that do not pin the curve), which no caller
        can use."""
        log_value = self.log_predict(scale)
        if log_value >= _LOG_MAX:
            exps = ", ".join(f"{p}^{self.exponents[p]:.3g}" for p in self.predictors)
            raise FitError(
                f"the {self.target} law ({exps}) predicts exp({log_value:.4g}) at "
                f"{dict(scale)}: past the float range, not a usable law"
            )
        return math.exp(log_value)

    def interval(self, scale: Mapping[str, float], level: float = 0.95) -> tuple[float, float]:
        """Interval for the optimum at ``scale``: coefficient uncertainty (bootstrap) plus scatter."""
        center = self.log_predict(scale)
        z = _normal_quantile(0.5 + check_level(level) / 2)
        coef_sd = 0.0
        if len(self.boot_coefs) >= 2:
            coefs = np.asarray(self.boot_coefs, dtype=float)
            lx = np.concatenate([[1.0], np.log(self._require(scale))])
            coef_sd = _central_sd(coefs @ lx, level)
        half = z * math.hypot(coef_sd, self.residual_std)
        # a law from few cells (t draws with 1-2 degrees of freedom) extrapolated far can have a
        # half-width past exp's range: the bound is then infinite, not an OverflowError
        return (_exp_or_inf(center - half), _exp_or_inf(center + half))

    def to_dict(self, *, include_samples: bool = True) -> dict[str, Any]:
        d = super().to_dict()
        d.update(
            prefactor=self.prefactor,
            log_prefactor=self.log_prefactor,
            prefactor_ci=list(self.prefactor_ci) if self.prefactor_ci else None,
            exponents=dict(self.exponents),
            exponents_ci={k: list(v) for k, v in self.exponents_ci.items()},
            residual_std=self.residual_std,
            n_cells=self.n_cells,
            n_points=self.n_points,
            cv_error=self.cv_error,
            holdout_error=self.holdout_error,
            loss_curvature=self.loss_curvature,
            fingerprint=self.fingerprint,
            notes=list(self.notes),
        )
        if include_samples:
            d["boot_coefs"] = [list(map(float, r)) for r in self.boot_coefs]
        return d


@dataclass(frozen=True, repr=False)
class KaplanLRLaw(Law):
    """Kaplan et al. (2020), eq. D.1: η(N) ≈ 0.003239 − 0.0001395 · ln N (N non-embedding)."""

    kind: ClassVar[str] = "kaplan_lr"

    c0: float = 0.003239
    c1: float = 0.0001395

    def predict(self, scale: Mapping[str, float]) -> float:
        """The formula's LR at ``scale``, 0 where it has crossed zero (:meth:`zero_at`)."""
        (n,) = self._require(scale)
        return max(self.c0 - self.c1 * math.log(n), 0.0)

    @property
    def zero_at(self) -> float:
        """The N where the formula reaches 0 (1.2e10 for Kaplan's coefficients)."""
        return math.exp(self.c0 / self.c1)

    def beyond_form(self, scale: Mapping[str, float]) -> str | None:
        """A warning beyond Kaplan's data (the law's domain, up to 1.5e9) where the formula's
        local exponent, d ln η / d ln N = −c1/η, is steeper than −1 (N above :meth:`zero_at`/e,
        4.4e9): there the LR falls faster than any published LR law has it fall, which is the
        linear form heading for 0 rather than a measurement. An audit's pythia-12b check read
        "3.65 octaves above" a law near zero, and gpt3-175b "predicts 0" where the formula is
        negative; the earlier cut, a decade below the zero (1.2e9), lay inside the law's own
        domain and refused gpt3-2.7b (another audit)."""
        n = scale.get("n_params")
        data_end = self.domain.get("n_params", (0.0, 0.0))[1]
        if n is None or not n > max(data_end, self.zero_at / math.e):
            return None
        value = self.c0 - self.c1 * math.log(n)
        return (
            f"Kaplan's LR formula {self.c0:g} − {self.c1:g}·ln N reaches 0 at N = "
            f"{self.zero_at:.2g}; at N = {n:.3g}, beyond its data (fitted up to "
            f"{data_end:.2g}), it gives {value:.3g}, "
            f"{'below zero' if value <= 0 else 'falling faster than N^-1'}: its form rather "
            "than its data, no usable LR there"
        )

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(c0=self.c0, c1=self.c1)
        return d


@dataclass(frozen=True, repr=False)
class LossLaw(Law):
    """L(N, D) = E + A / N^α + B / D^β (nats per token; N non-embedding, D tokens)."""

    kind: ClassVar[str] = "loss"

    E: float = 0.0
    A: float = 0.0
    B: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0
    ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # keys E, A, B, alpha, beta
    n_points: int = 0
    huber_delta: float = 1e-3
    fingerprint: str = ""
    notes: tuple[str, ...] = ()

    def predict(self, scale: Mapping[str, float]) -> float:
        """The loss at ``scale`` (``n_params`` and ``tokens``, both positive)."""
        n, d = self._require(scale, ("n_params", "tokens"))
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    def compute_optimal(self, flops: float) -> tuple[float, float]:
        """(N_opt, D_opt) minimising L under C = 6·N·D (Chinchilla approach 3, closed form).

        ``flops`` is Chinchilla's 6·N·D, not Sweeper's compute (which adds attention): convert
        first, as :func:`sweeper.recipe.recommend.recommend` does for ``Target.compute``. N and D are in
        the law's units (``conventions.tokens``: bytes for byte-level sweeps).
        """
        a, b = self.alpha, self.beta
        g = ((a * self.A) / (b * self.B)) ** (1.0 / (a + b))
        n_opt = g * (flops / 6.0) ** (b / (a + b))
        return n_opt, flops / (6.0 * n_opt)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(
            E=self.E,
            A=self.A,
            B=self.B,
            alpha=self.alpha,
            beta=self.beta,
            ci={k: list(v) for k, v in self.ci.items()},
            n_points=self.n_points,
            huber_delta=self.huber_delta,
            fingerprint=self.fingerprint,
            notes=list(self.notes),
        )
        for k in ("E", "A", "B", "alpha", "beta"):
            d[f"{k}_ci"] = list(self.ci[k]) if k in self.ci else None
        return d


_KINDS: Final[dict[str, type[Law]]] = {
    "power": PowerLaw,
    "kaplan_lr": KaplanLRLaw,
    "loss": LossLaw,
}


def law_from_dict(d: Mapping[str, Any]) -> Law:
    """Inverse of ``Law.to_dict`` (derived keys such as ``prefactor`` are ignored). Reads the
    current schema and schema 1, the form stored before ``schema_version`` existed (see
    :meth:`Conventions.from_json <sweeper.fitting.conventions.Conventions.from_json>`)."""
    if d["kind"] == "surface":  # lazy: the surface model's module imports this one
        from sweeper.fitting._surface_law import SurfaceLaw

        return SurfaceLaw.from_dict(d)
    cls = _KINDS[d["kind"]]
    names = {f.name for f in fields(cls)}
    kw: dict[str, Any] = {k: v for k, v in d.items() if k in names}
    kw["predictors"] = tuple(kw.get("predictors", ()))
    kw["conventions"] = Conventions.from_json(d.get("conventions"), law=d)
    kw["domain"] = {
        k: (float(v[0]), float(v[1]))
        for k, v in (kw.get("domain") or {}).items()
        if not k.startswith(V1_HELD_PREFIX)  # schema 1 kept held ranges here
    }
    if "exponents_ci" in kw:
        kw["exponents_ci"] = {k: (float(v[0]), float(v[1])) for k, v in kw["exponents_ci"].items()}
    if kw.get("prefactor_ci") is not None:
        kw["prefactor_ci"] = tuple(kw["prefactor_ci"])
    if "ci" in kw:
        kw["ci"] = {k: (float(v[0]), float(v[1])) for k, v in kw["ci"].items()}
    if "boot_coefs" in kw:
        kw["boot_coefs"] = tuple(tuple(float(v) for v in r) for r in kw["boot_coefs"])
    if "notes" in kw:
        kw["notes"] = tuple(kw["notes"])
    return cls(**kw)


#: the largest x with exp(x) finite
_LOG_MAX: Final = math.log(sys.float_info.max)


def _central_sd(draws: np.ndarray, level: float) -> float:
    """The draws' spread as a normal sd read off their central ``level`` quantiles, as the
    exponents' intervals are. Their plain sd is not robust: one runaway refit among 200 (e^44 off
    at w128 on the quickstart's 4-cell surface fit) made it 3.1 where the central 95% gives 0.32,
    and the 1.8x prediction's interval 5e-6 to 1.17 instead of 1.25e-3 to 4.72e-3."""
    finite = draws[np.isfinite(draws)]
    if finite.size < 2:
        return math.inf  # (no usable draw: the interval is unknown, not a point)
    lo, hi = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return float(hi - lo) / (2 * _normal_quantile(0.5 + level / 2))


def _exp_or_inf(x: float) -> float:
    return math.exp(x) if x < _LOG_MAX else math.inf


def check_level(level: float) -> float:
    """``level`` when it is a probability strictly between 0 and 1 (0.95, not 95); else
    ScaleError."""
    ok = isinstance(level, int | float) and not isinstance(level, bool) and 0 < level < 1
    if not ok:
        raise ScaleError(f"level must be a probability between 0 and 1, e.g. 0.95; got {level!r}")
    return float(level)


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)

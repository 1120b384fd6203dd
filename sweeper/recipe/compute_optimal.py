"""The loss law's compute optimum where the recipe needs it: D for a given N, or N for a compute
budget counted as Sweeper counts it (6·N·D + attention; the loss law's own optimum is defined at
Chinchilla's C = 6·N·D); and N for a compute budget at a fixed D/N (no loss law needed).

A loss law chooses N or D only where it determines them: an exponent whose interval reaches 0
(law 5 of a recommend audit: alpha 0.10 [-0.024, 0.75]) puts the optimum anywhere, and a search
that ends on the edge of its bracket has found no optimum (the audit's 2.3e6 tokens for a 6.4e9
model, 0.0004 per parameter, and N = 4e13 at 1e21 FLOPs had passed without a word). Both are
refused unless ``force``, as the LR and batch laws' undetermined values are."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Final

from sweeper.errors import TargetError
from sweeper.fitting.laws import LossLaw
from sweeper.recipe.scale import ASPECT_RATIO, law_label
from sweeper.recipe.warning_kinds import FORCED, Doubt

__all__ = [
    "check_loss_choice",
    "compute_optimal_n",
    "compute_optimal_tokens",
    "n_for_compute_and_ratio",
]

#: the golden-section bracket around the closed-form optimum, either side, as a factor in N
_BRACKET: Final[float] = 1e3
#: how near (in ln N) to the bracket's edge the search may end and still be an optimum
_EDGE: Final[float] = 1e-3


def _require_optimum(loss_law: LossLaw) -> None:
    a, b = loss_law.alpha, loss_law.beta
    if not (a > 0 and b > 0 and loss_law.A > 0 and loss_law.B > 0):
        raise TargetError(
            f"loss law ({law_label(loss_law)}) has no compute optimum: "
            f"A={loss_law.A}, B={loss_law.B}, alpha={a}, beta={b}"
        )


#: what to give instead of the loss law's choice of N or D
_INSTEAD: Final[Mapping[str, str]] = {
    "D": "give the budget (tokens, compute or tokens_per_param: --tokens, --compute, "
    "--tokens-per-param)",
    "N": "give the model (n_params, or width and depth), or tokens_per_param beside the compute",
}


def _refuse(what: str, chosen: str, *, force: bool, warnings: list[str]) -> None:
    """TargetError for a ``chosen`` ("N", "D") the loss law does not determine, or with
    ``force`` a warning."""
    if force:
        warnings.append(Doubt(f"{what}; chosen anyway {FORCED}"))
        return
    raise TargetError(f"{what}; {_INSTEAD[chosen]}, or choose anyway with force=True (--force)")


def check_loss_choice(loss_law: LossLaw, what: str, *, force: bool, warnings: list[str]) -> None:
    """Refuse (TargetError; with ``force`` a warning) the loss law's choice of ``what`` ("D",
    "N") when an exponent's interval reaches 0: the law does not determine where the loss stops
    falling with N or D, so its optimum can be anywhere (a recommend audit)."""
    _require_optimum(loss_law)
    loose = [
        f"{k} {getattr(loss_law, k):.3g} [{lo:.3g}, {hi:.3g}]"
        for k in ("alpha", "beta")
        if (ci := loss_law.ci.get(k)) is not None
        for lo, hi in [ci]
        if lo <= 0.0
    ]
    if loose:
        _refuse(
            f"loss law ({law_label(loss_law)}) does not determine the compute-optimal {what}: "
            f"the interval of its exponent {' and '.join(loose)} reaches 0",
            what,
            force=force,
            warnings=warnings,
        )


def compute_optimal_tokens(loss_law: LossLaw, n_params: float) -> float:
    """D (in the loss law's units) such that N is the loss law's compute-optimal N at C = 6·N·D."""
    _require_optimum(loss_law)
    a, b = loss_law.alpha, loss_law.beta
    g = ((a * loss_law.A) / (b * loss_law.B)) ** (1.0 / (a + b))
    c_over_6 = (n_params / g) ** ((a + b) / b)
    return c_over_6 / n_params


def _attention_per_token(n: float, seq_len: int) -> float:
    """6·T·d·L per token for the shape :func:`infer_shape` gives N, without its rounding
    (d = 128·L, 12·L·d² = N)."""
    layers = (n / (12.0 * ASPECT_RATIO**2)) ** (1.0 / 3.0)
    return 6.0 * seq_len * ASPECT_RATIO * layers**2


def _golden(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The minimum of ``f`` on [lo, hi] by golden-section search."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(200):
        if hi - lo < 1e-9:
            break
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - ratio * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + ratio * (hi - lo)
            f2 = f(x2)
    return (lo + hi) / 2.0


def compute_optimal_n(
    loss_law: LossLaw,
    compute: float,
    seq_len: int,
    factor: float,
    *,
    force: bool = False,
    warnings: list[str] | None = None,
) -> float:
    """N minimising the loss law at Sweeper's compute ``compute`` = (6·N + 6·L·T·d)·D.

    The shape follows N as :func:`infer_shape` does, without its rounding (d = 128·L, 12·L·d² = N,
    so the attention term per token is 6·T·128·L²); D is in target tokens, the loss law sees
    D·``factor``. Golden-section search in ln N within 1000× of the closed-form optimum at
    C = 6·N·D; a search that ends on the bracket's edge found no optimum: refused (TargetError)
    unless ``force``, then said in ``warnings`` (a recommend audit's N = 4e13 at 1e21 FLOPs).
    """
    check_loss_choice(loss_law, "N", force=force, warnings=warnings if warnings is not None else [])

    def loss(ln_n: float) -> float:
        n = math.exp(ln_n)
        per_token = 6.0 * n + _attention_per_token(n, seq_len)
        return loss_law.predict({"n_params": n, "tokens": factor * compute / per_token})

    n0, _ = loss_law.compute_optimal(compute * factor)
    lo, hi = math.log(n0) - math.log(_BRACKET), math.log(n0) + math.log(_BRACKET)
    x = _golden(loss, lo, hi)
    if min(x - lo, hi - x) < _EDGE:
        _refuse(
            f"loss law ({law_label(loss_law)}) has no compute optimum in N at C = {compute:.3g} "
            f"FLOPs: its loss still falls at N = {math.exp(x):.3g}, {_BRACKET:.0e}× from the "
            f"closed-form {n0:.3g}, the edge of the search",
            "N",
            force=force,
            warnings=warnings if warnings is not None else [],
        )
    return math.exp(x)


def n_for_compute_and_ratio(compute: float, tokens_per_param: float, seq_len: int) -> float:
    """N spending ``compute`` (Sweeper's, 6·N·D + attention) at D = R·N (``tokens_per_param``):
    the root of (6·N + 6·T·128·L²)·R·N = C, the shape as :func:`infer_shape` gives N without its
    rounding (Chinchilla's N = sqrt(C / (6·R)) when the attention term is left out). Bisection in
    ln N: the cost grows with N."""

    def excess(ln_n: float) -> float:
        n = math.exp(ln_n)
        return math.log((6.0 * n + _attention_per_token(n, seq_len)) * tokens_per_param * n) - (
            math.log(compute)
        )

    closed = math.log(math.sqrt(compute / (6.0 * tokens_per_param)))
    lo, hi = closed - math.log(1e6), closed
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if excess(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12:
            break
    return math.exp((lo + hi) / 2.0)

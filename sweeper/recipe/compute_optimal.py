"""The loss law's compute optimum where the recipe needs it: D for a given N, or N for a compute
budget counted as Sweeper counts it (6·N·D + attention; the loss law's own optimum is defined at
Chinchilla's C = 6·N·D)."""

from __future__ import annotations

import math

from sweeper.errors import TargetError
from sweeper.fitting.laws import LossLaw
from sweeper.recipe.scale import ASPECT_RATIO, law_label

__all__ = ["compute_optimal_n", "compute_optimal_tokens"]


def _require_optimum(loss_law: LossLaw) -> None:
    a, b = loss_law.alpha, loss_law.beta
    if not (a > 0 and b > 0 and loss_law.A > 0 and loss_law.B > 0):
        raise TargetError(
            f"loss law ({law_label(loss_law)}) has no compute optimum: "
            f"A={loss_law.A}, B={loss_law.B}, alpha={a}, beta={b}"
        )


def compute_optimal_tokens(loss_law: LossLaw, n_params: float) -> float:
    """D (in the loss law's units) such that N is the loss law's compute-optimal N at C = 6·N·D."""
    _require_optimum(loss_law)
    a, b = loss_law.alpha, loss_law.beta
    g = ((a * loss_law.A) / (b * loss_law.B)) ** (1.0 / (a + b))
    c_over_6 = (n_params / g) ** ((a + b) / b)
    return c_over_6 / n_params


def compute_optimal_n(loss_law: LossLaw, compute: float, seq_len: int, factor: float) -> float:
    """N minimising the loss law at Sweeper's compute ``compute`` = (6·N + 6·L·T·d)·D.

    The shape follows N as :func:`infer_shape` does, without its rounding (d = 128·L, 12·L·d² = N,
    so the attention term per token is 6·T·128·L²); D is in target tokens, the loss law sees
    D·``factor``. Golden-section search in ln N around the closed-form optimum at C = 6·N·D.
    """
    _require_optimum(loss_law)

    def loss(ln_n: float) -> float:
        n = math.exp(ln_n)
        layers = (n / (12.0 * ASPECT_RATIO**2)) ** (1.0 / 3.0)
        per_token = 6.0 * n + 6.0 * seq_len * ASPECT_RATIO * layers**2
        return loss_law.predict({"n_params": n, "tokens": factor * compute / per_token})

    n0, _ = loss_law.compute_optimal(compute * factor)
    lo, hi = math.log(n0) - math.log(1e3), math.log(n0) + math.log(1e3)
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = loss(x1), loss(x2)
    for _ in range(200):
        if hi - lo < 1e-9:
            break
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - ratio * (hi - lo)
            f1 = loss(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + ratio * (hi - lo)
            f2 = loss(x2)
    return math.exp((lo + hi) / 2.0)

"""Published hyperparameter scaling laws, usable as laws in their own conventions.

- ``deepseek`` (arXiv:2401.02954): η = 0.3118·C^-0.1250, B = 0.2920·C^0.3271 tokens, with
  C = M·D and M = 72·L·d² + 12·L·d·T non-embedding FLOPs per token. Fitted on 1e17–2e19 FLOPs.
- ``steplaw`` (arXiv:2503.04715): η = 1.79·N^-0.713·D^0.307, B = 0.58·D^0.571 tokens, N
  non-embedding. Fitted on N 60M–1B, D 2B–100B (their 3,700 runs).
- ``kaplan`` (arXiv:2001.08361): η = 0.003239 − 0.0001395·ln N (N non-embedding); breaks down
  above ~1e10 parameters. Its critical batch needs the loss, so only the LR law is given here.
"""

from __future__ import annotations

import math
from typing import Final

from sweeper.errors import SweeperError
from sweeper.laws import KaplanLRLaw, Law, PowerLaw

__all__ = ["PUBLISHED_NAMES", "published_laws"]

PUBLISHED_NAMES: Final[tuple[str, ...]] = ("deepseek", "steplaw", "kaplan")

_DEEPSEEK_CONV = {
    "n_params": "non-embedding",
    "batch": "tokens",
    "flops": "M*D",
    "lr": "peak AdamW LR, multi-step schedule",
}
_STEPLAW_CONV = {
    "n_params": "non-embedding",
    "batch": "tokens",
    "flops": "6ND",
    "lr": "peak AdamW LR, cosine to 1e-5",
}


def _power(
    source: str,
    target: str,
    a: float,
    exps: dict[str, float],
    domain: dict[str, tuple[float, float]],
    conv: dict[str, str],
) -> PowerLaw:
    return PowerLaw(
        target=target,
        predictors=tuple(exps),
        source=source,
        method="published",
        conventions=conv,
        parametrization="sp",
        domain=domain,
        log_prefactor=math.log(a),
        exponents=exps,
        exponents_ci={k: (v, v) for k, v in exps.items()},
    )


def published_laws(name: str) -> dict[str, Law]:
    """The laws published under ``name`` ("deepseek", "steplaw", "kaplan"), keyed by target."""
    key = name.lower().replace("-", "").replace("_", "")
    if key == "deepseek":
        dom = {"flops": (1e17, 2e19)}
        return {
            "lr": _power("deepseek", "lr", 0.3118, {"flops": -0.1250}, dom, _DEEPSEEK_CONV),
            "batch_tokens": _power(
                "deepseek", "batch_tokens", 0.2920, {"flops": 0.3271}, dom, _DEEPSEEK_CONV
            ),
        }
    if key == "steplaw":
        dom = {"n_params": (6e7, 1.07e9), "tokens": (2e9, 1e11)}
        return {
            "lr": _power(
                "steplaw", "lr", 1.79, {"n_params": -0.713, "tokens": 0.307}, dom, _STEPLAW_CONV
            ),
            "batch_tokens": _power(
                "steplaw",
                "batch_tokens",
                0.58,
                {"tokens": 0.571},
                {"tokens": dom["tokens"]},
                _STEPLAW_CONV,
            ),
        }
    if key == "kaplan":
        conv = {"n_params": "non-embedding", "lr": "peak Adam LR, 3000-step warmup, cosine to 0"}
        return {
            "lr": KaplanLRLaw(
                target="lr",
                predictors=("n_params",),
                source="kaplan",
                method="published",
                conventions=conv,
                parametrization="sp",
                domain={"n_params": (768.0, 1.5e9)},
            )
        }
    raise SweeperError(f"unknown published law {name!r}; known: {', '.join(PUBLISHED_NAMES)}")

"""Published hyperparameter scaling laws, usable as laws in their own conventions.

- ``deepseek`` (arXiv:2401.02954): η = 0.3118·C^-0.1250, B = 0.2920·C^0.3271 tokens, with
  C = M·D and M = 72·L·d² + 12·L·d·T non-embedding FLOPs per token. Fitted on 1e17–2e19 FLOPs.
- ``steplaw`` (arXiv:2503.04715): η = 1.79·N^-0.713·D^0.307, B = 0.58·D^0.571 tokens, N
  non-embedding. Fitted on N 60M–1B, D 2B–100B (their 3,700 runs).
- ``kaplan`` (arXiv:2001.08361): η = 0.003239 − 0.0001395·ln N (N non-embedding); breaks down
  above ~1e10 parameters. Its critical batch needs the loss, so only the LR law is given here.
- ``porian`` (arXiv:2406.19146, the rounded fits drawn on the paper's hyperparameter figure, from
  its code, formll/resolving-scaling-law-discrepancies ``plotting.py``): η = 0.0047·(N/108e6)^-1/3,
  B = 160·(N/108e6)^2/3 sequences of 2048 tokens; N counts the output layer but not the input
  embedding; fitted on N 2.5e7–1.1e8 (RefinedWeb, AdamW with β2 tuned, constant LR after warmup).

Power Lines (arXiv:2505.13738) gives the exponent of the optimal batch, B ∝ D^0.383, but no
prefactor that carries over: :data:`POWER_LINES_BATCH_EXPONENT` is a baseline anchored at a
measured optimum (the batch ladder's held-out budget, ``scripts/batch_ladder.py``), and the
exponent docs/RESULTS.md sets a fitted B*(D) beside.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Final

from sweeper.errors import SweeperError
from sweeper.fitting.conventions import FLOPS_6ND, FLOPS_M_D, Conventions
from sweeper.fitting.laws import KaplanLRLaw, Law, PowerLaw

__all__ = ["POWER_LINES_BATCH_EXPONENT", "PUBLISHED_NAMES", "published_key", "published_laws"]

PUBLISHED_NAMES: Final[tuple[str, ...]] = ("deepseek", "steplaw", "kaplan", "porian")
#: Power Lines' exponent of the optimal batch (tokens) in D, independent of N
POWER_LINES_BATCH_EXPONENT: Final[float] = 0.383
#: Porian et al.'s reference size (N = 108M) and their rounded LR and batch at it
_PORIAN_N0: Final[float] = 108e6


def _conventions(flops: str, lr: str, optimizer: str = "adamw") -> Conventions:
    """A published law's conventions: N non-embedding, D and the batch in the authors' tokenizer
    tokens, SP; the schedule only as the authors describe it."""
    return Conventions(
        n_params="non-embedding",
        n_params_source="as published",
        batch="tokens",
        flops=flops,
        tokens="tokens",
        vocab_size=None,
        data=None,
        lr=lr,
        optimizer=optimizer,
        schedule=None,
        min_lr_ratio=None,
        warmup=None,
        z_loss=None,
        init_std=None,
        parametrization="sp",
    )


_DEEPSEEK_CONV = _conventions(FLOPS_M_D, "peak AdamW LR, multi-step schedule")
_STEPLAW_CONV = _conventions(FLOPS_6ND, "peak AdamW LR, cosine to 1e-5")


def _power(
    source: str,
    target: str,
    a: float,
    exps: dict[str, float],
    domain: dict[str, tuple[float, float]],
    conv: Conventions,
) -> PowerLaw:
    return PowerLaw(
        target=target,
        predictors=tuple(exps),
        source=source,
        method="published",
        conventions=conv,
        domain=domain,
        log_prefactor=math.log(a),
        exponents=exps,
        exponents_ci={k: (v, v) for k, v in exps.items()},
    )


def published_key(name: str) -> str:
    """``name`` as a published law set's name is matched against :data:`PUBLISHED_NAMES`: case,
    surrounding blanks, hyphens and underscores ignored ("Step-Law" is "steplaw"). SweeperError
    for a name that is no string (None or a list had raised a bare AttributeError)."""
    if not isinstance(name, str):
        raise SweeperError(
            f"name must be a published law set's name, a string ({', '.join(PUBLISHED_NAMES)}); "
            f"got {type(name).__name__} {name!r}"
        )
    return name.strip().lower().replace("-", "").replace("_", "")


def published_laws(name: str) -> dict[str, Law]:
    """The laws published under ``name`` (one of :data:`PUBLISHED_NAMES`, spelled as
    :func:`published_key` matches it), keyed by target."""
    key = published_key(name)
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
        conv = _conventions(FLOPS_6ND, "peak Adam LR, 3000-step warmup, cosine to 0", "adam")
        return {
            "lr": KaplanLRLaw(
                target="lr",
                predictors=("n_params",),
                source="kaplan",
                method="published",
                conventions=conv,
                domain={"n_params": (768.0, 1.5e9)},
            )
        }
    if key == "porian":
        conv = replace(
            _conventions(FLOPS_6ND, "peak AdamW LR, constant after warmup, β2 tuned"),
            n_params="non-embedding+head",
        )
        dom = {"n_params": (2.5e7, 1.1e8)}
        return {
            "lr": _power(
                "porian", "lr", 0.0047 * _PORIAN_N0 ** (1 / 3), {"n_params": -1 / 3}, dom, conv
            ),
            "batch_tokens": _power(
                "porian",
                "batch_tokens",
                160 * 2048 / _PORIAN_N0 ** (2 / 3),
                {"n_params": 2 / 3},
                dom,
                conv,
            ),
        }
    raise SweeperError(f"unknown published law {name!r}; known: {', '.join(PUBLISHED_NAMES)}")

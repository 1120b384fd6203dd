"""Seeded synthetic sweeps with known laws, for tests, benchmarks and documentation.

The loss of a run is a Chinchilla-style L(N, D) times a penalty for missing the optimum:
``L = L(N, D) · (1 + k(u)·u² + k_batch·v²) · (1 + noise·ε)`` with u = ln(lr / lr*), v =
ln(batch_tokens / B*), k(u) = ``k_low`` below the optimum and ``k_high`` above it (the cliff), and
runs with lr > ``diverge_above`` · lr* diverged (loss NaN). lr* and B* follow the given power laws.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from sweeper.runs import normalize_runs

__all__ = ["PowerLawSpec", "synthetic_sweep"]

#: (prefactor, {predictor: exponent}); predictors among n_params and tokens
PowerLawSpec = tuple[float, Mapping[str, float]]

#: the Epoch refit of Chinchilla (arXiv:2404.10102): E, A, B, alpha, beta
EPOCH_LOSS: tuple[float, float, float, float, float] = (1.817, 482.0, 2085.4, 0.348, 0.366)


def _law(spec: PowerLawSpec, scale: Mapping[str, float]) -> float:
    a, exps = spec
    return a * math.prod(scale[k] ** b for k, b in exps.items())


def synthetic_sweep(
    *,
    n_params: Sequence[float] = (1e6, 4e6, 1.6e7, 6.4e7),
    tokens: Sequence[float] = (2e8, 8e8),
    lr_law: PowerLawSpec = (2.0, {"n_params": -0.5}),
    batch_law: PowerLawSpec | None = None,
    lr_steps: tuple[int, int] = (-6, 3),
    lr_step: float = math.sqrt(2.0),
    batch_steps: tuple[int, int] = (-3, 3),
    batch_step: float = 2.0,
    seeds: int = 1,
    noise: float = 5e-4,
    k_low: float = 0.02,
    k_high: float = 0.08,
    k_batch: float = 0.01,
    diverge_above: float = 2.0**1.5,
    seq_len: int = 256,
    batch_size: int = 64,
    loss_law: tuple[float, float, float, float, float] = EPOCH_LOSS,
    jitter: bool = True,
    seed: int = 0,
) -> pd.DataFrame:
    """A runs table over the cells ``n_params × tokens`` (canonical columns, see sweeper.runs).

    LRs lie on a grid of ``lr_step`` ratios from ``lr_steps[0]`` to ``lr_steps[1]`` steps around
    lr* (shifted by a random fraction of a step per cell when ``jitter``); with a ``batch_law``,
    batch sizes (sequences of ``seq_len``) lie on a ``batch_step`` grid around B* likewise, else
    every run uses ``batch_size``. ``seeds`` repeats every point with fresh noise.
    """
    rng = np.random.default_rng(seed)
    e_, a_, b_, alpha, beta = loss_law
    rows = []
    for n, d in itertools.product(n_params, tokens):
        scale = {"n_params": float(n), "tokens": float(d)}
        lr_opt = _law(lr_law, scale)
        base_loss = e_ + a_ / n**alpha + b_ / d**beta
        shift = rng.uniform(-0.5, 0.5) if jitter else 0.0
        lrs = lr_opt * lr_step ** (np.arange(lr_steps[0], lr_steps[1] + 1) + shift)
        if batch_law is not None:
            bt_opt = _law(batch_law, scale)
            bshift = rng.uniform(-0.5, 0.5) if jitter else 0.0
            exps = np.arange(batch_steps[0], batch_steps[1] + 1) + bshift
            sizes = np.unique(np.maximum(1, np.round(bt_opt * batch_step**exps / seq_len)))
        else:
            bt_opt = float(batch_size * seq_len)
            sizes = np.array([float(batch_size)])
        for lr, bs, s in itertools.product(lrs, sizes, range(seeds)):
            u = math.log(lr / lr_opt)
            v = math.log(bs * seq_len / bt_opt)
            pen = (k_low if u <= 0 else k_high) * u * u + k_batch * v * v
            diverged = lr > diverge_above * lr_opt
            loss = math.nan if diverged else base_loss * (1 + pen) * (1 + noise * rng.normal())
            rows.append(
                {
                    "n_params": float(n),
                    "tokens": float(d),
                    "lr": float(lr),
                    "batch_size": float(bs),
                    "seq_len": float(seq_len),
                    "loss": loss,
                    "diverged": diverged,
                    "state": "COMPLETE",
                    "seed": float(s),
                    "source": "synthetic",
                }
            )
    return normalize_runs(pd.DataFrame(rows))

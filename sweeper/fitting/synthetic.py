"""Seeded synthetic sweeps with known laws, for tests, benchmarks and documentation.

The loss of a run is a Chinchilla-style L(N, D) times a penalty for missing the optimum:
``L = L(N, D) · (1 + k(u)·u² [+ k_cubic·u³ above] + k_batch·v²) · (1 + σ(u)·ε)`` with u =
ln(lr / lr*), v = ln(batch_tokens / B*), k(u) = ``k_low`` below the optimum and ``k_high`` above it
(the cliff), and runs with lr > ``diverge_above`` · lr* diverged (loss NaN). lr* and B* follow the
given power laws (times a per-cell scatter ``opt_scatter`` when set; with ``lr_batch_slope`` the
best LR at batch B is lr*·(B/B*)^slope). σ(u) is ``noise`` at and below the optimum and rises
log-linearly to ``noise_high`` one ``lr_step`` above it; ε is normal, or Student-t with
``noise_df`` degrees of freedom scaled to unit variance.

:func:`proxy_sweep` makes ladders that look like Sweeper's own proxy sweeps (quickstart,
width_sp): SP widths at depth 2, one token budget, a fixed sqrt(2) LR grid shared by every cell,
2 seeds, noise several times larger above the optimum than below, divergence past a cliff.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from sweeper.study.runs import normalize_runs

__all__ = ["PROXY_LR_GRID", "PowerLawSpec", "proxy_sweep", "synthetic_sweep"]

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
    lr_grid: Sequence[float] | None = None,
    noise_high: float | None = None,
    noise_df: float | None = None,
    k_cubic: float = 0.0,
    opt_scatter: float = 0.0,
    lr_batch_slope: float = 0.0,
) -> pd.DataFrame:
    """A runs table over the cells ``n_params × tokens`` (canonical columns, see sweeper.study.runs).

    LRs lie on a grid of ``lr_step`` ratios from ``lr_steps[0]`` to ``lr_steps[1]`` steps around
    lr* (shifted by a random fraction of a step per cell when ``jitter``); with a ``batch_law``,
    batch sizes (sequences of ``seq_len``) lie on a ``batch_step`` grid around B* likewise, else
    every run uses ``batch_size``. ``seeds`` repeats every point with fresh noise.

    ``lr_grid`` replaces the per-cell grid by fixed LRs shared by every cell. ``noise_high``,
    ``noise_df``, ``k_cubic``, ``opt_scatter`` and ``lr_batch_slope`` are described in the module
    docstring; their defaults give the sweeps of earlier versions, seed for seed.
    """
    rng = np.random.default_rng(seed)
    e_, a_, b_, alpha, beta = loss_law
    rows = []
    t_scale = math.sqrt((noise_df - 2.0) / noise_df) if noise_df else 1.0
    if noise_df is not None and noise_df <= 2:
        raise ValueError(f"noise_df must be > 2 (finite variance), got {noise_df}")
    for n, d in itertools.product(n_params, tokens):
        scale = {"n_params": float(n), "tokens": float(d)}
        lr_opt = _law(lr_law, scale)
        if opt_scatter > 0:
            lr_opt *= math.exp(opt_scatter * rng.normal())
        base_loss = e_ + a_ / n**alpha + b_ / d**beta
        if lr_grid is not None:
            lrs = np.asarray(lr_grid, dtype=float)
        else:
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
            v = math.log(bs * seq_len / bt_opt)
            lr_at = lr_opt * math.exp(lr_batch_slope * v)  # the best LR at this batch
            u = math.log(lr / lr_at)
            pen = (k_low if u <= 0 else k_high) * u * u + k_batch * v * v
            if u > 0:
                pen += k_cubic * u**3
            diverged = lr > diverge_above * lr_at
            sd = noise
            if noise_high is not None and u > 0:
                sd = noise * (noise_high / noise) ** min(u / math.log(lr_step), 1.0)
            loss = math.nan
            if not diverged:  # no draw for a diverged run (the sweeps of earlier versions)
                eps = rng.standard_t(noise_df) * t_scale if noise_df else rng.normal()
                loss = base_loss * (1 + pen) * (1 + sd * eps)
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


#: the LR grid of the width_sp study: sqrt(2) steps from 1.7e-3 to 1.92e-2
PROXY_LR_GRID: tuple[float, ...] = (
    1.7e-3,
    2.4e-3,
    3.4e-3,
    4.8e-3,
    6.8e-3,
    9.6e-3,
    1.36e-2,
    1.92e-2,
)


def proxy_sweep(
    n_cells: int = 5,
    *,
    widths: Sequence[float] | None = None,
    depth: int = 2,
    tokens: float = 819_200.0,
    lr_law: PowerLawSpec = (0.208, {"n_params": -0.3}),
    lr_grid: Sequence[float] = PROXY_LR_GRID,
    seeds: int = 2,
    noise: float = 0.003,
    noise_high: float | None = 0.02,
    noise_df: float | None = 5.0,
    k_low: float = 0.03,
    k_high: float = 0.25,
    k_cubic: float = 0.0,
    diverge_above: float = 2.0**1.5,
    opt_scatter: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A ladder like Sweeper's proxy sweeps, with a known law (canonical runs columns).

    Cells: ``widths`` (default ``n_cells`` widths geometrically spaced from 32 to 256) at
    ``depth``, N = 12·depth·width² non-embedding parameters, one token budget; loss at the
    optimum 1.2 + 8/N^0.2 nats (about 2.3 at width 32, 1.7 at 256). Every cell runs the same
    ``lr_grid`` (default :data:`PROXY_LR_GRID`, which brackets every optimum of the default law
    lr* = 0.208·N^-0.3: 1.0e-2 at width 32, 2.9e-3 at 256) with ``seeds`` seeds. Defaults match
    the proxies' measured shape: seeds differ by ~0.3% of the loss (~0.01) below the optimum and
    ~2% (~0.06, heavy-tailed: up to ~0.3) from one step above it; one grid step below costs
    ~0.4%, one above ~3%; runs 3 steps above the optimum diverge. ``width`` and ``depth`` columns
    are filled in.
    """
    w = np.geomspace(32.0, 256.0, n_cells) if widths is None else np.asarray(widths, float)
    n_params = 12.0 * depth * w**2
    runs = synthetic_sweep(
        n_params=tuple(float(n) for n in n_params),
        tokens=(float(tokens),),
        lr_law=lr_law,
        lr_grid=lr_grid,
        lr_step=math.sqrt(2.0),
        seeds=seeds,
        noise=noise,
        noise_high=noise_high,
        noise_df=noise_df,
        k_low=k_low,
        k_high=k_high,
        k_cubic=k_cubic,
        diverge_above=diverge_above,
        opt_scatter=opt_scatter,
        seq_len=128,
        batch_size=32,
        loss_law=(1.2, 8.0, 0.0, 0.2, 0.3),
        seed=seed,
    )
    width_of = dict(zip(n_params.tolist(), w.tolist(), strict=True))
    runs["width"] = runs["n_params"].map(width_of)
    runs["depth"] = float(depth)
    return runs

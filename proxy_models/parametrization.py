"""Parametrizations as pure functions of the config: SP, muP and CompleteP.

Every width- or depth-dependent choice is computed here from a :class:`ProxyConfig` and handed to
the model or the optimizer as a plain number; nothing is stored on tensors.

- **SP** (standard, GPT-2/nanoGPT): normal init with ``init_std`` (the two residual output
  projections of each block get ``init_std / sqrt(2·depth)``), one learning rate for every
  parameter, attention scores scaled by 1/√d_head, no residual multipliers, and no output
  multiplier but ``output_mult``.
- **muP** (Tensor Programs V, arXiv:2203.03466, Adam rules as in microsoft/mup's ``MuAdamW``),
  with ``m = width / base_width``: hidden matrices (inside the blocks) get init variance ÷ m
  (std ÷ √m), Adam LR ÷ m and weight decay × m (mup's default with AdamW, which keeps the per-step
  decay lr·wd of the base model); input embeddings, position embeddings, the lm_head matrix and all
  vectors keep the base init and LR; the logits are multiplied by 1/m; the attention scale is
  1/d_head up to the constant that makes it 1/√d_head at the base head size.
- **CompleteP** (arXiv:2505.01618, α = 1): muP for width, plus each residual branch's output
  multiplied by base_depth / depth. With α = 1 the hidden LR and init do not depend on depth; the
  residual-projection init keeps the base depth's 1/√(2·base_depth), so depth enters only through
  the branch multiplier.

The tunable **output multiplier** ``output_mult`` (α_output, default 1.0) is a hyperparameter of
every parametrization, not a width rule: the logits are ``output_mult`` × the parametrization's
factor × (h·W_lmᵀ), i.e. ``output_mult`` under SP and ``output_mult`` · base_width / width under
muP/CompleteP (mup's ``MuReadout(output_mult=...)``, Cerebras-GPT's ``output_logits_alpha``). Tuned
at the base width, it transfers across widths with the LR.

At ``width == base_width`` (and ``depth == base_depth``) every multiplier except ``output_mult``
is exactly 1.0, so muP and CompleteP reproduce SP with the same ``output_mult`` bit for bit. Not
scaled here: Adam's eps (fine at these widths).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from proxy_models.config import ProxyConfig
    from proxy_models.hparams import HParams

__all__ = [
    "attention_scale",
    "hidden_init_std",
    "init_weights",
    "lr_multipliers",
    "output_multiplier",
    "param_groups",
    "residual_multiplier",
    "width_mult",
]

#: parameter classes the rules distinguish
HIDDEN, EMBEDDING, VECTOR = "hidden", "embedding", "vector"


def width_mult(cfg: ProxyConfig) -> float:
    """m = width / base_width for muP and CompleteP; 1.0 under SP."""
    return 1.0 if cfg.parametrization == "sp" else cfg.width / cfg.base_width


def output_multiplier(cfg: ProxyConfig) -> float:
    """Factor on the logits: ``output_mult`` times base_width / width under muP/CompleteP (mup's
    ``MuReadout(output_mult=...)``), times 1 under SP."""
    return cfg.output_mult * (1.0 if cfg.parametrization == "sp" else cfg.base_width / cfg.width)


def attention_scale(cfg: ProxyConfig) -> float:
    """Factor on q·k: 1/√d_head (SP); (1/√d_base)·(d_base/d_head) under muP, i.e. ∝ 1/d_head and
    equal to SP at the base head size (heads fixed ⇒ d_base = base_width / heads; head size fixed ⇒
    d_base = d_head, so the scale does not move with width)."""
    if cfg.parametrization == "sp":
        return 1.0 / math.sqrt(cfg.d_head)
    return (1.0 / math.sqrt(cfg.base_d_head)) * (cfg.base_d_head / cfg.d_head)


def residual_multiplier(cfg: ProxyConfig) -> float:
    """Factor on each residual branch's output: base_depth / depth under CompleteP, else 1."""
    return cfg.base_depth / cfg.depth if cfg.parametrization == "completep" else 1.0


def hidden_init_std(cfg: ProxyConfig) -> float:
    """Init std of hidden matrices: init_std under SP, init_std·√(base_width/width) under muP."""
    return cfg.init_std * math.sqrt(1.0 / width_mult(cfg))


def lr_multipliers(cfg: ProxyConfig) -> dict[str, float]:
    """Adam LR multiplier per parameter class (hidden matrices ÷ m, everything else 1)."""
    return {HIDDEN: 1.0 / width_mult(cfg), EMBEDDING: 1.0, VECTOR: 1.0}


def _param_class(name: str, p: torch.Tensor) -> str:
    """hidden = a matrix inside a block; embedding = wte, wpe, lm_head; vector = gains."""
    if p.ndim < 2:
        return VECTOR
    return HIDDEN if name.startswith("blocks.") else EMBEDDING


def param_groups(model: nn.Module, cfg: ProxyConfig, hp: HParams) -> list[dict[str, Any]]:
    """AdamW parameter groups: hidden matrices, embedding-like matrices, vectors.

    Each group has ``lr`` (= hp.lr × ``lr_mult``), ``lr_mult`` (the schedule multiplies it in at
    every step), ``weight_decay`` (matrices only, × m for hidden ones under muP) and ``name``.
    A tied lm_head appears once, as the token embedding.
    """
    m = width_mult(cfg)
    mults = lr_multipliers(cfg)
    decay = {HIDDEN: hp.weight_decay * m, EMBEDDING: hp.weight_decay, VECTOR: 0.0}
    by_class: dict[str, list[nn.Parameter]] = {HIDDEN: [], EMBEDDING: [], VECTOR: []}
    for name, p in model.named_parameters():
        if p.requires_grad:
            by_class[_param_class(name, p)].append(p)
    return [
        {
            "params": params,
            "name": cls,
            "lr_mult": mults[cls],
            "lr": hp.lr * mults[cls],
            "weight_decay": decay[cls],
        }
        for cls, params in by_class.items()
        if params
    ]


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ProxyConfig, generator: torch.Generator) -> None:
    """Initialise every parameter in place from ``generator`` (the global RNG is not used).

    Norm gains are ones; embeddings and lm_head N(0, init_std²); hidden matrices
    N(0, hidden_init_std²), the residual output projections (``*.c_proj``) divided by
    √(2·depth) (GPT-2), with depth = base_depth under CompleteP (its depth scaling is the branch
    multiplier instead).
    """
    init_depth = cfg.base_depth if cfg.parametrization == "completep" else cfg.depth
    hidden_std = hidden_init_std(cfg)
    for name, p in model.named_parameters():
        cls = _param_class(name, p)
        if cls == VECTOR:
            p.fill_(1.0)
        elif cls == EMBEDDING:
            nn.init.normal_(p, 0.0, cfg.init_std, generator=generator)
        elif name.endswith("c_proj.weight"):
            nn.init.normal_(p, 0.0, hidden_std / math.sqrt(2 * init_depth), generator=generator)
        else:
            nn.init.normal_(p, 0.0, hidden_std, generator=generator)

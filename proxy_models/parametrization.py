"""The parametrizations applied to a proxy's tensors: SP, muP and CompleteP.

The rules themselves (every width- and depth-dependent multiplier, as plain numbers) live in
:mod:`proxy_models.rules`, which Sweeper's recommend and export read too; this module computes
them for a :class:`ProxyConfig` and hands them to the model or the optimizer as plain numbers
(nothing is stored on tensors). Roles: a matrix inside a block is ``hidden``; the token/position
embeddings and lm_head are ``embedding``; gains are ``vector``.

The tunable **output multiplier** ``output_mult`` (α_output, default 1.0) is a hyperparameter of
every parametrization, not a width rule: the logits are ``output_mult`` × the parametrization's
factor × (h·W_lmᵀ) (mup's ``MuReadout(output_mult=...)``, Cerebras-GPT's ``output_logits_alpha``).
Tuned at the base width, it transfers across widths with the LR. Not scaled here: Adam's eps (fine
at these widths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from proxy_models.rules import EMBEDDING, HIDDEN, ROLES, VECTOR, Rules

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
    "rules",
    "width_mult",
]


def rules(cfg: ProxyConfig) -> Rules:
    """The parametrization's multipliers at this proxy's shape."""
    return Rules(cfg.parametrization, cfg.width, cfg.depth, cfg.base_width, cfg.base_depth)


def width_mult(cfg: ProxyConfig) -> float:
    """m = width / base_width for muP and CompleteP; 1.0 under SP."""
    return rules(cfg).width_mult


def output_multiplier(cfg: ProxyConfig) -> float:
    """Factor on the logits: ``output_mult`` times base_width / width under muP/CompleteP (mup's
    ``MuReadout(output_mult=...)``), times 1 under SP."""
    return rules(cfg).output_multiplier(cfg.output_mult)


def attention_scale(cfg: ProxyConfig) -> float:
    """Factor on q·k (heads fixed ⇒ the base head size is base_width / heads; head size fixed ⇒ it
    is d_head, so the scale does not move with width)."""
    return rules(cfg).attention_scale(cfg.d_head, cfg.base_d_head)


def residual_multiplier(cfg: ProxyConfig) -> float:
    """Factor on each residual branch's output: base_depth / depth under CompleteP, else 1."""
    return rules(cfg).residual_multiplier


def hidden_init_std(cfg: ProxyConfig) -> float:
    """Init std of hidden matrices: init_std under SP, init_std·√(base_width/width) under muP."""
    return rules(cfg).hidden_init_std(cfg.init_std)


def lr_multipliers(cfg: ProxyConfig) -> dict[str, float]:
    """Adam LR multiplier per parameter class (hidden matrices ÷ m, everything else 1)."""
    r = rules(cfg)
    return {role: r.lr_multiplier(role) for role in ROLES}


def _param_class(name: str, p: torch.Tensor) -> str:
    """hidden = a matrix inside a block; embedding = wte, wpe, lm_head; vector = gains."""
    if p.ndim < 2:
        return VECTOR
    return HIDDEN if name.startswith("blocks.") else EMBEDDING


def param_groups(
    model: nn.Module,
    cfg: ProxyConfig,
    hp: HParams,
    *,
    roles: Mapping[str, str] | None = None,
    weight_decay: float | None = None,
) -> list[dict[str, Any]]:
    """Optimizer parameter groups: hidden matrices, embedding-like matrices, vectors.

    Each group has ``lr`` (= hp.lr × ``lr_mult``), ``lr_mult`` (the schedule multiplies it in at
    every step), ``weight_decay`` (matrices only, × m for hidden ones under muP) and ``name``.
    A tied lm_head appears once, as the token embedding. ``roles`` (parameter name → role, from
    :meth:`proxy_models.roles.RoleMap.trained` for a model Sweeper did not write: every
    parameter, or a ValueError naming the one left out) replaces the proxy's naming rule; a
    ``readout`` parameter is embedding-like here. ``weight_decay`` replaces
    ``hp.weight_decay`` (the λ of a decay timescale, :func:`proxy_models.hparams.weight_decay_of`).
    """
    r = rules(cfg)
    mults = lr_multipliers(cfg)
    lam = hp.weight_decay if weight_decay is None else weight_decay
    decay = {role: lam * r.weight_decay_multiplier(role) for role in ROLES}
    by_class: dict[str, list[nn.Parameter]] = {HIDDEN: [], EMBEDDING: [], VECTOR: []}
    for name, p in model.named_parameters():
        if p.requires_grad:
            role = _param_class(name, p) if roles is None else _role(roles, name)
            by_class[EMBEDDING if role == "readout" else role].append(p)
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


def _role(roles: Mapping[str, str], name: str) -> str:
    if name not in roles:
        raise ValueError(
            f"parameter {name!r} has no role, so no optimizer group (roles from "
            "RoleMap.trained() name every parameter)"
        )
    return roles[name]


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ProxyConfig, generator: torch.Generator) -> None:
    """Initialise every parameter in place from ``generator`` (the global RNG is not used).

    Norm gains are ones; embeddings and lm_head N(0, init_std²); hidden matrices
    N(0, hidden_init_std²), the residual output projections (``*.c_proj``) divided by
    √(2·depth) (GPT-2), with depth = base_depth under CompleteP (its depth scaling is the branch
    multiplier instead).
    """
    r = rules(cfg)
    hidden_std, proj_std = r.hidden_init_std(cfg.init_std), r.residual_proj_init_std(cfg.init_std)
    for name, p in model.named_parameters():
        cls = _param_class(name, p)
        if cls == VECTOR:
            p.fill_(1.0)
        elif cls == EMBEDDING:
            nn.init.normal_(p, 0.0, cfg.init_std, generator=generator)
        elif name.endswith("c_proj.weight"):
            nn.init.normal_(p, 0.0, proj_std, generator=generator)
        else:
            nn.init.normal_(p, 0.0, hidden_std, generator=generator)

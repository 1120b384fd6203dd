"""Tiny proxy transformers for Sweeper: config, parametrizations, data and the training loop.

A leaf package: it imports torch, numpy and the standard library only. The public API::

    from proxy_models import HParams, ProxyConfig, load_data, train

    cfg = ProxyConfig(width=64, depth=2, parametrization="mup", base_width=64)
    result = train(cfg, HParams(lr=3e-3, batch_size=32), tokens=800_000, seed=0)
    result.val_loss, result.diverged
"""

from __future__ import annotations

from proxy_models.config import NORMS, PARAMETRIZATIONS, ProxyConfig
from proxy_models.data import TokenData, load_data
from proxy_models.hparams import SCHEDULES, BatchRamp, HParams, lr_at
from proxy_models.model import GPT, build_model
from proxy_models.parametrization import (
    attention_scale,
    init_weights,
    output_multiplier,
    param_groups,
    residual_multiplier,
)
from proxy_models.training import TrainResult, train

__all__ = [
    "GPT",
    "NORMS",
    "PARAMETRIZATIONS",
    "SCHEDULES",
    "BatchRamp",
    "HParams",
    "ProxyConfig",
    "TokenData",
    "TrainResult",
    "attention_scale",
    "build_model",
    "init_weights",
    "load_data",
    "lr_at",
    "output_multiplier",
    "param_groups",
    "residual_multiplier",
    "train",
]

"""Tiny proxy transformers for Sweeper: config, parametrizations, data and the training loop.

A leaf package: it imports torch, numpy and the standard library only, and torch only when a name
that needs it is first used (so :mod:`proxy_models.rules` and :class:`ProxyConfig` stay cheap for
code that plans a run without training one). The public API::

    from proxy_models import HParams, ProxyConfig, load_data, train

    cfg = ProxyConfig(width=64, depth=2, parametrization="mup", base_width=64)
    result = train(cfg, HParams(lr=3e-3, batch_size=32), tokens=800_000, seed=0)
    result.val_loss, result.diverged

Your own model in the proxy's place: ``train(cfg, hp, tokens=..., builder=Builder("pkg.mod:fn"))``
(:mod:`proxy_models.builder`); other optimizers: ``HParams(optimizer="muon")``
(:mod:`proxy_models.optim`); your own training loop: :mod:`proxy_models.train_function`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy_models.builder import Builder, BuilderError
    from proxy_models.config import NORMS, ProxyConfig
    from proxy_models.data import TokenData, load_data
    from proxy_models.hparams import OPTIMIZERS, SCHEDULES, BatchRamp, HParams, lr_at
    from proxy_models.model import GPT, build_model
    from proxy_models.parametrization import (
        attention_scale,
        init_weights,
        output_multiplier,
        param_groups,
        residual_multiplier,
    )
    from proxy_models.rules import PARAMETRIZATIONS
    from proxy_models.training import TrainResult, train

#: public name -> the module that defines it (imported on first use)
_WHERE: dict[str, str] = {
    "Builder": "builder",
    "BuilderError": "builder",
    "NORMS": "config",
    "ProxyConfig": "config",
    "PARAMETRIZATIONS": "rules",
    "TokenData": "data",
    "load_data": "data",
    "OPTIMIZERS": "hparams",
    "SCHEDULES": "hparams",
    "BatchRamp": "hparams",
    "HParams": "hparams",
    "lr_at": "hparams",
    "GPT": "model",
    "build_model": "model",
    "attention_scale": "parametrization",
    "init_weights": "parametrization",
    "output_multiplier": "parametrization",
    "param_groups": "parametrization",
    "residual_multiplier": "parametrization",
    "TrainResult": "training",
    "train": "training",
}

__all__ = [
    "GPT",
    "NORMS",
    "OPTIMIZERS",
    "PARAMETRIZATIONS",
    "SCHEDULES",
    "BatchRamp",
    "Builder",
    "BuilderError",
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
assert sorted(__all__) == sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'proxy_models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"proxy_models.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))

"""The search space of a study as Optuna distributions, grid values and training hyperparameters.

The space is defined once (``StudySpec.search``) and converted here: :func:`distributions` gives the
Optuna distributions every cell's trials are asked with, :func:`grid_values` the lists the grid
sampler walks, and :func:`hparams_kwargs` the keyword arguments of ``proxy_models.HParams`` for one
point (searched values plus the study's fixed training settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from sweeper.study.spec import ParamSpec, SearchSpace, StudySpec

__all__ = ["distributions", "grid_values", "hparams_kwargs"]


def distributions(search: SearchSpace) -> dict[str, BaseDistribution]:
    """Optuna distributions of every set parameter (``lr`` and ``batch_size`` always).

    A range is a (log-)uniform float or (log-)int distribution; a list of values is categorical;
    a single value is a one-point distribution, so fixed parameters still show in each trial's
    params (and on optuna-dashboard) without the sampler spending anything on them.
    """
    return {name: _distribution(p) for name, p in search.items()}


def _distribution(p: ParamSpec) -> BaseDistribution:
    if p.values is not None and any(isinstance(v, str) for v in p.values):
        return CategoricalDistribution(tuple(p.values))  # schedule names
    if p.values is not None:
        vals = tuple(int(v) if p.integer else float(v) for v in p.values)
        if len(vals) == 1:
            if p.integer:
                return IntDistribution(int(vals[0]), int(vals[0]))
            return FloatDistribution(float(vals[0]), float(vals[0]))
        return CategoricalDistribution(vals)
    assert p.low is not None and p.high is not None
    if p.integer:
        return IntDistribution(int(p.low), int(p.high), log=p.log)
    return FloatDistribution(float(p.low), float(p.high), log=p.log)


def grid_values(search: SearchSpace) -> dict[str, list[Any]]:
    """The grid sampler's search space: every parameter's list of values (ranges not allowed)."""
    out: dict[str, list[Any]] = {}
    for name, p in search.items():
        if p.values is None:
            raise ValueError(f"search.{name} is a range; the grid sampler needs a list of values")
        out[name] = [
            v if isinstance(v, str) else int(v) if p.integer else float(v) for v in p.values
        ]
    return out


def hparams_kwargs(spec: StudySpec, params: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``proxy_models.HParams`` for one point of the space.

    ``params`` holds the searched values (``lr``, ``batch_size`` and any of ``warmup``,
    ``weight_decay``, ``beta2``, ``schedule``); the rest comes from ``spec.train`` or
    ``HParams``'s defaults. ``optimizer`` and ``weight_decay_tau`` appear only away from their
    defaults (so the trials of sweeps launched before them are given the same arguments).
    """
    t = spec.train
    kw: dict[str, Any] = {
        "lr": float(params["lr"]),
        "batch_size": int(params["batch_size"]),
        "schedule": t.schedule,
        "min_lr_ratio": t.min_lr_ratio,
        "decay_fraction": t.decay_fraction,
        "beta1": t.beta1,
        "eps": t.eps,
        "grad_clip": t.grad_clip,
        "z_loss": t.z_loss,
    }
    if t.micro_batch_size is not None:
        kw["micro_batch_size"] = t.micro_batch_size
    if t.optimizer != "adamw":
        kw["optimizer"] = t.optimizer
    if t.weight_decay_tau is not None:
        kw["weight_decay_tau"] = t.weight_decay_tau
    for name in ("warmup", "weight_decay", "beta2"):
        if name in params:
            kw[name] = float(params[name])
    if "schedule" in params:
        kw["schedule"] = str(params["schedule"])
    return kw

"""The coordinate check: does the parametrization keep activations the same size across widths?

For each width, the model (the proxy, or a builder's model parametrized by role) takes ``steps``
optimizer steps at one LR on one fixed batch stream, then one more forward pass on a fixed batch
records the RMS of the outputs of the modules of each role: ``embedding`` (the embedding
lookups), ``hidden`` (every module holding a hidden matrix, averaged), ``readout`` (the logits),
and ``delta_logits``, the RMS of the change of the logits since initialisation. Under a working
muP these are flat in width after a few steps; under SP the readout and its change grow with
width (Tensor Programs V, Fig. 5). :func:`slopes` fits log RMS against log width per quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from proxy_models.data import TokenData, gather_batch, sample_offsets
from proxy_models.hparams import HParams
from proxy_models.model import build_model
from proxy_models.optim import make_optimizer
from proxy_models.parametrization import param_groups
from proxy_models.roles import RoleMap, classify, find_readout

if TYPE_CHECKING:
    from proxy_models.builder import Builder
    from proxy_models.config import ProxyConfig

__all__ = ["QUANTITIES", "CoordRow", "coord_check", "slopes"]

QUANTITIES: tuple[str, ...] = ("embedding", "hidden", "readout", "delta_logits")


@dataclass(frozen=True)
class CoordRow:
    """One width's activation RMS after ``steps`` steps (and the initial logits' RMS)."""

    width: int
    steps: int
    rms: dict[str, float]
    rms_init: dict[str, float]


def _model(
    cfg: ProxyConfig, seed: int, builder: Builder | None
) -> tuple[nn.Module, RoleMap | None]:
    if builder is None:
        return build_model(cfg, seed=seed), None
    from proxy_models.builder import prepare

    own = prepare(builder, cfg, seed=seed)
    return own.model, own.roles


def _role_modules(
    model: nn.Module, cfg: ProxyConfig, roles: dict[str, str] | None
) -> dict[str, list[str]]:
    """Module names per role (a module's role is its weight's)."""
    if roles is None:  # the proxy: the same rules as a builder's model, without a wide build
        idx = torch.zeros((1, min(8, cfg.context)), dtype=torch.long)
        readout, _ = find_readout(model, idx, cfg.vocab_size)
        roles = dict(
            classify(model, readout=readout, vocab_size=cfg.vocab_size, context=cfg.context).roles
        )
    out: dict[str, list[str]] = {"embedding": [], "hidden": [], "readout": []}
    for name, role in roles.items():
        mod = name.rsplit(".", 1)[0] if "." in name else ""  # a root parameter has no module
        if role in out and mod and mod not in out[role]:
            out[role].append(mod)
    return out


def _measure(
    model: nn.Module, groups: dict[str, list[str]], x: torch.Tensor
) -> tuple[dict[str, float], torch.Tensor]:
    modules = dict(model.named_modules())
    sums: dict[str, list[float]] = {k: [] for k in groups}
    hooks = []
    for role, names in groups.items():
        for n in names:

            def hook(_m: Any, _i: Any, o: Any, _r: str = role) -> None:
                t = o[0] if isinstance(o, tuple) else o
                if isinstance(t, torch.Tensor):
                    sums[_r].append(float(t.detach().float().pow(2).mean().sqrt()))

            hooks.append(modules[n].register_forward_hook(hook))
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in hooks:
            h.remove()
    rms = {k: float(np.mean(v)) if v else math.nan for k, v in sums.items()}
    rms["readout"] = float(logits.float().pow(2).mean().sqrt())
    return rms, logits.detach()


def coord_check(
    configs: list[ProxyConfig],
    hp: HParams,
    *,
    data: TokenData,
    steps: int = 5,
    batch_size: int = 8,
    seed: int = 0,
    builder: Builder | None = None,
) -> list[CoordRow]:
    """One :class:`CoordRow` per config (module docstring). ``hp.lr`` is the LR every width
    takes (its schedule is ignored: a constant LR)."""
    rows = []
    for cfg in configs:
        T = cfg.context
        probe_gen = torch.Generator().manual_seed(12345)
        probe = gather_batch(data.val, sample_offsets(len(data.val), T, batch_size, probe_gen), T)[
            0
        ]
        model, roles = _model(cfg, seed, builder)
        groups = _role_modules(model, cfg, dict(roles.roles) if roles else None)
        rms0, logits0 = _measure(model, groups, probe)
        trained = roles.trained() if roles else None
        opt = make_optimizer(param_groups(model, cfg, hp, roles=trained), hp)
        gen = torch.Generator().manual_seed(seed + 1)
        for _ in range(steps):
            x, y = gather_batch(data.train, sample_offsets(len(data.train), T, batch_size, gen), T)
            loss = nn.functional.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(
                [p for p in model.parameters()], hp.grad_clip or math.inf
            )
            opt.step()
            opt.zero_grad(set_to_none=True)
        rms, logits = _measure(model, groups, probe)
        rms["delta_logits"] = float((logits - logits0).float().pow(2).mean().sqrt())
        rows.append(CoordRow(cfg.width, steps, rms, rms0))
    return rows


def slopes(rows: list[CoordRow]) -> dict[str, float]:
    """d log RMS / d log width per quantity (least squares over the widths)."""
    lw = np.log([r.width for r in rows])
    out = {}
    for q in QUANTITIES:
        y = np.array([r.rms.get(q, math.nan) for r in rows])
        ok = np.isfinite(y) & (y > 0)
        out[q] = float(np.polyfit(lw[ok], np.log(y[ok]), 1)[0]) if ok.sum() >= 2 else math.nan
    return out

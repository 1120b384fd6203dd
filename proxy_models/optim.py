"""The optimizers a run can use, built from the parametrization's parameter groups.

``adamw`` is torch's fused AdamW over every group (the proxies' default, unchanged). ``muon`` is
``torch.optim.Muon`` on the 2-D hidden matrices, as Muon is meant to be used, and fused AdamW on
everything else (embeddings, readout, vectors, hidden tensors that are not 2-D). The searched LR is
shared: Muon runs with ``adjust_lr_fn="match_rms_adamw"``, which scales each orthogonalised update
by 0.2·sqrt(max(A, B)) so that its RMS matches a typical AdamW update's (Moonlight, arXiv:2502.16982),
so one LR means the same step size to both; momentum 0.95 with Nesterov (torch's defaults).
``adafactor`` is ``torch.optim.Adafactor`` with its lr used as given (no relative step) and
decoupled decay; ``sgd`` is ``torch.optim.SGD`` with momentum ``beta1`` and coupled L2 decay.

Every group keeps its ``lr_mult`` so that the schedule sets ``group["lr"] = lr · lr_mult`` on
:attr:`OptimizerSet.param_groups` whatever the optimizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from proxy_models.rules import HIDDEN

if TYPE_CHECKING:
    from proxy_models.hparams import HParams

__all__ = ["MUON_MOMENTUM", "OptimizerSet", "make_optimizer"]

#: Muon's momentum (torch's default; Muon's own recipe)
MUON_MOMENTUM = 0.95


class OptimizerSet:
    """Several optimizers stepped together (Muon + AdamW), with one list of param groups."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for opt in self.optimizers for g in opt.param_groups]

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)


def make_optimizer(groups: list[dict[str, Any]], hp: HParams) -> Any:
    """The optimizer of ``hp.optimizer`` over ``groups`` (from ``param_groups``)."""
    if hp.optimizer == "adamw":
        # fused AdamW is deterministic and the fastest path on both CPU and CUDA in torch >= 2.4
        return torch.optim.AdamW(groups, betas=(hp.beta1, hp.beta2), eps=hp.eps, fused=True)
    if hp.optimizer == "muon":
        return _muon(groups, hp)
    if hp.optimizer == "adafactor":
        return torch.optim.Adafactor(groups, lr=hp.lr)
    if hp.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=hp.lr, momentum=hp.beta1)
    raise ValueError(f"unknown optimizer {hp.optimizer!r}")


def _muon(groups: list[dict[str, Any]], hp: HParams) -> OptimizerSet:
    muon_groups: list[dict[str, Any]] = []
    adam_groups: list[dict[str, Any]] = []
    for g in groups:
        if g["name"] != HIDDEN:
            adam_groups.append(g)
            continue
        matrices = [p for p in g["params"] if p.ndim == 2]
        others = [p for p in g["params"] if p.ndim != 2]
        if matrices:
            muon_groups.append({**g, "params": matrices})
        if others:
            adam_groups.append({**g, "params": others, "name": f"{HIDDEN} (not 2-D)"})
    opts: list[torch.optim.Optimizer] = []
    if muon_groups:
        opts.append(
            torch.optim.Muon(
                muon_groups,
                lr=hp.lr,
                momentum=MUON_MOMENTUM,
                nesterov=True,
                adjust_lr_fn="match_rms_adamw",
            )
        )
    if adam_groups:
        opts.append(
            torch.optim.AdamW(adam_groups, betas=(hp.beta1, hp.beta2), eps=hp.eps, fused=True)
        )
    return OptimizerSet(opts)

"""The optimizers a run can use, built from the parametrization's parameter groups.

``adamw`` is torch's fused AdamW over every group (the proxies' default, unchanged). ``muon`` is
``torch.optim.Muon`` on the 2-D hidden matrices, as Muon is meant to be used, and fused AdamW on
everything else (embeddings, readout, vectors, hidden tensors that are not 2-D). The searched LR is
shared: Muon runs with ``adjust_lr_fn="match_rms_adamw"``, which scales each orthogonalised update
by 0.2·sqrt(max(A, B)) so that its RMS matches a typical AdamW update's (Moonlight, arXiv:2502.16982),
so one LR means the same step size to both; momentum 0.95 with Nesterov (torch's defaults).
``adafactor`` is ``torch.optim.Adafactor`` at torch's defaults (eps (None, 1e-3), d 1.0,
beta2_decay -0.8, no momentum; ``beta1``, ``beta2`` and ``eps`` are not used). Its lr is a
*relative* step (torch/optim/_adafactor.py, ``_single_tensor_adafactor``): each tensor moves by
``max(eps2, RMS(param)) · min(lr, 1/sqrt(t))`` (t: the tensor's step count) times its update, the
gradient over the root of the factored second moment with its RMS clipped to d, so the step is
relative to the parameter's size and ``lr`` is only a cap on the relative step (it binds below
the 1/sqrt(t) of torch's own relative-step schedule while t <= 1/lr²: every step of a proxy run
at lr <= 0.07 and 200 steps, not the late steps of a long run). The decay is decoupled, with the
raw lr: ``param · (1 - lr · λ)``. transformers' ``Adafactor(scale_parameter=True,
relative_step=False, warmup_init=False)`` moves by ``lr · max(eps2, RMS(param))`` with no
1/sqrt(t) cap and decays by ``lr · RMS(param) · λ``: the same lr while t <= 1/lr². Under muP the
hidden groups' lr ÷ m (Adam's rule) multiplies this relative step, whose RMS(param) muP's init
already shrinks by 1/√m: their updates shrink as m^-1.5, not as Adam's m^-1.
``sgd`` is ``torch.optim.SGD`` with momentum ``beta1`` and coupled L2 decay.

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

"""Parameter roles of a model Sweeper did not write, for muP / CompleteP and for counting N.

Roles: ``embedding`` (token and position embeddings, any matrix with one width-scaled dimension
that feeds the model), ``readout`` (the matrix that produces the logits), ``hidden`` (matrices with
both dimensions scaled with width) and ``vector`` (1-D parameters: norm gains, biases; and
matrices with no width-scaled dimension). Rules, in order:

1. an override (``param_roles(model)`` → {parameter name: role}) wins;
2. a parameter with fewer than 2 dimensions is a ``vector``;
3. the weight of an ``nn.Embedding`` is an ``embedding`` (module type: shape alone cannot tell an
   embedding from a hidden matrix when vocab equals width);
4. the weight of the readout is ``readout``: the module whose output *is* the model's output in a
   forward pass (a forward hook on every module), else the last ``nn.Linear`` called whose output
   ends in ``vocab_size``; a readout tied to the embedding stays an ``embedding`` (listed once);
5. any other matrix is judged by which of its dimensions grow when the model is built at twice the
   width (on the meta device): two → ``hidden``, none → ``vector``; one → ``embedding`` when its
   other dimension is the vocab or the context (a raw position table), otherwise ambiguous;
   without the wide build, an ``nn.Linear`` weight is ``hidden`` and any other matrix ambiguous.

Ambiguous parameters are reported with what was seen; the caller refuses the model under muP /
CompleteP unless ``param_roles`` settles them, and SP trains them as hidden matrices
(:meth:`RoleMap.trained`). N (:meth:`RoleMap.count`) is every parameter but the embeddings and the
readout, as the proxy's :meth:`~proxy_models.config.ProxyConfig.n_params`. ``residual`` lists
the modules whose output joins the residual stream (CompleteP multiplies it by base_depth/depth):
hidden ``nn.Linear`` modules named like an output projection (:data:`RESIDUAL_NAMES`), or those
the override marks with the role ``residual`` (a hidden matrix).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import torch
from torch import nn

__all__ = ["OWN_ROLES", "RESIDUAL_NAMES", "RoleMap", "classify", "find_readout"]

EMBEDDING, HIDDEN, READOUT, VECTOR, RESIDUAL = (
    "embedding",
    "hidden",
    "readout",
    "vector",
    "residual",
)
#: roles a ``param_roles`` override may give (``residual``: a hidden matrix whose module's output
#: joins the residual stream)
OWN_ROLES: Final[tuple[str, ...]] = (EMBEDDING, HIDDEN, READOUT, VECTOR, RESIDUAL)
#: last name component of an output projection in common model code (HF Llama ``o_proj`` and
#: ``down_proj``, litgpt ``proj``, GPT-2 ``c_proj``, T5 ``wo``, Megatron ``dense_4h_to_h``, ...)
RESIDUAL_NAMES: Final[frozenset[str]] = frozenset(
    {"o_proj", "out_proj", "down_proj", "c_proj", "proj", "wo", "w2", "fc2", "dense_4h_to_h"}
)


@dataclass(frozen=True)
class RoleMap:
    """Every parameter's role (``roles``; a ``readout`` is embedding-like for the LR rules), how
    each was decided (``how``), the readout module's name, the residual-output modules, and the
    parameters no rule could settle (``ambiguous``: name → what was seen)."""

    roles: Mapping[str, str]
    how: Mapping[str, str]
    readout: str | None
    residual: tuple[str, ...] = ()
    ambiguous: Mapping[str, str] = field(default_factory=dict)

    def count(self, model: nn.Module) -> tuple[int, int]:
        """(N, total): N counts every parameter but the embeddings and the readout (the proxy's
        N), an ambiguous one included."""
        n = total = 0
        for name, p in model.named_parameters():
            total += p.numel()
            if self.roles.get(name) not in (EMBEDDING, READOUT):
                n += p.numel()
        return n, total

    def trained(self) -> dict[str, str]:
        """Every parameter's role for the optimizer groups: ``roles``, and an ambiguous matrix
        (a projection to a fixed size, such as multi-query keys) trained as a ``hidden`` one.
        Only SP takes them (muP and CompleteP refuse an ambiguous parameter), where a hidden
        matrix has the LR and decay of any matrix, and Muon takes it."""
        return {**dict.fromkeys(self.ambiguous, HIDDEN), **self.roles}

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.roles.values():
            out[r] = out.get(r, 0) + 1
        return out


def _owners(model: nn.Module) -> dict[str, tuple[str, nn.Module]]:
    """Parameter name → (module name, module) that holds it (tied parameters once, first owner)."""
    out: dict[str, tuple[str, nn.Module]] = {}
    for mname, mod in model.named_modules():
        for pname, _ in mod.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            out.setdefault(full, (mname, mod))
    return out


def find_readout(model: nn.Module, idx: torch.Tensor, vocab_size: int) -> tuple[str | None, Any]:
    """(name of the readout module, the model's output) from one forward pass on ``idx``."""
    calls: list[tuple[str, nn.Module, Any]] = []
    hooks = []
    for name, mod in model.named_modules():
        if name and next(mod.parameters(recurse=False), None) is not None:
            hooks.append(
                mod.register_forward_hook(lambda m, _i, o, _n=name: calls.append((_n, m, o)))
            )
    try:
        with torch.no_grad():
            out = model(idx)
    finally:
        for h in hooks:
            h.remove()
    for name, _mod, o in calls:
        if o is out:
            return name, out
    linears = [
        n
        for n, m, o in calls
        if isinstance(m, nn.Linear) and isinstance(o, torch.Tensor) and o.shape[-1] == vocab_size
    ]
    return (linears[-1] if linears else None), out


def classify(
    model: nn.Module,
    *,
    readout: str | None,
    vocab_size: int,
    context: int,
    wide: nn.Module | None = None,
    override: Mapping[str, str] | None = None,
) -> RoleMap:
    """The :class:`RoleMap` of ``model`` by the rules of the module docstring; ``wide`` is the same
    model built at twice the width (any device), ``override`` the ``param_roles`` result."""
    override = dict(override or {})
    wide_shapes = {n: tuple(p.shape) for n, p in wide.named_parameters()} if wide else None
    roles: dict[str, str] = {}
    how: dict[str, str] = {}
    ambiguous: dict[str, str] = {}
    residual: list[str] = []
    readout_w = None
    if readout is not None:
        readout_w = dict(model.named_modules())[readout]
    for name, (mname, mod) in _owners(model).items():
        p = getattr(mod, name.rsplit(".", 1)[-1])
        if name in override:
            role = override[name]
            if role == RESIDUAL:
                residual.append(mname)
                role = HIDDEN
            if role == READOUT:
                readout = mname
            roles[name], how[name] = role, "param_roles"
            continue
        ruled, why = _rule(name, p, mod, readout_w, wide_shapes, vocab_size, context)
        if ruled is None:
            ambiguous[name] = why
            continue
        role = ruled
        roles[name], how[name] = role, why
        if (
            role == HIDDEN
            and isinstance(mod, nn.Linear)
            and mname.rsplit(".", 1)[-1] in RESIDUAL_NAMES
            and not any(v == RESIDUAL for v in override.values())
        ):
            residual.append(mname)
    return RoleMap(roles, how, readout, tuple(dict.fromkeys(residual)), ambiguous)


def _rule(
    name: str,
    p: torch.Tensor,
    mod: nn.Module,
    readout: nn.Module | None,
    wide_shapes: Mapping[str, tuple[int, ...]] | None,
    vocab_size: int,
    context: int,
) -> tuple[str | None, str]:
    if p.ndim < 2:
        return VECTOR, "fewer than 2 dimensions"
    if isinstance(mod, nn.Embedding):
        return EMBEDDING, "nn.Embedding weight"
    if readout is not None and mod is readout:
        return READOUT, "produces the logits (forward hook)"
    scaled = None
    if wide_shapes is not None and name in wide_shapes:
        w = wide_shapes[name]
        if len(w) == p.ndim:
            scaled = [i for i in range(p.ndim) if w[i] != p.shape[i]]
    if scaled is None:
        if isinstance(mod, nn.Linear):
            return HIDDEN, "nn.Linear weight (no wide build to check)"
        return None, f"a {type(mod).__name__} matrix of shape {tuple(p.shape)}, no wide build"
    if len(scaled) >= 2:
        return HIDDEN, "both dimensions grow with width"
    if not scaled:
        return VECTOR, "no dimension grows with width"
    other = [p.shape[i] for i in range(p.ndim) if i not in scaled]
    if not isinstance(mod, nn.Linear) and any(d in (vocab_size, context) for d in other):
        return EMBEDDING, "one dimension grows with width, the other is vocab or context"
    return None, (
        f"a {type(mod).__name__} matrix of shape {tuple(p.shape)} with one width-scaled dimension "
        "(an input, an output or a fixed-size projection?)"
    )

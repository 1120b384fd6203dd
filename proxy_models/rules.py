"""The parametrizations' rules as plain numbers: one home, no torch.

Every width- or depth-dependent choice of SP, muP and CompleteP is a pure function of the model's
shape here. The proxies (:mod:`proxy_models.parametrization`, which applies them to tensors) and
everything that plans a big run (Sweeper's recommend and export, which must tell the big model
the same init std and multipliers the proxies used) read them from this module, so the rules
cannot drift apart. This module imports only the standard library.

- **SP** (standard, GPT-2/nanoGPT): normal init with ``init_std`` (the residual output projections
  of each block get ``init_std / sqrt(2·depth)``), one learning rate for every parameter, attention
  scores scaled by 1/sqrt(d_head), no output multiplier but ``output_mult``.
- **muP** (Tensor Programs V, arXiv:2203.03466, Adam rules as in microsoft/mup's ``MuAdamW``), with
  ``m = width / base_width``: hidden matrices get init std ÷ sqrt(m), Adam LR ÷ m and weight decay
  × m (which keeps the per-step decay lr·wd of the base model); embeddings, the lm_head matrix and
  all vectors keep the base init and LR; the logits are multiplied by 1/m; the attention scale is
  1/d_head up to the constant that makes it 1/sqrt(d_head) at the base head size.
- **CompleteP** (arXiv:2505.01618, α = 1): muP for width, plus each residual branch's output
  multiplied by base_depth / depth. The residual-projection init keeps the base depth's
  1/sqrt(2·base_depth): depth enters only through the branch multiplier. Not applied: the
  paper's Table 1 also scales AdamW's ε of the hidden weights down with width and depth; here
  Adam's ``eps`` is the same at every shape (under muP too, as microsoft/mup's ``MuAdamW``), which
  matters only once the per-entry gradients, shrinking with width and depth, come near it.

These are Adam's rules. Under Muon the hidden matrices' LR ÷ m is applied all the same, which is
not Muon's muP (a full-rank orthogonalised update's spectral norm grows as sqrt(width) at a fixed
LR: the spectral condition wants ÷ sqrt(m)); under Adafactor, whose step is relative to
RMS(param), the ÷ m applies on top of muP's smaller init (updates ∝ m^-1.5). See
docs/OWN_MODEL.md.

At ``width == base_width`` and ``depth == base_depth`` every multiplier is 1.0, so muP and CompleteP
reproduce SP there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

__all__ = ["PARAMETRIZATIONS", "ROLES", "Rules", "sp_small_init_std"]

#: standard, muP (width), CompleteP (muP for width + 1/L residual branches)
PARAMETRIZATIONS: Final[tuple[str, ...]] = ("sp", "mup", "completep")
#: parameter roles the rules distinguish: matrices inside the blocks, embedding-like matrices
#: (token/position embeddings, lm_head), vectors (norm gains)
HIDDEN, EMBEDDING, VECTOR = "hidden", "embedding", "vector"
ROLES: Final[tuple[str, ...]] = (HIDDEN, EMBEDDING, VECTOR)


def sp_small_init_std(width: int) -> float:
    """sqrt(2 / (5·d)): the "small init" of Nguyen & Salazar (2019), used by GPT-NeoX/Pythia;
    0.0228 at d = 768 (GPT-2's 0.02), 0.0099 at d = 4096."""
    return math.sqrt(2.0 / (5.0 * width))


@dataclass(frozen=True)
class Rules:
    """The multipliers of one parametrization at one shape.

    ``width``/``depth`` are the model's; ``base_width``/``base_depth`` the shape at which muP /
    CompleteP coincide with SP (ignored under SP). ``d_head`` and ``base_d_head`` are the head sizes
    of the model and of the base model (for the attention scale).
    """

    parametrization: str
    width: int
    depth: int
    base_width: int
    base_depth: int

    def __post_init__(self) -> None:
        if self.parametrization not in PARAMETRIZATIONS:
            raise ValueError(
                f"`parametrization` must be one of {PARAMETRIZATIONS}, "
                f"but got {self.parametrization!r}"
            )

    @property
    def width_mult(self) -> float:
        """m = width / base_width under muP and CompleteP; 1.0 under SP."""
        return 1.0 if self.parametrization == "sp" else self.width / self.base_width

    def lr_multiplier(self, role: str) -> float:
        """Adam LR multiplier of a parameter role: hidden matrices ÷ m, everything else 1."""
        return 1.0 / self.width_mult if role == HIDDEN else 1.0

    def weight_decay_multiplier(self, role: str) -> float:
        """Decoupled weight decay multiplier: hidden × m (mup's rule with AdamW), vectors 0."""
        if role == VECTOR:
            return 0.0
        return self.width_mult if role == HIDDEN else 1.0

    def hidden_init_std(self, init_std: float) -> float:
        """Init std of the hidden matrices: ``init_std`` ÷ sqrt(m)."""
        return init_std / math.sqrt(self.width_mult)

    @property
    def init_depth(self) -> int:
        """The depth in GPT-2's 1/sqrt(2·depth) on the residual output projections: the model's
        depth, the base depth under CompleteP (whose depth scaling is the branch multiplier)."""
        return self.base_depth if self.parametrization == "completep" else self.depth

    def residual_proj_init_std(self, init_std: float) -> float:
        """Init std of each block's residual output projections (attention out, MLP down)."""
        return self.hidden_init_std(init_std) / math.sqrt(2 * self.init_depth)

    def output_multiplier(self, output_mult: float = 1.0) -> float:
        """Factor on the logits: ``output_mult`` × base_width / width under muP/CompleteP (mup's
        ``MuReadout(output_mult=...)``), ``output_mult`` under SP."""
        return output_mult / self.width_mult

    def attention_scale(self, d_head: int, base_d_head: int) -> float:
        """Factor on q·k: 1/sqrt(d_head) under SP; (1/sqrt(d_base))·(d_base/d_head) under muP, i.e.
        ∝ 1/d_head and equal to SP at the base head size."""
        if self.parametrization == "sp":
            return 1.0 / math.sqrt(d_head)
        return (1.0 / math.sqrt(base_d_head)) * (base_d_head / d_head)

    @property
    def residual_multiplier(self) -> float:
        """Factor on each residual branch's output: base_depth / depth under CompleteP, else 1."""
        return self.base_depth / self.depth if self.parametrization == "completep" else 1.0

"""Builders and training functions for the own-model tests: good ones and every kind of bad one.

Importable as ``tests.own_builders`` from the repository root (pytest's ``pythonpath``; Ray
workers get it through ``PYTHONPATH``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class Tiny(nn.Module):
    """A plain causal model (embedding, ``depth`` residual MLP+attention blocks, head)."""

    def __init__(self, width: int, depth: int, heads: int, vocab_size: int, context: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, width)
        self.pos = nn.Parameter(torch.zeros(context, width))  # a raw position table
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                {
                    "norm": nn.LayerNorm(width),
                    "attn": nn.MultiheadAttention(width, heads, bias=False, batch_first=True),
                    "up": nn.Linear(width, 2 * width, bias=False),
                    "down_proj": nn.Linear(2 * width, width, bias=False),
                }
            )
            for _ in range(depth)
        )
        self.out = nn.Linear(width, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        x = self.emb(idx) + self.pos[:t]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        for b in self.blocks:
            h = b["norm"](x)
            x = x + b["attn"](h, h, h, attn_mask=mask, need_weights=False)[0]
            x = x + b["down_proj"](F.gelu(b["up"](h)))
        return self.out(x)


def tiny(
    *, width: int, depth: int, heads: int, head_dim: int, vocab_size: int, context: int, **_: Any
) -> nn.Module:
    return Tiny(width, depth, heads, vocab_size, context)


def raises(**_: Any) -> nn.Module:
    raise RuntimeError("this builder always fails")


def wrong_shape(*, width: int, vocab_size: int, **_: Any) -> nn.Module:
    class Flat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab_size, width)
            self.out = nn.Linear(width, vocab_size)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            return self.out(self.emb(idx)).mean(dim=1)  # (B, vocab): no time axis

    return Flat()


def no_width(*, vocab_size: int, context: int, **_: Any) -> nn.Module:
    """Ignores width: nothing scales, so muP has nothing to act on."""

    class Fixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab_size, 8)
            self.out = nn.Linear(8, vocab_size)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            return self.out(self.emb(idx))

    return Fixed()


def not_a_module(**_: Any) -> object:
    return object()


def ambiguous(*, width: int, vocab_size: int, **_: Any) -> nn.Module:
    """A raw (width, 7) projection: one width-scaled dimension, neither vocab nor context."""

    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab_size, width)
            self.mid = nn.Linear(width, width, bias=False)
            self.squeeze = nn.Parameter(torch.randn(width, 7) * 0.02)
            self.expand = nn.Parameter(torch.randn(7, width) * 0.02)
            self.out = nn.Linear(width, vocab_size, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            h = self.mid(self.emb(idx))
            return self.out(h + (h @ self.squeeze) @ self.expand)

    return Odd()


def ambiguous_roles(model: nn.Module) -> dict[str, str]:
    return {"squeeze": "hidden", "expand": "hidden"}


ambiguous_settled = ambiguous


def _settled(**kw: Any) -> nn.Module:
    return ambiguous(**kw)


_settled.param_roles = ambiguous_roles  # type: ignore[attr-defined]
settled = _settled


def _typo_role(**kw: Any) -> nn.Module:
    return ambiguous(**kw)


_typo_role.param_roles = lambda model: {"squeeze": "hiddden", "expand": "hidden"}  # type: ignore[attr-defined]
typo_role = _typo_role


def _typo_name(**kw: Any) -> nn.Module:
    return ambiguous(**kw)


_typo_name.param_roles = lambda model: {"squeez": "hidden", "expand": "hidden"}  # type: ignore[attr-defined]
typo_name = _typo_name


# ---- training functions ------------------------------------------------------------------------
def loop(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, float]:
    """A fake training loop: the loss falls from 5 towards 2 at a rate set by lr; an lr above 1
    makes it explode (divergence); it reports every step."""
    steps = max(1, hparams["tokens"] // (hparams["batch_size"] * shape["context"]))
    loss = 5.0
    for step in range(1, steps + 1):
        loss = (
            loss * 3.0
            if hparams["lr"] > 1
            else 2.0 + (loss - 2.0) * (1 - min(0.5, hparams["lr"] * 10))
        )
        if report(step, step * hparams["batch_size"] * shape["context"], loss):
            break
    return {"val_loss": loss + 0.01 * shape["width"] ** -0.5, "steps": step}


loop.honours = ("warmup",)  # type: ignore[attr-defined]


def crashing(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, float]:
    raise ValueError("boom in the user's loop")


def out_of_memory(
    *, hparams: dict[str, Any], shape: dict[str, int], report: Any
) -> dict[str, float]:
    import torch

    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def bad_signature(lr: float, width: int) -> dict[str, float]:
    return {"val_loss": 1.0}

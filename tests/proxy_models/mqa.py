"""Builders for the own-model tests of fixed-size projections and of N: a multi-query model (one
key/value head of fixed size, so K and V are (head_dim, width), not width × width) and the
built-in proxy GPT behind the builder interface.

Importable as ``tests.proxy_models.mqa`` from the repository root (pytest's ``pythonpath``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from proxy_models import ProxyConfig
from proxy_models.model import GPT


class Block(nn.Module):
    """Pre-norm attention with one key/value head (MQA) and a 2× GELU MLP."""

    def __init__(self, width: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.n1, self.n2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.q = nn.Linear(width, heads * head_dim, bias=False)
        self.k = nn.Linear(width, head_dim, bias=False)  # fixed output size
        self.v = nn.Linear(width, head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, width, bias=False)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down_proj = nn.Linear(2 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, t, 1, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, t, 1, self.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.down_proj(F.gelu(self.up(self.n2(x))))


class MQA(nn.Module):
    def __init__(self, width: int, depth: int, heads: int, head_dim: int, vocab: int, ctx: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
        self.blocks = nn.ModuleList(Block(width, heads, head_dim) for _ in range(depth))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def mqa(
    *, width: int, depth: int, heads: int, head_dim: int, vocab_size: int, context: int
) -> nn.Module:
    return MQA(width, depth, heads, head_dim, vocab_size, context)


def proxy(
    *, width: int, depth: int, heads: int, head_dim: int, vocab_size: int, context: int, **kw: Any
) -> nn.Module:
    """The built-in proxy GPT (``kw``: ``qk_norm``, ``tied_embeddings``, ``norm``)."""
    cfg = ProxyConfig(
        width=width, depth=depth, head_dim=head_dim, vocab_size=vocab_size, context=context, **kw
    )
    return GPT(cfg)


def mqa_roles(model: nn.Module) -> dict[str, str]:
    """``param_roles`` settling the fixed-size key/value projections as hidden matrices."""
    return {
        n: "hidden" for n, _ in model.named_parameters() if n.endswith((".k.weight", ".v.weight"))
    }

"""A tiny pre-LN GPT, read top to bottom: norm → attention → MLP → block → model.

No biases anywhere; causal ``scaled_dot_product_attention``; a 4× GELU MLP; learned position
embeddings. The parametrization's numbers (attention scale, residual-branch multiplier, logit
multiplier) come from :mod:`proxy_models.parametrization` as plain floats at construction, and
``init_weights`` there sets every parameter: build models with :func:`build_model`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from proxy_models.config import ProxyConfig
from proxy_models.parametrization import (
    attention_scale,
    init_weights,
    output_multiplier,
    residual_multiplier,
)

__all__ = ["GPT", "build_model"]


class Norm(nn.Module):
    """LayerNorm or RMSNorm over the last dimension, with a gain and no bias."""

    def __init__(self, dim: int, kind: str) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "rmsnorm":
            return F.rms_norm(x, self.weight.shape, self.weight, 1e-6)
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ProxyConfig) -> None:
        super().__init__()
        self.n_heads = cfg.heads
        self.c_attn = nn.Linear(cfg.width, 3 * cfg.width, bias=False)  # q, k, v at once
        self.c_proj = nn.Linear(cfg.width, cfg.width, bias=False)
        # qk-norm: one gain of size d_head shared by the heads, as in OLMo-2 / Wortsman et al.
        self.q_norm = Norm(cfg.d_head, cfg.norm) if cfg.qk_norm else None
        self.k_norm = Norm(cfg.d_head, cfg.norm) if cfg.qk_norm else None
        self.scale = attention_scale(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()  # batch, sequence length, width
        q, k, v = self.c_attn(x).split(C, dim=2)  # (B, T, C) each
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, nh, T, hs)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C): heads side by side
        return self.c_proj(y)  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, cfg: ProxyConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.width, 4 * cfg.width, bias=False)
        self.c_proj = nn.Linear(4 * cfg.width, cfg.width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))  # (B, T, C) → (B, T, 4C) → (B, T, C)


class Block(nn.Module):
    """x + r·attn(norm(x)), then x + r·mlp(norm(x)); r = 1 except under CompleteP."""

    def __init__(self, cfg: ProxyConfig) -> None:
        super().__init__()
        self.ln_1 = Norm(cfg.width, cfg.norm)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = Norm(cfg.width, cfg.norm)
        self.mlp = MLP(cfg)
        self.residual_multiplier = residual_multiplier(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # add(..., alpha=1.0) is bit-identical to x + y, so SP pays nothing for the multiplier
        x = torch.add(x, self.attn(self.ln_1(x)), alpha=self.residual_multiplier)  # (B, T, C)
        x = torch.add(x, self.mlp(self.ln_2(x)), alpha=self.residual_multiplier)  # (B, T, C)
        return x


class GPT(nn.Module):
    """Token + position embeddings, ``depth`` blocks, final norm, lm_head (optionally tied)."""

    def __init__(self, cfg: ProxyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.width)
        self.wpe = nn.Embedding(cfg.context, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.depth))
        self.ln_f = Norm(cfg.width, cfg.norm)
        self.lm_head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.lm_head.weight = self.wte.weight  # named_parameters() lists it once, as wte
        self.output_multiplier = output_multiplier(cfg)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) for token ids ``idx`` (B, T), T <= context."""
        _, T = idx.size()
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab)
        if self.output_multiplier != 1.0:
            logits = logits * self.output_multiplier
        return logits


def build_model(cfg: ProxyConfig, *, seed: int, device: str | torch.device = "cpu") -> GPT:
    """A GPT initialised by the parametrization's rules from ``seed`` alone, on ``device``.

    The modules' default initialisers run inside ``fork_rng`` so the global RNG is left untouched;
    the weights are drawn on the CPU so they are the same on every device.
    """
    with torch.random.fork_rng(devices=[]):
        model = GPT(cfg)
    init_weights(model, cfg, torch.Generator().manual_seed(seed))
    return model.to(device)

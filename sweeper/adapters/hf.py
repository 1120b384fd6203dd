"""Hugging Face transformers' Llama family as a Sweeper model builder (extra ``hf``).

``[model] builder = "sweeper.adapters.hf:llama"`` builds ``LlamaForCausalLM`` from a tiny
``LlamaConfig`` at the cell's shape: ``hidden_size = width``, ``num_hidden_layers = depth``,
``num_attention_heads = heads``, ``head_dim``, ``vocab_size``, ``max_position_embeddings =
context``; SwiGLU MLP of ``mlp_width(width, mlp_ratio, multiple_of)``; grouped-query attention with
``kv_groups`` query heads per key/value head (so the key/value heads grow with width, as muP's
shape rules expect); RMSNorm; RoPE. ``[model.args]`` keys: ``mlp_ratio`` (8/3), ``multiple_of``
(16), ``kv_groups`` (1), ``rope_theta`` (10000), ``tie`` (false), ``rms_norm_eps`` (1e-6). The
returned module's ``forward(idx)`` gives the logits (B, T, vocab_size).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from sweeper.adapters import mlp_width

__all__ = ["LlamaLogits", "llama", "llama_config"]


def llama_config(
    *,
    width: int,
    depth: int,
    heads: int,
    head_dim: int,
    vocab_size: int,
    context: int,
    mlp_ratio: float = 8 / 3,
    multiple_of: int = 16,
    kv_groups: int = 1,
    rope_theta: float = 10000.0,
    tie: bool = False,
    rms_norm_eps: float = 1e-6,
) -> Any:
    """The ``LlamaConfig`` of one cell."""
    from transformers import LlamaConfig

    if heads % kv_groups:
        raise ValueError(f"kv_groups {kv_groups} must divide the number of heads {heads}")
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=mlp_width(width, mlp_ratio, multiple_of),
        num_hidden_layers=depth,
        num_attention_heads=heads,
        num_key_value_heads=heads // kv_groups,
        head_dim=head_dim,
        max_position_embeddings=context,
        rms_norm_eps=rms_norm_eps,
        tie_word_embeddings=tie,
        rope_parameters={"rope_type": "default", "rope_theta": float(rope_theta)},
        use_cache=False,
        attn_implementation="sdpa",
    )


class LlamaLogits(nn.Module):
    """``LlamaForCausalLM`` whose ``forward(idx)`` returns the logits tensor."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        from transformers import LlamaForCausalLM

        self.model = LlamaForCausalLM(config)

    def forward(self, idx: Any) -> Any:
        return self.model(input_ids=idx, use_cache=False).logits


def llama(**kwargs: Any) -> nn.Module:
    """The builder: a tiny Llama at the cell's shape (see the module docstring for the keys)."""
    return LlamaLogits(llama_config(**kwargs))

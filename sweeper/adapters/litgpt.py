"""litgpt's GPT as a Sweeper model builder (extra ``litgpt``).

``[model] builder = "sweeper.adapters.litgpt:gpt"`` builds ``litgpt.GPT`` from a ``litgpt.Config``
at the cell's shape: ``n_embd = width``, ``n_layer = depth``, ``n_head = heads``, ``head_size =
head_dim``, ``vocab_size = padded_vocab_size``, ``block_size = context``; by default the Llama
recipe in litgpt's terms (``RMSNorm``, ``LLaMAMLP`` of ``mlp_width(width, mlp_ratio,
multiple_of)``, full rotary embedding, no biases) with ``kv_groups`` query heads per key/value
group. ``[model.args]`` keys: ``mlp_ratio`` (8/3), ``multiple_of`` (16), ``kv_groups`` (1),
``rope_base`` (10000), ``norm_class_name`` ("RMSNorm"), ``mlp_class_name`` ("LLaMAMLP"),
``norm_qk`` (false), and any other ``litgpt.Config`` field by name. litgpt's ``GPT.forward(idx)``
returns the logits itself.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from sweeper.adapters import mlp_width

__all__ = ["gpt", "gpt_config"]


def gpt_config(
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
    rope_base: int = 10000,
    norm_class_name: str = "RMSNorm",
    mlp_class_name: str = "LLaMAMLP",
    **extra: Any,
) -> Any:
    """The ``litgpt.Config`` of one cell."""
    from litgpt import Config

    if heads % kv_groups:
        raise ValueError(f"kv_groups {kv_groups} must divide the number of heads {heads}")
    return Config(
        name="sweeper-proxy",
        block_size=context,
        n_layer=depth,
        n_embd=width,
        n_head=heads,
        head_size=head_dim,
        n_query_groups=heads // kv_groups,
        vocab_size=vocab_size,
        padded_vocab_size=vocab_size,
        padding_multiple=1,
        bias=False,
        norm_class_name=norm_class_name,
        mlp_class_name=mlp_class_name,
        intermediate_size=mlp_width(width, mlp_ratio, multiple_of),
        rotary_percentage=1.0,
        parallel_residual=False,
        rope_base=rope_base,
        **extra,
    )


def gpt(**kwargs: Any) -> nn.Module:
    """The builder: a tiny litgpt GPT at the cell's shape (see the module docstring)."""
    from litgpt import GPT

    return GPT(gpt_config(**kwargs))

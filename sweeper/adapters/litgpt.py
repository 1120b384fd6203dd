"""litgpt's GPT as a Sweeper model builder (extra ``litgpt``).

``[model] builder = "sweeper.adapters.litgpt:gpt"`` builds ``litgpt.GPT`` from a ``litgpt.Config``
at the cell's shape: ``n_embd = width``, ``n_layer = depth``, ``n_head = heads``, ``head_size =
head_dim``, ``vocab_size = padded_vocab_size``, ``block_size = context``; by default the Llama
recipe in litgpt's terms (``RMSNorm``, ``LLaMAMLP`` of ``mlp_width(width, mlp_ratio,
multiple_of)``, full rotary embedding, no biases, sequential residual) with ``kv_groups`` query
heads per key/value group. ``[model.args]`` keys: ``mlp_ratio`` (8/3), ``multiple_of`` (16),
``kv_groups`` (1), ``rope_base`` (10000), ``norm_class_name`` ("RMSNorm"), ``mlp_class_name``
("LLaMAMLP"), and any other ``litgpt.Config`` field by name (``norm_qk``, ``norm_eps``...), which
also overrides the recipe's own (``bias``, ``parallel_residual``, ``rotary_percentage``,
``intermediate_size``, which then replaces the ``mlp_ratio`` rule); the fields the cell's shape
sets (:data:`SHAPE_FIELDS`) are refused in one line. litgpt's ``GPT.forward(idx)`` returns the
logits itself.

Init: litgpt's pretraining init, ``litgpt.pretrain.initialize_weights`` (0.5.13), which ``litgpt
pretrain`` applies to every model it trains from scratch: every Linear and Embedding
N(0, 2/(5·width)), then the output projection ``proj`` of the attention and of ``LLaMAMLP``
N(0, (1/(√width·depth))²), biases 0 (GPT-NeoX's init, after TinyLlama). ``GPT(config)`` alone
keeps PyTorch's defaults (embedding std 1, Kaiming-uniform linears, std 1/√(3·fan_in)), which no
litgpt run trains with, and ``GPT._init_weights`` (0.02) is called by no litgpt script. Under SP
the proxies train from this init (the law records the builder and its arguments, and its init std
as unknown: the builder's own); under muP/CompleteP Sweeper re-draws the matrices by role.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from torch import nn

from sweeper.adapters import mlp_width

__all__ = ["SHAPE_FIELDS", "config_fields", "gpt", "gpt_config", "init_weights"]

#: the ``litgpt.Config`` fields set from the cell's shape (refused in ``[model.args]``: the
#: ladder would no longer build the shape it counts)
SHAPE_FIELDS: tuple[str, ...] = (
    "block_size", "n_layer", "n_embd", "n_head", "head_size", "n_query_groups", "vocab_size",
    "padded_vocab_size",
)  # fmt: skip


def config_fields(
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
) -> dict[str, Any]:
    """The ``litgpt.Config`` keywords of one cell (litgpt is not imported: the litgpt export
    writes them at the target's shape); ``extra`` overrides the recipe's fields (ValueError for a
    shape field)."""
    if heads % kv_groups:
        raise ValueError(f"kv_groups {kv_groups} must divide the number of heads {heads}")
    shaped = [k for k in SHAPE_FIELDS if k in extra]
    if shaped:
        raise ValueError(
            f"[model.args] {', '.join(shaped)}: set from the cell's shape (width, depth, heads, "
            "head_dim, vocab_size, context; n_query_groups from kv_groups), not an argument"
        )
    return {
        "name": "sweeper-proxy",
        "block_size": context,
        "n_layer": depth,
        "n_embd": width,
        "n_head": heads,
        "head_size": head_dim,
        "n_query_groups": heads // kv_groups,
        "vocab_size": vocab_size,
        "padded_vocab_size": vocab_size,
        "padding_multiple": 1,
        "bias": False,
        "norm_class_name": norm_class_name,
        "mlp_class_name": mlp_class_name,
        "intermediate_size": mlp_width(width, mlp_ratio, multiple_of),
        "rotary_percentage": 1.0,
        "parallel_residual": False,
        "rope_base": rope_base,
        **extra,
    }


def gpt_config(**kwargs: Any) -> Any:
    """The ``litgpt.Config`` of one cell (:func:`config_fields`' keywords)."""
    from litgpt import Config

    return Config(**config_fields(**kwargs))


def init_weights(model: nn.Module) -> None:
    """litgpt's pretraining init on ``model`` (``litgpt.pretrain.initialize_weights``, the
    function itself: its ``fabric`` is read only to skip the init under FSDP); the
    ``reset_parameters`` it binds on each module are removed again."""
    from litgpt.pretrain import initialize_weights

    cfg: Any = model.config
    initialize_weights(SimpleNamespace(strategy=None), model, cfg.n_layer, cfg.n_embd)
    for mod in model.modules():
        mod.__dict__.pop("reset_parameters", None)


def gpt(**kwargs: Any) -> nn.Module:
    """The builder: a tiny litgpt GPT at the cell's shape, with litgpt's pretraining init (see
    the module docstring)."""
    from litgpt import GPT

    model = GPT(gpt_config(**kwargs))
    init_weights(model)
    return model

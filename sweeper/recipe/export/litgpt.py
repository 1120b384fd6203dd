"""litgpt 0.5 (checked at 0.5.13): the YAML of ``litgpt pretrain --config FILE``.

Keys are the parameters of ``litgpt/pretrain.py: setup`` (jsonargparse rejects unknown ones):
``model_name`` (required even with ``model_config``), ``model_config`` (``litgpt.Config``:
n_layer, n_embd, n_head, vocab_size, padded_vocab_size, block_size, and ``parallel_residual``
false and ``bias`` false: Config's defaults, true and true (litgpt/config.py:43 and :91), are a
GPT-NeoX block with biases, the proxies' a sequential pre-LN block without; the other architecture
fields keep Config's defaults, the proxies' where they matter, except the positions and the
LayerNorm bias, which no field changes: :func:`missing`), ``precision`` (``bf16-mixed`` |
``32-true``; unset, litgpt picks bf16-mixed even for an fp32 recipe), ``devices``/``num_nodes``,
``train`` (``TrainArgs``: global_batch_size in sequences over all devices, micro_batch_size,
lr_warmup_steps in optimizer steps, max_tokens, max_seq_length, min_lr absolute, max_norm) and
``optimizer`` (class_path torch.optim.AdamW with init_args; pretrain.py builds it over
``model.parameters()``, one param group: the weight decay hits norm gains and biases too).
``data``, ``tokenizer_dir`` and ``out_dir`` are left to the user (no ``data``: litgpt's TinyLlama
data module). The schedule is fixed in ``pretrain.get_lr`` (litgpt/pretrain.py:463-474 at
0.5.13): linear warmup (lr·it/warmup), then ``min_lr + coeff·(lr − min_lr)`` with a cosine
coeff: a cosine recipe, and a constant one (min_lr = lr, min_lr_ratio 1); a WSD or linear recipe
is refused (:data:`RUNS`).

An LR law measured on litgpt's own GPT through the adapter (:data:`ADAPTER`, with its
``model_args``) gets that model instead of the proxies' block: ``model_config`` is the
``litgpt.Config`` the adapter builds at the target's shape (:func:`adapter_config`: the Llama
recipe's LLaMAMLP and intermediate_size, RMSNorm, n_query_groups, full rotary, or what the
arguments chose), whose N is the header's (recommend counts it on that model).
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from proxy_models.rules import sp_small_init_std
from sweeper.recipe.export import carry
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.header import comment, header_lines
from sweeper.recipe.export.versions import FrameworkVersion
from sweeper.recipe.recipe import Recipe

__all__ = ["ADAPTER", "RUNS", "adapter_config", "cautions", "missing", "render"]

#: the builder whose laws' model the file writes (:func:`adapter_config`)
ADAPTER = "sweeper.adapters.litgpt:gpt"

#: the recipe schedules litgpt's fixed get_lr runs as the proxies ran them
RUNS = ("cosine", "constant")

#: litgpt.Config fields the export sets to the proxies' block (proxy_models/model.py: x + attn(norm
#: x), then x + mlp(norm x), no linear biases), where Config's defaults (litgpt/config.py at
#: 0.5.13) differ: parallel_residual True (line 43) adds attention and MLP to the same x, bias True
#: (line 91) puts biases on the attention and MLP linears
ARCHITECTURE: dict[str, Any] = {"parallel_residual": False, "bias": False}

#: litgpt.Config defaults the export keeps (litgpt/config.py and model.py at 0.5.13), the
#: proxies' as they are
ARCHITECTURE_DEFAULTS = (
    "mlp_class_name GptNeoxMLP (intermediate 4·n_embd, exact GELU), norm_class_name LayerNorm "
    "(norm_eps 1e-5), n_query_groups = n_head, attention scale 1/sqrt(head_size), an untied "
    "lm_head without bias"
)


def adapter_config(r: Recipe) -> tuple[dict[str, Any] | None, str]:
    """(the ``litgpt.Config`` fields of the LR law's model at the target's shape, why not): the
    fields when the law was measured on :data:`ADAPTER`, built from its ``model_args`` by the
    adapter's own :func:`~sweeper.adapters.litgpt.config_fields` (litgpt not imported); None with
    "" for any other law, None with the reason when the arguments do not build at the target (a
    ``kv_groups`` that does not divide its heads)."""
    law = carry.lr_law_conventions(r)
    if law is None or law.model_builder != ADAPTER:
        return None, ""
    from sweeper.adapters.litgpt import config_fields

    try:
        fields = config_fields(
            width=r.width, depth=r.depth, heads=r.heads, head_dim=r.width // r.heads,
            vocab_size=r.vocab, context=r.seq_len, **dict(law.model_args or {}),
        )  # fmt: skip
    except (TypeError, ValueError) as e:
        return None, f"{ADAPTER} with the law's model_args does not build at the target: {e}"
    return {**fields, "name": f"sweeper-{r.depth}x{r.width}"}, ""


def _init(r: Recipe) -> list[Missing]:
    """litgpt's initialize_weights (pretrain.py at 0.5.13): every Embedding/Linear
    N(0, sqrt(2/(5·n_embd))), then ``proj`` of CausalSelfAttention and LLaMAMLP only
    1/sqrt(n_embd)/n_layer; the GptNeoxMLP of this config keeps its ``proj`` (the MLP's
    down-projection) at sqrt(2/(5·n_embd)). Not configurable."""
    small = sp_small_init_std(r.width)
    attn_proj = 1 / math.sqrt(r.width) / r.depth
    own, _ = adapter_config(r)
    if own is not None and own["mlp_class_name"] == "LLaMAMLP":
        fixed = (
            f"litgpt's initialize_weights is fixed: sqrt(2/(5·n_embd)) = {small:.4g} for every "
            f"embedding and linear, 1/sqrt(n_embd)/n_layer = {attn_proj:.4g} for the attention's "
            "and the LLaMAMLP's out-projections (proj)"
        )
    else:
        fixed = (
            f"litgpt's initialize_weights is fixed: sqrt(2/(5·n_embd)) = {small:.4g} for every "
            f"embedding and linear, the MLP's down-projection (GptNeoxMLP proj) included, "
            f"1/sqrt(n_embd)/n_layer = {attn_proj:.4g} for the attention out-projections only"
        )
    if r.parametrization != "sp":
        return carry.init_std(r, fixed)
    if own is not None:  # (the adapter's proxies were inited by this same function: its note)
        return []
    proj = r.rules().residual_proj_init_std(r.init_std)
    others = (
        "the other matrices agree with the recipe"
        if math.isclose(r.init_std, small, rel_tol=1e-9)
        else f"the other matrices' {small:.4g} is not the recipe's {r.init_std:.4g} either"
    )
    return [
        Missing(
            "init_std",
            f"init std of the residual projections (attention out, MLP down) {proj:.4g} (init std "
            f"{r.init_std:.4g} / sqrt(2·{r.depth})): {fixed} ({others})",
        )
    ]


def _architecture() -> list[Missing]:
    """The proxies' architecture that no litgpt.Config field gives (litgpt/model.py at 0.5.13):
    GPT has no position embedding, only RoPE (``rotary_percentage`` of each head); the
    LayerNorm is ``torch.nn.LayerNorm``, with a bias."""
    return [
        Missing(
            "architecture",
            "learned absolute position embeddings (the proxies' wpe): litgpt's GPT has no "
            "position embedding and rotates queries and keys instead (RoPE, rope_base 10000, on "
            "rotary_percentage 0.25 of each head's dimensions); no Config field gives learned "
            "positions",
        ),
        Missing(
            "architecture",
            "LayerNorm without bias (the proxies' norms have a gain only): litgpt's LayerNorm is "
            "torch.nn.LayerNorm, with a bias (zero-initialised, weight-decayed with the one "
            "param group); no Config field removes it",
        ),
    ]


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    out = carry.optimizer(r, "litgpt")
    out += carry.schedule(r, "litgpt (pretrain.get_lr)", RUNS, f"a cosine to min_lr {r.min_lr:.4g}")
    out += carry.parametrization(r) + carry.output_mult(r)
    out += carry.rampup(r) + carry.z_loss(r) + _init(r)
    out += carry.weight_decay_groups(
        r, "litgpt pretrain builds its optimizer over model.parameters() (one param group)"
    )
    multi = r.data_parallel > 1
    out += carry.zero_stage(
        r,
        3 if multi else 0,
        "litgpt pretrain shards with FSDP HYBRID_SHARD on several devices, not configurable"
        if multi
        else "litgpt pretrain on one device does not shard",
    )
    return out + (_architecture() if carry.on_the_proxies(r) else [])


def _doc(r: Recipe) -> dict[str, Any]:
    own, _ = adapter_config(r)
    return {
        "model_name": f"sweeper-{r.depth}x{r.width}",
        "model_config": own
        or {
            "name": f"sweeper-{r.depth}x{r.width}",
            "n_layer": r.depth,
            "n_embd": r.width,
            "n_head": r.heads,
            "vocab_size": r.vocab,
            "padded_vocab_size": r.vocab,
            "block_size": r.seq_len,
            **ARCHITECTURE,
        },
        "precision": "bf16-mixed" if r.precision == "bf16" else "32-true",
        "devices": r.data_parallel,
        "num_nodes": 1,
        "train": {
            "global_batch_size": r.global_batch_sequences,
            "micro_batch_size": r.micro_batch_size,
            "lr_warmup_steps": r.warmup_steps,
            # (litgpt steps max_tokens // world // (micro·seq) // accum times: the recipe's steps
            # exactly, its tokens rounded up to whole batches as every other format trains)
            "max_tokens": r.total_steps * r.global_batch_sequences * r.seq_len,
            "max_seq_length": r.seq_len,
            "min_lr": r.min_lr,
            "max_norm": carry.clip_norm(r),
        },
        "optimizer": {
            "class_path": "torch.optim.AdamW",
            "init_args": {
                "lr": r.lr.value,
                "weight_decay": r.weight_decay,
                "betas": [r.adam_beta1, r.adam_beta2],
                "eps": r.adam_eps,
            },
        },
    }


def cautions(r: Recipe, fv: FrameworkVersion | None) -> list[str]:
    """What the file leaves to litgpt's defaults (the architecture beyond the shape and the
    block), which the recipe does not record, and a vocabulary it writes that no one gave; for a
    law measured on the litgpt adapter, what model_config is (:func:`adapter_config`)."""
    own, why = adapter_config(r)
    out = [_adapter_caution(r, own)] if own is not None else _block_cautions(r)
    if why:
        out.append(f"{why}: the file's block is Sweeper's proxies'")
    if r.target.vocab is None:
        out.append(
            f"vocab_size {r.vocab} is assumed (no vocab given): litgpt builds the embedding and "
            "head from it; set your tokenizer's"
        )
    return out


def _adapter_caution(r: Recipe, own: dict[str, Any]) -> str:
    law = carry.lr_law_conventions(r)
    args = dict(law.model_args or {}) if law is not None else {}
    init = (
        "litgpt pretrain's initialize_weights, the init the adapter gives its proxies under SP "
        "(since 2026-11-29; a sweep launched before trained PyTorch's default init)"
        if r.parametrization == "sp"
        else "litgpt pretrain's initialize_weights"
    )
    return (
        f"model_config is the LR law's model: the litgpt.Config that its builder {ADAPTER} "
        f"makes with the law's model_args {args} at the target's shape (mlp_class_name "
        f"{own['mlp_class_name']}, intermediate_size {own['intermediate_size']}, "
        f"norm_class_name {own['norm_class_name']}, n_query_groups {own['n_query_groups']} of "
        f"{own['n_head']} heads, head_size {own['head_size']}); the other fields are Config's "
        f"defaults, as the builder left them; init: {init}"
    )


def _block_cautions(r: Recipe) -> list[str]:
    """The proxies' block written, and what the rest of it is."""
    block = "Sweeper's proxies' (parallel_residual false, bias false)"
    return [
        *carry.not_the_proxies(r, "litgpt", block),
        "model_config sets n_layer/n_embd/n_head/vocab_size/block_size and the proxies' block "
        "(parallel_residual false, bias false); the rest is litgpt's Config defaults, which are "
        f"the proxies' defaults: {ARCHITECTURE_DEFAULTS}; the recipe does not record the study's "
        "norm: if its proxies used RMSNorm, set norm_class_name RMSNorm and norm_eps 1e-6 (and "
        "the LayerNorm bias above is then no difference)",
    ]


def _nodes_note(r: Recipe) -> list[str]:
    if r.data_parallel == 1:
        return []
    return [
        f"devices × num_nodes = {r.data_parallel}: on several nodes set devices to the GPUs per "
        f"node and num_nodes to the nodes (the product must stay {r.data_parallel})"
    ]


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    notes = [f"CAUTION: {c}" for c in cautions(r, fv)] + [
        *_nodes_note(r),
        "min_lr is absolute: if you change the optimizer's lr, change train.min_lr with it",
        "yours to add: data: (unset, litgpt pretrain trains on its default data module, "
        "TinyLlama), tokenizer_dir: (the tokenizer's folder) and out_dir: (default "
        "out/pretrain)",
    ]
    notes += carry.no_clip_note(r, "train.max_norm")
    head = comment(header_lines(r, "litgpt", miss, fv, notes))
    return head + yaml.safe_dump(_doc(r), sort_keys=False)

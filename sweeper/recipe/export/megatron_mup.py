"""Megatron-LM's ``--use-mup`` (core >= 0.17) against the proxies' muP (:mod:`proxy_models.rules`,
the one home of the proxies' multipliers).

What ``--use-mup`` does, read at core_v0.19.0 (megatron/core/transformer/transformer_config.py
``__post_init__``, megatron/core/optimizer/__init__.py ``get_mup_config_overrides``,
megatron/core/models/gpt/gpt_model.py, megatron/core/utils.py ``mup_scaled_init_method_normal``;
the same design at core_v0.17.0), with m = hidden / ``--mup-base-hidden-size``:

- attention: softmax scale ``(sqrt(--mup-base-head-dim) if given else 1) / d_head**power``
  (power ``--mup-attn-scale-power`` 1.0): with the base head size given it is the proxies'
  sqrt(d_base)/d_head; without it, 1/d_head (sqrt(d_base) times smaller logits);
- output logits × ``--mup-output-mult``, set to 1/m when left at 1.0 and m != 1 (the proxies'
  base/width; their extra α is passed as α·base/width);
- init: hidden ``--init-method-std``/sqrt(m), residual projections ÷ sqrt(2·L·m), embeddings and
  the output layer keep ``--init-method-std`` (the proxies' rules: the same);
- init of the output layer: untied (``--untie-embeddings-and-output-weights``, written by the
  export) it gets ``embedding_init_method``, the unscaled ``--init-method-std``: the proxies'
  lm_head init;
- optimizer (``get_mup_config_overrides``): the hidden matrices get lr/m, min_lr/m and Adam eps/m;
  the embeddings and the output layer are marked ``is_embedding_parameter`` under ``--use-mup``
  (megatron/core/models/common/language_module/language_module.py
  ``setup_embeddings_and_output_layer``, since 310082a6d2: core_v0.17.0 and 0.17.1 line 212,
  core_v0.18.2 line 232, core_v0.19.0 line 245) and are treated as vector-like: base lr and eps,
  as the proxies' embeddings and lm_head. Weight decay is not scaled (norm gains and biases have
  none: ``get_standard_config_overrides``, as the proxies). The proxies (microsoft/mup's
  MuAdamW) keep eps on every parameter and multiply the hidden weight decay by m.
"""

from __future__ import annotations

from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.header import num
from sweeper.recipe.recipe import Recipe

__all__ = ["base_head_dim", "mup_args", "mup_cautions", "mup_differences", "mup_notes"]

EMBEDDING, HIDDEN = "embedding", "hidden"  # proxy_models.rules roles


def base_head_dim(r: Recipe) -> tuple[int, bool]:
    """(the proxies' head size at the base width, whether the recipe recorded it). Not
    recorded: base_width // heads, the head count held fixed across widths."""
    if r.base_head_dim:
        return r.base_head_dim, True
    return max(1, (r.base_width or r.width) // r.heads), False


def _output_mult(r: Recipe) -> float:
    """The proxies' logit factor at the target: α·base/width (proxy_models.rules)."""
    return r.rules().output_multiplier(r.output_mult)


def mup_args(r: Recipe) -> list[tuple[str, ...]]:
    """The ``--use-mup`` flags for a muP/CompleteP recipe (Megatron-LM >= core 0.17)."""
    d_base, _ = base_head_dim(r)
    args: list[tuple[str, ...]] = [
        ("--use-mup",),
        ("--mup-base-hidden-size", str(r.base_width)),
        ("--mup-base-head-dim", str(d_base)),
    ]
    if r.output_mult != 1.0:
        args.append(("--mup-output-mult", num(_output_mult(r))))
    return args


def mup_notes(r: Recipe) -> list[str]:
    """What the flags make Megatron do the same way as the proxies (header notes)."""
    m = r.rules().width_mult
    d_base, _ = base_head_dim(r)
    d_head = r.width // r.heads
    scale = r.rules().attention_scale(d_head, d_base)
    return [
        f"--use-mup with m = {r.width}/{r.base_width} = {m:g}: attention scale sqrt({d_base})/"
        f"{d_head} = {scale:.4g} (--mup-base-head-dim {d_base}; without it Megatron uses "
        f"1/d_head), output logits × {_output_mult(r):.4g} (output mult, the proxies' "
        f"{r.output_mult:g}·base/width), hidden init --init-method-std/sqrt(m) = "
        f"{r.hidden_init_std:.4g}, the embeddings and the untied output layer at the base LR "
        f"{r.lr.value * r.rules().lr_multiplier(EMBEDDING):.4g} and eps {r.adam_eps:g} "
        f"(is_embedding_parameter), hidden matrices at lr/m = "
        f"{r.lr.value * r.rules().lr_multiplier(HIDDEN):.4g}: as the proxies",
    ]


def mup_differences(r: Recipe) -> list[Missing]:
    """Where ``--use-mup`` is not the proxies' muP: each a setting the file cannot carry."""
    rules = r.rules()
    m = rules.width_mult
    wd_hidden = r.weight_decay * rules.weight_decay_multiplier(HIDDEN)
    out = [
        Missing(
            "eps",
            f"Adam eps {r.adam_eps:g} for every parameter (the proxies'): --use-mup divides it "
            f"by m for the hidden matrices ({r.adam_eps / m:.3g})",
        ),
        Missing(
            "parametrization",
            f"the hidden matrices' weight decay {wd_hidden:g}"
            f" = {r.weight_decay:g} × m (the proxies, MuAdamW: lr·wd of the base model kept): "
            f"--use-mup leaves weight decay {r.weight_decay:g} on every matrix",
        ),
    ]
    if r.output_mult != 1.0 and _output_mult(r) == 1.0 and m != 1.0:
        out.append(
            Missing(
                "output_mult",
                "output (logit) multiplier 1.0 at the target: Megatron replaces an "
                f"--mup-output-mult of 1.0 by 1/m = {1 / m:.4g}",
            )
        )
    if r.parametrization == "completep":
        out.append(
            Missing(
                "parametrization",
                f"CompleteP's residual branch multiplier base_depth/depth = "
                f"{rules.residual_multiplier:.4g}: no Megatron-LM flag; --use-mup carries the "
                "width part only",
                refuse=True,
            )
        )
    return out


def mup_cautions(r: Recipe) -> list[str]:
    """Assumptions the file makes that the user must check."""
    d_base, recorded = base_head_dim(r)
    if recorded:
        return []
    return [
        f"the recipe does not record the proxies' head size at the base width: "
        f"--mup-base-head-dim {d_base} assumes base_width/heads = {r.base_width}/{r.heads} (the "
        "head count held fixed across widths); if the proxies kept the head size fixed, give "
        "their head size instead (edit the flag, or declare the convention base_head_dim=SIZE "
        "when importing their runs)"
    ]

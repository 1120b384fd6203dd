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

A law measured on a study's own model (a builder) ran the model's own attention scale
(:data:`sweeper.fitting.provenance.ATTENTION_AS_MUP`): with a head size held fixed that is the
flags' sqrt(d_base)/d_head on the proxies; with a head count held fixed it is not (d_head grew
with width under 1/sqrt(d_head)), and the notes say so instead of "as the proxies"
(:func:`own_attention`), with the flags that would run it (``--mup-attn-scale-power 0.5``
without ``--mup-base-head-dim``: 1/sqrt(d_head)).
"""

from __future__ import annotations

from sweeper.fitting.provenance import builder_attention_is_mup
from sweeper.recipe.export.carry import Missing, lr_law_conventions
from sweeper.recipe.export.header import num
from sweeper.recipe.recipe import Recipe

__all__ = [
    "base_head_dim",
    "mup_args",
    "mup_cautions",
    "mup_differences",
    "mup_notes",
    "own_attention",
]

EMBEDDING, HIDDEN = "embedding", "hidden"  # proxy_models.rules roles


def base_head_dim(r: Recipe) -> tuple[int, bool]:
    """(the proxies' head size at the base width, whether the recipe recorded it). Not
    recorded: base_width // heads, the head count held fixed across widths."""
    if r.base_head_dim:
        return r.base_head_dim, True
    return max(1, (r.base_width or r.width) // r.heads), False


def own_attention(r: Recipe) -> tuple[str, bool | None] | None:
    """(the LR law's builder, whether its law records the model's own attention scale as muP's
    1/d rule on the proxies: :func:`~sweeper.fitting.provenance.builder_attention_is_mup`), None
    when the law was not measured on a builder's model."""
    law = lr_law_conventions(r)
    if law is None or law.model_builder is None:
        return None
    return law.model_builder, builder_attention_is_mup(law)


def _attention_note(r: Recipe) -> tuple[str, str]:
    """The attention part of :func:`mup_notes`: (what the flags make Megatron's softmax scale,
    said among what is as the proxies; "" when it is not as the proxies, and then the second
    item says so, with what they ran instead)."""
    d_base, _ = base_head_dim(r)
    d_head = r.width // r.heads
    scale = r.rules().attention_scale(d_head, d_base)
    flags = f"--mup-base-head-dim {d_base}; without it Megatron uses 1/d_head"
    own = own_attention(r)
    if own is None or own[1] is True:
        return f"attention scale sqrt({d_base})/{d_head} = {scale:.4g} ({flags}), ", ""
    held = (
        "with the head count held fixed, d_head growing with width"
        if own[1] is False
        else "and the law does not record whether the study held the head count fixed (d_head "
        "growing with width: not muP's rule) or the head size (the same as muP's rule there)"
    )
    return "", (
        f"; the attention is not: its scale is sqrt({d_base})/{d_head} = {scale:.4g} ({flags}), "
        f"muP's 1/d rule, where the proxies ran their model's own (the law's builder {own[0]}: "
        f"1/sqrt(d_head) in a standard attention, as in sweeper.adapters) {held}; at the target "
        f"that is 1/sqrt({d_head}) = {d_head**-0.5:.4g} (--mup-attn-scale-power 0.5 without "
        "--mup-base-head-dim)"
    )


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
    same, other = _attention_note(r)
    return [
        f"--use-mup with m = {r.width}/{r.base_width} = {m:g}: {same}output logits × "
        f"{_output_mult(r):.4g} (output mult, the proxies' "
        f"{r.output_mult:g}·base/width), hidden init --init-method-std/sqrt(m) = "
        f"{r.hidden_init_std:.4g}, the embeddings and the untied output layer at the base LR "
        f"{r.lr.value * r.rules().lr_multiplier(EMBEDDING):.4g} and eps {r.adam_eps:g} "
        f"(is_embedding_parameter), hidden matrices at lr/m = "
        f"{r.lr.value * r.rules().lr_multiplier(HIDDEN):.4g}: as the proxies{other}",
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
    out: list[str] = []
    own = own_attention(r)
    if own is not None and own[1] is not True:
        d_head = r.width // r.heads
        what = (
            "held the head count fixed, so d_head grew with width"
            if own[1] is False
            else "may have held the head count fixed (the law does not record it)"
        )
        out.append(
            f"the attention scale is muP's sqrt({d_base})/d_head (--mup-base-head-dim {d_base}), "
            f"not the one the LR law's proxies ran: their model ({own[0]}) keeps its own, and "
            f"the study {what}; to run as they ran, drop --mup-base-head-dim and add "
            f"--mup-attn-scale-power 0.5 (1/sqrt(d_head) = {d_head**-0.5:.4g} at the target), "
            "or confirm the LR with a short run"
        )
    if recorded:
        return out
    return [
        *out,
        f"the recipe does not record the proxies' head size at the base width: "
        f"--mup-base-head-dim {d_base} assumes base_width/heads = {r.base_width}/{r.heads} (the "
        "head count held fixed across widths); if the proxies kept the head size fixed, give "
        "their head size instead (edit the flag, or declare the convention base_head_dim=SIZE "
        "when importing their runs)",
    ]

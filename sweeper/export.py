"""A :class:`~sweeper.recommend.Recipe` in the config format of the framework that will run it.

One function per format, each a pure ``Recipe -> str`` with the exact key names of its project
(REFERENCE.md "Export keys"):

- ``litgpt``: ``litgpt pretrain --config`` YAML (``train.*`` and ``optimizer.class_path/init_args``)
- ``hf``: ``transformers.TrainingArguments`` keyword arguments as JSON (warmup in steps, the
  ``cosine_with_min_lr`` scheduler with ``min_lr_rate``)
- ``deepspeed``: DeepSpeed config JSON; the schedule is ``WarmupCosineLR`` with ``cos_min_ratio``
  (``WarmupDecayLR`` decays to 0 and cannot keep a min LR), linear warmup
- ``megatron``: Megatron-LM arguments, one ``--flag value`` per line after ``#`` comment lines
  (``shlex.split(text, comments=True)`` gives the argv); iteration-based, or sample-based when the
  recipe ramps the batch up (Megatron allows ``--rampup-batch-size`` only with ``--train-samples``)
- ``torchtitan``: the ``[optimizer]``, ``[lr_scheduler]`` and ``[training]`` tables of a job TOML
- ``nanogpt``: a nanoGPT ``config/*.py`` file of assignments
- ``json``: the recipe itself (:meth:`Recipe.to_dict`)

Every format that has comments starts with a header: the law provenance (with the token unit, the
variables each law held fixed and the schedule the LR was measured under), the intervals, the init
std and what it means, the warnings, and the recipe settings that the format has no key for
(z-loss, init std, ramp-up, muP, the proxies' output multiplier when not 1). Under muP/CompleteP
the init std is the proxies' std at the base width (Megatron's ``--init-method-std`` beside
``--mup-base-hidden-size``); the hidden matrices at the target width get
init_std·sqrt(base_width/width).
JSON has no comments: the ``json`` export carries all of it, HF and DeepSpeed carry none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import yaml

from sweeper.errors import TargetError
from sweeper.recommend import Recipe

__all__ = ["FORMATS", "export_recipe", "header_lines"]


def header_lines(recipe: Recipe, fmt: str, missing: list[str]) -> list[str]:
    """Comment lines (without the ``#``) describing where ``recipe`` comes from."""
    r = recipe
    lines = [
        f"Sweeper recipe ({fmt}): N = {r.n_params:.4g} non-embedding parameters "
        f"({r.depth} layers × d_model {r.width}, {r.heads} heads"
        f"{', inferred from N' if r.shape_inferred else ''}), D = {r.tokens:.4g} tokens, "
        f"{r.parametrization}" + (f" (base width {r.base_width})" if r.base_width else ""),
        f"peak LR {r.lr.value:.4g}, {r.level:.0%} interval [{r.lr.low:.4g}, {r.lr.high:.4g}]; "
        f"min LR {r.min_lr:.4g} (cosine to {r.min_lr_ratio:.0%})",
        f"batch {r.global_batch_sequences} × {r.seq_len} = {r.batch_tokens.value:.4g} tokens "
        f"(law {r.batch_tokens_law:.4g}, interval [{r.batch_tokens.low:.4g}, "
        f"{r.batch_tokens.high:.4g}]) = micro {r.micro_batch_size} × accumulation "
        f"{r.grad_accum_steps} × {r.data_parallel} GPUs",
    ]
    for role, p in r.provenance.items():
        conv = p.get("conventions") or {}
        fb = ", FALLBACK" if p.get("fallback") else ""
        unit = conv.get("tokens")
        if unit == "bytes" and r.bytes_per_token:
            unit += f" (converted at {r.bytes_per_token:g} bytes per token)"
        lines.append(
            f"{role} law: id {p.get('id')}, source {p.get('source')}, method {p.get('method')}, "
            f"predictors {','.join(p.get('predictors') or [])}, flops {conv.get('flops', '6ND')}"
            + (f", tokens counted as {unit}" if unit else "")
            + fb
        )
        if conv.get("held_fixed"):
            lines.append(f"  {role} law held fixed: {conv['held_fixed']}")
        if role == "lr" and conv.get("lr"):
            lines.append(f"  lr measured as: {conv['lr']}")
    if r.init_std_note:
        lines.append(f"init std {r.init_std:.4g}: {r.init_std_note}")
    ext = "unknown" if r.extrapolation_factor is None else f"{r.extrapolation_factor:.3g}×"
    lines.append(f"extrapolation factor (target / largest proxy): {ext}")
    lines += [f"WARNING: {w}" for w in r.warnings]
    lines += [f"not expressible here: {m}" for m in missing]
    return lines


def _missing(recipe: Recipe, *, z_loss: bool, init_std: bool, rampup: bool, mup: bool) -> list[str]:
    """The recipe settings a format has no key for (False = no key)."""
    out = []
    if not z_loss and recipe.z_loss:
        out.append(f"z-loss coefficient {recipe.z_loss:g}")
    if not init_std:
        out.append(
            f"init std {recipe.init_std:.4g}"
            + (f" (hidden matrices {recipe.hidden_init_std:.4g})" if recipe.base_width else "")
        )
    if not rampup and recipe.rampup is not None:
        ru = recipe.rampup
        out.append(
            f"batch ramp-up {ru.start_sequences} → {recipe.global_batch_sequences} sequences "
            f"(+{ru.increment_sequences}) over {ru.ramp_samples} samples"
        )
    if not mup and recipe.parametrization != "sp":
        out.append(
            f"{recipe.parametrization} (base width {recipe.base_width}): the LR assumes a "
            f"{recipe.parametrization} model implementation"
        )
    out += _output_mult_note(recipe)
    return out


def _output_mult_note(recipe: Recipe) -> list[str]:
    """The LR law's output (logit) multiplier when not 1: no format has a key for it, and the LR
    was measured with it (mup's ``MuReadout(output_mult=...)``)."""
    conv = (recipe.provenance.get("lr") or {}).get("conventions") or {}
    try:
        alpha = float(conv.get("output_mult", 1.0))
    except (TypeError, ValueError):
        return [f"output (logit) multiplier {conv.get('output_mult')!r} (unreadable)"]
    if alpha == 1.0:
        return []
    if recipe.parametrization == "sp" or not recipe.base_width:
        return [
            f"output (logit) multiplier {alpha:g}: logits = {alpha:g}·(h·W_lm); the LR assumes it"
        ]
    factor = alpha * recipe.base_width / recipe.width
    return [
        f"output (logit) multiplier {alpha:g} at base width {recipe.base_width}: logits = "
        f"{alpha:g}·{recipe.base_width}/{recipe.width}·(h·W_lm) = {factor:.4g}·(h·W_lm) at width "
        f"{recipe.width} (mup's MuReadout output_mult); the LR assumes it"
    ]


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def to_litgpt(recipe: Recipe) -> str:
    """``litgpt pretrain --config`` YAML. ``global_batch_size`` counts sequences over all devices;
    litgpt derives the accumulation as global / (micro × devices)."""
    r = recipe
    doc = {
        "devices": r.data_parallel,
        "train": {
            "global_batch_size": r.global_batch_sequences,
            "micro_batch_size": r.micro_batch_size,
            "lr_warmup_steps": r.warmup_steps,
            "max_tokens": int(r.tokens),
            "max_seq_length": r.seq_len,
            "min_lr": r.min_lr,
            "max_norm": r.grad_clip,
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
    missing = _missing(r, z_loss=False, init_std=False, rampup=False, mup=False)
    missing.append(
        f"model: {r.depth} layers, n_embd {r.width}, n_head {r.heads}, vocab {r.vocab} "
        "(set model_name or model_config)"
    )
    return _comment(header_lines(r, "litgpt", missing)) + yaml.safe_dump(doc, sort_keys=False)


def to_hf(recipe: Recipe) -> str:
    """``TrainingArguments(**json.load(f))`` keyword arguments; global batch =
    per_device_train_batch_size × gradient_accumulation_steps × world size."""
    r = recipe
    doc: dict[str, Any] = {
        "learning_rate": r.lr.value,
        "per_device_train_batch_size": r.micro_batch_size,
        "gradient_accumulation_steps": r.grad_accum_steps,
        "max_steps": r.total_steps,
        "warmup_steps": int(r.warmup_steps),
        "lr_scheduler_type": "cosine_with_min_lr",
        "lr_scheduler_kwargs": {"min_lr_rate": r.min_lr_ratio},
        "weight_decay": r.weight_decay,
        "adam_beta1": r.adam_beta1,
        "adam_beta2": r.adam_beta2,
        "adam_epsilon": r.adam_eps,
        "max_grad_norm": r.grad_clip,
    }
    if r.precision == "bf16":
        doc["bf16"] = True
    return json.dumps(doc, indent=2) + "\n"


def to_deepspeed(recipe: Recipe) -> str:
    """DeepSpeed config: ``train_batch_size`` = micro × accumulation × data-parallel world."""
    r = recipe
    doc: dict[str, Any] = {
        "train_batch_size": r.global_batch_sequences,
        "train_micro_batch_size_per_gpu": r.micro_batch_size,
        "gradient_accumulation_steps": r.grad_accum_steps,
        "gradient_clipping": r.grad_clip,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": r.lr.value,
                "betas": [r.adam_beta1, r.adam_beta2],
                "eps": r.adam_eps,
                "weight_decay": r.weight_decay,
            },
        },
        "scheduler": {
            "type": "WarmupCosineLR",
            "params": {
                "total_num_steps": r.total_steps,
                "warmup_num_steps": r.warmup_steps,
                "warmup_min_ratio": 0.0,
                "warmup_type": "linear",  # DeepSpeed's default is "log"
                "cos_min_ratio": r.min_lr_ratio,
            },
        },
        "zero_optimization": {"stage": r.hardware.zero_stage},
    }
    if r.precision == "bf16":
        doc["bf16"] = {"enabled": True}
    return json.dumps(doc, indent=2) + "\n"


def _num(x: float) -> str:
    """Shortest exact text for a float (repr round-trips)."""
    return repr(float(x))


def to_megatron(recipe: Recipe) -> str:
    """Megatron-LM ``pretrain_gpt.py`` arguments, one per line after the comment header.

    Use: ``pretrain_gpt.py $(grep -v '^#' args.txt) <data and parallelism args>``.
    """
    r = recipe
    args: list[tuple[str, ...]] = [
        ("--num-layers", str(r.depth)),
        ("--hidden-size", str(r.width)),
        ("--num-attention-heads", str(r.heads)),
        ("--seq-length", str(r.seq_len)),
        ("--max-position-embeddings", str(r.seq_len)),
        ("--micro-batch-size", str(r.micro_batch_size)),
        ("--global-batch-size", str(r.global_batch_sequences)),
    ]
    if r.rampup is not None:
        # sample-based: Megatron asserts that a ramp-up is never combined with --train-iters
        samples = -(-int(r.tokens) // r.seq_len)
        ru = r.rampup
        args += [
            (
                "--rampup-batch-size",
                str(ru.start_sequences),
                str(ru.increment_sequences),
                str(ru.ramp_samples),
            ),
            ("--train-samples", str(samples)),
            ("--lr-warmup-samples", str(r.warmup_steps * r.global_batch_sequences)),
            ("--lr-decay-samples", str(samples)),
        ]
    else:
        args += [
            ("--train-iters", str(r.total_steps)),
            ("--lr-warmup-iters", str(r.warmup_steps)),
            ("--lr-decay-iters", str(r.total_steps)),
        ]
    args += [
        ("--lr", _num(r.lr.value)),
        ("--min-lr", _num(r.min_lr)),
        ("--lr-decay-style", "cosine"),
        ("--weight-decay", _num(r.weight_decay)),
        ("--adam-beta1", _num(r.adam_beta1)),
        ("--adam-beta2", _num(r.adam_beta2)),
        ("--adam-eps", _num(r.adam_eps)),
        ("--clip-grad", _num(r.grad_clip)),
        ("--init-method-std", _num(r.init_std)),
    ]
    if r.precision == "bf16":
        args.append(("--bf16",))
    missing = _missing(r, z_loss=False, init_std=True, rampup=True, mup=r.parametrization == "mup")
    if r.parametrization == "mup":
        # legacy spelling; newer Megatron: --scaling-recipe mup --scaling-base-hidden-size
        args += [("--use-mup",), ("--mup-base-hidden-size", str(r.base_width))]
        missing.append(
            "newer Megatron spells the muP flags --scaling-recipe mup --scaling-base-hidden-size; "
            f"--init-method-std is the base-width std (the proxies'), hidden matrices at width "
            f"{r.width} get {r.hidden_init_std:.4g}"
        )
    body = "".join(" ".join(a) + "\n" for a in args)
    return _comment(header_lines(r, "megatron", missing)) + body


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _num(v)
    return json.dumps(str(v))  # a TOML basic string has JSON's escapes


def to_torchtitan(recipe: Recipe) -> str:
    """The ``[optimizer]``, ``[lr_scheduler]`` and ``[training]`` tables of a torchtitan job TOML.
    ``decay_ratio`` is left unset: the cosine decay then starts right after the warmup."""
    r = recipe
    tables: dict[str, dict[str, Any]] = {
        "optimizer": {
            "name": "AdamW",
            "lr": r.lr.value,
            "beta1": r.adam_beta1,
            "beta2": r.adam_beta2,
            "eps": r.adam_eps,
            "weight_decay": r.weight_decay,
        },
        "lr_scheduler": {
            "warmup_steps": r.warmup_steps,
            "decay_type": "cosine",
            "min_lr_factor": r.min_lr_ratio,
        },
        "training": {
            "local_batch_size": r.micro_batch_size,
            "global_batch_size": r.global_batch_sequences,
            "seq_len": r.seq_len,
            "max_norm": r.grad_clip,
            "steps": r.total_steps,
        },
    }
    missing = _missing(r, z_loss=False, init_std=False, rampup=False, mup=False)
    out = [_comment(header_lines(r, "torchtitan", missing))]
    for name, table in tables.items():
        out.append(f"\n[{name}]\n")
        out += [f"{k} = {_toml_value(v)}\n" for k, v in table.items()]
    return "".join(out)


def to_nanogpt(recipe: Recipe) -> str:
    """A nanoGPT ``config/*.py``. nanoGPT's ``gradient_accumulation_steps`` is the total over all
    DDP processes (train.py divides it by the world size), so it is accumulation × GPUs here;
    ``batch_size`` is the micro batch per GPU."""
    r = recipe
    values: dict[str, Any] = {
        "n_layer": r.depth,
        "n_head": r.heads,
        "n_embd": r.width,
        "block_size": r.seq_len,
        "batch_size": r.micro_batch_size,
        "gradient_accumulation_steps": r.grad_accum_steps * r.data_parallel,
        "learning_rate": r.lr.value,
        "min_lr": r.min_lr,
        "decay_lr": True,
        "warmup_iters": r.warmup_steps,
        "lr_decay_iters": r.total_steps,
        "max_iters": r.total_steps,
        "weight_decay": r.weight_decay,
        "beta1": r.adam_beta1,
        "beta2": r.adam_beta2,
        "grad_clip": r.grad_clip,
        "dtype": "bfloat16" if r.precision == "bf16" else "float32",
    }
    missing = _missing(r, z_loss=False, init_std=False, rampup=False, mup=False)
    if r.adam_eps != 1e-8:
        missing.append(f"Adam eps {r.adam_eps:g} (nanoGPT uses torch's default 1e-8)")
    body = "".join(
        f"{k} = {_num(v) if isinstance(v, float) else repr(v)}\n" for k, v in values.items()
    )
    return _comment(header_lines(r, "nanogpt", missing)) + body


def to_json(recipe: Recipe) -> str:
    return json.dumps(recipe.to_dict(), indent=2) + "\n"


_EXPORTERS: Final[dict[str, Callable[[Recipe], str]]] = {
    "litgpt": to_litgpt,
    "hf": to_hf,
    "deepspeed": to_deepspeed,
    "megatron": to_megatron,
    "torchtitan": to_torchtitan,
    "nanogpt": to_nanogpt,
    "json": to_json,
}
FORMATS: Final[tuple[str, ...]] = tuple(_EXPORTERS)


def export_recipe(recipe: Recipe, fmt: str) -> str:
    """``recipe`` as the text of format ``fmt`` (one of :data:`FORMATS`)."""
    try:
        exporter = _EXPORTERS[fmt]
    except KeyError:
        raise TargetError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}") from None
    return exporter(recipe)

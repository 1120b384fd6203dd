"""HF Trainer, transformers 5 (checked at 5.23.0): ``TrainingArguments`` keyword arguments as JSON,
read by ``HfArgumentParser(TrainingArguments).parse_json_file(FILE)`` (unknown keys are an error).

Keys (transformers/training_args.py): ``learning_rate``; ``lr_scheduler_type`` by the recipe's
schedule (transformers/optimization.py at 5.23.0; every one runs as the proxies ran it):

- cosine: ``cosine_with_min_lr`` with ``lr_scheduler_kwargs.min_lr_rate`` (a ratio: it follows the
  peak; get_cosine_with_min_lr_schedule_with_warmup);
- constant: ``constant_with_warmup`` (lines 74-77: step/warmup, then 1);
- linear to 0: ``linear`` (lines 101-104);
- WSD, and linear to a min LR > 0: ``warmup_stable_decay`` (get_wsd_schedule, lines 470-560) with
  ``lr_scheduler_kwargs`` num_decay_steps (the stable steps are max_steps − warmup − decay,
  get_scheduler passes num_training_steps, lines 1037-1043), ``decay_type`` "linear" (the default
  is "cosine") and ``min_lr_ratio``; linear is a WSD without stable steps. Its warmup starts at
  min_lr_ratio × peak, not 0 (line 489: factor·(1 − min_lr_ratio) + min_lr_ratio): declared;

``warmup_steps`` (an int >= 1 is steps; ``warmup_ratio`` no longer exists in 5.x); ``max_steps``;
``per_device_train_batch_size`` and ``gradient_accumulation_steps`` (the global batch is × the
launcher's world size);
``adam_beta1``/``adam_beta2``/``adam_epsilon``, ``weight_decay``, ``max_grad_norm``; ``bf16``
(neither bf16 nor fp16: fp32). JSON has no comments: what the file cannot carry is said on stderr.
"""

from __future__ import annotations

import json
from typing import Any

from sweeper.recipe.export import carry
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.versions import FrameworkVersion
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.schedule import decay_start

__all__ = ["missing", "render"]


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    model = "the model's config (AutoConfig / your model class), not TrainingArguments"
    out = carry.optimizer(r, "hf") + _wsd_warmup(r)
    out += carry.parametrization(r, carry.SCRIPT_MODEL) + carry.output_mult(r)
    out += carry.rampup(r) + carry.z_loss(r)
    out += carry.init_std(r, "the model config's initializer_range, not TrainingArguments")
    out += carry.seq_len(r, "the tokenizer's/data collator's, not TrainingArguments")
    out += carry.model_shape(r, model) + carry.vocab(r, model + " and the tokenizer")
    out += carry.zero_stage(
        r,
        0,
        "TrainingArguments carries ZeRO only in its deepspeed key (a DeepSpeed config: export "
        "--format deepspeed and pass its path as deepspeed) or with fsdp",
    )
    out += carry.data_parallel(r, "torchrun --nproc-per-node × nodes, or accelerate launch")
    return out


def _uses_wsd(r: Recipe) -> bool:
    return r.schedule == "wsd" or (r.schedule == "linear" and r.min_lr_ratio > 0)


def _wsd_warmup(r: Recipe) -> list[Missing]:
    if not _uses_wsd(r):
        return []
    return carry.warmup_from_min(r, "warmup_stable_decay (get_wsd_schedule)")


def _scheduler(r: Recipe) -> dict[str, Any]:
    """``lr_scheduler_type`` and its ``lr_scheduler_kwargs`` for the recipe's schedule."""
    if _uses_wsd(r):
        kwargs = {
            "num_decay_steps": r.total_steps - decay_start(r),
            "decay_type": "linear",
            "min_lr_ratio": r.min_lr_ratio,
        }
        return {"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": kwargs}
    if r.schedule == "constant":
        return {"lr_scheduler_type": "constant_with_warmup"}
    if r.schedule == "linear":
        return {"lr_scheduler_type": "linear"}
    return {
        "lr_scheduler_type": "cosine_with_min_lr",
        "lr_scheduler_kwargs": {"min_lr_rate": r.min_lr_ratio},
    }


def _doc(r: Recipe) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "learning_rate": r.lr.value,
        "per_device_train_batch_size": r.micro_batch_size,
        "gradient_accumulation_steps": r.grad_accum_steps,
        "max_steps": r.total_steps,
        "warmup_steps": int(r.warmup_steps),
        **_scheduler(r),
        "weight_decay": r.weight_decay,
        "adam_beta1": r.adam_beta1,
        "adam_beta2": r.adam_beta2,
        "adam_epsilon": r.adam_eps,
        "max_grad_norm": r.grad_clip,
    }
    if r.precision == "bf16":
        doc["bf16"] = True
    return doc


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    return json.dumps(_doc(r), indent=2) + "\n"

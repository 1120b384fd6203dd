"""DeepSpeed 0.19 (checked at 0.19.8): a DeepSpeed config JSON for
``deepspeed.initialize(..., config=FILE)``, read by ``deepspeed/runtime/config.py: DeepSpeedConfig``.

``train_batch_size`` = ``train_micro_batch_size_per_gpu`` × ``gradient_accumulation_steps`` ×
the data-parallel world (asserted by DeepSpeedConfig); ``optimizer`` AdamW with lr/betas/eps/
weight_decay; ``scheduler`` by the recipe's schedule (deepspeed/runtime/lr_schedules.py at 0.19.8;
``warmup_type`` defaults to "log", so "linear" is written):

- cosine: ``WarmupCosineLR`` (``cos_min_ratio`` is a ratio of the peak; it refuses
  ``warmup_num_steps`` 0 (ValueError) and warms up over max(2, ``warmup_num_steps``) steps: a
  warmup under 2 steps is written as 1 step from the peak, ``warmup_min_ratio`` 1.0, and declared);
- constant: ``WarmupLR`` (lines 703-789: linear warmup from ``warmup_min_lr`` 0 to the optimizer's
  lr, ``warmup_max_lr`` unset, then constant);
- linear: ``WarmupDecayLR`` (lines 791-839: from ``warmup_max_lr``, whose default is 0.001, not the
  optimizer's lr, so it is written, linearly down to ``warmup_min_lr`` at ``total_num_steps``;
  ``warmup_min_lr`` = the min LR, where its warmup also starts: declared when it is not 0);
- WSD: no scheduler (VALID_LR_SCHEDULES, line 24: LRRangeTest, OneCycle, WarmupLR,
  WarmupDecayLR, WarmupCosineLR): refused; with --allow-inexpressible, a cosine.

Each scheduler's warmup runs two steps behind the proxies' (:func:`notes`), and WarmupDecayLR's
decay too: deepspeed.initialize builds the scheduler at ``last_batch_iteration`` -1, which sets
the LR of the first optimizer step (WarmupCosineLR 0, WarmupLR and WarmupDecayLR
``warmup_min_lr``), and the engine steps it after each optimizer step (runtime/engine.py
``_take_model_step``), so optimizer step k runs at its iteration k − 1, and iteration 0 is the
warmup's start again.

``gradient_clipping``;
``zero_optimization.stage``; ``bf16.enabled``.
The optimizer's param groups are the training script's (``model_parameters`` of
``deepspeed.initialize``): the weight decay hits whatever it passes. JSON has no comments: what
the file cannot carry is said on stderr.
"""

from __future__ import annotations

import json
from typing import Any

from sweeper.recipe.export import carry
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.versions import FrameworkVersion
from sweeper.recipe.recipe import Recipe

__all__ = ["RUNS", "cautions", "missing", "notes", "render"]

#: the recipe schedules a DeepSpeed scheduler runs as the proxies ran them
RUNS = ("cosine", "constant", "linear")

#: WarmupCosineLR (deepspeed/runtime/lr_schedules.py at 0.19.8) warms up over max(2, n) steps
_MIN_WARMUP = 2


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    model = "the model is the training script's, not the DeepSpeed config's"
    out = carry.optimizer(r, "deepspeed")
    out += carry.schedule(r, "deepspeed", RUNS, f"WarmupCosineLR to {r.min_lr:.4g}")
    if r.schedule == "linear":
        out += carry.warmup_from_min(r, "WarmupDecayLR (its warmup_min_lr is also its final LR)")
    out += carry.parametrization(
        r,
        f"{carry.SCRIPT_MODEL} (the optimizer type MuAdamW, the mup package's, needs a model "
        "the script built for muP)",
    )
    out += carry.output_mult(r)
    out += carry.rampup(
        r, "DeepSpeed's curriculum learning ramps the sequence length, not the batch"
    )
    out += carry.z_loss(r) + carry.init_std(r, model)
    out += carry.seq_len(r, "the data loader's and the model's, not a DeepSpeed key")
    out += carry.model_shape(r, model) + carry.vocab(r, model + " (and the tokenizer's)")
    return out + _short_warmup(r)


def _short_warmup(r: Recipe) -> list[Missing]:
    """A warmup DeepSpeed's schedulers cannot run: they refuse 0 steps and warm up over at least
    2 (WarmupCosineLR and WarmupLR start it at the peak; WarmupDecayLR cannot: its warmup_min_lr
    is also its final LR)."""
    if r.warmup_steps >= _MIN_WARMUP:
        return []
    name, _params = _scheduler(r)
    start = "the min LR" if name == "WarmupDecayLR" else "the peak LR, no ramp,"
    # WarmupCosineLR's first step runs at LR 0; WarmupLR and WarmupDecayLR start at warmup_min_lr
    first = "LR 0" if name == "WarmupCosineLR" else start.removesuffix(", no ramp,")
    text = (
        f"warmup of {r.warmup_steps} steps: DeepSpeed's {name} refuses warmup_num_steps 0 "
        "(ValueError) and warms up over max(2, warmup_num_steps) scheduler steps; written as "
        f"warmup_num_steps 1 from {start} over the first 2 scheduler steps, then "
        + ("the constant LR" if name == "WarmupLR" else "the decay")
        + f" over the remaining {r.total_steps - _MIN_WARMUP} (the first optimizer step runs at "
        f"{first}: the scheduler sets it before its first step)"
    )
    return [Missing("schedule", text)]


def cautions(r: Recipe, fv: FrameworkVersion | None) -> list[str]:
    """What the DeepSpeed config leaves to the training script."""
    if not r.weight_decay:
        return []
    return [
        f"weight_decay {r.weight_decay:g} applies to the param groups your script passes to "
        "deepspeed.initialize (model_parameters): pass model.parameters() and norm gains and "
        "biases decay too; the proxies decay matrices only (a second group with weight_decay 0 "
        "for norm gains and biases matches them)"
    ]


def notes(r: Recipe, fv: FrameworkVersion | None) -> list[str]:
    """The schedule's lag behind the proxies' (an export audit: the docs had promised one step
    of index convention at most): optimizer step k runs at the scheduler's iteration k − 1
    (module docstring), the proxies' step k at lr·(k+1)/W, so DeepSpeed's warmup, from iteration
    0 at its start, ends at step W + 1 where the proxies' ends at W − 1. A warmup under 2 steps
    is said among what the file cannot carry instead."""
    name, params = _scheduler(r)
    out = []
    if r.warmup_steps >= _MIN_WARMUP:
        start = "LR 0" if name == "WarmupCosineLR" else f"LR {params['warmup_min_lr']:.4g}"
        out.append(
            f"{name}'s warmup runs two steps behind the proxies': DeepSpeed builds it at "
            f"iteration -1 and steps it after each optimizer step, so step k runs at its "
            f"iteration k - 1, steps 0 and 1 at {start}, and the warmup ends at step "
            f"{r.warmup_steps + 1}, where the proxies reach the peak at step {r.warmup_steps - 1}"
        )
    if name == "WarmupDecayLR":
        span = max(1, r.total_steps - max(_MIN_WARMUP, r.warmup_steps))
        last = r.min_lr + (r.lr.value - r.min_lr) * min(1.0, 2 / span)
        out.append(
            f"WarmupDecayLR's linear decay stays two steps behind the proxies' as well: the last "
            f"step runs at {last:.4g}, not at the min LR {r.min_lr:.4g}"
        )
    return out


def _scheduler(r: Recipe) -> tuple[str, dict[str, Any]]:
    """The DeepSpeed scheduler and its params for the recipe's schedule (a WSD: the cosine)."""
    short = r.warmup_steps < _MIN_WARMUP
    warmup = {"warmup_num_steps": max(1, r.warmup_steps), "warmup_type": "linear"}
    if r.schedule == "constant":
        return "WarmupLR", {**warmup, "warmup_min_lr": r.lr.value if short else 0.0}
    if r.schedule == "linear":
        return "WarmupDecayLR", {
            "total_num_steps": r.total_steps,
            "warmup_min_lr": r.min_lr,
            "warmup_max_lr": r.lr.value,
            **warmup,
        }
    return "WarmupCosineLR", {
        "total_num_steps": r.total_steps,
        "warmup_num_steps": max(1, r.warmup_steps),
        "warmup_min_ratio": 1.0 if short else 0.0,
        "warmup_type": "linear",  # DeepSpeed's default is "log"
        "cos_min_ratio": r.min_lr_ratio,
    }


def _doc(r: Recipe) -> dict[str, Any]:
    name, params = _scheduler(r)
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
        "scheduler": {"type": name, "params": params},
        "zero_optimization": {"stage": r.hardware.zero_stage},
    }
    if r.precision == "bf16":
        doc["bf16"] = {"enabled": True}
    return doc


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    return json.dumps(_doc(r), indent=2) + "\n"

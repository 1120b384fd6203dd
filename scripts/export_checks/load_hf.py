"""HF Trainer (transformers 5.x): the ``hf`` export read by
``HfArgumentParser(TrainingArguments).parse_json_file(path)`` (unknown keys are an error).

The numbers come from transformers' own code: ``TrainingArguments.get_warmup_steps`` and
``transformers.get_scheduler`` with ``lr_scheduler_type``/``lr_scheduler_kwargs``, called as
``Trainer.create_scheduler`` calls them (trainer.py), on the optimizer that
``Trainer.get_optimizer_cls_and_kwargs(args)`` picks. The world size is not in the file (it is
the launcher's, ``torchrun --nproc-per-node``): the global batch is per-device × accumulation ×
the recipe's data-parallel size, as ``Trainer.get_total_train_batch_size`` computes it with
TP = CP = SP = 1. A DeepSpeed config in the ``deepspeed`` key is read for its ZeRO stage.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from common import View, lr_points


def load(text: str, recipe: dict[str, Any]) -> View:
    from importlib.metadata import version

    import torch
    from transformers import HfArgumentParser, Trainer, TrainingArguments, get_scheduler

    view = View(
        framework=f"transformers {version('transformers')}",
        loader="HfArgumentParser(TrainingArguments).parse_json_file",
    )
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "training_args.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        # this machine has no GPU: TrainingArguments refuses bf16 without one, so the check
        # answers its hardware probe as an Ampere+ GPU would (the values parsed do not change)
        import transformers.training_args as ta

        probe = ta.is_torch_bf16_gpu_available
        ta.is_torch_bf16_gpu_available = lambda *a, **k: True
        try:
            (args,) = HfArgumentParser(TrainingArguments).parse_json_file(path)
        finally:
            ta.is_torch_bf16_gpu_available = probe
    world = int(recipe["data_parallel"])
    view.data_parallel = world
    view.micro_batch = args.per_device_train_batch_size
    view.grad_accum = args.gradient_accumulation_steps
    view.global_batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
    total = args.max_steps
    view.total_steps = total if total > 0 else None
    opt_cls, opt_kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
    p = torch.nn.Parameter(torch.zeros(1))
    opt_kwargs = {k: v for k, v in opt_kwargs.items() if k not in ("fused",)}
    opt = opt_cls([{"params": [p], "weight_decay": args.weight_decay}], **opt_kwargs)
    view.peak_lr = opt.defaults["lr"]
    view.beta1, view.beta2 = opt.defaults.get("betas", (None, None))
    view.eps = opt.defaults.get("eps")
    view.weight_decay = args.weight_decay
    view.grad_clip = args.max_grad_norm
    if total > 0:
        for k, step in lr_points(recipe).items():
            o = opt_cls([torch.nn.Parameter(torch.zeros(1))], **opt_kwargs)
            sch = get_scheduler(
                args.lr_scheduler_type, optimizer=o,
                num_warmup_steps=args.get_warmup_steps(total), num_training_steps=total,
                scheduler_specific_kwargs=args.lr_scheduler_kwargs,
            )  # fmt: skip
            # LambdaLR: the LR of optimizer step ``step`` is base × lr_lambda(step)
            setattr(view, k, float(sch.lr_lambdas[0](step) * sch.base_lrs[0]))
        kw = args.lr_scheduler_kwargs or {}
        if "min_lr" in kw:
            view.min_lr = float(kw["min_lr"])
        elif "min_lr_rate" in kw:
            view.min_lr = float(kw["min_lr_rate"]) * view.peak_lr
        elif "min_lr_ratio" in kw:  # warmup_stable_decay (get_wsd_schedule)
            view.min_lr = float(kw["min_lr_ratio"]) * view.peak_lr
        elif str(args.lr_scheduler_type).endswith("constant_with_warmup"):
            view.min_lr = view.peak_lr  # no decay
        elif str(args.lr_scheduler_type).endswith(("cosine", "linear")):
            view.min_lr = 0.0
    view.precision = "bf16" if args.bf16 else ("fp16" if args.fp16 else "fp32")
    # the model is the user's (standard parametrization unless its code says otherwise)
    view.parametrization = "sp"
    ds = args.deepspeed
    if ds:
        if isinstance(ds, dict):
            cfg = ds
        else:
            with open(ds, encoding="utf-8") as f:
                cfg = json.load(f)
        view.zero_stage = int((cfg.get("zero_optimization") or {}).get("stage", 0))
    elif getattr(args, "fsdp", None):
        view.notes.append(f"fsdp {args.fsdp!r}")
    else:
        # neither deepspeed nor fsdp: Trainer runs plain DDP through accelerate (trainer.py,
        # DistributedDataParallelKwargs): every rank holds the full optimizer state, ZeRO stage 0
        view.zero_stage = 0
    return view

"""nanoGPT: the ``nanogpt`` export exec'd as ``python train.py config/FILE.py`` would exec it.

nanoGPT is not on PyPI and is a script, not a package: there is no loader to import. Its
configurator (``configurator.py``) runs ``exec(open(config_file).read())`` in ``train.py``'s
globals, after ``train.py`` set its defaults; unknown names in a config file are NOT rejected
(only ``--key=value`` arguments are checked), they are silently unused. This module does the same
exec over a table of ``train.py``'s config globals (:data:`DEFAULTS`) written from
karpathy/nanoGPT at :data:`COMMIT`, then re-states ``train.py``'s ``get_lr`` and batch arithmetic.
That is a table check, not a load: named as such in docs/EXPORTS.md.
"""

from __future__ import annotations

import math
import types
from typing import Any

from common import View, lr_points

REPO = "karpathy/nanoGPT"
COMMIT = (
    "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"  # 2025-11-12, master (train.py last changed 93a43d9)
)

#: train.py's config globals (the names ``config_keys`` collects: int/float/bool/str globals
#: defined before ``exec(open('configurator.py').read())``), with their defaults at COMMIT.
#: ``dtype``'s default depends on the GPU ('bfloat16' where bf16 is supported, else 'float16').
DEFAULTS: dict[str, Any] = {
    "out_dir": "out", "eval_interval": 2000, "log_interval": 1, "eval_iters": 200,
    "eval_only": False, "always_save_checkpoint": True, "init_from": "scratch",
    "wandb_log": False, "wandb_project": "owt", "wandb_run_name": "gpt2",
    "dataset": "openwebtext", "gradient_accumulation_steps": 5 * 8, "batch_size": 12,
    "block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "dropout": 0.0,
    "bias": False, "learning_rate": 6e-4, "max_iters": 600000, "weight_decay": 1e-1,
    "beta1": 0.9, "beta2": 0.95, "grad_clip": 1.0, "decay_lr": True, "warmup_iters": 2000,
    "lr_decay_iters": 600000, "min_lr": 6e-5, "backend": "nccl", "device": "cuda",
    "dtype": "bfloat16", "compile": True,
}  # fmt: skip

#: what train.py/model.py fix and a config file cannot change
FIXED = {
    "adam_eps": 1e-8,  # torch.optim.AdamW default (model.configure_optimizers passes no eps)
    "init_std": 0.02,  # model._init_weights; c_proj.weight 0.02/sqrt(2·n_layer)
    "vocab": 50304,  # from data/<dataset>/meta.pkl when present, else GPT-2's 50257 padded to 50304
}


def get_lr(c: dict[str, Any], it: int) -> float:
    """train.py ``get_lr`` at COMMIT (warmup ``(it + 1) / (warmup_iters + 1)`` since dc81cb3)."""
    if not c["decay_lr"]:
        return c["learning_rate"]
    if it < c["warmup_iters"]:
        return c["learning_rate"] * (it + 1) / (c["warmup_iters"] + 1)
    if it > c["lr_decay_iters"]:
        return c["min_lr"]
    decay_ratio = (it - c["warmup_iters"]) / (c["lr_decay_iters"] - c["warmup_iters"])
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return c["min_lr"] + coeff * (c["learning_rate"] - c["min_lr"])


def execute(text: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """(config after the exec, names the file sets that train.py never reads, type changes)."""
    g: dict[str, Any] = dict(DEFAULTS)
    exec(compile(text, "<nanogpt config>", "exec"), g)
    unknown = sorted(
        k for k in g
        if k not in DEFAULTS and not k.startswith("_") and not isinstance(g[k], types.ModuleType)
    )  # fmt: skip
    retyped = sorted(
        f"{k}: {type(DEFAULTS[k]).__name__} -> {type(g[k]).__name__}"
        for k in DEFAULTS
        if type(g[k]) is not type(DEFAULTS[k])
        and not (isinstance(DEFAULTS[k], float) and isinstance(g[k], int))
    )
    return {k: g[k] for k in DEFAULTS}, unknown, retyped


def load(text: str, recipe: dict[str, Any]) -> View:
    view = View(
        framework=f"nanoGPT {COMMIT[:7]}",
        loader="exec over train.py's config table (table-checked, not loaded)",
    )
    c, unknown, retyped = execute(text)
    if unknown:
        raise ValueError(f"names nanoGPT's train.py never reads (silently ignored): {unknown}")
    if retyped:
        raise ValueError(f"values of another type than train.py's default: {retyped}")
    world = int(recipe["data_parallel"])
    gas = c["gradient_accumulation_steps"]
    if gas % world:
        raise ValueError(
            f"train.py asserts gradient_accumulation_steps % world_size == 0 ({gas} % {world})"
        )
    view.data_parallel = world
    view.micro_batch = c["batch_size"]
    view.grad_accum = gas // world
    view.global_batch = c["batch_size"] * gas  # tokens_per_iter / block_size
    view.seq_len = c["block_size"]
    view.total_steps = c["max_iters"] + 1  # (train.py's loop runs iterations 0..max_iters)
    view.peak_lr = c["learning_rate"]
    view.min_lr = c["min_lr"] if c["decay_lr"] else c["learning_rate"]
    for k, step in lr_points(recipe).items():
        setattr(view, k, get_lr(c, step))
    view.beta1, view.beta2 = c["beta1"], c["beta2"]
    view.eps = FIXED["adam_eps"]
    view.weight_decay = c["weight_decay"]
    view.grad_clip = c["grad_clip"]
    view.precision = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}.get(
        c["dtype"], c["dtype"]
    )
    view.n_layer, view.width, view.heads = c["n_layer"], c["n_embd"], c["n_head"]
    view.vocab = FIXED["vocab"]
    view.init_std = FIXED["init_std"]
    view.parametrization = "sp"
    view.zero_stage = 0  # train.py wraps the model in DDP: no sharding
    return view

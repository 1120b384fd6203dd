"""torchtitan 0.2.x and 0.3.x: the ``torchtitan`` export read by ``torchtitan.config.ConfigManager``.

- 0.2.x (0.2.2 checked): a job TOML, ``ConfigManager().parse_args(["--job.config_file", F])``
  (``JobConfig`` dataclasses; an unknown key in a table is a ValueError).
- 0.3.x (0.3.0 checked): no job TOML. ``ConfigManager().parse_args(["--module", M, "--config",
  F, *overrides])`` calls the config function ``F`` of module ``M`` (a ``config_registry`` of
  torchtitan, or any importable module) and applies tyro CLI overrides
  (``--optimizer.param_groups.0.optimizer_kwargs.lr`` ...). The check accepts either form of
  export: an argument file (``#`` comments, then the argv, which must name ``--module`` and
  ``--config``), or a Python module defining the config function (imported from a temporary
  folder put on ``sys.path``; the function named by a ``--config NAME`` in its comments, or its
  only public top-level function). A TOML handed to 0.3 is passed as ``--job.config_file`` to
  show 0.3's own error.

The numbers come from torchtitan's own code: the LR from the ``LambdaLR`` that
``lr_scheduler.build(optimizers=..., training_steps=training.steps)`` returns (0.2:
``torchtitan.components.lr_scheduler.build_lr_schedulers``), the optimizer kwargs as the config
holds them; the gradient accumulation re-stated from ``Trainer.__init__`` (trainer.py: global
batch = training.global_batch_size, or local × data-parallel degree when < 0; accumulation =
global // (local × dp), asserted exact), which needs a distributed world to run.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import sys
import tempfile
import uuid
from typing import Any

from common import View, lr_points


def _version() -> tuple[int, int]:
    from importlib.metadata import version

    a, b = version("torchtitan").split(".")[:2]
    return int(a), int(b)


def _is_python(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef) for n in tree.body)


def _is_toml(text: str) -> bool:
    import tomllib

    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    if not re.search(r"^\s*\[[A-Za-z_.]+\]\s*$", body, re.M):
        return False
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return True


def parse(text: str) -> Any:
    """The config torchtitan builds from the export ``text``."""
    from torchtitan.config import ConfigManager

    with tempfile.TemporaryDirectory() as d:
        if _is_toml(text):
            path = os.path.join(d, "job.toml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return ConfigManager().parse_args(["--job.config_file", path])
        if _is_python(text):
            mod = f"sweeper_torchtitan_{uuid.uuid4().hex[:8]}"
            with open(os.path.join(d, mod + ".py"), "w", encoding="utf-8") as f:
                f.write(text)
            m = re.search(r"--config[ =]([A-Za-z_][A-Za-z0-9_]*)", text)
            if m:
                fn = m.group(1)
            else:
                tree = ast.parse(text)
                fns = [
                    n.name
                    for n in tree.body
                    if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
                ]
                if len(fns) != 1:
                    raise ValueError(
                        f"config module defines {fns}: name the config function with --config NAME in a comment"
                    )
                fn = fns[0]
            sys.path.insert(0, d)
            try:
                return ConfigManager().parse_args(["--module", mod, "--config", fn])
            finally:
                sys.path.remove(d)
                sys.modules.pop(mod, None)
        argv = shlex.split(text, comments=True)
        return ConfigManager().parse_args(argv)


def _lr_lambda(cfg: Any, peak: float):
    import torch

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    if _version() >= (0, 3):
        sch = cfg.lr_scheduler.build(optimizers=[opt], training_steps=cfg.training.steps)
    else:
        from torchtitan.components.lr_scheduler import build_lr_schedulers

        sch = build_lr_schedulers([opt], cfg.lr_scheduler, cfg.training.steps)
    lam = next(iter(sch)).lr_lambdas[0]
    return lambda step: peak * lam(step)


def _model_dims(cfg: Any) -> dict[str, Any]:
    if _version() >= (0, 3):
        m = cfg.model_spec.model
        layers = getattr(m, "layers", None) or []
        heads = None
        if layers:
            att = getattr(layers[0], "attention", None)
            heads = getattr(att, "n_heads", None)
        return {"n_layer": len(layers) or None, "width": getattr(m, "dim", None), "heads": heads,
                "vocab": getattr(m, "vocab_size", None), "name": f"{cfg.model_spec.name}/{cfg.model_spec.flavor}"}  # fmt: skip
    import importlib

    mod = importlib.import_module(f"torchtitan.models.{cfg.model.name}")
    table = next(
        (
            v
            for k, v in vars(mod).items()
            if k.endswith("_args") and isinstance(v, dict) and cfg.model.flavor in v
        ),
        None,
    )
    if table is None:
        return {"name": f"{cfg.model.name}/{cfg.model.flavor}"}
    a = table[cfg.model.flavor]
    return {"n_layer": getattr(a, "n_layers", None), "width": getattr(a, "dim", None),
            "heads": getattr(a, "n_heads", None), "vocab": getattr(a, "vocab_size", None),
            "name": f"{cfg.model.name}/{cfg.model.flavor}"}  # fmt: skip


def load(text: str, recipe: dict[str, Any]) -> View:
    from importlib.metadata import version

    v = _version()
    loader = (
        "ConfigManager --module/--config (+ CLI overrides)"
        if v >= (0, 3)
        else "ConfigManager --job.config_file (TOML)"
    )
    view = View(framework=f"torchtitan {version('torchtitan')}", loader=loader)
    cfg = parse(text)
    if v >= (0, 3):
        groups = cfg.optimizer.param_groups
        if not groups:
            raise ValueError("optimizer.param_groups is empty")
        g = next((x for x in groups if x.pattern in (".*", r".*")), groups[-1])
        kw = dict(g.optimizer_kwargs)
        if len({x.optimizer_kwargs.get("lr") for x in groups}) > 1:
            view.notes.append(
                f"{len(groups)} param groups with different lr: {[(x.pattern, x.optimizer_kwargs.get('lr')) for x in groups]}"
            )
        view.peak_lr = kw.get("lr")
        betas = kw.get("betas")
        if betas is not None:
            view.beta1, view.beta2 = float(betas[0]), float(betas[1])
        view.eps, view.weight_decay = kw.get("eps"), kw.get("weight_decay")
        view.notes.append(f"optimizer {g.optimizer_name} (group {g.pattern!r})")
    else:
        o = cfg.optimizer
        view.peak_lr, view.beta1, view.beta2 = o.lr, o.beta1, o.beta2
        view.eps, view.weight_decay = o.eps, o.weight_decay
    t = cfg.training
    dp = int(recipe["data_parallel"])
    view.data_parallel = dp
    view.micro_batch = t.local_batch_size
    gbs = t.global_batch_size if t.global_batch_size >= 0 else t.local_batch_size * dp
    if gbs % (t.local_batch_size * dp):
        raise ValueError(
            f"global batch size {gbs} is not divisible by local batch size × data-parallel degree ({t.local_batch_size} × {dp})"
        )
    view.global_batch = gbs
    view.grad_accum = gbs // (t.local_batch_size * dp)
    view.seq_len = t.seq_len
    view.grad_clip = t.max_norm
    ls = cfg.lr_scheduler
    view.total_steps = ls.total_steps if ls.total_steps is not None else t.steps
    if view.peak_lr is not None:
        lr = _lr_lambda(cfg, view.peak_lr)
        for k, step in lr_points(recipe).items():
            setattr(view, k, lr(step))
        view.min_lr = view.peak_lr * ls.min_lr_factor
        if ls.decay_type != "cosine":
            view.notes.append(f"decay_type {ls.decay_type}")
    # precision: full bf16 (training.dtype) vs mixed (mixed_precision_param, fp32 master weights)
    if t.dtype == "bfloat16":
        view.precision = "bf16-true"
    else:
        view.precision = "bf16" if t.mixed_precision_param == "bfloat16" else "fp32"
    # parallelism.data_parallel_shard_degree (config/configs.py at 0.3.0, job_config.py at 0.2.2;
    # default -1: every data-parallel rank): FSDP2 shards parameters, gradients and optimizer
    # state (ZeRO-3-like); 1 with replicate > 1 is plain DDP
    shard = cfg.parallelism.data_parallel_shard_degree
    view.zero_stage = 0 if shard == 1 or dp == 1 else 3
    dims = _model_dims(cfg)
    view.notes.append(f"model {dims.pop('name')}")
    for k, val in dims.items():
        setattr(view, k, val)
    view.parametrization = "sp"
    return view

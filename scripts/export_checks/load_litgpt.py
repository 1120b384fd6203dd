"""litgpt 0.5.13: the ``litgpt`` export read by ``litgpt pretrain --config FILE``.

The loader is litgpt's own CLI (``litgpt.__main__.main``: jsonargparse ``CLI(PARSER_DATA)``) with
the ``pretrain`` entry swapped for a function of the same signature that records the arguments
instead of training. The numbers then come from litgpt's own code: ``TrainArgs.batch_size`` /
``gradient_accumulation_iters`` / ``warmup_iters`` (litgpt/args.py), ``get_lr`` and the
``max_iters`` arithmetic of ``fit`` (litgpt/pretrain.py), ``instantiate_torch_optimizer``
(litgpt/utils.py), the precision default of ``setup`` (``get_default_supported_precision``) and
the init of ``initialize_weights`` (sqrt(2/(5·n_embd)), not configurable), and the block from
the ``Config`` the CLI built (``parallel_residual``; ``bias``, ``attn_bias``, ``lm_head_bias``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import sys
import tempfile
from typing import Any

from common import View, lr_points


def parse(path: str) -> dict[str, Any]:
    """The arguments ``litgpt pretrain --config path`` would call ``litgpt.pretrain.setup`` with."""
    import litgpt.__main__ as cli
    from litgpt.pretrain import setup

    captured: dict[str, Any] = {}

    @functools.wraps(setup)
    def record(*args: Any, **kwargs: Any) -> None:
        import inspect

        bound = inspect.signature(setup).bind(*args, **kwargs)
        bound.apply_defaults()
        captured.update(bound.arguments)

    old_entry, old_argv = cli.PARSER_DATA["pretrain"], sys.argv
    cli.PARSER_DATA["pretrain"] = record
    sys.argv = ["litgpt", "pretrain", "--config", path]
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as e:  # jsonargparse exits on a bad config, its reason on stderr
        why = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
        raise ValueError(
            f"`litgpt pretrain --config` exit {e.code}: {why[-1] if why else err.getvalue()[-300:]}"
        ) from None
    finally:
        cli.PARSER_DATA["pretrain"] = old_entry
        sys.argv = old_argv
    return captured


def load(text: str, recipe: dict[str, Any]) -> View:
    from importlib.metadata import version

    import torch
    from litgpt.config import Config
    from litgpt.pretrain import get_lr
    from litgpt.utils import get_default_supported_precision, instantiate_torch_optimizer

    view = View(
        framework=f"litgpt {version('litgpt')}",
        loader="litgpt CLI (jsonargparse) pretrain --config",
    )
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pretrain.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        a = parse(path)
    train = a["train"]
    devices = a["devices"]
    devices = int(devices) if not isinstance(devices, str) or devices.isdigit() else devices
    if not isinstance(devices, int):
        raise ValueError(f"devices={devices!r}: the check needs a number")
    nodes = int(a["num_nodes"])
    world = devices * nodes
    view.data_parallel = world
    view.micro_batch = train.micro_batch_size
    view.grad_accum = train.gradient_accumulation_iters(devices, nodes)
    view.global_batch = train.batch_size(devices, nodes) * world
    # model: model_config wins over model_name (setup); litgpt's model length is
    # train.max_seq_length when set, else the config's block_size
    cfg = a["model_config"]
    if cfg is None and a.get("model_name"):
        try:
            cfg = Config.from_name(a["model_name"])
        except ValueError:
            cfg = None
    if cfg is not None:
        view.n_layer, view.width, view.heads = cfg.n_layer, cfg.n_embd, cfg.n_head
        view.vocab = cfg.vocab_size
        block = cfg.block_size
        # pretrain.initialize_weights: Embedding/Linear std sqrt(2/5/n_embd), fixed
        view.init_std = math.sqrt(2.0 / 5 / cfg.n_embd)
        # the block GPT builds from the config (litgpt/model.py Block.forward, the linears of
        # CausalSelfAttention, the MLPs and lm_head)
        view.parallel_residual = bool(cfg.parallel_residual)
        view.linear_bias = bool(cfg.bias or cfg.attn_bias or cfg.lm_head_bias)
    else:
        block = None
        view.notes.append("no model_name/model_config: `litgpt pretrain` stops without a model")
    seq = train.max_seq_length or block
    view.seq_len = seq
    # fit(): micro-iterations per device, then the warmup in micro-iterations
    if seq and train.max_tokens:
        max_iters = (train.max_tokens // world) // (train.micro_batch_size * seq)
        view.total_steps = max_iters // view.grad_accum
        warmup_iters = train.warmup_iters(devices, nodes, max_iters, None)
        opt = instantiate_torch_optimizer(a["optimizer"], [torch.nn.Parameter(torch.zeros(1))])
        peak = opt.defaults["lr"]
        view.peak_lr = peak
        for k, step in lr_points(recipe).items():
            setattr(
                view, k, get_lr(peak, step * view.grad_accum, warmup_iters, max_iters, train.min_lr)
            )
        view.beta1, view.beta2 = opt.defaults["betas"]
        view.eps = opt.defaults["eps"]
        view.weight_decay = opt.defaults["weight_decay"]
    view.min_lr = train.min_lr
    view.grad_clip = train.max_norm
    prec = a["precision"] or get_default_supported_precision(training=True)
    view.notes.append(
        f"precision {prec}" + ("" if a["precision"] else " (litgpt's default: the file sets none)")
    )
    view.precision = {"bf16-mixed": "bf16", "32-true": "fp32"}.get(prec, prec)
    view.parametrization = "sp"
    # pretrain.setup: FSDPStrategy(sharding_strategy="HYBRID_SHARD") when devices × num_nodes > 1
    # (parameters, gradients and optimizer state sharded within a node: ZeRO-3-like), else none
    view.zero_stage = 3 if world > 1 else 0
    return view

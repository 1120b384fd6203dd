"""Megatron-LM: the ``megatron`` export read as Megatron-LM would read it, per version.

Megatron-LM's own argument parser (``megatron/training/arguments.py``) is not on PyPI, and from
core 0.17 on Megatron-LM needs Python >= 3.12 (``typing.override``), so neither can be loaded
here. What is loaded and what is written from the source:

- argv: ``shlex.split(text, comments=True)``, parsed by an ``argparse`` parser built from
  ``megatron_flags.json`` (every flag name of the commit, and the action/nargs/type/choices of
  the flags a recipe uses, read off the parser that ``parse_args()`` builds at that commit); an
  unknown flag is an error as in Megatron (``parse_args`` does not ignore unknown arguments);
- validation: the rules of ``validate_args`` that concern these flags (:func:`validate`), each
  with the line it was read from;
- batch: < 0.18, megatron-core's own ``num_microbatches_calculator`` (megatron-core 0.16.1 from
  PyPI; the file is unchanged from core_v0.16.1 to core_v0.17.1), ramp-up included; >= 0.18, the
  step batch-size schedule re-stated from ``megatron/core/num_microbatches_calculator.py`` at the
  pinned commit (:class:`StepSchedule`): "table-checked, not loaded";
- the iterations of a sample-based run: ``update_train_iters`` of ``megatron/training/
  training.py`` re-stated per version over that calculator (:func:`train_iters`; < 0.18 the
  last partial batch is dropped, from 0.18 it is an iteration), and the iteration that ends the
  sample-based warmup (:func:`iteration_reaching`);
- LR: megatron-core's own ``OptimizerParamScheduler`` (0.16.1; ``get_lr`` is unchanged up to
  core_v0.19.0), built with the arguments of ``get_optimizer_param_scheduler`` in
  ``megatron/training/training.py`` (``wsd_decay_steps`` = ``--lr-wsd-decay-iters`` × the global
  batch, or ``--lr-wsd-decay-samples``; ``lr_wsd_decay_style``) and stepped by samples as
  ``train_step`` does.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import itertools
import json
import math
import shlex
from pathlib import Path
from typing import Any

from common import View, lr_points

FLAGS_FILE = Path(__file__).with_name("megatron_flags.json")
#: version -> the behaviour that changed, with the commit it was read at (megatron_flags.json)
TABLE = json.loads(FLAGS_FILE.read_text(encoding="utf-8"))
VERSIONS = tuple(TABLE["versions"])


def version_info(version: str) -> dict[str, Any]:
    return TABLE["versions"][version]


def _vt(version: str) -> tuple[int, int]:
    a, b = version.split(".")[:2]
    return int(a), int(b)


class MegatronArgsError(ValueError):
    """What Megatron-LM's parse_args/validate_args would stop on."""


def _type(name: str | None):
    return {"int": int, "float": float, "str": str}.get(name or "", str)


def build_parser(version: str) -> tuple[argparse.ArgumentParser, set[str]]:
    """An argparse parser with the detailed flags of ``version``, and the set of all its flag
    names (a flag in the set but not detailed is reported, not guessed)."""
    info = version_info(version)
    p = argparse.ArgumentParser(
        prog=f"pretrain_gpt.py (Megatron-LM {info['tag']})", add_help=False, exit_on_error=False
    )
    for flag, d in info["flags"].items():
        act = d["action"]
        if act == "StoreTrue":
            p.add_argument(flag, dest=d["dest"], action="store_true")
        elif act == "StoreFalse":
            p.add_argument(flag, dest=d["dest"], action="store_false")
        else:
            kw: dict[str, Any] = {"dest": d["dest"], "type": _type(d["type"])}
            if d["nargs"] is not None:
                kw["nargs"] = d["nargs"]
            if d["choices"]:
                kw["choices"] = d["choices"]
            p.add_argument(flag, **kw)
    return p, set(info["all_flags"].split())


def parse(text: str, version: str, world_size: int) -> argparse.Namespace:
    """The namespace Megatron-LM ``version`` would parse from the export ``text`` (plus
    ``--data-parallel``-free defaults: data-parallel size = ``world_size`` with TP = PP = CP = 1)."""
    argv = shlex.split(text, comments=True)
    parser, known = build_parser(version)
    detailed = {a for act in parser._actions for a in act.option_strings}
    for tok in argv:
        if tok.startswith("--"):
            flag = tok.split("=", 1)[0]
            if flag not in known:
                raise MegatronArgsError(
                    f"Megatron-LM {version_info(version)['tag']} has no flag {flag} "
                    f"(parse_args: unrecognized arguments)"
                )
            if flag not in detailed:
                raise MegatronArgsError(
                    f"{flag} exists in Megatron-LM {version} but is not in the check's table "
                    f"(scripts/export_checks/megatron_flags.json): add its action/nargs"
                )
    try:
        ns, rest = parser.parse_known_args(argv)
    except argparse.ArgumentError as e:
        raise MegatronArgsError(f"argparse: {e}") from None
    if rest:
        raise MegatronArgsError(f"unparsed arguments {rest}")
    # defaults the check needs that the table's parser does not set
    for d in version_info(version)["flags"].values():
        if getattr(ns, d["dest"], None) is None and d["default"] not in (None, "None"):
            with contextlib.suppress(ValueError, SyntaxError):  # not a literal: leave it None
                setattr(ns, d["dest"], ast.literal_eval(d["default"]))
    tp = getattr(ns, "tensor_model_parallel_size", 1) or 1
    pp = getattr(ns, "pipeline_model_parallel_size", 1) or 1
    cp = getattr(ns, "context_parallel_size", 1) or 1
    ns.world_size = world_size * tp * pp * cp
    ns.data_parallel_size = world_size
    ns._argv = argv
    return ns


def validate(ns: argparse.Namespace, version: str) -> list[str]:
    """The checks of ``validate_args`` (megatron/training/arguments.py at the pinned commit) that
    concern a recipe's flags. Raises MegatronArgsError where Megatron raises or asserts; returns
    the warnings Megatron prints or logs."""
    v = _vt(version)
    warns: list[str] = []
    for req in ("num_layers", "hidden_size", "num_attention_heads", "max_position_embeddings"):
        if getattr(ns, req, None) is None:
            raise MegatronArgsError(
                f"--{req.replace('_', '-')} is required (validate_args: _check_arg_is_not_none)"
            )
    if ns.micro_batch_size is None:
        raise MegatronArgsError(
            "--micro-batch-size is required (validate_args: assert args.micro_batch_size is not None)"
        )
    step_schedule = getattr(ns, "step_batch_size_schedule", None)
    if v >= (0, 18) and step_schedule is not None and ns.global_batch_size is not None:
        # core_v0.18.0+ arguments.py: "Cannot specify both --step-batch-size-schedule and --global-batch-size"
        raise MegatronArgsError(
            "Cannot specify both --step-batch-size-schedule and --global-batch-size"
        )
    if ns.global_batch_size is None:
        ns.global_batch_size = ns.micro_batch_size * ns.data_parallel_size
    if ns.train_iters:
        if ns.train_samples is not None:
            raise MegatronArgsError("expected iteration-based training")
        if ns.lr_decay_samples is not None:
            raise MegatronArgsError("expected iteration-based learning rate decay")
        if ns.lr_warmup_samples:
            raise MegatronArgsError("expected iteration-based learning rate warmup")
        if v < (0, 18) and ns.rampup_batch_size is not None:
            # core_v0.16.1/core_v0.17.1 arguments.py; removed in core_v0.18.0
            raise MegatronArgsError("expected no batch-size rampup for iteration-based training")
    if ns.train_samples:
        if ns.train_iters is not None:
            raise MegatronArgsError("expected sample-based training")
        if ns.lr_decay_iters is not None:
            raise MegatronArgsError("expected sample-based learning rate decay")
        if ns.lr_warmup_iters:
            raise MegatronArgsError("expected sample-based learnig rate warmup")
    if not ns.train_iters and not ns.train_samples:
        raise MegatronArgsError("either train-iters or train-samples should be provided")
    if ns.lr is None:
        raise MegatronArgsError("--lr is required by get_optimizer_param_scheduler (max_lr)")
    if v >= (0, 18) and ns.rampup_batch_size is not None:
        # core_v0.18.0+ num_microbatches_calculator.init_num_microbatches_calculator: logged, then
        # ignored (the calculator is Constant unless --step-batch-size-schedule is given)
        warns.append(
            "--rampup-batch-size ignored (only a rank-0 logger.warning: 'rampup_batch_size is "
            "deprecated … Use step_batch_size_schedule instead.')"
        )
    if ns.fp16 and ns.bf16:
        raise MegatronArgsError("cannot specify both fp16 and bf16")
    return warns


class StepSchedule:
    """The ``--step-batch-size-schedule`` semantics of Megatron-LM >= core 0.18, re-stated from
    ``megatron/core/num_microbatches_calculator.py`` (StepBatchsizeNumMicroBatchesCalculator) at
    the pinned commit: entries ``THRESHOLD:BS`` separated by spaces or commas; K/M/B/T suffixes
    (1e3..1e12, ``int(float(x) * mult)``); with a sequence length (Megatron-LM always passes
    ``args.seq_length``) thresholds are TOKENS, converted to samples by ``threshold //
    seq_length``; sorted; the first threshold must be 0 and thresholds strictly increasing; the
    batch at ``consumed_samples`` is that of the last entry whose threshold is <= it."""

    def __init__(self, text: str, seq_length: int | None, micro_batch: int, dp: int) -> None:
        entries = []
        for entry in text.strip().replace(",", " ").split():
            if ":" not in entry:
                raise MegatronArgsError(
                    f'Invalid schedule entry "{entry}". Expected format: "THRESHOLD:BATCH_SIZE"'
                )
            t, b = entry.split(":", 1)
            th, bs = self._num(t), self._num(b)
            if seq_length is not None:
                th //= seq_length
            entries.append((th, bs))
        entries.sort(key=lambda e: e[0])
        if not entries:
            raise MegatronArgsError("schedule must have at least one entry")
        if entries[0][0] != 0:
            raise MegatronArgsError(
                f"first schedule entry must have threshold 0, got {entries[0][0]}"
            )
        for a, b in itertools.pairwise(entries):
            if not b[0] > a[0]:
                raise MegatronArgsError("schedule thresholds must be strictly increasing")
        if any(bs <= 0 for _, bs in entries):
            raise MegatronArgsError("batch size must be positive")
        self.entries = entries
        self.unit = micro_batch * dp

    @staticmethod
    def _num(s: str) -> int:
        s = s.strip().upper()
        mult = 1
        for suf, m in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
            if s.endswith(suf):
                s, mult = s[:-1], m
                break
        return int(float(s) * mult)

    def batch(self, consumed_samples: int, consistency_check: bool = True) -> int:
        bs = self.entries[0][1]
        for th, b in self.entries:
            if consumed_samples >= th:
                bs = b
            else:
                break
        if consistency_check and bs % self.unit:
            raise MegatronArgsError(
                f"current global batch size ({bs}) is not divisible by micro_batch_size * data_parallel_size ({self.unit})"
            )
        return bs

    @property
    def final(self) -> int:
        return self.entries[-1][1]


def _calculator(ns: argparse.Namespace, version: str):
    """(batch_at(consumed_samples, consistency_check=True) -> global batch, num_microbatches_at,
    full batch, loader name)."""
    if _vt(version) >= (0, 18):
        sched = getattr(ns, "step_batch_size_schedule", None)
        if sched is None:
            g = ns.global_batch_size
            unit = ns.micro_batch_size * ns.data_parallel_size
            if g % unit:
                raise MegatronArgsError(
                    f"global batch size ({g}) is not divisible by micro batch size ({ns.micro_batch_size}) times data parallel size ({ns.data_parallel_size})"
                )
            return (
                (lambda s, check=True: g),
                (lambda s: g // unit),
                g,
                "table: ConstantNumMicroBatchesCalculator",
            )
        st = StepSchedule(sched, ns.seq_length, ns.micro_batch_size, ns.data_parallel_size)
        unit = ns.micro_batch_size * ns.data_parallel_size
        return (
            st.batch,
            (lambda s: st.batch(s) // unit),
            st.final,
            "table: StepBatchsizeNumMicroBatchesCalculator",
        )
    from megatron.core import num_microbatches_calculator as nmc  # megatron-core 0.16.1

    calc = nmc._build_num_microbatches_calculator(
        0, ns.rampup_batch_size, ns.global_batch_size, ns.micro_batch_size,
        ns.data_parallel_size, ns.decrease_batch_size_if_needed,
    )  # fmt: skip

    def at(s: int, check: bool = True) -> int:
        calc.update(s, consistency_check=check)
        return calc.get_current_global_batch_size()

    def micro(s: int) -> int:
        calc.update(s, consistency_check=True)
        return calc.get()

    from importlib.metadata import version as _version

    return (
        at,
        micro,
        ns.global_batch_size,
        f"megatron-core {_version('megatron-core')} {type(calc).__name__}",
    )


def train_iters(ns: argparse.Namespace, version: str, batch_at: Any) -> int:
    """``args.train_iters`` as ``update_train_iters`` (megatron/training/training.py) sets it at
    ``version``, with ``batch_at(consumed, check)`` the version's batch calculator
    (``update_num_microbatches(consumed, consistency_check=False)``). < 0.18 (core_v0.16.1 lines
    1128-1158, the same at core_v0.17.1): iterations while at most the ramp's samples (the third
    value of --rampup-batch-size) are consumed, then whole full batches of the rest, the partial
    last one thrown away; from 0.18 (core_v0.18.2 lines 1485-1506, core_v0.19.0 lines 1528-1549)
    with --step-batch-size-schedule: ``while consumed_samples < args.train_samples``, the last
    partial batch an iteration. Without a ramp-up: train_samples // global_batch_size."""
    if ns.train_iters:
        return int(ns.train_iters)
    if _vt(version) >= (0, 18):
        if getattr(ns, "step_batch_size_schedule", None) is None:
            return ns.train_samples // ns.global_batch_size
        return iteration_reaching(ns.train_samples, batch_at, ns)
    if ns.rampup_batch_size is None:
        return ns.train_samples // ns.global_batch_size
    consumed, iterations = 0, 0
    while consumed <= int(ns.rampup_batch_size[2]) and consumed <= ns.train_samples:
        consumed += batch_at(consumed, False)
        iterations += 1
    if ns.train_samples > consumed:
        iterations += (ns.train_samples - consumed) // ns.global_batch_size
    return iterations


def iteration_reaching(samples: int, batch_at: Any, ns: argparse.Namespace) -> int:
    """The iterations until ``samples`` are consumed, one batch of ``batch_at(consumed)`` each:
    the >= 0.18 loop of update_train_iters, and the 0-based iteration at which a sample-based
    warmup of ``samples`` has ended (train_step steps the scheduler by the batch after each
    iteration). Past the last step-schedule threshold, or past --rampup-batch-size's samples, the
    batch is the full one: the rest are counted at once, as the loop would."""
    sched = getattr(ns, "step_batch_size_schedule", None)
    if sched is not None:
        last = StepSchedule(sched, ns.seq_length, ns.micro_batch_size, ns.data_parallel_size)
        constant_from = last.entries[-1][0]
    elif ns.rampup_batch_size is not None:
        constant_from = int(ns.rampup_batch_size[2]) + 1
    else:
        constant_from = 0
    consumed, iterations = 0, 0
    while consumed < samples and consumed < constant_from:
        consumed += batch_at(consumed, False)
        iterations += 1
    if consumed < samples:
        full = batch_at(consumed, False)
        iterations += -(-(samples - consumed) // full)
    return iterations


def _scheduler_lr(
    ns: argparse.Namespace, sample_positions: dict[str, int], full_batch: int
) -> dict[str, float]:
    """LR at each consumed-samples position, from megatron-core's OptimizerParamScheduler built as
    get_optimizer_param_scheduler (megatron/training/training.py) builds it."""
    import torch
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    if ns.train_iters:
        decay_iters = ns.lr_decay_iters if ns.lr_decay_iters is not None else ns.train_iters
        lr_decay_steps = decay_iters * ns.global_batch_size
        wd_incr_steps = ns.train_iters * ns.global_batch_size
        wsd_decay_steps = None
        if getattr(ns, "lr_wsd_decay_iters", None) is not None:
            wsd_decay_steps = ns.lr_wsd_decay_iters * ns.global_batch_size
        if ns.lr_warmup_fraction is not None:
            lr_warmup_steps = ns.lr_warmup_fraction * lr_decay_steps
        else:
            lr_warmup_steps = (ns.lr_warmup_iters or 0) * ns.global_batch_size
    else:
        decay_samples = ns.lr_decay_samples if ns.lr_decay_samples is not None else ns.train_samples
        lr_decay_steps = decay_samples
        wd_incr_steps = ns.train_samples
        wsd_decay_steps = getattr(ns, "lr_wsd_decay_samples", None)
        if ns.lr_warmup_fraction is not None:
            lr_warmup_steps = ns.lr_warmup_fraction * lr_decay_steps
        else:
            lr_warmup_steps = ns.lr_warmup_samples or 0
    out = {}
    for name, pos in sample_positions.items():
        opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=ns.lr)
        sch = OptimizerParamScheduler(
            opt, init_lr=ns.lr_warmup_init or 0.0, max_lr=ns.lr, min_lr=ns.min_lr,
            lr_warmup_steps=lr_warmup_steps, lr_decay_steps=lr_decay_steps,
            lr_decay_style=ns.lr_decay_style, start_wd=ns.weight_decay, end_wd=ns.weight_decay,
            wd_incr_steps=wd_incr_steps, wd_incr_style="constant",
            use_checkpoint_opt_param_scheduler=True, override_opt_param_scheduler=False,
            wsd_decay_steps=wsd_decay_steps, lr_wsd_decay_style=ns.lr_wsd_decay_style,
        )  # fmt: skip
        sch.step(increment=pos)
        out[name] = float(opt.param_groups[0]["lr"])
    return out


def load(text: str, recipe: dict[str, Any], version: str) -> View:
    """The framework's view of a ``megatron`` export for Megatron-LM ``version`` ("0.16".."0.19"),
    run on the recipe's data-parallel world size."""
    info = version_info(version)
    loaded = _vt(version) < (0, 18)
    view = View(
        framework=f"Megatron-LM {info['tag']} ({info['commit'][:10]})",
        loader=("flag table + megatron-core 0.16.1 calculator and scheduler" if loaded
                else "flag table + step-schedule table (table-checked, not loaded) + megatron-core 0.16.1 scheduler"),
    )  # fmt: skip
    dp = int(recipe["data_parallel"])
    ns = parse(text, version, dp)
    view.notes += validate(ns, version)
    at, _micro, full, calc_name = _calculator(ns, version)
    view.notes.append(f"batch calculator: {calc_name}")
    view.global_batch = full
    view.micro_batch = ns.micro_batch_size
    view.data_parallel = ns.data_parallel_size
    view.grad_accum = full // (ns.micro_batch_size * ns.data_parallel_size)
    if recipe.get("rampup"):
        ramp = int(recipe["rampup"]["ramp_samples"])
        view.rampup_batch_start = at(0)
        view.rampup_batch_mid = at(ramp // 2)
        view.rampup_batch_end = at(ramp + 1)
        if ns.train_samples:
            view.rampup_total_steps = train_iters(ns, version, at)
            view.rampup_warmup_steps = iteration_reaching(ns.lr_warmup_samples or 0, at, ns)
    view.seq_len = ns.seq_length
    # the run's length in full-batch steps (update_train_iters counts a few more iterations
    # when the batch ramps up)
    view.total_steps = ns.train_iters if ns.train_iters else math.ceil(ns.train_samples / full)
    g = int(recipe["global_batch_sequences"])
    pos = {k: s * g for k, s in lr_points(recipe).items()}
    lrs = _scheduler_lr(ns, pos, full)
    for k, lr in lrs.items():
        setattr(view, k, lr)
    view.peak_lr, view.min_lr = ns.lr, ns.min_lr
    if ns.lr_decay_style != "cosine":
        view.notes.append(f"lr decay style {ns.lr_decay_style}")
    view.beta1, view.beta2, view.eps = ns.adam_beta1, ns.adam_beta2, ns.adam_eps
    view.weight_decay, view.grad_clip = ns.weight_decay, ns.clip_grad
    view.precision = "bf16" if ns.bf16 else ("fp16" if ns.fp16 else "fp32")
    view.n_layer, view.width, view.heads = ns.num_layers, ns.hidden_size, ns.num_attention_heads
    view.vocab = getattr(ns, "vocab_size", None)
    view.init_std = ns.init_method_std
    # --disable-bias-linear (dest add_bias_linear); the block is sequential: megatron/core/
    # transformer has no parallel-residual option at these tags
    view.linear_bias = bool(ns.add_bias_linear)
    view.parallel_residual = False
    # ZeRO: --use-distributed-optimizer shards the optimizer state (stage 1); Megatron FSDP's
    # --data-parallel-sharding-strategy optim/optim_grads/optim_grads_params = stages 1/2/3
    stage = 1 if ns.use_distributed_optimizer else 0
    if getattr(ns, "use_megatron_fsdp", False):
        stage = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}[
            ns.data_parallel_sharding_strategy
        ]
    if getattr(ns, "use_torch_fsdp2", False):
        stage = 3
    view.zero_stage = stage
    if getattr(ns, "use_mup", False):
        view.parametrization = "mup"
        view.mup_base_width = (
            ns.mup_base_hidden_size if ns.mup_base_hidden_size is not None else ns.hidden_size
        )
    else:
        view.parametrization = "sp"
    return view

"""torchtitan, by version (``--framework-version`` 0.2 or 0.3; default 0.3, the current release).

- 0.3 (checked at 0.3.0) has no job TOML: ``ConfigManager().parse_args(["--module", M,
  "--config", F, *overrides])`` (torchtitan/config/manager.py; without ``--module``: "ValueError:
  --module is required"). The export is an argument file: ``--module llama3 --config <the
  nearest llama3 config function>`` and tyro overrides, one per line after the ``#`` header:
  ``--optimizer.param_groups.0.optimizer_kwargs.{lr,betas,eps,weight_decay}`` (the optimizer keys
  moved into param groups: components/optimizer/optimizer.py), ``--lr_scheduler.*`` and
  ``--training.*``.
- 0.2 (checked at 0.2.2): a job TOML for ``--job.config_file`` (config/job_config.py; unknown keys
  are refused) with ``[model] name/flavor`` (without it, the debug model trains silently),
  ``[optimizer]``, ``[lr_scheduler]`` and ``[training]``.

Both: ``lr_scheduler`` warmup_steps, decay_type, min_lr_factor (a ratio of the peak) and
decay_ratio, by the recipe's schedule (linear_warmup_stable_decay: 0.3.0
components/optimizer/lr_scheduler.py lines 90-192, 0.2.2 components/lr_scheduler.py lines
84-199, the same rule: warmup (step+1)/warmup_steps, decay_steps = round(steps · decay_ratio),
or every step after the warmup when decay_ratio is unset, then 1 → min_lr_factor): cosine and
linear decay_type cosine/linear with decay_ratio unset; WSD decay_type linear with decay_ratio =
decay_fraction; constant decay_type linear with min_lr_factor 1 (no decay): each as the proxies
ran it. ``training`` local_batch_size,
global_batch_size (sequences), seq_len, max_norm, steps, mixed_precision_param (bfloat16: mixed
with fp32 master weights; float32 for an fp32 recipe: the default is bfloat16). The model is a
named llama3 flavor (:data:`~sweeper.recipe.export.versions.TORCHTITAN_LLAMA3`), not the
recipe's shape; FSDP2 shards like ZeRO-3 by default.
"""

from __future__ import annotations

import math
from typing import Any

from sweeper.recipe.export import carry
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.header import comment, header_lines, num, toml_value
from sweeper.recipe.export.versions import TORCHTITAN_LLAMA3, FrameworkVersion, TorchtitanFlavor
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.scale import block_n_params

__all__ = ["flavor", "missing", "render"]


_DECAY_03 = (
    "the argument file has one param group (pattern .*): tyro overrides cannot add a second "
    "(--optimizer.param_groups.1.* is refused); a config function can put a ParamGroupConfig "
    "with pattern 'norm' and weight_decay 0 before the .* group"
)
_DECAY_02 = "torchtitan 0.2 builds one param group of every parameter ([optimizer] weight_decay)"


#: torchtitan 0.3.0's llama3 model_registry flavors without a config function of their own
#: (torchtitan/models/llama3/__init__.py), a start for the user's config function
_MORE_FLAVORS = (
    "torchtitan 0.3's model_registry also has flavors 1B: 16 layers × dim 2048 and 3B: "
    "28 × 3072, for config_registry functions to build on"
)


def flavor(r: Recipe) -> TorchtitanFlavor:
    """The llama3 flavor nearest to the recipe's model in non-embedding parameters (log scale)."""
    n = block_n_params(r.width, r.depth)
    return min(TORCHTITAN_LLAMA3, key=lambda f: abs(math.log(f.n_params / n)))


def _is_03(fv: FrameworkVersion | None) -> bool:
    return fv is None or fv.version != "0.2"


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    f = flavor(r)
    named = (
        f"--config {f.config}" if _is_03(fv) else f'[model] name = "llama3", flavor = "{f.flavor}"'
    )
    ratio = f.n_params / block_n_params(r.width, r.depth)
    where = (
        f"torchtitan builds named models only; this file names llama3 {f.flavor} ({named}: "
        f"{f.layers} layers × dim {f.dim}, {f.heads} heads, vocab {f.vocab}), the nearest "
        f"named config, whose N is {ratio:.2g}× the recipe's: the LR is the law's for the "
        "recipe's N, not this model's; write a config function for the recipe's shape"
        + (f" ({_MORE_FLAVORS})" if _is_03(fv) else "")
    )
    out = carry.optimizer(r, "torchtitan")
    out += carry.parametrization(r) + carry.output_mult(r)
    out += carry.rampup(r) + carry.z_loss(r)
    out += carry.init_std(r, "the model's (llama3: trunc_normal 0.02, depth-scaled outputs)")
    out += carry.model_shape(r, where)
    out += carry.vocab(r, f"llama3 {f.flavor}'s {f.vocab} (and the tokenizer's)")
    out += carry.weight_decay_groups(r, _DECAY_03 if _is_03(fv) else _DECAY_02)
    out += carry.zero_stage(
        r,
        3,
        "torchtitan shards parameters, gradients and optimizer state with FSDP2 "
        "(data_parallel_shard_degree -1) by default",
    )
    return out


def _common(r: Recipe) -> dict[str, dict[str, Any]]:
    return {
        "lr_scheduler": {
            "warmup_steps": r.warmup_steps,
            "decay_type": "cosine" if r.schedule == "cosine" else "linear",
            "min_lr_factor": r.min_lr_ratio,
            **({"decay_ratio": r.decay_fraction} if r.schedule == "wsd" else {}),
        },
        "training": {
            "local_batch_size": r.micro_batch_size,
            "global_batch_size": r.global_batch_sequences,
            "seq_len": r.seq_len,
            "max_norm": carry.clip_norm(r),
            "steps": r.total_steps,
            "mixed_precision_param": "bfloat16" if r.precision == "bf16" else "float32",
        },
    }


def _render_02(r: Recipe) -> str:
    f = flavor(r)
    tables: dict[str, dict[str, Any]] = {
        "model": {"name": "llama3", "flavor": f.flavor},
        "optimizer": {
            "name": "AdamW",
            "lr": r.lr.value,
            "beta1": r.adam_beta1,
            "beta2": r.adam_beta2,
            "eps": r.adam_eps,
            "weight_decay": r.weight_decay,
        },
        **_common(r),
    }
    out = []
    for name, table in tables.items():
        out.append(f"\n[{name}]\n")
        out += [f"{k} = {toml_value(v)}\n" for k, v in table.items()]
    return "".join(out)


def _render_03(r: Recipe) -> str:
    group = "--optimizer.param_groups.0.optimizer_kwargs"
    lines = [
        f"--module llama3 --config {flavor(r).config}",
        f"{group}.lr {num(r.lr.value)}",
        f"{group}.betas {num(r.adam_beta1)} {num(r.adam_beta2)}",
        f"{group}.eps {num(r.adam_eps)}",
        f"{group}.weight_decay {num(r.weight_decay)}",
    ]
    for table, values in _common(r).items():
        for k, v in values.items():
            lines.append(f"--{table}.{k} {num(v) if isinstance(v, float) else v}")
    return "".join(line + "\n" for line in lines)


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    notes = (
        [
            "one AdamW param group (pattern .*, torchtitan's default_adamw); the overrides keep "
            "the config function's other settings (dataset, checkpointing, parallelism)",
            "yours to supply: the data (the config function's --dataloader.dataset, c4 from the "
            "Hugging Face hub for the llama3 configs) and the tokenizer: --hf_assets_path (the "
            "config function's ./assets/hf/... folder, fetched with torchtitan's "
            "scripts/download_hf_assets.py)",
        ]
        if _is_03(fv)
        else [
            "the other job settings keep torchtitan's JobConfig defaults: set [training] dataset "
            "(default c4_test, a test set) and [model] hf_assets_path (default "
            "./tests/assets/tokenizer, a test tokenizer)"
        ]
    )
    notes += carry.no_clip_note(r, "--training.max_norm" if _is_03(fv) else "[training] max_norm")
    head = comment(header_lines(r, "torchtitan", miss, fv, notes))
    return head + (_render_03(r) if _is_03(fv) else _render_02(r))

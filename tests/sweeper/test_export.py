"""Each export format parsed back in its own format, its numbers equal to the recipe's."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys

import pytest
import yaml

from sweeper.errors import TargetError
from sweeper.export import FORMATS, export_recipe
from sweeper.laws import DEFAULT_CONVENTIONS, PowerLaw
from sweeper.published import published_laws
from sweeper.recommend import Hardware, Recipe, Target, recipe_from_dict, recommend

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture(scope="module")
def recipe() -> Recipe:
    """DeepSeek 7B on 64 GPUs: ramp-up on, gradient accumulation > 1, micro batch > 1."""
    target = Target(width=4096, depth=30, heads=32, vocab=102400, context=4096, tokens=2e12)
    hw = Hardware(gpus=64, micro_batch=2, gpu_memory_gb=80.0, zero_stage=1)
    r = recommend(published_laws("deepseek"), target, hw)
    assert r.rampup is not None and r.grad_accum_steps > 1
    return r


@pytest.fixture(scope="module")
def small() -> Recipe:
    """No ramp-up, fp32, 3 GPUs."""
    target = Target(width=768, depth=12, heads=12, context=1024, tokens=3e10)
    r = recommend(
        published_laws("steplaw"), target, Hardware(gpus=3, micro_batch=4, precision="fp32")
    )
    assert r.rampup is None
    return r


@pytest.fixture(scope="module")
def mup() -> Recipe:
    law = PowerLaw(
        target="lr",
        predictors=("tokens",),
        source="mup-sweep",
        method="test",
        parametrization="mup",
        base_width=256,
        domain={"tokens": (1e8, 1e10)},
        log_prefactor=math.log(0.5),
        exponents={"tokens": -0.1},
    )
    target = Target(width=2048, depth=16, heads=16, tokens=1e10, parametrization="mup")
    return recommend({"lr": law}, target, Hardware(gpus=2))


def test_litgpt(recipe: Recipe) -> None:
    text = export_recipe(recipe, "litgpt")
    doc = yaml.safe_load(text)
    train, opt = doc["train"], doc["optimizer"]
    assert train["global_batch_size"] == recipe.global_batch_sequences
    assert train["micro_batch_size"] == recipe.micro_batch_size
    # litgpt derives the accumulation as global / (micro × devices)
    assert train["global_batch_size"] // (train["micro_batch_size"] * doc["devices"]) == (
        recipe.grad_accum_steps
    )
    assert train["lr_warmup_steps"] == recipe.warmup_steps
    assert train["max_tokens"] == int(recipe.tokens)
    assert train["max_seq_length"] == recipe.seq_len
    assert train["min_lr"] == recipe.min_lr
    assert train["max_norm"] == recipe.grad_clip
    assert opt["class_path"] == "torch.optim.AdamW"
    assert opt["init_args"]["lr"] == recipe.lr.value
    assert opt["init_args"]["betas"] == [recipe.adam_beta1, recipe.adam_beta2]
    assert opt["init_args"]["weight_decay"] == recipe.weight_decay
    assert opt["init_args"]["eps"] == recipe.adam_eps


def test_hf(recipe: Recipe) -> None:
    doc = json.loads(export_recipe(recipe, "hf"))
    assert doc["learning_rate"] == recipe.lr.value
    world = recipe.data_parallel
    assert (
        doc["per_device_train_batch_size"] * doc["gradient_accumulation_steps"] * world
        == recipe.global_batch_sequences
    )
    assert isinstance(doc["warmup_steps"], int) and doc["warmup_steps"] == recipe.warmup_steps
    assert doc["warmup_steps"] >= 1  # an int >= 1 is steps, never a ratio
    assert doc["lr_scheduler_type"] == "cosine_with_min_lr"
    assert doc["lr_scheduler_kwargs"] == {"min_lr_rate": recipe.min_lr_ratio}
    assert doc["max_steps"] == recipe.total_steps
    assert (doc["adam_beta1"], doc["adam_beta2"], doc["adam_epsilon"]) == (
        recipe.adam_beta1,
        recipe.adam_beta2,
        recipe.adam_eps,
    )
    assert doc["weight_decay"] == recipe.weight_decay
    assert doc["max_grad_norm"] == recipe.grad_clip
    assert doc["bf16"] is True


@pytest.mark.parametrize("which", ["recipe", "small"])
def test_deepspeed(which: str, request: pytest.FixtureRequest) -> None:
    r: Recipe = request.getfixturevalue(which)
    doc = json.loads(export_recipe(r, "deepspeed"))
    # DeepSpeed's own identity: train_batch_size = micro × accumulation × data-parallel world
    assert doc["train_batch_size"] == (
        doc["train_micro_batch_size_per_gpu"] * doc["gradient_accumulation_steps"] * r.data_parallel
    )
    assert doc["train_batch_size"] == r.global_batch_sequences
    assert doc["gradient_clipping"] == r.grad_clip
    assert doc["optimizer"] == {
        "type": "AdamW",
        "params": {
            "lr": r.lr.value,
            "betas": [r.adam_beta1, r.adam_beta2],
            "eps": r.adam_eps,
            "weight_decay": r.weight_decay,
        },
    }
    sched = doc["scheduler"]
    assert sched["type"] == "WarmupCosineLR"  # keeps a min LR; WarmupDecayLR decays to 0
    assert sched["params"]["cos_min_ratio"] == r.min_lr_ratio
    assert sched["params"]["warmup_num_steps"] == r.warmup_steps
    assert sched["params"]["total_num_steps"] == r.total_steps
    assert sched["params"]["warmup_type"] == "linear"
    assert doc["zero_optimization"]["stage"] == r.hardware.zero_stage
    assert ("bf16" in doc) == (r.precision == "bf16")


def _megatron_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    for flag in (
        "--num-layers",
        "--hidden-size",
        "--num-attention-heads",
        "--seq-length",
        "--max-position-embeddings",
        "--micro-batch-size",
        "--global-batch-size",
        "--train-iters",
        "--train-samples",
        "--lr-warmup-iters",
        "--lr-warmup-samples",
        "--lr-decay-iters",
        "--lr-decay-samples",
        "--mup-base-hidden-size",
    ):
        p.add_argument(flag, type=int)
    for flag in (
        "--lr",
        "--min-lr",
        "--weight-decay",
        "--adam-beta1",
        "--adam-beta2",
        "--adam-eps",
        "--clip-grad",
        "--init-method-std",
    ):
        p.add_argument(flag, type=float)
    p.add_argument("--lr-decay-style")
    p.add_argument("--rampup-batch-size", nargs=3, type=int)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--use-mup", action="store_true")
    return p


def test_megatron_sample_based_with_rampup(recipe: Recipe) -> None:
    text = export_recipe(recipe, "megatron")
    a = _megatron_parser().parse_args(shlex.split(text, comments=True))
    assert (a.num_layers, a.hidden_size, a.num_attention_heads) == (30, 4096, 32)
    assert a.seq_length == recipe.seq_len
    assert a.micro_batch_size == recipe.micro_batch_size
    assert a.global_batch_size == recipe.global_batch_sequences
    ru = recipe.rampup
    assert ru is not None
    assert a.rampup_batch_size == [ru.start_sequences, ru.increment_sequences, ru.ramp_samples]
    # Megatron refuses a ramp-up with --train-iters: the export must be sample-based
    assert a.train_iters is None and a.lr_warmup_iters is None and a.lr_decay_iters is None
    assert a.train_samples == math.ceil(recipe.tokens / recipe.seq_len)
    assert a.lr_warmup_samples == recipe.warmup_steps * recipe.global_batch_sequences
    assert (a.lr, a.min_lr, a.lr_decay_style) == (recipe.lr.value, recipe.min_lr, "cosine")
    assert (a.adam_beta1, a.adam_beta2, a.adam_eps) == (
        recipe.adam_beta1,
        recipe.adam_beta2,
        recipe.adam_eps,
    )
    assert (a.weight_decay, a.clip_grad, a.init_method_std) == (
        recipe.weight_decay,
        recipe.grad_clip,
        recipe.init_std,
    )
    assert a.bf16 and not a.use_mup


def test_megatron_iteration_based(small: Recipe) -> None:
    a = _megatron_parser().parse_args(shlex.split(export_recipe(small, "megatron"), comments=True))
    assert a.train_iters == small.total_steps == a.lr_decay_iters
    assert a.lr_warmup_iters == small.warmup_steps
    assert a.train_samples is None and a.rampup_batch_size is None
    assert not a.bf16  # fp32


def test_megatron_mup_flags(mup: Recipe) -> None:
    a = _megatron_parser().parse_args(shlex.split(export_recipe(mup, "megatron"), comments=True))
    assert a.use_mup and a.mup_base_hidden_size == 256


def test_torchtitan(recipe: Recipe) -> None:
    doc = tomllib.loads(export_recipe(recipe, "torchtitan"))
    assert doc["optimizer"] == {
        "name": "AdamW",
        "lr": recipe.lr.value,
        "beta1": recipe.adam_beta1,
        "beta2": recipe.adam_beta2,
        "eps": recipe.adam_eps,
        "weight_decay": recipe.weight_decay,
    }
    assert doc["lr_scheduler"] == {
        "warmup_steps": recipe.warmup_steps,
        "decay_type": "cosine",
        "min_lr_factor": recipe.min_lr_ratio,
    }
    tr = doc["training"]
    assert tr["local_batch_size"] == recipe.micro_batch_size
    assert tr["global_batch_size"] == recipe.global_batch_sequences
    assert tr["seq_len"] == recipe.seq_len and tr["steps"] == recipe.total_steps
    assert tr["max_norm"] == recipe.grad_clip


@pytest.mark.parametrize("which", ["recipe", "small"])
def test_nanogpt(which: str, request: pytest.FixtureRequest) -> None:
    r: Recipe = request.getfixturevalue(which)
    cfg: dict = {}
    exec(export_recipe(r, "nanogpt"), {}, cfg)
    # nanoGPT's tokens per iteration: accumulation (total over DDP) × micro batch × block size
    tokens_per_iter = cfg["gradient_accumulation_steps"] * cfg["batch_size"] * cfg["block_size"]
    assert tokens_per_iter == r.batch_tokens.value
    assert cfg["gradient_accumulation_steps"] % r.data_parallel == 0  # train.py divides by world
    assert (cfg["n_layer"], cfg["n_head"], cfg["n_embd"]) == (r.depth, r.heads, r.width)
    assert (cfg["learning_rate"], cfg["min_lr"]) == (r.lr.value, r.min_lr)
    assert cfg["warmup_iters"] == r.warmup_steps
    assert cfg["lr_decay_iters"] == cfg["max_iters"] == r.total_steps
    assert (cfg["beta1"], cfg["beta2"], cfg["weight_decay"], cfg["grad_clip"]) == (
        r.adam_beta1,
        r.adam_beta2,
        r.weight_decay,
        r.grad_clip,
    )
    assert cfg["decay_lr"] is True
    assert cfg["dtype"] == ("bfloat16" if r.precision == "bf16" else "float32")


def test_json_round_trips(recipe: Recipe) -> None:
    assert recipe_from_dict(json.loads(export_recipe(recipe, "json"))) == recipe


@pytest.mark.parametrize("fmt", ["litgpt", "megatron", "torchtitan", "nanogpt"])
def test_header_carries_provenance_and_interval(recipe: Recipe, fmt: str) -> None:
    text = export_recipe(recipe, fmt)
    header = [ln for ln in text.splitlines() if ln.startswith("#")]
    joined = "\n".join(header)
    assert "source deepseek" in joined and "method published" in joined
    assert "interval [" in joined
    assert "extrapolation factor" in joined
    assert any("WARNING: very far extrapolation" in ln for ln in header)
    if fmt != "megatron":  # Megatron has the ramp-up flag and --init-method-std
        assert "batch ramp-up" in joined and "init std" in joined


def test_mup_noted_where_the_format_has_no_switch(mup: Recipe) -> None:
    assert "mup (base width 256)" in export_recipe(mup, "litgpt")
    assert "assumes a mup model implementation" in export_recipe(mup, "torchtitan")


def test_output_mult_noted_where_the_law_records_it(mup: Recipe) -> None:
    """A muP law measured with output_mult 4 at base width 256: every commented format says what
    the logits get at width 2048 (4·256/2048 = 0.5); the default (no record) says nothing."""
    assert "output (logit) multiplier" not in export_recipe(mup, "litgpt")
    law = PowerLaw(
        target="lr",
        predictors=("tokens",),
        source="mup-sweep",
        method="test",
        conventions={**DEFAULT_CONVENTIONS, "output_mult": "4.0"},
        parametrization="mup",
        base_width=256,
        domain={"tokens": (1e8, 1e10)},
        log_prefactor=math.log(0.5),
        exponents={"tokens": -0.1},
    )
    r = recommend({"lr": law}, mup.target, Hardware(gpus=2))
    assert r.lr.value == mup.lr.value  # the multiplier is a note, not a change of the recipe
    for fmt in ("litgpt", "megatron", "torchtitan", "nanogpt"):
        text = export_recipe(r, fmt)
        assert "output (logit) multiplier 4 at base width 256" in text, fmt
        assert "= 0.5·(h·W_lm) at width 2048" in text, fmt
    conv = json.loads(export_recipe(r, "json"))["provenance"]["lr"]["conventions"]
    assert conv["output_mult"] == "4.0"


def test_every_format_exports(small: Recipe) -> None:
    assert FORMATS == ("litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt", "json")
    for fmt in FORMATS:
        assert export_recipe(small, fmt).strip()


def test_unknown_format() -> None:
    target = Target(n_params=1e8, tokens=1e10)
    with pytest.raises(TargetError, match="unknown export format 'keras'"):
        export_recipe(recommend(published_laws("steplaw"), target), "keras")


def test_mup_init_std_is_the_proxies(mup: Recipe) -> None:
    """The muP law's conventions carry the proxies' init std (0.02 by default): Megatron gets it
    beside the base width, not sqrt(2/(5·256)) = 0.0395; the headers say what hidden matrices get."""
    assert mup.init_std == 0.02
    a = _megatron_parser().parse_args(shlex.split(export_recipe(mup, "megatron"), comments=True))
    assert a.init_method_std == 0.02 and a.mup_base_hidden_size == 256
    hidden = 0.02 * math.sqrt(256 / 2048)
    assert mup.hidden_init_std == pytest.approx(hidden)
    for fmt in ("megatron", "litgpt", "torchtitan", "nanogpt"):
        text = export_recipe(mup, fmt)
        assert "the proxies' init std at base width 256" in text, fmt
        assert f"{hidden:.4g}" in text, fmt
    assert json.loads(export_recipe(mup, "json"))["hidden_init_std"] == pytest.approx(hidden)


def test_header_names_token_units_and_conversion(mup: Recipe) -> None:
    header = export_recipe(mup, "litgpt")
    assert "tokens counted as bytes" in header  # the default conventions: byte-level data
    assert "lr measured as: peak AdamW LR, warmup 10% of steps, cosine to 10%" in header
    law = PowerLaw(
        target="lr",
        predictors=("tokens",),
        source="bytes-sweep",
        method="test",
        parametrization="sp",
        domain={"tokens": (1e8, 1e10), "held:tokens_per_param": (10.0, 40.0)},
        log_prefactor=math.log(0.5),
        exponents={"tokens": -0.1},
        conventions={"tokens": "bytes", "flops": "6ND", "held_fixed": "tokens_per_param 10-40"},
    )
    r = recommend({"lr": law}, Target(n_params=1e8, tokens=4e9), bytes_per_token=4.0)
    text = export_recipe(r, "torchtitan")
    assert "tokens counted as bytes (converted at 4 bytes per token)" in text
    assert "lr law held fixed: tokens_per_param 10-40" in text
    assert json.loads(export_recipe(r, "json"))["bytes_per_token"] == 4.0

"""Each export format parsed back in its own format, its numbers equal to the recipe's.

Megatron is parsed with the flag table read off Megatron-LM's own parsers
(scripts/export_checks/megatron_flags.json, per version) and checked with the validate_args rules
and step batch-size schedule of scripts/export_checks/load_megatron.py; nanoGPT is exec'd over the
table of train.py's globals (load_nanogpt.py). The real frameworks load the exports in
scripts/check_exports.sh (tests/exports/), outside this suite.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from proxy_models.config import ProxyConfig
from proxy_models.rules import sp_small_init_std
from sweeper.errors import TargetError
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw
from sweeper.recipe.export import FORMATS, cannot_carry, export_recipe, render
from sweeper.recipe.export.megatron import step_schedule
from sweeper.recipe.hardware import Hardware
from sweeper.recipe.published import published_laws
from sweeper.recipe.recipe import NO_INTERVAL, Interval, Recipe, recipe_from_dict
from sweeper.recipe.recommend import recommend
from sweeper.recipe.target import Target
from tests.sweeper.helpers import tokens_lr_law

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CHECKS_DIR = Path(__file__).resolve().parents[3] / "scripts" / "export_checks"
MEGATRON_VERSIONS = ("0.16", "0.17", "0.18", "0.19")


@pytest.fixture(scope="module")
def checks() -> Iterator[SimpleNamespace]:
    """The standard-library parts of the real-loader harness: Megatron's flag tables and
    validate_args rules, nanoGPT's train.py table."""
    sys.path.insert(0, str(CHECKS_DIR))
    try:
        import load_megatron
        import load_nanogpt

        yield SimpleNamespace(megatron=load_megatron, nanogpt=load_nanogpt)
    finally:
        sys.path.remove(str(CHECKS_DIR))


def mup_law(**conv: object) -> PowerLaw:
    return tokens_lr_law(0.5, "mup-sweep", parametrization="mup", base_width=256, **conv)


@pytest.fixture(scope="module")
def recipe() -> Recipe:
    """DeepSeek 7B on 64 GPUs: ramp-up on, gradient accumulation > 1, micro batch > 1, ZeRO-1."""
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
    target = Target(width=2048, depth=16, heads=16, tokens=1e10, parametrization="mup")
    return recommend({"lr": mup_law()}, target, Hardware(gpus=2))


def _megatron_ns(checks: SimpleNamespace, r: Recipe, version: str | None) -> object:
    text = export_recipe(r, "megatron", version, allow_inexpressible=True)
    lm = checks.megatron
    ns = lm.parse(text, version or "0.19", r.data_parallel)
    assert lm.validate(ns, version or "0.19") == []  # nothing parsed and then ignored
    return ns


def test_litgpt(recipe: Recipe, small: Recipe) -> None:
    doc = yaml.safe_load(export_recipe(recipe, "litgpt"))
    train, opt = doc["train"], doc["optimizer"]
    assert doc["model_name"] and doc["model_config"] == {
        "name": doc["model_name"], "n_layer": 30, "n_embd": 4096, "n_head": 32,
        "vocab_size": 102400, "padded_vocab_size": 102400, "block_size": 4096,
        "parallel_residual": False, "bias": False,
    }  # fmt: skip
    assert doc["precision"] == "bf16-mixed"
    assert yaml.safe_load(export_recipe(small, "litgpt"))["precision"] == "32-true"
    assert doc["devices"] * doc["num_nodes"] == recipe.data_parallel
    # litgpt derives the accumulation as global / (micro × devices)
    assert train["global_batch_size"] // (train["micro_batch_size"] * doc["devices"]) == (
        recipe.grad_accum_steps
    )
    assert train["global_batch_size"] == recipe.global_batch_sequences
    assert train["lr_warmup_steps"] == recipe.warmup_steps
    # litgpt's pretrain.fit: max_iters = max_tokens // world // (micro · seq), one optimizer step
    # every accumulation: the recipe's steps exactly (int(tokens) gave one step fewer)
    world = doc["devices"] * doc["num_nodes"]
    per_iter = train["micro_batch_size"] * train["max_seq_length"]
    max_iters = train["max_tokens"] // world // per_iter
    assert max_iters // recipe.grad_accum_steps == recipe.total_steps
    assert max_iters % recipe.grad_accum_steps == 0
    assert train["max_seq_length"] == recipe.seq_len
    assert train["min_lr"] == recipe.lr.value * recipe.min_lr_ratio
    assert train["max_norm"] == recipe.grad_clip
    assert opt["class_path"] == "torch.optim.AdamW"
    assert opt["init_args"] == {
        "lr": recipe.lr.value,
        "weight_decay": recipe.weight_decay,
        "betas": [recipe.adam_beta1, recipe.adam_beta2],
        "eps": recipe.adam_eps,
    }


def test_hf(recipe: Recipe) -> None:
    doc = json.loads(export_recipe(recipe, "hf"))
    assert doc["learning_rate"] == recipe.lr.value
    assert (
        doc["per_device_train_batch_size"] * doc["gradient_accumulation_steps"]
        * recipe.data_parallel == recipe.global_batch_sequences
    )  # fmt: skip
    assert isinstance(doc["warmup_steps"], int) and doc["warmup_steps"] == recipe.warmup_steps >= 1
    assert doc["lr_scheduler_type"] == "cosine_with_min_lr"
    assert doc["lr_scheduler_kwargs"] == {"min_lr_rate": recipe.min_lr_ratio}
    assert doc["max_steps"] == recipe.total_steps
    assert (doc["adam_beta1"], doc["adam_beta2"], doc["adam_epsilon"]) == (
        recipe.adam_beta1, recipe.adam_beta2, recipe.adam_eps,
    )  # fmt: skip
    assert (doc["weight_decay"], doc["max_grad_norm"]) == (recipe.weight_decay, recipe.grad_clip)
    assert doc["bf16"] is True


@pytest.mark.parametrize("which", ["recipe", "small"])
def test_deepspeed(which: str, request: pytest.FixtureRequest) -> None:
    r: Recipe = request.getfixturevalue(which)
    doc = json.loads(export_recipe(r, "deepspeed"))
    # DeepSpeed's own identity: train_batch_size = micro × accumulation × data-parallel world
    assert doc["train_batch_size"] == (
        doc["train_micro_batch_size_per_gpu"] * doc["gradient_accumulation_steps"] * r.data_parallel
    ) == r.global_batch_sequences  # fmt: skip
    assert doc["gradient_clipping"] == r.grad_clip
    assert doc["optimizer"] == {
        "type": "AdamW",
        "params": {"lr": r.lr.value, "betas": [r.adam_beta1, r.adam_beta2], "eps": r.adam_eps,
                   "weight_decay": r.weight_decay},
    }  # fmt: skip
    sched = doc["scheduler"]
    assert sched["type"] == "WarmupCosineLR"  # keeps a min LR; WarmupDecayLR decays to 0
    assert sched["params"] == {
        "total_num_steps": r.total_steps, "warmup_num_steps": r.warmup_steps,
        "warmup_min_ratio": 0.0, "warmup_type": "linear", "cos_min_ratio": r.min_lr_ratio,
    }  # fmt: skip
    assert doc["zero_optimization"]["stage"] == r.hardware.zero_stage
    assert ("bf16" in doc) == (r.precision == "bf16")


@pytest.mark.parametrize("version", [*MEGATRON_VERSIONS, None])
def test_megatron_rampup_per_version(checks: SimpleNamespace, recipe: Recipe, version) -> None:
    """< 0.18: --rampup-batch-size, sample-based; >= 0.18 (and the default): the step schedule
    in tokens, no --global-batch-size, the same batch at every consumed-samples count."""
    ns = _megatron_ns(checks, recipe, version)
    ru = recipe.rampup
    assert ru is not None
    assert (ns.num_layers, ns.hidden_size, ns.num_attention_heads) == (30, 4096, 32)
    assert ns.seq_length == recipe.seq_len and ns.micro_batch_size == recipe.micro_batch_size
    assert ns.train_iters is None and ns.lr_warmup_iters in (None, 0)
    assert ns.train_samples == math.ceil(recipe.tokens / recipe.seq_len)
    assert ns.lr_warmup_samples == recipe.warmup_steps * recipe.global_batch_sequences
    assert ns.lr_decay_samples == recipe.total_steps * recipe.global_batch_sequences
    assert (ns.lr, ns.min_lr, ns.lr_decay_style) == (
        recipe.lr.value,
        recipe.lr.value * recipe.min_lr_ratio,
        "cosine",
    )
    assert ns.use_distributed_optimizer  # ZeRO-1
    g, n = recipe.global_batch_sequences, ru.increments_to(recipe.global_batch_sequences)
    if (version or "0.19") < "0.18":
        assert ns.rampup_batch_size == [ru.start_sequences, ru.increment_sequences, ru.ramp_samples]
        assert ns.global_batch_size == g
        return
    assert ns.rampup_batch_size is None and ns.global_batch_size == ns.micro_batch_size * 64
    sched = checks.megatron.StepSchedule(ns.step_batch_size_schedule, ns.seq_length, 2, 64)
    for consumed in (0, 1, ru.ramp_samples // 3, ru.ramp_samples // 2, ru.ramp_samples - 1,
                     ru.ramp_samples, ru.ramp_samples + 1, 10**9):  # fmt: skip
        # Megatron < 0.18's RampupBatchsizeNumMicroBatchesCalculator.update
        want = g if consumed > ru.ramp_samples else (
            ru.start_sequences + int(consumed / (ru.ramp_samples / n)) * ru.increment_sequences
        )  # fmt: skip
        assert sched.batch(consumed) == want, consumed


def test_megatron_iteration_based(checks: SimpleNamespace, small: Recipe) -> None:
    ns = _megatron_ns(checks, small, None)
    assert ns.train_iters == small.total_steps == ns.lr_decay_iters
    assert ns.lr_warmup_iters == small.warmup_steps
    assert ns.train_samples is None and ns.rampup_batch_size is None
    assert ns.step_batch_size_schedule is None
    assert ns.global_batch_size == small.global_batch_sequences
    assert not ns.bf16 and not ns.use_distributed_optimizer  # fp32, ZeRO 0


@pytest.mark.parametrize("stage", [2, 3])
def test_megatron_zero_fsdp(checks: SimpleNamespace, stage: int) -> None:
    target = Target(width=768, depth=12, heads=12, context=1024, tokens=3e10)
    r = recommend(published_laws("steplaw"), target, Hardware(gpus=4, zero_stage=stage))
    ns = _megatron_ns(checks, r, "0.19")
    assert ns.use_megatron_fsdp
    assert ns.data_parallel_sharding_strategy == {2: "optim_grads", 3: "optim_grads_params"}[stage]


@pytest.mark.parametrize("version", ["0.17", "0.18", "0.19"])
def test_megatron_mup_flags(checks: SimpleNamespace, mup: Recipe, version: str) -> None:
    ns = _megatron_ns(checks, mup, version)
    assert ns.use_mup and ns.mup_base_hidden_size == 256
    assert ns.mup_base_head_dim == 256 / 16  # base_width / heads: not recorded by the recipe
    assert ns.mup_output_mult == 1.0  # Megatron's 1/m, the proxies' base/width
    assert ns.init_method_std == mup.init_std == 0.02


def test_megatron_mup_output_mult_and_head_dim(checks: SimpleNamespace, mup: Recipe) -> None:
    r = recommend({"lr": mup_law(output_mult=4.0)}, mup.target, Hardware(gpus=2))
    r = dataclasses.replace(r, base_head_dim=32)
    ns = _megatron_ns(checks, r, "0.19")
    assert ns.mup_output_mult == 4.0 * 256 / 2048  # α·base/width
    assert ns.mup_base_head_dim == 32
    text = export_recipe(r, "megatron")
    assert "assumes base_width/heads" not in text


def test_megatron_016_has_no_mup(checks: SimpleNamespace, mup: Recipe) -> None:
    with pytest.raises(
        TargetError, match=r"--use-mup exists from core 0.17.*--allow-inexpressible"
    ):
        export_recipe(mup, "megatron", "0.16")
    ns = _megatron_ns(checks, mup, "0.16")  # allowed: parsed by 0.16's table, no muP flags
    assert not hasattr(ns, "use_mup") or not ns.use_mup


def test_library_refusals_name_the_option_as_python_and_cli_spell_it(
    recipe: Recipe, small: Recipe, mup: Recipe
) -> None:
    """``sweeper.export`` is Python: its refusals name the keyword (and the flag beside it), and
    a bad version is "framework version", not a bare ``--framework-version``."""
    import sweeper

    with pytest.raises(TargetError) as e:
        sweeper.export(mup, "litgpt")
    assert "(allow_inexpressible=True, --allow-inexpressible: write the file anyway" in str(e.value)
    with pytest.raises(TargetError) as e:
        sweeper.export(small, "litgpt", framework_version="9.9")
    assert str(e.value).startswith("unknown framework version '9.9' for litgpt; known: 0.5")
    with pytest.raises(TargetError, match=r"^framework version '2': json has no"):
        sweeper.export(small, "json", framework_version="2")
    text = export_recipe(recipe, "megatron", "0.16")  # ramp-up: a note on newer versions
    assert "export for framework version 0.18 or later" in text
    assert "--framework-version" not in text


def test_step_schedule_keeps_the_larger_batch_on_equal_thresholds(recipe: Recipe) -> None:
    import dataclasses

    from sweeper.recipe.hardware import RampUp

    ru = RampUp(start_sequences=256, increment_sequences=128, ramp_samples=8, ramp_tokens=8 * 4096)
    r = dataclasses.replace(recipe, rampup=ru)
    entries = [tuple(map(int, e.split(":"))) for e in step_schedule(r).split(",")]
    assert entries[0] == (0, 256) and entries[-1] == (8 * 4096, recipe.global_batch_sequences)
    assert all(b[0] > a[0] and b[1] > a[1] for a, b in itertools.pairwise(entries))


@pytest.mark.parametrize("version", ["0.2", "0.3", None])
def test_torchtitan(recipe: Recipe, small: Recipe, version: str | None) -> None:
    for r in (recipe, small):
        text = export_recipe(r, "torchtitan", version)
        mp = "bfloat16" if r.precision == "bf16" else "float32"
        if version == "0.2":
            doc = tomllib.loads(text)
            assert doc["model"] == {"name": "llama3", "flavor": "8B"}
            assert doc["optimizer"] == {
                "name": "AdamW", "lr": r.lr.value, "beta1": r.adam_beta1, "beta2": r.adam_beta2,
                "eps": r.adam_eps, "weight_decay": r.weight_decay,
            }  # fmt: skip
            sched, tr = doc["lr_scheduler"], doc["training"]
        else:
            argv = shlex.split(text, comments=True)
            assert argv[:4] == ["--module", "llama3", "--config", "llama3_8b"]
            kv = {a: b for a, b in itertools.pairwise(argv) if a.startswith("--")}
            g = "--optimizer.param_groups.0.optimizer_kwargs"
            assert float(kv[f"{g}.lr"]) == r.lr.value and float(kv[f"{g}.eps"]) == r.adam_eps
            i = argv.index(f"{g}.betas")
            assert [float(x) for x in argv[i + 1 : i + 3]] == [r.adam_beta1, r.adam_beta2]
            sched = {k.split(".")[1]: v for k, v in kv.items() if k.startswith("--lr_scheduler.")}
            tr = {k.split(".")[1]: v for k, v in kv.items() if k.startswith("--training.")}
        assert int(sched["warmup_steps"]) == r.warmup_steps
        assert sched["decay_type"] == "cosine" and float(sched["min_lr_factor"]) == r.min_lr_ratio
        assert int(tr["local_batch_size"]) == r.micro_batch_size
        assert int(tr["global_batch_size"]) == r.global_batch_sequences
        assert int(tr["seq_len"]) == r.seq_len and int(tr["steps"]) == r.total_steps
        assert float(tr["max_norm"]) == r.grad_clip and tr["mixed_precision_param"] == mp
        # the named model's N against the recipe's, said (an export audit read 'the nearest' of
        # an 8B model for a 1B recipe as harmless)
        ratio = 12 * 32 * 4096**2 / (12 * r.depth * r.width**2)
        assert f"whose N is {ratio:.2g}× the recipe's" in text
        assert ("model_registry also has flavors 1B" in text) == (version != "0.2")


@pytest.mark.parametrize("which", ["recipe", "small"])
def test_nanogpt(checks: SimpleNamespace, which: str, request: pytest.FixtureRequest) -> None:
    """Exec'd over train.py's globals (load_nanogpt): no unknown or retyped name."""
    r: Recipe = request.getfixturevalue(which)
    cfg, unknown, retyped = checks.nanogpt.execute(export_recipe(r, "nanogpt"))
    assert unknown == [] and retyped == []
    # nanoGPT's tokens per iteration: accumulation (total over DDP) × micro batch × block size
    tokens_per_iter = cfg["gradient_accumulation_steps"] * cfg["batch_size"] * cfg["block_size"]
    assert tokens_per_iter == r.batch_tokens.value
    assert cfg["gradient_accumulation_steps"] % r.data_parallel == 0  # train.py divides by world
    assert (cfg["n_layer"], cfg["n_head"], cfg["n_embd"]) == (r.depth, r.heads, r.width)
    assert (cfg["learning_rate"], cfg["min_lr"]) == (r.lr.value, r.lr.value * r.min_lr_ratio)
    assert cfg["warmup_iters"] == r.warmup_steps and cfg["lr_decay_iters"] == r.total_steps
    assert cfg["max_iters"] + 1 == r.total_steps  # the loop runs 0..max_iters
    assert (cfg["beta1"], cfg["beta2"], cfg["weight_decay"], cfg["grad_clip"]) == (
        r.adam_beta1, r.adam_beta2, r.weight_decay, r.grad_clip,
    )  # fmt: skip
    assert cfg["decay_lr"] is True
    assert cfg["dtype"] == ("bfloat16" if r.precision == "bf16" else "float32")


def test_json_round_trips(recipe: Recipe, mup: Recipe) -> None:
    for r in (recipe, mup):
        d = json.loads(export_recipe(r, "json"))
        assert d["schema"] == "sweeper-recipe" and d["schema_version"] == 4
        assert recipe_from_dict(d) == r


@pytest.mark.parametrize("fmt", ["litgpt", "megatron", "torchtitan", "nanogpt"])
def test_header_carries_target_provenance_and_interval(recipe: Recipe, fmt: str) -> None:
    text = export_recipe(recipe, fmt)
    header = [ln for ln in text.splitlines() if ln.startswith("#")]
    joined = "\n".join(header)
    assert header[0].startswith("# Sweeper recipe (") and "load: " in joined
    assert "source deepseek" in joined and "method published" in joined
    # DeepSeek's laws are published: the header says they have no interval (not [x, x])
    assert NO_INTERVAL in joined and "interval [" not in joined
    # the factor names the predictor it counts (DeepSeek's laws are on compute)
    assert re.search(
        r"extrapolation factor \(target / largest proxy\): \S+× \(flops \S+×\)", joined
    )
    assert "the recipe's lr = the LR law's point estimate (lr_point)" in joined
    assert any("WARNING: very far extrapolation" in ln for ln in header)
    for m in cannot_carry(recipe, fmt):
        assert f"# not expressible here: {m}" in joined


def test_header_says_which_lr(recipe: Recipe) -> None:
    import dataclasses

    r = dataclasses.replace(recipe, lr_point=recipe.lr.value * 1.25)
    text = export_recipe(r, "megatron")
    assert "the recipe's lr (recommended); the LR law's point estimate lr_point is" in text
    assert f"--lr {recipe.lr.value!r}" in text


def test_output_mult_noted_where_the_law_records_it(mup: Recipe) -> None:
    """A muP law measured with output_mult 4 at base width 256: every format without
    --mup-output-mult says what the logits get at width 2048 (4·256/2048 = 0.5)."""
    assert not any("output (logit)" in m for m in cannot_carry(mup, "litgpt"))
    r = recommend({"lr": mup_law(output_mult=4.0)}, mup.target, Hardware(gpus=2))
    assert r.lr.value == mup.lr.value  # the multiplier is a note, not a change of the recipe
    for fmt in ("litgpt", "hf", "deepspeed", "torchtitan", "nanogpt"):
        lines = cannot_carry(r, fmt)
        assert any("output (logit) multiplier 4 at base width 256" in m for m in lines), fmt
        assert any("= 0.5·(h·W_lm) at width 2048" in m for m in lines), fmt
    assert "--mup-output-mult 0.5" in export_recipe(r, "megatron")
    conv = json.loads(export_recipe(r, "json"))["provenance"]["lr"]["conventions"]
    assert conv["output_mult"] == 4.0


def test_every_format_exports(small: Recipe) -> None:
    assert FORMATS == ("litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt", "json")
    for fmt in FORMATS:
        assert export_recipe(small, fmt).strip()


def test_unknown_format_and_version(small: Recipe) -> None:
    with pytest.raises(TargetError, match="unknown export format 'keras'"):
        export_recipe(small, "keras")
    with pytest.raises(TargetError, match=r"unknown framework version '0.15' for megatron; known"):
        export_recipe(small, "megatron", "0.15")
    with pytest.raises(TargetError, match="json has no framework versions"):
        export_recipe(small, "json", "2")
    assert render(small, "megatron", "core_v0.17.1").version.version == "0.17"  # type: ignore[union-attr]
    assert render(small, "torchtitan").version.version == "0.3"  # type: ignore[union-attr]


def test_other_release_of_a_series_is_written_for_the_checked_one(small: Recipe) -> None:
    """0.19.1 is not the checked core_v0.19.0: the file is for core_v0.19.0 and says so (header
    and cautions); the checked release, however spelled, says nothing."""
    r = render(small, "megatron", "0.19.1")
    assert r.version is not None and r.version.version == "0.19" and r.version.given == "0.19.1"
    note = r.version.caution
    assert note is not None and note in r.cautions and f"# CAUTION: {note}\n" in r.text
    assert "written for Megatron-LM core_v0.19.0" in note
    for fmt, v in (("megatron", "0.19"), ("megatron", "core_v0.19.0"), ("hf", "5"),
                   ("hf", "5.23.0"), ("litgpt", "0.5.13"), ("nanogpt", "3adf61e154c3")):  # fmt: skip
        got = render(small, fmt, v)
        assert got.version is not None and got.version.caution is None, (fmt, v)
        assert "is not a release" not in got.text + "".join(got.cautions), (fmt, v)
    hf = render(small, "hf", "5.0")
    assert any(c.startswith("framework version 5.0 is not a release") for c in hf.cautions)


def test_degenerate_interval_is_written_as_none(small: Recipe, recipe: Recipe) -> None:
    """A published law's interval is the point: the header says there is none, never [x, x]."""
    assert small.lr.degenerate and small.batch_tokens.degenerate
    text = export_recipe(small, "litgpt")
    lr = next(line for line in text.splitlines() if line.startswith("# peak LR"))
    batch = next(line for line in text.splitlines() if line.startswith("# batch "))
    for line in (lr, batch):
        assert NO_INTERVAL in line and "interval [" not in line, line
    assert render(small, "hf").notes[1] == lr.removeprefix("# ")
    assert Interval(2.0, 1.0, 4.0).text(3, "95% interval") == "95% interval [1, 4]"
    assert Interval(2.0, 2.0, 2.0).text(3, "95% interval") == NO_INTERVAL


def test_mup_init_std_is_the_proxies(checks: SimpleNamespace, mup: Recipe) -> None:
    """The muP law's conventions carry the proxies' init std (0.02 by default): Megatron gets it
    beside the base width; the headers say what hidden matrices get."""
    hidden = 0.02 * math.sqrt(256 / 2048)
    assert mup.init_std == 0.02 and mup.hidden_init_std == pytest.approx(hidden)
    for fmt in ("megatron", "litgpt", "torchtitan", "nanogpt"):
        text = export_recipe(mup, fmt, allow_inexpressible=True)
        assert "the proxies' init std at base width 256" in text, fmt
        assert f"{hidden:.4g}" in text, fmt
    assert json.loads(export_recipe(mup, "json"))["hidden_init_std"] == pytest.approx(hidden)


def test_header_names_token_units_and_conversion(mup: Recipe) -> None:
    header = export_recipe(mup, "litgpt", allow_inexpressible=True)
    assert "tokens counted as bytes" in header  # the default conventions: byte-level data
    assert "lr measured as: peak AdamW LR, warmup 10% of steps, cosine to 10%" in header
    law = PowerLaw(
        conventions=Conventions(
            tokens="bytes", parametrization="sp", held={"tokens_per_param": (10.0, 40.0)}
        ),
        target="lr",
        predictors=("tokens",),
        source="bytes-sweep",
        method="test",
        domain={"tokens": (1e8, 1e10)},
        log_prefactor=math.log(0.5),
        exponents={"tokens": -0.1},
    )
    r = recommend({"lr": law}, Target(n_params=1e8, tokens=4e9), bytes_per_token=4.0)
    text = export_recipe(r, "torchtitan")
    assert "tokens counted as bytes (converted at 4 bytes per token)" in text
    assert "lr law: not modelled, varied over the fitted cells: tokens_per_param 10–40" in text
    assert json.loads(export_recipe(r, "json"))["bytes_per_token"] == 4.0


def test_a_longer_string_than_the_checked_release_is_another_release(small: Recipe) -> None:
    """Whether a version names the checked release was a copy of the commit-prefix rule with the
    roles swapped, which took "0.19.0.1" and "0.19.00" (seven characters or more, starting with
    "0.19.0") for core_v0.19.0 itself: they are other releases of 0.19, and say so."""
    for v in ("0.19.0.1", "0.19.00"):
        got = render(small, "megatron", v)
        assert got.version is not None and got.version.given == v, v
        assert got.version.caution is not None and got.version.caution in got.cautions, v
    for fmt, v in (("megatron", "0.19.0"), ("nanogpt", "3adf61e"), ("nanogpt", "3ADF61E154C3")):
        got = render(small, fmt, v)
        assert got.version is not None and got.version.caution is None, (fmt, v)


@pytest.mark.parametrize("version", MEGATRON_VERSIONS)
def test_megatron_trains_the_proxies_architecture(
    checks: SimpleNamespace, recipe: Recipe, mup: Recipe, version: str
) -> None:
    """Megatron's defaults are dropout 0.1, a bias on every linear and an output layer tied to the
    word embeddings; the proxies (proxy_models/model.py) have none of them: the file sets the
    flags, and says what no flag removes (LayerNorm's bias)."""
    proxy = ProxyConfig()
    for r in (recipe, mup):
        ns = _megatron_ns(checks, r, version)
        assert (ns.hidden_dropout, ns.attention_dropout) == (0.0, 0.0)
        assert ns.add_bias_linear is False
        assert ns.untie_embeddings_and_output_weights is not proxy.tied_embeddings
        assert ns.normalization == {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}[proxy.norm]
        assert ns.position_embedding_type == "learned_absolute"
    assert "CAUTION: Megatron's LayerNorm has a bias" in export_recipe(recipe, "megatron", version)


@pytest.mark.parametrize("version", ["0.17", "0.18", "0.19"])
def test_megatron_mup_output_layer_keeps_the_base_lr_and_eps(mup: Recipe, version: str) -> None:
    """Under --use-mup, language_module.py marks the output layer is_embedding_parameter, so
    get_mup_config_overrides gives it the base LR and eps, as the proxies' lm_head: only the
    hidden matrices' eps (÷ m) and weight decay (not × m) differ."""
    missing = cannot_carry(mup, "megatron", version)
    text = export_recipe(mup, "megatron", version)
    assert not [m for m in missing if "output layer" in m]
    assert "--decoupled-lr" not in text
    assert f"untied output layer at the base LR {mup.lr.value:.4g} and eps" in text
    (eps,) = [m for m in missing if m.startswith("Adam eps")]
    assert eps.endswith(f"by m for the hidden matrices ({mup.adam_eps / 8:.3g})")
    assert [m for m in missing if "weight decay" in m and "× m" in m]


@pytest.mark.parametrize("version", MEGATRON_VERSIONS)
def test_megatron_rampup_header_says_counts_are_samples(
    recipe: Recipe, small: Recipe, version: str
) -> None:
    """With a ramp-up the file trains by samples: the header's steps and warmup are full-batch
    step counts that Megatron reaches at other iterations."""
    said = "with the ramp-up the run is counted in samples"
    text = export_recipe(recipe, "megatron", version)
    g = recipe.global_batch_sequences
    assert said in text and f"--lr-warmup-samples = {recipe.warmup_steps} warmup steps" in text
    assert f"the full batch {g}" in text
    assert said not in export_recipe(small, "megatron", version)


def test_litgpt_init_declares_both_residual_projections(recipe: Recipe) -> None:
    """litgpt 0.5.13 initialize_weights rescales proj of CausalSelfAttention and LLaMAMLP only:
    the GptNeoxMLP of the export keeps sqrt(2/(5·n_embd)) on its down-projection."""
    (line,) = [m for m in cannot_carry(recipe, "litgpt") if m.startswith("init std")]
    assert "the MLP's down-projection (GptNeoxMLP proj) included" in line
    assert f"{sp_small_init_std(4096):.4g}" in line and f"{1 / math.sqrt(4096) / 30:.4g}" in line
    assert "(attention out, MLP down)" in line


def test_weight_decay_groups_declared_where_every_parameter_decays(recipe: Recipe) -> None:
    """The proxies decay matrices only (proxy_models.rules: vectors 0). litgpt and torchtitan put
    every parameter in one group: declared; nanoGPT (dim >= 2), HF Trainer (no bias/norm) and
    Megatron (no 1-D/bias) decay as the proxies; DeepSpeed: the script's groups (a caution)."""
    for fmt, v, one_group in (
        ("litgpt", None, True), ("torchtitan", "0.2", True), ("torchtitan", "0.3", True),
        ("nanogpt", None, False), ("hf", None, False), ("megatron", None, False),
        ("deepspeed", None, False),
    ):  # fmt: skip
        said = [m for m in cannot_carry(recipe, fmt, v) if "on norm gains and biases" in m]
        assert bool(said) is one_group, (fmt, v, said)
    (caution,) = render(recipe, "deepspeed").cautions
    assert "model_parameters" in caution and "norm gains" in caution


@pytest.mark.parametrize("warmup", [0, 1])
def test_deepspeed_short_warmup_is_written_as_deepspeed_accepts(small: Recipe, warmup: int) -> None:
    """WarmupCosineLR raises on warmup_num_steps 0 and warms up over max(2, n) steps."""
    got = render(dataclasses.replace(small, warmup_steps=warmup), "deepspeed")
    params = json.loads(got.text)["scheduler"]["params"]
    assert (params["warmup_num_steps"], params["warmup_min_ratio"]) == (1, 1.0)
    assert [m for m in got.missing if m.setting == "schedule" and "refuses" in m.text]
    assert (
        json.loads(export_recipe(small, "deepspeed"))["scheduler"]["params"]["warmup_min_ratio"]
        == 0.0
    )


def test_nanogpt_batch_holds_on_divisors_and_tying_is_said(recipe: Recipe) -> None:
    """train.py divides gradient_accumulation_steps by the world size: the global batch holds on
    any world size dividing it. model.py ties lm_head to wte; the proxies do not by default."""
    total = recipe.grad_accum_steps * recipe.data_parallel
    (dp,) = [m for m in cannot_carry(recipe, "nanogpt") if m.startswith("data-parallel")]
    assert "holds only" not in dp and f"holds on any world size dividing {total}" in dp
    assert "holds only on 64 processes" in cannot_carry(recipe, "hf")[-1]
    assert "CAUTION: nanoGPT always ties lm_head to wte" in export_recipe(recipe, "nanogpt")


@pytest.mark.parametrize(
    ("fmt", "version", "words"),
    [
        ("litgpt", None, ("data:", "tokenizer_dir:", "out_dir:")),
        ("nanogpt", None, ("dataset = 'openwebtext'", "torchrun")),
        ("torchtitan", "0.3", ("--dataloader.dataset", "--hf_assets_path")),
        ("torchtitan", "0.2", ("[training] dataset", "[model] hf_assets_path")),
    ],
)
def test_header_says_what_the_user_supplies(
    small: Recipe, fmt: str, version: str | None, words: tuple[str, ...]
) -> None:
    head = "".join(
        ln for ln in export_recipe(small, fmt, version).splitlines(True) if ln.startswith("#")
    )
    for w in words:
        assert w in head, (fmt, w)


def test_litgpt_says_when_its_vocab_was_assumed() -> None:
    """An export audit: with no vocab given the litgpt file set vocab_size 32000 in the model,
    which litgpt builds the embedding from, and only 'embedding memory' had been said; the
    several-nodes note showed for one GPU."""
    from sweeper.recipe.export import litgpt

    laws = {"lr": published_laws("deepseek")["lr"]}
    plain = recommend(laws, Target(width=1024, depth=12, tokens=2e10))
    assert any("vocab_size 32000 is assumed" in c for c in litgpt.cautions(plain, None))
    text = export_recipe(plain, "litgpt")
    assert "vocab_size 32000 is assumed" in text and "num_nodes to the nodes" not in text
    given = recommend(laws, Target(width=1024, depth=12, tokens=2e10, vocab=50304))
    assert not any("assumed" in c for c in litgpt.cautions(given, None))


def test_no_gradient_clipping_is_written_as_each_framework_reads_it(
    small: Recipe, checks: SimpleNamespace
) -> None:
    """A recipe without clipping (grad_clip 0, as proxies that ran none measured the LR): the
    frameworks that read 0 as "off" get 0; litgpt and torchtitan, whose torch clip_grad_norm_
    would scale every gradient to norm 0, get infinity, said in the file (an exports audit: the
    recipe could not hold 0, and wrote 1.0 whatever the proxies ran)."""
    r = dataclasses.replace(small, grad_clip=0.0)
    lit = yaml.safe_load(export_recipe(r, "litgpt"))
    assert lit["train"]["max_norm"] == math.inf
    assert "train.max_norm = inf: no gradient clipping" in export_recipe(r, "litgpt")
    text = export_recipe(r, "torchtitan", "0.2")
    assert tomllib.loads(text)["training"]["max_norm"] == math.inf
    argv = shlex.split(export_recipe(r, "torchtitan"), comments=True)
    assert float(argv[argv.index("--training.max_norm") + 1]) == math.inf
    assert json.loads(export_recipe(r, "hf"))["max_grad_norm"] == 0.0
    cfg, _, _ = checks.nanogpt.execute(export_recipe(r, "nanogpt"))
    assert cfg["grad_clip"] == 0.0  # (train.py clips only when grad_clip != 0.0)
    assert recipe_from_dict(r.to_dict()).grad_clip == 0.0
    with pytest.raises(TargetError, match="grad_clip must be >= 0"):
        dataclasses.replace(small, grad_clip=-1.0)

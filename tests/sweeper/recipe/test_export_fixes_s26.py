"""Four findings of an audit of the recipe exports, each checked against the framework's source.

1. litgpt 0.5.13's Config defaults are a GPT-NeoX block (parallel_residual True, bias True,
   litgpt/config.py:43 and :91): the export sets the proxies' sequential block without biases,
   and says the positions (RoPE, no learned embedding) and the LayerNorm's bias as not
   expressible.
2. Megatron-LM from core 0.18 counts the last partial batch of a ramped run as an iteration
   (training.py update_train_iters, ``while consumed_samples < args.train_samples``): 223,020
   iterations for the audit's recipe, not the 223,019 of the < 0.18 rule the header had said.
3. DeepSpeed 0.19.8's schedulers start at iteration -1 and are stepped after each optimizer step:
   the warmup ends two steps after the proxies', which the docs had called one step at most.
4. The muP refusal said "this format's models are SP" for hf and deepspeed, whose model is the
   training script's.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from sweeper.recipe.export import cannot_carry, export_recipe, render
from sweeper.recipe.hardware import Hardware
from sweeper.recipe.published import published_laws
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.recommend import recommend
from sweeper.recipe.target import Target
from tests.sweeper.helpers import tokens_lr_law

ROOT = Path(__file__).resolve().parents[3]
CHECKS_DIR = ROOT / "scripts" / "export_checks"
#: the audit's command: DeepSeek 7B, 2T tokens, 64 GPUs of 80 GB, micro batch 2 (ramp-up on)
AUDIT = ["--law", "deepseek", "--width", "4096", "--depth", "30", "--heads", "32",
         "--vocab", "102400", "--context", "4096", "--tokens", "2T", "--gpus", "64",
         "--gpu-memory-gb", "80", "--micro-batch", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def checks() -> Iterator[SimpleNamespace]:
    """The standard-library parts of the real-loader harness (scripts/export_checks)."""
    sys.path.insert(0, str(CHECKS_DIR))
    try:
        import common
        import load_megatron

        yield SimpleNamespace(common=common, megatron=load_megatron)
    finally:
        sys.path.remove(str(CHECKS_DIR))


@pytest.fixture(scope="module")
def audit() -> Recipe:
    """The audit's recipe (ZeRO 0, as the command's default)."""
    target = Target(width=4096, depth=30, heads=32, vocab=102400, context=4096, tokens=2e12)
    r = recommend(published_laws("deepseek"), target, Hardware(gpus=64, micro_batch=2))
    assert r.rampup is not None
    return r


# ---- 1. litgpt: the proxies' block ------------------------------------------------------------


def test_litgpt_sets_the_proxies_sequential_block_without_biases(audit: Recipe) -> None:
    """litgpt 0.5.13 Config: parallel_residual True (config.py:43) adds attention and MLP to the
    same input, bias True (config.py:91) puts biases on qkv, proj, fc: the file sets both off."""
    text = export_recipe(audit, "litgpt")
    cfg = yaml.safe_load(text)["model_config"]
    assert cfg["parallel_residual"] is False and cfg["bias"] is False
    caution = [ln for ln in text.splitlines() if ln.startswith("# CAUTION: model_config")]
    assert len(caution) == 1 and "details" not in caution[0]
    assert "parallel_residual true" not in caution[0] and "bias true" not in caution[0]


def _on_the_proxies() -> Recipe:
    """A recipe from an LR law measured on Sweeper's proxies (a fitted law's conventions)."""
    law = tokens_lr_law(source="sweep")
    return recommend({"lr": law}, Target(width=1024, depth=8, heads=8, tokens=1e9))


def test_litgpt_says_positions_and_layernorm_bias_are_not_expressible() -> None:
    """litgpt's GPT has no position embedding (RoPE on rotary_percentage 0.25 of each head) and
    its LayerNorm is torch.nn.LayerNorm with a bias: one "not expressible here" line each, for an
    LR law measured on the proxies."""
    r = _on_the_proxies()
    text = export_recipe(r, "litgpt")
    said = [ln for ln in text.splitlines() if ln.startswith("# not expressible here: ")]
    assert any("learned absolute position" in ln and "rotary_percentage 0.25" in ln for ln in said)
    assert any("LayerNorm without bias" in ln and "torch.nn.LayerNorm" in ln for ln in said)
    lines = cannot_carry(r, "litgpt")
    assert sum("position" in ln for ln in lines) == 1
    # an SP recipe stays exportable: these lines are declared, not refused
    assert render(r, "litgpt").missing
    assert "not measured on Sweeper's proxies" not in text


@pytest.mark.parametrize("fmt", ["litgpt", "megatron"])
def test_a_law_not_measured_on_the_proxies_is_not_compared_with_their_block(
    audit: Recipe, fmt: str
) -> None:
    """A review: for DeepSeek's published law the litgpt export had said the proxies' learned
    positions and bias-free norms were not expressible, as if the law had been measured on
    them; the block written is said to be the proxies', to be set to the law's own model."""
    text = export_recipe(audit, fmt, allow_inexpressible=True)
    assert "learned absolute position" not in "\n".join(cannot_carry(audit, fmt))
    said = [ln for ln in text.splitlines() if "not measured on Sweeper's proxies" in ln]
    assert len(said) == 1 and "the LR law is a published law" in said[0]
    assert "set it to the model the law was measured on" in said[0]


def test_the_check_wants_the_proxies_block(checks: SimpleNamespace, audit: Recipe) -> None:
    """A loader that builds the model's config reports its block; the check wants the proxies'
    (sequential, no linear biases); a loader without a model (None) is not asked."""
    c = checks.common
    recipe = audit.to_dict()
    keys = ("parallel_residual", "linear_bias")
    neox = c.View("f", "l", parallel_residual=True, linear_bias=True)
    assert [ln.split(":")[0] for ln in c.compare(neox, recipe, keys)] == list(keys)
    assert (
        c.compare(c.View("f", "l", parallel_residual=False, linear_bias=False), recipe, keys) == []
    )
    assert c.compare(c.View("f", "l"), recipe, keys) == []


# ---- 2. Megatron: the ramp's iterations per version -------------------------------------------


def _old_batch(r: Recipe):
    """Megatron-LM < 0.18's RampupBatchsizeNumMicroBatchesCalculator.update, re-stated."""
    ru = r.rampup
    assert ru is not None
    g = r.global_batch_sequences
    n = ru.increments_to(g)

    def at(consumed: int, check: bool = True) -> int:
        if consumed > ru.ramp_samples:
            return g
        return ru.start_sequences + int(consumed / (ru.ramp_samples / n)) * ru.increment_sequences

    return at


#: (version, iterations): < 0.18 drops the last partial batch, from 0.18 it is an iteration
ITERATIONS = [("0.16", 223019), ("0.17", 223019), ("0.18", 223020), ("0.19", 223020),
              (None, 223020)]  # fmt: skip


@pytest.mark.parametrize(("version", "total"), ITERATIONS)
def test_megatron_header_gives_the_iterations_of_its_version(
    checks: SimpleNamespace, audit: Recipe, version: str | None, total: int
) -> None:
    """update_train_iters: < 0.18 (core_v0.16.1 training.py:1128-1158) drops the last partial
    batch; core_v0.18.2 (:1485-1506) and core_v0.19.0 (:1528-1549) loop while consumed <
    train_samples, one iteration more here. The check's re-statement and the header agree."""
    from sweeper.recipe.export.megatron import ramp_steps

    lm = checks.megatron
    text = export_recipe(audit, "megatron", version)
    v = version or "0.19"
    ns = lm.parse(text, v, audit.data_parallel)
    if lm._vt(v) >= (0, 18):
        sched = lm.StepSchedule(ns.step_batch_size_schedule, ns.seq_length, 2, 64)
        at = sched.batch
    else:
        at = _old_batch(audit)
    assert lm.train_iters(ns, v, at) == total
    warm = lm.iteration_reaching(ns.lr_warmup_samples, at, ns)
    assert warm == 10406
    said = checks.common.ramp_steps_said(checks.common.header_text(text))
    assert said and set(said) == {(total, warm)}
    assert ramp_steps(audit, render(audit, "megatron", version).version) == (total, warm)


def test_the_recipe_keeps_its_version_free_count(audit: Recipe) -> None:
    """The recipe's own figure is the --rampup-batch-size rule (< 0.18), as it was."""
    assert audit.rampup_steps() == (223019, 10406)
    assert audit.to_dict()["rampup"]["total_steps"] == 223019


def test_the_audit_command_says_223020(run) -> None:
    code, out, err = run("export", *AUDIT, "--format", "megatron")
    assert code == 0, err
    assert "# with the batch ramp-up: 223020 steps, the warmup ending at step 10406" in out
    assert "make Megatron run 223020 iterations (not 211928)" in out
    assert "223019" not in out


def _naive(entries: list[tuple[int, int]], samples: int) -> int:
    """Megatron >= 0.18's loop, one iteration at a time."""
    consumed, steps = 0, 0
    while consumed < samples:
        consumed += [b for t, b in entries if t <= consumed][-1]
        steps += 1
    return steps


def test_the_ramps_count_is_the_written_schedules_loop() -> None:
    """From 0.18 the header's count is RampUp.iterations (one rule for the ramp's steps): the
    loop of Megatron >= 0.18 over the --step-batch-size-schedule the file writes, for random
    valid ramps (a review: a second copy of the count had been written for the schedule)."""
    from sweeper.recipe.export.megatron import _schedule_entries
    from sweeper.recipe.hardware import RampUp

    rng = random.Random(26)
    for _ in range(300):
        start, inc = rng.randint(1, 8), rng.randint(1, 8)
        g = start + inc * rng.randint(1, 6)
        ru = RampUp(start, inc, rng.randint(1, 300), 0)
        r = SimpleNamespace(rampup=ru, global_batch_sequences=g)
        samples = rng.randint(0, 700)
        entries = _schedule_entries(r)  # type: ignore[arg-type]
        assert ru.iterations(g, samples) == _naive(entries, samples), (ru, g, samples)


def test_the_check_counts_as_the_loop(checks: SimpleNamespace, audit: Recipe) -> None:
    """iteration_reaching counts the constant batch after the schedule at once: the same as one
    iteration at a time."""
    lm = checks.megatron
    ns = lm.parse(export_recipe(audit, "megatron"), "0.19", 64)
    sched = lm.StepSchedule(ns.step_batch_size_schedule, ns.seq_length, 2, 64)
    for samples in (0, 1, 255, 256, 257, 14_648_438, 14_648_439, 15_000_001, 20_000_000):
        assert lm.iteration_reaching(samples, sched.batch, ns) == _naive(sched.entries, samples)


# ---- 3. DeepSpeed: two steps behind -----------------------------------------------------------


def _deepspeed_lr(name: str, params: dict, peak: float, iteration: int) -> float:
    """deepspeed/runtime/lr_schedules.py at 0.19.8 (linear warmup), re-stated: the LR at
    last_batch_iteration ``iteration`` (-1 before the first step)."""
    w = max(2, params["warmup_num_steps"])
    if name == "WarmupCosineLR":
        if iteration < 0:
            return 0.0
        if iteration < w:
            lo = params["warmup_min_ratio"]
            return peak * (lo + (iteration / w) * (1 - lo))
        p = min(1.0, (iteration - w + 1) / max(1, params["total_num_steps"] - w))
        c = params["cos_min_ratio"]
        return peak * max(0.0, c + (1 - c) * (1 + math.cos(math.pi * p)) / 2)
    lo = params["warmup_min_lr"]
    hi = params.get("warmup_max_lr", peak)
    if iteration < 0:
        return lo
    if iteration < w:
        return lo + (hi - lo) * iteration / w
    if name == "WarmupLR":
        return hi
    t = params["total_num_steps"]
    return lo + (hi - lo) * max(0.0, (t - iteration) / max(1.0, t - w))


@pytest.mark.parametrize("schedule", ["cosine", "constant", "linear"])
def test_deepspeed_notes_the_two_step_lag(schedule: str) -> None:
    """The engine builds the scheduler at -1 and steps it after each optimizer step (engine.py
    _take_model_step): step k runs at iteration k − 1, steps 0 and 1 at the warmup's start, the
    warmup's end at step W + 1; the proxies reach the peak at W − 1."""
    from sweeper.recipe.export.deepspeed import _scheduler

    law = tokens_lr_law(
        0.5, "s", schedule=schedule, min_lr_ratio=1.0 if schedule == "constant" else 0.1
    )
    r = recommend({"lr": law}, Target(width=512, depth=8, tokens=2e9), Hardware(gpus=2))
    assert r.schedule == schedule and r.warmup_steps >= 2
    name, params = _scheduler(r)
    w, peak = r.warmup_steps, r.lr.value
    lr_of_step = [_deepspeed_lr(name, params, peak, k - 1) for k in range(w + 3)]
    assert lr_of_step[0] == lr_of_step[1] < peak
    assert lr_of_step[w] < peak * (1 - 0.5 / w)  # the proxies are at the peak from step w - 1
    assert lr_of_step[w + 1] == pytest.approx(peak, rel=1e-3)
    notes = render(r, "deepspeed").notes
    lag = [n for n in notes if "two steps behind" in n]
    assert lag and f"the warmup ends at step {w + 1}" in lag[0]
    assert f"the proxies reach the peak at step {w - 1}" in lag[0]
    if name == "WarmupDecayLR":
        last = _deepspeed_lr(name, params, peak, r.total_steps - 2)
        assert any(f"the last step runs at {last:.4g}" in n for n in notes)


def test_deepspeed_lag_is_a_note_on_stderr(run) -> None:
    code, _, err = run("export", *AUDIT, "--format", "deepspeed")
    assert code == 0
    assert "sweeper: note: deepspeed: WarmupCosineLR's warmup runs two steps behind" in err


def test_the_docs_no_longer_promise_one_step_for_deepspeed() -> None:
    text = " ".join((ROOT / "docs" / "EXPORTS.md").read_text(encoding="utf-8").split())
    assert "(up to one step of index convention):" not in text
    assert "except DeepSpeed's, two steps" in text


# ---- 4. muP refusal: the script's model -------------------------------------------------------


@pytest.fixture(scope="module")
def mup() -> Recipe:
    law = tokens_lr_law(0.5, "mup-sweep", parametrization="mup", base_width=256)
    target = Target(width=2048, depth=16, heads=16, tokens=1e10, parametrization="mup")
    return recommend({"lr": law}, target, Hardware(gpus=2))


@pytest.mark.parametrize("fmt", ["hf", "deepspeed"])
def test_mup_refusal_names_the_scripts_model(mup: Recipe, fmt: str) -> None:
    (line,) = [m for m in cannot_carry(mup, fmt) if m.startswith("mup parametrization")]
    assert "models are SP" not in line
    assert "cannot set muP's multipliers or per-layer LRs" in line
    assert "the model and its optimizer groups are the training script's" in line


@pytest.mark.parametrize("fmt", ["litgpt", "torchtitan", "nanogpt"])
def test_formats_that_build_an_sp_model_still_say_so(mup: Recipe, fmt: str) -> None:
    (line,) = [m for m in cannot_carry(mup, fmt) if m.startswith("mup parametrization")]
    assert line.endswith("this format's models are SP")

"""A recommend audit's findings: the loss law's choice of N or D checked like the LR and batch
laws', the proxies' context held, a ramp-up's steps and warmup counted, the output layer in the
time, the recomputed layer in the memory, advice that can be followed, compute beside D/N, and
the table's small numbers, inferred heads and a target below the ladder said."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pandas as pd
import pytest

from sweeper.errors import TargetError
from sweeper.fitting import provenance
from sweeper.fitting.conventions import Conventions
from sweeper.recipe import compute_optimal, memory, table
from sweeper.recipe.hardware import Hardware, RampUp
from sweeper.recipe.recipe import recipe_from_dict
from sweeper.recipe.recommend import recommend
from sweeper.recipe.scale import law_scale
from sweeper.recipe.table import recipe_rows, time_text
from sweeper.recipe.target import Target
from sweeper.recipe.warning_kinds import FORCED, Doubt
from tests.sweeper.recipe.test_recommend import CHINCHILLA, sp_laws

#: Chinchilla's approach-3 law (Hoffmann et al. 2022), with the fit's domain
CHIN = replace(CHINCHILLA, domain={"n_params": (1e6, 1e8), "tokens": (1e8, 1e9)})
#: a loss law whose alpha interval reaches 0 (the audit's law 5: 0.10 [-0.024, 0.75])
LOOSE = replace(CHIN, ci={"alpha": (-0.02, 0.75), "beta": (0.2, 0.4)})


def _rows(r) -> dict[str, tuple[str, str]]:
    return {k: (v, note) for k, v, note in recipe_rows(r)}


# ---- 1. the loss law's choice ------------------------------------------------------------------


def test_a_loss_law_that_does_not_determine_d_is_refused_unless_forced() -> None:
    with pytest.raises(TargetError, match=r"does not determine the compute-optimal D: .*alpha"):
        recommend(sp_laws(), Target(n_params=1e8), loss_law=LOOSE)
    r = recommend(sp_laws(), Target(n_params=1e8), loss_law=LOOSE, force=True)
    said = [w for w in r.warnings if "compute-optimal D" in w and isinstance(w, Doubt)]
    assert said and said[0].endswith(FORCED)
    assert recommend(sp_laws(), Target(n_params=1e8), loss_law=CHIN).tokens > 0  # determined


def test_a_loss_law_that_does_not_determine_n_is_refused_unless_forced() -> None:
    with pytest.raises(TargetError, match="does not determine the compute-optimal N"):
        recommend(sp_laws(), Target(compute=1e20), loss_law=LOOSE)
    r = recommend(sp_laws(), Target(compute=1e20), loss_law=LOOSE, force=True)
    assert any("compute-optimal N" in w and w.endswith(FORCED) for w in r.warnings)


def test_a_search_for_n_that_ends_on_its_bracket_edge_is_refused(monkeypatch) -> None:
    """The attention term of a 64K context moves the optimum 15% below the 6ND closed form: a
    bracket of 5% around it cannot hold it, and the search ends on its edge."""
    target = Target(compute=1e20, context=65536)
    assert recommend(sp_laws(), target, loss_law=CHIN).n_params > 0  # the 1000× bracket holds it
    monkeypatch.setattr(compute_optimal, "_BRACKET", 1.05)
    with pytest.raises(TargetError, match=r"no compute optimum in N .*edge of the search"):
        recommend(sp_laws(), target, loss_law=CHIN)
    r = recommend(sp_laws(), target, loss_law=CHIN, force=True)
    assert any("edge of the search" in w and w.endswith(FORCED) for w in r.warnings)


def test_the_loss_law_counts_in_the_extrapolation_and_its_prediction_says_so() -> None:
    r = recommend(sp_laws(), Target(n_params=1e8, tokens=2e10), loss_law=CHIN)
    assert r.extrapolation["tokens"] == pytest.approx(20.0)  # the LR and batch laws': 2×
    loss = [w for w in r.warnings if w.startswith("the predicted loss") and "extrapolated" in w]
    assert loss and isinstance(loss[0], Doubt) and "D 2e+10, 20× its largest fitted" in loss[0]
    assert _rows(r)["predicted loss"][1].startswith("loss law, extrapolated: D 2e+10")
    inside = recommend(sp_laws(), Target(n_params=1e7, tokens=1e9), loss_law=CHIN)
    assert _rows(inside)["predicted loss"][1] == "loss law"
    assert not any("predicted loss" in w and "extrapolated" in w for w in inside.warnings)


# ---- 2. the proxies' context ------------------------------------------------------------------


def test_the_runs_context_is_held_and_kept_by_a_fit() -> None:
    runs = pd.DataFrame(
        {"n_params": [1e6, 2e6], "tokens": [1e8, 2e8], "flops": [1.0, 2.0], "seq_len": [128, 256]}
    )
    conv = provenance.runs_conventions(runs)
    assert conv.held["seq_len"] == (128.0, 256.0)
    fitted = conv.with_held({"tokens": (1e8, 2e8)})  # (what a fit does with its cells' ranges)
    assert fitted.held == {"tokens": (1e8, 2e8), "seq_len": (128.0, 256.0)}
    old = Conventions.from_json({"held": {"tokens": [1e8, 2e8]}}, law={"schema_version": 2})
    assert "seq_len" not in old.held  # a law stored before it loads, holding no context


def test_a_target_context_beyond_the_proxies_is_said() -> None:
    laws = sp_laws()
    lr = laws["lr"]
    laws["lr"] = replace(lr, conventions=lr.conventions.with_held({"seq_len": (128.0, 128.0)}))
    r = recommend(laws, Target(n_params=1e8, tokens=1e10, context=4096))
    said = [w for w in r.warnings if "does not model context" in w]
    assert said and "context 4.1e+03 (its cells: 128)" in said[0]
    near = recommend(laws, Target(n_params=1e8, tokens=1e10, context=128))
    assert not any("context" in w for w in near.warnings)


# ---- 3. the ramp-up's steps -------------------------------------------------------------------


def _megatron_batch(ru: RampUp, global_batch: int, consumed: int) -> int:
    """The global batch at ``consumed`` samples (num_microbatches_calculator.py's ramp-up)."""
    if consumed > ru.ramp_samples:
        return global_batch
    increments = (global_batch - ru.start_sequences) // ru.increment_sequences
    per_increment = ru.ramp_samples / increments
    return ru.start_sequences + int(consumed / per_increment) * ru.increment_sequences


def _megatron_train_iters(ru: RampUp, global_batch: int, train_samples: int) -> int:
    """training.py's update_train_iters: the ramp's steps while at most its samples are
    consumed, then whole full batches of the rest (a last partial batch dropped)."""
    consumed, iterations = 0, 0
    while consumed <= ru.ramp_samples:
        consumed += _megatron_batch(ru, global_batch, consumed)
        iterations += 1
    return iterations + (train_samples - consumed) // global_batch


def _megatron_warmup_end(ru: RampUp, global_batch: int, warmup_samples: int) -> int:
    """The step on which a sample-based warmup ends: the scheduler steps by each batch's samples
    (opt_param_scheduler.step(increment=global batch))."""
    consumed, steps = 0, 0
    while consumed < warmup_samples:
        consumed += _megatron_batch(ru, global_batch, consumed)
        steps += 1
    return steps


def test_a_ramp_up_counts_its_steps_as_megatron_runs_them() -> None:
    ru = RampUp(start_sequences=256, increment_sequences=256, ramp_samples=146484, ramp_tokens=0)
    for samples in (146484, 3_000_000, 3_000_001, 3_001_535):
        assert ru.train_iterations(1536, samples) == _megatron_train_iters(ru, 1536, samples)
    for samples in (100, 146484, 3_000_000):
        assert ru.iterations(1536, samples) == _megatron_warmup_end(ru, 1536, samples)


def test_the_recipe_says_the_steps_and_warmup_of_its_ramp_up() -> None:
    hw = Hardware(gpus=64, gpu_memory_gb=80.0)
    r = recommend(sp_laws(), Target(width=2048, depth=24, context=2048, tokens=2e11), hw,
                  global_batch=1536, rampup=True)  # fmt: skip
    assert r.rampup is not None
    total, warm = r.rampup_steps()
    assert total == _megatron_train_iters(r.rampup, 1536, math.ceil(r.tokens / r.seq_len))
    assert warm == _megatron_warmup_end(r.rampup, 1536, r.warmup_steps * 1536)
    assert total > r.total_steps and warm > r.warmup_steps
    note = _rows(r)["steps"][1]
    assert f"with the ramp-up {total} (+{total - r.total_steps}; Megatron-LM < 0.18's" in note
    assert "one more from 0.18 when the last batch is partial" in note  # (a review)
    assert f"ending at step {warm}" in note
    d = json.loads(json.dumps(r.to_dict()))
    assert (d["rampup"]["total_steps"], d["rampup"]["warmup_steps"]) == (total, warm)
    assert recipe_from_dict(d) == r
    d["rampup"]["total_steps"] += 1
    with pytest.raises(TargetError, match=r"rampup\.total_steps"):
        recipe_from_dict(d)


# ---- 4. the output layer in the time ----------------------------------------------------------


def test_the_time_counts_the_output_layer_and_the_laws_flops_do_not() -> None:
    hw = Hardware(gpus=8, peak_tflops=989.0, mfu=0.4)
    target = Target(width=2048, depth=24, vocab=256000, context=2048, tokens=1e11)
    r = recommend(sp_laws(), target, hw)
    head = 6.0 * 256000 * 2048 * 1e11
    assert memory.head_flops(256000, 2048, 1e11) == pytest.approx(head)
    assert r.train_flops == pytest.approx(r.flops + head)
    assert r.train_time_s == pytest.approx(r.train_flops / (8 * 989e12 * 0.4))
    assert r.flops == pytest.approx(memory.train_flops(r.n_params, 1e11, depth=24, width=2048,
                                                       seq_len=2048))  # fmt: skip
    scale = law_scale(sp_laws()["lr"], n_params=r.n_params, tokens=1e11,
                      width=2048, depth=24, seq_len=2048)  # fmt: skip
    assert scale["flops"] == pytest.approx(r.flops)  # a law's flops as it was fitted: no head
    assert r.to_dict()["train_flops"] == pytest.approx(r.train_flops)
    assert "output layer" in _rows(r)["time"][1]


# ---- 5. the recomputed layer ------------------------------------------------------------------


def test_recomputation_keeps_the_layer_being_recomputed() -> None:
    s, h, L, V = 4096, 4096, 32, 32000
    shape = {"seq_len": s, "width": h, "depth": L, "heads": 32, "vocab": V}
    got = memory.activation_bytes_per_sample(**shape, recompute=True)
    assert got == pytest.approx(L * 2 * s * h + 34 * s * h + 4 * s * V)
    no_flash = memory.activation_bytes_per_sample(**shape, recompute=True, flash_attention=False)
    assert no_flash == pytest.approx(L * 2 * s * h + s * h * (34 + 5 * 32 * s / h) + 4 * s * V)


# ---- 6. advice that can be followed -----------------------------------------------------------


def test_memory_advice_names_only_what_is_not_on() -> None:
    hw = Hardware(gpus=1, gpu_memory_gb=8.0, zero_stage=3, recompute=True)
    r = recommend(sp_laws(), Target(width=8192, depth=64, tokens=1e10, context=2048), hw)
    said = [w for w in r.warnings if "does not fit at micro batch 1" in w]
    assert said and "ZeRO sharding, activation recomputation" not in said[0]
    assert "--recompute" not in said[0] and "more GPUs (recommend's --gpus" in said[0]
    assert "tensor or pipeline parallelism, which this recipe does not plan" in said[0]


def test_a_ramp_up_at_micro_batch_1_is_not_told_to_shrink_it() -> None:
    hw = Hardware(gpus=8, micro_batch=1)
    r = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10), hw, global_batch=8, rampup=True)
    said = [w for w in r.warnings if w.startswith("no batch ramp-up")]
    assert said and "--micro-batch" not in said[0] and "fewer GPUs (--gpus)" in said[0]


def test_an_absurd_training_time_is_said() -> None:
    hw = Hardware(gpus=1, peak_tflops=989.0)
    r = recommend(sp_laws(), Target(n_params=7e10, tokens=2e12), hw, force=True)
    said = [w for w in r.warnings if "years on 1 GPU" in w]
    assert said and isinstance(said[0], Doubt) and "--gpus" in said[0]
    quick = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10), Hardware(peak_tflops=989.0))
    assert not any("years on" in w for w in quick.warnings)


# ---- 7. compute with D/N ----------------------------------------------------------------------


def test_compute_with_tokens_per_param_gives_n_and_d() -> None:
    r = recommend(sp_laws(), Target(compute=1e21, tokens_per_param=20, context=2048))
    assert r.flops == pytest.approx(1e21)
    assert r.tokens / r.n_params == pytest.approx(20, rel=0.05)  # the inferred shape's rounding
    n = compute_optimal.n_for_compute_and_ratio(1e21, 20, 2048)
    assert n == pytest.approx(r.n_params)
    assert n < math.sqrt(1e21 / (6 * 20))  # the attention term costs some N
    with pytest.raises(TargetError, match="give one of tokens"):
        Target(n_params=1e9, compute=1e21, tokens_per_param=20)


# ---- 8. the table -----------------------------------------------------------------------------


def test_small_ratios_and_times_keep_their_digits() -> None:
    r = recommend(sp_laws(), Target(n_params=1e8, tokens=3.6e4))
    assert _rows(r)["tokens"][1] == "0.00036 per parameter"
    assert time_text(0.006) == "0.006 s" and time_text(600.0) == "10.0 min"
    assert table.time_text(7200.0) == "2.00 h"


def test_heads_inferred_are_named_and_a_single_wide_head_doubted() -> None:
    r = recommend(sp_laws(), Target(width=1000, depth=8, tokens=1e10))
    said = [w for w in r.warnings if w.startswith("no heads given")]
    assert said and isinstance(said[0], Doubt) and "1 of size 1000" in said[0]
    ok = recommend(sp_laws(), Target(width=4096, depth=8, tokens=1e10))
    assert _rows(ok)["model"][1].endswith("32 heads of 128 (inferred)")
    assert not any(w.startswith("no heads given") for w in ok.warnings)


def test_a_target_below_the_ladder_reads_below() -> None:
    r = recommend(sp_laws(), Target(n_params=1e4, tokens=1e9))
    assert r.extrapolation_factor == pytest.approx(0.1)  # (the batch law's D: 1e9 / 1e10)
    assert r.extrapolation_below == {"n_params": pytest.approx(100.0)}
    value, note = _rows(r)["extrapolation"]
    assert value.startswith("below") and "n_params 100× below it" in note
    assert recipe_from_dict(json.loads(json.dumps(r.to_dict()))) == r
    inside = recommend(sp_laws(), Target(n_params=1e7, tokens=1e9))
    assert inside.extrapolation_below == {} and not _rows(inside)["extrapolation"][0].startswith(
        "below"
    )


def test_a_recipe_of_schema_3_still_reads() -> None:
    r = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10))
    d = r.to_dict()
    d["schema_version"] = 3
    for k in ("train_flops", "extrapolation_below"):
        d.pop(k)
    assert recipe_from_dict(d).flops == r.flops
    # its time had left the output layer out: read, it is the time of train_flops (a review)
    timed = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10, vocab=256000),
                      Hardware(gpus=8, peak_tflops=989.0))  # fmt: skip
    old = {**timed.to_dict(), "schema_version": 3}
    old["train_time_s"] = timed.flops / (8 * 989e12 * 0.4)
    for k in ("train_flops", "extrapolation_below"):
        old.pop(k)
    assert recipe_from_dict(old).train_time_s == pytest.approx(timed.train_time_s)


# ---- the exports say the same ----------------------------------------------------------------


def test_the_exports_give_the_ramp_ups_steps_and_a_target_below_the_ladder() -> None:
    """Megatron's note had said only "more than N iterations" and a "later" warmup; the headers
    gave a factor below 1 alone for a target under the ladder."""
    from sweeper.recipe.export import export_recipe

    hw = Hardware(gpus=64, gpu_memory_gb=80.0)
    r = recommend(sp_laws(), Target(width=2048, depth=24, context=2048, tokens=2e11), hw,
                  global_batch=1536, rampup=True)  # fmt: skip
    total, warm = r.rampup_steps()
    text = export_recipe(r, "megatron", "0.17")  # (from 0.18 the last partial batch counts)
    assert f"make Megatron run {total} iterations (not {r.total_steps})" in text
    assert f"end the warmup at iteration {warm} (not {r.warmup_steps})" in text
    runs = f"with the batch ramp-up: {total} steps, the warmup ending at step {warm}"
    assert runs in export_recipe(r, "megatron", "0.17")
    # (a file without the ramp: the header had given its steps beside "trains at the full batch")
    flat = export_recipe(r, "nanogpt")
    assert runs not in flat
    assert f"the batch ramp-up is not in this file: it runs {r.total_steps} steps" in flat
    low = recommend(sp_laws(), Target(n_params=1e4, tokens=1e9))
    assert "below the smallest proxy: n_params 100×" in export_recipe(low, "litgpt")


def test_check_names_a_context_beyond_the_proxies() -> None:
    """`check` compared no context with the proxies' (recommend's rule, above)."""
    from sweeper.recipe.check import CheckValues, check_recipe

    laws = sp_laws()
    lr = laws["lr"]
    laws = {"lr": replace(lr, conventions=lr.conventions.with_held({"seq_len": (128.0, 128.0)}))}
    v = CheckValues(n_params=1e8, tokens=1e10, lr=1e-3, batch_tokens=None, layers=12,
                    d_model=832, context=4096)  # fmt: skip
    said = [w for w in check_recipe(laws, v).warnings if "does not model context" in w]
    assert said and "context 4.1e+03 (its cells: 128)" in said[0]
    # (without --context: the 2048 check assumes and says it assumes, as recommend: a review)
    assumed = check_recipe(laws, replace(v, context=None)).warnings
    assert any("context 2.05e+03 (its cells: 128)" in w for w in assumed), assumed


def test_a_loss_laws_extrapolation_asks_for_no_lr_run() -> None:
    """The loss law's extrapolation (below its smallest N, or very far in D) had ended in
    "confirm the LR with a short run", which it says nothing about (a review)."""
    below = recommend(sp_laws(), Target(n_params=1e5, tokens=1e7), loss_law=CHIN)
    said = [w for w in below.warnings if w.startswith("loss law") and "below the smallest" in w]
    assert said and said[0].endswith("(its predicted loss is its form's)")
    lr_only = {"lr": sp_laws()["lr"]}  # (a law of N: the loss law alone is far in D)
    far = recommend(lr_only, Target(n_params=1e7, tokens=2e12), loss_law=CHIN, force=True)
    very = [w for w in far.warnings if w.startswith("very far extrapolation")]
    assert very and "confirm the LR" not in very[0], very

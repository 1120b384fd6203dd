"""Memory per GPU and training time against hand-computed cases; the optimizer states of each
optimizer the proxies run (AdamW, Muon, Adafactor, SGD), in the estimate and in the recipe."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from proxy_models.hparams import OPTIMIZERS
from sweeper.errors import TargetError
from sweeper.recipe.hardware import Hardware
from sweeper.recipe.memory import (
    GIB,
    MEMORY_OPTIMIZERS,
    activation_bytes_per_sample,
    bytes_per_param,
    estimate_memory,
    train_flops,
    train_time_s,
)
from sweeper.recipe.published import published_laws
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.recommend import recommend
from sweeper.recipe.target import Target

SHAPE: dict[str, Any] = {"seq_len": 2048, "width": 1024, "depth": 24, "heads": 16, "vocab": 50000}


def _est(**kw):
    args = {"n_params_total": 1e9, "micro_batch": 1, **SHAPE, **kw}
    return estimate_memory(**args)


def test_fp32_adam_is_16_bytes_per_param() -> None:
    assert bytes_per_param("fp32") == (4, 4, 8)
    m = _est(precision="fp32")
    assert m.weights_gb * GIB == pytest.approx(4e9)
    assert m.grads_gb * GIB == pytest.approx(4e9)
    assert m.optimizer_gb * GIB == pytest.approx(8e9)
    assert m.static_gb * GIB == pytest.approx(16e9)
    assert m.bytes_per_param == 16


def test_bf16_mixed_with_fp32_master_is_16_bytes_plus_activations() -> None:
    assert bytes_per_param("bf16") == (2, 2, 12)
    m = _est(precision="bf16", micro_batch=4)
    assert m.weights_gb * GIB == pytest.approx(2e9)
    assert m.grads_gb * GIB == pytest.approx(2e9)
    assert m.optimizer_gb * GIB == pytest.approx(12e9)
    s, b, h, L, V = 2048, 4, 1024, 24, 50000
    act = L * 34 * s * b * h + 4 * s * b * V  # Korthikanti with flash attention + fp32 logits
    assert m.activations_gb * GIB == pytest.approx(act)
    assert m.total_gb * GIB == pytest.approx(16e9 + act)


def test_activation_terms() -> None:
    s, h, a, L, V = 2048, 1024, 16, 24, 50000
    logits = 4 * s * V
    flash = activation_bytes_per_sample(**SHAPE)
    full = activation_bytes_per_sample(**SHAPE, flash_attention=False)
    recompute = activation_bytes_per_sample(**SHAPE, recompute=True)
    fp32 = activation_bytes_per_sample(**SHAPE, precision="fp32")
    assert flash == pytest.approx(L * 34 * s * h + logits)
    assert full == pytest.approx(L * s * h * (34 + 5 * a * s / h) + logits)
    assert recompute == pytest.approx(L * 2 * s * h + 34 * s * h + logits)
    assert fp32 == pytest.approx(2 * L * 34 * s * h + logits)


@pytest.mark.parametrize(
    ("stage", "weights", "grads", "optim"),
    [
        (0, 2e9, 2e9, 12e9),
        (1, 2e9, 2e9, 1.5e9),
        (2, 2e9, 0.25e9, 1.5e9),
        (3, 0.25e9, 0.25e9, 1.5e9),
    ],
)
def test_zero_stages_shard_across_data_parallel(stage, weights, grads, optim) -> None:
    m = _est(zero_stage=stage, data_parallel=8)
    assert (m.weights_gb * GIB, m.grads_gb * GIB, m.optimizer_gb * GIB) == pytest.approx(
        (weights, grads, optim)
    )


def test_fits_and_largest_micro_batch() -> None:
    m = _est(gpu_memory_gb=40.0, micro_batch=1)
    usable = 40.0 * GIB * 0.9
    per_sample = activation_bytes_per_sample(**SHAPE)
    assert m.max_micro_batch == math.floor((usable - 16e9) / per_sample)
    at_max = _est(gpu_memory_gb=40.0, micro_batch=m.max_micro_batch)
    over = _est(gpu_memory_gb=40.0, micro_batch=m.max_micro_batch + 1)
    assert at_max.fits is True and over.fits is False
    # static part alone above the usable memory: nothing fits
    tiny = _est(gpu_memory_gb=10.0)
    assert tiny.fits is False and tiny.max_micro_batch == 0
    assert _est().fits is None and _est().max_micro_batch is None


def test_training_flops_and_time() -> None:
    assert train_flops(1e9, 1e10) == pytest.approx(6e19)
    with_attn = train_flops(1e9, 1e10, depth=24, width=1024, seq_len=2048)
    assert with_attn == pytest.approx(6e19 + 6 * 24 * 2048 * 1024 * 1e10)
    assert train_time_s(6e19, gpus=8, peak_tflops=1000.0, mfu=0.5) == pytest.approx(15000.0)


@pytest.mark.parametrize(
    "kw",
    [
        {"precision": "fp16"},
        {"micro_batch": 0},
        {"n_params_total": -1.0},
        {"zero_stage": 4},
        {"gpu_memory_gb": 0.0},
        {"optimizer": "lamb"},
        {"optimizer": "muon", "n_matrix_params": 2e9},
        {"n_matrix_params": -1.0},
    ],
)
def test_invalid_input_raises_target_error(kw) -> None:
    with pytest.raises(TargetError):
        _est(**kw)


def test_invalid_time_inputs() -> None:
    with pytest.raises(TargetError, match="mfu"):
        train_time_s(1e20, gpus=1, peak_tflops=100.0, mfu=1.5)


# --- the optimizer's states (an audit: a Muon recipe's 7B target printed AdamW's 81.3 GiB) ---

#: 1e9 parameters, 8e8 of them hidden matrices (SHAPE's vocab and width give 2·V·d = 1.024e8)
N_TOTAL, N_MATRIX = 1e9, 8e8


def test_every_optimizer_the_proxies_run_is_sized() -> None:
    assert set(MEMORY_OPTIMIZERS) == set(OPTIMIZERS)


@pytest.mark.parametrize(
    ("optimizer", "bf16", "fp32"),
    [
        # (matrix, rest) optimizer bytes: bf16 adds the 4-byte fp32 master copy to the states
        ("adamw", (12, 12), (8, 8)),
        ("muon", (8, 12), (4, 8)),
        ("adafactor", (4, 4), (0, 0)),
        ("sgd", (8, 8), (4, 4)),
    ],
)
def test_bytes_per_param_by_optimizer(optimizer, bf16, fp32) -> None:
    for precision, (matrix, rest), wg in (("bf16", bf16, (2, 2)), ("fp32", fp32, (4, 4))):
        assert bytes_per_param(precision, optimizer) == (*wg, matrix)
        assert bytes_per_param(precision, optimizer, matrix=False) == (*wg, rest)


def test_adamw_is_unchanged_by_the_matrix_share() -> None:
    default = _est()
    for m in (_est(optimizer="adamw"), _est(optimizer="adamw", n_matrix_params=N_MATRIX)):
        assert m == default
    assert default.optimizer_gb * GIB == pytest.approx(12e9)
    assert default.optimizer_bytes_per_param == pytest.approx(12.0)


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_muon_keeps_one_state_on_the_hidden_matrices(precision) -> None:
    adamw = _est(precision=precision)
    muon = _est(precision=precision, optimizer="muon", n_matrix_params=N_MATRIX)
    # one fp32 state (4 bytes) fewer on each hidden matrix parameter, AdamW's on the rest
    assert (adamw.optimizer_gb - muon.optimizer_gb) * GIB == pytest.approx(4 * N_MATRIX)
    master = 4 if precision == "bf16" else 0
    want = N_MATRIX * (master + 4) + (N_TOTAL - N_MATRIX) * (master + 8)
    assert muon.optimizer_gb * GIB == pytest.approx(want)
    assert muon.optimizer_bytes_per_param == pytest.approx(want / N_TOTAL)
    assert (muon.weights_gb, muon.grads_gb) == (adamw.weights_gb, adamw.grads_gb)
    assert muon.bytes_per_param == adamw.bytes_per_param - 3  # 16 − 4·0.8 = 12.8, rounded
    # the matrices default to all but the untied embedding and readout, 2·V·d
    by_shape = _est(precision=precision, optimizer="muon")
    n_embed = 2 * SHAPE["vocab"] * SHAPE["width"]
    assert (adamw.optimizer_gb - by_shape.optimizer_gb) * GIB == pytest.approx(
        4 * (N_TOTAL - n_embed)
    )


@pytest.mark.parametrize(("precision", "master"), [("bf16", 4), ("fp32", 0)])
def test_adafactor_keeps_factored_second_moments_only(precision, master) -> None:
    m = _est(precision=precision, optimizer="adafactor")
    # no first moment; row + column second moments: at most 8/d bytes per parameter
    want = N_TOTAL * (master + 8 / SHAPE["width"])
    assert m.optimizer_gb * GIB == pytest.approx(want)
    assert m.bytes_per_param == 8  # bf16 2 + 2 + 4 master; fp32 4 + 4


@pytest.mark.parametrize(("precision", "want"), [("bf16", 8e9), ("fp32", 4e9)])
def test_sgd_keeps_one_momentum_buffer(precision, want) -> None:
    m = _est(precision=precision, optimizer="sgd")
    assert m.optimizer_gb * GIB == pytest.approx(want)
    assert m.bytes_per_param == 12  # bf16 2 + 2 + 4 master + 4; fp32 4 + 4 + 4


def test_zero_shards_the_blended_optimizer_states() -> None:
    whole = _est(optimizer="muon", n_matrix_params=N_MATRIX)
    sharded = _est(optimizer="muon", n_matrix_params=N_MATRIX, zero_stage=1, data_parallel=8)
    assert sharded.optimizer_gb == pytest.approx(whole.optimizer_gb / 8)
    assert sharded.optimizer_bytes_per_param == pytest.approx(whole.optimizer_bytes_per_param)


def test_a_smaller_state_fits_a_larger_micro_batch() -> None:
    per_sample = activation_bytes_per_sample(**SHAPE)
    usable = 40.0 * GIB * 0.9
    sizes = {}
    statics = {"adamw": 16e9, "muon": 12e9 + 4 * 1.024e8, "adafactor": 8e9 + 8 / 1024 * 1e9}
    for opt, static in statics.items():
        m = _est(gpu_memory_gb=40.0, optimizer=opt)
        assert m.static_gb * GIB == pytest.approx(static)
        sizes[opt] = m.max_micro_batch
        assert sizes[opt] == math.floor((usable - m.static_gb * GIB) / per_sample)
    assert sizes["adamw"] < sizes["muon"] < sizes["adafactor"]


def _recipe(optimizer: str, hw: Hardware) -> Recipe:
    """DeepSeek's laws with the LR law measured under ``optimizer``, for a 7B target."""
    laws = published_laws("deepseek")
    lr = laws["lr"]
    laws = {**laws, "lr": replace(lr, conventions=replace(lr.conventions, optimizer=optimizer))}
    return recommend(laws, Target(n_params=7e9, tokens=1.4e11, vocab=32000), hw)


@pytest.mark.parametrize(
    ("optimizer", "saved"),
    [
        ("muon", 4 * 7e9),  # one fp32 state fewer on the 7e9 hidden matrices
        ("sgd", 4 * 7e9 + 4 * 2 * 32000 * 4224),  # one fewer on every parameter
    ],
)
def test_recipe_sizes_its_optimizers_states(optimizer, saved) -> None:
    adamw, other = _recipe("adamw", Hardware()), _recipe(optimizer, Hardware())
    assert other.optimizer == optimizer and adamw.optimizer == "adamw"
    assert other.width == adamw.width == 4224  # (the shape inferred from N)
    assert adamw.memory.optimizer_gb * GIB == pytest.approx(12 * adamw.n_params_total)
    assert (adamw.memory.optimizer_gb - other.memory.optimizer_gb) * GIB == pytest.approx(saved)
    assert (adamw.memory.total_gb - other.memory.total_gb) * GIB == pytest.approx(saved)


def test_recipe_adafactor_keeps_the_master_copy_only() -> None:
    r = _recipe("adafactor", Hardware())
    want = r.n_params_total * (4 + 8 / r.width)
    assert r.memory.optimizer_gb * GIB == pytest.approx(want)


def test_recipe_micro_batch_follows_the_smaller_state() -> None:
    hw = Hardware(gpus=8, gpu_memory_gb=141.0)
    adamw, muon = _recipe("adamw", hw), _recipe("muon", hw)
    assert adamw.micro_batch_size == adamw.memory.max_micro_batch == 1
    assert muon.micro_batch_size == muon.memory.max_micro_batch == 4
    assert muon.memory.fits and muon.memory.total_gb <= 141.0 * 0.9

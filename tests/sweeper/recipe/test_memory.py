"""Memory per GPU and training time against hand-computed cases."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sweeper.errors import TargetError
from sweeper.recipe.memory import (
    GIB,
    activation_bytes_per_sample,
    bytes_per_param,
    estimate_memory,
    train_flops,
    train_time_s,
)

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
    assert recompute == pytest.approx(L * 2 * s * h + logits)
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
    ],
)
def test_invalid_input_raises_target_error(kw) -> None:
    with pytest.raises(TargetError):
        _est(**kw)


def test_invalid_time_inputs() -> None:
    with pytest.raises(TargetError, match="mfu"):
        train_time_s(1e20, gpus=1, peak_tflops=100.0, mfu=1.5)

"""recommend(): batch identities, rounding, DeepSeek 7B reproduction, parametrization and
extrapolation guards, defaults, loss-law budgets, JSON round trip."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sweeper.errors import TargetError
from sweeper.laws import LossLaw, PowerLaw
from sweeper.published import published_laws
from sweeper.recommend import (
    Hardware,
    Recipe,
    Target,
    infer_shape,
    law_scale,
    recipe_from_dict,
    recommend,
    round_global_batch,
)

DEEPSEEK_7B = Target(width=4096, depth=30, heads=32, vocab=102400, context=4096, tokens=2e12)
CONV = {
    "n_params": "non-embedding",
    "batch": "tokens",
    "flops": "6ND",
    "lr": "peak AdamW LR, warmup + cosine to 10%",
}


def power_law(
    target: str,
    a: float,
    exps: dict[str, float],
    *,
    domain: dict[str, tuple[float, float]] | None = None,
    parametrization: str | None = "sp",
    base_width: int | None = None,
    spread: float = 0.0,
    **kw,
) -> PowerLaw:
    """A hand-made law y = a·Π x^b; ``spread`` > 0 adds seeded bootstrap samples."""
    boot: tuple[tuple[float, ...], ...] = ()
    if spread:
        rng = np.random.default_rng(0)
        center = np.array([math.log(a), *exps.values()])
        boot = tuple(tuple(r) for r in center + rng.normal(0, spread, (200, len(center))))
    return PowerLaw(
        target=target,
        predictors=tuple(exps),
        source="hand",
        method="test",
        conventions=CONV,
        parametrization=parametrization,
        base_width=base_width,
        domain=domain if domain is not None else {k: (1e6, 1e8) for k in exps},
        log_prefactor=math.log(a),
        exponents=exps,
        exponents_ci={k: (v - 0.05, v + 0.05) for k, v in exps.items()},
        boot_coefs=boot,
        residual_std=0.05 if spread else 0.0,
        n_cells=6,
        **kw,
    )


def sp_laws(**kw) -> dict[str, PowerLaw]:
    dom = {"n_params": (1e6, 1e8), "tokens": (1e8, 1e10)}
    return {
        "lr": power_law("lr", 2.0, {"n_params": -0.3}, domain={"n_params": dom["n_params"]}, **kw),
        "batch_tokens": power_law(
            "batch_tokens", 0.5, {"tokens": 0.5}, domain={"tokens": dom["tokens"]}, **kw
        ),
    }


def test_deepseek_7b_reproduction() -> None:
    r = recommend(published_laws("deepseek"), DEEPSEEK_7B)
    assert r.lr.value == pytest.approx(4.2e-4, rel=0.05)
    assert r.global_batch_sequences == pytest.approx(2304, rel=0.10)  # published 2304 × 4096
    assert r.global_batch_sequences == pytest.approx(2250, abs=30)  # the law's own value
    assert r.seq_len == 4096
    assert r.extrapolation_factor is not None and r.extrapolation_factor > 1000
    assert any("very far extrapolation" in w for w in r.warnings)
    assert any("measured as 'peak AdamW LR, multi-step schedule'" in w for w in r.warnings)


def test_deepseek_scale_uses_m_times_d() -> None:
    law = published_laws("deepseek")["lr"]
    L, d, T, D = 30, 4096, 4096, 2e12
    s = law_scale(
        law, n_params=12 * L * d**2, tokens=D, width=d, depth=L, seq_len=T, shape_given=True
    )
    assert s["flops"] == pytest.approx((72 * L * d**2 + 12 * L * d * T) * D)
    step = published_laws("steplaw")["lr"]
    s = law_scale(step, n_params=1e9, tokens=D, width=d, depth=L, seq_len=T, shape_given=False)
    assert s["flops"] == pytest.approx(6 * 1e9 * D)
    assert s["n_params"] == 1e9


@pytest.mark.parametrize(
    ("want", "unit", "expected"),
    [(1000, 64, 1024), (100, 64, 128), (90, 64, 64), (2246.3, 1, 2246), (0.3, 8, 8)],
)
def test_round_global_batch_nearest_in_log_space(want, unit, expected) -> None:
    assert round_global_batch(want, unit) == expected


def test_round_global_batch_properties() -> None:
    rng = np.random.default_rng(0)
    for want, unit in zip(rng.uniform(1, 5000, 200), rng.integers(1, 256, 200), strict=True):
        g = round_global_batch(float(want), int(unit))
        assert g % unit == 0 and g >= unit
        # no other multiple of unit is closer in log space
        for k in (g // unit - 1, g // unit + 1):
            if k >= 1:
                assert abs(math.log(g / want)) <= abs(math.log(k * unit / want)) + 1e-12


@pytest.mark.parametrize(
    "hw",
    [
        Hardware(),
        Hardware(gpus=8),
        Hardware(gpus=8, micro_batch=4),
        Hardware(gpus=3, micro_batch=5, seq_len=1024),
        Hardware(gpus=16, gpu_memory_gb=80.0),
        Hardware(gpus=4, gpu_memory_gb=24.0, precision="fp32"),
    ],
)
def test_batch_identity_holds(hw: Hardware) -> None:
    r = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10), hw)
    assert r.global_batch_sequences == r.micro_batch_size * r.grad_accum_steps * r.data_parallel
    assert r.batch_tokens.value == r.global_batch_sequences * r.seq_len
    assert r.global_batch_sequences % (r.micro_batch_size * hw.gpus) == 0
    if hw.micro_batch:
        assert r.micro_batch_size == hw.micro_batch
    assert r.total_steps == math.ceil(r.tokens / r.batch_tokens.value)


def test_micro_batch_sized_to_memory() -> None:
    r = recommend(
        sp_laws(), Target(width=1024, depth=24, tokens=1e10), Hardware(gpus=2, gpu_memory_gb=24.0)
    )
    assert r.memory.fits is True
    assert r.memory.max_micro_batch is not None and r.micro_batch_size <= r.memory.max_micro_batch
    # the law wants 0.5·1e10^0.5 = 5e4 tokens ≈ 24.4 sequences of 2048: rounded within 2%
    assert abs(math.log(r.batch_tokens.value / r.batch_tokens_law)) <= 0.02


def test_global_batch_override_must_divide() -> None:
    target = Target(n_params=1e8, tokens=1e10)
    r = recommend(sp_laws(), target, Hardware(gpus=2, micro_batch=4), global_batch=64)
    assert (r.global_batch_sequences, r.grad_accum_steps) == (64, 8)
    # micro batch chosen by memory: the largest that divides the fixed global batch
    sized = recommend(sp_laws(), target, Hardware(gpus=2, gpu_memory_gb=80.0), global_batch=1000)
    assert sized.global_batch_sequences == 1000
    assert 1000 % (sized.micro_batch_size * 2) == 0 and sized.micro_batch_size > 1
    with pytest.raises(TargetError, match="not a multiple of micro_batch 1 × gpus 3"):
        recommend(sp_laws(), target, Hardware(gpus=3), global_batch=1000)
    with pytest.raises(TargetError, match="not a multiple of micro_batch 3"):
        recommend(sp_laws(), target, Hardware(micro_batch=3), global_batch=1000)


def test_tokens_below_one_step_is_refused() -> None:
    with pytest.raises(TargetError, match="less than one optimizer step"):
        recommend(sp_laws(), Target(n_params=1e8, tokens=1000.0))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"n_params": 0.0, "tokens": 1e9}, "n_params must be positive"),
        ({"n_params": -1e9, "tokens": 1e9}, "n_params must be positive"),
        ({"n_params": 1e9, "tokens": 1e9, "compute": 1e20}, "one of tokens, compute"),
        ({"width": 1024, "tokens": 1e9}, "width and depth together"),
        ({"width": 1000, "depth": 4, "heads": 16, "tokens": 1e9}, "heads must divide width"),
        ({"tokens": 1e9}, "give n_params"),
        ({"n_params": 1e9, "tokens": 1e9, "parametrization": "ntk"}, "parametrization"),
        ({"n_params": 1e9, "tokens": 1e9, "base_width": 256}, "base_width applies"),
        ({"n_params": 1e9, "tokens": -5.0}, "tokens must be positive"),
    ],
)
def test_bad_targets(kw, match) -> None:
    with pytest.raises(TargetError, match=match):
        Target(**kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"gpus": 0}, "gpus"), ({"mfu": 0.0}, "mfu"), ({"precision": "fp8"}, "precision")],
)
def test_bad_hardware(kw, match) -> None:
    with pytest.raises(TargetError, match=match):
        Hardware(**kw)


def test_mup_law_refused_for_sp_target_and_vice_versa() -> None:
    mup = sp_laws(parametrization="mup", base_width=256)
    with pytest.raises(TargetError, match="fitted under mup but the target is sp"):
        recommend(mup, Target(n_params=1e8, tokens=1e10))
    with pytest.raises(TargetError, match="fitted under sp but the target is mup"):
        recommend(
            sp_laws(), Target(n_params=1e8, tokens=1e10, parametrization="mup", base_width=256)
        )
    forced = recommend(mup, Target(n_params=1e8, tokens=1e10), force=True)
    assert any("(forced)" in w for w in forced.warnings)


def test_mup_recipe_records_base_width() -> None:
    mup = sp_laws(parametrization="mup", base_width=256)
    r = recommend(mup, Target(width=2048, depth=16, tokens=1e10, parametrization="mup"))
    assert r.parametrization == "mup" and r.base_width == 256
    assert r.init_std == pytest.approx(math.sqrt(2 / (5 * 256)))  # the base-width std
    with pytest.raises(TargetError, match="differs from the law's base width"):
        recommend(
            mup, Target(width=2048, depth=16, tokens=1e10, parametrization="mup", base_width=128)
        )


def test_extrapolation_warnings_at_10x_and_1000x() -> None:
    laws = sp_laws()  # largest proxy: N 1e8, D 1e10
    near = recommend(laws, Target(n_params=5e7, tokens=5e9))
    assert near.extrapolation_factor == pytest.approx(0.5)
    assert not any("extrapolation" in w for w in near.warnings)
    far = recommend(laws, Target(n_params=2e9, tokens=5e9))
    assert far.extrapolation_factor == pytest.approx(20.0)
    assert any(w.startswith("far extrapolation") for w in far.warnings)
    very = recommend(laws, Target(n_params=1e11, tokens=1e13))
    assert very.extrapolation_factor == pytest.approx(1000.0)
    assert any(w.startswith("very far extrapolation") for w in very.warnings)
    assert very.extrapolation == pytest.approx({"n_params": 1000.0, "tokens": 1000.0})


def test_poorly_constrained_law_warns() -> None:
    target = Target(width=512, depth=8, vocab=32000, context=1024, tokens=5e9)
    good = recommend(sp_laws(spread=0.01), target, Hardware(gpu_memory_gb=24.0))
    assert good.warnings == ()  # a well-fitted law inside its domain, everything given
    assert good.lr.low < good.lr.value < good.lr.high
    bad_lr = power_law("lr", 2.0, {"n_params": -0.3}, cv_error=0.8)
    bad_lr = PowerLaw(**{**bad_lr.__dict__, "exponents_ci": {"n_params": (-0.9, 0.2)}})
    r = recommend({**sp_laws(), "lr": bad_lr}, Target(n_params=5e7, tokens=5e9))
    assert any("leave-one-cell-out error" in w for w in r.warnings)
    assert any("exponent of n_params" in w for w in r.warnings)
    wide = recommend(sp_laws(spread=0.5), Target(n_params=5e7, tokens=5e9))
    assert any("interval spans" in w for w in wide.warnings)


def test_missing_batch_law_uses_named_step_law_fallback() -> None:
    r = recommend(published_laws("kaplan"), Target(n_params=1e9, tokens=2e10))
    assert r.provenance["batch_tokens"]["source"] == "steplaw"
    assert r.provenance["batch_tokens"]["fallback"] is True
    assert any("Step Law" in w and "fallback" in w for w in r.warnings)
    assert r.batch_tokens_law == pytest.approx(0.58 * 2e10**0.571)
    assert r.law_ids == ("kaplan:lr", "steplaw:batch_tokens")


def test_no_lr_law_refused() -> None:
    with pytest.raises(TargetError, match="no lr law"):
        recommend({"batch_tokens": sp_laws()["batch_tokens"]}, Target(n_params=1e8, tokens=1e10))


def test_defaults_follow_reference() -> None:
    r = recommend(sp_laws(), Target(width=768, depth=12, tokens=1e10))
    assert (r.adam_beta1, r.adam_beta2, r.weight_decay, r.grad_clip, r.z_loss) == (
        0.9,
        0.95,
        0.1,
        1.0,
        1e-4,
    )
    assert r.min_lr == pytest.approx(0.1 * r.lr.value)
    assert r.warmup_steps == min(2000, round(0.05 * r.total_steps))
    assert r.init_std == pytest.approx(math.sqrt(2 / (5 * 768)))
    assert r.schedule == "cosine"


def test_rampup_for_large_batches() -> None:
    r = recommend(published_laws("deepseek"), DEEPSEEK_7B, Hardware(gpus=64))
    ru = r.rampup
    assert ru is not None
    unit = r.micro_batch_size * r.data_parallel
    assert ru.start_sequences % unit == 0 and ru.increment_sequences % unit == 0
    assert ru.start_sequences < r.global_batch_sequences
    assert (r.global_batch_sequences - ru.start_sequences) % ru.increment_sequences == 0
    assert ru.ramp_tokens == pytest.approx(0.03 * r.tokens, rel=1e-3)
    assert recommend(published_laws("deepseek"), DEEPSEEK_7B, rampup=False).rampup is None
    small = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10))
    assert small.global_batch_sequences < 1024 and small.rampup is None


def test_inferred_shape_from_n() -> None:
    assert infer_shape(12 * 32 * 4096**2) == (4096, 32)
    w, d = infer_shape(1e8)
    assert w % 64 == 0 and 12 * d * w**2 == pytest.approx(1e8, rel=0.15)
    r = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10))
    assert r.shape_inferred and any("shape inferred" in w for w in r.warnings)


def test_compute_budget_and_tokens_per_param() -> None:
    r = recommend(sp_laws(), Target(width=512, depth=8, context=1024, compute=1e18))
    per_token = 6 * 12 * 8 * 512**2 + 6 * 8 * 1024 * 512
    assert r.tokens == pytest.approx(1e18 / per_token)
    r = recommend(sp_laws(), Target(n_params=1e8, tokens_per_param=20))
    assert r.tokens == pytest.approx(2e9)


def test_loss_law_gives_compute_optimal_budget() -> None:
    chin = LossLaw(
        target="loss",
        predictors=("n_params", "tokens"),
        source="hand",
        E=1.69,
        A=406.4,
        B=410.7,
        alpha=0.34,
        beta=0.28,
    )
    r = recommend(sp_laws(), Target(n_params=1e8), loss_law=chin)
    n_opt, _ = chin.compute_optimal(6 * 1e8 * r.tokens)
    assert n_opt == pytest.approx(1e8, rel=1e-6)
    assert r.predicted_loss == pytest.approx(chin.predict({"n_params": 1e8, "tokens": r.tokens}))
    only_c = recommend(sp_laws(), Target(compute=1e20), loss_law=chin)
    n, d = chin.compute_optimal(1e20)
    assert (only_c.n_params, only_c.tokens) == pytest.approx((n, d))
    with pytest.raises(TargetError, match="no loss law"):
        recommend(sp_laws(), Target(n_params=1e8))


def test_memory_and_time_reported() -> None:
    hw = Hardware(gpus=8, gpu_memory_gb=80.0, peak_tflops=989.0, mfu=0.4)
    r = recommend(sp_laws(), Target(width=2048, depth=24, vocab=50000, tokens=1e11), hw)
    assert r.n_params_total == pytest.approx(12 * 24 * 2048**2 + 2 * 50000 * 2048)
    assert r.memory_gb_per_gpu == pytest.approx(r.memory.total_gb)
    assert r.train_time_s == pytest.approx(r.flops / (8 * 989e12 * 0.4))
    assert r.to_dict()["memory_gb_per_gpu"] == pytest.approx(r.memory.total_gb)


def test_to_dict_has_required_keys_and_round_trips() -> None:
    r = recommend(published_laws("deepseek"), DEEPSEEK_7B, Hardware(gpus=64, gpu_memory_gb=80.0))
    d = json.loads(json.dumps(r.to_dict()))
    for key in (
        "lr",
        "batch_tokens",
        "global_batch_sequences",
        "micro_batch_size",
        "grad_accum_steps",
        "min_lr",
        "warmup_steps",
        "total_steps",
        "adam_beta1",
        "adam_beta2",
        "adam_eps",
        "weight_decay",
        "grad_clip",
        "init_std",
        "memory_gb_per_gpu",
        "extrapolation_factor",
        "warnings",
        "law_ids",
    ):
        assert key in d, key
    assert set(d["lr"]) == {"value", "low", "high"} and set(d["batch_tokens"]) == set(d["lr"])
    assert recipe_from_dict(d) == r


def test_recipe_from_dict_rejects_broken_identity_and_missing_keys() -> None:
    d = recommend(sp_laws(), Target(n_params=1e8, tokens=1e10), Hardware(gpus=2)).to_dict()
    with pytest.raises(TargetError, match="lacks lr"):
        recipe_from_dict({k: v for k, v in d.items() if k != "lr"})
    with pytest.raises(TargetError, match="global batch"):
        recipe_from_dict({**d, "micro_batch_size": d["micro_batch_size"] + 1})
    assert isinstance(recipe_from_dict(d), Recipe)

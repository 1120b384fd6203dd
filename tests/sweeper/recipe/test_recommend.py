"""recommend(): batch identities, rounding, DeepSeek 7B reproduction, parametrization and
extrapolation guards, defaults, loss-law budgets, JSON round trip."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import TargetError
from sweeper.fitting.conventions import FLOPS_6ND_NO_ATTENTION, Conventions
from sweeper.fitting.laws import LossLaw, PowerLaw
from sweeper.recipe.compare import target_point
from sweeper.recipe.doubts import extrapolation_text, quality_warnings
from sweeper.recipe.hardware import Hardware, round_global_batch
from sweeper.recipe.memory import train_flops
from sweeper.recipe.published import published_laws
from sweeper.recipe.recipe import Recipe, recipe_from_dict
from sweeper.recipe.recommend import recommend
from sweeper.recipe.scale import infer_shape, law_scale
from sweeper.recipe.table import recipe_rows
from sweeper.recipe.target import (
    N_SHAPE_TOLERANCE,
    CountedShape,
    Target,
    check_n_params_agrees,
)
from sweeper.recipe.warning_kinds import Assumed, Doubt

DEEPSEEK_7B = Target(width=4096, depth=30, heads=32, vocab=102400, context=4096, tokens=2e12)
#: a hand-made law's conventions: N non-embedding, D and batch in tokenizer tokens, the schedule
#: only in words
CONV = Conventions(
    tokens="tokens",
    vocab_size=None,
    data=None,
    lr="peak AdamW LR, warmup + cosine to 10%",
    schedule=None,
    min_lr_ratio=None,
    warmup=None,
    z_loss=None,
    init_std=None,
)


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
        conventions=replace(CONV, parametrization=parametrization, base_width=base_width),
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


def test_the_farthest_law_names_what_it_extrapolates_beyond() -> None:
    """A fitted LR law near its cells beside DeepSeek's batch law 4e3x beyond its 2e19 FLOPs: the
    doubt had called DeepSeek's data "the largest proxy" (a published-laws audit)."""
    from sweeper.recipe.doubts import extrapolation_summary

    mine = power_law("lr", 2.0, {"flops": -0.3}, domain={"flops": (1e18, 1e20)})
    batch = published_laws("deepseek")["batch_tokens"]
    at = {"flops": 8e22}
    said: list[str] = []
    extrapolation_summary([("lr", mine, at), ("batch", batch, at)], said)
    assert any("4e+03× beyond the largest model of deepseek:batch_tokens's fit" in w for w in said)
    said = []
    extrapolation_summary([("lr", mine, {"flops": 1e24}), ("batch", batch, at)], said)
    assert any("1e+04× beyond the largest proxy" in w for w in said)


def test_deepseek_scale_uses_m_times_d() -> None:
    """DeepSeek's M is the non-embedding FLOPs a token, 72·L·d² + 12·L·d·T for its own models
    (N = 12·L·d²): 6·N + 12·L·d·T for any model. A Step Law run with a 9.8·d MLP (h960, 7
    layers, N 2.147e8) had been given 72·L·d² from its shape, M 2.3x low (an audit)."""
    law = published_laws("deepseek")["lr"]
    L, d, T, D = 30, 4096, 4096, 2e12
    s = law_scale(law, n_params=12 * L * d**2, tokens=D, width=d, depth=L, seq_len=T)
    assert s["flops"] == pytest.approx((72 * L * d**2 + 12 * L * d * T) * D)
    s = law_scale(law, n_params=1e9, tokens=D, width=d, depth=L, seq_len=T)
    assert s["flops"] == pytest.approx((6 * 1e9 + 12 * L * d * T) * D)
    wide = law_scale(law, n_params=2.147e8, tokens=4e9, width=960, depth=7, seq_len=2048)
    assert wide["flops"] == pytest.approx((6 * 2.147e8 + 12 * 7 * 960 * 2048) * 4e9)
    step = published_laws("steplaw")["lr"]
    s = law_scale(step, n_params=1e9, tokens=D, width=d, depth=L, seq_len=T)
    assert s["n_params"] == 1e9


def test_flops_conventions_6nd_with_and_without_attention() -> None:
    """Sweeper's "6ND" always adds 6·L·T·d·D (given or inferred shape), as launched proxies count
    it; imported FLOPs filled in from N and D are "6ND (no attention)"."""
    L, d, T, N, D = 24, 2048, 2048, 1.2e9, 1e11
    kw = {"n_params": N, "tokens": D, "width": d, "depth": L, "seq_len": T}
    with_att = power_law("lr", 1.0, {"flops": -0.1})
    s = law_scale(with_att, **kw)
    assert s["flops"] == pytest.approx(6 * N * D + 6 * L * T * d * D)
    no_att = power_law("lr", 1.0, {"flops": -0.1})
    no_att = _with(no_att, flops=FLOPS_6ND_NO_ATTENTION)
    assert law_scale(no_att, **kw)["flops"] == pytest.approx(6 * N * D)
    # the recipe's FLOPs are what a "6ND" law sees
    r = recommend({"lr": with_att}, Target(width=d, depth=L, context=T, tokens=D))
    assert r.flops == pytest.approx(6 * 12 * L * d**2 * D + 6 * L * T * d * D)


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
        ({"n_params": 1e9, "tokens": 1e9, "compute": 1e20},
         r"one of tokens \(--tokens\), compute \(--compute\)"),
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


def test_parametrization_refusal_names_the_target_fix_before_force() -> None:
    """A muP law for an SP target (the default): the fix is the target's parametrization, said
    first, in Python's and the CLI's spelling; force comes last, as the way around."""
    with pytest.raises(TargetError) as e:
        recommend(sp_laws(parametrization="mup", base_width=256), Target(n_params=1e8, tokens=1e10))
    msg = str(e.value)
    fix = msg.index("set the target's parametrization (Target(parametrization='mup'), ")
    assert "--parametrization mup)" in msg
    assert fix < msg.index("force=True, --force") and "(force to override)" not in msg


def test_a_very_wide_or_unbounded_interval_is_said_readably() -> None:
    """The interval's high/low ratio in 3 significant digits (not 40 digits of ``.1f``), and
    "unbounded" for an infinite high end."""
    law = power_law("lr", 2.0, {"n_params": -0.3})
    wide = quality_warnings(law, "lr", (1e-3, 5.928e32))
    assert any("95% interval spans 5.93e+35× at the target" in w for w in wide), wide
    assert any("95% interval spans 14× at the target" in w for w in quality_warnings(
        law, "lr", (1.0, 14.0)))  # fmt: skip
    inf = quality_warnings(law, "lr", (1e-3, math.inf))
    assert any("95% interval is unbounded at the target" in w for w in inf), inf
    # the level the interval was computed at, not always 95%
    at80 = quality_warnings(law, "lr", (1.0, 14.0), level=0.8)
    assert any("80% interval spans 14×" in w for w in at80), at80
    r = recommend({"lr": law}, Target(n_params=1e9, tokens=2e10), level=0.8)
    assert r.level == 0.8 and not any("95% interval" in w for w in r.warnings)
    # a leave-one-cell-out error of 757 (ln) overflowed expm1: an internal error in recommend
    far = replace(law, cv_error=757.56, holdout_error=0.5)
    said = quality_warnings(far, "lr", (1.0, 2.0))
    assert any("leave-one-cell-out error is a factor of 1.01e+304" in w for w in said), said
    assert any("largest-cell error is a factor of 1.65" in w for w in said), said


def test_mup_recipe_records_base_width() -> None:
    mup = sp_laws(parametrization="mup", base_width=256)
    r = recommend(mup, Target(width=2048, depth=16, tokens=1e10, parametrization="mup"))
    assert r.parametrization == "mup" and r.base_width == 256
    row = next(note for name, _v, note in recipe_rows(r) if name == "parametrization")
    assert row == "base width 256"  # (muP has no base depth: it had read 'base depth None')
    with pytest.raises(TargetError, match=r"needs a base width .*\(--base-width\)"):
        recommend(sp_laws(parametrization="mup"), Target(width=2048, depth=16, tokens=1e10,
                                                         parametrization="mup"))  # fmt: skip
    # the law records no init std: the heuristic at the base width, and a warning
    assert r.init_std == pytest.approx(math.sqrt(2 / (5 * 256)))
    assert any("records no init std" in w for w in r.warnings)
    with pytest.raises(TargetError, match="differs from the law's base width"):
        recommend(
            mup, Target(width=2048, depth=16, tokens=1e10, parametrization="mup", base_width=128)
        )


def test_mup_recipe_exports_the_proxies_init_std() -> None:
    """Under muP LR and init transfer together: the recipe carries the proxies' std at the base
    width (0.02 here, not sqrt(2/(5·64)) = 0.079), and says what hidden matrices get."""
    lr = power_law("lr", 0.5, {"tokens": -0.1}, parametrization="mup", base_width=64)
    lr = _with(lr, init_std=0.02)
    r = recommend({"lr": lr}, Target(width=1024, depth=8, tokens=1e10, parametrization="mup"))
    assert r.init_std == 0.02 and r.init_std != pytest.approx(math.sqrt(2 / (5 * 64)))
    assert r.hidden_init_std == pytest.approx(0.02 * math.sqrt(64 / 1024))
    assert "base width 64" in r.init_std_note and "hidden matrices" in r.init_std_note
    assert not any("init std" in w for w in r.warnings)
    assert r.to_dict()["hidden_init_std"] == pytest.approx(r.hidden_init_std)
    # SP keeps the small-init heuristic at the target width
    sp = recommend(sp_laws(), Target(width=1024, depth=8, tokens=1e10))
    assert sp.init_std == pytest.approx(math.sqrt(2 / (5 * 1024))) == sp.hidden_init_std


def _with(law: PowerLaw, **conv: object) -> PowerLaw:
    return replace(law, conventions=replace(law.conventions, **conv))


def _defaults() -> dict[str, object]:
    """Sweeper's default conventions (a default study), every field but the law's shape."""
    d = Conventions()
    skip = ("parametrization", "base_width", "base_depth", "held")
    return {k: getattr(d, k) for k in d.__dataclass_fields__ if k not in skip}


def test_byte_laws_warn_and_convert_with_bytes_per_token() -> None:
    lr = _with(power_law("lr", 2.0, {"n_params": -0.3, "tokens": 0.3}), tokens="bytes")
    batch = _with(power_law("batch_tokens", 0.5, {"tokens": 0.5}), tokens="bytes")
    laws = {"lr": lr, "batch_tokens": batch}
    target = Target(n_params=5e7, tokens=5e9, vocab=32000)
    plain = recommend(laws, target)
    msg = [w for w in plain.warnings if "in bytes" in w]
    assert len(msg) == 1 and "lr law" in msg[0] and "batch law" in msg[0]  # one shared warning
    assert "bytes_per_token" in msg[0]
    assert plain.lr.value == pytest.approx(2.0 * 5e7**-0.3 * 5e9**0.3)  # unconverted
    conv = recommend(laws, target, bytes_per_token=4.0)
    assert conv.lr.value == pytest.approx(plain.lr.value * 4.0**0.3)  # D counted as 4·D bytes
    # the batch law predicts bytes: 0.5·(4D)^0.5 bytes = that / 4 tokens
    assert conv.batch_tokens_law == pytest.approx(0.5 * (4 * 5e9) ** 0.5 / 4)
    assert conv.bytes_per_token == 4.0
    assert any("converted at 4 bytes per token" in w for w in conv.warnings)
    assert not any("used as if they were bytes" in w for w in conv.warnings)
    # a byte-level target needs no conversion; a tokenizer law of another vocab warns
    byte_target = Target(n_params=5e7, tokens=5e9, vocab=256)
    assert not any("bytes" in w for w in recommend(laws, byte_target).warnings)
    tok = {k: _with(v, tokens="tokenizer:owt", vocab_size=50304) for k, v in laws.items()}
    assert any("tokens of owt (vocab 50304)" in w for w in recommend(tok, target).warnings)
    same = Target(n_params=5e7, tokens=5e9, vocab=50304)
    assert not any("vocab" in w for w in recommend(tok, same).warnings)
    # a factor no law can use is said to be unused
    pub = recommend(published_laws("steplaw"), target, bytes_per_token=4.0)
    assert any("bytes_per_token 4 is not used" in w for w in pub.warnings)
    with pytest.raises(TargetError, match="bytes_per_token must be positive"):
        recommend(laws, target, bytes_per_token=0.0)


def test_held_fixed_regime_warns_outside_and_names_the_measurement_batch() -> None:
    """An LR law fitted on N alone at a fixed 819k-token budget and batch 4096 (a width ladder),
    applied at D = 2T with Step Law's fallback batch."""
    lr = power_law("lr", 2.0, {"n_params": -0.35}, domain={"n_params": (1e5, 6.4e6)})
    held = {
        "tokens": (819200.0, 819200.0),
        "tokens_per_param": (0.128, 8.192),
        "batch_tokens": (4096.0, 4096.0),
    }
    lr = replace(lr, conventions=lr.conventions.with_held(held))
    far = recommend({"lr": lr}, Target(n_params=7e9, tokens=2e12))
    regime = [w for w in far.warnings if "does not model" in w]
    assert len(regime) == 1
    assert "D 2e+12 (its cells: 8.19e+05)" in regime[0] and "D/N 286" in regime[0]
    assert "batch" in regime[0]
    fallback = next(w for w in far.warnings if "fallback" in w)
    assert "measured at a batch of 4.1e+03 tokens" in fallback
    # the extrapolation factor still counts predictors only, and its text says which
    assert set(far.extrapolation) == {"n_params"}
    text = extrapolation_text(far.extrapolation_factor, far.extrapolation)
    assert text == f"{far.extrapolation_factor:.3g}× (n_params {far.extrapolation_factor:.3g}×)"
    assert extrapolation_text(None, {}) == "unknown"
    # a target inside the held regime earns no such warning
    near = recommend(
        {"lr": lr}, Target(width=128, depth=4, context=64, tokens=819200.0), global_batch=64
    )
    assert near.batch_tokens.value == 4096
    assert not any("does not model" in w for w in near.warnings)


def test_schedule_of_the_lr_law_compared_with_the_recipe() -> None:
    wsd = _with(
        power_law("lr", 2.0, {"n_params": -0.3}),
        schedule="wsd",
        min_lr_ratio=0.0,
        warmup=0.1,
        z_loss=0.0,
        lr="peak AdamW LR, warmup 10% of steps, WSD",
    )
    target = Target(n_params=5e7, tokens=5e9)
    r = recommend({"lr": wsd}, target, schedule="cosine", min_lr_ratio=0.1)
    sched = [w for w in r.warnings if "LR of the lr law" in w]
    assert len(sched) == 1
    for part in ("a wsd schedule", "cosine to 10%", "decay to 0% of peak", "warmup 10% of steps",
                 "z-loss 0;"):  # fmt: skip
        assert part in sched[0], part
    assert "z-loss 0.0001" in sched[0] and f"warmup {r.warmup_steps} steps" in sched[0]
    # a law measured exactly as the recipe runs: no warning
    frac = r.warmup_steps / r.total_steps
    same = _with(wsd, schedule="cosine", min_lr_ratio=0.1, warmup=frac, z_loss=1e-4)
    assert not any("LR of the lr law" in w for w in recommend({"lr": same}, target).warnings)
    # Sweeper's own default conventions (warmup 10%, no z-loss) differ from the recipe's
    dflt = _with(power_law("lr", 2.0, {"n_params": -0.3}), **_defaults())
    d = next(w for w in recommend({"lr": dflt}, target).warnings if "LR of the lr law" in w)
    assert "warmup 10% of steps" in d and "z-loss 0;" in d and "schedule" not in d


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


def test_warnings_that_question_the_value_come_first_and_assumed_defaults_last() -> None:
    # far beyond the law's cells, with no shape, sequence length, vocab or GPU memory given: the
    # extrapolation warning was listed after four "no ... given" lines
    r = recommend(sp_laws(), Target(n_params=1e11, tokens=1e13))
    kinds = [
        "doubt" if isinstance(w, Doubt) else "assumed" if isinstance(w, Assumed) else "other"
        for w in r.warnings
    ]
    assert r.warnings[0].startswith("very far extrapolation")
    assert kinds == ["doubt", "other", "assumed", "assumed", "assumed", "assumed"]
    assert "Adam eps" in r.warnings[1]  # (a plain warning ranks between the two)
    # the order survives the recipe's JSON (the classes do not: they only rank)
    assert list(recipe_from_dict(json.loads(json.dumps(r.to_dict()))).warnings) == list(r.warnings)


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
    wide = recommend(sp_laws(spread=0.05), Target(n_params=5e7, tokens=5e9))
    assert wide.lr.high / wide.lr.low < 1000  # (wider: refused, the test below)
    assert any("interval spans" in w for w in wide.warnings)


def test_n_params_must_agree_with_a_given_shape() -> None:
    """n_params with a shape whose 12·L·d² is 1e4× smaller is refused (the recipe would write
    that shape with an LR meant for N); within the tolerance N is used as given."""
    with pytest.raises(TargetError, match=r"n_params 1e\+09 and the shape 2 layers .* apart"):
        recommend(sp_laws(), Target(n_params=1e9, width=64, depth=2, tokens=2e10))
    r = recommend(sp_laws(), Target(n_params=1.2e9, width=2048, depth=20, tokens=2e10))
    assert r.n_params == 1.2e9 and (r.width, r.depth) == (2048, 20)
    off = 12 * 20 * 2048**2 / (N_SHAPE_TOLERANCE * 1.01)
    with pytest.raises(TargetError, match=r"more than the 2× allowed.*or --force to keep both"):
        recommend(sp_laws(), Target(n_params=off, width=2048, depth=20, tokens=2e10))


def test_a_wider_mlp_is_kept_with_force() -> None:
    """Step Law's h960, 7-layer run with a 9.8·d MLP counts N 2.147e8, 2.77x its 12·L·d²: it had
    been refused with no way through (an audit). --force keeps N and the shape, with a warning;
    compare, which has no --force, offers none."""
    target = Target(n_params=2.147e8, width=960, depth=7, context=2048, tokens=4e9)
    with pytest.raises(TargetError, match="12·L·d², a 4·d_model MLP"):
        recommend(sp_laws(), target)
    r = recommend(sp_laws(), target, force=True)
    assert (r.n_params, r.width, r.depth) == (2.147e8, 960, 7)
    assert any("2.77× apart: the laws take N as given" in w for w in r.warnings)
    with pytest.raises(TargetError) as e:
        target_point(tokens=4e9, n_params=2.147e8, width=960, depth=7, context=2048)
    assert "--force" not in str(e.value)


def test_n_params_checked_against_the_builders_count() -> None:
    """With a law measured on a builder, the shape's N is the builder's count, not 12·L·d²."""
    shape = CountedShape(
        1e9, 64, 2, 1, 256, 64, True, counted_total=2e9, builder="b", counted_n=8e8
    )
    check_n_params_agrees(1e9, shape)  # 12·L·d² = 9.8e4, but the builder counts 8e8
    with pytest.raises(TargetError, match="counted on the law's builder 'b'"):
        check_n_params_agrees(1e8, shape)


def test_target_below_the_smallest_proxy_warns() -> None:
    """Below the ladder is an extrapolation too: the factor (target / largest proxy) is < 1."""
    laws = sp_laws()  # lr law: n_params 1e6-1e8
    low = recommend(laws, Target(n_params=4e5, tokens=4e9))
    (w,) = [w for w in low.warnings if "below the smallest proxy" in w]
    assert "n_params=4e+05 is 2.5× below the smallest proxy (1e+06): below the ladder" in w
    assert "more than 10×" not in w
    very = recommend(laws, Target(n_params=5e4, tokens=4e9))
    assert any("20× below the smallest proxy (1e+06) (more than 10×)" in w for w in very.warnings)
    inside = recommend(laws, Target(n_params=9e5, tokens=4e9))  # within the 1.25 slack
    assert not any("below the smallest proxy" in w for w in inside.warnings)


def test_laws_of_one_sweep_fitted_by_different_methods_are_named_as_a_mixed_pair() -> None:
    """An audit refitted the LR law alone by parabola after a surface fit of both: recommend
    paired the new LR law with the old surface batch law (its LR 2.7x lower) without a word."""
    laws = sp_laws()
    same = recommend({k: replace(v, method="surface") for k, v in laws.items()}, DEEPSEEK_7B)
    assert not any("fitted by different methods" in w for w in same.warnings)
    mixed = {"lr": replace(laws["lr"], method="parabola+wls", id=5),
             "batch_tokens": replace(laws["batch_tokens"], method="surface", id=3)}  # fmt: skip
    r = recommend(mixed, DEEPSEEK_7B)
    assert any(
        "the lr law (law 5, parabola+wls) and the batch_tokens law (law 3, surface) were fitted "
        "by different methods" in w and "sweeper fit hand --method parabola" in w
        for w in r.warnings
    )


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
    assert "(inferred from N), 8 heads" in dict((k, n) for k, _, n in recipe_rows(r))["model"]
    # heads given with N alone: a width they do not divide was inferred and exported (an audit's
    # 12 heads of 2240)
    tiny = dict((k, n) for k, _, n in recipe_rows(recommend(sp_laws(), Target(n_params=1e5, tokens=1e7))))
    assert "weights 0.0078 + grads 0.0078 + optimizer 0.047 + activations 0.25" in tiny["memory / GPU"]
    r = recommend(sp_laws(), Target(n_params=1e9, heads=16, tokens=1e10))
    assert r.heads == 16 and r.width % 16 == 0
    with pytest.raises(TargetError, match="heads=12 does not divide the width 2240 inferred"):
        recommend(sp_laws(), Target(n_params=1e9, heads=12, tokens=1e10))


def test_compute_budget_and_tokens_per_param() -> None:
    r = recommend(sp_laws(), Target(width=512, depth=8, context=1024, compute=1e18))
    per_token = 6 * 12 * 8 * 512**2 + 6 * 8 * 1024 * 512
    assert r.tokens == pytest.approx(1e18 / per_token)
    assert r.flops == pytest.approx(1e18)
    # N alone: the inferred shape's attention counts too, so the recipe spends exactly C
    r = recommend(sp_laws(), Target(n_params=1e8, context=1024, compute=1e18))
    assert r.flops == pytest.approx(1e18)
    assert r.tokens == pytest.approx(1e18 / train_flops(1e8, 1, depth=r.depth, width=r.width,
                                                        seq_len=1024))  # fmt: skip
    assert r.tokens < 1e18 / (6 * 1e8)
    r = recommend(sp_laws(), Target(n_params=1e8, tokens_per_param=20))
    assert r.tokens == pytest.approx(2e9)


#: Chinchilla's loss law (Hoffmann et al. 2022, approach 3), written by hand
CHINCHILLA = LossLaw(
    target="loss",
    predictors=("n_params", "tokens"),
    source="hand",
    E=1.69,
    A=406.4,
    B=410.7,
    alpha=0.34,
    beta=0.28,
)


def test_loss_law_gives_compute_optimal_budget() -> None:
    chin = CHINCHILLA
    r = recommend(sp_laws(), Target(n_params=1e8), loss_law=chin)
    n_opt, _ = chin.compute_optimal(6 * 1e8 * r.tokens)
    assert n_opt == pytest.approx(1e8, rel=1e-6)
    assert r.predicted_loss == pytest.approx(chin.predict({"n_params": 1e8, "tokens": r.tokens}))
    # compute alone: C is Sweeper's compute (attention included), converted at the loss law's
    # 6·N·D boundary: the recipe spends exactly C, and its N is the loss law's best N under it
    only_c = recommend(sp_laws(), Target(compute=1e20), loss_law=chin)
    assert only_c.flops == pytest.approx(1e20, rel=1e-9)
    n, _ = chin.compute_optimal(1e20)
    assert only_c.n_params == pytest.approx(n, rel=0.1) and only_c.n_params != pytest.approx(n)
    seq = only_c.seq_len

    def loss_at(n_params: float) -> float:
        w, dep = infer_shape(n_params)
        per_token = train_flops(n_params, 1, depth=dep, width=w, seq_len=seq)
        return chin.predict({"n_params": n_params, "tokens": 1e20 / per_token})

    assert loss_at(only_c.n_params) <= loss_at(n) + 1e-4  # better than the 6ND closed form
    with pytest.raises(TargetError, match="no loss law"):
        recommend(sp_laws(), Target(n_params=1e8))


def test_memory_and_time_reported() -> None:
    hw = Hardware(gpus=8, gpu_memory_gb=80.0, peak_tflops=989.0, mfu=0.4)
    r = recommend(sp_laws(), Target(width=2048, depth=24, vocab=50000, tokens=1e11), hw)
    assert r.n_params_total == pytest.approx(12 * 24 * 2048**2 + 2 * 50000 * 2048)
    assert r.memory_gb_per_gpu == pytest.approx(r.memory.total_gb)
    assert r.train_time_s == pytest.approx(r.train_flops / (8 * 989e12 * 0.4))
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


def test_a_law_that_does_not_determine_the_value_at_the_target_is_refused_unless_forced() -> None:
    """An audit's 3-width ladder gave a peak LR of 38.6 with a 95% interval [5.1e-15, 1.8e19],
    exported to litgpt and HF with exit 0. Past 1000× (10 octaves) no recipe is written without
    force; with it, a warning says it was written anyway."""
    from sweeper.recipe.doubts import UNDETERMINED_SPAN

    target = Target(n_params=1e9, tokens=2e10)
    wide = replace(power_law("lr", 2.0, {"n_params": -0.3}), residual_std=3.0)  # 1.3e5×
    with pytest.raises(TargetError, match=r"lr law \(hand:lr\) 95% interval spans 1\.28e\+05× at"):
        recommend({"lr": wide}, target)
    forced = recommend({"lr": wide}, target, force=True)
    assert any("does not determine the value; written anyway" in w for w in forced.warnings)
    # at the edge of the rule: an interval narrower than the limit is written with its warning
    ok = replace(power_law("lr", 2.0, {"n_params": -0.3}), residual_std=1.5)  # 361×
    r = recommend({"lr": ok}, target)
    assert r.lr.high / r.lr.low < UNDETERMINED_SPAN
    assert not any("written anyway" in w for w in r.warnings)
    # a batch law too (when one is given)
    batch = replace(power_law("batch_tokens", 1.0, {"n_params": 0.5}), residual_std=3.0)
    with pytest.raises(TargetError, match=r"batch law .* does not determine the batch there"):
        recommend({"lr": ok, "batch_tokens": batch}, target)


def test_an_sp_recipe_says_when_its_init_is_not_the_one_the_law_was_measured_at() -> None:
    """The SP recipe writes the small init sqrt(2/(5·d)) (0.0134 at d = 2240) while the proxies
    were trained at std 0.02 at every width: said, since SP's optimal LR depends on the init."""
    lr = power_law("lr", 2.0, {"n_params": -0.3})
    lr = replace(lr, conventions=replace(lr.conventions, init_std=0.02))
    far = recommend({"lr": lr}, Target(width=2240, depth=17, tokens=2e10))
    (said,) = [w for w in far.warnings if "was measured at init std 0.02" in w]
    assert "small init at width 2240 is 0.01336" in said
    near = recommend({"lr": lr}, Target(width=1000, depth=8, tokens=2e10))  # 0.02 there
    assert not any("init std" in w for w in near.warnings)


def test_a_risk_aware_lr_above_the_point_estimate_is_doubted() -> None:
    """An audit's own sweeps (flat above the optimum, steep below) recommended 2.3-6.5x the law's
    point estimate in silence, where the README said the hedge usually sits below it."""
    from sweeper.recipe.doubts import ABOVE_POINT, above_point_warnings
    from sweeper.recipe.warning_kinds import Doubt

    law = power_law("lr", 2.0, {"n_params": -0.3})
    assert above_point_warnings(law, 1e-3, 1e-3) == []
    assert above_point_warnings(law, 0.5e-3, 1e-3) == []  # below: the usual hedge
    assert above_point_warnings(law, 0.99 * ABOVE_POINT * 1e-3, 1e-3) == []
    (w,) = above_point_warnings(law, 2.3e-3, 1e-3)
    assert isinstance(w, Doubt) and "is 2.3× the lr law's" in w and "point estimate 0.001" in w


def test_a_published_batch_law_gives_no_interval_around_the_planned_batch() -> None:
    """The planned batch (rounded to whole sequences) sat outside its 'interval', which was the
    published law's own value at both ends (value 393216, low = high = 441892)."""
    import sweeper

    r = sweeper.recommend("steplaw", at={"n_params": 1e9, "tokens": 2e10})
    b = r.batch_tokens
    assert b.degenerate and b.low == b.value == b.high != r.batch_tokens_law


def test_a_forced_recipe_says_its_interval_once() -> None:
    """With force, the recipe carried '95% interval spans 3.73e+33× at the target: ... written
    anyway (force)' and '95% interval spans 3.73e+33× at the target (poorly constrained)'."""
    law = power_law("lr", 2.0, {"n_params": -0.3}, spread=2.0)
    with pytest.raises(TargetError, match="does not determine"):
        recommend({"lr": law}, Target(n_params=1e12, tokens=2e10))
    r = recommend({"lr": law}, Target(n_params=1e12, tokens=2e10), force=True)
    spans = [w for w in r.warnings if "interval spans" in w and "lr law" in w]
    assert len(spans) == 1 and "written anyway (forced)" in spans[0], r.warnings


def test_an_undeclared_unit_and_an_assumed_vocab_in_n_are_said() -> None:
    """An import audit: a law whose import declared no token unit gave a recipe with no word on
    the unit (a declared tokenizer warned); a law whose N counts the embeddings took the target's
    N with an assumed 32000 vocab, said only to be 'for embedding memory'."""
    lr = _with(power_law("lr", 2.0, {"n_params": -0.3}), tokens="as imported")
    r = recommend({"lr": lr}, Target(n_params=1e9, tokens=2e10))
    assert any("an imported file that did not declare it" in w for w in r.warnings), r.warnings
    total = _with(power_law("lr", 2.0, {"n_params": -0.3}), n_params="total", vocab_size=50304)
    r = recommend({"lr": total}, Target(width=2048, depth=16, tokens=2e10))
    said = [w for w in r.warnings if "no vocab given" in w]
    assert said and "the embedding parameters the law's N counts" in said[0], r.warnings
    assert "the law's runs used 50304" in said[0]
    plain = recommend({"lr": power_law("lr", 2.0, {"n_params": -0.3})}, Target(n_params=1e9,
                      tokens=2e10))  # fmt: skip
    assert not any("did not declare" in w for w in plain.warnings)
    assert any(w.endswith("for embedding memory") for w in plain.warnings), plain.warnings


def test_warmup_z_loss_and_init_std_can_be_set_to_the_measured_ones() -> None:
    """An export audit: the recipe ran warmup 2000 steps (4.4%), z-loss 1e-4 and init std 0.0134
    where the LR was measured at 10%, none and 0.02, and the warnings said 'match them' with no
    way to: recommend/export had no flag for any of the three."""
    law = _with(power_law("lr", 2.0, {"n_params": -0.3}), **_defaults())
    law = _with(law, schedule="cosine", min_lr_ratio=0.1, warmup=0.1, z_loss=0.0, init_std=0.02)
    target = Target(width=2048, depth=16, tokens=2e10)
    plain = recommend({"lr": law}, target)
    sched = next(w for w in plain.warnings if "LR of the lr law" in w)
    n = round(0.1 * plain.total_steps)
    assert f"(--warmup-steps {n} --z-loss 0)" in sched, sched
    init = next(w for w in plain.warnings if "measured at init std 0.02" in w)
    assert "(--init-std 0.02)" in init
    matched = recommend({"lr": law}, target, warmup_steps=n, z_loss=0.0, init_std=0.02)
    assert (matched.warmup_steps, matched.z_loss, matched.init_std) == (n, 0.0, 0.02)
    assert not any("LR of the lr law" in w or "init std" in w for w in matched.warnings)
    assert matched.lr.value == plain.lr.value and matched.init_std_note.startswith("as given")
    off = recommend({"lr": law}, target, init_std=0.05)
    assert any("as given, is 0.05" in w for w in off.warnings)
    whole = r"warmup_steps \(--warmup-steps\) must be a whole number"
    for bad, match in (({"warmup_steps": 0}, whole),
                       ({"warmup_steps": 2.5}, whole),
                       ({"warmup_steps": 10**9}, "exceeds the recipe's"),
                       ({"z_loss": -1.0}, "z_loss must be >= 0"),
                       ({"init_std": 0.0}, "init_std must be positive")):  # fmt: skip
        with pytest.raises(TargetError, match=match):
            recommend({"lr": law}, target, **bad)


def test_the_micro_batch_is_not_needlessly_small() -> None:
    """An export audit: 48 GPUs and a law's 216 sequences gave micro 1 × accumulation 5 (the
    micro batches tried stopped at floor(216 / 48) = 4) for a global batch of 240 that micro 5
    runs in one step."""
    from sweeper.recipe.hardware import choose_batch
    from sweeper.recipe.scale import resolve_shape

    m = resolve_shape(n_params=None, width=2240, depth=17, heads=None, vocab=32000, seq_len=2048,
                      warnings=[])  # fmt: skip
    hw = Hardware(gpus=48, gpu_memory_gb=80)
    micro, gbs = choose_batch(215.8 * 2048, m, hw, None, [])
    assert (micro, gbs) == (5, 240)
    micro, gbs = choose_batch(100.0 * 2048, m, Hardware(gpus=48, gpu_memory_gb=80), None, [])
    assert (micro, gbs) == (2, 96)  # (micro 3 would round to 144)


def test_a_training_functions_law_says_how_its_n_was_counted() -> None:
    """A law-sampler audit: a training function's MLP had a third of 12·L·d², the N its cells
    were counted with, and recommend took the target's N in silence (at exponent -0.4 a 3x
    miscount of N is 1.55x in the LR)."""
    lr = _with(power_law("lr", 2.0, {"n_params": -0.4}), train_function="m:loop")
    r = recommend({"lr": lr}, Target(n_params=1e9, tokens=2e10))
    assert any("the law's N is 12·L·d² at its cells' shapes, not the model training function "
               "'m:loop' built" in w for w in r.warnings), r.warnings  # fmt: skip
    assert any("grad clip, weight decay and Adam betas are the study's where" in w
               for w in r.warnings)  # fmt: skip
    built = _with(lr, model_builder="m:build")
    assert not any("12·L·d² at its cells" in w for w in recommend(
        {"lr": built}, Target(n_params=1e9, tokens=2e10)).warnings)  # fmt: skip


def test_a_target_whose_compute_overflows_is_refused() -> None:
    """A robustness audit: --params 1e300 --tokens 1e300 --force gave "flops": Infinity (not
    JSON) and "inf days"."""
    with pytest.raises(TargetError, match="the target's compute overflows"):
        recommend(published_laws("steplaw"), Target(n_params=1e300, tokens=1e300), force=True)


def test_a_target_deeper_than_every_cell_is_named_as_outside_the_measured_regime() -> None:
    """A width ladder at one depth says nothing about depth: an audit's recipe for 32 layers from
    a ladder of 2-block models had no warning that depth was never varied. The fit records the
    depth its cells held, and a target outside it is named with the other held variables."""
    from sweeper.fitting.power_law import fit_power_law

    n = np.array([1e5, 4e5, 1.6e6, 6.4e6, 2.56e7])
    cells = pd.DataFrame(
        {"cell": [f"c{i}" for i in range(5)], "n_params": n, "depth": 2.0, "tokens": 8e8,
         "lr": 2.0 * n**-0.3 * np.exp([0.02, -0.01, 0.0, 0.01, -0.02])}
    )  # fmt: skip
    lr = fit_power_law(cells, target="lr", predictors=("n_params",), n_boot=0)
    assert lr.conventions.held["depth"] == (2.0, 2.0)
    deep = recommend({"lr": lr}, Target(width=4096, depth=32, tokens=8e8))
    regime = next(w for w in deep.warnings if "does not model" in w)
    assert "depth" in regime.split(", and")[0] and "depth 32 (its cells: 2)" in regime
    shallow = recommend({"lr": lr}, Target(width=512, depth=2, tokens=8e8))
    assert not any("depth" in w and "does not model" in w for w in shallow.warnings)


def test_a_published_law_past_where_its_form_sets_its_value_is_refused_unless_forced() -> None:
    """`check` refused to compare a 7B recipe with Kaplan's LR (its linear form near 0, no
    usable LR) while `recommend` and `export` wrote that LR, 7.7e-5, with exit 0 (a laws audit)."""
    at = Target(n_params=7e9, tokens=2e12)
    with pytest.raises(TargetError, match=r"kaplan:lr.*no usable LR there.*--force"):
        recommend(published_laws("kaplan"), at)
    forced = recommend(published_laws("kaplan"), at, force=True)
    assert forced.lr.value == pytest.approx(0.003239 - 0.0001395 * math.log(7e9))
    assert any("no usable LR there" in w for w in forced.warnings)
    # inside its data, and just past it, it is a recipe as before
    assert recommend(published_laws("kaplan"), Target(n_params=2.5e9, tokens=5e10)).lr.value > 0


def test_the_recipe_runs_the_optimizer_settings_its_lr_was_measured_under() -> None:
    """The optimal LR is the optimum under the proxies' weight decay, betas, eps and clip: the
    recipe takes the law's (an exports audit: weight decay 0, beta2 0.99, clip 0, eps 1e-6
    measured, and the recipe wrote Sweeper's 0.1, 0.95, 1.0, 1e-8 without a word); a decay given
    as the timescale tau is 1/(lr·tau·steps) at the recipe's LR and steps; a searched one keeps
    the default, with a warning; a law that records none keeps the defaults, silently."""
    target = Target(n_params=1e9, tokens=2e10)
    base = power_law("lr", 2.0, {"n_params": -0.4})
    plain = recommend({"lr": base}, target)
    assert (plain.weight_decay, plain.adam_beta2, plain.adam_eps, plain.grad_clip) == (
        0.1, 0.95, 1e-8, 1.0)  # fmt: skip
    assert not any("searched" in w for w in plain.warnings)
    assert _row(plain, "weight decay / clip") == ("0.1 / 1", "")
    law = _with(base, weight_decay=0.0, beta1=0.9, beta2=0.99, eps=1e-6, grad_clip=0.0)
    r = recommend({"lr": law}, target)
    assert (r.weight_decay, r.adam_beta2, r.adam_eps, r.grad_clip) == (0.0, 0.99, 1e-6, 0.0)
    assert r.lr.value == plain.lr.value
    note = _row(r, "weight decay / clip")[1]
    assert note == "as the LR was measured: weight decay 0, β2 0.99, eps 1e-06, grad clip 0"
    tau = recommend({"lr": _with(base, weight_decay_tau=0.5)}, target)
    assert tau.weight_decay == pytest.approx(1 / (tau.lr.value * 0.5 * tau.total_steps))
    assert "1/(lr·τ·steps), τ = 0.5" in _row(tau, "weight decay / clip")[1]
    from sweeper.recipe.recommend import RecipeDefaults

    mine = recommend({"lr": _with(base, weight_decay_tau=0.5)}, target,
                     defaults=RecipeDefaults(weight_decay=0.05))  # fmt: skip
    assert mine.weight_decay == 0.05
    assert any("weight decay as the timescale tau 0.5 (the recipe: 0.05)" in w
               for w in mine.warnings)  # fmt: skip
    searched = recommend({"lr": _with(base, beta2="searched")}, target)
    assert searched.adam_beta2 == 0.95
    assert any("measured over a searched β2 (the recipe: 0.95)" in w for w in searched.warnings)


def _row(r: Recipe, name: str) -> tuple[str, str]:
    """The (value, note) of the recipe table's row ``name``."""
    return next((v, n) for k, v, n in recipe_rows(r) if k == name)


def test_a_batch_ramp_up_that_cannot_be_planned_is_said() -> None:
    """A ramp-up asked for (or the default's, from 1024 sequences) where the global batch is one
    step of micro batch × GPUs: none is possible, and the recipe says so (an exports audit: the
    --rampup had vanished without a word)."""
    laws = published_laws("steplaw")
    target = Target(n_params=1e9, tokens=2e10)
    hw = Hardware(gpus=64, gpu_memory_gb=80.0, micro_batch=16)
    r = recommend(laws, target, hw, global_batch=1024, rampup=True)
    assert r.rampup is None
    assert any(w.startswith("no batch ramp-up (--rampup): the global batch 1024 is one step of "
                            "micro batch 16 × 64 GPUs") for w in r.warnings), r.warnings  # fmt: skip
    ramped = recommend(laws, target, Hardware(gpus=64, gpu_memory_gb=80.0, micro_batch=2),
                       global_batch=1024, rampup=True)  # fmt: skip
    assert ramped.rampup is not None and not any("no batch ramp-up" in w for w in ramped.warnings)


def test_an_edited_rampup_or_data_parallel_that_no_framework_can_run_is_refused() -> None:
    """An edited recipe JSON: a ramp starting above the batch had exported an empty Megatron
    schedule, one off the increments a ramp stuck below the batch, one longer than the run was
    taken; data_parallel apart from hardware.gpus left the memory notes for other GPUs."""
    hw = Hardware(gpus=64, gpu_memory_gb=80.0, micro_batch=2)
    r = recommend(published_laws("steplaw"), Target(n_params=1e9, tokens=2e10), hw,
                  global_batch=1024, rampup=True)  # fmt: skip
    d = r.to_dict()
    assert recipe_from_dict(d).rampup == r.rampup
    for edit, needle in (
        ({"start_sequences": 2048}, "start_sequences 2048 must be below the global batch 1024"),
        ({"start_sequences": 100}, "start_sequences 100 must be a positive multiple of"),
        ({"ramp_samples": 10**8, "ramp_tokens": 10**8 * r.seq_len}, "exceed the run's"),
    ):
        bad = json.loads(json.dumps(d))
        bad["rampup"].update(edit)
        with pytest.raises(TargetError, match=needle):
            recipe_from_dict(bad)
    bad = json.loads(json.dumps(d))
    bad["data_parallel"], bad["grad_accum_steps"] = 8, bad["grad_accum_steps"] * 8
    with pytest.raises(TargetError, match=r"data_parallel 8 disagrees with hardware\.gpus 64"):
        recipe_from_dict(bad)


def test_the_table_shows_the_hyperparameters_each_optimizer_runs_with() -> None:
    """Adafactor runs with torch's defaults (no Adam betas or eps: an exports audit's table had
    shown them); SGD's momentum is β1; AdamW and Muon (its AdamW half) show betas and eps."""
    base = power_law("lr", 2.0, {"n_params": -0.4})
    target = Target(n_params=1e9, tokens=2e10)
    rows = {o: _row(recommend({"lr": _with(base, optimizer=o)}, target), name)
            for o, name in (("adafactor", "Adafactor"), ("sgd", "SGD"), ("adamw", "AdamW"))}
    assert rows["adafactor"] == ("torch defaults", "no betas or Adam eps (beta2_decay -0.8)")
    assert rows["sgd"] == ("momentum 0.9", "coupled L2 decay")
    assert rows["adamw"] == ("β=(0.9, 0.95)", "eps 1e-08")


def test_numpy_and_whole_float_inputs_reach_the_recipe_as_plain_numbers() -> None:
    """A whole float global batch (256.0) and numpy's numbers (read off a DataFrame) are taken as
    the ints and floats they are (an API audit: 256.0 reached every export, e.g. DeepSpeed's
    "train_batch_size": 256.0, and numpy's int64 failed to serialise; Hardware refused
    np.int64(8) GPUs as "not a positive integer")."""
    hw = Hardware(gpus=np.int64(8), gpu_memory_gb=np.float32(80.0), zero_stage=np.int64(1))
    assert (hw.gpus, hw.zero_stage) == (8, 1) and type(hw.gpus) is int
    assert type(hw.gpu_memory_gb) is float
    r = recommend(published_laws("steplaw"), Target(n_params=1e9, tokens=2e10), hw,
                  global_batch=256.0, warmup_steps=np.int64(500), init_std=np.float32(0.01))
    assert type(r.global_batch_sequences) is int and r.global_batch_sequences == 256
    assert type(r.warmup_steps) is int and type(r.init_std) is float
    json.dumps(r.to_dict())  # (no numpy left in it)


def test_a_setting_the_caller_gives_stands_over_the_measured_one_with_a_warning() -> None:
    """RecipeDefaults(weight_decay=0.05) is the caller's choice: it stands over the law's
    measured 0.0, the recipe warns that the LR was measured at 0, and the table does not call
    0.05 the measured value."""
    from sweeper.recipe.recommend import RecipeDefaults

    law = _with(power_law("lr", 2.0, {"n_params": -0.4}), weight_decay=0.0, beta2=0.99)
    r = recommend({"lr": law}, Target(n_params=1e9, tokens=2e10),
                  defaults=RecipeDefaults(weight_decay=0.05))  # fmt: skip
    assert (r.weight_decay, r.adam_beta2) == (0.05, 0.99)
    assert any("was measured at weight decay 0 (the recipe: 0.05)" in w for w in r.warnings)
    assert _row(r, "weight decay / clip")[1] == "as the LR was measured: β2 0.99"

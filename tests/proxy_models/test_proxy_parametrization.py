"""muP / CompleteP rules, their reduction to SP at the base shape, and the coord check."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from proxy_models import (
    HParams,
    ProxyConfig,
    TokenData,
    attention_scale,
    build_model,
    output_multiplier,
    param_groups,
    residual_multiplier,
    train,
)
from proxy_models.data import gather_batch, sample_offsets, val_offsets

HP = HParams(lr=3e-3, batch_size=8, weight_decay=0.1)


def test_sp_has_no_multipliers() -> None:
    cfg = ProxyConfig(width=256, depth=4, base_width=32, base_depth=2)
    assert output_multiplier(cfg) == 1.0
    assert residual_multiplier(cfg) == 1.0
    assert attention_scale(cfg) == 1.0 / math.sqrt(16)
    groups = {g["name"]: g for g in param_groups(build_model(cfg, seed=0), cfg, HP)}
    assert {g["lr"] for g in groups.values()} == {HP.lr}


def test_mup_rules_at_four_times_the_base_width() -> None:
    cfg = ProxyConfig(width=256, parametrization="mup", base_width=64)
    assert output_multiplier(cfg) == 0.25
    assert residual_multiplier(cfg) == 1.0
    groups = {g["name"]: g for g in param_groups(build_model(cfg, seed=0), cfg, HP)}
    assert groups["hidden"]["lr"] == pytest.approx(HP.lr / 4)
    assert groups["hidden"]["weight_decay"] == pytest.approx(HP.weight_decay * 4)
    assert groups["embedding"]["lr"] == HP.lr  # input embeddings and lm_head keep the base LR
    assert groups["vector"]["lr"] == HP.lr
    assert groups["vector"]["weight_decay"] == 0.0  # decay on matrices only


@pytest.mark.parametrize("parametrization", ["sp", "mup", "completep"])
def test_output_mult_scales_the_parametrization_factor(parametrization: str) -> None:
    cfg = ProxyConfig(width=256, parametrization=parametrization, base_width=64, output_mult=3.0)
    rule = 1.0 if parametrization == "sp" else 0.25  # 1 under SP, base_width / width otherwise
    assert output_multiplier(cfg) == 3.0 * rule  # k/4 at 4× the base width under muP/CompleteP
    assert output_multiplier(replace(cfg, output_mult=1.0)) == rule


@pytest.mark.parametrize(("parametrization", "width"), [("sp", 64), ("mup", 64), ("mup", 256)])
def test_output_mult_multiplies_the_logits_of_the_same_weights(
    corpus: TokenData, parametrization: str, width: int
) -> None:
    cfg = ProxyConfig(width=width, context=32, parametrization=parametrization, base_width=64)
    one, two = build_model(cfg, seed=0), build_model(replace(cfg, output_mult=2.0), seed=0)
    assert all(torch.equal(a, b) for a, b in zip(one.parameters(), two.parameters(), strict=True))
    x, _ = gather_batch(corpus.val, val_offsets(len(corpus.val), 32, 4), 32)
    with torch.no_grad():
        assert torch.equal(two(x), 2.0 * one(x))  # × 2 is exact in floating point


def test_mup_attention_scale_is_one_over_d_and_sp_at_base_head_size() -> None:
    # heads fixed: the head size grows with width, the scale falls as 1/d_head
    base = ProxyConfig(width=64, n_heads=4, parametrization="mup", base_width=64)
    wide = replace(base, width=256)
    assert attention_scale(base) == 1.0 / math.sqrt(16)
    assert attention_scale(wide) == pytest.approx(1.0 / math.sqrt(16) * 16 / 64)
    assert attention_scale(replace(wide, parametrization="sp")) == pytest.approx(1 / 8)
    # head size fixed: the scale stays 1/sqrt(head_dim) at every width, as in SP
    assert attention_scale(ProxyConfig(width=256, parametrization="mup")) == 0.25


def test_completep_residual_multiplier() -> None:
    cfg = ProxyConfig(depth=8, parametrization="completep", base_depth=2)
    assert residual_multiplier(cfg) == 0.25
    assert residual_multiplier(replace(cfg, depth=2)) == 1.0
    assert residual_multiplier(replace(cfg, parametrization="mup")) == 1.0


def test_hidden_init_scales_with_width_under_mup(corpus: TokenData) -> None:
    stds = {}
    for p in ("sp", "mup"):
        cfg = ProxyConfig(width=256, parametrization=p, base_width=64)
        model = build_model(cfg, seed=0)
        stds[p] = model.get_parameter("blocks.0.mlp.c_fc.weight").std().item()
        assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert stds["sp"] == pytest.approx(0.02, rel=0.05)
    assert stds["mup"] == pytest.approx(0.01, rel=0.05)  # variance × base/width


def _run(cfg: ProxyConfig, corpus: TokenData) -> dict[str, object]:
    hp = HParams(lr=1e-2, batch_size=8)
    out = train(cfg, hp, tokens=8 * 32 * 12, data=corpus, eval_batches=1).to_dict()
    return {k: v for k, v in out.items() if k not in ("wall_s", "tokens_per_s", "flops_per_s")}


@pytest.mark.parametrize("parametrization", ["mup", "completep"])
def test_relative_parametrizations_equal_sp_at_the_base_shape(
    corpus: TokenData, parametrization: str
) -> None:
    sp = ProxyConfig(width=64, depth=3, n_heads=2, context=32, base_width=64, base_depth=3)
    rel = replace(sp, parametrization=parametrization)
    assert _run(sp, corpus) == _run(rel, corpus)  # bit for bit
    # away from the base shape they differ (so the test above is not vacuous)
    off = replace(rel, depth=2) if parametrization == "completep" else replace(rel, width=128)
    assert _run(off, corpus) != _run(replace(off, parametrization="sp"), corpus)


@pytest.mark.parametrize("parametrization", ["mup", "completep"])
def test_relative_parametrizations_equal_sp_with_the_same_output_mult(
    corpus: TokenData, parametrization: str
) -> None:
    sp = ProxyConfig(
        width=64, depth=3, n_heads=2, context=32, base_width=64, base_depth=3, output_mult=3.0
    )
    rel = replace(sp, parametrization=parametrization)
    assert _run(sp, corpus) == _run(rel, corpus)  # bit for bit
    # the multiplier changes the run (so the test above is not SP against SP at 1.0)
    assert _run(sp, corpus) != _run(replace(sp, output_mult=1.0), corpus)


def _coord_check(parametrization: str, width: int, corpus: TokenData) -> list[float]:
    """Mean |output| of each block and of the logits after 4 Adam steps at a fixed LR."""
    cfg = ProxyConfig(
        width=width, depth=2, context=32, parametrization=parametrization, base_width=32
    )
    hp = HParams(lr=1e-2, warmup=0, schedule="constant", weight_decay=0.0)
    model = build_model(cfg, seed=0)
    opt = torch.optim.AdamW(param_groups(model, cfg, hp), betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        x, y = gather_batch(corpus.train, sample_offsets(len(corpus.train), 32, 16, g), 32)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
        opt.zero_grad()
    sizes: list[float] = []
    hooks = [
        b.register_forward_hook(lambda m, i, o: sizes.append(o.abs().mean().item()))
        for b in model.blocks
    ]
    x, _ = gather_batch(corpus.val, val_offsets(len(corpus.val), 32, 16), 32)
    with torch.no_grad():
        logits = model(x)
    for h in hooks:
        h.remove()
    return [*sizes, logits.abs().mean().item()]


def test_coord_check_activations_stay_flat_under_mup(corpus: TokenData) -> None:
    widths = (32, 64, 128, 256)
    for parametrization, flat in (("sp", False), ("mup", True)):
        rows = [_coord_check(parametrization, w, corpus) for w in widths]
        for k in range(len(rows[0])):  # each block output, then the logits
            sizes = [row[k] for row in rows]
            growth = sizes[-1] / sizes[0]
            if flat:
                assert max(sizes) / min(sizes) < 2.0, (parametrization, k, sizes)
            elif k < len(rows[0]) - 1:  # SP's block outputs grow with width
                assert growth > 8.0, (parametrization, k, sizes)

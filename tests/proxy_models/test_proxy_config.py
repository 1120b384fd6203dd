from __future__ import annotations

import pytest

from proxy_models import ProxyConfig, build_model

EMBEDDING_NAMES = ("wte.weight", "wpe.weight", "lm_head.weight")


@pytest.mark.parametrize(
    "cfg",
    [
        ProxyConfig(),
        ProxyConfig(width=96, depth=3, n_heads=3, context=32, vocab_size=300),
        ProxyConfig(width=32, tied_embeddings=True),
        ProxyConfig(width=48, head_dim=8, norm="rmsnorm"),
        ProxyConfig(width=64, qk_norm=True, norm="rmsnorm", tied_embeddings=True),
        ProxyConfig(width=64, depth=4, qk_norm=True, parametrization="completep"),
    ],
)
def test_parameter_counts_match_the_model(cfg: ProxyConfig) -> None:
    model = build_model(cfg, seed=0)
    named = dict(model.named_parameters())  # a tied matrix appears once
    counted_total = sum(p.numel() for p in named.values())
    counted_n = sum(p.numel() for k, p in named.items() if k not in EMBEDDING_NAMES)
    assert cfg.n_params() == counted_n
    assert cfg.n_params_total() == counted_total


def test_flops_and_deepseek_m_formulas() -> None:
    cfg = ProxyConfig(width=64, depth=2, context=128)
    n = 2 * (12 * 64 * 64 + 2 * 64) + 64
    assert cfg.n_params() == n
    assert cfg.flops_per_token() == 6 * n + 6 * 2 * 128 * 64
    assert cfg.deepseek_m() == 6 * n + 12 * 2 * 64 * 128  # 72·L·d² for 12·d² a block


def test_heads_from_head_dim_or_explicit() -> None:
    assert ProxyConfig(width=64, head_dim=16).heads == 4
    assert ProxyConfig(width=64, n_heads=2).heads == 2
    assert ProxyConfig(width=64, n_heads=2).d_head == 32


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"width": 60, "n_heads": 7}, "divisible by the number of heads"),
        ({"width": 60, "head_dim": 16}, "divisible by `head_dim`"),
        ({"width": 0}, "`width` must be a positive integer"),
        ({"depth": -1}, "`depth` must be a positive integer"),
        ({"norm": "batchnorm"}, "`norm` must be one of"),
        ({"parametrization": "ntk"}, "`parametrization` must be one of"),
        ({"init_std": 0.0}, "`init_std` must be > 0"),
        ({"output_mult": 0.0}, "`output_mult` must be a finite number > 0"),
        ({"output_mult": -1.0}, "`output_mult` must be a finite number > 0"),
        ({"output_mult": float("nan")}, "`output_mult` must be a finite number > 0"),
        ({"output_mult": float("inf")}, "`output_mult` must be a finite number > 0"),
        ({"output_mult": "2"}, "`output_mult` must be a finite number > 0"),
        ({"n_heads": 3, "width": 96, "parametrization": "mup"}, "`base_width` must be divisible"),
    ],
)
def test_invalid_configs_raise_one_line(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        ProxyConfig(**kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_numpy_integers_are_accepted_as_plain_ints() -> None:
    import numpy as np

    from proxy_models import HParams

    cfg = ProxyConfig(width=np.int64(64), depth=np.int32(2))  # type: ignore[arg-type]
    assert type(cfg.width) is int and cfg == ProxyConfig(width=64, depth=2)
    hp = HParams(lr=np.float32(1e-3), batch_size=np.int64(16))  # type: ignore[arg-type]
    assert type(hp.lr) is float and type(hp.batch_size) is int

"""A builder's model with fixed-size projections (multi-query attention: K and V are (head_dim,
width)) trains under SP, is refused in one line under muP unless ``param_roles`` settles it, and
its N counts every parameter but the embeddings and the readout, as the proxy's N does."""

from __future__ import annotations

import math

import pytest

from proxy_models import HParams, ProxyConfig, TokenData, train
from proxy_models.builder import Builder, BuilderError, count, prepare
from proxy_models.coord_check import coord_check
from proxy_models.parametrization import param_groups

MQA = Builder("tests.proxy_models.mqa:mqa")


def cfg(width: int = 16, par: str = "sp") -> ProxyConfig:
    return ProxyConfig(
        width=width, depth=1, context=32, head_dim=8, parametrization=par, base_width=16
    )


def test_sp_gives_a_fixed_size_projection_the_groups_of_a_hidden_matrix() -> None:
    """Every trial of such a model failed with KeyError: 'blocks.0.k.weight' in param_groups."""
    own = prepare(MQA, cfg(), seed=0)
    groups = param_groups(own.model, cfg(), HParams(lr=1e-3), roles=own.roles.trained())
    by_name = {id(p): g for g in groups for p in g["params"]}
    params = dict(own.model.named_parameters())
    assert set(by_name) == {id(p) for p in params.values()}  # every parameter, once
    for name in ("blocks.0.k.weight", "blocks.0.v.weight"):
        group = by_name[id(params[name])]
        assert group["name"] == "hidden" and group["weight_decay"] == HParams(lr=1e-3).weight_decay


def test_sp_trains_and_coord_checks_a_fixed_size_projection(corpus: TokenData) -> None:
    for opt in ("adamw", "muon"):
        hp = HParams(lr=1e-3, batch_size=2, optimizer=opt)
        r = train(cfg(), hp, tokens=2 * 2 * 32, data=corpus, threads=1, builder=MQA)
        assert r.steps == 2 and math.isfinite(r.val_loss) and not r.diverged
    rows = coord_check(
        [cfg(16), cfg(32)], HParams(lr=1e-3), data=corpus, steps=1, batch_size=2, builder=MQA
    )
    assert [r.width for r in rows] == [16, 32]


@pytest.mark.parametrize("par", ["mup", "completep"])
def test_mup_refuses_a_fixed_size_projection_in_one_line_naming_it(par: str) -> None:
    with pytest.raises(BuilderError) as e:
        prepare(MQA, cfg(par=par), seed=0)
    msg = str(e.value)
    assert msg.startswith("model.builder: ") and "\n" not in msg
    assert "blocks.0.k.weight" in msg and "param_roles(model)" in msg
    assert "'hidden' for a key/value projection" in msg  # what to do with it
    settled = Builder(MQA.path, param_roles="tests.proxy_models.mqa:mqa_roles")
    assert prepare(settled, cfg(par=par), seed=0).roles.roles["blocks.0.k.weight"] == "hidden"


def test_n_counts_every_parameter_but_the_embeddings_and_the_readout() -> None:
    """N left out the K/V weights (1584 at width 16 instead of 1840)."""
    own = prepare(MQA, cfg(), seed=0)
    outside = ("tok.", "pos.", "head.")
    real = sum(p.numel() for n, p in own.model.named_parameters() if not n.startswith(outside))
    assert own.n_params == real == 1840
    assert count(MQA, cfg()) == (own.n_params, own.n_params_total)


@pytest.mark.parametrize(
    "kw",
    [
        {"width": 32, "depth": 2},
        {"width": 64, "depth": 3, "qk_norm": True},
        {"width": 48, "depth": 1, "tied_embeddings": True, "norm": "rmsnorm"},
        {"width": 32, "depth": 2, "n_heads": 2, "output_mult": 2.0},
    ],
)
def test_the_proxy_counted_by_role_has_the_proxys_own_n(kw: dict[str, object]) -> None:
    """The roles' N of the built-in GPT is ProxyConfig.n_params() (the committed data's N)."""
    c = ProxyConfig(context=32, **kw)  # type: ignore[arg-type]
    model_kw = {k: v for k, v in kw.items() if k in ("qk_norm", "tied_embeddings", "norm")}
    builder = Builder.of("tests.proxy_models.mqa:proxy", model_kw)
    assert count(builder, c) == (c.n_params(), c.n_params_total())


def test_param_groups_name_a_parameter_without_a_role() -> None:
    own = prepare(MQA, cfg(), seed=0)
    with pytest.raises(ValueError, match=r"parameter 'blocks\.0\.k\.weight' has no role"):
        param_groups(own.model, cfg(), HParams(lr=1e-3), roles=own.roles.roles)

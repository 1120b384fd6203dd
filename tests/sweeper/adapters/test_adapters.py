"""The framework adapters (extras ``hf`` and ``litgpt``): each runs only where its extra is
installed (their pins conflict: ``bash scripts/adapter_venvs.sh`` makes a virtualenv for each, and
``.cache/adapter-venvs/hf/bin/python -m pytest tests/sweeper/adapters`` runs these there)."""

from __future__ import annotations

import math

import pytest

from proxy_models import HParams, ProxyConfig, load_data, train
from proxy_models.builder import Builder, count, prepare
from proxy_models.coord_check import coord_check, slopes

ADAPTERS = {
    "hf": ("transformers", "sweeper.adapters.hf:llama"),
    "litgpt": ("litgpt", "sweeper.adapters.litgpt:gpt"),
}


@pytest.fixture(params=sorted(ADAPTERS))
def builder(request: pytest.FixtureRequest) -> Builder:
    module, path = ADAPTERS[request.param]
    pytest.importorskip(module)
    return Builder(path, (("kv_groups", 2),))


def cfg(width: int, par: str = "mup", depth: int = 2) -> ProxyConfig:
    return ProxyConfig(width=width, depth=depth, context=32, parametrization=par, base_width=32)


def test_builds_at_the_cells_shape_with_clear_roles(builder: Builder) -> None:
    own = prepare(builder, cfg(64), seed=0)
    r = own.roles
    assert not r.ambiguous and r.readout is not None
    assert sorted(set(r.roles.values())) == ["embedding", "hidden", "readout", "vector"]
    assert len(r.residual) == 2 * 2  # attention and MLP output projections of 2 blocks
    # SwiGLU with GQA (2 query heads per key/value head): not the GPT formula
    assert own.n_params != cfg(64).n_params()
    assert count(builder, cfg(64)) == (own.n_params, own.n_params_total)  # meta == real


def test_trains_deterministically_under_completep(builder: Builder) -> None:
    c = ProxyConfig(
        width=32, depth=2, context=32, parametrization="completep", base_width=32, base_depth=1
    )
    data = load_data(None)
    kw = {"tokens": 4 * 8 * 32, "data": data, "seed": 0, "threads": 1, "builder": builder}
    a, b = (
        train(c, HParams(lr=1e-2, batch_size=8), **kw),
        train(c, HParams(lr=1e-2, batch_size=8), **kw),
    )
    assert a.val_loss == b.val_loss and math.isfinite(a.val_loss) and a.val_loss < a.init_loss


def test_mup_coordinate_check_is_width_stable(builder: Builder) -> None:
    data = load_data(None)
    rows = coord_check(
        [cfg(w) for w in (32, 64, 128)], HParams(lr=1e-2), data=data, steps=3, builder=builder
    )
    s = slopes(rows)
    assert all(abs(v) <= 0.2 for v in s.values()), s
    sp = slopes(
        coord_check(
            [cfg(w, "sp") for w in (32, 64, 128)],
            HParams(lr=1e-2),
            data=data,
            steps=3,
            builder=builder,
        )
    )
    assert sp["hidden"] > s["hidden"] + 0.2 or sp["readout"] > s["readout"] + 0.2, (sp, s)

"""An adapters audit, the parts that need litgpt (run in .cache/adapter-venvs/litgpt; skipped
elsewhere): the adapter's init is litgpt's pretraining init, extra Config fields reach the model,
and the litgpt export of a law measured on the adapter loads with litgpt's own CLI as the model
whose N the header gives."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from proxy_models import ProxyConfig
from proxy_models.builder import Builder, BuilderError, prepare

litgpt = pytest.importorskip("litgpt")

PATH = "sweeper.adapters.litgpt:gpt"
REPO = Path(__file__).resolve().parents[3]


def _stds(model: Any) -> dict[str, float]:
    return {n: float(p.float().std()) for n, p in model.named_parameters() if p.ndim == 2}


@pytest.mark.parametrize("width", [32, 256])
def test_sp_trains_from_litgpts_pretraining_init(width: int) -> None:
    """Under SP the adapter kept GPT(config)'s PyTorch defaults (embedding std 1.0, linears
    Kaiming-uniform: 0.101 at width 32), an init no litgpt run uses; litgpt pretrain's
    initialize_weights gives sqrt(2/(5·d)), and 1/(sqrt(d)·L) to the attention's and the
    LLaMAMLP's output projections."""
    depth = 2
    cfg = ProxyConfig(width=width, depth=depth, context=64, parametrization="sp")
    own = prepare(Builder(PATH), cfg, seed=0)
    small, proj = math.sqrt(2 / (5 * width)), 1 / math.sqrt(width) / depth
    for name, std in _stds(own.model).items():
        want = proj if name.endswith(("attn.proj.weight", "mlp.proj.weight")) else small
        assert std == pytest.approx(want, rel=0.1), (name, std, want)
    assert not [n for n, m in own.model.named_modules() if "reset_parameters" in m.__dict__]


def test_extra_config_fields_reach_the_model() -> None:
    """``bias = true`` or ``parallel_residual = true`` in [model.args] raised TypeError (multiple
    values for a keyword); a shape field is refused in one line."""
    cfg = ProxyConfig(width=64, depth=2, context=32, parametrization="sp")
    model = Builder.of(PATH, {"bias": True, "parallel_residual": True}).build(cfg)
    assert model.config.bias and model.config.parallel_residual
    assert model.transformer.h[0].attn.qkv.bias is not None
    with pytest.raises(BuilderError, match=r"\[model.args\] n_head: set from the cell's shape"):
        Builder.of(PATH, {"n_head": 2}).build(cfg)


def test_the_litgpt_export_loads_as_the_laws_model(tmp_path: Path) -> None:
    """The export of a law measured on the adapter wrote litgpt's default block (GptNeoxMLP,
    LayerNorm, full attention), whose N is not the header's Llama count."""
    import torch

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.export import export_recipe
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.target import Target

    conv = Conventions(model_builder=PATH, model_args={"kv_groups": 2}, parametrization="sp")
    law = PowerLaw(target="lr", predictors=("n_params",), source="own", method="test",
                   conventions=conv, log_prefactor=math.log(0.2),
                   exponents={"n_params": -0.3})  # fmt: skip
    target = Target(width=512, depth=4, heads=8, vocab=1024, context=256, tokens=1e9)
    r = recommend({"lr": law}, target, force=True)
    path = tmp_path / "pretrain.yaml"
    path.write_text(export_recipe(r, "litgpt"))
    sys.path.insert(0, str(REPO / "scripts" / "export_checks"))
    try:
        from load_litgpt import parse
    finally:
        sys.path.remove(str(REPO / "scripts" / "export_checks"))
    cfg = parse(str(path))["model_config"]
    assert (cfg.mlp_class_name, cfg.norm_class_name) == ("LLaMAMLP", "RMSNorm")
    assert (cfg.n_query_groups, cfg.intermediate_size) == (4, 1376)
    with torch.device("meta"):
        model = litgpt.GPT(cfg)
    total = sum(p.numel() for p in model.parameters())
    embeddings = model.transformer.wte.weight.numel() + model.lm_head.weight.numel()
    assert (total - embeddings, total) == (r.n_params, r.n_params_total)

"""litgpt 0.5.13 loads the ``litgpt`` export: ``litgpt pretrain --config FILE`` (jsonargparse)."""

from __future__ import annotations

from importlib.metadata import version

import pytest

pytest.importorskip("litgpt")
import harness as h
from load_litgpt import load

FORMAT = "litgpt"
ROWS = {"": {"framework": f"litgpt {version('litgpt')}",
             "loader": "litgpt CLI `pretrain --config` (jsonargparse) + pretrain.get_lr/TrainArgs"}}  # fmt: skip
#: what `litgpt pretrain` cannot take from its config (docs/EXPORTS.md)
LIMITS = {
    "zero_stage": "litgpt pretrain shards with FSDP HYBRID_SHARD on several devices (ZeRO-3-like), not configurable",
    "rampup": "no batch ramp-up in litgpt pretrain",
    "z_loss": "no z-loss in litgpt pretrain",
    "parametrization": "no muP/CompleteP in litgpt's GPT",
    "init_std": "pretrain.initialize_weights is fixed: sqrt(2/(5·n_embd)), attention proj "
                "1/sqrt(n_embd)/n_layer, GptNeoxMLP proj not rescaled",
}
#: the recipe schedules the format runs as the proxies ran them (the others are refused)
RUNS = ("cosine", "constant")
CASES = h.cases()


@pytest.mark.parametrize("case", CASES)
def test_loads(case: str) -> None:
    if not h.refused_schedule(case, FORMAT, RUNS):
        h.load(case, FORMAT, load)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("check", list(h.CHECKS))
def test_numbers(case: str, check: str) -> None:
    if h.refused_schedule(case, FORMAT, RUNS):
        return
    h.check(case, FORMAT, h.load(case, FORMAT, load), check, LIMITS)

"""DeepSpeed loads the ``deepspeed`` export: DeepSpeedConfig on a data-parallel world of the recipe's size."""

from __future__ import annotations

from importlib.metadata import version

import pytest

pytest.importorskip("deepspeed")
import harness as h
from load_deepspeed import load

FORMAT = "deepspeed"
ROWS = {"": {"framework": f"deepspeed {version('deepspeed')}",
             "loader": "DeepSpeedConfig + deepspeed.runtime.lr_schedules"}}  # fmt: skip
#: what a DeepSpeed config has no key for (docs/EXPORTS.md); the export must say so (JSON has no
#: comments: on stderr)
LIMITS = {
    "seq_len": "the sequence length is the model's/data's, not a DeepSpeed config key",
    "rampup": "no global-batch ramp-up (curriculum learning ramps the sequence length, not the batch)",
    "model_shape": "the model is the training script's",
    "vocab": "the vocabulary is the model's/tokenizer's",
    "init_std": "the init is the model's",
    "z_loss": "no z-loss key",
    "parametrization": "no muP/CompleteP key",
}
#: the recipe schedules the format runs as the proxies ran them (the others are refused)
RUNS = ("cosine", "constant", "linear")
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

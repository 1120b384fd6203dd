"""HF Trainer (transformers 5.x) loads the ``hf`` export: HfArgumentParser(TrainingArguments)."""

from __future__ import annotations

from importlib.metadata import version

import pytest

pytest.importorskip("transformers")
import harness as h
from load_hf import load

FORMAT = "hf"
ROWS = {"": {"framework": f"transformers {version('transformers')}",
             "loader": "HfArgumentParser(TrainingArguments).parse_json_file + get_scheduler"}}  # fmt: skip
#: what TrainingArguments has no key for (docs/EXPORTS.md); the export must say so (JSON has no
#: comments: on stderr)
LIMITS = {
    "seq_len": "the sequence length is the tokenizer's/collator's, not a TrainingArguments key",
    "rampup": "no batch ramp-up in Trainer",
    "model_shape": "the model shape is the model config's",
    "vocab": "the vocabulary is the model config's/tokenizer's",
    "init_std": "the init std is the model config's initializer_range",
    "z_loss": "no z-loss in Trainer",
    "parametrization": "no muP/CompleteP in Trainer",
    "zero_stage": "ZeRO only through the deepspeed key (a DeepSpeed config) or fsdp",
}
CASES = h.cases()


@pytest.mark.parametrize("case", CASES)
def test_loads(case: str) -> None:
    h.load(case, FORMAT, load)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("check", list(h.CHECKS))
def test_numbers(case: str, check: str) -> None:
    h.check(case, FORMAT, h.load(case, FORMAT, load), check, LIMITS)

"""nanoGPT: the ``nanogpt`` export exec'd over a table of train.py's config globals (nanoGPT is a
script, not on PyPI: table-checked, not loaded). Runs in the project venv."""

from __future__ import annotations

import harness as h
import load_nanogpt as ln
import pytest

FORMAT = "nanogpt"
ROWS = {"": {"framework": f"nanoGPT {ln.REPO}@{ln.COMMIT[:10]}",
             "loader": "exec over train.py's config table + get_lr (table-checked, not loaded)",
             "limitation": "nanoGPT is a script, not on PyPI: the file exec'd over a table of "
                           "train.py's globals at the commit, get_lr and the batch arithmetic "
                           "re-stated from train.py"}}  # fmt: skip
LIMITS = {
    "zero_stage": "DDP only",
    "rampup": "no batch ramp-up in train.py",
    "z_loss": "no z-loss in model.py",
    "init_std": "model._init_weights is fixed: std 0.02 (c_proj 0.02/sqrt(2·n_layer))",
    "parametrization": "no muP/CompleteP in model.py",
    "vocab": "the vocabulary comes from data/<dataset>/meta.pkl (else 50304), not a config key",
    "eps": "AdamW's eps is torch's default 1e-8, not a config key",
}
#: the recipe schedules the format runs as the proxies ran them (the others are refused)
RUNS = ("cosine", "constant")
CASES = h.cases()


@pytest.mark.parametrize("case", CASES)
def test_loads(case: str) -> None:
    if not h.refused_schedule(case, FORMAT, RUNS):
        h.load(case, FORMAT, ln.load)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("check", list(h.CHECKS))
def test_numbers(case: str, check: str) -> None:
    if h.refused_schedule(case, FORMAT, RUNS):
        return
    h.check(case, FORMAT, h.load(case, FORMAT, ln.load), check, LIMITS)

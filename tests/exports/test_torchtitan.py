"""torchtitan loads the ``torchtitan`` export with its ConfigManager, in the venv of one release:
0.2.x reads a job TOML (--job.config_file); 0.3.x has no job TOML and takes --module/--config
plus CLI overrides, or a config-function module. The default export targets the current release
(0.3)."""

from __future__ import annotations

from importlib.metadata import version as _dist_version

import pytest

pytest.importorskip("torchtitan")
import harness as h
from load_torchtitan import _version, load

FORMAT = "torchtitan"
INSTALLED = _dist_version("torchtitan")
#: the export names checked in this venv: 0.2.x -> torchtitan@0.2; 0.3.x -> torchtitan@0.3 and the
#: default export (the current release)
NAMES = ["0.2"] if _version() < (0, 3) else ["0.3", "default"]
_loader = (
    "ConfigManager --job.config_file (TOML)"
    if _version() < (0, 3)
    else "ConfigManager --module/--config (+ overrides)"
)
ROWS = {v: {"framework": f"torchtitan {INSTALLED}" + (" (default export)" if v == "default" else ""),
            "loader": _loader + " + lr_scheduler build (LambdaLR)"} for v in NAMES}  # fmt: skip
LIMITS = {
    "zero_stage": "FSDP2 over data_parallel_shard_degree (-1: every rank) by default: ZeRO-3-like",
    "rampup": "no batch ramp-up in torchtitan's trainer",
    "z_loss": "no z-loss option in torchtitan's losses",
    "init_std": "the init is the model's (llama3: 0.02, depth-scaled), not a config key",
    "parametrization": "no muP/CompleteP in torchtitan's models",
    "model_shape": "named model flavors only (0.2 [model] name/flavor; 0.3 the config function's model_spec)",
    "vocab": "the vocabulary is the flavor's/tokenizer's",
}
CASES = h.cases()


def _name(v: str) -> str:
    return FORMAT if v == "default" else f"{FORMAT}@{v}"


@pytest.mark.parametrize("version", NAMES)
@pytest.mark.parametrize("case", CASES)
def test_loads(case: str, version: str) -> None:
    h.load(case, _name(version), load)


@pytest.mark.parametrize("version", NAMES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("check", list(h.CHECKS))
def test_numbers(case: str, version: str, check: str) -> None:
    h.check(case, _name(version), h.load(case, _name(version), load), check, LIMITS)


@pytest.mark.parametrize("version", NAMES)
@pytest.mark.parametrize("case", CASES)
def test_model_named(case: str, version: str) -> None:
    """The file picks its model: 0.2's JobConfig defaults to llama3/debugmodel when [model] is
    missing, which trains a 6-layer 256-wide model without a word."""
    out, _, rc = h.export(case, _name(version))
    assert rc == 0, f"exporter failed for {_name(version)}"
    if _version() < (0, 3):
        import tomllib

        model = tomllib.loads(out).get("model") or {}
        assert model.get("flavor"), (
            f"{case}: no [model] flavor: torchtitan 0.2 trains llama3/debugmodel"
        )
    else:
        assert ("--module" in out and "--config" in out) or "def " in out, (
            f"{case}: no --module/--config or config function"
        )

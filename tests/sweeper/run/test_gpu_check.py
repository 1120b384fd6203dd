"""scripts/gpu_check.py: the GPU machine trains the trials a sweep's workers are given, on the
corpus this machine trains on, and the comparison reads the right pairs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweeper.study.spec import load_study
from tests.sweeper.run.fake_tune import drive, open_searcher

REPO = Path(__file__).resolve().parents[3]
SMOKE = REPO / "studies" / "smoke.toml"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The script with few law resamples, and the quickstart's committed CPU runs."""
    gc = _script()
    monkeypatch.setattr(gc, "N_BOOT", 40)
    ref = pd.read_csv(REPO / "docs" / "data" / "quickstart.csv")
    return gc, ref[ref["state"] == "COMPLETE"]


def _key(c: dict[str, Any]) -> tuple[str, float, int]:
    return (c["cell"], c["params"]["lr"], c["seed"])


def test_plan_gives_every_trial_what_the_searcher_dispatches(tmp_path: Path) -> None:
    spec = load_study(SMOKE)
    started = drive(open_searcher(spec, f"sqlite:///{tmp_path / 's.db'}"), budget=300)
    planned = _script().plan(str(SMOKE), tmp_path / "plan")
    fields = ("model", "hparams", "tokens", "params")
    want = {_key(c): {k: c[k] for k in fields} for c in started}
    got = {_key(c): {k: c[k] for k in fields} for c in planned}
    assert len(got) == len(planned) == 36 and got == want
    assert {c["device"] for c in planned} == {"cpu"}  # resources.gpu = 0: the study's own rule
    assert (tmp_path / "plan" / "corpus.txt").stat().st_size > 1_000_000


def test_a_planned_trial_trains_as_the_sweep_trains_it(tmp_path: Path) -> None:
    """Through the written corpus, the loss a sweep's worker gets on the built-in data; a repeat
    runs right after its first run and gives the same loss on the CPU."""
    from sweeper.run.trainable import train_once

    gc = _script()
    trials = gc.plan(str(SMOKE), tmp_path)
    config = json.loads((tmp_path / "configs.json").read_text())
    config["trials"] = trials[:1]
    (tmp_path / "configs.json").write_text(json.dumps(config))
    assert gc.train(tmp_path, "cpu", tmp_path / "out.csv", repeat=1, budget_s=60, threads=1) == 0
    rows = pd.read_csv(tmp_path / "out.csv")
    assert rows["repeat"].tolist() == [0, 1] and rows["precision"].tolist() == ["fp32"] * 2
    direct = train_once({**trials[0], "data": "builtin"})
    assert rows["loss"].tolist() == [pytest.approx(direct["val_loss"], abs=1e-6)] * 2


def test_compare_pairs_trials_and_reads_each_side_of_the_optimum(
    tmp_path: Path, quick: Any
) -> None:
    gc, ref = quick
    gpu = ref.copy()
    gpu["loss"] = gpu["loss"] * (1 + 1e-4)  # every run 0.01% worse on the "GPU"...
    hit = (gpu["cell"] == "w32-d2-t819k") & (gpu["lr"] == 0.0034)
    gpu.loc[hit, "loss"] = gpu.loc[hit, "loss"] - 0.1  # ...but w32's best LR moves one step down
    gpu.to_csv(tmp_path / "gpu.csv", index=False)
    ref.to_csv(tmp_path / "cpu.csv", index=False)
    study = str(REPO / "studies" / "quickstart.toml")
    out = gc.compare(tmp_path / "gpu.csv", tmp_path / "cpu.csv", study, tmp_path / "cpu.csv")
    assert out["runs_compared"] == 90 and out["gpu_repeat_abs_rel_diff"] == []
    assert out["by_side"]["below_best_lr"]["gpu_vs_cpu_abs_rel_median"] == pytest.approx(1e-4)
    apart = {c["cell"]: c["octaves_apart"] for c in out["cells"]}
    assert apart == {**dict.fromkeys(apart, 0.0), "w32-d2-t819k": 1.0}  # 0.0068 -> 0.0034
    assert out["cells_missing"] == [] and not any(c["partial"] for c in out["cells"])
    assert out["other_max_abs_loss_diff"] == pytest.approx(0.1, abs=0.01)
    assert out["laws"]["cpu"]["exponent"] < 0


def test_a_grid_cut_short_is_compared_point_by_point_without_a_law(
    tmp_path: Path, quick: Any
) -> None:
    gc, ref = quick
    cut = ref[
        (ref["cell"] != "w128-d2-t819k") & ~((ref["cell"] == "w96-d2-t819k") & (ref["lr"] > 0.005))
    ]
    cut = cut[(cut["cell"] != "w32-d2-t819k") | (cut["seed"] == 0)]  # every LR, one seed of three
    cut.to_csv(tmp_path / "gpu.csv", index=False)
    ref.to_csv(tmp_path / "cpu.csv", index=False)
    out = gc.compare(tmp_path / "gpu.csv", tmp_path / "cpu.csv", "quickstart")
    assert out["cells_missing"] == ["w128-d2-t819k"]
    (w96,) = [c for c in out["cells"] if c["cell"] == "w96-d2-t819k"]
    assert w96["partial"] and (w96["lrs"], w96["lrs_reference"]) == (4, 6)
    assert w96["octaves_apart"] is None and "w96-d2-t819k" in out["laws"]["skipped"]
    (w32,) = [c for c in out["cells"] if c["cell"] == "w32-d2-t819k"]
    assert w32["partial"] and (w32["trials"], w32["trials_reference"], w32["seeds"]) == (6, 18, 1)
    assert out["abs_rel_loss_diff_max"] == 0.0
    # the seed baseline is read at the points both trained: w128's and w96's top LRs are not
    pairs = sum(side["cpu_seed_pairs"] for side in out["by_side"].values())
    assert pairs == 3 * (6 + 6 + 6 + 4)

"""`sweeper status` and `sweeper trials` as a new user read them (an audit on a 2-core laptop): the
best point by its mean over seeds, the finished seeds of open points, every sweep listed, runs
told apart from placeholder rows, whole numbers written whole. No Ray: trials told by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest

from sweeper.study.samplers import RUNS_DONE, reconcile
from sweeper.study.space import distributions
from sweeper.study.spec import StudySpec, parse_study_toml
from sweeper.study.sweep import open_sweep, sweep_status
from sweeper.study.sweep_runs import aggregate_runs, load_sweep_runs
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)

STUDY = """\
[sweep]
name = "{name}"
seeds_per_point = {seeds}

[model]
context = 64

[ladder]
widths = [16]
depths = [2]
tokens = [32768]

[search]
lr = {{ values = [2e-3, 4e-3, 8e-3] }}
batch_size = 8

[sampler]
kind = "grid"
"""


def _spec(name: str, seeds: int = 1) -> StudySpec:
    return parse_study_toml(STUDY.format(name=name, seeds=seeds))


def _record(seed: int, loss: float) -> dict[str, Any]:
    return {"seed": seed, "ray_trial_id": f"r{seed}", "loss": loss, "diverged": False,
            "tokens": 32768, "wall_s": 1.0, "tokens_per_s": 3e4}  # fmt: skip


def _point(study: optuna.Study, spec: StudySpec, lr: float, losses: dict[int, float]) -> None:
    """Tell the point ``lr`` COMPLETE with one run per seed, as the launcher tells it."""
    study.enqueue_trial({"lr": lr, "batch_size": 8})
    t = study.ask(distributions(spec.search))
    runs = [_record(seed, loss) for seed, loss in losses.items()]
    t.set_user_attr("runs", runs)
    for k, v in aggregate_runs(runs).items():
        t.set_user_attr(k, v)
    study.tell(t, sum(losses.values()) / len(losses))


def _open(study: optuna.Study, spec: StudySpec, lr: float, done: dict[int, float]) -> None:
    """A point left RUNNING with the seeds ``done`` finished (the launcher's ``runs_done``)."""
    study.enqueue_trial({"lr": lr, "batch_size": 8})
    t = study.ask(distributions(spec.search))
    t.set_user_attr(RUNS_DONE, [_record(seed, loss) for seed, loss in done.items()])


def test_the_best_point_is_its_mean_over_its_runs_not_one_lucky_run(
    sqlite_url: str, cli: CliRunner
) -> None:
    """A law study re-ran lr 0.0096 (2.8258, then 3.0903 on its second seed): status said "best
    loss 2.8258 at lr 0.0096" from its first run, though the LR's mean (2.958) was worse than
    lr 0.0068's 2.881. Grid and law points are ranked alike: by their mean over their seeds."""
    spec = _spec("lawlike")
    (cs,) = open_sweep(spec, sqlite_url)
    _point(cs.study, spec, 8e-3, {0: 2.8258})  # (one seed a trial: the law sampler's points)
    _point(cs.study, spec, 4e-3, {0: 2.8809})
    _point(cs.study, spec, 8e-3, {1: 3.0903})
    (cell,) = sweep_status("lawlike", sqlite_url)["cells"]
    assert cell["best_lr"] == 4e-3 and cell["best_loss"] == pytest.approx(2.8809)
    assert cell["best_runs"] == 1
    code, out, _ = cli("status", "lawlike", "--storage", sqlite_url)
    assert code == 0 and "best loss 2.8809 at lr 0.004, batch 8 seqs" in out, out
    assert "mean of" not in out
    # a third run at 0.0096 makes it the best again: the mean of its 3 seeds, said
    _point(cs.study, spec, 8e-3, {2: 2.50})
    (cell,) = sweep_status("lawlike", sqlite_url)["cells"]
    assert (cell["best_lr"], cell["best_runs"]) == (8e-3, 3)
    assert cell["best_loss"] == pytest.approx((2.8258 + 3.0903 + 2.50) / 3)
    code, out, _ = cli("status", "lawlike", "--storage", sqlite_url)
    assert "at lr 0.008, batch 8 seqs (mean of 3 seeds)" in out


def test_finished_seeds_of_an_open_point_are_counted_and_shown(
    sqlite_url: str, cli: CliRunner
) -> None:
    """A point of two seeds, one finished, the other running (or its driver killed): status
    showed "runs": 0 and `trials` one RUNNING row without a seed, though the finished seed was
    stored (and is reused by the relaunch)."""
    spec = _spec("openseed", seeds=2)
    (cs,) = open_sweep(spec, sqlite_url)
    _open(cs.study, spec, 4e-3, {0: 2.9})
    runs = load_sweep_runs("openseed", sqlite_url)
    assert list(runs["state"]) == ["RUNNING", "RUNNING"]
    assert runs["seed"].tolist()[0] == 0 and runs["loss"].tolist()[0] == pytest.approx(2.9)
    assert runs["seed"].isna().tolist() == [False, True]  # (the seed still running: no seed)
    (cell,) = sweep_status("openseed", sqlite_url)["cells"]
    assert (cell["running"], cell["runs"], cell["runs_open"]) == (1, 0, 1)
    code, out, _ = cli("status", "openseed", "--storage", sqlite_url)
    assert code == 0 and "1 run of open points finished" in out, out
    # the relaunch closes it and queues the point with its finished seed: counted once
    reconcile(cs.study)
    (cell,) = sweep_status("openseed", sqlite_url)["cells"]
    assert (cell["closed"], cell["waiting"], cell["runs_open"]) == (1, 1, 1)
    assert load_sweep_runs("openseed", sqlite_url)["seed"].notna().sum() == 0


def test_status_without_a_name_lists_an_imported_sweep_beside_the_launched_one(
    tmp_path: Path, sqlite_url: str, cli: CliRunner
) -> None:
    """The storage held a launched and an imported sweep: `status` showed only the launched one
    (its help says "the sweeps in the storage (or the only one)")."""
    spec = _spec("launched1")
    (cs,) = open_sweep(spec, sqlite_url)
    _point(cs.study, spec, 4e-3, {0: 2.9})
    code, out, _ = cli("status", "--storage", sqlite_url)  # the only sweep: its status
    assert code == 0 and out.startswith("sweep launched1")
    csv = tmp_path / "runs.csv"
    pd.DataFrame(
        {"n_params": [1e6, 1e6], "tokens": [1e8, 1e8], "lr": [1e-3, 2e-3], "loss": [3.0, 2.9]}
    ).to_csv(csv, index=False)
    code, _, err = cli("import", csv, "--sweep", "imp", "--storage", sqlite_url)
    assert code == 0, err
    code, out, _ = cli("status", "--storage", sqlite_url)
    names = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and names == ["launched1", "imp"], out
    code, out, _ = cli("status", "--storage", sqlite_url, "--json")
    assert [r["kind"] for r in json.loads(out)["sweeps"]] == ["launched", "imported"]


def _rows_sweep(sqlite_url: str) -> StudySpec:
    """A sweep of two runs (one point, two seeds) and a point its killed driver left: a FAIL
    trial without a run."""
    spec = _spec("rows", seeds=2)
    (cs,) = open_sweep(spec, sqlite_url)
    _point(cs.study, spec, 4e-3, {0: 2.9, 1: 3.0})
    cs.study.ask(distributions(spec.search))
    reconcile(cs.study)
    return spec


def test_trials_says_runs_apart_from_placeholder_rows(
    tmp_path: Path, sqlite_url: str, cli: CliRunner
) -> None:
    """`trials -o` said "3 run(s) written" for two runs and a failed point's row."""
    _rows_sweep(sqlite_url)
    code, _, err = cli("trials", "rows", "--storage", sqlite_url, "-o", tmp_path / "runs.csv")
    assert code == 0
    assert "2 run(s) and 1 row(s) of points without a finished run" in err, err


def test_trials_writes_whole_numbers_whole(tmp_path: Path, sqlite_url: str, cli: CliRunner) -> None:
    """Width, depth, seed, n_params... were written 32.0 (a blank in the column made it float)."""
    from sweeper.study.ladder import cells

    spec = _rows_sweep(sqlite_url)
    out_csv = tmp_path / "runs.csv"
    assert cli("trials", "rows", "--storage", sqlite_url, "-o", out_csv)[0] == 0
    header, first, *_ = out_csv.read_text().splitlines()
    row = dict(zip(header.split(","), first.split(","), strict=True))
    whole = (row["width"], row["depth"], row["seed"], row["n_params"])
    assert whole == ("16", "2", "0", str(cells(spec)[0].n_params)), row
    assert row["lr"] == "0.004" and "." in row["loss"]
    code, out, _ = cli("trials", "rows", "--storage", sqlite_url, "--format", "json")
    rows = json.loads(out)
    assert code == 0
    assert rows[0]["width"] == 16 and isinstance(rows[0]["width"], int)
    assert rows[-1]["seed"] is None  # (the failed point's row keeps its blank)


def test_trials_refuses_an_output_extension_it_does_not_write(
    tmp_path: Path, sqlite_url: str, cli: CliRunner
) -> None:
    """-o t.tsv or t.xlsx wrote comma-separated CSV under that name, which import then read as one
    column (a CLI audit); a file without an extension is still CSV."""
    _rows_sweep(sqlite_url)
    for name in ("t.tsv", "t.xlsx"):
        code, _, err = cli("trials", "rows", "--storage", sqlite_url, "-o", tmp_path / name)
        assert code == 2 and "is not one of csv, parquet, json" in err, err
        assert not (tmp_path / name).exists()
    assert cli("trials", "rows", "--storage", sqlite_url, "-o", tmp_path / "plain")[0] == 0
    forced = ["--format", "csv", "-o", tmp_path / "t.txt"]
    assert cli("trials", "rows", "--storage", sqlite_url, *forced)[0] == 0


def test_trials_to_a_dash_writes_stdout(
    tmp_path: Path, sqlite_url: str, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`trials SWEEP -o -` wrote a file named "-" and nothing to stdout (a storage audit)."""
    _rows_sweep(sqlite_url)
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("trials", "rows", "--storage", sqlite_url, "-o", "-")
    assert code == 0 and len(out.splitlines()) > 1 and out.splitlines()[0].count(",") > 3, out
    assert not (tmp_path / "-").exists()
    code, out, _ = cli("trials", "rows", "--storage", sqlite_url, "-o", "-", "--format", "json")
    assert code == 0 and isinstance(json.loads(out), list)

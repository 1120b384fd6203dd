"""A study's cost before it runs: the throughput probe, the pricing of every cell, and
``sweeper validate --estimate``."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper.run.estimate import (
    LAUNCH_S,
    PROCESS_S,
    TRIAL_S,
    Probe,
    estimate_study,
    probe_cell,
    probe_loaded,
)
from sweeper.study.ladder import Cell, cells
from sweeper.study.spec import StudySpec, parse_study_toml
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)

STUDY = """\
[sweep]
name = "est"
seeds_per_point = {seeds}

[model]
context = 32
head_dim = 16

[ladder]
widths = [16, 32, 64]
depths = [1]
tokens = [{tokens}]

[search]
lr = {{ values = [1e-3, 3e-3, 1e-2] }}
batch_size = {batch}

[sampler]
{sampler}
"""


def study(
    *, seeds: int = 2, tokens: int = 16384, batch: str = "8", sampler: str = 'kind = "grid"'
) -> StudySpec:
    return parse_study_toml(STUDY.format(seeds=seeds, tokens=tokens, batch=batch, sampler=sampler))


def fake_probe(s_tok_small: float, s_tok_big: float, fixed: float = 2.0):  # type: ignore[no-untyped-def]
    """A probe that answers known figures: the cheapest cell s_tok_small, the dearest s_tok_big."""
    seen: list[tuple[str, int]] = []

    def probe(spec: StudySpec, cell: Cell, steps: int, copies: int) -> Probe:
        seen.append((cell.name, copies))
        ladder = sorted(cells(spec), key=lambda c: c.flops_per_token)
        s_tok = s_tok_small if cell.name == ladder[0].name else s_tok_big
        return Probe(cell.name, cell.flops_per_token, s_tok, fixed, steps)

    probe.seen = seen  # type: ignore[attr-defined]
    return probe


def test_a_grid_is_priced_cell_by_cell_through_the_two_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # (the fixed costs' load)
    spec = study()
    probe = fake_probe(1e-4, 1e-3)
    est = estimate_study(spec, cores=2, probe=probe)
    # the cheapest and the dearest cell are probed, each with the sweep's concurrency (2 at once)
    assert probe.seen == [("w16-d1-t16.4k", 2), ("w64-d1-t16.4k", 2)]  # type: ignore[attr-defined]
    by = {c.cell: c for c in est.cells}
    assert [c.runs for c in est.cells] == [3 * 2] * 3  # 3 LRs x 2 seeds per cell
    assert by["w16-d1-t16.4k"].run_s == pytest.approx(2.0 + 16384 * 1e-4)
    assert by["w64-d1-t16.4k"].run_s == pytest.approx(2.0 + 16384 * 1e-3)
    assert by["w16-d1-t16.4k"].run_s < by["w32-d1-t16.4k"].run_s < by["w64-d1-t16.4k"].run_s
    total = sum(c.runs * c.run_s for c in est.cells)
    assert est.core_s == pytest.approx((total, total)) and est.runs == 18
    # 2 trials at once on 2 cores, plus Ray's start and Tune's cost per trial (the smoke study's
    # estimate was 7 s against a 26 s launch without them)
    assert est.overhead_s == pytest.approx(LAUNCH_S + TRIAL_S * 18 / 2 + PROCESS_S)
    assert est.wall_s[0] == pytest.approx(total / 2 + est.overhead_s)
    assert est.notes == ()


def test_a_probe_that_fails_in_the_studys_own_code_says_so() -> None:
    """A training function that raises made `validate --estimate` print "internal error:
    TrialError ... (rerun with --debug)", as if Sweeper had failed."""
    from sweeper.errors import SweeperError
    from sweeper.run.trainable import TrialError

    def broken(spec: StudySpec, cell: Cell, steps: int, copies: int) -> Probe:
        raise TrialError("train.function 'm:f': RuntimeError: boom\nTraceback (most recent...)")

    with pytest.raises(SweeperError, match=r"probe's run of w16-d1-t16.4k failed in the study's "
                       r"own code: train.function 'm:f': RuntimeError: boom \(launch"):  # fmt: skip
        estimate_study(study(), cores=2, probe=broken)


def test_the_middle_cell_lies_on_the_log_log_line() -> None:
    spec = study()
    est = estimate_study(spec, cores=1, probe=fake_probe(1e-4, 1e-3, fixed=0.0))
    fpt = {c.name: c.flops_per_token for c in cells(spec)}
    t = math.log(fpt["w32-d1-t16.4k"] / fpt["w16-d1-t16.4k"]) / math.log(
        fpt["w64-d1-t16.4k"] / fpt["w16-d1-t16.4k"]
    )
    mid = next(c for c in est.cells if c.cell == "w32-d1-t16.4k")
    assert mid.run_s == pytest.approx(16384 * 1e-4 * 10**t)


def test_a_law_study_is_a_range_with_its_start_priced_exactly() -> None:
    spec = study(seeds=1, sampler='kind = "law"\nbudget_runs = 15')
    est = estimate_study(spec, cores=2, probe=fake_probe(1e-4, 1e-3, fixed=0.0))
    start = {c.cell: c.runs for c in est.cells}
    assert start == {"w16-d1-t16.4k": 3, "w32-d1-t16.4k": 3, "w64-d1-t16.4k": 3}  # START_LRS each
    run_s = sorted(c.run_s for c in est.cells)
    spent = sum(3 * r for r in run_s)
    assert est.core_s == pytest.approx((spent + 6 * run_s[0], spent + 6 * run_s[-1]))
    assert est.runs == 15 and any("law sampler" in n for n in est.notes)
    # a budget smaller than the start (refused in a study file; a spec built in Python): the
    # cheapest cells first, nothing left to range over
    small = estimate_study(
        replace(spec, sampler=replace(spec.sampler, budget_runs=4)),
        cores=2,
        probe=fake_probe(1e-4, 1e-3, fixed=0.0),
    )
    assert [c.runs for c in small.cells] == [3, 1, 0]
    assert small.core_s[0] == pytest.approx(small.core_s[1])


def test_a_law_studys_points_carry_all_their_seeds() -> None:
    """With 2 seeds a point, a cell's start is 3 points of 2 runs, and the budget is spent in
    whole points (the searcher plans a point only while all its seeds fit)."""
    est = estimate_study(
        study(seeds=2, sampler='kind = "law"\nbudget_runs = 21'),
        cores=2,
        probe=fake_probe(1e-4, 1e-3, fixed=0.0),
    )
    assert [c.runs for c in est.cells] == [6, 6, 6] and est.runs == 20  # 10 points of 2 runs
    run_s = sorted(c.run_s for c in est.cells)
    start = sum(6 * r for r in run_s)  # the 2 runs left range between the cheapest and dearest
    assert est.core_s == pytest.approx((start + 2 * run_s[0], start + 2 * run_s[-1]))
    assert any("law sampler: 20 runs at most" in n for n in est.notes)


def test_a_searched_batch_is_probed_at_its_smallest_and_said_to_be_a_bound() -> None:
    from sweeper.run.estimate import _probe_params

    spec = study(batch="{ values = [4, 8, 16] }")
    assert _probe_params(spec)["batch_size"] == 4
    assert _probe_params(spec)["lr"] == 3e-3  # the middle value
    est = estimate_study(spec, cores=1, probe=fake_probe(1e-4, 1e-3))
    assert est.runs == 3 * 9 * 2 and any("upper bound" in n for n in est.notes)


def test_a_real_probe_times_training_steps() -> None:
    spec = study()
    cell = cells(spec)[0]
    p = probe_cell(spec, cell, steps=3)
    assert p.cell == cell.name and p.steps == 3
    assert 0 < p.s_per_token < 1 and 0 <= p.fixed_s < 60
    assert p.run_s(cell.tokens) > p.run_s(cell.tokens // 2)
    loaded = probe_loaded(spec, cell, 2, copies=2)  # two processes at once, as two trials
    assert loaded.cell == cell.name and 0 < loaded.s_per_token < 1


def test_validate_estimate_prints_and_writes_json(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sweeper.run.trainable as trainable

    monkeypatch.setattr(trainable, "usable_cores", lambda: 1)  # one probe at a time: no spawn
    path = tmp_path / "est.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8", sampler='kind = "grid"'))
    code, out, _ = cli("validate", path, "--estimate", "--probe-steps", "2")
    assert code == 0
    assert "estimate (probe: 2 steps each" in out and "total: 9 runs" in out and "core-h" in out
    code, out, _ = cli("validate", path, "--estimate", "--probe-steps", "2", "--json")
    got = json.loads(out)["estimate"]
    assert code == 0 and got["runs"] == 9 and len(got["cells"]) == 3 and len(got["probes"]) == 2
    assert got["core_s"][0] == got["core_s"][1] > 0 and got["core_hours"][0] > 0


def test_validate_says_a_law_studys_budget(tmp_path: Path, cli: CliRunner) -> None:
    path = tmp_path / "law.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8",
                                 sampler='kind = "law"\nbudget_runs = 10'))  # fmt: skip
    code, out, _ = cli("validate", path)
    assert code == 0 and "law sampler: at most 10 training runs" in out and "trials ×" not in out
    code, out, _ = cli("validate", path, "--json")
    assert json.loads(out)["budget_runs"] == 10 and json.loads(out)["ok"] is True
    # a bad file answers in JSON too (it printed plain text under --json), exit 2
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text().replace("budget_runs = 10", "budget_runs = -1"))
    code, out, _ = cli("validate", bad, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["ok"] is False and doc["problems"][0].startswith("sampler.budget_runs")


def test_durations_read_in_seconds_below_two_minutes() -> None:
    from sweeper.run.estimate import duration

    assert [duration(s) for s in (0.25, 12.4, 59.4, 59.6, 600, 5399, 5400, 9000)] == [
        "0.2 s", "12 s", "59 s", "60 s", "10 min", "90 min", "1.5 h", "2.5 h",
    ]  # fmt: skip


def test_validate_estimate_of_a_study_of_seconds_says_seconds(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_estimate(monkeypatch)
    path = tmp_path / "est.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8", sampler='kind = "grid"'))
    code, out, _ = cli("validate", path, "--estimate")
    assert code == 0
    wall = out.split("about ", 1)[1].split(" wall", 1)[0]
    assert wall.endswith(" s") and float(wall[:-2]) > 0, out  # not "0 min"


def test_estimate_in_a_plain_script_does_not_run_the_script_again(tmp_path: Path) -> None:
    """The probes' spawned processes re-ran an unguarded script (an audit's printed its line
    three times, then failed with BrokenProcessPool); __main__ is hidden while they start."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    script = tmp_path / "script.py"
    script.write_text(
        "from sweeper.run.estimate import probe_loaded\n"
        "from sweeper.study.ladder import cells\n"
        "from sweeper.study.spec import load_study\n"
        f"spec = load_study({str(repo / 'studies' / 'smoke.toml')!r})\n"
        "print('TOP-LEVEL RAN', flush=True)\n"
        "probe = probe_loaded(spec, cells(spec)[0], 2, 2)\n"
        "print('probed', probe.s_per_token > 0)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("TOP-LEVEL RAN") == 1 and "probed True" in out.stdout


def test_an_estimate_whose_ends_print_alike_prints_one_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It printed "about 25 s to 25 s wall" when the two ends rounded alike."""
    from types import SimpleNamespace

    from sweeper.cli.study import _print_estimate

    probe = SimpleNamespace(cell="c", s_per_token=1e-4, fixed_s=0.0, steps=2)
    est = SimpleNamespace(
        probes=[probe], cells=[], core_s=(25.2, 25.4), wall_s=(25.2, 25.4), runs=6,
        concurrent=1, overhead_s=5.0, cpu_per_trial=1.0, notes=(), caveat="for this load",
    )  # fmt: skip
    _print_estimate(est)
    out = capsys.readouterr().out
    assert "about 25 s wall" in out and "25 s to" not in out and ", 25 core-s (" in out
    est.core_s = est.wall_s = (25.2, 90.0)
    _print_estimate(est)
    out = capsys.readouterr().out
    assert "about 25 s to 90 s wall" in out and "25-90 core-s" in out


def fake_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sweeper.api.estimate`` without training: a probe with known figures on one core."""
    import sweeper.api as api

    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # (an idle machine's figures)

    def fast(spec: StudySpec | str | Path, **_: object):  # type: ignore[no-untyped-def]
        spec = api.load_study(spec) if isinstance(spec, (str, Path)) else spec
        return estimate_study(spec, cores=1, probe=fake_probe(1e-5, 2e-5, fixed=0.5))

    monkeypatch.setattr(api, "estimate", fast)


def test_a_law_budget_above_what_the_plan_can_use_is_priced_at_the_plans_cap(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """budget_runs = 10000000 was priced as 10 million runs (2,300-7,300 core-hours) for a study
    whose plan can use 54: 3 cells x 3 LRs x 3 runs at a (cell, LR) here, 27."""
    spec = study(seeds=1, sampler='kind = "law"\nbudget_runs = 10000000')
    est = estimate_study(spec, cores=2, probe=fake_probe(1e-4, 1e-3, fixed=0.0))
    run_s = sorted(c.run_s for c in est.cells)
    assert est.runs == 27 and est.core_s == pytest.approx((9 * sum(run_s), 9 * sum(run_s)))
    assert any(n.startswith("law sampler: 27 runs at most") for n in est.notes)
    assert (
        "budget_runs 10,000,000 is more than the plan can use: priced its 27 runs (every cell's "
        "3 LRs at 3 runs each)"
    ) in est.notes
    # below the cap, a cell still holds at most its 9 runs: the range fills the cheapest cells
    # first (low) and the dearest first (high), not all the rest in one cell
    est = estimate_study(
        replace(spec, sampler=replace(spec.sampler, budget_runs=25)),
        cores=2,
        probe=fake_probe(1e-4, 1e-3, fixed=0.0),
    )
    start = 3 * sum(run_s)
    low = start + 6 * run_s[0] + 6 * run_s[1] + 4 * run_s[2]
    high = start + 6 * run_s[2] + 6 * run_s[1] + 4 * run_s[0]
    assert est.runs == 25 and est.core_s == pytest.approx((low, high))
    assert not any("more than the plan can use" in n for n in est.notes)
    # validate --estimate says it
    fake_estimate(monkeypatch)
    path = tmp_path / "big.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8",
                                 sampler='kind = "law"\nbudget_runs = 10000000'))  # fmt: skip
    code, out, _ = cli("validate", path, "--estimate")
    assert code == 0 and "total: 27 runs" in out and "priced its 27 runs" in out
    assert "warning: sampler.budget_runs 10,000,000 is more than the 27 runs" in out


def test_a_cell_too_big_for_this_machine_is_a_warning_and_is_not_probed(
    tmp_path: Path, cli: CliRunner
) -> None:
    # (an audit: widths of 2^60 and depths of 1e9 passed validate, and --estimate then hung or
    # died inside torch building the model)
    path = tmp_path / "deep.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8", sampler='kind = "grid"')
                    .replace("depths = [1]", "depths = [1, 1000000000]"))  # fmt: skip
    code, out, _ = cli("validate", path)
    assert code == 0
    assert "warning: cannot run on this machine: w16-d1000000000-t8.19k:" in out
    assert "GiB (weights, gradients, optimizer state)" in out and "w16-d1-t8.19k:" not in out
    code, out, _ = cli("validate", path, "--json")
    assert any("w64-d1000000000" in w for w in json.loads(out)["warnings"])
    code, _, err = cli("validate", path, "--estimate", "--probe-steps", "2")
    assert code == 2 and "--estimate cannot probe w64-d1000000000-t8.19k" in err


def test_probe_steps_without_estimate_is_refused(tmp_path: Path, cli: CliRunner) -> None:
    """A help-text audit: `validate --probe-steps 5` without --estimate did nothing, silently."""
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8", sampler='kind = "grid"'))
    code, _, err = cli("validate", path, "--probe-steps", "5")
    assert code == 2 and "--probe-steps sets the probe of --estimate; give both" in err
    code, out, _ = cli("validate", path, "--probe-steps", "5", "--json")  # (JSON either way)
    assert code == 2 and json.loads(out)["ok"] is False


def test_a_training_functions_cell_is_said_to_count_its_weights_alone() -> None:
    """A review: for a study with its own training function the memory counted is the weights
    alone (its optimizer is the function's), but the warning named all three."""
    from sweeper.run.estimate import cells_too_big

    spec = study(tokens=8192, batch="8")
    deep = replace(spec, ladder=replace(spec.ladder, depths=(1, 10**9)))
    assert "(weights, gradients, optimizer state)" in cells_too_big(deep)[0]
    own = replace(deep, train=replace(deep.train, function="tests.own_model_loops:own_model"))
    assert "(its weights alone)" in cells_too_big(own)[0]

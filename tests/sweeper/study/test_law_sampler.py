"""The law sampler's study keys: ``[sampler] kind = "law"`` with ``budget_runs`` and
``stop_lr_interval_ratio``, the optional ``[target]``, their one-line errors, round trip and hash."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from sweeper.study.samplers import PlannedOnlySampler, make_sampler
from sweeper.study.spec import TargetSpec, law_lrs, load_study, parse_study_toml
from sweeper.study.study_toml import spec_hash, study_toml
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)
from tests.sweeper.helpers import study_problems as _problems

LAW = """\
[sweep]
name = "law"

[model]
context = 32

[ladder]
widths = [16, 32]
depths = [1]
tokens = [16384]

[search]
lr = { low = 2e-3, high = 4.0, log = true }
batch_size = 8

[sampler]
kind = "law"
budget_runs = 8
"""

#: the warning every 2-cell law study gets (LAW's ladder): its plan never has a law
TWO_CELLS = "the ladder has 2 cell(s): the plan's law needs 3"


def _other_warnings(out: str | list[str]) -> list[str]:
    """``validate``'s warnings (its text, or --json's list) but the 2-cell one."""
    lines = out if isinstance(out, list) else [x for x in out.splitlines() if "warning:" in x]
    return [w for w in lines if TWO_CELLS not in w]


BAD: list[tuple[str, str, str]] = [
    ("no-budget", LAW.replace("budget_runs = 8\n", ""), "sampler.budget_runs: missing"),
    ("budget-zero", LAW.replace("budget_runs = 8", "budget_runs = 0"), "sampler.budget_runs"),
    ("budget-float", LAW.replace("budget_runs = 8", "budget_runs = 2.5"), "sampler.budget_runs"),
    (
        "budget-below-seeds",
        LAW.replace('name = "law"', 'name = "law"\nseeds_per_point = 3').replace(
            "budget_runs = 8", "budget_runs = 2"
        ),
        "sampler.budget_runs: 2 is less than",
    ),
    (  # 2 cells: 6 runs start them; a budget of 5 ran them in one cell, then fit failed
        "budget-below-start",
        LAW.replace("budget_runs = 8", "budget_runs = 5"),
        "sampler.budget_runs: 5 is less than the 6 runs the plan spends starting every cell",
    ),
    (
        "budget-below-start-seeds",
        LAW.replace('name = "law"', 'name = "law"\nseeds_per_point = 2'),
        "give at least 12",
    ),
    (
        "ratio-one",
        LAW + "stop_lr_interval_ratio = 1.0\n",
        "sampler.stop_lr_interval_ratio",
    ),
    (
        "ratio-below-one",
        LAW + "stop_lr_interval_ratio = 0.5\n",
        "sampler.stop_lr_interval_ratio",
    ),
    (
        "first-seed-law",
        LAW.replace('name = "law"', 'name = "law"\nfirst_seed = 2'),
        "sweep.first_seed: not used with sampler.kind = 'law'",
    ),
    ("target-negative", LAW + "\n[target]\nparams = -1e9\n", "target.params"),
    ("target-zero-tokens", LAW + "\n[target]\ntokens = 0\n", "target.tokens"),
    ("target-nan", LAW + "\n[target]\ntokens = nan\n", "target.tokens: nan must be finite and > 0"),
    ("target-inf", LAW + "\n[target]\nparams = inf\n", "target.params: inf must be finite and > 0"),
    ("target-string", LAW + '\n[target]\nparams = "big"\n', "target.params"),
    ("target-unknown-key", LAW + "\n[target]\nwidth = 1024\n", "target.width: unknown key"),
    (
        "target-not-law",
        LAW.replace('kind = "law"\nbudget_runs = 8', 'kind = "tpe"').replace(
            'name = "law"', 'name = "law"\ntrials_per_cell = 2'
        )
        + "\n[target]\nparams = 1e9\n",
        "target: only used with sampler.kind = 'law'",
    ),
    (
        "budget-not-law",
        LAW.replace('kind = "law"', 'kind = "tpe"').replace(
            'name = "law"', 'name = "law"\ntrials_per_cell = 2'
        ),
        "sampler.budget_runs: only used with kind = 'law'",
    ),
    (
        "batch-searched",
        LAW.replace("batch_size = 8", "batch_size = { values = [8, 16] }"),
        "search.batch_size: the law sampler plans the LR only",
    ),
    (
        "warmup-searched",
        LAW.replace("batch_size = 8", "batch_size = 8\nwarmup = { low = 0.0, high = 0.1 }"),
        "search.warmup: the law sampler plans the LR only",
    ),
    (
        "lr-fixed",
        LAW.replace("lr = { low = 2e-3, high = 4.0, log = true }", "lr = 1e-2"),
        "search.lr: the law sampler plans the LR",
    ),
    (
        "lr-too-narrow",
        LAW.replace("high = 4.0", "high = 3e-3"),
        "search.lr: the law sampler needs at least 3",
    ),
    (
        "trials-per-cell",
        LAW.replace('name = "law"', 'name = "law"\ntrials_per_cell = 4'),
        "sweep.trials_per_cell: not used with sampler.kind = 'law'",
    ),
    (
        "asha",
        LAW + '\n[pruner]\nkind = "asha"\n',
        "pruner.kind: asha is not used with sampler.kind = 'law'",
    ),
]


def test_law_study_is_valid_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "law.toml"
    path.write_text(LAW)
    spec = load_study(path)
    assert spec.sampler.kind == "law" and spec.sampler.budget_runs == 8
    assert spec.sampler.stop_lr_interval_ratio == 1.5 and spec.target is None
    assert spec.trials_per_cell == 8  # the cap: the whole budget in one cell
    lrs = law_lrs(spec.search)
    assert lrs[0] == pytest.approx(2e-3) and lrs[-1] <= 4.0 and len(lrs) == 22


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_law_study_gives_one_line(tmp_path: Path, text: str, expected: str) -> None:
    problems = _problems(tmp_path, text)
    assert len(problems) == 1, problems
    assert expected in problems[0] and "\n" not in problems[0]


def test_cli_validate_exits_2_with_one_line(tmp_path: Path) -> None:
    code = "import sys, sweeper.cli as c; raise SystemExit(c.main(sys.argv[1:]))"
    for case, text, expected in [BAD[0], BAD[4], BAD[6], BAD[12]]:
        path = tmp_path / f"{case}.toml"
        path.write_text(text)
        r = subprocess.run(
            [sys.executable, "-c", code, "validate", str(path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2, (case, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (case, lines)


def test_round_trip_and_hash() -> None:
    text = LAW + "stop_lr_interval_ratio = 1.3\n\n[target]\nparams = 1e8\ntokens = 2e9\n"
    spec = parse_study_toml(text)
    assert spec.target == TargetSpec(params=1e8, tokens=2e9)
    again = parse_study_toml(study_toml(spec))
    assert again == spec and spec_hash(again) == spec_hash(spec)
    assert "budget_runs = 8" in study_toml(spec) and "trials_per_cell" not in study_toml(spec)
    # raising the budget or changing the stopping rule grows the sweep: same hash
    more = replace(spec, sampler=replace(spec.sampler, budget_runs=20, stop_lr_interval_ratio=1.2))
    assert spec_hash(more) == spec_hash(spec)
    # the target and the seed change the plan: another hash
    assert spec_hash(replace(spec, target=TargetSpec(params=1e9))) != spec_hash(spec)
    assert spec_hash(replace(spec, sampler=replace(spec.sampler, seed=1))) != spec_hash(spec)


def test_other_samplers_keep_their_text() -> None:
    tpe = parse_study_toml(
        LAW.replace('kind = "law"\nbudget_runs = 8', 'kind = "tpe"').replace(
            'name = "law"', 'name = "law"\ntrials_per_cell = 2'
        )
    )
    text = study_toml(tpe)
    assert "budget_runs" not in text and "stop_lr_interval_ratio" not in text
    assert "[target]" not in text and parse_study_toml(text) == tpe


def test_planned_only_sampler_serves_queued_points_only() -> None:
    spec = parse_study_toml(LAW)
    sampler = make_sampler(spec, 0)
    assert isinstance(sampler, PlannedOnlySampler)
    study = optuna.create_study(sampler=sampler)
    dist = {"lr": optuna.distributions.FloatDistribution(2e-3, 4.0, log=True)}
    study.enqueue_trial({"lr": 0.016})
    assert study.ask(dist).params == {"lr": 0.016}
    with pytest.raises(RuntimeError, match="only planned"):
        study.ask(dist)


def test_the_law_samplers_start_is_the_planners(tmp_path: Path) -> None:
    from sweeper.fitting.allocation import START_LRS
    from sweeper.study.spec import LAW_MIN_LRS, law_start_runs

    assert LAW_MIN_LRS == START_LRS
    path = tmp_path / "law.toml"
    path.write_text(LAW.replace("budget_runs = 8", "budget_runs = 6"))  # the least allowed
    assert law_start_runs(load_study(path)) == 6


def test_validate_shows_the_target_and_the_budget_in_whole_points(
    tmp_path: Path, cli: CliRunner
) -> None:
    """``[target]`` was never shown; a budget of 13 runs with 2 seeds a point said "13 runs at
    most" where the launch stops at 12; --json gave a law study a trials_per_cell."""
    from sweeper.study.ladder import cells

    path = tmp_path / "law.toml"
    path.write_text(
        LAW.replace('name = "law"', 'name = "law"\nseeds_per_point = 2').replace(
            "budget_runs = 8", "budget_runs = 13"
        )
    )
    largest = max(c.n_params for c in cells(load_study(path)))
    code, out, _ = cli("validate", path)
    assert code == 0 and "at most 12 training runs" in out
    assert "budget_runs 13, spent in whole points of 2 runs: 6 points" in out
    assert f"target: N {10 * largest:.3g}, D 1.64e+04 tokens (the default" in out
    assert TWO_CELLS in out and not _other_warnings(out)
    code, out, _ = cli("validate", path, "--json")
    doc = json.loads(out)
    assert doc["trials_per_cell"] is None and doc["budget_runs"] == 13
    assert not _other_warnings(doc["warnings"])
    assert doc["target"] == {"n_params": 10.0 * largest, "tokens": 16384.0}
    # a target below the largest cell: the plan would extrapolate backwards
    path.write_text(path.read_text() + "\n[target]\nparams = 1e3\n")
    code, out, _ = cli("validate", path)
    assert code == 0 and "target: N 1e+03, D 1.64e+04 tokens (N from [target]" in out
    assert f"warning: target.params 1e+03 is below the largest cell's N {largest:,}" in out
    code, out, _ = cli("validate", path, "--json")
    assert _other_warnings(json.loads(out)["warnings"])[0].startswith("target.params 1e+03 is")


def test_validate_warns_of_a_budget_the_plan_can_never_spend_and_of_a_target_below_the_ladder(
    tmp_path: Path, cli: CliRunner
) -> None:
    """budget_runs = 10000000 validated silently for a study whose plan stops by 54 runs (at most
    max(3, seeds_per_point) runs share a (cell, LR)); a [target] of 100 tokens against cells of
    16,384 got no warning, while params below the largest cell did."""
    from sweeper.study.spec import law_cap_runs, law_lr_runs

    path = tmp_path / "law.toml"
    path.write_text(LAW.replace("budget_runs = 8", "budget_runs = 10000000"))
    spec = load_study(path)
    n_lrs = len(law_lrs(spec.search))
    assert law_lr_runs(spec) == 3 and law_cap_runs(spec) == 2 * n_lrs * 3
    code, out, _ = cli("validate", path)
    cap = 2 * n_lrs * 3
    assert code == 0
    assert (
        f"  warning: sampler.budget_runs 10,000,000 is more than the {cap} runs the plan can ever "
        f"use (2 cell(s) x {n_lrs} LRs x at most 3 runs at an LR): it stops with no candidate "
        f"left by {cap} runs at the latest"
    ) in out
    path.write_text(LAW.replace("budget_runs = 8", f"budget_runs = {cap}"))
    code, out, _ = cli("validate", path)
    assert code == 0 and not _other_warnings(out)  # the cap itself is fine
    # 2 seeds a point: a (cell, LR) takes 2 points, 4 runs
    two = LAW.replace('name = "law"', 'name = "law"\nseeds_per_point = 2')
    path.write_text(two.replace("budget_runs = 8", "budget_runs = 1000"))
    assert law_lr_runs(load_study(path)) == 4
    code, out, _ = cli("validate", path, "--json")
    assert f"more than the {2 * n_lrs * 4} runs" in _other_warnings(json.loads(out)["warnings"])[0]
    # the target's tokens below the ladder's, as its params
    path.write_text(LAW + "\n[target]\ntokens = 100\n")
    code, out, _ = cli("validate", path)
    assert (
        code == 0
        and (
            "  warning: target.tokens 100 is below the largest cell's D 16,384 tokens (a target is "
            "usually trained on more tokens than every cell; the plan's law is on N alone, so the "
            "target's tokens do not move the LR it pins down)"
        )
        in out
    )
    path.write_text(LAW + "\n[target]\ntokens = 1e9\n")
    code, out, _ = cli("validate", path)
    assert code == 0 and not _other_warnings(out)

"""What the API's results show: ``str`` (and a notebook's display) is what the matching verb
prints, drawn by the verb's own code; ``repr`` is one line. An API audit found an estimate, a
check's result, a comparison and a launch's summary printing as raw dataclass dumps (over 1 KB
each), and an export's plain ``repr`` dumping its whole file."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import sweeper
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)

STUDY = """\
[sweep]
name = "shown"
seeds_per_point = 2

[model]
context = 32
head_dim = 16

[ladder]
widths = [16, 32, 64]
depths = [1]
tokens = [16384]

[search]
lr = { values = [1e-3, 3e-3, 1e-2] }
batch_size = 8

[sampler]
kind = "grid"
"""


class _Pretty:
    """What IPython's pretty printer is handed by ``_repr_pretty_`` (IPython is not a
    dependency): the text, in order."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def text(self, s: str) -> None:
        self.parts.append(s)


def _shown(obj: Any) -> str:
    p = _Pretty()
    obj._repr_pretty_(p, False)
    return "".join(p.parts)


def _one_line(text: str, *needles: str) -> None:
    assert "\n" not in text and len(text) < 250, text
    for n in needles:
        assert n in text, (n, text)


@pytest.fixture(autouse=True)
def _off_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's console at its off-terminal width, without colour: what ``str`` renders at."""
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


# ---- estimate --------------------------------------------------------------------------------
def _estimate(monkeypatch: pytest.MonkeyPatch) -> Any:
    """An estimate of :data:`STUDY` from a probe of known figures (nothing trains)."""
    import os

    from sweeper.run.estimate import Probe, estimate_study
    from sweeper.study.ladder import cells
    from sweeper.study.spec import parse_study_toml

    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))

    def probe(spec: Any, cell: Any, steps: int, copies: int) -> Probe:
        cheapest = min(cells(spec), key=lambda c: c.flops_per_token)
        s_tok = 1e-4 if cell.name == cheapest.name else 1e-3
        return Probe(cell.name, cell.flops_per_token, s_tok, 2.0, steps)

    return estimate_study(parse_study_toml(STUDY), cores=2, probe=probe)


def test_an_estimate_shows_what_validate_estimate_prints(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sweeper.api as api

    est = _estimate(monkeypatch)
    text = str(est)
    assert text.startswith("estimate (probe: 12 steps each; w16-d1-t16.4k 10,000 tok/s")
    assert "  total: 18 runs, 175 core-s" in text and "CellCost(" not in text
    assert text.splitlines()[-1].startswith("  note: the figures are for the load at the probe")
    assert _shown(est) == text
    _one_line(repr(est), "Estimate shown", "18 runs in 3 cells", "175 core-s", "2 trial(s)")
    # the command prints the same text, from the same code, under the cells
    monkeypatch.setattr(api, "estimate", lambda *a, **k: est)
    path = tmp_path / "shown.toml"
    path.write_text(STUDY)
    code, out, _ = cli("validate", path, "--estimate")
    assert code == 0 and out.endswith("\n" + text + "\n")


# ---- check -----------------------------------------------------------------------------------
def test_a_check_shows_the_table_and_verdict_sweeper_check_prints(cli: CliRunner) -> None:
    res = sweeper.check("llama2-7b", "deepseek")[0]
    text = str(res)
    lines = text.splitlines()
    assert lines[0].strip() == "Recipe llama2-7b against deepseek:lr, deepseek:batch_tokens"
    assert "│ llama2-7b │" in text and "CheckItem(" not in text and "\x1b[" not in text
    assert "llama2-7b: its LR is 0.49 octave(s) below the law's" in text
    assert "warning (llama2-7b): very far extrapolation" in text
    assert _shown(res) == text
    _one_line(repr(res), "CheckResult llama2-7b", "LR -0.49 oct", "batch -1.24 oct",
              "1 warning(s)")  # fmt: skip
    # the command's output, but for its title (it names the laws as given on the line)
    code, out, _ = cli("check", "--recipe", "llama2-7b", "--law", "deepseek")
    assert code == 0
    assert [ln.rstrip() for ln in out.splitlines()[1:]] == lines[1:]
    assert "Recipes against the published deepseek laws" in out.splitlines()[0]


# ---- compare ---------------------------------------------------------------------------------
def test_a_comparison_shows_the_tables_sweeper_compare_prints(
    tmp_path: Path, cli: CliRunner
) -> None:
    from sweeper.fitting import synthetic_sweep

    csv = tmp_path / "runs.csv"
    synthetic_sweep(seed=3).to_csv(csv, index=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sweeper.import_runs(csv, sweep="s", storage=url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweeper.fit("s", target="lr", method="parabola", n_boot=40, storage=url)
    c = sweeper.compare("s", at={"n_params": 1e9, "tokens": 2e10}, storage=url,
                        published=("steplaw",))  # fmt: skip
    text = str(c)
    assert text.splitlines()[0].strip() == "laws compared with s"
    assert "fitted exponents vs published" in text and "lr at the cells and the target" in text
    assert "exponents=" not in text and "\x1b[" not in text
    assert c.notes and any(line.startswith("note: ") for line in text.splitlines())
    assert _shown(c) == text
    _one_line(repr(c), "Comparison s:", "1 fitted and 2 published law(s)",
              "2 exponent(s) compared", "at 8 cell(s) and the target")  # fmt: skip
    code, out, _ = cli("compare", "s", "--storage", url, "--params", "1e9", "--tokens", "2e10",
                       "--published", "steplaw")  # fmt: skip
    assert code == 0 and [ln.rstrip() for ln in out.splitlines()] == text.splitlines()


# ---- launch ----------------------------------------------------------------------------------
def _summary(**kw: Any) -> Any:
    from sweeper.run.launch import LaunchSummary
    from sweeper.study.sweep import CellCounts

    cells = (
        CellCounts("w16-d1-t16.4k", 3, 0, 1, 0, 0, 4, 3.1234, 1e-2, 8, runs=6, best_runs=2),
        CellCounts("w32-d1-t16.4k", 4, 0, 0, 0, 0, 4, 2.9, 3e-3, 8, runs=8, best_runs=2),
    )
    return LaunchSummary("shown", "postgresql+psycopg://bob:pw@h/db", cells, 25.3, 14, 7, 0, 2,
                         **kw)  # fmt: skip


def test_a_launch_summary_shows_what_sweeper_launch_closes_with(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sweeper.api as api

    s = _summary(own_code=True)
    text = str(s)
    assert text.splitlines()[:3] == [
        "sweep shown: 14 run(s), 7 trial(s) finished in 25.3 s",
        "  w16-d1-t16.4k        3/4, 1 failed; best loss 3.1234 at lr 0.01, batch 8 seqs "
        "(mean of 2 seeds)",
        "  w32-d1-t16.4k        4/4; best loss 2.9000 at lr 0.003, batch 8 seqs (mean of 2 seeds)",
    ]
    # why it ended short, with the option as Python spells it
    assert text.splitlines()[3].startswith("1 cell(s) short of their target after failed runs")
    assert "code_changed=True" in text and "--code-changed" not in text
    assert "CellCounts(" not in text and _shown(s) == text
    _one_line(repr(s), "LaunchSummary shown:", "14 run(s), 7 trial(s) in 25.3 s",
              "2 cell(s), short", "url='postgresql+psycopg://bob:***@h/db'")  # fmt: skip
    assert "pw@" not in repr(s) + text
    # the command prints the summary lines from the same code; its last line goes to stderr
    monkeypatch.setattr(api, "launch", lambda *a, **k: s)
    code, out, err = cli("launch", tmp_path / "any.toml", "--no-progress")
    assert code == 1 and out == "\n".join(text.splitlines()[:3]) + "\n"
    assert "short of their target after failed runs" in err and "--code-changed" in err
    # done, and interrupted
    done = _summary(plan_stop="the target LR's interval ratio is below 2", budget_runs=20)
    assert "law sampler: 14 of 20 runs used; its plan stopped" in str(done)
    _one_line(repr(done), "done")
    stopped = _summary(interrupted="SIGINT")
    assert str(stopped).splitlines()[-1].startswith("interrupted (SIGINT): 1 cell(s) short")
    _one_line(repr(stopped), "interrupted (SIGINT)")


# ---- export ----------------------------------------------------------------------------------
def test_an_exports_repr_is_one_line_and_its_str_the_file() -> None:
    recipe = sweeper.recommend("deepseek", at=sweeper.Target(n_params=1e9, tokens=2e10))
    e = sweeper.export(recipe, "litgpt")
    lines = len(e.text.splitlines())
    _one_line(repr(e), f"Exported litgpt {e.framework_version}: {lines} line(s)",
              f"{len(e.cannot_carry)} setting(s) it cannot carry")  # fmt: skip
    assert lines > 5 and str(e) == e.text
    assert _shown(e).startswith(e.text.rstrip("\n"))

"""The progress lines of a launch in a log (not a terminal), as an audit read them: one per
finished run (the README's word), none before anything ran, a trial closed when its driver
stopped not called a failure, and the best point by its mean over its seeds (as `status`)."""

from __future__ import annotations

from typing import Any

from sweeper.run.progress import Progress
from sweeper.study.spec import StudySpec, parse_study_toml
from sweeper.study.sweep import open_sweep
from tests.sweeper.run.fake_tune import drive, open_searcher

GRID = """\
[sweep]
name = "{name}"
seeds_per_point = {seeds}

[model]
context = 32

[ladder]
widths = [16, 32]
depths = [1]
tokens = [16384]

[search]
lr = {{ values = [{lrs}] }}
batch_size = 8

[sampler]
kind = "{kind}"
{law}
"""


def _spec(name: str, *, seeds: int = 1, law: bool = False) -> StudySpec:
    kind, lrs = ("law", "1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2") if law else ("grid", "1e-3, 2e-3")
    extra = "budget_runs = 6\nseed = 0" if law else ""
    return parse_study_toml(GRID.format(name=name, seeds=seeds, kind=kind, lrs=lrs, law=extra))


def _logged(searcher: Any, spec: StudySpec) -> tuple[Progress, list[str]]:
    """A log's progress display on ``searcher``, and the lines it printed."""
    names = [c.cs.cell.name for c in searcher.cells]
    progress = Progress(spec.name, names, live=False)
    printed: list[str] = []
    progress.console.print = lambda text, **_: printed.append(text)  # type: ignore[method-assign]
    searcher.on_progress = progress.update
    progress.start(searcher)
    return progress, printed


def test_a_log_prints_one_line_per_finished_run(sqlite_url: str) -> None:
    """Two seeds a point: the log printed a line per point (its seeds' lines were identical and
    kept once), though the README says one per finished run."""
    spec = _spec("perrun", seeds=2)
    searcher = open_searcher(spec, sqlite_url)
    _, printed = _logged(searcher, spec)
    runs = drive(searcher)
    assert len(runs) == 8 and len(printed) == 8, printed
    assert printed[-1].startswith("perrun/") and "2/2 done, 4 runs;" in printed[-1]


def test_a_law_log_prints_nothing_before_a_run_finished(sqlite_url: str) -> None:
    """A law study's log began with a "0 runs done; best -" line per cell."""
    spec = _spec("lawlog", law=True)
    searcher = open_searcher(spec, sqlite_url)
    _, printed = _logged(searcher, spec)
    assert printed == []
    runs = drive(searcher)
    assert len(printed) == len(runs) == 6 and not any("0 runs done" in p for p in printed)


def test_a_trial_closed_when_its_driver_stopped_is_no_failure_in_the_log(sqlite_url: str) -> None:
    """After Ctrl-C and a relaunch the log said "1 failed" for good, though no run had failed
    (status said "closed when their driver stopped")."""
    spec = _spec("closedlog")
    for cs in open_sweep(spec, sqlite_url):
        cs.study.ask()  # left RUNNING by an interrupted driver
    searcher = open_searcher(spec, sqlite_url)  # (reconciles: closed, its point queued again)
    _, printed = _logged(searcher, spec)
    assert len(printed) == 2 and all("1 closed when their driver stopped" in p for p in printed)
    drive(searcher)
    assert not any("failed" in p for p in printed), printed


def test_the_logs_best_is_the_points_mean_over_its_runs(sqlite_url: str) -> None:
    """One lucky run at an LR run twice was the log's best, as it was status's."""
    from sweeper.study.space import distributions

    spec = _spec("meanlog")
    cs = open_sweep(spec, sqlite_url)[0]
    for lr, loss in ((2e-3, 2.80), (1e-3, 2.85), (2e-3, 3.10)):
        cs.study.enqueue_trial({"lr": lr, "batch_size": 8})
        t = cs.study.ask(distributions(spec.search))
        t.set_user_attr("runs", [{"seed": 0, "loss": loss, "diverged": False}])
        cs.study.tell(t, loss)
    searcher = open_searcher(spec, sqlite_url)
    progress, _ = _logged(searcher, spec)
    assert "best 2.8500 (lr 0.001, batch 8)" in progress._line(searcher, 0)

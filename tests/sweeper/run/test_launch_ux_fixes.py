"""What a launch shows and how it stops, as a launch-UX audit found them: the live table's
"running" column, the estimate's wall time under load and its notes, a Ctrl-C while Ray starts,
and the summary and status lines after a relaunch or a signal.

The launches here run without Ray: Ray's start and the cluster's capacity are stubbed, and Tune's
part is played by :func:`tests.sweeper.run.fake_tune.drive` (seconds, deterministic)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sweeper.run import launch
from sweeper.run.estimate import (
    CPU_SHARE,
    LAUNCH_S,
    PROCESS_S,
    TRIAL_S,
    estimate_study,
    load_factor,
)
from sweeper.run.progress import Progress, of_target
from sweeper.study import storage as st
from sweeper.study.spec import StudySpec, parse_study_toml
from sweeper.study.sweep import open_sweep
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)
from tests.sweeper.run.fake_tune import drive, open_searcher
from tests.sweeper.run.test_estimate import fake_probe, study

GRID = """\
[sweep]
name = "{name}"
seeds_per_point = {seeds}
{trials}

[model]
context = 32

[ladder]
widths = [16, 32]
depths = [1]
tokens = [16384]

[search]
lr = {lr}
batch_size = 8

[sampler]
kind = "{kind}"
"""


def grid(name: str, *, seeds: int = 1) -> StudySpec:
    return parse_study_toml(_toml(name, seeds=seeds))


def _toml(name: str, *, seeds: int = 1, kind: str = "grid", trials: int | None = None) -> str:
    lr = "{ values = [1e-3, 2e-3, 4e-3] }" if kind == "grid" else "{ low = 1e-3, high = 1e-1 }"
    per = "" if trials is None else f"trials_per_cell = {trials}"
    return GRID.format(name=name, seeds=seeds, lr=lr, kind=kind, trials=per)


# ---- a launch without Ray ----------------------------------------------------------------------
class _FakeTuner:
    """Tune's part: ``play(searcher)`` runs the searcher (default: to its end, two at once)."""

    def __init__(self, searcher: Any, play: Any) -> None:
        self.searcher, self.play = searcher, play

    def fit(self) -> None:
        self.play(self.searcher)


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A launch without Ray: its start does nothing (``box["start"]`` may be replaced), the
    cluster fits 2 trials, and Tune is ``box["play"]`` (None: a launch that must not reach
    Tune). Yields the box, with ``tuned`` counting the Tune runs."""
    box: dict[str, Any] = {"start": lambda: None, "play": drive, "tuned": 0}

    def start(*a: object, **k: object) -> bool:
        box["start"]()
        return False  # (not started by the launch: nothing to shut down)

    def tuner(spec: StudySpec, searcher: Any, *a: object, **k: object) -> _FakeTuner:
        box["tuned"] += 1
        if box["play"] is None:
            pytest.fail("the launch ran Tune")
        return _FakeTuner(searcher, box["play"])

    monkeypatch.setattr(launch, "_start_ray", start)
    monkeypatch.setattr(launch, "_capacity", lambda spec: 2)
    monkeypatch.setattr(launch, "_tuner", tuner)
    yield box


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored, as in a process started in the background by a script (the audit's launch
    was): the signal the launch's own handler must catch. Without that handler, a test of it
    reads "not interrupted" instead of stopping the test session."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _kill_self(sig: signal.Signals) -> None:
    """Send ``sig`` to this process, and give its handler (run in the main thread between two
    bytecodes) the time to run."""
    os.kill(os.getpid(), sig)
    for _ in range(1000):
        pass


# ---- 1. the live table's "running" column ------------------------------------------------------
def test_the_dispatch_hook_sees_the_run_it_started(sqlite_url: str) -> None:
    """The table's "running" column is the searcher's count, but it was redrawn only when a run
    finished (after ``running -= 1``): it said 0 while the first runs trained."""
    spec = grid("disp")
    searcher = open_searcher(spec, sqlite_url)
    seen: list[tuple[int, int]] = []
    searcher.on_dispatch = lambda s, i: seen.append((i, s.cells[i].running))
    assert searcher.suggest("r0") is not None
    assert seen == [(0, 1)]
    assert searcher.suggest("r1") is not None
    assert len(seen) == 2 and all(running > 0 for _, running in seen)


class _Live:
    """rich's Live as the display drives it: the renderable it was given last."""

    def __init__(self) -> None:
        self.shown: Any = None

    def update(self, renderable: Any) -> None:
        self.shown = renderable

    def stop(self) -> None:
        pass


def _rendered(table: Any) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    return out.getvalue()


def test_the_live_table_shows_a_started_run_as_running(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started redraws the table with it running, without reading the storage (nothing
    stored changed), and a log (no terminal) prints no line for it: one line per finished run."""
    spec = grid("livetab")
    searcher = open_searcher(spec, sqlite_url)
    names = [c.cs.cell.name for c in searcher.cells]
    display = Progress(spec.name, names, live=False)
    printed: list[str] = []
    display.console.print = lambda text, **_: printed.append(text)  # type: ignore[method-assign]
    display.start(searcher)
    searcher.on_dispatch = display.redraw
    searcher.suggest("r0")  # a log: nothing to print
    assert printed == []
    display._live = _Live()
    import sweeper.run.progress as progress_mod

    monkeypatch.setattr(progress_mod, "cell_counts", lambda *a, **k: pytest.fail("read"))
    searcher.suggest("r1")
    row = next(ln for ln in _rendered(display._live.shown).splitlines() if names[1] in ln)
    done, running, failed = [x.strip() for x in row.split("│")][2:5]
    assert (done, running, failed) == ("0/3", "1", "0"), row


def test_a_launch_redraws_its_table_as_runs_start(
    sqlite_url: str, no_ray: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch gives the searcher its display's redraw."""
    running: list[int] = []

    class Recorded(Progress):
        def redraw(self, searcher: Any, i: int) -> None:
            running.append(searcher.cells[i].running)
            super().redraw(searcher, i)

    monkeypatch.setattr(launch, "Progress", Recorded)
    summary = launch.launch_study(grid("wired"), url=sqlite_url, progress=True)
    assert summary.runs_this_launch == 6 and len(running) == 6 and all(running)


# ---- 2. the estimate's wall time and notes -----------------------------------------------------
def test_load_factor_scales_the_fixed_costs_as_one_process_among_the_load() -> None:
    """Idle, or no more load than spare cores: 1; else (load + 1) / cores; unknown: 1."""
    assert load_factor(0.0, 2) == 1.0 and load_factor(1.0, 2) == 1.0
    assert load_factor(3.0, 2) == pytest.approx(2.0)
    assert load_factor(4.28, 2) == pytest.approx(2.64)
    assert load_factor(7.0, 16) == 1.0
    assert load_factor(None, 2) == 1.0 and load_factor(1.5, None) == 1.0
    assert load_factor(float("nan"), 2) == 1.0 and load_factor(-1.0, 1) == 1.0


def test_the_estimate_scales_the_launchs_fixed_costs_to_the_load_at_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LAUNCH_S and TRIAL_S were measured on an idle machine and added as they were, while the note
    said "the figures are for the load at the probe": a small sweep took 2-3x its estimate under
    load. The process's own start and exit (3-4 s after "finished in") were counted nowhere.
    Their CPU share (CPU_SHARE) is scaled, not the whole: scaled whole, small studies were
    priced at 2-3.4x what they took."""
    idle = LAUNCH_S + TRIAL_S * 18 / 2 + PROCESS_S
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # (the load's cores: not this machine's)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    calm = estimate_study(study(), cores=2, probe=fake_probe(1e-4, 1e-3))
    assert calm.load_factor == 1.0 and calm.overhead_s == pytest.approx(idle)
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 4.0, 3.0))
    busy = estimate_study(study(), cores=2, probe=fake_probe(1e-4, 1e-3))
    assert busy.load_factor == pytest.approx(3.0)
    fixed = 1 + CPU_SHARE * (3.0 - 1)  # (x1.9: the CPU share slowed 3x, the rest as idle)
    assert busy.fixed_factor == pytest.approx(fixed) and fixed == pytest.approx(1.9)
    assert busy.overhead_s == pytest.approx(fixed * idle)
    # the training is the probe's (already under the load): only the fixed costs are scaled
    assert busy.core_s == calm.core_s
    assert busy.wall_s[0] - calm.wall_s[0] == pytest.approx((fixed - 1) * idle)
    assert busy.to_dict()["load_factor"] == pytest.approx(3.0)
    assert busy.to_dict()["fixed_factor"] == pytest.approx(fixed)


def test_the_caveat_says_what_is_scaled_to_the_load_and_what_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 4.0, 3.0))
    est = estimate_study(study(), cores=2, probe=fake_probe(1e-4, 1e-3))
    assert "load at the probe (load average 5.00 on 2 cores)" in est.caveat
    assert "the training was probed under it" in est.caveat
    # (load factor 3, of which the CPU share: 1 + 0.45 x 2)
    assert "fixed costs, measured idle, are scaled to it (x1.9)" in est.caveat

    def no_load() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", no_load)
    est = estimate_study(study(), cores=2, probe=fake_probe(1e-4, 1e-3))
    assert est.load_factor == 1.0
    assert "fixed costs are an idle machine's" in est.caveat and "scaled to it" not in est.caveat


def test_asha_bounds_the_run_count_not_the_wall_time() -> None:
    """"ASHA stops runs early: the figures are an upper bound", yet a launch took 3.3x the wall
    figure: a stopped run pays the launch's fixed costs in full."""
    spec = parse_study_toml(_toml("ashaest", kind="tpe", trials=4) + '[pruner]\nkind = "asha"\n')
    est = estimate_study(spec, cores=2, probe=fake_probe(1e-4, 1e-3))
    (note,) = [n for n in est.notes if n.startswith("ASHA")]
    assert "the run count and the training's core-s are upper bounds" in note
    assert "the wall time is no bound" in note and "the figures are an upper bound" not in note
    searched = study(batch="{ values = [8, 16] }")
    (note,) = [n for n in estimate_study(searched, cores=2, probe=fake_probe(1e-4, 1e-3)).notes]
    assert note.endswith("so the training's core-s are an upper bound")


def test_validate_estimate_names_every_fixed_cost(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.sweeper.run.test_estimate import fake_estimate

    fake_estimate(monkeypatch)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 1.0, 0.5))
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    path = tmp_path / "est.toml"
    path.write_text(_toml("estcli"))
    code, out, _ = cli("validate", path, "--estimate")
    assert code == 0, out
    assert "of it the command's start and exit, Ray's start and Tune's per-trial cost" in out
    # (load 3 on 1 core: a load factor of 4, of which the CPU share, 1 + 0.45 x 3 = 2.35)
    assert "load average 3.00 on 1 core)" in out and "are scaled to it (x2.4)" in out


# ---- 3. a signal while Ray starts --------------------------------------------------------------
def test_a_ctrl_c_while_ray_starts_stops_a_new_launch_before_anything(
    sqlite_url: str, no_ray: dict[str, Any], sigint_ignored: None
) -> None:
    """The handler was installed only around Tune's run: a SIGINT during Ray's start was lost
    (Ray blocks it in its processes; a background launch ignores it) and every run trained. Now
    the launch stops once Ray has started: no trial, and a new sweep is not even registered."""
    no_ray["start"] = lambda: _kill_self(signal.SIGINT)
    no_ray["play"] = None
    summary = launch.launch_study(grid("ctrlc"), url=sqlite_url, progress=False)
    assert summary.interrupted == "SIGINT"
    assert summary.runs_this_launch == 0 and summary.cells == () and no_ray["tuned"] == 0
    assert st.get_sweep("ctrlc", sqlite_url) is None
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # (given back as it was)


def test_a_ctrl_c_while_ray_starts_stops_a_relaunch_before_any_trial(
    sqlite_url: str, no_ray: dict[str, Any], sigint_ignored: None
) -> None:
    """A relaunch joins Ray after opening the sweep: it stops there, its cells as they were."""
    spec = grid("ctrlc2")
    open_sweep(spec, sqlite_url)
    no_ray["start"] = lambda: _kill_self(signal.SIGINT)
    no_ray["play"] = None
    summary = launch.launch_study(spec, url=sqlite_url, progress=False)
    assert summary.interrupted == "SIGINT" and summary.runs_this_launch == 0
    assert [(c.finished, c.running) for c in summary.cells] == [(0, 0), (0, 0)]
    assert all(not cs.study.trials for cs in open_sweep(spec, sqlite_url))


def test_a_sigterm_while_ray_starts_is_not_taken_by_rays_handler(
    sqlite_url: str, no_ray: dict[str, Any]
) -> None:
    """``ray.init`` installs a SIGTERM handler of its own (``sys.exit``) as it starts: kept out,
    so that SIGTERM then stops the launch as Ctrl-C does."""
    import ray._private.utils as ru

    def rays(signum: int, frame: Any) -> None:  # as ray.init installs it
        sys.exit(signum)

    def start() -> None:
        ru.set_sigterm_handler(rays)
        _kill_self(signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    no_ray["start"] = start
    no_ray["play"] = None
    try:
        summary = launch.launch_study(grid("term"), url=sqlite_url, progress=False)
        assert summary.interrupted == "SIGTERM" and summary.runs_this_launch == 0
        # (Ray's stands after the scope, as a plain ray.init leaves it: test below)
        assert signal.getsignal(signal.SIGTERM) is rays
    finally:
        signal.signal(signal.SIGTERM, before)


def test_launch_says_it_was_interrupted_while_ray_started(
    tmp_path: Path,
    cli: CliRunner,
    no_ray: dict[str, Any],
    sigint_ignored: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "ctrlc.toml"
    path.write_text(_toml("ctrlc3"))
    no_ray["start"] = lambda: _kill_self(signal.SIGINT)
    no_ray["play"] = None
    url = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = cli("launch", path, "--storage", url, "--no-progress")
    assert code == 130
    assert "sweep ctrlc3: 0 run(s), 0 trial(s) finished" in out
    assert "sweeper: interrupted (SIGINT) while Ray started: nothing ran" in err
    said = "SIGINT: stopping the launch once Ray has started (nothing is trained)"
    assert any(said in r.getMessage() for r in caplog.records)


# ---- 4. the summary and status lines -----------------------------------------------------------
def test_a_cell_past_its_target_says_its_target_not_a_fraction() -> None:
    """After trials_per_cell was lowered from 7 to 3, `status` printed "7/3"."""
    from sweeper.cli.study import _cell_line

    assert of_target(2, 3) == "2/3" and of_target(3, 3) == "3/3"
    assert of_target(7, 3) == "7 (target 3)"
    line = _cell_line("w16", 7, 3, 0, 0, 3.1, 1e-2, 8)
    assert "7 (target 3); best loss 3.1000" in line and "7/3" not in line


def test_status_after_a_relaunch_with_fewer_trials_per_cell(
    tmp_path: Path, cli: CliRunner, no_ray: dict[str, Any]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    for n in (4, 2):
        path = tmp_path / f"t{n}.toml"
        path.write_text(_toml("fewer", kind="random", trials=n))
        code, out, err = cli("launch", path, "--storage", url, "--no-progress")
        assert code == 0, err
    assert "4 (target 2); best loss" in out
    code, out, _ = cli("status", "fewer", "--storage", url)
    assert code == 0 and "4 (target 2); best loss" in out and "4/2" not in out


def _stopped_by_sigterm(searcher: Any) -> None:
    """Tune's part in a launch a SIGTERM stops: two runs start, one finishes, the signal comes,
    and the other is stopped (not told: its trial stays RUNNING for the next launch)."""
    searcher.suggest("a")
    searcher.suggest("b")
    done = {"final": True, "loss": 3.0, "val_loss": 3.0, "diverged": False, "tokens": 16384,
            "wall_s": 1.0, "tokens_per_s": 1e4}  # fmt: skip
    searcher.on_trial_complete("a", result=done)
    searcher.interrupted = "SIGTERM"
    searcher.on_trial_complete("b", result={"loss": 3.5})


def test_the_interrupted_summary_counts_the_trials_it_left_running(
    tmp_path: Path, cli: CliRunner, no_ray: dict[str, Any]
) -> None:
    """After SIGTERM the summary said "0/6; no complete trial" for a cell whose trial `status`
    then called "1 left RUNNING"."""
    path = tmp_path / "term.toml"
    path.write_text(_toml("termsum"))
    no_ray["play"] = _stopped_by_sigterm
    url = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = cli("launch", path, "--storage", url, "--no-progress")
    assert code == 143, err
    lines = [ln for ln in out.splitlines() if ln.startswith("  w")]
    assert sum("1 left RUNNING (the next launch runs them again)" in ln for ln in lines) == 1
    assert "relaunch to resume (its 1 trial(s) left RUNNING run again)" in err
    code, out, _ = cli("status", "termsum", "--storage", url)
    assert code == 0 and sum("1 left RUNNING" in ln for ln in out.splitlines()) == 1


def test_an_interrupted_summary_with_nothing_left_running_says_no_more() -> None:
    from sweeper.cli.study import _interrupted
    from sweeper.run.launch import LaunchSummary
    from sweeper.study.sweep import CellCounts

    cell = CellCounts("w16", 0, 0, 0, 0, 0, 3, None, None, None)
    s = LaunchSummary("x", "", (cell,), 1.0, 0, 0, 0, 2, interrupted="SIGINT")
    text = _interrupted(s)
    assert text == ("interrupted (SIGINT): 1 cell(s) short of their target: w16; relaunch to "
                    "resume")  # fmt: skip


def test_rays_sigterm_handler_stands_once_its_start_is_over() -> None:
    """The handler ray.init sets (a clean sys.exit) is kept out while the launch's stands, then
    installed: the default one had killed the driver with no cleanup between Ray's start and
    Tune's run (a review: the lease left, an empty sweep, no ray.shutdown)."""
    import signal

    import ray._private.utils as ru

    from sweeper.run.launch import _STOPPING_AT_START, _interruptible

    class Flag:
        interrupted = ""

    def rays(signum: int, frame: object) -> None:  # what ray.init would install
        raise SystemExit(0)

    before = signal.getsignal(signal.SIGTERM)
    try:
        with _interruptible(Flag(), _STOPPING_AT_START):
            ru.set_sigterm_handler(rays)  # (as ray.init calls it)
            assert signal.getsignal(signal.SIGTERM) is not rays
        assert signal.getsignal(signal.SIGTERM) is rays
    finally:
        signal.signal(signal.SIGTERM, before)

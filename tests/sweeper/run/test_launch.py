"""End to end through real Ray Tune and Optuna: launch, resume, SIGKILL, PostgreSQL, ASHA, crashes.

Ray starts in ~4-6 s per launch here, so the tests share one launched sweep where they can; the
searcher and the trainable are also driven directly, without a Ray runtime, where that suffices.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState

from sweeper.fitting.methods import DEFAULT_METHOD
from sweeper.study.spec import StudySpec, load_study, parse_study_toml
from sweeper.transfer.run import transfer_sweep_name
from tests.sweeper.run.fake_tune import drive, grid_toml, open_searcher

REPO = Path(__file__).resolve().parents[3]

TINY = """\
[sweep]
name = "{name}"
trials_per_cell = {trials}
seeds_per_point = {seeds}

[model]
context = 32

[ladder]
widths = [16, 32]
depths = [1]
tokens = [{tokens}]

[search]
lr = {{ low = 2e-3, high = 4.0, log = true }}
batch_size = 8

[sampler]
kind = "tpe"
seed = 0
n_startup_trials = 2

[resources]
max_failures = {max_failures}
"""


def tiny(
    name: str,
    *,
    trials: int = 3,
    seeds: int = 1,
    tokens: int = 16384,
    max_failures: int = 1,
    extra: str = "",
) -> StudySpec:
    return parse_study_toml(
        TINY.format(name=name, trials=trials, seeds=seeds, tokens=tokens, max_failures=max_failures)
        + extra
    )


def _studies(url: str, sweep: str) -> dict[str, optuna.Study]:
    names = [s for s in optuna.get_all_study_names(url) if s.startswith(f"{sweep}/")]
    return {n.split("/", 1)[1]: optuna.load_study(study_name=n, storage=url) for n in names}


def _states(study: optuna.Study) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


_CLI = (
    "import sys, sweeper.cli as c; "
    "rc = c.main(sys.argv[1:]); "
    "trains = sys.argv[1] in ('launch', 'validate-transfer'); "
    "heavy = [m for m in ('torch', 'ray') if m in sys.modules and not trains]; "
    "assert not heavy, heavy; raise SystemExit(rc)"
)


def _cli(args: list[str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    """The ``sweeper`` CLI in a fresh process; verbs that do not train must not import torch/ray."""
    return subprocess.run(
        [sys.executable, "-c", _CLI, *args], cwd=cwd, capture_output=True, text=True, **kw
    )


# ---- one shared launch -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, StudySpec, Any, Path]:
    from sweeper.run.launch import launch_study

    tmp = tmp_path_factory.mktemp("launched")
    url = f"sqlite:///{tmp / 'sweeper.db'}"
    spec = tiny("shared", trials=3, seeds=2)
    from sweeper.study.sweep import open_sweep

    # a point far above the cliff first: it must diverge and still be COMPLETE with its value
    open_sweep(spec, url)[0].study.enqueue_trial({"lr": 4.0, "batch_size": 8})
    summary = launch_study(spec, url=url, progress=False)
    return url, spec, summary, tmp


def test_launch_completes_every_cell_with_per_seed_runs(launched: Any) -> None:
    import ray

    url, _, summary, _ = launched
    assert not ray.is_initialized()  # the launch shut down the Ray it started
    assert (
        summary.done and summary.runs_this_launch == 2 * 3 * 2 and summary.points_this_launch == 6
    )
    studies = _studies(url, "shared")
    assert sorted(studies) == ["w16-d1-t16.4k", "w32-d1-t16.4k"]
    for cell, study in studies.items():
        assert _states(study) == {"COMPLETE": 3}
        assert study.user_attrs["width"] in (16, 32) and study.user_attrs["target"] == 3
        for t in study.trials:
            runs = t.user_attrs["runs"]
            assert [r["seed"] for r in runs] == [0, 1]
            assert len({r["ray_trial_id"] for r in runs}) == 2
            assert t.value == pytest.approx(sum(r["loss"] for r in runs) / 2)
            full = not t.user_attrs["diverged"]  # a diverged run stops early
            assert t.user_attrs["tokens"] == 2 * 16384 or not full
            assert t.user_attrs["wall_s"] > 0
            assert t.user_attrs["tokens_per_s"] > 0 and t.user_attrs["diverged"] in (True, False)
            assert t.user_attrs["seed"] == [0, 1] and study.user_attrs["cell"] == cell
            assert 2e-3 <= t.params["lr"] <= 4.0 and t.params["batch_size"] == 8
    (blown,) = [t for t in studies["w16-d1-t16.4k"].trials if t.params["lr"] == 4.0]
    assert blown.state == TrialState.COMPLETE and blown.user_attrs["diverged"] is True
    assert all(r["diverged"] for r in blown.user_attrs["runs"]) and blown.value is not None
    assert blown.value > min(t.value for t in studies["w16-d1-t16.4k"].trials)
    from sweeper.study.sweep_runs import load_sweep_runs

    df = load_sweep_runs("shared", url)
    assert len(df) == 12 and set(df["seed"]) == {0.0, 1.0} and (df["state"] == "COMPLETE").all()
    assert df["loss"].notna().all() and (df["batch_tokens"] == 8 * 32).all()


def test_relaunch_adds_no_trial_and_starts_no_ray(launched: Any) -> None:
    from sweeper.run.launch import launch_study

    url, spec, _, _ = launched
    before = {c: len(s.trials) for c, s in _studies(url, "shared").items()}
    t0 = time.perf_counter()
    again = launch_study(spec, url=url, progress=False)
    assert time.perf_counter() - t0 < 10
    assert again.runs_this_launch == 0 and again.points_this_launch == 0 and again.done
    assert {c: len(s.trials) for c, s in _studies(url, "shared").items()} == before


def test_changed_study_under_the_same_name_is_refused(launched: Any) -> None:
    url, _, _, tmp = launched
    path = tmp / "changed.toml"
    # more seeds per point measure something else (more trials per cell would extend the sweep)
    path.write_text(TINY.format(name="shared", trials=3, seeds=3, tokens=16384, max_failures=1))
    r = _cli(["launch", str(path), "--storage", url, "--no-progress"], tmp, timeout=120)
    assert r.returncode == 2
    assert "launched from a different study file" in r.stderr and "--force-new" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert all(len(s.trials) == 3 for s in _studies(url, "shared").values())


def test_status_and_trials_verbs(launched: Any) -> None:
    url, _, _, tmp = launched
    r = _cli(["status", "--storage", url, "--json"], tmp, timeout=120)  # the only sweep
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert status["sweep"] == "shared" and len(status["cells"]) == 2
    for c in status["cells"]:
        assert (c["complete"], c["running"], c["failed"], c["pruned"], c["target"]) == (
            3,
            0,
            0,
            0,
            3,
        )
        assert c["best_loss"] > 0 and 2e-3 <= c["best_lr"] < 4.0
        assert {"cell", "width", "depth", "tokens"} <= set(c)
    r = _cli(["status", "shared", "--storage", url], tmp, timeout=120)
    assert r.returncode == 0 and "w16-d1-t16.4k" in r.stdout and "3/3" in r.stdout
    out = tmp / "trials.csv"
    r = _cli(["trials", "shared", "--storage", url, "-o", str(out)], tmp, timeout=120)
    assert r.returncode == 0, r.stderr
    import pandas as pd

    df = pd.read_csv(out)
    assert len(df) == 12 and {
        "cell",
        "n_params",
        "lr",
        "loss",
        "trial_number",
        "ray_trial_id",
    } <= set(df)
    r = _cli(
        ["trials", "shared", "--storage", url, "-o", str(tmp / "trials.parquet")], tmp, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert len(pd.read_parquet(tmp / "trials.parquet")) == 12
    r = _cli(["trials", "shared", "--storage", url, "--format", "json"], tmp, timeout=120)
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 12
    r = _cli(["trials", "nope", "--storage", url], tmp, timeout=120)
    assert r.returncode == 2 and "no sweep 'nope'" in r.stderr


# ---- the shipped smoke study -------------------------------------------------------------------
def test_smoke_study_end_to_end(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'smoke.db'}"
    t0 = time.perf_counter()
    r = _cli(
        ["launch", str(REPO / "studies" / "smoke.toml"), "--storage", url], tmp_path, timeout=300
    )
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    assert "sweep smoke: 36 run(s), 36 trial(s) finished" in r.stdout
    # not a terminal: plain progress lines, no Ray console chatter
    assert "smoke/w16-d2-t32.8k: 6/6 done" in r.stdout
    assert "Trial status" not in r.stdout and "\x1b[" not in r.stdout
    spec = load_study(REPO / "studies" / "smoke.toml")
    for study in _studies(url, "smoke").values():
        assert _states(study) == {"COMPLETE": spec.trials_per_cell}
    print(f"smoke launch: {wall:.1f} s")

    # the rest of the main job on the same sweep: fit, validate the transfer, recommend, export, report
    r = _cli(
        ["fit", "smoke", "--target", "lr", "--storage", url, "--bootstrap", "50", "--json"],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (law,) = json.loads(r.stdout)["laws"]
    assert (
        law["target"] == "lr"
        and law["n_cells"] >= 3
        and set(law["exponents"]) <= {"n_params", "tokens"}
    )

    r = _cli(
        [
            "validate-transfer",
            "smoke",
            "--holdout",
            "largest",
            "--seeds",
            "1",
            "--storage",
            url,
            "--json",
        ],
        tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["holdout_cell"] == "w32-d2-t65.5k"
    for key in ("log2_error", "regret_pct", "baseline_regret_pct", "predicted_lr", "measured_lr"):
        assert isinstance(res[key], float), key
    assert res["seeds"] == 1 and {
        "law",
        "smallest_cell",
        "largest_fitted",
        "steplaw",
        "deepseek",
        "porian",
        "measured_optimum",
    } <= set(res["losses"])
    assert res["extrapolation_factor"] > 1 and set(res["baselines"]) >= {"smallest_cell", "steplaw"}
    # trained through the same machinery and storage: a one-cell sweep, one trial per distinct LR
    check = transfer_sweep_name("smoke", "w32-d2-t65.5k", method=DEFAULT_METHOD)
    assert check == "smoke.transfer.w32-d2-t65.5k.surface"
    tr = _cli(["status", check, "--storage", url, "--json"], tmp_path)
    cells = json.loads(tr.stdout)["cells"]
    assert len(cells) == 1 and cells[0]["complete"] == len(set(res["lrs"].values()))
    # run again with a second seed, it keeps the first seed's runs (not redone) and adds seed 1
    _more_seeds_train_only_the_missing_ones(url, check, tmp_path)

    # two tiny widths do not determine the LR at 1e9 parameters: refused, then written anyway
    target = ["--params", "1e9", "--tokens", "2e10", "--storage", url]
    r = _cli(["recommend", "smoke", *target, "--json"], tmp_path)
    assert r.returncode == 2 and "the law does not determine the lr there" in r.stderr, r.stderr
    target.append("--force")
    r = _cli(["recommend", "smoke", *target, "--json"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    recipe = json.loads(r.stdout)
    assert recipe["extrapolation_factor"] > 1000
    assert any("written anyway (forced)" in w for w in recipe["warnings"])
    out = tmp_path / "recipe.json"
    r = _cli(["export", "smoke", *target, "--format", "json", "-o", str(out)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli(
        [
            "report",
            "smoke",
            "-o",
            str(tmp_path / "report"),
            "--storage",
            url,
            "--recipe-json",
            str(out),
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    page = (tmp_path / "report" / "index.html").read_text()
    # (the recipe was forced: headed so, not "Recommended recipe")
    assert "Transfer check" in page and "Recipe written anyway (forced)" in page
    assert "w32-d2-t65.5k" in page
    assert (tmp_path / "report" / "law_lr_holdout.png").is_file()


def _more_seeds_train_only_the_missing_ones(url: str, check: str, tmp_path: Path) -> None:
    """A check asked for a second seed trains seed 1 alone, beside the check's own sweep (seed 0
    untouched). Carried to another storage as CSV files, one LR left out of seed 0, and asked
    for fewer seeds, it reads both back and trains only that LR's seed 0."""
    args = ["validate-transfer", "smoke", "--storage", url, "--json"]
    before = tmp_path / "before.csv"
    assert _cli(["trials", check, "--storage", url, "-o", str(before)], tmp_path).returncode == 0
    r = _cli([*args, "--seeds", "2"], tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    grown = json.loads(r.stdout)
    n_lrs = len(set(grown["lrs"].values()))
    assert grown["seeds"] == 2
    tables = {}
    for name in ("smoke", check, f"{check}.seeds-1-1"):
        out = tmp_path / f"{name}.csv"
        assert _cli(["trials", name, "--storage", url, "-o", str(out)], tmp_path).returncode == 0
        tables[name] = pd.read_csv(out)
    assert sorted(set(tables[check]["seed"])) == [0] and len(tables[check]) == n_lrs
    ids = set(pd.read_csv(before)["ray_trial_id"])
    assert ids and ids <= set(tables[check]["ray_trial_id"])  # the first runs kept, not redone
    assert set(tables[f"{check}.seeds-1-1"]["seed"]) == {1}
    assert len(tables[f"{check}.seeds-1-1"]) == n_lrs

    study = ["--study", str(REPO / "studies" / "smoke.toml")]
    url2 = f"sqlite:///{tmp_path / 'moved.db'}"
    worst = grown["lrs"][max(grown["losses"], key=grown["losses"].get)]
    for name, table in tables.items():  # the check's own runs lack one LR, its seed 1 has all
        out = tmp_path / f"{name}.moved.csv"
        if name == check:
            table = table[~table["lr"].sub(worst).abs().lt(1e-9 * worst)]
        table.to_csv(out, index=False)
        imp = ["import", str(out), "--sweep", name, "--storage", url2]
        r = _cli(imp + (study if name == "smoke" else []), tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
    r = _cli(["validate-transfer", "smoke", "--storage", url2, "--seeds", "1", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    moved = json.loads(r.stdout)
    assert moved["seeds"] == 2 and moved["lrs"] == grown["lrs"]
    kept = {k: v for k, v in grown["losses"].items() if grown["lrs"][k] != worst}
    assert {k: moved["losses"][k] for k in kept} == pytest.approx(kept)
    out = tmp_path / "fill.csv"
    r = _cli(["trials", f"{check}.fill", "--storage", url2, "-o", str(out)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = pd.read_csv(out)
    assert sorted(runs["seed"]) == [0] and runs["lr"].tolist() == [worst]
    from sweeper.study.storage import get_sweep

    assert get_sweep(f"{check}.seeds-1-1.fill", url2) is None  # nothing to fill: not launched


# ---- SIGKILL part-way, relaunch ----------------------------------------------------------------
def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,sid=,stat="], capture_output=True, text=True
    ).stdout
    pids = []
    for line in out.splitlines():
        pid, s, stat = line.split()[:3]
        if int(s) == sid and not stat.startswith("Z"):
            pids.append(int(pid))
    return pids


def _count_complete(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return int(
                conn.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
            )
    except sqlite3.Error:
        return 0


def _launch_until(
    path: Path, db: Path, complete: int, *, wait_s: float = 180, capture: bool = False
) -> subprocess.Popen[str]:
    """``sweeper launch path`` on SQLite ``db`` in a session of its own, returned once
    ``complete`` trials have completed (the launch must still run); ``capture``: stdout and
    stderr piped (read them with ``communicate``), else discarded."""
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, "launch", str(path), "--storage", f"sqlite:///{db}",
         "--no-progress"],
        cwd=path.parent, start_new_session=True, text=True, stdout=out, stderr=out,
    )  # fmt: skip
    deadline = time.time() + wait_s
    while _count_complete(db) < complete:
        if proc.poll() is not None or time.time() > deadline:
            for pid in _session_pids(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            why = "the launch ended" if proc.poll() is not None else "no trial completed in time"
            pytest.fail(f"{why} before it could be stopped part-way")
        time.sleep(0.3)
    return proc


@pytest.mark.drivers
def test_sigkill_part_way_then_relaunch(tmp_path: Path) -> None:
    from sweeper.run.launch import launch_study

    spec = tiny("killed", trials=5, tokens=65536)
    path = tmp_path / "killed.toml"
    from sweeper.study.study_toml import study_toml

    path.write_text(study_toml(spec))
    db = tmp_path / "k.db"
    url = f"sqlite:///{db}"
    proc = _launch_until(path, db, 2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # Ray's workers leave with the raylet they watch; none may survive
        deadline = time.time() + 30
        while _session_pids(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert _session_pids(proc.pid) == [], "stray Ray processes after SIGKILL"
    finally:
        for pid in _session_pids(proc.pid):  # only the processes of the session this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    before = {c: _states(s) for c, s in _studies(url, "killed").items()}
    killed_running = sum(s.get("RUNNING", 0) for s in before.values())
    assert sum(s.get("COMPLETE", 0) for s in before.values()) >= 2
    summary = launch_study(spec, url=url, progress=False)
    assert summary.reconciled == killed_running
    for cell, study in _studies(url, "killed").items():
        states = _states(study)
        assert states.get("COMPLETE") == 5, (cell, states)
        assert states.get("RUNNING", 0) == 0 and states.get("WAITING", 0) == 0
        assert states.get("FAIL", 0) == before[cell].get("RUNNING", 0)
        # every point a dead driver left is run again: what its sampler had chosen of it (the
        # driver may die before the first suggest, or between lr's and batch_size's, and TPE
        # chooses the rest anew)
        failed = [t.params for t in study.trials if t.state == TrialState.FAIL and t.params]
        done = [t.params for t in study.trials if t.state == TrialState.COMPLETE]
        assert all(any(p.items() <= d.items() for d in done) for p in failed), (failed, done)


@pytest.mark.drivers
def test_sigterm_part_way_stops_cleanly_then_relaunch_resumes(tmp_path: Path) -> None:
    """SIGTERM (``timeout``, Slurm, Kubernetes) killed the driver in Ray's signal handler: no
    summary, trials left RUNNING; SIGINT was reported as "short of their target after repeated
    failures". Both now stop the trials, release the lease, say "interrupted" (exit 128 + the
    signal), and the next launch runs the stopped runs again."""
    from sweeper.run.launch import launch_study
    from sweeper.study.study_toml import study_toml

    spec = tiny("termed", trials=5, tokens=65536)
    path = tmp_path / "termed.toml"
    path.write_text(study_toml(spec))
    db = tmp_path / "t.db"
    url = f"sqlite:///{db}"
    proc = _launch_until(path, db, 2, capture=True)
    try:
        os.kill(proc.pid, signal.SIGTERM)  # the driver only, as `timeout` does
        _, err = proc.communicate(timeout=120)
    finally:
        for pid in _session_pids(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 128 + 15, err[-3000:]
    assert "sweeper: interrupted (SIGTERM)" in err and "repeated failures" not in err
    before = {c: _states(s) for c, s in _studies(url, "termed").items()}
    left = sum(s.get("RUNNING", 0) for s in before.values())
    assert all(s.get("FAIL", 0) == 0 for s in before.values()), before  # nothing counted failed
    r = _cli(["status", "termed", "--storage", url], tmp_path)
    assert r.returncode == 0 and ("left RUNNING (no driver" in r.stdout) == (left > 0), r.stdout
    summary = launch_study(spec, url=url, progress=False)
    assert summary.reconciled == left and not summary.interrupted
    for cell, study in _studies(url, "termed").items():
        assert _states(study).get("COMPLETE") == 5, (cell, _states(study))


# ---- PostgreSQL ----------------------------------------------------------------------------------
@pytest.mark.postgres
def test_launch_on_postgresql(postgres_url: str, sweep_name: str) -> None:
    from sweeper.run.launch import launch_study
    from sweeper.study.sweep import sweep_status
    from sweeper.study.sweep_runs import load_sweep_runs

    spec = tiny(sweep_name, trials=2)
    summary = launch_study(spec, url=postgres_url, progress=False)
    assert summary.done and summary.runs_this_launch == 4
    assert all(_states(s) == {"COMPLETE": 2} for s in _studies(postgres_url, sweep_name).values())
    assert len(load_sweep_runs(sweep_name, postgres_url)) == 4
    assert [c["complete"] for c in sweep_status(sweep_name, postgres_url)["cells"]] == [2, 2]
    again = launch_study(spec, url=postgres_url, progress=False)
    assert again.runs_this_launch == 0


# ---- ASHA ----------------------------------------------------------------------------------------
def test_asha_stopped_trial_is_pruned(sqlite_url: str) -> None:
    from sweeper.run.launch import launch_study
    from sweeper.study.sweep import open_sweep

    extra = (
        '\n[pruner]\nkind = "asha"\ngrace_fraction = 0.25\nreduction_factor = 2.0\nreports = 4\n'
    )
    text = TINY.format(name="asha", trials=3, seeds=1, tokens=65536, max_failures=0) + extra
    text = text.replace("widths = [16, 32]", "widths = [16]")
    text = text.replace("low = 2e-3, high = 4.0", "low = 1e-7, high = 4e-2")
    spec = parse_study_toml(text)
    # a good point first, then two that learn nothing: ASHA must stop those at a rung
    study = open_sweep(spec, sqlite_url)[0].study
    for lr in (1e-2, 1e-7, 2e-7):
        study.enqueue_trial({"lr": lr, "batch_size": 8})
    summary = launch_study(spec, url=sqlite_url, max_concurrent=1, progress=False)
    assert summary.done
    trials = optuna.load_study(study_name="asha/w16-d1-t65.5k", storage=sqlite_url).trials
    assert [t.params["lr"] for t in trials] == [1e-2, 1e-7, 2e-7]
    assert trials[0].state == TrialState.COMPLETE
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert pruned, [t.state for t in trials]
    for t in pruned:
        run = t.user_attrs["runs"][0]
        assert run["stopped"] is True and run["loss"] > trials[0].value
        assert run["tokens"] < 65536  # stopped part-way, not a partial value told as COMPLETE
        assert t.intermediate_values  # the rung values reached Optuna
        # Optuna stores a PRUNED trial's last intermediate value as its value
        assert t.value == pytest.approx(run["loss"])


# ---- crashes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_failures", [1, 0])
def test_crashed_run_is_retried_then_fail(
    tmp_path: Path, max_failures: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash (not the study's code) is retried max_failures times, then FAIL with its error
    kept as last_error: with no retry, the error came only from a retry and was lost.

    The crash is one that validation and launch's checks cannot see, as data too short for the
    context now is: every run reads other data than the driver (another copy on each node), so
    each run raises in its worker after the launch. The driver's read is patched here; the
    workers, processes of their own, read the corpus as it is."""
    from sweeper.run import trainable
    from sweeper.run.launch import launch_study

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the driver's copy of the corpus\n" * 200)
    read = trainable.data_check

    def another_copy(spec: StudySpec, data: str) -> dict[str, str] | None:
        check = read(spec, data)
        assert check is not None  # (the built-in loop: the driver reads the data)
        return {**check, "fingerprint": "0ther0copy"}

    monkeypatch.setattr(trainable, "data_check", another_copy)
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    text = TINY.format(name="crash", trials=1, seeds=1, tokens=16384, max_failures=max_failures)
    text = text.replace('name = "crash"', f'name = "crash"\ndata = "{corpus}"')
    text = text.replace("widths = [16, 32]", "widths = [16]")
    spec = parse_study_toml(text)
    summary = launch_study(spec, url=url, progress=False)
    assert not summary.done
    (study,) = _studies(url, "crash").values()
    (t,) = study.trials
    assert t.state == TrialState.FAIL
    assert t.user_attrs.get("retries", 0) == max_failures  # that many retries, then FAIL
    error = t.user_attrs["last_error"]
    assert "differs from the driver's" in error and "0ther0copy" in error, t.user_attrs


def test_a_node_whose_data_differs_from_the_drivers_fails_its_run(tmp_path: Path) -> None:
    """Each node reads the study's data at the driver's path: another copy there (or, for the
    built-in corpus, another Python release's standard library) trained on other data than the
    sweep's, in silence. Each run now compares what it read with what the driver read."""
    from sweeper.run import trainable
    from sweeper.study.ladder import cells

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the driver's copy of the corpus\n" * 200)
    text = TINY.format(name="data", trials=1, seeds=1, tokens=16384, max_failures=0)
    spec = parse_study_toml(text.replace('name = "data"', f'name = "data"\ndata = "{corpus}"'))
    base = trainable.base_config(spec, str(corpus))
    assert base["data_check"]["name"] == str(corpus)
    config = trainable.trial_config(
        base, spec, cells(spec)[0], {"lr": 1e-2, "batch_size": 8}, seed=0
    )
    trainable._data_cache.clear()
    trainable._load_data(str(corpus), 256, base["data_check"])  # the same data: accepted
    # the driver reads afresh: a file changed since this process cached it is seen changed
    corpus.write_text("the driver's copy, edited before the next launch\n" * 200)
    assert trainable.data_check(spec, str(corpus)) != base["data_check"]
    corpus.write_text("the driver's copy of the corpus\n" * 200)
    corpus.write_text("another node's copy, edited since\n" * 200)
    trainable._data_cache.clear()
    with pytest.raises(ValueError, match="differs from the driver's") as e:
        trainable.train_once(config)
    assert base["data_check"]["fingerprint"] in str(e.value)
    trainable._data_cache.clear()


def test_tunes_traceback_of_a_failed_run_is_shown_once_per_error() -> None:
    """Tune logs each failed run with Ray's whole traceback: one exception in a study's own
    code printed nine of them, 600 lines, in a launch (its retries included). The first run
    to fail with an error shows it; the same error again is left to the searcher's one line."""
    import logging
    import warnings

    from sweeper.run.launch import _FirstOfEachError

    def record(text: str | None) -> logging.LogRecord:
        exc = (RuntimeError, RuntimeError(text), None) if text is not None else None
        return logging.LogRecord("t", logging.ERROR, "f", 1, "Trial task failed", None, exc)

    f = _FirstOfEachError()
    boom = "ray::ImplicitFunc.train() (pid=1)\n  File x\nRuntimeError: boom: my loop is broken"
    assert f.filter(record(boom))
    assert not f.filter(record(boom.replace("pid=1", "pid=2")))  # the same error, another run
    assert f.filter(record("Traceback\nValueError: another"))  # another error is shown
    assert f.filter(record(None))  # a record without an exception is never held back
    # each launch starts afresh (a second launch in one process hid the errors of the first),
    # and -v shows every traceback
    from sweeper.run.launch import _quiet_ray

    controller = logging.getLogger("ray.tune.execution.tune_controller")
    ray_level, filters = logging.getLogger("ray").level, list(warnings.filters)
    with _quiet_ray(0):
        (first,) = [g for g in controller.filters if isinstance(g, _FirstOfEachError)]
        assert first.filter(record(boom))
        assert logging.getLogger("ray").level == logging.ERROR
    with _quiet_ray(0):
        (second,) = [g for g in controller.filters if isinstance(g, _FirstOfEachError)]
        assert second is not first and second.filter(record(boom))
    with _quiet_ray(1):
        assert not [g for g in controller.filters if isinstance(g, _FirstOfEachError)]
    # the caller's logging and warnings are as they were (a notebook using Ray saw none of its
    # warnings after a launch)
    assert not [g for g in controller.filters if isinstance(g, _FirstOfEachError)]
    assert logging.getLogger("ray").level == ray_level and warnings.filters == filters


# ---- the searcher and the trainable without a Ray runtime --------------------------------------
def test_grid_point_that_fails_in_a_launch_is_asked_again_not_lost(sqlite_url: str) -> None:
    spec = parse_study_toml(grid_toml("gridfail"))
    assert spec.trials_per_cell == 3
    crashed: list[float] = []

    def crash_once(cfg: dict[str, Any]) -> bool:
        if cfg["params"]["lr"] == 2e-3 and not crashed:
            crashed.append(2e-3)
            return True
        return False

    drive(open_searcher(spec, sqlite_url), crash=crash_once)
    (study,) = _studies(sqlite_url, "gridfail").values()
    complete = [t.params["lr"] for t in study.trials if t.state == TrialState.COMPLETE]
    assert sorted(complete) == [1e-3, 2e-3, 4e-3]  # each grid point once, the failed one included
    assert _states(study) == {"COMPLETE": 3, "FAIL": 1}


def test_grid_point_that_fails_twice_in_a_launch_is_held_then_relaunch_retries_it(
    sqlite_url: str,
) -> None:
    """A point whose runs fail in a way a retry may cure (a timeout, out of memory) is asked
    again once in the launch, then held for the next: an own-model audit's point was asked
    until its cell had failed as often as its target, 9 runs with Ray's retries, and the cell's
    other points were never asked."""
    from sweeper.study.samplers import HELD

    spec = parse_study_toml(grid_toml("gridbad"))
    runs = drive(open_searcher(spec, sqlite_url), crash=lambda cfg: cfg["params"]["lr"] == 2e-3)
    (study,) = _studies(sqlite_url, "gridbad").values()
    assert _states(study) == {"COMPLETE": 2, "FAIL": 2}
    done = [t.params["lr"] for t in study.trials if t.state == TrialState.COMPLETE]
    assert sorted(done) == [1e-3, 4e-3] and len(runs) == 4
    assert study.user_attrs[HELD] == [{"lr": 2e-3, "batch_size": 8}]
    # the next launch (the crash gone) runs the held point and nothing else
    runs = drive(open_searcher(spec, sqlite_url))
    assert [r["params"]["lr"] for r in runs] == [2e-3]
    assert _states(study) == {"COMPLETE": 3, "FAIL": 2}


def test_a_point_that_fails_in_the_studys_code_is_held_for_the_next_launch(
    sqlite_url: str,
) -> None:
    """A seeded run raises the same exception again: the point was queued and asked again in
    the same launch until its cell had failed as often as its target (the cell ended short, its
    other points unasked). It is held for the next launch, which runs it once the code is fixed."""
    from sweeper.study.samplers import HELD

    spec = parse_study_toml(grid_toml("gridheld"))
    runs = drive(open_searcher(spec, sqlite_url), user_error=lambda c: c["params"]["lr"] == 2e-3)
    (study,) = _studies(sqlite_url, "gridheld").values()
    assert sorted(r["params"]["lr"] for r in runs) == [1e-3, 2e-3, 4e-3]  # each once
    assert _states(study) == {"COMPLETE": 2, "FAIL": 1}
    assert study.user_attrs[HELD] == [{"lr": 2e-3, "batch_size": 8}]
    runs = drive(open_searcher(spec, sqlite_url))  # the code fixed; reconcile queues the point
    assert [r["params"]["lr"] for r in runs] == [2e-3]
    assert _states(study) == {"COMPLETE": 3, "FAIL": 1} and study.user_attrs[HELD] == []
    assert drive(open_searcher(spec, sqlite_url)) == []


def test_a_seed_that_finished_before_its_driver_stopped_is_kept(sqlite_url: str) -> None:
    """Two seeds a point: one finished, the other running when the driver stopped. The relaunch
    closed the trial and ran both seeds again (an audit lost a finished seed so); now it runs
    only the one that had not finished, and the point is told with both."""
    text = grid_toml("gridseeds").replace("seeds_per_point = 1", "seeds_per_point = 2")
    spec = parse_study_toml(text)
    first = open_searcher(spec, sqlite_url)
    a, b = first.suggest("r0"), first.suggest("r1")  # the two seeds of the first point
    assert (a["seed"], b["seed"]) == (0, 1) and a["params"] == b["params"]
    done = {"final": True, "loss": 3.1, "val_loss": 3.1, "diverged": False, "wall_s": 1.0,
            "tokens": 16384, "tokens_per_s": 1e4}  # fmt: skip
    first.on_trial_complete("r0", result=done)  # seed 0 finishes; then the driver stops
    runs = drive(open_searcher(spec, sqlite_url))
    again = [r for r in runs if r["params"] == a["params"]]
    assert [r["seed"] for r in again] == [1]  # seed 0 is not run again
    (study,) = _studies(sqlite_url, "gridseeds").values()
    (told,) = [t for t in study.trials if t.state == TrialState.COMPLETE
               and t.params["lr"] == a["params"]["lr"]]  # fmt: skip
    assert [r["seed"] for r in told.user_attrs["runs"]] == [0, 1]
    assert told.user_attrs["runs"][0]["ray_trial_id"] == "r0"
    assert _states(study) == {"COMPLETE": 3, "FAIL": 1}


def test_two_law_replicates_at_one_lr_each_keep_their_finished_seeds() -> None:
    """Law replicates share their params ({"lr": x}): reconcile queued the first and dropped the
    second as a duplicate, with the seed it had finished (a review)."""
    from optuna.distributions import FloatDistribution

    from sweeper.study.samplers import RUNS_DONE, reconcile

    study = optuna.create_study()
    for seed in (0, 2):  # as the law sampler asks a planned point
        study.enqueue_trial({"lr": 1e-3})
        t = study.ask({"lr": FloatDistribution(1e-4, 1.0, log=True)})
        t.set_user_attr(RUNS_DONE, [{"seed": seed, "loss": 3.0}])
    reconcile(study)
    waiting = [t for t in study.trials if t.state == TrialState.WAITING]
    assert [t.user_attrs[RUNS_DONE][0]["seed"] for t in waiting] == [0, 2]


def test_exhausted_grid_is_not_asked_twice(sqlite_url: str) -> None:
    """A FAIL point without a queued retry (an older Sweeper): stop short, never repeat a point."""
    from sweeper.study.space import distributions
    from sweeper.study.sweep import open_sweep

    spec = parse_study_toml(grid_toml("gridold"))
    study = open_sweep(spec, sqlite_url)[0].study
    dists = distributions(spec.search)
    trials = [study.ask(dists) for _ in range(3)]
    study.tell(trials[0], state=TrialState.FAIL)
    for t in trials[1:]:
        study.tell(t, 3.0)
    assert drive(open_searcher(spec, sqlite_url)) == []
    assert _states(study) == {"COMPLETE": 2, "FAIL": 1}


def test_raising_trials_per_cell_adds_exactly_the_missing_trials(sqlite_url: str) -> None:
    spec = tiny("grow", trials=2)
    drive(open_searcher(spec, sqlite_url))
    assert [_states(s) for s in _studies(sqlite_url, "grow").values()] == [{"COMPLETE": 2}] * 2
    # the target and the sampler's pacing may change between launches of one sweep
    text = TINY.format(name="grow", trials=5, seeds=1, tokens=16384, max_failures=1)
    more = parse_study_toml(text.replace("n_startup_trials = 2", "max_pending_per_cell = 1"))
    assert more.sampler.max_pending_per_cell == 1 and more.sampler.n_startup_trials is None
    runs = drive(open_searcher(more, sqlite_url))
    assert len(runs) == 6  # 3 more per cell
    for study in _studies(sqlite_url, "grow").values():
        assert _states(study) == {"COMPLETE": 5} and study.user_attrs["target"] == 5
    assert drive(open_searcher(more, sqlite_url)) == []  # and a relaunch adds nothing


def test_end_of_run_report_is_not_sent_to_tune(monkeypatch: pytest.MonkeyPatch) -> None:
    """ASHA may stop a trial on any non-final result: train()'s call at the end of the run must
    not reach Tune, or a fully trained run could end PRUNED without its final result."""
    from ray import tune as ray_tune

    import sweeper.run.trainable as launch
    from sweeper.study.ladder import cells
    from sweeper.study.space import hparams_kwargs

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(ray_tune, "report", lambda metrics: sent.append(dict(metrics)))
    spec = tiny("report")
    cell = cells(spec)[0]
    config = {
        "data": "builtin",
        "threads": 1,
        "device": "cpu",
        "eval_batches": 1,
        "eval_every": 2,
        "model": cell.proxy_config_kwargs(),
        "hparams": hparams_kwargs(spec, {"lr": 1e-2, "batch_size": 8}),
        "tokens": 8 * 8 * 32,  # 8 steps: evaluations after steps 2, 4, 6; step 8 is the end
        "seed": 0,
    }
    launch.run_trial(config)
    assert [m["final"] for m in sent] == [False, False, False, True]
    assert [m["step"] for m in sent[:-1]] == [2, 4, 6]
    assert all(m["progress"] < 100 for m in sent[:-1]) and sent[-1]["progress"] == 100
    assert sent[-1]["steps"] == 8 and sent[-1]["diverged"] is False
    # the same with evaluations that do not divide the run (the end call at step 8 again)
    sent.clear()
    launch.run_trial({**config, "eval_every": 3})
    assert [m["step"] for m in sent if not m["final"]] == [3, 6] and sent[-1]["final"]


def test_a_launch_on_another_device_than_the_stored_runs_is_warned(sqlite_url: str) -> None:
    """bf16 on CUDA and fp32 on the CPU give different losses near the best LR: a sweep that
    would mix them says so (the runs record their device)."""
    from sweeper.run.launch import _device_mix
    from sweeper.study.sweep import open_sweep

    spec = parse_study_toml(grid_toml("mixed"))
    drive(open_searcher(spec, sqlite_url), extra={"device": "cuda"})
    message = _device_mix(spec, open_sweep(spec, sqlite_url))
    assert "holds runs trained on cuda" in message and "trains on cpu (fp32)" in message
    on_gpu = parse_study_toml(grid_toml("mixed") + "\n[resources]\ngpu = 1\n")
    assert _device_mix(on_gpu, open_sweep(on_gpu, sqlite_url)) == ""
    # runs that do not say where they trained (a fake's, an import's) warn of nothing
    quiet = parse_study_toml(grid_toml("quiet"))
    drive(open_searcher(quiet, sqlite_url))
    assert _device_mix(quiet, open_sweep(quiet, sqlite_url)) == ""


def test_a_training_function_study_is_not_warned_of_a_device_it_chose(sqlite_url: str) -> None:
    """Your own training function picks its device and precision: its runs record "cpu" (the
    default), which says nothing of a GPU launch's."""
    from sweeper.run.launch import _device_mix
    from sweeper.study.space import distributions
    from sweeper.study.sweep import open_sweep

    text = (REPO / "studies" / "own_function.toml").read_text()
    spec = parse_study_toml(text.replace("cpu = 1", "cpu = 1\ngpu = 1"))
    assert spec.train.function and spec.resources.gpu == 1
    cells = open_sweep(spec, sqlite_url)
    trial = cells[0].study.ask(distributions(spec.search))
    trial.set_user_attr("runs", [{"seed": 0, "loss": 3.0, "device": "cpu"}])
    cells[0].study.tell(trial, 3.0)
    assert _device_mix(spec, cells) == ""


def test_a_diverged_point_is_never_a_cells_best(sqlite_url: str) -> None:
    """The progress line printed "best 42.9582 (lr 3, ...)" for a diverged run: a diverged point
    bounds the LR range, it is not an optimum, in the live count nor in the one read back on a
    relaunch."""
    spec = parse_study_toml(grid_toml("griddiv"))
    searcher = open_searcher(spec, sqlite_url)
    drive(searcher, extra={"diverged": True})
    assert [c.complete for c in searcher.cells] == [3]
    assert [c.best_loss for c in searcher.cells] == [None]
    assert [c.best_loss for c in open_searcher(spec, sqlite_url).cells] == [None]


def test_a_trial_no_node_can_fit_is_said_before_the_launch_waits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """resources.cpu = 4 on a 2-core machine with max_concurrent set sat at 0/5 for 90 s in
    silence (the capacity check was skipped when max_concurrent was given; it now always runs);
    a trial that the cluster's total fits but no single node does earns a warning."""
    from dataclasses import replace

    from sweeper.errors import StudyError
    from sweeper.run import launch

    spec = tiny("fits")
    four = replace(spec, resources=replace(spec.resources, cpu=4.0, max_concurrent=2))
    two_nodes = [{"Alive": True, "Resources": {"CPU": 2.0}}] * 2
    monkeypatch.setattr(launch.ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(launch.ray, "nodes", lambda: two_nodes[:1])
    with pytest.raises(StudyError, match="cannot fit one trial of 4 CPU"):
        launch._capacity(four)
    monkeypatch.setattr(launch.ray, "cluster_resources", lambda: {"CPU": 4.0})
    monkeypatch.setattr(launch.ray, "nodes", lambda: two_nodes)
    assert launch._capacity(four) == 1
    assert "no node of the Ray cluster has 4 CPU" in caplog.text
    caplog.clear()
    assert launch._capacity(replace(four, resources=replace(four.resources, cpu=2.0))) == 2
    assert "no node" not in caplog.text


@contextlib.contextmanager
def _server(reply: bytes, n: int = 1) -> Iterator[int]:
    """A TCP server of ``n`` connections on a free loopback port that answers each with
    ``reply``; its port."""
    import socket
    import threading

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()

        def answer() -> None:
            with contextlib.suppress(OSError):
                for _ in range(n):
                    conn, _ = srv.accept()
                    with conn:
                        conn.recv(64)
                        conn.sendall(reply)

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        yield srv.getsockname()[1]
        t.join(timeout=5)


def test_an_address_where_nothing_listens_is_refused_before_the_lease(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A mistyped --address port made ray.init retry for ever while the driver held the sweep's
    lease (a relaunch with the right address was refused; Ctrl-C did not stop it); without a
    port it was an 'internal error: ValueError'. Both are refused at once, before the storage."""
    import socket

    from sweeper.run.launch import RayConnectError, _connect_hint, check_address, launch_study

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again below: nothing listens there
    with pytest.raises(RayConnectError, match=f"nothing answers at 127.0.0.1:{port}"):
        check_address(f"127.0.0.1:{port}")
    for bad in ("127.0.0.2", "127.0.0.1:99999999999999999999", "127.0.0.1:0"):
        with pytest.raises(RayConnectError, match="--address must be host:port"):
            check_address(bad)
    check_address("local")  # (ray.init's own word for a Ray of its own)
    # a port where another service answers (a cluster audit: an HTTP server, PostgreSQL) hung
    # for ever too; a scheme other than ray:// was an internal error
    import sweeper.run.launch as launch_mod

    monkeypatch.setattr(launch_mod, "ADDRESS_PROBE_S", 1.0)
    with pytest.raises(RayConnectError, match="--address must be host:port"):
        check_address("http://127.0.0.1:6379")
    http = _server(b"HTTP/1.0 400 Bad Request\r\n\r\n")
    with http as other, pytest.raises(RayConnectError, match="not a Ray head"):
        check_address(f"127.0.0.1:{other}")
    settings = bytes([0, 0, 0x18, 4, 0, 0, 0, 0, 0])  # (the SETTINGS frame a GCS answers with)
    with _server(settings, n=2) as grpc:
        check_address(f"127.0.0.1:{grpc}")
        # (a Ray Client address cannot run a sweep: tests/sweeper/run/test_cluster_join.py)
        with pytest.raises(RayConnectError, match="a Ray Client address"):
            check_address(f"ray://127.0.0.1:{grpc}")
        # auto: what Ray resolves it to is probed (an audit: with no Ray here, ray.init's
        # error had come with a token hint; a stale `ray start` address retried for ever)
        import ray._private.services as services

        grpc_at = f"127.0.0.1:{grpc}"
        monkeypatch.setattr(services, "canonicalize_bootstrap_address", lambda a: grpc_at)
        check_address("auto")
    check_address(None)
    monkeypatch.setattr(services, "canonicalize_bootstrap_address", lambda a: f"127.0.0.1:{port}")
    with pytest.raises(RayConnectError, match=rf"at auto \(127.0.0.1:{port}, .*nothing answers"):
        check_address("auto")

    def no_ray(address: str) -> str:
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(services, "canonicalize_bootstrap_address", no_ray)
    with pytest.raises(RayConnectError, match="--address auto: no running Ray cluster found"):
        check_address("auto")
    url = f"sqlite:///{tmp_path / 'never.db'}"
    with pytest.raises(RayConnectError):
        launch_study(tiny("addr"), url=url, address=f"127.0.0.1:{port}", progress=False)
    assert not (tmp_path / "never.db").exists()
    # the token hint names what is missing: a token file with RAY_AUTH_MODE unset is not sent
    token = tmp_path / "auth_token"
    token.write_text("t")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    hint = _connect_hint("10.0.0.1:6379", ConnectionError("Unauthenticated"))
    assert "does not send its token (RAY_AUTH_MODE=unset)" in hint and "has no token" not in hint
    assert "fix: set RAY_AUTH_MODE=token (and check that the token is the head's)" in hint
    # the mode already token and no token: the fix asks for the token only (a cluster audit)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "none"))
    hint = _connect_hint("10.0.0.1:6379", ConnectionError("Unauthenticated"))
    assert "has no token" in hint and "fix: give this driver the cluster's token" in hint
    assert "set RAY_AUTH_MODE" not in hint
    monkeypatch.delenv("RAY_AUTH_MODE")
    hint = _connect_hint("10.0.0.1:6379", ConnectionError("Unauthenticated"))
    assert "fix: set RAY_AUTH_MODE=token and give this driver the cluster's token" in hint


def test_a_launch_follows_the_clusters_capacity_as_nodes_join(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The number of trials at once was fixed at launch: a node that joined later stayed idle
    for the rest of the sweep. The searcher reads the capacity again (every 15 s); a user's own
    max_concurrent stays fixed (no capacity is read)."""
    import sweeper.run.searcher as searcher_mod

    searcher = open_searcher(tiny("grow_nodes", trials=6), sqlite_url, max_concurrent=1)
    sizes = iter([None, 3, 3, 0])  # Ray cannot say; a node joined; the same; all nodes gone
    searcher.capacity = lambda: next(sizes)
    monkeypatch.setattr(searcher_mod, "CAPACITY_EVERY_S", 0.0)
    seen = []
    for _ in range(4):
        searcher._follow_capacity()
        seen.append(searcher.max_concurrent)
    assert seen == [1, 3, 3, 3]  # (none left: kept, the trials wait for a node)
    monkeypatch.setattr(searcher_mod, "CAPACITY_EVERY_S", 15.0)
    searcher.capacity = lambda: 8
    searcher._follow_capacity()
    assert searcher.max_concurrent == 3  # read at most every 15 s



@pytest.mark.parametrize("bad", [-1, 0, 2.0, "2", True])
def test_max_concurrent_not_a_count_is_refused_before_anything(bad: Any, tmp_path: Path) -> None:
    """launch(max_concurrent=-1) had run no trial and hung until a signal; 0 had been read as
    no limit (an API audit). Refused before the storage is touched."""
    from sweeper.errors import StudyError
    from sweeper.run.launch import launch_study

    url = f"sqlite:///{tmp_path / 'never.db'}"
    with pytest.raises(StudyError, match=r"max_concurrent \(--max-concurrent\) must be an integer"):
        launch_study(tiny("conc"), url=url, max_concurrent=bad, progress=False)
    assert not (tmp_path / "never.db").exists()

"""PostgreSQL as the storage of several drivers, end to end (each test has its own database; see
tests/conftest.py): two drivers on two sweeps at once, two launches of one sweep racing, a driver
SIGKILLed part-way and relaunched. (The takeover race on PostgreSQL is in test_takeover.py.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.study.study_toml import study_toml
from tests.sweeper.run.test_launch import _CLI, _session_pids, _states, _studies, tiny
from tests.sweeper.run.test_takeover import _complete

pytestmark = [pytest.mark.postgres, pytest.mark.drivers]


def _write(tmp_path: Path, name: str, **kw: int) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(study_toml(tiny(name, **kw)))
    return path


def _launch(path: Path, url: str, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CLI, "launch", str(path), "--no-progress"],
        cwd=tmp_path, env={**os.environ, "SWEEPER_STORAGE": url}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _reap(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        for pid in _session_pids(p.pid):  # only the sessions this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_two_drivers_on_two_sweeps_at_once(postgres_url: str, tmp_path: Path) -> None:
    a = _launch(_write(tmp_path, "alpha", trials=2), postgres_url, tmp_path)
    b = _launch(_write(tmp_path, "beta", trials=2), postgres_url, tmp_path)
    try:
        outs = [p.communicate(timeout=400) for p in (a, b)]
    finally:
        _reap(a, b)
    for p, (_, err) in zip((a, b), outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    for sweep in ("alpha", "beta"):
        studies = _studies(postgres_url, sweep)
        assert len(studies) == 2
        assert all(_states(s) == {"COMPLETE": 2} for s in studies.values()), sweep


def test_two_launches_of_one_sweep_race_and_one_runs_it(postgres_url: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "racing", trials=2, tokens=65536)
    procs = [_launch(path, postgres_url, tmp_path) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        _reap(*procs)
    codes = sorted(p.returncode for p in procs)
    errs = "\n".join(err for _, err in outs)
    # one ran the sweep; the other was refused (the lease, or the sweep row inserted first) and
    # wrote nothing; either way no trial was run twice
    assert codes == [0, 2], errs[-3000:]
    assert "one driver per sweep" in errs or "already" in errs, errs[-3000:]
    assert all(_states(s) == {"COMPLETE": 2} for s in _studies(postgres_url, "racing").values())


def test_sigkill_part_way_then_relaunch_postgres(postgres_url: str, tmp_path: Path) -> None:
    # trials long enough (262k tokens) that the driver cannot finish the other six between two
    # looks at the count, even on a loaded machine: the kill must land part-way
    path = _write(tmp_path, "killed", trials=4, tokens=262144)
    proc = _launch(path, postgres_url, tmp_path)
    try:
        deadline = time.time() + 240
        while _complete(postgres_url, "killed") < 2:
            if proc.poll() is not None:  # the premise failed: say so, with the driver's stderr
                pytest.fail(f"the driver exited ({proc.returncode}) before it could be killed "
                            f"part-way: {proc.communicate()[1][-3000:]}")  # fmt: skip
            assert time.time() < deadline, "no trial completed in time"
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.time() + 30
        while _session_pids(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert _session_pids(proc.pid) == [], "stray Ray processes after SIGKILL"
    finally:
        _reap(proc)
    before = {c: _states(s) for c, s in _studies(postgres_url, "killed").items()}
    again = _launch(path, postgres_url, tmp_path)  # at once: the dead pid on this host is gone
    try:
        _, err = again.communicate(timeout=400)
    finally:
        _reap(again)
    assert again.returncode == 0, err[-3000:]
    for cell, study in _studies(postgres_url, "killed").items():
        states = _states(study)
        assert states.get("COMPLETE") == 4, (cell, states)
        assert states.get("RUNNING", 0) == 0 and states.get("WAITING", 0) == 0
        assert states.get("FAIL", 0) == before[cell].get("RUNNING", 0)

"""Sweeper on a Ray cluster of three nodes (tests/cluster/conftest.py), joined with ``--address``:
trials placed per the study's resources, a worker node lost mid-trial (the trial is retried and
the sweep completes with exact counts), the driver killed and relaunched against the same
cluster, the user's own builder shipped to the workers of another node, Ray's job table free of
the storage password, and a driver without the cluster's token told what to do. The default run
(placement with the builder and the job table, node loss) takes about 3 minutes on 2 busy cores,
the cluster's start included; the rest is ``slow``. ``bash scripts/test_multinode.sh`` runs the
default part (CI runs it after the README's test command), ``bash scripts/test_multinode.sh -m
multinode`` all of it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.cluster.conftest import RayCluster
from tests.sweeper.run.test_launch import (
    _CLI,
    TINY,
    _count_complete,
    _session_pids,
    _states,
    _studies,
)

pytestmark = pytest.mark.multinode


def _launch(
    cluster: RayCluster,
    tmp: Path,
    name: str,
    *extra: str,
    env: dict[str, str] | None = None,
    **kw: Any,
) -> subprocess.Popen[str]:
    cpu = kw.pop("cpu", 1)
    storage = kw.pop("storage", f"sqlite:///{tmp / f'{name}.db'}")
    widths = kw.pop("widths", "[16, 32]")
    args = {"trials": 3, "seeds": 1, "tokens": 16384, "max_failures": 1, **kw}
    text = (
        TINY.format(name=name, **args)
        .replace("[resources]\n", f"[resources]\ncpu = {cpu}\n")
        .replace("widths = [16, 32]", f"widths = {widths}")
    )
    path = tmp / f"{name}.toml"
    path.write_text(text)
    where = ["--storage", storage] if storage else []
    return subprocess.Popen(
        [sys.executable, "-c", _CLI, "launch", str(path), "--address", cluster.address,
         *where, "--no-progress", *extra],
        cwd=tmp, env=env or cluster.env, start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(p: subprocess.Popen[str], timeout: float = 300) -> tuple[str, str]:
    try:
        return p.communicate(timeout=timeout)
    finally:
        for pid in _session_pids(p.pid):  # only the driver's own session
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _runs(url: str, sweep: str) -> list[dict[str, Any]]:
    return [
        r for s in _studies(url, sweep).values() for t in s.trials
        for r in t.user_attrs.get("runs", [])
    ]  # fmt: skip


SECRET = "Zq7xJobTablePw"


def _storage_with_password(request: pytest.FixtureRequest, tmp: Path) -> tuple[str, bool]:
    """A PostgreSQL URL with a sentinel password (the test server trusts local connections, so
    any password is accepted) when a server answers, else a SQLite file; and which it is."""
    import sqlalchemy as sa

    try:
        pg = request.getfixturevalue("postgres_url")
    except pytest.skip.Exception:
        return f"sqlite:///{tmp / 'own.db'}", False
    return sa.engine.make_url(pg).set(password=SECRET).render_as_string(False), True


OWN_STUDY = """\
[sweep]
name = "own"

[model]
context = 32
head_dim = 16
builder = "usermod_b:tiny"

[ladder]
widths = [16, 32]
depths = [1]
tokens = [4096]

[search]
lr = 3e-3
batch_size = 8

[sampler]
kind = "grid"

[resources]
cpu = 2
"""


def test_launch_with_address_places_trials_and_ships_the_users_builder(
    ray_cluster: RayCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A sweep launched with ``--address``. Its study names its own model builder
    (``usermod_b:tiny``, a module next to the study, on the driver's PYTHONPATH only), and each
    trial needs 2 CPUs: every trial runs on node b, never on the 1-CPU node a, and node b's
    workers, which have no such module, get it through Ray's runtime_env (py_modules). The
    storage URL comes from the environment with a password: Ray's job table (the driver's
    command line as its entrypoint) and the driver's output must not hold it."""
    import json

    study_dir = tmp_path / "study_dir"
    study_dir.mkdir()
    own = Path(__file__).resolve().parents[1] / "own_builders.py"
    (study_dir / "usermod_b.py").write_text(own.read_text())
    (study_dir / "own.toml").write_text(OWN_STUDY)
    url, has_secret = _storage_with_password(request, tmp_path)
    env = {**ray_cluster.env, "PYTHONPATH": str(study_dir), "SWEEPER_STORAGE": url}
    r = subprocess.run(
        [sys.executable, "-c", _CLI, "launch", str(study_dir / "own.toml"), "--address",
         ray_cluster.address, "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    runs = _runs(url, "own")
    assert len(runs) == 2 and {x["node_ip"] for x in runs} == {ray_cluster.ip("b")}, runs
    assert all(x["loss"] > 0 for x in runs)
    probe = (
        "import json, sys, ray; ray.init(address=sys.argv[1], logging_level='ERROR'); "
        "print(json.dumps([j.get('Entrypoint', '') for j in ray._private.state.jobs()]))"
    )
    q = subprocess.run(
        [sys.executable, "-c", probe, ray_cluster.address],
        env={**ray_cluster.env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    entries = json.loads(q.stdout.strip().splitlines()[-1])
    assert any("own.toml" in e for e in entries), entries  # the job table was read
    if has_secret:
        assert not any(SECRET in e for e in entries) and SECRET not in r.stdout + r.stderr


def test_a_worker_node_lost_mid_trial(ray_cluster: RayCluster, tmp_path: Path) -> None:
    """R2: node a dies while it runs a trial; Ray retries the run on node b (from zero: no
    checkpoint), and the sweep completes with exactly its trials, none failed."""
    p = _launch(
        ray_cluster, tmp_path, "lost", trials=3, tokens=131072, max_failures=3, widths="[16]"
    )
    try:
        deadline = time.time() + 180
        while not ray_cluster.ask("busy")["a"]:
            assert p.poll() is None, p.communicate()[1][-3000:]
            assert time.time() < deadline, "no trial ran on node a"
            time.sleep(0.2)
        ray_cluster.ask("remove a")
        _out, err = _finish(p, timeout=400)
    finally:
        if "a" not in ray_cluster.ask("busy"):
            ray_cluster.ask("add a")  # the cluster as the other tests expect it
    assert p.returncode == 0, err[-3000:]
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    (study,) = _studies(url, "lost").values()
    assert _states(study) == {"COMPLETE": 3}, _states(study)
    retried = [t for t in study.trials if t.user_attrs.get("retries")]
    assert retried, ("the lost run was not retried", _runs(url, "lost"))
    runs = _runs(url, "lost")
    assert len(runs) == 3  # one run per trial: the retry replaced the lost one
    assert any(r["node_ip"] == ray_cluster.ip("a") for r in runs) or retried


@pytest.mark.slow
def test_driver_killed_and_relaunched_against_the_same_cluster(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    db = tmp_path / "again.db"
    p = _launch(ray_cluster, tmp_path, "again", trials=3, tokens=65536, widths="[16]")
    try:
        deadline = time.time() + 180
        while _count_complete(db) < 1:
            assert p.poll() is None, p.communicate()[1][-3000:]
            assert time.time() < deadline, "no trial completed in time"
            time.sleep(0.3)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        _finish(p, timeout=30)
    url = f"sqlite:///{db}"
    before = {c: _states(s) for c, s in _studies(url, "again").items()}
    q = _launch(ray_cluster, tmp_path, "again", trials=3, tokens=65536, widths="[16]")
    _out, err = _finish(q)
    assert q.returncode == 0, err[-3000:]
    for cell, study in _studies(url, "again").items():
        states = _states(study)
        assert states.get("COMPLETE") == 3, (cell, states)
        assert states.get("FAIL", 0) == before[cell].get("RUNNING", 0)
        assert states.get("RUNNING", 0) == 0 and states.get("WAITING", 0) == 0
    # the dead driver's trials did not outlive it on the cluster
    deadline = time.time() + 60
    while any(ray_cluster.ask("busy").values()) and time.time() < deadline:
        time.sleep(1)
    assert not any(ray_cluster.ask("busy").values()), "trials of a dead driver still run"


USER_MODULE = """
def build(width):
    return {"built_by": "usermod", "width": width}
"""

PROBE = """
import json, sys
import ray
from sweeper.run.launch import runtime_env_for

address, mods, ip = sys.argv[1:4]
env = runtime_env_for(["usermod:build"], [mods]) if sys.argv[4] == "ship" else None
ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=1, resources={f"node:{ip}": 0.01}, max_retries=0)
def use():
    import usermod, ray
    return usermod.build(64), ray.util.get_node_ip_address()

try:
    print(json.dumps(ray.get(use.remote(), timeout=120)))
except Exception as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e).splitlines()[0]}))
"""


@pytest.mark.slow
def test_user_modules_reach_the_workers_of_another_node(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """The mechanism alone: a module of the user's, nowhere on the workers, cannot be imported
    there without the runtime_env Sweeper builds, and can with it."""
    mods = tmp_path / "study_dir"
    mods.mkdir()
    (mods / "usermod.py").write_text(USER_MODULE)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {**ray_cluster.env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    got = {}
    for how in ("ship", "none"):
        r = subprocess.run(
            [sys.executable, "-c", PROBE, ray_cluster.address, str(mods), ray_cluster.ip("b"), how],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        got[how] = r.stdout.strip().splitlines()[-1]
    import json

    shipped = json.loads(got["ship"])
    assert shipped == [{"built_by": "usermod", "width": 64}, ray_cluster.ip("b")], shipped
    assert "ModuleNotFoundError" in got["none"] or "usermod" in got["none"], got["none"]


@pytest.mark.slow
def test_a_driver_without_the_token_is_told_why(ray_cluster: RayCluster, tmp_path: Path) -> None:
    """Token authentication is on: a driver without the token fails with the cause and the fix,
    as a user error (exit 2), not an internal ConnectionError."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in ray_cluster.env.items() if not k.startswith("RAY_AUTH")}
    env["HOME"] = str(home)  # no ~/.ray/auth_token either
    t0 = time.time()
    p = _launch(ray_cluster, tmp_path, "notoken", trials=1, env=env)
    _out, err = _finish(p, timeout=300)
    print(f"no-token launch failed after {time.time() - t0:.1f} s")
    assert p.returncode == 2, err[-3000:]
    assert "cannot join the Ray cluster" in err and "RAY_AUTH_MODE=token" in err, err[-3000:]
    assert "internal error" not in err
    assert optuna is not None

"""A launch that cannot join its Ray cluster (``--address``): what it says, and what it leaves.

No cluster is needed: ``ray.init`` is replaced by one that raises what Ray raised in a cluster
audit (no token, a wrong one, a Ray Client address without ``ray[client]``), and the probe of the
head's port (:func:`sweeper.run.launch.check_address`) is told that a GCS answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import ray

from sweeper.run import launch
from sweeper.run.launch import RayConnectError, _connect_hint, launch_study
from sweeper.study import storage as st
from sweeper.study.spec import StudySpec, parse_study_toml
from sweeper.study.sweep import open_sweep
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)
from tests.sweeper.run.test_launch import TINY

#: test_launch's tiny study, with the defaults of the keys it leaves to the caller
STUDY = TINY.replace("{trials}", "2").replace("{seeds}", "1").replace("{max_failures}", "2")

#: Ray 2.60's errors of a driver that cannot join (docs/CLUSTER.md, section 2; a cluster audit)
NO_TOKEN = (
    "Token authentication is enabled but no authentication token was found. Ensure that the "
    "token for the cluster is available in a local file (e.g., ~/.ray/auth_token or via "
    "RAY_AUTH_TOKEN_PATH) or as the `RAY_AUTH_TOKEN` environment variable. To generate a token "
    "for local development, use `ray get-auth-token --generate` For remote clusters, ensure that "
    "the token is propagated to all nodes of the cluster when token authentication is enabled."
)
NO_CLIENT = (
    "Ray Client requires pip package `ray[client]`. If you installed the minimal Ray (e.g. "
    "`pip install ray`), please reinstall by executing `pip install ray[client]`."
)
JOIN_ERRORS = {
    "no token": lambda: ray.exceptions.AuthenticationError(NO_TOKEN),
    "wrong token": lambda: ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"),
    "ray client": lambda: ValueError(NO_CLIENT),
}


def study(name: str, tokens: int = 16384) -> StudySpec:
    return parse_study_toml(STUDY.format(name=name, tokens=tokens))


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A head that answers the probe but that ``ray.init`` cannot join: set ``raise`` (the list's
    only item) to the error it raises; the list gets each address ``ray.init`` was called with."""
    calls: list[Any] = [None]

    def init(address: str | None = None, **_: Any) -> None:
        calls.append(address)
        raise calls[0]()

    monkeypatch.setattr(launch, "_speaks_grpc", lambda host, port: True)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda *a, **k: None)
    return calls


def _sweeps(url: str) -> list[str]:
    return [s["name"] for s in st.list_sweeps(url)]


@pytest.mark.parametrize("why", sorted(JOIN_ERRORS))
def test_a_launch_that_cannot_join_leaves_no_new_sweep(
    why: str, cluster: list[Any], tmp_path: Path, cli: CliRunner
) -> None:
    """A launch that could not join (no token, a wrong one, a Ray Client address) had registered
    its sweep first: `sweeper status` listed it, every cell at 0/2 and no trial. A new sweep is
    now registered once the cluster is joined."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    cluster[0] = JOIN_ERRORS[why]
    with pytest.raises(RayConnectError, match=r"cannot join|Ray Client"):
        launch_study(study("nojoin"), url=url, address="10.0.0.1:6379", progress=False)
    assert cluster[1:] == ["10.0.0.1:6379"]
    assert _sweeps(url) == []
    assert optuna.get_all_study_names(url) == []
    _, out, err = cli("status", "--storage", url)
    assert "nojoin" not in out + err


def test_a_relaunch_that_cannot_join_keeps_its_sweep_and_a_bad_one_is_refused_first(
    cluster: list[Any], sqlite_url: str
) -> None:
    """A relaunch of an existing sweep keeps it when the join fails; a relaunch refused by the
    sweep's own checks (another study under the same name) is refused before the slow join; a
    --force-new launch that cannot join deletes nothing (it joins before it replaces the sweep:
    a review found the old trials deleted by a launch that then could not run one)."""
    spec = study("kept")
    cells = open_sweep(spec, sqlite_url)  # (a sweep with a trial, as an earlier launch left it)
    cells[0].study.ask()
    cluster[0] = JOIN_ERRORS["wrong token"]
    with pytest.raises(RayConnectError, match="cannot join"):
        launch_study(spec, url=sqlite_url, address="10.0.0.1:6379", progress=False)
    assert _sweeps(sqlite_url) == ["kept"]
    assert len(cells[0].study.get_trials()) == 1
    # another study under the same name: refused without asking the cluster
    other = study("kept", tokens=32768)
    with pytest.raises(st.StorageError, match="different study"):
        launch_study(other, url=sqlite_url, address="10.0.0.1:6379", progress=False)
    assert cluster[1:] == ["10.0.0.1:6379"]
    # --force-new cannot join: the old sweep and its trial are kept
    with pytest.raises(RayConnectError, match="cannot join"):
        launch_study(
            other, url=sqlite_url, address="10.0.0.1:6379", progress=False, force_new=True
        )
    assert _sweeps(sqlite_url) == ["kept"]
    assert len(cells[0].study.get_trials()) == 1


def test_a_ray_client_address_is_refused_at_once_in_one_line(
    cluster: list[Any], tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--address ray://host:port` was let through, and without ray[client] installed ray.init
    failed 17 s later with "internal error: ValueError: Ray Client requires pip package
    'ray[client]'" (exit 1). Ray Client cannot run a sweep anyway (Tune runs its loop on the
    cluster): refused before the storage is touched, in one line that says what to give."""
    cluster[0] = JOIN_ERRORS["ray client"]
    toml = tmp_path / "s.toml"
    toml.write_text(STUDY.format(name="rc", tokens=16384))
    db = tmp_path / "rc.db"
    code, _, err = cli(
        "launch", toml, "--address", "ray://10.0.0.1:10001", "--storage", f"sqlite:///{db}",
        "--no-progress",
    )  # fmt: skip
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: --address ray://10.0.0.1")
    assert "Ray Client" in err and "--address HOST:PORT" in err and "internal error" not in err
    assert cluster[1:] == [] and not db.exists()
    # RAY_ADDRESS=ray://... makes ray.init("auto") a Ray Client too
    monkeypatch.setenv("RAY_ADDRESS", "ray://10.0.0.1:10001")
    code, _, err = cli("launch", toml, "--address", "auto", "--storage", f"sqlite:///{db}")
    assert code == 2 and "RAY_ADDRESS=ray://10.0.0.1:10001" in err and "Ray Client" in err
    assert len(err.strip().splitlines()) == 1
    assert cluster[1:] == [] and not db.exists()
    # and should ray.init still take an address for a Ray Client's: one line, not an internal
    # error
    with pytest.raises(RayConnectError) as e:
        launch._start_ray("10.0.0.1:6379", 0, 0.0)
    assert "\n" not in str(e.value) and "Ray Client" in str(e.value)


def test_rays_error_is_quoted_up_to_a_sentence_or_word_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hint cut Ray's authentication error at 300 characters, mid-word ("use `ray
    get-auth"): it quotes the first sentences that fit, else the first words and "..."."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t")
    hint = _connect_hint("10.0.0.1:6379", ray.exceptions.AuthenticationError(NO_TOKEN))
    first = hint.splitlines()[0]
    assert first.endswith("as the `RAY_AUTH_TOKEN` environment variable."), first
    assert "get-auth" not in first
    from sweeper.run.launch import _clip

    words = " ".join(f"word{i}" for i in range(100))  # (one sentence longer than the limit)
    clipped = _clip(words, 100)
    assert clipped.endswith("...") and len(clipped) <= 100
    assert clipped[:-3].split(" ")[-1] in words.split(" ")  # (a whole word before "...")
    assert _clip("Short.", 100) == "Short."


def test_a_join_error_that_is_not_the_joins_is_not_blamed_on_the_token(
    cluster: list[Any], sqlite_url: str
) -> None:
    """ray.init's ValueErrors other than Ray Client's (a runtime_env package too big) had been
    caught as a failed join and given the token hint; they are raised as they are. RAY_ADDRESS
    holding an http:// URL (Ray Jobs' dashboard) is not called a Ray Client address."""
    cluster[0] = lambda: ValueError("Package size (612.00MiB) exceeds the maximum size of 512MiB")
    with pytest.raises(ValueError, match="Package size"):
        launch_study(study("big"), url=sqlite_url, address="10.0.0.1:6379", progress=False)
    from sweeper.run.launch import check_address

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
        with pytest.raises(RayConnectError, match=r"is a URL .* not the head's GCS HOST:PORT"):
            check_address("auto")

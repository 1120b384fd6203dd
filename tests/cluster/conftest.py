"""The multi-node suite's cluster: three Ray nodes on this machine (``cluster_server.py``), all on
loopback addresses, with token authentication (a token of its own in a file of the test's, named
by ``RAY_AUTH_TOKEN_PATH``, as docs/CLUSTER.md tells a user to set it up)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent

#: head (no CPU) on 127.0.0.1; node "a" has 1 CPU, node "b" 2
NODES = {"a": ("127.0.0.2", 1), "b": ("127.0.0.3", 2)}


@dataclass
class RayCluster:
    address: str
    nodes: dict[str, dict[str, Any]]
    env: dict[str, str]  # what a driver needs: the token, and nothing of the test's Ray
    proc: subprocess.Popen[str] = field(repr=False)

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def ip(self, name: str) -> str:
        return NODES[name][0]


def _token() -> str:
    from ray._private.authentication.authentication_token_generator import (
        generate_new_authentication_token,
    )

    return generate_new_authentication_token()


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[RayCluster]:
    temp = Path(tempfile.mkdtemp(prefix="swc", dir="/tmp"))  # short: Ray's socket paths
    token = temp / "auth_token"
    token.write_text(_token())
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token), RAY_TMPDIR=str(temp))
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "cluster_server.py"), str(temp / "ray"),
         *(f"{n}={ip}:{cpus}" for n, (ip, cpus) in NODES.items())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=(temp / "server.err").open("w"), text=True,
        env=env, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first:
            pytest.fail(
                f"the test cluster did not start: {(temp / 'server.err').read_text()[-3000:]}"
            )
        info = json.loads(first)
        yield RayCluster(info["address"], info["nodes"], env, proc)
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.write("quit\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
        from tests.sweeper.run.test_launch import _session_pids

        for pid in _session_pids(proc.pid):  # only the session this fixture started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        import shutil

        shutil.rmtree(temp, ignore_errors=True)

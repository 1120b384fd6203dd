"""A local launch opens no port to the network: every listener of its processes (driver, GCS,
raylet, runtime-env agent, workers) is on the loopback interface, measured with ``ss -ltnp``. (The
launch runs with ``-v``, which must not print one "Could not fetch metrics" line per trial.)"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sweeper.run.test_launch import _count_complete, _session_pids, tiny


def listeners(pids: set[int]) -> list[tuple[str, str]]:
    """(address:port, process name) of every TCP listener that belongs to ``pids``."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 6:
            continue
        for item in cols[5].split("),("):
            name = item.split('"')[1] if '"' in item else "?"
            pid = item.split("pid=")[1].split(",")[0] if "pid=" in item else ""
            if pid.isdigit() and int(pid) in pids:
                found.append((cols[3], name))
    return found


def is_loopback(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]")
    if host.startswith("::ffff:"):
        host = host.removeprefix("::ffff:")
    if host in ("*", "0.0.0.0", "::"):
        return False
    return ipaddress.ip_address(host).is_loopback


@pytest.mark.drivers
@pytest.mark.skipif(shutil.which("ss") is None, reason="needs `ss` (iproute2)")
def test_a_local_launch_listens_on_loopback_only(tmp_path: Path) -> None:
    from sweeper.study.study_toml import study_toml

    spec = tiny("loop", trials=3, tokens=65536)
    path = tmp_path / "loop.toml"
    path.write_text(study_toml(spec))
    db = tmp_path / "loop.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", "-v", "launch", str(path), "--storage",
         f"sqlite:///{db}", "--no-progress"],
        cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    seen: dict[tuple[str, str], None] = {}
    try:
        deadline = time.time() + 240
        while _count_complete(db) < 2 and proc.poll() is None:
            assert time.time() < deadline, "no trial completed in time"
            for item in listeners(set(_session_pids(proc.pid))):
                seen[item] = None
            time.sleep(0.2)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        # -v: Sweeper's and Ray's warnings, not Tune's complaint about result files per trial
        assert "Could not fetch metrics" not in err, err[-3000:]
    finally:
        for pid in _session_pids(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    names = {n for _, n in seen}
    print("listeners of the launch:", sorted(seen))
    # the launch's own processes were measured: Ray's servers and at least one worker
    assert {"gcs_server", "raylet"} <= names and any(n.startswith("ray::") for n in names), names
    outward = [(a, n) for a, n in seen if not is_loopback(a)]
    assert outward == [], f"listeners on a non-loopback address: {outward}"

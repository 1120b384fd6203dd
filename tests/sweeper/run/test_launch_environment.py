"""What a launch finds around it: a Ray the user started (``ray.init`` in a notebook, without
the runtime_env that ships the user's modules: every run had failed with ModuleNotFoundError,
now refused before any trial), code defined in ``__main__``, and the Tune folders of drivers that
were killed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

STUDY = """\
[sweep]
name = "shipped"
trials_per_cell = 1

[model]
context = 32
head_dim = 16
builder = "shipme_q:build"

[ladder]
widths = [16]
depths = [1]
tokens = [4096]

[search]
lr = { values = [3e-3] }
batch_size = 8

[sampler]
kind = "grid"
"""

DRIVER = """\
import sys, ray, sweeper
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
try:
    sweeper.launch(sys.argv[1], storage=sys.argv[2], progress=False)
except sweeper.SweeperError as e:
    print("REFUSED:", e)
"""


def test_a_ray_started_without_the_users_code_is_refused_before_any_trial(tmp_path: Path) -> None:
    proj, nb = tmp_path / "proj", tmp_path / "nb"
    proj.mkdir()
    nb.mkdir()
    (proj / "shipme_q.py").write_text("from tests.own_builders import tiny as build\n")
    (proj / "study.toml").write_text(STUDY)
    db = f"sqlite:///{tmp_path / 's.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # (tests.own_builders; not the study's folder)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DRIVER), str(proj / "study.toml"), db],
        cwd=nb, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "REFUSED: Ray was started before the launch" in out.stdout, out.stdout + out.stderr
    assert "cannot import shipme_q" in out.stdout and "runtime_env={'py_modules': [" in out.stdout


def test_a_function_of_a_notebook_cell_is_refused_saying_where_code_must_live() -> None:
    """``function = "__main__:my_train"`` (a notebook cell's function) was refused as 'module
    not found here', which did not say why or what to do."""
    import pytest

    from sweeper.errors import StudyError
    from sweeper.run.launch import runtime_env_for

    with pytest.raises(StudyError, match=r"a function of __main__ .* put it in a \.py file"):
        runtime_env_for(["__main__:my_train"], [])


def test_a_killed_drivers_tune_folder_is_removed_by_the_next_launch(
    tmp_path: Path, monkeypatch
) -> None:
    """A driver killed with SIGKILL skips its cleanup: its sweeper-ray-* folder stayed in the
    temp dir for good (a cluster audit). The next launch removes the folders of dead drivers."""
    import tempfile

    from sweeper.run import launch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    owner = launch._ray_dir_owner()
    dead = tmp_path / f"{owner}{gone.stdout.strip()}-abc"
    mine = tmp_path / f"{owner}{os.getpid()}-def"
    other = tmp_path / "sweeper-ray-notapid"
    # another host's driver, sharing the temp dir: its pid means nothing here
    elsewhere = tmp_path / f"sweeper-ray-otherhost-{os.getuid()}-{gone.stdout.strip()}-ghi"
    for d in (dead, mine, other, elsewhere):
        (d / "experiment").mkdir(parents=True)
    launch._remove_orphaned_ray_dirs()
    assert not dead.exists() and mine.exists() and other.exists() and elsewhere.exists()

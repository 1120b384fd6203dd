"""The input's failures are one line and exit 2, not "internal error" and exit 1 (a robustness
audit: eight verbs failed so on an output path, a read-only storage or a binary study file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper import cli
from sweeper.cli import _user_error
from tests.sweeper.helpers import LAUNCHED_STUDY, launch_fake


def test_an_output_path_that_cannot_be_written_is_one_line(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    launch_fake(LAUNCHED_STUDY, sqlite_url)
    (tmp_path / "adir").mkdir()
    for out in (tmp_path / "missing" / "t.csv", tmp_path / "adir"):
        code = cli.main(["trials", "launched", "-o", str(out), "--storage", sqlite_url])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("sweeper: error: ") and "internal" not in err, err
        assert len(err.strip().splitlines()) == 1


def test_a_study_file_that_is_not_text_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bin.toml").write_bytes(bytes(range(128, 256)))
    assert cli.main(["validate", str(tmp_path / "bin.toml")]) == 2
    assert "not UTF-8 text (byte 0): is it a study file?" in capsys.readouterr().err


def test_a_read_only_storage_is_said_so() -> None:
    class OperationalError(Exception):  # (sqlalchemy's, as root cannot make a file read-only)
        pass

    e = OperationalError("(sqlite3.OperationalError) attempt to write a readonly database")
    assert _user_error(e).startswith("the storage is read-only here")
    assert _user_error(ValueError("a bug")) == ""
    assert _user_error(ConnectionResetError(104, "reset")) == ""  # (not the input's)
    assert _user_error(PermissionError(13, "Permission denied", "/x")) == "Permission denied: /x"

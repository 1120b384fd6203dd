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


def test_seeds_counts_and_plot_paths_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fit --seed -1 failed in numpy, coord-check --widths abc / --lr 0 / --steps -1 in the
    model or not at all, validate-transfer --max-concurrent 0 trained, diff --plot p.txt failed
    in matplotlib after the fits (a robustness audit)."""
    from sweeper.cli.own_model import _plot_path
    from sweeper.errors import SweeperError

    for argv in (["fit", "s", "--seed", "-1"], ["diff", "a", "b", "--seed", "x"],
                 ["coord-check", "s.toml", "--widths", "abc"],
                 ["coord-check", "s.toml", "--widths", "0,-1"],
                 ["coord-check", "s.toml", "--lr", "0"], ["coord-check", "s.toml", "--steps", "-1"],
                 ["coord-check", "s.toml", "--batch-size", "0"],
                 ["validate-transfer", "s", "--max-concurrent", "0"]):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2, argv
        assert "error: argument --" in capsys.readouterr().err, argv
    assert _plot_path(str(tmp_path / "pp")) == tmp_path / "pp.png"
    assert _plot_path(str(tmp_path / "p.svg")) == tmp_path / "p.svg"
    for bad in ("p.txt", "missing/p.png", "."):
        with pytest.raises(SweeperError, match="--plot"):
            _plot_path(str(tmp_path / bad))


def test_an_in_memory_storage_and_a_device_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """import --storage sqlite:// said 'imported 3 runs' of runs lost as it returned;
    import /dev/null said 'no such file' (a robustness audit)."""
    (tmp_path / "r.csv").write_text("n_params,tokens,loss\n1e6,1e8,3.1\n")
    for url in ("sqlite://", "sqlite:///"):
        assert cli.main(["import", str(tmp_path / "r.csv"), "--sweep", "m", "--storage", url]) == 2
        assert "in-memory SQLite database keeps nothing" in capsys.readouterr().err
    assert cli.main(["import", "/dev/null", "--sweep", "m", "--storage",
                     f"sqlite:///{tmp_path / 'x.db'}"]) == 2  # fmt: skip
    assert "not a regular file" in capsys.readouterr().err


def test_a_read_only_verb_leaves_another_programs_database_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sweeper status` on a SQLite file of another program's added Sweeper's four tables to it
    (a robustness audit)."""
    import sqlite3

    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table users (id integer)")
    assert cli.main(["status", "--storage", f"sqlite:///{db}"]) == 2
    assert "holds other tables (users) and none of Sweeper's" in capsys.readouterr().err
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
    assert names == ["users"]


def test_fuzzed_inputs_that_crashed_or_misled_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CLI fuzz audit: a binary --study to import was an internal UnicodeDecodeError; diff
    accepted --tokens -1 (and printed a ratio at it); coord-check of one width wrote NaN into
    its JSON and called the result stable."""
    repo = Path(__file__).resolve().parents[2]
    study = tmp_path / "binary.toml"
    study.write_bytes(b"\x80\x81\x82")
    csv = tmp_path / "runs.csv"
    csv.write_text("n_params,tokens,lr,loss\n1e6,1e8,1e-3,3.0\n")
    url = f"sqlite:///{tmp_path / 'a.db'}"
    imported = ["import", str(csv), "--sweep", "x", "--study", str(study), "--storage", url]
    assert cli.main(imported) == 2
    assert "not UTF-8 text (byte 128)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["diff", "a", "b", "--tokens", "-1"])
    assert e.value.code == 2 and "--tokens" in capsys.readouterr().err
    smoke = str(repo / "studies" / "smoke.toml")
    assert cli.main(["coord-check", smoke, "--widths", "32", "--json"]) == 2
    said = capsys.readouterr()
    assert not said.out and "give two or more" in said.err, said


def test_a_read_only_verb_leaves_another_programs_postgres_database_alone(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A storage audit: `sweeper status` on a PostgreSQL database of another program's (one
    mistyped name from it) created Sweeper's tables there, as it had in SQLite files."""
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("create table customers (id integer)"))
    for argv in (["status"], ["laws"], ["trials", "x"], ["fit", "x"]):
        assert cli.main([*argv, "--storage", postgres_url]) == 2, argv
        assert "holds other tables (customers) and none of Sweeper's" in capsys.readouterr().err
    assert sa.inspect(engine).get_table_names() == ["customers"]
    engine.dispose()

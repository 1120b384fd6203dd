"""A SQLite file that does not exist is created only by the verbs that make a sweep (``launch``,
``import``) or write; every verb that reads refuses it in one line (exit 2) and leaves no file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.errors import StorageError
from sweeper.study import storage as st
from tests.sweeper.helpers import cli_fixture, write_csv  # noqa: F401  (the `cli` fixture)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite+pysqlite:///:memory:", None),
        ("sqlite:///file:mem?mode=memory&uri=true", None),
        ("sqlite:///sweeper.db", "sweeper.db"),  # the default: relative to the working directory
        ("sqlite:///sub/s.db", "sub/s.db"),
        ("sqlite:////abs/s.db", "/abs/s.db"),
        ("sqlite+pysqlite:////abs/s.db", "/abs/s.db"),
        ("sqlite:///file:/abs/s.db?uri=true", "/abs/s.db"),
        ("sqlite:///file:///abs/s.db?uri=true", "/abs/s.db"),
        ("postgresql+psycopg://u@localhost/db", None),  # created by its administrator
        ("not a url", None),
    ],
)
def test_the_file_a_url_names(url: str, path: str | None) -> None:
    assert st.sqlite_file(url) == path


def test_in_memory_and_new_databases_open(tmp_path: Path) -> None:
    assert st.list_sweeps("sqlite://") == []  # nothing to find on disk: opened as ever
    url = f"sqlite:///{tmp_path / 'new.db'}"
    with pytest.raises(StorageError, match=r"^no database at .*new\.db: `sweeper launch` or"):
        st.list_sweeps(url)
    assert not (tmp_path / "new.db").exists()
    with st.transaction(url):  # a write creates it
        pass
    assert (tmp_path / "new.db").exists() and st.list_sweeps(url) == []


def _runs_csv(tmp: Path) -> Path:
    df = pd.DataFrame(
        {"n_params": [1e6, 2e6], "tokens": [1e8, 2e8], "loss": [3.1, 2.9], "lr": [1e-3, 2e-3]}
    )
    return write_csv(df, tmp / "runs.csv")


READERS = [
    ["status"], ["status", "qs"], ["status", "--json"], ["trials", "qs"],
    ["fit", "qs", "--no-store"], ["fit", "qs"], ["laws"], ["laws", "qs"], ["laws", "show", "1"],
    ["compare", "qs"], ["recommend", "qs", "--params", "1e9", "--tokens", "2e10"],
    ["check", "qs", "--recipe", "llama2-7b"], ["diff", "qs", "qs"],
]  # fmt: skip


@pytest.mark.parametrize("argv", READERS, ids=" ".join)
def test_a_reading_verb_refuses_a_missing_file_and_creates_none(
    argv: list[str], tmp_path: Path, cli
) -> None:
    db = tmp_path / "typo.db"
    code, out, err = cli(*argv, "--storage", f"sqlite:///{db}")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines == [
        f"sweeper: error: no database at {db}: `sweeper launch` or `sweeper import` creates one "
        "(check --storage or $SWEEPER_STORAGE)"
    ]
    assert not db.exists()


def test_the_default_and_the_environment_storage_too(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SWEEPER_STORAGE", raising=False)
    code, _, err = cli("status")  # sqlite:///sweeper.db, in the working directory
    assert code == 2 and f"no database at {tmp_path / 'sweeper.db'}:" in err
    monkeypatch.setenv("SWEEPER_STORAGE", "sqlite:///env.db")
    code, _, err = cli("laws")
    assert code == 2 and f"no database at {tmp_path / 'env.db'}:" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_import_creates_the_database_then_the_readers_read_it(tmp_path: Path, cli) -> None:
    url = f"sqlite:///{tmp_path / 'made.db'}"
    code, out, err = cli("import", _runs_csv(tmp_path), "--sweep", "s", "--storage", url)
    assert code == 0, err
    code, out, err = cli("status", "--storage", url)
    assert code == 0 and "s " in out and "imported" in out


def test_a_launch_creates_the_database(tmp_path: Path) -> None:
    """A launch's first touch is its lease (then its sweep row, then Optuna's studies)."""
    from sweeper.study.lease import acquire, release

    url = f"sqlite:///{tmp_path / 'launch.db'}"
    lease = acquire("s", url)
    assert (tmp_path / "launch.db").exists()
    release(lease, url)


def test_a_database_in_a_missing_folder_a_bad_port_and_a_unicode_path_are_said_plainly(
    tmp_path: Path, cli
) -> None:
    """A storage audit: import into a folder that does not exist said only SQLite's "unable to
    open database file"; a port 'abc' said "invalid literal for int() with base 10"; a unicode
    path was shown percent-encoded."""
    csv = _runs_csv(tmp_path)
    gone = tmp_path / "nothere" / "x.db"
    code, _, err = cli("import", csv, "--sweep", "s", "--storage", f"sqlite:///{gone}")
    assert code == 2 and f"its folder {gone.parent} does not exist" in err, err
    assert not gone.parent.exists()
    code, _, err = cli("status", "--storage", "postgresql+psycopg://u@127.0.0.1:abc/x")
    assert code == 2 and err.rstrip().endswith("its port is not a number"), err
    where = tmp_path / "dir with spaces" / "ünïcødé 数据"
    where.mkdir(parents=True)
    url = f"sqlite:///{where / 'my db.db'}"
    code, out, err = cli("import", csv, "--sweep", "s", "--storage", url, "--json")
    assert code == 0, err
    assert json.loads(out)["storage"] == url

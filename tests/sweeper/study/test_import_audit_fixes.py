"""A storage audit of `sweeper import`: replacing an imported sweep, another program's database,
string nan/inf in JSON, long names, tab-separated .txt, storage URL hints, readers of an empty
file, and the line of a broken JSON-lines file."""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from sweeper.errors import ImportDataError, StorageError
from sweeper.study import storage
from sweeper.study.importer import import_runs, load_runs, read_runs_file
from tests.sweeper.helpers import cli_fixture, write_csv  # noqa: F401  (the `cli` fixture)


def runs(loss: float = 3.0, batch: int = 32) -> pd.DataFrame:
    """Eight runs over two cells, in Sweeper's column names."""
    return pd.DataFrame(
        {
            "n_params": [1e6] * 4 + [4e6] * 4,
            "tokens": [1e8] * 4 + [4e8] * 4,
            "lr": [1e-3, 2e-3, 4e-3, 8e-3] * 2,
            "batch_size": [batch] * 8,
            "loss": [loss + 0.1 * i for i in range(8)],
        }
    )


def put(url: str, name: str, kind: str = "imported", law_sweep: str | None = None) -> None:
    """A sweep row of ``kind`` (and a law of ``law_sweep``) written as Sweeper writes them."""
    now = datetime.now(timezone.utc)
    with storage.transaction(url) as conn:
        conn.execute(
            storage.sweeps_table.insert().values(
                name=name, kind=kind, spec_hash="", study_toml="", meta_json="{}", created_at=now
            )
        )
        if law_sweep:
            conn.execute(
                storage.laws_table.insert().values(
                    sweep=law_sweep, kind="power", target="lr", payload_json="{}", created_at=now
                )
            )


def n_laws(url: str, sweep: str) -> int:
    t = storage.laws_table
    with storage.get_engine(url).connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).where(t.c.sweep == sweep)).scalar_one())


# --- 1. --replace --------------------------------------------------------------------------------


def test_replace_swaps_an_imported_sweeps_runs_and_drops_its_laws(
    tmp_path: Path, sqlite_url: str, cli, caplog: pytest.LogCaptureFixture
) -> None:
    """An imported sweep could not be imported again (nor deleted): --replace replaces its runs
    and deletes the laws fitted to them, and keeps its transfer checks, saying so."""
    first = write_csv(runs(3.0), tmp_path / "a.csv")
    second = write_csv(runs(2.0), tmp_path / "b.csv")
    assert cli("import", first, "--sweep", "s", "--storage", sqlite_url)[0] == 0
    put(sqlite_url, "s.transfer.c1", kind="launched", law_sweep="s")
    code, _, err = cli("import", second, "--sweep", "s", "--storage", sqlite_url)
    assert code == 2 and "give --replace" in err, err
    assert load_runs("s", sqlite_url)["loss"].min() == pytest.approx(3.0)
    code, out, err = cli("import", second, "--sweep", "s", "--storage", sqlite_url, "--replace")
    assert code == 0 and "imported 8 runs (2 cells) into sweep 's'" in out, err
    assert load_runs("s", sqlite_url)["loss"].min() == pytest.approx(2.0)
    assert n_laws(sqlite_url, "s") == 0
    assert storage.get_sweep("s.transfer.c1", sqlite_url) is not None
    # a join's laws were fitted on its old runs too; another sweep's are kept (a review)
    put(sqlite_url, "t", law_sweep="s+t")
    put(sqlite_url, "s2", law_sweep="s2+t")
    cli("import", first, "--sweep", "s", "--storage", sqlite_url, "--replace")
    assert (n_laws(sqlite_url, "s+t"), n_laws(sqlite_url, "s2+t")) == (0, 1)
    assert "1 transfer check(s) (s.transfer.*) are kept" in caplog.text


def test_replace_with_a_bad_file_keeps_the_old_sweep(tmp_path: Path, sqlite_url: str) -> None:
    """The file is read and checked before the old sweep is deleted."""
    import_runs(write_csv(runs(3.0), tmp_path / "a.csv"), sweep="s", url=sqlite_url)
    put(sqlite_url, "other", law_sweep="s")
    bad = tmp_path / "bad.csv"
    bad.write_text("n_params,tokens,loss\n1e6,1e8,oops\n")
    with pytest.raises(ImportDataError, match="non-numeric"):
        import_runs(bad, sweep="s", url=sqlite_url, replace=True)
    assert len(load_runs("s", sqlite_url)) == 8 and n_laws(sqlite_url, "s") == 1


def test_replace_refuses_a_launched_sweep(tmp_path: Path, sqlite_url: str) -> None:
    put(sqlite_url, "launched", kind="launched")
    path = write_csv(runs(), tmp_path / "a.csv")
    with pytest.raises(ImportDataError, match=r"replaces only an imported sweep.*--force-new"):
        import_runs(path, sweep="launched", url=sqlite_url, replace=True)
    with pytest.raises(ImportDataError) as e:
        import_runs(path, sweep="launched", url=sqlite_url)
    assert "already exists (launched)" in str(e.value) and "--replace" not in str(e.value)
    assert storage.get_sweep("launched", sqlite_url)["kind"] == "launched"  # type: ignore[index]


def test_replace_through_the_api(tmp_path: Path, sqlite_url: str) -> None:
    import sweeper

    sweeper.import_runs(write_csv(runs(3.0), tmp_path / "a.csv"), sweep="s", storage=sqlite_url)
    sw = sweeper.import_runs(
        write_csv(runs(2.0), tmp_path / "b.csv"), sweep="s", storage=sqlite_url, replace=True
    )
    assert sw.runs()["loss"].min() == pytest.approx(2.0)


def test_the_batch_unit_notes_say_how_to_import_again(
    tmp_path: Path, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The notes are said after the runs are written: they name --replace, to redo it."""
    df = runs(batch=2048).assign(tokens=3e4, seq_len=1)  # 15 steps of 2048 tokens
    with caplog.at_level(logging.WARNING):
        import_runs(write_csv(df, tmp_path / "a.csv"), sweep="s", url=sqlite_url)
    assert "is the batch already in tokens?" in caplog.text
    assert "without --seq-len, with --replace" in caplog.text


# --- 2. another program's database --------------------------------------------------------------


def test_import_refuses_another_programs_database(tmp_path: Path, cli) -> None:
    """`status` refused a database of other tables, `import` wrote Sweeper's into it."""
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table users (id integer)")
    path = write_csv(runs(), tmp_path / "a.csv")
    code, _, err = cli("import", path, "--sweep", "s", "--storage", f"sqlite:///{db}")
    assert code == 2 and "holds other tables (users) and none of Sweeper's" in err, err
    assert "another database or SQLite file" in err
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
    assert names == ["users"]


def test_import_may_share_a_database_of_optuna_studies(tmp_path: Path) -> None:
    """A launch keeps Sweeper's tables beside Optuna's: Optuna's alone are no other program's."""
    from optuna.storages import RDBStorage

    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    RDBStorage(url).remove_session()
    assert import_runs(write_csv(runs(), tmp_path / "a.csv"), sweep="s", url=url) == 8


# --- 3. string nan/inf in JSON ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["inf", "Infinity", "NaN", "nan", " -inf "])
def test_a_json_string_nan_or_inf_loss_marks_a_diverged_run(tmp_path: Path, text: str) -> None:
    rows = runs().to_dict(orient="records")
    rows[3]["loss"] = text
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    df = read_runs_file(path)
    assert df["diverged"].tolist() == [False] * 3 + [True] + [False] * 4
    assert pd.isna(df["loss"].iloc[3]) and df.attrs["diverged_from_loss"] == 1


# --- 4. long names ------------------------------------------------------------------------------


def test_a_sweep_name_longer_than_the_column_is_refused(tmp_path: Path, sqlite_url: str) -> None:
    """PostgreSQL's String(255) refused 256 with an internal error (SQLite took it); the limit
    leaves room for a transfer check's ``.transfer.<cell>`` (spec.MAX_SWEEP_NAME, launch's too)."""
    path = write_csv(runs(), tmp_path / "a.csv")
    with pytest.raises(ImportDataError, match="161 characters long, more than the 160 a storage"):
        import_runs(path, sweep="a" * 161, url=sqlite_url)
    assert import_runs(path, sweep="a" * 160, url=sqlite_url) == 8


# --- 5. tab-separated .txt ----------------------------------------------------------------------


def test_a_tab_separated_txt_is_read_by_its_tabs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.txt"
    runs().to_csv(path, sep="\t", index=False)
    with caplog.at_level(logging.WARNING):
        df = read_runs_file(path)
    assert len(df) == 8 and df["loss"].iloc[0] == pytest.approx(3.0)
    assert "runs.txt: read as tab-separated" in caplog.text


# --- 6. storage URLs ----------------------------------------------------------------------------


def test_a_psycopg2_url_names_the_driver_that_is_installed(cli) -> None:
    """psycopg2 (not installed) said only "No module named 'psycopg2'"."""
    code, _, err = cli("status", "--storage", "postgresql+psycopg2://u@localhost/x")
    assert code == 2 and "postgresql+psycopg:// or postgresql:// uses psycopg 3" in err, err


def test_a_bare_path_as_the_storage_url_is_shown_as_sqlites(cli) -> None:
    code, _, err = cli("status", "--storage", "x.db")
    assert code == 2 and "a SQLite file is written sqlite:///x.db" in err, err


def test_an_empty_storage_url_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """`--storage ''` meant ./sweeper.db in silence; an empty $SWEEPER_STORAGE is still unset."""
    monkeypatch.chdir(tmp_path)
    path = write_csv(runs(), tmp_path / "a.csv")
    code, _, err = cli("import", path, "--sweep", "s", "--storage", "")
    assert code == 2 and "the storage URL is empty" in err, err
    assert not (tmp_path / "sweeper.db").exists()
    with pytest.raises(StorageError, match="the storage URL is empty"):
        storage.get_engine(" ")
    monkeypatch.setenv("SWEEPER_STORAGE", "")
    assert storage.resolve_url(None) == storage.DEFAULT_URL


# --- 7. readers of an empty file ----------------------------------------------------------------


@pytest.mark.parametrize("verb", [["laws"], ["status"], ["status", "s"], ["trials", "s"]])
def test_a_reader_leaves_an_empty_file_empty(tmp_path: Path, verb: list[str], cli) -> None:
    """`laws`, `status` on a 0-byte file wrote Sweeper's tables into it (36,864 bytes)."""
    db = tmp_path / "empty.db"
    db.touch()
    code, _, err = cli(*verb, "--storage", f"sqlite:///{db}")
    assert code == 2 and "no Sweeper storage in" in err and "holds no tables" in err, err
    assert db.stat().st_size == 0


def test_a_writer_may_fill_an_empty_file(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    assert import_runs(write_csv(runs(), tmp_path / "a.csv"), sweep="s", url=f"sqlite:///{db}")


# --- 8. JSON lines ------------------------------------------------------------------------------


def test_a_broken_json_line_is_named_by_the_files_line(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in runs().to_dict(orient="records")]
    lines.insert(2, "")  # (a blank line counts)
    lines[5] = lines[5][:-1] + ', "x": }'
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(ImportDataError, match=r"r\.jsonl: cannot read: line 6 column \d+: "):
        read_runs_file(path)


def test_a_long_name_and_another_programs_tables_on_postgres(
    tmp_path: Path, postgres_url: str
) -> None:
    """A 256-character name was an internal error there (String(255)); `import` wrote Sweeper's
    tables beside another program's."""
    path = write_csv(runs(), tmp_path / "a.csv")
    with pytest.raises(ImportDataError, match="more than the 160 a storage"):
        import_runs(path, sweep="a" * 256, url=postgres_url)
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("create table customers (id integer)"))
    with pytest.raises(StorageError, match=r"holds other tables \(customers\)"):
        import_runs(path, sweep="s", url=postgres_url)
    assert sa.inspect(engine).get_table_names() == ["customers"]
    engine.dispose()


def test_launch_refuses_an_empty_storage_url() -> None:
    """`launch --storage ''` resolved its URL itself and fell back to ./sweeper.db in silence,
    where every other verb now refuses the empty URL (an audit)."""
    from sweeper.run.launch import resolve_storage
    from sweeper.study.spec import load_study

    spec = load_study(Path(__file__).parents[3] / "studies" / "smoke.toml")
    with pytest.raises(StorageError, match="the storage URL is empty"):
        resolve_storage(spec, "")
    assert resolve_storage(spec, "sqlite:///x.db") == "sqlite:///x.db"


def test_a_run_without_seq_len_neither_hides_the_context_nor_refuses_a_join(
    tmp_path: Path, sqlite_url: str
) -> None:
    """One blank ``seq_len`` (a failed row's) had dropped the sweep's recorded context, so its
    join with the other half of the same runs was refused as another study (a review)."""
    from sweeper import api
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.study.handle import Sweep

    data = pd.read_csv(Path(__file__).parents[3] / "docs" / "data" / "quickstart.csv")
    half = len(data) // 2
    first = data.iloc[:half].copy()
    first.loc[first.index[0], "seq_len"] = None
    import_runs(write_csv(first, tmp_path / "a.csv"), sweep="a", url=sqlite_url)
    import_runs(write_csv(data.iloc[half:], tmp_path / "b.csv"), sweep="b", url=sqlite_url)
    conv = sweep_conventions(Sweep.load("a", sqlite_url))
    assert conv.held["seq_len"] == (128.0, 128.0)
    (law,) = api.fit("a+b", method="parabola", target="lr", storage=sqlite_url)
    assert law.conventions.held["seq_len"] == (128.0, 128.0)


def test_a_joined_name_longer_than_the_storage_keeps_is_refused() -> None:
    """``fit a+b`` stores its laws under the joined name: two 130-character names made a
    261-character key, an internal error on PostgreSQL (a review)."""
    from sweeper.api import _joined_names

    with pytest.raises(StorageError, match="the joined name is 261 characters long"):
        _joined_names("a" * 130 + "+" + "b" * 130)
    assert _joined_names("a+b") == ["a", "b"]

"""Importing runs from CSV/parquet: validation, renames, storage in one transaction, load_runs."""

from __future__ import annotations

import json
import sys
import types
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from sweeper.errors import ImportDataError, StorageError
from sweeper.study import storage
from sweeper.study.importer import import_runs, load_runs, read_runs_file, validated_runs
from sweeper.study.runs import COLUMNS
from tests.sweeper.helpers import cli_fixture, write_csv  # noqa: F401  (the `cli` fixture)


def small_runs() -> pd.DataFrame:
    """Six runs over two cells in someone else's column names, with an extra column."""
    return pd.DataFrame(
        {
            "N": [1e6, 1e6, 1e6, 4e6, 4e6, 4e6],
            "D": [1e8] * 3 + [4e8] * 3,
            "lr": [1e-3, 2e-3, 4e-3, 1e-3, 2e-3, 4e-3],
            "bs": [32, 32, 32, 64, 64, 64],
            "final": [3.1, 3.0, 3.2, 2.9, 2.8, 2.95],
            "run_name": [f"r{i}" for i in range(6)],
        }
    )


RENAMES = {"N": "n_params", "D": "tokens", "bs": "batch_size", "final": "loss"}


def counts(url: str) -> tuple[int, int]:
    if storage.missing_database(url):  # a refused import leaves no database behind at all
        return 0, 0
    with storage.get_engine(url).connect() as conn:
        n_sweeps = conn.execute(sa.select(sa.func.count()).select_from(storage.sweeps_table))
        n_runs = conn.execute(sa.select(sa.func.count()).select_from(storage.runs_table))
        return int(n_sweeps.scalar_one()), int(n_runs.scalar_one())


def test_import_and_load(tmp_path: Path, sqlite_url: str) -> None:
    path = write_csv(small_runs(), tmp_path / "runs.csv")
    n = import_runs(path, sweep="ext", renames=RENAMES, seq_len=1024, url=sqlite_url)
    assert n == 6
    row = storage.get_sweep("ext", sqlite_url)
    assert row is not None and row["kind"] == "imported"
    meta = row["meta"]
    assert meta["file"] == "runs.csv" and meta["renames"] == RENAMES and meta["seq_len"] == 1024
    assert meta["n_rows"] == 6 and "run_name" in meta["columns"] and len(meta["sha256"]) == 64
    runs = load_runs("ext", sqlite_url)
    assert list(runs.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert runs["run_name"].tolist() == [f"r{i}" for i in range(6)]  # unknown columns kept
    assert runs["batch_tokens"].tolist() == [32 * 1024.0] * 3 + [64 * 1024.0] * 3
    assert runs["cell"].nunique() == 2 and (runs["state"] == "COMPLETE").all()
    assert runs["source"].iloc[0] == "import:runs.csv"
    assert counts(sqlite_url) == (1, 6)


def test_renames_are_simultaneous(tmp_path: Path) -> None:
    df = small_runs().rename(columns={"final": "smooth"}).assign(loss=9.0)
    path = write_csv(df, tmp_path / "swap.csv")
    renames = {"N": "n_params", "D": "tokens", "loss": "raw_loss", "smooth": "loss"}
    runs = read_runs_file(path, renames=renames)
    assert runs["loss"].tolist() == small_runs()["final"].tolist()
    assert (runs["raw_loss"] == 9.0).all()


def test_loss_law_columns_are_enough_and_parquet(tmp_path: Path, sqlite_url: str) -> None:
    df = pd.DataFrame({"n_params": [1e6, 4e6], "tokens": [1e8, 1e8], "loss": [3.0, 2.8]})
    path = tmp_path / "points.parquet"
    df.to_parquet(path)
    assert import_runs(path, sweep="pts", url=sqlite_url) == 2
    runs = load_runs("pts", sqlite_url)
    assert runs["lr"].isna().all() and runs["loss"].tolist() == [3.0, 2.8]


def test_diverged_runs_may_lack_a_loss(tmp_path: Path) -> None:
    df = small_runs().assign(diverged=["no", "no", "yes", "no", "no", "no"])
    df["final"] = df["final"].astype(object)
    df.loc[2, "final"] = None
    runs = read_runs_file(write_csv(df, tmp_path / "div.csv"), renames=RENAMES)
    assert runs["diverged"].tolist() == [False, False, True, False, False, False]
    assert pd.isna(runs.loc[2, "loss"])


# every bad file: exit 2, one line on stderr, nothing stored
BAD_FILES = {
    "missing column": (
        lambda df: df.drop(columns=["tokens"]),
        "missing required column(s) tokens",
    ),
    # (an import audit: a user's own sweeps log width and depth, not N; say how to get it)
    "N from the shape": (
        lambda df: df.drop(columns=["n_params"]).assign(width=64, depth=2),
        "non-embedding N is about 12·depth·width², but count your model's own",
    ),
    "non-numeric": (
        lambda df: df.assign(lr=["1e-3", "fast", "4e-3", "1e-3", "2e-3", "4e-3"]),
        "column 'lr' has a non-numeric value 'fast' in row 2",
    ),
    "non-positive": (
        lambda df: df.assign(loss=[3.1, 3.0, -1.0, 2.9, 2.8, 2.95]),
        "column 'loss' must be > 0 and finite, got -1 in row 3",
    ),
    "zero batch": (
        lambda df: df.assign(batch_size=[32, 0, 32, 64, 64, 64]),
        "column 'batch_size' must be > 0",
    ),
    "empty loss": (
        lambda df: df.assign(loss=[3.1, None, 3.2, 2.9, 2.8, 2.95]),
        "column 'loss' is empty or NaN in row 2",
    ),
    "bad state": (lambda df: df.assign(state="DONE"), "column 'state' has 'DONE' in row 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_exit_2_one_line_nothing_stored(
    case: str, tmp_path: Path, sqlite_url: str, cli
) -> None:
    make, message = BAD_FILES[case]
    path = write_csv(make(small_runs().rename(columns=RENAMES)), tmp_path / "bad.csv")
    code, out, err = cli("import", path, "--sweep", "bad", "--storage", sqlite_url)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: bad.csv: "), lines
    assert message in lines[0]
    assert counts(sqlite_url) == (0, 0)


def test_duplicate_sweep_exit_2_nothing_stored(tmp_path: Path, sqlite_url: str, cli) -> None:
    path = write_csv(small_runs(), tmp_path / "runs.csv")
    renames = [a for old, new in RENAMES.items() for a in ("--rename", f"{old}={new}")]
    args = ("import", path, "--sweep", "dup", *renames, "--storage", sqlite_url)
    code, out, err = cli(*args)
    assert code == 0 and "imported 6 runs (2 cells) into sweep 'dup'" in out
    code, out, err = cli(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "sweep 'dup' already exists" in lines[0]
    assert counts(sqlite_url) == (1, 6)


def test_other_bad_inputs(tmp_path: Path, sqlite_url: str) -> None:
    path = write_csv(small_runs(), tmp_path / "runs.csv")
    with pytest.raises(ImportDataError, match="cannot rename missing column"):
        read_runs_file(path, renames={"nope": "n_params"})
    with pytest.raises(ImportDataError, match="duplicate column"):
        read_runs_file(path, renames={**RENAMES, "lr": "loss"})
    with pytest.raises(ImportDataError, match="no such file"):
        read_runs_file(tmp_path / "absent.csv")
    (tmp_path / "runs.yaml").write_text("{}")
    with pytest.raises(ImportDataError, match="unknown file type"):
        read_runs_file(tmp_path / "runs.yaml")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ImportDataError, match="cannot read"):
        read_runs_file(tmp_path / "empty.csv")
    assert counts(sqlite_url) == (0, 0)


def test_load_unknown_sweep_lists_known(tmp_path: Path, sqlite_url: str) -> None:
    with pytest.raises(StorageError, match=r"no database at .*sweeper\.db: `sweeper launch` or"):
        load_runs("nope", sqlite_url)
    storage.get_engine(sqlite_url, new=True)  # an empty database
    with pytest.raises(StorageError, match="holds no sweeps"):
        load_runs("nope", sqlite_url)
    import_runs(
        write_csv(small_runs(), tmp_path / "r.csv"), sweep="a", renames=RENAMES, url=sqlite_url
    )
    with pytest.raises(StorageError, match="known sweeps: a"):
        load_runs("nope", sqlite_url)


def test_launched_sweeps_come_from_sweeper_sweep(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kind "launched" reads through sweeper.study.sweep_runs.load_sweep_runs (imported lazily)."""
    calls = []

    def fake_load(name: str, url: str | None = None) -> pd.DataFrame:
        calls.append((name, url))
        return pd.DataFrame({"n_params": [1e6], "tokens": [1e8], "lr": [1e-3], "loss": [3.0]})

    monkeypatch.setitem(
        sys.modules, "sweeper.study.sweep_runs", types.SimpleNamespace(load_sweep_runs=fake_load)
    )
    with storage.transaction(sqlite_url) as conn:
        conn.execute(
            storage.sweeps_table.insert().values(
                name="launched1",
                kind="launched",
                spec_hash="x",
                study_toml="",
                meta_json=json.dumps({"parametrization": "sp"}),
                created_at=datetime.now(timezone.utc),
            )
        )
    runs = load_runs("launched1", sqlite_url)
    assert calls == [("launched1", sqlite_url)]
    assert (
        list(runs.columns[: len(COLUMNS)]) == list(COLUMNS)
        and runs["cell"].iloc[0] == "N1e06-D1e08"
    )


def test_a_nan_or_inf_loss_imports_as_a_diverged_run(tmp_path: Path, sqlite_url: str, cli) -> None:
    """Without a diverged/state column, the file's nan/inf loss marks a diverged run (counted);
    an empty loss stays an error naming its row; an explicit column wins."""
    path = tmp_path / "published.csv"
    path.write_text(
        "N,D,lr,loss\n1e6,1e8,1e-3,3.1\n1e6,1e8,2e-3,nan\n1e6,1e8,4e-3,inf\n1e6,1e8,8e-3,3.3\n"
    )
    code, out, err = cli("import", path, "--sweep", "pub", "--rename", "N=n_params",
                         "--rename", "D=tokens", "--storage", sqlite_url)  # fmt: skip
    assert code == 0, err
    assert "imported 4 runs" in out and "2 with a nan/inf loss imported as diverged" in out
    runs = load_runs("pub", sqlite_url)
    assert runs["diverged"].tolist() == [False, True, True, False]
    assert runs["loss"].isna().tolist() == [False, True, True, False]
    assert storage.get_sweep("pub", sqlite_url)["meta"]["diverged_from_loss"] == 2
    # an empty loss is not a diverged run: an error naming the row
    (tmp_path / "blank.csv").write_text("n_params,tokens,loss\n1e6,1e8,3.1\n1e6,1e8,\n")
    with pytest.raises(ImportDataError, match="column 'loss' is empty or NaN in row 2"):
        read_runs_file(tmp_path / "blank.csv")
    # an explicit column wins: a nan loss on a run marked not diverged is refused
    (tmp_path / "marked.csv").write_text(
        "n_params,tokens,loss,diverged\n1e6,1e8,3.1,false\n1e6,1e8,nan,false\n"
    )
    with pytest.raises(ImportDataError, match="column 'loss' is empty or NaN in row 2"):
        read_runs_file(tmp_path / "marked.csv")
    # a state column says whether a run finished, not whether it diverged: a finished run with
    # a nan/inf loss diverged (a W&B export's "finished", "NaN" had been refused as empty)
    (tmp_path / "state.csv").write_text(
        "n_params,tokens,loss,state\n1e6,1e8,3.1,COMPLETE\n1e6,1e8,inf,COMPLETE\n"
        "1e6,1e8,NaN,finished\n1e6,1e8,nan,crashed\n"
    )
    marked = read_runs_file(tmp_path / "state.csv")
    assert marked["diverged"].tolist() == [False, True, True, False]
    assert marked["state"].tolist() == ["COMPLETE", "COMPLETE", "COMPLETE", "FAIL"]
    assert marked.attrs["diverged_from_loss"] == 2
    # parquet: an infinite loss is a diverged run too
    pd.DataFrame(
        {"n_params": [1e6, 1e6], "tokens": [1e8, 1e8], "loss": [3.1, float("inf")]}
    ).to_parquet(tmp_path / "p.parquet")
    got = read_runs_file(tmp_path / "p.parquet")
    assert got["diverged"].tolist() == [False, True] and got.attrs["diverged_from_loss"] == 1


@pytest.mark.parametrize(
    "name", ["a/b", "q'uote", '"dq"', "<script>", "sweep/w16-d1-t16.4k", " x", ".x"]
)
def test_import_takes_only_names_launch_takes(
    name: str, tmp_path: Path, sqlite_url: str, cli
) -> None:
    path = write_csv(small_runs().rename(columns=RENAMES), tmp_path / "runs.csv")
    code, _, err = cli("import", path, "--sweep", name, "--storage", sqlite_url)
    assert code == 2 and "must be letters, digits" in err, err
    assert counts(sqlite_url) == (0, 0)


def test_a_trials_csv_imports_with_its_study(tmp_path: Path, sqlite_url: str) -> None:
    """`sweeper trials -o` output round-trips: a FAIL row without a loss is kept (not an error),
    and the study stored with the runs makes the sweep trainable again (Sweep.spec)."""
    from sweeper.study.handle import Sweep

    repo = Path(__file__).resolve().parents[3]
    runs = pd.DataFrame(
        {
            "cell": ["w16-d2-t32.8k"] * 3,
            "width": [16] * 3,
            "depth": [2] * 3,
            "n_params": [6224.0] * 3,
            "tokens": [32768.0] * 3,
            "lr": [1e-3, 2e-3, 4e-3],
            "batch_size": [8] * 3,
            "seq_len": [64] * 3,
            "loss": [3.1, None, 3.0],
            "state": ["COMPLETE", "FAIL", "COMPLETE"],
            "diverged": [False] * 3,
        }
    )
    path = write_csv(runs, tmp_path / "trials.csv")
    assert import_runs(path, sweep="smk", url=sqlite_url, study=repo / "studies/smoke.toml") == 3
    sw = Sweep.load("smk", sqlite_url)
    assert sw.kind == "imported" and sw.spec is not None and sw.spec.sweep.name == "smoke"
    assert sw.runs()["state"].tolist() == ["COMPLETE", "FAIL", "COMPLETE"]
    # its laws' conventions come from the study, as for the launched sweep
    from sweeper.fitting.provenance import sweep_conventions

    conv = sweep_conventions(sw)
    assert conv.schedule == sw.spec.train.schedule and conv.parametrization == "sp"
    assert conv.data == "builtin" and "as imported" not in conv.lr
    # a study whose ladder lacks the runs' cells is refused, nothing stored
    with pytest.raises(ImportDataError, match=r"--study .*no cell w16-d2-t32.8k"):
        import_runs(path, sweep="q", url=sqlite_url, study=repo / "studies/quickstart.toml")
    assert storage.get_sweep("q", sqlite_url) is None


@pytest.mark.parametrize(("column", "recorded"), [(["mup"] * 4, "mup"), (["sp", "mup"] * 2, None)])
def test_the_runs_parametrization_column_reaches_the_law(
    tmp_path: Path, sqlite_url: str, column: list[str], recorded: str | None
) -> None:
    """docs/data/batch_ladder.csv names sp on every row, yet `check` warned "records no
    parametrization: assumed sp": a file imported without its study now carries its runs' own
    parametrization when every run names the same one (a mixed column says nothing)."""
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.study.handle import Sweep

    rows = pd.DataFrame(
        {"n_params": [1e6, 1e6, 4e6, 4e6], "tokens": 1e8, "lr": [1e-3, 2e-3] * 2,
         "loss": [3.1, 3.0, 2.9, 2.95], "parametrization": column}
    )  # fmt: skip
    rows.to_csv(tmp_path / "runs.csv", index=False)
    import_runs(tmp_path / "runs.csv", sweep="p", url=sqlite_url)
    assert sweep_conventions(Sweep.load("p", sqlite_url)).parametrization == recorded


def test_what_a_fit_will_miss_is_said_at_import(
    tmp_path: Path, sqlite_url: str, cli, caplog: pytest.LogCaptureFixture
) -> None:
    """An audit's imports were accepted in silence and their laws went missing at fit time: a
    batch in sequences without --seq-len (no batch law), the LR renamed away (no LR law),
    sequences imported as batch_tokens, a sweep named as a published law set; a rename given
    twice kept the second."""
    path = write_csv(small_runs(), tmp_path / "runs.csv")
    import_runs(path, sweep="noseq", renames=RENAMES, url=sqlite_url)
    assert "batch_tokens is unknown, so no batch-size law" in caplog.text
    caplog.clear()
    away = {**RENAMES, "lr": "learning_rate"}
    import_runs(path, sweep="nolr", renames=away, seq_len=1024, url=sqlite_url)
    assert "no LR law" in caplog.text and "lr=learning_rate" in caplog.text
    caplog.clear()
    big = small_runs().assign(N=[2e8] * 6)  # 32-64 "tokens" a step for 200M parameters
    seqs = {**RENAMES, "bs": "batch_tokens"}
    import_runs(write_csv(big, tmp_path / "b.csv"), sweep="seqs", renames=seqs, url=sqlite_url)
    assert "if they count sequences" in caplog.text
    caplog.clear()
    import_runs(path, sweep="Step-Law", renames=RENAMES, seq_len=1024, url=sqlite_url)
    assert "also a published law set" in caplog.text and "--law steplaw" in caplog.text
    caplog.clear()
    import_runs(path, sweep="fine", renames=RENAMES, seq_len=1024, url=sqlite_url)
    assert caplog.text == ""  # nothing to say about a complete import
    code, _, err = cli("import", path, "--sweep", "x", "--rename", "N=n_params",
                       "--rename", "N=depth", "--storage", sqlite_url)  # fmt: skip
    assert code == 2 and "renames (--rename): N renamed twice" in err


def test_other_tools_column_names_get_a_rename_hint(
    tmp_path: Path, sqlite_url: str, cli, caplog: pytest.LogCaptureFixture
) -> None:
    """A file in another tool's names (learning_rate, val_loss, bs) had imported with only "no
    lr values", and a missing loss was refused without naming the file's val_loss; runs with an
    empty lr among the others imported in silence (the LR fits leave them out)."""
    theirs = small_runs().rename(columns={"lr": "learning_rate", "final": "val_loss"})
    path = write_csv(theirs, tmp_path / "theirs.csv")
    code, _, err = cli("import", path, "--sweep", "t", "--rename", "N=n_params",
                       "--rename", "D=tokens", "--storage", sqlite_url)  # fmt: skip
    assert code == 2 and "--rename val_loss=loss?" in err
    import_runs(path, sweep="t", renames={"N": "n_params", "D": "tokens", "val_loss": "loss"},
                url=sqlite_url)  # fmt: skip
    assert "import again with --rename learning_rate=lr and --replace" in caplog.text
    assert "with --rename bs=batch_size and --replace" in caplog.text
    caplog.clear()
    some = small_runs().assign(lr=[1e-3, None, 4e-3, 1e-3, 2e-3, None])
    import_runs(write_csv(some, tmp_path / "some.csv"), sweep="s", renames=RENAMES, seq_len=64,
                url=sqlite_url)  # fmt: skip
    assert "2 of 6 runs have no lr value" in caplog.text


def test_a_cell_of_two_sizes_is_refused_and_a_run_listed_twice_is_said(
    tmp_path: Path, sqlite_url: str, cli, caplog: pytest.LogCaptureFixture
) -> None:
    """A fitting audit: two cells labelled alike were fitted at their median N, an N no run had;
    a file listed twice under new ids counted every run twice and narrowed the interval."""
    clash = small_runs().assign(cell="small")  # N 1e6 and 4e6 under one name
    path = write_csv(clash, tmp_path / "clash.csv")
    code, _, err = cli("import", path, "--sweep", "c", "--storage", sqlite_url,
                       *[f"--rename={k}={v}" for k, v in RENAMES.items()], "--seq-len", "64")
    assert code == 2 and "cell 'small' holds runs of n_params 1e+06 to 4e+06" in err
    twice = pd.concat([small_runs(), small_runs()], ignore_index=True).assign(run_id=range(12))
    import_runs(write_csv(twice, tmp_path / "ids.csv"), sweep="ids", renames=RENAMES, seq_len=64,
                url=sqlite_url)  # fmt: skip
    assert "6 rows repeat another's cell, lr, batch, seed and loss exactly" in caplog.text


def test_mis_scaled_or_repeated_runs_are_said_at_import(
    tmp_path: Path, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An import audit's silently wrong numbers: N in millions beside the runs' own width and
    depth (the LR 55x too small at 1B), a batch in tokens imported as sequences (1.6 steps a run,
    the batch law 1024x too big), 40 rows exported twice (every interval narrower), and runs a
    Sweeper sweep trained imported without their unit ('as imported')."""
    runs = small_runs().assign(width=[64] * 3 + [128] * 3, depth=2)
    runs = runs.assign(N=runs["width"] ** 2 * 24 / 1e6)  # 12·L·d² in millions
    import_runs(write_csv(runs, tmp_path / "m.csv"), sweep="m", renames=RENAMES, seq_len=64,
                url=sqlite_url)  # fmt: skip
    assert "1e+06x below 12·L·d²" in caplog.text and "tokens per parameter" in caplog.text
    caplog.clear()
    tokens = small_runs().assign(bs=[2**20] * 6)  # a batch of 1M tokens...
    import_runs(write_csv(tokens, tmp_path / "t.csv"), sweep="t", renames=RENAMES, seq_len=1,
                url=sqlite_url)  # fmt: skip
    assert "optimizer steps" not in caplog.text  # (a batch of 1M tokens: 95-381 steps a run)
    caplog.clear()
    # ... read as 1M sequences of 64
    import_runs(write_csv(tokens, tmp_path / "t.csv"), sweep="t2", renames=RENAMES, seq_len=64,
                url=sqlite_url)  # fmt: skip
    assert "a median of 3.73 optimizer steps" in caplog.text
    caplog.clear()
    twice = pd.concat([small_runs(), small_runs().iloc[:2]], ignore_index=True)
    import_runs(write_csv(twice, tmp_path / "d.csv"), sweep="d", renames=RENAMES, seq_len=64,
                url=sqlite_url)  # fmt: skip
    assert "2 rows repeat another row exactly: imported once" in caplog.text
    assert len(load_runs("d", sqlite_url)) == 6
    # a diverged run repeated counts once; a frame given to fit keeps its rows (no import note)
    (tmp_path / "n.csv").write_text("n_params,tokens,lr,loss\n1e6,1e8,1e-3,3.1\n"
                                    "1e6,1e8,2e-3,nan\n1e6,1e8,2e-3,nan\n")  # fmt: skip
    once = read_runs_file(tmp_path / "n.csv")
    assert len(once) == 2 and once.attrs["diverged_from_loss"] == 1
    frame = pd.concat([small_runs(), small_runs().iloc[:2]], ignore_index=True)
    assert len(validated_runs(frame.rename(columns=RENAMES), "frame")) == 8
    caplog.clear()
    ppl = small_runs().assign(final=[330.0, 320.0, 340.0, 300.0, 290.0, 310.0])
    import_runs(write_csv(ppl, tmp_path / "p.csv"), sweep="p", renames=RENAMES, seq_len=64,
                url=sqlite_url)  # fmt: skip
    assert "a median loss of 315: above a uniform prediction's" in caplog.text
    caplog.clear()
    ours = small_runs().assign(source="sweep:ladder")
    path = write_csv(ours, tmp_path / "o.csv")
    import_runs(path, sweep="o", renames=RENAMES, seq_len=64, url=sqlite_url)
    assert "trained by Sweeper (sweep ladder)" in caplog.text and "tokens=bytes" in caplog.text
    caplog.clear()
    import_runs(path, sweep="o2", renames=RENAMES, seq_len=64, url=sqlite_url,
                conventions=["tokens=bytes"])  # fmt: skip
    assert caplog.text == ""


def test_tracker_and_spreadsheet_shapes_import(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """W&B's UI export names the state column "State" (it was ignored: crashed runs became
    diverged, a running run's partial loss was counted); a spreadsheet's CSV may be separated by
    semicolons (it was one column); JSON lines and a JSON array were refused."""
    base = "n_params,tokens,lr,loss,State\n1e6,1e8,1e-3,3.1,finished\n1e6,1e8,2e-3,3.0,crashed\n"
    (tmp_path / "w.csv").write_text(base + "1e6,1e8,4e-3,3.4,running\n")
    runs = read_runs_file(tmp_path / "w.csv")
    assert runs["state"].tolist() == ["COMPLETE", "FAIL", "RUNNING"]
    assert "column 'State' read as Sweeper's 'state'" in caplog.text
    (tmp_path / "s.csv").write_text("n_params;tokens;lr;loss\n1e6;1e8;1e-3;3.1\n4e6;1e8;1e-3;nan\n")
    semi = read_runs_file(tmp_path / "s.csv")
    assert semi["n_params"].tolist() == [1e6, 4e6] and semi["diverged"].tolist() == [False, True]
    # ... with decimal commas, as such a spreadsheet writes them
    (tmp_path / "c.csv").write_text(
        "n_params;tokens;lr;loss\n1e6;1e8;0,001;3,41\n4e6;1e8;0,001;nan\n"
    )
    comma = read_runs_file(tmp_path / "c.csv")
    assert comma["lr"].tolist() == [0.001, 0.001] and comma["loss"].iloc[0] == 3.41
    # a capitalised loss column written nan is a diverged run too (the review: it was 'empty')
    (tmp_path / "L.csv").write_text("n_params,tokens,lr,Loss\n1e6,1e8,1e-3,3.1\n1e6,1e8,2e-3,nan\n")
    assert read_runs_file(tmp_path / "L.csv")["diverged"].tolist() == [False, True]
    rows = [{"n_params": 1e6, "tokens": 1e8, "lr": 1e-3, "loss": v} for v in (3.1, float("nan"))]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lines = read_runs_file(tmp_path / "r.jsonl")
    assert lines["diverged"].tolist() == [False, True] and lines.attrs["diverged_from_loss"] == 1
    (tmp_path / "r.json").write_text(json.dumps([*rows[:1], {**rows[0], "loss": None}]))
    with pytest.raises(ImportDataError, match="'loss' is empty or NaN in row 2"):
        read_runs_file(tmp_path / "r.json")  # (null is empty, not diverged)
    (tmp_path / "o.json").write_text(json.dumps(rows[0]))
    with pytest.raises(ImportDataError, match="one array of objects"):
        read_runs_file(tmp_path / "o.json")


def test_runs_of_another_parametrization_are_refused_with_a_study(
    tmp_path: Path, sqlite_url: str
) -> None:
    """The quickstart's SP runs imported with studies/width_mup.toml had been stored, and their
    law labelled muP with output_mult 4 (a CLI audit)."""
    repo = Path(__file__).resolve().parents[3]
    with pytest.raises(ImportDataError, match="the runs say parametrization sp, the study mup"):
        import_runs(repo / "docs/data/quickstart.csv", sweep="x", url=sqlite_url,
                    study=repo / "studies/width_mup.toml")  # fmt: skip
    assert import_runs(repo / "docs/data/width_mup.csv", sweep="m", url=sqlite_url,
                       study=repo / "studies/width_mup.toml") > 0  # fmt: skip


def test_a_seq_len_option_that_the_files_column_contradicts_is_refused(
    tmp_path: Path, sqlite_url: str
) -> None:
    """A help-text audit: --seq-len 2048 on a file whose seq_len column said 128 was ignored in
    silence; it fills blanks only, and says so when it would be overruled."""
    runs = pd.DataFrame({"n_params": [1e6, 1e6], "tokens": [1e8, 1e8], "lr": [1e-3, 2e-3],
                         "batch_size": [32, 32], "seq_len": [128, None],
                         "loss": [3.1, 3.0]})  # fmt: skip
    path = write_csv(runs, tmp_path / "r.csv")
    with pytest.raises(ImportDataError, match=r"seq_len \(--seq-len\) 2048 only fills the blanks"):
        import_runs(path, sweep="x", seq_len=2048, url=sqlite_url)
    import_runs(path, sweep="y", seq_len=128, url=sqlite_url)  # (it agrees: it fills the blank)


def test_import_counts_the_runs_that_trained_apart_from_the_other_rows(
    sqlite_url: str, cli
) -> None:
    """A help-text audit: `import` said "imported 92 runs" of a file with 90 runs that trained
    and 2 failed rows, where status and trials count 90."""
    from pathlib import Path as _Path

    csv = _Path(__file__).resolve().parents[3] / "docs" / "data" / "quickstart.csv"
    code, out, err = cli("import", csv, "--sweep", "q", "--storage", sqlite_url)
    assert code == 0, err
    assert "imported 90 runs and 2 row(s) of runs that did not train (5 cells)" in out
    code, out, _ = cli("import", csv, "--sweep", "r", "--storage", sqlite_url, "--json")
    doc = json.loads(out)
    assert doc["n_rows"] == 92 and doc["n_trained"] == 90


"""``sweeper status`` of an imported sweep: its cells as the imported runs tell them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import sweeper
from sweeper.errors import StorageError
from sweeper.study.sweep_runs import load_sweep_runs
from tests.sweeper.helpers import cli_fixture, write_csv  # noqa: F401  (the `cli` fixture)


def _runs() -> pd.DataFrame:
    """Two cells; the small one with two seeds per LR, a diverged run and a failed one."""
    rows = []
    for lr, losses in ((1e-3, (3.0, 3.2)), (2e-3, (2.9, 3.0)), (4e-3, (2.8, 3.3))):
        for seed, loss in enumerate(losses):
            rows.append(dict(cell="small", width=32, depth=2, n_params=1e6, tokens=1e8, lr=lr,
                             batch_size=16, seq_len=128, seed=seed, loss=loss))  # fmt: skip
    rows.append(dict(rows[0], lr=3e-2, loss=9.0, diverged=True))
    rows.append(dict(rows[0], lr=5e-2, state="FAIL"))
    for lr, loss in ((1e-3, 2.6), (2e-3, 2.5)):
        rows.append(dict(cell="big", width=64, depth=2, n_params=4e6, tokens=1e8, lr=lr,
                         batch_size=32, seq_len=128, seed=0, loss=loss))  # fmt: skip
    df = pd.DataFrame(rows)
    df["diverged"] = df["diverged"].fillna(False).astype(bool)
    df["state"] = df["state"].fillna("COMPLETE")
    return df


@pytest.fixture
def imported(tmp_path: Path, sqlite_url: str, cli) -> str:
    code, _, err = cli("import", write_csv(_runs(), tmp_path / "runs.csv"), "--sweep", "imp",
                       "--storage", sqlite_url)  # fmt: skip
    assert code == 0, err
    return "imp"


def test_status_shows_an_imported_sweeps_cells(imported: str, sqlite_url: str, cli) -> None:
    code, out, err = cli("status", imported, "--storage", sqlite_url)
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].startswith("sweep imp: imported from runs.csv on ")
    assert lines[0].endswith("10 runs in 2 cells (not launched: no driver, no target)")
    # the best point is the lowest mean over its seeds: 2e-3 (2.95), not 4e-3's lucky 2.8
    small = (
        "small 8 runs, 6 complete, 1 diverged, 1 failed; best loss 2.9500 at lr 0.002, batch 16 seqs"
    )
    big = "big 2 runs, 2 complete; best loss 2.5000 at lr 0.002, batch 32 seqs"
    assert [" ".join(line.split()) for line in lines[1:]] == [small, big]


def test_status_json_of_an_imported_sweep(imported: str, sqlite_url: str, cli) -> None:
    code, out, err = cli("status", imported, "--json", "--storage", sqlite_url)
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["sweep"], doc["kind"], doc["driver"]) == ("imp", "imported", None)
    assert doc["imported"]["file"] == "runs.csv" and doc["imported"]["n_rows"] == 10
    small, big = doc["cells"]
    assert small == {
        "cell": "small", "width": 32, "depth": 2, "tokens": 100000000, "runs": 8, "complete": 6,
        "diverged": 1, "failed": 1, "pruned": 0, "running": 0, "waiting": 0, "target": None,
        "best_loss": pytest.approx(2.95), "best_lr": 2e-3, "best_batch_size": 16,
    }  # fmt: skip
    assert big["cell"] == "big" and big["runs"] == 2 and big["best_loss"] == pytest.approx(2.5)
    assert sweeper.status("imp", storage=sqlite_url)["cells"] == doc["cells"]


def test_an_imported_sweep_without_lr_or_batch(tmp_path: Path, sqlite_url: str, cli) -> None:
    df = pd.DataFrame({"n_params": [1e6, 1e6, 2e6], "tokens": [1e8] * 3, "loss": [3.1, 2.9, 2.7]})
    assert cli("import", write_csv(df, tmp_path / "l.csv"), "--sweep", "l",
               "--storage", sqlite_url)[0] == 0  # fmt: skip
    code, out, _ = cli("status", "l", "--storage", sqlite_url)
    assert code == 0
    first = " ".join(out.strip().splitlines()[1].split())
    assert first == "N1e06-D1e08 2 runs, 2 complete; best loss 2.9000"


def test_an_imported_sweep_is_still_not_a_launched_one(imported: str, sqlite_url: str) -> None:
    with pytest.raises(StorageError, match="'imp' was imported, not launched"):
        load_sweep_runs(imported, sqlite_url)
    with pytest.raises(StorageError, match=r"no sweep 'nope' in .*; known sweeps: imp"):
        sweeper.status("nope", storage=sqlite_url)


def test_a_point_with_a_diverged_seed_is_no_best(tmp_path: Path, sqlite_url: str) -> None:
    """One seed of 3e-3 diverged, the other finished lowest: the point is a bound on the range,
    not the cell's best (as for a launched cell), so the best is 2e-3's."""
    rows = _runs()
    extra = dict(rows.iloc[0], lr=3e-3)
    rows = pd.concat(
        [rows, pd.DataFrame([{**extra, "seed": 0, "loss": 2.0},
                             {**extra, "seed": 1, "loss": 9.0, "diverged": True}])],
        ignore_index=True,
    )  # fmt: skip
    sweeper.import_runs(write_csv(rows, tmp_path / "div.csv"), sweep="div", storage=sqlite_url)
    (small, _big) = sweeper.status("div", storage=sqlite_url)["cells"]
    assert (small["best_lr"], small["best_loss"], small["diverged"]) == (2e-3, 2.95, 2)

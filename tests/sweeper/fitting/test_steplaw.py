"""Real data: the Step Law release imported and fitted the Step Law way.

Their method on this released subset (runs within 0.25% of each (N, D) cell's best smooth loss, OLS
in log space over 1,000 bootstrap resamples, mean coefficients) gives lr ∝ N^-0.77 · D^0.20 and
batch_tokens ∝ D^0.61 (REFERENCE.md: 129 near-optimal runs; CIs N [-0.88, -0.67], D [0.13, 0.26],
B [0.53, 0.69]). Sweeper's band fit gives the same exponents (OLS through the 129 runs), but its
intervals come from the 17 cells, not the runs (a cell's runs share its deviation from the law;
resampled as independent, a 5-cell ladder on one LR grid had a zero-width interval): N [-0.98,
-0.68], D [0.12, 0.32], B [0.47, 0.71]. The paper's published N and batch exponents (-0.713,
0.571) fall inside them, and so does its D exponent of the LR (0.307, fitted on all 3,700 runs),
just: the runs' resamples had left it out.

Skipped when ../shared/data (or $SWEEPER_SHARED/data) does not hold the file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from sweeper.fitting import fit_band_law
from sweeper.recipe.published import published_laws
from sweeper.study.importer import import_runs, load_runs
from tests.sweeper.helpers import STEPLAW_RENAMES, cli_fixture, steplaw_csv  # noqa: F401

TOL = 0.03


@pytest.fixture(scope="module")
def steplaw_runs(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    path = steplaw_csv()
    url = f"sqlite:///{tmp_path_factory.mktemp('steplaw') / 'sweeper.db'}"
    renames = dict(STEPLAW_RENAMES[i + 1].split("=") for i in range(0, 14, 2))
    assert import_runs(path, sweep="steplaw", renames=renames, seq_len=2048, url=url) == 1911
    return load_runs("steplaw", url)


def test_imported_columns(steplaw_runs: pd.DataFrame) -> None:
    runs = steplaw_runs
    assert runs["cell"].nunique() == 17
    assert (runs["batch_tokens"] == runs["batch_size"] * 2048).all()
    assert {"raw_loss", "ffnh", "numh", "exp_name"} <= set(runs.columns)
    assert runs["width"].min() == 960 and runs["depth"].max() == 16


def test_fitted_the_step_law_way(steplaw_runs: pd.DataFrame) -> None:
    t0 = time.perf_counter()
    lr = fit_band_law(steplaw_runs, target="lr", predictors=("n_params", "tokens"), n_boot=1000)
    bt = fit_band_law(steplaw_runs, target="batch_tokens", predictors=("tokens",), n_boot=1000)
    elapsed = time.perf_counter() - t0
    assert elapsed < 10.0, f"two 1,000-resample band fits took {elapsed:.1f} s"

    assert lr.n_cells == 17 and lr.n_points == 129 and bt.n_points == 129
    assert lr.exponents["n_params"] == pytest.approx(-0.77, abs=TOL)
    assert lr.exponents["tokens"] == pytest.approx(0.20, abs=TOL)
    assert bt.exponents["tokens"] == pytest.approx(0.61, abs=TOL)
    for law, p, ref in (
        (lr, "n_params", (-0.98, -0.68)),
        (lr, "tokens", (0.12, 0.32)),
        (bt, "tokens", (0.47, 0.71)),
    ):
        assert law.exponents_ci[p] == pytest.approx(ref, abs=0.02), (p, law.exponents_ci[p])

    pub = published_laws("steplaw")
    n_lo, n_hi = lr.exponents_ci["n_params"]
    d_lo, d_hi = lr.exponents_ci["tokens"]
    b_lo, b_hi = bt.exponents_ci["tokens"]
    assert n_lo <= pub["lr"].exponents["n_params"] <= n_hi  # -0.713 inside
    assert d_lo <= pub["lr"].exponents["tokens"] <= d_hi  # 0.307 inside (the runs': outside)
    assert b_lo <= pub["batch_tokens"].exponents["tokens"] <= b_hi  # 0.571 inside


def test_cli_import_fit_compare(tmp_path: Path, sqlite_url: str, cli) -> None:
    path = steplaw_csv()
    code, out, err = cli(
        "import", path, "--sweep", "steplaw", *STEPLAW_RENAMES, "--storage", sqlite_url
    )
    assert code == 0, err
    assert "imported 1911 runs (17 cells)" in out
    code, out, err = cli(
        "fit", "steplaw", "--method", "band", "--predictors", "lr=n_params,tokens",
        "--predictors", "batch_tokens=tokens", "--json", "--storage", sqlite_url,
    )  # fmt: skip
    assert code == 0, err
    laws = {d["target"]: d for d in json.loads(out)["laws"]}
    assert laws["lr"]["exponents"]["n_params"] == pytest.approx(-0.77, abs=TOL)
    assert laws["batch_tokens"]["exponents"] == pytest.approx({"tokens": 0.61}, abs=TOL)
    assert laws["lr"]["conventions"]["batch"] == "tokens"

    code, out, err = cli(
        "compare",
        "steplaw",
        "--params",
        "7e9",
        "--tokens",
        "2e12",
        "--json",
        "--storage",
        sqlite_url,
    )
    assert code == 0, err
    doc = json.loads(out)
    inside = {
        (r["target"], r["predictor"]): r["inside"]
        for r in doc["exponents"]
        if r["published"] == "steplaw"
    }
    assert inside == {
        ("lr", "n_params"): True,
        ("lr", "tokens"): True,  # (outside the runs' resampled interval, inside the cells')
        ("batch_tokens", "tokens"): True,
    }
    target = [r for r in doc["predictions"] if r["point"] == "target"]
    assert {r["source"] for r in target} == {"steplaw", "deepseek", "kaplan"}
    assert all(r["extrapolation"] > 1 for r in target if r["value"] is not None)
    # the cells carry width/depth/seq_len, so DeepSeek's M is computed, not approximated
    cells = [r for r in doc["predictions"] if r["point"] != "target" and r["source"] == "deepseek"]
    assert cells and all(r["note"] == "" for r in cells)
    deep_target = [r for r in target if r["source"] == "deepseek"]
    # the target is given by N alone: its shape (hence DeepSeek's M) is inferred, and said so
    assert deep_target and all("shape inferred from N" in r["note"] for r in deep_target)

    code, out, err = cli(
        "compare", "steplaw", "--params", "7e9", "--tokens", "2e12", "--storage", sqlite_url
    )
    assert code == 0, err
    assert "inside" in out and "OUTSIDE" not in out  # (every published exponent inside)

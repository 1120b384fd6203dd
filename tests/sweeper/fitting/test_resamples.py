"""Too few bootstrap resamples are refused (one rule, in the fitting layer): a 95% percentile
interval needs a resample in each 2.5% tail, so 0 (no resampling) or at least 40."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import sweeper
from sweeper.errors import FitError
from sweeper.fitting import synthetic_sweep
from sweeper.fitting._common import FitWarning
from sweeper.fitting.fit_runs import check_resamples, min_resamples
from sweeper.fitting.store import list_laws
from tests.sweeper.helpers import cli_fixture, write_csv  # noqa: F401  (the `cli` fixture)


def _runs():  # three cells, one law: fits in well under a second with few resamples
    return synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(1e8,), seed=1)


def test_the_rule() -> None:
    assert min_resamples() == min_resamples(0.95) == 40
    assert min_resamples(0.9) == 20 and min_resamples(0.99) == 200
    for ok in (0, 40, 1000):
        check_resamples(ok, "--bootstrap")
    for bad in (-1, 1, 2, 39):
        with pytest.raises(FitError, match=rf"--bootstrap must be 0 .* at least 40, got {bad}"):
            check_resamples(bad, "--bootstrap")


@pytest.mark.parametrize("method", ["parabola", "band", "surface"])
@pytest.mark.parametrize("n_boot", [1, 2, 39])
def test_the_python_api_refuses_too_few_law_resamples(method: str, n_boot: int) -> None:
    with pytest.raises(FitError, match=r"n_boot\) must be 0 \(no resampling\) or at least 40"):
        sweeper.fit(_runs(), target="lr", method=method, n_boot=n_boot)


def test_the_loss_law_and_the_cell_optima_too() -> None:
    with pytest.raises(FitError, match="n_boot"):
        sweeper.fit(_runs(), target="loss", n_boot=5)
    with pytest.raises(FitError, match=r"cell_boot\) must be 0 .* got 5"):
        sweeper.fit(_runs(), target="lr", method="parabola", n_boot=0, cell_boot=5)


def test_zero_and_enough_still_fit() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        (none,) = sweeper.fit(_runs(), target="lr", method="parabola", n_boot=0, cell_boot=0)
        (some,) = sweeper.fit(_runs(), target="lr", method="parabola", n_boot=40, cell_boot=40)
        # the surface does not resample cells: its --cell-bootstrap is not used, nor checked
        (surf,) = sweeper.fit(_runs(), target="lr", method="surface", n_boot=0, cell_boot=5)
    assert none.exponents_ci == {} or not any(none.exponents_ci.values())
    lo, hi = some.exponents_ci["n_params"]
    assert lo <= some.exponents["n_params"] <= hi
    assert surf.exponents["n_params"] < 0


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--bootstrap", "2"), "--bootstrap (n_boot) must be 0 (no resampling) or at least 40"),
        (("--bootstrap", "1"), "got 1"),
        (("--method", "parabola", "--cell-bootstrap", "3"), "--cell-bootstrap (cell_boot)"),
    ],
)
def test_the_cli_refuses_in_one_line_exit_2(
    args: tuple[str, ...], named: str, tmp_path: Path, sqlite_url: str, cli
) -> None:
    path = write_csv(_runs(), tmp_path / "runs.csv")
    assert cli("import", path, "--sweep", "few", "--storage", sqlite_url)[0] == 0
    code, out, err = cli("fit", "few", *args, "--storage", sqlite_url)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: ") and named in lines[0]
    assert list_laws("few", sqlite_url) == []

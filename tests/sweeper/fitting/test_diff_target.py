"""``diff``'s default target and its resamples (a Python API audit): the largest cell by N then
D, whatever the order of the runs; n_boot 0 refused up front, saying why."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from sweeper.errors import FitError
from sweeper.fitting.diff import diff_runs
from sweeper.fitting.synthetic import synthetic_sweep


def _sweep(seed: int) -> pd.DataFrame:
    """3 N × 2 D cells, the larger D listed second at every N."""
    return synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), lr_steps=(-4, 3),
                           seeds=2, seed=seed)  # fmt: skip


def _diff(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(diff_runs(a, b, n_boot=400, cell_boot=40).target)


def test_the_default_target_is_the_largest_cell_by_n_then_d_in_any_order() -> None:
    """The first row at the largest N had been taken: its D followed the order of the rows (the
    smaller D here), not the largest cell's."""
    a, b = _sweep(1), _sweep(2)
    assert a["tokens"].iloc[0] == 2e8  # (the smaller D first)
    target = _diff(a, b)
    assert target["n_params"] == pytest.approx(1.6e7, rel=0.01)
    assert target["tokens"] == 8e8
    reordered = _diff(a.iloc[::-1].reset_index(drop=True), b.sample(frac=1.0, random_state=3))
    assert reordered == target
    # a given scale still wins over the largest cell's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given = diff_runs(a, b, n_boot=400, cell_boot=40, target={"tokens": 1e9}).target
    assert given["tokens"] == 1e9 and given["n_params"] == target["n_params"]


def test_n_boot_zero_is_refused_before_fitting_saying_a_diff_needs_resamples() -> None:
    """diff(sw, sw, n_boot=0) had fitted both sweeps, then raised that the law had "too few
    resamples (1) for intervals": 0 is the fits' "no resampling", which leaves a diff nothing
    to compare."""
    a = _sweep(1)
    with pytest.raises(FitError, match=r"^diff: n_boot \(--bootstrap\) must be at least 80, got 0"):
        diff_runs(a, a, n_boot=0)
    with pytest.raises(FitError, match=r"^diff: n_boot \(--bootstrap\) must be at least 80, got 1"):
        diff_runs(a, a, n_boot=1)


def test_too_few_resamples_for_a_diff_are_said_as_a_diff_needs_them() -> None:
    """n_boot 5 had been told "must be 0 (no resampling) or at least 40", and 0 is refused by
    diff: the message is diff's own."""
    from sweeper.fitting.diff import check_diff_resamples

    for n in (0, 5):
        with pytest.raises(FitError, match=f"diff: n_boot .* must be at least 80, got {n}:"):
            check_diff_resamples(n)
    check_diff_resamples(80)

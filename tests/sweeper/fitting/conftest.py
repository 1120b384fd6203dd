"""Fixtures shared by the planner's tests (test_allocation, test_allocation_audit)."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.fitting.synthetic import proxy_sweep


@pytest.fixture(scope="module")
def ladder() -> pd.DataFrame:
    """A dense proxy ladder (5 cells, 8 LRs × 2 seeds, lr* = 0.208·N^-0.3), costs ∝ N·D."""
    runs = proxy_sweep(seeds=2, seed=3)
    runs["wall_s"] = 6.0 * runs["n_params"] * runs["tokens"] / 1e9
    return runs

"""The loss law L(N, D) = E + A/N^α + B/D^β: recovery of a known law, compute-optimal allocation."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import FitError
from sweeper.fitting import fit_loss_law, loss_points, synthetic_sweep
from sweeper.fitting.laws import LossLaw, law_from_dict

EPOCH = {"E": 1.817, "A": 482.0, "B": 2085.4, "alpha": 0.348, "beta": 0.366}
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def law_points(c: dict[str, float], noise: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.geomspace(1e7, 3e9, 6)
    d = np.geomspace(1e9, 3e11, 6)
    rows = []
    for nn, dd in itertools.product(n, d):
        loss = c["E"] + c["A"] / nn ** c["alpha"] + c["B"] / dd ** c["beta"]
        rows.append((nn, dd, loss * np.exp(noise * rng.normal())))
    return pd.DataFrame(rows, columns=["n_params", "tokens", "loss"])


def chinchilla_law(c: dict[str, float]) -> LossLaw:
    return LossLaw(target="loss", predictors=("n_params", "tokens"), source="test", **c)


@pytest.fixture(scope="module")
def fitted() -> LossLaw:
    return fit_loss_law(law_points(EPOCH, noise=2e-3), n_boot=30, source="syn")


def test_known_law_recovered(fitted: LossLaw) -> None:
    assert fitted.alpha == pytest.approx(EPOCH["alpha"], abs=0.02)
    assert fitted.beta == pytest.approx(EPOCH["beta"], abs=0.02)
    assert pytest.approx(EPOCH["E"], rel=0.02) == fitted.E
    for k in ("E", "A", "B", "alpha", "beta"):
        lo, hi = fitted.ci[k]
        assert lo <= getattr(fitted, k) <= hi
    assert fitted.n_points == 36 and fitted.method == "huber-lbfgs/best"
    assert fitted.domain["n_params"] == pytest.approx((1e7, 3e9))


def test_intervals_cover_the_known_law() -> None:
    """The 95% intervals hold E, alpha and beta on 3+ of 4 seeded data sets (measured over 16
    seeds: 94-100% coverage at 0.2% noise)."""
    inside = {"E": 0, "alpha": 0, "beta": 0}
    for seed in range(4):
        law = fit_loss_law(law_points(EPOCH, noise=2e-3, seed=seed), n_boot=30)
        for k in inside:
            lo, hi = law.ci[k]
            inside[k] += lo <= EPOCH[k] <= hi
    assert all(v >= 3 for v in inside.values()), inside


def test_compute_optimal_near_20_tokens_per_param() -> None:
    """The Epoch refit of Chinchilla's approach 3 gives ~20 tokens per parameter.

    (Chinchilla's own published approach-3 constants famously do not: they give 50-120 tokens per
    parameter at these budgets, the inconsistency Epoch's refit, arXiv:2404.10102, resolved.)
    """
    law = chinchilla_law(EPOCH)
    for flops in (1e21, 5.76e23, 1e24):
        n, d = law.compute_optimal(flops)
        assert 6 * n * d == pytest.approx(flops)
        assert 15 < d / n < 25, (flops, d / n)
    n, d = chinchilla_law(CHINCHILLA).compute_optimal(5.76e23)
    assert d / n > 40


def test_fitted_law_gives_the_generating_allocation(fitted: LossLaw) -> None:
    n_fit, d_fit = fitted.compute_optimal(1e22)
    n_true, d_true = chinchilla_law(EPOCH).compute_optimal(1e22)
    assert d_fit / n_fit == pytest.approx(d_true / n_true, rel=0.25)


def test_chinchilla_constants_recovered_without_noise() -> None:
    law = fit_loss_law(law_points(CHINCHILLA, noise=0.0), n_boot=0)
    assert law.alpha == pytest.approx(0.34, abs=1e-3) and law.beta == pytest.approx(0.28, abs=1e-3)
    assert pytest.approx(1.69, rel=1e-3) == law.E
    assert law.ci == {}


def test_best_per_cell_from_runs() -> None:
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(1e8, 4e8, 1.6e9), seed=4)
    pts = loss_points(runs)
    assert len(pts) == 9
    done = runs[~runs["diverged"]]
    assert pts["loss"].min() == pytest.approx(done["loss"].min())
    assert len(loss_points(runs, points="all")) == len(done)
    law = fit_loss_law(runs, n_boot=5)
    assert 0 < law.alpha < 3 and 0 < law.beta < 3
    back = law_from_dict(law.to_dict())
    assert back == law


def test_too_few_points() -> None:
    pts = law_points(EPOCH, noise=0.0).iloc[:5]
    with pytest.raises(FitError, match="at least 6 points"):
        fit_loss_law(pts)
    one_d = law_points(EPOCH, noise=0.0)
    one_d = one_d[one_d["tokens"] == one_d["tokens"].min()]
    with pytest.raises(FitError, match="1 distinct D"):
        fit_loss_law(one_d)
    with pytest.raises(FitError, match="missing"):
        fit_loss_law(pd.DataFrame({"n_params": [1.0], "loss": [2.0]}))

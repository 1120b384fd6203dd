"""A fit audit's findings on the fitters' edges, fixed: the band's interval from the cells (not
its near-optimal runs, and never narrower than the LR grid places a band optimum); the surface's
batch law left out, with a note, when too few cells sweep the batch (it had been attached and
its joint fit refused the LR law too); the parabola's runs far above their cell's best loss
taken off its curve by the surface's rule; the one-cell refusal naming the real minimum."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import FitError
from sweeper.fitting import fit_band_law, synthetic_sweep
from sweeper.fitting._common import FitWarning, min_cells
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.fit_runs import FitOptions, FitOutcome, fit_runs
from sweeper.fitting.methods import BATCH_FEW_NOTE
from sweeper.fitting.optimum import blow_up_note, estimate_optima
from sweeper.fitting.synthetic import proxy_sweep


def _fit(runs: pd.DataFrame, target: str | None = None, **opts: object) -> FitOutcome:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_runs(
            runs, conventions=Conventions(), source="t", target=target,
            options=FitOptions(**opts),  # type: ignore[arg-type]
        )  # fmt: skip


def _band(runs: pd.DataFrame, **kw: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_band_law(runs, predictors=("n_params",), **kw)  # type: ignore[arg-type]


# --- 1. the band's interval ------------------------------------------------------------------


def test_band_interval_of_cells_on_the_grid_is_not_zero_wide() -> None:
    """The audit's ladder: the law moves the optimum by whole grid steps per cell, so every
    cell's near-optimal runs lay on a line, and resampling them gave N^-0.333 [-0.334, -0.333]
    (truth -0.3). Below 7 cells: the t interval, its scatter floored at the grid's quantum."""
    law = _band(proxy_sweep(5, seed=101), n_boot=1000)
    lo, hi = law.exponents_ci["n_params"]  # type: ignore[attr-defined]
    assert hi - lo > 0.1 and lo < -0.3 < hi
    (note,) = [n for n in law.notes if n.startswith("intervals: t interval")]  # type: ignore[attr-defined]
    assert "3 degrees of freedom" in note and "too few cells to resample them" in note
    assert "the lr grid's step (0.345) / √12" in note


def test_band_floor_holds_from_seven_cells_on() -> None:
    """8 cells, each swept on a grid centred on its optimum: every band optimum lies on the law,
    and resampling cells (or runs) has no spread at all; the floored t interval is taken."""
    runs = synthetic_sweep(
        n_params=tuple(1e6 * 2.0**k for k in range(8)), tokens=(2e8,), lr_steps=(-4, 3),
        jitter=False, seeds=2, noise=1e-4, seed=1,
    )  # fmt: skip
    law = _band(runs, n_boot=400)
    lo, hi = law.exponents_ci["n_params"]  # type: ignore[attr-defined]
    assert lo < -0.5 < hi and hi - lo > 0.05
    assert any("closer to the law than a band optimum is placed" in n for n in law.notes)  # type: ignore[attr-defined]


def test_band_interval_rests_on_the_cells_not_the_number_of_runs() -> None:
    """A second copy of every run is no new cell: the interval stays (resampling the runs, it
    had narrowed by sqrt(2)), and so does the law."""
    runs = proxy_sweep(8, seed=7)
    twice = pd.concat([runs, runs.assign(seed=runs["seed"] + 10)], ignore_index=True)
    one, two = _band(runs, n_boot=400), _band(twice, n_boot=400)
    assert two.exponents["n_params"] == pytest.approx(one.exponents["n_params"], abs=1e-9)  # type: ignore[attr-defined]
    assert two.exponents_ci["n_params"] == pytest.approx(one.exponents_ci["n_params"], abs=1e-9)  # type: ignore[attr-defined]


# --- 2. the surface's batch law when few cells sweep the batch --------------------------------

_BASE = dict(tokens=(2e8,), lr_steps=(-4, 3), seeds=2, noise=1e-3, seq_len=256)


def _one_swept(n_swept: int) -> pd.DataFrame:
    """5 cells at one batch (64 x 256 tokens); the first ``n_swept`` of the middle ones also
    sweep the batch, 4x either side of the same batch."""
    ns = (1e6, 4e6, 1.6e7, 6.4e7, 2.56e8)
    parts = [synthetic_sweep(n_params=ns, seed=1, **_BASE)]  # type: ignore[arg-type]
    for i, n in enumerate(ns[1 : 1 + n_swept]):
        swept = synthetic_sweep(
            n_params=(n,), batch_law=(16384.0 / np.sqrt(2e8), {"tokens": 0.5}),
            batch_steps=(-2, 2), seed=2 + i, **_BASE,  # type: ignore[arg-type]
        )  # fmt: skip
        parts.append(swept[swept["batch_tokens"] != 16384.0])
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("n_swept", [1, 2])
def test_surface_fits_the_lr_law_when_too_few_cells_sweep_the_batch(n_swept: int) -> None:
    runs = _one_swept(n_swept)
    for target in (None, "lr"):
        out = _fit(runs, target, n_boot=0)
        assert [law.target for law in out.laws] == ["lr"]
        (note,) = [n for n in out.laws[0].notes if n.startswith(BATCH_FEW_NOTE)]  # type: ignore[attr-defined]
        assert f"need at least {min_cells(1)} usable cells" in note and f"got {n_swept}" in note
        assert "at its best batch" in note
        lo, hi = out.laws[0].exponents_ci["n_params"]  # type: ignore[attr-defined]
        assert lo < -0.5 < hi
        if target is None:  # skipped in the note's words, as the per-cell fits skip it
            assert out.skipped == (f"batch_tokens not fitted: {note.split(': the LR')[0]}",)
    with pytest.raises(FitError, match=f"batch_tokens not fitted: {BATCH_FEW_NOTE}"):
        _fit(runs, "batch_tokens", n_boot=0)


def test_surface_keeps_the_joint_batch_law_when_every_cell_sweeps_the_batch() -> None:
    runs = synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7), tokens=(1e8, 4e8), lr_law=(0.02, {"n_params": -0.3}),
        batch_law=(2.0, {"tokens": 0.5}), lr_steps=(-4, 3), batch_steps=(-2, 2), seed=1,
    )  # fmt: skip
    out = _fit(runs, n_boot=0)
    assert [law.target for law in out.laws] == ["lr", "batch_tokens"] and not out.skipped
    assert not any(n.startswith(BATCH_FEW_NOTE) for n in out.laws[0].notes)  # type: ignore[attr-defined]


# --- 3. the parabola and runs far above their cell's best loss --------------------------------


def _glitched(seed: int = 5) -> pd.DataFrame:
    """A clean ladder plus one run at 40 nats at each cell's best LR (a corrupt log line)."""
    runs = proxy_sweep(5, seed=seed)
    ok = runs[~runs["diverged"]]
    best = ok.loc[ok.groupby("cell")["loss"].idxmin()]
    return pd.concat([runs, best.assign(loss=40.0, seed=99)], ignore_index=True)


def test_parabola_takes_blown_up_runs_off_its_curves_as_the_surface_does() -> None:
    runs = _glitched()
    clean = estimate_optima(runs[runs["loss"] < 40.0], n_boot=0)
    optima = estimate_optima(runs, n_boot=0)
    assert all(o.usable for o in optima)
    assert [o.lr for o in optima] == pytest.approx([o.lr for o in clean], rel=1e-9)
    assert all(o.notes[0] == blow_up_note(0, 1) for o in optima)
    par = _fit(runs, "lr", method="parabola").laws[0]
    srf = _fit(runs, "lr", n_boot=0).laws[0]
    note = blow_up_note(0, 5)
    assert par.notes[0] == note == srf.notes[0]  # type: ignore[attr-defined]
    assert par.n_cells == 5  # type: ignore[attr-defined]


# --- 4. one cell ----------------------------------------------------------------------------


def test_one_cell_refusal_names_the_real_minimum() -> None:
    runs = proxy_sweep(5, seed=1)
    one = runs[runs["cell"] == runs["cell"].iloc[0]]
    for method in ("parabola", "band"):
        with pytest.raises(FitError, match=f"needs at least {min_cells(1)} usable cells"):
            _fit(one, "lr", method=method)

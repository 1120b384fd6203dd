"""A fit audit's findings, fixed: the surface's batch optima on the edge of the batch sizes tried
(flagged, not shown as measured; a first step that did not converge refused), its default
predictors on a fixed tokens-per-parameter ladder, ``fit --json``'s warnings, options the fit
does not use (refused), and ``laws``' cells column for a loss law fitted on every run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import FitError
from sweeper.fitting import synthetic_sweep
from sweeper.fitting._common import FitWarning
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.fit_runs import FitOptions, fit_runs
from sweeper.fitting.methods import BATCH_EDGE_NOTE, FREE_UNCONVERGED
from sweeper.fitting.store import list_laws
from sweeper.fitting.surface import fit_surfaces
from tests.sweeper.helpers import cli_fixture, write_csv  # noqa: F401  (the `cli` fixture)


def _batch_ladder(seed: int, batch_steps: tuple[int, int]) -> pd.DataFrame:
    """12 cells (4 N × 3 D), the batch swept on a factor-2 grid about B* = 2·D^0.5 tokens."""
    return synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7, 6.4e7), tokens=(1e8, 4e8, 1.6e9),
        lr_law=(0.02, {"n_params": -0.3}), batch_law=(2.0, {"tokens": 0.5}), lr_steps=(-4, 3),
        batch_steps=batch_steps, noise=3e-3, k_low=0.03, k_high=0.25, k_batch=0.02, seed=seed,
    )  # fmt: skip


def _quiet_surfaces(runs: pd.DataFrame, **kw: object) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        return fit_surfaces(runs, lr_predictors=None, n_boot=0, **kw)  # type: ignore[arg-type]


def _note(law: object, head: str) -> str:
    return next((n for n in getattr(law, "notes", ()) if n.startswith(head)), "")


def test_cells_of_two_batch_sizes_have_no_measured_batch_optimum() -> None:
    """Two batch sizes a cell: the best is always one of them, so no cell brackets its batch
    optimum. Every cell was fitted without a word and its free batch optimum shown as measured
    (compare's "measured" column, the report's points); they are now named, and left out of
    the batch law's cell optima (the LR law's are measured, and kept)."""
    runs = _batch_ladder(seed=1, batch_steps=(-1, 0))
    laws = _quiet_surfaces(runs, cv=False)
    note = _note(laws["batch_tokens"], BATCH_EDGE_NOTE)
    assert note.endswith("tokens)") and "widen the batch range there" in note
    assert all(f"{c} (" in note for c in runs["cell"].unique())
    assert "of 2 tried" in note
    assert laws["batch_tokens"].cell_optima == {}
    assert len(laws["lr"].cell_optima) == 12 and _note(laws["lr"], BATCH_EDGE_NOTE) == note


def test_a_batch_edge_among_bracketed_cells_is_flagged_and_not_measured() -> None:
    """The largest-D cells tried batch sizes up to 0.6·B* only (their best is the largest): no
    edge note had said so. They are named, their batch optima are not the law's cell optima,
    and no leave-one-cell-out error is measured against them (the largest cell's is none)."""
    runs = _batch_ladder(seed=3, batch_steps=(-3, 3))
    runs = runs[~((runs["tokens"] == 1.6e9) & (runs["batch_tokens"] > 0.6 * 2 * 1.6e9**0.5))]
    laws = _quiet_surfaces(runs, cv=True)
    law = laws["batch_tokens"]
    note = _note(law, BATCH_EDGE_NOTE)
    edge = sorted(runs.loc[runs["tokens"] == 1.6e9, "cell"].unique())
    inner = sorted(set(runs["cell"]) - set(edge))
    assert all(f"{c} (largest of" in note for c in edge)
    assert not any(f"{c} (" in note for c in inner)
    assert sorted(law.cell_optima) == inner
    assert law.cv_error is not None and law.holdout_error is None  # (the largest D: an edge)


def test_a_first_step_that_did_not_converge_is_refused_naming_the_batch_edges() -> None:
    """The audit's ladder (12 cells, two batch sizes each): the fit with free cell optima
    stopped at its evaluation limit, and the batch law was stored beside a note, with cell optima
    of 507 and 1.5e10 tokens (tried: 47k-93k and 37k-74k) and a leave-one-cell-out error of 4.13.
    ``sweeper fit`` refused only the law step's failure; it refuses this one alike."""
    runs = _batch_ladder(seed=0, batch_steps=(-1, 0))
    with pytest.raises(FitError) as e:
        fit_runs(runs, conventions=Conventions(), source="b2", options=FitOptions(n_boot=0))
    msg = str(e.value)
    assert msg.startswith(FREE_UNCONVERGED) and "no law is stored" in msg
    assert "(its cell optima and intervals would be wherever the fit stopped)" in msg
    assert "; and 8 more have their best batch on the edge of the batch range" in msg
    assert msg.endswith("widen the batch range there") and "\n" not in msg


def _per_param_ladder() -> pd.DataFrame:
    """5 cells at D = 20·N (a fixed tokens-per-parameter ladder)."""
    cells = [
        synthetic_sweep(n_params=(n,), tokens=(20 * n,), lr_law=(0.02, {"n_params": -0.3}),
                        lr_steps=(-4, 3), seeds=2, noise=3e-3, k_low=0.03, k_high=0.25, seed=i)
        for i, n in enumerate((1e6, 4e6, 1.6e7, 6.4e7, 2.56e8))
    ]  # fmt: skip
    return pd.concat(cells, ignore_index=True)


@pytest.mark.parametrize("method", ["surface", "parabola"])
def test_a_fixed_tokens_per_parameter_ladder_fits_n_params_alone(method: str) -> None:
    """The surface refused D = 20·N: "predictors n_params, tokens are collinear", where `fit
    --help` promises n_params alone, as the per-cell methods choose (one rule for both now)."""
    opts = FitOptions(method=method, n_boot=0, cell_boot=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        out = fit_runs(_per_param_ladder(), conventions=Conventions(), source="c", options=opts)
    (law,) = out.laws
    assert law.predictors == ("n_params",)
    assert -0.4 < law.exponents["n_params"] < -0.2


@pytest.fixture
def small(tmp_path: Path, sqlite_url: str, cli) -> str:
    """A 6-cell LR ladder (3 N × 2 D), most of it trained on cuda (a fit_runs doubt), imported."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(2e8, 8e8), lr_steps=(-5, 3), seed=2)
    runs["device"] = np.where(runs["n_params"] > 2e6, "cuda:0", "cpu")
    code, _, err = cli("import", write_csv(runs, tmp_path / "s.csv"), "--sweep", "s",
                       "--storage", sqlite_url)  # fmt: skip
    assert code == 0, err
    return "s"


def test_fit_json_carries_the_fits_warnings(
    small: str, sqlite_url: str, cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit --json` returned before printing the doubts: a JSON caller never saw them. They are
    on stderr and under "warnings" (documented in `fit --help`)."""
    code, out, err = cli("fit", small, "--target", "lr", "--method", "parabola", "--bootstrap",
                         "0", "--cell-bootstrap", "0", "--json", "--no-store",
                         "--storage", sqlite_url)  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"laws", "warnings"} and len(doc["laws"]) == 1
    device = [w for w in doc["warnings"] if "trained on cpu and cuda" in w]
    assert len(device) == 1 and f"sweeper: warning: {device[0]}" in err
    with pytest.raises(SystemExit):
        cli("fit", "--help")
    assert '"warnings", the fit\'s doubts' in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--target", "loss", "--predictors", "width"), "--predictors: the loss law is L(N, D)"),
        (("--target", "loss", "--method", "parabola", "--huber", "--unweighted"),
         "--huber, --unweighted: options of the lr and batch_tokens laws, not of --target loss"),
        (("--target", "loss", "--keep-edge"), "--keep-edge: an option of the lr and batch"),
        (("--target", "loss", "--min-runs", "3"), "--min-runs: an option of the lr and batch"),
        (("--target", "loss", "--surface", "planner"), "--surface planner: an option of"),
        (("--cell-bootstrap", "50"), "--cell-bootstrap: an option of --method parabola"),
        (("--method", "band", "--cell-bootstrap", "40"), "(resamples per cell optimum), not of band"),
        (("--target", "loss", "--method", "parabola", "--cell-bootstrap", "40"),
         "--cell-bootstrap: an option of --method parabola (resamples per cell optimum), not of "
         "--target loss"),
        (("--loss-points", "all"), "--loss-points all: an option of --target loss"),
        (("--target", "lr", "--loss-points", "all"), "not of the lr and batch_tokens laws"),
        (("--method", "band", "--huber"), "--huber: an option of --method parabola, not of band"),
        (("--method", "parabola", "--band", "0.01"), "--band: an option of --method band, not of"),
        (("--keep-edge",), "--keep-edge: an option of --method parabola or band, not of surface"),
    ],
)  # fmt: skip
def test_options_the_fit_does_not_use_are_refused(
    args: tuple[str, ...], says: str, small: str, sqlite_url: str, cli
) -> None:
    """Each was taken and ignored in silence (the surface alone refused its own): one line,
    exit 2, the flag named, nothing stored."""
    code, out, err = cli("fit", small, *args, "--bootstrap", "0", "--storage", sqlite_url)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("sweeper: error: ") and says in err
    assert list_laws(small, sqlite_url) == []


def test_the_options_a_fit_uses_are_still_taken(small: str, sqlite_url: str, cli) -> None:
    argv = ("--bootstrap", "0", "--no-store", "--storage", sqlite_url)
    for args in (
        ("--target", "lr", "--method", "parabola", "--huber", "--unweighted", "--keep-edge",
         "--cell-bootstrap", "0", "--min-runs", "3"),
        ("--target", "lr", "--method", "band", "--band", "0.01", "--keep-edge"),
        ("--target", "loss", "--loss-points", "all", "--seed", "3"),
    ):  # fmt: skip
        code, _, err = cli("fit", small, *args, *argv)
        assert code == 0, (args, err)


def test_laws_counts_a_loss_law_on_every_run_in_runs(
    small: str, sqlite_url: str, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`laws` showed a loss law's points as its cells: 147 "cells" for 20 cells fitted with
    --loss-points all. Such a law carries no cell count: its points are said as runs; on each
    cell's best run (the default) its points are its cells."""
    monkeypatch.setenv("COLUMNS", "250")  # (one table row a line)
    for points in ("all", "best"):
        code, _, err = cli("fit", small, "--target", "loss", "--loss-points", points,
                           "--bootstrap", "0", "--storage", sqlite_url)  # fmt: skip
        assert code == 0, err
    code, out, err = cli("laws", small, "--storage", sqlite_url)
    assert code == 0, err
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in out.splitlines() if "│" in ln]
    cells = {row[3]: row[5] for row in rows}  # method → cells
    n_all = next(x.n_points for x in list_laws(small, sqlite_url) if x.method.endswith("/all"))
    assert n_all > 6 and cells == {"huber-lbfgs/all": f"{n_all} runs", "huber-lbfgs/best": "6"}


def test_compare_says_why_a_batch_edge_cell_has_no_measured_batch() -> None:
    """compare's "measured" column of a surface batch law is blank at a cell whose best batch is
    on the edge of its batch range (a bound): the caption says why."""
    from types import SimpleNamespace

    import pandas as pd

    from sweeper.fitting.methods import BATCH_EDGE_NOTE
    from sweeper.recipe.compare import _own_optima

    law = SimpleNamespace(target="batch_tokens", cell_optima={"c1": 1e4}, id=2, source="be",
                          method="surface", notes=(f"{BATCH_EDGE_NOTE}: c2 (largest of 2)",))
    points = pd.DataFrame({"point": ["c1", "c2"]})
    out, by = _own_optima(points, [law], "per-cell")  # type: ignore[list-item]
    assert out["measured_batch_tokens"].isna().tolist() == [False, True]
    assert "blank where a cell's best batch is on the edge" in by["batch_tokens"]
    assert "blank" not in by["lr"]

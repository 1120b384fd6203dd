"""A law-sampler audit's findings on the planner (sweeper.fitting.allocation) and its replay
bench (scripts/bench_allocation.py): a stop that names the cells whose best LR is only bound by
the LR list, a budget stop that says what its Laplace interval leaves out, a cost per run that a
worker's one-off data loading does not move, and a sparse stored sweep refused in one line."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from sweeper.fitting import allocation as al
from sweeper.fitting._common import FitWarning


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore", FitWarning)
    warnings.simplefilter("ignore", RuntimeWarning)


def _top_bound(ladder: pd.DataFrame) -> tuple[pd.DataFrame, list[al.CellPlan], str]:
    """The ladder with the smallest cell's LR list cut below its optimum: its best LR is the
    highest of its list (both seeds there: confirmed)."""
    cells = al.cells_from_runs(ladder)
    small = cells[0]
    sub = ladder[ladder["cell"] == small.cell]
    best = small.lrs.index(float(sub.loc[sub["loss"].idxmin(), "lr"]))
    assert best >= 4
    lrs = small.lrs[:best]
    cut = al.CellPlan(small.cell, small.n_params, small.tokens, lrs, small.cost)
    keep = ~((ladder["cell"] == small.cell) & (ladder["lr"] > lrs[-1] * (1 + 1e-9)))
    return ladder[keep], [cut, *cells[1:]], small.cell


def test_a_stop_by_the_interval_names_the_cells_only_bound_by_the_lr_list(
    ladder: pd.DataFrame,
) -> None:
    """The stop rule counts a best LR at the edge of the LR list as bracketed (nothing beyond it
    can be tried); an audit's plan stopped on a narrow interval with a cell's best LR at the top
    of its list and said nothing, where the README promised "bracketed (tried on both sides)"."""
    runs, cells, small = _top_bound(ladder)
    p = al.plan(runs, cells, k=1, stop_lr_interval_ratio=1e9, max_seeds=2)
    assert p.points == () and p.stop.startswith("target LR interval ratio "), p.stop
    assert p.stop.endswith(
        f"; the best LR is on the edge of the LR list in {small} (highest): bound, not "
        "bracketed: widen the LR range there"
    ), p.stop
    # a ladder with every best LR inside its list says nothing of the kind
    full = al.plan(ladder, al.cells_from_runs(ladder), k=1, stop_lr_interval_ratio=1e9)
    assert full.points == () and full.stop.startswith("target LR interval ratio ")
    assert "edge of the LR list" not in full.stop


def test_a_budget_stop_says_its_laplace_interval_leaves_the_scatter_out(
    ladder: pd.DataFrame,
) -> None:
    """A budget stop read "the target LR's 95% interval (Laplace) is 15,250x wide" where fit then
    reported 3e34x: nothing said the two differ, and a user read "a bit more budget" into it."""
    runs = ladder[ladder["seed"] == 0]
    cells = al.cells_from_runs(ladder)
    p = al.plan(runs, cells, k=1, budget_runs=len(runs), stop_lr_interval_ratio=1.01)
    assert p.points == () and p.interval_ratio is not None
    assert (
        "the target LR's 95% interval (Laplace, which leaves the cells' scatter out: the "
        "bootstrap one `sweeper fit` reports can be far wider) is "
    ) in p.stop, p.stop
    assert p.stop.endswith("x wide, the stop rule's 1.01x: raise budget_runs to go on"), p.stop


def _costed(
    walls: dict[str, list[float]], diverged: dict[str, list[bool]] | None = None
) -> pd.DataFrame:
    """A runs table of cells ``a`` (N 1e4), ``b`` (2e4), ``c`` (4e4) with the given wall_s."""
    n = {"a": 1e4, "b": 2e4, "c": 4e4}
    rows = []
    for cell, ws in walls.items():
        div = (diverged or {}).get(cell, [False] * len(ws))
        for i, (w, d) in enumerate(zip(ws, div, strict=True)):
            rows.append({"cell": cell, "n_params": n[cell], "tokens": 1e6, "lr": 1e-3 * 2**i,
                         "loss": 3.0, "diverged": d, "state": "COMPLETE", "wall_s": w})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_workers_one_off_data_loading_does_not_flip_cheapest_first() -> None:
    """The first run in each fresh Ray worker also loads the data (5-9 s); the cheapest cell
    runs first and its mean wall_s took it all, putting it after the next cell."""
    scales = {"a": (1e4, 1e6), "b": (2e4, 1e6), "c": (4e4, 1e6)}
    # one worker: the first run of the cheapest cell carries 8 s of loading
    runs = _costed({"a": [9.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]})
    costs = al.cell_costs(runs, scales)
    assert costs["a"] == pytest.approx(1.0) and costs["b"] == pytest.approx(2.0)
    assert costs["c"] == pytest.approx(4.0)  # unmeasured: N·D at the measured cells' rate
    assert [c.cell for c in al.cells_from_runs(runs)] == ["a", "b"]
    # two workers: both of the cheapest cell's first runs carry it
    runs = _costed({"a": [8.0, 9.0, 1.0, 1.2], "b": [2.0, 2.1, 2.0]})
    assert al.cell_costs(runs, scales)["a"] == pytest.approx(1.1)
    # a diverged run stopped early is not what a run costs
    runs = _costed({"a": [1.0, 1.0, 0.1]}, {"a": [False, False, True]})
    assert al.cell_costs(runs, scales)["a"] == pytest.approx(1.0)


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "scripts" / "bench_allocation.py"
    spec = importlib.util.spec_from_file_location("bench_allocation_audit", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _bench_main(
    bench: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
) -> tuple[object, str, str]:
    monkeypatch.setattr(sys, "argv", ["bench_allocation.py", *argv])
    try:
        code = bench.main()
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_on_a_sparse_stored_sweep_is_one_line_exit_2(
    ladder: pd.DataFrame, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stored sweep the law sampler planned (3 runs in most cells) crashed the replay with a
    RuntimeError traceback ("the replay asked for a run ... beyond the stored ones")."""
    bench = _bench()
    cells = [c.cell for c in al.cells_from_runs(ladder)]  # (cheapest, smallest, first)
    one = ladder[ladder["seed"] == 0]
    parts = [one[one["cell"] == c].iloc[2:5] for c in cells[:-1]]  # 3 runs each
    parts.append(ladder[ladder["cell"] == cells[-1]])  # the largest: every LR, both seeds
    sparse = pd.concat(parts, ignore_index=True)
    monkeypatch.setattr(bench, "load", lambda sweep, storage: bench._results(sparse))
    code, out, err = _bench_main(
        bench, monkeypatch, capsys, "law_planned", "--budget", "1.0", "--json", "--boot", "0"
    )
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 1 and lines[0].startswith(
        "bench_allocation.py: error: law_planned: the stored sweep is not dense enough to replay"
    ), lines
    assert "beyond the stored ones" in lines[0]


def test_bench_says_when_a_budget_cannot_start_every_cell(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget below 3 LRs in every cell (the law sampler's validate refuses one) replayed
    with some cells never run, and nothing said so."""
    bench = _bench()
    code, out, err = _bench_main(
        bench, monkeypatch, capsys, "--synthetic", "--budget", "0.1", "--json", "--boot", "0"
    )
    assert code == 0 and out
    assert err.strip() == (
        "bench_allocation.py: note: a budget of 0.1 is 12 of the 120 stored runs, fewer than the "
        "15 that start every cell (3 LRs x 5 cells): some cells get no run"
    ), err
    assert bench._start_short(bench.synthetic(0), 0.2) == ""

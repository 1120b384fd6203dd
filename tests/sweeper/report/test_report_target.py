"""A report with a target given by scale (``--params/--tokens``, no recipe) says what
``recommend`` would doubt there: an audit's 3-cell report marked a target whose LR interval spans
1e10x with a star and no word, where ``recommend`` refuses a recipe."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from sweeper.cli import main
from sweeper.study.importer import import_runs

DATA = Path(__file__).resolve().parents[3] / "docs" / "data" / "quickstart.csv"


def _notes(out: Path) -> list[str]:
    page = (out / "index.html").read_text()
    return [html.unescape(n) for n in re.findall(r"<div class='warn'>note: (.*?)</div>", page)]


def _report(url: str, sweep: str, out: Path, *at: str) -> list[str]:
    assert main(["report", sweep, "-o", str(out), "--bootstrap", "40", *at, "--storage", url]) == 0
    return _notes(out)


def test_a_target_given_by_scale_carries_recommends_doubts(sqlite_url: str, tmp_path: Path) -> None:
    runs = pd.read_csv(DATA)
    few = tmp_path / "few.csv"
    runs[runs["width"].isin([32, 48, 64])].to_csv(few, index=False)
    import_runs(few, sweep="few", url=sqlite_url)
    assert (
        main(["fit", "few", "--method", "parabola", "--bootstrap", "200", "--storage", sqlite_url])
        == 0
    )
    notes = _report(sqlite_url, "few", tmp_path / "t", "--params", "1e8", "--tokens", "2e9")
    assert any(n.startswith("at the target, recommend refuses a recipe: lr law") for n in notes)
    assert any("at the target: very far extrapolation" in n for n in notes)
    assert any("does not model D" in n and "D 2e+09 (its cells: 8.19e+05)" in n for n in notes)
    # without a target: none of it
    assert not any("at the target" in n for n in _report(sqlite_url, "few", tmp_path / "n"))


def test_a_target_with_no_law_to_mark_says_it_is_not_marked(
    sqlite_url: str, tmp_path: Path
) -> None:
    """Two cells, no law: the target was accepted and silently dropped; and the note's 'the
    cells table says why the others have none' named other cells when there were none."""
    runs = pd.read_csv(DATA)
    two = tmp_path / "two.csv"
    runs[runs["width"].isin([32, 128])].to_csv(two, index=False)
    import_runs(two, sweep="two", url=sqlite_url, conventions={"tokens": "bytes"})
    notes = _report(sqlite_url, "two", tmp_path / "t", "--params", "1e8", "--tokens", "2e9")
    assert "no law: 2 of 2 cells have an optimum of their own and a law needs 3" in notes
    assert "the target given is not marked: there is no law to evaluate at it" in notes
    # with no law to say it, the sweep's own conventions give the unit of its batches
    assert "batch (bytes)" in (tmp_path / "t" / "index.html").read_text()


def test_a_partial_target_still_gives_a_report(sqlite_url: str, tmp_path: Path) -> None:
    """A review found the doubts' target built outside any guard: `report --tokens 1e10` (no N)
    failed the whole report, and an N alone lost the doubts to 'give tokens'."""
    import pytest

    from sweeper import api
    from sweeper.errors import SweeperError

    import_runs(DATA, sweep="q", url=sqlite_url, conventions={"tokens": "bytes"})
    assert (
        main(["fit", "q", "--method", "parabola", "--bootstrap", "200", "--storage", sqlite_url])
        == 0
    )
    only_d = _report(sqlite_url, "q", tmp_path / "d", "--tokens", "1e10")
    assert "the target gives no N (--params), which the lr law needs: not evaluated there" in (
        " ".join(only_d)
    )
    only_n = _report(sqlite_url, "q", tmp_path / "n", "--params", "1e9")
    assert any("at the target: very far extrapolation" in n for n in only_n)
    # (the law does not model D: the D its doubts take is the cells', and the page says so)
    assert any(n.startswith("the target gives no D: the doubts below take D = ") for n in only_n)
    with pytest.raises(SweeperError, match="give a recipe or a target's scale"):
        api.write_report("q", tmp_path / "r", storage=sqlite_url, recipe={}, at={"n_params": 1e9})

"""``sweeper diff``: detection and false alarms on synthetic proxy-like pairs (few pairs here;
``scripts/calibrate_diff.py`` counts 100 of each), the JSON interface, the refusals."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sweeper.cli as cli
from sweeper.errors import FitError
from sweeper.fitting.diff import diff_runs
from tests.sweeper.helpers import DIFF_N as N
from tests.sweeper.helpers import pair_sweep


def diff(a: pd.DataFrame, b: pd.DataFrame, seed: int = 0):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diff_runs(a, b, n_boot=2000, cell_boot=100, seed=seed)


def test_a_shifted_exponent_is_detected_and_a_null_pair_is_not() -> None:
    detected = [diff(pair_sweep(-0.3, 10 + i), pair_sweep(-0.6, 20 + i), i) for i in range(3)]
    for r in detected:
        e = r.exponent_differences["n_params"]
        assert e.excludes_null and -0.45 < e.value < -0.15
        assert not r.indistinguishable and "exponent n_params" in r.distinguished_by
        # the laws pivot at the middle cell: at the largest cell B's optimal LR is well below A's
        assert r.target_lr_ratio.value < 0.8
    nulls = [diff(pair_sweep(-0.3, 30 + i), pair_sweep(-0.3, 40 + i), i) for i in range(3)]
    assert sum(r.indistinguishable for r in nulls) >= 2
    r = nulls[0]
    assert r.n_quantities == 1 + 1 + 6  # exponent, ratio at the target, 6 shared cells
    assert r.corrected_level == pytest.approx(1 - 0.05 / 8)
    lo, hi = r.exponent_differences["n_params"].ci
    clo, chi = r.exponent_differences["n_params"].ci_corrected
    assert clo < lo < hi < chi  # the corrected interval is the wider one


def test_target_ratio_at_a_given_scale_and_json_shape() -> None:
    a, b = pair_sweep(-0.3, 1), pair_sweep(-0.6, 2)
    r = diff_runs(a, b, n_boot=500, cell_boot=50, target={"n_params": 1e9})
    assert r.target["n_params"] == 1e9
    expected = (1e9 / math.exp(float(np.mean(np.log(N))))) ** -0.3  # N^-0.6 / N^-0.3 from the pivot
    assert r.target_lr_ratio.value == pytest.approx(expected, rel=1.0)
    out = r.to_json()
    assert set(out["exponent_differences"]["n_params"]) >= {"value", "ci"}
    assert set(out["target_lr_ratio"]) >= {"value", "ci"} and isinstance(
        out["indistinguishable"], bool
    )
    json.dumps(out)


def test_a_searched_schedule_is_refused() -> None:
    a = pair_sweep(-0.3, 1)
    b = a.assign(schedule=np.where(np.arange(len(a)) % 2, "cosine", "linear"))
    with pytest.raises(FitError, match="schedule is searched"):
        diff_runs(a, b, n_boot=100, cell_boot=20)


def test_cli_diff_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweeper.cli import own_model

    titles: list[str] = []
    drawn = own_model._draw_intervals
    monkeypatch.setattr(own_model, "_draw_intervals",
                        lambda ax, items, title: titles.append(title) or drawn(ax, items, title))
    url = f"sqlite:///{tmp_path / 'd.db'}"
    for name, (exp, seed) in {"ref": (-0.3, 5), "new": (-0.6, 6)}.items():
        f = tmp_path / f"{name}.csv"
        pair_sweep(exp, seed).to_csv(f, index=False)
        assert cli.main(["import", str(f), "--sweep", name, "--storage", url]) == 0
    capsys.readouterr()
    code = cli.main(["diff", "ref", "new", "--storage", url, "--json", "--bootstrap", "500",
                     "--cell-bootstrap", "50", "--params", "1e7", "--plot", str(tmp_path / "d.png")])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"exponent_differences", "target_lr_ratio", "indistinguishable"} <= set(out)
    assert (
        out["exponent_differences"]["n_params"]["value"] < 0 and out["indistinguishable"] is False
    )
    png = (tmp_path / "d.png").read_bytes()
    # the best-loss differences have a panel of their own (on the laws' axis they hid under a
    # ±60 ln-ratio interval): three panels of 5.5 inches at 110 dpi
    assert int.from_bytes(png[16:20], "big") == round(3 * 5.5 * 110)
    # the laws' panel gives the law's verdict (it gave the verdict over laws and losses together)
    verdict = "moved" if out["law_moved"] else "not shown to move"
    assert titles[0].endswith(f"minus A = ref: the law {verdict}\n(thick: 95%; thin: "
                              "corrected; red: excludes the null)")  # fmt: skip
    assert cli.main(["diff", "ref", "nope", "--storage", url]) == 2
    capsys.readouterr()
    # without --json the text says where the plot went (only the JSON had; a help-text audit)
    assert cli.main(["diff", "ref", "new", "--storage", url, "--bootstrap", "320",
                     "--cell-bootstrap", "40", "--plot", str(tmp_path / "e.png")]) == 0  # fmt: skip
    assert f"wrote {tmp_path / 'e.png'}" in capsys.readouterr().out
    # a side may join sweeps of the same study on other LRs (spaces allowed), but not a sweep
    # twice: its runs would count twice
    runs = pair_sweep(-0.3, 5)
    cut = float(np.median(runs["lr"]))
    for name, part in {"lo": runs[runs["lr"] <= cut], "hi": runs[runs["lr"] > cut]}.items():
        part.to_csv(tmp_path / f"{name}.csv", index=False)
        assert cli.main(["import", str(tmp_path / f"{name}.csv"), "--sweep", name,
                         "--storage", url]) == 0  # fmt: skip
    capsys.readouterr()
    assert cli.main(["diff", "lo + hi", "new", "--storage", url, "--json", "--bootstrap", "320",
                     "--cell-bootstrap", "40"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["a"] == "lo+hi"
    assert cli.main(["diff", "ref+ref", "new", "--storage", url]) == 2
    assert "names ref twice" in capsys.readouterr().err


def test_cli_fit_joins_sweeps_of_one_study_on_other_lrs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A range extended by a second sweep (a grid does not grow in place) could be compared with
    `diff a+b` but not fitted: `fit a+b` said "no sweep 'a+b'". It fits the runs together, as
    one sweep holding them all, and `recommend a+b` reads the law it stored."""
    url = f"sqlite:///{tmp_path / 'j.db'}"
    runs = pair_sweep(-0.3, 5)
    cut = float(np.median(runs["lr"]))
    for name, part in {"lo": runs[runs["lr"] <= cut], "hi": runs[runs["lr"] > cut],
                       "all": runs}.items():  # fmt: skip
        f = tmp_path / f"{name}.csv"
        part.to_csv(f, index=False)
        assert cli.main(["import", str(f), "--sweep", name, "--storage", url]) == 0
    capsys.readouterr()
    fit = ["--target", "lr", "--storage", url, "--json", "--bootstrap", "50"]
    assert cli.main(["fit", "lo+hi", *fit]) == 0
    (joined,) = json.loads(capsys.readouterr().out)["laws"]
    assert cli.main(["fit", "all", *fit, "--no-store"]) == 0
    (whole,) = json.loads(capsys.readouterr().out)["laws"]
    assert joined["source"] == "lo+hi"
    assert joined["exponents"] == pytest.approx(whole["exponents"])
    assert cli.main(["recommend", "lo+hi", "--params", "1e7", "--tokens", "2e8",
                     "--storage", url, "--json", "--force"]) == 0  # fmt: skip
    recipe = json.loads(capsys.readouterr().out)
    assert recipe["provenance"]["lr"]["source"] == "lo+hi"
    assert cli.main(["laws", "lo+hi", "--storage", url]) == 0  # it said "no sweep 'lo+hi'"
    assert "lo+hi" in capsys.readouterr().out
    # compare, report and trials took no joined name (a diff audit: "no sweep 'lo+hi'")
    assert cli.main(["compare", "lo+hi", "--storage", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sweep"] == "lo+hi"
    assert cli.main(["report", "lo+hi", "-o", str(tmp_path / "rep"), "--storage", url]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert f"{len(runs)} runs in " in page and "lo+hi" in page
    out = tmp_path / "t.csv"
    assert cli.main(["trials", "lo+hi", "-o", str(out), "--storage", url]) == 0
    assert len(pd.read_csv(out)) == len(runs)


def test_indistinguishable_says_how_little_the_runs_can_tell() -> None:
    """'indistinguishable' was read as 'the change does not move the law' while the corrected
    interval of the LR ratio was [0.0386, 40]: the line says what the runs cannot tell apart."""
    from dataclasses import replace

    from sweeper.fitting.diff import Estimate

    res = diff(pair_sweep(-0.3, 1), pair_sweep(-0.3, 2))
    wide = Estimate(1.2, (0.5, 3.0), (0.0386, 40.0), null=1.0)
    res = replace(res, target_lr_ratio=wide, exponent_differences={}, best_loss_differences={})
    text = "\n".join(res.lines())
    assert "cannot tell an optimal LR ratio between 0.0386 and 40 at the target from 1" in text
    assert "too wide to say anything" in text


def test_a_sweep_diffed_with_itself_is_no_different_and_one_seed_keeps_its_losses() -> None:
    """A diff audit: a sweep diffed with itself came out +0.071 in the exponent (B was fitted at
    another seed, and the seed moved the parabola law's weights); with one seed at every point
    the best-loss differences were dropped with the note that the sweeps share no cell."""
    a = pair_sweep(-0.3, 5)
    same = diff(a, a)
    assert same.exponent_differences["n_params"].value == 0.0
    assert "A and B hold the same runs: every difference is 0" in same.notes
    # the band method's point is a mean over its resamples: the same runs are fitted at one seed
    # (a review: its self-diff came out -0.003 under that note)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        band = diff_runs(a, a.sample(frac=1.0, random_state=1), method="band", n_boot=320)
    assert band.exponent_differences["n_params"].value == 0.0
    assert same.target_lr_ratio.value == pytest.approx(1.0, abs=1e-12)
    # in a notebook it reads as `sweeper diff` prints it, with both laws (an API audit: a dump
    # of every field; the CLI printed only the differences)
    # (the verdicts come first: one line when the runs are the same; its repr is one line)
    shown = str(same).splitlines()
    assert shown[1] == "  A and B are the same runs: nothing to compare"
    assert shown[2].startswith("  lr laws: A n_params^") and "; B n_params^" in shown[2]
    assert shown[-1].startswith("  note: A and B hold")
    one = a[a["seed"] == a["seed"].min()]
    r = diff(one, pair_sweep(-0.3, 6))
    assert len(r.best_loss_differences) == 6 and not any("share no cell" in n for n in r.notes)
    both_one = diff(one, one.assign(loss=one["loss"] + 0.01))
    assert not both_one.best_loss_differences
    assert any("one seed" in n for n in both_one.notes)


def test_a_diff_says_what_the_two_laws_measured_differently_and_where_they_extrapolate() -> None:
    """A diff audit: SP against muP, a target 65x beyond the cells and a token count neither law
    models were compared without a word (recommend warns of each)."""
    from dataclasses import replace as dc_replace

    from sweeper.fitting.conventions import Conventions

    a, b = pair_sweep(-0.3, 1), pair_sweep(-0.3, 2)
    mup = dc_replace(Conventions(), parametrization="mup", base_width=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = diff_runs(a, b, n_boot=320, cell_boot=50, conventions=(Conventions(), mup),
                      target={"n_params": 1e8, "tokens": 1e9})  # fmt: skip
    notes = " | ".join(r.notes)
    assert "A records no parametrization (B mup)" in notes  # (imported without its study)
    assert "A records no base_width (B 16)" in notes
    assert "the target lies beyond A's cells (n_params" in notes
    assert "A's law does not model tokens (its cells held it at 8.19e+05)" in notes
    plain = diff(a, b)
    assert not any("differ in" in n or "beyond" in n for n in plain.notes)
    # a training function's N is 12·L·d², a builder's its model's count (an API audit: not said)
    own = dc_replace(Conventions(), n_params_source="12·L·d² at the cell's shape")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counted = diff_runs(a, b, n_boot=320, cell_boot=50, conventions=(own, Conventions()))
    assert any("A and B count N differently: A 12·L·d² at the cell's shape, B counted" in n
               for n in counted.notes)  # fmt: skip
    # a target at the D the cells held is no note (a review: it said D "does not enter")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        held = diff_runs(a, b, n_boot=320, cell_boot=50, target={"tokens": 819_200.0})
    assert not any("does not model" in n for n in held.notes)


def test_cells_kept_on_their_edge_are_said_to_be_bounds() -> None:
    """A diff audit: with --keep-edge, a side whose every best LR was the grid's top gave an LR
    ratio of 6.3 and "differs", with no word that its optima were bounds."""
    a = pair_sweep(-0.3, 3)
    b = a[a["lr"] <= a.groupby("cell")["lr"].transform("median")]  # each cell cut below its best
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = diff_runs(a, b, n_boot=320, cell_boot=50, keep_edge=True)
        kept = diff_runs(a, a, n_boot=320, cell_boot=50, keep_edge=True)
        band = diff_runs(a, b, n_boot=320, method="band", keep_edge=True)  # (said too: a review)
    assert any(n.startswith("B's lr law: ") and "kept with" in n for n in band.notes)
    edge_notes = [n for n in r.notes if n.startswith("B's lr law: ")]
    assert edge_notes and "kept with their optimum on the edge of the range (bounds" in edge_notes[0]
    assert not any("lr law: " in n for n in kept.notes)


def test_the_law_and_the_best_loss_have_verdicts_of_their_own() -> None:
    """A diff audit: AdamW against Muon read "differs … in: best loss w16…w64" and JSON
    `"indistinguishable": false` while neither the LR ratio (corrected [0.11, 819]) nor the
    exponent was resolved; "did the law move?" read false as yes. The law (exponents, target
    ratios) and the best loss get a verdict each, first; the correction stays one over both."""
    a = pair_sweep(-0.3, 1)
    b = pair_sweep(-0.3, 2)
    r = diff(a, b.assign(loss=b["loss"] - 0.2))
    assert not r.indistinguishable  # (its meaning kept: any quantity, law or loss)
    assert r.law_moved is False and r.loss_differs is True
    out = r.to_json()
    assert out["law_moved"] is False and out["loss_differs"] is True
    assert out["indistinguishable"] is False and out["same_runs"] is False
    assert set(out["verdicts"]) == {"law", "best_loss"}
    lines = r.lines()
    assert lines[1].startswith("  law: not shown to move") and "cannot tell" in lines[1]
    assert lines[2].startswith("  best loss: differs in 6 of 6 shared cells")
    assert lines[2].endswith("B lower in each")
    assert lines[3].startswith("  lr laws: A n_params^")
    assert "law and best loss together" in "\n".join(lines)
    moved = diff(pair_sweep(-0.3, 10), pair_sweep(-0.6, 20))
    assert moved.law_moved and moved.lines()[1].startswith("  law: moved, in ")
    assert "exponent n_params" in moved.lines()[1]
    assert moved.to_json()["law_moved"] is True


def test_no_compared_best_loss_is_no_verdict_on_it() -> None:
    a = pair_sweep(-0.3, 5)
    one = a[a["seed"] == a["seed"].min()]
    r = diff(one, one.assign(loss=one["loss"] + 0.01))
    assert r.loss_differs is None and r.to_json()["loss_differs"] is None
    assert r.lines()[2] == "  best loss: not compared (see the notes)"


def test_a_sweep_diffed_with_itself_says_so_plainly() -> None:
    """A diff audit: `diff quickstart quickstart` said "these runs cannot tell an optimal LR
    ratio between 1 and 1 … from 1"; a zero-width interval is worded as one."""
    from dataclasses import replace

    from sweeper.fitting.diff import Estimate

    a = pair_sweep(-0.3, 5)
    same = diff(a, a)
    text = "\n".join(same.lines())
    assert same.same_runs and same.to_json()["same_runs"] is True
    assert same.lines()[1] == "  A and B are the same runs: nothing to compare"
    assert "between 1 and 1" not in text and "best loss: " not in same.lines()[2]
    point = Estimate(1.0, (1.0, 1.0), (1.0, 1.0), null=1.0)
    other = replace(diff(a, pair_sweep(-0.3, 6)), target_lr_ratio=point, exponent_differences={})
    line = other.lines()[1]
    assert "between 1 and 1" not in line and "1 in every resample" in line


def test_per_cell_rows_are_in_order_of_scale() -> None:
    """A diff audit: the per-cell rows were sorted as strings (w128 before w16)."""
    a = pair_sweep(-0.3, 1)
    r = diff(a, pair_sweep(-0.3, 2))
    by_n = a.groupby("cell")["n_params"].first().sort_values().index.astype(str).tolist()
    assert by_n != sorted(by_n)  # (the names do not sort as the scale does)
    assert list(r.best_loss_differences) == by_n
    assert list(r.to_json()["best_loss_differences"]) == by_n
    rows = [ln.split(":")[0].split()[-1] for ln in r.lines() if ln.startswith("  best loss N")]
    assert rows == by_n


def test_a_held_variable_one_law_does_not_record_is_not_said_to_be_held_elsewhere() -> None:
    """Laws record their cells' depth since 2026-11-29; a diff of an older law (or of runs
    imported without depth) against a new one said 'the cells held depth elsewhere: A None,
    B 2' beside 'A and B hold the same runs' (a review). Values both record still count."""
    from dataclasses import replace

    from sweeper.fitting.diff import _held_apart
    from sweeper.recipe.published import published_laws

    law = published_laws("steplaw")["lr"]
    old = replace(law, conventions=law.conventions.with_held({"batch_tokens": (4096.0, 4096.0)}))
    new = replace(old, conventions=old.conventions.with_held(
        {"batch_tokens": (4096.0, 4096.0), "depth": (2.0, 2.0)}
    ))  # fmt: skip
    assert _held_apart(old, new) == []
    moved = replace(new, conventions=new.conventions.with_held(
        {"batch_tokens": (8192.0, 8192.0), "depth": (4.0, 4.0)}
    ))  # fmt: skip
    assert _held_apart(new, moved) == ["batch_tokens", "depth"]

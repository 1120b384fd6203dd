"""The import/fit/laws/compare verbs through ``sweeper.cli.main``: JSON keys, storage, errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.fitting import synthetic_sweep
from sweeper.fitting.store import list_laws
from tests.sweeper.helpers import LAUNCHED_STUDY, cli_fixture, launch_fake, write_csv  # noqa: F401  (the `cli` fixture)

POWER_KEYS = {"id", "target", "predictors", "prefactor", "exponents", "exponents_ci", "n_cells"}
POWER_KEYS |= {"cv_error", "holdout_error", "domain", "conventions", "fingerprint", "method"}
LOSS_KEYS = {"id", "E", "A", "B", "alpha", "beta", "E_ci", "A_ci", "B_ci", "alpha_ci", "beta_ci"}


@pytest.fixture
def sweep(tmp_path: Path, sqlite_url: str, cli) -> str:
    """A synthetic sweep (LR and batch swept; known laws) imported into a fresh storage."""
    runs = synthetic_sweep(
        n_params=(1e6, 4e6, 1.6e7, 6.4e7),
        tokens=(1e8, 4e8, 1.6e9),
        lr_law=(2.0, {"n_params": -0.5, "tokens": 0.1}),
        batch_law=(0.5, {"tokens": 0.6}),
        lr_steps=(-5, 3),
        seed=0,
    )
    path = write_csv(runs, tmp_path / "syn.csv")
    code, out, err = cli("import", path, "--sweep", "syn", "--storage", sqlite_url, "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "sweep": "syn",
        "n_rows": len(runs),
        "n_trained": len(runs),
        "n_cells": 12,
        "storage": sqlite_url,
    }
    return "syn"


def test_fit_default_targets_json(sweep: str, sqlite_url: str, cli) -> None:
    code, out, err = cli(
        "fit",
        sweep,
        "--bootstrap",
        "200",
        "--json",
        "--storage",
        sqlite_url,
    )
    assert code == 0, err
    doc = json.loads(out)
    laws = {d["target"]: d for d in doc["laws"]}  # the default method: surface
    assert set(laws) == {"lr", "batch_tokens"}  # batch varies within cells, so both
    # the surface's batch law is on tokens alone (B*(D)) unless --predictors names more
    want = {"lr": ["n_params", "tokens"], "batch_tokens": ["tokens"]}
    for t, d in laws.items():
        assert set(d) >= POWER_KEYS and "boot_coefs" not in d
        assert d["predictors"] == want[t] and d["n_cells"] == 12
        assert list(d["exponents_ci"]) == want[t]
        assert d["source"] == d["sweep"] == sweep and d["method"] == "surface"
    for t, p, true in (
        ("lr", "n_params", -0.5),
        ("lr", "tokens", 0.1),
        ("batch_tokens", "tokens", 0.6),
    ):
        lo, hi = laws[t]["exponents_ci"][p]
        assert lo <= true <= hi, (t, p, lo, hi)
    conv = laws["lr"]["conventions"]
    assert (conv["n_params"], conv["n_params_source"]) == ("non-embedding", "as imported")
    stored = list_laws(sweep, sqlite_url)
    assert [law.id for law in stored] == [laws["lr"]["id"], laws["batch_tokens"]["id"]]


def test_fit_one_target_and_laws_listing(sweep: str, sqlite_url: str, cli) -> None:
    code, out, err = cli(
        "fit", sweep, "--target", "lr", "--predictors", "n_params", "--method", "band",
        "--bootstrap", "100", "--json", "--storage", sqlite_url,
    )  # fmt: skip
    assert code == 0, err
    (law,) = json.loads(out)["laws"]
    assert set(law) >= POWER_KEYS and law["predictors"] == ["n_params"]
    assert law["method"].startswith("band0.0025")

    code, out, err = cli(
        "fit", sweep, "--target", "loss", "--bootstrap", "40", "--json", "--storage", sqlite_url
    )
    assert code == 0, err
    (loss,) = json.loads(out)["laws"]
    assert set(loss) >= LOSS_KEYS and loss["target"] == "loss" and loss["n_points"] == 12

    code, out, err = cli("laws", "--json", "--storage", sqlite_url)
    assert code == 0, err
    listed = json.loads(out)["laws"]
    assert [d["id"] for d in listed] == [law["id"], loss["id"]]
    assert all("boot_coefs" not in d for d in listed)
    code, out, _ = cli("laws", sweep, "--json", "--storage", sqlite_url)
    assert [d["id"] for d in json.loads(out)["laws"]] == [law["id"], loss["id"]]

    code, out, err = cli("laws", "show", str(law["id"]), "--json", "--storage", sqlite_url)
    assert code == 0, err
    full = json.loads(out)
    assert set(full) >= POWER_KEYS and len(full["boot_coefs"]) == 100
    assert full["exponents"] == law["exponents"] and full["created_at"]

    code, out, err = cli("laws", sweep, "--storage", sqlite_url)
    assert code == 0 and "band0.0025-runs+ols" in out and "huber-lbfgs/best" in out
    code, out, err = cli("laws", "show", str(loss["id"]), "--storage", sqlite_url)
    assert code == 0 and "compute-optimal" in out and "alpha" in out


def test_fit_human_output_names_left_out_cells(sqlite_url: str, cli, tmp_path: Path) -> None:
    law = (2.0, {"n_params": -0.5})
    ok = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(1e8,), lr_law=law, seed=1)
    # a cell whose LR grid stops below its optimum is on the edge: reported, not fitted
    edge = synthetic_sweep(n_params=(2e6,), tokens=(1e8,), lr_law=law, lr_steps=(-8, -1))
    path = write_csv(pd.concat([ok, edge], ignore_index=True), tmp_path / "mixed.csv")
    assert cli("import", path, "--sweep", "mixed", "--storage", sqlite_url)[0] == 0
    argv = ("fit", "mixed", "--bootstrap", "50", "--no-store", "--storage", sqlite_url)
    code, out, err = cli(*argv, "--method", "parabola")
    assert code == 0, err
    assert "lr law (not stored) of mixed" in out and "exponent of n_params" in out
    assert "tokens" not in out.split("conventions")[0]  # tokens does not vary: not a predictor
    assert "left out N2e06-D1e08: LR optimum on the high edge" in " ".join(out.split())
    flat = " ".join(out.split())
    assert "note: only 3 cells: the intervals are wide" in flat  # a doubtful result
    assert "note: intervals: t interval, 1 degree of freedom" in flat
    # the surface (the default) fits the edge cell through the other cells' curve, and says so
    code, out, err = cli(*argv)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "lr law (not stored) of mixed (surface)" in flat
    assert "best run on the edge of its LR range" in flat and "N2e06-D1e08 (top)" in flat
    assert "resampled fits failed" not in flat  # every refit converges, even at 4 cells
    assert list_laws("mixed", sqlite_url) == []


def test_two_stage_options_are_refused_by_the_surface(sweep: str, sqlite_url: str, cli) -> None:
    code, _, err = cli("fit", sweep, "--keep-edge", "--huber", "--storage", sqlite_url)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("sweeper: error: ")
    assert "--keep-edge, --huber: options of --method parabola or band, not of surface" in err
    assert list_laws(sweep, sqlite_url) == []  # nothing stored
    argv = ("fit", sweep, "--method", "band", "--keep-edge", "--bootstrap", "40", "--no-store")
    assert cli(*argv, "--storage", sqlite_url)[0] == 0
    # and the surface's settings by the others, a band of inf by all (a robustness audit: both
    # were taken in silence)
    code, _, err = cli(*argv, "--surface", "planner", "--storage", sqlite_url)
    assert code == 2 and "--surface planner: an option of --method surface, not of band" in err
    code, _, err = cli(*argv, "--band", "inf", "--storage", sqlite_url)
    assert code == 2 and "--band must be a positive, finite loss fraction" in err


def test_compare_json(sweep: str, sqlite_url: str, cli) -> None:
    code, out, err = cli("compare", sweep, "--storage", sqlite_url)
    assert code == 2 and "run `sweeper fit syn` first" in err
    assert cli("fit", sweep, "--bootstrap", "100", "--storage", sqlite_url)[0] == 0
    code, out, err = cli(
        "compare", sweep, "--width", "4096", "--depth", "32", "--context", "4096",
        "--tokens", "2e12", "--json", "--storage", sqlite_url,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sweep"] == sweep
    labels = {d["label"] for d in doc["laws"]}
    assert {"deepseek", "steplaw", "kaplan"} <= labels and len(labels) == 5
    assert len(doc["laws"]) == 2 + 5  # fitted lr and batch; published lr and batch (kaplan: lr)
    points = {r["point"] for r in doc["predictions"]}
    assert "target" in points and len(points) == 13
    target = [r for r in doc["predictions"] if r["point"] == "target"]
    # the target has width/depth/context: DeepSeek's M = 72·L·d² + 12·L·d·T, no approximation
    assert all(r["note"] == "" for r in target if r["source"] == "deepseek")
    fitted_lr = [r for r in target if r["source"] == sweep and r["target"] == "lr"]
    assert fitted_lr and all(r["low"] < r["value"] < r["high"] for r in fitted_lr)
    row = next(r for r in doc["predictions"] if r["point"] != "target" and r["source"] == sweep)
    assert row["measured"] > 0 and row["ratio"] == pytest.approx(row["value"] / row["measured"])
    assert {"target", "predictor", "fitted", "low", "high", "published", "inside"} <= set(
        doc["exponents"][0]
    )
    # --vocab gives the target its total N for Porian's law (N with the output layer)
    for vocab, head in (([], 0.0), (["--vocab", "50304"], 50304 * 4096)):
        code, out, err = cli("compare", sweep, "--width", "4096", "--depth", "32", "--tokens",
                             "2e12", "--published", "porian", "--json", *vocab,
                             "--storage", sqlite_url)  # fmt: skip
        row = next(r for r in json.loads(out)["predictions"]
                   if r["point"] == "target" and r["law"] == "porian" and r["target"] == "lr")  # fmt: skip
        n = 12 * 32 * 4096**2 + head
        assert row["value"] == pytest.approx(0.0047 * (n / 108e6) ** (-1 / 3), rel=1e-6)


def test_errors_are_one_line_exit_2(sqlite_url: str, cli) -> None:
    for argv in (
        ("fit", "nope"),
        ("laws", "show", "99"),
        ("laws", "show", "x"),
        ("compare", "nope"),
        ("import", "/nonexistent.csv", "--sweep", "x"),
        ("import", "/nonexistent.csv", "--sweep", "x", "--rename", "novalue"),
    ):
        code, _, err = cli(*argv, "--storage", sqlite_url)
        assert code == 2, argv
        assert len(err.strip().splitlines()) == 1 and err.startswith("sweeper: error: "), (
            argv,
            err,
        )


def test_a_sweep_named_show_is_listed_by_laws_show(tmp_path: Path, sqlite_url: str, cli) -> None:
    """`laws show` alone lists the laws of a sweep named "show" (it had been refused as
    `laws show ID` missing its ID); without such a sweep it is still that usage error."""
    runs = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(1e8,), seed=1)
    path = write_csv(runs, tmp_path / "s.csv")
    assert cli("import", path, "--sweep", "other", "--storage", sqlite_url)[0] == 0
    code, _, err = cli("laws", "show", "--storage", sqlite_url)
    assert code == 2 and "usage: sweeper laws show ID|NAME" in err
    assert cli("import", path, "--sweep", "show", "--storage", sqlite_url)[0] == 0
    code, out, err = cli("fit", "show", "--target", "lr", "--bootstrap", "0", "--json",
                         "--storage", sqlite_url)  # fmt: skip
    assert code == 0, err
    (law,) = json.loads(out)["laws"]
    code, out, err = cli("laws", "show", "--json", "--storage", sqlite_url)
    assert code == 0, err
    assert [d["id"] for d in json.loads(out)["laws"]] == [law["id"]]


def test_loss_only_data(tmp_path: Path, sqlite_url: str, cli) -> None:
    """A file of (n_params, tokens, loss) is enough for the loss law, and says so for the LR."""
    pts = synthetic_sweep(n_params=(1e6, 4e6, 1.6e7), tokens=(1e8, 4e8, 1.6e9), seed=5)
    best = pts[~pts["diverged"]].groupby(["n_params", "tokens"], as_index=False)["loss"].min()
    path = write_csv(best, tmp_path / "points.csv")
    assert cli("import", path, "--sweep", "pts", "--storage", sqlite_url)[0] == 0
    code, _, err = cli("fit", "pts", "--storage", sqlite_url)
    assert code == 2 and "only the loss law fits (--target loss)" in err
    code, out, err = cli(
        "fit", "pts", "--target", "loss", "--bootstrap", "0", "--storage", sqlite_url
    )
    assert code == 0, err
    assert "loss law #1 of pts" in out and "compute-optimal" in out


def test_import_help_documents_the_steplaw_command(cli, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli("import", "--help")
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert '--rename "smooth loss=loss" --seq-len 2048' in out and "--rename N=n_params" in out


def test_verb_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, sweeper.cli.fitting as f, argparse;"
        "p = argparse.ArgumentParser(); f.register(p.add_subparsers());"
        "heavy = [m for m in ('pandas', 'scipy', 'numpy', 'torch', 'ray', 'optuna', 'matplotlib')"
        " if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_fit_a_launched_sweep(sqlite_url: str, cli) -> None:
    """Runs of a launched sweep come through sweeper.study.sweep.load_sweep_runs (trials told as the
    launcher tells them, without Ray); laws record the sweep's parametrization and conventions."""
    launch_fake(LAUNCHED_STUDY, sqlite_url)
    code, out, err = cli("fit", "launched", "--bootstrap", "200", "--json", "--storage", sqlite_url)
    assert code == 0, err
    (law,) = json.loads(out)["laws"]  # batch not swept: one law, in the list as any count is
    assert law["target"] == "lr" and law["n_cells"] == 3 and law["parametrization"] == "sp"
    assert law["predictors"] == ["n_params"]  # tokens is the same in every cell
    conv = law["conventions"]
    assert conv["n_params"] == "non-embedding"
    # byte-level built-in data, the default study's schedule, what the cells held fixed
    assert (conv["tokens"], conv["vocab_size"], conv["data"]) == ("bytes", 256, "builtin")
    assert (conv["schedule"], conv["warmup"], conv["z_loss"]) == ("cosine", 0.1, 0.0)
    assert conv["lr"] == "peak AdamW LR, warmup 10% of steps, cosine to 10%"
    assert conv["output_mult"] == 1.0
    assert conv["held"]["tokens"] == [32768.0, 32768.0]
    assert conv["held"]["batch_tokens"] == [8 * 64.0, 8 * 64.0]
    assert "tokens 3.28e+04" in conv["held_fixed"]
    # lr ∝ width^-0.8 and N ∝ width² (non-embedding): an N exponent near -0.4
    assert -0.5 < law["exponents"]["n_params"] < -0.3, law["exponents"]


MUP_WSD_STUDY = """\
[sweep]
name = "mupwsd"
trials_per_cell = 9

[model]
context = 64
parametrization = "mup"
base_width = 16
init_std = 0.01
output_mult = 4.0

[train]
schedule = "wsd"
min_lr_ratio = 0.0
z_loss = 1e-4

[ladder]
widths = [16, 32, 64]
depths = [2]
tokens = [32768]

[search]
lr = { low = 1e-4, high = 1e-1, log = true }
batch_size = 8
warmup = 0.05
"""


def test_launched_conventions_reach_the_recipe(sqlite_url: str, cli) -> None:
    """A muP sweep trained with WSD to 0, 5% warmup, z-loss 1e-4 and init std 0.01: the law says
    so, and the recipe exports the proxies' init std and runs their WSD (warning about the
    schedule only when --schedule changes it)."""
    launch_fake(MUP_WSD_STUDY, sqlite_url, exponent=0.0)
    code, out, err = cli("fit", "mupwsd", "--bootstrap", "50", "--json", "--storage", sqlite_url)
    assert code == 0, err
    conv = json.loads(out)["laws"][0]["conventions"]
    assert conv["schedule"] == "wsd" and conv["min_lr_ratio"] == 0.0
    assert conv["warmup"] == 0.05 and conv["z_loss"] == 0.0001
    assert conv["init_std"] == 0.01 and conv["decay_fraction"] == 0.2
    assert conv["output_mult"] == 4.0
    assert "WSD" in conv["lr"] and "warmup 5% of steps" in conv["lr"]
    code, out, err = cli(
        "recommend", "mupwsd", "--width", "1024", "--depth", "8", "--tokens", "1e9",
        "--parametrization", "mup", "--context", "64", "--vocab", "256",
        "--storage", sqlite_url, "--json",
    )  # fmt: skip
    assert code == 0, err
    r = json.loads(out)
    assert r["init_std"] == 0.01 and r["base_width"] == 16
    assert r["hidden_init_std"] == pytest.approx(0.01 * (16 / 1024) ** 0.5)
    assert r["provenance"]["lr"]["conventions"]["output_mult"] == 4.0
    # the recipe runs the schedule the LR was measured under: no schedule warning
    assert (r["schedule"], r["min_lr_ratio"], r["decay_fraction"]) == ("wsd", 0.0, 0.2)
    assert not [w for w in r["warnings"] if "LR of the lr law" in w]
    assert not any("in bytes" in w for w in r["warnings"])  # a byte-level target (vocab 256)
    code, out, err = cli(
        "recommend", "mupwsd", "--width", "1024", "--depth", "8", "--tokens", "1e9",
        "--parametrization", "mup", "--context", "64", "--vocab", "256",
        "--storage", sqlite_url, "--json", "--schedule", "cosine", "--min-lr-ratio", "0.1",
    )  # fmt: skip
    assert code == 0, err
    sched = [w for w in json.loads(out)["warnings"] if "LR of the lr law" in w]
    assert len(sched) == 1 and "a wsd schedule" in sched[0] and "decay to 0% of peak" in sched[0]
    assert "z-loss" not in sched[0]  # 1e-4 in both


def test_imported_flops_convention(sweep: str, sqlite_url: str, cli) -> None:
    """Imported runs without a flops column get 6·N·D filled in: the law says no attention."""
    code, out, err = cli(
        "fit", sweep, "--target", "lr", "--bootstrap", "0",
        "--no-store", "--json", "--storage", sqlite_url,
    )  # fmt: skip
    assert code == 0, err
    conv = json.loads(out)["laws"][0]["conventions"]
    assert conv["flops"] == "6ND (no attention)" and conv["tokens"] == "as imported"
    assert conv["init_std"] is None and conv["schedule"] is None and conv["output_mult"] == 1.0


def test_compare_and_recommend_count_target_flops_alike() -> None:
    """A law on flops evaluated at the same target by compare and by recommend gives one value
    (compare used to take 6·N·D for the target even with its shape given)."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.compare import compare_laws, target_point
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.target import Target

    law = PowerLaw(
        conventions=Conventions.from_json({"flops": "6ND"}, law={"parametrization": "sp"}),
        target="lr",
        predictors=("flops",),
        source="f",
        method="test",
        domain={"flops": (1e15, 1e18)},
        log_prefactor=np.log(5.0),
        exponents={"flops": -0.12},
    )
    for shape in ({"width": 2048, "depth": 24, "context": 4096}, {}):
        n = 12 * 24 * 2048**2
        tp = target_point(tokens=1e11, n_params=None if shape else n, **shape)
        row = compare_laws([law], tp).iloc[0]
        t = Target(n_params=None if shape else n, tokens=1e11, **shape)
        r = recommend({"lr": law}, t)
        assert row["value"] == pytest.approx(r.lr.value, rel=1e-12)
        assert tp["flops"].iloc[0] == pytest.approx(r.flops, rel=1e-12)
        assert (row["note"] == "") == bool(shape)


def test_compare_marks_points_below_a_law_domain_too(sweep: str, sqlite_url: str, cli) -> None:
    """A tiny proxy is as far outside Step Law's domain (N 6e7-1.07e9, D 2e9-1e11) as a huge
    target is: compare marked only points above a domain, so the published law's values at the
    cells read as if measured there."""
    from sweeper.recipe.compare import compare_laws, target_point
    from sweeper.recipe.published import published_laws

    lr = published_laws("steplaw")["lr"]
    points = pd.concat(
        [target_point(n_params=1e5, tokens=1e8), target_point(n_params=2e8, tokens=1e10)]
    )
    below, inside = compare_laws([lr], points).to_dict("records")
    assert below["side"] == "below" and below["extrapolation"] == pytest.approx(6e7 / 1e5)
    assert inside["side"] == "" and inside["extrapolation"] == 1.0
    far = compare_laws([lr], target_point(n_params=1e11, tokens=1e10)).iloc[0]
    assert far["side"] == "above" and far["extrapolation"] == pytest.approx(1e11 / 1.07e9)
    assert cli("fit", sweep, "--bootstrap", "0", "--storage", sqlite_url)[0] == 0
    code, out, err = cli("compare", sweep, "--storage", sqlite_url)
    assert code == 0, err
    assert re.search(r"\(×\S+ below\)", out), out
    # the intervals are the law's on its line, not a cell's (an import audit read a cell outside
    # them as the law failing there)
    assert "[low, high]: the law's 95% interval on its line" in " ".join(out.split())


def test_the_law_table_names_a_surface_laws_scatter_and_open_bounds(
    sweep: str, sqlite_url: str, cli
) -> None:
    """A surface law's residual_std is τ, the cells' scatter beyond their optima's own errors:
    printed as "residual std 0.000" it read as an exact fit. A missing bound printed as
    "[0, ]"."""
    from sweeper.cli.fitting import _ci

    code, out, err = cli("fit", sweep, "--bootstrap", "0", "--no-store", "--storage", sqlite_url)
    assert code == 0, err
    assert "cells' scatter about the law (τ)" in out and "residual std" not in out
    code, out, err = cli(
        "fit", sweep, "--method", "parabola", "--no-store", "--storage", sqlite_url
    )
    assert code == 0 and "residual std" in out, err
    assert _ci([0.0, None]) == "[0, ∞)" and _ci([float("-inf"), 2.0]) == "(-∞, 2]"


def test_compare_says_where_a_fitted_law_and_the_published_differ_in_convention() -> None:
    """The audit's byte-level muP law stood beside token-level SP laws with no caveat (check warns
    or refuses there); Porian's N, which counts the output layer, was evaluated without it."""
    from dataclasses import replace

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.compare import compare_laws, convention_notes, target_point
    from sweeper.recipe.published import published_laws

    conv = replace(Conventions(), parametrization="mup", base_width=64, held={"tokens": (8e5, 8e5)})
    law = PowerLaw(
        conventions=conv, target="lr", predictors=("n_params",), source="mine", method="surface",
        domain={"n_params": (1e5, 1e7)}, log_prefactor=np.log(0.01), exponents={"n_params": -0.1},
    )  # fmt: skip
    pub = [*published_laws("porian").values(), *published_laws("steplaw").values()]
    notes = "\n".join(convention_notes([law], pub))
    assert "counts D and the batch in bytes" in notes
    assert "measured under mup" in notes and "base width 64" in notes
    assert "porian has no D term" in notes and "steplaw has no D term" not in notes
    assert "porian peak AdamW LR, constant after warmup" in notes
    # a muP sweep's batch law is no 'mup model's LR' (an import audit read that in compare)
    batch = replace(law, target="batch_tokens")
    assert "measured under mup" not in "\n".join(convention_notes([batch], pub))
    plain = replace(Conventions(tokens="tokens"), parametrization="sp", lr=pub[2].conventions.lr)
    assert convention_notes([replace(law, conventions=plain)], pub[2:]) == []
    # Porian's N counts the output layer: with a total count at the point it is added
    porian = published_laws("porian")["lr"]
    with_total = target_point(tokens=1e10, n_params=1e8).assign(n_params_total=1.5e8)
    without = target_point(tokens=1e10, n_params=1e8)
    a, b = compare_laws([porian], with_total).iloc[0], compare_laws([porian], without).iloc[0]
    assert a["value"] == pytest.approx(porian.predict({"n_params": 1.25e8}))
    assert b["value"] == pytest.approx(porian.predict({"n_params": 1e8}))
    assert "counts N with the output layer; this point gives no total" in b["note"]
    assert a["note"] == ""


def test_compare_says_a_compute_law_grew_along_no_one_allocation() -> None:
    """The quickstart's compute law (one D, so an N exponent) read "inside" DeepSeek's, whose
    budgets grow N and D together, with no word (an audit); a ladder at one tokens-per-parameter
    ratio gets no note."""
    from dataclasses import replace

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.compare import convention_notes
    from sweeper.recipe.published import published_laws

    conv = replace(Conventions(tokens="tokens"), held={"tokens_per_param": (2.08, 33.1)})
    law = PowerLaw(
        conventions=conv, target="lr", predictors=("flops",), source="mine", method="surface",
        domain={"flops": (1.6e11, 2.1e12)}, log_prefactor=np.log(10.9), exponents={"flops": -0.29},
    )  # fmt: skip
    deepseek = list(published_laws("deepseek").values())
    notes = "\n".join(convention_notes([law], deepseek))
    assert "cells span 2.08-33.1 tokens per parameter" in notes and "deepseek's along" in notes
    one = replace(law, conventions=replace(conv, held={"tokens_per_param": (19.0, 21.0)}))
    assert "tokens per parameter" not in "\n".join(convention_notes([one], deepseek))


def test_compare_sets_a_coupled_lr_law_beside_a_cell_at_its_best_batch(tmp_path) -> None:
    """A surface law of a batch sweep gives the optimum at its batch law's B*; a cell's measured
    optimum is at the cell's best batch. compare moved neither (on Step Law's runs the law sat
    +0.42 octave above the cells' optima; +0.32 at their batches)."""
    import math

    import sweeper

    url = f"sqlite:///{tmp_path / 'b.db'}"
    repo = Path(__file__).resolve().parents[3]
    sweeper.import_runs(repo / "docs" / "data" / "batch_ladder.csv", sweep="bl", storage=url)
    laws = sweeper.fit("bl", storage=url, n_boot=0)
    lr = next(x for x in laws if x.target == "lr")
    bt = next(x for x in laws if x.target == "batch_tokens")
    c = sweeper.compare("bl", storage=url, published=[])
    rows = c.predictions[(c.predictions["target"] == "lr") & c.predictions["note"].str.contains(
        "best batch")]  # fmt: skip
    assert len(rows), c.predictions[["point", "note"]]
    row = rows.iloc[0]
    runs = sweeper.runs("bl", storage=url)
    cell = runs[runs["cell"] == row["point"]].iloc[0]
    b = next(m for m in c.predictions.itertuples() if m.point == row["point"]
             and m.target == "batch_tokens").measured  # fmt: skip
    scale = {p: float(cell[p]) for p in lr.predictors}
    own = bt.predict({p: float(cell[p]) for p in bt.predictors})
    assert row["value"] == pytest.approx(lr.predict(scale) * lr.batch_shift(b / own), rel=1e-9)
    assert abs(math.log2(row["value"] / lr.predict(scale))) >= 0.05
    assert any("at the cell's best batch" in n for n in c.notes)


def test_compare_converts_byte_laws_with_bytes_per_token(
    sweep: str, sqlite_url: str, cli, tmp_path: Path
) -> None:
    """compare had no --bytes-per-token: a byte-level sweep's laws took the target's D in tokens
    as bytes (its batch law's value in bytes beside the published laws' tokens), and the
    published laws took the cells' bytes as tokens. recommend converts; compare now does too, at
    the target (the byte law at D·R, its batch ÷ R) and at the cells (the published at D / R,
    their batch × R)."""
    from dataclasses import replace

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.compare import cell_points, compare_laws, convention_notes, target_point
    from sweeper.recipe.published import published_laws

    conv = replace(Conventions(), held={"n_params": (1e5, 1e5)})
    assert conv.counts_bytes
    batch = PowerLaw(
        conventions=conv, target="batch_tokens", predictors=("tokens",), source="mine",
        method="surface", domain={"tokens": (1e5, 1e7)}, log_prefactor=np.log(0.5),
        exponents={"tokens": 0.5},
    )  # fmt: skip
    steplaw = published_laws("steplaw")["batch_tokens"]
    target = target_point(tokens=1e10, n_params=1e8)
    cells = cell_points(
        pd.DataFrame({"cell": ["c"], "n_params": [1e5], "tokens": [4e6], "lr": [0.01],
                      "batch_tokens": [2e3], "batch_range_low": [64.0]}),
        counts_bytes=True,
    )  # fmt: skip
    both = pd.concat([cells, target], ignore_index=True)
    plain = compare_laws([batch, steplaw], both).set_index(["point", "law"])["value"]
    conv4 = compare_laws([batch, steplaw], both, bytes_per_token=4.0)
    conv4 = conv4.set_index(["point", "law"])["value"]
    mine, pub = "mine surface", "steplaw"
    assert plain[("target", mine)] == pytest.approx(0.5 * 1e10**0.5)  # bytes, read as tokens
    assert conv4[("target", mine)] == pytest.approx(0.5 * (4e10) ** 0.5 / 4)  # tokens
    assert conv4[("c", mine)] == pytest.approx(plain[("c", mine)])  # its own unit at its cells
    at_tokens = steplaw.predict({"n_params": 1e5, "tokens": 1e6})
    assert conv4[("c", pub)] == pytest.approx(at_tokens * 4)  # bytes, beside the measured 2e3
    assert conv4[("target", pub)] == pytest.approx(plain[("target", pub)])
    notes = "\n".join(convention_notes([batch], [steplaw], bytes_per_token=4.0))
    assert "converted at 4 bytes per token" in notes and "do not" not in notes
    assert "--bytes-per-token" in "\n".join(convention_notes([batch], [steplaw]))
    tok = replace(batch, conventions=replace(conv, tokens="tokens"))
    assert "is not used" in "\n".join(convention_notes([tok], [steplaw], bytes_per_token=4.0))
    # the verb, on the synthetic runs declared as bytes
    csv, url = str(tmp_path / "syn.csv"), sqlite_url
    imp = ("import", csv, "--sweep", "b", "--convention", "tokens=bytes", "--storage", url)
    assert cli(*imp)[0] == 0
    assert cli("fit", "b", "--bootstrap", "0", "--storage", url)[0] == 0
    args = ("compare", "b", "--params", "1e9", "--tokens", "2e10", "--storage", url)
    code, out, err = cli(*args, "--bytes-per-token", "4", "--json")
    assert code == 0, err
    assert any("converted at 4 bytes per token" in n for n in json.loads(out)["notes"])
    assert cli("fit", sweep, "--bootstrap", "0", "--storage", url)[0] == 0  # (as imported)
    code, out, err = cli("compare", sweep, "--bytes-per-token", "4", "--storage", url)
    assert code == 0 and "is not used: no law here counts bytes" in out, err
    from sweeper import api
    from sweeper.errors import TargetError

    with pytest.raises(TargetError, match="bytes_per_token must be positive"):
        api.compare("b", storage=url, bytes_per_token=0.0)


def test_the_law_table_says_when_an_exponents_sign_is_not_determined(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The report flagged an exponent whose interval includes 0 as '(sign not determined)';
    `sweeper fit` printed N^0.188 [-2.67, 15.1] bare beside it (a law-sampler audit)."""
    from dataclasses import replace

    from sweeper.cli.fitting import _print_law
    from sweeper.recipe.published import published_laws

    law = published_laws("deepseek")["lr"]
    p = law.predictors[0]
    fitted = replace(law, method="surface", exponents_ci={p: (-2.67, 15.1)})
    _print_law(fitted, "s")
    assert "(sign not determined)" in capsys.readouterr().out
    _print_law(replace(fitted, exponents_ci={p: (-0.3, -0.1)}), "s")
    assert "sign not determined" not in capsys.readouterr().out


def test_compare_marks_a_value_its_law_does_not_determine_and_gives_each_rows_unit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A compare audit: a law's LR of 20 [0.12, 3.3e+03] at a 7B target was a row like any
    other (check marks it undetermined and recommend refuses it), and a batch row's value was in
    bytes at a byte-level sweep's cells and in tokens at the target with no unit in the JSON."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.compare import cell_points, compare_laws, target_point

    rng = np.random.default_rng(0)
    draws = np.column_stack([rng.normal(0, 0.1, 200), rng.normal(-0.3, 0.08, 200)])
    boot = tuple((float(a), float(b)) for a, b in draws)
    wide = PowerLaw(
        conventions=Conventions(), target="lr", predictors=("n_params",), source="w",
        method="test", domain={"n_params": (1e5, 1e6)}, log_prefactor=0.0,
        exponents={"n_params": -0.3}, boot_coefs=boot,
    )  # fmt: skip
    near, far = compare_laws([wide], pd.concat(
        [target_point(n_params=2e5, tokens=1e8), target_point(n_params=1e12, tokens=1e12)]
    )).to_dict("records")  # fmt: skip
    assert not near["undetermined"] and "does not determine" not in near["note"]
    assert far["undetermined"] and far["high"] / far["low"] > 1000
    assert "the law does not determine the value (recommend refuses it)" in far["note"]
    assert near["unit"] == far["unit"] == ""
    batch = PowerLaw(
        conventions=Conventions(), target="batch_tokens", predictors=("tokens",), source="b",
        method="test", domain={"tokens": (1e5, 1e7)}, log_prefactor=0.0,
        exponents={"tokens": 0.5},
    )  # fmt: skip
    cells = cell_points(
        pd.DataFrame({"cell": ["c"], "n_params": [1e5], "tokens": [4e6], "lr": [0.01],
                      "batch_tokens": [2e3], "batch_range_low": [64.0]}),
        counts_bytes=True,
    )  # fmt: skip
    units = compare_laws([batch], pd.concat([cells, target_point(tokens=1e10, n_params=1e8)]))
    assert list(units["unit"]) == ["bytes", "tokens"]
    # the CLI's table says it beside the value
    from sweeper.cli.fitting import _print_comparison

    _print_comparison("s", [wide], pd.DataFrame(), compare_laws([wide], pd.concat(
        [target_point(n_params=2e5, tokens=1e8).assign(point="near"),
         target_point(n_params=1e12, tokens=1e12)]
    )))  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert "undetermined" not in next(line for line in out if "│ near" in line)
    assert "undetermined" in next(line for line in out if "│ target" in line)

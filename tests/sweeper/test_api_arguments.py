"""A caller's mistake through ``import sweeper`` is a SweeperError naming the argument as the caller
wrote it, not a bare TypeError, AttributeError or ValueError from deep inside (a robustness
audit's calls, one case each); and the calls that were right behave as before."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sweeper
from sweeper.errors import (
    FitError,
    ImportDataError,
    StorageError,
    StudyError,
    SweeperError,
    TargetError,
)

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "docs/data/quickstart.csv"
STUDY = REPO / "studies/quickstart.toml"
AT = {"n_params": 1e8, "tokens": 2e9}


@dataclass(frozen=True)
class Setup:
    """The quickstart sweep imported with its study and fitted, as the audit set it up."""

    url: str
    recipe: sweeper.Recipe
    spec: sweeper.StudySpec
    df: pd.DataFrame
    tmp: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    tmp = tmp_path_factory.mktemp("api_arguments")
    url = f"sqlite:///{tmp / 'q.db'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweeper.import_runs(CSV, sweep="quickstart", study=STUDY, storage=url)
        sweeper.fit("quickstart", storage=url)
        recipe = sweeper.recommend("quickstart", at=AT, storage=url, force=True)
    return Setup(url, recipe, sweeper.load_study(STUDY), sweeper.runs("quickstart", storage=url),
                 tmp)  # fmt: skip


def _recommend(s: Setup, **options: Any) -> Any:
    return sweeper.recommend("quickstart", at=AT, storage=s.url, force=True, **options)


def _import(s: Setup, **kw: Any) -> Any:
    kw = {"sweep": "other", "storage": f"sqlite:///{s.tmp / 'import.db'}", **kw}
    return sweeper.import_runs(kw.pop("path", CSV), **kw)


def _bad_conventions(s: Setup) -> pd.DataFrame:
    df = s.df.copy()
    df.attrs["sweeper_conventions"] = "{not json"
    return df


Call = Callable[[Setup], Any]
# fmt: off
#: (id, the error, what its message says first, the call)
CASES: list[tuple[str, type[SweeperError], str, Call]] = [
    # recommend
    ("min_lr_ratio-str", TargetError, "min_lr_ratio must be a number",
     lambda s: _recommend(s, min_lr_ratio="0.1")),
    ("decay_fraction-str", TargetError, "decay_fraction must be a number",
     lambda s: _recommend(s, schedule="wsd", decay_fraction="x")),
    ("defaults-str", TargetError, "defaults is a RecipeDefaults or a mapping",
     lambda s: _recommend(s, defaults="x")),
    ("defaults-unknown-key", TargetError, "unknown defaults field 'warmup'",
     lambda s: _recommend(s, defaults={"warmup": 5})),
    ("defaults-bad-value", TargetError, "defaults.rampup_increments must be a whole number",
     lambda s: _recommend(s, defaults={"rampup_increments": 0})),
    ("rampup-str", TargetError, "rampup must be a bool", lambda s: _recommend(s, rampup="x")),
    ("rampup-int", TargetError, "rampup must be a bool", lambda s: _recommend(s, rampup=-1)),
    ("force-str", TargetError, "force must be a bool",
     lambda s: sweeper.recommend("quickstart", at=AT, storage=s.url, force="no")),
    # export
    ("export-format-list", TargetError, "format must be a string",
     lambda s: sweeper.export(s.recipe, ["litgpt"])),
    ("export-None", TargetError, "recipe must be a Recipe",
     lambda s: sweeper.export(None, "litgpt")),
    ("export-dict", TargetError, "recipe must be a Recipe",
     lambda s: sweeper.export({}, "litgpt")),
    ("export-law", TargetError, "recipe must be a Recipe",
     lambda s: sweeper.export(sweeper.laws("quickstart", storage=s.url)[0], "litgpt")),
    ("export-name", TargetError, "recipe must be a Recipe",
     lambda s: sweeper.export("quickstart", "litgpt")),
    ("export-allow-str", TargetError, "allow_inexpressible must be a bool",
     lambda s: sweeper.export(s.recipe, "litgpt", allow_inexpressible="no")),
    # sweep names and storages
    ("runs-None", StorageError, "sweep must be a sweep's name",
     lambda s: sweeper.runs(None, storage=s.url)),
    ("runs-int", StorageError, "sweep must be a sweep's name",
     lambda s: sweeper.runs(5, storage=s.url)),
    ("laws-int", StorageError, "sweep must be a sweep's name",
     lambda s: sweeper.laws(5, storage=s.url)),
    ("laws-law", StorageError, "sweep must be a sweep's name",
     lambda s: sweeper.laws(sweeper.published_laws("steplaw")["lr"], storage=s.url)),
    ("status-int", StorageError, "sweep must be a sweep's name",
     lambda s: sweeper.status(5, storage=s.url)),
    ("status-list", StorageError, "sweep must be a sweep's name",
     lambda s: sweeper.status(["a"], storage=s.url)),
    ("diff-None", StorageError, "sweep_a must be a sweep's name",
     lambda s: sweeper.diff(None, "quickstart", storage=s.url)),
    ("runs-storage-int", StorageError, "storage must be a SQLAlchemy URL",
     lambda s: sweeper.runs("quickstart", storage=5)),
    ("runs-storage-list", StorageError, "storage must be a SQLAlchemy URL",
     lambda s: sweeper.runs("quickstart", storage=[s.url])),
    ("sweeps-storage-int", StorageError, "storage must be a SQLAlchemy URL",
     lambda s: sweeper.sweeps(storage=5)),
    ("law-huge", StorageError, "a law id is a whole number from 1 to",
     lambda s: sweeper.law(10**30, storage=s.url)),
    ("law-huge-text", StorageError, "a law id is a whole number from 1 to",
     lambda s: sweeper.law("1" * 40, storage=s.url)),
    ("published-None", SweeperError, "name must be a published law set's name",
     lambda s: sweeper.published_laws(None)),
    ("published-list", SweeperError, "name must be a published law set's name",
     lambda s: sweeper.published_laws(["steplaw"])),
    # fit
    ("fit-predictors-int", FitError, "predictors must be",
     lambda s: sweeper.fit("quickstart", storage=s.url, predictors=3)),
    ("fit-seed-str", FitError, "seed must be an integer >= 0",
     lambda s: sweeper.fit("quickstart", storage=s.url, seed="x")),
    ("fit-seed-float", FitError, "seed must be an integer >= 0",
     lambda s: sweeper.fit("quickstart", storage=s.url, seed=1.5)),
    ("fit-seed-negative", FitError, "seed must be an integer >= 0",
     lambda s: sweeper.fit("quickstart", storage=s.url, seed=-1)),
    ("fit-min_runs-str", FitError, "min_runs must be an integer >= 1",
     lambda s: sweeper.fit("quickstart", storage=s.url, min_runs="x")),
    ("fit-frame-conventions", FitError, r"data\.attrs\['sweeper_conventions'\] must be",
     lambda s: sweeper.fit(_bad_conventions(s))),
    ("fit-dict", FitError, "data must be a sweep's name, a Sweep or a runs DataFrame",
     lambda s: sweeper.fit(s.df.to_dict(), storage=s.url)),
    ("fit-list", FitError, "data must be a sweep's name, a Sweep or a runs DataFrame",
     lambda s: sweeper.fit([s.df], storage=s.url)),
    ("fit-list-of-names", FitError, "data must be a sweep's name",
     lambda s: sweeper.fit(["quickstart"], storage=s.url)),
    # check, compare
    ("check-None", TargetError, "recipes must be a published recipe's name",
     lambda s: sweeper.check(None, "quickstart", storage=s.url)),
    ("check-int", TargetError, "recipes must be a published recipe's name",
     lambda s: sweeper.check(5, "quickstart", storage=s.url)),
    ("check-dict", TargetError, "recipes must be a published recipe's name",
     lambda s: sweeper.check({"n_params": 1e9}, "quickstart", storage=s.url)),
    ("compare-published-None", TargetError, "published must be a string or a list of strings",
     lambda s: sweeper.compare("quickstart", storage=s.url, published=None)),
    # validate_transfer (refused before anything trains)
    ("holdout-None", SweeperError, r"holdout \(--holdout\) must be a string",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, holdout=None)),
    ("holdout-int", SweeperError, r"holdout \(--holdout\) must be a string",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, holdout=5)),
    ("holdout-list", SweeperError, r"holdout \(--holdout\) must be a string",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url,
                                         holdout=["largest"])),
    ("fit_cells-int", SweeperError, r"fit_cells \(--fit-cells\) must be a string or None",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, fit_cells=5)),
    ("fit_cells-list", SweeperError, r"fit_cells \(--fit-cells\) must be a string or None",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url,
                                         fit_cells=["width<=64"])),
    ("seeds-str", SweeperError, r"seeds \(--seeds\) must be an integer >= 1",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, seeds="2")),
    ("seeds-None", SweeperError, r"seeds \(--seeds\) must be an integer >= 1",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, seeds=None)),
    ("seeds-float", SweeperError, r"seeds \(--seeds\) must be an integer >= 1",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, seeds=1.5)),
    ("seeds-zero", SweeperError, r"seeds \(--seeds\) must be an integer >= 1",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, seeds=0)),
    ("max_concurrent-zero", StudyError, "max_concurrent .* must be an integer >= 1 or None",
     lambda s: sweeper.validate_transfer("quickstart", storage=s.url, max_concurrent=0)),
    # write_report
    ("report-out-None", SweeperError, r"out \(-o\) must be a path",
     lambda s: sweeper.write_report("quickstart", None, storage=s.url)),
    ("report-out-under-a-file", SweeperError, r"out \(-o\): .* exists and is not a folder",
     lambda s: sweeper.write_report("quickstart", Path(__file__) / "x", storage=s.url)),
    ("report-out-under-proc", SweeperError, r"out \(-o\): cannot write a report in /proc/x/y",
     lambda s: sweeper.write_report("quickstart", "/proc/x/y", storage=s.url)),
    ("report-recipe-str", SweeperError, "recipe must be a Recipe or its JSON form",
     lambda s: sweeper.write_report("quickstart", s.tmp / "r", storage=s.url,
                                    recipe="x")),
    ("report-at-str", SweeperError, "at must be a Target or a mapping",
     lambda s: sweeper.write_report("quickstart", s.tmp / "r", storage=s.url,
                                    at="1e9")),
    # a study, launch, estimate
    ("load_study-None", StudyError, "path must be a path",
     lambda s: sweeper.load_study(None)),
    ("load_study-int", StudyError, "path must be a path",
     lambda s: sweeper.load_study(5)),
    ("load_study-list", StudyError, "path must be a path",
     lambda s: sweeper.load_study(["x"])),
    ("launch-None", StudyError, "study must be a StudySpec or a path",
     lambda s: sweeper.launch(None)),
    ("launch-dict", StudyError, "study must be a StudySpec or a path",
     lambda s: sweeper.launch({})),
    ("estimate-None", StudyError, "study must be a StudySpec or a path",
     lambda s: sweeper.estimate(None)),
    ("estimate-steps-negative", StudyError, "steps .* must be an integer >= 1 or None",
     lambda s: sweeper.estimate(s.spec, steps=-1)),
    ("estimate-steps-str", StudyError, "steps .* must be an integer >= 1 or None",
     lambda s: sweeper.estimate(s.spec, steps="2")),
    ("estimate-steps-zero", StudyError, "steps .* must be an integer >= 1 or None",
     lambda s: sweeper.estimate(s.spec, steps=0)),
    ("estimate-cores-negative", StudyError, "cores must be an integer >= 1 or None",
     lambda s: sweeper.estimate(s.spec, steps=1, cores=-2)),
    ("estimate-cores-zero", StudyError, "cores must be an integer >= 1 or None",
     lambda s: sweeper.estimate(s.spec, steps=1, cores=0)),
    # import_runs
    ("import-sweep-int", ImportDataError, r"sweep \(--sweep\) must be a name",
     lambda s: _import(s, sweep=5)),
    ("import-rename-no-equals", ImportDataError, r"renames \(--rename\) takes OLD=NEW",
     lambda s: _import(s, renames=["loss"])),
    ("import-renames-int", ImportDataError, "renames must be a mapping",
     lambda s: _import(s, renames=5)),
    ("import-conventions-int", ImportDataError, r"conventions \(--convention\) must be",
     lambda s: _import(s, conventions=5)),
    ("import-path-None", ImportDataError, "path must be a file's path",
     lambda s: _import(s, path=None)),
    # coord_check (refused before anything trains)
    ("coord-widths-zero", StudyError, r"widths \(--widths\) must be a list of integers >= 1",
     lambda s: sweeper.coord_check(s.spec, widths=[0, 16], steps=1)),
    ("coord-widths-shape", StudyError, r"widths \(--widths\) 17 at depth 2: not a shape",
     lambda s: sweeper.coord_check(s.spec, widths=[16, 17], steps=1)),
    ("coord-widths-str", StudyError, r"widths \(--widths\) must be a list of integers >= 1",
     lambda s: sweeper.coord_check(s.spec, widths=["16", "32"], steps=1)),
    ("coord-widths-int", StudyError, r"widths \(--widths\) must be a list of integers >= 1",
     lambda s: sweeper.coord_check(s.spec, widths=16, steps=1)),
    ("coord-lr-negative", StudyError, "lr must be positive",
     lambda s: sweeper.coord_check(s.spec, lr=-1, steps=1)),
    ("coord-lr-nan", StudyError, "lr must be positive",
     lambda s: sweeper.coord_check(s.spec, lr=math.nan, steps=1)),
    ("coord-lr-str", StudyError, "lr must be a number",
     lambda s: sweeper.coord_check(s.spec, lr="x", steps=1)),
    ("coord-seed-str", StudyError, r"seed \(--seed\) must be an integer >= 0",
     lambda s: sweeper.coord_check(s.spec, seed="x", steps=1)),
    ("coord-study-None", StudyError, "study must be a StudySpec or a path",
     lambda s: sweeper.coord_check(None)),
    ("coord-depth-zero", StudyError, r"depth \(--depth\) must be an integer >= 1 or None",
     lambda s: sweeper.coord_check(s.spec, depth=0, steps=1)),
    ("coord-steps-negative", StudyError, r"steps \(--steps\) must be an integer >= 1",
     lambda s: sweeper.coord_check(s.spec, steps=-1)),
    ("coord-batch_size-zero", StudyError, r"batch_size \(--batch-size\) must be an integer >= 1",
     lambda s: sweeper.coord_check(s.spec, batch_size=0, steps=1)),
    # Hardware
    ("hardware-mfu-str", TargetError, r"mfu \(--mfu\) must be a number in \(0, 1\], got mfu='0.4'",
     lambda s: sweeper.Hardware(mfu="0.4")),
    ("hardware-mfu-bool", TargetError, "mfu \\(--mfu\\) must be a number",
     lambda s: sweeper.Hardware(mfu=True)),
    ("hardware-zero_stage-float", TargetError, r"zero_stage must be 0, 1, 2 or 3 \(an integer\)",
     lambda s: sweeper.Hardware(zero_stage=1.0)),
    ("hardware-flash-str", TargetError, "flash_attention must be True or False",
     lambda s: sweeper.Hardware(flash_attention="no")),
    ("hardware-recompute-None", TargetError, "recompute must be True or False",
     lambda s: sweeper.Hardware(recompute=None)),
    # diff's target
    ("diff-tokens-nan", TargetError, "tokens must be positive",
     lambda s: sweeper.diff("quickstart", "quickstart", storage=s.url, tokens=math.nan)),
    ("diff-params-str", TargetError, "params must be a number",
     lambda s: sweeper.diff("quickstart", "quickstart", storage=s.url,
                            params="1e9")),
]
# fmt: on


@pytest.mark.parametrize(("error", "message", "call"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_a_wrong_argument_is_a_sweeper_error_naming_it(
    setup: Setup, error: type[SweeperError], message: str, call: Call
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=f"^{message}") as e:
            call(setup)
    assert "\n" not in str(e.value), str(e.value)  # one line


def test_right_calls_behave_as_before(setup: Setup) -> None:
    """The forms the checks let through: a RecipeDefaults or a mapping of its fields, booleans,
    an integral ZeRO stage, a sweep given as a Sweep, a law id, a published recipe's name."""
    s = setup
    by_mapping = _recommend(s, defaults={"weight_decay": 0.05}, rampup=False)
    by_defaults = _recommend(s, defaults=sweeper.RecipeDefaults(weight_decay=0.05), rampup=False)
    assert by_mapping.to_dict() == by_defaults.to_dict()
    assert by_mapping.weight_decay == 0.05
    assert _recommend(s, min_lr_ratio=0.2).min_lr_ratio == 0.2
    hw = sweeper.Hardware(gpus=8, mfu=1, zero_stage=2, flash_attention=False, recompute=True)
    assert (hw.zero_stage, hw.mfu) == (2, 1)
    assert "litgpt" in sweeper.export(s.recipe, "litgpt", allow_inexpressible=False).format
    sw = sweeper.Sweep.load("quickstart", s.url)
    assert sweeper.status(sw)["sweep"] == sweeper.status("quickstart", storage=s.url)["sweep"]
    found = sweeper.laws(sw)
    assert sweeper.law(found[0].id, storage=s.url).id == found[0].id
    assert sweeper.published_laws("Step-Law")["lr"].source == "steplaw"
    assert len(sweeper.check(["deepseek-7b"], "deepseek", storage=s.url)) == 1


def test_renames_as_the_command_line_writes_them(setup: Setup) -> None:
    """``renames`` takes ``"OLD=NEW"`` texts as ``--rename`` does, one or a list, or a mapping;
    each import the same runs."""
    csv = setup.tmp / "renamed.csv"
    pd.read_csv(CSV).rename(columns={"loss": "val_loss"}).to_csv(csv, index=False)
    url = f"sqlite:///{setup.tmp / 'renames.db'}"
    forms = {"one": "val_loss=loss", "listed": ["val_loss=loss"], "mapped": {"val_loss": "loss"}}
    got = {name: sweeper.import_runs(csv, sweep=name, renames=renames, storage=url).runs()
           for name, renames in forms.items()}  # fmt: skip
    assert got["one"]["loss"].equals(got["listed"]["loss"])
    assert got["one"]["loss"].equals(got["mapped"]["loss"])
    with pytest.raises(ImportDataError, match=r"renamed twice"):
        sweeper.import_runs(csv, sweep="twice", renames=["val_loss=loss", "val_loss=x"],
                            storage=url)  # fmt: skip


def test_a_target_marks_the_report_as_its_mapping_does(setup: Setup) -> None:
    """``at`` of write_report takes a Target (a Target had raised "not iterable")."""
    out = setup.tmp / "report"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files = sweeper.write_report("quickstart", out, storage=setup.url, bootstrap=0,
                                     at=sweeper.Target(n_params=1e8, tokens=2e9))  # fmt: skip
    assert out / "index.html" in files


def test_a_mappings_single_predictor_is_not_split_into_letters(setup: Setup) -> None:
    (law,) = sweeper.fit("quickstart", storage=setup.url, target="lr", store=False,
                         predictors={"lr": "n_params"})  # fmt: skip
    assert law.predictors == ("n_params",)

"""The public Python API: what ``import sweeper`` gives, that it agrees with the CLI, that it reads
laws stored by earlier versions, and that the walkthrough runs end to end."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import sweeper
from sweeper.fitting import FitWarning, synthetic_sweep
from tests.sweeper.helpers import LAUNCHED_STUDY, cli_fixture, launch_fake  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def infer_width(n_params: float) -> int:
    from sweeper.recipe.scale import infer_shape

    return infer_shape(n_params)[0]


def test_all_names_resolve_and_none_shadows_a_subpackage() -> None:
    """Every name in ``__all__`` is importable, and no API function shares its name with a
    module or package of ``sweeper`` (``sweeper.fit`` cannot be both)."""
    for name in sweeper.__all__:
        assert getattr(sweeper, name) is not None, name
    for name in ("launch", "runs", "fit", "recommend", "export"):
        assert callable(getattr(sweeper, name)), name
    top = {p.stem for p in (REPO / "sweeper").iterdir() if p.suffix == ".py" or p.is_dir()}
    clash = sorted(top & {n for n in sweeper.__all__ if callable(getattr(sweeper, n))})
    assert clash == [], clash


def test_every_error_class_the_api_raises_is_exported() -> None:
    """``sweeper.ImportDataError`` (named by import_runs' docstring) and ``ScaleError`` had not
    been exported: a user could catch them only as SweeperError (an API audit)."""
    import sweeper.errors as errors

    raised = {n for n, c in vars(errors).items() if isinstance(c, type) and
              issubclass(c, errors.SweeperError)}  # fmt: skip
    assert raised <= set(sweeper.__all__), raised - set(sweeper.__all__)
    assert sweeper.ImportDataError is errors.ImportDataError


def test_import_sweeper_is_light() -> None:
    code = (
        "import sys, sweeper; sweeper.Target; sweeper.recommend; sweeper.Conventions; "
        "print(sorted(m for m in ('torch', 'ray', 'optuna', 'pandas', 'scipy', 'matplotlib') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _stored_payloads(url: str) -> list[dict]:
    """Every stored law's JSON, without what differs between two stores of the same fit."""
    db = url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT sweep, payload_json FROM sweeper_laws ORDER BY id").fetchall()
    out = []
    for sweep, payload in rows:
        d = json.loads(payload)
        d.pop("id", None)
        d.pop("created_at", None)
        out.append({"sweep": sweep, **d})
    return out


@pytest.mark.parametrize("kind", ["imported", "launched"])
def test_python_and_cli_store_identical_laws(tmp_path: Path, cli, kind: str) -> None:
    """The same fit from Python and from ``sweeper fit`` stores the same laws (ids and times
    aside), conventions included: the rules live in the library, not in the CLI."""
    urls = [f"sqlite:///{tmp_path / f'{who}.db'}" for who in ("python", "cli")]
    for url in urls:
        if kind == "imported":
            csv = tmp_path / "runs.csv"
            synthetic_sweep(seed=3, batch_law=(1000.0, {"tokens": 0.5})).to_csv(csv, index=False)
            sweeper.import_runs(csv, sweep="s", storage=url)
        else:
            launch_fake(LAUNCHED_STUDY, url)
    name = "s" if kind == "imported" else "launched"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        laws = sweeper.fit(name, storage=urls[0], seed=7, n_boot=60)
    code, _, err = cli("fit", name, "--seed", "7", "--bootstrap", "60", "--storage", urls[1])
    assert code == 0, err
    python, command = _stored_payloads(urls[0]), _stored_payloads(urls[1])
    assert len(python) == len(laws) >= 1
    assert python == command
    if kind == "launched":
        assert python[0]["conventions"]["tokens"] == "bytes"  # the sweep's own, not a default
    else:
        assert python[0]["conventions"]["tokens"] == "as imported"


def test_a_plain_runs_frame_fits_as_its_import_does(tmp_path: Path) -> None:
    """``sweeper.fit`` on a user's own DataFrame (the required columns, no derived ``flops`` or
    ``batch_tokens``) fits, and gives the law the same runs give once imported."""
    runs = synthetic_sweep(seed=3)
    cols = ["cell", "n_params", "tokens", "lr", "batch_size", "seq_len", "seed", "loss", "diverged"]
    plain = runs[cols]
    csv = tmp_path / "runs.csv"
    plain.to_csv(csv, index=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sweeper.import_runs(csv, sweep="s", storage=url)
    kw = {"target": "lr", "method": "parabola", "store": False, "seed": 7, "n_boot": 40}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        (from_frame,) = sweeper.fit(plain, **kw)
        (imported,) = sweeper.fit("s", storage=url, **kw)
    assert from_frame.exponents == pytest.approx(imported.exponents, rel=1e-9)
    assert from_frame.exponents_ci == imported.exponents_ci


def test_a_frame_repeating_its_rows_fits_once_each_and_says_so() -> None:
    """A frame concatenated with itself had failed the surface fit ("ran off to no law"); its
    exact repeats are fitted once, with a FitWarning, and rows of one run under two ids are
    said, as an import says both (an API audit)."""
    import pandas as pd

    runs = synthetic_sweep(seed=3)
    kw = {"target": "lr", "store": False, "n_boot": 0}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", FitWarning)
        (once,) = sweeper.fit(runs, **kw)
        (twice,) = sweeper.fit(pd.concat([runs, runs]), **kw)
    assert twice.exponents == pytest.approx(once.exponents, rel=1e-12)
    texts = [str(w.message) for w in said]
    assert sum("repeat another row exactly: fitted once each" in t for t in texts) == 1
    ids = pd.concat([runs.assign(run_id="a"), runs.assign(run_id="b")])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", FitWarning)
        sweeper.fit(ids, **kw)
    assert any("drop them from the frame" in str(w.message) for w in said)


def test_laws_stored_by_the_first_schema_are_read(tmp_path: Path) -> None:
    """tests/data/laws_v0.sql is the laws table of a database written by Sweeper before laws had
    a schema version (string-keyed conventions, held ranges in the domain): its laws load with
    typed conventions and still make a recipe."""
    db = tmp_path / "v0.db"
    with sqlite3.connect(db) as conn:
        conn.executescript((REPO / "tests" / "data" / "laws_v0.sql").read_text())
    url = f"sqlite:///{db}"
    found = sweeper.laws(storage=url)
    assert [law.kind for law in found] == [
        "power",
        "power",
        "loss",
        "power",
        "power",
        "power",
        "power",
    ]
    lr = found[0]
    conv = lr.conventions
    assert isinstance(conv, sweeper.Conventions)
    assert (conv.tokens, conv.vocab_size, conv.schedule, conv.warmup) == (
        "bytes",
        256,
        "cosine",
        0.1,
    )
    assert conv.parametrization == "sp" and conv.init_std == 0.02
    assert set(conv.held) == {"batch_tokens"} and "held:batch_tokens" not in lr.domain
    imported = next(law for law in found if law.source == "synth")
    assert imported.conventions.tokens == "as imported"
    assert imported.conventions.n_params_source == "as imported"
    assert imported.conventions.schedule is None
    recipe = sweeper.recommend("synth", at=sweeper.Target(n_params=1e9, tokens=2e10), storage=url)
    assert recipe.lr.value > 0
    # a law read from the old schema writes the new one, and reads back the same
    again = sweeper.Law  # noqa: F841  (the type is public)
    from sweeper.fitting.laws import law_from_dict

    assert law_from_dict(lr.to_dict()) == lr


def test_no_string_keyed_conventions_outside_the_deserialiser() -> None:
    """A law's conventions are one typed object: no module reads them by string key except the
    reader of the first schema (``Conventions._from_v1``)."""
    pattern = re.compile(r"conventions(\s*or\s*\{\})?\)?\s*(\.get\(|\[)")
    hits = []
    for path in (REPO / "sweeper").rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert hits == []


@pytest.mark.timeout(600)
def test_walkthrough_runs_end_to_end_on_the_smoke_study(tmp_path: Path) -> None:
    """examples/walkthrough.py from sweep to plot, on the smoke study cut to two of its token
    budgets (4 cells, 24 runs: the CLI's end-to-end test trains all of it)."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    smoke = (REPO / "studies" / "smoke.toml").read_text()
    assert "tokens = [16384, 32768, 65536]" in smoke
    study = tmp_path / "smoke4.toml"
    study.write_text(smoke.replace("tokens = [16384, 32768, 65536]", "tokens = [16384, 32768]"))
    script = REPO / "examples" / "walkthrough.py"
    res = subprocess.run(
        [sys.executable, str(script), "--storage", url, "--study", str(study)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "lr ∝ n_params^" in res.stdout
    # 2 widths of 16 and 32 do not determine the LR at 1B: refused, then written with force
    assert "refused: lr law" in res.stdout and "written anyway (forced)" in res.stdout
    assert (tmp_path / "walkthrough" / "litgpt.yaml").read_text().strip()
    assert (tmp_path / "walkthrough" / "report" / "index.html").is_file()
    assert (tmp_path / "walkthrough" / "loss_vs_lr.png").stat().st_size > 1000


def test_a_fit_of_runs_from_two_kinds_of_device_says_so() -> None:
    """bf16 on CUDA and fp32 on the CPU move losses near the best LR: a law fitted on both is
    flagged (a runs table with one device, or none recorded, is not)."""
    runs = synthetic_sweep(seed=3)
    kw = {"target": "lr", "method": "parabola", "store": False, "n_boot": 40}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FitWarning)
        sweeper.fit(runs.assign(device="cpu"), **kw)
        sweeper.fit(runs, **kw)
    assert not [w for w in caught if "trained on" in str(w.message)]
    mixed = runs.assign(device=["cpu", "cuda:0"] * (len(runs) // 2) + ["cpu"] * (len(runs) % 2))
    with pytest.warns(FitWarning, match="trained on cpu and cuda"):
        sweeper.fit(mixed, **kw)


def test_bad_options_and_targets_are_sweeper_errors_naming_what_is_valid() -> None:
    """The module promises SweeperError for bad input: a misspelt fit or recommend option names
    the valid ones (and the nearest), not a TypeError; a target may be a mapping of Target's
    fields (as compare's ``at=``), and a misspelt field is named, not an AttributeError."""
    from sweeper.errors import SweeperError, TargetError

    runs = synthetic_sweep(seed=3)
    with pytest.raises(SweeperError, match=r"unknown fit option 'n_bootstrap' \(did you mean "
                       r"n_boot\?\); the options are: band, n_boot, cell_boot"):  # fmt: skip
        sweeper.fit(runs, store=False, n_bootstrap=10)
    with pytest.raises(SweeperError, match="unknown fit option 'bootstrap'"):
        sweeper.diff("a", "b", bootstrap=10)  # refused before any storage is read
    at = {"n_params": 1e9, "tokens": 2e10}
    by_mapping = sweeper.recommend("deepseek", at=at)
    assert by_mapping == sweeper.recommend("deepseek", at=sweeper.Target(**at))
    shaped = sweeper.recommend("deepseek", at={"width": 2048.0, "depth": 16, "tokens": 2e10})
    assert (shaped.width, shaped.depth) == (2048, 16)
    with pytest.raises(TargetError, match=r"unknown target field 'params' \(did you mean "
                       r"n_params\?\); a target takes: n_params, width, depth"):  # fmt: skip
        sweeper.recommend("deepseek", at={"params": 1e9, "tokens": 2e10})
    with pytest.raises(TargetError, match="a target is a Target or a mapping of its fields"):
        sweeper.recommend("deepseek", at=1e9)  # type: ignore[arg-type]
    with pytest.raises(SweeperError, match=r"unknown recommend option 'global_batch_size' \(did "
                       "you mean global_batch"):  # fmt: skip
        sweeper.recommend("deepseek", at=at, global_batch_size=512)
    # a value of the wrong type is named as such (TypeError from a comparison, or "n_params
    # must be positive, got n_params=1e9" for the string "1e9"); hardware, like at=, may be a
    # mapping of its fields (it raised AttributeError)
    with pytest.raises(TargetError, match="n_params must be a number, got str '1e9'"):
        sweeper.Target(n_params="1e9", tokens=2e10)  # type: ignore[arg-type]
    for bad in ({"bytes_per_token": "4"}, {"global_batch": "256"}):
        with pytest.raises(TargetError, match="must be a number, got str"):
            sweeper.recommend("deepseek", at=at, **bad)
    with pytest.raises(SweeperError, match=r"\(n_boot\) must be a whole number, got str '50'"):
        sweeper.fit(runs, store=False, n_boot="50")
    on8 = sweeper.recommend("deepseek", at=at, hardware={"gpus": 8})
    assert on8 == sweeper.recommend("deepseek", at=at, hardware=sweeper.Hardware(gpus=8))
    with pytest.raises(TargetError, match=r"unknown hardware field 'gpu' \(did you mean gpus"):
        sweeper.recommend("deepseek", at=at, hardware={"gpu": 8})


def test_recommend_from_a_sweep_that_does_not_exist_says_so(tmp_path: Path) -> None:
    """A name that is no sweep (and no published law): "no sweep ...; known sweeps: ...", the
    message of every verb; "no laws stored" only for a sweep that exists without laws."""
    from sweeper.errors import StorageError

    csv = tmp_path / "runs.csv"
    synthetic_sweep(seed=3).to_csv(csv, index=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sweeper.import_runs(csv, sweep="s", storage=url)
    at = sweeper.Target(n_params=1e9, tokens=2e10)
    with pytest.raises(StorageError) as e:
        sweeper.recommend("nope", at=at, storage=url)
    assert str(e.value) == f"no sweep 'nope' in {url}; known sweeps: s"
    sweeper.import_runs(csv, sweep="quickstart", storage=url)
    with pytest.raises(StorageError) as e:  # a typo is answered with the near name
        sweeper.recommend("quikstart", at=at, storage=url)
    assert "(did you mean 'quickstart'?); known sweeps: s, quickstart" in str(e.value)
    with pytest.raises(StorageError, match="no laws stored for sweep 's'"):
        sweeper.recommend("s", at=at, storage=url)


def test_compare_refuses_the_target_recommend_refuses(tmp_path: Path) -> None:
    """recommend refused n_params = 1e9 on 2 layers × 64 (12·L·d² = 9.8e4) while compare used N
    and ignored the shape: both now apply the one rule. ``at={}`` named no target and compared at
    the cells alone; it is an error (``at=None`` is the cells alone)."""
    from sweeper.errors import TargetError

    csv = tmp_path / "runs.csv"
    synthetic_sweep(seed=3).to_csv(csv, index=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sweeper.import_runs(csv, sweep="s", storage=url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweeper.fit("s", target="lr", method="parabola", n_boot=40, storage=url)
    bad = {"n_params": 1e9, "width": 64, "depth": 2, "tokens": 2e10}
    refused = r"n_params 1e\+09 and the shape 2 layers × d_model 64"
    with pytest.raises(TargetError, match=refused):
        sweeper.recommend("deepseek", at=bad)
    with pytest.raises(TargetError, match=refused):
        sweeper.compare("s", at=bad, storage=url, published=())
    with pytest.raises(TargetError, match=r"at=\{\} gives no target"):
        sweeper.compare("s", at={}, storage=url, published=())
    close = {**bad, "n_params": 1.5 * 12 * 2 * 64**2}
    points = set(sweeper.compare("s", at=close, storage=url, published=()).predictions["point"])
    assert "target" in points
    assert "target" not in set(sweeper.compare("s", storage=url, published=()).predictions["point"])


def test_compare_evaluates_each_law_at_n_as_it_counts_n(tmp_path: Path) -> None:
    """compare never copied the cells' total N: Porian's law (N with the head) was evaluated at
    the non-embedding N with a note that no total was given, though the runs carry it; and a
    sweep whose N counts every parameter fed that total to Step Law (non-embedding) without a
    word. The target's total comes from its vocab."""
    import pandas as pd

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    runs = pd.read_csv(REPO / "docs/data/quickstart.csv")
    sweeper.import_runs(REPO / "docs/data/quickstart.csv", sweep="q", storage=url,
                        study=REPO / "studies/quickstart.toml")  # fmt: skip
    total = tmp_path / "total.csv"
    runs.drop(columns=["n_params"]).rename(columns={"n_params_total": "n_params"}).to_csv(total)
    sweeper.import_runs(total, sweep="t", storage=url, conventions={"n_params": "total"})
    at = {"n_params": 1e9, "tokens": 2e10, "vocab": 32000}
    for name in ("q", "t"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sweeper.fit(name, method="parabola", n_boot=40, storage=url)
    q = sweeper.compare("q", at=at, storage=url, published=("porian", "steplaw"))
    assert not any("is not used" in n for n in q.notes)
    # without Porian's law the vocab changes nothing: said (a help-text audit)
    alone = sweeper.compare("q", at=at, storage=url, published=("steplaw",))
    assert any(n.startswith("vocab 32000 is not used: no law here counts the embeddings")
               for n in alone.notes)  # fmt: skip
    p = q.predictions.set_index(["point", "law", "target"])
    w32 = runs[runs["width"] == 32].iloc[0]
    head = w32["n_params"] + 256 * 32  # (the output layer: vocab x width, no position table)
    assert p.loc[("w32-d2-t819k", "porian", "lr"), "value"] == pytest.approx(
        0.0047 * (head / 108e6) ** (-1 / 3), rel=1e-3
    )
    assert not p["note"].str.contains("gives no total").any()
    # N exponents of laws that count N apart are not compared ("porian -0.333 inside" had stood
    # above the note saying so, a laws audit); Step Law's, counted alike, are
    e = q.exponents.set_index(["published", "predictor"])
    assert not e.loc[("porian", "n_params"), "comparable"]
    assert e.loc[("porian", "n_params"), "inside"] is None
    assert e.loc[("steplaw", "n_params"), "comparable"]
    assert e.loc[("steplaw", "n_params"), "inside"] in (True, False)
    target = 1e9 + 32000 * infer_width(1e9)  # (the head: half the untied vocab parameters)
    assert p.loc[("target", "porian", "lr"), "value"] == pytest.approx(
        0.0047 * (target / 108e6) ** (-1 / 3), rel=1e-3
    )
    t = sweeper.compare("t", storage=url, published=("steplaw",))
    assert t.predictions.query("law == 'steplaw' and target == 'lr'")["note"].str.contains(
        "steplaw counts N without the embeddings; these cells' N is with every embedding"
    ).all()
    assert any("counts N with every embedding parameter, steplaw without" in n for n in t.notes)
    # Kaplan's formula near its zero gives a value of its form, not its data: said at the point
    k = sweeper.compare("q", at={"n_params": 6.5e9, "tokens": 2e12}, storage=url,
                        published=("kaplan",)).predictions.set_index(["point", "law"])  # fmt: skip
    assert "no usable LR there" in k.loc[("target", "kaplan"), "note"]
    assert "no usable LR" not in k.loc[("w32-d2-t819k", "kaplan"), "note"]


def test_a_fit_of_a_sweeps_runs_frame_keeps_what_the_sweep_measured(tmp_path: Path) -> None:
    """fit(sweeper.runs(...)[selection]) recorded 'as imported' for everything the sweep knew (an
    API audit's Muon sweep then got an AdamW recipe): runs() carries the sweep's conventions."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sweeper.import_runs(REPO / "docs/data/quickstart.csv", sweep="q", storage=url,
                        study=REPO / "studies/quickstart.toml")  # fmt: skip
    df = sweeper.runs("q", storage=url)
    df.to_parquet(tmp_path / "runs.parquet")  # (the attrs are JSON: to_parquet writes them)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (law,) = sweeper.fit(df[df["lr"] > 2e-3], method="parabola", target="lr", n_boot=40)
    assert law.conventions.tokens == "bytes" and law.conventions.optimizer == "adamw"
    assert law.conventions.lr.startswith("peak AdamW LR, warmup 10%")
    # a fit run again on the same runs (a notebook cell re-run) stores its law once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = sweeper.fit("q", method="parabola", target="lr", n_boot=40, storage=url)
        again = sweeper.fit("q", method="parabola", target="lr", n_boot=40, storage=url)
    assert [x.id for x in again] == [x.id for x in first]
    assert len(sweeper.laws("q", storage=url)) == 1


def test_published_names_are_matched_one_way() -> None:
    """The CLI's --law, resolve_laws and published_laws matched a published name by three copies
    of one rule, and published_laws' copy kept surrounding blanks (" steplaw " passed
    resolve_laws' test, then failed in published_laws)."""
    from sweeper.recipe.published import published_key

    assert published_key(" Step-Law ") == published_key("step_law") == "steplaw"
    found, loss = sweeper.resolve_laws(" Step-Law ")
    assert set(found) == {"lr", "batch_tokens"} and loss is None


def test_a_new_users_python_mistakes_are_caught_or_harmless(tmp_path: Path) -> None:
    """What an audit of the Python API hit: an edited runs frame changed the next fit (runs()
    was the handle's own frame); a string where a list goes was read a letter at a time; a frame
    without a loss column was "every run diverged"."""
    from sweeper.errors import FitError

    csv = tmp_path / "runs.csv"
    synthetic_sweep(seed=3).to_csv(csv, index=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sw = sweeper.import_runs(csv, sweep="s", storage=url)
    df = sweeper.runs(sw)
    df["lr"] *= 10
    assert sw.runs()["lr"].max() * 10 == df["lr"].max()  # the handle's runs are unchanged
    kw = {"method": "parabola", "n_boot": 40, "store": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        (law,) = sweeper.fit(sw, target="lr", predictors="n_params", **{**kw, "store": True})
        assert law.predictors == ("n_params",)
        laws = sweeper.compare(sw, published="steplaw").laws
        assert {x.source for x in laws} == {"s", "steplaw"}
        plain = synthetic_sweep(seed=3).rename(columns={"loss": "val_loss"})
        with pytest.raises(FitError, match="no loss column"):
            sweeper.fit(plain, **kw)


def test_a_study_edited_in_python_is_held_to_the_files_rules_before_ray(tmp_path: Path) -> None:
    """A spec changed with dataclasses.replace skipped the per-key rules of a study file: its
    launch started Ray and failed every trial (a bad parametrization), or raised IndexError from
    inside Tune (seeds_per_point = 0). Each is a StudyError before Ray, naming the file as
    changed in Python."""
    import dataclasses

    from sweeper.errors import StudyError

    s = sweeper.load_study(Path(__file__).resolve().parents[2] / "studies" / "smoke.toml")
    url = f"sqlite:///{tmp_path / 'never.db'}"
    bad = {
        "model.parametrization: unknown value 'mupp'": dataclasses.replace(
            s, model=dataclasses.replace(s.model, parametrization="mupp")
        ),
        "sweep.seeds_per_point: 0 must be >= 1": dataclasses.replace(
            s, sweep=dataclasses.replace(s.sweep, seeds_per_point=0)
        ),
        "ladder.widths[0]: expected an integer": dataclasses.replace(
            s, ladder=dataclasses.replace(s.ladder, widths=("16",))
        ),
        "cannot be written as a study file": dataclasses.replace(s, sweep={"name": "x"}),
    }
    for needle, spec in bad.items():
        with pytest.raises(StudyError, match=re.escape(needle)) as e:
            sweeper.launch(spec, storage=url, progress=False)
        assert "smoke.toml (as changed in Python)" in str(e.value)
    assert not (tmp_path / "never.db").exists()  # refused before the storage or Ray


def test_laws_recipes_and_exports_read_as_text_in_a_notebook() -> None:
    """A notebook displayed each result as a one-line dataclass dump (a recipe 10 kB, a law
    3 kB): str() and IPython's display now give the law's formula, the recipe's table and the
    exported file."""
    class Printer:  # (IPython's pretty printer, as far as _repr_pretty_ uses it)
        def __init__(self) -> None:
            self.out = ""

        def text(self, t: str) -> None:
            self.out += t

    def pretty(obj: object) -> str:
        p = Printer()
        obj._repr_pretty_(p, False)  # type: ignore[attr-defined]
        return p.out

    (lr,) = [x for x in sweeper.resolve_laws("steplaw")[0].values() if x.target == "lr"]
    assert str(lr) == "lr = 1.79·N^-0.713·D^0.307  (published)" == pretty(lr)
    recipe = sweeper.recommend("steplaw", at={"n_params": 1e9, "tokens": 2e10})
    text = pretty(recipe)
    assert text.startswith("model") and "peak LR              0.000996" in text
    assert "warning: lr law (steplaw:lr) is published without uncertainty" in text
    exported = sweeper.export(recipe, "litgpt")
    assert str(exported) == exported.text and "cannot carry" in pretty(exported)


def test_the_sweeps_of_a_storage_are_listed_from_python(tmp_path: Path) -> None:
    """There was no way to list a storage's sweeps from Python (status() refuses without a name
    where there are several)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    csv = tmp_path / "runs.csv"
    synthetic_sweep(seed=3).to_csv(csv, index=False)
    for name in ("first", "second"):
        sweeper.import_runs(csv, sweep=name, storage=url)
    assert [(s["name"], s["kind"]) for s in sweeper.sweeps(storage=url)] == [
        ("first", "imported"), ("second", "imported")
    ]  # fmt: skip


def test_a_python_spec_with_numpy_values_or_a_half_range_is_read_as_a_files() -> None:
    """Review of the per-key rules for Python-built specs: numpy floats (np.logspace) were
    refused with 'TOMLDecodeError: Invalid value' (their repr is not TOML), and a range given
    only its low end raised a bare AssertionError from inside the TOML writer."""
    import dataclasses

    import numpy as np

    from sweeper.study.spec import ParamSpec, check_spec

    s = sweeper.load_study(Path(__file__).resolve().parents[2] / "studies" / "smoke.toml")
    grid = dataclasses.replace(s.search, lr=ParamSpec.grid(np.logspace(-4, -2, 6)))
    assert check_spec(dataclasses.replace(s, search=grid), code=True) == []
    half = dataclasses.replace(s.search, lr=ParamSpec(low=1e-4))
    problems = check_spec(dataclasses.replace(s, search=half), code=True)
    assert any("a range needs low and high" in p for p in problems), problems


def test_a_notebook_users_mistakes_from_an_api_audit_are_sweeper_errors(tmp_path: Path) -> None:
    """An API audit: each of these raised a bare KeyError, ValueError, StatisticsError,
    AttributeError or TypeError, read a string a character at a time, or took one of two
    conflicting inputs in silence; a published law set had no Python equivalent of `laws show`."""
    from sweeper.errors import ScaleError, StorageError, StudyError, SweeperError, TargetError
    from sweeper.fitting.synthetic import synthetic_sweep

    assert set(sweeper.published_laws("deepseek")) == {"lr", "batch_tokens"}
    with pytest.raises(StorageError, match=r"sweeper.published_laws\('deepseek'\)"):
        sweeper.law("deepseek")  # type: ignore[arg-type]
    lr = sweeper.published_laws("steplaw")["lr"]
    at = {"n_params": 1e9, "tokens": 2e10}
    with pytest.raises(TargetError, match=r"'steplaw' \(str\) is not a Law"):
        sweeper.recommend([lr, "steplaw"], at=at)  # type: ignore[list-item]
    with pytest.raises(ScaleError, match="level must be a probability"):
        lr.interval(at, level=95)
    with pytest.raises(ScaleError, match="needs"):
        lr.predict({"n_params": 1e9})
    recipe = sweeper.recommend("deepseek", at=at)
    with pytest.raises(TargetError, match="framework_version is a string"):
        sweeper.export(recipe, "megatron", 0.16)  # type: ignore[arg-type]
    with pytest.raises(TargetError, match=r"context \(2048\) and the hardware's seq_len \(4096\)"):
        sweeper.recommend("deepseek", at={**at, "context": 2048}, hardware={"seq_len": 4096})
    with pytest.raises(StudyError, match=r"model\.parametrization: unknown value 'mupp'"):
        sweeper.coord_check("studies/smoke.toml", parametrization="mupp")
    with pytest.raises(SweeperError, match="diff: method 'surface' is not one of parabola, band"):
        sweeper.diff("a", "b", method="surface")
    # a frame's empty loss with nothing to excuse it is refused, as on import
    runs = synthetic_sweep(seed=3).drop(columns=["diverged"])
    runs.loc[runs.index[0], "loss"] = float("nan")
    with pytest.raises(SweeperError, match="column 'loss' is empty or NaN in row 1"):
        sweeper.fit(runs, store=False)
    # one KEY=VALUE string is one convention
    csv = tmp_path / "r.csv"
    synthetic_sweep(seed=3).to_csv(csv, index=False)
    sw = sweeper.import_runs(csv, sweep="c", storage=f"sqlite:///{tmp_path / 'c.db'}",
                             conventions="parametrization=mup")  # fmt: skip
    assert sw.meta["conventions"] == {"parametrization": "mup"}
    assert repr(sw) == f"Sweep('c', imported, sqlite:///{tmp_path / 'c.db'})"  # (not its study)
    with pytest.raises(SweeperError, match="unknown surface settings 'x'; known: standard"):
        sweeper.validate_transfer(sw, surface="x")

"""Your model, your loop, your optimizer in a study: reading and writing the keys, refusing bad
code before any trial (exit 2, one line naming the key, nothing stored), the trainable's own paths,
the laws' conventions, and the target counted on the builder's model."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import sweeper.cli as cli
from sweeper.study.spec import parse_study_toml
from sweeper.study.study_toml import study_toml

REPO = Path(__file__).resolve().parents[2]

STUDY = """\
[sweep]
name = "own"
trials_per_cell = 2

[model]
context = 32
head_dim = 16
{model}

[ladder]
widths = [16, 32]
depths = [1]
tokens = [4096]

[search]
lr = {{ values = [3e-3, 1e-2] }}
batch_size = 8
{search}

[train]
{train}

[sampler]
kind = "grid"
"""


def write(tmp_path: Path, model: str = "", train: str = "", search: str = "") -> Path:
    p = tmp_path / "study.toml"
    p.write_text(STUDY.format(model=model, train=train, search=search))
    return p


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("model", "train", "key", "needle"),
    [
        ('builder = "no_such_pkg_q:build"', "", "model.builder", "cannot import 'no_such_pkg_q'"),
        (  # a misspelt builder, with its args: one line (a second said args need a builder)
            'builder = "tests.own_builders.tiny"\n\n[model.args]\nhidden = 2',
            "",
            "model.builder",
            "must look like 'package.module:function'",
        ),
        ('builder = "tests.own_builders:raises"', "", "model.builder", "raised RuntimeError"),
        ('builder = "tests.own_builders:wrong_shape"', "", "model.builder", "(B, T, vocab_size)"),
        (
            'builder = "tests.own_builders:no_width"\nparametrization = "mup"',
            "",
            "model.builder",
            "no width-scaled parameter",
        ),
        (  # under SP too: every cell would have trained one model (an API audit)
            'builder = "tests.own_builders:no_width"',
            "",
            "model.builder",
            "at width 16 and at width 32 (depth 1): is width passed through",
        ),
        (
            "",
            'function = "tests.own_builders:bad_signature"',
            "train.function",
            "hparams, shape, report",
        ),
        ("", 'optimizer = "lion"', "train.optimizer", "unknown value 'lion'"),
        (
            'builder = "tests.own_builders:tiny"\nqk_norm = true',
            "",
            "model.qk_norm",
            "only the built-in proxy",
        ),
        (
            "",
            'function = "tests.own_builders:loop"\nz_loss = 1e-4',
            "train.z_loss",
            "does not honour it",
        ),
    ],
)
def test_bad_own_code_is_refused_before_any_trial(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: str,
    train: str,
    key: str,
    needle: str,
) -> None:
    study = write(tmp_path, model, train)
    db = tmp_path / "store.db"
    for verb in (["validate", str(study)], ["launch", str(study), "--storage", f"sqlite:///{db}"]):
        code, _out, err = run_cli(capsys, *verb)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2, err
        assert len(lines) == 1 and f": {key}: " in lines[0] and needle in lines[0], err
    assert not db.exists()  # nothing written to the store


def test_good_own_code_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = write(
        tmp_path, 'builder = "tests.own_builders:tiny"\nparametrization = "mup"\nbase_width = 16'
    )
    code, out, err = run_cli(capsys, "validate", str(study))
    assert code == 0, err
    assert "ok" in out
    study = write(tmp_path, "", 'function = "tests.own_builders:loop"', "warmup = 0.05")
    assert run_cli(capsys, "validate", str(study))[0] == 0


def test_new_keys_round_trip_and_stay_out_of_old_studies(tmp_path: Path) -> None:
    from sweeper.study.spec import load_study

    spec = load_study(
        write(
            tmp_path,
            'builder = "tests.own_builders:tiny"\nparametrization = "mup"\nbase_width = 16\n'
            "[model.args]\nflag = true\nsizes = [1, 2]",
            'optimizer = "muon"\nweight_decay_tau = 0.3',
            'schedule = { values = ["cosine", "linear"] }',
        )
    )
    assert spec.model.args == (("flag", True), ("sizes", (1, 2)))
    text = study_toml(spec)
    assert parse_study_toml(text) == spec
    assert parse_study_toml(study_toml(spec, operational=False)).train.optimizer == "muon"
    for name in ("smoke", "quickstart", "width_mup", "depth_completep"):
        old = study_toml(load_study(REPO / "studies" / f"{name}.toml"), operational=False)
        for key in ("optimizer", "builder", "function", "weight_decay_tau", "args", "schedule = {"):
            assert key not in old


def test_cross_field_rules(tmp_path: Path) -> None:
    from sweeper.errors import StudyError
    from sweeper.study.spec import load_study

    with pytest.raises(StudyError) as e:
        load_study(
            write(tmp_path, "[model.args]\nx = 1", "weight_decay_tau = 0.5", "weight_decay = 0.1")
        )
    text = str(e.value)
    assert "model.args: only used with model.builder" in text
    assert "train.weight_decay_tau: give the decay as a timescale or as search.weight_decay" in text


def _config(spec: Any, own: dict[str, Any], **extra: Any) -> dict[str, Any]:
    from sweeper.study.ladder import cells
    from sweeper.study.space import hparams_kwargs

    cell = cells(spec)[0]
    return {
        "data": "builtin",
        "threads": 1,
        "device": "cpu",
        "eval_batches": 1,
        "eval_every": None,
        "model": cell.proxy_config_kwargs(),
        "hparams": hparams_kwargs(spec, {"lr": 1e-2, "batch_size": 8}),
        "tokens": cell.tokens,
        "seed": 0,
        "own": own,
        **extra,
    }


def test_trainable_runs_a_builder_and_a_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray import tune as ray_tune

    import sweeper.run.trainable as tr
    from sweeper.study.spec import load_study

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(ray_tune, "report", lambda m: sent.append(dict(m)))
    spec = load_study(write(tmp_path, 'builder = "tests.own_builders:tiny"', 'optimizer = "muon"'))
    own = tr.own_config(spec)
    assert own["builder"] == "tests.own_builders:tiny" and "function" not in own
    tr.run_trial(_config(spec, own))
    final = sent[-1]
    assert final["final"] and final["steps"] == 16 and math.isfinite(final["loss"])
    assert final["n_params"] != spec.model.context  # counted on the builder's model
    sent.clear()
    spec = load_study(write(tmp_path, "", 'function = "tests.own_builders:loop"', "warmup = 0.05"))
    tr.run_trial(_config(spec, tr.own_config(spec), eval_every=4))
    assert [m["final"] for m in sent][-1] is True and any(not m["final"] for m in sent)
    assert sent[-1]["steps"] == 16 and not sent[-1]["diverged"]


def test_a_crash_in_user_code_ends_the_run_with_its_traceback_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seeded run raises the same exception again: the trainable ends the run with a final
    report carrying the error (Ray does not retry it); an out-of-memory error, which a retry can
    cure, is raised for Ray to retry."""
    from ray import tune as ray_tune

    import sweeper.run.trainable as tr
    from sweeper.study.spec import parse_study_toml

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(ray_tune, "report", lambda m: sent.append(dict(m)))
    text = STUDY.format(model="", search="", train='function = "tests.own_builders:crashing"')
    spec = parse_study_toml(text)
    tr.run_trial(_config(spec, tr.own_config(spec)))
    (final,) = sent
    assert final["final"] and math.isnan(final["loss"])
    msg = final[tr.USER_ERROR]
    assert msg.startswith("train.function 'tests.own_builders:crashing': ValueError: boom")
    assert "Traceback (most recent call last)" in msg and "own_builders.py" in msg
    sent.clear()
    oom = text.replace(":crashing", ":out_of_memory")
    spec = parse_study_toml(oom)
    with pytest.raises(tr.TrialError) as e:
        tr.run_trial(_config(spec, tr.own_config(spec)))
    assert e.value.retryable and "OutOfMemoryError: CUDA out of memory" in str(e.value)
    assert not sent
    assert not tr.retryable(ValueError("x")) and tr.retryable(ConnectionResetError())


def test_a_launch_whose_code_raises_fails_each_point_once_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Through Ray Tune with max_failures = 2: each failed point ran once (it was run three
    times, and its error was kept only on a retry), its trial holds the error, and the traceback
    is logged once."""
    import logging

    import optuna

    import sweeper
    from sweeper.study.spec import parse_study_toml

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    text = STUDY.format(model="", search="", train='function = "tests.own_builders:crashing"')
    text = text.replace("widths = [16, 32]", "widths = [16]") + "\n[resources]\nmax_failures = 2\n"
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    # (the hint names code_changed: the relaunch after a fix of the code is refused without it,
    # an own-model audit)
    short = pytest.warns(sweeper.LaunchShort, match=r"short of their target after.*\(with "
                         r"code_changed=True if you fixed the study's model builder")  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="sweeper.run.searcher"), short:
        summary = sweeper.launch(parse_study_toml(text), storage=url, progress=False)
    assert not summary.done and summary.own_code
    runs = sweeper.runs("own", storage=url)
    # each point once (before: 3 runs each, then asked again until the cell gave up), held for
    # the next launch
    assert len(runs) == 2 and (runs["state"] == "FAIL").all(), runs
    (name,) = [n for n in optuna.get_all_study_names(url) if n.startswith("own/")]
    trials = optuna.load_study(study_name=name, storage=url).trials
    for t in [t for t in trials if t.state == optuna.trial.TrialState.FAIL]:
        assert "retries" not in t.user_attrs
        assert t.user_attrs["last_error"].startswith(
            "train.function 'tests.own_builders:crashing': ValueError: boom"
        )
    logged = [r.getMessage() for r in caplog.records if "boom" in r.getMessage()]
    assert len(logged) == len(runs) and sum("Traceback" in m for m in logged) == 1, logged


def test_conventions_record_the_optimizer_settings_the_lr_was_measured_under(
    tmp_path: Path,
) -> None:
    """Weight decay, betas, eps and clip of the study (an exports audit: a sweep measured at
    weight decay 0, beta2 0.99, no clipping, eps 1e-6 exported 0.1, 0.95, 1.0 and 1e-8 without a
    word); "searched" for a searched one; None where a decay timescale or a training function
    that does not honour the key leaves them unknown."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.provenance import _optimizer_settings
    from sweeper.study.spec import load_study

    default = _optimizer_settings(load_study(write(tmp_path)))
    assert default == {"weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
                       "grad_clip": 1.0}  # fmt: skip
    spec = load_study(write(tmp_path, "", "grad_clip = 0.0\neps = 1e-6\nbeta1 = 0.8",
                            "weight_decay = 0.0\nbeta2 = { values = [0.95, 0.99] }"))  # fmt: skip
    got = _optimizer_settings(spec)
    assert got == {"weight_decay": 0.0, "beta1": 0.8, "beta2": "searched", "eps": 1e-6,
                   "grad_clip": 0.0}  # fmt: skip
    conv = Conventions(**got)
    assert Conventions.from_json(conv.to_json(), law={"schema_version": 2}) == conv
    tau = load_study(write(tmp_path, "", "weight_decay_tau = 0.5"))
    assert _optimizer_settings(tau)["weight_decay"] is None
    fn = load_study(write(tmp_path, "", 'function = "tests.own_builders:loop"'))  # warmup only
    assert set(_optimizer_settings(fn).values()) == {None}


def test_conventions_record_the_builder_optimizer_and_variant(tmp_path: Path) -> None:
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.provenance import _own_code, _schedule
    from sweeper.study.spec import load_study

    spec = load_study(
        write(
            tmp_path,
            'builder = "tests.own_builders:tiny"\nparametrization = "mup"\nbase_width = 16\n[model.args]\nk = 2',
            'optimizer = "muon"\nschedule = "linear"\nmin_lr_ratio = 0.0\nweight_decay_tau = 0.2',
        )
    )
    conv = Conventions(**_schedule(spec), **_own_code(spec))
    assert conv.optimizer == "muon" and "match_rms_adamw" in conv.lr and "linear to 0%" in conv.lr
    assert conv.model_builder == "tests.own_builders:tiny" and conv.model_args == {"k": 2}
    assert conv.parametrization_variant.startswith("mup-by-role")
    assert conv.weight_decay_tau == 0.2
    back = Conventions.from_json(conv.to_json(), law={"schema_version": 2})
    assert back == conv
    assert (
        Conventions.from_json({"optimizer": "adamw"}, law={"schema_version": 2}).model_builder
        is None
    )
    fn = load_study(write(tmp_path, "", 'function = "tests.own_builders:loop"'))
    s = _schedule(fn)
    assert s["schedule"] is None and s["warmup"] is not None and "training function" in s["lr"]
    # what the function decides itself is not claimed: its optimizer and init (they read
    # "adamw" and 0.02 before), nor the init of a builder's model under sp (it keeps its own)
    own = _own_code(fn)
    assert own["optimizer"] is None and own["init_std"] is None
    sp = load_study(write(tmp_path, 'builder = "tests.own_builders:tiny"'))
    assert _own_code(sp)["init_std"] is None and _own_code(sp)["optimizer"] == "adamw"
    assert "init_std" not in _own_code(spec)  # (muP: Sweeper sets the init by role)


def test_recommend_counts_the_target_on_the_builders_model() -> None:
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.target import Target

    conv = Conventions(model_builder="tests.own_builders:tiny", parametrization="sp")
    law = PowerLaw(target="lr", predictors=("n_params",), source="own", conventions=conv,
                   log_prefactor=math.log(0.2), exponents={"n_params": -0.3})  # fmt: skip
    r = recommend(
        {"lr": law}, Target(width=256, depth=4, heads=4, vocab=512, context=64, tokens=1e9)
    )
    # the tiny model: per block 3d² (attention in) + d² (out) + 4d² (MLP) and norms; no 4x MLP
    d = 256
    assert r.n_params == 4 * (8 * d * d + 2 * d)
    assert r.n_params_total == r.n_params + 512 * d + 64 * d + 512 * d
    plain = recommend({"lr": PowerLaw(**{**law.__dict__, "conventions": Conventions()})},
                      Target(width=256, depth=4, heads=4, vocab=512, context=64, tokens=1e9))  # fmt: skip
    assert plain.n_params == 12 * 4 * d * d


def test_a_builder_cells_deepseek_m_counts_its_own_model(tmp_path: Path) -> None:
    """A cell's DeepSeek M is 6·N + 12·L·d·T on the builder's N, as compare counts it: it had
    been 72·L·d² (blocks of 12·d²) for any model, 1.5x the tiny model's 8·d² a block."""
    from sweeper.study.ladder import cells
    from sweeper.study.spec import load_study

    spec = load_study(write(tmp_path, 'builder = "tests.own_builders:tiny"'))
    for c in cells(spec):
        assert c.n_params == c.depth * (8 * c.width**2 + 2 * c.width)
        assert c.deepseek_m == 6 * c.n_params + 12 * c.depth * c.width * c.context


@pytest.mark.slow
def test_the_example_training_function_runs_end_to_end_through_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """studies/own_function.toml through Ray Tune: ASHA prunes (PRUNED trials), the LR of 3.0
    diverges (COMPLETE, diverged), every cell fits (about 3 minutes on 2 cores)."""
    import sweeper

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    url = f"sqlite:///{tmp_path / 'own.db'}"
    sweeper.launch(REPO / "studies" / "own_function.toml", storage=url, progress=False)
    runs = sweeper.runs("own_function", storage=url)
    assert (runs["state"] == "PRUNED").any()
    diverged = runs[runs["diverged"].astype(bool)]
    assert set(diverged["lr"]) == {3.0} and (diverged["state"] == "COMPLETE").all()
    laws = sweeper.fit("own_function", storage=url, store=False)
    assert laws[0].conventions.train_function == "examples.own_training_loop:train"
    assert laws[0].conventions.schedule is None  # the script does not honour it: unknown


def test_coord_check_tells_mup_from_sp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    study = write(tmp_path, 'parametrization = "mup"\nbase_width = 32')
    argv = ["coord-check", str(study), "--widths", "32,64,128", "--steps", "3", "--lr", "1e-2"]
    code, out, _ = run_cli(capsys, *argv, "--json", "-o", str(tmp_path / "cc"))
    mup = json.loads(out)
    assert code == 0 and mup["stable"], mup["slopes"]
    assert (tmp_path / "cc" / "coord_check.png").stat().st_size > 1000
    code, out, _ = run_cli(capsys, *argv, "--json", "--parametrization", "sp")
    sp = json.loads(out)
    assert not sp["stable"] and sp["slopes"]["hidden"] > 0.5
    code, out, _ = run_cli(capsys, *argv)
    assert "width-stable: |d log RMS / d log width| <= 0.2 for every quantity" in out
    # the verdict names what failed (it read as the criterion holding: "NOT width-stable: |...|
    # <= 0.2 for every quantity")
    code, out, _ = run_cli(capsys, *argv, "--parametrization", "sp")
    assert "NOT width-stable: |d log RMS / d log width| <= 0.2 fails for " in out
    assert "hidden" in out.split("fails for ")[1]
    assert "note:" not in out
    # a study run by its own training function: the check says the function is not what it ran
    # (a diff audit read the built-in proxy's check as its own loop's)
    fn = write(tmp_path, "", 'function = "tests.own_builders:loop"')
    code, out, _ = run_cli(capsys, "coord-check", str(fn), *argv[2:])
    assert "note: train.function tests.own_builders:loop is not run: this checks the built-in" in out


def test_a_law_without_an_optimizer_recommends_adamw_with_a_warning() -> None:
    """A law from a training function that chose its own optimizer records none; the recipe runs
    AdamW and says that its LR was not measured for it."""
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.target import Target

    law = PowerLaw(target="lr", predictors=("n_params",), source="own",
                   conventions=Conventions(optimizer=None, train_function="m:f", init_std=None),
                   log_prefactor=math.log(0.2), exponents={"n_params": -0.3})  # fmt: skip
    r = recommend({"lr": law}, Target(n_params=1e8, tokens=2e9))
    assert r.optimizer == "adamw"
    assert any("records no optimizer (its training function chose its own)" in w for w in r.warnings)
    # nor an init std: the recipe's small init was not measured (it was prescribed in silence)
    assert any("records no init std (its training function's own init)" in w for w in r.warnings)
    # a framework config writes AdamW keys: refused as for a known other optimizer (an audit's
    # own Lion LR was exported to litgpt as torch.optim.AdamW with exit 0); JSON records it
    from sweeper.errors import TargetError
    from sweeper.recipe.export import export_recipe

    for fmt in ("litgpt", "hf", "nanogpt"):
        with pytest.raises(TargetError, match=r"optimizer \(not recorded: its training function"):
            export_recipe(r, fmt)
        written = export_recipe(r, fmt, allow_inexpressible=True)  # (hf's JSON has no comments)
        assert fmt == "hf" or "an LR of an unknown optimizer" in written
    assert json.loads(export_recipe(r, "json"))["optimizer"] == "adamw"
    target = Target(n_params=1e8, tokens=2e9)
    lion = replace(law, conventions=replace(law.conventions, optimizer="lion"))
    with pytest.raises(TargetError, match=r"optimizer \(lion\).*is not an AdamW LR"):
        export_recipe(recommend({"lr": lion}, target), "litgpt")
    # imported runs record no optimizer either, but no loop of their own: warned, not refused;
    # a law measured with Adam (Kaplan's) exports as AdamW, as before
    imported = replace(law, conventions=Conventions(optimizer=None, init_std=None))
    r = recommend({"lr": imported}, target)
    assert any("records no optimizer (its runs were imported)" in w for w in r.warnings)
    assert export_recipe(r, "litgpt")
    adam = replace(law, conventions=replace(law.conventions, optimizer="Adam", train_function=None))
    assert export_recipe(recommend({"lr": adam}, target), "litgpt")


def test_own_code_beside_the_study_is_found_and_its_sibling_imports_are_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLUSTER.md says a study's own module is found next to the study file or in the working
    directory, but validate looked on sys.path only ('is it on sys.path?'). And a single-file
    module's own imports from its folder were not shipped: on other nodes every trial failed
    (on one machine the driver's working directory hid it)."""
    import sys

    from sweeper.run.launch import runtime_env_for
    from sweeper.study.spec import load_study

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "helpers_q7.py").write_text("SCALE = 1.0\n")
    (folder / "pandas.py").write_text("raise ImportError('a stray file, shadowed')\n")
    (folder / "loop_q7.py").write_text(
        "import helpers_q7\nimport pandas\nfrom tests.own_builders import loop as _loop\n\n"
        "def train(*, hparams, shape, report):\n"
        "    return _loop(hparams=hparams, shape=shape, report=report)\n\n"
        "train.honours = ('warmup',)\n"
    )
    study = folder / "study.toml"
    study.write_text(STUDY.format(model="", search="", train='function = "loop_q7:train"'))
    monkeypatch.chdir(tmp_path)  # neither the study's folder nor on sys.path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(folder))])
    spec = load_study(study)  # imports the module, builds nothing: no problem
    assert spec.train.function == "loop_q7:train"
    env = runtime_env_for(["loop_q7:train"], [str(folder)])
    shipped = {Path(p).name for p in env["py_modules"]}
    # (tests/ is not in its folder; its pandas.py is not the pandas the driver imports)
    assert shipped == {"loop_q7.py", "helpers_q7.py"}


def test_a_relaunch_after_the_training_function_changed_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A diff audit: after editing its training function (AdamW to Lion) a user relaunched the
    same study, and the sweep kept the old runs as the new code's without a word (the study's
    hash covers the study file, not the code it names). A warning followed; a law-sampler audit
    then saw its new code's runs fitted with the old ones all the same: refused now, unless
    code_changed (a crash fixed), which records the new code once."""
    import logging
    import shutil

    from sweeper.errors import StorageError
    from sweeper.study.spec import load_study
    from sweeper.study.sweep import open_sweep

    shutil.copy(Path(__file__).parent.parent / "own_builders.py", tmp_path / "myloop.py")
    spec = load_study(write(tmp_path, "", 'function = "myloop:loop"', "warmup = 0.05"))
    url = f"sqlite:///{tmp_path / 's.db'}"
    open_sweep(spec, url)
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        open_sweep(spec, url)
    assert "changed since" not in caplog.text
    with (tmp_path / "myloop.py").open("a") as f:
        f.write("\n# now Lion\n")
    with pytest.raises(StorageError, match=r"the code of train.function \(myloop:loop\) changed "
                       "since the sweep's first runs") as e:  # fmt: skip
        open_sweep(spec, url)
    assert "--code-changed" in str(e.value) and "--force-new" in str(e.value)
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        open_sweep(spec, url, code_changed=True)
    assert "kept (--code-changed)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        open_sweep(spec, url)  # (the new code recorded: no refusal, no warning again)
    assert "changed since" not in caplog.text


def test_the_functions_honours_are_recorded_at_launch(tmp_path: Path) -> None:
    """A law-sampler audit: a fit run where the function's module does not import read its
    honours as none (warmup unknown, the LR 'as the function defines it'), the same sweep
    fitted with PYTHONPATH=. read them all: the launch now records them with the sweep."""
    import shutil
    import sys

    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.study.handle import Sweep
    from sweeper.study.spec import load_study
    from sweeper.study.sweep import open_sweep

    shutil.copy(Path(__file__).parent.parent / "own_builders.py", tmp_path / "hon_q9.py")
    spec = load_study(write(tmp_path, "", 'function = "hon_q9:loop"', "warmup = 0.05"))
    url = f"sqlite:///{tmp_path / 's.db'}"
    open_sweep(spec, url)
    sw = Sweep.load(spec.name, url)
    assert sw.meta["honours"] == ["warmup"]
    assert sweep_conventions(sw).warmup == 0.05
    (tmp_path / "hon_q9.py").unlink()  # the module gone where the fit runs
    sys.modules.pop("hon_q9", None)
    assert sweep_conventions(Sweep.load(spec.name, url)).warmup == 0.05


def test_what_sweeper_applies_to_the_model_it_passes_need_not_be_honoured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An own-model audit: a function taking the muP model Sweeper built was refused an init_std
    (and an output_mult) Sweeper itself applies to that model, and its law recorded the init as
    unknown, so the recipe printed a formula's std 8x the proxies'. Honouring parametrization
    implies its base shape (the audit's function had to list base_width as well)."""
    from sweeper.fitting.provenance import _own_code
    from sweeper.study.spec import load_study

    model = (
        'builder = "tests.own_builders:tiny"\nparametrization = "mup"\nbase_width = 16\n'
        "base_depth = 1\ninit_std = 0.01\noutput_mult = 2.0"
    )
    study = write(tmp_path, model, 'function = "tests.own_model_loops:with_model"')
    code, _out, err = run_cli(capsys, "validate", str(study))
    assert code == 0, err
    assert "init_std" not in _own_code(load_study(study))  # (Sweeper drew it: known)
    # what the function decides stays its own to honour
    study = write(tmp_path, model, 'function = "tests.own_model_loops:with_model"\nz_loss = 1e-4')
    code, _out, err = run_cli(capsys, "validate", str(study))
    assert code == 2 and "train.z_loss: set by the study" in err, err


def test_a_builder_beside_a_function_that_takes_no_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An own-model audit: OWN_MODEL.md passes model= only to a function that takes it, but
    such a function was refused beside a builder. Under sp the builder now only counts N and
    memory, and the run trains the function's own model; under muP it is refused, saying why."""
    from ray import tune as ray_tune

    import sweeper.run.trainable as tr
    from sweeper.study.spec import load_study

    fn = 'function = "tests.own_model_loops:own_model"'
    study = write(tmp_path, 'builder = "tests.own_builders:tiny"', fn)
    code, _out, err = run_cli(capsys, "validate", str(study))
    assert code == 0, err
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(ray_tune, "report", lambda m: sent.append(dict(m)))
    import proxy_models.builder as pb

    spec = load_study(study)
    built: list[int] = []  # (the builder's model, never passed, had been built every run)
    real = pb.prepare
    monkeypatch.setattr(pb, "prepare", lambda *a, **k: built.append(1) or real(*a, **k))
    tr.run_trial(_config(spec, tr.own_config(spec)))
    assert sent[-1]["final"] and sent[-1]["loss"] == 4.0 and tr.USER_ERROR not in sent[-1]
    assert built == []
    mup = 'builder = "tests.own_builders:tiny"\nparametrization = "mup"\nbase_width = 16'
    code, _out, err = run_cli(capsys, "validate", str(write(tmp_path, mup, fn)))
    assert code == 2 and "must take model= under mup" in err, err


def test_a_function_honouring_parametrization_gets_the_base_shape_and_sweepers_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainable passes the base width and depth to a function that honours the
    parametrization (an own-model audit), and the model it passes has the study's init std."""
    from ray import tune as ray_tune

    import sweeper.run.trainable as tr
    from sweeper.study.spec import load_study
    from tests.own_model_loops import SEEN

    monkeypatch.setattr(ray_tune, "report", lambda m: None)
    model = (
        'builder = "tests.own_builders:tiny"\nparametrization = "mup"\nbase_width = 16\n'
        "init_std = 0.01"
    )
    spec = load_study(write(tmp_path, model, 'function = "tests.own_model_loops:with_model"'))
    tr.run_trial(_config(spec, tr.own_config(spec)))
    assert SEEN["hparams"]["base_width"] == 16 and SEEN["hparams"]["base_depth"] == 2
    assert abs(SEEN["emb_std"] - 0.01) < 0.002


def test_recommend_builds_the_laws_model_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An own-model audit: `sweeper recommend` run where `launch` found the builder (the working
    directory) could not import it (the command's sys.path lacks the working directory) and
    counted N with the GPT formula."""
    import sys

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.target import Target

    (tmp_path / "cwd_builder_q3.py").write_text("from tests.own_builders import tiny\n")
    monkeypatch.chdir(tmp_path)
    path = [p for p in sys.path if p not in ("", ".", str(tmp_path))]
    monkeypatch.setattr(sys, "path", list(path))
    conv = Conventions(model_builder="cwd_builder_q3:tiny", parametrization="sp")
    law = PowerLaw(target="lr", predictors=("n_params",), source="own", conventions=conv,
                   log_prefactor=math.log(0.2), exponents={"n_params": -0.3})  # fmt: skip
    target = Target(width=128, depth=2, heads=4, vocab=512, context=64, tokens=1e9)
    r = recommend({"lr": law}, target)
    assert r.n_params == 2 * (8 * 128 * 128 + 2 * 128), r.warnings
    assert not any("cannot build" in w for w in r.warnings)
    missing = replace(law, conventions=replace(conv, model_builder="no_such_q3:tiny"))
    sys.path.remove(str(tmp_path))
    r = recommend({"lr": missing}, target)
    assert any("in the working directory?" in w for w in r.warnings), r.warnings
    assert sys.path == path  # (left as it was when the module is nowhere)

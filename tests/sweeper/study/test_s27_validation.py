"""Study validation and the cost estimate, from two audits (study files against docs/STUDY.md;
the proxy models): data that no run can read, the estimate's load normalisation and durations,
second misleading lines, a warmup in two units, budgets that are not whole steps, muP with an
optimizer it has no rules for, keys an optimizer does not read, and messages."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper.errors import StudyError
from sweeper.study.spec import StudySpec, check_spec, load_study, parse_study_toml
from tests.sweeper.helpers import light_cli as _run_cli
from tests.sweeper.helpers import study_problems as _problems

REPO = Path(__file__).resolve().parents[3]

BASE = """\
[sweep]
name = "s27"
{sweep}

[model]
context = 64
{model}

[ladder]
widths = [16, 32]
{ladder}

[search]
{search}

[train]
{train}

[sampler]
{sampler}
"""
DEFAULTS = {
    "sweep": "trials_per_cell = 2",
    "model": "",
    "ladder": "depths = [2]\ntokens = [32768]",
    "search": "lr = { values = [1e-3, 2e-3] }\nbatch_size = 8",
    "train": "",
    "sampler": 'kind = "grid"',
}


def _text(**parts: str) -> str:
    return BASE.format(**{**DEFAULTS, **parts})


def _ok(tmp_path: Path, text: str) -> StudySpec:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return load_study(path)


# ---- A. data that no run can read ----------------------------------------------------------------
def _bins(folder: Path, train: list[int], val: list[int] | None) -> None:
    import array

    folder.mkdir()
    for name, tokens in (("train", train), ("val", val)):
        if tokens is not None:
            (folder / f"{name}.bin").write_bytes(array.array("H", tokens).tobytes())


def _data_case(tmp_path: Path, case: str) -> tuple[str, str]:
    """(``sweep.data``, ``[model]`` lines) of one unreadable data case."""
    if case == "token-above-vocab":  # the audit's nano.toml: tokens up to 999, vocab 256
        _bins(tmp_path / "nano", [i % 1000 for i in range(20_000)], list(range(200)))
        return str(tmp_path / "nano"), ""
    if case == "empty-folder":
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "notes.toml").write_text("x = 1\n")
        return str(tmp_path / "empty"), ""
    if case == "short-text":  # 300 bytes: a validation split of 30, context 64
        (tmp_path / "tiny.txt").write_text("x" * 300)
        return str(tmp_path / "tiny.txt"), ""
    if case == "no-val-bin":
        _bins(tmp_path / "half", list(range(250)) * 2, None)
        return str(tmp_path / "half"), ""
    if case == "odd-bin":
        _bins(tmp_path / "odd", list(range(250)) * 2, list(range(200)))
        (tmp_path / "odd" / "val.bin").write_bytes(b"\x01\x00\x02")
        return str(tmp_path / "odd"), ""
    if case == "vocab-above-uint16":
        _bins(tmp_path / "big", list(range(250)) * 2, list(range(200)))
        return str(tmp_path / "big"), "vocab_size = 70000"
    if case == "short-val-bin":
        _bins(tmp_path / "sv", list(range(250)) * 2, list(range(40)))
        return str(tmp_path / "sv"), ""
    raise AssertionError(case)


DATA_CASES = {  # case: (the key named, what the line says)
    "token-above-vocab": ("model.vocab_size", "holds token 999 (every token id must be below"),
    "empty-folder": ("sweep.data", "neither train.bin/val.bin nor .txt/.md files"),
    "short-text": ("sweep.data", "holds 300 bytes, too few for model.context 64"),
    "no-val-bin": ("sweep.data", "holds train.bin but no val.bin"),
    "odd-bin": ("sweep.data", "is not a file of uint16 tokens (3 bytes)"),
    "vocab-above-uint16": ("model.vocab_size", "70000 is above the 65,536 values"),
    "short-val-bin": ("sweep.data", "val.bin of"),
}


@pytest.mark.parametrize("case", list(DATA_CASES))
def test_data_no_run_can_read_is_one_problem_naming_its_key(tmp_path: Path, case: str) -> None:
    """It passed validate, and every run then failed at launch (validate --estimate: "internal
    error: ValueError")."""
    data, model = _data_case(tmp_path, case)
    key, says = DATA_CASES[case]
    text = _text(sweep=f'trials_per_cell = 2\ndata = "{data}"', model=model)
    (problem,) = _problems(tmp_path, text)
    assert problem.startswith(f"{key}: ") and says in problem, problem
    # what launch checks before Ray starts (check_spec of the spec): the same line
    spec = parse_study_toml(text)
    assert problem in check_spec(spec)


@pytest.mark.parametrize("case", list(DATA_CASES))
def test_the_data_rules_are_the_loaders(tmp_path: Path, case: str) -> None:
    """validate reads the data without torch: each case it refuses, proxy_models' loader or its
    training loop refuses too (the rules are read from the files' sizes, not copied blind)."""
    from proxy_models.data import load_data, val_offsets

    data, model = _data_case(tmp_path, case)
    vocab = 70000 if "70000" in model else 256
    with pytest.raises((ValueError, FileNotFoundError)):
        d = load_data(data, vocab_size=vocab)
        val_offsets(len(d.val), 64, 8)  # (the loop's own rule for the validation split)


def test_a_text_holds_a_window_from_ten_times_the_context(tmp_path: Path) -> None:
    """The least text the line asks for (650 bytes at context 64) loads and holds a window in
    both splits; one byte less is refused."""
    from proxy_models.data import load_data, val_offsets

    corpus = tmp_path / "corpus.txt"
    text = _text(sweep=f'trials_per_cell = 2\ndata = "{corpus}"')
    corpus.write_text("x" * 649)
    (problem,) = _problems(tmp_path, text)
    assert "give at least 650 bytes of text, or a shorter context" in problem
    corpus.write_text("x" * 650)
    _ok(tmp_path, text)
    d = load_data(str(corpus), vocab_size=256)
    assert len(val_offsets(len(d.val), 64, 8)) == 8 and len(d.train) > 64 + 1


def test_validate_and_launch_refuse_unreadable_data_without_torch_or_ray(tmp_path: Path) -> None:
    data, _ = _data_case(tmp_path, "token-above-vocab")
    path = tmp_path / "nano.toml"
    path.write_text(_text(sweep=f'trials_per_cell = 2\ndata = "{data}"'))
    db = tmp_path / "never.db"
    for verb in (["validate", str(path)], ["validate", str(path), "--estimate"],
                 ["launch", str(path), "--storage", f"sqlite:///{db}"]):  # fmt: skip
        r = _run_cli(verb, tmp_path)
        assert r.returncode == 2, (verb, r.stderr)
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"sweeper: error: {path}: model.vocab_size: 256 does not cover")
        assert "internal error" not in line
    assert not db.exists()


def test_the_estimate_of_a_spec_built_in_python_refuses_unreadable_data(tmp_path: Path) -> None:
    """The probe's run had raised ValueError ("internal error"); a spec built in Python skips
    validate, so estimate_study checks the data first, and the driver's data check names the
    key instead of returning None."""
    from sweeper.run import trainable
    from sweeper.run.estimate import estimate_study

    (tmp_path / "tiny.txt").write_text("x" * 300)
    spec = parse_study_toml(_text())
    bad = replace(spec, sweep=replace(spec.sweep, data=str(tmp_path / "tiny.txt")))

    def never(*_: object) -> None:
        raise AssertionError("probed")

    with pytest.raises(StudyError, match=r"sweep.data: .* holds 300 bytes, too few"):
        estimate_study(bad, cores=1, probe=never)  # type: ignore[arg-type]
    with pytest.raises(StudyError, match=r"sweep.data: .* holds 300 bytes, too few"):
        trainable.data_check(bad, str(tmp_path / "tiny.txt"))


# ---- B. the estimate: the load over the machine's cores, and durations -------------------------
def test_the_load_is_divided_by_the_machines_cores_not_the_affinity_masks() -> None:
    """Under taskset -c 1 on 2 cores the factor was (load + 1) / 1 and the estimate 3.4x the
    launch: the load average counts every core of the machine."""
    from sweeper.run.estimate import load_factor

    assert load_factor(3.0, 1, 2) == pytest.approx(2.0)  # (was 4)
    assert load_factor(4.7, 2, 2) == pytest.approx(2.85)
    assert load_factor(0.5, 1, 2) == 1.0
    assert load_factor(7.0, 16, 16) == 1.0 and load_factor(2.0, 4, 64) == 1.0
    assert load_factor(3.0, 2, None) == pytest.approx(2.0)  # (the machine's cores not known)


def test_the_estimate_scales_the_cpu_share_of_its_fixed_costs_by_the_machines_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The smoke study's fixed costs were priced at 57-71 s against about 26 s: scaled whole by
    the load, and the load divided by the affinity mask's cores."""
    from sweeper.run.estimate import (
        CPU_SHARE,
        LAUNCH_S,
        PROCESS_S,
        TRIAL_S,
        Probe,
        estimate_study,
    )
    from sweeper.study.ladder import Cell

    def probe(spec: StudySpec, cell: Cell, steps: int, copies: int) -> Probe:
        return Probe(cell.name, cell.flops_per_token, 1e-5, 0.5, steps)

    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    spec = parse_study_toml(_text())
    pinned = estimate_study(spec, cores=1, probe=probe)  # (taskset -c 1 on 2 cores)
    assert pinned.host_cores == 2 and pinned.load_factor == pytest.approx(2.0)
    assert pinned.fixed_factor == pytest.approx(1 + CPU_SHARE)
    idle = LAUNCH_S + TRIAL_S * pinned.runs + PROCESS_S
    assert pinned.overhead_s == pytest.approx((1 + CPU_SHARE) * idle)
    assert "load average 3.00 on 2 cores, 1 of them the sweep's" in pinned.caveat
    assert "(x1.4)" in pinned.caveat
    whole = estimate_study(spec, cores=2, probe=probe)
    assert whole.load_factor == pytest.approx(2.0) and "1 of them" not in whole.caveat
    assert whole.to_dict()["fixed_factor"] == pytest.approx(1 + CPU_SHARE)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    calm = estimate_study(spec, cores=1, probe=probe)
    assert calm.fixed_factor == 1.0 and calm.overhead_s == pytest.approx(idle)


def test_durations_below_two_minutes_are_seconds() -> None:
    """61-89 s had read "1 min"."""
    from sweeper.run.estimate import duration

    got = [duration(s) for s in (0.25, 12.4, 59.6, 61, 89, 119.4, 125, 150, 594, 600, 5399, 5400)]
    assert got == ["0.2 s", "12 s", "60 s", "61 s", "89 s", "119 s", "2.1 min", "2.5 min",
                   "9.9 min", "10 min", "90 min", "1.5 h"]  # fmt: skip
    assert duration(120) == "2 min"


# ---- C. one bad value, one line -----------------------------------------------------------------
SIX = "trials_per_cell = 6"


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (
            {"sweep": SIX, "search": "lr = { values = [0, 1.7e-3] }"},
            "search.lr.values: 0.0 must be > 0",
        ),
        ({"sweep": SIX, "search": "lr = 0"}, "search.lr: 0.0 must be > 0"),
        ({"sweep": SIX, "search": "lr = -1e-3"}, "search.lr: -0.001 must be > 0"),
        ({"sweep": SIX, "search": "lr = inf"}, "search.lr: inf must be finite and > 0"),
        (
            {"sweep": SIX, "search": 'lr = "x"'},
            "search.lr: expected a number or a table, got string",
        ),
        ({"sweep": SIX, "search": "lr = { values = [] }"}, "search.lr.values: empty list"),
        (
            {"sweep": SIX, "search": 'lr = { values = [1e-3, "x"] }'},
            "search.lr.values[1]: expected",
        ),
        (
            {
                "sweep": SIX,
                "search": "lr = { values = [1e-3, 2e-3] }\nbatch_size = { values = [8, 0] }",
            },
            "search.batch_size.values: 0 must be >= 1",
        ),
        ({"ladder": "depths = [2.5]\ntokens = [32768]"}, "ladder.depths[0]: expected an integer"),
        ({"ladder": "depths = [2]\ntokens = [0]"}, "ladder.tokens: 0 must be >= 1"),
        ({"ladder": "depths = [2]\ntokens_per_param = [0]"}, "ladder.tokens_per_param: 0.0 must"),
    ],
    ids=[
        "lr-values-0",
        "lr-0",
        "lr-negative",
        "lr-inf",
        "lr-string",
        "lr-empty",
        "lr-element",
        "batch-element",
        "depth-float",
        "tokens-0",
        "tpp-0",
    ],
)
def test_one_bad_value_is_one_line(tmp_path: Path, parts: dict[str, str], expected: str) -> None:
    """A bad LR added "sweep.trials_per_cell: 6 exceeds the grid's 1 point(s)" (the grid counted
    with the stand-in LR), depths = [2.5] added "ladder.depths: missing", tokens = [0] added
    "ladder: give exactly one of tokens or tokens_per_param"."""
    problems = _problems(tmp_path, _text(**parts))
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems


def test_a_grid_too_small_for_its_count_is_still_said(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path, _text(sweep=SIX))
    assert problem == "sweep.trials_per_cell: 6 exceeds the grid's 2 point(s)"


# ---- D. warmup: a fraction of the steps or whole steps ------------------------------------------
@pytest.mark.parametrize(
    ("warmup", "sampler", "expected"),
    [
        ("{ low = 0.05, high = 20.0 }", "tpe", ["the range 0.05 to 20 holds fractions"]),
        (
            "{ values = [0.5, 1.0, 2.0] }",
            "grid",
            ["0.5 (fractions of the steps) and [1, 2] (steps)"],
        ),
        ("2.5", "grid", ["2.5 is not whole steps"]),
        ("{ values = [2.0, 2.5, 3.5] }", "grid", ["[2.5, 3.5] are not whole steps"]),
        ("{ values = [0.5, 2.5] }", "grid", ["(fractions of the steps)", "2.5 is not whole"]),
        ("{ low = 2, high = 20 }", "tpe", ["the range 2 to 20 is a number of steps"]),
    ],
    ids=["range-across-1", "list-across-1", "fixed-2.5", "list-2.5", "both", "range-of-steps"],
)
def test_a_warmup_mixing_fractions_and_steps_or_not_whole_is_refused(
    tmp_path: Path, warmup: str, sampler: str, expected: list[str]
) -> None:
    search = f"lr = {{ values = [1e-3, 2e-3] }}\nbatch_size = 8\nwarmup = {warmup}"
    sweep = "trials_per_cell = 2" if sampler == "grid" else "trials_per_cell = 4"
    problems = _problems(tmp_path, _text(sweep=sweep, search=search, sampler=f'kind = "{sampler}"'))
    assert len(problems) == len(expected), problems
    for p, e in zip(problems, expected, strict=True):
        assert p.startswith("search.warmup: ") and e in p, p


@pytest.mark.parametrize(
    "warmup",
    [
        "0.1",
        "20",
        "{ values = [0.05, 0.1] }",
        "{ values = [10, 20] }",
        "{ low = 0.0, high = 0.5, log = false }",
        "{ values = [0, 50, 100] }",  # (0 is no warmup in either unit: a review)
        "{ values = [0, 0.05, 0.1] }",
    ],
)
def test_a_warmup_in_one_unit_passes(tmp_path: Path, warmup: str) -> None:
    search = f"lr = {{ values = [1e-3, 2e-3] }}\nbatch_size = 8\nwarmup = {warmup}"
    sampler = 'kind = "tpe"' if "low" in warmup else 'kind = "grid"'
    _ok(tmp_path, _text(sweep="trials_per_cell = 2", search=search, sampler=sampler))


# ---- E. budgets that are not whole steps --------------------------------------------------------
def _warnings(tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sweeper.study.spec"):
        _ok(tmp_path, text)
    return [r.getMessage().split(": ", 1)[1] for r in caplog.records]


def test_whole_steps_that_miss_d_by_more_than_ten_percent_are_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ladder.tokens = [2047] at batch 16 x context 64 trained 1,024 tokens, fitted at D =
    2,047, and validate said ok."""
    text = _text(ladder="depths = [2]\ntokens = [2047, 40960]",
                 search="lr = { values = [1e-3, 2e-3] }\nbatch_size = 16")  # fmt: skip
    (warning,) = _warnings(tmp_path, text, caplog)
    assert warning.startswith("ladder.tokens: whole steps miss w16-d2-t2.05k's D by more than 10%")
    assert "1,024 of its 2,047 (50% short), and the fit takes D = 2,047" in warning
    assert "(2 cells of ladder.tokens fall short)" in warning
    # a list of batches: its worst batch; 6% short (batch 30 of 40,960 at context 128) is not
    batches = "lr = { values = [1e-3, 2e-3] }\nbatch_size = { values = [16, 30] }"
    text = _text(model="context = 128", ladder="depths = [2]\ntokens = [40960]", search=batches)
    assert _warnings(tmp_path, text.replace("context = 64\n", ""), caplog) == []
    batches = "lr = { values = [1e-3, 2e-3] }\nbatch_size = { values = [16, 48] }"
    text = _text(ladder="[[ladder.cells]]\nwidth = 16\ndepth = 2\ntokens = 4096", search=batches)
    text = text.replace("widths = [16, 32]\n", "")
    (warning,) = _warnings(tmp_path, text, caplog)
    assert warning.startswith("ladder.cells[0].tokens: whole steps miss w16-d2-t4.1k's D")
    assert "1 step(s) of batch 48 × context 64 = 3,072 tokens, 3,072 of its 4,096 (25% short)" in (
        warning
    )
    assert warning.endswith("or batches that divide them")


def test_a_batch_range_that_can_miss_d_is_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = _text(sweep="trials_per_cell = 4", ladder="depths = [2]\ntokens = [4096, 8192]",
                 search="lr = { values = [1e-3, 2e-3] }\nbatch_size = { low = 8, high = 48 }",
                 sampler='kind = "tpe"')  # fmt: skip
    (warning,) = _warnings(tmp_path, text, caplog)
    assert warning.startswith("search.batch_size: a batch of the range 8 to 48 can miss")
    assert "up to 48% short (batch 33 at w16-d2-t4.1k: 1 step(s), 2,112 of its 4,096" in warning


def test_the_shipped_studies_warn_of_no_short_steps(caplog: pytest.LogCaptureFixture) -> None:
    """studies/batch_budget.toml's TPE batch range falls short by 4% at most: below the 10%."""
    for path in sorted((REPO / "studies").glob("*.toml")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="sweeper.study.spec"):
            load_study(path)
        assert not [r for r in caplog.records if "whole steps" in r.getMessage()], path


# ---- F, G. the optimizer: muP rules, and keys it does not read ----------------------------------
@pytest.mark.parametrize(
    ("opt", "par"),
    [("sgd", "mup"), ("adafactor", "mup"), ("sgd", "completep"), ("adafactor", "completep")],
)
def test_mup_with_an_optimizer_it_has_no_rules_for_is_refused(
    tmp_path: Path, opt: str, par: str
) -> None:
    """proxy_models applies Adam's muP rules (hidden LR / m, decay x m) whatever the optimizer:
    not muP for SGD nor Adafactor (coord-check flagged both)."""
    text = _text(model=f'parametrization = "{par}"\nbase_width = 16',
                 train=f'optimizer = "{opt}"')  # fmt: skip
    (problem,) = _problems(tmp_path, text)
    assert problem.startswith(f"train.optimizer: '{opt}' under model.parametrization '{par}': ")
    assert "use 'adamw' or 'muon', or parametrization 'sp'" in problem
    # launch's check of a spec built in Python says the same
    spec = parse_study_toml(_text(model="base_width = 16"))
    built = replace(spec, model=replace(spec.model, parametrization=par),
                    train=replace(spec.train, optimizer=opt))  # fmt: skip
    assert problem in check_spec(built)


@pytest.mark.parametrize(
    ("opt", "par"), [("muon", "mup"), ("adamw", "completep"), ("sgd", "sp"), ("adafactor", "sp")]
)
def test_the_optimizers_with_their_parametrizations_pass(
    tmp_path: Path, opt: str, par: str
) -> None:
    _ok(tmp_path, _text(model=f'parametrization = "{par}"\nbase_width = 16',
                        train=f'optimizer = "{opt}"'))  # fmt: skip


@pytest.mark.parametrize(
    ("opt", "key", "line"),
    [
        ("adafactor", "search.beta2", "beta2 = { values = [0.9, 0.99] }"),
        ("adafactor", "search.beta2", "beta2 = 0.99"),
        ("sgd", "search.beta2", "beta2 = 0.99"),
        ("adafactor", "train.eps", "eps = 1e-6"),
        ("sgd", "train.eps", "eps = 1e-6"),
        ("adafactor", "train.beta1", "beta1 = 0.5"),
    ],
)
def test_a_key_the_optimizer_does_not_read_is_refused(
    tmp_path: Path, opt: str, key: str, line: str
) -> None:
    """adaf_beta2.toml doubled the grid for identical losses."""
    search, train = DEFAULTS["search"], f'optimizer = "{opt}"'
    if key.startswith("search"):
        search += f"\n{line}"
    else:
        train += f"\n{line}"
    (problem,) = _problems(tmp_path, _text(search=search, train=train))
    assert problem.startswith(f"{key}: not used by train.optimizer '{opt}' (")
    assert problem.endswith("): leave it out")


def test_the_keys_an_optimizer_reads_pass_and_stored_studies_still_read(tmp_path: Path) -> None:
    _ok(tmp_path, _text(train='optimizer = "sgd"\nbeta1 = 0.5'))  # (SGD's momentum)
    _ok(tmp_path, _text(search=DEFAULTS["search"] + "\nbeta2 = 0.99", train='optimizer = "muon"'))
    _ok(tmp_path, _text(train='optimizer = "adafactor"\neps = 1e-8'))  # (at its default)
    # a sweep launched before the rule reads back (the rules of a study about to be run)
    text = _text(search=DEFAULTS["search"] + "\nbeta2 = 0.99", train='optimizer = "adafactor"',
                 model='parametrization = "mup"\nbase_width = 16')  # fmt: skip
    assert parse_study_toml(text).train.optimizer == "adafactor"


# ---- H. messages --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (
            {"sweep": 'trials_per_cell = 2\nstorage = "notaurl"'},
            "sweep.storage: invalid storage URL 'notaurl': Could not parse SQLAlchemy URL from given "
            "URL string; a SQLite file is written sqlite:///notaurl",
        ),
        ({"search": "lr = inf"}, "search.lr: inf must be finite and > 0"),
        ({"search": "lr = -inf"}, "search.lr: -inf must be finite and > 0"),
        ({"search": "lr = nan\nbatch_size = 8"}, "search.lr: nan must be finite and > 0"),
        (
            {"search": DEFAULTS["search"] + "\nramp = 3"},
            "search.ramp: unknown key: a batch-size ramp (HParams.ramp) is not available in a study",
        ),
    ],
    ids=["storage", "lr-inf", "lr-minus-inf", "lr-nan", "ramp"],
)
def test_messages(tmp_path: Path, parts: dict[str, str], expected: str) -> None:
    assert _problems(tmp_path, _text(**parts)) == [expected]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("_x", "'_x' must start with a letter or a digit"),
        (
            "a+b",
            "'a+b' must be letters, digits, '_', '-' or '.': '+' is reserved for joined sweeps",
        ),
        ("a/b", "'a/b' must be letters, digits, '_', '-' or '.': '/' parts a sweep's name"),
        ("a b", "'a b' must be letters, digits, '_', '-' or '.'"),
    ],
)
def test_a_bad_sweep_name_says_which_rule(tmp_path: Path, name: str, expected: str) -> None:
    text = _text().replace('name = "s27"', f'name = "{name}"')
    (problem,) = _problems(tmp_path, text)
    assert problem.startswith(f"sweep.name: {expected}"), problem
    assert "(no '/')" not in problem
    spec = parse_study_toml(_text())
    assert check_spec(replace(spec, sweep=replace(spec.sweep, name=name)))[0].startswith(
        f"sweep.name: {expected}"
    )


def test_the_storage_line_is_launchs(tmp_path: Path) -> None:
    """validate passed sweep.storage = "notaurl"; launch refused it (get_engine)."""
    from sweeper.errors import StorageError
    from sweeper.study.storage import get_engine

    (problem,) = _problems(tmp_path, _text(sweep='trials_per_cell = 2\nstorage = "notaurl"'))
    with pytest.raises(StorageError) as info:
        get_engine("notaurl", new=True)
    assert problem == f"sweep.storage: {info.value}"


def test_an_explicit_cells_width_is_named_as_its_key(tmp_path: Path) -> None:
    """[[ladder.cells]] width = 33 was "ladder.widths: 33 is not divisible ...", a key the file
    does not have."""
    ladder = "\n".join(f"[[ladder.cells]]\nwidth = {w}\ndepth = {d}\ntokens = 32768"
                       for w, d in ((32, 2), (33, 2), (33, 4)))  # fmt: skip
    text = _text(ladder=ladder).replace("widths = [16, 32]\n", "")
    (problem,) = _problems(tmp_path, text)
    assert problem == "ladder.cells[1].width: 33 is not divisible by head_dim 16"


def test_a_close_enough_key_is_still_suggested(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path, _text(search=DEFAULTS["search"] + "\nwarmpu = 0.1"))
    assert "did you mean 'warmup'?" in problem
    (problem,) = _problems(tmp_path, _text(search="lr = { values = [1e-3, 2e-3] }\nbatch = 8"))
    assert "did you mean 'batch_size'?" in problem


def test_lr_values_are_finite_in_every_form(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path, _text(search="lr = { values = [1e-3, inf] }"))
    assert problem == "search.lr.values[1]: inf must be finite and > 0"


def test_an_integer_warmup_range_draws_whole_steps_and_passes() -> None:
    """An integer range (the Python API's ParamSpec) draws 0 or whole steps: neither mixed nor
    broken (a review: it had been refused as not whole)."""
    from dataclasses import replace

    from sweeper.study.spec import ParamSpec, check_warmup

    spec = parse_study_toml(_text(sweep="trials_per_cell = 2", sampler='kind = "tpe"'))
    for low in (0, 10):
        warm = ParamSpec.range(low, 100, log=False, integer=True)
        assert check_warmup(replace(spec, search=replace(spec.search, warmup=warm))) == []

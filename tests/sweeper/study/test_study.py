"""Study files: strict validation (every problem, one line each), resolved TOML, hash, cells, space."""

from __future__ import annotations

import logging
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper.errors import StudyError
from sweeper.study.ladder import cells, param_counts
from sweeper.study.space import distributions, grid_values, hparams_kwargs
from sweeper.study.spec import (
    CellSpec,
    LadderSpec,
    ModelSpec,
    ParamSpec,
    SamplerSpec,
    SearchSpace,
    StudySpec,
    SweepSection,
    check_data,
    check_run,
    check_spec,
    data_source,
    load_study,
    parse_study_toml,
)
from sweeper.study.study_toml import spec_hash, study_toml
from tests.sweeper.helpers import light_cli as _run_cli
from tests.sweeper.helpers import study_problems as _problems

REPO = Path(__file__).resolve().parents[3]
STUDIES = sorted((REPO / "studies").glob("*.toml"))

BASE = """\
[sweep]
name = "base"
trials_per_cell = 4

[model]
context = 64

[ladder]
widths = [16, 32]
depths = [2]
tokens = [32768]

[search]
lr = { low = 1e-3, high = 5e-2, log = true }
batch_size = 8
"""


def _study(text: str) -> str:
    return textwrap.dedent(text)


def _with(section: str, line: str, base: str = BASE) -> str:
    """BASE with ``line`` added at the end of ``[section]`` (a new section if absent)."""
    header = f"[{section}]\n"
    if header not in base:
        return base + f"\n{header}{line}\n"
    head, tail = base.split(header, 1)
    body, sep, rest = tail.partition("\n[")
    return (
        f"{head}{header}{body.rstrip()}\n{line}\n{sep}{rest}"
        if sep
        else f"{head}{header}{body.rstrip()}\n{line}\n"
    )


def _replace(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


# (case id, study text, the one expected problem line)
BAD_CASES: list[tuple[str, str, str]] = [
    ("unknown-key", _with("model", 'nrom = "rmsnorm"'), "model.nrom: unknown key"),
    ("unknown-section", BASE + '\n[samplr]\nkind = "tpe"\n', "samplr: unknown key"),
    (
        "wrong-type-list-item",
        _replace("widths = [16, 32]", 'widths = [16, "32"]'),
        "ladder.widths[1]: expected an integer, got string '32'",
    ),
    (
        "wrong-type-scalar",
        _replace("trials_per_cell = 4", 'trials_per_cell = "4"'),
        "sweep.trials_per_cell: expected an integer, got string '4'",
    ),
    (
        "inverted-range",
        _replace("low = 1e-3, high = 5e-2", "low = 5e-2, high = 1e-3"),
        "search.lr: inverted range: low 0.05 must be < high 0.001",
    ),
    (
        "width-not-divisible-head-dim",
        _replace("widths = [16, 32]", "widths = [16, 40]"),
        "ladder.widths: 40 is not divisible by head_dim 16",
    ),
    (
        "width-not-divisible-heads",
        _with("model", "heads = 3", _replace("widths = [16, 32]", "widths = [24, 32]")),
        "ladder.widths: 32 is not divisible by heads 3",
    ),
    (
        "empty-ladder",
        _replace("widths = [16, 32]\ndepths = [2]\ntokens = [32768]\n", ""),
        "ladder: no cells",
    ),
    (
        "unknown-sampler",
        BASE + '\n[sampler]\nkind = "cmaes"\n',
        "sampler.kind: unknown value 'cmaes' (expected one of: tpe, gp, grid, random, qmc)",
    ),
    (
        "unknown-pruner",
        BASE + '\n[pruner]\nkind = "median"\n',
        "pruner.kind: unknown value 'median'",
    ),
    (
        "log-range-nonpositive",
        _replace("low = 1e-3, high = 5e-2", "low = -1e-3, high = 5e-2"),
        "search.lr.low: -0.001 must be > 0",
    ),
    (
        "output-mult-string",
        _with("model", 'output_mult = "2"'),
        "model.output_mult: expected a number, got string '2'",
    ),
    ("output-mult-zero", _with("model", "output_mult = 0"), "model.output_mult: 0.0 must be > 0"),
    ("missing-name", _replace('name = "base"\n', ""), "sweep.name: missing"),
    ("name-with-slash", _replace('name = "base"', 'name = "a/b"'), "sweep.name: 'a/b' must be"),
    # (PostgreSQL's name columns hold 255; a transfer check adds ".transfer.<cell>": an audit)
    (
        "name-too-long",
        _replace('name = "base"', f'name = "{"a" * 161}"'),
        "sweep.name: 161 characters, more than the 160 a storage keeps",
    ),
    (
        "tokens-and-tokens-per-param",
        _with("ladder", "tokens_per_param = [20.0]"),
        "ladder: give exactly one of tokens or tokens_per_param",
    ),
    (
        "grid-with-range",
        BASE + '\n[sampler]\nkind = "grid"\n',
        "sampler.kind: grid needs a list of values for every searched parameter, not a range: search.lr",
    ),
    (
        "micro-batch-not-dividing",
        BASE + "\n[train]\nmicro_batch_size = 3\n",
        "train.micro_batch_size: 3 does not divide batch size 8",
    ),
    (
        "asha-key-without-asha",
        BASE + "\n[pruner]\nreduction_factor = 2.0\n",
        "pruner.reduction_factor: only used with kind = 'asha'",
    ),
    ("beta2-out-of-range", _with("search", "beta2 = 1.5"), "search.beta2: 1.5 must be > 0 and < 1"),
    (
        "key-of-another-section",
        _with("train", "warmup = 0.1"),
        "train.warmup: unknown key in [train]: move it to [search]",
    ),
    # another tool's name for a key: Sweeper's name (an audit: the list of allowed keys alone)
    (
        "another-tools-name",
        _with("model", "seq_len = 128"),
        "model.seq_len: unknown key: Sweeper's name for it is [model] context",
    ),
    (
        "list-written-as-a-string",
        _replace("widths = [16, 32]", 'widths = "16,24,32"'),
        "ladder.widths: expected a list of integers, got string '16,24,32': write [16, 24, 32]",
    ),
    # a misspelt sampler (section or kind): its one line, not what its kind would require
    (
        "misspelt-sampler-section",
        _replace("trials_per_cell = 4\n", "") + '\n[samplr]\nkind = "grid"\n',
        "samplr: unknown key (did you mean 'sampler'?",
    ),
    (
        "misspelt-sampler-kind",
        _replace("trials_per_cell = 4\n", "") + '\n[sampler]\nkind = "grdi"\n',
        "sampler.kind: unknown value 'grdi'",
    ),
    (
        "one-fixed-lr",
        _replace("lr = { low = 1e-3, high = 5e-2, log = true }", "lr = 3e-3"),
        "search.lr: one LR (0.003) at one batch size leaves sampler 'tpe' nothing to choose",
    ),
    (
        "tokens-below-one-step",
        _replace("tokens = [32768]", "tokens = [100]"),
        "ladder.tokens: 100 is less than one step at batch 8 (8 × 64 = 512 tokens): give at "
        "least 512 tokens",
    ),
    # (a docs audit: a list as the LR, the commonest first study, named no fix)
    (
        "lr-as-a-bare-list",
        _replace("lr = { low = 1e-3, high = 5e-2, log = true }", "lr = [1e-3, 2e-3, 4e-3]"),
        "got list [0.001, 0.002, 0.004] (a list of values: lr = { values = [...] })",
    ),
    # (a docs audit: the two forms together were an internal error, UnboundLocalError)
    (
        "ladder-in-both-forms",
        BASE + "\n[[ladder.cells]]\nwidth = 16\ndepth = 2\ntokens = 32768\n",
        "ladder: give widths/depths/tokens or cells, not both",
    ),
    # (a docs audit: accepted, then every run failed in load_data)
    (
        "byte-data-below-256",
        _with("model", "vocab_size = 200"),
        "model.vocab_size: 200 is below the 256 byte values of byte-level data ('builtin')",
    ),
    ("zero-cpu", BASE + "\n[resources]\ncpu = 0\n", "resources.cpu: 0.0 must be > 0"),
    ("missing-trials", _replace("trials_per_cell = 4\n", ""), "sweep.trials_per_cell: missing"),
    ("invalid-toml", BASE + "\n[model\n", "invalid TOML"),
]


def test_base_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "study.toml"
    path.write_text(BASE)
    spec = load_study(path)
    assert [c.name for c in cells(spec)] == ["w16-d2-t32.8k", "w32-d2-t32.8k"]
    assert spec.trials_per_cell == 4 and spec.sampler.kind == "tpe"
    assert spec.pruner.kind == "divergence"


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES]
)
def test_bad_study_gives_its_one_line_error(tmp_path: Path, text: str, expected: str) -> None:
    problems = _problems(tmp_path, text)
    assert len(problems) == 1, problems
    assert expected in problems[0]
    assert "\n" not in problems[0]


def test_bad_case_table_is_large_enough() -> None:
    assert len(BAD_CASES) >= 12


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    text = _replace("widths = [16, 32]", "widths = [16, 40]")
    text = text.replace("low = 1e-3, high = 5e-2", "low = 5e-2, high = 1e-3")
    text += '\n[sampler]\nkind = "cmaes"\n\n[model2]\nx = 1\n'
    problems = _problems(tmp_path, text)
    assert len(problems) == 4, problems
    joined = "\n".join(problems)
    for part in ("model2: unknown key", "search.lr: inverted range", "sampler.kind", "40 is not"):
        assert part in joined


def test_cli_reports_bad_studies_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    """validate and launch on every bad case: exit 2, one line per problem, no storage created."""
    db = tmp_path / "never.db"
    chosen = BAD_CASES[:6] + BAD_CASES[-3:]
    chosen += [c for c in BAD_CASES if c[0].startswith("output-mult") and c not in chosen]
    for case, text, expected in chosen:
        path = tmp_path / f"{case}.toml"
        path.write_text(text)
        for verb in (
            ["validate", str(path)],
            ["launch", str(path), "--storage", f"sqlite:///{db}"],
        ):
            r = _run_cli(verb, tmp_path)
            assert r.returncode == 2, (case, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1, (case, lines)
            assert lines[0].startswith(f"sweeper: error: {path}: ")
            assert expected in lines[0]
        assert not db.exists()
        assert not (tmp_path / "sweeper.db").exists()


def test_cli_validate_ok_imports_neither_torch_nor_ray(tmp_path: Path) -> None:
    r = _run_cli(["validate", str(REPO / "studies" / "smoke.toml")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "w16-d2-t32.8k" in r.stdout and "ok" in r.stdout


@pytest.mark.parametrize("path", STUDIES, ids=[p.stem for p in STUDIES])
def test_every_shipped_study_loads_and_round_trips(path: Path) -> None:
    spec = load_study(path)
    assert spec.name == path.stem
    assert cells(spec)
    again = parse_study_toml(study_toml(spec))
    # the resolved study spells out what the file may leave implicit (a grid's trials per cell)
    assert again.trials_per_cell == spec.trials_per_cell
    assert (
        replace(again, sweep=replace(again.sweep, trials_per_cell=spec.sweep.trials_per_cell))
        == spec
    )
    assert spec_hash(again) == spec_hash(spec)
    # each study says what it measures and what it costs here
    head = path.read_text().split("[sweep]")[0]
    assert head.count("#") >= 3 and ("minute" in head or "not run here" in head)


def test_shipped_studies_cover_the_issue() -> None:
    names = {p.stem for p in STUDIES}
    assert {
        "smoke",
        "quickstart",
        "width_sp",
        "width_mup",
        "depth_completep",
        "batch_budget",
        "gpu_cluster",
    } <= names
    q = load_study(REPO / "studies" / "quickstart.toml")
    widths = sorted({c.width for c in cells(q)})
    assert len(widths) >= 4 and len({c.tokens for c in cells(q)}) == 1
    gpu = load_study(REPO / "studies" / "gpu_cluster.toml")
    assert gpu.resources.gpu >= 1 and min(c.width for c in cells(gpu)) == 256
    assert max(c.width for c in cells(gpu)) == 2048


def test_spec_hash_ignores_operational_settings(tmp_path: Path) -> None:
    a = parse_study_toml(BASE)
    moved = parse_study_toml(
        _with("sweep", 'storage = "sqlite:///elsewhere.db"')
        + "\n[resources]\ncpu = 2\nmax_concurrent = 7\n"
    )
    assert spec_hash(moved) == spec_hash(a)
    changed = parse_study_toml(_replace("high = 5e-2", "high = 6e-2"))
    assert spec_hash(changed) != spec_hash(a)
    # more trials, or a sampler paced differently, extend the same measurement
    more = parse_study_toml(_replace("trials_per_cell = 4", "trials_per_cell = 5"))
    assert spec_hash(more) == spec_hash(a)
    paced = parse_study_toml(_with("sampler", "n_startup_trials = 3\nmax_pending_per_cell = 1"))
    assert spec_hash(paced) == spec_hash(a)
    assert "trials_per_cell = 5" in study_toml(more)  # the stored file still says it
    assert "max_pending_per_cell = 1" in study_toml(paced)
    # what a trial measures, or which points the sampler picks, is a different sweep
    for other in (
        _with("sweep", "seeds_per_point = 2"),
        _with("sampler", 'kind = "random"'),
        _with("sampler", "seed = 1"),
        _replace("batch_size = 8", "batch_size = 16"),
    ):
        assert spec_hash(parse_study_toml(other)) != spec_hash(a), other


def test_output_mult_reaches_every_proxy_config() -> None:
    from proxy_models import ProxyConfig, output_multiplier

    spec = parse_study_toml(_with("model", 'output_mult = 2.0\nparametrization = "mup"'))
    assert spec.model.output_mult == 2.0
    cfgs = [ProxyConfig(**c.proxy_config_kwargs()) for c in cells(spec)]
    assert [c.output_mult for c in cfgs] == [2.0, 2.0]
    assert [output_multiplier(c) for c in cfgs] == [2.0 * 64 / 16, 2.0 * 64 / 32]
    assert "output_mult = 2.0" in study_toml(spec) and parse_study_toml(study_toml(spec)) == spec
    assert spec_hash(spec) != spec_hash(replace(spec, model=replace(spec.model, output_mult=1.0)))


def test_default_output_mult_keeps_the_hash_of_older_sweeps() -> None:
    """At 1.0 the knob is left out of the hashed text, so sweeps launched before it existed keep
    their identity; the resolved file still spells it out."""
    a = parse_study_toml(BASE)
    assert "output_mult" not in study_toml(a, operational=False)
    assert "output_mult = 1.0" in study_toml(a)
    assert spec_hash(parse_study_toml(_with("model", "output_mult = 1.0"))) == spec_hash(a)


def test_first_seed_is_a_later_block_of_seeds() -> None:
    """``sweep.first_seed`` starts a sweep's seeds later (more seeds for an earlier sweep's points,
    in a sweep of their own): another measurement, so another hash, but 0 keeps older sweeps' hash."""
    a = parse_study_toml(BASE)
    later = parse_study_toml(_with("sweep", "first_seed = 2"))
    assert later.sweep.first_seed == 2 and a.sweep.first_seed == 0
    assert "first_seed" not in study_toml(a) and "first_seed = 2" in study_toml(later)
    assert parse_study_toml(study_toml(later)) == later
    assert spec_hash(later) != spec_hash(a)
    assert spec_hash(parse_study_toml(_with("sweep", "first_seed = 0"))) == spec_hash(a)
    with pytest.raises(StudyError, match="first_seed"):
        parse_study_toml(_with("sweep", "first_seed = -1"))


def test_programmatic_one_cell_grid_spec() -> None:
    """The validate-transfer shape: one explicit cell, fixed LR values, grid sampler."""
    spec = StudySpec(
        sweep=SweepSection(name="holdout-w128", seeds_per_point=2),
        model=ModelSpec(context=128),
        ladder=LadderSpec(cells=(CellSpec(width=128, depth=2, tokens=819_200),)),
        search=SearchSpace(
            lr=ParamSpec.grid([2.0e-3, 2.5e-3]), batch_size=ParamSpec.fixed(32, integer=True)
        ),
        sampler=SamplerSpec(kind="grid"),
    )
    assert check_spec(spec) == []
    assert spec.trials_per_cell == 2
    assert [c.name for c in cells(spec)] == ["w128-d2-t819k"]
    assert grid_values(spec.search) == {"lr": [2.0e-3, 2.5e-3], "batch_size": [32]}
    # the resolved file spells out the grid size; what the sweep measures is unchanged
    again = parse_study_toml(study_toml(spec))
    assert again.sweep.trials_per_cell == 2 and spec_hash(again) == spec_hash(spec)
    bad = StudySpec(
        sweep=SweepSection(name="x"),
        ladder=LadderSpec(cells=(CellSpec(width=100, depth=2, tokens=1000),)),
        search=SearchSpace(lr=ParamSpec.range(1e-2, 1e-3)),
    )
    problems = check_spec(bad)
    assert "sweep.trials_per_cell: missing (required unless sampler.kind = 'grid')" in problems
    # a count set to 0 in Python was not written back as TOML, so it read back as valid and
    # launch started Ray and stored an empty sweep (an API audit)
    zero = replace(spec, sweep=replace(spec.sweep, trials_per_cell=0))
    assert check_spec(zero) == ["sweep.trials_per_cell: 0 must be >= 1"]
    assert "ladder.cells[0].width: 100 is not divisible by head_dim 16" in problems
    assert any(p.startswith("search.lr: inverted range") for p in problems)
    # every problem at once: a negative LR had gone unsaid beside a count above the grid, and a
    # head_dim of 0 had been a ZeroDivisionError (an API audit)
    both = replace(spec, sweep=replace(spec.sweep, trials_per_cell=6),
                   search=replace(spec.search, lr=ParamSpec.grid([-1.0, 1e-3])))  # fmt: skip
    said = check_spec(both)
    assert any("exceeds the grid" in p for p in said) and any("-1.0 must be > 0" in p for p in said)
    no_heads = replace(spec, model=replace(spec.model, head_dim=0))
    assert any(p.startswith("model.head_dim") for p in check_spec(no_heads))


def test_tokens_per_param_budget() -> None:
    spec = parse_study_toml(_replace("tokens = [32768]", "tokens_per_param = [20.0]"))
    for c in cells(spec):
        assert c.tokens == round(20.0 * c.n_params)
        assert c.flops == pytest.approx(
            (6 * c.n_params + 6 * c.depth * c.context * c.width) * c.tokens
        )


def test_param_counts_match_proxy_config() -> None:
    from proxy_models import ProxyConfig

    for kw in (
        {"width": 64, "depth": 2},
        {"width": 48, "depth": 3, "qk_norm": True},
        {"width": 96, "depth": 1, "n_heads": 3, "tied_embeddings": True, "context": 32},
        {"width": 32, "depth": 4, "vocab_size": 512, "norm": "rmsnorm"},
    ):
        cfg = ProxyConfig(**kw)  # type: ignore[arg-type]
        n, total = param_counts(
            cfg.width,
            cfg.depth,
            heads=cfg.heads,
            context=cfg.context,
            vocab_size=cfg.vocab_size,
            qk_norm=cfg.qk_norm,
            tied_embeddings=cfg.tied_embeddings,
        )
        assert (n, total) == (cfg.n_params(), cfg.n_params_total()), kw
        model_params = sum(p.numel() for p in _model(cfg).parameters())
        assert total == model_params, kw


def _model(cfg: object) -> object:
    from proxy_models import build_model

    return build_model(cfg, seed=0)  # type: ignore[arg-type]


def test_cell_proxy_config_and_flops_agree() -> None:
    from proxy_models import ProxyConfig

    spec = load_study(REPO / "studies" / "gpu_cluster.toml")
    for c in cells(spec):
        cfg = ProxyConfig(**c.proxy_config_kwargs())
        assert cfg.n_params() == c.n_params and cfg.heads == c.heads
        assert cfg.flops_per_token() == c.flops_per_token
        assert cfg.deepseek_m() == c.deepseek_m


def test_space_distributions_and_hparams() -> None:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from proxy_models import HParams

    spec = parse_study_toml(
        _replace(
            "batch_size = 8",
            "batch_size = { low = 2, high = 64 }\nwarmup = 0.05\nbeta2 = { values = [0.95, 0.99] }",
        )
        + '\n[train]\nschedule = "wsd"\n'
    )
    d = distributions(spec.search)
    assert d["lr"] == FloatDistribution(1e-3, 5e-2, log=True)
    assert d["batch_size"] == IntDistribution(2, 64, log=True)
    assert d["warmup"] == FloatDistribution(0.05, 0.05)
    assert d["beta2"] == CategoricalDistribution((0.95, 0.99))
    hp = HParams(
        **hparams_kwargs(spec, {"lr": 3e-3, "batch_size": 16, "warmup": 0.05, "beta2": 0.99})
    )
    assert (hp.lr, hp.batch_size, hp.warmup, hp.beta2, hp.schedule) == (3e-3, 16, 0.05, 0.99, "wsd")
    with pytest.raises(ValueError, match="grid sampler"):
        grid_values(spec.search)


# ---- a study file about to be run: what validate holds it to beyond its fields ------------------
def test_data_not_here_is_warned_by_validate_and_refused_by_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``sweep.data`` that is not here: validate (load_study) says so and goes on, a study being
    often checked away from its data (studies/gpu_cluster.toml, tokens_bpe.toml); launch's check
    (check_spec) refuses it. One rule, resolved as launch resolves it (the working directory)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "study.toml"
    path.write_text(_with("sweep", 'data = "/nonexistent/x"'))
    with caplog.at_level(logging.WARNING, logger="sweeper.study.spec"):
        spec = load_study(path)
    (line,) = check_data(spec)
    assert line.startswith("sweep.data: '/nonexistent/x' not found (give an existing file")
    assert [r.getMessage() for r in caplog.records] == [f"{path}: {line}; launch will refuse it"]
    assert check_spec(spec) == [line]  # what launch_study checks first
    with pytest.raises(StudyError) as info:
        data_source(spec)
    assert info.value.problems == [line]
    # (650 bytes, the least text whose held-out 10% holds a window at context 64)
    (tmp_path / "corpus.txt").write_text("some text " * 65)
    here = replace(spec, sweep=replace(spec.sweep, data="corpus.txt"))
    assert check_data(here) == [] and check_spec(here) == []
    assert data_source(here) == str(tmp_path / "corpus.txt")
    # the CLI: exit 0, the cells, and one line saying what launch will do
    r = _run_cli(["validate", str(path)], tmp_path)
    assert r.returncode == 0 and ": ok" in r.stdout, r.stderr
    (warning,) = r.stderr.strip().splitlines()
    assert line in warning and "launch will refuse it" in warning


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # not a table: which kind was meant is not known
            'sampler = "grid"\n' + _replace("trials_per_cell = 4\n", ""),
            "sampler: expected a table, got string",
        ),
        (  # the kind's key misspelt
            _replace("trials_per_cell = 4\n", "") + '\n[sampler]\nknd = "grid"\n',
            "sampler.knd: unknown key (did you mean 'kind'?",
        ),
        (  # nor what a law sampler's keys would need
            _replace("trials_per_cell = 4\n", "")
            + '\n[sampler]\nkind = "lwa"\nbudget_runs = 40\n\n[target]\nparams = 1e9\n',
            "sampler.kind: unknown value 'lwa'",
        ),
        (
            _replace("trials_per_cell = 4\n", "")
            + '\n[samplr]\nkind = "law"\nbudget_runs = 40\n\n[target]\nparams = 1e9\n',
            "samplr: unknown key (did you mean 'sampler'?",
        ),
        ("[sampler]\nkind = 3\n", "sampler.kind: expected a string, got integer 3"),
        (
            BASE + '\n[pruner]\nkind = "ashaa"\ngrace_fraction = 0.5\n',
            "pruner.kind: unknown value 'ashaa'",
        ),
    ],
    ids=[
        "not-a-table",
        "kind-key-misspelt",
        "kind-misspelt",
        "section-misspelt",
        "kind-type",
        "pruner-kind",
    ],
)
def test_an_unknown_kind_adds_no_lines_that_depend_on_it(
    tmp_path: Path, text: str, expected: str
) -> None:
    """An unknown sampler (misspelt section, key or kind) or pruner kind is one line: nothing
    that its kind would require or forbid (trials_per_cell, budget_runs, [target], asha's keys)."""
    if text.startswith("[sampler]"):
        text = _replace("trials_per_cell = 4\n", "") + "\n" + text
    problems = _problems(tmp_path, text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems


def test_a_known_sampler_still_needs_its_keys(tmp_path: Path) -> None:
    """What an unknown kind leaves out is still said when the kind is known: an unrelated unknown
    section, or an unknown number in [sampler], hides no missing trials_per_cell."""
    no_trials = _replace("trials_per_cell = 4\n", "")
    for extra, first in (
        ("\n[notes]\ntext = 1\n", "notes: unknown key"),
        ("\n[sampler]\nsed = 1\n", "sampler.sed: unknown key (did you mean 'seed'?"),
    ):
        problems = _problems(tmp_path, no_trials + extra)
        assert len(problems) == 2 and problems[0].startswith(first), problems
        assert problems[1].startswith("sweep.trials_per_cell: missing"), problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "trials_per_cell = 4\n" + _replace("trials_per_cell = 4\n", ""),
            "trials_per_cell: unknown key at the top level: move it to [sweep]",
        ),
        (
            _with("model", 'kind = "grid"'),
            "model.kind: unknown key in [model]: move it to [sampler] or [pruner]",
        ),
        (
            _with("search", "beta1 = 0.95"),
            "search.beta1: unknown key in [search]: move it to [train]",
        ),
        (_with("model", 'nrom = "rmsnorm"'), "model.nrom: unknown key (did you mean 'norm'?"),
    ],
    ids=["top-level", "two-homes", "search-to-train", "misspelt"],
)
def test_an_unknown_key_names_where_it_belongs(tmp_path: Path, text: str, expected: str) -> None:
    """A key of another section is told where to go (and is not also 'missing' there); a
    misspelt one, what it probably is."""
    (problem,) = _problems(tmp_path, text)
    assert problem.startswith(expected), problem


def test_one_lr_at_one_batch_is_refused_unless_it_extends_a_grid(tmp_path: Path) -> None:
    """A single LR at a single batch size leaves TPE (random, GP) one point to choose from and
    finds no LR optimum. A one-LR grid is one more LR for another sweep's grid
    (studies/*_ext.toml, joined with '+'); an LR fixed while the batch is searched is a batch
    sweep. Stored studies read back are not held to it."""
    fixed = _replace("lr = { low = 1e-3, high = 5e-2, log = true }", "lr = 3e-3")
    grid = fixed.replace("trials_per_cell = 4\n", "") + '\n[sampler]\nkind = "grid"\n'
    (tpe_line,) = _problems(tmp_path, fixed)
    assert tpe_line.startswith("search.lr: one LR (0.003) at one batch size leaves sampler 'tpe'")
    batches = fixed.replace("batch_size = 8", "batch_size = { values = [4, 8] }")
    for ok in (grid, grid.replace("lr = 3e-3", "lr = { values = [3e-3] }"), batches):
        path = tmp_path / "ok.toml"
        path.write_text(ok)
        load_study(path)
    stored = parse_study_toml(study_toml(parse_study_toml(grid)))
    assert check_spec(stored) == []
    (line,) = check_spec(replace(stored, sampler=SamplerSpec(kind="random")))
    assert line.startswith("search.lr: one LR (0.003)")
    # a stored study is read back under the rules of its day
    assert parse_study_toml(study_toml(replace(stored, sampler=SamplerSpec(kind="random"))))


def test_one_lr_is_said_once_by_the_law_sampler(tmp_path: Path) -> None:
    text = (
        _replace("trials_per_cell = 4\n", "").replace(
            "lr = { low = 1e-3, high = 5e-2, log = true }", "lr = 3e-3"
        )
        + '\n[sampler]\nkind = "law"\nbudget_runs = 12\n'
    )
    (problem,) = _problems(tmp_path, text)
    assert problem.startswith("search.lr: the law sampler plans the LR")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            _replace("tokens = [32768]", "tokens = [511, 512, 32768]"),
            "ladder.tokens: 511 is less than one step at batch 8 (8 × 64 = 512 tokens): give at "
            "least 512 tokens",
        ),
        (  # the largest batch of a searched range
            _replace("batch_size = 8", "batch_size = { low = 2, high = 64 }").replace(
                "tokens = [32768]", "tokens = [2048, 4096]"
            ),
            "ladder.tokens: 2048 is less than one step at batch 64 (64 × 64 = 4096 tokens)",
        ),
        (
            _replace(
                "widths = [16, 32]\ndepths = [2]\ntokens = [32768]",
                "[[ladder.cells]]\nwidth = 16\ndepth = 2\ntokens = 256",
            ),
            "ladder.cells[0].tokens: 256 is less than one step at batch 8",
        ),
        (  # w16-d2 has N = 6,224: 311 tokens; w32-d2 (24,736) gets 1,237, enough
            _replace("tokens = [32768]", "tokens_per_param = [0.05]"),
            "ladder.tokens_per_param: 0.05 gives cell w16-d2 311 tokens, which is less than one "
            "step at batch 8 (8 × 64 = 512 tokens): give at least 0.0823 tokens per parameter",
        ),
    ],
    ids=["tokens", "batch-range", "cells", "tokens-per-param"],
)
def test_a_budget_below_one_step_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    """A run trains at least one step of batch × context tokens: a smaller budget would train
    more than the cell's D says. Exactly one step is enough; a stored study is not held to it."""
    (problem,) = _problems(tmp_path, text)
    assert problem.startswith(expected), problem
    assert parse_study_toml(text).name == "base"


def test_the_byte_vocab_rule_holds_files_about_to_run_not_stored_studies_or_own_loops(
    tmp_path: Path,
) -> None:
    """The rule had been a field check, which a stored study read back is held to: a sweep
    stored with vocab 64 could no longer be read by status, fit or report; and a study's own
    training function, which may load its own data, was refused (a review)."""
    small = _with("model", "vocab_size = 64")
    assert parse_study_toml(small, source="sweep:old").model.vocab_size == 64  # (read back)
    own = _with("train", 'function = "json:dumps"', small)
    assert not [p for p in check_run(parse_study_toml(own)) if "vocab_size" in p]
    assert [p for p in check_run(parse_study_toml(small)) if "vocab_size" in p]

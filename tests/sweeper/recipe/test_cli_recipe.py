"""`sweeper recommend | export | check` through the real `sweeper` command (`sweeper.cli.main`)."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import sweeper.cli as cli
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw
from sweeper.fitting.store import put_law
from sweeper.recipe.recipe import recipe_from_dict

DS7B = [
    "--width", "4096", "--depth", "30", "--heads", "32", "--vocab", "102400",
    "--context", "4096", "--tokens", "2T",
]  # fmt: skip


def _law(target: str, a: float, exps: dict[str, float], **kw) -> PowerLaw:
    return PowerLaw(
        conventions=Conventions(parametrization="sp"),
        target=target,
        predictors=tuple(exps),
        source="s1",
        method="test",
        domain={k: (1e6, 1e8) for k in exps},
        log_prefactor=math.log(a),
        exponents=exps,
        **kw,
    )


@pytest.fixture
def storage(tmp_path: Path) -> tuple[str, list[int]]:
    url = f"sqlite:///{tmp_path / 'laws.db'}"
    ids = [
        put_law(_law("lr", 1.0, {"n_params": -0.3}), url).id,  # superseded below
        put_law(_law("lr", 2.0, {"n_params": -0.3}), url).id,
        put_law(_law("batch_tokens", 0.5, {"tokens": 0.5}), url).id,
    ]
    return url, ids


def test_recommend_json_deepseek_7b(run) -> None:
    code, out, _ = run("recommend", "--law", "deepseek", *DS7B, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["lr"]["value"] == pytest.approx(4.2e-4, rel=0.05)
    assert d["global_batch_sequences"] == pytest.approx(2304, rel=0.10)
    for key in ("batch_tokens", "micro_batch_size", "grad_accum_steps", "min_lr", "warmup_steps"):
        assert key in d
    for key in ("total_steps", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay"):
        assert key in d
    for key in ("grad_clip", "init_std", "memory_gb_per_gpu", "extrapolation_factor"):
        assert key in d
    assert d["law_ids"] == ["deepseek:lr", "deepseek:batch_tokens"]
    assert any("very far extrapolation" in w for w in d["warnings"])


def test_recommend_table(run) -> None:
    code, out, _ = run(
        "recommend", "--law", "steplaw", "--params", "1B", "--tokens", "20B",
        "--gpus", "8", "--gpu-memory-gb", "80", "--peak-tflops", "989",
    )  # fmt: skip
    assert code == 0
    assert "peak LR" in out and "memory / GPU" in out and "warning" in out


def test_recommend_from_sweep_uses_latest_laws(run, storage) -> None:
    url, ids = storage
    code, out, _ = run(
        "recommend", "s1", "--storage", url, "--params", "1e8", "--tokens", "1e10", "--json"
    )
    assert code == 0
    d = json.loads(out)
    assert d["law_ids"] == [ids[1], ids[2]]
    assert d["lr"]["value"] == pytest.approx(2.0 * 1e8**-0.3)


def test_recommend_from_law_ids(run, storage) -> None:
    url, ids = storage
    code, out, _ = run(
        "recommend", "--law", str(ids[0]), "--law", str(ids[2]), "--storage", url,
        "--params", "1e8", "--tokens", "1e10", "--json",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out)["law_ids"] == [ids[0], ids[2]]


@pytest.mark.parametrize(
    "fmt", ["litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt", "json"]
)
def test_export_to_file(run, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"out.{fmt}"
    code, out, _ = run(
        "export", "--law", "deepseek", *DS7B, "--gpus", "64", "--format", fmt, "-o", str(path)
    )
    assert code == 0 and out == ""
    text = path.read_text()
    if fmt == "litgpt":
        assert yaml.safe_load(text)["train"]["global_batch_size"] > 2000
    elif fmt in ("hf", "deepspeed", "json"):
        json.loads(text)
    else:
        assert text.startswith("# Sweeper recipe")


def test_export_from_saved_recipe_json(run, tmp_path: Path) -> None:
    code, out, _ = run(
        "recommend",
        "--law",
        "steplaw",
        "--params",
        "1e9",
        "--tokens",
        "1e11",
        "--gpus",
        "4",
        "--json",
    )
    assert code == 0
    saved = tmp_path / "recipe.json"
    saved.write_text(out)
    code, out, _ = run("export", "--recipe-json", str(saved), "--format", "deepspeed")
    assert code == 0
    ds = json.loads(out)
    recipe = recipe_from_dict(json.loads(saved.read_text()))
    assert ds["train_batch_size"] == recipe.global_batch_sequences
    assert ds["optimizer"]["params"]["lr"] == recipe.lr.value
    # the laws, target and hardware are the file's: flags beside it were dropped in silence
    # (a CLI audit: --params 5e9 exported the file's 1e9)
    code, out, err = run("export", "--recipe-json", str(saved), "--format", "deepspeed",
                         "--params", "5e9", "--gpus", "8")  # fmt: skip
    assert code == 2 and not out
    assert "--params, --gpus: a --recipe-json recipe names its own laws, target and hardware" in err


def test_check_recipe_and_lists(run) -> None:
    code, out, _ = run("check", "--law", "deepseek", "--recipe", "deepseek-7b", "--json")
    assert code == 0
    d = json.loads(out)
    ratios = {i["quantity"]: i["ratio"] for i in d["items"]}
    assert ratios["lr"] == pytest.approx(1.0, abs=0.05)
    assert ratios["batch_tokens"] == pytest.approx(1.0, abs=0.10)
    code, out, _ = run("check", "--list-recipes")
    assert code == 0 and "gpt3-125m" in out and "pythia-410m" in out
    code, out, _ = run("check", "--law", "steplaw", "--all-recipes")
    assert code == 0 and "llama2-7b" in out and "deepseek-67b" in out
    code, out, _ = run("check", "--law", "steplaw", "--all-recipes", "--json")
    assert code == 0 and len(json.loads(out)) == 27
    # a recipe's own warning is printed under every recipe that has it (one seen under an
    # earlier recipe had been dropped for the later ones: a check audit)
    every = json.loads(out)
    code, text, _ = run("check", "--law", "steplaw", "--all-recipes")
    for r in every:
        for w in r["warnings"]:
            if not all(w in o["warnings"] for o in every):
                assert f"warning ({r['name']}): {w[:40]}" in " ".join(text.split())
    # a shape or vocab describes a recipe given as numbers: with a published one it was ignored
    code, _, err = run("check", "--law", "porian", "--recipe", "llama2-7b", "--vocab", "256000")
    assert code == 2 and "--vocab describes a recipe given as numbers" in err


def test_check_given_values(run) -> None:
    code, out, _ = run(
        "check", "--law", "deepseek", "--params", "6.04e9", "--tokens", "2T", "--lr", "4.2e-4",
        "--batch-tokens", "9.4M", "--width", "4096", "--depth", "30", "--context", "4096", "--json",
    )  # fmt: skip
    assert code == 0
    items = {i["quantity"]: i for i in json.loads(out)["items"]}
    assert items["lr"]["ratio"] == pytest.approx(1.0, abs=0.05)
    # a published recipe and values of one's own: the message says which to drop (it said
    # "give one of --recipe NAME, ..." to a command that gave --recipe: a robustness audit)
    code, _, err = run("check", "--law", "deepseek", "--recipe", "llama2-7b", "--lr", "1")
    assert code == 2 and "checks a published recipe as it is: drop --params" in err, err
    code, _, err = run("check", "--law", "deepseek", "--recipe", "llama2-7b", "--all-recipes")
    assert code == 2 and "not both" in err, err


BAD = [
    ("zero params", ["recommend", "--law", "deepseek", "--params", "0", "--tokens", "1e9"]),
    ("negative params", ["recommend", "--law", "deepseek", "--params=-1e9", "--tokens", "1e9"]),
    ("negative tokens", ["recommend", "--law", "steplaw", "--params", "1e9", "--tokens=-5"]),
    (
        "tokens below one step",
        ["recommend", "--law", "steplaw", "--params", "1e9", "--tokens", "100"],
    ),
    (
        "micro batch not dividing the batch",
        [
            "recommend",
            "--law",
            "steplaw",
            "--params",
            "1e9",
            "--tokens",
            "1e11",
            "--micro-batch",
            "3",
            "--global-batch",
            "1000",
        ],
    ),
    (
        "unknown format",
        ["export", "--law", "steplaw", "--params", "1e9", "--tokens", "1e11", "--format", "keras"],
    ),
    ("unknown recipe", ["check", "--law", "deepseek", "--recipe", "gpt5"]),
    ("unknown law", ["recommend", "--law", "chinchilla", "--params", "1e9", "--tokens", "1e10"]),
    ("no law", ["recommend", "--params", "1e9", "--tokens", "1e10"]),
    ("no budget", ["recommend", "--law", "deepseek", "--params", "1e9"]),
    (
        "two budgets",
        [
            "recommend",
            "--law",
            "deepseek",
            "--params",
            "1e9",
            "--tokens",
            "1e10",
            "--compute",
            "1e20",
        ],
    ),
    ("bad number", ["recommend", "--law", "deepseek", "--params", "7X", "--tokens", "1e10"]),
    (
        "bad precision",
        [
            "recommend",
            "--law",
            "steplaw",
            "--params",
            "1e9",
            "--tokens",
            "1e11",
            "--precision",
            "fp8",
        ],
    ),
    (
        "mup law for sp target",
        [
            "recommend",
            "--law",
            "steplaw",
            "--params",
            "1e9",
            "--tokens",
            "1e11",
            "--parametrization",
            "mup",
            "--base-width",
            "256",
        ],
    ),
    ("check mixed modes", ["check", "--law", "deepseek", "--recipe", "gpt3-125m", "--all-recipes"]),
    ("check incomplete values", ["check", "--law", "deepseek", "--params", "1e9"]),
    ("missing recipe json", ["export", "--recipe-json", "/nonexistent/r.json", "--format", "hf"]),
    (
        "unknown framework version",
        ["export", "--law", "steplaw", "--params", "1e9", "--tokens", "1e11", "--format",
         "megatron", "--framework-version", "0.15"],
    ),
    (
        "framework version of a format without versions",
        ["export", "--law", "steplaw", "--params", "1e9", "--tokens", "1e11", "--format", "json",
         "--framework-version", "2"],
    ),
    (
        "params contradicting the shape",
        ["export", "--law", "steplaw", "--params", "1e9", "--width", "64", "--depth", "2",
         "--tokens", "2e10", "--format", "litgpt"],
    ),
    (
        "output in a missing directory",
        ["export", "--law", "steplaw", "--params", "1e9", "--tokens", "1e11", "--format", "hf",
         "-o", "/nonexistent-dir/cfg.json"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("what", "argv"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_exit_2(run, what: str, argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert code == 2, (what, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sweeper: error:"), err


def test_no_laws_stored_for_sweep(run, tmp_path: Path) -> None:
    """A sweep that exists without laws: "no laws stored" (run `sweeper fit`)."""
    import pandas as pd

    from sweeper.study.importer import import_runs

    url = f"sqlite:///{tmp_path / 'one.db'}"
    runs = pd.DataFrame(
        {"n_params": [1e6] * 2, "tokens": [1e8] * 2, "lr": [1e-3, 2e-3], "batch_size": [32] * 2,
         "loss": [3.1, 3.0]}
    )  # fmt: skip
    runs.to_csv(tmp_path / "runs.csv", index=False)
    import_runs(tmp_path / "runs.csv", sweep="unfitted", url=url)
    code, _, err = run(
        "recommend", "unfitted", "--storage", url, "--params", "1e9", "--tokens", "1e10"
    )
    assert code == 2 and "no laws stored for sweep 'unfitted'" in err
    assert len(err.strip().splitlines()) == 1
    # `laws` names the published laws too, stored ones or none (a laws audit)
    code, out, _ = run("laws", "--storage", url)
    assert code == 0 and "no laws stored" in out
    assert "published laws: deepseek, steplaw, kaplan, porian (`sweeper laws show NAME`" in out
    # a sweep that does not exist is said not to exist, with the known ones (every verb's message)
    for verb in (
        ["recommend", "--params", "1e9", "--tokens", "1e10"],
        ["export", "--params", "1e9", "--tokens", "1e10", "--format", "json"],
        ["check", "--recipe", "gpt3-125m"],
    ):
        code, out, err = run(verb[0], "nope", "--storage", url, *verb[1:])
        assert code == 2 and out == "", verb
        assert err.strip().splitlines() == [
            f"sweeper: error: no sweep 'nope' in {url}; known sweeps: unfitted"
        ], verb


def test_laws_stored_without_a_sweep_row_are_used(run, storage) -> None:
    """Laws stored under a name with no sweep row (put_law) still serve that name."""
    url, _ids = storage
    code, _, _ = run("recommend", "s1", "--storage", url, "--params", "1e8", "--tokens", "1e10")
    assert code == 0
    code, _, err = run("recommend", "s2", "--storage", url, "--params", "1e8", "--tokens", "1e10")
    assert code == 2 and "no sweep 's2'" in err and "holds no sweeps" in err


def test_verbs_do_not_import_heavy_modules() -> None:
    code = (
        "import sys\n"
        "import sweeper.cli as cli\n"
        "rc = cli.main(['recommend', '--law', 'deepseek', '--params', '7e9', '--tokens', '2e12', '--json'])\n"
        "heavy = [m for m in ('torch', 'ray', 'optuna', 'pandas', 'scipy', 'matplotlib') if m in sys.modules]\n"
        "print('HEAVY', heavy, rc, file=sys.stderr)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY [] 0" in res.stderr, res.stderr


def test_full_cli_has_recipe_verbs() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["check", "--list-recipes"])
    assert args.func.__module__ == "sweeper.cli.recipe"
    assert cli.main(["check", "--list-recipes", "--json"]) == 0


def test_bytes_per_token_converts_byte_laws(run, tmp_path: Path) -> None:
    """A law fitted on byte-level data (the default conventions) with D as a predictor: without
    --bytes-per-token the target's D is used as bytes, with a warning; with it, D is scaled."""
    url = f"sqlite:///{tmp_path / 'bytes.db'}"
    lid = put_law(_law("lr", 0.1, {"n_params": -0.3, "tokens": 0.25}), url, sweep="b1").id
    argv = ["recommend", "--law", str(lid), "--storage", url, "--params", "1e8", "--tokens", "4e9"]
    code, out, _ = run(*argv, "--vocab", "32000", "--json")
    assert code == 0
    plain = json.loads(out)
    assert any("in bytes" in w and "bytes_per_token" in w for w in plain["warnings"])
    code, out, _ = run(*argv, "--vocab", "32000", "--bytes-per-token", "4", "--json")
    assert code == 0
    conv = json.loads(out)
    assert conv["lr"]["value"] == pytest.approx(plain["lr"]["value"] * 4**0.25)
    assert conv["bytes_per_token"] == 4.0
    code, out, err = run(*argv, "--bytes-per-token", "0")
    assert code == 2 and "not a positive number" in err
    # check converts the same way
    chk = ["check", "--law", str(lid), "--storage", url, "--params", "1e8", "--tokens", "4e9"]
    chk += ["--lr", "1e-3", "--batch-tokens", "1M", "--vocab", "32000", "--json"]
    code, out, _ = run(*chk)
    assert code == 0
    p = json.loads(out)
    code, out, _ = run(*chk, "--bytes-per-token", "4")
    c = json.loads(out)
    assert c["items"][0]["predicted"] == pytest.approx(p["items"][0]["predicted"] * 4**0.25)
    assert any("in bytes" in w for w in p["warnings"])
    assert not any("used as if they were bytes" in w for w in c["warnings"])


@pytest.mark.parametrize(
    ("what", "edit", "message"),
    [
        ("inconsistent min LR", lambda d: d["lr"].update(value=d["lr"]["value"] * 2),
         "min_lr .* disagrees with lr"),
        ("unknown key", lambda d: d.update(not_a_recipe_key=1), "unknown key not_a_recipe_key"),
        ("newer schema", lambda d: d.update(schema_version=99), "schema_version 99 is newer"),
    ],
)  # fmt: skip
def test_bad_recipe_json_is_one_line_exit_2_nothing_written(
    run, tmp_path: Path, what: str, edit, message: str
) -> None:
    code, out, _ = run("recommend", "--law", "deepseek", *DS7B, "--gpus", "64", "--json")
    assert code == 0
    d = json.loads(out)
    edit(d)
    saved = tmp_path / "recipe.json"
    saved.write_text(json.dumps(d))
    for fmt in ("megatron", "hf", "json"):
        target = tmp_path / f"out.{fmt}"
        code, out, err = run("export", "--recipe-json", str(saved), "--format", fmt, "-o",
                             str(target))  # fmt: skip
        assert code == 2 and out == "" and not target.exists(), (what, fmt, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("sweeper: error: "), err
        assert re.search(message, lines[0]), lines[0]


def test_edited_recipe_json_without_min_lr_moves_the_min_lr(run, tmp_path: Path) -> None:
    code, out, _ = run("recommend", "--law", "deepseek", *DS7B, "--gpus", "64", "--json")
    d = json.loads(out)
    d["lr"]["value"] *= 2
    del d["min_lr"]
    saved = tmp_path / "recipe.json"
    saved.write_text(json.dumps(d))
    code, out, err = run("export", "--recipe-json", str(saved), "--format", "megatron")
    assert code == 0, err
    argv = shlex.split(out, comments=True)
    lr, lo = float(argv[argv.index("--lr") + 1]), float(argv[argv.index("--min-lr") + 1])
    assert lo == lr * d["min_lr_ratio"]


def test_export_help_names_framework_versions(run) -> None:
    code, out, _ = run("export", "--help")
    assert code == 0
    text = " ".join(out.split())
    for want in ("--framework-version", "--allow-inexpressible", "0.19 = Megatron-LM core_v0.19.0",
                 "0.16 = Megatron-LM core_v0.16.1", "0.3 = torchtitan 0.3.0 (default)",
                 "0.2 = torchtitan 0.2.2", "litgpt 0.5.13", "transformers 5.23.0",
                 "DeepSpeed 0.19.8", "karpathy/nanoGPT@3adf61e"):  # fmt: skip
        assert want in text, want


def test_export_formats_spelled_out_match() -> None:
    from sweeper.cli.recipe import EXPORT_FORMATS
    from sweeper.recipe.export import FORMATS

    assert EXPORT_FORMATS == FORMATS


@pytest.mark.parametrize(("fmt", "framework"), [("hf", "transformers 5.23.0"),
                                                ("deepspeed", "DeepSpeed 0.19.8")])  # fmt: skip
def test_json_formats_say_their_target_and_lr_on_stderr(run, fmt: str, framework: str) -> None:
    code, out, err = run("export", "--law", "deepseek", *DS7B, "--gpus", "64", "--format", fmt)
    assert code == 0 and json.loads(out)
    notes = [ln for ln in err.splitlines() if ln.startswith(f"sweeper: note: {fmt}: ")]
    assert any(f"written for {framework}" in ln for ln in notes), err
    assert any("the recipe's lr = the LR law's point estimate" in ln for ln in notes), err


def test_litgpt_warns_that_the_architecture_is_litgpts_default(run) -> None:
    code, out, err = run("export", "--law", "deepseek", *DS7B, "--gpus", "64", "--format", "litgpt")
    assert code == 0
    want = "sweeper: warning: litgpt: model_config sets n_layer/n_embd/n_head/vocab_size/block_size"
    assert want in err and "mlp_class_name GptNeoxMLP" in err and "LayerNorm" in err
    assert "# CAUTION: model_config sets" in out


def test_cli_names_its_own_flag_for_an_unknown_version(run) -> None:
    """The library says "framework version"; the CLI, which checks the version first, names its
    flag in the same message."""
    code, out, err = run("export", "--law", "steplaw", "--params", "1e9", "--tokens", "1e11",
                         "--format", "megatron", "--framework-version", "9.9")  # fmt: skip
    assert code == 2 and out == ""
    assert err.strip() == (
        "sweeper: error: unknown --framework-version '9.9' for megatron; known: 0.16, 0.17, 0.18, "
        "0.19 (default 0.19)"
    )


def test_other_release_of_a_series_is_said_on_stderr(run) -> None:
    """--framework-version 0.19.1 (megatron 0.19 checked at core_v0.19.0) and 5.0 (hf 5 checked
    at 5.23.0): written for the checked release, and a warning says so; the checked one: none."""
    base = ["export", "--law", "steplaw", "--params", "1e9", "--tokens", "1e11", "--format"]
    code, out, err = run(*base, "megatron", "--framework-version", "0.19.1")
    assert code == 0 and "# CAUTION: framework version 0.19.1 is not a release" in out
    assert "sweeper: warning: megatron: framework version 0.19.1 is not a release" in err
    assert "written for Megatron-LM core_v0.19.0" in err
    code, out, err = run(*base, "hf", "--framework-version", "5.0")
    assert code == 0 and "sweeper: warning: hf: framework version 5.0 is not a release" in err
    assert "written for transformers 5.23.0" in err
    for fmt, v in (("megatron", "core_v0.19.0"), ("megatron", "0.19"), ("hf", "5.23.0")):
        code, out, err = run(*base, fmt, "--framework-version", v)
        assert code == 0 and "is not a release" not in out + err, (fmt, v)


def test_recommend_table_says_no_interval_for_a_published_law(run) -> None:
    code, out, _ = run("recommend", "--law", "steplaw", "--params", "1e9", "--tokens", "2e10")
    assert code == 0
    batch = next(line for line in out.splitlines() if "batch (tokens)" in line)
    assert "no interval: the law carries no uncertainty" in batch
    lr = next(line for line in out.splitlines() if "peak LR" in line)
    assert "no interval" in lr and "[" not in lr


def test_batch_warning_says_what_can_shrink(run) -> None:
    """One GPU and micro batch 1 cannot shrink: the advice is a shorter sequence, or the larger
    batch; with several GPUs and micro batches, those."""
    argv = ["recommend", "--law", "steplaw", "--params", "1e4", "--tokens", "1e5", "--json"]
    code, out, _ = run(*argv)
    assert code == 0
    (w,) = [w for w in json.loads(out)["warnings"] if w.startswith("micro batch 1 × 1 GPUs")]
    assert "fewer data-parallel GPUs" not in w and "smaller micro batch" not in w
    assert "use a sequence length of at most 415 tokens (now 2048), or accept the larger" in w
    code, out, _ = run(*argv, "--gpus", "4", "--micro-batch", "2")
    (w,) = [w for w in json.loads(out)["warnings"] if w.startswith("micro batch 2 × 4 GPUs")]
    assert "use fewer data-parallel GPUs or a smaller micro batch, or a sequence length" in w


def test_recommend_help_names_every_published_law(run) -> None:
    """--help listed deepseek|steplaw|kaplan while the no-laws error offered porian too."""
    from sweeper.recipe.published import PUBLISHED_NAMES

    code, out, _ = run("recommend", "--help")
    assert code == 0
    assert "|".join(PUBLISHED_NAMES) in "".join(out.split())


def test_a_negative_number_reaches_its_options_check(run) -> None:
    """``--params -1e9`` was taken by argparse for an option ("expected one argument")."""
    from sweeper.cli import _joined_negatives

    code, _, err = run("recommend", "--law", "deepseek", "--params", "-1e9", "--tokens", "2e10")
    assert code == 2 and "n_params must be positive" in err, err
    assert _joined_negatives(["--lr", "-.5", "--tokens", "-2e10", "-v", "-7B"]) == [
        "--lr=-.5", "--tokens=-2e10", "-v", "-7B",
    ]  # fmt: skip


def test_a_sweep_named_as_a_published_law_set_is_the_sweep(
    run, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`sweeper import ... --sweep steplaw` (the import help's own example) then `check steplaw`
    silently checked against the published Step Law. The sweep wins, with a warning; --law
    steplaw is the published one; where no such sweep is stored the name is the published law."""
    url = f"sqlite:///{tmp_path / 'named.db'}"
    from dataclasses import replace

    stored = put_law(replace(_law("lr", 2.0, {"n_params": -0.3}), source="steplaw"), url).id
    code, out, _ = run("check", "steplaw", "--storage", url, "--recipe", "gpt3-125m", "--json")
    assert code == 0 and json.loads(out)["law_ids"] == [stored]
    assert "'steplaw' is a sweep in this storage" in caplog.text and "--law steplaw" in caplog.text
    caplog.clear()
    code, out, _ = run("check", "--law", "steplaw", "--storage", url, "--recipe", "gpt3-125m")
    assert code == 0 and "Recipes against the published steplaw laws" in out
    empty = f"sqlite:///{tmp_path / 'none.db'}"
    code, out, _ = run("check", "steplaw", "--storage", empty, "--recipe", "gpt3-125m", "--json")
    assert code == 0 and json.loads(out)["law_ids"] == ["steplaw:lr", "steplaw:batch_tokens"]
    assert "is a sweep" not in caplog.text


def test_check_refuses_an_n_that_contradicts_the_shape_given(run) -> None:
    """As recommend and compare do: 7e9 parameters cannot be 2 layers of width 1024."""
    code, out, err = run(
        "check", "--law", "deepseek", "--params", "7B", "--tokens", "2T", "--lr", "3e-4",
        "--batch-tokens", "4M", "--width", "1024", "--depth", "2",
    )  # fmt: skip
    assert code == 2 and out == "" and "and the shape 2 layers × d_model" in err and "apart" in err


def test_laws_show_prints_a_published_law_set_and_says_its_usage(run) -> None:
    code, out, _ = run("laws", "show", "Step-Law")
    assert code == 0 and "lr law of published steplaw" in out and "none carried (point law)" in out
    assert "cells (points)" not in out  # a published law has no cells of Sweeper's
    code, out, err = run("laws", "show")
    assert code == 2 and "usage: sweeper laws show ID|NAME" in err
    code, _, err = run("laws", "show", "llama")
    assert code == 2 and "deepseek|steplaw|kaplan|porian" in err


def test_every_verb_reads_numbers_with_suffixes() -> None:
    """compare and diff read --params 7B as check and recommend do (they said 'invalid float')."""
    import argparse

    from sweeper.cli.numbers import count, number

    assert number("7B") == 7e9 and number("2.5T") == 2.5e12 and number("1_000") == 1000.0
    assert count("819.2k") == 819200 and count("8.2M") == 8_200_000  # (8.2 * 1e6 is inexact)
    with pytest.raises(argparse.ArgumentTypeError):
        count("1.5")
    parser = cli.build_parser()
    for verb in (["compare", "s"], ["diff", "a", "b"]):
        args = parser.parse_args([*verb, "--params", "7B", "--tokens", "2T"])
        assert (args.params, args.tokens) == (7e9, 2e12), verb


def test_check_says_in_octaves_where_each_recipe_sits(run) -> None:
    """The table gave ratios under two columns each named 'ratio' and 'in', and no conclusion."""
    code, out, _ = run("check", "--law", "deepseek", "--recipe", "deepseek-7b")
    assert code == 0 and "LR off" in out and "batch off" in out and "oct" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("deepseek-7b: "))
    assert "its LR is" in line and "(the law gives no interval)" in line and "its batch is" in line


def test_check_shows_the_recipes_values_where_the_law_predicts_nothing(run) -> None:
    """Kaplan's law (linear in log N) predicts no positive LR at 175B: the table had hidden the
    recipe's own LR too ('-'), and the JSON had no value of the recipe at all."""
    code, out, _ = run("check", "--law", "kaplan", "--recipe", "gpt3-175b")
    assert code == 0 and "6e-05" in out and "nothing checked" in out
    code, out, _ = run("check", "--law", "kaplan", "--recipe", "gpt3-175b", "--json")
    doc = json.loads(out)
    assert doc["items"] == [] and doc["lr"] == 6e-5 and doc["batch_tokens"] == 3.2e6
    # near or past the zero of Kaplan's formula the check says so, not "predicts 0" (the formula
    # is negative there) or "3.65 octaves above" with no word (a check audit)
    assert any("reaches 0 at N = 1.2e+10" in w for w in doc["warnings"])
    code, out, _ = run("check", "--law", "kaplan", "--recipe", "pythia-12b", "--json")
    assert any("its form rather than its data" in w for w in json.loads(out)["warnings"])
    code, out, _ = run("check", "--law", "kaplan", "--recipe", "gpt3-1.3b", "--json")
    assert not any("reaches 0" in w for w in json.loads(out)["warnings"])


def test_tables_off_a_terminal_are_wide_enough_not_to_cut_a_formula(run) -> None:
    """Piped, `laws` and `compare` cut formulas at 140 columns ("D^0.146[0.027…"), and the CLI
    had two consoles of two widths; one console now, 200 columns off a terminal."""
    from sweeper.cli.output import OFF_TERMINAL_WIDTH, console

    assert console().width >= OFF_TERMINAL_WIDTH == 200
    code, out, _ = run("laws", "show", "steplaw")
    assert code == 0 and "…" not in out


def test_check_takes_a_given_recipes_parametrization(run, tmp_path: Path) -> None:
    """A muP law could not be checked against numbers given on the command line: the recipe was
    SP, and only --force went on (an import audit)."""
    from dataclasses import replace

    url = f"sqlite:///{tmp_path / 'mup.db'}"
    law = _law("lr", 0.01, {"n_params": -0.05})
    put_law(replace(law, conventions=Conventions(parametrization="mup", base_width=64)), url)
    given = ["--params", "1e7", "--tokens", "2e8", "--lr", "1e-3", "--batch-tokens", "1e5"]
    code, _, err = run("check", "s1", *given, "--storage", url)
    assert code == 2 and "--parametrization mup" in err
    code, _, err = run("check", "s1", *given, "--parametrization", "mup", "--storage", url)
    assert code == 0, err
    code, _, err = run("check", "s1", *given, "--parametrization", "nup", "--storage", url)
    assert code == 2 and "'nup' is not one of" in err


def test_one_law_of_a_published_set_pairs_with_another_sets(run) -> None:
    """A laws audit: `--law 2 --law steplaw` was "two lr laws given" with no way to pair a law
    of one's own sweeps with a published batch law; NAME:lr and NAME:batch take one of them."""
    at = ("--params", "7e9", "--tokens", "2e12", "--json")
    code, out, err = run("recommend", "--law", "steplaw:lr", "--law", "deepseek:batch", *at)
    assert code == 0, err
    assert json.loads(out)["law_ids"] == ["steplaw:lr", "deepseek:batch_tokens"]
    code, _, err = run("recommend", "--law", "steplaw", "--law", "deepseek", *at)
    assert code == 2 and "two lr laws given" in err and "--law deepseek:batch" in err
    code, _, err = run("recommend", "--law", "kaplan:batch", *at)
    assert code == 2 and "kaplan publishes no 'batch' law (it has: lr)" in err

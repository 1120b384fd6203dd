"""No silent drop: a muP recipe with a batch ramp-up, z-loss, an output multiplier and ZeRO-1 on 64
GPUs, exported to every format and framework version through the `sweeper` command, warns on
stderr once per setting the format cannot carry (and lists it in the header where the format has
comments). The expectations are this file's own table (docs/EXPORTS.md, "What each format cannot
carry"), not the exporter's."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw
from sweeper.fitting.store import put_law

#: the words that name each setting in a warning
WORDS = {
    "rampup": "ramp-up",
    "z_loss": "z-loss",
    "parametrization": "mup",
    "init_std": "init std",
    "output_mult": "output (logit) multiplier",
    "seq_len": "sequence length",
    "model_shape": "layers",
    "vocab": "vocab",
    "zero_stage": "zero stage",
    "data_parallel": "data-parallel",
    "eps": "eps",
    "output_layer_lr": "output layer's lr",
    "weight_decay": "weight decay",
}
_MUP = {"rampup", "z_loss", "parametrization", "init_std", "output_mult"}
#: --use-mup: hidden eps ÷ m, hidden weight decay not × m; the output layer keeps the base LR and
#: eps (language_module.py marks it is_embedding_parameter), as the proxies' lm_head
_MEGATRON_MUP = {"z_loss", "vocab", "eps", "weight_decay"}
#: (format, version) -> settings that must NOT be warned about (the format carries them)
NOT_WARNED: dict[tuple[str, str | None], set[str]] = {
    ("megatron", v): {"output_layer_lr"} for v in ("0.17", "0.18", "0.19", None)
}
#: (format, framework version) -> what it cannot carry of this recipe
EXPECTED: dict[tuple[str, str | None], set[str]] = {
    ("litgpt", None): _MUP | {"zero_stage", "weight_decay"},
    ("hf", None): _MUP | {"seq_len", "model_shape", "vocab", "zero_stage", "data_parallel"},
    ("deepspeed", None): _MUP | {"seq_len", "model_shape", "vocab"},
    ("megatron", "0.16"): {"parametrization", "output_mult", "z_loss", "vocab"},
    ("megatron", "0.17"): _MEGATRON_MUP,
    ("megatron", "0.18"): _MEGATRON_MUP,
    ("megatron", "0.19"): _MEGATRON_MUP,
    ("megatron", None): _MEGATRON_MUP,
    ("torchtitan", "0.2"): _MUP | {"model_shape", "vocab", "zero_stage", "weight_decay"},
    ("torchtitan", "0.3"): _MUP | {"model_shape", "vocab", "zero_stage", "weight_decay"},
    ("nanogpt", None): _MUP | {"vocab", "zero_stage", "data_parallel"},
    ("json", None): set(),
}
COMMENTED = ("litgpt", "megatron", "torchtitan", "nanogpt")


@pytest.fixture(scope="module")
def law_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, int]:
    """(storage, id of a muP lr law with output_mult 4, id of an lr law with no parametrization)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('laws') / 'laws.db'}"

    def law(conv: Conventions) -> PowerLaw:
        return PowerLaw(
            conventions=conv, target="lr", predictors=("tokens",), source="s", method="test",
            domain={"tokens": (1e8, 1e10)}, log_prefactor=math.log(0.5),
            exponents={"tokens": -0.1},
        )  # fmt: skip

    mup = put_law(law(Conventions(parametrization="mup", base_width=256, output_mult=4.0)), url)
    unknown = put_law(law(Conventions(parametrization=None)), url)
    return url, int(mup.id), int(unknown.id)  # type: ignore[arg-type]


def _args(law_db: tuple[str, int, int], law: int = 1) -> list[str]:
    url = law_db[0]
    return [
        "export", "--law", str(law_db[law]), "--storage", url, "--width", "2048", "--depth", "16",
        "--heads", "16", "--tokens", "1e11", "--gpus", "64", "--micro-batch", "1",
        "--parametrization", "mup", "--zero-stage", "1", "--rampup",
    ]  # fmt: skip


@pytest.mark.parametrize(("fmt", "version"), list(EXPECTED), ids=[f"{f}@{v}" for f, v in EXPECTED])
def test_every_setting_not_carried_is_one_warning(
    run, law_db, tmp_path: Path, fmt: str, version: str | None
) -> None:
    out = tmp_path / "cfg"
    argv = [*_args(law_db), "--format", fmt, "--allow-inexpressible", "-o", str(out)]
    if version:
        argv += ["--framework-version", version]
    code, _, err = run(*argv)
    assert code == 0, err
    prefix = f"sweeper: warning: {fmt} cannot express: "
    lines = [ln[len(prefix) :].lower() for ln in err.splitlines() if ln.startswith(prefix)]
    said = {s for s, w in WORDS.items() for ln in lines if w in ln}
    missing = EXPECTED[(fmt, version)] - said
    assert not missing, f"{fmt}@{version}: no warning for {sorted(missing)}:\n" + "\n".join(lines)
    wrong = said & NOT_WARNED.get((fmt, version), set())
    assert not wrong, f"{fmt}@{version}: warns about {sorted(wrong)}, which it carries"
    # one warning per setting: no line names two of the expected settings' primary words
    assert len(lines) >= len(EXPECTED[(fmt, version)]) - ("parametrization" in said)
    if fmt in COMMENTED:
        text = out.read_text().lower()
        for ln in lines:
            assert f"# not expressible here: {ln}" in text


REFUSED = [("litgpt", None), ("hf", None), ("deepspeed", None), ("megatron", "0.16"),
           ("torchtitan", "0.2"), ("torchtitan", "0.3"), ("nanogpt", None)]  # fmt: skip


@pytest.mark.parametrize(("fmt", "version"), REFUSED, ids=[f"{f}@{v}" for f, v in REFUSED])
def test_mup_refused_where_inexpressible(run, law_db, tmp_path: Path, fmt, version) -> None:
    out = tmp_path / "cfg"
    argv = [*_args(law_db), "--format", fmt, "-o", str(out)]
    if version:
        argv += ["--framework-version", version]
    code, stdout, err = run(*argv)
    assert code == 2 and stdout == "" and not out.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--allow-inexpressible" in lines[0], err
    assert lines[0].startswith(f"sweeper: error: {fmt} cannot express mup parametrization")


@pytest.mark.parametrize("fmt", ["megatron", "json"])
def test_mup_written_where_expressible(run, law_db, fmt: str) -> None:
    code, out, err = run(*_args(law_db), "--format", fmt)
    assert code == 0, err
    if fmt == "megatron":
        assert "--use-mup\n" in out and "--mup-base-hidden-size 256\n" in out


def test_mup_from_a_law_without_parametrization_needs_force(run, law_db, tmp_path: Path) -> None:
    out = tmp_path / "cfg"
    argv = [*_args(law_db, law=2), "--base-width", "256", "--format", "json", "-o", str(out)]
    code, _, err = run(*argv)
    assert code == 2 and not out.exists()
    assert err.strip() == (
        "sweeper: error: the lr law records no parametrization, the recipe is mup: a mup export "
        "from it is refused (force=True, --force: export anyway)"
    )
    code, _, err = run(*argv, "--force")
    assert code == 0 and out.exists(), err

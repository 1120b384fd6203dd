"""The framework versions each export format targets, and the facts about their config keys that
the exporters rely on, each with its source: a file of the PyPI package at a version, or a file
of the upstream repository at a commit.

This module is data and standard library only: ``sweeper export --help`` reads it without
importing the exporters. ``scripts/check_exports.sh`` loads the exports with the frameworks named
here (docs/EXPORTS.md has the table of what each load proved); the Megatron-LM flag table it
checks against (``scripts/export_checks/megatron_flags.json``) was read off the parser that
``megatron/training/arguments.py: parse_args()`` builds at each commit below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

__all__ = [
    "DEFAULT_VERSION",
    "MEGATRON",
    "TORCHTITAN_LLAMA3",
    "VERSIONS",
    "FrameworkVersion",
    "MegatronFacts",
    "TorchtitanFlavor",
    "help_text",
    "resolve_version",
]


@dataclass(frozen=True)
class FrameworkVersion:
    """One framework version an export targets: ``version`` is what ``--framework-version``
    takes (a release series, e.g. "0.19"), ``framework`` the release or commit the format was
    written and checked against, ``load`` how a user hands the file to it, ``sources`` where its
    keys were read, ``release`` the checked release's number ("0.19.0") or commit.

    ``given`` is the ``--framework-version`` that chose it when that names another release of the
    series ("0.19.1"): the export is then written for the checked release, and :attr:`caution`
    says so."""

    format: str
    version: str
    framework: str
    load: str
    sources: tuple[str, ...]
    release: str = ""
    given: str | None = None

    @property
    def caution(self) -> str | None:
        """What to say when ``--framework-version`` named another release than the checked one
        (None when it named the checked release, its series, or nothing)."""
        if self.given is None:
            return None
        return (
            f"framework version {self.given} is not a release this export was checked "
            f"against: written for {self.framework}, the checked release of the "
            f"{self.version} series, assuming {self.given} reads the same keys (check them)"
        )


@dataclass(frozen=True)
class MegatronFacts:
    """What changed between Megatron-LM versions for a recipe, read at ``commit`` (tag ``tag``).

    - ``use_mup``: ``--use-mup``, ``--mup-base-hidden-size``, ``--mup-base-head-dim`` and
      ``--mup-output-mult`` exist (added by 310082a6d2 "μP: Maximal Update Parameterization
      (#3058)", first in core_v0.17.0). ``--scaling-recipe`` exists in no release and not on main
      (d98e8a64ddf3, 2026-08-22): only on unmerged branches.
    - ``step_schedule``: ``--step-batch-size-schedule "TOKENS:BATCH,..."`` is the batch ramp-up and
      ``--rampup-batch-size`` is parsed but ignored (a rank-0 log line), and the schedule excludes
      ``--global-batch-size`` (a52112dae9 / c9e03d0c3b "Replace rampup batch size scheduler with
      custom step batch size schedules (#3779)", first in core_v0.18.0). Before:
      ``--rampup-batch-size START INCREMENT SAMPLES``, only with sample-based training.
    """

    tag: str
    commit: str
    date: str
    use_mup: bool
    step_schedule: bool


#: Megatron-LM (github.com/NVIDIA/Megatron-LM) by --framework-version; files read at each commit:
#: megatron/training/arguments.py (parse_args, validate_args), megatron/core/
#: num_microbatches_calculator.py, megatron/core/transformer/transformer_config.py,
#: megatron/core/optimizer/__init__.py, megatron/core/models/gpt/gpt_model.py
MEGATRON: Final[dict[str, MegatronFacts]] = {
    "0.16": MegatronFacts(
        "core_v0.16.1", "55ac7082517c3878ae653c07c09c534b8aed49f6", "2026-03-16", False, False
    ),
    "0.17": MegatronFacts(
        "core_v0.17.1", "266f1c97dca477ca8b92c16087506da2000b0b84", "2026-05-25", True, False
    ),
    "0.18": MegatronFacts(
        "core_v0.18.2", "571370c829ca768fe37244f4e2e7f28d8accc4ab", "2026-07-20", True, True
    ),
    "0.19": MegatronFacts(
        "core_v0.19.0", "5be9626709af2722333bf54797c954c09edeada3", "2026-08-19", True, True
    ),
}


@dataclass(frozen=True)
class TorchtitanFlavor:
    """A llama3 model torchtitan can name: ``flavor`` (0.2 ``[model] flavor``), ``config`` (0.3
    config function of ``torchtitan.models.llama3.config_registry``) and its shape."""

    flavor: str
    config: str
    layers: int
    dim: int
    heads: int
    vocab: int

    @property
    def n_params(self) -> float:
        """12·L·d², the non-embedding parameters of the flavor (to pick the nearest)."""
        return 12.0 * self.layers * self.dim**2  # (scale.block_n_params: data-only module)


#: torchtitan's llama3 models with a config function: torchtitan/models/llama3/__init__.py
#: (llama3_args) and model/args.py (vocab_size 128256) at 0.2.2; models/llama3/__init__.py (_8b,
#: _70b, _405b) and config_registry.py (llama3_8b, llama3_70b, llama3_405b) at 0.3.0. Not the
#: debug model (6 × 256, vocab 2048): its config function trains on the c4_test sample data.
TORCHTITAN_LLAMA3: Final[tuple[TorchtitanFlavor, ...]] = (
    TorchtitanFlavor("8B", "llama3_8b", 32, 4096, 32, 128256),
    TorchtitanFlavor("70B", "llama3_70b", 80, 8192, 64, 128256),
    TorchtitanFlavor("405B", "llama3_405b", 126, 16384, 128, 128256),
)

_MEGATRON_SOURCES = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py, megatron/core/num_microbatches_calculator.py",
    "megatron-core 0.16.1 (PyPI) megatron/core/optimizer_param_scheduler.py, "
    "megatron/core/optimizer/optimizer_config.py (decoupled_weight_decay True: Adam is AdamW)",
)


def _megatron(v: str) -> FrameworkVersion:
    f = MEGATRON[v]
    return FrameworkVersion(
        "megatron",
        v,
        f"Megatron-LM {f.tag} ({f.commit[:12]}, {f.date})",
        "pretrain_gpt.py $(grep -v '^#' FILE) plus the data, tokenizer and parallelism arguments",
        _MEGATRON_SOURCES,
        f.tag.removeprefix("core_v"),
    )


#: format -> the versions ``--framework-version`` takes (the default first is not implied: see
#: DEFAULT_VERSION); json is the recipe itself and has none
VERSIONS: Final[dict[str, tuple[FrameworkVersion, ...]]] = {
    "litgpt": (
        FrameworkVersion(
            "litgpt",
            "0.5",
            "litgpt 0.5.13",
            "litgpt pretrain --config FILE",
            (
                "litgpt 0.5.13 (PyPI) litgpt/pretrain.py (setup, fit, get_lr, initialize_weights), "
                "litgpt/args.py (TrainArgs), litgpt/config.py (Config)",
            ),
            "0.5.13",
        ),
    ),
    "hf": (
        FrameworkVersion(
            "hf",
            "5",
            "transformers 5.23.0 (Trainer)",
            "HfArgumentParser(TrainingArguments).parse_json_file(FILE)",
            (
                "transformers 5.23.0 (PyPI) transformers/training_args.py, trainer.py, "
                "optimization.py (get_cosine_with_min_lr_schedule_with_warmup), hf_argparser.py",
            ),
            "5.23.0",
        ),
    ),
    "deepspeed": (
        FrameworkVersion(
            "deepspeed",
            "0.19",
            "DeepSpeed 0.19.8",
            "deepspeed.initialize(..., config=FILE)",
            (
                "deepspeed 0.19.8 (PyPI) deepspeed/runtime/config.py (DeepSpeedConfig), "
                "deepspeed/runtime/lr_schedules.py (WarmupCosineLR)",
            ),
            "0.19.8",
        ),
    ),
    "megatron": tuple(_megatron(v) for v in MEGATRON),
    "torchtitan": (
        FrameworkVersion(
            "torchtitan",
            "0.2",
            "torchtitan 0.2.2",
            "torchrun ... -m torchtitan.train --job.config_file FILE",
            (
                "torchtitan 0.2.2 (PyPI) torchtitan/config/job_config.py, config/manager.py, "
                "components/lr_scheduler.py, trainer.py",
            ),
            "0.2.2",
        ),
        FrameworkVersion(
            "torchtitan",
            "0.3",
            "torchtitan 0.3.0",
            "torchrun ... -m torchtitan.train $(grep -v '^#' FILE)",
            (
                "torchtitan 0.3.0 (PyPI) torchtitan/config/manager.py, config/configs.py, "
                "components/optimizer/optimizer.py (param_groups), components/optimizer/"
                "lr_scheduler.py, models/llama3/config_registry.py, trainer.py",
            ),
            "0.3.0",
        ),
    ),
    "nanogpt": (
        FrameworkVersion(
            "nanogpt",
            "3adf61e",
            "nanoGPT karpathy/nanoGPT@3adf61e154c3 (2025-11-12)",
            "python train.py FILE (configurator.py execs it over train.py's globals)",
            ("karpathy/nanoGPT@3adf61e154c3 train.py, configurator.py, model.py",),
            "3adf61e154c3",
        ),
    ),
    "json": (),
}

#: the version a format targets without --framework-version: the current release
DEFAULT_VERSION: Final[dict[str, str | None]] = {
    "litgpt": "0.5",
    "hf": "5",
    "deepspeed": "0.19",
    "megatron": "0.19",
    "torchtitan": "0.3",
    "nanogpt": "3adf61e",
    "json": None,
}


def _normal(given: str) -> str:
    return given.strip().lower().removeprefix("core_v").removeprefix("v")


def _matches(given: str, known: str) -> bool:
    """``given`` names ``known``: equal, a longer release of it ("0.19.0" for "0.19"), or
    (nanoGPT commits) a longer commit prefix."""
    g = _normal(given)
    if g == known or g.startswith(known + "."):
        return True
    return len(g) >= 7 and (g.startswith(known) or known.startswith(g))


def resolve_version(
    fmt: str, given: str | None, *, option: str = "framework version"
) -> FrameworkVersion | None:
    """The version of ``fmt`` an export targets: ``given`` (``framework_version``,
    ``--framework-version``) or the default. None for json. ValueError naming the known versions
    when ``given`` is in no known series, calling the option ``option`` (the caller's spelling: the
    CLI's is ``--framework-version``); another release of a known series ("0.19.1" for 0.19,
    checked at 0.19.0) is written for the checked release, with ``given`` set (its
    :attr:`FrameworkVersion.caution` says so)."""
    known = VERSIONS[fmt]
    if given is None:
        want = DEFAULT_VERSION[fmt]
        return next(v for v in known if v.version == want) if want is not None else None
    if not known:
        raise ValueError(f"{option} {given!r}: {fmt} has no framework versions")
    for v in known:
        if _matches(given, v.version):
            # the checked release is the one given, or a longer release of a series given ("0.19"
            # and "0.19.0" name 0.19.0; "0.19.1" does not), or the same commit
            checked = _matches(v.release, _normal(given))
            return v if checked else replace(v, given=given.strip())
    names = ", ".join(v.version for v in known)
    raise ValueError(
        f"unknown {option} {given!r} for {fmt}; known: {names} (default {DEFAULT_VERSION[fmt]})"
    )


def help_text() -> str:
    """The versions every format targets, for ``sweeper export --help``."""
    parts = []
    for fmt, vs in VERSIONS.items():
        if not vs:
            parts.append(f"{fmt}: the recipe itself")
            continue
        default = DEFAULT_VERSION[fmt]
        names = "; ".join(
            f"{v.version} = {v.framework}" + (" (default)" if v.version == default else "")
            for v in vs
        )
        parts.append(f"{fmt}: {names}")
    return ". ".join(parts)

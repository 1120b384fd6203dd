"""What a format cannot carry: one :class:`Missing` per recipe setting, with its values and units,
worded the same in every format. Each format module composes its list from these helpers (and
says where its framework does something else); the exporter prints every item on stderr
(``sweeper: warning: FORMAT cannot express: ...``) and lists it in the file's header
(``# not expressible here: ...``) where the format has comments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from proxy_models.rules import VECTOR
from sweeper.fitting.conventions import Conventions
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.schedule import schedule_text

__all__ = [
    "SCRIPT_MODEL",
    "SETTINGS",
    "Missing",
    "data_parallel",
    "eps",
    "init_std",
    "lr_law_conventions",
    "model_shape",
    "not_the_proxies",
    "on_the_proxies",
    "optimizer",
    "output_mult",
    "parametrization",
    "rampup",
    "schedule",
    "seq_len",
    "vocab",
    "warmup_from_min",
    "weight_decay_groups",
    "z_loss",
    "zero_stage",
]

#: the settings a format may be unable to carry (the ``setting`` of a :class:`Missing`)
SETTINGS: Final[tuple[str, ...]] = (
    "rampup", "z_loss", "init_std", "seq_len", "model_shape", "vocab", "parametrization",
    "output_mult", "zero_stage", "optimizer", "schedule", "eps", "data_parallel", "weight_decay",
    "architecture",
)  # fmt: skip


@dataclass(frozen=True)
class Missing:
    """A recipe setting a format has no key for: ``setting`` (one of :data:`SETTINGS`), ``text``
    (one line, with the recipe's value), ``refuse`` when exporting without it changes what the LR
    means (refused unless ``--allow-inexpressible``)."""

    setting: str
    text: str
    refuse: bool = False


def rampup(r: Recipe, how: str = "") -> list[Missing]:
    """The batch ramp-up, when the recipe has one."""
    ru = r.rampup
    if ru is None:
        return []
    text = (
        f"batch ramp-up {ru.start_sequences}→{r.global_batch_sequences} sequences "
        f"(+{ru.increment_sequences} per increment) over {ru.ramp_samples:.3g} samples "
        f"({ru.ramp_tokens:.3g} tokens): the file trains at the full batch from step 0"
    )
    return [Missing("rampup", text + (f"; {how}" if how else ""))]


def z_loss(r: Recipe) -> list[Missing]:
    if not r.z_loss:
        return []
    return [Missing("z_loss", f"z-loss coefficient {r.z_loss:g} on log(Z)² of the logits")]


def init_std(r: Recipe, framework: str) -> list[Missing]:
    """The init std, with what the framework does instead (``framework``)."""
    hidden = (
        f" (hidden matrices {r.hidden_init_std:.4g} at width {r.width})" if r.base_width else ""
    )
    return [Missing("init_std", f"init std {r.init_std:.4g}{hidden}: {framework}")]


def seq_len(r: Recipe, where: str) -> list[Missing]:
    return [Missing("seq_len", f"sequence length {r.seq_len} tokens: {where}")]


def model_shape(r: Recipe, where: str) -> list[Missing]:
    return [
        Missing(
            "model_shape",
            f"model shape {r.depth} layers × d_model {r.width}, {r.heads} heads: {where}",
        )
    ]


def vocab(r: Recipe, where: str) -> list[Missing]:
    return [Missing("vocab", f"vocab size {r.vocab}: {where}")]


#: why a training-arguments file cannot carry muP (hf, deepspeed): the model is not in it
SCRIPT_MODEL: Final = (
    "the file cannot set muP's multipliers or per-layer LRs: the model and its optimizer groups "
    "are the training script's"
)


def parametrization(r: Recipe, why: str = "") -> list[Missing]:
    """muP/CompleteP where the format has no switch: the LR is a base-width LR (refused).
    ``why`` says why; without it, the format builds an SP model itself (litgpt, torchtitan,
    nanoGPT). A format whose model is the user's script's says so (:data:`SCRIPT_MODEL`)."""
    if r.parametrization == "sp":
        return []
    p = r.parametrization
    text = (
        f"{p} parametrization (base width {r.base_width}"
        + (f", base depth {r.base_depth}" if p == "completep" and r.base_depth else "")
        + f"): the LR {r.lr.value:.4g} is for a {p} model implementation"
        + (f"; {why}" if why else "; this format's models are SP")
    )
    return [Missing("parametrization", text, refuse=True)]


def output_mult(r: Recipe) -> list[Missing]:
    """The LR law's output (logit) multiplier when not 1: the LR was measured with it."""
    alpha = r.output_mult
    if alpha == 1.0:
        return []
    if r.parametrization == "sp" or not r.base_width:
        text = (
            f"output (logit) multiplier {alpha:g}: logits = {alpha:g}·(h·W_lm); the LR assumes it"
        )
    else:
        factor = r.rules().output_multiplier(alpha)
        text = (
            f"output (logit) multiplier {alpha:g} at base width {r.base_width}: logits = "
            f"{alpha:g}·{r.base_width}/{r.width}·(h·W_lm) = {factor:.4g}·(h·W_lm) at width "
            f"{r.width} (mup's MuReadout output_mult); the LR assumes it"
        )
    return [Missing("output_mult", text)]


def zero_stage(r: Recipe, framework_stage: int | None, what: str) -> list[Missing]:
    """ZeRO: declared when the framework shards otherwise (``framework_stage`` None: unknown,
    the launcher's or the user's choice)."""
    s = r.hardware.zero_stage
    if framework_stage is not None and framework_stage == s:
        return []
    if framework_stage is None and s == 0:
        return []
    return [Missing("zero_stage", f"ZeRO stage {s} (the memory estimate's): {what}")]


def optimizer(r: Recipe, fmt: str) -> list[Missing]:
    """A format whose file is written for AdamW, when the LR is not an AdamW LR (refused): the
    recipe's optimizer is another, or its LR law was measured with another one named (Adam
    counts as AdamW), or by a training function that chose its own and recorded none (the
    recipe then says AdamW). Imported runs, which record no optimizer, are not refused: the
    recipe warns that their optimizer is unknown."""
    law = lr_law_conventions(r)
    measured = (law.optimizer or "").lower() if law is not None else "adamw"
    own = law is not None and law.train_function is not None
    if r.optimizer != "adamw":
        article = "an" if r.optimizer[:1] in "aeiou" else "a"
        what, lr_is = f"optimizer {r.optimizer}", f"{article} {r.optimizer} LR"
    elif measured in ("adamw", "adam") or not (measured or own):
        return []
    else:
        chose = "not recorded: its training function chose it"
        what = f"the lr law's optimizer ({measured or chose})"
        lr_is = "not an AdamW LR" if measured else "an LR of an unknown optimizer"
    text = f"{what}: the {fmt} export writes AdamW keys only; the LR {r.lr.value:.4g} is {lr_is}"
    return [Missing("optimizer", text, refuse=True)]


def on_the_proxies(r: Recipe) -> bool:
    """Whether the recipe's LR law was measured on Sweeper's built-in proxies (launched, or
    imported with their study): not a published law, nor runs imported as they were, nor a
    study's own model or training function. Only then is the proxies' block the model the LR
    belongs to (a review: the litgpt export had written the proxies' block, and said their
    learned positions were not expressible, for DeepSeek's published law)."""
    return not _measured_elsewhere(r)


def _measured_elsewhere(r: Recipe) -> str:
    """What the LR law was measured on when not the proxies, in words ("" when it was)."""
    p = r.provenance.get("lr") or {}
    law = lr_law_conventions(r)
    if p.get("method") == "published":
        return "a published law"
    if law is not None and (law.model_builder is not None or law.train_function is not None):
        return "a study's own model or training function"
    counted = law is not None and law.n_params_source == "counted"
    return "" if counted else "runs imported as they were"


def not_the_proxies(r: Recipe, fmt: str, block: str) -> list[str]:
    """The caution of a format that writes a model block when the LR law was not measured on
    the proxies (:func:`on_the_proxies`): ``block`` says what the file writes instead."""
    what = _measured_elsewhere(r)
    if not what:
        return []
    return [
        f"the LR law is {what}, not measured on Sweeper's proxies: the {fmt} file's block is "
        f"{block}; set it to the model the law was measured on"
    ]


def lr_law_conventions(r: Recipe) -> Conventions | None:
    """The conventions the recipe's LR law records (None: the recipe names no LR law)."""
    p = r.provenance.get("lr")
    return Conventions.from_json(p.get("conventions"), law=p) if p else None


def schedule(r: Recipe, fmt: str, runs: tuple[str, ...], writes: str) -> list[Missing]:
    """The recipe's schedule where the format cannot run it (``runs``: the schedules it can run
    as the proxies ran them; ``writes``: what the file runs instead). Refused: the peak LR is the
    optimum under the recipe's schedule (the LR law's measured one, unless overridden), and under
    another schedule (a cosine for a WSD, or a decay to another min LR) the optimum moves."""
    if r.schedule in runs:
        return []
    text = (
        f"schedule {schedule_text(r.schedule, r.min_lr_ratio, r.decay_fraction)}: {fmt} runs "
        f"{' | '.join(runs)} only; the file writes {writes}, and the peak LR {r.lr.value:.4g} is "
        "the optimum under the recipe's schedule, not under that one"
    )
    return [Missing("schedule", text, refuse=True)]


def warmup_from_min(r: Recipe, how: str) -> list[Missing]:
    """A warmup that starts at the min LR instead of 0 (``how``: the scheduler that does so):
    declared, not refused (the decay and the peak are the recipe's; the warmup's first steps run
    a higher LR than the proxies' lr·(step+1)/warmup)."""
    if r.min_lr_ratio == 0 or r.warmup_steps < 1:
        return []
    text = (
        f"warmup from 0: {how} warms up linearly from the min LR {r.min_lr:.4g} (min_lr_ratio "
        f"{r.min_lr_ratio:g} × peak), not from 0, to the peak over {r.warmup_steps} steps; the "
        "decay after it is the recipe's"
    )
    return [Missing("schedule", text)]


def eps(r: Recipe, default: float, where: str) -> list[Missing]:
    if r.adam_eps == default:
        return []
    return [Missing("eps", f"Adam eps {r.adam_eps:g}: {where}")]


def data_parallel(r: Recipe, launcher: str, accum_is_total: bool = False) -> list[Missing]:
    """The data-parallel size, when it is the launcher's and not in the file.
    ``accum_is_total``: the file's accumulation is the total over processes, which the framework
    divides by the world size (nanoGPT), so the global batch holds on any world size dividing it."""
    if r.data_parallel == 1:
        return []
    g, accum = r.global_batch_sequences, r.grad_accum_steps
    text = f"data-parallel size {r.data_parallel}: the launcher's ({launcher}), no key; "
    if accum_is_total:
        total = accum * r.data_parallel
        text += (
            f"the accumulation {total} is the total over processes (divided by the world size), "
            f"so the global batch {g} = micro {r.micro_batch_size} × {total} holds on any world "
            f"size dividing {total} ({r.data_parallel} processes: {accum} micro steps each)"
        )
    else:
        text += (
            f"the global batch {g} = micro {r.micro_batch_size} × accumulation {accum} × "
            f"{r.data_parallel} holds only on {r.data_parallel} processes"
        )
    return [Missing("data_parallel", text)]


def weight_decay_groups(r: Recipe, how: str) -> list[Missing]:
    """The proxies' decay groups (:mod:`proxy_models.rules`: matrices decayed, vectors not) where
    the format applies one weight decay to every parameter (``how``)."""
    vector = r.weight_decay * r.rules().weight_decay_multiplier(VECTOR)
    if r.weight_decay == vector:
        return []
    text = (
        f"weight decay {r.weight_decay:g} on the matrices only, {vector:g} on norm gains and "
        f"biases (the proxies' param groups): {how}"
    )
    return [Missing("weight_decay", text)]


def clip_norm(r: Recipe) -> float:
    """The recipe's gradient-norm clip for a framework that always clips (litgpt, torchtitan:
    torch's ``clip_grad_norm_`` scales the gradients to ``max_norm``, so 0 zeroes them): the
    recipe's clip, or infinity for its 0 (no clipping, as the proxies ran), which leaves every
    finite gradient as it is. Frameworks that read 0 as "off" (HF, DeepSpeed, Megatron, nanoGPT)
    take the recipe's value as it is."""
    return r.grad_clip if r.grad_clip > 0 else math.inf


def no_clip_note(r: Recipe, key: str) -> list[str]:
    """The file's note on :func:`clip_norm`'s infinity, when it writes one."""
    if r.grad_clip > 0:
        return []
    return [f"{key} = inf: no gradient clipping, as the proxies that measured the LR ran (0 "
            "would zero the gradients here)"]  # fmt: skip

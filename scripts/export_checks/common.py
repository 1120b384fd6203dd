"""What every loader returns (:class:`View`), what the recipe says the numbers must be
(:func:`expected`), and the comparison (:func:`compare`).

A loader reads an exported file with the framework's own config loader and reports the
framework's own view of the numbers: its scheduler's LR at the end of the warmup, mid-stable and
at the start of the decay (WSD), mid-decay and at the end (:func:`lr_points`); its batch
calculator's global batch, micro batch and accumulation; its ramp-up
calculator's batch at 0 and mid-ramp, and the iterations it runs with the ramp-up (checked
against what the file says, :func:`ramp_steps_said`); where the loader builds the model's
config, its block (parallel residual, linear biases). The expected values come from the recipe JSON
(``sweeper export --format json``) read with the recipe's documented semantics (see
``expected``; the LRs are the proxies' own :func:`proxy_models.hparams.lr_at`, the shape the LR
was measured under), never from what an exporter writes.

Only the standard library is imported here, and proxy_models.hparams from the repository (pure
Python, standard library only): this module runs inside every framework venv.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # the repository, for proxy_models
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from proxy_models.hparams import HParams, lr_at, wsd_decay_start

#: quantities compared, in report order
KEYS: tuple[str, ...] = (
    "peak_lr", "min_lr", "lr_warmup_end", "lr_stable_mid", "lr_decay_start", "lr_mid", "lr_end",
    "total_steps",
    "global_batch", "micro_batch", "grad_accum", "data_parallel", "seq_len",
    "beta1", "beta2", "eps", "weight_decay", "grad_clip", "precision",
    "rampup_batch_start", "rampup_batch_mid", "rampup_batch_end",
    "rampup_total_steps", "rampup_warmup_steps",
    "n_layer", "width", "heads", "vocab", "init_std", "z_loss", "zero_stage",
    "parametrization", "mup_base_width", "parallel_residual", "linear_bias",
)  # fmt: skip

#: the model's block, checked only where the loader builds the model's config (None: the file
#: has no model, the training script's)
BLOCK_KEYS: tuple[str, ...] = ("parallel_residual", "linear_bias")

#: the words that must appear in a "not expressible" declaration of each quantity
DECLARE_WORDS: dict[str, tuple[str, ...]] = {
    "rampup": ("ramp-up", "rampup", "ramp up"),
    "z_loss": ("z-loss", "z_loss", "zloss"),
    "init_std": ("init std", "init_std", "initialization", "init-method-std"),
    "seq_len": ("sequence length", "seq_len", "seq len", "context"),
    "parametrization": ("mup", "μp", "parametrization", "completep"),
    "model_shape": ("layers", "n_layer", "model"),
    "eps": ("eps",),
    "zero_stage": ("zero",),
    "precision": ("precision", "bf16", "fp32"),
}


@dataclass
class View:
    """One framework's reading of one exported file. None: the framework has no such number, or
    the file does not set it (a test then wants the file to declare it, see ``declared``)."""

    framework: str
    loader: str
    peak_lr: float | None = None
    min_lr: float | None = None
    lr_warmup_end: float | None = None
    lr_stable_mid: float | None = None
    lr_decay_start: float | None = None
    lr_mid: float | None = None
    lr_end: float | None = None
    total_steps: int | None = None
    global_batch: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    data_parallel: int | None = None
    seq_len: int | None = None
    beta1: float | None = None
    beta2: float | None = None
    eps: float | None = None
    weight_decay: float | None = None
    grad_clip: float | None = None
    precision: str | None = None  # "bf16" (mixed, fp32 master), "fp32", or the framework's word
    rampup_batch_start: int | None = None
    rampup_batch_mid: int | None = None
    rampup_batch_end: int | None = None
    rampup_total_steps: int | None = None  # iterations of the run with the ramp-up
    rampup_warmup_steps: int | None = None  # the first iteration at the end of the warmup
    n_layer: int | None = None
    width: int | None = None
    heads: int | None = None
    vocab: int | None = None
    init_std: float | None = None
    z_loss: float | None = None
    zero_stage: int | None = None
    parametrization: str | None = None
    mup_base_width: int | None = None
    parallel_residual: bool | None = None  # attention and MLP added to the same input
    linear_bias: bool | None = None  # biases on the attention and MLP linears (or the head's)
    notes: list[str] = field(default_factory=list)  # what the loader saw (warnings, defaults)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hparams(recipe: dict[str, Any]) -> HParams:
    """The recipe's schedule as the proxies' HParams (warmup in steps)."""
    return HParams(
        lr=float(recipe["lr"]["value"]),
        warmup=int(recipe["warmup_steps"]),
        schedule=recipe.get("schedule") or "cosine",
        min_lr_ratio=float(recipe["min_lr_ratio"]),
        decay_fraction=float(recipe.get("decay_fraction") or 0.0),
    )


def lr_points(recipe: dict[str, Any]) -> dict[str, int]:
    """The optimizer-step indices at which LRs are compared: the end of the warmup (the first
    step at the peak), for WSD the middle of the stable phase and the start of the decay (still
    the peak), the middle of the decay, and the last step."""
    w, t = int(recipe["warmup_steps"]), int(recipe["total_steps"])
    schedule = recipe.get("schedule") or "cosine"
    start = wsd_decay_start(_hparams(recipe), t) if schedule == "wsd" else w
    out = {"lr_warmup_end": w}
    if schedule == "wsd":
        out |= {"lr_stable_mid": (w + start) // 2, "lr_decay_start": start}
    return out | {"lr_mid": start + (t - start) // 2, "lr_end": t}


def recipe_lr(recipe: dict[str, Any], step: int) -> float:
    """The recipe's LR at optimizer step ``step``: the proxies' ``lr_at`` (linear warmup to the
    peak, then cosine/linear to min_lr_ratio × peak at the last step, WSD's linear decay over
    the last decay_fraction of the steps, or constant). Frameworks count the warmup and the
    decay's end one step apart from it (step/W against (step+1)/W, the end at total_steps
    against total_steps − 1): within the comparison's one step's worth of tolerance."""
    return lr_at(_hparams(recipe), step, int(recipe["total_steps"]))


def rampup_batch(recipe: dict[str, Any], consumed_samples: int) -> int:
    """The recipe's ramp-up (Megatron's ``--rampup-batch-size start increment samples``
    semantics, RampUp in sweeper/recipe): ``start + floor(consumed / (samples / n)) × increment``
    with n = (global − start) / increment increments, the full batch after ``samples``."""
    ru = recipe["rampup"]
    g = int(recipe["global_batch_sequences"])
    if not ru:
        return g
    start, inc, samples = (
        int(ru["start_sequences"]),
        int(ru["increment_sequences"]),
        int(ru["ramp_samples"]),
    )
    n = (g - start) // inc
    if consumed_samples > samples:
        return g
    return start + int(consumed_samples / (samples / n)) * inc


def expected(recipe: dict[str, Any]) -> dict[str, Any]:
    """The numbers every export of ``recipe`` must make its framework use."""
    peak = float(recipe["lr"]["value"])
    pts = lr_points(recipe)
    ru = recipe.get("rampup")
    out: dict[str, Any] = {
        "peak_lr": peak,
        # the min LR follows the peak: min_lr_ratio is the recipe's setting, min_lr derived
        "min_lr": peak * float(recipe["min_lr_ratio"]),
        **{k: recipe_lr(recipe, s) for k, s in pts.items()},
        "total_steps": int(recipe["total_steps"]),
        "global_batch": int(recipe["global_batch_sequences"]),
        "micro_batch": int(recipe["micro_batch_size"]),
        "grad_accum": int(recipe["grad_accum_steps"]),
        "data_parallel": int(recipe["data_parallel"]),
        "seq_len": int(recipe["seq_len"]),
        "beta1": float(recipe["adam_beta1"]),
        "beta2": float(recipe["adam_beta2"]),
        "eps": float(recipe["adam_eps"]),
        "weight_decay": float(recipe["weight_decay"]),
        "grad_clip": float(recipe["grad_clip"]),
        "precision": "bf16" if recipe["precision"] == "bf16" else "fp32",
        "n_layer": int(recipe["depth"]),
        "width": int(recipe["width"]),
        "heads": int(recipe["heads"]),
        "vocab": int(recipe["vocab"]),
        "init_std": float(recipe["init_std"]),
        "z_loss": float(recipe["z_loss"]),
        "zero_stage": int(recipe["hardware"]["zero_stage"]),
        "parametrization": recipe["parametrization"],
        "mup_base_width": recipe.get("base_width"),
        # the proxies' block (proxy_models/model.py: x + attn(norm x), then x + mlp(norm x), no
        # linear biases), which the recipe does not record
        "parallel_residual": False,
        "linear_bias": False,
    }
    if ru:
        out["rampup_batch_start"] = rampup_batch(recipe, 0)
        out["rampup_batch_mid"] = rampup_batch(recipe, int(ru["ramp_samples"]) // 2)
        out["rampup_batch_end"] = rampup_batch(recipe, int(ru["ramp_samples"]) + 1)
    return out


def _close(a: Any, b: Any, key: str, peak: float) -> bool:
    if isinstance(b, str) or isinstance(a, str) or b is None or a is None:
        return a == b
    if key.startswith("lr_") or key in ("peak_lr", "min_lr"):
        # schedules count steps from 0 or 1 and round the warmup differently: a step's worth
        return math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-3 * peak)
    if key == "total_steps":  # (exact: litgpt's one step short had passed a ±1 tolerance)
        return int(a) == int(b)
    if isinstance(b, float) or isinstance(a, float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return a == b


def compare(view: View, recipe: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The disagreements on ``keys``, one line each (empty: they agree)."""
    exp = expected(recipe)
    peak = exp["peak_lr"]
    bad = []
    for k in keys:
        if k not in exp:
            continue
        got = getattr(view, k)
        if got is None and (exp[k] is None or k in BLOCK_KEYS):
            continue
        if got is None:
            bad.append(f"{k}: the framework reads no value (recipe {exp[k]!r})")
        elif not _close(got, exp[k], k, peak):
            bad.append(f"{k}: framework {got!r} != recipe {exp[k]!r}")
    return bad


#: how a header says the iterations of a batch ramp-up (sweeper/recipe/export/header.py
#: _ramp_steps, and Megatron's note), lower-cased: (total, first iteration after the warmup)
_RAMP_SAID = (
    re.compile(r"with the batch ramp-up: (\d+) steps, the warmup ending at step (\d+)"),
    re.compile(r"make megatron run (\d+) iterations .*?end the warmup at iteration (\d+)"),
)


def ramp_steps_said(text: str) -> list[tuple[int, int]]:
    """Every (total, warmup) pair of iterations with the ramp-up that ``text`` (an export's
    comments, :func:`header_text`) states."""
    return [(int(m[1]), int(m[2])) for rx in _RAMP_SAID for m in rx.finditer(text)]


def header_text(text: str) -> str:
    """The comment lines (``#``) of an export, lower-cased."""
    return "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#")).lower()


def declares(text: str, what: str) -> bool:
    """Whether ``text`` (an export's comments, or the exporter's stderr) has a line that says
    ``what`` cannot be carried: a line with "not expressible" / "not carried" / "dropped" /
    "ignored" / "cannot" that names it."""
    words = DECLARE_WORDS[what]
    for line in text.lower().splitlines():
        said = re.search(
            r"not expressible|not carried|dropped|ignored|cannot|can't|unsupported|no key", line
        )
        if said and any(w in line for w in words):
            return True
    return False

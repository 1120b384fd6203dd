"""From fitted laws to a full training recipe for one target model, with intervals and provenance.

``recommend(laws, target, hardware)`` is pure: it evaluates the LR and batch laws at the target's
scale (in each law's own conventions), turns the batch into a global batch in sequences that the
hardware can run, adds the schedule and optimizer settings that the laws do not measure (each a
documented default, see :class:`RecipeDefaults`), estimates memory and time, and says how far the
laws are being extrapolated and what else to distrust.

Scale passed to a law (see :mod:`sweeper.laws` for the predictor names):

- ``n_params``: non-embedding N (the target's, or 12·L·d² from its shape); a law whose
  ``conventions["n_params"]`` is ``"total"`` gets N plus the embeddings instead.
- ``tokens``: D, in the law's token unit: a law that counts bytes (``conventions["tokens"] ==
  "bytes"``, the built-in data) gets D · ``bytes_per_token`` when that factor is given, else D
  unconverted with a warning (a BPE token is about 4 bytes of English text); its batch prediction
  is divided by the same factor. ``width``, ``depth``: d_model and layers.
- ``flops`` by ``conventions["flops"]``: ``"6ND"`` is Sweeper's compute 6·N·D + 6·L·T·d·D
  (Kaplan's attention term, T = training sequence length, as the launched proxies count it), with
  the given or inferred shape; ``"6ND (no attention)"`` is 6·N·D; ``"M*D"`` is DeepSeek's M·D with
  M = 72·L·d² + 12·L·d·T (or 6·N + 12·L·d·T when only N was given). Another convention is
  evaluated as ``"6ND"`` with a warning.

Compute: ``Target.compute`` and ``Recipe.flops`` are Sweeper's "6ND" compute (attention
included), so ``Recipe.flops == Target.compute`` for a compute budget. The loss law's
compute optimum is defined under Chinchilla's C = 6·N·D; a compute-only target is converted at
that boundary: N minimises the loss law's L(N, D) with D = C / (6·N + 6·L·T·d) (shape from N as
below), not the closed form at C.

When the target is given as N alone, the shape is inferred for memory, attention FLOPs and M with
d_model ≈ 128 · layers (the aspect ratio of GPT-3 6.7B and LLaMA-7B, 4096/32; Kaplan et al. 2020
§3.1 found the loss within a few percent over aspect ratios 20–200), d rounded to a multiple of 64,
and a warning says so.

What a law was measured under, and where a recipe leaves it, earns a warning: a target vocabulary
other than the law's (bytes against tokens), a target D, D/N, N or batch outside the range the law
held fixed (``domain["held:<name>"]``, see :mod:`sweeper.fit.power_law`), and a schedule, min LR,
warmup or z-loss other than the LR law's. Under muP/CompleteP the recipe's init std is the
proxies' (``conventions["init_std"]``, at the base width): LR and init transfer together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Final

from sweeper.errors import TargetError
from sweeper.laws import KaplanLRLaw, Law, LossLaw, PowerLaw
from sweeper.memory import PRECISIONS, MemoryEstimate, estimate_memory, train_flops, train_time_s

__all__ = [
    "FLOPS_6ND",
    "FLOPS_6ND_NO_ATTENTION",
    "FLOPS_M_D",
    "HELD_PREFIX",
    "PARAMETRIZATIONS",
    "Hardware",
    "Interval",
    "RampUp",
    "Recipe",
    "RecipeDefaults",
    "Target",
    "check_parametrization",
    "extrapolation_summary",
    "flops_convention_warnings",
    "held_span",
    "infer_shape",
    "infer_shape_warning",
    "law_label",
    "law_scale",
    "recipe_from_dict",
    "recommend",
    "regime_warnings",
    "round_global_batch",
    "schedule_warnings",
    "token_factor",
    "token_unit_warnings",
]

PARAMETRIZATIONS: Final[tuple[str, ...]] = ("sp", "mup", "completep")
#: d_model / n_layers used to infer a shape from N alone
ASPECT_RATIO: Final[int] = 128
#: vocab assumed for embedding memory when the target does not give one (LLaMA's tokenizer)
DEFAULT_VOCAB: Final[int] = 32000
#: training sequence length when neither the hardware nor the target gives one (GPT-3, LLaMA-1)
DEFAULT_SEQ_LEN: Final[int] = 2048
FAR_FACTOR: Final[float] = 10.0
VERY_FAR_FACTOR: Final[float] = 1000.0
#: natural-log error above which a law's cross-validation error earns a warning (±50%)
POOR_LOG_ERROR: Final[float] = math.log(1.5)
#: interval high/low ratio above which the interval earns a warning
WIDE_INTERVAL: Final[float] = 4.0
#: ``conventions["flops"]`` values (see :mod:`sweeper.laws`)
FLOPS_6ND: Final[str] = "6ND"
FLOPS_6ND_NO_ATTENTION: Final[str] = "6ND (no attention)"
FLOPS_M_D: Final[str] = "M*D"
#: prefix of the ``Law.domain`` keys of variables a law holds fixed; the same string as
#: :data:`sweeper.fit.power_law.HELD_PREFIX` (not imported: that module needs pandas)
HELD_PREFIX: Final[str] = "held:"
#: a target this factor beyond a held range (either side) earns a warning; the slack absorbs the
#: gap between N = 12·L·d² and a proxy's counted N, which alone moves D/N by 10–20%
HELD_SLACK: Final[float] = 1.25
_BYTE_VOCAB: Final[int] = 256
_HELD_NAMES: Final[dict[str, str]] = {
    "n_params": "N",
    "tokens": "D",
    "tokens_per_param": "D/N",
    "batch_tokens": "batch",
}


def _positive(name: str, v: float | None, problems: list[str]) -> None:
    if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        problems.append(f"{name} must be positive, got {name}={v}")


@dataclass(frozen=True)
class Target:
    """The model and budget to recommend for.

    Model: ``n_params`` (non-embedding N) and/or the shape ``width`` (d_model) and ``depth``
    (layers), with optional ``heads``, ``vocab`` and ``context`` (sequence length T). Budget: one of
    ``tokens`` (D, in the target's tokenizer tokens), ``compute`` (training FLOPs counted as
    6·N·D + 6·L·T·d·D with the given or inferred shape, Sweeper's "6ND" convention) or
    ``tokens_per_param`` (D = R·N); none of them means "the compute-optimal D from the loss law".
    With ``compute`` and no model, N comes from the loss law (its optimum under this compute, see
    the module doc) and D from the compute.
    ``parametrization`` is "sp", "mup" or "completep"; the relative ones take ``base_width`` (and
    ``base_depth`` for CompleteP), else the law's.
    """

    n_params: float | None = None
    width: int | None = None
    depth: int | None = None
    heads: int | None = None
    vocab: int | None = None
    context: int | None = None
    tokens: float | None = None
    compute: float | None = None
    tokens_per_param: float | None = None
    parametrization: str = "sp"
    base_width: int | None = None
    base_depth: int | None = None

    def __post_init__(self) -> None:
        p: list[str] = []
        _positive("n_params", self.n_params, p)
        for name in ("width", "depth", "heads", "vocab", "context", "base_width", "base_depth"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                p.append(f"{name} must be a positive integer, got {name}={v!r}")
        if (self.width is None) != (self.depth is None):
            p.append(f"give width and depth together, got width={self.width}, depth={self.depth}")
        if self.heads and self.width and self.width % self.heads:
            p.append(f"heads must divide width, got width={self.width}, heads={self.heads}")
        budget = {
            k: getattr(self, k)
            for k in ("tokens", "compute", "tokens_per_param")
            if getattr(self, k) is not None
        }
        if len(budget) > 1:
            p.append(f"give one of tokens, compute or tokens_per_param, got {budget}")
        for k, v in budget.items():
            _positive(k, v, p)
        if self.n_params is None and self.width is None and self.compute is None:
            p.append("give n_params, or width and depth (or compute alone with a loss law)")
        if self.parametrization not in PARAMETRIZATIONS:
            p.append(
                f"parametrization must be one of {', '.join(PARAMETRIZATIONS)}, "
                f"got {self.parametrization!r}"
            )
        elif self.parametrization == "sp" and self.base_width is not None:
            p.append(f"base_width applies to mup/completep targets only, got {self.base_width}")
        if p:
            raise TargetError("; ".join(p))

    @property
    def has_model(self) -> bool:
        return self.n_params is not None or self.width is not None


@dataclass(frozen=True)
class Hardware:
    """Where the run will train. ``gpus`` data-parallel GPUs of ``gpu_memory_gb`` GiB each;
    ``seq_len`` tokens per sequence; ``micro_batch`` sequences per GPU per forward (None: the
    largest power of two that fits); ``precision`` "bf16" (mixed, fp32 master) or "fp32";
    ``peak_tflops`` dense peak per GPU at that precision (None: no time estimate); ``mfu`` the
    expected model-FLOPs utilisation (0.4: typical of well-tuned dense training, 35–50%);
    ``zero_stage`` 0–3; ``flash_attention`` and ``recompute`` (full activation checkpointing)
    change the activation memory (see :mod:`sweeper.memory`)."""

    gpus: int = 1
    gpu_memory_gb: float | None = None
    seq_len: int | None = None
    micro_batch: int | None = None
    precision: str = "bf16"
    peak_tflops: float | None = None
    mfu: float = 0.4
    zero_stage: int = 0
    flash_attention: bool = True
    recompute: bool = False

    def __post_init__(self) -> None:
        p: list[str] = []
        for name in ("gpus", "seq_len", "micro_batch"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                p.append(f"{name} must be a positive integer, got {name}={v!r}")
        _positive("gpu_memory_gb", self.gpu_memory_gb, p)
        _positive("peak_tflops", self.peak_tflops, p)
        if not (isinstance(self.mfu, (int, float)) and 0.0 < self.mfu <= 1.0):
            p.append(f"mfu must be in (0, 1], got mfu={self.mfu}")
        if self.precision not in PRECISIONS:
            p.append(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.zero_stage not in (0, 1, 2, 3):
            p.append(f"zero_stage must be 0, 1, 2 or 3, got {self.zero_stage}")
        if p:
            raise TargetError("; ".join(p))


@dataclass(frozen=True)
class RecipeDefaults:
    """The settings the laws do not measure, each with its source.

    - ``min_lr_ratio`` 0.1: cosine to 10% of peak (GPT-3, LLaMA; REFERENCE.md "Training
      heuristics").
    - ``adam_beta1`` 0.9, ``adam_beta2`` 0.95: LLM practice (GPT-3, LLaMA); β2 0.95 lowers the
      chance that Adam's second moment lags a sudden gradient change (seed 002).
    - ``adam_eps`` 1e-8: PyTorch's default; Wortsman et al. (arXiv:2309.14322) show it should
      shrink for very wide models, so a warning says so above width 8192.
    - ``weight_decay`` 0.1 (decoupled, AdamW), ``grad_clip`` 1.0: GPT-3, LLaMA, seeds 002/003.
    - ``z_loss`` 1e-4: Wortsman et al. / PaLM, stops output-logit divergence.
    - warmup: ``min(max_warmup_steps, warmup_fraction · total steps)`` steps, at least 1: LLaMA,
      Llama 2 and DeepSeek use 2000 steps; short runs keep 95% of their steps for the decay.
    - ramp-up (seed 000: BLOOM-176B 192 → 2048 sequences; GPT-3 from 32K tokens over its first
      4–12B tokens): when the global batch is at least ``rampup_min_sequences``, start at
      ``rampup_start_fraction`` of it and grow over ``rampup_token_fraction`` of the tokens in
      about ``rampup_increments`` equal steps. Megatron's third ramp-up number is the total of
      samples over which the batch grows (BLOOM's 9,765,625 ≈ 20B tokens), not a per-step count.
    - init std: sqrt(2 / (5·d)) ("small init", Nguyen & Salazar 2019, used by GPT-NeoX/Pythia);
      0.0228 at d = 768 (GPT-2's 0.02), 0.0099 at d = 4096. Under muP it is the base-width std
      (the implementation scales it by the width multiplier).
    """

    min_lr_ratio: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    adam_eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    z_loss: float = 1e-4
    max_warmup_steps: int = 2000
    warmup_fraction: float = 0.05
    rampup_min_sequences: int = 1024
    rampup_start_fraction: float = 0.125
    rampup_token_fraction: float = 0.03
    rampup_increments: int = 64


@dataclass(frozen=True)
class Interval:
    """A value with its interval (``low``, ``high``); a published law gives low = high = value."""

    value: float
    low: float
    high: float

    @property
    def degenerate(self) -> bool:
        return self.low == self.high

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class RampUp:
    """Global-batch ramp-up in Megatron's terms (``--rampup-batch-size start increment samples``):
    the batch starts at ``start_sequences`` and grows by ``increment_sequences`` in equal steps
    until the full batch, over ``ramp_samples`` sequences in total (``ramp_tokens`` tokens)."""

    start_sequences: int
    increment_sequences: int
    ramp_samples: int
    ramp_tokens: int

    def increments_to(self, global_batch: int) -> int:
        return (global_batch - self.start_sequences) // self.increment_sequences

    def tokens_per_increment(self, global_batch: int) -> float:
        return self.ramp_tokens / max(1, self.increments_to(global_batch))

    def to_dict(self, global_batch: int) -> dict[str, Any]:
        return {
            "start_sequences": self.start_sequences,
            "increment_sequences": self.increment_sequences,
            "ramp_samples": self.ramp_samples,
            "ramp_tokens": self.ramp_tokens,
            "increments": self.increments_to(global_batch),
            "tokens_per_increment": self.tokens_per_increment(global_batch),
        }


def _default_heads(width: int) -> int:
    for head_dim in (128, 64):
        if width % head_dim == 0 and width >= head_dim:
            return width // head_dim
    return 1


def infer_shape(n_params: float) -> tuple[int, int]:
    """(width, depth) with 12·L·d² ≈ N and d ≈ 128·L, d a multiple of 64 (at least 64)."""
    depth = max(1, round((n_params / (12.0 * ASPECT_RATIO**2)) ** (1.0 / 3.0)))
    width = max(64, 64 * round(math.sqrt(n_params / (12.0 * depth)) / 64))
    return width, depth


def infer_shape_warning(width: int, depth: int) -> str:
    """The warning that goes with a shape from :func:`infer_shape`."""
    return (
        f"shape inferred from N: {depth} layers × d_model {width} (d ≈ {ASPECT_RATIO}·L); "
        "give width and depth for exact memory and FLOPs"
    )


def token_factor(law: Law, bytes_per_token: float | None) -> float:
    """The law's token units per target token: ``bytes_per_token`` for a law that counts bytes
    (``conventions["tokens"] == "bytes"``) when it is given, else 1 (no conversion)."""
    if bytes_per_token and (law.conventions or {}).get("tokens") == "bytes":
        return float(bytes_per_token)
    return 1.0


def law_scale(
    law: Law,
    *,
    n_params: float,
    tokens: float,
    width: int,
    depth: int,
    seq_len: int,
    shape_given: bool,
    n_params_total: float | None = None,
    bytes_per_token: float | None = None,
) -> dict[str, float]:
    """The predictor values for ``law`` at the target, in the law's conventions (module doc).

    ``tokens`` is the target's D in its own tokens; ``width``/``depth`` are the given shape or the
    inferred one (``shape_given`` False), which only DeepSeek's M treats differently.
    """
    conv = law.conventions or {}
    n = n_params_total if conv.get("n_params") == "total" and n_params_total else n_params
    d = tokens * token_factor(law, bytes_per_token)
    scale = {"n_params": n, "tokens": d, "width": float(width), "depth": float(depth)}
    flops = conv.get("flops", FLOPS_6ND)
    if flops == FLOPS_M_D:
        if shape_given:
            m = 72.0 * depth * width**2 + 12.0 * depth * width * seq_len
        else:
            m = 6.0 * n_params + 12.0 * depth * width * seq_len
        scale["flops"] = m * d
    elif flops == FLOPS_6ND_NO_ATTENTION:
        scale["flops"] = 6.0 * n_params * d
    else:
        scale["flops"] = train_flops(n_params, d, depth=depth, width=width, seq_len=seq_len)
    return scale


def flops_convention_warnings(law: Law, role: str) -> list[str]:
    """A warning when ``law`` has a flops predictor counted in a convention Sweeper cannot
    reproduce (e.g. FLOPs "as imported" from a file)."""
    conv = (law.conventions or {}).get("flops", FLOPS_6ND)
    if "flops" in law.predictors and conv not in (FLOPS_6ND, FLOPS_6ND_NO_ATTENTION, FLOPS_M_D):
        return [
            f"{role} law ({law_label(law)}) counts flops as {conv!r}: the target's are counted "
            "as 6·N·D + attention"
        ]
    return []


def token_unit_warnings(
    laws: list[tuple[str, Law]],
    *,
    vocab: int | None,
    bytes_per_token: float | None,
    what: str = "the target",
) -> list[str]:
    """Warnings about the token units of ``laws`` ((role, law) pairs) against a target whose
    vocabulary is ``vocab`` (None: a tokenizer's, not bytes): a law that counts bytes, converted or
    not; a law of another tokenizer; a ``bytes_per_token`` that no law can use. Laws that share
    their units share one warning."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for role, law in laws:
        conv = law.conventions or {}
        key = (conv.get("tokens", ""), conv.get("vocab_size", ""), conv.get("data", ""))
        groups.setdefault(key, []).append(f"{role} law ({law_label(law)})")
    has_vocab = f"vocab {vocab}" if vocab else "a tokenizer's vocab (none given)"
    out: list[str] = []
    used_factor = False
    for (unit, law_vocab, data), names in groups.items():
        who = " and ".join(names)
        verb = "count" if len(names) > 1 else "counts"
        if unit == "bytes":
            if vocab == _BYTE_VOCAB:
                continue
            src = f"byte-level data {data!r}" if data else "byte-level data"
            if bytes_per_token:
                used_factor = True
                out.append(
                    f"{who} {verb} D and the batch in bytes ({src}): converted at "
                    f"{bytes_per_token:g} bytes per token of {what}"
                )
            else:
                out.append(
                    f"{who} {verb} D and the batch in bytes ({src}, vocab {law_vocab or 256}) but "
                    f"{what} has {has_vocab}: its D and batch are used as if they were bytes (a "
                    "BPE token is about 4 bytes of English text, so a D exponent of 0.3 puts the "
                    "LR 1.5× off): give bytes_per_token to convert"
                )
        elif unit.startswith("tokenizer:") and law_vocab and str(vocab) != law_vocab:
            out.append(
                f"{who} {verb} tokens of {unit[len('tokenizer:') :]} (vocab {law_vocab}) but "
                f"{what} has {has_vocab}: D and batch of different tokenizers are not the same "
                "amount of text"
            )
    if bytes_per_token and not used_factor and vocab != _BYTE_VOCAB:
        out.append(f"bytes_per_token {bytes_per_token:g} is not used: no law here counts bytes")
    return out


def regime_values(
    n_params: float, tokens: float, batch_tokens: float, unit: float = 1.0
) -> dict[str, float]:
    """The values :func:`regime_warnings` checks, for a target of ``n_params`` parameters,
    ``tokens`` training tokens and a batch of ``batch_tokens``; ``unit`` converts tokens to the
    law's unit (bytes per token for a byte-level law, else 1)."""
    return {
        "n_params": n_params,
        "tokens": tokens * unit,
        "tokens_per_param": tokens * unit / n_params,
        "batch_tokens": batch_tokens * unit,
    }


def regime_warnings(law: Law, role: str, values: Mapping[str, float]) -> list[str]:
    """A warning when a value in ``values`` (n_params, tokens, tokens_per_param, batch_tokens, in
    the law's units) lies beyond a range the law held fixed (``domain["held:<name>"]``), by more
    than :data:`HELD_SLACK`."""
    names, outside = [], []
    for key, (lo, hi) in law.domain.items():
        if not key.startswith(HELD_PREFIX):
            continue
        name = key[len(HELD_PREFIX) :]
        v = values.get(name)
        if v is None or not v > 0:
            continue
        if v < lo / HELD_SLACK or v > hi * HELD_SLACK:
            label = _HELD_NAMES.get(name, name)
            names.append(label)
            outside.append(f"{label} {v:.3g} (its cells: {held_span(law, name)})")
    if not outside:
        return []
    return [
        f"{role} law ({law_label(law)}) does not model {', '.join(names)}, and the target lies "
        f"outside what its cells held: {'; '.join(outside)}; the law is applied outside the "
        "regime it was measured in"
    ]


def held_span(law: Law, name: str) -> str | None:
    """The range the law held ``name`` at, as text (None when it records none)."""
    r = law.domain.get(HELD_PREFIX + name)
    if r is None:
        return None
    lo, hi = r
    return f"{lo:.3g}" if hi <= lo * (1 + 1e-9) else f"{lo:.3g}–{hi:.3g}"


def round_global_batch(batch_sequences: float, unit: int) -> int:
    """The multiple of ``unit`` (micro batch × data-parallel GPUs) nearest to ``batch_sequences``
    in log space, at least ``unit``."""
    if unit < 1 or not batch_sequences > 0:
        raise TargetError(f"need unit >= 1 and a positive batch, got ({unit=}, {batch_sequences=})")
    k = max(1, math.floor(batch_sequences / unit))
    cands = (k, k + 1)
    return unit * min(cands, key=lambda c: abs(math.log(c * unit / batch_sequences)))


def law_label(law: Law) -> str:
    """How warnings name a law: its stored id, else ``source:target``."""
    return f"law {law.id}" if law.id is not None else f"{law.source}:{law.target}"


def _law_id(law: Law) -> int | str:
    return law.id if law.id is not None else f"{law.source}:{law.target}"


def _provenance(law: Law, *, fallback: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": law.id,
        "kind": law.kind,
        "source": law.source,
        "method": law.method,
        "predictors": list(law.predictors),
        "conventions": dict(law.conventions or {}),
        "parametrization": law.parametrization,
        "base_width": law.base_width,
        "base_depth": law.base_depth,
        "domain": {k: list(v) for k, v in law.domain.items()},
        "fallback": fallback,
    }
    if isinstance(law, PowerLaw):
        d["exponents"] = dict(law.exponents)
        d["exponents_ci"] = {k: list(v) for k, v in law.exponents_ci.items()}
        d["prefactor"] = law.prefactor
        d["cv_error"] = law.cv_error
        d["n_cells"] = law.n_cells
    return d


def _quality_warnings(law: Law, role: str, interval: tuple[float, float]) -> list[str]:
    """Warnings when ``law`` is poorly constrained (published laws carry no uncertainty)."""
    out: list[str] = []
    name = f"{role} law ({law_label(law)})"
    if law.method == "published" or isinstance(law, KaplanLRLaw):
        return [f"{name} is published without uncertainty: its interval is the point itself"]
    if not isinstance(law, PowerLaw):
        return out
    for what, err in (("leave-one-cell-out", law.cv_error), ("largest-cell", law.holdout_error)):
        if err is not None and err > POOR_LOG_ERROR:
            out.append(f"{name} {what} error is ±{math.expm1(err):.0%} (poorly constrained)")
    lo, hi = interval
    if lo > 0 and hi / lo > WIDE_INTERVAL:
        out.append(f"{name} 95% interval spans {hi / lo:.1f}× at the target (poorly constrained)")
    for p, (clo, chi) in law.exponents_ci.items():
        b = law.exponents.get(p, 0.0)
        if (clo < 0 < chi and b != 0.0) or chi - clo > 0.5:
            out.append(f"{name} exponent of {p} is {b:+.3f} [{clo:+.3f}, {chi:+.3f}]: poorly known")
    if 0 < law.n_cells < 3:
        out.append(f"{name} is fitted on only {law.n_cells} cells")
    return out


def check_parametrization(
    law: Law, role: str, parametrization: str, *, force: bool, warnings: list[str]
) -> tuple[int | None, int | None]:
    """Refuse (TargetError) a law fitted under another parametrization than ``parametrization``
    unless ``force`` (then warn); return the law's base width and depth."""
    p = law.parametrization
    if p is None:
        warnings.append(
            f"{role} law ({law_label(law)}) records no parametrization: assumed {parametrization}"
        )
        return None, None
    if p != parametrization:
        msg = (
            f"{role} law ({law_label(law)}) was fitted under {p} but the target is "
            f"{parametrization}: a {p} law transfers only to a {p} target"
        )
        if not force:
            raise TargetError(msg + " (force to override)")
        warnings.append(msg + " (forced)")
    return law.base_width, law.base_depth


def _require_optimum(loss_law: LossLaw) -> None:
    a, b = loss_law.alpha, loss_law.beta
    if not (a > 0 and b > 0 and loss_law.A > 0 and loss_law.B > 0):
        raise TargetError(
            f"loss law ({law_label(loss_law)}) has no compute optimum: "
            f"A={loss_law.A}, B={loss_law.B}, alpha={a}, beta={b}"
        )


def _compute_optimal_tokens(loss_law: LossLaw, n_params: float) -> float:
    """D (in the loss law's units) such that N is the loss law's compute-optimal N at C = 6·N·D."""
    _require_optimum(loss_law)
    a, b = loss_law.alpha, loss_law.beta
    g = ((a * loss_law.A) / (b * loss_law.B)) ** (1.0 / (a + b))
    c_over_6 = (n_params / g) ** ((a + b) / b)
    return c_over_6 / n_params


def _compute_optimal_n(loss_law: LossLaw, compute: float, seq_len: int, factor: float) -> float:
    """N minimising the loss law at Sweeper's compute ``compute`` = (6·N + 6·L·T·d)·D.

    The shape follows N as :func:`infer_shape` does, without its rounding (d = 128·L, 12·L·d² = N,
    so the attention term per token is 6·T·128·L²); D is in target tokens, the loss law sees
    D·``factor``. Golden-section search in ln N around the closed-form optimum at C = 6·N·D.
    """
    _require_optimum(loss_law)

    def loss(ln_n: float) -> float:
        n = math.exp(ln_n)
        layers = (n / (12.0 * ASPECT_RATIO**2)) ** (1.0 / 3.0)
        per_token = 6.0 * n + 6.0 * seq_len * ASPECT_RATIO * layers**2
        return loss_law.predict({"n_params": n, "tokens": factor * compute / per_token})

    n0, _ = loss_law.compute_optimal(compute * factor)
    lo, hi = math.log(n0) - math.log(1e3), math.log(n0) + math.log(1e3)
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = loss(x1), loss(x2)
    for _ in range(200):
        if hi - lo < 1e-9:
            break
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - ratio * (hi - lo)
            f1 = loss(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + ratio * (hi - lo)
            f2 = loss(x2)
    return math.exp((lo + hi) / 2.0)


@dataclass(frozen=True)
class Recipe:
    """A full training recipe with intervals, provenance and warnings.

    ``batch_tokens.value`` is the batch actually used (``global_batch_sequences · seq_len``), its
    ``low``/``high`` the law's interval; ``batch_tokens_law`` the law's point value. The batch
    identity ``global_batch_sequences = micro_batch_size · grad_accum_steps · data_parallel``
    always holds. ``total_steps`` counts optimizer steps at the full batch (a ramp-up, run by
    samples, adds a few). LRs are peak/min AdamW LRs; memory in GiB per GPU; time in seconds.
    """

    lr: Interval
    batch_tokens: Interval
    batch_tokens_law: float
    global_batch_sequences: int
    micro_batch_size: int
    grad_accum_steps: int
    data_parallel: int
    seq_len: int
    min_lr: float
    min_lr_ratio: float
    warmup_steps: int
    total_steps: int
    tokens: float
    schedule: str
    rampup: RampUp | None
    adam_beta1: float
    adam_beta2: float
    adam_eps: float
    weight_decay: float
    grad_clip: float
    init_std: float
    z_loss: float
    n_params: float
    n_params_total: float
    width: int
    depth: int
    heads: int
    vocab: int
    shape_inferred: bool
    flops: float
    parametrization: str
    base_width: int | None
    base_depth: int | None
    precision: str
    memory: MemoryEstimate
    train_time_s: float | None
    predicted_loss: float | None
    extrapolation_factor: float | None
    extrapolation: Mapping[str, float]
    warnings: tuple[str, ...]
    law_ids: tuple[int | str, ...]
    provenance: Mapping[str, Mapping[str, Any]]
    target: Target
    hardware: Hardware
    level: float = 0.95
    init_std_note: str = ""  # what init_std is: the SP heuristic, or the proxies' muP base std
    bytes_per_token: float | None = None  # the conversion applied to laws that count bytes

    def __post_init__(self) -> None:
        unit = self.micro_batch_size * self.grad_accum_steps * self.data_parallel
        if unit != self.global_batch_sequences:
            raise TargetError(
                f"global batch {self.global_batch_sequences} != micro_batch_size "
                f"{self.micro_batch_size} × grad_accum_steps {self.grad_accum_steps} × "
                f"data_parallel {self.data_parallel} = {unit}"
            )

    @property
    def warmup_tokens(self) -> int:
        return self.warmup_steps * self.global_batch_sequences * self.seq_len

    @property
    def memory_gb_per_gpu(self) -> float:
        return self.memory.total_gb

    @property
    def hidden_init_std(self) -> float:
        """Init std of the hidden matrices at the target width: ``init_std`` under SP, and
        init_std·sqrt(base_width / width) under muP/CompleteP (embeddings keep ``init_std``)."""
        if self.parametrization == "sp" or not self.base_width:
            return self.init_std
        return self.init_std * math.sqrt(self.base_width / self.width)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, one key per field (plus ``memory_gb_per_gpu``, ``warmup_tokens`` and
        ``hidden_init_std``);
        :func:`recipe_from_dict` reads it back."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (Interval, MemoryEstimate)):
                v = v.to_dict()
            elif isinstance(v, RampUp):
                v = v.to_dict(self.global_batch_sequences)
            elif isinstance(v, (Target, Hardware)):
                v = asdict(v)
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = {k: dict(x) if isinstance(x, Mapping) else x for k, x in v.items()}
            out[f.name] = v
        out["memory_gb_per_gpu"] = self.memory_gb_per_gpu
        out["warmup_tokens"] = self.warmup_tokens
        out["hidden_init_std"] = self.hidden_init_std
        return out


def _pick(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def recipe_from_dict(d: Mapping[str, Any]) -> Recipe:
    """Inverse of :meth:`Recipe.to_dict` (a saved ``--json`` recipe). TargetError when a key is
    missing, a value malformed, or the batch identity broken."""
    kw: dict[str, Any] = {}
    missing = []
    for f in fields(Recipe):
        if f.name not in d:
            if f.default is MISSING:
                missing.append(f.name)
            continue
        v = d[f.name]
        try:
            if f.name in ("lr", "batch_tokens"):
                v = Interval(**_pick(Interval, v))
            elif f.name == "rampup":
                v = RampUp(**_pick(RampUp, v)) if v else None
            elif f.name == "memory":
                v = MemoryEstimate(**_pick(MemoryEstimate, v))
            elif f.name in ("target", "hardware"):
                v = (Target if f.name == "target" else Hardware)(**v)
            elif f.name in ("warnings", "law_ids"):
                v = tuple(v)
        except TypeError as e:
            raise TargetError(f"recipe JSON: malformed {f.name!r}: {e}") from None
        kw[f.name] = v
    if missing:
        raise TargetError(f"recipe JSON lacks {', '.join(missing)}")
    return Recipe(**kw)


def _rampup(
    global_batch: int, unit: int, tokens: float, seq_len: int, dflt: RecipeDefaults
) -> RampUp | None:
    """Megatron-style ramp-up: about ``rampup_increments`` equal increments (multiples of
    ``unit``) from about ``rampup_start_fraction`` of the batch, over ``rampup_token_fraction``
    of the tokens. None when the batch is too small to split."""
    target_start = global_batch * dflt.rampup_start_fraction
    inc = unit * max(1, round((global_batch - target_start) / (dflt.rampup_increments * unit)))
    k = min(max(1, round((global_batch - target_start) / inc)), (global_batch - unit) // inc)
    ramp_samples = round(tokens * dflt.rampup_token_fraction / seq_len)
    if k < 1 or ramp_samples < 1:
        return None
    return RampUp(
        start_sequences=global_batch - k * inc,
        increment_sequences=inc,
        ramp_samples=ramp_samples,
        ramp_tokens=ramp_samples * seq_len,
    )


def extrapolation_summary(
    used: list[tuple[str, Law, Mapping[str, float]]], warnings: list[str]
) -> tuple[float | None, dict[str, float]]:
    """Largest ratio of target to largest proxy per predictor over the laws used, and warnings."""
    ext: dict[str, float] = {}
    for role, law, scale in used:
        if not law.domain:
            warnings.append(
                f"{role} law ({law_label(law)}) records no domain: extrapolation unknown"
            )
            continue
        own = {k: scale[k] for k in law.predictors if k in scale}
        for p, r in law.extrapolation(own).items():
            ext[p] = max(ext.get(p, 0.0), r)
        for p, (lo, _hi) in law.domain.items():
            if p in own and lo > 0 and own[p] < lo / FAR_FACTOR:
                warnings.append(
                    f"{role} law ({law_label(law)}): target {p}={own[p]:.3g} is more than "
                    f"{FAR_FACTOR:.0f}× below the smallest proxy ({lo:.3g})"
                )
    if not ext:
        return None, ext
    factor = max(ext.values())
    detail = ", ".join(f"{k} {v:.3g}×" for k, v in sorted(ext.items()))
    if factor >= VERY_FAR_FACTOR:
        warnings.append(
            f"very far extrapolation: {factor:.3g}× beyond the largest proxy ({detail}); at "
            f"≥{VERY_FAR_FACTOR:.0f}× a small error in an exponent becomes a large error in the "
            "value: confirm the LR with a short run at the target"
        )
    elif factor >= FAR_FACTOR:
        warnings.append(f"far extrapolation: {factor:.3g}× beyond the largest proxy ({detail})")
    return factor, ext


@dataclass(frozen=True)
class _Model:
    """The target resolved to numbers: N, D, shape, sequence length, total parameters."""

    n_params: float
    tokens: float
    width: int
    depth: int
    heads: int
    vocab: int
    seq_len: int
    shape_given: bool

    @property
    def n_params_total(self) -> float:
        return self.n_params + 2.0 * self.vocab * self.width  # untied input embedding and head


def _resolve_model(
    target: Target,
    hw: Hardware,
    loss_law: LossLaw | None,
    loss_factor: float,
    warnings: list[str],
) -> _Model:
    """N, D, shape and sequence length of the target; ``loss_factor`` is the loss law's token
    units per target token (its D is converted at this boundary)."""
    seq_len = hw.seq_len or target.context or DEFAULT_SEQ_LEN
    if hw.seq_len is None and target.context is None:
        warnings.append(f"no sequence length given: assumed {DEFAULT_SEQ_LEN}")
    n_params, tokens = target.n_params, target.tokens
    if not target.has_model:
        if loss_law is None:
            raise TargetError("compute alone needs a loss law to choose N and D; give n_params")
        assert target.compute is not None
        n_params = _compute_optimal_n(loss_law, target.compute, seq_len, loss_factor)
        warnings.append(
            f"N = {n_params:.3g} is the loss law's compute optimum at C = {target.compute:.3g} "
            "FLOPs (6·N·D + attention; the loss law's own optimum is defined at C = 6·N·D)"
        )
    shape_given = target.width is not None and target.depth is not None
    if target.width is not None and target.depth is not None:
        width, depth = target.width, target.depth
        n_params = n_params or 12.0 * depth * width**2
    else:
        assert n_params is not None
        width, depth = infer_shape(n_params)
        warnings.append(infer_shape_warning(width, depth))
    vocab = target.vocab or DEFAULT_VOCAB
    if target.vocab is None:
        warnings.append(f"no vocab given: assumed {DEFAULT_VOCAB} for embedding memory")
    if tokens is None:
        if target.tokens_per_param is not None:
            tokens = target.tokens_per_param * n_params
        elif target.compute is not None:
            # Sweeper's compute, attention included, with the given or inferred shape: the
            # recipe's flops then equal the target's compute
            per_token = train_flops(n_params, 1.0, depth=depth, width=width, seq_len=seq_len)
            tokens = target.compute / per_token
        elif loss_law is not None:
            tokens = _compute_optimal_tokens(loss_law, n_params) / loss_factor
            warnings.append(
                f"D = {tokens:.3g} tokens ({tokens / n_params:.1f} per parameter) is the loss "
                "law's compute-optimal budget for this N"
            )
        else:
            raise TargetError(
                "give tokens, compute or tokens_per_param (no loss law to choose a compute-optimal D)"
            )
    return _Model(
        n_params=float(n_params),
        tokens=float(tokens),
        width=width,
        depth=depth,
        heads=target.heads or _default_heads(width),
        vocab=vocab,
        seq_len=seq_len,
        shape_given=shape_given,
    )


def _resolve_base(
    lr_law: Law, batch_law: Law | None, target: Target, force: bool, warnings: list[str]
) -> tuple[int | None, int | None]:
    """Check parametrizations; the base width/depth of a muP/CompleteP recipe (None for SP)."""
    base_width, base_depth = check_parametrization(
        lr_law, "lr", target.parametrization, force=force, warnings=warnings
    )
    if batch_law is not None:
        bw, bd = check_parametrization(
            batch_law, "batch", target.parametrization, force=force, warnings=warnings
        )
        base_width, base_depth = base_width or bw, base_depth or bd
    if target.parametrization == "sp":
        return None, None
    if target.base_width and base_width and target.base_width != base_width:
        msg = (
            f"target base_width {target.base_width} differs from the law's base width "
            f"{base_width}: the LR transfers relative to the law's base"
        )
        if not force:
            raise TargetError(msg)
        warnings.append(msg + " (forced)")
    base_width = target.base_width or base_width
    if base_width is None:
        raise TargetError(
            f"a {target.parametrization} target needs a base width (none on the target or the law)"
        )
    return base_width, target.base_depth or base_depth


def _evaluate(
    law: Law, role: str, scale: Mapping[str, float], seq_len: int, level: float, factor: float = 1.0
) -> tuple[float, tuple[float, float]]:
    """The law's value and interval at ``scale``; a batch comes back in target tokens (a law in
    sequences is multiplied by ``seq_len``, one in bytes divided by ``factor``)."""
    try:
        value = law.predict(scale)
        low, high = law.interval(scale, level)
    except (KeyError, ValueError) as e:
        raise TargetError(f"{role} law ({law_label(law)}) cannot be evaluated: {e}") from None
    if not (math.isfinite(value) and value > 0):
        at = ", ".join(f"{k}={scale[k]:.3g}" for k in law.predictors)
        raise TargetError(
            f"{role} law ({law_label(law)}) predicts {value:.3g} at the target ({at}): outside its range"
        )
    if role == "batch":
        unit = seq_len if (law.conventions or {}).get("batch") == "sequences" else 1.0 / factor
        return value * unit, (low * unit, high * unit)
    return value, (low, high)


def _memory(m: _Model, hw: Hardware, micro: int) -> MemoryEstimate:
    return estimate_memory(
        n_params_total=m.n_params_total,
        seq_len=m.seq_len,
        width=m.width,
        depth=m.depth,
        heads=m.heads,
        vocab=m.vocab,
        micro_batch=micro,
        precision=hw.precision,
        data_parallel=hw.gpus,
        zero_stage=hw.zero_stage,
        flash_attention=hw.flash_attention,
        recompute=hw.recompute,
        gpu_memory_gb=hw.gpu_memory_gb,
    )


#: a global batch within this relative distance of the law's counts as exact when sizing micro
_BATCH_TOLERANCE: Final[float] = 0.02


def _choose_batch(
    b_law: float, m: _Model, hw: Hardware, global_batch: int | None, warnings: list[str]
) -> tuple[int, int]:
    """(micro batch, global batch in sequences) with global a multiple of micro × GPUs.

    A micro batch given by the hardware is kept. Otherwise, among micro batches that fit in memory
    (and no larger than the per-GPU share of the batch), the largest whose rounded global batch is
    within 2% of the law's, else the one that rounds closest; with a fixed ``global_batch``, the
    largest that divides it. No GPU memory given: micro batch 1.
    """
    want = global_batch if global_batch is not None else b_law / m.seq_len
    dp = hw.gpus
    if hw.micro_batch is not None:
        micro = hw.micro_batch
    elif hw.gpu_memory_gb is None:
        micro = 1
        warnings.append("no GPU memory given: micro batch 1 (give gpu_memory_gb to size it)")
    else:
        fit = _memory(m, hw, 1).max_micro_batch or 0
        sizes = range(1, max(1, min(fit, math.floor(want / dp))) + 1)

        def err(mb: int) -> float:
            return abs(math.log(round_global_batch(want, mb * dp) / want))

        if global_batch is not None:
            good = [mb for mb in sizes if global_batch % (mb * dp) == 0]
        else:
            good = [mb for mb in sizes if err(mb) <= _BATCH_TOLERANCE]
        micro = max(good) if good else min(sizes, key=err)
    unit = micro * dp
    if global_batch is not None:
        if global_batch % unit:
            raise TargetError(
                f"global batch {global_batch} is not a multiple of micro_batch {micro} × "
                f"gpus {dp} = {unit}"
            )
        return micro, global_batch
    gbs = round_global_batch(want, unit)
    if gbs > 2.0 * want:
        warnings.append(
            f"micro batch {micro} × {dp} GPUs = {unit} sequences is {gbs / want:.1f}× the law's "
            "batch: use fewer data-parallel GPUs or a smaller micro batch"
        )
    return micro, gbs


def _float(text: str | None) -> float | None:
    try:
        v = float(text) if text is not None else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


def _warmup_text(fraction_or_steps: float) -> str:
    if fraction_or_steps < 1.0:
        return f"warmup {fraction_or_steps:.0%} of steps"
    return f"warmup {fraction_or_steps:.0f} proxy steps"


def schedule_warnings(
    lr_law: Law,
    *,
    schedule: str,
    min_lr_ratio: float,
    warmup_steps: int,
    total_steps: int,
    z_loss: float,
) -> list[str]:
    """A warning when the recipe's schedule, min LR, warmup or z-loss differ from those the LR law
    was measured under (``conventions`` keys ``schedule``, ``min_lr_ratio``, ``warmup``, ``z_loss``
    of a launched sweep; older laws only have the text of ``conventions["lr"]``). A warmup counts
    as the same within a factor 1.5 of the recipe's fraction of steps."""
    conv = lr_law.conventions or {}
    name = f"lr law ({law_label(lr_law)})"
    if "schedule" not in conv:
        text = conv.get("lr", "")
        if text and f"cosine to {min_lr_ratio:.0%}" not in text:
            # the optimum peak LR depends on the schedule it was measured under
            return [
                f"the LR of the {name} was measured as '{text}'; this recipe runs warmup + "
                f"{schedule} to {min_lr_ratio:.0%}"
            ]
        return []
    law_side, recipe_side = [], []
    if conv["schedule"] != schedule:
        law_side.append(f"a {conv['schedule']} schedule")
        recipe_side.append(f"{schedule}")
    ratio = _float(conv.get("min_lr_ratio"))
    if ratio is not None and abs(ratio - min_lr_ratio) > 1e-9 and conv["schedule"] != "constant":
        law_side.append(f"decay to {ratio:.0%} of peak")
        recipe_side.append(f"decay to {min_lr_ratio:.0%}")
    warm = conv.get("warmup")
    recipe_frac = warmup_steps / max(1, total_steps)
    recipe_warm = f"warmup {warmup_steps} steps ({recipe_frac:.1%})"
    if warm == "searched":
        law_side.append("its best searched warmup")
        recipe_side.append(recipe_warm)
    elif (w := _float(warm)) is not None and (w >= 1.0 or not (w / 1.5 <= recipe_frac <= w * 1.5)):
        law_side.append(_warmup_text(w))
        recipe_side.append(recipe_warm)
    z = _float(conv.get("z_loss"))
    if z is not None and abs(z - z_loss) > 1e-12:
        law_side.append(f"z-loss {z:g}")
        recipe_side.append(f"z-loss {z_loss:g}")
    if not law_side:
        return []
    return [
        f"the LR of the {name} was measured with {', '.join(law_side)}; this recipe uses "
        f"{', '.join(recipe_side)}: the optimal peak LR depends on them (match them, or confirm "
        "the LR with a short run)"
    ]


def _init_std(
    lr_law: Law,
    parametrization: str,
    base_width: int | None,
    base_depth: int | None,
    m: _Model,
    warnings: list[str],
) -> tuple[float, str]:
    """(init std, what it means). SP: the small-init heuristic at the target width. muP and
    CompleteP: the proxies' std at the base width (``conventions["init_std"]``), which transfers
    with the LR; hidden matrices scale it by sqrt(base_width / width)."""
    if parametrization == "sp" or base_width is None:
        return math.sqrt(2.0 / (5.0 * m.width)), "sqrt(2/(5·d)), small init (Nguyen & Salazar 2019)"
    std = _float((lr_law.conventions or {}).get("init_std"))
    if std is None or std <= 0:
        std = math.sqrt(2.0 / (5.0 * base_width))
        warnings.append(
            f"lr law ({law_label(lr_law)}) records no init std: the recipe's {std:.4g} is "
            f"sqrt(2/(5·{base_width})), not the proxies' own; under {parametrization} the init "
            "transfers with the LR, so use the std the proxies were trained with"
        )
        how = f"sqrt(2/(5·base width {base_width})), the proxies' std unknown"
    else:
        how = f"the proxies' init std at base width {base_width}"
    hidden = std * math.sqrt(base_width / m.width)
    depth = base_depth if parametrization == "completep" and base_depth else m.depth
    how += (
        f": embeddings and lm_head {std:.4g}; hidden matrices {std:.4g}·sqrt({base_width}/"
        f"{m.width}) = {hidden:.4g}, the residual output projections also ÷ sqrt(2·{depth})"
    )
    return std, how


def recommend(
    laws: Mapping[str, Law],
    target: Target,
    hardware: Hardware | None = None,
    *,
    loss_law: LossLaw | None = None,
    defaults: RecipeDefaults | None = None,
    global_batch: int | None = None,
    rampup: bool | None = None,
    force: bool = False,
    level: float = 0.95,
    bytes_per_token: float | None = None,
) -> Recipe:
    """The recipe for ``target`` from ``laws`` (keyed by target: "lr" required, "batch_tokens"
    optional: without it Step Law's batch law B = 0.58·D^0.571 is used, named in the provenance
    and the warnings). Pure: no I/O.

    ``loss_law`` chooses D (or N and D) when the target leaves it open and gives the predicted
    loss. ``global_batch`` fixes the global batch in sequences instead of the law's (a multiple of
    micro batch × GPUs); ``rampup`` forces the batch ramp-up on or off (None: the rule of
    :class:`RecipeDefaults`); ``force`` lets a law of another parametrization through, with a
    warning. ``bytes_per_token`` converts D and the batch of laws that count bytes into the
    target's tokens (None: no conversion, and a warning). Raises :class:`TargetError` when the
    laws cannot serve the target.
    """
    hw = hardware or Hardware()
    dflt = defaults or RecipeDefaults()
    warnings: list[str] = []
    if not 0.0 < level < 1.0:
        raise TargetError(f"level must be in (0, 1), got {level}")
    if bytes_per_token is not None and not (math.isfinite(bytes_per_token) and bytes_per_token > 0):
        raise TargetError(f"bytes_per_token must be positive, got {bytes_per_token}")
    if "lr" not in laws:
        raise TargetError(f"no lr law given (got {', '.join(sorted(laws)) or 'none'})")
    if global_batch is not None and global_batch < 1:
        raise TargetError(f"global batch must be a positive integer, got {global_batch}")
    lr_law, given_batch_law = laws["lr"], laws.get("batch_tokens")
    base_width, base_depth = _resolve_base(lr_law, given_batch_law, target, force, warnings)
    batch_law = given_batch_law
    if batch_law is None:
        from sweeper.published import published_laws

        batch_law = published_laws("steplaw")["batch_tokens"]
    measured = [("lr", lr_law)]
    if given_batch_law is not None:
        measured.append(("batch", given_batch_law))
    if loss_law is not None:
        measured.append(("loss", loss_law))
    warnings += token_unit_warnings(
        measured, vocab=target.vocab, bytes_per_token=bytes_per_token, what="the target"
    )
    lr_f, b_f = token_factor(lr_law, bytes_per_token), token_factor(batch_law, bytes_per_token)
    loss_f = token_factor(loss_law, bytes_per_token) if loss_law is not None else 1.0
    m = _resolve_model(target, hw, loss_law, loss_f, warnings)

    def scale_for(law: Law) -> dict[str, float]:
        return law_scale(
            law,
            n_params=m.n_params,
            tokens=m.tokens,
            width=m.width,
            depth=m.depth,
            seq_len=m.seq_len,
            shape_given=m.shape_given,
            n_params_total=m.n_params_total,
            bytes_per_token=bytes_per_token,
        )

    lr_scale, b_scale = scale_for(lr_law), scale_for(batch_law)
    lr, lr_iv = _evaluate(lr_law, "lr", lr_scale, m.seq_len, level)
    b_law, b_iv = _evaluate(batch_law, "batch", b_scale, m.seq_len, level, b_f)
    if given_batch_law is None:
        msg = (
            f"no batch law with {law_label(lr_law)}: using Step Law's B = 0.58·D^0.571 tokens "
            f"(arXiv:2503.04715) as the fallback, {b_law:.3g} tokens at the target"
        )
        span = held_span(lr_law, "batch_tokens")
        if span is not None:
            unit = "bytes" if (lr_law.conventions or {}).get("tokens") == "bytes" else "tokens"
            msg += f"; the lr law's optimum was measured at a batch of {span} {unit}"
        warnings.append(msg)
    warnings += _quality_warnings(lr_law, "lr", lr_iv)
    warnings += flops_convention_warnings(lr_law, "lr")
    if given_batch_law is not None:
        warnings += _quality_warnings(given_batch_law, "batch", b_iv)
        warnings += flops_convention_warnings(given_batch_law, "batch")

    micro, gbs = _choose_batch(b_law, m, hw, global_batch, warnings)
    batch_used = gbs * m.seq_len
    if b_iv[0] != b_iv[1] and not b_iv[0] <= batch_used <= b_iv[1]:
        warnings.append(
            f"global batch {batch_used:.3g} tokens lies outside the law's interval "
            f"[{b_iv[0]:.3g}, {b_iv[1]:.3g}]"
        )
    if m.tokens < batch_used:
        raise TargetError(
            f"tokens={m.tokens:.3g} is less than one optimizer step of {batch_used} tokens "
            f"({gbs} sequences × {m.seq_len})"
        )
    for role, law, f in (("lr", lr_law, lr_f), ("batch", given_batch_law, b_f)):
        if law is not None:
            warnings += regime_warnings(
                law, role, regime_values(m.n_params, m.tokens, batch_used, f)
            )
    total_steps = math.ceil(m.tokens / batch_used)
    memory = _memory(m, hw, micro)
    if memory.fits is False:
        if memory.max_micro_batch:
            warnings.append(
                f"micro batch {micro} needs {memory.total_gb:.1f} GiB per GPU: the largest that "
                f"fits is {memory.max_micro_batch}"
            )
        else:
            warnings.append(
                f"does not fit at micro batch 1 ({memory.total_gb:.1f} GiB per GPU > "
                f"{hw.gpu_memory_gb:g} GiB less {memory.reserve_fraction:.0%} reserve): use ZeRO "
                "sharding, activation recomputation or tensor/pipeline parallelism"
            )
    warmup = min(
        total_steps, max(1, min(dflt.max_warmup_steps, round(dflt.warmup_fraction * total_steps)))
    )
    warnings += schedule_warnings(
        lr_law,
        schedule="cosine",
        min_lr_ratio=dflt.min_lr_ratio,
        warmup_steps=warmup,
        total_steps=total_steps,
        z_loss=dflt.z_loss,
    )
    ramp = None
    if rampup or (rampup is None and gbs >= dflt.rampup_min_sequences):
        ramp = _rampup(gbs, micro * hw.gpus, m.tokens, m.seq_len, dflt)
    if m.width > 8192 and dflt.adam_eps >= 1e-8:
        warnings.append(
            f"width {m.width}: consider a smaller Adam eps (1e-15, Wortsman et al. 2023) or Adam-atan2"
        )
    init_std, init_note = _init_std(
        lr_law, target.parametrization, base_width, base_depth, m, warnings
    )
    flops = train_flops(m.n_params, m.tokens, depth=m.depth, width=m.width, seq_len=m.seq_len)
    time_s = None
    if hw.peak_tflops:
        time_s = train_time_s(flops, gpus=hw.gpus, peak_tflops=hw.peak_tflops, mfu=hw.mfu)

    used: list[tuple[str, Law, Mapping[str, float]]] = [("lr", lr_law, lr_scale)]
    if given_batch_law is not None:
        used.append(("batch", given_batch_law, b_scale))
    factor, ext = extrapolation_summary(used, warnings)
    provenance: dict[str, Mapping[str, Any]] = {
        "lr": _provenance(lr_law),
        "batch_tokens": _provenance(batch_law, fallback=given_batch_law is None),
    }
    law_ids: list[int | str] = [_law_id(lr_law), _law_id(batch_law)]
    predicted_loss = None
    if loss_law is not None:
        provenance["loss"] = _provenance(loss_law)
        law_ids.append(_law_id(loss_law))
        predicted_loss = float(
            loss_law.predict({"n_params": m.n_params, "tokens": m.tokens * loss_f})
        )
        if (loss_law.conventions or {}).get("tokens") == "bytes" and target.vocab != _BYTE_VOCAB:
            warnings.append(
                f"the predicted loss is the loss law's, in nats per byte ({law_label(loss_law)} "
                "was fitted on byte-level data)"
            )
    return Recipe(
        lr=Interval(lr, *lr_iv),
        batch_tokens=Interval(float(batch_used), *b_iv),
        batch_tokens_law=b_law,
        global_batch_sequences=gbs,
        micro_batch_size=micro,
        grad_accum_steps=gbs // (micro * hw.gpus),
        data_parallel=hw.gpus,
        seq_len=m.seq_len,
        min_lr=dflt.min_lr_ratio * lr,
        min_lr_ratio=dflt.min_lr_ratio,
        warmup_steps=warmup,
        total_steps=total_steps,
        tokens=m.tokens,
        schedule="cosine",
        rampup=ramp,
        adam_beta1=dflt.adam_beta1,
        adam_beta2=dflt.adam_beta2,
        adam_eps=dflt.adam_eps,
        weight_decay=dflt.weight_decay,
        grad_clip=dflt.grad_clip,
        init_std=init_std,
        z_loss=dflt.z_loss,
        n_params=m.n_params,
        n_params_total=m.n_params_total,
        width=m.width,
        depth=m.depth,
        heads=m.heads,
        vocab=m.vocab,
        shape_inferred=not m.shape_given,
        flops=flops,
        parametrization=target.parametrization,
        base_width=base_width,
        base_depth=base_depth,
        precision=hw.precision,
        memory=memory,
        train_time_s=time_s,
        predicted_loss=predicted_loss,
        extrapolation_factor=factor,
        extrapolation=ext,
        warnings=tuple(warnings),
        law_ids=tuple(law_ids),
        provenance=provenance,
        target=target,
        hardware=hw,
        level=level,
        init_std_note=init_note,
        bytes_per_token=bytes_per_token,
    )

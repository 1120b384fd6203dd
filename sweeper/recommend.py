"""From fitted laws to a full training recipe for one target model, with intervals and provenance.

``recommend(laws, target, hardware)`` is pure: it evaluates the LR and batch laws at the target's
scale (in each law's own conventions), turns the batch into a global batch in sequences that the
hardware can run, adds the schedule and optimizer settings that the laws do not measure (each a
documented default, see :class:`RecipeDefaults`), estimates memory and time, and says how far the
laws are being extrapolated and what else to distrust.

Scale passed to a law (see :mod:`sweeper.laws` for the predictor names):

- ``n_params``: non-embedding N (the target's, or 12·L·d² from its shape); a law whose
  ``conventions["n_params"]`` is ``"total"`` gets N plus the embeddings instead.
- ``tokens``: D; ``width``, ``depth``: d_model and layers.
- ``flops`` by ``conventions["flops"]``: ``"6ND"`` is 6·N·D, plus 6·L·T·d·D when the user gave the
  shape (Kaplan's attention term; T = training sequence length); ``"M*D"`` is DeepSeek's M·D with
  M = 72·L·d² + 12·L·d·T (or 6·N + 12·L·d·T when only N was given).

When the target is given as N alone, the shape is inferred for memory, attention FLOPs and M with
d_model ≈ 128 · layers (the aspect ratio of GPT-3 6.7B and LLaMA-7B, 4096/32; Kaplan et al. 2020
§3.1 found the loss within a few percent over aspect ratios 20–200), d rounded to a multiple of 64,
and a warning says so.
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
    "PARAMETRIZATIONS",
    "Hardware",
    "Interval",
    "RampUp",
    "Recipe",
    "RecipeDefaults",
    "Target",
    "check_parametrization",
    "extrapolation_summary",
    "infer_shape",
    "law_label",
    "law_scale",
    "recipe_from_dict",
    "recommend",
    "round_global_batch",
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


def _positive(name: str, v: float | None, problems: list[str]) -> None:
    if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        problems.append(f"{name} must be positive, got {name}={v}")


@dataclass(frozen=True)
class Target:
    """The model and budget to recommend for.

    Model: ``n_params`` (non-embedding N) and/or the shape ``width`` (d_model) and ``depth``
    (layers), with optional ``heads``, ``vocab`` and ``context`` (sequence length T). Budget: one of
    ``tokens`` (D), ``compute`` (training FLOPs counted as 6·N·D plus attention, Sweeper's "6ND"
    convention) or ``tokens_per_param`` (D = R·N); none of them means "the compute-optimal D from
    the loss law". With ``compute`` and no model, N and D both come from the loss law.
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
) -> dict[str, float]:
    """The predictor values for ``law`` at the target, in the law's conventions (module doc)."""
    conv = law.conventions or {}
    n = n_params_total if conv.get("n_params") == "total" and n_params_total else n_params
    scale = {"n_params": n, "tokens": tokens, "width": float(width), "depth": float(depth)}
    if conv.get("flops") == "M*D":
        if shape_given:
            m = 72.0 * depth * width**2 + 12.0 * depth * width * seq_len
        else:
            m = 6.0 * n_params + 12.0 * depth * width * seq_len
        scale["flops"] = m * tokens
    elif shape_given:
        scale["flops"] = train_flops(n_params, tokens, depth=depth, width=width, seq_len=seq_len)
    else:
        scale["flops"] = 6.0 * n_params * tokens
    return scale


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


def _compute_optimal_tokens(loss_law: LossLaw, n_params: float) -> float:
    """D such that N is the loss law's compute-optimal N at C = 6·N·D."""
    a, b = loss_law.alpha, loss_law.beta
    if not (a > 0 and b > 0 and loss_law.A > 0 and loss_law.B > 0):
        raise TargetError(
            f"loss law ({law_label(loss_law)}) has no compute optimum: "
            f"A={loss_law.A}, B={loss_law.B}, alpha={a}, beta={b}"
        )
    g = ((a * loss_law.A) / (b * loss_law.B)) ** (1.0 / (a + b))
    c_over_6 = (n_params / g) ** ((a + b) / b)
    return c_over_6 / n_params


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, one key per field (plus ``memory_gb_per_gpu`` and ``warmup_tokens``);
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
    target: Target, hw: Hardware, loss_law: LossLaw | None, warnings: list[str]
) -> _Model:
    seq_len = hw.seq_len or target.context or DEFAULT_SEQ_LEN
    if hw.seq_len is None and target.context is None:
        warnings.append(f"no sequence length given: assumed {DEFAULT_SEQ_LEN}")
    n_params, tokens = target.n_params, target.tokens
    if not target.has_model:
        if loss_law is None:
            raise TargetError("compute alone needs a loss law to choose N and D; give n_params")
        assert target.compute is not None
        n_params, tokens = loss_law.compute_optimal(target.compute)
        warnings.append(
            f"N = {n_params:.3g} and D = {tokens:.3g} are the loss law's compute optimum at "
            f"C = {target.compute:.3g}"
        )
    shape_given = target.width is not None and target.depth is not None
    if target.width is not None and target.depth is not None:
        width, depth = target.width, target.depth
        n_params = n_params or 12.0 * depth * width**2
    else:
        assert n_params is not None
        width, depth = infer_shape(n_params)
        warnings.append(
            f"shape inferred from N: {depth} layers × d_model {width} (d ≈ {ASPECT_RATIO}·L); "
            "give width and depth for exact memory and FLOPs"
        )
    vocab = target.vocab or DEFAULT_VOCAB
    if target.vocab is None:
        warnings.append(f"no vocab given: assumed {DEFAULT_VOCAB} for embedding memory")
    if tokens is None:
        if target.tokens_per_param is not None:
            tokens = target.tokens_per_param * n_params
        elif target.compute is not None:
            per_token = train_flops(
                n_params, 1.0, depth=depth if shape_given else None, width=width, seq_len=seq_len
            )
            tokens = target.compute / per_token
        elif loss_law is not None:
            tokens = _compute_optimal_tokens(loss_law, n_params)
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
    law: Law, role: str, scale: Mapping[str, float], seq_len: int, level: float
) -> tuple[float, tuple[float, float]]:
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
    if (law.conventions or {}).get("batch") == "sequences":
        return value * seq_len, (low * seq_len, high * seq_len)
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
) -> Recipe:
    """The recipe for ``target`` from ``laws`` (keyed by target: "lr" required, "batch_tokens"
    optional: without it Step Law's batch law B = 0.58·D^0.571 is used, named in the provenance
    and the warnings). Pure: no I/O.

    ``loss_law`` chooses D (or N and D) when the target leaves it open and gives the predicted
    loss. ``global_batch`` fixes the global batch in sequences instead of the law's (a multiple of
    micro batch × GPUs); ``rampup`` forces the batch ramp-up on or off (None: the rule of
    :class:`RecipeDefaults`); ``force`` lets a law of another parametrization through, with a
    warning. Raises :class:`TargetError` when the laws cannot serve the target.
    """
    hw = hardware or Hardware()
    dflt = defaults or RecipeDefaults()
    warnings: list[str] = []
    if not 0.0 < level < 1.0:
        raise TargetError(f"level must be in (0, 1), got {level}")
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
        warnings.append(
            f"no batch law with {law_label(lr_law)}: using Step Law's B = 0.58·D^0.571 tokens "
            "(arXiv:2503.04715) as the fallback"
        )
    m = _resolve_model(target, hw, loss_law, warnings)

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
        )

    lr_scale, b_scale = scale_for(lr_law), scale_for(batch_law)
    lr, lr_iv = _evaluate(lr_law, "lr", lr_scale, m.seq_len, level)
    b_law, b_iv = _evaluate(batch_law, "batch", b_scale, m.seq_len, level)
    warnings += _quality_warnings(lr_law, "lr", lr_iv)
    if given_batch_law is not None:
        warnings += _quality_warnings(given_batch_law, "batch", b_iv)
    lr_conv = (lr_law.conventions or {}).get("lr", "")
    if lr_conv and "cosine to 10%" not in lr_conv:
        # the optimum peak LR depends on the schedule it was measured under
        warnings.append(
            f"the lr law's LR was measured as '{lr_conv}'; this recipe runs warmup + cosine to "
            f"{dflt.min_lr_ratio:.0%}"
        )

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
    ramp = None
    if rampup or (rampup is None and gbs >= dflt.rampup_min_sequences):
        ramp = _rampup(gbs, micro * hw.gpus, m.tokens, m.seq_len, dflt)
    if m.width > 8192 and dflt.adam_eps >= 1e-8:
        warnings.append(
            f"width {m.width}: consider a smaller Adam eps (1e-15, Wortsman et al. 2023) or Adam-atan2"
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
        predicted_loss = float(loss_law.predict({"n_params": m.n_params, "tokens": m.tokens}))
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
        init_std=math.sqrt(2.0 / (5.0 * (base_width or m.width))),
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
    )

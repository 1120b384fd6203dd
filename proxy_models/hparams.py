"""Optimizer and schedule hyperparameters of one run, and the learning-rate schedule.

Units: ``lr`` is the peak learning rate of the base-width parameters (what it means per optimizer:
:data:`LR_MEANINGS`); ``batch_size`` and ``micro_batch_size`` are in sequences (of
``ProxyConfig.context`` tokens); a batch ramp's ``tokens_per_increment`` is in tokens. Steps are
optimizer steps, counted from 0.

Weight decay is either the coefficient λ (``weight_decay``) or the AdamW timescale of Power Lines
(Bergsma et al. 2025), ``weight_decay_tau`` = τ = B/(η·λ·D): the EMA timescale of the weights as a
fraction of training, which transfers across scale where λ does not. With B/D = 1/S (S optimizer
steps), λ = 1/(η·τ·S) for each run (:func:`weight_decay_of`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = [
    "LR_MEANINGS",
    "OPTIMIZERS",
    "SCHEDULES",
    "BatchRamp",
    "HParams",
    "batch_sizes",
    "decay_of_timescale",
    "lr_at",
    "warmup_steps",
    "weight_decay_of",
    "wsd_decay_start",
]

#: learning-rate schedules (each after a linear warmup); "linear" decays linearly to
#: ``min_lr_ratio`` (linear-to-zero with ``min_lr_ratio = 0``)
SCHEDULES: tuple[str, ...] = ("cosine", "wsd", "constant", "linear")
#: optimizers (torch's own implementations)
OPTIMIZERS: tuple[str, ...] = ("adamw", "muon", "adafactor", "sgd")
#: what the searched ``lr`` means under each optimizer (an LR law is a law of this meaning; the
#: text is stored with each law's conventions, so a law stored before a wording changed keeps its
#: old words: until 2026-11-29 Adafactor's read "peak torch.optim.Adafactor LR (its lr, no relative
#: step)", a misreading of the same optimizer's same lr, which was always the relative step below)
LR_MEANINGS: dict[str, str] = {
    "adamw": "peak AdamW LR",
    "muon": (
        "peak LR of torch.optim.Muon on the 2-D hidden matrices with "
        "adjust_lr_fn='match_rms_adamw' (update RMS matched to AdamW's: lr·0.2·sqrt(max(A, B)) "
        "per orthogonalised update, momentum 0.95, Nesterov) and of AdamW on the rest "
        "(embeddings, readout, vectors): one LR for both"
    ),
    "adafactor": (
        "peak lr of torch.optim.Adafactor (torch's defaults: eps (None, 1e-3), d 1.0, "
        "beta2_decay -0.8, no momentum), a relative step, not an absolute one: each tensor moves "
        "by max(1e-3, RMS(param))·min(lr, 1/sqrt(t)) (t: its step) times its normalised update "
        "(RMS clipped to 1), decoupled decay param·(1 - lr·λ); transformers' Adafactor with "
        "scale_parameter=True, relative_step=False takes the same lr without the 1/sqrt(t) cap "
        "(the same while t <= 1/lr²) and scales its decay by RMS(param) too"
    ),
    "sgd": "peak SGD LR (momentum beta1)",
}


def _positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, but got {name}={value!r}")


@dataclass(frozen=True)
class BatchRamp:
    """Batch-size ramp-up (Megatron/BLOOM style): the batch starts at ``start`` sequences and
    grows by ``increment`` sequences every ``tokens_per_increment`` tokens until it reaches
    ``HParams.batch_size``."""

    start: int
    increment: int
    tokens_per_increment: int

    def __post_init__(self) -> None:
        for name in ("start", "increment", "tokens_per_increment"):
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool | int):
                object.__setattr__(self, name, int(value))
            _positive_int(name, getattr(self, name))


@dataclass(frozen=True)
class HParams:
    """Optimizer + schedule settings. Weight decay applies to matrices only (see parametrization).

    ``optimizer`` is one of :data:`OPTIMIZERS`; ``weight_decay_tau`` (> 0), when set, replaces
    ``weight_decay`` by λ = 1/(lr·τ·steps) (see the module docstring)."""

    lr: float  # peak learning rate
    batch_size: int = 32  # sequences per optimizer step
    micro_batch_size: int | None = None  # sequences per forward/backward; None = batch_size
    warmup: float = 0.1  # < 1: fraction of the steps; >= 1: number of steps
    schedule: str = "cosine"  # one of SCHEDULES
    min_lr_ratio: float = 0.1  # final LR / peak LR (cosine and WSD)
    decay_fraction: float = 0.2  # WSD: fraction of the steps spent decaying
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1  # decoupled (AdamW), matrices only
    grad_clip: float = 1.0  # max global grad norm; 0 = off
    z_loss: float = 0.0  # coefficient of mean(logsumexp(logits)²) added to the loss
    ramp: BatchRamp | None = None
    optimizer: str = "adamw"  # one of OPTIMIZERS
    weight_decay_tau: float | None = None  # Power Lines' τ = B/(η·λ·D); replaces weight_decay

    def __post_init__(self) -> None:
        # numpy scalars (e.g. from a search space or a DataFrame) are stored as plain numbers
        for name in ("batch_size", "micro_batch_size"):
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool | int):
                object.__setattr__(self, name, int(value))
        for name in (
            "lr",
            "warmup",
            "min_lr_ratio",
            "decay_fraction",
            "beta1",
            "beta2",
            "eps",
            "weight_decay",
            "grad_clip",
            "z_loss",
            "weight_decay_tau",
        ):
            value = getattr(self, name)
            if isinstance(value, numbers.Real) and not isinstance(value, bool | float | int):
                object.__setattr__(self, name, float(value))
        if not (isinstance(self.lr, int | float) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"`lr` must be a finite number > 0, but got lr={self.lr!r}")
        _positive_int("batch_size", self.batch_size)
        if self.micro_batch_size is not None:
            _positive_int("micro_batch_size", self.micro_batch_size)
            if self.batch_size % self.micro_batch_size != 0:
                raise ValueError(
                    f"`micro_batch_size` must divide `batch_size`, but got "
                    f"batch_size={self.batch_size}, micro_batch_size={self.micro_batch_size}"
                )
        if not (math.isfinite(self.warmup) and self.warmup >= 0):
            raise ValueError(f"`warmup` must be >= 0, but got warmup={self.warmup!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"`schedule` must be one of {SCHEDULES}, but got {self.schedule!r}")
        for name in ("min_lr_ratio", "decay_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"`{name}` must be in [0, 1], but got {name}={value!r}")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1), but got {name}={value!r}")
        if not self.eps > 0:
            raise ValueError(f"`eps` must be > 0, but got eps={self.eps!r}")
        for name in ("weight_decay", "grad_clip", "z_loss"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"`{name}` must be >= 0, but got {name}={value!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}, but got {self.optimizer!r}")
        tau = self.weight_decay_tau
        if tau is not None and not (
            isinstance(tau, int | float) and math.isfinite(tau) and tau > 0
        ):
            raise ValueError(f"`weight_decay_tau` must be a number > 0, but got {tau!r}")
        if self.ramp is not None:
            r = self.ramp
            if r.start > self.batch_size:
                raise ValueError(
                    f"`ramp.start` must be <= `batch_size`, but got start={r.start}, "
                    f"batch_size={self.batch_size}"
                )
            micro = self.micro
            if r.start % micro or r.increment % micro:
                raise ValueError(
                    f"the micro batch must divide `ramp.start` and `ramp.increment`, but got "
                    f"micro_batch_size={micro}, start={r.start}, increment={r.increment}"
                )

    @property
    def micro(self) -> int:
        """Sequences per forward/backward pass: ``micro_batch_size``, else the whole batch, or
        with a ramp the largest micro batch that divides every batch of it (the whole batch
        never divides a smaller ramp start: ``trial --ramp 4 4 1000`` had been refused for a
        micro batch of 32 it was never given; a help-text audit)."""
        if self.micro_batch_size is not None:
            return self.micro_batch_size
        if self.ramp is not None:
            return math.gcd(self.batch_size, self.ramp.start, self.ramp.increment)
        return self.batch_size


def batch_sizes(hp: HParams, tokens: int, context: int) -> list[int]:
    """Batch size (sequences) of every optimizer step for a budget of ``tokens``.

    Without a ramp: ``max(1, tokens // (batch_size · context))`` steps of ``batch_size``. With a
    ramp: steps while the budget lasts, the batch following the ramp (at least one step).
    """
    if tokens < 1 or context < 1:
        raise ValueError(f"`tokens` and `context` must be >= 1, but got {tokens=}, {context=}")
    if hp.ramp is None:
        return [hp.batch_size] * max(1, tokens // (hp.batch_size * context))
    r, seen = hp.ramp, 0
    sizes: list[int] = []
    while True:
        b = min(hp.batch_size, r.start + r.increment * (seen // r.tokens_per_increment))
        if sizes and seen + b * context > tokens:
            return sizes
        sizes.append(b)
        seen += b * context


def warmup_steps(hp: HParams, total_steps: int) -> int:
    """Warmup length in steps: ``round(warmup · total)`` for a fraction, else ``int(warmup)``;
    never more than ``total_steps``."""
    w = round(hp.warmup * total_steps) if hp.warmup < 1 else int(hp.warmup)
    return min(w, total_steps)


def wsd_decay_start(hp: HParams, total_steps: int) -> int:
    """The first step of a WSD decay (the LR is still the peak there): the last
    ``round(decay_fraction · total_steps)`` steps decay, at least 2 when ``decay_fraction`` > 0
    (the first at the peak, the last at ``min_lr_ratio`` × peak: with one decay step, or none
    when the fraction rounds to 0, a short run had never left the peak), never into the warmup.
    ``decay_fraction`` 0 decays nothing (the peak to the end)."""
    n = round(hp.decay_fraction * total_steps)
    if hp.decay_fraction > 0:
        n = max(n, 2)
    return max(warmup_steps(hp, total_steps), total_steps - n)


def lr_at(hp: HParams, step: int, total_steps: int) -> float:
    """Learning rate at optimizer step ``step`` (0-based) of ``total_steps``.

    Linear warmup reaches ``lr`` at step ``W - 1`` (lr·(step+1)/W). Then: cosine from ``lr`` at
    step W to ``lr·min_lr_ratio`` at the last step; WSD holds ``lr`` until the last
    ``decay_fraction`` of the steps (at least 2 steps: :func:`wsd_decay_start`) and decays
    linearly to ``lr·min_lr_ratio`` at the last step; linear decays linearly from ``lr`` at step
    W to ``lr·min_lr_ratio`` at the last step (to zero when ``min_lr_ratio`` is 0); constant
    holds ``lr``. A decaying schedule reaches ``lr·min_lr_ratio`` at the last step whenever two
    or more steps follow the warmup (a one-step run, or a single step after the warmup, is at
    ``lr``).
    """
    w = warmup_steps(hp, total_steps)
    if step < w:
        return hp.lr * (step + 1) / w
    last = total_steps - 1
    r = hp.min_lr_ratio
    if hp.schedule == "constant":
        return hp.lr
    if hp.schedule == "cosine":
        p = min(1.0, (step - w) / max(1, last - w))
        return hp.lr * (r + (1.0 - r) * 0.5 * (1.0 + math.cos(math.pi * p)))
    if hp.schedule == "linear":
        p = min(1.0, (step - w) / max(1, last - w))
        return hp.lr * (1.0 - (1.0 - r) * p)
    start = wsd_decay_start(hp, total_steps)
    if step < start:
        return hp.lr
    p = min(1.0, (step - start) / max(1, last - start))
    return hp.lr * (1.0 - (1.0 - r) * p)


def weight_decay_of(hp: HParams, total_steps: int) -> float:
    """The decay coefficient λ of a run of ``total_steps`` optimizer steps: ``weight_decay``, or
    from the timescale τ = B/(η·λ·D) = 1/(η·λ·S): λ = 1/(lr·τ·S) when ``weight_decay_tau`` is set."""
    if hp.weight_decay_tau is None:
        return hp.weight_decay
    return decay_of_timescale(hp.lr, hp.weight_decay_tau, total_steps)


def decay_of_timescale(lr: float, tau: float, total_steps: int) -> float:
    """λ = 1/(lr·τ·S): the AdamW decay coefficient whose timescale 1/(η·λ) is ``tau`` of a run
    of ``total_steps`` optimizer steps S at peak LR ``lr`` (Power Lines' τ = B/(η·λ·D))."""
    return 1.0 / (lr * tau * max(1, total_steps))

"""Where the big run trains, and what follows from it: the hardware, the global batch as a
multiple of micro batch × data-parallel GPUs, the micro batch that fits in memory, and the
Megatron-style batch ramp-up."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sweeper.errors import TargetError
from sweeper.recipe.memory import PRECISIONS, MemoryEstimate, estimate_memory
from sweeper.recipe.scale import regime_values, regime_warnings
from sweeper.recipe.warning_kinds import Assumed

if TYPE_CHECKING:
    from sweeper.fitting.laws import Law
    from sweeper.recipe.recommend import RecipeDefaults
    from sweeper.recipe.scale import ResolvedShape
    from sweeper.recipe.target import ResolvedTarget

__all__ = [
    "Hardware",
    "RampUp",
    "choose_batch",
    "memory_estimate",
    "plan_rampup",
    "round_global_batch",
]

#: a global batch within this relative distance of the law's counts as exact when sizing micro
_BATCH_TOLERANCE: Final[float] = 0.02


def positive(name: str, v: float | None, problems: list[str]) -> None:
    """Append a problem unless ``v`` is None or a positive finite number."""
    number = isinstance(v, numbers.Real) and not isinstance(v, bool)
    if v is None or (number and math.isfinite(v) and v > 0):
        return
    if not number:  # ("1e9" was said to be not positive)
        problems.append(f"{name} must be a number, got {type(v).__name__} {v!r}")
    else:
        problems.append(f"{name} must be positive, got {name}={v!r}")


def plain_number(v: Any) -> Any:
    """``v`` as Python's int or float when it is another whole or real number (numpy's, read off
    a DataFrame): as given otherwise (a bool, a string: the checks then say what is wrong). The
    recipe keeps what it is given, and JSON and YAML write Python's numbers only."""
    if isinstance(v, bool) or type(v) in (int, float):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return v


@dataclass(frozen=True)
class Hardware:
    """Where the run will train. ``gpus`` data-parallel GPUs of ``gpu_memory_gb`` GiB each;
    ``seq_len`` tokens per sequence; ``micro_batch`` sequences per GPU per forward (None: the
    largest power of two that fits); ``precision`` "bf16" (mixed, fp32 master) or "fp32";
    ``peak_tflops`` dense peak per GPU at that precision (None: no time estimate); ``mfu`` the
    expected model-FLOPs utilisation (0.4: typical of well-tuned dense training, 35–50%);
    ``zero_stage`` 0–3; ``flash_attention`` and ``recompute`` (full activation checkpointing)
    change the activation memory (see :mod:`sweeper.recipe.memory`)."""

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
        for name in ("gpus", "seq_len", "micro_batch", "zero_stage", "gpu_memory_gb",
                     "peak_tflops", "mfu"):  # fmt: skip
            object.__setattr__(self, name, plain_number(getattr(self, name)))  # (np.int64(8))
        for name in ("gpus", "seq_len", "micro_batch"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                p.append(f"{name} must be a positive integer, got {name}={v!r}")
        positive("gpu_memory_gb", self.gpu_memory_gb, p)
        positive("peak_tflops", self.peak_tflops, p)
        mfu = self.mfu  # (True had been taken for 1, "0.4" said as 0.4)
        if not (isinstance(mfu, numbers.Real) and not isinstance(mfu, bool) and 0.0 < mfu <= 1.0):
            p.append(f"mfu (--mfu) must be a number in (0, 1], got mfu={mfu!r}")
        if self.precision not in PRECISIONS:
            p.append(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        z = self.zero_stage  # (1.0 had been taken, and written into DeepSpeed's config as 1.0)
        if not (isinstance(z, int) and not isinstance(z, bool) and z in (0, 1, 2, 3)):
            p.append(f"zero_stage must be 0, 1, 2 or 3 (an integer), got zero_stage={z!r}")
        for name in ("flash_attention", "recompute"):  # ("no" had counted as True)
            if not isinstance(getattr(self, name), bool):
                p.append(f"{name} must be True or False, got {name}={getattr(self, name)!r}")
        if p:
            raise TargetError("; ".join(p))


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

    def iterations(self, global_batch: int, samples: float) -> int:
        """Optimizer steps to consume ``samples`` sequences with this ramp-up, by Megatron-LM's
        rule (num_microbatches_calculator.py: at ``c`` samples consumed the batch is START +
        int(c / (SAMPLES / increments))·INCREMENT, the full batch from SAMPLES on). A recipe's
        steps count the full batch, and a ramp-up adds steps: 334,487 for 317,892 in a recommend
        audit, which had been told "a few"."""
        n = self.increments_to(global_batch)
        if n < 1:
            return math.ceil(samples / global_batch)
        per_increment = self.ramp_samples / n
        consumed, steps = 0, 0
        while consumed < samples:
            k = min(n, int(consumed / per_increment))
            batch = global_batch if k >= n else self.start_sequences + k * self.increment_sequences
            left = math.ceil((samples - consumed) / batch)
            if k < n:
                left = min(left, max(1, math.ceil(((k + 1) * per_increment - consumed) / batch)))
            consumed += left * batch
            steps += left
        return steps

    def train_iterations(self, global_batch: int, samples: int) -> int:
        """The run's iterations as Megatron-LM sets them from ``--train-samples`` with a ramp-up
        (training.py's update_train_iters): steps while at most the ramp's samples are consumed,
        then whole full batches of the rest, a last partial batch dropped. :meth:`iterations`
        rounds that batch up, one step more (a review); it stays the warmup's rule: a
        sample-based warmup ends on the step that consumes its samples."""
        n = self.increments_to(global_batch)
        if n < 1:
            return samples // global_batch
        per_increment = self.ramp_samples / n
        consumed, steps = 0, 0
        while consumed <= self.ramp_samples:
            k = min(n, int(consumed / per_increment))
            consumed += self.start_sequences + k * self.increment_sequences
            steps += 1
        return steps + (samples - consumed) // global_batch  # (floored, as Megatron-LM does)

    def to_dict(self, global_batch: int) -> dict[str, Any]:
        return {
            "start_sequences": self.start_sequences,
            "increment_sequences": self.increment_sequences,
            "ramp_samples": self.ramp_samples,
            "ramp_tokens": self.ramp_tokens,
            "increments": self.increments_to(global_batch),
            "tokens_per_increment": self.tokens_per_increment(global_batch),
        }


def round_global_batch(batch_sequences: float, unit: int) -> int:
    """The multiple of ``unit`` (micro batch × data-parallel GPUs) nearest to ``batch_sequences``
    in log space, at least ``unit``."""
    if unit < 1 or not batch_sequences > 0:
        raise TargetError(f"need unit >= 1 and a positive batch, got ({unit=}, {batch_sequences=})")
    k = max(1, math.floor(batch_sequences / unit))
    cands = (k, k + 1)
    return unit * min(cands, key=lambda c: abs(math.log(c * unit / batch_sequences)))


def memory_estimate(
    m: ResolvedShape, hw: Hardware, micro: int, optimizer: str = "adamw"
) -> MemoryEstimate:
    """Memory per GPU of ``m`` at micro batch ``micro`` on ``hw``, with the states of
    ``optimizer``: its non-embedding N are the hidden matrices (Muon's), the untied embedding and
    readout the rest (:func:`~sweeper.recipe.memory.estimate_memory`)."""
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
        optimizer=optimizer,
        n_matrix_params=m.n_params,
    )


#: a global batch within this relative distance of the law's counts as exact when sizing micro


def choose_batch(
    b_law: float,
    m: ResolvedShape,
    hw: Hardware,
    global_batch: int | None,
    warnings: list[str],
    *,
    optimizer: str = "adamw",
) -> tuple[int, int]:
    """(micro batch, global batch in sequences) with global a multiple of micro × GPUs.

    A micro batch given by the hardware is kept. Otherwise, among micro batches that fit in memory
    (and no larger than the per-GPU share of the batch, rounded up), the largest whose rounded
    global batch is within 2% of the law's, else the largest of those that round closest (48 GPUs
    and a law's 216 sequences: micro 5 × 1 step, not micro 1 × 5 accumulation steps, for the same
    240); with a fixed ``global_batch``, the largest that divides it. No GPU memory given: micro
    batch 1. The memory holds ``optimizer``'s states (a smaller state leaves room for more).
    """
    want = global_batch if global_batch is not None else b_law / m.seq_len
    dp = hw.gpus
    if hw.micro_batch is not None:
        micro = hw.micro_batch
    elif hw.gpu_memory_gb is None:
        micro = 1
        warnings.append(
            Assumed(
                "no GPU memory given: micro batch 1 (give gpu_memory_gb, --gpu-memory-gb, to "
                "size it)"
            )
        )
    else:
        fit = memory_estimate(m, hw, 1, optimizer).max_micro_batch or 0
        sizes = range(1, max(1, min(fit, math.ceil(want / dp))) + 1)

        def err(mb: int) -> float:
            return abs(math.log(round_global_batch(want, mb * dp) / want))

        if global_batch is not None:
            good = [mb for mb in sizes if global_batch % (mb * dp) == 0]
        else:
            good = [mb for mb in sizes if err(mb) <= _BATCH_TOLERANCE]
        micro = max(good) if good else min(sizes, key=lambda mb: (round(err(mb), 9), -mb))
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
        warnings.append(_batch_too_large(micro, dp, gbs / want, b_law, m.seq_len))
    return micro, gbs


def _batch_too_large(micro: int, dp: int, factor: float, b_law: float, seq_len: int) -> str:
    """The warning when the smallest global batch the hardware runs, micro × GPUs sequences, is
    ``factor`` times the law's batch ``b_law`` (tokens): what can shrink, said only where it can
    (one GPU and micro batch 1 leave only a shorter sequence, or the larger batch)."""
    can = ["fewer data-parallel GPUs"] if dp > 1 else []
    can += ["a smaller micro batch"] if micro > 1 else []
    if b_law < seq_len:
        shorter = f"a sequence length of at most {b_law:.0f} tokens (now {seq_len})"
    else:
        shorter = f"a shorter sequence (the law's batch is {b_law / seq_len:.1f} × {seq_len})"
    if can:
        fix = f"use {' or '.join(can)}, or {shorter}"
    else:
        fix = f"one sequence on one GPU is the smallest batch: use {shorter}, or accept the larger"
        fix += " batch"
    return (
        f"micro batch {micro} × {dp} GPUs = {micro * dp} sequences is {factor:.1f}× the law's "
        f"batch ({b_law:.3g} tokens): {fix}"
    )


def plan_rampup(
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


@dataclass(frozen=True)
class BatchPlan:
    """The global batch the hardware runs and what follows from it."""

    micro: int
    global_batch: int
    batch_tokens: int
    total_steps: int
    memory: MemoryEstimate


def _memory_warnings(memory: MemoryEstimate, micro: int, hw: Hardware) -> list[str]:
    if memory.fits is not False:
        return []
    if memory.max_micro_batch:
        return [
            f"micro batch {micro} needs {memory.total_gb:.1f} GiB per GPU: the largest that "
            f"fits is {memory.max_micro_batch}"
        ]
    return [
        f"does not fit at micro batch 1 ({memory.total_gb:.1f} GiB per GPU > "
        f"{hw.gpu_memory_gb:g} GiB less {memory.reserve_fraction:.0%} reserve): "
        f"{_memory_remedies(hw)}"
    ]


def _memory_remedies(hw: Hardware) -> str:
    """What can still shrink the memory, naming only what is not on already (a recommend audit
    was told to use ZeRO and recomputation with ZeRO-3 and --recompute given, on one GPU). The
    flags are named as recommend's: the warning is also in an export's header, where a bare
    ``--recompute`` would read as the framework's."""
    can = []
    if hw.gpus > 1 and hw.zero_stage < 3:
        can.append(f"ZeRO stage 3 (recommend's --zero-stage 3; now {hw.zero_stage})")
    if hw.gpus == 1 and hw.zero_stage < 3:
        can.append("more GPUs with ZeRO sharding (recommend's --gpus, --zero-stage 3)")
    if not hw.recompute:
        can.append("activation recomputation (recommend's --recompute)")
    if not hw.flash_attention:
        can.append("flash attention (drop recommend's --no-flash-attention)")
    if hw.gpus == 1 and hw.zero_stage == 3:
        can.append("more GPUs (recommend's --gpus: ZeRO-3 shards over them)")
    use = f"use {' or '.join(can)}; otherwise " if can else ""
    return (
        f"{use}the model needs tensor or pipeline parallelism, which this recipe does not plan "
        "(it is data-parallel only)"
    )


def plan_batch(
    regime: Sequence[tuple[str, Law, float]],
    m: ResolvedTarget,
    hw: Hardware,
    b_law: float,
    b_iv: tuple[float, float],
    global_batch: int | None,
    warnings: list[str],
    *,
    optimizer: str = "adamw",
) -> BatchPlan:
    """Micro and global batch, steps and memory for a batch law's ``b_law`` tokens (interval
    ``b_iv``); warnings when they leave the interval, the memory, or the regime of the laws in
    ``regime`` ((role, law, token factor): the variables each held fixed). The memory is sized
    with the states of ``optimizer``, the recipe's."""
    micro, gbs = choose_batch(b_law, m.shape, hw, global_batch, warnings, optimizer=optimizer)
    batch_used = gbs * m.shape.seq_len
    if b_iv[0] != b_iv[1] and not b_iv[0] <= batch_used <= b_iv[1]:
        warnings.append(
            f"global batch {batch_used:.3g} tokens lies outside the law's interval "
            f"[{b_iv[0]:.3g}, {b_iv[1]:.3g}]"
        )
    if m.tokens < batch_used:
        raise TargetError(
            f"tokens={m.tokens:.3g} is less than one optimizer step of {batch_used} tokens "
            f"({gbs} sequences × {m.shape.seq_len})"
        )
    for role, law, f in regime:
        values = regime_values(
            m.shape.n_params, m.tokens, batch_used, f, depth=m.shape.depth, seq_len=m.shape.seq_len
        )
        warnings += regime_warnings(law, role, values)
    memory = memory_estimate(m.shape, hw, micro, optimizer)
    warnings += _memory_warnings(memory, micro, hw)
    total_steps = math.ceil(m.tokens / batch_used)
    return BatchPlan(micro, gbs, batch_used, total_steps, memory)

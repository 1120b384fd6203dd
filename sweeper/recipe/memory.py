"""Memory per GPU and training time of a dense decoder-only transformer run (pure arithmetic).

Memory per GPU = weights + gradients + optimizer states + activations of one micro batch.

Bytes per parameter, mixed precision as in Rajbhandari et al. 2020, §3: the weights and grads at
the training precision, and the optimizer's part = under ``bf16`` an fp32 master copy (4 bytes,
whatever the optimizer) plus the optimizer's fp32 states; under ``fp32`` the states alone.

==========  =======  =====  ===========================================  =====
precision   weights  grads  optimizer (AdamW)                            total
==========  =======  =====  ===========================================  =====
``fp32``    4        4      8  (two fp32 moments)                        16
``bf16``    2        2      12 (fp32 master copy 4 + two fp32 moments 8) 16
==========  =======  =====  ===========================================  =====

The states each optimizer keeps (the proxies' optimizers, :mod:`proxy_models.optim`), as torch
2.x allocates them on a parameter's first step (``torch/optim/*.py``; each state is a
``zeros_like`` of the gradient, fp32 beside the fp32 master copy), and the optimizer bytes per
parameter they make:

=============  ====================================================  ===========  ===========
optimizer      fp32 states per parameter (torch source)              bf16 optim.  fp32 optim.
=============  ====================================================  ===========  ===========
``adamw``      2: ``exp_avg``, ``exp_avg_sq`` (``adam.py``, which    12           8
               ``AdamW`` subclasses)
``muon``       1 on the 2-D hidden matrices: ``momentum_buffer``     8 matrices   4 matrices
               (``_muon.py``); AdamW's 2 on the rest (embeddings,    12 rest      8 rest
               readout, vectors), as the proxies run it
``adafactor``  about 0: ``row_var`` (m values) and ``col_var`` (n    4 + 8/d      8/d
               values) per m×n matrix, a full ``variance`` only for
               vectors; no first moment (``_adafactor.py``)
``sgd``        1: ``momentum_buffer``, kept when momentum > 0 (the   8            4
               recipe's β1 0.9; ``sgd.py``)
=============  ====================================================  ===========  ===========

Muon blends over the parameters: the ``n_matrix_params`` hidden matrices (Sweeper's
non-embedding N) at its own figure, the rest (``n_params_total − n_matrix_params``: the untied
embedding and readout, 2·V·d) at AdamW's, so 8 + 4·(1 − f) optimizer bytes per parameter under
bf16 for a share f of matrices (8.15 for 7B with a 32K vocabulary). Adafactor's factored moments
take 4·(1/m + 1/n) bytes per element of an m×n matrix, at most 8/d for the matrices of a width-d
transformer (d×d: 2/d; d×4d: 1.25/d; V×d: about 1/d), the figure counted here (the norm gains,
with a full variance, are not in N). The scalar ``step`` each optimizer keeps per tensor is left
out. ``MemoryEstimate.bytes_per_param`` is the total rounded to whole bytes (an integer in the
recipe JSON); ``optimizer_gb`` is exact, and :attr:`MemoryEstimate.optimizer_bytes_per_param`
is its figure per parameter.

ZeRO (Rajbhandari et al. 2020) shards across the ``dp`` data-parallel GPUs: stage 1 the optimizer
states, stage 2 also the gradients, stage 3 also the weights.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", arXiv:2205.05198, §4.1), no tensor/sequence parallelism, 16-bit activations: per layer
``s·b·h·(34 + 5·a·s/h)`` bytes when the attention scores are stored, ``s·b·h·34`` with flash
attention (the default here: the 5·a·s/h term is the s×s score, softmax and dropout-mask tensors
that flash attention never materialises), and ``2·s·b·h`` per layer with full activation
recomputation (only each layer's input is kept), plus the one layer rematerialised during its
backward pass, whose activations are all live then (its ``34·s·b·h`` with flash attention: a
recommend audit's 72 GiB at the largest micro batch said to fit were about 97). Add the output
logits kept in fp32 for the cross-entropy, ``4·s·b·V`` bytes. fp32 activations double the 16-bit
figures (the dropout masks, one byte per element, are a small part; counting them doubled too
errs on the safe side).

GB here means GiB (2**30 bytes), the unit in which GPU memory is quoted by ``nvidia-smi`` and the
"80 GB" of an H100.

Training time = FLOPs / (gpus · peak · MFU), FLOPs = 6·N·D + 6·L·T·d·D (Kaplan et al. 2020, eq. 2.2:
the attention term counts the context T once per layer) + 6·V·d·D, the output layer
(:func:`head_flops`). :func:`train_flops` is the first two terms, the laws' convention (a law's
``flops`` predictor and a compute target's budget were counted without the head: adding it there
would move every law's value); the recipe's time adds :func:`head_flops` (left out, the time had
been 7–16% short at a 256K vocabulary and 2.3× at 2M; a recommend audit).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

from sweeper.errors import TargetError

__all__ = [
    "GIB",
    "MEMORY_OPTIMIZERS",
    "PRECISIONS",
    "MemoryEstimate",
    "activation_bytes_per_sample",
    "bytes_per_param",
    "estimate_memory",
    "head_flops",
    "train_flops",
    "train_time_s",
]

GIB: Final[float] = float(2**30)
PRECISIONS: Final[tuple[str, ...]] = ("bf16", "fp32")

#: the optimizers whose states are sized (:data:`proxy_models.hparams.OPTIMIZERS`)
MEMORY_OPTIMIZERS: Final[tuple[str, ...]] = ("adamw", "muon", "adafactor", "sgd")

#: (weights, grads, fp32 master copy) bytes per parameter
_BYTES: Final[dict[str, tuple[int, int, int]]] = {
    "fp32": (4, 4, 0),
    "bf16": (2, 2, 4),
}
#: fp32 states per parameter (see the module docstring): (on a hidden matrix, on the rest);
#: Adafactor's factored moments, O(1/d) per parameter, are added by :func:`estimate_memory`
_STATES: Final[dict[str, tuple[int, int]]] = {
    "adamw": (2, 2),
    "muon": (1, 2),
    "adafactor": (0, 0),
    "sgd": (1, 1),
}
#: bytes of one optimizer state
_STATE_BYTES: Final[int] = 4


def bytes_per_param(
    precision: str, optimizer: str = "adamw", *, matrix: bool = True
) -> tuple[int, int, int]:
    """(weights, grads, optimizer) bytes per parameter at ``precision`` under ``optimizer``, for
    a parameter of a 2-D hidden matrix (``matrix``) or of the rest (embeddings, readout); the
    optimizer part is the fp32 master copy (bf16) plus the states. Adafactor's factored moments
    (at most 8/d bytes) are left out here."""
    if precision not in _BYTES:
        raise TargetError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if optimizer not in _STATES:
        raise TargetError(
            f"optimizer must be one of {', '.join(MEMORY_OPTIMIZERS)}, got {optimizer!r}"
        )
    weights, grads, master = _BYTES[precision]
    states = _STATES[optimizer][0 if matrix else 1]
    return weights, grads, master + _STATE_BYTES * states


def activation_bytes_per_sample(
    *,
    seq_len: int,
    width: int,
    depth: int,
    heads: int,
    vocab: int,
    precision: str = "bf16",
    flash_attention: bool = True,
    recompute: bool = False,
) -> float:
    """Activation bytes kept for the backward pass for ONE sequence of ``seq_len`` tokens.

    Korthikanti et al. 2022 per layer (16-bit): ``s·h·(34 + 5·a·s/h)`` bytes, ``s·h·34`` with flash
    attention; with full recomputation ``2·s·h`` per layer plus one layer's full activations, live
    while it is recomputed for its backward pass; plus ``4·s·V`` bytes of fp32 logits. fp32
    doubles the per-layer part. Linear in the micro batch, so the caller multiplies by it.
    """
    s, h, a = float(seq_len), float(width), float(heads)
    full = 34.0 * s * h if flash_attention else s * h * (34.0 + 5.0 * a * s / h)
    layers = depth * 2.0 * s * h + full if recompute else depth * full
    if precision == "fp32":
        layers *= 2.0
    return layers + 4.0 * s * float(vocab)


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory per GPU in GiB, by part, for one micro batch; ``fits`` against ``gpu_memory_gb``.

    ``bytes_per_param`` is weights + grads + optimizer bytes per parameter rounded to whole bytes
    (Muon's blend is not whole): ``optimizer_gb`` and :attr:`optimizer_bytes_per_param` are exact.

    ``max_micro_batch`` is the largest micro batch whose total stays within the usable memory
    (``gpu_memory_gb · (1 − reserve_fraction)``), 0 when even the static part does not fit, None
    when no GPU memory was given.
    """

    weights_gb: float
    grads_gb: float
    optimizer_gb: float
    activations_gb: float
    total_gb: float
    micro_batch: int
    n_params_total: float
    precision: str
    bytes_per_param: int
    zero_stage: int
    data_parallel: int
    flash_attention: bool
    recompute: bool
    gpu_memory_gb: float | None = None
    reserve_fraction: float = 0.1
    fits: bool | None = None
    max_micro_batch: int | None = None

    @property
    def static_gb(self) -> float:
        """Weights + grads + optimizer states (independent of the micro batch)."""
        return self.weights_gb + self.grads_gb + self.optimizer_gb

    @property
    def optimizer_bytes_per_param(self) -> float:
        """Optimizer bytes (master copy + states) per parameter before ZeRO sharding: 12 for
        AdamW under bf16, 8 + 4·(1 − f) for Muon with a share f of hidden matrices."""
        shards = self.data_parallel if self.zero_stage >= 1 else 1
        return self.optimizer_gb * GIB * shards / self.n_params_total

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["static_gb"] = self.static_gb
        return d


def estimate_memory(
    *,
    n_params_total: float,
    seq_len: int,
    width: int,
    depth: int,
    heads: int,
    vocab: int,
    micro_batch: int,
    precision: str = "bf16",
    data_parallel: int = 1,
    zero_stage: int = 0,
    flash_attention: bool = True,
    recompute: bool = False,
    gpu_memory_gb: float | None = None,
    reserve_fraction: float = 0.1,
    optimizer: str = "adamw",
    n_matrix_params: float | None = None,
) -> MemoryEstimate:
    """Memory per GPU of training with ``optimizer`` (one of :data:`MEMORY_OPTIMIZERS`; see the
    module docstring for every term).

    ``n_params_total`` counts every trained parameter, embeddings included (they have weights,
    grads and optimizer states like any other). ``n_matrix_params`` of them are 2-D hidden
    matrices, which Muon steps with one state where AdamW, on the rest, keeps two (None: all but
    the untied embedding and readout, ``n_params_total − 2·vocab·width``, Sweeper's non-embedding
    N); only Muon's figure depends on it. ``reserve_fraction`` of the GPU memory is kept back for
    the CUDA context, allocator fragmentation and temporary buffers when judging ``fits``.
    """
    if n_matrix_params is None:
        n_matrix_params = max(0.0, n_params_total - 2.0 * vocab * width)
    problems = _argument_problems(
        n_params_total=n_params_total,
        sizes={"seq_len": seq_len, "width": width, "depth": depth, "heads": heads},
        vocab=vocab,
        micro_batch=micro_batch,
        data_parallel=data_parallel,
        zero_stage=zero_stage,
        gpu_memory_gb=gpu_memory_gb,
        reserve_fraction=reserve_fraction,
        n_matrix_params=n_matrix_params,
    )
    if problems:
        raise TargetError("; ".join(problems))
    bw, bg, bo = bytes_per_param(precision, optimizer)
    bo_rest = bytes_per_param(precision, optimizer, matrix=False)[2]
    optim_bytes = (  # (one product when the two agree: AdamW's figures stay bit for bit)
        n_params_total * bo
        if bo == bo_rest
        else n_matrix_params * bo + (n_params_total - n_matrix_params) * bo_rest
    )
    if optimizer == "adafactor":  # row + column second moments: 4·(1/m + 1/n) <= 8/d per element
        optim_bytes += n_params_total * 2.0 * _STATE_BYTES / width
    dp = data_parallel
    weights = n_params_total * bw / (dp if zero_stage >= 3 else 1)
    grads = n_params_total * bg / (dp if zero_stage >= 2 else 1)
    optim = optim_bytes / (dp if zero_stage >= 1 else 1)
    per_sample = activation_bytes_per_sample(
        seq_len=seq_len,
        width=width,
        depth=depth,
        heads=heads,
        vocab=vocab,
        precision=precision,
        flash_attention=flash_attention,
        recompute=recompute,
    )
    static = weights + grads + optim
    total = static + micro_batch * per_sample
    fits: bool | None = None
    max_mb: int | None = None
    if gpu_memory_gb is not None:
        usable = gpu_memory_gb * GIB * (1.0 - reserve_fraction)
        fits = total <= usable
        max_mb = max(0, math.floor((usable - static) / per_sample)) if usable > static else 0
    return MemoryEstimate(
        weights_gb=weights / GIB,
        grads_gb=grads / GIB,
        optimizer_gb=optim / GIB,
        activations_gb=micro_batch * per_sample / GIB,
        total_gb=total / GIB,
        micro_batch=micro_batch,
        n_params_total=float(n_params_total),
        precision=precision,
        bytes_per_param=math.floor(bw + bg + optim_bytes / n_params_total + 0.5),
        zero_stage=zero_stage,
        data_parallel=dp,
        flash_attention=flash_attention,
        recompute=recompute,
        gpu_memory_gb=gpu_memory_gb,
        reserve_fraction=reserve_fraction,
        fits=fits,
        max_micro_batch=max_mb,
    )


def _argument_problems(
    *,
    n_params_total: float,
    sizes: dict[str, int],
    vocab: int,
    micro_batch: int,
    data_parallel: int,
    zero_stage: int,
    gpu_memory_gb: float | None,
    reserve_fraction: float,
    n_matrix_params: float,
) -> list[str]:
    """One line per invalid argument of :func:`estimate_memory` (``sizes``: the shape's lengths,
    each at least 1), so that a caller sees every problem at once."""
    problems = []
    if not (n_params_total > 0 and math.isfinite(n_params_total)):
        problems.append(f"n_params_total must be positive, got {n_params_total}")
    for name, v in sizes.items():
        if v < 1:
            problems.append(f"{name} must be >= 1, got {v}")
    if vocab < 0:
        problems.append(f"vocab must be >= 0, got {vocab}")
    if micro_batch < 1:
        problems.append(f"micro_batch must be >= 1, got {micro_batch}")
    if data_parallel < 1:
        problems.append(f"data_parallel must be >= 1, got {data_parallel}")
    if zero_stage not in (0, 1, 2, 3):
        problems.append(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    if gpu_memory_gb is not None and not gpu_memory_gb > 0:
        problems.append(f"gpu_memory_gb must be positive, got {gpu_memory_gb}")
    if not 0.0 <= reserve_fraction < 1.0:
        problems.append(f"reserve_fraction must be in [0, 1), got {reserve_fraction}")
    total_ok = n_params_total > 0 and math.isfinite(n_params_total)
    if total_ok and not 0.0 <= n_matrix_params <= n_params_total:
        problems.append(
            f"n_matrix_params must be in [0, n_params_total], got {n_matrix_params} "
            f"(n_params_total {n_params_total})"
        )
    return problems


def train_flops(
    n_params: float,
    tokens: float,
    *,
    depth: int | None = None,
    width: int | None = None,
    seq_len: int | None = None,
) -> float:
    """Training FLOPs 6·N·D, plus the attention term 6·L·T·d·D when the shape is known.

    N is non-embedding parameters, D tokens, T the sequence length (Kaplan et al. 2020, eq. 2.2).
    """
    flops = 6.0 * n_params * tokens
    if depth and width and seq_len:
        flops += 6.0 * depth * seq_len * width * tokens
    return flops


def head_flops(vocab: int, width: int, tokens: float) -> float:
    """The output layer's training FLOPs, 6·V·d·D (its V×d matmul forward and backward): not in
    :func:`train_flops`, which counts as the laws do (module doc), but in the recipe's time."""
    return 6.0 * float(vocab) * float(width) * tokens


def train_time_s(flops: float, *, gpus: int, peak_tflops: float, mfu: float) -> float:
    """Wall-clock seconds to do ``flops`` on ``gpus`` GPUs of ``peak_tflops`` (dense, at the
    training precision) at model-FLOPs utilisation ``mfu`` (0 < mfu <= 1)."""
    if gpus < 1 or not peak_tflops > 0 or not 0.0 < mfu <= 1.0:
        raise TargetError(
            "need gpus >= 1, peak_tflops > 0 and 0 < mfu <= 1, got "
            f"({gpus=}, {peak_tflops=}, {mfu=})"
        )
    return flops / (gpus * peak_tflops * 1e12 * mfu)

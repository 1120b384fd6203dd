"""Train one proxy for a token budget and return what a sweep needs to know about the run.

Divergence is a result, not an exception: a non-finite loss, or a training loss averaged over
the last ``DIVERGE_WINDOW`` steps more than ``DIVERGE_MARGIN`` nats above the loss at
initialisation after the warmup (``DIVERGE_MARGIN_WARMUP`` during it) stops the run with
``diverged=True``.

Reproducibility: the weights come from ``torch.Generator().manual_seed(seed)`` and the batches
from a second generator derived from ``seed``; the global RNG is neither read nor changed. On the
CPU, the same arguments (and thread count) give bit-identical losses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import numbers
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from proxy_models.builder import Builder, prepare
from proxy_models.config import ProxyConfig
from proxy_models.data import TokenData, gather_batch, load_data, sample_offsets, val_offsets
from proxy_models.hparams import HParams, batch_sizes, lr_at, warmup_steps, weight_decay_of
from proxy_models.model import build_model
from proxy_models.optim import make_optimizer
from proxy_models.parametrization import param_groups

__all__ = [
    "DIVERGE_MARGIN",
    "DIVERGE_MARGIN_WARMUP",
    "DIVERGE_WINDOW",
    "VAL_BATCH_SIZE",
    "TrainResult",
    "forward_backward",
    "train",
]

logger = logging.getLogger(__name__)

#: after the warmup, a mean train loss (last DIVERGE_WINDOW steps) this many nats above the
#: initial loss means diverged
DIVERGE_MARGIN = 1.0
#: during the warmup the bar is higher: losses at a rising LR can still come back
DIVERGE_MARGIN_WARMUP = 3.0
#: steps averaged for the divergence test: single-step spikes of several nats that recover within
#: a few steps are common on tiny, noisy batches and must not end a good run
DIVERGE_WINDOW = 10
#: sequences per validation batch (fixed, so val losses do not depend on the trial's batch size)
VAL_BATCH_SIZE = 32
#: train losses averaged into ``TrainResult.train_loss``
_TRAIN_LOSS_WINDOW = 10

ReportFn = Callable[[int, dict[str, float]], "bool | None"]


@dataclass(frozen=True)
class TrainResult:
    """Outcome of one run. Losses are in nats per token; ``val_loss`` is always finite."""

    val_loss: float  # mean over the fixed held-out batches; init_loss if it is not finite
    train_loss: float  # mean of the last (up to 10) finite step losses
    init_loss: float  # train loss of the initial model on the first batch
    diverged: bool
    stopped: bool  # the report callback asked to stop
    tokens: int  # training tokens actually seen
    steps: int  # optimizer steps taken
    wall_s: float  # the whole call, setup and evaluation included
    tokens_per_s: float  # training steps only (setup and evaluation excluded)
    flops_per_s: float  # flops_per_token · tokens_per_s
    grad_norm_mean: float  # global grad norm before clipping, over finite steps
    grad_norm_max: float
    n_params: int  # non-embedding
    n_params_total: int
    device: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe dict (non-finite floats become None)."""
        out = dataclasses.asdict(self)
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
        return out


def _resolve_device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"unknown device {device!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    return dev


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Set torch's intra-op threads for the run (argument, else $SWEEPER_THREADS) and restore."""
    if threads is None and os.environ.get("SWEEPER_THREADS"):
        try:
            threads = int(os.environ["SWEEPER_THREADS"])
        except ValueError:
            raise ValueError(
                f"$SWEEPER_THREADS must be an integer, got {os.environ['SWEEPER_THREADS']!r}"
            ) from None
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"`threads` must be >= 1, but got {threads=}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _loss(
    logits: torch.Tensor, targets: torch.Tensor, z_loss: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(objective, cross-entropy), both scalars; z-loss adds z·mean(logsumexp(logits)²)."""
    logits = logits.float().view(-1, logits.size(-1))  # (B·T, vocab)
    targets = targets.reshape(-1)  # (B·T,)
    if z_loss == 0.0:
        ce = F.cross_entropy(logits, targets)
        return ce, ce
    lse = torch.logsumexp(logits, dim=-1)
    ce = (lse - logits.gather(1, targets[:, None]).squeeze(1)).mean()
    return ce + z_loss * lse.square().mean(), ce


def _data_seed(seed: int) -> int:
    """A batch-stream seed distinct from the init seed (a 64-bit LCG step of ``seed``)."""
    return (seed * 6364136223846793005 + 1442695040888963407) % (1 << 63)


def forward_backward(
    model: torch.nn.Module,
    tokens: np.ndarray,
    offsets: np.ndarray,
    micro: int,
    z_loss: float,
    autocast: Callable[[], Any] = contextlib.nullcontext,
    *,
    context: int | None = None,
) -> torch.Tensor:
    """Accumulate into ``.grad`` the gradient of the batch mean loss over the windows at
    ``offsets``, in micro batches of ``micro`` sequences; return the batch's mean cross-entropy
    (a detached scalar tensor on the model's device). ``context`` defaults to ``model.cfg.context``
    (a proxy)."""
    device = next(model.parameters()).device
    if context is None:
        context = int(model.cfg.context)  # type: ignore[union-attr,arg-type]
    n_micro = len(offsets) // micro
    ce_sum = torch.zeros((), device=device)
    for m in range(n_micro):
        x, y = gather_batch(tokens, offsets[m * micro : (m + 1) * micro], context)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with autocast():
            logits = model(x)  # (micro, T, vocab)
        loss, ce = _loss(logits, y, z_loss)
        (loss / n_micro).backward()  # equal micro batches: the mean of means is the batch mean
        ce_sum += ce.detach()
    return ce_sum / n_micro


@torch.no_grad()
def _evaluate(
    model: torch.nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]], autocast: Any
) -> float:
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=batches[0][0].device)
    for x, y in batches:
        with autocast():
            logits = model(x)
        total += _loss(logits, y, 0.0)[1].double()
    model.train()
    return float(total.item()) / len(batches)


def train(
    cfg: ProxyConfig,
    hp: HParams,
    *,
    tokens: int,
    data: TokenData | None = None,
    seed: int = 0,
    device: str | None = None,
    threads: int | None = None,
    eval_batches: int = 8,
    eval_every: int | None = None,
    report: ReportFn | None = None,
    builder: Builder | None = None,
) -> TrainResult:
    """Train ``cfg`` with ``hp`` on ``tokens`` training tokens and evaluate it.

    ``tokens`` gives ``max(1, tokens // (batch_size · context))`` steps (a batch ramp changes the
    count). ``data`` defaults to the built-in corpus. ``device`` defaults to CUDA when present
    (bf16 autocast there), else the CPU. ``eval_batches`` fixed held-out batches of
    ``VAL_BATCH_SIZE`` sequences give ``val_loss``. ``report(step, metrics)`` is called every
    ``eval_every`` steps with ``{"step", "tokens", "train_loss", "lr", "grad_norm", "val_loss"}``
    and once at the end (with ``"final": 1.0`` in the metrics); returning True stops the run (``stopped=True``; no final call then).

    ``builder`` trains your model (:mod:`proxy_models.builder`) at ``cfg``'s shape and
    parametrization instead of the proxy GPT; its N is counted from the parameters' roles.
    ``hp.optimizer`` picks the optimizer (:mod:`proxy_models.optim`).

    Raises ``ValueError`` for inconsistent arguments (a :class:`~proxy_models.builder.BuilderError`
    for a builder that cannot be used); never raises for divergence.
    """
    t_start = time.perf_counter()
    budget: object = tokens
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)  # 8.192e5 from a TOML file
    if not isinstance(budget, numbers.Integral) or isinstance(budget, bool) or budget < 1:
        raise ValueError(f"`tokens` must be a positive integer, but got {tokens=}")
    tokens = int(budget)
    if eval_batches < 1:
        raise ValueError(f"`eval_batches` must be >= 1, but got {eval_batches=}")
    if eval_every is not None and eval_every < 1:
        raise ValueError(f"`eval_every` must be >= 1 or None, but got {eval_every=}")
    data = data if data is not None else load_data(None)
    if data.vocab_size > cfg.vocab_size:
        raise ValueError(
            f"the data needs vocab_size >= {data.vocab_size}, but the model has "
            f"vocab_size={cfg.vocab_size}"
        )
    dev = _resolve_device(device)
    with _torch_threads(threads):
        run = _setup(cfg, hp, tokens, data, seed, dev, eval_batches, builder)
        loop = _loop(run, hp, data, eval_every, report)
        return _finish(run, loop, report, t_start)


@dataclass
class _Setup:
    """Everything a run needs before its first step."""

    cfg: ProxyConfig
    context: int
    sizes: list[int]
    warmup: int
    autocast: Callable[[], Any]
    val_batches: list[tuple[torch.Tensor, torch.Tensor]]
    generator: torch.Generator
    model: torch.nn.Module
    params: list[torch.nn.Parameter]
    opt: Any
    max_norm: float
    check_every: int
    n_params: int
    n_params_total: int
    device: torch.device

    @property
    def flops_per_token(self) -> float:
        """6·N + 6·L·T·d with this run's N (counted for a builder's model)."""
        c = self.cfg
        return 6.0 * self.n_params + 6.0 * c.depth * c.context * c.width


@dataclass
class _Loop:
    """What the training steps leave behind."""

    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    init_loss: float = math.nan
    diverged: bool = False
    stopped: bool = False
    seen: int = 0
    steps_done: int = 0
    lr: float = 0.0
    train_s: float = 0.0


def _setup(
    cfg: ProxyConfig,
    hp: HParams,
    tokens: int,
    data: TokenData,
    seed: int,
    dev: torch.device,
    eval_batches: int,
    builder: Builder | None,
) -> _Setup:
    T = cfg.context
    sizes = batch_sizes(hp, tokens, T)
    on_cuda = dev.type == "cuda"

    def autocast() -> Any:
        if on_cuda:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    offsets = val_offsets(len(data.val), T, eval_batches * VAL_BATCH_SIZE)
    val_batches = []
    for chunk in np.split(offsets, eval_batches):
        x, y = gather_batch(data.val, chunk, T)
        val_batches.append((x.to(dev), y.to(dev)))
    generator = torch.Generator().manual_seed(_data_seed(seed))
    if len(data.train) <= T + 1:
        raise ValueError(f"the training split ({len(data.train)} tokens) is too short for {T=}")

    roles = None
    if builder is None:
        model: torch.nn.Module = build_model(cfg, seed=seed, device=dev)
        n_params, n_total = cfg.n_params(), cfg.n_params_total()
    else:
        own = prepare(builder, cfg, seed=seed, device=dev)
        model, roles = own.model, own.roles.trained()
        n_params, n_total = own.n_params, own.n_params_total
    params = [p for p in model.parameters() if p.requires_grad]
    decay = weight_decay_of(hp, len(sizes)) if hp.weight_decay_tau is not None else None
    groups = param_groups(model, cfg, hp, roles=roles, weight_decay=decay)
    return _Setup(
        cfg=cfg,
        context=T,
        sizes=sizes,
        warmup=warmup_steps(hp, len(sizes)),
        autocast=autocast,
        val_batches=val_batches,
        generator=generator,
        model=model,
        params=params,
        opt=make_optimizer(groups, hp),
        max_norm=hp.grad_clip if hp.grad_clip > 0 else math.inf,
        # one host sync per step is free on the CPU; on a GPU, check every few steps instead
        check_every=16 if on_cuda else 1,
        n_params=n_params,
        n_params_total=n_total,
        device=dev,
    )


def _diverged(loop: _Loop, flushed: list[list[float]], first: int, warmup: int) -> bool:
    """Record flushed (loss, grad norm) pairs of steps ``first``, ...; whether the run diverged:
    a non-finite loss, or the mean of the last DIVERGE_WINDOW losses above the bar."""
    diverged = False
    for i, (loss_i, gn_i) in enumerate(flushed):
        if math.isnan(loop.init_loss):
            loop.init_loss = loss_i
        loop.losses.append(loss_i)
        loop.grad_norms.append(gn_i)
        margin = DIVERGE_MARGIN if first + i >= warmup else DIVERGE_MARGIN_WARMUP
        window = loop.losses[-DIVERGE_WINDOW:]
        if not math.isfinite(loss_i) or sum(window) / len(window) > loop.init_loss + margin:
            diverged = True
    return diverged


def _loop(
    run: _Setup, hp: HParams, data: TokenData, eval_every: int | None, report: ReportFn | None
) -> _Loop:
    loop = _Loop(lr=hp.lr)
    total_steps = len(run.sizes)
    pending: list[tuple[torch.Tensor, torch.Tensor]] = []
    eval_s = 0.0
    t_loop = time.perf_counter()
    for step, b in enumerate(run.sizes):
        loop.lr = lr = lr_at(hp, step, total_steps)
        for group in run.opt.param_groups:
            group["lr"] = lr * group["lr_mult"]
        batch_offsets = sample_offsets(len(data.train), run.context, b, run.generator)
        ce = forward_backward(
            run.model, data.train, batch_offsets, hp.micro, hp.z_loss, run.autocast,
            context=run.context,
        )  # fmt: skip
        grad_norm = torch.nn.utils.clip_grad_norm_(run.params, run.max_norm, foreach=True)
        run.opt.step()
        run.opt.zero_grad(set_to_none=True)
        loop.seen += b * run.context
        loop.steps_done += 1
        pending.append((ce, grad_norm.detach()))

        last = step == total_steps - 1
        periodic = eval_every is not None and (step + 1) % eval_every == 0 and not last
        if step == 0 or len(pending) >= run.check_every or periodic or last:
            flushed = torch.stack([torch.stack(p) for p in pending]).tolist()
            first = step + 1 - len(pending)
            pending.clear()
            if _diverged(loop, flushed, first, run.warmup):
                loop.diverged = True
                logger.info("diverged at step %d (loss %.4g)", step, loop.losses[-1])
                break
        if periodic and report is not None:
            t_eval = time.perf_counter()
            val_loss = _evaluate(run.model, run.val_batches, run.autocast)
            eval_s += time.perf_counter() - t_eval
            if report(step + 1, _metrics(loop, step + 1, val_loss)):
                loop.stopped = True
                break
    loop.train_s = time.perf_counter() - t_loop - eval_s
    return loop


def _metrics(loop: _Loop, step: int, val_loss: float, **extra: float) -> dict[str, float]:
    return {
        "step": float(step),
        "tokens": float(loop.seen),
        "train_loss": loop.losses[-1] if loop.losses else math.nan,
        "lr": loop.lr,
        "grad_norm": loop.grad_norms[-1] if loop.grad_norms else math.nan,
        "val_loss": val_loss,
        **extra,
    }


def _finish(run: _Setup, loop: _Loop, report: ReportFn | None, t_start: float) -> TrainResult:
    val_loss = _evaluate(run.model, run.val_batches, run.autocast)
    diverged = loop.diverged
    if not math.isfinite(val_loss):
        diverged = True
        init = loop.init_loss
        val_loss = init if math.isfinite(init) else math.log(run.cfg.vocab_size)
    finite = [v for v in loop.losses if math.isfinite(v)]
    train_loss = float(np.mean(finite[-_TRAIN_LOSS_WINDOW:])) if finite else val_loss
    norms = [g for g in loop.grad_norms if math.isfinite(g)]
    tokens_per_s = loop.seen / loop.train_s if loop.train_s > 0 else 0.0
    result = TrainResult(
        val_loss=val_loss,
        train_loss=train_loss,
        init_loss=loop.init_loss,
        diverged=diverged,
        stopped=loop.stopped,
        tokens=loop.seen,
        steps=loop.steps_done,
        wall_s=time.perf_counter() - t_start,
        tokens_per_s=tokens_per_s,
        flops_per_s=run.flops_per_token * tokens_per_s,
        grad_norm_mean=float(np.mean(norms)) if norms else math.nan,
        grad_norm_max=float(np.max(norms)) if norms else math.nan,
        n_params=run.n_params,
        n_params_total=run.n_params_total,
        device=str(run.device),
    )
    if report is not None and not loop.stopped:
        # the end-of-run call, whatever step the run stopped at; train_loss is the window mean
        metrics = _metrics(loop, loop.steps_done, val_loss, final=1.0)
        metrics["train_loss"] = train_loss
        report(loop.steps_done, metrics)
    return result

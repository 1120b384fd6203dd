"""The coordinate check: does the parametrization keep activations the same size across widths?

For each width, the model (the proxy, or a builder's model parametrized by role) takes ``steps``
optimizer steps at one LR on one fixed batch stream, then one more forward pass on a fixed batch
records the RMS of the outputs of the modules of each role: ``embedding`` (the embedding
lookups), ``hidden`` (every module holding a hidden matrix, averaged), ``readout`` (the logits),
and ``delta_logits``, the RMS of the change of the logits since initialisation. Under a working
muP these are flat in width after a few steps; under SP the readout and its change grow with
width (Tensor Programs V, Fig. 5). :func:`slopes` fits log RMS against log width per quantity.

One seed is not enough to judge: after 5 steps at a usual LR the logits' RMS of one width moves
by 2-3x from seed to seed, so a one-seed slope misjudged a correct muP (2 of 5 seeds) and passed
a broken one. :func:`judge` takes the rows of several seeds (:func:`coord_check` once per seed),
averages each width's RMS over them (as microsoft/mup's coord check does, ``nseeds``) and calls
a quantity width-unstable when

- its slope (of log mean RMS against log width) is beyond :data:`STABLE_SLOPE` by more than
  :data:`SLOPE_Z` of its seed-to-seed standard errors (the spread of the per-seed slopes / √n), or
- its mean RMS varies across the widths by more than :data:`STABLE_RATIO` (max / min), or by
  more than a power law at the slope bound would over the widths checked ((w_max / w_min) ^
  :data:`STABLE_SLOPE`, which is the larger from 32x widths on: 2.3 over 64x; a review found a
  slope of 0.17, inside the bound, failed by a fixed 2 over 64x): a curve that is not flat
  whatever line fits it (one seed's readout RMS 1.45, 2.34, 3.23, 0.96 has a slope of -0.13).

A width whose run diverged (a non-finite activation or probe loss, or a probe loss more than
:data:`proxy_models.training.DIVERGE_MARGIN` nats above its value at initialisation: activations
of 1e9 after 5 steps at LR 30 had been judged by their slope) is not judged at all: the verdict
is ``"diverged"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from proxy_models.data import TokenData, gather_batch, sample_offsets
from proxy_models.hparams import HParams
from proxy_models.model import build_model
from proxy_models.optim import make_optimizer
from proxy_models.parametrization import param_groups
from proxy_models.roles import RoleMap, classify, find_readout

if TYPE_CHECKING:
    from proxy_models.builder import Builder
    from proxy_models.config import ProxyConfig

__all__ = [
    "DEFAULT_SEEDS",
    "QUANTITIES",
    "SLOPE_Z",
    "STABLE_RATIO",
    "STABLE_SLOPE",
    "CoordRow",
    "CoordVerdict",
    "coord_check",
    "diverged",
    "judge",
    "ratio_limit",
    "slopes",
]

QUANTITIES: tuple[str, ...] = ("embedding", "hidden", "readout", "delta_logits")

#: |d log RMS / d log width| at or below which an activation counts as width-stable (SP's readout
#: grows with slope ~0.5-1 in a few steps, its hidden activations ~1; a working muP stays within
#: ~0.2, the smallest widths' finite-width effects included)
STABLE_SLOPE = 0.2
#: a slope counts as beyond :data:`STABLE_SLOPE` only when it is so by more than this many of its
#: seed-to-seed standard errors
SLOPE_Z = 2.0
#: max / min of a quantity's seed-averaged RMS across the widths above which it is not flat
STABLE_RATIO = 2.0
#: seeds a coordinate check averages by default (one seed misjudged a correct muP 2 times in 5)
DEFAULT_SEEDS = 3


@dataclass(frozen=True)
class CoordRow:
    """One width's activation RMS after ``steps`` steps (and the initial logits' RMS), and the
    cross-entropy of the fixed probe batch at initialisation (``loss_init``) and after the steps
    (``loss``). A role with no module to measure is absent from ``rms``."""

    width: int
    steps: int
    rms: dict[str, float]
    rms_init: dict[str, float]
    loss: float = math.nan
    loss_init: float = math.nan
    seed: int = 0


def diverged(row: CoordRow) -> bool:
    """Whether the run of ``row`` diverged: a non-finite activation RMS or probe loss, or a probe
    loss more than :data:`~proxy_models.training.DIVERGE_MARGIN` nats above its initial value
    (the training loop's own bar after its warmup; a coordinate check has no warmup)."""
    from proxy_models.training import DIVERGE_MARGIN

    if not all(math.isfinite(v) for v in row.rms.values()):
        return True
    if math.isnan(row.loss) and math.isnan(row.loss_init):  # (a row made without the probe loss)
        return False
    return not (math.isfinite(row.loss) and row.loss <= row.loss_init + DIVERGE_MARGIN)


def _model(
    cfg: ProxyConfig, seed: int, builder: Builder | None
) -> tuple[nn.Module, RoleMap | None]:
    if builder is None:
        return build_model(cfg, seed=seed), None
    from proxy_models.builder import prepare

    own = prepare(builder, cfg, seed=seed)
    return own.model, own.roles


def _role_modules(
    model: nn.Module, cfg: ProxyConfig, roles: dict[str, str] | None
) -> dict[str, list[str]]:
    """Module names per role (a module's role is its weight's)."""
    if roles is None:  # the proxy: the same rules as a builder's model, without a wide build
        idx = torch.zeros((1, min(8, cfg.context)), dtype=torch.long)
        readout, _ = find_readout(model, idx, cfg.vocab_size)
        roles = dict(
            classify(model, readout=readout, vocab_size=cfg.vocab_size, context=cfg.context).roles
        )
    out: dict[str, list[str]] = {"embedding": [], "hidden": [], "readout": []}
    for name, role in roles.items():
        mod = name.rsplit(".", 1)[0] if "." in name else ""  # a root parameter has no module
        if role in out and mod and mod not in out[role]:
            out[role].append(mod)
    return out


def _measure(
    model: nn.Module, groups: dict[str, list[str]], x: torch.Tensor, y: torch.Tensor
) -> tuple[dict[str, float], torch.Tensor, float]:
    """RMS per role (a role without modules left out: not measured, not a divergence), the
    logits, and the probe batch's cross-entropy."""
    modules = dict(model.named_modules())
    sums: dict[str, list[float]] = {k: [] for k in groups}
    hooks = []
    for role, names in groups.items():
        for n in names:

            def hook(_m: Any, _i: Any, o: Any, _r: str = role) -> None:
                t = o[0] if isinstance(o, tuple) else o
                if isinstance(t, torch.Tensor):
                    sums[_r].append(float(t.detach().float().pow(2).mean().sqrt()))

            hooks.append(modules[n].register_forward_hook(hook))
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in hooks:
            h.remove()
    rms = {k: float(np.mean(v)) for k, v in sums.items() if v}
    rms["readout"] = float(logits.float().pow(2).mean().sqrt())
    loss = float(nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten()))
    return rms, logits.detach(), loss


def coord_check(
    configs: list[ProxyConfig],
    hp: HParams,
    *,
    data: TokenData,
    steps: int = 5,
    batch_size: int = 8,
    seed: int = 0,
    builder: Builder | None = None,
) -> list[CoordRow]:
    """One :class:`CoordRow` per config (module docstring), at one ``seed`` (the init's; the
    batches' is ``seed + 1``). ``hp.lr`` is the LR every width takes (its schedule is ignored: a
    constant LR). :func:`judge` reads the rows of several seeds. torch's threads: as a run's
    ($SWEEPER_THREADS, else torch's default)."""
    from proxy_models.training import _torch_threads

    with _torch_threads(None):
        return [_one_width(cfg, hp, data, steps, batch_size, seed, builder) for cfg in configs]


def _one_width(
    cfg: ProxyConfig,
    hp: HParams,
    data: TokenData,
    steps: int,
    batch_size: int,
    seed: int,
    builder: Builder | None,
) -> CoordRow:
    """One width's :class:`CoordRow` (:func:`coord_check`)."""
    T = cfg.context
    probe_gen = torch.Generator().manual_seed(12345)
    px, py = gather_batch(data.val, sample_offsets(len(data.val), T, batch_size, probe_gen), T)
    model, roles = _model(cfg, seed, builder)
    groups = _role_modules(model, cfg, dict(roles.roles) if roles else None)
    rms0, logits0, loss0 = _measure(model, groups, px, py)
    trained = roles.trained() if roles else None
    opt = make_optimizer(param_groups(model, cfg, hp, roles=trained), hp)
    gen = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        x, y = gather_batch(data.train, sample_offsets(len(data.train), T, batch_size, gen), T)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters()], hp.grad_clip or math.inf)
        opt.step()
        opt.zero_grad(set_to_none=True)
    rms, logits, loss_end = _measure(model, groups, px, py)
    rms["delta_logits"] = float((logits - logits0).float().pow(2).mean().sqrt())
    return CoordRow(cfg.width, steps, rms, rms0, loss_end, loss0, seed)


def _slope(widths: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares d log value / d log width over the positive finite values (NaN below 2)."""
    lw, y = np.log(np.asarray(widths, dtype=float)), np.asarray(values, dtype=float)
    ok = np.isfinite(y) & (y > 0)
    return float(np.polyfit(lw[ok], np.log(y[ok]), 1)[0]) if ok.sum() >= 2 else math.nan


def slopes(rows: list[CoordRow]) -> dict[str, float]:
    """d log RMS / d log width per quantity (least squares over the widths)."""
    w = [r.width for r in rows]
    return {q: _slope(w, [r.rms.get(q, math.nan) for r in rows]) for q in QUANTITIES}


@dataclass(frozen=True)
class CoordVerdict:
    """A coordinate check of several seeds, judged (module docstring).

    ``rms``: per width, each quantity's RMS averaged over the seeds (a quantity measured at no
    width is left out; NaN where a seed's value is not finite). ``slopes``: of log mean RMS
    against log width; ``slope_se``: the standard error of the per-seed slopes (NaN with one
    seed); ``ratios``: max / min of the mean RMS across the widths. ``verdict`` is
    ``"width-stable"``, ``"not width-stable"`` (``unstable`` names the quantities, ``reasons``
    says why; ``unstable_slope`` and ``unstable_ratio`` those failing each test) or
    ``"diverged"`` (``diverged`` lists the (width, seed) runs; nothing is judged and
    ``stable`` is None)."""

    widths: list[int]
    seeds: list[int]
    rms: list[dict[str, float]]
    rms_init: list[dict[str, float]]
    slopes: dict[str, float]
    slope_se: dict[str, float]
    ratios: dict[str, float]
    verdict: str
    stable: bool | None
    unstable: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    unstable_slope: list[str] = field(default_factory=list)
    unstable_ratio: list[str] = field(default_factory=list)
    diverged: list[tuple[int, int]] = field(default_factory=list)
    blow_up: str = ""
    #: the max / min above which a quantity is not flat over these widths (module docstring)
    ratio_limit: float = STABLE_RATIO


def _mean_rms(rows_by_seed: list[list[CoordRow]], i: int, attr: str) -> dict[str, float]:
    keys = [q for q in QUANTITIES if any(q in getattr(rs[i], attr) for rs in rows_by_seed)]
    out = {}
    for q in keys:
        vals = [getattr(rs[i], attr).get(q, math.nan) for rs in rows_by_seed]
        out[q] = float(np.mean(vals))
    return out


def ratio_limit(
    widths: Sequence[float], *, bound: float = STABLE_SLOPE, ratio: float = STABLE_RATIO
) -> float:
    """The max / min of a quantity's RMS across ``widths`` above which it is not flat: ``ratio``,
    or what a power law at the slope ``bound`` spans over them, where larger (module docstring)."""
    return max(ratio, (max(widths) / min(widths)) ** bound)


def judge(
    rows_by_seed: Sequence[list[CoordRow]],
    *,
    bound: float = STABLE_SLOPE,
    ratio: float = STABLE_RATIO,
    z: float = SLOPE_Z,
) -> CoordVerdict:
    """The verdict on the rows of one or more seeds (each a :func:`coord_check` of the same
    widths; module docstring)."""
    runs = [list(rs) for rs in rows_by_seed]
    if not runs or not runs[0]:
        raise ValueError("judge: no rows")
    widths = [r.width for r in runs[0]]
    if any([r.width for r in rs] != widths for rs in runs):
        raise ValueError("judge: every seed's rows must be of the same widths, in one order")
    seeds = [rs[0].seed for rs in runs]
    rms = [_mean_rms(runs, i, "rms") for i in range(len(widths))]
    rms_init = [_mean_rms(runs, i, "rms_init") for i in range(len(widths))]
    quantities = [q for q in QUANTITIES if any(q in m for m in rms)]
    sl, se, rat = {}, {}, {}
    for q in quantities:
        ys = [m.get(q, math.nan) for m in rms]
        sl[q] = _slope(widths, ys)
        per_seed = [_slope(widths, [r.rms.get(q, math.nan) for r in rs]) for rs in runs]
        se[q] = (
            float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed)))
            if len(per_seed) > 1 and all(math.isfinite(v) for v in per_seed)
            else math.nan
        )
        pos = [y for y in ys if math.isfinite(y) and y > 0]
        rat[q] = max(pos) / min(pos) if len(pos) >= 2 else math.nan
    bad = [(r.width, r.seed) for rs in runs for r in rs if diverged(r)]
    if bad:
        return CoordVerdict(
            widths, seeds, rms, rms_init, sl, se, rat, "diverged", None,
            diverged=bad, blow_up=_blow_up(runs),
        )  # fmt: skip
    reasons: dict[str, str] = {}
    by_slope, by_ratio = [], []
    ratio = ratio_limit(widths, bound=bound, ratio=ratio)
    for q in quantities:
        s, e, r = sl[q], se[q], rat[q]
        why = []
        if math.isfinite(s) and abs(s) - z * (e if math.isfinite(e) else 0.0) > bound:
            spread = f" ± {e:.2f}" if math.isfinite(e) else ""
            why.append(f"slope {s:+.2f}{spread}, beyond ±{bound:g}")
            by_slope.append(q)
        if math.isfinite(r) and r > ratio:
            why.append(f"max/min {r:.2f} across widths > {ratio:.3g}")
            by_ratio.append(q)
        if why:
            reasons[q] = "; ".join(why)
    unstable = list(reasons)
    verdict = "not width-stable" if unstable else "width-stable"
    return CoordVerdict(
        widths, seeds, rms, rms_init, sl, se, rat, verdict, not unstable, unstable, reasons,
        by_slope, by_ratio, ratio_limit=ratio,
    )  # fmt: skip


def _blow_up(runs: list[list[CoordRow]]) -> str:
    """One line on the worst diverged run: its width, seed, largest activation and probe loss."""
    worst: tuple[float, str] | None = None
    for rs in runs:
        for r in rs:
            if not diverged(r):
                continue
            big = [(v, q) for q, v in r.rms.items() if math.isfinite(v)]
            nan = [q for q, v in r.rms.items() if not math.isfinite(v)]
            v, q = max(big) if big else (math.nan, "")
            text = f"width {r.width} seed {r.seed}: probe loss {r.loss:.4g} "
            text += f"(init {r.loss_init:.4g})"
            text += f", non-finite {', '.join(nan)}" if nan else f", {q} RMS {v:.3g}"
            key = math.inf if nan or not math.isfinite(r.loss) else r.loss - r.loss_init
            if worst is None or key > worst[0]:
                worst = (key, text)
    return worst[1] if worst else ""

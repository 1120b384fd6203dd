"""From fitted laws to a full training recipe for one target model, with intervals and provenance.

``recommend(laws, target, hardware)`` is pure: it evaluates the LR and batch laws at the target's
scale (in each law's own conventions, see :mod:`sweeper.recipe.scale`), turns the batch into a
global batch in sequences that the hardware can run (:mod:`sweeper.recipe.hardware`), adds the
schedule and optimizer settings that the laws do not measure (each a documented default, see
:class:`RecipeDefaults`), estimates memory (with the states of the LR law's optimizer, which the
recipe runs) and time, and says how far the laws are being extrapolated and what else to
distrust.

Compute: ``Target.compute`` and ``Recipe.flops`` are Sweeper's "6ND" compute (attention
included), so ``Recipe.flops == Target.compute`` for a compute budget; the time counts the output
layer too (``Recipe.train_flops``), which the laws' compute leaves out. The loss law's compute
optimum is defined under Chinchilla's C = 6·N·D; a compute-only target is converted at that
boundary: N minimises the loss law's L(N, D) with D = C / (6·N + 6·L·T·d) (shape from N as
:func:`~sweeper.recipe.scale.infer_shape` infers it), not the closed form at C.

What a law was measured under, and where a recipe leaves it, earns a warning: a target vocabulary
other than the law's (bytes against tokens), a target D, D/N, N or batch outside the range the law
held fixed (``conventions.held``, see :mod:`sweeper.fitting.power_law`), and a schedule, min LR,
warmup or z-loss other than the LR law's. Under muP/CompleteP the recipe's init std is the
proxies' (``conventions.init_std``, at the base width): LR and init transfer together.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from proxy_models.rules import PARAMETRIZATIONS, Rules, sp_small_init_std
from sweeper.errors import TargetError
from sweeper.fitting.laws import Law, LossLaw, PowerLaw
from sweeper.recipe.doubts import (
    above_point_warnings,
    batch_coupling_warning,
    below_ladder,
    check_parametrization,
    extrapolation_summary,
    quality_warnings,
    refuse_beyond_form,
    refuse_undetermined,
    schedule_warnings,
)
from sweeper.recipe.hardware import (
    BatchPlan,
    Hardware,
    RampUp,
    plan_batch,
    plan_rampup,
    positive,
)
from sweeper.recipe.memory import head_flops, train_flops, train_time_s
from sweeper.recipe.optimizer_settings import measured_settings
from sweeper.recipe.recipe import Interval, Recipe
from sweeper.recipe.scale import (
    BYTE_VOCAB,
    HELD_SLACK,
    ResolvedShape,
    evaluate_law,
    flops_convention_warnings,
    law_label,
    law_scale,
    loss_outside_text,
    token_factor,
    token_unit_warnings,
)
from sweeper.recipe.schedule import Schedule, resolve_schedule
from sweeper.recipe.target import ResolvedTarget, Target, resolve_target
from sweeper.recipe.warning_kinds import FORCED, Doubt, by_importance

__all__ = ["PARAMETRIZATIONS", "RecipeDefaults", "recommend"]


@dataclass(frozen=True)
class RecipeDefaults:
    """The settings the laws do not measure, each with its source.

    - ``min_lr_ratio`` 0.1: decay to 10% of peak (GPT-3, LLaMA), when the LR law records no
      decaying schedule's (the recipe's schedule is the law's: :mod:`sweeper.recipe.schedule`).
    - ``decay_fraction`` 0.2: a WSD decay over the last 20% of the steps (the proxies' default,
      ``StudySpec``'s train.decay_fraction; Hägele et al. 2024, arXiv:2405.18392, find 20%
      matches a cosine), when the LR law records none.
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
    - init std: :func:`proxy_models.rules.sp_small_init_std`, sqrt(2 / (5·d)). Under muP it is
      the proxies' base-width std (the implementation scales it by the width multiplier).
    """

    min_lr_ratio: float = 0.1
    decay_fraction: float = 0.2
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


def _law_id(law: Law) -> int | str:
    return law.id if law.id is not None else f"{law.source}:{law.target}"


def _provenance(law: Law, *, fallback: bool = False) -> dict[str, Any]:
    """What the recipe records of a law it used: the law's JSON form without its samples."""
    d = law.to_dict(include_samples=False) if isinstance(law, PowerLaw) else law.to_dict()
    d["fallback"] = fallback
    return d


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
        warnings.append(Doubt(f"{msg} {FORCED}"))
    base_width = target.base_width or base_width
    if base_width is None:
        raise TargetError(
            f"a {target.parametrization} target needs a base width (none on the target or the "
            "law): give the width its LR was measured at (--base-width)"
        )
    return base_width, target.base_depth or base_depth


def _init_std(
    lr_law: Law,
    parametrization: str,
    base_width: int | None,
    base_depth: int | None,
    shape: ResolvedShape,
    warnings: list[str],
    *,
    given: float | None = None,
) -> tuple[float, str]:
    """(init std, what it means). SP: the small-init heuristic at the target width. muP and
    CompleteP: the proxies' std at the base width (``conventions.init_std``), which transfers
    with the LR; hidden matrices scale it by sqrt(base_width / width) (:mod:`proxy_models.rules`).
    ``given``: the std asked for (under SP every matrix's; under muP/CompleteP the base width's,
    scaled as the rule says), with a warning where it differs from the proxies'."""
    if given is not None:
        return _given_init_std(lr_law, parametrization, base_width, base_depth, shape, given,
                               warnings)  # fmt: skip
    if parametrization == "sp" or base_width is None:
        small = sp_small_init_std(shape.width)
        measured = lr_law.conventions.init_std
        conv = lr_law.conventions
        if measured is None and (conv.model_builder or conv.train_function):
            own = "model builder" if conv.model_builder else "training function"
            warnings.append(
                f"lr law ({law_label(lr_law)}) records no init std (its {own}'s own init): this "
                f"recipe's small init at width {shape.width}, {small:.4g}, was not measured; under "
                "SP the optimal LR depends on the init, so init as the proxies were, or confirm "
                "the LR with a short run"
            )
        elif measured and not 1 / HELD_SLACK <= small / measured <= HELD_SLACK:
            warnings.append(
                f"lr law ({law_label(lr_law)}) was measured at init std {measured:.4g}; this "
                f"recipe's small init at width {shape.width} is {small:.4g}: under SP the "
                f"optimal LR depends on the init, so init at {measured:.4g} to stay in the "
                f"measured regime (--init-std {measured:.4g}), or confirm the LR with a short run"
            )
        return small, "sqrt(2/(5·d)), small init (Nguyen & Salazar 2019)"
    std = lr_law.conventions.init_std
    if std is None or std <= 0:
        std = sp_small_init_std(base_width)
        warnings.append(
            f"lr law ({law_label(lr_law)}) records no init std: the recipe's {std:.4g} is "
            f"sqrt(2/(5·{base_width})), not the proxies' own; under {parametrization} the init "
            "transfers with the LR, so use the std the proxies were trained with"
        )
        how = f"sqrt(2/(5·base width {base_width})), the proxies' std unknown"
    else:
        how = f"the proxies' init std at base width {base_width}"
    return std, how + _scaled_init_text(std, parametrization, shape, base_width, base_depth)


def _scaled_init_text(
    std: float, parametrization: str, shape: ResolvedShape, base_width: int, base_depth: int | None
) -> str:
    """How a muP/CompleteP model inits from the base-width ``std`` (:mod:`proxy_models.rules`)."""
    rules = Rules(parametrization, shape.width, shape.depth, base_width, base_depth or shape.depth)
    hidden = rules.hidden_init_std(std)
    return (
        f": embeddings and lm_head {std:.4g}; hidden matrices {std:.4g}·sqrt({base_width}/"
        f"{shape.width}) = {hidden:.4g}, the residual output projections also ÷ "
        f"sqrt(2·{rules.init_depth})"
    )


def _given_init_std(
    lr_law: Law,
    parametrization: str,
    base_width: int | None,
    base_depth: int | None,
    shape: ResolvedShape,
    given: float,
    warnings: list[str],
) -> tuple[float, str]:
    """The init std asked for (``init_std=``, ``--init-std``), with a warning when it leaves the
    std the LR law was measured at."""
    measured = lr_law.conventions.init_std
    if measured and not 1 / HELD_SLACK <= given / measured <= HELD_SLACK:
        warnings.append(
            f"lr law ({law_label(lr_law)}) was measured at init std {measured:.4g}; this "
            f"recipe's, as given, is {given:.4g}: the optimal LR depends on the init, so "
            "confirm the LR with a short run"
        )
    if parametrization == "sp" or base_width is None:
        return given, "as given"
    how = f"as given, at base width {base_width}"
    return given, how + _scaled_init_text(given, parametrization, shape, base_width, base_depth)


@dataclass(frozen=True)
class _LawsInUse:
    """The laws a recipe is made from: the LR law, the batch law (Step Law's when none was
    given: ``batch_given`` False), the loss law, and the base shape of a muP/CompleteP target."""

    lr: Law
    batch: Law
    batch_given: bool
    loss: LossLaw | None
    base_width: int | None
    base_depth: int | None

    def measured(self) -> list[tuple[str, Law]]:
        """(role, law) of the laws measured rather than assumed."""
        out: list[tuple[str, Law]] = [("lr", self.lr)]
        if self.batch_given:
            out.append(("batch", self.batch))
        if self.loss is not None:
            out.append(("loss", self.loss))
        return out


def _laws_in_use(
    laws: Mapping[str, Law],
    loss_law: LossLaw | None,
    target: Target,
    *,
    force: bool,
    warnings: list[str],
) -> _LawsInUse:
    if "lr" not in laws:
        raise TargetError(f"no lr law given (got {', '.join(sorted(laws)) or 'none'})")
    lr_law, given = laws["lr"], laws.get("batch_tokens")
    base_width, base_depth = _resolve_base(lr_law, given, target, force, warnings)
    batch_law = given
    if batch_law is None:
        from sweeper.recipe.published import published_laws

        batch_law = published_laws("steplaw")["batch_tokens"]
    else:
        warnings += _mixed_methods(lr_law, batch_law)
    return _LawsInUse(lr_law, batch_law, given is not None, loss_law, base_width, base_depth)


def _mixed_methods(lr_law: Law, batch_law: Law) -> list[str]:
    """The warning for an LR law and a batch law of one sweep fitted by different methods (the
    latest of each after a refit of one target): they are no longer one fit's pair."""
    family = {law.method.split("+")[0] for law in (lr_law, batch_law)}
    if len(family) < 2 or "published" in family or lr_law.source != batch_law.source:
        return []
    return [
        f"the lr law ({law_label(lr_law)}, {lr_law.method}) and the batch_tokens law "
        f"({law_label(batch_law)}, {batch_law.method}) were fitted by different methods: the "
        f"recipe pairs two fits; refit both by one (sweeper fit {lr_law.source} --method "
        f"{lr_law.method.split('+')[0]}) to use one fit's pair"
    ]


def _planned(batch: float, interval: tuple[float, float]) -> Interval:
    """The planned batch (the law's, rounded to the hardware) with the law's interval; a law
    without one (published: low = high) gives none around the planned batch either (the law's
    own value as both ends had put the value outside its interval)."""
    low, high = interval
    return Interval(batch, batch, batch) if low == high else Interval(batch, low, high)


def _check_overrides(
    warmup_steps: int | None, z_loss: float | None, init_std: float | None
) -> None:
    """TargetError for a warmup that is not a whole number of steps >= 1, a negative z-loss or
    an init std that is not positive."""
    problems: list[str] = []
    positive("init_std", init_std, problems)
    if warmup_steps is not None and (
        isinstance(warmup_steps, bool) or not isinstance(warmup_steps, numbers.Integral)
        or warmup_steps < 1
    ):  # fmt: skip
        problems.append(
            f"warmup_steps (--warmup-steps) must be a whole number >= 1, got {warmup_steps!r}"
        )
    if z_loss is not None and not (isinstance(z_loss, numbers.Real) and 0 <= z_loss < math.inf):
        problems.append(f"z_loss must be >= 0, got {z_loss!r}")
    if problems:
        raise TargetError("; ".join(problems))


def _check_inputs(level: float, bytes_per_token: float | None, global_batch: int | None) -> None:
    problems: list[str] = []
    positive("bytes_per_token", bytes_per_token, problems)
    positive("global_batch", global_batch, problems)
    positive("level", level, problems)
    if problems:  # (a string from Python raised TypeError from a comparison)
        raise TargetError("; ".join(problems))
    if not 0.0 < level < 1.0:
        raise TargetError(f"level must be in (0, 1), got {level}")
    if global_batch is not None and global_batch != int(global_batch):
        raise TargetError(f"global batch must be a positive integer, got {global_batch}")


def _evaluate(
    law: Law, role: str, scale: Mapping[str, float], seq_len: int, level: float, factor: float
) -> tuple[float, tuple[float, float]]:
    """The law's value and interval at the target (a batch in target tokens)."""
    got = evaluate_law(law, role, scale, seq_len=seq_len, level=level, factor=factor)
    if got is None:
        at = ", ".join(f"{k}={scale[k]:.3g}" for k in law.predictors)
        raise TargetError(
            f"{role} law ({law_label(law)}) predicts {law.predict(scale):.3g} at the target "
            f"({at}): outside its range"
        )
    value, low, high = got
    return value, (low, high)


def _fallback_batch_warning(used: _LawsInUse, b_law: float) -> str:
    msg = (
        f"no batch law with {law_label(used.lr)}: using Step Law's B = 0.58·D^0.571 tokens "
        f"(arXiv:2503.04715) as the fallback, {b_law:.3g} tokens at the target"
    )
    span = used.lr.conventions.held_span("batch_tokens")
    if span is not None:
        unit = "bytes" if used.lr.conventions.counts_bytes else "tokens"
        msg += f"; the lr law's optimum was measured at a batch of {span} {unit}"
    return msg


def _loss_scale(loss_law: LossLaw, m: ResolvedTarget, factor: float) -> dict[str, float]:
    """The loss law's N and D at the target (D in its units: ``factor`` per target token)."""
    n = loss_law.conventions.law_n(m.shape.n_params, m.shape.n_params_total)
    return {"n_params": n, "tokens": m.tokens * factor}


def _predicted_loss(
    loss_law: LossLaw | None, m: ResolvedTarget, factor: float, target: Target, warnings: list[str]
) -> float | None:
    """The loss law's prediction at the target, with a doubt where the target lies beyond the
    law's fitted N or D (a recommend audit's 1.1587 at 4,100× the largest N had read as a
    measurement)."""
    if loss_law is None:
        return None
    scale = _loss_scale(loss_law, m, factor)
    if loss_law.conventions.counts_bytes and target.vocab != BYTE_VOCAB:
        warnings.append(
            f"the predicted loss is the loss law's, in nats per byte ({law_label(loss_law)} "
            "was fitted on byte-level data)"
        )
    loss = float(loss_law.predict(scale))
    beyond = loss_outside_text(loss_law, scale)
    if beyond:
        warnings.append(
            Doubt(f"the predicted loss {loss:.4g} is the loss law's ({law_label(loss_law)}) "
                  f"extrapolated: {beyond}; read it as the law's form, not a measurement")
        )  # fmt: skip
    return loss


@dataclass(frozen=True)
class _Evaluated:
    """The LR and batch laws at the target: values, intervals (batch in target tokens), and the
    scales they were evaluated at."""

    lr: float  # the recommended LR: the risk-aware one when the law knows its loss curve
    lr_point: float  # the law's point estimate
    lr_regret: tuple[float, float] | None  # expected regret (% of loss) of lr and of lr_point
    lr_iv: tuple[float, float]
    batch: float
    batch_iv: tuple[float, float]
    lr_scale: Mapping[str, float]
    batch_scale: Mapping[str, float]


def _evaluate_laws(
    used: _LawsInUse,
    m: ResolvedTarget,
    *,
    level: float,
    bytes_per_token: float | None,
    force: bool,
    warnings: list[str],
) -> _Evaluated:
    """Both laws at the target, in their own conventions, with the doubts they raise; a law
    that does not determine its value there is refused unless ``force``."""
    s = m.shape

    def scale_for(law: Law) -> dict[str, float]:
        return law_scale(
            law,
            n_params=s.n_params,
            tokens=m.tokens,
            width=s.width,
            depth=s.depth,
            seq_len=s.seq_len,
            n_params_total=s.n_params_total,
            bytes_per_token=bytes_per_token,
        )

    lr_scale, b_scale = scale_for(used.lr), scale_for(used.batch)
    refuse_beyond_form(used.lr, "lr", lr_scale, force=force)
    if used.batch_given:
        refuse_beyond_form(used.batch, "batch", b_scale, force=force)
    lr_f, b_f = token_factor(used.lr, bytes_per_token), token_factor(used.batch, bytes_per_token)
    point, lr_iv = _evaluate(used.lr, "lr", lr_scale, s.seq_len, level, lr_f)
    lr, regret = _risk_aware(used.lr, lr_scale, point)
    warnings += above_point_warnings(used.lr, lr, point)
    b_law, b_iv = _evaluate(used.batch, "batch", b_scale, s.seq_len, level, b_f)
    if not used.batch_given:
        warnings.append(_fallback_batch_warning(used, b_law))
    forced = refuse_undetermined(used.lr, "lr", lr_iv, level, force=force)
    warnings += forced + quality_warnings(used.lr, "lr", lr_iv, level, span_said=bool(forced))
    warnings += flops_convention_warnings(used.lr, "lr")
    if used.batch_given:
        forced = refuse_undetermined(used.batch, "batch", b_iv, level, force=force)
        warnings += forced + quality_warnings(
            used.batch, "batch", b_iv, level, span_said=bool(forced)
        )
        warnings += flops_convention_warnings(used.batch, "batch")
    return _Evaluated(lr, point, regret, lr_iv, b_law, b_iv, lr_scale, b_scale)


def _risk_aware(
    law: Law, scale: Mapping[str, float], point: float
) -> tuple[float, tuple[float, float] | None]:
    """The LR to recommend and the expected regrets (% of loss) of it and of ``point``: a law
    that knows the loss curve around its optimum (a surface law) recommends the LR that minimises
    the expected loss over its uncertainty (below the point estimate when overshooting costs more,
    the cliff); any other law recommends its point estimate, with no regret known."""
    risk = getattr(law, "risk_optimal_lr", None)
    regret = getattr(law, "expected_regret", None)
    if risk is None or regret is None:
        return point, None
    lr = float(risk(scale))
    return lr, (float(regret(scale, lr).mean), float(regret(scale, point).mean))


def _plan_schedule(
    used: _LawsInUse,
    plan: BatchPlan,
    m: ResolvedTarget,
    hw: Hardware,
    dflt: RecipeDefaults,
    rampup: bool | None,
    sched: Schedule,
    warnings: list[str],
    warmup_steps: int | None = None,
) -> tuple[int, RampUp | None]:
    """(warmup steps, batch ramp-up) by the defaults' rules (``warmup_steps`` when given), with
    the schedule's warnings."""
    if warmup_steps is not None and warmup_steps > plan.total_steps:
        raise TargetError(
            f"warmup_steps {warmup_steps} exceeds the recipe's {plan.total_steps} steps"
        )
    warmup = warmup_steps or min(
        plan.total_steps,
        max(1, min(dflt.max_warmup_steps, round(dflt.warmup_fraction * plan.total_steps))),
    )
    warnings += schedule_warnings(
        used.lr,
        schedule=sched.name,
        min_lr_ratio=sched.min_lr_ratio,
        decay_fraction=sched.decay_fraction,
        warmup_steps=warmup,
        total_steps=plan.total_steps,
        z_loss=dflt.z_loss,
    )
    ramp: RampUp | None = None
    if rampup or (rampup is None and plan.global_batch >= dflt.rampup_min_sequences):
        seq_len = m.shape.seq_len
        unit = plan.micro * hw.gpus
        ramp = plan_rampup(plan.global_batch, unit, m.tokens, seq_len, dflt)
        if ramp is None:  # (an exports audit: a ramp asked for had vanished without a word)
            asked = "--rampup" if rampup else f"the default from {dflt.rampup_min_sequences}"
            why = (
                _one_step_text(plan, hw)
                if plan.global_batch < 2 * unit
                else "the ramp's share of the tokens is less than one sequence"
            )
            warnings.append(
                f"no batch ramp-up ({asked}): {why}; the run trains at the full batch from its "
                "first step"
            )
    if m.shape.width > 8192 and dflt.adam_eps >= 1e-8:
        warnings.append(
            f"width {m.shape.width}: consider a smaller Adam eps (1e-15, Wortsman et al. 2023) "
            "or Adam-atan2"
        )
    return warmup, ramp


def _one_step_text(plan: BatchPlan, hw: Hardware) -> str:
    """Why a global batch of one micro batch × GPUs cannot ramp up, and what can shrink its first
    step: a smaller micro batch only where it is above 1 (an audit was told "give a smaller
    --micro-batch" at micro batch 1)."""
    if plan.micro > 1:
        fix = "give a smaller --micro-batch to ramp up"
    elif hw.gpus > 1:
        fix = "fewer GPUs (--gpus) or a larger global batch (--global-batch) would ramp up"
    else:
        fix = "a larger global batch (--global-batch) would ramp up"
    return (
        f"the global batch {plan.global_batch} is one step of micro batch {plan.micro} × "
        f"{hw.gpus} GPUs, so no smaller whole batch can start it ({fix})"
    )


def _provenance_of(used: _LawsInUse) -> tuple[dict[str, Mapping[str, Any]], list[int | str]]:
    """The recipe's record of the laws it used, and their ids."""
    provenance: dict[str, Mapping[str, Any]] = {
        "lr": _provenance(used.lr),
        "batch_tokens": _provenance(used.batch, fallback=not used.batch_given),
    }
    law_ids: list[int | str] = [_law_id(used.lr), _law_id(used.batch)]
    if used.loss is not None:
        provenance["loss"] = _provenance(used.loss)
        law_ids.append(_law_id(used.loss))
    return provenance, law_ids


def _flops_and_time(m: ResolvedTarget, hw: Hardware) -> tuple[float, float | None]:
    """The target's compute (6·N·D + attention: the laws' convention, and a compute target's
    budget) and, with a peak throughput, its time, which counts the output layer's 6·V·d·D too
    (:func:`~sweeper.recipe.memory.head_flops`: left out, the time had been 7–16% short at a
    256K vocabulary; a recommend audit). TargetError when the compute overflows (a recipe JSON
    had said "flops": Infinity)."""
    s = m.shape
    flops = train_flops(s.n_params, m.tokens, depth=s.depth, width=s.width, seq_len=s.seq_len)
    if not math.isfinite(flops):
        raise TargetError(
            f"the target's compute overflows (N {s.n_params:.3g}, D {m.tokens:.3g}): no model "
            "that size can be trained"
        )
    if not hw.peak_tflops:
        return flops, None
    done = flops + head_flops(s.vocab, s.width, m.tokens)
    return flops, train_time_s(done, gpus=hw.gpus, peak_tflops=hw.peak_tflops, mfu=hw.mfu)


#: a training time above this (seconds: a year) is said to be one no run will take
_ABSURD_TIME_S: Final[float] = 365.25 * 86400.0


def _time_warnings(time_s: float | None, hw: Hardware) -> list[str]:
    """A doubt when the time is beyond a year (a recommend audit's 503 years on one GPU had
    come without a word): the plan needs more GPUs, or a smaller model or budget."""
    if time_s is None or time_s <= _ABSURD_TIME_S:
        return []
    years = time_s / _ABSURD_TIME_S
    return [
        Doubt(
            f"training takes {years:.3g} years on {hw.gpus} GPU{'s' if hw.gpus > 1 else ''} at "
            f"MFU {hw.mfu:.0%}: give more GPUs (--gpus), or a smaller model or budget"
        )
    ]


def _function_settings(lr_law: Law) -> list[str]:
    """A law measured through a training function: the recipe's optimizer settings it does not
    honour are Sweeper's defaults, not necessarily what the function ran (a law-sampler audit's
    loop never clipped and had no z-loss; the recipe wrote 1.0 and 1e-4 without a word)."""
    fn = lr_law.conventions.train_function
    if not fn:
        return []
    return [
        f"lr law ({law_label(lr_law)}) was measured with training function {fn!r}: the recipe's "
        "grad clip, weight decay and Adam betas are the study's where the function honours "
        "them (its LR convention lists those), Sweeper's defaults elsewhere; run the big model "
        "as the function did, or confirm the LR with a short run"
    ]


def _optimizer(lr_law: Law, warnings: list[str]) -> str:
    """The optimizer the recipe's LR is for: the LR law's, when the exports know it (else AdamW,
    with a warning: the optimal LR is a property of the optimizer)."""
    from proxy_models.hparams import OPTIMIZERS

    if lr_law.conventions.optimizer is None:
        why = "its training function chose its own" if lr_law.conventions.train_function else (
            "its runs were imported")  # fmt: skip
        warnings.append(
            f"lr law ({law_label(lr_law)}) records no optimizer ({why}): this recipe runs AdamW "
            "(confirm the LR with a short run)"
        )
        return "adamw"
    name = lr_law.conventions.optimizer.lower()
    if name in OPTIMIZERS:
        return name
    warnings.append(
        f"lr law ({law_label(lr_law)}) was measured with {name}; this recipe runs AdamW "
        "(confirm the LR with a short run)"
    )
    return "adamw"


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
    schedule: str | None = None,
    min_lr_ratio: float | None = None,
    decay_fraction: float | None = None,
    warmup_steps: int | None = None,
    z_loss: float | None = None,
    init_std: float | None = None,
) -> Recipe:
    """The recipe for ``target`` from ``laws`` (keyed by target: "lr" required, "batch_tokens"
    optional: without it Step Law's batch law B = 0.58·D^0.571 is used, named in the provenance
    and the warnings). Pure: no I/O.

    ``loss_law`` chooses D (or N and D) when the target leaves it open and gives the predicted
    loss. ``global_batch`` fixes the global batch in sequences instead of the law's (a multiple of
    micro batch × GPUs); ``rampup`` forces the batch ramp-up on or off (None: the rule of
    :class:`RecipeDefaults`); ``force`` lets through, each with a warning, a law of another
    parametrization or base width, one whose interval at the target is too wide to determine
    its value (:func:`~sweeper.recipe.doubts.refuse_undetermined`) and a published law beyond
    its data where its form fails (:func:`~sweeper.recipe.doubts.refuse_beyond_form`).
    ``bytes_per_token`` converts D and the batch of laws that count bytes into the
    target's tokens (None: no conversion, and a warning). ``schedule`` (cosine | wsd | linear |
    constant), ``min_lr_ratio`` and ``decay_fraction`` (WSD) override the LR law's measured
    schedule, which the recipe follows otherwise (:mod:`sweeper.recipe.schedule`).
    ``warmup_steps``, ``z_loss`` and ``init_std`` replace the defaults' (e.g. to run as the
    proxies that measured the LR did: the warnings name the values that match them). Raises
    :class:`TargetError` when the laws cannot serve the target. (Long only because the last
    statement names every field of the :class:`Recipe`.)
    """
    hw = hardware or Hardware()
    dflt = defaults or RecipeDefaults()
    warnings: list[str] = []
    _check_inputs(level, bytes_per_token, global_batch)
    _check_overrides(warmup_steps, z_loss, init_std)
    # (plain Python numbers from here: 256.0 and numpy's int64 had reached the exports, which
    # wrote "train_batch_size": 256.0 or failed to serialise; an API audit)
    global_batch = None if global_batch is None else int(global_batch)
    warmup_steps = None if warmup_steps is None else int(warmup_steps)
    init_std = None if init_std is None else float(init_std)
    if z_loss is not None:
        dflt = replace(dflt, z_loss=float(z_loss))
    used = _laws_in_use(laws, loss_law, target, force=force, warnings=warnings)
    sched = resolve_schedule(
        used.lr.conventions,
        schedule=schedule,
        min_lr_ratio=min_lr_ratio,
        decay_fraction=decay_fraction,
        default_ratio=dflt.min_lr_ratio,
        default_decay=dflt.decay_fraction,
    )
    warnings += token_unit_warnings(
        used.measured(), vocab=target.vocab, bytes_per_token=bytes_per_token, what="the target"
    )
    loss_f = token_factor(loss_law, bytes_per_token) if loss_law is not None else 1.0
    m = resolve_target(
        target, hw, loss_law, loss_f, warnings, conventions=used.lr.conventions, force=force
    )
    ev = _evaluate_laws(
        used, m, level=level, bytes_per_token=bytes_per_token, force=force, warnings=warnings
    )
    regime = [("lr", used.lr, token_factor(used.lr, bytes_per_token))]
    if used.batch_given:
        regime.append(("batch", used.batch, token_factor(used.batch, bytes_per_token)))
    optimizer = _optimizer(used.lr, warnings)  # (before the batch: its states size the memory)
    plan = plan_batch(
        regime, m, hw, ev.batch, ev.batch_iv, global_batch, warnings, optimizer=optimizer
    )
    if used.batch_given:  # (a batch fixed away from the law's: the LR given is the law's batch's)
        warnings += batch_coupling_warning(
            used.lr, used.batch, ev.batch, float(plan.batch_tokens), "the recipe's"
        )
    settings, said = measured_settings(used.lr, dflt, lr=ev.lr, total_steps=plan.total_steps)
    dflt = replace(dflt, **asdict(settings))  # (what the LR was measured under, where recorded)
    warnings += said
    warmup, ramp = _plan_schedule(used, plan, m, hw, dflt, rampup, sched, warnings, warmup_steps)
    init_std, init_note = _init_std(
        used.lr, target.parametrization, used.base_width, used.base_depth, m.shape, warnings,
        given=init_std,
    )  # fmt: skip
    s = m.shape
    flops, time_s = _flops_and_time(m, hw)
    scaled: list[tuple[str, Law, Mapping[str, float]]] = [("lr", used.lr, ev.lr_scale)]
    if used.batch_given:
        scaled.append(("batch", used.batch, ev.batch_scale))
    if loss_law is not None:  # (it chose N or D, or predicts the loss: beyond its data too)
        scaled.append(("loss", loss_law, _loss_scale(loss_law, m, loss_f)))
    factor, ext = extrapolation_summary(scaled, warnings)
    warnings += _time_warnings(time_s, hw)
    provenance, law_ids = _provenance_of(used)
    warnings += _function_settings(used.lr)
    predicted_loss = _predicted_loss(loss_law, m, loss_f, target, warnings)
    return Recipe(
        lr=Interval(ev.lr, *ev.lr_iv),
        batch_tokens=_planned(float(plan.batch_tokens), ev.batch_iv),
        batch_tokens_law=ev.batch,
        global_batch_sequences=plan.global_batch,
        micro_batch_size=plan.micro,
        grad_accum_steps=plan.global_batch // (plan.micro * hw.gpus),
        data_parallel=hw.gpus,
        seq_len=s.seq_len,
        min_lr_ratio=sched.min_lr_ratio,
        warmup_steps=warmup,
        total_steps=plan.total_steps,
        tokens=m.tokens,
        schedule=sched.name,
        decay_fraction=sched.decay_fraction,
        rampup=ramp,
        adam_beta1=dflt.adam_beta1,
        adam_beta2=dflt.adam_beta2,
        adam_eps=dflt.adam_eps,
        weight_decay=dflt.weight_decay,
        grad_clip=dflt.grad_clip,
        init_std=init_std,
        z_loss=dflt.z_loss,
        n_params=s.n_params,
        n_params_total=s.n_params_total,
        width=s.width,
        depth=s.depth,
        heads=s.heads,
        vocab=s.vocab,
        shape_inferred=not s.shape_given,
        flops=flops,
        parametrization=target.parametrization,
        base_width=used.base_width,
        base_depth=used.base_depth,
        precision=hw.precision,
        memory=plan.memory,
        train_time_s=time_s,
        predicted_loss=predicted_loss,
        extrapolation_factor=factor,
        extrapolation=ext,
        extrapolation_below=below_ladder(scaled),
        warnings=by_importance(warnings),
        law_ids=tuple(law_ids),
        provenance=provenance,
        target=target,
        hardware=hw,
        level=level,
        init_std_note=init_note,
        bytes_per_token=bytes_per_token,
        output_mult=used.lr.conventions.output_mult,
        lr_point=ev.lr_point,
        lr_regret_pct=ev.lr_regret[0] if ev.lr_regret else None,
        lr_point_regret_pct=ev.lr_regret[1] if ev.lr_regret else None,
        optimizer=optimizer,
        base_head_dim=used.lr.conventions.base_head_dim,
    )

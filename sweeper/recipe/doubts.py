"""What a recipe must warn about, beyond the numbers: a law that is poorly constrained or
published without uncertainty, a law of another parametrization, a long extrapolation, and an LR
measured under another schedule than the recipe's. Shared by recommend and check."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from sweeper.errors import TargetError
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import KaplanLRLaw, Law, PowerLaw
from sweeper.recipe.scale import HELD_SLACK, law_label
from sweeper.recipe.schedule import schedule_text
from sweeper.recipe.warning_kinds import FORCED, Doubt

__all__ = [
    "FAR_FACTOR",
    "VERY_FAR_FACTOR",
    "batch_coupling_warning",
    "below_ladder",
    "check_parametrization",
    "extrapolation_summary",
    "quality_warnings",
    "refuse_beyond_form",
    "refuse_undetermined",
    "schedule_warnings",
    "span_text",
    "undetermined",
]

FAR_FACTOR: Final[float] = 10.0
VERY_FAR_FACTOR: Final[float] = 1000.0
#: natural-log error above which a law's cross-validation error earns a warning (±50%)
POOR_LOG_ERROR: Final[float] = math.log(1.5)
#: interval high/low ratio above which the interval earns a warning
WIDE_INTERVAL: Final[float] = 4.0
#: ... and above which no recipe is written without force: 10 octaves, the value not placed
#: within ±5 octaves (the shipped ladders at a 1B target: 28-63×; at 70B: 101-354×)
UNDETERMINED_SPAN: Final[float] = 1000.0


#: above how many times the LR law's point estimate a recommended (risk-aware) LR is doubted
ABOVE_POINT: Final[float] = 1.1


def above_point_warnings(law: Law, lr: float, point: float) -> list[str]:
    """The doubt when the recommended (risk-aware) LR lies above ``law``'s point estimate by more
    than :data:`ABOVE_POINT`: the proxies' loss rose more slowly above their optimum than below
    it, which a large model's need not."""
    if not lr > point * ABOVE_POINT:
        return []
    return [
        Doubt(
            f"the recommended peak LR {lr:.4g} is {lr / point:.2g}× the lr law's "
            f"({law_label(law)}) point estimate {point:.4g} (the fitted loss rises more slowly "
            "above the optimum than below it, or the law's draws lean high), but a large model "
            "can diverge at LRs its small proxies survive (Wortsman et al. 2023, "
            "arXiv:2309.14322): the point estimate is the safer choice; confirm with a short run"
        )
    ]


def _log_error(err: float) -> str:
    """A natural-log error as the factor it is, either way (±65% read as 'down to -65%' where
    0.5 in ln is -39%; an import audit's 757 overflowed ``expm1``)."""
    return f"a factor of {math.exp(min(err, 700.0)):.3g}"


def quality_warnings(
    law: Law,
    role: str,
    interval: tuple[float, float],
    level: float = 0.95,
    *,
    span_said: bool = False,
) -> list[str]:
    """Warnings when ``law`` is poorly constrained (published laws carry no uncertainty);
    ``interval`` is the prediction's at the target, at confidence ``level``. ``span_said``: the
    interval's span has been said already (:func:`refuse_undetermined`, forced), not again."""
    out: list[str] = []
    name = f"{role} law ({law_label(law)})"
    if law.method == "published" or isinstance(law, KaplanLRLaw):
        return [f"{name} is published without uncertainty: its interval is the point itself"]
    if not isinstance(law, PowerLaw):
        return out
    for what, err in (("leave-one-cell-out", law.cv_error), ("largest-cell", law.holdout_error)):
        if err is not None and err > POOR_LOG_ERROR:
            out.append(Doubt(f"{name} {what} error is {_log_error(err)} (poorly constrained)"))
    lo, hi = interval
    if lo > 0 and hi / lo > WIDE_INTERVAL and not span_said:
        out.append(
            Doubt(
                f"{name} {level:.0%} interval {span_text(hi / lo)} at the target (poorly constrained)"
            )
        )
    for p, (clo, chi) in law.exponents_ci.items():
        b = law.exponents.get(p, 0.0)
        if (law.sign_undetermined(p) and b != 0.0) or chi - clo > 0.5:
            out.append(
                Doubt(f"{name} exponent of {p} is {b:+.3f} [{clo:+.3f}, {chi:+.3f}]: poorly known")
            )
    if 0 < law.n_cells < 3:
        out.append(Doubt(f"{name} is fitted on only {law.n_cells} cells"))
    return out


def undetermined(low: float, high: float) -> bool:
    """Whether an interval [low, high] is wider than :data:`UNDETERMINED_SPAN`: the law does not
    determine the value there (recommend refuses it, check says it says nothing)."""
    return low > 0 and high / low > UNDETERMINED_SPAN


def refuse_undetermined(
    law: Law, role: str, interval: tuple[float, float], level: float, *, force: bool
) -> list[str]:
    """A :class:`TargetError` when ``law``'s interval at the target is wider than
    :data:`UNDETERMINED_SPAN` (or unbounded): the law does not determine the value there, and a
    config written from its point would carry a guess (an LR of 38.6, or 2.7e64, had been
    exported with exit 0). With ``force`` the recipe is written, and a warning says so."""
    lo, hi = interval
    if not undetermined(lo, hi):
        return []
    what = f"{role} law ({law_label(law)}) {level:.0%} interval {span_text(hi / lo)} at the target"
    if force:
        return [Doubt(f"{what}: it does not determine the value; written anyway {FORCED}")]
    raise TargetError(
        f"{what} (wider than {UNDETERMINED_SPAN:.0f}×): the law does not determine the {role} "
        "there; narrow it (cells nearer the target, more seeds, a range around every cell's "
        "optimum) or write it anyway with force=True (--force)"
    )


def refuse_beyond_form(
    law: Law, role: str, scale: Mapping[str, float], *, force: bool
) -> None:
    """A :class:`TargetError` where ``law``'s value at ``scale`` is its formula's form rather than
    its data (:meth:`Law.beyond_form`: Kaplan's LR near its zero), unless ``force``; then the
    regime warning says it. ``check`` had refused to compare a 7B recipe with Kaplan's LR there
    while ``recommend`` and ``export`` wrote that LR, 7.7e-5, with exit 0 (a laws audit)."""
    why = None if force else law.beyond_form(scale)
    if why is not None:
        raise TargetError(
            f"{role} law ({law_label(law)}): {why}; use a law fitted on your sweeps or another "
            "published one, or write it anyway with force=True (--force)"
        )


def coupling_factor(lr_law: Law, batch_law: Law | None, ratio: float) -> float | None:
    """How the LR law's optimum moves at a batch ``ratio`` times its batch law's, where the LR
    law measured that (:meth:`~sweeper.fitting.surface.SurfaceLaw.batch_shift`) and the batch
    law is the same fit's (same source and method); None otherwise, or for a ratio that is not
    finite and positive."""
    shift = getattr(lr_law, "batch_shift", None)
    if shift is None or batch_law is None or batch_law.target != "batch_tokens":
        return None
    if (batch_law.source, batch_law.method) != (lr_law.source, lr_law.method):
        return None
    factor = shift(ratio)
    return factor if factor is not None and math.isfinite(factor) else None


def batch_coupling_warning(
    lr_law: Law, batch_law: Law | None, law_batch: float, batch: float, whose: str
) -> list[str]:
    """A warning when the LR law measured how the best LR moves with the batch (a surface fit
    of a batch sweep: :meth:`~sweeper.fitting.surface.SurfaceLaw.batch_shift`) and ``batch``
    (``whose``: the recipe's) is not the batch law's ``law_batch`` (same fit, same units): the
    LR given is the optimum at the law's batch; at ``batch`` the fit puts it elsewhere. An audit
    found check silently comparing a 4M-token recipe's LR with the optimum at 6.6M."""
    factor = coupling_factor(lr_law, batch_law, batch / law_batch)
    if factor is None or abs(math.log2(factor)) < 0.1:
        return []
    text = (
        f"lr law ({law_label(lr_law)}): its optimum moves with the batch (measured within its "
        f"cells): at {whose} batch of {batch:.3g} tokens instead of the law's {law_batch:.3g}, "
        f"the optimal LR is {factor:.3g}× the one given ({math.log2(factor):+.2f} octave)"
    )
    if abs(math.log(batch / law_batch)) > math.log(8.0):
        text += "; that far from the law's batch the factor is an extrapolation"
    return [text]


def span_text(ratio: float) -> str:
    """How wide an interval is, as its high/low ratio ("spans 14×", "spans 5.93e+35×"), or
    "is unbounded" when its high end is infinite."""
    return "is unbounded" if math.isinf(ratio) else f"spans {ratio:.3g}×"


def check_parametrization(
    law: Law,
    role: str,
    parametrization: str,
    *,
    force: bool,
    warnings: list[str],
    subject: str = "the target",
) -> tuple[int | None, int | None]:
    """Refuse (TargetError) a law fitted under another parametrization than ``parametrization``
    (that of ``subject``: "the target" of a recommendation, or a recipe being checked) unless
    ``force`` (then warn); return the law's base width and depth. For the target the refusal
    names the fix first: give the target the law's parametrization."""
    p = law.parametrization
    if p is None:
        warnings.append(
            f"{role} law ({law_label(law)}) records no parametrization: assumed {parametrization}"
        )
        return None, None
    if p != parametrization:
        msg = (
            f"{role} law ({law_label(law)}) was fitted under {p} but {subject} is {parametrization}"
        )
        if force:
            warnings.append(Doubt(f"{msg}: a {p} law transfers only to a {p} model {FORCED}"))
        elif subject == "the target":
            raise TargetError(
                f"{msg}: for a {p} model set the target's parametrization "
                f"(Target(parametrization={p!r}), --parametrization {p}); a {p} law transfers "
                f"only to a {p} model (to use it for {parametrization} anyway: force=True, --force)"
            )
        else:
            # (the API's name, then the flag, as elsewhere: "CheckValues(parametrization=...)"
            # had stood first in a CLI error, and for a published recipe, a verbs audit)
            raise TargetError(
                f"{msg}: a {p} law transfers only to a {p} model; check a {p} recipe given as "
                f"numbers (parametrization={p!r}, --parametrization {p}), or use the law anyway "
                "(force=True, --force)"
            )
    return law.base_width, law.base_depth


def extrapolation_summary(
    used: list[tuple[str, Law, Mapping[str, float]]], warnings: list[str]
) -> tuple[float | None, dict[str, float]]:
    """Largest ratio of target to largest proxy per predictor over the laws used, and warnings:
    a far extrapolation above the ladder, and a target below its smallest proxy (by more than
    the slack :data:`~sweeper.recipe.scale.HELD_SLACK` between 12·L·d² and a counted N)."""
    ext: dict[str, float] = {}
    lr_far = 0.0  # (the LR and batch laws' own: the loss law's asks for no LR run, a review)
    farthest: Law | None = None  # (the law the factor is of: a published one's is no proxy's)
    for role, law, scale in used:
        if not law.domain:
            warnings.append(
                f"{role} law ({law_label(law)}) records no domain: extrapolation unknown"
            )
            continue
        own = {k: scale[k] for k in law.predictors if k in scale}
        for p, r in law.extrapolation(own).items():
            if r > max(ext.values(), default=0.0):
                farthest = law
            ext[p] = max(ext.get(p, 0.0), r)
            lr_far = lr_far if role == "loss" else max(lr_far, r)
        warnings += [_below_warning(role, law, p, v, lo) for p, v, lo in _below(law, scale)]
    if not ext:
        return None, ext
    factor = max(ext.values())
    detail = ratios_text(ext)
    # (a published law was fitted on the paper's models, not on proxies of Sweeper's: with a
    # fitted LR law and DeepSeek's batch law, DeepSeek's 2e19 FLOPs had been "the largest proxy")
    largest = "the largest proxy"
    if farthest is not None and farthest.method == "published":
        largest = f"the largest model of {law_label(farthest)}'s fit"
    if factor >= VERY_FAR_FACTOR:
        check = (
            "confirm the LR with a short run at the target"
            if lr_far >= VERY_FAR_FACTOR
            else "the loss law's N or D and its predicted loss are its form's there"
        )
        warnings.append(
            Doubt(
                f"very far extrapolation: {factor:.3g}× beyond {largest} ({detail}); at "
                f"≥{VERY_FAR_FACTOR:.0f}× a small error in an exponent becomes a large error in "
                f"the value: {check}"
            )
        )
    elif factor >= FAR_FACTOR:
        warnings.append(
            Doubt(f"far extrapolation: {factor:.3g}× beyond {largest} ({detail})")
        )
    return factor, ext


def extrapolation_text(factor: float | None, ext: Mapping[str, float]) -> str:
    """The extrapolation factor as the recipe's table and the exports' headers write it: the
    largest ratio, then each predictor's (``tokens 3.05e+03×``), so that a law that does not model
    N is seen not to count it ("unknown" when no law recorded a domain)."""
    if factor is None:
        return "unknown"
    return f"{factor:.3g}× ({ratios_text(ext)})" if ext else f"{factor:.3g}×"


def ratios_text(ext: Mapping[str, float]) -> str:
    """Each predictor's extrapolation ratio, ``n_params 16×, tokens 1×``."""
    return ", ".join(f"{k} {v:.3g}×" for k, v in sorted(ext.items()))


def _below(law: Law, scale: Mapping[str, float]) -> list[tuple[str, float, float]]:
    """``(predictor, target value, smallest proxy)`` where the target lies below ``law``'s
    smallest proxy by more than :data:`~sweeper.recipe.scale.HELD_SLACK` (the slack between
    12·L·d² and a counted N)."""
    return [
        (p, scale[p], lo)
        for p, (lo, _hi) in law.domain.items()
        if p in law.predictors and scale.get(p) and lo > 0 and scale[p] < lo / HELD_SLACK
    ]


def below_ladder(used: Sequence[tuple[str, Law, Mapping[str, float]]]) -> dict[str, float]:
    """Predictor -> smallest proxy / target, over the laws, where the target lies below a law's
    smallest proxy (:func:`_below`, the rule of the warning :func:`extrapolation_summary` gives):
    the extrapolation factor, target / largest proxy, is then below 1, which a script reads as
    in range (a recommend audit's 0.0156×)."""
    out: dict[str, float] = {}
    for _role, law, scale in used:
        for p, v, lo in _below(law, scale):
            out[p] = max(out.get(p, 0.0), lo / v)
    return out


def _below_warning(role: str, law: Law, predictor: str, value: float, lo: float) -> str:
    """The warning for a target below the smallest proxy: the law is extrapolated downward
    (the extrapolation factor, target / largest proxy, is then below 1 and says nothing)."""
    far = f" (more than {FAR_FACTOR:.0f}×)" if value < lo / FAR_FACTOR else ""
    check = "confirm the LR with a short run"
    if role == "loss":  # (a loss law's extrapolation asks for no LR run: a review)
        check = "its predicted loss is its form's"
    return Doubt(
        f"{role} law ({law_label(law)}): target {predictor}={value:.3g} is {lo / value:.3g}× "
        f"below the smallest proxy ({lo:.3g}){far}: below the ladder the law is extrapolated "
        f"too ({check})"
    )


def _decay_differences(
    conv: Conventions, schedule: str, min_lr_ratio: float, decay_fraction: float | None
) -> tuple[list[str], list[str]]:
    """(the law's side, the recipe's side) of the schedule, min LR and WSD decay that differ."""
    law_side, recipe_side = [], []
    if conv.schedule != schedule:
        law_side.append(f"a {conv.schedule} schedule")
        recipe_side.append(schedule_text(schedule, min_lr_ratio, decay_fraction))
    ratio = conv.min_lr_ratio
    decays = "constant" not in (schedule, conv.schedule)
    if ratio is not None and abs(ratio - min_lr_ratio) > 1e-9 and decays:
        law_side.append(f"decay to {ratio:.0%} of peak")
        recipe_side.append(f"decay to {min_lr_ratio:.0%}")
    elif ratio is None and decays:  # (an import that declared the schedule, not its min LR)
        law_side.append("a decay to an unrecorded min LR")
        recipe_side.append(f"decay to {min_lr_ratio:.0%}")
    if schedule == conv.schedule == "wsd" and decay_fraction is not None:
        df = conv.decay_fraction
        if df is None:
            law_side.append("a WSD decay of unrecorded length")
            recipe_side.append(f"a decay over the last {decay_fraction:.0%} of steps")
        elif abs(df - decay_fraction) > 1e-9:
            law_side.append(f"a WSD decay over the last {df:.0%} of steps")
            recipe_side.append(f"the last {decay_fraction:.0%}")
    return law_side, recipe_side


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
    decay_fraction: float | None = None,
) -> list[str]:
    """A warning when the recipe's schedule, min LR, WSD decay fraction, warmup or z-loss differ
    from those the LR law was measured under (``conventions.schedule``, ``min_lr_ratio``,
    ``decay_fraction``, ``warmup``, ``z_loss`` of a launched sweep or declared by an import;
    published and imported laws otherwise only describe it in ``conventions.lr``). A warmup
    counts as the same within a factor 1.5 of the recipe's fraction of steps."""
    conv = lr_law.conventions
    name = f"lr law ({law_label(lr_law)})"
    said = schedule_text(schedule, min_lr_ratio, decay_fraction)
    if conv.schedule is None:
        text = conv.lr
        if text and said not in text:
            # the optimum peak LR depends on the schedule it was measured under
            return [f"the LR of the {name} was measured as '{text}'; this recipe runs warmup + "
                    f"{said}"]  # fmt: skip
        return []
    law_side, recipe_side = _decay_differences(conv, schedule, min_lr_ratio, decay_fraction)
    matching: list[str] = []  # the overrides that match the measurement
    warm = conv.warmup
    recipe_frac = warmup_steps / max(1, total_steps)
    recipe_warm = f"warmup {warmup_steps} steps ({recipe_frac:.1%})"
    if warm == "searched":
        law_side.append("its best searched warmup")
        recipe_side.append(recipe_warm)
    elif isinstance(warm, (int, float)) and (
        warm >= 1.0 or not (warm / 1.5 <= recipe_frac <= warm * 1.5)
    ):
        law_side.append(_warmup_text(warm))
        recipe_side.append(recipe_warm)
        if warm < 1.0:
            matching.append(f"--warmup-steps {max(1, round(warm * total_steps))}")
    z = conv.z_loss
    if z is not None and abs(z - z_loss) > 1e-12:
        law_side.append(f"z-loss {z:g}")
        recipe_side.append(f"z-loss {z_loss:g}")
        matching.append(f"--z-loss {z:g}")
    if not law_side:
        return []
    match = f"match them ({' '.join(matching)})" if matching else "match them"
    return [
        f"the LR of the {name} was measured with {', '.join(law_side)}; this recipe uses "
        f"{', '.join(recipe_side)}: the optimal peak LR depends on them ({match}, or confirm "
        "the LR with a short run)"
    ]

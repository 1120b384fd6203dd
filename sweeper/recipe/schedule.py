"""The recipe's LR schedule: which one (the LR law's, or an override), its rules and its shape.

The shape is the proxies' (:func:`proxy_models.hparams.lr_at`) at the recipe's warmup and total
steps: a linear warmup to the peak, then

- ``cosine``: a cosine to ``min_lr_ratio`` × peak at the last step;
- ``linear``: a linear decay to ``min_lr_ratio`` × peak at the last step;
- ``wsd``: the peak until the last ``decay_fraction`` of the steps
  (:func:`proxy_models.hparams.wsd_decay_start`), then a linear decay to ``min_lr_ratio`` × peak;
- ``constant``: the peak (``min_lr_ratio`` is 1: the min LR is the peak).

The peak LR's optimum depends on the schedule it was measured under, so the recipe follows the LR
law's (``conventions.schedule``, ``min_lr_ratio``, ``decay_fraction``) when the law records one of
:data:`~proxy_models.hparams.SCHEDULES`; else (a published or imported law that declares none, a
searched or unreadable schedule) cosine, as before. An override (``recommend(schedule=...,
min_lr_ratio=..., decay_fraction=...)``; ``--schedule``, ``--min-lr-ratio``, ``--decay-fraction``)
replaces it, and :func:`~sweeper.recipe.doubts.schedule_warnings` then says what the law was
measured under. What the law does not record comes from
:class:`~sweeper.recipe.recommend.RecipeDefaults`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy_models.hparams import SCHEDULES, HParams, lr_at, wsd_decay_start
from sweeper.errors import TargetError
from sweeper.fitting.conventions import Conventions

if TYPE_CHECKING:
    from sweeper.recipe.recipe import Recipe

__all__ = [
    "Schedule",
    "decay_start",
    "recipe_lr",
    "resolve_schedule",
    "schedule_problems",
    "schedule_text",
]

#: the schedules that decay (to ``min_lr_ratio`` × peak)
DECAYING = ("cosine", "linear", "wsd")


@dataclass(frozen=True)
class Schedule:
    """A recipe's schedule after the warmup: ``name`` (one of SCHEDULES), the final LR over the
    peak, and the WSD decay's share of the steps (None for the others)."""

    name: str
    min_lr_ratio: float
    decay_fraction: float | None = None


def _not_numbers(**given: object) -> list[str]:
    """One line for each of ``given`` (name → value) that is neither None nor a real number (a
    string had raised a bare TypeError from a comparison)."""
    return [
        f"{name} must be a number, got {type(v).__name__} {v!r}"
        for name, v in given.items()
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real))
    ]


def schedule_problems(name: str, min_lr_ratio: float, decay_fraction: float | None) -> list[str]:
    """What is wrong with a schedule, one line each (empty: it is one the proxies can run)."""
    if name not in SCHEDULES:
        return [f"schedule {name!r} is not one of {', '.join(SCHEDULES)}"]
    wrong = _not_numbers(min_lr_ratio=min_lr_ratio, decay_fraction=decay_fraction)
    if wrong or min_lr_ratio is None:  # (None: a recipe's JSON without the ratio)
        return wrong or [f"min_lr_ratio must be a number, got {min_lr_ratio!r}"]
    out = []
    if not 0.0 <= min_lr_ratio <= 1.0:
        out.append(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio!r}")
    if name == "constant" and min_lr_ratio != 1.0:
        out.append(
            f"a constant schedule holds the peak: min_lr_ratio must be 1, got {min_lr_ratio}"
        )
    if name == "wsd" and (decay_fraction is None or not 0.0 < decay_fraction <= 1.0):
        out.append(f"a WSD schedule needs decay_fraction in (0, 1], got {decay_fraction!r}")
    if name != "wsd" and decay_fraction is not None:
        out.append(f"decay_fraction is a WSD schedule's (schedule wsd), not {name}'s")
    return out


def _measured(conv: Conventions) -> str | None:
    return conv.schedule if conv.schedule in SCHEDULES else None


def resolve_schedule(
    conv: Conventions,
    *,
    schedule: str | None = None,
    min_lr_ratio: float | None = None,
    decay_fraction: float | None = None,
    default_ratio: float = 0.1,
    default_decay: float = 0.2,
) -> Schedule:
    """The recipe's schedule: the overrides given, else the LR law's measured one (``conv``),
    else cosine; the min LR ratio and WSD decay fraction likewise (the law's only when it decays,
    and its decay fraction only when it is WSD), else the defaults. TargetError when the result
    breaks :func:`schedule_problems` (an override given to the wrong schedule, named), and for
    an override that is not a number."""
    wrong = _not_numbers(min_lr_ratio=min_lr_ratio, decay_fraction=decay_fraction)
    if wrong:
        raise TargetError("; ".join(wrong))
    measured = _measured(conv)
    name = schedule or measured or "cosine"
    if name == "constant":
        if min_lr_ratio not in (None, 1.0):
            raise TargetError(
                f"min_lr_ratio {min_lr_ratio}: a constant schedule holds the peak (its ratio is 1)"
            )
        ratio = 1.0
    elif min_lr_ratio is not None:
        ratio = min_lr_ratio
    elif measured in DECAYING and conv.min_lr_ratio is not None:
        ratio = conv.min_lr_ratio
    else:
        ratio = default_ratio
    decay = None
    if name == "wsd":
        recorded = conv.decay_fraction if measured == "wsd" else None
        decay = next((d for d in (decay_fraction, recorded) if d is not None), default_decay)
    elif decay_fraction is not None:
        raise TargetError(
            f"decay_fraction {decay_fraction} is a WSD schedule's; this recipe's is {name} "
            "(schedule='wsd', --schedule wsd)"
        )
    problems = schedule_problems(name, ratio, decay)
    if problems:
        raise TargetError("; ".join(problems))
    return Schedule(name, ratio, decay)


def schedule_text(name: str, min_lr_ratio: float, decay_fraction: float | None) -> str:
    """The schedule in words, e.g. ``WSD: peak, then linear to 10% over the last 20% of steps``."""
    if name == "constant":
        return "constant at the peak"
    if name == "wsd":
        return (
            f"WSD: peak, then linear to {min_lr_ratio:.0%} over the last "
            f"{decay_fraction or 0:.0%} of steps"
        )
    return f"{name} to {min_lr_ratio:.0%}"


def _hparams(r: Recipe) -> HParams:
    return HParams(
        lr=r.lr.value,
        warmup=r.warmup_steps if r.warmup_steps >= 1 else 0.0,
        schedule=r.schedule,
        min_lr_ratio=r.min_lr_ratio,
        decay_fraction=r.decay_fraction if r.decay_fraction is not None else 0.0,
    )


def recipe_lr(r: Recipe, step: int) -> float:
    """The recipe's LR at optimizer step ``step`` (0-based): the proxies' :func:`lr_at`."""
    return lr_at(_hparams(r), step, r.total_steps)


def decay_start(r: Recipe) -> int:
    """The first step of the decay (its LR is the peak): the end of the warmup, or for WSD
    :func:`~proxy_models.hparams.wsd_decay_start`; ``total_steps`` for a constant schedule."""
    if r.schedule == "constant":
        return r.total_steps
    if r.schedule == "wsd":
        return wsd_decay_start(_hparams(r), r.total_steps)
    return min(r.warmup_steps, r.total_steps)

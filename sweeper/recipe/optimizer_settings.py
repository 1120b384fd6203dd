"""The recipe's optimizer settings: those the LR law was measured under, where it records them.

The optimal peak LR is the optimum under the weight decay, Adam betas, eps and gradient clipping
the proxies ran: AdamW's decay acts through the product η·λ (its timescale τ = 1/(η·λ·steps),
Wang & Aitchison 2024; Bergsma et al. 2025, "Power Lines"), β2 sets how fast the second moment
follows the gradient, and clipping caps the step. So the recipe runs the values the law records
(:class:`~sweeper.fitting.conventions.Conventions` ``weight_decay``, ``beta1``, ``beta2``,
``eps``, ``grad_clip``), and :class:`~sweeper.recipe.recommend.RecipeDefaults` where the law
records none (published and imported laws, a training function that does not honour the key) or
where the caller set a value of its own (it stands, with a warning when it is not the measured;
a value equal to the standard default cannot be told from none given, and the measured one is
taken then).
A decay given as the timescale τ (``weight_decay_tau``) is the coefficient λ = 1/(lr·τ·steps) at
the recipe's own LR and steps, as the proxies computed it (:func:`proxy_models.hparams.
weight_decay_of`). A setting the sweep searched has no one value: the default, with a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy_models.hparams import decay_of_timescale
from sweeper.recipe.scale import law_label

if TYPE_CHECKING:
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import Law
    from sweeper.recipe.recipe import Recipe
    from sweeper.recipe.recommend import RecipeDefaults

__all__ = ["OptimizerSettings", "measured_settings", "settings_note"]

#: the recipe's field -> the conventions' field, and how the note names it
_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("weight_decay", "weight_decay", "weight decay"),
    ("adam_beta1", "beta1", "β1"),
    ("adam_beta2", "beta2", "β2"),
    ("adam_eps", "eps", "eps"),
    ("grad_clip", "grad_clip", "grad clip"),
)


@dataclass(frozen=True)
class OptimizerSettings:
    """The recipe's weight decay, Adam betas, eps and gradient clip."""

    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    adam_eps: float
    grad_clip: float


def measured_settings(
    lr_law: Law, dflt: RecipeDefaults, *, lr: float, total_steps: int
) -> tuple[OptimizerSettings, list[str]]:
    """The settings for a recipe of peak LR ``lr`` and ``total_steps`` steps, from what
    ``lr_law`` was measured under (module docstring), and a warning naming the searched ones."""
    from sweeper.recipe.recommend import RecipeDefaults

    conv = lr_law.conventions
    values: dict[str, float] = {}
    searched: list[str] = []
    overridden: list[str] = []
    standard = RecipeDefaults()
    for field, conv_field, name in _FIELDS:
        measured = getattr(conv, conv_field)
        given = float(getattr(dflt, field))
        if given != getattr(standard, field):  # (the caller's own value: it stands)
            values[field] = given
            if _is_number(measured) and float(measured) != given:
                overridden.append(f"{name} {measured:g} (the recipe: {given:g})")
        elif _is_number(measured):
            values[field] = float(measured)
        else:
            values[field] = given
            if measured == "searched":
                searched.append(f"{name} (the recipe: {given:g})")
    if conv.weight_decay_tau and dflt.weight_decay == standard.weight_decay:
        values["weight_decay"] = decay_of_timescale(lr, conv.weight_decay_tau, total_steps)
    elif conv.weight_decay_tau:
        overridden.append(
            f"weight decay as the timescale tau {conv.weight_decay_tau:g} (the recipe: "
            f"{dflt.weight_decay:g})"
        )
    label = f"lr law ({law_label(lr_law)})"
    warnings = []
    if searched:
        warnings.append(
            f"{label} was measured over a searched {', '.join(searched)}: its optimal LR is the "
            "best over them, not at the recipe's value (set the best trial's value in the "
            "recipe JSON, or confirm the LR with a short run)"
        )
    if overridden:
        warnings.append(
            f"{label} was measured at {', '.join(overridden)}: the optimal peak LR depends on "
            "them (confirm the LR with a short run)"
        )
    return OptimizerSettings(**values), warnings


def settings_note(r: Recipe) -> str:
    """Where the recipe's weight decay and clip come from, for its table and file headers:
    the timescale τ's formula, the measured values that are not the defaults', or nothing."""
    from sweeper.recipe.export.carry import lr_law_conventions
    from sweeper.recipe.recommend import RecipeDefaults

    conv = lr_law_conventions(r)
    if conv is None:
        return ""
    parts = []
    tau = conv.weight_decay_tau
    if tau and math.isclose(r.weight_decay, decay_of_timescale(r.lr.value, tau, r.total_steps)):
        parts.append(f"weight decay 1/(lr·τ·steps), τ = {tau:g}")
    dflt = RecipeDefaults()
    parts += [
        f"{name} {getattr(r, field):g}"
        for field, conv_field, name in _FIELDS
        if _measured(conv, conv_field)
        and getattr(r, field) == getattr(conv, conv_field) != getattr(dflt, field)
    ]
    return f"as the LR was measured: {', '.join(parts)}" if parts else ""


def _measured(conv: Conventions, conv_field: str) -> bool:
    return _is_number(getattr(conv, conv_field))


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)

"""Does a published (or any) recipe agree with the measured laws?

``check_recipe(laws, recipe)`` evaluates the LR and batch laws at the recipe's N and D (in each
law's conventions, see :func:`sweeper.recipe.scale.law_scale`) and reports, per quantity, the ratio
recipe / law, whether the recipe sits inside the law's interval, and the loss penalty that the
law's fitted curvature implies: a relative penalty of about ``0.5 · k · ln(ratio)²`` with
``k = PowerLaw.loss_curvature`` (the second derivative of loss/loss_opt in ln y at the optimum).
Pure: no I/O.

The recipe is read as :func:`sweeper.recipe.recommend.recommend` reads a target, with the same warnings:
a shape inferred from N when none is given, a sequence length of 2048 when none is given, total
parameters with a 32000-token vocabulary when a law counts them and no vocab is given, laws that
count bytes against a recipe in tokenizer tokens (``bytes_per_token`` converts D and the batch),
and a recipe outside the regime a law held fixed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from proxy_models.rules import PARAMETRIZATIONS
from sweeper.errors import TargetError
from sweeper.fitting.laws import Law, PowerLaw
from sweeper.recipe.doubts import (
    batch_coupling_warning,
    check_parametrization,
    extrapolation_summary,
    span_text,
    undetermined,
)
from sweeper.recipe.hardware import positive
from sweeper.recipe.published_recipes import PublishedRecipe
from sweeper.recipe.scale import (
    ResolvedShape,
    evaluate_law,
    flops_convention_warnings,
    law_label,
    law_scale,
    regime_values,
    regime_warnings,
    resolve_shape,
    token_factor,
    token_unit_warnings,
)
from sweeper.recipe.target import check_n_params_agrees
from sweeper.recipe.warning_kinds import Doubt, by_importance

__all__ = ["CheckItem", "CheckResult", "CheckValues", "check_recipe", "loss_penalty"]


@dataclass(frozen=True)
class CheckValues:
    """A recipe to check given as numbers: non-embedding ``n_params``, ``tokens``, peak ``lr``,
    ``batch_tokens`` (D and batch in the recipe's tokenizer tokens; None: not given, which only
    laws without a batch law can check: the batch is then not checked); the shape (``layers``,
    ``d_model``, ``context``) when known (DeepSeek's M and the attention FLOPs need it; without it
    the shape is inferred from N), and the ``vocab`` (None: a tokenizer's, size unknown)."""

    n_params: float
    tokens: float
    lr: float
    batch_tokens: float | None
    layers: int | None = None
    d_model: int | None = None
    context: int | None = None
    name: str = "custom"
    parametrization: str = "sp"
    vocab: int | None = None

    def __post_init__(self) -> None:
        bad = [
            f"{k}={getattr(self, k)}"
            for k in ("n_params", "tokens", "lr", "batch_tokens")
            if (k != "batch_tokens" or self.batch_tokens is not None)
            and not (math.isfinite(getattr(self, k)) and getattr(self, k) > 0)
        ]
        bad += [
            f"{k}={getattr(self, k)}"
            for k in ("layers", "d_model", "context", "vocab")
            if getattr(self, k) is not None and getattr(self, k) < 1
        ]
        if bad:  # (inf had been told it "must be positive", a verbs audit)
            raise TargetError(f"recipe values must be positive and finite, got {', '.join(bad)}")
        if (self.layers is None) != (self.d_model is None):
            raise TargetError(
                f"give layers and d_model together, got layers={self.layers}, "
                f"d_model={self.d_model}"
            )
        if self.parametrization not in PARAMETRIZATIONS:
            raise TargetError(
                f"recipe parametrization {self.parametrization!r} is not one of "
                f"{', '.join(PARAMETRIZATIONS)}"
            )

    @classmethod
    def from_published(cls, r: PublishedRecipe) -> CheckValues:
        return cls(
            n_params=r.n_params,
            tokens=r.tokens,
            lr=r.lr,
            batch_tokens=r.batch_tokens,
            layers=r.layers,
            d_model=r.d_model,
            context=r.context,
            vocab=r.vocab,
            name=r.name,
        )


@dataclass(frozen=True)
class CheckItem:
    """One quantity (``lr`` or ``batch_tokens``): the recipe's value against the law's."""

    quantity: str
    actual: float
    predicted: float
    low: float
    high: float
    law: str
    loss_penalty: float | None  # relative (0.01 = 1% higher loss), None without a curvature

    @property
    def ratio(self) -> float:
        return self.actual / self.predicted

    @property
    def octaves(self) -> float:
        """How far the recipe's value is from the law's, in octaves (log2; + above)."""
        return math.log2(self.ratio)

    @property
    def determined(self) -> bool:
        """The law's interval here is narrower than :data:`~sweeper.recipe.doubts.UNDETERMINED_SPAN`
        (the span ``recommend`` refuses to write a recipe from): else nothing is read from it."""
        return not undetermined(self.low, self.high)

    @property
    def inside(self) -> bool | None:
        """Inside the law's interval; None when the law gives no interval (a published law) or
        one too wide to say anything (not :attr:`determined`)."""
        if self.low == self.high or not self.determined:
            return None
        return self.low <= self.actual <= self.high

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "actual": self.actual,
            "predicted": self.predicted,
            "low": self.low,
            "high": self.high,
            "ratio": self.ratio,
            "octaves": self.octaves,
            "determined": self.determined,
            "inside": self.inside,
            "law": self.law,
            "loss_penalty": self.loss_penalty,
        }


@dataclass(frozen=True)
class CheckResult:
    """Everything ``check_recipe`` found for one recipe."""

    name: str
    n_params: float
    tokens: float
    items: tuple[CheckItem, ...]
    extrapolation_factor: float | None
    warnings: tuple[str, ...]
    law_ids: tuple[int | str, ...]
    #: the recipe's own peak LR and batch (tokens), shown where no law could be compared
    lr: float | None = None
    batch_tokens: float | None = None

    def __str__(self) -> str:
        """What ``sweeper check`` prints for this recipe (:func:`sweeper.cli.recipe.check_text`:
        the table, its legend, the verdict, the warnings), titled with the laws it was checked
        against."""
        from sweeper.cli.recipe import check_text

        laws = ", ".join(f"law {i}" if isinstance(i, int) else i for i in self.law_ids)
        return check_text([self], f"Recipe {self.name} against {laws}")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter's display
        p.text(str(self))

    def __repr__(self) -> str:
        """One line: each quantity's octaves off the law and whether inside its interval, the
        loss penalty (the dataclass's own printed every item and warning; an API audit)."""
        parts = []
        for i in self.items:
            name = "LR" if i.quantity == "lr" else "batch"
            where = {None: "", True: " (inside)", False: " (outside)"}[i.inside]
            parts.append(f"{name} {i.octaves:+.2f} oct{where}" if i.determined
                         else f"{name} undetermined")  # fmt: skip
        pen = "" if self.loss_penalty is None else f", loss penalty {self.loss_penalty:.2%}"
        return (
            f"<CheckResult {self.name}: N {self.n_params:.3g}, D {self.tokens:.3g}; "
            f"{'; '.join(parts) or 'nothing checked'}{pen}; {len(self.warnings)} warning(s)>"
        )

    def item(self, quantity: str) -> CheckItem | None:
        return next((i for i in self.items if i.quantity == quantity), None)

    @property
    def loss_penalty(self) -> float | None:
        """Sum of the per-quantity penalties (treating LR and batch as separable), if any."""
        ps = [i.loss_penalty for i in self.items if i.loss_penalty is not None]
        return sum(ps) if ps else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n_params": self.n_params,
            "tokens": self.tokens,
            "items": [i.to_dict() for i in self.items],
            "loss_penalty": self.loss_penalty,
            "extrapolation_factor": self.extrapolation_factor,
            "warnings": list(self.warnings),
            "law_ids": list(self.law_ids),
            "lr": self.lr,
            "batch_tokens": self.batch_tokens,
        }


def loss_penalty(law: Law, ratio: float) -> float | None:
    """Relative loss penalty 0.5·k·ln(ratio)² of missing the optimum by ``ratio`` (None when the
    law records no curvature ``k``)."""
    k = law.loss_curvature if isinstance(law, PowerLaw) else None
    if k is None or not math.isfinite(k):
        return None
    return 0.5 * k * math.log(ratio) ** 2


def _penalty_reach(item: CheckItem, name: str) -> list[str]:
    """A warning when ``item``'s loss penalty is the curvature's quadratic taken beyond the LRs
    it was measured over (:data:`~sweeper.fitting.surface.WINDOW`: 4x below to 1.68x above each
    cell's best LR; a check audit read 13% at +3.4 octaves and 36% at -6.7 as figures)."""
    from sweeper.fitting.surface import WINDOW

    if item.loss_penalty is None or item.quantity != "lr":
        return []
    off = math.log(item.actual / item.predicted)
    if -WINDOW[0] <= off <= WINDOW[1]:
        return []
    return [Doubt(
        f"{name}: its LR loss penalty {item.loss_penalty:.1%} is the fitted curvature's quadratic "
        f"taken {off / math.log(2):+.2f} octaves from the law's optimum, beyond the "
        f"{-WINDOW[0] / math.log(2):+.0f} to {WINDOW[1] / math.log(2):+.2f} octaves it was "
        "measured over: read it as large, not as a figure"
    )]  # fmt: skip


def check_recipe(
    laws: Mapping[str, Law],
    recipe: PublishedRecipe | CheckValues,
    *,
    force: bool = False,
    level: float = 0.95,
    bytes_per_token: float | None = None,
) -> CheckResult:
    """Where ``recipe``'s LR and batch sit relative to ``laws`` ("lr" and/or "batch_tokens").

    A law fitted under muP/CompleteP is refused for these SP recipes unless ``force``.
    ``bytes_per_token`` converts the recipe's D and batch for laws that count bytes (None: no
    conversion, and a warning).
    """
    v = CheckValues.from_published(recipe) if isinstance(recipe, PublishedRecipe) else recipe
    roles = [(q, laws[q]) for q in ("lr", "batch_tokens") if q in laws]
    if not roles:
        raise TargetError(f"no lr or batch_tokens law to check against (got {sorted(laws)})")
    problems: list[str] = []
    positive("bytes_per_token", bytes_per_token, problems)  # (recommend's rule)
    if problems:
        raise TargetError(problems[0])
    if "batch_tokens" in laws and v.batch_tokens is None:
        raise TargetError(
            f"recipe {v.name} gives no batch_tokens (--batch-tokens), and the laws include a batch "
            f"law ({law_label(laws['batch_tokens'])}) to check it against: give it"
        )
    warnings: list[str] = []
    shape = _recipe_shape(v, [law for _, law in roles], warnings, force=force)
    warnings += token_unit_warnings(
        [("batch" if q == "batch_tokens" else q, law) for q, law in roles],
        vocab=v.vocab,
        bytes_per_token=bytes_per_token,
        what=f"recipe {v.name}",
    )
    items: list[CheckItem] = []
    used: list[tuple[str, Law, Mapping[str, float]]] = []
    for quantity, law in roles:
        check_parametrization(
            law,
            quantity,
            v.parametrization,
            force=force,
            warnings=warnings,
            subject=f"recipe {v.name}",
        )
        warnings += flops_convention_warnings(law, quantity)
        scale = law_scale(
            law, n_params=v.n_params, tokens=v.tokens, width=shape.width, depth=shape.depth,
            seq_len=shape.seq_len,
            n_params_total=shape.n_params_total, bytes_per_token=bytes_per_token,
        )  # fmt: skip
        item = _check_item(
            v, quantity, law, scale, shape.seq_len, level, bytes_per_token, warnings, force=force
        )
        if item is not None:
            items.append(item)
            used.append((quantity, law, scale))
    if "batch_tokens" not in laws:
        warnings.append("no batch law given: the batch is not checked")
    warnings += _no_batch_held(v, [law for _, law in roles])
    by = {i.quantity: i for i in items}
    if "lr" in by and "batch_tokens" in by:  # (the LR compared is the optimum at the law's batch)
        batch = by["batch_tokens"]
        warnings += batch_coupling_warning(
            laws["lr"], laws["batch_tokens"], batch.predicted, batch.actual, f"recipe {v.name}'s"
        )
    factor, _ = extrapolation_summary(used, warnings)
    ids = tuple(law.id if law.id is not None else law_label(law) for _, law in roles)
    return CheckResult(
        name=v.name,
        n_params=v.n_params,
        tokens=v.tokens,
        items=tuple(items),
        extrapolation_factor=factor,
        warnings=by_importance(warnings),
        law_ids=ids,
        lr=v.lr,
        batch_tokens=v.batch_tokens,
    )


def _no_batch_held(v: CheckValues, laws: list[Law]) -> list[str]:
    """Where a recipe gives no batch and a law's cells held theirs fixed: whether the recipe
    trains in that regime is not known (a batch given is checked by :func:`regime_warnings`)."""
    if v.batch_tokens is not None:
        return []
    return [
        f"recipe {v.name} gives no batch: whether it trains at the batch the {law.target} law's "
        f"cells held ({law.conventions.held_span('batch_tokens')}) is not checked (the law's "
        "LR is the optimum at that batch)"
        for law in laws
        if "batch_tokens" in law.conventions.held and "batch_tokens" not in law.predictors
    ]


def _recipe_shape(
    v: CheckValues, laws: list[Law], warnings: list[str], *, force: bool
) -> ResolvedShape:
    """The recipe's shape (given, or inferred from N with a warning), its vocab assumed only
    where a law's N counts embedding parameters; an N that contradicts a given shape is
    refused, as recommend and compare refuse it (unless ``force``: a warning)."""
    counts_vocab = any(law.conventions.counts_embeddings for law in laws)
    shape = resolve_shape(
        n_params=v.n_params,
        width=v.d_model,
        depth=v.layers,
        heads=None,
        vocab=v.vocab,
        seq_len=v.context,
        warnings=warnings,
        vocab_purpose="the embedding parameters the law's N counts" if counts_vocab else None,
    )
    if v.d_model is not None and v.layers is not None:
        check_n_params_agrees(v.n_params, shape, force=force, warnings=warnings)
    return shape


def _check_item(
    v: CheckValues,
    quantity: str,
    law: Law,
    scale: Mapping[str, float],
    seq_len: int,
    level: float,
    bytes_per_token: float | None,
    warnings: list[str],
    *,
    force: bool = False,
) -> CheckItem | None:
    """The recipe's ``quantity`` against the law at ``scale`` (None, with a warning, where the
    law predicts no positive value, or one its form sets rather than its data, unless ``force``:
    then the regime warning says it, as recommend's ``--force`` does)."""
    f = token_factor(law, bytes_per_token)
    got = evaluate_law(law, quantity, scale, seq_len=seq_len, level=level, factor=f)
    # (a positive value there is the formula's, not its data's; --force had been ignored here)
    zero = None if force else law.beyond_form(scale)
    if got is None or zero:
        warnings.append(
            f"{quantity} law ({law_label(law)}), {v.name}: {zero}; not compared" if zero
            else f"{quantity} law ({law_label(law)}) predicts {law.predict(scale):.3g} for "
            f"{v.name}: outside its range, not compared"
        )  # fmt: skip
        return None
    predicted, low, high = got
    batch = v.batch_tokens if v.batch_tokens is not None else math.nan  # (nan: not checked)
    warnings += regime_warnings(
        law,
        quantity,
        regime_values(v.n_params, v.tokens, batch, f, depth=v.layers, seq_len=seq_len),
    )
    actual = v.lr if quantity == "lr" else batch
    item = CheckItem(
        quantity=quantity,
        actual=actual,
        predicted=predicted,
        low=low,
        high=high,
        law=law_label(law),
        loss_penalty=loss_penalty(law, actual / predicted),
    )
    if item.determined:
        warnings += _penalty_reach(item, v.name)
        return item
    warnings.append(
        Doubt(
            f"{quantity} law ({law_label(law)}) {level:.0%} interval {span_text(high / low)} at "
            f"{v.name}: it does not determine the value there (recommend refuses it), so this "
            "check says nothing about the recipe"
        )
    )
    return replace(item, loss_penalty=None)

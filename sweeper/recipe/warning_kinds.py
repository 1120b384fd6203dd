"""How important a recipe's warning is, so that a recipe lists the ones that question its values
first and the defaults it assumed last.

A warning is a plain ``str`` (what the recipe's JSON, the exports' headers and the report show);
two subclasses rank it: :class:`Doubt` (the value itself may be wrong: the law does not determine
it, is poorly known, was forced onto another parametrization, or is applied far beyond or outside
its cells) and :class:`Assumed` (an input was not given and a default was used). Other warnings
(a mismatch between how the law was measured and the recipe, a fallback law) rank between.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FORCED", "Assumed", "Doubt", "by_importance", "forced"]

#: how every warning of a value written only because ``force`` was given ends, so that a reader
#: (the report's heading) can tell a forced recipe from its warnings alone
FORCED = "(forced)"


class Doubt(str):
    """A warning that the recipe's value may be wrong: listed first."""

    __slots__ = ()


class Assumed(str):
    """A warning that an input was not given and a default was assumed: listed last."""

    __slots__ = ()


def by_importance(warnings: Iterable[str]) -> tuple[str, ...]:
    """``warnings`` with each :class:`Doubt` first and each :class:`Assumed` last, the order
    otherwise kept."""
    return tuple(
        sorted(warnings, key=lambda w: 0 if isinstance(w, Doubt) else 1 + isinstance(w, Assumed))
    )


def forced(warnings: Iterable[str]) -> bool:
    """Whether ``warnings`` say that a value was written only because ``force`` was given."""
    return any(str(w).rstrip(". ").endswith(FORCED) for w in warnings)

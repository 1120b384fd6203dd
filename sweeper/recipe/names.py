"""One message for a name Sweeper does not know (a misspelt option or target field): every unknown
name, the nearest known one, and the known ones. Standard library and :mod:`sweeper.errors` only,
so that :mod:`sweeper.api` and :mod:`sweeper.recipe.target` both import it without cycles."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from typing import Any

from sweeper.errors import SweeperError

__all__ = ["fields_of", "refuse_unknown"]


def refuse_unknown(
    given: Iterable[object],
    known: Sequence[str],
    *,
    what: str,
    listing: str,
    error: type[SweeperError] = SweeperError,
) -> None:
    """``error`` when ``given`` holds a name not in ``known``: "unknown WHAT 'x' (did you mean
    y?); LISTING: a, b, c", the hint for the first unknown name (``what`` takes an "s" for more
    than one). Nothing when every name is known."""
    bad = [str(k) for k in given if k not in known]
    if not bad:
        return
    close = difflib.get_close_matches(bad[0], list(known), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise error(
        f"unknown {what}{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}{hint}; "
        f"{listing}: {', '.join(known)}"
    )


def fields_of(given: object, cls: type, *, what: str, error: type[SweeperError]) -> dict[str, Any]:
    """``given``, a mapping of the dataclass ``cls``'s fields (``what`` names it: "a target",
    "hardware"), as keyword arguments for it; ``error`` naming the fields for an unknown key, or
    for anything but a mapping. (``at=`` and ``hardware=`` of :func:`sweeper.recommend` take
    one.)"""
    names = [f.name for f in dataclass_fields(cls)]
    if not isinstance(given, Mapping):
        raise error(
            f"{what} is a {cls.__name__} or a mapping of its fields ({', '.join(names)}), got "
            f"{type(given).__name__}"
        )
    refuse_unknown(given, names, what=f"{what.split()[-1]} field", listing=f"{what} takes",
                   error=error)  # fmt: skip
    return {str(k): v for k, v in given.items()}

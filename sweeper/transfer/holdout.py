"""What a transfer check fits on and what it predicts: the fit set (a filter on the cells), the
held-out cell (a cell of the sweep, or a new one named like the sweep's cells), and the LRs the
baselines would have used there.

A filter is a comma-separated list of comparisons on ``width``, ``depth``, ``n_params`` and
``tokens`` (all must hold), e.g. ``"width<=64"`` or ``"n_params<=2e5,tokens>=8e5"``; numbers may
carry a k/M/B/T suffix. A new held-out cell is named ``w{width}-d{depth}-t{tokens}`` like the
cells of a ladder (``w256-d2-t819k``); its tokens are the sweep's budget that prints the same, else
the number as written.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sweeper.errors import SweeperError

__all__ = ["CellFilter", "HeldCell", "cell_filter", "parse_cell_name"]

_OPS: Final[dict[str, Callable[[float, float], bool]]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_FIELDS: Final[tuple[str, ...]] = ("width", "depth", "n_params", "tokens")
_SUFFIX: Final[dict[str, float]] = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_TERM: Final = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|==|=|<|>)\s*([0-9.eE+\-]+)([kKMBGT]?)\s*$")
_CELL: Final = re.compile(r"^w(\d+)-d(\d+)-t([0-9.]+)([kMBT]?)$")


@dataclass(frozen=True)
class CellFilter:
    """Comparisons that a cell's ``width``, ``depth``, ``n_params`` and ``tokens`` must all meet."""

    text: str
    terms: tuple[tuple[str, str, float], ...]

    def __call__(self, cell: Mapping[str, Any]) -> bool:
        for name, op, value in self.terms:
            v = cell.get(name)
            if v is None or not _OPS[op](float(v), value):
                return False
        return True


def cell_filter(text: str) -> CellFilter:
    """Parse ``text`` (see the module docstring); SweeperError naming the bad term."""
    terms = []
    for part in text.split(","):
        m = _TERM.match(part)
        if m is None or m.group(1) not in _FIELDS:
            raise SweeperError(
                f"fit_cells (--fit-cells): cannot read {part.strip()!r}; write comparisons on "
                f"{', '.join(_FIELDS)} joined by commas, e.g. 'width<=64,tokens>=8e5'"
            )
        try:
            value = float(m.group(3)) * _SUFFIX.get(m.group(4), 1.0)
        except ValueError:
            raise SweeperError(
                f"fit_cells (--fit-cells): {m.group(3)!r} is not a number"
            ) from None
        terms.append((m.group(1), m.group(2), value))
    return CellFilter(text=text, terms=tuple(terms))


def parse_cell_name(name: str, budgets: Sequence[int] = ()) -> tuple[int, int, int]:
    """(width, depth, tokens) of a cell named ``w{width}-d{depth}-t{tokens}``; the tokens are the
    budget of ``budgets`` whose name matches, else the number as written (``819k`` = 819000)."""
    from sweeper.study.ladder import cell_name

    m = _CELL.match(name)
    if m is None:
        raise SweeperError(
            f"holdout (--holdout) {name!r}: not a cell of the sweep, and not a cell name like "
            "w256-d2-t819k"
        )
    width, depth = int(m.group(1)), int(m.group(2))
    if width < 1 or depth < 1:  # (width 0 had failed deep in the law: "needs n_params")
        raise SweeperError(
            f"holdout (--holdout) {name!r}: the width and the depth must be at least 1"
        )
    for tokens in budgets:
        if cell_name(width, depth, int(tokens)) == name:
            return width, depth, int(tokens)
    written = float(m.group(3)) * _SUFFIX.get(m.group(4), 1.0)
    if not math.isfinite(written) or written < 1:
        raise SweeperError(f"holdout (--holdout) {name!r}: no token budget in the name")
    return width, depth, round(written)


@dataclass(frozen=True)
class HeldCell:
    """The cell a transfer check predicts: its shape, budget, size and the batch it trains at
    (sequences), and whether the sweep already holds runs of it."""

    name: str
    width: int
    depth: int
    tokens: float
    n_params: float
    n_params_total: float
    flops: float
    seq_len: int
    batch_size: int
    in_sweep: bool

    def scale(self) -> dict[str, float]:
        """The predictors of a law at this cell (those it knows: imported runs may lack a shape)."""
        every = {
            "n_params": self.n_params,
            "tokens": self.tokens,
            "flops": self.flops,
            "width": float(self.width),
            "depth": float(self.depth),
        }
        return {k: v for k, v in every.items() if v > 0}

"""The ways a law can be fitted, named once (no imports: the CLI reads this at start-up).

See :mod:`sweeper.fitting.fit_runs` for what each does.
"""

from __future__ import annotations

from typing import Final

__all__ = ["FIT_METHODS", "METHOD_HELP"]

FIT_METHODS: Final[tuple[str, ...]] = ("parabola", "band", "surface")
#: one line on each, for ``--method``'s help
METHOD_HELP: Final[str] = (
    "parabola: optimum per cell, then the law through the optima; band: runs within a loss band "
    "(Step Law); surface: one joint model of every run, whose optimum is the law"
)

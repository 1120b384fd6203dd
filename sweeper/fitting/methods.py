"""The ways a law can be fitted, named once (no imports: the CLI reads this at start-up).

See :mod:`sweeper.fitting.fit_runs` for what each does.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BATCH_EDGE_NOTE",
    "BATCH_FEW_NOTE",
    "BATCH_PROFILE_NOTE",
    "DEFAULT_METHOD",
    "DIFF_METHODS",
    "EDGE_NOTE",
    "FIT_METHODS",
    "FREE_UNCONVERGED",
    "KEPT_EDGE",
    "METHOD_HELP",
    "SURFACE_HELP",
    "SURFACE_SETTINGS",
    "SURFACE_UNCONVERGED",
]

FIT_METHODS: Final[tuple[str, ...]] = ("parabola", "band", "surface")
#: the method used when none is named (CLI, Python API, report, validate-transfer)
DEFAULT_METHOD: Final[str] = "surface"
#: the methods ``diff`` compares with (the first its default): per-cell fits, whose resampled
#: laws it pairs draw by draw (given the surface method, it ran for minutes and returned
#: intervals up to 1e36: not supported there)
DIFF_METHODS: Final[tuple[str, ...]] = ("parabola", "band")
#: one line on each, for ``--method``'s help
METHOD_HELP: Final[str] = (
    "parabola: optimum per cell, then the law through the optima; band: runs within a loss band "
    "(Step Law); surface (the default): one joint model of every run, whose optimum is the law"
)

#: the named settings of the surface method (values in :data:`sweeper.fitting.surface.SETTINGS`)
SURFACE_SETTINGS: Final[tuple[str, ...]] = ("standard", "all-runs", "planner")
SURFACE_HELP: Final[str] = (
    "settings of --method surface. standard: the runs from 4x below to 1.68x above each cell's "
    "best LR (at least 2 grid steps below and 1 above), the curve's width scaling with N; "
    "all-runs: every run; planner: every run, one "
    "width for all cells, cells from 3 runs (the law sampler's own fit). Default: planner "
    'for a study with [sampler] kind = "law", else standard'
)

#: how a surface law's notes begin when its fit did not converge (the law planner's stopping rule
#: and ``sweeper fit``'s refusal read it) ...
SURFACE_UNCONVERGED: Final[str] = "the surface fit did not converge"
#: ... and when its first step, every cell's optimum free, did not (its cell optima and the cells'
#: scatter, which sets the law's intervals, are then wherever it stopped: a batch optimum of 1.5e10
#: tokens for a cell that tried 37k-74k was shown as measured; a fit audit). Refused alike.
FREE_UNCONVERGED: Final[str] = "the fit with free cell optima did not converge"
#: ... and when a usable cell's best run sits on the edge of its LR range (then its cells follow)
EDGE_NOTE: Final[str] = (
    "best run on the edge of its LR range, the optimum there rests on the curve's shape from the "
    "other cells"
)
#: ... and when a usable cell's best batch is the smallest or largest it tried, or it tried one
#: batch size: its batch optimum is not measured (a cell of two batch sizes always has its best on
#: an edge), so it is no cell optimum of the batch law (then its cells follow; a fit audit)
BATCH_EDGE_NOTE: Final[str] = (
    "batch optimum not bracketed by the cell's own runs (its best batch is the smallest or "
    "largest it tried, or it tried one), so it is a bound resting on the curve's shape from the "
    "other cells, not a measured cell optimum; widen the batch range there"
)
#: how a surface LR law's note begins when too few cells swept the batch for a batch law: none
#: was fitted, and the LR law took each swept cell's runs at its best batch (``fit`` says why the
#: batch law was skipped in these words)
BATCH_FEW_NOTE: Final[str] = "too few cells sweep the batch for a batch law"
#: ... and how it goes on, after the reason in parentheses: what the LR law took instead
BATCH_PROFILE_NOTE: Final[str] = (
    "the LR law takes the runs of each cell that sweeps the batch at its best batch"
)
#: how a per-cell law's note on cells fitted at the edge of their range (keep_edge) reads, after
#: its count ("2 of 5 ..."): the diff repeats it
KEPT_EDGE: Final[str] = "cells kept with their optimum on the edge of the range"

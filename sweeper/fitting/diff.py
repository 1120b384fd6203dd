"""Is my change different? Two sweeps fitted the same way, compared with intervals.

:func:`diff_runs` fits the LR law (and the batch law when both sweeps vary the batch) of sweep A
and of sweep B with the same method, options and predictors
(:func:`~sweeper.fitting.fit_runs.fit_runs`): ``predictors`` when given, else the scale
variables that both sweeps' cells vary, chosen the same whichever side is A (B had been fitted on A's, and a Step Law ladder varying D
over 25x was fitted on N alone against an N-only ladder, in silence); a note names what one
side's cells vary that the laws leave out. It reports, as B relative to A:

- ``exponent_differences``: b_B − b_A for every predictor of the law;
- ``target_lr_ratio``: lr*_B / lr*_A predicted at a target scale (``n_params``, ``tokens``; by
  default the largest cell of the two sweeps: a note names a law that extrapolates there, as it
  does when the sweeps' cells differ), likewise ``target_batch_ratio``. A law on FLOPs is
  evaluated at the FLOPs of the given N and D as a recommendation counts them
  (:func:`sweeper.recipe.scale.law_scale`); a law on width or depth takes no target N (no rule
  gives a shape its law would read: refused). No ratio is given (None, and the verdict says
  why) when the two laws count N, D or FLOPs differently: one N is then two models;
- ``best_loss_differences``: per cell the two sweeps share, the best mean loss over the swept
  points of B minus that of A.

Intervals come from the fits' own resamples: each law's ``boot_coefs`` (bootstrap of the cells, or
draws of the classical t distribution for few cells), every one the fit drew, paired draw by draw
in an order shuffled by the side's seed (the two fits are independent: the t draws are scrambled
Sobol points, and two scrambles of one sequence paired index by index had A's and B's draws of
one sign in every pair, or of opposite signs, with the seeds), and for the best loss a parametric
resample of every point's seed mean (its seeds' standard error; a point with one seed takes the
pooled seed spread of both sweeps' points near the cell's optimum, a cell with one seed
everywhere the spread pooled over the other cells). The point estimates do not depend on the
seed: the per-cell intervals that weight the parabola law are seeded by the cell alone
(:func:`sweeper.fitting.fit_runs.fit_runs`). The resamples of two sides of the same runs share
one seed (every difference is 0 in every draw); other runs take the seed and the next in an
order set by their runs, not by their sides, so that swapping A and B mirrors the intervals
(:func:`_side_seeds`). Each quantity gets its 95% percentile interval and a Bonferroni-corrected
one at level 1 − 0.05/m, m being the number of quantities compared; a percentile interval at
that level needs 2m/0.05 resamples (one in each tail: 240 for 6 quantities), and fewer are
refused, naming the ``--bootstrap`` that gives them (40 draws had called a ratio "moved" that
200 did not). The two sweeps are ``indistinguishable`` when no corrected interval excludes 0 (1
for a ratio). Bonferroni controls the chance of calling a null pair different at 5% whatever the
correlation between the quantities (they are correlated: an exponent and the ratio at the
target come from the same coefficients), at some cost in power.

The verdict is reported twice over, from that one correction (m counts the law's quantities and
the best losses together; only the reporting is split): ``law_moved``, whether an exponent
difference or a target ratio (LR, batch) excludes its null, and ``loss_differs``, whether a
cell's best loss does (None when none was compared). A diff audit read ``indistinguishable``
false, due to the best loss alone, as "the law moved". False is "not resolved", not "the same":
the law's verdict says how wide the LR ratio at the target still is. ``same_runs``: the two
sides hold the same runs, and there is nothing to compare.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting.conventions import KNOWN_FLOPS, TOKENS_AS_IMPORTED, Conventions
from sweeper.fitting.fit_runs import FitOptions, check_resamples, fit_runs, min_resamples
from sweeper.fitting.laws import PREDICTORS, PowerLaw
from sweeper.fitting.methods import DIFF_METHODS, KEPT_EDGE
from sweeper.recipe.scale import DEFAULT_SEQ_LEN, infer_shape, law_scale

__all__ = [
    "ALPHA",
    "DiffResult",
    "Estimate",
    "check_diff_method",
    "check_diff_resamples",
    "diff_runs",
]

#: the family-wise error rate of the "different" verdict
ALPHA: Final[float] = 0.05
#: resamples per law (the corrected intervals reach into the far tails)
DEFAULT_BOOT: Final[int] = 4000
_COMPLETE = "COMPLETE"
#: the one verdict of a sweep diffed with itself (an audit: "between 1 and 1 … from 1")
_SAME_RUNS: Final[str] = "A and B are the same runs: nothing to compare"


@dataclass(frozen=True)
class Estimate:
    """A difference (or ratio) with its 95% interval and its multiplicity-corrected interval."""

    value: float
    ci: tuple[float, float]
    ci_corrected: tuple[float, float]
    null: float = 0.0  # 0 for a difference, 1 for a ratio

    @property
    def excludes_null(self) -> bool:
        lo, hi = self.ci_corrected
        return not (lo <= self.null <= hi)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": _r(self.value),
            "ci": [_r(self.ci[0]), _r(self.ci[1])],
            "ci_corrected": [_r(self.ci_corrected[0]), _r(self.ci_corrected[1])],
            "excludes_null": self.excludes_null,
        }


@dataclass(frozen=True)
class DiffResult:
    """The comparison of sweep ``b`` against sweep ``a`` (see the module docstring)."""

    a: str
    b: str
    method: str
    target: Mapping[str, float]
    exponent_differences: Mapping[str, Estimate]
    target_lr_ratio: Estimate | None  # None: the laws count N, D or FLOPs apart (target_refused)
    best_loss_differences: Mapping[str, Estimate]
    n_quantities: int
    corrected_level: float
    laws: tuple[PowerLaw, PowerLaw]
    target_batch_ratio: Estimate | None = None
    batch_exponent_differences: Mapping[str, Estimate] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    same_runs: bool = False
    #: why no ratio at the target was given ("" when one was)
    target_refused: str = ""

    @property
    def distinguished_by(self) -> list[str]:
        """The quantities whose corrected interval excludes the null."""
        return [name for name, est in self.quantities() if est.excludes_null]

    @property
    def indistinguishable(self) -> bool:
        return not self.distinguished_by

    @property
    def law_moved(self) -> bool:
        """Whether an exponent difference or a target ratio excludes its null (corrected)."""
        return any(est.excludes_null for _, est in self.law_quantities())

    @property
    def loss_differs(self) -> bool | None:
        """Whether a shared cell's best loss differs (corrected); None when none was compared."""
        if not self.best_loss_differences:
            return None
        return any(est.excludes_null for est in self.best_loss_differences.values())

    def quantities(self) -> list[tuple[str, Estimate]]:
        """Every compared quantity: the law's, then the best losses (one Bonferroni family)."""
        out = self.law_quantities()
        out += [(f"best loss {k}", v) for k, v in self.best_loss_differences.items()]
        return out

    def law_quantities(self) -> list[tuple[str, Estimate]]:
        """The exponent differences and the ratios at the target, LR then batch."""
        out = [(f"exponent {k}", v) for k, v in self.exponent_differences.items()]
        if self.target_lr_ratio is not None:
            out.append(("target lr ratio", self.target_lr_ratio))
        out += [(f"batch exponent {k}", v) for k, v in self.batch_exponent_differences.items()]
        if self.target_batch_ratio is not None:
            out.append(("target batch ratio", self.target_batch_ratio))
        return out

    def verdicts(self) -> dict[str, str]:
        """The law's verdict and the best loss's, as the first lines of :meth:`lines` say them."""
        if self.same_runs:
            return {"law": _SAME_RUNS, "best_loss": _SAME_RUNS}
        return {"law": self._law_verdict(), "best_loss": self._loss_verdict()}

    def lines(self) -> list[str]:
        """The diff as ``sweeper diff`` prints it (the notes apart): both laws, each quantity
        with its 95% and corrected intervals, and the verdict."""
        out = self.to_json()
        t = ", ".join(f"{k} {v:.3g}" for k, v in self.target.items() if k in ("n_params", "tokens"))
        a, b = self.laws
        verdicts = dict.fromkeys(self.verdicts().values())  # (the same runs: one line)
        text = [f"diff {self.b} against {self.a} ({self.method}; B - A, B / A)",
                *(f"  {v}" for v in verdicts),
                f"  lr laws: A {_law_words(a)}; B {_law_words(b)}",
                *_law_notes(a, b)]  # fmt: skip
        text += [f"  exponent of {k}: {_ci(e)}" for k, e in out["exponent_differences"].items()]
        if out["target_lr_ratio"] is None:
            text.append(f"  optimal lr ratio: not given: {self.target_refused}")
        else:
            text.append(f"  optimal lr ratio at {t}: {_ci(out['target_lr_ratio'], '.3g')}")
        text += [f"  batch exponent of {k}: {_ci(e)}"
                 for k, e in out["batch_exponent_differences"].items()]  # fmt: skip
        if out["target_batch_ratio"]:
            text.append(f"  optimal batch ratio: {_ci(out['target_batch_ratio'], '.3g')}")
        text += [f"  best loss {c}: {_ci(e, '+.4f')}"
                 for c, e in out["best_loss_differences"].items()]  # fmt: skip
        text.append(
            f"  ({out['correction']}, law and best loss together: the verdicts split the "
            "reporting, not the correction; * = the corrected interval excludes 0, or 1 for a "
            "ratio)"
        )
        return text

    def _law_verdict(self) -> str:
        moved = [name for name, est in self.law_quantities() if est.excludes_null]
        if moved:
            lrs = [m for m in moved if not m.startswith(("batch", "target batch"))]
            apart = _lr_meanings(self.laws[0].conventions, self.laws[1].conventions)
            # (SP against muP "moved" in the LR ratio by definition: their LRs are other things)
            but = (
                "; but A's and B's LRs mean different things (see the notes): their LR laws "
                "can differ by that alone"
                if lrs and apart
                else ""
            )
            return f"law: moved, in {', '.join(moved)} (each beyond its corrected interval){but}"
        if self.target_lr_ratio is None:
            return (
                "law: not shown to move: no exponent differs beyond its corrected interval; that "
                f"is not 'the same'; no optimal LR ratio at the target: {self.target_refused}"
            )
        lo, hi = self.target_lr_ratio.ci_corrected
        wide = " (too wide to say anything: more seeds or cells narrow it)" if hi / lo > 4 else ""
        span = (
            f"the optimal LR ratio at the target is {lo:.3g} in every resample"
            if f"{lo:.3g}" == f"{hi:.3g}"  # (a zero-width interval: no "between 1 and 1")
            else f"these runs cannot tell an optimal LR ratio between {lo:.3g} and {hi:.3g} at "
            f"the target from 1{wide}"
        )
        return (
            "law: not shown to move: no exponent or target ratio differs beyond its corrected "
            f"interval; that is not 'the same': {span}"
        )

    def _loss_verdict(self) -> str:
        cells = self.best_loss_differences
        if not cells:
            return "best loss: not compared (see the notes)"
        differ = {c: e.value for c, e in cells.items() if e.excludes_null}
        if not differ:
            return (
                "best loss: no shared cell differs beyond its corrected interval "
                f"({len(cells)} compared)"
            )
        lower = sum(v < 0 for v in differ.values())
        side = ("lower in each" if lower == len(differ) else "higher in each" if not lower
                else "lower in some, higher in others")  # fmt: skip
        return (
            f"best loss: differs in {len(differ)} of {len(cells)} shared cells "
            f"({', '.join(differ)}), B {side}"
        )

    def __str__(self) -> str:
        """The text ``sweeper diff`` prints: the verdicts, the quantities, the notes."""
        return "\n".join([*self.lines(), *(f"  note: {n}" for n in self.notes)])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # a notebook's display: the text
        p.text(str(self))

    def __repr__(self) -> str:
        """One line, as the other results' (the whole text had been the repr: many lines in a
        list or a log; a review)."""
        loss = {None: "no cell compared", True: "differs", False: "not shown to differ"}
        return (
            f"<DiffResult {self.b} vs {self.a}: law "
            f"{'moved' if self.law_moved else 'not shown to move'}, best loss "
            f"{loss[self.loss_differs]}; {self.n_quantities} quantities>"
        )

    def to_json(self) -> dict[str, Any]:
        a, b = self.laws
        return {
            "a": self.a,
            "b": self.b,
            "method": self.method,
            "target": dict(self.target),
            "exponents": {"a": dict(a.exponents), "b": dict(b.exponents)},
            "laws": {
                side: {
                    "exponents_ci": {k: list(v) for k, v in law.exponents_ci.items()},
                    "n_cells": law.n_cells,
                    "cv_error": law.cv_error,
                    "notes": list(law.notes),
                }
                for side, law in (("a", a), ("b", b))
            },
            "exponent_differences": {k: v.to_json() for k, v in self.exponent_differences.items()},
            "target_lr_ratio": self.target_lr_ratio.to_json() if self.target_lr_ratio else None,
            "target_lr": (
                {"a": _r(a.predict(self.target)), "b": _r(b.predict(self.target))}
                if self.target_lr_ratio
                else None
            ),
            "target_refused": self.target_refused or None,
            "batch_exponent_differences": {
                k: v.to_json() for k, v in self.batch_exponent_differences.items()
            },
            "target_batch_ratio": (
                self.target_batch_ratio.to_json() if self.target_batch_ratio else None
            ),
            "best_loss_differences": {
                k: v.to_json() for k, v in self.best_loss_differences.items()
            },
            "n_quantities": self.n_quantities,
            "level": 0.95,
            "corrected_level": self.corrected_level,
            "correction": f"Bonferroni over {self.n_quantities} quantities (alpha {ALPHA})",
            "indistinguishable": self.indistinguishable,
            "law_moved": self.law_moved,
            "loss_differs": self.loss_differs,
            "same_runs": self.same_runs,
            "verdicts": self.verdicts(),
            "distinguished_by": self.distinguished_by,
            "notes": list(self.notes),
        }


def check_diff_method(method: str) -> None:
    """FitError unless ``method`` is one :func:`diff_runs` compares with (the per-cell fits
    whose resamples it pairs: :data:`~sweeper.fitting.methods.DIFF_METHODS`)."""
    if method not in DIFF_METHODS:
        raise FitError(f"diff: method {method!r} is not one of {', '.join(DIFF_METHODS)} (the "
                       "per-cell fits whose resamples it pairs; the surface method is not "
                       "supported here)")  # fmt: skip


def check_diff_resamples(n_boot: object) -> None:
    """FitError unless ``n_boot`` resamples per law can give a diff its intervals: a whole number
    of at least :func:`~sweeper.fitting.fit_runs.min_resamples` at the corrected level of the
    fewest quantities a diff compares (an exponent and the LR ratio: 1 − 0.05/2, 80 resamples).
    The fits' 0 ("no resampling") is refused up front, since every verdict of a diff is an
    interval (it had fitted both sweeps, then raised that a law had too few resamples (1) for
    intervals). How many the diff's m quantities need is known after the fits
    (:func:`_check_draws`)."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral):
        check_resamples(n_boot, "n_boot (--bootstrap)")  # type: ignore[arg-type]
    least = min_resamples(1.0 - ALPHA / 2)
    if int(n_boot) < least:  # type: ignore[call-overload]
        raise FitError(
            f"diff: n_boot (--bootstrap) must be at least {least}, got {n_boot}: a diff's "
            "verdicts are intervals from the two laws' resamples, corrected for 2 quantities at "
            "least (none without resampling); fit each sweep with n_boot=0 for its point law alone"
        )


def _check_draws(draws: Sequence[np.ndarray], n_boot: int, m: int, level: float) -> None:
    """FitError unless every quantity has the resamples its corrected interval at ``level`` (m
    quantities) rests on: one in each tail (:func:`~sweeper.fitting.fit_runs.min_resamples`),
    with the ``--bootstrap`` that gives them (an audit: 40 and 100 draws called AdamW against
    Muon "moved", corrected [1.17, 26.6]; 200 and 4000 did not). A fit that drops resamples
    (a bootstrap of few distinct cells) is asked for as many more."""
    least = min_resamples(level)
    have = min(int(np.isfinite(d).sum()) for d in draws)
    if have >= least:
        return
    need = math.ceil(least * n_boot / have) if have else least
    raise FitError(
        f"diff: n_boot (--bootstrap) {n_boot} leaves {have} resamples per quantity, too few for "
        f"the corrected intervals over {m} quantities (level {level:.4g}: {least} for one in "
        f"each tail); give {need} or more"
    )


def diff_runs(
    runs_a: pd.DataFrame,
    runs_b: pd.DataFrame,
    *,
    conventions: tuple[Conventions, Conventions] = (Conventions(), Conventions()),
    names: tuple[str, str] = ("a", "b"),
    method: str = DIFF_METHODS[0],
    predictors: Sequence[str] | None = None,
    target: Mapping[str, float] | None = None,
    n_boot: int = DEFAULT_BOOT,
    cell_boot: int = 200,
    seed: int = 0,
    **options: Any,
) -> DiffResult:
    """Compare sweep B's runs with sweep A's (module docstring). ``predictors``: both laws'
    (default: the scale variables both sweeps' cells vary); ``target``: predictor values of the
    LR ratio (missing ones from the largest cell; FLOPs counted from a given N or D);
    ``n_boot``: resamples per law, all of them used; ``options``: more :class:`FitOptions`.
    FitError for a method not in :data:`~sweeper.fitting.methods.DIFF_METHODS`, for fewer
    resamples than the corrected intervals rest on (``n_boot`` 0, the fits' "no resampling",
    leaves a diff no intervals, and so no verdict), and for a target N that a law on width or
    depth cannot take."""
    check_diff_method(method)
    check_diff_resamples(n_boot)
    for runs, name in ((runs_a, names[0]), (runs_b, names[1])):
        _check_schedules(runs, name)
    opts = FitOptions(method=method, n_boot=n_boot, cell_boot=cell_boot, seed=seed, **options)
    same = _same_runs(runs_a, runs_b)
    seeds = _side_seeds(runs_a, runs_b, seed, same)
    laws_a, laws_b = _fit_sides((runs_a, runs_b), conventions, names, predictors, opts, seeds)
    la, lb = laws_a["lr"], laws_b["lr"]
    apart = _counted_apart(la, lb)
    scale, target_notes = _target(la, lb, runs_a, runs_b, target, derive=not apart)
    rngs = (np.random.default_rng(seeds[0]), np.random.default_rng(seeds[1]))
    quantities = _law_quantities(laws_a, laws_b, scale, seeds, ratios=not apart)
    batch = "bratio" in quantities
    losses = _best_losses(runs_a, runs_b, rngs, n_boot)
    notes = _loss_notes(runs_a, runs_b, bool(losses), same)
    notes += _notes(la, lb, scale, given=target or {}, at_target=not apart)
    notes += target_notes
    m = (
        len(quantities["exp"])
        + ("ratio" in quantities)
        + len(quantities.get("bexp", {}))
        + ("bratio" in quantities)
        + len(losses)
    )
    level_c = 1.0 - ALPHA / m
    draws = [d for _, d in quantities["exp"].values()]
    draws += [d for _, d in quantities.get("bexp", {}).values()]
    draws += [quantities[k][1] for k in ("ratio", "bratio") if k in quantities]
    _check_draws([*draws, *(d for _, d in losses.values())], n_boot, m, level_c)

    def est(q: tuple[float, np.ndarray], ratio: bool = False) -> Estimate:
        value, draws = q
        ci, cic = _pct(draws, 0.95), _pct(draws, level_c)
        if ratio:
            return Estimate(math.exp(value), _exp(ci), _exp(cic), null=1.0)
        return Estimate(value, ci, cic)

    return DiffResult(
        a=names[0],
        b=names[1],
        method=method,
        target=scale,
        exponent_differences={p: est(q) for p, q in quantities["exp"].items()},
        target_lr_ratio=est(quantities["ratio"], ratio=True) if "ratio" in quantities else None,
        best_loss_differences={c: est(q) for c, q in losses.items()},
        n_quantities=m,
        corrected_level=level_c,
        laws=(la, lb),
        target_batch_ratio=est(quantities["bratio"], ratio=True) if batch else None,
        batch_exponent_differences={p: est(q) for p, q in quantities.get("bexp", {}).items()},
        notes=tuple(notes),
        same_runs=same,
        target_refused=apart,
    )


#: what two laws must share to compare like with like; a difference is said, not refused (it
#: may be the change under test: another optimizer, parametrization or schedule)
_MEASURED_AS: Final[tuple[str, ...]] = (
    "parametrization", "base_width", "base_depth", "optimizer", "schedule", "min_lr_ratio",
    "warmup", "tokens", "n_params", "data",
)  # fmt: skip


#: what tells two runs apart when the two sides are compared (:func:`_same_runs`)
_RUN_KEYS: Final[tuple[str, ...]] = (
    "cell", "lr", "batch_size", "seed", "loss", "diverged", "state",
)  # fmt: skip


def _run_keys(runs_a: pd.DataFrame, runs_b: pd.DataFrame) -> list[str]:
    return [c for c in _RUN_KEYS if c in runs_a and c in runs_b]


def _sorted_runs(runs: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """The runs' ``cols``, in an order that does not depend on the runs' order, as text."""
    return runs[list(cols)].sort_values(list(cols)).reset_index(drop=True).astype(str)


def _same_runs(runs_a: pd.DataFrame, runs_b: pd.DataFrame) -> bool:
    """Whether the two sides hold the same runs (cell, LR, batch, seed, loss, divergence), in
    any order: one sweep diffed with itself, whatever its name or storage."""
    cols = _run_keys(runs_a, runs_b)
    if len(runs_a) != len(runs_b) or not cols:
        return False
    return bool(_sorted_runs(runs_a, cols).equals(_sorted_runs(runs_b, cols)))


def _side_seeds(
    runs_a: pd.DataFrame, runs_b: pd.DataFrame, seed: int, same: bool
) -> tuple[int, int]:
    """The seed of each side's resamples (its law's and its best losses'): ``seed`` for both when
    they hold the same runs, so a sweep diffed with itself is 0 in every resample (its best
    losses had had intervals of ±0.05 under the note that every difference is 0, a verbs
    audit); else ``seed`` and ``seed + 1``, in the order of a digest of each side's runs, not of
    the sides (B had always had seed + 1, so swapping A and B moved the intervals). One seed for
    two sides of other runs would not do: the t draws of laws of few cells would be the same on
    both sides, and their difference far too narrow."""
    cols = _run_keys(runs_a, runs_b)

    def digest(runs: pd.DataFrame) -> str:
        text = _sorted_runs(runs, cols).to_csv(index=False) if cols else str(len(runs))
        return hashlib.sha256(text.encode()).hexdigest()

    if same:
        return seed, seed
    return (seed, seed + 1) if digest(runs_a) <= digest(runs_b) else (seed + 1, seed)


def _loss_notes(runs_a: pd.DataFrame, runs_b: pd.DataFrame, losses: bool, same: bool) -> list[str]:
    """Why no best-loss difference was compared, and that the two sides are one."""
    notes = ["A and B hold the same runs: every difference is 0"] if same else []
    if losses:
        return notes
    shared = set(runs_a["cell"]) & set(runs_b["cell"])
    finished = set(_point_stats(runs_a)["cell"]) & set(_point_stats(runs_b)["cell"])
    notes.append(
        "the sweeps share no cell: no best-loss differences" if not shared
        else "no cell the sweeps share has a finished run that did not diverge on both sides: no "
        "best-loss differences" if not finished
        else "every point of the cells the sweeps share has one seed: the best-loss differences "
        "need a second seed somewhere to know the noise, and are not compared"
    )  # fmt: skip
    return notes


def _notes(
    la: PowerLaw,
    lb: PowerLaw,
    scale: Mapping[str, float],
    *,
    given: Mapping[str, float],
    at_target: bool = True,
) -> list[str]:
    """What the reader of a diff must know of its laws (a diff audit found SP against muP,
    another token budget and a 65x extrapolation compared in silence): what the two LR laws
    measured differently, what one side's cells vary that the laws leave out, and, when a ratio
    is given at the target (``at_target``), where the target lies beyond either law's cells or
    off what they held fixed. The base shape is left out where a side is SP: an SP LR has none
    (an import refuses one), and "B records no base_width (A 64)" had been said of two SP
    sweeps."""
    notes: list[str] = []
    ca, cb = la.conventions, lb.conventions
    meanings = _lr_meanings(ca, cb)
    if meanings:
        notes.append(f"the LRs mean different things: {meanings}")
    sp = "sp" in (ca.parametrization, cb.parametrization)
    for key in _MEASURED_AS:
        if sp and key in ("base_width", "base_depth"):
            continue
        va, vb = getattr(ca, key), getattr(cb, key)
        if va is None or vb is None:  # (imported without its study: not recorded, not other)
            notes += [f"{side} records no {key} ({other} {v})" for side, other, v in
                      (("A", "B", vb), ("B", "A", va)) if v is not None]  # fmt: skip
        elif va != vb:
            notes.append(f"A and B differ in {key}: A {va}, B {vb}")
    if ca.n_params_source != cb.n_params_source:  # (a function's N is a formula's, a model's not)
        notes.append(
            f"A and B count N differently: A {ca.n_params_source}, B {cb.n_params_source} (their "
            "N axes agree only where the models match 12·L·d²)"
        )
    varied = {"A's": _varied(la), "B's": _varied(lb)}
    if varied["A's"] and varied["A's"] == varied["B's"]:  # (one note for both, as the laws' own)
        varied = {"A's and B's": varied["A's"]}
    notes += [f"{side} cells vary {v}" for side, v in varied.items() if v]
    for side, law in (("A", la), ("B", lb)):
        notes += [f"{side}'s lr law: {n}" for n in law.notes if KEPT_EDGE in n]
        if not at_target:
            continue
        far = {p: f for p, f in law.extrapolation(scale).items() if f > 1.01}
        if far:
            words = ", ".join(f"{p} {f:.3g}x" for p, f in far.items())
            notes.append(f"the target lies beyond {side}'s cells ({words}): its law extrapolates")
        for p, v in given.items():
            held = law.conventions.held.get(p)
            off = held is not None and not held[0] / 1.01 <= v <= held[1] * 1.01
            if p not in law.predictors and off:
                notes.append(f"{side}'s law does not model {p} (its cells held it at "
                             f"{law.conventions.held_span(p)}): the target's {p} {v:.3g} does "
                             "not enter it")  # fmt: skip
    notes += [f"the cells held {k} elsewhere: A {ca.held_span(k)}, B {cb.held_span(k)}"
              for k in _held_apart(la, lb)]  # fmt: skip
    return notes


#: what a parametrization's LR is, in words
_LR_OF: Final[dict[str, str]] = {
    "sp": "an SP model's LR",
    "mup": "a muP model's base-width LR",
    "completep": "a CompleteP model's base-shape LR",
}


#: the fields that say what an LR was measured under (the ``lr`` text says them in words)
_LR_FIELDS: Final[tuple[str, ...]] = (
    "optimizer", "schedule", "min_lr_ratio", "warmup", "decay_fraction", "z_loss",
    "weight_decay_tau", "train_function",
)  # fmt: skip


def _lr_meanings(ca: Conventions, cb: Conventions) -> str:
    """How the two laws' LRs differ in meaning, in words ("" when they do not): another
    optimizer's or schedule's LR (:data:`_LR_FIELDS` that both record and that differ: the
    words of a launched sweep and of an import declaring the same optimizer and schedule had
    been told apart, a diff audit; one that a side does not record is its own note), or another
    parametrization's (a muP LR is the base width's: a diff of SP against muP had said only
    that they "differ in parametrization", as if the two LR laws could be set side by side, a
    verbs audit), or another base shape's."""
    parts = []
    if any(
        va is not None and vb is not None and va != vb
        for va, vb in ((getattr(ca, k), getattr(cb, k)) for k in _LR_FIELDS)
    ):
        parts.append(f"A {ca.lr!r}; B {cb.lr!r}")
    pa, pb = ca.parametrization, cb.parametrization
    base = (ca.base_width, ca.base_depth) != (cb.base_width, cb.base_depth)
    if pa and pb and (pa != pb or (pa != "sp" and base)):
        parts.append(f"A {_lr_of(ca)}, B {_lr_of(cb)}")
    return "; ".join(parts)


def _lr_of(c: Conventions) -> str:
    """What an LR of these conventions is: "a muP model's base-width LR (base width 64)"."""
    p = c.parametrization or "sp"
    words = _LR_OF.get(p, f"a {p} model's LR")
    if p == "sp":
        return words
    shape = [f"base width {c.base_width}" if c.base_width else "base width not recorded"]
    if p == "completep":
        shape.append(f"base depth {c.base_depth}" if c.base_depth else "base depth not recorded")
    return f"{words} ({', '.join(shape)})"


def _held_apart(la: PowerLaw, lb: PowerLaw) -> list[str]:
    """What the two laws' cells held fixed at other values (beyond 1% at either end): the laws
    then answer for other regimes. Tokens per parameter follows from N and D, and is left out;
    so is what one law records and the other does not (a law fitted before depth was recorded,
    or runs imported without a depth column: a review saw 'the cells held depth elsewhere: A
    None, B 2' beside 'A and B hold the same runs'), and what one side's cells vary, which
    :func:`_varied` says (an audit read "the cells held depth elsewhere: A 2, B 1–16")."""
    ha, hb = la.conventions.held, lb.conventions.held
    keys = sorted((set(ha) & set(hb)) - {"tokens_per_param", *la.predictors, *lb.predictors})
    return [
        k
        for k in keys
        if not (_spans(ha[k]) or _spans(hb[k]))
        and any(abs(math.log(x / y)) > 0.01 for x, y in zip(ha[k], hb[k], strict=True) if x > 0 < y)
    ]


def _spans(r: tuple[float, float]) -> bool:
    """Whether a held range is more than one value (beyond 1%)."""
    lo, hi = r
    return lo > 0 and hi > lo * 1.01


def _varied(law: PowerLaw) -> str:
    """What ``law``'s cells vary that it leaves out (held ranges of more than one value), as
    the end of a note ("" for nothing): the law takes the optimum as one over them (a diff
    audit: a Step Law ladder whose D spans 4e9-1e11 was fitted on N alone and called moved,
    without a word). N and D of cells at one tokens per parameter move together: the law on
    one models the other."""
    conv = law.conventions
    tpp = conv.held.get("tokens_per_param")
    tied = {"n_params", "tokens"} if tpp is not None and not _spans(tpp) else set()
    # (the scales a law may take: a batch or a sequence length that varied is no predictor, and
    # --predictors could not take it in: a review)
    left = {k for k in conv.held if k in PREDICTORS and _spans(conv.held[k])}
    if tied & set(law.predictors):
        left -= tied
    vary = [f"{k} ({conv.held_span(k)})" for k in sorted(left)]
    if not vary:
        return ""
    return (
        f"{', '.join(vary)}, which the lr laws leave out (fitted on "
        f"{', '.join(law.predictors)}; --predictors chooses)"
    )


def _law_quantities(
    laws_a: Mapping[str, PowerLaw],
    laws_b: Mapping[str, PowerLaw],
    scale: Mapping[str, float],
    seeds: tuple[int, int],
    *,
    ratios: bool = True,
) -> dict[str, Any]:
    """(value, draws) of B − A for every exponent and of ln(B / A) at ``scale``: ``exp`` and
    ``ratio`` for the LR laws, ``bexp`` and ``bratio`` for the batch laws when both have one
    (no ratios unless ``ratios``). Each law's draws in the order of its side's seed
    (:func:`_draws`)."""

    def of(la: PowerLaw, lb: PowerLaw) -> dict[str, Any]:
        ca, cb = _draws(la, seeds[0]), _draws(lb, seeds[1])
        exps = {
            p: _pair(ca[:, i + 1], cb[:, i + 1], la.exponents[p], lb.exponents[p])
            for i, p in enumerate(la.predictors)
        }
        if not ratios:
            return {"exp": exps}
        ratio = _pair(
            _logpred(ca, la, scale),
            _logpred(cb, lb, scale),
            la.log_predict(scale),
            lb.log_predict(scale),
        )
        return {"exp": exps, "ratio": ratio}

    out = of(laws_a["lr"], laws_b["lr"])
    if "batch_tokens" in laws_a and "batch_tokens" in laws_b:
        batch = of(laws_a["batch_tokens"], laws_b["batch_tokens"])
        out.update({f"b{k}": v for k, v in batch.items()})
    return out


def _draws(law: PowerLaw, seed: int) -> np.ndarray:
    """Every resample of ``law``'s coefficients, shuffled by its side's ``seed``, so that draw i
    of A and draw i of B pair independently: the t draws of a law of few cells are scrambled
    Sobol points, and two scrambles of one sequence, paired index by index, had A's and B's
    draws of one sign in every pair (or of opposite signs, with the seeds): the difference's
    95% interval moved ±25% with ``--seed``. The same runs at one seed keep one order (their
    difference 0 in every draw)."""
    coefs = np.asarray(law.boot_coefs, dtype=float)
    if coefs.ndim != 2 or len(coefs) < 20:
        raise FitError(
            f"law {law.source}:{law.target} has too few resamples ({len(coefs)}) for intervals"
        )
    return coefs[np.random.default_rng((seed, _PAIRING)).permutation(len(coefs))]


#: mixed into a side's seed for the order of its draws (not the stream of its best losses)
_PAIRING: Final[int] = 1


def _check_schedules(runs: pd.DataFrame, name: str) -> None:
    if "schedule" not in runs:
        return
    per_cell = runs.dropna(subset=["schedule"]).groupby("cell")["schedule"].nunique()
    if (per_cell > 1).any():
        raise FitError(
            f"sweep {name}: the schedule is searched within its cells; compare one schedule at a "
            "time (filter the runs on the schedule column)"
        )


def _fit_sides(
    runs: tuple[pd.DataFrame, pd.DataFrame],
    convs: tuple[Conventions, Conventions],
    names: tuple[str, str],
    predictors: Sequence[str] | None,
    opts: FitOptions,
    seeds: tuple[int, int],
) -> tuple[dict[str, PowerLaw], dict[str, PowerLaw]]:
    """Both sweeps' laws on the same predictors: ``predictors`` for both when given, else, per
    target, the default predictors (the scale variables the cells vary) that both sides share,
    whichever side is A; a side whose own default differs is fitted again on them. B had been
    fitted on A's: Step Law's ladder (N and D varying) on N alone against an N-only ladder, and
    the other way round refused because the N-only ladder's D does not vary."""

    def fit(
        i: int, preds: Sequence[str] | Mapping[str, Sequence[str]] | None
    ) -> dict[str, PowerLaw]:
        return _fit(runs[i], convs[i], names[i], preds, replace(opts, seed=seeds[i]))

    if predictors:
        return fit(0, predictors), fit(1, predictors)
    laws = [fit(0, None), fit(1, None)]
    common: dict[str, tuple[str, ...]] = {}
    for t in sorted(laws[0].keys() & laws[1].keys()):
        pa, pb = laws[0][t].predictors, laws[1][t].predictors
        common[t] = tuple(p for p in PREDICTORS if p in pa and p in pb)
        if not common[t]:
            raise FitError(
                f"diff: A's cells vary {', '.join(pa)}, B's {', '.join(pb)}: no scale in common "
                f"to fit both {t} laws on; choose with --predictors"
            )
    for i in (0, 1):
        if any(laws[i][t].predictors != p for t, p in common.items()):
            laws[i] = fit(i, common)
    return laws[0], laws[1]


def _fit(
    runs: pd.DataFrame,
    conv: Conventions,
    name: str,
    predictors: Sequence[str] | Mapping[str, Sequence[str]] | None,
    opts: FitOptions,
) -> dict[str, PowerLaw]:
    try:
        outcome = fit_runs(runs, conventions=conv, source=name, predictors=predictors, options=opts)
    except FitError as e:
        raise FitError(f"sweep {name}: {e}") from None
    laws = {law.target: law for law in outcome.laws if isinstance(law, PowerLaw)}
    if "lr" not in laws:
        raise FitError(f"sweep {name}: no LR law could be fitted")
    return laws


def _logpred(coefs: np.ndarray, law: PowerLaw, scale: Mapping[str, float]) -> np.ndarray:
    lx = np.concatenate([[1.0], np.log([float(scale[p]) for p in law.predictors])])
    return coefs @ lx


def _pair(a: np.ndarray, b: np.ndarray, va: float, vb: float) -> tuple[float, np.ndarray]:
    """(b − a at the estimates, draws of b − a): the laws were fitted independently, so draw i of
    one is paired with draw i of the other."""
    n = min(len(a), len(b))
    return float(vb - va), b[:n] - a[:n]


def _pct(draws: np.ndarray, level: float) -> tuple[float, float]:
    d = draws[np.isfinite(draws)]
    lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _exp(ci: tuple[float, float]) -> tuple[float, float]:
    return math.exp(ci[0]), math.exp(ci[1])


def _target(
    la: PowerLaw,
    lb: PowerLaw,
    runs_a: pd.DataFrame,
    runs_b: pd.DataFrame,
    given: Mapping[str, float] | None,
    *,
    derive: bool = True,
) -> tuple[dict[str, float], list[str]]:
    """The target scale and its notes: ``given``, completed from the largest cell of the two
    sweeps (the largest N, and of those the largest D: validate_transfer's "largest"; the first
    row at the largest N had made the target's D depend on the order of the runs). When the
    given N or D moves a predictor they do not name (``derive``; off where no ratio is given),
    the laws' FLOPs are counted as a recommendation counts them (:func:`_target_flops`), and a
    law on width or depth refuses a given N (FitError): the largest cell's FLOPs, width and
    depth had been kept in silence beside "at n_params 1e+09, tokens 2e+10"."""
    both = pd.concat([runs_a, runs_b], ignore_index=True)
    keys = [k for k in ("n_params", "tokens") if k in both]
    size = both[keys].apply(pd.to_numeric, errors="coerce").fillna(0.0)
    row = both.loc[size.sort_values(keys, kind="stable").index[-1]]
    scale = {
        p: float(row[p])
        for p in ("n_params", "tokens", "flops", "width", "depth")
        if p in row and pd.notna(row[p])
    }
    told = {k: float(v) for k, v in (given or {}).items() if v is not None}
    preds = {*la.predictors, *lb.predictors}
    notes: list[str] = []
    if derive and told.keys() & {"n_params", "tokens"}:
        shape = [p for p in ("width", "depth") if p in preds and p not in told]
        if shape and "n_params" in told:
            raise FitError(
                f"diff: the laws are fitted on {' and '.join(shape)}, which a target N (--params) "
                f"does not give: give {' and '.join(f'--{p}' for p in shape)}, leave --params out "
                "(the largest cell's), or fit on n_params (--predictors)"
            )
        if "flops" in preds and "flops" not in told:
            at = {**scale, **told}
            if "n_params" in told and not {"width", "depth"} <= told.keys():
                at.pop("width", None)  # (the largest cell's shape is not the given N's)
                at.pop("depth", None)
            seq = pd.to_numeric(row.get("seq_len"), errors="coerce")
            scale["flops"], note = _target_flops(la, at, seq_len=int(seq) if seq > 0 else None)
            notes.append(note)
    scale.update(told)
    missing = [p for p in preds if p not in scale]
    if missing:
        raise FitError(f"give the target's {', '.join(missing)}")
    return scale, notes


def _target_flops(
    law: PowerLaw, scale: Mapping[str, float], *, seq_len: int | None
) -> tuple[float, str]:
    """The FLOPs of the target (its N, D, and its width and depth, or a shape inferred from N
    where ``scale`` has none) in ``law``'s convention, by
    :func:`sweeper.recipe.scale.law_scale`, the rule a recommendation follows, with the
    sequence length of the largest cell (``seq_len``; else the recommendation's default);
    FitError for a convention Sweeper cannot count. Both laws count FLOPs alike here
    (:func:`_counted_apart`). Returns (FLOPs, the note saying how they were counted)."""
    conv = law.conventions.flops
    if conv not in KNOWN_FLOPS:
        raise FitError(
            f"diff: the laws count FLOPs {conv!r}, which Sweeper cannot count at a target N or D "
            "(--params, --tokens): leave them out (the largest cell's FLOPs)"
        )
    missing = [k for k in ("n_params", "tokens") if k not in scale]
    if missing:
        raise FitError(f"give the target's {', '.join(missing)}: its FLOPs count N and D")
    n, d = scale["n_params"], scale["tokens"]
    shape_given = "width" in scale and "depth" in scale
    if shape_given:
        width, depth = int(scale["width"]), int(scale["depth"])
    else:
        width, depth = infer_shape(n)
    t = seq_len or DEFAULT_SEQ_LEN
    flops = law_scale(law, n_params=n, tokens=d, width=width, depth=depth, seq_len=t)["flops"]
    how = "its shape" if shape_given else "a shape inferred from N"
    return flops, (
        f"the target's FLOPs {flops:.3g} are counted as {conv} at N {n:.3g}, D {d:.3g}, "
        f"{how} ({depth} layers × d_model {width}) and context {t}, as recommend counts them"
    )


def _counted_apart(la: PowerLaw, lb: PowerLaw) -> str:
    """Why the two laws take no ratio at one target ("" when they do): they count N, D (a known
    unit each) or FLOPs differently, and use what they count. One N given to both is then two
    models (an audit: non-embedding against total N got a ratio at the total-N sweep's largest
    cell, with a note that the other law extrapolates there)."""
    ca, cb = la.conventions, lb.conventions
    preds = {*la.predictors, *lb.predictors}
    parts = []
    if preds & {"n_params", "flops"} and ca.n_params != cb.n_params:
        parts.append(f"N (A {ca.n_params}, B {cb.n_params})")
    known = TOKENS_AS_IMPORTED not in (ca.tokens, cb.tokens)
    if preds & {"tokens", "flops"} and known and ca.tokens != cb.tokens:
        parts.append(f"D (A {ca.tokens}, B {cb.tokens})")
    if "flops" in preds and ca.flops != cb.flops:
        parts.append(f"FLOPs (A {ca.flops}, B {cb.flops})")
    if not parts:
        return ""
    return (
        f"A and B count {', '.join(parts)} differently: one target would be two models to the "
        "two laws"
    )


def _point_stats(runs: pd.DataFrame) -> pd.DataFrame:
    done = runs[(runs["state"] == _COMPLETE) & ~runs["diverged"].astype(bool)]
    done = done[np.isfinite(pd.to_numeric(done["loss"], errors="coerce"))]
    keys = ["cell", "lr"] + (["batch_size"] if "batch_size" in done else [])
    g = done.groupby(keys)["loss"]
    return pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1), "n": g.size()}).reset_index()


def _best_losses(
    runs_a: pd.DataFrame,
    runs_b: pd.DataFrame,
    rngs: tuple[np.random.Generator, np.random.Generator],
    n: int,
) -> dict[str, tuple[float, np.ndarray]]:
    """Per shared cell: (best mean loss of B − that of A, parametric resamples of it); each
    side's draws from its own generator (:func:`_side_seeds`)."""
    pa, pb = _point_stats(runs_a), _point_stats(runs_b)
    out: dict[str, tuple[float, np.ndarray]] = {}
    shared = _by_scale(set(pa["cell"]) & set(pb["cell"]), runs_a)
    sds = {c: _near_optimum_sd(pa[pa["cell"] == c], pb[pb["cell"] == c]) for c in shared}
    # a cell with one seed at every point takes the spread pooled over the cells that have one
    # (it had been left out, and the note said the sweeps share no cell)
    known = np.array([v for v in sds.values() if math.isfinite(v)])
    fallback = float(np.sqrt(np.mean(known**2))) if known.size else math.nan
    for cell in shared:
        ca, cb = pa[pa["cell"] == cell], pb[pb["cell"] == cell]
        pooled = sds[cell] if math.isfinite(sds[cell]) else fallback
        if not math.isfinite(pooled):
            continue
        da = _best_draws(ca, pooled, rngs[0], n)
        db = _best_draws(cb, pooled, rngs[1], n)
        va = float(pa.loc[pa["cell"] == cell, "mean"].min())
        vb = float(pb.loc[pb["cell"] == cell, "mean"].min())
        out[str(cell)] = (vb - va, db - da)
    return out


def _by_scale(cells: set[Any], runs: pd.DataFrame) -> list[Any]:
    """``cells`` smallest first, by N then D (then name), as the fits order them (as strings,
    w128 came before w16)."""
    keys = [k for k in ("n_params", "tokens") if k in runs]
    scale = runs.groupby("cell")[keys].first().apply(pd.to_numeric, errors="coerce")

    def key(cell: Any) -> tuple[Any, ...]:
        values = (scale.at[cell, k] for k in keys)
        return (*(float(v) if pd.notna(v) else math.inf for v in values), str(cell))

    return sorted(cells, key=key)


def _near_optimum_sd(*cells: pd.DataFrame) -> float:
    """The seed spread near a cell's optimum: the pooled SD of the points at or below the median
    loss of their sweep's cell (both sweeps), where the noise is smallest and the best point lies;
    one pooled value, since an SD from two seeds alone is too rough to trust per point."""
    sds = [c.loc[c["mean"] <= c["mean"].median(), "sd"] for c in cells]
    pooled = pd.concat(sds).dropna()
    return float(np.sqrt(np.mean(pooled**2))) if len(pooled) else math.nan


def _best_draws(points: pd.DataFrame, sd: float, rng: np.random.Generator, n: int) -> np.ndarray:
    """Draws of the cell's best seed-mean loss: every point's mean resampled with standard error
    ``sd / sqrt(seeds)``, then the minimum over points."""
    se = sd / np.sqrt(points["n"].to_numpy(dtype=float))
    means = points["mean"].to_numpy(dtype=float)
    return (means[None, :] + rng.standard_normal((n, len(means))) * se[None, :]).min(axis=1)


def _ci(e: Mapping[str, Any], fmt: str = "+.3f") -> str:
    """One quantity of :meth:`DiffResult.to_json` as text: value, 95% and corrected intervals,
    and a star when the corrected one excludes the null."""
    lo, hi = e["ci"]
    clo, chi = e["ci_corrected"]
    star = "  *" if e["excludes_null"] else ""
    return (
        f"{e['value']:{fmt}}  95% [{lo:{fmt}}, {hi:{fmt}}]  corrected [{clo:{fmt}}, {chi:{fmt}}]"
        f"{star}"
    )


def _law_notes(a: PowerLaw, b: PowerLaw) -> list[str]:
    """Each LR law's own notes (a poor fit, too few cells to resample), once for both sides
    where they share one; --json had carried them and the text had not (a verbs audit). Those
    on cells kept on their edge are the diff's notes already (:func:`_notes`)."""
    out = []
    for n in dict.fromkeys([*a.notes, *b.notes]):
        if KEPT_EDGE in n:
            continue
        side = ("A's and B's lr laws" if n in a.notes and n in b.notes
                else "A's lr law" if n in a.notes else "B's lr law")  # fmt: skip
        out.append(f"  {side}: {n}")
    return out


def _law_words(law: PowerLaw) -> str:
    """``n_params^-0.578 [-1.91, +0.77]`` for each predictor of ``law``."""
    parts = []
    for p in law.predictors:
        ci = law.exponents_ci.get(p)
        span = f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""
        parts.append(f"{p}^{law.exponents[p]:+.3f}{span}")
    return " · ".join(parts)


def _r(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(f"{v:.6g}")

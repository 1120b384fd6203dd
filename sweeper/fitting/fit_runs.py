"""Which laws to fit to a runs table, and with what: the rules behind ``sweeper fit`` and
:func:`sweeper.fit`, in one place.

- Targets: ``lr``, plus ``batch_tokens`` when the batch size varies within cells (a batch law
  that cannot be fitted is then skipped with a note, not an error); or the one asked for
  (``lr``, ``batch_tokens``, or ``loss`` for L(N, D)).
- Predictors: those of ``n_params`` and ``tokens`` that vary across the usable cells (``n_params``
  alone when tokens is a power of n_params there, e.g. a fixed tokens-per-parameter ladder), unless
  given for all targets or per target; the surface's batch law defaults to ``tokens`` alone when
  tokens vary (B*(D), as Step Law and the batch ladders find).
- Methods: ``parabola`` (optimum per cell, then a weighted power law through the optima), ``band``
  (every run within ``band`` of its cell's best loss, the Step Law way), ``surface`` (one model of
  every run of every cell whose optimum is the law, :mod:`sweeper.fitting.surface`; the LR and
  batch laws come from one joint fit).

Pure: a runs table in, frozen laws out (storing them is :mod:`sweeper.fitting.store`'s job).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting._common import FitWarning, min_cells
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import Law
from sweeper.fitting.loss_law import fit_loss_law
from sweeper.fitting.methods import (
    BATCH_EDGE_NOTE,
    BATCH_FEW_NOTE,
    BATCH_PROFILE_NOTE,
    DEFAULT_METHOD,
    EDGE_NOTE,
    FIT_METHODS,
    FREE_UNCONVERGED,
    METHOD_HELP,
    SURFACE_SETTINGS,
    SURFACE_UNCONVERGED,
)
from sweeper.fitting.optimum import (
    CellOptimum,
    blow_up_note,
    blown_up,
    estimate_optima,
    loss_points,
)
from sweeper.fitting.power_law import fit_band_law, fit_power_law
from sweeper.study.runs import DEVICE_PRECISION, device_kinds

__all__ = [
    "CELL_SEED",
    "FIT_METHODS",
    "METHOD_HELP",
    "FitOutcome",
    "batch_varies",
    "check_method",
    "check_resamples",
    "check_surface",
    "default_predictors",
    "fit_runs",
    "min_resamples",
    "scale_predictors",
]

FIT_TARGETS: Final[tuple[str, ...]] = ("lr", "batch_tokens", "loss")
_SCALE_VARS: Final[tuple[str, ...]] = ("n_params", "tokens")
#: the coverage of every interval the fits give (law coefficients, cell optima, the loss law)
INTERVAL_LEVEL: Final[float] = 0.95


@dataclass(frozen=True)
class FitOutcome:
    """The laws fitted (in target order), the targets skipped (with why), and the doubts the
    fits raised that the laws do not already carry as notes."""

    laws: tuple[Law, ...]
    skipped: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


#: completed runs a cell needs unless the caller or the surface settings say otherwise
DEFAULT_MIN_RUNS: Final[int] = 4

NO_LR: Final[str] = "the runs have no lr values: only the loss law fits (--target loss)"


@dataclass(frozen=True)
class FitOptions:
    """How to fit (see :func:`fit_runs` for each option's meaning)."""

    method: str = DEFAULT_METHOD
    band: float = 0.0025
    n_boot: int | None = None
    cell_boot: int = 200
    min_runs: int | None = None  # None: :meth:`cell_min_runs`' default
    keep_edge: bool = False
    huber: bool = False
    weighted: bool = True
    loss_points: str = "best"
    seed: int = 0
    surface: str = "standard"

    def cell_min_runs(self) -> int:
        """The completed runs a cell needs: ``min_runs`` where the caller gave it, else the
        surface settings' own (the planner's 3), else :data:`DEFAULT_MIN_RUNS`. (A given
        ``--min-runs`` had been overridden by the planner's 3, even when it was 4, the default:
        one could not be told from the other.)"""
        if self.min_runs is not None:
            return self.min_runs
        from sweeper.fitting.surface import SETTINGS

        named = SETTINGS[self.surface].min_runs if self.method == "surface" else None
        return named or DEFAULT_MIN_RUNS


def fit_runs(
    runs: pd.DataFrame,
    *,
    conventions: Conventions,
    source: str,
    target: str | None = None,
    predictors: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    options: FitOptions | None = None,
) -> FitOutcome:
    """Fit the laws of ``runs`` (see the module docstring for what is fitted).

    ``predictors``: one list for every target, or a mapping target → list. ``options``: the
    method (``surface`` | ``parabola`` | ``band``), the band width, law resamples ``n_boot``
    (default 200 for the surface, 1000 for the others, 100 for the loss law), resamples per cell
    optimum ``cell_boot``, completed runs a cell needs ``min_runs``, ``keep_edge`` cells optimal on a range edge, a Huber-robust or unweighted
    power law, the loss law's points (``best`` per cell or ``all``), the seed, and the surface
    method's named settings ``surface`` (:data:`sweeper.fitting.surface.SETTINGS`).
    """
    if target != "loss":  # the loss law takes each cell's best run: no batch unit in it
        _check_batch_known(runs)
    outcome = _fit_targets(runs, conventions, source, target, predictors, options)
    doubts = _device_doubt(runs) + _lr_unused_doubt(runs) + _tokens_doubt(runs)
    return replace(outcome, warnings=(*outcome.warnings, *doubts)) if doubts else outcome


def _device_doubt(runs: pd.DataFrame) -> list[str]:
    """A doubt when the runs were trained on devices of different precision."""
    mixed = device_kinds(runs["device"]) if "device" in runs else set()
    if len(mixed) < 2:
        return []
    how = ", ".join(f"{k}: {DEVICE_PRECISION.get(k, 'unknown precision')}" for k in sorted(mixed))
    return [
        f"the runs were trained on {' and '.join(sorted(mixed))} ({how}; near and above the best "
        "LR their losses differ by up to what a second seed does); fit each device's runs apart "
        "to compare them"
    ]


def _tokens_doubt(runs: pd.DataFrame) -> list[str]:
    """A doubt when runs of a training function trained more than 10% away from their cell's
    token budget (their ``tokens_note``, :mod:`proxy_models.train_function`): the fit takes them
    at the cell's D all the same (the note had been logged at launch, and the fit said
    nothing)."""
    if "tokens_note" not in runs:
        return []
    noted = runs[runs["tokens_note"].notna() & (runs["tokens_note"].astype(str) != "")]
    if noted.empty:
        return []
    cells = sorted(noted["cell"].astype(str).unique())
    shown = ", ".join(cells[:3]) + (f" and {len(cells) - 3} more" if len(cells) > 3 else "")
    note = str(noted["tokens_note"].iloc[0])
    note = note if len(note) <= 160 else note[:157] + "..."
    return [
        f"{len(noted)} run(s) in {shown} trained more than 10% away from their cell's tokens "
        f"(the first one's tokens_note: {note}): the fit takes them at the cell's D"
    ]


def _lr_unused_doubt(runs: pd.DataFrame) -> list[str]:
    """A doubt when, in a cell, runs at different LRs (same seed and batch) ended with exactly
    the same loss: the LR did not reach the training. A training function that ignored
    ``hparams["lr"]`` gave 6 identical losses a cell and a fit that said "widen the LR range"
    (an API audit)."""
    need = {"cell", "lr", "loss"}
    if not need <= set(runs.columns):
        return []
    done = runs[np.isfinite(pd.to_numeric(runs["loss"], errors="coerce"))]
    if "diverged" in done:
        done = done[~done["diverged"].fillna(False).astype(bool)]
    keys = ["cell", *[k for k in ("seed", "batch_size") if k in done], "loss"]
    distinct = done.dropna(subset=["lr"]).groupby(keys, dropna=False)["lr"].nunique()
    cells = sorted({str(k[0]) for k, n in distinct.items() if n > 1})
    if not cells:
        return []
    shown = ", ".join(cells[:3]) + (f" and {len(cells) - 3} more" if len(cells) > 3 else "")
    return [
        f"in {shown}, runs at different LRs ended with exactly the same loss: the LR does not "
        "reach the training (a training function that does not use hparams['lr']?), and no LR "
        "law measures anything there"
    ]


def _fit_targets(
    runs: pd.DataFrame,
    conventions: Conventions,
    source: str,
    target: str | None,
    predictors: Sequence[str] | Mapping[str, Sequence[str]] | None,
    options: FitOptions | None,
) -> FitOutcome:
    opt = options or FitOptions()
    _check_options(opt, target)
    if target == "loss" and predictors:  # (`--predictors width` fitted L(N, D), no word; audit)
        raise FitError(
            "--predictors: the loss law is L(N, D) in n_params and tokens, it takes no predictors"
        )
    implicit = target is None
    targets = [target] if target else ["lr"]
    if implicit and batch_varies(runs):
        targets.append("batch_tokens")
    if opt.method == "surface" and target != "loss":
        return _fit_surface(runs, conventions, source, target, predictors, opt)
    optima: list[CellOptimum] | None = None
    laws: list[Law] = []
    skipped: list[str] = []
    caught: list[str] = []
    for t in targets:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always", FitWarning)
            try:
                if t == "loss":
                    law: Law = _fit_loss(runs, conventions, source, opt)
                else:
                    if optima is None:
                        optima = _optima(runs, opt)
                    preds = _predictors_for(t, predictors, optima)
                    law = _fit_target(runs, optima, t, preds, conventions, source, opt)
            except FitError as e:
                if implicit and t == "batch_tokens":
                    skipped.append(f"batch_tokens not fitted: {e}")
                    continue
                raise
            caught += [str(x.message) for x in w if issubclass(x.category, FitWarning)]
        laws.append(law)
    shown = {n for law in laws for n in getattr(law, "notes", ())}
    doubts = [m for m in dict.fromkeys(caught) if m not in shown]
    return FitOutcome(laws=tuple(laws), skipped=tuple(skipped), warnings=tuple(doubts))


def _fit_surface(
    runs: pd.DataFrame,
    conv: Conventions,
    source: str,
    target: str | None,
    predictors: Sequence[str] | Mapping[str, Sequence[str]] | None,
    opt: FitOptions,
) -> FitOutcome:
    """The surface method: both laws from one joint fit of every run (``target`` picks one)."""
    from sweeper.fitting.surface import SETTINGS, fit_surfaces  # scipy-heavy; only this needs it

    def chosen(t: str) -> tuple[str, ...] | None:
        if isinstance(predictors, Mapping):
            got = predictors.get(t) or predictors.get("")
        else:
            got = predictors
        return tuple(got) if got else None

    if not (pd.to_numeric(runs.get("lr", pd.Series(dtype=float)), errors="coerce") > 0).any():
        raise FitError(NO_LR)
    if target == "batch_tokens" and not batch_varies(runs):
        raise FitError(
            "batch_tokens: the batch size does not vary within any cell (a cell is one (N, D): "
            "runs at a fixed step count put each batch size in a cell of its own)"
        )
    settings = SETTINGS[opt.surface]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", FitWarning)
        fitted = fit_surfaces(
            runs,
            lr_predictors=chosen("lr"),
            batch_predictors=chosen("batch_tokens"),
            n_boot=200 if opt.n_boot is None else opt.n_boot,
            seed=opt.seed,
            source=source,
            conventions=conv,
            min_runs=opt.cell_min_runs(),
            window=settings.window,
            shape_scaling=settings.shape_scaling,
        )
    _refuse_unconverged(fitted.values())
    if opt.surface != "standard":
        note = f"surface settings: {opt.surface}"
        fitted = {t: replace(law, notes=(*law.notes, note)) for t, law in fitted.items()}
    laws = tuple(law for t, law in fitted.items() if target in (None, t))
    skipped: tuple[str, ...] = ()
    if target in (None, "batch_tokens") and batch_varies(runs) and "batch_tokens" not in fitted:
        few = next((n for n in fitted["lr"].notes if n.startswith(BATCH_FEW_NOTE)), "")
        why = few.partition(f": {BATCH_PROFILE_NOTE}")[0] or "too few cells with the batch swept"
        if target == "batch_tokens":  # (asked for by name: refused, as the other methods do)
            raise FitError(f"batch_tokens not fitted: {why}")
        skipped = (f"batch_tokens not fitted: {why}",)
    shown = {n for law in laws for n in law.notes}
    caught = [str(x.message) for x in w if issubclass(x.category, FitWarning)]
    doubts = tuple(m for m in dict.fromkeys(caught) if m not in shown)
    return FitOutcome(laws=laws, skipped=skipped, warnings=doubts)


def _refuse_unconverged(laws: Iterable[Law]) -> None:
    """A surface law whose fit did not converge is no law: its exponents and intervals are
    wherever the optimizer stopped (an exponent of +86 [−858, +1256], a cell optimum at 1.8e30
    were stored, and recommended from). Refused with what usually causes it. So is one whose
    first step, every cell's optimum free, did not converge: its cell optima and the cells'
    scatter (the law's intervals) are wherever it stopped (12 cells of two batch sizes each had
    their batch law stored beside a note, cell optima of 507 and 1.5e10 tokens; a fit audit)."""
    notes = [n for law in laws for n in getattr(law, "notes", ())]
    stopped = next((n for n in notes if n.startswith(SURFACE_UNCONVERGED)), None)
    stopped = stopped or next((n for n in notes if n.startswith(FREE_UNCONVERGED)), None)
    if stopped is None:
        return
    what = "exponents" if stopped.startswith(SURFACE_UNCONVERGED) else "cell optima and intervals"
    cause = _edge_cause(notes, EDGE_NOTE, ("has its best run", "have their best runs"),
                        "LR range: widen the range there")  # fmt: skip
    cause += _edge_cause(notes, BATCH_EDGE_NOTE, ("has its best batch", "have their best batch"),
                         "batch range: widen the batch range there")  # fmt: skip
    raise FitError(
        f"{stopped}: no law is stored (its {what} would be wherever the fit stopped){cause}"
        + ("" if cause else "; add cells or seeds where the loss-vs-LR curves are flat or noisy")
    )


def _edge_cause(notes: Sequence[str], head: str, verb: tuple[str, str], fix: str) -> str:
    """The refusal's clause "; CELLS VERB on the edge of the FIX" from the note beginning with
    ``head`` ("" without one; ``verb`` for one cell and for more), at most four cells named (the
    batch law of 12 cells of two batch sizes each would have named them all)."""
    edge = next((n for n in notes if n.startswith(head)), None)
    if edge is None:
        return ""
    cells = edge[len(head) :].removeprefix(": ").split("; ")
    shown = "; ".join(cells[:4]) + (f"; and {len(cells) - 4} more" if len(cells) > 4 else "")
    return f"; {shown} {verb[len(cells) > 1]} on the edge of the {fix}"


def check_surface(setting: str) -> None:
    """FitError unless ``setting`` names the surface method's settings (:data:`SURFACE_SETTINGS`)."""
    if setting not in SURFACE_SETTINGS:
        known = ", ".join(SURFACE_SETTINGS)
        raise FitError(f"unknown surface settings {setting!r}; known: {known}")


def check_method(method: str) -> None:
    """FitError unless ``method`` is a fitting method (:data:`FIT_METHODS`)."""
    if method not in FIT_METHODS:
        raise FitError(f"unknown method {method!r}; known: {', '.join(FIT_METHODS)}")


def _check_options(opt: FitOptions, target: str | None) -> None:
    check_method(opt.method)
    check_surface(opt.surface)
    if target is not None and target not in FIT_TARGETS:
        raise FitError(f"unknown target {target!r}; known: {', '.join(FIT_TARGETS)}")
    if opt.n_boot is not None:
        check_resamples(opt.n_boot, "--bootstrap (n_boot)")
    if opt.method == "parabola" and target != "loss":  # (the only fit that resamples cells)
        check_resamples(opt.cell_boot, "--cell-bootstrap (cell_boot)")
    _refuse_unused(opt, target)
    if opt.method != "surface" and opt.surface != FitOptions.surface:  # (ignored in silence)
        raise FitError(
            f"--surface {opt.surface}: an option of --method surface, not of {opt.method}"
        )
    if not (isinstance(opt.band, numbers.Real) and 0 < opt.band < math.inf):
        raise FitError(f"--band must be a positive, finite loss fraction, got {opt.band!r}")


def _refuse_unused(opt: FitOptions, target: str | None) -> None:
    """FitError naming the options that the fit asked for does not use: each was taken and
    ignored in silence (``--huber --unweighted`` or ``--keep-edge`` with ``--target loss``,
    ``--loss-points all`` with an LR law, ``--huber`` with the band), while the surface refused
    its own (a fit audit). ``--predictors`` is checked in :func:`_fit_targets`, and
    ``--cell-bootstrap`` by the CLI: its default is passed by every caller, whatever the method."""
    given = {
        "--keep-edge": opt.keep_edge,
        "--huber": opt.huber,
        "--unweighted": not opt.weighted,
        "--band": opt.band != FitOptions.band,
    }
    if target == "loss":
        per_cell = {**given, "--min-runs": opt.min_runs is not None}
        if loss_unused := [k for k, on in per_cell.items() if on]:
            raise FitError(
                f"{_options(loss_unused)} of the lr and batch_tokens laws, not of --target loss"
            )
        return
    named = [k for k, on in given.items() if on]
    if opt.loss_points != FitOptions.loss_points:
        raise FitError(
            f"--loss-points {opt.loss_points}: an option of --target loss (the loss law), not of "
            "the lr and batch_tokens laws"
        )
    if opt.method == "surface" and named:
        raise FitError(f"{_options(named)} of --method parabola or band, not of surface")
    users = {"--huber": "parabola", "--unweighted": "parabola", "--band": "band"}
    if unused := [k for k, m in users.items() if given[k] and m != opt.method]:
        raise FitError(f"{_options(unused)} of --method {users[unused[0]]}, not of {opt.method}")


def _options(flags: Sequence[str]) -> str:
    """A refusal's head: "--a, --b: options", or "--a: an option" for one flag."""
    return f"{', '.join(flags)}: " + ("an option" if len(flags) == 1 else "options")


def min_resamples(level: float = INTERVAL_LEVEL) -> int:
    """The fewest resamples whose percentile interval at ``level`` rests on data: at least one
    resample in each tail, B·(1 − level)/2 ≥ 1 (40 at 95%). Fewer give bounds that are the
    extreme resamples (or interpolations between them), which can leave out the estimate."""
    return math.ceil(round(2.0 / (1.0 - level), 9))


def check_resamples(n: int, option: str, level: float = INTERVAL_LEVEL) -> None:
    """FitError unless ``n`` resamples can give intervals at ``level``: 0 (no resampling: the
    surface's Laplace intervals, none for the other fits) or at least :func:`min_resamples`. The
    one rule for every bootstrap option of the fits (``--bootstrap``/``n_boot``,
    ``--cell-bootstrap``/``cell_boot``)."""
    least = min_resamples(level)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):  # ("50" from Python)
        raise FitError(f"{option} must be a whole number, got {type(n).__name__} {n!r}")
    if n == 0 or n >= least:
        return
    raise FitError(
        f"{option} must be 0 (no resampling) or at least {least}, got {n}: "
        f"{level:.0%} percentile intervals need at least one resample in each "
        f"{(1 - level) / 2:.1%} tail"
    )


#: the seed of the per-cell estimate's intervals wherever a law is fitted (the cell name is
#: mixed in per cell): not the fit's seed, since they set the parabola law's weights and through
#: them its point estimate, which had moved with the seed (an audit's 3-cell ladder:
#: n_params^-0.269, -0.198, -0.244 at seeds 0-2, and a sweep diffed with itself came out
#: different); the fit's seed draws the law's own resamples
CELL_SEED: Final[int] = 0


def _optima(runs: pd.DataFrame, opt: FitOptions) -> list[CellOptimum]:
    """The per-cell estimate, its intervals seeded by :data:`CELL_SEED`."""
    return estimate_optima(
        runs,
        method=opt.method,
        band=opt.band,
        n_boot=opt.cell_boot if opt.method == "parabola" else 0,
        seed=CELL_SEED,
        min_runs=opt.cell_min_runs(),
        keep_edge=opt.keep_edge,
    )


def _blown_up_note(runs: pd.DataFrame) -> str:
    """The note of the runs the parabola took off its curves, more than
    :data:`~sweeper.fitting._surface_law.BLOWUP` above their cell's best loss (each cell's
    optimum names its own), in the surface fit's words; "" when none."""
    up, down = blown_up(loss_points(runs))
    return blow_up_note(int(up.sum()), int(down.sum())) if up.any() or down.any() else ""


def _fit_loss(runs: pd.DataFrame, conv: Conventions, source: str, opt: FitOptions) -> Law:
    return fit_loss_law(
        runs,
        n_boot=100 if opt.n_boot is None else opt.n_boot,
        seed=opt.seed,
        points=opt.loss_points,
        source=source,
        conventions=conv,
    )


def _fit_target(
    runs: pd.DataFrame,
    optima: list[CellOptimum],
    target: str,
    preds: tuple[str, ...],
    conv: Conventions,
    source: str,
    opt: FitOptions,
) -> Law:
    n_boot = 1000 if opt.n_boot is None else opt.n_boot
    if opt.method == "band":
        return fit_band_law(
            runs,
            target=target,
            predictors=preds,
            band=opt.band,
            n_boot=n_boot,
            seed=opt.seed,
            min_runs=opt.cell_min_runs(),
            keep_edge=opt.keep_edge,
            source=source,
            conventions=conv,
        )
    law = fit_power_law(
        optima,
        target=target,
        predictors=preds,
        weighted=opt.weighted,
        huber=opt.huber,
        n_boot=n_boot,
        seed=opt.seed,
        source=source,
        conventions=conv,
    )
    blown = _blown_up_note(runs)  # (first, as the surface's)
    return replace(law, notes=(blown, *law.notes)) if blown else law


def _predictors_for(
    target: str,
    predictors: Sequence[str] | Mapping[str, Sequence[str]] | None,
    optima: Sequence[CellOptimum],
) -> tuple[str, ...]:
    if isinstance(predictors, Mapping):
        chosen = predictors.get(target) or predictors.get("")
    else:
        chosen = predictors
    return tuple(chosen) if chosen else default_predictors(optima)


def _check_batch_known(runs: pd.DataFrame) -> None:
    """FitError where the batch size varies within a cell in sequences but not in tokens (no
    sequence length): every method would pool the batch sizes as if one, silently (an audit's
    LR exponent interval widened 2.5x, its D exponent took in 0). Rows whose sequence length is
    given are in tokens; a cell whose other rows still vary in sequences is refused too."""
    if "batch_size" not in runs:
        return
    unknown = runs[runs["batch_tokens"].isna()].dropna(subset=["batch_size"])
    if (unknown.groupby("cell")["batch_size"].nunique() > 1).any():
        raise FitError(
            "the batch size (in sequences) varies within cells but batch_tokens is unknown (no "
            "sequence length): the fit would pool the batch sizes as one; import the runs with "
            "--seq-len (or a seq_len column)"
        )


def batch_varies(runs: pd.DataFrame) -> bool:
    """Whether any cell has completed runs at two batch sizes more than 1% apart."""
    done = runs[(runs["state"] == "COMPLETE") & ~runs["diverged"] & runs["batch_tokens"].notna()]
    if done.empty:
        return False
    spread = done.groupby("cell")["batch_tokens"].agg(lambda s: np.log(s.max() / s.min()))
    return bool((spread > 0.01).any())


def default_predictors(optima: Sequence[CellOptimum]) -> tuple[str, ...]:
    """The scale variables among n_params, tokens that vary across the usable cells (n_params alone
    when tokens is a power of n_params there, e.g. a fixed tokens-per-parameter ladder)."""
    usable = [o for o in optima if o.usable]
    if not usable:
        if all(o.reason == "no lr values in this cell" for o in optima):
            raise FitError(NO_LR)
        why = "; ".join(f"{o.cell}: {o.reason}" for o in optima[:8])
        raise FitError(f"no usable cells: {why}")
    vary = []
    logs = {}
    for name in _SCALE_VARS:
        vals = np.array([getattr(o, name) or np.nan for o in usable], dtype=float)
        if np.all(np.isfinite(vals) & (vals > 0)) and np.ptp(np.log(vals)) > 1e-9:
            vary.append(name)
            logs[name] = np.log(vals)
    if not vary:
        left = [f"{o.cell}: {o.reason}" for o in optima if not o.usable]
        if len(usable) < 2:  # one usable cell: no predictor can vary; say why the rest are out
            # (the rule every fit enforces, min_cells: it had said "two scales at least", and
            # then refused two cells)
            raise FitError(
                f"only {len(usable)} usable cell ({usable[0].cell}): a law needs at least "
                f"{min_cells(1)} usable cells, at two scales or more"
                + (f"; left out: {'; '.join(left[:8])}" if left else " (the runs hold no other)")
            )
        raise FitError(
            "neither n_params nor tokens varies across the usable cells; "
            "pass --predictors (e.g. width or depth)"
        )
    return scale_predictors({v: logs[v] for v in vary})


def scale_predictors(logs: Mapping[str, np.ndarray]) -> tuple[str, ...]:
    """The default predictors among the varying scale variables ``logs`` (name → ln value per
    cell, NaN where unknown): n_params alone when both vary but tokens is a power of n_params
    over the cells where both are known (a fixed tokens-per-parameter ladder), else all of them.
    The one rule of every method's default (the surface had refused that ladder as collinear)."""
    if set(logs) == {"n_params", "tokens"}:
        both = np.column_stack([logs["n_params"], logs["tokens"]])
        both = both[np.all(np.isfinite(both), axis=1)]
        if len(both) < 3 or np.linalg.matrix_rank(both - both.mean(axis=0), tol=1e-6) < 2:
            return ("n_params",)
    return tuple(p for p in _SCALE_VARS if p in logs)

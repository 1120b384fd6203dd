"""Gather what a sweep's report shows: its runs and cell optima, its latest laws (of one fitting
method, if asked; one fitted for the report when none is stored), the recipe to mark, and the
stored transfer check."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.errors import FitError, SweeperError

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.fitting import CellOptimum
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import Law
    from sweeper.report.page import TransferShown
    from sweeper.study.handle import Sweep

__all__ = ["build_report"]

#: the recipe keys that give the target's resolved scale (a target given by shape or compute)
_SCALE_KEYS = ("n_params", "tokens", "flops", "width", "depth")


def build_report(
    sw: Sweep,
    out: Path,
    *,
    method: str | None = None,
    recipe: Mapping[str, Any] | None = None,
    bootstrap: int = 200,
    at: Mapping[str, float] | None = None,
) -> list[Path]:
    """Write the report of ``sw`` into ``out``; returns the files written. The laws shown: the
    latest stored per target, or with ``method`` the latest stored by that method (fitted for the
    report alone when none is). ``at``: a target's scale (predictor → value) to mark, when no
    ``recipe`` gives one. Notes about what the report had to make up go into the page."""
    from sweeper.fitting import estimate_optima
    from sweeper.fitting.fit_runs import check_method, check_resamples
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.recipe.recipe import recipe_from_dict
    from sweeper.report.page import ReportInputs, write_report

    if out.exists() and not out.is_dir():
        raise SweeperError(f"report: {out} exists and is not a folder")
    if recipe is not None and at:
        raise SweeperError(
            "report: give a recipe or a target's scale (at): a recipe names its target"
        )
    shown = recipe_from_dict(recipe) if recipe is not None else None  # (refused when malformed)
    check_resamples(bootstrap, "--bootstrap (bootstrap)")
    if method is not None:
        check_method(method)
    runs = sw.runs()
    # the per-cell estimate (the table, the loss-vs-LR panels; the law plots' points unless the
    # law is a surface law, whose own cell optima they draw: sweeper.report.page._law_points)
    optima = estimate_optima(
        runs, method="band" if method == "band" else "parabola", n_boot=bootstrap
    )
    laws, notes = _report_laws(sw, runs, optima, method)
    target_scale = _checked_scale(at) if at else None
    if target_scale is not None and recipe is None:
        notes += _target_doubts(laws, target_scale)
    if recipe is not None:
        target_scale = {
            k: float(recipe[k])
            for k in _SCALE_KEYS
            if isinstance(recipe.get(k), int | float) and recipe[k] > 0
        }
    inputs = ReportInputs(
        sweep=sw.name,
        runs=runs,
        optima=optima,
        laws=laws,
        recipe=shown,
        transfers=_transfers(sw),
        target_scale=target_scale,
        notes=tuple(notes),
        measured=measured_with(sweep_conventions(sw), imported=sw.spec is None),
        conventions=sweep_conventions(sw),
    )
    return write_report(inputs, out)


def _checked_scale(at: Mapping[str, float]) -> dict[str, float]:
    """``at`` as a target scale: known predictors, positive and finite; SweeperError else."""
    import math

    bad = [k for k in at if k not in _SCALE_KEYS]
    if bad:
        raise SweeperError(f"report: unknown target key(s) {bad}; known: {', '.join(_SCALE_KEYS)}")
    out = {k: float(v) for k, v in at.items()}
    if not all(math.isfinite(v) and v > 0 for v in out.values()):
        raise SweeperError(f"report: a target's values must be positive and finite, got {at}")
    return out


def _target_doubts(laws: list[Law], at: Mapping[str, float]) -> list[str]:
    """What ``recommend`` would doubt of the laws' values at a target given by scale alone (no
    recipe): its refusal and its warnings that question a value (interval, extrapolation, the
    regime the law held fixed), so that a marked target is not read as a supported one."""
    from sweeper.errors import TargetError
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.target import Target
    from sweeper.recipe.warning_kinds import FORCED, Doubt

    if not laws:
        return ["the target given is not marked: there is no law to evaluate at it"]
    by_target = {law.target: law for law in laws}
    if "lr" not in by_target:
        return []
    budget = _budget(by_target["lr"], at)
    try:
        target = Target(
            n_params=at.get("n_params"),
            width=int(at["width"]) if "width" in at else None,
            depth=int(at["depth"]) if "depth" in at else None,
            tokens=budget.get("tokens"),
            compute=budget.get("compute"),
        )
    except TargetError as e:
        return [f"the target given is not one recommend can read, so its doubts are not said: {e}"]
    notes = []
    try:
        recommend(by_target, target)
    except TargetError as e:
        notes.append(f"at the target, recommend refuses a recipe: {e}")
    try:
        doubts = recommend(by_target, target, force=True).warnings
    except TargetError:
        return notes
    notes += [f"at the target: {w}" for w in doubts if isinstance(w, Doubt) and FORCED not in w]
    return notes


def _budget(law: Law, at: Mapping[str, float]) -> dict[str, float]:
    """The target's D (or compute) for ``recommend``: as given, else the D the law's cells held
    (a law of N alone, marked at an N only: no D of the page's making to doubt)."""
    given = {k: at[v] for k, v in (("tokens", "tokens"), ("compute", "flops")) if v in at}
    if given:
        return given
    span = law.conventions.held.get("tokens") or law.domain.get("tokens")
    return {"tokens": (span[0] * span[1]) ** 0.5} if span else {}


def _transfers(sw: Sweep) -> list[TransferShown]:
    """Every transfer check stored for ``sw``, the one stored last first, with the LR law each
    fitted without its held-out cell."""
    from sweeper.fitting.laws import PowerLaw, law_from_dict
    from sweeper.report.page import TransferShown
    from sweeper.transfer.run import stored_transfers

    out = []
    for t in stored_transfers(sw.name, sw.url):
        law = law_from_dict(t["law"]) if t.get("law") else None
        result = {k: v for k, v in t.items() if k != "law"}
        out.append(TransferShown(result, law if isinstance(law, PowerLaw) else None))
    return out


def measured_with(conv: Conventions, *, imported: bool = False) -> str:
    """What the sweep trained, in one line for the page's head: the model, the loop, the
    optimizer and the LR's meaning (two sweeps of different techniques looked alike); for runs
    imported without their study, that none of it is recorded."""
    if imported:
        return (
            "imported runs: their model, loop and optimizer are not recorded; the LR is the "
            f"{conv.lr}"
        )
    model = f"model builder {conv.model_builder}" if conv.model_builder else "the built-in proxy"
    if conv.train_function and not conv.model_builder:  # (no model is passed: it builds its own)
        model = "the training function's own model (its N counted as 12·L·d² at each cell's shape)"
    loop = (
        f"training function {conv.train_function}" if conv.train_function else "the built-in loop"
    )
    opt = conv.optimizer or "its own optimizer (not recorded)"
    par = f" under {conv.parametrization}" if conv.parametrization else ""
    return f"measured with {model}{par}, {loop} and {opt}; the LR is the {conv.lr}"


def _report_laws(
    sw: Sweep, runs: pd.DataFrame, optima: list[CellOptimum], method: str | None
) -> tuple[list[Law], list[str]]:
    """The laws the report shows, and a note when they were fitted for it: the latest stored
    power law per target (by ``method`` when it is given); when none is stored, the LR law fitted
    here (by ``method``, or through the parabola optima drawn on the page)."""
    from sweeper.fitting import fit_power_law
    from sweeper.fitting.fit_runs import FitOptions, fit_runs
    from sweeper.fitting.laws import PowerLaw
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.fitting.store import latest_laws

    stored, _ = latest_laws(sw.name, sw.url, method=method)
    latest: list[Law] = [law for law in stored.values() if isinstance(law, PowerLaw)]
    if latest:
        return latest, []
    conv = sweep_conventions(sw)
    by = f" by {method}" if method else ""
    note = f"no stored law{by}: the LR law shown was fitted for this report only"
    if method is not None:
        try:
            outcome = fit_runs(
                runs, conventions=conv, source=sw.name, target="lr", options=FitOptions(method)
            )
        except FitError as e:
            return [], [f"no stored law{by}, and none could be fitted here: {e}"]
        laws: list[Law] = [law for law in outcome.laws if isinstance(law, PowerLaw)]
        return laws, [note, *outcome.warnings]  # (the laws' own notes: the laws section)
    usable = [o for o in optima if o.usable]
    if len(usable) < 3:  # (the page had said "run sweeper fit", which fails here too)
        why = (
            " (the cells table says why the others have none)" if len(usable) < len(optima) else ""
        )
        return [], [
            f"no law: {len(usable)} of {len(optima)} cells have an optimum of their own and a "
            f"law needs 3{why}"
        ]
    return [fit_power_law(usable, target="lr", source=sw.name, conventions=conv)], [note]

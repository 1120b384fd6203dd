"""Gather what a sweep's report shows: its runs and cell optima, its latest laws (or one fitted for
the report when none is stored), the recipe to mark, and the stored transfer check."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.errors import SweeperError
from sweeper.fitting.methods import DEFAULT_METHOD

if TYPE_CHECKING:
    from sweeper.fitting.laws import Law
    from sweeper.study.handle import Sweep

__all__ = ["build_report"]

#: the recipe keys that give the target's resolved scale (a target given by shape or compute)
_SCALE_KEYS = ("n_params", "tokens", "flops", "width", "depth")


def build_report(
    sw: Sweep,
    out: Path,
    *,
    method: str = DEFAULT_METHOD,
    recipe: Mapping[str, Any] | None = None,
    bootstrap: int = 200,
) -> list[Path]:
    """Write the report of ``sw`` into ``out``; returns the files written. Notes about what the
    report had to make up (an LR law fitted for the report alone) go into the page."""
    from sweeper.fitting import estimate_optima, fit_power_law
    from sweeper.fitting.laws import PowerLaw, law_from_dict
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.fitting.store import list_laws
    from sweeper.report.page import ReportInputs, write_report
    from sweeper.transfer.run import stored_transfer

    if out.exists() and not out.is_dir():
        raise SweeperError(f"report: {out} exists and is not a folder")
    runs = sw.runs()
    # the points drawn per cell: a surface law has no optimum-per-cell step, so parabola optima
    optima = estimate_optima(
        runs, method="band" if method == "band" else "parabola", n_boot=bootstrap
    )
    laws = _latest_power_laws(list_laws(sw.name, sw.url))
    notes: list[str] = []
    if not laws:
        usable = [o for o in optima if o.usable]
        if len(usable) >= 3:
            conv = sweep_conventions(sw)
            laws = [fit_power_law(usable, target="lr", source=sw.name, conventions=conv)]
            notes.append("no stored law: the LR law shown was fitted for this report only")
    target_scale = None
    if recipe is not None:
        target_scale = {
            k: float(recipe[k])
            for k in _SCALE_KEYS
            if isinstance(recipe.get(k), int | float) and recipe[k] > 0
        }
    transfer = stored_transfer(sw.name, sw.url)
    holdout = [transfer["holdout_cell"]] if transfer else []
    holdout_law = None
    if transfer and transfer.get("law"):
        law = law_from_dict(transfer["law"])
        holdout_law = law if isinstance(law, PowerLaw) else None
        transfer = {k: v for k, v in transfer.items() if k != "law"}
    inputs = ReportInputs(
        sweep=sw.name,
        runs=runs,
        optima=optima,
        laws=laws,
        recipe=dict(recipe) if recipe is not None else None,
        transfer=transfer,
        target_scale=target_scale,
        holdout_cells=holdout,
        holdout_law=holdout_law,
        notes=tuple(notes),
    )
    return write_report(inputs, out)


def _latest_power_laws(stored: list[Law]) -> list[Law]:
    """The latest stored power law per target (later fits replace earlier ones)."""
    from sweeper.fitting.laws import PowerLaw

    latest: dict[str, Law] = {}
    for law in stored:
        if isinstance(law, PowerLaw):
            latest[law.target] = law
    return list(latest.values())

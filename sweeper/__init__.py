"""Sweeper: measure the optimal learning rate and batch size on tiny proxies, fit scaling laws,
and extrapolate them, with intervals and warnings, to a run far too big to sweep.

The public API (every CLI verb is a thin layer over it; see :mod:`sweeper.api`)::

    import sweeper

    sweeper.launch("studies/smoke.toml", storage="sqlite:///sweeper.db")
    laws = sweeper.fit("smoke", storage="sqlite:///sweeper.db")
    # force: the smoke ladder's law does not determine the LR at 1B (recommend says so, refusing)
    recipe = sweeper.recommend(laws, at=sweeper.Target(width=2048, depth=20, tokens=2e10),
                               force=True)
    print(sweeper.export(recipe, "litgpt").text)

The package is laid out by stage: :mod:`sweeper.study` (a study and its runs), :mod:`sweeper.run`
(Ray Tune + Optuna), :mod:`sweeper.fitting` (laws), :mod:`sweeper.recipe` (a recipe for a target
and its exports), :mod:`sweeper.transfer` (the held-out transfer check), :mod:`sweeper.report`
(plots and the HTML page); :mod:`sweeper.cli` is the command line. Names are imported on first use, so ``import sweeper`` loads neither torch nor ray.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sweeper.api import (
        Comparison,
        Exported,
        LaunchShort,
        check,
        compare,
        coord_check,
        diff,
        estimate,
        export,
        fit,
        import_runs,
        launch,
        law,
        laws,
        load_study,
        published_laws,
        recommend,
        resolve_laws,
        runs,
        status,
        sweeps,
        validate_transfer,
        write_report,
    )
    from sweeper.errors import (
        FitError,
        ImportDataError,
        ScaleError,
        StorageError,
        StudyError,
        SweeperError,
        TargetError,
    )
    from sweeper.fitting._common import FitWarning
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import Law, LossLaw, PowerLaw
    from sweeper.recipe.check import CheckValues
    from sweeper.recipe.hardware import Hardware
    from sweeper.recipe.recipe import Recipe
    from sweeper.recipe.recommend import RecipeDefaults
    from sweeper.recipe.target import Target
    from sweeper.study.handle import Sweep
    from sweeper.study.spec import StudySpec

_WHERE: dict[str, str] = {
    **{
        name: "sweeper.api"
        for name in (
            "Comparison",
            "Exported",
            "LaunchShort",
            "check",
            "compare",
            "coord_check",
            "diff",
            "estimate",
            "export",
            "fit",
            "import_runs",
            "law",
            "laws",
            "launch",
            "load_study",
            "published_laws",
            "recommend",
            "resolve_laws",
            "runs",
            "status",
            "sweeps",
            "validate_transfer",
            "write_report",
        )
    },
    **{
        name: "sweeper.errors"
        for name in (
            "FitError",
            "ImportDataError",
            "ScaleError",
            "StorageError",
            "StudyError",
            "SweeperError",
            "TargetError",
        )
    },
    "FitWarning": "sweeper.fitting._common",
    "Conventions": "sweeper.fitting.conventions",
    "Law": "sweeper.fitting.laws",
    "LossLaw": "sweeper.fitting.laws",
    "PowerLaw": "sweeper.fitting.laws",
    "CheckValues": "sweeper.recipe.check",
    "Hardware": "sweeper.recipe.hardware",
    "Recipe": "sweeper.recipe.recipe",
    "RecipeDefaults": "sweeper.recipe.recommend",
    "Target": "sweeper.recipe.target",
    "Sweep": "sweeper.study.handle",
    "StudySpec": "sweeper.study.spec",
}

__all__ = [
    "CheckValues",
    "Comparison",
    "Conventions",
    "Exported",
    "FitError",
    "FitWarning",
    "Hardware",
    "ImportDataError",
    "LaunchShort",
    "Law",
    "LossLaw",
    "PowerLaw",
    "Recipe",
    "RecipeDefaults",
    "ScaleError",
    "StorageError",
    "StudyError",
    "StudySpec",
    "Sweep",
    "SweeperError",
    "Target",
    "TargetError",
    "__version__",
    "check",
    "compare",
    "coord_check",
    "diff",
    "estimate",
    "export",
    "fit",
    "import_runs",
    "launch",
    "law",
    "laws",
    "load_study",
    "published_laws",
    "recommend",
    "resolve_laws",
    "runs",
    "status",
    "sweeps",
    "validate_transfer",
    "write_report",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sweeper' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))

"""Sweeper from Python: every CLI verb as a function (the CLI is a thin layer over these).

A notebook does the whole path in a few lines::

    import sweeper

    study = sweeper.load_study("studies/smoke.toml")
    sweeper.launch(study, storage="sqlite:///sweeper.db")          # train the ladder (Ray Tune)
    df = sweeper.runs("smoke", storage="sqlite:///sweeper.db")     # one row per training run
    laws = sweeper.fit("smoke", storage="sqlite:///sweeper.db")    # the lr (and batch) laws, stored
    # force: the smoke ladder's law does not determine the LR at 1B (recommend says so, refusing)
    recipe = sweeper.recommend(laws, at=sweeper.Target(width=2048, depth=20, tokens=2e10),
                               force=True)
    print(sweeper.export(recipe, "litgpt").text)

Storage: every function that reads or writes the storage takes ``storage=`` (a SQLAlchemy URL;
default ``$SWEEPER_STORAGE``, else ``sqlite:///sweeper.db``; :func:`launch` reads the study's
``[sweep] storage`` after ``$SWEEPER_STORAGE`` and before ``sqlite:///sweeper.db``, so pass the
readers after it the same ``storage=``). A sweep may be given by name or as a
:class:`~sweeper.study.handle.Sweep` (loaded once with :meth:`Sweep.load
<sweeper.study.handle.Sweep.load>`). Bad input raises :class:`~sweeper.errors.SweeperError`;
doubtful fits warn :class:`~sweeper.fitting.FitWarning`. Heavy modules (ray, torch, optuna,
matplotlib) are imported only by the functions that need them.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeGuard, cast

from sweeper.errors import FitError, StorageError, StudyError, SweeperError, TargetError
from sweeper.fitting.methods import DEFAULT_METHOD

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.fitting.diff import DiffResult
    from sweeper.fitting.laws import Law, LossLaw, PowerLaw
    from sweeper.recipe.check import CheckResult, CheckValues
    from sweeper.recipe.hardware import Hardware
    from sweeper.recipe.published_recipes import PublishedRecipe
    from sweeper.recipe.recipe import Recipe
    from sweeper.recipe.recommend import RecipeDefaults
    from sweeper.recipe.target import Target
    from sweeper.run.estimate import Estimate
    from sweeper.run.launch import LaunchSummary
    from sweeper.study.handle import Sweep
    from sweeper.study.spec import StudySpec
    from sweeper.transfer.plan import TransferResult

__all__ = [
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


# ---- the arguments: checked here, before any of them is used -------------------------------------
def _integer(v: object) -> TypeGuard[int]:
    """Whether ``v`` is a whole number (numpy's too), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _collection_of(v: object, test: Callable[[object], bool]) -> bool:
    """Whether ``v`` is a list, tuple, set... (not a string or a mapping) whose every item passes
    ``test``."""
    if not isinstance(v, Collection) or isinstance(v, str | bytes | Mapping):
        return False
    return all(test(x) for x in v)


def _is_sweep(v: object) -> bool:
    from sweeper.study.handle import Sweep

    return isinstance(v, Sweep)


def _is_spec(v: object) -> bool:
    from sweeper.study.spec import StudySpec

    return isinstance(v, StudySpec)


def _is_frame(v: object) -> bool:
    import pandas as pd

    return isinstance(v, pd.DataFrame)


#: the kinds of argument :func:`_check` knows: a test and what the message calls it
_KINDS: Final[dict[str, tuple[Callable[[object], bool], str]]] = {
    "None": (lambda v: v is None, "None"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "url": (lambda v: isinstance(v, str), "a SQLAlchemy URL (a string)"),
    "path": (lambda v: isinstance(v, str | os.PathLike), "a path (a str or Path)"),
    "bool": (lambda v: isinstance(v, bool), "a bool (True or False)"),
    "int>=0": (lambda v: _integer(v) and v >= 0, "an integer >= 0"),
    "int>=1": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "ints>=1": (lambda v: _collection_of(v, _KINDS["int>=1"][0]), "a list of integers >= 1"),
    "strs": (lambda v: _collection_of(v, _KINDS["str"][0]), "a list of strings"),
    "mapping": (lambda v: isinstance(v, Mapping), "a mapping"),
    "name": (lambda v: isinstance(v, str), "a sweep's name"),
    "Sweep": (_is_sweep, "a Sweep"),
    "spec": (_is_spec, "a StudySpec"),
    "frame": (_is_frame, "a runs DataFrame"),
}


def _shown(value: object) -> str:
    """``value`` for a message: its repr when short, else its type's name."""
    text = repr(value)
    return text if len(text) <= 60 and "\n" not in text else f"a {type(value).__name__}"


def _check(name: str, value: object, *kinds: str, error: type[SweeperError] = SweeperError) -> None:
    """``error`` saying "NAME must be KIND or KIND, got VALUE" unless ``value`` is one of the
    ``kinds`` of :data:`_KINDS`: a caller's argument of the wrong type or range is refused here,
    named as the caller wrote it (``name``; with the CLI flag in parentheses where the command
    passes the value unchecked), not met as a bare TypeError deep inside."""
    if any(_KINDS[k][0](value) for k in kinds):
        return
    said = [_KINDS[k][1] for k in kinds]
    either = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"
    raise error(f"{name} must be {either}, got {_shown(value)}")


def _storage(storage: object) -> None:
    _check("storage", storage, "url", "None", error=StorageError)


def _spec(study: object) -> StudySpec:
    """``study``: a StudySpec as it is, a study file's path loaded and checked."""
    _check("study", study, "spec", "path", error=StudyError)
    if isinstance(study, str | os.PathLike):
        return load_study(study if isinstance(study, str) else Path(study))
    return cast("StudySpec", study)


def _sweep(sweep: str | Sweep, storage: str | None) -> Sweep:
    from sweeper.study.handle import Sweep

    return sweep if isinstance(sweep, Sweep) else Sweep.load(sweep, storage)


def _sweep_or_joined(sweep: str | Sweep, storage: str | None) -> Sweep:
    """The sweep, or the sweeps of ``"a+b"`` (one study on other LRs, see :func:`diff`) as one
    handle: their runs together, the first one's study and storage, the laws ``fit a+b``
    stored under the joined name (fit, recommend and diff took such names; report and runs
    said there was no such sweep)."""
    import pandas as pd

    if not (isinstance(sweep, str) and "+" in sweep):
        return _sweep(sweep, storage)
    handles, _ = _joined_handles(sweep, storage)
    runs = pd.concat([h.runs() for h in handles], ignore_index=True)
    return replace(handles[0], name="+".join(h.name for h in handles), _runs=runs)


def _surface_settings(sw: Sweep | None, given: str | None, method: str) -> str:
    """The surface method's settings for ``sw``: ``given`` (refused with another ``method``, by
    FitOptions' check), else the law sampler's own fit for a study that it planned (its runs sit
    near each optimum) under the surface method, else the standard one."""
    from sweeper.fitting.fit_runs import check_surface

    if given is not None:
        check_surface(given)  # (validate_transfer had raised a bare KeyError)
        return given
    spec = sw.spec if sw is not None else None
    law = method == "surface" and spec is not None and spec.sampler.kind == "law"
    return "planner" if law else "standard"


# ---- stage 1: a study and its runs ---------------------------------------------------------------
def load_study(path: str | Path) -> StudySpec:
    """The study file at ``path``, checked (StudyError lists every problem at once)."""
    from sweeper.study.spec import load_study as _load

    _check("path", path, "path", error=StudyError)
    return _load(path)


def estimate(
    study: StudySpec | str | Path, *, steps: int | None = None, cores: int | None = None
) -> Estimate:
    """What the study will cost (core-seconds, runs, wall time on ``cores``, default this
    machine's), from a short throughput probe of its cheapest and dearest cells: see
    :mod:`sweeper.run.estimate`. Trains ``steps`` steps of each (default
    :data:`~sweeper.run.estimate.PROBE_STEPS`; torch, no Ray)."""
    from sweeper.run.estimate import PROBE_STEPS, estimate_study

    _check("steps (--probe-steps)", steps, "int>=1", "None", error=StudyError)
    _check("cores", cores, "int>=1", "None", error=StudyError)  # (0 had meant this machine's)
    spec = _spec(study)
    return estimate_study(spec, steps=PROBE_STEPS if steps is None else steps, cores=cores)


def launch(
    study: StudySpec | str | Path,
    *,
    storage: str | None = None,
    address: str | None = None,
    max_concurrent: int | None = None,
    force_new: bool = False,
    takeover: bool = False,
    progress: bool = True,
    verbose: int = 0,
    code_changed: bool = False,
) -> LaunchSummary:
    """Run (or resume) the sweep of ``study`` on local Ray (or the cluster at ``address``) until
    every cell has its trials. Relaunching resumes; see :func:`sweeper.run.launch.launch_study`
    (``code_changed``: continue it after its model builder or training function changed).
    A launch that ends with cells short of their target (law sampler: its plan not ended) after
    failed runs says so with a :class:`LaunchShort` warning (each failed trial keeps its error as
    ``last_error``)."""
    _storage(storage)
    _check("address (--address)", address, "str", "None", error=StudyError)
    # (force_new="no" had counted as True, and deleted the sweep's trials)
    for flag, value in (
        ("force_new (--force-new)", force_new),
        ("takeover (--takeover)", takeover),
        ("code_changed (--code-changed)", code_changed),
        ("progress", progress),
    ):
        _check(flag, value, "bool", error=StudyError)
    _check("verbose (-v)", verbose, "int>=0", error=StudyError)
    spec = _spec(study)
    from sweeper.run.launch import launch_study  # ray: only once the study is known to be good

    summary = launch_study(
        spec,
        url=storage,
        address=address,
        max_concurrent=max_concurrent,
        force_new=force_new,
        verbose=verbose,
        progress=progress,
        takeover=takeover,
        code_changed=code_changed,
    )
    if not summary.done and not summary.interrupted:
        failed = sum(c.failed for c in summary.cells)
        warnings.warn(
            f"sweep {summary.sweep}: {summary.short(f' after {failed} failed trial(s)')}; each "
            "failed trial keeps its error (the last_error column of runs(...), rows with state "
            f"FAIL); {summary.fix_hint('code_changed=True')}",
            LaunchShort,
            stacklevel=2,
        )
    return summary


class LaunchShort(UserWarning):
    """A launch ended with cells short of their target (law sampler: its plan not ended) after
    failed runs."""


def sweeps(*, storage: str | None = None) -> list[dict[str, Any]]:
    """The sweeps the storage holds, oldest first: ``name``, ``kind`` ("launched" or
    "imported") and ``created_at`` (what ``sweeper status`` lists without a name)."""
    from sweeper.study.storage import list_sweeps

    _storage(storage)
    return [
        {"name": r["name"], "kind": r["kind"], "created_at": r["created_at"]}
        for r in list_sweeps(storage)
    ]


def status(sweep: str | Sweep | None = None, *, storage: str | None = None) -> dict[str, Any]:
    """Trials per cell by state, the best loss and its LR/batch, and the driver that holds the
    sweep (``driver``: host, pid, whether that process is alive on this host); for the law
    sampler, ``law``: its runs used of ``budget_runs`` and why its plan stopped (see
    :func:`sweeper.study.sweep.sweep_status`). Without ``sweep``: the only launched sweep in the
    storage."""
    from sweeper.study.handle import Sweep
    from sweeper.study.lease import driver_status
    from sweeper.study.sweep import resolve_sweep_name, sweep_status

    _check("sweep", sweep, "name", "Sweep", "None", error=StorageError)
    _storage(storage)
    if isinstance(sweep, Sweep):  # (a sweep may be given as a Sweep, as to every verb)
        storage = storage or sweep.url
        sweep = sweep.name
    name = resolve_sweep_name(sweep, storage)
    out = sweep_status(name, storage)
    out["driver"] = driver_status(name, storage)
    return out


#: the ``DataFrame.attrs`` key under which :func:`runs` records the sweep's conventions
CONVENTIONS_ATTR = "sweeper_conventions"


def runs(sweep: str | Sweep, *, storage: str | None = None) -> pd.DataFrame:
    """Every training run of a launched or imported sweep, one row per run (per seed), with the
    canonical columns of :mod:`sweeper.study.runs` first; ``"a+b"``: the runs of both. The frame
    carries the sweep's conventions (what N and D count, the optimizer, the schedule...) in
    ``attrs``, so that :func:`fit` of it, or of a selection of its rows, records them as a fit of
    the sweep would."""
    from sweeper.fitting.provenance import sweep_conventions

    _check("sweep", sweep, "name", "Sweep", error=StorageError)
    _storage(storage)
    sw = _sweep_or_joined(sweep, storage)
    df = sw.runs()
    df.attrs[CONVENTIONS_ATTR] = sweep_conventions(sw).to_json()  # (JSON: to_parquet writes it)
    return df


def _frame_conventions(df: pd.DataFrame) -> Any:
    """The conventions :func:`runs` recorded in ``df.attrs`` (None when it did not); FitError
    when that key holds anything but the mapping :func:`runs` writes (a string had raised a
    bare ValueError)."""
    from sweeper.fitting.conventions import SCHEMA_VERSION, Conventions

    d = df.attrs.get(CONVENTIONS_ATTR)
    if not d:
        return None
    if not isinstance(d, Mapping):
        raise FitError(
            f"data.attrs[{CONVENTIONS_ATTR!r}] must be the conventions sweeper.runs() records "
            f"(a mapping), got {_shown(d)}; delete the key to fit the frame without them"
        )
    return Conventions.from_json(d, law={"schema_version": SCHEMA_VERSION})


def import_runs(
    path: str | Path,
    *,
    sweep: str,
    renames: Mapping[str, str] | str | Sequence[str] | None = None,
    seq_len: int | None = None,
    storage: str | None = None,
    study: str | Path | None = None,
    conventions: Mapping[str, Any] | Sequence[str] | None = None,
    replace: bool = False,
) -> Sweep:
    """Store the runs of a CSV/TSV/parquet/JSON file as the imported sweep ``sweep`` and return it.

    ``study``: the study TOML the runs came from (its ladder must hold every cell of the runs);
    with it the sweep's cells can be trained again, e.g. by :func:`validate_transfer`.
    ``conventions``: what the file's numbers mean, which its laws then record, e.g.
    ``{"parametrization": "mup", "base_width": 256, "tokens": "tokenizer:llama3",
    "n_params": "total"}`` (keys: :data:`sweeper.study.declared.KEYS`), or ``"KEY=VALUE"``
    texts as ``--convention`` takes them; not with ``study``. ``renames``: old column name →
    new (``{"val_loss": "loss"}``), or ``"OLD=NEW"`` texts as ``--rename`` takes them.
    ``replace``: an imported sweep of that name is replaced, its runs and the laws fitted to them
    deleted once the file has been read and checked (its transfer checks are kept); a launched
    sweep is refused (ImportDataError), as is any existing sweep without it."""
    from sweeper.study.importer import import_runs as _import

    _storage(storage)
    _import(
        path,
        sweep=sweep,
        renames=renames,
        seq_len=seq_len,
        url=storage,
        study=study,
        conventions=conventions,
        replace=replace,
    )
    return _sweep(sweep, storage)


# ---- stage 2: laws -------------------------------------------------------------------------------
def fit(
    data: str | Sweep | pd.DataFrame,
    *,
    target: str | None = None,
    predictors: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    method: str = DEFAULT_METHOD,
    storage: str | None = None,
    store: bool = True,
    **options: Any,
) -> list[PowerLaw | LossLaw]:
    """Fit the laws of a sweep (or of a runs DataFrame) and, for a stored sweep, store them: power
    laws of the optimal LR and batch (a surface fit's is a PowerLaw too), a loss law for "loss".

    Fits ``lr`` and, when the batch size varies within cells, ``batch_tokens`` (or only
    ``target``: "lr", "batch_tokens", "loss"); see :mod:`sweeper.fitting.fit_runs` for the rules
    and ``options`` (band, n_boot, cell_boot, min_runs, keep_edge, huber, weighted, loss_points,
    seed, surface: the surface method's settings, "standard", "all-runs" or "planner", by default
    "planner" for a study planned by the law sampler: :data:`sweeper.fitting.surface.SETTINGS`). The laws record the sweep's conventions
    (:mod:`sweeper.fitting.provenance`); a target skipped and the fits' doubts are issued as
    :class:`~sweeper.fitting.FitWarning`. ``data``: a sweep's name, a
    :class:`~sweeper.study.handle.Sweep` or a runs DataFrame (FitError for anything else).
    """
    from sweeper.fitting._common import FitSkipped, FitWarning
    from sweeper.fitting.fit_runs import FitOptions, fit_runs
    from sweeper.fitting.store import put_law

    _check_fit_options(options)
    _check("data", data, "name", "Sweep", "frame", error=FitError)  # (a dict: "no database")
    _check("store", store, "bool", error=FitError)
    _storage(storage)
    predictors = _predictors(predictors)
    runs, conv, source, sw = _fit_inputs(data, storage)
    surface = _surface_settings(sw, options.pop("surface", None), method)
    opts = FitOptions(method=method, surface=surface, **options)
    outcome = fit_runs(runs, conventions=conv, source=source, target=target,
                       predictors=predictors, options=opts)  # fmt: skip
    for msg in outcome.skipped:
        warnings.warn(msg, FitSkipped, stacklevel=2)
    for msg in outcome.warnings:
        warnings.warn(msg, FitWarning, stacklevel=2)
    from sweeper.fitting.laws import LossLaw, PowerLaw

    fitted = list(outcome.laws)
    if store and sw is not None:
        fitted = [put_law(law, sw.url) for law in fitted]
    return [law for law in fitted if isinstance(law, PowerLaw | LossLaw)]  # (what fits make)


def _fit_inputs(
    data: str | Sweep | pd.DataFrame, storage: str | None
) -> tuple[pd.DataFrame, Any, str, Sweep | None]:
    """What :func:`fit` fits: the runs, their conventions, the laws' source, and the sweep whose
    storage keeps the laws (None for a user's own frame, which is not stored). ``"a+b"``: the
    sweeps of one study on other LRs, joined as :func:`diff` joins them; the laws' source is the
    joined name (``sweeper recommend a+b`` reads them), kept in the first sweep's storage."""
    import pandas as pd

    from sweeper.fitting.provenance import runs_conventions, sweep_conventions

    if isinstance(data, pd.DataFrame):
        from sweeper.study.importer import REQUIRED_COLUMNS, validated_runs

        missing = [c for c in REQUIRED_COLUMNS if c not in data.columns]
        if missing:  # (a missing loss read as "every run diverged", a missing N as NaN cells)
            raise FitError(
                f"the runs frame has no {', '.join(missing)} column(s) (it has: "
                f"{', '.join(map(str, data.columns))}); rename yours to these (e.g. "
                "df.rename(columns={'val_loss': 'loss'})), or import the file with renames"
            )
        # a user's own frame, checked and normalized as an imported file is (rows with an empty
        # loss and no diverged or state column to excuse them had been fitted in silence)
        runs = validated_runs(data, "the runs frame", drop_repeats=True)
        _warn_repeats(runs)
        return runs, _frame_conventions(data) or runs_conventions(runs), "", None
    if isinstance(data, str) and "+" in data:
        runs, conv, name = _joined_runs(data, storage)
        return runs, conv, name, _sweep(name.split("+")[0], storage)
    sw = _sweep(data, storage)
    return sw.runs(), sweep_conventions(sw), sw.name, sw


def _warn_repeats(runs: Any) -> None:
    """FitWarnings for rows of a user's frame that repeat a run, as an import notes them: exact
    repeats are fitted once (a frame concatenated with itself had failed the surface fit: "ran
    off to no law"), and rows of one cell, LR, batch, seed and loss are said."""
    from sweeper.fitting._common import FitWarning
    from sweeper.study.importer import same_run_notes

    repeated = int(runs.attrs.get("repeated_rows", 0))
    said = [f"{repeated} rows of the runs frame repeat another row exactly: fitted once each"]
    for msg in (said if repeated else []) + same_run_notes(runs, "drop them from the frame"):
        warnings.warn(msg, FitWarning, stacklevel=4)


def _check_fit_options(options: Mapping[str, Any]) -> None:
    """SweeperError naming the valid fit options when ``options`` holds another key (``method``
    is :func:`fit`'s own argument); FitError for a seed, ``min_runs`` or switch of another type
    (numpy's or a comparison's bare errors had said it; the bootstrap counts, the band and the
    surface settings are checked by :func:`~sweeper.fitting.fit_runs.fit_runs`)."""
    from dataclasses import fields

    from sweeper.fitting.fit_runs import FitOptions

    _check_options("fit", options, [f.name for f in fields(FitOptions) if f.name != "method"])
    kinds = {"seed": "int>=0", "min_runs": "int>=1", "keep_edge": "bool", "huber": "bool",
             "weighted": "bool", "loss_points": "str"}  # fmt: skip
    for key, kind in kinds.items():
        if key in options and not (key == "min_runs" and options[key] is None):
            _check(key, options[key], kind, error=FitError)  # (min_runs None: the default)


def _predictors(
    predictors: object,
) -> Sequence[str] | Mapping[str, Sequence[str]] | None:
    """``predictors`` as :func:`fit` and :func:`diff` pass them on: None, a list of names, one
    name as a list of it, or a mapping target → names (one name likewise); FitError for anything
    else (3 had raised a bare TypeError, a mapping's one name had been split into letters)."""
    _check("predictors", predictors, "str", "strs", "mapping", "None", error=FitError)
    if isinstance(predictors, Mapping):
        for target, names in predictors.items():
            _check(f"predictors[{target!r}]", names, "str", "strs", error=FitError)
        return {t: (n,) if isinstance(n, str) else n for t, n in predictors.items()}
    chosen = cast("Sequence[str] | None", predictors)
    return (predictors,) if isinstance(predictors, str) else chosen


def _check_options(what: str, options: Mapping[str, Any], valid: Sequence[str]) -> None:
    """SweeperError naming the ``valid`` options of ``what`` (and the nearest one) when
    ``options`` holds another key: a misspelt option is bad input, not a TypeError."""
    from sweeper.recipe.names import refuse_unknown

    refuse_unknown(options, valid, what=f"{what} option", listing="the options are")


def laws(sweep: str | Sweep | None = None, *, storage: str | None = None) -> list[Law]:
    """The stored laws (of ``sweep`` when given), oldest first. StorageError for an unknown
    sweep."""
    from sweeper.fitting.store import list_laws

    _check("sweep", sweep, "name", "Sweep", "None", error=StorageError)
    _storage(storage)
    if sweep is None:
        return list_laws(None, storage)
    if isinstance(sweep, str) and "+" in sweep:  # laws fitted on joined sweeps (fit a+b)
        names = _joined_names(sweep)
        return list_laws("+".join(names), _sweep(names[0], storage).url)
    sw = _sweep(sweep, storage)
    return list_laws(sw.name, sw.url)


#: the largest law id: SQLite's largest INTEGER (a larger one had raised a bare OverflowError)
_MAX_LAW_ID: Final[int] = 2**63 - 1


def law(law_id: int, *, storage: str | None = None) -> Law:
    """The stored law ``law_id``. A published law set is :func:`published_laws`."""
    from sweeper.fitting.store import get_law
    from sweeper.recipe.published import PUBLISHED_NAMES

    _storage(storage)
    if isinstance(law_id, bool) or not isinstance(law_id, numbers.Integral | str) or (
        isinstance(law_id, str) and not law_id.strip().isdigit()
    ):  # (numpy's integers are ids too: a review)
        named = isinstance(law_id, str) and law_id.lower() in PUBLISHED_NAMES
        hint = f"; a published law set is sweeper.published_laws({law_id!r})" if named else ""
        raise StorageError(f"a law id is a whole number, got {_shown(law_id)}{hint}")
    if not 1 <= int(law_id) <= _MAX_LAW_ID:
        raise StorageError(
            f"a law id is a whole number from 1 to {_MAX_LAW_ID}, got {_shown(law_id)}"
        )
    return get_law(int(law_id), storage)


def published_laws(name: str) -> dict[str, Law]:
    """The laws published under ``name`` (deepseek, steplaw, kaplan, porian), keyed by target;
    what ``sweeper laws show NAME`` prints."""
    from sweeper.recipe.published import published_laws as _published

    return _published(name)


def resolve_laws(
    given: str | int | Sweep | Law | Sequence[Law] | Mapping[str, Law],
    *,
    storage: str | None = None,
) -> tuple[dict[str, Law], LossLaw | None]:
    """Laws keyed by target ("lr", "batch_tokens") and the loss law, from: a stored law's id, a
    sweep (its latest
    stored laws), a published name (``deepseek``, ``steplaw``, ``kaplan``, ``porian``) that is no
    sweep in the storage (a sweep of that name wins, with a warning: the published laws are
    :func:`~sweeper.recipe.published.published_laws`, ``--law NAME`` on the command line), one
    law, a list of laws (one per target), or a mapping target → law. StorageError for a name that
    is no sweep (naming the known ones, as every verb does) and for a sweep without stored laws."""
    from sweeper.fitting.laws import Law
    from sweeper.fitting.store import latest_laws
    from sweeper.recipe.published import PUBLISHED_NAMES, published_key, published_laws
    from sweeper.study.handle import Sweep

    _storage(storage)
    url: str | None
    if isinstance(given, Sweep):
        name, url = given.name, given.url
    elif isinstance(given, str):
        if published_key(given) in PUBLISHED_NAMES:
            if not _holds_sweep(given, storage):
                return _keyed(list(published_laws(given).values()))
            logging.getLogger(__name__).warning(
                "%r is a sweep in this storage and the name of a published law set: its own laws "
                "are used (the published ones: --law %s, or published_laws(%r) in Python)",
                given,
                published_key(given),
                published_key(given),
            )
        name, url = given, storage
    elif isinstance(given, Law):
        return _keyed([given])
    elif isinstance(given, numbers.Integral) and not isinstance(given, bool):  # (an id, as --law)
        return _keyed([law(int(given), storage=storage)])
    elif isinstance(given, Mapping):
        return _keyed(_laws_only(list(given.values())))
    else:
        return _keyed(_laws_only(list(given) if isinstance(given, Sequence) else [given]))
    found, loss = latest_laws(name, url)
    if not found and loss is None:
        from sweeper.study.storage import get_sweep, no_sweep, resolve_url, safe_url

        if get_sweep(name, url) is None:
            raise no_sweep(name, url)
        raise StorageError(
            f"no laws stored for sweep {name!r} in {safe_url(resolve_url(url))} (run `sweeper "
            f"fit {name}`, or use a published law: {'|'.join(PUBLISHED_NAMES)})"
        )
    return found, loss


def _laws_only(items: list[Any]) -> list[Law]:
    """``items`` when every one is a :class:`Law`; else TargetError naming the first that is not
    (a published name in a list had raised a bare AttributeError)."""
    from sweeper.fitting.laws import Law

    for item in items:
        if not isinstance(item, Law):
            raise TargetError(
                f"laws: {item!r} ({type(item).__name__}) is not a Law; give a sweep or published "
                "name, a law id, one Law, or a list or mapping of Laws"
            )
    return items


def _holds_sweep(name: str, url: str | None) -> bool:
    """Whether the storage holds a sweep ``name``, or laws stored under it (False where it cannot
    be read: no database)."""
    from sweeper.fitting.store import latest_laws
    from sweeper.study.storage import get_sweep

    try:
        return get_sweep(name, url) is not None or any(latest_laws(name, url))
    except StorageError:
        return False


def _keyed(given: Sequence[Law]) -> tuple[dict[str, Law], LossLaw | None]:
    from sweeper.fitting.laws import LossLaw

    out: dict[str, Law] = {}
    loss: LossLaw | None = None
    for item in given:
        if isinstance(item, LossLaw):
            if loss is not None:
                raise TargetError(f"two loss laws given ({_name(loss)} and {_name(item)})")
            loss = item
            continue
        if item.target in out:
            raise TargetError(
                f"two {item.target} laws given ({_name(out[item.target])} and {_name(item)}); "
                "one of a published set's laws is NAME:lr or NAME:batch on the command line "
                "(--law deepseek:batch), published_laws(NAME)['batch_tokens'] in Python"
            )
        out[item.target] = item
    return out, loss


def _name(law: Law) -> str:
    return f"law {law.id}" if law.id is not None else f"{law.source}:{law.target}"


# ---- stage 3: a recipe for a target --------------------------------------------------------------
def recommend(
    laws: str | int | Sweep | Law | Sequence[Law] | Mapping[str, Law],
    at: Target | Mapping[str, Any],
    hardware: Hardware | Mapping[str, Any] | None = None,
    *,
    storage: str | None = None,
    **options: Any,
) -> Recipe:
    """The recipe for the target model ``at`` (a :class:`~sweeper.recipe.target.Target`, or a
    mapping of its fields: ``{"n_params": 1e9, "tokens": 2e10}``) from ``laws`` (see
    :func:`resolve_laws`), on ``hardware``. ``options``: global_batch, rampup, force, level,
    bytes_per_token, defaults, schedule, min_lr_ratio, decay_fraction (the schedule is the LR
    law's measured one unless given: :mod:`sweeper.recipe.schedule`), warmup_steps, z_loss,
    init_std (the defaults' unless given; a warning names the values the LR was measured at);
    see :func:`sweeper.recipe.recommend.recommend`."""
    import inspect

    from sweeper.recipe.recommend import recommend as _recommend
    from sweeper.recipe.target import as_target

    params = inspect.signature(_recommend).parameters.values()
    _check_options(
        "recommend",
        options,
        [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "loss_law"],
    )
    # (rampup="x" had turned the ramp-up on, force="no" counted as True)
    _check("rampup", options.get("rampup"), "bool", "None", error=TargetError)
    _check("force", options.get("force", False), "bool", error=TargetError)
    from sweeper.recipe.hardware import plain_number

    # (global_batch=np.int64(256) had been kept, and no JSON or YAML export wrote the recipe)
    options = {k: plain_number(v) for k, v in options.items()}
    if "defaults" in options:
        options["defaults"] = _as_defaults(options["defaults"])
    target = as_target(at)
    found, loss = resolve_laws(laws, storage=storage)
    return _recommend(found, target, _as_hardware(hardware), loss_law=loss, **options)


def _as_hardware(hardware: Hardware | Mapping[str, Any] | None) -> Hardware | None:
    """``hardware`` as a :class:`Hardware`: as it is, or built from a mapping of its fields (as
    ``at=`` takes a mapping); TargetError naming the fields for an unknown key or another type."""
    from sweeper.recipe.hardware import Hardware
    from sweeper.recipe.names import fields_of

    if hardware is None or isinstance(hardware, Hardware):
        return hardware
    return Hardware(**fields_of(hardware, Hardware, what="hardware", error=TargetError))


def _as_defaults(defaults: object) -> RecipeDefaults | None:
    """``defaults`` as a :class:`~sweeper.recipe.recommend.RecipeDefaults`: as it is, or built
    from a mapping of its fields (as ``hardware=``); TargetError naming the fields for an
    unknown key or another type, and for a field that is not a finite number >= 0 (for the
    counts, a whole number >= 1). A string had raised a bare AttributeError."""
    from dataclasses import fields

    from sweeper.recipe.names import fields_of
    from sweeper.recipe.recommend import RecipeDefaults

    if defaults is None:
        return None
    if not isinstance(defaults, RecipeDefaults):
        given = fields_of(defaults, RecipeDefaults, what="defaults", error=TargetError)
        defaults = RecipeDefaults(**given)
    for f in fields(RecipeDefaults):
        v = getattr(defaults, f.name)
        whole = f.type in (int, "int")  # (the counts: steps, sequences, increments)
        ok = _integer(v) if whole else isinstance(v, numbers.Real) and not isinstance(v, bool)
        if not ok or not (1 if whole else 0) <= v < math.inf:
            kind = "a whole number >= 1" if whole else "a finite number >= 0"
            raise TargetError(f"defaults.{f.name} must be {kind}, got {_shown(v)}")
    return defaults


@dataclass(frozen=True)
class Exported:
    """A recipe in one format: the ``text`` to write, one line per setting the format cannot
    carry (``cannot_carry``), the recipe's own ``warnings``, the framework version it targets
    (``framework_version``, what ``--framework-version`` takes, and ``framework``, the release or
    commit; None for json), the assumptions to check (``cautions``) and, for the formats without
    comments (hf, deepspeed), what a header would say (``notes``: version, load, which LR)."""

    format: str
    text: str
    cannot_carry: tuple[str, ...]
    warnings: tuple[str, ...]
    framework_version: str | None = None
    framework: str | None = None
    cautions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:  # (print(exported) prints the file, as it will be written)
        return self.text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # a notebook's display: the file,
        p.text(self.text.rstrip("\n"))  # then what the format cannot carry
        for line in self.cannot_carry:
            p.text(f"\n# cannot carry: {line}")

    def __repr__(self) -> str:
        """One line (a plain REPL's repr had dumped the whole file): the format and the version
        it targets, its size, what it cannot carry and the warnings; ``str`` is the file."""
        version = f" {self.framework_version}" if self.framework_version else ""
        lines = len(self.text.splitlines())
        return (
            f"<Exported {self.format}{version}: {lines} line(s), {len(self.cannot_carry)} "
            f"setting(s) it cannot carry, {len(self.warnings)} warning(s), "
            f"{len(self.cautions)} caution(s)>"
        )


def export(
    recipe: Recipe,
    format: str,
    framework_version: str | None = None,
    *,
    allow_inexpressible: bool = False,
    force: bool = False,
) -> Exported:
    """``recipe`` in the config format of litgpt, hf, deepspeed, megatron, torchtitan, nanogpt or
    json, for ``framework_version`` (default: the current release; see ``sweeper export --help``),
    with what the format cannot carry. TargetError for an unknown format or version, for a
    muP/CompleteP recipe (or a non-AdamW optimizer) the format cannot express unless
    ``allow_inexpressible``, and for a muP/CompleteP recipe from an LR law that records another
    or no parametrization unless ``force``."""
    from sweeper.recipe.export import render
    from sweeper.recipe.recipe import Recipe

    if not isinstance(recipe, Recipe):  # (a dict or a Law had raised a bare AttributeError)
        raise TargetError(
            f"recipe must be a Recipe (what sweeper.recommend returns), got {_shown(recipe)}"
        )
    _check("format", format, "str", error=TargetError)  # (a list: "unhashable type")
    _check("allow_inexpressible", allow_inexpressible, "bool", error=TargetError)
    _check("force", force, "bool", error=TargetError)
    if framework_version is not None and not isinstance(framework_version, str):
        raise TargetError(  # (a float 0.16 had raised a bare AttributeError; 0.10 would be 0.1)
            f"framework_version is a string, e.g. '0.16'; got {framework_version!r}"
        )
    r = render(
        recipe, format, framework_version, allow_inexpressible=allow_inexpressible, force=force
    )
    fv = r.version
    return Exported(
        format,
        r.text,
        tuple(m.text for m in r.missing),
        tuple(recipe.warnings),
        fv.version if fv is not None else None,
        fv.framework if fv is not None else None,
        r.cautions,
        r.notes,
    )


def check(
    recipes: str | PublishedRecipe | CheckValues | Sequence[str | PublishedRecipe | CheckValues],
    laws: str | int | Sweep | Law | Sequence[Law] | Mapping[str, Law],
    *,
    storage: str | None = None,
    force: bool = False,
    bytes_per_token: float | None = None,
) -> list[CheckResult]:
    """Where published (by name, see ``sweeper check --list-recipes``) or given recipes sit
    against ``laws``: one :class:`~sweeper.recipe.check.CheckResult` per recipe."""
    from sweeper.recipe.check import CheckValues, check_recipe
    from sweeper.recipe.published_recipes import PublishedRecipe, get_recipe

    items = [recipes] if isinstance(recipes, str) or not isinstance(recipes, Sequence) else recipes
    for r in items:  # (None, a number or a dict had raised a bare AttributeError)
        if not isinstance(r, str | PublishedRecipe | CheckValues):
            raise TargetError(
                "recipes must be a published recipe's name (sweeper check --list-recipes), a "
                f"PublishedRecipe or a CheckValues, or a list of them; got {_shown(r)}"
            )
    _check("force", force, "bool", error=TargetError)
    found, _loss = resolve_laws(laws, storage=storage)
    return [
        check_recipe(
            found,
            get_recipe(r) if isinstance(r, str) else r,
            force=force,
            bytes_per_token=bytes_per_token,
        )
        for r in items
    ]


@dataclass(frozen=True)
class Comparison:
    """A sweep's laws beside published ones: the laws, their exponents side by side, and every
    law's prediction at the sweep's cells (and the target)."""

    sweep: str
    laws: tuple[Law, ...]
    exponents: pd.DataFrame
    predictions: pd.DataFrame
    #: where the sweep's laws and the published ones were measured differently (token unit,
    #: parametrization, what was held, the LR's schedule): what not to read into the tables
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        """What ``sweeper compare`` prints (:func:`sweeper.cli.fitting.comparison_text`)."""
        from sweeper.cli.fitting import comparison_text

        return comparison_text(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter's display
        p.text(str(self))

    def __repr__(self) -> str:
        """One line: the laws, how many fitted exponents lie outside the published ones'
        intervals, where they were evaluated (the dataclass's own printed two DataFrames)."""
        fitted = sum(x.method != "published" for x in self.laws)
        exps = self.exponents
        compared = [inside for ok, inside in zip(exps.get("comparable", ()),
                    exps.get("inside", ()), strict=True) if ok]  # fmt: skip
        outside = sum(not inside for inside in compared)  # (as the table says OUTSIDE)
        points = list(dict.fromkeys(self.predictions.get("point", ())))
        cells = sum(p != "target" for p in points)
        return (
            f"<Comparison {self.sweep}: {fitted} fitted and {len(self.laws) - fitted} published "
            f"law(s); {len(compared)} exponent(s) compared, {outside} outside; at {cells} "
            f"cell(s){' and the target' if 'target' in points else ''}; "
            f"{len(self.notes)} note(s)>"
        )


def compare(
    sweep: str | Sweep,
    *,
    at: Target | Mapping[str, Any] | None = None,
    published: Sequence[str] = ("deepseek", "steplaw", "kaplan"),
    storage: str | None = None,
    bytes_per_token: float | None = None,
) -> Comparison:
    """The sweep's latest lr/batch laws beside the ``published`` ones, evaluated at its cells and
    at the target ``at`` (a Target, or a mapping of its fields as :func:`recommend` takes: tokens
    and n_params, or width/depth/context; n_params and a shape given together must agree, as
    :func:`recommend` requires). ``at=None`` compares at the cells alone; ``at={}`` is a
    TargetError (no target named). ``bytes_per_token`` (as :func:`recommend`'s) converts D and the
    batch between laws fitted on bytes and points in tokenizer tokens (the published laws at a
    byte-level sweep's cells, its laws at the target); without it they are set side by side as
    they are, and a note says so."""
    from sweeper.recipe.compare import (
        compare_sweep_laws,
        convention_notes,
        coupling_notes,
        unused_vocab,
    )
    from sweeper.recipe.hardware import positive

    _check("sweep", sweep, "name", "Sweep", error=StorageError)
    _storage(storage)
    _check("published", published, "str", "strs", error=TargetError)  # (None: a TypeError)
    problems: list[str] = []
    positive("bytes_per_token", bytes_per_token, problems)
    if problems:
        raise TargetError(problems[0])

    # (sweeps joined by "+", as fit and diff take them: their runs together, the joined laws)
    runs, _, name = _joined_runs(sweep, storage)
    fitted = [x for x in laws(sweep, storage=storage) if x.target in ("lr", "batch_tokens")]
    latest: dict[tuple[Any, ...], Law] = {}
    for x in fitted:
        latest[(x.target, x.kind, x.method, x.predictors)] = x
    if not latest:
        raise StorageError(
            f"no lr or batch_tokens laws stored for sweep {name!r}; run `sweeper fit {name}` first"
        )
    if isinstance(published, str):  # "steplaw" or "deepseek,steplaw": not one name a letter
        published = [x.strip() for x in published.split(",")]
    all_laws, exps, pred = compare_sweep_laws(
        runs, list(latest.values()), published, at, bytes_per_token=bytes_per_token
    )
    pub = [x for x in all_laws if x.method == "published"]
    notes = convention_notes(list(latest.values()), pub, bytes_per_token=bytes_per_token)
    notes += coupling_notes(pred) + unused_vocab(all_laws, at)
    return Comparison(name, tuple(all_laws), exps, pred, tuple(notes))


# ---- stage 4: evidence and reports ---------------------------------------------------------------
def validate_transfer(
    sweep: str | Sweep,
    *,
    holdout: str = "largest",
    fit_cells: str | None = None,
    seeds: int = 2,
    method: str = DEFAULT_METHOD,
    surface: str | None = None,
    storage: str | None = None,
    max_concurrent: int | None = None,
    progress: bool = True,
    verbose: int = 0,
) -> TransferResult:
    """Fit the LR law on the fit set (``fit_cells``: e.g. ``"width<=64"``; default every cell but
    the held-out one), predict the held-out cell (``"largest"`` outside the fit set, a cell of the
    sweep, or a new cell named like ``w256-d2-t819k``), train it at the prediction, the baselines
    and a sqrt(2) grid around them with ``seeds`` seeds, and report the regrets; see
    :mod:`sweeper.transfer`. A check run again with more ``seeds`` trains only the missing
    ones (:func:`~sweeper.transfer.run.seed_blocks`); with fewer it keeps the seeds it has;
    after the law moved (more runs, a refit) it keeps the runs it has and trains the new LRs.
    ``surface``: the surface method's settings (as :func:`fit`)."""
    from sweeper.study.spec import check_max_concurrent
    from sweeper.transfer.run import run_transfer

    _check("sweep", sweep, "name", "Sweep", error=StorageError)
    _storage(storage)
    _check("holdout (--holdout)", holdout, "str")  # (None, 5, a list: bare TypeErrors)
    _check("fit_cells (--fit-cells)", fit_cells, "str", "None")
    _check("seeds (--seeds)", seeds, "int>=1")  # (1.5 had been taken)
    _check("progress", progress, "bool")
    _check("verbose", verbose, "int>=0")
    check_max_concurrent(max_concurrent)
    sw = _sweep(sweep, storage)
    return run_transfer(
        sw,
        holdout=holdout,
        fit_cells=fit_cells,
        seeds=seeds,
        method=method,
        surface=_surface_settings(sw, surface, method),
        max_concurrent=max_concurrent,
        progress=progress,
        verbose=verbose,
    )


def write_report(
    sweep: str | Sweep,
    out: str | Path,
    *,
    storage: str | None = None,
    method: str | None = None,
    recipe: Recipe | Mapping[str, Any] | None = None,
    bootstrap: int = 200,
    at: Target | Mapping[str, float] | None = None,
    bytes_per_token: float | None = None,
) -> list[Path]:
    """PNG plots and a self-contained ``index.html`` for a sweep in folder ``out``; returns the
    files written. The laws shown are the latest stored per target; with ``method`` the latest
    stored by that method, fitted for the report alone when none is. ``recipe``: a recipe (or its
    JSON form) to show, with its target on the law plot; or ``at``, a target's scale without a
    recipe (``{"n_params": 7e9, "tokens": 1.4e12}``, or a :class:`~sweeper.recipe.target.Target`,
    of which its N, shape and budget are marked), marked on the law plots with how far each law
    extrapolates to it; ``bytes_per_token`` (as :func:`recommend`'s) converts that target's D for
    laws that count bytes (without it the page says the unit is taken as given). Every transfer
    check stored for the sweep (:func:`validate_transfer`) has its section, the one stored last
    first."""
    from sweeper.recipe.recipe import Recipe
    from sweeper.report.build import build_report

    _check("sweep", sweep, "name", "Sweep", error=StorageError)
    _storage(storage)
    _check("out (-o)", out, "path")
    _check("method", method, "str", "None")
    if not isinstance(recipe, Recipe | Mapping | None):  # ("x" had raised AttributeError)
        raise SweeperError(
            f"recipe must be a Recipe or its JSON form (a mapping), got {_shown(recipe)}"
        )
    scale = _report_scale(at)
    _writable_folder(Path(out))
    sw = _sweep_or_joined(sweep, storage)
    recipe_dict = recipe.to_dict() if isinstance(recipe, Recipe) else recipe
    return build_report(sw, Path(out), method=method, recipe=recipe_dict, bootstrap=bootstrap,
                        at=scale, bytes_per_token=bytes_per_token)  # fmt: skip


def _report_scale(at: object) -> Mapping[str, float] | None:
    """:func:`write_report`'s ``at`` as the scale the report marks: a mapping as it is, a
    Target's N, shape and budget (``compute`` as the report's ``flops``; ``tokens_per_param``
    as the tokens it gives with ``n_params``); SweeperError for anything else (a Target had
    raised "not iterable", "1e9" was read a letter at a time)."""
    from sweeper.recipe.target import Target

    if at is None or isinstance(at, Mapping):
        return at
    if not isinstance(at, Target):
        raise SweeperError(
            "at must be a Target or a mapping of the scale to mark (n_params, tokens, flops, "
            f"width, depth: {{'n_params': 7e9, 'tokens': 1.4e12}}), got {_shown(at)}"
        )
    tokens = at.tokens
    if at.tokens_per_param is not None:
        if at.n_params is None:
            raise SweeperError(
                "at: a Target's tokens_per_param needs its n_params to give the tokens to mark"
            )
        tokens = at.tokens_per_param * at.n_params
    given = {"n_params": at.n_params, "tokens": tokens, "flops": at.compute,
             "width": at.width, "depth": at.depth}  # fmt: skip
    return {k: v for k, v in given.items() if v is not None}


def _writable_folder(out: Path) -> None:
    """SweeperError unless a report can be written in folder ``out``: the nearest folder of it
    that exists (``out`` itself, else a parent) takes a new folder, tried and removed at once, so
    that nothing is left when the report fails later (a path under a file or under /proc had
    raised a bare NotADirectoryError or FileNotFoundError)."""
    import tempfile

    where = out.absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        under = "" if where == out.absolute() else f": cannot write {out} under it"
        raise SweeperError(f"out (-o): {where} exists and is not a folder{under}")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".sweeper-", dir=where))
    except OSError as e:
        raise SweeperError(f"out (-o): cannot write a report in {out}: {e.strerror or e}") from None


# ---- your own model: is my change different? does muP take? --------------------------------------
def diff(
    sweep_a: str | Sweep,
    sweep_b: str | Sweep,
    *,
    method: str = "parabola",  # (DIFF_METHODS[0]: parabola or band)
    predictors: Sequence[str] | None = None,
    params: float | None = None,
    tokens: float | None = None,
    width: int | None = None,
    depth: int | None = None,
    storage: str | None = None,
    **options: Any,
) -> DiffResult:
    """Fit both sweeps the same way and compare B with A: exponent differences, the ratio of the
    predicted optimal LR (and batch) at a target (``params``, ``tokens``, and the shape
    ``width``, ``depth`` a law on them or on FLOPs reads; default the largest cell), the
    best-loss difference per shared cell, with 95% and Bonferroni-corrected intervals
    from the fits' own resamples; see :mod:`sweeper.fitting.diff`. ``options``: n_boot (at
    least 80, and 2m/0.05 for the m quantities compared: the corrected level needs a draw in
    each tail; the fits' 0 leaves no intervals to compare), cell_boot, seed and
    other fit options. Returns a :class:`~sweeper.fitting.diff.DiffResult`.

    A side may be several sweeps joined by ``+`` (``"qknorm_off+qknorm_off_ext"``): the same
    study on more LRs, whose runs are fitted together under the first one's conventions (their
    conventions must agree)."""
    from sweeper.fitting.diff import (
        DEFAULT_BOOT,
        check_diff_method,
        check_diff_resamples,
        diff_runs,
    )
    from sweeper.recipe.hardware import positive

    _check("sweep_a", sweep_a, "name", "Sweep", error=StorageError)
    _check("sweep_b", sweep_b, "name", "Sweep", error=StorageError)
    _storage(storage)
    _check_fit_options(options)
    check_diff_method(method)
    check_diff_resamples(options.get("n_boot", DEFAULT_BOOT))
    problems: list[str] = []
    positive("params", params, problems)  # (nan had been taken, "1e9" too)
    positive("tokens", tokens, problems)
    if problems:
        raise TargetError("; ".join(problems))
    for name, v in (("width", width), ("depth", depth)):
        _check(name, v, "int>=1", "None", error=TargetError)
    _check("predictors", predictors, "str", "strs", "None", error=FitError)
    runs_a, conv_a, name_a = _joined_runs(sweep_a, storage)
    runs_b, conv_b, name_b = _joined_runs(sweep_b, storage)
    given = (("n_params", params), ("tokens", tokens), ("width", width), ("depth", depth))
    target = {k: float(v) for k, v in given if v is not None}
    return diff_runs(
        runs_a,
        runs_b,
        conventions=(conv_a, conv_b),
        names=(name_a, name_b),
        method=method,
        predictors=(predictors,) if isinstance(predictors, str) else predictors,
        target=target,
        **options,
    )


def coord_check(
    study: StudySpec | str | Path,
    *,
    widths: Sequence[int] | None = None,
    depth: int | None = None,
    steps: int = 5,
    lr: float | None = None,
    batch_size: int = 8,
    seed: int = 0,
    seeds: int | None = None,
    parametrization: str | None = None,
) -> dict[str, Any]:
    """The coordinate check of a study's model and parametrization: activations' RMS per role
    after ``steps`` steps at ``lr`` (default the geometric middle of the study's LRs), at each of
    ``widths`` (default the ladder's) and ``depth`` (default its smallest), averaged over
    ``seeds`` seeds from ``seed`` (None: the default, 3), with the slope of log RMS against log
    width per quantity and the verdict; see :mod:`proxy_models.coord_check`.
    ``parametrization`` checks the same model under another one (e.g. ``"sp"`` to compare)."""
    from dataclasses import replace

    from sweeper.recipe.hardware import positive
    from sweeper.study.own_code import coord_check_study
    from sweeper.study.spec import check_spec

    _check("widths (--widths)", widths, "ints>=1", "None", error=StudyError)
    _check("depth (--depth)", depth, "int>=1", "None", error=StudyError)  # (0 was the default)
    _check("steps (--steps)", steps, "int>=1", error=StudyError)
    _check("batch_size (--batch-size)", batch_size, "int>=1", error=StudyError)
    _check("seed (--seed)", seed, "int>=0", error=StudyError)
    _check("seeds (--seeds)", seeds, "int>=1", "None", error=StudyError)
    _check("parametrization", parametrization, "str", "None", error=StudyError)
    problems: list[str] = []
    positive("lr", lr, problems)
    if problems:
        raise StudyError(problems)
    spec = _spec(study)
    if parametrization is not None:
        spec = replace(spec, model=replace(spec.model, parametrization=parametrization))
        if problems := check_spec(spec):  # (a bare ValueError for an unknown one)
            raise StudyError(problems)
    return coord_check_study(
        spec, widths=widths, depth=depth, steps=steps, lr=lr, batch_size=batch_size, seed=seed,
        seeds=seeds,
    )  # fmt: skip


def _joined_runs(sweeps: str | Sweep, storage: str | None) -> tuple[pd.DataFrame, Any, str]:
    """The runs of one sweep, or of ``"a+b+..."`` together, with the first sweep's conventions
    (StorageError when the others' differ: they must be the same study on other LRs)."""
    import pandas as pd

    handles, conv = _joined_handles(sweeps, storage)
    runs = pd.concat([h.runs() for h in handles], ignore_index=True)
    return runs, conv, "+".join(h.name for h in handles)


def _joined_handles(sweeps: str | Sweep, storage: str | None) -> tuple[list[Sweep], Any]:
    """The sweep, or each sweep of ``"a+b+..."``, and the first one's conventions; StorageError
    when another's differ: only one study on other LRs may be joined."""
    from sweeper.fitting.provenance import sweep_conventions

    names = [sweeps] if not isinstance(sweeps, str) else _joined_names(sweeps)
    handles = [_sweep(n, storage) for n in names]
    convs = [sweep_conventions(h) for h in handles]
    first = handles[0]
    for h, c in zip(handles[1:], convs[1:], strict=True):
        # (``held`` is what the runs spanned, not a convention: the join spans them all)
        if replace(c, held={}) != replace(convs[0], held={}) or (
            _study_but_lr(h) != _study_but_lr(first)
        ):
            raise StorageError(
                f"sweep {h.name!r} is not the study of {first.name!r} on other LRs: only such "
                "sweeps can be joined with '+'"
            )
    return handles, replace(convs[0], held=_spanned([c.held for c in convs]))


def _spanned(helds: Sequence[Mapping[str, tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    """The ranges of several sweeps' ``held``, joined: each name's lowest low and highest high."""
    out: dict[str, tuple[float, float]] = {}
    for held in helds:
        for k, (lo, hi) in held.items():
            a, b = out.get(k, (lo, hi))
            out[k] = (min(a, lo), max(b, hi))
    return out


def _joined_names(joined: str) -> list[str]:
    """The sweeps of ``"a+b"`` (spaces around the names allowed); StorageError for one named
    twice, whose runs would count twice."""
    names = [n.strip() for n in joined.split("+")]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise StorageError(f"{joined!r} names {', '.join(twice)} twice: its runs would count twice")
    from sweeper.study.storage import MAX_NAME

    if len("+".join(names)) > MAX_NAME:  # (its laws are stored under the joined name: a review)
        raise StorageError(
            f"the joined name is {len('+'.join(names))} characters long, more than the "
            f"{MAX_NAME} a storage keeps: join fewer sweeps, or import them as one"
        )
    return names


def _study_but_lr(sw: Sweep) -> str | None:
    """The spec hash of a launched sweep's study with its name, description and LR values left
    out (None for an imported sweep)."""
    from dataclasses import replace

    from sweeper.study.spec import ParamSpec
    from sweeper.study.study_toml import spec_hash

    spec = sw.spec
    if spec is None:
        return None
    spec = replace(
        spec,
        sweep=replace(spec.sweep, name="_", description=""),
        search=replace(spec.search, lr=ParamSpec.fixed(1.0)),
    )
    return spec_hash(spec)

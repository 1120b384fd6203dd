"""A launched sweep in the storage: one Optuna study per cell plus its ``sweeper_sweeps`` row.

Each cell of a sweep is the Optuna study ``<sweep>/<cell>`` (so optuna-dashboard shows it) with the
cell's metadata as study attributes; the sweep itself is a ``sweeper_sweeps`` row holding the
resolved study file, its hash and the model family. The storage is the source of truth: relaunching
the same study resumes it, and :func:`reconcile` closes the RUNNING trials a killed driver left
behind (Optuna's heartbeat does not work with ask/tell) and queues their points again.

Per trial, the launcher records user attributes: ``runs`` (one dict per seed: ``seed``,
``ray_trial_id``, ``loss``, ``train_loss``, ``diverged``, ``stopped``, ``tokens``, ``steps``, ``wall_s``,
``tokens_per_s``, ...) and their aggregates ``tokens`` (tokens seen, summed over seeds), ``wall_s``
(summed), ``tokens_per_s`` (mean), ``diverged`` (any seed), ``seed`` and ``ray_trial_id`` (first
seed's, or lists); ``retries`` and ``last_error`` when Ray restarted a crashed run. A COMPLETE
trial's value is the mean final validation loss over its seeds (diverged runs included).

This module imports Optuna, SQLAlchemy and pandas (no ray, no torch).
"""

from __future__ import annotations

import json
import logging
import math
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import optuna
import pandas as pd
import sqlalchemy as sa
from optuna.samplers import BaseSampler
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from sweeper import storage as st
from sweeper.errors import StorageError, StudyError
from sweeper.ladder import Cell, cells
from sweeper.runs import normalize_runs
from sweeper.space import grid_values
from sweeper.study import StudySpec, parse_study_toml, spec_hash, study_toml

__all__ = [
    "CellCounts",
    "CellStudy",
    "added_cells",
    "aggregate_runs",
    "cell_counts",
    "cell_key",
    "delete_sweep",
    "grid_points_left",
    "launched_sweeps",
    "load_sweep_runs",
    "make_sampler",
    "open_sweep",
    "optuna_storage",
    "reconcile",
    "requeue_point",
    "resolve_sweep_name",
    "stored_spec",
    "study_name",
    "sweep_cells",
    "sweep_status",
]

logger = logging.getLogger(__name__)


def study_name(sweep: str, cell: str) -> str:
    """The Optuna study of one cell: ``<sweep>/<cell>``."""
    return f"{sweep}/{cell}"


# ---- storage -----------------------------------------------------------------------------------
_storages: dict[str, RDBStorage] = {}


def optuna_storage(url: str | None = None) -> RDBStorage:
    """A cached Optuna RDBStorage on ``url`` (Optuna creates its tables beside Sweeper's)."""
    url = st.resolve_url(url)
    if url in _storages:
        return _storages[url]
    # Optuna logs every study it creates at INFO on its own handler; the CLI reports progress itself
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 60}
    try:
        storage = RDBStorage(url, engine_kwargs=kwargs)
    except (sa.exc.ArgumentError, sa.exc.OperationalError, ModuleNotFoundError, ValueError) as e:
        raise StorageError(f"cannot open storage {url!r}: {str(e).splitlines()[0]}") from None
    _storages[url] = storage
    return storage


class _AskTellGridSampler(optuna.samplers.GridSampler):
    """GridSampler whose ``after_trial`` does not call ``study.stop()``: that only works inside
    ``study.optimize`` and raises under ask/tell; the launcher stops at the target itself."""

    def points_left(self, study: optuna.Study) -> int:
        """Points an ``ask`` can still give without repeating one: the queued (WAITING) trials
        plus the grid points never asked. Optuna counts a FAIL trial's grid point as visited and,
        once every point is visited, asks a random one again; the launcher queues a failed point
        itself (:func:`requeue_point`) and stops asking when this is 0."""
        asked: set[int] = set()
        waiting = 0
        for t in study._storage.get_all_trials(study._study_id, deepcopy=False):
            if t.state == TrialState.WAITING:
                waiting += 1
            elif "grid_id" in t.system_attrs and self._same_search_space(
                t.system_attrs["search_space"]
            ):
                asked.add(int(t.system_attrs["grid_id"]))
        return waiting + self._n_min_trials - len(asked)

    def grid_point(self, trial: FrozenTrial) -> dict[str, Any]:
        """The point the sampler gave ``trial`` (from its grid id), even when the trial holds no
        params yet: its driver died between Optuna's ``before_trial`` and ``suggest``. {} when it
        has no grid id of this search space."""
        gid = trial.system_attrs.get("grid_id")
        if gid is None or not self._same_search_space(trial.system_attrs.get("search_space", {})):
            return {}
        return dict(zip(self._param_names, self._all_grids[int(gid)], strict=True))

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        return None


def cell_key(cell_name: str) -> int:
    """A number of the cell, stable across launches and ladder extensions (from its name)."""
    return zlib.crc32(cell_name.encode()) % 100_003


def make_sampler(spec: StudySpec, cell_index: int, n_existing: int = 0) -> BaseSampler:
    """The sampler of one cell's study.

    ``cell_index``: a number of the cell (:func:`open_sweep` passes :func:`cell_key`, so that a
    cell keeps its sampler when the ladder grows around it).
    Seeded from ``sampler.seed``, that number and the number of trials the study already holds,
    so cells differ and a relaunch does not replay the random start-up points it already ran. The
    grid sampler is the exception: its seed shuffles the grid, and the grid ids its stored trials
    hold refer to that order, so a relaunch must shuffle the same way (seed without the count).
    """
    s = spec.sampler
    cell_seed = s.seed * 1_000_003 + cell_index * 7919
    seed = (cell_seed + n_existing) % (2**31 - 1)
    startup = 10 if s.n_startup_trials is None else s.n_startup_trials  # Optuna's default: 10
    if s.kind == "tpe":
        # constant_liar: running trials count as bad, so concurrent asks spread out
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=startup)
    if s.kind == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup)
    if s.kind == "grid":
        return _AskTellGridSampler(grid_values(spec.search), seed=cell_seed % (2**31 - 1))
    if s.kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if s.kind == "qmc":
        # the QMC sequence continues from the study's trial count, so the seed stays fixed
        with warnings.catch_warnings():  # "experimental" since Optuna 3.0; we pin its behaviour
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(
                seed=s.seed, warn_independent_sampling=False, warn_asynchronous_seeding=False
            )
    raise StudyError(f"sampler.kind: unknown sampler {s.kind!r}")


# ---- the sweep row -----------------------------------------------------------------------------
def _meta(spec: StudySpec, cell_list: list[Cell]) -> dict[str, Any]:
    m = spec.model
    return {
        "parametrization": m.parametrization,
        "base_width": m.base_width,
        "base_depth": m.base_depth,
        "context": m.context,
        "seq_len": m.context,
        "vocab_size": m.vocab_size,
        "init_std": m.init_std,
        "output_mult": m.output_mult,
        "norm": m.norm,
        "qk_norm": m.qk_norm,
        "tied_embeddings": m.tied_embeddings,
        "head_dim": m.head_dim,
        "heads": m.heads,
        "data": spec.sweep.data,
        "sampler": spec.sampler.kind,
        "pruner": spec.pruner.kind,
        "trials_per_cell": spec.trials_per_cell,
        "seeds_per_point": spec.sweep.seeds_per_point,
        "schedule": spec.train.schedule,
        "cells": [c.name for c in cell_list],
    }


@dataclass(frozen=True)
class CellStudy:
    """A cell with its Optuna study (sampler set for this launch) and its index in the ladder."""

    cell: Cell
    study: optuna.Study
    index: int


def open_sweep(
    spec: StudySpec, url: str | None = None, *, force_new: bool = False
) -> list[CellStudy]:
    """Create or load the sweep's row and every cell's study; refuse a changed study.

    A sweep of the same name launched from a study that measures something else (other
    :func:`~sweeper.study.spec_hash`) raises StorageError unless ``force_new``, which deletes that
    sweep's cell studies and row first. A study that differs only in what the hash leaves out
    (``trials_per_cell``, the sampler's ``n_startup_trials`` and ``max_pending_per_cell``, storage,
    resources, description) extends the sweep: its resolved file replaces the stored one, so that
    raising ``trials_per_cell`` and relaunching adds the missing trials. So does a study whose
    ladder holds every cell of the stored one and more, with all else the same (:func:`added_cells`):
    the new cells get their studies, the old ones keep theirs.
    """
    cell_list = cells(spec)
    url = st.resolve_url(url)
    engine = st.get_engine(url)
    h = spec_hash(spec)
    existing = st.get_sweep(spec.name, url)
    if existing is not None:
        if existing["kind"] != "launched":
            raise StorageError(
                f"sweep {spec.name!r} in {_safe_url(url)} holds imported runs; "
                "choose another sweep.name"
            )
        if existing["spec_hash"] != h and _stored_hash(existing) != h:
            added = added_cells(_stored_spec_or_none(existing), spec)
            if added:
                logger.warning(
                    "sweep %s: ladder extended by %d cell(s): %s",
                    spec.name,
                    len(added),
                    ", ".join(added),
                )
            elif not force_new:
                raise StorageError(
                    f"sweep {spec.name!r} in {_safe_url(url)} was launched from a different study "
                    "file; relaunch it with the same study (adding cells to its ladder is allowed), "
                    "choose another sweep.name, or pass --force-new to delete its trials and start "
                    "again"
                )
            else:
                delete_sweep(spec.name, url)
                existing = None
    text = study_toml(spec)
    meta = _meta(spec, cell_list)
    if existing is None:
        with engine.begin() as conn:
            conn.execute(
                st.sweeps_table.insert().values(
                    name=spec.name,
                    kind="launched",
                    spec_hash=h,
                    study_toml=text,
                    meta_json=json.dumps(meta),
                    created_at=st.now(),
                )
            )
    elif (
        existing["spec_hash"] != h
        or existing["study_toml"] != text
        or any(existing["meta"].get(k) != v for k, v in meta.items())
    ):
        # same measurement, new target or sampler knobs (or a hash from an older Sweeper): the
        # stored file is what `stored_spec` and the fits read, so it must be the current one.
        # Keys other modules added to the metadata (a transfer result) are kept.
        with engine.begin() as conn:
            conn.execute(
                st.sweeps_table.update()
                .where(st.sweeps_table.c.name == spec.name)
                .values(
                    spec_hash=h,
                    study_toml=text,
                    meta_json=json.dumps({**existing["meta"], **meta}),
                )
            )
        logger.info("sweep %s: stored study file updated (same measurement)", spec.name)
    storage = optuna_storage(url)
    out = []
    for i, cell in enumerate(cell_list):
        name = study_name(spec.name, cell.name)
        study = optuna.create_study(
            study_name=name, storage=storage, direction="minimize", load_if_exists=True
        )
        attrs = study.user_attrs
        wanted = {
            **cell.to_dict(),
            "sweep": spec.name,
            "cell": cell.name,
            "target": spec.trials_per_cell,
            "seeds_per_point": spec.sweep.seeds_per_point,
        }
        for k, v in wanted.items():
            if attrs.get(k) != v:
                study.set_user_attr(k, v)
        n = len(study.get_trials(deepcopy=False))
        study.sampler = make_sampler(spec, cell_key(cell.name), n)
        out.append(CellStudy(cell=cell, study=study, index=i))
    return out


def added_cells(old: StudySpec | None, new: StudySpec) -> list[str]:
    """The cells ``new`` adds to ``old`` when it is ``old`` with a larger ladder: every old cell
    kept and everything else measured the same (equal :func:`~sweeper.study.spec_hash` once the
    ladders are swapped). [] otherwise, or when it adds none."""
    if old is None or spec_hash(replace(new, ladder=old.ladder)) != spec_hash(old):
        return []
    try:
        old_names = {c.name for c in cells(old)}
        new_names = [c.name for c in cells(new)]
    except StudyError:
        return []
    if not old_names <= set(new_names):
        return []
    return [n for n in new_names if n not in old_names]


def _stored_spec_or_none(row: Mapping[str, Any]) -> StudySpec | None:
    try:
        return parse_study_toml(row["study_toml"], source=f"sweep:{row['name']}")
    except StudyError:
        return None


def _stored_hash(row: Mapping[str, Any]) -> str | None:
    """The hash of a sweep row's stored study as this Sweeper computes it (the row's own hash may
    come from an older definition of what the hash covers); None if the file no longer parses."""
    stored = _stored_spec_or_none(row)
    return None if stored is None else spec_hash(stored)


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def delete_sweep(name: str, url: str | None = None) -> None:
    """Delete a launched sweep: its cell studies, its ``sweeper_sweeps`` row, the laws fitted to
    it, and its transfer check (``<name>.transfer``), all of which describe data that is gone."""
    url = st.resolve_url(url)
    storage = optuna_storage(url)
    names = (name, f"{name}.transfer")
    prefixes = tuple(f"{n}/" for n in names)
    for sname in optuna.get_all_study_names(storage):
        if sname.startswith(prefixes):
            optuna.delete_study(study_name=sname, storage=storage)
    with st.transaction(url) as conn:
        for n in names:
            conn.execute(st.runs_table.delete().where(st.runs_table.c.sweep == n))
            conn.execute(st.laws_table.delete().where(st.laws_table.c.sweep == n))
            conn.execute(st.sweeps_table.delete().where(st.sweeps_table.c.name == n))


def grid_points_left(study: optuna.Study) -> int | None:
    """For a study on the grid sampler, the points it can still give without a repeat (see
    ``_AskTellGridSampler.points_left``); None for any other sampler."""
    sampler = study.sampler
    if isinstance(sampler, _AskTellGridSampler):
        return sampler.points_left(study)
    return None


def _waiting_params(study: optuna.Study) -> list[dict[str, Any]]:
    return [
        t.params or t.system_attrs.get("fixed_params", {})
        for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    ]


def requeue_point(
    study: optuna.Study,
    params: Mapping[str, Any],
    waiting: list[dict[str, Any]] | None = None,
) -> bool:
    """Queue ``params`` (a point whose trial was closed as FAIL) to be asked again, unless an
    identical WAITING trial is already queued. ``waiting``: the queued points, when the caller
    keeps them (updated in place). Returns whether a trial was queued."""
    point = dict(params)
    if not point:
        return False
    if waiting is None:
        waiting = _waiting_params(study)
    if point in waiting:
        return False
    study.enqueue_trial(point)
    waiting.append(point)
    return True


def reconcile(study: optuna.Study) -> list[dict[str, Any]]:
    """Close the RUNNING trials a dead driver left as FAIL and queue their points again.

    Returns the params of every closed trial, in order. A driver killed between Optuna's
    ``before_trial`` and ``suggest`` leaves a trial with no params: on the grid its point is
    recovered from the grid id and queued (else the grid would count it visited and lose it); on
    any other sampler it is returned as ``{}`` and not queued (the sampler asks a new point).
    Call it only when no other driver runs this sweep. A point is not queued twice (an identical
    WAITING trial is kept instead).
    """
    trials = study.get_trials(deepcopy=False)
    waiting = _waiting_params(study)
    sampler = study.sampler
    closed: list[dict[str, Any]] = []
    for t in trials:
        if t.state != TrialState.RUNNING:
            continue
        study._storage.set_trial_user_attr(t._trial_id, "closed_by", "reconcile: driver died")
        study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
        params = dict(t.params)
        if not params and isinstance(sampler, _AskTellGridSampler):
            params = sampler.grid_point(t)
        closed.append(params)
        requeue_point(study, params, waiting)  # a no-op for {}
    if closed:
        logger.info(
            "%s: %d RUNNING trial(s) closed as FAIL, %d point(s) queued again",
            study.study_name,
            len(closed),
            sum(1 for p in closed if p),
        )
    return closed


# ---- results of one point ----------------------------------------------------------------------
def aggregate_runs(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trial-level user attributes from its per-seed runs (see the module docstring)."""
    if not runs:
        return {}
    seeds = [r.get("seed") for r in runs]
    ids = [r.get("ray_trial_id") for r in runs]
    tps = [float(r.get("tokens_per_s", math.nan)) for r in runs]
    return {
        "tokens": int(sum(int(r.get("tokens", 0)) for r in runs)),
        "wall_s": float(sum(float(r.get("wall_s", 0.0)) for r in runs)),
        "tokens_per_s": float(sum(tps) / len(tps)),
        "diverged": bool(any(r.get("diverged") for r in runs)),
        "seed": seeds[0] if len(seeds) == 1 else seeds,
        "ray_trial_id": ids[0] if len(ids) == 1 else ids,
    }


# ---- status ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellCounts:
    """Trials of one cell by state, and its best COMPLETE trial."""

    cell: str
    complete: int
    running: int
    failed: int
    pruned: int
    waiting: int
    target: int
    best_loss: float | None
    best_lr: float | None
    best_batch_size: int | None

    @property
    def finished(self) -> int:
        """COMPLETE + PRUNED: the trials that count against the target."""
        return self.complete + self.pruned

    @property
    def done(self) -> bool:
        return self.finished >= self.target


def cell_counts(study: optuna.Study, target: int, cell: str | None = None) -> CellCounts:
    trials = study.get_trials(deepcopy=False)
    by = {s: 0 for s in TrialState}
    for t in trials:
        by[t.state] += 1
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    best = min(complete, key=lambda t: t.value) if complete else None  # type: ignore[arg-type,return-value]
    return CellCounts(
        cell=cell or study.user_attrs.get("cell") or study.study_name.split("/", 1)[-1],
        complete=by[TrialState.COMPLETE],
        running=by[TrialState.RUNNING],
        failed=by[TrialState.FAIL],
        pruned=by[TrialState.PRUNED],
        waiting=by[TrialState.WAITING],
        target=target,
        best_loss=None if best is None else float(best.value),  # type: ignore[arg-type]
        best_lr=None if best is None else float(best.params["lr"]),
        best_batch_size=None if best is None else int(best.params["batch_size"]),
    )


def launched_sweeps(url: str | None = None) -> list[str]:
    """Names of the launched sweeps in the storage, oldest first."""
    return [r["name"] for r in st.list_sweeps(url) if r["kind"] == "launched"]


def resolve_sweep_name(name: str | None, url: str | None = None) -> str:
    """``name`` if it is a launched sweep in the storage, or the only one when ``name`` is None."""
    url = st.resolve_url(url)
    names = launched_sweeps(url)
    if name is None:
        if len(names) == 1:
            return names[0]
        if not names:
            raise StorageError(f"no launched sweep in {_safe_url(url)}")
        raise StorageError(f"several sweeps in {_safe_url(url)}; name one of: {', '.join(names)}")
    if name not in names:
        row = st.get_sweep(name, url)
        if row is not None:
            raise StorageError(f"sweep {name!r} was imported, not launched")
        known = f" (sweeps: {', '.join(names)})" if names else ""
        raise StorageError(f"no sweep {name!r} in {_safe_url(url)}{known}")
    return name


def stored_spec(name: str, url: str | None = None) -> StudySpec:
    """The study a sweep was launched from, as stored with it."""
    row = st.get_sweep(name, url)
    if row is None:
        raise StorageError(f"no sweep {name!r} in {_safe_url(st.resolve_url(url))}")
    return parse_study_toml(row["study_toml"], source=f"sweep:{name}")


def _cell_studies(name: str, url: str | None) -> list[optuna.Study]:
    """The sweep's cell studies in ladder order (as recorded in the sweep row)."""
    url = st.resolve_url(url)
    storage = optuna_storage(url)
    row = st.get_sweep(name, url)
    order = list((row or {}).get("meta", {}).get("cells", []))
    prefix = f"{name}/"
    names = [s for s in optuna.get_all_study_names(storage) if s.startswith(prefix)]
    rank = {study_name(name, c): i for i, c in enumerate(order)}
    names.sort(key=lambda s: (rank.get(s, len(rank)), s))
    return [optuna.load_study(study_name=s, storage=storage) for s in names]


def sweep_cells(name: str, url: str | None = None) -> list[dict[str, Any]]:
    """Cell metadata of a launched sweep (the cell studies' attributes), in ladder order."""
    return [dict(s.user_attrs) for s in _cell_studies(name, url)]


def sweep_status(name: str, url: str | None = None) -> dict[str, Any]:
    """``{"sweep": name, "cells": [{cell, width, depth, tokens, complete, running, failed, pruned,
    waiting, target, best_loss, best_lr, best_batch_size}]}``."""
    rows = []
    for s in _cell_studies(name, url):
        a = s.user_attrs
        c = cell_counts(s, int(a.get("target", 0)), a.get("cell"))
        rows.append(
            {
                "cell": c.cell,
                "width": a.get("width"),
                "depth": a.get("depth"),
                "tokens": a.get("tokens"),
                "complete": c.complete,
                "running": c.running,
                "failed": c.failed,
                "pruned": c.pruned,
                "waiting": c.waiting,
                "target": c.target,
                "best_loss": c.best_loss,
                "best_lr": c.best_lr,
                "best_batch_size": c.best_batch_size,
            }
        )
    return {"sweep": name, "cells": rows}


# ---- runs table --------------------------------------------------------------------------------
_CELL_COLS = (
    "width",
    "depth",
    "heads",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "parametrization",
)
_RUN_EXTRAS = ("train_loss", "init_loss", "stopped", "steps", "tokens_per_s", "device")


def load_sweep_runs(name: str, url: str | None = None) -> pd.DataFrame:
    """Every training run of a launched sweep as a runs table (``sweeper.runs`` columns).

    One row per run: per seed when ``seeds_per_point > 1``. WAITING trials (queued, never started)
    are left out. ``loss`` is the run's final validation loss (the last reported one for a PRUNED
    run, NaN for a run without a result); ``state`` is its Optuna trial's state. Extra columns:
    ``trial_number``, ``ray_trial_id``, ``value`` (the trial's mean loss), ``tokens_seen``, the
    searched params (``warmup``, ``weight_decay``, ``beta2`` when searched) and
    ``train_loss``, ``init_loss``, ``stopped``, ``steps``, ``tokens_per_s``, ``device``, ``heads``,
    ``parametrization``.
    """
    name = resolve_sweep_name(name, url)
    rows: list[dict[str, Any]] = []
    for s in _cell_studies(name, url):
        a = s.user_attrs
        context = a.get("context")
        base = {"cell": a.get("cell"), **{k: a.get(k) for k in _CELL_COLS}, "seq_len": context}
        for t in s.get_trials(deepcopy=False):
            if t.state == TrialState.WAITING:
                continue
            common = {
                **base,
                "lr": t.params.get("lr"),
                "batch_size": t.params.get("batch_size"),
                **{k: v for k, v in t.params.items() if k not in ("lr", "batch_size")},
                "state": t.state.name,
                "trial_number": t.number,
                "value": t.value,
                "source": f"sweep:{name}",
            }
            runs = t.user_attrs.get("runs") or []
            if not runs:
                rows.append(
                    {
                        **common,
                        "loss": t.value if t.state == TrialState.COMPLETE else math.nan,
                        "diverged": bool(t.user_attrs.get("diverged", False)),
                        "seed": t.user_attrs.get("seed"),
                        "ray_trial_id": t.user_attrs.get("ray_trial_id"),
                        "wall_s": t.user_attrs.get("wall_s"),
                        "tokens_seen": t.user_attrs.get("tokens"),
                    }
                )
                continue
            for r in runs:
                rows.append(
                    {
                        **common,
                        "loss": r.get("loss"),
                        "diverged": bool(r.get("diverged", False)),
                        "seed": r.get("seed"),
                        "ray_trial_id": r.get("ray_trial_id"),
                        "wall_s": r.get("wall_s"),
                        "tokens_seen": r.get("tokens"),
                        **{k: r.get(k) for k in _RUN_EXTRAS},
                    }
                )
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame({c: [] for c in ("cell", "trial_number", "ray_trial_id", "value")})
    if "batch_size" in df and "seq_len" in df:
        df["batch_tokens"] = pd.to_numeric(df["batch_size"]) * pd.to_numeric(df["seq_len"])
    return normalize_runs(df)

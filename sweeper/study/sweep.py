"""A launched sweep in the storage: one Optuna study per cell plus its ``sweeper_sweeps`` row.

Each cell of a sweep is the Optuna study ``<sweep>/<cell>`` (so optuna-dashboard shows it) with the
cell's metadata as study attributes; the sweep itself is a ``sweeper_sweeps`` row holding the
resolved study file, its hash and the model family (and, for the law sampler, why its plan stopped:
:func:`record_law_stop`). The storage is the source of truth: relaunching the same study resumes
it, and :func:`reconcile` closes the RUNNING trials a stopped driver left behind (Optuna's
heartbeat does not work with ask/tell) and queues their points again.

Per trial, the launcher records user attributes: ``runs`` (one dict per seed: ``seed``,
``ray_trial_id``, ``loss``, ``train_loss``, ``diverged``, ``stopped``, ``tokens``, ``steps``, ``wall_s``,
``tokens_per_s``, ...) and their aggregates ``tokens`` (tokens seen, summed over seeds), ``wall_s``
(summed), ``tokens_per_s`` (mean), ``diverged`` (any seed), ``seed`` and ``ray_trial_id`` (first
seed's, or lists); ``retries`` and ``last_error`` when Ray restarted a crashed run. A COMPLETE
trial's value is the mean final validation loss over its seeds (diverged runs included).

This module imports Optuna, SQLAlchemy and pandas (no ray, no torch).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, Any

import optuna
import sqlalchemy as sa
import sqlalchemy.orm
from optuna.storages import RDBStorage
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import FrozenTrial, TrialState

from sweeper.errors import StorageError, StudyError, first_line
from sweeper.study import storage as st
from sweeper.study.ladder import Cell, cells
from sweeper.study.lease import HEARTBEAT_S, HeldLease, LeaseLost
from sweeper.study.own_code import code_fingerprints, function_honours
from sweeper.study.samplers import RUNS_DONE, cell_key, make_sampler
from sweeper.study.spec import ParamSpec, StudySpec, parse_study_toml
from sweeper.study.study_toml import spec_hash, study_toml

if TYPE_CHECKING:
    pass

__all__ = [
    "LAW_STOP",
    "OBJECTIVE_NAME",
    "BestPoint",
    "CellCounts",
    "CellStudy",
    "FencedStorage",
    "added_cells",
    "best_point",
    "cell_counts",
    "cell_studies",
    "delete_sweep",
    "failed_counts",
    "launched_sweeps",
    "law_progress",
    "open_runs",
    "open_sweep",
    "optuna_storage",
    "record_law_stop",
    "resolve_sweep_name",
    "stored_spec",
    "study_name",
    "sweep_cells",
    "sweep_status",
    "trial_runs",
]

logger = logging.getLogger(__name__)

#: what a cell study's trial value is (the name optuna-dashboard shows for the objective)
OBJECTIVE_NAME = "final val loss (nats), mean over seeds"
#: the sweep row's metadata key keeping why a law study's plan stopped (:func:`record_law_stop`)
LAW_STOP = "law_stop"
#: the trial system attribute naming the ask (or enqueue) that created the trial: one retried after
#: its answer was lost finds the trial its first try committed (:meth:`FencedStorage._new_trial`)
ASKED_BY = "sweeper_asked_by"


def study_name(sweep: str, cell: str) -> str:
    """The Optuna study of one cell: ``<sweep>/<cell>``."""
    return f"{sweep}/{cell}"


# ---- storage -----------------------------------------------------------------------------------
_storages: dict[str, RDBStorage] = {}


def _engine_kwargs(url: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 60}
    return kwargs


def optuna_storage(url: str | None = None) -> RDBStorage:
    """A cached Optuna RDBStorage on ``url`` (Optuna creates its tables beside Sweeper's)."""
    url = st.resolve_url(url)
    st.get_engine(url)  # (a missing SQLite file is refused there: Optuna would create it)
    if url in _storages:
        return _storages[url]
    # Optuna logs every study it creates at INFO on its own handler; the CLI reports progress itself
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        storage = st.created(lambda: RDBStorage(url, engine_kwargs=_engine_kwargs(url)))
    except (sa.exc.SQLAlchemyError, ModuleNotFoundError, ValueError, ImportError) as e:
        raise StorageError(
            f"cannot open storage {st.safe_url(url)!r}: {st.error_line(e, url)}"
        ) from None
    _storages[url] = storage
    return storage


class FencedStorage(RDBStorage):
    """An Optuna RDBStorage whose every write transaction checks the driver's lease first.

    Optuna writes through sessions of its ``scoped_session`` and commits each call (an ask, a
    tell, a report, an attribute) as one transaction. A ``before_commit`` listener runs
    :meth:`HeldLease.fence <sweeper.study.lease.HeldLease.fence>` in that transaction when it
    wrote anything (pending or flushed ORM changes, or a bulk statement): a driver whose lease was
    taken over raises :class:`~sweeper.study.lease.LeaseLost` there, and Optuna rolls the whole
    transaction back. Reads are not checked. One instance per launch (its own engine), disposed
    with :meth:`close`.
    """

    def __init__(self, url: str, held: HeldLease) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        super().__init__(url, engine_kwargs=_engine_kwargs(url), skip_compatibility_check=True)
        self._held = held
        maker = sa.orm.sessionmaker(bind=self.engine)
        sa.event.listen(maker, "after_flush", self._wrote)
        sa.event.listen(maker, "do_orm_execute", self._bulk)
        sa.event.listen(maker, "before_commit", self._fence)
        sa.event.listen(maker, "after_commit", self._forget)
        sa.event.listen(maker, "after_rollback", self._forget)
        self.scoped_session = sa.orm.scoped_session(maker)

    def __getstate__(self) -> dict[Any, Any]:  # never shipped anywhere: the fence stays here
        raise TypeError("a FencedStorage belongs to its launch and cannot be pickled")

    @staticmethod
    def _wrote(session: sa.orm.Session, _ctx: Any) -> None:
        session.info["sweeper_wrote"] = True

    @staticmethod
    def _bulk(state: Any) -> None:
        if state.is_insert or state.is_update or state.is_delete:
            state.session.info["sweeper_wrote"] = True

    @staticmethod
    def _forget(session: sa.orm.Session) -> None:
        # the flag belongs to one transaction (Optuna reuses one session per thread)
        session.info.pop("sweeper_wrote", None)

    def _fence(self, session: sa.orm.Session) -> None:
        wrote = session.info.get("sweeper_wrote", False)
        if wrote or session.new or session.dirty or session.deleted:
            self._held.fence(session)

    def close(self) -> None:
        self.scoped_session.remove()
        self.engine.dispose()

    def _retrying(
        self, what: str, call: Callable[[], Any], landed: Callable[[], Any] | None = None
    ) -> Any:
        """``call()``, retried while the database is unreachable (a lost connection, logins
        refused), for as long as the lease's heartbeat tolerates it (``stale_after_s``); then
        the lease is given up as the heartbeat gives it up (:class:`LeaseLost`: the launch stops
        its trials and exits with the reason) instead of a crash in the middle of a tell. Any
        other error is raised at once (a fencing refusal, a finished trial, a bad write). Every
        storage call of a launch comes here (:data:`_RETRIED`). A write whose commit may have
        reached the database before its answer was lost asks ``landed()`` before trying again:
        not None is the first try's result (an ask finds its trial, a tell its trial told)."""
        held, waited, pause = self._held, 0.0, 0.5
        while True:
            try:
                if waited and landed is not None and (done := landed()) is not None:
                    return done
                return call()
            except KeyError:
                # Optuna's "Record does not exist": the trial or study was deleted under the
                # launch, as another driver's --force-new --takeover deletes the sweep; with the
                # lease gone that is the lease lost (it had ended in Tune's traceback)
                if held.lost.is_set() or not _still_held(held):
                    raise LeaseLost(held.why) from None
                raise
            except optuna.exceptions.StorageInternalError as e:
                self._unreachable_for(what, e, waited)
                time.sleep(pause)
                waited += pause
                pause = min(2 * pause, HEARTBEAT_S / 3)

    def _unreachable_for(self, what: str, e: Exception, waited: float) -> None:
        """Return when ``e`` is the storage out of reach and may be waited out longer; else
        raise it, or :class:`LeaseLost` (the lease lost, or the wait past ``stale_after_s``)."""
        held = self._held
        if held.lost.is_set():
            raise LeaseLost(held.why) from None
        if not _unreachable(e):
            raise e
        if waited >= held.stale_after_s:
            held.mark_lost(
                f"sweep {held.sweep!r}: the storage was unreachable for {waited:.0f} s "
                f"({what}); another driver may have taken it over"
            )
            raise LeaseLost(held.why) from None
        if waited == 0.0:
            logger.warning(
                "sweep %s: the storage is unreachable (%s: %s); retrying for up to %.0f s",
                held.sweep,
                what,
                st.redact(first_line(e.__cause__)),
                held.stale_after_s,
            )

    def _create_new_trial(
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        """Optuna's, tried once per :meth:`_retrying` round (Optuna's own five tries would make a
        second trial when a commit's answer is lost): the trial is stamped with this call's id
        (:data:`ASKED_BY`) in the same transaction, and a retry first looks for it."""
        token = uuid.uuid4().hex
        return self._retrying(
            "create_new_trial",
            lambda: self._new_trial(study_id, template_trial, token),
            landed=lambda: self._asked_trial(study_id, token),
        )

    def _new_trial(self, study_id: int, template: FrozenTrial | None, token: str) -> FrozenTrial:
        with _create_scoped_session(self.scoped_session) as session:
            # (the study row locked: the trial numbers are counted in this transaction)
            models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
            if template is None:
                trial = self._get_prepared_new_trial(study_id, None, session)
                stamp = json.dumps(token)
                session.add(models.TrialSystemAttributeModel(
                    trial_id=trial.trial_id, key=ASKED_BY, value_json=stamp
                ))  # fmt: skip
            else:  # Optuna writes a template's attributes while the trial is still RUNNING
                stamped = copy.copy(template)
                stamped.system_attrs = {**template.system_attrs, ASKED_BY: token}
                trial = self._get_prepared_new_trial(study_id, stamped, session)
            return self._build_frozen_trial_from_trial_model(trial)

    def _asked_trial(self, study_id: int, token: str) -> FrozenTrial | None:
        """The trial of ``study_id`` stamped with ``token`` (None: its commit was lost)."""
        t, a = models.TrialModel, models.TrialSystemAttributeModel
        with _create_scoped_session(self.scoped_session) as session:
            stamped = a.key == ASKED_BY, a.value_json == json.dumps(token)
            trial = (
                session.query(t)
                .join(a, a.trial_id == t.trial_id)
                .filter(t.study_id == study_id, *stamped)
                .one_or_none()
            )
            return None if trial is None else self._build_frozen_trial_from_trial_model(trial)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """Optuna's, retried; a retry after a lost answer first reads whether the trial already
        holds ``state`` and ``values`` (its tell landed: a second one would be refused)."""

        def landed() -> bool | None:
            t = RDBStorage.get_trial(self, trial_id)
            told = t.state == state and (values is None or t.values == list(values))
            return True if told else None

        def call() -> bool:
            return RDBStorage.set_trial_state_values(self, trial_id, state, values)

        return self._retrying("set_trial_state_values", call, landed)


def _still_held(held: HeldLease) -> bool:
    """Whether the lease is still ours, True when the storage cannot say (the heartbeat tells
    later, as it does for its own checks)."""
    try:
        return held.check()
    except Exception:
        return True


def _unreachable(e: BaseException) -> bool:
    """Whether a storage error is the database being out of reach (its connection lost, or
    refused), not a bad write."""
    cause = e.__cause__
    if isinstance(cause, sa.exc.DBAPIError) and cause.connection_invalidated:
        return True
    # PendingRollbackError: a statement after the connection was lost in the same transaction
    # (Optuna's _get_trials queries again after an OperationalError)
    return isinstance(
        cause, sa.exc.OperationalError | sa.exc.InterfaceError | sa.exc.PendingRollbackError
    )


def _retried(name: str) -> Callable[..., Any]:
    base = getattr(RDBStorage, name)

    @functools.wraps(base)
    def call(self: FencedStorage, *args: Any, **kwargs: Any) -> Any:
        return self._retrying(name, lambda: base(self, *args, **kwargs))

    return call


#: every RDBStorage method that runs one transaction, all a launch calls through Optuna (its
#: _CachedStorage calls the private ones) or itself: retried through an outage (FencedStorage.
#: _retrying). The composites (create_new_trial, set_trial_param, get_all_trials, get_best_trial)
#: retry their transactions; _create_new_trial and set_trial_state_values are FencedStorage's
#: own, which check whether a lost answer's write landed; the others write nothing, or the same
#: row again (an upsert, an insert whose duplicate Optuna ignores; a second create_new_study is
#: DuplicatedStudyError, which create_study(load_if_exists=True) loads). delete_study is left
#: out: a launch deletes through optuna_storage, and a second delete would raise KeyError.
_RETRIED = (
    "create_new_study",
    "set_study_user_attr",
    "set_study_system_attr",
    "get_study_id_from_name",
    "get_study_name_from_id",
    "get_study_directions",
    "get_study_user_attrs",
    "get_study_system_attrs",
    "get_all_studies",
    "_set_trial_param",
    "get_trial_param",
    "set_trial_intermediate_value",
    "set_trial_user_attr",
    "set_trial_system_attr",
    "get_trial_user_attrs",
    "get_trial_system_attrs",
    "get_trial_id_from_study_id_trial_number",
    "get_trial",
    "_get_trials",
    "_get_best_trial_id",
    "record_heartbeat",
    "_get_stale_trial_ids",
)
for _name in _RETRIED:
    setattr(FencedStorage, _name, _retried(_name))


# ---- the sweep row -----------------------------------------------------------------------------
def study_meta(spec: StudySpec, cell_list: list[Cell]) -> dict[str, Any]:
    """What a sweep's row records of its study (the model, the data, the design): what the laws'
    conventions are read from, for a launched sweep and an imported one with its study alike."""
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
        **({"honours": function_honours(spec)} if spec.train.function else {}),
    }


@dataclass(frozen=True)
class CellStudy:
    """A cell with its Optuna study (sampler set for this launch) and its index in the ladder."""

    cell: Cell
    study: optuna.Study
    index: int


def open_sweep(
    spec: StudySpec,
    url: str | None = None,
    *,
    force_new: bool = False,
    storage: RDBStorage | None = None,
    held: HeldLease | None = None,
    code_changed: bool = False,
) -> list[CellStudy]:
    """Create or load the sweep's row and every cell's study; refuse a changed study, and a
    changed model builder or training function unless ``code_changed`` (:func:`_check_code`).

    A sweep of the same name launched from a study that measures something else (other
    :func:`~sweeper.study.study_toml.spec_hash`) raises StorageError unless ``force_new``, which deletes that
    sweep's cell studies and row first. A study that differs only in what the hash leaves out
    (``trials_per_cell``, the sampler's ``n_startup_trials`` and ``max_pending_per_cell``, storage,
    resources, description) extends the sweep: its resolved file replaces the stored one, so that
    raising ``trials_per_cell`` and relaunching adds the missing trials. So does a study whose
    ladder holds every cell of the stored one and more, with all else the same (:func:`added_cells`):
    the new cells get their studies, the old ones keep theirs.

    ``held``: the launch's lease; the sweep row is then written only while it holds (fenced in the
    same transaction), and ``storage`` (a :class:`FencedStorage` of that lease) opens the cell
    studies, so that every later write of the launch is fenced too.
    """
    cell_list = cells(spec)
    url = st.resolve_url(url)
    st.get_engine(url, new=True)  # a launch creates the database
    existing = _existing_row(spec, url, force_new=force_new, held=held)
    code = code_fingerprints(spec)
    new_code = existing is not None and _check_code(spec, existing, code, url, code_changed)
    _write_row(spec, url, cell_list, existing, code, held=held, new_code=new_code)
    storage = storage or optuna_storage(url)
    out = []
    for i, cell in enumerate(cell_list):
        study = optuna.create_study(
            study_name=study_name(spec.name, cell.name),
            storage=storage,
            direction="minimize",
            load_if_exists=True,
        )
        _name_objective(study)
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


def _name_objective(study: optuna.Study) -> None:
    """Name the cell study's objective (optuna-dashboard labelled it "Objective 0"); the call is
    experimental in Optuna 5 and warns, which says nothing to a Sweeper user."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if study.metric_names != [OBJECTIVE_NAME]:
            study.set_metric_names([OBJECTIVE_NAME])


def _existing_row(
    spec: StudySpec, url: str, *, force_new: bool, held: HeldLease | None = None
) -> dict[str, Any] | None:
    """The stored row of the sweep ``spec`` names, when the study may continue it: the same
    measurement, or the same with more cells. None when there is none, or when one launched
    from another study was deleted: it held no trial yet, or ``force_new``. StorageError when it
    holds something else."""
    existing = st.get_sweep(spec.name, url)
    if existing is None:
        return None
    if existing["kind"] != "launched":
        raise StorageError(
            f"sweep {spec.name!r} in {st.safe_url(url)} holds imported runs; "
            "choose another sweep.name"
        )
    h = spec_hash(spec)
    if existing["spec_hash"] == h or _stored_hash(existing) == h:
        return existing
    added = added_cells(_stored_spec_or_none(existing), spec)
    if added:
        logger.warning(
            "sweep %s: ladder extended by %d cell(s): %s", spec.name, len(added), ", ".join(added)
        )
        return existing
    if _same_law_target(_stored_spec_or_none(existing), spec, url):
        return existing
    stored = _stored_spec_or_none(existing)
    changed = study_changes(stored, spec, recorded=_recorded(stored, spec, url))
    if not force_new and not _holds_trials(spec.name, url):
        logger.warning(
            "sweep %s holds no trials (its last launch stopped before the first): replaced by "
            "this study%s", spec.name, f" ({changed})" if changed else ""
        )  # fmt: skip
    elif not force_new and (hint := _default_search_keys(stored, spec) or _more_lrs(stored, spec)):
        raise StorageError(
            f"sweep {spec.name!r} in {st.safe_url(url)} was launched from a different study "
            f"file ({changed}): {hint}"
        )
    elif not force_new:
        raise StorageError(
            f"sweep {spec.name!r} in {st.safe_url(url)} was launched from a different study "
            f"file{f' ({changed})' if changed else ''}; relaunch it with the same study "
            f"({_allowed_growth(spec)}), choose another sweep.name, or pass --force-new to "
            "delete its trials and start again"
        )
    delete_sweep(spec.name, url, held=held)
    return None


def _recorded(stored: StudySpec | None, spec: StudySpec, url: str) -> dict[str, float] | None:
    """The default target a law sweep's first launch recorded (None for another sampler), for
    :func:`study_changes` to name as the old value ("'(none)' -> 500000.0" had hidden it)."""
    if stored is None or stored.sampler.kind != "law" or stored.target is not None:
        return None
    from sweeper.run.law_plan import recorded_target  # (run imports study)

    return recorded_target(cell_studies(spec.name, url))


def _default_search_keys(stored: StudySpec | None, spec: StudySpec) -> str:
    """How to relaunch when the studies differ only by ``[search]`` keys fixed at the value the
    runs used anyway (``warmup = 0.1`` written in one, left out of the other), "" otherwise. A
    written key is a one-value parameter Optuna records in every trial, so the grids differ and
    the sweep cannot continue under the other file; the message had offered only --force-new,
    which deletes the trials (a launch audit)."""
    if stored is None:
        return ""
    old, new = dict(stored.search.items()), dict(spec.search.items())
    if spec_hash(replace(stored, search=spec.search)) != spec_hash(spec):
        return ""  # (something else changed too)
    keys = sorted(set(old) ^ set(new))
    if not keys or any(old[k] != new[k] for k in set(old) & set(new)):
        return ""
    added = [k for k in keys if k in new]
    if not all(_at_default(k, (new if k in new else old)[k], spec) for k in keys):
        return ""
    if added:
        return (
            f"[search] {', '.join(added)} written at the value its runs used: a [search] key, even "
            "at its default, is a one-value searched parameter of every trial, so the grids "
            f"differ; delete {' and '.join(added)} from [search] to relaunch the sweep"
        )
    gone = ", ".join(keys)
    return (
        f"the sweep was launched with [search] {gone} written at its default, a one-value "
        f"searched parameter of every trial; write {gone} back into [search] to relaunch it"
    )


def _more_lrs(stored: StudySpec | None, spec: StudySpec) -> str:
    """How to add LR values to a grid sweep (its grid ids would change, so in place is refused):
    a sweep of their own, joined for the fits; "" unless that is the only change (the message
    had offered only --force-new, which deletes the trials: a launch audit)."""
    if stored is None or stored.search.lr.values is None or spec.search.lr.values is None:
        return ""
    old, new = set(stored.search.lr.values), set(spec.search.lr.values)
    if not old < new or spec_hash(replace(spec, search=stored.search)) != spec_hash(stored):
        return ""
    added = ", ".join(f"{v:g}" for v in sorted(new - old))
    return (
        f"a grid's LRs cannot grow in place; launch the new ones ({added}) as a sweep of their own "
        f"(another sweep.name, the same study otherwise) and fit the two joined: `sweeper fit "
        f"{spec.name}+NEW` (docs/STUDY.md, 'What a relaunch may change')"
    )


def _at_default(name: str, p: ParamSpec, spec: StudySpec) -> bool:
    """Whether the search parameter ``name`` is fixed at the value a run takes without it."""
    from proxy_models.hparams import HParams

    if not p.is_fixed or p.values is None:
        return False
    defaults = {f.name: f.default for f in dataclass_fields(HParams)}
    default = spec.train.schedule if name == "schedule" else defaults.get(name)
    return default is not None and p.values[0] == default


def _same_law_target(stored: StudySpec | None, spec: StudySpec, url: str) -> bool:
    """A law study whose ``[target]`` is written out as the default the first launch recorded
    is the same study ("writing a key at its default is the same study"; an audit's explicit
    default had been refused as a changed study file)."""
    if stored is None or spec.sampler.kind != "law":
        return False
    from sweeper.run.law_plan import recorded_target, same_resolved_target  # (run imports study)

    return same_resolved_target(stored, spec, recorded_target(cell_studies(spec.name, url)))


def _check_code(
    spec: StudySpec, existing: Mapping[str, Any], now: Mapping[str, str], url: str, accept: bool
) -> bool:
    """Whether the user's own code the study names (:func:`~sweeper.study.own_code.
    code_fingerprints`) differs from the code the sweep's first runs measured. Refused
    (StorageError) unless ``accept``: the old runs and the new code's would be fitted as one law
    (an audit's changed optimizer setting went into the old sweep with only a warning). Accepted,
    the runs are kept and the new code recorded (once: later relaunches compare with it)."""
    first = existing["meta"].get("code") or {}
    changed = [k for k in first if k in now and now[k] != first[k]]
    if not changed:
        return False
    what = " and ".join(
        f"{k} ({getattr(getattr(spec, k.split('.')[0]), k.split('.')[1])})" for k in changed
    )
    if not accept:
        raise StorageError(
            f"sweep {spec.name!r} in {st.safe_url(url)}: the code of {what} changed since the "
            "sweep's first runs (its module's file is compared, not what it imports): they "
            "would be fitted with the new code's runs as one law; launch the new code under "
            "another sweep.name, pass --force-new to delete this sweep's runs and start again, "
            "or --code-changed if the change does not alter what the runs measure (a crash "
            "fixed, a log line): the runs are kept and the new code recorded"
        )
    logger.warning(
        "sweep %s: the code of %s changed since the sweep's first runs; kept (--code-changed): "
        "the runs so far are counted as the new code's", spec.name, what,
    )  # fmt: skip
    return True


def _allowed_growth(spec: StudySpec) -> str:
    """What a relaunch may change of a launched study (what the hash leaves out, or a larger
    ladder), in the words of the study's sampler."""
    if spec.sampler.kind == "law":
        return (
            "more cells in its ladder, a larger sampler.budget_runs or another "
            "sampler.stop_lr_interval_ratio are allowed; [target] is fixed once launched"
        )
    return "more cells in its ladder, or more trials_per_cell, are allowed"


def _holds_trials(name: str, url: str) -> bool:
    """Whether any cell study of the sweep holds a trial, in any state (a launch that could not
    join Ray, or found no node to run a trial, leaves the sweep registered with none)."""
    return any(s.get_trials(deepcopy=False) for s in cell_studies(name, url))


def _write_row(
    spec: StudySpec,
    url: str,
    cell_list: list[Cell],
    existing: Mapping[str, Any] | None,
    code: Mapping[str, str],
    *,
    held: HeldLease | None = None,
    new_code: bool = False,
) -> None:
    """``code``: the study's own code's fingerprints, kept from the sweep's first launch (or
    replaced: ``new_code``, a change accepted by :func:`_check_code`).
    Insert the sweep's row, or bring a continued sweep's row up to date: same measurement, new
    target or sampler knobs (or a hash from an older Sweeper). The stored file is what the fits
    read, so it must be the current one; keys other modules added to the metadata (a transfer
    result) are kept."""
    # (a password in the study's storage URL is not copied into the database, where anyone who
    # reads the sweeps table, or the dashboard, would see it; the hash leaves storage out)
    stored = spec.sweep.storage
    masked = replace(spec, sweep=replace(spec.sweep, storage=st.safe_url(stored or "")))
    text = study_toml(masked if st.url_password(stored) else spec)  # (a URL without one as is)
    h, meta = spec_hash(spec), study_meta(spec, cell_list)
    if code and (existing is None or "code" not in existing["meta"] or new_code):
        # (the code its first runs measured: kept, and compared on relaunch)
        meta["code"] = dict(code)
    engine = st.get_engine(url)  # (open_sweep made the database)
    if existing is None:
        with engine.begin() as conn:
            if held is not None:
                held.fence(conn)
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
        return
    if (
        existing["spec_hash"] == h
        and existing["study_toml"] == text
        and all(existing["meta"].get(k) == v for k, v in meta.items())
    ):
        return
    with engine.begin() as conn:
        if held is not None:
            held.fence(conn)
        conn.execute(
            st.sweeps_table.update()
            .where(st.sweeps_table.c.name == spec.name)
            .values(
                spec_hash=h, study_toml=text, meta_json=json.dumps({**existing["meta"], **meta})
            )
        )
    logger.info("sweep %s: stored study file updated (same measurement)", spec.name)


def added_cells(old: StudySpec | None, new: StudySpec) -> list[str]:
    """The cells ``new`` adds to ``old`` when it is ``old`` with a larger ladder: every old cell
    kept and everything else measured the same (equal :func:`~sweeper.study.study_toml.spec_hash` once the
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


def study_changes(
    stored: StudySpec | None,
    spec: StudySpec,
    most: int = 4,
    *,
    recorded: Mapping[str, float] | None = None,
) -> str:
    """What ``spec`` changes of the ``stored`` study in what a sweep measures (the keys
    :func:`~sweeper.study.study_toml.spec_hash` covers), as ``key: old -> new`` joined by
    semicolons, at most ``most`` of them ("" when the stored study cannot be read).
    ``recorded``: the default ``[target]`` a law sweep's first launch recorded, the old value of
    a target the stored file left out."""
    import tomllib

    if stored is None:
        return ""
    old, new = (_flat(tomllib.loads(study_toml(x, operational=False))) for x in (stored, spec))
    if recorded is not None:  # (the default both sides run at, unless the new one writes one)
        default = {"target.params": recorded["n_params"], "target.tokens": recorded["tokens"]}
        old = {**default, **old}
        new = new if spec.target is not None else {**default, **new}
    keys = [k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    text = [f"{k}: {old.get(k, _default(stored, k))!r} -> {new.get(k, _default(spec, k))!r}"
            for k in keys[:most]]  # fmt: skip
    more = f"; +{len(keys) - most} more" if len(keys) > most else ""
    return "; ".join(text) + more


def _default(spec: StudySpec, key: str) -> Any:
    """The value of ``key`` ("train.optimizer") a study file leaves unwritten at its default: the
    spec's own (a changed optimizer read "'(none)' -> 'adafactor'", the default being adamw);
    "(none)" where the spec has no such field."""
    section, _, name = key.partition(".")
    value = getattr(getattr(spec, section, None), name, None) if name else None
    return "(none)" if value is None else value


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and not ({"low", "high", "values"} & set(v)):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


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


def delete_sweep(name: str, url: str | None = None, *, held: HeldLease | None = None) -> None:
    """Delete a launched sweep: its cell studies, its ``sweeper_sweeps`` row, the laws fitted to
    it, and its transfer checks (``<name>.transfer.<cell>``, and the older ``<name>.transfer``), all
    of which describe data that is gone."""
    url = st.resolve_url(url)
    storage = optuna_storage(url)
    names = (name, f"{name}.transfer", *_transfer_checks(name, url))
    prefixes = tuple(f"{n}/" for n in names)
    if held is not None:
        held.check()  # (Optuna's deletes are not fenced: refuse before, and fence the rows)
        if held.lost.is_set():
            raise LeaseLost(held.why)
    for sname in optuna.get_all_study_names(storage):
        if sname.startswith(prefixes):
            optuna.delete_study(study_name=sname, storage=storage)
    with st.transaction(url) as conn:
        if held is not None:
            held.fence(conn)
        for n in names:
            conn.execute(st.runs_table.delete().where(st.runs_table.c.sweep == n))
            conn.execute(st.laws_table.delete().where(st.laws_table.c.sweep == n))
            conn.execute(st.sweeps_table.delete().where(st.sweeps_table.c.name == n))


def _transfer_checks(name: str, url: str) -> list[str]:
    """The per-cell transfer checks ``<name>.transfer.<cell>`` with a sweep row or a stored law."""
    with st.get_engine(url).connect() as conn:
        found = {
            *conn.execute(sa.select(st.sweeps_table.c.name)).scalars(),
            *conn.execute(sa.select(st.laws_table.c.sweep).distinct()).scalars(),
        }
    return sorted(n for n in found if n.startswith(f"{name}.transfer."))


# ---- status ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellCounts:
    """Trials of one cell by state, and its best point (:func:`best_point`)."""

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
    #: of the FAIL trials, those a relaunch closed because their driver had stopped (killed,
    #: interrupted, its head lost): no run failed in them; their points ran again
    closed: int = 0
    #: training runs of the COMPLETE trials (:func:`trial_runs`): what the law sampler's
    #: ``budget_runs`` counts
    runs: int = 0
    #: the runs the best loss is the mean of (its point's seeds, over every trial at that point)
    best_runs: int = 0
    #: finished runs of the points still open (RUNNING or queued again): kept on their trial
    #: (:data:`~sweeper.study.samplers.RUNS_DONE`) and not run again; not yet in ``runs``
    runs_open: int = 0

    @property
    def finished(self) -> int:
        """COMPLETE + PRUNED: the trials that count against the target."""
        return self.complete + self.pruned

    @property
    def done(self) -> bool:
        return self.finished >= self.target


def trial_runs(trial: optuna.trial.FrozenTrial) -> int:
    """The training runs a finished trial holds: one per seed recorded (one for a trial from
    before per-seed records)."""
    return max(1, len(trial.user_attrs.get("runs") or []))


def open_runs(trial: optuna.trial.FrozenTrial) -> int:
    """The finished runs an open (RUNNING or WAITING) trial holds: its seeds that finished while
    others ran, or before its driver stopped (0 for a finished trial: its runs are its own)."""
    if trial.state not in (TrialState.RUNNING, TrialState.WAITING):
        return 0
    return len(trial.user_attrs.get(RUNS_DONE) or [])


@dataclass(frozen=True)
class BestPoint:
    """A cell's best point: its mean final loss over ``runs`` runs at one LR and batch size."""

    loss: float
    lr: float
    batch_size: int
    runs: int


def best_point(trials: Sequence[optuna.trial.FrozenTrial]) -> BestPoint | None:
    """The point (LR, batch size) with the lowest mean final loss over every run of its COMPLETE
    trials, whatever the trials it took: the law sampler runs one seed a trial and re-runs an
    LR, and one lucky run was shown as the best though the LR's mean was worse. A point with a
    diverged run bounds the range and is no best, as an imported sweep's
    (:func:`sweeper.study.importer.imported_status`)."""
    losses: dict[tuple[float, int], list[float]] = {}
    bound: set[tuple[float, int]] = set()
    for t in trials:
        if t.state != TrialState.COMPLETE or t.value is None:
            continue
        key = (float(t.params["lr"]), int(t.params["batch_size"]))
        if t.user_attrs.get("diverged"):
            bound.add(key)
        losses.setdefault(key, []).extend(_run_losses(t))
    means = [(sum(v) / len(v), k, len(v)) for k, v in losses.items() if k not in bound and v]
    if not means:
        return None
    loss, (lr, batch), n = min(means)
    return BestPoint(loss, lr, batch, n)


def _run_losses(trial: optuna.trial.FrozenTrial) -> list[float]:
    """The final losses of a COMPLETE trial's runs (its value for a trial from before per-seed
    records)."""
    runs = trial.user_attrs.get("runs") or []
    got = [float(r["loss"]) for r in runs if r.get("loss") is not None]
    return [v for v in got or [float(trial.value)] if math.isfinite(v)]  # type: ignore[arg-type]


def cell_counts(study: optuna.Study, target: int, cell: str | None = None) -> CellCounts:
    trials = study.get_trials(deepcopy=False)
    by = {s: 0 for s in TrialState}
    for t in trials:
        by[t.state] += 1
    best = best_point(trials)
    return CellCounts(
        cell=cell or study.user_attrs.get("cell") or study.study_name.split("/", 1)[-1],
        complete=by[TrialState.COMPLETE],
        running=by[TrialState.RUNNING],
        failed=by[TrialState.FAIL],
        pruned=by[TrialState.PRUNED],
        waiting=by[TrialState.WAITING],
        target=target,
        best_loss=None if best is None else best.loss,
        best_lr=None if best is None else best.lr,
        best_batch_size=None if best is None else best.batch_size,
        closed=sum(t.state == TrialState.FAIL and "closed_by" in t.user_attrs for t in trials),
        runs=sum(trial_runs(t) for t in trials if t.state == TrialState.COMPLETE),
        best_runs=0 if best is None else best.runs,
        runs_open=sum(open_runs(t) for t in trials),
    )


def failed_counts(failed: int, closed: int) -> tuple[tuple[int, str], tuple[int, str]]:
    """A cell's FAIL trials as said (``status``, a launch's summary and progress): the trials a
    relaunch closed because their driver stopped apart from the failed runs, never added to
    them (no run of theirs failed, and their points ran again)."""
    return (failed - closed, "failed"), (closed, "closed when their driver stopped")


def launched_sweeps(url: str | None = None) -> list[str]:
    """Names of the launched sweeps in the storage, oldest first."""
    return [r["name"] for r in st.list_sweeps(url) if r["kind"] == "launched"]


def resolve_sweep_name(name: str | None, url: str | None = None) -> str:
    """``name`` if it is a sweep in the storage (launched or imported), or the only launched one
    when ``name`` is None."""
    url = st.resolve_url(url)
    names = launched_sweeps(url)
    if name is None:
        if len(names) == 1:
            return names[0]
        if not names:
            raise StorageError(f"no launched sweep in {st.safe_url(url)}")
        raise StorageError(f"several sweeps in {st.safe_url(url)}; name one of: {', '.join(names)}")
    if name not in names and st.get_sweep(name, url) is None:
        raise st.no_sweep(name, url)
    return name


def stored_spec(name: str, url: str | None = None) -> StudySpec:
    """The study a sweep was launched from, as stored with it."""
    row = st.get_sweep(name, url)
    if row is None:
        raise st.no_sweep(name, url)
    return parse_study_toml(row["study_toml"], source=f"sweep:{name}")


def cell_studies(name: str, url: str | None) -> list[optuna.Study]:
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
    return [dict(s.user_attrs) for s in cell_studies(name, url)]


def record_law_stop(
    name: str, url: str | None, stop: str, *, held: HeldLease | None = None
) -> None:
    """Keep why a law study's plan stopped (``stop``; "" while it goes on) in the sweep row's
    metadata (:data:`LAW_STOP`), for ``status``: written as a launch starts and as it ends,
    fenced by its lease ``held``."""
    row = st.get_sweep(name, url)
    if row is None or row["meta"].get(LAW_STOP, "") == stop:
        return
    meta = {**row["meta"], LAW_STOP: stop}
    with st.transaction(url) as conn:
        if held is not None:
            held.fence(conn)
        conn.execute(
            st.sweeps_table.update()
            .where(st.sweeps_table.c.name == name)
            .values(meta_json=json.dumps(meta))
        )


def law_progress(used: int, budget: int | None, stop: str = "") -> str:
    """A law study's overall progress in one line: runs used of ``budget_runs``, and why its plan
    stopped (the progress display, the launch summary and ``status`` all say it so)."""
    return f"law sampler: {used} of {budget} runs used" + (
        f"; its plan stopped: {stop}" if stop else ""
    )


def sweep_status(name: str, url: str | None = None) -> dict[str, Any]:
    """``{"sweep": name, "kind": "launched", "cells": [{cell, width, depth, tokens, complete,
    running, failed, closed (of the failed, those closed because their driver stopped), pruned,
    waiting, runs (of the COMPLETE trials), runs_open (finished runs of the points still open:
    :func:`open_runs`), target (None for the law sampler: its budget is the sweep's), best_loss,
    best_lr, best_batch_size, best_runs (the runs the best loss is the mean of: :func:`best_point`)
    }], "law": ...}``; ``law`` (None for other
    samplers): ``{budget_runs, runs_used, stop}`` (``stop``: why the plan stopped, as the last
    launch left it; "" while it goes on). For an imported sweep,
    :func:`sweeper.study.importer.imported_status`."""
    row = st.get_sweep(name, url)
    if row is not None and row["kind"] == "imported":
        from sweeper.study.importer import imported_status

        return imported_status(name, url, row)
    spec = None if row is None else _stored_spec_or_none(row)
    law = spec is not None and spec.sampler.kind == "law"
    rows = []
    for s in cell_studies(name, url):
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
                "closed": c.closed,
                "pruned": c.pruned,
                "waiting": c.waiting,
                "runs": c.runs,
                "runs_open": c.runs_open,
                "target": None if law else c.target,
                "best_loss": c.best_loss,
                "best_lr": c.best_lr,
                "best_batch_size": c.best_batch_size,
                "best_runs": c.best_runs,
            }
        )
    out: dict[str, Any] = {"sweep": name, "kind": "launched", "cells": rows, "law": None}
    if law and spec is not None and row is not None:
        out["law"] = {
            "budget_runs": spec.sampler.budget_runs,
            "runs_used": sum(r["runs"] for r in rows),
            "stop": str(row["meta"].get(LAW_STOP, "")),
        }
    return out

"""The Optuna side of a sweep's cells: the sampler each cell's study asks, and what a relaunch does
with the trials a dead driver left RUNNING (close them as FAIL and queue their points again;
Optuna's heartbeat does not work with ask/tell, so the launcher reconciles itself)."""

from __future__ import annotations

import logging
import warnings
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from sweeper.errors import StudyError
from sweeper.study.space import grid_values
from sweeper.study.spec import StudySpec

__all__ = [
    "CLOSED_BY",
    "PlannedOnlySampler",
    "cell_key",
    "grid_points_left",
    "kept_attrs",
    "make_sampler",
    "reconcile",
    "requeue_point",
]

logger = logging.getLogger(__name__)


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
        """The point the sampler gave ``trial`` (from its grid id), even when the trial holds
        none or part of it: its driver died before or between the suggests. {} when it has no
        grid id of this search space."""
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


class PlannedOnlySampler(BaseSampler):
    """The law sampler's per-cell sampler: it serves only enqueued trials.

    The searcher plans each point (:mod:`sweeper.fitting.allocation`) and enqueues it before it
    asks, so every searched parameter is fixed (one-value parameters need no sampler); an ask
    without a queued point is a bug, and this raises instead of drawing a random point."""

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, Any]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: Any
    ) -> Any:
        raise RuntimeError(
            f"{study.study_name}: the law sampler serves only planned (enqueued) points; "
            f"trial {trial.number} asked for {param_name!r} without one"
        )


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
    if s.kind == "law":
        return PlannedOnlySampler()
    if s.kind == "qmc":
        # the QMC sequence continues from the study's trial count, so the seed stays fixed
        with warnings.catch_warnings():  # "experimental" since Optuna 3.0; we pin its behaviour
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(
                seed=s.seed, warn_independent_sampling=False, warn_asynchronous_seeding=False
            )
    raise StudyError(f"sampler.kind: unknown sampler {s.kind!r}")


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


#: a trial's user attribute: the runs of its point's seeds that finished before the point did (a
#: driver stopped in between leaves them there; :func:`reconcile` queues them with the point)
RUNS_DONE = "runs_done"
#: a trial's user attributes that say what its point is, kept when the point is queued again
#: (:func:`kept_attrs`): why the law sampler planned it and the replicate it planned
KEPT_ATTRS: tuple[str, ...] = ("law_reason", "law_replicate")


def kept_attrs(trial: FrozenTrial | optuna.Trial) -> dict[str, Any]:
    """The attributes of ``trial`` (:data:`KEPT_ATTRS`) a point queued again keeps, so that
    ``sweeper trials`` still says why the law sampler planned a point a stopped driver left."""
    return {k: trial.user_attrs[k] for k in KEPT_ATTRS if k in trial.user_attrs}


def requeue_point(
    study: optuna.Study,
    params: Mapping[str, Any],
    waiting: list[dict[str, Any]] | None = None,
    runs_done: list[dict[str, Any]] | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> bool:
    """Queue ``params`` (a point whose trial was closed as FAIL) to be asked again, unless an
    identical WAITING trial is already queued and ``runs_done`` is empty. ``waiting``: the queued
    points, when the caller keeps them (updated in place). ``runs_done``: its seeds' runs that
    finished, queued with it (:data:`RUNS_DONE`) so that they are not run again; such a point is
    queued even beside an identical one (law replicates at one LR share their params, each with
    its own finished seeds). ``attrs``: user attributes the queued trial keeps (the closed
    trial's :func:`kept_attrs`: why the law sampler planned it). Returns whether a trial was
    queued."""
    point = dict(params)
    if not point:
        return False
    if waiting is None:
        waiting = _waiting_params(study)
    if point in waiting and not runs_done:  # (law replicates share params: each keeps its runs)
        return False
    user_attrs = {**(attrs or {}), **({RUNS_DONE: runs_done} if runs_done else {})}
    study.enqueue_trial(point, user_attrs=user_attrs or None)
    waiting.append(point)
    return True


def _point_of(trial: FrozenTrial, sampler: BaseSampler) -> dict[str, Any]:
    """The point a RUNNING trial was given, as far as it is known. ``ask`` writes the params one
    by one, so a driver killed before or between the suggests leaves part of it (or none): a queued
    point is whole in the trial's ``fixed_params``, a grid point is recovered from the trial's grid
    id (else the grid would count it visited, run another point twice and lose this one);
    otherwise the params written are all there is (the sampler chooses the rest when it is asked
    again)."""
    point = dict(trial.system_attrs.get("fixed_params", {}))
    if isinstance(sampler, _AskTellGridSampler):
        point.update(sampler.grid_point(trial))
    point.update(trial.params)
    return point


#: the cell study's user attribute holding the points held for the next launch (:func:`hold_point`)
HELD = "held_points"


def hold_point(study: optuna.Study, params: Mapping[str, Any]) -> None:
    """Keep ``params`` (a point whose run failed in the study's own code, or failed twice in
    this launch) to be queued by the next launch's :func:`reconcile`: a seeded run raises the
    same exception again, so asking it again in this launch would only fail again (and use up
    the cell's failures)."""
    point = dict(params)
    held = list(study.user_attrs.get(HELD) or [])
    if point and point not in held:
        study.set_user_attr(HELD, [*held, point])


#: the ``closed_by`` attribute of a trial :func:`reconcile` closed: its driver stopped (killed,
#: interrupted, its lease taken over) with the trial RUNNING; no run of it failed
CLOSED_BY = "reconcile: its driver stopped"


def reconcile(study: optuna.Study) -> list[dict[str, Any]]:
    """Close the RUNNING trials a stopped driver left (killed, or interrupted: a run it stopped
    is not told) as FAIL (``closed_by`` :data:`CLOSED_BY`) and queue their points again, after
    the points the last launch held (:func:`hold_point`).

    Returns the point of every closed trial, in order (:func:`_point_of`: the whole point where it
    is known, even when the driver died before or between the suggests). A trial with no point
    known (killed before its sampler chose anything) is returned as ``{}`` and not queued: the
    sampler asks a new point.
    Call it only when no other driver runs this sweep. A point is not queued twice (an identical
    WAITING trial is kept instead), unless it carries finished seeds (:func:`requeue_point`).
    """
    trials = study.get_trials(deepcopy=False)
    waiting = _waiting_params(study)
    # the points held by the last launch (failed in the study's code) are queued again first;
    # a driver killed between the two writes queues none twice (requeue_point skips a WAITING one)
    held = list(study.user_attrs.get(HELD) or [])
    for point in held:
        requeue_point(study, point, waiting)
    if held:
        study.set_user_attr(HELD, [])
        logger.info(
            "%s: %d point(s) that failed in the study's code queued again",
            study.study_name,
            len(held),
        )
    sampler = study.sampler
    closed: list[dict[str, Any]] = []
    for t in trials:
        if t.state != TrialState.RUNNING:
            continue
        study._storage.set_trial_user_attr(t._trial_id, "closed_by", CLOSED_BY)
        study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
        params = _point_of(t, sampler)
        closed.append(params)
        # (a no-op for {}; the point keeps why the law sampler planned it)
        requeue_point(study, params, waiting, t.user_attrs.get(RUNS_DONE), kept_attrs(t))
    if closed:
        logger.info(
            "%s: %d RUNNING trial(s) closed as FAIL, %d point(s) queued again",
            study.study_name,
            len(closed),
            sum(1 for p in closed if p),
        )
    return closed

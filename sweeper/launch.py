"""``sweeper launch``: one Ray Tune run over every cell of a study, Optuna choosing the trials.

The only module of Sweeper that imports ray. Ray Tune executes the runs; a searcher of our own
(:class:`CellSearcher`) routes each Ray trial to its cell's Optuna study with ask/tell, interleaving
the cells and capping the trials pending per cell (TPE and GP degrade into random search when they
ask for many points before seeing results; TPE also runs with ``constant_liar``). Everything is
recorded in the storage by the driver only (one writer, so SQLite is safe); workers just train.

One Ray trial is one training run: an (Optuna trial, seed) pair. An Optuna trial is told when all
its seeds have finished: COMPLETE with the mean final validation loss (diverged runs included, with
``diverged`` set: the fit uses them as range bounds), PRUNED when Ray's ASHA stopped one of its
runs, FAIL when a run still crashed after ``max_failures`` retries (with the grid sampler, a FAIL
point is queued to be asked again, since the grid would not revisit it). Per-seed results are kept
in the trial's ``runs`` user attribute (see :mod:`sweeper.sweep`).

Relaunching the same study resumes it: the target counts COMPLETE + PRUNED trials, RUNNING trials
of a killed driver are closed as FAIL and their points asked again, and nothing else is re-run.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from sweeper import storage as st
from sweeper.errors import StudyError
from sweeper.lease import sweep_lease
from sweeper.space import distributions, hparams_kwargs
from sweeper.study import StudySpec, check_spec
from sweeper.sweep import (
    CellCounts,
    CellStudy,
    aggregate_runs,
    cell_counts,
    grid_points_left,
    open_sweep,
    reconcile,
    requeue_point,
)

# Tune reads these when it is imported: no per-trial CSV/JSON/TensorBoard files (the storage is the
# record), workers keep the driver's working directory (relative data paths work), and no
# periodic "trial status" table. setdefault: a user's own settings win.
for _k, _v in (
    ("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1"),
    ("RAY_CHDIR_TO_TRIAL_DIR", "0"),
    ("RAY_AIR_NEW_OUTPUT", "0"),
    ("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0"),
):
    os.environ.setdefault(_k, _v)

import ray  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler  # noqa: E402
from ray.tune.search import Searcher  # noqa: E402

__all__ = ["CellSearcher", "LaunchSummary", "launch_study", "resolve_storage", "usable_cores"]

logger = logging.getLogger(__name__)

_METRIC = "loss"


@dataclass(frozen=True)
class LaunchSummary:
    """What one launch did. ``cells`` are the counts after the launch; ``runs_this_launch`` counts
    training runs (Ray trials) that finished or failed in this launch, ``points_this_launch`` the
    Optuna trials told; ``reconciled`` the stale RUNNING trials closed at the start."""

    sweep: str
    url: str
    cells: tuple[CellCounts, ...]
    wall_s: float
    runs_this_launch: int
    points_this_launch: int
    reconciled: int
    max_concurrent: int

    @property
    def done(self) -> bool:
        """Every cell reached its target."""
        return all(c.done for c in self.cells)


def usable_cores() -> int:
    """Cores this process may run on (``taskset``/cgroup affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def resolve_storage(spec: StudySpec, url: str | None = None) -> str:
    """The storage of a launch: ``url``, else ``$SWEEPER_STORAGE``, else the study's ``storage``,
    else ``sqlite:///sweeper.db`` (the environment wins over the file so that one study file can
    be run against several databases)."""
    return url or os.environ.get("SWEEPER_STORAGE") or spec.sweep.storage or st.DEFAULT_URL


# ---- the trainable (runs in Ray workers) ---------------------------------------------------------
_data_cache: dict[tuple[str, int], Any] = {}


def _load_data(source: str, vocab_size: int) -> Any:
    """TokenData, cached per worker process (actors are reused, so it is read once per worker)."""
    from proxy_models import load_data

    key = (source, vocab_size)
    if key not in _data_cache:
        _data_cache[key] = load_data(source, vocab_size=vocab_size)
    return _data_cache[key]


def run_trial(config: Mapping[str, Any]) -> None:
    """Ray Tune function trainable: one training run, reported to Tune.

    With ASHA it reports ``{"loss", "progress"}`` every ``eval_every`` steps, progress in percent of
    the steps and capped at 99 so that only the final report (``"final": True``, progress 100)
    counts as finished; a trial that Tune stops before that report was pruned.
    """
    from proxy_models import HParams, ProxyConfig, train
    from proxy_models.hparams import batch_sizes

    cfg = ProxyConfig(**config["model"])
    hp = HParams(**config["hparams"])
    data = _load_data(config["data"], cfg.vocab_size)
    total_steps = len(batch_sizes(hp, int(config["tokens"]), cfg.context))
    eval_every = config.get("eval_every")
    report = None
    if eval_every:

        def report(step: int, metrics: dict[str, float]) -> bool:
            if metrics.get("final") or not _periodic(step, eval_every, total_steps):
                # train() calls report once more when the run is over: forwarded to Tune, that
                # call would be a non-final result ASHA could STOP on, losing the final report
                # of a fully trained (or diverged) run and leaving it PRUNED
                return False
            tune.report(
                {
                    _METRIC: float(metrics["val_loss"]),
                    "progress": min(99.0, 100.0 * step / total_steps),
                    "final": False,
                    "step": step,
                    "tokens_seen": int(metrics["tokens"]),
                }
            )
            return False

    result = train(
        cfg,
        hp,
        tokens=int(config["tokens"]),
        data=data,
        seed=int(config["seed"]),
        device=config.get("device"),
        threads=int(config["threads"]),
        eval_batches=int(config["eval_batches"]),
        eval_every=eval_every,
        report=report,
    )
    out = result.to_dict()
    tune.report({_METRIC: float(result.val_loss), "progress": 100.0, "final": True, **out})


def _periodic(step: int, eval_every: int, total_steps: int) -> bool:
    """Whether ``train``'s report at ``step`` (steps done) is a periodic evaluation: every
    ``eval_every`` steps, never the last step. (The end-of-run call also carries ``final``, which
    tells a run that diverged exactly on an evaluation step apart.)"""
    return step % eval_every == 0 and step < total_steps


class _RetryCounter(tune.Callback):
    """Tells the searcher when Ray retries a crashed run (the searcher itself is not told)."""

    def __init__(self, searcher: CellSearcher) -> None:
        self.searcher = searcher

    def __getstate__(self) -> dict[str, Any]:  # pickled into Tune's state, never restored
        return {}

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.searcher.note_retry(trial.trial_id, _error_line(trial))

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.searcher.note_error(trial.trial_id, _error_line(trial))


def _error_line(trial: Any) -> str:
    """The last line of the trial's error (the exception), for the trial's user attributes."""
    text = ""
    try:
        path = trial.error_file
        if path and os.path.exists(path):
            with open(path) as f:
                text = f.read()
    except (OSError, AttributeError):
        pass
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else "error"


# ---- per-cell ASHA -----------------------------------------------------------------------------
class _PerCellASHA(FIFOScheduler):
    """One ASHA bracket per cell: losses of different cells are not comparable, so a w16 trial
    must never be stopped because a w64 trial reached a lower loss at the same rung."""

    def __init__(self, cell_names: list[str], *, grace: float, reduction_factor: float) -> None:
        super().__init__()
        self._metric = _METRIC
        # decide on every report as it arrives (buffered results would delay the stop)
        self._supports_buffered_results = False
        self._by_cell = {
            c: ASHAScheduler(
                time_attr="progress",
                metric=_METRIC,
                mode="min",
                max_t=100,
                grace_period=max(1, round(100 * grace)),
                reduction_factor=reduction_factor,
            )
            for c in cell_names
        }

    def _of(self, trial: Any) -> ASHAScheduler:
        return self._by_cell[trial.config["cell"]]

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return True

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if result.get("final"):
            return TrialScheduler.CONTINUE  # the run is over; let it end as COMPLETE
        return self._of(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        self._of(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        sched = self._of(trial)
        sched._trial_info.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        return "\n".join(f"{c}: {s.debug_string()}" for c, s in self._by_cell.items())


# ---- the searcher ------------------------------------------------------------------------------
@dataclass
class _Point:
    """One Optuna trial being evaluated: its seeds still to start, running, and finished."""

    cell: int
    trial: optuna.Trial
    to_start: list[int]
    live: set[str] = field(default_factory=set)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    failed: bool = False
    pruned: bool = False
    retries: int = 0
    reported: set[int] = field(default_factory=set)  # steps with an intermediate value


@dataclass
class _CellState:
    cs: CellStudy
    finished: int  # COMPLETE + PRUNED in the storage
    complete: int
    pruned: int
    failed: int
    running: int = 0  # Ray trials of this cell alive now
    open_points: int = 0  # asked, not yet told
    failed_now: int = 0  # points that failed in this launch
    grid_spent: bool = False  # grid sampler: every point asked, none queued
    best_loss: float | None = None
    best_lr: float | None = None
    best_batch: int | None = None


ProgressFn = Callable[["CellSearcher", int], None]


class CellSearcher(Searcher):
    """Routes Ray trials to the cells' Optuna studies with ask/tell.

    ``suggest`` picks the cell furthest behind its target (finished + open points, relative), so
    cells progress together and the largest one is not left for the end; it first starts the
    remaining seeds of open points, caps live Ray trials at ``max_concurrent`` and per cell at
    ``max_pending_per_cell`` (default: the concurrency spread over the unfinished cells), and
    returns ``FINISHED`` once every cell has its target or has given up (as many FAIL points in
    this launch as its target: a crash that repeats should not loop forever; relaunch to retry). ``on_progress(searcher, cell_index)`` is called after every finished run.
    """

    def __init__(
        self,
        spec: StudySpec,
        cell_studies: list[CellStudy],
        *,
        max_concurrent: int,
        base_config: Mapping[str, Any],
        on_progress: ProgressFn | None = None,
    ) -> None:
        super().__init__(metric=_METRIC, mode="min")
        self.spec = spec
        self.target = spec.trials_per_cell
        self.seeds = spec.sweep.seeds_per_point
        self.max_concurrent = max_concurrent
        self.max_pending = spec.sampler.max_pending_per_cell
        self.dists = distributions(spec.search)
        self.base_config = dict(base_config)
        self.on_progress = on_progress
        self.cells: list[_CellState] = []
        for cs in cell_studies:
            c = cell_counts(cs.study, self.target, cs.cell.name)
            self.cells.append(
                _CellState(
                    cs=cs,
                    finished=c.finished,
                    complete=c.complete,
                    pruned=c.pruned,
                    failed=c.failed,
                    best_loss=c.best_loss,
                    best_lr=c.best_lr,
                    best_batch=c.best_batch_size,
                )
            )
        self.points: dict[tuple[int, int], _Point] = {}
        self.by_ray: dict[str, tuple[tuple[int, int], int]] = {}
        self.failed_runs: dict[str, str] = {}  # Ray trial id -> "cell trial N seed S"
        self.live = 0
        self.runs_done = 0
        self.points_told = 0

    # Tune pickles its config (search_alg included) into the experiment folder; the storage is the
    # record and Tuner.restore is never used, so only a stub is pickled.
    def __getstate__(self) -> dict[str, Any]:
        return {"_metric": self._metric, "_mode": self._mode}

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        return None

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    # ---- choosing ----
    def _cell_cap(self) -> int:
        if self.max_pending is not None:
            return self.max_pending
        unfinished = sum(1 for c in self.cells if not self._cell_exhausted(c)) or 1
        return max(1, math.ceil(self.max_concurrent / unfinished))

    def _cell_exhausted(self, c: _CellState) -> bool:
        """No more points to ask in this cell (target covered by finished + open, or failing)."""
        return (
            c.finished + c.open_points >= self.target or c.failed_now >= self.target or c.grid_spent
        )

    def suggest(self, trial_id: str) -> dict[str, Any] | None:  # or Searcher.FINISHED
        if self.live >= self.max_concurrent:
            return None
        cap = self._cell_cap()
        # 1. remaining seeds of open points, oldest first
        for key, p in self.points.items():
            if p.to_start and self.cells[p.cell].running < cap:
                return self._dispatch(trial_id, key, p)
        # 2. a new point in the cell furthest behind
        order = sorted(
            range(len(self.cells)),
            key=lambda i: ((self.cells[i].finished + self.cells[i].open_points) / self.target, i),
        )
        for i in order:
            c = self.cells[i]
            if self._cell_exhausted(c) or c.running >= cap:
                continue
            if grid_points_left(c.cs.study) == 0:
                # asking now would repeat a point (Optuna's grid picks a random visited one)
                c.grid_spent = True
                logger.warning(
                    "%s: every grid point was asked and none is queued, but only %d of %d "
                    "trials finished; not asking a point twice",
                    c.cs.cell.name,
                    c.finished,
                    self.target,
                )
                continue
            # (every attribute is a storage commit: the cell is in the study's name and attributes)
            trial = c.cs.study.ask(self.dists)
            key = (i, trial.number)
            p = _Point(cell=i, trial=trial, to_start=list(range(self.seeds)))
            self.points[key] = p
            c.open_points += 1
            return self._dispatch(trial_id, key, p)
        if self.live == 0 and not self.points:
            return Searcher.FINISHED  # type: ignore[return-value]  # Tune's "no more trials" string
        return None

    def _dispatch(self, ray_id: str, key: tuple[int, int], p: _Point) -> dict[str, Any]:
        seed = p.to_start.pop(0)
        c = self.cells[p.cell]
        cell = c.cs.cell
        params = dict(p.trial.params)
        p.live.add(ray_id)
        self.by_ray[ray_id] = (key, seed)
        self.live += 1
        c.running += 1
        return {
            **self.base_config,
            "cell": cell.name,
            "trial_number": p.trial.number,
            "seed": seed,
            "params": params,
            "model": cell.proxy_config_kwargs(),
            "hparams": hparams_kwargs(self.spec, params),
            "tokens": cell.tokens,
        }

    # ---- results ----
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        entry = self.by_ray.get(trial_id)
        if entry is None or result.get("final") or _METRIC not in result:
            return
        self._report(self.points[entry[0]], entry[1], result)

    @staticmethod
    def _report(p: _Point, seed: int, result: Mapping[str, Any]) -> None:
        """An intermediate validation loss as the Optuna trial's intermediate value (seed 0's:
        Optuna keeps one value per step)."""
        step = int(result.get("step", result.get("training_iteration", 0)))
        value = result.get(_METRIC)
        if seed != 0 or step in p.reported or value is None or not math.isfinite(value):
            return
        p.reported.add(step)
        p.trial.report(float(value), step)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        entry = self.by_ray.pop(trial_id, None)
        if entry is None:
            return
        key, seed = entry
        p = self.points[key]
        c = self.cells[p.cell]
        p.live.discard(trial_id)
        self.live -= 1
        c.running -= 1
        if error:
            p.failed = True
            p.to_start.clear()
            self.failed_runs[trial_id] = f"{c.cs.cell.name} trial {p.trial.number} seed {seed}"
        elif result is None:
            p.to_start.insert(0, seed)  # removed before it started: start it again
            return
        else:
            p.runs[seed] = _run_record(result, seed, trial_id)
            if not result.get("final"):
                # Tune does not pass the result that made the scheduler stop the trial to
                # on_trial_result; it is the pruned trial's last intermediate value
                self._report(p, seed, result)
                p.pruned = True
                p.to_start.clear()
        self.runs_done += 1
        if not p.live and not p.to_start:
            self._tell(key, p)
        if self.on_progress is not None:
            self.on_progress(self, p.cell)

    def note_error(self, ray_id: str, error: str) -> None:
        """A run failed for good (after its retries); its trial is already told FAIL."""
        where = self.failed_runs.get(ray_id, "a trial")
        logger.warning(
            "%s failed after %d retries: %s", where, self.spec.resources.max_failures, error
        )

    def note_retry(self, ray_id: str, error: str) -> None:
        """Ray restarts a crashed run (``max_failures``): count it on the Optuna trial."""
        entry = self.by_ray.get(ray_id)
        if entry is None:
            return
        p = self.points[entry[0]]
        p.retries += 1
        p.trial.set_user_attr("retries", p.retries)
        p.trial.set_user_attr("last_error", error)
        logger.warning(
            "%s trial %d: run crashed, retrying (%s)",
            self.cells[p.cell].cs.cell.name,
            p.trial.number,
            error,
        )

    def _tell(self, key: tuple[int, int], p: _Point) -> None:
        c = self.cells[p.cell]
        runs = [p.runs[s] for s in sorted(p.runs)]
        if runs:
            p.trial.set_user_attr("runs", runs)
            for k, v in aggregate_runs(runs).items():
                p.trial.set_user_attr(k, v)
        study = c.cs.study
        if p.failed:
            study.tell(p.trial, state=TrialState.FAIL)
            c.failed += 1
            c.failed_now += 1
            # the grid counts a FAIL point as visited and would never ask it again: queue it
            # (asked again in this launch unless the cell gave up on failures, else at the next)
            if self.spec.sampler.kind == "grid" and requeue_point(study, p.trial.params):
                c.grid_spent = False
                logger.info(
                    "%s trial %d failed; its point is queued again", c.cs.cell.name, p.trial.number
                )
        elif p.pruned:
            study.tell(p.trial, state=TrialState.PRUNED)
            c.pruned += 1
            c.finished += 1
        else:
            value = sum(float(r["loss"]) for r in runs) / len(runs)
            study.tell(p.trial, value)
            c.complete += 1
            c.finished += 1
            if c.best_loss is None or value < c.best_loss:
                c.best_loss = value
                c.best_lr = float(p.trial.params["lr"])
                c.best_batch = int(p.trial.params["batch_size"])
        c.open_points -= 1
        self.points_told += 1
        del self.points[key]


def _run_record(result: Mapping[str, Any], seed: int, ray_id: str) -> dict[str, Any]:
    """The per-seed record kept in the trial's ``runs`` attribute (JSON-safe)."""
    rec: dict[str, Any] = {"seed": seed, "ray_trial_id": ray_id}
    if result.get("final"):
        for k in (
            "val_loss",
            "train_loss",
            "init_loss",
            "diverged",
            "stopped",
            "tokens",
            "steps",
            "wall_s",
            "tokens_per_s",
            "flops_per_s",
            "grad_norm_mean",
            "grad_norm_max",
            "device",
        ):
            rec[k] = result.get(k)
        rec["loss"] = result.get("val_loss")
    else:  # stopped by the scheduler: its last intermediate validation loss
        rec.update(
            loss=result.get(_METRIC),
            diverged=False,
            stopped=True,
            tokens=result.get("tokens_seen"),
            steps=result.get("step"),
            wall_s=result.get("time_total_s"),
            progress=result.get("progress"),
        )
    return rec


# ---- progress display --------------------------------------------------------------------------
class _Progress:
    """One line per cell (rich Live table on a terminal; plain lines per finished run otherwise)."""

    def __init__(self, sweep: str, cells: list[str], *, live: bool) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.sweep = sweep
        self.names = cells
        self.use_live = live and self.console.is_terminal
        self._live: Any = None

    def start(self, searcher: CellSearcher) -> None:
        if self.use_live:
            from rich.live import Live

            self._live = Live(self._table(searcher), console=self.console, refresh_per_second=4)
            self._live.start()
        else:
            for i in range(len(searcher.cells)):
                self.console.print(self._line(searcher, i))

    def update(self, searcher: CellSearcher, i: int) -> None:
        if self._live is not None:
            self._live.update(self._table(searcher))
        else:
            self.console.print(self._line(searcher, i))

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _line(self, s: CellSearcher, i: int) -> str:
        c = s.cells[i]
        best = (
            f"best {c.best_loss:.4f} (lr {c.best_lr:.3g}, batch {c.best_batch})"
            if c.best_loss is not None
            else "best -"
        )
        extra = f", {c.failed} failed" if c.failed else ""
        extra += f", {c.pruned} pruned" if c.pruned else ""
        return f"{self.sweep}/{c.cs.cell.name}: {c.finished}/{s.target} done{extra}; {best}"

    def _table(self, s: CellSearcher) -> Any:
        from rich.table import Table

        t = Table(title=f"sweep {self.sweep}", title_justify="left")
        t.add_column("cell", no_wrap=True, min_width=max(len(n) for n in self.names))
        for col in ("done", "running", "failed", "pruned", "best loss", "lr", "batch"):
            t.add_column(col, justify="right")
        for c in s.cells:
            t.add_row(
                c.cs.cell.name,
                f"{c.finished}/{s.target}",
                str(c.running),
                str(c.failed),
                str(c.pruned),
                "-" if c.best_loss is None else f"{c.best_loss:.4f}",
                "-" if c.best_lr is None else f"{c.best_lr:.3g}",
                "-" if c.best_batch is None else str(c.best_batch),
            )
        return t


# ---- launch ------------------------------------------------------------------------------------
def _quiet_ray(verbose: int) -> None:
    level = logging.INFO if verbose > 1 else logging.WARNING if verbose else logging.ERROR
    for name in ("ray", "ray.tune", "ray.train", "ray.air"):
        logging.getLogger(name).setLevel(level)
    if not verbose:
        warnings.filterwarnings("ignore", module=r"ray(\..*)?")


def _data_source(spec: StudySpec) -> str:
    data = spec.sweep.data
    if data == "builtin":
        return data
    path = os.path.abspath(os.path.expanduser(data))
    if not os.path.exists(path):
        raise StudyError(f"sweep.data: {data!r} not found", path=spec.source)
    return path


def _capacity(spec: StudySpec) -> int:
    """How many trials the Ray cluster can run at once with the study's resources per trial."""
    res = ray.cluster_resources()
    r = spec.resources
    n = math.floor(res.get("CPU", 0.0) / r.cpu + 1e-9) if r.cpu > 0 else 1_000_000
    if r.gpu > 0:
        n = min(n, math.floor(res.get("GPU", 0.0) / r.gpu + 1e-9))
    if n < 1:
        raise StudyError(
            f"resources: the Ray cluster ({res.get('CPU', 0):g} CPU, {res.get('GPU', 0):g} GPU) "
            f"cannot fit one trial of {r.cpu:g} CPU and {r.gpu:g} GPU",
            path=spec.source,
        )
    return n


def launch_study(
    spec: StudySpec,
    *,
    url: str | None = None,
    address: str | None = None,
    max_concurrent: int | None = None,
    force_new: bool = False,
    verbose: int = 0,
    progress: bool = True,
    takeover: bool = False,
) -> LaunchSummary:
    """Run (or resume) the sweep of ``spec`` until every cell has its target number of trials.

    ``url``: storage (see :func:`resolve_storage`). ``address``: join that Ray cluster instead of
    starting a local one (one CPU per usable core, no dashboard). ``max_concurrent``: live
    trials at most (default: the study's, else what the cluster fits). ``force_new``: replace a
    sweep of the same name launched from a different study. ``progress``: per-cell progress on
    stdout. ``takeover``: take the sweep from a driver that holds its lease (see
    :mod:`sweeper.lease`; only when that driver is gone). Raises StudyError / StorageError on bad
    input, LeaseHeld while another live driver runs the sweep; Ray is shut down afterwards if this
    call started it.
    """
    t0 = time.perf_counter()
    problems = check_spec(spec)
    if problems:
        raise StudyError(problems, path=spec.source)
    url = resolve_storage(spec, url)
    data = _data_source(spec)
    # one driver per sweep: reconcile below closes the RUNNING trials it finds, which is right only
    # when their driver is gone
    with sweep_lease(spec.name, url, takeover=takeover):
        return _launch_held(
            spec,
            url=url,
            data=data,
            address=address,
            max_concurrent=max_concurrent,
            force_new=force_new,
            verbose=verbose,
            progress=progress,
            t0=t0,
        )


def _launch_held(
    spec: StudySpec,
    *,
    url: str,
    data: str,
    address: str | None,
    max_concurrent: int | None,
    force_new: bool,
    verbose: int,
    progress: bool,
    t0: float,
) -> LaunchSummary:
    """:func:`launch_study` once the sweep's lease is held."""
    cell_studies = open_sweep(spec, url, force_new=force_new)
    reconciled = sum(len(reconcile(cs.study)) for cs in cell_studies)
    target = spec.trials_per_cell

    def summary(searcher: CellSearcher | None, n_conc: int) -> LaunchSummary:
        return LaunchSummary(
            sweep=spec.name,
            url=url,
            cells=tuple(cell_counts(cs.study, target, cs.cell.name) for cs in cell_studies),
            wall_s=time.perf_counter() - t0,
            runs_this_launch=0 if searcher is None else searcher.runs_done,
            points_this_launch=0 if searcher is None else searcher.points_told,
            reconciled=reconciled,
            max_concurrent=n_conc,
        )

    if all(cell_counts(cs.study, target).done for cs in cell_studies):
        logger.info("sweep %s: every cell has its %d trials; nothing to run", spec.name, target)
        return summary(None, 0)

    _quiet_ray(verbose)
    started_ray = False
    ray_dir = tempfile.mkdtemp(prefix="sweeper-ray-")
    display: _Progress | None = None
    searcher: CellSearcher | None = None
    n_conc = 0
    try:
        if not ray.is_initialized():
            log_level = (
                logging.INFO if verbose > 1 else logging.WARNING if verbose else logging.ERROR
            )
            if address:
                ray.init(address=address, logging_level=log_level, log_to_driver=verbose > 0)
            else:
                ray.init(
                    num_cpus=usable_cores(),
                    include_dashboard=False,
                    logging_level=log_level,
                    log_to_driver=verbose > 0,
                )
            started_ray = True
            logger.info("ray started in %.1f s", time.perf_counter() - t0)
        n_conc = max_concurrent or spec.resources.max_concurrent or _capacity(spec)
        r = spec.resources
        base_config = {
            "data": data,
            "threads": max(1, math.floor(r.cpu)),
            "device": None if r.gpu > 0 else "cpu",
            "eval_batches": spec.train.eval_batches,
            "eval_every": None,
        }
        scheduler: TrialScheduler | None = None
        if spec.pruner.kind == "asha":
            scheduler = _PerCellASHA(
                [cs.cell.name for cs in cell_studies],
                grace=spec.pruner.grace_fraction,
                reduction_factor=spec.pruner.reduction_factor,
            )
        display = (
            _Progress(spec.name, [cs.cell.name for cs in cell_studies], live=True)
            if progress
            else None
        )
        searcher = CellSearcher(
            spec,
            cell_studies,
            max_concurrent=n_conc,
            base_config=base_config,
            on_progress=display.update if display is not None else None,
        )
        if display is not None:
            display.start(searcher)
        trainable = tune.with_resources(_trainable_for(spec), {"cpu": r.cpu, "gpu": r.gpu})
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                metric=_METRIC,
                mode="min",
                search_alg=searcher,
                scheduler=scheduler,
                num_samples=-1,
                reuse_actors=True,
                trial_dirname_creator=lambda t: t.trial_id,
            ),
            run_config=tune.RunConfig(
                name=f"{spec.name}-{int(time.time())}",
                storage_path=ray_dir,
                verbose=0,
                failure_config=tune.FailureConfig(max_failures=r.max_failures),
                callbacks=[_RetryCounter(searcher)],
                log_to_file=False,
            ),
        )
        t_fit = time.perf_counter()
        tuner.fit()
        logger.info("tune ran in %.1f s", time.perf_counter() - t_fit)
    finally:
        if display is not None:
            display.stop()
        if started_ray:
            ray.shutdown()
        shutil.rmtree(ray_dir, ignore_errors=True)
    return summary(searcher, n_conc)


def _trainable_for(spec: StudySpec) -> Callable[[dict[str, Any]], None]:
    """The trainable; with ASHA, it evaluates ``pruner.reports`` times per run."""
    if spec.pruner.kind != "asha":
        return run_trial
    reports = spec.pruner.reports

    def run_trial_reporting(config: dict[str, Any]) -> None:
        batch = int(config["hparams"]["batch_size"])
        steps = max(1, int(config["tokens"]) // (batch * int(config["model"]["context"])))
        run_trial({**config, "eval_every": max(1, steps // reports)})

    run_trial_reporting.__name__ = "run_trial"
    return run_trial_reporting

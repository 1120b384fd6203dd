"""``sweeper launch``: one Ray Tune run over every cell of a study, Optuna choosing the trials.

Ray Tune executes the runs (:mod:`sweeper.run` is the only package of Sweeper that imports ray); a searcher of our own
(:class:`CellSearcher`) routes each Ray trial to its cell's Optuna study with ask/tell, interleaving
the cells and capping the trials pending per cell (TPE and GP degrade into random search when they
ask for many points before seeing results; TPE also runs with ``constant_liar``). Everything is
recorded in the storage by the driver only (one writer, so SQLite is safe); workers just train.

One Ray trial is one training run: an (Optuna trial, seed) pair. An Optuna trial is told when all
its seeds have finished: COMPLETE with the mean final validation loss (diverged runs included, with
``diverged`` set: the fit uses them as range bounds), PRUNED when ASHA (:mod:`sweeper.run.asha`)
stopped its first seed's run, FAIL when a run crashed after ``max_failures`` retries (with the grid or law sampler its
point is queued to be asked again, since the grid would not revisit it), or raised in the study's
own code (not retried: a seeded run raises it again; its point is held for the next launch). Per-seed results are kept
in the trial's ``runs`` user attribute (see :mod:`sweeper.study.sweep`).

Relaunching the same study resumes it: the target counts COMPLETE + PRUNED trials, RUNNING trials
of a killed driver are closed as FAIL and their points asked again, and nothing else is re-run.

One driver per sweep (:mod:`sweeper.study.lease`): the launch holds the sweep's lease, and every
write it makes goes through a :class:`~sweeper.study.sweep.FencedStorage` of that lease, so a
driver whose lease was taken over writes nothing more; it then stops its trials (a Tune stopper)
and :func:`launch_study` raises :class:`~sweeper.study.lease.LeaseLost` saying why.

A local launch keeps Ray on the loopback interface (see :func:`_start_ray`); ``address`` joins a
running cluster (``ray start``; docs/CLUSTER.md), where only the driver touches the storage.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Protocol

import ray
from optuna.trial import TrialState
from ray import tune
from ray.tune.schedulers import TrialScheduler

from sweeper.errors import StudyError, SweeperError, first_line
from sweeper.run.asha import PerCellASHA
from sweeper.run.law_plan import LawPlanner
from sweeper.run.progress import Progress
from sweeper.run.searcher import CellSearcher
from sweeper.run.trainable import (
    METRIC,
    base_config,
    device_kind,
    trainable_for,
    usable_cores,
)
from sweeper.study import storage as st
from sweeper.study.lease import HeldLease, LeaseLost, sweep_lease
from sweeper.study.own_code import USER_CODE_FIELDS, code_dirs
from sweeper.study.runs import DEVICE_PRECISION, device_kinds
from sweeper.study.samplers import reconcile
from sweeper.study.spec import (
    StudySpec,
    check_max_concurrent,
    check_spec,
    data_source,
    spec_origin,
)
from sweeper.study.sweep import (
    CellCounts,
    CellStudy,
    FencedStorage,
    cell_counts,
    delete_sweep,
    open_sweep,
    record_law_stop,
)

__all__ = [
    "USER_CODE_FIELDS",
    "CellSearcher",
    "LaunchSummary",
    "RayConnectError",
    "launch_study",
    "resolve_storage",
    "runtime_env_for",
    "usable_cores",
    "user_code_refs",
]

logger = logging.getLogger(__name__)


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
    #: why a law-sampler study's plan stopped ("" for other samplers, or while it goes on)
    plan_stop: str = ""
    #: the signal that stopped the launch ("SIGINT", "SIGTERM"; "" when it was not interrupted)
    interrupted: str = ""
    #: the law sampler's budget (None for other samplers: their targets are per cell)
    budget_runs: int | None = None
    #: the study runs code of its own (a model builder, a training function)
    own_code: bool = False

    def __str__(self) -> str:
        """What ``sweeper launch`` closes with (:func:`sweeper.cli.study.launch_text`), and why
        it stopped short when it did."""
        from sweeper.cli.study import launch_text

        return launch_text(self, ending=True)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter's display
        p.text(str(self))

    def __repr__(self) -> str:
        """One line (the dataclass's own ran to 1.5 KB of CellCounts; an API audit), its storage
        without the password (a notebook saves what it shows: the generated repr had shown it)."""
        state = (f"interrupted ({self.interrupted})" if self.interrupted
                 else "done" if self.done else "short")  # fmt: skip
        return (
            f"<LaunchSummary {self.sweep}: {self.runs_this_launch} run(s), "
            f"{self.points_this_launch} trial(s) in {self.wall_s:.1f} s; {len(self.cells)} "
            f"cell(s), {state}; url={st.safe_url(self.url)!r}>"
        )

    @property
    def done(self) -> bool:
        """Every cell reached its target, or (law sampler) the plan stopped: its cells' trial
        counts are only caps."""
        return bool(self.plan_stop) or all(c.done for c in self.cells)

    @property
    def runs_used(self) -> int:
        """Training runs of the COMPLETE trials in every cell (what ``budget_runs`` counts)."""
        return sum(c.runs for c in self.cells)

    def fix_hint(self, code_changed: str) -> str:
        """What to do after failed runs; ``code_changed`` is how the caller spells the option
        (--code-changed, code_changed=True): a study with code of its own is refused a relaunch
        once that code changed, and an own-model audit fixed its code and met the refusal."""
        out = "fix what failed, then relaunch to run those points again"
        if self.own_code:
            out += (f" (with {code_changed} if you fixed the study's model builder or training "
                    "function: its finished runs are kept)")  # fmt: skip
        return out

    def short(self, why: str = "") -> str:
        """What is left to run ("" when done), ``why`` said after the subject: the law sampler's
        runs used of its budget, else the cells short of their target."""
        if self.done:
            return ""
        if self.budget_runs is not None:
            return (
                f"the law sampler's plan has not ended{why}: {self.runs_used} of "
                f"{self.budget_runs} runs used"
            )
        short = [c.cell for c in self.cells if not c.done]
        return f"{len(short)} cell(s) short of their target{why}: {', '.join(short)}"


def resolve_storage(spec: StudySpec, url: str | None = None) -> str:
    """The storage of a launch: ``url``, else ``$SWEEPER_STORAGE``, else the study's ``storage``,
    else ``sqlite:///sweeper.db`` (the environment wins over the file so that one study file can
    be run against several databases). An empty ``url`` given is refused, as every verb refuses
    it (:func:`~sweeper.study.storage.resolve_url`): it had meant ./sweeper.db in silence."""
    if url is not None:
        return st.resolve_url(url)
    return os.environ.get("SWEEPER_STORAGE") or spec.sweep.storage or st.DEFAULT_URL


class _RetryCounter(tune.Callback):
    """Tells the searcher when Ray retries a crashed run (the searcher itself is not told), and
    lends it the error of a run that failed for good: Ray tells the searcher before its
    callbacks, and the searcher keeps the error on the trial before telling it FAIL."""

    def __init__(self, searcher: CellSearcher) -> None:
        self.searcher = searcher
        self.trials: dict[str, Any] = {}  # Ray trial id -> Tune's trial, while it runs
        searcher.error_of = self.error_of

    def __getstate__(self) -> dict[str, Any]:  # pickled into Tune's state, never restored
        return {}

    def error_of(self, ray_id: str) -> str:
        """The last line of a started run's error ("" for a run that never started)."""
        trial = self.trials.pop(ray_id, None)
        return _error_line(trial) if trial is not None else ""

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.trials[trial.trial_id] = trial

    def on_trial_complete(
        self, iteration: int, trials: list[Any], trial: Any, **info: Any
    ) -> None:
        self.trials.pop(trial.trial_id, None)

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


class _StopWhenSearcherStops(tune.Stopper):
    """Stops every trial once the launch stops: its lease lost, or the driver interrupted (Tune
    checks ``stop_all`` each step)."""

    def __init__(self, searcher: CellSearcher) -> None:
        self.searcher: CellSearcher | None = searcher

    def __getstate__(self) -> dict[str, Any]:  # pickled into Tune's state, never restored
        return {"searcher": None}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.searcher is not None and self.searcher.lost


#: what a launch says it does on a first signal during Tune's run
_STOPPING_TRIALS = "stopping the sweep's trials (they run again at the next launch)"
#: ... and during Ray's start (a launch-UX audit: a Ctrl-C there was lost and every run trained)
_STOPPING_AT_START = "stopping the launch once Ray has started (nothing is trained)"


class _Flagged(Protocol):
    """What a signal stops: the searcher during Tune's run, the Ray session during its start."""

    interrupted: str


@contextlib.contextmanager
def _interruptible(stops: _Flagged, doing: str = _STOPPING_TRIALS) -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM (``timeout``, Slurm, Kubernetes) set ``stops.interrupted``
    (the signal's name) instead of raising, and the launch stops cleanly where it checks it.
    During the Tune run (``stops``: the searcher): no new trial, the running ones stopped and
    left RUNNING for the next launch to close and run again (as after a kill), the lease
    released, and the summary says it was interrupted. During Ray's start (``stops``: the
    session): Ray's start runs to its end and the launch then stops before any trial.

    A second signal stops at once. Tune's own SIGINT handler is kept out (it knows no SIGTERM and
    would let the run be reported as failures), and so is the SIGTERM handler ``ray.init``
    installs (``sys.exit``: it replaced this one while Ray started). Outside the main thread
    signals cannot be caught: nothing is installed."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, _frame: Any) -> None:
        if stops.interrupted:  # the second one: stop at once
            for s, h in old.items():
                signal.signal(s, h)
            raise KeyboardInterrupt
        stops.interrupted = signal.Signals(signum).name
        logger.warning("%s: %s; send it again to stop at once", stops.interrupted, doing)

    env = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    for s in old:
        signal.signal(s, on_signal)
    deferred: list[Any] = []  # (the SIGTERM handler ray.init wanted while this one stood)
    try:
        with _ray_keeps_sigterm(deferred):
            yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if deferred:  # (Ray's, a clean sys.exit, from here on as a plain ray.init leaves it; a
            signal.signal(signal.SIGTERM, deferred[-1])  # default one had killed the driver
            # with no cleanup between Ray's start and Tune's run: a review)
        if env is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = env


@contextlib.contextmanager
def _ray_keeps_sigterm(deferred: list[Any]) -> Iterator[None]:
    """``ray.init`` installs a SIGTERM handler of its own (``sys.exit``) while it starts: kept
    from installing it, so that the launch's handler stays (:func:`_interruptible`), and put in
    ``deferred`` for the scope's end to install."""
    import ray._private.utils as ru

    saved = getattr(ru, "set_sigterm_handler", None)
    if saved is None:  # (a Ray without it: nothing to keep out)
        yield
        return
    ru.set_sigterm_handler = deferred.append
    try:
        yield
    finally:
        ru.set_sigterm_handler = saved


# ---- user code on the workers ------------------------------------------------------------------
_REF = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][\w.]*$")


def user_code_refs(spec: StudySpec) -> list[str]:
    """The ``"module:attribute"`` references to user code the study holds (:data:`USER_CODE_FIELDS`
    that exist and are set)."""
    refs = []
    for section, name in USER_CODE_FIELDS:
        part = getattr(spec, section, None)
        value = getattr(part, name, None) if part is not None else None
        if isinstance(value, str) and _REF.match(value.strip()):
            refs.append(value.strip())
    return refs


def _shippable(origin: str) -> bool:
    """Whether a module found at ``origin`` is the user's own (not installed, not Sweeper's)."""
    path = Path(origin).resolve()
    if any(part in ("site-packages", "dist-packages") for part in path.parts):
        return False
    base = Path(sys.base_prefix).resolve()
    if base in path.parents:
        return False
    own = Path(__file__).resolve().parents[2]  # the checkout holding sweeper/ and proxy_models/
    return not any(
        (own / pkg) == path or (own / pkg) in path.parents for pkg in ("sweeper", "proxy_models")
    )


def runtime_env_for(refs: list[str], search: list[str] | None = None) -> dict[str, Any]:
    """Ray's ``runtime_env`` that makes the user's modules named in ``refs`` importable on every
    worker, on any node: each top-level module (a package directory or a single ``.py`` file)
    found locally, in ``search`` (the study's folder, the working directory) or on ``sys.path``,
    goes to ``py_modules`` (Ray uploads it once per job and unpacks it on each node). Installed
    modules are left out: they must be installed on the workers, like Sweeper itself. A module
    that cannot be found locally is a StudyError."""
    modules: list[str] = []
    missing: list[str] = []
    for ref in refs:
        top = ref.split(":", 1)[0].split(".", 1)[0]
        if top == "__main__":  # (the driver's own script or notebook: never importable there)
            missing.append(ref)
            continue
        found = None
        for d in search or []:
            for cand in (Path(d) / top, Path(d) / f"{top}.py"):
                if (cand.is_dir() and (cand / "__init__.py").exists()) or cand.is_file():
                    found = str(cand.resolve())
                    break
            if found:
                break
        if found is None:
            try:
                found_spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                found_spec = None
            if found_spec is None:
                missing.append(ref)
                continue
            if found_spec.submodule_search_locations:
                found = str(Path(next(iter(found_spec.submodule_search_locations))).resolve())
            elif found_spec.origin and found_spec.origin not in ("built-in", "frozen"):
                found = str(Path(found_spec.origin).resolve())
            if found is None or not _shippable(found):
                continue
        for path in [found, *_imported_siblings(found)]:
            if path not in modules:
                modules.append(path)
    if missing:
        raise StudyError([_not_found(r, search) for r in missing])
    return {"py_modules": modules, "excludes": ["__pycache__", "*.pyc"]} if modules else {}


def _not_found(ref: str, search: list[str] | None) -> str:
    """Why ``ref``'s module cannot be shipped to the workers."""
    if ref.split(":", 1)[0] == "__main__":
        return (
            f"{ref}: a function of __main__ (a notebook cell or the running script) cannot be "
            "imported by the Ray workers: put it in a .py file next to the study and name it "
            "'file:function'"
        )
    return f"{ref}: module not found here (looked in {', '.join(search or [])} and sys.path)"


def _imported_siblings(path: str) -> list[str]:
    """The modules a single-file module at ``path`` imports from its own folder (``import myutils``
    beside ``mytrain.py``), and theirs in turn: shipped with it, since a worker on another node
    has no such folder (on one machine the driver's working directory hid that). A package ships
    whole, so it needs none."""
    import ast

    out: list[str] = []
    todo = [Path(path)] if path.endswith(".py") else []
    while todo:
        file = todo.pop()
        try:
            tree = ast.parse(file.read_text(), filename=str(file))
        except (OSError, SyntaxError, ValueError):
            continue
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}  # fmt: skip
        names |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module and not n.level}  # fmt: skip
        for name in sorted(names):
            for cand in (file.parent / f"{name}.py", file.parent / name):
                shipped = cand.is_file() or (cand / "__init__.py").is_file()
                key = str(cand.resolve())
                if shipped and key != path and key not in out and _sibling_wins(name, key):
                    out.append(key)
                    if cand.is_file():
                        todo.append(cand)
    return out


def _sibling_wins(name: str, path: str) -> bool:
    """Whether the module ``name`` found beside a shipped one at ``path`` is the one the driver
    imports too (not an installed module of that name, nor Sweeper's own: :func:`_shippable`)."""
    if not _shippable(path):
        return False
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return True  # (importable here only through the study's folders)
    locations = found.submodule_search_locations
    where = next(iter(locations)) if locations else found.origin
    if where is None:
        return False
    return str(Path(where).resolve()) in (path, str(Path(path) / "__init__.py"))


# ---- launch ------------------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet_ray(verbose: int) -> Iterator[None]:
    """Ray's and Tune's logs and warnings, quieter for the launch (all of them with -v -v); the
    caller's logger levels, warning filters and log filters are restored afterwards (a notebook
    that uses Ray itself kept seeing none of Ray's warnings)."""
    level = logging.INFO if verbose > 1 else logging.WARNING if verbose else logging.ERROR
    levels = {name: level for name in ("ray", "ray.tune", "ray.train", "ray.air")}
    # Tune looks for per-trial result files when fit() returns; the storage is the record, so
    # there are none, and it would say so once per trial
    levels["ray.tune.analysis.experiment_analysis"] = logging.ERROR
    # ... but says when no trial can start (no node left with the resources a trial needs): the
    # launch would otherwise wait in silence
    levels["ray.tune.execution.insufficient_resources_manager"] = min(level, logging.WARNING)
    saved = {name: logging.getLogger(name).level for name in levels}
    # Tune's traceback of a failed run: the first of each error per launch, all of them with -v
    controller = logging.getLogger("ray.tune.execution.tune_controller")
    first = None if verbose else _FirstOfEachError()
    with warnings.catch_warnings():
        if not verbose:
            warnings.filterwarnings("ignore", module=r"ray(\..*)?")
        for name, lv in levels.items():
            logging.getLogger(name).setLevel(lv)
        if first is not None:
            controller.addFilter(first)
        try:
            yield
        finally:
            for name, lv in saved.items():
                logging.getLogger(name).setLevel(lv)
            if first is not None:
                controller.removeFilter(first)


class _FirstOfEachError(logging.Filter):
    """Lets through Tune's log of a failed run (Ray's whole traceback, some 60 lines) for the
    first run that fails with each error only: the searcher prints one line per failure and
    keeps the error on the trial, and one exception raised by a study's own code printed nine
    tracebacks, 600 lines, in a launch (retries included)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info or record.exc_info[1] is None:
            return True
        found = _ERROR_LINE.findall(str(record.exc_info[1]))
        key = found[-1] if found else type(record.exc_info[1]).__name__
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


#: an exception's own line in a traceback ("RuntimeError: boom"): :class:`_FirstOfEachError`'s key
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*$", re.MULTILINE)


def _trials_fitting(spec: StudySpec, res: Mapping[str, float]) -> int:
    """How many trials of ``spec`` the resources ``res`` (Ray's ``cluster_resources``) hold."""
    r = spec.resources
    n = math.floor(res.get("CPU", 0.0) / r.cpu + 1e-9) if r.cpu > 0 else 1_000_000
    if r.gpu > 0:
        n = min(n, math.floor(res.get("GPU", 0.0) / r.gpu + 1e-9))
    return n


def _capacity_now(spec: StudySpec) -> Callable[[], int | None]:
    """The cluster's capacity as it grows or shrinks (nodes joining later, a lost node started
    again), for the searcher to read while the launch runs; None when Ray cannot say."""

    def now() -> int | None:
        try:
            return _trials_fitting(spec, ray.cluster_resources())
        except Exception:  # (the cluster's state is for the launch's end to judge)
            return None

    return now


def _capacity(spec: StudySpec) -> int:
    """How many trials the Ray cluster can run at once with the study's resources per trial; a
    StudyError when it cannot run one, a warning when no node alone can (a trial runs on one
    node: it waits for one to join)."""
    res = ray.cluster_resources()
    r = spec.resources
    n = _trials_fitting(spec, res)
    if n < 1:
        raise StudyError(
            f"resources: the Ray cluster ({res.get('CPU', 0):g} CPU, {res.get('GPU', 0):g} GPU) "
            f"cannot fit one trial of {r.cpu:g} CPU and {r.gpu:g} GPU",
            path=spec.source,
        )
    nodes = [x.get("Resources", {}) for x in ray.nodes() if x.get("Alive")]
    if nodes and not any(x.get("CPU", 0.0) >= r.cpu and x.get("GPU", 0.0) >= r.gpu for x in nodes):
        logger.warning(
            "resources: no node of the Ray cluster has %g CPU and %g GPU for one trial; the "
            "trials wait until such a node joins",
            r.cpu,
            r.gpu,
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
    code_changed: bool = False,
) -> LaunchSummary:
    """Run (or resume) the sweep of ``spec`` until every cell has its target number of trials.

    ``url``: storage (see :func:`resolve_storage`). ``address``: join that Ray cluster instead of
    starting a local one (one CPU per usable core, no dashboard). ``max_concurrent``: live
    trials at most (default: the study's, else what the cluster fits). ``force_new``: replace a
    sweep of the same name launched from a different study. ``progress``: per-cell progress on
    stdout. ``takeover``: take the sweep from a driver that holds its lease (see
    :mod:`sweeper.study.lease`; refused while that driver's process is alive on this host).
    ``code_changed``: continue a sweep whose model builder or training function changed since
    its first runs (refused otherwise: :func:`sweeper.study.sweep.open_sweep`). Raises StudyError / StorageError on bad input, LeaseHeld while another live driver runs the
    sweep, RayConnectError when the cluster at ``address`` cannot be joined, LeaseLost when
    another driver took the sweep over during the launch (its trials are stopped first); Ray is
    shut down afterwards if this call started it.
    """
    t0 = time.perf_counter()
    problems = check_spec(spec)
    if problems:
        raise StudyError(problems, path=spec_origin(spec))
    check_max_concurrent(max_concurrent)
    check_address(address)
    url = resolve_storage(spec, url)
    data = data_source(spec)
    # one driver per sweep: reconcile below closes the RUNNING trials it finds, which is right only
    # when their driver is gone
    runtime_env = runtime_env_for(user_code_refs(spec), code_dirs(spec))
    with sweep_lease(spec.name, url, takeover=takeover) as held:
        return _launch_held(
            spec,
            held=held,
            runtime_env=runtime_env,
            url=url,
            data=data,
            address=address,
            max_concurrent=max_concurrent,
            force_new=force_new,
            code_changed=code_changed,
            verbose=verbose,
            progress=progress,
            t0=t0,
        )


class RayConnectError(SweeperError):
    """The Ray cluster at ``--address`` cannot be joined."""


#: environment variables that hold secrets: kept from the Ray processes a local launch starts
#: (workers never touch the storage; only the driver does)
_SECRET_ENV = ("SWEEPER_STORAGE", "PGPASSWORD", "SWEEPER_TEST_POSTGRES")


@contextlib.contextmanager
def _ray_start_env(local: bool, url: str | None = None) -> Iterator[None]:
    """While Ray starts: no secrets in the environment its processes inherit, its job entrypoint
    recorded without secrets (Ray stores the driver's command line in its job table), and, for a
    local Ray, every Ray process bound to the loopback interface.

    Ray binds its servers to 127.0.0.1 only when the node's address is 127.0.0.1, and it turns
    127.0.0.1 into the machine's outward address unless clusters are disabled
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when Ray is imported, hence the constant is
    set too). The runtime-env agent listens on the node's address, so loopback as well."""
    import ray._private.ray_constants as rc
    import ray._private.utils as ru

    from sweeper.study.storage import redact

    saved_env = {k: os.environ.pop(k) for k in _SECRET_ENV if k in os.environ}
    saved_entry = ru.get_entrypoint_name
    saved_cluster = rc.ENABLE_RAY_CLUSTER
    saved_flag = os.environ.get(rc.ENABLE_RAY_CLUSTERS_ENV_VAR)
    # (the storage URL's own password too: one with a space or a quote is no URL's pattern)
    ru.get_entrypoint_name = lambda: redact(saved_entry(), url)
    if local:
        rc.ENABLE_RAY_CLUSTER = False
        os.environ[rc.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    try:
        yield
    finally:
        os.environ.update(saved_env)
        ru.get_entrypoint_name = saved_entry
        rc.ENABLE_RAY_CLUSTER = saved_cluster
        if saved_flag is None:
            os.environ.pop(rc.ENABLE_RAY_CLUSTERS_ENV_VAR, None)
        else:
            os.environ[rc.ENABLE_RAY_CLUSTERS_ENV_VAR] = saved_flag


#: how long the head's port may take to answer before a launch gives up on ``--address``
ADDRESS_PROBE_S = 10.0


def check_address(address: str | None) -> None:
    """RayConnectError (exit 2) unless ``address`` is None, ``auto``, or ``host:port`` where a
    gRPC server (a Ray head's GCS) answers within :data:`ADDRESS_PROBE_S`; checked before the
    sweep's lease is taken. ``ray.init`` on a port where nothing listens, or where another
    service does (an HTTP server, PostgreSQL), retried for ever: a driver holding the lease that
    Ctrl-C could hardly stop. A Ray Client address (``ray://``) is refused: see
    :func:`_client_refused`."""
    if not address or address == "local":
        return
    if address == "auto":  # (what Ray would join; a stale one retried for ever too)
        env = os.environ.get("RAY_ADDRESS", "").strip()
        if env.startswith("ray://"):  # (ray.init("auto") takes RAY_ADDRESS as it is: Ray Client)
            raise RayConnectError(_client_refused(env, "--address auto (RAY_ADDRESS="))
        if "://" in env:  # (Ray Jobs' http://host:8265 is the dashboard's, not the GCS's)
            raise RayConnectError(
                f"--address auto: RAY_ADDRESS={env} is a URL (the dashboard's or the jobs "
                "API's?), not the head's GCS HOST:PORT (6379 unless `ray start --head --port` "
                "set another): set it to that, or give --address HOST:PORT"
            )
        found = _resolve_auto()
        if found is not None:
            _probe(found, f"auto ({found}, from RAY_ADDRESS or the last `ray start` here)")
        return
    _probe(address, repr(address))


def _resolve_auto() -> str | None:
    """The address ``auto`` names as ``ray.init`` resolves it (RAY_ADDRESS, else the last ``ray
    start`` on this machine, else a running GCS); None when Ray's lookup cannot be asked.
    RayConnectError when no Ray runs here: ray.init's own error had been read as a token
    problem (an audit)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # (a private helper: a Ray without it is not probed)
        return None
    try:
        return canonicalize_bootstrap_address("auto")
    except ConnectionError:
        raise RayConnectError(
            "--address auto: no running Ray cluster found on this machine (no `ray start "
            "--head` here, and RAY_ADDRESS is unset); start one, or give the head's address as "
            "--address HOST:PORT (see docs/CLUSTER.md)"
        ) from None
    except Exception:  # (any other failure of the lookup: ray.init will say)
        return None


def _client_refused(address: str, named: str) -> str:
    """Why a Ray Client address (``ray://host:port``) cannot run a sweep, in one line; ``named``
    starts the line (how the user gave it, ending with "(RAY_ADDRESS=" where the environment did).

    Under Ray Client, Ray Tune runs the whole tuning loop as an actor on the cluster (Ray's docs:
    Ray Client "may not work as expected" with Tune): the searcher would be pickled there as the
    stub it pickles to, away from the driver's storage and lease. Without ``ray[client]`` (grpcio)
    ``ray.init`` had also failed after some 17 s with an internal ValueError, and the sweep was
    registered before that (a cluster audit)."""
    shown = f"{named}{address})" if named.endswith("=") else f"{named}{address}"
    client = (
        "" if _ray_client_installed() else ", and ray[client] (grpcio) is not installed here"
    )
    return (
        f"{shown}: a Ray Client address, which a sweep cannot use (under Ray Client, Ray Tune "
        f"runs its loop on the cluster, away from this driver's storage and lease{client}); give "
        "the head's GCS address as --address HOST:PORT (6379 unless `ray start --head --port` "
        "set another) from a machine that reaches it, the head itself if need be (see "
        "docs/CLUSTER.md)"
    )


def _ray_client_installed() -> bool:
    """Whether this Ray can open a Ray Client connection (``ray[client]``: grpcio)."""
    try:
        from ray._private.utils import get_ray_client_dependency_error
    except ImportError:  # (a private helper: ask for its module instead)
        return importlib.util.find_spec("grpc") is not None
    return get_ray_client_dependency_error() is None


def _probe(address: str, shown: str) -> None:
    """:func:`check_address` of a ``host:port`` ``address``, named ``shown`` in its errors."""
    scheme, sep, rest = address.rpartition("://")
    if sep and scheme == "ray":
        raise RayConnectError(_client_refused(address, "--address "))
    host, colon, port = rest.rpartition(":")
    if sep or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayConnectError(
            f"--address must be host:port (the head's GCS port, 6379 unless `ray start --head "
            f"--port` set another) or auto, got {address!r}"
        )
    try:
        grpc = _speaks_grpc(host.strip("[]"), int(port))
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise RayConnectError(
            f"cannot join the Ray cluster at {shown}: nothing answers at {host}:{port} "
            f"({why}); check the head's address and port (`ray status` on the head prints them)"
        ) from None
    if not grpc:
        raise RayConnectError(
            f"cannot join the Ray cluster at {shown}: something answers at {host}:{port}, "
            "but not a Ray head (no gRPC there: another service's port?); `ray status` on the "
            "head prints its address"
        )


#: the HTTP/2 connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5)
_H2_PREFACE: Final[bytes] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _speaks_grpc(host: str, port: int) -> bool:
    """Whether the server at ``host:port`` speaks HTTP/2 as gRPC does (a Ray GCS answers the
    preface with its SETTINGS frame, whatever its auth); True without asking under TLS
    (``RAY_USE_TLS``), whose handshake comes first. OSError when nothing answers."""
    import socket

    with socket.create_connection((host, port), timeout=ADDRESS_PROBE_S) as sock:
        if os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true"):
            return True
        sock.settimeout(ADDRESS_PROBE_S)
        sock.sendall(_H2_PREFACE)
        head = b""
        with contextlib.suppress(OSError):
            while len(head) < 9 and (chunk := sock.recv(9 - len(head))):
                head += chunk
    return len(head) == 9 and head[3] == 4  # (a frame header whose type is SETTINGS)


def _loopback(address: str) -> bool:
    """Whether ``address`` (``host:port``, or ``ray://``...) names this machine's loopback: a
    cluster on one machine, whose head listens on 127.0.0.1 only; Ray would otherwise turn
    127.0.0.1 into the machine's outward address and miss it."""
    import ipaddress

    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: the longest part of Ray's error that a join's hint quotes (its first sentences that fit)
HINT_QUOTE_CHARS = 300

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _clip(text: str, most: int = HINT_QUOTE_CHARS) -> str:
    """``text`` if it has ``most`` characters or fewer; else its first sentences that fit, else
    its first words that fit and "...": Ray's authentication error had been cut mid-word
    ("use `ray get-auth")."""
    if len(text) <= most:
        return text
    ends = [m.start() for m in _SENTENCE_END.finditer(text) if m.start() <= most]
    if ends and ends[-1] >= most // 3:
        return text[: ends[-1]]
    cut = text[: most - 3].rstrip()
    space = cut.rfind(" ")
    if space > most // 3:
        cut = cut[:space].rstrip(" ,;:")
    return f"{cut}..."


def _connect_hint(address: str, e: BaseException) -> str:
    if "ray[client]" in str(e):  # (ray.init took the address for a Ray Client's)
        return _client_refused(address, "--address ")
    auth = os.environ.get("RAY_AUTH_MODE", "")
    token_file = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    has_token = bool(os.environ.get("RAY_AUTH_TOKEN")) or os.path.exists(token_file)
    first = _clip((str(e).strip().splitlines() or [type(e).__name__])[0])
    lines = [f"cannot join the Ray cluster at {address!r}: {type(e).__name__}: {first}"]
    if auth.lower() != "token" or not has_token:
        # (a token file with the mode unset is not sent: say which of the two is missing)
        why = (
            "has no token" if auth.lower() == "token"
            else f"does not send its token (RAY_AUTH_MODE={auth or 'unset'})" if has_token
            else f"has no token and does not send one (RAY_AUTH_MODE={auth or 'unset'})"
        )  # fmt: skip
        give = (
            "give this driver the cluster's token (copy the head's ~/.ray/auth_token here, or "
            "set RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN)"
        )  # (the mode already token, only the token is asked for: a cluster audit)
        fix = (
            give if auth.lower() == "token"
            else "set RAY_AUTH_MODE=token (and check that the token is the head's)" if has_token
            else f"set RAY_AUTH_MODE=token and {give}"
        )  # fmt: skip
        lines.append(
            "the likely cause: the cluster uses token authentication (the default of `ray "
            f"start` since Ray 2.5x) and this driver {why}; token file {token_file} "
            f"{'exists' if os.path.exists(token_file) else 'missing'}; fix: {fix}"
        )
    else:
        lines.append(
            "the token is set: check that it is the head's (~/.ray/auth_token there), that "
            f"{address} is the head's GCS address (`ray status --address {address}`), and "
            "that this machine can reach it"
        )
    lines.append("see docs/CLUSTER.md")
    return "\n".join(lines)


def _start_ray(
    address: str | None,
    verbose: int,
    t0: float,
    runtime_env: dict[str, Any] | None = None,
    url: str | None = None,
) -> bool:
    """Join the cluster at ``address``, or start a local Ray of its own (one CPU per usable core,
    no dashboard, bound to 127.0.0.1), unless Ray is already up in this process; True when this
    call started it."""
    if ray.is_initialized():
        _check_shipped(runtime_env)
        return False
    log_level = logging.INFO if verbose > 1 else logging.WARNING if verbose else logging.ERROR
    kwargs: dict[str, Any] = {"logging_level": log_level, "log_to_driver": verbose > 0}
    if runtime_env:
        kwargs["runtime_env"] = runtime_env
    with _ray_start_env(local=not address or _loopback(address), url=url):
        if address:
            try:
                ray.init(address=address, **kwargs)
            except (
                ConnectionError, RuntimeError, TimeoutError, ValueError, ray.exceptions.RayError
            ) as e:
                with contextlib.suppress(Exception):
                    ray.shutdown()
                if isinstance(e, ValueError) and "ray[client]" not in str(e):
                    raise  # (a runtime_env's, e.g. a package too big: not the join's)
                raise RayConnectError(_connect_hint(address, e)) from None
        else:
            ray.init(
                # "local": a Ray of its own, even when `ray start` left a cluster's address in
                # Ray's temp dir or RAY_ADDRESS is set (ray.init() would join that cluster)
                address="local",
                num_cpus=usable_cores(),
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **kwargs,
            )
    logger.info("ray started in %.1f s", time.perf_counter() - t0)
    return True


def _check_shipped(runtime_env: dict[str, Any] | None) -> None:
    """With Ray started before the launch (``ray.init`` in a notebook), the ``runtime_env`` that
    ships the user's modules cannot be given to it: RayConnectError, before any trial, when a
    worker cannot import one of them (every run had failed with ModuleNotFoundError)."""
    paths = (runtime_env or {}).get("py_modules") or []
    if not paths:
        return
    names = [Path(p).stem if p.endswith(".py") else Path(p).name for p in paths]
    missing = _unimportable_on_nodes(names)
    if missing:
        raise RayConnectError(
            f"Ray was started before the launch (ray.init in this process) without your code: "
            f"its workers cannot import {', '.join(missing)}. Start Ray with "
            f"ray.init(..., runtime_env={runtime_env!r}), or let launch start it"
        )


def _unimportable_on_nodes(names: list[str]) -> list[str]:
    """The modules of ``names`` that a worker of some node that can run trials (CPUs or GPUs)
    cannot import: one probe per such node (one task alone lands on the driver's node, whose
    workers see the driver's folder). RayConnectError when the nodes do not answer in 60 s."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and _runs_trials(n)]
    asks = [
        _unimportable.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote(names)
        for node in nodes
    ]
    try:
        found = ray.get(asks, timeout=60)
    except (ray.exceptions.RayError, TimeoutError) as e:
        raise RayConnectError(
            f"could not ask the cluster's nodes whether they import your code "
            f"({type(e).__name__}: {first_line(e)}); start Ray with the runtime_env, or let launch "
            "start it"
        ) from None
    return sorted({m for each in found for m in each})


def _runs_trials(node: Mapping[str, Any]) -> bool:
    res = node.get("Resources") or {}
    return bool(res.get("CPU", 0) > 0 or res.get("GPU", 0) > 0)


@ray.remote(num_cpus=0)
def _unimportable(names: list[str]) -> list[str]:
    """The modules of ``names`` that a Ray worker cannot import."""
    return [n for n in names if importlib.util.find_spec(n) is None]


def _ray_dir_owner() -> str:
    """The start of the name of a launch's Tune folder in the temp dir, before the driver's pid:
    this host's and this user's (a temp dir shared by hosts or users holds other drivers' pids)."""
    host = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())
    return f"sweeper-ray-{host}-{os.getuid()}-"


def _remove_orphaned_ray_dirs() -> None:
    """Remove the Tune folders of this host's and this user's launches whose driver is gone (a
    driver killed with SIGKILL skips its own cleanup, and its folder stayed in the temp dir for
    good: a cluster audit)."""
    owner = _ray_dir_owner()
    for d in Path(tempfile.gettempdir()).glob(f"{owner}*-*"):
        pid = d.name[len(owner) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)) and d.stat().st_uid == os.getuid():
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tuner(
    spec: StudySpec,
    searcher: CellSearcher,
    cells: list[str],
    ray_dir: str,
    held: HeldLease | None = None,
) -> tune.Tuner:
    """The Tune run: the study's trainable and resources, our searcher, per-cell ASHA when the
    pruner asks for it, retries of crashed runs, no result files (the storage is the record)."""
    r = spec.resources
    scheduler: TrialScheduler | None = None
    if spec.pruner.kind == "asha":
        # its rungs seeded from the stored trials: a relaunch decides as an uninterrupted launch
        scheduler = PerCellASHA.for_sweep(spec, [c.cs for c in searcher.cells])
    trainable = tune.with_resources(trainable_for(spec), {"cpu": r.cpu, "gpu": r.gpu})
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            metric=METRIC,
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
            stop=_StopWhenSearcherStops(searcher),
            log_to_file=False,
        ),
    )


class _RaySession:
    """The launch's Ray: joined (or started) once, when the launch first needs it, Ray's logs
    quieted from then on; shut down by :meth:`close` if the launch started it."""

    def __init__(
        self,
        address: str | None,
        verbose: int,
        t0: float,
        runtime_env: dict[str, Any],
        url: str | None = None,
    ) -> None:
        self.address, self.verbose, self.t0, self.runtime_env = address, verbose, t0, runtime_env
        self.url = url  # (the storage's: its password is masked in Ray's job table)
        #: the trials the cluster fits, once joined (None before)
        self.capacity: int | None = None
        self.started = False
        #: the signal sent while Ray started ("" when none was): the launch then runs no trial
        self.interrupted = ""
        self._quiet: contextlib.ExitStack | None = None

    def join(self, spec: StudySpec) -> int:
        """Join the cluster (once) and read its capacity for ``spec``'s trials: RayConnectError
        when it cannot be joined, StudyError when it cannot fit one trial (:func:`_capacity`).
        A signal while Ray starts sets :attr:`interrupted`, for the caller to stop on (it was
        lost in Ray's start, and every run then trained: a launch-UX audit)."""
        if self.capacity is None:
            if self._quiet is None:
                self._quiet = contextlib.ExitStack()
                self._quiet.enter_context(_quiet_ray(self.verbose))
            with _interruptible(self, _STOPPING_AT_START):
                if not self.started:
                    self.started = _start_ray(
                        self.address, self.verbose, self.t0, self.runtime_env, self.url
                    )
                self.capacity = _capacity(spec)  # (it refuses a trial the cluster cannot fit)
        return self.capacity

    def close(self) -> None:
        try:
            if self.started:
                self.started = False
                ray.shutdown()
        finally:
            if self._quiet is not None:
                self._quiet.close()
                self._quiet = None


def _launch_held(
    spec: StudySpec,
    *,
    held: HeldLease,
    runtime_env: dict[str, Any],
    url: str,
    data: str,
    address: str | None,
    max_concurrent: int | None,
    force_new: bool,
    code_changed: bool,
    verbose: int,
    progress: bool,
    t0: float,
) -> LaunchSummary:
    """:func:`launch_study` once the sweep's lease is held: every write fenced by it."""
    storage = st.created(lambda: FencedStorage(url, held))
    session = _RaySession(address, verbose, t0, runtime_env, url)
    try:
        return _launch_fenced(
            spec,
            held=held,
            storage=storage,
            session=session,
            url=url,
            data=data,
            max_concurrent=max_concurrent,
            force_new=force_new,
            code_changed=code_changed,
            progress=progress,
            t0=t0,
        )
    finally:
        try:
            session.close()
        finally:
            storage.close()


def _created_at(name: str, url: str) -> Any:
    """When the sweep ``name``'s row was written (None without one): a row this launch wrote
    anew has another time than the one it found."""
    row = st.get_sweep(name, url)
    return None if row is None else row["created_at"]


def _remove_new_sweep(name: str, url: str, held: HeldLease) -> None:
    """Remove the sweep this launch registered, before any trial, when it cannot go on (it could
    not join the cluster): a launch that ran nothing leaves no sweep behind."""
    try:
        delete_sweep(name, url, held=held)
    except Exception as e:  # (the launch's own error is the one to report)
        logger.warning("sweep %s: could not remove it again (%s)", name, first_line(e))
    else:
        logger.warning("sweep %s: removed again (this launch had created it)", name)


def _law_plan_ended(spec: StudySpec, cell_studies: list[CellStudy]) -> str:
    """Why a law study's plan has nothing left to run on its stored results ("" when it has, or
    for another sampler): a finished law study is relaunched without starting Ray."""
    if spec.sampler.kind != "law":
        return ""
    return LawPlanner(spec, cell_studies).ended()


def _device_mix(spec: StudySpec, cell_studies: list[CellStudy]) -> str:
    """A warning when the sweep holds runs trained on another kind of device than this launch's
    ("" when it does not): on CUDA the built-in loop trains under bf16 autocast, on the CPU in
    fp32, and near and above the best LR their losses differ by up to what a second seed does. A
    study's own training function chooses its device and precision itself: not checked."""
    if spec.train.function:
        return ""
    here = device_kind(spec)
    seen: set[str] = set()
    for cs in cell_studies:
        for t in cs.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            records = [r for r in t.user_attrs.get("runs") or [] if isinstance(r, Mapping)]
            seen |= device_kinds(r.get("device") for r in records)
    other = sorted(seen - {here})
    if not other:
        return ""
    how = DEVICE_PRECISION[here]
    return (
        f"sweep {spec.name} holds runs trained on {', '.join(other)}, and this launch trains on "
        f"{here} ({how}): a law fitted on the sweep mixes the two; launch the study under another "
        "sweep name to keep them apart"
    )


def _stopped_at_start(
    spec: StudySpec, url: str, session: _RaySession, t0: float
) -> LaunchSummary:
    """The summary of a launch interrupted while Ray started, before it opened the sweep: no
    cell, no run (the sweep is as it was; the same command starts it again)."""
    return LaunchSummary(
        sweep=spec.name, url=url, cells=(), wall_s=time.perf_counter() - t0, runs_this_launch=0,
        points_this_launch=0, reconciled=0, max_concurrent=session.capacity or 0,
        interrupted=session.interrupted,
    )  # fmt: skip


def _launch_fenced(
    spec: StudySpec,
    *,
    held: HeldLease,
    storage: FencedStorage,
    session: _RaySession,
    url: str,
    data: str,
    max_concurrent: int | None,
    force_new: bool,
    code_changed: bool,
    progress: bool,
    t0: float,
) -> LaunchSummary:
    # A launch that could not join the cluster (no token, a wrong one, a Ray Client address)
    # had registered its new sweep first: `sweeper status` listed it, every cell at 0/N. A new
    # sweep is registered once the cluster is joined (every check of the study came before); an
    # existing one is opened first (the checks of a relaunch: same study, same code), and one
    # this launch replaced (--force-new, or an empty sweep of another study) is removed again
    # when the join fails.
    before = st.get_sweep(spec.name, url)
    if before is None or force_new:  # (--force-new deletes the old trials: join first)
        session.join(spec)
        if session.interrupted:  # (nothing opened: a new sweep is not registered, none replaced)
            return _stopped_at_start(spec, url, session, t0)
    cell_studies = open_sweep(
        spec, url, force_new=force_new, storage=storage, held=held, code_changed=code_changed
    )
    replaced = before is not None and _created_at(spec.name, url) != before["created_at"]
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
            plan_stop="" if searcher is None or searcher.law_gave_up else searcher.law_stop,
            interrupted="" if searcher is None else searcher.interrupted,
            budget_runs=spec.sampler.budget_runs if spec.sampler.kind == "law" else None,
            own_code=bool(user_code_refs(spec)),
        )

    # (a law study's end is its plan's: a budget lowered below the runs used is said there)
    law = spec.sampler.kind == "law"
    if not law and all(cell_counts(cs.study, target).done for cs in cell_studies):
        logger.info("sweep %s: every cell has its %d trials; nothing to run", spec.name, target)
        return summary(None, 0)
    ended = _law_plan_ended(spec, cell_studies)
    if spec.sampler.kind == "law":  # (a stop kept from an earlier launch may no longer hold)
        record_law_stop(spec.name, url, ended, held=held)
    if ended:
        logger.info("sweep %s: the law sampler's plan has ended (%s); nothing to run", spec.name,
                    ended)  # fmt: skip
        return replace(summary(None, 0), plan_stop=ended)

    if mixed := _device_mix(spec, cell_studies):
        logger.warning(mixed)
    try:
        searcher, n_conc = _run_tune(
            spec,
            cell_studies,
            held=held,
            session=session,
            data=data,
            max_concurrent=max_concurrent,
            progress=progress,
        )
    except BaseException:
        if replaced and session.capacity is None:  # (it never joined: no trial ran)
            _remove_new_sweep(spec.name, url, held)
        raise
    if held.lost.is_set():
        raise LeaseLost(
            f"{held.why}; this driver stopped its trials and wrote nothing after that "
            f"({searcher.refused} write(s) refused)"
        )
    done = summary(searcher, n_conc)
    if spec.sampler.kind == "law":
        record_law_stop(spec.name, url, done.plan_stop, held=held)
    return done


def _run_tune(
    spec: StudySpec,
    cell_studies: list[CellStudy],
    *,
    held: HeldLease,
    session: _RaySession,
    data: str,
    max_concurrent: int | None,
    progress: bool,
) -> tuple[CellSearcher, int]:
    """Join Ray (``session``, unless the launch already has) and run the sweep's trials through
    Ray Tune until the searcher has nothing left to ask; the searcher and the live trials
    allowed. The launch shuts Ray down afterwards (:meth:`_RaySession.close`)."""
    _remove_orphaned_ray_dirs()
    ray_dir = tempfile.mkdtemp(prefix=f"{_ray_dir_owner()}{os.getpid()}-")
    display: Progress | None = None
    try:
        capacity = session.join(spec)
        n_conc = max_concurrent or spec.resources.max_concurrent or capacity
        names = [cs.cell.name for cs in cell_studies]
        display = Progress(spec.name, names, live=True) if progress else None
        fixed = max_concurrent or spec.resources.max_concurrent
        searcher = CellSearcher(
            spec,
            cell_studies,
            max_concurrent=n_conc,
            base_config=base_config(spec, data),
            on_progress=display.update if display is not None else None,
            on_dispatch=display.redraw if display is not None else None,
            held=held,
            capacity=None if fixed else _capacity_now(spec),
        )
        if session.interrupted:  # (during Ray's start: no trial runs)
            searcher.interrupted = session.interrupted
            return searcher, n_conc
        if display is not None:
            display.start(searcher)
        t_fit = time.perf_counter()
        with _interruptible(searcher):
            _tuner(spec, searcher, names, ray_dir, held).fit()
        logger.info("tune ran in %.1f s", time.perf_counter() - t_fit)
    finally:
        if display is not None:
            display.stop()
        shutil.rmtree(ray_dir, ignore_errors=True)
    return searcher, searcher.max_concurrent  # (as the cluster grew or shrank)

"""What runs in a Ray worker: one training run of a proxy, of your model, or of your training
function, reported to Tune.

With ASHA it reports ``{"loss", "progress"}`` every ``eval_every`` steps (progress in percent of the
steps, capped at 99 so that only the final report counts as finished); a trial that Tune stops
before its final report was pruned.

Your own code (a study's ``model.builder`` or ``train.function``) travels in the trial's config as
``config["own"]`` (:func:`trainable_for` puts it there). An exception it raises becomes a
:class:`TrialError` whose message holds the original exception and its whole traceback. A seeded
run raises it again, so it is not retried: the run ends with a final report carrying the message
under :data:`USER_ERROR`, which the searcher records as the run's failure (its trial FAIL,
``last_error`` set). Only what a retry can cure (out of memory, a connection or a timeout:
:data:`RETRYABLE`) is re-raised, for Ray to retry the run (``resources.max_failures``), as it does
a crashed worker.
"""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.study.ladder import Cell
    from sweeper.study.spec import StudySpec

__all__ = [
    "METRIC",
    "RETRYABLE",
    "USER_ERROR",
    "TrialError",
    "base_config",
    "data_check",
    "device_kind",
    "own_config",
    "run_trial",
    "train_once",
    "trainable_for",
    "trial_config",
    "usable_cores",
]

#: the metric every report carries (the final validation loss, or an intermediate one)
METRIC = "loss"

#: the final report's key for an exception raised by the study's own code (the run failed)
USER_ERROR = "user_error"
#: a non-final report's progress is capped here, in percent of the run's steps: only the final
#: report is at 100% (ASHA's rungs, ``sweeper.run.asha``, read it)
PROGRESS_CAP = 99.0

#: what a retry of your code can cure: memory another process held, the network, a slow service
RETRYABLE: tuple[type[BaseException], ...] = (MemoryError, ConnectionError, TimeoutError)

_data_cache: dict[tuple[str, int], Any] = {}


class TrialError(RuntimeError):
    """The user's code raised during a trial: ``str(e)`` is ``"<key> <path>: <Type>: <message>"``
    followed by the full traceback of the original exception. ``retryable``: the original is one a
    retry can cure (:func:`retryable`)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def retryable(e: BaseException) -> bool:
    """Whether a retry can cure ``e``: :data:`RETRYABLE`, or torch's out-of-memory error."""
    if isinstance(e, RETRYABLE):
        return True
    return any(t.__name__ == "OutOfMemoryError" for t in type(e).__mro__)


def out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` says the memory ran out: a MemoryError, torch's OutOfMemoryError, or the
    RuntimeError torch's CPU allocator raises ("DefaultCPUAllocator: can't allocate memory")."""
    if isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError":
        return True
    return isinstance(e, RuntimeError) and "can't allocate memory" in str(e)


def _load_data(source: str, vocab_size: int, driver: Mapping[str, str] | None = None) -> Any:
    """TokenData, cached per worker process (actors are reused, so it is read once per worker).
    ``driver``: what the driver read at the same path (:func:`data_check`); data that differs
    here is a ValueError (retried, as Ray may place the retry on another node), never a run
    trained on other data than its sweep's."""
    import socket

    from proxy_models import load_data

    key = (source, vocab_size)
    if key not in _data_cache:
        _data_cache[key] = load_data(source, vocab_size=vocab_size)
    data = _data_cache[key]
    if driver and data.fingerprint != driver["fingerprint"]:
        raise ValueError(
            f"the data on {socket.gethostname()} ({data.name}, fingerprint {data.fingerprint}) "
            f"differs from the driver's ({driver['name']}, fingerprint {driver['fingerprint']}): "
            "every node must hold the same data (and, for 'builtin', the same Python release)"
        )
    return data


def data_check(spec: StudySpec, data: str) -> dict[str, str] | None:
    """The name and fingerprint of the data as the driver reads it, for each run to compare with
    its own (:func:`_load_data`); None for a training function (it reads the data its own way).
    Data the driver cannot read, or too short for the context, is a StudyError naming the key
    (:func:`~sweeper.study.spec.check_data_content`'s line, else load_data's error): it had
    returned None, and every run then failed (``launch`` and ``validate`` refuse it first; this
    is the check of a caller that did not, such as ``estimate`` of a spec built in Python)."""
    if spec.train.function is not None:
        return None
    from proxy_models import load_data
    from sweeper.errors import StudyError
    from sweeper.study.spec import check_data_content

    if problems := check_data_content(spec):
        raise StudyError(problems, path=spec.source)
    try:  # read afresh, not from this process's cache: the file may have changed since
        d = load_data(data, vocab_size=spec.model.vocab_size)
    except (OSError, ValueError) as e:
        read = "" if data == spec.sweep.data else f" (read at {data})"
        raise StudyError(
            f"sweep.data: {spec.sweep.data!r}{read} cannot be read: {e}", path=spec.source
        ) from None
    return {"name": str(d.name), "fingerprint": str(d.fingerprint)}


def run_trial(config: Mapping[str, Any]) -> None:
    """Ray Tune function trainable: one training run (:func:`train_once`), reported to Tune.

    With ASHA it reports ``{"loss", "progress"}`` every ``eval_every`` steps, progress in percent of
    the steps and capped at 99 so that only the final report (``"final": True``, progress 100)
    counts as finished; a trial that Tune stops before that report was pruned.
    """
    from ray import tune

    try:
        out = train_once(config)
    except TrialError as e:
        if e.retryable:
            raise
        tune.report({METRIC: math.nan, "progress": 100.0, "final": True, USER_ERROR: str(e)})
        return
    tune.report({METRIC: float(out["val_loss"]), "progress": 100.0, "final": True, **out})


def train_once(config: Mapping[str, Any]) -> dict[str, Any]:
    """One training run of a trial's ``config`` (the built-in loop, your builder's model, or your
    training function), without Tune unless ``config["eval_every"]`` asks for reports: the
    ``TrainResult.to_dict()`` keys. :mod:`sweeper.run.estimate` times it on short budgets."""
    from proxy_models import HParams, ProxyConfig
    from proxy_models.hparams import batch_sizes

    own = config.get("own") or {}
    cfg = ProxyConfig(**config["model"])
    hp = HParams(**config["hparams"])
    total_steps = len(batch_sizes(hp, int(config["tokens"]), cfg.context))
    eval_every = config.get("eval_every")
    where = (
        f"train.function {own['function']!r}"
        if own.get("function")
        else f"model.builder {own['builder']!r}"
        if own.get("builder")
        else None
    )
    if own.get("function"):
        data = None
    else:  # outside the own code's errors: data that differs is no error of its code
        data = _load_data(config["data"], cfg.vocab_size, config.get("data_check"))
    try:
        if data is None:
            return _run_function(config, cfg, hp, own, total_steps)
        return _run_builtin(config, data, cfg, hp, own, total_steps, eval_every)
    except Exception as e:
        if where is None:
            raise
        tb = traceback.format_exc()
        raise TrialError(
            f"{where}: {type(e).__name__}: {e}\n{tb}", retryable=retryable(e)
        ) from e


def _tune_reporter(total_steps: int) -> Callable[[int, int, float], bool]:
    from ray import tune

    def send(step: int, tokens: int, loss: float) -> bool:
        tune.report(
            {
                METRIC: float(loss),
                "progress": min(PROGRESS_CAP, 100.0 * step / total_steps),
                "final": False,
                "step": step,
                "tokens_seen": int(tokens),
            }
        )
        return False

    return send


def _run_builtin(
    config: Mapping[str, Any],
    data: Any,
    cfg: Any,
    hp: Any,
    own: Mapping[str, Any],
    total_steps: int,
    eval_every: int | None,
) -> dict[str, Any]:
    from proxy_models import train

    builder = _builder(own)
    report = None
    if eval_every:
        send = _tune_reporter(total_steps)

        def report(step: int, metrics: dict[str, float]) -> bool:
            if metrics.get("final") or not _periodic(step, eval_every, total_steps):
                # train() calls report once more when the run is over: forwarded to Tune, that
                # call would be a non-final result ASHA could STOP on, losing the final report
                # of a fully trained (or diverged) run and leaving it PRUNED
                return False
            return send(step, int(metrics["tokens"]), float(metrics["val_loss"]))

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
        builder=builder,
    )
    return result.to_dict()


def _builder(own: Mapping[str, Any]) -> Any:
    if not own.get("builder"):
        return None
    from proxy_models.builder import Builder

    return Builder(own["builder"], tuple(own.get("args") or ()), own.get("param_roles"))


def _run_function(
    config: Mapping[str, Any], cfg: Any, hp: Any, own: Mapping[str, Any], total_steps: int
) -> dict[str, Any]:
    """One run of the study's training function (``proxy_models.train_function``)."""
    from proxy_models.builder import load_callable, prepare, shape_kwargs
    from proxy_models.train_function import KEY, honours_of, run_function, takes_model

    fn = load_callable(own["function"], KEY)
    honoured = set(honours_of(fn))
    hparams: dict[str, Any] = {
        "lr": hp.lr,
        "batch_size": hp.batch_size,
        "tokens": int(config["tokens"]),
        "seed": int(config["seed"]),
        "data": config["data"],
    }
    settings = own.get("settings", {})
    for k in sorted(honoured):  # the study's value, else the built-in loop's default
        if k in settings:
            hparams[k] = settings[k]
        elif hasattr(hp, k):
            hparams[k] = getattr(hp, k)
    model = None
    builder = _builder(own)
    if builder is not None and takes_model(fn):  # (else it only counts N: none built, a review)
        model = prepare(builder, cfg, seed=int(config["seed"]), device="cpu").model
    eval_every = config.get("eval_every")
    gate = None
    if eval_every:
        every_tokens = eval_every * hp.batch_size * cfg.context
        gate = _AshaGate(
            _tune_reporter(total_steps), eval_every, every_tokens, hparams["tokens"], total_steps
        )
    out = run_function(fn, hparams=hparams, shape=shape_kwargs(cfg), report=gate, model=model)
    if gate is not None and not out.get("diverged"):
        out["report_note"] = gate.note(own["function"])
    return out


@dataclass
class _AshaGate:
    """What a training function reports, forwarded to ASHA once per checkpoint (every
    ``eval_every`` steps, ``every_tokens`` tokens), never at or past the end of the run (its
    final report is the one that counts). A checkpoint is reached by the steps or the tokens
    reported, whichever is further: a loop that passed steps as tokens had sent ASHA nothing
    and was never pruned (an own-function audit); :meth:`note` says when nothing was sent."""

    send: Callable[[int, int, float], bool]
    eval_every: int
    every_tokens: int
    tokens: int
    total_steps: int
    next: int = 1
    calls: int = 0
    sent: int = 0
    last: tuple[int, int] = (0, 0)

    def __call__(self, step: int, tokens: int, loss: float) -> bool:
        self.calls += 1
        self.last = (step, tokens)
        if tokens >= self.tokens or step >= self.total_steps:
            return False
        reached = max(tokens // self.every_tokens, step // self.eval_every)
        if reached < self.next:
            return False
        self.next = reached + 1
        self.sent += 1
        return self.send(step, tokens, loss)

    def note(self, path: str) -> str | None:
        """One line when the run had checkpoints but ASHA got no report, else None."""
        if self.sent or self.total_steps <= self.eval_every:
            return None
        step, tokens = self.last
        said = (
            f"called report() {self.calls} time(s), the last at step {step:,} with tokens "
            f"{tokens:,}"
            if self.calls
            else "never called report()"
        )
        return (
            f"train.function {path!r} {said}: ASHA ([pruner] kind = 'asha') got no report at "
            f"its checkpoints (every {self.eval_every} steps or {self.every_tokens:,} tokens of "
            f"{self.total_steps} steps, {self.tokens:,} tokens) and could not prune the run; "
            "call report(step, tokens, loss) as training goes, tokens counted in tokens"
        )


def _periodic(step: int, eval_every: int, total_steps: int) -> bool:
    """Whether ``train``'s report at ``step`` (steps done) is a periodic evaluation: every
    ``eval_every`` steps, never the last step. (The end-of-run call also carries ``final``, which
    tells a run that diverged exactly on an evaluation step apart.)"""
    return step % eval_every == 0 and step < total_steps


def usable_cores() -> int:
    """Cores this process may run on (``taskset``/cgroup affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def device_kind(spec: StudySpec) -> str:
    """The kind of device the study's trials train on: "cuda" when a trial asks for a GPU (under
    bf16 autocast, in the built-in loop), else "cpu" (fp32)."""
    return "cuda" if spec.resources.gpu > 0 else "cpu"


def base_config(spec: StudySpec, data: str) -> dict[str, Any]:
    """What every trial of the study is given besides its cell and point."""
    r = spec.resources
    return {
        "data": data,
        "data_check": data_check(spec, data),
        "threads": max(1, math.floor(r.cpu)),
        # on a GPU trial, the trainer's own rule: CUDA when torch sees it, else the CPU
        "device": None if device_kind(spec) == "cuda" else "cpu",
        "eval_batches": spec.train.eval_batches,
        "eval_every": None,
    }


def trial_config(
    base: Mapping[str, Any],
    spec: StudySpec,
    cell: Cell,
    params: Mapping[str, Any],
    *,
    seed: int,
    tokens: int | None = None,
) -> dict[str, Any]:
    """One run's config: ``base`` (:func:`base_config`, and :func:`own_config` where the study
    has its own code) with the cell's model, the point's searched values and hyperparameters, the
    seed and the cell's budget (or ``tokens``). The searcher adds the trial's number."""
    from sweeper.study.space import hparams_kwargs  # not at the top: workers need no optuna here

    return {
        **base,
        "cell": cell.name,
        "seed": seed,
        "params": dict(params),
        "model": cell.proxy_config_kwargs(),
        "hparams": hparams_kwargs(spec, params),
        "tokens": cell.tokens if tokens is None else tokens,
    }


def own_config(spec: StudySpec) -> dict[str, Any]:
    """What a trial needs of the study's own code (empty for the built-in proxy and loop):
    ``builder``, ``args``, ``param_roles``, ``function`` and the study's fixed ``settings`` (for
    the function, which receives those it honours)."""
    m, t = spec.model, spec.train
    out: dict[str, Any] = {}
    if m.builder:
        out.update(builder=m.builder, args=list(m.args), param_roles=m.param_roles)
    if t.function:
        settings: dict[str, Any] = {
            "optimizer": t.optimizer,
            "weight_decay_tau": t.weight_decay_tau,
            "eval_batches": t.eval_batches,
            **{
                k: getattr(m, k)
                for k in (
                    "parametrization",
                    "norm",
                    "qk_norm",
                    "tied_embeddings",
                    "init_std",
                    "output_mult",
                    "base_width",
                    "base_depth",
                )
            },
        }
        out.update(function=t.function, settings=settings)
    return out


def trainable_for(spec: StudySpec) -> Callable[[dict[str, Any]], None]:
    """The trainable; with ASHA, it evaluates ``pruner.reports`` times per run. A study with its
    own code gets a trainable that adds :func:`own_config` to every trial's config."""
    own = own_config(spec)
    if spec.pruner.kind != "asha" and not own:
        return run_trial
    reports = spec.pruner.reports if spec.pruner.kind == "asha" else None

    def run_trial_own(config: dict[str, Any]) -> None:
        extra: dict[str, Any] = {"own": own} if own else {}
        if reports is not None:
            batch = int(config["hparams"]["batch_size"])
            steps = max(1, int(config["tokens"]) // (batch * int(config["model"]["context"])))
            extra["eval_every"] = max(1, steps // reports)
        run_trial({**config, **extra})

    run_trial_own.__name__ = "run_trial"
    return run_trial_own

"""Your training loop in the proxies' place: a function ``"package.module:function"`` that trains
one run and reports its losses.

The function is called as ``function(hparams=..., shape=..., report=...)`` (plus ``model=`` when
the study also names a ``model.builder`` and the function takes a ``model`` parameter: the
builder's model at the cell's shape, parametrized by Sweeper; under SP a function that does not
take it trains its own model, the builder then only counting N and memory):

- ``hparams``: ``lr``, ``batch_size`` (sequences), ``tokens`` (the budget), ``seed``, ``data``
  (the study's data source) and every study setting the function honours, by its short name
  (``schedule``, ``warmup``, ``grad_clip``, ...), at the study's value or its default;
- ``shape``: ``width``, ``depth``, ``heads``, ``head_dim``, ``vocab_size``, ``context``;
- ``report(step, tokens, loss)``: call it as training goes (the train loss is fine); it returns
  True when the run must stop (the divergence rule of the built-in loop, or ASHA), and the
  function should then return at once.

It returns a dict with ``val_loss`` (required) and optionally ``train_loss``, ``steps``,
``tokens``, ``diverged``. Before the call, torch (every device), numpy and ``random`` are seeded
from ``hparams["seed"]`` (:func:`seed_everything`). The tokens the run trained (what it returned,
else reported, else its steps × batch_size × context) are compared with ``hparams["tokens"]``: a
run more than :data:`TOKENS_SLACK` away from it keeps a one-line ``tokens_note`` (and is logged)
but is not refused, since a loop may stop a little early.

The function declares the study keys it honours as an attribute, ``function.honours =
("schedule", "warmup", ...)`` (:data:`HONOURABLE` lists them); a study that sets any other key
away from its default is refused at validate, so that a law's conventions never describe a recipe
that did not run.
"""

from __future__ import annotations

import inspect
import logging
import math
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from proxy_models.builder import BuilderError, load_callable

__all__ = [
    "HONOURABLE",
    "IMPLIED",
    "KEY",
    "TOKENS_SLACK",
    "applied_to_model",
    "check_function",
    "honours_of",
    "run_function",
    "seed_everything",
    "takes_model",
]

logger = logging.getLogger(__name__)

#: the study key that names a training function
KEY: Final[str] = "train.function"
#: study keys a training function may honour (short name -> the study key it stands for)
HONOURABLE: Final[dict[str, str]] = {
    **{
        k: f"train.{k}"
        for k in (
            "schedule",
            "min_lr_ratio",
            "decay_fraction",
            "beta1",
            "eps",
            "grad_clip",
            "z_loss",
            "micro_batch_size",
            "optimizer",
            "weight_decay_tau",
            "eval_batches",
        )
    },
    **{k: f"search.{k}" for k in ("warmup", "weight_decay", "beta2")},
    **{
        k: f"model.{k}"
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
#: what honouring a key implies honouring too: a parametrization is applied relative to its base
#: shape, so a function that honours it receives the base width and depth (an own-model audit:
#: such a function was refused for a base_width it needs, and not passed the default one)
IMPLIED: Final[dict[str, tuple[str, ...]]] = {"parametrization": ("base_width", "base_depth")}
_MARGIN: Final[float] = 1.0  # as proxy_models.training.DIVERGE_MARGIN
_MARGIN_EARLY: Final[float] = 3.0  # as DIVERGE_MARGIN_WARMUP, over the first 10% (tokens or steps)
_WINDOW: Final[int] = 10
#: how far (a fraction of the budget) a run's trained tokens may stray from ``hparams["tokens"]``
#: before its result keeps a ``tokens_note``: a loop may stop a little early or round its steps
TOKENS_SLACK: Final[float] = 0.1


def honours_of(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The short names of the study keys ``fn`` declares it honours (``fn.honours``), with what
    they imply (:data:`IMPLIED`)."""
    h = getattr(fn, "honours", ())
    if isinstance(h, str):
        h = (h,)
    declared = tuple(str(x) for x in h)
    implied = [k for d in declared for k in IMPLIED.get(d, ()) if k not in declared]
    return declared + tuple(dict.fromkeys(implied))


def applied_to_model(parametrization: str) -> tuple[str, ...]:
    """The study keys Sweeper itself applies to a builder's model it passes as ``model=``
    (:func:`proxy_models.builder.prepare`): the output multiplier's hook, and under muP and
    CompleteP the init by role. A function that takes that model need not honour them (an
    own-model audit: such a study's init_std was refused, and its law recorded the init as
    unknown, though Sweeper had drawn it)."""
    return ("output_mult",) + (("init_std",) if parametrization != "sp" else ())


def takes_model(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` accepts ``model=`` beside ``hparams``, ``shape`` and ``report`` (a
    signature Python cannot read counts as taking it, as the call would then try)."""
    try:
        inspect.signature(fn).bind(hparams={}, shape={}, report=None, model=None)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def check_function(path: str, *, builder_parametrization: str | None = None) -> list[str]:
    """Problems with the training function at ``path`` (import, signature, ``honours``), one line
    each naming ``train.function``. ``builder_parametrization``: the parametrization of the
    study's builder, when it names one; under muP or CompleteP the function must take the model
    Sweeper parametrized (:func:`_model_problem`)."""
    try:
        fn = load_callable(path, KEY)
    except BuilderError as e:
        return [str(e)]
    out: list[str] = []
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return out
    with_model = builder_parametrization is not None and takes_model(fn)
    try:
        sig.bind(hparams={}, shape={}, report=None, **({"model": None} if with_model else {}))
    except TypeError as e:
        need = "hparams, shape, report" + (", model" if with_model else "")
        out.append(f"{KEY}: {path!r} must take the keyword arguments {need} ({e})")
    else:
        out += _model_problem(fn, path, builder_parametrization)
    unknown = [h for h in honours_of(fn) if h not in HONOURABLE]
    if unknown:
        out.append(
            f"{KEY}: {path!r} declares honours it cannot have: {', '.join(unknown)} (known: "
            f"{', '.join(HONOURABLE)})"
        )
    return out


def _model_problem(fn: Callable[..., Any], path: str, parametrization: str | None) -> list[str]:
    """A builder beside a function that does not take ``model=``: fine under SP (the builder
    only counts N and memory: the function trains its own model), refused under muP and
    CompleteP, which Sweeper applies to the builder's model and which would reach no model the
    function trains (an own-model audit: it was refused under SP too, against the docs)."""
    if parametrization in (None, "sp") or takes_model(fn):
        return []
    return [
        f"{KEY}: {path!r} must take model= under {parametrization}: Sweeper applies "
        f"{parametrization} to the builder's model and passes it as model=, so a function that "
        "trains a model of its own would not train what was parametrized (under sp a builder "
        "beside such a function only counts N and memory)"
    ]


@dataclass
class _Watch:
    """The report callback handed to the function: divergence check, forwarding, bookkeeping."""

    tokens_budget: int
    forward: Callable[[int, int, float], bool] | None
    #: the steps the budget makes at the run's batch size and context (0: not known)
    steps_budget: int = 0
    losses: list[float] = field(default_factory=list)
    step: int = 0
    tokens: int = 0
    diverged: bool = False
    stopped: bool = False

    def __call__(self, step: int, tokens: int, loss: float) -> bool:
        self.step, self.tokens = int(step), int(tokens)
        loss = float(loss)
        self.losses.append(loss)
        early = self.fraction() < 0.1
        window = self.losses[-_WINDOW:]
        margin = _MARGIN_EARLY if early else _MARGIN
        if not math.isfinite(loss) or sum(window) / len(window) > self.losses[0] + margin:
            self.diverged = True
            return True
        if self.forward is not None and self.forward(self.step, self.tokens, loss):
            self.stopped = True
            return True
        return False

    def fraction(self) -> float:
        """How far the run is, by its tokens or by its steps, whichever says further: a loop
        that reports steps where tokens are expected had kept the lenient early margin to its
        end (an own-function audit)."""
        by_tokens = self.tokens / self.tokens_budget if self.tokens_budget > 0 else 0.0
        by_steps = self.step / self.steps_budget if self.steps_budget > 0 else 0.0
        return max(by_tokens, by_steps)


def run_function(
    fn: Callable[..., Any],
    *,
    hparams: Mapping[str, Any],
    shape: Mapping[str, int],
    report: Callable[[int, int, float], bool] | None = None,
    model: Any = None,
) -> dict[str, Any]:
    """Call ``fn`` for one run and return its result in the built-in loop's form
    (``TrainResult.to_dict()`` keys, None where the function did not say): divergence detected by
    the report callback or a non-finite ``val_loss`` sets ``diverged`` (and ``val_loss`` to the
    first reported loss, or ln(vocab)); so does a ``FloatingPointError`` raised by ``fn`` (the
    way many loops stop on a NaN: the run then bounds the LR range, as a diverged one does,
    instead of failing the trial). ``report`` receives what the function reports while no stop
    was asked. Other exceptions from ``fn`` propagate; a result without one number as
    ``val_loss`` is a :class:`BuilderError`. ``hparams`` reaches ``fn`` as a dict whose missing
    key raises a KeyError naming the keys passed and ``function.honours``. Torch, numpy and
    ``random`` are seeded from ``hparams["seed"]`` first (:func:`seed_everything`); the tokens
    trained are checked against ``hparams["tokens"]`` (:func:`_tokens_note`)."""
    t0 = time.perf_counter()
    budget = int(hparams["tokens"])
    watch = _Watch(budget, report, _steps_budget(hparams, shape))
    passed = _HParams(hparams, honours=honours_of(fn))
    kwargs: dict[str, Any] = {"hparams": passed, "shape": dict(shape), "report": watch}
    if model is not None and takes_model(fn):  # (under sp a function may train its own)
        kwargs["model"] = model
    seed_everything(int(hparams["seed"]))
    try:
        out = fn(**kwargs)
    except FloatingPointError as e:  # (said, since a bug elsewhere can raise it too)
        logger.warning(
            "train.function raised FloatingPointError (%s): the run counts as diverged", e
        )
        out = {"val_loss": math.nan, "diverged": True}
    _check_result(out)
    val = _loss(out, "val_loss")
    diverged = watch.diverged or _flag(out.get("diverged", False))
    init = watch.losses[0] if watch.losses else math.nan
    if not math.isfinite(val):
        diverged = True
        val = init if math.isfinite(init) else math.log(int(shape["vocab_size"]))
    finite = [x for x in watch.losses if math.isfinite(x)]
    wall = time.perf_counter() - t0
    trained, source = _trained(out, watch, hparams, shape)
    tokens = trained or 0
    note = None
    if not (diverged or watch.stopped):  # (a run stopped early trains less, and rightly so)
        by_steps = _by_steps(out, watch, hparams, shape)
        note = _tokens_note(_name(fn), budget, trained, source, by_steps)
    if note:
        logger.warning("%s", note)
    return {
        "val_loss": val,
        "train_loss": _train_loss(out, finite[-1] if finite else val),
        "init_loss": init if math.isfinite(init) else None,
        "diverged": diverged,
        "stopped": watch.stopped,
        "tokens": tokens,
        "steps": int(out.get("steps", watch.step) or 0),
        "wall_s": wall,
        "tokens_per_s": tokens / wall if wall > 0 else 0.0,
        "flops_per_s": None,
        "grad_norm_mean": None,
        "grad_norm_max": None,
        "n_params": out.get("n_params"),
        "n_params_total": out.get("n_params_total"),
        "device": str(out.get("device", "cpu")),
        "tokens_note": note,
    }


def seed_everything(seed: int) -> None:
    """Seed torch (the CPU and every GPU), numpy's global generator and ``random`` from the
    trial's seed before the function runs. A Ray worker is reused, so a function that draws
    before it seeds itself (or never does) drew from whatever the worker had run before:
    identical runs gave different losses (an own-function audit)."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _name(fn: Callable[..., Any]) -> str:
    """``module:function`` as a study names it (for messages)."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _steps_budget(hparams: Mapping[str, Any], shape: Mapping[str, int]) -> int:
    """The optimizer steps ``hparams["tokens"]`` makes at its batch size and the context (as the
    trainable counts them); 0 when either is missing."""
    per_step = int(hparams.get("batch_size") or 0) * int(shape.get("context") or 0)
    return max(1, int(hparams["tokens"]) // per_step) if per_step > 0 else 0


def _by_steps(
    out: Mapping[str, Any], watch: _Watch, hparams: Mapping[str, Any], shape: Mapping[str, int]
) -> tuple[int, str] | None:
    """The tokens the run's steps make (returned ``steps``, else the last step reported) ×
    batch_size × context, and how; None when it gave no steps."""
    steps = int(out.get("steps", watch.step) or 0)
    batch, context = int(hparams.get("batch_size") or 0), int(shape.get("context") or 0)
    if steps <= 0 or batch <= 0 or context <= 0:
        return None
    return steps * batch * context, f"{steps} steps × batch_size {batch} × context {context}"


def _trained(
    out: Mapping[str, Any], watch: _Watch, hparams: Mapping[str, Any], shape: Mapping[str, int]
) -> tuple[int | None, str]:
    """The tokens the run trained as far as Sweeper can tell, and where the figure comes from:
    the ``tokens`` it returned, else the ``steps`` it returned × batch_size × context, else the
    last tokens it reported, else its last reported step's; None when it said none of them.
    (The first and third had been taken as they came, 0 when the function said neither: an
    own-function audit. The returned steps come before the last report, which a loop that
    reports every 10 steps makes before its end: a review's full 16-step run read 62%.)"""
    if out.get("tokens") is not None:
        return int(out["tokens"]), "returned as 'tokens'"
    if out.get("steps") is not None and (steps := _by_steps(out, watch, hparams, shape)):
        return steps[0], f"{steps[1]}, the steps it returned"
    if watch.losses:
        return watch.tokens, "the last tokens passed to report()"
    steps = _by_steps(out, watch, hparams, shape)
    if steps is not None:
        return steps[0], f"{steps[1]}: it returned no 'tokens' and never called report()"
    return None, ""


def _tokens_note(
    name: str, budget: int, trained: int | None, source: str, by_steps: tuple[int, str] | None
) -> str | None:
    """One line when the run trained (or says it trained) more than :data:`TOKENS_SLACK` away
    from its budget ``hparams["tokens"]``, else None. An own-function audit: a loop that ignored
    the budget (5 steps, 1,280 of 4,096 tokens) and one that passed steps to ``report`` as
    tokens were fitted at the budget in silence. Not refused: a loop may stop early on purpose,
    and the run is still a measurement, only not at the cell's tokens."""
    if trained is None or budget <= 0 or abs(trained - budget) <= TOKENS_SLACK * budget:
        return None
    pct = 100 * trained / budget
    share = f"{pct:.0f}%" if pct >= 1 or pct == 0 else f"{pct:.2g}%"
    note = (
        f"{KEY} {name!r} trained {trained:,} tokens ({source}) where its budget "
        f"hparams['tokens'] is {budget:,} ({share})"
    )
    if by_steps is not None and abs(by_steps[0] - budget) <= TOKENS_SLACK * budget:
        note += (
            f"; its {by_steps[1]} make {by_steps[0]:,} (does it pass steps where report(step, "
            "tokens, loss) or its 'tokens' expects tokens?)"
        )
    return note + (
        "; the run is fitted at its cell's tokens all the same: train hparams['tokens'] tokens "
        "and report or return the tokens trained"
    )


def _flag(v: Any) -> bool:
    """A returned ``diverged`` as a bool: True/False (numpy's too) or 0/1; BuilderError for
    anything else (the string "no" had been read as True, and the run stored as diverged)."""
    import numpy as np

    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise BuilderError(KEY, f"returned diverged={v!r} ({type(v).__name__}): give True or False")


def _check_result(out: Any) -> None:
    """BuilderError unless the function returned a dict with ``val_loss`` (naming what came)."""
    if not isinstance(out, Mapping):
        raise BuilderError(KEY, f"returned {type(out).__name__}, not a dict with 'val_loss'")
    if "val_loss" not in out:
        keys = ", ".join(map(repr, out)) or "none"
        raise BuilderError(
            KEY,
            f"returned dict without 'val_loss' (its keys: {keys}); a dict with val_loss is "
            "required",
        )


def _loss(out: Mapping[str, Any], key: str, default: float | None = None) -> float:
    """``out[key]`` as a float: a number, or a 0-d or 1-element tensor or array (NaN/inf kept:
    a divergence); ``default`` when given and the key is left out or None. BuilderError for
    anything else (None as val_loss, a per-token vector): it was stored as a diverged run."""
    v: Any = out.get(key)
    if v is None and default is not None:
        return default
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    shape = getattr(v, "shape", None)
    if shape is not None and math.prod(shape) == 1 and hasattr(v, "item"):
        return float(v.item())
    what = f"{key}={v!r} ({type(v).__name__})"
    if shape is not None:
        what = f"{key} of type {type(v).__name__} and shape {tuple(shape)}"
    raise BuilderError(
        KEY,
        f"returned {what}: give one number (a float, or a 0-d or 1-element tensor: a "
        "per-token loss needs .mean())",
    )


def _train_loss(out: Mapping[str, Any], watched: float) -> float:
    """The optional ``train_loss``: one number as :func:`_loss` reads it, else the last loss the
    function reported (with a warning: unlike ``val_loss``, nothing is fitted on it)."""
    try:
        return _loss(out, "train_loss", watched)
    except BuilderError as e:
        logger.warning("%s; the last reported loss is used as train_loss", e)
        return watched


class _HParams(dict[str, Any]):
    """The ``hparams`` handed to the function: a dict whose missing key says what is passed."""

    def __init__(self, items: Mapping[str, Any], *, honours: tuple[str, ...]) -> None:
        super().__init__(items)
        self.honours = honours

    def __missing__(self, key: str) -> Any:
        raise HParamKeyError(key, tuple(self), self.honours)


class HParamKeyError(KeyError):
    """A key the function reads from ``hparams`` that is not passed: which keys are, and how to
    receive a setting (``function.honours``). One line; still a KeyError."""

    def __init__(self, key: str, passed: tuple[str, ...], honours: tuple[str, ...]) -> None:
        super().__init__(key, passed, honours)
        self.message = f"hparams has no {key!r}: it holds {', '.join(map(repr, passed))}"
        if key in HONOURABLE and key not in honours:
            self.message += (
                ", and a study setting only when the function declares it: "
                f"function.honours = {(*honours, key)!r} (docs/OWN_MODEL.md)"
            )
        elif key in honours:
            self.message += f" ({key!r} is honoured, but has no value or default here)"
        else:
            self.message += f"; settings a function may honour: {', '.join(HONOURABLE)}"

    def __str__(self) -> str:
        return self.message

"""The recipe for a big run: every number its framework config needs, with intervals, provenance
and warnings, as one frozen object and its versioned JSON form.

:func:`~sweeper.recipe.recommend.recommend` makes a :class:`Recipe`; the exports
(:mod:`~sweeper.recipe.export`) write it in a framework's format; :meth:`Recipe.to_dict` /
:func:`recipe_from_dict` are its JSON form (``sweeper recommend --json``, ``sweeper export
--format json``, read back by ``sweeper export --recipe-json``).

The JSON form (schema :data:`RECIPE_SCHEMA`, version :data:`RECIPE_SCHEMA_VERSION`) has one key per
field of :class:`Recipe` (described in :data:`FIELD_DOCS`, with units), the keys ``schema`` and
``schema_version``, and a few values derived from the others (:data:`DERIVED`: ``min_lr``,
``warmup_tokens``, ``hidden_init_std``, ``memory_gb_per_gpu``, ``train_flops``; and in
``rampup``, its ``total_steps`` and ``warmup_steps``) written for readers. Reading it
back refuses an unknown key (named), a schema version newer than this one, and a derived value
that disagrees with the fields it comes from: the min LR is stored as ``min_lr_ratio``, so a recipe
whose ``lr`` was edited must drop ``min_lr`` or set it to ``lr.value × min_lr_ratio``. A recipe
written before the schema existed (no ``schema_version``: version 1) is read the same way, with
``lr_point`` = ``lr.value`` and ``optimizer`` = ``"adamw"``; a version 1 or 2 recipe is a cosine
(``decay_fraction`` null).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, Final

from proxy_models.hparams import OPTIMIZERS
from proxy_models.rules import PARAMETRIZATIONS, Rules
from sweeper.errors import TargetError
from sweeper.recipe.hardware import Hardware, RampUp
from sweeper.recipe.memory import MemoryEstimate
from sweeper.recipe.schedule import schedule_problems
from sweeper.recipe.target import Target

__all__ = [
    "DERIVED",
    "FIELD_DOCS",
    "NO_INTERVAL",
    "RECIPE_SCHEMA",
    "RECIPE_SCHEMA_VERSION",
    "Interval",
    "RampUp",
    "Recipe",
    "recipe_from_dict",
    "recipe_json_schema",
]

#: the ``schema`` key of the recipe JSON
RECIPE_SCHEMA: Final[str] = "sweeper-recipe"
#: 4: ``train_flops`` (the output layer's FLOPs counted, as the time counts them), the ramp-up's
#: ``total_steps`` and ``warmup_steps`` (Megatron-LM's steps with it) and
#: ``extrapolation_below`` added (a recommend audit); 3: the schedule follows the LR law's
#: (cosine | wsd | linear | constant), decay_fraction added (an older reader would export a WSD
#: recipe as a cosine); 2: schema/schema_version, lr_point, optimizer and base_head_dim added,
#: min LR checked against the ratio (issue #15); 1: the form
#: before (no schema_version key)
RECIPE_SCHEMA_VERSION: Final[int] = 4
#: keys of the JSON form derived from the fields (checked on reading, never trusted)
DERIVED: Final[tuple[str, ...]] = (
    "min_lr",
    "warmup_tokens",
    "hidden_init_std",
    "memory_gb_per_gpu",
    "train_flops",
)
#: relative tolerance when a derived value is checked against the fields it comes from
_REL: Final[float] = 1e-9
#: how text writes a degenerate :class:`Interval` (low = high)
NO_INTERVAL: Final[str] = (
    "no interval: the law carries no uncertainty (a published law as printed, or a fit without "
    "resamples)"
)


@dataclass(frozen=True)
class Interval:
    """A value with its interval (``low``, ``high``); a published law gives low = high = value."""

    value: float
    low: float
    high: float

    @property
    def degenerate(self) -> bool:
        return self.low == self.high

    def text(self, digits: int = 3, label: str = "") -> str:
        """The interval as the terminal recipe and the export headers write it: ``label [low,
        high]`` (``digits`` significant digits), or :data:`NO_INTERVAL` when degenerate (low =
        high: the law has no uncertainty, a published law above all), never a zero-width
        ``[x, x]``. The report page shows the same text (:mod:`sweeper.recipe.table`)."""
        if self.degenerate:
            return NO_INTERVAL
        span = f"[{self.low:.{digits}g}, {self.high:.{digits}g}]"
        return f"{label} {span}" if label else span

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Recipe:
    """A full training recipe with intervals, provenance and warnings.

    ``lr.value`` is the peak LR the exports write (the recommended LR), ``lr_point`` the LR law's
    point estimate at the target (equal to ``lr.value`` unless a risk-aware choice moved it).
    ``batch_tokens.value`` is the batch actually used (``global_batch_sequences · seq_len``), its
    ``low``/``high`` the law's interval; ``batch_tokens_law`` the law's point value. The batch
    identity ``global_batch_sequences = micro_batch_size · grad_accum_steps · data_parallel``
    always holds. ``total_steps`` and ``warmup_steps`` count optimizer steps at the full batch; a
    ramp-up, run by samples, takes more (:meth:`rampup_steps`: Megatron-LM's rule before core
    0.18, which drops the last partial batch; from 0.18 it counts as one more step, which the
    megatron export says; 5% more in a recommend audit, and a warmup of 2000 full batches of
    samples ending at step 11,723).
    ``flops`` is Sweeper's compute, 6·N·D + attention (the laws' convention and a compute
    target's budget); :attr:`train_flops` adds the output layer, 6·V·d·D, which the time counts.
    The min LR is ``lr.value × min_lr_ratio`` (``min_lr``, derived; a ``min_lr`` given to the
    constructor must agree); the LR follows ``schedule`` (with
    ``decay_fraction`` for WSD) as :mod:`sweeper.recipe.schedule` says (:func:`recipe_lr`, the
    proxies' ``lr_at``). LRs are peak/min LRs of ``optimizer``;
    memory in GiB per GPU; time in seconds. See :data:`FIELD_DOCS` for every field.
    ``str(recipe)`` (and a notebook's display) is the table ``sweeper recommend`` prints, then
    the warnings, most important first.
    """

    def __str__(self) -> str:
        from sweeper.recipe.table import recipe_rows

        rows = recipe_rows(self)
        width = max(len(name) for name, _v, _n in rows)
        lines = [f"{name:<{width}}  {value}" + (f"  ({note})" if note else "")
                 for name, value, note in rows]  # fmt: skip
        return "\n".join(lines + [f"warning: {w}" for w in self.warnings])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter's display
        p.text(str(self))

    def __repr__(self) -> str:
        """One line (the dataclass's own ran to 9,000 characters in a log or a list; an API
        audit); ``str`` is the whole table."""
        return (
            f"<Recipe lr {self.lr.value:.4g} ({self.optimizer}, {self.schedule}), batch "
            f"{self.global_batch_sequences} x {self.seq_len}, {self.total_steps} steps, "
            f"N {self.n_params:.3g}, D {self.tokens:.3g}, {len(self.warnings)} warning(s)>"
        )

    lr: Interval
    batch_tokens: Interval
    batch_tokens_law: float
    global_batch_sequences: int
    micro_batch_size: int
    grad_accum_steps: int
    data_parallel: int
    seq_len: int
    min_lr_ratio: float
    warmup_steps: int
    total_steps: int
    tokens: float
    schedule: str
    rampup: RampUp | None
    adam_beta1: float
    adam_beta2: float
    adam_eps: float
    weight_decay: float
    grad_clip: float
    init_std: float
    z_loss: float
    n_params: float
    n_params_total: float
    width: int
    depth: int
    heads: int
    vocab: int
    shape_inferred: bool
    flops: float
    parametrization: str
    base_width: int | None
    base_depth: int | None
    precision: str
    memory: MemoryEstimate
    train_time_s: float | None
    predicted_loss: float | None
    extrapolation_factor: float | None
    extrapolation: Mapping[str, float]
    warnings: tuple[str, ...]
    law_ids: tuple[int | str, ...]
    provenance: Mapping[str, Mapping[str, Any]]
    target: Target
    hardware: Hardware
    level: float = 0.95
    init_std_note: str = ""  # what init_std is: the SP heuristic, or the proxies' muP base std
    bytes_per_token: float | None = None  # the conversion applied to laws that count bytes
    #: the LR law's output (logit) multiplier: the LR was measured with it (1.0: none)
    output_mult: float = 1.0
    #: the LR law's point estimate at the target (NaN: the same as ``lr.value``)
    lr_point: float = math.nan
    #: the optimizer the LR is for (one of proxy_models.hparams.OPTIMIZERS)
    optimizer: str = "adamw"
    #: the proxies' head size at the base width (muP attention scale); None: not recorded
    base_head_dim: int | None = None
    #: expected regret (% of the loss) of ``lr`` and of ``lr_point`` over the LR law's
    #: uncertainty and loss curve (None: the law does not know its loss curve)
    lr_regret_pct: float | None = None
    lr_point_regret_pct: float | None = None
    #: WSD: the share of the steps spent decaying (None for the other schedules)
    decay_fraction: float | None = None
    #: derived: lr.value × min_lr_ratio (NaN: derive it; a value given must agree)
    min_lr: float = math.nan
    #: predictor -> smallest proxy / target, where the target lies below a law's smallest proxy
    #: (``extrapolation_factor`` is then below 1, which says in range to no one: an audit)
    extrapolation_below: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unit = self.micro_batch_size * self.grad_accum_steps * self.data_parallel
        if unit != self.global_batch_sequences:
            raise TargetError(
                f"global batch {self.global_batch_sequences} != micro_batch_size "
                f"{self.micro_batch_size} × grad_accum_steps {self.grad_accum_steps} × "
                f"data_parallel {self.data_parallel} = {unit}"
            )
        self._check_steps()
        self._check_values()
        self._check_rampup()
        if self.data_parallel != self.hardware.gpus:
            raise TargetError(
                f"data_parallel {self.data_parallel} disagrees with hardware.gpus "
                f"{self.hardware.gpus}: the memory estimate and the ZeRO notes are for the latter"
            )
        if self.optimizer not in OPTIMIZERS:
            raise TargetError(f"optimizer {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        problems = schedule_problems(self.schedule, self.min_lr_ratio, self.decay_fraction)
        if problems:
            raise TargetError("recipe schedule: " + "; ".join(problems))
        if math.isnan(self.lr_point):
            object.__setattr__(self, "lr_point", self.lr.value)
        derived = self.lr.value * self.min_lr_ratio
        if math.isnan(self.min_lr):
            object.__setattr__(self, "min_lr", derived)
        elif not math.isclose(self.min_lr, derived, rel_tol=_REL, abs_tol=0.0):
            raise TargetError(
                f"min_lr {self.min_lr:.6g} disagrees with lr {self.lr.value:.6g} × min_lr_ratio "
                f"{self.min_lr_ratio:g} = {derived:.6g}: the min LR is stored as the ratio "
                "(drop min_lr, or change min_lr_ratio)"
            )

    def _check_values(self) -> None:
        """The peak LR positive and finite, the warmup steps a count within the
        steps (TargetError): an edited recipe had exported ``lr: .nan``, ``lr: -1.0`` and a warmup
        of -5 steps, and a NaN LR was blamed on the min LR (an API audit)."""
        if not (math.isfinite(self.lr.value) and self.lr.value > 0):  # (an interval may be open)
            raise TargetError(f"lr must be positive and finite, got {self.lr.value!r}")
        problems = [
            f"{name} must be {rule}, got {v!r}"
            for name, v, rule, ok in (
                ("width", self.width, ">= 1", self.width >= 1),
                ("depth", self.depth, ">= 1", self.depth >= 1),
                ("heads", self.heads, ">= 1 and divide width", self.heads >= 1
                 and self.width % self.heads == 0),
                ("vocab", self.vocab, ">= 1", self.vocab >= 1),
                ("adam_beta1", self.adam_beta1, "in [0, 1)", 0 <= self.adam_beta1 < 1),
                ("adam_beta2", self.adam_beta2, "in (0, 1)", 0 < self.adam_beta2 < 1),
                ("adam_eps", self.adam_eps, "positive and finite", 0 < self.adam_eps < math.inf),
                ("weight_decay", self.weight_decay, ">= 0 and finite",
                 0 <= self.weight_decay < math.inf),
                ("grad_clip", self.grad_clip, ">= 0 and finite (0: no clipping)",
                 0 <= self.grad_clip < math.inf),
                ("init_std", self.init_std, "positive and finite", 0 < self.init_std < math.inf),
                ("z_loss", self.z_loss, ">= 0 and finite", 0 <= self.z_loss < math.inf),
                ("parametrization", self.parametrization, f"one of {', '.join(PARAMETRIZATIONS)}",
                 self.parametrization in PARAMETRIZATIONS),
            )
            if not ok
        ]  # fmt: skip
        if problems:  # (an edited JSON: width 0 had divided by zero in an export; a CLI audit)
            raise TargetError("recipe: " + "; ".join(problems))
        if not 0 <= self.warmup_steps <= self.total_steps:
            raise TargetError(
                f"warmup_steps must be between 0 and total_steps {self.total_steps}, got "
                f"{self.warmup_steps!r}"
            )

    def _check_rampup(self) -> None:
        """The batch ramp-up a framework can run (TargetError): whole steps of micro batch ×
        GPUs from a start below the global batch up to it, within the run's tokens. An edited
        recipe JSON had exported an empty Megatron schedule (start above the batch), a ramp
        stuck at 996 of 1024, and one Megatron's ramp-up calculator asserts against."""
        ru = self.rampup
        if ru is None:
            return
        unit = self.micro_batch_size * self.data_parallel
        rules = (
            (ru.start_sequences >= unit and ru.start_sequences % unit == 0,
             f"start_sequences {ru.start_sequences} must be a positive multiple of micro batch "
             f"× data_parallel = {unit}"),
            (ru.increment_sequences >= unit and ru.increment_sequences % unit == 0,
             f"increment_sequences {ru.increment_sequences} must be a positive multiple of {unit}"),
            (ru.start_sequences < self.global_batch_sequences,
             f"start_sequences {ru.start_sequences} must be below the global batch "
             f"{self.global_batch_sequences}"),
            ((self.global_batch_sequences - ru.start_sequences) % max(1, ru.increment_sequences)
             == 0, f"the global batch {self.global_batch_sequences} must be start_sequences "
             f"{ru.start_sequences} plus whole increments of {ru.increment_sequences}"),
            (ru.ramp_samples >= 1 and ru.ramp_tokens == ru.ramp_samples * self.seq_len,
             f"ramp_tokens {ru.ramp_tokens} must be ramp_samples {ru.ramp_samples} × seq_len "
             f"{self.seq_len}, ramp_samples >= 1"),
            (ru.ramp_tokens <= self.tokens,
             f"the ramp's {ru.ramp_tokens:.4g} tokens exceed the run's {self.tokens:.4g}"),
        )  # fmt: skip
        problems = [text for ok, text in rules if not ok]
        if problems:
            raise TargetError("recipe rampup: " + "; ".join(problems))

    def _check_steps(self) -> None:
        """The batch used and the step count agree with the global batch and D (TargetError): an
        edited recipe JSON whose batch changed alone had exported twice its D as litgpt's
        max_tokens, and a header's batch that was not the one written (an audit)."""
        if not (math.isfinite(self.tokens) and self.tokens > 0):
            raise TargetError(f"tokens must be positive and finite, got {self.tokens!r}")
        if self.seq_len < 1 or self.global_batch_sequences < 1:
            raise TargetError(
                f"seq_len and global_batch_sequences must be >= 1, got {self.seq_len} and "
                f"{self.global_batch_sequences}"
            )
        used = self.global_batch_sequences * self.seq_len
        if not math.isclose(self.batch_tokens.value, used, rel_tol=_REL, abs_tol=0.0):
            raise TargetError(
                f"batch_tokens {self.batch_tokens.value:.6g} disagrees with "
                f"global_batch_sequences {self.global_batch_sequences} × seq_len {self.seq_len} "
                f"= {used}: the batch used is the global batch (change both, and total_steps)"
            )
        steps = math.ceil(self.tokens / used)
        if self.total_steps != steps:
            raise TargetError(
                f"total_steps {self.total_steps} disagrees with tokens {self.tokens:.6g} / batch "
                f"{used} tokens = {steps} steps (rounded up): the steps follow D and the batch"
            )

    @property
    def warmup_tokens(self) -> int:
        """The warmup's tokens: ``warmup_steps`` full batches (a ramp-up's exports count them in
        samples, so the tokens hold; its steps are :meth:`rampup_steps`' second)."""
        return self.warmup_steps * self.global_batch_sequences * self.seq_len

    def rampup_steps(self) -> tuple[int, int]:
        """(total, warmup) optimizer steps with the ramp-up, as Megatron-LM before core 0.18 runs
        them (from 0.18 the last partial batch is one step more: the megatron export counts its
        version's) (:meth:`RampUp.train_iterations` of the run's sequences, :meth:`RampUp.iterations` of
        the warmup's ``warmup_steps`` full batches of samples); ``total_steps`` and
        ``warmup_steps`` without one."""
        if self.rampup is None:
            return self.total_steps, self.warmup_steps
        g = self.global_batch_sequences
        samples = math.ceil(self.tokens / self.seq_len)
        warmup = self.rampup.iterations(g, self.warmup_steps * g)
        return self.rampup.train_iterations(g, samples), warmup

    @property
    def head_flops(self) -> float:
        """The output layer's training FLOPs, 6·V·d·D: not in ``flops`` (the laws' convention,
        which leaves it out), but done (7–16% of a model's at a 256K vocabulary)."""
        from sweeper.recipe.memory import head_flops

        return head_flops(self.vocab, self.width, self.tokens)

    @property
    def train_flops(self) -> float:
        """All the training FLOPs the recipe counts: ``flops`` plus the output layer's."""
        return self.flops + self.head_flops

    @property
    def memory_gb_per_gpu(self) -> float:
        return self.memory.total_gb

    def rules(self) -> Rules:
        """The parametrization's multipliers at the target's shape (:mod:`proxy_models.rules`)."""
        base_width = self.base_width or self.width
        base_depth = self.base_depth or self.depth
        return Rules(self.parametrization, self.width, self.depth, base_width, base_depth)

    @property
    def hidden_init_std(self) -> float:
        """Init std of the hidden matrices at the target width: ``init_std`` under SP, and
        init_std·sqrt(base_width / width) under muP/CompleteP (embeddings keep ``init_std``)."""
        return self.rules().hidden_init_std(self.init_std)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``schema``, ``schema_version``, one key per field, and the derived
        :data:`DERIVED` values; :func:`recipe_from_dict` reads it back."""
        out: dict[str, Any] = {"schema": RECIPE_SCHEMA, "schema_version": RECIPE_SCHEMA_VERSION}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, (Interval, MemoryEstimate)):
                v = v.to_dict()
            elif isinstance(v, RampUp):
                v = v.to_dict(self.global_batch_sequences)
                v["total_steps"], v["warmup_steps"] = self.rampup_steps()
            elif isinstance(v, (Target, Hardware)):
                v = asdict(v)
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = {k: dict(x) if isinstance(x, Mapping) else x for k, x in v.items()}
            out[f.name] = v
        out["memory_gb_per_gpu"] = self.memory_gb_per_gpu
        out["warmup_tokens"] = self.warmup_tokens
        out["hidden_init_std"] = self.hidden_init_std
        out["train_flops"] = self.train_flops
        return out


#: every key of the JSON form: what it is, in which unit
FIELD_DOCS: Final[Mapping[str, str]] = {
    "schema": f'always "{RECIPE_SCHEMA}"',
    "schema_version": f"version of this form ({RECIPE_SCHEMA_VERSION})",
    "lr": "peak LR the exports write (the recommended LR) with its interval {value, low, high}",
    "lr_point": "the LR law's point estimate at the target (peak LR)",
    "batch_tokens": "global batch in tokens used {value}, with the batch law's interval {low, high}",
    "batch_tokens_law": "the batch law's point value, tokens",
    "global_batch_sequences": "global batch, sequences per optimizer step",
    "micro_batch_size": "sequences per GPU per forward pass",
    "grad_accum_steps": "gradient accumulation steps per optimizer step",
    "data_parallel": "data-parallel GPUs",
    "seq_len": "training sequence length, tokens",
    "min_lr": "derived: lr.value × min_lr_ratio (absolute final LR of the decay)",
    "min_lr_ratio": "min LR as a fraction of the peak LR (the stored setting)",
    "warmup_steps": "linear warmup, optimizer steps at the full batch (with a ramp-up: "
    "rampup.warmup_steps)",
    "decay_fraction": "WSD: share of the steps spent decaying (linearly), or null",
    "total_steps": "optimizer steps at the full batch (with a ramp-up: rampup.total_steps)",
    "tokens": "training tokens D",
    "schedule": "LR schedule after warmup, the LR law's (cosine | wsd | linear | constant; the "
    "proxies' lr_at: cosine/linear to min_lr at the last step, wsd peak then linear, constant "
    "min_lr_ratio 1)",
    "rampup": "global-batch ramp-up (Megatron's start/increment/samples) or null; derived: its "
    "total_steps and warmup_steps, the optimizer steps of the run and of a warmup of warmup_steps "
    "full batches of samples with it (Megatron-LM's rule before core 0.18; from 0.18 a last "
    "partial batch is one step more)",
    "optimizer": f"optimizer the LR is for ({' | '.join(OPTIMIZERS)})",
    "adam_beta1": "Adam β1",
    "adam_beta2": "Adam β2",
    "adam_eps": "Adam ε",
    "weight_decay": "decoupled (AdamW) weight decay coefficient",
    "grad_clip": "global gradient-norm clip (0: none, as the proxies read it)",
    "init_std": "init std (SP: of every matrix; muP/CompleteP: at the base width)",
    "z_loss": "z-loss coefficient on log(Z)² of the output logits (0: none)",
    "n_params": "non-embedding parameters N",
    "n_params_total": "all parameters, embeddings included",
    "width": "d_model",
    "depth": "layers",
    "heads": "attention heads",
    "vocab": "vocabulary size",
    "shape_inferred": "true when the shape was inferred from N",
    "flops": "Sweeper's compute, 6·N·D + attention (the laws' convention, a compute target's "
    "budget; the output layer left out: train_flops)",
    "train_flops": "derived: flops + the output layer's 6·vocab·width·tokens, what train_time_s "
    "counts",
    "parametrization": "sp | mup | completep",
    "base_width": "muP/CompleteP base width (null under SP)",
    "base_depth": "CompleteP base depth",
    "base_head_dim": "the proxies' head size at the base width (muP attention scale), or null",
    "lr_regret_pct": "expected regret of lr, % of the loss, over the law's uncertainty, or null",
    "lr_point_regret_pct": "expected regret of lr_point, % of the loss, or null",
    "precision": "bf16 (mixed, fp32 master weights) | fp32",
    "memory": (
        "memory estimate per GPU, GiB, with the states of the recipe's optimizer (recipes written "
        "before 2026-11-29 sized every optimizer's as AdamW's)"
    ),
    "memory_gb_per_gpu": "derived: memory.total_gb",
    "train_time_s": "training time estimate, seconds, of train_flops (null without peak "
    "TFLOP/s; recipes before version 4 left the output layer out)",
    "predicted_loss": "the loss law's prediction (null without one)",
    "extrapolation_factor": "target / largest proxy, largest over the predictors (below 1 within "
    "or below the ladder: see extrapolation_below)",
    "extrapolation_below": "predictor -> smallest proxy / target, where the target lies below a "
    "law's smallest proxy (extrapolated downward); empty otherwise",
    "extrapolation": "target / largest proxy per predictor",
    "warnings": "what to distrust, one line each",
    "law_ids": "ids of the laws used",
    "provenance": "the laws used (role -> the law's JSON form without samples)",
    "target": "the target as given",
    "hardware": "the hardware as given",
    "level": "confidence level of the intervals",
    "init_std_note": "what init_std means",
    "bytes_per_token": "conversion applied to laws fitted on bytes (null: none)",
    "output_mult": "the LR law's output (logit) multiplier α",
    "warmup_tokens": "derived: warmup_steps × global_batch_sequences × seq_len",
    "hidden_init_std": "derived: init std of the hidden matrices at the target width",
}

#: nested objects: field -> (class, derived keys of its JSON form)
_NESTED: Final[Mapping[str, tuple[type, tuple[str, ...]]]] = {
    "lr": (Interval, ()),
    "batch_tokens": (Interval, ()),
    "rampup": (RampUp, ("increments", "tokens_per_increment", "total_steps", "warmup_steps")),
    "memory": (MemoryEstimate, ("static_gb",)),
    "target": (Target, ()),
    "hardware": (Hardware, ()),
}
#: JSON types of the scalar field annotations (others: objects/arrays, checked when built)
_JSON_TYPES: Final[Mapping[str, tuple[str, ...]]] = {
    "float": ("number",),
    "int": ("integer",),
    "str": ("string",),
    "bool": ("boolean",),
    "float | None": ("number", "null"),
    "int | None": ("integer", "null"),
}


def _json_type_ok(v: Any, kinds: tuple[str, ...]) -> bool:
    checks = {
        "number": isinstance(v, (int, float)) and not isinstance(v, bool),
        "integer": isinstance(v, int) and not isinstance(v, bool),
        "string": isinstance(v, str),
        "boolean": isinstance(v, bool),
        "null": v is None,
    }
    return any(checks[k] for k in kinds)


def _schema_version(d: Mapping[str, Any]) -> int:
    """The schema version of a recipe JSON (1 when it has none); TargetError when unknown."""
    if "schema" in d and d["schema"] != RECIPE_SCHEMA:
        raise TargetError(f"recipe JSON: schema {d['schema']!r} is not {RECIPE_SCHEMA!r}")
    v = d.get("schema_version", 1)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise TargetError(f"recipe JSON: schema_version must be a positive integer, got {v!r}")
    if v > RECIPE_SCHEMA_VERSION:
        raise TargetError(
            f"recipe JSON: schema_version {v} is newer than this Sweeper reads "
            f"({RECIPE_SCHEMA_VERSION}): upgrade Sweeper"
        )
    return v


def _check_keys(d: Mapping[str, Any]) -> None:
    """Unknown keys, top-level and in the nested objects, named (TargetError)."""
    allowed = {f.name for f in fields(Recipe)} | set(DERIVED) | {"schema", "schema_version"}
    unknown = sorted(k for k in d if k not in allowed)
    for name, (cls, derived) in _NESTED.items():
        v = d.get(name)
        if isinstance(v, Mapping):
            inner = {f.name for f in fields(cls)} | set(derived)
            unknown += sorted(f"{name}.{k}" for k in v if k not in inner)
    if unknown:
        raise TargetError(
            f"recipe JSON: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"(schema {RECIPE_SCHEMA} version {RECIPE_SCHEMA_VERSION})"
        )


def _field_value(name: str, annotation: str, v: Any) -> Any:
    """One field's value from its JSON form (TargetError when malformed)."""
    try:
        if name in _NESTED:
            cls, derived = _NESTED[name]
            if v is None and name == "rampup":
                return None
            if not isinstance(v, Mapping):
                raise TypeError(f"expected an object, got {type(v).__name__}")
            kept = {k: x for k, x in v.items() if k not in derived}
            for f in fields(cls):  # (a string LR failed as a TypeError deep in the recipe)
                kinds = _JSON_TYPES.get(str(f.type))
                if f.name in kept and kinds is not None and not _json_type_ok(kept[f.name], kinds):
                    got = kept[f.name]
                    raise TypeError(f"{f.name} must be {' or '.join(kinds)}, got {got!r}")
            return cls(**kept)
        if name in ("warnings", "law_ids"):
            if not isinstance(v, list):
                raise TypeError(f"expected a list, got {type(v).__name__}")
            return tuple(v)
    except (TypeError, ValueError) as e:
        raise TargetError(f"recipe JSON: malformed {name!r}: {e}") from None
    kinds = _JSON_TYPES.get(annotation)
    if kinds is not None and not _json_type_ok(v, kinds):
        raise TargetError(
            f"recipe JSON: {name!r} must be {' or '.join(kinds)}, got {type(v).__name__} {v!r}"
        )
    return v


def _check_derived(d: Mapping[str, Any], recipe: Recipe) -> None:
    """Derived values given in ``d`` must agree with the recipe they come from."""
    again = recipe.to_dict()
    given: list[tuple[str, Any, Any]] = [
        (k, d[k], again[k]) for k in DERIVED if k in d and k != "min_lr"
    ]
    for name, (_cls, derived) in _NESTED.items():
        if isinstance(d.get(name), Mapping) and isinstance(again.get(name), Mapping):
            given += [(f"{name}.{k}", d[name][k], again[name][k]) for k in derived if k in d[name]]
    for key, got, want in given:
        ok = isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=_REL, abs_tol=0.0)
        if not ok:
            raise TargetError(
                f"recipe JSON: {key} {got!r} disagrees with the value derived from the recipe "
                f"({want!r}): drop it or fix the fields it comes from"
            )


def recipe_from_dict(d: Mapping[str, Any]) -> Recipe:
    """Inverse of :meth:`Recipe.to_dict` (a saved ``--json`` recipe, schema version 1 to 4).
    TargetError (one line) when a key is unknown or missing, a value malformed, a derived value
    (the min LR above all) disagrees with the fields, or the batch identity is broken."""
    version = _schema_version(d)
    _check_keys(d)
    kw: dict[str, Any] = {}
    missing = []
    for f in fields(Recipe):
        if f.name not in d:
            if f.default is MISSING and f.default_factory is MISSING:
                missing.append(f.name)
            continue
        kw[f.name] = _field_value(f.name, str(f.type), d[f.name])
    if missing:
        raise TargetError(f"recipe JSON lacks {', '.join(missing)}")
    if kw.get("min_lr") is None:  # absent or null: derived
        kw.pop("min_lr", None)
    recipe = Recipe(**kw)
    _check_derived(d, recipe)
    return _timed_as_now(recipe) if version < 4 else recipe


def _timed_as_now(r: Recipe) -> Recipe:
    """A recipe before version 4 with its time of :attr:`Recipe.train_flops`: its time had left
    the output layer out, so the table showed the FLOPs with the head beside a time without it,
    and an export wrote both (a review)."""
    if r.train_time_s is None or not r.flops:
        return r
    return replace(r, train_time_s=r.train_time_s * r.train_flops / r.flops)


def _json_schema_of(name: str, annotation: str) -> dict[str, Any]:
    doc = FIELD_DOCS.get(name, "")
    kinds = _JSON_TYPES.get(annotation)
    if kinds is not None:
        t: Any = kinds[0] if len(kinds) == 1 else list(kinds)
        return {"type": t, "description": doc}
    if name in ("warnings", "law_ids"):
        return {"type": "array", "description": doc}
    if name == "rampup":
        return {"type": ["object", "null"], "description": doc}
    return {"type": "object", "description": doc}


def recipe_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the recipe JSON, from the dataclass and
    :data:`FIELD_DOCS`: required keys, types, no unknown keys."""
    props: dict[str, Any] = {
        "schema": {"const": RECIPE_SCHEMA, "description": FIELD_DOCS["schema"]},
        "schema_version": {"type": "integer", "description": FIELD_DOCS["schema_version"]},
    }
    required = ["schema", "schema_version"]
    for f in fields(Recipe):
        props[f.name] = _json_schema_of(f.name, str(f.type))
        if f.default is MISSING and f.default_factory is MISSING:
            required.append(f.name)
    for k in DERIVED:
        props.setdefault(k, {"type": "number", "description": FIELD_DOCS[k]})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{RECIPE_SCHEMA} version {RECIPE_SCHEMA_VERSION}",
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }

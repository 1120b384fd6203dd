"""The model and budget a recipe is for (:class:`Target`), and the same resolved to numbers
(:func:`resolve_target`): N, shape, sequence length and D, from what the target gives, the
hardware's sequence length and, where the target leaves N or D open, the loss law."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from proxy_models.rules import PARAMETRIZATIONS
from sweeper.errors import TargetError
from sweeper.recipe.compute_optimal import (
    check_loss_choice,
    compute_optimal_n,
    compute_optimal_tokens,
    n_for_compute_and_ratio,
)
from sweeper.recipe.hardware import plain_number, positive
from sweeper.recipe.memory import train_flops
from sweeper.recipe.names import fields_of
from sweeper.recipe.scale import DEFAULT_SEQ_LEN, ResolvedShape, block_n_params, resolve_shape
from sweeper.recipe.warning_kinds import Assumed

if TYPE_CHECKING:
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import LossLaw
    from sweeper.recipe.hardware import Hardware

__all__ = [
    "N_SHAPE_TOLERANCE",
    "CountedShape",
    "ResolvedTarget",
    "Target",
    "as_target",
    "check_n_params_agrees",
    "resolve_target",
]

#: a target giving both ``n_params`` and a shape is refused when N and the shape's non-embedding
#: count are more than this factor apart. Real models sit well inside it against 12·L·d²
#: (LLaMA-7B's SwiGLU: 6.48e9 against 6.44e9; Llama-3-8B's GQA and wider MLP: 6.98e9 against
#: 6.44e9); a factor of 2 in N moves an LR law with exponent -0.3 by 23%.
N_SHAPE_TOLERANCE: Final[float] = 2.0


@dataclass(frozen=True)
class Target:
    """The model and budget to recommend for.

    Model: ``n_params`` (non-embedding N) and/or the shape ``width`` (d_model) and ``depth``
    (layers), with optional ``heads``, ``vocab`` and ``context`` (sequence length T). Given both,
    N is used as given, and must agree with the shape's non-embedding count (the LR law's builder
    model's when it names one, else 12·L·d²) within :data:`N_SHAPE_TOLERANCE` (checked by
    :func:`check_n_params_agrees` from :func:`resolve_target` and from ``compare``'s
    :func:`~sweeper.recipe.compare.target_point`, which counts 12·L·d²; TargetError otherwise).
    Budget: one of ``tokens`` (D, in the target's tokenizer tokens), ``compute`` (training
    FLOPs counted as 6·N·D + 6·L·T·d·D with the given or inferred shape, Sweeper's "6ND"
    convention) or ``tokens_per_param`` (D = R·N); none of them means "the compute-optimal D from
    the loss law".
    With ``compute`` and no model, N comes from the loss law (its optimum under this compute, see
    the module doc) and D from the compute; with ``compute`` and ``tokens_per_param`` (and no
    model), N and D both from them (Chinchilla's plan, N = sqrt(C / (6·R)) with attention left
    out: :func:`~sweeper.recipe.compute_optimal.n_for_compute_and_ratio`), no loss law needed.
    ``parametrization`` is "sp", "mup" or "completep"; the relative ones take ``base_width`` (and
    ``base_depth`` for CompleteP), else the law's.
    """

    n_params: float | None = None
    width: int | None = None
    depth: int | None = None
    heads: int | None = None
    vocab: int | None = None
    context: int | None = None
    tokens: float | None = None
    compute: float | None = None
    tokens_per_param: float | None = None
    parametrization: str = "sp"
    base_width: int | None = None
    base_depth: int | None = None

    def __post_init__(self) -> None:
        # numpy's numbers stored as Python's (np.int64(2048) had been refused, and np.float32
        # taken but written by no JSON or YAML export of the recipe)
        for name in (*_WHOLE_FIELDS, *_REAL_FIELDS):
            object.__setattr__(self, name, plain_number(getattr(self, name)))
        p: list[str] = []
        positive("n_params", self.n_params, p)
        for name in _WHOLE_FIELDS:
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                p.append(f"{name} must be a positive integer, got {name}={v!r}")
        if (self.width is None) != (self.depth is None):
            p.append(f"give width and depth together, got width={self.width}, depth={self.depth}")
        if self.heads and self.width and self.width % self.heads:
            p.append(f"heads must divide width, got width={self.width}, heads={self.heads}")
        budget = {
            k: getattr(self, k)
            for k in ("tokens", "compute", "tokens_per_param")
            if getattr(self, k) is not None
        }
        if len(budget) > 1 and not self._compute_and_ratio(budget):
            p.append(
                f"give one of tokens (--tokens), compute (--compute) or tokens_per_param "
                f"(--tokens-per-param), or compute and tokens_per_param without a model, "
                f"got {budget}"
            )
        for k, v in budget.items():
            positive(k, v, p)
        if self.n_params is None and self.width is None and self.compute is None:
            p.append(
                "give n_params (--params), or width and depth (--width, --depth), or compute "
                "(--compute) alone with a loss law"
            )
        if self.parametrization not in PARAMETRIZATIONS:
            p.append(
                f"parametrization must be one of {', '.join(PARAMETRIZATIONS)}, "
                f"got {self.parametrization!r}"
            )
        elif self.parametrization == "sp" and self.base_width is not None:
            p.append(f"base_width applies to mup/completep targets only, got {self.base_width}")
        if p:
            raise TargetError("; ".join(p))

    @property
    def has_model(self) -> bool:
        return self.n_params is not None or self.width is not None

    def _compute_and_ratio(self, budget: Mapping[str, Any]) -> bool:
        """Whether the budget is compute with tokens_per_param and no model: the two then give
        N and D (an audit: ``--compute 1e21 --tokens-per-param 20`` had been refused)."""
        return set(budget) == {"compute", "tokens_per_param"} and not self.has_model


#: the fields of :class:`Target` that take a whole number
_WHOLE_FIELDS: Final = ("width", "depth", "heads", "vocab", "context", "base_width", "base_depth")
#: the fields of :class:`Target` that take any real number
_REAL_FIELDS: Final = ("n_params", "tokens", "compute", "tokens_per_param")


def as_target(at: Target | Mapping[str, Any]) -> Target:
    """``at`` as a :class:`Target`: a Target as it is, or one built from a mapping of its fields
    (``{"n_params": 1e9, "tokens": 2e10}``; a whole float such as 512.0 is taken for an integer
    field). TargetError naming the fields for an unknown key, and for anything else."""
    if isinstance(at, Target):
        return at
    given = fields_of(at, Target, what="a target", error=TargetError)
    return Target(**{k: _whole(v) if k in _WHOLE_FIELDS else v for k, v in given.items()})


def _whole(v: Any) -> Any:
    """``v`` as an int when it is a whole number (512.0, numpy.int64(512)); else as given (the
    Target then says what is wrong with it)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real) and float(v).is_integer():
        return int(float(v))
    return v


@dataclass(frozen=True)
class ResolvedTarget:
    """A target resolved to numbers: its shape (given or inferred) and its D in target tokens."""

    shape: ResolvedShape
    tokens: float


@dataclass(frozen=True)
class CountedShape(ResolvedShape):
    """A shape whose parameters were counted by building the model (a builder's, on the meta
    device) rather than by the GPT formula: ``counted_total`` is every parameter it holds."""

    counted_total: float = 0.0
    builder: str = ""
    #: the builder model's non-embedding N (``n_params`` is the target's when it gives one)
    counted_n: float = 0.0

    @property
    def n_params_total(self) -> float:
        return self.counted_total


def builder_counts(
    conventions: Conventions, *, width: int, depth: int, heads: int, vocab: int, seq_len: int
) -> tuple[int, int]:
    """(N, total) of the law's builder model (``conventions.model_builder`` with its
    ``model_args``) at the target's shape, instantiated on the meta device (no memory used)."""
    from proxy_models.builder import Builder, n_params_of
    from proxy_models.config import ProxyConfig

    assert conventions.model_builder is not None
    args: Any = tuple(
        sorted(
            (k, tuple(v) if isinstance(v, list) else v)
            for k, v in (conventions.model_args or {}).items()
        )
    )
    cfg = ProxyConfig(width=width, depth=depth, n_heads=heads, context=seq_len, vocab_size=vocab)
    return n_params_of(Builder(conventions.model_builder, args), cfg)


def _vocab_purpose(conventions: Conventions | None) -> str:
    """What an assumed vocabulary is used for: the embedding memory, and the N of a law that
    counts the embeddings (with the vocabulary its runs used, when recorded)."""
    if conventions is None or not conventions.counts_embeddings:
        return "embedding memory"
    runs = f"; the law's runs used {conventions.vocab_size}" if conventions.vocab_size else ""
    return f"embedding memory and the embedding parameters the law's N counts{runs}"


def _counted(
    shape: ResolvedShape, target: Target, conventions: Conventions | None, warnings: list[str]
) -> ResolvedShape:
    """The shape with N and the total counted on the builder's model when the law was measured
    on one and the target gives its shape (the GPT formula is wrong for, e.g., SwiGLU and GQA).
    A law of a training function without a builder counted its cells' N with the GPT formula,
    whatever model the function trained: said, since the target's N must be counted alike."""
    if conventions is not None and conventions.train_function and not conventions.model_builder:
        warnings.append(
            f"the law's N is 12·L·d² at its cells' shapes, not the model training function "
            f"{conventions.train_function!r} built (no model.builder counts it): count the "
            "target's N the same way (give its width and depth), or name a builder"
        )
    if conventions is None or conventions.model_builder is None:
        return shape
    b = conventions.model_builder
    if not shape.shape_given:
        warnings.append(
            f"the law was measured on the builder {b!r}: give width and depth to count the "
            "target's N and memory on that model (counted with the GPT formula here)"
        )
        return shape
    try:
        n, total = builder_counts(
            conventions,
            width=shape.width,
            depth=shape.depth,
            heads=shape.heads,
            vocab=shape.vocab,
            seq_len=shape.seq_len,
        )
    except Exception as e:  # the builder's module missing here, or refusing the shape
        warnings.append(
            f"cannot build the law's model {b!r} at the target's shape ({type(e).__name__}: "
            f"{e}); N and memory are counted with the GPT formula"
        )
        return shape
    fields = asdict(shape)
    if target.n_params is None:
        fields["n_params"] = float(n)
    return CountedShape(**fields, counted_total=float(total), builder=b, counted_n=float(n))


def check_n_params_agrees(
    n_params: float,
    shape: ResolvedShape,
    *,
    force: bool | None = None,
    warnings: list[str] | None = None,
) -> None:
    """TargetError (one line) when a given N and a given shape disagree by more than
    :data:`N_SHAPE_TOLERANCE`: the shape's N is the builder's count for a :class:`CountedShape`,
    else 12·L·d² (a 4·d_model MLP: a model with a wider one, such as Step Law's 4-10x runs,
    counts more). The recipe would otherwise write the shape with an LR meant for N. ``force``
    True: said in ``warnings`` instead (the laws take N as given); None: the caller has no
    ``--force`` (compare), and the message offers none."""
    if isinstance(shape, CountedShape):
        shape_n, how = shape.counted_n, f"counted on the law's builder {shape.builder!r}"
    else:
        shape_n, how = block_n_params(shape.width, shape.depth), "12·L·d², a 4·d_model MLP"
    ratio = max(n_params / shape_n, shape_n / n_params)
    if ratio <= N_SHAPE_TOLERANCE:
        return
    said = (
        f"n_params {n_params:.4g} and the shape {shape.depth} layers × d_model {shape.width} "
        f"(non-embedding N {shape_n:.4g}, {how}) are {ratio:.3g}× apart"
    )
    if force and warnings is not None:
        warnings.append(f"{said}: the laws take N as given, the shape is kept as given (--force)")
        return
    raise TargetError(
        f"{said}, more than the {N_SHAPE_TOLERANCE:g}× allowed; give n_params alone (its shape "
        "is then inferred), width and depth alone, or both consistent"
        + (", or --force to keep both (another MLP width)" if force is not None else "")
    )


def resolve_target(
    target: Target,
    hw: Hardware,
    loss_law: LossLaw | None,
    loss_factor: float,
    warnings: list[str],
    *,
    conventions: Conventions | None = None,
    force: bool = False,
) -> ResolvedTarget:
    """N, D, shape and sequence length of the target; ``loss_factor`` is the loss law's token
    units per target token (its D is converted at this boundary). ``conventions``: the LR law's;
    when it names a ``model_builder``, N (unless given) and the total parameters are counted by
    building that model at the target's shape on the meta device. A loss law that does not
    determine the N or D it would choose is refused (TargetError) unless ``force``
    (:func:`~sweeper.recipe.compute_optimal.check_loss_choice`)."""
    if hw.seq_len is not None and target.context is not None and hw.seq_len != target.context:
        raise TargetError(  # (the hardware's had won in silence: block_size 4096 for a 2048 model)
            f"the target's context ({target.context}) and the hardware's seq_len ({hw.seq_len}) "
            "differ: give one, or the same in both"
        )
    seq_len = hw.seq_len or target.context or DEFAULT_SEQ_LEN
    if hw.seq_len is None and target.context is None:
        warnings.append(Assumed(f"no sequence length given: assumed {DEFAULT_SEQ_LEN}"))
    n_params = target.n_params
    if not target.has_model:
        n_params = _n_from_compute(target, seq_len, loss_law, loss_factor, force, warnings)
    shape = resolve_shape(
        n_params=n_params,
        width=target.width,
        depth=target.depth,
        heads=target.heads,
        vocab=target.vocab,
        seq_len=seq_len,
        warnings=warnings,
        vocab_purpose=_vocab_purpose(conventions),
        say_heads=True,
    )
    shape = _counted(shape, target, conventions, warnings)
    if target.n_params is not None and shape.shape_given:
        check_n_params_agrees(target.n_params, shape, force=force, warnings=warnings)
    tokens = _target_tokens(target, shape, loss_law, loss_factor, warnings, force=force)
    return ResolvedTarget(shape=shape, tokens=tokens)


def _n_from_compute(
    target: Target,
    seq_len: int,
    loss_law: LossLaw | None,
    loss_factor: float,
    force: bool,
    warnings: list[str],
) -> float:
    """N of a target given by its compute alone: at its D/N when it gives one, else the loss
    law's optimum under that compute."""
    assert target.compute is not None
    c = target.compute
    if target.tokens_per_param is not None:
        n = n_for_compute_and_ratio(c, target.tokens_per_param, seq_len)
        warnings.append(
            f"N = {n:.3g} spends C = {c:.3g} FLOPs at D = {target.tokens_per_param:g}·N (6·N·D + "
            "attention, the shape inferred from N; D/N is that up to the shape's rounding)"
        )
        return n
    if loss_law is None:
        raise TargetError(
            "compute alone needs a loss law to choose N and D; give n_params (--params), or "
            "tokens_per_param (--tokens-per-param)"
        )
    n = compute_optimal_n(loss_law, c, seq_len, loss_factor, force=force, warnings=warnings)
    warnings.append(
        f"N = {n:.3g} is the loss law's compute optimum at C = {c:.3g} "
        "FLOPs (6·N·D + attention; the loss law's own optimum is defined at C = 6·N·D)"
    )
    return n


def _target_tokens(
    target: Target,
    shape: ResolvedShape,
    loss_law: LossLaw | None,
    loss_factor: float,
    warnings: list[str],
    *,
    force: bool = False,
) -> float:
    """D in target tokens: given, from the compute budget (also beside tokens_per_param, which
    then chose N), D = R·N, or the loss law's optimum (refused where the law does not determine
    it, unless ``force``)."""
    if target.tokens is not None:
        return float(target.tokens)
    n = shape.n_params
    if target.compute is not None:
        # Sweeper's compute, attention included, with the given or inferred shape: the recipe's
        # flops then equal the target's compute
        per_token = train_flops(n, 1.0, depth=shape.depth, width=shape.width, seq_len=shape.seq_len)
        return target.compute / per_token
    if target.tokens_per_param is not None:
        return target.tokens_per_param * n
    if loss_law is not None:
        check_loss_choice(loss_law, "D", force=force, warnings=warnings)
        tokens = compute_optimal_tokens(loss_law, n) / loss_factor
        warnings.append(
            f"D = {tokens:.3g} tokens ({tokens / n:.3g} per parameter) is the loss "
            "law's compute-optimal budget for this N"
        )
        return tokens
    raise TargetError(
        "give tokens, compute or tokens_per_param (no loss law to choose a compute-optimal D)"
    )

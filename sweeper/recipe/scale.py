"""One home for evaluating a law at a model: the shape of a model given by N alone, the scale a
law wants in its own conventions, the law's value and interval there, and the warnings about where
a law's conventions and a model disagree. Shared by :mod:`~sweeper.recipe.recommend`,
:mod:`~sweeper.recipe.check` and :mod:`~sweeper.recipe.compare`, so a point's N, D and FLOPs are
counted the same way everywhere.

Scale passed to a law (see :mod:`sweeper.fitting.laws` for the predictor names):

- ``n_params``: non-embedding N (the model's, or 12·L·d² from its shape); a law whose conventions
  count total parameters gets N plus the embeddings instead, one that counts the output layer
  (``"non-embedding+head"``, Porian et al.) N plus half of them (the untied head).
- ``tokens``: D, in the law's token unit: a law that counts bytes (``conventions.counts_bytes``,
  the built-in data) gets D · ``bytes_per_token`` when that factor is given, else D unconverted
  with a warning (a BPE token is about 4 bytes of English text); its batch prediction is divided by
  the same factor. ``width``, ``depth``: d_model and layers.
- ``flops`` by ``conventions.flops``: ``"6ND"`` is Sweeper's compute 6·N·D + 6·L·T·d·D (Kaplan's
  attention term, T = training sequence length, as the launched proxies count it), with the given
  or inferred shape; ``"6ND (no attention)"`` is 6·N·D; ``"M*D"`` is DeepSeek's M·D with
  M = 6·N + 12·L·d·T, the non-embedding FLOPs a token that DeepSeek's 72·L·d² + 12·L·d·T counts
  for its own models (whose MLP makes N = 12·L·d²; an MLP 4-10x d_model wide, as in Step Law's
  runs, makes N up to 3x that, and 72·L·d² had put M 2.3x low there: an audit). Another
  convention is evaluated as ``"6ND"`` with a warning.

When a model is given as N alone, its shape is inferred for memory, attention FLOPs and M with
d_model ≈ 128 · layers (the aspect ratio of GPT-3 6.7B and LLaMA-7B, 4096/32; Kaplan et al. 2020
§3.1 found the loss within a few percent over aspect ratios 20–200), d rounded to a multiple of 64.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sweeper.errors import TargetError
from sweeper.fitting.conventions import (
    FLOPS_6ND_NO_ATTENTION,
    FLOPS_M_D,
    HELD_LABELS,
    TOKENS_AS_IMPORTED,
    TOKENS_BYTES,
    Conventions,
)
from sweeper.fitting.laws import Law
from sweeper.recipe.memory import train_flops
from sweeper.recipe.warning_kinds import Assumed, Doubt

__all__ = [
    "ASPECT_RATIO",
    "DEFAULT_SEQ_LEN",
    "DEFAULT_VOCAB",
    "ResolvedShape",
    "block_n_params",
    "default_heads",
    "evaluate_law",
    "flops_convention_warnings",
    "infer_shape",
    "infer_shape_warning",
    "law_label",
    "law_scale",
    "loss_outside_text",
    "regime_values",
    "regime_warnings",
    "resolve_shape",
    "token_factor",
    "token_unit_warnings",
]

#: d_model / n_layers used to infer a shape from N alone
ASPECT_RATIO: Final[int] = 128
#: vocab assumed for embedding memory when the model does not give one (LLaMA's tokenizer)
DEFAULT_VOCAB: Final[int] = 32000
#: training sequence length when neither the hardware nor the model gives one (GPT-3, LLaMA-1)
DEFAULT_SEQ_LEN: Final[int] = 2048
#: a value this factor beyond a held range (either side) earns a warning; the slack absorbs the
#: gap between N = 12·L·d² and a proxy's counted N, which alone moves D/N by 10–20%
HELD_SLACK: Final[float] = 1.25
BYTE_VOCAB: Final[int] = 256


def law_label(law: Law) -> str:
    """How warnings name a law: its stored id, else ``source:target``."""
    return f"law {law.id}" if law.id is not None else f"{law.source}:{law.target}"


def default_heads(width: int) -> int:
    for head_dim in (128, 64):
        if width % head_dim == 0 and width >= head_dim:
            return width // head_dim
    return 1


def block_n_params(width: float, depth: float) -> float:
    """12·L·d²: the non-embedding parameters of ``depth`` standard transformer blocks of width
    ``width`` (attention 4·d², MLP 8·d²), the count Sweeper uses wherever only a shape is known."""
    return 12.0 * depth * width**2


def infer_shape(n_params: float) -> tuple[int, int]:
    """(width, depth) with 12·L·d² ≈ N and d ≈ 128·L, d a multiple of 64 (at least 64)."""
    depth = max(1, round((n_params / (12.0 * ASPECT_RATIO**2)) ** (1.0 / 3.0)))
    width = max(64, 64 * round(math.sqrt(n_params / (12.0 * depth)) / 64))
    return width, depth


def infer_shape_warning(width: int, depth: int) -> str:
    """The warning that goes with a shape from :func:`infer_shape`."""
    return (
        f"shape inferred from N: {depth} layers × d_model {width} (d ≈ {ASPECT_RATIO}·L); "
        "give width and depth for exact memory and FLOPs"
    )


@dataclass(frozen=True)
class ResolvedShape:
    """A model resolved to numbers: non-embedding N, shape (given or inferred), heads, vocab and
    training sequence length."""

    n_params: float
    width: int
    depth: int
    heads: int
    vocab: int
    seq_len: int
    shape_given: bool

    @property
    def n_params_total(self) -> float:
        return self.n_params + 2.0 * self.vocab * self.width  # untied input embedding and head


def resolve_shape(
    *,
    n_params: float | None,
    width: int | None,
    depth: int | None,
    heads: int | None,
    vocab: int | None,
    seq_len: int | None,
    warnings: list[str],
    vocab_purpose: str | None = "embedding memory",
    say_heads: bool = False,
) -> ResolvedShape:
    """N, shape and sequence length of a model given by N and/or (width, depth); a shape inferred
    from N, a sequence length of :data:`DEFAULT_SEQ_LEN` and a vocab of :data:`DEFAULT_VOCAB` are
    assumed when not given, each with a warning (the vocab's only when ``vocab_purpose`` says what
    it is needed for; the heads' from :func:`default_heads` when ``say_heads`` and they are one
    head of the whole width: a recipe writes them). N defaults to 12·L·d² when only the shape is
    given."""
    if seq_len is None:
        seq_len = DEFAULT_SEQ_LEN
        warnings.append(Assumed(f"no sequence length given: assumed {DEFAULT_SEQ_LEN}"))
    shape_given = width is not None and depth is not None
    if width is not None and depth is not None:
        n_params = n_params or block_n_params(width, depth)
    else:
        if n_params is None:
            raise TargetError("give n_params (--params), or width and depth (--width, --depth)")
        width, depth = infer_shape(n_params)
        if heads and width % heads:
            raise TargetError(
                f"heads={heads} does not divide the width {width} inferred from "
                f"n_params={n_params:.4g}: give width and depth as well"
            )
        warnings.append(Assumed(infer_shape_warning(width, depth)))
    if vocab is None:
        vocab = DEFAULT_VOCAB
        if vocab_purpose:
            warnings.append(Assumed(f"no vocab given: assumed {DEFAULT_VOCAB} for {vocab_purpose}"))
    if not heads:
        heads = default_heads(width)
        said = _heads_warning(width, heads) if say_heads else None
        warnings += [said] if said else []
    return ResolvedShape(
        n_params=float(n_params),
        width=width,
        depth=depth,
        heads=heads,
        vocab=vocab,
        seq_len=seq_len,
        shape_given=shape_given,
    )


def _heads_warning(width: int, heads: int) -> str | None:
    """The doubt for heads inferred from a width no head size of 128 or 64 divides: one head
    spans it (an audit's width 1000 had silently got one head of size 1000). A standard size is
    named in the recipe's table instead (``heads of SIZE, inferred``)."""
    if heads > 1 or width <= 128:
        return None
    return Doubt(
        f"no heads given: assumed {heads} of size {width // heads} (d_model {width}), since no "
        "head size of 128 or 64 divides the width; give heads (--heads): the exports write them"
    )


def unit_factor(law: Law, bytes_per_token: float | None, *, point_in_bytes: bool = False) -> float:
    """The law's units of D and batch per unit of a point's: ``bytes_per_token`` for a law that
    counts bytes (``conventions.counts_bytes``) at a point in tokens, its inverse for a law in
    tokens at a point in bytes (a byte-level sweep's cells), else 1 (also without
    ``bytes_per_token``: no conversion)."""
    if not bytes_per_token or law.conventions.counts_bytes == point_in_bytes:
        return 1.0
    return float(bytes_per_token) if law.conventions.counts_bytes else 1.0 / bytes_per_token


def token_factor(law: Law, bytes_per_token: float | None) -> float:
    """The law's token units per target token (a target counts tokens): :func:`unit_factor`."""
    return unit_factor(law, bytes_per_token)


def unused_bytes_per_token(bytes_per_token: float) -> str:
    """What a ``bytes_per_token`` that no law can use is said as."""
    return f"bytes_per_token {bytes_per_token:g} is not used: no law here counts bytes"


def law_scale(
    law: Law,
    *,
    n_params: float,
    tokens: float,
    width: int,
    depth: int,
    seq_len: int,
    n_params_total: float | None = None,
    bytes_per_token: float | None = None,
) -> dict[str, float]:
    """The predictor values for ``law`` at the target, in the law's conventions (module doc).

    ``tokens`` is the target's D in its own tokens; ``width``/``depth`` are the given shape or the
    inferred one.
    """
    conv = law.conventions
    n = conv.law_n(n_params, n_params_total)
    d = tokens * token_factor(law, bytes_per_token)
    scale = {"n_params": n, "tokens": d, "width": float(width), "depth": float(depth)}
    if conv.flops == FLOPS_M_D:  # (DeepSeek's 72·L·d² is 6·N for its own models' shape)
        scale["flops"] = (6.0 * n_params + 12.0 * depth * width * seq_len) * d
    elif conv.flops == FLOPS_6ND_NO_ATTENTION:
        scale["flops"] = 6.0 * n_params * d
    else:
        scale["flops"] = train_flops(n_params, d, depth=depth, width=width, seq_len=seq_len)
    return scale


def evaluate_law(
    law: Law,
    role: str,
    scale: Mapping[str, float],
    *,
    seq_len: int,
    level: float,
    factor: float = 1.0,
) -> tuple[float, float, float] | None:
    """The law's value and interval ``(value, low, high)`` at ``scale``; a batch law's (``role``
    "batch" or "batch_tokens") comes back in the model's tokens: a law in sequences is multiplied
    by ``seq_len``, one in bytes divided by ``factor``. TargetError when the law cannot be
    evaluated there; None when it predicts a value that is not positive (outside its range)."""
    try:
        value = law.predict(scale)
        low, high = law.interval(scale, level)
    except (KeyError, ValueError) as e:
        raise TargetError(f"{role} law ({law_label(law)}) cannot be evaluated: {e}") from None
    if not (math.isfinite(value) and value > 0):
        return None
    if role in ("batch", "batch_tokens"):
        unit = seq_len if law.conventions.batch_in_sequences else 1.0 / factor
        return value * unit, low * unit, high * unit
    return value, low, high


def loss_outside_text(law: Law, scale: Mapping[str, float]) -> str | None:
    """Where ``scale`` lies beyond ``law``'s fitted domain (by more than :data:`HELD_SLACK`), as
    text ("N 6.44e+09, 4.09e+03× its largest fitted 1.57e+06"); None inside it or without one."""
    out = []
    for p, (lo, hi) in law.domain.items():
        v = scale.get(p)
        if v is None or not (lo > 0 and hi > 0):
            continue
        label = HELD_LABELS.get(p, p)
        if v > hi * HELD_SLACK:
            out.append(f"{label} {v:.3g}, {v / hi:.3g}× its largest fitted {hi:.3g}")
        elif v < lo / HELD_SLACK:
            out.append(f"{label} {v:.3g}, {lo / v:.3g}× below its smallest fitted {lo:.3g}")
    return "; ".join(out) or None


def flops_convention_warnings(law: Law, role: str) -> list[str]:
    """A warning when ``law`` has a flops predictor counted in a convention Sweeper cannot
    reproduce (e.g. FLOPs "as imported" from a file)."""
    if "flops" in law.predictors and not law.conventions.flops_known:
        return [
            f"{role} law ({law_label(law)}) counts flops as {law.conventions.flops!r}: the "
            "target's are counted as 6·N·D + attention"
        ]
    return []


def token_unit_warnings(
    laws: list[tuple[str, Law]],
    *,
    vocab: int | None,
    bytes_per_token: float | None,
    what: str = "the target",
) -> list[str]:
    """Warnings about the token units of ``laws`` ((role, law) pairs) against a target whose
    vocabulary is ``vocab`` (None: a tokenizer's, not bytes): a law that counts bytes, converted or
    not; a law of another tokenizer; one whose import declared no unit; a ``bytes_per_token`` that
    no law can use. Laws that share their units share one warning."""
    groups: dict[tuple[str, str, str], tuple[Conventions, list[str]]] = {}
    for role, law in laws:
        conv = law.conventions
        key = (conv.tokens, str(conv.vocab_size or ""), conv.data or "")
        groups.setdefault(key, (conv, []))[1].append(f"{role} law ({law_label(law)})")
    has_vocab = f"vocab {vocab}" if vocab else "a tokenizer's vocab (none given)"
    out: list[str] = []
    used_factor = False
    for (unit, law_vocab, data), (conv, names) in groups.items():
        who = " and ".join(names)
        verb = "count" if len(names) > 1 else "counts"
        if unit == TOKENS_BYTES:
            if vocab == BYTE_VOCAB:
                continue
            src = f"byte-level data {data!r}" if data else "byte-level data"
            if bytes_per_token:
                used_factor = True
                out.append(
                    f"{who} {verb} D and the batch in bytes ({src}): converted at "
                    f"{bytes_per_token:g} bytes per token of {what}"
                )
            else:
                out.append(
                    f"{who} {verb} D and the batch in bytes ({src}, vocab {law_vocab or 256}) but "
                    f"{what} has {has_vocab}: its D and batch are used as if they were bytes (a "
                    "BPE token is about 4 bytes of English text, so a D exponent of 0.3 puts the "
                    "LR 1.5× off): give bytes_per_token (--bytes-per-token) to convert"
                )
        elif unit == TOKENS_AS_IMPORTED:
            out.append(
                f"{who} {verb} D and the batch in the unit of an imported file that did not "
                f"declare it: {what}'s D and batch are read in that unit (declare it: import "
                "--convention tokens=bytes, or tokens=tokenizer:NAME)"
            )
        elif conv.tokenizer is not None and law_vocab and str(vocab) != law_vocab:
            out.append(
                f"{who} {verb} tokens of {conv.tokenizer} (vocab {law_vocab}) but "
                f"{what} has {has_vocab}: D and batch of different tokenizers are not the same "
                "amount of text"
            )
    if bytes_per_token and not used_factor and vocab != BYTE_VOCAB:
        out.append(unused_bytes_per_token(bytes_per_token))
    return out


def regime_values(
    n_params: float,
    tokens: float,
    batch_tokens: float,
    unit: float = 1.0,
    depth: float | None = None,
    seq_len: float | None = None,
) -> dict[str, float]:
    """The values :func:`regime_warnings` checks, for a target of ``n_params`` parameters,
    ``tokens`` training tokens, a batch of ``batch_tokens``, ``depth`` blocks and a context of
    ``seq_len`` positions (None: not checked); ``unit`` converts tokens to the law's unit (bytes
    per token for a byte-level law, else 1). The context is compared in positions, as the
    proxies' ``seq_len`` counts them, not converted: a recommend audit's 4096-token target of
    128-byte proxies had gone unsaid."""
    out = {
        "n_params": n_params,
        "tokens": tokens * unit,
        "tokens_per_param": tokens * unit / n_params,
        "batch_tokens": batch_tokens * unit,
    }
    if depth is not None:
        out["depth"] = float(depth)
    if seq_len is not None:
        out["seq_len"] = float(seq_len)
    return out


def regime_warnings(law: Law, role: str, values: Mapping[str, float]) -> list[str]:
    """A warning when a value in ``values`` (n_params, tokens, tokens_per_param, batch_tokens, in
    the law's units, depth and seq_len) lies beyond a range the law held fixed
    (``conventions.held``), by more than :data:`HELD_SLACK`; and where the law's form sets its
    value (:meth:`Law.beyond_form`)."""
    zero = law.beyond_form(values)
    names, outside = [], []
    for name, (lo, hi) in law.conventions.held.items():
        v = values.get(name)
        if v is None or not v > 0:
            continue
        if v < lo / HELD_SLACK or v > hi * HELD_SLACK:
            label = HELD_LABELS.get(name, name)
            names.append(label)
            outside.append(f"{label} {v:.3g} (its cells: {law.conventions.held_span(name)})")
    out: list[str] = [Doubt(zero)] if zero else []
    if not outside:
        return out
    return [
        *out,
        Doubt(
            f"{role} law ({law_label(law)}) does not model {', '.join(names)}, and the target "
            f"lies outside what its cells held: {'; '.join(outside)}; the law is applied outside "
            "the regime it was measured in"
        ),
    ]

"""What a law's numbers mean: one typed, frozen object, serialised in one place.

A law of the optimal LR is only as good as the description of what was measured: in what unit D
and the batch were counted, what N counts, how FLOPs were counted, what the ladder held fixed,
under which schedule and parametrization the LR is the optimum. :class:`Conventions` holds all of
it; :meth:`Conventions.to_json` / :meth:`Conventions.from_json` are its only (de)serialisers, used
by the laws store and by every JSON output (schema :data:`SCHEMA_VERSION`).

Units and values:

- ``n_params``: ``"non-embedding"`` (Sweeper's N, and most published laws'), ``"total"``, or
  ``"non-embedding+head"`` (the output layer counted, the input embedding not: Porian et al.);
  ``n_params_source`` says where the counts came from (``"counted"`` for launched proxies,
  ``"as imported"``).
- ``batch``: ``"tokens"`` or ``"sequences"`` (the unit of a batch law's prediction).
- ``flops``: :data:`FLOPS_6ND` is Sweeper's compute, 6·N·D + 6·L·T·d·D (the attention term of
  Kaplan et al. 2020, eq. 2.2, as the launched proxies count it); :data:`FLOPS_6ND_NO_ATTENTION`
  is 6·N·D alone (imported runs whose FLOPs were filled in from N and D); :data:`FLOPS_M_D` is
  DeepSeek's M·D; :data:`FLOPS_AS_IMPORTED` a count Sweeper cannot reproduce.
- ``tokens``: the unit of D and the batch: :data:`TOKENS_BYTES` (byte-level data: a BPE token is
  about 4 bytes of English text), ``"tokenizer:<name>"`` (token files), ``"tokens"`` (a
  published law's tokenizer tokens) or :data:`TOKENS_AS_IMPORTED`; with ``vocab_size`` and
  ``data`` (the sweep's data source).
- the LR: ``lr`` says what it is in words; ``optimizer``, ``schedule`` (cosine | linear | wsd |
  constant), ``min_lr_ratio``, ``warmup`` (a fraction of the steps if < 1, a number of steps if >= 1, or
  ``"searched"``), ``decay_fraction`` (WSD) and ``z_loss`` say what it was measured under (None:
  unknown).
- ``init_std`` and ``output_mult``: the proxies' init std at the base shape and their logit
  multiplier: under muP/CompleteP both travel with the LR, so the recipe exports them.
- ``parametrization`` (sp | mup | completep, None when unknown) with ``base_width``,
  ``base_depth`` and ``base_head_dim`` (the head size at the base width, which sets muP's
  attention scale): a muP law transfers only to a muP model built relative to the same base.
- your own code: ``model_builder`` (the study's ``"module:function"``, with ``model_args``) when
  the cells were a builder's model (recommend/export/check then count the target's N and memory
  by building it on the meta device), ``parametrization_variant`` (what was applied to it, e.g.
  ``"mup-by-role: ..."``), ``train_function`` when a user's loop trained the runs, and
  ``weight_decay_tau`` (the AdamW timescale τ = B/(η·λ·D) the decay was given as). None/empty:
  the built-in proxy and loop (and laws stored before these fields).
- the optimizer settings the LR was measured under: ``weight_decay`` (None when given as
  ``weight_decay_tau``), ``beta1``, ``beta2``, ``eps`` and ``grad_clip``; ``"searched"`` for one
  the sampler varied; None: unknown (imported and published laws, a training function that does
  not honour it, laws stored before 2026-11-29). The recipe runs the measured values.
- ``held``: the variables the law does not model (tokens, tokens_per_param, n_params, the batch
  of an LR law, the depth: laws since 2026-11-29; the proxies' context length ``seq_len``,
  recorded from the sweep: laws since a recommend audit found a 32× longer target context never
  said) and their range over the fitted cells, so that a recommendation can say when its target
  lies outside the regime the law was measured in. A law stored without one held nothing there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

__all__ = [
    "FLOPS_6ND",
    "FLOPS_6ND_NO_ATTENTION",
    "FLOPS_AS_IMPORTED",
    "FLOPS_M_D",
    "SCHEMA_VERSION",
    "SWEEP_HELD",
    "TOKENS_AS_IMPORTED",
    "TOKENS_BYTES",
    "V1_HELD_PREFIX",
    "Conventions",
    "held_text",
]

#: version of the JSON form of laws and their conventions (1: the string-keyed form before it)
SCHEMA_VERSION: Final[int] = 2

FLOPS_6ND: Final[str] = "6ND"
FLOPS_6ND_NO_ATTENTION: Final[str] = "6ND (no attention)"
FLOPS_M_D: Final[str] = "M*D"
FLOPS_AS_IMPORTED: Final[str] = "as imported"
#: the flops conventions Sweeper can evaluate at a target
KNOWN_FLOPS: Final[tuple[str, ...]] = (FLOPS_6ND, FLOPS_6ND_NO_ATTENTION, FLOPS_M_D)
TOKENS_BYTES: Final[str] = "bytes"
TOKENS_AS_IMPORTED: Final[str] = "as imported"
_TOKENIZER: Final[str] = "tokenizer:"
#: the ``held`` names and how messages spell them
HELD_LABELS: Final[Mapping[str, str]] = {
    "n_params": "N",
    "tokens": "D",
    "tokens_per_param": "D/N",
    "batch_tokens": "batch",
    "depth": "depth",
    "seq_len": "context",
}
#: the held names that the sweep, not the fit, records (:mod:`sweeper.fitting.provenance`): no
#: law models them, and :meth:`Conventions.with_held` keeps them
SWEEP_HELD: Final[tuple[str, ...]] = ("seq_len",)
#: the v1 (string-keyed) form spelled held ranges as ``domain["held:<name>"]``
V1_HELD_PREFIX: Final[str] = "held:"


@dataclass(frozen=True)
class Conventions:
    """What a law assumes (see the module docstring for every field's values and units).

    The defaults describe a sweep launched with a default study: byte-level built-in data (vocab
    256), N non-embedding and counted, the batch in tokens, Sweeper's FLOPs, AdamW with warmup
    10% of the steps and cosine to 10%, no z-loss, init std 0.02, output multiplier 1.
    """

    n_params: str = "non-embedding"
    n_params_source: str = "counted"
    batch: str = "tokens"
    flops: str = FLOPS_6ND
    tokens: str = TOKENS_BYTES
    vocab_size: int | None = 256
    data: str | None = "builtin"
    lr: str = "peak AdamW LR, warmup 10% of steps, cosine to 10%"
    optimizer: str | None = "adamw"
    schedule: str | None = "cosine"
    min_lr_ratio: float | None = 0.1
    warmup: float | str | None = 0.1
    decay_fraction: float | None = None
    z_loss: float | None = 0.0
    init_std: float | None = 0.02
    output_mult: float = 1.0
    parametrization: str | None = None
    base_width: int | None = None
    base_depth: int | None = None
    base_head_dim: int | None = None
    held: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    model_builder: str | None = None
    model_args: Mapping[str, Any] | None = None
    parametrization_variant: str | None = None
    train_function: str | None = None
    weight_decay_tau: float | None = None
    weight_decay: float | str | None = None
    beta1: float | None = None
    beta2: float | str | None = None
    eps: float | None = None
    grad_clip: float | None = None

    # ---- questions every consumer asks -------------------------------------------------------
    @property
    def counts_bytes(self) -> bool:
        """D and the batch are bytes of byte-level data."""
        return self.tokens == TOKENS_BYTES

    @property
    def tokenizer(self) -> str | None:
        """The tokenizer's name when D counts a tokenizer's tokens (``"tokenizer:<name>"``)."""
        return self.tokens[len(_TOKENIZER) :] if self.tokens.startswith(_TOKENIZER) else None

    @property
    def batch_in_sequences(self) -> bool:
        return self.batch == "sequences"

    @property
    def counts_total_params(self) -> bool:
        return self.n_params == "total"

    @property
    def counts_embeddings(self) -> bool:
        """N counts parameters of the vocab: all of them, or the output layer (Porian et al.'s
        "non-embedding+head"), so it needs the model's vocab (:meth:`law_n`)."""
        return self.n_params in ("total", "non-embedding+head")

    def law_n(self, n_params: float, n_params_total: float | None) -> float:
        """A model's N as this law counts it, from its non-embedding and total counts (the
        output layer untied: half the embedding parameters); ``n_params`` where the law counts
        no embedding or the total is unknown."""
        if not n_params_total or not math.isfinite(n_params_total):
            return n_params
        if self.counts_total_params:
            return n_params_total
        if self.n_params == "non-embedding+head":
            return n_params + (n_params_total - n_params) / 2.0
        return n_params

    @property
    def flops_known(self) -> bool:
        """Whether Sweeper can count FLOPs at a target the way this law did."""
        return self.flops in KNOWN_FLOPS

    @property
    def held_text(self) -> str | None:
        """``held`` as one readable line (None when nothing was held)."""
        return held_text(self.held) if self.held else None

    def held_span(self, name: str) -> str | None:
        """The range the law held ``name`` at, as text (None when it records none)."""
        r = self.held.get(name)
        if r is None:
            return None
        lo, hi = r
        return f"{lo:.3g}" if hi <= lo * (1 + 1e-9) else f"{lo:.3g}–{hi:.3g}"

    def with_held(self, held: Mapping[str, tuple[float, float]]) -> Conventions:
        """These conventions holding ``held`` (a fit's ranges), keeping what the sweep recorded
        (:data:`SWEEP_HELD`: the context, which no fit's cells carry)."""
        kept = {k: v for k, v in self.held.items() if k in SWEEP_HELD and k not in held}
        return replace(self, held={**dict(held), **kept})

    # ---- the JSON form (schema SCHEMA_VERSION) -----------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict, one key per field (``held`` ranges as 2-lists), plus the readable
        ``held_fixed`` line. :meth:`from_json` reads it back."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            v = getattr(self, name)
            if name == "held":
                v = {k: [lo, hi] for k, (lo, hi) in v.items()}
            elif name == "model_args" and v:
                v = {k: list(x) if isinstance(x, tuple) else x for k, x in v.items()}
            out[name] = v
        if self.held:
            out["held_fixed"] = self.held_text
        return out

    @classmethod
    def from_json(
        cls, d: Mapping[str, Any] | None, *, law: Mapping[str, Any] | None = None
    ) -> Conventions:
        """Read :meth:`to_json`'s form, or the v1 form written before ``schema_version`` existed:
        every value a string, the parametrization and base shape on the law (``law``), the held
        ranges in the law's ``domain`` under ``"held:<name>"`` keys. Unknown keys are ignored
        (a newer writer may add fields)."""
        d = dict(d or {})
        law = law or {}
        if int(law.get("schema_version") or 1) >= 2:
            kw = {k: d[k] for k in _FIELDS if k in d}
            kw["model_args"] = dict(d["model_args"]) if d.get("model_args") else None
            kw["held"] = {k: (float(v[0]), float(v[1])) for k, v in (d.get("held") or {}).items()}
            return cls(**kw)
        return cls._from_v1(d, law)

    @classmethod
    def _from_v1(cls, d: Mapping[str, Any], law: Mapping[str, Any]) -> Conventions:
        """The string-keyed conventions of schema 1 (see :meth:`from_json`). A key the old writer
        left out means unknown, except for the defaults it always assumed."""
        n_params = str(d.get("n_params", "non-embedding"))
        held = {
            k[len(V1_HELD_PREFIX) :]: (float(v[0]), float(v[1]))
            for k, v in (law.get("domain") or {}).items()
            if k.startswith(V1_HELD_PREFIX)
        }
        warmup = d.get("warmup")
        return cls(
            n_params=n_params.replace(" (as imported)", ""),
            n_params_source="as imported" if "as imported" in n_params else "counted",
            batch=str(d.get("batch", "tokens")),
            flops=str(d.get("flops", FLOPS_6ND)),
            tokens=str(d.get("tokens", "tokens")),
            vocab_size=_int_or_none(d.get("vocab_size")),
            data=d.get("data"),
            lr=str(d.get("lr", "")),
            optimizer="adamw" if "AdamW" in str(d.get("lr", "")) else None,
            schedule=d.get("schedule"),
            min_lr_ratio=_float_or_none(d.get("min_lr_ratio")),
            warmup=warmup if warmup == "searched" else _float_or_none(warmup),
            decay_fraction=_float_or_none(d.get("decay_fraction")),
            z_loss=_float_or_none(d.get("z_loss")),
            init_std=_float_or_none(d.get("init_std")),
            output_mult=_float_or_none(d.get("output_mult")) or 1.0,
            parametrization=law.get("parametrization"),
            base_width=_int_or_none(law.get("base_width")),
            base_depth=_int_or_none(law.get("base_depth")),
            held=held,
        )


_FIELDS: Final[tuple[str, ...]] = tuple(Conventions.__dataclass_fields__)


def held_text(held: Mapping[str, tuple[float, float]]) -> str:
    """Held ranges as one readable line, what the cells held fixed apart from what varied over
    them, e.g. ``not modelled, held fixed over the fitted cells: tokens 8.19e+05; varied over
    them: depth 1–16`` ("held fixed: ... depth 1-16" had been said of a depth ladder's law: a
    report audit)."""
    fixed, varied = [], []
    for name, (lo, hi) in held.items():
        if hi <= lo * (1 + 1e-9):
            fixed.append(f"{name} {lo:.3g}")
        else:
            varied.append(f"{name} {lo:.3g}–{hi:.3g}")
    parts = ([f"held fixed over the fitted cells: {'; '.join(fixed)}"] if fixed else []) + (
        [f"varied over {'them' if fixed else 'the fitted cells'}: {'; '.join(varied)}"]
        if varied else []
    )  # fmt: skip
    return "not modelled, " + "; ".join(parts)


def _float_or_none(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int_or_none(v: Any) -> int | None:
    f = _float_or_none(v)
    return None if f is None else int(f)

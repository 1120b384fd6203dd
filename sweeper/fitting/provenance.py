"""The conventions a law fitted to a stored sweep records: read from the sweep, in one place.

A launched sweep knows everything: its data's token unit and vocabulary, the schedule, warmup and
z-loss its trials trained with, the proxies' init std, output multiplier and parametrization (from
its stored study). An imported sweep knows only what its file says: N "as imported", tokens "as
imported", FLOPs as the file gave them (6·N·D without attention when they were filled in from N
and D). Runs handed over without a sweep are treated like an imported file.

Either way the proxies' context length (the runs' ``seq_len``, else the study's) is recorded as
held (``held["seq_len"]``): no law models it, and a target trained at a context 32× the proxies'
had never been told (a recommend audit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.fitting.conventions import (
    FLOPS_6ND_NO_ATTENTION,
    FLOPS_AS_IMPORTED,
    TOKENS_AS_IMPORTED,
    TOKENS_BYTES,
    Conventions,
)

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.study.handle import Sweep
    from sweeper.study.spec import ParamSpec, StudySpec

__all__ = [
    "ATTENTION_AS_MUP",
    "ATTENTION_NOT_MUP",
    "builder_attention_is_mup",
    "declared_conventions",
    "named_parametrizations",
    "runs_conventions",
    "sweep_conventions",
    "token_unit",
]


#: the words that end the parametrization variant a builder's law records under muP/CompleteP:
#: the model keeps its own attention scale (1/sqrt(d_head) in a standard attention), which is
#: muP's 1/d rule on the proxies when the head size is held fixed (heads grow with width), and
#: not when the head count is (d_head grows with width); :func:`builder_attention_is_mup` reads
#: them back (the Megatron export had written "attention scale sqrt(16)/128 ...: as the proxies"
#: for a fixed head count; an adapters audit)
ATTENTION_AS_MUP = "muP's 1/d rule the same there"
ATTENTION_NOT_MUP = "muP's 1/d rule not applied"


def builder_attention_is_mup(conv: Conventions) -> bool | None:
    """Whether the attention scale of a builder's proxies under muP/CompleteP was muP's 1/d rule:
    True with a head size held fixed (the model's own 1/sqrt(d_head) is sqrt(d_base)/d_head at
    every width), False with a head count held fixed, None when the law does not say (no builder,
    SP, or a law stored before it recorded this, 2026-11-29)."""
    variant = conv.parametrization_variant or ""
    if conv.model_builder is None or conv.parametrization not in ("mup", "completep"):
        return None
    if ATTENTION_NOT_MUP in variant:
        return False
    return True if ATTENTION_AS_MUP in variant else None


def _attention_of_builder(heads: int | None, head_dim: int) -> str:
    """What a builder's muP/CompleteP variant adds about its attention scale (see
    :data:`ATTENTION_AS_MUP`)."""
    if heads is not None:
        return (
            f"; heads fixed at {heads}: d_head grew with width under the model's own attention "
            f"scale, {ATTENTION_NOT_MUP}"
        )
    return (
        f"; head size fixed at {head_dim}: the model's own attention scale is fixed too, "
        f"{ATTENTION_AS_MUP}"
    )


def sweep_conventions(sweep: Sweep) -> Conventions:
    """What the numbers of ``sweep`` mean (see :mod:`sweeper.fitting.conventions`)."""
    if not sweep.launched and sweep.spec is None:
        conv = runs_conventions(sweep.runs())
        shape = _shape_of(sweep.meta)  # (an import's metadata names no parametrization: the runs')
        shape["parametrization"] = shape["parametrization"] or conv.parametrization
        return declared_conventions(replace(conv, **shape), sweep.meta.get("conventions"))
    meta = sweep.meta if sweep.launched else _imported_study_meta(sweep)
    return replace(_study_conventions(sweep, meta), held=_context_of(meta))


def _study_conventions(sweep: Sweep, meta: Mapping[str, Any]) -> Conventions:
    """The conventions of a sweep with a study (launched, or imported with its study)."""
    data = str(meta.get("data") or "builtin")
    vocab = meta.get("vocab_size")
    conv = Conventions(
        data=data,
        vocab_size=int(vocab) if vocab is not None else 256,
        tokens=token_unit(data, vocab),
        init_std=float(meta["init_std"]) if meta.get("init_std") is not None else 0.02,
        output_mult=float(meta.get("output_mult") or 1.0),
        **_shape_of(meta),
    )
    if sweep.spec is not None:
        return replace(
            conv,
            **_schedule(sweep.spec, meta),
            **_own_code(sweep.spec, meta),
            **_optimizer_settings(sweep.spec, meta),
        )
    schedule = str(meta.get("schedule") or "unknown")  # the stored study no longer parses
    return replace(
        conv,
        schedule=schedule,
        min_lr_ratio=None,
        warmup=None,
        z_loss=None,
        lr=f"peak AdamW LR, {schedule} schedule (stored study unreadable: {sweep.spec_error})",
    )


def runs_conventions(runs: pd.DataFrame) -> Conventions:
    """The conventions of runs that come with nothing but their columns (an imported file)."""
    fl = runs["flops"].to_numpy(dtype=float)
    six_nd = 6.0 * runs["n_params"].to_numpy(dtype=float) * runs["tokens"].to_numpy(dtype=float)
    ok = np.isfinite(fl) & np.isfinite(six_nd)
    filled = bool(ok.any() and np.allclose(fl[ok], six_nd[ok], rtol=1e-9, atol=0.0))
    return Conventions(
        n_params_source="as imported",
        flops=FLOPS_6ND_NO_ATTENTION if filled else FLOPS_AS_IMPORTED,
        tokens=TOKENS_AS_IMPORTED,
        vocab_size=None,
        data=None,
        lr="peak LR as imported",
        optimizer=None,
        schedule=None,
        min_lr_ratio=None,
        warmup=None,
        z_loss=None,
        init_std=None,
        parametrization=_one_parametrization(runs),
        held=_context_of({}, runs),
    )


def _context_of(
    meta: Mapping[str, Any], runs: pd.DataFrame | None = None
) -> dict[str, tuple[float, float]]:
    """``{"seq_len": (min, max)}``, the proxies' context lengths: over the runs' positive
    ``seq_len`` values (a run without one, a failed row's, says nothing of the others': one had
    switched the record off for the whole sweep, and refused its join with another, a review),
    else the study's ``seq_len`` (or ``context``); empty when neither says."""
    if runs is not None and "seq_len" in runs:
        import pandas as pd

        v = pd.to_numeric(runs["seq_len"], errors="coerce").to_numpy(dtype=float)
        v = v[np.isfinite(v) & (v > 0)]
        return {"seq_len": (float(v.min()), float(v.max()))} if v.size else {}
    t = meta.get("seq_len") or meta.get("context")
    return {"seq_len": (float(t), float(t))} if isinstance(t, (int, float)) and t > 0 else {}


def declared_conventions(conv: Conventions, declared: Mapping[str, Any] | None) -> Conventions:
    """``conv`` with what an import declared (``import --convention``,
    :mod:`sweeper.study.declared`), and the LR described by it."""
    if not declared:
        return conv
    conv = replace(conv, **declared)
    said = [
        f"{k} {declared[k]}"
        for k in ("optimizer", "schedule", "min_lr_ratio", "warmup", "decay_fraction", "z_loss")
        if k in declared
    ]
    return replace(conv, lr=conv.lr + (f" (declared: {', '.join(said)})" if said else ""))


def named_parametrizations(runs: pd.DataFrame) -> list[str]:
    """The parametrizations the runs' own ``parametrization`` column names (lower case, sorted;
    what is not a known one, such as "standard", included: it is the column's word)."""
    if "parametrization" not in runs:
        return []
    return sorted({str(v).strip().lower() for v in runs["parametrization"].dropna()})


def _one_parametrization(runs: pd.DataFrame) -> str | None:
    """The parametrization the runs' own column names, when every run names the same known one
    (None otherwise: a mixed or unknown column says nothing the law can carry)."""
    from proxy_models.rules import PARAMETRIZATIONS

    named = named_parametrizations(runs)
    return named[0] if len(named) == 1 and named[0] in PARAMETRIZATIONS else None


def token_unit(data: str, vocab: Any) -> str:
    """``"bytes"`` for byte-level data (the built-in corpus, text files), ``"tokenizer:<name>"``
    for nanoGPT token files. A path that is not on this machine is judged by its suffix and the
    vocabulary (byte-level data has vocab 256 unless the study says otherwise)."""
    if data == "builtin":
        return TOKENS_BYTES
    path = Path(data).expanduser()
    if path.is_dir():
        return f"tokenizer:{path.name}" if (path / "train.bin").exists() else TOKENS_BYTES
    if path.is_file() or path.suffix.lower() in (".txt", ".md"):
        return TOKENS_BYTES
    return TOKENS_BYTES if vocab in (None, 256) else f"tokenizer:{path.name}"


def _imported_study_meta(sweep: Sweep) -> dict[str, Any]:
    """The study metadata of a sweep imported with its study (``import --study``), as launching
    that study would have recorded it."""
    from sweeper.study.ladder import cells
    from sweeper.study.sweep import study_meta

    assert sweep.spec is not None
    return study_meta(sweep.spec, cells(sweep.spec))


def _shape_of(meta: Any) -> dict[str, Any]:
    """The parametrization and base shape a sweep's metadata records (None when it does not); the
    base head size is the base width over a fixed head count, else the fixed head size."""
    base_width, heads, head_dim = meta.get("base_width"), meta.get("heads"), meta.get("head_dim")
    base_head_dim = base_width // heads if base_width and heads else head_dim
    return {
        "parametrization": meta.get("parametrization"),
        "base_width": base_width,
        "base_depth": meta.get("base_depth"),
        "base_head_dim": int(base_head_dim) if base_head_dim else None,
    }


def _own_code(spec: StudySpec, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The builder, the parametrization variant applied to it, the training function, the
    optimizer and the decay timescale of a launched study. What the user's code decides is
    unknown (None): the optimizer of a training function that does not honour ``optimizer``, and
    the init std of a builder's model under SP (it keeps its own init) or of a function that
    does not honour ``init_std``, unless Sweeper drew the init of the model it passes the
    function (a builder's under muP/CompleteP: an own-model audit's law said "unknown", and its
    recipe a formula's std 8x the proxies')."""
    from proxy_models.train_function import applied_to_model

    m, t = spec.model, spec.train
    out: dict[str, Any] = {"optimizer": t.optimizer, "weight_decay_tau": t.weight_decay_tau}
    honoured = _honoured(spec, meta)
    if honoured is not None and "optimizer" not in honoured:
        out["optimizer"] = None
    own_init = m.builder is not None and m.parametrization == "sp"
    # (a builder beside a function under muP/CompleteP passes it the model: validate's rule)
    applied = applied_to_model(m.parametrization) if m.builder is not None else ()
    if own_init or (honoured is not None and "init_std" not in {*honoured, *applied}):
        out["init_std"] = None
    if m.builder is not None:
        from proxy_models.builder import VARIANTS

        variant = VARIANTS[m.parametrization]
        if m.parametrization in ("mup", "completep"):
            variant += _attention_of_builder(m.heads, m.head_dim)
        out.update(
            model_builder=m.builder,
            model_args={k: v for k, v in m.args} or None,
            parametrization_variant=variant,
        )
    if t.function is not None:
        out["train_function"] = t.function
        if m.builder is None:  # (the function's own model is not Sweeper's to count)
            out["n_params_source"] = (
                "12·L·d² at the cell's shape, not the training function's model"
            )
    return out


def _optimizer_settings(spec: StudySpec, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The optimizer settings the LR was measured under: weight decay (None when the study gives
    it as the timescale ``weight_decay_tau``), beta1, beta2, eps and grad clip; ``"searched"`` for
    one the sampler varied, None for one a training function does not honour (unknown)."""
    from proxy_models.hparams import HParams

    def fixed(name: str, given: ParamSpec | None) -> float | str:
        if given is None:  # (the proxies' default)
            return float(getattr(HParams(lr=1.0), name))
        return float(given.values[0]) if given.is_fixed and given.values else "searched"

    s, t = spec.search, spec.train
    decay = fixed("weight_decay", s.weight_decay)
    out: dict[str, Any] = {
        "weight_decay": None if t.weight_decay_tau is not None else decay,
        "beta1": float(t.beta1),
        "beta2": fixed("beta2", s.beta2),
        "eps": float(t.eps),
        "grad_clip": float(t.grad_clip),
    }
    honoured = _honoured(spec, meta)
    if honoured is not None:
        out = {k: v if k in honoured else None for k, v in out.items()}
    return out


def _honoured(spec: StudySpec, meta: Mapping[str, Any] | None) -> set[str] | None:
    """The keys the study's training function honours: as its launch recorded them, else read
    from the function here (:func:`~sweeper.study.own_code.function_honours`)."""
    if spec.train.function is None:
        return None
    from sweeper.study.own_code import function_honours

    recorded = (meta or {}).get("honours")
    return set(recorded) if isinstance(recorded, list) else set(function_honours(spec) or ())


def _schedule(spec: StudySpec, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The LR convention of a launched study: schedule, min LR, warmup (the proxies' default of
    10% of the steps when the study does not set it) and z-loss, as fields and as one line. Under a
    training function, what it does not honour is unknown (None)."""
    out = _schedule_of_loop(spec)
    honoured = _honoured(spec, meta)
    if honoured is None:
        return out
    for key in ("schedule", "min_lr_ratio", "warmup", "decay_fraction", "z_loss"):
        if key not in honoured:
            out[key] = None
    out["lr"] = f"peak LR as the training function {spec.train.function!r} defines it"
    if honoured:
        out["lr"] += f" (honours: {', '.join(sorted(honoured))})"
    return out


def _schedule_of_loop(spec: StudySpec) -> dict[str, Any]:
    from proxy_models.hparams import LR_MEANINGS

    t = spec.train
    w = spec.search.warmup
    warmup: float | str
    if w is None:
        warmup, text = 0.1, "warmup 10% of steps"
    elif w.is_fixed and w.values is not None:
        warmup = float(w.values[0])
        text = f"warmup {warmup:.0%} of steps" if warmup < 1 else f"warmup {warmup:.0f} steps"
    else:
        warmup, text = "searched", "searched warmup"
    schedule: str = t.schedule
    if spec.search.schedule is not None:
        schedule = "searched"
        text += (
            ", searched schedule (" + ", ".join(map(str, spec.search.schedule.values or ())) + ")"
        )
    elif t.schedule == "cosine":
        text += f", cosine to {t.min_lr_ratio:.0%}"
    elif t.schedule == "linear":
        text += f", linear to {t.min_lr_ratio:.0%}"
    elif t.schedule == "wsd":
        text += (
            f", WSD: constant, then decay to {t.min_lr_ratio:.0%} over the last "
            f"{t.decay_fraction:.0%} of steps"
        )
    else:
        text += ", then constant"
    if t.z_loss:
        text += f", z-loss {t.z_loss:g}"
    if t.weight_decay_tau is not None:
        text += f", weight decay as the timescale tau = B/(lr·lambda·D) = {t.weight_decay_tau:g}"
    return {
        "lr": f"{LR_MEANINGS[t.optimizer]}, {text}",
        "schedule": schedule,
        "min_lr_ratio": float(t.min_lr_ratio),
        "warmup": warmup,
        "decay_fraction": float(t.decay_fraction) if t.schedule == "wsd" else None,
        "z_loss": float(t.z_loss),
    }

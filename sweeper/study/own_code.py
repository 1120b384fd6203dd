"""Trying a study's own code before any trial runs: its model builder and its training function.

:func:`check_own_code` imports what the study names, builds the smallest cell's model and runs one
forward pass (logits of shape (B, T, vocab_size); roles the parametrization can use), and checks the
training function's signature and the keys it honours against the keys the study sets. Every
problem is one line naming the study key; ``sweeper validate`` and ``launch`` refuse the study
(exit 2) before anything is written to the storage.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.errors import StudyError

if TYPE_CHECKING:
    from sweeper.study.spec import StudySpec

__all__ = [
    "USER_CODE_FIELDS",
    "builder_of",
    "check_own_code",
    "code_dirs",
    "code_fingerprints",
    "coord_check_study",
    "function_honours",
    "keys_set",
    "smallest_config",
]


def builder_of(spec: StudySpec) -> Any:
    """The study's :class:`proxy_models.builder.Builder` (None without ``model.builder``)."""
    m = spec.model
    if m.builder is None:
        return None
    from proxy_models.builder import Builder

    return Builder(m.builder, m.args, m.param_roles)


def config_kwargs(spec: StudySpec, width: int, depth: int) -> dict[str, Any]:
    """``ProxyConfig`` keyword arguments of the study's model at ``width`` × ``depth``."""
    m = spec.model
    return {
        "width": width,
        "depth": depth,
        "n_heads": m.heads,
        "head_dim": m.head_dim,
        "context": m.context,
        "vocab_size": m.vocab_size,
        "norm": m.norm,
        "qk_norm": m.qk_norm,
        "tied_embeddings": m.tied_embeddings,
        "init_std": m.init_std,
        "output_mult": m.output_mult,
        "parametrization": m.parametrization,
        "base_width": m.base_width,
        "base_depth": m.base_depth,
    }


def smallest_config(spec: StudySpec) -> Any:
    """The ``ProxyConfig`` of the ladder's smallest width at its smallest depth."""
    from proxy_models.config import ProxyConfig

    lad = spec.ladder
    widths = [c.width for c in lad.cells] or list(lad.widths)
    depths = [c.depth for c in lad.cells] or list(lad.depths)
    return ProxyConfig(**config_kwargs(spec, min(widths), min(depths)))


def keys_set(spec: StudySpec) -> list[str]:
    """Short names of the settings the study sets away from their defaults (or searches) that a
    training function would have to honour (:data:`proxy_models.train_function.HONOURABLE`)."""
    from proxy_models.train_function import HONOURABLE
    from sweeper.study.spec import ModelSpec, TrainSpec

    out: list[str] = []
    for section, cls in (("train", TrainSpec), ("model", ModelSpec)):
        part, default = getattr(spec, section), cls()
        for f in fields(cls):
            if HONOURABLE.get(f.name) == f"{section}.{f.name}" and getattr(part, f.name) != getattr(
                default, f.name
            ):
                out.append(f.name)
    out += [name for name, _ in spec.search.items() if name not in ("lr", "batch_size")]
    return out


def code_dirs(spec: StudySpec) -> list[str]:
    """Where a study's own modules are looked for, before ``sys.path``: the study file's folder,
    then the working directory."""
    dirs = []
    if spec.source and os.path.exists(str(spec.source)):
        dirs.append(str(Path(str(spec.source)).resolve().parent))
    if os.getcwd() not in dirs:
        dirs.append(os.getcwd())
    return dirs


#: the study fields that name the user's own code as ``"module:attribute"`` (a model builder, a
#: training function): ``launch`` ships those modules to every worker
USER_CODE_FIELDS: tuple[tuple[str, str], ...] = (
    ("model", "builder"),
    ("model", "param_roles"),
    ("train", "function"),
)


def code_fingerprints(spec: StudySpec) -> dict[str, str]:
    """For each study field that names the user's own code, the sha256 of its module's source
    file (``{"train.function": "..."}``; {} when it names none, a module not found here left
    out). The study's hash covers the study file's text, not that code: a sweep relaunched after
    its training function changed had kept the old runs as the new code's (a diff audit). Only
    the named module's own file is read, not what it imports."""
    out: dict[str, str] = {}
    refs = {f"{section}.{name}": getattr(getattr(spec, section, None), name, None)
            for section, name in USER_CODE_FIELDS}  # fmt: skip
    if any(isinstance(r, str) for r in refs.values()):
        importable(spec)
    for key, ref in refs.items():
        if not isinstance(ref, str) or ":" not in ref:
            continue
        try:
            found = importlib.util.find_spec(ref.split(":", 1)[0].strip())
        except (ImportError, ValueError):
            continue
        origin = found.origin if found is not None else None
        if origin and os.path.isfile(origin):
            out[key] = hashlib.sha256(Path(origin).read_bytes()).hexdigest()
    return out


def importable(spec: StudySpec) -> None:
    """Make the study's own modules importable here, as ``launch`` ships them to the workers:
    :func:`code_dirs` join the end of ``sys.path`` (an installed module of the same name wins).
    ``sweeper``'s own command puts neither folder on it."""
    for d in code_dirs(spec):
        if d not in sys.path:
            sys.path.append(d)


def check_own_code(spec: StudySpec) -> list[str]:
    """Every problem of the study's builder and training function (module docstring)."""
    if spec.model.builder is not None or spec.train.function is not None:
        importable(spec)
    out: list[str] = []
    builder = builder_of(spec)
    if builder is not None:
        out += _check_builder(spec, builder)
    if spec.train.function is not None:
        out += _check_function(spec)
    return out


def attention_warnings(spec: StudySpec) -> list[str]:
    """A builder under muP/CompleteP with ``heads`` fixed: its model keeps its own attention
    scale (the builder applies no 1/d rule), and with the head count fixed d_head grows with
    width, so the proxies do not run muP's attention (the law records it in its variant, and the
    Megatron export says so; an adapters audit)."""
    m = spec.model
    if m.builder is None or m.parametrization == "sp" or m.heads is None:
        return []
    widths = sorted({*spec.ladder.widths, *(c.width for c in spec.ladder.cells)})
    sizes = f" ({widths[0] // m.heads} to {widths[-1] // m.heads})" if len(widths) > 1 else ""
    return [
        f"model.heads = {m.heads} beside model.builder under {m.parametrization}: the builder's "
        "model keeps its own attention scale (1/sqrt(d_head) in a standard attention, as in "
        f"sweeper.adapters), and with the head count fixed d_head grows with width{sizes}, so "
        "muP's 1/d attention rule is not applied (the law records it, and the Megatron export "
        "says its --use-mup attention is not the proxies'); set model.head_dim instead (heads "
        "then grow with width and the two agree), unless the builder scales its attention itself"
    ]


def _check_builder(spec: StudySpec, builder: Any) -> list[str]:
    from proxy_models.builder import BuilderError, prepare

    try:
        cfg = smallest_config(spec)
        prepare(builder, cfg, seed=0, device="cpu")
    except BuilderError as e:
        return [str(e)]
    except ValueError as e:  # the shape itself (ProxyConfig)
        return [f"model.builder: the smallest cell is not a valid shape: {e}"]
    except Exception as e:  # param_roles or a hook raising
        return [f"model.builder: {builder.path!r}: {type(e).__name__}: {e}"]
    from sweeper.study.ladder import builder_scale_problems, cells

    return builder_scale_problems(cells(spec))


def _check_function(spec: StudySpec) -> list[str]:
    from proxy_models.builder import load_callable
    from proxy_models.train_function import HONOURABLE, KEY, check_function, honours_of

    path = spec.train.function
    assert path is not None
    par = spec.model.parametrization if spec.model.builder is not None else None
    out = check_function(path, builder_parametrization=par)
    if out:
        return out
    fn = load_callable(path, KEY)
    honours = set(honours_of(fn))
    covered = honours | set(_sweeper_applies(spec, fn))
    for name in [k for k in keys_set(spec) if k not in covered]:
        out.append(
            f"{HONOURABLE[name]}: set by the study, but the training function {path!r} does "
            f"not honour it (it honours: {', '.join(sorted(honours)) or 'nothing'}); remove "
            "it, or honour it and list it in the function's `honours`"
        )
    return out


def _sweeper_applies(spec: StudySpec, fn: Any) -> tuple[str, ...]:
    """The study keys Sweeper applies itself to the model it passes the training function ``fn``
    (:func:`proxy_models.train_function.applied_to_model`; none without a builder, or when
    ``fn`` does not take ``model=``)."""
    from proxy_models.train_function import applied_to_model, takes_model

    if spec.model.builder is None or not takes_model(fn):
        return ()
    return applied_to_model(spec.model.parametrization)


def coord_check_study(
    spec: StudySpec,
    *,
    widths: Any = None,
    depth: int | None = None,
    steps: int = 5,
    lr: float | None = None,
    batch_size: int = 8,
    seed: int = 0,
    seeds: int | None = None,
) -> dict[str, Any]:
    """The coordinate check of ``spec``'s model (:func:`sweeper.api.coord_check`) as a dict
    that is valid JSON (a non-finite number is None): ``rows`` (width, RMS per quantity averaged
    over the seeds, initial RMS, each seed's RMS and probe loss), ``slopes`` (d log RMS / d log
    width), ``slope_se`` (their seed-to-seed standard errors), ``ratios`` (max / min RMS across
    the widths), ``verdict`` (``"width-stable"``, ``"not width-stable"``, ``"diverged"``),
    ``stable`` (True, False, or None when a run diverged: not judged), ``unstable`` and
    ``reasons``, and what was run. ``seeds`` runs (default
    :data:`proxy_models.coord_check.DEFAULT_SEEDS`) from ``seed`` on: seed, seed + 1, ...; the
    rule is :func:`proxy_models.coord_check.judge`'s."""
    import math

    import numpy as np

    from proxy_models.builder import VARIANTS
    from proxy_models.config import ProxyConfig
    from proxy_models.coord_check import (
        DEFAULT_SEEDS,
        SLOPE_Z,
        STABLE_SLOPE,
        coord_check,
        judge,
    )
    from proxy_models.data import load_data
    from proxy_models.hparams import HParams

    n_seeds = DEFAULT_SEEDS if seeds is None else seeds
    if not (isinstance(n_seeds, int) and not isinstance(n_seeds, bool) and n_seeds >= 1):
        raise StudyError(f"seeds (--seeds): a number of seeds >= 1, got {n_seeds!r}")
    lad = spec.ladder
    ws = sorted(set(widths or ([c.width for c in lad.cells] or list(lad.widths))))
    if len(ws) < 2:  # (one width: its slopes were NaN, written as invalid JSON, and 'stable')
        raise StudyError(
            f"widths (--widths): a coord check compares widths, got {ws}; give two or more"
        )
    dep = depth if depth is not None else min([c.depth for c in lad.cells] or list(lad.depths))
    if lr is None:
        p = spec.search.lr
        vals = [float(v) for v in (p.values if p.values is not None else (p.low, p.high))]
        lr = float(math.exp(np.mean(np.log(vals))))
    configs = []
    for w in ws:
        try:
            configs.append(ProxyConfig(**config_kwargs(spec, w, dep)))
        except ValueError as e:  # (the shape's own rule: a width the heads do not divide)
            raise StudyError(
                f"widths (--widths) {w} at depth {dep}: not a shape of the study's model: {e}"
            ) from None
    hp = HParams(lr=lr, optimizer=spec.train.optimizer, grad_clip=spec.train.grad_clip)
    data = load_data(
        None if spec.sweep.data == "builtin" else spec.sweep.data,
        vocab_size=spec.model.vocab_size if spec.sweep.data != "builtin" else None,
    )
    builder = builder_of(spec)
    runs = [
        coord_check(
            configs, hp, data=data, steps=steps, batch_size=batch_size, seed=s, builder=builder
        )
        for s in range(seed, seed + n_seeds)
    ]
    v = judge(runs)
    rows = _coord_rows(v, runs)
    notes = _coord_verdict_notes(spec, v, ws, n_seeds)
    return _json_safe(
        {
            "study": spec.name,
            "model": spec.model.builder or "built-in proxy",
            "parametrization": spec.model.parametrization,
            "variant": VARIANTS[spec.model.parametrization]
            if spec.model.builder
            else spec.model.parametrization,
            "base_width": spec.model.base_width,
            "depth": dep,
            "steps": steps,
            "lr": lr,
            "optimizer": spec.train.optimizer,
            "seeds": v.seeds,
            "rows": rows,
            "slopes": v.slopes,
            "slope_se": v.slope_se,
            "ratios": v.ratios,
            "stable_slope": STABLE_SLOPE,
            "slope_z": SLOPE_Z,
            "stable_ratio": v.ratio_limit,
            "verdict": v.verdict,
            "stable": v.stable,
            "unstable": v.unstable,
            "reasons": v.reasons,
            "unstable_slope": v.unstable_slope,
            "unstable_ratio": v.unstable_ratio,
            "diverged": [{"width": w, "seed": s} for w, s in v.diverged],
            "blow_up": v.blow_up or None,
            "notes": notes,
        }
    )


def _coord_rows(v: Any, runs: list[list[Any]]) -> list[dict[str, Any]]:
    """Per width of the judged check ``v``: the seed-averaged RMS, and each seed's RMS and
    probe losses (``runs``: the rows of each seed)."""
    return [
        {
            "width": w,
            "rms": v.rms[i],
            "rms_init": v.rms_init[i],
            "rms_seeds": {q: [rs[i].rms.get(q) for rs in runs] for q in v.rms[i]},
            "loss_seeds": [rs[i].loss for rs in runs],
            "loss_init_seeds": [rs[i].loss_init for rs in runs],
        }
        for i, w in enumerate(v.widths)
    ]


def _coord_verdict_notes(spec: StudySpec, v: Any, widths: list[int], n_seeds: int) -> list[str]:
    """The check's notes: what it does not check (:func:`_coord_notes`), led by a divergence, or
    followed by what one seed cannot judge."""
    notes = _coord_notes(spec)
    if v.verdict == "diverged":
        notes.insert(
            0,
            f"{_diverged_text(v.diverged, widths, v.seeds)}; worst: {v.blow_up}; at this LR the "
            "activations say nothing about width: lower --lr",
        )
    elif n_seeds == 1:
        notes.append(
            "one seed: the slopes' seed-to-seed spread is unknown, and one seed's RMS moves by "
            "2-3x between seeds after a few steps; --seeds 3 or more to judge"
        )
    return notes


def _diverged_text(runs: list[tuple[int, int]], widths: list[int], seeds: list[int]) -> str:
    """Which (width, seed) runs diverged, in words: "every run (3 widths x 3 seeds)", or per
    width ("w16 (seeds 0, 2), w32 (seed 1)")."""
    if len(runs) == len(widths) * len(seeds):
        return f"every run diverged ({len(widths)} widths x {len(seeds)} seeds)"
    by: dict[int, list[int]] = {}
    for w, s in sorted(runs):
        by.setdefault(w, []).append(s)
    each = [
        f"w{w} (seed{'s' if len(ss) > 1 else ''} {', '.join(map(str, ss))})" for w, ss in by.items()
    ]
    some = (
        " (diverging at some widths only is itself width-dependent)"
        if len(by) < len(widths)
        else ""
    )
    return f"{len(runs)} of {len(widths) * len(seeds)} runs diverged: {', '.join(each)}{some}"


def _json_safe(x: Any) -> Any:
    """``x`` with every non-finite float as None (``json.dumps`` wrote NaN: not JSON)."""
    import math

    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


def _coord_notes(spec: StudySpec) -> list[str]:
    """What a coordinate check of ``spec`` does not check: a training function is not run (the
    check trains the model the study builds with Sweeper's own steps; a diff audit's check of a
    study whose function builds its own model and optimizer printed the built-in proxy's)."""
    if spec.train.function is None:
        return []
    model = f"model.builder {spec.model.builder}" if spec.model.builder else "the built-in proxy"
    return [
        f"train.function {spec.train.function} is not run: this checks {model} under "
        f"{spec.model.parametrization}, stepped by Sweeper's own {spec.train.optimizer} loop; a "
        "function that builds its own model or optimizer is not what was checked"
    ]


def function_honours(spec: StudySpec) -> list[str] | None:
    """The keys the study's training function honours, sorted (None without one; empty when its
    module cannot be imported here, so that nothing unverified is claimed). A launch records
    them with the sweep (:func:`sweeper.study.sweep.study_meta`): a fit elsewhere, where the
    module does not import, had read the law's conventions differently."""
    if spec.train.function is None:
        return None
    try:
        from proxy_models.builder import BuilderError, load_callable
        from proxy_models.train_function import KEY, honours_of

        importable(spec)
        return sorted(honours_of(load_callable(spec.train.function, KEY)))
    except (ImportError, BuilderError):
        return []

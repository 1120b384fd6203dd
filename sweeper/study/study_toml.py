"""Writing a study back as TOML (every default filled in) and fingerprinting what it measures."""

from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import fields
from typing import Any

from sweeper.study.spec import (
    CellSpec,
    ModelSpec,
    ParamSpec,
    ResourcesSpec,
    SamplerSpec,
    StudySpec,
    TrainSpec,
)

__all__ = ["spec_hash", "study_toml"]


def study_toml(spec: StudySpec, *, operational: bool = True) -> str:
    """The resolved study as TOML (every default filled in); ``parse_study`` reads it back equal.

    ``operational=False`` leaves out what does not change what one trial measures: storage,
    resources, description, the target count ``trials_per_cell`` and the sampler's pacing knobs
    ``n_startup_trials``, ``max_pending_per_cell`` and the law sampler's ``budget_runs`` and
    ``stop_lr_interval_ratio`` (the sampler kind and seed stay; ``[target]`` stays), and
    ``model.output_mult`` at its default 1.0 (so sweeps launched before that knob keep their
    hash). ``sweep.first_seed`` is written only when not 0, in both forms.
    Keys added with the own-model work (``model.builder``, ``[model.args]``,
    ``model.param_roles``, ``train.function``, ``train.optimizer``, ``train.weight_decay_tau``,
    ``search.schedule``) are written only when set away from their defaults, in both forms.
    That text is what :func:`spec_hash` fingerprints.
    """
    lines: list[str] = []
    _section(lines, "sweep", _sweep_items(spec, operational))
    model_items = [
        (f.name, getattr(spec.model, f.name)) for f in fields(ModelSpec) if f.name != "args"
    ]
    if not operational and spec.model.output_mult == ModelSpec.output_mult:
        model_items = [(k, v) for k, v in model_items if k != "output_mult"]
    _section(lines, "model", model_items)
    if spec.model.args:
        _section(lines, "model.args", list(spec.model.args))
    _ladder(lines, spec)
    _section(lines, "search", [(n, _param_toml(p)) for n, p in spec.search.items()])
    train_items = [(f.name, getattr(spec.train, f.name)) for f in fields(TrainSpec)]
    # keys added after sweeps were launched are written only away from their defaults, so that
    # those sweeps keep their hash (None values are never written)
    train_items = [
        (k, v) for k, v in train_items if not (k in _NEW_AT_DEFAULT and v == _NEW_AT_DEFAULT[k])
    ]
    _section(lines, "train", train_items)
    _section(lines, "sampler", _sampler_items(spec, operational))
    _section(lines, "pruner", _pruner_items(spec))
    if spec.target is not None and spec.sampler.kind == "law":
        _section(lines, "target", [("params", spec.target.params), ("tokens", spec.target.tokens)])
    if operational:
        resources = [(f.name, getattr(spec.resources, f.name)) for f in fields(ResourcesSpec)]
        _section(lines, "resources", resources)
    return "\n".join(lines).rstrip() + "\n"


def _section(lines: list[str], name: str, items: list[tuple[str, Any]]) -> None:
    """Append the table ``[name]`` with its items (None values left out) to ``lines``."""
    lines.append(f"[{name}]")
    for k, v in items:
        if v is not None:
            lines.append(f"{k} = {_toml_value(v)}")
    lines.append("")


def _sweep_items(spec: StudySpec, operational: bool) -> list[tuple[str, Any]]:
    sw = spec.sweep
    items: list[tuple[str, Any]] = [("name", sw.name)]
    if operational:
        items += [("description", sw.description or None), ("storage", sw.storage)]
    items.append(("data", sw.data))
    # law: the budget is sampler.budget_runs; a count neither given nor a grid's: none (missing);
    # one given is written whatever it is (a 0 set in Python had read back as valid)
    given = sw.trials_per_cell is not None
    if operational and spec.sampler.kind != "law" and (given or spec.trials_per_cell):
        items.append(("trials_per_cell", spec.trials_per_cell))
    items.append(("seeds_per_point", sw.seeds_per_point))
    if sw.first_seed:  # (written only when set, so that earlier sweeps keep their hash)
        items.append(("first_seed", sw.first_seed))
    return items


def _ladder(lines: list[str], spec: StudySpec) -> None:
    """The ladder: its explicit cells as an array of tables, else its widths × depths × budgets."""
    lad = spec.ladder
    if not lad.cells:
        _section(
            lines,
            "ladder",
            [
                ("widths", list(lad.widths)),
                ("depths", list(lad.depths)),
                ("tokens", list(lad.tokens) or None),
                ("tokens_per_param", list(lad.tokens_per_param) or None),
            ],
        )
        return
    lines.append("[ladder]")
    for c in lad.cells:
        lines.append("[[ladder.cells]]")
        for f in fields(CellSpec):
            v = getattr(c, f.name)
            if v is not None:
                lines.append(f"{f.name} = {_toml_value(v)}")
        lines.append("")


def _sampler_items(spec: StudySpec, operational: bool) -> list[tuple[str, Any]]:
    keys = [f.name for f in fields(SamplerSpec)]
    if spec.sampler.kind != "law":
        keys = [k for k in keys if k not in _LAW_ONLY]
    if not operational:
        keys = [k for k in keys if k not in _SAMPLER_PACING]
    return [(k, getattr(spec.sampler, k)) for k in keys]


def _pruner_items(spec: StudySpec) -> list[tuple[str, Any]]:
    pr = spec.pruner
    items: list[tuple[str, Any]] = [("kind", pr.kind)]
    if pr.kind == "asha":
        items += [
            ("grace_fraction", pr.grace_fraction),
            ("reduction_factor", pr.reduction_factor),
            ("reports", pr.reports),
        ]
    return items


#: keys added after sweeps were launched, left out of the text at these (default) values
_NEW_AT_DEFAULT: dict[str, Any] = {"optimizer": TrainSpec.optimizer}
# sampler settings that change how fast a sweep explores, not what a trial measures
# (and the law sampler's budget and stopping rule: raising them grows the sweep, like
# trials_per_cell)
_SAMPLER_PACING = (
    "n_startup_trials",
    "max_pending_per_cell",
    "budget_runs",
    "stop_lr_interval_ratio",
)
#: sampler keys written only with kind = "law" (so older sweeps keep their hash)
_LAW_ONLY = ("budget_runs", "stop_lr_interval_ratio")


def spec_hash(spec: StudySpec) -> str:
    """SHA-256 (hex) of what the sweep measures: the resolved study without storage, resources,
    description, ``trials_per_cell`` and the sampler's pacing knobs (see :func:`study_toml`), so
    that moving a sweep, giving it more workers or more trials keeps its identity."""
    return hashlib.sha256(study_toml(spec, operational=False).encode()).hexdigest()


class _Inline(dict[str, Any]):
    """A dict written as an inline table."""


def _param_toml(p: ParamSpec) -> Any:
    if p.is_fixed:
        assert p.values is not None
        return int(p.values[0]) if p.integer else p.values[0]
    if p.values is not None:
        return _Inline(values=[int(v) if p.integer else v for v in p.values])
    assert p.low is not None and p.high is not None
    low, high = (int(p.low), int(p.high)) if p.integer else (p.low, p.high)
    return _Inline(low=low, high=high, log=p.log)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):  # (numpy's too: repr(np.float64(1e-4)) is not TOML)
        v = int(v)
    elif isinstance(v, numbers.Real):
        v = float(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _toml_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)

"""Reading a study file's TOML into a :class:`~sweeper.study.spec.StudySpec`, strictly: unknown
keys, wrong types and values out of bounds are each one line naming the key, all collected before
anything is raised (:func:`sweeper.study.spec.parse_study` raises them together)."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Final

from proxy_models.config import NORMS
from proxy_models.hparams import OPTIMIZERS, SCHEDULES
from proxy_models.rules import PARAMETRIZATIONS
from sweeper.study.spec import (
    OPTUNA_SAMPLERS,
    PRUNERS,
    SAMPLERS,
    SEARCHABLE,
    CellSpec,
    LadderSpec,
    ModelSpec,
    ParamSpec,
    PrunerSpec,
    ResourcesSpec,
    SamplerSpec,
    SearchSpace,
    StudySpec,
    SweepSection,
    TargetSpec,
    TrainSpec,
    check_run,
    check_spec,
    name_problem,
)

__all__ = ["SECTIONS", "SECTION_KEYS", "read_study"]


def read_study(
    raw: Mapping[str, Any], *, source: str | None = None, run: bool = False
) -> tuple[StudySpec, list[str]]:
    """A StudySpec from a TOML-like dict and every problem found in it, one line each (the spec
    is a stand-in wherever a key was bad: use it only when there are no problems).

    ``run``: the study is about to be run (a study file given to ``validate`` or ``launch``, not
    a stored study read back): also :func:`~sweeper.study.spec.check_run`'s rules."""
    r = _Reader()
    r.keys(raw, "", SECTIONS)
    sweep_d, ladder_d, search_d = (r.table(raw, s, required=True) for s in _REQUIRED)
    sweep = _read_sweep(r, sweep_d if sweep_d is not None else {"name": ""})
    model = _read_model(r, r.table(raw, "model") or {})
    ladder = _read_ladder(r, ladder_d or {})
    search = _read_search(r, search_d) if search_d is not None else None
    train = _read_train(r, r.table(raw, "train") or {})
    sampler_d = r.table(raw, "sampler")
    # [sampler] given as something else than a table, or misspelt ([samplr]): its kind is unknown
    lost = sampler_d is None and any(k == "sampler" or _section_meant(k) == "sampler" for k in raw)
    sampler = _read_sampler(r, sampler_d or {}, lost=lost)
    pruner = _read_pruner(r, r.table(raw, "pruner") or {})
    resources = _read_resources(r, r.table(raw, "resources") or {})
    target_d = r.table(raw, "target")
    target = _read_target(r, target_d) if target_d is not None else None
    if target is not None and sampler.kind in SAMPLERS and sampler.kind != "law":
        # (a spec built in Python may carry one: it is ignored, and not written, by other samplers)
        r.bad("target", f"only used with sampler.kind = 'law' (kind is {sampler.kind!r})")
    spec = StudySpec(
        sweep=sweep,
        model=model,
        ladder=ladder,
        # a bad or missing lr is already reported; a one-value stand-in lets the other checks run
        search=search if search is not None else SearchSpace(lr=ParamSpec.fixed(1e-3)),
        train=train,
        sampler=sampler,
        pruner=pruner,
        resources=resources,
        target=target,
        source=source,
    )
    found = check_spec(spec, code=False)
    if sampler.kind == UNKNOWN_KIND:  # what is wrong with the kind is already said
        found = [p for p in found if _key_of(p) != "sampler.kind"]
    problems = r.problems + [p for p in found if not _covered(p, r.problems)]
    # a key written in the wrong section is said once: "move it", not also "missing" at its home
    problems = [p for p in problems if not _missing_moved(p, r.moved)]
    if run:
        problems += check_run(spec, known=problems)
    return spec, problems


#: the stand-in kind of a sampler or pruner whose kind is unknown (misspelt, or of a misspelt
#: section): no rule that depends on the kind is applied to it
UNKNOWN_KIND: Final = ""


def _section_meant(key: str) -> str | None:
    """The section an unknown top-level key probably misspells (``samplr``: ``sampler``)."""
    if key in SECTIONS:
        return None
    close = difflib.get_close_matches(key, SECTIONS, n=1)
    return close[0] if close else None


def _missing_moved(problem: str, moved: set[str]) -> bool:
    key, _, what = problem.partition(":")
    return key in moved and what.strip().startswith("missing")


def _key_of(problem: str) -> str:
    return problem.split(":", 1)[0].strip("[]")


def _covered(problem: str, earlier: list[str]) -> bool:
    """A cross-field problem about a key already reported (e.g. ``missing`` after a wrong type):
    the key itself, a key under it, an element of it (``ladder.depths[0]`` covers
    ``ladder.depths``), a section-level problem (``ladder: give exactly one of ...``) once one
    of the section's keys failed, and the problems that read a whole section
    (:data:`_READS_SECTION`) once a key of it failed (each had been a second, misleading line:
    an audit)."""
    key = _key_of(problem)
    for e in earlier:
        # (search.lr.values[1] -> search.lr.values; _key_of has stripped its last "]")
        k = re.sub(r"\[\d+\]?$", "", _key_of(e))
        if key == k or key.startswith(k + ".") or (k in _REQUIRED and key.startswith(k)):
            return True
        if key in SECTIONS and k.startswith(key + "."):
            return True
        for at, says, section in _READS_SECTION:
            if key == at and says in problem and (k == section or k.startswith(section + ".")):
                return True
    return False


#: cross-field problems that read a whole section, whose stand-in values a failed key of it
#: leaves: (the key of the problem, what it says, the section). The grid's size is counted from
#: every searched parameter (a bad LR is a one-value stand-in: "6 exceeds the grid's 1
#: point(s)"), the law sampler's least budget from the ladder's cells.
_READS_SECTION: Final = (
    ("sweep.trials_per_cell", "exceeds the grid", "search"),
    ("sampler.budget_runs", "the plan spends starting every cell", "ladder"),
)


_REQUIRED: Final = ("sweep", "ladder", "search")
#: the tables a study file may hold
SECTIONS: Final = (
    "sweep",
    "model",
    "ladder",
    "search",
    "train",
    "sampler",
    "pruner",
    "resources",
    "target",
)

_SWEEP_KEYS: Final = (
    "name",
    "description",
    "storage",
    "data",
    "trials_per_cell",
    "seeds_per_point",
    "first_seed",
)
#: every section's keys (what :meth:`_Reader.keys` allows, and where it says a key belongs)
SECTION_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "sweep": _SWEEP_KEYS,
    "model": tuple(f.name for f in fields(ModelSpec)),
    "ladder": ("widths", "depths", "tokens", "tokens_per_param", "cells"),
    "search": SEARCHABLE,
    "train": tuple(f.name for f in fields(TrainSpec)),
    "sampler": tuple(f.name for f in fields(SamplerSpec)),
    "pruner": tuple(f.name for f in fields(PrunerSpec)),
    "resources": tuple(f.name for f in fields(ResourcesSpec)),
    "target": ("params", "tokens"),
}


def _misspelt_kind(key: str, value: Any) -> bool:
    """An unknown ``[sampler]`` key with a string value: the kind misspelt (``knd = "grid"``),
    its other keys being numbers."""
    return key not in SECTION_KEYS["sampler"] and isinstance(value, str)


def _homes(key: str, section: str) -> list[str]:
    """The other sections where an unknown ``key`` of ``section`` ("": the top level) is a key
    (none for a key of a nested table, ``ladder.cells[0]`` or ``search.lr``)."""
    if section and section not in SECTION_KEYS:
        return []
    return [s for s, keys in SECTION_KEYS.items() if s != section and key in keys]


#: other tools' names for a study's keys (docs/STUDY.md lists them): the hint names Sweeper's
#: (an audit: ``seq_len`` had got only the list of allowed keys)
KEY_ALIASES: Final[dict[str, str]] = {
    "seq_len": "[model] context",
    "block_size": "[model] context",
    "n_heads": "[model] heads",
    "n_head": "[model] heads",
    "d_model": "[ladder] widths",
    "n_embd": "[ladder] widths",
    "n_layers": "[ladder] depths",
    "n_layer": "[ladder] depths",
}


#: what a study cannot hold, which a user may look for by these names (docs/STUDY.md's "not
#: study keys"): ``search.ramp`` had been asked "did you mean 'warmup'?"
NOT_AVAILABLE: Final[dict[str, str]] = {
    "ramp": "a batch-size ramp (HParams.ramp) is not available in a study",
}
#: the similarity an unknown key needs to an allowed one to be told "did you mean" it (difflib's
#: ratio; its default 0.6 took 'ramp' for 'warmup'; 'knd' -> 'kind' is 0.86, 'batch' ->
#: 'batch_size' 0.67)
HINT_CUTOFF: Final = 0.65


def _unknown_key_hint(key: str, section: str, allowed: tuple[str, ...]) -> str:
    """What to say of an unknown ``key`` in ``section`` ("" at the top level): Sweeper's name for
    another tool's key, else the sections it belongs in, else the allowed key it probably
    misspells, else every allowed key."""
    if key in KEY_ALIASES:
        return f"unknown key: Sweeper's name for it is {KEY_ALIASES[key]}"
    if key in NOT_AVAILABLE:
        return f"unknown key: {NOT_AVAILABLE[key]}"
    homes = _homes(key, section)
    if homes:
        here = f"in [{section}]" if section else "at the top level"
        return f"unknown key {here}: move it to {' or '.join(f'[{h}]' for h in homes)}"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=HINT_CUTOFF)
    meant = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key ({meant}expected one of: {', '.join(allowed)})"


class _Reader:
    """Typed access to a TOML dict that records a one-line problem per bad key instead of raising."""

    _MISSING: Final = object()

    def __init__(self) -> None:
        self.problems: list[str] = []
        #: keys at their home that an unknown key elsewhere was told to move to ("sweep.name")
        self.moved: set[str] = set()

    def bad(self, key: str, msg: str) -> None:
        self.problems.append(f"{key}: {msg}")

    def keys(self, d: Mapping[str, Any], prefix: str, allowed: tuple[str, ...]) -> None:
        for k in d:
            if k not in allowed:
                where = f"{prefix}.{k}" if prefix else k
                self.bad(where, _unknown_key_hint(k, prefix, allowed))
                self.moved.update(f"{h}.{k}" for h in _homes(k, prefix))

    def table(
        self, raw: Mapping[str, Any], name: str, *, required: bool = False
    ) -> dict[str, Any] | None:
        """The section ``name``; None (and a problem when ``required``) if missing or not a table."""
        v = raw.get(name, self._MISSING)
        if v is self._MISSING:
            if required:
                self.bad(f"[{name}]", "missing section")
            return None
        if not isinstance(v, dict):
            self.bad(name, f"expected a table, got {_tname(v)}")
            return None
        return v

    def get(
        self,
        d: Mapping[str, Any],
        key: str,
        path: str,
        kind: str,
        default: Any = None,
        *,
        required: bool = False,
        choices: tuple[str, ...] | None = None,
        low: float | None = None,
        low_open: bool = False,
        high: float | None = None,
        high_open: bool = False,
    ) -> Any:
        """``d[key]`` checked as ``kind`` (str|int|float|bool) and bounds; default when missing or bad."""
        where = f"{path}.{key}"
        if key not in d:
            if required:
                self.bad(where, "missing")
            return default
        ok, v = _coerce(d[key], kind)
        if not ok:
            self.bad(where, _not_a(kind, d[key], (low, low_open, high, high_open)))
            return default
        if choices is not None and v not in choices:
            self.bad(where, f"unknown value {v!r} (expected one of: {', '.join(choices)})")
            return default
        if not _in_bounds(v, low, low_open, high, high_open):
            self.bad(where, f"{v!r} {_bounds_text(low, low_open, high, high_open)}")
            return default
        return v

    def list_of(
        self,
        d: Mapping[str, Any],
        key: str,
        path: str,
        kind: str,
        *,
        low: float | None = None,
        low_open: bool = False,
    ) -> tuple[Any, ...]:
        where = f"{path}.{key}"
        if key not in d:
            return ()
        v = d[key]
        if not isinstance(v, list):
            ok, x = _coerce(v, kind)
            if ok:  # a scalar is a list of one
                v = [x]
            else:
                self.bad(
                    where,
                    f"expected a list of {_PLURALS[kind]}, got {_tname(v)} {v!r}"
                    + _as_list(kind, v),
                )
                return ()
        if not v:
            self.bad(where, "empty list")
            return ()
        out = []
        for i, item in enumerate(v):
            ok, x = _coerce(item, kind)
            if not ok:
                self.bad(f"{where}[{i}]", _not_a(kind, item, (low, low_open, None, False)))
                continue
            if not _in_bounds(x, low, low_open, None, False):
                self.bad(where, f"{x!r} {_bounds_text(low, low_open, None, False)}")
                continue
            out.append(x)
        if len(set(out)) != len(out):
            self.bad(where, "duplicate values")
        return tuple(out)


_KIND_NAMES: Final = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
}


_PLURALS: Final = {"str": "strings", "int": "integers", "float": "numbers", "bool": "booleans"}


def _as_list(kind: str, v: Any) -> str:
    """The fix of a list of numbers written as a string ("16,24,32": ``: write [16, 24, 32]``)."""
    if kind not in ("int", "float") or not isinstance(v, str):
        return ""
    try:
        nums = [int(x) if kind == "int" else float(x) for x in re.split(r"[\s,;]+", v.strip(" []"))]
    except ValueError:
        return ""
    if not all(math.isfinite(x) for x in nums):
        return ""
    return f": write [{', '.join(repr(x) for x in nums)}]"


def _not_a(kind: str, v: Any, bounds: tuple[float | None, bool, float | None, bool]) -> str:
    """Why ``v`` is not a value of ``kind``: a NaN or an infinity given for a number is said to
    be so, with the bounds the key holds to ("nan must be finite and > 0")."""
    if kind in ("int", "float") and isinstance(v, float) and not math.isfinite(v):
        rule = _bounds_text(*bounds).removeprefix("must be ")
        return f"{v!r} must be finite" + (f" and {rule}" if rule else "")
    return f"expected {_KIND_NAMES[kind]}, got {_tname(v)} {v!r}"


def _tname(v: Any) -> str:
    return {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        list: "list",
        dict: "table",
    }.get(type(v), type(v).__name__)


def _coerce(v: Any, kind: str) -> tuple[bool, Any]:
    if kind == "str":
        return isinstance(v, str), v
    if kind == "bool":
        return isinstance(v, bool), v
    if isinstance(v, bool):
        return False, v
    if kind == "int":
        if isinstance(v, int):
            return True, v
        # 8.192e5 is a float in TOML; accept it when it is integral
        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            return True, int(v)
        return False, v
    if kind == "float":
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            return True, float(v)
        return False, v
    raise AssertionError(kind)


def _in_bounds(
    v: Any, low: float | None, low_open: bool, high: float | None, high_open: bool
) -> bool:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return True
    if low is not None and (v <= low if low_open else v < low):
        return False
    return not (high is not None and (v >= high if high_open else v > high))


def _bounds_text(low: float | None, low_open: bool, high: float | None, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return "must be " + " and ".join(parts)


def _read_sweep(r: _Reader, d: dict[str, Any]) -> SweepSection:
    p = "sweep"
    r.keys(d, p, SECTION_KEYS[p])
    name = r.get(d, "name", p, "str", required=True)
    if name is not None and (why := name_problem(name)):
        r.bad(f"{p}.name", f"{name!r} {why}")
        name = None
    section = SweepSection(
        name=name or "",
        trials_per_cell=r.get(d, "trials_per_cell", p, "int", None, low=1),
        seeds_per_point=r.get(d, "seeds_per_point", p, "int", 1, low=1),
        first_seed=r.get(d, "first_seed", p, "int", 0, low=0),
        storage=r.get(d, "storage", p, "str", None),
        data=r.get(d, "data", p, "str", "builtin"),
        description=r.get(d, "description", p, "str", ""),
    )
    return section


_REF_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][\w.]*$")


def _ref(r: _Reader, d: dict[str, Any], key: str, path: str) -> str | None:
    """A ``"package.module:function"`` reference (checked for form only: importing is
    :func:`~sweeper.study.spec.check_code`'s job). A malformed one is reported and kept, so that
    the rules of the keys beside it see it given ("model.args: only used with model.builder"
    followed a misspelt builder)."""
    v = r.get(d, key, path, "str", None)
    if v is not None and not _REF_RE.match(v):
        r.bad(f"{path}.{key}", f"{v!r} must look like 'package.module:function'")
    return v


def _args(r: _Reader, d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``[model.args]``: scalars and lists of scalars, as sorted (key, value) pairs."""
    raw = d.get("args", {})
    if not isinstance(raw, dict):
        r.bad("model.args", f"expected a table, got {_tname(raw)}")
        return ()
    out = []
    for k, v in raw.items():
        scalar = (str, int, float, bool)
        if isinstance(v, list) and all(isinstance(x, scalar) for x in v):
            v = tuple(v)
        elif not isinstance(v, scalar):
            r.bad(f"model.args.{k}", f"expected a string, number, boolean or list, got {_tname(v)}")
            continue
        out.append((k, v))
    return tuple(sorted(out))


def _read_model(r: _Reader, d: dict[str, Any]) -> ModelSpec:
    p = "model"
    r.keys(d, p, SECTION_KEYS[p])
    m = ModelSpec()
    return ModelSpec(
        builder=_ref(r, d, "builder", p),
        args=_args(r, d),
        param_roles=_ref(r, d, "param_roles", p),
        parametrization=r.get(
            d, "parametrization", p, "str", m.parametrization, choices=PARAMETRIZATIONS
        ),
        norm=r.get(d, "norm", p, "str", m.norm, choices=NORMS),
        qk_norm=r.get(d, "qk_norm", p, "bool", m.qk_norm),
        tied_embeddings=r.get(d, "tied_embeddings", p, "bool", m.tied_embeddings),
        context=r.get(d, "context", p, "int", m.context, low=1),
        vocab_size=r.get(d, "vocab_size", p, "int", m.vocab_size, low=2),
        head_dim=r.get(d, "head_dim", p, "int", m.head_dim, low=1),
        heads=r.get(d, "heads", p, "int", None, low=1),
        init_std=r.get(d, "init_std", p, "float", m.init_std, low=0, low_open=True),
        output_mult=r.get(d, "output_mult", p, "float", m.output_mult, low=0, low_open=True),
        base_width=r.get(d, "base_width", p, "int", m.base_width, low=1),
        base_depth=r.get(d, "base_depth", p, "int", m.base_depth, low=1),
    )


def _read_ladder(r: _Reader, d: dict[str, Any]) -> LadderSpec:
    p = "ladder"
    r.keys(d, p, SECTION_KEYS[p])
    cells: list[CellSpec] = []
    raw_cells = d.get("cells", [])
    if not isinstance(raw_cells, list):
        r.bad(f"{p}.cells", f"expected a list of tables, got {_tname(raw_cells)}")
        raw_cells = []
    for i, c in enumerate(raw_cells):
        cp = f"{p}.cells[{i}]"
        if not isinstance(c, dict):
            r.bad(cp, f"expected a table, got {_tname(c)}")
            continue
        r.keys(c, cp, ("width", "depth", "tokens", "tokens_per_param"))
        w = r.get(c, "width", cp, "int", None, required=True, low=1)
        dep = r.get(c, "depth", cp, "int", None, required=True, low=1)
        t = r.get(c, "tokens", cp, "int", None, low=1)
        tpp = r.get(c, "tokens_per_param", cp, "float", None, low=0, low_open=True)
        if ("tokens" in c) == ("tokens_per_param" in c):
            r.bad(cp, "give exactly one of tokens or tokens_per_param")
        if w is not None and dep is not None and (t is not None or tpp is not None):
            cells.append(CellSpec(width=w, depth=dep, tokens=t, tokens_per_param=tpp))
    return LadderSpec(
        widths=r.list_of(d, "widths", p, "int", low=1),
        depths=r.list_of(d, "depths", p, "int", low=1),
        tokens=r.list_of(d, "tokens", p, "int", low=1),
        tokens_per_param=r.list_of(d, "tokens_per_param", p, "float", low=0, low_open=True),
        cells=tuple(cells),
    )


_PARAM_BOUNDS: Final[dict[str, tuple[float, bool, float | None, bool]]] = {
    # name: (low, low_open, high, high_open)
    "lr": (0.0, True, None, False),
    "batch_size": (1, False, None, False),
    "warmup": (0.0, False, None, False),
    "weight_decay": (0.0, False, None, False),
    "beta2": (0.0, True, 1.0, True),
}


def _read_schedules(r: _Reader, d: dict[str, Any]) -> ParamSpec | None:
    """``search.schedule``: a schedule name or ``{ values = [names] }`` (a categorical)."""
    where, v = "search.schedule", d["schedule"]
    if isinstance(v, dict):
        r.keys(v, where, ("values",))
        v = v.get("values", [])
    names = v if isinstance(v, list) else [v]
    if not names or not all(isinstance(x, str) for x in names):
        r.bad(where, "expected a schedule name or { values = [names] }")
        return None
    bad = [x for x in names if x not in SCHEDULES]
    if bad:
        r.bad(where, f"unknown schedule(s) {bad} (expected: {', '.join(SCHEDULES)})")
        return None
    if len(set(names)) != len(names):
        r.bad(where, "duplicate values")
        return None
    return ParamSpec(values=tuple(names))


_LOG_DEFAULT: Final = {"lr": True, "batch_size": True}


def _read_param(r: _Reader, d: dict[str, Any], name: str) -> ParamSpec | None:
    where = f"search.{name}"
    integer = name == "batch_size"
    kind = "int" if integer else "float"
    lo_b, lo_open, hi_b, hi_open = _PARAM_BOUNDS[name]
    v = d[name]
    if not isinstance(v, dict):
        ok, x = _coerce(v, kind)
        if not ok and isinstance(v, float) and not math.isfinite(v):
            # ("expected a number or a table, got number inf": the other keys' wording)
            r.bad(where, _not_a(kind, v, (lo_b, lo_open, hi_b, hi_open)))
            return None
        if not ok:
            listed = isinstance(v, list)
            hint = f" (a list of values: {name} = {{ values = [...] }})" if listed else ""
            r.bad(where, f"expected {_KIND_NAMES[kind]} or a table, got {_tname(v)} {v!r}{hint}")
            return None
        if not _in_bounds(x, lo_b, lo_open, hi_b, hi_open):
            r.bad(where, f"{x!r} {_bounds_text(lo_b, lo_open, hi_b, hi_open)}")
            return None
        return ParamSpec.fixed(x, integer=integer)
    n_before = len(r.problems)
    r.keys(v, where, ("low", "high", "log", "values"))
    if "values" in v:
        if {"low", "high", "log"} & set(v):
            r.bad(where, "give either values or low/high, not both")
            return None
        vals = r.list_of(v, "values", where, kind, low=lo_b, low_open=lo_open)
        for x in vals:
            if not _in_bounds(x, lo_b, lo_open, hi_b, hi_open):
                r.bad(f"{where}.values", f"{x!r} {_bounds_text(lo_b, lo_open, hi_b, hi_open)}")
        if len(r.problems) > n_before or not vals:
            return None
        return ParamSpec(values=tuple(sorted(vals)), integer=integer)
    low = r.get(v, "low", where, kind, None, required=True)
    high = r.get(v, "high", where, kind, None, required=True)
    log = r.get(v, "log", where, "bool", _LOG_DEFAULT.get(name, False))
    for key, x in (("low", low), ("high", high)):
        if x is not None and not _in_bounds(x, lo_b, lo_open, hi_b, hi_open):
            r.bad(f"{where}.{key}", f"{x!r} {_bounds_text(lo_b, lo_open, hi_b, hi_open)}")
    if len(r.problems) > n_before:
        return None
    if low is not None and high is not None and low >= high:
        r.bad(where, f"inverted range: low {low!r} must be < high {high!r}")
    elif log and low is not None and low <= 0:
        r.bad(where, f"a log range needs low > 0, got low {low!r}")
    if len(r.problems) > n_before:
        return None
    return ParamSpec(low=low, high=high, log=log, integer=integer)


def _read_search(r: _Reader, d: dict[str, Any]) -> SearchSpace | None:
    r.keys(d, "search", SECTION_KEYS["search"])
    params: dict[str, ParamSpec | None] = {}
    for name in SEARCHABLE:
        if name in d:
            params[name] = _read_schedules(r, d) if name == "schedule" else _read_param(r, d, name)
    if "lr" not in d:
        r.bad("search.lr", "missing")
        return None
    lr = params.pop("lr")
    if lr is None:
        return None
    batch = params.pop("batch_size", None) or ParamSpec.fixed(32, integer=True)
    return SearchSpace(lr=lr, batch_size=batch, **params)


def _read_train(r: _Reader, d: dict[str, Any]) -> TrainSpec:
    p = "train"
    r.keys(d, p, SECTION_KEYS[p])
    t = TrainSpec()
    return TrainSpec(
        schedule=r.get(d, "schedule", p, "str", t.schedule, choices=SCHEDULES),
        min_lr_ratio=r.get(d, "min_lr_ratio", p, "float", t.min_lr_ratio, low=0, high=1),
        decay_fraction=r.get(d, "decay_fraction", p, "float", t.decay_fraction, low=0, high=1),
        beta1=r.get(d, "beta1", p, "float", t.beta1, low=0, high=1, high_open=True),
        eps=r.get(d, "eps", p, "float", t.eps, low=0, low_open=True),
        grad_clip=r.get(d, "grad_clip", p, "float", t.grad_clip, low=0),
        z_loss=r.get(d, "z_loss", p, "float", t.z_loss, low=0),
        micro_batch_size=r.get(d, "micro_batch_size", p, "int", None, low=1),
        eval_batches=r.get(d, "eval_batches", p, "int", t.eval_batches, low=1),
        function=_ref(r, d, "function", p),
        optimizer=r.get(d, "optimizer", p, "str", t.optimizer, choices=OPTIMIZERS),
        weight_decay_tau=r.get(d, "weight_decay_tau", p, "float", None, low=0, low_open=True),
    )


def _read_sampler(r: _Reader, d: dict[str, Any], *, lost: bool = False) -> SamplerSpec:
    """``[sampler]``; ``lost``: the section was misspelt or not a table (its kind is unknown)."""
    p = "sampler"
    r.keys(d, p, SECTION_KEYS[p])
    n_before = len(r.problems)
    kind = r.get(d, "kind", p, "str", "tpe")
    if len(r.problems) > n_before:
        kind = UNKNOWN_KIND
    elif kind not in SAMPLERS:
        r.bad(
            f"{p}.kind",
            f"unknown value {kind!r} (expected one of: {', '.join(OPTUNA_SAMPLERS)}) "
            "or 'law' (the law-aware planner)",
        )
        kind = UNKNOWN_KIND
    elif lost or ("kind" not in d and any(_misspelt_kind(k, v) for k, v in d.items())):
        kind = UNKNOWN_KIND
    if kind not in (UNKNOWN_KIND, "law"):
        for key in ("budget_runs", "stop_lr_interval_ratio"):
            if key in d:
                r.bad(f"{p}.{key}", f"only used with kind = 'law' (kind is {kind!r})")
    x = SamplerSpec()
    return SamplerSpec(
        kind=kind,
        seed=r.get(d, "seed", p, "int", 0, low=0),
        n_startup_trials=r.get(d, "n_startup_trials", p, "int", None, low=0),
        max_pending_per_cell=r.get(d, "max_pending_per_cell", p, "int", None, low=1),
        budget_runs=r.get(d, "budget_runs", p, "int", None, low=1),
        stop_lr_interval_ratio=r.get(
            d, "stop_lr_interval_ratio", p, "float", x.stop_lr_interval_ratio, low=1, low_open=True
        ),
    )


def _read_target(r: _Reader, d: dict[str, Any]) -> TargetSpec:
    p = "target"
    r.keys(d, p, SECTION_KEYS[p])
    return TargetSpec(
        params=r.get(d, "params", p, "float", None, low=0, low_open=True),
        tokens=r.get(d, "tokens", p, "float", None, low=0, low_open=True),
    )


def _read_pruner(r: _Reader, d: dict[str, Any]) -> PrunerSpec:
    p = "pruner"
    r.keys(d, p, SECTION_KEYS[p])
    n_before = len(r.problems)
    kind = r.get(d, "kind", p, "str", "divergence", choices=PRUNERS)
    if len(r.problems) > n_before:
        kind = UNKNOWN_KIND  # (then whether the asha keys are used is not known)
    if kind not in (UNKNOWN_KIND, "asha"):
        for key in ("grace_fraction", "reduction_factor", "reports"):
            if key in d:
                r.bad(f"{p}.{key}", f"only used with kind = 'asha' (kind is {kind!r})")
    x = PrunerSpec()
    n_before = len(r.problems)
    out = PrunerSpec(
        kind=kind,
        grace_fraction=r.get(
            d, "grace_fraction", p, "float", x.grace_fraction, low=0, low_open=True, high=1
        ),
        reduction_factor=r.get(
            d, "reduction_factor", p, "float", x.reduction_factor, low=1, low_open=True
        ),
        reports=r.get(d, "reports", p, "int", x.reports, low=2),
    )
    if kind == "asha" and len(r.problems) == n_before:
        _check_asha_rungs(r, out, "grace_fraction" in d)
    return out


def _check_asha_rungs(r: _Reader, pr: PrunerSpec, grace_given: bool) -> None:
    """ASHA can stop a run only at a report before its end on or after the first rung
    (``grace_fraction`` of the steps). The last such report lands at (reports - 1) / reports of
    the steps (every ``steps // reports`` steps, never at the last step: exactly there when
    ``reports`` divides the steps, later otherwise), capped at 99%. The rule: the first rung at
    or before that point, so that every run of at least ``reports`` steps can be pruned."""
    from sweeper.run.trainable import PROGRESS_CAP  # (a run's reports before its final one)

    last = min(PROGRESS_CAP, 100.0 * (pr.reports - 1) / pr.reports)
    first = 100.0 * pr.grace_fraction
    if first <= last + 1e-9:
        return
    key = "pruner.grace_fraction" if grace_given else "pruner.reports"
    r.bad(
        key,
        f"ASHA could not prune: its first rung (grace_fraction {pr.grace_fraction:g}, "
        f"{first:g}% of the steps) lies past the last report before a run's end ({last:g}% "
        f"with reports = {pr.reports}); it must be at most {last / 100:g} here ((reports - 1) / "
        "reports, and never above 0.99)"
        + ("" if last >= PROGRESS_CAP else ", or raise reports"),
    )


def _read_resources(r: _Reader, d: dict[str, Any]) -> ResourcesSpec:
    p = "resources"
    r.keys(d, p, SECTION_KEYS[p])
    return ResourcesSpec(
        cpu=r.get(d, "cpu", p, "float", 1.0, low=0, low_open=True),
        gpu=r.get(d, "gpu", p, "float", 0.0, low=0),
        max_concurrent=r.get(d, "max_concurrent", p, "int", None, low=1),
        max_failures=r.get(d, "max_failures", p, "int", 2, low=0),
    )

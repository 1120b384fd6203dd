"""Study files: what one sweep measures, as small frozen dataclasses read from strict TOML.

A study names the sweep, its storage and data, the model family, the ladder of cells (widths ×
depths × token budgets, or explicit cells), the search space, the fixed training settings, the
sampler, the pruner and the resources per trial. :func:`load_study` / :func:`parse_study` check
everything and report every problem at once (one line each, naming the key) in a
:class:`~sweeper.errors.StudyError`; a :class:`StudySpec` can also be built in Python and checked with
:func:`check_spec`. :func:`study_toml` writes the resolved study (every default filled in) back as
TOML, and :func:`spec_hash` fingerprints what a sweep measures, so that a relaunch under the same name
with a different study is refused instead of silently mixed.

Units: token budgets in tokens, ``tokens_per_param`` in tokens per non-embedding parameter, batch
sizes in sequences of ``model.context`` tokens, ``warmup`` as a fraction of the steps (< 1) or a
number of steps (>= 1), CPU and GPU in Ray resource units (fractions allowed).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from sweeper.errors import StudyError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "PARAMETRIZATIONS",
    "PRUNERS",
    "SAMPLERS",
    "CellSpec",
    "LadderSpec",
    "ModelSpec",
    "ParamSpec",
    "PrunerSpec",
    "ResourcesSpec",
    "SamplerSpec",
    "SearchSpace",
    "StudySpec",
    "SweepSection",
    "TrainSpec",
    "check_spec",
    "load_study",
    "parse_study",
    "parse_study_toml",
    "spec_hash",
    "study_toml",
]

SAMPLERS: Final[tuple[str, ...]] = ("tpe", "gp", "grid", "random", "qmc")
PRUNERS: Final[tuple[str, ...]] = ("divergence", "asha", "none")
PARAMETRIZATIONS: Final[tuple[str, ...]] = ("sp", "mup", "completep")
NORMS: Final[tuple[str, ...]] = ("layernorm", "rmsnorm")
SCHEDULES: Final[tuple[str, ...]] = ("cosine", "wsd", "constant")
#: hyperparameters the search space may vary; lr and batch_size are always Optuna parameters
SEARCHABLE: Final[tuple[str, ...]] = ("lr", "batch_size", "warmup", "weight_decay", "beta2")
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


# ---- the spec ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepSection:
    """Identity and size of the sweep.

    ``trials_per_cell`` is the number of Optuna trials (search points) each cell gets; ``None`` is
    allowed only with the grid sampler (then the grid size). ``seeds_per_point`` training runs
    (seeds 0, 1, ...) are made per trial and the trial's value is their mean loss.
    """

    name: str
    trials_per_cell: int | None = None
    seeds_per_point: int = 1
    storage: str | None = None  # SQLAlchemy URL; else $SWEEPER_STORAGE, else sqlite:///sweeper.db
    data: str = "builtin"  # "builtin", a text file or folder, or a nanoGPT train.bin/val.bin folder
    description: str = ""


@dataclass(frozen=True)
class ModelSpec:
    """The model family every cell shares (see ``proxy_models.ProxyConfig``).

    Heads: ``heads`` fixes their number at every width; otherwise ``width // head_dim``.
    """

    parametrization: str = "sp"
    norm: str = "layernorm"
    qk_norm: bool = False
    tied_embeddings: bool = False
    context: int = 128  # tokens per sequence
    vocab_size: int = 256
    head_dim: int = 16
    heads: int | None = None
    init_std: float = 0.02
    output_mult: float = 1.0  # tunable factor on the logits (``ProxyConfig.output_mult``)
    base_width: int = 64
    base_depth: int = 2


@dataclass(frozen=True)
class CellSpec:
    """One explicit cell: a shape and its budget, as ``tokens`` or ``tokens_per_param``."""

    width: int
    depth: int
    tokens: int | None = None
    tokens_per_param: float | None = None


@dataclass(frozen=True)
class LadderSpec:
    """The cells: ``widths × depths × (tokens | tokens_per_param)``, or the explicit ``cells``."""

    widths: tuple[int, ...] = ()
    depths: tuple[int, ...] = ()
    tokens: tuple[int, ...] = ()
    tokens_per_param: tuple[float, ...] = ()
    cells: tuple[CellSpec, ...] = ()


@dataclass(frozen=True)
class ParamSpec:
    """One hyperparameter: a range (``low``, ``high``, ``log``) or a list of ``values``.

    A single value fixes it. ``integer`` marks an integer parameter (batch size).
    """

    low: float | None = None
    high: float | None = None
    log: bool = False
    values: tuple[float, ...] | None = None
    integer: bool = False

    @classmethod
    def range(
        cls, low: float, high: float, *, log: bool = True, integer: bool = False
    ) -> ParamSpec:
        return cls(low=low, high=high, log=log, integer=integer)

    @classmethod
    def grid(cls, values: list[float] | tuple[float, ...], *, integer: bool = False) -> ParamSpec:
        return cls(values=tuple(values), integer=integer)

    @classmethod
    def fixed(cls, value: float, *, integer: bool = False) -> ParamSpec:
        return cls(values=(value,), integer=integer)

    @property
    def is_range(self) -> bool:
        return self.values is None

    @property
    def is_fixed(self) -> bool:
        return self.values is not None and len(self.values) == 1


@dataclass(frozen=True)
class SearchSpace:
    """What the sampler varies. ``lr`` and ``batch_size`` (sequences) are always present; the
    optional ones, when ``None``, take the training defaults (``HParams``)."""

    lr: ParamSpec
    batch_size: ParamSpec = field(default_factory=lambda: ParamSpec.fixed(32, integer=True))
    warmup: ParamSpec | None = None
    weight_decay: ParamSpec | None = None
    beta2: ParamSpec | None = None

    def items(self) -> list[tuple[str, ParamSpec]]:
        """The parameters that are set, in :data:`SEARCHABLE` order."""
        out = []
        for name in SEARCHABLE:
            p = getattr(self, name)
            if p is not None:
                out.append((name, p))
        return out


@dataclass(frozen=True)
class TrainSpec:
    """Training settings every trial shares (``HParams`` fields that are not searched)."""

    schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    decay_fraction: float = 0.2
    beta1: float = 0.9
    eps: float = 1e-8
    grad_clip: float = 1.0
    z_loss: float = 0.0
    micro_batch_size: int | None = None
    eval_batches: int = 8


@dataclass(frozen=True)
class SamplerSpec:
    """The Optuna sampler of every cell's study.

    ``max_pending_per_cell`` caps the trials of one cell running at once (``None``: the concurrency
    spread over the cells), so that TPE/GP see results before proposing more points.
    """

    kind: str = "tpe"
    seed: int = 0
    n_startup_trials: int | None = None  # tpe / gp; None = Optuna's default
    max_pending_per_cell: int | None = None


@dataclass(frozen=True)
class PrunerSpec:
    """How runs are stopped early.

    ``divergence`` (default): only runs that diverge stop early (the training loop's own check),
    and they are COMPLETE with their loss and ``diverged`` set. ``asha``: Ray's ASHA, one bracket per
    cell, on the validation loss every ``1/reports`` of the budget (stopped trials are PRUNED).
    It ranks LRs unfairly under decaying schedules, so it is opt-in. ``none``: no pruning either way
    (the training loop still ends a run whose loss is NaN, there being nothing left to train).
    """

    kind: str = "divergence"
    grace_fraction: float = 0.25  # asha: no stop before this fraction of the budget
    reduction_factor: float = 3.0  # asha
    reports: int = 20  # asha: validation reports per run


@dataclass(frozen=True)
class ResourcesSpec:
    """Ray resources per trial and the concurrency limit.

    ``max_concurrent=None``: as many trials as the resources allow. ``max_failures``: Ray retries a
    crashed run this many times before the trial is FAIL.
    """

    cpu: float = 1.0
    gpu: float = 0.0
    max_concurrent: int | None = None
    max_failures: int = 2


@dataclass(frozen=True)
class StudySpec:
    """A whole study. ``source`` is the file it came from (for messages), not part of the study."""

    sweep: SweepSection
    ladder: LadderSpec
    search: SearchSpace
    model: ModelSpec = field(default_factory=ModelSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    pruner: PrunerSpec = field(default_factory=PrunerSpec)
    resources: ResourcesSpec = field(default_factory=ResourcesSpec)
    source: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.sweep.name

    @property
    def trials_per_cell(self) -> int:
        """The target number of finished trials per cell (the grid size for a grid without one)."""
        if self.sweep.trials_per_cell is not None:
            return self.sweep.trials_per_cell
        return grid_size(self.search)

    def with_name(self, name: str) -> StudySpec:
        return replace(self, sweep=replace(self.sweep, name=name))


def grid_size(search: SearchSpace) -> int:
    """Number of points of a search space made only of value lists (0 if it has a range)."""
    n = 1
    for _, p in search.items():
        if p.values is None:
            return 0
        n *= len(p.values)
    return n


# ---- reading TOML ------------------------------------------------------------------------------
def load_study(path: str | os.PathLike[str]) -> StudySpec:
    """Read and check a study file; raises StudyError listing every problem."""
    path_s = os.fspath(path)
    try:
        with open(path_s, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise StudyError("no such study file", path=path_s) from None
    except OSError as e:
        raise StudyError(f"cannot read the study file: {e.strerror}", path=path_s) from None
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"invalid TOML: {e}", path=path_s) from None
    return parse_study(raw, source=path_s)


def parse_study_toml(text: str, *, source: str | None = None) -> StudySpec:
    """:func:`parse_study` on TOML text (a stored resolved study, for instance)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"invalid TOML: {e}", path=source) from None
    return parse_study(raw, source=source)


def parse_study(raw: Mapping[str, Any], *, source: str | None = None) -> StudySpec:
    """Build a StudySpec from a TOML-like dict; raises StudyError listing every problem at once."""
    r = _Reader()
    r.keys(raw, "", _SECTIONS)
    sweep_d, ladder_d, search_d = (r.table(raw, s, required=True) for s in _REQUIRED)
    sweep = _read_sweep(r, sweep_d if sweep_d is not None else {"name": ""})
    model = _read_model(r, r.table(raw, "model") or {})
    ladder = _read_ladder(r, ladder_d or {})
    search = _read_search(r, search_d) if search_d is not None else None
    train = _read_train(r, r.table(raw, "train") or {})
    sampler = _read_sampler(r, r.table(raw, "sampler") or {})
    pruner = _read_pruner(r, r.table(raw, "pruner") or {})
    resources = _read_resources(r, r.table(raw, "resources") or {})
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
        source=source,
    )
    problems = r.problems + [p for p in check_spec(spec) if not _covered(p, r.problems)]
    if problems:
        raise StudyError(problems, path=source)
    return spec


def _key_of(problem: str) -> str:
    return problem.split(":", 1)[0].strip("[]")


def _covered(problem: str, earlier: list[str]) -> bool:
    """A cross-field problem about a key already reported (e.g. ``missing`` after a wrong type)."""
    key = _key_of(problem)
    for e in earlier:
        k = _key_of(e)
        if key == k or key.startswith(k + ".") or (k in _REQUIRED and key.startswith(k)):
            return True
    return False


_REQUIRED: Final = ("sweep", "ladder", "search")
_SECTIONS: Final = ("sweep", "model", "ladder", "search", "train", "sampler", "pruner", "resources")


class _Reader:
    """Typed access to a TOML dict that records a one-line problem per bad key instead of raising."""

    _MISSING: Final = object()

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, key: str, msg: str) -> None:
        self.problems.append(f"{key}: {msg}")

    def keys(self, d: Mapping[str, Any], prefix: str, allowed: tuple[str, ...]) -> None:
        for k in d:
            if k not in allowed:
                where = f"{prefix}.{k}" if prefix else k
                self.bad(where, f"unknown key (expected one of: {', '.join(allowed)})")

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
            self.bad(where, f"expected {_KIND_NAMES[kind]}, got {_tname(d[key])} {d[key]!r}")
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
                self.bad(where, f"expected a list of {_KIND_NAMES[kind]}s, got {_tname(v)}")
                return ()
        if not v:
            self.bad(where, "empty list")
            return ()
        out = []
        for i, item in enumerate(v):
            ok, x = _coerce(item, kind)
            if not ok:
                self.bad(
                    f"{where}[{i}]", f"expected {_KIND_NAMES[kind]}, got {_tname(item)} {item!r}"
                )
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
    r.keys(d, p, ("name", "description", "storage", "data", "trials_per_cell", "seeds_per_point"))
    name = r.get(d, "name", p, "str", required=True)
    if name is not None and not _NAME_RE.match(name):
        r.bad(f"{p}.name", f"{name!r} must be letters, digits, '_', '-' or '.' (no '/')")
        name = None
    section = SweepSection(
        name=name or "",
        trials_per_cell=r.get(d, "trials_per_cell", p, "int", None, low=1),
        seeds_per_point=r.get(d, "seeds_per_point", p, "int", 1, low=1),
        storage=r.get(d, "storage", p, "str", None),
        data=r.get(d, "data", p, "str", "builtin"),
        description=r.get(d, "description", p, "str", ""),
    )
    return section


def _read_model(r: _Reader, d: dict[str, Any]) -> ModelSpec:
    p = "model"
    r.keys(d, p, tuple(f.name for f in fields(ModelSpec)))
    m = ModelSpec()
    return ModelSpec(
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
    r.keys(d, p, ("widths", "depths", "tokens", "tokens_per_param", "cells"))
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
_LOG_DEFAULT: Final = {"lr": True, "batch_size": True}


def _read_param(r: _Reader, d: dict[str, Any], name: str) -> ParamSpec | None:
    where = f"search.{name}"
    integer = name == "batch_size"
    kind = "int" if integer else "float"
    lo_b, lo_open, hi_b, hi_open = _PARAM_BOUNDS[name]
    v = d[name]
    if not isinstance(v, dict):
        ok, x = _coerce(v, kind)
        if not ok:
            r.bad(where, f"expected {_KIND_NAMES[kind]} or a table, got {_tname(v)} {v!r}")
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
        vals = r.list_of(v, "values", where, kind)
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
    r.keys(d, "search", SEARCHABLE)
    params: dict[str, ParamSpec | None] = {}
    for name in SEARCHABLE:
        if name in d:
            params[name] = _read_param(r, d, name)
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
    r.keys(d, p, tuple(f.name for f in fields(TrainSpec)))
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
    )


def _read_sampler(r: _Reader, d: dict[str, Any]) -> SamplerSpec:
    p = "sampler"
    r.keys(d, p, tuple(f.name for f in fields(SamplerSpec)))
    return SamplerSpec(
        kind=r.get(d, "kind", p, "str", "tpe", choices=SAMPLERS),
        seed=r.get(d, "seed", p, "int", 0, low=0),
        n_startup_trials=r.get(d, "n_startup_trials", p, "int", None, low=0),
        max_pending_per_cell=r.get(d, "max_pending_per_cell", p, "int", None, low=1),
    )


def _read_pruner(r: _Reader, d: dict[str, Any]) -> PrunerSpec:
    p = "pruner"
    r.keys(d, p, tuple(f.name for f in fields(PrunerSpec)))
    kind = r.get(d, "kind", p, "str", "divergence", choices=PRUNERS)
    if kind != "asha":
        for key in ("grace_fraction", "reduction_factor", "reports"):
            if key in d:
                r.bad(f"{p}.{key}", f"only used with kind = 'asha' (kind is {kind!r})")
    x = PrunerSpec()
    return PrunerSpec(
        kind=kind,
        grace_fraction=r.get(
            d, "grace_fraction", p, "float", x.grace_fraction, low=0, low_open=True, high=1
        ),
        reduction_factor=r.get(
            d, "reduction_factor", p, "float", x.reduction_factor, low=1, low_open=True
        ),
        reports=r.get(d, "reports", p, "int", x.reports, low=2),
    )


def _read_resources(r: _Reader, d: dict[str, Any]) -> ResourcesSpec:
    p = "resources"
    r.keys(d, p, tuple(f.name for f in fields(ResourcesSpec)))
    return ResourcesSpec(
        cpu=r.get(d, "cpu", p, "float", 1.0, low=0, low_open=True),
        gpu=r.get(d, "gpu", p, "float", 0.0, low=0),
        max_concurrent=r.get(d, "max_concurrent", p, "int", None, low=1),
        max_failures=r.get(d, "max_failures", p, "int", 2, low=0),
    )


# ---- cross-field checks ------------------------------------------------------------------------
def check_spec(spec: StudySpec) -> list[str]:
    """Every problem of a spec that needs more than one field, one line each (empty: valid).

    :func:`parse_study` runs it; call it on a spec built in Python before launching it.
    """
    out: list[str] = []
    m, lad, s = spec.model, spec.ladder, spec.search
    if not spec.sweep.name or not _NAME_RE.match(spec.sweep.name):
        out.append(f"sweep.name: {spec.sweep.name!r} must be letters, digits, '_', '-' or '.'")
    divisor, what = (m.heads, "heads") if m.heads is not None else (m.head_dim, "head_dim")
    if m.parametrization != "sp" and m.base_width % divisor:
        out.append(f"model.base_width: {m.base_width} is not divisible by {what} {divisor}")
    # ladder
    grid = bool(lad.widths or lad.depths or lad.tokens or lad.tokens_per_param)
    if grid and lad.cells:
        out.append("ladder: give widths/depths/tokens or cells, not both")
    elif lad.cells:
        widths = tuple(c.width for c in lad.cells)
        seen: set[tuple[int, int, int | None, float | None]] = set()
        for i, c in enumerate(lad.cells):
            key = (c.width, c.depth, c.tokens, c.tokens_per_param)
            if key in seen:
                out.append(f"ladder.cells[{i}]: duplicate cell")
            seen.add(key)
            if (c.tokens is None) == (c.tokens_per_param is None):
                out.append(f"ladder.cells[{i}]: give exactly one of tokens or tokens_per_param")
    elif grid:
        widths = lad.widths
        if not lad.widths:
            out.append("ladder.widths: missing")
        if not lad.depths:
            out.append("ladder.depths: missing")
        if bool(lad.tokens) == bool(lad.tokens_per_param):
            out.append("ladder: give exactly one of tokens or tokens_per_param")
    else:
        widths = ()
        out.append(
            "ladder: no cells (give widths, depths and tokens or tokens_per_param, or cells)"
        )
    for w in dict.fromkeys(widths):
        if w % divisor:
            out.append(f"ladder.widths: {w} is not divisible by {what} {divisor}")
    # search
    for name, p in s.items():
        out.extend(_check_param(name, p))
    micro = spec.train.micro_batch_size
    if micro is not None:
        if s.batch_size.values is None:
            out.append("train.micro_batch_size: cannot be fixed when search.batch_size is a range")
        else:
            for b in s.batch_size.values:
                if int(b) % micro:
                    out.append(f"train.micro_batch_size: {micro} does not divide batch size {b:g}")
    # sampler / trials
    tpc = spec.sweep.trials_per_cell
    if spec.sampler.kind == "grid":
        ranges = [n for n, p in s.items() if p.values is None]
        if ranges:
            out.append(
                "sampler.kind: grid needs a list of values for every searched parameter, "
                f"not a range: {', '.join('search.' + n for n in ranges)}"
            )
        elif tpc is not None and tpc > grid_size(s):
            out.append(
                f"sweep.trials_per_cell: {tpc} exceeds the {grid_size(s)} points of the grid"
            )
    elif tpc is None:
        out.append("sweep.trials_per_cell: missing (required unless sampler.kind = 'grid')")
    if spec.sampler.n_startup_trials is not None and spec.sampler.kind not in ("tpe", "gp"):
        out.append(f"sampler.n_startup_trials: only used by tpe and gp, not {spec.sampler.kind!r}")
    if spec.sampler.kind not in SAMPLERS:
        out.append(f"sampler.kind: unknown sampler {spec.sampler.kind!r}")
    if spec.pruner.kind not in PRUNERS:
        out.append(f"pruner.kind: unknown pruner {spec.pruner.kind!r}")
    return out


def _check_param(name: str, p: ParamSpec) -> list[str]:
    where = f"search.{name}"
    if p.values is not None:
        if not p.values:
            return [f"{where}.values: empty list"]
        return []
    if p.low is None or p.high is None:
        return [f"{where}: a range needs low and high"]
    out = []
    if p.low >= p.high:
        out.append(f"{where}: inverted range: low {p.low!r} must be < high {p.high!r}")
    if p.log and p.low <= 0:
        out.append(f"{where}: a log range needs low > 0, got low {p.low!r}")
    return out


# ---- writing TOML ------------------------------------------------------------------------------
def study_toml(spec: StudySpec, *, operational: bool = True) -> str:
    """The resolved study as TOML (every default filled in); ``parse_study`` reads it back equal.

    ``operational=False`` leaves out what does not change what one trial measures: storage,
    resources, description, the target count ``trials_per_cell`` and the sampler's pacing knobs
    ``n_startup_trials`` and ``max_pending_per_cell`` (the sampler kind and seed stay), and
    ``model.output_mult`` at its default 1.0 (so sweeps launched before that knob keep their hash).
    That text is what :func:`spec_hash` fingerprints.
    """
    lines: list[str] = []

    def section(name: str, items: list[tuple[str, Any]]) -> None:
        lines.append(f"[{name}]")
        for k, v in items:
            if v is not None:
                lines.append(f"{k} = {_toml_value(v)}")
        lines.append("")

    sw = spec.sweep
    sweep_items: list[tuple[str, Any]] = [("name", sw.name)]
    if operational:
        sweep_items += [("description", sw.description or None), ("storage", sw.storage)]
    sweep_items.append(("data", sw.data))
    if operational:
        sweep_items.append(("trials_per_cell", spec.trials_per_cell))
    sweep_items.append(("seeds_per_point", sw.seeds_per_point))
    section("sweep", sweep_items)
    model_items = [(f.name, getattr(spec.model, f.name)) for f in fields(ModelSpec)]
    if not operational and spec.model.output_mult == ModelSpec.output_mult:
        model_items = [(k, v) for k, v in model_items if k != "output_mult"]
    section("model", model_items)
    lad = spec.ladder
    if lad.cells:
        section("ladder", [])
        lines.pop()  # cells follow as an array of tables
        for c in lad.cells:
            lines.append("[[ladder.cells]]")
            for f in fields(CellSpec):
                v = getattr(c, f.name)
                if v is not None:
                    lines.append(f"{f.name} = {_toml_value(v)}")
            lines.append("")
    else:
        section(
            "ladder",
            [
                ("widths", list(lad.widths)),
                ("depths", list(lad.depths)),
                ("tokens", list(lad.tokens) or None),
                ("tokens_per_param", list(lad.tokens_per_param) or None),
            ],
        )
    section("search", [(n, _param_toml(p)) for n, p in spec.search.items()])
    section("train", [(f.name, getattr(spec.train, f.name)) for f in fields(TrainSpec)])
    sampler_keys = [f.name for f in fields(SamplerSpec)]
    if not operational:
        sampler_keys = [k for k in sampler_keys if k not in _SAMPLER_PACING]
    section("sampler", [(k, getattr(spec.sampler, k)) for k in sampler_keys])
    pr = spec.pruner
    pruner_items: list[tuple[str, Any]] = [("kind", pr.kind)]
    if pr.kind == "asha":
        pruner_items += [
            ("grace_fraction", pr.grace_fraction),
            ("reduction_factor", pr.reduction_factor),
            ("reports", pr.reports),
        ]
    section("pruner", pruner_items)
    if operational:
        section(
            "resources", [(f.name, getattr(spec.resources, f.name)) for f in fields(ResourcesSpec)]
        )
    return "\n".join(lines).rstrip() + "\n"


# sampler settings that change how fast a sweep explores, not what a trial measures
_SAMPLER_PACING = ("n_startup_trials", "max_pending_per_cell")


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

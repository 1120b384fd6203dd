"""Study files: what one sweep measures, as small frozen dataclasses read from strict TOML.

A study names the sweep, its storage and data, the model family, the ladder of cells (widths ×
depths × token budgets, or explicit cells), the search space, the fixed training settings, the
sampler, the pruner and the resources per trial. :func:`load_study` / :func:`parse_study` check
everything and report every problem at once (one line each, naming the key) in a
:class:`~sweeper.errors.StudyError`; a :class:`StudySpec` can also be built in Python and checked with
:func:`check_spec`. :func:`study_toml` writes the resolved study (every default filled in) back as
TOML, and :func:`~sweeper.study.study_toml.spec_hash` fingerprints what a sweep measures, so that a relaunch under the same name
with a different study is refused instead of silently mixed. A study file (:func:`load_study`,
what ``validate`` and ``launch`` read) is also held to the rules of a study about to be run
(:func:`check_run`: the LR or the batch searched, budgets of at least one step) that a stored
study read back is not, and a warning says when its data is not here (``launch`` refuses it).

Units: token budgets in tokens, ``tokens_per_param`` in tokens per non-embedding parameter, batch
sizes in sequences of ``model.context`` tokens, ``warmup`` as a fraction of the steps (< 1) or a
number of steps (>= 1), CPU and GPU in Ray resource units (fractions allowed).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from sweeper.errors import StudyError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

log = logging.getLogger(__name__)

__all__ = [
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
    "TargetSpec",
    "TrainSpec",
    "check_data",
    "check_max_concurrent",
    "check_run",
    "check_spec",
    "data_source",
    "load_study",
    "parse_study",
    "parse_study_toml",
    "spec_origin",
]

#: Optuna's samplers, one per cell's study
OPTUNA_SAMPLERS: Final[tuple[str, ...]] = ("tpe", "gp", "grid", "random", "qmc")
#: every sampler kind: Optuna's and the law-aware planner (:mod:`sweeper.fitting.allocation`)
SAMPLERS: Final[tuple[str, ...]] = (*OPTUNA_SAMPLERS, "law")
PRUNERS: Final[tuple[str, ...]] = ("divergence", "asha", "none")
#: hyperparameters the search space may vary; lr and batch_size are always Optuna parameters
SEARCHABLE: Final[tuple[str, ...]] = (
    "lr",
    "batch_size",
    "warmup",
    "weight_decay",
    "beta2",
    "schedule",
)
#: model keys only the built-in proxy understands (refused beside ``model.builder``)
PROXY_ONLY_KEYS: Final[tuple[str, ...]] = ("norm", "qk_norm", "tied_embeddings")
NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a sweep's name, after ``{name!r} ``; None when it can
    (:data:`NAME_RE`). A '/' parts a sweep from its cells (``<name>/<cell>``), a '+' joins sweeps
    (``fit A+B``): the hint says which rule a name broke ('_x' and 'a+b' had been told "(no
    '/')")."""
    if NAME_RE.match(name):
        return None
    chars = "letters, digits, '_', '-' or '.'"
    if not name:
        return f"must be {chars}, not empty"
    if "+" in name:
        return f"must be {chars}: '+' is reserved for joined sweeps (sweeper fit A+B)"
    if "/" in name:
        return f"must be {chars}: '/' parts a sweep's name from its cells' (<name>/<cell>)"
    if not re.match(r"[A-Za-z0-9]", name[0]):
        return f"must start with a letter or a digit (then {chars})"
    return f"must be {chars}"


# ---- the spec ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepSection:
    """Identity and size of the sweep.

    ``trials_per_cell`` is the number of Optuna trials (search points) each cell gets; ``None`` is
    allowed only with the grid sampler (then the grid size). ``seeds_per_point`` training runs
    (seeds ``first_seed``, ``first_seed + 1``, ...) are made per trial and the trial's value is
    their mean loss; a later ``first_seed`` gives an earlier sweep's points more seeds in a sweep
    of their own (what ``validate-transfer --seeds`` does when a check grows).
    """

    name: str
    trials_per_cell: int | None = None
    seeds_per_point: int = 1
    first_seed: int = 0
    storage: str | None = None  # SQLAlchemy URL, after --storage and $SWEEPER_STORAGE; else sqlite
    data: str = "builtin"  # "builtin", a text file or folder, or a nanoGPT train.bin/val.bin folder
    description: str = ""

    def __repr__(self) -> str:
        from sweeper.study.storage import masked_repr

        return masked_repr(self, "storage")


@dataclass(frozen=True)
class ModelSpec:
    """The model family every cell shares (see ``proxy_models.ProxyConfig``).

    Heads: ``heads`` fixes their number at every width; otherwise ``width // head_dim``.
    ``builder`` (``"package.module:function"``) replaces the built-in proxy by your model, called
    with the cell's shape and the keys of ``args`` (``[model.args]``); ``param_roles``
    (``"module:function"``) overrides the roles muP/CompleteP read (see ``proxy_models.builder``).
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
    builder: str | None = None
    args: tuple[tuple[str, Any], ...] = ()
    param_roles: str | None = None


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

    A single value fixes it. ``integer`` marks an integer parameter (batch size); ``schedule``'s
    values are names (a categorical).
    """

    low: float | None = None
    high: float | None = None
    log: bool = False
    values: tuple[Any, ...] | None = None
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
    schedule: ParamSpec | None = None  # a categorical of schedule names

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
    """Training settings every trial shares (``HParams`` fields that are not searched).

    ``function`` (``"package.module:function"``) replaces the built-in training loop by yours
    (see ``proxy_models.train_function``); ``optimizer`` is one of ``proxy_models.OPTIMIZERS``;
    ``weight_decay_tau`` gives the decay as the AdamW timescale τ = B/(η·λ·D) (a fraction of
    training) instead of a coefficient.
    """

    schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    decay_fraction: float = 0.2
    beta1: float = 0.9
    eps: float = 1e-8
    grad_clip: float = 1.0
    z_loss: float = 0.0
    micro_batch_size: int | None = None
    eval_batches: int = 8
    function: str | None = None
    optimizer: str = "adamw"
    weight_decay_tau: float | None = None


@dataclass(frozen=True)
class SamplerSpec:
    """The Optuna sampler of every cell's study.

    ``max_pending_per_cell`` caps the trials of one cell running at once (``None``: the concurrency
    spread over the cells), so that TPE/GP see results before proposing more points.

    ``kind = "law"`` (:mod:`sweeper.fitting.allocation`) plans the LR of every trial from the
    ladder's joint fit: ``budget_runs`` training runs in all (required; spent in whole points,
    :func:`law_max_runs`; at least :func:`law_start_runs`; the plan can use no more than
    :func:`law_cap_runs`), fewer when the 95% interval of the predicted target LR has
    upper/lower below ``stop_lr_interval_ratio``.
    """

    kind: str = "tpe"
    seed: int = 0
    n_startup_trials: int | None = None  # tpe / gp; None = Optuna's default
    max_pending_per_cell: int | None = None
    budget_runs: int | None = None  # law: training runs in all cells (seeds included)
    stop_lr_interval_ratio: float = 1.5  # law: stop when the target LR's interval is this narrow


@dataclass(frozen=True)
class TargetSpec:
    """The scale whose optimal LR the law sampler pins down (``[target]``, law only): ``params``
    (non-embedding N) and ``tokens``; a missing one defaults to 10x the largest cell's N and
    that cell's tokens (:func:`sweeper.fitting.allocation.default_target`)."""

    params: float | None = None
    tokens: float | None = None


@dataclass(frozen=True)
class PrunerSpec:
    """How runs are stopped early.

    ``divergence`` (default): only runs that diverge stop early (the training loop's own check),
    and they are COMPLETE with their loss and ``diverged`` set. ``asha``: ASHA's rule, one set of
    rungs per cell (:mod:`sweeper.run.asha`), on the validation loss every ``1/reports`` of the
    budget, the first seed of a point ranked (stopped trials are PRUNED).
    It ranks LRs unfairly under decaying schedules, so it is opt-in. ``none``: no pruner; the
    runs are the same as under ``divergence``, whose stop is the training loop's own check (the
    mean loss 1 nat above the initial one after the warmup, or NaN), which no pruner setting
    turns off: such a run has nothing left to learn.
    """

    kind: str = "divergence"
    grace_fraction: float = 0.25  # asha: no stop before this fraction of the budget
    reduction_factor: float = 3.0  # asha
    reports: int = 20  # asha: validation reports per run


@dataclass(frozen=True)
class ResourcesSpec:
    """Ray resources per trial and the concurrency limit.

    ``max_concurrent=None``: as many trials as the resources allow. ``max_failures``: Ray retries a
    crashed run (a worker lost; in a study's own code, only an error a retry can cure: out of
    memory, a connection, a timeout) this many times before the trial is FAIL.
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
    target: TargetSpec | None = None  # law sampler only
    source: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.sweep.name

    @property
    def trials_per_cell(self) -> int:
        """The target number of finished trials per cell (the grid size for a grid without one).

        The law sampler has no per-cell target: this is its cap (every trial of the budget in one
        cell, ``ceil(budget_runs / seeds_per_point)``); the plan says when the sweep is done."""
        if self.sweep.trials_per_cell is not None:
            return self.sweep.trials_per_cell
        if self.sampler.kind == "law":
            return max(1, -(-(self.sampler.budget_runs or 1) // self.sweep.seeds_per_point))
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
    except UnicodeDecodeError as e:  # (tomllib reads UTF-8 only)
        raise StudyError(
            f"not UTF-8 text (byte {e.start}): is it a study file?", path=path_s
        ) from None
    from sweeper.study.study_reader import read_study

    # a file about to be run is also held to check_run's rules (a stored study read back is not)
    spec, problems = read_study(raw, source=path_s, run=True)
    if not problems:
        problems = check_code(spec)
    if problems:
        raise StudyError(problems, path=path_s)
    # data that is not here is not an error of the file (a study is often checked away from the
    # machine that launches it), but launch refuses it (check_spec): say so
    for p in check_data(spec):
        log.warning("%s: %s; launch will refuse it", path_s, p)
    from sweeper.study.own_code import attention_warnings

    for p in [*whole_step_warnings(spec), *attention_warnings(spec)]:
        log.warning("%s: %s", path_s, p)
    from sweeper.study.storage import url_password

    if url_password(spec.sweep.storage):
        log.warning(
            "%s: sweep.storage carries a password, so anyone who reads the study file reads it "
            "(the copy stored with the sweep has it masked); leave it out of the URL and let the "
            "database client find it (PGPASSWORD, ~/.pgpass), or set $SWEEPER_STORAGE",
            path_s,
        )
    return spec


def spec_origin(spec: StudySpec) -> str | None:
    """Where a problem of ``spec`` is: its study file, or that file "as changed in Python" when
    the file no longer reads as ``spec`` (a problem the file does not have was blamed on it)."""
    if not spec.source:
        return None
    from sweeper.study.study_reader import read_study

    try:
        with open(spec.source, "rb") as f:
            read, problems = read_study(tomllib.load(f), source=spec.source)
        if not problems and read == spec:
            return spec.source
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return f"{spec.source} (as changed in Python)"


def parse_study_toml(text: str, *, source: str | None = None) -> StudySpec:
    """:func:`parse_study` on TOML text (a stored resolved study, for instance)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"invalid TOML: {e}", path=source) from None
    return parse_study(raw, source=source)


def parse_study(raw: Mapping[str, Any], *, source: str | None = None) -> StudySpec:
    """Build a StudySpec from a TOML-like dict; raises StudyError listing every problem at once."""
    from sweeper.study.study_reader import read_study

    spec, problems = read_study(raw, source=source)
    if problems:
        raise StudyError(problems, path=source)
    return spec


# ---- cross-field checks ------------------------------------------------------------------------
def check_spec(spec: StudySpec, *, code: bool = True) -> list[str]:
    """Every problem of a spec that needs more than one field, one line each (empty: valid).

    :func:`parse_study` runs it (without ``code``); call it on a spec built in Python before
    launching it. ``code``: the spec is about to be run here, so also hold it to
    :func:`check_run`'s rules, check that its data is here (:func:`check_data`), and import the
    study's own code and build its smallest cell (:func:`check_code`) when the spec has no other
    problem.
    """
    if code:  # (a spec built in Python: the cross-field rules, then a file's per-key rules)
        try:
            out = _check_fields(spec)
        except (TypeError, AttributeError, ValueError, ArithmeticError):  # (a wrong field: 0, "x")
            out = []
        # (both: the file's rules had been read only when the cross-field ones found nothing, so
        # a negative LR went unsaid beside a trials_per_cell above the grid; an API audit)
        out += [p for p in _file_rules(spec) if p not in out]
        if out:
            return out
    out = _check_fields(spec)
    if code:
        out += check_run(spec, known=out) + check_data(spec)
    if code and not out:
        out = check_code(spec)
    return out


def _file_rules(spec: StudySpec) -> list[str]:
    """The rules a study file's every key is read by (names, types, choices, ranges), for a spec
    built or changed in Python (:func:`dataclasses.replace`): its TOML read back. A spec read
    from a file passes again; one that cannot be written as a file says why."""
    from sweeper.study.study_reader import read_study
    from sweeper.study.study_toml import study_toml

    try:
        raw = tomllib.loads(study_toml(spec))
    except (TypeError, ValueError, AttributeError, KeyError, AssertionError,
            tomllib.TOMLDecodeError) as e:  # fmt: skip
        return [f"the study cannot be written as a study file: {type(e).__name__}: {e}"]
    return read_study(raw, source=spec.source)[1]


#: the longest sweep name a study may give: the storage's name columns hold 255 characters
#: (PostgreSQL refused a longer one with an internal error: an audit), and the transfer checks'
#: sweeps add ``.transfer.<cell>`` to it
MAX_SWEEP_NAME: Final[int] = 160


def _check_fields(spec: StudySpec) -> list[str]:
    out: list[str] = []
    m, lad, s = spec.model, spec.ladder, spec.search
    if why := name_problem(spec.sweep.name):
        out.append(f"sweep.name: {spec.sweep.name!r} {why}")
    elif len(spec.sweep.name) > MAX_SWEEP_NAME:
        out.append(
            f"sweep.name: {len(spec.sweep.name)} characters, more than the {MAX_SWEEP_NAME} a "
            "storage keeps with its cells' and transfer checks' suffixes"
        )
    divisor, what = (m.heads, "heads") if m.heads is not None else (m.head_dim, "head_dim")
    if m.parametrization != "sp" and m.base_width % divisor:
        out.append(f"model.base_width: {m.base_width} is not divisible by {what} {divisor}")
    # ladder
    grid = bool(lad.widths or lad.depths or lad.tokens or lad.tokens_per_param)
    if grid and lad.cells:
        widths: tuple[int, ...] = ()  # (left unset here, it was an internal error)
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
    # (an explicit cell's width is its own key: it had been named ladder.widths, not a key there)
    first: dict[int, str] = {}  # each width once, at its first key
    for i, w in enumerate(widths):
        first.setdefault(w, f"ladder.cells[{i}].width" if lad.cells else "ladder.widths")
    for w, where in first.items():
        if w % divisor:
            out.append(f"{where}: {w} is not divisible by {what} {divisor}")
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
    out.extend(_check_sampler(spec))
    if spec.pruner.kind not in PRUNERS:
        out.append(f"pruner.kind: unknown pruner {spec.pruner.kind!r}")
    out.extend(_check_own(spec))
    return out


def _check_sampler(spec: StudySpec) -> list[str]:
    """The rules that depend on the sampler's kind; an unknown kind is the one problem then
    (what it would require is not known)."""
    s = spec.search
    if spec.sampler.kind not in SAMPLERS:
        return [f"sampler.kind: unknown sampler {spec.sampler.kind!r}"]
    out: list[str] = []
    tpc = spec.sweep.trials_per_cell
    if spec.sampler.kind == "grid":
        ranges = [n for n, p in s.items() if p.values is None]
        if ranges:
            out.append(
                "sampler.kind: grid needs a list of values for every searched parameter, "
                f"not a range: {', '.join('search.' + n for n in ranges)}"
            )
        elif tpc is not None and tpc > grid_size(s):
            out.append(f"sweep.trials_per_cell: {tpc} exceeds the grid's {grid_size(s)} point(s)")
    elif spec.sampler.kind == "law":
        out.extend(_check_law(spec))
    elif tpc is None:
        out.append("sweep.trials_per_cell: missing (required unless sampler.kind = 'grid')")
    if spec.sampler.n_startup_trials is not None and spec.sampler.kind not in ("tpe", "gp"):
        out.append(f"sampler.n_startup_trials: only used by tpe and gp, not {spec.sampler.kind!r}")
    if spec.sampler.kind != "law":
        if spec.sampler.budget_runs is not None:
            out.append("sampler.budget_runs: only used with kind = 'law'")
        if spec.sampler.stop_lr_interval_ratio != SamplerSpec.stop_lr_interval_ratio:
            out.append("sampler.stop_lr_interval_ratio: only used with kind = 'law'")
    return out


#: candidate LRs the law sampler needs in a cell (its start tries 3:
#: :data:`sweeper.fitting.allocation.START_LRS`, not imported here: validate stays light)
LAW_MIN_LRS: Final = 3


def law_start_runs(spec: StudySpec) -> int:
    """The runs the law sampler's plan spends before it can fit: every cell started with
    :data:`LAW_MIN_LRS` LRs, each point ``seeds_per_point`` runs (the smallest budget allowed)."""
    return _n_cells(spec.ladder) * LAW_MIN_LRS * max(1, spec.sweep.seeds_per_point)


def law_max_runs(spec: StudySpec) -> int:
    """The most runs a law study's budget lets it train: ``budget_runs`` in whole points (a point
    runs every one of its ``seeds_per_point`` seeds, so one is planned only while all of them
    fit). The plan itself can use no more than :func:`law_cap_runs`."""
    seeds = max(1, spec.sweep.seeds_per_point)
    return (spec.sampler.budget_runs or 0) // seeds * seeds


#: runs the law sampler's plan puts at one (cell, LR) at most, with a point of one seed (the
#: planner's ``max_seeds``; a point of more seeds: :func:`law_max_seeds`)
LAW_RUNS_PER_LR: Final = 3


def law_max_seeds(seeds_per_point: int) -> int:
    """The planner's ``max_seeds`` of a law study: a point is planned at a (cell, LR) while fewer
    runs than this are there (:data:`LAW_RUNS_PER_LR`, or a point's seeds when more)."""
    return max(LAW_RUNS_PER_LR, seeds_per_point)


def law_lr_runs(spec: StudySpec) -> int:
    """The most runs one (cell, LR) of a law study gets: points of ``seeds_per_point`` runs are
    planned there while fewer than :func:`law_max_seeds` runs are (with 2 seeds: 4)."""
    seeds = max(1, spec.sweep.seeds_per_point)
    return -(-law_max_seeds(seeds) // seeds) * seeds


def law_cap_runs(spec: StudySpec) -> int:
    """The most runs a law study's plan can ever use, whatever its budget: every cell's every
    candidate LR (:func:`law_lrs`) at its most runs (:func:`law_lr_runs`); the plan then stops
    with no candidate left (sooner when LRs diverge: nothing is planned at or above a cell's
    divergence)."""
    return _n_cells(spec.ladder) * len(law_lrs(spec.search)) * law_lr_runs(spec)


def _n_cells(lad: LadderSpec) -> int:
    """The ladder's cells, counted without building them (no torch for a builder's)."""
    from sweeper.study.ladder import shapes

    return len(shapes(lad))


def law_lrs(search: SearchSpace) -> tuple[float, ...]:
    """The law sampler's candidate LRs: the list of values, or a range in sqrt(2) steps from
    ``low`` (:func:`sweeper.fitting.allocation.sqrt2_grid`, capped at ``high``)."""
    p = search.lr
    if p.values is not None:
        return tuple(sorted(float(v) for v in p.values))
    from sweeper.fitting.allocation import sqrt2_grid

    assert p.low is not None and p.high is not None
    return tuple(min(x, float(p.high)) for x in sqrt2_grid(float(p.low), float(p.high)))


def _check_law(spec: StudySpec) -> list[str]:
    """The law sampler's rules: a budget, a stopping ratio > 1, a positive target, the LR
    searched (at least 3 candidates) and everything else fixed."""
    out: list[str] = []
    s, sm = spec.search, spec.sampler
    if spec.sweep.trials_per_cell is not None:
        out.append(
            "sweep.trials_per_cell: not used with sampler.kind = 'law' (give sampler.budget_runs)"
        )
    if spec.sweep.first_seed:
        out.append(
            "sweep.first_seed: not used with sampler.kind = 'law' (its seeds are the plan's "
            "replicate indices)"
        )
    if sm.budget_runs is None:
        out.append("sampler.budget_runs: missing (required with kind = 'law')")
    elif sm.budget_runs < (need := law_start_runs(spec)):
        n, seeds = _n_cells(spec.ladder), spec.sweep.seeds_per_point
        out.append(
            f"sampler.budget_runs: {sm.budget_runs} is less than the {need} runs the plan "
            f"spends starting every cell ({n} cell(s) x {LAW_MIN_LRS} LRs x {seeds} run(s) a "
            f"point, sweep.seeds_per_point) before it can fit anything: give at least {need}"
        )
    if not sm.stop_lr_interval_ratio > 1:
        out.append(f"sampler.stop_lr_interval_ratio: {sm.stop_lr_interval_ratio!r} must be > 1")
    if spec.target is not None:
        for key in ("params", "tokens"):
            v = getattr(spec.target, key)
            if v is not None and not v > 0:
                out.append(f"target.{key}: {v!r} must be > 0")
    if s.lr.is_fixed:
        out.append("search.lr: the law sampler plans the LR: give a range or a list of values")
    elif not _check_param("lr", s.lr) and len(law_lrs(s)) < LAW_MIN_LRS:
        out.append(
            f"search.lr: the law sampler needs at least {LAW_MIN_LRS} candidate LRs "
            "(a range spanning x2 in sqrt(2) steps, or 3 values)"
        )
    for name, p in s.items():
        if name != "lr" and not p.is_fixed:
            out.append(f"search.{name}: the law sampler plans the LR only: fix {name}")
    if spec.pruner.kind == "asha":
        out.append(
            "pruner.kind: asha is not used with sampler.kind = 'law' (the plan needs whole runs)"
        )
    return out


def _check_own(spec: StudySpec) -> list[str]:
    """Cross-field rules of the own-model keys (no import of the user's code)."""
    out: list[str] = []
    m, t, s = spec.model, spec.train, spec.search
    if m.builder is None:
        if m.args:
            out.append("model.args: only used with model.builder")
        if m.param_roles is not None:
            out.append("model.param_roles: only used with model.builder")
    else:
        default = ModelSpec()
        for key in PROXY_ONLY_KEYS:
            if getattr(m, key) != getattr(default, key):
                out.append(
                    f"model.{key}: only the built-in proxy understands it, not allowed beside "
                    "model.builder (pass it to your builder in [model.args])"
                )
        if m.parametrization == "sp" and m.init_std != default.init_std:
            out.append(
                "model.init_std: under sp a builder's model keeps its own init; it is used under "
                "mup/completep only"
            )
    if t.weight_decay_tau is not None and s.weight_decay is not None:
        out.append(
            "train.weight_decay_tau: give the decay as a timescale or as search.weight_decay, not both"
        )
    if s.schedule is not None and t.schedule != TrainSpec.schedule:
        out.append("train.schedule: give the schedule in train or in search, not both")
    return out


# ---- a study about to be run -------------------------------------------------------------------
def check_run(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """The rules of a study about to be run (``validate`` and ``launch`` of a study file, and
    :func:`check_spec` of a spec built in Python), which a stored study read back is not held to
    (it was launched under the rules of its day): a sampler other than the grid searches the LR
    or the batch size (:func:`check_searched`), each token budget is at least one step
    (:func:`check_budgets`), byte-level data has its 256 values (:func:`check_byte_vocab`), the
    data that is here can be read and holds a window of the context (:func:`check_data_content`),
    a searched warmup is one unit (:func:`check_warmup`), the optimizer reads the keys set and
    has muP rules in the built-in loop (:func:`check_optimizer`), and ``sweep.storage`` is a URL
    (:func:`check_storage`).

    ``known``: problems already found; a rule that reads a key they name is not applied (its
    answer would rest on a stand-in value).
    """
    out = [
        *check_searched(spec, known=known),
        *check_budgets(spec, known=known),
        *check_byte_vocab(spec, known=known),
        *check_warmup(spec, known=known),
        *check_optimizer(spec, known=known),
        *check_storage(spec, known=known),
    ]
    return out + check_data_content(spec, known=[*known, *out])


def check_warmup(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """``warmup`` is a fraction of the steps below 1 and a number of steps from 1, truncated to
    whole steps (``proxy_models.hparams.warmup_steps``: ``int(warmup)``). A searched warmup that
    mixes the two (a range across 1, a list on both sides) searches two quantities on one axis,
    and steps that are not whole train fewer (2.5 trains 2; a range from 2 draws 2.37, ...): both
    had been accepted. One line each. ``known``: see :func:`check_run`."""
    p = spec.search.warmup
    if p is None or _touches(known, ("search.warmup",)):
        return []
    if p.values is not None:
        vals = sorted(float(v) for v in p.values)
        low, high = vals[0], vals[-1]
        # (0 is no warmup in either unit: 0, 50 and 100 steps is one quantity; a review)
        below, above = [v for v in vals if 0 < v < 1], [v for v in vals if v >= 1]
        mixing = bool(below and above)
        mixed = f"{_listed(below)} (fractions of the steps) and {_listed(above)} (steps)"
        broken = [v for v in vals if v >= 1 and not v.is_integer()]
    else:
        assert p.low is not None and p.high is not None
        low, high = float(p.low), float(p.high)
        # (an integer range draws 0, no warmup, or whole steps: neither mixed nor broken)
        mixing = low < 1 <= high and not p.integer
        mixed = f"the range {low:g} to {high:g} holds fractions of the steps and steps"
        # (a range of steps draws numbers between the whole ones, each truncated)
        broken = [] if high < 1 or low < 1 or p.integer else [low, high]
    out = []
    if mixing:
        out.append(
            f"search.warmup: {mixed}: warmup is a fraction of the steps below 1 and a number of "
            "steps from 1, so one searched warmup must be one or the other (keep it below 1, or "
            "give whole steps)"
        )
    if broken and p.values is not None:
        out.append(
            f"search.warmup: {_listed(broken)} {'is' if len(broken) == 1 else 'are'} not whole "
            f"steps: a warmup of 1 or more is a number of steps, truncated ({broken[0]:g} trains "
            f"{int(broken[0])}): give whole steps, or a fraction of the steps below 1"
        )
    elif broken:
        out.append(
            f"search.warmup: the range {low:g} to {high:g} is a number of steps, and a range "
            "draws steps that are not whole (each truncated: 2.7 trains 2): give whole steps as "
            "a list ({ values = [...] }), or a range of fractions below 1"
        )
    return out


def _listed(values: Sequence[float]) -> str:
    """Numbers as a study writes them: ``0.5``, ``[0.5, 1, 2]``."""
    return f"{values[0]:g}" if len(values) == 1 else f"[{', '.join(f'{v:g}' for v in values)}]"


#: the optimizers whose muP (and CompleteP) rules the built-in loop applies: Adam's per-layer
#: rules (hidden LR ÷ m, weight decay × m; ``proxy_models.rules``), which Muon's groups take too
#: (docs/OWN_MODEL.md). SGD's muP rules differ (Tensor Programs V: the hidden LR is not ÷ m), and
#: Adafactor's step is relative to RMS(param), which muP's init already shrinks by 1/√m, so the
#: ÷ m would apply twice (``proxy_models.optim``): coord-check flagged both (an audit).
MUP_OPTIMIZERS: Final[tuple[str, ...]] = ("adamw", "muon")
#: what each optimizer of the built-in loop does not read (``proxy_models.optim``): the keys a
#: study may not set with it, and why (beside the default they do nothing: a searched beta2 under
#: adafactor doubled a grid for identical losses; an audit)
UNREAD_KEYS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "adafactor": (
        ("train.beta1", "search.beta2", "train.eps"),
        "torch's Adafactor runs at its defaults: no momentum, beta2_decay -0.8, eps (None, 1e-3)",
    ),
    "sgd": (("search.beta2", "train.eps"), "SGD has momentum beta1 and no second moment"),
}


def check_optimizer(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """The optimizer of the built-in loop (not a ``train.function``'s, which builds its own):
    muP and CompleteP only with an optimizer whose rules the loop applies (:data:`MUP_OPTIMIZERS`),
    and no key the optimizer does not read (:data:`UNREAD_KEYS`: away from its default, or
    searched). ``known``: see :func:`check_run`."""
    t, m = spec.train, spec.model
    if t.function is not None or _touches(known, ("train.optimizer",)):
        return []
    out = []
    if (
        m.parametrization in ("mup", "completep")
        and t.optimizer not in MUP_OPTIMIZERS
        and not _touches(known, ("model.parametrization",))
    ):
        why = {
            "sgd": "SGD's muP rules differ (Tensor Programs V: its hidden LR is not ÷ m)",
            "adafactor": (
                "Adafactor's step is relative to RMS(param), which muP's init already shrinks, "
                "so the ÷ m applies twice"
            ),
        }.get(t.optimizer, f"{t.optimizer} has no muP rules here")
        out.append(
            f"train.optimizer: {t.optimizer!r} under model.parametrization "
            f"{m.parametrization!r}: the built-in loop applies Adam's muP rules (hidden LR ÷ m, "
            f"weight decay × m) whatever the optimizer, and {why}: use "
            f"{' or '.join(repr(o) for o in MUP_OPTIMIZERS)}, or parametrization 'sp'"
        )
    keys, why = UNREAD_KEYS.get(t.optimizer, ((), ""))
    default = TrainSpec()
    for key in keys:
        section, name = key.split(".")
        given = (
            getattr(spec.search, name) is not None
            if section == "search"
            else getattr(t, name) != getattr(default, name)
        )
        if given and not _touches(known, (key,)):
            out.append(
                f"{key}: not used by train.optimizer {t.optimizer!r} ({why}): leave it out"
            )
    return out


def check_storage(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """``sweep.storage`` parses as a SQLAlchemy URL, with the line ``launch`` refuses it by
    (:func:`sweeper.study.storage.get_engine`): ``validate`` had passed ``"notaurl"``. Whether
    the database is there, or its driver installed, is launch's to find."""
    url = spec.sweep.storage
    if not url or _touches(known, ("sweep.storage",)):
        return []
    import sqlalchemy as sa

    from sweeper.study.storage import _path_hint, redact, safe_url

    try:
        sa.engine.make_url(url)
    except sa.exc.ArgumentError as e:
        return [
            f"sweep.storage: invalid storage URL {safe_url(url)!r}: {redact(str(e), url)}"
            f"{_path_hint(url)}"
        ]
    return []


def check_max_concurrent(max_concurrent: object) -> None:
    """StudyError unless ``max_concurrent`` is None or an integer >= 1: -1 had hung a launch
    that trained nothing, and 0 had been read as no limit (an API audit)."""
    ok = max_concurrent is None or (
        isinstance(max_concurrent, int)
        and not isinstance(max_concurrent, bool)
        and max_concurrent >= 1
    )
    if not ok:
        raise StudyError(
            f"max_concurrent (--max-concurrent) must be an integer >= 1 or None, got "
            f"{max_concurrent!r}"
        )


def check_byte_vocab(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """A vocab below 256 on byte-level data (the built-in loop loads it as bytes: every run
    failed in load_data, after validate had said ok); not for a study's own training function,
    which may load its data itself. ``known``: see :func:`check_run`."""
    m = spec.model
    if _touches(known, ("model.vocab_size", "sweep.data")) or spec.train.function:
        return []
    if m.vocab_size >= BYTE_VALUES or not _byte_level(spec.sweep.data):
        return []
    return [
        f"model.vocab_size: {m.vocab_size} is below the {BYTE_VALUES} byte values of "
        f"byte-level data ({spec.sweep.data!r}): every run would fail; give {BYTE_VALUES}"
    ]


def _touches(problems: Sequence[str], keys: tuple[str, ...]) -> bool:
    """Whether a problem names one of ``keys``, a key under one, or the section holding one."""
    for p in problems:
        k = p.split(":", 1)[0].strip("[]")
        k = k.split("[", 1)[0]  # ladder.cells[2].tokens -> ladder.cells
        for key in keys:
            if k == key or k.startswith(key + ".") or key.startswith(k + "."):
                return True
    return False


def resolve_data(data: str) -> str | None:
    """``sweep.data`` as a trial is given it: ``"builtin"``, or the absolute path (``~``
    expanded, relative to the working directory); None when that path does not exist."""
    if data == "builtin":
        return data
    path = os.path.abspath(os.path.expanduser(data))
    return path if os.path.exists(path) else None


#: the token values of byte-level data (the built-in corpus, a text file or folder)
BYTE_VALUES: Final = 256


def _byte_level(data: str) -> bool:
    """Whether ``sweep.data`` is read as bytes here (the built-in corpus, or a text file or
    folder; not a folder of tokenized train.bin/val.bin); False when it is not here to see."""
    path = resolve_data(data)
    if path is None:
        return False
    return path == "builtin" or not os.path.exists(os.path.join(path, "train.bin"))


def check_data(spec: StudySpec) -> list[str]:
    """The study's data exists here (:func:`resolve_data`): the one rule ``launch`` refuses a
    study by (:func:`check_spec`) and ``validate`` warns of (:func:`load_study`)."""
    if resolve_data(spec.sweep.data) is not None:
        return []
    return [
        f"sweep.data: {spec.sweep.data!r} not found (give an existing file or folder, relative "
        "to the working directory, or 'builtin')"
    ]


#: the share of a text source held out for validation (``proxy_models.load_data``'s
#: ``val_fraction``, the value every run loads it with)
VAL_FRACTION: Final = 0.1
#: the values of nanoGPT's uint16 tokens (``load_data`` refuses a larger vocab_size)
UINT16_VALUES: Final = 65536
#: tokens of each .bin file whose largest ``load_data`` checks against vocab_size (its bounded
#: check: a multi-GB file is not scanned)
BIN_HEAD_TOKENS: Final = 1 << 20


class _Unreadable(Exception):
    """Data ``load_data`` would refuse: ``key`` is the study key to name."""

    def __init__(self, key: str, msg: str) -> None:
        super().__init__(msg)
        self.key = key


def check_data_content(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """Data that is here can be read as every run reads it (``proxy_models.load_data``) and its
    splits hold a window of ``model.context + 1`` tokens (the training split one more: the
    loop's own rules). One line naming ``sweep.data`` or ``model.vocab_size``; none for data
    not here (:func:`check_data`), ``"builtin"`` (4 MiB), or a ``train.function`` (which reads
    its data its own way). NanoGPT token files that held tokens >= vocab_size, a folder with
    nothing to read and a text shorter than a window had passed ``validate``, and every run then
    failed at launch (an audit).

    Without torch: load_data's rules read from the files' sizes (a text is its bytes) and, for
    ``train.bin``/``val.bin``, their first :data:`BIN_HEAD_TOKENS` tokens (what load_data
    checks), so it costs a directory walk and at most 4 MiB read.
    ``known``: see :func:`check_run`."""
    keys = ("sweep.data", "model.vocab_size", "model.context")
    if spec.train.function is not None or _touches(known, keys):
        return []
    path = resolve_data(spec.sweep.data)
    if path is None or path == "builtin":
        return []
    try:
        train, val, unit = _data_lengths(path, spec.model.vocab_size, spec.sweep.data)
    except _Unreadable as e:
        return [f"{e.key}: {e}"]
    except OSError as e:
        return [f"sweep.data: {spec.sweep.data!r} cannot be read: {e.strerror or e}"]
    window = spec.model.context + 1
    if val >= window and train > window:
        return []
    data = spec.sweep.data
    if unit == "bytes":
        total = train + val
        need = window * 10  # (the smallest text whose held-out 10% holds a window)
        while (v := max(1, int(need * VAL_FRACTION))) < window or need - v <= window:
            need += 1
        return [
            f"sweep.data: {data!r} holds {total:,} bytes, too few for model.context "
            f"{spec.model.context}: its validation split (the last 10%, {val:,} tokens) and its "
            f"training split ({train:,}) must each hold a window of context + 1 tokens; give at "
            f"least {need:,} bytes of text, or a shorter context"
        ]
    short = "val.bin" if val < window else "train.bin"
    return [
        f"sweep.data: {short} of {data!r} holds {val if short == 'val.bin' else train:,} tokens, "
        f"too few for model.context {spec.model.context}: it must hold "
        f"{'a window' if short == 'val.bin' else 'more than a window'} of context + 1 = "
        f"{window:,} tokens; give more tokens, or a shorter context"
    ]


def _data_lengths(path: str, vocab_size: int, shown: str) -> tuple[int, int, str]:
    """The (training, validation) tokens ``load_data`` gives ``path`` with ``vocab_size``, and
    their unit ("bytes" for text, "tokens" for uint16 .bin files), from the files' sizes; raises
    :class:`_Unreadable` where load_data raises (the same rules, without torch). ``shown``: the
    path as the study writes it."""
    import pathlib

    p = pathlib.Path(path)
    if p.is_dir() and (p / "train.bin").exists():
        if not 0 < vocab_size <= UINT16_VALUES:
            raise _Unreadable(
                "model.vocab_size",
                f"{vocab_size} is above the {UINT16_VALUES:,} values of the uint16 tokens of "
                f"{shown!r} (nanoGPT's train.bin/val.bin): give at most {UINT16_VALUES:,}",
            )
        if not (p / "val.bin").exists():
            raise _Unreadable(
                "sweep.data", f"{shown!r} holds train.bin but no val.bin beside it (nanoGPT's)"
            )
        lengths = []
        for split in ("train", "val"):
            f = p / f"{split}.bin"
            size = f.stat().st_size
            if size < 4 or size % 2:
                raise _Unreadable(
                    "sweep.data", f"{str(f)!r} is not a file of uint16 tokens ({size:,} bytes)"
                )
            top = _largest_token(f)
            if top >= vocab_size:
                raise _Unreadable(
                    "model.vocab_size",
                    f"{vocab_size} does not cover the data: {str(f)!r} holds token {top:,} (every "
                    f"token id must be below vocab_size): give at least {top + 1:,}",
                )
            lengths.append(size // 2)
        return lengths[0], lengths[1], "tokens"
    if p.is_dir():
        files = [f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in (".txt", ".md")]
        if not files:
            raise _Unreadable(
                "sweep.data",
                f"{shown!r} is a folder with neither train.bin/val.bin nor .txt/.md files: nothing "
                "to train on",
            )
        total = sum(f.stat().st_size for f in files) + len(files) - 1  # (joined by newlines)
    else:
        total = p.stat().st_size
    val = max(1, int(total * VAL_FRACTION))
    return total - val, val, "bytes"


def _largest_token(f: Any) -> int:
    """The largest of the first :data:`BIN_HEAD_TOKENS` uint16 tokens of ``f`` (load_data's
    check; native byte order, as numpy's memory map reads them)."""
    import array

    with open(f, "rb") as fh:
        raw = fh.read(2 * BIN_HEAD_TOKENS)
    tokens = array.array("H")
    tokens.frombytes(raw[: len(raw) // 2 * 2])
    return max(tokens)


def data_source(spec: StudySpec) -> str:
    """The study's data as a trial is given it (:func:`resolve_data`); StudyError with
    :func:`check_data`'s line when it is not there."""
    path = resolve_data(spec.sweep.data)
    if path is None:
        raise StudyError(check_data(spec), path=spec.source)
    return path


def check_searched(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """A sampler that chooses (tpe, random, gp) has something to choose: a single LR at a single
    batch size is one point, which finds no optimum. A grid of one LR is allowed: one more LR
    for another sweep's grid, the two joined with '+' (``studies/*_ext.toml``). The law sampler
    has its own rule (:func:`_check_law`). ``known``: see :func:`check_run`."""
    if _touches(known, ("search.lr", "search.batch_size", "sampler.kind")):
        return []
    s, kind = spec.search, spec.sampler.kind
    if kind not in SAMPLERS or kind in ("grid", "law"):
        return []
    if not s.lr.is_fixed or not s.batch_size.is_fixed:
        return []
    assert s.lr.values is not None
    return [
        f"search.lr: one LR ({s.lr.values[0]!r}) at one batch size leaves sampler "
        f"{kind!r} nothing to choose and finds no optimum: give a range "
        "(lr = { low = ..., high = ... }) or a list of LRs (lr = { values = [...] })"
    ]


#: the most batch sizes of a searched range :func:`whole_step_warnings` tries (evenly spread)
_RANGE_BATCHES: Final = 4096


def whole_step_warnings(spec: StudySpec) -> list[str]:
    """Warnings (the study is not refused) where a run's whole steps miss its cell's D by more
    than a training function's run may before it keeps a ``tokens_note``
    (``proxy_models.train_function.TOKENS_SLACK``, 10%): a run trains ``max(1, D // (batch ×
    context))`` steps of ``batch × context`` tokens, and the fit takes the cell's D.
    ``ladder.tokens = [2047]`` at batch 16 × context 64 trained 1,024 tokens, fitted at D =
    2,047; a batch that does not divide the budget trains less, by an amount that depends on
    the batch (a bias in a batch law). One line per budget key for a fixed batch or a list of
    batches (its worst cell and batch); one, in general terms, for a searched batch range (its
    largest shortfall). None for a ``train.function`` (it trains its budget its own way, and
    its runs keep a ``tokens_note``) or a ladder that cannot be counted."""
    if spec.train.function is not None:
        return []
    from proxy_models.train_function import TOKENS_SLACK
    from sweeper.study.ladder import cells

    try:
        ladder = cells(spec)
    except (StudyError, ValueError, ZeroDivisionError):
        return []
    lad, context, b = spec.ladder, spec.model.context, spec.search.batch_size
    if lad.cells:
        keys = [f"ladder.cells[{i}].{'tokens' if c.tokens is not None else 'tokens_per_param'}"
                for i, c in enumerate(lad.cells)]  # fmt: skip
    else:
        per_shape = ["ladder.tokens"] * len(lad.tokens)
        per_shape += ["ladder.tokens_per_param"] * len(lad.tokens_per_param)
        keys = per_shape * (len(lad.widths) * len(lad.depths))

    def short(tokens: int, batch: int) -> tuple[float, int, int]:
        steps = max(1, tokens // (batch * context))
        return (tokens - steps * batch * context) / tokens, steps, steps * batch * context

    if b.values is None:  # a range: its worst batch, once
        assert b.low is not None and b.high is not None
        low, high = int(b.low), int(b.high)
        batches = range(low, high + 1, max(1, -(-(high - low + 1) // _RANGE_BATCHES)))
        worst = max(((*short(c.tokens, x), x, c) for c in ladder for x in batches),
                    key=lambda w: w[0])  # fmt: skip
        frac, steps, trained, batch, cell = worst
        if frac <= TOKENS_SLACK:
            return []
        return [
            f"search.batch_size: a batch of the range {low} to {high} can miss a cell's D by "
            f"more than {TOKENS_SLACK:.0%} in whole steps of batch × context tokens, which the "
            f"fit takes at the cell's D: up to {frac:.0%} short (batch {batch} at {cell.name}: "
            f"{steps:,} step(s), {trained:,} of its {cell.tokens:,} tokens), a bias that depends "
            "on the batch; a list of batches that divide the budgets avoids it"
        ]
    out: dict[str, tuple[float, int, int, int, Any]] = {}  # key: its worst case
    short_cells: dict[str, set[str]] = {}
    for key, c in zip(keys, ladder, strict=True):
        for x in sorted(int(v) for v in b.values):
            frac, steps, trained = short(c.tokens, x)
            if frac > TOKENS_SLACK:
                short_cells.setdefault(key, set()).add(c.name)
                if key not in out or frac > out[key][0]:
                    out[key] = (frac, steps, trained, x, c)
    lines = []
    for key, (frac, steps, trained, x, c) in out.items():
        n = len(short_cells[key])
        others = f" ({n} cells of {key} fall short)" if n > 1 else ""
        lines.append(
            f"{key}: whole steps miss {c.name}'s D by more than {TOKENS_SLACK:.0%}: it trains "
            f"{steps:,} step(s) of batch {x} × context {context} = {x * context:,} tokens, "
            f"{trained:,} of its {c.tokens:,} ({frac:.0%} short), and the fit takes D = "
            f"{c.tokens:,}{others}; give "
            f"budgets that are multiples of batch × context tokens"
            + (", or batches that divide them" if len(b.values) > 1 else "")
        )
    return lines


def check_budgets(spec: StudySpec, *, known: Sequence[str] = ()) -> list[str]:
    """Each token budget is at least one optimizer step at the largest batch searched (batch ×
    context tokens): a run trains at least one step (``proxy_models.hparams.batch_sizes``), so
    a smaller budget would train more tokens than the cell's D says. A ``tokens_per_param``
    budget is checked on the built-in proxy's N (a builder's model is counted by
    :func:`check_code`'s import, not here). ``known``: see :func:`check_run`."""
    if _touches(known, ("ladder.tokens", "ladder.cells", "model.context", "search.batch_size")):
        return []
    b = spec.search.batch_size
    batch = int(max(b.values) if b.values is not None else (b.high or 1))
    context = spec.model.context
    step = batch * context
    lad = spec.ladder
    too_small = f"is less than one step at batch {batch} ({batch} × {context} = {step} tokens)"
    fix = f"give at least {step} tokens, or a smaller batch or context"
    out: list[str] = []
    for t in lad.tokens:
        if t < step:
            out.append(f"ladder.tokens: {t} {too_small}: {fix}")
    for i, c in enumerate(lad.cells):
        if c.tokens is not None and c.tokens < step:
            out.append(f"ladder.cells[{i}].tokens: {c.tokens} {too_small}: {fix}")
    if spec.model.builder is None and not _touches(known, ("ladder", *_SHAPE_KEYS)):
        out += _check_tpp_budgets(spec, step, too_small)
    return out


#: the model keys a cell's N is counted from (:func:`sweeper.study.ladder.param_counts`)
_SHAPE_KEYS: Final = tuple(
    f"model.{k}"
    for k in ("builder", "heads", "head_dim", "context", "vocab_size", "qk_norm", "tied_embeddings")
)


def _check_tpp_budgets(spec: StudySpec, step: int, too_small: str) -> list[str]:
    """:func:`check_budgets` for the ``tokens_per_param`` budgets: one line per value, naming
    its smallest cell (the one that needs the most tokens per parameter)."""
    from sweeper.study.ladder import param_counts

    lad, m = spec.ladder, spec.model
    if lad.cells:
        shapes = [
            (f"ladder.cells[{i}].tokens_per_param", c.width, c.depth, c.tokens_per_param)
            for i, c in enumerate(lad.cells)
            if c.tokens_per_param is not None
        ]
    else:
        shapes = [
            ("ladder.tokens_per_param", w, d, tpp)
            for tpp in lad.tokens_per_param
            for w in lad.widths
            for d in lad.depths
        ]
    worst: dict[tuple[str, float], tuple[int, int, str]] = {}
    for key, w, d, tpp in shapes:
        heads = m.heads if m.heads is not None else max(1, w // m.head_dim)
        n, _ = param_counts(
            w,
            d,
            heads=heads,
            context=m.context,
            vocab_size=m.vocab_size,
            qk_norm=m.qk_norm,
            tied_embeddings=m.tied_embeddings,
        )
        tokens = max(1, round(tpp * n))
        if tokens < step and ((key, tpp) not in worst or n < worst[key, tpp][0]):
            worst[key, tpp] = (n, tokens, f"w{w}-d{d}")
    return [
        f"{key}: {tpp!r} gives cell {cell} {tokens} tokens, which {too_small}: give at least "
        f"{step / n:.3g} tokens per parameter, or a smaller batch or context"
        for (key, tpp), (n, tokens, cell) in worst.items()
    ]


def check_code(spec: StudySpec) -> list[str]:
    """Import the study's own code and try it (``sweeper validate`` and ``launch`` run this
    before any trial): the builder builds the smallest cell and runs one forward pass (logits of
    the right shape, roles that the parametrization can use); the training function's signature
    and the keys it honours. One line per problem, naming the study key. Imports torch only for
    a study with a builder."""
    if spec.model.builder is None and spec.train.function is None:
        return []
    from sweeper.study.own_code import check_own_code

    return check_own_code(spec)


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

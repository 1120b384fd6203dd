"""Gather what a sweep's report shows: its runs and cell optima, its latest laws (of one fitting
method, if asked; one fitted for the report when none is stored), the recipe to mark, and the
stored transfer check."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sweeper.errors import FitError, SweeperError
from sweeper.fitting.laws import PowerLaw

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.fitting import CellOptimum
    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import Law
    from sweeper.recipe.recipe import Recipe
    from sweeper.report.page import TransferShown
    from sweeper.study.handle import Sweep

__all__ = ["build_report"]

#: the recipe keys that give the target's resolved scale (a target given by shape or compute)
_SCALE_KEYS = ("n_params", "tokens", "flops", "width", "depth")


def build_report(
    sw: Sweep,
    out: Path,
    *,
    method: str | None = None,
    recipe: Mapping[str, Any] | None = None,
    bootstrap: int = 200,
    at: Mapping[str, float] | None = None,
    bytes_per_token: float | None = None,
) -> list[Path]:
    """Write the report of ``sw`` into ``out``; returns the files written. The laws shown: the
    latest stored per target, or with ``method`` the latest stored by that method (fitted for the
    report alone when none is). ``at``: a target's scale (predictor → value, D in the target's
    tokens) to mark, when no ``recipe`` gives one; ``bytes_per_token`` converts its D to the
    bytes of laws fitted on byte-level data, as recommend's does (without it, such a page says
    that D is read as bytes). Notes about what the report had to make up go into the page."""
    from sweeper.fitting import estimate_optima
    from sweeper.fitting.fit_runs import check_method, check_resamples
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.recipe.recipe import recipe_from_dict
    from sweeper.report.page import ReportInputs, write_report

    if out.exists() and not out.is_dir():
        raise SweeperError(f"report: {out} exists and is not a folder")
    if recipe is not None and at:
        raise SweeperError(
            "report: give a recipe or a target's scale (at): a recipe names its target"
        )
    _check_bytes_per_token(bytes_per_token, at)
    shown = recipe_from_dict(recipe) if recipe is not None else None  # (refused when malformed)
    check_resamples(bootstrap, "--bootstrap (bootstrap)")
    if method is not None:
        check_method(method)
    runs = sw.runs()
    # the per-cell estimate (the table, the loss-vs-LR panels; the law plots' points unless the
    # law is a surface law, whose own cell optima they draw: sweeper.report.page._law_points)
    optima = estimate_optima(
        runs, method="band" if method == "band" else "parabola", n_boot=bootstrap
    )
    laws, notes = _report_laws(sw, runs, optima, method, bootstrap)
    target_scale = _checked_scale(at) if at else None
    if target_scale is not None and recipe is None:
        notes += _target_doubts(laws, target_scale, bytes_per_token)
        target_scale = _in_law_units(laws, target_scale, bytes_per_token)
    if recipe is not None:
        target_scale = _recipe_scale(recipe, laws)
    inputs = ReportInputs(
        sweep=sw.name,
        runs=runs,
        optima=optima,
        laws=laws,
        recipe=shown,
        transfers=_transfers(sw),
        target_scale=target_scale,
        notes=tuple(notes),
        measured=measured_with(sweep_conventions(sw), imported=sw.spec is None),
        conventions=sweep_conventions(sw),
        planned=_planned(sw),
    )
    return write_report(inputs, out)


def _check_bytes_per_token(bytes_per_token: float | None, at: Mapping[str, float] | None) -> None:
    """SweeperError unless ``bytes_per_token`` is None, or a positive number beside a target's
    scale ``at`` (it converts that target's D; a recipe records its own)."""
    from sweeper.recipe.hardware import positive

    if bytes_per_token is None:
        return
    problems: list[str] = []
    positive("bytes_per_token", bytes_per_token, problems)
    if problems:
        raise SweeperError(f"report: {problems[0]}")
    if not at:
        raise SweeperError(
            "report: bytes_per_token converts a target's D (--tokens) into the laws' bytes: give "
            "the target's scale too (a recipe records its own bytes_per_token)"
        )


def _in_law_units(
    laws: list[Law], at: Mapping[str, float], bytes_per_token: float | None
) -> dict[str, float]:
    """The target's scale ``at`` (D and compute in the target's tokens) in the units of the laws
    shown, by recommend's conversion (:func:`~sweeper.recipe.scale.token_factor`): D and compute
    times ``bytes_per_token`` for laws that count bytes, as they are otherwise (a page had marked
    a target's 1e8 tokens at 1e8 bytes)."""
    from sweeper.recipe.scale import token_factor

    law = next((x for x in laws if isinstance(x, PowerLaw)), None)
    f = token_factor(law, bytes_per_token) if law is not None else 1.0
    return {k: v * f if k in ("tokens", "flops") else v for k, v in at.items()}


def _planned(sw: Sweep) -> str:
    """How a law-sampler sweep's runs were planned, as ``sweeper status`` says it: the target
    the plan pinned the LR down at, runs used of the budget, why it stopped ("" for the other
    samplers: an audit's report of a law-sampler sweep could not be told from a grid's)."""
    if not sw.launched or sw.spec is None or sw.spec.sampler.kind != "law":
        return ""
    from sweeper.run.law_plan import law_target, recorded_target
    from sweeper.study.ladder import cells
    from sweeper.study.sweep import law_progress, sweep_status

    law = sweep_status(sw.name, sw.url)["law"]
    if law is None:
        return ""
    scales = {c.name: (float(c.n_params), float(c.tokens)) for c in cells(sw.spec)}
    t = law_target(sw.spec, scales, recorded_target(sw.cell_studies()))
    line = law_progress(law["runs_used"], law["budget_runs"], law["stop"])
    return f"Planned toward the target N {t['n_params']:.3g}, D {t['tokens']:.3g}: {line}"


def _recipe_scale(recipe: Mapping[str, Any], laws: list[Law]) -> dict[str, float]:
    """The recipe's target in the units of the laws shown, by recommend's rule
    (:func:`~sweeper.recipe.scale.law_scale`): D and compute in bytes for laws that count bytes
    (the recipe's ``bytes_per_token``), N as they count it. An audit's page had marked a
    recipe's 1e9 tokens at 1e9 bytes, a star 4x short of the recipe's own point. The recipe's
    numbers as written when no law is shown or the recipe lacks its shape."""
    from sweeper.recipe.scale import law_scale

    given = {
        k: float(recipe[k])
        for k in _SCALE_KEYS
        if isinstance(recipe.get(k), int | float) and recipe[k] > 0
    }
    shape = ("n_params", "tokens", "width", "depth", "seq_len")
    if not laws or not all(isinstance(recipe.get(k), int | float) for k in shape):
        return given
    total = recipe.get("n_params_total")
    return law_scale(
        laws[0],
        n_params=float(recipe["n_params"]),
        tokens=float(recipe["tokens"]),
        width=int(recipe["width"]),
        depth=int(recipe["depth"]),
        seq_len=int(recipe["seq_len"]),
        n_params_total=float(total) if isinstance(total, int | float) else None,
        bytes_per_token=recipe.get("bytes_per_token"),
    )


def _checked_scale(at: Mapping[str, float]) -> dict[str, float]:
    """``at`` as a target scale: known predictors, positive and finite; SweeperError else."""
    import math

    bad = [k for k in at if k not in _SCALE_KEYS]
    if bad:
        raise SweeperError(f"report: unknown target key(s) {bad}; known: {', '.join(_SCALE_KEYS)}")
    out = {k: float(v) for k, v in at.items()}
    if not all(math.isfinite(v) and v > 0 for v in out.values()):
        raise SweeperError(f"report: a target's values must be positive and finite, got {at}")
    return out


def _target_doubts(
    laws: list[Law], at: Mapping[str, float], bytes_per_token: float | None = None
) -> list[str]:
    """What ``recommend`` would doubt of the laws' values at a target given by scale alone (no
    recipe; D in the target's tokens, ``bytes_per_token`` as recommend's): its refusal, its
    warning on the laws' token unit (a byte-level law's page had compared the target's tokens
    with its bytes without a word: an audit) and its warnings that question a value (interval,
    extrapolation, the regime the law held fixed), so that a marked target is not read as a
    supported one. None where a law needs a predictor the target does not give: the page does
    not invent it (an audit's N-only target got doubts at a D of the page's making, the star's
    caption a star the plot did not draw). Where the page takes N or D from the law's cells (a
    law that does not model it), the regime doubts leave out what it took (:func:`_regime`);
    where recommend infers the shape from N and a doubt rests on it, its warning is kept."""
    from sweeper.errors import TargetError
    from sweeper.recipe.recommend import recommend
    from sweeper.recipe.scale import infer_shape_warning, token_unit_warnings
    from sweeper.recipe.target import Target
    from sweeper.recipe.warning_kinds import FORCED, Doubt

    if not laws:
        return ["the target given is not marked: there is no law to evaluate at it"]
    by_target = {law.target: law for law in laws if isinstance(law, PowerLaw)}
    if "lr" not in by_target:
        return []
    unmarked = _unmarked(list(by_target.values()), at)
    if unmarked:
        return [unmarked]
    lr = by_target["lr"]
    roles = _roles(by_target)
    budget, assumed = _budget(lr, at, bytes_per_token)
    model, assumed_n = _model(lr, at)
    conv = lr.conventions
    param = conv.parametrization or "sp"
    base = {} if param == "sp" else {"base_width": conv.base_width, "base_depth": conv.base_depth}
    try:  # (an SP study records a base width too, which an SP target refuses: the page's own run)
        target = Target(
            **model,
            tokens=budget.get("tokens"),
            compute=budget.get("compute"),
            parametrization=param,
            context=_context(conv),
            **base,
        )
    except TargetError as e:
        return [f"the target given is not one recommend can read, so its doubts are not said: {e}"]
    notes = [n for n in (assumed_n, assumed) if n]
    units = token_unit_warnings(roles, vocab=None, bytes_per_token=bytes_per_token)
    notes += [f"at the target: {w}" for w in units]
    try:
        recommend(by_target, target, bytes_per_token=bytes_per_token)
    except TargetError as e:
        notes.append(f"at the target, recommend refuses a recipe: {e}")
    try:
        r = recommend(by_target, target, force=True, bytes_per_token=bytes_per_token)
    except TargetError:
        return notes
    doubts: list[str] = [w for w in r.warnings if isinstance(w, Doubt) and FORCED not in w]
    took = {*(_ASSUMED_D if assumed else ()), *(_ASSUMED_N if assumed_n else ())}
    shown = _regime(roles, r, bytes_per_token, took)
    if took:
        doubts = [w for w in doubts if w not in _regime(roles, r, bytes_per_token, set())] + shown
    if r.shape_inferred and shown != _regime(roles, r, bytes_per_token, {*took, "depth"}):
        # (recommend's own warning, dropped with the page's other assumptions: an audit read
        # "depth 33 (its cells: 7-16)" as a depth given)
        notes.append(f"at the target: {infer_shape_warning(r.width, r.depth)}")
    notes += [f"at the target: {w}" for w in doubts]
    return notes


#: what the regime doubts leave out when the page took D, or N, from the law's cells: D and what
#: follows from it (D/N; the batch, which the batch law or Step Law sets from D), N and what
#: follows from it (D/N, and the depth, taken from the cells too)
_ASSUMED_D: Final[tuple[str, ...]] = ("tokens", "tokens_per_param", "batch_tokens")
_ASSUMED_N: Final[tuple[str, ...]] = ("n_params", "tokens_per_param", "depth")


def _roles(by_target: Mapping[str, Law]) -> list[tuple[str, Law]]:
    """The laws recommend measures its target against, by its roles: the LR law, and the batch
    law where there is one."""
    out: list[tuple[str, Law]] = [("lr", by_target["lr"])]
    if "batch_tokens" in by_target:
        out.append(("batch", by_target["batch_tokens"]))
    return out


def _regime(
    roles: list[tuple[str, Law]], r: Recipe, bytes_per_token: float | None, leave: set[str]
) -> list[str]:
    """recommend's doubts on the regime each law held fixed
    (:func:`~sweeper.recipe.scale.regime_warnings`, at the values its recipe ``r`` planned, as
    :func:`~sweeper.recipe.hardware.plan_batch` checks them), the values in ``leave`` not
    checked: with none left out they are recommend's own, which the page replaces (an audit's
    N-only target was doubted for "D/N 0.000819", a D/N of the page's making)."""
    from sweeper.recipe.scale import regime_values, regime_warnings, token_factor

    out: list[str] = []
    batch = float(r.global_batch_sequences * r.seq_len)
    for role, law in roles:
        f = token_factor(law, bytes_per_token)
        values = regime_values(r.n_params, r.tokens, batch, f, depth=r.depth, seq_len=r.seq_len)
        out += regime_warnings(law, role, {k: v for k, v in values.items() if k not in leave})
    return out


def _unmarked(laws: list[PowerLaw], at: Mapping[str, float]) -> str:
    """The note on the laws that cannot be evaluated at ``at`` (one of their predictors is not
    given: :func:`~sweeper.report.plots.target_point`, the plots' rule), "" when none."""
    from sweeper.report.page import not_given
    from sweeper.report.plots import target_point

    short = [law for law in laws if target_point(law, at) is None]
    if not short:
        return ""
    names, one = " and ".join(law.target for law in short), len(short) == 1
    return (
        f"the target gives no {not_given(short, at)}, which the {names} law{'' if one else 's'} "
        f"need{'s' if one else ''}: not evaluated there (no star on the law plot, no doubts said)"
    )


def _budget(
    law: Law, at: Mapping[str, float], bytes_per_token: float | None = None
) -> tuple[dict[str, float], str]:
    """The target's D (or compute) for ``recommend``, in the target's tokens, and a note when
    the page assumed it: as given, else the D the law's cells held (a law that does not model D;
    the note says so, and the regime doubts leave it out), converted from the law's bytes by
    ``bytes_per_token`` as recommend converts the target's."""
    from sweeper.recipe.scale import token_factor

    given = {k: at[v] for k, v in (("tokens", "tokens"), ("compute", "flops")) if v in at}
    if given:
        return given, ""
    d = _held_mid(law, "tokens")
    if d is None:
        return {}, ""
    return {"tokens": d / token_factor(law, bytes_per_token)}, _assumed(law, "D", d)


def _model(law: Law, at: Mapping[str, float]) -> tuple[dict[str, Any], str]:
    """The target's model for ``recommend``, and a note when the page assumed it: N and the shape
    as given, else the N the law's cells held (a law that does not model N, e.g. a D-only batch
    ladder: its doubts had gone unsaid for want of an N; :func:`_budget`'s rule for D)."""
    model: dict[str, Any] = {
        "n_params": at.get("n_params"),
        "width": int(at["width"]) if "width" in at else None,
        "depth": int(at["depth"]) if "depth" in at else None,
    }
    n = _held_mid(law, "n_params")
    if any(v is not None for v in model.values()) or n is None:
        return model, ""
    model["n_params"] = n
    depth = _held_mid(law, "depth")
    if depth is not None:  # (the cells' depth too: a shape inferred from a proxy's N is not theirs)
        layers = max(1, round(depth))
        model.update(depth=layers, width=max(1, round((n / (12.0 * layers)) ** 0.5)))
    return model, _assumed(law, "N", n)


def _held_mid(law: Law, name: str) -> float | None:
    """The geometric middle of the range ``law``'s cells held ``name`` at (None: not held)."""
    span = law.conventions.held.get(name)
    return (span[0] * span[1]) ** 0.5 if span else None


def _assumed(law: Law, what: str, value: float) -> str:
    """The page's note on a target value it took from what ``law``'s cells held."""
    return (
        f"the target gives no {what}: the doubts below take {what} = {value:.3g}, the {what} the "
        f"{law.target} law's cells held (the law does not model {what})"
    )


def _context(conv: Conventions) -> int | None:
    """The context the page's target takes: the proxies' (report has no --context; recommend's
    default of 2048 had been doubted against the proxies' 128 on every page, a context nobody
    gave: a review); None where the law records none."""
    span = conv.held.get("seq_len")
    return int(span[1]) if span else None


def _transfers(sw: Sweep) -> list[TransferShown]:
    """Every transfer check stored for ``sw``, the one stored last first, with the LR law each
    fitted without its held-out cell."""
    from sweeper.fitting.laws import PowerLaw, law_from_dict
    from sweeper.report.page import TransferShown
    from sweeper.transfer.run import stored_transfers

    out = []
    for t in stored_transfers(sw.name, sw.url):
        law = law_from_dict(t["law"]) if t.get("law") else None
        result = {k: v for k, v in t.items() if k != "law"}
        out.append(TransferShown(result, law if isinstance(law, PowerLaw) else None))
    return out


def measured_with(conv: Conventions, *, imported: bool = False) -> str:
    """What the sweep trained, in one line for the page's head: the model, the loop, the
    optimizer and the LR's meaning (two sweeps of different techniques looked alike); for runs
    imported without their study, that none of it is recorded."""
    if imported:
        return (
            "imported runs: their model, loop and optimizer are not recorded; the LR is the "
            f"{conv.lr}"
        )
    model = f"model builder {conv.model_builder}" if conv.model_builder else "the built-in proxy"
    if conv.train_function and not conv.model_builder:  # (no model is passed: it builds its own)
        model = "the training function's own model (its N counted as 12·L·d² at each cell's shape)"
    loop = (
        f"training function {conv.train_function}" if conv.train_function else "the built-in loop"
    )
    opt = conv.optimizer or "its own optimizer (not recorded)"
    par = f" under {conv.parametrization}" if conv.parametrization else ""
    return f"measured with {model}{par}, {loop} and {opt}; the LR is the {conv.lr}"


def _report_laws(
    sw: Sweep, runs: pd.DataFrame, optima: list[CellOptimum], method: str | None, bootstrap: int
) -> tuple[list[Law], list[str]]:
    """The laws the report shows, and notes when they were fitted for it: the latest stored
    power law per target (by ``method`` when it is given) and the latest loss law; when no
    power law is stored, the laws fitted here as ``sweeper fit`` would (the LR law, and the batch
    law where the batch varied in the cells: the LR law alone had been fitted, the batch law
    dropped without a word; an audit), by ``method``, else through the parabola optima drawn on
    the page (the same per-cell estimate, ``bootstrap`` resamples), their predictors, doubts and
    targets not fitted included (an audit's fallback had fitted N alone where D varied, crashed
    where N did not, and printed raw Python warnings)."""
    from sweeper.fitting._common import min_cells
    from sweeper.fitting.fit_runs import FitOptions, fit_runs
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.fitting.store import latest_laws

    stored, loss = latest_laws(sw.name, sw.url, method=method)
    shown: list[Law] = [loss] if loss is not None else []  # (the page had not shown it: an audit)
    latest: list[Law] = [law for law in stored.values() if isinstance(law, PowerLaw)]
    if latest:
        return latest + shown, []
    by = f" by {method}" if method else ""
    usable = sum(o.usable for o in optima)
    if method is None and usable < min_cells(1):  # (the page had said "run sweeper fit")
        why = " (the cells table says why the others have none)" if usable < len(optima) else ""
        return shown, [
            f"no law: {usable} of {len(optima)} cells have an optimum of their own and a law "
            f"needs {min_cells(1)}{why}"
        ]
    options = FitOptions(method or "parabola", cell_boot=bootstrap)
    try:
        outcome = fit_runs(runs, conventions=sweep_conventions(sw), source=sw.name,
                           options=options)  # fmt: skip
    except FitError as e:
        return shown, [f"no stored law{by}, and none could be fitted here: {e}"]
    laws: list[Law] = [law for law in outcome.laws if isinstance(law, PowerLaw)]
    which = " and ".join(_LAW_NAMES.get(law.target, law.target) for law in laws)
    law_s = "law shown was" if len(laws) == 1 else "laws shown were"
    note = f"no stored law{by}: the {which} {law_s} fitted for this report only"
    # (the laws' own notes: the laws section)
    return laws + shown, [note, *outcome.skipped, *outcome.warnings]


#: how the page's notes name a law by its target
_LAW_NAMES: Final[dict[str, str]] = {"lr": "LR", "batch_tokens": "batch"}

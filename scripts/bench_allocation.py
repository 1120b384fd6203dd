"""Replay the law-aware sampler (:mod:`sweeper.fitting.allocation`) against a stored dense sweep.

No training: the planner asks for (cell, LR, seed); the answer is a stored run of that cell at the
grid point nearest to the asked LR with a run not yet used (the replay seed picks which of its
seeds), else the next-nearest point with one; every answer counts against the budget. With
``--workers k`` the planner proposes k points at a time (the earlier ones pending). The budget is a
fraction of the stored runs; the replay stops there or at the planner's stopping rule.

Reported (one JSON object with ``--json``): ``runs_used``/``runs_total``,
``core_seconds_used``/``core_seconds_total`` (sums of ``wall_s``: the proxies ran one core per
trial), ``exponent`` (on n_params) and ``exponent_ci`` of the surface fit on the replayed runs,
``exponent_reference`` and ``exponent_reference_ci`` (the surface fit on all stored runs),
``lr_target_log2_error`` (log2 of the replay's predicted LR at the target, 10x the largest cell's
n_params, over the reference's), and the same two errors for a ``random`` allocation of the same
number of runs (uniform over the stored runs, same replay seed). The reference is the surface
fit with its defaults (its window drops a dense grid's far-off runs, past the cliff: without it
width_sp's plateau above the cliff pulls the largest cells' optima below the grid, 1e-4).
The planner's, the replay's and the random baseline's fits use ``--fit`` (:data:`FITS`):
``sparse`` (default: every run, ``window=None``, and one curvature for all cells, as the planner
fits; see :mod:`sweeper.fitting.allocation`), or one of five diagnostics of the planner's fit:
``auto`` / ``ftest`` (every run, the curvature scaling with N where a Wald / an F test finds it,
``shape_scaling="auto"`` / ``"ftest"``), ``windowed`` (the surface fit's window, one
curvature), ``scaled`` (every run, the scaling always) or ``default`` (the surface fit's
defaults: window and scaling).
With ``--seeds N`` the top-level figures are medians over N replay seeds and ``replays`` lists
each.

``--confirm-runs 1`` replays the planner without its confirmation rule (the baseline it is
measured against).

``--per-run``: the planner ranks its points per run (every cell's cost set to 1), not per
core-second.

``--design oracle`` replaces the planner by what its criterion does with the law known: the
reference law is taken as true; every cell gets the 3 grid LRs nearest its reference optimum,
then, one run at a time, the stored point whose run most reduces Var[ln lr*(target)] in the
planner's linearised model at the reference law, per run, up to the budget (the replay seed picks
which stored seed answers each point). Every replay (and its random baseline) also reports
``predicted_sd_diff_log2``: √(σ_s² − σ_d²)/ln 2, the sd of the difference between the target LR
estimated from its runs and from all of them in a Gaussian linear model (σ_s, σ_d the sds of ln
lr*(target) from its runs and from the dense grid's, at the reference law), and
``predicted_target_pass``, 2Φ(0.4/``predicted_sd_diff_log2``) − 1, the share of such replays within
the target bar if the runs' noise were all there is. ``_nested``: the same with the replay's runs
also counted inside the reference's window only (nested in the grid's information; without, a design
whose runs lie outside the window comes out at sd 0, clamped: σ_s² < σ_d² there, as the two are not
nested; where a design leaves a parameter unidentified, the sd is set by the model's flat prior and
is huge). ``--design oracle-cost``: the oracle ranked per core-second of the cell's runs, as the
planner ranks. ``--design oracle-windowed``: the oracle design with runs outside the reference's
window worth nothing to the criterion. ``--every-seed`` (oracle designs): every stored run at the
design's points answers, not one per point asked (more runs than the budget: how far the same LRs,
with their noise averaged, land from the reference).

``--synthetic``: the stored sweep is a fresh :func:`~sweeper.fitting.synthetic.proxy_sweep` per
replay seed (5 cells, 8 LRs × 3 seeds, known law lr* = 0.208·N^-0.3); ``exponent_true`` is -0.3,
and ``wall_s`` is set to 6·N·D / 1e9 (an assumed throughput: the costs' ratios are what matter).

Every key ``--json`` prints (the table without it prints a few of the top-level ones):

- the run: ``sweep`` (its name, or ``synthetic:proxy_sweep``), ``budget`` (the fraction),
  ``replay_seeds``, ``workers``, ``fit`` (``--fit``), ``confirm_runs``, ``design`` (``--design``,
  with " (every seed)" after it under ``--every-seed``), ``per_run``, ``asymmetry_prior`` (the
  surface fit's prior on the cliff's asymmetry,
  :data:`sweeper.fitting._surface_model.ASYMMETRY_PRIOR`: None under ``--no-asymmetry-prior``),
  ``exponent_true`` (``--synthetic`` only: -0.3);
- medians over the replay seeds: ``runs_used``, ``runs_total``, ``core_seconds_used``,
  ``core_seconds_total``, ``exponent``, ``exponent_reference``, ``lr_target_log2_error`` (the
  signed error; the replay's own with one seed), ``lr_target_abs_log2_error_median`` (of the
  absolute errors), ``random_lr_target_abs_log2_error_median`` (the same for the random
  baseline), ``predicted_target_pass``, ``predicted_target_pass_nested`` and the random
  baseline's ``random_predicted_target_pass``, ``random_predicted_target_pass_nested``;
  ``exponent_ci`` (the replay's, with one seed; else None) and ``exponent_reference_ci`` (the
  first seed's reference);
- the bars (:func:`bars`): ``exponent_tolerance`` (±0.1 around the true exponent on synthetic
  ladders; on a stored sweep max(0.1, a quarter of the reference's 95% interval) around the
  reference's exponent), ``pass_fraction`` (the replay seeds whose exponent is within it and, on a
  stored sweep, whose target LR is within 0.4 in log2 of the reference's) and
  ``random_pass_fraction`` (the same for the random baseline);
- ``replays``: one object per replay seed: ``seed``, ``runs_used``, ``runs_total``,
  ``core_seconds_used``, ``core_seconds_total``, ``stop`` (why the planner stopped, as a launch
  says it: the budget, with the target LR's interval against the stop rule; the interval rule; no
  candidate left; or the oracle design's name), ``exponent``, ``exponent_ci``, ``lr_target`` (the
  predicted LR at the target; None when a wild fit overflows), ``lr_target_log2_error``,
  ``converged`` (absent when the fit failed), ``exponent_reference``, ``exponent_reference_ci``,
  ``runs_per_cell``, ``predicted_sd_diff_log2``, ``predicted_sd_diff_log2_nested``,
  ``predicted_target_pass``, ``predicted_target_pass_nested``, and ``random`` (the random
  baseline's ``exponent``, ``lr_target_log2_error``, ``core_seconds_used`` and the four
  ``predicted_*`` keys).

Errors (a bad option, an unknown sweep, a missing database, a stored sweep too sparse to answer
the replay: one the law sampler planned holds too few runs per cell) are one line on stderr, exit
2; a budget too small to start every cell (3 LRs each) is said in a note on stderr (and in the
error when the replay fails).

Usage::

    .venv/bin/python scripts/bench_allocation.py quickstart --storage sqlite:////tmp/h13.db \\
        --budget 0.25 --json --seeds 5
    .venv/bin/python scripts/bench_allocation.py --synthetic --budget 0.25 --json --seeds 5
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import warnings
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from sweeper.errors import FitError, SweeperError
from sweeper.fitting import _surface_model as sm
from sweeper.fitting import allocation as al
from sweeper.fitting._common import FitWarning
from sweeper.fitting.surface import WINDOW, Scaling, SurfaceLaw, fit_surface
from sweeper.fitting.synthetic import proxy_sweep

#: --fit's choices: (window, shape_scaling) of the planner's and every replayed fit
FITS: dict[str, tuple[tuple[float, float] | None, Scaling]] = {
    "sparse": (al.PLANNER.window, al.PLANNER.shape_scaling),
    "auto": (None, "auto"),
    "ftest": (None, "ftest"),
    "windowed": (WINDOW, False),
    "scaled": (None, True),
    "default": (WINDOW, True),
}
#: the window of every reported fit and of the planner's fits (set by --fit)
WINDOW_ARG: list[tuple[float, float] | None] = [None]
#: shape_scaling of every fit (set by --fit)
SCALING_ARG: list[Scaling] = [al.PLANNER.shape_scaling]
#: the synthetic ladders' true exponent (proxy_sweep's default law)
SYNTHETIC_EXPONENT = -0.3
#: assumed throughput of the synthetic ladders (flop/s) for their core-seconds
SYNTHETIC_FLOPS_PER_S = 1e9


def load(sweep: str, storage: str | None) -> pd.DataFrame:
    """The stored sweep's results (completed and diverged runs)."""
    from sweeper.study.importer import load_runs

    runs = load_runs(sweep, storage)
    return _results(runs)


def synthetic(seed: int) -> pd.DataFrame:
    """A proxy ladder with a known law (see the module docstring)."""
    runs = proxy_sweep(seeds=3, seed=seed)
    runs["wall_s"] = 6.0 * runs["n_params"] * runs["tokens"] / SYNTHETIC_FLOPS_PER_S
    return _results(runs)


def _results(runs: pd.DataFrame) -> pd.DataFrame:
    ok = (runs["state"] == "COMPLETE") | runs["diverged"].astype(bool)
    return runs[ok].reset_index(drop=True)


_FITS: dict[tuple[int, int], SurfaceLaw | None] = {}


def fit(runs: pd.DataFrame, n_boot: int, *, dense: bool = False) -> SurfaceLaw | None:
    """The surface fit (the reported one: bootstrap with ``n_boot`` > 0), or None on FitError;
    ``dense``: with the surface fit's defaults (the reference), else with ``--fit``'s settings.
    Cached on the runs' content (the reference is the same for every replay seed)."""
    h = int(pd.util.hash_pandas_object(runs[["cell", "lr", "loss"]]).sum())
    key = (h, n_boot, dense)
    if key not in _FITS:
        window, scaling = (WINDOW, True) if dense else (WINDOW_ARG[0], SCALING_ARG[0])
        _FITS[key] = _fit(runs, n_boot, window, scaling)
    return _FITS[key]


def _fit(
    runs: pd.DataFrame, n_boot: int, window: tuple[float, float] | None, scaling: Scaling
) -> SurfaceLaw | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        try:
            return fit_surface(
                runs,
                n_boot=n_boot,
                cv=False,
                seed=0,
                window=window,
                shape_scaling=scaling,
            )
        except FitError:
            return None


class NotDense(RuntimeError):
    """The replay asked a cell for more runs than the stored sweep holds there: a sweep planned
    by the law sampler (or any sparse one) cannot answer a replay of it."""


def answer(stored: pd.DataFrame, used: np.ndarray, cell: str, lr: float, order: np.ndarray) -> int:
    """Index of the stored run answering (cell, lr): nearest LR with an unused run; among a
    point's runs, the first in the replay's random ``order``. :class:`NotDense` when every
    stored run of the cell is used."""
    cand = np.flatnonzero((stored["cell"].to_numpy() == cell) & ~used)
    if not cand.size:  # (the planner asks at most max_seeds runs per LR, the grid's seeds)
        n = int((stored["cell"].to_numpy() == cell).sum())
        raise NotDense(
            f"the replay asked for a run of {cell} at lr {lr:.3g} beyond the stored ones (all "
            f"{n} of its runs used)"
        )
    dist = np.abs(np.log(stored["lr"].to_numpy(float)[cand]) - math.log(lr))
    return int(cand[np.lexsort((order[cand], np.round(dist, 9)))[0]])


def replay(
    stored: pd.DataFrame,
    budget: int,
    seed: int,
    workers: int,
    stop_ratio: float | None,
    confirm_runs: int = al.CONFIRM_RUNS,
    per_run: bool = False,
) -> tuple[pd.DataFrame, str]:
    """Run the planner against ``stored`` until ``budget`` runs or its stop; the runs used.
    ``per_run``: every cell costs 1, so the planner ranks per run, not per core-second."""
    base = al.cells_from_runs(stored)
    target = al.default_target(base)
    scales = {c.cell: (c.n_params, c.tokens) for c in base}
    max_seeds = int(stored.groupby(["cell", "lr"]).size().max())
    order = np.random.default_rng(seed).permutation(len(stored))
    used = np.zeros(len(stored), dtype=bool)
    stop = ""
    while True:
        seen = stored[used]
        costs = {c: 1.0 for c in scales} if per_run else al.cell_costs(seen, scales)
        cells = [al.CellPlan(c.cell, c.n_params, c.tokens, c.lrs, costs[c.cell]) for c in base]
        cells.sort(key=lambda p: (p.cost, p.n_params, p.cell))
        p = al.plan(
            seen,
            cells,
            k=workers,
            seed=seed,
            budget_runs=budget,
            target=target,
            stop_lr_interval_ratio=stop_ratio,
            max_seeds=max_seeds,
            confirm_runs=confirm_runs,
            window=WINDOW_ARG[0],
            shape_scaling=SCALING_ARG[0],
        )
        if not p.points:
            stop = p.stop
            break
        for pt in p.points:
            used[answer(stored, used, pt.cell, pt.lr, order)] = True
    return stored[used], stop


_DESIGNS: dict[tuple[Any, ...], dict[tuple[str, float], int]] = {}


def oracle_design(
    stored: pd.DataFrame,
    ref: SurfaceLaw,
    n: int,
    window: tuple[float, float] | None = None,
    per_cost: bool = False,
) -> dict[tuple[str, float], int]:
    """Runs per (cell, lr) of the oracle design (module docstring): ranked per run, or with
    ``per_cost`` per core-second of the cell's runs (as the planner ranks); with ``window``, runs
    outside it around their cell's reference optimum carry no information. Cached."""
    h = int(pd.util.hash_pandas_object(stored[["cell", "lr", "loss"]]).sum())
    key = (h, n, window, per_cost, tuple(float(x) for x in ref.shape_params))
    if key in _DESIGNS:
        return _DESIGNS[key]
    base = al.cells_from_runs(stored)
    if n < al.START_LRS * len(base):
        raise ValueError(f"an oracle design starts {al.START_LRS} LRs in each of {len(base)} "
                         f"cells: a budget of {n} runs is too small")  # fmt: skip
    info = al._Info.build(ref, stored.iloc[:0], base, al.default_target(base), window)
    cap = stored.groupby(["cell", "lr"]).size().to_dict()
    cost = al.cell_costs(stored, {p.cell: (p.n_params, p.tokens) for p in base})
    out: dict[tuple[str, float], int] = {}

    def add(cell: str, lr: float) -> None:
        out[(cell, lr)] = out.get((cell, lr), 0) + 1
        info.observe(cell, math.log(lr))

    for p in base:
        opt = ref.cell_optima.get(p.cell) or ref.predict({"n_params": p.n_params})
        near = np.argsort(np.abs(np.log(np.asarray(p.lrs)) - math.log(opt)), kind="stable")
        for i in near[: al.START_LRS]:
            add(p.cell, p.lrs[int(i)])
    while sum(out.values()) < n:
        free = [(info.gain(p.cell, [math.log(lr)]) / (cost[p.cell] if per_cost else 1.0),
                 p.cell, lr) for p in base for lr in p.lrs
                if out.get((p.cell, lr), 0) < cap.get((p.cell, lr), 0)]  # fmt: skip
        best = max(free, default=(0.0, "", 0.0), key=lambda t: t[0])
        if best[0] <= 0:
            break
        add(best[1], best[2])
    _DESIGNS[key] = out
    return out


def replay_design(
    stored: pd.DataFrame, design: Mapping[tuple[str, float], int], seed: int, every: bool = False
) -> pd.DataFrame:
    """The stored runs answering ``design`` (the replay seed picks which seeds answer); with
    ``every``, all the stored runs at its points (every seed)."""
    if every:
        at = zip(stored["cell"], stored["lr"], strict=True)
        return stored[[(c, lr) in design for c, lr in at]]
    order = np.random.default_rng(seed).permutation(len(stored))
    used = np.zeros(len(stored), dtype=bool)
    for (cell, lr), k in sorted(design.items()):
        for _ in range(k):
            used[answer(stored, used, cell, lr, order)] = True
    return stored[used]


def predicted(used: pd.DataFrame, stored: pd.DataFrame, ref: SurfaceLaw | None) -> dict[str, Any]:
    """The sd (log2) of the difference between the target LR from ``used`` and from all of
    ``stored`` in the linearised model at ``ref``, and the share within the target bar it
    implies (module docstring); ``_nested``: the same with ``used`` also counted inside the
    reference's window only, so that its information is a part of the dense grid's (without,
    runs the window drops count for ``used`` and not for the grid, and the sd can come out 0).
    None where a model cannot be built."""
    out: dict[str, Any] = {f"predicted_{k}{suffix}": None for k in ("sd_diff_log2", "target_pass")
                           for suffix in ("", "_nested")}  # fmt: skip
    if ref is None:
        return out
    base = al.cells_from_runs(stored)
    tgt = al.default_target(base)
    try:
        sd_d = al._Info.build(ref, stored, base, tgt, WINDOW).target_sd()
    except np.linalg.LinAlgError:
        return out
    for suffix, window in (("", None), ("_nested", WINDOW)):
        try:
            sd_s = al._Info.build(ref, used, base, tgt, window).target_sd()
        except np.linalg.LinAlgError:
            continue
        sd = math.sqrt(max(sd_s**2 - sd_d**2, 0.0)) / math.log(2.0)
        if not math.isfinite(sd):
            continue
        out[f"predicted_sd_diff_log2{suffix}"] = sd
        out[f"predicted_target_pass{suffix}"] = math.erf(0.4 / (sd * math.sqrt(2.0))) if sd else 1.0
    return out


def random_pick(stored: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` stored runs drawn uniformly without replacement (the baseline allocation)."""
    idx = np.random.default_rng([seed, 1]).choice(len(stored), size=n, replace=False)
    return stored.iloc[np.sort(idx)]


def figures(
    law: SurfaceLaw | None, ref: SurfaceLaw | None, target: Mapping[str, float]
) -> dict[str, Any]:
    """Exponent, its interval and the target-LR error (log2) of ``law`` against ``ref``."""
    if law is None:
        return {
            "exponent": None,
            "exponent_ci": None,
            "lr_target": None,
            "lr_target_log2_error": None,
        }
    # in logs: a wild fit (exponent 8.8e5 from 16 random width_sp runs) overflows exp()
    log_lr = law.log_predict(target)
    lr = math.exp(log_lr) if log_lr < math.log(sys.float_info.max) else None
    err = None if ref is None else (log_lr - ref.log_predict(target)) / math.log(2.0)
    ci = law.exponents_ci.get("n_params")
    return {
        "exponent": law.exponents["n_params"],
        "exponent_ci": list(ci) if ci else None,
        "lr_target": lr,
        "lr_target_log2_error": err,
        "converged": not any(n.startswith("the surface fit did not converge") for n in law.notes),
    }


def one_replay(
    stored: pd.DataFrame, fraction: float, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One replay seed at one budget, with its random-allocation baseline."""
    budget = max(1, math.floor(fraction * len(stored) + 1e-9))
    ref = fit(stored, args.boot, dense=True)
    if args.design != "planner":
        if ref is None:
            _fail(f"--design {args.design} needs the reference fit, which failed")
        window = WINDOW if args.design == "oracle-windowed" else None
        try:
            design = oracle_design(stored, ref, budget, window, args.design == "oracle-cost")
        except ValueError as e:  # (a budget below the design's start)
            _fail(f"--design {args.design}: {e}")
        used, stop = replay_design(stored, design, seed, args.every_seed), args.design
    else:
        used, stop = replay(stored, budget, seed, args.workers, args.stop_ratio or None,
                            args.confirm_runs, args.per_run)  # fmt: skip
    target = {"n_params": al.default_target(al.cells_from_runs(stored))["n_params"]}
    out: dict[str, Any] = {
        "seed": seed,
        "runs_used": len(used),
        "runs_total": len(stored),
        "core_seconds_used": float(used["wall_s"].sum()),
        "core_seconds_total": float(stored["wall_s"].sum()),
        "stop": stop,
        **figures(fit(used, args.boot), ref, target),
        "exponent_reference": None if ref is None else ref.exponents["n_params"],
        "exponent_reference_ci": None
        if ref is None
        else list(ref.exponents_ci.get("n_params", ())),
        "runs_per_cell": {str(k): int(v) for k, v in used.groupby("cell").size().items()},
        **predicted(used, stored, ref),
    }
    rnd = random_pick(stored, len(used), seed)
    r = figures(fit(rnd, 0), ref, target)
    out["random"] = {
        "exponent": r["exponent"],
        "lr_target_log2_error": r["lr_target_log2_error"],
        "core_seconds_used": float(rnd["wall_s"].sum()),
        **predicted(rnd, stored, ref),
    }
    return out


def _start_short(stored: pd.DataFrame, fraction: float) -> str:
    """Why a budget of ``fraction`` of ``stored`` cannot start every cell (3 LRs each, as the
    planner starts them; the law sampler's ``validate`` refuses such a budget), "" when it can."""
    budget = max(1, math.floor(fraction * len(stored) + 1e-9))
    n_cells = int(stored["cell"].nunique())
    need = al.START_LRS * n_cells
    if budget >= need:
        return ""
    return (
        f"a budget of {fraction:g} is {budget} of the {len(stored)} stored runs, fewer than the "
        f"{need} that start every cell ({al.START_LRS} LRs x {n_cells} cells): some cells get "
        "no run"
    )


def summarise(reps: list[dict[str, Any]], fraction: float) -> dict[str, Any]:
    """Top-level figures: medians over the replay seeds (the first replay's when only one)."""

    def med(key: str, src: list[Any]) -> float | None:
        vals = [r[key] for r in src if r.get(key) is not None]
        return float(statistics.median(vals)) if vals else None

    out: dict[str, Any] = {"budget": fraction, "replay_seeds": len(reps)}
    for key in ("runs_used", "runs_total", "core_seconds_used", "core_seconds_total", "exponent",
                "exponent_reference"):  # fmt: skip
        out[key] = med(key, reps)
    out["exponent_reference_ci"] = reps[0]["exponent_reference_ci"]
    out["exponent_ci"] = reps[0]["exponent_ci"] if len(reps) == 1 else None
    errs = [abs(r["lr_target_log2_error"]) for r in reps if r["lr_target_log2_error"] is not None]
    out["lr_target_log2_error"] = (
        reps[0]["lr_target_log2_error"] if len(reps) == 1 else med("lr_target_log2_error", reps)
    )
    out["lr_target_abs_log2_error_median"] = float(statistics.median(errs)) if errs else None
    out["random_lr_target_abs_log2_error_median"] = _abs_median(
        [r["random"]["lr_target_log2_error"] for r in reps]
    )
    for key in ("predicted_target_pass", "predicted_target_pass_nested"):
        out[key] = med(key, reps)
        out[f"random_{key}"] = med(key, [r["random"] for r in reps])
    out["replays"] = reps
    return out


def _abs_median(vals: list[float | None]) -> float | None:
    v = [abs(x) for x in vals if x is not None]
    return float(statistics.median(v)) if v else None


def bars(summary: dict[str, Any], true_exponent: float | None) -> dict[str, Any]:
    """The issue's bars per replay seed: the exponent within ±0.1 of the true one (synthetic) or
    within max(0.1, half the dense fit's 95% half-width) of the dense fit, and (real sweeps) the
    target LR within 0.4 in log2; the fraction of replay seeds that pass each, and for random."""
    reps = summary["replays"]
    ci = reps[0]["exponent_reference_ci"]
    if true_exponent is not None:
        tol, centre = 0.1, None
    else:
        tol = max(0.1, 0.25 * (ci[1] - ci[0])) if ci else 0.1
        centre = reps[0]["exponent_reference"]

    def ok(exp: float | None, ref: float | None, lerr: float | None) -> bool:
        c = true_exponent if centre is None else ref
        good = exp is not None and c is not None and abs(exp - c) <= tol
        if true_exponent is None:
            good = good and lerr is not None and abs(lerr) <= 0.4
        return good

    law = [ok(r["exponent"], r["exponent_reference"], r["lr_target_log2_error"]) for r in reps]
    rnd = [ok(r["random"]["exponent"], r["exponent_reference"], r["random"]["lr_target_log2_error"])
           for r in reps]  # fmt: skip
    return {"exponent_tolerance": tol, "pass_fraction": sum(law) / len(law),
            "random_pass_fraction": sum(rnd) / len(rnd)}  # fmt: skip


def _fail(message: str) -> NoReturn:
    """An error as the parser says one: one line on stderr, exit 2."""
    print(f"bench_allocation.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class _Parser(argparse.ArgumentParser):
    """Errors in one line on stderr (no usage block), exit 2."""

    def error(self, message: str) -> Any:  # (NoReturn)
        self.exit(2, f"{self.prog}: error: {message}\n")


def main() -> int:
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", nargs="?", help="stored sweep name (not with --synthetic)")
    ap.add_argument("--storage", default=None, help="storage URL (default: the configured one)")
    ap.add_argument(
        "--budget",
        type=float,
        default=0.25,
        help="fraction of the stored runs, in (0, 1] (default: %(default)s)",
    )
    ap.add_argument(
        "--seeds", type=int, default=1, help="replay seeds 0..N-1, N >= 1 (default: %(default)s)"
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="points proposed at a time, >= 1 (default: %(default)s)",
    )
    ap.add_argument(
        "--boot",
        type=int,
        default=100,
        help="bootstrap refits of reported fits, >= 0 (default: %(default)s)",
    )
    ap.add_argument(
        "--stop-ratio",
        type=float,
        default=1.5,
        help="stop_lr_interval_ratio, > 1 (0: off; default: %(default)s)",
    )
    ap.add_argument(
        "--confirm-runs",
        type=int,
        default=al.CONFIRM_RUNS,
        help="runs at a cell's best LR before it counts as confirmed (1: off; default: "
        "%(default)s)",
    )
    ap.add_argument("--synthetic", action="store_true", help="replay on proxy_sweep ladders")
    ap.add_argument(
        "--design",
        choices=("planner", "oracle", "oracle-cost", "oracle-windowed"),
        default="planner",
        help="planner: the law sampler; oracle: its criterion with the reference law known, per "
        "run; oracle-cost: the same per core-second; oracle-windowed: per run, runs outside the "
        "reference's window worth nothing (see the module docstring; default: %(default)s)",
    )
    ap.add_argument(
        "--per-run",
        action="store_true",
        help="the planner ranks per run (every cell costs 1), not per core-second",
    )
    ap.add_argument(
        "--every-seed",
        action="store_true",
        help="with an oracle design: every stored seed at its points (not one run per point "
        "asked), so the runs' noise averages out",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument(
        "--fit",
        choices=tuple(FITS),
        default="sparse",
        help="every fit: sparse = the planner's (all runs, one curvature); auto = all runs, the "
        "curvature scaling where a Wald test finds it; ftest = the same by an F test; windowed = "
        "the surface's window, one curvature; scaled = all runs, the curvature scaling with N; "
        "default = the surface's settings (default: %(default)s)",
    )
    ap.add_argument(
        "--no-asymmetry-prior",
        action="store_true",
        help="every fit without the surface fit's prior on the cliff's asymmetry (the method "
        "before 2026-11-27, for side-by-side replays)",
    )
    args = ap.parse_args()
    if args.synthetic == bool(args.sweep):
        ap.error("give a SWEEP or --synthetic (not both)")
    if args.every_seed and args.design == "planner":
        ap.error("--every-seed needs an oracle design")
    if not 0 < args.budget <= 1:
        ap.error("--budget must be in (0, 1]")
    at_least = (
        ("--seeds", args.seeds, 1),
        ("--workers", args.workers, 1),
        ("--boot", args.boot, 0),
        ("--confirm-runs", args.confirm_runs, 1),
    )
    for name, value, low in at_least:
        if value < low:
            ap.error(f"{name} must be at least {low}, got {value}")
    if args.stop_ratio and not args.stop_ratio > 1:
        ap.error(f"--stop-ratio must be > 1 (or 0: off), got {args.stop_ratio:g}")
    real = None
    if not args.synthetic:
        try:
            real = load(args.sweep, args.storage)
        except SweeperError as e:
            ap.error(str(e))
        if real is None or real.empty:
            ap.error(f"{args.sweep}: the sweep holds no completed or diverged runs to replay")
    WINDOW_ARG[0], SCALING_ARG[0] = FITS[args.fit]
    if args.no_asymmetry_prior:
        sm.ASYMMETRY_PRIOR = None
    reps = []
    for s in range(args.seeds):
        stored = synthetic(s) if real is None else real.copy()
        short = _start_short(stored, args.budget)
        if short and s == 0:
            print(f"{ap.prog}: note: {short}", file=sys.stderr)
        try:
            reps.append(one_replay(stored, args.budget, s, args))
        except NotDense as e:
            name = "the synthetic ladder" if real is None else args.sweep
            ap.error(
                f"{name}: the stored sweep is not dense enough to replay (a replay answers each "
                f"run the plan asks from the stored runs; replay a dense grid sweep): {e}"
                + (f"; {short}" if short else "")
            )
    summary = summarise(reps, args.budget)
    summary["sweep"] = "synthetic:proxy_sweep" if args.synthetic else args.sweep
    summary["workers"] = args.workers
    summary["fit"] = args.fit
    summary["confirm_runs"] = args.confirm_runs
    summary["design"] = args.design + (" (every seed)" if args.every_seed else "")
    summary["per_run"] = args.per_run
    summary["asymmetry_prior"] = sm.ASYMMETRY_PRIOR
    true_exp = SYNTHETIC_EXPONENT if args.synthetic else None
    if true_exp is not None:
        summary["exponent_true"] = true_exp
    summary.update(bars(summary, true_exp))
    if args.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
    else:
        _print_table(summary)
    return 0


def _print_table(s: dict[str, Any]) -> None:
    print(f"{s['sweep']} budget {s['budget']}: median over {s['replay_seeds']} replay seeds")
    for key in ("runs_used", "runs_total", "core_seconds_used", "core_seconds_total", "exponent",
                "exponent_reference", "lr_target_abs_log2_error_median", "pass_fraction",
                "random_pass_fraction", "predicted_target_pass",
                "predicted_target_pass_nested"):  # fmt: skip
        print(f"  {key}: {s.get(key)}")


if __name__ == "__main__":
    raise SystemExit(main())

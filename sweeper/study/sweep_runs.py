"""A launched sweep's trials as a runs table: one row per training run (per seed), from the
``runs`` user attribute the launcher records on each Optuna trial (see :mod:`sweeper.study.sweep`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from sweeper.errors import StorageError
from sweeper.study import storage as st
from sweeper.study.runs import normalize_runs
from sweeper.study.samplers import RUNS_DONE
from sweeper.study.sweep import cell_studies, open_runs, resolve_sweep_name

__all__ = ["aggregate_runs", "load_sweep_runs"]


def aggregate_runs(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trial-level user attributes from its per-seed runs (see the module docstring)."""
    if not runs:
        return {}
    seeds = [r.get("seed") for r in runs]
    ids = [r.get("ray_trial_id") for r in runs]
    tps = [float(r.get("tokens_per_s", math.nan)) for r in runs]
    return {
        "tokens": int(sum(int(r.get("tokens", 0)) for r in runs)),
        "wall_s": float(sum(float(r.get("wall_s", 0.0)) for r in runs)),
        "tokens_per_s": float(sum(tps) / len(tps)),
        "diverged": bool(any(r.get("diverged") for r in runs)),
        "seed": seeds[0] if len(seeds) == 1 else seeds,
        "ray_trial_id": ids[0] if len(ids) == 1 else ids,
    }


_CELL_COLS = (
    "width",
    "depth",
    "heads",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "parametrization",
)
_RUN_EXTRAS = (
    "train_loss", "init_loss", "stopped", "steps", "tokens_per_s", "device", "node_ip",
    "tokens_note", "report_note",  # (a training function's run: sweeper.run.points.NOTES)
)  # fmt: skip


def _run_row(common: Mapping[str, Any], r: Mapping[str, Any]) -> dict[str, Any]:
    """The row of one finished run (a seed's record)."""
    return {
        **common,
        "loss": r.get("loss"),
        "diverged": bool(r.get("diverged", False)),
        "seed": r.get("seed"),
        "ray_trial_id": r.get("ray_trial_id"),
        "wall_s": r.get("wall_s"),
        "tokens_seen": r.get("tokens"),
        **{k: r.get(k) for k in _RUN_EXTRAS},
    }


def _point_row(common: Mapping[str, Any], t: FrozenTrial) -> dict[str, Any]:
    """The row of a trial without a finished run of its own: a trial from before per-seed
    records, one that failed or was closed, or an open one (its runs still to finish)."""
    return {
        **common,
        "loss": t.value if t.state == TrialState.COMPLETE else math.nan,
        "diverged": bool(t.user_attrs.get("diverged", False)),
        "seed": t.user_attrs.get("seed"),
        "ray_trial_id": t.user_attrs.get("ray_trial_id"),
        "wall_s": t.user_attrs.get("wall_s"),
        "tokens_seen": t.user_attrs.get("tokens"),
    }


def _open_runs(t: FrozenTrial) -> list[Mapping[str, Any]]:
    """The finished runs of an open point (its other seeds still run, or its driver was killed):
    kept on its trial and reused when it runs again (:func:`~sweeper.study.sweep.open_runs`).
    A closed trial's are left out: the relaunch queued them with its point, whose trial has
    them."""
    return list(t.user_attrs.get(RUNS_DONE) or []) if open_runs(t) else []


def load_sweep_runs(name: str, url: str | None = None) -> pd.DataFrame:
    """Every training run of a launched sweep as a runs table (``sweeper.study.runs`` columns).

    One row per run: per seed when ``seeds_per_point > 1``. WAITING trials (queued, never started)
    are left out. ``loss`` is the run's final validation loss (the last reported one for a PRUNED
    run, NaN for a run without a result); ``state`` is its Optuna trial's state. An open
    (RUNNING) point has a row for each seed that finished and one without a seed for the rest
    (its finished seeds were invisible until the point was told). Extra columns:
    ``trial_number``, ``ray_trial_id``, ``value`` (the trial's mean loss), ``tokens_seen``, the
    searched params (``warmup``, ``weight_decay``, ``beta2`` when searched) and
    ``train_loss``, ``init_loss``, ``stopped``, ``steps``, ``tokens_per_s``, ``device``,
    ``node_ip`` (where the run trained), ``heads``, ``parametrization``, and why a trial failed:
    ``last_error`` (its run's error), ``closed_by`` (a relaunch closed a trial its stopped driver
    left RUNNING), ``retries`` (Ray restarted a crashed run); ``law_reason``: why the law sampler
    chose the point.
    """
    name = resolve_sweep_name(name, url)
    row = st.get_sweep(name, url)
    if row is not None and row["kind"] != "launched":
        raise StorageError(
            f"sweep {name!r} was imported, not launched: read its runs with "
            "sweeper.study.importer.load_runs (or sweeper.runs)"
        )
    rows: list[dict[str, Any]] = []
    for s in cell_studies(name, url):
        a = s.user_attrs
        context = a.get("context")
        base = {"cell": a.get("cell"), **{k: a.get(k) for k in _CELL_COLS}, "seq_len": context}
        for t in s.get_trials(deepcopy=False):
            if t.state == TrialState.WAITING:
                continue
            common = {
                **base,
                "lr": t.params.get("lr"),
                "batch_size": t.params.get("batch_size"),
                **{k: v for k, v in t.params.items() if k not in ("lr", "batch_size")},
                "state": t.state.name,
                "trial_number": t.number,
                "value": t.value,
                "source": f"sweep:{name}",
                # why a trial FAILed: its run's error, or a relaunch closing a trial its
                # stopped driver left; how often Ray retried a crashed run
                "last_error": t.user_attrs.get("last_error"),
                "closed_by": t.user_attrs.get("closed_by"),
                "retries": t.user_attrs.get("retries"),
                # the law sampler's rule that chose the point (start, bracket, confirm, ...)
                "law_reason": t.user_attrs.get("law_reason"),
            }
            runs = t.user_attrs.get("runs") or []
            done = _open_runs(t)
            rows += [_run_row(common, r) for r in runs or done]
            if not runs:  # (the point as a whole: no run of it finished, or it is still open)
                rows.append(_point_row(common, t))
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame({c: [] for c in ("cell", "trial_number", "ray_trial_id", "value")})
    if "batch_size" in df and "seq_len" in df:
        df["batch_tokens"] = pd.to_numeric(df["batch_size"]) * pd.to_numeric(df["seq_len"])
    return normalize_runs(df)

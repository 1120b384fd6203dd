"""``sweeper validate | launch | status | trials``: study files, sweeps and their trials.

``validate`` and ``status``/``trials`` never import torch or ray; ``launch`` imports ray (through
:mod:`sweeper.run.launch`) inside the verb. Storage: ``--storage URL``, else ``$SWEEPER_STORAGE``, else
(for ``launch``) the study's ``storage``, else ``sqlite:///sweeper.db``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from sweeper.cli.numbers import positive_count
from sweeper.errors import SweeperError

__all__ = ["register"]

TRIAL_FORMATS = ("csv", "parquet", "json")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "validate",
        help="check a study file (every problem listed at once)",
        description="Check a study file and list its cells; exit 2 with one line per problem.",
    )
    p.add_argument("study", help="study file (TOML)")
    p.add_argument("--json", action="store_true", help="print the cells as JSON")
    p.add_argument(
        "--estimate",
        action="store_true",
        help="also print the study's expected cost (core-hours, wall time on this machine) from "
        "a short throughput probe of its cheapest and dearest cells (trains a few steps of each)",
    )
    p.add_argument(
        "--probe-steps", type=positive_count, metavar="N", help="steps per probe (default 12)"
    )
    p.set_defaults(func=cmd_validate)

    p = subparsers.add_parser(
        "launch",
        help="sweep every cell of a study (relaunch to resume)",
        description=(
            "One Ray Tune run over every cell of the study, one Optuna study per cell in the "
            "storage. Relaunching the same study resumes it."
        ),
    )
    p.add_argument("study", help="study file (TOML)")
    p.add_argument("--storage", metavar="URL", help="SQLAlchemy URL of the storage")
    p.add_argument("--address", metavar="ADDR", help="join this Ray cluster (default: local Ray)")
    p.add_argument("--max-concurrent", type=positive_count, metavar="N", help="live trials at most")
    p.add_argument(
        "--force-new",
        action="store_true",
        help="delete a sweep of the same name launched from a different study, then start",
    )
    p.add_argument(
        "--code-changed",
        action="store_true",
        help="continue a sweep whose model.builder or train.function code changed since its "
        "first runs, keeping them (refused without: they would be fitted as the new code's)",
    )
    p.add_argument(
        "--takeover",
        action="store_true",
        help="take the sweep from the driver that holds it, when that driver is gone but cannot "
        "be seen to be (another host, a network partition); refused while its process is alive "
        "on this host. Its RUNNING trials are closed and run again; fenced by the lease's epoch, "
        "the old driver can write nothing more and exits",
    )
    p.add_argument("--no-progress", action="store_true", help="no per-cell progress display")
    p.set_defaults(func=cmd_launch)

    p = subparsers.add_parser(
        "status",
        help="trials per cell by state, best loss and its lr/batch",
        description=(
            "Without SWEEP: every sweep in the storage, launched or imported, one a line "
            '(--json: {"sweeps": [{name, kind, created_at}]}); the status of the only one when '
            "it holds one sweep."
        ),
    )
    p.add_argument("sweep", nargs="?", help="sweep name")
    p.add_argument("--storage", metavar="URL", help="SQLAlchemy URL of the storage")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_status)

    p = subparsers.add_parser(
        "trials",
        help="export every run of a sweep with its cell metadata",
        description="One row per training run (per seed), canonical runs columns first.",
    )
    p.add_argument("sweep", help="sweep name")
    p.add_argument("--storage", metavar="URL", help="SQLAlchemy URL of the storage")
    p.add_argument("--format", choices=TRIAL_FORMATS, help="default: from -o's extension, else csv")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default, or -: stdout)")
    p.set_defaults(func=cmd_trials)


# ---- validate ----------------------------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.errors import StudyError
    from sweeper.run.estimate import cells_too_big
    from sweeper.study.ladder import cells

    try:
        spec = api.load_study(args.study)
    except StudyError as e:
        if not args.json:
            raise
        # --json answers in JSON either way: a script reads "ok", not stderr
        print(json.dumps({"study": str(args.study), "ok": False, "problems": e.problems}))
        return 2
    if args.probe_steps is not None and not args.estimate:  # (ignored in silence: an audit)
        why = "--probe-steps sets the probe of --estimate; give both"
        if not args.json:
            raise SweeperError(why)
        print(json.dumps({"study": str(args.study), "ok": False, "problems": [why]}))
        return 2
    cell_list = cells(spec)
    est = api.estimate(spec, steps=args.probe_steps) if args.estimate else None
    law = spec.sampler.kind == "law"
    target, doubts = _law_target(spec, cell_list) if law else (None, [])
    doubts += [f"cannot run on this machine: {line}" for line in cells_too_big(spec, cell_list)]
    if args.json:
        out: dict[str, Any] = {
            "study": str(args.study),
            "ok": True,
            "sweep": spec.name,
            "trials_per_cell": None if law else spec.trials_per_cell,
            "seeds_per_point": spec.sweep.seeds_per_point,
            "budget_runs": spec.sampler.budget_runs if law else None,
            "target": target,
            "warnings": doubts,
            "cells": [c.to_dict() for c in cell_list],
        }
        if est is not None:
            out["estimate"] = est.to_dict()
        print(json.dumps(out, indent=2))
        return 0
    print(f"{args.study}: ok — sweep {spec.name!r}, {_runs_line(spec, len(cell_list))}; "
          f"sampler {spec.sampler.kind}, pruner {spec.pruner.kind}, "
          f"{spec.model.parametrization}")  # fmt: skip
    if target is not None:
        print(f"  {_target_line(spec, target)}")
    for d in doubts:
        print(f"  warning: {d}")
    print(f"  {'cell':<20} {'heads':>5} {'N':>10} {'tokens':>12} {'tok/N':>7} {'FLOPs':>10}")
    for c in cell_list:
        print(
            f"  {c.name:<20} {c.heads:>5} {c.n_params:>10,} {c.tokens:>12,} "
            f"{c.tokens_per_param:>7.1f} {c.flops:>10.3g}"
        )
    if est is not None:
        _print_estimate(est)
    return 0


def _law_target(spec: Any, cell_list: list[Any]) -> tuple[dict[str, float], list[str]]:
    """The scale a law study's plan aims at, and doubts about a given one."""
    from sweeper.run.law_plan import law_target, target_warnings

    scales = {c.name: (float(c.n_params), float(c.tokens)) for c in cell_list}
    return law_target(spec, scales), target_warnings(spec, scales)


def _target_line(spec: Any, target: dict[str, float]) -> str:
    """Where a law study's plan pins the optimal LR down, and where that comes from."""
    t = spec.target
    params, tokens = (t is not None and getattr(t, k) is not None for k in ("params", "tokens"))
    whence = (
        "from [target]" if params and tokens
        else "N from [target], D the largest cell's" if params
        else "D from [target], N 10x the largest cell's" if tokens
        else "the default: 10x the largest cell's N, at its D"
    )  # fmt: skip
    return (f"target: N {target['n_params']:.3g}, D {target['tokens']:.3g} tokens ({whence}): "
            "where the plan pins the optimal LR down")  # fmt: skip


def _runs_line(spec: Any, n_cells: int) -> str:
    from sweeper.study.spec import law_cap_runs, law_max_runs

    seeds = spec.sweep.seeds_per_point
    cells_word = f"{n_cells} cell{'s' if n_cells != 1 else ''}"
    if spec.sampler.kind == "law":
        # (a point runs every seed: the budget is spent in whole points, LawPlanner's rule)
        most = min(law_max_runs(spec), law_cap_runs(spec))  # (the plan's cap: a warning)
        whole = "" if seeds == 1 else (
            f" {spec.sampler.budget_runs}, spent in whole points of {seeds} runs: "
            f"{most // seeds} points"
        )  # fmt: skip
        return (f"{cells_word}, law sampler: at most {most} training runs "
                f"(budget_runs{whole}; stops earlier when the target LR's interval ratio < "
                f"{spec.sampler.stop_lr_interval_ratio:g})")  # fmt: skip
    runs = n_cells * spec.trials_per_cell * seeds
    first = spec.sweep.first_seed
    seed_word = f"{seeds} seed(s)" + (f" from seed {first}" if first else "")
    return f"{cells_word} × {spec.trials_per_cell} trials × {seed_word} = {runs} runs"


def _print_estimate(est: Any) -> None:
    """The estimate under the cells: :func:`~sweeper.run.estimate.estimate_text`, which is also
    what ``str`` of the :class:`~sweeper.run.estimate.Estimate` shows."""
    from sweeper.run.estimate import estimate_text

    print(estimate_text(est))


# ---- launch ------------------------------------------------------------------------------------
def cmd_launch(args: argparse.Namespace) -> int:
    import warnings

    from sweeper import api

    with warnings.catch_warnings():  # (its own lines below say it)
        warnings.simplefilter("ignore", api.LaunchShort)
        s = api.launch(
            args.study,
            storage=args.storage,
            address=args.address,
            max_concurrent=args.max_concurrent,
            force_new=args.force_new,
            verbose=args.verbose,
            progress=not args.no_progress,
            takeover=args.takeover,
            code_changed=args.code_changed,
        )
    print(launch_text(s))
    if end := _ending(s):
        print(f"sweeper: {end}", file=sys.stderr)
    if s.interrupted:
        return 128 + (15 if s.interrupted == "SIGTERM" else 2)
    return 0 if s.done else 1


def launch_text(s: Any, *, ending: bool = False) -> str:
    """The summary a launch (a LaunchSummary) closes with, as ``sweeper launch`` prints it: what
    ran and how long it took, a line per cell (:func:`_cell_line`), the law sampler's progress.
    With ``ending``, the last line the command writes to stderr (interrupted, or short after
    failed runs: :func:`_ending`) follows, as Python spells the option: ``str`` of the summary,
    so that the API shows what the command prints (it showed the dataclass; an API audit)."""
    lines = [
        f"sweep {s.sweep}: {s.runs_this_launch} run(s), {s.points_this_launch} trial(s) finished "
        f"in {s.wall_s:.1f} s"
        + (f"; {s.reconciled} stale RUNNING trial(s) re-run" if s.reconciled else "")
    ]
    law = s.budget_runs is not None
    for c in s.cells:
        line = _cell_line(
            c.cell, c.runs if law else c.finished, None if law else c.target, c.failed,
            c.pruned, c.best_loss, c.best_lr, c.best_batch_size, closed=c.closed,
            waiting=c.waiting, best_runs=c.best_runs, open_runs=c.runs_open,
            running=c.running, running_text=_LEFT_RUNNING,
        )  # fmt: skip
        lines.append(f"  {line}")
    if law:
        from sweeper.study.sweep import law_progress

        lines.append(f"  {law_progress(s.runs_used, s.budget_runs, s.plan_stop)}")
    if ending and (end := _ending(s, python=True)):
        lines.append(end)
    return "\n".join(lines)


def _ending(s: Any, *, python: bool = False) -> str:
    """Why a launch stopped before its end and what to do ("" when it is done): interrupted
    (:func:`_interrupted`), or short after failed runs; ``python``: the option as the API
    spells it, and no pointer to the errors the command printed above."""
    if s.interrupted:
        return _interrupted(s)
    if s.done:
        return ""
    if python:
        return f"{s.short(' after failed runs')}; {s.fix_hint('code_changed=True')}"
    return (
        f"{s.short(' after failed runs')}; the errors are above (and in the last_error column "
        f"of `sweeper trials {s.sweep}`); {s.fix_hint('--code-changed')}"
    )


#: a launch's trials its stop left RUNNING (a launch-UX audit: the summary after SIGTERM said
#: "0/6; no complete trial" while `sweeper status` said "1 left RUNNING")
_LEFT_RUNNING = "left RUNNING (the next launch runs them again)"


def _interrupted(s: Any) -> str:
    """What an interrupted launch (a LaunchSummary) stopped, and what resumes it. A launch
    stopped while Ray started opened nothing: it has no cells, and nothing ran."""
    if not s.cells:
        return (f"interrupted ({s.interrupted}) while Ray started: nothing ran; the same "
                "command starts the sweep")  # fmt: skip
    short = s.short()
    left = sum(c.running for c in s.cells)
    again = f" (its {left} trial(s) left RUNNING run again)" if left else ""
    what = f": {short}" if short else ""
    return f"interrupted ({s.interrupted}){what}; relaunch to resume{again}"


def _cell_line(
    cell: str,
    finished: int,
    target: int | None,
    failed: int,
    pruned: int,
    best_loss: float | None,
    best_lr: float | None,
    best_batch: int | None,
    *,
    closed: int = 0,
    waiting: int = 0,
    best_runs: int = 1,
    open_runs: int = 0,
    running: int = 0,
    running_text: str = "running",
) -> str:
    from sweeper.study.sweep import failed_counts

    best = (
        f"best loss {best_loss:.4f} at lr {best_lr:.3g}, batch {best_batch} seqs"
        + (f" (mean of {best_runs} seeds)" if best_runs > 1 else "")
        if best_loss is not None and best_lr is not None
        # (finished, yet no best: every run diverged; a diff audit's all-NaN function read
        # "no complete trial" after 4 complete ones)
        else "every finished run diverged (check the LR range, or the loss your code returns)"
        if finished > pruned
        else "no complete trial"
    )
    counts = (
        *failed_counts(failed, closed),
        (pruned, "pruned"),
        (running, running_text),
        (waiting, "queued"),
        (open_runs, "run" + "s" * (open_runs != 1) + " of open points finished"),
    )
    extra = "".join(f", {n} {what}" for n, what in counts if n)
    from sweeper.run.progress import of_target

    # (target None: the law sampler, whose budget is the sweep's: ``finished`` counts runs)
    done = (
        of_target(finished, target) if target is not None
        else f"{finished} run" + "s" * (finished != 1)
    )  # fmt: skip
    return f"{cell:<20} {done}{extra}; {best}"


# ---- status ------------------------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.study import storage as st

    url = st.resolve_url(args.storage)
    name = args.sweep
    if name is None:
        # (every sweep, of any kind: an imported one beside the only launched one was not listed)
        rows = [{**r, "created_at": r["created_at"].isoformat()} for r in api.sweeps(storage=url)]
        if len(rows) != 1:
            _print_sweeps(rows, url, as_json=args.json)
            return 0
        name = rows[0]["name"]
    status = api.status(name, storage=url)
    if args.json:
        print(json.dumps(status, default=_json_default))
        return 0
    if status.get("kind") == "imported":
        _print_imported(status)
        return 0
    print(f"sweep {status['sweep']}" + _driver_text(status["driver"]))
    driven = bool(status["driver"]) and status["driver"].get("alive") is not False
    running = "running" if driven else "left RUNNING (no driver: the next launch runs them again)"
    law = status.get("law")
    for c in status["cells"]:
        print(
            "  "
            + _cell_line(
                c["cell"],
                c["runs"] if law else c["complete"] + c["pruned"],
                c["target"],
                c["failed"],
                c["pruned"],
                c["best_loss"],
                c["best_lr"],
                c["best_batch_size"],
                closed=c.get("closed", 0),
                waiting=c.get("waiting", 0),
                best_runs=c.get("best_runs", 1),
                open_runs=c.get("runs_open", 0),
                running=c["running"],
                running_text=running,
            )
        )
    if law:
        from sweeper.study.sweep import law_progress

        print(f"  {law_progress(law['runs_used'], law['budget_runs'], law['stop'])}")
    return 0


def _print_sweeps(rows: list[dict[str, Any]], url: str, *, as_json: bool) -> None:
    """The sweeps in the storage, one a line (or ``{"sweeps": [...]}``)."""
    from sweeper.study import storage as st

    if as_json:
        print(json.dumps({"sweeps": rows}))
    elif not rows:
        print(f"no sweeps in {st.safe_url(url)}")
    else:
        for r in rows:
            print(f"{r['name']:<24} {r['kind']:<9} {r['created_at']}")


def _print_imported(status: dict[str, Any]) -> None:
    """An imported sweep's cells: its runs as imported (nothing runs, nothing to launch)."""
    imp = status["imported"]
    cells = status["cells"]
    n_runs = sum(c["runs"] for c in cells)
    source = f" from {imp['file']}" if imp.get("file") else ""
    when = f" on {imp['created_at'][:10]}" if imp.get("created_at") else ""
    runs = f"{n_runs} run{'s' if n_runs != 1 else ''}"
    print(f"sweep {status['sweep']}: imported{source}{when}, {runs} in {len(cells)} "
          f"cell{'s' if len(cells) != 1 else ''} (not launched: no driver, no target)")  # fmt: skip
    for c in cells:
        counts = (c["diverged"], "diverged"), (c["failed"], "failed"), (c["pruned"], "pruned")
        extra = "".join(f", {n} {what}" for n, what in counts if n)
        if c["best_loss"] is None:
            best = "no complete run"
        else:
            best = f"best loss {c['best_loss']:.4f}"
            if c["best_lr"] is not None:
                best += f" at lr {c['best_lr']:.3g}"
            if c["best_batch_size"] is not None:
                best += f", batch {c['best_batch_size']:g} seqs"
        runs = f"{c['runs']} run{'s' if c['runs'] != 1 else ''}"
        print(f"  {c['cell']:<20} {runs}, {c['complete']} complete{extra}; {best}")


def _driver_text(driver: dict[str, Any] | None) -> str:
    if driver is None:
        return ""
    text = (
        f": run by driver {driver['host']}:{driver['pid']}, last heartbeat "
        f"{driver['heartbeat_age_s']:.0f} s ago"
    )
    if driver.get("alive") is False:
        text += f" (process {driver['pid']} is gone: the next launch takes over)"
    return text


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


# ---- trials ------------------------------------------------------------------------------------
def cmd_trials(args: argparse.Namespace) -> int:
    from sweeper import api

    if args.output == "-":  # (stdout, as "-" means to every other tool: it had written a file "-")
        args.output = None
    fmt = args.format
    if fmt is None:
        ext = Path(args.output).suffix.lower().lstrip(".") if args.output else ""
        if ext and ext not in TRIAL_FORMATS:  # (t.tsv had been CSV that import read as one column)
            raise SweeperError(
                f"trials -o {args.output}: .{ext} is not one of {', '.join(TRIAL_FORMATS)} "
                "(give --format, or a file ending in one of them)"
            )
        fmt = ext or "csv"
    if fmt == "parquet" and not args.output:
        raise SweeperError("trials: parquet needs -o FILE")
    df = api.runs(args.sweep, storage=args.storage)
    if fmt != "parquet":  # (a typed format keeps its dtypes)
        df = _whole_as_int(df)
    if fmt == "csv":
        if args.output:
            df.to_csv(args.output, index=False)
        else:
            df.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        text = df.to_json(orient="records", indent=None)
        if args.output:
            with open(args.output, "w") as f:
                f.write(text + "\n")
        else:
            print(text)
    else:
        df.to_parquet(args.output, index=False)
    if args.output:
        written = _rows_written(df)
        print(f"{written} of sweep {args.sweep} written to {args.output}", file=sys.stderr)
    return 0


def _rows_written(df: Any) -> str:
    """The rows written, as runs and the rest: a row with neither a seed nor a loss is a point
    without a finished run (failed, closed, or still running), and was counted as a run."""
    runs = int((df["seed"].notna() | df["loss"].notna()).sum()) if len(df) else 0
    other = len(df) - runs
    rest = f" and {other} row(s) of points without a finished run (failed, closed or running)"
    return f"{runs} run(s)" + (rest if other else "")


def _whole_as_int(df: Any) -> Any:
    """``df`` with its float columns whose every value is a whole number (width, depth, seed,
    n_params...) as integers, blanks kept (they were written 32.0 in CSV and JSON). Values past
    2**53 stay floats: a float holds no exact integer there."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        vals = out[col]
        if not pd.api.types.is_float_dtype(vals):
            continue
        known = vals.dropna()
        if len(known) and (known == known.round()).all() and (known.abs() < 2**53).all():
            out[col] = vals.astype("Int64")
    return out

"""Verbs ``report`` (PNG plots and an HTML page) and ``validate-transfer`` (held-out cell check)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write PNG plots and a self-contained index.html for a sweep",
        description="Loss vs LR per cell with the fitted parabola, optimum vs scale with the law, "
        "residuals, the batch surface where swept, and the tables (cells, optima, laws, recipe).",
    )
    p.add_argument("sweep", help="sweep name (launched or imported)")
    p.add_argument("-o", "--out", required=True, help="output folder")
    p.add_argument(
        "--storage", help="SQLAlchemy URL (default $SWEEPER_STORAGE or sqlite:///sweeper.db)"
    )
    p.add_argument("--method", choices=("parabola", "band"), default="parabola")
    p.add_argument(
        "--recipe-json", help="a recipe saved with `sweeper export --format json` to show"
    )
    p.add_argument(
        "--bootstrap", type=int, default=200, help="bootstrap resamples for the cell optima"
    )
    p.set_defaults(func=_report)

    t = sub.add_parser(
        "validate-transfer",
        help="refit without a held-out cell, predict it, train it at the prediction, report regret",
    )
    t.add_argument("sweep")
    t.add_argument("--holdout", default="largest", help="'largest' (default) or a cell name")
    t.add_argument("--seeds", type=int, default=2, help="seeds per trained point (default 2)")
    t.add_argument("--storage")
    t.add_argument("--method", choices=("parabola", "band"), default="parabola")
    t.add_argument("--max-concurrent", type=int)
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_validate_transfer)


def _latest_laws(sweep: str, url: str | None) -> list[Any]:
    from sweeper import storage
    from sweeper.laws import law_from_dict

    latest: dict[str, Any] = {}
    for d in storage.list_laws(sweep, url):  # ordered by id: later ones replace earlier ones
        if d["kind"] == "power":
            latest[d["target"]] = law_from_dict(d)
    return list(latest.values())


def _report(args: argparse.Namespace) -> int:
    from sweeper.errors import SweeperError
    from sweeper.fit import estimate_optima, fit_power_law
    from sweeper.importer import load_runs
    from sweeper.report import ReportInputs, write_report
    from sweeper.transfer import stored_transfer

    runs = load_runs(args.sweep, args.storage)
    optima = estimate_optima(runs, method=args.method, n_boot=args.bootstrap)
    laws = _latest_laws(args.sweep, args.storage)
    notes = []
    if not laws:
        usable = [o for o in optima if o.usable]
        if len(usable) >= 3:
            laws = [fit_power_law(usable, target="lr", predictors=("n_params",), source=args.sweep)]
            notes.append("no stored law: the LR law shown was fitted for this report only")
    recipe = None
    target_scale = None
    if args.recipe_json:
        try:
            recipe = json.loads(Path(args.recipe_json).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SweeperError(f"--recipe-json {args.recipe_json}: {e}") from None
        # the recipe's resolved scale (the target may have been given by shape or compute)
        target_scale = {
            k: float(recipe[k])
            for k in ("n_params", "tokens", "flops", "width", "depth")
            if isinstance(recipe.get(k), int | float) and recipe[k] > 0
        }
    transfer = stored_transfer(args.sweep, args.storage)
    holdout = [transfer["holdout_cell"]] if transfer else []
    holdout_law = None
    if transfer and transfer.get("law"):
        from sweeper.laws import PowerLaw, law_from_dict

        law = law_from_dict(transfer["law"])
        holdout_law = law if isinstance(law, PowerLaw) else None
        transfer = {k: v for k, v in transfer.items() if k != "law"}
    files = write_report(
        ReportInputs(
            sweep=args.sweep,
            runs=runs,
            optima=optima,
            laws=laws,
            recipe=recipe,
            transfer=transfer,
            target_scale=target_scale,
            holdout_cells=holdout,
            holdout_law=holdout_law,
        ),
        args.out,
    )
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    print(f"wrote {len(files)} files to {args.out}: " + ", ".join(f.name for f in files))
    return 0


def _validate_transfer(args: argparse.Namespace) -> int:
    from sweeper.transfer import run_transfer

    res = run_transfer(
        args.sweep,
        holdout=args.holdout,
        seeds=args.seeds,
        url=args.storage,
        method=args.method,
        max_concurrent=args.max_concurrent,
        progress=not args.json,
        verbose=args.verbose,
    )
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    c = Console()
    c.print(
        f"[bold]Transfer check of {res.sweep}[/]: held-out cell {res.holdout_cell}, "
        f"law fitted on {res.law_cells} cells (exponents "
        + ", ".join(f"{k} {v:+.3f}" for k, v in res.law_exponents.items())
        + ")"
    )
    lo, hi = res.predicted_lr_interval
    c.print(
        f"predicted lr {res.predicted_lr:.3g} (95% {lo:.3g}–{hi:.3g}); measured optimum "
        f"{res.measured_lr:.3g}; ratio {res.ratio:.3f}, log2 error {res.log2_error:+.3f}"
    )
    t = Table("point", "lr", f"loss (mean of {res.seeds} seeds)", "sd", "regret % of best swept")
    names = {
        "law": "law prediction",
        "smallest_cell": "reuse smallest cell's optimum",
        "steplaw": "Step Law (published)",
        "measured_optimum": "the cell's measured optimum",
    }
    for k, lr in res.lrs.items():
        loss = res.losses.get(k)
        reg = (
            100.0 * (loss - res.best_swept_loss) / res.best_swept_loss
            if loss is not None
            else float("nan")
        )
        t.add_row(
            names.get(k, k),
            f"{lr:.3g}",
            f"{loss:.4f}" if loss is not None else "-",
            f"{res.loss_sd.get(k, 0.0):.4f}",
            f"{reg:+.2f}",
        )
    c.print(t)
    c.print(
        f"best loss swept in the cell: {res.best_swept_loss:.4f} (the minimum over the sweep's "
        "points: biased low by seed noise)"
    )
    if res.regret_se_pct is not None or res.grid_step_log2 is not None:
        parts = []
        if res.regret_se_pct is not None:
            parts.append(
                f"the law's regret ±{res.regret_se_pct:.2f} points (1 s.e. from the seeds)"
            )
        if res.grid_step_log2 is not None:
            parts.append(f"the swept grid's step {res.grid_step_log2:.2f} in log2")
        c.print("resolution: " + "; ".join(parts))
    if res.regret_vs_optimum_pct is not None:
        c.print(
            f"law prediction against the measured optimum, same seeds: "
            f"{res.regret_vs_optimum_pct:+.2f}% of the loss"
        )
    for n in res.notes:
        c.print(f"[yellow]note:[/] {n}")
    return 0

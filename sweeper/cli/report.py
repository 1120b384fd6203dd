"""Verbs ``report`` (PNG plots and an HTML page) and ``validate-transfer`` (held-out cell check)."""

from __future__ import annotations

import argparse
import io
import json
import sys
from contextlib import nullcontext, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.cli.numbers import add_bytes_per_token, positive, positive_count
from sweeper.cli.output import literal
from sweeper.fitting.methods import (
    DEFAULT_METHOD,
    FIT_METHODS,
    METHOD_HELP,
    SURFACE_HELP,
    SURFACE_SETTINGS,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from sweeper.transfer.plan import TransferResult

__all__ = ["register"]



_TRANSFER_EPILOG = """\
regret: the mean loss over seeds at a point, over the best mean loss trained or swept in the
held-out cell (one run per LR, batch and seed; diverged seeds left out and said), minus 1, in %;
its s.e. is from the seeds' spread. log2 error: log2(LR / the cell's measured optimum, a
parabola's vertex through every run there, or its best point when not convex, said). Baselines:
reuse the smallest / the largest fitted cell's optimum, Step Law, DeepSeek and Porian published
(their arXiv ids in the table), and for muP/CompleteP the base-width optimum reused. A check
keeps its runs in sweeps named <sweep>.transfer.<cell>...; rerunning it reads them back."""

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
        "--storage",
        metavar="URL",
        help="SQLAlchemy URL (default $SWEEPER_STORAGE or sqlite:///sweeper.db)",
    )
    p.add_argument(
        "--method",
        choices=FIT_METHODS,
        default=None,
        help="show the laws fitted by this method: the latest stored (fitted for the report "
        "alone when none is); default: the latest stored law of each target, whatever its method",
    )
    p.add_argument(
        "--recipe-json", help="a recipe saved with `sweeper export --format json` to show"
    )
    p.add_argument("--params", type=positive, help="a target's N (non-embedding parameters, e.g. "
                   "7B) to mark on the law plots, with how far each law extrapolates to it "
                   "(without --recipe-json)")  # fmt: skip
    p.add_argument("--tokens", type=positive, help="the target's training tokens D (e.g. 1.4T)")
    add_bytes_per_token(p)  # (a byte-level law's page had marked --tokens 1e8 at 1e8 bytes)
    p.add_argument(
        "--bootstrap", type=int, default=200, help="bootstrap resamples for the cell optima"
    )
    p.set_defaults(func=_report)

    t = sub.add_parser(
        "validate-transfer",
        help="refit without a held-out cell, predict it, train it at the prediction, report regret",
        description="Fit the law on the fit cells, predict the held-out cell's optimal LR, and "
        "train that cell at the prediction, at each baseline and on a sqrt(2) grid around them "
        "until its best point is bracketed (a finished check is read back, not retrained).",
        epilog=_TRANSFER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("sweep")
    t.add_argument(
        "--holdout",
        default="largest",
        help="'largest' (default: the largest cell outside the fit set), a cell of the sweep, or "
        "a new cell named like the sweep's (w256-d2-t819k)",
    )
    t.add_argument(
        "--fit-cells",
        default=None,
        metavar="EXPR",
        help="the cells to fit on: comparisons on width, depth, n_params, tokens joined by "
        "commas, e.g. 'width<=64' (default: every cell but the held-out one)",
    )
    t.add_argument(
        "--seeds",
        type=int,
        default=2,
        help="seeds per trained point, at least (default 2); asking more of a check that has run "
        "adds the missing seeds beside it and trains nothing twice; a check keeps every seed it has",
    )
    t.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default $SWEEPER_STORAGE or sweeper.db)")
    t.add_argument("--method", choices=FIT_METHODS, default=DEFAULT_METHOD, help=METHOD_HELP)
    t.add_argument("--surface", choices=SURFACE_SETTINGS, default=None, help=SURFACE_HELP)
    t.add_argument(
        "--max-concurrent", type=positive_count, help="trials at once (default: what Ray fits)"
    )
    t.add_argument("--json", action="store_true", help="print the result as one JSON object on "
                   "stdout (the cost and a line per finished run go to stderr)")  # fmt: skip
    t.add_argument("--no-progress", action="store_true",
                   help="no per-run progress (as launch's)")  # fmt: skip
    t.set_defaults(func=_validate_transfer)


def _report(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.errors import SweeperError

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SweeperError(f"-o {args.out}: exists and is not a folder; name a folder to write in")
    recipe = None
    if args.recipe_json:
        try:
            recipe = json.loads(Path(args.recipe_json).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SweeperError(f"--recipe-json {args.recipe_json}: {e}") from None
    at = {k: v for k, v in (("n_params", args.params), ("tokens", args.tokens)) if v is not None}
    if at and recipe is not None:
        raise SweeperError("give --recipe-json or --params/--tokens, not both: a recipe names "
                           "its target")  # fmt: skip
    files = api.write_report(
        args.sweep,
        args.out,
        storage=args.storage,
        method=args.method,
        recipe=recipe,
        bootstrap=args.bootstrap,
        at=at or None,
        bytes_per_token=args.bytes_per_token,
    )
    print(f"wrote {len(files)} files to {args.out}: " + ", ".join(f.name for f in files))
    return 0


class _StderrLines(io.TextIOBase):
    """stderr as the stdout of a ``--json`` check while it trains: what the check and its launch
    say (the cost, each finished run's line) goes to stderr and stdout holds the JSON alone. It
    is no terminal, so the launch prints a line per finished run, never its live table."""

    def write(self, s: str) -> int:
        return sys.stderr.write(s)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return False


def _validate_transfer(args: argparse.Namespace) -> int:
    from sweeper import api

    # (with --json a check that trained for minutes had said nothing: an audit)
    to_stderr = redirect_stdout(_StderrLines()) if args.json else nullcontext()
    with to_stderr:
        res = api.validate_transfer(
            args.sweep,
            holdout=args.holdout,
            fit_cells=args.fit_cells,
            seeds=args.seeds,
            storage=args.storage,
            method=args.method,
            surface=args.surface,
            max_concurrent=args.max_concurrent,
            progress=not args.no_progress,
            verbose=args.verbose,
        )
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
        return 0
    from sweeper.cli.output import console

    c = console()
    _print_transfer_head(c, res)
    c.print(_transfer_table(res))
    _print_transfer_tail(c, res)
    return 0


def _print_transfer_head(c: Console, res: TransferResult) -> None:
    """What was held out, the law, its prediction and the cell's measured optimum."""
    from sweeper.transfer.plan import transfer_where

    where = transfer_where(vars(res))
    c.print(
        f"[bold]Transfer check of {res.sweep}[/]: held-out cell {res.holdout_cell} ({where}), "
        f"law fitted on {res.law_cells} cells (exponents "
        + ", ".join(f"{k} {v:+.3f}" for k, v in res.law_exponents.items())
        + ")"
    )
    lo, hi = res.predicted_lr_interval
    point = (
        f" (point estimate {res.predicted_lr_point:.3g})"
        if res.predicted_lr_point != res.predicted_lr
        else ""
    )
    c.print(
        f"predicted lr {res.predicted_lr:.3g}{point} (95% {lo:.3g}–{hi:.3g}); measured optimum "
        f"{res.measured_lr:.3g}; ratio {res.ratio:.3f}, log2 error {res.log2_error:+.3f}"
    )


def _transfer_table(res: TransferResult) -> Table:
    """One row per trained point (the law's, each baseline's, the optimum), by LR."""
    from rich.table import Table

    from sweeper.transfer.plan import transfer_rows

    loss = "loss (1 seed)" if res.seeds == 1 else f"loss (mean of {res.seeds} seeds)"
    t = Table("point", "lr", loss, "sd", "regret % of best", "log2 error")
    for r in transfer_rows(res.to_dict()):
        t.add_row(
            r["point"],
            f"{r['lr']:.3g}",
            f"{r['loss']:.4f}" if r["loss"] is not None else "-",
            f"{r['sd']:.4f}" if r["sd"] is not None else "-",
            f"{r['regret_pct']:+.2f}" if r["regret_pct"] is not None else "-",
            f"{r['log2_error']:+.2f}",
        )
    return t


def _print_transfer_tail(c: Console, res: TransferResult) -> None:
    """The best loss, the check's resolution, the same-seed regret and the notes."""
    c.print(
        f"best loss trained in the cell: {res.best_swept_loss:.4f} (the minimum over its points, "
        "the sweep's and this check's: biased low by seed noise)"
    )
    parts = []
    if res.regret_se_pct is not None:
        parts.append(f"the law's regret ±{res.regret_se_pct:.2f} points (1 s.e. from the seeds)")
    if res.grid_step_log2 is not None:
        parts.append(f"the trained grid's step {res.grid_step_log2:.2f} in log2")
    if parts:
        c.print("resolution: " + "; ".join(parts))
    if res.regret_vs_optimum_pct is not None:
        # (the cell's swept optimum, retrained: "the measured optimum" had named it here and
        # the parabola's optimum in the head, two LRs; a transfer audit)
        c.print(
            f"law prediction against the cell's swept optimum (lr "
            f"{res.lrs['measured_optimum']:.3g}), same seeds: "
            f"{res.regret_vs_optimum_pct:+.2f}% of the loss"
        )
    for n in res.notes:
        c.print(f"[yellow]note:[/] {literal(n)}")

"""Verbs ``import``, ``fit``, ``laws`` and ``compare``: from runs to stored, queryable laws.

Examples::

    # runs published by others (here the Step Law release; N non-embedding, bs in sequences)
    sweeper import steplaw_dense_lr_bs_loss.csv --sweep steplaw_runs \\
        --rename N=n_params --rename D=tokens --rename bs=batch_size --rename h=width \\
        --rename numl=depth --rename loss=raw_loss --rename "smooth loss=loss" --seq-len 2048
    sweeper fit steplaw_runs --method band --predictors lr=n_params,tokens \\
        --predictors batch_tokens=tokens          # the Step Law way
    sweeper fit steplaw_runs --target loss        # L(N, D) = E + A/N^α + B/D^β
    sweeper laws steplaw_runs
    sweeper laws show 1 --json
    sweeper compare steplaw_runs --params 7e9 --tokens 2e12

Heavy imports (pandas, scipy, the fitting code) happen inside the verbs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sweeper.cli.numbers import add_bytes_per_token, count, number, positive_count, seed
from sweeper.cli.output import console as _console
from sweeper.cli.output import literal, plain_text
from sweeper.errors import FitError, SweeperError
from sweeper.fitting.methods import (
    DEFAULT_METHOD,
    FIT_METHODS,
    METHOD_HELP,
    SURFACE_HELP,
    SURFACE_SETTINGS,
)
from sweeper.study.declared import KEYS

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.api import Comparison
    from sweeper.fitting.laws import Law

__all__ = ["register"]

_SCALE_VARS = ("n_params", "tokens")
_IMPORT_EPILOG = """\
example (the Step Law release: N non-embedding params, D tokens, bs in sequences of 2048):
  sweeper import steplaw_dense_lr_bs_loss.csv --sweep steplaw_runs \\
      --rename N=n_params --rename D=tokens --rename bs=batch_size --rename h=width \\
      --rename numl=depth --rename loss=raw_loss --rename "smooth loss=loss" --seq-len 2048

Required columns: n_params (non-embedding), tokens, loss (nats/token). Optional: lr, batch_size
(sequences) with seq_len, or batch_tokens; width, depth, n_params_total, flops, seed, diverged,
state, cell. Other columns are kept with the runs. Renames are applied all at once.

What the numbers mean, where they are not Sweeper's own (non-embedding N, a launched study's
units): declare it, and the laws record it, so that compare, check and export can match it, e.g.
  sweeper import runs.csv --sweep ours --convention parametrization=mup \\
      --convention base_width=256 --convention tokens=tokenizer:llama3 \\
      --convention n_params=total"""
_FIT_EPILOG = """\
Without --target, fits lr, and batch_tokens when the batch size varies within cells. Predictors
default to those of n_params and tokens that vary across the usable cells; give one list for all
targets (--predictors n_params,tokens) or one per target (--predictors lr=n_params,tokens
--predictors batch_tokens=tokens); the surface's batch law defaults to tokens alone.
--method surface (the default) fits one model to every run of every cell, the optimum's position
being the law; diverged runs bound it from above; 95% intervals from --bootstrap refits (default
200) with runs resampled within cells and the cells' scatter about the law redrawn. --method band
fits every run within --band of its cell's best loss (Step Law: OLS in log space); parabola fits
the optimum of each cell and then a weighted power law over cells. The 95% intervals of both come
from the cells: --bootstrap resamples of the cells from 7 cells on (one predictor; 8 for two),
below that the classical t interval, calibrated there; the band's too where its cells lie closer
to the law than its grid (LR or batch) can place a band optimum (their scatter then taken as the
grid's step / sqrt 12). --keep-edge is an option of the two-stage methods, --band of the band,
--huber, --unweighted and --cell-bootstrap of the parabola, --loss-points of --target loss (which
takes no --predictors); an option the fit does not use is refused. Laws are stored with their
provenance; list them with `sweeper laws`.

--json prints one object: "laws", the laws fitted (each as `sweeper laws show ID --json` gives
it), and "warnings", the fit's doubts and the targets it skipped, one string each (also printed
to stderr, as without --json)."""


def register(sub: Any) -> None:
    """Add the ``import``, ``fit``, ``laws`` and ``compare`` verbs to ``sub`` (argparse)."""
    _register_import(sub)
    _register_fit(sub)
    _register_laws_and_compare(sub)


def _register_import(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="import runs from a CSV/TSV/parquet/JSON file as a sweep",
        description="Import runs from a CSV, TSV, parquet or JSON file into the storage as a "
        "sweep.",
        epilog=_IMPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "file",
        help="file of runs, one row per run: .csv (comma- or semicolon-separated), .tsv, .txt, "
        ".parquet, .jsonl (one object per line) or .json (an array of objects)",
    )
    p.add_argument("--sweep", required=True, help="name of the new sweep")
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace an imported sweep of that name: its runs and the laws fitted to them are "
        "deleted once the file has been read (its transfer checks are kept; a launched sweep is "
        "refused)",
    )
    p.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="rename a column (repeatable; applied simultaneously)",
    )
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence of batch_size")
    p.add_argument(
        "--study",
        metavar="TOML",
        help="the study the runs were trained from (a CSV of `sweeper trials`): stored with them, "
        "with what their numbers mean, so that validate-transfer can train their cells again",
    )
    p.add_argument(
        "--convention",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what the file's numbers mean, recorded by its laws (repeatable; not with --study): "
        + "; ".join(f"{k}: {text}" for k, (_, text) in KEYS.items()),
    )
    _common(p)
    p.set_defaults(func=cmd_import)


def _register_fit(sub: Any) -> None:
    p = sub.add_parser(
        "fit",
        help="fit scaling laws of the optimal LR / batch size (or the loss law) and store them",
        description="Fit power laws of the optimum (or the loss law) to a sweep and store them.",
        epilog=_FIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "sweep",
        help="sweep name (launched or imported), or a+b: sweeps of one study on other LRs (a "
        "range extended by a second sweep), fitted together; its laws are stored as a+b",
    )
    p.add_argument("--target", choices=("lr", "batch_tokens", "loss"), default=None)
    p.add_argument(
        "--predictors",
        action="append",
        default=[],
        metavar="[TARGET=]P1,P2",
        help="predictors among n_params, tokens, flops, width, depth",
    )
    p.add_argument("--method", choices=FIT_METHODS, default=DEFAULT_METHOD, help=METHOD_HELP)
    p.add_argument("--surface", choices=SURFACE_SETTINGS, default=None, help=SURFACE_HELP)
    p.add_argument("--band", type=float, default=0.0025, help="relative loss band (0.0025=0.25%%)")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=None,
        help="law resamples, 0 or at least 40 (surface: 200, 0 for Laplace intervals; parabola, "
        "band: 1000, of the cells, t draws below 7 cells (8 with two predictors); loss: 100)",
    )
    p.add_argument(
        "--cell-bootstrap",
        type=int,
        default=None,
        help="resamples per cell optimum, 0 or at least 40 (default 200; parabola only: the "
        "surface and the band resample no cell, and refuse it)",
    )
    p.add_argument(
        "--min-runs",
        type=int,
        default=None,
        help="completed runs a cell needs (default 4; 3 under --surface planner)",
    )
    p.add_argument("--keep-edge", action="store_true", help="keep cells optimal on a range edge")
    p.add_argument("--huber", action="store_true", help="Huber-robust power-law fit")
    p.add_argument("--unweighted", action="store_true", help="do not weight cells by their CI")
    p.add_argument(
        "--loss-points", choices=("best", "all"), default="best", help="loss law: cell bests or all"
    )
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--no-store", action="store_true", help="fit and print, store nothing")
    _common(p)
    p.set_defaults(func=cmd_fit)


def _register_laws_and_compare(sub: Any) -> None:
    p = sub.add_parser(
        "laws",
        help="list stored laws (`laws [SWEEP]`) or show one (`laws show ID`)",
        description="List the stored laws, optionally of one sweep, or show one law in full.",
    )
    p.add_argument("args", nargs="*", metavar="SWEEP | show ID|NAME")
    _common(p)
    p.set_defaults(func=cmd_laws)

    p = sub.add_parser(
        "compare",
        help="fitted laws beside published ones at the sweep's cells and a target",
        description=(
            "Evaluate the sweep's stored laws and the published ones (DeepSeek, Step Law, Kaplan) "
            "at the sweep's cells and at a target; compare exponents."
        ),
    )
    p.add_argument("sweep")
    p.add_argument("--params", type=number, default=None, help="target non-embedding params N")
    p.add_argument("--tokens", type=number, default=None, help="target training tokens D")
    p.add_argument("--width", type=count, default=None, help="target d_model")
    p.add_argument("--depth", type=count, default=None, help="target layers")
    p.add_argument("--context", type=count, default=None, help="target sequence length")
    p.add_argument(
        "--vocab",
        type=positive_count,
        default=None,
        help="target vocab: its total N for the laws that count embeddings (Porian's head)",
    )
    p.add_argument(
        "--published",
        default="deepseek,steplaw,kaplan",
        help="published laws to show (comma-separated; '' for none; also porian)",
    )
    add_bytes_per_token(p)
    _common(p)
    p.set_defaults(func=cmd_compare)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default=None, metavar="URL", help="SQLAlchemy URL")
    p.add_argument("--json", action="store_true", help="print JSON")


# --- import ------------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.study.importer import rename_pairs
    from sweeper.study.runs import trained
    from sweeper.study.storage import safe_url

    renames = rename_pairs(args.rename)  # (one rule for the CLI and import_runs)
    sw = api.import_runs(
        args.file,
        sweep=args.sweep,
        renames=renames,
        seq_len=args.seq_len,
        storage=args.storage,
        study=args.study,
        conventions=args.convention,
        replace=args.replace,
    )
    runs = sw.runs()
    n, cells = len(runs), int(runs["cell"].nunique())
    n_trained = int(trained(runs).sum())
    marked = int(sw.meta.get("diverged_from_loss", 0))
    if args.json:
        out = {"sweep": sw.name, "n_rows": n, "n_trained": n_trained, "n_cells": cells,
               "storage": safe_url(sw.url)}  # fmt: skip
        _print_json({**out, "diverged_from_loss": marked} if marked else out)
    else:
        # (rows that did not train had been counted as runs, where status and trials do not:
        # "imported 92 runs" of 90 that trained; a help-text audit)
        rest = f" and {n - n_trained} row(s) of runs that did not train" if n > n_trained else ""
        extra = f"; {marked} with a nan/inf loss imported as diverged" if marked else ""
        print(
            f"imported {n_trained} runs{rest} ({cells} cells) into sweep {sw.name!r} in "
            f"{safe_url(sw.url)}" + extra
        )
    return 0


# --- fit ---------------------------------------------------------------------------------------


def cmd_fit(args: argparse.Namespace) -> int:
    import warnings

    from sweeper import api
    from sweeper.fitting._common import FitSkipped, FitWarning

    _refuse_unused(args)
    options = {
        "band": args.band,
        "n_boot": args.bootstrap,
        "min_runs": args.min_runs,
        "keep_edge": args.keep_edge,
        "huber": args.huber,
        "weighted": not args.unweighted,
        "loss_points": args.loss_points,
        "seed": args.seed,
        "surface": args.surface,
    }
    if args.cell_bootstrap is not None:
        options["cell_boot"] = args.cell_bootstrap
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FitWarning)
        laws = api.fit(
            args.sweep,
            target=args.target,
            predictors=_parse_predictors(args.predictors) or None,
            method=args.method,
            storage=args.storage,
            store=not args.no_store,
            **options,
        )
    skipped = [str(w.message) for w in caught if issubclass(w.category, FitSkipped)]
    doubts = [
        str(w.message)
        for w in caught
        if issubclass(w.category, FitWarning) and not issubclass(w.category, FitSkipped)
    ]
    for line in skipped:
        print(f"sweeper: {line}", file=sys.stderr)
    if args.json:
        # one shape whatever the count: {"laws": [...]} (it was a bare law when one was fitted);
        # the doubts too, on stderr and in the document (--json had dropped them: a fit audit)
        _print_json({"laws": [_law_json(law, args.sweep) for law in laws],
                     "warnings": [*skipped, *doubts]})  # fmt: skip
    else:
        for law in laws:
            _print_law(law, args.sweep)
    for msg in doubts:
        print(f"sweeper: warning: {msg}", file=sys.stderr)
    return 0


def _refuse_unused(args: argparse.Namespace) -> None:
    """FitError for an option given that the fit asked for does not use, where only the CLI
    knows it was given (the library's defaults are passed by every caller): --cell-bootstrap
    outside the parabola's LR and batch laws, --surface with the loss law (both had been taken
    and ignored in silence; a fit audit). The library refuses the rest (``fit_runs``)."""
    loss = args.target == "loss"
    if args.cell_bootstrap is not None and (args.method != "parabola" or loss):
        fit = "--target loss" if loss else args.method
        raise FitError(
            f"--cell-bootstrap: an option of --method parabola (resamples per cell optimum), not "
            f"of {fit}"
        )
    if args.surface is not None and loss:
        raise FitError(f"--surface {args.surface}: an option of --method surface's lr and "
                       "batch_tokens laws, not of --target loss")  # fmt: skip


def _parse_predictors(items: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``["n_params,tokens"]`` → {"": (...)}; ``["lr=n_params,tokens"]`` → {"lr": (...)}."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        target, sep, rest = item.rpartition("=")
        names = tuple(p.strip() for p in rest.split(",") if p.strip())
        if not names:
            raise FitError(f"--predictors got no predictor names in {item!r}")
        if sep and target not in ("lr", "batch_tokens"):
            raise FitError(f"--predictors: unknown target {target!r} (lr or batch_tokens)")
        out[target if sep else ""] = names
    return out


# --- laws --------------------------------------------------------------------------------------


def _show_laws(args: argparse.Namespace) -> int:
    """``laws show ID``: one stored law, whole; ``laws show NAME``: a published law set's."""
    from sweeper import api
    from sweeper.recipe.published import PUBLISHED_NAMES, published_key, published_laws

    names = "|".join(PUBLISHED_NAMES)
    what = f"a stored law's id (see `sweeper laws`) or a published name: {names}"
    if len(args.args) != 2:
        raise SweeperError(f"usage: sweeper laws show ID|NAME, with {what}")
    given = args.args[1]
    if published_key(given) in PUBLISHED_NAMES:
        found = list(published_laws(given).values())
        if args.json:
            _print_json({"laws": [law.to_dict() for law in found]})
        for law in [] if args.json else found:
            _print_law(law, f"published {law.source}")
        return 0
    try:
        law_id = int(given)
    except ValueError:
        raise SweeperError(f"laws show takes {what}; got {given!r}") from None
    law = api.law(law_id, storage=args.storage)
    if args.json:
        _print_json(law.to_dict())
    else:
        _print_law(law, law.source, created=law.created_at)
    return 0


def cmd_laws(args: argparse.Namespace) -> int:
    from sweeper import api

    # (a sweep may be named "show": `laws show` alone lists it)
    if args.args[:1] == ["show"] and (args.args[1:] or not api._holds_sweep("show", args.storage)):
        return _show_laws(args)
    if len(args.args) > 1:
        raise SweeperError(f"usage: sweeper laws [SWEEP] | laws show ID (got {args.args})")
    sweep = args.args[0] if args.args else None
    found = api.laws(sweep, storage=args.storage)
    if args.json:
        _print_json({"laws": [_law_json(law, law.source) for law in found]})
        return 0
    from sweeper.recipe.published import PUBLISHED_NAMES

    # (the README's row reads as if `laws` listed the published ones too; a laws audit)
    published = (f"published laws: {', '.join(PUBLISHED_NAMES)} (`sweeper laws show NAME`; "
                 "`--law NAME` in recommend, export and check)")  # fmt: skip
    if not found:
        print("no laws stored" + (f" for sweep {sweep!r}" if sweep else "") + "; run `sweeper fit`")
        print(published)
        return 0
    from rich.table import Table

    from sweeper.recipe.compare import law_formula

    t = Table(title="stored laws" + (f" of {sweep}" if sweep else ""),
              caption="cv err: leave-one-cell-out RMS error, in ln (0.1: about ±10%)")  # fmt: skip
    for col in ("id", "sweep", "target", "method", "law", "cells", "cv err", "created"):
        t.add_column(col, justify="right" if col in ("id", "cells", "cv err") else "left")
    for law in found:
        cv = getattr(law, "cv_error", None)
        t.add_row(
            str(law.id),
            law.source,
            law.target,
            law.method,
            law_formula(law),
            _cells_column(law),
            f"{cv:.3f}" if isinstance(cv, (int, float)) else "",
            str(law.created_at or "")[:19],
        )
    _console().print(t)
    print(published)
    return 0


def _cells_column(law: Law) -> str:
    """The ``laws`` table's cells: a loss law fitted on every run (``--loss-points all``) carries
    no cell count, only its points, which had been shown as cells (147 for 20 cells; a fit audit):
    said as runs. On each cell's best run (the default) its points are its cells."""
    n_cells = getattr(law, "n_cells", None)
    if n_cells:
        return str(n_cells)
    n_points = getattr(law, "n_points", None)
    if not n_points:
        return ""
    return f"{n_points} runs" if law.method.endswith("/all") else str(n_points)


# --- compare -----------------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.errors import TargetError

    at = {
        k: v
        for k, v in (
            ("n_params", args.params),
            ("tokens", args.tokens),
            ("width", args.width),
            ("depth", args.depth),
            ("context", args.context),
            ("vocab", args.vocab),
        )
        if v is not None
    }
    if at and "tokens" not in at:
        raise TargetError("a target needs --tokens (with --params, or --width and --depth)")
    if at and "n_params" not in at and not {"width", "depth"} <= set(at):
        # (the library's "give n_params, or width and depth" had named no flag, a verbs audit)
        raise TargetError("a target needs --params, or --width and --depth (with --tokens)")
    published = [s.strip() for s in args.published.split(",") if s.strip()]
    c = api.compare(
        args.sweep,
        at=at or None,
        published=published,
        storage=args.storage,
        bytes_per_token=args.bytes_per_token,
    )
    if args.json:
        from sweeper.recipe.compare import law_label

        _print_json(
            {
                "sweep": args.sweep,
                "laws": [{"label": law_label(law), **_law_json(law, law.source)} for law in c.laws],
                "exponents": c.exponents.to_dict(orient="records"),
                "predictions": c.predictions.to_dict(orient="records"),
                "notes": list(c.notes),
            }
        )
        return 0
    _print_compared(c)
    return 0


def _print_compared(c: Comparison, console: Any = None) -> None:
    """``sweeper compare``'s output on ``console`` (default: the CLI's, :func:`_console`): the
    tables (:func:`_print_comparison`), then the notes on what the laws measured apart."""
    con = console or _console()
    _print_comparison(c.sweep, list(c.laws), c.exponents, c.predictions, con)
    for note in c.notes:
        con.print(f"note: {literal(note)}")


def comparison_text(c: Comparison) -> str:
    """What :func:`_print_compared` prints, as text without colour: ``str`` of a
    :class:`~sweeper.api.Comparison` (it had printed the dataclass, its tables as pandas'
    text; an API audit)."""
    return plain_text(lambda con: _print_compared(c, con))


# --- output ------------------------------------------------------------------------------------


def _law_json(law: Law, sweep: str) -> dict[str, Any]:
    from sweeper.fitting.laws import PowerLaw

    d = law.to_dict(include_samples=False) if isinstance(law, PowerLaw) else law.to_dict()
    d["sweep"] = sweep
    return d


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf → null, numpy scalars → Python, tuples → lists."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _print_json(obj: Any) -> None:
    print(json.dumps(_clean(obj), indent=2, default=str))


def _fmt(v: float | None, digits: int = 3) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.{digits}g}"


def _ci(ci: Sequence[float | None] | None, digits: int = 3) -> str:
    """``[low, high]``; a bound that is missing or not finite is unbounded (``[0, ∞)``), not
    left blank."""
    if not ci:
        return ""
    lo, hi = ci[0], ci[1]
    left = f"[{_fmt(lo, digits)}" if lo is not None and math.isfinite(lo) else "(-∞"
    right = f"{_fmt(hi, digits)}]" if hi is not None and math.isfinite(hi) else "∞)"
    return f"{left}, {right}"


def _scatter_row(law: Any) -> tuple[str, str, str]:
    """How far the cells lie from the law. For a surface law that is τ, the cells' scatter beyond
    their optima's own errors (REML), 0 when those errors explain it all: it read "residual std
    0.000" beside a leave-one-cell-out error of 0.307, as if the fit were exact."""
    value = f"{law.residual_std:.3f} ln"
    if law.method != "surface":
        return "residual std", value, ""
    note = "none beyond the optima's own errors" if law.residual_std <= 1e-3 else ""
    return "cells' scatter about the law (τ)", value, note


def _print_law(law: Law, sweep: str, *, created: str | None = None) -> None:
    from rich.table import Table

    from sweeper.fitting.laws import LossLaw, PowerLaw, formula

    published = law.method == "published"  # (the paper's values: no interval, cells or scatter)
    ident = "" if published else f" #{law.id}" if law.id is not None else " (not stored)"
    method = "" if published else f" ({law.method})"
    t = Table(title=f"{law.target} law{ident} of {sweep}{method}", show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_column("95% interval", justify="right")
    # (every form with its constants: Kaplan's c0 and c1 were in --json alone, a laws audit)
    t.add_row("formula", literal(f"{law.target} = {formula(law)}"), "")
    notes: Sequence[str] = ()
    if isinstance(law, PowerLaw) and published:
        # (none carried: Step Law's repository does publish bootstrap fits, a laws audit)
        t.add_row("prefactor", _fmt(law.prefactor, 4), "none carried (point law)")
        for p in law.predictors:
            t.add_row(f"exponent of {p}", _fmt(law.exponents[p], 4), "none carried (point law)")
    elif isinstance(law, PowerLaw):
        t.add_row("prefactor", _fmt(law.prefactor, 4), _ci(law.prefactor_ci, 4))
        for p in law.predictors:
            unsigned = " (sign not determined)" if law.sign_undetermined(p) else ""
            t.add_row(
                f"exponent of {p}",
                _fmt(law.exponents[p], 4),
                _ci(law.exponents_ci.get(p), 4) + unsigned,
            )
        t.add_row("cells (points)", f"{law.n_cells} ({law.n_points})", "")
        if law.cv_error is not None:
            t.add_row("leave-one-cell-out error", f"{law.cv_error:.3f} ln", "")
        if law.holdout_error is not None:
            t.add_row("leave-largest-out error", f"{law.holdout_error:.3f} ln", "")
        t.add_row(*_scatter_row(law))
        if law.loss_curvature is not None:
            t.add_row("loss curvature", _fmt(law.loss_curvature), "")
        notes = law.notes
    elif isinstance(law, LossLaw):
        for k in ("E", "A", "B", "alpha", "beta"):
            t.add_row(k, _fmt(getattr(law, k), 4), _ci(law.ci.get(k), 4))
        t.add_row("points", str(law.n_points), "")
        for c in (1e21, 1e23, 1e25):
            n, d = law.compute_optimal(c)
            t.add_row(f"compute-optimal at 6ND={c:.0e}", f"N={n:.3g} D={d:.3g}", f"D/N={d / n:.3g}")
    for p, (lo, hi) in law.domain.items():
        if p in law.predictors:  # the held ranges are in the conventions line
            t.add_row(f"domain of {p}", f"{lo:.3g} - {hi:.3g}", "")
    if law.parametrization:
        t.add_row("parametrization", str(law.parametrization), "")
    if created:
        t.add_row("created", str(created)[:19], "")
    con = _console()
    con.print(t)
    conv = law.conventions.to_json()
    shown = {k: v for k, v in conv.items() if k not in ("held", "held_fixed") and v is not None}
    con.print(literal("  conventions: " + "; ".join(f"{k}: {v}" for k, v in shown.items())))
    if law.conventions.held_text:
        con.print(f"  {literal(law.conventions.held_text)}")
    for note in notes:
        con.print(f"  note: {literal(note)}")


#: what the bracketed intervals of compare's tables are (an import audit read a cell's measured
#: optimum outside them as the law failing there)
_INTERVAL_CAPTION = (
    "\\[low, high]: the law's 95% interval on its line, not on one cell's optimum, which also "
    "scatters about the law"
)


def _points_title(target: str, g: pd.DataFrame) -> str:
    """The title of a target's table: "at the cells and the target" only with a target row (it
    had said so without one, a verbs audit)."""
    where = "the cells and the target" if (g["point"] == "target").any() else "the cells"
    return f"{target} at {where}"


def _measured_caption(g: pd.DataFrame) -> str:
    """The table's caption: what its measured column is (a surface law's own cell optima or a
    per-cell estimate: they can differ), then what its intervals are."""
    measured = "measured_by" in g and g["measured"].notna().any()
    by = g["measured_by"].iloc[0] if measured else ""
    return (f"measured: {by}; " if by else "") + _INTERVAL_CAPTION


def _print_comparison(
    sweep: str, laws: Sequence[Law], exps: pd.DataFrame, pred: pd.DataFrame, console: Any = None
) -> None:
    """The laws, the fitted exponents beside the published ones, and a table per target of the
    laws' values at the cells (and the target), on ``console`` (default: the CLI's)."""
    from rich.table import Table

    from sweeper.recipe.compare import law_formula, law_label

    con = console or _console()
    t = Table(title=f"laws compared with {sweep}")
    for col in ("target", "law", "formula (95% intervals)", "domain"):
        t.add_column(col)
    for law in laws:
        dom = ", ".join(
            f"{p} {lo:.2g}-{hi:.2g}" for p, (lo, hi) in law.domain.items() if p in law.predictors
        )
        t.add_row(law.target, law_label(law), law_formula(law), dom)
    con.print(t)
    if not exps.empty:
        t = Table(title="fitted exponents vs published")
        for col in ("target", "predictor", "fitted law", "fitted", "95% interval", "published", ""):
            t.add_column(col)
        for r in exps.itertuples(index=False):
            t.add_row(
                r.target,
                r.predictor,
                r.law,
                _fmt(r.fitted),
                _ci((r.low, r.high)),
                f"{r.published} {_fmt(r.published_value)}",
                r.apart if not r.comparable else "inside" if r.inside else "OUTSIDE",
            )
        con.print(t)
    notes: set[str] = set()
    for target, g in pred.groupby("target", sort=False):
        labels = list(dict.fromkeys(g["law"]))
        t = Table(title=_points_title(str(target), g), caption=_measured_caption(g))
        t.add_column("point")
        t.add_column("measured", justify="right")
        for lab in labels:
            t.add_column(lab, justify="right")
        for point, h in g.groupby("point", sort=False):
            by = {r.law: r for r in h.itertuples(index=False)}
            measured = h["measured"].iloc[0]
            cells = [str(point), _fmt(measured)]
            for lab in labels:
                r = by.get(lab)
                if r is None or not math.isfinite(r.value):
                    cells.append("n/a")
                    continue
                s = _fmt(r.value)
                if r.low != r.high:
                    s += f" {_ci((r.low, r.high), 2)}"
                if r.undetermined:
                    s += " undetermined"
                if r.extrapolation > 1.5:
                    s += f" (×{r.extrapolation:.3g} {r.side})"
                cells.append(s)
                if r.note:
                    notes.add(f"{lab}: {r.note}")
            t.add_row(*cells)
        con.print(t)
    for note in sorted(notes):
        con.print(f"  note: {literal(note)}")

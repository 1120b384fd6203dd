"""Verbs ``coord-check`` and ``diff``: does muP take on my model, and is my change different?

Examples::

    sweeper coord-check studies/adapters/own_hf_llama.toml -o coord/      # RMS per role across widths
    sweeper diff qknorm_off qknorm_on --json                      # B against A, with intervals
    sweeper diff adamw muon --params 1e9 --tokens 2e10 --plot diff.png

torch (coord-check) and the fitting code (diff) are imported inside the verbs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from sweeper.cli.numbers import counts, positive, positive_count, seed
from sweeper.fitting.methods import DIFF_METHODS

__all__ = ["register"]

_DIFF_EPILOG = """\
Both sweeps are fitted with the same method, options and predictors (--predictors, else the scale
variables both sweeps' cells vary). Differences are B minus A; ratios B over A. Intervals: 95%
percentile intervals of the fits' own resamples, and Bonferroni-corrected ones (level 1 - 0.05/m
over the m quantities compared, which need --bootstrap 2m/0.05 at least: 240 for 6); the two
sweeps are indistinguishable when no corrected interval excludes 0 (1 for a ratio). The target
defaults to the largest cell of the two sweeps; a law on FLOPs is evaluated at the FLOPs of
--params and --tokens (and --width/--depth: else a shape inferred from N); no ratio is given
when the two sweeps count N, D or FLOPs differently."""


def register(sub: Any) -> None:
    """Add the ``coord-check`` and ``diff`` verbs to ``sub`` (argparse)."""
    _register_coord_check(sub)
    _register_diff(sub)


def _register_coord_check(sub: Any) -> None:
    p = sub.add_parser(
        "coord-check",
        help="activations' RMS across widths after a few steps (does muP take?)",
        description="Train the study's model a few steps at each width of its ladder, for "
        "several seeds, and print the RMS of the embedding, hidden and readout activations and "
        "of the logits' change, averaged over the seeds, with the slope against width (flat "
        "under a working muP).",
        epilog=_COORD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("study", help="study TOML file")
    p.add_argument(
        "--widths", type=counts, default=None, help="comma-separated widths (default: the ladder's)"
    )
    p.add_argument(
        "--depth", type=positive_count, default=None, help="depth (default: the ladder's smallest)"
    )
    p.add_argument(
        "--steps", type=positive_count, default=5, help="optimizer steps before measuring"
    )
    p.add_argument(
        "--lr", type=positive, default=None, help="LR (default: the middle of the study's)"
    )
    p.add_argument(
        "--parametrization",
        choices=("sp", "mup", "completep"),
        default=None,
        help="check under this parametrization instead of the study's (to compare)",
    )
    p.add_argument("--batch-size", type=positive_count, default=8)
    p.add_argument("--seed", type=seed, default=0, help="the first seed (default 0)")
    p.add_argument(
        "--seeds",
        type=positive_count,
        default=None,
        help="seeds averaged: --seed, --seed + 1, ... (default 3; one seed misjudges)",
    )
    p.add_argument("-o", "--out", default=None, help="folder for coord_check.png and .json")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_coord_check)


_COORD_EPILOG = """\
A quantity is width-unstable when its slope (log of the seed-averaged RMS against log width)
is beyond +-0.2 by more than 2 of its seed-to-seed standard errors, or when its seed-averaged RMS
varies across the widths by more than 2x (max/min; or more than (widest/narrowest)^0.2 where
that is larger, from 32x widths on). Exit status: 0 when judged (stable or not;
read "stable" or the verdict line), 3 when a run diverged (a non-finite activation or probe loss,
or a probe loss 1 nat above its initial value): nothing is judged, lower --lr."""

#: coord-check's exit status when a run diverged: the check judged nothing
COORD_DIVERGED_EXIT = 3


def _register_diff(sub: Any) -> None:
    d = sub.add_parser(
        "diff",
        help="is sweep B's law different from sweep A's? (exponents, LR at a target, losses)",
        description="Fit two sweeps the same way and compare B with A: exponent differences, the "
        "ratio of the predicted optimal LR (and batch) at a target, the best-loss difference per "
        "shared cell, with intervals; says first whether the law moved and whether the best "
        "loss differs.",
        epilog=_DIFF_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("sweep_a", help="the reference sweep (a+b: several, fitted together)")
    d.add_argument("sweep_b", help="the sweep with the change (a+b likewise)")
    d.add_argument("--storage", default=None, metavar="URL", help="SQLAlchemy URL of the storage")
    d.add_argument("--target", default="lr", choices=("lr",), help="the law compared (lr)")
    d.add_argument("--method", default=DIFF_METHODS[0], choices=DIFF_METHODS)
    d.add_argument(
        "--predictors",
        default=None,
        help="comma-separated, e.g. n_params,tokens, for both laws (default: the scale variables "
        "both sweeps' cells vary)",
    )
    d.add_argument(
        "--params", type=positive, default=None, help="target N, as both sweeps count it"
    )
    d.add_argument("--tokens", type=positive, default=None, help="target D")
    d.add_argument(
        "--width",
        type=positive_count,
        default=None,
        help="target d_model, with --depth: the shape a law on width, depth or FLOPs reads "
        "(default: the largest cell's; with --params alone, inferred from N)",
    )
    d.add_argument("--depth", type=positive_count, default=None, help="target layers")
    d.add_argument(
        "--bootstrap",
        type=int,
        default=4000,
        help="resamples per law, all used (at least 80, and 2m/0.05 for m quantities compared)",
    )
    d.add_argument("--cell-bootstrap", type=int, default=200, help="resamples per cell optimum")
    d.add_argument("--seed", type=seed, default=0)
    d.add_argument(
        "--keep-edge",
        action="store_true",
        help="keep cells whose best LR is on the grid's edge (in both fits)",
    )
    d.add_argument("--plot", default=None, help="write a PNG of both laws and every interval")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_diff)


def cmd_coord_check(args: argparse.Namespace) -> int:
    from sweeper import api

    res = api.coord_check(
        args.study,
        widths=args.widths or None,
        depth=args.depth,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        seeds=args.seeds,
        parametrization=args.parametrization,
    )
    code = COORD_DIVERGED_EXIT if res["verdict"] == "diverged" else 0
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "coord_check.json").write_text(json.dumps(res, indent=1, allow_nan=False))
        _plot_coord(res, out / "coord_check.png")
        res["files"] = [str(out / "coord_check.json"), str(out / "coord_check.png")]
    if args.json:
        print(json.dumps(res, allow_nan=False))
        return code
    _print_coord(res)
    return code


def _num(v: float | None, fmt: str) -> str:
    return "nan" if v is None else format(v, fmt)


def _print_coord(res: dict[str, Any]) -> None:
    seeds = res["seeds"]
    which = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}, averaged"
    print(
        f"coord check of {res['study']}: {res['model']}, {res['parametrization']} "
        f"(base width {res['base_width']}), depth {res['depth']}, {res['steps']} steps at lr "
        f"{res['lr']:.3g} ({res['optimizer']}), {which}"
    )
    qs = list(res["slopes"])
    print(f"  {'width':>7}  " + "  ".join(f"{q:>12}" for q in qs))
    for r in res["rows"]:
        print(f"  {r['width']:>7}  " + "  ".join(f"{_num(r['rms'].get(q), '.4g'):>12}" for q in qs))
    print(f"  {'slope':>7}  " + "  ".join(f"{_num(res['slopes'][q], '+.3f'):>12}" for q in qs))
    if len(seeds) > 1:
        se = "  ".join(f"{_num(res['slope_se'][q], '.3f'):>12}" for q in qs)
        print(f"  {'± s.e.':>7}  {se}")
    print(f"  {'max/min':>7}  " + "  ".join(f"{_num(res['ratios'][q], '.2f'):>12}" for q in qs))
    bound = f"|d log RMS / d log width| <= {res['stable_slope']}"
    ratio = f"max/min RMS across widths <= {res['stable_ratio']:g}"
    within = (
        f" (beyond it by no more than {res['slope_z']:g} standard errors over {len(seeds)} seeds)"
        if len(seeds) > 1
        else ""
    )
    if res["verdict"] == "diverged":
        print(f"  DIVERGED, not judged: {res['notes'][0]}")
    elif res["stable"]:
        print(f"  width-stable: {bound} for every quantity{within}, and {ratio}")
    else:
        fails = []
        se = res["slope_se"]
        if res["unstable_slope"]:
            each = [
                f"{q} ({res['slopes'][q]:+.2f}"
                + (f" ± {se[q]:.2f})" if se.get(q) is not None else ")")
                for q in res["unstable_slope"]
            ]
            fails.append(f"{bound} fails for {', '.join(each)}")
        if res["unstable_ratio"]:
            each = [f"{q} ({res['ratios'][q]:.2f})" for q in res["unstable_ratio"]]
            fails.append(f"{ratio} fails for {', '.join(each)}")
        print(f"  NOT width-stable: {'; '.join(fails)}")
    for note in res.get("notes", [])[1 if res["verdict"] == "diverged" else 0 :]:
        print(f"  note: {note}")
    for f in res.get("files", []):
        print(f"  wrote {f}")


def _plot_coord(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    widths = [r["width"] for r in res["rows"]]
    for q, slope in res["slopes"].items():
        ys = [r["rms"].get(q) for r in res["rows"]]
        ys = [math.nan if y is None else y for y in ys]
        ax.plot(widths, ys, "o-", label=f"{q} (slope {_num(slope, '+.2f')})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("width")
    ax.set_ylabel(f"activation RMS after {res['steps']} steps (mean of {len(res['seeds'])} seeds)")
    ax.set_title(
        f"{res['study']}: {res['parametrization']}, lr {res['lr']:.2g}: {res['verdict']}",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_diff(args: argparse.Namespace) -> int:
    import warnings

    from sweeper import api
    from sweeper.fitting._common import FitWarning

    preds = [p.strip() for p in args.predictors.split(",")] if args.predictors else None
    plot = _plot_path(args.plot) if args.plot else None  # (checked before the fits' minutes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        res = api.diff(
            args.sweep_a,
            args.sweep_b,
            method=args.method,
            predictors=preds,
            params=args.params,
            tokens=args.tokens,
            width=args.width,
            depth=args.depth,
            storage=args.storage,
            n_boot=args.bootstrap,
            cell_boot=args.cell_bootstrap,
            seed=args.seed,
            keep_edge=args.keep_edge,
        )
    out = res.to_json()
    out["keep_edge"] = args.keep_edge
    if plot is not None:
        _plot_diff(res, plot)
        out["plot"] = str(plot)
    if args.json:
        print(json.dumps(out))
        return 0
    _print_diff(res)
    if plot is not None:  # (only --json had said where: a help-text audit)
        print(f"wrote {plot}")
    return 0


def _print_diff(res: Any) -> None:
    """The diff as text (:meth:`~sweeper.fitting.diff.DiffResult.lines`), its notes on stderr."""
    for line in res.lines():
        print(line)
    for n in res.notes:
        print(f"  note: {n}", file=sys.stderr)


#: the image formats --plot writes (the suffix chooses; none: PNG)
_PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _plot_path(text: str) -> Path:
    """``--plot``'s file, as it will be written: PNG without a suffix; SweeperError for another
    suffix, a directory or a missing folder (a robustness audit: 'p.txt' failed in matplotlib
    after the fits, 'pp' was written as pp.png and reported as pp)."""
    from sweeper.errors import SweeperError

    path = Path(text)
    if path.is_dir():
        raise SweeperError(f"--plot {text}: a folder; give a file name in it")
    if path.suffix == "":
        path = path.with_suffix(".png")
    if path.suffix.lower() not in _PLOT_SUFFIXES:
        raise SweeperError(f"--plot {text}: write a {', '.join(_PLOT_SUFFIXES)} file")
    if path.is_dir() or not path.parent.is_dir():
        raise SweeperError(f"--plot {text}: not a file in an existing folder")
    return path


def _plot_diff(res: Any, path: Path) -> None:
    """Both LR laws, then every compared quantity with its intervals: the laws' quantities and
    the best-loss differences on panels of their own (on one axis, an audit's ±0.3-nat loss
    differences, the ones that decided the verdict, hid under a ±60 ln-ratio interval)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    items = res.quantities()
    losses = [q for q in items if q[0].startswith("best loss")]
    laws = [q for q in items if not q[0].startswith("best loss")]
    fig = Figure(figsize=(5.5 * (2 + bool(losses)), 4.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2 + bool(losses), squeeze=False)[0]
    _draw_diff_laws(axes[0], res)
    verdict = "the law moved" if res.law_moved else "the law not shown to move"
    _draw_intervals(axes[1], laws, f"B = {res.b}\nminus A = {res.a}: {verdict}\n"
                    "(thick: 95%; thin: corrected; red: excludes the null)")  # fmt: skip
    if losses:
        _draw_intervals(axes[2], losses, "best loss, B - A (nats)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _draw_diff_laws(ax: Any, res: Any) -> None:
    import numpy as np

    la, lb = res.laws
    pred = la.predictors[0]
    lo, hi = la.domain.get(pred, (1.0, 10.0))
    lo2, hi2 = lb.domain.get(pred, (lo, hi))
    xs = np.geomspace(min(lo, lo2) / 1.5, max(hi, hi2, res.target.get(pred, hi)) * 1.5, 50)
    for law, name, c in ((la, res.a, "C0"), (lb, res.b, "C1")):
        ys = [law.predict({**dict(res.target), pred: x}) for x in xs]
        e = law.exponents.get(pred, math.nan)
        ax.plot(xs, ys, color=c, label=f"{name}: lr* ∝ {pred}^{e:+.3f}")
    if res.target_lr_ratio is not None:  # (refused: one target would be two models)
        ax.axvline(res.target.get(pred, hi), color="gray", ls=":", lw=1)
    else:
        ax.set_title(f"no ratio at one {pred}: {res.target_refused}"[:90], fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(pred)
    ax.set_ylabel("optimal lr (law)")
    ax.legend(fontsize=8)


def _draw_intervals(ax: Any, items: list[tuple[str, Any]], title: str) -> None:
    """Each (name, Estimate) as its value, 95% interval (thick, red when the corrected one
    excludes the null) and corrected interval (thin); a ratio as its natural log."""
    labels = []
    for i, (name, e) in enumerate(items):
        v, (l1, h1), (l2, h2) = e.value, e.ci, e.ci_corrected
        if e.null == 1.0:  # a ratio: drawn as its log, so that no change is 0 as for the rest
            v, l1, h1, l2, h2 = (math.log(x) if x > 0 else -math.inf for x in (v, l1, h1, l2, h2))
            name = f"ln {name}"
        labels.append(name)
        ax.plot([l2, h2], [i, i], color="gray", lw=1)
        ax.plot([l1, h1], [i, i], color="C3" if e.excludes_null else "C0", lw=3)
        ax.plot([v], [i], "ko", ms=3, zorder=3)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(items)), labels, fontsize=7)
    ax.set_title(title, fontsize=8)

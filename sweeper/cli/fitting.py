"""Verbs ``import``, ``fit``, ``laws`` and ``compare``: from runs to stored, queryable laws.

Examples::

    # runs published by others (here the Step Law release; N non-embedding, bs in sequences)
    sweeper import steplaw_dense_lr_bs_loss.csv --sweep steplaw \\
        --rename N=n_params --rename D=tokens --rename bs=batch_size --rename h=width \\
        --rename numl=depth --rename loss=raw_loss --rename "smooth loss=loss" --seq-len 2048
    sweeper fit steplaw --method band --predictors lr=n_params,tokens \\
        --predictors batch_tokens=tokens          # the Step Law way
    sweeper fit steplaw --target loss             # L(N, D) = E + A/N^α + B/D^β
    sweeper laws steplaw
    sweeper laws show 1 --json
    sweeper compare steplaw --params 7e9 --tokens 2e12

Heavy imports (pandas, scipy, the fitting code) happen inside the verbs.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sweeper.errors import FitError, SweeperError

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.fit.optimum import CellOptimum
    from sweeper.laws import Law

__all__ = ["register"]

_SCALE_VARS = ("n_params", "tokens")
_IMPORT_EPILOG = """\
example (the Step Law release: N non-embedding params, D tokens, bs in sequences of 2048):
  sweeper import steplaw_dense_lr_bs_loss.csv --sweep steplaw \\
      --rename N=n_params --rename D=tokens --rename bs=batch_size --rename h=width \\
      --rename numl=depth --rename loss=raw_loss --rename "smooth loss=loss" --seq-len 2048

Required columns: n_params (non-embedding), tokens, loss (nats/token). Optional: lr, batch_size
(sequences) with seq_len, or batch_tokens; width, depth, n_params_total, flops, seed, diverged,
state, cell. Other columns are kept with the runs. Renames are applied all at once."""
_FIT_EPILOG = """\
Without --target, fits lr, and batch_tokens when the batch size varies within cells. Predictors
default to those of n_params and tokens that vary across the usable cells; give one list for all
targets (--predictors n_params,tokens) or one per target (--predictors lr=n_params,tokens
--predictors batch_tokens=tokens). --method band fits every run within --band of its cell's best
loss (Step Law: OLS in log space on --bootstrap resamples, mean coefficients); parabola fits the
optimum of each cell and then a weighted power law over cells, its 95% intervals from --bootstrap
resamples of the cells (from 7 cells on; below, the classical t interval, calibrated there). Laws
are stored with their provenance; list them with `sweeper laws`."""


def register(sub: Any) -> None:
    """Add the ``import``, ``fit``, ``laws`` and ``compare`` verbs to ``sub`` (argparse)."""
    raw = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "import",
        help="import runs from a CSV/parquet file as a sweep",
        description="Import runs from a CSV or parquet file into the storage as a sweep.",
        epilog=_IMPORT_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("file", help="CSV (.csv, .tsv) or parquet file of runs, one row per run")
    p.add_argument("--sweep", required=True, help="name of the new sweep")
    p.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="rename a column (repeatable; applied simultaneously)",
    )
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence of batch_size")
    _common(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "fit",
        help="fit scaling laws of the optimal LR / batch size (or the loss law) and store them",
        description="Fit power laws of the optimum (or the loss law) to a sweep and store them.",
        epilog=_FIT_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("sweep", help="sweep name (launched or imported)")
    p.add_argument("--target", choices=("lr", "batch_tokens", "loss"), default=None)
    p.add_argument(
        "--predictors",
        action="append",
        default=[],
        metavar="[TARGET=]P1,P2",
        help="predictors among n_params, tokens, flops, width, depth",
    )
    p.add_argument("--method", choices=("parabola", "band"), default="parabola")
    p.add_argument("--band", type=float, default=0.0025, help="relative loss band (0.0025=0.25%%)")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=None,
        help="law resamples, or t draws below 7 cells (default 1000; 100 for the loss law)",
    )
    p.add_argument(
        "--cell-bootstrap", type=int, default=200, help="resamples per cell optimum (parabola)"
    )
    p.add_argument("--min-runs", type=int, default=4, help="completed runs a cell needs")
    p.add_argument("--keep-edge", action="store_true", help="keep cells optimal on a range edge")
    p.add_argument("--huber", action="store_true", help="Huber-robust power-law fit")
    p.add_argument("--unweighted", action="store_true", help="do not weight cells by their CI")
    p.add_argument(
        "--loss-points", choices=("best", "all"), default="best", help="loss law: cell bests or all"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-store", action="store_true", help="fit and print, store nothing")
    _common(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser(
        "laws",
        help="list stored laws (`laws [SWEEP]`) or show one (`laws show ID`)",
        description="List the stored laws, optionally of one sweep, or show one law in full.",
    )
    p.add_argument("args", nargs="*", metavar="SWEEP | show ID")
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
    p.add_argument("--params", type=float, default=None, help="target non-embedding params N")
    p.add_argument("--tokens", type=float, default=None, help="target training tokens D")
    p.add_argument("--width", type=float, default=None, help="target d_model")
    p.add_argument("--depth", type=float, default=None, help="target layers")
    p.add_argument("--context", type=float, default=None, help="target sequence length")
    p.add_argument(
        "--published",
        default="deepseek,steplaw,kaplan",
        help="published laws to show (comma-separated; '' for none)",
    )
    _common(p)
    p.set_defaults(func=cmd_compare)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default=None, metavar="URL", help="SQLAlchemy URL")
    p.add_argument("--json", action="store_true", help="print JSON")


# --- import ------------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from sweeper.errors import ImportDataError
    from sweeper.importer import import_runs, load_runs
    from sweeper.storage import resolve_url

    renames: dict[str, str] = {}
    for item in args.rename:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ImportDataError(f"--rename takes OLD=NEW, got {item!r}")
        renames[old] = new
    n = import_runs(
        args.file, sweep=args.sweep, renames=renames, seq_len=args.seq_len, url=args.storage
    )
    cells = int(load_runs(args.sweep, args.storage)["cell"].nunique())
    url = resolve_url(args.storage)
    if args.json:
        _print_json({"sweep": args.sweep, "n_rows": n, "n_cells": cells, "storage": url})
    else:
        print(f"imported {n} runs ({cells} cells) into sweep {args.sweep!r} in {url}")
    return 0


# --- fit ---------------------------------------------------------------------------------------


def cmd_fit(args: argparse.Namespace) -> int:
    import dataclasses
    import warnings

    from sweeper import storage
    from sweeper.fit import (
        FitWarning,
        estimate_optima,
        fit_band_law,
        fit_loss_law,
        fit_power_law,
    )
    from sweeper.importer import load_runs

    if args.bootstrap is not None and args.bootstrap < 0:
        raise FitError(f"`--bootstrap >= 0` must hold, but got {args.bootstrap}")
    runs = load_runs(args.sweep, args.storage)
    row = storage.get_sweep(args.sweep, args.storage) or {}
    meta = row.get("meta") or {}
    prov: dict[str, Any] = {
        "source": args.sweep,
        "conventions": _conventions(row, runs),
        "parametrization": meta.get("parametrization"),
        "base_width": meta.get("base_width"),
        "base_depth": meta.get("base_depth"),
    }
    chosen = _parse_predictors(args.predictors)
    implicit = args.target is None
    targets = [args.target] if args.target else ["lr"]
    if implicit and _batch_varies(runs):
        targets.append("batch_tokens")

    optima: list[CellOptimum] | None = None
    laws: list[Law] = []
    skipped: list[str] = []
    caught: list[str] = []
    for target in targets:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always", FitWarning)
            try:
                if target == "loss":
                    law: Law = fit_loss_law(
                        runs,
                        n_boot=100 if args.bootstrap is None else args.bootstrap,
                        seed=args.seed,
                        points=args.loss_points,
                        source=args.sweep,
                        conventions=prov["conventions"],
                    )
                else:
                    if optima is None:
                        optima = estimate_optima(
                            runs,
                            method=args.method,
                            band=args.band,
                            n_boot=args.cell_bootstrap if args.method == "parabola" else 0,
                            seed=args.seed,
                            min_runs=args.min_runs,
                            keep_edge=args.keep_edge,
                        )
                    preds = chosen.get(target) or chosen.get("") or _default_predictors(optima)
                    n_boot = 1000 if args.bootstrap is None else args.bootstrap
                    if args.method == "band":
                        law = fit_band_law(
                            runs,
                            target=target,
                            predictors=preds,
                            band=args.band,
                            n_boot=n_boot,
                            seed=args.seed,
                            min_runs=args.min_runs,
                            keep_edge=args.keep_edge,
                            **prov,
                        )
                    else:
                        law = fit_power_law(
                            optima,
                            target=target,
                            predictors=preds,
                            weighted=not args.unweighted,
                            huber=args.huber,
                            n_boot=n_boot,
                            seed=args.seed,
                            **prov,
                        )
            except FitError as e:
                if implicit and target == "batch_tokens":
                    skipped.append(f"batch_tokens not fitted: {e}")
                    continue
                raise
            caught += [str(x.message) for x in w if issubclass(x.category, FitWarning)]
        if not args.no_store:
            law = dataclasses.replace(
                law, id=storage.put_law(args.sweep, law.to_dict(), args.storage)
            )
        laws.append(law)

    for line in skipped:
        print(f"sweeper: {line}", file=sys.stderr)
    if args.json:
        dicts = [_law_json(law, args.sweep) for law in laws]
        _print_json(dicts[0] if len(dicts) == 1 else {"laws": dicts})
        return 0
    for law in laws:
        _print_law(law, args.sweep)
    shown = {n for law in laws for n in getattr(law, "notes", ())}
    for msg in dict.fromkeys(caught):
        if msg not in shown:  # power laws print their doubts as notes; loss laws have none
            print(f"warning: {msg}", file=sys.stderr)
    return 0


def _conventions(row: dict[str, Any], runs: pd.DataFrame) -> dict[str, str]:
    """What the sweep's numbers mean (see :mod:`sweeper.laws`): for a launched sweep, its data's
    token unit and vocabulary, the schedule, warmup and z-loss its trials trained with, and the
    proxies' init std (and output multiplier when not 1), from its stored study; for an imported one, what the file says (FLOPs
    filled in from N and D are 6·N·D without attention)."""
    import numpy as np

    from sweeper.laws import DEFAULT_CONVENTIONS
    from sweeper.recommend import FLOPS_6ND_NO_ATTENTION

    conv = dict(DEFAULT_CONVENTIONS)
    if row.get("kind") == "imported":
        for key in ("vocab_size", "data", "schedule", "min_lr_ratio", "warmup", "z_loss"):
            conv.pop(key)
        conv.pop("init_std")
        conv["n_params"] = "non-embedding (as imported)"
        conv["lr"] = "peak LR as imported"
        conv["tokens"] = "as imported"
        fl = runs["flops"].to_numpy(dtype=float)
        six_nd = 6.0 * runs["n_params"].to_numpy(dtype=float) * runs["tokens"].to_numpy(dtype=float)
        ok = np.isfinite(fl) & np.isfinite(six_nd)
        if ok.any() and np.allclose(fl[ok], six_nd[ok], rtol=1e-9, atol=0.0):
            conv["flops"] = FLOPS_6ND_NO_ATTENTION
        else:
            conv["flops"] = "as imported"
        return conv
    if row.get("kind") != "launched":
        return conv
    meta = row.get("meta") or {}
    data = str(meta.get("data") or "builtin")
    vocab = meta.get("vocab_size")
    conv["data"] = data
    if vocab is not None:
        conv["vocab_size"] = str(int(vocab))
    conv["tokens"] = _token_unit(data, vocab)
    if meta.get("init_std") is not None:
        conv["init_std"] = repr(float(meta["init_std"]))
    if meta.get("output_mult") is not None and float(meta["output_mult"]) != 1.0:
        conv["output_mult"] = repr(float(meta["output_mult"]))
    if row.get("study_toml"):
        from sweeper.study import parse_study_toml

        try:
            spec = parse_study_toml(row["study_toml"], source=f"sweep:{row.get('name', '')}")
        except SweeperError as e:  # a study stored by another version: keep what the row says
            schedule = str(meta.get("schedule") or "unknown")
            for key in ("min_lr_ratio", "warmup", "z_loss"):
                conv.pop(key)
            conv["schedule"] = schedule
            conv["lr"] = f"peak AdamW LR, {schedule} schedule (stored study unreadable: {e})"
        else:
            conv.update(_schedule_conventions(spec))
    return conv


def _token_unit(data: str, vocab: Any) -> str:
    """``"bytes"`` for byte-level data (the built-in corpus, text files), ``"tokenizer:<name>"``
    for nanoGPT token files. A path that is not on this machine is judged by its suffix and the
    vocabulary (byte-level data has vocab 256 unless the study says otherwise)."""
    from pathlib import Path

    if data == "builtin":
        return "bytes"
    path = Path(data).expanduser()
    if path.is_dir():
        return f"tokenizer:{path.name}" if (path / "train.bin").exists() else "bytes"
    if path.is_file() or path.suffix.lower() in (".txt", ".md"):
        return "bytes"
    return "bytes" if vocab in (None, 256) else f"tokenizer:{path.name}"


def _schedule_conventions(spec: Any) -> dict[str, str]:
    """The LR convention of a launched study: schedule, min LR, warmup (the HParams default of
    10% of the steps when the study does not set it) and z-loss, as keys and as one line."""
    t = spec.train
    w = spec.search.warmup
    if w is None:
        warmup, text = "0.1", "warmup 10% of steps"
    elif w.is_fixed:
        v = float(w.values[0])
        warmup = repr(v)
        text = f"warmup {v:.0%} of steps" if v < 1 else f"warmup {v:.0f} steps"
    else:
        warmup, text = "searched", "searched warmup"
    if t.schedule == "cosine":
        text += f", cosine to {t.min_lr_ratio:.0%}"
    elif t.schedule == "wsd":
        text += (
            f", WSD: constant, then decay to {t.min_lr_ratio:.0%} over the last "
            f"{t.decay_fraction:.0%} of steps"
        )
    else:
        text += ", then constant"
    if t.z_loss:
        text += f", z-loss {t.z_loss:g}"
    out = {
        "lr": f"peak AdamW LR, {text}",
        "schedule": t.schedule,
        "min_lr_ratio": repr(float(t.min_lr_ratio)),
        "warmup": warmup,
        "z_loss": repr(float(t.z_loss)),
    }
    if t.schedule == "wsd":
        out["decay_fraction"] = repr(float(t.decay_fraction))
    return out


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


def _batch_varies(runs: pd.DataFrame) -> bool:
    """Whether any cell has completed runs at two batch sizes more than 1% apart."""
    import numpy as np

    done = runs[(runs["state"] == "COMPLETE") & ~runs["diverged"] & runs["batch_tokens"].notna()]
    if done.empty:
        return False
    spread = done.groupby("cell")["batch_tokens"].agg(lambda s: np.log(s.max() / s.min()))
    return bool((spread > 0.01).any())


def _default_predictors(optima: Sequence[CellOptimum]) -> tuple[str, ...]:
    """The scale variables among n_params, tokens that vary across the usable cells (n_params alone
    when tokens is a power of n_params there, e.g. a fixed tokens-per-parameter ladder)."""
    import numpy as np

    usable = [o for o in optima if o.usable]
    if not usable:
        if all(o.reason == "no lr values in this cell" for o in optima):
            raise FitError("the runs have no lr values: only the loss law fits (--target loss)")
        why = "; ".join(f"{o.cell}: {o.reason}" for o in optima[:8])
        raise FitError(f"no usable cells: {why}")
    vary = []
    logs = {}
    for name in _SCALE_VARS:
        vals = np.array([getattr(o, name) or np.nan for o in usable], dtype=float)
        if np.all(np.isfinite(vals) & (vals > 0)) and np.ptp(np.log(vals)) > 1e-9:
            vary.append(name)
            logs[name] = np.log(vals)
    if not vary:
        raise FitError(
            "neither n_params nor tokens varies across the usable cells; "
            "pass --predictors (e.g. width or depth)"
        )
    if len(vary) == 2:
        x = np.column_stack([logs[v] - logs[v].mean() for v in vary])
        if np.linalg.matrix_rank(x, tol=1e-6) < 2:
            return ("n_params",)
    return tuple(vary)


# --- laws --------------------------------------------------------------------------------------


def cmd_laws(args: argparse.Namespace) -> int:
    from sweeper import storage
    from sweeper.errors import StorageError

    if len(args.args) == 2 and args.args[0] == "show":
        try:
            law_id = int(args.args[1])
        except ValueError:
            raise SweeperError(f"laws show takes a numeric law id, got {args.args[1]!r}") from None
        d = storage.get_law(law_id, args.storage)
        if d is None:
            raise StorageError(f"no law with id {law_id} in {storage.resolve_url(args.storage)}")
        if args.json:
            _print_json(d)
        else:
            _print_law(_law_from(d), d.get("sweep", ""), created=d.get("created_at"))
        return 0
    if len(args.args) > 1:
        raise SweeperError(f"usage: sweeper laws [SWEEP] | laws show ID (got {args.args})")
    sweep = args.args[0] if args.args else None
    rows = storage.list_laws(sweep, args.storage)
    if sweep is not None and not rows and storage.get_sweep(sweep, args.storage) is None:
        known = ", ".join(s["name"] for s in storage.list_sweeps(args.storage)) or "none"
        raise StorageError(f"no sweep {sweep!r}; known sweeps: {known}")
    for d in rows:
        d.pop("boot_coefs", None)
    if args.json:
        _print_json({"laws": rows})
        return 0
    if not rows:
        print("no laws stored" + (f" for sweep {sweep!r}" if sweep else "") + "; run `sweeper fit`")
        return 0
    from rich.table import Table

    from sweeper.compare import law_formula

    t = Table(title="stored laws" + (f" of {sweep}" if sweep else ""))
    for col in ("id", "sweep", "target", "method", "law", "cells", "cv err", "created"):
        t.add_column(col, justify="right" if col in ("id", "cells", "cv err") else "left")
    for d in rows:
        law = _law_from(d)
        cv = d.get("cv_error")
        t.add_row(
            str(d["id"]),
            str(d.get("sweep", "")),
            law.target,
            law.method,
            law_formula(law),
            str(d.get("n_cells", d.get("n_points", ""))),
            f"{cv:.3f}" if isinstance(cv, (int, float)) else "",
            str(d.get("created_at", ""))[:19],
        )
    _console().print(t)
    return 0


# --- compare -----------------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from sweeper import storage
    from sweeper.compare import (
        cell_points,
        compare_exponents,
        compare_laws,
        law_label,
        target_point,
    )
    from sweeper.errors import StorageError, TargetError
    from sweeper.fit import estimate_optima
    from sweeper.importer import load_runs
    from sweeper.published import published_laws

    runs = load_runs(args.sweep, args.storage)
    latest: dict[tuple[Any, ...], Law] = {}
    for d in storage.list_laws(args.sweep, args.storage):
        law = _law_from(d)
        if law.target in ("lr", "batch_tokens"):
            latest[(law.target, law.kind, law.method, law.predictors)] = law
    fitted = list(latest.values())
    if not fitted:
        raise StorageError(
            f"no lr or batch_tokens laws stored for sweep {args.sweep!r}; "
            f"run `sweeper fit {args.sweep}` first"
        )
    band_methods = [m for m in (law.method for law in fitted) if m.startswith("band")]
    if band_methods:
        match = re.match(r"band(\d+(?:\.\d*)?(?:e[+-]?\d+)?)", band_methods[-1])
        band = float(match.group(1)) if match else 0.0025
        optima = estimate_optima(runs, method="band", band=band, n_boot=0, keep_edge=True)
    else:
        optima = estimate_optima(runs, method="parabola", n_boot=0, keep_edge=True)
    points = cell_points(optima)
    shape = (args.width, args.depth, args.context)
    if args.params is not None or args.tokens is not None or any(v is not None for v in shape):
        if args.tokens is None:
            raise TargetError("a target needs --tokens (with --params, or --width and --depth)")
        tp = target_point(
            tokens=args.tokens,
            n_params=args.params,
            width=args.width,
            depth=args.depth,
            context=args.context,
        )
        points = pd.concat([points, tp], ignore_index=True)
    published: list[Law] = []
    for name in (s.strip() for s in args.published.split(",")):
        if name:
            published += list(published_laws(name).values())
    pred = compare_laws([*fitted, *published], points)
    exps = compare_exponents(fitted, published)
    if args.json:
        _print_json(
            {
                "sweep": args.sweep,
                "laws": [
                    {"label": law_label(law), **_law_json(law, law.source)}
                    for law in [*fitted, *published]
                ],
                "exponents": exps.to_dict(orient="records"),
                "predictions": pred.to_dict(orient="records"),
            }
        )
        return 0
    _print_comparison(args.sweep, [*fitted, *published], exps, pred)
    return 0


# --- output ------------------------------------------------------------------------------------


def _law_from(d: dict[str, Any]) -> Law:
    from sweeper.laws import law_from_dict

    return law_from_dict(d)


def _law_json(law: Law, sweep: str) -> dict[str, Any]:
    from sweeper.laws import PowerLaw

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


def _ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    return f"[{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]" if ci else ""


def _console() -> Any:
    """A rich console; off a terminal (pipes, tests) wide enough that formulas are not cut."""
    import shutil

    from rich.console import Console

    con = Console()
    if not con.is_terminal:
        con = Console(width=max(140, shutil.get_terminal_size((140, 40)).columns))
    return con


def _print_law(law: Law, sweep: str, *, created: str | None = None) -> None:
    from rich.table import Table

    from sweeper.laws import LossLaw, PowerLaw

    ident = f" #{law.id}" if law.id is not None else " (not stored)"
    t = Table(title=f"{law.target} law{ident} of {sweep} ({law.method})", show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_column("95% interval", justify="right")
    notes: Sequence[str] = ()
    if isinstance(law, PowerLaw):
        t.add_row("prefactor", _fmt(law.prefactor, 4), _ci(law.prefactor_ci, 4))
        for p in law.predictors:
            t.add_row(
                f"exponent of {p}", _fmt(law.exponents[p], 4), _ci(law.exponents_ci.get(p), 4)
            )
        t.add_row("cells (points)", f"{law.n_cells} ({law.n_points})", "")
        if law.cv_error is not None:
            t.add_row("leave-one-cell-out error", f"{law.cv_error:.3f} ln", "")
        if law.holdout_error is not None:
            t.add_row("leave-largest-out error", f"{law.holdout_error:.3f} ln", "")
        t.add_row("residual std", f"{law.residual_std:.3f} ln", "")
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
    conv = {k: v for k, v in law.conventions.items() if k != "held_fixed"}
    con.print("  conventions: " + "; ".join(f"{k}: {v}" for k, v in conv.items()))
    if "held_fixed" in law.conventions:
        con.print(f"  held fixed: {law.conventions['held_fixed']}")
    for note in notes:
        con.print(f"  note: {note}")


def _print_comparison(
    sweep: str, laws: Sequence[Law], exps: pd.DataFrame, pred: pd.DataFrame
) -> None:
    from rich.table import Table

    from sweeper.compare import law_formula, law_label

    con = _console()
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
                "inside" if r.inside else "OUTSIDE",
            )
        con.print(t)
    notes: set[str] = set()
    for target, g in pred.groupby("target", sort=False):
        labels = list(dict.fromkeys(g["law"]))
        t = Table(title=f"{target} at the cells and the target")
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
                if r.extrapolation > 1.5:
                    s += f" (×{r.extrapolation:.3g} out)"
                cells.append(s)
                if r.note:
                    notes.add(f"{lab}: {r.note}")
            t.add_row(*cells)
        con.print(t)
    for note in sorted(notes):
        con.print(f"  note: {note}")

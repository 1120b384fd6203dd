"""Runs from elsewhere: import a CSV, TSV, parquet or JSON (lines) file of runs into the storage,
and load any sweep's runs (imported or launched) as one runs table.

A file needs ``n_params`` (non-embedding parameters), ``tokens`` and ``loss`` (nats per token)
columns, which is enough for the loss law; ``lr`` and ``batch_size`` (sequences; with ``seq_len``)
or ``batch_tokens`` are needed only by the fits that use them. Other canonical columns (see
:mod:`sweeper.study.runs`) are checked; columns Sweeper does not know are kept with the runs.
Renames ``OLD=NEW`` are applied all at once, so two columns can swap names. Everything is
validated before anything is written, and the sweep row and its runs are written in one
transaction; with ``--replace`` (``replace=True``) that transaction first deletes an imported sweep
of the same name, its runs and the laws fitted to them. The sweep's name follows the rule of a
study's ``sweep.name`` (letters, digits, ``_``, ``-``, ``.``; at most
:data:`~sweeper.study.spec.MAX_SWEEP_NAME` characters).

A diverged run: many published sweeps write its loss as ``nan`` or ``inf``. When the file has no
``diverged`` column, a ``nan``/``inf`` loss (written so in a CSV or JSON file, as a number or a
string, or an infinite value in a parquet file) of a run that finished (no ``state`` column, or a
finished state: a W&B export's diverged runs) imports as a diverged run with no loss; the import
counts them (``diverged_from_loss`` in the sweep's metadata, and the summary line of ``sweeper
import``). An explicit ``diverged`` column wins. An empty loss (a JSON null, a NaN of a data
frame) is an error naming the row, unless the run is marked diverged or did not finish. Rows
repeated exactly are imported once, and said so; columns named as Sweeper's but for case (W&B's
``State``) are read as Sweeper's.

The Step Law release (``steplaw_dense_lr_bs_loss.csv``: N non-embedding params, D tokens, bs in
sequences of 2048, "smooth loss" the loss their fit uses) imports with::

    sweeper import steplaw_dense_lr_bs_loss.csv --sweep steplaw_runs \\
        --rename N=n_params --rename D=tokens --rename bs=batch_size --rename h=width \\
        --rename numl=depth --rename loss=raw_loss --rename "smooth loss=loss" --seq-len 2048
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
import sqlalchemy as sa

from sweeper.errors import ImportDataError, StorageError
from sweeper.study import storage
from sweeper.study.runs import (
    CELL_TOLERANCE,
    COLUMNS,
    NUMERIC_COLUMNS,
    STATES,
    normalize_runs,
)
from sweeper.study.spec import MAX_SWEEP_NAME, NAME_RE

__all__ = [
    "REQUIRED_COLUMNS",
    "import_notes",
    "import_runs",
    "imported_status",
    "load_runs",
    "read_runs_file",
    "rename_pairs",
    "validated_runs",
]

logger = logging.getLogger(__name__)

REQUIRED_COLUMNS: Final[tuple[str, ...]] = ("n_params", "tokens", "loss")
#: tokens per parameter beyond any published run (small models trained on 15T tokens reach
#: ~1e5): more says N is counted in thousands or millions
MAX_TOKENS_PER_PARAM: Final[float] = 1e6
#: a median loss (nats per token) above this is no trained LM's: a uniform prediction over a
#: 256k vocabulary scores ln 256k = 12.5
MAX_LOSS_NATS: Final[float] = 15.0
#: optimizer steps per run (median) below which a batch was probably imported in the wrong unit
#: (the shipped ladders train at least 200, the runs of Step Law's release 950 and more)
FEW_STEPS: Final[float] = 20.0
_NON_NEGATIVE: Final[tuple[str, ...]] = ("seed", "wall_s")
#: canonical numeric columns that must be > 0 where given: all but the seed and the wall time
_POSITIVE: Final[tuple[str, ...]] = tuple(c for c in NUMERIC_COLUMNS if c not in _NON_NEGATIVE)
_TRUE: Final[frozenset[str]] = frozenset({"true", "1", "yes", "y", "t"})
_FALSE: Final[frozenset[str]] = frozenset({"false", "0", "no", "n", "f", ""})
_EMPTY: Final[frozenset[str]] = frozenset({"", "nan", "na", "n/a", "none", "null"})
#: run states as trackers write them (Weights & Biases: finished, crashed, failed, killed,
#: running), as Sweeper's
_STATE_ALIASES: Final[dict[str, str]] = {
    "finished": "COMPLETE", "complete": "COMPLETE", "completed": "COMPLETE", "crashed": "FAIL",
    "failed": "FAIL", "fail": "FAIL", "killed": "FAIL", "running": "RUNNING", "pruned": "PRUNED",
}  # fmt: skip
#: other tools' names for Sweeper's columns (Step Law's release, W&B and HF exports, nanoGPT's
#: and Megatron's config keys), for a ``--rename`` hint: never renamed without the user's word,
#: since a file may hold several (``val_loss`` and ``train_loss``)
_LOOKALIKES: Final[dict[str, tuple[str, ...]]] = {
    "loss": ("val_loss", "eval_loss", "valid_loss", "validation_loss", "final_loss",
             "smooth loss", "smooth_loss", "test_loss", "train_loss"),
    "lr": ("learning_rate", "peak_lr", "lr_peak", "max_lr", "lr_max", "base_lr", "eta"),
    "n_params": ("n", "params", "num_params", "n_param", "nparams", "non_embedding_params",
                 "parameters", "model_size"),
    "tokens": ("d", "num_tokens", "n_tokens", "train_tokens", "tokens_seen", "data_size"),
    "batch_size": ("bs", "batch", "global_batch_size", "train_batch_size"),
    "batch_tokens": ("tokens_per_batch", "tokens_per_step", "batch_size_tokens"),
    "seq_len": ("seq_length", "sequence_length", "context_length", "block_size", "max_seq_len"),
    "width": ("d_model", "hidden_size", "n_embd", "h", "dim"),
    "depth": ("n_layer", "n_layers", "num_layers", "numl", "num_hidden_layers"),
}  # fmt: skip
#: how a file writes a diverged run's loss
_NONFINITE: Final[frozenset[str]] = frozenset(
    {"nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
)


def read_runs_file(
    path: str | Path,
    *,
    renames: Mapping[str, str] | None = None,
    seq_len: int | None = None,
) -> pd.DataFrame:
    """Read and validate a CSV/TSV/parquet/JSON file of runs; returns the normalized runs table.

    Raises ImportDataError with one line per problem (file name, column, row) when the file
    cannot be read, a rename names a missing column, a required column is missing, or a value is
    empty, non-numeric or out of range.
    """
    p = Path(path)
    name = p.name
    raw, written = _read(p)
    df = _renamed(raw, dict(renames or {}), name)
    written.columns = df.columns  # (renames keep the columns' order: the same cells)
    loss_written = written["loss"].reset_index(drop=True) if "loss" in written else None
    if seq_len is not None:
        if not (isinstance(seq_len, int) and seq_len > 0):
            raise ImportDataError(f"`seq_len > 0` must hold, but got {seq_len=}")
        if "seq_len" in df.columns:
            given = pd.to_numeric(df["seq_len"], errors="coerce")
            other = given.notna() & (given != seq_len)
            if other.any():  # (it had been ignored in silence: a help-text audit)
                raise ImportDataError(
                    f"{name}: seq_len (--seq-len) {seq_len} only fills the blanks of the file's "
                    f"seq_len column, which gives {given[other].iloc[0]:g} in {int(other.sum())} "
                    "rows: drop the option, or the column"
                )
            df["seq_len"] = given.fillna(seq_len)
        else:
            df["seq_len"] = seq_len

    return validated_runs(df, name, loss_written, drop_repeats=True)


def validated_runs(
    df: pd.DataFrame,
    name: str,
    loss_written: pd.Series | None = None,
    *,
    drop_repeats: bool = False,
) -> pd.DataFrame:
    """``df`` (with the required columns) checked as a runs file is and normalized; ImportDataError
    with one line per problem. ``loss_written``: per row, whether the file wrote its loss as
    nan/inf, which marks a diverged run where the file has no diverged column (None: no such
    mark; an empty loss is then refused unless a column excuses it). ``drop_repeats``: rows
    repeated exactly, as given, are kept once (``attrs["repeated_rows"]`` counts the others;
    an import says so). The runs table of :func:`read_runs_file`, and of a user's own frame
    given to ``sweeper.fit``."""
    df = df.copy()
    problems: list[str] = []
    repeats = np.zeros(len(df), bool)
    if drop_repeats:  # (as text: NaN equals NaN)
        repeats = df.astype(str).duplicated().to_numpy()
    if "state" in df.columns:
        df["state"] = df["state"].fillna("COMPLETE")
        df["state"] = [_STATE_ALIASES.get(str(v).strip().lower(), v) for v in df["state"]]
        bad = ~df["state"].astype(str).isin(STATES)
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            problems.append(
                f"{name}: column 'state' has {df['state'].iloc[i]!r} in row {i + 1}; "
                f"known states: {', '.join(STATES)} (or as trackers write them: "
                f"{', '.join(sorted(_STATE_ALIASES))})"
            )
    diverged = _bool_column(df, "diverged", name, problems)
    from_loss = 0
    if diverged is not None:
        df["diverged"] = diverged
    elif loss_written is not None:
        # no diverged column: a nan/inf loss is how the file marks a diverged run, also of a run
        # its state column calls finished (a W&B export's diverged runs)
        marks = loss_written.to_numpy(dtype=bool)
        if "state" in df.columns:
            marks = marks & (df["state"].astype(str) == "COMPLETE").to_numpy()
        diverged = pd.Series(marks, index=df.index)
        from_loss = int((marks & ~repeats).sum())
        if diverged.any():
            df["diverged"] = diverged
            df["loss"] = df["loss"].where(~diverged, np.nan)
    if diverged is None:
        diverged = pd.Series(False, index=df.index)
    for col in (*_POSITIVE, *_NON_NEGATIVE):
        if col not in df.columns:
            continue
        # a diverged run, or one that did not complete (failed, pruned, running: as `sweeper
        # trials` writes them), has no loss to report: an empty or infinite loss is allowed there
        excused = np.zeros(len(df), bool)
        if col == "loss":
            excused = diverged.to_numpy(dtype=bool)
            if "state" in df.columns:
                excused = excused | (df["state"].astype(str) != "COMPLETE").to_numpy()
        values, problem = _numeric_column(df[col], col, excused, name)
        if problem:
            problems.append(problem)
        else:
            df[col] = values
    if problems:
        raise ImportDataError("\n".join(problems))
    given_cells = "cell" in df.columns and df["cell"].notna().all()
    out = normalize_runs(df)
    problems = _check_steps(out, name) + (_mixed_cells(out, name) if given_cells else [])
    if problems:
        raise ImportDataError("\n".join(problems))
    if repeats.any():  # one run exported twice: kept once (import_notes says so)
        out = out[~repeats].reset_index(drop=True)  # (normalize_runs keeps the rows' order)
    out.attrs["diverged_from_loss"] = from_loss
    out.attrs["repeated_rows"] = int(repeats.sum())
    return out


def _mixed_cells(runs: pd.DataFrame, name: str) -> list[str]:
    """A problem per cell of the file's ``cell`` column that holds runs of different N or D (by
    more than :data:`~sweeper.study.runs.CELL_TOLERANCE`): a cell is one (N, D), and the fits
    would take the median, an N no run has (a fitting audit's two cells labelled alike moved the
    exponent's interval from [-0.331, -0.272] to [-0.485, +0.028] in silence)."""
    out = []
    for col in ("n_params", "tokens"):
        g = runs.groupby("cell")[col]
        lo, hi = g.min(), g.max()
        bad = hi[hi > lo * (1.0 + CELL_TOLERANCE)].index
        out += [
            f"{name}: cell {c!r} holds runs of {col} {lo[c]:.4g} to {hi[c]:.4g}; a cell is one "
            "(N, D): give each its own name, or drop the cell column (Sweeper then names cells "
            "by N and D)"
            for c in bad[:3]
        ]
    return out


def rename_pairs(renames: Mapping[str, str] | str | Iterable[str] | None) -> dict[str, str]:
    """``renames`` (``import_runs``'s, ``--rename``'s) as old column name → new: a mapping as it
    is, or ``"OLD=NEW"`` texts (one, or several); ImportDataError for one without ``=`` or with
    an empty side, a column renamed twice, a new name that is no string, or another type ("a=b"
    had raised a bare ValueError, 5 a TypeError)."""
    if renames is None:
        return {}
    if isinstance(renames, Mapping):
        bad = {k: v for k, v in renames.items() if not isinstance(v, str) or not v}
        if bad:
            raise ImportDataError(
                f"renames maps a column to its new name (a non-empty string), got {bad!r}"
            )
        return dict(renames)
    items = [renames] if isinstance(renames, str) else renames
    if not isinstance(items, Iterable) or not all(isinstance(i, str) for i in items):
        raise ImportDataError(
            "renames must be a mapping old → new ({'val_loss': 'loss'}) or OLD=NEW texts, got "
            f"{renames!r}"
        )
    out: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ImportDataError(f"renames (--rename) takes OLD=NEW, got {item!r}")
        if old in out:
            raise ImportDataError(
                f"renames (--rename): {old} renamed twice ({old}={out[old]}, {item})"
            )
        out[old] = new
    return out


def _check_arguments(
    path: object, sweep: object, seq_len: object, study: object, conventions: object
) -> None:
    """ImportDataError for an argument of :func:`import_runs` of another type than it takes,
    named as its caller wrote it (a sweep 5 had raised a bare AttributeError, a path None and
    conventions 5 a TypeError)."""
    paths = (str, os.PathLike)
    problems = []
    if not isinstance(path, paths):
        problems.append(f"path must be a file's path (a str or Path), got {path!r}")
    if not isinstance(sweep, str):
        problems.append(f"sweep (--sweep) must be a name (a string), got {sweep!r}")
    if seq_len is not None and (not isinstance(seq_len, int) or isinstance(seq_len, bool)):
        problems.append(f"seq_len (--seq-len) must be an integer > 0 or None, got {seq_len!r}")
    if study is not None and not isinstance(study, paths):
        problems.append(f"study (--study) must be a study file's path or None, got {study!r}")
    listed = isinstance(conventions, Iterable) and all(isinstance(c, str) for c in conventions)
    if not (conventions is None or isinstance(conventions, Mapping | str) or listed):
        problems.append(
            "conventions (--convention) must be a mapping ({'parametrization': 'mup'}), "
            f"KEY=VALUE texts or None, got {conventions!r}"
        )
    if problems:
        raise ImportDataError("; ".join(problems))


def import_runs(
    path: str | Path,
    *,
    sweep: str,
    renames: Mapping[str, str] | str | Iterable[str] | None = None,
    seq_len: int | None = None,
    url: str | None = None,
    study: str | Path | None = None,
    conventions: Iterable[str] | Mapping[str, Any] | None = None,
    replace: bool = False,
) -> int:
    """Validate ``path`` and store its runs as the imported sweep ``sweep``; returns the row count.

    Writes one ``sweeper_sweeps`` row (kind "imported", meta {file, renames, seq_len, n_rows,
    columns, sha256}) and one ``sweeper_runs`` JSON row per run, in one transaction; nothing is
    written when anything is wrong (ImportDataError). ``study``: the study TOML the runs were
    trained from (e.g. a CSV written by ``sweeper trials`` and its studies/ file); it is stored
    with the sweep, so that its cells can be trained again (``validate-transfer``), and every
    cell of the runs must be a cell of its ladder, with the N its study counts.
    ``conventions``: what the file's numbers mean (:mod:`sweeper.study.declared`: ``KEY=VALUE``
    texts or a mapping), stored with the sweep for its laws to record; not with ``study``, which
    says all of it. ``renames``: see :func:`rename_pairs`. ``replace``: an imported sweep of that
    name is replaced, with the laws fitted to it, in the transaction that writes the new runs
    (its transfer checks are kept); a launched one is refused.
    """
    _check_arguments(path, sweep, seq_len, study, conventions)
    if not isinstance(replace, bool):
        raise ImportDataError(f"replace (--replace) must be True or False, got {replace!r}")
    renames = rename_pairs(renames)
    if not sweep or not sweep.strip():
        raise ImportDataError("the sweep name must not be empty")
    if not NAME_RE.match(sweep):
        raise ImportDataError(
            f"sweep (--sweep) {sweep!r} must be letters, digits, '_', '-' or '.' (no '/'), the "
            "rule of a study's sweep.name"
        )
    if len(sweep) > MAX_SWEEP_NAME:  # (PostgreSQL's column refused 256: an internal error)
        raise ImportDataError(
            f"sweep (--sweep) is {len(sweep)} characters long, more than the {MAX_SWEEP_NAME} a "
            "storage keeps with its transfer checks' suffixes: choose a shorter name"
        )
    if conventions and study is not None:
        raise ImportDataError(
            "conventions (--convention) with --study (study): the study says what its runs' "
            "numbers mean; give one"
        )
    p = Path(path)
    df = read_runs_file(p, renames=renames, seq_len=seq_len)
    declared = _declared(conventions, df)
    notes = import_notes(df, dict(renames or {}), sweep, declared, with_study=study is not None)
    if "source" not in df.columns or df["source"].isna().all():
        df["source"] = f"import:{p.name}"
    meta = {
        "file": p.name,
        "renames": dict(renames or {}),
        "seq_len": seq_len,
        "n_rows": len(df),
        "columns": [str(c) for c in df.columns],
        "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        "diverged_from_loss": int(df.attrs.get("diverged_from_loss", 0)),
    }
    if declared:
        meta["conventions"] = declared
    study_toml = _study_text(study, df) if study is not None else ""
    checks = _write_sweep(sweep, meta, study_toml, df, url, replace=replace)
    if checks:
        logger.warning(
            "sweep %r replaced; its %d transfer check(s) (%s.transfer.*) are kept, with results "
            "of the old runs' laws: run `sweeper validate-transfer` again",
            sweep, checks, sweep,
        )  # fmt: skip
    for note in notes:
        logger.warning("%s", note)
    return len(df)


def _write_sweep(
    sweep: str,
    meta: Mapping[str, Any],
    study_toml: str,
    df: pd.DataFrame,
    url: str | None,
    *,
    replace: bool = False,
) -> int:
    """The sweep row and one row per run, in one transaction (nothing written on an error);
    ImportDataError when a sweep of that name exists, unless ``replace`` and it is imported:
    then its runs and laws are deleted in the same transaction (a failed write keeps them).
    Returns the transfer checks a replaced sweep kept (:func:`_replaced`)."""
    records = [json.dumps(_jsonable_row(r)) for r in df.to_dict(orient="records")]
    checks = 0
    try:
        with storage.transaction(url) as conn:
            exists = conn.execute(
                sa.select(storage.sweeps_table.c.kind).where(storage.sweeps_table.c.name == sweep)
            ).first()
            if exists is not None:
                checks = _replaced(conn, sweep, exists[0], url, replace=replace)
            conn.execute(
                storage.sweeps_table.insert().values(
                    name=sweep,
                    kind="imported",
                    spec_hash=meta["sha256"],
                    study_toml=study_toml,
                    meta_json=json.dumps(meta),
                    created_at=datetime.now(timezone.utc),
                )
            )
            conn.execute(
                storage.runs_table.insert(), [{"sweep": sweep, "row_json": r} for r in records]
            )
    except sa.exc.IntegrityError:
        raise ImportDataError(
            f"sweep {sweep!r} already exists; choose another --sweep name"
        ) from None
    return checks


def _replaced(
    conn: sa.Connection, sweep: str, kind: str, url: str | None, *, replace: bool
) -> int:
    """Delete the imported sweep ``sweep`` (its row, runs, laws and its joins' laws) on ``conn``,
    for ``--replace``;
    ImportDataError without it, or for a launched sweep (whose trials `launch --force-new`
    deletes). Its transfer checks (``<sweep>.transfer.*``: trained runs, which a check planned
    again keeps) are kept; returns how many there are, for the import to say."""
    where = storage.safe_url(storage.resolve_url(url))
    if not replace:
        hint = ", or give --replace to replace its runs" if kind == "imported" else ""
        raise ImportDataError(
            f"sweep {sweep!r} already exists ({kind}) in {where}; choose another --sweep name{hint}"
        )
    if kind != "imported":
        raise ImportDataError(
            f"sweep {sweep!r} was launched in {where}, and --replace replaces only an imported "
            "sweep: choose another --sweep name (a launched sweep starts over with "
            "`sweeper launch --force-new`)"
        )
    t = storage.sweeps_table
    prefix = t.c.name.startswith(f"{sweep}.transfer.", autoescape=True)
    checks = conn.execute(sa.select(t.c.name).where(prefix)).all()
    conn.execute(storage.runs_table.delete().where(storage.runs_table.c.sweep == sweep))
    laws = storage.laws_table
    keys = conn.execute(sa.select(laws.c.sweep).distinct()).scalars().all()
    # (and the laws of joins with it, ``a+b``: fitted on its old runs too, a review)
    fitted_on = [k for k in keys if sweep in (n.strip() for n in k.split("+"))]
    conn.execute(laws.delete().where(laws.c.sweep.in_(fitted_on)))
    conn.execute(t.delete().where(t.c.name == sweep))
    return len(checks)


def _declared(
    conventions: Iterable[str] | Mapping[str, Any] | None, df: pd.DataFrame
) -> dict[str, Any]:
    """The conventions declared (checked: :mod:`sweeper.study.declared`), with the file's own
    ``parametrization`` column: a declared one must agree with it, a base shape needs one."""
    from sweeper.fitting.provenance import named_parametrizations
    from sweeper.study.declared import parse_declared

    named = named_parametrizations(df)
    declared = parse_declared(conventions or {}, named[0] if len(named) == 1 else None)
    p = declared.get("parametrization")
    if p is not None and set(named) - {p}:
        raise ImportDataError(
            f"--convention parametrization={p}, but the file's parametrization column names "
            f"{', '.join(sorted(set(named) - {p}))}: import each parametrization as its own sweep"
        )
    return declared


def _study_text(study: str | Path, df: pd.DataFrame) -> str:
    """The text of the study file ``study``, once it parses and its ladder has every cell of
    ``df`` (ImportDataError naming the cells it lacks)."""
    from sweeper.errors import SweeperError
    from sweeper.study.ladder import cells
    from sweeper.study.spec import parse_study_toml

    p = Path(study)
    try:
        text = p.read_text()
        spec = parse_study_toml(text, source=str(p))
    except (OSError, SweeperError) as e:
        raise ImportDataError(f"--study {p}: {e}") from None
    except UnicodeDecodeError as e:  # (an internal error had reached the user; a CLI audit)
        raise ImportDataError(
            f"--study {p}: not UTF-8 text (byte {e.object[e.start]}): is it a study file?"
        ) from None
    known = {c.name: c for c in cells(spec)}
    missing = sorted(set(df["cell"].dropna().astype(str)) - set(known)) if "cell" in df else []
    if missing:
        raise ImportDataError(
            f"--study {p}: its ladder has no cell {', '.join(missing[:5])}"
            + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else "")
            + f"; its cells: {', '.join(sorted(known))}"
        )
    n = df.groupby("cell")["n_params"].median()
    off = [(c, v, known[c].n_params) for c, v in n.items() if abs(v / known[c].n_params - 1) > 0.01]
    if off:
        c, v, counted = off[0]
        raise ImportDataError(
            f"--study {p}: the runs' n_params differ from the N its study counts ({c}: "
            f"{v:.4g} against {counted:.4g}; {len(off)} cells): --study is for runs trained from "
            "that study; declare other runs' conventions with --convention"
        )
    said = (
        sorted(set(df["parametrization"].dropna().astype(str))) if "parametrization" in df else []
    )
    if said and said != [spec.model.parametrization]:  # (an SP law had been labelled muP)
        raise ImportDataError(
            f"--study {p}: the runs say parametrization {', '.join(said)}, the study "
            f"{spec.model.parametrization}: --study is for runs trained from that study"
        )
    return text


def load_runs(sweep: str, url: str | None = None) -> pd.DataFrame:
    """The runs of ``sweep`` as a runs table (canonical columns first, imported extras kept).

    Imported sweeps come from ``sweeper_runs``; launched ones from
    ``sweeper.study.sweep_runs.load_sweep_runs``. An unknown sweep raises StorageError naming the
    known ones.
    """
    row = storage.get_sweep(sweep, url)
    if row is None:
        raise storage.no_sweep(sweep, url)
    if row["kind"] == "launched":
        try:
            from sweeper.study.sweep_runs import load_sweep_runs
        except ImportError as e:
            raise StorageError(
                f"sweep {sweep!r} was launched, but its runs cannot be read here: {e}"
            ) from None
        return normalize_runs(load_sweep_runs(sweep, url))
    with storage.get_engine(url).connect() as conn:
        texts = conn.execute(
            sa.select(storage.runs_table.c.row_json)
            .where(storage.runs_table.c.sweep == sweep)
            .order_by(storage.runs_table.c.id)
        ).scalars()
        rows = [json.loads(t) for t in texts]
    return normalize_runs(pd.DataFrame.from_records(rows))


# --- helpers -----------------------------------------------------------------------------------


def _read(p: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The file's table, and per cell whether it holds a non-finite number as written (``nan``,
    ``inf``; not an empty cell, a JSON null or a parquet null): a CSV's reader turns ``nan`` and
    an empty cell alike into NaN, so its text is read again; a JSON's NaN and Infinity are
    Python's json's; a parquet file's infinite values."""
    if not p.is_file():
        what = "not a regular file (a folder or a device)" if p.exists() else "no such file"
        raise ImportDataError(f"{p}: {what}")
    suffix = p.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            raw = pd.read_parquet(p)
            return raw, raw.apply(lambda c: np.isinf(pd.to_numeric(c, errors="coerce")))
        if suffix in _JSON:
            rows = _json_records(p)
            raw = pd.DataFrame.from_records(rows)
            nonfinite = [[_nonfinite(r.get(c)) for c in raw.columns] for r in rows]
            return raw, pd.DataFrame(nonfinite, columns=raw.columns, dtype=bool)
        if suffix in (".csv", ".tsv", ".txt"):
            form = _csv_form(p)
            raw = pd.read_csv(p, **form)
            text = pd.read_csv(p, **form, dtype=str, keep_default_na=False)
            return raw, text.apply(lambda c: c.str.strip().str.lower().isin(_NONFINITE))
    except (ValueError, OSError, TypeError, pd.errors.ParserError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ImportDataError(f"{p.name}: cannot read: {first}") from None
    raise ImportDataError(
        f"{p.name}: unknown file type {suffix!r}; use .csv, .tsv, .txt (comma- or "
        "tab-separated), .parquet, .jsonl or .json"
    )


#: JSON runs files: one object per line (.jsonl, .ndjson), or one array of objects (.json)
_JSON: Final[tuple[str, ...]] = (".jsonl", ".ndjson", ".json")


def _csv_form(p: Path) -> dict[str, str]:
    """``sep`` (and ``decimal``) of a CSV/TSV: a tab for .tsv, or for a header with tabs and no
    comma (a .txt or .csv written tab-separated had been read as one column; said in the log);
    else a comma, or a semicolon when the header has semicolons and no comma (a spreadsheet's
    CSV where the decimal mark is the comma, as its numbers then say: ``3,41``)."""
    if p.suffix.lower() == ".tsv":
        return {"sep": "\t"}
    with p.open(encoding="utf-8-sig", errors="replace") as f:
        header, body = f.readline(), f.read(65536)
    if "\t" in header and "," not in header:
        logger.warning("%s: read as tab-separated (its header has tabs and no comma)", p.name)
        return {"sep": "\t"}
    if ";" not in header or "," in header:
        return {"sep": ","}
    return {"sep": ";", "decimal": ","} if re.search(r"\d,\d", body) else {"sep": ";"}


def _nonfinite(v: Any) -> bool:
    """Whether a JSON value writes a non-finite number: NaN, Infinity, or a string of one ("inf",
    "NaN", as a CSV's text is read; a string had been an error or a finite run)."""
    if isinstance(v, str):
        return v.strip().lower() in _NONFINITE
    return isinstance(v, float) and not math.isfinite(v)


def _json_line(line: str, number: int) -> Any:
    """One line of a JSON-lines file; an error names the file's line (json's own said line 1)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"line {number} column {e.colno}: {e.msg}") from None


def _json_records(p: Path) -> list[dict[str, Any]]:
    """The runs of a JSON file as dicts, with NaN and Infinity as Python's json writes them."""
    text = p.read_text(encoding="utf-8-sig")
    if p.suffix.lower() == ".json":
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise ValueError("a .json runs file is one array of objects (one per run)")
    else:
        rows = [_json_line(line, i) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError("every run must be a JSON object of column: value")
    return rows


def _lr_notes(df: pd.DataFrame, renames: Mapping[str, str]) -> list[str]:
    """No LR values (a Sweeper column renamed away, or another tool's name for it: a
    ``--rename`` hint), or some runs without one (:func:`import_notes`)."""
    notes: list[str] = []
    away = [f"{old}={new}" for old, new in renames.items() if old in COLUMNS and new not in COLUMNS]
    if df["lr"].isna().all():
        hints = [] if away else rename_hints(df.columns, "lr")
        notes.append(
            "no lr values: no LR law can be fitted from these runs"
            + (f" (--rename {', '.join(away)} renamed a Sweeper column away)" if away else "")
            + (f"; import again with {' or '.join(hints)} and --replace?" if hints else "")
        )
    elif df["lr"].isna().any():
        k = int(df["lr"].isna().sum())
        notes.append(
            f"{k} of {len(df)} runs have no lr value: the LR and batch fits leave them out (only "
            "the loss law uses them)"
        )
    return notes


def _batch_notes(df: pd.DataFrame) -> list[str]:
    """No batch column (another tool's name for it: a ``--rename`` hint), a batch in sequences
    without a sequence length, or batch_tokens too small to be tokens (:func:`import_notes`)."""
    notes: list[str] = []
    batch_hints = rename_hints(df.columns, "batch_size") + rename_hints(df.columns, "batch_tokens")
    if df["batch_tokens"].isna().all() and df["batch_size"].isna().all() and batch_hints:
        notes.append(
            "no batch_size or batch_tokens column: no batch law can be fitted; import again "
            f"with {' or '.join(batch_hints)} and --replace?"
        )
    if df["batch_tokens"].isna().all() and df["batch_size"].notna().any():
        notes.append(
            "batch_size (sequences) without a sequence length: batch_tokens is unknown, so no "
            "batch-size law can be fitted, nor any law where it varies within a cell (import "
            "again with --seq-len, or a seq_len column, and --replace)"
        )
    bt, n = df["batch_tokens"].dropna(), df["n_params"].dropna()
    if len(bt) and len(n) and bt.max() < 4096 and n.median() > 1e7:
        notes.append(
            f"batch_tokens are at most {bt.max():g} for models of {n.median():.3g} parameters: "
            "if they count sequences, import them again as batch_size with --seq-len and "
            "--replace"
        )
    return notes


def import_notes(
    df: pd.DataFrame,
    renames: Mapping[str, str],
    sweep: str,
    declared: Mapping[str, Any] | None = None,
    *,
    with_study: bool = False,
) -> list[str]:
    """What an import accepted that a fit will miss or get wrong, said when it is imported rather
    than when a law is absent or off: no LR (a canonical column renamed away), a batch size in
    sequences without a sequence length (no batch law), batches too small to be tokens, tokens
    too few per parameter to be tokens, an N that counts the embeddings, several
    parametrizations, a sweep named as a published law set (a SWEEP argument then means the
    sweep). ``declared``: the conventions the import declares (:mod:`sweeper.study.declared`);
    ``with_study``: a study file came with the runs and says them."""
    from sweeper.fitting.provenance import named_parametrizations
    from sweeper.recipe.published import PUBLISHED_NAMES, published_key

    declared = declared or {}
    notes = _lr_notes(df, renames) + _batch_notes(df)
    per_param = float((df["tokens"] / df["n_params"]).median())
    if per_param < 0.01:
        notes.append(
            f"a median of {per_param:.2g} tokens per parameter: are the tokens in millions or "
            "billions (or N in thousands)? Sweeper reads both as plain counts"
        )
    elif per_param > MAX_TOKENS_PER_PARAM:
        notes.append(
            f"a median of {per_param:.3g} tokens per parameter: is N in thousands or millions "
            "(or the tokens counted in another unit)? Sweeper reads both as plain counts"
        )
    notes += _scale_notes(df, declared, with_study=with_study)
    notes += same_run_notes(df)
    repeated = int(df.attrs.get("repeated_rows", 0))
    if repeated:
        notes.append(
            f"{repeated} rows repeat another row exactly: imported once each (a run exported "
            "twice would count twice and narrow every interval)"
        )
    if declared.get("n_params") in (None, "non-embedding"):
        notes += _embedding_note(df)
    named = named_parametrizations(df)
    param = declared.get("parametrization") or (named[0] if len(named) == 1 else None)
    if param in ("mup", "completep") and "base_width" not in declared and not with_study:
        notes.append(
            f"{param} runs without a base width: its laws record none, so recommend and export "
            "ask for --base-width; declare it (--convention base_width=W, and output_mult if the "
            "logit multiplier was not 1)"
        )
    if len(named) > 1:
        notes.append(
            f"the parametrization column names {', '.join(named)}: a law fitted to these runs "
            "pools them, and records none; import each parametrization as its own sweep"
        )
    if published_key(sweep) in PUBLISHED_NAMES:
        notes.append(
            f"{sweep!r} is also a published law set's name: as a SWEEP argument it now means this "
            f"sweep (the published laws: --law {published_key(sweep)})"
        )
    return notes


#: the columns that say which run a row is, short of an id: a run exported twice has them all
_SAME_RUN: Final[tuple[str, ...]] = ("cell", "lr", "batch_tokens", "batch_size", "seed", "loss")


def same_run_notes(
    df: pd.DataFrame, fix: str = "drop them and import again with --replace"
) -> list[str]:
    """A note when rows share cell, LR, batch, seed and a finite loss exactly but differ
    elsewhere (an id, a timestamp): a run exported twice, which counts twice and narrows every
    interval (a fitting audit's file listed twice under new ids narrowed the exponent's interval
    by 30% in silence); exact repeats are dropped before (``repeated_rows``)."""
    done = df[np.isfinite(df["loss"].to_numpy(dtype=float))]
    twice = int(done.duplicated(subset=list(_SAME_RUN), keep="first").sum())
    if not twice:
        return []
    return [
        f"{twice} rows repeat another's cell, lr, batch, seed and loss exactly (other columns "
        f"differ): a run exported twice counts twice and narrows every interval; if they are, "
        f"{fix}"
    ]


def _scale_notes(df: pd.DataFrame, declared: Mapping[str, Any], *, with_study: bool) -> list[str]:
    """Numbers a fit would take as given but that look mis-scaled: N far below the blocks'
    12·L·d² of the runs' own width and depth (N in millions), a loss no LM has in nats per token
    (a perplexity), runs of only a few optimizer steps
    (a batch in tokens imported as sequences), and runs trained by Sweeper whose token unit the
    file does not carry (:data:`TOKENS_AS_IMPORTED` in their laws)."""
    from sweeper.recipe.scale import block_n_params

    notes: list[str] = []
    if {"width", "depth"} <= set(df.columns):
        g = df.dropna(subset=["width", "depth", "n_params"])
        if len(g):
            ratio = float((g["n_params"] / block_n_params(g["width"], g["depth"])).median())
            if ratio < 0.1:
                notes.append(
                    f"n_params is a median {1 / ratio:.3g}x below 12·L·d² of the runs' own width "
                    "and depth: is N in thousands or millions? Sweeper reads it as a plain count"
                )
    loss = df["loss"].dropna()
    if len(loss) and float(loss.median()) > MAX_LOSS_NATS:
        notes.append(
            f"a median loss of {float(loss.median()):.3g}: above a uniform prediction's over a "
            "256k vocabulary (ln 256k = 12.5 nats per token): is it a perplexity, or summed over "
            "a sequence? Sweeper reads the loss as nats per token"
        )
    steps = (df["tokens"] / df["batch_tokens"]).dropna()
    if len(steps) and float(steps.median()) < FEW_STEPS:
        notes.append(
            f"the runs train a median of {float(steps.median()):.3g} optimizer steps (tokens / "
            "batch_tokens): is the batch already in tokens? Import it again as batch_tokens, "
            "without --seq-len, with --replace"
        )
    src = df["source"].dropna().astype(str) if "source" in df.columns else pd.Series([], dtype=str)
    sweeps = sorted({v.removeprefix("sweep:") for v in src if v.startswith("sweep:")})
    if sweeps and "tokens" not in declared and not with_study:
        named = ", ".join(sweeps[:3]) + (", ..." if len(sweeps) > 3 else "")
        notes.append(
            f"these runs were trained by Sweeper (sweep {named}), but the file does not say in "
            "what unit their D and batch are: give --study with their study file, or "
            "--convention tokens=bytes for the built-in data, or their laws record 'as imported'"
        )
    return notes


def _embedding_note(df: pd.DataFrame) -> list[str]:
    """N seems to count the embeddings: with width and depth columns, n_params exceeds the
    blocks' 12·L·d² by about the same multiple of the width in every shape (a vocabulary's
    embeddings, V·d), and by 30% or more at the smallest. A count of the blocks alone exceeds it
    by a constant ratio, or by an FFN that varies with the shape (Step Law's), not by V·d."""
    from sweeper.recipe.scale import block_n_params

    if not {"width", "depth"} <= set(df.columns):
        return []
    g = df.dropna(subset=["width", "depth", "n_params"])
    g = g.groupby(["width", "depth"], as_index=False)["n_params"].median()
    if len(g) < 3:
        return []
    blocks = block_n_params(g["width"].astype(float), g["depth"].astype(float))
    extra = (g["n_params"] - blocks) / g["width"]
    ratio = float((g["n_params"] / blocks).max())
    if ratio < 1.3 or extra.min() <= 0 or extra.max() / extra.min() > 1.15:
        return []
    return [
        f"n_params exceeds the blocks' 12·L·d² by about {extra.median():.3g}·width in every "
        f"shape ({ratio:.2g}x at the smallest): it seems to count the embeddings (a vocabulary "
        "of that size untied, or twice it tied), whose share shrinks as models grow and steepens "
        "the N exponent; import the non-embedding count, or declare --convention n_params=total"
    ]


def _check_steps(df: pd.DataFrame, name: str) -> list[str]:
    """A run trains at least one optimizer step: tokens >= its batch in tokens (tokens counted
    in billions, or a batch in tokens imported as sequences, break it)."""
    steps = (df["tokens"] / df["batch_tokens"]).to_numpy(dtype=float)
    bad = np.isfinite(steps) & (steps < 1)
    if not bad.any():
        return []
    i = int(np.argmax(bad))
    return [
        f"{name}: row {i + 1} trains {df['tokens'].iloc[i]:.4g} tokens at a batch of "
        f"{df['batch_tokens'].iloc[i]:.4g} tokens ({int(bad.sum())} rows less than one step): "
        "are the tokens in millions or billions, or the batch already in tokens (import it as "
        "batch_tokens, without --seq-len)?"
    ]


def _renamed(raw: pd.DataFrame, renames: dict[str, str], name: str) -> pd.DataFrame:
    """``raw`` with ``renames`` (old → new) applied; raises ImportDataError when a rename names a
    missing column or leaves two columns of one name, a required column is missing, or there
    are no rows (``name``: the file's, for the messages)."""
    unknown = [old for old in renames if old not in raw.columns]
    if unknown:
        cols = ", ".join(map(str, raw.columns))
        raise ImportDataError(f"{name}: cannot rename missing column(s) {unknown}; columns: {cols}")
    df = raw.rename(columns=renames)
    df = df.rename(columns=_case_folded(df.columns, name))
    dupes = sorted({str(c) for c in df.columns if list(df.columns).count(c) > 1})
    if dupes:
        raise ImportDataError(f"{name}: renames leave duplicate column(s) {dupes}")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        cols = ", ".join(map(str, df.columns))
        derive = (
            "; a dense transformer's non-embedding N is about 12·depth·width², but count your "
            "model's own (a column n_params, and --convention n_params=total if it counts all)"
            if "n_params" in missing and {"width", "depth"} <= set(df.columns)
            else ""
        )  # (not derived here: Sweeper cannot know the model's MLP ratio, heads or tying)
        hint = "".join(f"; {h}?" for c in missing for h in rename_hints(df.columns, c))
        raise ImportDataError(
            f"{name}: missing required column(s) {', '.join(missing)} "
            f"(columns: {cols}; use --rename OLD=NEW{hint}{derive})"
        )
    if df.empty:
        raise ImportDataError(f"{name}: no rows")
    return df


def rename_hints(columns: Iterable[Any], wanted: str) -> list[str]:
    """``--rename OLD=wanted`` for each column of ``columns`` that other tools name so (a file
    with ``learning_rate`` and no ``lr`` had imported with only "no lr values"); for the
    caller to give where ``wanted`` is missing or empty."""
    present = [str(c) for c in columns]
    alike = _LOOKALIKES.get(wanted, ())
    olds = [c for c in present if c.strip().lower() in alike and c.strip().lower() not in COLUMNS]
    return [f"--rename {_quoted(c)}={wanted}" for c in olds]


def _quoted(column: str) -> str:
    """``column`` as a shell takes it in ``--rename`` ("smooth loss" in quotes)."""
    return f'"{column}"' if re.search(r"[^\w.-]", column) else column


def _case_folded(columns: Iterable[Any], name: str) -> dict[Any, str]:
    """Columns that are a Sweeper column but for case or spaces (W&B's "State"), renamed to it
    where the file has no column of that name; each said in the log."""
    present = {str(c) for c in columns}
    out: dict[Any, str] = {}
    for c in columns:
        key = str(c).strip().lower()
        if str(c) != key and key in COLUMNS and key not in present and key not in out.values():
            out[c] = key
            logger.warning("%s: column %r read as Sweeper's %r", name, str(c), key)
    return out


def _numeric_column(
    original: pd.Series, col: str, excused: np.ndarray, name: str
) -> tuple[pd.Series, str]:
    """The canonical numeric column ``col`` as floats, and its first problem ("" if none): a
    non-numeric value, an empty required value, or a value out of range (> 0 for ``_POSITIVE``
    columns, >= 0 for the others; rows where ``excused`` may be empty or infinite)."""
    values = pd.to_numeric(original, errors="coerce").astype(float)
    empty = original.isna() | original.astype(str).str.strip().str.lower().isin(_EMPTY)
    non_numeric = (values.isna() & ~empty).to_numpy()
    if non_numeric.any():
        i = int(np.argmax(non_numeric))
        return values, (
            f"{name}: column {col!r} has a non-numeric value {original.iloc[i]!r} in row {i + 1}"
        )
    v = values.to_numpy()
    if col in REQUIRED_COLUMNS:
        blank = empty.to_numpy() & ~excused
        if blank.any():
            i = int(np.argmax(blank))
            hint = (
                " (an empty value is not read as a diverged run: mark one in a diverged column, "
                "or in a CSV file write its loss as nan or inf; a run that did not finish: a "
                "state column; or drop the row)"
                if col == "loss"
                else ""
            )
            return values, f"{name}: column {col!r} is empty or NaN in row {i + 1}{hint}"
    with np.errstate(invalid="ignore"):
        bad = (~np.isfinite(v) & ~np.isnan(v)) & ~excused
        bad |= (v <= 0) if col in _POSITIVE else (v < 0)
    if bad.any():
        i = int(np.argmax(bad))
        rule = "> 0" if col in _POSITIVE else ">= 0"
        return (
            values,
            f"{name}: column {col!r} must be {rule} and finite, got {v[i]:g} in row {i + 1}",
        )
    return values, ""


def _bool_column(df: pd.DataFrame, col: str, name: str, problems: list[str]) -> pd.Series | None:
    if col not in df.columns:
        return None
    s = df[col]
    if s.dtype == bool:
        return s
    text = s.astype(str).str.strip().str.lower().where(s.notna(), "")
    ok = text.isin(_TRUE | _FALSE | {"true", "false", "1.0", "0.0"})
    if not ok.all():
        i = int(np.argmax(~ok.to_numpy()))
        problems.append(f"{name}: column {col!r} has {s.iloc[i]!r} in row {i + 1}; use true/false")
        return None
    return text.isin(_TRUE | {"1.0"})


def _jsonable_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): _jsonable(v) for k, v in row.items()}


def _jsonable(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, str):
        return v
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return str(v)


def imported_status(
    name: str, url: str | None = None, row: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The status of an imported sweep, as far as its runs tell: ``{"sweep", "kind": "imported",
    "imported": {file, n_rows, created_at}, "cells": [{cell, width, depth, tokens, runs, complete,
    diverged, failed, pruned, running, waiting, target, best_loss, best_lr, best_batch_size}]}``
    with one row per cell (smallest first). Nothing runs or waits, and there is no target: a
    run is ``complete`` with a loss (COMPLETE, or no state recorded) and not diverged. The best
    loss is the lowest mean over the seeds of a point (lr, batch size), as a launched trial's."""
    row = row if row is not None else storage.get_sweep(name, url)
    meta = dict((row or {}).get("meta") or {})
    runs = load_runs(name, url)
    out = []
    if not runs.empty:
        order = runs.groupby("cell", sort=False)[["n_params", "tokens"]].first()
        cells_by_size = order.sort_values(["n_params", "tokens"], na_position="last").index
        for cell in cells_by_size:
            out.append(_imported_cell(str(cell), runs[runs["cell"] == cell]))
    created = (row or {}).get("created_at")
    imported = {
        "file": meta.get("file"),
        "n_rows": meta.get("n_rows", len(runs)),
        "created_at": created.isoformat() if created is not None else None,
    }
    return {"sweep": name, "kind": "imported", "imported": imported, "cells": out}


def _imported_cell(cell: str, runs: pd.DataFrame) -> dict[str, Any]:
    """One cell's line of :func:`imported_status` from its runs (a runs table)."""
    state = runs["state"].fillna("COMPLETE").astype(str)
    diverged = runs["diverged"].fillna(False).astype(bool)
    done = runs[(state == "COMPLETE") & ~diverged & runs["loss"].notna()]
    best: dict[str, Any] = {"best_loss": None, "best_lr": None, "best_batch_size": None}
    keys = [k for k in ("lr", "batch_size") if runs[k].notna().any()]
    if keys:  # a point with a diverged seed bounds the range, as a launched trial's (no best)
        bound = runs[diverged].set_index(keys).index
        done = done[~done.set_index(keys).index.isin(bound)]
    if not done.empty:
        points = (
            done.groupby(keys, dropna=False)["loss"].mean().reset_index()
            if keys
            else done[["loss"]]
        )
        top = points.loc[points["loss"].idxmin()]
        best["best_loss"] = float(top["loss"])
        if "lr" in keys and pd.notna(top["lr"]):
            best["best_lr"] = float(top["lr"])
        if "batch_size" in keys and pd.notna(top["batch_size"]):
            best["best_batch_size"] = int(top["batch_size"])

    def first(col: str) -> int | float | None:
        if col not in runs:
            return None
        vals = pd.to_numeric(runs[col], errors="coerce").dropna()
        if vals.empty:
            return None
        v = float(vals.iloc[0])
        return int(v) if v.is_integer() else v

    return {
        "cell": cell,
        "width": first("width"),
        "depth": first("depth"),
        "tokens": first("tokens"),
        "runs": len(runs),
        "complete": len(done),
        "diverged": int(diverged.sum()),
        "failed": int((state == "FAIL").sum()),
        "pruned": int((state == "PRUNED").sum()),
        "running": 0,
        "waiting": 0,
        "target": None,
        **best,
    }

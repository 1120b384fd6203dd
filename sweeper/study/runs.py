"""The runs table: one row per training run, with column names defined once.

Both sweeps launched by Sweeper and runs imported from elsewhere become a DataFrame with these
columns. Units: ``n_params`` is non-embedding parameters, ``n_params_total`` includes embeddings,
``tokens`` is the training-token budget D, ``flops`` is the training compute C (launched sweeps:
6·N·D + 6·L·T·d·D; where a source gives none, :func:`normalize_runs` fills in 6·N·D without
attention, and ``sweeper fit`` then labels the law's flops ``"6ND (no attention)"``),
``batch_size`` is in sequences, ``batch_tokens`` = ``batch_size * seq_len``, ``loss`` is the final
validation loss in nats per token.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

import numpy as np
import pandas as pd

__all__ = [
    "CELL_KEYS",
    "COLUMNS",
    "DEVICE_PRECISION",
    "NUMERIC_COLUMNS",
    "canonical_order",
    "device_kinds",
    "empty_runs",
    "normalize_runs",
    "trained",
]

#: canonical columns, in display order
COLUMNS: Final[tuple[str, ...]] = (
    "cell",
    "width",
    "depth",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "lr",
    "batch_size",
    "seq_len",
    "batch_tokens",
    "loss",
    "state",
    "diverged",
    "seed",
    "wall_s",
    "source",
)

NUMERIC_COLUMNS: Final[tuple[str, ...]] = (
    "width",
    "depth",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "lr",
    "batch_size",
    "seq_len",
    "batch_tokens",
    "loss",
    "seed",
    "wall_s",
)

#: the columns that identify a cell of the ladder when ``cell`` is absent
CELL_KEYS: Final[tuple[str, ...]] = ("n_params", "tokens")

#: optuna-style trial states; imported runs are COMPLETE
STATES: Final[tuple[str, ...]] = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")


def empty_runs() -> pd.DataFrame:
    """An empty runs table with the canonical columns."""
    return normalize_runs(pd.DataFrame({c: [] for c in COLUMNS}))


def trained(df: pd.DataFrame) -> pd.Series:
    """Which rows are runs that trained: completed, or stopped as diverged (not the failed ones,
    the trials a relaunch closed when their driver stopped, those still running, or ASHA's pruned
    ones, stopped part-way). A frame without ``state`` or ``diverged`` reads as
    :func:`normalize_runs` fills them: completed."""
    state = df["state"] if "state" in df else pd.Series("COMPLETE", index=df.index)
    diverged = df["diverged"] if "diverged" in df else pd.Series(False, index=df.index)
    return (state.fillna("COMPLETE") == "COMPLETE") | diverged.fillna(False).astype(bool)


def normalize_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Return a copy with every canonical column present and derived columns filled.

    Missing numeric columns become NaN; ``batch_tokens`` is derived from ``batch_size * seq_len``
    where absent; ``flops`` from ``6 * n_params * tokens`` (no attention term) where absent;
    ``cell`` from
    ``(n_params, tokens)`` where absent; ``state`` defaults to COMPLETE, ``diverged`` to False.
    Extra columns are kept after the canonical ones.
    """
    out = df.copy()
    for col in NUMERIC_COLUMNS:
        if col not in out.columns:
            out[col] = np.nan
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    missing_bt = out["batch_tokens"].isna()
    out.loc[missing_bt, "batch_tokens"] = (
        out.loc[missing_bt, "batch_size"] * out.loc[missing_bt, "seq_len"]
    )
    missing_fl = out["flops"].isna()
    out.loc[missing_fl, "flops"] = (
        6.0 * out.loc[missing_fl, "n_params"] * out.loc[missing_fl, "tokens"]
    )
    if "cell" not in out.columns:
        out["cell"] = None
    no_cell = out["cell"].isna()
    if no_cell.any():
        n_name = _grouped(out.loc[no_cell, "n_params"])
        d_name = _grouped(out.loc[no_cell, "tokens"])
        out.loc[no_cell, "cell"] = [f"N{n}-D{d}" for n, d in zip(n_name, d_name, strict=True)]
    out["cell"] = out["cell"].astype(str)
    if "state" not in out.columns:
        out["state"] = "COMPLETE"
    out["state"] = out["state"].fillna("COMPLETE").astype(str)
    if "diverged" not in out.columns:
        out["diverged"] = False
    out["diverged"] = out["diverged"].fillna(False).astype(bool)
    if "source" not in out.columns:
        out["source"] = None
    extra = [c for c in out.columns if c not in COLUMNS]
    return out[[*COLUMNS, *extra]].reset_index(drop=True)


#: values closer than this (relative) are one cell's: a file's N or D jittered by a logger
CELL_TOLERANCE: Final[float] = 0.01


def _grouped(values: pd.Series) -> list[str]:
    """Each value's name in a cell's: values within :data:`CELL_TOLERANCE` of the smallest of
    their group share one name, the commonest of their 3-digit forms (rounding alone split
    values either side of a rounding edge, 8.495e8 and 8.505e8, into two cells)."""
    x = values.to_numpy(dtype=float)
    group = np.full(len(x), -1)
    order = np.argsort(x, kind="stable")
    start, g = math.nan, -1
    for i in order:
        if not np.isfinite(x[i]):
            continue
        if not (x[i] <= start * (1.0 + CELL_TOLERANCE)):
            start, g = x[i], g + 1
        group[i] = g
    names = [_fmt(v) for v in x]
    common: dict[int, str] = {}
    for k in set(group.tolist()) - {-1}:
        forms = [names[i] for i in np.flatnonzero(group == k)]
        common[k] = max(sorted(set(forms)), key=forms.count)
    return [common[k] if k >= 0 else names[i] for i, k in enumerate(group)]


def _fmt(x: float) -> str:
    if x is None or not np.isfinite(x):
        return "nan"
    return f"{x:.3g}".replace("+", "")


#: the columns that order runs canonically (a run's place never depends on the storage's order)
_ORDER: Final[tuple[str, ...]] = ("cell", "lr", "batch_tokens", "seed", "loss")


def canonical_order(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` sorted by cell, lr, batch_tokens, seed and loss (missing values last), index
    reset: every resampling sees the runs in the same order, however the storage returned them."""
    keys = [c for c in _ORDER if c in runs.columns]
    if not keys or runs.empty:
        return runs.reset_index(drop=True)
    return runs.sort_values(keys, kind="mergesort", na_position="last").reset_index(drop=True)


#: the built-in training loop's precision on each kind of device (proxy_models.training)
DEVICE_PRECISION: Final[dict[str, str]] = {"cpu": "fp32", "cuda": "bf16 autocast"}


def device_kinds(devices: Iterable[Any]) -> set[str]:
    """The kinds of device ("cpu", "cuda", ...) among runs' recorded ``device`` values (torch's
    names, e.g. "cuda:0"); missing or empty values say nothing."""
    return {d.split(":")[0] for d in devices if isinstance(d, str) and d}

"""Steps shared by the power-law fits of the optimum (:mod:`sweeper.fitting.power_law`,
:mod:`sweeper.fitting.band_law`): checking names and cells, the log-space design, the fit's
summary statistics and its doubts, and turning a fit into a :class:`~sweeper.fitting.laws.PowerLaw`.

Natural-log units throughout (an error of 0.1 ≈ 10%). The names are importable from
:mod:`sweeper.fitting.power_law` too, where they were first defined.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import pandas as pd

from sweeper.errors import FitError
from sweeper.fitting._common import FitWarning, min_cells, percentile_ci
from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PREDICTORS, TARGETS, PowerLaw
from sweeper.fitting.methods import KEPT_EDGE

#: predictors that measure the model's size: a law with none of them holds n_params fixed
_SIZE_PREDICTORS: Final[frozenset[str]] = frozenset({"n_params", "flops", "width", "depth"})


class _Fit:
    """Coefficients [log a, b...] in centred coordinates (x - mu), with their resamples."""

    def __init__(
        self,
        *,
        coef: np.ndarray,
        boot: np.ndarray,
        mu: np.ndarray,
        cv: float | None,
        holdout: float | None,
        resid_std: float,
        n_dropped: int,
        level: float,
        interval: str = "",
        exact_ci: np.ndarray | None = None,
    ) -> None:
        self.coef, self.boot, self.mu = coef, boot, mu
        self.cv, self.holdout, self.resid_std = cv, holdout, resid_std
        self.n_dropped, self.level, self.interval = n_dropped, level, interval
        #: the coefficients' interval where it is known exactly (the t interval), uncentred
        self.exact_ci = exact_ci

    def uncentred(self, c: np.ndarray) -> np.ndarray:
        """[log a, b...] for log y = log a + Σ b log x (undo the centring)."""
        c = np.atleast_2d(c)
        out = c.copy()
        out[:, 0] = c[:, 0] - c[:, 1:] @ self.mu
        return out


def _check_names(target: str, predictors: Sequence[str]) -> tuple[str, ...]:
    if target not in TARGETS:
        raise FitError(f"target must be one of {TARGETS}, got {target!r}")
    preds = tuple(predictors)
    if not preds:
        raise FitError("at least one predictor is needed")
    bad = [p for p in preds if p not in PREDICTORS]
    if bad:
        raise FitError(f"unknown predictor(s) {bad}; known: {', '.join(PREDICTORS)}")
    if len(set(preds)) != len(preds):
        raise FitError(f"predictors repeat: {list(preds)}")
    return preds


def _usable_cells(
    frame: pd.DataFrame, target: str, preds: tuple[str, ...]
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    missing = [c for c in (target, *preds) if c not in frame.columns]
    if missing:
        raise FitError(f"the optima have no column(s) {missing}")
    left_out: list[tuple[str, str]] = []
    keep = np.ones(len(frame), dtype=bool)
    cells = frame["cell"].astype(str) if "cell" in frame else pd.Series(map(str, frame.index))
    for i, (_, row) in enumerate(frame.iterrows()):
        why = ""
        if "usable" in frame and not bool(row["usable"]):
            why = str(row.get("reason", "") or "not usable")
        elif (
            target == "batch_tokens"
            and "batch_range_low" in frame
            and not np.isfinite(pd.to_numeric(row["batch_range_low"], errors="coerce"))
        ):
            # a batch size that was not swept inside a cell says nothing about its optimum; two
            # batch sizes were, but too few for the parabola's quadratic (a fitting audit: they
            # had read "not swept")
            two = any("batch swept at 2 values only" in n for n in (row.get("notes") or ()))
            why = (
                "batch swept at only 2 values in this cell (the parabola needs 3)"
                if two
                else "batch size not swept in this cell"
            )
        else:
            for c in (target, *preds):
                v = pd.to_numeric(row[c], errors="coerce")
                if not (np.isfinite(v) and v > 0):
                    why = f"no positive {c}"
                    break
        if why:
            keep[i] = False
            left_out.append((cells.iloc[i], why))
    return frame[keep], left_out


def _log_design(
    used: pd.DataFrame,
    target: str,
    preds: tuple[str, ...],
    left_out: list[tuple[str, str]],
) -> tuple[np.ndarray, np.ndarray]:
    n = len(used)
    need = min_cells(len(preds))
    if n < need:
        why = "; ".join(f"{c}: {r}" for c, r in left_out[:8])
        more = f" (+{len(left_out) - 8} more)" if len(left_out) > 8 else ""
        raise FitError(
            f"need at least {need} usable cells to fit {target} on {', '.join(preds)}, got {n}"
            + (f"; left out {why}{more}" if why else "")
        )
    lx = check_predictor_design(used, preds)
    return lx, np.log(used[target].to_numpy(dtype=float))


def check_predictor_design(cells: pd.DataFrame, preds: tuple[str, ...]) -> np.ndarray:
    """The log predictors of the usable ``cells`` (one row each), refused (FitError) when one
    does not vary or they are collinear: the law's exponents would not be determined. One rule
    for the per-cell fits and the surface fit."""
    n = len(cells)
    lx = np.log(cells[list(preds)].to_numpy(dtype=float))
    for j, p in enumerate(preds):
        if np.ptp(lx[:, j]) < 1e-9:
            raise FitError(
                f"predictor {p!r} does not vary across the {n} usable cells "
                f"(all {np.exp(lx[0, j]):.4g}); drop it from the predictors (--predictors)"
            )
    if len(preds) > 1 and np.linalg.matrix_rank(lx - lx.mean(axis=0), tol=1e-6) < len(preds):
        raise FitError(
            f"predictors {', '.join(preds)} are collinear across the usable cells "
            "(one is a power of the others): fit with fewer predictors (e.g. --predictors "
            f"{preds[0]})"
        )
    return lx


def _round(v: float) -> float:
    """Undo the last-digit noise of exp(log(x)) so domains print as the data's values."""
    return float(f"{v:.12g}")


def _rms(err: np.ndarray) -> float | None:
    err = err[np.isfinite(err)]
    return float(np.sqrt(np.mean(err**2))) if err.size else None


def _holdout(loo_err: np.ndarray, lx: np.ndarray) -> float | None:
    """|error| on the largest cell (largest product of its predictors) when it is left out."""
    e = loo_err[int(np.argmax(lx.sum(axis=1)))]
    return float(abs(e)) if np.isfinite(e) else None


def _resid_std(resid: np.ndarray, k: int) -> float:
    dof = resid.size - k - 1
    return float(np.sqrt(np.sum(resid**2) / dof)) if dof > 0 else 0.0


def _doubts(fit: _Fit, n_cells: int) -> list[str]:
    msgs = []
    if n_cells < 5:
        msgs.append(
            f"only {n_cells} cells: the intervals are wide and rest on the law being a straight "
            "line in log space"
        )
    if len(fit.boot) and fit.n_dropped > 0.1 * (len(fit.boot) + fit.n_dropped):
        msgs.append(
            f"{fit.n_dropped} of {len(fit.boot) + fit.n_dropped} resamples lost a predictor's "
            "variation and were dropped: too few distinct cells"
        )
    if fit.cv is not None and fit.cv > 0.5:
        msgs.append(f"leave-one-cell-out error {fit.cv:.2f} (natural log): the law fits poorly")
    for m in msgs:
        warnings.warn(m, FitWarning, stacklevel=4)  # past the BLAS wrapper
    return msgs


def held_ranges(
    cells: pd.DataFrame, target: str, predictors: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """(min, max) over ``cells`` (an optima frame) of each variable the law does not model.

    See the :mod:`sweeper.fitting.power_law` docstring for which; a variable without a positive value in every cell is
    skipped. Units: those of the runs (tokens and batch in the sweep's token unit).
    """
    preds = set(predictors)
    names = []
    if not preds & _SIZE_PREDICTORS:
        names.append("n_params")
    if not preds & {"tokens", "flops"}:
        names.append("tokens")
    if len(preds) < 2 or not preds & {"tokens", "flops"}:
        names.append("tokens_per_param")
    if target == "lr":
        names.append("batch_tokens")
    if "depth" not in preds:  # (N moves with width and depth alike; a law at one depth knows one)
        names.append("depth")
    out: dict[str, tuple[float, float]] = {}
    for name in names:
        if name == "tokens_per_param":
            if "tokens" not in cells or "n_params" not in cells:
                continue
            v = pd.to_numeric(cells["tokens"], errors="coerce").to_numpy(dtype=float)
            v = v / pd.to_numeric(cells["n_params"], errors="coerce").to_numpy(dtype=float)
        elif name in cells:
            v = pd.to_numeric(cells[name], errors="coerce").to_numpy(dtype=float)
        else:
            continue
        if v.size and np.all(np.isfinite(v) & (v > 0)):
            out[name] = (_round(float(v.min())), _round(float(v.max())))
    return out


def _make_law(
    fit: _Fit,
    *,
    target: str,
    preds: tuple[str, ...],
    lx: np.ndarray,
    n_cells: int,
    n_points: int,
    method: str,
    notes: list[str],
    curvature: float | None,
    fp: str,
    held: Mapping[str, tuple[float, float]],
    source: str,
    conventions: Conventions | None,
) -> PowerLaw:
    coef = fit.uncentred(fit.coef)[0]
    boot = fit.uncentred(fit.boot) if len(fit.boot) else np.zeros((0, len(coef)))
    ci = percentile_ci(boot, fit.level) if len(boot) >= 2 else None
    if fit.exact_ci is not None:  # (exact, where the draws only approximate it)
        ci = fit.exact_ci
    exps_ci = (
        {p: (float(ci[0, j + 1]), float(ci[1, j + 1])) for j, p in enumerate(preds)}
        if (ci is not None)
        else {}
    )
    conv = (conventions or Conventions()).with_held(held)
    domain = {
        p: (_round(np.exp(lx[:, j].min())), _round(np.exp(lx[:, j].max())))
        for j, p in enumerate(preds)
    }
    return PowerLaw(
        target=target,
        predictors=preds,
        source=source,
        method=method,
        conventions=conv,
        domain=domain,
        log_prefactor=float(coef[0]),
        exponents={p: float(coef[j + 1]) for j, p in enumerate(preds)},
        exponents_ci=exps_ci,
        prefactor_ci=(float(np.exp(ci[0, 0])), float(np.exp(ci[1, 0]))) if ci is not None else None,
        # every draw the fit made (n_boot): a diff's corrected intervals reach into tails of
        # 0.5% and below, and had rested on the first 1000 of its 4000 (4 draws a tail)
        boot_coefs=tuple(tuple(float(v) for v in r) for r in boot),
        residual_std=fit.resid_std,
        n_cells=n_cells,
        n_points=n_points,
        cv_error=fit.cv,
        holdout_error=fit.holdout,
        loss_curvature=curvature,
        fingerprint=fp,
        notes=tuple(notes),
    )


def kept_edges(used: pd.DataFrame, target: str) -> list[str]:
    """A note naming the cells fitted with their ``target`` optimum on the edge of the range
    (``keep_edge``): bounds, not optima, as is the law through them (a diff audit's ratio of
    6.3 from a side whose every best LR was the grid's top said nothing of it)."""
    col = "edge" if target == "lr" else "batch_edge"
    if col not in used:
        return []
    kept = [f"{c} ({e})" for c, e in zip(used["cell"], used[col], strict=True) if isinstance(e, str)]
    if not kept:
        return []
    return [f"{len(kept)} of {len(used)} {KEPT_EDGE} (bounds, not optima; the law through them "
            f"is one too): {'; '.join(kept)}"]  # fmt: skip

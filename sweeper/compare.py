"""Fitted laws beside published ones: predictions at a sweep's cells and at a target, and the
exponents side by side.

Every law is evaluated in its own conventions. DeepSeek's compute is C = M·D with
M = 72·L·d² + 12·L·d·T non-embedding FLOPs per token (L layers, d width, T context); where a point
has no width, depth or sequence length, M is approximated by 6N and the row says so. Sweeper's
``flops`` (convention "6ND") is the point's ``flops`` column where known, else 6·N·D. A target given
as width/depth gets N = 12·L·d² (non-embedding parameters of a standard transformer block).

Pure functions on DataFrames; the CLI (``sweeper compare``) prints them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import TargetError
from sweeper.fit.optimum import CellOptimum, optima_frame
from sweeper.laws import KaplanLRLaw, Law, LossLaw, PowerLaw

__all__ = [
    "cell_points",
    "compare_exponents",
    "compare_laws",
    "law_formula",
    "law_label",
    "target_point",
]

_SYMBOL: Final[dict[str, str]] = {
    "n_params": "N",
    "tokens": "D",
    "flops": "C",
    "width": "d",
    "depth": "L",
}
_POINT_COLUMNS: Final[tuple[str, ...]] = (
    "point",
    "n_params",
    "tokens",
    "flops",
    "width",
    "depth",
    "seq_len",
    "measured_lr",
    "measured_batch_tokens",
    "on_edge",
)


def law_label(law: Law) -> str:
    """A short name: ``steplaw`` for a published law, ``<sweep>#<id> <method>`` for a fitted one."""
    if law.method == "published":
        return law.source
    ident = f"#{law.id}" if law.id is not None else ""
    return f"{law.source}{ident} {law.method}".strip()


def law_formula(law: Law, *, digits: int = 3) -> str:
    """``a · N^b · D^c`` with 95% intervals on fitted exponents, e.g. ``78.4·N^-0.77[-0.88,-0.67]``."""
    if isinstance(law, PowerLaw):
        parts = [f"{law.prefactor:.{digits}g}"]
        for p in law.predictors:
            b = law.exponents[p]
            term = f"{_SYMBOL.get(p, p)}^{b:.{digits}g}"
            ci = law.exponents_ci.get(p)
            if ci is not None and ci[0] != ci[1]:
                term += f"[{ci[0]:.{digits}g},{ci[1]:.{digits}g}]"
            parts.append(term)
        return "·".join(parts)
    if isinstance(law, KaplanLRLaw):
        return f"{law.c0:.4g} − {law.c1:.4g}·ln N"
    if isinstance(law, LossLaw):
        return f"{law.E:.3g} + {law.A:.3g}/N^{law.alpha:.3g} + {law.B:.3g}/D^{law.beta:.3g}"
    return law.kind


def cell_points(optima: Sequence[CellOptimum] | pd.DataFrame) -> pd.DataFrame:
    """One row per cell with its scale and measured optimum (``measured_batch_tokens`` only where
    the batch size was swept); columns as :data:`_POINT_COLUMNS`."""
    f = optima if isinstance(optima, pd.DataFrame) else optima_frame(optima)
    out = pd.DataFrame({"point": f["cell"].astype(str)})
    for c in ("n_params", "tokens", "flops", "width", "depth", "seq_len"):
        out[c] = pd.to_numeric(f[c], errors="coerce").astype(float) if c in f else np.nan
    out["measured_lr"] = pd.to_numeric(f["lr"], errors="coerce").astype(float)
    bt = pd.to_numeric(f["batch_tokens"], errors="coerce").astype(float)
    swept = f["batch_range_low"].notna() if "batch_range_low" in f else pd.Series(False, f.index)
    out["measured_batch_tokens"] = bt.where(swept)
    out["on_edge"] = f["on_edge"].astype(bool) if "on_edge" in f else False
    return out.reset_index(drop=True)


def target_point(
    *,
    tokens: float,
    n_params: float | None = None,
    width: float | None = None,
    depth: float | None = None,
    context: float | None = None,
) -> pd.DataFrame:
    """The one-row points frame of a target: ``n_params`` (non-embedding) and ``tokens``, or a shape
    (``width``, ``depth``, ``context``) and ``tokens``; N = 12·L·d² when only the shape is given."""
    for k, v in (("tokens", tokens), ("n_params", n_params), ("width", width), ("depth", depth)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise TargetError(f"target {k} must be positive, got {v}")
    if context is not None and not context > 0:
        raise TargetError(f"target context must be positive, got {context}")
    if n_params is None:
        if width is None or depth is None:
            raise TargetError("give the target's --params, or its --width and --depth")
        n_params = 12.0 * depth * width**2
    row = {
        "point": "target",
        "n_params": float(n_params),
        "tokens": float(tokens),
        "flops": 6.0 * n_params * tokens,
        "width": float(width) if width is not None else np.nan,
        "depth": float(depth) if depth is not None else np.nan,
        "seq_len": float(context) if context is not None else np.nan,
        "measured_lr": np.nan,
        "measured_batch_tokens": np.nan,
        "on_edge": False,
    }
    return pd.DataFrame([row], columns=list(_POINT_COLUMNS))


def compare_laws(laws: Sequence[Law], points: pd.DataFrame) -> pd.DataFrame:
    """Every law (lr and batch_tokens targets) evaluated at every point.

    ``points`` has the columns of :func:`cell_points` / :func:`target_point`. Returns one row per
    (point, law): point, law (label), source, target, value, low, high (the law's interval; equal to
    value for published laws), measured, ratio (value / measured), extrapolation (largest factor
    beyond the law's fitted domain, 1 inside it), note.
    """
    rows: list[dict[str, Any]] = []
    for law in laws:
        if law.target not in ("lr", "batch_tokens"):
            continue
        label = law_label(law)
        for _, p in points.iterrows():
            scale, note = _scale_for(law, p)
            measured = float(p.get(f"measured_{law.target}", np.nan))
            value = low = high = extrap = np.nan
            if scale is not None:
                value = law.predict(scale)
                low, high = law.interval(scale)
                factors = law.extrapolation(scale)
                extrap = max([1.0, *factors.values()])
            rows.append(
                {
                    "point": p["point"],
                    "law": label,
                    "source": law.source,
                    "target": law.target,
                    "value": value,
                    "low": low,
                    "high": high,
                    "measured": measured,
                    "ratio": value / measured if measured > 0 else np.nan,
                    "extrapolation": extrap,
                    "note": note,
                }
            )
    cols = ["point", "law", "source", "target", "value", "low", "high", "measured", "ratio"]
    return pd.DataFrame(rows, columns=[*cols, "extrapolation", "note"])


def compare_exponents(fitted: Sequence[Law], published: Sequence[Law]) -> pd.DataFrame:
    """Exponents of fitted power laws beside the published ones for the same target and predictor.

    Columns: target, predictor, law, fitted, low, high (the fitted 95% interval), published (law
    key), published_value, inside (whether the published exponent lies in the fitted interval).
    """
    rows = []
    for f in fitted:
        if not isinstance(f, PowerLaw):
            continue
        for pub in published:
            if not isinstance(pub, PowerLaw) or pub.target != f.target:
                continue
            for p in f.predictors:
                if p not in pub.exponents:
                    continue
                lo, hi = f.exponents_ci.get(p, (np.nan, np.nan))
                rows.append(
                    {
                        "target": f.target,
                        "predictor": p,
                        "law": law_label(f),
                        "fitted": f.exponents[p],
                        "low": lo,
                        "high": hi,
                        "published": pub.source,
                        "published_value": pub.exponents[p],
                        "inside": bool(lo <= pub.exponents[p] <= hi),
                    }
                )
    cols = ["target", "predictor", "law", "fitted", "low", "high", "published"]
    return pd.DataFrame(rows, columns=[*cols, "published_value", "inside"])


def _scale_for(law: Law, p: Mapping[str, Any]) -> tuple[dict[str, float] | None, str]:
    """The law's predictors at point ``p``, in the law's conventions, and a note on how."""
    scale: dict[str, float] = {}
    notes = []
    for name in law.predictors:
        if name == "flops":
            value, note = _flops(law, p)
            if note:
                notes.append(note)
        else:
            value = _num(p.get(name))
        if not (math.isfinite(value) and value > 0):
            return None, f"needs {name}, which this point lacks"
        scale[name] = value
    return scale, "; ".join(notes)


def _flops(law: Law, p: Mapping[str, Any]) -> tuple[float, str]:
    n, d = _num(p.get("n_params")), _num(p.get("tokens"))
    if law.conventions.get("flops") == "M*D":
        width, depth, seq = _num(p.get("width")), _num(p.get("depth")), _num(p.get("seq_len"))
        if all(math.isfinite(v) and v > 0 for v in (width, depth, seq)):
            m = 72.0 * depth * width**2 + 12.0 * depth * width * seq
            return m * d, ""
        return 6.0 * n * d, "M approximated by 6N (no width/depth/seq_len)"
    c = _num(p.get("flops"))
    return (c, "") if math.isfinite(c) and c > 0 else (6.0 * n * d, "")


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan

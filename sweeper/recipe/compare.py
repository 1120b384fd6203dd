"""Fitted laws beside published ones: predictions at a sweep's cells and at a target, and the
exponents side by side.

Every law is evaluated in its own conventions, through :func:`sweeper.recipe.scale.law_scale`, the
function ``recommend`` and ``check`` use, so a point's FLOPs are counted the same way everywhere:
Sweeper's "6ND" is 6·N·D + 6·L·T·d·D, "6ND (no attention)" 6·N·D, DeepSeek's "M*D" uses
M = 6·N + 12·L·d·T (L layers, d width, T context: DeepSeek's 72·L·d² + 12·L·d·T for a model of
any MLP width). A point without width and depth gets the
shape :func:`~sweeper.recipe.scale.infer_shape` gives for its N, one without a sequence length
2048, and the row's note says so when the law's FLOPs depend on it. A law whose FLOPs were
imported as given (another convention) is evaluated at the point's own ``flops`` column. A target
given as width/depth gets N = 12·L·d² (non-embedding parameters of a standard transformer block);
one giving N too is refused when N and 12·L·d² are further apart than ``recommend`` allows
(:func:`~sweeper.recipe.target.check_n_params_agrees`).

Pure functions on DataFrames; the CLI (``sweeper compare``) prints them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import TargetError
from sweeper.fitting.conventions import FLOPS_6ND_NO_ATTENTION, TOKENS_AS_IMPORTED
from sweeper.fitting.laws import Law, PowerLaw, formula
from sweeper.fitting.methods import BATCH_EDGE_NOTE
from sweeper.fitting.optimum import CellOptimum, optima_frame
from sweeper.recipe.doubts import coupling_factor, span_text, undetermined
from sweeper.recipe.memory import train_flops
from sweeper.recipe.scale import (
    DEFAULT_SEQ_LEN,
    block_n_params,
    infer_shape,
    law_scale,
    resolve_shape,
    unused_bytes_per_token,
)
from sweeper.recipe.scale import unit_factor as scale_unit_factor
from sweeper.recipe.target import Target, as_target, check_n_params_agrees

__all__ = [
    "cell_points",
    "compare_exponents",
    "compare_laws",
    "compare_sweep_laws",
    "convention_notes",
    "law_formula",
    "law_label",
    "target_point",
    "unused_vocab",
]

_POINT_COLUMNS: Final[tuple[str, ...]] = (
    "point",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "width",
    "depth",
    "seq_len",
    "measured_lr",
    "measured_batch_tokens",
    "on_edge",
    "counts_bytes",
    "n_params_counts",
    "vocab",
)


def law_label(law: Law) -> str:
    """A short name: ``steplaw`` for a published law, ``<sweep>#<id> <method>`` for a fitted one."""
    if law.method == "published":
        return law.source
    ident = f"#{law.id}" if law.id is not None else ""
    return f"{law.source}{ident} {law.method}".strip()


def law_formula(law: Law, *, digits: int = 3) -> str:
    """``a · N^b · D^c`` with 95% intervals on fitted exponents (:func:`sweeper.fitting.laws.formula`,
    its one home)."""
    return formula(law, digits=digits)


def cell_points(
    optima: Sequence[CellOptimum] | pd.DataFrame,
    *,
    counts_bytes: bool = False,
    n_params_counts: str = "non-embedding",
    vocab: int | None = None,
) -> pd.DataFrame:
    """One row per cell with its scale and measured optimum (``measured_batch_tokens`` only where
    the batch size was swept); columns as :data:`_POINT_COLUMNS`. ``counts_bytes``: the cells'
    D and batch are bytes (byte-level data), as the sweep's laws record; ``n_params_counts``: what
    the cells' N counts (the sweep's convention: non-embedding, total or non-embedding+head);
    ``vocab``: the sweep's vocab (with the cells' width, their output layer)."""
    f = optima if isinstance(optima, pd.DataFrame) else optima_frame(optima)
    out = pd.DataFrame({"point": f["cell"].astype(str)})
    for c in ("n_params", "n_params_total", "tokens", "flops", "width", "depth", "seq_len"):
        out[c] = pd.to_numeric(f[c], errors="coerce").astype(float) if c in f else np.nan
    out["measured_lr"] = pd.to_numeric(f["lr"], errors="coerce").astype(float)
    bt = pd.to_numeric(f["batch_tokens"], errors="coerce").astype(float)
    swept = f["batch_range_low"].notna() if "batch_range_low" in f else pd.Series(False, f.index)
    out["measured_batch_tokens"] = bt.where(swept)
    out["on_edge"] = f["on_edge"].astype(bool) if "on_edge" in f else False
    out["counts_bytes"] = counts_bytes
    out["n_params_counts"] = n_params_counts
    out["vocab"] = float(vocab) if vocab else np.nan
    return out.reset_index(drop=True)


def target_point(
    *,
    tokens: float,
    n_params: float | None = None,
    width: float | None = None,
    depth: float | None = None,
    context: float | None = None,
    vocab: int | None = None,
) -> pd.DataFrame:
    """The one-row points frame of a target: ``n_params`` (non-embedding) and ``tokens``, or a shape
    (``width``, ``depth``, ``context``) and ``tokens``; N = 12·L·d² when only the shape is given.
    With ``vocab``, its total N (untied embedding and head, at the width given or inferred from N)
    for the laws that count the embeddings.
    Given both, N is used and must agree with 12·L·d² as ``recommend`` requires
    (:func:`~sweeper.recipe.target.check_n_params_agrees`: TargetError beyond
    :data:`~sweeper.recipe.target.N_SHAPE_TOLERANCE`). ``flops`` is Sweeper's compute (6·N·D +
    attention, the inferred shape and a 2048 context where none is given), as ``recommend`` counts
    it."""
    for k, v in (("tokens", tokens), ("n_params", n_params), ("width", width), ("depth", depth)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise TargetError(f"target {k} must be positive, got {v}")
    if context is not None and not context > 0:
        raise TargetError(f"target context must be positive, got {context}")
    if n_params is None:
        if width is None or depth is None:
            raise TargetError("give the target's n_params (--params), or its width and depth")
        n_params = block_n_params(width, depth)
    elif width is not None and depth is not None:
        given = resolve_shape(
            n_params=n_params,
            width=max(1, round(width)),
            depth=max(1, round(depth)),
            heads=None,
            vocab=None,
            seq_len=round(context) if context is not None else DEFAULT_SEQ_LEN,
            warnings=[],
            vocab_purpose=None,
        )
        check_n_params_agrees(n_params, given)
    total = np.nan
    if vocab is not None:
        w = width if width is not None else infer_shape(float(n_params))[0]
        total = float(n_params) + 2.0 * vocab * float(w)
    row = {
        "point": "target",
        "n_params": float(n_params),
        "n_params_total": total,
        "tokens": float(tokens),
        "flops": _sweeper_flops(
            float(n_params), float(tokens), width=width, depth=depth, seq_len=context
        ),
        "width": float(width) if width is not None else np.nan,
        "depth": float(depth) if depth is not None else np.nan,
        "seq_len": float(context) if context is not None else np.nan,
        "measured_lr": np.nan,
        "measured_batch_tokens": np.nan,
        "on_edge": False,
        "counts_bytes": False,  # a target's D is in its tokenizer's tokens
        "n_params_counts": "non-embedding",
        "vocab": float(vocab) if vocab is not None else np.nan,
    }
    return pd.DataFrame([row], columns=list(_POINT_COLUMNS))


def compare_laws(
    laws: Sequence[Law], points: pd.DataFrame, *, bytes_per_token: float | None = None
) -> pd.DataFrame:
    """Every law (lr and batch_tokens targets) evaluated at every point.

    ``points`` has the columns of :func:`cell_points` / :func:`target_point`. With
    ``bytes_per_token``, a law that counts bytes is evaluated at a point in tokens (the target) at
    D times it, one in tokens at a point in bytes (a byte-level sweep's cells) at D over it, and a
    batch law's value comes back in the point's unit (:func:`unit_factor`); without it every law
    takes the point's D as it is (:func:`convention_notes` says so). Returns one row per
    (point, law): point, law (label), source, target, value, low, high (the law's interval; equal to
    value for published laws), measured, ratio (value / measured), extrapolation (largest factor
    beyond the law's domain, above or below it, 1 inside it), side ("above", "below" or "" inside
    the domain), undetermined (the interval too wide to place the value:
    :func:`~sweeper.recipe.doubts.undetermined`), unit (of a batch row's value, measured and
    interval: "tokens" or "bytes"; "" for an LR), note.
    """
    rows: list[dict[str, Any]] = []
    for law in laws:
        if law.target not in ("lr", "batch_tokens"):
            continue
        label = law_label(law)
        for _, p in points.iterrows():
            unit = unit_factor(law, p, bytes_per_token)
            scale, note = _scale_for(law, p, unit)
            zero = law.beyond_form(scale) if scale is not None else None
            note = "; ".join(x for x in (note, zero) if x)
            measured = float(p.get(f"measured_{law.target}", np.nan))
            value = low = high = extrap = np.nan
            side = ""
            if scale is not None:
                value = law.predict(scale)
                low, high = law.interval(scale)
                extrap, side = _outside_domain(law, scale)
                factor, why = _at_measured_batch(law, laws, p, bytes_per_token)
                if law.target == "batch_tokens":
                    factor /= unit  # (the law's unit back to the point's)
                value, low, high = value * factor, low * factor, high * factor
                note = "; ".join(x for x in (note, why, _undetermined_note(low, high)) if x)
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
                    "side": side,
                    "undetermined": bool(scale is not None and undetermined(low, high)),
                    "unit": _unit(law, p),
                    "note": note,
                }
            )
    cols = ["point", "law", "source", "target", "value", "low", "high", "measured", "ratio"]
    rest = ["extrapolation", "side", "undetermined", "unit", "note"]
    return pd.DataFrame(rows, columns=[*cols, *rest])


def _undetermined_note(low: float, high: float) -> str:
    """What a value whose interval is too wide to place it is (``check`` marks it so, and
    ``recommend`` refuses it: :func:`~sweeper.recipe.doubts.refuse_undetermined`); a compare
    audit's LR of 20 [0.12, 3.3e+03] at a 7B target was a row like any other."""
    if not undetermined(low, high):
        return ""
    return (f"its interval {span_text(high / low)} here: the law does not determine the value "
            "(recommend refuses it)")  # fmt: skip


def _unit(law: Law, point: Mapping[str, Any]) -> str:
    """The unit of a row's value, measured and interval: a batch in the point's bytes (a
    byte-level sweep's cells) or tokens; an LR has none ("")."""
    if law.target != "batch_tokens":
        return ""
    return "bytes" if point.get("counts_bytes") else "tokens"


_COUPLING = "the fitted LR-batch coupling"


def unit_factor(law: Law, point: Mapping[str, Any], bytes_per_token: float | None) -> float:
    """The law's units of D and batch per unit of ``point``'s (its ``counts_bytes``):
    :func:`sweeper.recipe.scale.unit_factor`."""
    return scale_unit_factor(law, bytes_per_token, point_in_bytes=bool(point.get("counts_bytes")))


def _at_measured_batch(
    law: Law, laws: Sequence[Law], p: Mapping[str, Any], bytes_per_token: float | None = None
) -> tuple[float, str]:
    """An LR law that measured how the best LR moves with the batch (a surface fit of a batch
    sweep: :meth:`~sweeper.fitting.surface.SurfaceLaw.batch_shift`) is set beside a cell's
    measured LR at that cell's best batch, not at its batch law's: the factor and a note (1 and
    "" otherwise). On Step Law's runs this moves the surface law's LR at 16 of 17 cells, its
    median distance above their per-cell optima from +0.42 to +0.32 octave."""
    b = _num(p.get("measured_batch_tokens"))
    pair = [x for x in laws if coupling_factor(law, x, 1.0) is not None]
    if law.target != "lr" or not pair or not (math.isfinite(b) and b > 0):
        return 1.0, ""
    unit = unit_factor(pair[-1], p, bytes_per_token)
    scale, _ = _scale_for(pair[-1], p, unit)
    if scale is None:
        return 1.0, ""
    b, own = b * unit, pair[-1].predict(scale)  # (both in the batch law's unit)
    factor = coupling_factor(law, pair[-1], b / own)
    if factor is None:
        return 1.0, ""
    if abs(math.log2(factor)) < 0.05:  # (applied all the same: it is the same fit's)
        return factor, ""
    return factor, (
        f"at the cell's best batch {b / unit:.3g} {'bytes' if p.get('counts_bytes') else 'tokens'}"
        f", not the law's {own / unit:.3g}: ×{factor:.2f} "
        f"({_COUPLING})"
    )


def coupling_notes(predictions: pd.DataFrame) -> list[str]:
    """One line per LR law that :func:`_at_measured_batch` moved at some cell."""
    moved = predictions[predictions["note"].str.contains(_COUPLING, regex=False, na=False)]
    return [
        f"{law}: at {len(g)} cells its LR is given at the cell's best batch (the fitted LR-batch "
        "coupling), as the measured optimum is, not at its batch law's; at the target, at the "
        "batch law's"
        for law, g in moved.groupby("law", sort=False)
    ]


def _outside_domain(law: Law, scale: Mapping[str, float]) -> tuple[float, str]:
    """How far ``scale`` lies outside the law's domain: the largest factor beyond either edge
    over the predictors (1 inside it), and on which side ("above", "below", "" inside). A
    published law at a tiny proxy is extrapolated downward, as far as a big target upward."""
    worst, side = 1.0, ""
    for p, (lo, hi) in law.domain.items():
        v = scale.get(p)
        if v is None or not v > 0:
            continue
        for f, s in ((v / hi if hi > 0 else 1.0, "above"), (lo / v if lo > 0 else 1.0, "below")):
            if f > worst:
                worst, side = f, s
    return worst, side


def compare_exponents(fitted: Sequence[Law], published: Sequence[Law]) -> pd.DataFrame:
    """Exponents of fitted power laws beside the published ones for the same target and predictor.

    Columns: target, predictor, law, fitted, low, high (the fitted 95% interval), published (law
    key), published_value, comparable (False for an N exponent of laws that count N apart:
    :func:`_n_count_notes`, and for an LR exponent along the model's size of laws of other
    parametrizations: :func:`_apart`), inside (whether the published exponent lies in the fitted
    interval; None where not comparable: "porian -0.333 inside" had stood above the note saying
    the two N exponents do not compare, a laws audit), apart (why not comparable, in words; ""
    where comparable).
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
                apart = _apart(f, pub, p)
                same = not apart
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
                        "comparable": same,
                        "inside": bool(lo <= pub.exponents[p] <= hi) if same else None,
                        "apart": apart,
                    }
                )
    cols = ["target", "predictor", "law", "fitted", "low", "high", "published"]
    return pd.DataFrame(rows, columns=[*cols, "published_value", "comparable", "inside", "apart"])


#: how a parametrization is written beside another
_PARAM_NAMES: Final[dict[str, str]] = {"sp": "SP", "mup": "muP", "completep": "CompleteP"}


def _apart(fitted: Law, published: Law, predictor: str) -> str:
    """Why ``fitted``'s exponent of ``predictor`` does not compare with ``published``'s ("" when
    it does): an LR law of another parametrization along anything but D (a muP law's LR is the
    base width's, flat in width by design: its N exponent had been marked OUTSIDE SP's beside
    the note saying they do not compare, a verbs audit), or an N counted apart. Along D, at a
    fixed model, the two parametrizations' LRs differ by a constant factor: that exponent
    compares."""
    mine = fitted.conventions.parametrization or "sp"
    theirs = published.conventions.parametrization or "sp"
    if fitted.target == "lr" and mine != theirs and predictor != "tokens":
        names = (_PARAM_NAMES.get(x, x) for x in (mine, theirs))
        return "not comparable ({} vs {})".format(*names)
    if predictor == "n_params" and _n_holds(fitted) != _n_holds(published):
        return "N counted apart"
    return ""


def _shape(
    n: float, width: float, depth: float, seq_len: float
) -> tuple[int, int, int, list[str]]:
    """(width, depth, seq_len, notes) of a point: its own, or inferred/assumed."""
    notes = []
    given = all(math.isfinite(v) and v > 0 for v in (width, depth))
    if given:
        w, d = round(width), round(depth)
    else:
        w, d = infer_shape(n)
        notes.append(f"shape inferred from N ({d} × {w})")
    if math.isfinite(seq_len) and seq_len > 0:
        t = round(seq_len)
    else:
        t = DEFAULT_SEQ_LEN
        notes.append(f"sequence length assumed {DEFAULT_SEQ_LEN}")
    return w, d, t, notes


def _sweeper_flops(
    n: float, d: float, *, width: float | None, depth: float | None, seq_len: float | None
) -> float:
    """Sweeper's compute at a point: law_scale's "6ND" (6·N·D + 6·L·T·d·D), same shape rules."""
    w, dep, t, _ = _shape(n, _num(width), _num(depth), _num(seq_len))
    return train_flops(n, d, depth=dep, width=w, seq_len=t)


def _scale_for(
    law: Law, p: Mapping[str, Any], unit: float = 1.0
) -> tuple[dict[str, float] | None, str]:
    """The law's predictors at point ``p``, in the law's conventions, and a note on how; ``unit``
    is the law's units of D per the point's (:func:`unit_factor`)."""
    n, d = _num(p.get("n_params")), _num(p.get("tokens")) * unit
    for name in law.predictors:
        v = d if name == "tokens" else n if name == "n_params" else _num(p.get(name))
        if name != "flops" and not (math.isfinite(v) and v > 0):
            return None, f"needs {name}, which this point lacks"
    if "flops" not in law.predictors:
        scale = {k: d if k == "tokens" else _num(p.get(k)) for k in law.predictors}
        if "n_params" not in scale:
            return scale, ""
        n_law, note = _law_n(law, p)
        return {**scale, "n_params": n_law}, note
    if not all(math.isfinite(v) and v > 0 for v in (n, d)):
        return None, "needs n_params and tokens for flops, which this point lacks"
    conv = law.conventions.flops
    if not law.conventions.flops_known:
        c = _num(p.get("flops")) * unit  # (C is proportional to D)
        if math.isfinite(c) and c > 0:  # FLOPs as imported: the point's own count
            return {k: c if k == "flops" else d if k == "tokens" else _num(p.get(k))
                    for k in law.predictors}, ""  # fmt: skip
        conv_note = [f"flops counted as 6ND + attention, not {conv!r}"]
    else:
        conv_note = []
    w, dep, t, notes = _shape(
        n, _num(p.get("width")), _num(p.get("depth")), _num(p.get("seq_len"))
    )
    scale = law_scale(law, n_params=n, tokens=d, width=w, depth=dep, seq_len=t)
    if conv == FLOPS_6ND_NO_ATTENTION:
        notes = []  # neither the shape nor the sequence length enters
    return {k: scale[k] for k in law.predictors}, "; ".join(conv_note + notes)


#: what a count of N includes beyond the non-embedding parameters, by convention
_N_HOLDS: Final[dict[str, str]] = {
    "non-embedding": "without the embeddings",
    "non-embedding+head": "with the output layer",
    "total": "with every embedding parameter",
}


def _law_n(law: Law, p: Mapping[str, Any]) -> tuple[float, str]:
    """N at point ``p`` as ``law`` counts it, and a note when the point cannot give that count:
    a point's N is non-embedding (with its total beside it where known) unless ``p`` says its
    sweep counted otherwise (``n_params_counts``)."""
    n, label = _num(p.get("n_params")), law_label(law)
    counts = str(p.get("n_params_counts") or "non-embedding")
    want = law.conventions.n_params if law.conventions.n_params in _N_HOLDS else "non-embedding"
    if counts == want:
        return n, ""
    head = _num(p.get("vocab")) * _num(p.get("width"))  # (the output layer, where both are known)
    if counts == "non-embedding" and want == "non-embedding+head" and math.isfinite(head):
        return n + head, ""  # (half the total's extra would count a position table too)
    if counts == "non-embedding":
        total = _num(p.get("n_params_total"))
        if math.isfinite(total) and total > n:
            return law.conventions.law_n(n, total), ""
        return n, (
            f"{label} counts N {_N_HOLDS[want]}; this point gives no total, so its N is "
            f"{_N_HOLDS[counts]}"
        )
    return n, (
        f"{label} counts N {_N_HOLDS[want]}; these cells' N is {_N_HOLDS.get(counts, counts)} "
        "(the sweep's convention), which it is evaluated at"
    )


def unused_vocab(laws: Sequence[Law], at: Any) -> list[str]:
    """A note when the target ``at`` gives a vocab and no law compared counts the embeddings in
    its N (only those take the target's total N from it): ``compare --vocab`` had changed
    nothing, in silence, without Porian's law among the published (a help-text audit)."""
    vocab = at.get("vocab") if isinstance(at, Mapping) else getattr(at, "vocab", None)
    if vocab is None or any(_n_holds(x) != _N_HOLDS["non-embedding"] for x in laws):
        return []
    return [f"vocab {vocab:g} is not used: no law here counts the embeddings in N (Porian's "
            "counts the output layer: add porian to --published, published=(..., 'porian') "
            "in Python)"]  # fmt: skip


def convention_notes(
    fitted: Sequence[Law], published: Sequence[Law], *, bytes_per_token: float | None = None
) -> list[str]:
    """Where a fitted law and the published ones it is set beside were measured differently, one
    line each: the token unit (values and prefactors differ, exponents compare; converted with
    ``bytes_per_token`` for a law that counts bytes), the parametrization (a muP law's LR is not
    an SP model's), an N-only published law against a fitted law that held D (its exponent is
    along its own D), and the LR's schedule/optimizer."""
    notes: list[str] = []
    pubs = [p for p in published if p.target in ("lr", "batch_tokens")]
    if bytes_per_token and not any(f.conventions.counts_bytes for f in fitted):
        notes.append(unused_bytes_per_token(bytes_per_token))
    for f in fitted:
        c, name = f.conventions, law_label(f)
        others = [p for p in pubs if p.target == f.target]
        if not others:
            continue
        if c.counts_bytes and bytes_per_token:
            notes.append(
                f"{name} counts D and the batch in bytes, the published laws in tokenizer "
                f"tokens: converted at {bytes_per_token:g} bytes per token (at the cells the "
                f"published laws take D / {bytes_per_token:g} and give their batch in bytes; at "
                f"the target {name} takes D × {bytes_per_token:g} and gives its batch in tokens)"
            )
        elif c.tokens != "tokens" and any(p.conventions.tokens == "tokens" for p in others):
            unit = "bytes" if c.counts_bytes else f"{c.tokens!r}"
            hint = (
                " (imported runs: declare their unit with import --convention tokens=...)"
                if c.tokens == TOKENS_AS_IMPORTED
                else ""
            )
            convert = " (compare --bytes-per-token R converts them)" if c.counts_bytes else ""
            notes.append(
                f"{name} counts D and the batch in {unit}, the published laws in tokenizer "
                f"tokens: their exponents compare, their values and prefactors do not{convert}"
                f"{hint}"
            )
        param = c.parametrization or "sp"
        if param != "sp" and f.target == "lr":
            base = f"base width {c.base_width}" if c.base_width else "base width not recorded"
            notes.append(
                f"{name} was measured under {param}: its LR is a {param} model's ({base}); the "
                "published laws are SP, so the values do not compare and a width exponent near "
                "0 is what muP predicts"
            )
        notes += _n_count_notes(f, others)
        for p in others:
            if "tokens" in c.held and "tokens" not in p.predictors and "n_params" in p.predictors:
                notes.append(
                    f"{law_label(p)} has no D term: its N exponent holds along its own runs' "
                    f"token budgets, {name}'s at the D its cells held ({c.held_text}); they "
                    "agree only if the optimum does not move with D"
                )
        notes += _compute_held_notes(f, others)
        lrs = sorted({p.conventions.lr for p in others if p.conventions.lr != c.lr})
        if f.target == "lr" and lrs:
            notes.append(
                f"{name}'s LR is a {c.lr}; the published: "
                + "; ".join(f"{', '.join(law_label(p) for p in others if p.conventions.lr == lr)}"
                            f" {lr}" for lr in lrs)
            )  # fmt: skip
    return list(dict.fromkeys(notes))


def _compute_held_notes(fitted: Law, published: Sequence[Law]) -> list[str]:
    """A note per published compute law beside a fitted compute law whose cells' tokens per
    parameter spread more than :data:`_ONE_RATIO`: its compute grew along no one N:D
    allocation (at one D, through N alone), the published law's along budgets where N and D grow
    together; the exponents agree only if the optimum depends on N and D through C alone (the
    quickstart's compute law, an N exponent at one D, had read "inside" DeepSeek's with no word:
    an audit)."""
    span = fitted.conventions.held.get("tokens_per_param")
    if "flops" not in fitted.predictors or span is None or span[1] <= _ONE_RATIO * span[0]:
        return []
    return [
        f"{law_label(fitted)}'s cells span {span[0]:.3g}-{span[1]:.3g} tokens per parameter: "
        f"its compute grew along no one allocation of N and D (through N alone where the cells "
        f"held D), {law_label(p)}'s along budgets where both grow; their compute exponents agree "
        "only if the optimum depends on N and D through C alone"
        for p in published
        if "flops" in p.predictors
    ]


#: tokens per parameter spread by at most this factor across cells: one N:D allocation
_ONE_RATIO: Final[float] = 2.0


def _n_holds(law: Law) -> str:
    """What ``law``'s N holds, in words (:data:`_N_HOLDS`)."""
    return _N_HOLDS.get(law.conventions.n_params, "without the embeddings")


def _n_count_notes(fitted: Law, published: Sequence[Law]) -> list[str]:
    """A note per published law whose N counts other parameters than ``fitted``'s: their N
    exponents agree only where the embeddings are a fixed share of N, which at proxy scale they
    are not."""
    mine = _n_holds(fitted)
    other = {
        law_label(p): _n_holds(p)
        for p in published
        if "n_params" in p.predictors and "n_params" in fitted.predictors
    }
    return [
        f"{law_label(fitted)} counts N {mine}, {name} {holds}: their N exponents compare only "
        "where the embeddings are a fixed share of N (at the cells they are not)"
        for name, holds in other.items()
        if holds != mine
    ]


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def compare_sweep_laws(
    runs: pd.DataFrame,
    fitted: Sequence[Law],
    published: Sequence[str],
    at: Target | Mapping[str, Any] | None = None,
    *,
    bytes_per_token: float | None = None,
) -> tuple[list[Law], pd.DataFrame, pd.DataFrame]:
    """A sweep's ``fitted`` lr/batch laws beside the ``published`` ones (by name): (every law,
    :func:`compare_exponents`, :func:`compare_laws` at the sweep's cells and at the target ``at``).

    The cells' measured optima come from the same estimator as the fitted laws: a surface law's
    own cell optima (its fit with a free optimum per cell; a cell it left out has none), else
    the band of the latest band law, else the parabola; the predictions' ``measured_by`` column
    says which, per target (:func:`_own_optima`). ``at`` (a Target, or a mapping of its fields: see
    :func:`~sweeper.recipe.target.as_target`) has ``tokens`` and ``n_params``, or ``width`` and
    ``depth`` (and optionally ``context``); given both, they must agree (:func:`target_point`).
    ``at=None`` compares at the cells alone; an empty mapping is no target and a TargetError.
    ``bytes_per_token`` converts between a byte law and a point in tokens (:func:`compare_laws`).
    """
    from sweeper.fitting import estimate_optima
    from sweeper.recipe.published import published_laws

    tp: pd.DataFrame | None = None
    if at is not None:
        if isinstance(at, Mapping) and not at:
            raise TargetError(
                "at={} gives no target: give tokens with n_params, or width and depth "
                "(at=None compares at the sweep's cells alone)"
            )
        target = as_target(at)
        if target.tokens is None:
            raise TargetError("a target needs tokens (with n_params, or width and depth)")
        tp = target_point(
            tokens=target.tokens,
            n_params=target.n_params,
            width=target.width,
            depth=target.depth,
            context=target.context,
            vocab=target.vocab,
        )
    band_methods = [law.method for law in fitted if law.method.startswith("band")]
    if band_methods:
        match = re.match(r"band(\d+(?:\.\d*)?(?:e[+-]?\d+)?)", band_methods[-1])
        band = float(match.group(1)) if match else 0.0025
        optima = estimate_optima(runs, method="band", band=band, n_boot=0, keep_edge=True)
    else:
        optima = estimate_optima(runs, method="parabola", n_boot=0, keep_edge=True)
    points = cell_points(
        optima,
        counts_bytes=any(x.conventions.counts_bytes for x in fitted),
        n_params_counts=next((x.conventions.n_params for x in fitted), "non-embedding"),
        vocab=next((x.conventions.vocab_size for x in fitted if x.conventions.vocab_size), None),
    )
    per_cell = f"the per-cell {'band' if band_methods else 'parabola'} estimate"
    points, measured_by = _own_optima(points, fitted, per_cell)
    if tp is not None:
        points = pd.concat([points, tp], ignore_index=True)
    pub: list[Law] = []
    for name in published:
        if name.strip():
            pub += list(published_laws(name.strip()).values())
    every = [*fitted, *pub]
    predictions = compare_laws(every, points, bytes_per_token=bytes_per_token)
    predictions["measured_by"] = predictions["target"].map(measured_by).fillna(per_cell)
    return every, compare_exponents(fitted, pub), predictions


def _own_optima(
    points: pd.DataFrame, fitted: Sequence[Law], per_cell: str
) -> tuple[pd.DataFrame, dict[str, str]]:
    """The cells' measured optimum of each target from a surface law of it (the latest with
    ``cell_optima``), as the report's law plot draws them: the per-cell estimate (``per_cell``)
    can disagree with the surface law's line, and its column had been said to come from the
    laws' estimator (a verbs audit). Cells the law left out of its fit have none. Returns the
    points and, per target, what its measured optima are."""
    out, by = points.copy(), {}
    for target in ("lr", "batch_tokens"):
        own = [x for x in fitted if x.target == target and getattr(x, "cell_optima", None)]
        if not own:
            by[target] = per_cell
            continue
        law = max(own, key=lambda x: x.id if isinstance(x.id, int) else -1)
        optima = {str(k): float(v) for k, v in getattr(law, "cell_optima", {}).items()}
        out[f"measured_{target}"] = out["point"].astype(str).map(optima).astype(float)
        by[target] = f"{law_label(law)}'s own cell optima (a free optimum per cell in its fit)"
        notes = getattr(law, "notes", ())
        if target == "batch_tokens" and any(n.startswith(BATCH_EDGE_NOTE) for n in notes):
            by[target] += (
                "; blank where a cell's best batch is on the edge of its batch range (a bound: "
                "the law's notes name them)"
            )
    return out, by

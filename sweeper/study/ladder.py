"""The cells of a study's ladder: shapes, budgets and their size and compute numbers.

Sizes follow ``proxy_models.ProxyConfig`` (a pre-LN GPT without biases, 4× MLP) but are computed
here by formula so that query verbs (``validate``, ``status``) never import torch; a test checks the
formulas against ``ProxyConfig``. A study with a ``model.builder`` is counted by instantiating the
builder's model at each cell's shape on the meta device (N = hidden matrices and vectors by role,
:mod:`proxy_models.builder`), which imports torch. Conventions: ``n_params`` is N, the non-embedding parameters;
``n_params_total`` adds token and position embeddings and the lm_head (once if tied); ``flops`` is the
training compute C = (6·N + 6·L·T·d) · D in FLOPs; ``deepseek_m`` is DeepSeek's M = 6·N + 12·L·d·T
FLOPs per token (their 72·L·d² is 6·N for their blocks of 12·d² parameters; 6·N counts any model's,
as ``sweeper compare`` does).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sweeper.errors import StudyError
from sweeper.study.spec import LadderSpec, StudySpec

__all__ = ["Cell", "cell_name", "cells", "param_counts"]


@dataclass(frozen=True)
class Cell:
    """One cell of the ladder: a proxy shape trained on ``tokens`` tokens."""

    name: str  # e.g. "w64-d2-t819k"
    width: int  # d_model
    depth: int  # blocks L
    heads: int
    d_head: int
    context: int  # tokens per sequence T
    vocab_size: int
    tokens: int  # training budget D in tokens
    n_params: int  # non-embedding N
    n_params_total: int
    flops_per_token: float  # 6·N + 6·L·T·d
    flops: float  # flops_per_token · tokens
    deepseek_m: float  # 6·N + 12·L·d·T
    parametrization: str
    norm: str
    qk_norm: bool
    tied_embeddings: bool
    init_std: float
    output_mult: float
    base_width: int
    base_depth: int
    n_heads: int | None  # the study's fixed head count, None when heads = width // head_dim
    head_dim: int

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.n_params

    def proxy_config_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``proxy_models.ProxyConfig`` for this cell."""
        return {
            "width": self.width,
            "depth": self.depth,
            "n_heads": self.n_heads,
            "head_dim": self.head_dim,
            "context": self.context,
            "vocab_size": self.vocab_size,
            "norm": self.norm,
            "qk_norm": self.qk_norm,
            "tied_embeddings": self.tied_embeddings,
            "init_std": self.init_std,
            "output_mult": self.output_mult,
            "parametrization": self.parametrization,
            "base_width": self.base_width,
            "base_depth": self.base_depth,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (the cell study's attributes)."""
        return asdict(self)


def param_counts(
    width: int,
    depth: int,
    *,
    heads: int,
    context: int,
    vocab_size: int,
    qk_norm: bool = False,
    tied_embeddings: bool = False,
) -> tuple[int, int]:
    """``(n_params, n_params_total)`` of a proxy: N is 12·d² + 2·d (+ 2·d_head with qk-norm) per
    block plus the final norm gain d; the total adds embeddings (V·d + T·d) and lm_head (V·d)."""
    d = width
    d_head = width // heads
    per_block = 12 * d * d + 2 * d + (2 * d_head if qk_norm else 0)
    n = depth * per_block + d
    total = n + vocab_size * d + context * d + (0 if tied_embeddings else vocab_size * d)
    return n, total


def cell_name(width: int, depth: int, tokens: int) -> str:
    """``w{width}-d{depth}-t{tokens}`` with tokens in k/M/B to 3 significant digits."""
    return f"w{width}-d{depth}-t{_si(tokens)}"


def _si(x: int) -> str:
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g}{unit}".replace("+", "")
    return str(x)


def shapes(lad: LadderSpec) -> list[tuple[int, int, int | None, float | None]]:
    """The ladder's (width, depth, tokens, tokens_per_param) in :func:`cells`' order, one of the
    two budgets None: what a cell is, before its parameters are counted (no torch)."""
    if lad.cells:
        return [(c.width, c.depth, c.tokens, c.tokens_per_param) for c in lad.cells]
    out: list[tuple[int, int, int | None, float | None]] = []
    for w in lad.widths:
        for dep in lad.depths:
            out.extend((w, dep, t, None) for t in lad.tokens)
            out.extend((w, dep, None, tpp) for tpp in lad.tokens_per_param)
    return out


def cells(spec: StudySpec) -> list[Cell]:
    """The ladder's cells in order (widths, then depths, then budgets; or as listed).

    A ``tokens_per_param`` budget is rounded to whole tokens: ``round(tpp · N)``.
    """
    m = spec.model
    out: list[Cell] = []
    for w, dep, budget, tpp in shapes(spec.ladder):
        heads = m.heads if m.heads is not None else max(1, w // m.head_dim)
        if m.builder is not None:
            n, total = _builder_counts(spec, w, dep)
        else:
            n, total = param_counts(
                w,
                dep,
                heads=heads,
                context=m.context,
                vocab_size=m.vocab_size,
                qk_norm=m.qk_norm,
                tied_embeddings=m.tied_embeddings,
            )
        tokens = budget if budget is not None else max(1, round((tpp or 0.0) * n))
        fpt = 6.0 * n + 6.0 * dep * m.context * w
        out.append(
            Cell(
                name=cell_name(w, dep, tokens),
                width=w,
                depth=dep,
                heads=heads,
                d_head=w // heads,
                context=m.context,
                vocab_size=m.vocab_size,
                tokens=tokens,
                n_params=n,
                n_params_total=total,
                flops_per_token=fpt,
                flops=fpt * tokens,
                deepseek_m=6.0 * n + 12.0 * dep * w * m.context,
                parametrization=m.parametrization,
                norm=m.norm,
                qk_norm=m.qk_norm,
                tied_embeddings=m.tied_embeddings,
                init_std=m.init_std,
                output_mult=m.output_mult,
                base_width=m.base_width,
                base_depth=m.base_depth,
                n_heads=m.heads,
                head_dim=m.head_dim,
            )
        )
    # two budgets that print alike (819,200 and 819,300) get exact token counts in their names
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        out = [
            c if names.count(c.name) == 1 else _renamed(c, f"w{c.width}-d{c.depth}-t{c.tokens}")
            for c in out
        ]
    dupes = sorted({c.name for c in out if sum(o.name == c.name for o in out) > 1})
    if dupes:
        raise StudyError([f"ladder: duplicate cell {n}" for n in dupes], path=spec.source)
    return out


def builder_scale_problems(out: list[Cell]) -> list[str]:
    """The problem when a builder's model counts the same N at two widths (or two depths) of
    the ladder: it does not build the shape it is given, and every cell would train one model
    (a builder that ignored ``width`` was accepted under SP, its ladder of one N shown beside
    FLOPs growing with the nominal width; muP's check caught it, SP's had none)."""
    for axis, other in (("width", "depth"), ("depth", "width")):
        seen: dict[tuple[int, int], int] = {}
        for c in out:
            was = seen.setdefault((getattr(c, other), c.n_params), getattr(c, axis))
            if was != getattr(c, axis):
                return [
                    f"model.builder: the model counts N = {c.n_params:,} at {axis} {was} and at "
                    f"{axis} {getattr(c, axis)} ({other} {getattr(c, other)}): is {axis} passed "
                    "through to the model's layers?"
                ]
    return []


def _builder_counts(spec: StudySpec, width: int, depth: int) -> tuple[int, int]:
    """(N, total) of the builder's model at this shape, on the meta device."""
    from proxy_models.builder import BuilderError, n_params_of
    from proxy_models.config import ProxyConfig
    from sweeper.study.own_code import builder_of, config_kwargs

    try:
        cfg = ProxyConfig(**config_kwargs(spec, width, depth))
        return n_params_of(builder_of(spec), cfg)
    except (BuilderError, ValueError) as e:
        raise StudyError([str(e)], path=spec.source) from None


def _renamed(c: Cell, name: str) -> Cell:
    d = asdict(c)
    d["name"] = name
    return Cell(**d)

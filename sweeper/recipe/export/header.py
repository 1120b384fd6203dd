"""The comment header every format with comments starts with, and small text helpers.

The header says which framework version the file targets and how to load it, which LR the file
uses (the recipe's ``lr``, and the law's point estimate ``lr_point``), where the numbers come from
(the laws, with their token unit, what they held fixed and the schedule the LR was measured
under), the intervals, the init std and what it means, the warnings, anything format-specific
(``notes``), and one ``not expressible here:`` line per setting the format cannot carry.
"""

from __future__ import annotations

import json
from typing import Any

from sweeper.fitting.conventions import Conventions
from sweeper.recipe.doubts import extrapolation_text, ratios_text
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.versions import FrameworkVersion
from sweeper.recipe.optimizer_settings import settings_note
from sweeper.recipe.recipe import RECIPE_SCHEMA, RECIPE_SCHEMA_VERSION, Recipe
from sweeper.recipe.schedule import schedule_text

__all__ = ["comment", "header_lines", "lr_line", "num", "toml_value"]


def num(x: float) -> str:
    """Shortest exact text for a float (repr round-trips)."""
    return repr(float(x))


def toml_value(v: Any) -> str:
    """A TOML value: bool, int, float (exact) or a basic string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return num(v)
    return json.dumps(str(v))  # a TOML basic string has JSON's escapes


def comment(lines: list[str]) -> str:
    """``lines`` as ``# `` comment lines."""
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def lr_line(r: Recipe) -> str:
    """Which LR the file uses: the recipe's ``lr`` (the recommended peak LR), beside the law's
    point estimate ``lr_point``."""
    if r.lr_point == r.lr.value:
        which = "the recipe's lr = the LR law's point estimate (lr_point)"
    else:
        which = f"the recipe's lr (recommended); the LR law's point estimate lr_point is {r.lr_point:.4g}"
    return (
        f"peak LR {r.lr.value:.4g} ({r.optimizer}): {which}; "
        f"{r.lr.text(4, f'{r.level:.0%} interval')}; min LR {r.min_lr:.4g} = lr × min_lr_ratio "
        f"{r.min_lr_ratio:g}; schedule "
        + schedule_text(r.schedule, r.min_lr_ratio, r.decay_fraction)
    )


def _target_lines(r: Recipe, fmt: str, fv: FrameworkVersion | None) -> list[str]:
    target = f" for {fv.framework}" if fv is not None else ""
    lines = [
        f"Sweeper recipe ({fmt}){target}; recipe JSON schema {RECIPE_SCHEMA} "
        f"{RECIPE_SCHEMA_VERSION}"
    ]
    if fv is not None:
        lines.append(f"load: {fv.load}")
        if fv.caution is not None:
            lines.append(f"CAUTION: {fv.caution}")
    lines += [
        f"N = {r.n_params:.4g} non-embedding parameters ({r.depth} layers × d_model {r.width}, "
        f"{r.heads} heads{', inferred from N' if r.shape_inferred else ''}), D = {r.tokens:.4g} "
        f"tokens, {r.parametrization}" + (f" (base width {r.base_width})" if r.base_width else ""),
        lr_line(r),
        f"batch {r.global_batch_sequences} × {r.seq_len} = {r.batch_tokens.value:.4g} tokens "
        f"(law {r.batch_tokens_law:.4g}, {r.batch_tokens.text(4, f'{r.level:.0%} interval')}) "
        f"= micro {r.micro_batch_size} × accumulation "
        f"{r.grad_accum_steps} × {r.data_parallel} GPUs; {r.total_steps} steps, warmup "
        f"{r.warmup_steps}; {r.precision}",
    ]
    return lines


def _ramp_steps(r: Recipe, *, carried: bool, ramp: tuple[int, int] | None = None) -> str:
    """The recipe's batch ramp-up in steps: in a file that runs it, the steps Megatron-LM's
    smaller batches add and where a sample-based warmup ends (a recommend audit), ``ramp`` where
    the file's framework version counts them otherwise than the recipe; in one that cannot, that
    the file runs the full batch's steps (a review: the header had given the ramp's steps above
    the line saying the file trains at the full batch from step 0)."""
    total, warm = ramp if ramp is not None else r.rampup_steps()
    if carried:
        return f"with the batch ramp-up: {total} steps, the warmup ending at step {warm}"
    return (
        f"the batch ramp-up is not in this file: it runs {r.total_steps} steps at the full batch "
        f"(with the ramp-up: {total}, the warmup ending at step {warm})"
    )


def _law_lines(r: Recipe) -> list[str]:
    lines = []
    for role, p in r.provenance.items():
        conv = Conventions.from_json(p.get("conventions"), law=p)
        fb = ", FALLBACK" if p.get("fallback") else ""
        unit = conv.tokens
        if conv.counts_bytes and r.bytes_per_token:
            unit += f" (converted at {r.bytes_per_token:g} bytes per token)"
        tokens = "tokens as imported" if unit == "as imported" else f"tokens counted as {unit}"
        lines.append(
            f"{role} law: id {p.get('id')}, source {p.get('source')}, method {p.get('method')}, "
            f"predictors {','.join(p.get('predictors') or [])}, flops {conv.flops}"
            + (f", {tokens}" if unit else "")
            + fb
        )
        if conv.held_text:
            lines.append(f"  {role} law: {conv.held_text}")
        if role == "lr" and conv.lr:
            lines.append(f"  lr measured as: {conv.lr}")
    return lines


def header_lines(
    recipe: Recipe,
    fmt: str,
    missing: list[Missing],
    fv: FrameworkVersion | None = None,
    notes: list[str] | None = None,
    *,
    ramp: tuple[int, int] | None = None,
) -> list[str]:
    """Comment lines (without the ``#``): target and load command, the recipe's numbers and
    their provenance, ``notes`` (format-specific), the warnings, what cannot be carried.
    ``ramp``: the (total, warmup) steps the file's framework runs with the batch ramp-up, when
    they are not the recipe's :meth:`~sweeper.recipe.recipe.Recipe.rampup_steps` (Megatron-LM
    from core 0.18 counts the last partial batch)."""
    r = recipe
    lines = _target_lines(r, fmt, fv) + _law_lines(r)
    if r.rampup is not None:
        carried = not any(m.setting == "rampup" for m in missing)
        lines.append(_ramp_steps(r, carried=carried, ramp=ramp))
    if r.init_std_note:
        lines.append(f"init std {r.init_std:.4g}: {r.init_std_note}")
    if note := settings_note(r):
        lines.append(f"optimizer settings {note}")
    ext = extrapolation_text(r.extrapolation_factor, r.extrapolation)
    lines.append(f"extrapolation factor (target / largest proxy): {ext}")
    if r.extrapolation_below:  # (a factor below 1 alone reads as inside the ladder)
        lines.append(f"below the smallest proxy: {ratios_text(r.extrapolation_below)}")
    lines += notes or []
    lines += [f"WARNING: {w}" for w in r.warnings]
    lines += [f"not expressible here: {m.text}" for m in missing]
    return lines

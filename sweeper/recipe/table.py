"""A recipe as the rows a person reads: ``(setting, value, interval or note)``, the table that
``sweeper recommend`` prints and the report page shows (one home for both)."""

from __future__ import annotations

from sweeper.recipe.doubts import ratios_text
from sweeper.recipe.optimizer_settings import settings_note
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.schedule import schedule_text

__all__ = ["recipe_rows", "time_text"]


def time_text(seconds: float | None) -> str:
    """The training time in hours or days, or how to get it."""
    if seconds is None:
        return "- (give --peak-tflops)"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / 3600:.2f} h"


def recipe_rows(r: Recipe) -> list[tuple[str, str, str]]:
    """The recipe's settings, each with its interval (the law's, at the recipe's level) or a note
    on where it comes from; the warnings are not in it."""
    shape = f"{r.depth} × {r.width}" + (" (inferred from N)" if r.shape_inferred else "")
    shape += f", {r.heads} heads"
    rows = [
        ("model", f"N = {r.n_params:.4g}", shape),
        ("tokens", f"{r.tokens:.4g}", f"{r.tokens / r.n_params:.1f} per parameter"),
        ("peak LR", f"{r.lr.value:.4g}", r.lr.text(label="law's")),
    ]
    if r.lr_point != r.lr.value or r.lr_regret_pct is not None:
        regret = (
            f"expected regret {r.lr_regret_pct:.2f}% of the loss (at the point: "
            f"{r.lr_point_regret_pct:.2f}%)"
            if r.lr_regret_pct is not None and r.lr_point_regret_pct is not None
            else "the law's estimate"
        )
        rows.append(("LR law's point", f"{r.lr_point:.4g}", f"{regret}; peak LR is the one used"))
    rows += [
        ("schedule", r.schedule, schedule_text(r.schedule, r.min_lr_ratio, r.decay_fraction)),
        ("min LR", f"{r.min_lr:.4g}", f"{r.min_lr_ratio:.0%} of peak"),
        (
            "batch (tokens)",
            f"{r.batch_tokens.value:.4g}",
            f"law {r.batch_tokens_law:.4g}{'; ' if r.batch_tokens.degenerate else ' '}"
            f"{r.batch_tokens.text()}",
        ),
        (
            "global batch",
            f"{r.global_batch_sequences} × {r.seq_len}",
            f"micro {r.micro_batch_size} × accum {r.grad_accum_steps} × {r.data_parallel} GPUs",
        ),
        ("steps", f"{r.total_steps}", f"warmup {r.warmup_steps} ({r.warmup_tokens:.3g} tok)"),
    ]
    if r.rampup is not None:
        ru = r.rampup
        every = ru.tokens_per_increment(r.global_batch_sequences)
        rows.append((
            "batch ramp-up",
            f"{ru.start_sequences} → {r.global_batch_sequences}",
            f"+{ru.increment_sequences} every {every:.3g} tokens, over {ru.ramp_tokens:.3g} tokens",
        ))  # fmt: skip
    note = r.init_std_note or (f"base width {r.base_width}" if r.base_width else "sqrt(2/(5·d))")
    rows += [
        (OPTIMIZER_NAMES.get(r.optimizer, r.optimizer), *_optimizer_values(r)),
        ("parametrization", r.parametrization, _parametrization_note(r)),
        ("weight decay / clip", f"{r.weight_decay:.4g} / {r.grad_clip:g}", settings_note(r)),
        ("init std", f"{r.init_std:.4g}", note),
        ("z-loss", f"{r.z_loss:g}", ""),
        ("memory / GPU", f"{_gib(r.memory.total_gb)} GiB", _memory_note(r)),
        ("time", time_text(r.train_time_s), f"MFU {r.hardware.mfu:.0%}, {r.flops:.3g} FLOPs"),
    ]
    if r.predicted_loss is not None:
        rows.append(("predicted loss", f"{r.predicted_loss:.4f}", "loss law"))
    ext = "unknown" if r.extrapolation_factor is None else f"{r.extrapolation_factor:.3g}×"
    by = f" ({ratios_text(r.extrapolation)})" if r.extrapolation else ""
    rows.append(("extrapolation", ext, f"target / largest proxy{by}"))
    for role, p in r.provenance.items():
        fb = " (fallback)" if p.get("fallback") else ""
        src = p.get("source")
        of = f" of {src}" if p.get("id") is not None and src else ""
        rows.append((f"{role} law", str(p.get("id") or src), f"{p.get('method')}{fb}{of}"))
    return rows


#: how the table names the recipe's optimizer (its Adam-family hyperparameters follow)
OPTIMIZER_NAMES = {
    "adamw": "AdamW",
    "muon": "Muon (+ AdamW)",
    "adafactor": "Adafactor",
    "sgd": "SGD",
}


def _optimizer_values(r: Recipe) -> tuple[str, str]:
    """The optimizer's own hyperparameters as the proxies ran it (proxy_models.optim): Adam's
    betas and eps (Muon's AdamW half too), SGD's momentum β1, none of them for Adafactor (torch's
    defaults: an audit's table had shown Adam betas for it)."""
    if r.optimizer == "adafactor":
        return "torch defaults", "no betas or Adam eps (beta2_decay -0.8)"
    if r.optimizer == "sgd":
        return f"momentum {r.adam_beta1:g}", "coupled L2 decay"
    return f"β=({r.adam_beta1}, {r.adam_beta2})", f"eps {r.adam_eps:g}"


def _parametrization_note(r: Recipe) -> str:
    if r.parametrization == "sp":
        return ""
    mult = f", output multiplier {r.output_mult:g}" if r.output_mult != 1.0 else ""
    depth = f", base depth {r.base_depth}" if r.base_depth is not None else ""
    return f"base width {r.base_width}{depth}{mult}"


def _gib(x: float) -> str:
    """GiB to one decimal, and to two significant digits below 1 (a small model's weights had
    read 'weights 0.0 + grads 0.0')."""
    return f"{x:.1f}" if x >= 1 or x == 0 else f"{x:.2g}"


def _memory_note(r: Recipe) -> str:
    m = r.memory
    fits = "" if m.fits is None else (" fits" if m.fits else " DOES NOT FIT")
    most = f"; max micro batch {m.max_micro_batch}" if m.max_micro_batch is not None else ""
    return (
        f"weights {_gib(m.weights_gb)} + grads {_gib(m.grads_gb)} + optimizer "
        f"{_gib(m.optimizer_gb)} + activations {_gib(m.activations_gb)} ({r.precision}, ZeRO "
        f"{m.zero_stage}){fits}{most}"
    )

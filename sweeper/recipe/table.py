"""A recipe as the rows a person reads: ``(setting, value, interval or note)``, the table that
``sweeper recommend`` prints and the report page shows (one home for both)."""

from __future__ import annotations

from sweeper.fitting.laws import law_from_dict
from sweeper.recipe.doubts import ratios_text
from sweeper.recipe.optimizer_settings import settings_note
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.scale import loss_outside_text, unit_factor
from sweeper.recipe.schedule import schedule_text

__all__ = ["recipe_rows", "time_text"]


def time_text(seconds: float | None) -> str:
    """The training time in seconds, minutes, hours or days, or how to get it (0.006 s had read
    "0.00 h": an audit)."""
    if seconds is None:
        return "- (give --peak-tflops)"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2g} s"


def recipe_rows(r: Recipe) -> list[tuple[str, str, str]]:
    """The recipe's settings, each with its interval (the law's, at the recipe's level) or a note
    on where it comes from; the warnings are not in it."""
    shape = f"{r.depth} × {r.width}" + (" (inferred from N)" if r.shape_inferred else "")
    shape += f", {r.heads} heads of {r.width // r.heads}" + (
        " (inferred)" if r.target.heads is None else ""
    )
    rows = [
        ("model", f"N = {r.n_params:.4g}", shape),
        ("tokens", f"{r.tokens:.4g}", f"{_ratio(r.tokens / r.n_params)} per parameter"),
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
        ("steps", f"{r.total_steps}", _steps_note(r)),
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
        ("time", time_text(r.train_time_s), _time_note(r)),
    ]
    if r.predicted_loss is not None:
        rows.append(("predicted loss", f"{r.predicted_loss:.4f}", _loss_note(r)))
    rows.append(("extrapolation", *_extrapolation_cells(r)))
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


def _ratio(x: float) -> str:
    """D/N to three significant digits (3.6e-4 had read "0.0 per parameter": an audit)."""
    return f"{x:.1f}" if 1.0 <= x < 1e4 else f"{x:.3g}"


def _steps_note(r: Recipe) -> str:
    """The warmup, and with a ramp-up the steps it takes by Megatron-LM's rule (a recommend
    audit: 334,487 steps, not the 317,892 at the full batch, and the warmup's samples ending at
    step 11,723, not 2000)."""
    warm = f"warmup {r.warmup_steps} ({r.warmup_tokens:.3g} tok)"
    if r.rampup is None:
        return warm
    total, warm_steps = r.rampup_steps()
    return (
        f"at the full batch; with the ramp-up {total} (+{total - r.total_steps}; Megatron-LM "
        f"< 0.18's count, one more from 0.18 when the last batch is partial); {warm}, "
        f"{r.warmup_steps * r.global_batch_sequences} samples, ending at step {warm_steps} with "
        "the ramp-up"
    )


def _time_note(r: Recipe) -> str:
    """The FLOPs the time counts: the compute (the laws' 6·N·D + attention) and the output
    layer's, which the compute leaves out."""
    return (
        f"MFU {r.hardware.mfu:.0%}, {r.train_flops:.3g} FLOPs ({r.flops:.3g} 6ND + attention, "
        f"{r.head_flops:.3g} output layer)"
    )


def _loss_note(r: Recipe) -> str:
    """Whose the predicted loss is, and where it is extrapolated beyond the loss law's data."""
    p = r.provenance.get("loss")
    if not p:
        return "loss law"
    law = law_from_dict(p)
    factor = unit_factor(law, r.bytes_per_token)
    n = law.conventions.law_n(r.n_params, r.n_params_total)
    beyond = loss_outside_text(law, {"n_params": n, "tokens": r.tokens * factor})
    return f"loss law, extrapolated: {beyond}" if beyond else "loss law"


def _extrapolation_cells(r: Recipe) -> tuple[str, str]:
    """The extrapolation's value and note: "below" where the target lies below a law's smallest
    proxy, rather than a factor under 1 that reads as within range (an audit's 0.0156×)."""
    by = f" ({ratios_text(r.extrapolation)})" if r.extrapolation else ""
    if r.extrapolation_factor is None:
        return "unknown", f"target / largest proxy{by}"
    value = f"{r.extrapolation_factor:.3g}×"
    if not r.extrapolation_below:
        return value, f"target / largest proxy{by}"
    below = ", ".join(f"{k} {v:.3g}×" for k, v in sorted(r.extrapolation_below.items()))
    return (
        f"below ({value})",
        f"the target lies below the smallest proxy ({below} below it): extrapolated downward; "
        f"target / largest proxy{by}",
    )


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

"""nanoGPT (karpathy/nanoGPT@3adf61e154c3, not on PyPI): a ``config/*.py`` of assignments for
``python train.py FILE`` (configurator.py execs it over train.py's globals; a name train.py does
not read is silently unused, so the file sets train.py's config globals only).

train.py at that commit: ``batch_size`` is the micro batch per GPU; ``gradient_accumulation_steps``
is the total over DDP processes (train.py asserts it divisible by the world size and divides it),
so it is accumulation × GPUs; ``get_lr`` warms up as (it+1)/(warmup_iters+1), then a cosine to the
absolute ``min_lr`` at ``lr_decay_iters`` (train.py:231-242): a cosine recipe, or a constant one
(min_lr = learning_rate); a WSD or linear recipe is refused (:data:`RUNS`). The loop runs
iterations 0..``max_iters`` inclusive
(``max_iters`` + 1 optimizer steps, so ``max_iters`` = total_steps − 1). Fixed, not keys: Adam eps
(torch's 1e-8), the init (N(0, 0.02), c_proj 0.02/sqrt(2·n_layer)), the vocabulary
(data/<dataset>/meta.pkl, else 50304), DDP only, ``lm_head`` tied to ``wte`` (model.py:138). Weight
decay on parameters with dim >= 2 only (model.py ``configure_optimizers``), as the proxies. The
dataset (``dataset``, default 'openwebtext') and the launch (``torchrun``) are the user's.
"""

from __future__ import annotations

from typing import Any

from sweeper.recipe.export import carry
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.header import comment, header_lines, num
from sweeper.recipe.export.versions import FrameworkVersion
from sweeper.recipe.recipe import Recipe

__all__ = ["RUNS", "cautions", "missing", "render"]

#: the recipe schedules nanoGPT's get_lr runs as the proxies ran them
RUNS = ("cosine", "constant")


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    out = carry.optimizer(r, "nanogpt")
    out += carry.schedule(
        r, "nanoGPT (train.py get_lr)", RUNS, f"a cosine to min_lr {r.min_lr:.4g}"
    )
    out += carry.parametrization(r) + carry.output_mult(r)
    out += carry.rampup(r) + carry.z_loss(r)
    out += carry.init_std(
        r, "nanoGPT's model._init_weights is fixed: 0.02, c_proj 0.02/sqrt(2·n_layer)"
    )
    out += carry.vocab(r, "nanoGPT reads it from data/<dataset>/meta.pkl (else 50304)")
    out += carry.eps(r, 1e-8, "nanoGPT's AdamW uses torch's default 1e-8 (no key)")
    out += carry.zero_stage(r, 0, "nanoGPT trains with DDP only")
    out += carry.data_parallel(r, "torchrun --nproc_per_node × nodes", accum_is_total=True)
    return out


def cautions(r: Recipe, fv: FrameworkVersion | None) -> list[str]:
    """nanoGPT's model beyond the file's keys."""
    return [
        "nanoGPT always ties lm_head to wte (model.py); Sweeper's proxies untie them by default "
        "(the recipe does not record the study's choice): the LR was measured on untied proxies "
        "unless the study set tied_embeddings"
    ]


def _values(r: Recipe) -> dict[str, Any]:
    return {
        "n_layer": r.depth,
        "n_head": r.heads,
        "n_embd": r.width,
        "block_size": r.seq_len,
        "batch_size": r.micro_batch_size,
        "gradient_accumulation_steps": r.grad_accum_steps * r.data_parallel,
        "learning_rate": r.lr.value,
        "min_lr": r.min_lr,
        "decay_lr": True,
        "warmup_iters": r.warmup_steps,
        "lr_decay_iters": r.total_steps,
        "max_iters": max(0, r.total_steps - 1),
        "weight_decay": r.weight_decay,
        "beta1": r.adam_beta1,
        "beta2": r.adam_beta2,
        "grad_clip": r.grad_clip,
        "dtype": "bfloat16" if r.precision == "bf16" else "float32",
    }


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    notes = [
        f"gradient_accumulation_steps = accumulation {r.grad_accum_steps} × {r.data_parallel} "
        "processes (train.py divides it by the world size); max_iters = total steps − 1 "
        "(the loop runs 0..max_iters); min_lr is absolute: change it with learning_rate",
        "yours to supply: the data (dataset = 'openwebtext' by default: data/<dataset>/train.bin "
        "and val.bin) and the launch: torchrun --standalone --nproc_per_node=GPUS train.py FILE "
        "(several nodes: --nnodes, --node_rank, --master_addr)",
        *(f"CAUTION: {c}" for c in cautions(r, fv)),
    ]
    body = "".join(
        f"{k} = {num(v) if isinstance(v, float) else repr(v)}\n" for k, v in _values(r).items()
    )
    return comment(header_lines(r, "nanogpt", miss, fv, notes)) + body

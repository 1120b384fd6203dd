"""Megatron-LM ``pretrain_gpt.py`` arguments, by Megatron-LM version (``--framework-version``
0.16, 0.17, 0.18, 0.19; default 0.19, the current release): one ``--flag value`` per line after
the ``#`` header (``shlex.split(text, comments=True)`` or ``$(grep -v '^#' FILE)`` gives the argv;
no value has spaces or quotes).

Read at the commits of :data:`~sweeper.recipe.export.versions.MEGATRON`
(megatron/training/arguments.py, megatron/core/num_microbatches_calculator.py):

- without a ramp-up, iteration-based: ``--global-batch-size``, ``--train-iters``,
  ``--lr-warmup-iters``, ``--lr-decay-iters``;
- with a ramp-up, sample-based (``--train-samples``, ``--lr-warmup-samples``,
  ``--lr-decay-samples``): < 0.18 ``--rampup-batch-size START INCREMENT SAMPLES`` (validate_args
  refuses it with ``--train-iters``); >= 0.18 ``--step-batch-size-schedule`` with thresholds in
  TOKENS (Megatron-LM passes ``--seq-length``: threshold // seq_length samples) and no
  ``--global-batch-size`` (validate_args: "Cannot specify both"), because ``--rampup-batch-size``
  is parsed and then ignored there. The header's iterations with the ramp-up are the version's
  (:func:`ramp_steps`): megatron/training/training.py ``update_train_iters`` drops the last
  partial batch < 0.18 and counts it as an iteration from 0.18;
- ``--lr-decay-style`` the recipe's schedule (the default is linear): cosine, linear, constant,
  or ``WSD`` with ``--lr-wsd-decay-style linear`` (the default is exponential) and
  ``--lr-wsd-decay-iters`` (``--lr-wsd-decay-samples`` with a ramp-up) = the decay's steps
  (megatron/training/config/training_config.py ``lr_decay_style``/``lr_wsd_decay_style``, < 0.17
  megatron/training/training_config.py; megatron/core/optimizer_param_scheduler.py ``get_lr``:
  the decay starts at lr_decay_steps − wsd_decay_steps and reaches ``--min-lr`` at
  lr_decay_steps; get_optimizer_param_scheduler in megatron/training/training.py multiplies the
  iterations by the global batch): every schedule as the proxies ran it;
- ``--min-lr`` absolute, Adam betas/eps
  (``--optimizer adam``, the default, is AdamW: megatron/core/optimizer/optimizer_config.py
  ``decoupled_weight_decay = True``), ``--weight-decay`` (default 0.01), ``--clip-grad``,
  ``--init-method-std``, ``--bf16``;
- ZeRO: stage 1 ``--use-distributed-optimizer``; stages 2/3 Megatron FSDP
  (``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads|optim_grads_params``);
- muP: ``--use-mup`` and its flags from core 0.17 (:mod:`.megatron_mup`); none at 0.16;
- the proxies' architecture (:class:`proxy_models.config.ProxyConfig` defaults), where Megatron's
  defaults differ (TransformerConfig: hidden/attention dropout 0.1, biases on every linear,
  output layer tied to the word embeddings): ``--hidden-dropout 0.0 --attention-dropout 0.0
  --disable-bias-linear --untie-embeddings-and-output-weights``, and ``--normalization`` and
  ``--position-embedding-type learned_absolute`` (the defaults, written to be seen). The MLP is
  Megatron's default, 4·hidden with F.gelu (exact: the tanh-approximate fused bias-GELU is off
  without biases, validate_args), pre-LN, softmax scale 1/sqrt(d_head): the proxies'. Megatron's
  LayerNorm has a bias (zero-initialised, not decayed), the proxies' norms a gain only: a caution.
"""

from __future__ import annotations

import math

from proxy_models.config import ProxyConfig
from sweeper.recipe.export import carry
from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.header import comment, header_lines, num
from sweeper.recipe.export.megatron_mup import mup_args, mup_cautions, mup_differences, mup_notes
from sweeper.recipe.export.versions import MEGATRON, FrameworkVersion, MegatronFacts
from sweeper.recipe.recipe import Recipe
from sweeper.recipe.schedule import decay_start

__all__ = ["cautions", "missing", "ramp_steps", "render", "step_schedule"]

Args = list[tuple[str, ...]]
#: ZeRO stage -> Megatron flags
_ZERO: dict[int, Args] = {
    0: [],
    1: [("--use-distributed-optimizer",)],
    2: [("--use-megatron-fsdp",), ("--data-parallel-sharding-strategy", "optim_grads")],
    3: [("--use-megatron-fsdp",), ("--data-parallel-sharding-strategy", "optim_grads_params")],
}


#: the proxies' architecture (proxy_models.config defaults; the recipe does not record a study's)
_PROXY = ProxyConfig()
#: proxy_models.config.NORMS -> Megatron's --normalization
_NORMALIZATION = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}


def _architecture_args() -> Args:
    """Megatron's flags for the proxies' architecture where its defaults differ."""
    args: Args = [
        ("--hidden-dropout", "0.0"),
        ("--attention-dropout", "0.0"),
        ("--disable-bias-linear",),
        ("--normalization", _NORMALIZATION[_PROXY.norm]),
        ("--position-embedding-type", "learned_absolute"),
    ]
    if not _PROXY.tied_embeddings:
        args.append(("--untie-embeddings-and-output-weights",))
    return args


def _architecture_cautions() -> list[str]:
    out = [
        "the architecture flags are those of Sweeper's proxies' defaults (no dropout, no biases, "
        f"{_NORMALIZATION[_PROXY.norm]}, "
        + ("tied" if _PROXY.tied_embeddings else "untied")
        + " output layer, learned positions, 4× GELU MLP): the recipe does not record the "
        "study's norm or embedding tying: if its proxies used another, change --normalization "
        "or --untie-embeddings-and-output-weights"
    ]
    if _PROXY.norm == "layernorm":
        out.append(
            "Megatron's LayerNorm has a bias (zero-initialised, not weight-decayed); the proxies' "
            "norms have a gain only: no flag removes it"
        )
    return out


def _facts(fv: FrameworkVersion | None) -> MegatronFacts:
    return MEGATRON[fv.version if fv is not None else "0.19"]


def _schedule_entries(r: Recipe) -> list[tuple[int, int]]:
    """The ramp-up as (samples threshold, batch) entries, sorted: entry i = 0..n at
    ceil(i·SAMPLES/n) samples with batch START + i·INCREMENT, which is the < 0.18 ramp-up's batch
    at every consumed-samples count (n = (global − START) / INCREMENT; thresholds that round to
    the same sample keep the larger batch)."""
    ru = r.rampup
    assert ru is not None
    n = ru.increments_to(r.global_batch_sequences)
    entries: dict[int, int] = {}
    for i in range(n + 1):
        samples = math.ceil(i * ru.ramp_samples / n)
        entries[samples] = ru.start_sequences + i * ru.increment_sequences
    return sorted(entries.items())


def step_schedule(r: Recipe) -> str:
    """The ramp-up as ``--step-batch-size-schedule`` entries ``TOKENS:BATCH``, comma-separated,
    the thresholds of :func:`_schedule_entries` in tokens (× seq_len, which Megatron-LM divides
    back out)."""
    return ",".join(f"{s * r.seq_len}:{batch}" for s, batch in _schedule_entries(r))


def ramp_steps(r: Recipe, fv: FrameworkVersion | None) -> tuple[int, int]:
    """(total, warmup) iterations Megatron-LM runs with the recipe's ramp-up at ``fv``'s version:
    < 0.18 the recipe's :meth:`~sweeper.recipe.recipe.Recipe.rampup_steps` (update_train_iters
    with --rampup-batch-size drops the last partial batch); from 0.18 the step schedule's count,
    which includes it: one iteration more when the samples do not end on a whole batch (an
    export audit: 223,020, the header had said 223,019). The warmup, counted in samples, ends on
    the iteration that consumes them in either."""
    if r.rampup is None or not _facts(fv).step_schedule:
        return r.rampup_steps()
    # (the schedule's loop is RampUp.iterations' rule: the batch at the samples consumed, the
    # last partial batch one step; the warmup's count, which was already that rule)
    g, samples = r.global_batch_sequences, -(-int(r.tokens) // r.seq_len)
    return r.rampup.iterations(g, samples), r.rampup_steps()[1]


def _batch_args(r: Recipe, facts: MegatronFacts) -> Args:
    """Micro/global batch and the run's length: iterations, or samples with a ramp-up."""
    args: Args = [("--micro-batch-size", str(r.micro_batch_size))]
    g = r.global_batch_sequences
    if r.rampup is None:
        return [
            *args,
            ("--global-batch-size", str(g)),
            ("--train-iters", str(r.total_steps)),
            ("--lr-warmup-iters", str(r.warmup_steps)),
            ("--lr-decay-iters", str(r.total_steps)),
        ]
    ru = r.rampup
    if facts.step_schedule:
        args.append(("--step-batch-size-schedule", step_schedule(r)))
    else:
        args += [
            ("--global-batch-size", str(g)),
            ("--rampup-batch-size", str(ru.start_sequences), str(ru.increment_sequences),
             str(ru.ramp_samples)),
        ]  # fmt: skip
    return [
        *args,
        ("--train-samples", str(-(-int(r.tokens) // r.seq_len))),
        ("--lr-warmup-samples", str(r.warmup_steps * g)),
        ("--lr-decay-samples", str(r.total_steps * g)),
    ]


#: the recipe's schedule -> Megatron's --lr-decay-style
_DECAY_STYLE = {"cosine": "cosine", "linear": "linear", "constant": "constant", "wsd": "WSD"}


def _decay_args(r: Recipe) -> Args:
    """``--lr-decay-style`` and, for WSD, the linear decay over its last steps (in iterations,
    or in samples at the full batch when the run is counted in samples: a ramp-up)."""
    args: Args = [("--lr-decay-style", _DECAY_STYLE[r.schedule])]
    if r.schedule != "wsd":
        return args
    steps = r.total_steps - decay_start(r)
    length = (
        ("--lr-wsd-decay-iters", str(steps))
        if r.rampup is None
        else ("--lr-wsd-decay-samples", str(steps * r.global_batch_sequences))
    )
    return [*args, ("--lr-wsd-decay-style", "linear"), length]


def _args(r: Recipe, facts: MegatronFacts) -> Args:
    args: Args = [
        ("--num-layers", str(r.depth)),
        ("--hidden-size", str(r.width)),
        ("--num-attention-heads", str(r.heads)),
        ("--seq-length", str(r.seq_len)),
        ("--max-position-embeddings", str(r.seq_len)),
    ]
    args += _architecture_args()
    args += _batch_args(r, facts)
    args += [
        ("--lr", num(r.lr.value)),
        ("--min-lr", num(r.min_lr)),
        *_decay_args(r),
        ("--weight-decay", num(r.weight_decay)),
        ("--adam-beta1", num(r.adam_beta1)),
        ("--adam-beta2", num(r.adam_beta2)),
        ("--adam-eps", num(r.adam_eps)),
        ("--clip-grad", num(r.grad_clip)),
        ("--init-method-std", num(r.init_std)),
    ]
    if r.precision == "bf16":
        args.append(("--bf16",))
    args += _ZERO[r.hardware.zero_stage]
    if r.parametrization != "sp" and facts.use_mup:
        args += mup_args(r)
    return args


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    facts = _facts(fv)
    out = carry.optimizer(r, "megatron")
    if r.parametrization != "sp" and facts.use_mup:
        out += mup_differences(r)
    else:
        out += carry.parametrization(r, f"--use-mup exists from core 0.17, not in {facts.tag}")
        out += carry.output_mult(r)
    out += carry.z_loss(r)
    if r.z_loss:
        out[-1] = Missing(
            "z_loss", out[-1].text + " (Megatron-LM has only --moe-z-loss-coeff, the MoE router's)"
        )
    out += carry.vocab(
        r,
        "Megatron-LM takes it from the tokenizer (--tokenizer-type, --vocab-file); --vocab-size "
        "only with the NullTokenizer",
    )
    return out


def cautions(r: Recipe, fv: FrameworkVersion | None) -> list[str]:
    block = "Sweeper's proxies' (the flags below: no biases, learned positions...)"
    out = carry.not_the_proxies(r, "megatron", block) + _architecture_cautions()
    if r.parametrization != "sp" and _facts(fv).use_mup:
        out += mup_cautions(r)
    return out


def _notes(r: Recipe, fv: FrameworkVersion | None) -> list[str]:
    facts = _facts(fv)
    notes = [
        "--optimizer adam (the default) is AdamW (decoupled weight decay); --min-lr is absolute: "
        "if you change --lr, change --min-lr with it"
    ]
    if r.rampup is not None:
        g = r.global_batch_sequences
        total, warm = ramp_steps(r, fv)
        notes.append(
            f"with the ramp-up the run is counted in samples (sequences of {r.seq_len} tokens), "
            f"not iterations: --train-samples = tokens / seq_len, --lr-warmup-samples = "
            f"{r.warmup_steps} warmup steps × the full batch {g}, --lr-decay-samples = "
            f"{r.total_steps} steps × {g}; the smaller batches of the ramp make Megatron run "
            f"{total} iterations (not {r.total_steps}) and end the warmup at iteration {warm} "
            f"(not {r.warmup_steps})"
        )
        notes.append(
            "batch ramp-up as --step-batch-size-schedule TOKENS:BATCH (thresholds in tokens, "
            "Megatron-LM >= core 0.18; --rampup-batch-size is parsed and ignored there)"
            if facts.step_schedule
            else "batch ramp-up as --rampup-batch-size START INCREMENT SAMPLES (Megatron-LM < core "
            "0.18; from core 0.18 it is ignored: export for framework version 0.18 or later)"
        )
    if r.hardware.zero_stage >= 2:
        notes.append(
            f"ZeRO stage {r.hardware.zero_stage} as Megatron FSDP: check the other flags your "
            "Megatron-LM version requires with --use-megatron-fsdp"
        )
    if r.parametrization != "sp" and facts.use_mup:
        notes += mup_notes(r)
    return notes


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    facts = _facts(fv)
    notes = _notes(r, fv) + [f"CAUTION: {c}" for c in cautions(r, fv)]
    body = "".join(" ".join(a) + "\n" for a in _args(r, facts))
    ramp = ramp_steps(r, fv) if r.rampup is not None else None
    return comment(header_lines(r, "megatron", miss, fv, notes, ramp=ramp)) + body

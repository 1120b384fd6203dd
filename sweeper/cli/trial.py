"""``sweeper trial``: train one proxy from flags and print its result.

torch (through ``proxy_models``) is imported inside the verb, so ``sweeper --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sweeper.cli.numbers import count
from sweeper.cli.output import console
from sweeper.errors import SweeperError

__all__ = ["register", "run_trial"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "trial",
        help="train one proxy model and print its losses",
        description="Train one proxy transformer for a token budget and print the result "
        "(validation loss, train loss, divergence, throughput).",
    )
    m = p.add_argument_group("model")
    m.add_argument("--width", type=int, default=64, help="d_model (default 64)")
    m.add_argument("--depth", type=int, default=2, help="transformer blocks (default 2)")
    heads = m.add_mutually_exclusive_group()
    heads.add_argument("--heads", type=int, default=None, help="attention heads")
    heads.add_argument("--head-dim", type=int, default=None, help="head size (default 16)")
    m.add_argument("--context", type=int, default=128, help="sequence length in tokens")
    m.add_argument("--vocab", type=int, default=None, help="vocab size (required for .bin data)")
    m.add_argument("--norm", choices=("layernorm", "rmsnorm"), default="layernorm")
    m.add_argument("--qk-norm", action="store_true", help="normalise queries and keys")
    m.add_argument("--tied", action="store_true", help="tie lm_head to the token embedding")
    m.add_argument("--init-std", type=float, default=0.02)
    m.add_argument(
        "--output-mult", type=float, default=1.0, help="tunable factor on the logits (default 1)"
    )
    m.add_argument("--parametrization", choices=("sp", "mup", "completep"), default="sp")
    m.add_argument("--base-width", type=int, default=64, help="muP/CompleteP base width")
    m.add_argument("--base-depth", type=int, default=2, help="CompleteP base depth")

    o = p.add_argument_group("optimisation")
    o.add_argument("--lr", type=float, required=True, help="peak learning rate")
    o.add_argument("--batch-size", type=int, default=32, help="sequences per step (default 32)")
    o.add_argument("--micro-batch-size", type=int, default=None, help="for grad accumulation")
    o.add_argument("--tokens", type=count, default=819_200,
                   help="training tokens, in whole steps of batch × context (at least one)")  # fmt: skip
    o.add_argument("--warmup", type=float, default=0.1, help="<1: fraction of steps, else steps")
    o.add_argument("--schedule", choices=("cosine", "wsd", "constant", "linear"), default="cosine")
    o.add_argument(
        "--optimizer", choices=("adamw", "muon", "adafactor", "sgd"), default="adamw",
        help="adamw (default); muon: Muon on the 2-D hidden matrices, AdamW on the rest",
    )  # fmt: skip
    o.add_argument("--min-lr-ratio", type=float, default=0.1)
    o.add_argument("--decay-fraction", type=float, default=0.2, help="WSD decay phase")
    o.add_argument("--weight-decay", type=float, default=0.1)
    o.add_argument("--beta1", type=float, default=0.9)
    o.add_argument("--beta2", type=float, default=0.95)
    o.add_argument("--eps", type=float, default=1e-8)
    o.add_argument("--grad-clip", type=float, default=1.0, help="0 = off")
    o.add_argument("--z-loss", type=float, default=0.0)
    o.add_argument(
        "--ramp",
        nargs=3,
        type=count,
        metavar=("START", "INCREMENT", "TOKENS"),
        default=None,
        help="batch ramp-up: start batch, increment, tokens per increment",
    )

    r = p.add_argument_group("run")
    r.add_argument("--data", default=None, help="text file, dir of .txt/.md, or dir with .bin")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--threads", type=int, default=None, help="torch threads")
    r.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    r.add_argument("--eval-batches", type=int, default=8, help="held-out batches of 32 sequences")
    r.add_argument("--eval-every", type=int, default=None, help="print progress every N steps")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_trial)


def run_trial(args: argparse.Namespace) -> int:
    import proxy_models as pm

    try:
        cfg_kwargs: dict[str, Any] = {}
        if args.heads is not None:
            cfg_kwargs["n_heads"] = args.heads
        if args.head_dim is not None:
            cfg_kwargs["head_dim"] = args.head_dim
        hp = pm.HParams(
            lr=args.lr,
            batch_size=args.batch_size,
            micro_batch_size=args.micro_batch_size,
            warmup=args.warmup,
            schedule=args.schedule,
            min_lr_ratio=args.min_lr_ratio,
            decay_fraction=args.decay_fraction,
            beta1=args.beta1,
            beta2=args.beta2,
            eps=args.eps,
            weight_decay=args.weight_decay,
            grad_clip=args.grad_clip,
            z_loss=args.z_loss,
            ramp=pm.BatchRamp(*args.ramp) if args.ramp else None,
            optimizer=args.optimizer,
        )
        shape = {
            "width": args.width,
            "depth": args.depth,
            "context": args.context,
            "norm": args.norm,
            "qk_norm": args.qk_norm,
            "tied_embeddings": args.tied,
            "init_std": args.init_std,
            "output_mult": args.output_mult,
            "parametrization": args.parametrization,
            "base_width": args.base_width,
            "base_depth": args.base_depth,
            **cfg_kwargs,
        }
        pm.ProxyConfig(**shape)  # bad shapes fail before the data is read
        data = pm.load_data(args.data, vocab_size=args.vocab)
        cfg = pm.ProxyConfig(vocab_size=args.vocab or data.vocab_size, **shape)
        _note_rounded_tokens(hp, args.tokens, cfg.context)
        result = pm.train(
            cfg,
            hp,
            tokens=args.tokens,
            data=data,
            seed=args.seed,
            device=args.device,
            threads=args.threads,
            eval_batches=args.eval_batches,
            eval_every=args.eval_every,
            report=_progress if args.eval_every else None,
        )
    except (ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        raise SweeperError(str(e).splitlines()[0] if str(e) else type(e).__name__) from e
    except (MemoryError, RuntimeError) as e:
        from sweeper.run.trainable import out_of_memory

        if not out_of_memory(e):
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SweeperError(f"the run ran out of memory ({first}): a smaller --batch-size, a "
                           "--micro-batch-size, or a smaller --width/--depth/--vocab") from e

    out = result.to_dict()
    out["data"] = data.name
    out["data_fingerprint"] = data.fingerprint
    out["flops_per_token"] = cfg.flops_per_token()
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(cfg, hp, out)
    return 0


def _note_rounded_tokens(hp: Any, tokens: int, context: int) -> None:
    """One line on stderr when the budget asked is not what trains: training takes whole steps
    (at least one), so ``--tokens 100`` had trained 4096 tokens in silence (a verbs audit)."""
    from proxy_models.hparams import batch_sizes

    if tokens < 1:  # (the training refuses it, with its own message)
        return
    sizes = batch_sizes(hp, tokens, context)
    trained = sum(sizes) * context
    if trained == tokens:
        return
    n = len(sizes)
    steps = f"{n:,} whole step{'s' if n > 1 else ''}"
    of = (
        f"of {hp.batch_size} sequences × {context} tokens ({hp.batch_size * context:,} tokens each)"
        if hp.ramp is None
        else "along the batch ramp"
    )
    print(
        f"note: --tokens {tokens:,} trains {trained:,} tokens: {steps} {of}; training takes "
        "whole steps, at least one",
        file=sys.stderr,
    )


def _progress(step: int, metrics: dict[str, float]) -> None:
    print(
        f"step {step:>6}  tokens {int(metrics['tokens']):>10}  train {metrics['train_loss']:.4f}  "
        f"val {metrics['val_loss']:.4f}  lr {metrics['lr']:.3g}  |g| {metrics['grad_norm']:.3g}",
        file=sys.stderr,
    )


def _print_table(cfg: Any, hp: Any, out: dict[str, Any]) -> None:
    from rich.table import Table

    title = (
        f"width {cfg.width} × depth {cfg.depth}, {cfg.heads} heads, context {cfg.context}, "
        f"{cfg.parametrization}; lr {hp.lr:g}, batch {hp.batch_size}"
    )
    table = Table(title=title, show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")

    def fmt(v: Any, spec: str) -> str:
        return "n/a" if v is None else format(v, spec)

    rows = [
        ("val loss (nats/token)", fmt(out["val_loss"], ".4f")),
        ("train loss", fmt(out["train_loss"], ".4f")),
        ("loss at init", fmt(out["init_loss"], ".4f")),
        ("diverged", "yes" if out["diverged"] else "no"),
        ("N (non-embedding)", f"{out['n_params']:,}"),
        ("parameters in total", f"{out['n_params_total']:,}"),
        ("tokens", f"{out['tokens']:,}"),
        ("steps", f"{out['steps']:,}"),
        ("wall time (s)", fmt(out["wall_s"], ".1f")),
        ("tokens/s", fmt(out["tokens_per_s"], ",.0f")),
        ("FLOP/s", fmt(out["flops_per_s"], ".3g")),
        (
            "grad norm mean / max",
            f"{fmt(out['grad_norm_mean'], '.3g')} / {fmt(out['grad_norm_max'], '.3g')}",
        ),
        ("device", out["device"]),
        ("data", f"{out['data']} ({out['data_fingerprint']})"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    console().print(table)

"""Throughput of the real ``proxy_models.train`` loop on this machine, next to its matmul peak.

For widths 32, 64, 128, 256 and depths 2 and 4 (SP, batch 32 × 128 tokens by default) it prints
tokens/s and achieved FLOP/s (``flops_per_token · tokens/s``, Kaplan's 6N + attention count) and
their ratio to the best dense fp32 matmul rate measured in the same run (an "MFU" for this CPU).

Each configuration: one warm-up run, then ``--repeats`` timed runs of about ``--segment-s``
seconds each; the median of their ``tokens_per_s`` (training steps only, setup and evaluation
excluded) is reported. Runs in about two to three minutes on 2 cores.

    .venv/bin/python scripts/bench_throughput.py [--threads 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from pathlib import Path

import torch

from proxy_models import HParams, ProxyConfig, load_data, train


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def matmul_peak(device: torch.device, sizes: tuple[int, ...] = (1024, 2048)) -> tuple[float, int]:
    """Best fp32 FLOP/s of ``n × n @ n × n`` over several tries; returns (FLOP/s, n)."""
    best, best_n = 0.0, sizes[0]
    for n in sizes:
        g = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=g).to(device)
        b = torch.randn(n, n, generator=g).to(device)
        tries = 10 if n <= 1024 else 5
        for _ in range(tries + 1):  # the first is a warm-up
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            torch.mm(a, b)
            if device.type == "cuda":
                torch.cuda.synchronize()
            rate = 2.0 * n**3 / (time.perf_counter() - t)
            if rate > best:
                best, best_n = rate, n
    return best, best_n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per configuration")
    parser.add_argument("--segment-s", type=float, default=1.5, help="target seconds per run")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    data = load_data(None)
    t0 = time.perf_counter()
    peak, peak_n = matmul_peak(device)
    print(
        f"{cpu_name() if device.type == 'cpu' else torch.cuda.get_device_name(device)}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}"
    )
    print(f"dense fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s (n={peak_n}, best of several)")
    print(f"SP, batch {args.batch_size} x {args.context} tokens, AdamW, median of {args.repeats}")
    print()
    header = (
        f"{'width':>5} {'depth':>5} {'N':>9} {'ms/step':>8} {'tokens/s':>10} "
        f"{'GFLOP/s':>8} {'MFU':>6}"
    )
    print(header)
    print("-" * len(header))
    hp = HParams(lr=1e-3, batch_size=args.batch_size)
    step_tokens = args.batch_size * args.context
    for depth in args.depths:
        for width in args.widths:
            cfg = ProxyConfig(width=width, depth=depth, context=args.context)
            common = {"data": data, "device": args.device, "eval_batches": 1}
            warm = train(cfg, hp, tokens=2 * step_tokens, **common)
            step_s = step_tokens / warm.tokens_per_s
            steps = max(3, math.ceil(args.segment_s / step_s))
            rates = [
                train(cfg, hp, tokens=steps * step_tokens, seed=i, **common).tokens_per_s
                for i in range(args.repeats)
            ]
            tps = statistics.median(rates)
            flops = cfg.flops_per_token() * tps
            print(
                f"{width:>5} {depth:>5} {cfg.n_params():>9,} {1000 * step_tokens / tps:>8.1f} "
                f"{tps:>10,.0f} {flops / 1e9:>8.1f} {flops / peak:>6.1%}"
            )
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

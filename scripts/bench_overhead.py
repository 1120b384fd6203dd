"""What `sweeper launch` costs over running the same trials without Ray and Optuna.

1. Launch the study with ``sweeper launch`` into a fresh SQLite file (the whole command: Python start,
   Ray start, Optuna asks/tells, storage writes, worker start-up, Ray shutdown).
2. Read back every training run it made (cell, hyperparameters, seed) in the order they started.
3. Run exactly those runs again without Ray or Optuna:
   - packed: a process pool with as many 1-thread processes as the launch ran trials at once
     (fresh ``spawn`` processes that import torch, like Ray's workers), runs handed out in launch order;
   - single (unless ``--no-single``): back to back in one process using every core (torch threads =
     CPU count), the naive way.
4. Print the walls and the overhead ratios ``launch / packed`` (the fair one) and ``launch / single``.

    .venv/bin/python scripts/bench_overhead.py                          # smoke study: ~1-2 minutes
    .venv/bin/python scripts/bench_overhead.py studies/quickstart.toml --no-single  # ~26 minutes here

The goal is an overhead under 5% for the quickstart study. Nothing here is imported by Sweeper.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _launch(study: Path, url: str, max_concurrent: int | None) -> float:
    cmd = [sys.executable, "-m", "sweeper", "launch", str(study), "--storage", url, "--no-progress"]
    if max_concurrent:
        cmd += ["--max-concurrent", str(max_concurrent)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"sweeper launch failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    print(r.stdout.strip().splitlines()[0])
    return wall


def _runs(study: Path, url: str) -> tuple[list[dict[str, Any]], float]:
    """Every run of the launched sweep in start order, as train() arguments, and their wall sum."""
    import optuna

    from sweeper.study.ladder import cells
    from sweeper.study.space import hparams_kwargs
    from sweeper.study.spec import load_study
    from sweeper.study.sweep import study_name

    spec = load_study(study)
    runs: list[tuple[Any, int, dict[str, Any]]] = []
    wall_sum = 0.0
    for cell in cells(spec):
        s = optuna.load_study(study_name=study_name(spec.name, cell.name), storage=url)
        for t in s.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            for r in t.user_attrs["runs"]:
                wall_sum += float(r["wall_s"])
                runs.append(
                    (
                        t.datetime_start,
                        int(r["seed"]),
                        {
                            "model": cell.proxy_config_kwargs(),
                            "hparams": hparams_kwargs(spec, t.params),
                            "tokens": cell.tokens,
                            "seed": int(r["seed"]),
                            "data": spec.sweep.data,
                            "eval_batches": spec.train.eval_batches,
                        },
                    )
                )
    runs.sort(key=lambda x: (x[0], x[1]))
    return [r for _, _, r in runs], wall_sum


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_data: Any = None


def _init_worker(source: str, vocab_size: int) -> None:
    global _data
    from proxy_models import load_data

    _data = load_data(source, vocab_size=vocab_size)


def _train(run: dict[str, Any], threads: int = 1) -> float:
    from proxy_models import HParams, ProxyConfig, train

    r = train(
        ProxyConfig(**run["model"]),
        HParams(**run["hparams"]),
        tokens=run["tokens"],
        data=_data,
        seed=run["seed"],
        device="cpu",
        threads=threads,
        eval_batches=run["eval_batches"],
    )
    return r.val_loss


def _packed(runs: list[dict[str, Any]], processes: int) -> float:
    ctx = mp.get_context("spawn")
    vocab = runs[0]["model"]["vocab_size"]
    t0 = time.perf_counter()
    with ctx.Pool(processes, initializer=_init_worker, initargs=(runs[0]["data"], vocab)) as pool:
        list(pool.imap(_train, runs, chunksize=1))
    return time.perf_counter() - t0


def _single(runs: list[dict[str, Any]]) -> float:
    code = (
        "import json, sys, time; t0 = time.perf_counter(); "
        "sys.path.insert(0, sys.argv[1]); import bench_overhead as b; "
        "runs = json.loads(sys.stdin.read()); "
        "b._init_worker(runs[0]['data'], runs[0]['model']['vocab_size']); "
        "[b._train(r, threads=int(sys.argv[2])) for r in runs]; "
        "print(time.perf_counter() - t0)"
    )
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "scripts"), str(_cores())],
        input=json.dumps(runs),
        capture_output=True,
        text=True,
        check=True,
    )
    del r
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", nargs="?", default=str(REPO / "studies" / "smoke.toml"))
    ap.add_argument("--max-concurrent", type=int, help="passed to sweeper launch")
    ap.add_argument("--no-single", action="store_true", help="skip the single-process baseline")
    ap.add_argument("--keep", metavar="DIR", help="keep the launch's database in DIR")
    args = ap.parse_args()
    study = Path(args.study).resolve()
    workdir = Path(args.keep or tempfile.mkdtemp(prefix="sweeper-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "bench.db"
    if db.exists():
        db.unlink()
    url = f"sqlite:///{db}"
    print(f"study {study.name}, {_cores()} cores, storage {url}")

    launch_s = _launch(study, url, args.max_concurrent)
    runs, wall_sum = _runs(study, url)
    slots = args.max_concurrent or _cores()
    print(
        f"launch: {launch_s:.1f} s for {len(runs)} runs (their own wall_s sum to {wall_sum:.1f} s)"
    )

    packed_s = _packed(runs, slots)
    print(f"packed baseline ({slots} processes x 1 thread): {packed_s:.1f} s")
    print(
        f"overhead launch/packed: {launch_s / packed_s:.3f} ({(launch_s / packed_s - 1) * 100:+.1f}%)"
    )
    print(f"per run: {(launch_s - packed_s) / len(runs):+.2f} s")
    if not args.no_single:
        single_s = _single(runs)
        print(f"single-process baseline (1 process x {_cores()} threads): {single_s:.1f} s")
        print(
            f"overhead launch/single: {launch_s / single_s:.3f} ({(launch_s / single_s - 1) * 100:+.1f}%)"
        )
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

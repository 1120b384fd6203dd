"""The GPU path against the CPU: train a grid study's trials on CUDA (bf16 autocast) and compare
them, point by point and law by law, with the same trials trained on the CPU in fp32.

A machine with a GPU often lacks the rest of Sweeper's stack (Ray, Optuna, a database), so the work
is split in three steps, and only the middle one needs the GPU and nothing beyond torch and numpy:

1. ``plan STUDY --dir DIR`` (here): every trial the grid study gives its workers (cell x LR x batch
   x seed, the config dict :func:`sweeper.run.trainable.base_config` and the searcher build), and
   the built-in corpus of this Python written out as ``DIR/corpus.txt``, so that the other machine
   trains on the same bytes whatever its Python version (the corpus is the standard library's
   source, which differs between versions);
2. ``train --dir DIR --device cuda --csv OUT`` (on the GPU machine, from the repository root):
   runs each trial through :func:`sweeper.run.trainable.train_once`, the function a Ray worker
   runs, and writes one CSV row per run as it finishes (so a run stopped by ``--budget-s`` keeps
   what finished); ``--repeat K`` trains the first K trials again, to measure the device's own
   run-to-run spread;
3. ``compare GPU.csv --reference CPU.csv`` (here): the relative loss difference of every trial
   trained on both (same cell, LR, batch, seed), the best LR per cell on each device, and the LR law
   fitted to each (``sweeper.fit``, the default surface method, on the runs both devices trained).

    .venv/bin/python scripts/gpu_check.py plan studies/quickstart.toml --dir .gpu
    python3 scripts/gpu_check.py train --dir .gpu --device cuda --csv $OUT/gpu.csv   # GPU machine
    .venv/bin/python scripts/gpu_check.py compare gpu.csv --reference docs/data/quickstart.csv \\
        --study studies/quickstart.toml --json docs/data/gpu_check.json

``train --device cpu`` on this machine must reproduce the reference CSV's losses: that shows the
plan gives the trials the sweep gave.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python3 scripts/gpu_check.py` on a machine without the install
    sys.path.insert(0, str(REPO))

#: law resamples: 5x the surface default, whose interval ends move by ~0.02 with the rows' order
N_BOOT = 1000
KEYS = ("cell", "lr", "batch_size", "seed")  # what identifies a trial across devices
COLUMNS = (
    "cell", "width", "depth", "n_params", "n_params_total", "tokens", "lr", "batch_size",
    "seq_len", "parametrization", "seed", "loss", "diverged", "train_loss", "steps", "wall_s",
    "tokens_per_s", "device", "precision", "repeat",
)  # fmt: skip


# ---- 1. plan (needs Sweeper installed) ---------------------------------------------------------
def plan(study: str, out_dir: Path) -> list[dict[str, Any]]:
    from proxy_models.data import builtin_corpus
    from sweeper.run.trainable import base_config, own_config, trial_config
    from sweeper.study.ladder import cells
    from sweeper.study.space import grid_values
    from sweeper.study.spec import load_study

    spec = load_study(study)
    if spec.sampler.kind != "grid":
        raise SystemExit(f"{study}: a grid study is needed, not sampler.kind {spec.sampler.kind!r}")
    grid = grid_values(spec.search)
    points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    first = spec.sweep.first_seed
    seeds = range(first, first + spec.sweep.seeds_per_point)
    # the corpus is written first, so that the driver's data check reads it; the path the runs
    # get is relative, resolved against DIR at train time; own: your builder or training function
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = out_dir / "corpus.txt"
    corpus.write_bytes(builtin_corpus().tobytes())
    base = {**base_config(spec, str(corpus)), "data": "corpus.txt", "own": own_config(spec)}
    configs = []
    for seed, cell, params in itertools.product(seeds, cells(spec), points):
        meta = {
            "width": cell.width,
            "depth": cell.depth,
            "n_params": cell.n_params,
            "n_params_total": cell.n_params_total,
            "seq_len": cell.context,
        }
        configs.append({**trial_config(base, spec, cell, params, seed=seed), "meta": meta})
    (out_dir / "configs.json").write_text(json.dumps({"study": study, "trials": configs}))
    return configs


# ---- 2. train (needs torch and numpy only) -----------------------------------------------------
def train(
    out_dir: Path, device: str, csv_path: Path, *, repeat: int, budget_s: float, threads: int
) -> int:
    from sweeper.run.trainable import train_once

    trials = json.loads((out_dir / "configs.json").read_text())["trials"]
    # a repeat runs right after its first run, so that a budget cut keeps the pairs it started
    todo = [(t, rep) for i, t in enumerate(trials) for rep in range(2 if i < repeat else 1)]
    t0 = time.perf_counter()
    done = 0
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for trial, rep in todo:
            if time.perf_counter() - t0 > budget_s:
                print(f"budget of {budget_s:.0f} s spent: {done} of {len(todo)} runs trained")
                break
            config = {
                **trial,
                "data": str(out_dir / trial["data"]),
                "device": device,
                "threads": threads,
            }
            r = train_once(config)
            writer.writerow(_row(trial, r, rep))
            fh.flush()
            done += 1
            print(
                f"{trial['cell']} lr={trial['params']['lr']:.3g} seed={trial['seed']} rep={rep}: "
                f"loss {r['val_loss']:.4f}, {r['wall_s']:.1f} s, {r['device']}",
                flush=True,
            )
    print(f"{done} runs in {time.perf_counter() - t0:.0f} s")
    return 0


def _row(trial: dict[str, Any], r: dict[str, Any], rep: int) -> dict[str, Any]:
    from sweeper.study.runs import DEVICE_PRECISION  # numpy and pandas only

    on_cuda = str(r["device"]).startswith("cuda")
    return {
        "cell": trial["cell"],
        **trial["meta"],
        "tokens": trial["tokens"],
        "lr": trial["params"]["lr"],
        "batch_size": trial["hparams"]["batch_size"],
        "parametrization": trial["model"]["parametrization"],
        "seed": trial["seed"],
        "loss": r["val_loss"],
        "diverged": r["diverged"],
        "train_loss": r["train_loss"],
        "steps": r["steps"],
        "wall_s": r["wall_s"],
        "tokens_per_s": r["tokens_per_s"],
        "device": r["device"],
        "precision": DEVICE_PRECISION["cuda" if on_cuda else "cpu"],
        "repeat": rep,
    }


# ---- 3. compare (needs Sweeper installed) ------------------------------------------------------
def compare(
    gpu_csv: Path, reference: Path, study: str, other: Path | None = None
) -> dict[str, Any]:
    """The GPU runs against the reference's (CPU) runs of the same trials; ``other``: another GPU
    file of the same trials (e.g. trained outside Ray), whose largest loss difference is reported.
    """
    gpu = _runs(gpu_csv)
    ref = _runs(reference)
    ref = ref[ref["repeat"] == 0]
    first = gpu[gpu["repeat"] == 0]
    cols = [*KEYS, "loss", "diverged", "tokens_per_s"]
    both = first.merge(ref[cols], on=list(KEYS), suffixes=("_gpu", "_cpu"))
    both = both.sort_values(["n_params", "lr", "batch_size", "seed"], ignore_index=True)
    cells = _cell_optima(both, ref)
    finite = both[~both["diverged_gpu"] & ~both["diverged_cpu"]].copy()
    finite["rel"] = (finite["loss_gpu"] - finite["loss_cpu"]) / finite["loss_cpu"]
    out: dict[str, Any] = {
        "study": study,
        "gpu_csv": gpu_csv.name,
        "reference_csv": reference.name,
        "gpu_device": sorted(set(gpu["device"])),
        "runs_gpu": len(first),
        "runs_compared": len(both),
        "diverged_gpu_only": int((both["diverged_gpu"] & ~both["diverged_cpu"]).sum()),
        "diverged_cpu_only": int((~both["diverged_gpu"] & both["diverged_cpu"]).sum()),
        "rel_loss_diff_median": float(finite["rel"].median()),
        "abs_rel_loss_diff_median": float(finite["rel"].abs().median()),
        "abs_rel_loss_diff_max": float(finite["rel"].abs().max()),
        "by_side": _by_side(finite, ref, {c["cell"]: c["best_lr_cpu"] for c in cells}),
        "cpu_seed_best_lr": _seed_best_lrs(ref),
        "gpu_repeat_abs_rel_diff": _repeat_spread(gpu),
        "cells": cells,
        "cells_missing": sorted(set(ref["cell"]) - set(both["cell"])),
        "throughput": _throughput(both),
    }
    if other is not None:
        o = _runs(other)
        pair = first.merge(o[o["repeat"] == 0][[*KEYS, "loss"]], on=list(KEYS))
        out["other_csv"] = other.name
        out["other_runs_matched"] = len(pair)
        out["other_max_abs_loss_diff"] = float((pair["loss_x"] - pair["loss_y"]).abs().max())
        out["other_repeat_abs_rel_diff"] = _repeat_spread(o)
    cut = [c["cell"] for c in cells if c["partial"]] + out["cells_missing"]
    if cut:  # a law over a cut grid is an artefact of the cut
        out["laws"] = {"skipped": f"cells not fully trained: {', '.join(cut)}"}
    else:
        out["laws"] = {device: _law(both, device) for device in ("gpu", "cpu")}
    return out


def _runs(path: Path) -> Any:
    """A runs CSV (this script's, or ``sweeper trials``'s): its completed runs, ``repeat`` 0 when
    the file has no repeats."""
    import pandas as pd

    df = pd.read_csv(path)
    if "state" in df:
        df = df[df["state"] == "COMPLETE"]
    if "repeat" not in df:
        df = df.assign(repeat=0)
    return df.assign(diverged=df["diverged"].astype(bool))


def _by_side(finite: Any, ref: Any, best: dict[str, float | None]) -> dict[str, dict[str, Any]]:
    """Median |GPU - CPU| / CPU (each GPU run against the CPU run of its seed) below each cell's
    best CPU LR (over the trials both trained) and at or above it, beside the median difference
    between two CPU seeds at the same (cell, LR) points: |a - b| / their mean, every pair."""
    import numpy as np
    import pandas as pd

    points = set(zip(finite["cell"], finite["lr"], strict=True))
    pairs = []
    for (cell, lr), g in ref[~ref["diverged"]].groupby(["cell", "lr"]):
        if (cell, lr) in points:
            v = g["loss"].to_numpy()
            pairs += [(cell, lr, abs(a - b) / ((a + b) / 2)) for i, a in enumerate(v)
                      for b in v[i + 1 :]]  # fmt: skip
    seeds = pd.DataFrame(pairs, columns=["cell", "lr", "rel"])
    out = {}
    for side, below in (("below_best_lr", True), ("at_or_above_best_lr", False)):
        f = finite[(finite["lr"] < finite["cell"].map(best)) == below]
        s = seeds[(seeds["lr"] < seeds["cell"].map(best)) == below]
        out[side] = {
            "runs": len(f),
            "gpu_vs_cpu_abs_rel_median": float(np.median(np.abs(f["rel"]))) if len(f) else None,
            "cpu_seed_pairs_abs_rel_median": float(np.median(s["rel"])) if len(s) else None,
            "cpu_seed_pairs": len(s),
        }
    return out


def _seed_best_lrs(ref: Any) -> dict[str, int]:
    """How often two CPU seeds of one cell (every LR trained on both) disagree on its best LR:
    the baseline for the devices' disagreement."""
    pairs = differ = 0
    for _, g in ref[~ref["diverged"]].groupby("cell"):
        per_seed = g.pivot_table(index="lr", columns="seed", values="loss").dropna()
        best = [per_seed[s].idxmin() for s in per_seed.columns]
        for i, a in enumerate(best):
            for b in best[i + 1 :]:
                pairs += 1
                differ += int(a != b)
    return {"pairs": pairs, "differ": differ}


def _repeat_spread(runs: Any) -> list[float]:
    rep = runs[runs["repeat"] == 1]
    merged = runs[runs["repeat"] == 0].merge(rep[[*KEYS, "loss"]], on=list(KEYS))
    return [float(abs(a - b) / b) for a, b in zip(merged["loss_x"], merged["loss_y"], strict=True)]


def _cell_optima(both: Any, ref: Any) -> list[dict[str, Any]]:
    """Per cell, the best LR (of the seed means) on each device over the trials both trained; a
    cell where the GPU trained fewer (LR, seed) trials than the reference holds is ``partial`` (no
    law is fitted), one where it trained fewer LRs has no ``octaves_apart``, and a best LR at the
    smallest or largest LR trained is ``at_edge`` (a bound, not an optimum)."""
    rows = []
    for cell, g in both.groupby("cell", sort=False):
        r = ref[ref["cell"] == cell]
        trials, trials_ref = len(g), len(set(zip(r["lr"], r["seed"], strict=True)))
        entry: dict[str, Any] = {
            "cell": cell,
            "trials": trials,
            "trials_reference": trials_ref,
            "lrs": int(g["lr"].nunique()),
            "lrs_reference": int(r["lr"].nunique()),
            "seeds": int(g["seed"].nunique()),
            "seeds_reference": int(r["seed"].nunique()),
            "partial": trials < trials_ref,
        }
        edges = (g["lr"].min(), g["lr"].max())
        for device in ("gpu", "cpu"):
            means = g[~g[f"diverged_{device}"]].groupby("lr")[f"loss_{device}"].mean()
            entry[f"best_lr_{device}"] = float(means.idxmin()) if len(means) else None
            entry[f"best_loss_{device}"] = float(means.min()) if len(means) else None
        lr_g, lr_c = entry["best_lr_gpu"], entry["best_lr_cpu"]
        entry["at_edge"] = lr_g in edges or lr_c in edges
        # the best LRs compare where every LR was trained (on the seeds both trained)
        every_lr = entry["lrs"] == entry["lrs_reference"] and None not in (lr_g, lr_c)
        entry["octaves_apart"] = round(abs(math.log2(lr_g / lr_c)), 2) if every_lr else None
        rows.append(entry)
    return rows


def _throughput(both: Any) -> list[dict[str, Any]]:
    per = both.groupby("cell", sort=False)[["tokens_per_s_gpu", "tokens_per_s_cpu"]].median()
    return [
        {"cell": c, "tokens_per_s_gpu": float(r.iloc[0]), "tokens_per_s_cpu": float(r.iloc[1])}
        for c, r in per.iterrows()
    ]


def _law(both: Any, device: str) -> dict[str, Any]:
    """The LR law on n_params (``sweeper.fit``, the default method) of one device's losses of the
    trials both devices trained."""
    import sweeper

    runs = both.rename(columns={f"loss_{device}": "loss", f"diverged_{device}": "diverged"})
    keep = ["cell", "width", "depth", "n_params", "n_params_total", "tokens", "lr", "batch_size",
            "seq_len", "parametrization", "seed", "loss", "diverged"]  # fmt: skip
    runs = runs[keep].copy()
    runs.loc[runs["diverged"], "loss"] = math.nan
    laws = sweeper.fit(runs, target="lr", store=False, n_boot=N_BOOT)
    (law,) = [x for x in laws if x.predictors == ("n_params",)]
    return {
        "method": law.method,
        "exponent": float(law.exponents["n_params"]),
        "ci": [float(v) for v in law.exponents_ci["n_params"]],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pl = sub.add_parser("plan", help="write DIR/configs.json and DIR/corpus.txt")
    pl.add_argument("study")
    pl.add_argument("--dir", type=Path, default=Path(".gpu"))
    tr = sub.add_parser("train", help="train every planned trial on one device")
    tr.add_argument("--dir", type=Path, default=Path(".gpu"))
    tr.add_argument("--device", default="cuda")
    tr.add_argument("--csv", type=Path, required=True)
    tr.add_argument("--repeat", type=int, default=0, help="train the first K trials twice")
    tr.add_argument("--budget-s", type=float, default=math.inf, help="start no run after this")
    tr.add_argument("--threads", type=int, default=1)
    co = sub.add_parser("compare", help="GPU runs against CPU runs of the same trials")
    co.add_argument("gpu_csv", type=Path)
    co.add_argument("--reference", type=Path, required=True)
    co.add_argument("--study", required=True)
    co.add_argument("--json", type=Path, default=None)
    co.add_argument("--other", type=Path, default=None, help="another GPU file of the same trials")
    args = p.parse_args(argv)
    if args.cmd == "plan":
        print(f"{len(plan(args.study, args.dir))} trials planned in {args.dir}")
        return 0
    if args.cmd == "train":
        return train(
            args.dir, args.device, args.csv, repeat=args.repeat, budget_s=args.budget_s,
            threads=args.threads,
        )  # fmt: skip
    result = compare(args.gpu_csv, args.reference, args.study, args.other)
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

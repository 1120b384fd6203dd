"""Make docs/RESULTS.md: what the tool measured on this machine, made by the tool itself.

Runs (or resumes: the storage is the source of truth, so a finished study is not re-run) the width
ladders under SP and muP, the depth ladder under CompleteP, and the quickstart with its transfer
check, all through the ``sweeper`` CLI; fits each; copies the report plots into docs/results/; and
writes docs/RESULTS.md with the figures it read back from the CLI's JSON.

    .venv/bin/python scripts/make_results.py [--only quickstart,width_sp,...] [--storage URL]

Takes about an hour on 2 cores (each study file says how long it takes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEPER = [sys.executable, "-m", "sweeper"]
STUDIES = ("quickstart", "width_sp", "width_mup", "depth_completep")
TRANSFER_SEEDS = "3"  # as in scripts/quickstart.sh
EXAMPLE_TARGET = (
    "--width",
    "2048",
    "--depth",
    "20",
    "--vocab",
    "50304",
    "--context",
    "2048",
    "--tokens",
    "2e10",
    "--gpus",
    "8",
    "--gpu-memory-gb",
    "80",
    "--micro-batch",
    "8",
    "--precision",
    "bf16",
)


def sh(*args: str, capture: bool = False) -> str:
    print("$ sweeper " + " ".join(args), flush=True)
    res = subprocess.run(
        [*SWEEPER, *args], cwd=REPO, text=True, capture_output=capture, check=False
    )
    if res.returncode != 0:
        if capture:
            sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"sweeper {' '.join(args)} failed with exit code {res.returncode}")
    return res.stdout if capture else ""


def training_seconds(study: str) -> float:
    """Sum of the sweep's runs' own train() wall time (the launch itself may be a resume)."""
    from sweeper.study.sweep_runs import load_sweep_runs

    return float(load_sweep_runs(study)["wall_s"].sum())


def fit(study: str, predictors: str) -> dict:
    out = sh(
        "fit",
        study,
        "--target",
        "lr",
        "--predictors",
        predictors,
        "--bootstrap",
        "1000",
        "--json",
        capture=True,
    )
    return json.loads(out)


def fmt_exp(law: dict, p: str) -> str:
    lo, hi = law["exponents_ci"][p]
    return f"{law['exponents'][p]:+.3f} (95% CI {lo:+.3f} to {hi:+.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(STUDIES))
    ap.add_argument("--storage", default=f"sqlite:///{REPO / 'results' / 'results.db'}")
    args = ap.parse_args()
    os.environ["SWEEPER_STORAGE"] = args.storage
    (REPO / "results").mkdir(exist_ok=True)
    docs = REPO / "docs" / "results"
    docs.mkdir(parents=True, exist_ok=True)
    only = [s for s in args.only.split(",") if s]
    figures: dict[str, dict] = {}
    timings: dict[str, float] = {}
    for study in only:
        sh("launch", str(REPO / "studies" / f"{study}.toml"))
        timings[study] = training_seconds(study)
        predictors = (
            "width"
            if study.startswith("width")
            else "depth"
            if study.startswith("depth")
            else "n_params"
        )
        figures[study] = {"law": fit(study, predictors), "predictor": predictors}
        if study == "quickstart":
            figures[study]["transfer"] = json.loads(
                sh(
                    "validate-transfer",
                    study,
                    "--holdout",
                    "largest",
                    "--seeds",
                    TRANSFER_SEEDS,
                    "--json",
                    capture=True,
                )
            )
        status = json.loads(sh("status", study, "--json", capture=True))
        figures[study]["status"] = status
        rep = REPO / "results" / "report" / study
        extra: list[str] = []
        if study == "quickstart":  # the README's example target: a 1B model on 20B tokens
            recipe = REPO / "results" / "quickstart_recipe.json"
            sh("export", study, *EXAMPLE_TARGET, "--format", "json", "-o", str(recipe))
            figures[study]["recipe"] = json.loads(recipe.read_text())
            extra = ["--recipe-json", str(recipe)]
        sh("report", study, "-o", str(rep), *extra)
        for png in rep.glob("*.png"):
            shutil.copy(png, docs / f"{study}_{png.name}")
    (REPO / "results" / "figures.json").write_text(
        json.dumps({"figures": figures, "timings": timings}, indent=2)
    )
    write_markdown(figures, timings)
    return 0


def write_markdown(figures: dict, timings: dict) -> None:
    lines = [
        "# Results: what Sweeper measured on this machine",
        "",
        f"Made by `scripts/make_results.py` on {time.strftime('%Y-%m-%d')} "
        f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores, CPU only, "
        f"Python {platform.python_version()}). Every figure below was read back from `sweeper fit --json`, "
        "`sweeper validate-transfer --json` and `sweeper status --json`; the plots are the report's own.",
        "",
    ]
    for study, f in figures.items():
        law = f["law"]
        laws = law.get("laws", [law])
        lr = next(x for x in laws if x["target"] == "lr")
        p = f["predictor"]
        cells = f["status"]["cells"]
        lines += [
            f"## {study}",
            "",
            f"{len(cells)} cells, {sum(c['complete'] for c in cells)} completed trials; the runs' "
            f"own training time adds up to {timings.get(study, float('nan')) / 60:.1f} core-minutes.",
            "",
            f"- optimal LR ∝ {p}^{fmt_exp(lr, p)}; fitted on {lr['n_cells']} cells; "
            f"leave-one-cell-out error {lr['cv_error']:.3f} (natural log units).",
            "",
            "| cell | best loss | best lr |",
            "|---|---|---|",
        ]
        lines += [
            f"| {c['cell']} | {c['best_loss']:.4f} | {c['best_lr']:.3g} |"
            for c in cells
            if c.get("best_loss")
        ]
        lines.append("")
        if "transfer" in f:
            t = f["transfer"]
            names = {
                "law": "law prediction",
                "smallest_cell": "reuse the smallest cell's optimum",
                "steplaw": "Step Law (published)",
                "measured_optimum": "the cell's measured optimum",
            }
            lines += [
                "### Transfer to the held-out largest cell",
                "",
                f"Held out {t['holdout_cell']}; the LR law refitted on the other {t['law_cells']} cells "
                f"(exponent of N {t['law_exponents'].get('n_params', float('nan')):+.3f}) predicts lr "
                f"{t['predicted_lr']:.3g} (95% {t['predicted_lr_interval'][0]:.3g}–{t['predicted_lr_interval'][1]:.3g}); "
                f"the cell's measured optimum is {t['measured_lr']:.3g}: ratio {t['ratio']:.3f}, "
                f"log2 error {t['log2_error']:+.3f}. Best loss swept in the cell: {t['best_swept_loss']:.4f}.",
                "",
                f"| point | lr | loss (mean of {t['seeds']} seeds) | sd | regret, % of best swept |",
                "|---|---|---|---|---|",
            ]
            for k, lr in t["lrs"].items():
                loss = t["losses"][k]
                reg = 100 * (loss - t["best_swept_loss"]) / t["best_swept_loss"]
                lines.append(
                    f"| {names.get(k, k)} | {lr:.3g} | {loss:.4f} | {t['loss_sd'][k]:.4f} | {reg:+.2f} |"
                )
            if t.get("regret_se_pct") is not None:
                lines += [
                    "",
                    f"Resolution: the law's regret is ±{t['regret_se_pct']:.2f} points (one standard "
                    f"error from the spread of the {t['seeds']} seeds at the prediction and at the best "
                    f"swept point); the swept grid steps by {t['grid_step_log2']:.2f} in log2.",
                ]
            if t.get("regret_vs_optimum_pct") is not None:
                lines += [
                    "",
                    f"Law prediction against the measured optimum trained with the same seeds: "
                    f"{t['regret_vs_optimum_pct']:+.2f}% of the loss.",
                ]
            lines.append("")
        for png in sorted((REPO / "docs" / "results").glob(f"{study}_*.png")):
            lines.append(f"![{png.stem}](results/{png.name})")
        lines.append("")
    out = REPO / "docs" / "RESULTS.md"
    # hand-written interpretation below the marker survives a regeneration
    marker = "<!-- notes: written by hand, kept when this file is regenerated -->"
    notes = (
        out.read_text().split(marker, 1)[1] if out.exists() and marker in out.read_text() else "\n"
    )
    out.write_text("\n".join(lines) + "\n" + marker + notes)


if __name__ == "__main__":
    raise SystemExit(main())

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


def sh(*args: str, capture: bool = False) -> str:
    print("$ sweeper " + " ".join(args), flush=True)
    res = subprocess.run([*SWEEPER, *args], cwd=REPO, text=True, capture_output=capture, check=False)
    if res.returncode != 0:
        if capture:
            sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"sweeper {' '.join(args)} failed with exit code {res.returncode}")
    return res.stdout if capture else ""


def fit(study: str, predictors: str) -> dict:
    out = sh("fit", study, "--target", "lr", "--predictors", predictors, "--bootstrap", "1000", "--json", capture=True)
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
        t0 = time.perf_counter()
        sh("launch", str(REPO / "studies" / f"{study}.toml"))
        timings[study] = time.perf_counter() - t0
        predictors = "width" if study.startswith("width") else "depth" if study.startswith("depth") else "n_params"
        figures[study] = {"law": fit(study, predictors), "predictor": predictors}
        if study == "quickstart":
            figures[study]["transfer"] = json.loads(
                sh("validate-transfer", study, "--holdout", "largest", "--seeds", "2", "--json", capture=True)
            )
        status = json.loads(sh("status", study, "--json", capture=True))
        figures[study]["status"] = status
        rep = REPO / "results" / "report" / study
        sh("report", study, "-o", str(rep))
        for png in rep.glob("*.png"):
            shutil.copy(png, docs / f"{study}_{png.name}")
    (REPO / "results" / "figures.json").write_text(json.dumps({"figures": figures, "timings": timings}, indent=2))
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
            f"{len(cells)} cells, {sum(c['complete'] for c in cells)} completed trials, "
            f"launch wall time {timings.get(study, float('nan')) / 60:.1f} min.",
            "",
            f"- optimal LR ∝ {p}^{fmt_exp(lr, p)}; fitted on {lr['n_cells']} cells; "
            f"leave-one-cell-out error {lr['cv_error']:.3f} (natural log units).",
            "",
            "| cell | best loss | best lr |",
            "|---|---|---|",
        ]
        lines += [f"| {c['cell']} | {c['best_loss']:.4f} | {c['best_lr']:.3g} |" for c in cells if c.get("best_loss")]
        lines.append("")
        if "transfer" in f:
            t = f["transfer"]
            lines += [
                "### Transfer to the held-out largest cell",
                "",
                f"- held out {t['holdout_cell']}; predicted lr {t['predicted_lr']:.3g}, measured optimum "
                f"{t['measured_lr']:.3g}: log2 error {t['log2_error']:+.3f}",
                f"- regret at the prediction: {t['regret_pct']:+.2f}% of the best swept loss "
                f"({t['seeds']} seeds); reuse-the-smallest-cell baseline {t['baseline_regret_pct']:+.2f}%; "
                f"Step Law {t['published_regret_pct']:+.2f}%",
                "",
            ]
        for png in sorted((REPO / "docs" / "results").glob(f"{study}_*.png")):
            lines.append(f"![{png.stem}](results/{png.name})")
        lines.append("")
    (REPO / "docs" / "RESULTS.md").write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())

"""Make the generated part of docs/RESULTS.md from the runs committed under docs/data/.

By default nothing is trained: each shipped ladder's runs (docs/data/<study>.csv) are imported with
their study into a fresh storage, fitted by the three methods, reported, and the committed transfer
checks (the JSON that `sweeper validate-transfer --json` printed, beside the runs it trained) are
tabulated. Every figure is read back from the ``sweeper`` CLI's JSON output or from those files.

    .venv/bin/python scripts/make_results.py                 # from docs/data: a few minutes
    .venv/bin/python scripts/make_results.py --train         # train (or resume) the studies first
                                                             # and export their runs to docs/data

``--train`` launches each study into ``--storage`` (a finished one is not re-run: the storage is
the source of truth), then writes its runs to docs/data/<study>.csv; each study file says what it
costs (`sweeper validate STUDY --estimate` prices it on the machine at hand). The hand-written
notes below the marker in docs/RESULTS.md are kept.
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "data"
SWEEPER = [sys.executable, "-m", "sweeper"]
STUDIES = (
    "quickstart",
    "width_sp",
    "width_mup",
    "width_sp_long",
    "width_mup_long",
    "depth_completep",
    "depth_completep_long",
)
#: the ladders with a script of their own (scripts/batch_ladder.py, scripts/bpe_ladder.py)
EXTRA = ("batch", "tokens")
METHODS = ("parabola", "band", "surface")
BOOTSTRAP = {"parabola": "1000", "band": "200", "surface": "200"}
#: the committed transfer checks: (title, the tool's JSON), read back as they are
TRANSFERS = (
    ("quickstart: w128 held out (surface, the default method since 2026-11-25)",
     "transfer/quickstart.w128_surface.json"),
    ("quickstart_law: the law sampler's ladder, w128 held out (surface, planner settings)",
     "allocation/quickstart_law_transfer_w128_surface.json"),
    ("quickstart_law: the law sampler's ladder, w128 held out (parabola)",
     "allocation/quickstart_law_transfer_w128.json"),
    ("quickstart_law: the law sampler's ladder re-run with its confirmation rule, w128 held out "
     "(surface, planner settings)", "allocation/quickstart_law_confirm_transfer_w128_surface.json"),
    ("quickstart_law: the same check after the noise model's prior (surface, planner settings)",
     "allocation/quickstart_law_prior_transfer_w128_surface.json"),
    ("width_sp: fitted on widths <= 64, w256 held out", "transfer/width_sp.w256_from_width_le_64.json"),
    ("width_mup: fitted on widths <= 64, w256 held out", "transfer/width_mup.w256_from_width_le_64.json"),
    ("width_sp: fitted on widths <= 64, w352 held out (30x N)",
     "transfer/width_sp.w352_from_width_le_64.json"),
    ("width_mup: fitted on widths <= 64, w352 held out (30x N)",
     "transfer/width_mup.w352_from_width_le_64.json"),
    ("width_mup: fitted on widths <= 96, w352 held out (13.4x N, surface)",
     "transfer/width_mup.w352_from_width_le_96.json"),
    ("width_sp_long: 4x the horizon, fitted on widths <= 64, w192 held out (9x N, surface)",
     "transfer/width_sp_long.w192_from_width_le_64.json"),
    ("width_sp_long: 4x the horizon, fitted on widths <= 64, w256 held out (16x N, surface)",
     "transfer/width_sp_long.w256_from_width_le_64.json"),
    ("width_mup_long: 4x the horizon, fitted on widths <= 64, w192 held out (9x N, surface)",
     "transfer/width_mup_long.w192_from_width_le_64.json"),
    ("width_mup_long: the same check on four seeds (seeds 2-3 added at every trained LR)",
     "transfer/width_mup_long.w192_from_width_le_64.4seeds.json"),
    ("width_mup_long: 4x the horizon, fitted on widths <= 64, w256 held out (16x N, surface)",
     "transfer/width_mup_long.w256_from_width_le_64.json"),
    ("width_mup_long: the w256 check on four seeds (seeds 2-3 added at every trained LR)",
     "transfer/width_mup_long.w256_from_width_le_64.4seeds.json"),
    ("width_mup_long: the w192 check again under the asymmetry prior (four seeds)",
     "transfer/width_mup_long.w192_from_width_le_64.aprior.4seeds.json"),
    ("width_mup_long: the w256 check again under the asymmetry prior (four seeds)",
     "transfer/width_mup_long.w256_from_width_le_64.aprior.4seeds.json"),
    ("width_sp_long: the w192 check again under the asymmetry prior",
     "transfer/width_sp_long.w192_from_width_le_64.aprior.json"),
    ("width_sp_long: the w256 check again under the asymmetry prior",
     "transfer/width_sp_long.w256_from_width_le_64.aprior.json"),
    ("width_sp: the w256 check again under the asymmetry prior (surface)",
     "transfer/width_sp.w256_from_width_le_64.aprior.json"),
    ("width_sp: the w352 check (30x N) again under the asymmetry prior (surface)",
     "transfer/width_sp.w352_from_width_le_64.aprior.json"),
    ("width_mup: the w256 check again under the asymmetry prior (surface)",
     "transfer/width_mup.w256_from_width_le_64.aprior.json"),
    ("width_mup: the w352 check (30x N) again under the asymmetry prior (surface)",
     "transfer/width_mup.w352_from_width_le_64.aprior.json"),
    ("width_mup: the w352 check from widths <= 96 (13.4x N) again under the asymmetry prior",
     "transfer/width_mup.w352_from_width_le_96.aprior.json"),
    ("quickstart_law: the law sampler's ladder under the asymmetry prior (surface, planner "
     "settings)", "allocation/quickstart_law_aprior_transfer_w128_surface.json"),
    ("quickstart: w128 held out, again under the asymmetry prior (surface)",
     "transfer/quickstart.w128_surface.aprior.json"),
)  # fmt: skip
#: the checks scored by the shipped default fit (the surface with its asymmetry prior; a law
#: study's by the planner's settings, as `sweeper fit` fits it): tabulated together first. The
#: others are records of the fit of their day, kept as they were measured.
CURRENT = (
    "transfer/quickstart.w128_surface.aprior.json",
    "allocation/quickstart_law_aprior_transfer_w128_surface.json",
    "transfer/width_sp.w256_from_width_le_64.aprior.json",
    "transfer/width_sp.w352_from_width_le_64.aprior.json",
    "transfer/width_mup.w256_from_width_le_64.aprior.json",
    "transfer/width_mup.w352_from_width_le_64.aprior.json",
    "transfer/width_mup.w352_from_width_le_96.aprior.json",
    "transfer/width_sp_long.w192_from_width_le_64.aprior.json",
    "transfer/width_sp_long.w256_from_width_le_64.aprior.json",
    "transfer/width_mup_long.w192_from_width_le_64.aprior.4seeds.json",
    "transfer/width_mup_long.w256_from_width_le_64.aprior.4seeds.json",
)
#: issue 14's bar for a width check at >= 8x N: regret and |log2 error| of the recommended LR
BAR_FACTOR, BAR_REGRET_PCT, BAR_LOG2 = 8.0, 0.5, 0.5
BASELINE_NAMES = {
    "law": "the law's prediction",
    "smallest_cell": "reuse the smallest fitted cell's optimum",
    "largest_fitted": "reuse the largest fitted cell's optimum",
    "base_width": "reuse the base width's optimum (muP)",
    "steplaw": "Step Law (published)",
    "deepseek": "DeepSeek (published)",
    "porian": "Porian et al. (published)",
    "power_lines": "Power Lines' D^0.383 from the largest fitted budget's optimum (published)",
}
#: the GPU ladders (docs/data/<csv>, trained once on a lent GPU): (GPU runs, the CPU runs of the
#: same trials, their study, the same GPU trials trained outside Ray or None). The Hugging Face
#: Llama's CPU runs were trained on the GPU machine's CPU (same torch and transformers).
GPU_CHECKS = (
    (
        "gpu_quickstart.csv",
        "quickstart.csv",
        "studies/quickstart.toml",
        "gpu_quickstart_direct.csv",
    ),
    ("gpu_width_mup.csv", "width_mup.csv", "studies/width_mup.toml", None),
    ("gpu_muon.csv", "muon.csv", "studies/muon.toml", None),
    (
        "gpu_own_hf_llama.csv",
        "gpu_own_hf_llama_cpu.csv",
        "studies/adapters/own_hf_llama.toml",
        None,
    ),
)
GPU_MACHINE = "one NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, Python 3.12.3), on 2026-11-27"
GPU_TRANSFER = "transfer/gpu_quickstart.w128.json"
#: the same check on the CPU runs, by the same (current default) fit
GPU_TRANSFER_CPU = "transfer/quickstart.w128_surface.aprior.json"
MARKER = "<!-- notes: written by hand, kept when this file is regenerated -->"


def sh(*args: str, capture: bool = False, check: bool = True) -> subprocess.CompletedProcess:
    print("$ sweeper " + " ".join(args), flush=True)
    res = subprocess.run(
        [*SWEEPER, *args], cwd=REPO, text=True, capture_output=capture, check=False
    )
    if check and res.returncode != 0:
        if capture:
            sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"sweeper {' '.join(args)} failed with exit code {res.returncode}")
    return res


def load_study(study: str, train: bool) -> None:
    """Put the study's runs in the storage: trained (``train``) or imported from docs/data."""
    toml = str(REPO / "studies" / f"{study}.toml")
    csv = DATA / f"{study}.csv"
    if train:
        sh("launch", toml)
        sh("trials", study, "-o", str(csv))
    else:
        sh("import", str(csv), "--sweep", study, "--study", toml)


def fit(study: str, method: str) -> dict[str, Any]:
    """The LR law on n_params by ``method`` (not stored), or the one line it failed with."""
    res = sh("fit", study, "--target", "lr", "--predictors", "n_params", "--method", method,
             "--bootstrap", BOOTSTRAP[method], "--no-store", "--json", capture=True, check=False)  # fmt: skip
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["failed"])[-1]}
    out = json.loads(res.stdout)
    return next(x for x in out.get("laws", [out]) if x["target"] == "lr")


def study_figures(study: str, train: bool) -> dict[str, Any]:
    load_study(study, train)
    import pandas as pd

    runs = pd.read_csv(DATA / f"{study}.csv")
    laws = {m: fit(study, m) for m in METHODS}
    rep = REPO / "results" / "report" / study
    sh("report", study, "-o", str(rep))
    docs = REPO / "docs" / "results"
    plots = []
    for png in sorted(rep.glob("*.png")):
        shutil.copy(png, docs / f"{study}_{png.name}")
        plots.append(f"{study}_{png.name}")
    return {
        "plots": plots,
        "cells": best_points(runs),
        "laws": laws,
        "runs": len(runs),
        "core_seconds": float(runs["wall_s"].sum()),
    }


def script_figures(script: str, csv_name: str) -> dict[str, Any] | None:
    """A ladder's figures, by its script (scripts/<script>.py --from-csv) from its committed runs."""
    csv = DATA / csv_name
    if not csv.is_file():
        print(f"docs/data/{csv_name} is not committed (scripts/{script}.py makes it)")
        return None
    out = REPO / "results" / f"{script}.json"
    cmd = [sys.executable, str(REPO / "scripts" / f"{script}.py"), "--from-csv", str(csv),
           "--json", str(out)]  # fmt: skip
    print("$ " + " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def best_points(runs: Any) -> list[dict[str, Any]]:
    """Per cell, the LR of the lowest mean loss over seeds (completed runs), smallest N first."""
    done = runs[(runs["state"] == "COMPLETE") & ~runs["diverged"].astype(bool)]
    means = done.groupby(["cell", "lr"], as_index=False).agg(
        loss=("loss", "mean"), n_params=("n_params", "first"), seeds=("loss", "size")
    )
    best = means.loc[means.groupby("cell")["loss"].idxmin()].sort_values("n_params")
    return [
        {"cell": r.cell, "n_params": float(r.n_params), "lr": float(r.lr),
         "loss": float(r.loss), "seeds": int(r.seeds)}
        for r in best.itertuples()
    ]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join((*STUDIES, *EXTRA)),
                    help="studies to include, 'batch' for the batch-size ladder and 'tokens' for "
                    "the BPE token-unit check")  # fmt: skip
    ap.add_argument("--train", action="store_true", help="train or resume the studies first")
    ap.add_argument("--storage", help="SQLAlchemy URL (default: a fresh results/results.db)")
    args = ap.parse_args()
    (REPO / "results").mkdir(exist_ok=True)
    (REPO / "docs" / "results").mkdir(parents=True, exist_ok=True)
    if args.storage is None:
        db = REPO / "results" / "results.db"
        if not args.train:
            db.unlink(missing_ok=True)  # imports go into a fresh storage
        args.storage = f"sqlite:///{db}"
    os.environ["SWEEPER_STORAGE"] = args.storage
    figures: dict[str, Any] = {}
    only = args.only.split(",")
    for study in (s for s in only if s and s not in EXTRA):
        if not args.train and not (DATA / f"{study}.csv").is_file():
            print(f"{study}: docs/data/{study}.csv is not committed; run with --train")
            figures[study] = {"missing": True}
            continue
        figures[study] = study_figures(study, args.train)
    batch = script_figures("batch_ladder", "batch_ladder.csv") if "batch" in only else None
    tokens = script_figures("bpe_ladder", "tokens_bpe.csv") if "tokens" in only else None
    transfers = {
        t: json.loads((DATA / p).read_text()) for t, p in TRANSFERS if (DATA / p).is_file()
    }
    plots = transfer_plots(transfers)
    gpu = gpu_figures()
    everything = {
        "figures": figures,
        "transfers": transfers,
        "batch": batch,
        "tokens": tokens,
        "gpu": gpu,
    }
    (REPO / "results" / "figures.json").write_text(json.dumps(everything, indent=2))
    write_markdown(figures, transfers, plots, batch, tokens, gpu)
    return 0


def gpu_figures() -> dict[str, Any]:
    """Each committed GPU ladder against its CPU runs (scripts/gpu_check.py compare), and the
    transfer check the GPU sweep ran."""
    out: dict[str, Any] = {"ladders": []}
    for csv_name, reference, study, other in GPU_CHECKS:
        if not (DATA / csv_name).is_file():
            print(f"docs/data/{csv_name} is not committed (scripts/gpu_check.py makes it)")
            continue
        json_out = REPO / "results" / f"gpu_check_{Path(csv_name).stem}.json"
        cmd = [sys.executable, str(REPO / "scripts" / "gpu_check.py"), "compare",
               str(DATA / csv_name), "--reference", str(DATA / reference),
               "--study", study, "--json", str(json_out)]  # fmt: skip
        if other:
            cmd += ["--other", str(DATA / other)]
        print("$ " + " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        out["ladders"].append(json.loads(json_out.read_text()))
    if (DATA / GPU_TRANSFER).is_file():
        out["transfer"] = json.loads((DATA / GPU_TRANSFER).read_text())
    return out


# ---- docs/RESULTS.md ---------------------------------------------------------------------------
def write_markdown(
    figures: dict[str, Any],
    transfers: dict[str, Any],
    plots: dict[str, str],
    batch: dict | None,
    tokens: dict | None,
    gpu: dict[str, Any],
) -> None:
    lines = [
        "# Results: what Sweeper measured on this machine",
        "",
        f"Generated by `scripts/make_results.py` on {time.strftime('%Y-%m-%d')} "
        f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}) from "
        "the runs committed under docs/data/, which were trained on 2 CPU cores. Every figure in "
        "the generated part is read back from `sweeper fit --json` or from the committed "
        "`sweeper validate-transfer --json` output; the plots are the report's own. Exponents "
        "are on n_params (non-embedding; at fixed depth a width exponent is twice it).",
        "",
    ]
    for study, f in figures.items():
        lines += study_section(study, f)
    lines += current_section(transfers)
    for title, t in transfers.items():
        lines += transfer_section(title, t, plots.get(title))
    if batch is not None:
        lines += batch_section(batch, batch_plot(batch))
    if tokens is not None:
        lines += tokens_section(tokens)
    if gpu["ladders"]:
        lines += gpu_section(gpu)
    out = REPO / "docs" / "RESULTS.md"
    old = out.read_text() if out.exists() else ""
    notes = old.split(MARKER, 1)[1] if MARKER in old else "\n"
    out.write_text("\n".join(lines) + "\n" + MARKER + notes)


def study_section(study: str, f: dict[str, Any]) -> list[str]:
    if f.get("missing"):
        return [f"## {study}", "", f"Not in docs/data/: `scripts/make_results.py --train --only {study}`.", ""]  # fmt: skip
    cells = f["cells"]
    lines = [
        f"## {study}",
        "",
        f"{len(cells)} cells, {f['runs']} runs in `docs/data/{study}.csv`; the runs' own training "
        f"time adds up to {f['core_seconds'] / 60:.1f} core-minutes.",
        "",
        "| method | exponent of n_params | 95% interval | width / parabola's | excludes 0 | "
        "cells | leave-one-cell-out (ln) |",
        "|---|---|---|---|---|---|---|",
    ]
    para = f["laws"]["parabola"]
    ref = _width(para) if "error" not in para else None
    for m, law in f["laws"].items():
        if "error" in law:
            lines.append(f"| {m} | — | {law['error']} | | | | |")
            continue
        lo, hi = law["exponents_ci"]["n_params"]
        ratio = f"{_width(law) / ref:.2f}" if ref else "—"
        cv = law.get("cv_error")
        lines.append(
            f"| {m} | {law['exponents']['n_params']:+.3f} | {lo:+.3f} to {hi:+.3f} | {ratio} | "
            f"{'yes' if lo > 0 or hi < 0 else 'no'} | {law['n_cells']} | "
            f"{'—' if cv is None else f'{cv:.3f}'} |"
        )
    lines += ["", "| cell | n_params | best mean loss | at lr | seeds |", "|---|---|---|---|---|"]
    lines += [
        f"| {c['cell']} | {c['n_params']:.3g} | {c['loss']:.4f} | {c['lr']:.3g} | {c['seeds']} |"
        for c in cells
    ]
    lines.append("")
    lines += [f"![{Path(png).stem}](results/{png})" for png in f["plots"]]
    return [*lines, ""]


def _width(law: dict[str, Any]) -> float:
    lo, hi = law["exponents_ci"]["n_params"]
    return float(hi - lo)


def transfer_plots(transfers: dict[str, Any]) -> dict[str, str]:
    """The report's plot of each check's held-out cell (every trained point, the prediction, the
    baselines and the measured optimum marked), saved under docs/results/: title -> file name."""
    from sweeper.report.plots import plot_transfer

    out = {}
    for title, path in TRANSFERS:
        fig = plot_transfer(transfers[title]) if title in transfers else None
        if fig is None:
            continue
        name = "transfer_" + Path(path).name.removesuffix(".json").replace(".", "_") + ".png"
        fig.savefig(REPO / "docs" / "results" / name, dpi=110, bbox_inches="tight")
        out[title] = name
    return out


def _se(se: float | None) -> str:
    """The regret's standard error, or why there is none (the tool gives None when the best
    point, or the law's, has a single run)."""
    return "no s.e.: a single-run point" if se is None else f"s.e. {se:.2f}"


def _has_point(t: dict[str, Any]) -> bool:
    """Whether the check's law has a point estimate apart from its recommended (risk-aware) LR."""
    point = t.get("predicted_lr_point")
    return bool(point) and abs(point / t["predicted_lr"] - 1) > 1e-6


def current_section(transfers: dict[str, Any]) -> list[str]:
    """One row per check in :data:`CURRENT`: what the shipped default fit recommends for each
    held-out cell, its point estimate and the best baseline, against issue 14's bar."""
    by_path = {p: transfers[t] for t, p in TRANSFERS if t in transfers}
    rows = [by_path[p] for p in CURRENT if p in by_path]
    if not rows:
        return []
    lines = [
        "## Transfer checks by the current default fit",
        "",
        "Each check below is scored by the fit Sweeper ships (the surface fit with its asymmetry "
        "prior; a law study's by the planner's settings); the sections after it hold every "
        "check, including records of earlier fits. Regret: % of the best loss trained in the "
        "held-out cell; log2 error: against that cell's measured optimum. Bar (issue 14, width "
        f"transfer at >= {BAR_FACTOR:g}x N): regret <= {BAR_REGRET_PCT}% and |log2 error| <= "
        f"{BAR_LOG2}; the point estimate as regret (%), log2 error; the best baseline as regret.",
        "",
        "| sweep | held out | N beyond the fit | seeds | recommended lr | regret (s.e.) | "
        "log2 error | within the bar | point estimate: regret, log2 | best baseline: regret |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in rows:
        lines.append(_current_row(t))
    return [*lines, ""]


def _current_row(t: dict[str, Any]) -> str:
    se = t.get("regret_se_pct")
    regret = f"{t['regret_pct']:+.2f}" + ("" if se is None else f" ({se:.2f})")
    within = "—"  # (the bar is for >= 8x N)
    if t["extrapolation_factor"] >= BAR_FACTOR:
        ok = t["regret_pct"] <= BAR_REGRET_PCT and abs(t["log2_error"]) <= BAR_LOG2
        within = "yes" if ok else "no"
    point = "same LR"
    if _has_point(t):
        point = f"{t['regret_point_pct']:+.2f}, {t['log2_error_point']:+.2f}"
    name, b = min(t["baselines"].items(), key=lambda kv: kv[1]["regret_pct"])
    return (
        f"| {t['sweep']} | {t['holdout_cell']} | {t['extrapolation_factor']:.1f}x | {t['seeds']} "
        f"| {t['predicted_lr']:.3g} | {regret} | {t['log2_error'] + 0.0:+.2f} | {within} | "
        f"{point} | {BASELINE_NAMES.get(name, name)} "
        f"{b['regret_pct']:+.2f} |"
    )


def transfer_section(title: str, t: dict[str, Any], plot: str | None = None) -> list[str]:
    lines = [
        f"## Transfer check: {title}",
        "",
        f"Held out {t['holdout_cell']}, {t['extrapolation_factor']:.1f}x the largest fitted "
        f"cell's N; law on {t['law_cells']} cells: lr ∝ N^{t['law_exponents'].get('n_params', float('nan')):+.3f}. "
        f"Measured optimum of the held-out cell {t['measured_lr']:.3g}; {t['seeds']} seeds per point.",
        "",
        "| point | lr | regret, % of best trained | log2 error |",
        "|---|---|---|---|",
        f"| law (recommended) | {t['predicted_lr']:.3g} | **{t['regret_pct']:+.2f}** "
        f"({_se(t.get('regret_se_pct'))}) | {t['log2_error']:+.2f} |",
    ]
    if _has_point(t):
        lines.append(
            f"| law (point estimate) | {t['predicted_lr_point']:.3g} | "
            f"{t['regret_point_pct']:+.2f} | {t['log2_error_point']:+.2f} |"
        )
    for name, b in sorted(t["baselines"].items(), key=lambda kv: kv[1]["regret_pct"]):
        lines.append(
            f"| {BASELINE_NAMES.get(name, name)} | {b['lr']:.3g} | {b['regret_pct']:+.2f} | "
            f"{b['log2_error']:+.2f} |"
        )
    if plot:
        lines += ["", f"![{plot.removesuffix('.png')}](results/{plot})"]
    return [*lines, ""]


def batch_plot(b: dict[str, Any]) -> str | None:
    """The held-out budget's best loss by batch, each method's prediction and the baselines
    marked, saved under docs/results/; its file name (None when there is no held-out result)."""
    from sweeper.report.plots import plot_batch_holdout

    held = [h for h in b["holdout"].values() if "points" in h]
    if not held:
        return None
    points = {f"law ({h['method']})": h["points"]["law"]["batch_tokens"] for h in held}
    points |= {k: v["batch_tokens"] for k, v in held[0]["points"].items() if k != "law"}
    best = {float(k): v for k, v in held[0]["best_by_batch"].items()}
    fig = plot_batch_holdout(
        best, points, cell=held[0]["holdout_cell"],
        measured=held[0]["best_trained_batch_tokens"], measured_label="best trained batch",
    )  # fmt: skip
    if fig is None:
        return None
    name = "batch_ladder_holdout.png"
    fig.savefig(REPO / "docs" / "results" / name, dpi=110, bbox_inches="tight")
    return name


def batch_section(b: dict[str, Any], plot: str | None = None) -> list[str]:
    lines = [
        "## Batch-size ladder: B*(D), η*(D), the largest budget held out",
        "",
        f"{b['runs']} runs in `docs/data/batch_ladder.csv` (their training adds up to "
        f"{b['core_seconds'] / 60:.0f} core-minutes); figures by `scripts/batch_ladder.py "
        "--from-csv docs/data/batch_ladder.csv --json ...`. Per budget, the 2-D parabola's optimum:",
        "",
        "| cell | tokens | B* (tokens) | 95% interval | lr there | an optimum? |",
        "|---|---|---|---|---|---|",
    ]
    for o in b["optima"]:
        lo, hi = o["batch_tokens_ci"]
        use = "yes" if o["usable"] else f"no: {o['reason']}"
        use += "".join(f"; {n}" for n in o.get("notes", []))
        lines.append(f"| {o['cell']} | {o['tokens']:.3g} | {o['batch_tokens']:.0f} | {lo:.0f}-{hi:.0f} "
                     f"| {o['lr']:.3g} | {use} |")  # fmt: skip
    lines += ["", "| method | law | exponent of tokens | 95% interval | excludes 0 | cells | "
              "leave-one-cell-out (ln) |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    inner = ", ".join(f"{t:.3g}" for t in b.get("interior_budgets", []))
    for key, tag in (("laws", ""), ("laws_interior", f" (interior budgets: {inner})")):
        for method, laws in b.get(key, {}).items():
            if laws.get("error"):
                lines.append(f"| {method}{tag} | — | {laws['error']} | | | | |")
                continue
            for target in ("batch_tokens", "lr"):
                name = "B*(D)" if target != "lr" else "η*(D) along B*(D)"
                lines.append(_law_row(method + tag, name, laws[target]))
    for batch, law in b["horizon_fixed_batch"].items():
        lines.append(_law_row("parabola", f"η*(D) at batch {batch} tokens", law))
    lines += ["", "Held out: the largest budget, each law refitted without it; regret at the trained "
              "batch nearest to each prediction (best loss over that batch's LRs):", "",
              "| method | point | B* (tokens) | nearest trained | regret, % of loss |",
              "|---|---|---|---|---|"]  # fmt: skip
    shown: set[str] = set()  # the baselines are the same for every method: shown once
    held = [(m, "", h) for m, h in b["holdout"].items()]
    held += [(m, " (interior budgets)", h) for m, h in b.get("holdout_interior", {}).items()]
    for method, tag, h in held:
        for name, pt in h.get("points", {}).items():
            if name in shown or (tag and name != "law"):
                continue
            if name != "law":
                shown.add(name)
            who = method + tag if name == "law" else "—"
            lines.append(
                f"| {who} | {BASELINE_NAMES.get(name, name)} | {pt['batch_tokens']:.0f} "
                f"| {pt['nearest_trained']:.0f} | {pt['regret_pct']:+.2f} |"
            )
    if plot:
        lines += ["", f"![{plot.removesuffix('.png')}](results/{plot})"]
    return [*lines, ""]


def tokens_section(t: dict[str, Any]) -> list[str]:
    d, m = t["data"], t["measured"]
    lines = [
        "## The token unit: the byte law, converted, on a BPE cell",
        "",
        f"{t['runs']} runs in `docs/data/tokens_bpe.csv` ({t['core_seconds'] / 60:.0f} "
        f"core-minutes): the batch ladder's proxy on a byte-level BPE of {d['vocab_size']} tokens "
        f"trained on the built-in text, {d['bytes_per_token']:.2f} bytes per token on the held-out "
        f"text; figures by `scripts/bpe_ladder.py --from-csv docs/data/tokens_bpe.csv`. The cell "
        f"{m['cell']}: its optimum (2-D parabola) at lr {m['lr']:.3g}, batch "
        f"{m['batch_tokens']:.0f} tokens ({m['batch_tokens_ci'][0]:.0f}-"
        f"{m['batch_tokens_ci'][1]:.0f}){'' if m['usable'] else ' — not an optimum: ' + m['reason']}"
        f"; best trained point lr {m['best_point']['lr']:.3g}, batch "
        f"{m['best_point']['batch_tokens']:.0f} (loss {m['best_loss']:.4f}, nats per BPE token).",
        "",
        "| byte law | applied | lr | log2 error | batch (tokens) | log2 error | within 2x | nearest "
        "trained point: regret, % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, p in t["predictions"].items():
        if p.get("error"):
            lines.append(f"| {method} | — | {p['error']} | | | | | |")
            continue
        for how in ("converted", "unconverted"):
            q = p[how]
            near = "outside the trained" if q["outside_trained"] else f"{q['regret_pct']:+.2f}"
            lines.append(
                f"| {method} | {how} | {q['lr']:.3g} | {q['lr_log2_error']:+.2f} "
                f"| {q['batch_tokens']:.0f} | {q['batch_log2_error']:+.2f} "
                f"| {'yes' if q['batch_within_2x'] else 'no'} | {near} |"
            )
    return [*lines, ""]


def gpu_section(gpu: dict[str, Any]) -> list[str]:
    lines = [
        "## The GPU path: CUDA with bf16 autocast against the CPU's fp32",
        "",
        f"The same trials (cell, LR, batch, seed) trained on {GPU_MACHINE}, on the CPU runs' "
        "corpus, and compared with the committed CPU runs by `scripts/gpu_check.py compare` (the "
        "Hugging Face Llama's CPU runs were trained on the GPU machine's CPU, which has "
        "transformers). Each GPU run is compared with the CPU run of the same seed: |GPU − CPU| "
        "/ CPU, its median over the runs below each cell's best CPU LR and over those at or "
        "above it; beside it, the same median between two CPU seeds at those points (|a − b| / "
        "their mean, every pair of seeds). Laws: the surface fit with 1,000 resamples on each "
        "device's losses of these runs (so the CPU's interval differs a little from the same "
        "ladder's above, fitted with 200).",
        "",
        "| ladder | runs | GPU vs CPU: below the best LR | at or above it | two CPU seeds: below "
        "(pairs) | at or above (pairs) | largest GPU vs CPU | same best LR (cells with every LR) "
        "| two CPU seeds: same best LR | LR exponent, GPU | CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in gpu["ladders"]:
        lo, hi = g["by_side"]["below_best_lr"], g["by_side"]["at_or_above_best_lr"]
        full = [c for c in g["cells"] if c["octaves_apart"] is not None]
        same = sum(c["octaves_apart"] == 0 for c in full)
        sb = g["cpu_seed_best_lr"]
        lines.append(
            f"| {g['gpu_csv']} | {g['runs_compared']} | {_pct(lo['gpu_vs_cpu_abs_rel_median'])} "
            f"| {_pct(hi['gpu_vs_cpu_abs_rel_median'])} "
            f"| {_pct(lo['cpu_seed_pairs_abs_rel_median'])} ({lo['cpu_seed_pairs']}) "
            f"| {_pct(hi['cpu_seed_pairs_abs_rel_median'])} ({hi['cpu_seed_pairs']}) "
            f"| {100 * g['abs_rel_loss_diff_max']:.1f}% "
            f"| {same} of {len(full)} cell{'s' * (len(full) != 1)} "
            f"| {sb['pairs'] - sb['differ']} of {sb['pairs']} pairs "
            f"| {_gpu_law(g['laws'].get('gpu'))} | {_gpu_law(g['laws'].get('cpu'))} |"
        )
    lines += ["", *_gpu_notes(gpu), ""]
    return lines


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def _gpu_law(law: dict[str, Any] | None) -> str:
    if law is None:
        return "— (a cut grid)"
    return f"{law['exponent']:+.3f} [{law['ci'][0]:+.3f}, {law['ci'][1]:+.3f}]"


def _gpu_notes(gpu: dict[str, Any]) -> list[str]:
    notes = [_gpu_ladder_note(g) for g in gpu["ladders"]]
    notes.append(
        "- CPU tokens/s are one thread's on the machine the CPU runs were trained on (the Llama's: "
        "the GPU machine), with other trials beside it: the quickstart's CPU runs shared their "
        "cores more than width_mup's did (their w32 cells have the same shape)."
    )
    t = gpu.get("transfer")
    if t:
        cpu = json.loads((DATA / GPU_TRANSFER_CPU).read_text())
        notes.append(
            f"- `sweeper validate-transfer {t['sweep']} --holdout largest --seeds 3` on the GPU: "
            f"{t['holdout_cell']} ({t['extrapolation']['n_params']:.1f}x N, measured optimum lr "
            f"{t['measured_lr']:.3g}): the recommended LR {t['predicted_lr']:.3g} costs "
            f"{t['regret_pct']:+.2f}% of the best trained loss (log2 error "
            f"{t['log2_error']:+.2f}), the law's point estimate {t['predicted_lr_point']:.3g} "
            f"{t['regret_point_pct']:+.2f}% ({t['log2_error_point']:+.2f}); the same check on the "
            f"CPU runs: {cpu['predicted_lr']:.3g}, {cpu['regret_pct']:+.2f}% "
            f"({cpu['log2_error']:+.2f}), point {cpu['predicted_lr_point']:.3g} "
            f"{cpu['regret_point_pct']:+.2f}% (`docs/data/{GPU_TRANSFER}`, "
            f"`docs/data/{GPU_TRANSFER_CPU}`)."
        )
    return notes


def _gpu_ladder_note(g: dict[str, Any]) -> str:
    tp = g["throughput"]
    apart = [f"{c['cell']} {c['octaves_apart']:.1f}" for c in g["cells"]
             if c["octaves_apart"] is not None and c["octaves_apart"] > 0]  # fmt: skip
    edge = [c["cell"] for c in g["cells"] if c["at_edge"]]
    text = (
        f"- {g['gpu_csv']}: diverged on one device only: {g['diverged_gpu_only']} (GPU), "
        f"{g['diverged_cpu_only']} (CPU); best LR apart, in octaves: {', '.join(apart) or 'none'}"
        f"; best LR at the edge of the LRs trained (a bound): {', '.join(edge) or 'none'}; GPU "
        f"tokens/s {_span(tp, 'tokens_per_s_gpu')} against {_span(tp, 'tokens_per_s_cpu')} for "
        "one CPU thread"
    )
    reps = g["gpu_repeat_abs_rel_diff"] + g.get("other_repeat_abs_rel_diff", [])
    if reps:
        most = f"{max(reps):.1e}" if max(reps) else "0 (bit for bit)"
        text += f"; {len(reps)} trials trained twice on the GPU differ by at most {most}"
    if "other_csv" in g:
        text += (
            f"; the Ray sweep's losses against the same trials run outside Ray "
            f"({g['other_csv']}, {g['other_runs_matched']} runs): largest difference "
            f"{g['other_max_abs_loss_diff']:.1e}".replace("0.0e+00", "0 (bit for bit)")
        )
    cut = [f"{c['cell']} ({c['trials']} of {c['trials_reference']} trials: {c['lrs']} of "
           f"{c['lrs_reference']} LRs, {c['seeds']} of {c['seeds_reference']} seeds)"
           for c in g["cells"] if c["partial"]]  # fmt: skip
    cut += [f"{c} (none)" for c in g["cells_missing"]]
    if cut:
        text += f"; cut short by its device time: {', '.join(cut)}, so no law is fitted"
    return text + "."


def _span(rows: list[dict[str, Any]], key: str) -> str:
    lo, hi = (f"{f(r[key] for r in rows) / 1e3:.3g}k" for f in (min, max))
    return lo if lo == hi else f"{lo}-{hi}"


def _law_row(method: str, name: str, law: dict[str, Any]) -> str:
    if law.get("error"):
        return f"| {method} | {name} | — | {law['error']} | | | |"
    lo, hi = law["exponents_ci"]["tokens"]
    cv = law.get("cv_error")
    return (f"| {method} | {name} | {law['exponents']['tokens']:+.2f} | {lo:+.2f} to {hi:+.2f} | "
            f"{'yes' if lo > 0 or hi < 0 else 'no'} | {law['n_cells']} | "
            f"{'—' if cv is None else f'{cv:.2f}'} |")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())

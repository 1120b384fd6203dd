"""Sweeper from Python, the way a notebook uses it: sweep a ladder, fit the laws, recommend a
recipe for a big model, export it, and plot.

    python examples/walkthrough.py --storage sqlite:///walkthrough.db [--study studies/smoke.toml]

On 2 CPU cores the smoke study (6 cells, 36 short runs) takes about a minute; the quickstart
about 15-25 minutes. Relaunching resumes: finished trials are kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import sweeper

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--storage", default="sqlite:///walkthrough.db", help="SQLAlchemy URL")
    p.add_argument("--study", default=str(REPO / "studies" / "smoke.toml"), help="study file")
    p.add_argument("--out", default="walkthrough", help="folder for the exports and the report")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. the study: a ladder of tiny proxies and the LRs to try in each cell
    study = sweeper.load_study(args.study)
    print(f"study {study.name}: {study.trials_per_cell} trials per cell")

    # 2. sweep it on local Ray (Optuna chooses the trials; the storage keeps every one)
    summary = sweeper.launch(study, storage=args.storage, progress=False)
    print(f"launched: {summary.runs_this_launch} runs this launch, done={summary.done}")

    # 3. every training run as a DataFrame
    runs = sweeper.runs(study.name, storage=args.storage)
    best = runs.loc[runs.groupby("cell")["loss"].idxmin(), ["cell", "lr", "loss"]]
    print(best.to_string(index=False))

    # 4. fit the laws of the optimal LR (and batch, where it was swept); they are stored
    laws = sweeper.fit(study.name, storage=args.storage, n_boot=200)
    for law in laws:
        if isinstance(law, sweeper.PowerLaw):  # (a loss law, fitted with target="loss", is not)
            print(f"{law.target} ∝ " + ", ".join(f"{p}^{b:+.3f}" for p, b in law.exponents.items()))

    # 5. the recipe for a model far too big to sweep, and its litgpt config
    target = sweeper.Target(width=2048, depth=20, vocab=50304, context=2048, tokens=2e10)
    hardware = sweeper.Hardware(gpus=8, gpu_memory_gb=80, micro_batch=8)
    try:
        recipe = sweeper.recommend(laws, at=target, hardware=hardware, bytes_per_token=4.0)
    except sweeper.SweeperError as e:
        # the smoke study's two tiny widths do not determine the LR at 1B parameters: recommend
        # refuses; force=True writes the recipe anyway (with a warning) to show the rest here
        print(f"refused: {e}")
        recipe = sweeper.recommend(
            laws, at=target, hardware=hardware, bytes_per_token=4.0, force=True
        )
    print(f"peak LR {recipe.lr.value:.3g} (95% {recipe.lr.low:.3g}-{recipe.lr.high:.3g}), "
          f"global batch {recipe.global_batch_sequences} x {recipe.seq_len}")  # fmt: skip
    for line in recipe.warnings:  # read these before trusting the numbers above
        print(f"warning: {line}")
    exported = sweeper.export(recipe, "litgpt")
    (out / "litgpt.yaml").write_text(exported.text)
    for line in exported.cannot_carry:
        print(f"litgpt cannot express: {line}")

    # 6. plots: the report's figures, or your own from the runs table
    files = sweeper.write_report(study.name, out / "report", storage=args.storage, recipe=recipe)
    print(f"report: {len(files)} files in {out / 'report'}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for cell, g in runs[runs["state"] == "COMPLETE"].groupby("cell"):
        g = g.groupby("lr")["loss"].mean()
        ax.plot(g.index, g.to_numpy(), marker="o", label=cell)
    ax.set(xscale="log", xlabel="peak LR", ylabel="final loss", title=study.name)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "loss_vs_lr.png")
    print(f"wrote {out / 'loss_vs_lr.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

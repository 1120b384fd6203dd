"""The token unit: does the byte-level batch ladder's law, converted, predict a BPE cell's optimum?

Every law fitted on the built-in data counts bytes. A recipe for a model trained on tokenizer
tokens converts with bytes per token (``--bytes-per-token``): D_bytes = D_tokens x b, and a batch
law's answer in bytes is divided by b. This script tests that conversion once, end to end:

1. trains a byte-level BPE (the ``tokenizers`` package, ``pip install tokenizers``) of
   ``--vocab`` tokens on the built-in corpus's training split only, encodes both splits and
   writes them as nanoGPT ``train.bin``/``val.bin`` to the ``data`` directory that
   studies/tokens_bpe.toml names; b is measured on the validation split (its bytes / its tokens);
2. launches studies/tokens_bpe.toml (LR x batch at one budget of BPE tokens) into ``--storage``
   (a finished sweep is not re-run) and writes its runs to ``--csv``;
3. fits the batch ladder's laws (docs/data/batch_ladder.csv: B*(D) and eta*(D) along B*, by the
   parabola and surface methods, ``sweeper.fit``) and predicts the BPE cell's optimum twice:
   converted (D and B through b) and unconverted (BPE tokens taken for bytes); scores each against
   the cell's measured optimum (its 2-D parabola, as the batch ladder's cells) and reads the
   regret at the trained point nearest to it.

    .venv/bin/python scripts/bpe_ladder.py --storage sqlite:////work/data/bpe.db \\
        --csv docs/data/tokens_bpe.csv --json docs/data/tokens_bpe.json
    .venv/bin/python scripts/bpe_ladder.py --from-csv docs/data/tokens_bpe.csv   # no training

Training also writes the data's vocab and bytes per token to ``--meta``
(docs/data/tokens_bpe_data.json), which ``--from-csv`` reads back: no tokenizer needed then.

The BPE cell differs from the byte cells in two ways at once (the unit and the vocabulary, 256 to
``--vocab`` embeddings): the test is of the recipe a user would follow, not of the unit alone.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import tomllib
from batch_ladder import (  # scripts/ is on sys.path when run as a script
    emit_json,
    fit_laws,
    law_summary,
)

from proxy_models.data import builtin_corpus
from sweeper.fitting.optimum import estimate_optima

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "studies" / "tokens_bpe.toml"
BYTE_RUNS = REPO / "docs" / "data" / "batch_ladder.csv"
VAL_FRACTION = 0.1  # the byte data's held-out share (proxy_models.data.load_data's default)


def _chunks(text: str, lines: int = 2000) -> list[str]:
    parts = text.splitlines(keepends=True)
    return ["".join(parts[i : i + lines]) for i in range(0, len(parts), lines)]


def build_bpe_data(dest: Path, vocab: int) -> dict[str, Any]:
    """Train the BPE on the corpus's training split; write train.bin/val.bin and meta.json."""
    meta_path = dest / "meta.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("vocab_size") == vocab:
            return meta
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        sys.exit("scripts/bpe_ladder.py needs the tokenizers package: pip install tokenizers")
    raw = bytes(builtin_corpus())
    n_val = max(1, int(len(raw) * VAL_FRACTION))
    splits = {"train": raw[:-n_val], "val": raw[-n_val:]}
    text = {k: v.decode("utf-8", errors="replace") for k, v in splits.items()}
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_chunks(text["train"]), trainer)
    dest.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for name, t in text.items():
        ids = [i for enc in tok.encode_batch(_chunks(t)) for i in enc.ids]
        arr = np.asarray(ids, dtype=np.uint16)
        assert arr.max() < vocab
        arr.tofile(dest / f"{name}.bin")
        counts[name] = len(arr)
    tok.save(str(dest / "tokenizer.json"))
    meta = {
        "vocab_size": tok.get_vocab_size(),
        "train_tokens": counts["train"],
        "val_tokens": counts["val"],
        "bytes_per_token": len(splits["val"]) / counts["val"],
        "bytes_per_token_train": len(splits["train"]) / counts["train"],
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def launch(storage: str, csv: Path | None) -> pd.DataFrame:
    sweeper = [sys.executable, "-m", "sweeper"]
    subprocess.run([*sweeper, "launch", str(STUDY), "--storage", storage], check=True)
    out = csv or Path("/tmp/tokens_bpe.csv")
    subprocess.run([*sweeper, "trials", "tokens_bpe", "--storage", storage, "-o", str(out)],
                   check=True)  # fmt: skip
    return pd.read_csv(out)


def best_by_point(runs: pd.DataFrame) -> pd.Series:
    ok = runs[(runs["state"] == "COMPLETE") & ~runs["diverged"].astype(bool)]
    return ok.groupby(["batch_tokens", "lr"])["loss"].mean()


def nearest_regret(best: pd.Series, lr: float, batch_tokens: float) -> dict[str, Any]:
    """The trained point nearest (log2, both axes) to (lr, batch) and its regret over the best."""
    pts = np.array(best.index.tolist(), dtype=float)  # (batch_tokens, lr)
    d = np.hypot(np.log2(pts[:, 0] / batch_tokens), np.log2(pts[:, 1] / lr))
    i = int(np.argmin(d))
    return {
        "nearest_trained": {"batch_tokens": pts[i, 0], "lr": pts[i, 1]},
        "regret_pct": 100.0 * (float(best.iloc[i]) / float(best.min()) - 1.0),
        # more than half a grid step away on either axis: the regret is not measured
        "outside_trained": bool(
            abs(math.log2(pts[i, 0] / batch_tokens)) > 0.5 or abs(math.log2(pts[i, 1] / lr)) > 0.25
        ),
    }


def predict(byte_runs: pd.DataFrame, method: str, tokens: float, b: float) -> dict[str, Any]:
    """The byte laws' prediction for a cell of ``tokens`` BPE tokens, converted and not."""
    laws = fit_laws(byte_runs, method)
    if "batch_tokens" not in laws or "lr" not in laws:
        return {"error": laws.get("_error", "no lr or batch law"), "warnings": laws["_warnings"]}
    out: dict[str, Any] = {"laws": {t: law_summary(laws[t]) for t in ("lr", "batch_tokens")}}
    for name, d_bytes, per_token in (("converted", tokens * b, b), ("unconverted", tokens, 1.0)):
        lr = float(laws["lr"].predict({"tokens": d_bytes}))
        batch_bytes = float(laws["batch_tokens"].predict({"tokens": d_bytes}))
        lo, hi = laws["batch_tokens"].interval({"tokens": d_bytes})
        out[name] = {
            "tokens_as_bytes": d_bytes,
            "lr": lr,
            "lr_interval": list(laws["lr"].interval({"tokens": d_bytes})),
            "batch_tokens": batch_bytes / per_token,
            "batch_tokens_interval": [lo / per_token, hi / per_token],
        }
    return out


def score(pred: dict[str, Any], cell: Any, best: pd.Series) -> None:
    for name in ("converted", "unconverted"):
        p = pred.get(name)
        if p is None:
            continue
        p["lr_log2_error"] = math.log2(p["lr"] / cell.lr)
        p["batch_log2_error"] = math.log2(p["batch_tokens"] / float(cell.batch_tokens))
        p["batch_within_2x"] = abs(p["batch_log2_error"]) <= 1.0
        p |= nearest_regret(best, p["lr"], p["batch_tokens"])


def measured(cell: Any, best: pd.Series) -> dict[str, Any]:
    """The BPE cell's optimum (2-D parabola) and its best trained point."""
    keep = ("cell", "tokens", "lr", "batch_tokens", "batch_tokens_ci", "batch_edge", "usable")
    out = {k: getattr(cell, k) for k in keep} | {"lr_edge": cell.edge, "reason": cell.reason}
    batch, lr = map(float, best.idxmin())
    return out | {"best_loss": float(best.min()), "best_point": {"batch_tokens": batch, "lr": lr}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--storage", help="where to run (or find) the tokens_bpe sweep")
    src.add_argument("--from-csv", type=Path, help="its runs (docs/data/tokens_bpe.csv)")
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--csv", type=Path, help="write the sweep's runs here")
    ap.add_argument("--meta", type=Path, default=REPO / "docs" / "data" / "tokens_bpe_data.json",
                    help="the BPE data's vocab and bytes per token: written when training, read "
                    "with --from-csv")  # fmt: skip
    ap.add_argument("--json", type=Path, help="write the results here (also printed)")
    args = ap.parse_args()
    study = tomllib.loads(STUDY.read_text())
    if study["model"]["vocab_size"] != args.vocab:
        sys.exit(f"{STUDY.name} has vocab_size {study['model']['vocab_size']}, not {args.vocab}")
    if args.storage:
        meta = build_bpe_data(Path(study["sweep"]["data"]).expanduser(), args.vocab)
        args.meta.write_text(json.dumps(meta, indent=2) + "\n")
        runs = launch(args.storage, args.csv)
    else:
        meta = json.loads(args.meta.read_text())
        runs = pd.read_csv(args.from_csv)
    (cell,) = estimate_optima(runs)
    best = best_by_point(runs)
    byte_runs = pd.read_csv(BYTE_RUNS)
    b = float(meta["bytes_per_token"])
    result: dict[str, Any] = {
        "data": meta,
        "runs": len(runs),
        "core_seconds": float(runs["wall_s"].sum()),
        "measured": measured(cell, best),
        "predictions": {},
    }
    for method in ("parabola", "surface"):
        pred = predict(byte_runs, method, float(cell.tokens), b)
        score(pred, cell, best)
        result["predictions"][method] = pred
    emit_json(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

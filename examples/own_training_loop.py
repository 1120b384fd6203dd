"""A plain PyTorch training script, and the few lines that let Sweeper sweep it.

The script (``python examples/own_training_loop.py --lr 3e-3``) trains a small causal transformer
made of ``torch.nn.TransformerEncoderLayer`` blocks on bytes of text, with AdamW, linear warmup then
cosine decay, and gradient clipping. It knows nothing of Sweeper.

``train(hparams=, shape=, report=)`` below is the wrapper a study names as
``[train] function = "examples.own_training_loop:train"`` (studies/own_function.toml; run from the
repository root with ``PYTHONPATH=.``): it maps Sweeper's hyperparameters and the cell's shape onto
the script's arguments, hands the script a callback that calls ``report(step, tokens, loss)`` and
stops when it returns True (divergence or ASHA), and returns ``{"val_loss": ...}``. ``honours``
lists the study keys the script really implements, so a study setting any other one (a z-loss,
another optimizer) is refused at validate.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


# ---- the plain script ------------------------------------------------------------------------
class TinyLM(nn.Module):
    """Token + position embeddings, ``depth`` pre-LN encoder layers under a causal mask, a head."""

    def __init__(self, vocab: int, width: int, depth: int, heads: int, context: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True, bias=False
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width, bias=False)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        return self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - 1 - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def run(
    *,
    data: Any,
    width: int = 64,
    depth: int = 2,
    heads: int = 4,
    context: int = 128,
    lr: float = 3e-3,
    batch_size: int = 32,
    steps: int = 200,
    warmup: float = 0.1,
    grad_clip: float = 1.0,
    seed: int = 0,
    on_step: Callable[[int, int, float], bool] | None = None,
) -> dict[str, float]:
    """Train and return the final validation loss; ``on_step(step, tokens, loss)`` returning True
    stops the run early."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    train_ids = torch.as_tensor(data.train.astype("int64"))
    val_ids = torch.as_tensor(data.val.astype("int64"))
    model = TinyLM(data.vocab_size, width, depth, heads, context)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    n_warm = round(warmup * steps) if warmup < 1 else int(warmup)

    def batch(ids: torch.Tensor, n: int, g: torch.Generator | None) -> tuple[torch.Tensor, ...]:
        if g is None:  # validation: fixed, evenly spaced windows
            starts = torch.linspace(0, len(ids) - context - 2, n).long()
        else:
            starts = torch.randint(0, len(ids) - context - 1, (n,), generator=g)
        x = torch.stack([ids[s : s + context] for s in starts.tolist()])
        y = torch.stack([ids[s + 1 : s + 1 + context] for s in starts.tolist()])
        return x, y

    step = 0
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, max(1, n_warm))
        x, y = batch(train_ids, batch_size, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        if on_step is not None and on_step(step + 1, (step + 1) * batch_size * context, loss.item()):
            break
    model.eval()
    with torch.no_grad():
        x, y = batch(val_ids, 64, None)
        val = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    return {"val_loss": val, "steps": step + 1, "train_loss": loss.item()}


# ---- the wrapper Sweeper calls ---------------------------------------------------------------
def train(
    *, hparams: dict[str, Any], shape: dict[str, int], report: Callable[[int, int, float], bool]
) -> dict[str, float]:
    """One Sweeper trial: the script at the cell's shape with the trial's hyperparameters."""
    from proxy_models import load_data  # the study's data source (or your own loader)

    steps = max(1, hparams["tokens"] // (hparams["batch_size"] * shape["context"]))
    out = run(
        data=load_data(hparams["data"], vocab_size=shape["vocab_size"]),
        width=shape["width"],
        depth=shape["depth"],
        heads=shape["heads"],
        context=shape["context"],
        lr=hparams["lr"],
        batch_size=hparams["batch_size"],
        steps=steps,
        warmup=hparams.get("warmup", 0.1),
        grad_clip=hparams.get("grad_clip", 1.0),
        seed=hparams["seed"],
        on_step=report,
    )
    return {**out, "tokens": out["steps"] * hparams["batch_size"] * shape["context"]}


#: the study keys this script implements (anything else set by a study is refused)
train.honours = ("warmup", "grad_clip")  # type: ignore[attr-defined]


if __name__ == "__main__":
    from proxy_models import load_data

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--steps", type=int, default=50)
    a = p.parse_args()
    print(run(data=load_data(None), lr=a.lr, width=a.width, steps=a.steps))

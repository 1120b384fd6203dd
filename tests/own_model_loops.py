"""Training functions beside a builder, for the own-model tests (an own-model audit): one that
takes the model Sweeper parametrized (``model=``) and one that trains a model of its own.

Importable as ``tests.own_model_loops`` from the repository root (pytest's ``pythonpath``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

#: what the last call saw: the hparams it was given and the embedding's std of the model passed
SEEN: dict[str, Any] = {}


def with_model(
    *, hparams: dict[str, Any], shape: dict[str, int], report: Any, model: torch.nn.Module
) -> dict[str, float]:
    """One forward pass of the model Sweeper passes; reads the base shape its muP needs."""
    SEEN.update(
        hparams=dict(hparams), emb_std=float(model.get_parameter("emb.weight").detach().std())
    )
    idx = torch.zeros((2, shape["context"]), dtype=torch.long)
    with torch.no_grad():
        logits = model(idx)
        loss = float(F.cross_entropy(logits.flatten(0, 1), idx.flatten()))
    report(1, 2 * shape["context"], loss)
    return {"val_loss": loss + hparams["base_width"] * 0.0 + hparams["base_depth"] * 0.0}


with_model.honours = ("parametrization",)  # type: ignore[attr-defined]


def own_model(*, hparams: dict[str, Any], shape: dict[str, int], report: Any) -> dict[str, float]:
    """A loop that builds and trains its own model (none taken from Sweeper)."""
    SEEN.update(hparams=dict(hparams))
    report(1, 2 * shape["context"], 5.0)
    return {"val_loss": 4.0}

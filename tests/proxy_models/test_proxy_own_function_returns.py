"""What a training function returns and reads: a val_loss that is not one number, a dict without
val_loss, a setting it did not declare it honours: each one line saying what it got."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from proxy_models.builder import BuilderError
from proxy_models.train_function import run_function

SHAPE = {"width": 16, "depth": 1, "heads": 1, "head_dim": 16, "vocab_size": 256, "context": 8}
HP = {"lr": 1e-3, "batch_size": 2, "tokens": 64, "seed": 0, "data": None}


def returning(**out: Any) -> Any:
    return lambda hparams, shape, report: out


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "val_loss=None (NoneType)"),
        (torch.ones(8), "val_loss of type Tensor and shape (8,)"),  # a forgotten .mean()
        (np.ones((2, 3)), "val_loss of type ndarray and shape (2, 3)"),
        ("2.5", "val_loss='2.5' (str)"),
        ([2.5], "val_loss=[2.5] (list)"),
    ],
)
def test_a_val_loss_that_is_not_one_number_is_a_user_error(
    value: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    """It had been stored as a diverged run, in silence. The optional train_loss, on which
    nothing is fitted, falls back to the last reported loss with a warning instead."""
    with pytest.raises(BuilderError) as e:
        run_function(returning(val_loss=value), hparams=HP, shape=SHAPE)
    msg = str(e.value)
    assert msg.startswith("train.function: returned ") and said in msg and "\n" not in msg
    r = run_function(returning(val_loss=2.0, train_loss=torch.ones(3)), hparams=HP, shape=SHAPE)
    assert r["train_loss"] == 2.0 and "train_loss of type Tensor and shape" in caplog.text


@pytest.mark.parametrize(
    "value", [2.5, np.float32(2.5), torch.tensor(2.5), torch.tensor([2.5]), np.array([2.5])]
)
def test_one_number_in_any_form_is_a_val_loss(value: Any) -> None:
    r = run_function(returning(val_loss=value, train_loss=value), hparams=HP, shape=SHAPE)
    assert r["val_loss"] == r["train_loss"] == 2.5 and not r["diverged"]
    r = run_function(returning(val_loss=2), hparams=HP, shape=SHAPE)
    assert r["val_loss"] == r["train_loss"] == 2.0  # no train_loss, no reports: the val_loss


@pytest.mark.parametrize("value", [math.nan, math.inf, torch.tensor(math.nan)])
def test_a_non_finite_val_loss_is_a_divergence(value: Any) -> None:
    r = run_function(returning(val_loss=value), hparams=HP, shape=SHAPE)
    assert r["diverged"] and r["val_loss"] == pytest.approx(math.log(256))


def test_a_result_without_val_loss_lists_what_came_back() -> None:
    with pytest.raises(BuilderError) as e:
        run_function(returning(loss=2.0, steps=3), hparams=HP, shape=SHAPE)
    assert "returned dict without 'val_loss' (its keys: 'loss', 'steps')" in str(e.value)
    with pytest.raises(BuilderError, match="returned float, not a dict with 'val_loss'"):
        run_function(lambda hparams, shape, report: 2.0, hparams=HP, shape=SHAPE)


def test_reading_a_setting_not_honoured_says_what_is_passed() -> None:
    def reads_warmup(hparams: dict[str, Any], shape: Any, report: Any) -> dict[str, Any]:
        return {"val_loss": 2.0 + hparams["warmup"]}

    with pytest.raises(KeyError) as e:  # still a KeyError: `except KeyError` keeps working
        run_function(reads_warmup, hparams=HP, shape=SHAPE)
    msg = str(e.value)
    assert msg.startswith("hparams has no 'warmup'") and "\n" not in msg
    assert "'lr', 'batch_size', 'tokens', 'seed', 'data'" in msg
    assert "honours = ('warmup',)" in msg  # how to receive it

    def reads_with_default(hparams: dict[str, Any], shape: Any, report: Any) -> dict[str, Any]:
        return {"val_loss": 2.0 + hparams.get("warmup", 0)}

    assert run_function(reads_with_default, hparams=HP, shape=SHAPE)["val_loss"] == 2.0


def test_a_missing_hparam_survives_the_trip_from_a_ray_worker() -> None:
    import pickle

    def reads(hparams: dict[str, Any], shape: Any, report: Any) -> dict[str, Any]:
        return {"val_loss": hparams["nope"]}

    with pytest.raises(KeyError) as e:
        run_function(reads, hparams=HP, shape=SHAPE)
    back = pickle.loads(pickle.dumps(e.value))
    assert str(back) == str(e.value) and "settings a function may honour: schedule" in str(back)

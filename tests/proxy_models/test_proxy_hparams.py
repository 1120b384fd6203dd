from __future__ import annotations

import itertools
import math

import pytest

from proxy_models import BatchRamp, HParams, lr_at
from proxy_models.hparams import batch_sizes, warmup_steps


def test_cosine_schedule_values() -> None:
    hp = HParams(lr=1.0, warmup=0.1, min_lr_ratio=0.1)
    total = 101  # warmup 10 steps, then 91 steps of cosine: step 55 is its midpoint
    assert warmup_steps(hp, total) == 10
    assert lr_at(hp, 0, total) == pytest.approx(0.1)
    assert lr_at(hp, 4, total) == pytest.approx(0.5)
    assert lr_at(hp, 9, total) == pytest.approx(1.0)  # warmup ends at the peak
    assert lr_at(hp, 10, total) == pytest.approx(1.0)
    assert lr_at(hp, 55, total) == pytest.approx(0.55)  # (1 + min ratio) / 2
    assert lr_at(hp, 100, total) == pytest.approx(0.1)  # the last step reaches the min ratio
    values = [lr_at(hp, s, total) for s in range(10, total)]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_warmup_in_steps_and_constant_schedule() -> None:
    hp = HParams(lr=2.0, warmup=4, schedule="constant")
    assert [lr_at(hp, s, 50) for s in range(6)] == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.0, 2.0])
    assert lr_at(hp, 49, 50) == 2.0
    assert lr_at(HParams(lr=2.0, warmup=0, schedule="constant"), 0, 10) == 2.0


def test_wsd_schedule_holds_then_decays_linearly() -> None:
    hp = HParams(lr=1.0, warmup=10, schedule="wsd", decay_fraction=0.21, min_lr_ratio=0.0)
    total = 100  # the last 21 steps (79..99) decay: 79 is still the peak, 99 the minimum
    assert lr_at(hp, 50, total) == 1.0
    assert lr_at(hp, 78, total) == 1.0
    assert lr_at(hp, 79, total) == pytest.approx(1.0)
    assert lr_at(hp, 89, total) == pytest.approx(0.5)
    assert lr_at(hp, 99, total) == pytest.approx(0.0)
    short = HParams(lr=1.0, warmup=0.5, schedule="wsd", decay_fraction=0.8, min_lr_ratio=0.1)
    assert lr_at(short, 4, 10) == 1.0  # the decay never starts before the warmup has ended
    assert lr_at(short, 9, 10) == pytest.approx(0.1)


def test_batch_sizes_without_and_with_ramp() -> None:
    assert batch_sizes(HParams(lr=1e-3, batch_size=8), 8 * 16 * 10 + 5, 16) == [8] * 10
    assert batch_sizes(HParams(lr=1e-3, batch_size=8), 3, 16) == [8]  # at least one step
    hp = HParams(lr=1e-3, batch_size=8, micro_batch_size=2, ramp=BatchRamp(2, 2, 64))
    sizes = batch_sizes(hp, 2000, 16)
    assert sizes[:4] == [2, 2, 4, 6]  # +2 sequences every 64 tokens seen
    assert max(sizes) == 8 and sizes[-1] == 8
    assert sum(sizes) * 16 <= 2000 < (sum(sizes) + 8) * 16


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": 0.0}, "`lr` must be a finite number > 0"),
        ({"lr": -1e-3}, "`lr` must be a finite number > 0"),
        ({"lr": math.nan}, "`lr` must be a finite number > 0"),
        ({"lr": 1e-3, "batch_size": 32, "micro_batch_size": 5}, "must divide `batch_size`"),
        ({"lr": 1e-3, "schedule": "step"}, "`schedule` must be one of"),
        ({"lr": 1e-3, "min_lr_ratio": 1.5}, "`min_lr_ratio` must be in"),
        ({"lr": 1e-3, "beta2": 1.0}, "`beta2` must be in"),
        ({"lr": 1e-3, "grad_clip": -1.0}, "`grad_clip` must be >= 0"),
        ({"lr": 1e-3, "warmup": -0.1}, "`warmup` must be >= 0"),
        ({"lr": 1e-3, "batch_size": 8, "ramp": BatchRamp(16, 8, 100)}, "`ramp.start` must be"),
    ],
)
def test_invalid_hparams_raise_one_line(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        HParams(**kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_ramp_without_a_micro_batch_takes_one_that_divides_every_batch() -> None:
    """A help-text audit: `trial --ramp 4 4 1000` was refused for a micro batch of 32 (the
    whole batch, never given, and never a divisor of a smaller ramp start)."""
    hp = HParams(lr=1e-3, batch_size=32, ramp=BatchRamp(4, 4, 1000))
    assert hp.micro == 4
    assert HParams(lr=1e-3, batch_size=30, ramp=BatchRamp(6, 4, 1000)).micro == 2
    assert HParams(lr=1e-3, batch_size=32).micro == 32  # (no ramp: the whole batch, as before)
    with pytest.raises(ValueError, match="the micro batch must divide"):
        HParams(lr=1e-3, batch_size=32, micro_batch_size=8, ramp=BatchRamp(4, 4, 1000))

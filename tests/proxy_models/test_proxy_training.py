from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from proxy_models import BatchRamp, HParams, ProxyConfig, TokenData, build_model, train
from proxy_models.training import forward_backward

TINY = ProxyConfig(width=32, depth=1, context=32)
TIMING = ("wall_s", "tokens_per_s", "flops_per_s")


def _losses(result: object) -> dict[str, object]:
    return {k: v for k, v in result.to_dict().items() if k not in TIMING}  # type: ignore[attr-defined]


def test_gradient_accumulation_matches_one_big_batch(corpus: TokenData) -> None:
    offsets = np.arange(32) * 997
    grads = []
    for micro in (32, 8):
        model = build_model(TINY, seed=0)
        ce = forward_backward(model, corpus.train, offsets, micro, z_loss=1e-4)
        grads.append(
            (ce.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
        )
    (ce_big, g_big), (ce_acc, g_acc) = grads
    assert ce_acc == pytest.approx(ce_big, rel=1e-5)
    for a, b in zip(g_big, g_acc, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_same_seed_is_bit_identical_and_seeds_differ(corpus: TokenData) -> None:
    hp = HParams(lr=3e-3, batch_size=8, micro_batch_size=4, z_loss=1e-4)
    runs = [train(TINY, hp, tokens=8 * 32 * 15, data=corpus, seed=s) for s in (7, 7, 8)]
    assert _losses(runs[0]) == _losses(runs[1])
    assert runs[0].val_loss != runs[2].val_loss
    assert runs[0].init_loss != runs[2].init_loss


def test_global_rng_is_neither_used_nor_changed(corpus: TokenData) -> None:
    hp = HParams(lr=3e-3, batch_size=8)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = train(TINY, hp, tokens=8 * 32 * 5, data=corpus, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(999)
    b = train(TINY, hp, tokens=8 * 32 * 5, data=corpus, seed=1)
    assert _losses(a) == _losses(b)


def test_loss_goes_down_on_the_builtin_corpus(corpus: TokenData) -> None:
    cfg = ProxyConfig(width=32, depth=2, context=64)
    r = train(cfg, HParams(lr=1e-2, batch_size=16), tokens=16 * 64 * 300, data=corpus)
    assert r.steps == 300 and r.tokens == 16 * 64 * 300 and not r.diverged
    assert r.init_loss == pytest.approx(math.log(256), abs=0.1)
    assert r.val_loss < 3.2 and r.train_loss < 3.2  # from 5.55: bytes of Python are predictable
    assert 0 < r.grad_norm_mean <= r.grad_norm_max
    assert r.n_params == cfg.n_params() and r.n_params_total == cfg.n_params_total()
    assert r.tokens_per_s > 0 and r.flops_per_s == pytest.approx(
        cfg.flops_per_token() * r.tokens_per_s
    )


@pytest.mark.parametrize("lr", [10.0, 100.0])
def test_absurd_lr_diverges_early_without_raising(corpus: TokenData, lr: float) -> None:
    hp = HParams(lr=lr, batch_size=8)
    r = train(TINY, hp, tokens=8 * 32 * 200, data=corpus)
    assert r.diverged and not r.stopped
    assert r.steps <= 25  # bounded: the warmup is 20 steps
    assert math.isfinite(r.val_loss)
    json.dumps(r.to_dict(), allow_nan=False)


def test_report_every_n_steps_and_stop_on_true(corpus: TokenData) -> None:
    calls: list[tuple[int, dict[str, float]]] = []
    hp = HParams(lr=3e-3, batch_size=8)
    r = train(
        TINY,
        hp,
        tokens=8 * 32 * 20,
        data=corpus,
        eval_every=5,
        report=lambda s, m: calls.append((s, m)),
    )
    assert [s for s, _ in calls] == [5, 10, 15, 20]
    assert set(calls[0][1]) == {"step", "tokens", "train_loss", "lr", "grad_norm", "val_loss"}
    assert calls[-1][1]["val_loss"] == r.val_loss and not r.stopped
    # the end-of-run call says so (a periodic evaluation on the same step would not)
    assert calls[-1][1]["final"] == 1.0 and all("final" not in m for _, m in calls[:-1])

    stopped = train(
        TINY, hp, tokens=8 * 32 * 20, data=corpus, eval_every=5, report=lambda s, m: s >= 10
    )
    assert stopped.stopped and stopped.steps == 10 and stopped.tokens == 10 * 8 * 32
    # reporting evaluates the model but does not change the run
    plain = train(TINY, hp, tokens=8 * 32 * 20, data=corpus)
    assert _losses(plain) == _losses(r)


def test_batch_ramp_and_schedules_run(corpus: TokenData) -> None:
    ramp = HParams(lr=3e-3, batch_size=8, micro_batch_size=2, ramp=BatchRamp(2, 2, 32 * 8))
    r = train(TINY, ramp, tokens=8 * 32 * 10, data=corpus)
    assert r.tokens <= 8 * 32 * 10 and r.steps > 10  # smaller batches first: more steps
    for schedule in ("wsd", "constant"):
        r2 = train(TINY, replace(ramp, ramp=None, schedule=schedule), tokens=2560, data=corpus)
        assert r2.steps == 10 and not r2.diverged


def test_threads_argument_is_restored(corpus: TokenData, monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    seen: list[int] = []
    train(
        TINY,
        HParams(lr=1e-3, batch_size=4),
        tokens=4 * 32 * 2,
        data=corpus,
        threads=2,
        eval_every=1,
        report=lambda s, m: seen.append(torch.get_num_threads()),
    )
    assert seen[0] == 2 and torch.get_num_threads() == before
    monkeypatch.setenv("SWEEPER_THREADS", "3")
    train(
        TINY,
        HParams(lr=1e-3, batch_size=4),
        tokens=4 * 32 * 2,
        data=corpus,
        eval_every=1,
        report=lambda s, m: seen.append(torch.get_num_threads()),
    )
    assert seen[-1] == 3 and torch.get_num_threads() == before


def test_bad_arguments_raise_value_error(corpus: TokenData) -> None:
    hp = HParams(lr=1e-3)
    with pytest.raises(ValueError, match="`tokens` must be a positive integer"):
        train(TINY, hp, tokens=0, data=corpus)
    with pytest.raises(ValueError, match="vocab_size"):
        train(replace(TINY, vocab_size=100), hp, tokens=100, data=corpus)
    with pytest.raises(ValueError, match="unknown device"):
        train(TINY, hp, tokens=100, data=corpus, device="tpu-9")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            train(TINY, hp, tokens=100, data=corpus, device="cuda")

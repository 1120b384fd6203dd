"""``sweeper trial`` through the real ``sweeper`` command (``sweeper.cli.main``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

import sweeper.cli


@pytest.fixture
def cli() -> Callable[[Sequence[str] | None], int]:
    return sweeper.cli.main


def test_trial_json(cli: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "trial",
        "--width",
        "32",
        "--depth",
        "1",
        "--context",
        "32",
        "--lr",
        "3e-3",
        "--batch-size",
        "8",
        "--micro-batch-size",
        "4",
        "--tokens",
        "2560",
        "--seed",
        "3",
        "--threads",
        "1",
        "--eval-batches",
        "1",
        "--json",
    ]
    assert cli(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {
        "val_loss",
        "train_loss",
        "diverged",
        "n_params",
        "n_params_total",
        "tokens",
        "steps",
        "wall_s",
        "tokens_per_s",
    } <= set(out)
    assert out["steps"] == 10 and out["tokens"] == 2560 and out["diverged"] is False
    assert out["n_params"] == 32 * 32 * 12 + 2 * 32 + 32
    assert 4.0 < out["val_loss"] < 6.0


def test_trial_table(cli: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "trial",
        "--width",
        "32",
        "--depth",
        "1",
        "--context",
        "32",
        "--lr",
        "3e-3",
        "--batch-size",
        "4",
        "--tokens",
        "256",
        "--threads",
        "1",
        "--eval-batches",
        "1",
    ]
    assert cli(argv) == 0
    assert "val loss" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--width", "60", "--heads", "7"], "divisible by the number of heads"),
        (["--lr", "-0.1"], "`lr` must be a finite number > 0"),
        (["--output-mult", "0"], "`output_mult` must be a finite number > 0"),
        (["--data", "/no/such/file.txt"], "data not found: /no/such/file.txt"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    cli: Callable[[list[str]], int],
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    argv = ["trial", "--lr", "1e-3", "--tokens", "256", *flags]
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err


def test_trial_output_mult(
    cli: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["trial", "--width", "32", "--tokens", "8192", "--lr", "3e-3", "--threads", "1"]
    argv += ["--eval-batches", "1", "--json"]
    assert cli([*argv, "--output-mult", "2"]) == 0
    doubled = json.loads(capsys.readouterr().out)
    assert cli(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert doubled["diverged"] is False and doubled["steps"] == plain["steps"]
    assert doubled["init_loss"] != plain["init_loss"]  # the flag reached the model


def test_bin_data_needs_vocab(
    cli: Callable[[list[str]], int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    np.arange(4000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "val.bin")
    assert cli(["trial", "--lr", "1e-3", "--data", str(tmp_path)]) == 2
    assert "give vocab_size" in capsys.readouterr().err
    argv = [
        "trial",
        "--lr",
        "1e-3",
        "--data",
        str(tmp_path),
        "--vocab",
        "4000",
        "--width",
        "32",
        "--context",
        "16",
        "--batch-size",
        "2",
        "--tokens",
        "64",
        "--eval-batches",
        "1",
        "--json",
    ]
    assert cli(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_params_total"] == out["n_params"] + 2 * 4000 * 32 + 16 * 32


@pytest.mark.parametrize(
    "error",
    [
        MemoryError("Unable to allocate 96.1 GiB for an array with shape (100000000, 129)"),
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate "
            "memory: you tried to allocate 120000000000 bytes"
        ),
    ],
)
def test_a_run_out_of_memory_is_one_line_that_says_what_to_lower(
    cli: Callable[[list[str]], int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
) -> None:
    # (an audit: a batch of 1e8 sequences was "internal error: MemoryError"; the numbers are
    # what numpy and torch said then, raised here so that no test allocates them)
    import proxy_models as pm

    def train(*a: object, **k: object) -> None:
        raise error

    monkeypatch.setattr(pm, "train", train)
    code = cli(["trial", "--lr", "1e-3", "--width", "16", "--tokens", "2048"])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err
    assert "the run ran out of memory (" in err and "a smaller --batch-size" in err


def test_an_error_that_is_not_memory_stays_an_internal_error(
    cli: Callable[[list[str]], int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import proxy_models as pm

    def train(*a: object, **k: object) -> None:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(pm, "train", train)
    code = cli(["trial", "--lr", "1e-3", "--width", "16", "--tokens", "2048"])
    assert code != 0 and "ran out of memory" not in capsys.readouterr().err

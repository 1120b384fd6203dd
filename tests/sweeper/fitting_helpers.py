"""Fixtures and helpers shared by the fitting tests (optimum, laws, import, CLI, Step Law data)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

import sweeper.cli as cli_mod

STEPLAW_FILE = "steplaw_dense_lr_bs_loss.csv"
#: the command that imports the Step Law release (module docstring of sweeper.importer)
STEPLAW_RENAMES = (
    "--rename", "N=n_params", "--rename", "D=tokens", "--rename", "bs=batch_size",
    "--rename", "h=width", "--rename", "numl=depth", "--rename", "loss=raw_loss",
    "--rename", "smooth loss=loss", "--seq-len", "2048",
)  # fmt: skip


def shared_data_dirs() -> list[Path]:
    """Where the shared data may be: ``$SWEEPER_SHARED/data`` (or ``$SWEEPER_SHARED`` itself),
    else ``../shared/data`` next to the repository."""
    env = os.environ.get("SWEEPER_SHARED")
    if env:
        return [Path(env) / "data", Path(env)]
    return [Path(__file__).resolve().parents[2].parent / "shared" / "data"]


def steplaw_csv() -> Path:
    """The Step Law release CSV, or skip the test with the reason."""
    dirs = shared_data_dirs()
    for d in dirs:
        if (d / STEPLAW_FILE).is_file():
            return d / STEPLAW_FILE
    where = " or ".join(str(d / STEPLAW_FILE) for d in dirs)
    pytest.skip(f"Step Law data not found at {where} (set $SWEEPER_SHARED to the shared folder)")


CliRunner = Callable[..., tuple[int, str, str]]


@pytest.fixture(name="cli")
def cli_fixture(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[CliRunner]:
    """Run the real ``sweeper`` command, ``sweeper.cli.main(argv)``; returns (code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli_mod.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    yield run


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False)
    return path

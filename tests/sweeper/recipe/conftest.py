"""The recipe tests' CLI runner: ``run(*argv)`` -> (exit code, stdout, stderr), with no
``$SWEEPER_STORAGE`` from the environment."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import sweeper.cli as cli


@pytest.fixture
def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    monkeypatch.delenv("SWEEPER_STORAGE", raising=False)

    def _run(*argv: str) -> tuple[int, str, str]:
        try:
            code = cli.main(list(argv))
        except SystemExit as e:  # argparse's own errors (main's parser exits 2 with one line)
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return _run

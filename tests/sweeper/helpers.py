"""Fixtures and helpers shared by the tests (fitting: optimum, laws, import, CLI, Step Law data;
study files: their problems, the light CLI)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import sweeper.cli as cli_mod
from sweeper.errors import StudyError
from sweeper.fitting.synthetic import synthetic_sweep
from sweeper.study.spec import load_study

STEPLAW_FILE = "steplaw_dense_lr_bs_loss.csv"
#: the command that imports the Step Law release (module docstring of sweeper.study.importer)
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


LAUNCHED_STUDY = """\
[sweep]
name = "launched"
trials_per_cell = 9

[model]
context = 64

[ladder]
widths = [16, 32, 64]
depths = [2]
tokens = [32768]

[search]
lr = { low = 1e-4, high = 1e-1, log = true }
batch_size = 8
"""


def launch_fake(study: str, url: str, exponent: float = -0.8) -> None:
    """Open the study's sweep and tell each cell's trials as the launcher tells them (no Ray):
    lr_opt ∝ width^exponent, a parabola in ln lr, a cliff above."""
    optuna = pytest.importorskip("optuna")
    from sweeper.study.space import distributions
    from sweeper.study.spec import parse_study_toml
    from sweeper.study.sweep import open_sweep

    spec = parse_study_toml(study)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for cs in open_sweep(spec, url):
        lr_opt = 0.02 * (cs.cell.width / 16) ** exponent
        for k in range(-4, 3):
            lr = lr_opt * 2 ** (k / 2 + 0.13)
            u = np.log(lr / lr_opt)
            diverged = bool(u > 1.2)
            loss = 3.0 + (0.05 if u < 0 else 0.2) * u * u
            cs.study.enqueue_trial({"lr": lr, "batch_size": 8})
            t = cs.study.ask(distributions(spec.search))
            runs = [
                {
                    "seed": 0,
                    "loss": None if diverged else loss,
                    "diverged": diverged,
                    "tokens": cs.cell.tokens,
                }
            ]
            t.set_user_attr("runs", runs)
            cs.study.tell(
                t,
                None if diverged else loss,
                state=None if not diverged else optuna.trial.TrialState.PRUNED,
            )


def tokens_lr_law(prefactor: float = 0.05, source: str = "sweep", **conv: object) -> Any:
    """An LR law lr = prefactor · D^-0.1 over D in [1e8, 1e10], with the conventions ``conv``
    (a test's stand-in for a fitted law)."""
    import math

    from sweeper.fitting.conventions import Conventions
    from sweeper.fitting.laws import PowerLaw

    return PowerLaw(
        conventions=Conventions(**conv),  # type: ignore[arg-type]
        target="lr",
        predictors=("tokens",),
        source=source,
        method="test",
        domain={"tokens": (1e8, 1e10)},
        log_prefactor=math.log(prefactor),
        exponents={"tokens": -0.1},
    )


def wild_law(spread: float) -> tuple[list[Any], Any, Any]:
    """Four synthetic cells' optima, their LR law, and the same law with its resamples' exponent
    spread by ``spread`` x (-7 ... +30): extrapolated to 1e12 parameters its interval spans
    hundreds of decades (1.0) or overflows to infinity (1.5), as a few noisy cells' law can."""
    from dataclasses import replace

    from sweeper.fitting import estimate_optima, fit_power_law, synthetic_sweep

    runs = synthetic_sweep(n_params=(1e6, 3e6, 1e7, 3e7), tokens=(4e8,), seeds=2, seed=1)
    optima = estimate_optima(runs, n_boot=20)
    law = fit_power_law(optima, target="lr", predictors=("n_params",), n_boot=50)
    a, b = law.boot_coefs[0]
    wild = tuple((a, b + spread * k) for k in (-7.0, 0.0, 30.0) * 10)
    return optima, law, replace(law, boot_coefs=wild)


#: the diff tests' ladder: 6 widths 32-256, N = 24·w²
DIFF_N: tuple[float, ...] = tuple(float(x) for x in 24 * np.geomspace(32, 256, 6) ** 2)


def pair_sweep(exponent: float, seed: int, n: tuple[float, ...] = DIFF_N) -> pd.DataFrame:
    """Cells of ``n`` at one D, 8 LRs × 2 seeds, proxy-like noise, lr* ∝ N^``exponent``: the
    laws of a pair pivot at the middle cell (``sweeper diff``'s tests)."""
    mid = math.exp(float(np.mean(np.log(n))))
    return synthetic_sweep(
        n_params=n, tokens=(819_200.0,), lr_law=(0.02 * mid ** (-exponent), {"n_params": exponent}),
        lr_steps=(-4, 3), seeds=2, noise=0.003, noise_high=0.02, noise_df=5.0, k_low=0.03,
        k_high=0.25, seq_len=128, batch_size=32, loss_law=(1.2, 8.0, 0.0, 0.2, 0.3), seed=seed,
    )  # fmt: skip


def study_problems(tmp_path: Path, text: str) -> list[str]:
    """The problems ``load_study`` raises for a study file of ``text`` (it must raise, naming the
    file)."""
    path = tmp_path / "study.toml"
    path.write_text(text)
    with pytest.raises(StudyError) as info:
        load_study(path)
    assert info.value.path == str(path)
    return info.value.problems


def light_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own that must import neither torch nor Ray (the study verbs)."""
    code = (
        "import sys, sweeper.cli as c; "
        "rc = c.main(sys.argv[1:]); "
        "assert 'torch' not in sys.modules and 'ray' not in sys.modules, 'heavy import'; "
        "raise SystemExit(rc)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )

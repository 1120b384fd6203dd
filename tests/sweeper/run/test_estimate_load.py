"""`sweeper validate --estimate` says what its figure is: one throughput snapshot under the load
the probe found (two estimates an audit ran back to back gave 225 and 480 core-s for a sweep that
took 374), and a launch's fixed cost as the typical figure it is, not a measurement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sweeper.run.estimate import estimate_study
from tests.sweeper.helpers import CliRunner, cli_fixture  # noqa: F401  (the `cli` fixture)
from tests.sweeper.run.test_estimate import STUDY, fake_estimate, fake_probe, study


def test_an_estimate_keeps_the_load_it_was_probed_under(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 0.5))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # (the load average counts the machine's)
    est = estimate_study(study(), cores=2, probe=fake_probe(1e-4, 1e-3))
    assert est.load_avg == 1.5 and est.to_dict()["load_avg"] == 1.5
    assert est.to_dict()["caveat"] == est.caveat
    assert "load at the probe (load average 1.50 on 2 cores)" in est.caveat
    assert "left out" in est.caveat


def test_validate_estimate_prints_the_load_and_what_the_figure_leaves_out(
    tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_estimate(monkeypatch)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.25, 1.0, 0.5))
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    path = tmp_path / "est.toml"
    path.write_text(STUDY.format(seeds=1, tokens=8192, batch="8", sampler='kind = "grid"'))
    code, out, _ = cli("validate", path, "--estimate")
    assert code == 0
    assert "note: the figures are for the load at the probe (load average 0.25 on 1 core)" in out
    assert "Tune's per-trial cost (typical figures measured on 2 cores, not probed)" in out

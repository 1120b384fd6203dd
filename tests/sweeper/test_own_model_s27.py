"""A builder under muP with the head count fixed keeps its own attention scale: validate says so
(an adapters audit: the law and the Megatron export had called its attention muP's)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sweeper.study.spec import load_study

STUDY = """\
[sweep]
name = "heads_fixed"
seeds_per_point = 1

[model]
builder = "tests.own_builders:tiny"
parametrization = "{param}"
base_width = 32
context = 64
{heads}

[ladder]
widths = [32, 64]
depths = [1]
tokens = [16384]

[search]
lr = {{ values = [1e-3, 2e-3] }}
batch_size = 8

[sampler]
kind = "grid"
"""


def _warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture, **parts: str) -> list[str]:
    path = tmp_path / "study.toml"
    path.write_text(STUDY.format(**parts))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sweeper.study.spec"):
        load_study(path)
    return [r.getMessage() for r in caplog.records if "attention" in r.getMessage()]


def test_fixed_heads_beside_a_builder_under_mup_are_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (w,) = _warnings(tmp_path, caplog, param="mup", heads="heads = 2")
    assert "model.heads = 2 beside model.builder under mup" in w
    assert "d_head grows with width (16 to 32)" in w
    assert "set model.head_dim instead" in w


@pytest.mark.parametrize(("param", "heads"), [("mup", "head_dim = 16"), ("sp", "heads = 2")])
def test_head_size_fixed_or_sp_is_not_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, param: str, heads: str
) -> None:
    assert _warnings(tmp_path, caplog, param=param, heads=heads) == []

"""``sweeper laws show NAME``: a published law's text shows its formula with its constants."""

from __future__ import annotations

import pytest

import sweeper.cli as cli
from sweeper.fitting.laws import formula
from sweeper.recipe.published import PUBLISHED_NAMES, published_laws


@pytest.mark.parametrize("name", PUBLISHED_NAMES)
def test_laws_show_prints_every_published_law_s_formula(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A laws audit: `laws show kaplan` showed only its domain; its c0 and c1 were in --json
    alone."""
    assert cli.main(["laws", "show", name]) == 0
    out = capsys.readouterr().out
    for law in published_laws(name).values():
        assert f"{law.target} = {formula(law)}" in out
    if name == "kaplan":
        assert "0.003239 − 0.0001395·ln N" in out

"""The ``json`` format: the recipe itself (:meth:`~sweeper.recipe.recipe.Recipe.to_dict`, schema
``sweeper-recipe`` with its ``schema_version``), which ``sweeper export --recipe-json`` reads back.
It carries every setting."""

from __future__ import annotations

import json

from sweeper.recipe.export.carry import Missing
from sweeper.recipe.export.versions import FrameworkVersion
from sweeper.recipe.recipe import Recipe

__all__ = ["missing", "render"]


def missing(r: Recipe, fv: FrameworkVersion | None) -> list[Missing]:
    return []


def render(r: Recipe, fv: FrameworkVersion | None, miss: list[Missing]) -> str:
    return json.dumps(r.to_dict(), indent=2) + "\n"

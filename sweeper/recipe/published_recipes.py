"""Published training recipes (GPT-3, LLaMA-1/2, Pythia, Chinchilla, OLMo, DeepSeek) as data.

The facts live in ``sweeper/recipe/data/recipes.toml`` (one table per recipe, each with its ``source``);
this module loads and validates them. ``n_params`` is non-embedding; a recipe without it gets
12·L·d² and ``n_params_note`` says it was computed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Final

from sweeper.errors import SweeperError, TargetError
from sweeper.recipe.scale import block_n_params

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["PublishedRecipe", "get_recipe", "load_recipes"]

_REQUIRED: Final[dict[str, type | tuple[type, ...]]] = {
    "title": str,
    "family": str,
    "layers": int,
    "d_model": int,
    "heads": int,
    "context": int,
    "vocab": int,
    "tokens": (int, float),
    "lr": (int, float),
    "batch_tokens": (int, float),
    "source": str,
}
_OPTIONAL: Final[dict[str, type | tuple[type, ...]]] = {
    "n_params": (int, float),
    "n_params_note": str,
    "params_reported": (int, float),
    "batch_tokens_start": (int, float),
    "warmup": str,
    "schedule": str,
}


@dataclass(frozen=True)
class PublishedRecipe:
    """One published run: shape (layers, d_model, heads, context = training sequence length,
    vocab = the embedding's rows), non-embedding ``n_params``, ``tokens`` D, peak ``lr`` and
    ``batch_tokens`` (the final batch when it was ramped up from ``batch_tokens_start``), and
    where the numbers come from."""

    name: str
    title: str
    family: str
    layers: int
    d_model: int
    heads: int
    context: int
    vocab: int
    tokens: float
    lr: float
    batch_tokens: float
    n_params: float
    n_params_note: str
    source: str
    params_reported: float | None = None
    batch_tokens_start: float | None = None
    warmup: str = ""
    schedule: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _parse(name: str, raw: dict[str, Any]) -> tuple[PublishedRecipe | None, list[str]]:
    problems = []
    for key, typ in {**_REQUIRED, **_OPTIONAL}.items():
        if key in raw and (not isinstance(raw[key], typ) or isinstance(raw[key], bool)):
            problems.append(f"{name}.{key} must be {typ}, got {raw[key]!r}")
    problems += [f"{name}: missing {k}" for k in _REQUIRED if k not in raw]
    problems += [
        f"{name}: unknown key {k}" for k in raw if k not in _REQUIRED and k not in _OPTIONAL
    ]
    if problems:
        return None, problems
    kw = dict(raw)
    if "n_params" not in kw:
        kw["n_params"] = block_n_params(kw["d_model"], kw["layers"])
        kw["n_params_note"] = "computed: 12·L·d²"
    kw.setdefault("n_params_note", "published")
    for k in ("tokens", "lr", "batch_tokens", "n_params", "params_reported", "batch_tokens_start"):
        if kw.get(k) is not None:
            kw[k] = float(kw[k])
    if kw.get("params_reported") and kw["n_params"] > kw["params_reported"]:
        # (12·L·d² overcounts a model with grouped-query attention: give its counted n_params)
        return None, [
            f"{name}: non-embedding n_params {kw['n_params']:.4g} ({kw['n_params_note']}) exceeds "
            f"the {kw['params_reported']:.4g} parameters reported in all"
        ]
    return PublishedRecipe(name=name, **kw), []


@lru_cache(maxsize=1)
def load_recipes() -> dict[str, PublishedRecipe]:
    """All recipes of ``sweeper/recipe/data/recipes.toml`` by name, in file order."""
    text = (
        resources.files("sweeper.recipe").joinpath("data/recipes.toml").read_text(encoding="utf-8")
    )
    out: dict[str, PublishedRecipe] = {}
    problems: list[str] = []
    for name, raw in tomllib.loads(text).items():
        recipe, p = _parse(name, raw)
        problems += p
        if recipe is not None:
            out[name] = recipe
    if problems:  # the shipped file is ours: a problem here is a bug, reported in full
        raise SweeperError("sweeper/recipe/data/recipes.toml: " + "; ".join(problems))
    return out


def get_recipe(name: str) -> PublishedRecipe:
    """The recipe called ``name`` (case-insensitive); TargetError naming the known ones if none."""
    recipes = load_recipes()
    key = name.strip().lower()
    if key not in recipes:
        raise TargetError(f"unknown recipe {name!r}; known: {', '.join(recipes)}")
    return recipes[key]

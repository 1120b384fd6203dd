"""A :class:`~sweeper.recipe.recipe.Recipe` in the config format of the framework that will run it,
for a named framework version, with every setting the format cannot carry said.

One module per format, each ``missing(recipe, version) -> list[Missing]`` (what the format has no
key for, :mod:`.carry`) and ``render(recipe, version, missing) -> str`` with the exact keys of its
framework version (:mod:`.versions` names the versions, their loaders and the sources the keys
were read from):

- ``litgpt`` (:mod:`.litgpt`): ``litgpt pretrain --config`` YAML
- ``hf`` (:mod:`.hf`): ``transformers.TrainingArguments`` keyword arguments as JSON
- ``deepspeed`` (:mod:`.deepspeed`): DeepSpeed config JSON
- ``megatron`` (:mod:`.megatron`): Megatron-LM arguments, per Megatron-LM version
- ``torchtitan`` (:mod:`.torchtitan`): 0.3 argument file or 0.2 job TOML
- ``nanogpt`` (:mod:`.nanogpt`): a nanoGPT ``config/*.py``
- ``json`` (:mod:`.recipe_json`): the recipe itself

:func:`render` refuses (TargetError) an unknown format or framework version, a muP/CompleteP
recipe (or a non-AdamW optimizer) where the format cannot express it unless
``allow_inexpressible``, and a muP/CompleteP recipe whose LR law records another or no
parametrization unless ``force``. Another release of a known series ("0.19.1" for megatron 0.19,
checked at core_v0.19.0) is written for the checked release, said in a caution and the header.
Importing this package imports no exporter (``sweeper export --help`` reads :mod:`.versions`
only).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sweeper.errors import TargetError
from sweeper.recipe.export.versions import FrameworkVersion, resolve_version

if TYPE_CHECKING:
    from sweeper.recipe.export.carry import Missing
    from sweeper.recipe.recipe import Recipe

__all__ = [
    "FORMATS",
    "Rendered",
    "cannot_carry",
    "export_recipe",
    "missing_settings",
    "render",
]

#: format -> its module in this package
_MODULES: Final[dict[str, str]] = {
    "litgpt": "litgpt",
    "hf": "hf",
    "deepspeed": "deepspeed",
    "megatron": "megatron",
    "torchtitan": "torchtitan",
    "nanogpt": "nanogpt",
    "json": "recipe_json",
}
FORMATS: Final[tuple[str, ...]] = tuple(_MODULES)
#: formats whose files have no comments: what a header would say goes to ``Rendered.notes``
_NO_COMMENTS: Final[tuple[str, ...]] = ("hf", "deepspeed")


@dataclass(frozen=True)
class Rendered:
    """One export: the ``text`` to write, the framework ``version`` it targets (None for json),
    the settings it cannot carry (``missing``), the assumptions to check (``cautions``) and, for
    the formats without comments (hf, deepspeed), what their header would say (``notes``: the
    framework version, how to load the file, which LR it uses, and the module's ``notes``)."""

    format: str
    version: FrameworkVersion | None
    text: str
    missing: tuple[Missing, ...]
    cautions: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _module(fmt: str) -> Any:
    if fmt not in _MODULES:
        raise TargetError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    return importlib.import_module(f"sweeper.recipe.export.{_MODULES[fmt]}")


def _version(fmt: str, version: str | None) -> FrameworkVersion | None:
    _module(fmt)
    try:
        return resolve_version(fmt, version)
    except ValueError as e:
        raise TargetError(str(e)) from None


def missing_settings(recipe: Recipe, fmt: str, version: str | None = None) -> list[Missing]:
    """What format ``fmt`` (at ``version``, default the current release) cannot carry."""
    return list(_module(fmt).missing(recipe, _version(fmt, version)))


def cannot_carry(recipe: Recipe, fmt: str, version: str | None = None) -> list[str]:
    """The settings of ``recipe`` that format ``fmt`` has no key for, one line each (none for
    ``json``: the recipe itself)."""
    return [m.text for m in missing_settings(recipe, fmt, version)]


def _law_parametrization(recipe: Recipe) -> str | None:
    """The parametrization the recipe's LR law records (None: none recorded)."""
    from sweeper.recipe.export.carry import lr_law_conventions

    conv = lr_law_conventions(recipe)
    return None if conv is None else conv.parametrization


def _refuse(
    recipe: Recipe, fmt: str, missing: list[Missing], allow_inexpressible: bool, force: bool
) -> None:
    """TargetError (one line) when the export would change what the LR means."""
    p = recipe.parametrization
    law_p = _law_parametrization(recipe)
    if p != "sp" and law_p != p and not force:
        raise TargetError(
            f"the lr law records {law_p or 'no parametrization'}, the recipe is {p}: a {p} "
            f"export from it is refused (force=True, --force: export anyway)"
        )
    blocking = [m.text for m in missing if m.refuse]
    if blocking and not allow_inexpressible:
        raise TargetError(
            f"{fmt} cannot express {'; '.join(blocking)}: refused (allow_inexpressible=True, "
            "--allow-inexpressible: write the file anyway, with a warning)"
        )


def render(
    recipe: Recipe,
    fmt: str,
    version: str | None = None,
    *,
    allow_inexpressible: bool = False,
    force: bool = False,
) -> Rendered:
    """``recipe`` in format ``fmt`` for framework ``version`` (default: the current release),
    with what it cannot carry; refusals as in the module docstring."""
    mod = _module(fmt)
    fv = _version(fmt, version)
    missing = list(mod.missing(recipe, fv))
    _refuse(recipe, fmt, missing, allow_inexpressible, force)
    cautions = tuple(mod.cautions(recipe, fv)) if hasattr(mod, "cautions") else ()
    if fv is not None and fv.caution is not None:
        cautions = (fv.caution, *cautions)
    notes: tuple[str, ...] = ()
    if fmt in _NO_COMMENTS and fv is not None:
        from sweeper.recipe.export.header import lr_line

        notes = (f"written for {fv.framework}; load: {fv.load}", lr_line(recipe))
        notes += tuple(mod.notes(recipe, fv)) if hasattr(mod, "notes") else ()
    return Rendered(fmt, fv, mod.render(recipe, fv, missing), tuple(missing), cautions, notes)


def export_recipe(
    recipe: Recipe,
    fmt: str,
    version: str | None = None,
    *,
    allow_inexpressible: bool = False,
    force: bool = False,
) -> str:
    """``recipe`` as the text of format ``fmt`` (one of :data:`FORMATS`); see :func:`render`."""
    return render(recipe, fmt, version, allow_inexpressible=allow_inexpressible, force=force).text

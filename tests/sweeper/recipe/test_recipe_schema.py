"""The recipe JSON: schema and version, unknown keys refused by name, the min LR stored as a ratio
(an edited recipe whose min_lr disagrees is refused), derived values checked, the form before the
schema (no schema_version) still read, lr_point and optimizer with their defaults."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from sweeper.errors import TargetError
from sweeper.recipe.hardware import Hardware
from sweeper.recipe.published import published_laws
from sweeper.recipe.recipe import (
    DERIVED,
    FIELD_DOCS,
    RECIPE_SCHEMA_VERSION,
    Recipe,
    recipe_from_dict,
    recipe_json_schema,
)
from sweeper.recipe.recommend import recommend
from sweeper.recipe.target import Target


@pytest.fixture(scope="module")
def recipe() -> Recipe:
    target = Target(width=4096, depth=30, heads=32, vocab=102400, context=4096, tokens=2e12)
    return recommend(published_laws("deepseek"), target, Hardware(gpus=64, micro_batch=2))


@pytest.fixture
def d(recipe: Recipe) -> dict[str, Any]:
    return json.loads(json.dumps(recipe.to_dict()))


def test_schema_and_version(d: dict[str, Any], recipe: Recipe) -> None:
    assert list(d)[:2] == ["schema", "schema_version"]
    assert d["schema"] == "sweeper-recipe" and d["schema_version"] == RECIPE_SCHEMA_VERSION == 4
    assert d["lr_point"] == d["lr"]["value"] and d["optimizer"] == "adamw"
    assert d["min_lr"] == d["lr"]["value"] * d["min_lr_ratio"]
    assert d["base_head_dim"] is None
    assert recipe_from_dict(d) == recipe
    assert set(d) <= set(FIELD_DOCS)  # every key documented


def test_json_schema_validates_the_form(d: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = recipe_json_schema()
    jsonschema.validate(d, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**d, "not_a_key": 1}, schema)


def _double_batch(d: dict[str, Any]) -> None:
    """The edit an audit made: the global batch and the accumulation doubled, the warmup's tokens
    (derived, refused when stale) dropped, batch_tokens and total_steps left as they were."""
    d.update(global_batch_sequences=2 * d["global_batch_sequences"])
    d.update(grad_accum_steps=2 * d["grad_accum_steps"])
    del d["warmup_tokens"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(not_a_recipe_key=1), "unknown key not_a_recipe_key"),
        (lambda d: d.update(a=1, b=2), "unknown keys a, b"),
        (lambda d: d["lr"].update(val=1), "unknown key lr.val"),
        (lambda d: d["hardware"].update(gpu=8), "unknown key hardware.gpu"),
        (lambda d: d.update(schema_version=5), "schema_version 5 is newer than this Sweeper"),
        (lambda d: d.update(schema="other"), "schema 'other' is not 'sweeper-recipe'"),
        (lambda d: d["lr"].update(value=d["lr"]["value"] * 2), "min_lr .* disagrees with lr"),
        (lambda d: d.update(min_lr_ratio=0.2), "min_lr .* disagrees with lr .* × min_lr_ratio 0.2"),
        (lambda d: d.update(warmup_tokens=1), "warmup_tokens 1 disagrees with the value derived"),
        (lambda d: d.update(hidden_init_std=0.5), "hidden_init_std 0.5 disagrees"),
        (lambda d: d["rampup"].update(increments=3), "rampup.increments 3 disagrees"),
        (lambda d: d.update(total_steps="many"), "'total_steps' must be integer, got str"),
        # (an audit: the batch doubled alone had exported twice D as litgpt's max_tokens)
        (_double_batch, r"batch_tokens .* disagrees with global_batch_sequences \d+ × seq_len"),
        (lambda d: d.update(total_steps=50000), r"total_steps 50000 disagrees with tokens 2e\+12"),
        # (a review: NaN, inf and a zero batch were internal errors in the step count)
        (lambda d: d.update(tokens=float("nan")), "tokens must be positive and finite, got nan"),
        (lambda d: d.update(tokens=float("inf")), "tokens must be positive and finite, got inf"),
        (lambda d: d.update(seq_len=0), "seq_len and global_batch_sequences must be >= 1"),
        # (an API audit: exported as lr: .nan and lr: -1.0, a NaN blamed on min_lr; warmup -5)
        (lambda d: d["lr"].update(value=float("nan")), "lr must be positive and finite, got nan"),
        (lambda d: d["lr"].update(value=-1.0), "lr must be positive and finite, got -1.0"),
        (lambda d: d.update(warmup_steps=-5), "warmup_steps must be between 0 and total_steps"),
        # (a CLI audit: width 0 divided by zero in an export, heads 7 of 4096 and beta1 5 passed)
        (lambda d: d.update(width=0), "recipe: width must be >= 1, got 0"),
        (lambda d: d.update(heads=7), "heads must be >= 1 and divide width, got 7"),
        (lambda d: d.update(adam_beta1=5.0), "adam_beta1 must be in \\[0, 1\\), got 5.0"),
        (lambda d: d.update(parametrization="bogus"), "parametrization must be one of sp, mup"),
        (lambda d: d.update(optimizer="lamb"), "optimizer 'lamb' is not one of adamw"),
        (lambda d: d.pop("seq_len"), "recipe JSON lacks seq_len"),
        (lambda d: d.update(lr=3), "malformed 'lr'"),
        # (a robustness audit: a TypeError deep in the recipe, an internal error)
        (lambda d: d["lr"].update(value="abc"), "malformed 'lr': value must be number, got 'abc'"),
    ],
)
def test_refused_with_one_line(d: dict[str, Any], edit, message: str) -> None:
    edit(d)
    with pytest.raises(TargetError, match=message) as e:
        recipe_from_dict(d)
    assert "\n" not in str(e.value)


def test_edited_lr_without_min_lr_follows_the_ratio(d: dict[str, Any], recipe: Recipe) -> None:
    d["lr"]["value"] *= 2
    del d["min_lr"]
    r = recipe_from_dict(d)
    assert r.min_lr == r.lr.value * r.min_lr_ratio == pytest.approx(2 * recipe.min_lr)
    assert r.lr_point == recipe.lr_point  # the law's point estimate is its own field


def test_old_form_without_schema_version_is_read(d: dict[str, Any], recipe: Recipe) -> None:
    old = copy.deepcopy(d)
    for k in ("schema", "schema_version", "lr_point", "optimizer", "base_head_dim"):
        del old[k]
    r = recipe_from_dict(old)
    assert r == recipe and r.lr_point == r.lr.value and r.optimizer == "adamw"


def test_lr_point_and_optimizer_round_trip(recipe: Recipe) -> None:
    r = dataclasses.replace(recipe, lr_point=recipe.lr.value * 0.8, optimizer="muon")
    d = json.loads(json.dumps(r.to_dict()))
    assert d["lr_point"] == recipe.lr.value * 0.8 and d["optimizer"] == "muon"
    assert recipe_from_dict(d) == r


def test_constructor_checks_the_min_lr(recipe: Recipe) -> None:
    with pytest.raises(TargetError, match="disagrees"):
        dataclasses.replace(recipe, min_lr=recipe.min_lr * 1.01)
    assert dataclasses.replace(recipe, min_lr=recipe.lr.value * recipe.min_lr_ratio) == recipe
    assert set(DERIVED) == {
        "min_lr", "warmup_tokens", "hidden_init_std", "memory_gb_per_gpu", "train_flops"
    }  # fmt: skip


def test_non_adamw_optimizer_is_refused_where_not_carried(recipe: Recipe) -> None:
    from sweeper.recipe.export import export_recipe

    r = dataclasses.replace(recipe, optimizer="muon")
    for fmt in ("litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt"):
        with pytest.raises(TargetError, match=f"{fmt} cannot express optimizer muon"):
            export_recipe(r, fmt)
        assert "optimizer muon" in export_recipe(r, fmt, allow_inexpressible=True) or fmt in (
            "hf", "deepspeed",
        )  # fmt: skip
    assert json.loads(export_recipe(r, "json"))["optimizer"] == "muon"


def test_a_recipes_repr_is_one_short_line(recipe: Recipe) -> None:
    """The dataclass repr ran to 9,000 characters in a log line or a printed list (an audit)."""
    text = repr(recipe)
    assert "\n" not in text and len(text) < 200 and text.startswith("<Recipe lr ")
    assert str(recipe).count("\n") > 10  # (the table stays str's)

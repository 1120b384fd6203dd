"""The recipe's schedule follows the LR law's measured one (or an override), its shape is the
proxies' lr_at, and every export writes it where its framework runs it as the proxies ran it, or
declares (and refuses) it where it cannot."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
import yaml

from proxy_models.hparams import HParams, lr_at
from sweeper import cli
from sweeper.errors import TargetError
from sweeper.fitting.laws import PowerLaw
from sweeper.recipe.export import export_recipe, missing_settings, render
from sweeper.recipe.hardware import Hardware
from sweeper.recipe.published import published_laws
from sweeper.recipe.recipe import Recipe, recipe_from_dict, recipe_json_schema
from sweeper.recipe.recommend import recommend
from sweeper.recipe.schedule import decay_start, recipe_lr
from sweeper.recipe.table import recipe_rows
from sweeper.recipe.target import Target
from tests.sweeper.helpers import tokens_lr_law

TARGET = Target(width=1024, depth=12, heads=16, context=1024, tokens=2e10)
HW = Hardware(gpus=4, micro_batch=4)


def lr_law(**conv: Any) -> PowerLaw:
    return tokens_lr_law(**conv)


def make(law: PowerLaw | None = None, **kw: Any) -> Recipe:
    laws = {"lr": law} if law is not None else published_laws("deepseek")
    return recommend(laws, TARGET, HW, rampup=kw.pop("rampup", False), **kw)


WSD = lr_law(schedule="wsd", min_lr_ratio=0.0, decay_fraction=0.25)


def _schedule_warning(r: Recipe) -> str:
    return next((w for w in r.warnings if "LR of the lr law" in w), "")


# ---- the recipe's schedule -------------------------------------------------------------------
def test_the_recipe_runs_the_schedule_the_lr_law_was_measured_under() -> None:
    r = make(WSD)
    assert (r.schedule, r.min_lr_ratio, r.decay_fraction, r.min_lr) == ("wsd", 0.0, 0.25, 0.0)
    assert "schedule" not in _schedule_warning(r) and "decay" not in _schedule_warning(r)
    lin = make(lr_law(schedule="linear", min_lr_ratio=0.05))
    assert (lin.schedule, lin.min_lr_ratio, lin.decay_fraction) == ("linear", 0.05, None)
    const = make(lr_law(schedule="constant", min_lr_ratio=0.1))
    assert (const.schedule, const.min_lr_ratio, const.min_lr) == ("constant", 1.0, const.lr.value)


@pytest.mark.parametrize("schedule", [None, "searched", "unknown"])
def test_a_law_without_a_runnable_schedule_gives_the_cosine(schedule: str | None) -> None:
    r = make(lr_law(schedule=schedule, min_lr_ratio=0.3))
    assert (r.schedule, r.min_lr_ratio, r.decay_fraction) == ("cosine", 0.1, None)
    assert make().schedule == "cosine"  # a published law


def test_an_imported_wsd_without_its_decay_fraction_gets_the_default_and_a_warning() -> None:
    r = make(lr_law(schedule="wsd", min_lr_ratio=0.1, decay_fraction=None))
    assert (r.schedule, r.decay_fraction) == ("wsd", 0.2)
    assert "WSD decay of unrecorded length" in _schedule_warning(r)


def test_an_imported_decay_without_its_min_lr_gets_the_default_and_a_warning() -> None:
    """import --convention schedule=wsd leaves the min LR unrecorded: the recipe's 10% was said
    of nothing (a review)."""
    r = make(lr_law(schedule="wsd", min_lr_ratio=None, decay_fraction=0.2))
    assert (r.schedule, r.min_lr_ratio) == ("wsd", 0.1)
    assert "a decay to an unrecorded min LR" in _schedule_warning(r)


def test_an_override_replaces_the_law_and_the_warning_says_what_it_was_measured_under() -> None:
    r = make(WSD, schedule="cosine")
    assert (r.schedule, r.min_lr_ratio, r.decay_fraction) == ("cosine", 0.0, None)
    assert "a wsd schedule" in _schedule_warning(r)
    longer = make(WSD, decay_fraction=0.4, min_lr_ratio=0.1)
    assert (longer.schedule, longer.decay_fraction, longer.min_lr_ratio) == ("wsd", 0.4, 0.1)
    w = _schedule_warning(longer)
    assert "WSD decay over the last 25% of steps" in w and "decay to 0% of peak" in w


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"schedule": "cosine", "decay_fraction": 0.2}, "decay_fraction 0.2 is a WSD schedule's"),
        ({"schedule": "constant", "min_lr_ratio": 0.1}, "a constant schedule holds the peak"),
        ({"schedule": "step"}, "schedule 'step' is not one of"),
        ({"decay_fraction": 0.0}, "decay_fraction in \\(0, 1\\]"),
        ({"min_lr_ratio": 1.5}, "min_lr_ratio must be in \\[0, 1\\]"),
    ],
)
def test_bad_overrides_are_refused(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(TargetError, match=match):
        make(WSD, **kw)


def test_the_recipe_lr_is_the_proxies_lr_at() -> None:
    r = make(WSD)
    start = decay_start(r)
    df_steps = round(0.25 * r.total_steps)
    assert start == r.total_steps - df_steps > r.warmup_steps
    hp = HParams(lr=r.lr.value, warmup=r.warmup_steps, schedule="wsd", min_lr_ratio=0.0,
                 decay_fraction=0.25)  # fmt: skip
    for step in (0, r.warmup_steps - 1, start - 1, start, start + 7, r.total_steps - 1):
        assert recipe_lr(r, step) == lr_at(hp, step, r.total_steps)
    assert recipe_lr(r, start) == r.lr.value and recipe_lr(r, r.total_steps - 1) == 0.0


def test_json_and_table_carry_the_schedule() -> None:
    r = make(WSD)
    d = r.to_dict()
    assert (d["schedule"], d["decay_fraction"]) == ("wsd", 0.25)
    assert recipe_from_dict(json.loads(json.dumps(d))) == r
    props = recipe_json_schema()["properties"]
    assert "decay_fraction" in props and "wsd" in props["schedule"]["description"]
    bad = dict(d, decay_fraction=None)
    with pytest.raises(TargetError, match="a WSD schedule needs decay_fraction"):
        recipe_from_dict(bad)
    row = next(row for row in recipe_rows(r) if row[0] == "schedule")
    assert row[1:] == ("wsd", "WSD: peak, then linear to 0% over the last 25% of steps")


# ---- the exports -----------------------------------------------------------------------------
def _megatron(r: Recipe) -> dict[str, str]:
    argv = shlex.split(export_recipe(r, "megatron"), comments=True)
    out, i = {}, 0
    while i < len(argv):
        has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        out[argv[i]] = argv[i + 1] if has_value else ""
        i += 2 if has_value else 1
    return out


def test_megatron_writes_every_schedule() -> None:
    r = make(WSD)
    a = _megatron(r)
    assert a["--lr-decay-style"] == "WSD" and a["--lr-wsd-decay-style"] == "linear"
    assert int(a["--lr-wsd-decay-iters"]) == r.total_steps - decay_start(r)
    ramp = make(WSD, rampup=True, global_batch=1024)
    b = _megatron(ramp)
    assert ramp.rampup is not None and "--lr-wsd-decay-iters" not in b
    steps = ramp.total_steps - decay_start(ramp)
    assert int(b["--lr-wsd-decay-samples"]) == steps * ramp.global_batch_sequences
    for law, style in ((lr_law(schedule="linear"), "linear"), (lr_law(schedule="constant"),
                                                               "constant")):  # fmt: skip
        assert _megatron(make(law))["--lr-decay-style"] == style
    assert not [m for m in missing_settings(r, "megatron") if m.setting == "schedule"]


def test_hf_writes_warmup_stable_decay_linear_and_constant() -> None:
    r = make(lr_law(schedule="wsd", min_lr_ratio=0.1, decay_fraction=0.25))
    doc = json.loads(export_recipe(r, "hf"))
    assert doc["lr_scheduler_type"] == "warmup_stable_decay"
    assert doc["lr_scheduler_kwargs"] == {
        "num_decay_steps": r.total_steps - decay_start(r),
        "decay_type": "linear",
        "min_lr_ratio": 0.1,
    }
    said = [m for m in missing_settings(r, "hf") if m.setting == "schedule"]
    assert (
        len(said) == 1
        and not said[0].refuse
        and "warms up linearly from the min LR" in said[0].text
    )
    to_zero = json.loads(export_recipe(make(lr_law(schedule="linear", min_lr_ratio=0.0)), "hf"))
    assert to_zero["lr_scheduler_type"] == "linear" and "lr_scheduler_kwargs" not in to_zero
    lin = make(lr_law(schedule="linear", min_lr_ratio=0.1))
    kw = json.loads(export_recipe(lin, "hf"))["lr_scheduler_kwargs"]
    assert kw["num_decay_steps"] == lin.total_steps - lin.warmup_steps
    const = json.loads(export_recipe(make(lr_law(schedule="constant")), "hf"))
    assert const["lr_scheduler_type"] == "constant_with_warmup"


def test_torchtitan_writes_decay_ratio_and_type() -> None:
    r = make(WSD)
    for version in ("0.2", "0.3"):
        text = export_recipe(r, "torchtitan", version)
        if version == "0.2":
            sched = yaml.safe_load(
                text.split("[lr_scheduler]")[1].split("[")[0].replace(" = ", ": ")
            )
        else:
            sched = {
                line.split()[0].removeprefix("--lr_scheduler."): yaml.safe_load(line.split()[1])
                for line in text.splitlines()
                if line.startswith("--lr_scheduler.")
            }
        assert sched["decay_type"] == "linear" and sched["decay_ratio"] == 0.25
        assert sched["min_lr_factor"] == 0.0
    const = export_recipe(make(lr_law(schedule="constant")), "torchtitan")
    assert "--lr_scheduler.min_lr_factor 1.0" in const and "decay_ratio" not in const


def test_deepspeed_linear_and_constant_and_a_refused_wsd() -> None:
    lin = make(lr_law(schedule="linear", min_lr_ratio=0.1))
    s = json.loads(export_recipe(lin, "deepspeed"))["scheduler"]
    assert s["type"] == "WarmupDecayLR"
    assert s["params"]["warmup_max_lr"] == lin.lr.value
    assert s["params"]["warmup_min_lr"] == lin.min_lr
    assert s["params"]["total_num_steps"] == lin.total_steps
    const = json.loads(export_recipe(make(lr_law(schedule="constant")), "deepspeed"))
    assert const["scheduler"]["type"] == "WarmupLR"
    assert "warmup_max_lr" not in const["scheduler"]["params"]  # the optimizer's lr
    with pytest.raises(TargetError, match="deepspeed cannot express schedule WSD"):
        export_recipe(make(WSD), "deepspeed")
    forced = render(make(WSD), "deepspeed", allow_inexpressible=True)
    assert json.loads(forced.text)["scheduler"]["type"] == "WarmupCosineLR"


@pytest.mark.parametrize("fmt", ["litgpt", "nanogpt"])
def test_cosine_only_formats_refuse_wsd_and_linear_and_run_constant(fmt: str) -> None:
    for law in (WSD, lr_law(schedule="linear")):
        with pytest.raises(TargetError, match="--allow-inexpressible"):
            export_recipe(make(law), fmt)
    const = make(lr_law(schedule="constant"))
    assert not [m for m in missing_settings(const, fmt) if m.setting == "schedule"]
    body = [ln for ln in export_recipe(const, fmt).splitlines() if not ln.startswith("#")]
    min_lr = next(ln for ln in body if ln.strip().startswith("min_lr"))
    assert float(min_lr.replace("=", ":").split(":")[1]) == const.lr.value  # cosine to the peak


# ---- the command line ------------------------------------------------------------------------
def test_cli_schedule_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--law", "deepseek", "--width", "1024", "--depth", "12", "--heads", "16",
            "--tokens", "2e10", "--no-rampup"]  # fmt: skip
    assert cli.main(["recommend", *args, "--json", "--schedule", "wsd",
                     "--decay-fraction", "0.3", "--min-lr-ratio", "0"]) == 0  # fmt: skip
    d = json.loads(capsys.readouterr().out)
    assert (d["schedule"], d["decay_fraction"], d["min_lr_ratio"]) == ("wsd", 0.3, 0.0)
    assert cli.main(["export", *args, "--format", "megatron", "--schedule", "linear"]) == 0
    assert "--lr-decay-style linear" in capsys.readouterr().out
    # warmup, z-loss and init std as the proxies that measured the LR ran (an export audit)
    assert cli.main(["export", *args, "--format", "megatron", "--warmup-steps", "1234",
                     "--z-loss", "0", "--init-std", "0.02"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "--lr-warmup-iters 1234" in out and "--init-method-std 0.02" in out


def test_cli_refuses_schedule_options_with_a_recipe_json(tmp_path: Any) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(make(WSD).to_dict()), encoding="utf-8")
    rc = cli.main(["export", "--recipe-json", str(path), "--format", "json", "--schedule", "wsd"])
    assert rc != 0


def test_a_version_2_recipe_without_a_decay_fraction_still_reads() -> None:
    """Version 2 wrote no decay_fraction (every recipe was a cosine then)."""
    d = make().to_dict()
    d.pop("decay_fraction")
    d["schema_version"] = 2
    back = recipe_from_dict(d)
    assert (back.schedule, back.decay_fraction) == ("cosine", None)

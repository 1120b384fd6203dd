"""The ``json`` export (the recipe itself) and ``export --recipe-json`` (issue #15 item 4):
the recipe JSON names its schema and version, an unknown key is refused, and an edited ``lr``
keeps the min LR at ``lr × min_lr_ratio`` in every format (or is refused). Runs in the project
venv; reads only the files make_inputs.py wrote."""

from __future__ import annotations

import json
import math
import shlex

import harness as h
import pytest

FORMAT = "json"
ROWS = {
    "": {"framework": "Sweeper recipe JSON", "loader": "json.load + `sweeper export --recipe-json`"}
}
CASES = h.cases()
SCHEMA_KEYS = ("schema", "$schema", "schema_version", "format_version", "version")


@pytest.mark.parametrize("case", CASES)
def test_loads(case: str) -> None:
    out, err, rc = h.export(case, "json")
    assert rc == 0, err
    assert json.loads(out) == h.recipe(case)


@pytest.mark.parametrize("case", CASES)
def test_names_schema_and_version(case: str) -> None:
    r = h.recipe(case)
    keys = [
        k for k in r if k in ("schema", "$schema", "schema_version", "format_version", "version")
    ]
    assert keys, (
        f"{case}: the recipe JSON names no schema or version (no key {', '.join(SCHEMA_KEYS)})"
    )


@pytest.mark.parametrize("case", CASES)
def test_unknown_key_refused(case: str) -> None:
    base = h.inputs_dir() / case / "recipe_json" / "unknown_key"
    rc = int(base.with_name("unknown_key.rc").read_text().strip())
    assert rc != 0, (
        f"{case}: `export --recipe-json` accepted a recipe with an unknown key 'not_a_recipe_key'"
    )


def _min_lr(fmt: str, text: str) -> tuple[float | None, float | None]:
    """(peak, min) LR as written in ``text`` of format ``fmt``."""
    if fmt == "json":
        d = json.loads(text)
        return d["lr"]["value"], d["min_lr"]
    if fmt == "megatron":
        a = shlex.split(text, comments=True)
        return float(a[a.index("--lr") + 1]), float(a[a.index("--min-lr") + 1])
    if fmt == "nanogpt":
        g: dict = {}
        exec(text, g)
        return g["learning_rate"], g["min_lr"]
    if fmt == "hf":
        d = json.loads(text)
        kw = d.get("lr_scheduler_kwargs") or {}
        ratio = kw.get("min_lr_rate", kw.get("min_lr_ratio", math.nan))  # (warmup_stable_decay)
        if d["lr_scheduler_type"] == "linear":
            ratio = 0.0  # get_linear_schedule_with_warmup decays to 0
        return d["learning_rate"], kw.get("min_lr", d["learning_rate"] * ratio)
    if fmt == "deepspeed":
        d = json.loads(text)
        lr, params = d["optimizer"]["params"]["lr"], d["scheduler"]["params"]
        if d["scheduler"]["type"] == "WarmupDecayLR":  # absolute, from warmup_max_lr to min
            assert params["warmup_max_lr"] == lr
            return lr, params["warmup_min_lr"]
        return lr, lr * params["cos_min_ratio"]
    if fmt == "litgpt":
        import yaml

        d = yaml.safe_load(text)
        return d["optimizer"]["init_args"]["lr"], d["train"]["min_lr"]
    return None, None


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", ["json", "megatron", "nanogpt", "hf", "deepspeed", "litgpt"])
def test_edited_lr_moves_min_lr(case: str, fmt: str) -> None:
    r = h.recipe(case)
    d = h.inputs_dir() / case / "recipe_json"
    rc = int((d / f"edited_lr.{fmt}.rc").read_text().strip())
    if rc != 0:
        return  # refused: acceptable
    peak, lo = _min_lr(fmt, (d / f"edited_lr.{fmt}.out").read_text())
    assert peak == pytest.approx(2 * r["lr"]["value"], rel=1e-12)
    assert lo == pytest.approx(peak * r["min_lr_ratio"], rel=1e-9), (
        f"{case}: {fmt}: peak LR edited to {peak:.6g} but min LR {lo:.6g} != peak × min_lr_ratio "
        f"{r['min_lr_ratio']} = {peak * r['min_lr_ratio']:.6g}"
    )


def _probe(case: str, name: str) -> tuple[str, str, int]:
    base = h.inputs_dir() / case / "recipe_json" / name
    out = base.with_name(name + ".out").read_text(encoding="utf-8")
    err = base.with_name(name + ".err").read_text(encoding="utf-8")
    return out, err, int(base.with_name(name + ".rc").read_text().strip())


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", ["json", "megatron", "nanogpt", "hf", "deepspeed", "litgpt"])
def test_edited_lr_without_min_lr_is_exported(case: str, fmt: str) -> None:
    """An edited ``lr`` with the derived ``min_lr`` dropped: every format exports it, with the
    min LR at ``lr × min_lr_ratio``."""
    r = h.recipe(case)
    out, err, rc = _probe(case, f"edited_lr_no_min.{fmt}")
    assert rc == 0, f"{case}: {fmt}: exit {rc}: {err.strip()[-300:]}"
    peak, lo = _min_lr(fmt, out)
    assert peak == pytest.approx(2 * r["lr"]["value"], rel=1e-12)
    assert lo == pytest.approx(peak * r["min_lr_ratio"], rel=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_form_before_schema_version_is_read(case: str) -> None:
    out, err, rc = _probe(case, "old_form")
    assert rc == 0, err
    assert json.loads(out) == h.recipe(case)


@pytest.mark.parametrize("case", CASES)
def test_unknown_framework_version_refused(case: str) -> None:
    out, err, rc = _probe(case, "unknown_version")
    assert rc == 2 and out == "", err
    assert err.strip().startswith("sweeper: error: unknown --framework-version '9.9' for megatron")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    "fmt", ["litgpt", "hf", "deepspeed", "torchtitan", "nanogpt", "megatron@0.16"]
)
def test_mup_refused_without_allow_inexpressible(case: str, fmt: str) -> None:
    """A muP recipe to a format that cannot express muP: one line, exit 2, nothing written."""
    out, err, rc = _probe(case, f"no_allow.{fmt}")
    if h.recipe(case)["parametrization"] == "sp":  # (a schedule the format cannot run: refused)
        assert rc == 0 or "cannot express schedule" in err, err
        return
    assert rc == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--allow-inexpressible" in lines[0], err

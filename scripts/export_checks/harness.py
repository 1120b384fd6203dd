"""What the tests in tests/exports/ share: the inputs made by make_inputs.py, one cached load per
(file, loader), and the check that a quantity either agrees with the recipe or is a documented
limitation that the export declares. Standard library only (runs in every framework venv)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from common import KEYS, View, compare, declares, header_text, ramp_steps_said

#: quantity -> group named in the limitation tables and in the declarations
GROUP: dict[str, str] = {
    "rampup_batch_start": "rampup", "rampup_batch_mid": "rampup", "rampup_batch_end": "rampup",
    "n_layer": "model_shape", "width": "model_shape", "heads": "model_shape", "vocab": "vocab",
    "init_std": "init_std", "z_loss": "z_loss", "parametrization": "parametrization",
    "mup_base_width": "parametrization", "seq_len": "seq_len", "eps": "eps",
    "zero_stage": "zero_stage", "precision": "precision",
}  # fmt: skip

#: the words a declaration of a group must use (common.DECLARE_WORDS plus these)
EXTRA_WORDS = {"vocab": ("vocab",)}

#: test name -> quantities it compares
CHECKS: dict[str, tuple[str, ...]] = {
    "lr_schedule": ("peak_lr", "min_lr", "lr_warmup_end", "lr_stable_mid", "lr_decay_start",
                    "lr_mid", "lr_end", "total_steps"),
    "batch": ("global_batch", "micro_batch", "grad_accum", "data_parallel", "seq_len"),
    "optimizer": ("beta1", "beta2", "eps", "weight_decay", "grad_clip"),
    "precision": ("precision",),
    "rampup": ("rampup_batch_start", "rampup_batch_mid", "rampup_batch_end"),
    "architecture": ("parallel_residual", "linear_bias"),
    "model_shape": ("n_layer", "width", "heads", "vocab"),
    "init_std": ("init_std",),
    "z_loss": ("z_loss",),
    "parametrization": ("parametrization", "mup_base_width"),
    "zero_stage": ("zero_stage",),
}
assert all(k in KEYS for ks in CHECKS.values() for k in ks)


def inputs_dir() -> Path:
    d = os.environ.get("SWEEPER_EXPORT_INPUTS")
    if not d:
        raise RuntimeError(
            "SWEEPER_EXPORT_INPUTS is not set: run scripts/check_exports.sh, or "
            "`python scripts/export_checks/make_inputs.py DIR` in the project venv and point it there"
        )
    return Path(d)


def cases() -> list[str]:
    try:
        d = inputs_dir()
    except RuntimeError:
        return []
    return sorted(p.name for p in d.iterdir() if (p / "recipe.json").is_file())


@cache
def recipe(case: str) -> dict[str, Any]:
    return json.loads((inputs_dir() / case / "recipe.json").read_text(encoding="utf-8"))


@cache
def export(case: str, name: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of the exporter for ``name`` (``fmt`` or ``fmt@version``)."""
    base = inputs_dir() / case / name
    out = base.with_name(base.name + ".out").read_text(encoding="utf-8")
    err = base.with_name(base.name + ".err").read_text(encoding="utf-8")
    rc = int(base.with_name(base.name + ".rc").read_text(encoding="utf-8").strip() or "0")
    return out, err, rc


class ExportFailed(AssertionError):
    pass


def refused_schedule(case: str, name: str, runs: tuple[str, ...]) -> bool:
    """True when the recipe's schedule is not one the format ``runs`` as the proxies ran it, after
    asserting that the export refused it (exit status != 0, naming the schedule and
    --allow-inexpressible); False when the format runs it (the numbers are then checked)."""
    schedule = recipe(case).get("schedule") or "cosine"
    if schedule in runs:
        return False
    _out, err, rc = export(case, name)
    said = err.lower()
    assert rc != 0 and "schedule" in said and "--allow-inexpressible" in said, (
        f"{case} / {name}: a {schedule} recipe must be refused (the format runs "
        f"{', '.join(runs)} only); exit {rc}: {err.strip()[-400:]}"
    )
    return True


_LOADS: dict[tuple[str, str, str], View | BaseException] = {}


def load(
    case: str, name: str, loader: Callable[[str, dict[str, Any]], View], key: str = ""
) -> View:
    """The framework's view of export ``name`` of ``case``, loaded once; the loader's exception
    (or the exporter's failure) is raised again to every test that asks."""
    k = (
        case,
        name,
        key or getattr(loader, "__module__", "") + "." + getattr(loader, "__qualname__", ""),
    )
    if k not in _LOADS:
        out, err, rc = export(case, name)
        if rc != 0:
            _LOADS[k] = ExportFailed(
                f"`sweeper export` for {name} exited {rc}: {err.strip()[-600:]}"
            )
        else:
            try:
                _LOADS[k] = loader(out, recipe(case))
            except Exception as e:  # the framework's own error is the result
                _LOADS[k] = ExportFailed(
                    f"the framework's loader rejected {name}: {type(e).__name__}: {str(e)[:800]}"
                )
    v = _LOADS[k]
    if isinstance(v, BaseException):
        raise v
    return v


def declared_text(case: str, name: str) -> str:
    out, err, _ = export(case, name)
    return header_text(out) + "\n" + err.lower()


def _declares(text: str, group: str) -> bool:
    if group in EXTRA_WORDS:
        from common import DECLARE_WORDS

        DECLARE_WORDS.setdefault(group, EXTRA_WORDS[group])
    return declares(text, group)


def ramp_said(case: str, name: str, view: View) -> list[str]:
    """Where the framework reports the iterations it runs with the batch ramp-up (Megatron:
    update_train_iters), the disagreements with those the file's header states (an export
    audit: Megatron-LM core 0.19 runs 223,020, the header said 223,019)."""
    got = (view.rampup_total_steps, view.rampup_warmup_steps)
    if got == (None, None):
        return []
    said = ramp_steps_said(header_text(export(case, name)[0]))
    if not said:
        return [f"rampup iterations: the framework runs {got}, the file says none"]
    return [
        f"rampup iterations (total, warmup end): framework {got} != the file's {s}"
        for s in dict.fromkeys(said)
        if s != got
    ]


def check(case: str, name: str, view: View, check_name: str, limits: dict[str, str]) -> None:
    """Assert that the quantities of ``check_name`` agree with the recipe, or, for a group in
    ``limits`` (the format's documented limitations), that the export declares it."""
    r = recipe(case)
    keys = CHECKS[check_name]
    if check_name == "rampup" and not r.get("rampup"):
        return
    bad = compare(view, r, keys)
    problems = []
    text = declared_text(case, name)
    for line in bad:
        key = line.split(":", 1)[0]
        group = GROUP.get(key)
        if group in limits:
            if not _declares(text, group):
                problems.append(f"{line} (limitation '{group}' not declared by the export)")
        else:
            problems.append(line)
    if check_name == "rampup":
        problems += ramp_said(case, name, view)
    if problems:
        raise AssertionError(
            f"{case} / {name} [{view.framework}; {view.loader}]:\n  " + "\n  ".join(problems)
        )

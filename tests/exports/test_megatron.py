"""Megatron-LM reads the ``megatron`` export, per Megatron version.

< 0.18 (0.16, 0.17): flags checked against the flag table of the pinned commit, batch and
ramp-up from megatron-core 0.16.1's own num_microbatches_calculator, LR from its
OptimizerParamScheduler. >= 0.18 (0.18, 0.19, and the default export, which targets the current
release): flags and the step batch-size schedule checked against a table written from the pinned
Megatron-LM commit ("table-checked, not loaded"), LR from megatron-core 0.16.1's scheduler
(``get_lr`` is unchanged up to core_v0.19.0). Run on the recipe's data-parallel world size.
"""

from __future__ import annotations

import functools
import re
import shlex

import pytest

pytest.importorskip("megatron.core.num_microbatches_calculator")
import harness as h
import load_megatron as lm

FORMAT = "megatron"
CURRENT = "0.19"  # the default export targets the current release
VERSIONS = ("0.16", "0.17", "0.18", "0.19", "default")


#: what is not loaded, per row (summary.py prints it beside the result)
NOT_LOADED_BELOW_018 = (
    "Megatron-LM's parse_args is not on PyPI: flags checked against the table read off it at the "
    "commit; batch, ramp-up and LR from megatron-core 0.16.1's own calculator and scheduler"
)
NOT_LOADED_FROM_018 = (
    "Megatron-LM >= core 0.17 needs Python >= 3.12 and megatron-core >= 0.17 is not served for "
    "3.11: flags and --step-batch-size-schedule table-checked at the commit (verified once "
    "against core_v0.19.0 run from source), LR from megatron-core 0.16.1's scheduler"
)


def _row(v: str) -> dict[str, str]:
    t = lm.version_info(CURRENT if v == "default" else v)
    real = v not in ("default",) and lm._vt(v) < (0, 18)
    return {
        "limitation": NOT_LOADED_BELOW_018 if real else NOT_LOADED_FROM_018,
        "framework": f"Megatron-LM {t['tag']} @ {t['commit'][:10]}" + (" (default export)" if v == "default" else ""),
        "loader": ("flag table + megatron-core 0.16.1 calculator & scheduler (loaded)" if real
                   else "flag + step-schedule table (table-checked, not loaded) + megatron-core 0.16.1 scheduler"),
    }  # fmt: skip


ROWS = {v: _row(v) for v in VERSIONS}
LIMITS_ALL = {
    "z_loss": "Megatron-LM has no output z-loss flag (only --moe-z-loss-coeff, the MoE router's)",
    "vocab": "the vocabulary comes from the tokenizer (--tokenizer-type/--vocab-file), --vocab-size only for NullTokenizer",
}
LIMITS_016 = {**LIMITS_ALL, "parametrization": "--use-mup exists only from core 0.17"}
CASES = h.cases()


def _name(v: str) -> str:
    return FORMAT if v == "default" else f"{FORMAT}@{v}"


def _loader(v: str):
    ver = CURRENT if v == "default" else v
    return functools.partial(lambda text, recipe, _v: lm.load(text, recipe, _v), _v=ver)


def _limits(v: str) -> dict[str, str]:
    return LIMITS_016 if v == "0.16" else LIMITS_ALL


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_loads(case: str, version: str) -> None:
    h.load(case, _name(version), _loader(version), key=f"megatron-{version}")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("check", list(h.CHECKS))
def test_numbers(case: str, version: str, check: str) -> None:
    view = h.load(case, _name(version), _loader(version), key=f"megatron-{version}")
    h.check(case, _name(version), view, check, _limits(version))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_no_flag_ignored(case: str, version: str) -> None:
    """Nothing in the file is parsed and then ignored: >= 0.18 logs and ignores
    --rampup-batch-size (num_microbatches_calculator.init_num_microbatches_calculator)."""
    view = h.load(case, _name(version), _loader(version), key=f"megatron-{version}")
    ignored = [n for n in view.notes if "ignored" in n]
    assert not ignored, f"{case}: Megatron parses and ignores: {ignored}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_comments_name_real_flags(case: str, version: str) -> None:
    """Every ``--flag`` the comments name exists in some Megatron-LM release (a comment may speak
    of another version); ``--scaling-recipe`` exists in none, nor on main."""
    out, err, rc = h.export(case, _name(version))
    assert rc == 0, f"`sweeper export` for {_name(version)} exited {rc}: {err.strip()[-300:]}"
    known = set().union(*(set(lm.version_info(v)["all_flags"].split()) for v in lm.VERSIONS))
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", h.header_text(out)))
    # (Sweeper's own, named as Sweeper's: recommend's hardware flags in a memory warning)
    sweeper_flags = {"--framework-version", "--format", "--recipe-json", "--allow-inexpressible",
                     "--force", "--bytes-per-token", "--zero-stage", "--recompute", "--gpus",
                     "--no-flash-attention"}  # fmt: skip
    unknown = sorted(named - known - sweeper_flags)
    assert not unknown, f"{case}: comments name flags no Megatron-LM release has: {unknown}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_mup_differences_said(case: str, version: str) -> None:
    """With ``--use-mup`` (core >= 0.17) Megatron scales attention by 1/d_head unless
    ``--mup-base-head-dim`` is given, and multiplies the logits by 1/m (``--mup-output-mult``);
    it also divides the hidden matrices' Adam eps by m and leaves weight decay alone, unlike the
    proxies: the file sets the flags or says so. The output layer is marked
    ``is_embedding_parameter`` (language_module.py, core_v0.17.0 on): base LR and eps, as the
    proxies' lm_head, so the file must not declare it as a difference."""
    if h.recipe(case)["parametrization"] == "sp":
        return
    view = h.load(case, _name(version), _loader(version), key=f"megatron-{version}")
    if view.parametrization != "mup":
        return  # declared as not expressible (checked by test_numbers[parametrization])
    out, _, _ = h.export(case, _name(version))
    argv = shlex.split(out, comments=True)
    comments = h.header_text(out)
    missing = []
    if "--mup-base-head-dim" not in argv and "attention" not in comments:
        missing.append("attention scale (1/d_head without --mup-base-head-dim)")
    if "--mup-output-mult" not in argv and not re.search(r"output mult|logit", comments):
        missing.append("output multiplier (1/m, --mup-output-mult)")
    if not re.search(r"\beps\b", comments):
        missing.append("hidden Adam eps ÷ m")
    if "weight decay" not in comments:
        missing.append("weight decay not scaled")
    assert not missing, f"{case}: --use-mup differs from the proxies, unsaid: {missing}"
    wrong = [ln for ln in comments.splitlines() if "not expressible" in ln and "output layer" in ln]
    assert not wrong, f"{case}: declares the output layer's LR/eps, which --use-mup keeps: {wrong}"
    assert "--untie-embeddings-and-output-weights" in argv, "the proxies' lm_head is untied"

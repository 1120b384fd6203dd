"""An adapters audit, the parts that run without the frameworks: warnings printed through rich
with their brackets, the adapters' install hint, the litgpt adapter's Config fields (extra
arguments override the recipe's, shape fields refused), the attention scale a builder's muP law
records and the Megatron export's note on it, and the litgpt export of a law measured on the
litgpt adapter (its model, not the proxies' block)."""

from __future__ import annotations

import io
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweeper.fitting.conventions import Conventions
from sweeper.fitting.laws import PowerLaw
from sweeper.recipe.export import export_recipe
from sweeper.recipe.recommend import recommend
from sweeper.recipe.target import Target

LITGPT = "sweeper.adapters.litgpt:gpt"


def _law(**conv: Any) -> PowerLaw:
    return PowerLaw(
        target="lr", predictors=("n_params",), source="own", method="test",
        conventions=Conventions(**conv), log_prefactor=math.log(0.2),
        exponents={"n_params": -0.3},
    )  # fmt: skip


def _recipe(par: str = "sp", **conv: Any) -> Any:
    target = Target(width=2048, depth=24, heads=16, vocab=32000, context=2048, tokens=2e10,
                    parametrization=par)  # fmt: skip
    if par != "sp":
        conv = {"parametrization": par, "base_width": 32, "base_head_dim": 16, **conv}
    return recommend({"lr": _law(**conv)}, target, force=True)


# ------------------------------------------------------------------------- rich markup, hint


def test_a_warning_keeps_its_brackets_through_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sweeper recommend` printed "...or pip install 'sweeper' or 'sweeper'": rich read the
    warning's ``[hf]`` and ``[litgpt]`` as styles and dropped them."""
    from rich.console import Console

    import sweeper.cli.recipe as cli_recipe

    out = io.StringIO()
    monkeypatch.setattr(cli_recipe, "_console", lambda: Console(file=out, width=400))
    r = _recipe()
    said = "needs a module: pip install -e '.[hf]' or -e '.[litgpt]' ([model.args] [/b])"
    cli_recipe._print_recipe(replace(r, warnings=(said,)))
    assert said in out.getvalue()


def test_the_adapters_install_hint_is_the_repositorys_extra() -> None:
    """`pip install 'sweeper[hf]'` outside the repository installs PyPI's unrelated "sweeper"."""
    import sys
    import types

    from proxy_models import ProxyConfig
    from proxy_models.builder import Builder, BuilderError

    def llama(**kw: object) -> None:
        raise ModuleNotFoundError("No module named 'transformers'")

    fake = types.ModuleType("sweeper.adapters.fake_missing_s27")
    fake.llama = llama  # type: ignore[attr-defined]
    sys.modules[fake.__name__] = fake
    try:
        with pytest.raises(BuilderError) as e:
            Builder("sweeper.adapters.fake_missing_s27:llama").build(ProxyConfig(width=32))
    finally:
        del sys.modules[fake.__name__]
    assert "pip install -e '.[hf]'" in str(e.value) and "sweeper[" not in str(e.value)
    import sweeper.adapters

    assert "sweeper[" not in (sweeper.adapters.__doc__ or "").replace("'sweeper[hf]'", "")


# ---------------------------------------------------------------------- the litgpt Config


def test_litgpt_args_override_the_recipe_and_shape_fields_are_refused() -> None:
    """``bias = true`` in [model.args] raised "got multiple values for keyword argument
    'bias'", though the docstring promised any litgpt.Config field by name."""
    from sweeper.adapters.litgpt import SHAPE_FIELDS, config_fields

    shape = {"width": 64, "depth": 2, "heads": 4, "head_dim": 16, "vocab_size": 256,
             "context": 32}  # fmt: skip
    base = config_fields(**shape, kv_groups=2)
    assert (base["bias"], base["parallel_residual"], base["n_query_groups"]) == (False, False, 2)
    assert base["intermediate_size"] == 176 and base["mlp_class_name"] == "LLaMAMLP"
    got = config_fields(**shape, bias=True, parallel_residual=True, intermediate_size=100)
    assert (got["bias"], got["parallel_residual"], got["intermediate_size"]) == (True, True, 100)
    with pytest.raises(ValueError, match=r"\[model.args\] n_embd, n_query_groups: set from the "
                       "cell's shape") as e:  # fmt: skip
        config_fields(**shape, n_query_groups=1, n_embd=8)
    assert "\n" not in str(e.value) and "n_embd" in SHAPE_FIELDS


# ------------------------------------------------------------- the attention scale (muP)


def _study(tmp_path: Path, heads: str) -> Any:
    from sweeper.study.spec import load_study

    p = tmp_path / "s.toml"
    p.write_text(
        f'[sweep]\nname = "a"\n[model]\nbuilder = "tests.own_builders:tiny"\n'
        f'parametrization = "mup"\nbase_width = 32\ncontext = 32\n{heads}\n'
        "[ladder]\nwidths = [32, 64]\ndepths = [1]\ntokens = [4096]\n"
        '[search]\nlr = { values = [1e-2] }\nbatch_size = 8\n[sampler]\nkind = "grid"\n'
    )
    return load_study(p)


def test_a_builders_mup_law_records_whether_its_attention_followed_mups_rule(
    tmp_path: Path,
) -> None:
    """The adapters keep their own 1/sqrt(d_head): with a fixed head count d_head grows with width
    and muP's 1/d rule is not what the proxies ran; the law now says which."""
    from sweeper.fitting.provenance import (
        ATTENTION_AS_MUP,
        ATTENTION_NOT_MUP,
        _own_code,
        builder_attention_is_mup,
    )

    fixed_heads = _own_code(_study(tmp_path, "heads = 2"))
    fixed_size = _own_code(_study(tmp_path, "head_dim = 16"))
    assert ATTENTION_NOT_MUP in fixed_heads["parametrization_variant"]
    assert "heads fixed at 2" in fixed_heads["parametrization_variant"]
    assert ATTENTION_AS_MUP in fixed_size["parametrization_variant"]

    def conv(own: dict[str, Any]) -> Conventions:
        keys = ("model_builder", "model_args", "parametrization_variant")
        return Conventions(parametrization="mup", **{k: own[k] for k in keys})

    assert builder_attention_is_mup(conv(fixed_heads)) is False
    assert builder_attention_is_mup(conv(fixed_size)) is True
    older = replace(conv(fixed_size), parametrization_variant="mup-by-role: ...")
    assert builder_attention_is_mup(older) is None  # (a law stored before: not said)
    assert builder_attention_is_mup(Conventions(parametrization="mup")) is None


def test_megatrons_note_says_when_the_attention_is_not_as_the_proxies() -> None:
    """The Megatron export wrote "attention scale sqrt(16)/128 ...: as the proxies" for a builder
    swept with ``heads = 2``, whose proxies ran their own 1/sqrt(d_head)."""
    from sweeper.fitting.provenance import ATTENTION_AS_MUP, ATTENTION_NOT_MUP

    own = {"model_builder": "tests.own_builders:tiny"}
    heads = _recipe("mup", **own, parametrization_variant=f"mup-by-role; {ATTENTION_NOT_MUP}")
    text = export_recipe(heads, "megatron", "0.19", allow_inexpressible=True)
    note = next(ln for ln in text.splitlines() if ln.startswith("# --use-mup with"))
    proxies_part = note.split(": as the proxies")[0]
    assert "attention" not in proxies_part, note
    assert "the attention is not: its scale is sqrt(16)/128 = 0.03125" in note
    assert "at the target that is 1/sqrt(128) = 0.08839 (--mup-attn-scale-power 0.5" in note
    assert "with the head count held fixed" in note
    assert any(ln.startswith("# CAUTION: the attention scale is muP's") for ln in text.splitlines())
    assert "--mup-base-head-dim 16" in text  # (the flags stay muP's: the caution says how not)

    for same in (
        _recipe("mup"),  # the proxies: muP's rule
        _recipe("mup", **own, parametrization_variant=f"mup-by-role; {ATTENTION_AS_MUP}"),
    ):
        text = export_recipe(same, "megatron", "0.19", allow_inexpressible=True)
        note = next(ln for ln in text.splitlines() if ln.startswith("# --use-mup with"))
        assert "attention scale sqrt(16)/128 = 0.03125 (--mup-base-head-dim 16" in note
        assert note.endswith(": as the proxies") and "CAUTION: the attention" not in text

    older = _recipe("mup", **own, parametrization_variant="mup-by-role: ...")
    text = export_recipe(older, "megatron", "0.19", allow_inexpressible=True)
    assert "the law does not record whether the study held the head count fixed" in text
    assert "may have held the head count fixed" in text


# ----------------------------------------------------------- the litgpt export of its model


def _model_config(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    cfg: dict[str, Any] = doc["model_config"]
    return cfg


def test_the_litgpt_export_of_a_litgpt_adapter_law_writes_its_model() -> None:
    """It wrote litgpt's default block (GptNeoxMLP, LayerNorm, full MHA) though the law records
    the builder and its model_args."""
    args = {"kv_groups": 4, "mlp_ratio": 8 / 3, "multiple_of": 256}
    r = _recipe(model_builder=LITGPT, model_args=args)
    text = export_recipe(r, "litgpt")
    cfg = _model_config(text)
    assert (cfg["mlp_class_name"], cfg["norm_class_name"]) == ("LLaMAMLP", "RMSNorm")
    assert (cfg["n_head"], cfg["n_query_groups"], cfg["head_size"]) == (16, 4, 128)
    assert cfg["intermediate_size"] == 5632 and cfg["n_layer"] == 24 and cfg["n_embd"] == 2048
    assert (cfg["bias"], cfg["parallel_residual"], cfg["rotary_percentage"]) == (False, False, 1)
    assert "CAUTION: model_config is the LR law's model" in text
    assert "block is Sweeper's proxies'" not in text and "GptNeoxMLP" not in text

    plain = _model_config(export_recipe(_recipe(model_builder="tests.own_builders:tiny"), "litgpt"))
    assert "mlp_class_name" not in plain and plain["bias"] is False

    bad = _recipe(model_builder=LITGPT, model_args={"kv_groups": 3})  # 3 does not divide 16
    text = export_recipe(bad, "litgpt")
    assert "mlp_class_name" not in _model_config(text)
    assert "does not build at the target: kv_groups 3 must divide the number of heads 16" in text


def test_a_laws_notes_print_their_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    """A note naming a study's section ("[sampler] kind") had lost it to rich's markup, as the
    recipe's warnings had lost '[hf]'."""
    from dataclasses import replace

    from sweeper.cli.fitting import _print_law
    from sweeper.recipe.published import published_laws

    law = published_laws("deepseek")["lr"]
    note = 'for a study with [sampler] kind = "law"; sweeper[hf]'
    _print_law(replace(law, method="surface", exponents_ci={}, notes=(note,)), "s")
    assert f"note: {note}" in capsys.readouterr().out

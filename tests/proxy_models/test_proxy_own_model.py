"""Own models, optimizers and schedules in proxy_models: builders by role, muP on a model Sweeper
did not write, Muon/Adafactor/SGD, the linear schedule, the weight-decay timescale, a user's loop."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from proxy_models import HParams, ProxyConfig, TokenData, train
from proxy_models.builder import Builder, BuilderError, count, prepare
from proxy_models.hparams import lr_at, weight_decay_of
from proxy_models.model import build_model
from proxy_models.optim import OptimizerSet, make_optimizer
from proxy_models.parametrization import param_groups

TINY = "tests.own_builders:tiny"


def cfg(width: int = 32, par: str = "sp", **kw: object) -> ProxyConfig:
    return ProxyConfig(width=width, depth=2, context=32, parametrization=par, base_width=32, **kw)


def test_roles_of_a_model_sweeper_did_not_write() -> None:
    own = prepare(Builder(TINY), cfg(), seed=0)
    r = own.roles
    assert r.roles["emb.weight"] == "embedding"  # nn.Embedding
    assert r.roles["pos"] == "embedding"  # raw (context, width): one width-scaled dimension
    assert r.roles["out.weight"] == "readout" and r.readout == "out"  # forward hook
    assert r.roles["blocks.0.attn.in_proj_weight"] == "hidden"  # raw, both dims scale
    assert r.roles["blocks.0.up.weight"] == "hidden"
    assert r.roles["blocks.0.norm.weight"] == "vector"
    assert set(r.residual) == {
        "blocks.0.attn.out_proj",
        "blocks.0.down_proj",
        "blocks.1.attn.out_proj",
        "blocks.1.down_proj",
    }
    # N: hidden and vectors only; total: everything
    n_embed = 256 * 32 + 32 * 32 + 32 * 256
    assert own.n_params_total - own.n_params == n_embed
    assert count(Builder(TINY), cfg()) == (own.n_params, own.n_params_total)


def test_vocab_equal_to_width_is_told_apart_by_module_type() -> None:
    c = ProxyConfig(
        width=64, depth=1, context=16, vocab_size=64, parametrization="mup", base_width=32
    )
    r = prepare(Builder(TINY), c, seed=0).roles
    assert r.roles["emb.weight"] == "embedding" and r.roles["out.weight"] == "readout"
    assert r.roles["blocks.0.up.weight"] == "hidden"


def test_mup_by_role_rescales_init_lr_and_output() -> None:
    base = prepare(Builder(TINY), cfg(32, "mup"), seed=0).model
    wide_own = prepare(Builder(TINY), cfg(128, "mup", output_mult=2.0), seed=0)
    wide = wide_own.model
    assert wide.blocks[0].up.weight.std().item() == pytest.approx(0.02 / 2, rel=0.1)  # ÷ √4
    assert wide.emb.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert base.blocks[0].up.weight.std().item() == pytest.approx(0.02, rel=0.1)
    # the readout's output is multiplied by output_mult / m = 2 / 4
    idx = torch.zeros((1, 4), dtype=torch.long)
    with torch.no_grad():
        h = wide.out.weight  # logits = 0.5 · (x @ Wᵀ)
        logits = wide(idx)
        hooks = wide._sweeper_hooks
        for hk in hooks:
            hk.remove()
        raw = wide(idx)
    assert torch.allclose(logits, 0.5 * raw, atol=1e-6)
    groups = param_groups(
        wide, wide_own_cfg := cfg(128, "mup"), HParams(lr=1e-2), roles=wide_own.roles.roles
    )
    mults = {g["name"]: g["lr_mult"] for g in groups}
    assert mults == {"hidden": 0.25, "embedding": 1.0, "vector": 1.0}
    assert wide_own_cfg.width == 128 and h.shape == (256, 128)


def test_sp_keeps_the_builders_own_init() -> None:
    torch.manual_seed(0)
    plain = Builder(TINY).build(cfg())
    own = prepare(Builder(TINY), cfg(), seed=0).model
    assert torch.equal(plain.blocks[0].up.weight, own.blocks[0].up.weight)  # seeded, untouched
    assert not own._sweeper_hooks


@pytest.mark.parametrize(
    ("path", "par", "needle"),
    [
        ("no_such_module_xyz:f", "sp", "cannot import 'no_such_module_xyz'"),
        ("tests.own_builders:nope", "sp", "has no attribute 'nope'"),
        ("tests.own_builders:raises", "sp", "raised RuntimeError"),
        ("tests.own_builders:wrong_shape", "sp", "expected (B, T, vocab_size)"),
        ("tests.own_builders:not_a_module", "sp", "not a torch.nn.Module"),
        ("tests.own_builders:no_width", "mup", "no width-scaled parameter"),
        ("tests.own_builders:ambiguous", "mup", "cannot tell the role"),
    ],
)
def test_bad_builders_say_what_is_wrong_in_one_line(path: str, par: str, needle: str) -> None:
    with pytest.raises(BuilderError) as e:
        prepare(Builder(path), cfg(par=par), seed=0)
    msg = str(e.value)
    assert msg.startswith("model.builder: ") and needle in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("tests.own_builders:typo_role", "unknown role 'squeeze': 'hiddden'; roles: embedding"),
        ("tests.own_builders:typo_name", "no parameter named 'squeez' in the model (did you mean "
         "'squeeze'?)"),
    ],
)  # fmt: skip
def test_a_typo_in_param_roles_is_one_line(path: str, needle: str) -> None:
    """A typo in param_roles passed validate (the typo'd parameter silently left N), then
    coord-check died with "KeyError: 'hiddden'"."""
    with pytest.raises(BuilderError) as e:
        prepare(Builder(path), cfg(par="mup"), seed=0)
    assert str(e.value).startswith("model.param_roles: ") and needle in str(e.value)


def test_param_roles_settles_an_ambiguous_model() -> None:
    own = prepare(Builder("tests.own_builders:settled"), cfg(par="mup"), seed=0)
    assert own.roles.roles["squeeze"] == "hidden" and own.roles.how["squeeze"] == "param_roles"
    own = prepare(
        Builder("tests.own_builders:ambiguous", param_roles="tests.own_builders:ambiguous_roles"),
        cfg(par="mup"),
        seed=0,
    )
    assert own.roles.roles["expand"] == "hidden"


def test_builder_trains_and_is_deterministic(corpus: TokenData) -> None:
    c = cfg(par="completep", base_depth=1)
    kw = {"tokens": 6 * 8 * 32, "data": corpus, "seed": 1, "threads": 1, "builder": Builder(TINY)}
    a = train(c, HParams(lr=3e-3, batch_size=8), **kw)
    b = train(c, HParams(lr=3e-3, batch_size=8), **kw)
    assert a.val_loss == b.val_loss and a.steps == 6 and not a.diverged
    assert a.n_params == count(Builder(TINY), c)[0] != c.n_params()


@pytest.mark.parametrize("opt", ["muon", "adafactor", "sgd"])
def test_other_optimizers_train(corpus: TokenData, opt: str) -> None:
    lr = {"muon": 1e-2, "adafactor": 1e-2, "sgd": 0.3}[opt]
    r = train(
        cfg(),
        HParams(lr=lr, batch_size=8, optimizer=opt),
        tokens=12 * 8 * 32,
        data=corpus,
        threads=1,
    )
    assert math.isfinite(r.val_loss) and r.val_loss < r.init_loss and not r.diverged


def test_muon_takes_the_2d_hidden_matrices_and_adamw_the_rest() -> None:
    c = cfg()
    model = build_model(c, seed=0)
    opt = make_optimizer(
        param_groups(model, c, HParams(lr=1e-3)), HParams(lr=1e-3, optimizer="muon")
    )
    assert isinstance(opt, OptimizerSet)
    muon, adam = opt.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adam, torch.optim.AdamW)
    assert all(p.ndim == 2 for g in muon.param_groups for p in g["params"])
    assert muon.param_groups[0]["adjust_lr_fn"] == "match_rms_adamw"
    assert {g["name"] for g in adam.param_groups} == {"embedding", "vector"}


def test_linear_schedule_and_weight_decay_timescale() -> None:
    hp = HParams(lr=1.0, warmup=2, schedule="linear", min_lr_ratio=0.0)
    lrs = [lr_at(hp, s, 12) for s in range(12)]
    assert lrs[:3] == [0.5, 1.0, 1.0] and lrs[-1] == 0.0
    assert lrs[6] == pytest.approx(1 - (6 - 2) / 9)
    tau = HParams(lr=1e-2, weight_decay_tau=0.5)
    assert weight_decay_of(tau, 200) == pytest.approx(1 / (1e-2 * 0.5 * 200))
    assert weight_decay_of(HParams(lr=1e-2), 200) == 0.1
    with pytest.raises(ValueError, match="optimizer"):
        HParams(lr=1e-3, optimizer="lion")
    with pytest.raises(ValueError, match="weight_decay_tau"):
        HParams(lr=1e-3, weight_decay_tau=0.0)


def test_training_function_divergence_and_stop(caplog: pytest.LogCaptureFixture) -> None:
    from proxy_models.train_function import check_function, run_function
    from tests.own_builders import loop

    shape = {"width": 16, "depth": 1, "heads": 1, "head_dim": 16, "vocab_size": 256, "context": 8}
    hp = {"lr": 0.05, "batch_size": 2, "tokens": 2 * 8 * 40, "seed": 0}
    good = run_function(loop, hparams=hp, shape=shape)
    assert not good["diverged"] and good["steps"] == 40 and good["val_loss"] < 2.1
    bad = run_function(loop, hparams={**hp, "lr": 2.0}, shape=shape)
    assert bad["diverged"] and bad["steps"] < 40  # stopped by the divergence rule
    stopped = run_function(loop, hparams=hp, shape=shape, report=lambda s, t, x: s >= 5)
    assert stopped["stopped"] and stopped["steps"] == 5

    # a loop that raises FloatingPointError on a NaN (as many do) diverged: it bounds the LR
    # range; it failed the trial, retried, and was no bound (an audit's loop, relaunched in vain)
    def raises_on_nan(hparams: dict, shape: dict, report: object) -> dict:
        raise FloatingPointError("loss is nan at step 3")

    def raises_other(hparams: dict, shape: dict, report: object) -> dict:
        raise RuntimeError("boom")

    with caplog.at_level("WARNING"):
        nan = run_function(raises_on_nan, hparams=hp, shape=shape)
    assert nan["diverged"] and nan["val_loss"] == pytest.approx(math.log(256))
    assert "raised FloatingPointError (loss is nan at step 3)" in caplog.text  # said, not silent
    with pytest.raises(RuntimeError, match="boom"):
        run_function(raises_other, hparams=hp, shape=shape)
    # a returned diverged must be a flag: the string "no" had been read as True (a diff audit)
    import numpy as np

    from proxy_models.builder import BuilderError

    def says(flag: object) -> object:
        return lambda hparams, shape, report: {"val_loss": 2.0, "diverged": flag}

    with pytest.raises(BuilderError, match=r"returned diverged='no' \(str\): give True or False"):
        run_function(says("no"), hparams=hp, shape=shape)
    for flag, meant in ((False, False), (np.True_, True), (0, False)):
        assert run_function(says(flag), hparams=hp, shape=shape)["diverged"] is meant
    assert check_function("tests.own_builders:loop") == []
    (line,) = check_function("tests.own_builders:bad_signature")
    assert line.startswith("train.function: ") and "hparams, shape, report" in line


def test_cli_trial_takes_an_optimizer(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import sweeper.cli as cli

    argv = ["trial", "--width", "16", "--depth", "1", "--context", "32", "--batch-size", "8"]
    argv += ["--tokens", "2048", "--lr", "1e-2", "--optimizer", "muon", "--json", "--threads", "1"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 8 and out["val_loss"] > 0
    with pytest.raises(SystemExit) as e:  # argparse refuses an unknown choice: exit 2
        cli.main([a if a != "muon" else "lion" for a in argv])
    assert e.value.code == 2


def test_a_builder_error_survives_the_trip_from_a_ray_worker() -> None:
    """A training function that returned no val_loss failed in the worker with a BuilderError
    that could not be unpickled on the driver: the trial's error read "TypeError:
    BuilderError.__init__() missing 1 required positional argument" instead of the message."""
    import pickle

    e = pickle.loads(pickle.dumps(BuilderError("train.function", "returned no 'val_loss'")))
    assert isinstance(e, BuilderError)
    assert (e.key, str(e)) == ("train.function", "train.function: returned no 'val_loss'")


def test_an_adapter_without_its_framework_points_to_the_adapter_virtualenvs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hint named only `pip install 'sweeper[hf]'`, though the two extras pin transformers
    apart and the documented route is one virtualenv each (scripts/adapter_venvs.sh)."""
    import sys
    import types

    def llama(**kw: object) -> None:
        raise ModuleNotFoundError("No module named 'transformers'")

    fake = types.ModuleType("sweeper.adapters.fake_missing")
    fake.llama = llama  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sweeper.adapters.fake_missing", fake)
    with pytest.raises(BuilderError) as e:
        prepare(Builder("sweeper.adapters.fake_missing:llama"), cfg(par="sp"), seed=0)
    msg = str(e.value)
    assert "No module named 'transformers'" in msg and "bash scripts/adapter_venvs.sh" in msg
    assert "\n" not in msg


def test_an_import_failure_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A builder module that imports a package not installed was told "is it on sys.path?",
    though the module itself was found: the message now names the missing package; a module
    that raises as it is imported is said to raise."""
    from proxy_models.builder import load_callable

    (tmp_path / "needs_dep_q.py").write_text("import not_installed_pkg_q\n\ndef f(): ...\n")
    (tmp_path / "raises_q.py").write_text("raise ValueError('bad config')\n")
    (tmp_path / "bad_name_q.py").write_text("from math import no_such_name_q\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BuilderError, match="'needs_dep_q' was found, but 'not_installed_pkg_q', "
                       "which it imports, is not installed"):  # fmt: skip
        load_callable("needs_dep_q:f")
    with pytest.raises(BuilderError, match=r"ValueError: bad config\): the module raised"):
        load_callable("raises_q:f")
    with pytest.raises(BuilderError, match=r"is it on sys\.path"):
        load_callable("no_such_module_q:f")
    with pytest.raises(BuilderError, match="'bad_name_q' was found, but an import inside it"):
        load_callable("bad_name_q:f")


def test_a_module_shadowed_by_pythons_own_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A law-sampler audit's study named 'code:train': the standard library's code module (Ray
    had imported it) won, and the error said only that 'code' has no attribute 'train'."""
    import code  # noqa: F401  (imported first, as in a launch)

    from proxy_models.builder import BuilderError, load_callable

    (tmp_path / "code.py").write_text("def train(**kw):\n    return {'val_loss': 1.0}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BuilderError, match=r"not .*code\.py: rename your module"):
        load_callable("code:train", "train.function")
    with pytest.raises(BuilderError) as e:
        load_callable("tests.own_builders:nope")
    assert "rename" not in str(e.value)


def test_a_function_beside_a_builder_takes_the_model_where_it_can() -> None:
    """An own-model audit: a function without model= was refused beside any builder (OWN_MODEL.md
    passes the model only to a function that takes it): accepted under sp, where the model is
    then not passed, refused under muP/CompleteP, which Sweeper applies to that model. Honouring
    the parametrization implies its base shape."""
    from proxy_models.train_function import check_function, honours_of, run_function
    from tests.own_model_loops import own_model, with_model

    assert honours_of(with_model) == ("parametrization", "base_width", "base_depth")
    own, takes = "tests.own_model_loops:own_model", "tests.own_model_loops:with_model"
    assert check_function(own, builder_parametrization="sp") == []
    (line,) = check_function(own, builder_parametrization="completep")
    assert line.startswith("train.function: ") and "must take model= under completep" in line
    assert check_function(takes, builder_parametrization="mup") == []
    (line,) = check_function(takes)  # no builder, no model to pass
    assert "hparams, shape, report" in line and "'model'" in line
    shape = {"width": 16, "depth": 1, "heads": 1, "head_dim": 16, "vocab_size": 256, "context": 8}
    hp = {"lr": 0.05, "batch_size": 2, "tokens": 2 * 8 * 40, "seed": 0}
    assert run_function(own_model, hparams=hp, shape=shape, model=object())["val_loss"] == 4.0


def test_a_module_in_the_working_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An own-model audit: `sweeper recommend` could not import a builder from the directory
    `launch` ran in (the command's sys.path lacks it). sys.path is left as it was when the module
    is not there either."""
    import sys

    from proxy_models.builder import load_callable

    (tmp_path / "in_cwd_q4.py").write_text("def f():\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    before = list(sys.path)
    with pytest.raises(BuilderError, match=r"sys\.path .* or in the working directory\?"):
        load_callable("no_such_module_q4:f")
    assert sys.path == before
    assert load_callable("in_cwd_q4:f")() == 1
    assert sys.path == [*before, str(tmp_path)]

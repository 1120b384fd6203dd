"""Your model in the proxies' place: a builder ``"package.module:function"`` called at a cell's
shape, classified by role, parametrized (SP, muP, CompleteP) and counted.

A builder is called as ``function(width=, depth=, heads=, head_dim=, vocab_size=, context=,
**args)`` and returns a ``torch.nn.Module`` whose ``forward(idx)`` (LongTensor (B, T)) returns
logits (B, T, vocab_size). Sweeper trains it with its own loop; :func:`prepare` builds it from a
seed (the builder's own init runs under ``torch.manual_seed(seed)`` inside ``fork_rng``, so the
global RNG is left alone), finds every parameter's role (:mod:`proxy_models.roles`) and applies
the parametrization by role:

- SP: the builder's own init is kept; vectors get no weight decay; ``output_mult`` (when not 1)
  multiplies the readout's output.
- muP (:data:`VARIANTS`): with m = width / base_width, embeddings and the readout are re-drawn
  N(0, init_std²), hidden matrices N(0, (init_std/√m)²) (residual output projections also
  ÷ √(2·depth)); Adam LR of hidden matrices ÷ m, their decay × m; the readout's output ×
  output_mult / m (a forward hook). The attention scale is the model's own: 1/√d_head, which
  does not move with width when ``head_dim`` is fixed (heads grow with width), so muP's 1/d rule
  is then the same; with a fixed head count the variant says so.
- CompleteP: muP plus the residual output projections' outputs × base_depth / depth (forward
  hooks), their init ÷ √(2·base_depth).

The role overrides come from ``param_roles(model) -> {parameter name: role}``: an attribute of
the builder function, or the study's ``model.param_roles = "module:function"``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import site
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy_models.rules import Rules

if TYPE_CHECKING:
    import torch
    from torch import nn

    from proxy_models.config import ProxyConfig
    from proxy_models.roles import RoleMap

#: the study key that names a builder
KEY = "model.builder"

__all__ = [
    "KEY",
    "VARIANTS",
    "Builder",
    "BuilderError",
    "OwnModel",
    "load_callable",
    "shape_kwargs",
]

#: the parametrization variant applied to a builder's model, per parametrization (recorded in the
#: law's conventions)
VARIANTS: dict[str, str] = {
    "sp": "sp (builder's own init; vectors undecayed)",
    "mup": (
        "mup-by-role: embeddings/readout N(0, init_std²), hidden N(0, init_std²/m) (residual "
        "outputs ÷√(2L)), Adam LR hidden ÷m, decay hidden ×m, readout output ×output_mult/m "
        "(hook); attention scale the model's own"
    ),
    "completep": (
        "completep-by-role: mup-by-role plus residual-output modules ×base_depth/L (hooks), "
        "their init ÷√(2·base_depth)"
    ),
}


class BuilderError(ValueError):
    """A builder (or training function) that cannot be used; ``key`` is the study key that named
    it, and ``str(e)`` is one line ``"<key>: <what went wrong>"``."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message

    def __reduce__(self) -> tuple[type[BuilderError], tuple[str, str]]:
        # (rebuilt from both arguments: a Ray worker's error crosses to the driver as a pickle)
        return type(self), (self.key, self.message)


def _check_roles(roles: Mapping[str, Any], names: set[str]) -> None:
    """BuilderError (one line) unless every role of a ``param_roles`` result is one it may give
    (:data:`proxy_models.roles.OWN_ROLES`) and every name a parameter of the model: a typo would
    drop the parameter out of N, or leave its role to the rules, without a word."""
    from proxy_models.roles import OWN_ROLES

    bad = [f"{n!r}: {r!r}" for n, r in roles.items() if r not in OWN_ROLES]
    if bad:
        raise BuilderError(
            "model.param_roles", f"unknown role {', '.join(bad)}; roles: {', '.join(OWN_ROLES)}"
        )
    unknown = sorted(set(roles) - names)
    if unknown:
        import difflib

        near = difflib.get_close_matches(unknown[0], names, n=1)
        raise BuilderError(
            "model.param_roles",
            f"no parameter named {', '.join(map(repr, unknown))} in the model"
            + (f" (did you mean {near[0]!r}?)" if near else ""),
        )


def load_callable(path: str, key: str = "model.builder") -> Callable[..., Any]:
    """The function at ``"package.module:function"`` (``a.b:C.f`` for an attribute path); ``key``
    is the study key that names it (for the error)."""
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise BuilderError(key, f"{path!r} must look like 'package.module:function'")
    mod_name, attr = path.split(":")
    try:
        obj: Any = _import(mod_name)
    except Exception as e:  # ImportError, or the module itself raising
        raise BuilderError(key, _import_failure(mod_name, path, e)) from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BuilderError(key, f"module {mod_name!r} has no attribute {attr!r}" + _shadow(obj))
        obj = getattr(obj, part)
    if not callable(obj):
        raise BuilderError(key, f"{path!r} is not callable (a {type(obj).__name__})")
    fn: Callable[..., Any] = obj
    return fn


def _import(mod_name: str) -> Any:
    """``mod_name`` from ``sys.path``, else from the working directory, which then joins the end
    of ``sys.path`` (as ``launch`` looks there: the ``sweeper`` command's path lacks it, so
    ``recommend`` run where ``launch`` was could not build the law's model and counted N with
    the GPT formula; an own-model audit). The path is left as it was when that fails too."""
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        cwd = os.getcwd()
        if not _is_itself(mod_name, e) or cwd in sys.path:
            raise
        sys.path.append(cwd)
        importlib.invalidate_caches()
        try:
            return importlib.import_module(mod_name)
        except Exception:
            sys.path.remove(cwd)
            raise


def _is_itself(mod_name: str, e: ModuleNotFoundError) -> bool:
    """Whether ``e`` says ``mod_name`` itself (or a package above it) is missing, not something
    the module imports."""
    return e.name is not None and (mod_name == e.name or mod_name.startswith(f"{e.name}."))


def _shadow(module: Any) -> str:
    """A hint when the module imported is Python's own or an installed package's while a file of
    that name lies on sys.path too (a study's ``code.py`` lost to the standard library's
    ``code``)."""
    origin = str(getattr(module, "__file__", "") or "")
    roots = [r for r in {sys.base_prefix, sys.prefix, *site.getsitepackages()} if r]
    if not origin or not any(origin.startswith(r) for r in roots):
        return ""
    name = f"{module.__name__.split('.')[0]}.py"
    mine = [Path(d or ".") / name for d in sys.path if not any(d.startswith(r) for r in roots)]
    found = next((str(f) for f in mine if f.is_file()), None)
    if found is None:
        return ""
    return f" (the {module.__name__!r} imported is {origin}, not {found}: rename your module)"


def _import_failure(mod_name: str, path: str, e: Exception) -> str:
    """Why ``mod_name`` did not import, with the fix: the module itself not found (sys.path),
    something it imports missing (install it), or the module raising as it was imported."""
    what = f"cannot import {mod_name!r} for {path!r} ({type(e).__name__}: {e})"
    if isinstance(e, ModuleNotFoundError) and e.name is not None and not _is_itself(mod_name, e):
        return f"{what}: {mod_name!r} was found, but {e.name!r}, which it imports, is not installed"
    if isinstance(e, ModuleNotFoundError):
        return (
            f"{what}; is it on sys.path (PYTHONPATH, or an installed package) or in the working "
            "directory?"
        )
    if isinstance(e, ImportError):
        return f"{what}: {mod_name!r} was found, but an import inside it failed"
    return f"{what}: the module raised as it was imported"


def shape_kwargs(cfg: ProxyConfig) -> dict[str, int]:
    """The shape a builder is called with."""
    return {
        "width": cfg.width,
        "depth": cfg.depth,
        "heads": cfg.heads,
        "head_dim": cfg.d_head,
        "vocab_size": cfg.vocab_size,
        "context": cfg.context,
    }


@dataclass(frozen=True)
class Builder:
    """``path`` = ``"package.module:function"``; ``args`` the study's ``[model.args]`` (sorted
    pairs); ``param_roles`` an optional ``"module:function"`` override of the roles."""

    path: str
    args: tuple[tuple[str, Any], ...] = ()
    param_roles: str | None = None

    @classmethod
    def of(
        cls, path: str, args: Mapping[str, Any] | None = None, param_roles: str | None = None
    ) -> Builder:
        return cls(path, tuple(sorted((args or {}).items())), param_roles)

    def function(self) -> Callable[..., Any]:
        return load_callable(self.path, "model.builder")

    def roles_override(self, model: nn.Module) -> dict[str, str] | None:
        fn = load_callable(self.param_roles, "model.param_roles") if self.param_roles else None
        fn = fn or getattr(self.function(), "param_roles", None)
        if fn is None:
            return None
        out = fn(model)
        if not isinstance(out, Mapping):
            raise BuilderError(
                "model.param_roles", f"param_roles must return a dict, got {type(out).__name__}"
            )
        _check_roles(dict(out), {n for n, _ in model.named_parameters(remove_duplicate=False)})
        return dict(out)

    def build(self, cfg: ProxyConfig) -> nn.Module:
        """The builder's model at ``cfg``'s shape, on the current default device."""
        from torch import nn

        fn = self.function()
        try:
            model = fn(**shape_kwargs(cfg), **dict(self.args))
        except TypeError as e:
            _check_signature(fn, self.path, dict(self.args))
            raise BuilderError(KEY, f"{self.path!r} raised TypeError: {e}") from e
        except ImportError as e:
            extra = (
                " (sweeper.adapters need their extra, each in its own virtualenv since the two pin "
                "transformers apart: bash scripts/adapter_venvs.sh, then "
                ".cache/adapter-venvs/{hf,litgpt}/bin/sweeper; or, from the repository's root, "
                "pip install -e '.[hf]' or -e '.[litgpt]')"
            )
            raise BuilderError(
                KEY,
                f"{self.path!r} needs a module this environment lacks ({type(e).__name__}: {e})"
                + (extra if self.path.startswith("sweeper.adapters.") else ""),
            ) from e
        except Exception as e:
            raise BuilderError(
                KEY,
                f"{self.path!r} raised {type(e).__name__} at width {cfg.width}, depth "
                f"{cfg.depth}: {e}",
            ) from e
        if not isinstance(model, nn.Module):
            raise BuilderError(
                KEY, f"{self.path!r} returned a {type(model).__name__}, not a torch.nn.Module"
            )
        return model

    def build_meta(self, cfg: ProxyConfig) -> nn.Module:
        import torch

        with torch.device("meta"):
            return self.build(cfg)


def _check_signature(fn: Callable[..., Any], path: str, args: Mapping[str, Any]) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    names = ["width", "depth", "heads", "head_dim", "vocab_size", "context", *args]
    try:
        sig.bind(**dict.fromkeys(names, 1))
    except TypeError as e:
        raise BuilderError(
            KEY,
            f"{path!r} must accept width, depth, heads, head_dim, vocab_size, context and the "
            f"keys of [model.args] as keywords: {e}",
        ) from None


@dataclass
class OwnModel:
    """A builder's model ready to train: the module, its roles, its N and total parameter count,
    and the parametrization variant applied."""

    model: nn.Module
    roles: RoleMap
    n_params: int
    n_params_total: int
    variant: str


def _wide(builder: Builder, cfg: ProxyConfig) -> nn.Module | None:
    """The model at twice the width on the meta device (None when the builder refuses it)."""
    try:
        return builder.build_meta(replace(cfg, width=2 * cfg.width))
    except (BuilderError, ValueError):
        return None


def role_map(
    builder: Builder, cfg: ProxyConfig, model: nn.Module, *, forward: bool = True
) -> tuple[RoleMap, Any]:
    """The roles of ``model`` (built at ``cfg``) and the output of its probe forward pass."""
    import torch

    from proxy_models.roles import classify, find_readout

    device = next(model.parameters()).device
    idx = torch.zeros((1, min(8, cfg.context)), dtype=torch.long, device=device)
    out: Any = None
    readout: str | None = None
    if forward:
        try:
            readout, out = find_readout(model, idx, cfg.vocab_size)
        except Exception as e:
            if device.type != "meta":
                raise BuilderError(
                    KEY, f"{builder.path!r}: forward(idx) raised {type(e).__name__}: {e}"
                ) from e
    if readout is None:
        from torch import nn

        heads = [
            n
            for n, m in model.named_modules()
            if isinstance(m, nn.Linear) and m.out_features == cfg.vocab_size
        ]
        readout = heads[-1] if heads else None
    roles = classify(
        model,
        readout=readout,
        vocab_size=cfg.vocab_size,
        context=cfg.context,
        wide=_wide(builder, cfg),
        override=builder.roles_override(model),
    )
    return roles, out


def count(builder: Builder, cfg: ProxyConfig) -> tuple[int, int]:
    """(N non-embedding, total) of the builder's model at ``cfg``, built on the meta device."""
    model = builder.build_meta(cfg)
    roles, _ = role_map(builder, cfg, model)
    return roles.count(model)


def prepare(
    builder: Builder, cfg: ProxyConfig, *, seed: int, device: Any = "cpu", check: bool = True
) -> OwnModel:
    """Build the model from ``seed``, classify it, apply ``cfg.parametrization`` by role (module
    docstring) and move it to ``device``. BuilderError when the model's forward does not return
    (B, T, vocab_size) logits, or when a relative parametrization cannot be applied."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = builder.build(cfg)
    roles, out = role_map(builder, cfg, model)
    if check:
        _check_output(builder, cfg, out)
    rules = Rules(cfg.parametrization, cfg.width, cfg.depth, cfg.base_width, cfg.base_depth)
    if cfg.parametrization != "sp":
        _check_relative(builder, cfg, roles)
        _reinit(model, roles, rules, cfg.init_std, torch.Generator().manual_seed(seed))
    _hooks(model, roles, rules, cfg.output_mult)
    n, total = roles.count(model)
    return OwnModel(model.to(device), roles, n, total, VARIANTS[cfg.parametrization])


def _check_output(builder: Builder, cfg: ProxyConfig, out: Any) -> None:
    import torch

    t = min(8, cfg.context)
    want = (1, t, cfg.vocab_size)
    if not isinstance(out, torch.Tensor):
        raise BuilderError(
            KEY,
            f"{builder.path!r}: forward(idx) must return a logits tensor (B, T, vocab_size), "
            f"got a {type(out).__name__}",
        )
    if tuple(out.shape) != want:
        raise BuilderError(
            KEY,
            f"{builder.path!r}: forward(idx) of shape (1, {t}) returned shape "
            f"{tuple(out.shape)}, expected (B, T, vocab_size) = {want}",
        )


def _check_relative(builder: Builder, cfg: ProxyConfig, roles: RoleMap) -> None:
    where = f"{builder.path!r} under {cfg.parametrization}"
    if roles.ambiguous:
        first = sorted(roles.ambiguous.items())[:3]
        raise BuilderError(
            KEY,
            f"{where}: cannot tell the role of {len(roles.ambiguous)} parameter(s) ("
            + "; ".join(f"{n}: {why}" for n, why in first)
            + "); give param_roles(model) -> {name: role}, e.g. 'hidden' for a key/value "
            "projection to a fixed number of heads (its input grows with width: Adam LR ÷ m), "
            "or run it under sp",
        )
    if "hidden" not in roles.roles.values():
        raise BuilderError(
            KEY,
            f"{where}: no width-scaled parameter (hidden matrix) found, so muP would change "
            "nothing; is width passed through to the model's layers?",
        )
    if roles.readout is None:
        raise BuilderError(
            KEY,
            f"{where}: cannot find the readout (no nn.Linear produces the logits); mark it with "
            "param_roles(model) -> {name: 'readout'}",
        )
    if cfg.parametrization == "completep" and not roles.residual:
        raise BuilderError(
            KEY,
            f"{where}: no residual output projection found (names {sorted(_residual_names())}); "
            "mark them with param_roles(model) -> {name: 'residual'}",
        )


def _residual_names() -> frozenset[str]:
    from proxy_models.roles import RESIDUAL_NAMES

    return RESIDUAL_NAMES


def _reinit(
    model: nn.Module, roles: RoleMap, rules: Rules, init_std: float, gen: torch.Generator
) -> None:
    import torch
    from torch import nn

    hidden_std = rules.hidden_init_std(init_std)
    proj_std = rules.residual_proj_init_std(init_std)
    residual = {f"{m}.weight" for m in roles.residual}
    with torch.no_grad():
        for name, p in model.named_parameters():
            role = roles.roles[name]
            if role in ("embedding", "readout"):
                nn.init.normal_(p, 0.0, init_std, generator=gen)
            elif role == "hidden":
                std = proj_std if name in residual else hidden_std
                nn.init.normal_(p, 0.0, std, generator=gen)


def _hooks(model: nn.Module, roles: RoleMap, rules: Rules, output_mult: float) -> None:
    """Forward hooks: the readout's output × the output multiplier; residual outputs × the
    branch multiplier. Kept on the module as ``_sweeper_hooks``."""
    modules = dict(model.named_modules())
    handles = []
    out_mult = rules.output_multiplier(output_mult)
    if out_mult != 1.0 and roles.readout is not None:
        handles.append(modules[roles.readout].register_forward_hook(_scale(out_mult)))
    res = rules.residual_multiplier
    if res != 1.0:
        handles.extend(modules[m].register_forward_hook(_scale(res)) for m in roles.residual)
    model._sweeper_hooks = handles  # type: ignore[assignment]


def _scale(factor: float) -> Callable[..., Any]:
    def hook(_m: Any, _i: Any, out: Any) -> Any:
        return out * factor

    return hook


def n_params_of(builder: Builder, cfg: ProxyConfig) -> tuple[int, int]:
    """:func:`count`, cached per process (the ladder and recommend ask for the same shapes)."""
    key = (builder, cfg)
    if key not in _COUNTS:
        _COUNTS[key] = count(builder, cfg)
    return _COUNTS[key]


_COUNTS: dict[Any, tuple[int, int]] = {}

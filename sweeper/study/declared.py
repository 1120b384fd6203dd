"""Conventions an import declares: what its file's numbers mean, which the file cannot say.

A launched sweep knows its token unit, schedule, parametrization and what its N counts; an imported
file of runs knows only its columns, so its laws record N, D and the LR "as imported" and
``compare``/``check``/``export`` say what they cannot match. ``sweeper import --convention
KEY=VALUE`` (``conventions=`` in Python) states them instead; they are stored with the sweep and
every law fitted to it records them (:func:`sweeper.fitting.provenance.sweep_conventions`). The
keys are fields of :class:`sweeper.fitting.conventions.Conventions`; :data:`KEYS` says what each
takes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from sweeper.errors import ImportDataError

__all__ = ["KEYS", "check_declared", "parse_declared"]

_N_PARAMS: Final[tuple[str, ...]] = ("non-embedding", "total", "non-embedding+head")
_TOKENIZER: Final[re.Pattern[str]] = re.compile(r"tokenizer:\S+")
_NAME: Final[re.Pattern[str]] = re.compile(r"[a-z][a-z0-9_.-]*")


def _choice(*allowed: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        v = text.strip().lower()
        if v not in allowed:
            raise ValueError(f"one of {', '.join(allowed)}")
        return v

    return read


def _number(
    low: float, high: float = math.inf, *, integer: bool = False, open_low: bool = False
) -> Callable[[str], float | int]:
    kind = "an integer" if integer else "a number"
    bound = f"> {low:g}" if open_low else f">= {low:g}"
    rule = f"{kind} {bound}" + (f" and <= {high:g}" if math.isfinite(high) else "")

    def read(text: str) -> float | int:
        try:
            v = float(text)
        except ValueError:
            raise ValueError(rule) from None
        if not math.isfinite(v) or v < low or (open_low and v == low) or v > high:
            raise ValueError(rule)
        if integer:
            if v != int(v):
                raise ValueError(rule)
            return int(v)
        return v

    return read


def _token_unit(text: str) -> str:
    v = text.strip()
    if v in ("tokens", "bytes") or _TOKENIZER.fullmatch(v):
        return v
    raise ValueError("'tokens' (a tokenizer's), 'bytes', or 'tokenizer:NAME'")


def _optimizer(text: str) -> str:
    v = text.strip().lower()
    if not _NAME.fullmatch(v):
        raise ValueError("an optimizer's name (adamw, adam, lion, muon, ...)")
    return v


def _parametrization(text: str) -> str:
    from proxy_models.rules import PARAMETRIZATIONS

    return _choice(*PARAMETRIZATIONS)(text)


def _schedule(text: str) -> str:
    from proxy_models.hparams import SCHEDULES

    return _choice(*SCHEDULES)(text)


#: key -> (reader of its text, what it says): every key a field of Conventions
KEYS: Final[Mapping[str, tuple[Callable[[str], Any], str]]] = {
    "n_params": (_choice(*_N_PARAMS), "what N counts: " + " | ".join(_N_PARAMS)),
    "tokens": (_token_unit, "the unit of D and the batch: tokens | bytes | tokenizer:NAME"),
    "vocab_size": (_number(1, integer=True), "the tokenizer's vocabulary"),
    "parametrization": (_parametrization, "sp | mup | completep"),
    "base_width": (_number(1, integer=True), "muP/CompleteP base width"),
    "base_depth": (_number(1, integer=True), "CompleteP base depth"),
    "base_head_dim": (_number(1, integer=True), "the head size at the base width"),
    "optimizer": (_optimizer, "the optimizer whose peak LR the lr column is (adamw, ...)"),
    "schedule": (_schedule, "cosine | wsd | constant | linear"),
    "min_lr_ratio": (_number(0.0, 1.0), "the final LR over the peak"),
    "warmup": (_number(0.0), "a fraction of the steps if < 1, else steps"),
    "decay_fraction": (_number(0.0, 1.0, open_low=True), "WSD: the share of steps decaying"),
    "z_loss": (_number(0.0), "the z-loss coefficient"),
    "init_std": (_number(0.0, open_low=True), "the init std at the base shape"),
    "output_mult": (_number(0.0, open_low=True), "the logit multiplier (muP)"),
}


def parse_declared(
    items: Iterable[str] | Mapping[str, Any], named: str | None = None
) -> dict[str, Any]:
    """``KEY=VALUE`` texts (one, several, or a mapping) as a dict of checked values; ImportDataError listing
    every problem (an unknown key with the known ones, a value with the rule it breaks, a key
    given twice). ``named``: the parametrization the file's own column names."""
    pairs: list[tuple[str, str]] = []
    problems: list[str] = []
    if isinstance(items, Mapping):
        pairs = [(str(k), str(v)) for k, v in items.items()]
    else:  # (one "KEY=VALUE" string is one item: it had been read a character at a time)
        for item in [items] if isinstance(items, str) else items:
            key, sep, value = str(item).partition("=")
            if not sep or not key.strip() or not value.strip():
                problems.append(f"--convention takes KEY=VALUE, got {item!r}")
            else:
                pairs.append((key.strip(), value.strip()))
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key not in KEYS:
            problems.append(f"--convention {key}: unknown; known: {', '.join(KEYS)}")
        elif key in out:
            problems.append(f"--convention {key} given twice")
        else:
            try:
                out[key] = KEYS[key][0](value)
            except ValueError as e:
                problems.append(f"--convention {key}={value}: must be {e}")
    problems += check_declared(out, named)
    if problems:
        raise ImportDataError("\n".join(problems))
    return out


def check_declared(declared: Mapping[str, Any], named: str | None = None) -> list[str]:
    """The rules across keys: a base shape belongs to muP/CompleteP (declared, or ``named`` by
    the file's parametrization column), a WSD decay to WSD."""
    problems = []
    p = declared.get("parametrization") or named
    base = [k for k in ("base_width", "base_depth", "base_head_dim") if k in declared]
    if base and p in (None, "sp"):
        problems.append(
            f"--convention {base[0]}: a base shape is muP's or CompleteP's; declare "
            "parametrization=mup (or completep) with it"
        )
    if "decay_fraction" in declared and declared.get("schedule") != "wsd":
        problems.append("--convention decay_fraction: a WSD schedule's; declare schedule=wsd")
    return problems

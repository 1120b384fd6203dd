"""The command line's number arguments, one spelling for every verb: "7B", "2.5T", "4M", "1_000"."""

from __future__ import annotations

import argparse
import math

__all__ = ["add_bytes_per_token", "count", "counts", "number", "positive", "positive_count", "seed"]

_SUFFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def number(text: str) -> float:
    """A float, optionally with a k/M/B/G/T suffix ("7B", "2.5T", "4M")."""
    t = text.strip().replace("_", "")
    mult = 1.0
    if t and t[-1] in _SUFFIX:
        t, mult = t[:-1], _SUFFIX[t[-1]]
    try:
        return float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive(text: str) -> float:
    """A :func:`number` above 0 and finite."""
    v = number(text)
    if not v > 0 or v == math.inf:
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return v


def count(text: str) -> int:
    """A whole :func:`number` ("819200", "8.192e5", "819.2k")."""
    v = number(text)
    whole = round(v) if math.isfinite(v) else v
    if not math.isfinite(v) or abs(v - whole) > 1e-9 * max(1.0, abs(v)):  # (8.2 * 1e6 is not exact)
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    return int(whole)


def add_bytes_per_token(p: argparse.ArgumentParser) -> None:
    """``--bytes-per-token R``, one spelling for recommend, export, check and compare."""
    p.add_argument(
        "--bytes-per-token",
        type=positive,
        default=None,
        metavar="R",
        help="bytes of text per target token (about 4 for English BPE): converts D and the batch "
        "of laws fitted on byte-level data (default: no conversion, and a warning)",
    )


def seed(text: str) -> int:
    """A random seed: a whole number >= 0 (numpy's generators refuse a negative one)."""
    v = count(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"a seed is >= 0, got {text!r}")
    return v


def positive_count(text: str) -> int:
    """A whole number >= 1."""
    v = count(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def counts(text: str) -> list[int]:
    """Comma-separated whole numbers >= 1 ("32,64,128")."""
    return [positive_count(t) for t in text.split(",") if t.strip()] or _none(text)


def _none(text: str) -> list[int]:
    raise argparse.ArgumentTypeError(f"no number in {text!r}")

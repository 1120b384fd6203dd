"""Sweeper's exceptions: one root class, a few specific subclasses.

The CLI turns any :class:`SweeperError` into one line on stderr and exit code 2; anything else is an
internal failure (exit 1).
"""

from __future__ import annotations

__all__ = [
    "FitError",
    "ImportDataError",
    "Interrupted",
    "StorageError",
    "StudyError",
    "SweeperError",
    "TargetError",
    "first_line",
]


def first_line(e: BaseException | None) -> str:
    """The first line of an exception's message, for a one-line report (its type's name when
    the message is empty)."""
    text = str(e).strip() if e is not None else ""
    return text.splitlines()[0] if text else type(e).__name__


class SweeperError(Exception):
    """Root of every error Sweeper raises on bad input or a state it cannot work with."""


class StudyError(SweeperError):
    """A study file is invalid. ``problems`` lists every problem found, one line each."""

    def __init__(self, problems: list[str] | str, *, path: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__("\n".join(f"{where}{p}" for p in self.problems))


class StorageError(SweeperError):
    """The storage cannot be reached, or holds something that contradicts the request."""


class ImportDataError(SweeperError):
    """A file of external runs cannot be imported."""


class FitError(SweeperError):
    """A fit cannot be made from the data given (too few cells, no usable runs, ...)."""


class TargetError(SweeperError):
    """A recommendation target, hardware description or export request is invalid."""


class ScaleError(TargetError, ValueError):
    """A law asked where it cannot answer: a predictor missing, not positive or not finite, or an
    interval level that is no probability (a ValueError too, as a bad argument is)."""


class Interrupted(KeyboardInterrupt):
    """A signal (``signal_name``: "SIGINT", "SIGTERM") stopped the runs a verb had launched
    (validate-transfer's): what finished is kept, and the same command resumes. A
    KeyboardInterrupt, so a caller that catches Ctrl-C catches it."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name

"""The command line's tables: one console for every verb, and the same output as plain text for
the ``str`` of what the API returns (a check, a comparison, a launch's summary)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

__all__ = ["console", "plain_text"]

#: columns of a table written off a terminal (a pipe, a file, a test): wide enough that a law's
#: formula with its intervals or a check's row is not cut or wrapped
OFF_TERMINAL_WIDTH = 200


def console() -> Any:
    """A rich console: the terminal's width on a terminal; off one, :data:`OFF_TERMINAL_WIDTH`
    columns (or ``$COLUMNS`` when wider; rich would assume 80)."""
    from rich.console import Console

    con = Console()
    if con.is_terminal:
        return con
    return Console(width=max(OFF_TERMINAL_WIDTH, shutil.get_terminal_size((80, 40)).columns))


def literal(text: str) -> str:
    """``text`` escaped for a rich console's markup, to print as it is: a note's ``[search]`` or
    ``'sweeper[hf]'`` had been read as a style and dropped."""
    from rich.markup import escape

    return escape(text)


def plain_text(draw: Callable[[Any], None]) -> str:
    """What ``draw(console)`` prints, as text without colour or styles, at
    :data:`OFF_TERMINAL_WIDTH` columns: the verb's output as a pipe gets it (a table's title
    centred over it, as there), less the blanks that end its lines. A result's ``str`` is drawn by the verb's
    own printing code through this, so the two cannot drift apart (the API had printed raw
    dataclass dumps; an API audit). Never Jupyter's display, which rich picks by itself in a
    notebook and which would show the text rather than return it."""
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    draw(Console(file=out, width=OFF_TERMINAL_WIDTH, color_system=None, force_terminal=False,
                 force_jupyter=False, force_interactive=False))  # fmt: skip
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").splitlines())

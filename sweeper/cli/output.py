"""The command line's tables: one console for every verb."""

from __future__ import annotations

import shutil
from typing import Any

__all__ = ["console"]

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

"""The per-cell progress display of a launch: a live table on a terminal, plain lines otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.run.searcher import CellSearcher

__all__ = ["Progress"]


class Progress:
    """One line per cell (rich Live table on a terminal; plain lines per finished run otherwise).
    A law-sampler study's cells show their runs (the budget is the sweep's), with the runs used
    of ``budget_runs`` in the table's title or at the end of each line."""

    def __init__(self, sweep: str, cells: list[str], *, live: bool) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.sweep = sweep
        self.names = cells
        self.use_live = live and self.console.is_terminal
        self._live: Any = None
        self._said: dict[int, str] = {}  # (each cell's line printed last, off a terminal)

    def start(self, searcher: CellSearcher) -> None:
        if self.use_live:
            from rich.live import Live

            self._live = Live(self._table(searcher), console=self.console, refresh_per_second=4)
            self._live.start()
        else:
            for i in range(len(searcher.cells)):
                self._say(searcher, i)

    def update(self, searcher: CellSearcher, i: int) -> None:
        if self._live is not None:
            self._live.update(self._table(searcher))
        else:
            self._say(searcher, i)

    def _say(self, searcher: CellSearcher, i: int) -> None:
        """Print cell ``i``'s line unless it is the one printed last for it: every seed of a
        point ends with its own call, and a log showed each line once per seed (three
        identical lines per point of a 3-seed transfer check)."""
        line = self._line(searcher, i)
        if self._said.get(i) != line:
            self._said[i] = line
            self.console.print(line, soft_wrap=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _line(self, s: CellSearcher, i: int) -> str:
        c = s.cells[i]
        best = (
            f"best {c.best_loss:.4f} (lr {c.best_lr:.3g}, batch {c.best_batch})"
            if c.best_loss is not None
            else "best -"
        )
        extra = f", {c.failed} failed" if c.failed else ""
        extra += f", {c.pruned} pruned" if c.pruned else ""
        overall = f"; {_used(s)}" if s.law else ""
        return f"{self.sweep}/{c.cs.cell.name}: {_done(s, i)} done{extra}; {best}{overall}"

    def _table(self, s: CellSearcher) -> Any:
        from rich.table import Table

        title = f"sweep {self.sweep}" + (f": {_overall(s)}" if s.law else "")
        t = Table(title=title, title_justify="left")
        t.add_column("cell", no_wrap=True, min_width=max(len(n) for n in self.names))
        for col in ("done", "running", "failed", "pruned", "best loss", "lr", "batch"):
            t.add_column(col, justify="right")
        for i, c in enumerate(s.cells):
            t.add_row(
                c.cs.cell.name,
                _done(s, i),
                str(c.running),
                str(c.failed),
                str(c.pruned),
                "-" if c.best_loss is None else f"{c.best_loss:.4f}",
                "-" if c.best_lr is None else f"{c.best_lr:.3g}",
                "-" if c.best_batch is None else str(c.best_batch),
            )
        return t


def _done(s: CellSearcher, i: int) -> str:
    """A cell's finished count: trials of its target, or (law sampler, whose budget is the
    sweep's) its runs."""
    c = s.cells[i]
    return f"{c.runs} run{'s' if c.runs != 1 else ''}" if s.law else f"{c.finished}/{s.target}"


def _used(s: CellSearcher) -> str:
    """The law sampler's runs used of its ``budget_runs``."""
    assert s.planner is not None
    return f"{sum(c.runs for c in s.cells)} of {s.planner.budget_runs} runs used"


def _overall(s: CellSearcher) -> str:
    """The law sampler's budget: runs used of ``budget_runs``, and why its plan stopped."""
    from sweeper.study.sweep import law_progress

    assert s.planner is not None
    return law_progress(sum(c.runs for c in s.cells), s.planner.budget_runs, s.law_stop)

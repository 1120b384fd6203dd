"""The per-cell progress display of a launch: a live table on a terminal, plain lines otherwise."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sweeper.study.sweep import CellCounts, cell_counts, failed_counts

if TYPE_CHECKING:
    from sweeper.run.searcher import CellSearcher

__all__ = ["Progress", "of_target"]

logger = logging.getLogger(__name__)


def of_target(finished: int, target: int) -> str:
    """A cell's finished trials against its target: "2/3", or "7 (target 3)" past it (a relaunch
    that lowered ``trials_per_cell`` from 7 to 3 printed "7/3"; a launch-UX audit)."""
    return f"{finished}/{target}" if finished <= target else f"{finished} (target {target})"


class Progress:
    """One line per cell (rich Live table on a terminal; off a terminal, a cell's line each time
    one of its runs finishes). A law-sampler study's cells show their runs (the budget is the
    sweep's), with the runs used of ``budget_runs`` in the table's title or at the end of each
    line. The counts and the best point are read from the cell's study as ``sweeper status``
    reads them (:func:`~sweeper.study.sweep.cell_counts`), so that the two never differ."""

    def __init__(self, sweep: str, cells: list[str], *, live: bool) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.sweep = sweep
        self.names = cells
        self.use_live = live and self.console.is_terminal
        self._live: Any = None
        self._said: dict[int, str] = {}  # (each cell's line printed last, off a terminal)
        self._counts: dict[int, CellCounts] = {}  # (each cell's counts, read as it changed)

    def start(self, searcher: CellSearcher) -> None:
        for i in range(len(searcher.cells)):
            self._read(searcher, i)
        if self.use_live:
            from rich.live import Live

            self._live = Live(self._table(searcher), console=self.console, refresh_per_second=4)
            self._live.start()
            return
        for i, c in self._counts.items():
            # (a cell with nothing stored yet says nothing: a law study's log began with a
            # "0 runs done; best -" line per cell before anything ran)
            if c.finished or c.failed or c.runs_open:
                self._say(searcher, i)

    def update(self, searcher: CellSearcher, i: int) -> None:
        self._read(searcher, i)
        if self._live is not None:
            self._live.update(self._table(searcher))
        else:
            self._say(searcher, i)

    def redraw(self, searcher: CellSearcher, i: int) -> None:
        """A run of cell ``i`` started: the live table again, its "running" column being the
        searcher's count (it was redrawn only as runs finished, so it said 0 while the first ones
        ran: a launch-UX audit). Nothing stored changed, so nothing is read, and a log, whose
        lines are one per finished run, prints nothing."""
        if self._live is not None:
            self._live.update(self._table(searcher))

    def _read(self, s: CellSearcher, i: int) -> CellCounts:
        """Cell ``i``'s counts from its study; its last ones when the storage cannot answer now
        (a display never stops a launch: the searcher's own writes say what went wrong)."""
        c = s.cells[i]
        try:
            self._counts[i] = cell_counts(c.cs.study, s.target, c.cs.cell.name)
        except Exception as e:
            logger.debug("progress: cannot read %s: %s", c.cs.cell.name, e)
        return self._counts.get(i) or self._kept(s, i)

    def _cell(self, s: CellSearcher, i: int) -> CellCounts:
        return self._counts.get(i) or self._read(s, i)

    @staticmethod
    def _kept(s: CellSearcher, i: int) -> CellCounts:
        """Cell ``i``'s counts as the searcher keeps them (the storage never answered)."""
        c = s.cells[i]
        return CellCounts(
            c.cs.cell.name, c.complete, c.running, c.failed, c.pruned, 0, s.target,
            c.best_loss, c.best_lr, c.best_batch, runs=c.runs, best_runs=1,
        )  # fmt: skip

    def _say(self, searcher: CellSearcher, i: int) -> None:
        """Print cell ``i``'s line unless it is the one printed last for it: a run that changed
        nothing stored (a seed that failed while its point's others run) prints no line."""
        line = self._line(searcher, i)
        if self._said.get(i) != line:
            self._said[i] = line
            self.console.print(line, soft_wrap=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _line(self, s: CellSearcher, i: int) -> str:
        c = self._cell(s, i)
        best = (
            f"best {c.best_loss:.4f} (lr {c.best_lr:.3g}, batch {c.best_batch_size}"
            + (f", mean of {c.best_runs} seeds)" if c.best_runs > 1 else ")")
            if c.best_loss is not None and c.best_lr is not None
            else "best -"
        )
        counts = (*failed_counts(c.failed, c.closed), (c.pruned, "pruned"))
        extra = "".join(f", {n} {what}" for n, what in counts if n)
        overall = f"; {self._used(s)}" if s.law else ""
        name = s.cells[i].cs.cell.name
        done = f"{self._done(s, i)} done{self._runs(s, i)}"
        return f"{self.sweep}/{name}: {done}{extra}; {best}{overall}"

    def _table(self, s: CellSearcher) -> Any:
        from rich.table import Table

        title = f"sweep {self.sweep}" + (f": {self._overall(s)}" if s.law else "")
        t = Table(title=title, title_justify="left")
        t.add_column("cell", no_wrap=True, min_width=max(len(n) for n in self.names))
        for col in ("done", "running", "failed", "pruned", "best loss", "lr", "batch"):
            t.add_column(col, justify="right")
        for i, state in enumerate(s.cells):
            c = self._cell(s, i)
            t.add_row(
                c.cell,
                self._done(s, i),
                str(state.running),
                str(c.failed - c.closed),  # (a trial closed when its driver stopped: no failure)
                str(c.pruned),
                "-" if c.best_loss is None else f"{c.best_loss:.4f}",
                "-" if c.best_lr is None else f"{c.best_lr:.3g}",
                "-" if c.best_batch_size is None else str(c.best_batch_size),
            )
        return t

    def _done(self, s: CellSearcher, i: int) -> str:
        """A cell's finished count: trials of its target, or (law sampler, whose budget is the
        sweep's) its runs, those of its open points included."""
        c = self._cell(s, i)
        runs = c.runs + c.runs_open
        return f"{runs} run{'s' if runs != 1 else ''}" if s.law else of_target(c.finished, s.target)

    def _runs(self, s: CellSearcher, i: int) -> str:
        """A grid cell's finished runs when a point has more than one seed (those of its open
        points included), so that a log prints a line per finished run, as the README says (it
        printed one per point: its seeds' lines were alike)."""
        if s.law or s.seeds == 1:
            return ""
        c = self._cell(s, i)
        runs = c.runs + c.runs_open
        return f", {runs} run{'s' if runs != 1 else ''}"

    def _used(self, s: CellSearcher) -> str:
        """The law sampler's runs used of its ``budget_runs``."""
        assert s.planner is not None
        return f"{self._runs_used(s)} of {s.planner.budget_runs} runs used"

    def _overall(self, s: CellSearcher) -> str:
        """The law sampler's budget: runs used of ``budget_runs``, and why its plan stopped."""
        from sweeper.study.sweep import law_progress

        assert s.planner is not None
        return law_progress(self._runs_used(s), s.planner.budget_runs, s.law_stop)

    def _runs_used(self, s: CellSearcher) -> int:
        """The runs of the COMPLETE trials in every cell: what ``budget_runs`` counts."""
        return sum(self._cell(s, i).runs for i in range(len(s.cells)))

"""What a study costs before it runs: ``sweeper validate STUDY --estimate``.

A short throughput probe trains the cheapest and the dearest cell of the ladder (by FLOPs per
token) for a few steps, exactly as a trial would run them (:func:`sweeper.run.trainable.train_once`:
the study's model, loop or function, its threads per trial and device), at the middle of the
search space. Each probe gives the seconds per training token and the fixed seconds of a run
(setup and the final evaluation). Cells in between are priced on the straight line through the
two probes in log(seconds per token) against log(FLOPs per token); a run of a cell costs
``fixed + tokens × seconds per token`` wall seconds, times the trial's CPUs in core-seconds.
Trials that run at once slow each other (memory bandwidth, shared caches), so each cell is probed
by as many processes at once as the sweep will run trials at once on this machine, and the median
is kept.

How many runs: ``trials_per_cell × seeds_per_point`` per cell (an upper bound when ASHA prunes).
The law sampler spends ``budget_runs`` in all, or what its plan can use when that is less
(:func:`~sweeper.study.spec.law_cap_runs`: every cell's every LR at its most runs; an audit's
10 million runs were priced for a study whose plan stops by 54): the start (:data:`START_LRS` runs
in every cell, cheapest first) is priced exactly, and the rest lies between all of it in the
cheapest cells and all of it in the dearest (each cell holding at most its LRs' most runs), so
its cost is a range. When the batch size is
searched, the probe runs at the smallest batch (the slowest per token): the training's cost is
then an upper bound.

The wall time adds what a launch spends besides training: Ray's start, Tune's cost per trial,
and the ``sweeper launch`` command's own start and exit (:data:`LAUNCH_S`, :data:`TRIAL_S`,
:data:`PROCESS_S`: typical figures of an otherwise idle 2-core machine, not probed). They
dominate a small sweep, so their CPU share (:data:`CPU_SHARE`) is scaled to the load the probe
found (:func:`load_factor`, the load over the machine's cores): unscaled, an audit's 6-run sweep
was priced at 2-3x less than it took under load, and its note said the figures were for that
load (a launch-UX audit); scaled whole, and by the load over the sweep's cores alone, small
studies were priced at 2-3.4x what they took (another audit).
What it does not know: other load on the machine while the sweep runs, the last trials running
alone, and a GPU's speed when probed on a CPU; the probe runs here, under the load it finds (its
1-minute load average is kept with the estimate and printed with this caveat).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from sweeper.study.ladder import Cell, cells
from sweeper.study.spec import StudySpec, law_cap_runs, law_lr_runs, law_lrs, law_max_runs

__all__ = [
    "CPU_SHARE",
    "LAUNCH_S",
    "PROBE_STEPS",
    "PROCESS_S",
    "TRIAL_S",
    "CellCost",
    "Estimate",
    "Probe",
    "cells_too_big",
    "duration",
    "estimate_study",
    "estimate_text",
    "load_average",
    "load_factor",
    "probe_cell",
    "probe_loaded",
]

#: optimizer steps of a timed probe (after one untimed warm-up step)
PROBE_STEPS = 12

#: The fixed costs below were measured on 2026-11-29 on this 2-core machine with
#: `sweeper -v launch` (Ray's start), the trials' Optuna start and end times and each run's
#: wall_s: a launch's fixed cost is its command's wall time less its runs' wall seconds over its
#: 2 workers. Idle (three launches each of studies/smoke.toml, 36 runs, 18 a worker, and of a
#: 4-run grid, 2 a worker, at a load average of 0.9-1.4 that was the launches' own): 14.9, 16.1
#: and 17.6 s for smoke, 14.8, 16.1 and 17.7 s for the 4 runs, of which 4.6-5.1 s outside the
#: summary's "finished in" and 2.9-4.7 s Ray's start. (The figures before these, 10 + 0.2 a trial
#: a worker + 3.7 s, priced smoke at 17.3 s and the 4 runs at 14.1 s.)
#:
#: wall seconds a launch spends besides its runs and :data:`PROCESS_S`, on an otherwise idle
#: machine: Ray's start, the first trial workers' start (importing torch), Tune's start and the
#: summary after the last trial (above: 16.1 s less 5.0 s less the trials' share)
LAUNCH_S: Final[float] = 10.5
#: wall seconds Ray Tune spends per trial beyond the run (scheduling, reporting, the searcher's
#: storage writes), per worker: too small to see above (smoke's 16 more trials a worker cost no
#: more than the 4-run grid's), at most about 0.1 s
TRIAL_S: Final[float] = 0.05
#: wall seconds of the ``sweeper launch`` command outside its summary's "finished in", on an
#: otherwise idle machine: its start (imports, the study) and its exit after the summary (Ray's
#: shutdown, the lease, the interpreter): 4.6-5.1 s in the six idle launches above. A launch
#: from Python pays only Ray's shutdown of it
PROCESS_S: Final[float] = 5.0
#: the share of the fixed costs that is CPU time and slows as :func:`load_factor` says; the rest
#: (Ray's and Tune's waits and polling, starting processes) takes as long under load. Fourteen
#: launches at a load average of 2.9-7.3 (other sessions' on these 2 cores) and the six idle
#: ones: fixed cost = 9.4 s + 7.5 s x load_factor (least squares; residual sd 7.3 s), 7.5 / 16.9
#: of it scaled. Scaling all of it (x load_factor) had priced smoke's fixed cost at 57-71 s
#: where its launches took about 26 s (an audit)
CPU_SHARE: Final[float] = 0.45


def load_factor(
    load_avg: float | None, cores: int | None, host_cores: int | None = None
) -> float:
    """How much slower a process runs under ``load_avg`` on a machine of ``host_cores`` cores
    (``os.cpu_count()``, the cores the load average counts; None: ``cores``, the cores the sweep
    may use): one more runnable process among ``load_avg`` others gets ``host_cores / (load + 1)``
    of a core, so ``max(1, (load + 1) / host_cores)``; 1 where the load is not known. The CPU
    share of the launch's fixed costs (:data:`CPU_SHARE`, measured idle) slows by it; the
    training itself is probed under the load and needs no factor. (The load had been divided by
    the cores of the affinity mask, not the machine's: under ``taskset -c 1`` on 2 cores the
    factor was load + 1, and the estimate 3.4x the launch; an audit. Pinned launches here took
    no longer than free ones: the other processes leave the pinned core to them.)"""
    if load_avg is None or not cores or not math.isfinite(load_avg):
        return 1.0
    host = max(host_cores or cores, cores)
    return max(1.0, (max(load_avg, 0.0) + 1.0) / host)


def duration(seconds: float) -> str:
    """``seconds`` for people: seconds below 2 minutes, minutes (to a tenth below 10) below 1.5
    hours, then hours (61-89 s had all read "1 min"; an audit)."""
    if seconds < 0.95:
        return f"{seconds:.1g} s"
    if seconds < 119.5:
        return f"{seconds:.0f} s"
    if seconds < 595:
        return f"{seconds / 60:.1f}".removesuffix(".0") + " min"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Probe:
    """One probed cell: seconds per training token and the fixed seconds of a run."""

    cell: str
    flops_per_token: float
    s_per_token: float
    fixed_s: float
    steps: int

    def run_s(self, tokens: float) -> float:
        return self.fixed_s + tokens * self.s_per_token


@dataclass(frozen=True)
class CellCost:
    """A cell's runs and what one costs (wall seconds of one run on its trial's resources)."""

    cell: str
    n_params: int
    tokens: int
    runs: int
    run_s: float

    def core_s(self, cpu: float) -> float:
        return self.runs * self.run_s * cpu


@dataclass(frozen=True)
class Estimate:
    """The study's expected cost. ``core_s`` is ``(low, high)``: equal unless the law sampler's
    budget leaves a range. ``wall_s`` assumes ``concurrent`` trials at once on this machine."""

    sweep: str
    cells: tuple[CellCost, ...]
    probes: tuple[Probe, ...]
    cpu_per_trial: float
    concurrent: int
    runs: int
    core_s: tuple[float, float]
    notes: tuple[str, ...] = field(default=())
    #: the machine's 1-minute load average as the probes started (None where the OS has none)
    load_avg: float | None = None
    #: the cores the trials share (:func:`estimate_study`'s ``cores``)
    cores: int | None = None
    #: the machine's cores, which its load average counts (``os.cpu_count()``; None: ``cores``)
    host_cores: int | None = None

    def __str__(self) -> str:  # (the dataclass's own ran past 1 KB of CellCost(...); an audit)
        return estimate_text(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython and Jupyter's display
        p.text(str(self))

    def __repr__(self) -> str:
        """One line: the runs, core-seconds and wall time; ``str`` is what ``sweeper validate
        --estimate`` prints."""
        lo, hi = self.wall_s
        return (
            f"<Estimate {self.sweep}: {self.runs} runs in {len(self.cells)} cells, "
            f"{_span(f'{self.core_s[0]:,.0f}', f'{self.core_s[1]:,.0f}', '-')} core-s, about "
            f"{_span(duration(lo), duration(hi), ' to ')} wall with {self.concurrent} trial(s) "
            f"at once, {len(self.notes)} note(s)>"
        )

    @property
    def load_factor(self) -> float:
        """A process's slowdown under the load at the probe (:func:`load_factor`)."""
        return load_factor(self.load_avg, self.cores, self.host_cores)

    @property
    def fixed_factor(self) -> float:
        """How much longer the launch's fixed costs take under the load at the probe than idle:
        their CPU share (:data:`CPU_SHARE`) slowed by :attr:`load_factor`, the rest as idle."""
        return 1.0 + CPU_SHARE * (self.load_factor - 1.0)

    @property
    def overhead_s(self) -> float:
        """Wall seconds of the launch that are not training: :data:`LAUNCH_S`, :data:`TRIAL_S`
        per trial on each of the ``concurrent`` workers and :data:`PROCESS_S`, scaled to the
        load at the probe (:attr:`fixed_factor`)."""
        idle = LAUNCH_S + TRIAL_S * self.runs / self.concurrent + PROCESS_S
        return idle * self.fixed_factor

    @property
    def caveat(self) -> str:
        """What every estimate leaves out, with the load it was probed under: the probe is one
        snapshot of the throughput (module docstring), and says what is scaled to that load and
        what is not (it said "the figures are for the load at the probe" while the launch's
        fixed costs were an idle machine's, 2-3x low under load: a launch-UX audit)."""
        cores = max(self.host_cores or 0, self.cores or 0)
        if self.load_avg is None:
            return (
                "the figures are for the load at the probe: the training was probed under it, "
                "but the launch's fixed costs are an idle machine's (this OS keeps no load "
                "average to scale them by); other load while the sweep runs, the last trials "
                "running alone and a GPU's speed when probed on a CPU are left out"
            )
        ours = "" if cores == (self.cores or 0) else f", {self.cores} of them the sweep's"
        at = f" (load average {self.load_avg:.2f} on {cores} core{'s' * (cores != 1)}{ours})"
        return (
            f"the figures are for the load at the probe{at}: the training was probed under it "
            f"and the launch's fixed costs, measured idle, are scaled to it "
            f"(x{self.fixed_factor:.2g}); other load while the sweep runs, the last trials "
            "running alone and a GPU's speed when probed on a CPU are left out"
        )

    @property
    def wall_s(self) -> tuple[float, float]:
        return tuple(  # type: ignore[return-value]
            c / self.cpu_per_trial / self.concurrent + self.overhead_s for c in self.core_s
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["core_hours"] = [c / 3600 for c in self.core_s]
        out["wall_s"] = list(self.wall_s)
        out["overhead_s"] = self.overhead_s
        out["load_factor"] = self.load_factor
        out["fixed_factor"] = self.fixed_factor
        out["caveat"] = self.caveat
        for c, cost in zip(out["cells"], self.cells, strict=True):
            c["core_s"] = cost.core_s(self.cpu_per_trial)
        return out


def estimate_text(est: Estimate) -> str:
    """The estimate as ``sweeper validate --estimate`` prints it under the cells, and as
    ``str(estimate)`` shows it: the probes, each cell's runs and cost, the total (core-s, core-h,
    the wall time and how much of it the launch's fixed costs are), then the notes and the
    caveat. One home for both (they were two: the API printed the dataclass)."""
    probes = ", ".join(
        f"{p.cell} {1 / p.s_per_token:,.0f} tok/s + {p.fixed_s:.1f} s" for p in est.probes
    )
    lines = [f"estimate (probe: {est.probes[0].steps} steps each; {probes}):",
             f"  {'cell':<20} {'runs':>5} {'s/run':>8} {'core-s':>9}"]  # fmt: skip
    lines += [f"  {c.cell:<20} {c.runs:>5} {c.run_s:>8.1f} {c.core_s(est.cpu_per_trial):>9,.0f}"
              for c in est.cells]  # fmt: skip
    lo, hi = est.core_s
    wlo, whi = est.wall_s
    span = _span(f"{lo:,.0f}", f"{hi:,.0f}", "-")
    hours = _span(f"{lo / 3600:.2g}", f"{hi / 3600:.2g}", "-")
    wall = _span(duration(wlo), duration(whi), " to ")
    # (the launch's fixed costs are constants, not probed: LAUNCH_S, TRIAL_S and PROCESS_S,
    # scaled to the load at the probe: the caveat's note says by how much)
    lines.append(
        f"  total: {est.runs} runs, {span} core-s ({hours} core-h); about {wall} wall with "
        f"{est.concurrent} trial(s) at once on this machine, {duration(est.overhead_s)} of it "
        "the command's start and exit, Ray's start and Tune's per-trial cost (typical figures "
        "measured on 2 cores, not probed)"
    )
    lines += [f"  note: {n}" for n in (*est.notes, est.caveat)]
    return "\n".join(lines)


def _span(lo: str, hi: str, sep: str) -> str:
    """A range as printed: one figure when both ends print alike ("25 s to 25 s" had read
    twice)."""
    return lo if lo == hi else f"{lo}{sep}{hi}"


#: (spec, cell, steps, copies at once) -> Probe
ProbeFn = Callable[[StudySpec, Cell, int, int], Probe]


def probe_cell(spec: StudySpec, cell: Cell, steps: int = PROBE_STEPS) -> Probe:
    """Time ``steps`` optimizer steps of ``cell`` as a trial of ``spec`` would train them (after an
    untimed one-step run that warms the process), at the probe point (:func:`_probe_params`).
    The fixed part (setup, final evaluation) is the wall time not spent in training steps; for a
    training function, which does not time its steps, it comes from a second, twice as long run."""
    from sweeper.run.trainable import train_once

    params = _probe_params(spec)
    per_step = int(params["batch_size"]) * cell.context

    def timed(n: int) -> dict[str, Any]:
        return train_once(_probe_config(spec, cell, params, tokens=n * per_step))

    timed(1)
    out = timed(steps)
    seen = max(int(out.get("tokens") or 0), 1)
    if not spec.train.function and out.get("tokens_per_s"):
        s_tok = 1.0 / float(out["tokens_per_s"])
        fixed = max(0.0, float(out["wall_s"]) - seen * s_tok)
    else:  # two lengths: wall = fixed + tokens × s_tok
        longer = timed(2 * steps)
        extra = max(int(longer.get("tokens") or 0) - seen, 1)
        s_tok = max(float(longer["wall_s"]) - float(out["wall_s"]), 1e-9) / extra
        fixed = max(0.0, float(out["wall_s"]) - seen * s_tok)
    return Probe(cell.name, cell.flops_per_token, s_tok, fixed, steps)


def probe_loaded(spec: StudySpec, cell: Cell, steps: int, copies: int) -> Probe:
    """:func:`probe_cell` in ``copies`` processes at once (the load of ``copies`` concurrent
    trials); the median of their figures."""
    if copies <= 1:
        return probe_cell(spec, cell, steps)
    ctx = multiprocessing.get_context("spawn")
    with _main_hidden(), ProcessPoolExecutor(copies, mp_context=ctx) as pool:
        got = list(pool.map(probe_cell, [spec] * copies, [cell] * copies, [steps] * copies))
    return Probe(
        cell.name,
        cell.flops_per_token,
        statistics.median(p.s_per_token for p in got),
        statistics.median(p.fixed_s for p in got),
        steps,
    )


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """A spawned process runs the parent's ``__main__`` file again (as ``__mp_main__``) unless the
    caller guards its code with ``if __name__ == "__main__"``: ``sweeper.estimate`` in a plain
    script re-ran the script three times and failed. The probes need nothing of ``__main__`` (they
    are given a spec and a cell), so it is hidden while their processes start."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    names: tuple[str, ...] = ("__file__", "__spec__")
    saved: dict[str, Any] = {k: main.__dict__.pop(k) for k in names if k in main.__dict__}
    if "__spec__" in saved:
        main.__spec__ = None  # (the module type defines the attribute: None is "none")
    try:
        yield
    finally:
        main.__dict__.update(saved)


def _probe_params(spec: StudySpec) -> dict[str, Any]:
    """The point a probe trains: the geometric middle of the LR's range (or of its values), the
    smallest batch size, and the middle of any other searched number (the first schedule)."""
    out: dict[str, Any] = {}
    for name, p in spec.search.items():
        if p.values is not None:
            vals = list(p.values)
            if name == "batch_size":
                out[name] = min(vals)
            elif name == "schedule":
                out[name] = vals[0]
            else:
                out[name] = sorted(vals)[len(vals) // 2]
        elif name == "batch_size":
            out[name] = int(p.low)  # type: ignore[arg-type]
        else:
            lo, hi = float(p.low), float(p.high)  # type: ignore[arg-type]
            out[name] = math.sqrt(lo * hi) if p.log and lo > 0 else (lo + hi) / 2
    return out


def _probe_config(
    spec: StudySpec, cell: Cell, params: dict[str, Any], *, tokens: int
) -> dict[str, Any]:
    from sweeper.run.trainable import base_config, own_config, trial_config
    from sweeper.study.spec import data_source

    base = {**base_config(spec, data_source(spec)), "own": own_config(spec)}
    return trial_config(base, spec, cell, params, seed=0, tokens=tokens)


def estimate_study(
    spec: StudySpec,
    *,
    steps: int = PROBE_STEPS,
    cores: int | None = None,
    probe: ProbeFn = probe_loaded,
) -> Estimate:
    """Probe the cheapest and the dearest cell of ``spec`` and price every run of the study
    (module docstring). ``cores``: the cores trials share (default: this machine's)."""
    from sweeper.run.trainable import usable_cores

    cpu = max(1.0, float(spec.resources.cpu))
    cores = cores or usable_cores()
    concurrent = max(1, math.floor(cores / cpu))
    if spec.resources.max_concurrent:
        concurrent = min(concurrent, spec.resources.max_concurrent)
    ladder = sorted(cells(spec), key=lambda c: (c.flops_per_token, c.name))
    ends = [ladder[0]] if len(ladder) == 1 else [ladder[0], ladder[-1]]
    if too_big := cells_too_big(spec, ends):
        from sweeper.errors import SweeperError

        raise SweeperError(f"--estimate cannot probe {too_big[0]}; a smaller ladder, or "
                           "validate without --estimate")  # fmt: skip
    from sweeper.errors import StudyError
    from sweeper.study.spec import check_data, check_data_content

    # (data that cannot be read, or too short for the context, had failed in the probe's run:
    # "internal error: ValueError"; validate and launch refuse it first, a spec built in Python
    # is refused here with the same line)
    if problems := check_data(spec) or check_data_content(spec):
        raise StudyError(problems, path=spec.source)
    load = load_average()
    probes = _probed(probe, spec, ends, steps, concurrent)
    costs = [CellCost(c.name, c.n_params, c.tokens, _runs_per_cell(spec), _price(probes, c))
             for c in ladder]  # fmt: skip
    notes = _notes(spec)
    if spec.sampler.kind == "law":
        seeds = spec.sweep.seeds_per_point
        runs = _law_runs(spec)  # (in whole points, at most what the plan can use)
        per_cell = len(law_lrs(spec.search)) * law_lr_runs(spec)
        costs, low, high = _law_budget(costs, runs, seeds, per_cell)
        core = (low * cpu, high * cpu)
    else:
        runs = sum(c.runs for c in costs)
        total = sum(c.core_s(cpu) for c in costs)
        core = (total, total)
    return Estimate(
        spec.name, tuple(costs), probes, cpu, concurrent, runs, core, notes, load, cores,
        host_cores=os.cpu_count(),
    )  # fmt: skip


def state_bytes(spec: StudySpec, cell: Cell) -> float:
    """The least memory a run of ``cell`` holds: its fp32 weights, and in the built-in loop their
    gradients and the optimizer's states (:func:`sweeper.recipe.memory.bytes_per_param`);
    activations are left out (a study's own ``train.function``: its weights alone)."""
    from sweeper.recipe.memory import bytes_per_param

    if spec.train.function is not None:
        return 4.0 * cell.n_params_total
    per = min(sum(bytes_per_param("fp32", spec.train.optimizer, matrix=m)) for m in (True, False))
    return float(per) * cell.n_params_total


def machine_memory() -> float | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def cells_too_big(spec: StudySpec, ladder: Sequence[Cell] | None = None) -> list[str]:
    """One line per cell whose run cannot fit in this machine's memory (:func:`state_bytes`),
    for a study that trains on CPUs; a GPU's memory is not known here. A widths ladder of 2^60
    or a depth of 1e9 had passed ``validate``, and ``--estimate`` then hung building the model."""
    from sweeper.recipe.memory import GIB
    from sweeper.run.trainable import device_kind

    have = machine_memory()
    if have is None or device_kind(spec) != "cpu":
        return []
    need = [(c, state_bytes(spec, c)) for c in (cells(spec) if ladder is None else ladder)]
    held = ("its weights alone" if spec.train.function is not None  # (a review: said all three)
            else "weights, gradients, optimizer state")  # fmt: skip
    return [f"{c.name}: {c.n_params_total:.3g} parameters need at least {b / GIB:,.3g} GiB "
            f"({held}), more than this machine's {have / GIB:,.3g} GiB"
            for c, b in need if b > have]  # fmt: skip


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS keeps none): the probe is one
    snapshot of the throughput under it (two estimates an audit ran back to back differed 2x)."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def _probed(
    probe: ProbeFn, spec: StudySpec, ends: list[Cell], steps: int, concurrent: int
) -> tuple[Probe, ...]:
    """The probes of the ``ends`` cells; a probe whose run raised in the study's own code is a
    SweeperError naming the cell and the exception (it read "internal error: TrialError")."""
    from sweeper.errors import SweeperError
    from sweeper.run.trainable import TrialError

    out = []
    for c in ends:
        try:
            out.append(probe(spec, c, steps, concurrent))
        except TrialError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SweeperError(
                f"--estimate: the throughput probe's run of {c.name} failed in the study's own "
                f"code: {first} (launch would fail the same way)"
            ) from None
    return tuple(out)


def _runs_per_cell(spec: StudySpec) -> int:
    return spec.trials_per_cell * spec.sweep.seeds_per_point


def _price(probes: Sequence[Probe], cell: Cell) -> float:
    """Wall seconds of one run of ``cell``: on the log-log line through the probes."""
    if len(probes) == 1 or probes[0].flops_per_token == probes[-1].flops_per_token:
        return probes[0].run_s(cell.tokens)
    lo, hi = probes[0], probes[-1]
    t = math.log(cell.flops_per_token / lo.flops_per_token) / math.log(
        hi.flops_per_token / lo.flops_per_token
    )
    s_tok = math.exp((1 - t) * math.log(lo.s_per_token) + t * math.log(hi.s_per_token))
    fixed = (1 - t) * lo.fixed_s + t * hi.fixed_s
    return fixed + cell.tokens * s_tok


def _law_runs(spec: StudySpec) -> int:
    """The runs a law study's estimate prices: its budget in whole points
    (:func:`~sweeper.study.spec.law_max_runs`), at most what its plan can use
    (:func:`~sweeper.study.spec.law_cap_runs`)."""
    return min(law_max_runs(spec), law_cap_runs(spec))


def _law_budget(
    costs: list[CellCost], budget: int, seeds: int = 1, per_cell: int | None = None
) -> tuple[list[CellCost], float, float]:
    """The law sampler's runs: :data:`START_LRS` points of ``seeds`` runs per cell, cheapest cell
    first, then the rest of ``budget`` (runs, in whole points: the searcher plans a point only
    while all its seeds fit) anywhere, a cell holding at most ``per_cell`` runs (None: no cap).
    Returns the per-cell start runs and the (low, high) wall-second total: the rest in the
    cheapest cells first, and in the dearest first."""
    from sweeper.fitting.allocation import START_LRS

    left, start, spent = budget, [], 0.0
    for c in sorted(costs, key=lambda c: c.run_s):
        n = min(START_LRS * seeds, left)
        left -= n
        spent += n * c.run_s
        start.append(CellCost(c.cell, c.n_params, c.tokens, n, c.run_s))
    room = {c.cell: math.inf if per_cell is None else max(per_cell - c.runs, 0) for c in start}

    def rest(order: list[CellCost]) -> float:
        todo, out = float(left), 0.0
        for c in order:
            n = min(todo, room[c.cell])
            todo -= n
            out += n * c.run_s
        return out + todo * order[-1].run_s  # (none left when runs <= the plan's cap)

    by_cost = sorted(start, key=lambda c: c.run_s)
    return start, spent + rest(by_cost), spent + rest(by_cost[::-1])


def _notes(spec: StudySpec) -> tuple[str, ...]:
    out = []
    b = spec.search.batch_size
    if not b.is_fixed:
        out.append("the batch size is searched: probed at its smallest value, the slowest per "
                   "token, so the training's core-s are an upper bound")  # fmt: skip
    if spec.pruner.kind == "asha":
        # (it said "the figures are an upper bound": a launch took 3.3x its wall figure, whose
        # fixed costs a stopped run pays in full; a launch-UX audit)
        out.append("ASHA stops runs early: the run count and the training's core-s are upper "
                   "bounds (a stopped point runs no more seeds); the wall time is no bound: its "
                   "fixed costs are typical figures, which a stopped run pays in full")  # fmt: skip
    if spec.sampler.kind == "law":
        out.append(f"law sampler: {_law_runs(spec)} runs at most (fewer if its stopping "
                   "rule is met); the start is priced per cell, the rest as a range between the "
                   "cheapest and the dearest cells")  # fmt: skip
        if (cap := law_cap_runs(spec)) < law_max_runs(spec):
            n_lrs, per_lr = len(law_lrs(spec.search)), law_lr_runs(spec)
            out.append(f"budget_runs {spec.sampler.budget_runs:,} is more than the plan can use: "
                       f"priced its {cap:,} runs (every cell's {n_lrs} LRs at {per_lr} runs "
                       "each)")  # fmt: skip
    if spec.resources.gpu > 0:
        out.append("the study asks for a GPU: the probe ran on this machine's device")
    return tuple(out)

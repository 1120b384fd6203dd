"""Running a transfer check: train the held-out cell at the planned LRs through the same launch
machinery and storage as a sweep, extend the grid until the best point is bracketed, and store
the result (:func:`run_transfer`).

A check is a one-cell sweep ``<sweep>.transfer.<cell>`` (:func:`transfer_sweep_name`). Asking more
seeds later adds them in a sweep of their own beside it, ``<check>.seeds-<first>-<last>``
(:func:`seed_blocks`); planned again after the law moved, a check keeps what it trained and
trains the new LRs beside it (:func:`with_fills`). What to train and how to score it are the pure
functions of :mod:`sweeper.transfer.plan`.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

from sweeper.errors import Interrupted, SweeperError
from sweeper.fitting.methods import DEFAULT_METHOD
from sweeper.study import storage
from sweeper.transfer.plan import (
    GRID_CAP_OCTAVES,
    GRID_STEP,
    SAME,
    TransferPlan,
    TransferResult,
    as_trained,
    finished,
    next_grid_step,
    one_run_per_seed,
    plan_transfer,
    summarize_transfer,
)

if TYPE_CHECKING:
    from sweeper.study.handle import Sweep
    from sweeper.study.spec import StudySpec
    from sweeper.transfer.holdout import HeldCell

__all__ = [
    "SeedBlock",
    "run_transfer",
    "seed_blocks",
    "stored_transfers",
    "transfer_sweep_name",
    "with_fills",
]


def transfer_sweep_name(
    sweep: str,
    cell: str,
    fit_cells: str | None = None,
    method: str = "parabola",
    surface: str = "standard",
) -> str:
    """The one-cell sweep that holds the check of ``cell`` from the fit set ``fit_cells`` (a
    filter expression; None: every other cell) by ``method`` (with the surface's ``surface``
    settings). Each fit set and method has its own: a check by another one plans other LRs, and
    must not start over the trained evidence of this one."""
    name = f"{sweep}.transfer.{cell}"
    if method != "parabola":
        name += f".{method}" + (
            f"-{surface}" if method == "surface" and surface != "standard" else ""
        )
    if not fit_cells:
        return name
    slug = "".join(fit_cells.split())
    for op, word in (("<=", "-le-"), (">=", "-ge-"), ("==", "-eq-"), ("<", "-lt-"), (">", "-gt-")):
        slug = slug.replace(op, word)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", slug.replace("=", "-eq-").replace(",", "_"))
    return f"{name}.fit-{slug}"


def run_transfer(
    sw: Sweep,
    *,
    holdout: str = "largest",
    fit_cells: str | None = None,
    seeds: int = 2,
    method: str = DEFAULT_METHOD,
    surface: str = "standard",
    max_concurrent: int | None = None,
    progress: bool = True,
    verbose: int = 0,
    max_rounds: int = 8,
) -> TransferResult:
    """Plan, train the held-out cell at the planned LRs (``seeds`` seeds each), extend the grid
    until the best point is bracketed (at most ``max_rounds`` launches), summarize and store."""
    from sweeper.fitting.provenance import sweep_conventions
    from sweeper.study.spec import check_max_concurrent
    from sweeper.transfer.holdout import cell_filter

    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise SweeperError(f"seeds (--seeds) must be an integer >= 1, got {seeds!r}")
    check_max_concurrent(max_concurrent)
    if sw.spec is None:
        why = sw.spec_error or (
            "it was imported without its study (sweeper import FILE --study TOML stores it)"
        )
        raise SweeperError(f"cannot train a held-out cell of sweep {sw.name!r}: {why}")
    runs = sw.runs()
    plan = plan_transfer(
        runs,
        sweep=sw.name,
        holdout=holdout,
        fit_cells=cell_filter(fit_cells) if fit_cells is not None else None,
        spec=sw.spec,
        method=method,
        surface=surface,
        conventions=sweep_conventions(sw),
    )
    _refuse_no_proxy(sw, runs, plan.holdout)
    name = _check_name(sw, plan, runs, fit_cells, method, surface)
    best = _best_params(runs, plan.holdout.name) if plan.holdout.in_sweep else {}
    _refuse_invalid(_transfer_spec(sw.spec, plan, SeedBlock(name, 0, seeds), 1, best), plan)
    stored = _check_runs(name, sw.url)  # (read once: a read-only block is never trained)
    known = [lr for t in stored.values() for lr in t["lr"].dropna().unique()]
    plan = plan.snapped(known).with_trained(known).rounded()  # (a new block trains them all)

    spec = sw.spec

    def moved(b: SeedBlock) -> bool:  # (launched from an earlier plan's LR grid)
        return _grid_moved(_transfer_spec(spec, plan, b, 1, best), sw.url)

    blocks = with_fills(seed_blocks(name, sw.url, seeds), sw.url, moved)
    read = {b.name: stored[b.name] for b in blocks if b.read_only}
    done = _complete_lrs(blocks, read)

    def all_runs() -> pd.DataFrame:
        tables = [read[b.name] if b.read_only else b.runs(sw.url) for b in blocks]
        return one_run_per_seed(pd.concat(tables, ignore_index=True))

    if progress:
        _say_cost(sw, plan, runs, stored, seeds)
    for launch in range(1, max_rounds + 1):
        plan = plan.rounded()
        for block in blocks:
            if not block.read_only:
                skip = done.get(block.fills or "", [])
                _train_points(sw, plan, block, skip, best, max_concurrent, progress, verbose)
        trained = all_runs()
        plan = plan.with_trained(trained["lr"].dropna().unique().tolist())
        cell_runs = pd.concat([runs[runs["cell"] == plan.holdout.name], trained])
        k = next_grid_step(plan, cell_runs)
        if k is None or launch == max_rounds:  # (never plan a point that will not be trained)
            break
        plan = plan.with_grid((k,))
    result = summarize_transfer(plan, runs, trained)
    _store_result(name, sw.url, result)
    return result


@dataclass(frozen=True)
class SeedBlock:
    """One one-cell sweep of a check: the seeds ``first`` .. ``first + count - 1`` of every point.
    ``imported``: its runs were brought in with ``sweeper import``; ``frozen``: it was launched
    from an earlier plan (the law moved: more runs in the ladder, a refit); both are read, never
    trained. ``fills``: the read-only block whose seeds this one trains at the LRs it lacks."""

    name: str
    first: int
    count: int
    imported: bool = False
    fills: str | None = None
    frozen: bool = False

    @property
    def read_only(self) -> bool:
        return self.imported or self.frozen

    def runs(self, url: str | None) -> pd.DataFrame:
        return _block_runs(self.name, self.imported, url)

    def complete_lrs(self, runs: pd.DataFrame) -> list[float]:
        """The LRs at which every seed of the block has a finished run (COMPLETE, or diverged)
        in ``runs`` (the block's own)."""
        seeds = runs[finished(runs)]
        want = set(range(self.first, self.first + self.count))
        return [
            float(lr)
            for lr, g in seeds.groupby("lr")["seed"]
            if want <= {int(x) for x in g.dropna()}
        ]


def seed_blocks(name: str, url: str | None, seeds: int) -> list[SeedBlock]:
    """The sweeps that hold the seeds of the check ``name``, in seed order, for at least
    ``seeds`` seeds per point. The check's own sweep holds the seeds it was first run with (or
    imported with); a later, larger ``seeds`` adds the missing ones as a sweep of their own,
    ``<name>.seeds-<first>-<last>``, so that nothing trained is trained again. A check that holds
    more seeds than asked keeps them all: seeds grow, they are never dropped. Which of them are
    read only, and the fills that train beside them, is :func:`with_fills`."""
    row = storage.get_sweep(name, url)
    if row is None:
        return [SeedBlock(name, 0, seeds)]
    if row["kind"] == "imported":
        from sweeper.study.importer import load_runs

        stored = load_runs(name, url)["seed"].dropna()
        if stored.empty:
            raise SweeperError(f"the imported check {name} has no seed column: nothing to read")
        head = SeedBlock(name, 0, int(stored.max()) + 1, imported=True)
    else:
        head = SeedBlock(name, 0, int(row["meta"].get("seeds_per_point") or 1))
    blocks = [head]
    pattern = re.compile(re.escape(name) + r"\.seeds-(\d+)-(\d+)")
    grown = sorted(
        (int(m[1]), int(m[2]), r["kind"] == "imported")
        for r in storage.list_sweeps(url)
        if (m := pattern.fullmatch(r["name"]))
    )
    covered = head.count
    for first, last, imported in grown:
        if first == covered and last >= first:
            block = SeedBlock(f"{name}.seeds-{first}-{last}", first, last - first + 1, imported)
            blocks.append(block)
            covered = last + 1
    if seeds > covered:
        blocks.append(SeedBlock(f"{name}.seeds-{covered}-{seeds - 1}", covered, seeds - covered))
    return blocks


def _block_runs(name: str, imported: bool, url: str | None) -> pd.DataFrame:
    """The runs of one block of a check (none when it was not launched yet)."""
    from sweeper.study.importer import load_runs
    from sweeper.study.runs import empty_runs
    from sweeper.study.sweep_runs import load_sweep_runs

    if imported:
        return load_runs(name, url)
    if storage.get_sweep(name, url) is None:  # (not launched yet: nothing queued)
        return empty_runs()
    return load_sweep_runs(name, url)


def _check_runs(name: str, url: str | None) -> dict[str, pd.DataFrame]:
    """Every stored block of the check ``name`` (its own sweep, seed blocks and fills) → its
    runs."""
    block = re.compile(re.escape(name) + r"(\.seeds-\d+-\d+)?(\.fill)*")
    return {
        r["name"]: _block_runs(r["name"], r["kind"] == "imported", url)
        for r in storage.list_sweeps(url)
        if block.fullmatch(r["name"])
    }


def with_fills(
    blocks: Sequence[SeedBlock], url: str | None, moved: Callable[[SeedBlock], bool]
) -> list[SeedBlock]:
    """``blocks`` (:func:`seed_blocks`), then the fills that train beside the read-only ones. A
    block is read only when it was imported (a check carried to another storage as CSV) or when
    ``moved`` says it was launched from an earlier plan's LR grid (its runs are kept: they
    measured this cell at their LRs). The LRs a read-only block lacks (the new plan's, or a grid
    the check extends later) are trained for its seeds in ``<block>.fill``, listed after the seed
    blocks; a fill that is itself read only gets its own fill, and so on."""
    heads, fills = [], []
    for b in blocks:
        b = replace(b, frozen=not b.imported and moved(b))
        heads.append(b)
        while b.read_only:
            row = storage.get_sweep(f"{b.name}.fill", url)
            b = SeedBlock(
                f"{b.name}.fill",
                b.first,
                b.count,
                imported=row is not None and row["kind"] == "imported",
                fills=b.name,
            )
            b = replace(b, frozen=not b.imported and moved(b))
            fills.append(b)
    return heads + fills


def _complete_lrs(
    blocks: Sequence[SeedBlock], read: Mapping[str, pd.DataFrame]
) -> dict[str, list[float]]:
    """Read-only block → the LRs at which every one of its seeds finished, in it or in the
    read-only blocks it fills (a fill of it trains the others)."""
    done: dict[str, list[float]] = {}
    for b in blocks:  # (a fill is listed after the block it fills)
        if b.read_only:
            done[b.name] = sorted({*done.get(b.fills or "", []), *b.complete_lrs(read[b.name])})
    return done


def _train_points(
    sw: Sweep,
    plan: TransferPlan,
    block: SeedBlock,
    skip: Sequence[float],
    best: Mapping[str, Any],
    max_concurrent: int | None,
    progress: bool,
    verbose: int,
) -> None:
    """Launch (or resume) one seed block of the check so that every LR of ``plan`` but those in
    ``skip`` (trained for these seeds elsewhere) is trained."""
    from sweeper.run.launch import launch_study
    from sweeper.study.sweep import open_sweep

    assert sw.spec is not None
    lrs = sorted(
        lr
        for lr in set(plan.lrs.values())
        if not any(math.isclose(lr, s, rel_tol=SAME) for s in skip)
    )
    if not lrs:
        return  # (a fill block with nothing to fill)
    tspec = _transfer_spec(sw.spec, plan, block, len(lrs), best)
    _refuse_invalid(tspec, plan, code=True)  # (here: a check with nothing to train needs no data)
    (cs,) = open_sweep(tspec, sw.url, force_new=_changed(tspec, sw.url))
    asked = {round(float(t.params["lr"]), 12) for t in cs.study.trials if "lr" in t.params}
    waiting = {round(float(t.system_attrs.get("fixed_params", {}).get("lr", -1)), 12)
               for t in cs.study.trials if not t.params}  # fmt: skip
    for lr in lrs:
        key = round(lr, 12)
        if key not in asked and key not in waiting:
            cs.study.enqueue_trial({"lr": lr, "batch_size": plan.holdout.batch_size})
    summary = launch_study(
        tspec, url=sw.url, max_concurrent=max_concurrent, progress=progress, verbose=verbose
    )
    if summary.interrupted:  # scoring a check cut short said "no completed transfer run"
        raise Interrupted(summary.interrupted)


def _refuse_invalid(tspec: StudySpec, plan: TransferPlan, *, code: bool = False) -> None:
    """Refuse the check's one-cell study ``tspec`` as the launch would, before any sweep of it is
    created, saying what is wrong with the held-out cell when the study's rules reject it (an
    audit's w24 under head_dim 16 was refused as "sweep:width_sp (as changed in Python)" after
    its sweep was created with 9 trials queued). ``code``: also the rules of a study about to run
    here (its data, its own code: :func:`~sweeper.study.spec.check_spec`)."""
    from sweeper.errors import StudyError
    from sweeper.study.spec import check_spec

    problems = check_spec(tspec, code=code)
    if not problems:
        return
    cell = any(p.startswith("ladder") for p in problems)
    what = "the held-out cell is not valid for" if cell else "the check cannot train under"
    raise StudyError(problems, path=f"holdout (--holdout) {plan.holdout.name}: {what} the study of "
                     f"sweep {plan.sweep}")  # fmt: skip


def _say_cost(
    sw: Sweep,
    plan: TransferPlan,
    runs: pd.DataFrame,
    stored: Mapping[str, pd.DataFrame],
    seeds: int,
) -> None:
    """Say, before anything trains, how many runs the first round trains in the held-out cell
    (each planned LR's seeds not yet finished in the check's ``stored`` runs) and about what they
    cost (:func:`_run_cost`; an audit's check began training a cell 64x the sweep's largest
    unannounced; another's resume and added seeds were announced as 4 runs, or not at all,
    where 6 and 9 trained: an LR with any run had counted as done)."""
    finished = [t[t["state"] == "COMPLETE"] for t in stored.values() if "state" in t]
    done = pd.concat(finished, ignore_index=True) if finished else pd.DataFrame()
    todo = {}
    for lr in set(plan.lrs.values()):
        at = done[np.isclose(done["lr"], lr, rtol=SAME)] if len(done) else done
        left = seeds - (at["seed"].nunique() if "seed" in at else len(at))
        if left > 0:
            todo[lr] = left
    if not todo:
        return
    held = plan.holdout
    cores = float(sw.spec.resources.cpu) if sw.spec is not None else 1.0
    cost = _run_cost(runs, held)
    each = f" (about {cores * cost[0]:.3g} core-seconds each: {cost[1]})" if cost else ""
    print(
        f"validate-transfer: {held.name}: {sum(todo.values())} run(s) to train first, at "
        f"{len(todo)} LR(s) of {seeds} seed{'s' if seeds != 1 else ''}{each}; more if the grid "
        "must be extended",
        file=sys.stderr,
    )


#: core-seconds a run of a held-out cell may be estimated to take (11.6 core-days): beyond it the
#: cell is no proxy, likely a mistyped name (an API audit's t819000000k trained, at 19 years a run)
MAX_RUN_CORE_S: Final[float] = 1e6


def _refuse_no_proxy(sw: Sweep, runs: pd.DataFrame, held: HeldCell) -> None:
    """SweeperError before any training when a run of ``held`` is estimated (:func:`_run_cost`)
    above :data:`MAX_RUN_CORE_S`."""
    cost = _run_cost(runs, held)
    cores = float(sw.spec.resources.cpu) if sw.spec is not None else 1.0
    if cost is None or cores * cost[0] <= MAX_RUN_CORE_S:
        return
    n_max = float(runs["n_params"].max())
    d_max = float(runs["tokens"].max())
    raise SweeperError(
        f"held-out cell {held.name}: a run would take about {cores * cost[0] / 86400:.3g} "
        f"core-days ({cost[1]}; N {held.n_params / n_max:.3g}x and D {held.tokens / d_max:.3g}x "
        "the sweep's largest): that is no proxy run; check the cell's name"
    )


def _run_cost(runs: pd.DataFrame, held: HeldCell) -> tuple[float, str] | None:
    """About how many seconds a run of ``held`` takes, and what that is based on, from the
    median wall time of each cell's finished runs in the sweep: the held-out cell's own; between
    two cells, theirs interpolated in log N·D; below the smallest, the smallest's; beyond the
    largest, the largest's scaled by N·D. (Scaling the largest down by N·D had announced w32's
    runs at 2.5 s where they took 24: fixed costs per step dominate a small cell, an audit.)
    None when no finished run has a wall time."""
    by = _cell_walls(runs)
    if by.empty:
        return None
    nd = held.n_params * held.tokens
    lo, hi = by.iloc[0], by.iloc[-1]
    if held.name in by.index:
        own = by.loc[held.name]
        return float(own["wall"]), f"the median of {held.name}'s {int(own['n'])} runs in the sweep"
    if nd <= lo["nd"]:
        why = f"the smallest cell's median ({lo.name}; a smaller one is not much cheaper)"
        return float(lo["wall"]), why
    if nd >= hi["nd"]:
        why = f"the largest cell's median ({hi.name}) scaled by N·D"
        return float(hi["wall"] * nd / hi["nd"]), why
    j = int(np.searchsorted(by["nd"].to_numpy(), nd))
    a, b = by.iloc[j - 1], by.iloc[j]
    t = math.log(nd / a["nd"]) / math.log(b["nd"] / a["nd"])
    wall = math.exp((1 - t) * math.log(a["wall"]) + t * math.log(b["wall"]))
    return wall, f"the medians of {a.name} and {b.name} interpolated in log N·D"


def _cell_walls(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell of ``runs`` (by N·D): its N·D (``nd``), and the median wall time (``wall``) and
    number (``n``) of its finished runs that have one."""
    done = runs[finished(runs) & (runs["wall_s"] > 0)]
    return (
        done.assign(nd=done["n_params"] * done["tokens"])
        .groupby("cell")
        .agg(nd=("nd", "first"), wall=("wall_s", "median"), n=("wall_s", "size"))
        .dropna()
        .sort_values("nd")
    )


def _check_name(
    sw: Sweep,
    plan: TransferPlan,
    runs: pd.DataFrame,
    fit_cells: str | None,
    method: str,
    surface: str,
) -> str:
    """The check's sweep: a filter that keeps every cell but the held-out one is no filter, the
    same check (an audit's "width<=32" with w48 held out retrained the whole check under a new
    name), unless a check under the filter's name exists already (trained or imported so)."""
    filtered = transfer_sweep_name(sw.name, plan.holdout.name, fit_cells, method, surface)
    others = set(runs["cell"].astype(str)) - {plan.holdout.name}
    if not fit_cells or {*plan.fit_cells, *plan.unfitted} != others:
        return filtered
    if storage.get_sweep(filtered, sw.url) is not None:
        return filtered
    return transfer_sweep_name(sw.name, plan.holdout.name, None, method, surface)


def _changed(tspec: StudySpec, url: str | None) -> bool:
    """Whether the check's sweep exists from a study that measures something else (the sweep's
    study changed: model, data, training): it is started over. A block launched from the same
    study on an earlier plan's LR grid is read only instead (:func:`_grid_moved`)."""
    from sweeper.study.study_toml import spec_hash

    row = storage.get_sweep(tspec.name, url)
    if row is None or row.get("spec_hash") == spec_hash(tspec):
        return False
    old = _launched_spec(row)
    return old is None or spec_hash(old) != spec_hash(tspec)


def _grid_moved(tspec: StudySpec, url: str | None) -> bool:
    """Whether the check's sweep ``tspec.name`` was launched from ``tspec`` but for its LR grid:
    the study of an earlier plan, centred on another prediction."""
    from sweeper.study.study_toml import spec_hash

    row = storage.get_sweep(tspec.name, url)
    if row is None or row["kind"] == "imported" or row.get("spec_hash") == spec_hash(tspec):
        return False
    old = _launched_spec(row)  # (hashed again: the row's hash may be an older definition's)
    if old is None or spec_hash(old) == spec_hash(tspec):
        return False
    same_grid = replace(tspec, search=replace(tspec.search, lr=old.search.lr))
    return spec_hash(same_grid) == spec_hash(old)


def _launched_spec(row: Mapping[str, Any]) -> StudySpec | None:
    """The study a check's sweep was launched from, None when it no longer parses (an older
    Sweeper's file: the check is started over, as any changed study)."""
    from sweeper.errors import StudyError
    from sweeper.study.spec import parse_study_toml

    try:
        return parse_study_toml(row["study_toml"], source=f"sweep:{row['name']}")
    except StudyError:
        return None


def _best_params(runs: pd.DataFrame, cell: str) -> dict[str, Any]:
    """The searched values (besides the LR) of the best completed run of ``cell``, read from the
    runs table (so that an imported sweep with its study works like a launched one)."""
    done = runs[(runs["cell"] == cell) & (runs["state"] == "COMPLETE") & ~runs["diverged"]]
    done = done[np.isfinite(done["loss"].astype(float))]
    if done.empty:
        return {}
    best = done.loc[done["loss"].astype(float).idxmin()]
    return {
        hp: float(best[hp])
        for hp in ("warmup", "weight_decay", "beta2")
        if hp in best.index and pd.notna(best[hp])
    }


def _candidates(plan: TransferPlan) -> list[float]:
    """Every LR the check may train: the planned points and the whole sqrt(2) grid within the
    cap (a grid sampler needs them all up front; only the queued ones are asked)."""
    center = plan.grid_center
    n = int(GRID_CAP_OCTAVES * 2)
    grid = [as_trained(center * GRID_STEP**k) for k in range(-n, n + 1)]
    return sorted({*grid, *plan.lrs.values()})


def _transfer_spec(
    spec: StudySpec, plan: TransferPlan, block: SeedBlock, points: int, best: Mapping[str, Any]
) -> StudySpec:
    """The one-cell study that trains the held-out cell at the planned LRs (a grid sampler over
    every candidate LR; the ``points`` LRs to train are queued and ``trials_per_cell`` counts
    them), the ``block``'s seeds each, the batch and the other searched hyperparameters fixed (at
    the cell's best trial in the sweep: the law only predicts the LR)."""
    from sweeper.study.spec import CellSpec, LadderSpec, ParamSpec, PrunerSpec, SamplerSpec

    held = plan.holdout
    search = replace(
        spec.search,
        lr=ParamSpec.grid(_candidates(plan)),
        batch_size=ParamSpec.fixed(held.batch_size, integer=True),
    )
    for hp in ("warmup", "weight_decay", "beta2"):
        p = getattr(search, hp)
        if p is not None and not p.is_fixed:
            if hp not in best:
                raise SweeperError(
                    f"holdout (--holdout) {held.name}: the sweep searched {hp}; hold out one of "
                    "its cells"
                )
            search = replace(search, **{hp: ParamSpec.fixed(float(best[hp]))})
    return replace(
        spec,
        sweep=replace(
            spec.sweep,
            name=block.name,
            trials_per_cell=points,
            seeds_per_point=block.count,
            first_seed=block.first,
            description=f"transfer check of {plan.sweep} on {held.name}",
        ),
        ladder=LadderSpec(
            cells=(CellSpec(width=held.width, depth=held.depth, tokens=int(held.tokens)),)
        ),
        search=search,
        sampler=SamplerSpec(kind="grid", seed=0),
        pruner=PrunerSpec(),  # divergence only: every point must finish
    )


def _store_result(name: str, url: str | None, result: TransferResult) -> None:
    """Record ``result`` in the meta of the transfer sweep ``name``."""
    import json
    from datetime import datetime, timezone

    import sqlalchemy as sa

    row = storage.get_sweep(name, url)
    meta = dict(row["meta"]) if row else {}
    meta["transfer_result"] = result.to_dict()
    meta["transfer_stored_at"] = datetime.now(timezone.utc).isoformat()
    with storage.transaction(url) as conn:
        conn.execute(
            sa.update(storage.sweeps_table)
            .where(storage.sweeps_table.c.name == name)
            .values(meta_json=json.dumps(meta))
        )


def stored_transfers(sweep: str, url: str | None = None) -> list[dict[str, Any]]:
    """Every transfer result stored for ``sweep``, one per check (held-out cell, fit filter and
    method: one check sweep each), the one stored last first: by the time each was stored (an
    audit's rerun of an older check was not shown: the order had been the check sweeps'
    creation); results stored before that was kept come after, the last created first."""
    prefix = f"{sweep}.transfer."
    rows = [r for r in storage.list_sweeps(url) if r["name"].startswith(prefix)]
    kept = [(r["meta"].get("transfer_stored_at") or "", i, r["meta"]["transfer_result"])
            for i, r in enumerate(rows) if r["meta"].get("transfer_result")]  # fmt: skip
    return [dict(k[2]) for k in sorted(kept, key=lambda k: (k[0], k[1]), reverse=True)]

"""Ray Tune's part played without Ray: a :class:`~sweeper.run.searcher.CellSearcher` driven by
hand, so that the searcher's bookkeeping (failed points queued again, the failure cap, resumes) is
tested in seconds and deterministically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweeper.study.spec import StudySpec, parse_study_toml

#: a one-cell grid study of seconds (w16, one block, 16k tokens, one seed a point)
_GRID = """\
[sweep]
name = "{name}"
seeds_per_point = 1

[model]
context = 32

[ladder]
widths = [16]
depths = [1]
tokens = [16384]

[search]
lr = {{ values = {lrs} }}
batch_size = 8

[sampler]
kind = "grid"
"""


def grid_toml(name: str, lrs: Sequence[float] = (1e-3, 2e-3, 4e-3)) -> str:
    """The text of a one-cell grid study ``name`` over ``lrs``, for tests to extend."""
    return _GRID.format(name=name, lrs=list(lrs))


def grid_study(name: str, lrs: Sequence[float] = (1e-3, 2e-3, 4e-3)) -> StudySpec:
    """:func:`grid_toml` read."""
    return parse_study_toml(grid_toml(name, lrs))


def drive(
    searcher: Any,
    *,
    crash: Any = lambda cfg: False,
    user_error: Any = lambda cfg: False,
    concurrent: int = 2,
    budget: int = 50,
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Play Ray Tune's part: ask for runs while the searcher gives them, finish the oldest live one
    (crashed when ``crash(config)``; ended by the study's own code, as the trainable ends such a
    run, when ``user_error(config)``; else a final result, with ``extra`` in it), until the
    searcher says FINISHED."""
    from ray.tune.search import Searcher

    live: list[tuple[str, dict[str, Any]]] = []
    started: list[dict[str, Any]] = []
    for i in range(budget):
        cfg = searcher.suggest(f"r{i}")
        if cfg == Searcher.FINISHED:
            assert not live
            return started
        if cfg is not None:
            live.append((f"r{i}", cfg))
            started.append(cfg)
            if len(live) < concurrent:
                continue
        assert live, "the searcher neither gave a run nor finished"
        rid, done = live.pop(0)
        if crash(done):
            searcher.on_trial_complete(rid, error=True)
        elif user_error(done):
            from sweeper.run.trainable import USER_ERROR

            ended = {"final": True, "loss": float("nan"), USER_ERROR: "f: ValueError: boom\n"}
            searcher.on_trial_complete(rid, result=ended)
        else:
            loss = 3.0 + done["params"]["lr"]
            result = {"final": True, "loss": loss, "val_loss": loss, "diverged": False}
            result.update(extra or {})
            searcher.on_trial_complete(
                rid, result={**result, "tokens": 16384, "wall_s": 1.0, "tokens_per_s": 1e4}
            )
    raise AssertionError("the searcher did not finish")


def open_searcher(spec: StudySpec, url: str, max_concurrent: int = 2) -> Any:
    """The searcher a launch would make over the study's cells in the storage (each reconciled)."""
    from sweeper.run.searcher import CellSearcher
    from sweeper.study.samplers import reconcile
    from sweeper.study.sweep import open_sweep

    css = open_sweep(spec, url)
    for cs in css:
        reconcile(cs.study)
    return CellSearcher(spec, css, max_concurrent=max_concurrent, base_config={})

"""What a relaunch refused as another study says (a launch audit): a [search] key written at the
value the runs used gets the edit that relaunches, not only --force-new (which deletes the
trials), and a changed law [target] names the default the first launch recorded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweeper.errors import StorageError
from sweeper.study.spec import ParamSpec, TargetSpec
from sweeper.study.sweep import open_sweep
from tests.sweeper.run.fake_tune import drive, grid_study, open_searcher
from tests.sweeper.run.test_law_sampler_audit import law


def test_a_search_key_at_its_default_names_the_edit_that_relaunches(sqlite_url: str) -> None:
    spec = law("defaults")
    drive(open_searcher(spec, sqlite_url))
    written = replace(spec, search=replace(spec.search, warmup=ParamSpec.fixed(0.1)))
    with pytest.raises(StorageError) as e:
        open_sweep(written, sqlite_url)
    said = str(e.value)
    assert "delete warmup from [search] to relaunch the sweep" in said
    assert "--force-new" not in said
    other = replace(spec, search=replace(spec.search, warmup=ParamSpec.fixed(0.2)))
    with pytest.raises(StorageError, match="--force-new"):  # (another value: another study)
        open_sweep(other, sqlite_url)


def test_a_changed_target_names_the_recorded_default(sqlite_url: str) -> None:
    spec = law("recorded")
    searcher = open_searcher(spec, sqlite_url)
    drive(searcher)
    recorded = searcher.planner.target["n_params"]
    with pytest.raises(StorageError) as e:
        open_sweep(replace(spec, target=TargetSpec(params=3 * recorded)), sqlite_url)
    assert f"target.params: {recorded!r} -> {3 * recorded!r}" in str(e.value)


def test_more_grid_lrs_name_the_sweep_of_their_own(sqlite_url: str) -> None:
    spec = grid_study("grown", [1e-3, 4e-3])
    drive(open_searcher(spec, sqlite_url))
    more = grid_study("grown", [1e-3, 4e-3, 1.6e-2])
    with pytest.raises(StorageError) as e:
        open_sweep(more, sqlite_url)
    said = str(e.value)
    assert "launch the new ones (0.016) as a sweep of their own" in said
    assert "sweeper fit grown+NEW" in said and "--force-new" not in said


def test_a_sweep_without_trials_is_replaced_and_an_unchanged_target_not_named(
    sqlite_url: str,
) -> None:
    """A review: the edits above had been asked of a sweep that holds no trial (which any other
    change replaces, with a warning), and every law relaunch refused listed the recorded target
    as changed to '(none)'."""
    empty = law("empty")
    open_sweep(empty, sqlite_url)  # (registered, no trial)
    written = replace(empty, search=replace(empty.search, warmup=ParamSpec.fixed(0.1)))
    assert open_sweep(written, sqlite_url)
    spec = law("seeds")
    drive(open_searcher(spec, sqlite_url))
    more = replace(spec, sweep=replace(spec.sweep, seeds_per_point=2))
    with pytest.raises(StorageError) as e:
        open_sweep(more, sqlite_url)
    assert "sweep.seeds_per_point: 1 -> 2" in str(e.value) and "target." not in str(e.value)

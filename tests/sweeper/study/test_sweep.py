"""The sweep in the storage without Ray: cell studies, the sweep row, reconcile, status, runs."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from sweeper.errors import StorageError
from sweeper.fitting.laws import PowerLaw
from sweeper.fitting.store import put_law
from sweeper.study import storage as st
from sweeper.study.runs import COLUMNS
from sweeper.study.samplers import grid_points_left, make_sampler, reconcile, requeue_point
from sweeper.study.space import distributions
from sweeper.study.spec import StudySpec, parse_study_toml
from sweeper.study.study_toml import spec_hash, study_toml
from sweeper.study.sweep import (
    added_cells,
    cell_counts,
    open_sweep,
    resolve_sweep_name,
    stored_spec,
    study_name,
    sweep_cells,
    sweep_status,
)
from sweeper.study.sweep_runs import aggregate_runs, load_sweep_runs

STUDY = """\
[sweep]
name = "{name}"
trials_per_cell = 3
seeds_per_point = 2

[model]
context = 64

[ladder]
widths = [16, 32]
depths = [2]
tokens = [32768]

[search]
lr = {{ low = 1e-3, high = 5e-2, log = true }}
batch_size = {{ values = [4, 8] }}
"""


def _spec(name: str = "sw", replace: dict[str, str] | None = None) -> StudySpec:
    text = STUDY.format(name=name)
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    return parse_study_toml(text)


def _finish(study: optuna.Study, losses: list[float], *, diverged: bool = False) -> int:
    """Ask a point and tell it as the launcher does (per-seed runs + aggregates)."""
    t = study.ask(distributions(_spec().search))
    runs = [
        {
            "seed": i,
            "ray_trial_id": f"r{t.number}_{i}",
            "loss": v,
            "diverged": diverged,
            "tokens": 32768,
            "wall_s": 1.0,
            "tokens_per_s": 3e4,
        }
        for i, v in enumerate(losses)
    ]
    t.set_user_attr("runs", runs)
    for k, v in aggregate_runs(runs).items():
        t.set_user_attr(k, v)
    study.tell(t, sum(losses) / len(losses))
    return t.number


def test_open_sweep_creates_row_and_cell_studies(sqlite_url: str) -> None:
    spec = _spec()
    css = open_sweep(spec, sqlite_url)
    assert [cs.study.study_name for cs in css] == ["sw/w16-d2-t32.8k", "sw/w32-d2-t32.8k"]
    row = st.get_sweep("sw", sqlite_url)
    assert row is not None and row["kind"] == "launched" and row["spec_hash"] == spec_hash(spec)
    for key in (
        "parametrization",
        "base_width",
        "base_depth",
        "context",
        "vocab_size",
        "init_std",
        "output_mult",
        "norm",
        "data",
        "seq_len",
    ):
        assert key in row["meta"]
    assert row["meta"]["seq_len"] == 64 and row["meta"]["parametrization"] == "sp"
    assert stored_spec("sw", sqlite_url) == spec
    attrs = sweep_cells("sw", sqlite_url)
    assert [a["width"] for a in attrs] == [16, 32]
    for a in attrs:
        for key in (
            "width",
            "depth",
            "heads",
            "n_params",
            "n_params_total",
            "tokens",
            "flops",
            "target",
            "cell",
        ):
            assert key in a
        assert a["target"] == 3
    # optuna sees them as ordinary studies (what optuna-dashboard lists), their objective named
    # (the dashboard said "Objective 0")
    names = optuna.get_all_study_names(sqlite_url)
    assert set(names) == {"sw/w16-d2-t32.8k", "sw/w32-d2-t32.8k"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        named = {optuna.load_study(study_name=n, storage=sqlite_url).metric_names[0] for n in names}
    assert named == {"final val loss (nats), mean over seeds"}


def test_a_changed_study_replaces_a_sweep_that_holds_no_trial(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a launch that could not join Ray leaves its sweep registered with no trial: the corrected
    # study is not refused as "a different study file" (nothing measured would be lost)
    open_sweep(_spec(), sqlite_url)
    changed = _spec(replace={"high = 5e-2": "high = 9e-2"})
    with caplog.at_level("WARNING"):
        open_sweep(changed, sqlite_url)
    assert "sw holds no trials" in caplog.text and "'high': 0.09" in caplog.text
    assert st.get_sweep("sw", sqlite_url)["spec_hash"] == spec_hash(changed)  # type: ignore[index]


def test_changed_study_is_refused_unless_force_new(sqlite_url: str) -> None:
    spec = _spec()
    css = open_sweep(spec, sqlite_url)
    _finish(css[0].study, [3.0, 3.2])
    open_sweep(spec, sqlite_url)  # same study: fine, trials kept
    assert len(optuna.load_study(study_name="sw/w16-d2-t32.8k", storage=sqlite_url).trials) == 1
    changed = _spec(replace={"high = 5e-2": "high = 9e-2"})
    with pytest.raises(StorageError, match=r"different study file.*--force-new") as e:
        open_sweep(changed, sqlite_url)
    # it names what changed (it said only "a different study file")
    assert "(search.lr: {'low': 0.001, 'high': 0.05, 'log': True} -> {" in str(e.value)
    assert "'high': 0.09" in str(e.value)
    # nothing was touched by the refusal
    assert st.get_sweep("sw", sqlite_url)["spec_hash"] == spec_hash(spec)  # type: ignore[index]
    # laws fitted to the old data, and its transfer check, go with it; other sweeps' laws stay
    law = PowerLaw(target="lr", predictors=("n_params",), source="sw")
    put_law(law, sqlite_url)
    put_law(law, sqlite_url, sweep="sw.transfer")
    put_law(law, sqlite_url, sweep="sw.transfer.w64-d2-t32.8k")
    put_law(law, sqlite_url, sweep="sw.transferx")  # another sweep's name, not a check of sw
    put_law(law, sqlite_url, sweep="other")
    css = open_sweep(changed, sqlite_url, force_new=True)
    assert st.get_sweep("sw", sqlite_url)["spec_hash"] == spec_hash(changed)  # type: ignore[index]
    assert all(len(cs.study.trials) == 0 for cs in css)
    left = sa.select(st.laws_table.c.sweep)
    with st.get_engine(sqlite_url).connect() as conn:
        assert sorted(conn.execute(left).scalars()) == ["other", "sw.transferx"]


def test_a_larger_ladder_extends_the_sweep_keeping_every_cells_trials(sqlite_url: str) -> None:
    """New cells get their studies; an old cell keeps its trials and its grid, wherever the new
    cells fall in the ladder (its sampler is keyed by its name, not its position)."""
    spec = _grid_spec("gx", "1e-3, 2e-3, 3e-3")
    dists = distributions(spec.search)
    seen: dict[str, list[tuple[float, int]]] = {}
    for cs in open_sweep(spec, sqlite_url):  # w16, w32: half of each cell's 6 points
        for _ in range(3):
            t = cs.study.ask(dists)
            seen.setdefault(cs.cell.name, []).append((t.params["lr"], t.params["batch_size"]))
            cs.study.tell(t, 3.0)
    bigger = parse_study_toml(
        study_toml(spec).replace("widths = [16, 32]", "widths = [16, 48, 32, 64]")
    )
    assert added_cells(spec, bigger) == ["w48-d2-t32.8k", "w64-d2-t32.8k"]
    css = open_sweep(bigger, sqlite_url)
    names = [cs.cell.name for cs in css]
    assert sorted(names) == sorted(["w16-d2-t32.8k", "w32-d2-t32.8k", *added_cells(spec, bigger)])
    assert names.index("w32-d2-t32.8k") != 1  # the old cell moved in the ladder
    assert st.get_sweep("gx", sqlite_url)["spec_hash"] == spec_hash(bigger)  # type: ignore[index]
    for cs in css:
        while grid_points_left(cs.study):
            t = cs.study.ask(dists)
            seen.setdefault(cs.cell.name, []).append((t.params["lr"], t.params["batch_size"]))
            cs.study.tell(t, 3.0)
    assert {k: len(v) for k, v in seen.items()} == dict.fromkeys(seen, 6)
    assert all(len(set(v)) == 6 for v in seen.values())  # no point twice, none lost
    # a smaller ladder, or a larger one that also changes the model, is another study
    fewer = parse_study_toml(study_toml(spec).replace("widths = [16, 32]", "widths = [16]"))
    assert added_cells(bigger, fewer) == []
    with pytest.raises(StorageError, match=r"ladder.widths: .*more cells in its ladder"):
        open_sweep(fewer, sqlite_url)
    other = parse_study_toml(
        study_toml(bigger)
        .replace("widths = [16, 48, 32, 64]", "widths = [16, 48, 32, 64, 128]")
        .replace("context = 64", "context = 32")
    )
    assert added_cells(bigger, other) == []


def test_more_trials_per_cell_extends_the_sweep_and_updates_its_file(sqlite_url: str) -> None:
    import json

    spec = _spec()
    css = open_sweep(spec, sqlite_url)
    _finish(css[0].study, [3.0, 3.1])
    # a key another module keeps in the sweep's metadata (validate-transfer's result)
    with st.transaction(sqlite_url) as conn:
        row = st.get_sweep("sw", sqlite_url)
        assert row is not None
        meta = {**row["meta"], "transfer_result": {"x": 1}}
        conn.execute(
            st.sweeps_table.update()
            .where(st.sweeps_table.c.name == "sw")
            .values(meta_json=json.dumps(meta))
        )
    more = _spec(
        replace={
            "trials_per_cell = 3": "trials_per_cell = 5",
            "batch_size = { values = [4, 8] }\n": (
                "batch_size = { values = [4, 8] }\n\n[sampler]\nn_startup_trials = 2\n"
                "max_pending_per_cell = 1\n"
            ),
        }
    )
    assert more.trials_per_cell == 5 and more.sampler.max_pending_per_cell == 1
    css = open_sweep(more, sqlite_url)  # no refusal, nothing deleted
    assert [len(cs.study.trials) for cs in css] == [1, 0]
    row = st.get_sweep("sw", sqlite_url)
    assert row is not None and row["spec_hash"] == spec_hash(spec) == spec_hash(more)
    assert row["study_toml"] == study_toml(more) and stored_spec("sw", sqlite_url) == more
    assert row["meta"]["trials_per_cell"] == 5 and row["meta"]["transfer_result"] == {"x": 1}
    assert [a["target"] for a in sweep_cells("sw", sqlite_url)] == [5, 5]
    c = cell_counts(css[0].study, more.trials_per_cell)
    assert (c.finished, c.target, c.done) == (1, 5, False)
    # lowering it back is fine too (the cells are then over their target)
    open_sweep(spec, sqlite_url)
    assert stored_spec("sw", sqlite_url) == spec


def test_sweep_hashed_by_an_older_sweeper_is_resumed_not_refused(sqlite_url: str) -> None:
    """A row whose hash covered trials_per_cell (before it was left out) still matches its file."""
    spec = _spec()
    open_sweep(spec, sqlite_url)
    with st.transaction(sqlite_url) as conn:
        conn.execute(
            st.sweeps_table.update()
            .where(st.sweeps_table.c.name == "sw")
            .values(spec_hash="0" * 64)
        )
    open_sweep(_spec(replace={"trials_per_cell = 3": "trials_per_cell = 4"}), sqlite_url)
    row = st.get_sweep("sw", sqlite_url)
    assert row is not None and row["spec_hash"] == spec_hash(spec)
    assert row["meta"]["trials_per_cell"] == 4


def test_grid_requeue_of_a_failed_point(sqlite_url: str) -> None:
    """Optuna's grid counts a FAIL point as visited; queued again, it is asked exactly once more."""
    text = STUDY.format(name="g") + '\n[sampler]\nkind = "grid"\n'
    text = text.replace("{ low = 1e-3, high = 5e-2, log = true }", "{ values = [1e-3, 1e-2] }")
    spec = parse_study_toml(text.replace("trials_per_cell = 3\n", ""))
    study = open_sweep(spec, sqlite_url)[0].study
    dists = distributions(spec.search)
    assert grid_points_left(study) == 4
    trials = [study.ask(dists) for _ in range(4)]
    assert len({tuple(t.params.values()) for t in trials}) == 4
    assert grid_points_left(study) == 0  # all asked (RUNNING), none queued
    study.tell(trials[0], state=TrialState.FAIL)
    for t in trials[1:]:
        study.tell(t, 3.0)
    assert grid_points_left(study) == 0
    assert requeue_point(study, trials[0].params)
    assert not requeue_point(study, trials[0].params)  # never queued twice
    assert grid_points_left(study) == 1
    again = study.ask(dists)
    assert again.params == trials[0].params
    assert grid_points_left(study) == 0
    # any other sampler: no grid to count
    assert grid_points_left(open_sweep(_spec("t"), sqlite_url)[0].study) is None


def _grid_spec(name: str, lrs: str) -> StudySpec:
    text = STUDY.format(name=name) + '\n[sampler]\nkind = "grid"\n'
    text = text.replace("{ low = 1e-3, high = 5e-2, log = true }", f"{{ values = [{lrs}] }}")
    return parse_study_toml(text.replace("trials_per_cell = 3\n", ""))


def test_relaunched_grid_runs_each_point_once(sqlite_url: str) -> None:
    """The grid's shuffle is seeded without the trial count: the grid ids stored by an earlier
    launch must name the same points in the next one (else points repeat and others are lost)."""
    spec = _grid_spec("g2", "1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3")
    dists = distributions(spec.search)
    seen = []
    for n_asks in (3, 4, 5):  # three launches, each opening the sweep again
        study = open_sweep(spec, sqlite_url)[0].study
        for _ in range(n_asks):
            t = study.ask(dists)
            seen.append((t.params["lr"], t.params["batch_size"]))
            study.tell(t, 3.0)
    assert len(seen) == 12 and len(set(seen)) == 12


def test_reconcile_recovers_the_grid_point_of_a_trial_killed_before_suggest(
    sqlite_url: str,
) -> None:
    spec = _grid_spec("g3", "1e-3, 1e-2")
    study = open_sweep(spec, sqlite_url)[0].study
    dists = distributions(spec.search)
    done = study.ask(dists)
    study.tell(done, 3.0)
    study.ask()  # the driver died after Optuna gave the trial its grid id, before any suggest
    closed = reconcile(study)
    assert len(closed) == 1 and closed[0] and closed[0] != done.params
    assert [t.state for t in study.get_trials()][-1] == TrialState.WAITING
    assert grid_points_left(study) == 3  # the queued point, plus the two never asked
    asked = [study.ask(dists).params for _ in range(3)]
    assert asked[0] == closed[0]
    assert len({tuple(sorted(p.items())) for p in [done.params, *asked]}) == 4


def test_reconcile_counts_a_paramless_trial_without_queueing_it(sqlite_url: str) -> None:
    study = open_sweep(_spec("tp"), sqlite_url)[0].study
    study.ask()  # TPE: killed before any suggest, there is no point to run again
    assert reconcile(study) == [{}]
    assert [t.state for t in study.get_trials()] == [TrialState.FAIL]


def _ask_lr_only(study: optuna.Study, spec: StudySpec) -> optuna.Trial:
    """A trial whose driver died between two suggests: ``ask(dists)`` writes one parameter at a
    time, and the kill came after ``lr`` and before ``batch_size``."""
    return study.ask({"lr": distributions(spec.search)["lr"]})


def test_reconcile_recovers_the_whole_grid_point_of_a_half_suggested_trial(
    sqlite_url: str,
) -> None:
    """The grid has two batch sizes: queued as ``{lr}`` alone, the point would be asked without
    its grid id, and one grid point run twice while another is lost."""
    spec = _grid_spec("g4", "1e-3, 1e-2")
    study = open_sweep(spec, sqlite_url)[0].study
    dists = distributions(spec.search)
    half = _ask_lr_only(study, spec)
    closed = reconcile(study)
    assert len(closed) == 1 and set(closed[0]) == {"lr", "batch_size"}
    assert closed[0]["lr"] == half.params["lr"]
    asked = [study.ask(dists).params for _ in range(4)]  # the queued point, then the other three
    assert asked[0] == closed[0]
    assert {tuple(sorted(p.items())) for p in asked} == {
        (("batch_size", b), ("lr", lr)) for b in (4, 8) for lr in (1e-3, 1e-2)
    }


def test_reconcile_requeues_the_whole_queued_point_of_a_half_suggested_trial(
    sqlite_url: str,
) -> None:
    """A queued point (one queued again after a failure, or by hand) is known whole from the
    trial's fixed params: queueing only the part that was suggested would lose its batch size."""
    spec = _spec("q4")
    study = open_sweep(spec, sqlite_url)[0].study
    planned = {"lr": 3e-3, "batch_size": 8}
    study.enqueue_trial(planned)
    _ask_lr_only(study, spec)
    assert reconcile(study) == [planned]
    assert study.ask(distributions(spec.search)).params == planned


def test_reconcile_requeues_what_tpe_had_chosen_of_a_half_suggested_trial(
    sqlite_url: str,
) -> None:
    spec = _spec("t4")
    study = open_sweep(spec, sqlite_url)[0].study
    half = _ask_lr_only(study, spec)
    assert reconcile(study) == [dict(half.params)]  # TPE had not chosen a batch size yet
    again = study.ask(distributions(spec.search)).params
    assert again["lr"] == half.params["lr"] and again["batch_size"] in (4, 8)


def test_reconcile_closes_running_trials_and_requeues_them_once(sqlite_url: str) -> None:
    spec = _spec()
    study = open_sweep(spec, sqlite_url)[0].study
    _finish(study, [3.0, 3.1])
    dead = study.ask(distributions(spec.search))  # a driver died while this ran
    params = dict(dead.params)
    reasked = reconcile(study)
    assert reasked == [params]
    states = [t.state for t in study.get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.WAITING]
    assert reconcile(study) == []  # nothing RUNNING any more, nothing queued twice
    again = study.ask(distributions(spec.search))
    assert again.params == params  # the queued point comes first
    assert len(study.get_trials()) == 3


def test_runs_table_has_one_row_per_seed_and_status_counts(sqlite_url: str) -> None:
    spec = _spec()
    css = open_sweep(spec, sqlite_url)
    a = css[0].study
    _finish(a, [3.0, 3.2])
    _finish(a, [5.0, 5.5], diverged=True)
    t = a.ask(distributions(spec.search))
    a.tell(t, state=TrialState.FAIL)
    a.ask(distributions(spec.search))  # RUNNING
    df = load_sweep_runs("sw", sqlite_url)
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    done = df[df["state"] == "COMPLETE"]
    assert len(done) == 4 and set(done["seed"]) == {0.0, 1.0}
    assert sorted(done["loss"]) == [3.0, 3.2, 5.0, 5.5]
    assert done["diverged"].sum() == 2
    assert (done["batch_tokens"] == done["batch_size"] * 64).all()
    assert (df["seq_len"] == 64).all() and (df["source"] == "sweep:sw").all()
    assert set(df["state"]) == {"COMPLETE", "FAIL", "RUNNING"}
    assert math.isnan(df.loc[df["state"] == "FAIL", "loss"].iloc[0])
    for col in ("trial_number", "ray_trial_id", "value"):
        assert col in df.columns
    status = sweep_status("sw", sqlite_url)
    assert status["sweep"] == "sw"
    c0 = status["cells"][0]
    assert (c0["complete"], c0["failed"], c0["running"], c0["pruned"], c0["target"]) == (
        2,
        1,
        1,
        0,
        3,
    )
    assert c0["best_loss"] == pytest.approx(3.1)
    assert set(c0) >= {
        "cell",
        "width",
        "depth",
        "tokens",
        "complete",
        "running",
        "failed",
        "pruned",
        "target",
        "best_loss",
        "best_lr",
    }
    assert status["cells"][1]["best_loss"] is None


def test_resolve_sweep_name(sqlite_url: str) -> None:
    st.get_engine(sqlite_url, new=True)  # an empty database
    with pytest.raises(StorageError, match="no launched sweep"):
        resolve_sweep_name(None, sqlite_url)
    open_sweep(_spec("one"), sqlite_url)
    assert resolve_sweep_name(None, sqlite_url) == "one"
    open_sweep(_spec("two"), sqlite_url)
    with pytest.raises(StorageError, match="several sweeps"):
        resolve_sweep_name(None, sqlite_url)
    with pytest.raises(StorageError, match="no sweep 'three'"):
        load_sweep_runs("three", sqlite_url)


@pytest.mark.parametrize("kind", ["tpe", "gp", "random", "qmc", "grid"])
def test_every_sampler_works_with_ask_and_tell(sqlite_url: str, kind: str) -> None:
    extra = f'\n[sampler]\nkind = "{kind}"\n'
    text = STUDY.format(name=f"s{kind}") + extra
    if kind == "grid":
        text = text.replace("{ low = 1e-3, high = 5e-2, log = true }", "{ values = [1e-3, 1e-2] }")
        text = text.replace("trials_per_cell = 3\n", "")
    spec = parse_study_toml(text)
    study = open_sweep(spec, sqlite_url)[0].study
    seen = set()
    for _ in range(spec.trials_per_cell):
        t = study.ask(distributions(spec.search))
        seen.add((t.params["lr"], t.params["batch_size"]))
        study.tell(t, 3.0 + t.params["lr"])  # the last grid point must not raise (study.stop)
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == spec.trials_per_cell
    if kind == "grid":
        assert len(seen) == 4  # every grid point once


def test_sampler_seed_moves_with_existing_trials() -> None:
    spec = _spec()
    a = make_sampler(spec, 0, 0)
    b = make_sampler(spec, 0, 5)
    d = optuna.distributions.FloatDistribution(1e-3, 1e-1, log=True)
    sa = optuna.create_study(sampler=a)
    sb = optuna.create_study(sampler=b)
    assert sa.ask({"x": d}).params != sb.ask({"x": d}).params


def test_study_name() -> None:
    assert study_name("quickstart", "w64-d2-t819k") == "quickstart/w64-d2-t819k"


def test_report_into_an_existing_file_is_a_user_error(tmp_path: Path, sqlite_url: str) -> None:
    """``report -o FILE`` where FILE exists and is not a folder: exit 2, one line."""
    import sweeper.cli as cli_mod

    target = tmp_path / "taken.html"
    target.write_text("mine")
    assert cli_mod.main(["report", "any", "-o", str(target), "--storage", sqlite_url]) == 2
    assert target.read_text() == "mine"


def test_a_trial_closed_because_its_driver_stopped_is_told_apart_from_a_failed_run(
    sqlite_url: str,
) -> None:
    """After a driver was killed or interrupted, `status` showed '2 failed' for good, though no
    run had failed, and `trials` had no column saying why a trial FAILed."""
    from sweeper.cli.study import _cell_line

    spec = _grid_spec("gc", "1e-3, 1e-2")
    study = open_sweep(spec, sqlite_url)[0].study
    dists = distributions(spec.search)
    study.ask(dists)  # left RUNNING by a driver that died
    reconcile(study)
    bad = study.ask(dists)
    bad.set_user_attr("last_error", "ValueError: boom")
    study.tell(bad, state=TrialState.FAIL)
    cell = sweep_status("gc", sqlite_url)["cells"][0]  # (the first cell's study is this one)
    assert (cell["failed"], cell["closed"]) == (2, 1)  # (the queued point ran as "bad")
    line = _cell_line("c", 0, 2, 2, 0, None, None, None, closed=1, waiting=1)
    # (a closed trial is not added into the failed ones: an audit read "1 failed" for good)
    assert "1 failed, 1 closed when their driver stopped, 1 queued" in line
    only = _cell_line("c", 0, 2, 1, 0, None, None, None, closed=1)
    assert "1 closed when their driver stopped;" in only and "failed" not in only
    assert only.endswith("no complete trial")
    # finished runs and no best: every one diverged (an all-NaN training function read "no
    # complete trial" after 4 complete trials, a diff audit)
    assert "every finished run diverged" in _cell_line("c", 4, 4, 0, 0, None, None, None)
    assert _cell_line("c", 2, 4, 0, 2, None, None, None).endswith("no complete trial")
    runs = load_sweep_runs("gc", sqlite_url)
    assert set(runs["closed_by"].dropna()) == {"reconcile: its driver stopped"}
    assert set(runs["last_error"].dropna()) == {"ValueError: boom"}


def test_a_changed_key_at_its_default_is_named_with_its_value() -> None:
    """A diff audit: a study whose optimizer changed read "train.optimizer: '(none)' ->
    'adafactor'" (a key at its default is not written in the study's text), the default being
    adamw."""
    from dataclasses import replace

    from sweeper.study.spec import load_study
    from sweeper.study.sweep import study_changes

    s = load_study(Path(__file__).resolve().parents[3] / "studies" / "smoke.toml")
    changed = replace(s, train=replace(s.train, optimizer="adafactor"))
    assert study_changes(s, changed) == "train.optimizer: 'adamw' -> 'adafactor'"

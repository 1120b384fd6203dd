"""A short database outage under a launch: every storage call of the driver waits it out (reads,
and the calls Optuna's ``_CachedStorage`` makes), and a write whose answer was lost is not made
twice. SQLite, with the outage made by the engine: every statement fails for a while, and a
commit that reached the database can lose its answer."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
from optuna.trial import TrialState

from sweeper.study.lease import HeldLease, acquire, release
from sweeper.study.space import distributions
from sweeper.study.spec import parse_study_toml
from sweeper.study.sweep import CellStudy, FencedStorage, open_sweep
from tests.sweeper.study.test_lease import FENCED


@contextmanager
def _fenced_cell(url: str) -> Iterator[tuple[FencedStorage, CellStudy]]:
    """The one cell of a sweep opened through a FencedStorage of its lease."""
    held = HeldLease(acquire("fenced", url), url)
    storage = FencedStorage(url, held)
    (cs,) = open_sweep(parse_study_toml(FENCED), url, storage=storage, held=held)
    try:
        yield storage, cs
    finally:
        storage.close()
        release(held.lease, url)


def _down_for(storage: FencedStorage, seconds: float) -> None:
    """Every statement of ``storage`` fails as on a lost database, for ``seconds`` from now."""
    until = time.monotonic() + seconds

    def refuse(*_: Any) -> None:
        if time.monotonic() < until:
            raise sqlite3.OperationalError("unable to open database file")

    sa.event.listen(storage.engine, "before_cursor_execute", refuse)


def _lose_next_answer(storage: FencedStorage) -> None:
    """The next commit that writes reaches the database, and its answer is lost."""
    dialect, state = storage.engine.dialect, {"armed": True, "wrote": False}
    commit = dialect.do_commit

    def note(session: sa.orm.Session) -> None:
        state["wrote"] = bool(session.info.get("sweeper_wrote"))

    def lost(dbapi_conn: Any) -> None:
        commit(dbapi_conn)
        if state["armed"] and state["wrote"]:
            state["armed"] = False
            raise sqlite3.OperationalError("disk I/O error")

    sa.event.listen(storage.scoped_session.session_factory, "before_commit", note)
    dialect.do_commit = lost  # type: ignore[method-assign]


def test_every_call_of_the_driver_waits_out_an_outage(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A cluster audit: an ask during a 25 s outage crashed the driver at once
    (StorageInternalError): only some writes were retried, not the reads an ask makes through
    Optuna's cache (``_get_trials``, ``_create_new_trial``, ...), nor any other read."""
    with _fenced_cell(sqlite_url) as (storage, cs):
        dists = distributions(parse_study_toml(FENCED).search)
        cs.study.tell(cs.study.ask(dists), 3.0)
        calls: dict[str, Callable[[], Any]] = {
            "ask": lambda: cs.study.tell(cs.study.ask(dists), 2.0).value,
            "get_trials": lambda: len(cs.study.get_trials()),
            "best_trial": lambda: cs.study.best_trial.value,
            "user_attrs": lambda: cs.study.user_attrs["cell"],
            "load_study": lambda: optuna.load_study(
                study_name=cs.study.study_name, storage=storage
            ).direction,
        }
        got = {}
        for what, call in calls.items():
            _down_for(storage, 0.3)
            t0 = time.monotonic()
            got[what] = call()
            assert time.monotonic() - t0 > 0.3, what
        assert got == {
            "ask": 2.0,
            "get_trials": 2,
            "best_trial": 2.0,
            "user_attrs": cs.cell.name,
            "load_study": optuna.study.StudyDirection.MINIMIZE,
        }
        assert "the storage is unreachable (_get_trials" in caplog.text


def test_a_write_whose_answer_was_lost_is_not_made_twice(sqlite_url: str) -> None:
    """A commit that reached the database but whose answer was lost is retried: an ask (or an
    enqueue) finds the trial its first try created instead of creating a second one, and a tell
    finds its trial told instead of being refused as a second tell."""
    with _fenced_cell(sqlite_url) as (storage, cs):
        dists = distributions(parse_study_toml(FENCED).search)
        _lose_next_answer(storage)
        trial = cs.study.ask(dists)
        _lose_next_answer(storage)
        cs.study.tell(trial, 3.0)
        _lose_next_answer(storage)
        cs.study.enqueue_trial({"lr": 5e-3})
        stored = optuna.load_study(study_name=cs.study.study_name, storage=sqlite_url).trials
        assert [(t.number, t.state, t.value) for t in stored] == [
            (0, TrialState.COMPLETE, 3.0),
            (1, TrialState.WAITING, None),
        ]
        assert stored[1].system_attrs["fixed_params"] == {"lr": 5e-3}


def test_every_transaction_of_the_storage_is_retried() -> None:
    """Every RDBStorage method that opens a transaction is retried (or FencedStorage's own, or
    left out on purpose): an Optuna that adds one fails here instead of in an outage."""
    import inspect

    from optuna.storages import RDBStorage

    from sweeper.study import sweep

    opens = {
        name
        for name, fn in vars(RDBStorage).items()
        if inspect.isfunction(fn) and "_create_scoped_session(" in inspect.getsource(fn)
    }
    own = {"_create_new_trial", "set_trial_state_values"}
    assert opens == {*sweep._RETRIED, *own, "delete_study"}
    assert all(name in vars(sweep.FencedStorage) for name in (*sweep._RETRIED, *own))


def test_a_connection_lost_between_two_statements_is_waited_out(sqlite_url: str) -> None:
    """Optuna's _get_trials queries again after an OperationalError: when that error lost the
    connection (as PostgreSQL's do) the second query raises PendingRollbackError, which is the
    same outage."""
    with _fenced_cell(sqlite_url) as (storage, cs):
        cs.study.enqueue_trial({"lr": 5e-3})
        armed, dialect = [True], storage.engine.dialect
        lost = lambda e, *_: "server closed" in str(e)  # noqa: E731
        dialect.is_disconnect = lost  # type: ignore[method-assign]

        def cut(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if armed and "ORDER BY trials.trial_id" in statement:
                armed.clear()
                raise sqlite3.OperationalError("server closed the connection unexpectedly")

        sa.event.listen(storage.engine, "before_cursor_execute", cut)
        assert len(cs.study.get_trials()) == 1 and not armed

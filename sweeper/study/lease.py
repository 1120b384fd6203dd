"""One driver per sweep: a lease in the storage, kept alive by a heartbeat, and fenced by an epoch.

A launch closes the RUNNING trials it finds as FAIL and queues their points again
(:func:`sweeper.study.samplers.reconcile`): right after a driver died, wrong while another driver
is still running them. So :func:`launch_study <sweeper.run.launch.launch_study>` first takes the
sweep's lease, a row of ``sweeper_leases`` (sweep, owner, epoch, host, pid, heartbeat), and holds
it until it returns; a thread renews the heartbeat every ``heartbeat_s``. Another launch of the
same sweep is refused with :class:`LeaseHeld` while the holder is alive. The holder counts as gone
when

- it runs on this host and its process no longer exists (a killed driver, relaunched at once), or
- its heartbeat is older than ``stale_after_s`` (a driver on another host that died), or
- the new launch is told so (``takeover=True``, ``sweeper launch --takeover``), which is refused
  while the holder's process is alive on this host (stop it first).

**Fencing.** Liveness cannot always be known (a driver on another host behind a network partition
looks exactly like a dead one), so a takeover must be safe even when the old driver is still
running. Every lease carries an ``epoch``: the first lease of a sweep has epoch 1 and every later
acquisition (a takeover, or a launch after a release) increments it, in a compare-and-set on the
old owner and epoch. Every write a driver makes to the sweep (each Optuna ask, tell, report and
attribute, the reconciliation of stale trials, the sweep row) runs :meth:`HeldLease.fence` in the
same transaction: an ``UPDATE`` of the lease row that matches only this driver's owner and epoch.
A driver whose lease was taken matches nothing, raises :class:`LeaseLost`, and its transaction
rolls back, so it can write nothing once the new driver holds the lease; the ``UPDATE`` also locks
the lease row (PostgreSQL) or the database (SQLite) until the commit, so a takeover waits for a
write already under way instead of overtaking it. A driver that loses its lease, whether its
heartbeat finds the row taken or a fenced write is refused, marks it lost: the launch stops its
trials and exits with the reason. A driver that cannot renew for ``stale_after_s`` (the storage
unreachable) gives up the same way, since another driver may by then have taken over.

The lease is per launch: its owner token is new at every acquisition and released in ``finally``,
so an interrupted launch in a notebook can launch again from the same process. Released rows stay
(owner empty) so that the epoch keeps growing. Times are Unix seconds from each driver's clock:
hosts whose clocks disagree by more than ``stale_after_s`` would judge each other wrongly (keep
them synchronised, as any cluster does); fencing does not depend on clocks.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa

from sweeper.errors import SweeperError
from sweeper.study import storage as st

__all__ = [
    "HEARTBEAT_S",
    "STALE_AFTER_S",
    "HeldLease",
    "Lease",
    "LeaseHeld",
    "LeaseLost",
    "acquire",
    "driver_status",
    "holder",
    "release",
    "renew",
    "sweep_lease",
]

logger = logging.getLogger(__name__)

STALE_AFTER_S = 120.0
HEARTBEAT_S = 15.0


class LeaseHeld(SweeperError):
    """Another live driver holds the sweep."""


class LeaseLost(SweeperError):
    """This driver's lease was taken by another driver (or could not be renewed for too long):
    the driver may write nothing more to the sweep."""


@dataclass(frozen=True)
class Lease:
    sweep: str
    owner: str
    host: str
    pid: int
    acquired_at: float
    heartbeat_at: float
    epoch: int = 1

    def age_s(self, now: float | None = None) -> float:
        """Seconds since the last heartbeat."""
        return (time.time() if now is None else now) - self.heartbeat_at

    def describe(self, now: float | None = None) -> str:
        return f"driver {self.host}:{self.pid}, last heartbeat {self.age_s(now):.0f} s ago"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _row(sweep: str, url: str | None) -> Lease | None:
    """The lease row of ``sweep`` (a released one too: owner ""), or None."""
    t = st.leases_table
    with st.get_engine(url).connect() as conn:
        row = conn.execute(sa.select(t).where(t.c.sweep == sweep)).mappings().first()
    return None if row is None else Lease(**dict(row))


def holder(sweep: str, url: str | None = None) -> Lease | None:
    """The lease on ``sweep``, or None when no driver holds it."""
    row = _row(sweep, url)
    return None if row is None or not row.owner else row


#: owners of the leases this process holds now (:func:`acquire` adds one, :func:`release` removes
#: it, in a launch's ``finally``): a lease row of this process that is not here was left by an
#: earlier launch whose release failed
_HELD_HERE: set[str] = set()


def driver_status(sweep: str, url: str | None = None) -> dict[str, Any] | None:
    """The driver that holds ``sweep``: host, pid, epoch, when it took the lease, the age of its
    last heartbeat, and ``alive`` (whether its process exists: known only on its own host, else
    None). None when no driver holds it."""
    lease = holder(sweep, url)
    if lease is None:
        return None
    here = lease.host == socket.gethostname()
    return {
        "host": lease.host,
        "pid": lease.pid,
        "epoch": lease.epoch,
        "acquired_at": lease.acquired_at,
        "heartbeat_age_s": round(lease.age_s(), 1),
        "alive": _pid_alive(lease.pid) if here else None,
    }


class _Claim:
    won = True


@contextmanager
def _claiming(owner: str) -> Iterator[_Claim]:
    """Count ``owner`` as held by this process from before its write commits: another thread of
    this process that reads the row right after the commit must see a live lease, not one "left
    by an earlier launch". The owner is dropped again when the write fails or does not win."""
    claim = _Claim()
    _HELD_HERE.add(owner)
    try:
        yield claim
    except BaseException:
        _HELD_HERE.discard(owner)
        raise
    if not claim.won:
        _HELD_HERE.discard(owner)


def _gone(lease: Lease, stale_after_s: float, now: float) -> str | None:
    """Why the holder of ``lease`` counts as gone, or None when it may be alive."""
    if lease.host == socket.gethostname() and not _pid_alive(lease.pid):
        return f"its process {lease.pid} on this host has ended"
    ours = lease.pid == os.getpid() and lease.host == socket.gethostname()
    if ours and lease.owner not in _HELD_HERE:
        return "it was left by an earlier, interrupted launch in this process"
    if lease.age_s(now) > stale_after_s:
        return f"its heartbeat is {lease.age_s(now):.0f} s old (stale after {stale_after_s:.0f} s)"
    return None


def acquire(
    sweep: str,
    url: str | None = None,
    *,
    takeover: bool = False,
    stale_after_s: float = STALE_AFTER_S,
) -> Lease:
    """Take the lease on ``sweep`` for this process, with the next epoch. Raises
    :class:`LeaseHeld` when a live driver holds it (unless ``takeover``; a takeover is refused
    too while the holder's process is alive on this host)."""
    t = st.leases_table
    host, pid = socket.gethostname(), os.getpid()
    owner = f"{host}:{pid}:{uuid.uuid4().hex[:12]}"
    st.get_engine(url, new=True)  # a launch creates the database: its lease is the first write
    for _ in range(5):  # an insert or a takeover can lose a race; look again
        now = time.time()
        current = _row(sweep, url)
        if current is None:
            mine = Lease(sweep, owner, host, pid, now, now, 1)
            try:
                with _claiming(owner), st.transaction(url) as conn:
                    conn.execute(sa.insert(t).values(**asdict(mine)))
            except sa.exc.IntegrityError:
                continue  # another driver inserted first
            return mine
        why: str | None = "the lease was released" if not current.owner else None
        if why is None:
            why = _gone(current, stale_after_s, now)
        if why is None and takeover:
            if current.host == host and _pid_alive(current.pid):
                raise LeaseHeld(
                    f"sweep {sweep!r} is being run by {current.describe(now)}, and its process "
                    f"(pid {current.pid}) is alive on this host: --takeover takes a sweep only "
                    f"from a driver that is gone; stop that driver first (kill {current.pid}) "
                    "or wait for it"
                )
            why = "taken over (--takeover)"
        if why is None:
            raise LeaseHeld(
                f"sweep {sweep!r} is being run by {current.describe(now)}: one driver per sweep "
                "(wait for it, or stop it; if it is gone and its host cannot tell, its lease "
                f"expires {stale_after_s:.0f} s after its last heartbeat, or relaunch with "
                "--takeover)"
            )
        mine = Lease(sweep, owner, host, pid, now, now, current.epoch + 1)
        with _claiming(owner) as claim, st.transaction(url) as conn:
            res = conn.execute(
                sa.update(t)
                .where(t.c.sweep == sweep, t.c.owner == current.owner)
                .where(t.c.epoch == current.epoch)
                .values(**{k: v for k, v in asdict(mine).items() if k != "sweep"})
            )
            claim.won = res.rowcount == 1
        if res.rowcount == 1:
            if current.owner:
                logger.warning(
                    "sweep %s: took the lease of %s (epoch %d -> %d): %s",
                    sweep,
                    current.describe(now),
                    current.epoch,
                    mine.epoch,
                    why,
                )
            return mine
    raise LeaseHeld(f"sweep {sweep!r}: another driver took the lease at the same time")


def _mine(lease: Lease) -> Any:
    t = st.leases_table
    return sa.and_(t.c.sweep == lease.sweep, t.c.owner == lease.owner, t.c.epoch == lease.epoch)


def renew(lease: Lease, url: str | None = None) -> bool:
    """Refresh the heartbeat; False when the lease is no longer ours (taken over)."""
    t = st.leases_table
    with st.transaction(url) as conn:
        res = conn.execute(sa.update(t).where(_mine(lease)).values(heartbeat_at=time.time()))
    return res.rowcount == 1


def release(lease: Lease, url: str | None = None) -> None:
    """Give the lease back (a no-op when it is no longer ours). The row stays, without an owner,
    so that the next lease of the sweep gets the next epoch."""
    _HELD_HERE.discard(lease.owner)
    t = st.leases_table
    with st.transaction(url) as conn:
        conn.execute(
            sa.update(t).where(_mine(lease)).values(owner="", host="", pid=0, heartbeat_at=0.0)
        )


def fence(conn: Any, lease: Lease) -> None:
    """Inside a write transaction on ``conn`` (a Connection or Session): raise :class:`LeaseLost`
    unless ``lease`` still holds its sweep at its epoch. The ``UPDATE`` locks the lease row (the
    database on SQLite) until the transaction ends, so a takeover cannot commit between this
    check and the writes of the transaction."""
    t = st.leases_table
    res = conn.execute(sa.update(t).where(_mine(lease)).values(epoch=t.c.epoch))
    if res.rowcount != 1:
        raise LeaseLost(
            f"sweep {lease.sweep!r}: this driver's lease (epoch {lease.epoch}) was taken over; "
            "the write was refused"
        )


class HeldLease:
    """A lease held by a running launch: the :class:`Lease`, whether it was lost (and why), and
    :meth:`fence` for the launch's writes. ``on_lost`` callbacks run once, from the thread that
    notices the loss."""

    def __init__(self, lease: Lease, url: str | None, stale_after_s: float = STALE_AFTER_S) -> None:
        self.lease = lease
        self.url = url
        #: how long the storage may be unreachable before the holder gives up (the heartbeat's
        #: rule, which the launch's own writes follow: :class:`~sweeper.study.sweep.FencedStorage`)
        self.stale_after_s = stale_after_s
        self.lost = threading.Event()
        self.why = ""
        self._callbacks: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    @property
    def sweep(self) -> str:
        return self.lease.sweep

    def on_lost(self, fn: Callable[[str], None]) -> None:
        self._callbacks.append(fn)

    def fence(self, conn: Any) -> None:
        """:func:`fence` for this lease; marks it lost when refused."""
        if self.lost.is_set():
            raise LeaseLost(self.why)
        try:
            fence(conn, self.lease)
        except LeaseLost:
            self.mark_lost(self._taken_by())
            raise LeaseLost(self.why) from None

    def _taken_by(self) -> str:
        try:
            now = _row(self.sweep, self.url)
        except Exception:  # the storage is gone: say what is known
            now = None
        base = f"sweep {self.sweep!r}: this driver's lease (epoch {self.lease.epoch})"
        if now is None or not now.owner:
            return f"{base} was lost"
        return f"{base} was taken over by driver {now.host}:{now.pid} (epoch {now.epoch})"

    def mark_lost(self, why: str) -> None:
        with self._lock:
            if self.lost.is_set():
                return
            self.why = why
            self.lost.set()
        _HELD_HERE.discard(self.lease.owner)
        logger.error("%s; stopping this driver's trials", why)
        for fn in self._callbacks:
            try:
                fn(why)
            except Exception:  # a callback must not keep the others from running
                logger.exception("lease-lost callback failed")

    def check(self) -> bool:
        """Whether the lease is still ours (reads the row; marks it lost when it is not)."""
        if self.lost.is_set():
            return False
        if renew(self.lease, self.url):
            return True
        self.mark_lost(self._taken_by())
        return False


@contextmanager
def sweep_lease(
    sweep: str,
    url: str | None = None,
    *,
    takeover: bool = False,
    stale_after_s: float = STALE_AFTER_S,
    heartbeat_s: float = HEARTBEAT_S,
) -> Iterator[HeldLease]:
    """Hold the lease on ``sweep`` for the ``with`` block, renewing it from a daemon thread. The
    thread marks it lost when another driver took it, or when it could not renew for
    ``stale_after_s``."""
    lease = acquire(sweep, url, takeover=takeover, stale_after_s=stale_after_s)
    held = HeldLease(lease, url, stale_after_s)
    stop = threading.Event()

    def beat() -> None:
        last_ok = time.monotonic()
        while not stop.wait(heartbeat_s):
            try:
                if not held.check():
                    return
                last_ok = time.monotonic()
            except Exception as e:  # a storage hiccup: try again at the next beat
                silent = time.monotonic() - last_ok
                logger.warning(
                    "sweep %s: heartbeat failed (%s s without one): %s",
                    sweep,
                    f"{silent:.0f}",
                    st.redact(str(e).splitlines()[0] if str(e) else type(e).__name__),
                )
                if silent > stale_after_s:
                    held.mark_lost(
                        f"sweep {sweep!r}: could not renew this driver's lease for "
                        f"{silent:.0f} s; another driver may have taken it over"
                    )
                    return

    thread = threading.Thread(target=beat, name=f"sweeper-lease-{sweep}", daemon=True)
    thread.start()
    try:
        yield held
    finally:
        _HELD_HERE.discard(held.lease.owner)
        stop.set()
        thread.join(timeout=5)
        if not held.lost.is_set():
            try:
                release(held.lease, url)
            except Exception as e:  # the storage is gone: the lease goes stale by itself
                logger.warning(
                    "sweep %s: could not release the lease: %s", sweep, st.redact(str(e))
                )

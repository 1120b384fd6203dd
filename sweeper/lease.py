"""One driver per sweep: a lease in the storage, kept alive by a heartbeat.

A launch closes the RUNNING trials it finds as FAIL and queues their points again
(:func:`sweeper.sweep.reconcile`): right after a driver died, wrong while another driver is still
running them. So :func:`launch_study <sweeper.launch.launch_study>` first takes the sweep's lease,
a row of ``sweeper_leases`` (sweep, owner, host, pid, heartbeat), and holds it until it returns; a
thread renews the heartbeat every ``heartbeat_s``. Another launch of the same sweep is refused
with :class:`LeaseHeld` while the holder is alive. The holder counts as gone when

- it runs on this host and its process no longer exists (a killed driver, relaunched at once), or
- its heartbeat is older than ``stale_after_s`` (a driver on another host that died), or
- the new launch is told so (``takeover=True``, ``sweeper launch --takeover``).

Taking a lease over is a compare-and-set on the old owner, so two drivers racing for a dead one's
lease cannot both win; the first lease of a sweep is an insert on its primary key. Times are Unix
seconds from each driver's clock: hosts whose clocks disagree by more than ``stale_after_s`` would
judge each other wrongly (keep them synchronised, as any cluster does).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import sqlalchemy as sa

from sweeper import storage as st
from sweeper.errors import SweeperError

__all__ = ["Lease", "LeaseHeld", "acquire", "holder", "release", "renew", "sweep_lease"]

logger = logging.getLogger(__name__)

STALE_AFTER_S = 120.0
HEARTBEAT_S = 15.0


class LeaseHeld(SweeperError):
    """Another live driver holds the sweep."""


@dataclass(frozen=True)
class Lease:
    sweep: str
    owner: str
    host: str
    pid: int
    acquired_at: float
    heartbeat_at: float

    def age_s(self, now: float | None = None) -> float:
        """Seconds since the last heartbeat."""
        return (time.time() if now is None else now) - self.heartbeat_at

    def describe(self, now: float | None = None) -> str:
        return f"driver {self.host}:{self.pid}, last heartbeat {self.age_s(now):.0f} s ago"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def holder(sweep: str, url: str | None = None) -> Lease | None:
    """The lease on ``sweep``, or None when no driver holds it."""
    t = st.leases_table
    with st.get_engine(url).connect() as conn:
        row = conn.execute(sa.select(t).where(t.c.sweep == sweep)).mappings().first()
    return None if row is None else Lease(**dict(row))


def _gone(lease: Lease, stale_after_s: float, now: float) -> str | None:
    """Why the holder of ``lease`` counts as gone, or None when it may be alive."""
    if lease.host == socket.gethostname() and not _pid_alive(lease.pid):
        return f"its process {lease.pid} on this host has ended"
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
    """Take the lease on ``sweep`` for this process. Raises :class:`LeaseHeld` when a live driver
    holds it (unless ``takeover``)."""
    t = st.leases_table
    host, pid = socket.gethostname(), os.getpid()
    owner = f"{host}:{pid}:{uuid.uuid4().hex[:12]}"
    for _ in range(3):  # an insert or a takeover can lose a race; look again
        now = time.time()
        mine = Lease(sweep, owner, host, pid, now, now)
        values = asdict(mine)  # the row, column for field
        current = holder(sweep, url)
        if current is None:
            try:
                with st.transaction(url) as conn:
                    conn.execute(sa.insert(t).values(**values))
            except sa.exc.IntegrityError:
                continue  # another driver inserted first
            return mine
        why = "taken over (--takeover)" if takeover else _gone(current, stale_after_s, now)
        if why is None:
            raise LeaseHeld(
                f"sweep {sweep!r} is being run by {current.describe(now)}: one driver per sweep "
                "(wait for it, or stop it; if it is gone and its host cannot tell, its lease "
                f"expires {stale_after_s:.0f} s after its last heartbeat, or relaunch with "
                "--takeover)"
            )
        with st.transaction(url) as conn:
            res = conn.execute(
                sa.update(t)
                .where(t.c.sweep == sweep, t.c.owner == current.owner)
                .values(**{k: v for k, v in values.items() if k != "sweep"})
            )
        if res.rowcount == 1:
            logger.warning("sweep %s: took the lease of %s: %s", sweep, current.describe(now), why)
            return mine
    raise LeaseHeld(f"sweep {sweep!r}: another driver took the lease at the same time")


def renew(lease: Lease, url: str | None = None) -> bool:
    """Refresh the heartbeat; False when the lease is no longer ours (taken over)."""
    t = st.leases_table
    with st.transaction(url) as conn:
        res = conn.execute(
            sa.update(t)
            .where(t.c.sweep == lease.sweep, t.c.owner == lease.owner)
            .values(heartbeat_at=time.time())
        )
    return res.rowcount == 1


def release(lease: Lease, url: str | None = None) -> None:
    """Give the lease back (a no-op when it is no longer ours)."""
    t = st.leases_table
    with st.transaction(url) as conn:
        conn.execute(sa.delete(t).where(t.c.sweep == lease.sweep, t.c.owner == lease.owner))


@contextmanager
def sweep_lease(
    sweep: str,
    url: str | None = None,
    *,
    takeover: bool = False,
    stale_after_s: float = STALE_AFTER_S,
    heartbeat_s: float = HEARTBEAT_S,
) -> Iterator[Lease]:
    """Hold the lease on ``sweep`` for the ``with`` block, renewing it from a daemon thread."""
    lease = acquire(sweep, url, takeover=takeover, stale_after_s=stale_after_s)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(heartbeat_s):
            try:
                if not renew(lease, url):
                    logger.error(
                        "sweep %s: another driver took this driver's lease; its trials may be "
                        "closed and run again",
                        sweep,
                    )
                    return
            except Exception as e:  # a storage hiccup: try again at the next beat
                logger.warning("sweep %s: heartbeat failed: %s", sweep, e)

    thread = threading.Thread(target=beat, name=f"sweeper-lease-{sweep}", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join(timeout=5)
        try:
            release(lease, url)
        except Exception as e:  # the storage is gone: the lease goes stale by itself
            logger.warning("sweep %s: could not release the lease: %s", sweep, e)

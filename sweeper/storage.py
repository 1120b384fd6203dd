"""Where sweeps, imported runs and fitted laws live: any SQLAlchemy URL.

The default is ``sqlite:///sweeper.db`` in the working directory (or ``$SWEEPER_STORAGE``); one
driver writes, so SQLite is safe. PostgreSQL (``postgresql+psycopg://...``) serves several drivers
or a cluster. Optuna keeps its own tables in the same database (one Optuna study per cell, named
``<sweep>/<cell>``); Sweeper's own tables are prefixed ``sweeper_``:

- ``sweeper_sweeps``: one row per sweep (launched or imported) with its resolved study file
- ``sweeper_runs``: imported runs, one JSON row each (unknown columns kept)
- ``sweeper_laws``: fitted laws with their provenance, as JSON
- ``sweeper_leases``: which driver holds a launched sweep, with its heartbeat (:mod:`sweeper.lease`)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sweeper.errors import StorageError

__all__ = [
    "DEFAULT_URL",
    "get_engine",
    "get_law",
    "get_sweep",
    "laws_table",
    "leases_table",
    "list_laws",
    "list_sweeps",
    "metadata",
    "put_law",
    "resolve_url",
    "runs_table",
    "sweeps_table",
    "transaction",
]

DEFAULT_URL = "sqlite:///sweeper.db"

metadata = sa.MetaData()

sweeps_table = sa.Table(
    "sweeper_sweeps",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # "launched" | "imported"
    sa.Column("spec_hash", sa.String(64), nullable=False, default=""),
    sa.Column("study_toml", sa.Text, nullable=False, default=""),
    sa.Column("meta_json", sa.Text, nullable=False, default="{}"),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

runs_table = sa.Table(
    "sweeper_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "sweep", sa.String(255), sa.ForeignKey("sweeper_sweeps.name"), nullable=False, index=True
    ),
    sa.Column("row_json", sa.Text, nullable=False),
)

laws_table = sa.Table(
    "sweeper_laws",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sweep", sa.String(255), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),  # Law.kind
    sa.Column("target", sa.String(32), nullable=False),
    sa.Column("method", sa.String(64), nullable=False, default=""),
    sa.Column("fingerprint", sa.String(64), nullable=False, default=""),
    sa.Column("payload_json", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

leases_table = sa.Table(
    "sweeper_leases",
    metadata,
    sa.Column("sweep", sa.String(255), primary_key=True),
    sa.Column("owner", sa.String(255), nullable=False),  # host:pid:token of the driver
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),  # Unix seconds
    sa.Column("heartbeat_at", sa.Float, nullable=False),
)

_engines: dict[str, Engine] = {}


def resolve_url(url: str | None = None) -> str:
    """The storage URL to use: ``url``, else ``$SWEEPER_STORAGE``, else :data:`DEFAULT_URL`."""
    return url or os.environ.get("SWEEPER_STORAGE") or DEFAULT_URL


def get_engine(url: str | None = None, *, create: bool = True) -> Engine:
    """A cached engine for ``url`` with Sweeper's tables created (when ``create``)."""
    url = resolve_url(url)
    if url in _engines:
        return _engines[url]
    try:
        kwargs: dict[str, Any] = {"pool_pre_ping": True}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 60}
        engine = sa.create_engine(url, **kwargs)
        if create:
            metadata.create_all(engine)
        else:
            with engine.connect():
                pass
    except sa.exc.ArgumentError as e:
        raise StorageError(f"invalid storage URL {url!r}: {e}") from None
    except (sa.exc.OperationalError, ModuleNotFoundError) as e:
        raise StorageError(f"cannot open storage {url!r}: {str(e).splitlines()[0]}") from None
    _engines[url] = engine
    return engine


@contextmanager
def transaction(url: str | None = None) -> Iterator[Connection]:
    """A connection inside one transaction (committed on success, rolled back on error)."""
    with get_engine(url).begin() as conn:
        yield conn


def now() -> datetime:
    return datetime.now(timezone.utc)


def get_sweep(name: str, url: str | None = None) -> dict[str, Any] | None:
    """The ``sweeper_sweeps`` row for ``name`` as a dict (``meta`` decoded), or None."""
    with get_engine(url).connect() as conn:
        row = (
            conn.execute(sa.select(sweeps_table).where(sweeps_table.c.name == name))
            .mappings()
            .first()
        )
    if row is None:
        return None
    out = dict(row)
    out["meta"] = json.loads(out.pop("meta_json") or "{}")
    return out


def list_sweeps(url: str | None = None) -> list[dict[str, Any]]:
    with get_engine(url).connect() as conn:
        rows = (
            conn.execute(sa.select(sweeps_table).order_by(sweeps_table.c.created_at))
            .mappings()
            .all()
        )
    out = []
    for r in rows:
        d = dict(r)
        d["meta"] = json.loads(d.pop("meta_json") or "{}")
        out.append(d)
    return out


def put_law(sweep: str, law_dict: Mapping[str, Any], url: str | None = None) -> int:
    """Store a law's JSON form (``Law.to_dict()``) for ``sweep``; returns its id."""
    payload = dict(law_dict)
    payload.pop("id", None)
    with transaction(url) as conn:
        res = conn.execute(
            laws_table.insert().values(
                sweep=sweep,
                kind=payload["kind"],
                target=payload["target"],
                method=payload.get("method", ""),
                fingerprint=payload.get("fingerprint", ""),
                payload_json=json.dumps(payload),
                created_at=now(),
            )
        )
        pk = res.inserted_primary_key
        assert pk is not None
        return int(pk[0])


def _law_row(row: Mapping[str, Any]) -> dict[str, Any]:
    d = json.loads(row["payload_json"])
    d["id"] = int(row["id"])
    d["sweep"] = row["sweep"]
    d["created_at"] = row["created_at"].isoformat() if row["created_at"] else None
    return d


def get_law(law_id: int, url: str | None = None) -> dict[str, Any] | None:
    with get_engine(url).connect() as conn:
        row = (
            conn.execute(sa.select(laws_table).where(laws_table.c.id == law_id)).mappings().first()
        )
    return None if row is None else _law_row(dict(row))


def list_laws(sweep: str | None = None, url: str | None = None) -> list[dict[str, Any]]:
    q = sa.select(laws_table).order_by(laws_table.c.id)
    if sweep is not None:
        q = q.where(laws_table.c.sweep == sweep)
    with get_engine(url).connect() as conn:
        return [_law_row(dict(r)) for r in conn.execute(q).mappings().all()]

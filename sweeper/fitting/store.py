"""The laws store: fitted laws in the ``sweeper_laws`` table, as the JSON of
:meth:`Law.to_dict <sweeper.fitting.laws.Law.to_dict>` (with its ``schema_version``).

Laws stored by earlier versions of Sweeper (schema 1: string-keyed conventions) are read too; see
:meth:`Conventions.from_json <sweeper.fitting.conventions.Conventions.from_json>`. A stored law
comes back with its ``id`` and ``created_at`` set; the sweep it was fitted to is its ``source``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Final

import sqlalchemy as sa

from sweeper.errors import StorageError
from sweeper.fitting.laws import Law, LossLaw, PowerLaw, law_from_dict
from sweeper.study import storage

__all__ = ["get_law", "latest_laws", "list_laws", "put_law"]


#: the resamples a stored law keeps (a fit keeps every one it made, for a diff's far tails; a
#: --bootstrap of 100,000 had stored 6 MB of JSON a law: a review); intervals at a target read
#: these, 10,000 leave each 2.5% tail 250 draws
MAX_STORED_DRAWS: Final[int] = 10_000


def put_law(law: Law, url: str | None = None, *, sweep: str | None = None) -> Law:
    """Store ``law`` (for ``sweep``, default its ``source``); returns it with ``id`` and
    ``created_at`` set. A law equal to the latest one stored for its sweep and target (a fit run
    again on the same runs) is not stored twice: that one is returned."""
    if isinstance(law, PowerLaw) and len(law.boot_coefs) > MAX_STORED_DRAWS:  # (--bootstrap 1e5)
        law = replace(law, boot_coefs=law.boot_coefs[:MAX_STORED_DRAWS])
    payload = law.to_dict()
    payload.pop("id", None)
    payload.pop("created_at", None)
    text = json.dumps(payload)
    created = storage.now()
    t = storage.laws_table
    with storage.transaction(url) as conn:
        last = conn.execute(
            sa.select(t)
            .where(t.c.sweep == (sweep or law.source), t.c.target == law.target)
            .order_by(t.c.id.desc())
            .limit(1)
        ).mappings().first()
        if last is not None and last["payload_json"] == text:
            return _law_of(last)
        res = conn.execute(
            storage.laws_table.insert().values(
                sweep=sweep or law.source,
                kind=law.kind,
                target=law.target,
                method=law.method,
                fingerprint=getattr(law, "fingerprint", ""),
                payload_json=text,
                created_at=created,
            )
        )
        pk = res.inserted_primary_key
        assert pk is not None
    return replace(law, id=int(pk[0]), created_at=created.isoformat())


def _law_of(row: sa.RowMapping) -> Law:
    d = json.loads(row["payload_json"])
    d["id"] = int(row["id"])
    d["created_at"] = row["created_at"].isoformat() if row["created_at"] else None
    d.setdefault("source", row["sweep"])
    return law_from_dict(d)


def get_law(law_id: int, url: str | None = None) -> Law:
    """The stored law ``law_id``; StorageError when there is none."""
    t = storage.laws_table
    with storage.get_engine(url).connect() as conn:
        row = conn.execute(sa.select(t).where(t.c.id == law_id)).mappings().first()
    if row is None:
        where = storage.safe_url(storage.resolve_url(url))
        raise StorageError(f"no law with id {law_id} in {where}")
    return _law_of(row)


def list_laws(sweep: str | None = None, url: str | None = None) -> list[Law]:
    """Every stored law (of ``sweep`` when given), oldest first."""
    t = storage.laws_table
    q = sa.select(t).order_by(t.c.id)
    if sweep is not None:
        q = q.where(t.c.sweep == sweep)
    with storage.get_engine(url).connect() as conn:
        return [_law_of(r) for r in conn.execute(q).mappings().all()]


def latest_laws(
    sweep: str, url: str | None = None, *, method: str | None = None
) -> tuple[dict[str, Law], LossLaw | None]:
    """The latest lr and batch_tokens laws of ``sweep`` (keyed by target) and its latest loss
    law; ``method`` keeps only laws fitted by that method (``parabola``, ``band``, ...)."""
    laws: dict[str, Law] = {}
    loss: LossLaw | None = None
    for law in list_laws(sweep, url):  # ordered by id: later fits replace earlier ones
        if isinstance(law, LossLaw):
            loss = law
        elif law.target in ("lr", "batch_tokens") and (
            method is None or law.method.startswith(method)
        ):
            laws[law.target] = law
    return laws, loss

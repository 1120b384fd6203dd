"""Where sweeps, imported runs and fitted laws live: any SQLAlchemy URL.

The default is ``sqlite:///sweeper.db`` in the working directory (or ``$SWEEPER_STORAGE``); one
driver writes, so SQLite is safe. PostgreSQL (``postgresql+psycopg://...``) serves several drivers
or a cluster. A SQLite file is created only by what writes (a launch, an import, a stored law);
what only reads refuses a file that does not exist (:func:`get_engine`), so that a mistyped URL
is said to be one instead of leaving an empty database behind. Optuna keeps its own tables in
the same database (one Optuna study per cell, named ``<sweep>/<cell>``); Sweeper's own tables are
prefixed ``sweeper_``:

- ``sweeper_sweeps``: one row per sweep (launched or imported) with its resolved study file
- ``sweeper_runs``: imported runs, one JSON row each (unknown columns kept)
- ``sweeper_laws``: fitted laws with their provenance, as JSON (:mod:`sweeper.fitting.store`)
- ``sweeper_leases``: which driver holds a launched sweep, with its heartbeat and fencing epoch
  (:mod:`sweeper.study.lease`)

Storage URLs are shown to people only through :func:`safe_url` (the password masked), and a
database driver's error text only through :func:`redact`. Prefer URLs without a password
(libpq's ``PGPASSWORD`` or ``~/.pgpass``), given in ``$SWEEPER_STORAGE``: see docs/CLUSTER.md.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sweeper.errors import StorageError

__all__ = [
    "DEFAULT_URL",
    "error_line",
    "get_engine",
    "get_sweep",
    "laws_table",
    "leases_table",
    "list_sweeps",
    "metadata",
    "missing_database",
    "no_sweep",
    "redact",
    "resolve_url",
    "runs_table",
    "safe_url",
    "sqlite_file",
    "sweeps_table",
    "transaction",
    "url_password",
]

DEFAULT_URL = "sqlite:///sweeper.db"
#: the longest sweep name the tables hold (PostgreSQL refuses a longer one; SQLite does not check)
MAX_NAME = 255
#: Optuna's own tables (RDBStorage's, with its Alembic version): a launched sweep's storage holds
#: them beside Sweeper's, and a database of Optuna studies alone may take Sweeper's too
OPTUNA_TABLES = frozenset({
    "alembic_version", "studies", "study_directions", "study_system_attributes",
    "study_user_attributes", "trial_heartbeats", "trial_intermediate_values", "trial_params",
    "trial_system_attributes", "trial_user_attributes", "trial_values", "trials", "version_info",
})  # fmt: skip

metadata = sa.MetaData()

sweeps_table = sa.Table(
    "sweeper_sweeps",
    metadata,
    sa.Column("name", sa.String(MAX_NAME), primary_key=True),
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
        "sweep",
        sa.String(MAX_NAME),
        sa.ForeignKey("sweeper_sweeps.name"),
        nullable=False,
        index=True,
    ),
    sa.Column("row_json", sa.Text, nullable=False),
)

laws_table = sa.Table(
    "sweeper_laws",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sweep", sa.String(MAX_NAME), nullable=False, index=True),
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
    sa.Column("sweep", sa.String(MAX_NAME), primary_key=True),
    sa.Column("owner", sa.String(255), nullable=False),  # host:pid:token of the driver; "" released
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),  # Unix seconds
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    # fencing token: incremented by every acquisition; every write of a driver checks it
    sa.Column("epoch", sa.Integer, nullable=False, server_default="1"),
)

_engines: dict[str, Engine] = {}


#: query parameters of a URL whose values are secrets (libpq's ``password``, and the like)
_SECRET_KEYS = re.compile(r"(?i)^(password|passwd|pwd|pass|secret|token|sslpassword)$")
#: ``scheme://user:secret@`` anywhere in a text. A secret with a space or a quote is not read
#: past them (``ray://head:10001; try ssh me@head`` is no URL's secret: a review): a known URL's
#: password is masked by :func:`redact`'s ``urls`` wherever it appears (the launch's storage in
#: Ray's job table: a cluster audit)
_URL_SECRET = re.compile(r"(?i)([a-z][a-z0-9+.\-]*://[^\s:/@'\"]*:)[^\s@'\"]*@")
#: ``password=secret`` (libpq keyword strings, query strings) anywhere in a text
_KEY_SECRET = re.compile(
    r"(?i)\b(password|passwd|pwd|sslpassword)(\s*[=:]\s*)('[^']*'|\"[^\"]*\"|[^\s&;,)'\"]+)"
)
#: a URL's authority split at its last ``@``: a password with an unencoded ``@`` in it
#: (``user:p@ss@host``) is all of the user part, where SQLAlchemy's parser stops at the first
_AUTHORITY = re.compile(r"(?is)^([a-z][a-z0-9+.\-]*://)([^/?#]*)@([^/?#@]*)(.*)$")


def unencoded_at(url: str | None) -> bool:
    """Whether ``url``'s user part holds an ``@`` (a password's, unencoded: it must be ``%40``)."""
    m = _AUTHORITY.match(url or "")
    return m is not None and "@" in m.group(2)


def _userinfo_password(url: str) -> str | None:
    """The password of ``url``'s user part, read up to the authority's last ``@``."""
    m = _AUTHORITY.match(url)
    if m is None:
        return None
    _user, sep, password = m.group(2).partition(":")
    return password if sep and password else None


def safe_url(url: str) -> str:
    """``url`` for humans: the password masked (``***``), in the user part and in the query.
    Every message, log line, report and JSON output that shows a storage URL goes through this
    function."""
    m = _AUTHORITY.match(url)
    if m is not None and "@" in m.group(2):  # an unencoded "@" in the password: mask all of it
        user = m.group(2).partition(":")[0]
        return redact(f"{m.group(1)}{user}:***@{m.group(3)}{m.group(4)}")
    try:
        u = sa.engine.make_url(url)
        plain = u.password is None and not any(map(_SECRET_KEYS.match, u.query))
        if u.get_backend_name() == "sqlite" and plain:  # (not SQLCipher's passphrase: a review)
            return url  # (a file path, as given: rendered, a unicode one was percent-encoded)
        if u.query:
            u = u.set(
                query={k: ("***" if _SECRET_KEYS.match(k) else v) for k, v in u.query.items()}
            )
        return u.render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy can parse: mask it as text
        return _mask_unparsed(redact(url))


#: what leads a text that SQLAlchemy could not parse as a URL: a scheme, however misspelt
_SCHEME_HEAD = re.compile(r"(?i)^[a-z][a-z0-9+.\-]*:/*(?=[^/])")


def _mask_unparsed(text: str) -> str:
    """A URL SQLAlchemy cannot parse, with what follows the first ``:`` of its user part masked
    up to the last ``@``: ``user:secret@host`` without a scheme, or ``scheme:/user:secret@``
    with a slash missing, had been printed whole, password and all (a storage audit). A head
    ``word:`` with no slash after it is a scheme only when another ``:`` follows (else it is
    ``user:secret``); a user part with no ``:`` holds no password and is kept (a review)."""
    head, at, tail = text.rpartition("@")
    if not at:
        return text
    m = _SCHEME_HEAD.match(head)
    is_scheme = m is not None and (m.group(0).endswith("/") or ":" in head[m.end():])
    scheme = m.group(0) if m is not None and is_scheme else ""
    name, colon, _secret = head[len(scheme):].partition(":")
    return f"{scheme}{name}{':***' if colon else ''}@{tail}"


def masked_repr(obj: Any, *url_fields: str) -> str:
    """A dataclass's repr with the storage URLs in ``url_fields`` passed through :func:`safe_url`
    (a notebook shows the repr of what a call returns, and saves it in the notebook file: the
    generated one had shown a launch's storage password)."""
    import dataclasses

    parts = []
    for f in dataclasses.fields(obj):
        if f.repr:
            v = getattr(obj, f.name)
            shown = safe_url(v) if f.name in url_fields and isinstance(v, str) else v
            parts.append(f"{f.name}={shown!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"


def redact(text: str, *urls: str | None) -> str:
    """``text`` (a database driver's error message, a log line) with every secret masked: the
    password of each URL in ``urls`` wherever it appears, and anything that looks like one
    (``scheme://user:secret@``, ``password=secret``)."""
    out = str(text)
    for url in urls:
        if not url:
            continue
        out = out.replace(url, safe_url(url))
        try:
            parsed = sa.engine.make_url(url).password
        except Exception:
            parsed = None
        whole = _userinfo_password(url)
        # (with an unencoded "@" the driver saw a piece of the password as the host name)
        pieces = whole.split("@") if whole and "@" in whole else []
        for secret in sorted({str(x) for x in (parsed, whole, *pieces) if x}, key=len)[::-1]:
            if len(secret) >= 3:
                out = out.replace(secret, "***")
    out = _URL_SECRET.sub(r"\1***@", out)
    return _KEY_SECRET.sub(r"\1\2***", out)


def url_password(url: str | None) -> str | None:
    """The password written in ``url`` itself (None when it has none: libpq then reads
    ``PGPASSWORD`` or ``~/.pgpass``)."""
    if not url:
        return None
    try:
        u = sa.engine.make_url(url)
    except Exception:
        return None
    if u.password:
        return str(u.password)
    for k, v in u.query.items():
        if _SECRET_KEYS.match(k) and v:
            return str(v)
    return None


def resolve_url(url: str | None = None) -> str:
    """The storage URL to use: ``url``, else ``$SWEEPER_STORAGE``, else :data:`DEFAULT_URL`. An
    empty ``url`` given (``--storage ''``, a script's unset variable) is refused: it had meant
    ./sweeper.db in silence (an empty ``$SWEEPER_STORAGE`` is unset, as the shell's ``VAR=``)."""
    if isinstance(url, str) and not url.strip():
        raise StorageError(
            "the storage URL is empty: give a SQLAlchemy URL (sqlite:///sweeper.db), or leave "
            "--storage out for $SWEEPER_STORAGE or the default"
        )
    return url or os.environ.get("SWEEPER_STORAGE") or DEFAULT_URL


def sqlite_file(url: str) -> str | None:
    """The file a SQLite ``url`` names (as SQLite resolves it: a relative path from the working
    directory), or None: not SQLite, an in-memory database (``sqlite://``, ``:memory:``, a URI
    with ``mode=memory``), or not a URL SQLAlchemy parses (:func:`get_engine` then says so)."""
    try:
        u = sa.engine.make_url(url)
    except Exception:
        return None
    if u.get_backend_name() != "sqlite":
        return None
    path = u.database or ""
    if str(u.query.get("uri", "")).lower() in ("true", "1") and path.startswith("file:"):
        if u.query.get("mode") == "memory":
            return None
        path = path[len("file:") :]
        if path.startswith("//"):  # file://[host]/path
            path = "/" + path[2:].partition("/")[2]
    if path in ("", ":memory:"):
        return None
    return path


def missing_database(url: str) -> str | None:
    """Why ``url`` cannot be read: its SQLite file does not exist (None when it does, or when
    ``url`` is not a SQLite file). Opening it would create an empty database there."""
    path = sqlite_file(url)
    if path is None or os.path.exists(path):
        return None
    return (
        f"no database at {os.path.abspath(path)}: `sweeper launch` or `sweeper import` creates "
        "one (check --storage or $SWEEPER_STORAGE)"
    )


def missing_folder(url: str) -> str | None:
    """Why a SQLite file cannot be created at ``url``: its folder does not exist (SQLite said
    only "unable to open database file"; a storage audit). None otherwise."""
    path = sqlite_file(url)
    if path is None or os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return None
    return (
        f"cannot create the database {os.path.abspath(path)}: its folder "
        f"{os.path.dirname(os.path.abspath(path))} does not exist (create it, or check --storage "
        "or $SWEEPER_STORAGE)"
    )


def get_engine(url: str | None = None, *, create: bool = True, new: bool = False) -> Engine:
    """A cached engine for ``url`` with Sweeper's tables created (when ``create``).

    ``new``: the caller may create the database (it launches or imports a sweep, or writes).
    Without it, a SQLite file that does not exist raises StorageError (:func:`missing_database`)
    instead of being created empty: the verbs that only read (status, fit, laws, recommend, ...)
    never leave a database behind a mistyped URL. Other databases (PostgreSQL) are created by
    their administrator: ``new`` does not apply to them."""
    url = resolve_url(url)
    if not new and (why := missing_database(url)):
        raise StorageError(why)
    if new and (why := missing_folder(url)):
        raise StorageError(why)
    if url in _engines:
        return _engines[url]
    try:
        kwargs: dict[str, Any] = {"pool_pre_ping": True}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 60}
        engine = sa.create_engine(url, **kwargs)
        if why := _foreign_database(engine, url, new=new):
            raise StorageError(why)
        if create:
            created(lambda: metadata.create_all(engine))
            _migrate(engine)
        else:
            with engine.connect():
                pass
    except sa.exc.ArgumentError as e:
        raise StorageError(
            f"invalid storage URL {safe_url(url)!r}: {redact(str(e), url)}{_path_hint(url)}"
        ) from None
    except (sa.exc.SQLAlchemyError, ModuleNotFoundError, ValueError) as e:
        said = error_line(e, url)
        if isinstance(e, ValueError) and said.startswith("invalid literal for int()"):
            said = "its port is not a number"  # (Python's own words had been the message)
        if isinstance(e, ModuleNotFoundError) and e.name == "psycopg2":
            said += (
                " (psycopg2 is not installed: postgresql+psycopg:// or postgresql:// uses "
                "psycopg 3, which is)"
            )
        raise StorageError(f"cannot open storage {safe_url(url)!r}: {said}") from None
    _engines[url] = engine
    return engine


def _path_hint(url: str) -> str:
    """A hint for a storage URL that is a bare file path (``x.db``): SQLite's URL of it."""
    if "://" in url or "@" in url:  # (a URL, or a password in it: never repeated)
        return ""
    return f"; a SQLite file is written sqlite:///{url}"


def _foreign_database(engine: Engine, url: str, *, new: bool = False) -> str:
    """Why ``url`` must not be opened ("" when it may): a database that holds tables, none of
    them Sweeper's, is another program's, which creating Sweeper's tables would change (a
    robustness audit's `status` added four tables to a SQLite file; a storage audit's to a
    PostgreSQL database, one mistyped name from a production one; another's `import` wrote
    there). A writer (``new``) may add them beside Optuna's own tables alone (a database of
    Optuna studies). A reader refuses a SQLite file with no tables at all (an empty file), as it
    refuses a missing one: creating the tables would write to it (a storage audit)."""
    names = sa.inspect(engine).get_table_names()
    if any(n.startswith("sweeper_") for n in names):
        return ""
    if not names:
        path = sqlite_file(url)
        if new or path is None:
            return ""
        return (
            f"no Sweeper storage in {os.path.abspath(path)}: the database holds no tables; "
            "`sweeper launch` or `sweeper import` creates them (check --storage or "
            "$SWEEPER_STORAGE)"
        )
    if new and set(names) <= OPTUNA_TABLES:
        return ""
    return (
        f"{safe_url(url)} holds other tables ({', '.join(sorted(names)[:3])}"
        f"{', ...' if len(names) > 3 else ''}) and none of Sweeper's: not a Sweeper storage; "
        "give another database or SQLite file (--storage)"
    )


def created(make: Any, tries: int = 5) -> Any:
    """``make()`` (something that creates tables: ``create_all``, Optuna's storage), again when
    another process created the same tables at the same moment: PostgreSQL then refuses one of
    the two ``CREATE TABLE`` (a duplicate type or relation); the next try sees them and skips."""
    for i in range(tries):
        try:
            return make()
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError) as e:
            text = str(getattr(e, "orig", e))
            if i == tries - 1 or ("already exists" not in text and "duplicate key" not in text):
                raise
            time.sleep(0.2 * (i + 1))
    return None


def error_line(e: BaseException, url: str | None = None) -> str:
    """The first line of a database error, secrets redacted (for one-line messages)."""
    text = str(getattr(e, "orig", None) or e) or type(e).__name__
    return redact(text.strip().splitlines()[0] if text.strip() else type(e).__name__, url)


def _migrate(engine: Engine) -> None:
    """Bring the tables of an older Sweeper up to date: ``sweeper_leases.epoch``."""
    cols = {c["name"] for c in sa.inspect(engine).get_columns("sweeper_leases")}
    if "epoch" in cols:
        return
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("ALTER TABLE sweeper_leases ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1")
            )
    except sa.exc.DatabaseError:  # another process added it at the same time
        cols = {c["name"] for c in sa.inspect(engine).get_columns("sweeper_leases")}
        if "epoch" not in cols:
            raise


@contextmanager
def transaction(url: str | None = None) -> Iterator[Connection]:
    """A connection inside one transaction (committed on success, rolled back on error). A write:
    it may create the database (``get_engine(new=True)``)."""
    with get_engine(url, new=True).begin() as conn:
        yield conn


def now() -> datetime:
    return datetime.now(timezone.utc)


def no_sweep(name: str, url: str | None = None) -> StorageError:
    """The error for a sweep ``name`` that ``url`` does not hold, naming the sweeps it does (the
    one wording of every verb that looks a sweep up)."""
    url = resolve_url(url)
    known = [s["name"] for s in list_sweeps(url)]
    where = safe_url(url)
    if known:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return StorageError(f"no sweep {name!r} in {where}{hint}; known sweeps: {', '.join(known)}")
    return StorageError(f"no sweep {name!r} in {where}: the storage holds no sweeps")


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

"""One sweep in a storage, loaded once and passed down: :class:`Sweep`.

Every stage that works on a stored sweep (fit, report, validate-transfer, the Python API) starts
from this handle instead of resolving the sweep's name through the storage again: the
``sweeper_sweeps`` row is read once, the study a launched sweep was made from is parsed once, and
the runs table is read on first use and kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from sweeper.errors import StorageError, SweeperError
from sweeper.study import storage
from sweeper.study.spec import StudySpec, parse_study_toml

if TYPE_CHECKING:
    import optuna
    import pandas as pd

__all__ = ["Sweep"]


@dataclass
class Sweep:
    """A launched or imported sweep: its name, storage URL, kind, stored study and metadata.

    ``spec`` is the study a launched sweep was made from (None for an imported sweep, or when the
    stored study no longer parses: ``spec_error`` says why). :meth:`runs` reads the runs table
    once (see :mod:`sweeper.study.runs` for its columns).
    """

    name: str
    url: str
    kind: str  # "launched" | "imported"
    meta: Mapping[str, Any]
    spec: StudySpec | None = None
    spec_error: str | None = None
    _runs: pd.DataFrame | None = field(default=None, repr=False)

    @classmethod
    def load(cls, name: str, storage_url: str | None = None) -> Sweep:
        """The sweep ``name`` in ``storage_url`` (default: ``$SWEEPER_STORAGE``, else
        ``sqlite:///sweeper.db``). StorageError naming the known sweeps when there is none, and
        for a name or storage of another type (a Path had raised a bare AttributeError)."""
        for arg, value, kind in (
            ("name", name, "a sweep's name (a string)"),
            ("storage_url", storage_url, "a SQLAlchemy URL (a string) or None"),
        ):
            if not (isinstance(value, str) or (value is None and arg == "storage_url")):
                shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
                hint = f" (a file: 'sqlite:///{value}')" if isinstance(value, PurePath) else ""
                raise StorageError(f"{arg} must be {kind}, got {shown}{hint}")
        url = storage.resolve_url(storage_url)
        row = storage.get_sweep(name, url)
        if row is None:
            raise storage.no_sweep(name, url)
        spec, error = None, None
        if row.get("study_toml"):  # launched, or imported with the study it was trained from
            try:
                spec = parse_study_toml(row["study_toml"], source=f"sweep:{name}")
            except SweeperError as e:  # a study stored by another version of Sweeper
                error = str(e)
        return cls(
            name=name,
            url=url,
            kind=str(row["kind"]),
            meta=dict(row.get("meta") or {}),
            spec=spec,
            spec_error=error,
        )

    def __repr__(self) -> str:  # (the generated one printed the whole study, 2k characters)
        made = f", from study {self.spec.name!r}" if self.spec is not None else ""
        return f"Sweep({self.name!r}, {self.kind}, {storage.safe_url(self.url)}{made})"

    @property
    def launched(self) -> bool:
        return self.kind == "launched"

    def runs(self) -> pd.DataFrame:
        """Every run of the sweep as a runs table (read on first use, then kept; each call returns
        a copy, so that editing it changes no later fit, report or stored law). Call
        :meth:`refresh` after the sweep has grown."""
        if self._runs is None:
            from sweeper.study.importer import load_runs

            self._runs = load_runs(self.name, self.url)
        return self._runs.copy()

    def refresh(self) -> Sweep:
        """Forget the runs read so far (the next :meth:`runs` reads them again)."""
        self._runs = None
        return self

    def cell_studies(self) -> list[optuna.Study]:
        """The Optuna study of every cell of a launched sweep, in ladder order."""
        if not self.launched:
            raise StorageError(f"sweep {self.name!r} was imported: it has no cell studies")
        from sweeper.study.sweep import cell_studies

        return cell_studies(self.name, self.url)

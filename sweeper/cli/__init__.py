"""The ``sweeper`` console script: one subcommand per verb.

Each verb lives in a module of this package that exposes ``register(subparsers)``; the parser it
adds sets ``func(args) -> int``. Verb modules import nothing heavy at module level: torch and ray
are imported inside the verbs that train, so query verbs start fast.

Exit codes: 0 success, 2 bad input or a state Sweeper cannot work with (one line per problem on
stderr; traceback only with ``--debug``), 1 internal failure.

Secrets: every line the CLI prints for an error, and every log record, goes through
:func:`sweeper.study.storage.redact` (storage URLs are shown with :func:`safe_url
<sweeper.study.storage.safe_url>` everywhere). A password written in ``--storage URL`` is visible
to ``ps``; the CLI warns, and points to password-less URLs (``PGPASSWORD``, ``~/.pgpass``) or
``$SWEEPER_STORAGE``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence

from sweeper.errors import SweeperError

__all__ = ["build_parser", "main"]

#: verb modules, in the order their verbs are listed in ``sweeper --help``
VERB_MODULES: tuple[str, ...] = (
    "sweeper.cli.trial",  # trial
    "sweeper.cli.study",  # validate, launch, status, trials
    "sweeper.cli.fitting",  # import, fit, laws, compare
    "sweeper.cli.recipe",  # recommend, export, check
    "sweeper.cli.report",  # report, validate-transfer
    "sweeper.cli.own_model",  # coord-check, diff
)


class _Parser(argparse.ArgumentParser):
    """argparse that exits with code 2 and one line (argparse's default also prints usage)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"sweeper: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sweeper", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


class _Redact(logging.Filter):
    """Masks secrets in every log record (a database driver's message may quote a URL)."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self.urls = urls

    def filter(self, record: logging.LogRecord) -> bool:
        from sweeper.study.storage import redact

        try:
            msg = record.getMessage()
        except Exception:  # a broken record: leave it to logging
            return True
        clean = redact(msg, *self.urls)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(
                "".join(traceback.format_exception(*record.exc_info)).rstrip(), *self.urls
            )
            record.exc_info = None
        return True


def _urls(args: argparse.Namespace) -> list[str]:
    return [u for u in (getattr(args, "storage", None), os.environ.get("SWEEPER_STORAGE")) if u]


def _warn_password(args: argparse.Namespace) -> None:
    from sweeper.study.storage import unencoded_at, url_password

    url = getattr(args, "storage", None)
    if url_password(url):
        print(
            "sweeper: warning: the --storage URL carries a password, which any user of this "
            "machine can read with `ps` (and Ray records the command line of a driver); leave it "
            "out of the URL and let the database client find it (PGPASSWORD, ~/.pgpass), or "
            "put the whole URL in $SWEEPER_STORAGE",
            file=sys.stderr,
        )
    if unencoded_at(url):  # (only the last "@" ends the user part)
        print(
            "sweeper: warning: the --storage URL has more than one '@' before its host: an '@' "
            "in a password must be written %40 in a URL",
            file=sys.stderr,
        )


#: a negative number as a value (``-1e9``, ``-2.5``, ``-7B``): argparse takes ``-1e9`` for an option
_NEGATIVE = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[kKMBGT]?$")


def _joined_negatives(argv: Sequence[str]) -> list[str]:
    """``--opt -1e9`` as ``--opt=-1e9``, so that argparse hands the value to the option's own
    check ("n_params must be positive") instead of saying "expected one argument"."""
    out: list[str] = []
    for a in argv:
        prev = out[-1] if out else ""
        if _NEGATIVE.match(a) and prev.startswith("--") and "=" not in prev:
            out[-1] = f"{prev}={a}"
        else:
            out.append(a)
    return out


#: SQLite URLs of a database in memory (a command's storage there is lost when it ends)
_IN_MEMORY = (
    "sqlite://",
    "sqlite:///",
    "sqlite:///:memory:",
    "sqlite+pysqlite://",
    "sqlite+pysqlite:///:memory:",
)


def _user_error(e: Exception) -> str:
    """The one line for a failure that is the input's, not Sweeper's ("" otherwise): a file or
    folder that cannot be written or read (an ``-o`` into a missing directory, onto a directory,
    without permission), and a storage that cannot be written (a read-only SQLite file)."""
    if isinstance(e, OSError) and not isinstance(e, ConnectionError):
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        return f"{e.strerror}{where}" if e.strerror else (str(e).splitlines() or [""])[0]
    text = (str(e).splitlines() or [""])[0]
    if type(e).__name__ == "OperationalError" and "readonly database" in text:
        return "the storage is read-only here (the SQLite file or its folder): " + text
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_joined_negatives(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.DEBUG
        if args.verbose > 1
        else logging.INFO
        if args.verbose
        else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    urls = _urls(args)
    redactor = _Redact(urls)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redactor)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from sweeper.study.storage import redact

    _warn_password(args)
    if str(getattr(args, "storage", "") or "").strip() in _IN_MEMORY:
        print(
            f"sweeper: error: --storage {args.storage}: an in-memory SQLite database keeps "
            "nothing after this command; give a file (sqlite:///sweeper.db)",
            file=sys.stderr,
        )
        return 2
    try:
        return int(args.func(args) or 0)
    except SweeperError as e:
        if args.debug:
            _print_traceback(e, urls)
        for line in redact(str(e), *urls).splitlines() or [type(e).__name__]:
            print(f"sweeper: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        sig = getattr(e, "signal_name", "")  # (errors.Interrupted: a launch the verb made)
        resume = ": what finished is kept; the same command resumes" if sig else ""
        print(f"sweeper: interrupted{f' ({sig})' if sig else ''}{resume}", file=sys.stderr)
        return 128 + (15 if sig == "SIGTERM" else 2)
    except BrokenPipeError:
        return 0
    except Exception as e:  # internal failure: one line unless --debug
        said = _user_error(e)
        if said:  # (a path or a storage the user gave: not Sweeper's failure)
            print(f"sweeper: error: {redact(said, *urls)}", file=sys.stderr)
            return 2
        if args.debug:
            _print_traceback(e, urls)
        first = (str(e).strip().splitlines() or [""])[0]
        print(
            f"sweeper: internal error: {type(e).__name__}: {redact(first, *urls)} "
            "(rerun with --debug)",
            file=sys.stderr,
        )
        return 1
    finally:
        for handler in logging.getLogger().handlers:
            handler.removeFilter(redactor)


def _print_traceback(e: BaseException, urls: list[str]) -> None:
    from sweeper.study.storage import redact

    print(redact("".join(traceback.format_exception(e)).rstrip(), *urls), file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())

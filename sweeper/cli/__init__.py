"""The ``sweeper`` console script: one subcommand per verb.

Each verb lives in a module of this package that exposes ``register(subparsers)``; the parser it
adds sets ``func(args) -> int``. Verb modules import nothing heavy at module level: torch and ray
are imported inside the verbs that train, so query verbs start fast.

Exit codes: 0 success, 2 bad input (one line per problem on stderr; traceback only with
``--debug``), 1 internal failure.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG
        if args.verbose > 1
        else logging.INFO
        if args.verbose
        else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SweeperError as e:
        if args.debug:
            raise
        for line in str(e).splitlines() or [type(e).__name__]:
            print(f"sweeper: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sweeper: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # internal failure: one line unless --debug
        if args.debug:
            raise
        print(
            f"sweeper: internal error: {type(e).__name__}: {e} (rerun with --debug)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

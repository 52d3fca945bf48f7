"""Command-line wiring only: each subcommand lives in memtune/commands/<name>.py.

A command module exposes ``register(subparsers)`` (adds its parser and sets
``func``) and keeps its work in functions the tests can call directly.
Exit codes: 0 ok, 1 a check found problems (violations, invalid KB), 2 bad input, 3 internal
error (a bug: the one-line message says what to report), 130 interrupted.  Nothing escapes
``main`` as a traceback.

``main`` imports only the module of the command being run (``memtune diagnose`` does not pay
for importing what the other eight commands need); anything else - no command, ``--help``,
``--version``, a mistyped command - builds the full parser as before.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import UserError
from .knowledge import KnowledgeError

COMMAND_MODULES = ["diagnose", "check", "explain", "kb", "snapshot", "verify", "apply", "estimate", "plan", "compare"]
# Commands registered by a module of another name.
COMMAND_MODULE_OF = {"rollback": "apply"}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with ``only`` (a command name) a parser holding just that command.

    Both parse that command's arguments identically; the full one also lists every command in
    ``--help`` and in the invalid-choice error.
    """
    parser = argparse.ArgumentParser(
        prog="memtune",
        description="Diagnose and fix GPU out-of-memory failures in Megatron Bridge training. "
        "Reads only the files you pass; never uses the network.",
    )
    parser.add_argument("--version", action="version", version=f"memtune {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in [COMMAND_MODULE_OF.get(only, only)] if only else COMMAND_MODULES:
        importlib.import_module(f"memtune.commands.{name}").register(sub)
    if only and only not in sub.choices:  # a module that does not register the name it is listed under
        return build_parser()
    return parser


def _command(argv: list[str]) -> str | None:
    """The command name in ``argv`` when the top-level parser would just pass the rest to it, else None."""
    if not argv or argv[0].startswith("-"):  # --help / --version / an option the top level will reject
        return None
    name = argv[0]
    return name if COMMAND_MODULE_OF.get(name, name) in COMMAND_MODULES else None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_command(sys.argv[1:] if argv is None else list(argv)))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return 0
    except BaseException as exc:  # noqa: BLE001 - the one error path: a line on stderr, never a traceback
        code, message = error_line(exc)
        if message:
            from .render.out import error

            error(message)
        return code


def error_line(exc: BaseException) -> tuple[int, str]:
    """Exit code and one-line message for anything a command raised.

    2: the input was refused (UserError names the file, key or line; the others are inputs
    too deep, too large or unreadable); 3: a bug here, with what to report; 130: interrupted.
    """
    def one_line(text: object) -> str:
        return " ".join(str(text).split())[:2000]

    if isinstance(exc, (UserError, KnowledgeError)):
        return 2, f"memtune: error: {one_line(exc)}"
    if isinstance(exc, KeyboardInterrupt):
        return 130, "memtune: interrupted"
    if isinstance(exc, SystemExit):
        return int(exc.code) if isinstance(exc.code, int) else 2, one_line(exc.code or "")
    if isinstance(exc, RecursionError):
        return 2, "memtune: error: an input is nested too deeply to read (no real config, log or snapshot is)"
    if isinstance(exc, MemoryError):
        return 2, "memtune: error: an input is too large to hold in memory; pass a smaller excerpt"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return 2, f"memtune: error: {where}{one_line(exc.strerror or exc)}"
    return 3, (f"memtune: internal error: {type(exc).__name__}: {one_line(exc)[:300]} - this is a bug in memtune "
               f"{__version__}; please report it with the command line that caused it")


if __name__ == "__main__":
    sys.exit(main())

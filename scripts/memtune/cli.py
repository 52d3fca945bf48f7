"""Command-line wiring only: each subcommand lives in memtune/commands/<name>.py.

A command module exposes ``register(subparsers)`` (adds its parser and sets
``func``) and keeps its work in functions the tests can call directly.
Exit codes: 0 ok, 1 a check found problems (violations, invalid KB), 2 bad input.

``main`` imports only the module of the command being run (``memtune diagnose`` does not pay
for importing what the other eight commands need); anything else — no command, ``--help``,
``--version``, a mistyped command — builds the full parser as before.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import UserError
from .knowledge import KnowledgeError

COMMAND_MODULES = ["diagnose", "check", "explain", "kb", "snapshot", "verify", "apply", "estimate", "plan"]
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
    except (UserError, KnowledgeError) as exc:
        print(f"memtune: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
